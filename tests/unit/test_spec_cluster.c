/* test_spec_cluster.c: the cluster spec reader and the Alibaba node list reader: the
 * examples load into the cluster they describe, and every kind of mistake is reported
 * with its file, line and field, and nothing leaks on the way out. */
#include "spec/spec.h"

#include "core/cluster.h"
#include "util/buf.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

static const char *src_path(const char *rel, char *out, size_t outlen)
{
    const char *root = getenv("GPUORCH_SRC");
    snprintf(out, outlen, "%s/%s", root && *root ? root : ".", rel);
    return out;
}

static const char *shared_path(const char *rel, char *out, size_t outlen)
{
    const char *root = getenv("GPUORCH_SHARED");
    snprintf(out, outlen, "%s/%s", root && *root ? root : "../shared", rel);
    return out;
}

static Cluster *load_ok(const char *rel)
{
    char path[1024];
    Buf err = {0};
    Cluster *c = NULL;
    int r = spec_load_cluster(src_path(rel, path, sizeof(path)), &c, &err);
    if (r != 0)
        print_message("%s: %s\n", rel, buf_str(&err));
    assert_int_equal(r, 0);
    assert_non_null(c);
    assert_int_equal(err.len, 0);
    buf_free(&err);
    assert_true(cluster_consistent(c));
    return c;
}

static Cluster *parse_ok(const char *yaml)
{
    Buf err = {0};
    Cluster *c = NULL;
    int r = spec_parse_cluster_yaml(yaml, strlen(yaml), "c.yaml", &c, &err);
    if (r != 0)
        print_message("%s\n", buf_str(&err));
    assert_int_equal(r, 0);
    assert_non_null(c);
    buf_free(&err);
    return c;
}

/* The parse fails with -EINVAL and the message holds every needle (NULL-terminated). */
static void parse_bad(const char *yaml, ...)
{
    Buf err = {0};
    Cluster *c = NULL;
    int r = spec_parse_cluster_yaml(yaml, strlen(yaml), "c.yaml", &c, &err);
    va_list ap;
    va_start(ap, yaml);
    bool all = true;
    for (const char *n; (n = va_arg(ap, const char *));)
        if (!strstr(buf_str(&err), n)) {
            print_message("missing '%s'\n", n);
            all = false;
        }
    va_end(ap);
    if (r != -EINVAL || !all)
        print_message("input:\n%s\nerror:\n%s\n", yaml, buf_str(&err));
    assert_int_equal(r, -EINVAL);
    assert_null(c);
    assert_true(all);
    buf_free(&err);
}

static const Node *node(const Cluster *c, const char *name)
{
    int i = cluster_find_node(c, name);
    if (i < 0)
        print_message("no node %s\n", name);
    assert_true(i >= 0);
    return &c->nodes[i];
}

static const char *leaf_of(const Cluster *c, const char *name)
{
    const Node *n = node(c, name);
    return n->leaf == NO_SWITCH ? "-" : c->switches[n->leaf].name;
}

static int find_pool(const Cluster *c, const char *name)
{
    for (size_t i = 0; i < c->n_pools; i++)
        if (strcmp(c->pools[i].name, name) == 0)
            return (int)i;
    fail_msg("no pool %s", name);
    return -1;
}

