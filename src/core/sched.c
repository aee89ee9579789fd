/* sched.c: the scheduling cycle (see sched.h for the steps). Reservations are rebuilt
 * every cycle from what is true now: nodes a stopping victim is freeing belong to the
 * job it was preempted for, and the first waiting gang that does not fit reserves the
 * nodes it will get when the running jobs' estimates say they free up. A reservation
 * binds only the jobs behind its holder in the queue. */
#include "core/sched.h"
#include "core/admit.h"
#include "core/consolidate.h"
#include "core/preempt.h"
#include "core/reason.h"
#include "core/room.h"
#include "core/runorder.h"

#include "util/macro.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void sched_config_gpuorch(SchedConfig *cfg)
{
    *cfg = (SchedConfig){
        .order = SCHED_ORDER_PRIORITY,
        .preempt = SCHED_PREEMPT_QUOTA,
        .fair_share = true,
        .quotas = true,
        .backfill = true,
        .drain = true,
        .consolidate = true,
        .min_runtime_ms = SCHED_MIN_RUNTIME_MS,
        .half_life_ms = SCHED_HALF_LIFE_MS,
        .tiresias_threshold_gpu_ms = 16.0 * 3600 * 1000,
        .max_preempt_tries = 16,
        .max_reservations = 4,
    };
}

int sched_init(Sched *s, Cluster *c, PlaceCtx *ctx, const SchedConfig *cfg, size_t n_shapes)
{
    *s = (Sched){.c = c, .ctx = ctx, .cfg = *cfg, .n_shapes = n_shapes};
    int err = tenancy_init(&s->ten, c, cfg->half_life_ms);
    if (err < 0)
        return err;
    s->ten.quotas = s->ten.quotas && cfg->quotas;
    size_t nn = c->n_nodes ? c->n_nodes : 1, ns = n_shapes ? n_shapes : 1;
    s->node_res = malloc(nn * sizeof(*s->node_res));
    s->node_claim = malloc(nn * sizeof(*s->node_claim));
    s->blocked = calloc(nn, 1);
    s->taken = calloc(nn, 1);
    if (!s->node_res || !s->node_claim || !s->blocked || !s->taken ||
        failmemo_init(&s->memo, ns, SCHED_REASON_LEN) < 0) {
        sched_free(s);
        return -ENOMEM;
    }
    for (size_t i = 0; i < nn; i++)
        s->node_res[i] = s->node_claim[i] = SCHED_NONE;
    admit_mode_models(c, &s->mig_models, &s->plain_models);
    s->n_buckets = 2 * PRIO_COUNT * s->ten.n_teams;
    s->buckets = calloc(s->n_buckets, sizeof(*s->buckets));
    s->team_yield_cycle = calloc(s->ten.n_teams, sizeof(*s->team_yield_cycle));
    s->burst_why = calloc(s->ten.n_teams, sizeof(*s->burst_why));
    if (!s->buckets || !s->team_yield_cycle || !s->burst_why) {
        sched_free(s);
        return -ENOMEM;
    }
    return 0;
}

void sched_free(Sched *s)
{
    tenancy_free(&s->ten);
    free(s->node_res);
    free(s->node_claim);
    free(s->claim_nodes);
    free(s->res);
    free(s->blocked);
    free(s->taken);
    failmemo_free(&s->memo);
    free(s->res_binds);
    free(s->rank);
    free(s->victims_for);
    free(s->id_cycle);
    free(s->prio_of);
    free(s->run_mark);
    free(s->run_ptr);
    runorder_free(&s->by_start);
    runorder_free(&s->by_end);
    free(s->res_nodes);
    for (size_t b = 0; b < s->n_buckets; b++)
        free(s->buckets[b].j);
    free(s->buckets);
    free(s->team_yield_cycle);
    free(s->burst_why);
    free(s->order);
    free(s->started);
    placement_free(&s->scratch);
    buf_free(&s->why);
    *s = (Sched){0};
}

void sched_decisions_free(SchedDecisions *d)
{
    free(d->d);
    *d = (SchedDecisions){0};
}

/* List a decision. Callers list it before they apply it to the core's state (or make
 * room with decide_room first), so that a failure leaves nothing applied unlisted. */
static int decide(SchedDecisions *out, SchedDecision d)
{
    if (GROW(out->d, out->cap, out->n + 1) < 0)
        return -ENOMEM;
    out->d[out->n++] = d;
    return 0;
}

/* Room for n more decisions, so that the next n decide() calls cannot fail. */
static int decide_room(SchedDecisions *out, size_t n)
{
    return GROW(out->d, out->cap, out->n + n);
}

static double placement_units(const Cluster *c, const Placement *pl)
{
    double u = 0;
    for (size_t w = 0; w < pl->n_workers; w++)
        u += worker_units(c, &pl->workers[w]);
    return u;
}

/* What a waiting job would hold, for its team's quotas (admit.h says how). */
static double request_units(const Sched *s, const Request *r)
{
    return admit_quota_units(s->c, r, s->mig_models, s->plain_models);
}

/* ---- tenancy ---- */

static int64_t start_key(const SchedJob *j)
{
    return j->run_start_ms;
}

/* Mark the running jobs of this cycle by id (the orders of runorder.h read the marks). */
static void mark_running(Sched *s, SchedJob **running, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        s->run_mark[running[i]->id] = s->cycle;
        s->run_ptr[running[i]->id] = running[i];
    }
}

/* Which running work is inside its team's guarantee: the oldest first. */
static int classify(Sched *s, SchedJob **running, size_t n)
{
    for (size_t t = 0; t < s->ten.n_teams; t++) {
        s->ten.teams[t].held_units = 0;
        s->ten.teams[t].guaranteed_held = 0;
    }
    if (!s->ten.quotas) {
        for (size_t i = 0; i < n; i++) {
            TeamState *ts = &s->ten.teams[tenancy_slot(&s->ten, running[i]->team)];
            running[i]->borrowed = false;
            ts->held_units += running[i]->units;
            ts->guaranteed_held += running[i]->units;
        }
        return 0;
    }
    int err = runorder_update(&s->by_start, running, n, s->run_mark, s->cycle, s->run_ptr,
                              s->ids_cap, start_key, NULL);
    if (err < 0)
        return err;
    for (size_t i = 0; i < s->by_start.n; i++) {
        SchedJob *j = s->by_start.e[i].j;
        TeamState *ts = &s->ten.teams[tenancy_slot(&s->ten, j->team)];
        j->borrowed = s->ten.quotas &&
                      !tenancy_within_guarantee(&s->ten, tenancy_slot(&s->ten, j->team), j->units);
        ts->held_units += j->units;
        if (!j->borrowed)
            ts->guaranteed_held += j->units;
    }
    return 0;
}

