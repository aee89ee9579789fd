/* http_client.c: libcurl easy handles wrapped for gpuorch's request/reply calls. */
#include "net/http_client.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/* A server list: the agent and the CLI may name every server of an HA pair; a standby
 * answers 307 to the leader (followed here, its origin remembered) or, while no server
 * leads, 503 with X-Gpuorch-Role: standby (the next server is tried). */
#define MAX_BASES 8

struct HttpClient {
    CURL *curl;
    char *bases[MAX_BASES]; /* as given, without a trailing slash */
    size_t n_bases;
    size_t cur;   /* the base the last reply came from */
    char *leader; /* the origin a standby sent us to, tried first; NULL: none */
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

static bool is_http_url(const char *u, size_t n)
{
    return (n > 7 && !strncmp(u, "http://", 7)) || (n > 8 && !strncmp(u, "https://", 8));
}

int http_client_new(const char *base_url, const char *token, long timeout_ms, HttpClient **ret)
{
    if (!base_url)
        return -EINVAL;
    pthread_once(&curl_once, curl_init_once);
    HttpClient *h = calloc(1, sizeof(*h));
    if (!h)
        return -ENOMEM;
    int r = 0;
    for (const char *p = base_url; !r;) {
        size_t n = strcspn(p, ",");
        while (n > 0 && p[n - 1] == '/')
            n--;
        if (!is_http_url(p, n) || memchr(p, ' ', n) || h->n_bases == MAX_BASES)
            r = -EINVAL;
        else if (!(h->bases[h->n_bases++] = strndup(p, n)))
            r = -ENOMEM;
        p += strcspn(p, ",");
        if (!*p++)
            break;
    }
    h->curl = r ? NULL : curl_easy_init();
    if (!r && token && *token) {
        size_t n = strlen(token) + 32;
        if ((h->bearer = malloc(n)))
            snprintf(h->bearer, n, "Authorization: Bearer %s", token);
    }
    if (!r && (!h->curl || (token && *token && !h->bearer)))
        r = -ENOMEM;
    if (r) {
        http_client_free(h);
        return r;
    }
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
    for (size_t i = 0; i < h->n_bases; i++)
        free(h->bases[i]);
    free(h->leader);
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

/* What one attempt's reply headers say, besides the reply itself. */
typedef struct Heard {
    HttpReply *reply;
    char location[512];
    bool standby; /* X-Gpuorch-Role: standby */
} Heard;

/* The value of header `key:` in one header line, trimmed, into out (cut to size). */
static bool header_value(const char *data, size_t len, const char *key, char *out, size_t size)
{
    size_t kl = strlen(key);
    if (len <= kl || strncasecmp(data, key, kl))
        return false;
    const char *v = data + kl;
    while (*v == ' ')
        v++;
    size_t vl = len - (size_t)(v - data);
    while (vl > 0 && (v[vl - 1] == '\r' || v[vl - 1] == '\n' || v[vl - 1] == ' '))
        vl--;
    if (vl >= size)
        vl = size - 1;
    memcpy(out, v, vl);
    out[vl] = '\0';
    return true;
}

static size_t on_header(char *data, size_t size, size_t n, void *arg)
{
    Heard *hd = arg;
    size_t len = size * n;
    char role[16];
    header_value(data, len, "content-type:", hd->reply->content_type,
                 sizeof(hd->reply->content_type));
    header_value(data, len, "location:", hd->location, sizeof(hd->location));
    if (header_value(data, len, "x-gpuorch-role:", role, sizeof(role)))
        hd->standby = !strcasecmp(role, "standby");
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

/* The origin (scheme://host[:port]) of an absolute http(s) URL, malloc'd, or NULL. */
static char *origin_of(const char *url)
{
    const char *host = strstr(url, "://");
    if (!host || !is_http_url(url, strlen(url)))
        return NULL;
    host += 3;
    size_t n = (size_t)(host - url) + strcspn(host, "/?#");
    return n > (size_t)(host - url) ? strndup(url, n) : NULL;
}

/* One request to one base. 0 when a reply came; else the curl error as an errno, with
 * *sent set when the request may have reached the server. */
static int attempt(HttpClient *h, const char *base, const char *method, const char *path,
                   struct curl_slist *headers, const char *body, size_t len, Heard *hd, bool *sent,
                   Buf *err)
{
    HttpReply *ret = hd->reply;
    buf_reset(&ret->body);
    ret->status = 0;
    ret->content_type[0] = '\0';
    hd->location[0] = '\0';
    hd->standby = false;
    Buf url = {0};
    buf_printf(&url, "%s%s", base, path);
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
    curl_easy_setopt(c, CURLOPT_HEADERDATA, hd);
    if (body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    } else if (!strcmp(method, "GET")) {
        curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
    }
    CURLcode rc = curl_easy_perform(c);
    int r = 0;
    if (rc != CURLE_OK) {
        /* connected, the request may have been taken; not connected, it was not */
        curl_off_t connect_us = 0;
        curl_easy_getinfo(c, CURLINFO_CONNECT_TIME_T, &connect_us);
        *sent = connect_us > 0 && rc != CURLE_COULDNT_CONNECT;
        r = rc == CURLE_COULDNT_CONNECT      ? -ECONNREFUSED
            : rc == CURLE_OPERATION_TIMEDOUT ? -ETIMEDOUT
            : rc == CURLE_OUT_OF_MEMORY      ? -ENOMEM
                                             : -EIO;
        if (err)
            buf_printf(err, "cannot reach %s at %s: %s", h->peer ? h->peer : "the gpuorch server",
                       base, curl_easy_strerror(rc));
    } else {
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &ret->status);
        if (ret->body.oom) {
            r = -ENOMEM;
            if (err)
                buf_printf(err, "out of memory reading the reply of %s", base);
        }
    }
    buf_free(&url);
    return r;
}

/* How many times one request goes round the server list before giving up, and how long
 * it waits between rounds: long enough for a standby to take over (docs/ha.md). */
#define ROUNDS        20
#define ROUND_WAIT_MS 500
#define MAX_REDIRECTS 3

int http_request_headers(HttpClient *h, const char *method, const char *path,
                         const char *const *extra, const char *content_type, const char *body,
                         size_t len, HttpReply *ret, Buf *err)
{
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

    /* One server: as before, one attempt and a 307 followed. A list: each server in
     * turn, from the one that answered last, while they refuse connections or stand by
     * without a leader; a request that may have reached a server is not sent again,
     * unless it is a GET. */
    bool safe = !strcmp(method, "GET") || !strcmp(method, "HEAD");
    size_t rounds = h->n_bases > 1 ? ROUNDS : 1, tries = 0, redirects = 0;
    Heard hd = {.reply = ret};
    Buf last = {0};
    char *dead = NULL; /* a leader we were sent to that did not answer this time */
    int r = 0;
    for (;;) {
        const char *base = h->leader ? h->leader : h->bases[h->cur];
        bool sent = false;
        buf_reset(&last);
        r = attempt(h, base, method, path, headers, body, len, &hd, &sent, &last);
        bool redirect = r == 0 && (ret->status == 307 || ret->status == 308) && hd.location[0];
        if (redirect) {
            char *o = origin_of(hd.location);
            /* a standby may still name a leader that just died: not followed again */
            if (o && redirects < MAX_REDIRECTS && (!dead || strcmp(o, dead))) {
                free(h->leader);
                h->leader = o;
                redirects++;
                continue;
            }
            free(o);
        }
        bool next = (r < 0 && r != -ENOMEM && (!sent || safe)) ||
                    (r == 0 && hd.standby && (ret->status == 503 || redirect));
        if (!next)
            break;
        if (h->leader) { /* the leader we were sent to is gone: back to the list */
            free(dead);
            dead = h->leader;
            h->leader = NULL;
        }
        if (++tries >= rounds * h->n_bases)
            break;
        h->cur = (h->cur + 1) % h->n_bases;
        if (tries % h->n_bases == 0) {
            struct timespec ts = {.tv_sec = 0, .tv_nsec = ROUND_WAIT_MS * 1000000L};
            nanosleep(&ts, NULL);
        }
    }
    free(dead);
    if (r < 0 && err)
        buf_append(err, last.data, last.len);
    buf_free(&last);
    curl_slist_free_all(headers);
    return r;
}