static void test_demo(void **state)
{
    Cluster *c = load_ok("examples/cluster-demo.yaml");
    assert_string_equal(c->name, "demo");
    assert_int_equal(c->n_nodes, 4);
    assert_int_equal(c->n_gpus, 8 + 8 + 8 + 4);
    assert_int_equal(c->n_pools, 3);
    assert_int_equal(c->n_switches, 3);
    assert_string_equal(c->nodes[0].name, "h100-0");
    assert_string_equal(c->nodes[1].name, "h100-1");
    assert_string_equal(c->nodes[2].name, "a100-0");
    assert_string_equal(c->nodes[3].name, "l4-0");
    assert_string_equal(leaf_of(c, "h100-0"), "leaf-0");
    assert_string_equal(leaf_of(c, "h100-1"), "leaf-0");
    assert_string_equal(leaf_of(c, "a100-0"), "leaf-1");
    assert_string_equal(leaf_of(c, "l4-0"), "leaf-1");
    assert_string_equal(c->switches[node(c, "l4-0")->spine].name, "spine-0");
    assert_true(c->switches[cluster_find_switch(c, "leaf-0")].is_leaf);
    assert_false(c->switches[cluster_find_switch(c, "spine-0")].is_leaf);

    const Pool *h = &c->pools[find_pool(c, "h100")];
    assert_int_equal(h->tier, TIER_RESERVED);
    assert_int_equal(h->price_micro_usd, 2500000);
    assert_int_equal(h->nodes, 2);
    assert_int_equal(h->gpus, 8);
    assert_int_equal(h->interconnect, IC_NVSWITCH);
    assert_int_equal(h->cpu_milli, 192000);
    assert_int_equal(h->memory_mib, 2048 * 1024);
    assert_string_equal(c->fabrics[h->fabric], "infiniband-ndr");
    assert_string_equal(c->models[h->model].m.name, "H100-80GB-SXM5");
    assert_false(h->mig);

    const Node *a = node(c, "a100-0");
    assert_true(a->mig_allowed);
    assert_string_equal(node_model(c, a)->name, "A100-80GB");
    assert_int_equal(a->fabric, h->fabric);
    assert_int_equal(c->pools[a->pool].tier, TIER_OWNED);
    assert_int_equal(c->pools[a->pool].price_micro_usd, 0);
    assert_true(mig_layout_empty(&node_gpu_c(c, a, 0)->mig));

    const Node *l4 = node(c, "l4-0");
    assert_false(l4->mig_allowed);
    assert_int_equal(l4->interconnect, IC_PCIE);
    assert_int_equal(l4->fabric, 0);
    assert_int_equal(l4->n_gpus, 4);
    assert_int_equal(c->pools[l4->pool].tier, TIER_ON_DEMAND);
    assert_int_equal(c->pools[l4->pool].price_micro_usd, 800000);

    assert_int_equal(c->n_teams, 3);
    int s = cluster_find_team(c, "search");
    assert_true(s >= 0);
    assert_true(c->teams[s].guaranteed_gpus == 8.0);
    assert_true(c->teams[s].burst_gpus == 16.0);
    assert_true(c->teams[s].weight == 2.0);
    assert_int_equal(c->teams[s].n_projects, 2);
    assert_string_equal(c->teams[s].projects[0], "ranking");
    int p = cluster_find_team(c, "platform");
    assert_true(c->teams[p].weight == 0.5);
    int rs = cluster_find_team(c, "research");
    assert_true(c->teams[rs].weight == 1.0);
    cluster_free(c);
}

static void test_large(void **state)
{
    Cluster *c = load_ok("examples/cluster-large.yaml");
    assert_true(c->n_gpus >= 1000);
    assert_int_equal(c->n_gpus, 1136);
    assert_int_equal(c->n_nodes, 160);
    assert_int_equal(c->n_switches, 10);
    /* round-robin over the pool's leaves */
    assert_string_equal(leaf_of(c, "h100-0"), "leaf-a0");
    assert_string_equal(leaf_of(c, "h100-1"), "leaf-a1");
    assert_string_equal(leaf_of(c, "h100-3"), "leaf-a3");
    assert_string_equal(leaf_of(c, "h100-4"), "leaf-a0");
    assert_string_equal(leaf_of(c, "h100-47"), "leaf-a3");
    assert_string_equal(leaf_of(c, "a100-1"), "leaf-b3");
    assert_string_equal(c->switches[node(c, "a100-1")->spine].name, "spine-b");
    /* aliases resolve to the catalogue's model, shared between pools */
    const Node *a = node(c, "a100-0"), *am = node(c, "a100-mig-0");
    assert_string_equal(node_model(c, a)->name, "A100-80GB");
    assert_int_equal(a->model, am->model);
    assert_int_equal(node(c, "h100-spot-0")->model, node(c, "h100-0")->model);
    assert_int_equal(c->pools[node(c, "h100-spot-0")->pool].tier, TIER_SPOT);
    assert_string_equal(node_model(c, node(c, "h200-0"))->name, "H200-141GB");
    /* the initial layout: lowest valid starts in the order given */
    const GpuModel *m = node_model(c, am);
    for (unsigned g = 0; g < am->n_gpus; g++) {
        const Gpu *gpu = node_gpu_c(c, am, g);
        assert_int_equal(gpu->mode, GPU_MIG);
        assert_int_equal(mig_layout_count(&gpu->mig), 4);
        assert_int_equal(gpu->mig.profile_at[0], catalog_profile_index(m, "1g.10gb"));
        assert_int_equal(gpu->mig.profile_at[1], catalog_profile_index(m, "1g.10gb"));
        assert_int_equal(gpu->mig.profile_at[2], catalog_profile_index(m, "2g.20gb"));
        assert_int_equal(gpu->mig.profile_at[4], catalog_profile_index(m, "3g.40gb"));
        assert_true(mig_layout_valid(m, &gpu->mig));
    }
    assert_int_equal(am->idle_mig, 8);
    assert_int_equal(a->free_whole, 8);
    assert_int_equal(node_gpu_c(c, a, 0)->mode, GPU_WHOLE);
    /* CPU-only nodes */
    const Node *cpu = node(c, "cpu-0");
    assert_int_equal(cpu->n_gpus, 0);
    assert_string_equal(node_model(c, cpu)->name, SPEC_CPU_ONLY_MODEL);
    assert_int_equal(cpu->cpu_milli, 64000);
    assert_int_equal(c->n_teams, 4);
    cluster_free(c);
}

