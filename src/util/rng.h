/* rng.h: the project's seeded random source (xoshiro256**, seeded through splitmix64).
 * Pure: the state is a value the caller owns and passes in, so the same seed gives the
 * same stream on every machine. Nothing in gpuorch draws randomness any other way. */
#pragma once

#include <stdint.h>

typedef struct Rng {
    uint64_t s[4];
} Rng;

void rng_seed(Rng *r, uint64_t seed);
uint64_t rng_next(Rng *r);
/* Uniform in [0, n), n > 0, without modulo bias. */
uint64_t rng_below(Rng *r, uint64_t n);
/* Uniform in [0, 1). */
double rng_unit(Rng *r);
/* Fisher-Yates shuffle of n elements of the given size. */
void rng_shuffle(Rng *r, void *base, uint64_t n, uint64_t size);
