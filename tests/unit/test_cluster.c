/* test_cluster.c: the cluster state (core/cluster.c). Building: node names, leaves
 * and spines dealt round-robin, models resolved through the catalogue (unknown ones
 * become non-MIG models with the memory given), limits and duplicates refused.
 * Allocation: applying and releasing whole-GPU, MPS-share and MIG grants must keep
 * every counter exact, because the placer reads the counters instead of the GPUs; a
 * seeded random driver checks them after every step against a shadow state kept in
 * this file. MIG changes that would destroy busy instances or make an invalid
 * layout are refused and leave everything as it was. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core/cluster.h"
#include "util/rng.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const Pool pool_defaults = {
    .tier = TIER_OWNED,
    .price_micro_usd = 2000000,
    .nodes = 1,
    .gpus = 8,
    .interconnect = IC_NVSWITCH,
    .cpu_milli = 64000,
    .memory_mib = 512 * 1024,
};

/* A pool of `nodes` nodes of `gpus` GPUs of model index `model`, added with its nodes. */
static int add_pool(Cluster *c, const char *name, int model, unsigned gpus, unsigned nodes,
                    const uint32_t *leaves, size_t n_leaves, bool mig)
{
    Pool p = pool_defaults;
    p.name = (char *)name;
    p.model = (uint8_t)model;
    p.gpus = (uint8_t)gpus;
    p.nodes = nodes;
    p.leaves = (uint32_t *)leaves;
    p.n_leaves = n_leaves;
    p.mig = mig;
    mig_layout_clear(&p.initial_mig);
    int pi = cluster_add_pool(c, &p);
    assert_true(pi >= 0);
    assert_int_equal(cluster_add_pool_nodes(c, (uint32_t)pi), 0);
    return pi;
}

static int profile(const Cluster *c, uint32_t node, const char *name)
{
    int p = catalog_profile_index(node_model(c, &c->nodes[node]), name);
    assert_true(p >= 0);
    return p;
}

static void test_build_and_naming(void **state)
{
    Cluster *c = cluster_new("lab");
    assert_non_null(c);
    assert_string_equal(c->name, "lab");
    int h100 = cluster_model(c, "H100", 0);
    assert_int_equal(h100, 0);
    assert_int_equal(cluster_add_switch(c, "spine0", NULL), 0);
    assert_int_equal(cluster_add_switch(c, "leaf-a", "spine0"), 1);
    assert_int_equal(cluster_add_switch(c, "leaf-b", "spine0"), 2);
    assert_int_equal(cluster_add_switch(c, "leaf-c", ""), 3);
    assert_int_equal(cluster_add_switch(c, "leaf-a", NULL), -EEXIST);
    assert_int_equal(cluster_add_switch(c, "leaf-x", "nowhere"), -ENOENT);
    assert_int_equal(cluster_find_switch(c, "leaf-b"), 2);
    assert_int_equal(cluster_find_switch(c, "leaf-z"), -1);

    uint32_t leaves[] = {1, 2, 3};
    add_pool(c, "h100", h100, 8, 11, leaves, 3, true);
    assert_int_equal(c->n_nodes, 11);
    assert_int_equal(c->n_gpus, 88);
    for (uint32_t i = 0; i < 11; i++) {
        const Node *n = &c->nodes[i];
        char want[32];
        snprintf(want, sizeof(want), "h100-%u", i);
        assert_string_equal(n->name, want);
        assert_int_equal(cluster_find_node(c, want), (int)i);
        assert_int_equal(n->leaf, leaves[i % 3]);
        assert_int_equal(n->spine, leaves[i % 3] == 3 ? NO_SWITCH : 0u);
        assert_int_equal(n->gpu0, i * 8);
        assert_int_equal(n->n_gpus, 8);
        assert_int_equal(n->free_whole, 8);
        assert_int_equal(n->idle_mig, 0);
        assert_true(n->mig_allowed);
        assert_true(n->schedulable);
        assert_int_equal(n->cpu_milli, 64000);
        assert_int_equal(n->used_units, 0);
        for (unsigned g = 0; g < 8; g++) {
            assert_int_equal(node_gpu_c(c, n, g)->mode, GPU_WHOLE);
            assert_true(mig_layout_empty(&node_gpu_c(c, n, g)->mig));
        }
    }
    assert_true(c->switches[1].is_leaf && c->switches[2].is_leaf && c->switches[3].is_leaf);
    assert_false(c->switches[0].is_leaf);

    /* a pool without leaves: nodes hang off no switch */
    int l4 = cluster_model(c, "L4", 0);
    add_pool(c, "l4", l4, 2, 2, NULL, 0, true);
    const Node *n = &c->nodes[cluster_find_node(c, "l4-1")];
    assert_int_equal(n->leaf, NO_SWITCH);
    assert_int_equal(n->spine, NO_SWITCH);
    assert_false(n->mig_allowed); /* L4 has no MIG */
    assert_int_equal(c->max_gpus_per_node, 8);
    assert_int_equal(cluster_find_node(c, "l4-2"), -1);

    /* refusals */
    Pool p = pool_defaults;
    p.name = "h100";
    mig_layout_clear(&p.initial_mig);
    assert_int_equal(cluster_add_pool(c, &p), -EEXIST);
    p.name = "big";
    p.gpus = NODE_MAX_GPUS + 1;
    assert_int_equal(cluster_add_pool(c, &p), -E2BIG);
    p.gpus = 8;
    p.model = (uint8_t)c->n_models;
    assert_int_equal(cluster_add_pool(c, &p), -E2BIG);
    assert_int_equal(cluster_add_node(c, 99, "x", NO_SWITCH), -EINVAL);
    assert_int_equal(cluster_add_node(c, 0, "x", 99), -EINVAL);
    assert_int_equal(cluster_add_pool_nodes(c, 0), -EEXIST); /* h100-0 exists */
    assert_true(cluster_consistent(c));
    cluster_free(c);
    cluster_free(NULL);
}

