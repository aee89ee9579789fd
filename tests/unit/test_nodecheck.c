/* test_nodecheck.c: a node's reported GPUs against the cluster file (server/nodecheck.h):
 * what matches (the catalogue's aliases, NVML's memory a little under the marketed
 * size, MIG only where the pool may be partitioned, a model the catalogue lacks named
 * loosely), and for each kind of difference the exact sentence the agent and the
 * operator get; the parser's refusals. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "server/nodecheck.h"
#include "spec/spec.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char spec[] =
    "name: check\n"
    "pools:\n"
    "  - {name: h100, tier: owned, nodes: 1, node: {gpu_model: H100-80GB-SXM5, gpus: 8, "
    "interconnect: nvswitch}}\n"
    "  - {name: a100, tier: owned, nodes: 1, node: {gpu_model: A100-80GB, gpus: 8, mig: true}}\n"
    "  - {name: l4, tier: owned, nodes: 1, node: {gpu_model: L4, gpus: 4}}\n"
    "  - {name: ada, tier: owned, nodes: 1, node: {gpu_model: RTX-6000-Ada, gpu_memory: 48GiB, "
    "gpus: 2}}\n"
    "  - {name: cpu, tier: owned, nodes: 1, node: {gpus: 0, cpus: 64}}\n";

static Cluster *cluster;

static int setup(void **state)
{
    (void)state;
    Buf err = {0};
    int r = spec_parse_cluster_yaml(spec, strlen(spec), "check.yaml", &cluster, &err);
    if (r < 0)
        fprintf(stderr, "%s\n", buf_str(&err));
    buf_free(&err);
    return r;
}

static int teardown(void **state)
{
    (void)state;
    cluster_free(cluster);
    return 0;
}

/* n GPUs indexed 0..n-1, all called name with memory mib and MIG capability mig. */
static void fill(ReportedGpu *g, size_t n, const char *name, uint64_t mib, int mig)
{
    for (size_t i = 0; i < n; i++)
        g[i] =
            (ReportedGpu){.index = (int64_t)i, .name = name, .memory_mib = mib, .mig_capable = mig};
}

/* Compare against `node`; expect a match when want is NULL, else exactly that sentence. */
static void expect(const char *node, const ReportedGpu *g, size_t n, const char *want)
{
    int idx = cluster_find_node(cluster, node);
    assert_true(idx >= 0);
    Buf diff = {0};
    bool ok = nodecheck_matches(cluster, (uint32_t)idx, g, n, &diff);
    if (!want) {
        if (!ok)
            fprintf(stderr, "unexpected difference: %s\n", buf_str(&diff));
        assert_true(ok);
        assert_int_equal(diff.len, 0);
    } else {
        assert_false(ok);
        assert_string_equal(buf_str(&diff), want);
    }
    buf_free(&diff);
}

static void test_matches(void **state)
{
    (void)state;
    ReportedGpu g[8];
    /* the simulated agent's names, and NVML's with its memory a little under 80 GiB */
    fill(g, 8, "NVIDIA H100-80GB-SXM5", 81920, 1);
    expect("h100-0", g, 8, NULL);
    fill(g, 8, "NVIDIA H100 80GB HBM3", 81559, 1);
    expect("h100-0", g, 8, NULL);
    fill(g, 8, "NVIDIA A100-SXM4-80GB", 81920, 1);
    expect("a100-0", g, 8, NULL);
    /* NVML's L4 has 23034 MiB of the catalogue's 24576 */
    fill(g, 4, "NVIDIA L4", 23034, 0);
    expect("l4-0", g, 4, NULL);
    /* nothing said about memory or MIG: the catalogue's A100 can be partitioned */
    fill(g, 8, "NVIDIA A100 80GB PCIe", 0, -1);
    expect("a100-0", g, 8, NULL);
    /* MIG capability does not matter on a pool that is never partitioned */
    fill(g, 8, "NVIDIA H100-80GB-SXM5", 81920, 0);
    expect("h100-0", g, 8, NULL);
    /* a model the catalogue lacks: NVML's longer name contains the spec's */
    fill(g, 2, "NVIDIA RTX 6000 Ada Generation", 49140, 0);
    expect("ada-0", g, 2, NULL);
    /* a node without GPUs, reporting none */
    expect("cpu-0", g, 0, NULL);
    /* indices in another order are the same GPUs */
    fill(g, 4, "NVIDIA L4", 23034, 0);
    g[0].index = 3;
    g[3].index = 0;
    expect("l4-0", g, 4, NULL);
}

