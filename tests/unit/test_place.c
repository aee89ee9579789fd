/* test_place.c: what place_job (core/place.c) does, case by case, with every policy of
 * the table: whole GPUs kept on one node and NVLink pairs kept together, MPS shares
 * filling a GPU, MIG slices by profile and by memory (the smallest fitting slice),
 * re-carving idle instances with the change reported, gangs all or nothing, required
 * and preferred topology scopes, the k8s-default baseline (whole GPUs only, no gang),
 * a reason for every refusal and exact counters after a release. Requests are built
 * with request_from_job from job specs, so resolution (and its refusals) is covered
 * too. test_place_bruteforce.c checks the same placer against a reference on random
 * cases; this file pins the behaviour a person would check by hand. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core/cluster.h"
#include "core/job.h"
#include "core/place.h"
#include "util/buf.h"
#include "util/rng.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- building clusters ---- */

static int add_switch(Cluster *c, const char *name, const char *parent)
{
    int s = cluster_add_switch(c, name, parent);
    assert_true(s >= 0);
    return s;
}

typedef struct PoolArgs {
    const char *name, *model, *leaf, *fabric;
    unsigned gpus, nodes;
    bool mig;
    Interconnect ic;
    Tier tier;
    uint32_t cpu_milli, memory_mib;
} PoolArgs;

static void add(Cluster *c, PoolArgs a)
{
    int mi = cluster_model(c, a.model, 16384);
    assert_true(mi >= 0);
    uint32_t leaf = 0;
    if (a.leaf) {
        int l = cluster_find_switch(c, a.leaf);
        assert_true(l >= 0);
        leaf = (uint32_t)l;
    }
    int fab = cluster_fabric(c, a.fabric);
    assert_true(fab >= 0);
    Pool p = {
        .name = (char *)a.name,
        .tier = a.tier,
        .nodes = a.nodes ? a.nodes : 1,
        .leaves = a.leaf ? &leaf : NULL,
        .n_leaves = a.leaf ? 1 : 0,
        .model = (uint8_t)mi,
        .gpus = (uint8_t)a.gpus,
        .interconnect = (uint8_t)a.ic,
        .mig = a.mig,
        .fabric = (uint16_t)fab,
        .cpu_milli = a.cpu_milli ? a.cpu_milli : 64000,
        .memory_mib = a.memory_mib ? a.memory_mib : 512 * 1024,
    };
    mig_layout_clear(&p.initial_mig);
    int pi = cluster_add_pool(c, &p);
    assert_true(pi >= 0);
    assert_int_equal(cluster_add_pool_nodes(c, (uint32_t)pi), 0);
}

static Cluster *one_pool(PoolArgs a)
{
    Cluster *c = cluster_new("t");
    assert_non_null(c);
    add(c, a);
    return c;
}

/* ---- jobs ---- */

static JobSpec job(ReqKind req, unsigned workers)
{
    JobSpec j;
    job_spec_init(&j);
    j.req = (uint8_t)req;
    j.workers = workers;
    j.cpu_milli = 1000;
    j.memory_mib = 4096;
    return j;
}

static JobSpec job_gpus(unsigned gpus, unsigned workers)
{
    JobSpec j = job(REQ_GPUS, workers);
    j.gpus = (uint16_t)gpus;
    return j;
}

static JobSpec job_mig(const char *profile, unsigned workers)
{
    JobSpec j = job(REQ_MIG, workers);
    j.mig = strdup(profile);
    assert_non_null(j.mig);
    return j;
}

static JobSpec job_memory(uint64_t mib)
{
    JobSpec j = job(REQ_MEMORY, 1);
    j.gpu_memory_mib = mib;
    return j;
}

static JobSpec job_fraction(unsigned milli)
{
    JobSpec j = job(REQ_FRACTION, 1);
    j.fraction_milli = (uint16_t)milli;
    return j;
}

/* Resolve j and place it with the named policy. The placement stays in pl. */
static int place(Cluster *c, const char *policy, const JobSpec *j, Placement *pl, Buf *why)
{
    const Policy *p = policy_find(policy);
    assert_non_null(p);
    Request r;
    buf_reset(why);
    int rc = request_from_job(c, j, &r, why);
    if (rc != 0)
        fail_msg("request_from_job: %d (%s)", rc, buf_str(why));
    Rng rng;
    rng_seed(&rng, 1);
    PlaceCtx ctx;
    assert_int_equal(place_ctx_init(&ctx, c, p, &rng, NULL, NULL), 0);
    rc = place_job(&ctx, c, &r, pl, why);
    place_ctx_free(&ctx);
    assert_true(rc == 0 || rc == 1);
    assert_true(cluster_consistent(c));
    if (rc == 0)
        assert_true(strlen(buf_str(why)) > 10);
    return rc;
}

static const char *policy_name(size_t i)
{
    return policy_at(i)->name;
}

static bool is_k8s(size_t i)
{
    return (policy_at(i)->flags & POLICY_INDIVISIBLE) != 0;
}

/* Everything about a cluster's allocation, to compare before and after. */
typedef struct State {
    Node nodes[16];
    Gpu gpus[128];
    uint64_t used;
} State;

static void save(const Cluster *c, State *s)
{
    assert_true(c->n_nodes <= 16 && c->n_gpus <= 128);
    memcpy(s->nodes, c->nodes, c->n_nodes * sizeof(Node));
    memcpy(s->gpus, c->gpus, c->n_gpus * sizeof(Gpu));
    s->used = c->used_units;
}

static void unchanged(const Cluster *c, const State *s)
{
    assert_int_equal(c->used_units, s->used);
    assert_memory_equal(c->nodes, s->nodes, c->n_nodes * sizeof(Node));
    assert_memory_equal(c->gpus, s->gpus, c->n_gpus * sizeof(Gpu));
}

/* ---- whole GPUs ---- */

static void test_whole_gpus(void **state)
{
    for (size_t pi = 0; pi < policy_count(); pi++) {
        Cluster *c = cluster_new("w");
        assert_non_null(c);
        add(c, (PoolArgs){.name = "h", .model = "H100", .gpus = 4, .nodes = 2, .ic = IC_NVSWITCH});
        Placement a = {0}, b = {0}, d = {0};
        Buf why = {0};
        JobSpec j = job_gpus(3, 1);
        assert_int_equal(place(c, policy_name(pi), &j, &a, &why), 1);
        assert_int_equal(a.n_workers, 1);
        const WorkerAlloc *w = &a.workers[0];
        assert_int_equal(w->n_grants, 3);
        assert_int_equal(w->cpu_milli, 1000);
        assert_int_equal(w->memory_mib, 4096);
        for (unsigned g = 0; g < 3; g++) {
            assert_int_equal(w->grants[g].kind, GRANT_WHOLE);
            for (unsigned h = 0; h < g; h++)
                assert_int_not_equal(w->grants[g].index, w->grants[h].index);
        }
        assert_int_equal(c->nodes[w->node].free_whole, 1);
        assert_int_equal(c->used_units, 3 * GPU_UNITS);
        assert_int_equal(a.n_changes, 0);
        /* two workers of 3: only one node has 3 free; a gang waits whole */
        if (!(policy_at(pi)->flags & POLICY_NO_GANG)) {
            State s0;
            save(c, &s0);
            j = job_gpus(3, 2);
            assert_int_equal(place(c, policy_name(pi), &j, &b, &why), 0);
            unchanged(c, &s0);
        }
        j = job_gpus(4, 1);
        assert_int_equal(place(c, policy_name(pi), &j, &b, &why), 1);
        assert_int_equal(b.workers[0].node, 1 - a.workers[0].node);
        /* one GPU is left: a 2-GPU worker waits, a 1-GPU worker runs */
        State s;
        save(c, &s);
        j = job_gpus(2, 1);
        assert_int_equal(place(c, policy_name(pi), &j, &d, &why), 0);
        unchanged(c, &s);
        assert_non_null(strstr(buf_str(&why), "GPU"));
        j = job_gpus(1, 1);
        assert_int_equal(place(c, policy_name(pi), &j, &d, &why), 1);
        assert_int_equal(c->used_units, 8 * GPU_UNITS);
        place_release(c, &a);
        place_release(c, &b);
        place_release(c, &d);
        assert_int_equal(c->used_units, 0);
        assert_int_equal(c->nodes[0].free_whole + c->nodes[1].free_whole, 8);
        placement_free(&a);
        placement_free(&b);
        placement_free(&d);
        buf_free(&why);
        cluster_free(c);
    }
}

