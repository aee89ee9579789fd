/* test_rng.c: the seeded random source (util/rng.c). The simulator and the random
 * placement policy must give the same results for the same seed on every machine,
 * so the stream is checked against an independent xoshiro256** written here from the
 * published algorithm; rng_below must stay in range and be unbiased even where a
 * plain modulo would be badly biased; a shuffle must be a permutation. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "util/rng.h"

#include <stdbool.h>
#include <string.h>

/* Reference: splitmix64 seeding, xoshiro256** 1.0 (Blackman and Vigna). */
static uint64_t ref_rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

static void ref_seed(uint64_t s[4], uint64_t seed)
{
    for (int i = 0; i < 4; i++) {
        seed += 0x9e3779b97f4a7c15ull;
        uint64_t z = seed;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        s[i] = z ^ (z >> 31);
    }
}

static uint64_t ref_next(uint64_t s[4])
{
    uint64_t result = ref_rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = ref_rotl(s[3], 45);
    return result;
}

static void test_stream_matches_reference(void **state)
{
    uint64_t seeds[] = {0, 1, 42, 0xdeadbeefcafef00dull, UINT64_MAX};
    for (size_t k = 0; k < sizeof(seeds) / sizeof(seeds[0]); k++) {
        Rng r;
        uint64_t s[4];
        rng_seed(&r, seeds[k]);
        ref_seed(s, seeds[k]);
        for (int i = 0; i < 1000; i++)
            assert_int_equal(rng_next(&r), ref_next(s));
    }
    /* splitmix64 of seed 0 is a published constant */
    uint64_t s[4];
    ref_seed(s, 0);
    assert_int_equal(s[0], 0xe220a8397b1dcdafull);
}

static void test_same_seed_same_stream(void **state)
{
    Rng a, b, c;
    rng_seed(&a, 12345);
    rng_seed(&b, 12345);
    rng_seed(&c, 12346);
    int differ = 0;
    for (int i = 0; i < 100; i++) {
        uint64_t x = rng_next(&a);
        assert_int_equal(x, rng_next(&b));
        differ += x != rng_next(&c);
    }
    assert_true(differ > 95);
    /* the derived draws follow the same stream */
    rng_seed(&a, 9);
    rng_seed(&b, 9);
    for (int i = 0; i < 100; i++) {
        assert_int_equal(rng_below(&a, 1000), rng_below(&b, 1000));
        double u = rng_unit(&a);
        assert_true(u == rng_unit(&b));
        assert_true(u >= 0.0 && u < 1.0);
    }
}

static void test_below_range(void **state)
{
    Rng r;
    rng_seed(&r, 3);
    for (int i = 0; i < 1000; i++)
        assert_int_equal(rng_below(&r, 1), 0);
    uint64_t ns[] = {2, 3, 7, 10, 1000, 1ull << 32, (1ull << 63) + 1, UINT64_MAX};
    for (size_t k = 0; k < sizeof(ns) / sizeof(ns[0]); k++)
        for (int i = 0; i < 10000; i++)
            assert_true(rng_below(&r, ns[k]) < ns[k]);
    /* every value of a small range comes up */
    int seen[7] = {0};
    for (int i = 0; i < 1000; i++)
        seen[rng_below(&r, 7)]++;
    for (int i = 0; i < 7; i++)
        assert_true(seen[i] > 0);
}

static void test_below_uniform(void **state)
{
    Rng r;
    rng_seed(&r, 2024);
    enum { N = 10, DRAWS = 200000 };
    unsigned count[N] = {0};
    for (int i = 0; i < DRAWS; i++)
        count[rng_below(&r, N)]++;
    /* chi-square with 9 degrees of freedom: 27.9 is the 0.1% critical value */
    double chi = 0;
    for (int i = 0; i < N; i++) {
        double d = (double)count[i] - DRAWS / N;
        chi += d * d / (DRAWS / N);
    }
    assert_true(chi < 27.9);

    /* n = 3 * 2^62: x % n would put half the draws below 2^62 instead of a third */
    uint64_t n = 3ull << 62;
    unsigned low = 0;
    for (int i = 0; i < 30000; i++)
        low += rng_below(&r, n) < (1ull << 62);
    assert_true(low > 9500 && low < 10500);
    /* and multiply-shift without its rejection step would hit every third value twice */
    unsigned third = 0;
    for (int i = 0; i < 30000; i++)
        third += rng_below(&r, n) % 3 == 0;
    assert_true(third > 9500 && third < 10500);

    /* rng_unit: the mean of many draws is close to 1/2 */
    double sum = 0;
    for (int i = 0; i < 100000; i++)
        sum += rng_unit(&r);
    assert_true(sum / 100000 > 0.49 && sum / 100000 < 0.51);
}

