/* frag.c: fragmentation of a node against the expected mix, FGD's and host-aware. */
#include "core/frag.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int frag_mix_init(FragMix *fm, const Mix *mix)
{
    *fm = (FragMix){0};
    if (!mix || !mix->n)
        return 0;
    fm->e = calloc(mix->n, sizeof(*fm->e));
    if (!fm->e)
        return -ENOMEM;
    for (size_t i = 0; i < mix->n; i++) {
        const Request *r = &mix->e[i].r;
        FragEntry *e = &fm->e[fm->n++];
        e->weight = mix->e[i].weight;
        e->cpu_milli = r->cpu_milli;
        e->memory_mib = r->memory_mib;
        e->models = r->models;
        memset(e->mig_profile, -1, sizeof(e->mig_profile));
        switch (r->kind) {
        case REQ_NONE:
            break;
        case REQ_GPUS:
            e->gpus = r->gpus;
            e->whole = true;
            break;
        default:
            e->gpus = 1;
            memcpy(e->milli, r->share_milli, sizeof(e->milli));
            if (r->kind != REQ_FRACTION)
                memcpy(e->mig_profile, r->mig_profile, sizeof(e->mig_profile));
            break;
        }
    }
    return 0;
}

/* Whether an empty node of n's kind could host one of e. */
static bool hosts_when_empty(const Cluster *c, const Node *n, const FragEntry *e)
{
    if (!(e->models & (1ull << n->model)) || n->cpu_milli < e->cpu_milli ||
        n->memory_mib < e->memory_mib || n->n_gpus < e->gpus)
        return false;
    if (e->whole || !e->gpus)
        return true;
    const GpuModel *m = node_model(c, n);
    int p = n->mig_allowed ? e->mig_profile[n->model] : -1;
    return p >= 0 ? mig_max_addable(m,
                                    &(MigLayout){{MIG_NONE, MIG_NONE, MIG_NONE, MIG_NONE, MIG_NONE,
                                                  MIG_NONE, MIG_NONE, MIG_NONE}},
                                    0, p) > 0
                  : e->milli[n->model] > 0;
}

void frag_mix_by_scarcity(FragMix *fm, const Cluster *c, double cap)
{
    for (size_t k = 0; k < fm->n; k++) {
        FragEntry *e = &fm->e[k];
        size_t homes = 0;
        for (size_t i = 0; i < c->n_nodes; i++)
            homes += hosts_when_empty(c, &c->nodes[i], e);
        double factor = homes ? (double)c->n_nodes / (double)homes : cap;
        e->weight *= factor < cap ? factor : cap;
    }
}

void frag_mix_free(FragMix *fm)
{
    free(fm->e);
    *fm = (FragMix){0};
}

void frag_view(const Cluster *c, const Node *n, NodeView *ret)
{
    ret->model = n->model;
    ret->n = n->n_gpus;
    ret->mig_allowed = n->mig_allowed;
    ret->cpu_left_milli = n->cpu_milli - n->cpu_used_milli;
    ret->mem_left_mib = n->memory_mib - n->memory_used_mib;
    ret->gpu = node_gpu_c(c, n, 0);
    ret->gm = node_model(c, n);
    ret->taken = 0;
    ret->mig_index = -1;
    for (unsigned i = 0; i < n->n_gpus; i++)
        ret->left[i] = (uint16_t)gpu_free_milli(&ret->gpu[i]);
}

static void take_host(NodeView *v, const Request *r)
{
    v->cpu_left_milli -= r->cpu_milli < v->cpu_left_milli ? r->cpu_milli : v->cpu_left_milli;
    v->mem_left_mib -= r->memory_mib < v->mem_left_mib ? r->memory_mib : v->mem_left_mib;
}

void frag_view_take_whole(NodeView *v, const Request *r, unsigned gpus)
{
    take_host(v, r);
    for (unsigned i = 0; i < v->n && gpus; i++)
        if (v->left[i] == 1000 && !(v->taken & (1u << i))) {
            v->left[i] = 0;
            v->taken |= (uint16_t)(1u << i);
            gpus--;
        }
}

void frag_view_take_share(NodeView *v, const Request *r, unsigned index, unsigned milli)
{
    take_host(v, r);
    if (v->gpu[index].mode == GPU_MIG) {
        /* a share on an idle MIG GPU turns MIG off there */
        v->mig_index = (int)index;
        mig_layout_clear(&v->mig_layout);
        v->mig_busy = 0;
    }
    v->left[index] = (uint16_t)(v->left[index] - (milli < v->left[index] ? milli : v->left[index]));
}

