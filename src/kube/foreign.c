/* foreign.c: what pods of other schedulers hold on gpuorch's GPU nodes (kube-scheduler's
 * daemon sets and CPU pods, another team's GPU pods, anything bound by hand). Their
 * GPUs, MIG instances, CPU and memory are taken out of the core's view of the node for
 * as long as they are bound and not finished, so gpuorch never places onto them. The
 * device plugin, not the pod, chooses which GPU a pod gets; gpuorch takes the first free
 * ones, which keeps each node's counts exact (see docs/kubernetes.md). */
#include "kube/engine_int.h"

#include "core/mig.h"
#include "util/log.h"
#include "util/macro.h"

#include <errno.h>
#include <search.h>
#include <stdlib.h>
#include <string.h>

typedef struct KForeign {
    char *uid;
    WorkerAlloc w;
    bool seen;
} KForeign;

static int cmp_foreign(const void *a, const void *b)
{
    return strcmp(((const KForeign *)a)->uid, ((const KForeign *)b)->uid);
}

/* What a pod that is not ours holds on node `node` (kube/engine_int.h). */
bool khold_take(const Cluster *c, uint32_t node, const JobSpec *s, WorkerAlloc *ret)
{
    const Node *n = &c->nodes[node];
    WorkerAlloc w = {.node = node};
    w.cpu_milli = MIN(s->cpu_milli, n->cpu_milli - MIN(n->cpu_milli, n->cpu_used_milli));
    w.memory_mib = MIN(s->memory_mib, n->memory_mib - MIN(n->memory_mib, n->memory_used_mib));
    if (s->req == REQ_GPUS) {
        for (unsigned i = 0; i < n->n_gpus && w.n_grants < s->gpus; i++) {
            const Gpu *g = node_gpu_c(c, n, i);
            if (g->mode == GPU_WHOLE && !g->used_units)
                w.grants[w.n_grants++] = (Grant){.index = (uint8_t)i, .kind = GRANT_WHOLE};
        }
        if (w.n_grants < s->gpus)
            return false;
    } else if (s->req == REQ_MIG && s->mig) {
        const GpuModel *m = node_model(c, n);
        int prof = catalog_profile_index(m, s->mig);
        for (unsigned i = 0; i < n->n_gpus && !w.n_grants && prof >= 0; i++) {
            const Gpu *g = node_gpu_c(c, n, i);
            for (unsigned st = 0; g->mode == GPU_MIG && st < MIG_MAX_SLOTS; st++)
                if (g->mig.profile_at[st] == prof && !(g->mig_busy & (1u << st))) {
                    w.grants[w.n_grants++] = (Grant){.index = (uint8_t)i,
                                                     .kind = GRANT_MIG,
                                                     .mig_profile = (uint8_t)prof,
                                                     .mig_start = (uint8_t)st};
                    break;
                }
        }
        if (!w.n_grants)
            return false;
    }
    *ret = w;
    return true;
}

static void release(KubeEngine *e, KForeign *f)
{
    cluster_release_worker(e->s->c, &f->w);
    e->s->dirty = true;
}

int kforeign_event(KubeEngine *e, const char *type, json_t *obj)
{
    KubePod p;
    int r = kpod_read(e, obj, &p);
    if (r <= 0)
        return r;
    KForeign k = {.uid = p.uid};
    void **f = tfind(&k, &e->foreign, cmp_foreign);
    KForeign *kf = f ? *f : NULL;
    bool holds = strcmp(type, "DELETED") && p.node && p.phase != POD_SUCCEEDED &&
                 p.phase != POD_FAILED &&
                 strcmp(p.scheduler ? p.scheduler : "", e->o.scheduler_name);
    int node = holds ? knode_find(e, p.node) : -1;
    if (kf && (node < 0 || (uint32_t)node != kf->w.node)) {
        release(e, kf);
        tdelete(kf, &e->foreign, cmp_foreign);
        free(kf->uid);
        free(kf);
        kf = NULL;
    }
    if (kf) {
        kf->seen = true;
    } else if (node >= 0 && (size_t)node < e->n_nodes) {
        WorkerAlloc w;
        if (!khold_take(e->s->c, (uint32_t)node, &p.spec, &w)) {
            log_error("event=foreign_pod_over_commits pod=%s/%s node=%s scheduler=%s "
                      "reason=\"what it asks is not free in gpuorch's view of the node\"",
                      p.ns, p.name, p.node, p.scheduler ? p.scheduler : "?");
        } else if (w.n_grants || w.cpu_milli || w.memory_mib) {
            kf = calloc(1, sizeof(*kf));
            if (!kf || !(kf->uid = strdup(p.uid)) || !tsearch(kf, &e->foreign, cmp_foreign)) {
                if (kf)
                    free(kf->uid);
                free(kf);
                kube_pod_free(&p);
                return -ENOMEM;
            }
            kf->w = w;
            kf->seen = true;
            cluster_apply_worker(e->s->c, &kf->w);
            e->s->dirty = true;
            if (w.n_grants)
                log_info("event=foreign_gpus pod=%s/%s node=%s gpus=%u scheduler=%s", p.ns, p.name,
                         p.node, (unsigned)w.n_grants, p.scheduler ? p.scheduler : "?");
        }
    }
    kube_pod_free(&p);
    return 0;
}

typedef struct Sweep {
    KForeign **f;
    size_t n, cap;
    bool mark;
} Sweep;

static void walk(const void *node, VISIT v, void *arg)
{
    if (v != postorder && v != leaf)
        return;
    Sweep *s = arg;
    KForeign *kf = *(KForeign *const *)node;
    if (s->mark)
        kf->seen = false;
    else if (!kf->seen && GROW(s->f, s->cap, s->n + 1) == 0)
        s->f[s->n++] = kf;
}

void kforeign_relist_begin(KubeEngine *e)
{
    Sweep s = {.mark = true};
    twalk_r(e->foreign, walk, &s);
}

void kforeign_relist_end(KubeEngine *e)
{
    Sweep s = {0};
    twalk_r(e->foreign, walk, &s);
    for (size_t i = 0; i < s.n; i++) {
        release(e, s.f[i]);
        tdelete(s.f[i], &e->foreign, cmp_foreign);
        free(s.f[i]->uid);
        free(s.f[i]);
    }
    free(s.f);
}

static void free_foreign(void *p)
{
    KForeign *kf = p;
    free(kf->uid);
    free(kf);
}

void kforeign_free(KubeEngine *e)
{
    tdestroy(e->foreign, free_foreign);
    e->foreign = NULL;
}
