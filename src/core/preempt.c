/* preempt.c: victim selection (the rules are in preempt.h). Victims are taken out of the
 * cluster tentatively (their allocations released, MIG layouts kept) to see whether the
 * job would fit, and always put back before returning. */
#include "core/preempt.h"
#include "core/room.h"

#include "util/macro.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct Cand {
    SchedJob *j;
    int tier;    /* lower goes first */
    double cost; /* lower goes first: lost work, or an order key */
} Cand;

/* The order of a set: worst tier, total cost, count, longest grace (lower is better). */
typedef struct SetKey {
    int tier;
    double cost;
    size_t count;
    int64_t grace_ms;
} SetKey;

static bool key_better(const SetKey *a, const SetKey *b)
{
    if (a->tier != b->tier)
        return a->tier < b->tier;
    if (a->cost != b->cost)
        return a->cost < b->cost;
    if (a->count != b->count)
        return a->count < b->count;
    return a->grace_ms < b->grace_ms;
}

static double attained_now(const SchedJob *j)
{
    return j->attained_gpu_ms;
}

bool preempt_old_enough(const Sched *s, int64_t now, const SchedJob *j, const SchedJob *v)
{
    return j->priority == PRIO_PRODUCTION || now - v->run_start_ms >= s->cfg.min_runtime_ms;
}

static bool candidate(const Sched *s, int64_t now, const SchedJob *req, SchedJob *v, Cand *ret)
{
    if (!v->running || v->stopping || v == req || !v->pl.n_workers)
        return false;
    switch (s->cfg.preempt) {
    case SCHED_PREEMPT_QUOTA: {
        /* borrowed work is reclaimable whether or not it can checkpoint (as in Kueue);
         * guaranteed work goes only if it is preemptible */
        if (v->priority == PRIO_PRODUCTION || !preempt_old_enough(s, now, req, v))
            return false;
        int tier;
        /* another team's borrowed work: reclaiming the job's own team's would free
         * nothing for the team (see preempt.h) */
        if (v->borrowed && v->team != req->team)
            tier = 0;
        else if (v->preemptible && v->priority > req->priority &&
                 !(req->priority >= PRIO_NORMAL && v->team != req->team))
            tier = 1;
        else
            return false;
        double since = (double)(now - v->last_checkpoint_ms);
        *ret = (Cand){.j = v, .tier = tier, .cost = v->units * (since > 0 ? since : 0)};
        return true;
    }
    case SCHED_PREEMPT_PRIORITY:
        if (v->priority <= req->priority)
            return false;
        /* the least important first: its rank is how far above the lowest class it is */
        *ret = (Cand){.j = v, .tier = PRIO_COUNT - 1 - v->priority, .cost = 0};
        return true;
    case SCHED_PREEMPT_TIRESIAS:
        if (attained_now(req) >= s->cfg.tiresias_threshold_gpu_ms ||
            attained_now(v) < s->cfg.tiresias_threshold_gpu_ms)
            return false;
        /* the latest submitted first */
        *ret = (Cand){.j = v, .tier = 0, .cost = -(double)v->submit_ms};
        return true;
    default:
        return false;
    }
}

static int cand_cmp(const void *a, const void *b)
{
    const Cand *x = a, *y = b;
    if (x->tier != y->tier)
        return x->tier < y->tier ? -1 : 1;
    if (x->cost != y->cost)
        return x->cost < y->cost ? -1 : 1;
    if (x->j->grace_ms != y->j->grace_ms)
        return x->j->grace_ms < y->j->grace_ms ? -1 : 1;
    return (x->j->id > y->j->id) - (x->j->id < y->j->id);
}

/* Cheapest per GPU unit freed first, inside a tier. */
static int cand_ratio_cmp(const void *a, const void *b)
{
    const Cand *x = a, *y = b;
    if (x->tier != y->tier)
        return x->tier < y->tier ? -1 : 1;
    double rx = x->cost / (x->j->units > 0 ? x->j->units : 1);
    double ry = y->cost / (y->j->units > 0 ? y->j->units : 1);
    if (rx != ry)
        return rx < ry ? -1 : 1;
    return cand_cmp(a, b);
}

static void take_out(Cluster *c, SchedJob *v)
{
    place_release(c, &v->pl);
}

static void put_back(Cluster *c, SchedJob *v)
{
    for (size_t w = 0; w < v->pl.n_workers; w++)
        cluster_apply_worker(c, &v->pl.workers[w]);
}

/* A trial over the whole cluster keeps r's room by domain (room.h), so that a placement
 * is tried only where capacity alone could hold it, and the nodes its last successful
 * placement used: putting back a victim elsewhere leaves that placement valid. */
