/* gpus.h: the agent's one narrow interface to the node's GPUs. A backend (NVML on a
 * real node, simulated GPUs elsewhere) is a table of functions: discover the
 * inventory, bring one GPU to a MIG layout, list one GPU's MIG instances with their
 * UUIDs, (optionally) say how much GPU memory each process uses, and (optionally)
 * sample what each GPU is measured doing (GpuSample). Everything the
 * agent changes on a GPU goes through here, so a privileged helper could take this
 * part over without the rest noticing. MIG layouts are the core's (core/mig.h):
 * profile indices of the GPU's catalogue model, keyed by start slot. */
#pragma once

#include "core/catalog.h"
#include "core/mig.h"
#include "util/buf.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define GPU_UUID_MAX    96 /* NVML_DEVICE_UUID_V2_BUFFER_SIZE */
#define GPU_NAME_MAX    96 /* NVML_DEVICE_NAME_V2_BUFFER_SIZE */
#define GPU_PROFILE_MAX 32
#define GPU_MAX_PEERS   32
#define GPU_HEALTH_MAX  48 /* "xid 79", "ecc uncorrected 12", "fallen off the bus" */

/* One MIG instance (a GPU instance with one compute instance spanning it). */
typedef struct GpuInstance {
    char profile[GPU_PROFILE_MAX]; /* "1g.10gb" */
    uint8_t start;                 /* first memory slot */
    char uuid[GPU_UUID_MAX];       /* "MIG-...": what CUDA_VISIBLE_DEVICES takes */
} GpuInstance;

/* One MIG instance's readings; a has_ flag is false where the backend could not say
 * (NVML answers NOT_SUPPORTED for utilisation on most MIG devices). */
typedef struct GpuInstanceSample {
    uint8_t start; /* the instance's first memory slot, as in GpuInstance */
    bool has_busy, has_memory;
    uint8_t busy_pct;         /* 0-100: share of the last period a kernel ran */
    uint64_t memory_used_mib; /* of the instance's memory */
} GpuInstanceSample;

/* One GPU's readings at one moment (GpuOps.sample), as NVML and DCGM's exporter give
 * them; a has_ flag is false where the backend could not say. */
typedef struct GpuSample {
    bool has_busy, has_memory, has_power, has_temperature;
    uint8_t busy_pct;         /* 0-100: nvmlDeviceGetUtilizationRates' gpu, SM busy share */
    uint64_t memory_used_mib; /* nvmlDeviceGetMemoryInfo's used */
    double power_w;           /* nvmlDeviceGetPowerUsage / 1000 */
    int temperature_c;        /* nvmlDeviceGetTemperature, the GPU die */
    size_t n_mig;
    GpuInstanceSample mig[MIG_MAX_SLOTS]; /* the instances NVML gave readings for */
} GpuSample;

/* What the agent's running workers hold of one GPU: the simulated GPUs turn it into
 * their readings, as they run nothing; a real GPU is measured instead. */
typedef struct GpuLoad {
    double share;     /* 0-1: GPU-equivalents held by running workers */
    uint8_t mig_busy; /* bit i: the MIG instance starting at slot i is in use */
} GpuLoad;

typedef struct AgentGpu {
    unsigned index; /* the node-local index the server's grants use */
    char uuid[GPU_UUID_MAX];
    char name[GPU_NAME_MAX];
    uint64_t memory_mib;
    const GpuModel *model; /* the catalogue's entry for name; NULL when it does not know it */
    bool mig_capable;
    bool mig_enabled;
    size_t n_mig;
    GpuInstance mig[MIG_MAX_SLOTS]; /* in start order */
    size_t n_peers;
    unsigned peers[GPU_MAX_PEERS]; /* indices of GPUs it reaches over NVLink */
    GpuSample sample;              /* the last readings (GpuOps.sample); all has_ false when none */
    /* why the GPU is sick, "" while it is healthy; once set, kept until the agent
     * restarts (docs/agent.md, "Sick GPUs"): the agent's loop sets it, not discover */
    char health[GPU_HEALTH_MAX];
} AgentGpu;

