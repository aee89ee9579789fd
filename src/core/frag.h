/* frag.h: GPU fragmentation against an expected request mix, after "Beware of
 * Fragmentation" (Weng et al., ATC'23): the part of a node's idle GPU compute that a
 * request of the mix could not use, weighted by how often that request comes.
 *
 * Two refinements, both used by the gpuorch policy and neither by FGD:
 *  - MIG: on a partitioned GPU, the idle compute a MIG request can use is what the
 *    instances it could still get (re-carving idle ones) would hold.
 *  - host-aware: FGD asks whether one more request of each kind fits. The host-aware
 *    measure also counts the GPU capacity that CPU or memory would strand: when the
 *    GPUs could take k more of a request but the node's CPU or memory only k' < k,
 *    the GPUs of the k - k' that cannot come are a fragment too. This is what sees that
 *    a CPU-only job on an empty 8-GPU node blocks its eighth GPU job.
 * Amounts are in thousandths of a GPU. */
#pragma once

#include "core/cluster.h"
#include "core/place.h"

#include <stdbool.h>
#include <stdint.h>

/* The mix flattened for fast evaluation. */
typedef struct FragEntry {
    double weight;
    uint32_t cpu_milli;
    uint32_t memory_mib;
    uint8_t gpus;                           /* GPUs per worker; 0 = no GPU */
    bool whole;                             /* whole GPUs (else a one-GPU slice) */
    uint64_t models;                        /* allowed models */
    uint16_t milli[CLUSTER_MAX_MODELS];     /* slice as a share, per model (0 = none) */
    int8_t mig_profile[CLUSTER_MAX_MODELS]; /* slice as a MIG instance, per model */
} FragEntry;

typedef struct FragMix {
    FragEntry *e;
    size_t n;
} FragMix;

int frag_mix_init(FragMix *fm, const Mix *mix);
void frag_mix_free(FragMix *fm);
/* Scale each entry's weight by scarcity: the cluster's nodes over the nodes that could
 * host one of it when empty (at most `cap` times). Capacity that few nodes offer is
 * worth more than capacity every node has. */
void frag_mix_by_scarcity(FragMix *fm, const Cluster *c, double cap);

/* A node reduced to what fragmentation depends on; what-if scoring edits a copy. */
typedef struct NodeView {
    uint8_t model;
    uint8_t n;
    bool mig_allowed;
    uint32_t cpu_left_milli;
    uint32_t mem_left_mib;
    uint16_t left[NODE_MAX_GPUS]; /* free thousandths per GPU (shares / whole) */
    const Gpu *gpu;               /* the GPUs, for MIG geometry */
    const GpuModel *gm;
    uint16_t taken; /* GPUs taken whole in this what-if (idle MIG ones included) */
    /* one GPU's MIG state replaced, for what-if scoring of a MIG placement */
    int mig_index; /* -1: none */
    MigLayout mig_layout;
    uint8_t mig_busy;
} NodeView;

void frag_view(const Cluster *c, const Node *n, NodeView *ret);
/* Take a worker of r off the view (CPU, memory, and the whole GPUs or the share of
 * GPU `index`, or the MIG instance of profile p at start on GPU `index`). */
void frag_view_take_whole(NodeView *v, const Request *r, unsigned gpus);
void frag_view_take_share(NodeView *v, const Request *r, unsigned index, unsigned milli);
void frag_view_take_mig(NodeView *v, const Request *r, unsigned index, int p, unsigned start);

/* Fragmented idle compute of the node against the mix, in thousandths of a GPU. */
double frag_node(const FragMix *fm, const NodeView *v, bool host_aware);

/* Leftover waste: ret[L] is the part of L free thousandths of one GPU that no sum of
 * the mix's one-GPU shares of `model` weighing at least `min_weight` each can fill
 * (L = 1000 counts as filled). It sees what best-fit does not: 530 left beside a 470
 * takes another 470, while 210 left beside 470 + 320 stays idle for good. */
void frag_leftover_waste(const FragMix *fm, uint8_t model, double min_weight, uint16_t ret[1001]);

/* Idle compute of the node in thousandths, counted as frag_node counts it. */
unsigned frag_idle(const NodeView *v);

/* Compute slices of GPU i in the view that no MIG instance can use any more: free slices
 * beyond what instances of the smallest profile could still take (their memory is
 * gone). 0 for a GPU that is not partitioned or holds nothing. */
unsigned frag_stranded_slices(const NodeView *v, unsigned i);

/* The mix plus each node's fragmentation (FGD's and host-aware), cached while the
 * node's version holds. */
typedef struct FragCache {
    FragMix fm;
    double *base, *base_host;
    uint32_t *stamp, *stamp_host; /* node version + 1 while the base is valid */
    size_t n_nodes;
} FragCache;

int frag_cache_init(FragCache *fc, const Cluster *c, const Mix *mix);
void frag_cache_free(FragCache *fc);
double frag_cache_base(FragCache *fc, const Cluster *c, uint32_t node, bool host_aware);