static void test_defaults_and_unknown_model(void **state)
{
    Cluster *c = parse_ok("pools:\n"
                          "  - name: mi\n"
                          "    tier: spot\n"
                          "    nodes: 2\n"
                          "    node:\n"
                          "      gpu_model: MI300X\n"
                          "      gpu_memory: 192GiB\n"
                          "      gpus: 8\n"
                          "      cpus: 95.5\n"
                          "  - name: cpu\n"
                          "    tier: owned\n"
                          "    nodes: 1\n"
                          "    node: {gpus: 0}\n"
                          "  - name: t4\n"
                          "    tier: owned\n"
                          "    nodes: 0\n"
                          "    node: {gpus: 2, gpu_model: Tesla T4}\n"
                          "teams:\n"
                          "  - {name: a, guaranteed_gpus: 4.5}\n");
    assert_string_equal(c->name, "c"); /* from the file name */
    assert_int_equal(c->n_nodes, 3);
    assert_int_equal(c->n_switches, 0);
    const Node *n = node(c, "mi-1");
    assert_int_equal(n->leaf, NO_SWITCH);
    assert_int_equal(n->spine, NO_SWITCH);
    const ClusterModel *cm = &c->models[n->model];
    assert_false(cm->in_catalog);
    assert_string_equal(cm->m.name, "MI300X");
    assert_int_equal(cm->m.memory_mib, 192 * 1024);
    assert_int_equal(cm->m.mig_slots, 0);
    assert_int_equal(n->cpu_milli, 95500);
    assert_int_equal(n->memory_mib, 64 * 8 * 1024); /* default: 64 GiB per GPU */
    assert_int_equal(n->interconnect, IC_PCIE);
    assert_int_equal(n->fabric, 0);
    assert_false(n->mig_allowed);
    const Node *cpu = node(c, "cpu-0");
    assert_int_equal(cpu->cpu_milli, 8000); /* defaults: at least 8 cores, 64 GiB */
    assert_int_equal(cpu->memory_mib, 64 * 1024);
    assert_string_equal(node_model(c, cpu)->name, SPEC_CPU_ONLY_MODEL);
    const Pool *t4 = &c->pools[find_pool(c, "t4")];
    assert_string_equal(c->models[t4->model].m.name, "T4");
    assert_int_equal(t4->nodes, 0);
    assert_true(c->teams[0].guaranteed_gpus == 4.5);
    assert_true(c->teams[0].burst_gpus == 4.5); /* burst defaults to the guarantee */
    assert_true(c->teams[0].weight == 1.0);
    cluster_free(c);
}

static void test_json_spec(void **state)
{
    Cluster *c = parse_ok("{\n"
                          "\t\"name\": \"j\",\n"
                          "\t\"switches\": [{\"name\": \"s\"}, {\"name\": \"l\", \"parent\": "
                          "\"s\"}],\n"
                          "\t\"pools\": [{\"name\": \"p\", \"tier\": \"owned\", \"nodes\": 3,\n"
                          "\t\t\"leaves\": [\"l\"], \"node\": {\"gpus\": 4, \"gpu_model\": "
                          "\"H100\", \"mig\": true,\n"
                          "\t\t\"mig_layout\": [\"7g.80gb\"]}}]\n"
                          "}\n");
    assert_string_equal(c->name, "j");
    assert_int_equal(c->n_nodes, 3);
    assert_string_equal(leaf_of(c, "p-2"), "l");
    assert_int_equal(node_gpu_c(c, node(c, "p-0"), 3)->mode, GPU_MIG);
    cluster_free(c);
}

