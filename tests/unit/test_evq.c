/* test_evq.c: the simulator's event queue. The order of events decides every time-mode
 * figure, and repeatability rests on it being total: by time, then kind (a finish frees
 * capacity before an arrival at the same instant is scheduled), then insertion order.
 * Hand-made cases pin each tie-break; a seeded random run of pushes and pops checks
 * the heap against a sorted array, including pops interleaved with pushes. */
#include "sim/evq.h"

#include "util/rng.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static void pop_expect(EventQueue *q, int64_t t_ms, EventKind kind, uint32_t job)
{
    Event e;
    assert_int_equal(evq_pop(q, &e), 1);
    assert_int_equal(e.t_ms, t_ms);
    assert_int_equal(e.kind, kind);
    assert_int_equal(e.job, job);
}

static void test_empty(void **state)
{
    (void)state;
    EventQueue q;
    evq_init(&q);
    Event e = {.t_ms = 77, .job = 5};
    assert_null(evq_peek(&q));
    assert_int_equal(evq_pop(&q, &e), 0);
    /* nothing written when empty */
    assert_int_equal(e.t_ms, 77);
    assert_int_equal(e.job, 5);
    evq_free(&q);
    evq_free(&q); /* freeing twice is harmless: the queue is reset */
}

static void test_by_time(void **state)
{
    (void)state;
    EventQueue q;
    evq_init(&q);
    int64_t times[] = {500, -20, 300, 0, 10000, 299};
    for (size_t i = 0; i < 6; i++)
        assert_int_equal(evq_push(&q, times[i], EV_ARRIVAL, (uint32_t)i, 0), 0);
    assert_int_equal(evq_peek(&q)->t_ms, -20);
    pop_expect(&q, -20, EV_ARRIVAL, 1);
    pop_expect(&q, 0, EV_ARRIVAL, 3);
    pop_expect(&q, 299, EV_ARRIVAL, 5);
    pop_expect(&q, 300, EV_ARRIVAL, 2);
    pop_expect(&q, 500, EV_ARRIVAL, 0);
    pop_expect(&q, 10000, EV_ARRIVAL, 4);
    assert_null(evq_peek(&q));
    evq_free(&q);
}

/* At one time: finishes, then reconfigurations, arrivals, schedules, samples, whatever
 * order they were pushed in. */
static void test_kind_breaks_time_ties(void **state)
{
    (void)state;
    EventQueue q;
    evq_init(&q);
    assert_int_equal(evq_push(&q, 100, EV_SAMPLE, 1, 0), 0);
    assert_int_equal(evq_push(&q, 100, EV_ARRIVAL, 2, 0), 0);
    assert_int_equal(evq_push(&q, 100, EV_SCHEDULE, 3, 0), 0);
    assert_int_equal(evq_push(&q, 100, EV_RECONFIGURED, 4, 0), 0);
    assert_int_equal(evq_push(&q, 100, EV_FINISH, 5, 0), 0);
    assert_int_equal(evq_push(&q, 99, EV_SAMPLE, 6, 0), 0);
    pop_expect(&q, 99, EV_SAMPLE, 6); /* an earlier time wins over any kind */
    pop_expect(&q, 100, EV_FINISH, 5);
    pop_expect(&q, 100, EV_RECONFIGURED, 4);
    pop_expect(&q, 100, EV_ARRIVAL, 2);
    pop_expect(&q, 100, EV_SCHEDULE, 3);
    pop_expect(&q, 100, EV_SAMPLE, 1);
    evq_free(&q);
}

/* Same time and kind: insertion order, also when pops come in between. */
static void test_insertion_breaks_remaining_ties(void **state)
{
    (void)state;
    EventQueue q;
    evq_init(&q);
    for (uint32_t j = 0; j < 20; j++)
        assert_int_equal(evq_push(&q, 7, EV_ARRIVAL, j, 0), 0);
    for (uint32_t j = 0; j < 10; j++)
        pop_expect(&q, 7, EV_ARRIVAL, j);
    for (uint32_t j = 20; j < 25; j++)
        assert_int_equal(evq_push(&q, 7, EV_ARRIVAL, j, 0), 0);
    for (uint32_t j = 10; j < 25; j++)
        pop_expect(&q, 7, EV_ARRIVAL, j);
    assert_int_equal(q.n, 0);
    evq_free(&q);
}

