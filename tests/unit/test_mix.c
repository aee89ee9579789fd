/* test_mix.c: the expected request mix (core/mix.c). mix_add merges workers of the same
 * shape (the worker count and the score-cache shape id are not part of a shape) and
 * keeps different ones apart; mix_normalize scales to 1. mix_typical is FGD's
 * GetTypicalPods (PROTOCOL.md 6.6): memory dropped, shapes ordered by weight, ties by
 * CPU, then the share of a GPU, then GPU count, all descending, and the shortest prefix
 * holding `share` of the weight kept and renormalised. The cut is tested where it lands
 * exactly on the boundary (>= keeps it short) and where a tie decides which shape is
 * in, because both change which shapes fgd and gpuorch score against. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core/cluster.h"
#include "core/job.h"
#include "core/mix.h"
#include "util/buf.h"

#include <stdlib.h>
#include <string.h>

#define EPS 1e-12

static Cluster *two_models(void)
{
    Cluster *c = cluster_new("m");
    assert_non_null(c);
    const char *models[] = {"V100", "T4"};
    for (int i = 0; i < 2; i++) {
        int mi = cluster_model(c, models[i], 0);
        assert_int_equal(mi, i);
        Pool p = {.name = (char *)models[i],
                  .nodes = 1,
                  .model = (uint8_t)mi,
                  .gpus = 8,
                  .cpu_milli = 64000,
                  .memory_mib = 256 * 1024};
        mig_layout_clear(&p.initial_mig);
        int pi = cluster_add_pool(c, &p);
        assert_true(pi >= 0);
        assert_int_equal(cluster_add_pool_nodes(c, (uint32_t)pi), 0);
    }
    return c;
}

typedef struct Shape {
    ReqKind req;
    unsigned gpus, milli;
    uint32_t cpu_milli, memory_mib;
    const char *model; /* only this model; NULL = any */
    unsigned workers;
} Shape;

static Request request(const Cluster *c, Shape s)
{
    JobSpec j;
    job_spec_init(&j);
    j.req = (uint8_t)s.req;
    j.gpus = (uint16_t)s.gpus;
    j.fraction_milli = (uint16_t)s.milli;
    j.cpu_milli = s.cpu_milli;
    j.memory_mib = s.memory_mib;
    j.workers = s.workers ? s.workers : 1;
    if (s.model) {
        j.gpu_models = calloc(1, sizeof(char *));
        assert_non_null(j.gpu_models);
        j.gpu_models[0] = strdup(s.model);
        j.n_gpu_models = 1;
    }
    Request r;
    Buf why = {0};
    int rc = request_from_job(c, &j, &r, &why);
    if (rc != 0)
        fail_msg("request_from_job: %d (%s)", rc, buf_str(&why));
    buf_free(&why);
    job_spec_free(&j);
    return r;
}

static void add(Mix *m, const Cluster *c, Shape s, double w)
{
    Request r = request(c, s);
    assert_int_equal(mix_add(m, &r, w), 0);
}

/* Index of the entry of m with r's shape (memory ignored when `no_memory`), or -1. */
static int find(const Mix *m, const Cluster *c, Shape s, bool no_memory)
{
    Request r = request(c, s);
    if (no_memory)
        r.memory_mib = 0;
    for (size_t i = 0; i < m->n; i++)
        if (request_same_shape(&m->e[i].r, &r))
            return (int)i;
    return -1;
}

