/* test_failmemo.c: the cycle's memory of failed placements (core/failmemo.c) and the
 * per-domain room counts victim planning asks before each trial (core/room.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core/failmemo.h"
#include "core/place.h"
#include "core/room.h"
#include "util/rng.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One stamp per distinct pattern, whatever came between; a pattern of another length is
 * another pattern. */
static void test_patterns(void **state)
{
    (void)state;
    FailMemo m;
    assert_int_equal(failmemo_init(&m, 4, 64), 0);
    uint8_t a[3] = {1, 0, 1}, b[3] = {0, 0, 1};
    uint64_t sa = failmemo_pattern(&m, a, 3);
    uint64_t sb = failmemo_pattern(&m, b, 3);
    assert_true(sa != sb);
    assert_int_equal(failmemo_pattern(&m, a, 3), sa);
    assert_int_equal(failmemo_pattern(&m, b, 3), sb);
    assert_true(failmemo_pattern(&m, a, 2) != sa);
    uint64_t fresh = failmemo_fresh(&m);
    assert_true(fresh != sa && fresh != sb);
    /* a new cycle forgets the patterns */
    failmemo_cycle(&m);
    assert_true(failmemo_pattern(&m, a, 3) != sa);
    failmemo_free(&m);
}

/* A failure holds for as many workers or more under its stamp, keeps the words of the
 * smallest failure, is kept apart per stamp and shape, and ends with the cycle. */
static void test_failures(void **state)
{
    (void)state;
    FailMemo m;
    assert_int_equal(failmemo_init(&m, 3, 16), 0);
    uint64_t s1 = failmemo_fresh(&m), s2 = failmemo_fresh(&m);
    assert_null(failmemo_find(&m, 0, s1, 1));
    failmemo_note(&m, 0, s1, 4, "four");
    assert_null(failmemo_find(&m, 0, s1, 3));
    assert_string_equal(failmemo_find(&m, 0, s1, 4), "four");
    assert_string_equal(failmemo_find(&m, 0, s1, 9), "four");
    failmemo_note(&m, 0, s1, 2, "two");
    assert_string_equal(failmemo_find(&m, 0, s1, 3), "two");
    failmemo_note(&m, 0, s1, 8, "eight"); /* more workers than kept: nothing new */
    assert_string_equal(failmemo_find(&m, 0, s1, 9), "two");
    assert_null(failmemo_find(&m, 0, s2, 9));
    assert_null(failmemo_find(&m, 1, s1, 9));
    /* many entries: the text pool moves as it grows, the words stay */
    uint64_t third = 0;
    for (int i = 0; i < 300; i++) {
        uint64_t st = failmemo_fresh(&m);
        third = i == 2 ? st : third;
        failmemo_note(&m, i % 3, st, 1, "a reason longer than sixteen bytes");
    }
    assert_string_equal(failmemo_find(&m, 0, s1, 3), "two");
    /* cut to the bytes kept */
    assert_string_equal(failmemo_find(&m, 2, third, 1), "a reason longer");
    /* shapes out of range are not kept */
    failmemo_note(&m, -1, s1, 1, "no");
    failmemo_note(&m, 3, s1, 1, "no");
    assert_null(failmemo_find(&m, -1, s1, 1));
    assert_null(failmemo_find(&m, 3, s1, 1));
    failmemo_cycle(&m);
    assert_null(failmemo_find(&m, 0, s1, 9));
    failmemo_free(&m);
}

/* room_enough agrees with the sums over each domain of a required scope, counted from
 * scratch, as workers come and go. */
static void test_room_counts(void **state)
{
    (void)state;
    Cluster *c = cluster_new("room");
    assert_non_null(c);
    int mi = cluster_model(c, "H100", 16384);
    assert_true(mi >= 0);
    assert_true(cluster_add_switch(c, "spine", NULL) >= 0);
    assert_true(cluster_add_switch(c, "leaf-a", "spine") >= 0);
    assert_true(cluster_add_switch(c, "leaf-b", "spine") >= 0);
    for (int l = 0; l < 2; l++) {
        Pool p = {.name = l ? "b" : "a",
                  .model = (uint8_t)mi,
                  .gpus = 8,
                  .cpu_milli = 64000,
                  .memory_mib = 512 * 1024,
                  .tier = TIER_OWNED,
                  .interconnect = IC_NVSWITCH};
        int pi = cluster_add_pool(c, &p);
        assert_true(pi >= 0);
        for (int k = 0; k < 3; k++) {
            char name[16];
            snprintf(name, sizeof(name), "%c%d", 'a' + l, k);
            assert_true(cluster_add_node(c, (uint32_t)pi, name, (uint32_t)(1 + l)) >= 0);
        }
    }
    Rng rng;
    rng_seed(&rng, 5);
    PlaceCtx ctx;
    assert_int_equal(place_ctx_init(&ctx, c, policy_find("gpuorch"), &rng, NULL, NULL), 0);
    Scope scopes[] = {SCOPE_NODE, SCOPE_LEAF, SCOPE_SPINE, SCOPE_ANY};
    for (size_t si = 0; si < 4; si++) {
        JobSpec j;
        job_spec_init(&j);
        j.req = REQ_GPUS;
        j.gpus = 4;
        j.workers = 5;
        j.scope = (uint8_t)scopes[si];
        j.scope_required = true;
        Request r;
        Buf why = {0};
        assert_int_equal(request_from_job(c, &j, &r, &why), 0);
        Room rm;
        assert_int_equal(room_init(&rm, &ctx, c, &r), 0);
        WorkerAlloc held[12];
        size_t n_held = 0;
        for (int step = 0; step < 200; step++) {
            uint32_t node = (uint32_t)rng_below(&rng, c->n_nodes);
            if (n_held && (rng_below(&rng, 2) || c->nodes[node].free_whole < 4)) {
                size_t i = (size_t)rng_below(&rng, n_held);
                cluster_release_worker(c, &held[i]);
                room_update(&rm, c, held[i].node);
                held[i] = held[--n_held];
            } else if (n_held < 12 && c->nodes[node].free_whole >= 4) {
                WorkerAlloc w = {.node = node, .n_grants = 0};
                const Node *n = &c->nodes[node];
                for (unsigned g = 0; g < n->n_gpus && w.n_grants < 4; g++)
                    if (node_gpu_c(c, n, g)->used_units == 0)
                        w.grants[w.n_grants++] = (Grant){.index = (uint8_t)g, .kind = GRANT_WHOLE};
                cluster_apply_worker(c, &w);
                room_update(&rm, c, node);
                held[n_held++] = w;
            }
            /* the sums from scratch */
            uint64_t per_leaf[2] = {0}, total = 0;
            bool node_ok = false;
            for (size_t k = 0; k < c->n_nodes; k++) {
                unsigned cap = place_node_capacity(&ctx, c, (uint32_t)k, &r, 5);
                node_ok |= cap >= 5;
                per_leaf[c->nodes[k].leaf - 1] += cap;
                total += cap;
            }
            bool want = scopes[si] == SCOPE_NODE   ? node_ok
                        : scopes[si] == SCOPE_LEAF ? per_leaf[0] >= 5 || per_leaf[1] >= 5
                                                   : total >= 5;
            assert_int_equal(room_enough(&rm), want);
        }
        while (n_held)
            cluster_release_worker(c, &held[--n_held]);
        room_free(&rm);
        buf_free(&why);
        job_spec_free(&j);
    }
    place_ctx_free(&ctx);
    cluster_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_patterns),
        cmocka_unit_test(test_failures),
        cmocka_unit_test(test_room_counts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