void frag_view_take_mig(NodeView *v, const Request *r, unsigned index, int p, unsigned start)
{
    take_host(v, r);
    const Gpu *g = &v->gpu[index];
    v->mig_index = (int)index;
    if (g->mode == GPU_MIG) {
        v->mig_layout = g->mig;
        v->mig_busy = g->mig_busy;
    } else {
        mig_layout_clear(&v->mig_layout);
        v->mig_busy = 0;
    }
    if (v->mig_layout.profile_at[start] != p || (v->mig_busy & (1u << start)))
        mig_place(v->gm, &v->mig_layout, v->mig_busy, p, (int)start);
    v->mig_busy |= (uint8_t)(1u << start);
    unsigned used = mig_compute_used(v->gm, &v->mig_layout, v->mig_busy);
    v->left[index] =
        (uint16_t)((v->gm->mig_compute_slices - used) * 1000u / v->gm->mig_compute_slices);
}

/* GPU i's MIG state in the view: whether it is partitioned, its layout and busy mask.
 * A GPU taken whole is not partitioned any more. */
static bool view_mig(const NodeView *v, unsigned i, const MigLayout **ret_l, uint8_t *ret_busy)
{
    if (v->taken & (1u << i)) {
        *ret_l = &v->gpu[i].mig;
        *ret_busy = 0;
        return false;
    }
    if ((int)i == v->mig_index) {
        *ret_l = &v->mig_layout;
        *ret_busy = v->mig_busy;
        return !mig_layout_empty(&v->mig_layout);
    }
    *ret_l = &v->gpu[i].mig;
    *ret_busy = v->gpu[i].mig_busy;
    return v->gpu[i].mode == GPU_MIG;
}

/* Idle thousandths of GPU i: a partitioned GPU with busy instances counts the compute
 * outside them; an idle partitioned GPU counts whole (MIG can be turned off). */
static unsigned view_idle(const NodeView *v, unsigned i, bool *ret_is_mig, uint8_t *ret_busy,
                          const MigLayout **ret_l)
{
    bool is_mig = view_mig(v, i, ret_l, ret_busy);
    *ret_is_mig = is_mig;
    if (!is_mig)
        return v->left[i];
    if (!*ret_busy)
        return 1000;
    return (v->gm->mig_compute_slices - mig_compute_used(v->gm, *ret_l, *ret_busy)) * 1000u /
           v->gm->mig_compute_slices;
}

unsigned frag_idle(const NodeView *v)
{
    unsigned idle = 0;
    for (unsigned i = 0; i < v->n; i++) {
        bool is_mig;
        uint8_t b;
        const MigLayout *l;
        idle += view_idle(v, i, &is_mig, &b, &l);
    }
    return idle;
}

unsigned frag_stranded_slices(const NodeView *v, unsigned i)
{
    const MigLayout *l;
    uint8_t busy;
    if (!v->gm->mig_compute_slices || !view_mig(v, i, &l, &busy) || !busy)
        return 0;
    MigSummary sum;
    mig_summarize(v->gm, l, busy, &sum);
    unsigned left = v->gm->mig_compute_slices - sum.compute;
    unsigned can = mig_addable(v->gm, &sum, mig_smallest_profile_for_memory(v->gm, 1));
    return left > can ? left - can : 0;
}

/* Thousandths of a GPU one instance of profile p holds. */
static unsigned profile_milli(const GpuModel *m, int p)
{
    return m->profiles[p].compute_slices * 1000u / m->mig_compute_slices;
}