/* ---- the queue ---- */

static size_t bucket_of(const Sched *s, const SchedJob *j)
{
    bool by_class = s->cfg.order == SCHED_ORDER_PRIORITY;
    bool by_team = by_class && s->cfg.fair_share;
    bool lower = s->cfg.order == SCHED_ORDER_TIRESIAS &&
                 j->attained_gpu_ms >= s->cfg.tiresias_threshold_gpu_ms;
    size_t prio = by_class ? j->priority : 0;
    size_t team = by_team ? tenancy_slot(&s->ten, j->team) : 0;
    return ((size_t)lower * PRIO_COUNT + prio) * s->ten.n_teams + team;
}

double sched_queue_key(const SchedJob *j)
{
    return j->moved ? j->queue_key : (double)j->submit_ms;
}

static bool earlier(const SchedJob *a, const SchedJob *b)
{
    double ka = sched_queue_key(a), kb = sched_queue_key(b);
    if (ka != kb)
        return ka < kb;
    return a->id < b->id;
}

/* Take j's entry out of its bucket (a dequeued job's, left for the next walk). */
static void unlist(Sched *s, SchedJob *j)
{
    SchedBucket *b = &s->buckets[j->bucket];
    for (size_t i = 0; i < b->n; i++)
        if (b->j[i] == j) {
            memmove(&b->j[i], &b->j[i + 1], (b->n - i - 1) * sizeof(*b->j));
            b->n--;
            break;
        }
    j->listed = false;
}

int sched_enqueue(Sched *s, SchedJob *j)
{
    if (j->queued)
        return 0;
    if (j->listed)
        unlist(s, j);
    size_t bi = bucket_of(s, j);
    SchedBucket *b = &s->buckets[bi];
    if (GROW(b->j, b->cap, b->n + 1) < 0)
        return -ENOMEM;
    /* submission order; arrivals mostly append */
    size_t lo = 0, hi = b->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (earlier(b->j[mid], j))
            lo = mid + 1;
        else
            hi = mid;
    }
    memmove(&b->j[lo + 1], &b->j[lo], (b->n - lo) * sizeof(*b->j));
    b->j[lo] = j;
    b->n++;
    b->live++;
    j->queued = true;
    j->listed = true;
    j->bucket = (uint32_t)bi;
    j->ask_units = request_units(s, &j->req);
    j->reason[0] = '\0';
    s->queued++;
    return 0;
}

void sched_dequeue(Sched *s, SchedJob *j)
{
    if (!j->queued)
        return;
    j->queued = false;
    s->queued--;
    s->buckets[j->bucket].live--;
    /* dropped from its bucket when the queue is next walked */
}

size_t sched_queue_len(const Sched *s)
{
    return s->queued;
}

typedef struct TeamKey {
    double key;
    size_t slot;
} TeamKey;

static int team_key_cmp(const void *a, const void *b)
{
    const TeamKey *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return (x->slot > y->slot) - (x->slot < y->slot);
}

/* Drop the entries of jobs no longer queued from a bucket. */
static void compact_bucket(SchedBucket *b)
{
    size_t keep = 0;
    for (size_t i = 0; i < b->n; i++) {
        if (!b->j[i]->queued) {
            b->j[i]->listed = false;
            continue;
        }
        b->j[keep++] = b->j[i];
    }
    b->n = keep;
}

/* The queue in order into s->order: buckets by Tiresias queue, class, then teams by fair
 * share, teams of equal share merged by age; jobs no longer queued are dropped on the
 * way. Sets s->n_order. Each bucket is in submission order, so teams of equal share are
 * merged, not sorted: the server asks for the order on every submission. */
static int build_order(Sched *s)
{
    if (GROW(s->order, s->order_cap, s->queued + 1) < 0)
        return -ENOMEM;
    size_t nt = s->ten.n_teams, n = 0;
    TeamKey *teams = malloc(nt * sizeof(*teams));
    size_t *at = malloc(nt * sizeof(*at));
    if (!teams || !at) {
        free(teams);
        free(at);
        return -ENOMEM;
    }
    for (size_t t = 0; t < nt; t++)
        teams[t] = (TeamKey){.key = tenancy_fair_key(&s->ten, (uint32_t)t), .slot = t};
    qsort(teams, nt, sizeof(*teams), team_key_cmp);
    for (size_t lower = 0; lower < 2; lower++)
        for (size_t prio = 0; prio < PRIO_COUNT; prio++) {
            SchedBucket *row = &s->buckets[(lower * PRIO_COUNT + prio) * nt];
            for (size_t ti = 0; ti < nt;) {
                /* teams ti..tj-1 have the same fair share */
                size_t tj = ti + 1;
                while (tj < nt && teams[tj].key == teams[ti].key)
                    tj++;
                for (size_t k = ti; k < tj; k++) {
                    compact_bucket(&row[teams[k].slot]);
                    at[k] = 0;
                }
                for (;;) {
                    SchedJob *best = NULL;
                    size_t from = 0;
                    for (size_t k = ti; k < tj; k++) {
                        const SchedBucket *b = &row[teams[k].slot];
                        if (at[k] < b->n && (!best || earlier(b->j[at[k]], best))) {
                            best = b->j[at[k]];
                            from = k;
                        }
                    }
                    if (!best)
                        break;
                    at[from]++;
                    if (n < s->order_cap)
                        s->order[n++] = best;
                }
                ti = tj;
            }
        }
    free(teams);
    free(at);
    s->n_order = n;
    return 0;
}

/* Make the keys of a bucket's queued jobs strictly increasing, in their current order;
 * returns how many jobs got a new key. */
static size_t spread_keys(SchedBucket *b)
{
    size_t changed = 0;
    double last = -INFINITY;
    for (size_t i = 0; i < b->n; i++) {
        SchedJob *q = b->j[i];
        if (!q->queued)
            continue;
        double k = sched_queue_key(q);
        if (k <= last) {
            k = last + 1e-3;
            q->moved = true;
            q->queue_key = k;
            changed++;
        }
        last = k;
    }
    return changed;
}