static void test_add_merges(void **state)
{
    (void)state;
    Cluster *c = two_models();
    Mix m = {0};
    Request r = request(c, (Shape){.req = REQ_GPUS, .gpus = 1, .cpu_milli = 1000, .workers = 3});
    r.shape = 5;
    assert_int_equal(mix_add(&m, &r, 1.5), 0);
    /* the caller's request is not changed */
    assert_int_equal(r.workers, 3);
    assert_int_equal(r.shape, 5);
    assert_int_equal(m.n, 1);
    assert_int_equal(m.e[0].r.workers, 1);
    assert_int_equal(m.e[0].r.shape, -1);
    /* the same shape with other workers and another shape id merges */
    Request r2 = request(c, (Shape){.req = REQ_GPUS, .gpus = 1, .cpu_milli = 1000, .workers = 1});
    r2.shape = 7;
    assert_int_equal(mix_add(&m, &r2, 2.5), 0);
    assert_int_equal(m.n, 1);
    assert_float_equal(m.e[0].weight, 4.0, EPS);

    /* anything else that a node sees is a different shape */
    add(&m, c, (Shape){.req = REQ_GPUS, .gpus = 1, .cpu_milli = 2000}, 1); /* CPU */
    add(&m, c, (Shape){.req = REQ_GPUS, .gpus = 2, .cpu_milli = 1000}, 1); /* GPUs */
    add(&m, c, (Shape){.req = REQ_GPUS, .gpus = 1, .cpu_milli = 1000, .memory_mib = 8}, 1);
    add(&m, c, (Shape){.req = REQ_GPUS, .gpus = 1, .cpu_milli = 1000, .model = "T4"}, 1);
    add(&m, c, (Shape){.req = REQ_FRACTION, .milli = 500, .cpu_milli = 1000}, 1);
    add(&m, c, (Shape){.req = REQ_FRACTION, .milli = 250, .cpu_milli = 1000}, 1);
    add(&m, c, (Shape){.req = REQ_NONE, .cpu_milli = 1000}, 1);
    assert_int_equal(m.n, 8);
    /* and again: each merges into its own entry, in the order first seen */
    add(&m, c, (Shape){.req = REQ_FRACTION, .milli = 250, .cpu_milli = 1000, .workers = 4}, 0.5);
    add(&m, c, (Shape){.req = REQ_GPUS, .gpus = 1, .cpu_milli = 1000, .model = "T4"}, 2);
    assert_int_equal(m.n, 8);
    const double want[] = {4, 1, 1, 1, 3, 1, 1.5, 1};
    for (size_t i = 0; i < m.n; i++)
        assert_float_equal(m.e[i].weight, want[i], EPS);
    assert_int_equal(
        find(&m, c, (Shape){.req = REQ_FRACTION, .milli = 250, .cpu_milli = 1000}, false), 6);
    mix_free(&m);
    assert_null(m.e);
    assert_int_equal(m.n, 0);
    mix_free(&m); /* safe twice */
    cluster_free(c);
}

static void test_normalize(void **state)
{
    (void)state;
    Cluster *c = two_models();
    Mix m = {0};
    mix_normalize(&m); /* empty: nothing to do */
    assert_int_equal(m.n, 0);
    add(&m, c, (Shape){.req = REQ_GPUS, .gpus = 1}, 1);
    add(&m, c, (Shape){.req = REQ_GPUS, .gpus = 2}, 3);
    mix_normalize(&m);
    assert_float_equal(m.e[0].weight, 0.25, EPS);
    assert_float_equal(m.e[1].weight, 0.75, EPS);
    mix_normalize(&m); /* already normal */
    assert_float_equal(m.e[0].weight, 0.25, EPS);
    mix_free(&m);
    /* zero weights stay zero (no division by zero) */
    add(&m, c, (Shape){.req = REQ_GPUS, .gpus = 1}, 0);
    mix_normalize(&m);
    assert_float_equal(m.e[0].weight, 0, EPS);
    mix_free(&m);
    cluster_free(c);
}

/* mix_typical of `all` at `share`, checked against the expected shapes (in order) and
 * their renormalised weights. */
static void expect_typical(const Cluster *c, const Mix *all, double share, const Shape *want,
                           const double *weights, size_t n)
{
    Mix t = {0};
    assert_int_equal(mix_typical(all, share, &t), 0);
    if (t.n != n)
        fail_msg("share %g: kept %zu shapes, want %zu", share, t.n, n);
    double sum = 0;
    for (size_t i = 0; i < n; i++) {
        Request r = request(c, want[i]);
        r.memory_mib = 0;
        if (!request_same_shape(&t.e[i].r, &r))
            fail_msg("share %g: entry %zu is not the expected shape (cpu %u, kind %u, gpus %u)",
                     share, i, t.e[i].r.cpu_milli, t.e[i].r.kind, t.e[i].r.gpus);
        assert_float_equal(t.e[i].weight, weights[i], 1e-9);
        assert_int_equal(t.e[i].r.memory_mib, 0);
        sum += t.e[i].weight;
    }
    if (n)
        assert_float_equal(sum, 1, 1e-9);
    mix_free(&t);
}

