/* api.c: the Kubernetes API client. Credentials come from a kubeconfig (YAML, read
 * with libfyaml) or from the pod's service account. Requests go through one libcurl
 * easy handle per client, so the connection and its TLS session live on between
 * requests; before each one a token bucket (qps, burst, as client-go's) may make it
 * wait. Lists are read a page at a time and watches as they stream: the write
 * callback cuts what arrives into newline-delimited events, whatever the chunking. */
#include "kube/api.h"

#include "kube/api_internal.h"
#include "util/file.h"
#include "util/macro.h"

#include <curl/curl.h>
#include <errno.h>
#include <libfyaml.h>
#include <pthread.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define PAGE_LIMIT         500 /* items a list page asks for */
#define SERVICE_ACCOUNT    "/var/run/secrets/kubernetes.io/serviceaccount"
#define WATCH_GRACE_S      30 /* past timeoutSeconds before curl gives up on a watch */
#define CONNECT_TIMEOUT_MS 5000L
#define MESSAGE_MAX        200   /* bytes of a raw body's first line in messages */
#define ERROR_BODY_MAX     65536 /* bytes of a failed watch's reply kept for its message */

static void errf(Buf *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void errf(Buf *err, const char *fmt, ...)
{
    if (!err)
        return;
    va_list ap;
    va_start(ap, fmt);
    buf_vprintf(err, fmt, ap);
    va_end(ap);
}

/* ---- the watch stream's lines ---- */

/* Strip a "\r" before the newline; skip empty lines (none are sent, but a keep-alive
 * newline would be harmless). */
static int emit_line(KubeLines *s, const char *line, size_t len)
{
    if (len > 0 && line[len - 1] == '\r')
        len--;
    return len ? s->fn(s->arg, line, len) : 0;
}

int kube_lines_feed(KubeLines *s, const char *data, size_t n)
{
    while (n > 0) {
        const char *nl = memchr(data, '\n', n);
        if (!nl) {
            buf_append(&s->partial, data, n);
            return s->partial.oom ? -ENOMEM : 0;
        }
        size_t len = (size_t)(nl - data);
        int r;
        if (s->partial.len) {
            buf_append(&s->partial, data, len);
            if (s->partial.oom)
                return -ENOMEM;
            r = emit_line(s, s->partial.data, s->partial.len);
            buf_reset(&s->partial);
        } else {
            /* the common case: the whole line is in this chunk, no copy */
            r = emit_line(s, data, len);
        }
        if (r < 0)
            return r;
        data += len + 1;
        n -= len + 1;
    }
    return 0;
}

int kube_lines_end(KubeLines *s)
{
    if (!s->partial.len)
        return 0;
    int r = emit_line(s, s->partial.data, s->partial.len);
    buf_reset(&s->partial);
    return r;
}

void kube_lines_free(KubeLines *s)
{
    buf_free(&s->partial);
}

/* ---- the rate limit ---- */

void kube_bucket_init(KubeBucket *b, double qps, int burst, int64_t now_ns)
{
    *b = (KubeBucket){
        .qps = qps > 0 ? qps : 0,
        .burst = burst > 1 ? burst : 1,
        .last_ns = now_ns,
    };
    b->tokens = b->burst;
}

int64_t kube_bucket_take(KubeBucket *b, int64_t now_ns)
{
    if (b->qps <= 0)
        return 0;
    if (now_ns > b->last_ns) {
        b->tokens += (double)(now_ns - b->last_ns) * 1e-9 * b->qps;
        if (b->tokens > b->burst)
            b->tokens = b->burst;
        b->last_ns = now_ns;
    }
    b->tokens -= 1;
    return b->tokens >= 0 ? 0 : (int64_t)(-b->tokens * 1e9 / b->qps);
}

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- credentials ---- */

void kube_config_free(KubeConfig *c)
{
    if (!c)
        return;
    free(c->server);
    free(c->token);
    free(c->ca_pem);
    free(c->cert_pem);
    free(c->key_pem);
    free(c->namespace_);
    *c = (KubeConfig){0};
}

static void kube_config_freep(KubeConfig *c)
{
    kube_config_free(c);
}

/* Trailing whitespace off (token files end in a newline). */
static void trim_end(char *s)
{
    size_t n = strlen(s);
    while (n > 0 && strchr(" \t\r\n", s[n - 1]))
        s[--n] = '\0';
}

/* A kubeconfig being read: its path for messages and its directory for the files it
 * names. */
typedef struct Kc {
    const char *path;
    char *dir; /* NULL: the kubeconfig's path has no directory part */
    Buf *err;
} Kc;

static int kc_fail(Kc *k, int r, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int kc_fail(Kc *k, int r, const char *fmt, ...)
{
    if (k->err) {
        buf_printf(k->err, "%s: ", k->path);
        va_list ap;
        va_start(ap, fmt);
        buf_vprintf(k->err, fmt, ap);
        va_end(ap);
    }
    return r;
}

static bool node_is_null(struct fy_node *n)
{
    if (!n)
        return true;
    if (!fy_node_is_scalar(n) || fy_node_get_style(n) != FYNS_PLAIN)
        return false;
    const char *s = fy_node_get_scalar0(n);
    return !s || !*s || !strcmp(s, "~") || !strcasecmp(s, "null");
}

/* The value of key in a mapping, or NULL (absent, null, or map not a mapping). */
static struct fy_node *map_get(struct fy_node *map, const char *key)
{
    if (!map || !fy_node_is_mapping(map))
        return NULL;
    void *it = NULL;
    struct fy_node_pair *p;
    while ((p = fy_node_mapping_iterate(map, &it))) {
        struct fy_node *k = fy_node_pair_key(p);
        const char *name = k && fy_node_is_scalar(k) ? fy_node_get_scalar0(k) : NULL;
        if (name && !strcmp(name, key)) {
            struct fy_node *v = fy_node_pair_value(p);
            return node_is_null(v) ? NULL : v;
        }
    }
    return NULL;
}

/* The text of key in map: 0 with *ret NULL when it is absent or null, -EINVAL when it
 * is a list or a mapping. where: "cluster 'c'", for the message. */
static int kc_text(Kc *k, struct fy_node *map, const char *key, const char *where, const char **ret)
{
    struct fy_node *v = map_get(map, key);
    if (v && !fy_node_is_scalar(v))
        return kc_fail(k, -EINVAL, "%s: '%s' must be a value, not %s", where, key,
                       fy_node_is_sequence(v) ? "a list" : "a mapping");
    *ret = v ? fy_node_get_scalar0(v) : NULL;
    return 0;
}

/* The `inner` mapping of the entry named name in the list `list` of the document
 * ("clusters" entries hold a "cluster"). of: "of context 'x'", for the message. */
static int kc_entry(Kc *k, struct fy_node *root, const char *list, const char *inner,
                    const char *name, const char *of, struct fy_node **ret)
{
    struct fy_node *seq = map_get(root, list);
    if (seq && !fy_node_is_sequence(seq))
        return kc_fail(k, -EINVAL, "'%s' must be a list", list);
    void *it = NULL;
    struct fy_node *item;
    while (seq && (item = fy_node_sequence_iterate(seq, &it))) {
        const char *n = NULL;
        if (kc_text(k, item, "name", list, &n) < 0)
            return -EINVAL;
        if (!n || strcmp(n, name))
            continue;
        struct fy_node *m = map_get(item, inner);
        if (!m || !fy_node_is_mapping(m))
            return kc_fail(k, -EINVAL, "%s '%s' has no '%s' mapping", inner, name, inner);
        *ret = m;
        return 0;
    }
    return kc_fail(k, -EINVAL, "%s '%s' (%s) is not in '%s'", inner, name, of, list);
}

/* A file the kubeconfig names: relative paths start at the kubeconfig's directory. */
static int kc_read_file(Kc *k, const char *where, const char *key, const char *file, char **ret)
{
    _cleanup_free_ char *full = NULL;
    if (file[0] != '/' && k->dir && asprintf(&full, "%s/%s", k->dir, file) < 0)
        return -ENOMEM;
    const char *p = full ? full : file;
    char *data = NULL;
    size_t len = 0;
    int r = file_read_all(p, &data, &len);
    if (r < 0)
        return kc_fail(k, r, "%s: '%s': cannot read %s: %s", where, key, p, strerror(-r));
    *ret = data;
    return 0;
}

/* The PEM text of `data_key` (base64) or else `file_key` (a file) in map: 0 with *ret
 * NULL when neither is given. The data wins when both are, as in client-go. */
static int kc_pem(Kc *k, struct fy_node *map, const char *where, const char *data_key,
                  const char *file_key, char **ret)
{
    const char *b64 = NULL, *file = NULL;
    int r = kc_text(k, map, data_key, where, &b64);
    if (r >= 0)
        r = kc_text(k, map, file_key, where, &file);
    if (r < 0)
        return r;
    if (!b64) {
        *ret = NULL;
        return file ? kc_read_file(k, where, file_key, file, ret) : 0;
    }
    size_t len = strlen(b64), out_len = 0;
    _cleanup_free_ unsigned char *out = malloc(len / 4 * 3 + 4);
    if (!out)
        return -ENOMEM;
    const char *end = NULL;
    /* a base64 block may be folded over lines (a YAML block scalar) */
    if (sodium_base642bin(out, len / 4 * 3 + 3, b64, len, " \t\r\n", &out_len, &end,
                          sodium_base64_VARIANT_ORIGINAL) < 0 ||
        end != b64 + len || out_len == 0)
        return kc_fail(k, -EINVAL, "%s: '%s' is not base64", where, data_key);
    out[out_len] = '\0';
    *ret = (char *)TAKE_PTR(out);
    return 0;
}

static int kc_cluster(Kc *k, struct fy_node *c, const char *name, KubeConfig *cfg)
{
    _cleanup_free_ char *where = NULL;
    if (asprintf(&where, "cluster '%s'", name) < 0)
        return -ENOMEM;
    const char *server = NULL, *insecure = NULL;
    int r = kc_text(k, c, "server", where, &server);
    if (r >= 0)
        r = kc_text(k, c, "insecure-skip-tls-verify", where, &insecure);
    if (r < 0)
        return r;
    if (!server)
        return kc_fail(k, -EINVAL, "%s has no 'server'", where);
    if (strncmp(server, "https://", 8) && strncmp(server, "http://", 7))
        return kc_fail(k, -EINVAL, "%s: 'server' must be an http(s):// URL, not '%s'", where,
                       server);
    if (insecure && strcasecmp(insecure, "true") && strcasecmp(insecure, "false"))
        return kc_fail(k, -EINVAL, "%s: 'insecure-skip-tls-verify' must be true or false, not '%s'",
                       where, insecure);
    cfg->insecure = insecure && !strcasecmp(insecure, "true");
    cfg->server = strdup(server);
    if (!cfg->server)
        return -ENOMEM;
    return kc_pem(k, c, where, "certificate-authority-data", "certificate-authority", &cfg->ca_pem);
}

static int kc_user(Kc *k, struct fy_node *u, const char *name, KubeConfig *cfg)
{
    _cleanup_free_ char *where = NULL;
    if (asprintf(&where, "user '%s'", name) < 0)
        return -ENOMEM;
    const char *token = NULL, *token_file = NULL;
    int r = kc_text(k, u, "token", where, &token);
    if (r >= 0)
        r = kc_text(k, u, "tokenFile", where, &token_file);
    if (r >= 0)
        r = kc_pem(k, u, where, "client-certificate-data", "client-certificate", &cfg->cert_pem);
    if (r >= 0)
        r = kc_pem(k, u, where, "client-key-data", "client-key", &cfg->key_pem);
    if (r < 0)
        return r;
    if (!cfg->cert_pem != !cfg->key_pem)
        return kc_fail(k, -EINVAL,
                       "%s: a client certificate needs its key and a key its certificate", where);
    if (token) {
        /* the token wins over tokenFile, as the kubeconfig reference says */
        cfg->token = strdup(token);
        if (!cfg->token)
            return -ENOMEM;
    } else if (token_file) {
        r = kc_read_file(k, where, "tokenFile", token_file, &cfg->token);
        if (r < 0)
            return r;
        trim_end(cfg->token);
        if (!*cfg->token)
            return kc_fail(k, -EINVAL, "%s: 'tokenFile' %s is empty", where, token_file);
    }
    if (!cfg->token && !cfg->cert_pem && (map_get(u, "exec") || map_get(u, "auth-provider")))
        return kc_fail(k, -EINVAL,
                       "%s signs in through a credential plugin ('%s'), which gpuorch does not "
                       "run: give it a token, a tokenFile or a client certificate",
                       where, map_get(u, "exec") ? "exec" : "auth-provider");
    return 0;
}

static int kc_read(Kc *k, struct fy_node *root, const char *context, KubeConfig *cfg)
{
    if (!root || !fy_node_is_mapping(root))
        return kc_fail(k, -EINVAL,
                       "not a kubeconfig (a YAML mapping with clusters, contexts "
                       "and users)");
    const char *current = NULL;
    int r = kc_text(k, root, "current-context", "the kubeconfig", &current);
    if (r < 0)
        return r;
    const char *name = context ? context : current;
    if (!name || !*name)
        return kc_fail(k, -EINVAL, "no 'current-context', and no context was named");
    struct fy_node *ctx = NULL, *cluster = NULL, *user = NULL;
    r = kc_entry(k, root, "contexts", "context", name,
                 context ? "the one asked for" : "the current-context", &ctx);
    if (r < 0)
        return r;
    _cleanup_free_ char *where = NULL, *of = NULL;
    if (asprintf(&where, "context '%s'", name) < 0 || asprintf(&of, "of context '%s'", name) < 0)
        return -ENOMEM;
    const char *cluster_name = NULL, *user_name = NULL, *ns = NULL;
    r = kc_text(k, ctx, "cluster", where, &cluster_name);
    if (r >= 0)
        r = kc_text(k, ctx, "user", where, &user_name);
    if (r >= 0)
        r = kc_text(k, ctx, "namespace", where, &ns);
    if (r < 0)
        return r;
    if (!cluster_name)
        return kc_fail(k, -EINVAL, "%s names no 'cluster'", where);
    r = kc_entry(k, root, "clusters", "cluster", cluster_name, of, &cluster);
    if (r >= 0)
        r = kc_cluster(k, cluster, cluster_name, cfg);
    if (r < 0)
        return r;
    /* a context without a user talks to the server anonymously */
    if (user_name) {
        r = kc_entry(k, root, "users", "user", user_name, of, &user);
        if (r >= 0)
            r = kc_user(k, user, user_name, cfg);
        if (r < 0)
            return r;
    }
    if (ns && !(cfg->namespace_ = strdup(ns)))
        return -ENOMEM;
    return 0;
}

/* Parse the kubeconfig's text; syntax errors are reported with their line. The
 * document refers to diag: destroy it first. */
static struct fy_document *kc_parse(Kc *k, struct fy_diag *diag, const char *text, size_t len,
                                    int *ret_r)
{
    struct fy_parse_cfg cfg = {
        .flags = FYPCF_QUIET | FYPCF_RESOLVE_DOCUMENT | FYPCF_DISABLE_MMAP_OPT,
        .diag = diag,
    };
    struct fy_document *doc = fy_document_build_from_string(&cfg, text, len);
    if (doc)
        return doc;
    void *it = NULL;
    struct fy_diag_error *e;
    while ((e = fy_diag_errors_iterate(diag, &it)) && e->type < FYET_ERROR)
        ;
    if (e && e->line > 0)
        *ret_r = kc_fail(k, -EINVAL, "line %d: invalid YAML: %s", e->line,
                         e->msg ? e->msg : "syntax error");
    else
        *ret_r = kc_fail(k, -EINVAL, "invalid YAML");
    return NULL;
}

static struct fy_diag *quiet_diag(void)
{
    struct fy_diag_cfg dc;
    fy_diag_cfg_default(&dc);
    dc.fp = NULL;
    dc.output_fn = NULL;
    dc.colorize = false;
    struct fy_diag *diag = fy_diag_create(&dc);
    if (diag)
        fy_diag_set_collect_errors(diag, true);
    return diag;
}

int kube_config_load(const char *path, const char *context, KubeConfig *ret, Buf *err)
{
    Kc k = {.path = path, .err = err};
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    int r = file_read_all(path, &text, &len);
    if (r < 0)
        return kc_fail(&k, r, "cannot read: %s", strerror(-r));
    const char *slash = strrchr(path, '/');
    _cleanup_free_ char *dir = NULL;
    if (slash && !(dir = strndup(path, slash == path ? 1 : (size_t)(slash - path))))
        return -ENOMEM;
    k.dir = dir;
    struct fy_diag *diag = quiet_diag();
    if (!diag)
        return -ENOMEM;
    _cleanup_(kube_config_freep) KubeConfig cfg = {0};
    struct fy_document *doc = kc_parse(&k, diag, text, len, &r);
    if (doc) {
        r = kc_read(&k, fy_document_root(doc), context, &cfg);
        fy_document_destroy(doc);
    }
    fy_diag_destroy(diag);
    if (r < 0)
        return r;
    *ret = cfg;
    cfg = (KubeConfig){0};
    return 0;
}

/* A service account file, trimmed. */
static int sa_file(const char *dir, const char *name, bool trim, char **ret, Buf *err)
{
    _cleanup_free_ char *path = NULL;
    if (asprintf(&path, "%s/%s", dir, name) < 0)
        return -ENOMEM;
    char *data = NULL;
    size_t len = 0;
    int r = file_read_all(path, &data, &len);
    if (r < 0) {
        errf(err, "%s: cannot read: %s", path, strerror(-r));
        return r;
    }
    if (trim)
        trim_end(data);
    if (!*data) {
        free(data);
        errf(err, "%s: empty", path);
        return -EINVAL;
    }
    *ret = data;
    return 0;
}

int kube_config_in_cluster(const char *dir, KubeConfig *ret, Buf *err)
{
    if (!dir)
        dir = SERVICE_ACCOUNT;
    const char *host = getenv("KUBERNETES_SERVICE_HOST"), *port = getenv("KUBERNETES_SERVICE_PORT");
    if (!host || !*host || !port || !*port) {
        errf(err, "not inside a cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT "
                  "are not set");
        return -ENOENT;
    }
    _cleanup_(kube_config_freep) KubeConfig cfg = {0};
    /* an IPv6 address goes in brackets */
    if (asprintf(&cfg.server, strchr(host, ':') ? "https://[%s]:%s" : "https://%s:%s", host, port) <
        0) {
        cfg.server = NULL;
        return -ENOMEM;
    }
    int r = sa_file(dir, "token", true, &cfg.token, err);
    if (r >= 0)
        r = sa_file(dir, "ca.crt", false, &cfg.ca_pem, err);
    if (r < 0)
        return r;
    /* the namespace file is there in every pod, but a missing one costs nothing */
    _cleanup_free_ char *ns = NULL;
    Buf ignored = {0};
    if (sa_file(dir, "namespace", true, &ns, &ignored) == -ENOMEM) {
        buf_free(&ignored);
        return -ENOMEM;
    }
    buf_free(&ignored);
    cfg.namespace_ = TAKE_PTR(ns);
    *ret = cfg;
    cfg = (KubeConfig){0};
    return 0;
}

/* ---- the client ---- */

struct KubeApi {
    CURL *curl;
    KubeConfig cfg; /* a copy; server without a trailing slash */
    char *auth;     /* "Authorization: Bearer ...", or NULL */
    long timeout_ms;
    KubeBucket bucket;
    char curl_err[CURL_ERROR_SIZE];
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init_once(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

static int dup_opt(const char *s, char **ret)
{
    *ret = NULL;
    if (s && !(*ret = strdup(s)))
        return -ENOMEM;
    return 0;
}

int kube_api_new(const KubeConfig *cfg, long timeout_ms, KubeApi **ret)
{
    if (!cfg->server)
        return -EINVAL;
    pthread_once(&curl_once, curl_init_once);
    KubeApi *a = calloc(1, sizeof(*a));
    if (!a)
        return -ENOMEM;
    a->cfg.insecure = cfg->insecure;
    a->cfg.qps = cfg->qps;
    a->cfg.burst = cfg->burst;
    a->curl = curl_easy_init();
    if (!a->curl || dup_opt(cfg->server, &a->cfg.server) < 0 ||
        dup_opt(cfg->token, &a->cfg.token) < 0 || dup_opt(cfg->ca_pem, &a->cfg.ca_pem) < 0 ||
        dup_opt(cfg->cert_pem, &a->cfg.cert_pem) < 0 ||
        dup_opt(cfg->key_pem, &a->cfg.key_pem) < 0 ||
        dup_opt(cfg->namespace_, &a->cfg.namespace_) < 0 ||
        (cfg->token && *cfg->token &&
         asprintf(&a->auth, "Authorization: Bearer %s", cfg->token) < 0)) {
        a->auth = NULL;
        kube_api_free(a);
        return -ENOMEM;
    }
    size_t n = strlen(a->cfg.server);
    while (n > 0 && a->cfg.server[n - 1] == '/')
        a->cfg.server[--n] = '\0';
    a->timeout_ms = timeout_ms > 0 ? timeout_ms : 30000;
    kube_bucket_init(&a->bucket, cfg->qps, cfg->burst, mono_ns());
    *ret = a;
    return 0;
}

void kube_api_free(KubeApi *a)
{
    if (!a)
        return;
    if (a->curl)
        curl_easy_cleanup(a->curl);
    kube_config_free(&a->cfg);
    free(a->auth);
    free(a);
}

static void rate_wait(KubeApi *a)
{
    int64_t now = mono_ns(), wait = kube_bucket_take(&a->bucket, now);
    if (wait <= 0)
        return;
    int64_t until = now + wait;
    struct timespec ts = {.tv_sec = until / 1000000000, .tv_nsec = until % 1000000000};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

static int set_blob(CURL *c, CURLoption opt, const char *pem)
{
    struct curl_blob blob = {.data = (void *)pem, .len = strlen(pem), .flags = CURL_BLOB_COPY};
    return curl_easy_setopt(c, opt, &blob) == CURLE_OK ? 0 : -ENOTSUP;
}

/* The handle set for one request; *ret_headers for the caller to free after it. */
static int prepare(KubeApi *a, const char *method, const char *path, const char *content_type,
                   long timeout_ms, struct curl_slist **ret_headers, Buf *err)
{
    CURL *c = a->curl;
    /* a reset keeps the open connection and the TLS session cache */
    curl_easy_reset(c);
    a->curl_err[0] = '\0';
    _cleanup_free_ char *url = NULL, *ct = NULL;
    if (asprintf(&url, "%s%s", a->cfg.server, path) < 0) {
        url = NULL;
        return -ENOMEM;
    }
    if (content_type && asprintf(&ct, "Content-Type: %s", content_type) < 0) {
        ct = NULL;
        return -ENOMEM;
    }
    struct curl_slist *h = NULL, *t;
    const char *lines[] = {a->auth, "Accept: application/json", ct,
                           "Expect:" /* no 100-continue round trip */};
    for (size_t i = 0; i < ARRAY_SIZE(lines); i++) {
        if (!lines[i])
            continue;
        if (!(t = curl_slist_append(h, lines[i]))) {
            curl_slist_free_all(h);
            return -ENOMEM;
        }
        h = t;
    }
    int r = curl_easy_setopt(c, CURLOPT_URL, url) == CURLE_OK ? 0 : -ENOMEM;
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, a->curl_err);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "gpuorch");
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    /* one connection per client and one request at a time on it: HTTP/2's framing and
     * flow control buy nothing here and cost both ends CPU per request */
    curl_easy_setopt(c, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, MIN(timeout_ms, CONNECT_TIMEOUT_MS));
    /* a watch may sit idle for minutes: find a dead peer without waiting for its end */
    curl_easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(c, CURLOPT_TCP_KEEPIDLE, 30L);
    curl_easy_setopt(c, CURLOPT_TCP_KEEPINTVL, 15L);
    if (!strcmp(method, "GET"))
        curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
    else
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    if (r >= 0 && a->cfg.ca_pem)
        r = set_blob(c, CURLOPT_CAINFO_BLOB, a->cfg.ca_pem);
    if (r >= 0 && a->cfg.cert_pem) {
        r = set_blob(c, CURLOPT_SSLCERT_BLOB, a->cfg.cert_pem);
        curl_easy_setopt(c, CURLOPT_SSLCERTTYPE, "PEM");
    }
    if (r >= 0 && a->cfg.key_pem) {
        r = set_blob(c, CURLOPT_SSLKEY_BLOB, a->cfg.key_pem);
        curl_easy_setopt(c, CURLOPT_SSLKEYTYPE, "PEM");
    }
    if (a->cfg.insecure) {
        curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    if (r < 0) {
        curl_slist_free_all(h);
        if (r == -ENOTSUP)
            errf(err, "this libcurl cannot take certificates from memory (CURLOPT_*_BLOB)");
        return r;
    }
    *ret_headers = h;
    return 0;
}

static int curl_errno(CURLcode rc)
{
    switch (rc) {
    case CURLE_COULDNT_CONNECT:
        return -ECONNREFUSED;
    case CURLE_OPERATION_TIMEDOUT:
        return -ETIMEDOUT;
    case CURLE_OUT_OF_MEMORY:
        return -ENOMEM;
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
        return -ECONNRESET;
    default:
        return -EIO;
    }
}

static int transport_error(KubeApi *a, CURLcode rc, const char *method, const char *path, Buf *err)
{
    errf(err, "the API server at %s: %s %s: %s", a->cfg.server, method, path,
         a->curl_err[0] ? a->curl_err : curl_easy_strerror(rc));
    return curl_errno(rc);
}

static void reply_reset(KubeReply *r)
{
    r->status = 0;
    json_decref(r->body);
    r->body = NULL;
    buf_reset(&r->raw);
    r->raw.oom = false; /* a new reply gets a new chance */
    free(r->message);
    r->message = NULL;
}

void kube_reply_free(KubeReply *r)
{
    if (!r)
        return;
    reply_reset(r);
    buf_free(&r->raw);
}

/* The Status message of a reply body, or its raw first line, into out. false: neither. */
static bool reply_text(json_t *body, const Buf *raw, Buf *out)
{
    const char *kind = json_string_value(json_object_get(body, "kind"));
    const char *m = json_string_value(json_object_get(body, "message"));
    if (kind && !strcmp(kind, "Status") && m && *m) {
        buf_puts(out, m);
        return true;
    }
    const char *s = buf_str(raw);
    s += strspn(s, " \t\r\n");
    size_t n = strcspn(s, "\r\n");
    if (!n)
        return false;
    buf_append(out, s, MIN(n, (size_t)MESSAGE_MAX));
    return true;
}

const char *kube_reply_message(KubeReply *r)
{
    if (r->message)
        return r->message;
    Buf b = {0};
    if (!reply_text(r->body, &r->raw, &b))
        buf_printf(&b, "HTTP %ld", r->status);
    r->message = b.oom ? NULL : buf_steal(&b);
    buf_free(&b);
    return r->message ? r->message : "(out of memory)";
}

/* What an HTTP status (or a watch ERROR event's code) means to the caller. */
static int status_errno(long status)
{
    return status == 401 || status == 403 ? -EACCES
           : status == 404                ? -ENOENT
           : status == 410                ? -ESTALE
                                          : -EIO;
}

/* The errno of a reply that is not a success, with err saying which request and why. */
static int status_error(KubeApi *a, const char *method, const char *path, long status, json_t *body,
                        const Buf *raw, Buf *err)
{
    if (err) {
        buf_printf(err, "the API server at %s: %s %s: HTTP %ld", a->cfg.server, method, path,
                   status);
        Buf m = {0};
        if (reply_text(body, raw, &m))
            buf_printf(err, ": %s", buf_str(&m));
        buf_free(&m);
    }
    return status_errno(status);
}

static size_t on_body(char *data, size_t size, size_t n, void *arg)
{
    Buf *b = arg;
    buf_append(b, data, size * n);
    return b->oom ? 0 : size * n;
}

int kube_request(KubeApi *a, const char *method, const char *path, const char *content_type,
                 const json_t *body, KubeReply *ret, Buf *err)
{
    reply_reset(ret);
    _cleanup_free_ char *text = NULL;
    if (body && !(text = json_dumps(body, JSON_COMPACT | JSON_ENCODE_ANY)))
        return -ENOMEM;
    struct curl_slist *headers = NULL;
    int r =
        prepare(a, method, path, body ? (content_type ? content_type : "application/json") : NULL,
                a->timeout_ms, &headers, err);
    if (r < 0)
        return r;
    CURL *c = a->curl;
    if (text) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, text);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(text));
    }
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &ret->raw);
    rate_wait(a);
    CURLcode rc = curl_easy_perform(c);
    curl_slist_free_all(headers);
    if (ret->raw.oom) {
        errf(err, "out of memory reading the reply of %s %s", method, path);
        return -ENOMEM;
    }
    if (rc != CURLE_OK)
        return transport_error(a, rc, method, path, err);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &ret->status);
    if (ret->raw.len)
        ret->body = json_loadb(ret->raw.data, ret->raw.len, 0, NULL);
    return 0;
}

