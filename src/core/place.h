/* place.h: deciding where a job's workers go. The placer owns what every policy
 * shares: feasibility (model, fabric, tier, CPU, memory, GPUs, MIG geometry with
 * re-carving of idle instances), exact per-node capacity for gangs, topology scopes,
 * GPU choice inside a node, applying the result and explaining a failure. A policy is
 * a table of functions that scores nodes and may override the GPU choice.
 *
 * A placement is complete: when any node (or, for a gang, any set of nodes within the
 * required scope) can take the job now, place_job finds one. */
#pragma once

#include "core/cluster.h"
#include "core/fitset.h"
#include "core/job.h"
#include "util/buf.h"
#include "util/rng.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What a worker of the expected mix looks like, and how often it comes. */
typedef struct MixEntry {
    Request r;
    double weight; /* the entries' weights sum to 1 */
} MixEntry;

typedef struct Mix {
    MixEntry *e;
    size_t n;
} Mix;

typedef struct PlaceCtx PlaceCtx;

/* How one worker's one-GPU slice lands on a GPU. */
typedef struct SlicePick {
    uint8_t index; /* GPU inside the node */
    uint8_t start; /* MIG: start slot of the instance */
    bool mig;      /* a MIG instance (else an MPS share) */
    /* MIG, for a request by memory: 0 = the request's profile; else 1 + a profile with the
     * same memory slices and more compute, given where that compute would be stranded */
    uint8_t wider;
} SlicePick;

enum {
    POLICY_INDIVISIBLE = 1 << 0, /* GPUs are integers: slices become one whole GPU */
    POLICY_NO_GANG = 1 << 1,     /* workers placed one by one; a gang may start partly */
    POLICY_UNCACHED = 1 << 2,    /* scores are not a function of the node alone */
    POLICY_RANDOM_TIES = 1 << 3, /* equal best scores: a seeded uniform pick, not the first */
};

typedef struct Policy {
    const char *name;
    const char *about; /* one line for --help */
    unsigned flags;
    /* Set up and drop per-run state (may be NULL). */
    int (*init)(PlaceCtx *ctx, const Cluster *c);
    void (*fini)(PlaceCtx *ctx);
    /* Score node `node` for one worker of r. Called only for nodes that can take it;
     * larger is better, ties go to the node met first in ctx->order (under
     * POLICY_RANDOM_TIES, to one of them drawn from ctx->rng). */
    double (*score)(PlaceCtx *ctx, const Cluster *c, uint32_t node, const Request *r);
    /* Optional: choose the GPU (and MIG start) for a one-GPU slice on a node that can
     * take it. Must pick a feasible option; NULL = the placer's default. */
    void (*pick_slice)(PlaceCtx *ctx, const Cluster *c, uint32_t node, const Request *r,
                       SlicePick *ret);
} Policy;

/* Cached scores of (request shape, node), valid while the node's version holds; and for
 * each shape the nodes that can take it (fitset.h), so a decision visits only those. */
typedef struct ScoreCache {
    size_t n_nodes, n_shapes;
    uint32_t *stamp; /* node version + 1 when valid; 0 = empty */
    float *score;    /* -INFINITY: the node cannot take the shape */
    FitSet fit;
} ScoreCache;

struct PlaceCtx {
    const Policy *policy;
    Rng *rng;               /* the seeded stream random choices draw from */
    const uint32_t *order;  /* node order for ties; NULL = index order */
    const Mix *mix;         /* expected request mix; NULL = unknown */
    ScoreCache *cache;      /* optional */
    const uint8_t *blocked; /* optional: nodes this placement may not use (reservations) */
    uint8_t pass_tiers;     /* set by place_job: the tiers this pass may use; 0 = any */
    void *policy_state;
    /* normalisers some peers' scores use: the largest node's CPU and GPU count */
    double max_cpu_milli, max_gpus;
    /* scratch, sized to the cluster */
    uint32_t *cap;         /* per node: workers it can still take */
    uint64_t *domain_cap;  /* per switch (plus one for "no switch") */
    uint32_t *domain_list; /* switch indices */
};

