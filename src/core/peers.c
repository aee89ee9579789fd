/* peers.c: the baseline policies of the FGD paper (Weng et al., ATC'23), written from
 * the paper and the behaviour of its simulator: DotProd, GpuPacking, GpuClustering.
 * Their integer scores are kept, since ties (broken by node order) shape the results. */
#include "core/policies.h"

#include "util/macro.h"

#include <math.h>

/* What one worker asks, the way these policies see it: GPUs and thousandths per GPU. */
static void ask(const Cluster *c, const Node *n, const Request *r, unsigned *ret_gpus,
                unsigned *ret_milli)
{
    switch (r->kind) {
    case REQ_NONE:
        *ret_gpus = 0, *ret_milli = 0;
        break;
    case REQ_GPUS:
        *ret_gpus = r->gpus, *ret_milli = 1000;
        break;
    default:
        *ret_gpus = 1;
        *ret_milli = place_units_on(c, n, r) / (GPU_UNITS / 1000);
        break;
    }
}

static unsigned node_left_milli(const Cluster *c, const Node *n)
{
    unsigned left = 0;
    for (unsigned i = 0; i < n->n_gpus; i++)
        left += gpu_free_milli(node_gpu_c(c, n, i));
    return left;
}

/* DotProd: the smaller the dot product of free and asked (CPU, GPU), the better. */
double peer_dot_product_score(PlaceCtx *ctx, const Cluster *c, uint32_t node, const Request *r)
{
    const Node *n = &c->nodes[node];
    unsigned gpus, milli;
    ask(c, n, r, &gpus, &milli);
    double cpu_left = (double)(n->cpu_milli - n->cpu_used_milli);
    if (cpu_left < r->cpu_milli)
        return 0;
    double gpu_scale = ctx->max_gpus * 1000;
    double dot = (cpu_left / ctx->max_cpu_milli) * (r->cpu_milli / ctx->max_cpu_milli) +
                 (node_left_milli(c, n) / gpu_scale) * (gpus * milli / gpu_scale);
    return trunc(100 * (1 - dot / 2));
}

/* GpuPacking: shared GPUs first (the fuller the better), then free GPUs on used
 * nodes, then idle nodes (the fewer GPUs the better). */
double peer_gpu_packing_score(PlaceCtx *ctx, const Cluster *c, uint32_t node, const Request *r)
{
    (void)ctx;
    const Node *n = &c->nodes[node];
    unsigned gpus, milli;
    ask(c, n, r, &gpus, &milli);
    if (!milli)
        return 0;
    unsigned left[NODE_MAX_GPUS], idx[NODE_MAX_GPUS], fully_free = 0;
    for (unsigned i = 0; i < n->n_gpus; i++) {
        left[i] = gpu_free_milli(node_gpu_c(c, n, i));
        fully_free += left[i] == 1000;
        idx[i] = i;
    }
    if (fully_free == n->n_gpus)
        return MAX(33.0 - fully_free, (double)fully_free);
    /* stable sort by free room, least first */
    for (unsigned i = 1; i < n->n_gpus; i++)
        for (unsigned j = i; j > 0 && left[idx[j]] < left[idx[j - 1]]; j--) {
            unsigned t = idx[j];
            idx[j] = idx[j - 1];
            idx[j - 1] = t;
        }
    unsigned need = gpus, use_free = 0, ratio = 0;
    for (unsigned k = 0; k < n->n_gpus && need; k++) {
        unsigned l = left[idx[k]];
        if (l < milli)
            continue;
        need--;
        use_free += l == 1000;
        ratio += l * 100 / 1000;
    }
    if (need)
        return 0;
    if (use_free)
        return MAX(50.0 - use_free, 33.0);
    return MAX(100.0 - ratio / 10, 50.0);
}

/* GpuClustering: put a worker where workers of its shape already are. */
double peer_gpu_clustering_score(PlaceCtx *ctx, const Cluster *c, uint32_t node, const Request *r)
{
    const Node *n = &c->nodes[node];
    unsigned gpus, milli;
    ask(c, n, r, &gpus, &milli);
    if (!milli)
        return 0;
    unsigned tag = milli < 1000 ? 0 : gpus;
    unsigned spec = (unsigned)ctx->max_gpus * 1000;
    unsigned left = node_left_milli(c, n);
    double base = (double)(25 * (spec - MIN(left, spec)) / spec);
    unsigned tags = 0;
    for (unsigned t = 0; t <= NODE_MAX_GPUS; t++)
        tags += n->workers_by_gpus[t] > 0;
    if (n->workers_by_gpus[tag])
        return base + (tags == 1 ? 75 : 50);
    return base + (tags == 0 ? 25 : 0);
}
