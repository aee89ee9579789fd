/* http.c: the HTTP front of the server on libmicrohttpd: a pool of worker threads
 * polling one listening socket, each request's body collected whole (up to
 * HTTP_MAX_BODY), routed by method and path pattern, its bearer token resolved and its
 * role checked before the body is even kept, then handed to the api_*.c handler.
 *
 * Routing, authentication and the size limit are decided here once, so a handler
 * never sees a request it may not serve. Only server errors (5xx) are logged: a
 * benchmark sends thousands of requests a second; every mutating request also goes to
 * the audit log (audit.h), from the one hook in on_request.
 *
 * Slow clients: libmicrohttpd bounds connections per client address and cuts one that
 * is silent for HTTP_CONN_TIMEOUT, but a client sending a byte every few seconds is
 * never silent. So every connection also has a deadline for what it is doing (its
 * request's headers, its body, its reply, the wait for its next request), kept in a
 * list the reaper thread walks twice a second, shutting down the socket of one past
 * its deadline; libmicrohttpd then closes it as it would a client that hung up. The
 * list's lock is also taken by the close notification, which libmicrohttpd sends
 * before it closes the socket, so the reaper never shuts down a number the system has
 * given to another connection. */
#include "server/http.h"

#include "server/api.h"
#include "server/audit.h"
#include "server/auth.h"
#include "server/web.h"
#include "util/log.h"
#include "util/macro.h"

#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* More threads than cores: a submission's handler blocks until the store's commit is
 * durable, and the requests waiting meanwhile on other threads share that commit. */
#define HTTP_THREADS        8
#define HTTP_CONN_LIMIT     1000
#define HTTP_CONN_TIMEOUT   30 /* seconds a connection may stay silent */
#define HTTP_LISTEN_BACKLOG 1024
/* The deadlines of slow clients (see the top of the file). A request's headers within
 * HTTP_HEADERS_MS of its connection opening (or of the wait for it beginning); a body
 * or a reply within HTTP_HEADERS_MS plus its length at HTTP_MIN_RATE bytes a second, so
 * a 1 MiB body has 42 s and a 4 MiB log reply 138 s. */
#define HTTP_HEADERS_MS 10000
#define HTTP_MIN_RATE   (32u << 10)
#define HTTP_REAP_MS    500
/* A body declared past this is answered 413 on its headers and the connection closed:
 * no honest client sends it. Between HTTP_MAX_BODY and this the body is read and dropped
 * first, so that a client still writing it does not lose the reply to a reset. */
#define HTTP_ABSURD_BODY (16u << 20)

typedef struct Route {
    const char *method;
    const char *pattern; /* "{}" matches one non-empty path segment, "{*}" the rest */
    AuthAction action;
    HttpHandler handler; /* NULL: a static file of the portal (web.h) */
} Route;

static const Route routes[] = {
    {"GET", "/healthz", ACT_PUBLIC, api_healthz},
    {"GET", "/readyz", ACT_PUBLIC, api_readyz},
    {"GET", "/metrics", ACT_PUBLIC, api_metrics},
    {"GET", "/", ACT_PUBLIC, NULL},
    {"GET", "/web/{*}", ACT_PUBLIC, NULL},
    {"GET", "/api/v1/whoami", ACT_READ, api_whoami},
    {"GET", "/api/v1/utilization", ACT_READ, api_utilization},
    {"GET", "/api/v1/learned", ACT_READ, api_learned},
    {"DELETE", "/api/v1/learned/{*}", ACT_READ, api_learned_reset},
    {"POST", "/api/v1/jobs", ACT_SUBMIT, api_jobs_submit},
    {"GET", "/api/v1/jobs", ACT_READ, api_jobs_list},
    {"GET", "/api/v1/jobs/{}", ACT_READ, api_job_get},
    {"DELETE", "/api/v1/jobs/{}", ACT_CANCEL, api_job_cancel},
    {"PATCH", "/api/v1/jobs/{}", ACT_PRIORITY, api_job_patch},
    {"GET", "/api/v1/jobs/{}/logs", ACT_READ, api_job_logs},
    {"GET", "/api/v1/nodes", ACT_READ, api_nodes_list},
    {"GET", "/api/v1/teams", ACT_READ, api_teams_list},
    {"GET", "/api/v1/teams/{}", ACT_READ, api_team_get},
    {"PUT", "/api/v1/teams/{}", ACT_ADMIN, api_team_put},
    {"GET", "/api/v1/usage", ACT_READ, api_usage},
    {"POST", "/api/v1/tokens", ACT_ADMIN, api_tokens_create},
    {"GET", "/api/v1/tokens", ACT_READ, api_tokens_list},
    {"DELETE", "/api/v1/tokens/{}", ACT_ADMIN, api_tokens_revoke},
    {"POST", "/api/v1/agent/heartbeat", ACT_AGENT, api_agent_heartbeat},
    {"POST", "/api/v1/agent/logs/{}/{}", ACT_AGENT, api_agent_logs},
};

