/* fitset.c: the per-shape sets of nodes that fit (fitset.h). */
#include "core/fitset.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int fitset_init(FitSet *f, size_t n_nodes, size_t n_shapes)
{
    *f = (FitSet){.n_nodes = n_nodes, .n_shapes = n_shapes};
    f->words = (n_nodes + 63) / 64;
    f->sum_words = (f->words + 63) / 64;
    size_t ns = n_shapes ? n_shapes : 1;
    if (f->words && ns > SIZE_MAX / 8 / f->words)
        return -ENOMEM;
    f->bits = calloc(ns * (f->words ? f->words : 1), sizeof(*f->bits));
    f->sum = calloc(ns * (f->sum_words ? f->sum_words : 1), sizeof(*f->sum));
    f->seq = calloc(ns, sizeof(*f->seq));
    f->built = calloc(ns, sizeof(*f->built));
    f->pos_of = calloc(n_nodes ? n_nodes : 1, sizeof(*f->pos_of));
    if (!f->bits || !f->sum || !f->seq || !f->built || !f->pos_of) {
        fitset_free(f);
        return -ENOMEM;
    }
    return 0;
}

void fitset_free(FitSet *f)
{
    free(f->bits);
    free(f->sum);
    free(f->seq);
    free(f->built);
    free(f->pos_of);
    *f = (FitSet){0};
}

static void put(FitSet *f, int32_t shape, size_t pos, bool on)
{
    uint64_t *bits = f->bits + (size_t)shape * f->words;
    uint64_t *sum = f->sum + (size_t)shape * f->sum_words;
    size_t w = pos / 64;
    uint64_t bit = 1ull << (pos % 64);
    if (on) {
        bits[w] |= bit;
        sum[w / 64] |= 1ull << (w % 64);
    } else {
        bits[w] &= ~bit;
        if (!bits[w])
            sum[w / 64] &= ~(1ull << (w % 64));
    }
}

bool fitset_sync(FitSet *f, const Cluster *c, const uint32_t *order, int32_t shape, FitFn fits,
                 const void *arg)
{
    if (shape < 0 || (size_t)shape >= f->n_shapes || c->n_nodes != f->n_nodes)
        return false;
    if (f->c != c || f->order != order) {
        /* another cluster or order: every set is rebuilt on its next use */
        memset(f->built, 0, f->n_shapes * sizeof(*f->built));
        f->c = c;
        f->order = order;
        for (size_t i = 0; i < f->n_nodes; i++)
            f->pos_of[order ? order[i] : i] = (uint32_t)i;
    }
    uint64_t seq = f->seq[shape];
    if (!f->built[shape] || c->change_seq < seq || c->change_seq - seq > CLUSTER_CHANGE_RING) {
        memset(f->bits + (size_t)shape * f->words, 0, f->words * sizeof(*f->bits));
        memset(f->sum + (size_t)shape * f->sum_words, 0, f->sum_words * sizeof(*f->sum));
        for (size_t pos = 0; pos < f->n_nodes; pos++)
            if (fits(arg, c, order ? order[pos] : (uint32_t)pos))
                put(f, shape, pos, true);
        f->built[shape] = true;
    } else {
        for (uint64_t k = seq; k < c->change_seq; k++) {
            uint32_t node = c->change_ring[k % CLUSTER_CHANGE_RING];
            put(f, shape, f->pos_of[node], fits(arg, c, node));
        }
    }
    f->seq[shape] = c->change_seq;
    return true;
}

size_t fitset_next(const FitSet *f, int32_t shape, size_t pos)
{
    if (pos >= f->n_nodes)
        return SIZE_MAX;
    const uint64_t *bits = f->bits + (size_t)shape * f->words;
    const uint64_t *sum = f->sum + (size_t)shape * f->sum_words;
    size_t w = pos / 64;
    uint64_t here = bits[w] & (~0ull << (pos % 64));
    if (here)
        return w * 64 + (size_t)__builtin_ctzll(here);
    /* the next nonzero word, by the summary */
    size_t nw = w + 1;
    for (size_t sw = nw / 64; sw < f->sum_words; sw++) {
        uint64_t m = sum[sw];
        if (sw == nw / 64)
            m &= nw % 64 ? ~0ull << (nw % 64) : ~0ull;
        if (m) {
            size_t word = sw * 64 + (size_t)__builtin_ctzll(m);
            return word * 64 + (size_t)__builtin_ctzll(bits[word]);
        }
    }
    return SIZE_MAX;
}