/* With NVLink pairs (0-1, 2-3, ...) a 2-GPU worker gets a whole pair and an odd GPU
 * goes where it splits no free pair. */
static void test_nvlink_pairs(void **state)
{
    for (size_t pi = 0; pi < policy_count(); pi++) {
        Cluster *c = one_pool(
            (PoolArgs){.name = "v", .model = "A100-80GB", .gpus = 8, .ic = IC_NVLINK_PAIRS});
        Placement pl[4] = {{0}};
        Buf why = {0};
        unsigned sizes[] = {1, 2, 3, 2};
        for (int k = 0; k < 4; k++) {
            JobSpec j = job_gpus(sizes[k], 1);
            assert_int_equal(place(c, policy_name(pi), &j, &pl[k], &why), 1);
            const WorkerAlloc *w = &pl[k].workers[0];
            if (sizes[k] == 2)
                assert_int_equal(w->grants[0].index ^ 1u, w->grants[1].index);
            /* after each job at most one pair is split */
            unsigned split = 0;
            for (unsigned g = 0; g < 8; g += 2)
                split += (node_gpu_c(c, &c->nodes[0], g)->used_units == 0) !=
                         (node_gpu_c(c, &c->nodes[0], g + 1)->used_units == 0);
            assert_int_equal(split, (c->nodes[0].free_whole % 2));
        }
        assert_int_equal(c->nodes[0].free_whole, 0);
        for (int k = 0; k < 4; k++) {
            place_release(c, &pl[k]);
            placement_free(&pl[k]);
        }
        assert_int_equal(c->nodes[0].free_whole, 8);
        buf_free(&why);
        cluster_free(c);
    }
}

/* Links as the agent reports them, not pairs by index: 0-2-4-6 and 1-3-5-7 are two
 * fully linked quads (a board wired unlike 0-1, 2-3). A 2-GPU job takes a linked
 * pair, a 4-GPU job a whole quad; without reports the node pairs by index again. */
static void test_nvlink_reported(void **state)
{
    Cluster *c =
        one_pool((PoolArgs){.name = "v", .model = "A100-80GB", .gpus = 8, .ic = IC_NVLINK_PAIRS});
    for (unsigned g = 0; g < 8; g++) {
        uint16_t quad = (g & 1u) ? 0xaa : 0x55;
        cluster_set_nvlink(c, 0, g, quad);
    }
    assert_int_equal(node_gpu_c(c, &c->nodes[0], 0)->nvlink, 0x54); /* not itself */
    Placement two = {0}, four = {0};
    Buf why = {0};
    JobSpec j = job_gpus(2, 1);
    assert_int_equal(place(c, "gpuorch", &j, &two, &why), 1);
    const WorkerAlloc *w = &two.workers[0];
    unsigned a = w->grants[0].index, b = w->grants[1].index;
    assert_int_equal(a % 2, b % 2); /* in one quad: linked */
    j = job_gpus(4, 1);
    assert_int_equal(place(c, "gpuorch", &j, &four, &why), 1);
    w = &four.workers[0];
    unsigned parity = w->grants[0].index % 2;
    for (unsigned k = 0; k < 4; k++)
        assert_int_equal(w->grants[k].index % 2, parity); /* one whole quad */
    assert_int_not_equal(parity, a % 2);                  /* the quad the pair left whole */
    place_release(c, &two);
    place_release(c, &four);
    placement_free(&two);
    placement_free(&four);
    /* the reports gone: pairs by index */
    for (unsigned g = 0; g < 8; g++)
        cluster_set_nvlink(c, 0, g, 0);
    j = job_gpus(2, 1);
    assert_int_equal(place(c, "gpuorch", &j, &two, &why), 1);
    assert_int_equal(two.workers[0].grants[0].index ^ 1u, two.workers[0].grants[1].index);
    place_release(c, &two);
    placement_free(&two);
    buf_free(&why);
    cluster_free(c);
}

/* ---- MPS shares ---- */

static void test_mps_shares(void **state)
{
    for (size_t pi = 0; pi < policy_count(); pi++) {
        if (is_k8s(pi))
            continue;
        Cluster *c = one_pool((PoolArgs){.name = "l4", .model = "L4", .gpus = 1});
        Placement pl[6] = {{0}};
        Buf why = {0};
        for (int k = 0; k < 3; k++) {
            JobSpec j = job_fraction(300);
            assert_int_equal(place(c, policy_name(pi), &j, &pl[k], &why), 1);
            assert_int_equal(pl[k].workers[0].n_grants, 1);
            assert_int_equal(pl[k].workers[0].grants[0].kind, GRANT_SHARE);
            assert_int_equal(pl[k].workers[0].grants[0].milli, 300);
        }
        const Gpu *g = node_gpu_c(c, &c->nodes[0], 0);
        assert_int_equal(g->mode, GPU_SHARED);
        assert_int_equal(g->n_clients, 3);
        assert_int_equal(g->used_units, 900 * (GPU_UNITS / 1000));
        State s;
        save(c, &s);
        JobSpec j = job_fraction(300);
        assert_int_equal(place(c, policy_name(pi), &j, &pl[3], &why), 0);
        unchanged(c, &s);
        assert_non_null(strstr(buf_str(&why), "share"));
        j = job_fraction(100); /* exactly fills the GPU */
        assert_int_equal(place(c, policy_name(pi), &j, &pl[3], &why), 1);
        assert_int_equal(g->used_units, GPU_UNITS);
        j = job_memory(1);
        assert_int_equal(place(c, policy_name(pi), &j, &pl[4], &why), 0);
        place_release(c, &pl[0]);
        /* 12 GiB of an L4's 24 GiB is half of it */
        j = job_memory(12288);
        assert_int_equal(place(c, policy_name(pi), &j, &pl[4], &why), 0);
        j = job_memory(6000); /* 245 thousandths */
        assert_int_equal(place(c, policy_name(pi), &j, &pl[4], &why), 1);
        assert_int_equal(pl[4].workers[0].grants[0].milli, 245);
        for (int k = 0; k < 5; k++) {
            if (k)
                place_release(c, &pl[k]);
            placement_free(&pl[k]);
        }
        assert_int_equal(g->mode, GPU_WHOLE);
        assert_int_equal(c->nodes[0].free_whole, 1);
        assert_int_equal(c->used_units, 0);
        buf_free(&why);
        cluster_free(c);
    }
}

/* ---- MIG ---- */

static int prof(const Cluster *c, const char *name)
{
    int p = catalog_profile_index(node_model(c, &c->nodes[0]), name);
    assert_true(p >= 0);
    return p;
}