static void test_teams_fabrics_names(void **state)
{
    Cluster *c = cluster_new(NULL);
    assert_non_null(c);
    char p1[] = "vision", p2[] = "speech";
    char *projects[] = {p1, p2};
    Team t = {.name = "ml",
              .guaranteed_gpus = 8,
              .burst_gpus = 16,
              .weight = 1,
              .projects = projects,
              .n_projects = 2};
    assert_int_equal(cluster_add_team(c, &t), 0);
    assert_int_equal(cluster_add_team(c, &t), -EEXIST);
    t.name = "infra";
    t.n_projects = 0;
    t.projects = NULL;
    assert_int_equal(cluster_add_team(c, &t), 1);
    strcpy(p1, "XXXXXX"); /* the cluster holds its own copies */
    assert_string_equal(c->teams[0].projects[0], "vision");
    assert_string_equal(c->teams[0].projects[1], "speech");
    assert_int_equal(cluster_find_team(c, "infra"), 1);
    assert_int_equal(cluster_find_team(c, "nobody"), -1);

    assert_int_equal(cluster_fabric(c, NULL), 0);
    assert_int_equal(cluster_fabric(c, ""), 0);
    assert_int_equal(cluster_fabric(c, "infiniband-ndr"), 1);
    assert_int_equal(cluster_fabric(c, "roce-v2"), 2);
    assert_int_equal(cluster_fabric(c, "InfiniBand-NDR"), 1);
    assert_int_equal(c->n_fabrics, 3);

    for (int t2 = 0; t2 < TIER_COUNT; t2++)
        assert_int_equal(tier_from_name(tier_name((Tier)t2)), t2);
    assert_int_equal(tier_from_name("ondemand"), TIER_ON_DEMAND);
    assert_int_equal(tier_from_name("SPOT"), TIER_SPOT);
    assert_int_equal(tier_from_name("free"), -1);
    for (int ic = IC_PCIE; ic <= IC_NVSWITCH; ic++)
        assert_int_equal(interconnect_from_name(interconnect_name((Interconnect)ic)), ic);
    assert_int_equal(interconnect_from_name("nvlink"), IC_NVLINK_PAIRS);
    assert_int_equal(interconnect_from_name("ethernet"), -1);
    cluster_free(c);
}

static void test_models(void **state)
{
    Cluster *c = cluster_new("m");
    assert_non_null(c);
    int a = cluster_model(c, "A100-SXM4-80GB", 0);
    assert_int_equal(a, 0);
    assert_true(c->models[a].in_catalog);
    assert_string_equal(c->models[a].m.name, "A100-80GB");
    assert_int_equal(c->models[a].m.mig_slots, 8);
    assert_int_equal(cluster_model(c, "A100 80GB", 0), a);
    assert_int_equal(cluster_find_model(c, "a100-80gb"), a);
    int h = cluster_model(c, "H100", 0);
    assert_int_equal(h, 1);
    assert_int_equal(cluster_model(c, "NVIDIA H100 80GB HBM3", 0), h);
    assert_int_equal(cluster_find_model(c, "H100-80GB-PCIe"), -1);

    /* unknown names: non-MIG models with the memory the spec gives */
    int u = cluster_model(c, "RTX-9999", 24000);
    assert_int_equal(u, 2);
    assert_false(c->models[u].in_catalog);
    assert_string_equal(c->models[u].m.name, "RTX-9999");
    assert_int_equal(c->models[u].m.memory_mib, 24000);
    assert_int_equal(c->models[u].m.mig_slots, 0);
    assert_int_equal(c->models[u].m.n_profiles, 0);
    assert_false(gpu_model_has_mig(&c->models[u].m));
    assert_int_equal(cluster_model(c, "rtx-9999", 99), u);
    assert_int_equal(c->models[u].m.memory_mib, 24000); /* known memory is kept */
    int q = cluster_model(c, "Mystery", 0);
    assert_int_equal(c->models[q].m.memory_mib, 0);
    assert_int_equal(cluster_model(c, "Mystery", 5000), q);
    assert_int_equal(c->models[q].m.memory_mib, 5000); /* learnt later */
    assert_int_equal(cluster_find_model(c, "nothing"), -1);

    /* a pool of the unknown model may not use MIG even if it asks */
    add_pool(c, "rtx", u, 4, 1, NULL, 0, true);
    assert_false(c->nodes[0].mig_allowed);
    MigLayout l;
    mig_layout_clear(&l);
    l.profile_at[0] = 0;
    assert_int_equal(cluster_set_mig(c, 0, 0, &l), -EINVAL);

    /* the model table is bounded */
    for (int i = (int)c->n_models; i < CLUSTER_MAX_MODELS; i++) {
        char name[32];
        snprintf(name, sizeof(name), "fake-%d", i);
        assert_int_equal(cluster_model(c, name, 1000), i);
    }
    assert_int_equal(cluster_model(c, "one-too-many", 1000), -E2BIG);
    assert_int_equal(cluster_model(c, "fake-40", 1000), 40);
    cluster_free(c);
}

