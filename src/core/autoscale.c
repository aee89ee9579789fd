/* autoscale.c: one autoscaler pass (autoscale.h). Demand is planned on "bins": a bin is
 * a node seen as what it has left (whole GPUs, the compute left on the GPU slices are
 * carved from, host CPU and memory). The nodes already starting are bins, and a pass
 * opens a bin for each absent node it decides to start; each waiting job that waits for
 * room is packed first-fit into the bins of the first pool, in the rule's order, that
 * holds all its workers. The bins ignore MIG geometry and topology (a slice takes its
 * compute from a GPU, a gang only needs its workers to fit in the pool), so a plan can
 * be a little optimistic; the scheduler places for real once the nodes are up. */
#include "core/autoscale.h"

#include "core/job.h"
#include "util/macro.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define TIER_BIT(t) (1u << (t))

void autoscale_config_default(AutoscaleConfig *cfg)
{
    *cfg = (AutoscaleConfig){
        .max_wait_ms = 15 * 60 * INT64_C(1000),
        .max_moves = 1,
        .move_min_run_ms = 10 * 60 * INT64_C(1000),
        .move_min_left_ms = 30 * 60 * INT64_C(1000),
    };
}

int64_t autoscale_checkpoint_interval_ms(int64_t cost_ms, double interruptions_per_hour)
{
    if (cost_ms <= 0 || !(interruptions_per_hour > 0))
        return 0;
    double mtbi_ms = 3.6e6 / interruptions_per_hour;
    double t = sqrt(2.0 * (double)cost_ms * mtbi_ms);
    if (t <= (double)AUTOSCALE_CKPT_MIN_MS)
        return AUTOSCALE_CKPT_MIN_MS;
    if (t >= (double)AUTOSCALE_CKPT_MAX_MS)
        return AUTOSCALE_CKPT_MAX_MS;
    return (int64_t)llround(t);
}

void autoscale_decisions_free(AutoscaleDecisions *d)
{
    free(d->d);
    *d = (AutoscaleDecisions){0};
}

static int decide(AutoscaleDecisions *out, AutoscaleKind kind, uint32_t node, uint32_t job)
{
    if (GROW(out->d, out->cap, out->n + 1) < 0)
        return -ENOMEM;
    out->d[out->n++] = (AutoscaleDecision){.kind = (uint8_t)kind, .node = node, .job = job};
    return 0;
}

int autoscale_init(Autoscaler *a, const Cluster *c, const AutoscaleConfig *cfg)
{
    *a = (Autoscaler){.cfg = *cfg, .n_nodes = c->n_nodes};
    size_t nn = c->n_nodes ? c->n_nodes : 1, np = c->n_pools ? c->n_pools : 1;
    a->idle_since_ms = malloc(nn * sizeof(*a->idle_since_ms));
    a->kept = calloc(np, sizeof(*a->kept));
    a->absent = calloc(np, sizeof(*a->absent));
    a->cursor = calloc(np, sizeof(*a->cursor));
    a->wanted = calloc(np, sizeof(*a->wanted));
    a->by_price = calloc(np, sizeof(*a->by_price));
    if (!a->idle_since_ms || !a->kept || !a->absent || !a->cursor || !a->wanted || !a->by_price) {
        autoscale_free(a);
        return -ENOMEM;
    }
    for (size_t i = 0; i < c->n_nodes; i++)
        a->idle_since_ms[i] = -1;
    /* cheapest first; equal prices in file order (insertion sort is stable) */
    for (size_t i = 0; i < c->n_pools; i++) {
        size_t k = i;
        while (k > 0 &&
               c->pools[a->by_price[k - 1]].price_micro_usd > c->pools[i].price_micro_usd) {
            a->by_price[k] = a->by_price[k - 1];
            k--;
        }
        a->by_price[k] = (uint32_t)i;
    }
    return 0;
}

void autoscale_free(Autoscaler *a)
{
    if (!a)
        return;
    free(a->idle_since_ms);
    free(a->kept);
    free(a->absent);
    free(a->cursor);
    free(a->wanted);
    free(a->by_price);
    free(a->bins);
    free(a->saved);
    *a = (Autoscaler){0};
}

/* ---- bins ---- */

static int add_bin(Autoscaler *a, const Cluster *c, uint32_t node)
{
    if (GROW(a->bins, a->bins_cap, a->n_bins + 1) < 0)
        return -ENOMEM;
    const Node *n = &c->nodes[node];
    a->bins[a->n_bins++] = (AutoscaleBin){
        .node = node,
        .pool = n->pool,
        .free_whole = n->free_whole,
        .cpu_milli = n->cpu_milli - n->cpu_used_milli,
        .memory_mib = n->memory_mib - n->memory_used_mib,
    };
    return 0;
}