/* ---- lists ---- */

static int replace_str(char **dst, const char *s)
{
    if (*dst && !strcmp(*dst, s))
        return 0;
    char *n = strdup(s);
    if (!n)
        return -ENOMEM;
    free(*dst);
    *dst = n;
    return 0;
}

/* One page's items to each; its resourceVersion into *rv and its continue token (or
 * NULL at the last page) into *cont. */
static int list_page(KubeApi *a, const char *url, KubeReply *rep, KubeItemFn each, void *arg,
                     char **rv, char **cont, Buf *err)
{
    int r = kube_request(a, "GET", url, NULL, NULL, rep, err);
    if (r < 0)
        return r;
    if (rep->status != 200)
        return status_error(a, "GET", url, rep->status, rep->body, &rep->raw, err);
    json_t *items = json_object_get(rep->body, "items");
    if (!json_is_array(items) && !json_is_null(items)) {
        errf(err, "the API server at %s: GET %s: the reply is not a list", a->cfg.server, url);
        return -EIO;
    }
    size_t i;
    json_t *item;
    json_array_foreach(items, i, item)
    {
        if ((r = each(arg, item)) < 0)
            return r;
    }
    json_t *meta = json_object_get(rep->body, "metadata");
    const char *v = json_string_value(json_object_get(meta, "resourceVersion"));
    const char *c = json_string_value(json_object_get(meta, "continue"));
    if (v && *v && replace_str(rv, v) < 0)
        return -ENOMEM;
    free(*cont);
    *cont = NULL;
    if (c && *c && !(*cont = strdup(c)))
        return -ENOMEM;
    return 0;
}

