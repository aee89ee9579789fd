/* engine.h: gpuorch as the scheduler of GPU pods on a Kubernetes cluster. The engine is
 * a second way of carrying out the server's decisions beside its agents: the cluster
 * comes from the Node objects, jobs from the pods that name gpuorch as their scheduler
 * (one pod, a PodGroup's members, a batch/v1 Job's pods), and the server's scheduling
 * cycle places them as it places any job. The engine then binds the pods, re-carves MIG
 * through the GPU Operator's mig.config label, evicts preemption victims, writes the
 * reason of each pod that waits, and follows the pods' phases so that the server's job
 * lifecycle (running, ended, requeued, charged) is the one its agents drive.
 *
 * Threads: one watch per kind of object (pods, nodes, PodGroups), each with its own API
 * client; an actuator that turns the server's state into API writes, done by a few
 * writer threads at once; and, with leader election, a lease keeper. Everything the
 * engine keeps is guarded by the server's lock; no API call is made holding it. */
#pragma once

#include "core/cluster.h"
#include "kube/api.h"
#include "kube/objects.h"
#include "server/state.h"
#include "util/buf.h"

#include <stdbool.h>

typedef struct KubeOptions {
    const char *kubeconfig;     /* NULL: the pod's service account (in-cluster) */
    const char *context;        /* kubeconfig context, NULL: the current one */
    const char *scheduler_name; /* pods with this spec.schedulerName are ours ["gpuorch"] */
    const char *namespace_;     /* where the lease lives ["gpuorch-system"] */
    const char *lease_name;     /* ["gpuorch"] */
    const char *identity;       /* this replica in the lease [hostname-pid] */
    bool leader_elect;          /* only the Lease's holder schedules */
    int lease_seconds;          /* a lease not renewed for this long may be taken [15] */
    /* the mig-parted config gpuorch writes its layouts into, which the GPU Operator's
     * MIG manager is pointed at (migManager.config.name) */
    const char *mig_namespace;   /* ["gpu-operator"] */
    const char *mig_configmap;   /* ["gpuorch-mig-parted-config"] */
    const char *shared_resource; /* MPS replicas' resource ["nvidia.com/gpu.shared"] */
    int64_t mig_timeout_ms;      /* a MIG change not done by then has failed [600000] */
    KubeLabels labels;
    double qps; /* the API client's request rate limit, 0: none [0] */
    int burst;
    int writers; /* threads writing to the API server at once [4] */
} KubeOptions;

void kube_options_defaults(KubeOptions *o);

typedef struct KubeEngine KubeEngine;

/* Connect (the kubeconfig or in-cluster credentials) and check that the API server
 * answers and lets us list nodes and pods. 0, or a negative errno with err saying what
 * to fix (-EACCES: RBAC lacks a verb, naming it). */
int kube_engine_new(const KubeOptions *o, KubeEngine **ret, Buf *err);
void kube_engine_free(KubeEngine *e);

/* With leader election: wait until this replica holds the Lease, then keep renewing it;
 * a replica that fails to renew in time exits (status 1), as kube-scheduler does, so
 * that a new leader rebuilds from the API server and the store. 0 at once without
 * leader election. */
int kube_engine_lead(KubeEngine *e, Buf *err);

/* List the Node objects and build the cluster: teams (and switches) from the spec at
 * spec_path, which has no pools, and a pool per node shape (nodes.c). */
int kube_engine_cluster(KubeEngine *e, const char *spec_path, Cluster **ret, Buf *err);

/* The API server's address ("https://..."), for people. */
const char *kube_engine_server(const KubeEngine *e);

/* ServerOptions.after_cycle: the cycle decided; the actuator acts. */
void kube_engine_after_cycle(void *engine);

/* Start the watches and the actuator on the open server. */
int kube_engine_start(KubeEngine *e, Server *s, Buf *err);
/* Stop the threads (before server_close). */
void kube_engine_stop(KubeEngine *e);

/* A GPU node joined after the start, and KUBE_JOIN_SETTLE_MS passed (for the nodes that
 * join together): the caller stops the engine and the server and starts again, which
 * takes the nodes in (state is durable, and a restart adopts the bound pods). */
#define KUBE_JOIN_SETTLE_MS 5000
bool kube_engine_joined(KubeEngine *e);

/* nodes.c: the cluster of a teams spec and these nodes; only nodes with GPUs count. */
int kube_cluster_build(const char *spec_path, const KubeNode *nodes, size_t n, Cluster **ret,
                       Buf *err);
bool kube_node_has_gpus(const KubeNode *n);
