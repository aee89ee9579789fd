/* server_kube.c: `gpuorch server --kubernetes`: its options, and the engine between
 * the listening port and the open server: connect and check access, take the lead
 * (--leader-elect), and build the cluster from the Node objects with the teams of
 * --config, before the store is opened, so that a replica that waits for the lead
 * touches nothing. */
#include "cli/server_kube.h"

#include "util/units.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char identity[300];
/* the namespaces of --lease and --mig-configmap: KubeOptions points into these for as
 * long as the command runs, and nothing has to free them (a namespace is a DNS label:
 * at most 63 characters) */
static char lease_ns[64], mig_ns[64];

static int split_ns_name(const char *flag, const char *arg, char *ns, size_t ns_size,
                         const char **ret_ns, const char **ret_name)
{
    const char *slash = strchr(arg, '/');
    if (!slash || slash == arg || !slash[1] || strchr(slash + 1, '/') ||
        (size_t)(slash - arg) >= ns_size) {
        fprintf(stderr, "gpuorch server: %s takes NAMESPACE/NAME, not '%s'\n", flag, arg);
        return -EINVAL;
    }
    memcpy(ns, arg, (size_t)(slash - arg));
    ns[slash - arg] = '\0';
    *ret_ns = ns;
    *ret_name = slash + 1;
    return 0;
}

static int positive(const char *flag, const char *arg, int64_t max, int64_t *ret)
{
    int64_t v;
    if (parse_i64(arg, &v) < 0 || v <= 0 || v > max) {
        fprintf(stderr, "gpuorch server: %s must be a whole number from 1 to %lld, not '%s'\n",
                flag, (long long)max, arg);
        return -EINVAL;
    }
    *ret = v;
    return 0;
}

int server_kube_option(int opt, const char *arg, KubeOptions *ko)
{
    int64_t v;
    switch (opt) {
    case OPT_KUBE:
        return 0;
    case OPT_KUBECONFIG:
        ko->kubeconfig = arg;
        return 0;
    case OPT_KUBE_CONTEXT:
        ko->context = arg;
        return 0;
    case OPT_SCHEDULER_NAME:
        ko->scheduler_name = arg;
        return 0;
    case OPT_LEADER_ELECT:
        ko->leader_elect = true;
        return 0;
    case OPT_LEASE:
        return split_ns_name("--lease", arg, lease_ns, sizeof(lease_ns), &ko->namespace_,
                             &ko->lease_name);
    case OPT_MIG_CONFIGMAP:
        return split_ns_name("--mig-configmap", arg, mig_ns, sizeof(mig_ns), &ko->mig_namespace,
                             &ko->mig_configmap);
    case OPT_KUBE_QPS:
        if (positive("--kube-qps", arg, 100000, &v) < 0)
            return -EINVAL;
        ko->qps = (double)v;
        return 0;
    case OPT_KUBE_BURST:
        if (positive("--kube-burst", arg, 100000, &v) < 0)
            return -EINVAL;
        ko->burst = (int)v;
        return 0;
    case OPT_MIG_TIMEOUT:
        if (positive("--mig-timeout-s", arg, 86400, &v) < 0)
            return -EINVAL;
        ko->mig_timeout_ms = v * 1000;
        return 0;
    case OPT_KUBE_WRITERS:
        if (positive("--kube-writers", arg, 64, &v) < 0)
            return -EINVAL;
        ko->writers = (int)v;
        return 0;
    default:
        return -EINVAL;
    }
}

int server_kube_prepare(KubeOptions *ko, ServerOptions *o, KubeEngine **ret, Buf *err)
{
    if (!ko->identity) {
        char host[256] = "gpuorch";
        gethostname(host, sizeof(host) - 1);
        snprintf(identity, sizeof(identity), "%s-%d", host, (int)getpid());
        ko->identity = identity;
    }
    KubeEngine *e = NULL;
    int r = kube_engine_new(ko, &e, err);
    if (r == 0)
        r = kube_engine_lead(e, err);
    Cluster *c = NULL;
    if (r == 0)
        r = kube_engine_cluster(e, o->config_path, &c, err);
    if (r < 0) {
        kube_engine_free(e);
        return r;
    }
    o->cluster = c;
    o->external_nodes = true;
    o->after_cycle = kube_engine_after_cycle;
    o->after_cycle_arg = e;
    *ret = e;
    return 0;
}