typedef struct Trial {
    Room room;
    uint8_t *used; /* per node: the last placement found used it */
    uint32_t *used_list;
    size_t n_used;
} Trial;

static int trial_init(Trial *t, Sched *s, const Request *r)
{
    *t = (Trial){0};
    size_t nn = s->c->n_nodes ? s->c->n_nodes : 1;
    t->used = calloc(nn, 1);
    t->used_list = malloc(nn * sizeof(*t->used_list));
    if (!t->used || !t->used_list || room_init(&t->room, s->ctx, s->c, r) < 0) {
        free(t->used);
        free(t->used_list);
        return -ENOMEM;
    }
    return 0;
}

static void trial_free(Trial *t)
{
    room_free(&t->room);
    free(t->used);
    free(t->used_list);
}

/* v's allocation was taken out or put back: its nodes' room changed. */
static void trial_moved(Trial *t, Cluster *c, const SchedJob *v)
{
    for (size_t w = 0; w < v->pl.n_workers; w++)
        room_update(&t->room, c, v->pl.workers[w].node);
}

static bool trial_uses(const Trial *t, const SchedJob *v)
{
    for (size_t w = 0; w < v->pl.n_workers; w++)
        if (t->used[v->pl.workers[w].node])
            return true;
    return false;
}

/* Does j fit now: on node (one worker) or anywhere (node = UINT32_MAX, the placer; t,
 * unless NULL, skips the hopeless tries and remembers where it fit). */
static int fits(Sched *s, const Request *r, uint32_t node, Placement *look, Trial *t)
{
    if (node != UINT32_MAX)
        return place_node_capacity(s->ctx, s->c, node, r, 1) > 0;
    if (t && !room_enough(&t->room))
        return 0;
    int placed = place_job(s->ctx, s->c, r, look, NULL);
    if (placed == 1 && t) {
        for (size_t i = 0; i < t->n_used; i++)
            t->used[t->used_list[i]] = 0;
        t->n_used = 0;
        for (size_t w = 0; w < look->n_workers; w++) {
            uint32_t n = look->workers[w].node;
            if (!t->used[n]) {
                t->used[n] = 1;
                t->used_list[t->n_used++] = n;
            }
        }
    }
    if (placed == 1 || look->n_workers) {
        place_release(s->c, look);
        for (size_t i = look->n_changes; i-- > 0;)
            cluster_set_mig(s->c, look->changes[i].node, look->changes[i].index,
                            &look->changes[i].before);
        placement_reset(look);
    }
    return placed;
}

static SetKey set_key(const Cand *c, size_t n)
{
    SetKey k = {.count = n};
    for (size_t i = 0; i < n; i++) {
        k.tier = MAX(k.tier, c[i].tier);
        k.cost += c[i].cost;
        k.grace_ms = MAX(k.grace_ms, c[i].j->grace_ms);
    }
    return k;
}

/* Take candidates in order until r fits (on node, or anywhere) and they hold at least
 * need_units (a team's quota to give back; 0 for room alone); then spare those not
 * needed, most expensive first. Leaves the chosen ones taken out; returns whether it
 * fits, with how many in *ret_n (0: it does not fit even with all of them, and all are
 * back). */
static int greedy(Sched *s, const Request *r, uint32_t node, Cand *c, size_t n, bool spare,
                  double need_units, Placement *look, size_t *ret_n)
{
    Trial trial, *t = NULL;
    if (node == UINT32_MAX && !place_draws(s->ctx)) {
        if (trial_init(&trial, s, r) < 0)
            return -ENOMEM;
        t = &trial;
    }
    size_t taken = 0;
    double units = 0;
    int ok = 0;
    for (size_t i = 0; i < n; i++) {
        take_out(s->c, c[i].j);
        if (t)
            trial_moved(t, s->c, c[i].j);
        taken++;
        units += c[i].j->units;
        if (units + 1e-6 < need_units)
            continue;
        ok = fits(s, r, node, look, t);
        if (ok < 0)
            break;
        if (ok)
            break;
    }
    if (ok <= 0) {
        for (size_t i = taken; i-- > 0;)
            put_back(s->c, c[i].j);
        *ret_n = 0;
        if (t)
            trial_free(t);
        return ok;
    }
    size_t kept = taken;
    if (spare) {
        /* try to spare each, the most expensive first; compact the ones still needed */
        bool *needed = calloc(taken, sizeof(*needed));
        if (!needed) {
            for (size_t i = taken; i-- > 0;)
                put_back(s->c, c[i].j);
            if (t)
                trial_free(t);
            return -ENOMEM;
        }
        for (size_t i = taken; i-- > 0;) {
            put_back(s->c, c[i].j);
            units -= c[i].j->units;
            int still = 0;
            if (units + 1e-6 >= need_units) {
                if (t)
                    trial_moved(t, s->c, c[i].j);
                /* away from the placement last found, it is not needed for it */
                still = t && !trial_uses(t, c[i].j) ? 1 : fits(s, r, node, look, t);
            }
            if (still < 0) {
                free(needed);
                if (t)
                    trial_free(t);
                return still;
            }
            if (!still) {
                take_out(s->c, c[i].j);
                if (t)
                    trial_moved(t, s->c, c[i].j);
                units += c[i].j->units;
                needed[i] = true;
            }
        }
        kept = 0;
        for (size_t i = 0; i < taken; i++)
            if (needed[i])
                c[kept++] = c[i];
        free(needed);
    }
    *ret_n = kept;
    if (t)
        trial_free(t);
    return 1;
}