/* A valid spec with one line swapped for each mistake below. Line numbers: */
static const char *const base_lines[] = {
    "name: t\n",                                                /* 1 */
    "switches:\n",                                              /* 2 */
    "  - {name: spine-0}\n",                                    /* 3 */
    "  - {name: leaf-0, parent: spine-0}\n",                    /* 4 */
    "pools:\n",                                                 /* 5 */
    "  - name: h100\n",                                         /* 6 */
    "    tier: reserved\n",                                     /* 7 */
    "    price_per_gpu_hour: 2.50\n",                           /* 8 */
    "    nodes: 2\n",                                           /* 9 */
    "    leaves: [leaf-0]\n",                                   /* 10 */
    "    node:\n",                                              /* 11 */
    "      gpu_model: H100-80GB-SXM5\n",                        /* 12 */
    "      gpus: 8\n",                                          /* 13 */
    "      mig: false\n",                                       /* 14 */
    "teams:\n",                                                 /* 15 */
    "  - {name: search, guaranteed_gpus: 8, burst_gpus: 16}\n", /* 16 */
};

/* The base spec with line `line` (1-based) replaced by `with` (NULL: kept). */
static char *base_with(size_t line, const char *with)
{
    Buf b = {0};
    for (size_t i = 0; i < sizeof(base_lines) / sizeof(base_lines[0]); i++)
        buf_puts(&b, i + 1 == line && with ? with : base_lines[i]);
    return buf_steal(&b);
}

static void bad_line(size_t line, const char *with, const char *needle1, const char *needle2)
{
    char *yaml = base_with(line, with);
    parse_bad(yaml, needle1, needle2, NULL);
    free(yaml);
}

static void test_base_is_valid(void **state)
{
    char *yaml = base_with(0, NULL);
    Cluster *c = parse_ok(yaml);
    assert_int_equal(c->n_nodes, 2);
    cluster_free(c);
    free(yaml);
}

/* A team's capacity is the mask of tiers it names; without one, every tier. */
static void test_team_capacity(void **state)
{
    char *yaml = base_with(16, "  - {name: search, capacity: [spot, on-demand]}\n");
    Cluster *c = parse_ok(yaml);
    assert_int_equal(c->teams[0].tiers, (1u << TIER_SPOT) | (1u << TIER_ON_DEMAND));
    cluster_free(c);
    free(yaml);
    yaml = base_with(16, "  - {name: search, capacity: reserved}\n");
    c = parse_ok(yaml);
    assert_int_equal(c->teams[0].tiers, 1u << TIER_RESERVED);
    cluster_free(c);
    free(yaml);
    yaml = base_with(0, NULL);
    c = parse_ok(yaml);
    assert_int_equal(c->teams[0].tiers, 0);
    cluster_free(c);
    free(yaml);
}

