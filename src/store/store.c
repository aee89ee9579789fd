/* store.c: the store's front: which back end a URL names, a URL with its password
 * masked, and the public functions, each a call through the back end's StoreOps table
 * (backend.h). Arguments every back end would check the same way are checked here once. */
#include "store/backend.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int store_fail(Buf *err, int e, const char *label, const char *fmt, ...)
{
    if (!err)
        return e;
    va_list ap;
    va_start(ap, fmt);
    if (err->len)
        buf_putc(err, '\n');
    buf_printf(err, "store %s: ", label);
    buf_vprintf(err, fmt, ap);
    va_end(ap);
    return e;
}

static bool has_prefix(const char *s, const char *prefix)
{
    return strncasecmp(s, prefix, strlen(prefix)) == 0;
}

/* Where "password", then optional blanks and '=' and blanks, starts a value in s at
 * p; the value's start, or NULL when p is not such a key. */
static const char *password_value(const char *s, const char *p)
{
    if (strncasecmp(p, "password", 8) != 0)
        return NULL;
    /* a key starts the string or follows a separator: not "oldpassword=" */
    if (p > s && !strchr(" \t\n?&", p[-1]))
        return NULL;
    p += 8;
    while (*p == ' ' || *p == '\t')
        p++;
    if (*p != '=')
        return NULL;
    p++;
    while (*p == ' ' || *p == '\t')
        p++;
    return p;
}

/* The end of a password value starting at v: a quoted conninfo value to its closing
 * quote (backslash escapes), otherwise to the next '&' (a URI's query) or blank. */
static const char *password_end(const char *v)
{
    if (*v == '\'') {
        for (v++; *v && *v != '\''; v++)
            if (*v == '\\' && v[1])
                v++;
        return *v ? v + 1 : v;
    }
    while (*v && *v != '&' && *v != ' ' && *v != '\t' && *v != '\n')
        v++;
    return v;
}

void store_url_redact(const char *url, Buf *out)
{
    if (!url)
        return;
    const char *p = url;
    const char *scheme = strstr(url, "://");
    if (scheme) {
        /* the user information ends at '@' before the host; libpq reads it so, stopping
         * at the first '/' */
        const char *auth = scheme + 3, *at = auth;
        while (*at && *at != '@' && *at != '/')
            at++;
        const char *colon = *at == '@' ? memchr(auth, ':', (size_t)(at - auth)) : NULL;
        if (colon) {
            buf_append(out, url, (size_t)(colon + 1 - url));
            buf_puts(out, "***");
            p = at;
        }
    }
    while (*p) {
        const char *v = password_value(url, p);
        if (v) {
            buf_append(out, p, (size_t)(v - p));
            buf_puts(out, "***");
            p = password_end(v);
            continue;
        }
        buf_putc(out, *p++);
    }
}

int store_open(const char *url, Store **ret, Buf *err)
{
    if (!url || !*url)
        return store_fail(err, -EINVAL, "URL", "empty; use sqlite:PATH or a file name");
    if (has_prefix(url, "postgres://") || has_prefix(url, "postgresql://"))
        return pg_open(url, ret, err);
    const char *path = url;
    if (has_prefix(url, "sqlite:")) {
        path = url + strlen("sqlite:");
        /* sqlite:///var/lib/x.db is the URL spelling of /var/lib/x.db */
        if (strncmp(path, "///", 3) == 0)
            path += 2;
        else if (strncmp(path, "//", 2) == 0)
            return store_fail(err, -EINVAL, url,
                              "a host in a SQLite URL; use sqlite:PATH or sqlite:///ABSOLUTE/PATH");
    } else {
        const char *colon = strstr(url, "://");
        if (colon)
            return store_fail(err, -EINVAL, url,
                              "unknown kind of store '%.*s'; use sqlite:PATH or postgres://...",
                              (int)(colon - url), url);
    }
    if (!*path)
        return store_fail(err, -EINVAL, url, "no file name; use sqlite:PATH");
    if (strcmp(path, ":memory:") == 0 || has_prefix(path, "file:"))
        return store_fail(err, -EINVAL, url,
                          "the store must be a file name (it is opened twice, for writing and "
                          "reading)");
    return sqlite_open(path, ret, err);
}

