/* fitset.h: for each request shape, the nodes that can take one worker of it now, kept
 * as a bitmap in node order and caught up from the cluster's change log (cluster.h)
 * when asked. A placement decision then visits the few nodes that could take the job,
 * in the order a full scan would (so ties and seeded draws land as before), and skips
 * stretches where nothing fits by a summary bit per bitmap word: its cost grows with
 * the nodes that fit and the nodes changed since the shape was last placed, and only by
 * a word per 4,096 nodes with the cluster. */
#pragma once

#include "core/cluster.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct FitSet {
    size_t n_nodes, n_shapes;
    size_t words, sum_words; /* per shape: bitmap words, summary words (a bit per word) */
    uint64_t *bits, *sum;
    uint64_t *seq; /* per shape: the change count it caught up to */
    bool *built;   /* per shape */
    const Cluster *c;
    const uint32_t *order; /* node order (NULL: index order); pos_of inverts it */
    uint32_t *pos_of;
} FitSet;

int fitset_init(FitSet *f, size_t n_nodes, size_t n_shapes);
void fitset_free(FitSet *f);

/* Whether node can take one worker of the shape now (the placer's capacity test). */
typedef bool (*FitFn)(const void *arg, const Cluster *c, uint32_t node);

/* Bring shape's set up to date with c (nodes in order; NULL: index order). false when the
 * set cannot serve (no such shape, or the cluster grew): scan every node then. */
bool fitset_sync(FitSet *f, const Cluster *c, const uint32_t *order, int32_t shape, FitFn fits,
                 const void *arg);

/* The first position at or after pos whose node can take the shape, or SIZE_MAX. */
size_t fitset_next(const FitSet *f, int32_t shape, size_t pos);