static void test_mig_by_profile(void **state)
{
    for (size_t pi = 0; pi < policy_count(); pi++) {
        if (is_k8s(pi))
            continue;
        Cluster *c = one_pool((PoolArgs){.name = "h", .model = "H100", .gpus = 1, .mig = true});
        Placement pl[4] = {{0}};
        Buf why = {0};
        int g3 = prof(c, "3g.40gb");
        JobSpec j = job_mig("3g.40gb", 1);
        assert_int_equal(place(c, policy_name(pi), &j, &pl[0], &why), 1);
        const Grant *gr = &pl[0].workers[0].grants[0];
        assert_int_equal(gr->kind, GRANT_MIG);
        assert_int_equal(gr->mig_profile, g3);
        assert_true(gr->mig_start == 0 || gr->mig_start == 4);
        assert_int_equal(pl[0].n_changes, 1);
        assert_true(mig_layout_empty(&pl[0].changes[0].before));
        assert_int_equal(pl[0].changes[0].after.profile_at[gr->mig_start], g3);
        const Gpu *g = node_gpu_c(c, &c->nodes[0], 0);
        assert_int_equal(g->mode, GPU_MIG);
        assert_int_equal(g->used_units, 3 * GPU_UNITS / 7);
        assert_int_equal(c->nodes[0].free_whole, 0);
        job_spec_free(&j);
        j = job_mig("3g.40gb", 1);
        assert_int_equal(place(c, policy_name(pi), &j, &pl[1], &why), 1);
        assert_int_equal(pl[1].workers[0].grants[0].mig_start, 4 - gr->mig_start);
        State s;
        save(c, &s);
        job_spec_free(&j);
        j = job_mig("1g.10gb", 1); /* 6 of 7 compute slices and all memory are taken */
        assert_int_equal(place(c, policy_name(pi), &j, &pl[2], &why), 0);
        unchanged(c, &s);
        assert_non_null(strstr(buf_str(&why), "1g.10gb"));
        /* a whole GPU is not free either: MIG instances are busy */
        JobSpec w = job_gpus(1, 1);
        assert_int_equal(place(c, policy_name(pi), &w, &pl[2], &why), 0);
        unchanged(c, &s);
        job_spec_free(&j);
        for (int k = 0; k < 3; k++) {
            if (k < 2)
                place_release(c, &pl[k]);
            placement_free(&pl[k]);
        }
        /* the instances stay after release; the GPU is idle in MIG mode */
        assert_int_equal(c->nodes[0].idle_mig, 1);
        assert_int_equal(mig_layout_count(&g->mig), 2);
        assert_int_equal(c->used_units, 0);
        /* and a whole-GPU job takes it back out of MIG mode */
        assert_int_equal(place(c, policy_name(pi), &w, &pl[3], &why), 1);
        assert_int_equal(pl[3].n_changes, 1);
        assert_true(mig_layout_empty(&pl[3].changes[0].after));
        assert_int_equal(g->mode, GPU_WHOLE);
        placement_free(&pl[3]);
        buf_free(&why);
        cluster_free(c);
    }
}

static void test_mig_by_memory(void **state)
{
    /* gpuorch widens onto a fresh GPU: a 1g.20gb or a 3g.40gb at slot 0 would leave a
     * compute slice no instance could use (gpuorch.c), so it gives the profile with the
     * same memory and one more */
    static const struct {
        uint64_t mib;
        const char *profile, *gpuorch;
    } cases[] = {
        {5000, "1g.10gb", "1g.10gb"},
        {18 * 1024, "1g.20gb", "2g.20gb"},
        {30 * 1024, "3g.40gb", "4g.40gb"},
    };
    for (size_t pi = 0; pi < policy_count(); pi++) {
        if (is_k8s(pi))
            continue;
        for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
            Cluster *c = one_pool((PoolArgs){.name = "h", .model = "H100", .gpus = 2, .mig = true});
            Placement pl = {0};
            Buf why = {0};
            JobSpec j = job_memory(cases[k].mib);
            assert_int_equal(place(c, policy_name(pi), &j, &pl, &why), 1);
            const Grant *gr = &pl.workers[0].grants[0];
            assert_int_equal(gr->kind, GRANT_MIG);
            assert_string_equal(node_model(c, &c->nodes[0])->profiles[gr->mig_profile].name,
                                strcmp(policy_name(pi), "gpuorch") ? cases[k].profile
                                                                   : cases[k].gpuorch);
            placement_free(&pl);
            /* more than the largest slice: a whole-GPU share on the MIG node */
            j = job_memory(80 * 1024);
            assert_int_equal(place(c, policy_name(pi), &j, &pl, &why), 1);
            assert_int_equal(pl.workers[0].grants[0].kind, GRANT_SHARE);
            assert_int_equal(pl.workers[0].grants[0].milli, 1000);
            placement_free(&pl);
            buf_free(&why);
            cluster_free(c);
        }
    }
}

/* Memory asks and MPS on a MIG node of two H100s (81,920 MiB), for every policy:
 *  - 50 GiB: only 7g.80gb holds it, which isolates nothing a share does not: a share of
 *    whole memory slots (10,240 MiB each), 5 of 8 = 625 thousandths, on a fresh GPU
 *    (GPU 0 by order), MPS from then on;
 *  - 18 GiB (one worker): 2 slots, 250; GPU 0 has 375 of MPS room, so the share fills
 *    it rather than a 1g.20gb being cut; GPU 0 holds 875;
 *  - 18 GiB again: 125 left on GPU 0 does not hold 250: a MIG slice on GPU 1;
 *  - 10 GiB as two workers: the same room would hold one, but a gang's mode stays put:
 *    both get MIG slices. */
static void test_memory_shares(void **state)
{
    (void)state;
    for (size_t pi = 0; pi < policy_count(); pi++) {
        if (is_k8s(pi))
            continue;
        Cluster *c = one_pool((PoolArgs){.name = "h", .model = "H100", .gpus = 2, .mig = true});
        Placement pl[4] = {{0}};
        Buf why = {0};
        JobSpec big = job_memory(50 * 1024), mid = job_memory(18 * 1024);
        assert_int_equal(place(c, policy_name(pi), &big, &pl[0], &why), 1);
        const Grant *gr = &pl[0].workers[0].grants[0];
        assert_int_equal(gr->kind, GRANT_SHARE);
        assert_int_equal(gr->milli, 625);
        unsigned shared = gr->index;
        assert_int_equal(node_gpu_c(c, &c->nodes[0], shared)->mode, GPU_SHARED);

        assert_int_equal(place(c, policy_name(pi), &mid, &pl[1], &why), 1);
        gr = &pl[1].workers[0].grants[0];
        assert_int_equal(gr->kind, GRANT_SHARE);
        assert_int_equal(gr->milli, 250);
        assert_int_equal(gr->index, shared);
        assert_int_equal(gpu_free_milli(node_gpu_c(c, &c->nodes[0], shared)), 125);

        assert_int_equal(place(c, policy_name(pi), &mid, &pl[2], &why), 1);
        gr = &pl[2].workers[0].grants[0];
        assert_int_equal(gr->kind, GRANT_MIG);
        assert_int_not_equal(gr->index, shared);

        placement_free(&pl[2]);
        JobSpec pair = job_memory(10 * 1024);
        pair.workers = 2;
        assert_int_equal(place(c, policy_name(pi), &pair, &pl[3], &why), 1);
        assert_int_equal(pl[3].n_workers, 2);
        for (size_t w = 0; w < 2; w++)
            assert_int_equal(pl[3].workers[w].grants[0].kind, GRANT_MIG);
        for (size_t k = 0; k < 4; k++)
            placement_free(&pl[k]);
        buf_free(&why);
        cluster_free(c);
    }
}

/* Idle instances are re-carved, busy ones never; the change is reported. */
static void test_mig_recarve(void **state)
{
    for (size_t pi = 0; pi < policy_count(); pi++) {
        if (is_k8s(pi))
            continue;
        Cluster *c = one_pool((PoolArgs){.name = "h", .model = "H100", .gpus = 1, .mig = true});
        int g1 = prof(c, "1g.10gb"), g3 = prof(c, "3g.40gb"), g4 = prof(c, "4g.40gb");
        MigLayout seven;
        mig_layout_clear(&seven);
        for (int s = 0; s < 7; s++)
            seven.profile_at[s] = (uint8_t)g1;
        assert_int_equal(cluster_set_mig(c, 0, 0, &seven), 0);
        const Gpu *g = node_gpu_c(c, &c->nodes[0], 0);
        Placement one = {0}, three = {0}, four = {0};
        Buf why = {0};
        /* a 1g job reuses an existing instance: no change */
        JobSpec j = job_mig("1g.10gb", 1);
        assert_int_equal(place(c, policy_name(pi), &j, &one, &why), 1);
        assert_int_equal(one.n_changes, 0);
        unsigned busy_at = one.workers[0].grants[0].mig_start;
        job_spec_free(&j);
        /* a 3g job destroys idle 1g instances on the half the busy one is not on */
        j = job_mig("3g.40gb", 1);
        assert_int_equal(place(c, policy_name(pi), &j, &three, &why), 1);
        assert_int_equal(three.n_changes, 1);
        const MigChange *ch = &three.changes[0];
        assert_memory_equal(&ch->before, &seven, sizeof(seven));
        assert_int_equal(ch->after.profile_at[busy_at], g1);
        unsigned s3 = three.workers[0].grants[0].mig_start;
        assert_int_equal(s3, busy_at < 4 ? 4u : 0u);
        assert_int_equal(ch->after.profile_at[s3], g3);
        assert_true(mig_layout_valid(node_model(c, &c->nodes[0]), &ch->after));
        assert_memory_equal(&g->mig, &ch->after, sizeof(MigLayout));
        job_spec_free(&j);
        /* 4g.40gb starts only at slot 0, where a busy instance sits */
        j = job_mig("4g.40gb", 1);
        assert_int_equal(place(c, policy_name(pi), &j, &four, &why), 0);
        if (busy_at < 4) {
            /* once the 1g job ends, the idle 1g instances give way */
            place_release(c, &one);
            assert_int_equal(place(c, policy_name(pi), &j, &four, &why), 1);
            assert_int_equal(four.workers[0].grants[0].mig_start, 0);
            assert_int_equal(g->mig.profile_at[0], g4);
            assert_int_equal(g->mig.profile_at[4], g3);
            assert_int_equal(g->mig_busy, 0x11);
        }
        job_spec_free(&j);
        placement_free(&one);
        placement_free(&three);
        placement_free(&four);
        buf_free(&why);
        cluster_free(c);
    }
}

