/* api_tokens.c: the token endpoints. POST /api/v1/tokens (admin): a new token for a
 * role, shown once in the reply; the store keeps its hash (auth.c). An agent token may
 * be bound to one node, as Kubernetes' node authorizer binds a kubelet's credentials; a
 * token may name the user it acts for and expire. GET /api/v1/tokens: every token for
 * an admin, a caller's own (the token it calls with, and others of its user) for
 * anyone else; never a secret or a hash. DELETE /api/v1/tokens/{id} (admin): revoke;
 * the row stays (jobs and the audit log name the token by id) and the cache forgets it
 * before the reply, so the token's very next request gets 401. */
#include "server/api.h"
#include "server/auth.h"

#include "util/macro.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A token never made to last longer than this many seconds (100 years): the expiry in
 * ms must not overflow. */
#define TOKEN_MAX_LIFETIME_S (100LL * 366 * 24 * 3600)

/* Revocations one at a time: two admins revoking the last two admin tokens at once
 * would each see the other's as still active. */
static pthread_mutex_t revoke_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *const create_fields[] = {"role", "team",       "node",      "name",
                                            "user", "expires_in", "expires_at"};

/* "2026-12-31T00:00:00Z" (UTC, RFC 3339 without a fraction) as ms since the epoch, or
 * -1 when it is not that. */
static int64_t parse_utc(const char *s)
{
    struct tm tm = {0};
    const char *end = strptime(s, "%Y-%m-%dT%H:%M:%SZ", &tm);
    if (!end || *end)
        return -1;
    time_t t = timegm(&tm);
    return t < 0 ? -1 : (int64_t)t * 1000;
}

/* When the token asked for stops working (ms), -1 never; -2 with the reply made when
 * the fields are wrong. */
static int64_t expiry(const json_t *body, int64_t now_ms, HttpResponse *rp)
{
    json_t *in = json_object_get(body, "expires_in"), *at = json_object_get(body, "expires_at");
    if (in && at) {
        http_reply_error(rp, 400, "give 'expires_in' or 'expires_at', not both");
        return -2;
    }
    if (in) {
        if (!json_is_integer(in) || json_integer_value(in) < 1 ||
            json_integer_value(in) > TOKEN_MAX_LIFETIME_S) {
            http_reply_error(rp, 400,
                             "field 'expires_in': expected a whole number of seconds from 1 to "
                             "%lld",
                             TOKEN_MAX_LIFETIME_S);
            return -2;
        }
        return now_ms + json_integer_value(in) * 1000;
    }
    if (at) {
        int64_t t = json_is_string(at) ? parse_utc(json_string_value(at)) : -1;
        if (t < 0) {
            http_reply_error(rp, 400,
                             "field 'expires_at': expected a UTC time such as "
                             "\"2026-12-31T00:00:00Z\"");
            return -2;
        }
        if (t <= now_ms) {
            http_reply_error(rp, 400, "field 'expires_at': %s is not in the future",
                             json_string_value(at));
            return -2;
        }
        if (t - now_ms > TOKEN_MAX_LIFETIME_S * 1000) {
            http_reply_error(rp, 400, "field 'expires_at': more than 100 years away");
            return -2;
        }
        return t;
    }
    return -1;
}

static json_t *ms_or_null(int64_t ms)
{
    return ms >= 0 ? json_integer(ms) : json_null();
}

static json_t *str_or_null(const char *s)
{
    return s && *s ? json_string(s) : json_null();
}

static const char *token_state(const StoreToken *t, int64_t now_ms)
{
    if (t->revoked_ms >= 0)
        return "revoked";
    if (t->expires_ms >= 0 && now_ms >= t->expires_ms)
        return "expired";
    return "active";
}

static json_t *token_json(Server *s, const StoreToken *t, int64_t now_ms)
{
    json_t *o = json_object();
    json_object_set_new(o, "id", json_integer(t->id));
    json_object_set_new(o, "name", str_or_null(t->name));
    json_object_set_new(o, "role", json_string(t->role));
    json_object_set_new(o, "team", str_or_null(t->team));
    json_object_set_new(o, "node", str_or_null(t->node));
    json_object_set_new(o, "user", str_or_null(t->user));
    json_object_set_new(o, "state", json_string(token_state(t, now_ms)));
    json_object_set_new(o, "created_ms", json_integer(t->created_ms));
    json_object_set_new(o, "expires_ms", ms_or_null(t->expires_ms));
    json_object_set_new(o, "revoked_ms", ms_or_null(t->revoked_ms));
    json_object_set_new(o, "last_used_ms", ms_or_null(auth_cache_last_used(s->auth_cache, t->id)));
    return o;
}