static void test_errors_fields(void **state)
{
    bad_line(12, "      gpu_modle: H100-80GB-SXM5\n",
             "c.yaml:12: unknown field 'gpu_modle' in pool 'h100'", "did you mean 'gpu_model'");
    bad_line(12, "      gpu_modle: H100-80GB-SXM5\n", "c.yaml:11: missing field 'gpu_model'", NULL);
    bad_line(7, "    tier: cheap\n",
             "c.yaml:7: field 'tier': must be owned, reserved, on-demand or spot", "not 'cheap'");
    bad_line(7, "    tie: reserved\n", "c.yaml:7: unknown field 'tie' in pool 'h100'",
             "c.yaml:6: missing field 'tier' in pool 'h100'");
    bad_line(13, "      gpus: 17\n", "c.yaml:13: field 'gpus': must be a whole number from 0 to 16",
             NULL);
    bad_line(13, "      gpus: -1\n", "c.yaml:13: field 'gpus'", "not '-1'");
    bad_line(9, "    nodes: [1, 2]\n", "c.yaml:9: field 'nodes'", "not a list");
    bad_line(9, "    nodes: -2\n", "c.yaml:9: field 'nodes': must be a whole number", NULL);
    bad_line(9, "    nodes:\n", "c.yaml:6: missing field 'nodes' in pool 'h100'", NULL);
    bad_line(8, "    price_per_gpu_hour: 2.5.0\n", "c.yaml:8: field 'price_per_gpu_hour'", NULL);
    bad_line(8, "    price_per_gpu_hour: 2.1234567\n", "c.yaml:8: field 'price_per_gpu_hour'",
             "at most 6 decimals");
    bad_line(14, "      mig: maybe\n", "c.yaml:14: field 'mig': must be true or false", NULL);
    bad_line(14, "      interconnect: infiniband\n", "c.yaml:14: field 'interconnect'",
             "nvswitch, nvlink-pairs or pcie");
    bad_line(14, "      cpus: lots\n", "c.yaml:14: field 'cpus'", NULL);
    bad_line(14, "      memory_gib: 1TiB\n", "c.yaml:14: field 'memory_gib'", NULL);
    bad_line(1, "name: [a]\n", "c.yaml:1: field 'name'", NULL);
    bad_line(1, "nmae: t\n", "c.yaml:1: unknown field 'nmae' in the cluster spec",
             "did you mean 'name'");
    bad_line(16, "  - {name: search, guaranteed_gpus: 8, burst_gpus: 4}\n",
             "c.yaml:16: field 'burst_gpus': must be at least guaranteed_gpus", NULL);
    bad_line(16, "  - {name: search, guaranteed_gpus: -8}\n", "c.yaml:16: field 'guaranteed_gpus'",
             NULL);
    bad_line(16, "  - {name: search, quota: 8}\n",
             "c.yaml:16: unknown field 'quota' in team 'search'", NULL);
    bad_line(16, "  - {name: search, projects: [a, a]}\n", "c.yaml:16: field 'projects'",
             "listed twice");
    bad_line(16, "  - {name: search, capacity: [reserved, cheap]}\n",
             "c.yaml:16: field 'capacity': 'cheap' is not a tier", NULL);
    bad_line(16, "  - {name: search, capacity: []}\n",
             "c.yaml:16: field 'capacity': must name at least one tier", NULL);
    parse_bad("pools:\n  - {name: a, tier: owned, nodes: 1,\n     node: 8}\n",
              "c.yaml:3: field 'node': must be a mapping", NULL);
    bad_line(5, "pool:\n", "c.yaml:5: unknown field 'pool'", "missing field 'pools'");
}

static void test_errors_models_and_mig(void **state)
{
    bad_line(
        12, "      gpu_model: Z100\n",
        "c.yaml:12: field 'gpu_model': 'Z100' is not in the GPU catalogue; give its gpu_memory",
        NULL);
    bad_line(14, "      gpu_memory: 80GiB\n", "c.yaml:14: field 'gpu_memory'",
             "is in the GPU catalogue");
    bad_line(12, "      gpu_model: cpu-only\n", "c.yaml:12: field 'gpu_model'", "reserved");
    bad_line(13, "      gpus: 0\n", "c.yaml:12: field 'gpu_model': a pool with gpus: 0", NULL);
    /* mig: true on a model without MIG */
    char *yaml = base_with(14, "      mig: true\n");
    char *l4 = strstr(yaml, "H100-80GB-SXM5");
    memcpy(l4, "L4            ", 14);
    parse_bad(yaml, "c.yaml:14: field 'mig': L4 does not support MIG", NULL);
    free(yaml);
    bad_line(14, "      mig_layout: [1g.10gb]\n", "c.yaml:14: field 'mig_layout': needs mig: true",
             NULL);
    bad_line(14,
             "      mig: true\n"
             "      mig_layout: [1g.10gb, 9g.99gb]\n",
             "c.yaml:15: field 'mig_layout': H100-80GB-SXM5 has no MIG profile '9g.99gb'", NULL);
    bad_line(14,
             "      mig: true\n"
             "      mig_layout:\n"
             "        - 4g.40gb\n"
             "        - 4g.40gb\n",
             "c.yaml:17: field 'mig_layout': 4g.40gb does not fit", NULL);
    bad_line(14,
             "      mig: true\n"
             "      mig_layout: [1g.10gb, 1g.10gb, 1g.10gb, 1g.10gb, 1g.10gb, 1g.10gb, 1g.10gb, "
             "1g.10gb]\n",
             "c.yaml:15: field 'mig_layout': 1g.10gb does not fit", NULL);
    /* order matters: after 3g@0, 2g@4 and 1g@6 no 1g start is left (slot 7 is none) */
    bad_line(14,
             "      mig: true\n"
             "      mig_layout: [3g.40gb, 2g.20gb, 1g.10gb, 1g.10gb]\n",
             "c.yaml:15: field 'mig_layout': 1g.10gb does not fit on the H100-80GB-SXM5", NULL);
    /* two pools describing the same unknown model differently */
    parse_bad("pools:\n"
              "  - {name: a, tier: owned, nodes: 1, node: {gpus: 1, gpu_model: X1, gpu_memory: "
              "16GiB}}\n"
              "  - {name: b, tier: owned, nodes: 1, node: {gpus: 1, gpu_model: X1, gpu_memory: "
              "32GiB}}\n",
              "c.yaml:3: field 'gpu_memory': model 'X1' already has 16384 MiB", NULL);
}

