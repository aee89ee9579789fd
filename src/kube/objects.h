/* objects.h: what gpuorch reads out of Kubernetes objects: a Node as the GPU Operator
 * labels it (GPU model, count, memory, MIG capability and layout, what the device plugin
 * advertises), and a Pod as a request (GPUs, a MIG profile, GPU memory, an MPS share,
 * CPU and memory, the gang it belongs to, its priority class and gpuorch's annotations).
 * Pure translations from JSON (jansson) to plain structs: no I/O, so they are unit
 * tested and fuzzed on their own. docs/kubernetes.md lists every label and annotation. */
#pragma once

#include "core/job.h"
#include "util/buf.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

/* The node labels gpuorch reads beside the GPU Operator's (configurable: the platform
 * team's own topology labels). NULL fields take the defaults in brackets. */
typedef struct KubeLabels {
    const char *leaf;         /* [gpuorch.io/leaf] the leaf switch the node hangs off */
    const char *spine;        /* [gpuorch.io/spine] that leaf's spine */
    const char *fabric;       /* [gpuorch.io/fabric] infiniband-ndr, roce-v2, efa, ... */
    const char *tier;         /* [gpuorch.io/tier] owned, reserved, on-demand, spot */
    const char *price;        /* [gpuorch.io/price-per-gpu-hour] USD, "2.50" */
    const char *interconnect; /* [gpuorch.io/interconnect] nvswitch, nvlink-pairs, pcie */
} KubeLabels;
void kube_labels_defaults(KubeLabels *l);

#define KUBE_MAX_MIG_RESOURCES 16

/* One `nvidia.com/mig-<profile>` resource a node advertises. */
typedef struct KubeMigResource {
    char profile[24]; /* "1g.10gb", as in the resource name */
    uint32_t count;
} KubeMigResource;

typedef struct KubeNode {
    char *name;
    char *product;            /* nvidia.com/gpu.product, or NULL (no GPU); without GFD's
                               * "-SHARED" (sharing) or "-MIG-<profile>" (MIG single) */
    uint32_t gpus;            /* nvidia.com/gpu.count, else capacity nvidia.com/gpu over
                               * the replicas; MIG single: see kube_node_parse */
    uint32_t gpu_memory_mib;  /* nvidia.com/gpu.memory, 0 unknown */
    bool mig_capable;         /* nvidia.com/mig.capable=true */
    char mig_strategy[8];     /* nvidia.com/mig.strategy: "none", "single", "mixed", "" */
    char *mig_config;         /* nvidia.com/mig.config, or NULL */
    char *mig_state;          /* nvidia.com/mig.config.state: pending, success, failed; or NULL */
    uint32_t alloc_gpu;       /* allocatable nvidia.com/gpu (MPS: replicas) */
    uint32_t shared_replicas; /* nvidia.com/gpu.replicas label (MPS sharing), 0: none
                               * (GFD writes 1 when nothing is shared) */
    bool time_sliced;         /* nvidia.com/gpu.sharing-strategy=time-slicing: replicas
                               * without MPS limits; shared_replicas stays 0 */
    KubeMigResource mig[KUBE_MAX_MIG_RESOURCES]; /* allocatable MIG resources */
    size_t n_mig;
    uint32_t cpu_milli, memory_mib, pods; /* allocatable */
    uint32_t rdma;      /* allocatable fabric devices, summed: every rdma/<name> resource,
                         * vpc.amazonaws.com/efa, nvidia.com/hca */
    bool ready;         /* condition Ready=True */
    bool unschedulable; /* spec.unschedulable (cordoned) */
    char *taint;        /* the first NoSchedule/NoExecute taint's key (NULL: none) that GPU
                         * pods are not expected to tolerate: nvidia.com/gpu is expected */
    char *leaf, *spine, *fabric, *interconnect; /* from KubeLabels, or NULL */
    int tier;                                   /* Tier; TIER_OWNED when unlabelled */
    int64_t price_micro_usd;                    /* per GPU-hour, -1 unlabelled */
} KubeNode;

/* Read a Node object. 0, -EINVAL (not a Node: no metadata.name) with why, -ENOMEM.
 * A label with a bad value (a tier, price or interconnect that does not parse, a GPU
 * count that is not a number) or an allocatable that is not a quantity is -EINVAL too,
 * with why naming it: the caller reports it and leaves the node out. Allocatable CPU
 * and memory round down (7500m, 512Gi, 123456Ki). MIG strategy "single", where GFD
 * labels the slices as the GPUs: product and gpus are turned back into the model and
 * its physical GPUs (the catalogue's instances per GPU; gpus 0 when it does not know
 * the model), gpu_memory_mib into the model's, and the slices become mig[0] with
 * alloc_gpu 0. interconnect is the canonical name (interconnect_name). */
int kube_node_parse(const json_t *node, const KubeLabels *labels, KubeNode *ret, Buf *why);
void kube_node_free(KubeNode *n);

