/* test_metering.c: the metering rule of chargeback and budgets (server/metering.c),
 * against numbers worked out by hand. A segment holds GPU_UNITS x ms; 100800 of them
 * make a millionth of a GPU-hour (28000 x 3600000 / 1e6), and the cost is that times
 * the price per GPU-hour, both rounded down to millionths. Rounding down is what keeps
 * a pool's idle line (its capacity less its allocations) from going below zero when
 * the pool was busy all the time: checked on random busy pools.
 *
 * Idle showback per span of a node's counted capacity: the span's capacity less the
 * parts of the node's allocations inside it, worked by hand (an allocation reaching
 * past the span, one wholly outside it as while the server was down, one on another
 * node), and on random spans and allocations: idle + allocations inside = capacity,
 * exactly, and idle is never below zero. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

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

#define SEC_MS INT64_C(1000)

static MeterSpan mspan(const char *node, int64_t start_s, int64_t end_s, int64_t gpus,
                       int64_t price)
{
    return (MeterSpan){.node = node,
                       .start_ms = start_s * SEC_MS,
                       .end_ms = end_s * SEC_MS,
                       .gpus = gpus,
                       .price_micro_usd = price};
}

static void test_span_idle_hand_worked(void **state)
{
    (void)state;
    /* h100-0 (8 GPUs at $2.50) counted over [0, 10 s) and again over [20, 25 s) after
     * the server was down; h100-1 counted over [0, 10 s); spans given out of order */
    MeterSpan sp[] = {mspan("h100-0", 20, 25, 8, 2500000), mspan("h100-1", 0, 10, 8, 2500000),
                      mspan("h100-0", 0, 10, 8, 2500000)};
    for (size_t i = 0; i < 3; i++)
        sp[i].tag = i;
    metering_spans_sort(sp, 3);
    assert_string_equal(sp[0].node, "h100-0");
    assert_int_equal(sp[0].start_ms, 0);
    assert_int_equal(sp[1].tag, 0);
    assert_string_equal(sp[2].node, "h100-1");
    /* capacity of 10 s: 8 x 28000 x 10000 / 100800 = 22222.2 -> 22222 millionths of a
     * GPU-hour; x 2.5 = 55555.5 -> 55555 micro-dollars */
    Meter idle = metering_span_idle(&sp[0]);
    assert_int_equal(idle.micro_hours, 22222);
    assert_int_equal(idle.cost_micro_usd, 55555);
    /* a GPU over [2, 6 s): 28000 x 4000 / 100800 = 1111.1 -> 1111; cost 2777.7 -> 2777 */
    metering_spans_alloc(sp, 3, "h100-0", GPU_UNITS, 2 * SEC_MS, 6 * SEC_MS, 2500000);
    assert_int_equal(sp[0].alloc.micro_hours, 1111);
    assert_int_equal(sp[0].alloc.cost_micro_usd, 2777);
    idle = metering_span_idle(&sp[0]);
    assert_int_equal(idle.micro_hours, 22222 - 1111);
    assert_int_equal(idle.cost_micro_usd, 55555 - 2777);
    /* a GPU over [8, 30 s): 2 s in the first span (555.5 -> 555, 1388.8 -> 1388), none
     * over [10, 20 s) while the server was down, 5 s in the second (1388, 3472) */
    metering_spans_alloc(sp, 3, "h100-0", GPU_UNITS, 8 * SEC_MS, 30 * SEC_MS, 2500000);
    idle = metering_span_idle(&sp[0]);
    assert_int_equal(idle.micro_hours, 22222 - 1111 - 555);
    assert_int_equal(idle.cost_micro_usd, 55555 - 2777 - 1388);
    /* the second span: 8 GPUs x 5 s = 11111 (27777) less 1388 (3472) */
    idle = metering_span_idle(&sp[1]);
    assert_int_equal(idle.micro_hours, 11111 - 1388);
    assert_int_equal(idle.cost_micro_usd, 27777 - 3472);
    /* wholly outside every span, on a node never counted, of nothing: no effect */
    metering_spans_alloc(sp, 3, "h100-0", GPU_UNITS, 12 * SEC_MS, 19 * SEC_MS, 2500000);
    metering_spans_alloc(sp, 3, "a100-0", GPU_UNITS, 0, 10 * SEC_MS, 2500000);
    metering_spans_alloc(sp, 3, NULL, GPU_UNITS, 0, 10 * SEC_MS, 2500000);
    metering_spans_alloc(sp, 3, "h100-0", GPU_UNITS, 5 * SEC_MS, 5 * SEC_MS, 2500000);
    assert_int_equal(metering_span_idle(&sp[0]).micro_hours, 22222 - 1111 - 555);
    assert_int_equal(metering_span_idle(&sp[1]).micro_hours, 11111 - 1388);
    assert_int_equal(metering_span_idle(&sp[2]).micro_hours, 22222);
    /* a span used all the time has no idle; a free pool's idle costs nothing */
    MeterSpan full = mspan("l4-0", 0, 10, 1, 800000);
    metering_spans_alloc(&full, 1, "l4-0", GPU_UNITS, 0, 10 * SEC_MS, 800000);
    idle = metering_span_idle(&full);
    assert_int_equal(idle.micro_hours + idle.cost_micro_usd, 0);
    MeterSpan owned = mspan("a100-0", 0, 3600, 8, 0);
    idle = metering_span_idle(&owned);
    assert_int_equal(idle.micro_hours, 8000000);
    assert_int_equal(idle.cost_micro_usd, 0);
}

