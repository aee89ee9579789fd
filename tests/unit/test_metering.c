/* test_metering.c: the metering rule of chargeback and budgets (server/metering.c),
 * against numbers worked out by hand. A segment holds GPU_UNITS x ms; 100800 of them
 * make a millionth of a GPU-hour (28000 x 3600000 / 1e6), and the cost is that times
 * the price per GPU-hour, both rounded down to millionths. Rounding down is what keeps
 * a pool's idle line (its capacity less its allocations) from going below zero when
 * the pool was busy all the time: checked on random busy pools. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "server/metering.h"
#include "util/rng.h"

#define HOUR_MS INT64_C(3600000)

static void test_hand_worked(void **state)
{
    (void)state;
    /* two whole GPUs for an hour at $2.50: 2 GPU-hours, $5 */
    Meter m = metering_of(2 * GPU_UNITS, HOUR_MS, 2500000);
    assert_int_equal(m.micro_hours, 2000000);
    assert_int_equal(m.cost_micro_usd, 5000000);
    /* a 1g slice of a 7-slice GPU (4000 units) for 1 s at $1.10: 4000 x 1000 / 100800
     * = 39.68 -> 39 millionths of a GPU-hour; x 1.1 = 43.65 -> 43 micro-dollars */
    m = metering_of(GPU_UNITS / 7, 1000, 1100000);
    assert_int_equal(m.micro_hours, 39);
    assert_int_equal(m.cost_micro_usd, 43);
    /* nothing held, or no time, or a negative span: nothing */
    m = metering_of(0, HOUR_MS, 2500000);
    assert_int_equal(m.micro_hours + m.cost_micro_usd, 0);
    m = metering_of(GPU_UNITS, -5, 2500000);
    assert_int_equal(m.micro_hours + m.cost_micro_usd, 0);
    /* free capacity has hours and no cost */
    m = metering_capacity(8, HOUR_MS, 0);
    assert_int_equal(m.micro_hours, 8000000);
    assert_int_equal(m.cost_micro_usd, 0);
    /* a year of 100000 GPUs at $98.32 (units x ms x price needs 128 bits):
     * 876,000,000 GPU-hours, $86,128,320,000 */
    m = metering_capacity(100000, 365 * 24 * HOUR_MS, 98320000);
    assert_int_equal(m.micro_hours, INT64_C(876000000) * 1000000);
    assert_int_equal(m.cost_micro_usd, INT64_C(86128320000) * 1000000);
    /* the store's GPU-equivalents round back to units */
    assert_int_equal(metering_units((double)(GPU_UNITS / 7) / GPU_UNITS), GPU_UNITS / 7);
    assert_int_equal(metering_units(2.5), 70000);
    assert_int_equal(metering_units(0), 0);
}

/* A pool of 8 GPUs kept full by random back-to-back segments of random shapes: the
 * segments' metering never adds up past the capacity's, and falls short of it by less
 * than a millionth per segment. */
static void test_busy_pool_never_over_capacity(void **state)
{
    (void)state;
    Rng rng;
    rng_seed(&rng, 7);
    /* shapes that tile a GPU: whole, 1g of 7 slices, half and quarter shares */
    static const int64_t shapes[] = {GPU_UNITS, GPU_UNITS / 7, GPU_UNITS / 2, GPU_UNITS / 4};
    for (int round = 0; round < 200; round++) {
        int64_t window = 1 + (int64_t)(rng_next(&rng) % (7 * 24 * HOUR_MS));
        int64_t price = (int64_t)(rng_next(&rng) % 10000000);
        Meter used = {0, 0};
        int64_t segments = 0;
        /* each GPU split into lanes of one shape, each lane cut into random spans */
        for (int gpu = 0; gpu < 8; gpu++) {
            int64_t units = shapes[rng_next(&rng) % 4];
            for (int64_t lane = 0; lane < GPU_UNITS / units; lane++) {
                int64_t t = 0;
                while (t < window) {
                    int64_t span = 1 + (int64_t)(rng_next(&rng) % (window / 3 + 1));
                    span = span < window - t ? span : window - t;
                    Meter m = metering_of(units, span, price);
                    used.micro_hours += m.micro_hours;
                    used.cost_micro_usd += m.cost_micro_usd;
                    segments++;
                    t += span;
                }
            }
        }
        Meter cap = metering_capacity(8, window, price);
        assert_true(used.micro_hours <= cap.micro_hours);
        assert_true(used.cost_micro_usd <= cap.cost_micro_usd);
        assert_true(cap.micro_hours - used.micro_hours <= segments);
        assert_true(cap.cost_micro_usd - used.cost_micro_usd <= segments);
    }
}

static void test_month_start(void **state)
{
    (void)state;
    /* 2026-11-30 12:02:03.456 UTC -> 2026-11-01 00:00 UTC */
    assert_int_equal(metering_month_start_ms(INT64_C(1796040123456)), INT64_C(1793491200000));
    /* the first millisecond of a month is its own start; the one before is not */
    assert_int_equal(metering_month_start_ms(INT64_C(1793491200000)), INT64_C(1793491200000));
    assert_int_equal(metering_month_start_ms(INT64_C(1793491199999)), INT64_C(1790812800000));
    /* a leap February: 2028-02-29 23:59 -> 2028-02-01 */
    assert_int_equal(metering_month_start_ms(INT64_C(1835481540000)), INT64_C(1832976000000));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hand_worked),
        cmocka_unit_test(test_busy_pool_never_over_capacity),
        cmocka_unit_test(test_month_start),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
