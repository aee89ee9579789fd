/* place.c: the placer. Feasibility and capacity are exact (CPU, memory, whole GPUs,
 * MPS shares, MIG geometry with idle instances re-carvable), so a gang is placed by
 * choosing the tightest topology domain whose summed capacity covers it and then
 * filling that domain worker by worker: every valid choice inside a node lowers that
 * node's capacity by exactly one worker (shares and whole GPUs trivially; MIG because
 * the valid starts of a profile are disjoint aligned blocks), so greedy filling never
 * strands a gang that fits.
 *
 * A request by memory on a MIG node takes a slice, with two exceptions MPS serves
 * better: where only the whole GPU's slice holds it, it takes a share of its memory and
 * leaves the rest of that GPU to other shares; and a one-worker request takes MPS room a
 * GPU of the node already has rather than cut a slice. Measured on the mixed cluster
 * under mix-demo, where a model-server class learns 48-57 GB after an out-of-memory
 * failure: the first alone gave +0.3 to +1.3 points of utilisation on the five seeds,
 * both together 78.3-79.2% where it was 76.1-79.1% (bench/RESULTS.md). Such a share is
 * whole memory slots of the GPU (request_from_job), so it keeps the headroom a slice
 * would have had. */
#include "core/place.h"
#include "core/policies.h"

#include "util/macro.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#define MILLI_UNITS (GPU_UNITS / 1000)

unsigned gpu_free_milli(const Gpu *g)
{
    switch (g->mode) {
    case GPU_WHOLE:
        return g->used_units ? 0 : 1000;
    case GPU_SHARED:
        return (GPU_UNITS - g->used_units) / MILLI_UNITS;
    case GPU_MIG:
        return g->mig_busy ? 0 : 1000; /* MIG can be turned off */
    }
    return 0;
}

/* A request by memory on a node that may be partitioned: is its smallest slice short of
 * the whole GPU? Then it takes MPS room only where MPS already shares a GPU. */
static bool memory_fits_a_slice(const Cluster *c, const Node *n, const Request *r)
{
    if (r->kind != REQ_MEMORY || !n->mig_allowed || r->mig_profile[n->model] < 0)
        return false;
    const GpuModel *m = node_model(c, n);
    return m->profiles[r->mig_profile[n->model]].compute_slices < m->mig_compute_slices;
}

unsigned place_share_room(const Cluster *c, const Node *n, const Request *r, unsigned i)
{
    const Gpu *g = node_gpu_c(c, n, i);
    if (g->draining || (memory_fits_a_slice(c, n, r) && g->mode != GPU_SHARED))
        return 0;
    return gpu_free_milli(g);
}

SliceMode place_slice_mode(const Cluster *c, const Node *n, const Request *r)
{
    unsigned mi = n->model;
    switch (r->kind) {
    case REQ_MIG:
        return n->mig_allowed && r->mig_profile[mi] >= 0 ? SLICE_MIG : SLICE_NONE;
    case REQ_MEMORY:
        if (n->mig_allowed && r->mig_profile[mi] >= 0) {
            /* the whole GPU's profile isolates nothing a share does not and strands the
             * rest of the GPU: a share of that memory leaves it to other shares */
            if (r->share_milli[mi] && !memory_fits_a_slice(c, n, r))
                return SLICE_SHARE;
            /* room MPS already shares is filled before a slice is cut; one worker only,
             * as a gang's mode must not change while its workers are placed */
            for (unsigned i = 0; r->share_milli[mi] && r->workers <= 1 && i < n->n_gpus; i++)
                if (place_share_room(c, n, r, i) >= r->share_milli[mi])
                    return SLICE_SHARE;
            return SLICE_MIG;
        }
        return r->share_milli[mi] ? SLICE_SHARE : SLICE_NONE;
    case REQ_FRACTION:
        return r->share_milli[mi] ? SLICE_SHARE : SLICE_NONE;
    default:
        return SLICE_NONE;
    }
}

uint32_t place_units_on(const Cluster *c, const Node *n, const Request *r)
{
    return request_units_on(c, r, n->model, place_slice_mode(c, n, r) == SLICE_MIG);
}

void place_effective_request(const Policy *p, const Request *r, Request *ret)
{
    *ret = *r;
    if (!(p->flags & POLICY_INDIVISIBLE))
        return;
    if (r->kind == REQ_MIG || r->kind == REQ_MEMORY || r->kind == REQ_FRACTION) {
        /* GPUs are integers: a slice request takes one whole GPU of a model it fits */
        uint64_t models = 0;
        for (unsigned mi = 0; mi < CLUSTER_MAX_MODELS; mi++)
            if ((r->models & (1ull << mi)) && (r->mig_profile[mi] >= 0 || r->share_milli[mi]))
                models |= 1ull << mi;
        ret->kind = REQ_GPUS;
        ret->gpus = 1;
        ret->models = models;
        memset(ret->mig_profile, -1, sizeof(ret->mig_profile));
        memset(ret->share_milli, 0, sizeof(ret->share_milli));
    }
}

/* ---- feasibility and capacity ---- */

static bool node_admits(const Cluster *c, const Node *n, const Request *r)
{
    if (!n->schedulable || !(r->models & (1ull << n->model)))
        return false;
    if (r->fabric && n->fabric != r->fabric)
        return false;
    return (r->tiers >> c->pools[n->pool].tier) & 1;
}

bool place_draws(const PlaceCtx *ctx)
{
    return ctx->policy->flags & (POLICY_RANDOM_TIES | POLICY_UNCACHED);
}

bool place_node_admits(const Cluster *c, uint32_t node, const Request *r)
{
    return node_admits(c, &c->nodes[node], r);
}

static unsigned host_cap(const Node *n, const Request *r, unsigned limit)
{
    unsigned cap = limit;
    if (r->cpu_milli)
        cap = MIN(cap, (n->cpu_milli - n->cpu_used_milli) / r->cpu_milli);
    if (r->memory_mib)
        cap = MIN(cap, (n->memory_mib - n->memory_used_mib) / r->memory_mib);
    return cap;
}