/* One connection's deadline, from its open notification to its close. */
typedef struct Conn {
    struct Conn *prev, *next;
    int fd;
    int64_t deadline_ms; /* monotonic; past it the socket is shut down */
    bool cut;            /* shut down already */
} Conn;

struct HttpServer {
    struct MHD_Daemon *d;
    Server *s;
    AuthCache *cache;
    Audit *audit;
    char *web_dir; /* the portal's files, or NULL: none served */
    HttpLimits lim;
    pthread_mutex_t conns_lock; /* conns, every Conn's fields, stop, log_* */
    pthread_cond_t wake;
    Conn *conns;
    bool stop;
    bool reaper_started;
    pthread_t reaper;
    uint64_t n_cut;       /* connections cut at their deadline, ever */
    int64_t log_sec;      /* the second of libmicrohttpd's last message written */
    unsigned log_dropped; /* its messages left out since */
};

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* How long moving len bytes may take a slow but honest client. */
static int64_t transfer_ms(const HttpServer *h, uint64_t len)
{
    return h->lim.headers_ms + (int64_t)(len * 1000 / HTTP_MIN_RATE);
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    HttpServer *h = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *i =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        Conn *c = i ? calloc(1, sizeof(*c)) : NULL;
        if (!c)
            return; /* no deadline for this one: the idle timeout still holds */
        c->fd = i->connect_fd;
        c->deadline_ms = mono_ms() + h->lim.headers_ms;
        pthread_mutex_lock(&h->conns_lock);
        c->next = h->conns;
        if (h->conns)
            h->conns->prev = c;
        h->conns = c;
        pthread_mutex_unlock(&h->conns_lock);
        *socket_context = c;
        return;
    }
    Conn *c = *socket_context;
    if (!c)
        return;
    pthread_mutex_lock(&h->conns_lock);
    if (c->prev)
        c->prev->next = c->next;
    else
        h->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    pthread_mutex_unlock(&h->conns_lock);
    free(c);
    *socket_context = NULL;
}

/* The connection's next deadline, ms from now. */
static void conn_deadline(HttpServer *h, struct MHD_Connection *conn, int64_t in_ms)
{
    const union MHD_ConnectionInfo *i =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    Conn *c = i ? i->socket_context : NULL;
    if (!c)
        return;
    pthread_mutex_lock(&h->conns_lock);
    c->deadline_ms = mono_ms() + in_ms;
    pthread_mutex_unlock(&h->conns_lock);
}