static void test_initial_mig(void **state)
{
    Cluster *c = cluster_new("m");
    assert_non_null(c);
    int a = cluster_model(c, "A100-80GB", 0);
    Pool p = pool_defaults;
    p.name = "mig";
    p.model = (uint8_t)a;
    p.gpus = 4;
    p.nodes = 2;
    p.mig = true;
    mig_layout_clear(&p.initial_mig);
    p.initial_mig.profile_at[0] = (uint8_t)catalog_profile_index(&c->models[a].m, "3g.40gb");
    p.initial_mig.profile_at[4] = p.initial_mig.profile_at[0];
    int pi = cluster_add_pool(c, &p);
    assert_int_equal(cluster_add_pool_nodes(c, (uint32_t)pi), 0);
    /* the same layout on a pool that may not use MIG is ignored */
    p.name = "nomig";
    p.mig = false;
    pi = cluster_add_pool(c, &p);
    assert_int_equal(cluster_add_pool_nodes(c, (uint32_t)pi), 0);
    for (uint32_t i = 0; i < 4; i++) {
        const Node *n = &c->nodes[i];
        bool mig = i < 2;
        assert_int_equal(n->idle_mig, mig ? 4 : 0);
        assert_int_equal(n->free_whole, mig ? 0 : 4);
        for (unsigned g = 0; g < 4; g++) {
            const Gpu *gpu = node_gpu_c(c, n, g);
            assert_int_equal(gpu->mode, mig ? GPU_MIG : GPU_WHOLE);
            assert_int_equal(mig_layout_count(&gpu->mig), mig ? 2 : 0);
        }
    }
    assert_true(cluster_consistent(c));
    cluster_free(c);
}

static void test_grant_units(void **state)
{
    Cluster *c = cluster_new("u");
    assert_non_null(c);
    add_pool(c, "h", cluster_model(c, "H100", 0), 8, 1, NULL, 0, true);
    add_pool(c, "a30", cluster_model(c, "A30", 0), 4, 1, NULL, 0, true);
    const Node *h = &c->nodes[0], *a30 = &c->nodes[1];
    Grant g = {.kind = GRANT_MIG, .mig_profile = (uint8_t)profile(c, 0, "1g.10gb")};
    assert_int_equal(grant_units(c, h, &g), GPU_UNITS / 7);
    assert_int_equal(GPU_UNITS / 7 * 7, GPU_UNITS);
    g.mig_profile = (uint8_t)profile(c, 0, "1g.20gb");
    assert_int_equal(grant_units(c, h, &g), GPU_UNITS / 7); /* one compute slice */
    g.mig_profile = (uint8_t)profile(c, 0, "3g.40gb");
    assert_int_equal(grant_units(c, h, &g), 3 * GPU_UNITS / 7);
    g.mig_profile = (uint8_t)profile(c, 0, "7g.80gb");
    assert_int_equal(grant_units(c, h, &g), GPU_UNITS);
    g.mig_profile = (uint8_t)profile(c, 1, "1g.6gb");
    assert_int_equal(grant_units(c, a30, &g), GPU_UNITS / 4);
    g.mig_profile = (uint8_t)profile(c, 1, "2g.12gb");
    assert_int_equal(grant_units(c, a30, &g), GPU_UNITS / 2);
    Grant s = {.kind = GRANT_SHARE, .milli = 250};
    assert_int_equal(grant_units(c, h, &s), GPU_UNITS / 4);
    s.milli = 1;
    assert_int_equal(grant_units(c, h, &s) * 1000, GPU_UNITS);
    Grant w = {.kind = GRANT_WHOLE};
    assert_int_equal(grant_units(c, h, &w), GPU_UNITS);
    WorkerAlloc wa = {.node = 0, .n_grants = 3};
    wa.grants[0] = w;
    wa.grants[1] = (Grant){.index = 1, .kind = GRANT_SHARE, .milli = 500};
    wa.grants[2] =
        (Grant){.index = 2, .kind = GRANT_MIG, .mig_profile = (uint8_t)profile(c, 0, "2g.20gb")};
    assert_int_equal(worker_units(c, &wa), GPU_UNITS + GPU_UNITS / 2 + 2 * GPU_UNITS / 7);
    cluster_free(c);
}