/* Random nodes with random spans (gaps between them as while a server was down or an
 * agent was silent) and random allocations that never hold more than a node has but
 * start and end anywhere, in and out of the spans: each span's idle plus what was
 * allocated inside it is its capacity, exactly. */
static void test_span_idle_adds_up(void **state)
{
    (void)state;
    static const char *const nodes[] = {"a", "b", "c"};
    static const int64_t shapes[] = {GPU_UNITS, GPU_UNITS / 7, GPU_UNITS / 2, GPU_UNITS / 4};
    Rng rng;
    rng_seed(&rng, 11);
    for (int round = 0; round < 200; round++) {
        MeterSpan sp[3 * 8];
        size_t n = 0;
        int64_t price = (int64_t)(rng_next(&rng) % 10000000);
        for (size_t k = 0; k < 3; k++) {
            int64_t t = (int64_t)(rng_next(&rng) % HOUR_MS);
            for (int i = 0; i < 8; i++) {
                int64_t len = 1 + (int64_t)(rng_next(&rng) % HOUR_MS);
                sp[n] = (MeterSpan){.node = nodes[k],
                                    .start_ms = t,
                                    .end_ms = t + len,
                                    .gpus = 4,
                                    .price_micro_usd = price,
                                    .tag = n};
                n++;
                t += len + (int64_t)(rng_next(&rng) % HOUR_MS);
            }
        }
        /* shuffled: the sort must not rely on the order given */
        for (size_t i = n - 1; i > 0; i--) {
            size_t j = rng_next(&rng) % (i + 1);
            MeterSpan x = sp[i];
            sp[i] = sp[j];
            sp[j] = x;
        }
        metering_spans_sort(sp, n);
        Meter want[3 * 8] = {{0, 0}};
        /* each node's 4 GPUs in lanes of one shape, each lane cut into random pieces
         * from before the first span to past the last */
        for (size_t k = 0; k < 3; k++)
            for (int gpu = 0; gpu < 4; gpu++) {
                int64_t units = shapes[rng_next(&rng) % 4];
                for (int64_t lane = 0; lane < GPU_UNITS / units; lane++) {
                    int64_t t = 0, end = 20 * HOUR_MS;
                    while (t < end) {
                        int64_t len = 1 + (int64_t)(rng_next(&rng) % HOUR_MS);
                        if (rng_next(&rng) % 3) {
                            metering_spans_alloc(sp, n, nodes[k], units, t, t + len, price);
                            for (size_t i = 0; i < n; i++) {
                                int64_t a = t > sp[i].start_ms ? t : sp[i].start_ms;
                                int64_t b = t + len < sp[i].end_ms ? t + len : sp[i].end_ms;
                                if (!strcmp(sp[i].node, nodes[k]) && b > a) {
                                    Meter m = metering_of(units, b - a, price);
                                    want[sp[i].tag].micro_hours += m.micro_hours;
                                    want[sp[i].tag].cost_micro_usd += m.cost_micro_usd;
                                }
                            }
                        }
                        t += len;
                    }
                }
            }
        for (size_t i = 0; i < n; i++) {
            /* the binary search found every overlap the slow walk found */
            assert_int_equal(sp[i].alloc.micro_hours, want[sp[i].tag].micro_hours);
            assert_int_equal(sp[i].alloc.cost_micro_usd, want[sp[i].tag].cost_micro_usd);
            Meter cap =
                metering_capacity(sp[i].gpus, sp[i].end_ms - sp[i].start_ms, sp[i].price_micro_usd);
            assert_true(sp[i].alloc.micro_hours <= cap.micro_hours);
            assert_true(sp[i].alloc.cost_micro_usd <= cap.cost_micro_usd);
            Meter idle = metering_span_idle(&sp[i]);
            assert_int_equal(idle.micro_hours + sp[i].alloc.micro_hours, cap.micro_hours);
            assert_int_equal(idle.cost_micro_usd + sp[i].alloc.cost_micro_usd, cap.cost_micro_usd);
        }
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
        cmocka_unit_test(test_span_idle_hand_worked),
        cmocka_unit_test(test_span_idle_adds_up),
        cmocka_unit_test(test_month_start),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