static void *reaper_main(void *arg)
{
    HttpServer *h = arg;
    pthread_mutex_lock(&h->conns_lock);
    while (!h->stop) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += HTTP_REAP_MS * 1000000L;
        ts.tv_sec += ts.tv_nsec / 1000000000L;
        ts.tv_nsec %= 1000000000L;
        pthread_cond_timedwait(&h->wake, &h->conns_lock, &ts);
        int64_t now = mono_ms();
        unsigned cut = 0;
        for (Conn *c = h->conns; c && !h->stop; c = c->next) {
            if (c->cut || c->deadline_ms > now)
                continue;
            /* the socket is still this connection's: its close notification waits for
             * the lock held here */
            shutdown(c->fd, SHUT_RDWR);
            c->cut = true;
            cut++;
        }
        if (cut) {
            h->n_cut += cut;
            log_info("http event=deadline cut=%u total=%llu", cut, (unsigned long long)h->n_cut);
        }
    }
    pthread_mutex_unlock(&h->conns_lock);
    return NULL;
}

/* One request from its headers to its reply. */
typedef struct ReqCtx {
    const Route *route;
    Caller who;
    int refuse; /* a status decided from the headers (404, 405, 401, 403); 0: none */
    char refuse_msg[160];
    char allow[64]; /* 405: the methods the path takes */
    bool too_big;
    bool answered; /* a reply was queued on the headers: later calls only drop data */
    Buf body;
    char *params_buf; /* the path parameters, NUL-separated */
    const char *params[HTTP_MAX_PARAMS];
} ReqCtx;

/* Does path match pattern? Parameters go to ctx (when given) as offsets into path. */
static bool route_match(const char *pattern, const char *path, size_t ret_off[HTTP_MAX_PARAMS],
                        size_t ret_len[HTTP_MAX_PARAMS], size_t *ret_n)
{
    const char *p = pattern, *q = path;
    size_t n = 0;
    while (*p) {
        if (!strcmp(p, "{*}")) {
            size_t len = strlen(q);
            if (!len || n == HTTP_MAX_PARAMS)
                return false;
            ret_off[n] = (size_t)(q - path);
            ret_len[n++] = len;
            *ret_n = n;
            return true;
        }
        if (p[0] == '{' && p[1] == '}') {
            size_t len = strcspn(q, "/");
            if (!len || n == HTTP_MAX_PARAMS)
                return false;
            ret_off[n] = (size_t)(q - path);
            ret_len[n++] = len;
            q += len;
            p += 2;
        } else if (*p++ != *q++) {
            return false;
        }
    }
    if (*q)
        return false;
    *ret_n = n;
    return true;
}

static const char *action_words(AuthAction a)
{
    switch (a) {
    case ACT_SUBMIT:
        return "submit jobs";
    case ACT_CANCEL:
        return "cancel jobs";
    case ACT_PRIORITY:
        return "change job priorities";
    case ACT_ADMIN:
        return "manage teams and tokens";
    default:
        return "do this";
    }
}

static void refuse(ReqCtx *ctx, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void refuse(ReqCtx *ctx, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx->refuse_msg, sizeof(ctx->refuse_msg), fmt, ap);
    va_end(ap);
    ctx->refuse = status;
}