static unsigned gpu_cap(const Cluster *c, const Node *n, const Request *r, unsigned limit)
{
    if (r->kind == REQ_NONE)
        return limit;
    if (r->kind == REQ_GPUS)
        return (unsigned)(n->free_whole + n->idle_mig) / r->gpus;
    SliceMode mode = place_slice_mode(c, n, r);
    unsigned total = 0;
    if (mode == SLICE_MIG) {
        const GpuModel *m = node_model(c, n);
        int p = r->mig_profile[n->model];
        for (unsigned i = 0; i < n->n_gpus && total < limit; i++) {
            const Gpu *g = node_gpu_c(c, n, i);
            if (g->mode == GPU_SHARED || (g->mode == GPU_WHOLE && g->used_units) || g->draining)
                continue;
            total += mig_max_addable(m, &g->mig, g->mig_busy, p);
        }
    } else if (mode == SLICE_SHARE) {
        unsigned want = r->share_milli[n->model];
        for (unsigned i = 0; i < n->n_gpus && total < limit; i++)
            total += place_share_room(c, n, r, i) / want;
    }
    return total;
}

unsigned place_node_capacity(const PlaceCtx *ctx, const Cluster *c, uint32_t node, const Request *r,
                             unsigned limit)
{
    (void)ctx;
    const Node *n = &c->nodes[node];
    if (!node_admits(c, n, r))
        return 0;
    unsigned cap = host_cap(n, r, limit);
    if (cap == 0)
        return 0;
    return MIN(cap, gpu_cap(c, n, r, cap));
}

/* ---- choices inside a node ---- */

static bool gpu_whole_free(const Gpu *g)
{
    return g->mode == GPU_WHOLE && g->used_units == 0;
}

static bool gpu_mig_idle(const Gpu *g)
{
    return g->mode == GPU_MIG && g->mig_busy == 0;
}

/* The bits set in a mask of a node's GPUs (no builtin: it may call libgcc, which the
 * purity check refuses). */
static unsigned bits(uint32_t m)
{
    unsigned k = 0;
    for (; m; m &= m - 1)
        k++;
    return k;
}

/* The links among the GPUs of set (a mask), each pair once. */
static unsigned links_within(const Cluster *c, const Node *n, uint32_t set)
{
    unsigned k = 0;
    for (unsigned i = 0; i < n->n_gpus; i++)
        if (set & (1u << i))
            k += bits(node_gpu_c(c, n, i)->nvlink & set);
    return k / 2;
}

/* want free whole GPUs with the most NVLink links among them, as the agent reported
 * the node's links (not pairs assumed by index): from each free GPU, grow the set by
 * the free GPU with the most links into it; the best set wins, the lowest seed on a
 * tie. Returns the mask chosen (fewer than want bits when short). */
static uint32_t linked_set(const Cluster *c, const Node *n, unsigned want)
{
    uint32_t free_mask = 0;
    for (unsigned i = 0; i < n->n_gpus; i++)
        if (gpu_whole_free(node_gpu_c(c, n, i)))
            free_mask |= 1u << i;
    uint32_t best = 0;
    unsigned best_links = 0;
    for (unsigned s = 0; s < n->n_gpus; s++) {
        if (!(free_mask & (1u << s)))
            continue;
        uint32_t set = 1u << s;
        for (unsigned got = 1; got < want; got++) {
            int pick = -1;
            unsigned pick_links = 0;
            for (unsigned i = 0; i < n->n_gpus; i++) {
                if (!(free_mask & ~set & (1u << i)))
                    continue;
                unsigned l = bits(node_gpu_c(c, n, i)->nvlink & set);
                if (pick < 0 || l > pick_links) {
                    pick = (int)i;
                    pick_links = l;
                }
            }
            if (pick < 0)
                break;
            set |= 1u << pick;
        }
        unsigned l = links_within(c, n, set);
        if (!best || bits(set) > bits(best) || (bits(set) == bits(best) && l > best_links)) {
            best = set;
            best_links = l;
        }
    }
    return best;
}

static bool links_reported(const Cluster *c, const Node *n)
{
    for (unsigned i = 0; i < n->n_gpus; i++)
        if (node_gpu_c(c, n, i)->nvlink)
            return true;
    return false;
}

/* Choose `want` whole GPUs on n, keeping NVLink-linked GPUs (as reported, else pairs
 * by index on an NVLink-pairs node) and PCIe halves together. Free GPUs first; idle
 * MIG GPUs (which must leave MIG mode) only when short. */
static unsigned choose_whole(const Cluster *c, const Node *n, unsigned want, uint8_t *out)
{
    bool taken[NODE_MAX_GPUS] = {false};
    unsigned got = 0;
    const unsigned ng = n->n_gpus;
#define TAKE(i)                                                                                    \
    do {                                                                                           \
        taken[i] = true;                                                                           \
        out[got++] = (uint8_t)(i);                                                                 \
    } while (0)
    if (want > 1 && n->interconnect != IC_NVSWITCH && links_reported(c, n)) {
        uint32_t set = linked_set(c, n, want);
        for (unsigned i = 0; i < ng && got < want; i++)
            if (set & (1u << i))
                TAKE(i);
    } else if (n->interconnect == IC_NVLINK_PAIRS) {
        /* whole pairs for the even part, then GPUs whose partner is busy */
        for (unsigned i = 0; i + 1 < ng && got + 2 <= want; i += 2)
            if (gpu_whole_free(node_gpu_c(c, n, i)) && gpu_whole_free(node_gpu_c(c, n, i + 1))) {
                TAKE(i);
                TAKE(i + 1);
            }
        for (unsigned i = 0; i < ng && got < want; i++) {
            unsigned partner = i ^ 1u;
            if (!taken[i] && gpu_whole_free(node_gpu_c(c, n, i)) &&
                (partner >= ng || !gpu_whole_free(node_gpu_c(c, n, partner)) || taken[partner]))
                TAKE(i);
        }
    } else if (n->interconnect == IC_PCIE && want <= ng / 2 && ng >= 2) {
        /* the PCIe half (NUMA side) with the fewest free GPUs that still fits */
        unsigned half = ng / 2, best = 2, best_free = UINT32_MAX;
        for (unsigned h = 0; h < 2; h++) {
            unsigned f = 0;
            for (unsigned i = h * half; i < (h + 1) * half; i++)
                f += gpu_whole_free(node_gpu_c(c, n, i));
            if (f >= want && f < best_free) {
                best = h;
                best_free = f;
            }
        }
        for (unsigned i = best * half; best < 2 && i < (best + 1) * half && got < want; i++)
            if (gpu_whole_free(node_gpu_c(c, n, i)))
                TAKE(i);
    }
    for (unsigned i = 0; i < ng && got < want; i++)
        if (!taken[i] && gpu_whole_free(node_gpu_c(c, n, i)))
            TAKE(i);
    for (unsigned i = 0; i < ng && got < want; i++)
        if (!taken[i] && gpu_mig_idle(node_gpu_c(c, n, i)))
            TAKE(i);
#undef TAKE
    return got;
}