/* Take one worker of r from the bin; false (the bin unchanged) when it does not fit. */
static bool take(const Cluster *c, AutoscaleBin *b, const Request *r)
{
    const Pool *p = &c->pools[b->pool];
    if (r->cpu_milli > b->cpu_milli || r->memory_mib > b->memory_mib)
        return false;
    switch (r->kind) {
    case REQ_NONE:
        break;
    case REQ_GPUS:
        if (b->free_whole < r->gpus)
            return false;
        b->free_whole = (uint8_t)(b->free_whole - r->gpus);
        break;
    default: {
        bool mig = p->mig && gpu_model_has_mig(&c->models[p->model].m);
        uint32_t u = request_units_on(c, r, p->model, mig);
        if (!u || u > GPU_UNITS)
            return false;
        if (u <= b->part_units) {
            b->part_units -= u;
        } else if (b->free_whole) {
            b->free_whole--;
            b->part_units = GPU_UNITS - u;
        } else {
            return false;
        }
        break;
    }
    }
    b->cpu_milli -= r->cpu_milli;
    b->memory_mib -= r->memory_mib;
    return true;
}

/* May the job run on the pool's nodes at all (tier, model, fabric)? */
static bool pool_allows(const Cluster *c, uint32_t pool, const Request *r)
{
    const Pool *p = &c->pools[pool];
    return (r->tiers & TIER_BIT(p->tier)) && (r->models & (1ull << p->model)) &&
           (!r->fabric || r->fabric == p->fabric);
}

/* The next absent node of the pool not planned yet (the caller checked there is one). */
static uint32_t next_absent(Autoscaler *a, const Cluster *c, uint32_t pool)
{
    uint32_t i = a->cursor[pool];
    while (c->nodes[i].pool != pool || c->nodes[i].state != NODE_ABSENT)
        i++;
    a->cursor[pool] = i + 1;
    return i;
}

/* Open a bin on an absent node of the pool. */
static int open_bin(Autoscaler *a, const Cluster *c, uint32_t pool)
{
    int err = add_bin(a, c, next_absent(a, c, pool));
    if (!err)
        a->absent[pool]--;
    return err;
}

/* Start the nodes of the bins from `from` on (opened in this pass). */
static int start_bins(Autoscaler *a, size_t from, AutoscaleDecisions *out)
{
    for (size_t b = from; b < a->n_bins; b++) {
        int err = decide(out, AS_START, a->bins[b].node, 0);
        if (err)
            return err;
        a->kept[a->bins[b].pool]++;
    }
    return 0;
}

static int save_bins(Autoscaler *a)
{
    if (a->n_bins > a->saved_cap) {
        AutoscaleBin *grown = realloc(a->saved, a->n_bins * sizeof(*grown));
        if (!grown)
            return -ENOMEM;
        a->saved = grown;
        a->saved_cap = a->n_bins;
    }
    if (a->n_bins)
        memcpy(a->saved, a->bins, a->n_bins * sizeof(*a->bins));
    return 0;
}

/* Pack every worker of r into the pool's bins, opening bins on absent nodes as needed:
 * 1 and the new nodes started, or 0 with the bins as they were. */
static int fit_job(Autoscaler *a, const Cluster *c, uint32_t pool, const Request *r,
                   AutoscaleDecisions *out)
{
    size_t n0 = a->n_bins;
    bool any = a->absent[pool] > 0;
    for (size_t b = 0; b < n0 && !any; b++)
        any = a->bins[b].pool == pool;
    if (!any)
        return 0;
    int err = save_bins(a);
    if (err)
        return err;
    uint32_t absent0 = a->absent[pool], cursor0 = a->cursor[pool];
    uint32_t workers = MAX(r->workers, 1u);
    bool one_node = workers > 1 && r->scope_required && r->scope == SCOPE_NODE;
    bool ok = true;
    if (one_node) {
        ok = false;
        for (size_t b = 0; b <= n0 && !ok; b++) {
            if (b == n0) {
                /* no bin had room for them all: a new node, then */
                if (!a->absent[pool])
                    break;
                if ((err = open_bin(a, c, pool)) < 0)
                    return err;
            } else if (a->bins[b].pool != pool) {
                continue;
            }
            AutoscaleBin keep = a->bins[b];
            uint32_t w = 0;
            while (w < workers && take(c, &a->bins[b], r))
                w++;
            ok = w == workers;
            if (!ok)
                a->bins[b] = keep;
        }
    } else {
        for (uint32_t w = 0; w < workers && ok; w++) {
            bool placed = false;
            for (size_t b = 0; b < a->n_bins && !placed; b++)
                placed = a->bins[b].pool == pool && take(c, &a->bins[b], r);
            if (!placed && a->absent[pool]) {
                if ((err = open_bin(a, c, pool)) < 0)
                    return err;
                placed = take(c, &a->bins[a->n_bins - 1], r);
            }
            ok = placed;
        }
    }
    if (!ok) {
        a->n_bins = n0;
        if (n0)
            memcpy(a->bins, a->saved, n0 * sizeof(*a->bins));
        a->absent[pool] = absent0;
        a->cursor[pool] = cursor0;
        return 0;
    }
    a->wanted[pool] = true;
    err = start_bins(a, n0, out);
    return err ? err : 1;
}