/* Decide from the method, the path and the token what becomes of the request. */
static int route_request(HttpServer *h, struct MHD_Connection *conn, const char *method,
                         const char *url, ReqCtx *ctx)
{
    size_t off[HTTP_MAX_PARAMS], len[HTTP_MAX_PARAMS], n = 0;
    const Route *found = NULL;
    for (size_t i = 0; i < ARRAY_SIZE(routes); i++) {
        size_t o[HTTP_MAX_PARAMS], l[HTTP_MAX_PARAMS], k;
        if (!route_match(routes[i].pattern, url, o, l, &k))
            continue;
        if (!strcmp(routes[i].method, method)) {
            found = &routes[i];
            memcpy(off, o, sizeof(o));
            memcpy(len, l, sizeof(l));
            n = k;
            break;
        }
        size_t used = strlen(ctx->allow);
        snprintf(ctx->allow + used, sizeof(ctx->allow) - used, "%s%s", used ? ", " : "",
                 routes[i].method);
    }
    if (!found) {
        if (ctx->allow[0])
            refuse(ctx, 405, "%s is not allowed on %s (allowed: %s)", method, url, ctx->allow);
        else
            refuse(ctx, 404, "no such endpoint: %s", url);
        return 0;
    }
    ctx->route = found;
    if (n) {
        size_t total = 0;
        for (size_t i = 0; i < n; i++)
            total += len[i] + 1;
        ctx->params_buf = malloc(total);
        if (!ctx->params_buf)
            return -ENOMEM;
        char *w = ctx->params_buf;
        for (size_t i = 0; i < n; i++) {
            memcpy(w, url + off[i], len[i]);
            w[len[i]] = '\0';
            ctx->params[i] = w;
            w += len[i] + 1;
        }
    }
    if (found->action == ACT_PUBLIC)
        return 0;

    const char *authz = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization");
    int r = auth_cache_resolve(h->cache, h->s, authz, &ctx->who);
    if (r == -EACCES || r == -EKEYREVOKED || r == -EKEYEXPIRED) {
        refuse(ctx, 401, "%s", auth_refusal(r, authz));
        return 0;
    }
    if (r < 0) {
        refuse(ctx, 500, "cannot check the token: the store failed");
        return 0;
    }
    if (auth_may(ctx->who.role, found->action))
        return 0;
    if (ctx->who.role == ROLE_AGENT)
        refuse(ctx, 403, "an agent token may only use /api/v1/agent/...");
    else if (found->action == ACT_AGENT)
        refuse(ctx, 403, "only agent tokens may use /api/v1/agent/...");
    else
        refuse(ctx, 403, "a %s token may not %s", role_name(ctx->who.role),
               action_words(found->action));
    return 0;
}

static enum MHD_Result send_reply(struct MHD_Connection *conn, const char *method, const char *url,
                                  HttpResponse *rp, const char *allow)
{
    if (rp->body.oom || !rp->status) {
        buf_free(&rp->body);
        http_reply_error(rp, 500, rp->status ? "out of memory" : "the handler gave no reply");
    }
    if (rp->status >= 500)
        log_error("http method=%s path=%s status=%d body=%s", method, url, rp->status,
                  buf_str(&rp->body));
    size_t len = rp->body.len;
    char *data = rp->body.data ? buf_steal(&rp->body) : NULL;
    struct MHD_Response *resp =
        data ? MHD_create_response_from_buffer(len, data, MHD_RESPMEM_MUST_FREE)
             : MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (!resp) {
        free(data);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                            rp->content_type ? rp->content_type : "application/json");
    if (allow && *allow)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, allow);
    enum MHD_Result ret = MHD_queue_response(conn, (unsigned)rp->status, resp);
    MHD_destroy_response(resp);
    return ret;
}