/* Default share choice: the GPU with the least free room that still fits (ties to
 * the lower index), real free GPUs before idle MIG ones. */
static void default_pick_share(const Cluster *c, const Node *n, const Request *r, SlicePick *ret)
{
    unsigned best_key = UINT32_MAX, want = r->share_milli[n->model];
    for (unsigned i = 0; i < n->n_gpus; i++) {
        const Gpu *g = node_gpu_c(c, n, i);
        unsigned f = place_share_room(c, n, r, i);
        if (f < want)
            continue;
        unsigned key = f * 2 + (g->mode == GPU_MIG);
        if (key < best_key) {
            best_key = key;
            *ret = (SlicePick){.index = (uint8_t)i};
        }
    }
}

/* Default MIG choice: reuse an idle instance of the profile, else create one in free
 * slots, else re-carve idle instances, else partition a free GPU; inside a class the
 * busiest GPU, then the lowest index and start. */
static void default_pick_mig(const Cluster *c, const Node *n, int p, SlicePick *ret)
{
    const GpuModel *m = node_model(c, n);
    int best_class = 4;
    uint32_t best_used = 0;
    for (unsigned i = 0; i < n->n_gpus; i++) {
        const Gpu *g = node_gpu_c(c, n, i);
        if (g->mode == GPU_SHARED || (g->mode == GPU_WHOLE && g->used_units) || g->draining)
            continue;
        uint8_t reuse = 0;
        for (int s = 0; s < MIG_MAX_SLOTS; s++)
            if (g->mig.profile_at[s] == p && !(g->mig_busy & (1u << s)))
                reuse |= (uint8_t)(1u << s);
        uint8_t fresh = mig_free_starts(m, &g->mig, p);
        uint8_t recarve = mig_recarve_starts(m, &g->mig, g->mig_busy, p);
        int cls;
        uint8_t starts;
        if (reuse)
            cls = 0, starts = reuse;
        else if (fresh && g->mode == GPU_MIG)
            cls = 1, starts = fresh;
        else if (recarve && g->mode == GPU_MIG)
            cls = 2, starts = recarve;
        else if (fresh)
            cls = 3, starts = fresh;
        else
            continue;
        if (cls < best_class || (cls == best_class && g->used_units > best_used)) {
            best_class = cls;
            best_used = g->used_units;
            *ret = (SlicePick){
                .index = (uint8_t)i, .start = (uint8_t)__builtin_ctz(starts), .mig = true};
        }
    }
}

void place_default_pick(PlaceCtx *ctx, const Cluster *c, uint32_t node, const Request *r,
                        SlicePick *ret)
{
    (void)ctx;
    const Node *n = &c->nodes[node];
    if (place_slice_mode(c, n, r) == SLICE_MIG)
        default_pick_mig(c, n, r->mig_profile[n->model], ret);
    else
        default_pick_share(c, n, r, ret);
}

/* ---- placement bookkeeping ---- */

void placement_reset(Placement *p)
{
    p->n_workers = 0;
    p->n_changes = 0;
}

void placement_free(Placement *p)
{
    free(p->workers);
    free(p->changes);
    *p = (Placement){0};
}

/* Set a GPU's layout and remember the change (merged per GPU). */
static int change_mig(Cluster *c, Placement *pl, uint32_t node, unsigned index,
                      const MigLayout *after)
{
    const Gpu *g = node_gpu_c(c, &c->nodes[node], index);
    MigChange *ch = NULL;
    for (size_t i = 0; i < pl->n_changes; i++)
        if (pl->changes[i].node == node && pl->changes[i].index == index)
            ch = &pl->changes[i];
    if (!ch) {
        if (GROW(pl->changes, pl->changes_cap, pl->n_changes + 1) < 0)
            return -ENOMEM;
        ch = &pl->changes[pl->n_changes++];
        *ch = (MigChange){.node = node, .index = (uint8_t)index, .before = g->mig};
    }
    ch->after = *after;
    return cluster_set_mig(c, node, index, after);
}