int sched_move(Sched *s, SchedJob *j, const SchedJob *anchor, bool after)
{
    if (!j->queued || !anchor->queued || j == anchor || j->bucket != anchor->bucket)
        return -EINVAL;
    SchedBucket *b = &s->buckets[j->bucket];
    /* the anchor's queued neighbour on the side j goes to (j itself does not count) */
    const SchedJob *next = NULL;
    size_t at = 0;
    while (at < b->n && b->j[at] != anchor)
        at++;
    if (at == b->n)
        return -EINVAL;
    for (size_t k = at; after ? ++k < b->n : k-- > 0;)
        if (b->j[k]->queued && b->j[k] != j) {
            next = b->j[k];
            break;
        }
    double ka = sched_queue_key(anchor);
    double key = next ? (ka + sched_queue_key(next)) / 2 : ka + (after ? 1 : -1);
    if (key == ka || (next && key == sched_queue_key(next))) {
        /* jobs submitted in one millisecond share a key and only their ids order them:
         * give the bucket's jobs distinct keys (a microsecond apart, order kept), then
         * look again */
        if (spread_keys(b) == 0)
            return -ERANGE;
        return sched_move(s, j, anchor, after);
    }
    sched_dequeue(s, j);
    j->moved = true;
    j->queue_key = key;
    return sched_enqueue(s, j);
}

uint32_t sched_position_newest(Sched *s, const SchedJob *j)
{
    if (!j->queued)
        return 0;
    size_t nt = s->ten.n_teams, group = j->bucket / nt;
    uint32_t slot = (uint32_t)(j->bucket % nt);
    double key = tenancy_fair_key(&s->ten, slot);
    size_t ahead = 0;
    for (size_t b = 0; b < group * nt; b++)
        ahead += s->buckets[b].live;
    /* its own row: teams of a smaller fair-share key, and its own key group */
    const SchedBucket *row = &s->buckets[group * nt];
    for (size_t t = 0; t < nt; t++)
        if (tenancy_fair_key(&s->ten, (uint32_t)t) <= key)
            ahead += row[t].live;
    return (uint32_t)ahead;
}

int sched_order(Sched *s)
{
    int err = build_order(s);
    return err < 0 ? err : (int)s->n_order;
}

/* Size the by-id arrays (rank, victims, their cycle stamp) for ids below n. */
static int grow_ids(Sched *s, size_t n)
{
    if (n <= s->ids_cap)
        return 0;
    size_t cap = s->ids_cap ? s->ids_cap : 64;
    while (cap < n)
        cap *= 2;
    uint32_t *rank = realloc(s->rank, cap * sizeof(*rank));
    if (!rank)
        return -ENOMEM;
    s->rank = rank;
    uint32_t *vf = realloc(s->victims_for, cap * sizeof(*vf));
    if (!vf)
        return -ENOMEM;
    s->victims_for = vf;
    uint8_t *po = realloc(s->prio_of, cap * sizeof(*po));
    if (!po)
        return -ENOMEM;
    s->prio_of = po;
    uint64_t *ic = realloc(s->id_cycle, cap * sizeof(*ic));
    if (!ic)
        return -ENOMEM;
    memset(ic + s->ids_cap, 0, (cap - s->ids_cap) * sizeof(*ic));
    s->id_cycle = ic;
    uint64_t *rm = realloc(s->run_mark, cap * sizeof(*rm));
    if (!rm)
        return -ENOMEM;
    memset(rm + s->ids_cap, 0, (cap - s->ids_cap) * sizeof(*rm));
    s->run_mark = rm;
    SchedJob **rp = realloc(s->run_ptr, cap * sizeof(*rp));
    if (!rp)
        return -ENOMEM;
    s->run_ptr = rp;
    s->ids_cap = cap;
    return 0;
}

/* ---- reservations ---- */

/* Reserve the nodes of pl (or, pl NULL, nodes[0..n)) for job from start_ms. */
static int reserve_nodes(Sched *s, uint32_t job, int64_t start_ms, bool claim, const Placement *pl,
                         const uint32_t *nodes, size_t n)
{
    size_t count = pl ? pl->n_workers : n;
    if (GROW(s->res, s->res_cap, s->n_res + 1) < 0 ||
        GROW(s->res_binds, s->res_binds_cap, s->n_res + 1) < 0 ||
        GROW(s->res_nodes, s->res_nodes_cap, s->n_res_nodes + count) < 0)
        return -ENOMEM;
    uint32_t ri = (uint32_t)s->n_res++;
    s->res[ri] = (Reservation){.job = job, .start_ms = start_ms, .claim = claim};
    for (size_t i = 0; i < count; i++) {
        uint32_t node = pl ? pl->workers[i].node : nodes[i];
        if (s->node_res[node] == SCHED_NONE) {
            s->node_res[node] = ri;
            s->res_nodes[s->n_res_nodes++] = node;
        }
    }
    return 0;
}

static int reserve(Sched *s, uint32_t job, int64_t start_ms, const Placement *pl)
{
    return reserve_nodes(s, job, start_ms, false, pl, NULL, 0);
}

/* Room a stopping victim holds, or has freed, belongs to the job it stops for. */
static int claim(Sched *s, uint32_t job, int64_t start_ms, const Placement *pl)
{
    return reserve_nodes(s, job, start_ms, true, pl, NULL, 0);
}

/* Claims on nodes victims freed: kept (as claim reservations now) for jobs still
 * waiting, dropped for the rest. */
static int renew_claims(Sched *s, int64_t now)
{
    size_t keep = 0;
    for (size_t i = 0; i < s->n_claim_nodes; i++) {
        uint32_t n = s->claim_nodes[i], job = s->node_claim[n];
        if (job == SCHED_NONE || s->taken[n])
            continue; /* dropped, or listed twice */
        if (job >= s->ids_cap || s->id_cycle[job] != s->cycle) {
            s->node_claim[n] = SCHED_NONE; /* its job no longer waits */
            continue;
        }
        s->taken[n] = 1;
        s->claim_nodes[keep++] = n;
    }
    s->n_claim_nodes = keep;
    int err = 0;
    for (size_t i = 0; i < keep; i++) {
        uint32_t n = s->claim_nodes[i];
        s->taken[n] = 0;
        if (!err)
            err = reserve_nodes(s, s->node_claim[n], now, true, NULL, &n, 1);
    }
    return err;
}

/* The job had its turn with its victims gone: its claims end. */
static void drop_claims(Sched *s, uint32_t job)
{
    for (size_t i = 0; i < s->n_claim_nodes; i++)
        if (s->node_claim[s->claim_nodes[i]] == job)
            s->node_claim[s->claim_nodes[i]] = SCHED_NONE;
}

static void clear_reservations(Sched *s)
{
    for (size_t i = 0; i < s->n_res_nodes; i++) {
        s->node_res[s->res_nodes[i]] = SCHED_NONE;
        s->blocked[s->res_nodes[i]] = 0;
    }
    s->n_res_nodes = 0;
    s->n_res = 0;
}