/* GPU memory one process uses. */
typedef struct GpuProcess {
    pid_t pid;
    uint64_t used_mib;
} GpuProcess;

/* One GPU's health as a backend sees it now: why "" when healthy, else the reason. */
typedef struct GpuHealth {
    char why[GPU_HEALTH_MAX];
} GpuHealth;

typedef struct GpuBackend GpuBackend;

typedef struct GpuOps {
    const char *name; /* "nvml", "sim" */
    /* The node's GPUs in index order, MIG instances included. *ret is malloc'd and
     * owned by the caller. */
    int (*discover)(GpuBackend *b, AgentGpu **ret, size_t *ret_n, Buf *err);
    /* Bring GPU index to target (an empty layout turns MIG off). Instances whose start
     * is in busy hold running work: when reaching target would destroy one of them,
     * nothing changes and -EBUSY comes back. -EINVAL for a layout the GPU cannot have. */
    int (*mig_apply)(GpuBackend *b, unsigned index, const MigLayout *target, uint8_t busy,
                     Buf *err);
    /* GPU index's MIG mode and instances now, in start order. */
    int (*mig_list)(GpuBackend *b, unsigned index, bool *ret_enabled,
                    GpuInstance ret[MIG_MAX_SLOTS], size_t *ret_n, Buf *err);
    /* Compute processes on all GPUs with their memory; NULL when the backend cannot
     * tell. *ret is malloc'd (may be NULL when there are none). */
    int (*processes)(GpuBackend *b, GpuProcess **ret, size_t *ret_n, Buf *err);
    /* What GPU g is measured doing now, per MIG instance where the backend can tell;
     * load is what the agent's workers hold of it. A reading the GPU does not support
     * is left out (its has_ flag false), not an error. NULL when the backend cannot
     * measure. */
    int (*sample)(GpuBackend *b, const AgentGpu *g, const GpuLoad *load, GpuSample *ret, Buf *err);
    /* Each of the first n GPUs' health (index order) into ret[0..n-1]. Called once per
     * heartbeat and must not block: events that arrived since the last call count. NULL
     * when the backend cannot tell (every GPU is taken as healthy). */
    int (*health)(GpuBackend *b, GpuHealth *ret, size_t n, Buf *err);
    /* Put GPU index in exclusive-process compute mode (exclusive) or back to default,
     * for an MPS daemon (mps.h); NULL when the backend has no compute mode. */
    int (*set_compute_mode)(GpuBackend *b, unsigned index, bool exclusive, Buf *err);
    void (*close)(GpuBackend *b);
} GpuOps;

/* Every backend's state begins with this. */
struct GpuBackend {
    const GpuOps *ops;
};

/* spec: "nvml" or "sim:MODEL:COUNT". node and state_dir give the simulated GPUs their
 * stable UUIDs and a place to keep their MIG layouts across agent restarts. */
int gpus_open(const char *spec, const char *node, const char *state_dir, GpuBackend **ret,
              Buf *err);
void gpus_close(GpuBackend *b);

int nvml_open(GpuBackend **ret, Buf *err);
/* model_count: "MODEL:COUNT". */
int simgpu_open(const char *model_count, const char *node, const char *state_dir, GpuBackend **ret,
                Buf *err);

/* The layout a GPU's instance list amounts to. -EINVAL (err names it) when the
 * catalogue does not know the model or one of the profiles. */
int gpu_layout(const AgentGpu *g, MigLayout *ret, Buf *err);
/* The instance of profile at start, or NULL. */
const GpuInstance *gpu_instance(const AgentGpu *g, const char *profile, unsigned start);
/* The GPU with that index, or NULL. */
AgentGpu *gpu_by_index(AgentGpu *gpus, size_t n, unsigned index);
/* "1g.10gb, 2g.20gb, ...": the model's profile names, for error messages. */
void gpu_profile_names(Buf *b, const GpuModel *m);