static void test_memory_bounds(void **state)
{
    (void)state;
    ReportedGpu g[8];
    /* within a tenth of the catalogue's 81920 MiB, bounds included */
    fill(g, 8, "NVIDIA A100-SXM4-80GB", 73728, 1);
    expect("a100-0", g, 8, NULL);
    fill(g, 8, "NVIDIA A100-SXM4-80GB", 90112, 1);
    expect("a100-0", g, 8, NULL);
    fill(g, 8, "NVIDIA A100-SXM4-80GB", 73727, 1);
    expect("a100-0", g, 8,
           "the agent reports 8 x A100-80GB where the cluster file declares 8 x A100-80GB (pool "
           "a100): GPUs 0-7 have 73727 MiB of memory, not about 81920");
    fill(g, 8, "NVIDIA A100-SXM4-80GB", 90113, 1);
    g[2].memory_mib = 81920;
    expect("a100-0", g, 8,
           "the agent reports 8 x A100-80GB where the cluster file declares 8 x A100-80GB (pool "
           "a100): GPUs 0, 1, 3-7 have 90113 MiB of memory, not about 81920");
    /* the spec's own memory for a model the catalogue lacks */
    fill(g, 2, "NVIDIA RTX 6000 Ada Generation", 24000, 0);
    expect("ada-0", g, 2,
           "the agent reports 2 x 'NVIDIA RTX 6000 Ada Generation' where the cluster file "
           "declares 2 x RTX-6000-Ada (pool ada): GPUs 0, 1 have 24000 MiB of memory, not about "
           "49152");
}

/* The case that prompted it: eight simulated H100s for a node declared as four L4s. */
static void test_wrong_node(void **state)
{
    (void)state;
    ReportedGpu g[8];
    fill(g, 8, "NVIDIA H100-80GB-SXM5", 81920, 1);
    expect("l4-0", g, 8,
           "the agent reports 8 x H100-80GB-SXM5 where the cluster file declares 4 x L4 (pool "
           "l4): 8 GPUs, not 4; GPUs 0-7 are H100-80GB-SXM5, not L4");
    /* the same count, the wrong model: memory is not repeated, the model says it */
    fill(g, 4, "NVIDIA L40S", 46068, 0);
    expect("l4-0", g, 4,
           "the agent reports 4 x L40S where the cluster file declares 4 x L4 (pool l4): GPUs "
           "0-3 are L40S, not L4");
    /* a name nobody knows */
    fill(g, 4, "NVIDIA Foo 9000", 1000, 0);
    expect("l4-0", g, 4,
           "the agent reports 4 x 'NVIDIA Foo 9000' where the cluster file declares 4 x L4 (pool "
           "l4): GPUs 0-3 are 'NVIDIA Foo 9000', not L4");
    /* a catalogued model where the spec names one the catalogue lacks */
    fill(g, 2, "NVIDIA L40S", 46068, 0);
    expect(
        "ada-0", g, 2,
        "the agent reports 2 x L40S where the cluster file declares 2 x RTX-6000-Ada (pool ada): "
        "GPUs 0, 1 are L40S, not RTX-6000-Ada");
}

static void test_count_and_indices(void **state)
{
    (void)state;
    ReportedGpu g[8];
    fill(g, 3, "NVIDIA L4", 23034, 0);
    expect("l4-0", g, 3,
           "the agent reports 3 x L4 where the cluster file declares 4 x L4 (pool l4): 3 GPUs, "
           "not 4");
    /* one GPU fell off the bus */
    fill(g, 7, "NVIDIA H100-80GB-SXM5", 81920, 1);
    expect("h100-0", g, 7,
           "the agent reports 7 x H100-80GB-SXM5 where the cluster file declares 8 x "
           "H100-80GB-SXM5 (pool h100): 7 GPUs, not 8");
    expect("l4-0", g, 0,
           "the agent reports no GPUs where the cluster file declares 4 x L4 (pool l4): 0 GPUs, "
           "not 4");
    fill(g, 1, "NVIDIA L4", 23034, 0);
    expect("cpu-0", g, 1,
           "the agent reports 1 x L4 where the cluster file declares no GPUs (pool cpu): 1 GPU, "
           "not 0");
    /* the grants name GPUs by index */
    fill(g, 4, "NVIDIA L4", 23034, 0);
    g[3].index = 2;
    expect("l4-0", g, 4,
           "the agent reports 4 x L4 where the cluster file declares 4 x L4 (pool l4): GPU index 2 "
           "twice");
    g[3].index = 7;
    expect(
        "l4-0", g, 4,
        "the agent reports 4 x L4 where the cluster file declares 4 x L4 (pool l4): GPU index 7, "
        "where the node's GPUs are 0-3");
}

