/* test_gpuorch.c: what the gpuorch policy (core/gpuorch.c) does with a job, seen from
 * outside through place_job: the behaviours its header promises, each in a scene
 * where the node order (which breaks ties) points the other way, so the test passes
 * only because of the policy. Scarcity: small CPU-hungry work stays off the only node
 * kind that can host a rare large shape while other nodes fit it. MIG: a second slice
 * goes onto the GPU already partitioned rather than cutting a whole GPU elsewhere, and
 * an idle instance of the right profile is reused rather than re-carved, and a job
 * that asks by memory takes the compute no other instance could use. Topology: a
 * multi-GPU worker prefers NVSwitch and a single GPU PCIe when fragmentation is equal,
 * but not over fragmentation. With no mix at all it still places everything that
 * fits. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core/cluster.h"
#include "core/job.h"
#include "core/mix.h"
#include "core/place.h"
#include "util/buf.h"
#include "util/rng.h"

#include <stdlib.h>
#include <string.h>

#define GIB 1024u

typedef struct PoolArgs {
    const char *name, *model;
    unsigned gpus, nodes;
    bool mig;
    Interconnect ic;
    uint32_t cpu_milli;
} PoolArgs;

static void add(Cluster *c, PoolArgs a)
{
    int mi = cluster_model(c, a.model, 16384);
    assert_true(mi >= 0);
    Pool p = {
        .name = (char *)a.name,
        .nodes = a.nodes ? a.nodes : 1,
        .model = (uint8_t)mi,
        .gpus = (uint8_t)a.gpus,
        .interconnect = (uint8_t)a.ic,
        .mig = a.mig,
        .cpu_milli = a.cpu_milli ? a.cpu_milli : 64000,
        .memory_mib = 512 * GIB,
    };
    mig_layout_clear(&p.initial_mig);
    int pi = cluster_add_pool(c, &p);
    assert_true(pi >= 0);
    assert_int_equal(cluster_add_pool_nodes(c, (uint32_t)pi), 0);
}

typedef struct Shape {
    ReqKind req;
    unsigned gpus, milli;
    const char *mig;
    uint64_t gpu_memory_mib;
    uint32_t cpu_milli;
} Shape;

static Request request(const Cluster *c, Shape s)
{
    JobSpec j;
    job_spec_init(&j);
    j.req = (uint8_t)s.req;
    j.gpus = (uint16_t)s.gpus;
    j.fraction_milli = (uint16_t)s.milli;
    j.mig = s.mig ? strdup(s.mig) : NULL;
    j.gpu_memory_mib = s.gpu_memory_mib;
    j.cpu_milli = s.cpu_milli;
    j.memory_mib = 4096;
    Request r;
    Buf why = {0};
    int rc = request_from_job(c, &j, &r, &why);
    if (rc != 0)
        fail_msg("request_from_job: %d (%s)", rc, buf_str(&why));
    buf_free(&why);
    job_spec_free(&j);
    return r;
}

static void mix_of(Mix *m, const Cluster *c, Shape s, double w)
{
    Request r = request(c, s);
    assert_int_equal(mix_add(m, &r, w), 0);
}

/* Place one job of s with `policy`; returns place_job's result, the placement in pl. */
static int place(const char *policy, Cluster *c, const Mix *mix, const uint32_t *order, Shape s,
                 Placement *pl)
{
    Rng rng;
    rng_seed(&rng, 7);
    PlaceCtx ctx;
    assert_int_equal(place_ctx_init(&ctx, c, policy_find(policy), &rng, order, mix), 0);
    Request r = request(c, s);
    Buf why = {0};
    int rc = place_job(&ctx, c, &r, pl, &why);
    buf_free(&why);
    place_ctx_free(&ctx);
    assert_true(rc == 0 || rc == 1);
    assert_true(cluster_consistent(c));
    return rc;
}

/* The node the job's only worker went to. */
static uint32_t place_node(const char *policy, Cluster *c, const Mix *mix, const uint32_t *order,
                           Shape s)
{
    Placement pl = {0};
    assert_int_equal(place(policy, c, mix, order, s, &pl), 1);
    assert_int_equal(pl.n_workers, 1);
    uint32_t node = pl.workers[0].node;
    placement_free(&pl);
    return node;
}

/* ---- scarcity ---- */