double frag_node(const FragMix *fm, const NodeView *v, bool host_aware)
{
    /* per GPU, once: its idle compute, whether it is partitioned with busy instances,
     * and its MIG summary (an unpartitioned free GPU summarises as empty) */
    unsigned idle_gpu[NODE_MAX_GPUS], idle = 0;
    bool busy_mig[NODE_MAX_GPUS], carvable[NODE_MAX_GPUS];
    MigSummary sum[NODE_MAX_GPUS];
    bool any_mig_entry = false;
    for (size_t k = 0; k < fm->n && !any_mig_entry; k++)
        any_mig_entry = v->mig_allowed && !fm->e[k].whole && fm->e[k].mig_profile[v->model] >= 0;
    for (unsigned i = 0; i < v->n; i++) {
        const MigLayout *l;
        uint8_t b;
        bool is_mig;
        idle_gpu[i] = view_idle(v, i, &is_mig, &b, &l);
        busy_mig[i] = is_mig && b;
        idle += idle_gpu[i];
        carvable[i] = is_mig || idle_gpu[i] == 1000;
        if (any_mig_entry && carvable[i]) {
            if (is_mig)
                mig_summarize(v->gm, l, b, &sum[i]);
            else
                sum[i] = (MigSummary){0};
        }
    }
    if (!idle)
        return 0;
    double f = 0;
    for (size_t k = 0; k < fm->n; k++) {
        const FragEntry *e = &fm->e[k];
        /* CPU-only work, the wrong model, or no room on the host: all of it */
        if (!e->gpus || !(e->models & (1ull << v->model)) || v->cpu_left_milli < e->cpu_milli ||
            (host_aware && v->mem_left_mib < e->memory_mib)) {
            f += e->weight * idle;
            continue;
        }
        int p = v->mig_allowed && !e->whole ? e->mig_profile[v->model] : -1;
        unsigned need = e->whole ? 1000 : p >= 0 ? profile_milli(v->gm, p) : e->milli[v->model];
        if (!need) {
            f += e->weight * idle;
            continue;
        }
        unsigned fits = 0, lost = 0, slots = 0;
        for (unsigned i = 0; i < v->n; i++) {
            if (p >= 0) {
                if (!carvable[i]) {
                    lost += idle_gpu[i]; /* a shared or busy GPU cannot be partitioned */
                    continue;
                }
                /* a MIG request uses what the instances it can still get would hold */
                unsigned can = mig_addable(v->gm, &sum[i], p), use = can * need;
                fits += can > 0;
                slots += can;
                lost += idle_gpu[i] - (use < idle_gpu[i] ? use : idle_gpu[i]);
            } else if (busy_mig[i]) {
                lost += idle_gpu[i]; /* shares and whole GPUs cannot use a busy MIG GPU */
            } else if (idle_gpu[i] >= need) {
                fits++;
                slots += idle_gpu[i] / need;
            } else {
                lost += idle_gpu[i];
            }
        }
        if (fits < e->gpus) {
            f += e->weight * idle;
            continue;
        }
        f += e->weight * lost;
        if (!host_aware)
            continue;
        /* copies the GPUs could take but CPU or memory could not */
        unsigned copies = e->whole ? fits / e->gpus : slots, host = copies;
        if (e->cpu_milli && v->cpu_left_milli / e->cpu_milli < host)
            host = v->cpu_left_milli / e->cpu_milli;
        if (e->memory_mib && v->mem_left_mib / e->memory_mib < host)
            host = v->mem_left_mib / e->memory_mib;
        f += e->weight * (double)(copies - host) * e->gpus * need;
    }
    return f;
}

void frag_leftover_waste(const FragMix *fm, uint8_t model, double min_weight, uint16_t ret[1001])
{
    /* unbounded knapsack: fill[L] is the most of L the shares can fill */
    uint16_t fill[1001] = {0};
    ret[0] = 0;
    for (unsigned left = 1; left <= 1000; left++) {
        unsigned best = left == 1000 ? 1000 : 0;
        for (size_t k = 0; k < fm->n; k++) {
            const FragEntry *e = &fm->e[k];
            unsigned s = e->milli[model];
            if (e->whole || e->gpus != 1 || !s || s > left || !(e->models & (1ull << model)) ||
                e->weight < min_weight)
                continue;
            if (s + fill[left - s] > best)
                best = s + fill[left - s];
        }
        fill[left] = (uint16_t)best;
        ret[left] = (uint16_t)(left - best);
    }
}

int frag_cache_init(FragCache *fc, const Cluster *c, const Mix *mix)
{
    *fc = (FragCache){.n_nodes = c->n_nodes};
    int err = frag_mix_init(&fc->fm, mix);
    if (err < 0)
        return err;
    size_t n = c->n_nodes ? c->n_nodes : 1;
    fc->base = calloc(n, sizeof(*fc->base));
    fc->base_host = calloc(n, sizeof(*fc->base_host));
    fc->stamp = calloc(n, sizeof(*fc->stamp));
    fc->stamp_host = calloc(n, sizeof(*fc->stamp_host));
    if (!fc->base || !fc->base_host || !fc->stamp || !fc->stamp_host) {
        frag_cache_free(fc);
        return -ENOMEM;
    }
    return 0;
}

void frag_cache_free(FragCache *fc)
{
    frag_mix_free(&fc->fm);
    free(fc->base);
    free(fc->base_host);
    free(fc->stamp);
    free(fc->stamp_host);
    *fc = (FragCache){0};
}

double frag_cache_base(FragCache *fc, const Cluster *c, uint32_t node, bool host_aware)
{
    const Node *n = &c->nodes[node];
    if (node >= fc->n_nodes) {
        NodeView v;
        frag_view(c, n, &v);
        return frag_node(&fc->fm, &v, host_aware);
    }
    double *base = host_aware ? fc->base_host : fc->base;
    uint32_t *stamp = host_aware ? fc->stamp_host : fc->stamp;
    if (stamp[node] != n->version + 1) {
        NodeView v;
        frag_view(c, n, &v);
        base[node] = frag_node(&fc->fm, &v, host_aware);
        stamp[node] = n->version + 1;
    }
    return base[node];
}