/* Place one worker of r on node (which can take it) and apply it. */
static int place_worker(PlaceCtx *ctx, Cluster *c, uint32_t node, const Request *r, Placement *pl)
{
    if (GROW(pl->workers, pl->workers_cap, pl->n_workers + 1) < 0)
        return -ENOMEM;
    const Node *n = &c->nodes[node];
    WorkerAlloc w = {.node = node, .cpu_milli = r->cpu_milli, .memory_mib = r->memory_mib};
    int err = 0;
    MigLayout off;
    mig_layout_clear(&off);
    if (r->kind == REQ_GPUS) {
        uint8_t idx[NODE_MAX_GPUS];
        unsigned got = choose_whole(c, n, r->gpus, idx);
        if (got < r->gpus)
            return -EINVAL;
        for (unsigned i = 0; i < got; i++) {
            if (node_gpu_c(c, n, idx[i])->mode == GPU_MIG &&
                (err = change_mig(c, pl, node, idx[i], &off)) < 0)
                return err;
            w.grants[w.n_grants++] = (Grant){.index = idx[i], .kind = GRANT_WHOLE};
        }
    } else if (r->kind != REQ_NONE) {
        SliceMode mode = place_slice_mode(c, n, r);
        SlicePick pick = {.index = UINT8_MAX};
        if (ctx->policy->pick_slice)
            ctx->policy->pick_slice(ctx, c, node, r, &pick);
        else
            place_default_pick(ctx, c, node, r, &pick);
        if (pick.index >= n->n_gpus)
            return -EINVAL;
        const Gpu *g = node_gpu_c(c, n, pick.index);
        if (mode == SLICE_MIG) {
            int p = r->mig_profile[n->model];
            if (pick.wider) {
                const GpuModel *m = node_model(c, n);
                int q = pick.wider - 1;
                if (r->kind != REQ_MEMORY || q >= m->n_profiles ||
                    m->profiles[q].memory_slices != m->profiles[p].memory_slices ||
                    m->profiles[q].compute_slices <= m->profiles[p].compute_slices)
                    return -EINVAL;
                p = q;
            }
            if (!(g->mig.profile_at[pick.start] == p && !(g->mig_busy & (1u << pick.start)))) {
                MigLayout after = g->mig;
                mig_place(node_model(c, n), &after, g->mig_busy, p, pick.start);
                if ((err = change_mig(c, pl, node, pick.index, &after)) < 0)
                    return err;
            }
            w.grants[w.n_grants++] = (Grant){.index = pick.index,
                                             .kind = GRANT_MIG,
                                             .mig_profile = (uint8_t)p,
                                             .mig_start = pick.start};
        } else {
            if (g->mode == GPU_MIG && (err = change_mig(c, pl, node, pick.index, &off)) < 0)
                return err;
            w.grants[w.n_grants++] = (Grant){
                .index = pick.index, .kind = GRANT_SHARE, .milli = r->share_milli[n->model]};
        }
    }
    cluster_apply_worker(c, &w);
    pl->workers[pl->n_workers++] = w;
    return 0;
}

void place_undo(Cluster *c, Placement *pl)
{
    for (size_t i = pl->n_workers; i-- > 0;)
        cluster_release_worker(c, &pl->workers[i]);
    for (size_t i = pl->n_changes; i-- > 0;)
        cluster_set_mig(c, pl->changes[i].node, pl->changes[i].index, &pl->changes[i].before);
    placement_reset(pl);
}

void place_release(Cluster *c, const Placement *p)
{
    for (size_t i = p->n_workers; i-- > 0;)
        cluster_release_worker(c, &p->workers[i]);
}

/* ---- node choice ---- */

typedef struct PlaceFit {
    const PlaceCtx *ctx;
    const Request *r;
} PlaceFit;

static inline uint32_t order_at(const PlaceCtx *ctx, size_t i)
{
    return ctx->order ? ctx->order[i] : (uint32_t)i;
}

static double node_score(PlaceCtx *ctx, const Cluster *c, uint32_t node, const Request *r)
{
    ScoreCache *sc = ctx->cache;
    bool cached = sc && r->shape >= 0 && (size_t)r->shape < sc->n_shapes &&
                  !(ctx->policy->flags & POLICY_UNCACHED);
    size_t slot = cached ? (size_t)r->shape * sc->n_nodes + node : 0;
    if (cached && sc->stamp[slot] == c->nodes[node].version + 1)
        return sc->score[slot];
    double s = -INFINITY;
    if (place_node_capacity(ctx, c, node, r, 1))
        s = ctx->policy->score(ctx, c, node, r);
    if (cached) {
        sc->stamp[slot] = c->nodes[node].version + 1;
        sc->score[slot] = (float)s;
        s = sc->score[slot]; /* the same value whether it came from the cache or not */
    }
    return s;
}

/* Whether a node scoring s replaces the best so far (first: there is none yet): a
 * higher score does; an equal one, under POLICY_RANDOM_TIES, with the chance that makes
 * the pick uniform among the ties (a reservoir of one; *ties counts them). */
static bool takes_over(PlaceCtx *ctx, double s, double *best_score, bool first, uint64_t *ties)
{
    if (first || s > *best_score) {
        *best_score = s;
        *ties = 1;
        return true;
    }
    return s == *best_score && (ctx->policy->flags & POLICY_RANDOM_TIES) &&
           rng_below(ctx->rng, ++*ties) == 0;
}

/* Whether this pass may use the node: not blocked, of a tier the pass allows (checked
 * here and not through the request's tiers, so the score cache, kept by request shape,
 * stays true for the request as a whole). */
static bool pass_allows(const PlaceCtx *ctx, const Cluster *c, uint32_t node)
{
    if (ctx->blocked && ctx->blocked[node])
        return false;
    return !ctx->pass_tiers || ((ctx->pass_tiers >> c->pools[c->nodes[node].pool].tier) & 1);
}

/* The fit set's test: what node_score tells apart from -INFINITY. */
static bool takes_one(const void *arg, const Cluster *c, uint32_t node)
{
    const PlaceFit *pf = arg;
    return place_node_capacity(pf->ctx, c, node, pf->r, 1) > 0;
}