/* The audit log's one hook: every reply is seen here with its caller. */
static void audit_reply(HttpServer *h, struct MHD_Connection *conn, const char *method,
                        const char *url, const ReqCtx *ctx, const HttpResponse *rp)
{
    bool authed = ctx->route && ctx->route->action != ACT_PUBLIC && ctx->refuse != 401;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    audit_request(h->audit, method, url, authed ? &ctx->who : NULL,
                  ctx->route && ctx->route->action == ACT_AGENT, rp, ci ? ci->client_addr : NULL,
                  server_now_ms());
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
    HttpServer *h = cls;
    ReqCtx *ctx = *con_cls;
    if (!ctx) {
        ctx = calloc(1, sizeof(*ctx));
        if (!ctx)
            return MHD_NO;
        *con_cls = ctx;
        if (route_request(h, conn, method, url, ctx) < 0)
            return MHD_NO;
        const char *cl =
            MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        uint64_t declared = cl ? strtoull(cl, NULL, 10) : 0;
        if (declared > HTTP_MAX_BODY)
            ctx->too_big = true;
        /* the headers are in; the body (of a length not declared: of the most kept) has
         * its own time */
        conn_deadline(h, conn, transfer_ms(h, cl && !ctx->too_big ? declared : HTTP_MAX_BODY));
        if (declared > HTTP_ABSURD_BODY) {
            HttpResponse rp = {0};
            if (ctx->refuse)
                http_reply_error(&rp, ctx->refuse, "%s", ctx->refuse_msg);
            else
                http_reply_error(&rp, 413, "request body is over 1 MiB");
            audit_reply(h, conn, method, url, ctx, &rp);
            ctx->answered = true;
            enum MHD_Result ret =
                send_reply(conn, method, url, &rp, ctx->refuse == 405 ? ctx->allow : NULL);
            buf_free(&rp.body);
            return ret;
        }
        return MHD_YES;
    }
    if (ctx->answered) {
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (*upload_data_size) {
        /* A refused or oversized request's body is read and dropped, never kept. */
        if (!ctx->refuse && !ctx->too_big) {
            if (ctx->body.len + *upload_data_size > HTTP_MAX_BODY) {
                ctx->too_big = true;
                buf_free(&ctx->body);
            } else {
                buf_append(&ctx->body, upload_data, *upload_data_size);
            }
        }
        *upload_data_size = 0;
        return MHD_YES;
    }

    HttpResponse rp = {0};
    if (server_diverged(h->s)) {
        /* memory is ahead of the store: nothing is told from it until the restart */
        http_reply_error(&rp, 503, "the server is restarting; ask again in a moment");
    } else if (ctx->refuse) {
        http_reply_error(&rp, ctx->refuse, "%s", ctx->refuse_msg);
    } else if (ctx->too_big) {
        http_reply_error(&rp, 413, "request body is over 1 MiB");
    } else if (ctx->body.oom) {
        http_reply_error(&rp, 500, "out of memory");
    } else {
        const char *ct =
            MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
        HttpRequest rq = {
            .method = method,
            .path = url,
            .content_type = ct ? ct : "",
            .body = buf_str(&ctx->body),
            .body_len = ctx->body.len,
            .who = ctx->who,
            .conn = conn,
        };
        memcpy(rq.params, ctx->params, sizeof(rq.params));
        if (ctx->route->handler)
            ctx->route->handler(h->s, &rq, &rp);
        else
            web_reply(h->web_dir, url, &rp);
    }
    audit_reply(h, conn, method, url, ctx, &rp);
    conn_deadline(h, conn, transfer_ms(h, rp.body.len));
    enum MHD_Result ret =
        send_reply(conn, method, url, &rp, ctx->refuse == 405 ? ctx->allow : NULL);
    buf_free(&rp.body);
    return ret;
}

static int hex_val(char c)
{
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* libmicrohttpd's unescaping of paths and query arguments, but for "%00": decoded, a NUL
 * would end the string there, so "/api/v1/teams/search%00x" would name team search.
 * It is left as the three characters, which match nothing. */
static size_t on_unescape(void *cls, struct MHD_Connection *conn, char *s)
{
    char *w = s;
    for (const char *r = s; *r;) {
        int hi = r[0] == '%' ? hex_val(r[1]) : -1, lo = hi >= 0 ? hex_val(r[2]) : -1;
        if (lo >= 0 && (hi || lo)) {
            *w++ = (char)(hi * 16 + lo);
            r += 3;
        } else {
            *w++ = *r++;
        }
    }
    *w = '\0';
    return (size_t)(w - s);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    HttpServer *h = cls;
    /* kept alive: the next request may wait the idle timeout, then has its headers' time */
    conn_deadline(h, conn, (int64_t)HTTP_CONN_TIMEOUT * 1000 + h->lim.headers_ms);
    ReqCtx *ctx = *con_cls;
    if (!ctx)
        return;
    buf_free(&ctx->body);
    free(ctx->params_buf);
    free(ctx);
    *con_cls = NULL;
    /* The daemon's top level for requests: one whose change memory made but the store
     * could not (server_diverge) was answered (500), and the process ends, so that a
     * restart reloads the durable state. */
    int err = server_diverged(h->s);
    if (err) {
        log_error("event=server_diverged error=%d action=exit", err);
        _exit(1);
    }
}

/* Does a libmicrohttpd message speak of what a client did (hung up, sent too little, came
 * too often) rather than of the server? */
static bool client_caused(const char *msg)
{
    static const char *const words[] = {
        "closed by remote", "connection closure", "limit",
        "from this IP",     "timed out",          "Connection reset"};
    for (size_t i = 0; i < ARRAY_SIZE(words); i++)
        if (strstr(msg, words[i]))
            return true;
    return false;
}

/* libmicrohttpd's logger hands over its own format string. Its messages come one per
 * connection, so a flood of slow clients would flood the log: at most one a second is
 * written, with the count of those left out since. */
static void on_mhd_log(void *cls, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));
static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    HttpServer *h = cls;
    char msg[256];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    size_t n = strlen(msg);
    while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
        msg[--n] = '\0';
    int64_t sec = mono_ms() / 1000;
    pthread_mutex_lock(&h->conns_lock);
    bool quiet = sec == h->log_sec;
    unsigned dropped = h->log_dropped;
    if (quiet) {
        h->log_dropped++;
    } else {
        h->log_sec = sec;
        h->log_dropped = 0;
    }
    pthread_mutex_unlock(&h->conns_lock);
    if (quiet)
        return;
    if (client_caused(msg))
        log_info("http client=\"%s\" left_out=%u", msg, dropped);
    else
        log_error("http error=\"%s\" left_out=%u", msg, dropped);
}