static void test_errors_names(void **state)
{
    bad_line(4, "  - {name: leaf-0, parent: spine-9}\n",
             "c.yaml:4: field 'parent': switch 'spine-9' is not defined", NULL);
    parse_bad("switches:\n"
              "  - {name: leaf-0, parent: spine-0}\n"
              "  - {name: spine-0}\n"
              "pools: []\n",
              "c.yaml:2: field 'parent': switch 'spine-0' is defined later, on line 3", NULL);
    bad_line(4, "  - {name: spine-0}\n", "c.yaml:4: duplicate switch 'spine-0' (first on line 3)",
             NULL);
    bad_line(4, "  - {name: leaf-0, parent: leaf-0}\n", "c.yaml:4: field 'parent'",
             "its own parent");
    bad_line(4, "  - {name: leaf-0, parent: spine-0, speed: 400}\n",
             "c.yaml:4: unknown field 'speed' in switch 'leaf-0'", NULL);
    bad_line(10, "    leaves: [leaf-0, leaf-7]\n",
             "c.yaml:10: field 'leaves': switch 'leaf-7' is not defined", NULL);
    bad_line(10, "    leaves: [spine-0]\n", "c.yaml:10: field 'leaves'", "has switches under it");
    parse_bad("pools:\n"
              "  - {name: a, tier: owned, nodes: 1, node: {gpus: 1, gpu_model: L4}}\n"
              "  - {name: b, tier: owned, nodes: 1, node: {gpus: 1, gpu_model: L4}}\n"
              "  - {name: a, tier: spot, nodes: 1, node: {gpus: 1, gpu_model: L4}}\n",
              "c.yaml:4: duplicate pool 'a' (first on line 2)", NULL);
    parse_bad("pools: []\n"
              "teams:\n"
              "  - name: x\n"
              "  - name: y\n"
              "  - name: x\n",
              "c.yaml:5: duplicate team 'x' (first on line 3)", NULL);
}

static void test_errors_syntax_and_shape(void **state)
{
    parse_bad("name: t\npools: [\n  {name: a}\n", "c.yaml:", "invalid YAML", NULL);
    parse_bad("name: t\npools:\n  - name: \"unterminated\n    tier: owned\n", "c.yaml:3",
              "invalid YAML", NULL);
    parse_bad("name: t\nname: u\npools: []\n", "c.yaml:2: invalid YAML: duplicate key", NULL);
    parse_bad("", "c.yaml:1: empty", NULL);
    parse_bad("- a\n- b\n", "c.yaml:1: a cluster spec is a mapping", "not a list", NULL);
    parse_bad("pools: 3\n", "c.yaml:1: field 'pools': must be a list of pools", NULL);
    parse_bad("pools:\n  - h100\n", "c.yaml:2: each pool must be a mapping", NULL);
    parse_bad("pools: []\n---\npools: []\n", "c.yaml:3: a second YAML document", NULL);
    Cluster *c = parse_ok("pools: []\n---\n");
    assert_int_equal(c->n_nodes, 0);
    cluster_free(c);
    /* several independent mistakes in one pass */
    parse_bad("pools:\n"
              "  - {name: a, tier: cheap, nodes: 1, node: {gpus: 1, gpu_model: L4}}\n"
              "  - {name: b, tier: owned, nodes: x, node: {gpus: 1, gpu_model: L4}}\n"
              "teams:\n"
              "  - {name: t, wieght: 2}\n",
              "c.yaml:2: field 'tier'", "c.yaml:3: field 'nodes'",
              "c.yaml:5: unknown field 'wieght' in team 't' (did you mean 'weight'?)", NULL);
}

static void test_load_errors(void **state)
{
    Buf err = {0};
    Cluster *c = NULL;
    assert_int_equal(spec_load_cluster("/nonexistent/cluster.yaml", &c, &err), -ENOENT);
    assert_null(c);
    assert_string_equal(buf_str(&err), "/nonexistent/cluster.yaml: No such file or directory");
    buf_free(&err);
    char path[1024];
    assert_int_equal(
        spec_load_cluster(src_path("examples/jobs-demo.csv", path, sizeof(path)), &c, &err),
        -EINVAL);
    assert_non_null(strstr(buf_str(&err), "jobs-demo.csv:1: not a node list"));
    buf_free(&err);
}