/* The best node for one worker among those `allowed` admits (NULL: all). */
static int64_t best_node(PlaceCtx *ctx, const Cluster *c, const Request *r, const uint8_t *allowed,
                         const uint32_t *cap)
{
    int64_t best = -1;
    double best_score = -INFINITY;
    uint64_t ties = 0;
    ScoreCache *sc = ctx->cache;
    PlaceFit pf = {.ctx = ctx, .r = r};
    if (!allowed && sc && fitset_sync(&sc->fit, c, ctx->order, r->shape, takes_one, &pf)) {
        /* only the nodes that can take it, in the order of a full scan */
        for (size_t i = fitset_next(&sc->fit, r->shape, 0); i != SIZE_MAX;
             i = fitset_next(&sc->fit, r->shape, i + 1)) {
            uint32_t node = order_at(ctx, i);
            if (!pass_allows(ctx, c, node))
                continue;
            double s = node_score(ctx, c, node, r);
            if (s != -INFINITY && takes_over(ctx, s, &best_score, best < 0, &ties))
                best = node;
        }
        return best;
    }
    for (size_t i = 0; i < c->n_nodes; i++) {
        uint32_t node = order_at(ctx, i);
        double s;
        if (!pass_allows(ctx, c, node))
            continue;
        if (allowed) {
            if (!allowed[node] || !cap[node])
                continue;
            s = ctx->policy->score(ctx, c, node, r);
        } else {
            s = node_score(ctx, c, node, r);
            if (s == -INFINITY)
                continue;
        }
        if (takes_over(ctx, s, &best_score, best < 0, &ties))
            best = node;
    }
    return best;
}

/* ---- explaining a failure ---- */

/* Could the node ever take a worker of r (when empty and ready)? */
static bool node_suits(const Cluster *c, const Node *n, const Request *r)
{
    return request_pool_misfit(&c->pools[n->pool], r) == POOL_FITS;
}

/* " of model A or B": the models of the nodes that could ever take it, unless that is
 * every model the cluster has (or none: the request's own then). */
static void describe_models(const Cluster *c, const Request *r, Buf *why)
{
    uint64_t all = c->n_models >= 64 ? UINT64_MAX : (1ull << c->n_models) - 1;
    if (r->kind == REQ_NONE)
        return;
    uint64_t models = 0;
    for (size_t i = 0; i < c->n_nodes; i++)
        if (node_suits(c, &c->nodes[i], r))
            models |= 1ull << c->nodes[i].model;
    if (!models)
        models = r->models;
    if ((models & all) == all)
        return;
    buf_puts(why, " of model ");
    bool first = true;
    for (unsigned mi = 0; mi < c->n_models; mi++) {
        if (!(models & (1ull << mi)))
            continue;
        buf_printf(why, "%s%s", first ? "" : " or ", c->models[mi].m.name);
        first = false;
    }
}

static void describe_ask(const Cluster *c, const Request *r, unsigned workers, Buf *why)
{
    switch (r->kind) {
    case REQ_NONE:
        buf_printf(why, "%u CPU millicores and %u MiB of memory", r->cpu_milli * workers,
                   r->memory_mib * workers);
        return;
    case REQ_GPUS:
        buf_printf(why, "%u free GPU%s", r->gpus * workers, r->gpus * workers == 1 ? "" : "s");
        break;
    default: {
        const char *profile = NULL;
        for (unsigned mi = 0; mi < c->n_models && !profile; mi++)
            if ((r->models & (1ull << mi)) && r->mig_profile[mi] >= 0)
                profile = c->models[mi].m.profiles[r->mig_profile[mi]].name;
        if (workers > 1)
            buf_printf(why, "%u ", workers);
        else
            buf_puts(why, "a ");
        if (r->kind == REQ_MIG) {
            buf_printf(why, "free %s MIG slice%s", profile, workers > 1 ? "s" : "");
        } else if (r->kind == REQ_FRACTION) {
            unsigned milli = 0;
            for (unsigned mi = 0; mi < c->n_models && !milli; mi++)
                milli = r->share_milli[mi];
            buf_printf(why, "free GPU share%s of %u.%03u", workers > 1 ? "s" : "", milli / 1000,
                       milli % 1000);
        } else if (profile) {
            buf_printf(why, "free %s MIG slice%s or MPS share%s of that memory", profile,
                       workers > 1 ? "s" : "", workers > 1 ? "s" : "");
        } else {
            buf_printf(why, "free MPS share%s of the GPU memory asked", workers > 1 ? "s" : "");
        }
    }
    }
    describe_models(c, r, why);
}

/* Why a node that suits a job takes none of it now, as people are told. */
typedef enum Unready {
    UNREADY_UNREGISTERED,
    UNREADY_LOST,
    UNREADY_MISMATCHED,
    UNREADY_NOTICE,
    UNREADY_DOWN,
    UNREADY_CORDONED,
    UNREADY_NOT_READY,
    UNREADY_TAINTED,
    UNREADY_MIG_FAILED,
    UNREADY_CLOSED,
    UNREADY_STARTING,
    UNREADY_LEAVING,
    UNREADY_ABSENT,
    UNREADY_COUNT
} Unready;

/* [cause][one, several] */
static const char *const unready_says[UNREADY_COUNT][2] = {
    {"has not registered (no agent has reported for it)",
     "have not registered (no agent has reported for them)"},
    {"is lost (its agent stopped answering)", "are lost (their agents stopped answering)"},
    {"is mismatched (its agent reports other GPUs than the cluster spec declares)",
     "are mismatched (their agents report other GPUs than the cluster spec declares)"},
    {"is being taken back by its cloud", "are being taken back by their cloud"},
    {"is shut down (its agent was stopped)", "are shut down (their agents were stopped)"},
    {"is cordoned", "are cordoned"},
    {"is not Ready", "are not Ready"},
    {"has a NoSchedule taint GPU pods do not tolerate",
     "have NoSchedule taints GPU pods do not tolerate"},
    {"failed its last MIG layout change (see its nvidia.com/mig.config.state)",
     "failed their last MIG layout changes (see their nvidia.com/mig.config.state)"},
    {"is closed to new work", "are closed to new work"},
    {"is starting", "are starting"},
    {"is leaving", "are leaving"},
    {"is not started (the autoscaler may start it)",
     "are not started (the autoscaler may start them)"},
};

