/* http_client.h: the HTTP client the agent and the CLI talk to the server with
 * (libcurl underneath): one handle per server, the bearer token on every request,
 * the reply body collected into a buffer. Connections are reused between requests on
 * the same handle. Not thread-safe: one handle per thread. */
#pragma once

#include "util/buf.h"

#include <stddef.h>

typedef struct HttpClient HttpClient;

typedef struct HttpReply {
    long status; /* HTTP status, 0 before a reply */
    Buf body;
    char content_type[64];
} HttpReply;

void http_reply_free(HttpReply *r);

/* base_url: "http://127.0.0.1:8080" (a trailing slash is fine); token may be NULL.
 * timeout_ms bounds each request (0: 30 s). 0, -EINVAL for a URL that is not
 * http(s)://..., or -ENOMEM. */
int http_client_new(const char *base_url, const char *token, long timeout_ms, HttpClient **ret);
void http_client_free(HttpClient *h);

/* What error messages call the peer: "the gpuorch server" unless set ("the AWS
 * instance metadata service"). 0 or -ENOMEM. */
int http_client_set_peer(HttpClient *h, const char *peer);

/* method "GET", "POST", "PUT", "PATCH", "DELETE"; path starts with '/' and may carry a
 * query. body may be NULL. Returns 0 when a reply came (whatever its status; *ret is
 * reset first), or a negative errno (-ECONNREFUSED when nothing listens, -ETIMEDOUT,
 * -EIO otherwise) with err saying what failed, naming the server. */
int http_request(HttpClient *h, const char *method, const char *path, const char *content_type,
                 const char *body, size_t len, HttpReply *ret, Buf *err);
/* http_request with more headers: headers is a NULL-terminated list of "Name: value"
 * lines (NULL: none), for services that want their own (cloud metadata services). */
int http_request_headers(HttpClient *h, const char *method, const char *path,
                         const char *const *headers, const char *content_type, const char *body,
                         size_t len, HttpReply *ret, Buf *err);
