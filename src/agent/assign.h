/* assign.h: one worker as the server assigns it in a heartbeat reply (docs/api.md,
 * "POST /api/v1/agent/heartbeat"), parsed and checked, and the signal names the
 * assignment may use. A worker is named by (job, run, rank). */
#pragma once

#include "agent/gpus.h"
#include "util/buf.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum WorkerGpuKind { WGPU_WHOLE, WGPU_MIG, WGPU_SHARE } WorkerGpuKind;

/* One entry of "gpus", in plan's grant shape. */
typedef struct WorkerGpu {
    unsigned index;
    uint8_t kind;                  /* WorkerGpuKind */
    char profile[GPU_PROFILE_MAX]; /* WGPU_MIG */
    uint8_t start;                 /* WGPU_MIG */
    double fraction;               /* WGPU_SHARE: (0, 1) */
} WorkerGpu;

typedef enum WorkerStop { WSTOP_NONE, WSTOP_PREEMPT, WSTOP_CANCEL } WorkerStop;

#define ASSIGN_DEFAULT_GRACE_MS 30000
#define ASSIGN_MAX_GROUPS       32         /* the cluster spec's RUN_AS_MAX_GROUPS */
#define ASSIGN_MAX_ID           4294967294 /* a uid or gid; 2^32 - 1 means "none" */

typedef struct Assignment {
    int64_t job, run;
    uint32_t rank, local_rank, world_size;
    char *master_addr;
    uint32_t master_port;
    WorkerGpu *gpus;
    size_t n_gpus;
    char **argv;                    /* NULL-terminated, at least one word */
    char **env;                     /* NULL-terminated "NAME=value" */
    char *resume_from;              /* NULL when starting afresh */
    int64_t checkpoint_interval_ms; /* 0: no periodic checkpoint signal */
    bool checkpoints;               /* the job saves its work (it has a checkpoint setting) */
    int checkpoint_signal;          /* SIGUSR1 unless told */
    int64_t grace_ms;
    uint8_t stop; /* WorkerStop */
    /* "user": the Unix identity the server maps the job's team to; without it the agent
     * runs the worker as its default user (launch.h) */
    bool has_user;
    uint32_t uid, gid;
    uint32_t groups[ASSIGN_MAX_GROUPS]; /* supplementary groups */
    size_t n_groups;
    uint32_t cpu_milli;  /* host CPU asked per worker, thousandths of a core; 0: none */
    uint32_t memory_mib; /* host memory asked per worker; 0: none */
    /* "fabric": the node's pool's fabric label from the cluster spec ("infiniband-ndr");
     * NULL when the pool has none. nccl_fabric.h reads the kind from it */
    char *fabric;
    /* "multi_node": the run's workers are on more than one node, so NCCL talks over the
     * network and the fabric's settings apply (launch_env); false when not told */
    bool multi_node;
} Assignment;

/* The key of a worker object ("job", "run", "rank"). -EINVAL when one is missing. */
int assign_key(json_t *o, int64_t *ret_job, int64_t *ret_run, uint32_t *ret_rank);

/* Parse one element of the reply's "workers". On failure err names the field and the
 * assignment is left zeroed. */
int assign_parse(json_t *o, Assignment *ret, Buf *err);
void assign_free(Assignment *a);

/* "USR1", "SIGUSR1", "usr1" or a number -> signal number; -1 when not a signal. */
int assign_signal_from_name(const char *name);
/* "USR1" for SIGUSR1; "?" when unknown. */
const char *assign_signal_name(int sig);