/* A snapshot of everything a refused change must leave alone. */
typedef struct Snap {
    Node node;
    Gpu gpus[NODE_MAX_GPUS];
    uint64_t used;
} Snap;

static Snap snap(const Cluster *c, uint32_t node)
{
    Snap s = {.node = c->nodes[node], .used = c->used_units};
    memcpy(s.gpus, node_gpu_c(c, &c->nodes[node], 0), c->nodes[node].n_gpus * sizeof(Gpu));
    return s;
}

static void same_as(const Cluster *c, uint32_t node, const Snap *s)
{
    Snap now = snap(c, node);
    assert_memory_equal(&now.node, &s->node, sizeof(Node));
    assert_memory_equal(now.gpus, s->gpus, sizeof(s->gpus));
    assert_int_equal(now.used, s->used);
}

static void test_apply_release(void **state)
{
    Cluster *c = cluster_new("a");
    assert_non_null(c);
    add_pool(c, "a100", cluster_model(c, "A100-80GB", 0), 8, 1, NULL, 0, true);
    Node *n = &c->nodes[0];

    /* two whole GPUs */
    WorkerAlloc whole = {.node = 0, .cpu_milli = 8000, .memory_mib = 65536, .n_grants = 2};
    whole.grants[0] = (Grant){.index = 0, .kind = GRANT_WHOLE};
    whole.grants[1] = (Grant){.index = 1, .kind = GRANT_WHOLE};
    uint32_t v0 = n->version;
    cluster_apply_worker(c, &whole);
    assert_true(n->version != v0);
    assert_int_equal(n->free_whole, 6);
    assert_int_equal(n->used_units, 2 * GPU_UNITS);
    assert_int_equal(c->used_units, 2 * GPU_UNITS);
    assert_int_equal(n->cpu_used_milli, 8000);
    assert_int_equal(n->memory_used_mib, 65536);
    assert_int_equal(n->workers_by_gpus[2], 1);
    assert_int_equal(node_gpu(c, n, 0)->used_units, GPU_UNITS);
    assert_true(cluster_consistent(c));

    /* shares of GPU 2 up to the full GPU */
    WorkerAlloc s1 = {.node = 0, .n_grants = 1}, s2 = s1;
    s1.grants[0] = (Grant){.index = 2, .kind = GRANT_SHARE, .milli = 300};
    s2.grants[0] = (Grant){.index = 2, .kind = GRANT_SHARE, .milli = 700};
    cluster_apply_worker(c, &s1);
    assert_int_equal(node_gpu(c, n, 2)->mode, GPU_SHARED);
    assert_int_equal(n->free_whole, 5);
    cluster_apply_worker(c, &s2);
    assert_int_equal(node_gpu(c, n, 2)->n_clients, 2);
    assert_int_equal(node_gpu(c, n, 2)->used_units, GPU_UNITS);
    assert_int_equal(n->workers_by_gpus[0], 2);
    assert_true(cluster_consistent(c));
    cluster_release_worker(c, &s1);
    assert_int_equal(node_gpu(c, n, 2)->mode, GPU_SHARED);
    assert_int_equal(node_gpu(c, n, 2)->used_units, 700 * (GPU_UNITS / 1000));
    assert_int_equal(n->free_whole, 5);
    assert_true(cluster_consistent(c));
    cluster_release_worker(c, &s2);
    assert_int_equal(node_gpu(c, n, 2)->mode, GPU_WHOLE);
    assert_int_equal(node_gpu(c, n, 2)->used_units, 0);
    assert_int_equal(n->free_whole, 6);
    assert_true(cluster_consistent(c));

    /* MIG: partition GPU 3, use two instances */
    int p3 = profile(c, 0, "3g.40gb");
    MigLayout l;
    mig_layout_clear(&l);
    l.profile_at[0] = l.profile_at[4] = (uint8_t)p3;
    assert_int_equal(cluster_set_mig(c, 0, 3, &l), 0);
    assert_int_equal(n->free_whole, 5);
    assert_int_equal(n->idle_mig, 1);
    assert_true(cluster_consistent(c));
    WorkerAlloc m1 = {.node = 0, .cpu_milli = 1000, .n_grants = 1}, m2 = m1;
    m1.grants[0] = (Grant){.index = 3, .kind = GRANT_MIG, .mig_profile = (uint8_t)p3};
    m2.grants[0] =
        (Grant){.index = 3, .kind = GRANT_MIG, .mig_profile = (uint8_t)p3, .mig_start = 4};
    cluster_apply_worker(c, &m1);
    assert_int_equal(n->idle_mig, 0);
    assert_int_equal(node_gpu(c, n, 3)->mig_busy, 0x01);
    assert_int_equal(node_gpu(c, n, 3)->used_units, 3 * GPU_UNITS / 7);
    cluster_apply_worker(c, &m2);
    assert_int_equal(node_gpu(c, n, 3)->mig_busy, 0x11);
    assert_int_equal(node_gpu(c, n, 3)->used_units, 6 * GPU_UNITS / 7);
    assert_true(cluster_consistent(c));
    cluster_release_worker(c, &m1);
    assert_int_equal(n->idle_mig, 0);
    cluster_release_worker(c, &m2);
    assert_int_equal(n->idle_mig, 1);
    assert_int_equal(node_gpu(c, n, 3)->mig_busy, 0);
    assert_int_equal(mig_layout_count(&node_gpu(c, n, 3)->mig), 2); /* instances stay */
    cluster_release_worker(c, &whole);
    assert_int_equal(n->used_units, 0);
    assert_int_equal(c->used_units, 0);
    assert_int_equal(n->cpu_used_milli, 0);
    assert_int_equal(n->free_whole, 7);
    assert_int_equal(n->workers_by_gpus[2], 0);
    assert_true(cluster_consistent(c));

    /* the checker is not vacuous */
    n->free_whole++;
    assert_false(cluster_consistent(c));
    n->free_whole--;
    c->used_units++;
    assert_false(cluster_consistent(c));
    c->used_units--;
    node_gpu(c, n, 3)->mig_busy = 0x02; /* busy where no instance starts */
    assert_false(cluster_consistent(c));
    node_gpu(c, n, 3)->mig_busy = 0;
    assert_true(cluster_consistent(c));
    cluster_free(c);
}