static bool known_field(const char *key)
{
    for (size_t i = 0; i < ARRAY_SIZE(create_fields); i++)
        if (!strcmp(key, create_fields[i]))
            return true;
    return false;
}

void api_tokens_create(Server *s, const HttpRequest *rq, HttpResponse *rp)
{
    json_t *body = http_body_json(rq, rp);
    if (!body)
        return;
    const char *key;
    json_t *v;
    json_object_foreach(body, key, v)
    {
        if (!known_field(key)) {
            http_reply_error(rp, 400,
                             "unknown field '%s' (a token takes role, team, node, name, user, "
                             "expires_in, expires_at)",
                             key);
            goto out;
        }
        if (!strncmp(key, "expires_", 8))
            continue; /* checked by expiry() */
        if (!json_is_string(v) && !(json_is_null(v) && strcmp(key, "role"))) {
            http_reply_error(rp, 400, "field '%s': expected a string", key);
            goto out;
        }
    }
    const char *role_s = json_string_value(json_object_get(body, "role"));
    const char *team = json_string_value(json_object_get(body, "team"));
    const char *name = json_string_value(json_object_get(body, "name"));
    const char *node = json_string_value(json_object_get(body, "node"));
    const char *user = json_string_value(json_object_get(body, "user"));
    if (!role_s) {
        http_reply_error(rp, 400, "field 'role' is required (admin, lead, member, viewer, agent)");
        goto out;
    }
    int role = role_from_name(role_s);
    if (role < 0) {
        http_reply_error(rp, 400,
                         "field 'role': unknown role '%s' (admin, lead, member, viewer, agent)",
                         role_s);
        goto out;
    }
    bool needs_team = role == ROLE_LEAD || role == ROLE_MEMBER;
    if (team && !*team)
        team = NULL;
    if (needs_team && !team) {
        http_reply_error(rp, 400, "field 'team' is required for a %s", role_s);
        goto out;
    }
    if (!needs_team && team) {
        http_reply_error(rp, 400, "field 'team': a%s %s token belongs to no team",
                         role == ROLE_ADMIN || role == ROLE_AGENT ? "n" : "", role_s);
        goto out;
    }
    if (team && strlen(team) >= sizeof(((Caller *)0)->team)) {
        http_reply_error(rp, 400, "field 'team': too long");
        goto out;
    }
    if (node && !*node)
        node = NULL;
    if (node && role != ROLE_AGENT) {
        http_reply_error(rp, 400, "field 'node': only an agent token is bound to a node");
        goto out;
    }
    if (node && strlen(node) >= sizeof(((Caller *)0)->node)) {
        http_reply_error(rp, 400, "field 'node': too long");
        goto out;
    }
    if (name && strlen(name) >= sizeof(((StoreToken *)0)->name)) {
        http_reply_error(rp, 400, "field 'name': at most %zu characters",
                         sizeof(((StoreToken *)0)->name) - 1);
        goto out;
    }
    if (user && !*user)
        user = NULL;
    if (user && strlen(user) >= sizeof(((StoreToken *)0)->user)) {
        http_reply_error(rp, 400, "field 'user': at most %zu characters",
                         sizeof(((StoreToken *)0)->user) - 1);
        goto out;
    }
    for (const char *p = user; p && *p; p++) {
        /* the audit log and the CLI's tables show it as one word */
        if ((unsigned char)*p <= ' ' || *p == 0x7f || *p == '"' || *p == '=') {
            http_reply_error(rp, 400, "field 'user': no spaces, quotes, '=' or control characters");
            goto out;
        }
    }
    int64_t now = server_now_ms();
    int64_t expires_ms = expiry(body, now, rp);
    if (expires_ms == -2)
        goto out;
    if (team || node) {
        pthread_mutex_lock(&s->lock);
        int t = team ? cluster_find_team(s->c, team) : 0;
        int n = node ? cluster_find_node(s->c, node) : 0;
        pthread_mutex_unlock(&s->lock);
        if (t < 0) {
            http_reply_error(rp, 400, "field 'team': the cluster has no team '%s'", team);
            goto out;
        }
        if (n < 0) {
            http_reply_error(rp, 400, "field 'node': the cluster has no node '%s'", node);
            goto out;
        }
    }
    char token[AUTH_TOKEN_SIZE];
    int64_t id;
    Buf err = {0};
    AuthTokenSpec spec = {.role = (Role)role,
                          .team = team,
                          .node = node,
                          .name = name,
                          .user = user,
                          .expires_ms = expires_ms};
    int r = auth_token_create(s->store, &spec, now, token, &id, &err);
    if (r < 0) {
        http_reply_error(rp, 500, "%s", buf_str(&err));
        buf_free(&err);
        goto out;
    }
    http_reply_json(rp, 201,
                    json_pack("{s:I,s:s,s:s,s:s?,s:s?,s:s?,s:s?,s:o}", "id", (json_int_t)id,
                              "token", token, "role", role_name((Role)role), "team", team, "node",
                              node, "name", name, "user", user, "expires_ms",
                              ms_or_null(expires_ms)));
    memset(token, 0, sizeof(token));
out:
    json_decref(body);
}

