/* test_utilization.c: the ring of utilisation samples (server/utilization.h): samples
 * come back oldest first, per model; a full ring drops the oldest; a window keeps
 * only the samples at or after its start; the measured columns are kept beside them,
 * and a sample without readings (NULL) clears what the slot held before. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "server/utilization.h"

static void push(Utilization *u, int64_t t, double a0, double a1)
{
    double alloc[2] = {a0, a1}, busy[2] = {a0 / 2, a1 / 2};
    utilization_push(u, t, alloc, busy, NULL);
}

static void test_empty(void **state)
{
    Utilization u;
    assert_int_equal(utilization_init(&u, 2), 0);
    size_t first = 99;
    assert_int_equal(utilization_since(&u, 0, &first), 0);
    utilization_free(&u);
}

static void test_order_and_window(void **state)
{
    Utilization u;
    assert_int_equal(utilization_init(&u, 2), 0);
    for (int i = 0; i < 5; i++)
        push(&u, 1000 + i * UTIL_PERIOD_MS, i, 10 * i);
    size_t first;
    assert_int_equal(utilization_since(&u, 0, &first), 5);
    for (size_t i = 0; i < 5; i++) {
        size_t slot = (first + i) % UTIL_SLOTS;
        assert_int_equal(u.t_ms[slot], 1000 + (int64_t)i * UTIL_PERIOD_MS);
        assert_true(u.alloc[slot * 2 + 0] == (double)i);
        assert_true(u.alloc[slot * 2 + 1] == 10.0 * i);
        assert_true(u.busy[slot * 2 + 1] == 5.0 * i);
    }
    /* a window starting at the third sample (inclusive) */
    assert_int_equal(utilization_since(&u, 1000 + 2 * UTIL_PERIOD_MS, &first), 3);
    assert_int_equal(u.t_ms[first], 1000 + 2 * UTIL_PERIOD_MS);
    /* and one just after it */
    assert_int_equal(utilization_since(&u, 1001 + 2 * UTIL_PERIOD_MS, &first), 2);
    assert_int_equal(utilization_since(&u, 1000 + 5 * UTIL_PERIOD_MS, &first), 0);
    utilization_free(&u);
}

static void test_wraps(void **state)
{
    Utilization u;
    assert_int_equal(utilization_init(&u, 2), 0);
    int n = UTIL_SLOTS + 25;
    for (int i = 0; i < n; i++)
        push(&u, (int64_t)i * UTIL_PERIOD_MS, i, 0);
    size_t first;
    assert_int_equal(utilization_since(&u, 0, &first), UTIL_SLOTS);
    /* the oldest kept is the 26th pushed, and they run on in order to the last */
    for (size_t i = 0; i < UTIL_SLOTS; i++) {
        size_t slot = (first + i) % UTIL_SLOTS;
        assert_int_equal(u.t_ms[slot], (int64_t)(25 + i) * UTIL_PERIOD_MS);
        assert_true(u.alloc[slot * 2] == (double)(25 + i));
    }
    assert_int_equal(utilization_since(&u, (int64_t)(n - 1) * UTIL_PERIOD_MS, &first), 1);
    assert_true(u.alloc[first * 2] == (double)(n - 1));
    utilization_free(&u);
}

static void test_measured(void **state)
{
    Utilization u;
    assert_int_equal(utilization_init(&u, 2), 0);
    double alloc[2] = {2, 1}, busy[2] = {2, 1};
    double m_busy[2] = {1.25, 0}, m_gpus[2] = {4, 0}, m_mem[2] = {30000, 0};
    UtilMeasured m = {.busy = m_busy, .gpus = m_gpus, .memory_used_mib = m_mem};
    /* fill the ring with readings, then wrap over a slot with a sample without any */
    for (int i = 0; i < UTIL_SLOTS; i++)
        utilization_push(&u, (int64_t)i * UTIL_PERIOD_MS, alloc, busy, &m);
    size_t first;
    assert_int_equal(utilization_since(&u, 0, &first), UTIL_SLOTS);
    assert_true(u.measured[first * 2] == 1.25);
    assert_true(u.measured_gpus[first * 2] == 4);
    assert_true(u.memory_used_mib[first * 2] == 30000);
    assert_true(u.measured_gpus[first * 2 + 1] == 0);
    utilization_push(&u, (int64_t)UTIL_SLOTS * UTIL_PERIOD_MS, alloc, busy, NULL);
    assert_int_equal(utilization_since(&u, (int64_t)UTIL_SLOTS * UTIL_PERIOD_MS, &first), 1);
    assert_true(u.alloc[first * 2] == 2);
    assert_true(u.measured[first * 2] == 0);
    assert_true(u.measured_gpus[first * 2] == 0);
    assert_true(u.memory_used_mib[first * 2] == 0);
    utilization_free(&u);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty),
        cmocka_unit_test(test_order_and_window),
        cmocka_unit_test(test_wraps),
        cmocka_unit_test(test_measured),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