/* Whether worker w is the placement's first on its node. */
static bool first_on_node(const Placement *pl, size_t w)
{
    for (size_t v = 0; v < w; v++)
        if (pl->workers[v].node == pl->workers[w].node)
            return false;
    return true;
}

/* The candidates by node: those holding a worker on node k are c[on[at[k]..at[k+1])],
 * in c's order, each listed once per node. *ret_at and *ret_on are malloc'd. */
static int by_node(const Cluster *c, const Cand *cand, size_t n, size_t **ret_at, size_t **ret_on)
{
    size_t nn = c->n_nodes;
    size_t *at = calloc(nn + 2, sizeof(*at));
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += cand[i].j->pl.n_workers;
    size_t *on = malloc((total ? total : 1) * sizeof(*on));
    if (!at || !on) {
        free(at);
        free(on);
        return -ENOMEM;
    }
    /* count each (candidate, node) once: a gang's workers may share a node */
    for (size_t i = 0; i < n; i++) {
        const Placement *pl = &cand[i].j->pl;
        for (size_t w = 0; w < pl->n_workers; w++)
            if (first_on_node(pl, w))
                at[pl->workers[w].node + 2]++;
    }
    for (size_t k = 2; k < nn + 2; k++)
        at[k] += at[k - 1];
    /* at[k + 1] is where node k's list is filled; it ends at its own start */
    for (size_t i = 0; i < n; i++) {
        const Placement *pl = &cand[i].j->pl;
        for (size_t w = 0; w < pl->n_workers; w++)
            if (first_on_node(pl, w))
                on[at[pl->workers[w].node + 1]++] = i;
    }
    *ret_at = at;
    *ret_on = on;
    return 0;
}

/* Keep the set c[0..n) if it beats the best so far. */
static void consider(const Cand *c, size_t n, Cand *best, size_t *n_best, SetKey *best_key)
{
    SetKey k = set_key(c, n);
    if (!*n_best || key_better(&k, best_key)) {
        memmove(best, c, n * sizeof(*best));
        *n_best = n;
        *best_key = k;
    }
}

