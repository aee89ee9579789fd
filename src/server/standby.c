/* standby.c: the HTTP answers of a standby server (standby.h): a small libmicrohttpd
 * daemon on the server's listening socket, which the leader's daemon takes over when this
 * server comes to lead. The leader's URL is read from the store at most every half
 * second. */
#include "server/standby.h"

#include "util/log.h"

#include <errno.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define STANDBY_THREADS      2
#define STANDBY_CONN_TIMEOUT 10  /* seconds */
#define LEADER_CACHE_MS      500 /* how stale the leader's URL may be */

struct Standby {
    struct MHD_Daemon *d;
    Store *st;
    char *self;
    pthread_mutex_t lock; /* the cache below */
    char leader[512];     /* "" when none is known */
    int64_t leader_read_ms;
};

/* What one request needs: its URI as sent (with the query), for the Location. */
typedef struct Pending {
    char *uri;
    bool called; /* the first call, with the headers only, was answered */
} Pending;

/* The leader's URL into out ("" when none can be named). */
static void leader_url(Standby *sb, char *out, size_t n)
{
    pthread_mutex_lock(&sb->lock);
    int64_t now = server_mono_ms();
    if (!sb->leader_read_ms || now - sb->leader_read_ms >= LEADER_CACHE_MS) {
        char url[sizeof(sb->leader)] = "";
        int r = store_leader(sb->st, url, sizeof(url), NULL);
        /* a row naming this server is left from its own earlier run */
        if (r < 0 || (sb->self && !strcmp(url, sb->self)))
            url[0] = '\0';
        memcpy(sb->leader, url, sizeof(url));
        sb->leader_read_ms = now;
    }
    snprintf(out, n, "%s", sb->leader);
    pthread_mutex_unlock(&sb->lock);
}

static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn)
{
    (void)cls;
    (void)conn;
    Pending *p = calloc(1, sizeof(*p));
    if (p)
        p->uri = strdup(uri);
    return p;
}

static enum MHD_Result reply(struct MHD_Connection *conn, unsigned status, const char *type,
                             const char *body, const char *location)
{
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_MUST_COPY);
    if (!resp)
        return MHD_NO;
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    MHD_add_response_header(resp, "X-Gpuorch-Role", "standby");
    if (location)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_LOCATION, location);
    if (status == MHD_HTTP_SERVICE_UNAVAILABLE)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, "1");
    enum MHD_Result r = MHD_queue_response(conn, status, resp);
    MHD_destroy_response(resp);
    return r;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
    (void)version;
    (void)upload_data;
    Standby *sb = cls;
    Pending *p = *con_cls;
    /* the reply waits for the whole body: one sent while the client is still sending
     * would go with a reset connection, and the client would not learn where to go */
    if (p && !p->called) {
        p->called = true;
        return MHD_YES;
    }
    if (*upload_data_size) {
        *upload_data_size = 0; /* the body goes to the leader, sent again by the client */
        return MHD_YES;
    }
    static const char text[] = "text/plain; charset=utf-8";
    bool get = !strcmp(method, "GET") || !strcmp(method, "HEAD");
    if (get && !strcmp(url, "/healthz"))
        return reply(conn, MHD_HTTP_OK, text, "ok (standby)\n", NULL);
    if (get && !strcmp(url, "/metrics"))
        return reply(conn, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8",
                     "# HELP gpuorch_leader 1 when this server leads its store (docs/ha.md).\n"
                     "# TYPE gpuorch_leader gauge\ngpuorch_leader 0\n",
                     NULL);
    char leader[512];
    leader_url(sb, leader, sizeof(leader));
    if (get && !strcmp(url, "/readyz") && !*leader)
        return reply(conn, MHD_HTTP_SERVICE_UNAVAILABLE, text,
                     "standby: no server leads the store yet\n", NULL);
    if (!*leader)
        return reply(conn, MHD_HTTP_SERVICE_UNAVAILABLE, "application/json",
                     "{\"error\": \"this server stands by and no server leads yet; ask again in "
                     "a moment\"}",
                     NULL);
    if (get && !strcmp(url, "/readyz")) {
        Buf b = {0};
        buf_printf(&b, "standby: the leader is %s\n", leader);
        enum MHD_Result r = reply(conn, MHD_HTTP_SERVICE_UNAVAILABLE, text,
                                  b.oom ? "standby\n" : buf_str(&b), NULL);
        buf_free(&b);
        return r;
    }
    Buf loc = {0}, body = {0};
    buf_printf(&loc, "%s%s", leader, p && p->uri ? p->uri : url);
    buf_printf(&body, "{\"error\": \"this server stands by; the leader is %s\"}", leader);
    enum MHD_Result r = loc.oom || body.oom
                            ? MHD_NO
                            : reply(conn, MHD_HTTP_TEMPORARY_REDIRECT, "application/json",
                                    buf_str(&body), buf_str(&loc));
    buf_free(&loc);
    buf_free(&body);
    return r;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)conn;
    (void)toe;
    Pending *p = *con_cls;
    if (p) {
        free(p->uri);
        free(p);
    }
    *con_cls = NULL;
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));
static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char msg[256];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    size_t n = strlen(msg);
    while (n && msg[n - 1] == '\n')
        msg[--n] = '\0';
    log_info("event=standby_http message=\"%s\"", msg);
}

int standby_start(HttpListener *l, Store *st, const char *self_url, Standby **ret, Buf *err)
{
    Standby *sb = calloc(1, sizeof(*sb));
    if (!sb || (self_url && !(sb->self = strdup(self_url)))) {
        free(sb);
        return -ENOMEM;
    }
    sb->st = st;
    pthread_mutex_init(&sb->lock, NULL);
    /* MHD_USE_ITC: the listening socket can be handed back (MHD_quiesce_daemon) */
    unsigned flags =
        MHD_USE_AUTO | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG | MHD_USE_ITC;
    if (l->v6)
        flags |= MHD_USE_IPv6;
    sb->d = MHD_start_daemon(flags, 0, NULL, NULL, on_request, sb, MHD_OPTION_EXTERNAL_LOGGER,
                             on_mhd_log, sb, MHD_OPTION_LISTEN_SOCKET, (MHD_socket)l->fd,
                             MHD_OPTION_THREAD_POOL_SIZE, (unsigned)STANDBY_THREADS,
                             MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)STANDBY_CONN_TIMEOUT,
                             MHD_OPTION_URI_LOG_CALLBACK, on_uri, sb, MHD_OPTION_NOTIFY_COMPLETED,
                             on_completed, sb, MHD_OPTION_END);
    if (!sb->d) {
        pthread_mutex_destroy(&sb->lock);
        free(sb->self);
        free(sb);
        buf_puts(err, "cannot serve HTTP as a standby: the HTTP daemon did not start");
        return -EIO;
    }
    l->fd = -1;
    *ret = sb;
    return 0;
}

void standby_stop(Standby *sb, HttpListener *l)
{
    if (!sb)
        return;
    MHD_socket fd = MHD_quiesce_daemon(sb->d);
    MHD_stop_daemon(sb->d);
    if (l)
        l->fd = fd == MHD_INVALID_SOCKET ? -1 : (int)fd;
    else if (fd != MHD_INVALID_SOCKET)
        close(fd);
    pthread_mutex_destroy(&sb->lock);
    free(sb->self);
    free(sb);
}