static void test_typical_memory_and_order(void **state)
{
    (void)state;
    Cluster *c = two_models();
    Mix all = {0};
    Shape a = {.req = REQ_GPUS, .gpus = 1, .cpu_milli = 2000, .memory_mib = 1000};
    Shape a2 = {.req = REQ_GPUS, .gpus = 1, .cpu_milli = 2000, .memory_mib = 2000};
    Shape b = {.req = REQ_FRACTION, .milli = 500, .cpu_milli = 4000, .memory_mib = 500};
    Shape d = {.req = REQ_NONE, .cpu_milli = 8000};
    add(&all, c, b, 2);
    add(&all, c, a, 1);
    add(&all, c, d, 1);
    add(&all, c, a2, 4); /* differs from a only in memory: one shape without it */
    assert_int_equal(all.n, 4);
    /* a (5) first, then b (2), then d (1) */
    expect_typical(c, &all, 1.0, (Shape[]){a, b, d}, (double[]){5.0 / 8, 2.0 / 8, 1.0 / 8}, 3);
    /* the input keeps its memory */
    assert_int_equal(all.e[1].r.memory_mib, 1000);
    assert_int_equal(find(&all, c, a2, false), 3);
    mix_free(&all);

    /* empty in, empty out */
    Mix t = {.n = 99};
    assert_int_equal(mix_typical(&all, 0.95, &t), 0);
    assert_int_equal(t.n, 0);
    mix_free(&t);
    cluster_free(c);
}

static void test_typical_cut(void **state)
{
    (void)state;
    Cluster *c = two_models();
    Shape s5 = {.req = REQ_GPUS, .gpus = 1, .cpu_milli = 1000};
    Shape s3 = {.req = REQ_GPUS, .gpus = 2, .cpu_milli = 1000};
    Shape s2 = {.req = REQ_NONE, .cpu_milli = 1000};
    Mix all = {0};
    add(&all, c, s2, 2);
    add(&all, c, s5, 5);
    add(&all, c, s3, 3);
    /* 80% of 10 is 8 = 5 + 3 exactly: the prefix of two is enough */
    expect_typical(c, &all, 0.8, (Shape[]){s5, s3}, (double[]){5.0 / 8, 3.0 / 8}, 2);
    /* a hair more needs the third */
    expect_typical(c, &all, 0.81, (Shape[]){s5, s3, s2}, (double[]){0.5, 0.3, 0.2}, 3);
    /* 50% is exactly the first */
    expect_typical(c, &all, 0.5, (Shape[]){s5}, (double[]){1}, 1);
    expect_typical(c, &all, 0.51, (Shape[]){s5, s3}, (double[]){5.0 / 8, 3.0 / 8}, 2);
    /* the same with weights already normalised (0.5 + 0.3 is not exactly 0.8 in
     * binary; the cut must not depend on that) */
    mix_normalize(&all);
    expect_typical(c, &all, 0.8, (Shape[]){s5, s3}, (double[]){5.0 / 8, 3.0 / 8}, 2);
    mix_free(&all);

    /* FGD's threshold: 19 of 20 is exactly 95% */
    add(&all, c, s3, 1);
    add(&all, c, s5, 19);
    expect_typical(c, &all, FGD_TYPICAL_SHARE, (Shape[]){s5}, (double[]){1}, 1);
    mix_normalize(&all);
    expect_typical(c, &all, FGD_TYPICAL_SHARE, (Shape[]){s5}, (double[]){1}, 1);
    mix_free(&all);
    cluster_free(c);
}

