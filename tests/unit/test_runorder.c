/* test_runorder.c: running jobs kept in order across cycles (core/runorder.c) give
 * exactly the sort by (key, id), whatever came and went between two updates: jobs
 * starting and ending, keys that change (an estimate revised, a job started again),
 * a job's memory reused for another id. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core/runorder.h"
#include "core/sched.h"
#include "util/rng.h"

#include <stdlib.h>
#include <string.h>

#define JOBS 300

static int64_t key_of(const SchedJob *j)
{
    return j->estimate_ms;
}

static bool even(const SchedJob *j)
{
    return j->estimate_ms % 2 == 0;
}

static int by_key(const void *a, const void *b)
{
    const SchedJob *x = *(SchedJob *const *)a, *y = *(SchedJob *const *)b;
    if (x->estimate_ms != y->estimate_ms)
        return x->estimate_ms < y->estimate_ms ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

static void check(bool with_filter)
{
    SchedJob *jobs = calloc(JOBS, sizeof(*jobs));
    SchedJob **running = calloc(JOBS, sizeof(*running));
    SchedJob **want = calloc(JOBS, sizeof(*want));
    SchedJob **ptr_of = calloc(JOBS + 64, sizeof(*ptr_of));
    uint64_t *in_cycle = calloc(JOBS + 64, sizeof(*in_cycle));
    bool *on = calloc(JOBS, sizeof(*on));
    assert_non_null(jobs);
    Rng rng;
    rng_seed(&rng, with_filter ? 2 : 1);
    for (size_t i = 0; i < JOBS; i++)
        jobs[i] = (SchedJob){.id = (uint32_t)i, .estimate_ms = (int64_t)rng_below(&rng, 50)};
    RunOrder o = {0};
    for (uint64_t cycle = 1; cycle <= 200; cycle++) {
        /* some start, some end, some keys move; now and then a slot gets a new id */
        for (size_t i = 0; i < JOBS; i++) {
            uint64_t u = rng_below(&rng, 100);
            if (u < 5)
                on[i] = !on[i];
            else if (u < 8)
                jobs[i].estimate_ms = (int64_t)rng_below(&rng, 50);
            else if (u == 8)
                jobs[i].id = (uint32_t)(JOBS + rng_below(&rng, 64));
        }
        size_t n = 0, nw = 0;
        for (size_t i = 0; i < JOBS; i++)
            if (on[i]) {
                bool taken = false;
                for (size_t k = 0; k < n && !taken; k++)
                    taken = running[k]->id == jobs[i].id;
                if (taken)
                    continue; /* ids are unique among the running */
                running[n++] = &jobs[i];
                in_cycle[jobs[i].id] = cycle;
                ptr_of[jobs[i].id] = &jobs[i];
                if (!with_filter || even(&jobs[i]))
                    want[nw++] = &jobs[i];
            }
        /* shuffled, as a caller's list may be */
        rng_shuffle(&rng, running, n, sizeof(*running));
        assert_int_equal(runorder_update(&o, running, n, in_cycle, cycle, ptr_of, JOBS + 64, key_of,
                                         with_filter ? even : NULL),
                         0);
        qsort(want, nw, sizeof(*want), by_key);
        assert_int_equal(o.n, nw);
        for (size_t k = 0; k < nw; k++) {
            assert_ptr_equal(o.e[k].j, want[k]);
            assert_int_equal(o.e[k].key, want[k]->estimate_ms);
        }
    }
    runorder_free(&o);
    free(jobs);
    free(running);
    free(want);
    free(ptr_of);
    free(in_cycle);
    free(on);
}

static void test_same_as_sort(void **state)
{
    (void)state;
    check(false);
}

static void test_same_as_sort_filtered(void **state)
{
    (void)state;
    check(true);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_as_sort),
        cmocka_unit_test(test_same_as_sort_filtered),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