int place_ctx_init(PlaceCtx *ctx, const Cluster *c, const Policy *p, Rng *rng,
                   const uint32_t *order, const Mix *mix);
void place_ctx_free(PlaceCtx *ctx);

int score_cache_init(ScoreCache *sc, size_t n_nodes, size_t n_shapes);
void score_cache_free(ScoreCache *sc);

typedef struct Placement {
    WorkerAlloc *workers; /* one per placed worker, in worker order */
    size_t n_workers, workers_cap;
    MigChange *changes; /* MIG layouts to set before the workers start */
    size_t n_changes, changes_cap;
} Placement;

void placement_reset(Placement *p);
void placement_free(Placement *p);

/* Place all workers of r (or none), apply the allocation to c and describe it in
 * ret. Returns 1 when placed, 0 when not (c unchanged; why, unless NULL, says why in
 * words a person understands: what the job asks, which of the nodes it may use are
 * full or not ready and why, what would let it run), or -ENOMEM. A caller that only
 * asks whether a job fits passes NULL and saves the explanation's walk over the
 * nodes. Under POLICY_NO_GANG the workers that fit are placed and kept; the return is
 * 1 only when all were. A request with preferred tiers (r->prefer) is placed on those
 * alone when they have room for all of it, else on all of its tiers. */
int place_job(PlaceCtx *ctx, Cluster *c, const Request *r, Placement *ret, Buf *why);

/* Undo a placement applied by place_job (workers released, MIG layouts kept: the
 * instances stay for the next tenant). */
void place_release(Cluster *c, const Placement *p);

/* Undo a placement made only to look, or not taken: workers released, the MIG layouts
 * it changed set back, and pl emptied. */
void place_undo(Cluster *c, Placement *pl);

/* Whether placing draws from ctx->rng (ties drawn, or random scores). Planning that
 * skips trial placements it knows would fail skips them only for policies that do not:
 * a skipped trial would shift the seeded stream, and with it every later draw. */
bool place_draws(const PlaceCtx *ctx);

/* Whether node could ever take a worker of r as it stands: schedulable, of a model, fabric
 * and tier r may use (capacity aside). */
bool place_node_admits(const Cluster *c, uint32_t node, const Request *r);

/* Workers of r node can take now, at most limit (idle MIG instances re-carvable). */
unsigned place_node_capacity(const PlaceCtx *ctx, const Cluster *c, uint32_t node, const Request *r,
                             unsigned limit);

/* r as a policy sees it (slices become whole GPUs under POLICY_INDIVISIBLE). */
void place_effective_request(const Policy *p, const Request *r, Request *ret);

/* Helpers policies share. */
typedef enum SliceMode { SLICE_NONE, SLICE_MIG, SLICE_SHARE } SliceMode;
SliceMode place_slice_mode(const Cluster *c, const Node *n, const Request *r);
/* Thousandths of GPU g still free for shares (0 for a MIG GPU with busy instances). */
unsigned gpu_free_milli(const Gpu *g);
/* The same for a share of r on GPU i of n: a request by memory that a MIG slice short of
 * the whole GPU holds takes only room on GPUs MPS already shares (place_slice_mode); a
 * draining GPU takes no new share. */
unsigned place_share_room(const Cluster *c, const Node *n, const Request *r, unsigned i);
/* Units one worker of r takes on node n. */
uint32_t place_units_on(const Cluster *c, const Node *n, const Request *r);

/* The policy table: gpuorch, first-fit, best-fit, random, k8s-default, and the peers
 * of the FGD paper (dot-product, gpu-packing, gpu-clustering, fgd). */
const Policy *policy_find(const char *name);
size_t policy_count(void);
const Policy *policy_at(size_t i);
