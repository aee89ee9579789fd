/* test_policies.c: the scores of the policy table (core/policy.c, peers.c, fgd.c), one
 * node state at a time, against values computed by hand from the FGD paper's
 * definitions (../shared/traces/fgd-results/PROTOCOL.md 6.2-6.6): best-fit's and
 * dot-product's normalised CPU/GPU terms (here by the cluster's largest node), the
 * three cases of gpu-packing, gpu-clustering's base plus shape bonus, k8s-default's
 * least-allocated and balanced CPU and memory terms and its random ties, and FGD's
 * sigmoid of the fragmentation drop with its choice of GPU for a share. The original scores are
 * integers and their ties decide placements, so wherever a definition truncates or divides in
 * integers, at least one expected value here changes if it rounded or divided in reals instead.
 * Also the table itself: names, lookup and flags, and the seeded random policy. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core/cluster.h"
#include "core/job.h"
#include "core/mix.h"
#include "core/place.h"
#include "core/policies.h"
#include "util/buf.h"
#include "util/rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define GIB 1024u

static void add(Cluster *c, const char *name, unsigned gpus, uint32_t cpu, uint32_t mem_gib)
{
    int mi = cluster_model(c, "V100", 0);
    assert_true(mi >= 0);
    Pool p = {.name = (char *)name,
              .nodes = 1,
              .model = (uint8_t)mi,
              .gpus = (uint8_t)gpus,
              .interconnect = IC_NVSWITCH,
              .cpu_milli = cpu,
              .memory_mib = mem_gib * GIB};
    mig_layout_clear(&p.initial_mig);
    int pi = cluster_add_pool(c, &p);
    assert_true(pi >= 0);
    assert_int_equal(cluster_add_pool_nodes(c, (uint32_t)pi), 0);
}

static void apply_whole(Cluster *c, uint32_t node, unsigned first, unsigned n, uint32_t cpu,
                        uint32_t mem)
{
    WorkerAlloc w = {.node = node, .cpu_milli = cpu, .memory_mib = mem, .n_grants = (uint8_t)n};
    for (unsigned i = 0; i < n; i++)
        w.grants[i] = (Grant){.index = (uint8_t)(first + i), .kind = GRANT_WHOLE};
    cluster_apply_worker(c, &w);
}

static void apply_share(Cluster *c, uint32_t node, unsigned index, unsigned milli, uint32_t cpu)
{
    WorkerAlloc w = {.node = node, .cpu_milli = cpu, .n_grants = 1};
    w.grants[0] = (Grant){.index = (uint8_t)index, .kind = GRANT_SHARE, .milli = (uint16_t)milli};
    cluster_apply_worker(c, &w);
}

static void apply_cpu(Cluster *c, uint32_t node, uint32_t cpu)
{
    WorkerAlloc w = {.node = node, .cpu_milli = cpu};
    cluster_apply_worker(c, &w);
}

typedef struct Shape {
    ReqKind req;
    unsigned gpus, milli;
    uint32_t cpu_milli, memory_mib;
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
    Request r;
    Buf why = {0};
    int rc = request_from_job(c, &j, &r, &why);
    if (rc != 0)
        fail_msg("request_from_job: %d (%s)", rc, buf_str(&why));
    buf_free(&why);
    job_spec_free(&j);
    return r;
}

static const Shape WHOLE1 = {.req = REQ_GPUS, .gpus = 1, .cpu_milli = 8000};

/* The score `policy` gives node for one worker of s. */
static double score(const char *policy, Cluster *c, const Mix *mix, uint32_t node, Shape s)
{
    const Policy *p = policy_find(policy);
    assert_non_null(p);
    Rng rng;
    rng_seed(&rng, 1);
    PlaceCtx ctx;
    assert_int_equal(place_ctx_init(&ctx, c, p, &rng, NULL, mix), 0);
    Request r = request(c, s);
    double v = p->score(&ctx, c, node, &r);
    place_ctx_free(&ctx);
    return v;
}

/* The shared scene (largest node: 64 cores, 8 GPUs):
 *  node 0 "used", 8 GPUs, 64 cores, 512 GiB: GPU0 whole (8 cores, 128 GiB), GPU1 a
 *    0.3 share, GPU2 a 0.01 share (4 cores each): free 0, 700, 990, 5 x 1000 = 6.69
 *    GPUs, 48 cores; workers of shape "1 GPU" and "share";
 *  node 1 "idle4", 4 GPUs, 32 cores, 128 GiB, idle;
 *  node 2 "cpu8", 8 GPUs, 64 cores, a CPU-only worker of 40 cores;
 *  node 3 "idle2", 2 GPUs, 16 cores; node 4 "idle1", 1 GPU, 8 cores;
 *  node 5 "pair", 8 GPUs, 64 cores, one worker of 2 whole GPUs. */
