/* test_frag.c: fragmentation against the expected mix (core/frag.c), against values
 * worked out by hand from the FGD paper's definition (../shared/traces/fgd-results/
 * PROTOCOL.md 6.6) and from frag.h's two refinements. FGD's categories: CPU-only work
 * and the wrong model count all idle compute; a request the node can host counts only
 * the GPUs whose free room is below its need; one it cannot host (too few GPUs, too
 * little CPU) counts all idle. Host-aware adds the GPU capacity CPU or memory would
 * strand and refuses on memory. MIG: a MIG request counts a partitioned GPU's idle
 * compute minus what its still-addable instances hold; shares and whole GPUs cannot
 * use a GPU with busy instances. Also: the what-if view edits, the per-node cache
 * (same value as a fresh computation, recomputed after a change), the scarcity
 * weighting, and the leftover waste (what of a GPU's free room no sum of common shares
 * fills). Every policy that scores fragmentation (fgd, gpuorch) stands on these
 * numbers, so each category is pinned on its own before they are summed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core/cluster.h"
#include "core/frag.h"
#include "core/job.h"
#include "core/mix.h"
#include "util/buf.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define GIB 1024u

/* ---- building clusters ---- */

typedef struct PoolArgs {
    const char *name, *model;
    unsigned gpus, nodes;
    bool mig;
    uint32_t cpu_milli, memory_mib;
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
        .interconnect = IC_PCIE,
        .mig = a.mig,
        .cpu_milli = a.cpu_milli ? a.cpu_milli : 64000,
        .memory_mib = a.memory_mib ? a.memory_mib : 512 * GIB,
    };
    mig_layout_clear(&p.initial_mig);
    int pi = cluster_add_pool(c, &p);
    assert_true(pi >= 0);
    assert_int_equal(cluster_add_pool_nodes(c, (uint32_t)pi), 0);
}

static int profile(const Cluster *c, uint32_t node, const char *name)
{
    int p = catalog_profile_index(node_model(c, &c->nodes[node]), name);
    assert_true(p >= 0);
    return p;
}

static void apply_whole(Cluster *c, uint32_t node, unsigned index, uint32_t cpu)
{
    WorkerAlloc w = {.node = node, .cpu_milli = cpu, .n_grants = 1};
    w.grants[0] = (Grant){.index = (uint8_t)index, .kind = GRANT_WHOLE};
    cluster_apply_worker(c, &w);
}

static void apply_share(Cluster *c, uint32_t node, unsigned index, unsigned milli, uint32_t cpu)
{
    WorkerAlloc w = {.node = node, .cpu_milli = cpu, .n_grants = 1};
    w.grants[0] = (Grant){.index = (uint8_t)index, .kind = GRANT_SHARE, .milli = (uint16_t)milli};
    cluster_apply_worker(c, &w);
}

static void apply_mig(Cluster *c, uint32_t node, unsigned index, const char *prof, unsigned start,
                      uint32_t cpu)
{
    WorkerAlloc w = {.node = node, .cpu_milli = cpu, .n_grants = 1};
    w.grants[0] = (Grant){.index = (uint8_t)index,
                          .kind = GRANT_MIG,
                          .mig_profile = (uint8_t)profile(c, node, prof),
                          .mig_start = (uint8_t)start};
    cluster_apply_worker(c, &w);
}

/* Set GPU `index` of node to the listed instances (profile name, start; NULL ends). */
static void set_layout(Cluster *c, uint32_t node, unsigned index, const char *const *prof,
                       const unsigned *start)
{
    MigLayout l;
    mig_layout_clear(&l);
    for (size_t i = 0; prof[i]; i++)
        l.profile_at[start[i]] = (uint8_t)profile(c, node, prof[i]);
    assert_int_equal(cluster_set_mig(c, node, index, &l), 0);
}

/* ---- requests and mixes ---- */

typedef struct Shape {
    ReqKind req;
    unsigned gpus, milli; /* REQ_GPUS: gpus; REQ_FRACTION: milli */
    const char *mig;      /* REQ_MIG */
    const char *model;    /* only this model; NULL = any */
    uint32_t cpu_milli, memory_mib;
} Shape;