/* Plan one waiting job onto the cheapest pool the rules allow. */
static int plan_job(Autoscaler *a, const Cluster *c, const AutoscaleJob *w, int64_t now,
                    AutoscaleDecisions *out)
{
    const SchedJob *j = w->j;
    const Request *r = &j->req;
    bool saves = j->preemptible && w->checkpoints;
    /* what an interruption would lose never goes to spot, whatever its tiers say (its
     * request's tiers leave spot out already: job_spec_spot_ok) */
    bool spot_ok = (r->tiers & TIER_BIT(TIER_SPOT)) && saves;
    int64_t max_wait = w->max_wait_ms > 0 ? w->max_wait_ms : a->cfg.max_wait_ms;
    int64_t deadline = w->waiting_since_ms + max_wait;
    bool spot_first = spot_ok && saves && now < deadline;
    for (int pass = 0; pass < 2; pass++) {
        bool spot = spot_first ? pass == 0 : pass == 1;
        if (spot && !spot_ok)
            continue;
        for (size_t k = 0; k < c->n_pools; k++) {
            uint32_t p = a->by_price[k];
            if ((c->pools[p].tier == TIER_SPOT) != spot || !pool_allows(c, p, r))
                continue;
            int fit = fit_job(a, c, p, r, out);
            if (fit < 0)
                return fit;
            if (fit) {
                /* spot was planned: past its max_wait, other tiers may take over */
                if (spot_first && deadline < out->wake_ms)
                    out->wake_ms = deadline;
                return 0;
            }
        }
    }
    return 0;
}

/* ---- moving work back to reserved or owned capacity ---- */

/* Does j hold all of its nodes alone, all up in autoscaled on-demand or spot pools? */
static bool alone_on_paid_nodes(const Cluster *c, const SchedJob *j)
{
    for (size_t w = 0; w < j->pl.n_workers; w++) {
        uint32_t node = j->pl.workers[w].node;
        const Node *n = &c->nodes[node];
        const Pool *p = &c->pools[n->pool];
        if (!pool_autoscaled(p) || (p->tier != TIER_ON_DEMAND && p->tier != TIER_SPOT) ||
            n->state != NODE_UP)
            return false;
        uint64_t units = 0, cpu = 0, mem = 0;
        for (size_t v = 0; v < j->pl.n_workers; v++) {
            const WorkerAlloc *wa = &j->pl.workers[v];
            if (wa->node != node)
                continue;
            units += worker_units(c, wa);
            cpu += wa->cpu_milli;
            mem += wa->memory_mib;
        }
        if (units != n->used_units || cpu != n->cpu_used_milli || mem != n->memory_used_mib)
            return false;
    }
    return j->pl.n_workers > 0;
}

/* Pack j's workers into the free room of the reserved and owned bins it may use. */
static bool fits_owned(Autoscaler *a, const Cluster *c, const SchedJob *j)
{
    const Request *r = &j->req;
    for (size_t w = 0; w < MAX(r->workers, 1u); w++) {
        bool placed = false;
        for (size_t b = 0; b < a->n_bins && !placed; b++)
            placed = pool_allows(c, a->bins[b].pool, r) && take(c, &a->bins[b], r);
        if (!placed)
            return false;
    }
    return true;
}