static Cluster *scene(void)
{
    Cluster *c = cluster_new("p");
    assert_non_null(c);
    add(c, "used", 8, 64000, 512);
    add(c, "idle4", 4, 32000, 128);
    add(c, "cpu8", 8, 64000, 512);
    add(c, "idle2", 2, 16000, 128);
    add(c, "idle1", 1, 8000, 64);
    add(c, "pair", 8, 64000, 512);
    apply_whole(c, 0, 0, 1, 8000, 128 * GIB);
    apply_share(c, 0, 1, 300, 4000);
    apply_share(c, 0, 2, 10, 4000);
    apply_cpu(c, 2, 40000);
    apply_whole(c, 5, 0, 2, 1000, 0);
    assert_true(cluster_consistent(c));
    return c;
}

static void test_table(void **state)
{
    (void)state;
    const char *names[] = {"gpuorch",     "first-fit",   "best-fit",       "random", "k8s-default",
                           "dot-product", "gpu-packing", "gpu-clustering", "fgd"};
    size_t n = sizeof(names) / sizeof(names[0]);
    assert_int_equal(policy_count(), n);
    for (size_t i = 0; i < n; i++) {
        const Policy *p = policy_at(i);
        assert_non_null(p);
        assert_ptr_equal(policy_find(p->name), p);
        bool listed = false;
        for (size_t k = 0; k < n; k++)
            listed |= strcmp(names[k], p->name) == 0;
        if (!listed)
            fail_msg("unexpected policy %s", p->name);
        assert_non_null(p->score);
        assert_non_null(p->about);
    }
    assert_null(policy_at(n));
    assert_ptr_equal(policy_find("Best-FIT"), policy_find("best-fit"));
    assert_ptr_equal(policy_find("FGD"), policy_find("fgd"));
    assert_null(policy_find("bestfit"));
    assert_null(policy_find(""));
    assert_int_equal(policy_find("k8s-default")->flags,
                     POLICY_INDIVISIBLE | POLICY_NO_GANG | POLICY_RANDOM_TIES);
    assert_int_equal(policy_find("random")->flags, POLICY_UNCACHED);
    /* every other policy takes slices, places gangs whole and is cacheable */
    for (size_t i = 0; i < n; i++) {
        const Policy *p = policy_at(i);
        if (strcmp(p->name, "k8s-default") && strcmp(p->name, "random"))
            assert_int_equal(p->flags, 0);
    }
}

static void test_first_fit_and_best_fit(void **state)
{
    (void)state;
    Cluster *c = scene();
    assert_float_equal(score("first-fit", c, NULL, 0, WHOLE1), 0, 0);
    assert_float_equal(score("first-fit", c, NULL, 3, WHOLE1), 0, 0);
    /* node 0, 1 GPU and 8 cores: CPU left 40/64, GPUs 5.69/8:
     * s = 0.3125 + 0.355625; 100 (1 - s) = 33.19 */
    assert_float_equal(score("best-fit", c, NULL, 0, WHOLE1), 33, 0);
    /* node 1 (normalised by the largest node, not its own size), 0.3 GPU and 2 cores:
     * s = 0.5 x 30/64 + 0.5 x 3.7/8 = 0.465625: 53.44 */
    assert_float_equal(score("best-fit", c, NULL, 1,
                             (Shape){.req = REQ_FRACTION, .milli = 300, .cpu_milli = 2000}),
                       53, 0);
    /* node 2, CPU-only 16 cores: s = 0.5 x 8/64 + 0.5 x 8/8 = 0.5625: 43.75 */
    assert_float_equal(score("best-fit", c, NULL, 2, (Shape){.req = REQ_NONE, .cpu_milli = 16000}),
                       43, 0);
    /* node 4 (1 GPU, 8 cores), its only GPU and all its CPU: s = 0 */
    assert_float_equal(score("best-fit", c, NULL, 4, WHOLE1), 100, 0);
    cluster_free(c);
}

