/* frag.c: fragmentation of a node against the expected request mix. */
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
    ret->gpu = node_gpu_c(c, n, 0);
    ret->gm = node_model(c, n);
    for (unsigned i = 0; i < n->n_gpus; i++)
        ret->left[i] = (uint16_t)gpu_free_milli(&ret->gpu[i]);
}

unsigned frag_idle(const NodeView *v)
{
    unsigned idle = 0;
    for (unsigned i = 0; i < v->n; i++)
        idle += v->left[i];
    return idle;
}

/* Idle thousandths of GPU i a MIG request of profile p can use: the compute of the
 * instances it could still add (re-carving idle ones). */
static unsigned mig_usable(const NodeView *v, const MigLayout *l, uint8_t busy, int p)
{
    const GpuModel *m = v->gm;
    unsigned k = mig_max_addable(m, l, busy, p);
    return k * m->profiles[p].compute_slices * 1000u / m->mig_compute_slices;
}

/* Idle thousandths on a MIG GPU: the compute not in busy instances. */
static unsigned mig_idle(const NodeView *v, const MigLayout *l, uint8_t busy)
{
    const GpuModel *m = v->gm;
    return (m->mig_compute_slices - mig_compute_used(m, l, busy)) * 1000u / m->mig_compute_slices;
}

static double frag_eval(const FragMix *fm, const NodeView *v, int mig_index,
                        const MigLayout *mig_l, uint8_t mig_b)
{
    /* per-GPU idle (MIG GPUs count compute outside busy instances) */
    unsigned idle_gpu[NODE_MAX_GPUS], idle = 0;
    for (unsigned i = 0; i < v->n; i++) {
        const Gpu *g = &v->gpu[i];
        bool is_mig = (int)i == mig_index ? !mig_layout_empty(mig_l) : g->mode == GPU_MIG;
        if (is_mig) {
            const MigLayout *l = (int)i == mig_index ? mig_l : &g->mig;
            uint8_t b = (int)i == mig_index ? mig_b : g->mig_busy;
            idle_gpu[i] = b ? mig_idle(v, l, b) : 1000;
        } else {
            idle_gpu[i] = v->left[i];
        }
        idle += idle_gpu[i];
    }
    if (!idle)
        return 0;
    double f = 0;
    for (size_t k = 0; k < fm->n; k++) {
        const FragEntry *e = &fm->e[k];
        if (!e->gpus || !(e->models & (1ull << v->model))) {
            f += e->weight * idle; /* CPU-only work or the wrong model: all of it */
            continue;
        }
        if (v->cpu_left_milli < e->cpu_milli) {
            f += e->weight * idle;
            continue;
        }
        int p = v->mig_allowed ? e->mig_profile[v->model] : -1;
        unsigned need = e->whole ? 1000 : e->milli[v->model];
        if (!e->whole && p < 0 && !need) {
            f += e->weight * idle;
            continue;
        }
        unsigned fits = 0, lost = 0;
        for (unsigned i = 0; i < v->n; i++) {
            const Gpu *g = &v->gpu[i];
            bool is_mig = (int)i == mig_index ? !mig_layout_empty(mig_l) : g->mode == GPU_MIG;
            const MigLayout *l = (int)i == mig_index ? mig_l : &g->mig;
            uint8_t b = (int)i == mig_index ? mig_b : g->mig_busy;
            if (!e->whole && p >= 0 && (is_mig || idle_gpu[i] == 1000)) {
                /* a MIG request: what the instances it can still get would hold */
                MigLayout empty;
                if (!is_mig) {
                    mig_layout_clear(&empty);
                    l = &empty;
                    b = 0;
                }
                unsigned use = mig_usable(v, l, b, p);
                fits += use > 0;
                lost += idle_gpu[i] - (use < idle_gpu[i] ? use : idle_gpu[i]);
            } else if (is_mig && b) {
                lost += idle_gpu[i]; /* shares and whole GPUs cannot use a busy MIG GPU */
            } else if (idle_gpu[i] >= need) {
                fits++;
            } else {
                lost += idle_gpu[i];
            }
        }
        f += e->weight * (fits >= e->gpus ? lost : idle);
    }
    return f;
}

double frag_node(const FragMix *fm, const NodeView *v)
{
    return frag_eval(fm, v, -1, NULL, 0);
}

double frag_node_mig(const FragMix *fm, const NodeView *v, unsigned index, const MigLayout *l,
                     uint8_t busy)
{
    return frag_eval(fm, v, (int)index, l, busy);
}

int frag_cache_init(FragCache *fc, const Cluster *c, const Mix *mix)
{
    *fc = (FragCache){.n_nodes = c->n_nodes};
    int err = frag_mix_init(&fc->fm, mix);
    if (err < 0)
        return err;
    size_t n = c->n_nodes ? c->n_nodes : 1;
    fc->base = calloc(n, sizeof(*fc->base));
    fc->stamp = calloc(n, sizeof(*fc->stamp));
    if (!fc->base || !fc->stamp) {
        frag_cache_free(fc);
        return -ENOMEM;
    }
    return 0;
}

void frag_cache_free(FragCache *fc)
{
    frag_mix_free(&fc->fm);
    free(fc->base);
    free(fc->stamp);
    *fc = (FragCache){0};
}

double frag_cache_base(FragCache *fc, const Cluster *c, uint32_t node)
{
    const Node *n = &c->nodes[node];
    if (node < fc->n_nodes && fc->stamp[node] == n->version + 1)
        return fc->base[node];
    NodeView v;
    frag_view(c, n, &v);
    double f = frag_node(&fc->fm, &v);
    if (node < fc->n_nodes) {
        fc->base[node] = f;
        fc->stamp[node] = n->version + 1;
    }
    return f;
}