int kube_list(KubeApi *a, const char *path, KubeItemFn each, void *arg, char **ret_rv, Buf *err)
{
    char sep = strchr(path, '?') ? '&' : '?';
    _cleanup_free_ char *rv = NULL, *cont = NULL;
    KubeReply rep = {0};
    Buf url = {0};
    int r;
    do {
        buf_reset(&url);
        buf_printf(&url, "%s%climit=%d", path, sep, PAGE_LIMIT);
        if (cont) {
            buf_puts(&url, "&continue=");
            kube_query_escape(&url, cont);
        }
        r = url.oom ? -ENOMEM : list_page(a, buf_str(&url), &rep, each, arg, &rv, &cont, err);
    } while (r >= 0 && cont);
    kube_reply_free(&rep);
    if (r >= 0 && !rv) {
        errf(err, "the API server at %s: GET %s: the list has no resourceVersion", a->cfg.server,
             buf_str(&url));
        r = -EIO;
    }
    buf_free(&url);
    if (r < 0)
        return r;
    if (ret_rv)
        *ret_rv = TAKE_PTR(rv);
    return 0;
}

/* ---- watches ---- */

typedef struct Watch {
    KubeApi *a;
    const char *url; /* path and query, for messages */
    char **rv;
    KubeEventFn fn;
    void *arg;
    const volatile bool *stop;
    Buf *err;
    KubeLines lines;
    long status; /* the reply's, once its body starts */
    Buf raw;     /* the start of a reply that is not a stream of events (an error) */
    int r;       /* why the stream was cut short from our side: an event or fn */
    bool stopped;
} Watch;

