/* mix.h: building the expected request mix that fragmentation-aware policies score
 * against: one entry per distinct worker shape, weighted by how often it comes. */
#pragma once

#include "core/place.h"

/* Add weight w of r's shape (one worker; workers and shape id are ignored). */
int mix_add(Mix *m, const Request *r, double w);
/* Scale the weights to sum to 1 (no-op when empty). */
void mix_normalize(Mix *m);
void mix_free(Mix *m);

/* FGD's typical requests (Weng et al., ATC'23): the shapes of `all` merged without
 * host memory (fragmentation ignores it), by weight, heaviest first (ties: more CPU,
 * then more of a GPU, then more GPUs first), the shortest prefix holding `share` of
 * the weight, renormalised. */
int mix_typical(const Mix *all, double share, Mix *ret);

/* The share FGD's typical requests cover (its simulator's podPopularityThreshold). */
#define FGD_TYPICAL_SHARE 0.95