static int unready_of(const Node *n)
{
    switch (n->state) {
    case NODE_ABSENT:
        return UNREADY_ABSENT;
    case NODE_STARTING:
        return UNREADY_STARTING;
    case NODE_LEAVING:
        return UNREADY_LEAVING;
    default:
        break;
    }
    if (n->schedulable)
        return -1;
    switch (n->away) {
    case AWAY_UNREGISTERED:
        return UNREADY_UNREGISTERED;
    case AWAY_LOST:
        return UNREADY_LOST;
    case AWAY_MISMATCHED:
        return UNREADY_MISMATCHED;
    case AWAY_NOTICE:
        return UNREADY_NOTICE;
    case AWAY_DOWN:
        return UNREADY_DOWN;
    case AWAY_CORDONED:
        return UNREADY_CORDONED;
    case AWAY_NOT_READY:
        return UNREADY_NOT_READY;
    case AWAY_TAINTED:
        return UNREADY_TAINTED;
    case AWAY_MIG_FAILED:
        return UNREADY_MIG_FAILED;
    default:
        return UNREADY_CLOSED;
    }
}

#define EXPLAIN_NAMES 3 /* nodes named per group; more are counted */

typedef struct NodeGroup {
    uint32_t n;
    uint32_t names[EXPLAIN_NAMES];
} NodeGroup;

static void group_add(NodeGroup *g, uint32_t node)
{
    if (g->n < EXPLAIN_NAMES)
        g->names[g->n] = node;
    g->n++;
}

/* "h100-1", "h100-1 and h100-2", "a, b and c", or "5 nodes". */
static void group_names(const Cluster *c, const NodeGroup *g, Buf *why)
{
    if (g->n > EXPLAIN_NAMES) {
        buf_printf(why, "%u nodes", g->n);
        return;
    }
    for (uint32_t i = 0; i < g->n; i++)
        buf_printf(why, "%s%s",
                   i == 0          ? ""
                   : i + 1 == g->n ? " and "
                                   : ", ",
                   c->nodes[g->names[i]].name);
}

/* Ready nodes that suit a job but hold too little of it, by why. */
typedef enum Short { SHORT_FULL, SHORT_PARTLY, SHORT_KEPT, SHORT_COUNT } Short;

/* [why][one alone, one of several, several] */
static const char *const short_says[SHORT_COUNT][3] = {
    {"has no room for a worker", "has no room for a worker", "have no room for a worker"},
    {"has room for only some of its workers", "has room for only some of its workers",
     "have room for only some of its workers"},
    {"is kept for another job", "is kept for other jobs", "are kept for other jobs"},
};

/* Append why the nodes that suit r hold too little of it now: how many of the ready ones
 * are full, partly free or kept for other jobs, which are not ready and why, and what
 * would let the job run. cap (per node, the workers of r it holds now, as a gang's
 * placement counted them) may be NULL: one worker is asked. */
static void explain_nodes(const PlaceCtx *ctx, const Cluster *c, const Request *r,
                          const uint32_t *cap, Buf *why)
{
    NodeGroup unready[UNREADY_COUNT] = {0};
    uint32_t shortfall[SHORT_COUNT] = {0};
    uint32_t suits = 0, most_free = 0, only = 0;
    for (size_t i = 0; i < c->n_nodes; i++) {
        const Node *n = &c->nodes[i];
        if (!node_suits(c, n, r))
            continue;
        suits++;
        only = (uint32_t)i;
        int u = unready_of(n);
        if (u >= 0) {
            group_add(&unready[u], (uint32_t)i);
            continue;
        }
        if (r->kind == REQ_GPUS)
            most_free = MAX(most_free, (uint32_t)(n->free_whole + n->idle_mig));
        uint32_t holds = cap ? cap[i] : place_node_capacity(ctx, c, (uint32_t)i, r, 1);
        if (ctx->blocked && ctx->blocked[i])
            shortfall[SHORT_KEPT]++;
        else if (!holds)
            shortfall[SHORT_FULL]++;
        else if (!node_empty(n))
            shortfall[SHORT_PARTLY]++; /* an empty one holds what it can: not short */
    }
    if (!suits)
        return;
    const char *sep = "";
    uint32_t said = shortfall[SHORT_FULL] + shortfall[SHORT_PARTLY] + shortfall[SHORT_KEPT];
    for (int u = 0; u < UNREADY_COUNT; u++)
        said += unready[u].n;
    if (!said)
        return; /* ready and empty where it may go: the room counted says it all */
    if (suits == 1) {
        buf_printf(why, ": the one node it may use, %s, ", c->nodes[only].name);
        for (int k = 0; k < SHORT_COUNT; k++)
            if (shortfall[k])
                buf_puts(why, short_says[k][0]);
        for (int u = 0; u < UNREADY_COUNT; u++)
            if (unready[u].n)
                buf_puts(why, unready_says[u][0]);
    } else {
        buf_printf(why, ": of the %u nodes it may use, ", suits);
        for (int k = 0; k < SHORT_COUNT; k++) {
            if (!shortfall[k])
                continue;
            buf_printf(why, "%s%u %s", sep, shortfall[k], short_says[k][1 + (shortfall[k] > 1)]);
            if (k == SHORT_FULL && r->kind == REQ_GPUS && !cap)
                buf_printf(why, " (the most free GPUs on one: %u)", most_free);
            sep = ", ";
        }
        for (int u = 0; u < UNREADY_COUNT; u++) {
            if (!unready[u].n)
                continue;
            buf_puts(why, sep);
            group_names(c, &unready[u], why);
            buf_printf(why, " %s", unready_says[u][unready[u].n > 1]);
            sep = ", ";
        }
    }
    /* what would let it run */
    buf_puts(why, "; it can start when ");
    sep = "";
    if (shortfall[SHORT_FULL] || shortfall[SHORT_PARTLY] || shortfall[SHORT_KEPT]) {
        buf_puts(why, "running work frees room");
        sep = " or ";
    }
    NodeGroup waiting = {0};
    for (int u = 0; u < UNREADY_ABSENT; u++)
        for (uint32_t k = 0; k < unready[u].n; k++)
            group_add(&waiting, unready[u].names[MIN(k, EXPLAIN_NAMES - 1)]);
    if (waiting.n) {
        buf_puts(why, sep);
        if (waiting.n <= EXPLAIN_NAMES) {
            group_names(c, &waiting, why);
            buf_puts(why, waiting.n > 1 ? " are ready" : " is ready");
        } else {
            buf_puts(why, "those nodes are ready");
        }
        sep = " or ";
    }
    if (unready[UNREADY_ABSENT].n)
        buf_printf(why, "%sthe autoscaler starts nodes", sep);
}