/* A node given back (absent) comes back with its GPUs as new: MIG off, all whole and
 * free. One H100 node of 4 GPUs: GPU 0 carved into 3g.40gb x 2 (idle), GPU 1 left whole.
 * Absent: 4 whole GPUs free, none in MIG mode. Starting and up again: the same. A node
 * that holds work is not reset (it cannot go absent that way; the state alone changes). */
static void test_absent_node_forgets_mig(void **state)
{
    (void)state;
    Cluster *c = cluster_new("s");
    assert_non_null(c);
    add_pool(c, "h", cluster_model(c, "H100", 0), 4, 1, NULL, 0, true);
    Node *n = &c->nodes[0];
    int g3 = profile(c, 0, "3g.40gb");
    MigLayout l;
    mig_layout_clear(&l);
    l.profile_at[0] = l.profile_at[4] = (uint8_t)g3;
    assert_int_equal(cluster_set_mig(c, 0, 0, &l), 0);
    assert_int_equal(n->free_whole, 3);
    assert_int_equal(n->idle_mig, 1);
    cluster_set_node_state(c, 0, NODE_ABSENT);
    assert_int_equal(n->free_whole, 4);
    assert_int_equal(n->idle_mig, 0);
    assert_int_equal(node_gpu_c(c, n, 0)->mode, GPU_WHOLE);
    assert_true(mig_layout_empty(&node_gpu_c(c, n, 0)->mig));
    cluster_set_node_state(c, 0, NODE_STARTING);
    cluster_set_node_state(c, 0, NODE_UP);
    assert_int_equal(n->free_whole, 4);
    assert_true(cluster_consistent(c));

    /* busy: the layout stays */
    assert_int_equal(cluster_set_mig(c, 0, 0, &l), 0);
    WorkerAlloc m = {.node = 0, .n_grants = 1};
    m.grants[0] =
        (Grant){.index = 0, .kind = GRANT_MIG, .mig_profile = (uint8_t)g3, .mig_start = 4};
    cluster_apply_worker(c, &m);
    cluster_set_node_state(c, 0, NODE_ABSENT);
    assert_int_equal(node_gpu_c(c, n, 0)->mode, GPU_MIG);
    cluster_free(c);
}