static void test_mig_needs_mig_node(void **state)
{
    Cluster *c = cluster_new("m");
    assert_non_null(c);
    add(c, (PoolArgs){.name = "nomig", .model = "H100", .gpus = 2, .mig = false});
    Placement pl = {0};
    Buf why = {0};
    State s;
    save(c, &s);
    JobSpec j = job_mig("1g.10gb", 1);
    assert_int_equal(place(c, "gpuorch", &j, &pl, &why), 0);
    unchanged(c, &s);
    assert_non_null(strstr(buf_str(&why), "1g.10gb"));
    /* on a cluster of a model without MIG the request is refused outright */
    Cluster *l4 = one_pool((PoolArgs){.name = "l4", .model = "L4", .gpus = 4});
    Request r;
    buf_reset(&why);
    assert_int_equal(request_from_job(l4, &j, &r, &why), -EINVAL);
    assert_non_null(strstr(buf_str(&why), "1g.10gb"));
    cluster_free(l4);
    /* a second pool that may use MIG takes it */
    add(c, (PoolArgs){.name = "mig", .model = "A100-80GB", .gpus = 1, .mig = true});
    assert_int_equal(place(c, "gpuorch", &j, &pl, &why), 1);
    assert_string_equal(c->nodes[pl.workers[0].node].name, "mig-0");
    job_spec_free(&j);
    placement_free(&pl);
    buf_free(&why);
    cluster_free(c);
}

/* ---- gangs and topology ---- */

static void test_gang_all_or_nothing(void **state)
{
    for (size_t pi = 0; pi < policy_count(); pi++) {
        if (policy_at(pi)->flags & POLICY_NO_GANG)
            continue;
        Cluster *c = one_pool((PoolArgs){.name = "n", .model = "H100", .gpus = 4, .nodes = 2});
        Placement busy = {0}, gang = {0};
        Buf why = {0};
        JobSpec j = job_gpus(1, 1);
        assert_int_equal(place(c, policy_name(pi), &j, &busy, &why), 1);
        State s;
        save(c, &s);
        j = job_gpus(4, 2); /* 8 GPUs, 7 free */
        assert_int_equal(place(c, policy_name(pi), &j, &gang, &why), 0);
        unchanged(c, &s);
        assert_int_equal(gang.n_workers, 0);
        assert_true(cluster_consistent(c));
        j = job_gpus(3, 2);
        assert_int_equal(place(c, policy_name(pi), &j, &gang, &why), 1);
        assert_int_equal(gang.n_workers, 2);
        assert_int_not_equal(gang.workers[0].node, gang.workers[1].node);
        /* a gang of MIG slices too: 15 of 1g fit on two fresh GPUs only 14 at a time */
        Cluster *m = one_pool((PoolArgs){.name = "m", .model = "H100", .gpus = 2, .mig = true});
        Placement mg = {0};
        save(m, &s);
        JobSpec k = job_mig("1g.10gb", 15);
        assert_int_equal(place(m, policy_name(pi), &k, &mg, &why), 0);
        unchanged(m, &s);
        k.workers = 14;
        assert_int_equal(place(m, policy_name(pi), &k, &mg, &why), 1);
        assert_int_equal(m->used_units, 2 * GPU_UNITS);
        job_spec_free(&k);
        placement_free(&mg);
        cluster_free(m);
        placement_free(&busy);
        placement_free(&gang);
        buf_free(&why);
        cluster_free(c);
    }
}

/* Two leaves of two 2-GPU nodes under one spine. */
static Cluster *two_leaves(void)
{
    Cluster *c = cluster_new("topo");
    assert_non_null(c);
    add_switch(c, "spine", NULL);
    add_switch(c, "leaf-a", "spine");
    add_switch(c, "leaf-b", "spine");
    add(c, (PoolArgs){.name = "a", .model = "H100", .gpus = 2, .nodes = 2, .leaf = "leaf-a"});
    add(c, (PoolArgs){.name = "b", .model = "H100", .gpus = 2, .nodes = 2, .leaf = "leaf-b"});
    return c;
}

static void test_scope(void **state)
{
    for (size_t pi = 0; pi < policy_count(); pi++) {
        if (policy_at(pi)->flags & POLICY_NO_GANG)
            continue;
        Cluster *c = two_leaves();
        Placement pl = {0};
        Buf why = {0};
        State s;
        save(c, &s);
        /* 3 workers of 2 GPUs: a leaf holds 2, the cluster 4 */
        JobSpec j = job_gpus(2, 3);
        j.scope = SCOPE_LEAF;
        j.scope_required = true;
        assert_int_equal(place(c, policy_name(pi), &j, &pl, &why), 0);
        unchanged(c, &s);
        assert_non_null(strstr(buf_str(&why), "no leaf has"));
        j.scope_required = false;
        assert_int_equal(place(c, policy_name(pi), &j, &pl, &why), 1);
        assert_int_equal(pl.n_workers, 3);
        place_release(c, &pl);
        /* the spine holds them all */
        j.scope = SCOPE_SPINE;
        j.scope_required = true;
        assert_int_equal(place(c, policy_name(pi), &j, &pl, &why), 1);
        place_release(c, &pl);
        /* 2 workers of 2 GPUs: not on one node, but within one leaf */
        j = job_gpus(2, 2);
        j.scope = SCOPE_NODE;
        j.scope_required = true;
        assert_int_equal(place(c, policy_name(pi), &j, &pl, &why), 0);
        assert_non_null(strstr(buf_str(&why), "no node has"));
        j.scope = SCOPE_LEAF;
        assert_int_equal(place(c, policy_name(pi), &j, &pl, &why), 1);
        assert_int_equal(c->nodes[pl.workers[0].node].leaf, c->nodes[pl.workers[1].node].leaf);
        placement_free(&pl);
        buf_free(&why);
        cluster_free(c);
    }
}

/* The preferred scope packs a gang into one leaf when one holds it. */
static void test_preferred_scope_packs(void **state)
{
    Cluster *c = two_leaves();
    Placement pl = {0};
    Buf why = {0};
    JobSpec j = job_gpus(1, 3);
    j.scope = SCOPE_LEAF;
    assert_int_equal(place(c, "first-fit", &j, &pl, &why), 1);
    uint32_t leaf = c->nodes[pl.workers[0].node].leaf;
    for (size_t k = 1; k < pl.n_workers; k++)
        assert_int_equal(c->nodes[pl.workers[k].node].leaf, leaf);
    placement_free(&pl);
    buf_free(&why);
    cluster_free(c);
}

/* ---- the k8s-default baseline ---- */