static int plan_moves(Autoscaler *a, const Cluster *c, const AutoscaleJob *running,
                      size_t n_running, int64_t now, AutoscaleDecisions *out)
{
    a->n_bins = 0;
    for (size_t i = 0; i < c->n_nodes; i++) {
        const Node *n = &c->nodes[i];
        Tier t = c->pools[n->pool].tier;
        if ((t == TIER_OWNED || t == TIER_RESERVED) && n->schedulable && n->free_whole) {
            int err = add_bin(a, c, (uint32_t)i);
            if (err)
                return err;
        }
    }
    unsigned moves = 0;
    for (size_t i = 0; i < n_running && a->n_bins && moves < a->cfg.max_moves; i++) {
        const AutoscaleJob *w = &running[i];
        const SchedJob *j = w->j;
        if (!j->preemptible || !w->checkpoints || w->moved || j->stopping || !j->running ||
            now - j->run_start_ms < a->cfg.move_min_run_ms ||
            (j->estimate_ms != NO_DURATION && j->estimate_ms < a->cfg.move_min_left_ms) ||
            !alone_on_paid_nodes(c, j))
            continue;
        int err = save_bins(a);
        if (err)
            return err;
        if (!fits_owned(a, c, j)) {
            memcpy(a->bins, a->saved, a->n_bins * sizeof(*a->bins));
            continue;
        }
        if ((err = decide(out, AS_MOVE, j->pl.workers[0].node, j->id)) < 0)
            return err;
        for (size_t v = 0; v < j->pl.n_workers; v++) {
            uint32_t node = j->pl.workers[v].node;
            bool seen = false;
            for (size_t u = 0; u < v; u++)
                seen |= j->pl.workers[u].node == node;
            if (!seen && (err = decide(out, AS_DRAIN, node, j->id)) < 0)
                return err;
        }
        moves++;
    }
    return 0;
}

/* ---- the pass ---- */

int autoscale_pass(Autoscaler *a, const Cluster *c, const AutoscaleJob *waiting, size_t n_waiting,
                   const AutoscaleJob *running, size_t n_running, int64_t now_ms,
                   AutoscaleDecisions *out)
{
    out->wake_ms = INT64_MAX;
    for (size_t p = 0; p < c->n_pools; p++) {
        a->kept[p] = a->absent[p] = 0;
        a->cursor[p] = UINT32_MAX;
        a->wanted[p] = false;
    }
    a->n_bins = 0;
    int err = 0;
    for (size_t i = 0; i < c->n_nodes && !err; i++) {
        const Node *n = &c->nodes[i];
        uint32_t p = n->pool;
        if (n->state == NODE_ABSENT) {
            a->absent[p]++;
            a->cursor[p] = MIN(a->cursor[p], (uint32_t)i);
        } else if (n->state != NODE_LEAVING) {
            a->kept[p]++;
        }
        if (n->state == NODE_STARTING)
            err = add_bin(a, c, (uint32_t)i);
        if (n->state == NODE_UP && node_empty(n)) {
            if (a->idle_since_ms[i] < 0)
                a->idle_since_ms[i] = now_ms;
        } else {
            a->idle_since_ms[i] = -1;
        }
    }
    /* pools below their minimum (interrupted spot nodes) get their nodes back */
    for (size_t p = 0; p < c->n_pools && !err; p++) {
        size_t from = a->n_bins;
        while (!err && a->kept[p] + (a->n_bins - from) < c->pools[p].min_nodes && a->absent[p])
            err = open_bin(a, c, (uint32_t)p);
        if (!err)
            err = start_bins(a, from, out);
    }
    /* the jobs that wait for room, in queue order */
    bool owned_wanted = false;
    for (size_t i = 0; i < n_waiting && !err; i++) {
        const SchedJob *j = waiting[i].j;
        if (j->held_back != SCHED_HELD_NO)
            continue;
        owned_wanted |= (j->req.tiers & (TIER_BIT(TIER_OWNED) | TIER_BIT(TIER_RESERVED))) != 0;
        err = plan_job(a, c, &waiting[i], now_ms, out);
    }
    /* idle nodes beyond the minimum go */
    for (size_t i = 0; i < c->n_nodes && !err; i++) {
        int64_t since = a->idle_since_ms[i];
        uint32_t p = c->nodes[i].pool;
        const Pool *pool = &c->pools[p];
        if (since < 0 || !pool_autoscaled(pool) || a->kept[p] <= pool->min_nodes || a->wanted[p])
            continue;
        int64_t due = since + pool->idle_ms;
        if (due > now_ms) {
            out->wake_ms = MIN(out->wake_ms, due);
            continue;
        }
        err = decide(out, AS_RELEASE, (uint32_t)i, 0);
        a->kept[p]--;
        a->idle_since_ms[i] = -1;
    }
    if (!err && a->cfg.max_moves && !owned_wanted)
        err = plan_moves(a, c, running, n_running, now_ms, out);
    return err;
}