static void test_dot_product(void **state)
{
    (void)state;
    Cluster *c = scene();
    /* node 0, 2 GPUs and 16 cores: free (48/64, 6690/8000), asked (16/64, 2000/8000):
     * dot = 0.1875 + 0.2090625; 100 (1 - dot / 2) = 80.17 */
    assert_float_equal(
        score("dot-product", c, NULL, 0, (Shape){.req = REQ_GPUS, .gpus = 2, .cpu_milli = 16000}),
        80, 0);
    /* node 1, half a GPU and 4 cores: (0.5, 0.5) . (0.0625, 0.0625) = 0.0625: 96.875 */
    assert_float_equal(score("dot-product", c, NULL, 1,
                             (Shape){.req = REQ_FRACTION, .milli = 500, .cpu_milli = 4000}),
                       96, 0);
    /* less CPU left than asked: 0 */
    assert_float_equal(
        score("dot-product", c, NULL, 2, (Shape){.req = REQ_NONE, .cpu_milli = 32000}), 0, 0);
    /* a fuller node scores higher for the same ask (smaller dot product) */
    assert_true(score("dot-product", c, NULL, 0, WHOLE1) >
                score("dot-product", c, NULL, 5, WHOLE1));
    cluster_free(c);
}

static void test_gpu_packing(void **state)
{
    (void)state;
    Cluster *c = scene();
    /* no GPU asked: 0 everywhere */
    assert_float_equal(score("gpu-packing", c, NULL, 0, (Shape){.req = REQ_NONE, .cpu_milli = 1}),
                       0, 0);
    /* idle nodes: max(33 - F, F), CPU use ignored */
    assert_float_equal(score("gpu-packing", c, NULL, 2, WHOLE1), 25, 0);
    assert_float_equal(score("gpu-packing", c, NULL, 1, WHOLE1), 29, 0);
    assert_float_equal(score("gpu-packing", c, NULL, 3, WHOLE1), 31, 0);
    assert_float_equal(score("gpu-packing", c, NULL, 4, WHOLE1), 32, 0);
    /* free GPUs on a used node: max(50 - u, 33) */
    assert_float_equal(score("gpu-packing", c, NULL, 0, WHOLE1), 49, 0);
    assert_float_equal(score("gpu-packing", c, NULL, 0, (Shape){.req = REQ_GPUS, .gpus = 2}), 48,
                       0);
    assert_float_equal(score("gpu-packing", c, NULL, 0, (Shape){.req = REQ_GPUS, .gpus = 5}), 45,
                       0);
    /* a share too big for either shared GPU takes a free one: u = 1 */
    assert_float_equal(score("gpu-packing", c, NULL, 0, (Shape){.req = REQ_FRACTION, .milli = 995}),
                       49, 0);
    /* only shared GPUs: the least free that fits. 0.5 -> GPU1 (700):
     * 100 - floor(700 x 100 / 1000) / 10 = 100 - 7 */
    assert_float_equal(score("gpu-packing", c, NULL, 0, (Shape){.req = REQ_FRACTION, .milli = 500}),
                       93, 0);
    /* 0.8 -> GPU2 (990): 100 - 99 / 10 in integers = 91 (not 90.1) */
    assert_float_equal(score("gpu-packing", c, NULL, 0, (Shape){.req = REQ_FRACTION, .milli = 800}),
                       91, 0);
    /* node 5 has GPUs in use but none shared: u = 1 for one GPU */
    assert_float_equal(score("gpu-packing", c, NULL, 5, WHOLE1), 49, 0);
    cluster_free(c);
}

static void test_gpu_clustering(void **state)
{
    (void)state;
    Cluster *c = scene();
    /* no GPU asked: 0 */
    assert_float_equal(
        score("gpu-clustering", c, NULL, 5, (Shape){.req = REQ_NONE, .cpu_milli = 1}), 0, 0);
    /* node 0: base = 25 x (8000 - 6690) / 8000 = 4 (integers); its shapes are {1 GPU,
     * share}: the pod's tag with others: +50 */
    assert_float_equal(score("gpu-clustering", c, NULL, 0, WHOLE1), 54, 0);
    assert_float_equal(
        score("gpu-clustering", c, NULL, 0, (Shape){.req = REQ_FRACTION, .milli = 200}), 54, 0);
    /* only other tags: base */
    assert_float_equal(score("gpu-clustering", c, NULL, 0, (Shape){.req = REQ_GPUS, .gpus = 2}), 4,
                       0);
    /* node 5: base = 25 x 2000 / 8000 = 6; exactly the pod's tag: +75 */
    assert_float_equal(score("gpu-clustering", c, NULL, 5, (Shape){.req = REQ_GPUS, .gpus = 2}), 81,
                       0);
    assert_float_equal(score("gpu-clustering", c, NULL, 5, WHOLE1), 6, 0);
    /* idle nodes: empty set, +25; base from the GPUs they lack against the largest */
    assert_float_equal(score("gpu-clustering", c, NULL, 2, WHOLE1), 25, 0);
    assert_float_equal(score("gpu-clustering", c, NULL, 1, WHOLE1), 12 + 25, 0);
    assert_float_equal(score("gpu-clustering", c, NULL, 3, WHOLE1), 18 + 25, 0);
    cluster_free(c);
}