/* Node 0 "fat": 160 cores, the only home of the rare 8-GPU, 128-core shape. Nodes 1-7
 * "std": 68 cores. The mix: 97% one GPU and 4 cores, 3% the large shape. A CPU-only
 * job of 40 cores strands one single-GPU copy on a std node (28 cores left: 7 of 8),
 * 0.97 GPU of weight; on fat it shuts the large shape out, 8 GPUs x 3%, which is less
 * until scarcity weighs that shape by the 8 nodes over its 1 home. Both are equal on
 * FGD's typical shapes (the large one is not one), so the node order would pick fat. */
static Cluster *scarcity_scene(Mix *mix)
{
    Cluster *c = cluster_new("s");
    assert_non_null(c);
    add(c, (PoolArgs){.name = "fat", .model = "V100", .gpus = 8, .cpu_milli = 160000});
    add(c, (PoolArgs){.name = "std", .model = "V100", .gpus = 8, .nodes = 7, .cpu_milli = 68000});
    *mix = (Mix){0};
    mix_of(mix, c, (Shape){.req = REQ_GPUS, .gpus = 1, .cpu_milli = 4000}, 0.97);
    mix_of(mix, c, (Shape){.req = REQ_GPUS, .gpus = 8, .cpu_milli = 128000}, 0.03);
    return c;
}

static void drop(Cluster *c, Mix *mix)
{
    mix_free(mix);
    cluster_free(c);
}

static void test_scarcity(void **state)
{
    (void)state;
    Mix mix;
    Cluster *c = scarcity_scene(&mix);
    Shape hungry = {.req = REQ_NONE, .cpu_milli = 40000};
    /* the scene is a tie for FGD: it takes the first node */
    Cluster *d = cluster_clone(c);
    assert_non_null(d);
    assert_int_equal(place_node("fgd", d, &mix, NULL, hungry), 0);
    cluster_free(d);
    /* gpuorch: the seven std nodes (one job each), and only then fat */
    for (uint32_t k = 1; k <= 7; k++)
        assert_int_equal(place_node("gpuorch", c, &mix, NULL, hungry), k);
    assert_int_equal(place_node("gpuorch", c, &mix, NULL, hungry), 0);
    drop(c, &mix);

    /* the same for a one-GPU job with 40 cores */
    c = scarcity_scene(&mix);
    Shape gpu_hungry = {.req = REQ_GPUS, .gpus = 1, .cpu_milli = 40000};
    assert_int_not_equal(place_node("gpuorch", c, &mix, NULL, gpu_hungry), 0);
    drop(c, &mix);
}

/* ---- MIG ---- */

static int profile(const Cluster *c, uint32_t node, const char *name)
{
    int p = catalog_profile_index(node_model(c, &c->nodes[node]), name);
    assert_true(p >= 0);
    return p;
}

static Shape slice10 = {.req = REQ_MIG, .mig = "1g.10gb", .cpu_milli = 1000};

static Cluster *h100_nodes(unsigned nodes, unsigned gpus, Mix *mix)
{
    Cluster *c = cluster_new("h");
    assert_non_null(c);
    add(c, (PoolArgs){.name = "h", .model = "H100", .gpus = gpus, .nodes = nodes, .mig = true});
    *mix = (Mix){0};
    mix_of(mix, c, (Shape){.req = REQ_GPUS, .gpus = 1, .cpu_milli = 1000}, 0.6);
    mix_of(mix, c, slice10, 0.4);
    return c;
}

