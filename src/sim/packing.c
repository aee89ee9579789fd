/* packing.c: packing mode, the protocol of the FGD paper (Weng et al., ATC'23;
 * ../shared/traces/fgd-results/PROTOCOL.md): the pods arrive one by one in a seeded
 * shuffle of the name-sorted trace, followed by pods resampled from the trace until
 * the arrived GPU demand reaches 130% of capacity; nothing ever leaves, a pod that
 * does not fit is dropped. After every pod we record the arrived demand, the
 * allocated GPU capacity and the fragmented capacity (against the trace's typical
 * pods); the report is the mean over the pods whose arrived demand rounds to each
 * percent. Ties between nodes go to a random node order fixed for the run, as in the
 * authors' simulator. */
#include "core/frag.h"
#include "sim/evlog.h"
#include "sim/sim.h"
#include "util/macro.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* GPU demand of one job in thousandths: workers x GPUs x thousandths per GPU. */
static uint64_t demand_milli(const JobSpec *j)
{
    uint64_t w = j->workers ? j->workers : 1;
    switch (j->req) {
    case REQ_GPUS:
        return w * j->gpus * 1000;
    case REQ_FRACTION:
        return w * j->fraction_milli;
    case REQ_MIG:
    case REQ_MEMORY:
        return w * 1000;
    default:
        return 0;
    }
}

/* The tune-up stop test of the protocol uses the per-GPU thousandths. */
static uint64_t per_gpu_milli(const JobSpec *j)
{
    switch (j->req) {
    case REQ_GPUS:
    case REQ_MIG:
    case REQ_MEMORY:
        return 1000;
    case REQ_FRACTION:
        return j->fraction_milli;
    default:
        return 0;
    }
}

/* The arrival sequence: the name-sorted pods shuffled, then tuned to the target. */
static int arrivals(const SimInput *in, Rng *rng, uint32_t **ret, size_t *ret_n)
{
    const JobList *jobs = in->jobs;
    size_t n = jobs->n, cap = n + 16;
    uint32_t *seq = malloc(cap * sizeof(*seq));
    if (!seq)
        return -ENOMEM;
    memcpy(seq, in->prep.by_name, n * sizeof(*seq));
    rng_shuffle(rng, seq, n, sizeof(*seq));
    uint64_t current = 0;
    for (size_t i = 0; i < n; i++)
        current += demand_milli(&jobs->jobs[i]);
    uint64_t target = (uint64_t)llround(in->opt.tune_ratio * (double)in->prep.capacity_milli);
    const size_t n_orig = n;
    if (current < target && n_orig) {
        for (;;) {
            /* resample with replacement from the original, name-sorted trace */
            uint32_t pick = in->prep.by_name[rng_below(rng, n_orig)];
            const JobSpec *j = &jobs->jobs[pick];
            if (current + per_gpu_milli(j) > target)
                break;
            current += demand_milli(j);
            if (GROW(seq, cap, n + 1) < 0) {
                free(seq);
                return -ENOMEM;
            }
            seq[n++] = pick;
        }
    } else {
        while (current > target && n) {
            size_t k = rng_below(rng, n);
            current -= demand_milli(&jobs->jobs[seq[k]]);
            memmove(&seq[k], &seq[k + 1], (n - k - 1) * sizeof(*seq));
            n--;
        }
    }
    *ret = seq;
    *ret_n = n;
    return 0;
}

typedef struct Bucket {
    double alloc_sum, held_sum, frag_sum;
    size_t count;
} Bucket;

/* What one placed worker asked for, in thousandths of a GPU: its whole GPUs or share;
 * a MIG or memory ask counts the slice it got. A policy that gives more than asked
 * (k8s-default hands a share a whole GPU) holds more than this. */
static uint64_t worker_demand_milli(const Cluster *c, const JobSpec *j, const WorkerAlloc *w)
{
    switch (j->req) {
    case REQ_GPUS:
        return (uint64_t)j->gpus * 1000;
    case REQ_FRACTION:
        return j->fraction_milli;
    case REQ_NONE:
        return 0;
    default:
        return worker_units(c, w) / (GPU_UNITS / 1000);
    }
}