static void test_k8s_default(void **state)
{
    (void)state;
    Cluster *c = scene();
    Shape s = {.req = REQ_GPUS, .gpus = 1, .cpu_milli = 8000, .memory_mib = 64 * GIB};
    /* LeastAllocated over CPU and memory, each (free after placing) x 100 / capacity in
     * integers, then their mean in integers; BalancedAllocation (1 - |cpu share - memory
     * share| / 2) x 100, truncated; the sum.
     * node 0: CPU 24/64 -> 40 x 100 / 64 = 62, memory 192/512 -> 62: 62; shares equal:
     * 100; 162 */
    assert_float_equal(score("k8s-default", c, NULL, 0, s), 162, 0);
    /* node 1: CPU 8/32 -> 75, memory 64/128 -> 50: (75 + 50) / 2 = 62; shares 0.25 and
     * 0.5: (1 - 0.125) x 100 = 87; 149 (both halves truncated) */
    assert_float_equal(score("k8s-default", c, NULL, 1, s), 149, 0);
    /* node 2: CPU 48/64 -> 25, memory 64/512 -> 87: 56; shares 0.75, 0.125: 68; 124 */
    assert_float_equal(score("k8s-default", c, NULL, 2, s), 124, 0);
    /* node 5: CPU 9/64 -> 85, memory 87: 86; shares 0.140625, 0.125: 99; 185 */
    assert_float_equal(score("k8s-default", c, NULL, 5, s), 185, 0);
    /* the default resource list has no nvidia.com/gpu: GPUs taken without CPU or memory
     * leave the score as it was */
    apply_whole(c, 5, 2, 4, 0, 0);
    assert_float_equal(score("k8s-default", c, NULL, 5, s), 185, 0);
    cluster_free(c);
}

/* Equal k8s-default scores go to a node drawn from the seeded stream, as kube's
 * selectHost picks among its best; other policies keep the first. */
static void test_k8s_default_ties(void **state)
{
    (void)state;
    Cluster *c = cluster_new("t");
    assert_non_null(c);
    const char *pools[] = {"a", "b", "c", "d"};
    for (int i = 0; i < 4; i++)
        add(c, pools[i], 8, 64000, 512);
    Request r = request(c, (Shape){.req = REQ_GPUS, .gpus = 1, .cpu_milli = 8000});
    unsigned seen = 0, first_fit_seen = 0;
    for (uint64_t seed = 1; seed <= 32; seed++) {
        const char *names[] = {"k8s-default", "first-fit"};
        for (int k = 0; k < 2; k++) {
            Rng rng, again;
            rng_seed(&rng, seed);
            rng_seed(&again, seed);
            PlaceCtx ctx;
            Placement pl = {0}, pl2 = {0};
            Buf why = {0};
            assert_int_equal(place_ctx_init(&ctx, c, policy_find(names[k]), &rng, NULL, NULL), 0);
            assert_int_equal(place_job(&ctx, c, &r, &pl, &why), 1);
            place_ctx_free(&ctx);
            place_release(c, &pl);
            assert_int_equal(place_ctx_init(&ctx, c, policy_find(names[k]), &again, NULL, NULL), 0);
            assert_int_equal(place_job(&ctx, c, &r, &pl2, &why), 1);
            place_ctx_free(&ctx);
            place_release(c, &pl2);
            assert_int_equal(pl.workers[0].node, pl2.workers[0].node); /* same seed, same node */
            if (k == 0)
                seen |= 1u << pl.workers[0].node;
            else
                first_fit_seen |= 1u << pl.workers[0].node;
            placement_free(&pl);
            placement_free(&pl2);
            buf_free(&why);
        }
    }
    assert_int_equal(seen, 0xf);         /* every tied node is drawn at some seed */
    assert_int_equal(first_fit_seen, 1); /* first-fit always takes node 0 */
    cluster_free(c);
}

/* ---- fgd ---- */