void store_close(Store *s)
{
    if (s)
        s->ops->close(s);
}

int store_schema_version(Store *s)
{
    return s->schema_version;
}

int store_ping(Store *s)
{
    return s->ops->ping(s);
}

void store_job_free(StoreJob *j)
{
    if (!j)
        return;
    free(j->name);
    free(j->team);
    free(j->project);
    free(j->spec_json);
    free(j->checkpoint);
    free(j->placement_json);
    free(j->user);
    j->name = j->team = j->project = j->spec_json = j->checkpoint = j->placement_json = NULL;
    j->user = NULL;
}

int store_write(Store *s, StoreWrite *w, Buf *err)
{
    if (!w)
        return -EINVAL;
    if (!w->n_inserts && !w->n_updates && !w->n_events && !w->n_usage && !w->n_learned &&
        !w->n_forget)
        return 0;
    return s->ops->write(s, w, err);
}

int store_jobs_load(Store *s, int (*fn)(void *arg, StoreJob *j), void *arg)
{
    return s->ops->jobs_load(s, fn, arg);
}

int store_jobs_load_live(Store *s, int64_t ended_since_ms, int (*fn)(void *arg, StoreJob *j),
                         void *arg)
{
    return s->ops->jobs_load_live(s, ended_since_ms, fn, arg);
}

int store_job_get(Store *s, int64_t id, StoreJob *ret)
{
    return s->ops->job_get(s, id, ret);
}

int store_jobs_page(Store *s, const StoreJobQuery *q, int (*fn)(void *arg, StoreJob *j), void *arg)
{
    return s->ops->jobs_page(s, q, fn, arg);
}

int store_events_for(Store *s, int64_t job,
                     int (*fn)(void *arg, int64_t t_ms, const char *type, const char *detail),
                     void *arg)
{
    return s->ops->events_for(s, job, fn, arg);
}

int store_usage_query(Store *s, int64_t from_ms, int64_t to_ms,
                      int (*fn)(void *arg, const StoreUsage *u), void *arg)
{
    if (from_ms > to_ms)
        return -EINVAL;
    return s->ops->usage_query(s, from_ms, to_ms, fn, arg);
}

int store_node_span_open(Store *s, const StoreNodeSpan *span, int64_t *ret_id)
{
    return store_node_spans_open(s, span, 1, ret_id);
}

int store_node_spans_open(Store *s, const StoreNodeSpan *spans, size_t n, int64_t *ret_ids)
{
    if (n && (!spans || !ret_ids))
        return -EINVAL;
    for (size_t i = 0; i < n; i++) {
        const StoreNodeSpan *sp = &spans[i];
        if (!sp->node || !*sp->node || !sp->basis || sp->end_ms < sp->start_ms ||
            sp->price_micro_usd < 0)
            return -EINVAL;
    }
    return n ? s->ops->span_open(s, spans, n, ret_ids) : 0;
}

int store_node_spans_end(Store *s, const int64_t *ids, size_t n, int64_t end_ms, bool close)
{
    if (n && !ids)
        return -EINVAL;
    if (!n)
        return 0;
    return s->ops->spans_end(s, ids, n, end_ms, close);
}

int store_node_spans_close_open(Store *s, size_t *ret_n)
{
    return s->ops->spans_close_open(s, ret_n);
}

int store_node_spans_query(Store *s, int64_t from_ms, int64_t to_ms,
                           int (*fn)(void *arg, const StoreNodeSpan *span), void *arg)
{
    if (from_ms > to_ms || !fn)
        return -EINVAL;
    return s->ops->spans_query(s, from_ms, to_ms, fn, arg);
}