/* The annotations gpuorch reads on pods (prefix gpuorch.io/). */
#define KUBE_ANN_GPU_MEMORY    "gpuorch.io/gpu-memory"   /* "20Gi": right-size into a slice */
#define KUBE_ANN_FRACTION      "gpuorch.io/gpu-fraction" /* "0.25": an MPS share */
#define KUBE_ANN_PREEMPTIBLE   "gpuorch.io/preemptible"  /* "true" | "false" */
#define KUBE_ANN_CKPT_INTERVAL "gpuorch.io/checkpoint-interval" /* "30m" */
#define KUBE_ANN_CKPT_COST     "gpuorch.io/checkpoint-cost"     /* "2m" */
#define KUBE_ANN_CLASS         "gpuorch.io/workload-class"
#define KUBE_ANN_KIND          "gpuorch.io/kind"     /* training, inference, batch, interactive */
#define KUBE_ANN_SCOPE         "gpuorch.io/topology" /* node, leaf, spine; "leaf!" required */
#define KUBE_ANN_PRIORITY      "gpuorch.io/priority" /* production, high, normal, low */
#define KUBE_ANN_PROJECT       "gpuorch.io/project"
#define KUBE_ANN_ESTIMATE      "gpuorch.io/duration-estimate" /* "2h" */
#define KUBE_ANN_FABRIC        "gpuorch.io/fabric"            /* a fabric the nodes must have */
/* Set by the workload (or a sidecar) on its own pod when it has saved a checkpoint: where
 * it is ("s3://ckpt/run-7/step-1200"); the job's next run resumes from it. */
#define KUBE_ANN_CHECKPOINT "gpuorch.io/checkpoint"
/* Written by gpuorch on the pods it places again after a preemption: the checkpoint
 * to resume from (the workload reads it, or GPUORCH_RESUME_FROM from it). */
#define KUBE_ANN_RESUME_FROM "gpuorch.io/resume-from"

/* The label a pod joins a PodGroup with (the coscheduling plugin's). */
#define KUBE_LABEL_POD_GROUP "scheduling.x-k8s.io/pod-group"

typedef enum KubePodPhase {
    POD_PENDING,
    POD_RUNNING,
    POD_SUCCEEDED,
    POD_FAILED,
    POD_UNKNOWN,
} KubePodPhase;

typedef struct KubePod {
    char *ns, *name, *uid;
    char *node;           /* spec.nodeName, or NULL: not bound */
    char *scheduler;      /* spec.schedulerName */
    uint8_t phase;        /* KubePodPhase */
    bool deleting;        /* metadata.deletionTimestamp set */
    int64_t grace_s;      /* spec.terminationGracePeriodSeconds (default 30) */
    int64_t created_ms;   /* metadata.creationTimestamp */
    int32_t exit_code;    /* the first terminated container's exit code, -1 none */
    char *group;          /* the job it belongs to, inside the namespace: "pg/<PodGroup>"
                           * (a gang), "job/<Job name>" (a batch/v1 Job's pods: one job,
                           * so a recreated pod carries the job's checkpoint on), else
                           * "pod/<name>" (a bare pod, a Deployment's replica) */
    char *priority_class; /* spec.priorityClassName, or NULL */
    uint32_t rdma;        /* fabric devices it asks (the resources KubeNode.rdma counts) */
    /* The request, as a job spec of one worker: team = namespace (the engine maps it),
     * name = "<ns>/<pod>", req/gpus/mig/gpu_memory_mib/fraction_milli from the resources
     * and annotations, cpu_milli/memory_mib from the containers' requests (the largest
     * init container's or the sum of the others', rounded up), kind/priority/preemptible/
     * checkpoint/class/scope/fabric/project/estimate from the annotations,
     * checkpoint_grace_ms from grace_s. Priority: the annotation, else the priority
     * class (kube_priority_from_class), else normal. Kind: the annotation, else
     * training for whole GPUs in a pg/ or job/ group, inference for a slice, share or
     * GPU memory, batch for the rest (objects.c says why). */
    JobSpec spec;
    /* A pod whose request cannot be read (a malformed annotation, two GPU resources at
     * once): bad is set and why says what is wrong, for the pod's condition. */
    bool bad;
    char why[256];
} KubePod;

/* Read a Pod. 0 (bad may be set), -EINVAL when it is not a pod (no namespace/name, a
 * creationTimestamp that is not RFC 3339), -ENOMEM. shared_resource: the resource MPS
 * replicas are advertised under (NULL: "nvidia.com/gpu.shared"). A pod asking one
 * replica gets REQ_FRACTION with the gpu-fraction annotation's share, or fraction_milli
 * 0 when it has none: the engine then fills in 1/replicas from the nodes it knows.
 * gpu-memory on a pod asking no GPU resource, or nvidia.com/gpu: 1, is REQ_MEMORY (the
 * engine right-sizes it); with more GPUs, a MIG slice, a replica or gpu-fraction it is
 * bad, as are two GPU resources, two slices and two replicas. */
int kube_pod_parse(const json_t *pod, const char *shared_resource, KubePod *ret, Buf *why);
void kube_pod_free(KubePod *p);

/* The Priority a priority class name maps to: "gpuorch-production" or "production" ->
 * PRIO_PRODUCTION, likewise high, normal, low (and "batch" -> low); "system-*" and
 * unknown names -> -1 (the caller uses the pod's annotation or PRIO_NORMAL). */
int kube_priority_from_class(const char *name);