static void test_k8s_default(void **state)
{
    Cluster *c = cluster_new("k");
    assert_non_null(c);
    add(c, (PoolArgs){.name = "h", .model = "H100", .gpus = 4, .nodes = 2, .mig = true});
    Placement pl = {0};
    Buf why = {0};
    /* a slice takes a whole GPU, MIG is never touched */
    JobSpec j = job_mig("1g.10gb", 1);
    assert_int_equal(place(c, "k8s-default", &j, &pl, &why), 1);
    assert_int_equal(pl.workers[0].n_grants, 1);
    assert_int_equal(pl.workers[0].grants[0].kind, GRANT_WHOLE);
    assert_int_equal(pl.n_changes, 0);
    assert_int_equal(c->used_units, GPU_UNITS);
    place_release(c, &pl);
    job_spec_free(&j);
    j = job_fraction(100);
    assert_int_equal(place(c, "k8s-default", &j, &pl, &why), 1);
    assert_int_equal(pl.workers[0].grants[0].kind, GRANT_WHOLE);
    place_release(c, &pl);
    /* a gang is placed worker by worker and may start partly */
    j = job_gpus(4, 3);
    assert_int_equal(place(c, "k8s-default", &j, &pl, &why), 0);
    assert_int_equal(pl.n_workers, 2);
    assert_int_equal(c->used_units, 8 * GPU_UNITS);
    assert_non_null(strstr(buf_str(&why), "placed 2 of 3"));
    place_release(c, &pl);
    assert_int_equal(c->used_units, 0);
    assert_true(cluster_consistent(c));
    /* spreading: least allocated first */
    j = job_gpus(1, 2);
    assert_int_equal(place(c, "k8s-default", &j, &pl, &why), 1);
    assert_int_not_equal(pl.workers[0].node, pl.workers[1].node);
    placement_free(&pl);
    buf_free(&why);
    cluster_free(c);
}

/* ---- reasons and release ---- */

static void test_reasons(void **state)
{
    Cluster *c = cluster_new("r");
    assert_non_null(c);
    add(c, (PoolArgs){.name = "h",
                      .model = "H100",
                      .gpus = 2,
                      .mig = true,
                      .cpu_milli = 4000,
                      .memory_mib = 65536});
    Placement pl = {0};
    Buf why = {0};
    static const struct {
        ReqKind req;
        unsigned n, workers, cpu;
        const char *fragment;
    } cases[] = {
        {REQ_GPUS, 1, 3, 1000, "GPU"},    {REQ_NONE, 0, 1, 8000, "CPU"},
        {REQ_GPUS, 1, 1, 8000, "CPU"},    {REQ_FRACTION, 500, 5, 100, "GPU"},
        {REQ_MIG, 0, 15, 100, "1g.10gb"},
    };
    for (size_t pi = 0; pi < policy_count(); pi++) {
        for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
            if (is_k8s(pi) && cases[k].req == REQ_MIG)
                continue;
            JobSpec j = cases[k].req == REQ_MIG ? job_mig("1g.10gb", cases[k].workers)
                                                : job(cases[k].req, cases[k].workers);
            j.gpus = (uint16_t)cases[k].n;
            j.fraction_milli = (uint16_t)cases[k].n;
            j.cpu_milli = cases[k].cpu;
            State s;
            save(c, &s);
            assert_int_equal(place(c, policy_name(pi), &j, &pl, &why), 0);
            if (!(policy_at(pi)->flags & POLICY_NO_GANG))
                unchanged(c, &s);
            else
                place_release(c, &pl);
            const char *text = buf_str(&why);
            if (!strstr(text, cases[k].fragment))
                fail_msg("%s, case %zu: reason \"%s\" lacks \"%s\"", policy_name(pi), k, text,
                         cases[k].fragment);
            assert_true(text[strlen(text) - 1] != ' ');
            job_spec_free(&j);
        }
    }
    placement_free(&pl);
    buf_free(&why);
    cluster_free(c);
}

static void test_release_restores(void **state)
{
    for (size_t pi = 0; pi < policy_count(); pi++) {
        Cluster *c = cluster_new("rel");
        assert_non_null(c);
        add(c, (PoolArgs){.name = "h", .model = "H100", .gpus = 4, .nodes = 2, .mig = true});
        add(c, (PoolArgs){.name = "l", .model = "L4", .gpus = 2});
        State empty;
        save(c, &empty);
        Placement pl[5] = {{0}};
        Buf why = {0};
        JobSpec jobs[5] = {job_gpus(2, 2), job_mig("2g.20gb", 3), job_memory(9000),
                           job_fraction(250), job(REQ_NONE, 2)};
        for (int k = 0; k < 5; k++)
            assert_int_equal(place(c, policy_name(pi), &jobs[k], &pl[k], &why), 1);
        assert_true(c->used_units > 0);
        for (int k = 4; k >= 0; k--) {
            place_release(c, &pl[k]);
            placement_free(&pl[k]);
            job_spec_free(&jobs[k]);
            assert_true(cluster_consistent(c));
        }
        assert_int_equal(c->used_units, 0);
        for (size_t n = 0; n < c->n_nodes; n++) {
            const Node *node = &c->nodes[n];
            assert_int_equal(node->cpu_used_milli, 0);
            assert_int_equal(node->memory_used_mib, 0);
            assert_int_equal(node->used_units, 0);
            assert_int_equal(node->free_whole + node->idle_mig, node->n_gpus);
            for (unsigned g = 0; g < node->n_gpus; g++)
                assert_int_equal(node_gpu_c(c, node, g)->mig_busy, 0);
        }
        buf_free(&why);
        cluster_free(c);
    }
}

/* ---- resolution ---- */