/* Nodes j must keep out of: reserved for a job ahead of it, unless j is gone by the
 * reservation's start or (gang reservations) can be moved. Whether a node binds j
 * depends only on its reservation, so the mask is set from which reservations bind
 * (rewritten only when that pattern changes) and the pattern names the memo stamp.
 * Returns whether any node is kept out. */
static bool fill_blocked(Sched *s, const SchedJob *j, const uint32_t *rank, int64_t now)
{
    bool any = false;
    for (size_t ri = 0; ri < s->n_res; ri++) {
        const Reservation *r = &s->res[ri];
        bool block;
        if (r->claim) {
            /* kube-scheduler holds a nominated node only against pods of lower or equal
             * priority; gpuorch against all, or a preempted job of a higher class takes
             * its room straight back */
            block = r->job != j->id &&
                    (s->cfg.preempt != SCHED_PREEMPT_PRIORITY || j->priority >= s->prio_of[r->job]);
        } else {
            bool ahead =
                r->job != j->id && s->id_cycle[r->job] == s->cycle && rank[r->job] < rank[j->id];
            bool gone = j->estimate_ms != NO_DURATION && now + j->estimate_ms <= r->start_ms;
            /* preemptible work may use the room until the gang can take it: before the
             * reservation's start, or after it while work that cannot be moved (jobs
             * running past their estimates) still holds the gang off; once only
             * backfill stands in the way, nothing new starts there */
            block = ahead && !gone && !(j->preemptible && (r->start_ms > now || r->stuck));
        }
        s->res_binds[ri] = block;
        any |= block;
    }
    uint64_t stamp = failmemo_pattern(&s->memo, s->res_binds, s->n_res);
    if (stamp != s->mask_stamp) {
        for (size_t i = 0; i < s->n_res_nodes; i++) {
            uint32_t n = s->res_nodes[i];
            s->blocked[n] = s->res_binds[s->node_res[n]];
        }
        s->mask_stamp = stamp;
    }
    return any;
}

/* Try to place (the rest of) j, keeping out of blocked nodes. 1 placed fully, 2 some
 * workers placed (no-gang policies: the job holds them and waits), 0 not (its reason
 * then says what the placer found), <0 error. */
static int try_place(Sched *s, SchedJob *j, bool use_blocked)
{
    uint32_t workers = j->req.workers - (uint32_t)j->pl.n_workers;
    int32_t shape = j->req.shape;
    bool memo = shape >= 0 && (size_t)shape < s->n_shapes;
    uint64_t stamp = use_blocked ? s->mask_stamp : s->free_stamp;
    buf_reset(&s->why);
    const char *known = memo ? failmemo_find(&s->memo, shape, stamp, workers) : NULL;
    if (known) {
        /* the placer's words for the shape, not what the cycle then told the job that
         * first failed (that it holds a reservation, say: this one does not) */
        reason_set(j, known);
        return 0;
    }
    Request req = j->req;
    const Request *r = &req;
    req.workers = workers;
    s->ctx->blocked = use_blocked ? s->blocked : NULL;
    int placed = place_job(s->ctx, s->c, r, &s->scratch, &s->why);
    s->ctx->blocked = NULL;
    if (placed < 0)
        return placed;
    if (s->scratch.n_workers) {
        Placement *pl = &j->pl;
        if (GROW(pl->workers, pl->workers_cap, pl->n_workers + s->scratch.n_workers) < 0 ||
            GROW(pl->changes, pl->changes_cap, pl->n_changes + s->scratch.n_changes + 1) < 0) {
            /* applied, yet nowhere to keep it: taken back, as if it had not fit */
            place_undo(s->c, &s->scratch);
            return -ENOMEM;
        }
        memcpy(pl->workers + pl->n_workers, s->scratch.workers,
               s->scratch.n_workers * sizeof(*pl->workers));
        if (s->scratch.n_changes)
            memcpy(pl->changes + pl->n_changes, s->scratch.changes,
                   s->scratch.n_changes * sizeof(*pl->changes));
        pl->n_workers += s->scratch.n_workers;
        pl->n_changes += s->scratch.n_changes;
        if (placed == 0)
            return 2;
    }
    if (placed == 0)
        reason_set(j, buf_str(&s->why));
    if (placed == 0 && memo)
        failmemo_note(&s->memo, r->shape, stamp, r->workers, j->reason);
    return placed;
}

/* r backfilled g's reserved nodes and may be moved for it: unless it is another team's
 * guaranteed work and g is not production (a guarantee outranks a promise to move). */
static bool movable_for(const SchedJob *r, const SchedJob *g)
{
    return r->backfill_for == g->id &&
           (r->borrowed || r->team == g->team || g->priority == PRIO_PRODUCTION);
}

static int64_t end_key(const SchedJob *j)
{
    return j->estimate_ms; /* what is left from now: the order of the expected ends */
}

static bool has_estimate(const SchedJob *j)
{
    return j->estimate_ms != NO_DURATION;
}