static void test_second_slice_same_gpu(void **state)
{
    (void)state;
    Mix mix;
    Cluster *c = h100_nodes(2, 2, &mix);
    Placement a = {0}, b = {0};
    assert_int_equal(place("gpuorch", c, &mix, NULL, slice10, &a), 1);
    assert_int_equal(place("gpuorch", c, &mix, NULL, slice10, &b), 1);
    const WorkerAlloc *wa = &a.workers[0], *wb = &b.workers[0];
    assert_int_equal(wa->grants[0].kind, GRANT_MIG);
    assert_int_equal(wb->grants[0].kind, GRANT_MIG);
    assert_int_equal(wb->node, wa->node);
    assert_int_equal(wb->grants[0].index, wa->grants[0].index);
    assert_int_not_equal(wb->grants[0].mig_start, wa->grants[0].mig_start);
    /* the only layout change is on that GPU */
    for (size_t i = 0; i < b.n_changes; i++) {
        assert_int_equal(b.changes[i].node, wa->node);
        assert_int_equal(b.changes[i].index, wa->grants[0].index);
    }
    /* no other GPU was partitioned */
    size_t partitioned = 0;
    for (size_t g = 0; g < c->n_gpus; g++)
        partitioned += c->gpus[g].mode != GPU_WHOLE;
    assert_int_equal(partitioned, 1);
    placement_free(&a);
    placement_free(&b);
    mix_free(&mix);
    cluster_free(c);

    /* the partitioned GPU is on the second node: the slice still goes there */
    c = h100_nodes(2, 2, &mix);
    MigLayout l;
    mig_layout_clear(&l);
    l.profile_at[3] = (uint8_t)profile(c, 1, "1g.10gb");
    assert_int_equal(cluster_set_mig(c, 1, 1, &l), 0);
    WorkerAlloc w = {.node = 1, .cpu_milli = 1000, .n_grants = 1};
    w.grants[0] =
        (Grant){.index = 1, .kind = GRANT_MIG, .mig_profile = l.profile_at[3], .mig_start = 3};
    cluster_apply_worker(c, &w);
    assert_int_equal(place("gpuorch", c, &mix, NULL, slice10, &a), 1);
    assert_int_equal(a.workers[0].node, 1);
    assert_int_equal(a.workers[0].grants[0].index, 1);
    placement_free(&a);
    mix_free(&mix);
    cluster_free(c);
}

static void test_reuse_idle_instance(void **state)
{
    (void)state;
    Mix mix;
    Cluster *c = h100_nodes(1, 2, &mix);
    /* GPU0: 4g.40gb@0 (busy), 2g.20gb@4 and 1g.10gb@6 idle; GPU1 free. A 1g.10gb can
     * take the idle one as it is, re-carve the 2g.20gb into one at 4 or 5, or cut GPU1 */
    MigLayout l;
    mig_layout_clear(&l);
    l.profile_at[0] = (uint8_t)profile(c, 0, "4g.40gb");
    l.profile_at[4] = (uint8_t)profile(c, 0, "2g.20gb");
    l.profile_at[6] = (uint8_t)profile(c, 0, "1g.10gb");
    assert_int_equal(cluster_set_mig(c, 0, 0, &l), 0);
    WorkerAlloc w = {.node = 0, .cpu_milli = 1000, .n_grants = 1};
    w.grants[0] = (Grant){.index = 0, .kind = GRANT_MIG, .mig_profile = l.profile_at[0]};
    cluster_apply_worker(c, &w);

    Placement pl = {0};
    assert_int_equal(place("gpuorch", c, &mix, NULL, slice10, &pl), 1);
    const Grant *g = &pl.workers[0].grants[0];
    assert_int_equal(g->kind, GRANT_MIG);
    assert_int_equal(g->index, 0);
    assert_int_equal(g->mig_start, 6);
    assert_int_equal(pl.n_changes, 0);
    const Gpu *gpu0 = node_gpu_c(c, &c->nodes[0], 0);
    assert_memory_equal(&gpu0->mig, &l, sizeof(l));
    assert_int_equal(gpu0->mig_busy, 0x41);
    assert_int_equal(node_gpu_c(c, &c->nodes[0], 1)->mode, GPU_WHOLE);
    placement_free(&pl);
    mix_free(&mix);
    cluster_free(c);
}

/* A job that asks by memory gets the smallest profile that holds it, widened to the
 * profile with the same memory slices and more compute only where that compute would
 * otherwise be stranded (no memory left for any instance to use it). On an H100 a
 * 3g.40gb at 0 leaves slots 4-7, where instances can use 3 of the 4 compute slices left
 * (3g.40gb@4, or 1g.10gb at 4, 5, 6): one is stranded, and 4g.40gb@0 takes it. Four
 * 20 GB jobs on one GPU: as 1g.20gb each they hold 4 of its 7 compute slices with all 8
 * memory slots gone; widened, 2g.20gb at 0, 2 and 4 and 1g.20gb at 6 hold all 7. A job
 * that names its profile gets that profile. */