static void test_set_mig(void **state)
{
    Cluster *c = cluster_new("s");
    assert_non_null(c);
    add_pool(c, "h", cluster_model(c, "H100", 0), 4, 1, NULL, 0, true);
    add_pool(c, "h-nomig", 0, 2, 1, NULL, 0, false);
    Node *n = &c->nodes[0];
    int g1 = profile(c, 0, "1g.10gb"), g2 = profile(c, 0, "2g.20gb");
    int g3 = profile(c, 0, "3g.40gb");
    MigLayout l;

    /* invalid layouts */
    Snap before = snap(c, 0);
    mig_layout_clear(&l);
    l.profile_at[0] = (uint8_t)g2;
    l.profile_at[1] = (uint8_t)g1; /* overlaps */
    assert_int_equal(cluster_set_mig(c, 0, 0, &l), -EINVAL);
    mig_layout_clear(&l);
    l.profile_at[6] = (uint8_t)g2; /* not a start of 2g */
    assert_int_equal(cluster_set_mig(c, 0, 0, &l), -EINVAL);
    mig_layout_clear(&l);
    l.profile_at[0] = 40; /* no such profile */
    assert_int_equal(cluster_set_mig(c, 0, 0, &l), -EINVAL);
    same_as(c, 0, &before);
    /* a node that may not use MIG */
    mig_layout_clear(&l);
    l.profile_at[0] = (uint8_t)g1;
    Snap other = snap(c, 1);
    assert_int_equal(cluster_set_mig(c, 1, 0, &l), -EINVAL);
    same_as(c, 1, &other);

    /* busy whole GPU and shared GPU */
    WorkerAlloc w = {.node = 0, .n_grants = 1};
    w.grants[0] = (Grant){.index = 0, .kind = GRANT_WHOLE};
    cluster_apply_worker(c, &w);
    WorkerAlloc s = {.node = 0, .n_grants = 1};
    s.grants[0] = (Grant){.index = 1, .kind = GRANT_SHARE, .milli = 100};
    cluster_apply_worker(c, &s);
    before = snap(c, 0);
    assert_int_equal(cluster_set_mig(c, 0, 0, &l), -EBUSY);
    assert_int_equal(cluster_set_mig(c, 0, 1, &l), -EBUSY);
    same_as(c, 0, &before);

    /* GPU 2: partition, occupy 3g@4, then try to destroy or change it */
    mig_layout_clear(&l);
    l.profile_at[0] = l.profile_at[4] = (uint8_t)g3;
    assert_int_equal(cluster_set_mig(c, 0, 2, &l), 0);
    WorkerAlloc m = {.node = 0, .n_grants = 1};
    m.grants[0] =
        (Grant){.index = 2, .kind = GRANT_MIG, .mig_profile = (uint8_t)g3, .mig_start = 4};
    cluster_apply_worker(c, &m);
    assert_true(cluster_consistent(c));
    before = snap(c, 0);
    MigLayout bad;
    mig_layout_clear(&bad);
    assert_int_equal(cluster_set_mig(c, 0, 2, &bad), -EBUSY); /* MIG off */
    bad.profile_at[0] = (uint8_t)g3;
    assert_int_equal(cluster_set_mig(c, 0, 2, &bad), -EBUSY); /* 3g@4 gone */
    bad.profile_at[4] = (uint8_t)g2;
    bad.profile_at[6] = (uint8_t)g1;
    assert_int_equal(cluster_set_mig(c, 0, 2, &bad), -EBUSY); /* 3g@4 becomes 2g@4 */
    same_as(c, 0, &before);
    /* re-carving the idle 3g@0 into smaller instances is fine */
    MigLayout ok = l;
    ok.profile_at[0] = ok.profile_at[2] = (uint8_t)g2;
    assert_int_equal(cluster_set_mig(c, 0, 2, &ok), 0);
    assert_int_equal(node_gpu(c, n, 2)->mig_busy, 0x10);
    assert_int_equal(node_gpu(c, n, 2)->mig.profile_at[2], g2);
    assert_true(cluster_consistent(c));

    /* GPU 3: partition and turn off again while idle */
    assert_int_equal(n->free_whole, 1);
    assert_int_equal(cluster_set_mig(c, 0, 3, &l), 0);
    assert_int_equal(n->free_whole, 0);
    assert_int_equal(n->idle_mig, 1);
    mig_layout_clear(&bad);
    assert_int_equal(cluster_set_mig(c, 0, 3, &bad), 0);
    assert_int_equal(node_gpu(c, n, 3)->mode, GPU_WHOLE);
    assert_int_equal(n->free_whole, 1);
    assert_int_equal(n->idle_mig, 0);
    assert_int_equal(cluster_set_mig(c, 0, 3, &bad), 0); /* off stays off */
    assert_int_equal(n->free_whole, 1);
    assert_true(cluster_consistent(c));

    cluster_release_worker(c, &m);
    cluster_release_worker(c, &s);
    cluster_release_worker(c, &w);
    assert_int_equal(cluster_set_mig(c, 0, 2, &bad), 0);
    assert_int_equal(n->free_whole, 4);
    assert_int_equal(c->used_units, 0);
    assert_true(cluster_consistent(c));
    cluster_free(c);
}

/* ---- random sequences against a shadow state ---- */

static uint64_t cur_seed; /* reported on failure so a sequence can be replayed */

#define SEQ_CHECK(cond)                                                                            \
    do {                                                                                           \
        if (!(cond))                                                                               \
            fail_msg("seed %llu: %s is false (line %d)", (unsigned long long)cur_seed, #cond,      \
                     __LINE__);                                                                    \
    } while (0)

typedef struct ShadowGpu {
    bool whole;       /* taken whole */
    unsigned milli;   /* shared: sum of shares */
    unsigned clients; /* shared: number of shares */
    uint8_t mig_busy; /* busy instance starts */
    bool mig_on;      /* partitioned */
} ShadowGpu;

typedef struct Live {
    WorkerAlloc w;
} Live;

static uint32_t shadow_units(const GpuModel *m, const MigLayout *l, const ShadowGpu *s)
{
    if (s->whole)
        return GPU_UNITS;
    if (s->clients)
        return s->milli * (GPU_UNITS / 1000);
    uint32_t u = 0;
    for (int i = 0; i < MIG_MAX_SLOTS; i++)
        if ((s->mig_busy >> i) & 1)
            u += m->profiles[l->profile_at[i]].compute_slices * (GPU_UNITS / m->mig_compute_slices);
    return u;
}