static void test_request_from_job(void **state)
{
    Cluster *c = cluster_new("res");
    assert_non_null(c);
    add(c, (PoolArgs){.name = "h",
                      .model = "H100",
                      .gpus = 8,
                      .mig = true,
                      .fabric = "ib",
                      .tier = TIER_SPOT});
    add(c, (PoolArgs){.name = "a30", .model = "A30", .gpus = 4, .mig = true});
    add(c, (PoolArgs){.name = "l4", .model = "L4", .gpus = 2});
    int h = cluster_find_model(c, "H100"), a = cluster_find_model(c, "A30");
    int l = cluster_find_model(c, "L4");
    Request r;
    Buf why = {0};

    JobSpec j = job_memory(20000);
    assert_int_equal(request_from_job(c, &j, &r, &why), 0);
    assert_string_equal(c->models[h].m.profiles[r.mig_profile[h]].name, "1g.20gb");
    assert_string_equal(c->models[a].m.profiles[r.mig_profile[a]].name, "4g.24gb");
    assert_int_equal(r.mig_profile[l], -1);
    assert_int_equal(r.share_milli[l], 814);  /* 20000 / 24576, rounded up */
    assert_int_equal(r.share_milli[h], 250);  /* 2 of 8 memory slots of 10,240 MiB */
    assert_int_equal(r.share_milli[a], 1000); /* A30: 4 slots of 6,144 MiB, all 4 */
    assert_int_equal(r.models, (1u << h) | (1u << a) | (1u << l));
    /* not preemptible: any tier but spot (test_spot_only_for_saved_work) */
    assert_int_equal(r.tiers, TIERS_ALL & ~(1u << TIER_SPOT));
    assert_int_equal(r.prefer, 0);
    assert_int_equal(r.workers, 1);
    assert_int_equal(r.cpu_milli, 1000);
    assert_int_equal(request_units_on(c, &r, (unsigned)h, true), GPU_UNITS / 7);
    assert_int_equal(request_units_on(c, &r, (unsigned)l, false), 814 * (GPU_UNITS / 1000));

    j = job_memory(30000); /* too big for A30 and L4 */
    assert_int_equal(request_from_job(c, &j, &r, &why), 0);
    assert_int_equal(r.models, 1u << h);

    j = job_mig("1g.6gb", 0); /* A30 only; workers 0 means 1 */
    assert_int_equal(request_from_job(c, &j, &r, &why), 0);
    assert_int_equal(r.models, 1u << a);
    assert_int_equal(r.workers, 1);
    assert_int_equal(r.mig_profile[a], catalog_profile_index(&c->models[a].m, "1g.6gb"));
    job_spec_free(&j);

    j = job_gpus(4, 2);
    char alias[] = "NVIDIA H100 80GB HBM3";
    char *models[] = {alias};
    j.gpu_models = models;
    j.n_gpu_models = 1;
    j.priority = PRIO_PRODUCTION;
    assert_int_equal(request_from_job(c, &j, &r, &why), 0);
    assert_int_equal(r.models, 1u << h);
    assert_int_equal(r.tiers, TIERS_ALL & ~(1u << TIER_SPOT));
    assert_int_equal(r.prefer, (1u << TIER_OWNED) | (1u << TIER_RESERVED));
    assert_int_equal(r.gpus, 4);
    assert_int_equal(r.workers, 2);

    /* refusals, each with a reason */
    struct {
        JobSpec j;
        const char *fragment;
    } bad[] = {
        {job_mig("9g.999gb", 1), "9g.999gb"},
        {job_gpus(17, 1), "17"},
        {job_gpus(0, 1), "0"},
        {job_gpus(8, 1), "8"}, /* with the model list below, only L4 nodes: 2 GPUs */
        {job_memory(200000), "200000"},
        {job_fraction(0), "gpu_fraction"},
        {job_fraction(1001), "gpu_fraction"},
        {job_gpus(1, 1), "B200"},
        {job_gpus(1, 1), "roce"},
        {job_gpus(1, 1), "spot"},
    };
    char l4[] = "L4", b200[] = "B200", roce[] = "roce";
    char *only_l4[] = {l4}, *only_b200[] = {b200};
    bad[3].j.gpu_models = only_l4;
    bad[3].j.n_gpu_models = 1;
    bad[7].j.gpu_models = only_b200;
    bad[7].j.n_gpu_models = 1;
    bad[8].j.fabric = roce;
    bad[9].j.priority = PRIO_PRODUCTION;
    bad[9].j.tiers = 1u << TIER_SPOT;
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        buf_reset(&why);
        r.kind = 0xee;
        int rc = request_from_job(c, &bad[k].j, &r, &why);
        if (rc != -EINVAL)
            fail_msg("case %zu: request_from_job = %d, expected -EINVAL", k, rc);
        assert_int_equal(r.kind, 0xee); /* output untouched */
        if (!strstr(buf_str(&why), bad[k].fragment))
            fail_msg("case %zu: reason \"%s\" lacks \"%s\"", k, buf_str(&why), bad[k].fragment);
    }
    free(bad[0].j.mig);
    /* the fabric that exists is found */
    j = job_gpus(1, 1);
    char ib[] = "IB";
    j.fabric = ib;
    assert_int_equal(request_from_job(c, &j, &r, &why), 0);
    assert_int_equal(r.fabric, cluster_fabric(c, "ib"));
    buf_free(&why);
    cluster_free(c);
}

/* ---- tiers ---- */

#define SPOT_BIT (1u << TIER_SPOT)
#define OWN_BITS ((1u << TIER_OWNED) | (1u << TIER_RESERVED))

static Tier tier_of(const Cluster *c, const Placement *pl, size_t w)
{
    return (Tier)c->pools[c->nodes[pl->workers[w].node].pool].tier;
}

/* Resolution: spot is in a job's tiers only when an interruption cannot lose its work:
 * preemptible and with a checkpoint interval or a cost, and not production. Capacity
 * [spot, on-demand] asked for work that is not preemptible leaves on-demand; [spot]
 * alone is refused, saying why and what would do. Production, and inference that is not
 * preemptible, prefer owned and reserved; other work prefers nothing. */
static void test_spot_only_for_saved_work(void **state)
{
    (void)state;
    Cluster *c = one_pool((PoolArgs){.name = "s", .model = "H100", .gpus = 8, .tier = TIER_SPOT});
    add(c, (PoolArgs){.name = "r", .model = "H100", .gpus = 8, .tier = TIER_RESERVED});
    Request r;
    Buf why = {0};
    for (int pre = 0; pre <= 1; pre++)
        for (int ck = 0; ck <= 2; ck++) {
            JobSpec j = job_gpus(1, 1);
            j.kind = KIND_TRAINING;
            j.preemptible = pre;
            j.checkpoint_interval_ms = ck == 1 ? 600000 : 0;
            j.checkpoint_cost_ms = ck == 2 ? 20000 : 0;
            assert_int_equal(request_from_job(c, &j, &r, &why), 0);
            bool spot = pre && ck;
            assert_int_equal(r.tiers, spot ? TIERS_ALL : TIERS_ALL & ~SPOT_BIT);
            assert_int_equal(r.prefer, 0);
            assert_int_equal(job_spec_spot_ok(&j), spot);
            assert_int_equal(job_spec_checkpoints(&j), ck != 0);
            j.priority = PRIO_PRODUCTION;
            assert_int_equal(request_from_job(c, &j, &r, &why), 0);
            assert_int_equal(r.tiers, TIERS_ALL & ~SPOT_BIT);
            assert_int_equal(r.prefer, OWN_BITS);
        }
    JobSpec j = job_gpus(1, 1);
    j.tiers = SPOT_BIT | (1u << TIER_ON_DEMAND);
    assert_int_equal(request_from_job(c, &j, &r, &why), 0);
    assert_int_equal(r.tiers, 1u << TIER_ON_DEMAND);
    j.tiers = SPOT_BIT;
    r.kind = 0xee;
    assert_int_equal(request_from_job(c, &j, &r, &why), -EINVAL);
    assert_int_equal(r.kind, 0xee);
    assert_string_equal(buf_str(&why),
                        "work that is not preemptible may not run on spot capacity (an "
                        "interruption would lose it), and spot is all it allows: make it "
                        "preemptible with a checkpoint, or allow another tier");
    buf_reset(&why);
    j.preemptible = true;
    assert_int_equal(request_from_job(c, &j, &r, &why), -EINVAL);
    assert_non_null(strstr(buf_str(&why), "work that does not checkpoint may not run on spot"));
    assert_non_null(strstr(buf_str(&why), "give it a checkpoint interval or cost"));
    j.checkpoint_cost_ms = 20000;
    assert_int_equal(request_from_job(c, &j, &r, &why), 0);
    assert_int_equal(r.tiers, SPOT_BIT);
    /* inference prefers owned capacity unless it may be preempted */
    j = job_mig("1g.10gb", 1);
    j.kind = KIND_INFERENCE;
    j.priority = PRIO_HIGH;
    assert_int_equal(request_from_job(c, &j, &r, &why), 0);
    assert_int_equal(r.prefer, OWN_BITS);
    j.preemptible = true;
    assert_int_equal(request_from_job(c, &j, &r, &why), 0);
    assert_int_equal(r.prefer, 0);
    free(j.mig);
    buf_free(&why);
    cluster_free(c);
}

/* Rule: work an interruption would lose never lands on a spot node that is up, and
 * production and inference that cannot be preempted go to reserved capacity before
 * on-demand. One node each of 8 H100 with MIG, in this order: spot-0, od-0 (on-demand),
 * res-0 (reserved), so first-fit meets spot first and reserved last. With every policy:
 *  - a 4-GPU training job that is not preemptible, and one preemptible without a
 *    checkpoint, land on od-0 or res-0, never spot-0 (first-fit put the first on spot-0);
 *  - a production 1g.10gb server and a high one that is not preemptible land on res-0
 *    (first-fit put them on od-0); a high server that may be preempted and checkpoints
 *    has no preference, and first-fit puts it on spot-0;
 *  - with res-0 full (an 8-GPU job there), the production server takes od-0, and with
 *    od-0 full too it waits: spot-0 has room but is not among the nodes it may use, as
 *    the reason says;
 *    a preemptible checkpointing training job still takes spot-0. */