static int on_event_json(Watch *w, json_t *ev)
{
    const char *type = json_string_value(json_object_get(ev, "type"));
    json_t *obj = json_object_get(ev, "object");
    if (!type || !json_is_object(obj)) {
        errf(w->err, "the API server at %s: watch %s: an event without a type or an object",
             w->a->cfg.server, w->url);
        return -EIO;
    }
    if (!strcmp(type, "ERROR")) {
        /* a Status; 410 Gone: the version is older than what the server keeps */
        json_int_t code = json_integer_value(json_object_get(obj, "code"));
        const char *msg = json_string_value(json_object_get(obj, "message"));
        errf(w->err, "the API server at %s: watch %s: error %lld: %s", w->a->cfg.server, w->url,
             (long long)code, msg ? msg : "(no message)");
        return status_errno((long)code);
    }
    int r = w->fn(w->arg, type, obj);
    if (r < 0)
        return r;
    const char *v =
        json_string_value(json_object_get(json_object_get(obj, "metadata"), "resourceVersion"));
    return v && *v ? replace_str(w->rv, v) : 0;
}

static int on_event_line(void *arg, const char *line, size_t len)
{
    Watch *w = arg;
    json_error_t je;
    json_t *ev = json_loadb(line, len, 0, &je);
    if (!ev) {
        errf(w->err, "the API server at %s: watch %s: an event that is not JSON: %s",
             w->a->cfg.server, w->url, je.text);
        return -EIO;
    }
    int r = on_event_json(w, ev);
    json_decref(ev);
    return r;
}

