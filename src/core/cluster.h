/* cluster.h: the cluster as the core sees it: switches, pools, teams, nodes and GPUs,
 * and the allocation state of every GPU (whole, MIG-partitioned or shared). Built by
 * the spec readers through cluster_add_*(), then changed only by applying and
 * releasing worker allocations and MIG layout changes, so every counter stays exact.
 *
 * Compute is counted in GPU units: GPU_UNITS per whole GPU, chosen so that a MIG
 * slice (compute slices / 7 or / 4) and a thousandth of a GPU are whole numbers. */
#pragma once

#include "core/catalog.h"
#include "core/mig.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GPU_UNITS          28000u /* one GPU-equivalent: lcm(1000, 7, 4) */
#define CLUSTER_MAX_MODELS 64     /* distinct GPU models in one cluster (a mask is 64 bits) */
#define NODE_MAX_GPUS      16
#define NO_SWITCH          UINT32_MAX

typedef enum Tier { TIER_OWNED, TIER_RESERVED, TIER_ON_DEMAND, TIER_SPOT, TIER_COUNT } Tier;
#define TIERS_ALL ((1u << TIER_COUNT) - 1)

typedef enum Interconnect { IC_PCIE, IC_NVLINK_PAIRS, IC_NVSWITCH } Interconnect;

typedef enum GpuMode {
    GPU_WHOLE,  /* not partitioned, not shared: free when used_units == 0 */
    GPU_SHARED, /* MPS clients share it; used_units is the sum of their shares */
    GPU_MIG,    /* MIG mode: `mig` holds the instances, `mig_busy` those allocated */
} GpuMode;

typedef struct Gpu {
    uint8_t mode;        /* GpuMode */
    uint8_t mig_busy;    /* start-slot mask of allocated MIG instances */
    bool draining;       /* partitioned GPU taking no new slices, to come back whole */
    uint16_t n_clients;  /* shares on a GPU_SHARED GPU */
    uint32_t used_units; /* allocated compute, in GPU_UNITS (0..GPU_UNITS) */
    /* the node's GPUs (by node-local index) it reaches over an active NVLink, as its
     * agent reports them; 0: not reported (an NVLink-pairs node then pairs by index) */
    uint16_t nvlink;
    MigLayout mig;
} Gpu;

typedef struct Switch {
    char *name;
    uint32_t parent; /* switch index or NO_SWITCH */
    bool is_leaf;    /* nodes attach to it */
} Switch;

/* A cluster-local GPU model: the catalogue entry, or a model the spec names that the
 * catalogue does not know (no MIG, memory from the spec). */
typedef struct ClusterModel {
    GpuModel m; /* name owned by the cluster */
    bool in_catalog;
} ClusterModel;

/* A node's presence. Nodes of a fixed pool are always up. An autoscaled pool holds
 * max_nodes nodes from the start; those beyond its current count are absent (not
 * there, not paid for, never schedulable) until the autoscaler starts them. Starting,
 * up and leaving nodes are present: they are paid for and count as capacity. */
typedef enum NodePresence {
    NODE_UP,       /* present and schedulable (unless drained) */
    NODE_STARTING, /* asked for, not up yet: paid for, not schedulable */
    NODE_LEAVING,  /* going (released, or a spot notice): its work stops, nothing new lands */
    NODE_ABSENT,   /* not there */
} NodePresence;

/* Why a present node takes no new work, as its driver knows it (the server's agents, the
 * Kubernetes engine's Node objects), so that a waiting job's reason names the cause.
 * The core's own drains (autoscaler, partitioned GPUs) need no entry: it knows them. */
typedef enum NodeAway {
    AWAY_NONE,         /* schedulable, or closed for a reason the core knows */
    AWAY_UNREGISTERED, /* its agent has not reported since the server started */
    AWAY_LOST,         /* its agent went silent */
    AWAY_MISMATCHED,   /* its agent reports other GPUs than the cluster spec declares */
    AWAY_NOTICE,       /* its cloud is taking it back (a spot interruption notice) */
    AWAY_DOWN,         /* its agent was stopped and said so (the node is shut down) */
    AWAY_CORDONED,     /* Kubernetes: the Node is cordoned (spec.unschedulable) */
    AWAY_NOT_READY,    /* Kubernetes: the Node's Ready condition is not True */
    AWAY_TAINTED,      /* Kubernetes: a NoSchedule taint GPU pods do not tolerate */
    AWAY_MIG_FAILED,   /* Kubernetes: its MIG manager failed the last layout change */
    AWAY_GPU_SICK,     /* its agent reports a sick GPU (critical Xid, ECC, off the bus) */
    AWAY_COUNT
} NodeAway;

#define POOL_DEFAULT_STARTUP_MS (180 * INT64_C(1000))
#define POOL_DEFAULT_IDLE_MS    (600 * INT64_C(1000))
#define POOL_DEFAULT_NOTICE_MS  (120 * INT64_C(1000))