static void test_mixed_and_mig(void **state)
{
    (void)state;
    ReportedGpu g[8];
    /* two 40 GB boards among the 80 GB ones: named by model, memory not repeated */
    fill(g, 8, "NVIDIA A100-SXM4-80GB", 81920, 1);
    g[6] = (ReportedGpu){
        .index = 6, .name = "NVIDIA A100-SXM4-40GB", .memory_mib = 40960, .mig_capable = 1};
    g[7] = g[6];
    g[7].index = 7;
    expect("a100-0", g, 8,
           "the agent reports 6 x A100-80GB and 2 x A100-40GB where the cluster file declares 8 x "
           "A100-80GB (pool a100): GPUs 6, 7 are A100-40GB, not A100-80GB");
    /* runs and gaps in the list */
    fill(g, 8, "NVIDIA A100-SXM4-80GB", 81920, 1);
    for (int i = 0; i < 8; i++)
        if (i <= 2 || i == 5)
            g[i].name = "NVIDIA A100-SXM4-40GB";
    expect("a100-0", g, 8,
           "the agent reports 4 x A100-40GB and 4 x A100-80GB where the cluster file declares 8 x "
           "A100-80GB (pool a100): GPUs 0-2, 5 are A100-40GB, not A100-80GB");
    /* a pool that may be partitioned needs GPUs that can be */
    fill(g, 8, "NVIDIA A100-SXM4-80GB", 81920, 1);
    g[3].mig_capable = 0;
    expect("a100-0", g, 8,
           "the agent reports 8 x A100-80GB where the cluster file declares 8 x A100-80GB (pool "
           "a100): GPU 3 cannot be MIG-partitioned, and pool a100 allows MIG");
    /* without the agent's word, the catalogue's: an L4 has no MIG */
    fill(g, 8, "NVIDIA L4", 23034, -1);
    expect("a100-0", g, 8,
           "the agent reports 8 x L4 where the cluster file declares 8 x A100-80GB (pool a100): "
           "GPUs 0-7 are L4, not A100-80GB; GPUs 0-7 cannot be MIG-partitioned, and pool a100 "
           "allows MIG");
    /* every kind at once */
    fill(g, 3, "NVIDIA A100-SXM4-80GB", 81920, 1);
    g[1].memory_mib = 40000;
    g[2].name = "Tesla T4";
    g[2].mig_capable = -1;
    expect("a100-0", g, 3,
           "the agent reports 2 x A100-80GB and 1 x T4 where the cluster file declares 8 x "
           "A100-80GB (pool a100): 3 GPUs, not 8; GPU 2 is T4, not A100-80GB; GPU 1 has 40000 MiB "
           "of memory, not about 81920; GPU 2 cannot be MIG-partitioned, and pool a100 allows MIG");
}

static void parse_ok(const char *text, size_t want_n)
{
    json_t *j = json_loads(text, 0, NULL);
    assert_non_null(j);
    ReportedGpu *g = NULL;
    size_t n = 99;
    Buf err = {0};
    assert_int_equal(nodecheck_parse(j, &g, &n, &err), 0);
    assert_int_equal(n, want_n);
    if (n) {
        assert_string_equal(g[0].name, "NVIDIA L4");
        assert_int_equal(g[0].index, 0);
    }
    free(g);
    buf_free(&err);
    json_decref(j);
}

static void parse_bad(const char *text, const char *want)
{
    json_t *j = json_loads(text, JSON_DECODE_ANY, NULL);
    assert_non_null(j);
    ReportedGpu *g = NULL;
    size_t n = 0;
    Buf err = {0};
    assert_int_equal(nodecheck_parse(j, &g, &n, &err), -EINVAL);
    assert_non_null(strstr(buf_str(&err), want));
    assert_null(g);
    buf_free(&err);
    json_decref(j);
}

static void test_parse(void **state)
{
    (void)state;
    parse_ok("[]", 0);
    parse_ok("[{\"index\": 0, \"name\": \"NVIDIA L4\", \"memory_mib\": 23034, \"mig_capable\": "
             "false, \"uuid\": \"GPU-1\", \"mig\": [], \"nvlink_peers\": []}]",
             1);
    /* what an older agent sends: no mig_capable */
    json_t *j =
        json_loads("[{\"index\": 0, \"name\": \"NVIDIA L4\", \"memory_mib\": 23034}]", 0, NULL);
    ReportedGpu *g = NULL;
    size_t n = 0;
    Buf err = {0};
    assert_int_equal(nodecheck_parse(j, &g, &n, &err), 0);
    assert_int_equal(g[0].mig_capable, -1);
    assert_int_equal(g[0].memory_mib, 23034);
    free(g);
    json_decref(j);
    buf_free(&err);

    parse_bad("{}", "'gpus' must be a list");
    parse_bad("3", "'gpus' must be a list");
    parse_bad("[{\"index\": 0}]", "gpus[0]: expected");
    parse_bad("[{\"index\": 0, \"name\": \"a\"}, {\"index\": -1, \"name\": \"b\"}]", "gpus[1]");
    parse_bad("[{\"index\": \"0\", \"name\": \"a\"}]", "gpus[0]");
    parse_bad("[{\"index\": 0, \"name\": \"a\", \"memory_mib\": \"80GB\"}]", "gpus[0]");
    parse_bad("[{\"index\": 0, \"name\": \"a\", \"memory_mib\": -5}]", "gpus[0]");
    parse_bad("[{\"index\": 0, \"name\": \"a\", \"memory_mib\": 9000000000000000}]", "gpus[0]");
    parse_bad("[{\"index\": 0, \"name\": \"a\", \"mig_capable\": 1}]", "gpus[0]");
    parse_bad("[7]", "gpus[0]");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches),       cmocka_unit_test(test_memory_bounds),
        cmocka_unit_test(test_wrong_node),    cmocka_unit_test(test_count_and_indices),
        cmocka_unit_test(test_mixed_and_mig), cmocka_unit_test(test_parse),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