static size_t on_stream(char *data, size_t size, size_t n, void *arg)
{
    Watch *w = arg;
    size_t len = size * n;
    if (!w->status)
        curl_easy_getinfo(w->a->curl, CURLINFO_RESPONSE_CODE, &w->status);
    if (w->status != 200) {
        if (w->raw.len < ERROR_BODY_MAX)
            buf_append(&w->raw, data, MIN(len, ERROR_BODY_MAX - w->raw.len));
        if (!w->raw.oom)
            return len;
        w->r = -ENOMEM;
        return 0;
    }
    int r = kube_lines_feed(&w->lines, data, len);
    if (r < 0) {
        w->r = r;
        return 0; /* not len: curl ends the transfer */
    }
    return len;
}

/* curl calls it about once a second while the stream is idle, more often while data
 * flows. */
static int on_progress(void *arg, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow)
{
    Watch *w = arg;
    if (w->stop && *w->stop) {
        w->stopped = true;
        return 1;
    }
    return 0;
}

int kube_watch(KubeApi *a, const char *path, char **rv, int timeout_s, KubeEventFn fn, void *arg,
               const volatile bool *stop, Buf *err)
{
    if (timeout_s <= 0)
        return -EINVAL;
    Buf url = {0};
    buf_printf(&url, "%s%cwatch=1", path, strchr(path, '?') ? '&' : '?');
    if (*rv && **rv) {
        buf_puts(&url, "&resourceVersion=");
        kube_query_escape(&url, *rv);
    }
    buf_printf(&url, "&allowWatchBookmarks=true&timeoutSeconds=%d", timeout_s);
    if (url.oom) {
        buf_free(&url);
        return -ENOMEM;
    }
    Watch w = {
        .a = a, .url = buf_str(&url), .rv = rv, .fn = fn, .arg = arg, .stop = stop, .err = err};
    w.lines = (KubeLines){.fn = on_event_line, .arg = &w};
    struct curl_slist *headers = NULL;
    long limit_ms = ((long)timeout_s + WATCH_GRACE_S) * 1000L;
    int r = prepare(a, "GET", w.url, NULL, limit_ms, &headers, err);
    if (r < 0) {
        buf_free(&url);
        return r;
    }
    CURL *c = a->curl;
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_stream);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &w);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, &w);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    rate_wait(a);
    CURLcode rc = curl_easy_perform(c);
    curl_slist_free_all(headers);
    if (rc == CURLE_OK) {
        if (!w.status)
            curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &w.status);
        if (w.status != 200) {
            json_t *body = json_loadb(w.raw.data ? w.raw.data : "", w.raw.len, 0, NULL);
            r = status_error(a, "GET", w.url, w.status, body, &w.raw, err);
            json_decref(body);
        } else {
            r = kube_lines_end(&w.lines);
        }
    } else if (w.r < 0) {
        r = w.r;
    } else if (w.stopped) {
        r = 0;
    } else {
        r = transport_error(a, rc, "GET", w.url, err);
    }
    kube_lines_free(&w.lines);
    buf_free(&w.raw);
    buf_free(&url);
    return r;
}

void kube_query_escape(Buf *b, const char *s)
{
    /* the handle is unused since curl 7.82 (it served character set conversions) */
    char *e = curl_easy_escape(NULL, s, 0);
    if (!e) {
        b->oom = true;
        return;
    }
    buf_puts(b, e);
    curl_free(e);
}