typedef struct Pool {
    char *name;
    Tier tier;
    int64_t price_micro_usd; /* per GPU-hour */
    /* the same capacity's on-demand price per GPU-hour (its instance type's, else
     * price_micro_usd): what the run would have cost on demand */
    int64_t on_demand_micro_usd;
    uint32_t nodes; /* nodes in the pool (cluster_add_node counts them); an autoscaled
                     * pool's max_nodes, most of them absent at times */
    /* autoscaling: a pool is autoscaled when max_nodes > min_nodes; it starts with
     * initial_nodes present. 0, 0, 0 (pools built in code): fixed, every node up */
    uint32_t min_nodes, max_nodes, initial_nodes;
    int64_t startup_ms;            /* from asked for to up */
    int64_t idle_ms;               /* an idle node is released after this long */
    double interruptions_per_hour; /* spot: per present node; 0 never */
    int64_t notice_ms;             /* spot: warning before an interruption */
    uint32_t *leaves;              /* switch indices the nodes are spread over, round-robin */
    size_t n_leaves;
    /* the node template */
    uint8_t model; /* cluster model index */
    uint8_t gpus;
    uint8_t interconnect; /* Interconnect */
    bool mig;             /* may the GPUs be MIG-partitioned */
    uint16_t fabric;      /* interned label, 0 = none */
    uint32_t cpu_milli;
    uint32_t memory_mib;
    MigLayout initial_mig; /* layout the GPUs start in (empty: MIG off) */
} Pool;

/* The Unix identity a team's workers run as on its nodes (the cluster spec's `run_as`):
 * the agent switches to it before exec. Unset: the agent's default worker user. */
#define RUN_AS_MAX_GROUPS 32
typedef struct RunAs {
    bool set;
    uint32_t uid, gid;                  /* below 2^32 - 1, which means "no id" */
    uint32_t groups[RUN_AS_MAX_GROUPS]; /* supplementary groups; none: only gid */
    uint8_t n_groups;
} RunAs;

typedef struct Team {
    char *name;
    double guaranteed_gpus; /* GPU-equivalents */
    double burst_gpus;
    double weight;
    double budget_gpu_hours; /* per calendar month (UTC), GPU-equivalent hours; 0: none */
    uint8_t tiers;           /* tiers its jobs may run on, a mask of 1 << Tier; 0: every tier */
    char **projects;
    size_t n_projects;
    RunAs run_as;
} Team;

typedef struct Node {
    char *name;
    uint32_t pool;
    uint32_t leaf;  /* switch index or NO_SWITCH */
    uint32_t spine; /* the leaf's parent or NO_SWITCH */
    uint32_t gpu0;  /* index of its first GPU in Cluster.gpus */
    uint8_t n_gpus;
    uint8_t model;
    uint8_t interconnect;
    bool mig_allowed;
    bool schedulable; /* false: drained or gone, nothing new lands here */
    uint8_t state;    /* NodePresence */
    uint8_t away;     /* NodeAway: why an unschedulable node is closed, as its driver says */
    uint16_t fabric;
    uint8_t free_whole; /* GPUs in GPU_WHOLE mode with nothing allocated */
    uint8_t idle_mig;   /* GPUs in MIG mode with no instance allocated */
    uint32_t cpu_milli, cpu_used_milli;
    uint32_t memory_mib, memory_used_mib;
    uint32_t used_units; /* sum over its GPUs */
    uint32_t version;    /* bumped on every change, for score caches */
    /* workers on it by shape: [0] slices and shares, [k] k whole GPUs */
    uint16_t workers_by_gpus[NODE_MAX_GPUS + 1];
} Node;

/* Node changes remembered, for indexes that catch up on what changed (place.c). */
#define CLUSTER_CHANGE_RING 4096

typedef struct Cluster {
    char *name;
    ClusterModel models[CLUSTER_MAX_MODELS];
    size_t n_models;
    Switch *switches;
    size_t n_switches, switches_cap;
    Pool *pools;
    size_t n_pools, pools_cap;
    Team *teams;
    size_t n_teams, teams_cap;
    Node *nodes;
    size_t n_nodes, nodes_cap;
    /* change k (counted in change_seq) was to node change_ring[k % CLUSTER_CHANGE_RING] */
    uint64_t change_seq;
    uint32_t change_ring[CLUSTER_CHANGE_RING];
    Gpu *gpus;
    size_t n_gpus, gpus_cap;
    char **fabrics; /* interned labels; [0] is "" */
    size_t n_fabrics, fabrics_cap;
    uint64_t used_units; /* over the whole cluster */
    uint32_t max_gpus_per_node;
} Cluster;

/* Building. Strings are copied. Each returns an index, or a negative errno
 * (-EEXIST for a duplicate name, -ENOMEM, -E2BIG past a limit). */
