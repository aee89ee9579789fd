/* mix.c: the expected request mix as a small array merged by shape. */
#include "core/mix.h"

#include <errno.h>
#include <stdlib.h>

int mix_add(Mix *m, const Request *r, double w)
{
    for (size_t i = 0; i < m->n; i++) {
        if (request_same_shape(&m->e[i].r, r)) {
            m->e[i].weight += w;
            return 0;
        }
    }
    MixEntry *e = realloc(m->e, (m->n + 1) * sizeof(*e));
    if (!e)
        return -ENOMEM;
    m->e = e;
    m->e[m->n] = (MixEntry){.r = *r, .weight = w};
    m->e[m->n].r.workers = 1;
    m->e[m->n].r.shape = -1;
    m->n++;
    return 0;
}

void mix_normalize(Mix *m)
{
    double sum = 0;
    for (size_t i = 0; i < m->n; i++)
        sum += m->e[i].weight;
    if (sum <= 0)
        return;
    for (size_t i = 0; i < m->n; i++)
        m->e[i].weight /= sum;
}

void mix_free(Mix *m)
{
    free(m->e);
    m->e = NULL;
    m->n = 0;
}

/* Thousandths of a GPU a worker asks for, on the model where it asks most. */
static unsigned gpu_share_of(const Request *r)
{
    if (r->kind == REQ_GPUS)
        return 1000;
    unsigned most = 0;
    for (unsigned k = 0; r->kind != REQ_NONE && k < CLUSTER_MAX_MODELS; k++)
        if ((r->models & (1ull << k)) && r->share_milli[k] > most)
            most = r->share_milli[k];
    return most;
}

/* Heaviest first; ties by the key, descending, as the FGD simulator orders them. */
static int typical_order(const void *a, const void *b)
{
    const MixEntry *x = a, *y = b;
    if (x->weight != y->weight)
        return x->weight > y->weight ? -1 : 1;
    const Request *p = &x->r, *q = &y->r;
    if (p->cpu_milli != q->cpu_milli)
        return p->cpu_milli > q->cpu_milli ? -1 : 1;
    unsigned pm = gpu_share_of(p), qm = gpu_share_of(q);
    if (pm != qm)
        return pm > qm ? -1 : 1;
    if (p->gpus != q->gpus)
        return p->gpus > q->gpus ? -1 : 1;
    if (p->models != q->models)
        return p->models > q->models ? -1 : 1;
    return (p->kind < q->kind) - (p->kind > q->kind);
}

int mix_typical(const Mix *all, double share, Mix *ret)
{
    Mix m = {0};
    int err = 0;
    for (size_t i = 0; i < all->n && !err; i++) {
        Request r = all->e[i].r;
        r.memory_mib = 0;
        err = mix_add(&m, &r, all->e[i].weight);
    }
    if (err < 0) {
        mix_free(&m);
        return err;
    }
    if (m.n > 1)
        qsort(m.e, m.n, sizeof(*m.e), typical_order);
    double total = 0, cum = 0;
    for (size_t i = 0; i < m.n; i++)
        total += m.e[i].weight;
    size_t keep = 0;
    /* counts in the original: allow for rounding in normalised weights */
    while (keep < m.n && cum < share * total * (1 - 1e-12))
        cum += m.e[keep++].weight;
    m.n = keep;
    mix_normalize(&m);
    *ret = m;
    return 0;
}