const char *http_query(const HttpRequest *rq, const char *key)
{
    return MHD_lookup_connection_value(rq->conn, MHD_GET_ARGUMENT_KIND, key);
}

const char *http_header(const HttpRequest *rq, const char *key)
{
    return MHD_lookup_connection_value(rq->conn, MHD_HEADER_KIND, key);
}

void http_reply_json(HttpResponse *rp, int status, json_t *body)
{
    buf_free(&rp->body);
    rp->content_type = NULL;
    /* 15 significant digits: 0.1 is written as 0.1, not 0.10000000000000001 */
    char *text = body ? json_dumps(body, JSON_COMPACT | JSON_REAL_PRECISION(15)) : NULL;
    json_decref(body);
    if (!text) {
        rp->status = 500;
        buf_puts(&rp->body, "{\"error\":\"out of memory\"}");
        return;
    }
    size_t len = strlen(text);
    rp->body = (Buf){.data = text, .len = len, .cap = len + 1};
    rp->status = status;
}

/* Length of the valid UTF-8 sequence at p (at most n bytes), or 0. */
static size_t utf8_len(const unsigned char *p, size_t n)
{
    size_t len = p[0] < 0x80             ? 1
                 : (p[0] & 0xe0) == 0xc0 ? 2
                 : (p[0] & 0xf0) == 0xe0 ? 3
                 : (p[0] & 0xf8) == 0xf0 ? 4
                                         : 0;
    if (!len || len > n || (len == 2 && p[0] < 0xc2) || (len == 4 && p[0] > 0xf4))
        return 0;
    for (size_t i = 1; i < len; i++)
        if ((p[i] & 0xc0) != 0x80)
            return 0;
    if (len == 3 && ((p[0] == 0xe0 && p[1] < 0xa0) || (p[0] == 0xed && p[1] >= 0xa0)))
        return 0; /* overlong, or a surrogate */
    if (len == 4 && ((p[0] == 0xf0 && p[1] < 0x90) || (p[0] == 0xf4 && p[1] >= 0x90)))
        return 0;
    return len;
}

/* Messages quote what the client sent (a path, a name); invalid UTF-8 in it would make
 * the reply invalid JSON, so each bad byte becomes '?'. */
