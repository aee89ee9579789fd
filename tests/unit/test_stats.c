/* test_stats.c: the report statistics (sim/stats.c). Percentiles are the nearest rank
 * (p of n sorted values is the ceil(p*n)-th), so p50 of an even count is the lower
 * middle value, not an average, and p95 of 20 values is the 19th; means; the maximum;
 * the empty case; and the standard deviation over seeds is the sample one (n - 1), as
 * the FGD authors' summaries use, so our "mean ±sd" compares with theirs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "sim/sim.h"

#include <math.h>

#define EPS 1e-12

static void test_dist_small(void **state)
{
    (void)state;
    double v[] = {5, 1, 4, 2, 3};
    Dist d;
    dist_from(v, 5, &d);
    assert_int_equal(d.n, 5);
    assert_float_equal(d.mean, 3, EPS);
    assert_float_equal(d.p50, 3, EPS); /* ceil(2.5) = 3rd */
    assert_float_equal(d.p95, 5, EPS); /* ceil(4.75) = 5th */
    assert_float_equal(d.p99, 5, EPS);
    assert_float_equal(d.max, 5, EPS);
    /* dist_from sorts its input */
    for (int i = 0; i < 5; i++)
        assert_float_equal(v[i], i + 1, EPS);

    /* an even count: p50 is the lower middle value, not the average of the two */
    double w[] = {40, 10, 30, 20};
    dist_from(w, 4, &d);
    assert_float_equal(d.p50, 20, EPS);
    assert_float_equal(d.mean, 25, EPS);
    assert_float_equal(d.p95, 40, EPS);

    /* one value is every statistic */
    double one[] = {-2.5};
    dist_from(one, 1, &d);
    assert_int_equal(d.n, 1);
    assert_float_equal(d.mean, -2.5, EPS);
    assert_float_equal(d.p50, -2.5, EPS);
    assert_float_equal(d.p99, -2.5, EPS);
    assert_float_equal(d.max, -2.5, EPS);
}

static void test_dist_ranks(void **state)
{
    (void)state;
    /* 1..n in reverse: the k-th smallest is k */
    static const struct {
        size_t n;
        double p50, p95, p99;
    } cases[] = {
        {2, 1, 2, 2},       {13, 7, 13, 13},      {61, 31, 58, 61},      {3, 2, 3, 3},
        {10, 5, 10, 10},    {20, 10, 19, 20},     {40, 20, 38, 40},      {100, 50, 95, 99},
        {101, 51, 96, 100}, {200, 100, 190, 198}, {1000, 500, 950, 990},
    };
    double v[1000];
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        size_t n = cases[k].n;
        for (size_t i = 0; i < n; i++)
            v[i] = (double)(n - i);
        Dist d;
        dist_from(v, n, &d);
        assert_int_equal(d.n, n);
        assert_float_equal(d.p50, cases[k].p50, EPS);
        assert_float_equal(d.p95, cases[k].p95, EPS);
        assert_float_equal(d.p99, cases[k].p99, EPS);
        assert_float_equal(d.max, (double)n, EPS);
        assert_float_equal(d.mean, (double)(n + 1) / 2, 1e-9);
    }
}

static void test_dist_empty(void **state)
{
    (void)state;
    Dist d = {.mean = 7, .p50 = 7, .p95 = 7, .p99 = 7, .max = 7, .n = 7};
    dist_from(NULL, 0, &d);
    assert_int_equal(d.n, 0);
    assert_float_equal(d.mean, 0, 0);
    assert_float_equal(d.p50, 0, 0);
    assert_float_equal(d.p95, 0, 0);
    assert_float_equal(d.p99, 0, 0);
    assert_float_equal(d.max, 0, 0);
}

static void test_mean_and_stddev(void **state)
{
    (void)state;
    assert_float_equal(mean_of(NULL, 0), 0, 0);
    double a[] = {1, 2, 3, 4};
    assert_float_equal(mean_of(a, 4), 2.5, EPS);
    assert_float_equal(mean_of(a, 1), 1, EPS);
    /* population sd of this set is 2; the sample sd is sqrt(32 / 7) */
    double b[] = {2, 4, 4, 4, 5, 5, 7, 9};
    assert_float_equal(mean_of(b, 8), 5, EPS);
    assert_float_equal(stddev_of(b, 8), sqrt(32.0 / 7.0), EPS);
    /* two seeds: |x - y| / sqrt(2) */
    double c[] = {60, 70};
    assert_float_equal(stddev_of(c, 2), 10 / sqrt(2.0), EPS);
    /* three: 50, 60, 70 -> 10 */
    double e[] = {50, 60, 70};
    assert_float_equal(stddev_of(e, 3), 10, EPS);
    /* fewer than two values: 0, not NaN */
    assert_float_equal(stddev_of(c, 1), 0, 0);
    assert_float_equal(stddev_of(NULL, 0), 0, 0);
    double same[] = {3.25, 3.25, 3.25};
    assert_float_equal(stddev_of(same, 3), 0, EPS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dist_small),
        cmocka_unit_test(test_dist_ranks),
        cmocka_unit_test(test_dist_empty),
        cmocka_unit_test(test_mean_and_stddev),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