int preempt_plan(Sched *s, int64_t now, const SchedJob *j, SchedJob **running, size_t n_running,
                 SchedJob ***ret, size_t *ret_n)
{
    *ret = NULL;
    *ret_n = 0;
    Cand *all = malloc((n_running ? n_running : 1) * sizeof(*all));
    Cand *trial = malloc((n_running ? n_running : 1) * sizeof(*trial));
    Cand *best = malloc((n_running ? n_running : 1) * sizeof(*best));
    Cand *here_c = malloc((n_running ? n_running : 1) * sizeof(*here_c));
    if (!all || !trial || !best || !here_c) {
        free(all);
        free(trial);
        free(best);
        free(here_c);
        return -ENOMEM;
    }
    size_t n_all = 0, n_best = 0;
    SetKey best_key = {0};
    int err = 0;
    Placement look = {0};
    size_t *at = NULL, *on = NULL;
    for (size_t i = 0; i < n_running; i++)
        if (candidate(s, now, j, running[i], &all[n_all]))
            n_all++;
    qsort(all, n_all, sizeof(*all), cand_cmp);
    Request r;
    place_effective_request(s->ctx->policy, &j->req, &r);
    r.workers = j->req.workers - (uint32_t)j->pl.n_workers;
    bool spare = s->cfg.preempt != SCHED_PREEMPT_TIRESIAS;
    if (n_all && (r.workers > 1 || s->cfg.preempt == SCHED_PREEMPT_TIRESIAS)) {
        /* a gang (or Tiresias): over the whole cluster */
        memcpy(trial, all, n_all * sizeof(*trial));
        size_t n = 0;
        err = greedy(s, &r, UINT32_MAX, trial, n_all, spare, 0, &look, &n);
        if (err > 0) {
            for (size_t i = n; i-- > 0;)
                put_back(s->c, trial[i].j);
            memcpy(best, trial, n * sizeof(*best));
            n_best = n;
        }
    } else if (n_all) {
        /* one worker: node by node, the cheapest set that makes room. On a node, three
         * tries: cheapest first, cheapest per GPU freed first, and each victim alone
         * (one big victim can lose less than two small ones that happen to be cheaper
         * each); the best of them counts. The candidates are listed by node once
         * (each in cost order), so a plan costs the candidates' workers and the nodes
         * they hold, not nodes times candidates. */
        err = by_node(s->c, all, n_all, &at, &on);
        for (size_t node = 0; node < s->c->n_nodes && err >= 0; node++) {
            size_t n = at[node + 1] - at[node];
            if (!n || !place_node_admits(s->c, (uint32_t)node, &r))
                continue;
            for (size_t i = 0; i < n; i++)
                here_c[i] = all[on[at[node] + i]];
            for (int how = 0; how < 3 && err >= 0; how++) {
                size_t kept = 0;
                if (how < 2) {
                    memcpy(trial, here_c, n * sizeof(*trial));
                    if (how == 1)
                        qsort(trial, n, sizeof(*trial), cand_ratio_cmp);
                    err = greedy(s, &r, (uint32_t)node, trial, n, spare, 0, &look, &kept);
                    if (err <= 0 || !kept)
                        continue;
                    for (size_t i = kept; i-- > 0;)
                        put_back(s->c, trial[i].j);
                    consider(trial, kept, best, &n_best, &best_key);
                    continue;
                }
                for (size_t i = 0; i < n && err >= 0; i++) {
                    take_out(s->c, here_c[i].j);
                    err = fits(s, &r, (uint32_t)node, &look, NULL);
                    put_back(s->c, here_c[i].j);
                    if (err > 0)
                        consider(&here_c[i], 1, best, &n_best, &best_key);
                }
            }
        }
        free(at);
        free(on);
    }
    placement_free(&look);
    free(here_c);
    if (err < 0) {
        free(all);
        free(trial);
        free(best);
        return err;
    }
    SchedJob **v = n_best ? malloc(n_best * sizeof(*v)) : NULL;
    if (n_best && !v)
        err = -ENOMEM;
    for (size_t i = 0; v && i < n_best; i++)
        v[i] = best[i].j;
    free(all);
    free(trial);
    free(best);
    if (err < 0)
        return err;
    *ret = v;
    *ret_n = n_best;
    return 0;
}

int preempt_plan_team(Sched *s, int64_t now, const SchedJob *j, double need_units,
                      SchedJob **running, size_t n_running, SchedJob ***ret, size_t *ret_n)
{
    *ret = NULL;
    *ret_n = 0;
    Cand *c = malloc((n_running ? n_running : 1) * sizeof(*c));
    if (!c)
        return -ENOMEM;
    size_t n = 0;
    double units = 0;
    for (size_t i = 0; i < n_running; i++) {
        SchedJob *v = running[i];
        if (!v->running || v->stopping || v == j || !v->pl.n_workers || v->team != j->team ||
            !v->preemptible || v->priority <= j->priority || v->priority == PRIO_PRODUCTION ||
            !preempt_old_enough(s, now, j, v))
            continue;
        double since = (double)(now - v->last_checkpoint_ms);
        c[n++] = (Cand){.j = v, .tier = 0, .cost = v->units * (since > 0 ? since : 0)};
        units += v->units;
    }
    int err = 0;
    size_t kept = 0;
    if (n && units + 1e-6 >= need_units) {
        /* the least work lost for each unit of quota given back first */
        qsort(c, n, sizeof(*c), cand_ratio_cmp);
        Request r;
        place_effective_request(s->ctx->policy, &j->req, &r);
        r.workers = j->req.workers - (uint32_t)j->pl.n_workers;
        Placement look = {0};
        err = greedy(s, &r, UINT32_MAX, c, n, true, need_units, &look, &kept);
        placement_free(&look);
        for (size_t i = kept; err > 0 && i-- > 0;)
            put_back(s->c, c[i].j);
    }
    SchedJob **v = err > 0 && kept ? malloc(kept * sizeof(*v)) : NULL;
    if (err > 0 && kept && !v)
        err = -ENOMEM;
    for (size_t i = 0; v && i < kept; i++)
        v[i] = c[i].j;
    free(c);
    if (err < 0)
        return err;
    *ret = v;
    *ret_n = v ? kept : 0;
    return 0;
}