static void test_typical_ties(void **state)
{
    (void)state;
    Cluster *c = two_models();
    Mix all = {0};
    /* equal weights: more CPU first */
    Shape lo = {.req = REQ_GPUS, .gpus = 1, .cpu_milli = 2000};
    Shape mid = {.req = REQ_FRACTION, .milli = 500, .cpu_milli = 4000};
    Shape hi = {.req = REQ_NONE, .cpu_milli = 8000};
    add(&all, c, lo, 1);
    add(&all, c, mid, 1);
    add(&all, c, hi, 1);
    /* half of 3 needs two of them: the two with more CPU */
    expect_typical(c, &all, 0.5, (Shape[]){hi, mid}, (double[]){0.5, 0.5}, 2);
    mix_free(&all);

    /* equal weight and CPU: more of a GPU first (whole 1000 > share 500 > none) */
    Shape w1 = {.req = REQ_GPUS, .gpus = 1, .cpu_milli = 4000};
    Shape sh = {.req = REQ_FRACTION, .milli = 500, .cpu_milli = 4000};
    Shape none = {.req = REQ_NONE, .cpu_milli = 4000};
    add(&all, c, none, 1);
    add(&all, c, sh, 1);
    add(&all, c, w1, 1);
    expect_typical(c, &all, 0.5, (Shape[]){w1, sh}, (double[]){0.5, 0.5}, 2);
    expect_typical(c, &all, 1.0 / 3, (Shape[]){w1}, (double[]){1}, 1);
    mix_free(&all);

    /* equal weight, CPU and share: more GPUs first */
    Shape g1 = {.req = REQ_GPUS, .gpus = 1, .cpu_milli = 4000};
    Shape g2 = {.req = REQ_GPUS, .gpus = 2, .cpu_milli = 4000};
    Shape g4 = {.req = REQ_GPUS, .gpus = 4, .cpu_milli = 4000};
    add(&all, c, g2, 1);
    add(&all, c, g1, 1);
    add(&all, c, g4, 1);
    expect_typical(c, &all, 0.5, (Shape[]){g4, g2}, (double[]){0.5, 0.5}, 2);
    mix_free(&all);

    /* weight first, then the tie among the lighter ones decides the last place */
    Shape heavy = {.req = REQ_GPUS, .gpus = 1, .cpu_milli = 1000};
    Shape t1 = {.req = REQ_FRACTION, .milli = 300, .cpu_milli = 1000};
    Shape t3 = {.req = REQ_FRACTION, .milli = 300, .cpu_milli = 3000};
    add(&all, c, t1, 1);
    add(&all, c, heavy, 2);
    add(&all, c, t3, 1);
    expect_typical(c, &all, 0.75, (Shape[]){heavy, t3}, (double[]){2.0 / 3, 1.0 / 3}, 2);
    mix_free(&all);
    cluster_free(c);
}

/* "More of a GPU" is the share the request asks, whatever models it allows: a half
 * GPU restricted to the cluster's second model still ranks above a quarter GPU on any
 * model. (Everything is freed before the verdict, so a failure reads clean.) */
static void test_typical_share_of_other_model(void **state)
{
    (void)state;
    Cluster *c = two_models();
    Mix all = {0}, t = {0};
    Shape quarter = {.req = REQ_FRACTION, .milli = 250, .cpu_milli = 4000};
    Shape half_t4 = {.req = REQ_FRACTION, .milli = 500, .cpu_milli = 4000, .model = "T4"};
    add(&all, c, quarter, 1);
    add(&all, c, half_t4, 1);
    Request want = request(c, half_t4);
    int rc = mix_typical(&all, 0.5, &t);
    size_t kept = t.n;
    bool half_first = kept >= 1 && request_same_shape(&t.e[0].r, &want);
    unsigned first_milli = kept >= 1 ? t.e[0].r.share_milli[1] : 0;
    mix_free(&t);
    mix_free(&all);
    cluster_free(c);
    assert_int_equal(rc, 0);
    assert_int_equal(kept, 1);
    if (!half_first)
        fail_msg("kept the %u-thousandths share; the 500-thousandths share (T4 only) asks more "
                 "of a GPU and ranks first",
                 first_milli);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_add_merges),
        cmocka_unit_test(test_normalize),
        cmocka_unit_test(test_typical_memory_and_order),
        cmocka_unit_test(test_typical_cut),
        cmocka_unit_test(test_typical_ties),
        cmocka_unit_test(test_typical_share_of_other_model),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
