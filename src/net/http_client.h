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

/* base_url: "http://127.0.0.1:8080" (a trailing slash is fine), or a comma-separated
 * list of up to 8 such URLs, the servers of one HA group (docs/ha.md); token may be
 * NULL. timeout_ms bounds each attempt (0: 30 s). 0, -EINVAL for a URL that is not
 * http(s)://..., or -ENOMEM. */
int http_client_new(const char *base_url, const char *token, long timeout_ms, HttpClient **ret);
void http_client_free(HttpClient *h);

/* What error messages call the peer: "the gpuorch server" unless set ("the AWS
 * instance metadata service"). 0 or -ENOMEM. */
int http_client_set_peer(HttpClient *h, const char *peer);

/* method "GET", "POST", "PUT", "PATCH", "DELETE"; path starts with '/' and may carry a
 * query. body may be NULL. Returns 0 when a reply came (whatever its status; *ret is
 * reset first), or a negative errno (-ECONNREFUSED when nothing listens, -ETIMEDOUT,
 * -EIO otherwise) with err saying what failed, naming the server.
 * A 307 or 308 (a standby naming the leader) is followed, up to 3 times, and its origin
 * used for the next requests. With a list of servers, one that cannot be reached, or
 * that stands by with no leader to name (503, X-Gpuorch-Role: standby), is passed over
 * for the next, for up to 20 rounds 0.5 s apart; a request that may have reached a
 * server is sent to no other unless it is a GET or HEAD (it is never taken twice). */
int http_request(HttpClient *h, const char *method, const char *path, const char *content_type,
                 const char *body, size_t len, HttpReply *ret, Buf *err);
/* http_request with more headers: headers is a NULL-terminated list of "Name: value"
 * lines (NULL: none), for services that want their own (cloud metadata services). */
int http_request_headers(HttpClient *h, const char *method, const char *path,
                         const char *const *headers, const char *content_type, const char *body,
                         size_t len, HttpReply *ret, Buf *err);
