/* api_teams.c: the team endpoints: each team's quota (from the cluster file, or as an
 * admin changed it), what it holds now, inside its guarantee and borrowed (the
 * scheduler's tenancy, as of its last cycle), its jobs, its share of the decayed usage
 * that orders the queue, and its monthly GPU-hour budget and how much of it is burnt. */
#include "server/api.h"

#include "server/metering.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct TeamCounts {
    uint32_t pending, running;
} TeamCounts;

/* Pending and holding jobs per team slot. */
static TeamCounts *count_jobs(Server *s)
{
    TeamCounts *tc = calloc(s->c->n_teams + 1, sizeof(*tc));
    if (!tc)
        return NULL;
    for (size_t k = 0; k < s->n_holding; k++) {
        uint32_t t = s->holding[k]->sj.team;
        if (t < s->c->n_teams)
            tc[t].running++;
    }
    for (size_t i = 0; i < s->n_resident; i++) {
        const ServerJob *j = s->resident[i];
        if (j->st.state == JOB_PENDING && j->sj.team < s->c->n_teams)
            tc[j->sj.team].pending++;
    }
    return tc;
}

static json_t *team_json(Server *s, uint32_t t, const TeamCounts *tc)
{
    const Team *tm = &s->c->teams[t];
    const Tenancy *ten = &s->sched.ten;
    const TeamState *ts = t < ten->n_teams ? &ten->teams[t] : NULL;
    double total = 0;
    for (size_t i = 0; i < ten->n_teams; i++)
        total += ten->teams[i].usage;
    json_t *o = json_object();
    json_object_set_new(o, "name", json_string(tm->name));
    json_object_set_new(o, "guaranteed_gpus", api_json_num(tm->guaranteed_gpus));
    json_object_set_new(o, "burst_gpus", api_json_num(tm->burst_gpus));
    json_object_set_new(o, "weight", api_json_num(tm->weight));
    json_t *projects = json_array();
    for (size_t p = 0; p < tm->n_projects; p++)
        json_array_append_new(projects, json_string(tm->projects[p]));
    json_object_set_new(o, "projects", projects);
    json_t *capacity = json_array();
    for (int tier = 0; tier < TIER_COUNT; tier++)
        if (!tm->tiers || (tm->tiers & (1u << tier)))
            json_array_append_new(capacity, json_string(tier_name((Tier)tier)));
    json_object_set_new(o, "capacity", capacity);
    double held = ts ? ts->held_units / GPU_UNITS : 0;
    double guaranteed = ts ? ts->guaranteed_held / GPU_UNITS : 0;
    json_object_set_new(o, "held_gpus", api_json_num(held));
    json_object_set_new(o, "guaranteed_held_gpus", api_json_num(guaranteed));
    json_object_set_new(o, "borrowed_gpus",
                        api_json_num(held > guaranteed ? held - guaranteed : 0));
    json_object_set_new(o, "pending_jobs", json_integer(tc[t].pending));
    json_object_set_new(o, "running_jobs", json_integer(tc[t].running));
    json_object_set_new(o, "fair_share_usage",
                        api_json_num(ts && total > 0 ? ts->usage / total : 0));
    double used = ts ? (double)ts->month_micro_hours / 1e6 : 0;
    json_object_set_new(o, "budget_gpu_hours", api_json_num(tm->budget_gpu_hours));
    json_object_set_new(o, "used_gpu_hours_month", api_json_num(used));
    json_object_set_new(o, "burn_pct",
                        tm->budget_gpu_hours > 0
                            ? api_json_num(round(used / tm->budget_gpu_hours * 1000) / 10)
                            : json_null());
    json_object_set_new(o, "over_budget", json_boolean(ts && ts->over_budget));
    return o;
}

void api_teams_list(Server *s, const HttpRequest *rq, HttpResponse *rp)
{
    json_t *arr = json_array();
    server_lock(s);
    TeamCounts *tc = count_jobs(s);
    for (size_t t = 0; tc && t < s->c->n_teams; t++)
        json_array_append_new(arr, team_json(s, (uint32_t)t, tc));
    pthread_mutex_unlock(&s->lock);
    if (!tc) {
        json_decref(arr);
        http_reply_error(rp, 500, "out of memory");
        return;
    }
    free(tc);
    http_reply_json(rp, 200, json_pack("{s:o}", "teams", arr));
}

static void reply_team(Server *s, const char *name, HttpResponse *rp)
{
    server_lock(s);
    int t = cluster_find_team(s->c, name);
    TeamCounts *tc = t >= 0 ? count_jobs(s) : NULL;
    json_t *o = tc ? team_json(s, (uint32_t)t, tc) : NULL;
    pthread_mutex_unlock(&s->lock);
    free(tc);
    if (t < 0)
        http_reply_error(rp, 404, "no team '%s' (teams are declared in the cluster file)", name);
    else
        http_reply_json(rp, 200, o);
}

void api_team_get(Server *s, const HttpRequest *rq, HttpResponse *rp)
{
    reply_team(s, rq->params[0], rp);
}

void api_team_put(Server *s, const HttpRequest *rq, HttpResponse *rp)
{
    json_t *body = http_body_json(rq, rp);
    if (!body)
        return;
    enum { F_GUARANTEED, F_BURST, F_WEIGHT, F_BUDGET, F_COUNT };
    static const char *const fields[F_COUNT] = {"guaranteed_gpus", "burst_gpus", "weight",
                                                "budget_gpu_hours_per_month"};
    double val[F_COUNT];
    bool given[F_COUNT] = {false, false, false, false};
    const char *key;
    json_t *v;
    json_object_foreach(body, key, v)
    {
        size_t f = 0;
        while (f < F_COUNT && strcmp(key, fields[f]))
            f++;
        if (f == F_COUNT) {
            http_reply_error(rp, 400,
                             "unknown field '%s' (a team takes guaranteed_gpus, burst_gpus, "
                             "weight, budget_gpu_hours_per_month)",
                             key);
            goto out;
        }
        if (!json_is_number(v) || !(json_number_value(v) >= 0) || !isfinite(json_number_value(v))) {
            http_reply_error(rp, 400, "field '%s': expected a number of at least 0", key);
            goto out;
        }
        val[f] = json_number_value(v);
        given[f] = true;
    }
    bool quota = given[F_GUARANTEED] || given[F_BURST] || given[F_WEIGHT];
    if (!quota && !given[F_BUDGET]) {
        http_reply_error(rp, 400,
                         "nothing to change: give guaranteed_gpus, burst_gpus, weight or "
                         "budget_gpu_hours_per_month");
        goto out;
    }
    if (given[F_BUDGET] && val[F_BUDGET] > 1e12) {
        http_reply_error(rp, 400, "field 'budget_gpu_hours_per_month': at most 1e12 GPU-hours");
        goto out;
    }
    /* the quota first: it is the one that may be refused (burst below the guarantee) */
    Buf err = {0};
    int status =
        !quota ? 200
               : server_team_set(s, rq->params[0], given[F_GUARANTEED] ? &val[F_GUARANTEED] : NULL,
                                 given[F_BURST] ? &val[F_BURST] : NULL,
                                 given[F_WEIGHT] ? &val[F_WEIGHT] : NULL, &err);
    if (status / 100 == 2 && given[F_BUDGET])
        status = metering_set_budget(s, rq->params[0], val[F_BUDGET], &err);
    if (status / 100 == 2)
        reply_team(s, rq->params[0], rp);
    else
        http_reply_error(rp, status, "%s", buf_str(&err));
    buf_free(&err);
out:
    json_decref(body);
}