static void utf8_scrub(Buf *b)
{
    unsigned char *p = (unsigned char *)b->data;
    for (size_t i = 0; p && i < b->len;) {
        size_t k = utf8_len(p + i, b->len - i);
        if (k) {
            i += k;
        } else {
            p[i++] = '?';
        }
    }
}

void http_reply_error(HttpResponse *rp, int status, const char *fmt, ...)
{
    Buf msg = {0};
    va_list ap;
    va_start(ap, fmt);
    buf_vprintf(&msg, fmt, ap);
    va_end(ap);
    utf8_scrub(&msg);
    buf_free(&rp->body);
    rp->content_type = NULL;
    rp->status = status;
    buf_puts(&rp->body, "{\"error\":");
    buf_json_str(&rp->body, buf_str(&msg));
    buf_putc(&rp->body, '}');
    buf_free(&msg);
}

void http_reply_text(HttpResponse *rp, int status, const char *content_type, const char *text,
                     size_t len)
{
    buf_free(&rp->body);
    rp->status = status;
    rp->content_type = content_type;
    buf_append(&rp->body, text, len);
}

json_t *http_body_json(const HttpRequest *rq, HttpResponse *rp)
{
    if (!rq->body_len) {
        http_reply_error(rp, 400, "the body is empty: expected a JSON object");
        return NULL;
    }
    json_error_t e;
    json_t *v = json_loadb(rq->body, rq->body_len, JSON_REJECT_DUPLICATES, &e);
    if (!v) {
        http_reply_error(rp, 400, "malformed JSON at line %d, column %d: %s", e.line, e.column,
                         e.text);
        return NULL;
    }
    if (!json_is_object(v)) {
        json_decref(v);
        http_reply_error(rp, 400, "the body must be a JSON object");
        return NULL;
    }
    return v;
}

int http_parse_listen(const char *addr, char **ret_host, char **ret_port, Buf *err)
{
    _cleanup_free_ char *host = NULL;
    const char *port;
    if (addr[0] == '[') {
        const char *rb = strchr(addr, ']');
        if (!rb || rb[1] != ':') {
            buf_printf(err, "bad listen address '%s': expected [IPV6]:PORT", addr);
            return -EINVAL;
        }
        host = strndup(addr + 1, (size_t)(rb - addr - 1));
        port = rb + 2;
    } else {
        const char *colon = strrchr(addr, ':');
        if (!colon) {
            buf_printf(err, "bad listen address '%s': expected HOST:PORT", addr);
            return -EINVAL;
        }
        host = strndup(addr, (size_t)(colon - addr));
        port = colon + 1;
    }
    if (!host)
        return -ENOMEM;
    size_t digits = strspn(port, "0123456789");
    if (!*port || port[digits] || digits > 5 || atoi(port) > 65535) {
        buf_printf(err, "bad listen address '%s': the port must be a number from 0 to 65535", addr);
        return -EINVAL;
    }
    char *p = strdup(port);
    if (!p)
        return -ENOMEM;
    *ret_host = TAKE_PTR(host);
    *ret_port = p;
    return 0;
}

int http_listen(const char *addr, HttpListener *ret, Buf *err)
{
    _cleanup_free_ char *host = NULL, *port = NULL;
    int r = http_parse_listen(addr, &host, &port, err);
    if (r < 0)
        return r;
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    int g = getaddrinfo(*host ? host : NULL, port, &hints, &ai);
    if (g) {
        buf_printf(err, "cannot listen on %s: %s", addr, gai_strerror(g));
        return -EINVAL;
    }
    int e = 0, fd = -1;
    bool v6 = false;
    for (struct addrinfo *a = ai; a; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
        if (fd < 0) {
            e = errno;
            continue;
        }
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, HTTP_LISTEN_BACKLOG) == 0) {
            v6 = a->ai_family == AF_INET6;
            break;
        }
        e = errno;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(ai);
    if (fd < 0) {
        buf_printf(err, "cannot listen on %s: %s", addr, strerror(e));
        if (e == EADDRINUSE)
            buf_puts(err, ": the port is taken; another process (another gpuorch server?) "
                          "listens there");
        return -e;
    }
    *ret = (HttpListener){.fd = fd, .v6 = v6};
    return 0;
}