static void test_wider_profile(void **state)
{
    (void)state;
    Mix mix;
    Shape mem33 = {.req = REQ_MEMORY, .gpu_memory_mib = 33000, .cpu_milli = 1000};
    Shape mig3g = {.req = REQ_MIG, .mig = "3g.40gb", .cpu_milli = 1000};
    Shape mem19 = {.req = REQ_MEMORY, .gpu_memory_mib = 19000, .cpu_milli = 1000};

    /* next to a busy 3g.40gb@4: by memory 4g.40gb@0, by name 3g.40gb@0 */
    for (int named = 0; named < 2; named++) {
        Cluster *c = h100_nodes(1, 1, &mix);
        MigLayout l;
        mig_layout_clear(&l);
        l.profile_at[4] = (uint8_t)profile(c, 0, "3g.40gb");
        assert_int_equal(cluster_set_mig(c, 0, 0, &l), 0);
        WorkerAlloc w = {.node = 0, .cpu_milli = 1000, .n_grants = 1};
        w.grants[0] =
            (Grant){.index = 0, .kind = GRANT_MIG, .mig_profile = l.profile_at[4], .mig_start = 4};
        cluster_apply_worker(c, &w);
        Placement pl = {0};
        assert_int_equal(place("gpuorch", c, &mix, NULL, named ? mig3g : mem33, &pl), 1);
        const Grant *g = &pl.workers[0].grants[0];
        assert_int_equal(g->kind, GRANT_MIG);
        assert_int_equal(g->mig_start, 0);
        assert_int_equal(g->mig_profile, profile(c, 0, named ? "3g.40gb" : "4g.40gb"));
        assert_int_equal(node_gpu_c(c, &c->nodes[0], 0)->used_units,
                         (named ? 6 : 7) * (GPU_UNITS / 7));
        placement_free(&pl);
        drop(c, &mix);
    }

    /* four 20 GB jobs fill one GPU's compute */
    Cluster *c = h100_nodes(1, 1, &mix);
    unsigned n2g = 0, n1g = 0;
    for (int k = 0; k < 4; k++) {
        Placement pl = {0};
        assert_int_equal(place("gpuorch", c, &mix, NULL, mem19, &pl), 1);
        int p = pl.workers[0].grants[0].mig_profile;
        n2g += p == profile(c, 0, "2g.20gb");
        n1g += p == profile(c, 0, "1g.20gb");
        placement_free(&pl);
    }
    assert_int_equal(n2g, 3);
    assert_int_equal(n1g, 1);
    const Gpu *gpu = node_gpu_c(c, &c->nodes[0], 0);
    assert_int_equal(gpu->used_units, GPU_UNITS);
    assert_int_equal(mig_occupied_mask(node_model(c, &c->nodes[0]), &gpu->mig, gpu->mig_busy),
                     0xff);
    /* a fifth finds no room */
    Placement pl = {0};
    assert_int_equal(place("gpuorch", c, &mix, NULL, mem19, &pl), 0);
    placement_free(&pl);
    drop(c, &mix);
}

/* ---- topology ---- */

static void test_topology(void **state)
{
    (void)state;
    Cluster *c = cluster_new("t");
    assert_non_null(c);
    add(c, (PoolArgs){.name = "pcie", .model = "V100", .gpus = 8, .ic = IC_PCIE});
    add(c, (PoolArgs){.name = "nvs", .model = "V100", .gpus = 8, .ic = IC_NVSWITCH});
    Mix mix = {0};
    mix_of(&mix, c, (Shape){.req = REQ_GPUS, .gpus = 1, .cpu_milli = 1000}, 0.5);
    mix_of(&mix, c, (Shape){.req = REQ_GPUS, .gpus = 4, .cpu_milli = 1000}, 0.5);
    const uint32_t pcie_first[] = {0, 1}, nvs_first[] = {1, 0};
    Shape four = {.req = REQ_GPUS, .gpus = 4, .cpu_milli = 1000};
    Shape one = {.req = REQ_GPUS, .gpus = 1, .cpu_milli = 1000};
    Shape slice = {.req = REQ_FRACTION, .milli = 500, .cpu_milli = 1000};

    Cluster *d = cluster_clone(c);
    assert_non_null(d);
    assert_int_equal(place_node("gpuorch", d, &mix, pcie_first, four), 1);
    cluster_free(d);
    d = cluster_clone(c);
    assert_non_null(d);
    assert_int_equal(place_node("gpuorch", d, &mix, nvs_first, one), 0);
    cluster_free(d);
    d = cluster_clone(c);
    assert_non_null(d);
    assert_int_equal(place_node("gpuorch", d, &mix, nvs_first, slice), 0);
    cluster_free(d);

    /* fragmentation first: with 5 GPUs left on the NVSwitch node, 4 more would leave
     * one GPU no 4-GPU worker can use; the idle PCIe node keeps whole blocks */
    WorkerAlloc w = {.node = 1, .cpu_milli = 1000, .n_grants = 3};
    for (unsigned i = 0; i < 3; i++)
        w.grants[i] = (Grant){.index = (uint8_t)i, .kind = GRANT_WHOLE};
    cluster_apply_worker(c, &w);
    assert_int_equal(place_node("gpuorch", c, &mix, nvs_first, four), 0);
    mix_free(&mix);
    cluster_free(c);
}

