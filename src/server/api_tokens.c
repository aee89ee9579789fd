/* api_tokens.c: POST /api/v1/tokens (admin): a new token for a role, shown once in
 * the reply; the store keeps its hash (auth.c). An agent token may be bound to one node,
 * as Kubernetes' node authorizer binds a kubelet's credentials. */
#include "server/api.h"
#include "server/auth.h"

#include <string.h>

void api_tokens_create(Server *s, const HttpRequest *rq, HttpResponse *rp)
{
    json_t *body = http_body_json(rq, rp);
    if (!body)
        return;
    const char *key;
    json_t *v;
    json_object_foreach(body, key, v)
    {
        if (strcmp(key, "role") && strcmp(key, "team") && strcmp(key, "name") &&
            strcmp(key, "node")) {
            http_reply_error(rp, 400, "unknown field '%s' (a token takes role, team, node, name)",
                             key);
            goto out;
        }
        if (!json_is_string(v) && !(json_is_null(v) && strcmp(key, "role"))) {
            http_reply_error(rp, 400, "field '%s': expected a string", key);
            goto out;
        }
    }
    const char *role_s = json_string_value(json_object_get(body, "role"));
    const char *team = json_string_value(json_object_get(body, "team"));
    const char *name = json_string_value(json_object_get(body, "name"));
    const char *node = json_string_value(json_object_get(body, "node"));
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
    int r = auth_token_create(s->store, (Role)role, team, node, name, server_now_ms(), token, &id,
                              &err);
    if (r < 0) {
        http_reply_error(rp, 500, "%s", buf_str(&err));
        buf_free(&err);
        goto out;
    }
    http_reply_json(rp, 201,
                    json_pack("{s:I,s:s,s:s,s:s?,s:s?,s:s?}", "id", (json_int_t)id, "token", token,
                              "role", role_name((Role)role), "team", team, "node", node, "name",
                              name));
    memset(token, 0, sizeof(token));
out:
    json_decref(body);
}