static int by_end(const void *a, const void *b)
{
    const SchedJob *x = *(SchedJob *const *)a, *y = *(SchedJob *const *)b;
    if (x->estimate_ms != y->estimate_ms)
        return x->estimate_ms < y->estimate_ms ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

/* Backfill reservations (as Slurm's backfill plans them): when can job g, blocked and
 * needing whole GPUs, start, and where? Running jobs (those started this cycle too)
 * leave at their estimated end (never, without an estimate); stopping ones are gone.
 * Nodes already reserved for a job ahead stay out of the plan. Reserves the nodes it
 * would get. The running jobs come in their order by end (kept across cycles,
 * runorder.h), this cycle's starts merged in; the placer is asked only once g's room
 * could hold it (room.h). */
static int reserve_gang(Sched *s, SchedJob *g, SchedJob **running, size_t n_running, int64_t now)
{
    if (s->by_end_cycle != s->cycle) {
        int err = runorder_update(&s->by_end, running, n_running, s->run_mark, s->cycle, s->run_ptr,
                                  s->ids_cap, end_key, has_estimate);
        if (err < 0)
            return err;
        s->by_end_cycle = s->cycle;
    }
    size_t n_all = n_running + s->n_started;
    SchedJob **order = malloc((n_all ? n_all : 1) * sizeof(*order));
    SchedJob **gone = malloc((n_all ? n_all : 1) * sizeof(*gone));
    SchedJob **fresh = malloc((s->n_started ? s->n_started : 1) * sizeof(*fresh));
    if (!order || !gone || !fresh) {
        free(order);
        free(gone);
        free(fresh);
        return -ENOMEM;
    }
    /* what stops, and what backfilled g's nodes to be moved for it, is gone */
    size_t n_order = 0, n_gone = 0, n_fresh = 0;
    for (size_t i = 0; i < n_running; i++)
        if (running[i]->stopping || movable_for(running[i], g))
            gone[n_gone++] = running[i];
    for (size_t i = 0; i < s->n_started; i++) {
        SchedJob *r = s->started[i];
        if (r->stopping || movable_for(r, g))
            gone[n_gone++] = r;
        else if (r->estimate_ms != NO_DURATION)
            fresh[n_fresh++] = r;
    }
    qsort(fresh, n_fresh, sizeof(*fresh), by_end);
    for (size_t i = 0, f = 0; i < s->by_end.n || f < n_fresh;) {
        SchedJob *r = i < s->by_end.n ? s->by_end.e[i].j : NULL;
        if (r && (r->stopping || movable_for(r, g))) {
            i++;
            continue;
        }
        if (f < n_fresh && (!r || by_end(&fresh[f], &r) < 0))
            order[n_order++] = fresh[f++];
        else
            order[n_order++] = s->by_end.e[i++].j;
    }
    free(fresh);
    for (size_t i = 0; i < n_gone; i++)
        place_release(s->c, &gone[i]->pl);
    int64_t start = now;
    int placed = 0;
    size_t released = 0, n_freed = 0;
    Placement look = {0};
    for (size_t i = 0; i < s->n_res_nodes; i++)
        s->taken[s->res_nodes[i]] = 1;
    s->ctx->blocked = s->taken;
    Request eff;
    place_effective_request(s->ctx->policy, &g->req, &eff);
    Room room;
    int err = room_init(&room, s->ctx, s->c, &eff);
    /* a policy that draws while placing sees every try (place_draws) */
    bool draws = place_draws(s->ctx);
    for (; !err;) {
        if (draws || room_enough(&room)) {
            placed = place_job(s->ctx, s->c, &g->req, &look, NULL);
            if (placed != 0)
                break;
            if (look.n_workers)
                place_undo(s->c, &look); /* part of it, under a no-gang policy */
        }
        /* the next to end that holds room g could use: one that holds none would not
         * change the answer (released stays in order[0..n_freed)) */
        SchedJob *r = NULL;
        while (!r && released < n_order) {
            SchedJob *q = order[released++];
            r = draws ? q : NULL;
            for (size_t w = 0; w < q->pl.n_workers && !r; w++) {
                uint32_t node = q->pl.workers[w].node;
                if (!s->taken[node] && place_node_admits(s->c, node, &eff))
                    r = q;
            }
        }
        if (!r)
            break;
        order[n_freed++] = r;
        place_release(s->c, &r->pl);
        for (size_t w = 0; w < r->pl.n_workers; w++)
            room_update(&room, s->c, r->pl.workers[w].node);
        start = now + r->estimate_ms;
    }
    if (!err)
        room_free(&room);
    s->ctx->blocked = NULL;
    for (size_t i = 0; i < s->n_res_nodes; i++)
        s->taken[s->res_nodes[i]] = 0;
    if (!err)
        err = placed < 0 ? placed : 0;
    if (placed == 1) {
        err = reserve(s, g->id, start, &look);
        place_undo(s->c, &look);
    }
    for (size_t i = n_freed; i-- > 0;)
        for (size_t w = 0; w < order[i]->pl.n_workers; w++)
            cluster_apply_worker(s->c, &order[i]->pl.workers[w]);
    for (size_t i = n_gone; i-- > 0;)
        for (size_t w = 0; w < gone[i]->pl.n_workers; w++)
            cluster_apply_worker(s->c, &gone[i]->pl.workers[w]);
    placement_free(&look);
    free(order);
    free(gone);
    return err;
}

/* Would g place with these jobs gone? Their placements are released to look and put
 * back. 1 yes, 0 no, <0 error. */
static int places_without(Sched *s, const SchedJob *g, SchedJob **gone, size_t n)
{
    for (size_t i = 0; i < n; i++)
        place_release(s->c, &gone[i]->pl);
    Placement look = {0};
    int placed = place_job(s->ctx, s->c, &g->req, &look, NULL);
    if (placed == 1 || look.n_workers)
        place_undo(s->c, &look);
    placement_free(&look);
    for (size_t i = n; i-- > 0;)
        for (size_t w = 0; w < gone[i]->pl.n_workers; w++)
            cluster_apply_worker(s->c, &gone[i]->pl.workers[w]);
    return placed < 0 ? placed : placed == 1;
}

/* The gang holding reservation ri, whose start has come: move the preemptible jobs that
 * backfilled its nodes, when that is all that stands in its way. Only those that ran the
 * minimum run time move (any, for production: preempt_old_enough), so none is moved
 * straight after it started for work that can wait; while younger ones
 * would be needed the gang waits for them, its nodes closed to new backfill. Where
 * moving all of them would not be enough (work that cannot be moved overran its
 * estimate), the reservation is marked stuck and its room stays open to preemptible
 * work. */
static int move_backfill(Sched *s, SchedJob *g, uint32_t ri, SchedJob **running, size_t n_running,
                         int64_t now, SchedDecisions *out)
{
    SchedJob **movers = malloc((n_running ? n_running : 1) * sizeof(*movers));
    if (!movers)
        return -ENOMEM;
    size_t n = 0, n_old = 0;
    for (size_t i = 0; i < n_running; i++) {
        SchedJob *r = running[i];
        if (r->stopping || !movable_for(r, g))
            continue;
        bool on_reserved = false;
        for (size_t w = 0; w < r->pl.n_workers && !on_reserved; w++) {
            uint32_t rn = s->node_res[r->pl.workers[w].node];
            on_reserved = rn != SCHED_NONE && s->res[rn].job == g->id;
        }
        if (!on_reserved)
            continue;
        /* the old enough first: movers[0..n_old) may move now */
        movers[n++] = r;
        if (preempt_old_enough(s, now, g, r)) {
            movers[n - 1] = movers[n_old];
            movers[n_old++] = r;
        }
    }
    int placed = n_old ? places_without(s, g, movers, n_old) : 0;
    if (placed == 0) {
        int all = n > n_old ? places_without(s, g, movers, n) : 0;
        if (all < 0)
            placed = all;
        else
            s->res[ri].stuck = !all;
    }
    int err = placed < 0 ? placed : 0;
    uint32_t stopped = 0;
    for (size_t i = 0; placed == 1 && i < n_old && !err; i++) {
        err = decide(
            out, (SchedDecision){.kind = SCHED_PREEMPT, .job = movers[i]->id, .for_job = g->id});
        if (err)
            break;
        movers[i]->stopping = true;
        movers[i]->nominated = g->id;
        movers[i]->stop_at_ms = now + movers[i]->grace_ms;
        stopped++;
    }
    s->victims_for[g->id] += stopped;
    free(movers);
    return err;
}

/* The job ahead whose reserved nodes j, started there as preemptible work, backfilled
 * (SCHED_NONE: none). */
static uint32_t backfill_target(const Sched *s, const SchedJob *j, const uint32_t *rank,
                                int64_t now)
{
    for (size_t w = 0; w < j->pl.n_workers; w++) {
        uint32_t ri = s->node_res[j->pl.workers[w].node];
        if (ri == SCHED_NONE)
            continue;
        const Reservation *r = &s->res[ri];
        bool ahead =
            r->job != j->id && s->id_cycle[r->job] == s->cycle && rank[r->job] < rank[j->id];
        bool gone = j->estimate_ms != NO_DURATION && now + j->estimate_ms <= r->start_ms;
        if (ahead && !gone)
            return r->job;
    }
    return SCHED_NONE;
}

/* ---- MIG by demand: drain ---- */

/* Drain only GPUs holding at most a fifth of their compute, whose slices are all
 * expected to end within half an hour. */
#define DRAIN_MAX_USED   (GPU_UNITS / 5)
#define DRAIN_HORIZON_MS (30 * 60 * 1000)

/* When each partitioned GPU's slices are expected to be gone (by the jobs' estimates;
 * never, for a job without one), into free_at by global GPU index. */
static void slices_free_at(const Sched *s, SchedJob **running, size_t n_running, int64_t now,
                           int64_t *free_at)
{
    const Cluster *c = s->c;
    for (size_t k = 0; k < n_running + s->n_started; k++) {
        const SchedJob *j = k < n_running ? running[k] : s->started[k - n_running];
        int64_t end = j->estimate_ms == NO_DURATION ? INT64_MAX : now + j->estimate_ms;
        for (size_t w = 0; w < j->pl.n_workers; w++) {
            const WorkerAlloc *wa = &j->pl.workers[w];
            for (unsigned g = 0; g < wa->n_grants; g++)
                if (wa->grants[g].kind == GRANT_MIG) {
                    int64_t *f = &free_at[c->nodes[wa->node].gpu0 + wa->grants[g].index];
                    *f = MAX(*f, end);
                }
        }
    }
}

/* When whole GPUs are wanted, stop placing slices on a partitioned GPU that holds little
 * and whose slices are all expected to end soon, so that it comes back whole; take the
 * drain off when nobody waits. A GPU whose slices stay for hours is left to take more:
 * draining it would only send new slices to cut into another GPU (measured: draining
 * regardless of the estimates cost the mixed cluster a point of utilisation). */
static int drain(Sched *s, double whole_wanted, SchedJob **running, size_t n_running, int64_t now,
                 SchedDecisions *out)
{
    Cluster *c = s->c;
    int err = 0;
    if (whole_wanted <= 0) {
        for (size_t n = 0; n < c->n_nodes && !err; n++)
            for (unsigned i = 0; i < c->nodes[n].n_gpus && !err; i++)
                if (node_gpu_c(c, &c->nodes[n], i)->draining) {
                    err = decide(out, (SchedDecision){.kind = SCHED_UNDRAIN,
                                                      .job = SCHED_NONE,
                                                      .node = (uint32_t)n,
                                                      .gpu = (uint8_t)i});
                    if (!err)
                        cluster_set_draining(c, (uint32_t)n, i, false);
                }
        return err;
    }
    double draining = 0;
    size_t candidates = 0;
    for (size_t n = 0; n < c->n_nodes; n++)
        for (unsigned i = 0; i < c->nodes[n].n_gpus; i++) {
            const Gpu *g = node_gpu_c(c, &c->nodes[n], i);
            draining += g->draining;
            candidates += g->mode == GPU_MIG && g->mig_busy && !g->draining &&
                          g->used_units <= DRAIN_MAX_USED;
        }
    /* no GPU light enough to drain: the running jobs' slices need not be looked at */
    if (draining >= whole_wanted || !candidates)
        return 0;
    int64_t *free_at = calloc(c->n_gpus ? c->n_gpus : 1, sizeof(*free_at));
    if (!free_at)
        return -ENOMEM;
    slices_free_at(s, running, n_running, now, free_at);
    while (draining < whole_wanted && !err) {
        /* the partitioned GPU with the least compute in use, among those soon free */
        uint32_t best_node = SCHED_NONE, best_gpu = 0, best_used = DRAIN_MAX_USED + 1;
        for (size_t n = 0; n < c->n_nodes; n++) {
            const Node *nd = &c->nodes[n];
            for (unsigned i = 0; i < nd->n_gpus; i++) {
                const Gpu *g = node_gpu_c(c, nd, i);
                if (g->mode == GPU_MIG && g->mig_busy && !g->draining &&
                    g->used_units < best_used && free_at[nd->gpu0 + i] <= now + DRAIN_HORIZON_MS) {
                    best_node = (uint32_t)n;
                    best_gpu = i;
                    best_used = g->used_units;
                }
            }
        }
        if (best_node == SCHED_NONE)
            break;
        err = decide(out, (SchedDecision){.kind = SCHED_DRAIN,
                                          .job = SCHED_NONE,
                                          .node = best_node,
                                          .gpu = (uint8_t)best_gpu});
        if (err)
            break;
        cluster_set_draining(c, best_node, best_gpu, true);
        draining++;
    }
    free(free_at);
    return err;
}

/* ---- consolidation ---- */

/* GPUs emptied in one cycle, at most: a move costs its overlap, so go a few at a time */
#define CONSOLIDATE_PER_CYCLE 4

/* A job's allocation changed size (a replacement may take a slice of another size): the
 * team holds what it has. */
static void recount_units(Sched *s, SchedJob *j)
{
    double units = placement_units(s->c, &j->pl);
    uint32_t slot = tenancy_slot(&s->ten, j->team);
    s->ten.teams[slot].held_units += units - j->units;
    if (!j->borrowed)
        s->ten.teams[slot].guaranteed_held += units - j->units;
    j->units = units;
}

static int move_servers(Sched *s, unsigned want, SchedJob **running, size_t n_running, int64_t now,
                        SchedDecisions *out)
{
    SchedJob **moved = NULL;
    size_t n_moved = 0;
    /* the moves consolidate made stand even when it failed after them (it takes back
     * only the GPU it was emptying): each is listed, or all are taken back */
    int err = consolidate(s, want, running, n_running, now, &moved, &n_moved);
    if (n_moved && decide_room(out, n_moved) < 0) {
        for (size_t k = 0; k < n_moved; k++) {
            SchedJob *j = moved[k];
            place_undo(s->c, &j->pl);
            placement_free(&j->pl);
            j->pl = j->moved_from;
            j->moved_from = (Placement){0};
            j->moving = false;
        }
        n_moved = 0;
        err = -ENOMEM;
    }
    for (size_t k = 0; k < n_moved; k++) {
        SchedJob *j = moved[k];
        recount_units(s, j);
        j->placed_ms = now;
        decide(out, (SchedDecision){.kind = SCHED_MOVE, .job = j->id, .for_job = SCHED_NONE});
    }
    free(moved);
    return err;
}

void sched_move_abort(Sched *s, SchedJob *j)
{
    if (!j->moving)
        return;
    place_release(s->c, &j->pl);
    placement_free(&j->pl);
    j->pl = j->moved_from;
    j->moved_from = (Placement){0};
    j->moving = false;
    recount_units(s, j);
}

void sched_move_done(Sched *s, SchedJob *j)
{
    if (j->moved_from.n_workers)
        place_release(s->c, &j->moved_from);
    placement_reset(&j->moved_from);
    j->moving = false;
}

/* ---- the cycle ---- */

/* Stop the victims for j: each gets its grace, and the room it holds is j's. */
static int stop_victims(Sched *s, SchedJob *j, SchedJob **victims, size_t n, int64_t now,
                        SchedDecisions *out)
{
    int err = 0;
    uint32_t stopped = 0;
    for (size_t v = 0; !err && v < n; v++) {
        err = decide(
            out, (SchedDecision){.kind = SCHED_PREEMPT, .job = victims[v]->id, .for_job = j->id});
        if (err)
            break;
        victims[v]->stopping = true;
        victims[v]->nominated = j->id;
        victims[v]->stop_at_ms = now + victims[v]->grace_ms;
        stopped++;
        /* the claim is the core's own bookkeeping, rebuilt from the victims next cycle */
        err = claim(s, j->id, victims[v]->stop_at_ms, &victims[v]->pl);
    }
    if (stopped)
        s->victims_for[j->id] = stopped;
    return err;
}

/* The reservation keeping j from a node that could take one of its workers, or
 * SCHED_NONE. */
static uint32_t blocked_room(Sched *s, const SchedJob *j)
{
    for (size_t i = 0; i < s->n_res_nodes; i++) {
        uint32_t n = s->res_nodes[i];
        if (s->blocked[n] && place_node_capacity(s->ctx, s->c, n, &j->req, 1) > 0)
            return s->node_res[n];
    }
    return SCHED_NONE;
}

/* Room for one more start (start_job cannot fail after it): made before the placer
 * applies an allocation that start_job would then have to list. */
static int start_room(Sched *s, SchedDecisions *out)
{
    if (GROW(s->started, s->started_cap, s->n_started + 1) < 0)
        return -ENOMEM;
    return decide_room(out, 1);
}

static void start_job(Sched *s, SchedJob *j, int64_t now, SchedDecisions *out)
{
    s->started[s->n_started++] = j;
    sched_dequeue(s, j);
    uint32_t slot = tenancy_slot(&s->ten, j->team);
    j->units = placement_units(s->c, &j->pl);
    j->borrowed = s->ten.quotas && !tenancy_within_guarantee(&s->ten, slot, j->units);
    s->ten.teams[slot].held_units += j->units;
    if (!j->borrowed)
        s->ten.teams[slot].guaranteed_held += j->units;
    j->running = true;
    j->stopping = false;
    j->nominated = SCHED_NONE;
    j->run_start_ms = now;
    j->last_checkpoint_ms = now;
    j->placed_ms = now;
    j->backfill_for = SCHED_NONE;
    j->reason[0] = '\0';
    decide(out, (SchedDecision){.kind = SCHED_START, .job = j->id, .for_job = SCHED_NONE});
}

int sched_cycle(Sched *s, int64_t now, SchedJob **running, size_t n_running, SchedDecisions *out)
{
    Cluster *c = s->c;
    s->cycle++;
    failmemo_cycle(&s->memo);
    s->free_stamp = failmemo_fresh(&s->memo);
    s->mask_stamp = failmemo_fresh(&s->memo); /* the mask holds no pattern yet */
    s->n_started = 0;
    tenancy_advance(&s->ten, now);
    /* by-id arrays are valid where their stamp is this cycle: no O(all jobs) reset */
    uint32_t max_id = 0;
    for (size_t i = 0; i < n_running; i++)
        max_id = MAX(max_id, running[i]->id);
    int err = grow_ids(s, (size_t)max_id + 1);
    if (!err) {
        mark_running(s, running, n_running);
        err = classify(s, running, n_running);
    }
    if (!err)
        err = build_order(s);
    if (err)
        return err;
    size_t n_waiting = s->n_order;
    SchedJob **waiting = s->order;
    /* queue ranks, by job id, so reservations bind only the jobs behind their holder */
    for (size_t i = 0; i < n_waiting; i++)
        max_id = MAX(max_id, waiting[i]->id);
    if (grow_ids(s, (size_t)max_id + 1) < 0)
        return -ENOMEM;
    uint32_t *rank = s->rank;
    for (size_t i = 0; i < n_waiting; i++) {
        uint32_t id = waiting[i]->id;
        rank[id] = (uint32_t)i;
        s->prio_of[id] = waiting[i]->priority;
        s->victims_for[id] = 0;
        s->id_cycle[id] = s->cycle;
    }
    for (size_t i = 0; i < n_running; i++) {
        uint32_t v = running[i]->nominated;
        if (running[i]->stopping && v <= max_id && s->id_cycle[v] == s->cycle)
            s->victims_for[v]++;
    }

    /* nodes a stopping victim frees belong to the job it stops for */
    clear_reservations(s);
    for (size_t i = 0; i < n_running && !err; i++) {
        SchedJob *v = running[i];
        if (v->stopping && v->nominated != SCHED_NONE && v->nominated <= max_id &&
            s->id_cycle[v->nominated] == s->cycle)
            err = claim(s, v->nominated, MAX(now, v->stop_at_ms), &v->pl);
    }
    if (!err)
        err = renew_claims(s, now);

    unsigned reservations = 0;
    unsigned preempt_tries = 0;
    double whole_wanted = 0;
    for (size_t wi = 0; wi < n_waiting && !err; wi++) {
        SchedJob *j = waiting[wi];
        uint32_t slot = tenancy_slot(&s->ten, j->team);
        double units = j->ask_units;
        bool in_guarantee = !s->ten.quotas || tenancy_within_guarantee(&s->ten, slot, units);
        j->held_back = SCHED_HELD_QUOTA;
        /* a team past its monthly budget starts only production work */
        if (s->ten.teams[slot].over_budget && j->priority != PRIO_PRODUCTION) {
            reason_set(j, s->ten.teams[slot].budget_reason);
            continue;
        }
        if (s->ten.quotas && !tenancy_within_burst(&s->ten, slot, units)) {
            reason_burst(s, j, slot, units);
            if (s->victims_for[j->id]) {
                j->held_back = SCHED_HELD_PREEMPTING;
                reason_victims(s, j, "waiting for its team's lower-priority work to stop", running,
                               n_running, now);
                continue;
            }
            /* its own team's lower classes yield their quota to it (preempt.h): to the
             * first of the team's jobs held back here in a cycle, outside the other
             * preemptions' budget, which the jobs inside their guarantee need */
            if (s->cfg.preempt == SCHED_PREEMPT_QUOTA && s->team_yield_cycle[slot] != s->cycle) {
                s->team_yield_cycle[slot] = s->cycle;
                SchedJob **victims = NULL;
                size_t n_victims = 0;
                err = preempt_plan_team(s, now, j, tenancy_over_burst(&s->ten, slot, units),
                                        running, n_running, &victims, &n_victims);
                if (!err)
                    err = stop_victims(s, j, victims, n_victims, now, out);
                free(victims);
                if (n_victims) {
                    j->held_back = SCHED_HELD_PREEMPTING;
                    reason_victims(s, j,
                                   "preempting its team's lower-priority work to make room in "
                                   "its quota",
                                   running, n_running, now);
                }
            }
            continue;
        }
        j->held_back = SCHED_HELD_NO;
        bool use_blocked = s->n_res && fill_blocked(s, j, rank, now);
        err = start_room(s, out);
        if (err)
            break;
        int placed = try_place(s, j, use_blocked);
        if (placed < 0) {
            err = placed;
            break;
        }
        if (!s->victims_for[j->id])
            drop_claims(s, j->id);
        if (placed == 1) {
            uint32_t target = s->n_res ? backfill_target(s, j, rank, now) : SCHED_NONE;
            start_job(s, j, now, out);
            j->backfill_for = target;
            continue;
        }
        if (placed == 2) {
            /* part of a gang under a no-gang policy: it holds those workers and waits */
            j->units = placement_units(c, &j->pl);
            reason_set(j, "placed some of its workers; the others wait for room");
            continue;
        }
        /* the job's reason holds the placer's words now; what follows may say more */
        if (j->req.kind == REQ_GPUS && units >= GPU_UNITS)
            whole_wanted += units / GPU_UNITS;
        if (s->victims_for[j->id]) {
            j->held_back = SCHED_HELD_PREEMPTING;
            reason_victims(s, j, "waiting for the work preempted for it to stop", running,
                           n_running, now);
            continue;
        }
        bool may_preempt = s->cfg.preempt != SCHED_PREEMPT_NONE &&
                           preempt_tries < s->cfg.max_preempt_tries &&
                           (s->cfg.preempt != SCHED_PREEMPT_QUOTA ||
                            j->priority == PRIO_PRODUCTION || in_guarantee);
        if (may_preempt) {
            preempt_tries++;
            SchedJob **victims = NULL;
            size_t n_victims = 0;
            err = preempt_plan(s, now, j, running, n_running, &victims, &n_victims);
            if (!err)
                err = stop_victims(s, j, victims, n_victims, now, out);
            free(victims);
            if (n_victims) {
                j->held_back = SCHED_HELD_PREEMPTING;
                reason_victims(s, j, "preempting lower-priority or borrowed work to make room",
                               running, n_running, now);
                continue;
            }
        }
        bool needs_room = j->req.workers > 1 || (j->req.kind == REQ_GPUS && j->req.gpus > 1);
        if (s->cfg.backfill && needs_room && reservations < s->cfg.max_reservations) {
            reservations++;
            size_t before = s->n_res;
            err = reserve_gang(s, j, running, n_running, now);
            if (!err && s->n_res > before && s->res[before].start_ms <= now) {
                /* its time has come: move the backfill in its way, if that is all */
                err = move_backfill(s, j, (uint32_t)before, running, n_running, now, out);
                if (!err && s->victims_for[j->id]) {
                    reason_victims(s, j,
                                   "its reserved nodes are being freed: the preemptible work "
                                   "that used them meanwhile moves",
                                   running, n_running, now);
                    continue;
                }
            }
            if (!err && s->n_res > before) {
                reason_holds(s, j, (uint32_t)before, now);
                continue;
            }
        }
        uint32_t kept = use_blocked ? blocked_room(s, j) : SCHED_NONE;
        if (kept != SCHED_NONE)
            reason_kept(s, j, kept, now);
    }
    if (!err && s->cfg.drain)
        err = drain(s, whole_wanted, running, n_running, now, out);
    if (!err && s->cfg.consolidate && whole_wanted >= 1)
        err = move_servers(s, (unsigned)MIN(whole_wanted, (double)CONSOLIDATE_PER_CYCLE), running,
                           n_running, now, out);
    /* what is still waiting, in this cycle's order (queue positions) */
    size_t keep = 0;
    for (size_t i = 0; i < s->n_order; i++)
        if (s->order[i]->queued)
            s->order[keep++] = s->order[i];
    s->n_order = keep;
    return err;
}

void sched_release(Sched *s, SchedJob *j, int64_t now_ms)
{
    /* its usage counts up to the moment it stopped */
    tenancy_advance(&s->ten, now_ms);
    /* a preempted job's room is its preemptor's until that one's next turn */
    if (j->stopping && j->nominated != SCHED_NONE)
        for (size_t w = 0; w < j->pl.n_workers; w++) {
            /* out of memory, the claim is lost: the room goes by queue order */
            uint32_t n = j->pl.workers[w].node;
            if (GROW(s->claim_nodes, s->claim_nodes_cap, s->n_claim_nodes + 1) < 0)
                break;
            s->claim_nodes[s->n_claim_nodes++] = n;
            s->node_claim[n] = j->nominated;
        }
    if (j->pl.n_workers)
        place_release(s->c, &j->pl);
    placement_reset(&j->pl);
    sched_move_done(s, j);
    uint32_t slot = tenancy_slot(&s->ten, j->team);
    if (j->running) {
        s->ten.teams[slot].held_units -= j->units;
        if (!j->borrowed)
            s->ten.teams[slot].guaranteed_held -= j->units;
    }
    j->units = 0;
    j->running = false;
    j->stopping = false;
    j->borrowed = false;
    j->nominated = SCHED_NONE;
}
