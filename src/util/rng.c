/* rng.c: xoshiro256** (Blackman and Vigna), seeded with splitmix64. */
#include "util/rng.h"

#include <string.h>

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void rng_seed(Rng *r, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&x);
}

static inline uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

uint64_t rng_next(Rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

uint64_t rng_below(Rng *r, uint64_t n)
{
    /* Lemire's multiply-and-reject */
    uint64_t x = rng_next(r);
    unsigned __int128 m = (unsigned __int128)x * n;
    uint64_t l = (uint64_t)m;
    if (l < n) {
        uint64_t t = -n % n;
        while (l < t) {
            x = rng_next(r);
            m = (unsigned __int128)x * n;
            l = (uint64_t)m;
        }
    }
    return (uint64_t)(m >> 64);
}

double rng_unit(Rng *r)
{
    return (double)(rng_next(r) >> 11) * 0x1.0p-53;
}

/* Swap two elements of any size through a small buffer, a chunk at a time. */
static void swap_elems(unsigned char *a, unsigned char *b, uint64_t size)
{
    unsigned char tmp[64];
    while (size) {
        uint64_t k = size < sizeof(tmp) ? size : sizeof(tmp);
        memcpy(tmp, a, k);
        memcpy(a, b, k);
        memcpy(b, tmp, k);
        a += k, b += k, size -= k;
    }
}

void rng_shuffle(Rng *r, void *base, uint64_t n, uint64_t size)
{
    unsigned char *b = base;
    for (uint64_t i = n; i > 1; i--) {
        uint64_t j = rng_below(r, i);
        if (j != i - 1)
            swap_elems(b + (i - 1) * size, b + j * size, size);
    }
}
