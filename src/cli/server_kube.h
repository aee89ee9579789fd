/* server_kube.h: what `gpuorch server --kubernetes` adds to the server command: its
 * options, and the engine set up before the server opens (leadership, then the cluster
 * from the Node objects). */
#pragma once

#include "kube/engine.h"
#include "server/state.h"
#include "util/buf.h"

enum {
    OPT_KUBE = 0x100,
    OPT_KUBECONFIG,
    OPT_KUBE_CONTEXT,
    OPT_SCHEDULER_NAME,
    OPT_LEADER_ELECT,
    OPT_LEASE,
    OPT_MIG_CONFIGMAP,
    OPT_KUBE_QPS,
    OPT_KUBE_BURST,
    OPT_KUBE_WRITERS,
    OPT_MIG_TIMEOUT,
};

/* One option into ko; -EINVAL with the message printed. */
int server_kube_option(int opt, const char *arg, KubeOptions *ko);
/* Connect, wait for the lead, build the cluster: o gets the cluster and the engine's
 * hooks. */
int server_kube_prepare(KubeOptions *ko, ServerOptions *o, KubeEngine **ret, Buf *err);