int store_team_set(Store *s, const char *name, double guaranteed_gpus, double burst_gpus,
                   double weight)
{
    /* written as !(x >= 0) so that NaN is refused too */
    if (!name || !*name || !(guaranteed_gpus >= 0) || !(burst_gpus >= 0) || !(weight >= 0) ||
        guaranteed_gpus > 1e12 || burst_gpus > 1e12 || weight > 1e12)
        return -EINVAL;
    return s->ops->team_set(s, name, guaranteed_gpus, burst_gpus, weight);
}

int store_teams_load(Store *s,
                     int (*fn)(void *arg, const char *name, double guaranteed_gpus,
                               double burst_gpus, double weight),
                     void *arg)
{
    return s->ops->teams_load(s, fn, arg);
}

int store_team_budget_set(Store *s, const char *name, double budget_gpu_hours)
{
    if (!name || !*name || !(budget_gpu_hours >= 0) || budget_gpu_hours > 1e12)
        return -EINVAL;
    return s->ops->team_budget_set(s, name, budget_gpu_hours);
}

int store_team_budgets_load(Store *s,
                            int (*fn)(void *arg, const char *name, double budget_gpu_hours),
                            void *arg)
{
    return s->ops->team_budgets_load(s, fn, arg);
}

static bool fits(const char *s, size_t size)
{
    return memchr(s, '\0', size) != NULL;
}

int store_token_insert(Store *s, const uint8_t hash[STORE_TOKEN_HASH_LEN], const StoreToken *t,
                       int64_t *ret_id)
{
    if (!hash || !t || !t->role[0] || !fits(t->role, sizeof(t->role)) ||
        !fits(t->team, sizeof(t->team)) || !fits(t->node, sizeof(t->node)) ||
        !fits(t->name, sizeof(t->name)) || !fits(t->user, sizeof(t->user)) || t->revoked_ms != -1 ||
        t->expires_ms < -1)
        return -EINVAL;
    return s->ops->token_insert(s, hash, t, ret_id);
}

int store_token_find(Store *s, const uint8_t hash[STORE_TOKEN_HASH_LEN], StoreToken *ret)
{
    if (!hash)
        return -EINVAL;
    return s->ops->token_find(s, hash, ret);
}

int store_token_count(Store *s, int64_t *ret)
{
    return s->ops->token_count(s, ret);
}

int store_token_list(Store *s, int (*fn)(void *arg, const StoreToken *t), void *arg)
{
    if (!fn)
        return -EINVAL;
    return s->ops->token_list(s, fn, arg);
}

int store_token_revoke(Store *s, int64_t id, int64_t now_ms)
{
    if (id < 1 || now_ms < 0)
        return -EINVAL;
    return s->ops->token_revoke(s, id, now_ms);
}

int store_server_id(Store *s, char ret[STORE_SERVER_ID_LEN + 1])
{
    return s->ops->server_id(s, ret);
}

int store_mig_set(Store *s, const char *node, unsigned index, const char *layout_json)
{
    if (!node || !*node || !layout_json)
        return -EINVAL;
    return s->ops->mig_set(s, node, index, layout_json);
}

int store_mig_load(Store *s,
                   int (*fn)(void *arg, const char *node, unsigned index, const char *layout_json),
                   void *arg)
{
    return s->ops->mig_load(s, fn, arg);
}

int store_learned_load(Store *s,
                       int (*fn)(void *arg, const char *cls, uint64_t peak_mib, unsigned ooms),
                       void *arg)
{
    return s->ops->learned_load(s, fn, arg);
}

int store_lead(Store *s, const char *url, int64_t now_ms, Buf *err)
{
    if (now_ms < 0)
        return -EINVAL;
    return s->ops->lead(s, url, now_ms, err);
}

bool store_leading(Store *s, bool check)
{
    return s->ops->leading(s, check);
}

int store_leader(Store *s, char *url, size_t n, int64_t *since_ms)
{
    if (!url || !n)
        return -EINVAL;
    int64_t since;
    return s->ops->leader(s, url, n, since_ms ? since_ms : &since);
}