static void mix_of(Mix *m, const Cluster *c, Shape s, double w)
{
    Request r = request(c, s);
    assert_int_equal(mix_add(m, &r, w), 0);
}

static void test_fgd(void **state)
{
    (void)state;
    Cluster *c = cluster_new("f");
    assert_non_null(c);
    add(c, "a", 4, 64000, 256);
    add(c, "b", 2, 64000, 256);
    apply_share(c, 0, 0, 300, 0); /* 700 free */
    apply_share(c, 0, 2, 400, 0); /* 600 free */
    Mix mix = {0};
    mix_of(&mix, c, (Shape){.req = REQ_GPUS, .gpus = 1, .cpu_milli = 1000}, 1);

    /* node 0 against "1 GPU": GPU0 and GPU2 are fragments, Fb = 1300 */
    Shape half = {.req = REQ_FRACTION, .milli = 500, .cpu_milli = 1000};
    /* a half on GPU0 or GPU2 leaves 800: drop 500, 100 sigma(0.5) = 62.2; on GPU1 or
     * GPU3 1800: 37.8. The best is 62, first reached at GPU0 */
    assert_float_equal(score("fgd", c, &mix, 0, half), 62, 0);
    const Policy *p = policy_find("fgd");
    Rng rng;
    rng_seed(&rng, 1);
    PlaceCtx ctx;
    assert_int_equal(place_ctx_init(&ctx, c, p, &rng, NULL, &mix), 0);
    Request r = request(c, half);
    SlicePick pick = {.index = 99};
    p->pick_slice(&ctx, c, 0, &r, &pick);
    assert_int_equal(pick.index, 0); /* not GPU2, the best fit */
    assert_false(pick.mig);
    place_ctx_free(&ctx);
    /* whole GPU: takes GPU1, fragments unchanged: 50 */
    assert_float_equal(score("fgd", c, &mix, 0, (Shape){.req = REQ_GPUS, .gpus = 1}), 50, 0);
    /* CPU-only work that leaves less CPU than the mix asks: every idle GPU becomes a
     * fragment: drop 1300 - 3300, 100 sigma(-2) = 11.9 */
    assert_float_equal(score("fgd", c, &mix, 0, (Shape){.req = REQ_NONE, .cpu_milli = 63500}), 11,
                       0);
    /* node 1 idle: a half makes 500 a fragment: 100 sigma(-0.5) = 37.75 -> 37 */
    assert_float_equal(score("fgd", c, &mix, 1, half), 37, 0);

    /* fgd scores against the typical shapes only: a 2-GPU shape at 4% is not one of
     * them. Counted, it would make node 1's second GPU a fragment once the first is
     * taken (0.04 x 1000 more: 49); typical shapes only: 50 */
    Mix mix2 = {0};
    mix_of(&mix2, c, (Shape){.req = REQ_GPUS, .gpus = 1, .cpu_milli = 1000}, 0.96);
    mix_of(&mix2, c, (Shape){.req = REQ_GPUS, .gpus = 2, .cpu_milli = 1000}, 0.04);
    assert_float_equal(score("fgd", c, &mix2, 1, (Shape){.req = REQ_GPUS, .gpus = 1}), 50, 0);
    mix_free(&mix2);

    /* no mix: nothing is a fragment, every placement scores 50 */
    assert_float_equal(score("fgd", c, NULL, 0, half), 50, 0);
    mix_free(&mix);
    cluster_free(c);
}

/* An idle partitioned GPU (MIG on, no instance in use) is a whole idle GPU to FGD
 * (the placer turns MIG off to give it whole), so two 2-GPU H100 nodes, one plain and
 * one whose GPUs hold an idle 7g.80gb each, score the same for one whole GPU against
 * a mix of 2-GPU work: either way the other GPU is left alone, a fragment of 1000,
 * 100 sigma(-1) = 26.9. (Freed before the verdict, so a failure reads clean.) */