/* Compare every counter with what the shadow implies. */
static void check_shadow(const Cluster *c, const ShadowGpu *sh, const uint32_t *cpu,
                         const uint32_t *mem)
{
    SEQ_CHECK(cluster_consistent(c));
    uint64_t total = 0;
    for (size_t i = 0; i < c->n_nodes; i++) {
        const Node *n = &c->nodes[i];
        const GpuModel *m = node_model(c, n);
        unsigned free_whole = 0, idle_mig = 0;
        uint32_t used = 0;
        for (unsigned g = 0; g < n->n_gpus; g++) {
            const ShadowGpu *s = &sh[n->gpu0 + g];
            const Gpu *gpu = node_gpu_c(c, n, g);
            uint32_t u = shadow_units(m, &gpu->mig, s);
            SEQ_CHECK(gpu->used_units == u);
            SEQ_CHECK(gpu->mig_busy == s->mig_busy);
            SEQ_CHECK(gpu->mode == (s->mig_on ? GPU_MIG : s->clients ? GPU_SHARED : GPU_WHOLE));
            SEQ_CHECK(gpu->n_clients == s->clients);
            free_whole += !s->mig_on && !s->whole && !s->clients;
            idle_mig += s->mig_on && !s->mig_busy;
            used += u;
        }
        SEQ_CHECK(n->free_whole == free_whole);
        SEQ_CHECK(n->idle_mig == idle_mig);
        SEQ_CHECK(n->used_units == used);
        SEQ_CHECK(n->cpu_used_milli == cpu[i]);
        SEQ_CHECK(n->memory_used_mib == mem[i]);
        total += used;
    }
    SEQ_CHECK(c->used_units == total);
}

/* A random valid layout of m keeping the busy instances of `base`. */
static MigLayout random_layout(Rng *rng, const GpuModel *m, const MigLayout *base, uint8_t busy)
{
    MigLayout l;
    mig_layout_clear(&l);
    for (int s = 0; s < MIG_MAX_SLOTS; s++)
        if ((busy >> s) & 1)
            l.profile_at[s] = base->profile_at[s];
    for (int tries = 0; tries < 12; tries++) {
        int p = (int)rng_below(rng, m->n_profiles);
        uint8_t starts = mig_free_starts(m, &l, p);
        if (!starts)
            continue;
        int s;
        do
            s = (int)rng_below(rng, MIG_MAX_SLOTS);
        while (!((starts >> s) & 1));
        l.profile_at[s] = (uint8_t)p;
    }
    return l;
}

static void apply_shadow(const Cluster *c, ShadowGpu *sh, uint32_t *cpu, uint32_t *mem,
                         const WorkerAlloc *w, bool apply)
{
    const Node *n = &c->nodes[w->node];
    cpu[w->node] = apply ? cpu[w->node] + w->cpu_milli : cpu[w->node] - w->cpu_milli;
    mem[w->node] = apply ? mem[w->node] + w->memory_mib : mem[w->node] - w->memory_mib;
    for (unsigned i = 0; i < w->n_grants; i++) {
        const Grant *g = &w->grants[i];
        ShadowGpu *s = &sh[n->gpu0 + g->index];
        switch (g->kind) {
        case GRANT_WHOLE:
            s->whole = apply;
            break;
        case GRANT_SHARE:
            s->milli = apply ? s->milli + g->milli : s->milli - g->milli;
            s->clients = apply ? s->clients + 1 : s->clients - 1;
            break;
        case GRANT_MIG:
            if (apply)
                s->mig_busy |= (uint8_t)(1u << g->mig_start);
            else
                s->mig_busy &= (uint8_t) ~(1u << g->mig_start);
            break;
        }
    }
}

