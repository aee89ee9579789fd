/* http_client.c: libcurl easy handles wrapped for gpuorch's request/reply calls. */
#include "net/http_client.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct HttpClient {
    CURL *curl;
    char *base;   /* without a trailing slash */
    char *bearer; /* "Authorization: Bearer ..." or NULL */
    char *peer;   /* what messages call it; NULL: the gpuorch server */
    long timeout_ms;
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init_once(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

void http_reply_free(HttpReply *r)
{
    if (r)
        buf_free(&r->body);
}

int http_client_new(const char *base_url, const char *token, long timeout_ms, HttpClient **ret)
{
    if (!base_url || (strncmp(base_url, "http://", 7) && strncmp(base_url, "https://", 8)))
        return -EINVAL;
    pthread_once(&curl_once, curl_init_once);
    HttpClient *h = calloc(1, sizeof(*h));
    if (!h)
        return -ENOMEM;
    h->base = strdup(base_url);
    h->curl = curl_easy_init();
    if (token && *token) {
        size_t n = strlen(token) + 32;
        h->bearer = malloc(n);
        if (h->bearer)
            snprintf(h->bearer, n, "Authorization: Bearer %s", token);
    }
    if (!h->base || !h->curl || (token && *token && !h->bearer)) {
        http_client_free(h);
        return -ENOMEM;
    }
    size_t len = strlen(h->base);
    while (len > 0 && h->base[len - 1] == '/')
        h->base[--len] = '\0';
    h->timeout_ms = timeout_ms > 0 ? timeout_ms : 30000;
    *ret = h;
    return 0;
}

void http_client_free(HttpClient *h)
{
    if (!h)
        return;
    if (h->curl)
        curl_easy_cleanup(h->curl);
    free(h->base);
    free(h->bearer);
    free(h->peer);
    free(h);
}

static size_t on_body(char *data, size_t size, size_t n, void *arg)
{
    Buf *b = arg;
    buf_append(b, data, size * n);
    return b->oom ? 0 : size * n;
}

static size_t on_header(char *data, size_t size, size_t n, void *arg)
{
    HttpReply *r = arg;
    size_t len = size * n;
    static const char key[] = "content-type:";
    if (len > sizeof(key) - 1 && !strncasecmp(data, key, sizeof(key) - 1)) {
        const char *v = data + sizeof(key) - 1;
        while (*v == ' ')
            v++;
        size_t vl = len - (size_t)(v - data);
        while (vl > 0 && (v[vl - 1] == '\r' || v[vl - 1] == '\n'))
            vl--;
        if (vl >= sizeof(r->content_type))
            vl = sizeof(r->content_type) - 1;
        memcpy(r->content_type, v, vl);
        r->content_type[vl] = '\0';
    }
    return len;
}

int http_client_set_peer(HttpClient *h, const char *peer)
{
    char *p = strdup(peer);
    if (!p)
        return -ENOMEM;
    free(h->peer);
    h->peer = p;
    return 0;
}

int http_request(HttpClient *h, const char *method, const char *path, const char *content_type,
                 const char *body, size_t len, HttpReply *ret, Buf *err)
{
    return http_request_headers(h, method, path, NULL, content_type, body, len, ret, err);
}

int http_request_headers(HttpClient *h, const char *method, const char *path,
                         const char *const *extra, const char *content_type, const char *body,
                         size_t len, HttpReply *ret, Buf *err)
{
    buf_reset(&ret->body);
    ret->status = 0;
    ret->content_type[0] = '\0';

    Buf url = {0};
    buf_printf(&url, "%s%s", h->base, path);
    struct curl_slist *headers = NULL;
    if (h->bearer)
        headers = curl_slist_append(headers, h->bearer);
    if (content_type) {
        char ct[128];
        snprintf(ct, sizeof(ct), "Content-Type: %s", content_type);
        headers = curl_slist_append(headers, ct);
    }
    for (size_t i = 0; extra && extra[i]; i++)
        headers = curl_slist_append(headers, extra[i]);
    headers = curl_slist_append(headers, "Expect:"); /* no 100-continue round trip */

    CURL *c = h->curl;
    curl_easy_reset(c);
    curl_easy_setopt(c, CURLOPT_URL, buf_str(&url));
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, h->timeout_ms);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, h->timeout_ms < 5000 ? h->timeout_ms : 5000L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &ret->body);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, ret);
    if (body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    } else if (!strcmp(method, "GET")) {
        curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
    }
    CURLcode rc = curl_easy_perform(c);
    curl_slist_free_all(headers);
    int r = 0;
    if (rc != CURLE_OK) {
        r = rc == CURLE_COULDNT_CONNECT      ? -ECONNREFUSED
            : rc == CURLE_OPERATION_TIMEDOUT ? -ETIMEDOUT
            : rc == CURLE_OUT_OF_MEMORY      ? -ENOMEM
                                             : -EIO;
        if (err)
            buf_printf(err, "cannot reach %s at %s: %s", h->peer ? h->peer : "the gpuorch server",
                       h->base, curl_easy_strerror(rc));
    } else {
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &ret->status);
        if (ret->body.oom) {
            r = -ENOMEM;
            if (err)
                buf_printf(err, "out of memory reading the reply of %s", h->base);
        }
    }
    buf_free(&url);
    return r;
}