/* ---- no mix ---- */

static const Shape menu[] = {
    {.req = REQ_GPUS, .gpus = 1, .cpu_milli = 2000},
    {.req = REQ_GPUS, .gpus = 2, .cpu_milli = 4000},
    {.req = REQ_GPUS, .gpus = 3, .cpu_milli = 1000},
    {.req = REQ_FRACTION, .milli = 300, .cpu_milli = 1000},
    {.req = REQ_FRACTION, .milli = 700, .cpu_milli = 1000},
    {.req = REQ_MIG, .mig = "1g.10gb", .cpu_milli = 1000},
    {.req = REQ_MIG, .mig = "2g.20gb", .cpu_milli = 1000},
    {.req = REQ_MIG, .mig = "3g.40gb", .cpu_milli = 2000},
    {.req = REQ_MEMORY, .gpu_memory_mib = 12 * GIB, .cpu_milli = 1000},
    {.req = REQ_NONE, .cpu_milli = 6000},
};

/* Random jobs (seeded) arrive and some leave; every job some node has room for must be
 * placed, and no other. */
static void run_no_mix(const Mix *mix)
{
    Cluster *c = cluster_new("e");
    assert_non_null(c);
    add(c, (PoolArgs){.name = "h", .model = "H100", .gpus = 4, .mig = true});
    add(c, (PoolArgs){.name = "v", .model = "V100", .gpus = 2, .cpu_milli = 32000});
    Rng rng;
    rng_seed(&rng, 2024);
    enum { JOBS = 300 };
    Placement *live = calloc(JOBS, sizeof(*live));
    assert_non_null(live);
    size_t n_live = 0, placed = 0, refused = 0;
    for (int k = 0; k < JOBS; k++) {
        if (n_live && rng_below(&rng, 3) == 0) {
            size_t i = rng_below(&rng, n_live);
            place_release(c, &live[i]);
            placement_free(&live[i]);
            live[i] = live[--n_live];
            live[n_live] = (Placement){0};
            assert_true(cluster_consistent(c));
        }
        Shape s = menu[rng_below(&rng, sizeof(menu) / sizeof(menu[0]))];
        Request r = request(c, s);
        Rng prng;
        rng_seed(&prng, 1);
        PlaceCtx ctx;
        assert_int_equal(place_ctx_init(&ctx, c, policy_find("gpuorch"), &prng, NULL, mix), 0);
        bool fits = false;
        for (uint32_t i = 0; i < c->n_nodes; i++)
            fits |= place_node_capacity(&ctx, c, i, &r, 1) > 0;
        Buf why = {0};
        int rc = place_job(&ctx, c, &r, &live[n_live], &why);
        place_ctx_free(&ctx);
        buf_free(&why);
        if (rc != (int)fits)
            fail_msg("job %d (kind %d): place_job %d, room %d", k, s.req, rc, fits);
        assert_true(cluster_consistent(c));
        if (rc == 1) {
            n_live++;
            placed++;
        } else {
            refused++;
        }
    }
    /* the run filled the cluster more than once */
    assert_true(placed > 100);
    assert_true(refused > 20);
    for (size_t i = 0; i < JOBS; i++)
        placement_free(&live[i]);
    free(live);
    cluster_free(c);
}

static void test_no_mix(void **state)
{
    (void)state;
    run_no_mix(NULL);
    Mix empty = {0};
    run_no_mix(&empty);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scarcity),
        cmocka_unit_test(test_second_slice_same_gpu),
        cmocka_unit_test(test_reuse_idle_instance),
        cmocka_unit_test(test_wider_profile),
        cmocka_unit_test(test_topology),
        cmocka_unit_test(test_no_mix),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