/* Returns how many MIG layout changes the sequence made. */
static unsigned run_sequence(uint64_t seed)
{
    Rng rng;
    rng_seed(&rng, seed);
    cur_seed = seed;
    Cluster *c = cluster_new("rand");
    assert_non_null(c);
    const char *models[] = {"A100-80GB", "A30", "L4", "H100", "no-such-gpu"};
    unsigned n_pools = 1 + (unsigned)rng_below(&rng, 4);
    for (unsigned p = 0; p < n_pools; p++) {
        char name[16];
        snprintf(name, sizeof(name), "p%u", p);
        int mi = cluster_model(c, models[rng_below(&rng, 5)], 16384);
        assert_true(mi >= 0);
        add_pool(c, name, mi, 1 + (unsigned)rng_below(&rng, 8), 1 + (unsigned)rng_below(&rng, 3),
                 NULL, 0, rng_below(&rng, 4) != 0);
    }
    ShadowGpu *sh = calloc(c->n_gpus, sizeof(*sh));
    uint32_t *cpu = calloc(c->n_nodes, sizeof(uint32_t));
    uint32_t *mem = calloc(c->n_nodes, sizeof(uint32_t));
    Live *live = calloc(4096, sizeof(*live));
    size_t n_live = 0;
    assert_non_null(sh);
    assert_non_null(cpu);
    assert_non_null(mem);
    assert_non_null(live);
    unsigned applied = 0, released = 0, carved = 0;
    for (int step = 0; step < 400; step++) {
        unsigned what = (unsigned)rng_below(&rng, 10);
        if (what < 3 && n_live) {
            size_t k = rng_below(&rng, n_live);
            cluster_release_worker(c, &live[k].w);
            apply_shadow(c, sh, cpu, mem, &live[k].w, false);
            live[k] = live[--n_live];
            released++;
            check_shadow(c, sh, cpu, mem);
            continue;
        }
        uint32_t ni = (uint32_t)rng_below(&rng, c->n_nodes);
        const Node *n = &c->nodes[ni];
        const GpuModel *m = node_model(c, n);
        unsigned gi = (unsigned)rng_below(&rng, n->n_gpus);
        ShadowGpu *s = &sh[n->gpu0 + gi];
        const Gpu *gpu = node_gpu_c(c, n, gi);
        if (what == 3 && n->mig_allowed && !s->whole && !s->clients) {
            /* re-carve idle instances (or turn MIG on or off) */
            MigLayout l = rng_below(&rng, 4) == 0 && !s->mig_busy
                              ? (MigLayout){{MIG_NONE, MIG_NONE, MIG_NONE, MIG_NONE, MIG_NONE,
                                             MIG_NONE, MIG_NONE, MIG_NONE}}
                              : random_layout(&rng, m, &gpu->mig, s->mig_busy);
            assert_int_equal(cluster_set_mig(c, ni, gi, &l), 0);
            s->mig_on = !mig_layout_empty(&l);
            carved++;
            check_shadow(c, sh, cpu, mem);
            continue;
        }
        WorkerAlloc w = {.node = ni};
        w.cpu_milli = (uint32_t)rng_below(&rng, 3) * 500;
        w.memory_mib = (uint32_t)rng_below(&rng, 3) * 1024;
        if (cpu[ni] + w.cpu_milli > n->cpu_milli || mem[ni] + w.memory_mib > n->memory_mib)
            continue;
        if (s->mig_on) {
            /* an idle instance of the layout */
            int start = -1;
            for (int k = 0; k < MIG_MAX_SLOTS && start < 0; k++) {
                int st = (int)rng_below(&rng, MIG_MAX_SLOTS);
                if (gpu->mig.profile_at[st] != MIG_NONE && !((s->mig_busy >> st) & 1))
                    start = st;
            }
            if (start < 0)
                continue;
            w.grants[w.n_grants++] = (Grant){.index = (uint8_t)gi,
                                             .kind = GRANT_MIG,
                                             .mig_profile = gpu->mig.profile_at[start],
                                             .mig_start = (uint8_t)start};
        } else if (rng_below(&rng, 2) == 0 && !s->whole) {
            unsigned room = 1000 - s->milli;
            if (!room)
                continue;
            w.grants[w.n_grants++] = (Grant){.index = (uint8_t)gi,
                                             .kind = GRANT_SHARE,
                                             .milli = (uint16_t)(1 + rng_below(&rng, room))};
        } else {
            unsigned want = 1 + (unsigned)rng_below(&rng, 3);
            for (unsigned k = 0; k < n->n_gpus && w.n_grants < want; k++) {
                ShadowGpu *t = &sh[n->gpu0 + k];
                if (!t->mig_on && !t->whole && !t->clients)
                    w.grants[w.n_grants++] = (Grant){.index = (uint8_t)k, .kind = GRANT_WHOLE};
            }
            if (!w.n_grants && rng_below(&rng, 2))
                continue; /* else a CPU-only worker */
        }
        cluster_apply_worker(c, &w);
        apply_shadow(c, sh, cpu, mem, &w, true);
        assert_true(n_live < 4096);
        live[n_live++].w = w;
        applied++;
        check_shadow(c, sh, cpu, mem);
    }
    SEQ_CHECK(applied > 50 && released > 10);
    while (n_live) {
        cluster_release_worker(c, &live[--n_live].w);
        apply_shadow(c, sh, cpu, mem, &live[n_live].w, false);
        check_shadow(c, sh, cpu, mem);
    }
    SEQ_CHECK(c->used_units == 0);
    free(sh);
    free(cpu);
    free(mem);
    free(live);
    cluster_free(c);
    return carved;
}

static void test_random_sequences(void **state)
{
    unsigned carved = 0;
    for (uint64_t seed = 1; seed <= 200; seed++)
        carved += run_sequence(seed);
    assert_true(carved > 500); /* MIG layouts changed under busy instances too */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_build_and_naming),
        cmocka_unit_test(test_teams_fabrics_names),
        cmocka_unit_test(test_models),
        cmocka_unit_test(test_initial_mig),
        cmocka_unit_test(test_grant_units),
        cmocka_unit_test(test_apply_release),
        cmocka_unit_test(test_absent_node_forgets_mig),
        cmocka_unit_test(test_set_mig),
        cmocka_unit_test(test_random_sequences),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