static Request request(const Cluster *c, Shape s)
{
    JobSpec j;
    job_spec_init(&j);
    j.req = (uint8_t)s.req;
    j.gpus = (uint16_t)s.gpus;
    j.fraction_milli = (uint16_t)s.milli;
    j.mig = s.mig ? strdup(s.mig) : NULL;
    j.cpu_milli = s.cpu_milli;
    j.memory_mib = s.memory_mib;
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

/* The fragmentation of `node` against a mix of one shape of weight 1. */
static double frag_one(const Cluster *c, uint32_t node, Shape s, bool host_aware)
{
    Mix m = {0};
    Request r = request(c, s);
    assert_int_equal(mix_add(&m, &r, 1.0), 0);
    FragMix fm;
    assert_int_equal(frag_mix_init(&fm, &m), 0);
    NodeView v;
    frag_view(c, &c->nodes[node], &v);
    double f = frag_node(&fm, &v, host_aware);
    frag_mix_free(&fm);
    mix_free(&m);
    return f;
}

static double frag_of_view(const Cluster *c, const NodeView *v, Shape s, bool host_aware)
{
    Mix m = {0};
    Request r = request(c, s);
    assert_int_equal(mix_add(&m, &r, 1.0), 0);
    FragMix fm;
    assert_int_equal(frag_mix_init(&fm, &m), 0);
    double f = frag_node(&fm, v, host_aware);
    frag_mix_free(&fm);
    mix_free(&m);
    return f;
}

#define EPS 1e-9

/* ---- FGD's categories ---- */

/* One 8-GPU V100 node: GPU0 shared with 700 free, GPU1 shared with 500 free, GPU2 a
 * whole GPU in use, GPUs 3-7 idle: 6200 idle thousandths, 4 cores of CPU left. */
static Cluster *fgd_node(void)
{
    Cluster *c = cluster_new("f");
    assert_non_null(c);
    add(c, (PoolArgs){.name = "v", .model = "V100", .gpus = 8});
    add(c, (PoolArgs){.name = "t", .model = "T4", .gpus = 4});
    apply_share(c, 0, 0, 300, 20000);
    apply_share(c, 0, 1, 500, 20000);
    apply_whole(c, 0, 2, 20000);
    assert_true(cluster_consistent(c));
    return c;
}

static void test_fgd_categories(void **state)
{
    (void)state;
    Cluster *c = fgd_node();
    NodeView v;
    frag_view(c, &c->nodes[0], &v);
    assert_int_equal(frag_idle(&v), 6200);

    /* CPU-only work: all idle GPU compute is a fragment to it */
    assert_float_equal(frag_one(c, 0, (Shape){.req = REQ_NONE, .cpu_milli = 1000}, false), 6200,
                       EPS);
    /* the wrong model: all idle */
    assert_float_equal(
        frag_one(c, 0, (Shape){.req = REQ_GPUS, .gpus = 1, .model = "T4", .cpu_milli = 1000},
                 false),
        6200, EPS);
    /* hostable share of 0.6: only GPU1 (500) and GPU2 (0) are below its need */
    assert_float_equal(
        frag_one(c, 0, (Shape){.req = REQ_FRACTION, .milli = 600, .cpu_milli = 1000}, false), 500,
        EPS);
    /* 0.7 fits GPU0's 700 exactly (>=), so GPU0 is not a fragment to it */
    assert_float_equal(
        frag_one(c, 0, (Shape){.req = REQ_FRACTION, .milli = 700, .cpu_milli = 1000}, false), 500,
        EPS);
    /* 0.71 does not: GPU0 joins */
    assert_float_equal(
        frag_one(c, 0, (Shape){.req = REQ_FRACTION, .milli = 710, .cpu_milli = 1000}, false), 1200,
        EPS);
    /* two whole GPUs: every partly used GPU (700 + 500) is a fragment */
    assert_float_equal(
        frag_one(c, 0, (Shape){.req = REQ_GPUS, .gpus = 2, .cpu_milli = 1000}, false), 1200, EPS);
    /* five whole GPUs: exactly the five idle ones, still hostable */
    assert_float_equal(
        frag_one(c, 0, (Shape){.req = REQ_GPUS, .gpus = 5, .cpu_milli = 1000}, false), 1200, EPS);
    /* six: too few GPUs, all idle */
    assert_float_equal(
        frag_one(c, 0, (Shape){.req = REQ_GPUS, .gpus = 6, .cpu_milli = 1000}, false), 6200, EPS);
    /* not enough CPU (8 cores asked, 4 left): all idle */
    assert_float_equal(
        frag_one(c, 0, (Shape){.req = REQ_FRACTION, .milli = 200, .cpu_milli = 8000}, false), 6200,
        EPS);
    /* exactly the CPU left: hostable, and no GPU is below 0.2 but GPU2 (0 free) */
    assert_float_equal(
        frag_one(c, 0, (Shape){.req = REQ_FRACTION, .milli = 200, .cpu_milli = 4000}, false), 0,
        EPS);
    /* FGD ignores memory: more than the node has still counts as hostable */
    assert_float_equal(
        frag_one(c, 0,
                 (Shape){.req = REQ_GPUS, .gpus = 1, .cpu_milli = 1000, .memory_mib = 1024 * GIB},
                 false),
        1200, EPS);

    /* weighted: 0.5 x 6200 + 2 x 500 + 1 x 1200 + 0.25 x 6200 = 6850 */
    Mix m = {0};
    Request r;
    r = request(c, (Shape){.req = REQ_NONE, .cpu_milli = 1000});
    assert_int_equal(mix_add(&m, &r, 0.5), 0);
    r = request(c, (Shape){.req = REQ_FRACTION, .milli = 600, .cpu_milli = 1000});
    assert_int_equal(mix_add(&m, &r, 2), 0);
    r = request(c, (Shape){.req = REQ_GPUS, .gpus = 2, .cpu_milli = 1000});
    assert_int_equal(mix_add(&m, &r, 1), 0);
    r = request(c, (Shape){.req = REQ_FRACTION, .milli = 200, .cpu_milli = 8000});
    assert_int_equal(mix_add(&m, &r, 0.25), 0);
    FragMix fm;
    assert_int_equal(frag_mix_init(&fm, &m), 0);
    assert_int_equal(fm.n, 4);
    assert_float_equal(frag_node(&fm, &v, false), 6850, EPS);

    /* a node with nothing idle has no fragment, whatever the mix */
    Cluster *full = cluster_new("full");
    assert_non_null(full);
    add(full, (PoolArgs){.name = "v", .model = "V100", .gpus = 2});
    apply_whole(full, 0, 0, 0);
    apply_whole(full, 0, 1, 0);
    NodeView fv;
    frag_view(full, &full->nodes[0], &fv);
    assert_float_equal(frag_node(&fm, &fv, false), 0, EPS);
    assert_float_equal(frag_node(&fm, &fv, true), 0, EPS);
    cluster_free(full);

    frag_mix_free(&fm);
    mix_free(&m);
    cluster_free(c);
}

/* ---- host-aware ---- */

static void test_host_aware(void **state)
{
    (void)state;
    Cluster *c = cluster_new("h");
    assert_non_null(c);
    add(c,
        (PoolArgs){
            .name = "v", .model = "V100", .gpus = 8, .cpu_milli = 64000, .memory_mib = 256 * GIB});
    add(c,
        (PoolArgs){
            .name = "u", .model = "V100", .gpus = 8, .cpu_milli = 64000, .memory_mib = 256 * GIB});

    /* empty node 0. One GPU and 16 cores: the GPUs take 8, the CPU 4: 4 GPUs stranded */
    Shape s = {.req = REQ_GPUS, .gpus = 1, .cpu_milli = 16000};
    assert_float_equal(frag_one(c, 0, s, false), 0, EPS);
    assert_float_equal(frag_one(c, 0, s, true), 4000, EPS);
    /* two GPUs and 20 cores: 4 copies by GPU, 3 by CPU: (4 - 3) x 2 x 1000 */
    s = (Shape){.req = REQ_GPUS, .gpus = 2, .cpu_milli = 20000};
    assert_float_equal(frag_one(c, 0, s, true), 2000, EPS);
    /* a quarter GPU and 10 cores: 32 copies by GPU, 6 by CPU: (32 - 6) x 250 */
    s = (Shape){.req = REQ_FRACTION, .milli = 250, .cpu_milli = 10000};
    assert_float_equal(frag_one(c, 0, s, false), 0, EPS);
    assert_float_equal(frag_one(c, 0, s, true), 6500, EPS);
    /* memory strands too: 100 GiB each, 256 GiB: 2 copies, 6 GPUs stranded */
    s = (Shape){.req = REQ_GPUS, .gpus = 1, .memory_mib = 100 * GIB};
    assert_float_equal(frag_one(c, 0, s, false), 0, EPS);
    assert_float_equal(frag_one(c, 0, s, true), 6000, EPS);
    /* more memory than the node has: host-aware refuses (all idle), FGD does not */
    s = (Shape){.req = REQ_GPUS, .gpus = 1, .cpu_milli = 1000, .memory_mib = 300 * GIB};
    assert_float_equal(frag_one(c, 0, s, false), 0, EPS);
    assert_float_equal(frag_one(c, 0, s, true), 8000, EPS);
    /* enough host for every copy: nothing stranded */
    s = (Shape){.req = REQ_GPUS, .gpus = 1, .cpu_milli = 8000, .memory_mib = 32 * GIB};
    assert_float_equal(frag_one(c, 0, s, true), 0, EPS);
    /* CPU-only work: all idle in both */
    s = (Shape){.req = REQ_NONE, .cpu_milli = 1000};
    assert_float_equal(frag_one(c, 0, s, true), 8000, EPS);

    /* node 1 in use: GPU0 shared with 700 free, 40 cores left */
    apply_share(c, 1, 0, 300, 24000);
    /* half GPUs, 8 cores: 1 + 7 x 2 = 15 copies by GPU, 5 by CPU: (15 - 5) x 500 */
    s = (Shape){.req = REQ_FRACTION, .milli = 500, .cpu_milli = 8000};
    assert_float_equal(frag_one(c, 1, s, false), 0, EPS);
    assert_float_equal(frag_one(c, 1, s, true), 5000, EPS);
    /* three whole GPUs, 20 cores: GPU0 (700) is FGD's fragment; 7 / 3 = 2 copies by
     * GPU, 2 by CPU: nothing more */
    s = (Shape){.req = REQ_GPUS, .gpus = 3, .cpu_milli = 20000};
    assert_float_equal(frag_one(c, 1, s, false), 700, EPS);
    assert_float_equal(frag_one(c, 1, s, true), 700, EPS);
    /* 30 cores: 1 copy by CPU: (2 - 1) x 3 x 1000 more */
    s.cpu_milli = 30000;
    assert_float_equal(frag_one(c, 1, s, true), 3700, EPS);
    cluster_free(c);
}

/* ---- MIG ---- */

/* A 4-GPU A30 node (4 compute slices, 4 memory slots) with MIG allowed:
 *  GPU0: 1g.6gb@0 (busy), 1g.6gb@1, 2g.12gb@2: 3 of 4 slices idle = 750;
 *  GPU1: 4g.24gb@0, idle: counts as a whole idle GPU (MIG can be turned off);
 *  GPU2: shared, 500 free;
 *  GPU3: free, not partitioned.
 * 3250 idle thousandths; 62 cores left. Node 1 is an A30 node without MIG. */
static Cluster *mig_node(void)
{
    Cluster *c = cluster_new("m");
    assert_non_null(c);
    add(c, (PoolArgs){.name = "a", .model = "A30", .gpus = 4, .mig = true});
    add(c, (PoolArgs){.name = "b", .model = "A30", .gpus = 4, .mig = false});
    set_layout(c, 0, 0, (const char *[]){"1g.6gb", "1g.6gb", "2g.12gb", NULL},
               (const unsigned[]){0, 1, 2});
    apply_mig(c, 0, 0, "1g.6gb", 0, 1000);
    set_layout(c, 0, 1, (const char *[]){"4g.24gb", NULL}, (const unsigned[]){0});
    apply_share(c, 0, 2, 500, 1000);
    assert_true(cluster_consistent(c));
    return c;
}

static void test_mig(void **state)
{
    (void)state;
    Cluster *c = mig_node();
    Shape s = {.req = REQ_MIG, .mig = "1g.6gb", .cpu_milli = 1000};
    /* 1g.6gb: GPU0 can add 3 (slots 1-3, 3 slices) = 750, all of its idle; GPU1 and
     * GPU3 4 each; GPU2 is shared and cannot be partitioned: 500 */
    assert_float_equal(frag_one(c, 0, s, false), 500, EPS);
    /* 2g.12gb: GPU0 only at slot 2 (slot 0 is taken), 1 x 500 of its 750: 250 lost */
    s.mig = "2g.12gb";
    assert_float_equal(frag_one(c, 0, s, false), 750, EPS);
    /* 4g.24gb: GPU0 none (750 lost); GPU1 by re-carving its idle instance, GPU3 */
    s.mig = "4g.24gb";
    assert_float_equal(frag_one(c, 0, s, false), 1250, EPS);
    /* a whole GPU cannot use GPU0 (busy instances): 750, nor GPU2 (500) */
    assert_float_equal(
        frag_one(c, 0, (Shape){.req = REQ_GPUS, .gpus = 1, .cpu_milli = 1000}, false), 1250, EPS);
    /* two whole GPUs: GPU1 (idle MIG) and GPU3 */
    assert_float_equal(
        frag_one(c, 0, (Shape){.req = REQ_GPUS, .gpus = 2, .cpu_milli = 1000}, false), 1250, EPS);
    /* three: cannot host, all idle */
    assert_float_equal(
        frag_one(c, 0, (Shape){.req = REQ_GPUS, .gpus = 3, .cpu_milli = 1000}, false), 3250, EPS);
    /* a quarter share cannot use GPU0 either, though 750 of it is idle; GPU2 takes it */
    assert_float_equal(
        frag_one(c, 0, (Shape){.req = REQ_FRACTION, .milli = 250, .cpu_milli = 1000}, false), 750,
        EPS);
    assert_float_equal(
        frag_one(c, 0, (Shape){.req = REQ_FRACTION, .milli = 600, .cpu_milli = 1000}, false), 1250,
        EPS);
    /* host-aware 1g.6gb with 10 cores: 3 + 4 + 0 + 4 = 11 instances by GPU, 62 / 10 = 6
     * by CPU: (11 - 6) x 250 more */
    assert_float_equal(
        frag_one(c, 0, (Shape){.req = REQ_MIG, .mig = "1g.6gb", .cpu_milli = 10000}, true),
        500 + 1250, EPS);
    /* a MIG request on a node where MIG is not allowed cannot be hosted: all idle */
    assert_float_equal(
        frag_one(c, 1, (Shape){.req = REQ_MIG, .mig = "1g.6gb", .cpu_milli = 1000}, false), 4000,
        EPS);
    cluster_free(c);
}

/* ---- the what-if view ---- */

static void test_view_take(void **state)
{
    (void)state;
    Cluster *c = cluster_new("v");
    assert_non_null(c);
    add(c, (PoolArgs){.name = "v", .model = "V100", .gpus = 6, .memory_mib = 64 * GIB});
    apply_share(c, 0, 0, 300, 10000);
    apply_whole(c, 0, 2, 10000);
    NodeView v;
    frag_view(c, &c->nodes[0], &v);
    assert_int_equal(v.n, 6);
    assert_int_equal(v.model, c->nodes[0].model);
    assert_int_equal(v.cpu_left_milli, 44000);
    assert_int_equal(v.mem_left_mib, 64 * GIB);
    assert_int_equal(v.mig_index, -1);
    const uint16_t left0[6] = {700, 1000, 0, 1000, 1000, 1000};
    assert_memory_equal(v.left, left0, sizeof(left0));

    /* whole GPUs: the lowest-index fully idle ones, plus the host resources */
    Request r = request(c, (Shape){.req = REQ_GPUS, .gpus = 2, .cpu_milli = 4000, .memory_mib = 8});
    NodeView w = v;
    frag_view_take_whole(&w, &r, 2);
    const uint16_t left1[6] = {700, 0, 0, 0, 1000, 1000};
    assert_memory_equal(w.left, left1, sizeof(left1));
    assert_int_equal(w.cpu_left_milli, 40000);
    assert_int_equal(w.mem_left_mib, 64 * GIB - 8);
    /* more than is left takes what there is (no wrap-around) */
    r.cpu_milli = 100000;
    frag_view_take_whole(&w, &r, 3);
    const uint16_t left2[6] = {700, 0, 0, 0, 0, 0};
    assert_memory_equal(w.left, left2, sizeof(left2));
    assert_int_equal(w.cpu_left_milli, 0);
    /* CPU-only work takes no GPU */
    Request cpu = request(c, (Shape){.req = REQ_NONE, .cpu_milli = 3000});
    w = v;
    frag_view_take_whole(&w, &cpu, 0);
    assert_memory_equal(w.left, left0, sizeof(left0));
    assert_int_equal(w.cpu_left_milli, 41000);

    /* a share on GPU `index` only */
    Request sh = request(c, (Shape){.req = REQ_FRACTION, .milli = 500, .cpu_milli = 1000});
    w = v;
    frag_view_take_share(&w, &sh, 0, 500);
    assert_int_equal(w.left[0], 200);
    assert_int_equal(w.left[1], 1000);
    assert_int_equal(w.cpu_left_milli, 43000);
    assert_int_equal(w.mig_index, -1);
    frag_view_take_share(&w, &sh, 0, 500);
    assert_int_equal(w.left[0], 0);
    /* the view is a copy: the node is untouched */
    assert_int_equal(c->nodes[0].cpu_used_milli, 20000);
    cluster_free(c);

    /* MIG (the node of test_mig) */
    c = mig_node();
    frag_view(c, &c->nodes[0], &v);
    Shape one = {.req = REQ_MIG, .mig = "1g.6gb", .cpu_milli = 1000};
    Shape two = {.req = REQ_MIG, .mig = "2g.12gb", .cpu_milli = 1000};
    Shape whole = {.req = REQ_GPUS, .gpus = 1, .cpu_milli = 1000};
    Request rm = request(c, one);
    int p1 = profile(c, 0, "1g.6gb"), p2 = profile(c, 0, "2g.12gb");
    /* reuse GPU0's idle 1g.6gb@1: same layout, slot 1 busy too; 2 slices idle = 500,
     * all usable by 1g.6gb (slots 2, 3) and by 2g.12gb (slot 2) */
    w = v;
    frag_view_take_mig(&w, &rm, 0, p1, 1);
    assert_int_equal(w.mig_index, 0);
    assert_memory_equal(&w.mig_layout, &node_gpu_c(c, &c->nodes[0], 0)->mig, sizeof(MigLayout));
    assert_int_equal(w.mig_busy, 0x3);
    assert_int_equal(w.cpu_left_milli, 61000);
    assert_float_equal(frag_of_view(c, &w, one, false), 500, EPS);
    assert_float_equal(frag_of_view(c, &w, two, false), 500, EPS);
    /* 2g.12gb@2 on GPU1 re-carves its idle 4g.24gb away */
    Request r2 = request(c, two);
    w = v;
    frag_view_take_mig(&w, &r2, 1, p2, 2);
    assert_int_equal(w.mig_index, 1);
    MigLayout want;
    mig_layout_clear(&want);
    want.profile_at[2] = (uint8_t)p2;
    assert_memory_equal(&w.mig_layout, &want, sizeof(want));
    assert_int_equal(w.mig_busy, 0x4);
    /* GPU1 is now partitioned and busy: 500 idle, which a whole GPU cannot use */
    assert_float_equal(frag_of_view(c, &w, whole, false), 750 + 500 + 500, EPS);
    /* 1g.6gb@0 on the unpartitioned GPU3 partitions it */
    w = v;
    frag_view_take_mig(&w, &rm, 3, p1, 0);
    mig_layout_clear(&want);
    want.profile_at[0] = (uint8_t)p1;
    assert_memory_equal(&w.mig_layout, &want, sizeof(want));
    assert_int_equal(w.mig_busy, 0x1);
    /* whole GPUs now have only GPU1: 750 + 500 + 750 lost */
    assert_float_equal(frag_of_view(c, &w, whole, false), 2000, EPS);
    /* a share on the idle partitioned GPU1 turns MIG off there */
    Request rs = request(c, (Shape){.req = REQ_FRACTION, .milli = 250, .cpu_milli = 1000});
    w = v;
    frag_view_take_share(&w, &rs, 1, 250);
    assert_int_equal(w.mig_index, 1);
    assert_true(mig_layout_empty(&w.mig_layout));
    assert_int_equal(w.mig_busy, 0);
    assert_int_equal(w.left[1], 750);
    /* GPU1 is a shared GPU with 750 free now: 1g.6gb cannot partition it */
    assert_float_equal(frag_of_view(c, &w, one, false), 500 + 750, EPS);
    cluster_free(c);
}

/* A whole GPU taken in the view from an idle partitioned GPU (MIG on, no instance in
 * use; the placer turns MIG off to use it) is gone from the view like any other. The
 * node of test_mig: taking one whole GPU takes GPU1 (GPU0 is busy), leaving GPU3 the
 * only whole GPU, so two whole GPUs no longer fit: all 750 + 500 + 1000 idle is a
 * fragment to them. (Freed before the verdict, so a failure reads clean.) */
static void test_view_take_whole_idle_mig(void **state)
{
    (void)state;
    Cluster *c = mig_node();
    NodeView v;
    frag_view(c, &c->nodes[0], &v);
    Request r = request(c, (Shape){.req = REQ_GPUS, .gpus = 1, .cpu_milli = 1000});
    frag_view_take_whole(&v, &r, 1);
    unsigned left1 = v.left[1], idle = frag_idle(&v);
    double two = frag_of_view(c, &v, (Shape){.req = REQ_GPUS, .gpus = 2, .cpu_milli = 1000}, false);
    double one = frag_of_view(c, &v, (Shape){.req = REQ_GPUS, .gpus = 1, .cpu_milli = 1000}, false);
    cluster_free(c);
    assert_int_equal(left1, 0);
    /* frag_idle counts idle as frag_node does: GPU0's free slices (750) too */
    assert_int_equal(idle, 2250);
    if (fabs(two - 2250) > EPS || fabs(one - 1250) > EPS)
        fail_msg("after taking idle partitioned GPU1 whole: 2-GPU fragment %g (want 2250), "
                 "1-GPU fragment %g (want 1250); frag_node still counts GPU1 as 1000 idle",
                 two, one);
}

/* ---- the cache ---- */

static void test_cache(void **state)
{
    (void)state;
    Cluster *c = cluster_new("c");
    assert_non_null(c);
    add(c, (PoolArgs){.name = "v", .model = "V100", .gpus = 4, .nodes = 2, .cpu_milli = 32000});
    Mix m = {0};
    Request r = request(c, (Shape){.req = REQ_GPUS, .gpus = 1, .cpu_milli = 6000});
    assert_int_equal(mix_add(&m, &r, 0.6), 0);
    r = request(c, (Shape){.req = REQ_FRACTION, .milli = 400, .cpu_milli = 2000});
    assert_int_equal(mix_add(&m, &r, 0.4), 0);
    apply_share(c, 0, 1, 500, 8000);

    FragCache fc;
    assert_int_equal(frag_cache_init(&fc, c, &m), 0);
    double fresh[2][2];
    for (uint32_t i = 0; i < 2; i++)
        for (int h = 0; h < 2; h++) {
            NodeView v;
            frag_view(c, &c->nodes[i], &v);
            fresh[i][h] = frag_node(&fc.fm, &v, h);
            assert_float_equal(frag_cache_base(&fc, c, i, h), fresh[i][h], EPS);
            /* and again, from the cache */
            assert_float_equal(frag_cache_base(&fc, c, i, h), fresh[i][h], EPS);
        }
    /* node 0: GPU1 (500) below a whole GPU: 0.6 x 500; host-aware: 3 whole copies,
     * 24 / 6 = 4 by CPU; shares: 2 + 2 + 1 + 2 = 7 by GPU, 12 by CPU */
    assert_float_equal(fresh[0][0], 300, EPS);
    assert_float_equal(fresh[0][1], 300, EPS);
    /* node 1 idle: host-aware whole 4 copies, 32 / 6 = 5: none stranded */
    assert_float_equal(fresh[1][0], 0, EPS);
    assert_float_equal(fresh[1][1], 0, EPS);

    /* cached while the version holds: a change that bypasses cluster_* is not seen */
    c->nodes[1].cpu_used_milli += 20000;
    assert_float_equal(frag_cache_base(&fc, c, 1, true), 0, EPS);
    c->nodes[1].cpu_used_milli -= 20000;

    /* a worker on node 1 (the version moves): recomputed, and equal to a fresh value */
    apply_whole(c, 1, 0, 20000);
    NodeView v;
    frag_view(c, &c->nodes[1], &v);
    double now0 = frag_node(&fc.fm, &v, false), now1 = frag_node(&fc.fm, &v, true);
    /* 12 cores left: whole 3 copies by GPU, 2 by CPU: 0.6 x 1000 stranded; shares 6
     * by GPU and 6 by CPU: none */
    assert_float_equal(now0, 0, EPS);
    assert_float_equal(now1, 600, EPS);
    assert_float_equal(frag_cache_base(&fc, c, 1, false), now0, EPS);
    assert_float_equal(frag_cache_base(&fc, c, 1, true), now1, EPS);
    /* node 0 kept its value */
    assert_float_equal(frag_cache_base(&fc, c, 0, true), fresh[0][1], EPS);

    /* a node added after the cache was made is computed, not cached out of bounds */
    add(c, (PoolArgs){.name = "late", .model = "V100", .gpus = 2});
    frag_view(c, &c->nodes[2], &v);
    assert_float_equal(frag_cache_base(&fc, c, 2, true), frag_node(&fc.fm, &v, true), EPS);

    frag_cache_free(&fc);
    frag_cache_free(&fc); /* safe twice */
    mix_free(&m);

    /* no mix: nothing is a fragment */
    assert_int_equal(frag_cache_init(&fc, c, NULL), 0);
    assert_int_equal(fc.fm.n, 0);
    assert_float_equal(frag_cache_base(&fc, c, 0, true), 0, EPS);
    frag_cache_free(&fc);
    cluster_free(c);
}

/* ---- scarcity ---- */

static void test_scarcity(void **state)
{
    (void)state;
    Cluster *c = cluster_new("s");
    assert_non_null(c);
    add(c, (PoolArgs){.name = "small", .model = "V100", .gpus = 8, .nodes = 4});
    add(c, (PoolArgs){.name = "big", .model = "V100", .gpus = 8, .cpu_milli = 128000});
    add(c, (PoolArgs){.name = "t4", .model = "T4", .gpus = 4, .nodes = 2});
    add(c, (PoolArgs){.name = "a30m", .model = "A30", .gpus = 4, .mig = true});
    add(c, (PoolArgs){.name = "a30", .model = "A30", .gpus = 4});
    assert_int_equal(c->n_nodes, 9);
    Shape shapes[] = {
        {.req = REQ_NONE, .cpu_milli = 1000},                           /* every node */
        {.req = REQ_GPUS, .gpus = 8, .cpu_milli = 96000},               /* the big node */
        {.req = REQ_GPUS, .gpus = 1, .model = "T4"},                    /* 2 nodes */
        {.req = REQ_MIG, .mig = "1g.6gb"},                              /* the MIG A30 */
        {.req = REQ_FRACTION, .milli = 500},                            /* every node */
        {.req = REQ_NONE, .cpu_milli = 1000, .memory_mib = 1024 * GIB}, /* none */
        {.req = REQ_GPUS, .gpus = 5, .cpu_milli = 64000},               /* small, big */
    };
    const double w0[] = {1, 0.5, 2, 1, 1, 1, 1};
    const double cap20[] = {1, 0.5 * 9, 2 * 4.5, 9, 1, 20, 9.0 / 5};
    const double cap5[] = {1, 0.5 * 5, 2 * 4.5, 5, 1, 5, 9.0 / 5};
    size_t n = sizeof(shapes) / sizeof(shapes[0]);
    Mix m = {0};
    for (size_t i = 0; i < n; i++) {
        Request r = request(c, shapes[i]);
        assert_int_equal(mix_add(&m, &r, w0[i]), 0);
    }
    assert_int_equal(m.n, n);
    FragMix fm;
    assert_int_equal(frag_mix_init(&fm, &m), 0);
    frag_mix_by_scarcity(&fm, c, 20);
    for (size_t i = 0; i < n; i++)
        assert_float_equal(fm.e[i].weight, cap20[i], EPS);
    frag_mix_free(&fm);
    assert_int_equal(frag_mix_init(&fm, &m), 0);
    frag_mix_by_scarcity(&fm, c, 5);
    for (size_t i = 0; i < n; i++)
        assert_float_equal(fm.e[i].weight, cap5[i], EPS);
    frag_mix_free(&fm);

    /* "when empty": a full node still counts as a home */
    for (unsigned g = 0; g < 8; g++)
        apply_whole(c, 4, g, 0);
    assert_int_equal(frag_mix_init(&fm, &m), 0);
    frag_mix_by_scarcity(&fm, c, 20);
    assert_float_equal(fm.e[1].weight, 0.5 * 9, EPS);
    frag_mix_free(&fm);
    mix_free(&m);
    cluster_free(c);
}

/* frag_leftover_waste on shares of 470, 320 and 650 (weights 0.5, 0.3, 0.2), a rare 160
 * (0.005) and whole GPUs (never fillers), worked by hand as an unbounded knapsack:
 *   common sizes only (min weight 0.01): 210 left takes nothing (210 wasted); 530 takes
 *   a 470 (60); 680 a 650 (30); 790 = 470 + 320 and 940 = 470 + 470 (0); 1000, a whole
 *   idle GPU, counts as filled;
 *   the rare 160 too (min weight 0): 210 takes a 160 (50); 530 = 320 + 160 (50). */
static void test_leftover_waste(void **state)
{
    (void)state;
    Cluster *c = cluster_new("w");
    assert_non_null(c);
    add(c, (PoolArgs){.name = "v", .model = "V100", .gpus = 8});
    const unsigned sizes[] = {470, 320, 650, 160};
    const double weights[] = {0.5, 0.3, 0.2, 0.005};
    Mix m = {0};
    for (size_t i = 0; i < 4; i++) {
        Request r = request(c, (Shape){.req = REQ_FRACTION, .milli = sizes[i]});
        assert_int_equal(mix_add(&m, &r, weights[i]), 0);
    }
    Request whole = request(c, (Shape){.req = REQ_GPUS, .gpus = 1});
    assert_int_equal(mix_add(&m, &whole, 1.0), 0);
    FragMix fm;
    assert_int_equal(frag_mix_init(&fm, &m), 0);
    uint8_t model = c->nodes[0].model;
    uint16_t w[1001];
    frag_leftover_waste(&fm, model, 0.01, w);
    const unsigned left[] = {0, 100, 210, 530, 680, 790, 940, 1000};
    const unsigned common[] = {0, 100, 210, 60, 30, 0, 0, 0};
    const unsigned all[] = {0, 100, 50, 50, 30, 0, 0, 0};
    for (size_t i = 0; i < 8; i++)
        assert_int_equal(w[left[i]], common[i]);
    frag_leftover_waste(&fm, model, 0, w);
    for (size_t i = 0; i < 8; i++)
        assert_int_equal(w[left[i]], all[i]);
    frag_mix_free(&fm);
    mix_free(&m);
    cluster_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fgd_categories),
        cmocka_unit_test(test_host_aware),
        cmocka_unit_test(test_mig),
        cmocka_unit_test(test_view_take),
        cmocka_unit_test(test_view_take_whole_idle_mig),
        cmocka_unit_test(test_cache),
        cmocka_unit_test(test_scarcity),
        cmocka_unit_test(test_leftover_waste),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