typedef struct ListCtx {
    Server *s;
    const Caller *who;
    int64_t now_ms;
    json_t *arr;
    StoreToken found; /* revoke: the token named */
    int64_t want_id;
    size_t active_admins; /* revoke: active admin tokens other than want_id */
} ListCtx;

/* An admin sees every token; anyone else the token it calls with and the others of
 * its user (a user is a person: their tokens are theirs to see). */
static bool may_see(const Caller *who, const StoreToken *t)
{
    return who->role == ROLE_ADMIN || who->token_id == t->id ||
           (who->user[0] && !strcmp(who->user, t->user));
}

static int add_token(void *arg, const StoreToken *t)
{
    ListCtx *l = arg;
    if (!may_see(l->who, t))
        return 0;
    json_t *o = token_json(l->s, t, l->now_ms);
    return o && !json_array_append_new(l->arr, o) ? 0 : -ENOMEM;
}

void api_tokens_list(Server *s, const HttpRequest *rq, HttpResponse *rp)
{
    ListCtx l = {.s = s, .who = &rq->who, .now_ms = server_now_ms(), .arr = json_array()};
    int r = l.arr ? store_token_list(s->store, add_token, &l) : -ENOMEM;
    if (r < 0) {
        json_decref(l.arr);
        http_reply_error(rp, 500, "%s",
                         r == -ENOMEM ? "out of memory" : "cannot read the tokens from the store");
        return;
    }
    http_reply_json(rp, 200, json_pack("{s:o}", "tokens", l.arr));
}

static int find_token(void *arg, const StoreToken *t)
{
    ListCtx *l = arg;
    if (t->id == l->want_id)
        l->found = *t;
    else if (!strcmp(t->role, "admin") && !strcmp(token_state(t, l->now_ms), "active"))
        l->active_admins++;
    return 0;
}

void api_tokens_revoke(Server *s, const HttpRequest *rq, HttpResponse *rp)
{
    const char *p = rq->params[0];
    int64_t id = 0;
    if (strspn(p, "0123456789") == strlen(p) && strlen(p) <= 18 && *p != '0')
        id = strtoll(p, NULL, 10);
    if (id < 1) {
        http_reply_error(rp, 404, "no token %s (a token is named by its id: gpuorch token list)",
                         p);
        return;
    }
    ListCtx l = {.s = s, .who = &rq->who, .now_ms = server_now_ms(), .want_id = id};
    pthread_mutex_lock(&revoke_lock);
    int r = store_token_list(s->store, find_token, &l);
    int64_t now = server_now_ms();
    if (r < 0)
        http_reply_error(rp, 500, "cannot read the tokens from the store");
    else if (!l.found.id)
        http_reply_error(rp, 404, "no token %lld", (long long)id);
    /* nobody could manage tokens any more; make another admin token first */
    else if (!strcmp(l.found.role, "admin") && !strcmp(token_state(&l.found, l.now_ms), "active") &&
             !l.active_admins)
        http_reply_error(rp, 409,
                         "token %lld is the last active admin token: create another admin "
                         "token before revoking it",
                         (long long)id);
    else if ((r = store_token_revoke(s->store, id, now)) == -EALREADY)
        http_reply_error(rp, 409, "token %lld was revoked already", (long long)id);
    else if (r == -ENOENT)
        http_reply_error(rp, 404, "no token %lld", (long long)id);
    else if (r < 0)
        http_reply_error(rp, 500, "cannot revoke token %lld: the store failed", (long long)id);
    pthread_mutex_unlock(&revoke_lock);
    if (rp->status)
        return;
    /* durable first, then forgotten: from here the token's next request asks the store */
    auth_cache_forget(s->auth_cache, id);
    l.found.revoked_ms = now;
    http_reply_json(rp, 200, token_json(s, &l.found, now));
}