/* Why no node takes one worker. */
static void explain_single(const PlaceCtx *ctx, const Cluster *c, const Request *r, Buf *why)
{
    buf_puts(why, "no node has ");
    describe_ask(c, r, 1, why);
    if (r->kind != REQ_NONE && (r->cpu_milli || r->memory_mib))
        buf_puts(why, " with the CPU and memory asked");
    Request one = *r;
    one.workers = 1;
    explain_nodes(ctx, c, &one, NULL, why);
}

/* ---- gangs ---- */

static uint32_t leaf_domain(const Cluster *c, const Node *n)
{
    return n->leaf != NO_SWITCH ? n->leaf : (uint32_t)c->n_switches;
}

static uint32_t spine_domain(const Cluster *c, const Node *n)
{
    if (n->spine != NO_SWITCH)
        return n->spine;
    return leaf_domain(c, n);
}

static const char *const level_names[] = {"node", "node", "leaf", "spine"};

/* Sum node capacities per leaf (level SCOPE_LEAF) or spine. */
static void domain_sums(PlaceCtx *ctx, const Cluster *c, int level)
{
    memset(ctx->domain_cap, 0, (c->n_switches + 1) * sizeof(*ctx->domain_cap));
    for (size_t i = 0; i < c->n_nodes; i++) {
        const Node *n = &c->nodes[i];
        uint32_t d = level == SCOPE_LEAF ? leaf_domain(c, n) : spine_domain(c, n);
        ctx->domain_cap[d] += ctx->cap[i];
    }
}

/* Fill allowed[] with the nodes of the tightest domain at `level` that holds W
 * workers; returns false when none does (best = the most one domain holds). */
static bool choose_domain(PlaceCtx *ctx, const Cluster *c, const Request *r, int level,
                          uint8_t *allowed, uint64_t *best)
{
    uint32_t W = r->workers;
    memset(allowed, 0, c->n_nodes);
    *best = 0;
    if (level == SCOPE_NODE) {
        /* one node: the best-scoring node that takes all of it */
        int64_t pick = -1;
        double pick_score = -INFINITY;
        uint64_t ties = 0;
        for (size_t i = 0; i < c->n_nodes; i++) {
            uint32_t node = order_at(ctx, i);
            *best = MAX(*best, ctx->cap[node]);
            if (ctx->cap[node] < W)
                continue;
            double s = ctx->policy->score(ctx, c, node, r);
            if (takes_over(ctx, s, &pick_score, pick < 0, &ties))
                pick = node;
        }
        if (pick < 0)
            return false;
        allowed[pick] = 1;
        return true;
    }
    if (level == SCOPE_ANY) {
        /* the fewest leaves: spines by capacity, inside them leaves by capacity */
        uint64_t total = 0;
        for (size_t i = 0; i < c->n_nodes; i++)
            total += ctx->cap[i];
        *best = total;
        if (total < W)
            return false;
        size_t nd = c->n_switches + 1;
        uint64_t *leaf_cap = ctx->domain_cap;
        domain_sums(ctx, c, SCOPE_LEAF);
        uint32_t *list = ctx->domain_list;
        size_t nl = 0;
        for (size_t d = 0; d < nd; d++)
            if (leaf_cap[d])
                list[nl++] = (uint32_t)d;
        /* largest leaves first (insertion sort: leaf counts are small) */
        for (size_t i = 1; i < nl; i++)
            for (size_t j = i; j > 0 && leaf_cap[list[j]] > leaf_cap[list[j - 1]]; j--) {
                uint32_t t = list[j];
                list[j] = list[j - 1];
                list[j - 1] = t;
            }
        uint64_t covered = 0;
        size_t used = 0;
        while (covered < W && used < nl)
            covered += leaf_cap[list[used++]];
        for (size_t i = 0; i < c->n_nodes; i++) {
            uint32_t d = leaf_domain(c, &c->nodes[i]);
            for (size_t k = 0; k < used; k++)
                if (list[k] == d && ctx->cap[i])
                    allowed[i] = 1;
        }
        return true;
    }
    domain_sums(ctx, c, level);
    int64_t pick = -1;
    for (size_t d = 0; d <= c->n_switches; d++) {
        *best = MAX(*best, ctx->domain_cap[d]);
        if (ctx->domain_cap[d] >= W && (pick < 0 || ctx->domain_cap[d] < ctx->domain_cap[pick]))
            pick = (int64_t)d;
    }
    if (pick < 0)
        return false;
    for (size_t i = 0; i < c->n_nodes; i++) {
        const Node *n = &c->nodes[i];
        uint32_t d = level == SCOPE_LEAF ? leaf_domain(c, n) : spine_domain(c, n);
        if (d == (uint32_t)pick && ctx->cap[i])
            allowed[i] = 1;
    }
    return true;
}