static void test_tiers_in_placement(void **state)
{
    (void)state;
    for (size_t pi = 0; pi < policy_count(); pi++) {
        const char *pol = policy_name(pi);
        Cluster *c = one_pool(
            (PoolArgs){.name = "spot", .model = "H100", .gpus = 8, .mig = true, .tier = TIER_SPOT});
        add(c, (PoolArgs){
                   .name = "od", .model = "H100", .gpus = 8, .mig = true, .tier = TIER_ON_DEMAND});
        add(c, (PoolArgs){
                   .name = "res", .model = "H100", .gpus = 8, .mig = true, .tier = TIER_RESERVED});
        Buf why = {0};
        Placement pl = {0};
        for (int ck = 0; ck <= 1; ck++) {
            JobSpec t = job_gpus(4, 1);
            t.kind = KIND_TRAINING;
            t.preemptible = ck;
            assert_int_equal(place(c, pol, &t, &pl, &why), 1);
            if (tier_of(c, &pl, 0) == TIER_SPOT)
                fail_msg("%s: training that %s landed on spot", pol,
                         ck ? "does not checkpoint" : "is not preemptible");
            place_release(c, &pl);
        }
        const char *prios[] = {"production", "high"};
        for (size_t k = 0; k < 2; k++) {
            JobSpec s = job_mig("1g.10gb", 1);
            s.kind = KIND_INFERENCE;
            s.priority = (uint8_t)priority_from_name(prios[k]);
            assert_int_equal(place(c, pol, &s, &pl, &why), 1);
            if (tier_of(c, &pl, 0) != TIER_RESERVED)
                fail_msg("%s: a %s server on %s, with reserved room", pol, prios[k],
                         tier_name(tier_of(c, &pl, 0)));
            place_undo(c, &pl);
            free(s.mig);
        }
        JobSpec movable = job_mig("1g.10gb", 1);
        movable.kind = KIND_INFERENCE;
        movable.priority = PRIO_HIGH;
        movable.preemptible = true;
        movable.checkpoint_cost_ms = 5000;
        assert_int_equal(place(c, pol, &movable, &pl, &why), 1);
        if (!strcmp(pol, "first-fit"))
            assert_int_equal(tier_of(c, &pl, 0), TIER_SPOT);
        place_undo(c, &pl);
        free(movable.mig);

        JobSpec fill = job_gpus(8, 1);
        fill.tiers = 1u << TIER_RESERVED;
        Placement res_fill = {0}, od_fill = {0};
        assert_int_equal(place(c, pol, &fill, &res_fill, &why), 1);
        JobSpec p = job_mig("1g.10gb", 1);
        p.kind = KIND_INFERENCE;
        p.priority = PRIO_PRODUCTION;
        assert_int_equal(place(c, pol, &p, &pl, &why), 1);
        assert_int_equal(tier_of(c, &pl, 0), TIER_ON_DEMAND);
        place_undo(c, &pl);
        fill.tiers = 1u << TIER_ON_DEMAND;
        assert_int_equal(place(c, pol, &fill, &od_fill, &why), 1);
        State before;
        save(c, &before);
        assert_int_equal(place(c, pol, &p, &pl, &why), 0);
        unchanged(c, &before);
        if (!strstr(buf_str(&why), "of the 2 nodes it may use, 2 have no room for a worker"))
            fail_msg("%s: the production server waits, its reason says: \"%s\"", pol,
                     buf_str(&why));
        JobSpec saved = job_gpus(4, 1);
        saved.kind = KIND_TRAINING;
        saved.preemptible = true;
        saved.checkpoint_interval_ms = 600000;
        assert_int_equal(place(c, pol, &saved, &pl, &why), 1);
        assert_int_equal(tier_of(c, &pl, 0), TIER_SPOT);
        free(p.mig);
        placement_free(&pl);
        placement_free(&res_fill);
        placement_free(&od_fill);
        buf_free(&why);
        cluster_free(c);
    }
}

/* A cached score gives the same placements as no cache. */
static void test_score_cache_same_result(void **state)
{
    for (size_t pi = 0; pi < policy_count(); pi++) {
        Cluster *a = cluster_new("a"), *b = cluster_new("b");
        assert_non_null(a);
        assert_non_null(b);
        PoolArgs pa = {.name = "h", .model = "H100", .gpus = 4, .nodes = 3, .mig = true};
        add(a, pa);
        add(b, pa);
        const Policy *pol = policy_at(pi);
        Rng ra, rb;
        rng_seed(&ra, 3);
        rng_seed(&rb, 3);
        PlaceCtx ca, cb;
        assert_int_equal(place_ctx_init(&ca, a, pol, &ra, NULL, NULL), 0);
        assert_int_equal(place_ctx_init(&cb, b, pol, &rb, NULL, NULL), 0);
        ScoreCache sc;
        assert_int_equal(score_cache_init(&sc, b->n_nodes, 2), 0);
        cb.cache = &sc;
        Buf why = {0};
        Placement pa1 = {0}, pb1 = {0};
        for (int k = 0; k < 20; k++) {
            JobSpec j = k % 2 ? job_mig("1g.10gb", 1) : job_gpus(1, 1);
            Request r;
            assert_int_equal(request_from_job(a, &j, &r, &why), 0);
            r.shape = k % 2;
            int x = place_job(&ca, a, &r, &pa1, &why);
            int y = place_job(&cb, b, &r, &pb1, &why);
            assert_int_equal(x, y);
            assert_int_equal(pa1.n_workers, pb1.n_workers);
            for (size_t w = 0; x == 1 && w < pa1.n_workers; w++) {
                const WorkerAlloc *u = &pa1.workers[w], *v = &pb1.workers[w];
                assert_int_equal(u->node, v->node);
                assert_int_equal(u->n_grants, v->n_grants);
                for (unsigned g = 0; g < u->n_grants; g++) {
                    assert_int_equal(u->grants[g].index, v->grants[g].index);
                    assert_int_equal(u->grants[g].kind, v->grants[g].kind);
                    assert_int_equal(u->grants[g].mig_start, v->grants[g].mig_start);
                }
            }
            job_spec_free(&j);
        }
        placement_free(&pa1);
        placement_free(&pb1);
        place_ctx_free(&ca);
        place_ctx_free(&cb);
        score_cache_free(&sc);
        buf_free(&why);
        cluster_free(a);
        cluster_free(b);
    }
}

/* The same placement as a full scan, from the fit sets (fitset.h) a score cache keeps:
 * two clusters of 150 nodes (more than two bitmap words of summary, several of nodes)
 * take the same stream of placements, releases and node closings, one with a cache and
 * one without, in index order and in a shuffled order; enough changes pass that the
 * change log wraps and sets are rebuilt. */
