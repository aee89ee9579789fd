/* gpuorch.c: our placement policy. Like FGD it places where the node's fragmentation
 * against the expected mix grows least, but (1) it compares the growth exactly
 * instead of through a truncated sigmoid, whose ties otherwise fall to node order;
 * (2) it measures MIG fragmentation by the profiles that still fit on each GPU and
 * chooses MIG starts by the same measure; (3) among equal growth it packs: the node
 * (and GPU) left with the least idle compute wins, keeping whole GPUs and whole nodes
 * free for large work. Without a known mix, it packs (best fit). */
#include "core/frag.h"
#include "core/policies.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

/* Weight of leftover idle compute against fragmentation growth (both in thousandths
 * of a GPU): small, so it only orders choices whose growth is (nearly) equal. */
#define PACK_WEIGHT 1e-3
/* Re-carving or partitioning costs a reconfiguration: prefer a slice that exists. */
#define RECONFIG_COST 1.0

int gpuorch_init(PlaceCtx *ctx, const Cluster *c)
{
    FragCache *fc = malloc(sizeof(*fc));
    if (!fc)
        return -ENOMEM;
    int err = frag_cache_init(fc, c, ctx->mix);
    if (err < 0) {
        free(fc);
        return err;
    }
    ctx->policy_state = fc;
    return 0;
}

void gpuorch_fini(PlaceCtx *ctx)
{
    FragCache *fc = ctx->policy_state;
    if (fc) {
        frag_cache_free(fc);
        free(fc);
    }
    ctx->policy_state = NULL;
}

/* The best slice on node n: the lowest cost (fragmentation after, plus packing and
 * reconfiguration terms). Returns the cost, or INFINITY when none fits. */
static double best_slice(FragCache *fc, const Cluster *c, const Node *n, const Request *r,
                         SlicePick *ret)
{
    NodeView v;
    frag_view(c, n, &v);
    v.cpu_left_milli -= r->cpu_milli;
    unsigned idle = frag_idle(&v);
    double best = INFINITY;
    if (place_slice_mode(c, n, r) == SLICE_SHARE) {
        unsigned want = r->share_milli[n->model];
        for (unsigned i = 0; i < v.n; i++) {
            if (v.left[i] < want)
                continue;
            NodeView w = v;
            w.left[i] = (uint16_t)(w.left[i] - want);
            /* pack: prefer the GPU with the least room left after */
            double cost = frag_node(&fc->fm, &w) + PACK_WEIGHT * (idle - want) +
                          PACK_WEIGHT * 1e-3 * w.left[i];
            if (node_gpu_c(c, n, i)->mode == GPU_MIG)
                cost += RECONFIG_COST;
            if (cost < best) {
                best = cost;
                *ret = (SlicePick){.index = (uint8_t)i};
            }
        }
        return best;
    }
    const GpuModel *m = node_model(c, n);
    int p = r->mig_profile[n->model];
    unsigned units = m->profiles[p].compute_slices * 1000u / m->mig_compute_slices;
    for (unsigned i = 0; i < v.n; i++) {
        const Gpu *g = node_gpu_c(c, n, i);
        if (g->mode == GPU_SHARED || (g->mode == GPU_WHOLE && g->used_units))
            continue;
        uint8_t starts = mig_recarve_starts(m, &g->mig, g->mig_busy, p);
        for (int s = 0; s < MIG_MAX_SLOTS; s++) {
            if (!(starts & (1u << s)))
                continue;
            MigLayout l = g->mig;
            bool reuse = l.profile_at[s] == p && !(g->mig_busy & (1u << s));
            if (!reuse)
                mig_place(m, &l, g->mig_busy, p, s);
            uint8_t busy = (uint8_t)(g->mig_busy | (1u << s));
            double cost = frag_node_mig(&fc->fm, &v, i, &l, busy) +
                          PACK_WEIGHT * (idle - units) + (reuse ? 0 : RECONFIG_COST);
            /* fill partitioned GPUs before cutting into a whole one */
            if (g->mode == GPU_WHOLE)
                cost += 2 * RECONFIG_COST;
            if (cost < best) {
                best = cost;
                *ret = (SlicePick){.index = (uint8_t)i, .start = (uint8_t)s, .mig = true};
            }
        }
    }
    return best;
}

/* Topology: whole-GPU workers of several GPUs want NVSwitch, then NVLink pairs;
 * single GPUs and slices leave those nodes for them. In thousandths of a GPU. */
static double topology_bonus(const Node *n, const Request *r)
{
    bool multi = r->kind == REQ_GPUS && r->gpus > 1;
    switch (n->interconnect) {
    case IC_NVSWITCH:
        return multi ? 50 : 0;
    case IC_NVLINK_PAIRS:
        return multi ? 25 : 0;
    default:
        return multi ? 0 : 5;
    }
}

double gpuorch_score(PlaceCtx *ctx, const Cluster *c, uint32_t node, const Request *r)
{
    FragCache *fc = ctx->policy_state;
    const Node *n = &c->nodes[node];
    double base = frag_cache_base(fc, c, node);
    NodeView v;
    frag_view(c, n, &v);
    double after;
    if (r->kind == REQ_GPUS || r->kind == REQ_NONE) {
        v.cpu_left_milli -= r->cpu_milli;
        unsigned need = r->kind == REQ_GPUS ? r->gpus : 0;
        for (unsigned i = 0; i < v.n && need; i++)
            if (v.left[i] == 1000) {
                v.left[i] = 0;
                need--;
            }
        after = frag_node(&fc->fm, &v) + PACK_WEIGHT * frag_idle(&v);
    } else {
        SlicePick pick;
        after = best_slice(fc, c, n, r, &pick);
    }
    return base - after + topology_bonus(n, r);
}

void gpuorch_pick_slice(PlaceCtx *ctx, const Cluster *c, uint32_t node, const Request *r,
                        SlicePick *ret)
{
    best_slice(ctx->policy_state, c, &c->nodes[node], r, ret);
}