static void test_shuffle_is_permutation(void **state)
{
    Rng r;
    rng_seed(&r, 77);
    enum { N = 50 };
    unsigned moved_total = 0;
    unsigned first_pos[N] = {0};
    for (int round = 0; round < 2000; round++) {
        uint32_t a[N];
        for (uint32_t i = 0; i < N; i++)
            a[i] = i;
        rng_shuffle(&r, a, N, sizeof(a[0]));
        bool seen[N] = {false};
        for (uint32_t i = 0; i < N; i++) {
            assert_true(a[i] < N);
            assert_false(seen[a[i]]);
            seen[a[i]] = true;
            moved_total += a[i] != i;
        }
        first_pos[a[0]]++;
    }
    /* it shuffles: most elements move, and every element reaches the front */
    assert_true(moved_total > 2000 * N * 9 / 10);
    for (int i = 0; i < N; i++)
        assert_true(first_pos[i] > 10);

    /* elements larger than a word, and the degenerate sizes */
    struct Big {
        uint64_t id;
        char pad[40];
    } big[20];
    for (int i = 0; i < 20; i++) {
        big[i].id = (uint64_t)i;
        memset(big[i].pad, 'a' + i, sizeof(big[i].pad));
    }
    rng_shuffle(&r, big, 20, sizeof(big[0]));
    bool seen[20] = {false};
    for (int i = 0; i < 20; i++) {
        assert_true(big[i].id < 20);
        assert_false(seen[big[i].id]);
        seen[big[i].id] = true;
        for (size_t j = 0; j < sizeof(big[i].pad); j++)
            assert_int_equal(big[i].pad[j], 'a' + (int)big[i].id);
    }
    uint32_t one = 5;
    rng_shuffle(&r, &one, 1, sizeof(one));
    assert_int_equal(one, 5);
    rng_shuffle(&r, NULL, 0, sizeof(one));

    /* same seed, same order */
    Rng a, b;
    rng_seed(&a, 5);
    rng_seed(&b, 5);
    uint32_t x[N], y[N];
    for (uint32_t i = 0; i < N; i++)
        x[i] = y[i] = i;
    rng_shuffle(&a, x, N, sizeof(x[0]));
    rng_shuffle(&b, y, N, sizeof(y[0]));
    assert_memory_equal(x, y, sizeof(x));
}

/* rng.h promises a shuffle of elements of any size; one larger than the copy buffer
 * inside rng.c must be shuffled too, not silently left in place. */
static void test_shuffle_large_elements(void **state)
{
    struct Row {
        uint32_t id;
        char payload[124];
    } rows[16];
    for (uint32_t i = 0; i < 16; i++) {
        rows[i].id = i;
        memset(rows[i].payload, (int)i, sizeof(rows[i].payload));
    }
    Rng r;
    rng_seed(&r, 11);
    rng_shuffle(&r, rows, 16, sizeof(rows[0]));
    unsigned moved = 0;
    bool seen[16] = {false};
    for (uint32_t i = 0; i < 16; i++) {
        assert_true(rows[i].id < 16);
        assert_false(seen[rows[i].id]);
        seen[rows[i].id] = true;
        assert_int_equal(rows[i].payload[123], (char)rows[i].id);
        moved += rows[i].id != i;
    }
    if (moved == 0)
        fail_msg("16 elements of %zu bytes were left in their order", sizeof(rows[0]));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stream_matches_reference),
        cmocka_unit_test(test_same_seed_same_stream),
        cmocka_unit_test(test_below_range),
        cmocka_unit_test(test_below_uniform),
        cmocka_unit_test(test_shuffle_is_permutation),
        cmocka_unit_test(test_shuffle_large_elements),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