/* Alibaba node lists. */

static Cluster *nodes_ok(const char *csv)
{
    Buf err = {0};
    Cluster *c = NULL;
    int r = spec_parse_alibaba_nodes(csv, strlen(csv), "dir/openb_nodes.csv", &c, &err);
    if (r != 0)
        print_message("%s\n", buf_str(&err));
    assert_int_equal(r, 0);
    buf_free(&err);
    assert_true(cluster_consistent(c));
    return c;
}

static void nodes_bad(const char *csv, const char *needle1, const char *needle2)
{
    Buf err = {0};
    Cluster *c = NULL;
    int r = spec_parse_alibaba_nodes(csv, strlen(csv), "n.csv", &c, &err);
    bool ok = strstr(buf_str(&err), needle1) && (!needle2 || strstr(buf_str(&err), needle2));
    if (r != -EINVAL || !ok)
        print_message("error:\n%s\n", buf_str(&err));
    assert_int_equal(r, -EINVAL);
    assert_null(c);
    assert_true(ok);
    buf_free(&err);
}

static void test_alibaba_small(void **state)
{
    Cluster *c = nodes_ok("sn,cpu_milli,memory_mib,gpu,model\n"
                          "n-0,64000,262144,2,P100\n"
                          "n-1,96000,786432,8,V100M16\n"
                          "n-2,64000,262144,2,P100\n"
                          "\n"
                          "n-3,32000,131072,0,\n"
                          "n-4,32000,131072,0,nan\n"
                          "n-5,94500,393216,1,A10\n");
    assert_string_equal(c->name, "openb_nodes");
    assert_int_equal(c->n_nodes, 6);
    assert_int_equal(c->n_gpus, 2 + 8 + 2 + 1);
    assert_int_equal(c->n_pools, 4);
    assert_string_equal(c->nodes[2].name, "n-2");
    assert_int_equal(c->nodes[0].pool, c->nodes[2].pool);
    assert_int_equal(c->nodes[3].pool, c->nodes[4].pool);
    const Pool *p = &c->pools[c->nodes[0].pool];
    assert_string_equal(p->name, "openb-P100-2g-64c-262144m");
    assert_int_equal(p->nodes, 2);
    assert_int_equal(p->tier, TIER_OWNED);
    assert_int_equal(p->price_micro_usd, 0);
    assert_false(c->models[p->model].in_catalog);
    assert_int_equal(c->models[p->model].m.memory_mib, 0);
    /* V100M16 is a catalogue alias */
    assert_string_equal(node_model(c, &c->nodes[1])->name, "V100-16GB");
    assert_true(c->models[c->nodes[1].model].in_catalog);
    assert_string_equal(node_model(c, &c->nodes[3])->name, SPEC_CPU_ONLY_MODEL);
    assert_int_equal(c->nodes[3].n_gpus, 0);
    assert_int_equal(c->nodes[3].leaf, NO_SWITCH);
    assert_int_equal(c->nodes[5].cpu_milli, 94500);
    assert_string_equal(c->pools[c->nodes[5].pool].name, "openb-A10-1g-94.500c-393216m");
    cluster_free(c);
}

static void test_alibaba_errors(void **state)
{
    nodes_bad("sn,cpu_milli,memory_mib,gpu,model\n"
              "n-0,64000,262144,2,P100\n"
              "n-1,64000,262144,two,P100\n",
              "n.csv:3: column 'gpu': must be a whole number from 0 to 16", "not 'two'");
    nodes_bad("sn,cpu_milli,memory_mib,gpu,model\n"
              "n-0,64000,262144,2,P100\n"
              "n-1,-5,262144,2,P100\n",
              "n.csv:3: column 'cpu_milli'", NULL);
    nodes_bad("sn,cpu_milli,memory_mib,gpu,model\n"
              "n-0,64000,262144,2,\n",
              "n.csv:2: column 'model': a node with 2 GPUs needs a model", NULL);
    nodes_bad("sn,cpu_milli,memory_mib,gpu,model\n"
              "n-0,64000,262144,2,P100\n"
              "n-1,64000,262144,2,P100\n"
              "n-0,64000,262144,2,P100\n",
              "n.csv:4: duplicate node 'n-0' (first on line 2)", NULL);
    nodes_bad("sn,cpu_milli,memory_mib,gpu,model\n"
              "n-0,64000,262144,2\n",
              "n.csv:2: 4 cells; the header has 5", NULL);
    nodes_bad("sn,cpu_milli,memory_mib,gpus,model\n", "n.csv:1: unknown column 'gpus'",
              "n.csv:1: missing column 'gpu'");
    nodes_bad("sn,cpu_milli,memory_mib,gpu,model\n"
              "\"n-0,64000,262144,2,P100\n",
              "n.csv:2: unterminated quote", NULL);
    nodes_bad("", "n.csv:1: empty", NULL);
}