int sim_run_packing(const SimInput *in, const SimPolicy *sp, uint64_t seed, RunResult *ret)
{
    const JobList *jobs = in->jobs;
    const SimPrep *prep = &in->prep;
    int err = -ENOMEM;
    Cluster *c = cluster_clone(in->cluster);
    uint32_t *seq = NULL, *order = NULL, *perm = NULL;
    size_t n_seq = 0;
    Bucket bucket[PACK_LEVELS] = {{0}};
    PlaceCtx ctx = {0};
    ScoreCache cache = {0};
    FragCache fc = {0};
    double *node_frag = NULL;
    Placement pl = {0};
    Buf why = {0};
    EvLog ev = {.on = in->opt.events, .out = &ret->events, .policy = sp->name, .seed = seed};
    if (!c)
        goto out;
    Rng rng;
    rng_seed(&rng, seed);
    if ((err = arrivals(in, &rng, &seq, &n_seq)) < 0)
        goto out;
    /* a random node order, fixed for the run, breaks ties */
    err = -ENOMEM;
    size_t nn = c->n_nodes;
    order = malloc((nn ? nn : 1) * sizeof(*order));
    perm = malloc((nn ? nn : 1) * sizeof(*perm));
    node_frag = calloc(nn ? nn : 1, sizeof(*node_frag));
    if (!order || !perm || !node_frag)
        goto out;
    for (size_t i = 0; i < nn; i++)
        perm[i] = (uint32_t)i;
    rng_shuffle(&rng, perm, nn, sizeof(*perm));
    for (size_t i = 0; i < nn; i++)
        order[perm[i]] = prep->node_by_name[i];
    if ((err = place_ctx_init(&ctx, c, sp->place, &rng, order, &prep->expected)) < 0 ||
        (err = score_cache_init(&cache, nn, prep->n_shapes)) < 0 ||
        (err = frag_cache_init(&fc, c, &prep->typical)) < 0)
        goto out;
    ctx.cache = &cache;
    double frag_total = 0;
    for (size_t i = 0; i < nn; i++)
        frag_total += node_frag[i] = frag_cache_base(&fc, c, (uint32_t)i, false);

    const double total_gpus = (double)c->n_gpus;
    uint64_t arrived = 0, placed_demand = 0;
    PackResult *res = &ret->pack;
    *res = (PackResult){.pods = n_seq};
    for (size_t k = 0; k < n_seq; k++) {
        uint32_t ji = seq[k];
        const JobSpec *j = &jobs->jobs[ji];
        if (in->progress)
            __atomic_fetch_add(in->progress, 1, __ATOMIC_RELAXED);
        arrived += demand_milli(j);
        int placed = 0;
        placement_reset(&pl);
        buf_reset(&why);
        if (prep->unschedulable[ji]) {
            buf_puts(&why, prep->unschedulable[ji]);
        } else {
            placed = place_job(&ctx, c, &prep->reqs[ji], &pl, &why);
            if (placed < 0) {
                err = placed;
                goto out;
            }
        }
        /* a partly placed gang (no-gang policies) keeps what it got */
        for (size_t w = 0; w < pl.n_workers; w++) {
            uint32_t node = pl.workers[w].node;
            placed_demand += worker_demand_milli(c, j, &pl.workers[w]);
            frag_total -= node_frag[node];
            frag_total += node_frag[node] = frag_cache_base(&fc, c, node, false);
        }
        if (placed)
            res->placed++;
        else
            res->failed++;
        evlog_placement(&ev, c, (int64_t)k, j->name, placed ? &pl : NULL, placed ? NULL : &why);
        double held_milli = (double)c->used_units / (GPU_UNITS / 1000);
        double x = rint((double)arrived / total_gpus / 10.0);
        if (x < 0 || x >= PACK_LEVELS)
            continue;
        Bucket *b = &bucket[(size_t)x];
        /* the authors round each event's ratio to two decimals before averaging */
        b->alloc_sum += rint((double)placed_demand / total_gpus / 10.0 * 100.0) / 100.0;
        b->held_sum += rint(held_milli / total_gpus / 10.0 * 100.0) / 100.0;
        b->frag_sum += frag_total;
        b->count++;
    }
    for (size_t x = 0; x < PACK_LEVELS; x++) {
        double a = 0, h = 0, f = 0;
        size_t n = bucket[x].count;
        if (n) {
            a = bucket[x].alloc_sum;
            h = bucket[x].held_sum;
            f = bucket[x].frag_sum;
        } else {
            /* no pod landed on this percent: the neighbours' mean, as the authors do */
            size_t lo = x > 0 ? x - 1 : x, hi = x + 1 < PACK_LEVELS ? x + 1 : x;
            for (size_t y = lo; y <= hi; y++) {
                a += bucket[y].alloc_sum;
                h += bucket[y].held_sum;
                f += bucket[y].frag_sum;
                n += bucket[y].count;
            }
        }
        res->alloc_pct[x] = n ? a / (double)n : NAN;
        res->held_pct[x] = n ? h / (double)n : NAN;
        res->frag_pct[x] = n ? 100.0 * (f / (double)n) / 1000.0 / total_gpus : NAN;
    }
    res->final_alloc_pct = 100.0 * (double)placed_demand / 1000.0 / total_gpus;
    ret->seed = seed;
    ret->mode = SIM_PACKING;
    err = evlog_error(&ev);
out:
    buf_free(&why);
    placement_free(&pl);
    frag_cache_free(&fc);
    score_cache_free(&cache);
    place_ctx_free(&ctx);
    free(node_frag);
    free(order);
    free(perm);
    free(seq);
    cluster_free(c);
    return err;
}