static int place_gang(PlaceCtx *ctx, Cluster *c, const Request *r, Placement *pl, Buf *why)
{
    uint32_t W = r->workers;
    for (size_t i = 0; i < c->n_nodes; i++)
        ctx->cap[i] =
            pass_allows(ctx, c, (uint32_t)i) ? place_node_capacity(ctx, c, (uint32_t)i, r, W) : 0;
    uint8_t *allowed = malloc(c->n_nodes ? c->n_nodes : 1);
    if (!allowed)
        return -ENOMEM;
    int top = r->scope == SCOPE_ANY ? SCOPE_ANY : r->scope;
    int levels[] = {SCOPE_NODE, SCOPE_LEAF, SCOPE_SPINE, SCOPE_ANY};
    bool found = false;
    uint64_t best = 0;
    for (size_t li = 0; li < ARRAY_SIZE(levels) && !found; li++) {
        int level = levels[li];
        found = choose_domain(ctx, c, r, level, allowed, &best);
        if (r->scope_required && level == top)
            break;
    }
    if (!found) {
        free(allowed);
        if (!why)
            return 0;
        if (r->scope_required && r->scope != SCOPE_ANY)
            buf_printf(why, "no %s has ", level_names[r->scope]);
        else
            buf_puts(why, "the cluster does not have ");
        describe_ask(c, r, W, why);
        if (r->kind == REQ_GPUS && W > 1)
            buf_printf(why, " for %u workers of %u", W, r->gpus);
        if (r->scope_required && r->scope != SCOPE_ANY)
            buf_printf(why, " (most in one %s: room for %llu of %u workers)", level_names[r->scope],
                       (unsigned long long)best, W);
        else
            buf_printf(why, " (room for %llu of %u workers)", (unsigned long long)best, W);
        explain_nodes(ctx, c, r, ctx->cap, why);
        return 0;
    }
    for (uint32_t w = 0; w < W; w++) {
        int64_t node = best_node(ctx, c, r, allowed, ctx->cap);
        int err = node < 0 ? -EINVAL : place_worker(ctx, c, (uint32_t)node, r, pl);
        if (err < 0) {
            place_undo(c, pl);
            free(allowed);
            return err;
        }
        ctx->cap[node] = place_node_capacity(ctx, c, (uint32_t)node, r, W - w - 1);
    }
    free(allowed);
    return 1;
}

static int place_pass(PlaceCtx *ctx, Cluster *c, const Request *r_in, Placement *ret, Buf *why);

int place_job(PlaceCtx *ctx, Cluster *c, const Request *r, Placement *ret, Buf *why)
{
    /* the tiers the cluster has: on a cluster of owned nodes alone, one pass */
    unsigned present = 0;
    for (size_t i = 0; i < c->n_pools; i++)
        present |= 1u << c->pools[i].tier;
    uint8_t first = r->prefer & r->tiers;
    if (first && (first & present) != (r->tiers & present)) {
        /* production and inference that cannot move: owned and reserved capacity, where
         * they have room for all of it, before on-demand (the reason, if it comes to one,
         * is the second pass's, over all its tiers) */
        ctx->pass_tiers = first;
        int placed = place_pass(ctx, c, r, ret, NULL);
        ctx->pass_tiers = 0;
        if (placed != 0)
            return placed;
        place_undo(c, ret);
    }
    return place_pass(ctx, c, r, ret, why);
}

static int place_pass(PlaceCtx *ctx, Cluster *c, const Request *r_in, Placement *ret, Buf *why)
{
    Request r;
    place_effective_request(ctx->policy, r_in, &r);
    placement_reset(ret);
    bool gang = r.workers > 1 && !(ctx->policy->flags & POLICY_NO_GANG);
    if (gang)
        return place_gang(ctx, c, &r, ret, why);
    uint32_t W = r.workers ? r.workers : 1;
    for (uint32_t w = 0; w < W; w++) {
        int64_t node = best_node(ctx, c, &r, NULL, NULL);
        if (node < 0) {
            if (!why)
                return 0;
            if (w == 0 || W == 1)
                explain_single(ctx, c, &r, why);
            else
                buf_printf(why, "placed %u of %u workers; for the next: ", w, W),
                    explain_single(ctx, c, &r, why);
            return 0;
        }
        int err = place_worker(ctx, c, (uint32_t)node, &r, ret);
        if (err < 0) {
            place_undo(c, ret);
            return err;
        }
    }
    return 1;
}

/* ---- context ---- */

int place_ctx_init(PlaceCtx *ctx, const Cluster *c, const Policy *p, Rng *rng,
                   const uint32_t *order, const Mix *mix)
{
    *ctx = (PlaceCtx){.policy = p, .rng = rng, .order = order, .mix = mix};
    size_t nn = c->n_nodes ? c->n_nodes : 1;
    ctx->cap = calloc(nn, sizeof(*ctx->cap));
    ctx->domain_cap = calloc(c->n_switches + 1, sizeof(*ctx->domain_cap));
    ctx->domain_list = calloc(c->n_switches + 1, sizeof(*ctx->domain_list));
    if (!ctx->cap || !ctx->domain_cap || !ctx->domain_list) {
        place_ctx_free(ctx);
        return -ENOMEM;
    }
    for (size_t i = 0; i < c->n_nodes; i++) {
        ctx->max_cpu_milli = MAX(ctx->max_cpu_milli, (double)c->nodes[i].cpu_milli);
        ctx->max_gpus = MAX(ctx->max_gpus, (double)c->nodes[i].n_gpus);
    }
    if (p->init) {
        int err = p->init(ctx, c);
        if (err < 0) {
            place_ctx_free(ctx);
            return err;
        }
    }
    return 0;
}

void place_ctx_free(PlaceCtx *ctx)
{
    if (ctx->policy && ctx->policy->fini)
        ctx->policy->fini(ctx);
    free(ctx->cap);
    free(ctx->domain_cap);
    free(ctx->domain_list);
    *ctx = (PlaceCtx){0};
}

int score_cache_init(ScoreCache *sc, size_t n_nodes, size_t n_shapes)
{
    *sc = (ScoreCache){.n_nodes = n_nodes, .n_shapes = n_shapes};
    size_t n = n_nodes * n_shapes;
    if (n_shapes && n / n_shapes != n_nodes)
        return -ENOMEM;
    sc->stamp = calloc(n ? n : 1, sizeof(*sc->stamp));
    sc->score = malloc((n ? n : 1) * sizeof(*sc->score));
    if (!sc->stamp || !sc->score || fitset_init(&sc->fit, n_nodes, n_shapes) < 0) {
        score_cache_free(sc);
        return -ENOMEM;
    }
    return 0;
}

void score_cache_free(ScoreCache *sc)
{
    free(sc->stamp);
    free(sc->score);
    fitset_free(&sc->fit);
    *sc = (ScoreCache){0};
}
