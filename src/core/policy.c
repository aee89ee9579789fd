/* policy.c: the policy table, and the policies that need no state: first-fit,
 * best-fit, random and k8s-default. Scores follow the published definitions (the
 * FGD simulator's BestFit; kube-scheduler's LeastAllocated and BalancedAllocation) in
 * integer points where the original truncates, because the ties that truncation makes
 * decide placements. */
#include "core/place.h"
#include "core/policies.h"

#include "util/macro.h"

#include <math.h>
#include <strings.h>

/* GPU-equivalents still free on node n. */
double node_gpu_left(const Node *n)
{
    return ((double)n->n_gpus * GPU_UNITS - n->used_units) / GPU_UNITS;
}

static double score_first_fit(PlaceCtx *ctx, const Cluster *c, uint32_t node, const Request *r)
{
    (void)ctx, (void)c, (void)node, (void)r;
    return 0;
}

/* FGD paper's BestFit: the node left with the least CPU and GPU (equal weights),
 * normalised by the largest node, in whole points. */
static double score_best_fit(PlaceCtx *ctx, const Cluster *c, uint32_t node, const Request *r)
{
    const Node *n = &c->nodes[node];
    double cpu_left = (double)(n->cpu_milli - n->cpu_used_milli) - r->cpu_milli;
    double gpu_left = node_gpu_left(n) - (double)place_units_on(c, n, r) / GPU_UNITS;
    double s = 0.5 * cpu_left / ctx->max_cpu_milli + 0.5 * gpu_left / ctx->max_gpus;
    return trunc(100 * (1 - s));
}

/* Uniform among the nodes that fit. */
static double score_random(PlaceCtx *ctx, const Cluster *c, uint32_t node, const Request *r)
{
    (void)c, (void)node, (void)r;
    return rng_unit(ctx->rng);
}

/* Random GPU among those a share fits (FGD's `random` GPU selection). */
static void pick_random(PlaceCtx *ctx, const Cluster *c, uint32_t node, const Request *r,
                        SlicePick *ret)
{
    const Node *n = &c->nodes[node];
    if (place_slice_mode(c, n, r) != SLICE_SHARE) {
        place_default_pick(ctx, c, node, r, ret);
        return;
    }
    unsigned want = r->share_milli[n->model], seen = 0;
    for (unsigned i = 0; i < n->n_gpus; i++) {
        if (place_share_room(c, n, r, i) < want)
            continue;
        if (rng_below(ctx->rng, ++seen) == 0)
            *ret = (SlicePick){.index = (uint8_t)i};
    }
}

/* Default kube-scheduler with the NVIDIA device plugin. Its resource scores are
 * NodeResourcesFit's LeastAllocated and NodeResourcesBalancedAllocation, weight 1 each,
 * both over CPU and memory only: the default resource list leaves out extended
 * resources such as nvidia.com/gpu, so a GPU count only filters nodes. The other default
 * score plugins (taints, affinities, images, topology spread) see nothing to tell these
 * nodes apart; equal totals go to a node drawn at random, as kube's selectHost does. */
static int64_t k8s_least_requested(int64_t requested, int64_t capacity)
{
    return requested > capacity ? 0 : (capacity - requested) * 100 / capacity;
}

static double score_k8s(PlaceCtx *ctx, const Cluster *c, uint32_t node, const Request *r)
{
    (void)ctx;
    const Node *n = &c->nodes[node];
    int64_t req[2] = {(int64_t)n->cpu_used_milli + r->cpu_milli,
                      (int64_t)n->memory_used_mib + r->memory_mib};
    int64_t cap[2] = {n->cpu_milli, n->memory_mib};
    int64_t least = 0;
    double frac[2];
    int k = 0; /* resources the node has; kube skips those it has none of */
    for (int i = 0; i < 2; i++) {
        if (!cap[i])
            continue;
        least += k8s_least_requested(req[i], cap[i]);
        frac[k++] = MIN(1.0, (double)req[i] / (double)cap[i]);
    }
    if (k)
        least /= k;
    double std = k == 2 ? fabs((frac[0] - frac[1]) / 2) : 0;
    return (double)(least + (int64_t)((1 - std) * 100));
}

static const Policy policies[] = {
    {.name = "gpuorch",
     .about = "fragmentation-aware packing against the expected mix, MIG- and topology-aware",
     .init = gpuorch_init,
     .fini = gpuorch_fini,
     .score = gpuorch_score,
     .pick_slice = gpuorch_pick_slice},
    {.name = "first-fit", .about = "the first node (in order) that fits", .score = score_first_fit},
    {.name = "best-fit",
     .about = "least CPU and GPU left after placing (FGD paper's BestFit)",
     .score = score_best_fit},
    {.name = "random",
     .about = "a uniformly random node that fits (seeded)",
     .flags = POLICY_UNCACHED,
     .score = score_random,
     .pick_slice = pick_random},
    {.name = "k8s-default",
     .about = "default kube-scheduler + NVIDIA device plugin: whole GPUs only, CPU and memory "
              "least-allocated and balanced, no gang",
     .flags = POLICY_INDIVISIBLE | POLICY_NO_GANG | POLICY_RANDOM_TIES,
     .score = score_k8s},
    {.name = "dot-product",
     .about = "smallest dot product of free and asked CPU/GPU (FGD paper's DotProd)",
     .score = peer_dot_product_score},
    {.name = "gpu-packing",
     .about = "shared GPUs first, then used nodes, then idle ones (FGD paper's GpuPacking)",
     .score = peer_gpu_packing_score},
    {.name = "gpu-clustering",
     .about = "co-locate workers of the same GPU shape (FGD paper's GpuClustering)",
     .score = peer_gpu_clustering_score},
    {.name = "fgd",
     .about = "fragmentation gradient descent (Weng et al., ATC'23), as published",
     .init = fgd_init,
     .fini = fgd_fini,
     .score = fgd_score,
     .pick_slice = fgd_pick_slice},
};

size_t policy_count(void)
{
    return ARRAY_SIZE(policies);
}

const Policy *policy_at(size_t i)
{
    return i < ARRAY_SIZE(policies) ? &policies[i] : NULL;
}

const Policy *policy_find(const char *name)
{
    for (size_t i = 0; i < ARRAY_SIZE(policies); i++)
        if (strcasecmp(policies[i].name, name) == 0)
            return &policies[i];
    return NULL;
}