static void test_fgd_idle_mig_gpus(void **state)
{
    (void)state;
    Cluster *c = cluster_new("m");
    assert_non_null(c);
    int mi = cluster_model(c, "H100", 0);
    assert_true(mi >= 0);
    for (int k = 0; k < 2; k++) {
        Pool p = {.name = k ? "mig" : "plain",
                  .nodes = 1,
                  .model = (uint8_t)mi,
                  .gpus = 2,
                  .mig = true,
                  .cpu_milli = 64000,
                  .memory_mib = 256 * GIB};
        mig_layout_clear(&p.initial_mig);
        if (k)
            p.initial_mig.profile_at[0] =
                (uint8_t)catalog_profile_index(&c->models[mi].m, "7g.80gb");
        int pi = cluster_add_pool(c, &p);
        assert_true(pi >= 0);
        assert_int_equal(cluster_add_pool_nodes(c, (uint32_t)pi), 0);
    }
    assert_int_equal(node_gpu_c(c, &c->nodes[1], 0)->mode, GPU_MIG);
    Mix mix = {0};
    mix_of(&mix, c, (Shape){.req = REQ_GPUS, .gpus = 2, .cpu_milli = 1000}, 1);
    Shape one = {.req = REQ_GPUS, .gpus = 1, .cpu_milli = 1000};
    double plain = score("fgd", c, &mix, 0, one), mig = score("fgd", c, &mix, 1, one);
    mix_free(&mix);
    cluster_free(c);
    assert_float_equal(plain, 26, 0);
    if (mig != 26)
        fail_msg("fgd scores a whole GPU from idle partitioned GPUs %g, want 26 (as on plain "
                 "GPUs): the GPU taken is still counted idle",
                 mig);
}

/* ---- random ---- */

static void test_random(void **state)
{
    (void)state;
    Cluster *c = cluster_new("r");
    assert_non_null(c);
    for (int i = 0; i < 4; i++)
        add(c, i == 0 ? "n0" : i == 1 ? "n1" : i == 2 ? "n2" : "n3", 4, 64000, 256);
    apply_share(c, 0, 0, 300, 0); /* GPU0 700 free */
    apply_share(c, 0, 1, 800, 0); /* GPU1 200 free */
    const Policy *p = policy_find("random");
    Request half = request(c, (Shape){.req = REQ_FRACTION, .milli = 500});

    /* the score is the seeded stream's next unit draw */
    Rng rng, twin;
    rng_seed(&rng, 42);
    rng_seed(&twin, 42);
    PlaceCtx ctx;
    assert_int_equal(place_ctx_init(&ctx, c, p, &rng, NULL, NULL), 0);
    for (uint32_t i = 0; i < 4; i++) {
        double s = p->score(&ctx, c, i, &half);
        assert_float_equal(s, rng_unit(&twin), 0);
        assert_true(s >= 0 && s < 1);
    }
    /* a share goes to a GPU it fits, each of them for some seed, the same for a seed */
    bool seen[4] = {false};
    for (uint64_t seed = 1; seed <= 64; seed++) {
        SlicePick a = {.index = 99}, b = {.index = 99};
        rng_seed(&rng, seed);
        p->pick_slice(&ctx, c, 0, &half, &a);
        rng_seed(&rng, seed);
        p->pick_slice(&ctx, c, 0, &half, &b);
        assert_int_equal(a.index, b.index);
        assert_true(a.index < 4);
        assert_int_not_equal(a.index, 1); /* 200 free: does not fit */
        seen[a.index] = true;
    }
    assert_true(seen[0] && seen[2] && seen[3]);
    place_ctx_free(&ctx);

    /* placing: the same seed picks the same node; over seeds, more than one node */
    Request one = request(c, (Shape){.req = REQ_GPUS, .gpus = 1});
    bool node_seen[4] = {false};
    for (uint64_t seed = 1; seed <= 16; seed++) {
        uint32_t got[2];
        for (int k = 0; k < 2; k++) {
            Cluster *d = cluster_clone(c);
            assert_non_null(d);
            rng_seed(&rng, seed);
            assert_int_equal(place_ctx_init(&ctx, d, p, &rng, NULL, NULL), 0);
            Placement pl = {0};
            Buf why = {0};
            assert_int_equal(place_job(&ctx, d, &one, &pl, &why), 1);
            got[k] = pl.workers[0].node;
            placement_free(&pl);
            buf_free(&why);
            place_ctx_free(&ctx);
            cluster_free(d);
        }
        assert_int_equal(got[0], got[1]);
        node_seen[got[0]] = true;
    }
    int distinct = node_seen[0] + node_seen[1] + node_seen[2] + node_seen[3];
    assert_true(distinct >= 2);
    cluster_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_first_fit_and_best_fit),
        cmocka_unit_test(test_dot_product),
        cmocka_unit_test(test_gpu_packing),
        cmocka_unit_test(test_gpu_clustering),
        cmocka_unit_test(test_k8s_default),
        cmocka_unit_test(test_k8s_default_ties),
        cmocka_unit_test(test_fgd),
        cmocka_unit_test(test_fgd_idle_mig_gpus),
        cmocka_unit_test(test_random),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
