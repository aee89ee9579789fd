/* frag.h: GPU fragmentation against an expected request mix, after "Beware of
 * Fragmentation" (Weng et al., ATC'23): the part of a node's idle GPU compute that a
 * request of the mix could not use, weighted by how often that request comes. We
 * extend it to MIG: on a partitioned GPU the idle compute a MIG request can use is
 * what the instances it could still get (re-carving idle ones) would hold.
 * Amounts are in thousandths of a GPU. */
#pragma once

#include "core/cluster.h"
#include "core/place.h"

#include <stdint.h>

/* The mix flattened for fast evaluation. */
typedef struct FragEntry {
    double weight;
    uint32_t cpu_milli;
    uint8_t gpus;    /* GPUs per worker; 0 = no GPU */
    bool whole;      /* whole GPUs (else a one-GPU slice) */
    uint64_t models; /* allowed models */
    uint16_t milli[CLUSTER_MAX_MODELS];     /* slice as a share, per model (0 = none) */
    int8_t mig_profile[CLUSTER_MAX_MODELS]; /* slice as a MIG instance, per model */
} FragEntry;

typedef struct FragMix {
    FragEntry *e;
    size_t n;
} FragMix;

int frag_mix_init(FragMix *fm, const Mix *mix);
void frag_mix_free(FragMix *fm);

/* A node reduced to what fragmentation depends on. */
typedef struct NodeView {
    uint8_t model;
    uint8_t n;
    bool mig_allowed;
    uint32_t cpu_left_milli;
    uint16_t left[NODE_MAX_GPUS]; /* free thousandths per GPU (shares / whole) */
    const Gpu *gpu;               /* the GPUs, for MIG geometry */
    const GpuModel *gm;
} NodeView;

void frag_view(const Cluster *c, const Node *n, NodeView *ret);

/* Fragmented idle compute of the node against the mix, in thousandths of a GPU. */
double frag_node(const FragMix *fm, const NodeView *v);

/* Same, with extra MIG layouts in place of GPU `index`'s (for what-if scoring). */
double frag_node_mig(const FragMix *fm, const NodeView *v, unsigned index, const MigLayout *l,
                     uint8_t busy);

/* Idle compute of the node in thousandths. */
unsigned frag_idle(const NodeView *v);

/* The mix plus each node's fragmentation, cached while the node's version holds. */
typedef struct FragCache {
    FragMix fm;
    double *base;
    uint32_t *stamp; /* node version + 1 when base is valid */
    size_t n_nodes;
} FragCache;

int frag_cache_init(FragCache *fc, const Cluster *c, const Mix *mix);
void frag_cache_free(FragCache *fc);
double frag_cache_base(FragCache *fc, const Cluster *c, uint32_t node);
