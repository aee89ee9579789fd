/* nodes.c: the cluster the core schedules, built from the teams spec (the ConfigMap) and
 * the GPU nodes' Node objects. Nodes of one shape (model, GPU count, interconnect, MIG,
 * fabric, tier, price, CPU and memory) share a pool, named after that shape, so the
 * core's per-pool reasoning (tiers, misfits, prices) works as with a cluster file; the
 * leaf and spine labels become switches. A node whose GPUs are already carved (by the
 * MIG manager before gpuorch ran) gets layouts that hold the MIG devices it advertises. */
#include "kube/engine.h"

#include "core/catalog.h"
#include "core/mig.h"
#include "spec/spec.h"
#include "util/macro.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool kube_node_has_gpus(const KubeNode *n)
{
    return n->product && n->gpus > 0;
}

static int find_pool(const Cluster *c, const char *name)
{
    for (size_t i = 0; i < c->n_pools; i++)
        if (!strcmp(c->pools[i].name, name))
            return (int)i;
    return -1;
}

static int switch_of(Cluster *c, const char *name, const char *parent)
{
    int i = cluster_find_switch(c, name);
    if (i >= 0)
        return i;
    return cluster_add_switch(c, name, parent);
}

/* The leaf the node hangs off (creating it and its spine), or NO_SWITCH. */
static int leaf_of(Cluster *c, const KubeNode *n, uint32_t *ret)
{
    *ret = NO_SWITCH;
    if (!n->leaf)
        return 0;
    if (n->spine) {
        int sp = switch_of(c, n->spine, NULL);
        if (sp < 0)
            return sp;
    }
    int lf = switch_of(c, n->leaf, n->spine);
    if (lf < 0)
        return lf;
    *ret = (uint32_t)lf;
    return 0;
}

/* The interconnect of a node without the label: SXM boards of 4 or more GPUs are
 * NVSwitch (or NVLink) systems; anything else is taken as PCIe, the safe guess. */
static Interconnect guess_interconnect(const KubeNode *n)
{
    char norm[64];
    catalog_normalize_name(n->product, norm, sizeof(norm));
    bool sxm = strstr(norm, "SXM") || strstr(norm, "HBM");
    return sxm && n->gpus >= 4 ? IC_NVSWITCH : IC_PCIE;
}

static int pool_for(Cluster *c, const KubeNode *n, Buf *err)
{
    const GpuModel *cat = catalog_find(n->product);
    int model = cluster_model(c, cat ? cat->name : n->product, n->gpu_memory_mib);
    if (model < 0)
        return model;
    Pool t = {
        .tier = (Tier)n->tier,
        .model = (uint8_t)model,
        .gpus = (uint8_t)MIN(n->gpus, (uint32_t)NODE_MAX_GPUS),
        .mig = n->mig_capable && !strcmp(n->mig_strategy, "mixed"),
        .cpu_milli = n->cpu_milli,
        .memory_mib = n->memory_mib,
    };
    mig_layout_clear(&t.initial_mig); /* GPUs start whole; carve_existing finds any MIG */
    int ic = n->interconnect ? interconnect_from_name(n->interconnect) : -1;
    t.interconnect = (uint8_t)(ic >= 0 ? ic : (int)guess_interconnect(n));
    int fab = cluster_fabric(c, n->fabric);
    if (fab < 0)
        return fab;
    t.fabric = (uint16_t)fab;
    t.price_micro_usd = n->price_micro_usd > 0 ? n->price_micro_usd : 0;
    t.on_demand_micro_usd = t.price_micro_usd;
    for (size_t i = 0; i < c->n_pools; i++) {
        const Pool *p = &c->pools[i];
        if (p->tier == t.tier && p->model == t.model && p->gpus == t.gpus && p->mig == t.mig &&
            p->interconnect == t.interconnect && p->fabric == t.fabric &&
            p->price_micro_usd == t.price_micro_usd && p->cpu_milli == t.cpu_milli &&
            p->memory_mib == t.memory_mib)
            return (int)i;
    }
    char name[160];
    snprintf(name, sizeof(name), "%s-x%u-%s", c->models[model].m.name, t.gpus, tier_name(t.tier));
    for (int k = 2; find_pool(c, name) >= 0; k++)
        snprintf(name, sizeof(name), "%s-x%u-%s-%d", c->models[model].m.name, t.gpus,
                 tier_name(t.tier), k);
    t.name = name;
    int r = cluster_add_pool(c, &t);
    if (r == -E2BIG)
        buf_printf(err, "node %s: too many GPU models or GPUs in one node", n->name);
    return r;
}

/* Layouts holding the MIG devices the node advertises, on the GPUs not advertised whole:
 * the largest profiles first, each GPU filled before the next. */
static void carve_existing(Cluster *c, uint32_t node, const KubeNode *kn)
{
    const Node *n = &c->nodes[node];
    const GpuModel *m = node_model(c, n);
    if (!n->mig_allowed || !kn->n_mig || kn->alloc_gpu >= n->n_gpus)
        return;
    uint32_t left[KUBE_MAX_MIG_RESOURCES];
    int prof[KUBE_MAX_MIG_RESOURCES];
    for (size_t k = 0; k < kn->n_mig; k++) {
        left[k] = kn->mig[k].count;
        prof[k] = catalog_profile_index(m, kn->mig[k].profile);
    }
    unsigned first = kn->alloc_gpu; /* the whole ones come first, as nvidia-smi lists them */
    for (unsigned g = first; g < n->n_gpus; g++) {
        MigLayout l;
        mig_layout_clear(&l);
        for (int p = (int)m->n_profiles - 1; p >= 0; p--) {
            for (size_t k = 0; k < kn->n_mig; k++) {
                if (prof[k] != p)
                    continue;
                while (left[k]) {
                    uint8_t starts = mig_free_starts(m, &l, p);
                    if (!starts)
                        break;
                    l.profile_at[__builtin_ctz(starts)] = (uint8_t)p;
                    left[k]--;
                }
            }
        }
        if (!mig_layout_empty(&l))
            cluster_set_mig(c, node, g, &l);
    }
}

int kube_cluster_build(const char *spec_path, const KubeNode *nodes, size_t n, Cluster **ret,
                       Buf *err)
{
    Cluster *c = NULL;
    int r = spec_load_cluster_flags(spec_path, SPEC_POOLS_ELSEWHERE, &c, err);
    if (r < 0)
        return r;
    if (c->n_pools) {
        buf_printf(err,
                   "%s: on Kubernetes the pools come from the Node objects; leave 'pools' out "
                   "(node labels give tier, price, topology and fabric: docs/kubernetes.md)",
                   spec_path);
        cluster_free(c);
        return -EINVAL;
    }
    for (size_t i = 0; i < n && r >= 0; i++) {
        const KubeNode *kn = &nodes[i];
        if (!kube_node_has_gpus(kn))
            continue;
        uint32_t leaf;
        int pool = pool_for(c, kn, err);
        if (pool < 0 || (r = leaf_of(c, kn, &leaf)) < 0) {
            r = pool < 0 ? pool : r;
            break;
        }
        int node = cluster_add_node(c, (uint32_t)pool, kn->name, leaf);
        if (node < 0) {
            r = node;
            if (node == -EEXIST)
                buf_printf(err, "node %s: listed twice", kn->name);
            break;
        }
        carve_existing(c, (uint32_t)node, kn);
    }
    if (r < 0) {
        if (!err->len)
            buf_printf(err, "cannot build the cluster from the Node objects: %s", strerror(-r));
        cluster_free(c);
        return r;
    }
    *ret = c;
    return 0;
}