static void test_fit_sets_same_result(void **state)
{
    (void)state;
    for (size_t pi = 0; pi < policy_count(); pi++)
        for (int shuffled = 0; shuffled < 2; shuffled++) {
            Cluster *cl[2];
            for (int k = 0; k < 2; k++) {
                cl[k] = cluster_new("fit");
                assert_non_null(cl[k]);
                add(cl[k], (PoolArgs){.name = "h",
                                      .model = "H100",
                                      .gpus = 8,
                                      .nodes = 70,
                                      .mig = true,
                                      .ic = IC_NVSWITCH});
                add(cl[k], (PoolArgs){.name = "l",
                                      .model = "L4",
                                      .gpus = 4,
                                      .nodes = 80,
                                      .tier = TIER_ON_DEMAND});
            }
            size_t nn = cl[0]->n_nodes;
            uint32_t *order = malloc(nn * sizeof(*order));
            assert_non_null(order);
            for (size_t i = 0; i < nn; i++)
                order[i] = (uint32_t)i;
            Rng drive;
            rng_seed(&drive, 7 + pi);
            if (shuffled)
                rng_shuffle(&drive, order, nn, sizeof(*order));
            Rng rng[2];
            PlaceCtx ctx[2];
            for (int k = 0; k < 2; k++) {
                rng_seed(&rng[k], 11);
                assert_int_equal(place_ctx_init(&ctx[k], cl[k], policy_at(pi), &rng[k],
                                                shuffled ? order : NULL, NULL),
                                 0);
            }
            ScoreCache sc;
            assert_int_equal(score_cache_init(&sc, nn, 5), 0);
            ctx[1].cache = &sc;
            JobSpec specs[5] = {job_gpus(1, 1), job_gpus(2, 1), job_mig("1g.10gb", 1),
                                job_fraction(250), job_memory(18432)};
            Request req[5];
            Buf why = {0};
            for (int k = 0; k < 5; k++) {
                assert_int_equal(request_from_job(cl[0], &specs[k], &req[k], &why), 0);
                req[k].shape = k;
            }
            enum { LIVE = 512 };
            Placement live[2][LIVE];
            memset(live, 0, sizeof(live));
            size_t n_live = 0;
            for (int step = 0; step < 6000; step++) {
                uint64_t u = rng_below(&drive, 100);
                if (u < 8 && n_live) {
                    /* a release */
                    size_t i = (size_t)rng_below(&drive, n_live);
                    for (int k = 0; k < 2; k++) {
                        place_release(cl[k], &live[k][i]);
                        Placement t = live[k][i];
                        live[k][i] = live[k][n_live - 1];
                        live[k][n_live - 1] = t;
                        placement_reset(&live[k][n_live - 1]);
                    }
                    n_live--;
                    continue;
                }
                if (u < 10) {
                    /* a node closes or opens */
                    uint32_t node = (uint32_t)rng_below(&drive, nn);
                    bool on = !cl[0]->nodes[node].schedulable;
                    for (int k = 0; k < 2; k++)
                        cluster_set_schedulable(cl[k], node, on);
                    continue;
                }
                if (n_live == LIVE) {
                    for (int k = 0; k < 2; k++)
                        place_release(cl[k], &live[k][0]), placement_reset(&live[k][0]);
                    for (int k = 0; k < 2; k++) {
                        Placement t = live[k][0];
                        live[k][0] = live[k][n_live - 1];
                        live[k][n_live - 1] = t;
                    }
                    n_live--;
                }
                const Request *r = &req[rng_below(&drive, 5)];
                int x = place_job(&ctx[0], cl[0], r, &live[0][n_live], NULL);
                int y = place_job(&ctx[1], cl[1], r, &live[1][n_live], NULL);
                assert_int_equal(x, y);
                if (x != 1)
                    continue;
                const Placement *a = &live[0][n_live], *b = &live[1][n_live];
                assert_int_equal(a->n_workers, b->n_workers);
                for (size_t w = 0; w < a->n_workers; w++) {
                    assert_int_equal(a->workers[w].node, b->workers[w].node);
                    assert_int_equal(a->workers[w].grants[0].index, b->workers[w].grants[0].index);
                }
                n_live++;
            }
            assert_true(cl[1]->change_seq > 2 * CLUSTER_CHANGE_RING);
            for (int k = 0; k < 2; k++) {
                for (size_t i = 0; i < LIVE; i++)
                    placement_free(&live[k][i]);
                place_ctx_free(&ctx[k]);
                cluster_free(cl[k]);
            }
            for (int k = 0; k < 5; k++)
                job_spec_free(&specs[k]);
            score_cache_free(&sc);
            buf_free(&why);
            free(order);
        }
}

/* A drained node (schedulable = false) gets nothing new, also when the placer keeps
 * a score cache: the cache is keyed on the node's version, which draining does not
 * change, so the cached score must not stand in for the admission check. */
static void test_drained_node_gets_nothing(void **state)
{
    Buf failures = {0};
    for (size_t pi = 0; pi < policy_count(); pi++) {
        for (int cached = 0; cached < 2; cached++) {
            Cluster *c = one_pool((PoolArgs){.name = "h", .model = "H100", .gpus = 4, .nodes = 2});
            Rng rng;
            rng_seed(&rng, 1);
            PlaceCtx ctx;
            assert_int_equal(place_ctx_init(&ctx, c, policy_at(pi), &rng, NULL, NULL), 0);
            ScoreCache sc;
            assert_int_equal(score_cache_init(&sc, c->n_nodes, 1), 0);
            if (cached)
                ctx.cache = &sc;
            JobSpec j = job_gpus(1, 1);
            Request r;
            Buf why = {0};
            assert_int_equal(request_from_job(c, &j, &r, &why), 0);
            r.shape = 0;
            Placement pl = {0};
            assert_int_equal(place_job(&ctx, c, &r, &pl, &why), 1);
            place_release(c, &pl);
            cluster_set_schedulable(c, 0, false);
            cluster_set_schedulable(c, 1, false);
            State s;
            save(c, &s);
            buf_reset(&why);
            if (place_job(&ctx, c, &r, &pl, &why) != 0) {
                buf_printf(&failures, " %s%s->%s", policy_name(pi), cached ? "+cache" : "",
                           c->nodes[pl.workers[0].node].name);
            } else {
                unchanged(c, &s);
                assert_non_null(strstr(buf_str(&why), "are closed to new work"));
            }
            placement_free(&pl);
            place_ctx_free(&ctx);
            score_cache_free(&sc);
            buf_free(&why);
            cluster_free(c);
        }
    }
    bool ok = failures.len == 0;
    char msg[512];
    snprintf(msg, sizeof(msg), "%s", buf_str(&failures));
    buf_free(&failures);
    if (!ok)
        fail_msg("workers placed on a drained node:%s", msg);
}

/* gpuorch without a mix packs: a second 1g slice goes to the GPU already
 * partitioned for the first, not into a whole GPU on another node. */
static void test_gpuorch_packs_slices(void **state)
{
    Cluster *c =
        one_pool((PoolArgs){.name = "h", .model = "H100", .gpus = 1, .nodes = 2, .mig = true});
    Placement a = {0}, b = {0};
    Buf why = {0};
    JobSpec j = job_mig("1g.10gb", 1);
    assert_int_equal(place(c, "gpuorch", &j, &a, &why), 1);
    assert_int_equal(place(c, "gpuorch", &j, &b, &why), 1);
    uint32_t first = a.workers[0].node, second = b.workers[0].node;
    unsigned whole_left = c->nodes[1 - first].free_whole;
    job_spec_free(&j);
    placement_free(&a);
    placement_free(&b);
    buf_free(&why);
    cluster_free(c);
    if (first != second)
        fail_msg("second 1g.10gb went to node %u, cutting a whole GPU, while node %u has 6 "
                 "free slices",
                 second, first);
    assert_int_equal(whole_left, 1);
}

static void test_policy_table(void **state)
{
    assert_true(policy_count() >= 9);
    const char *names[] = {"gpuorch",     "first-fit",      "best-fit", "random",     "k8s-default",
                           "dot-product", "gpu-clustering", "fgd",      "gpu-packing"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        const Policy *p = policy_find(names[i]);
        assert_non_null(p);
        assert_string_equal(p->name, names[i]);
        assert_non_null(p->score);
        assert_true(strlen(p->about) > 10);
    }
    assert_ptr_equal(policy_find("GPUORCH"), policy_find("gpuorch"));
    assert_null(policy_find("nope"));
    assert_null(policy_at(policy_count()));
    assert_int_equal(policy_find("k8s-default")->flags & (POLICY_INDIVISIBLE | POLICY_NO_GANG),
                     POLICY_INDIVISIBLE | POLICY_NO_GANG);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_policy_table),
        cmocka_unit_test(test_whole_gpus),
        cmocka_unit_test(test_nvlink_pairs),
        cmocka_unit_test(test_nvlink_reported),
        cmocka_unit_test(test_mps_shares),
        cmocka_unit_test(test_mig_by_profile),
        cmocka_unit_test(test_mig_by_memory),
        cmocka_unit_test(test_memory_shares),
        cmocka_unit_test(test_mig_recarve),
        cmocka_unit_test(test_mig_needs_mig_node),
        cmocka_unit_test(test_gang_all_or_nothing),
        cmocka_unit_test(test_scope),
        cmocka_unit_test(test_preferred_scope_packs),
        cmocka_unit_test(test_k8s_default),
        cmocka_unit_test(test_reasons),
        cmocka_unit_test(test_release_restores),
        cmocka_unit_test(test_request_from_job),
        cmocka_unit_test(test_spot_only_for_saved_work),
        cmocka_unit_test(test_tiers_in_placement),
        cmocka_unit_test(test_score_cache_same_result),
        cmocka_unit_test(test_fit_sets_same_result),
        cmocka_unit_test(test_drained_node_gets_nothing),
        cmocka_unit_test(test_gpuorch_packs_slices),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
