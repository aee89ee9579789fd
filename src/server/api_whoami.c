/* api_whoami.c: GET /api/v1/whoami: the caller as its token resolved (role, team,
 * user, token id), so a client (the portal) can show what the role may do without
 * trying it. Every role but an agent's may ask; the route table has already checked
 * that. */
#include "server/api.h"

void api_whoami(Server *s, const HttpRequest *rq, HttpResponse *rp)
{
    const Caller *who = &rq->who;
    json_t *o = json_object();
    json_object_set_new(o, "role", json_string(role_name(who->role)));
    json_object_set_new(o, "team", who->team[0] ? json_string(who->team) : json_null());
    json_object_set_new(o, "user", who->user[0] ? json_string(who->user) : json_null());
    json_object_set_new(o, "token_id", json_integer(who->token_id));
    http_reply_json(rp, 200, o);
}