static void test_alibaba_trace(void **state)
{
    char path[1024];
    shared_path("traces/alibaba-gpu-2023/openb_node_list_gpu_node.csv", path, sizeof(path));
    if (access(path, R_OK) != 0) {
        print_message("skipping: %s is not there\n", path);
        skip();
    }
    Buf err = {0};
    Cluster *c = NULL;
    int r = spec_load_cluster(path, &c, &err);
    if (r)
        print_message("%s\n", buf_str(&err));
    assert_int_equal(r, 0);
    assert_string_equal(c->name, "openb_node_list_gpu_node");
    assert_int_equal(c->n_nodes, 1213);
    assert_int_equal(c->n_gpus, 6212);
    assert_string_equal(c->nodes[0].name, "openb-node-0000");
    assert_true(cluster_consistent(c));
    size_t sum = 0;
    for (size_t i = 0; i < c->n_pools; i++)
        sum += c->pools[i].nodes;
    assert_int_equal(sum, 1213);
    cluster_free(c);
    buf_free(&err);

    /* the full list has nodes without GPUs */
    shared_path("traces/alibaba-gpu-2023/openb_node_list_all_node.csv", path, sizeof(path));
    if (access(path, R_OK) == 0) {
        r = spec_load_cluster(path, &c, &err);
        if (r)
            print_message("%s\n", buf_str(&err));
        assert_int_equal(r, 0);
        assert_int_equal(c->n_nodes, 1523);
        assert_int_equal(c->n_gpus, 6212);
        cluster_free(c);
        buf_free(&err);
    }
}

static void test_sniff(void **state)
{
    const char *cl = "name: x\npools: []\n";
    assert_int_equal(spec_sniff("x.yaml", cl, strlen(cl)), SPEC_CLUSTER);
    const char *broken = "name: x\npools: [\n";
    assert_int_equal(spec_sniff("x.yaml", broken, strlen(broken)), SPEC_CLUSTER);
    const char *json = "{\"pools\": []}";
    assert_int_equal(spec_sniff("x.json", json, strlen(json)), SPEC_CLUSTER);
    const char *job = "name: j\ngpus: 1\n";
    assert_int_equal(spec_sniff("j.yaml", job, strlen(job)), SPEC_JOBS);
    const char *jobs = "- name: j\n";
    assert_int_equal(spec_sniff("j.yaml", jobs, strlen(jobs)), SPEC_JOBS);
    const char *nodes = "\xEF\xBB\xBFsn,cpu_milli,memory_mib,gpu,model\nn,1,1,0,\n";
    assert_int_equal(spec_sniff("whatever", nodes, strlen(nodes)), SPEC_CLUSTER);
    const char *jcsv = "id,gpus\na,1\n";
    assert_int_equal(spec_sniff("whatever", jcsv, strlen(jcsv)), SPEC_JOBS_CSV);
    assert_int_equal(spec_sniff("e.yaml", "", 0), SPEC_UNKNOWN);
    assert_int_equal(spec_sniff("e.yaml", "# nothing\n", 10), SPEC_UNKNOWN);
    char *base = spec_base_name("a/b.c/demo.yaml");
    assert_string_equal(base, "demo");
    free(base);
    base = spec_base_name(".hidden");
    assert_string_equal(base, ".hidden");
    free(base);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_demo),
        cmocka_unit_test(test_large),
        cmocka_unit_test(test_defaults_and_unknown_model),
        cmocka_unit_test(test_json_spec),
        cmocka_unit_test(test_base_is_valid),
        cmocka_unit_test(test_team_capacity),
        cmocka_unit_test(test_errors_fields),
        cmocka_unit_test(test_errors_models_and_mig),
        cmocka_unit_test(test_errors_names),
        cmocka_unit_test(test_errors_syntax_and_shape),
        cmocka_unit_test(test_load_errors),
        cmocka_unit_test(test_alibaba_small),
        cmocka_unit_test(test_alibaba_errors),
        cmocka_unit_test(test_alibaba_trace),
        cmocka_unit_test(test_sniff),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