Cluster *cluster_new(const char *name);
void cluster_free(Cluster *c);
/* A deep copy, state included; NULL when out of memory. */
Cluster *cluster_clone(const Cluster *c);
int cluster_model(Cluster *c, const char *name, uint32_t memory_mib_if_unknown);
int cluster_add_switch(Cluster *c, const char *name, const char *parent);
int cluster_fabric(Cluster *c, const char *label);  /* interns; "" or NULL is 0 */
int cluster_add_pool(Cluster *c, const Pool *tmpl); /* copies name and leaves */
int cluster_add_team(Cluster *c, const Team *t);    /* copies strings */
/* A node of the pool's template named `name` attached to `leaf` (or NO_SWITCH). */
int cluster_add_node(Cluster *c, uint32_t pool, const char *name, uint32_t leaf);
/* Create the pool's `nodes` nodes (the count the template asked for), named
 * <pool>-<index>, spread over its leaves; of an autoscaled pool those from
 * initial_nodes on are absent. */
int cluster_add_pool_nodes(Cluster *c, uint32_t pool);

int cluster_find_switch(const Cluster *c, const char *name);
int cluster_find_node(const Cluster *c, const char *name);
int cluster_find_team(const Cluster *c, const char *name);
int cluster_find_model(const Cluster *c, const char *name); /* alias-aware */

static inline const GpuModel *node_model(const Cluster *c, const Node *n)
{
    return &c->models[n->model].m;
}
static inline Gpu *node_gpu(Cluster *c, const Node *n, unsigned i)
{
    return &c->gpus[n->gpu0 + i];
}
static inline const Gpu *node_gpu_c(const Cluster *c, const Node *n, unsigned i)
{
    return &c->gpus[n->gpu0 + i];
}

/* A worker's share of one GPU. */
typedef enum GrantKind { GRANT_WHOLE, GRANT_MIG, GRANT_SHARE } GrantKind;

typedef struct Grant {
    uint8_t index; /* GPU index inside the node */
    uint8_t kind;  /* GrantKind */
    uint8_t mig_profile, mig_start;
    uint16_t milli; /* GRANT_SHARE: thousandths of the GPU */
} Grant;

typedef struct WorkerAlloc {
    uint32_t node;
    uint32_t cpu_milli;
    uint32_t memory_mib;
    uint8_t n_grants;
    Grant grants[NODE_MAX_GPUS];
} WorkerAlloc;

/* A MIG layout change the placement needs before a worker can start. */
typedef struct MigChange {
    uint32_t node;
    uint8_t index; /* GPU inside the node */
    MigLayout before, after;
} MigChange;

uint32_t grant_units(const Cluster *c, const Node *n, const Grant *g);
uint32_t worker_units(const Cluster *c, const WorkerAlloc *w);

/* Apply or undo one worker's allocation. Apply assumes the resources are free (the
 * placer checked); release assumes they were applied. */
void cluster_apply_worker(Cluster *c, const WorkerAlloc *w);
void cluster_release_worker(Cluster *c, const WorkerAlloc *w);

/* Drain (false) or reopen (true) a node. Node fields change only through cluster_*
 * functions, which bump the node's version so cached scores notice. Reopening clears
 * the node's away cause. */
void cluster_set_schedulable(Cluster *c, uint32_t node, bool on);
/* What GPU gpu (node-local) of node reaches over NVLink, as a mask of node-local
 * indices (the agent's report); whole-GPU picks keep linked GPUs together. */
void cluster_set_nvlink(Cluster *c, uint32_t node, unsigned gpu, uint16_t peers);
/* Close a node for a cause its driver knows (why != AWAY_NONE), or forget the cause
 * (AWAY_NONE; the node stays closed until reopened). */
void cluster_set_away(Cluster *c, uint32_t node, NodeAway why);
const char *node_away_name(NodeAway why); /* "unregistered", "lost", ... */

/* Move a node to a state; it is schedulable exactly when up. A node that holds work
 * may only be up or leaving (the caller stops the work first). */
void cluster_set_node_state(Cluster *c, uint32_t node, NodePresence st);
static inline bool node_present(const Node *n)
{
    return n->state != NODE_ABSENT;
}
static inline bool pool_autoscaled(const Pool *p)
{
    return p->max_nodes > p->min_nodes;
}
/* Nodes of nothing: no GPU, CPU or memory allocated. */
static inline bool node_empty(const Node *n)
{
    return !n->used_units && !n->cpu_used_milli && !n->memory_used_mib;
}

/* Drain a partitioned GPU (no new slices or shares) or take the drain off. */
void cluster_set_draining(Cluster *c, uint32_t node, unsigned index, bool on);

/* Change a GPU's MIG layout (MIG_NONE everywhere turns MIG off). Allocated instances
 * must survive. -EBUSY when they would not, -EINVAL for an invalid layout. */
int cluster_set_mig(Cluster *c, uint32_t node, unsigned index, const MigLayout *after);

/* Check every counter against the per-GPU state; for tests. */
bool cluster_consistent(const Cluster *c);

const char *tier_name(Tier t);
int tier_from_name(const char *s); /* -1 when unknown */
const char *interconnect_name(Interconnect ic);
int interconnect_from_name(const char *s);
