/* job.h: a job as users describe it (JobSpec, the fields of the YAML/JSON/CSV job
 * files) and as the placer sees one worker of it against a given cluster (Request:
 * the GPU ask resolved per GPU model, the allowed models as a mask, topology). */
#pragma once

#include "core/cluster.h"
#include "util/buf.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum JobKind {
    KIND_INFERENCE,
    KIND_TRAINING,
    KIND_BATCH,
    KIND_INTERACTIVE,
    KIND_COUNT
} JobKind;

/* Lower value = more important. */
typedef enum Priority { PRIO_PRODUCTION, PRIO_HIGH, PRIO_NORMAL, PRIO_LOW, PRIO_COUNT } Priority;

typedef enum ReqKind {
    REQ_NONE,     /* no GPU (CPU-only work) */
    REQ_GPUS,     /* whole GPUs per worker */
    REQ_MIG,      /* one MIG instance of a named profile */
    REQ_MEMORY,   /* GPU memory: the smallest fitting slice or share */
    REQ_FRACTION, /* an MPS share of one GPU */
} ReqKind;

typedef enum Scope { SCOPE_ANY, SCOPE_NODE, SCOPE_LEAF, SCOPE_SPINE } Scope;

#define BUSY_ALL    UINT16_MAX /* busy_milli: uses all the compute it is given */
#define NO_DURATION (-1)

typedef struct JobSpec {
    char *name; /* the job's id */
    char *team, *project;
    uint8_t kind;            /* JobKind */
    uint8_t priority;        /* Priority */
    uint32_t workers;        /* gang size */
    uint8_t req;             /* ReqKind */
    uint16_t gpus;           /* REQ_GPUS: per worker */
    char *mig;               /* REQ_MIG: profile name */
    uint64_t gpu_memory_mib; /* REQ_MEMORY */
    uint16_t fraction_milli; /* REQ_FRACTION: 1..1000 */
    char **gpu_models;       /* allowed models; none = any */
    size_t n_gpu_models;
    uint8_t scope; /* Scope */
    bool scope_required;
    char *fabric; /* NULL = any */
    bool preemptible;
    int64_t checkpoint_interval_ms; /* 0 = none given */
    int64_t checkpoint_grace_ms;
    int64_t checkpoint_cost_ms;
    int64_t max_wait_ms; /* spot-first work: how long it waits for spot before on-demand
                          * is started for it; 0 = the autoscaler's default */
    uint8_t tiers;       /* allowed tiers as a mask of 1 << Tier; 0 = the default for its class */
    char **command;
    size_t n_command;
    char **env; /* "KEY=VALUE" */
    size_t n_env;
    int64_t duration_estimate_ms; /* NO_DURATION when unknown */
    /* per worker host resources */
    uint32_t cpu_milli;
    uint32_t memory_mib;
    /* from traces (and the simulator's job CSV) */
    int64_t submit_ms;
    int64_t duration_ms; /* true run time on what it asks for; NO_DURATION unknown */
    uint16_t busy_milli; /* compute it really uses per GPU asked, 0..1000, or BUSY_ALL */
    uint64_t peak_memory_mib;
    char *workload_class;
} JobSpec;

void job_spec_init(JobSpec *j);
void job_spec_free(JobSpec *j);
int job_spec_copy(const JobSpec *src, JobSpec *ret);

/* The tier rules, one place for the placer, the autoscaler, plan, sim and the server:
 *  - a job checkpoints when it gives a checkpoint interval or a checkpoint cost (the
 *    cost alone: it checkpoints on spot at the Young/Daly interval);
 *  - only work that is preemptible and checkpoints may run on spot, where an
 *    interruption would otherwise lose what it did (request_from_job takes spot out of
 *    any other job's tiers, and refuses a job whose tiers are spot alone);
 *  - production, and inference that is not preemptible, prefer owned and reserved
 *    capacity: the placer tries those first, on-demand when they are full. */
bool job_spec_checkpoints(const JobSpec *j);
bool job_spec_spot_ok(const JobSpec *j);
bool job_spec_prefers_owned(const JobSpec *j);

const char *job_kind_name(JobKind k);
int job_kind_from_name(const char *s);
const char *priority_name(Priority p);
int priority_from_name(const char *s);
const char *scope_name(Scope s);
int scope_from_name(const char *s);
const char *req_kind_name(ReqKind k);

/* What one worker asks of one node. Per cluster model, a slice request (REQ_MIG,
 * REQ_MEMORY, REQ_FRACTION) is resolved to a MIG profile and/or an MPS share. */
typedef struct Request {
    uint8_t kind; /* ReqKind */
    uint8_t gpus; /* REQ_GPUS: whole GPUs per worker */
    uint8_t scope;
    bool scope_required;
    uint8_t tiers;   /* mask of allowed tiers */
    uint8_t prefer;  /* tiers placed on first when they have room (within tiers); 0: none */
    uint16_t fabric; /* interned fabric the nodes must have; 0 = any */
    uint32_t workers;
    uint32_t cpu_milli;                       /* per worker */
    uint32_t memory_mib;                      /* per worker */
    uint64_t models;                          /* mask of allowed cluster models */
    int32_t shape;                            /* key for score caches; -1 = none */
    int8_t mig_profile[CLUSTER_MAX_MODELS];   /* slice as a MIG instance, -1 = none */
    uint16_t share_milli[CLUSTER_MAX_MODELS]; /* slice as an MPS share, 0 = none */
} Request;

/* Resolve a job against a cluster. Returns 0, or -EINVAL with why set to a sentence
 * saying why no node of this cluster could ever run it (unknown model, a MIG profile
 * none of the allowed models has, more GPUs than any node holds, spot as its only tier
 * for work that may not run there, ...). */
int request_from_job(const Cluster *c, const JobSpec *j, Request *ret, Buf *why);

/* Why no node of pool p could ever take a worker of r, even empty: the first reason in
 * this order, or POOL_FITS. The nodes of a pool are its template, so this is also each
 * node's answer (the placer's explanations and admission ask the same question). */
typedef enum PoolMisfit {
    POOL_FITS,
    POOL_MODEL,  /* none of the models the request allows */
    POOL_TIER,   /* a tier it may not use */
    POOL_FABRIC, /* another fabric than the one it requires */
    POOL_GPUS,   /* too few GPUs per node, no MIG where a slice is asked, no GPU at all */
    POOL_CPU,    /* less CPU per node than one worker asks */
    POOL_MEMORY, /* less host memory per node than one worker asks */
} PoolMisfit;
PoolMisfit request_pool_misfit(const Pool *p, const Request *r);

/* Compute one worker of r takes on a node's model, in GPU_UNITS (MIG resolves first). */
uint32_t request_units_on(const Cluster *c, const Request *r, unsigned model, bool mig);

/* Two requests ask for the same thing of a node (everything but workers and shape). */
bool request_same_shape(const Request *a, const Request *b);