/* The epoch rides along untouched (the simulator drops stale events by it). */
static void test_epoch_and_seq_kept(void **state)
{
    (void)state;
    EventQueue q;
    evq_init(&q);
    assert_int_equal(evq_push(&q, 5, EV_FINISH, 9, 41), 0);
    assert_int_equal(evq_push(&q, 1, EV_FINISH, 8, 17), 0);
    Event e;
    assert_int_equal(evq_pop(&q, &e), 1);
    assert_int_equal(e.job, 8);
    assert_int_equal(e.epoch, 17);
    assert_int_equal(e.seq, 1);
    assert_int_equal(evq_pop(&q, &e), 1);
    assert_int_equal(e.job, 9);
    assert_int_equal(e.epoch, 41);
    assert_int_equal(e.seq, 0);
    evq_free(&q);
}

typedef struct Ref {
    int64_t t_ms;
    uint32_t kind;
    uint64_t seq;
    uint32_t job;
} Ref;

static int ref_cmp(const void *a, const void *b)
{
    const Ref *x = a, *y = b;
    if (x->t_ms != y->t_ms)
        return x->t_ms < y->t_ms ? -1 : 1;
    if (x->kind != y->kind)
        return x->kind < y->kind ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Random pushes (few distinct times and kinds, so ties are common) and pops, against a
 * reference kept sorted by (time, kind, seq). */
static void test_random_against_sorted(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 40; seed++) {
        Rng rng;
        rng_seed(&rng, seed);
        EventQueue q;
        evq_init(&q);
        size_t cap = 4000, n = 0;
        Ref *ref = calloc(cap, sizeof(*ref));
        assert_non_null(ref);
        uint64_t seq = 0;
        uint32_t job = 0;
        for (int step = 0; step < 3000; step++) {
            bool push = n == 0 || rng_below(&rng, 100) < 60;
            if (push && n < cap) {
                Ref r = {.t_ms = (int64_t)rng_below(&rng, 50) - 10,
                         .kind = (uint32_t)rng_below(&rng, 5),
                         .seq = seq++,
                         .job = job++};
                assert_int_equal(evq_push(&q, r.t_ms, (EventKind)r.kind, r.job, r.seq * 3), 0);
                size_t at = n;
                while (at > 0 && ref_cmp(&ref[at - 1], &r) > 0)
                    at--;
                memmove(ref + at + 1, ref + at, (n - at) * sizeof(*ref));
                ref[at] = r;
                n++;
            } else {
                Event e;
                assert_int_equal(evq_pop(&q, &e), 1);
                assert_int_equal(e.t_ms, ref[0].t_ms);
                assert_int_equal(e.kind, ref[0].kind);
                assert_int_equal(e.job, ref[0].job);
                assert_int_equal(e.epoch, ref[0].seq * 3);
                memmove(ref, ref + 1, (n - 1) * sizeof(*ref));
                n--;
            }
            assert_int_equal(q.n, n);
            if (n) {
                assert_int_equal(evq_peek(&q)->job, ref[0].job);
            }
        }
        /* drain */
        for (size_t i = 0; i < n; i++) {
            Event e;
            assert_int_equal(evq_pop(&q, &e), 1);
            assert_int_equal(e.job, ref[i].job);
        }
        Event e;
        assert_int_equal(evq_pop(&q, &e), 0);
        free(ref);
        evq_free(&q);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty),
        cmocka_unit_test(test_by_time),
        cmocka_unit_test(test_kind_breaks_time_ties),
        cmocka_unit_test(test_insertion_breaks_remaining_ties),
        cmocka_unit_test(test_epoch_and_seq_kept),
        cmocka_unit_test(test_random_against_sorted),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
