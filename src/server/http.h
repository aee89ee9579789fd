/* http.h: the server's HTTP front: libmicrohttpd underneath, requests collected whole
 * (bodies up to HTTP_MAX_BODY), the bearer token resolved to a Caller, routed by method
 * and path pattern to a handler, and replies built as JSON or text. Handlers run on
 * the daemon's worker threads; they take the state lock themselves where they read or
 * change the state (src/server/state.h). */
#pragma once

#include "server/state.h"
#include "util/buf.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#define HTTP_MAX_BODY   (1u << 20)
#define HTTP_MAX_PARAMS 4

typedef struct HttpRequest {
    const char *method;
    const char *path;         /* without the query */
    const char *content_type; /* "" when none */
    const char *body;         /* NUL-terminated copy of the body ("" when none) */
    size_t body_len;
    Caller who;                          /* the token's owner (public routes: zeroed) */
    const char *params[HTTP_MAX_PARAMS]; /* path parameters, in pattern order */
    void *conn;                          /* struct MHD_Connection *, for http_query */
} HttpRequest;

typedef struct HttpResponse {
    int status;
    Buf body;
    const char *content_type; /* static string; NULL: application/json */
} HttpResponse;

typedef void (*HttpHandler)(Server *s, const HttpRequest *rq, HttpResponse *rp);

/* A query argument ("?state=pending"), decoded, or NULL. */
const char *http_query(const HttpRequest *rq, const char *key);
/* A request header ("Accept"), or NULL. */
const char *http_header(const HttpRequest *rq, const char *key);

/* Reply with a JSON value (the reference is stolen), or {"error": "..."}. */
void http_reply_json(HttpResponse *rp, int status, json_t *body);
void http_reply_error(HttpResponse *rp, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void http_reply_text(HttpResponse *rp, int status, const char *content_type, const char *text,
                     size_t len);

/* Parse a JSON object body; on failure replies 400 (naming the line and column) and
 * returns NULL. */
json_t *http_body_json(const HttpRequest *rq, HttpResponse *rp);

typedef struct HttpServer HttpServer;

/* Split a listen address, "HOST:PORT", "[IPV6]:PORT" or ":PORT" (every address), into
 * its host ("" for every address) and port (malloc'd). -EINVAL with err set when it is
 * malformed. */
int http_parse_listen(const char *listen, char **ret_host, char **ret_port, Buf *err);

/* A bound, listening socket, made before the server opens anything else: a port that is
 * taken is found before the store is touched (whose database may be the one the server
 * holding the port uses). */
typedef struct HttpListener {
    int fd; /* -1 once handed to the server or closed */
    bool v6;
} HttpListener;

/* Bind and listen on "HOST:PORT" (IPv4 or [IPv6]). 0 or a negative errno with err set
 * ("cannot listen on 127.0.0.1:8080: Address already in use: the port is taken; ..."). */
int http_listen(const char *listen, HttpListener *ret, Buf *err);
void http_listener_close(HttpListener *l);

/* What one client may hold of the server. */
typedef struct HttpLimits {
    unsigned conns_per_ip; /* open connections from one address; 0: no bound of its own */
    int64_t headers_ms;    /* a request's headers arrive within this of the connection
                              opening (or of the wait for its next request ending); a body or
                              a reply has this plus its length at 32 KiB/s */
} HttpLimits;

#define HTTP_CONNS_PER_IP 64 /* the default */

/* Serve on l's socket (taken over on success) with a pool of worker threads, serving the
 * portal's files from web_dir at "/" and "/web/..." (NULL: none, those paths 404), with
 * lim (NULL: HTTP_CONNS_PER_IP and 10 s for headers). 0 or a negative errno with err
 * set. */
int http_server_start(Server *s, HttpListener *l, const char *web_dir, const HttpLimits *lim,
                      HttpServer **ret, Buf *err);
/* The port it listens on (the one the system chose for port 0), or -1. */
int http_server_port(const HttpServer *h);
void http_server_stop(HttpServer *h);