void http_listener_close(HttpListener *l)
{
    if (l && l->fd >= 0)
        close(l->fd);
    if (l)
        l->fd = -1;
}

int http_server_start(Server *s, HttpListener *l, const char *web_dir, const HttpLimits *lim,
                      HttpServer **ret, Buf *err)
{
    HttpServer *h = calloc(1, sizeof(*h));
    if (!h)
        return -ENOMEM;
    h->s = s;
    h->lim = lim ? *lim : (HttpLimits){.conns_per_ip = HTTP_CONNS_PER_IP};
    if (h->lim.headers_ms <= 0)
        h->lim.headers_ms = HTTP_HEADERS_MS;
    pthread_mutex_init(&h->conns_lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&h->wake, &ca);
    pthread_condattr_destroy(&ca);
    if (web_dir && !(h->web_dir = strdup(web_dir))) {
        http_server_stop(h);
        return -ENOMEM;
    }
    h->cache = auth_cache_new();
    if (!h->cache) {
        http_server_stop(h);
        return -ENOMEM;
    }
    int r = audit_open(s->opt.data_dir, &h->audit, err);
    if (r < 0) {
        http_server_stop(h);
        return r;
    }
    /* before the daemon's threads start: a request on the listening socket may come at
     * once, and its handler reads s->auth_cache (GET /tokens' last use) */
    s->auth_cache = h->cache;
    unsigned flags = MHD_USE_AUTO | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG;
    if (l->v6)
        flags |= MHD_USE_IPv6;
    h->d = MHD_start_daemon(
        flags, 0, NULL, NULL, on_request, h, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, h,
        MHD_OPTION_LISTEN_SOCKET, (MHD_socket)l->fd, MHD_OPTION_THREAD_POOL_SIZE,
        (unsigned)HTTP_THREADS, MHD_OPTION_CONNECTION_LIMIT, (unsigned)HTTP_CONN_LIMIT,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, h->lim.conns_per_ip, MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)HTTP_CONN_TIMEOUT, MHD_OPTION_NOTIFY_COMPLETED, on_completed, h,
        MHD_OPTION_NOTIFY_CONNECTION, on_connection, h, MHD_OPTION_UNESCAPE_CALLBACK, on_unescape,
        h, MHD_OPTION_END);
    if (!h->d) {
        http_server_stop(h);
        buf_puts(err, "cannot serve HTTP: the HTTP daemon did not start");
        return -EIO;
    }
    l->fd = -1; /* the daemon's now */
    r = pthread_create(&h->reaper, NULL, reaper_main, h);
    if (r) {
        http_server_stop(h);
        buf_puts(err, "cannot serve HTTP: no thread for the connections' deadlines");
        return -r;
    }
    h->reaper_started = true;
    *ret = h;
    return 0;
}

int http_server_port(const HttpServer *h)
{
    const union MHD_DaemonInfo *i = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
    return i ? i->port : -1;
}

void http_server_stop(HttpServer *h)
{
    if (!h)
        return;
    if (h->reaper_started) {
        pthread_mutex_lock(&h->conns_lock);
        h->stop = true;
        pthread_cond_signal(&h->wake);
        pthread_mutex_unlock(&h->conns_lock);
        pthread_join(h->reaper, NULL);
    }
    if (h->d)
        MHD_stop_daemon(h->d);
    h->s->auth_cache = NULL;
    auth_cache_free(h->cache);
    audit_close(h->audit);
    pthread_cond_destroy(&h->wake);
    pthread_mutex_destroy(&h->conns_lock);
    free(h->web_dir);
    free(h);
}
