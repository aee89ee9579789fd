/* test_kube_cluster.c: the cluster the Kubernetes engine builds from a teams spec and
 * Node objects (kube/nodes.c), and the mig-parted entries it writes for the MIG
 * manager (kube/migcfg.c). Nodes of one shape share a pool, topology labels become
 * switches, a node already carved keeps the instances it advertises, and a spec with
 * pools is refused (on Kubernetes the nodes say what there is). */
#include "kube/engine_int.h"

#include "core/cluster.h"
#include "core/mig.h"
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

static char spec_path[64];

static int write_spec(const char *text)
{
    snprintf(spec_path, sizeof(spec_path), "/tmp/gpuorch-kube-spec.XXXXXX");
    int fd = mkstemp(spec_path);
    if (fd < 0)
        return -1;
    ssize_t n = write(fd, text, strlen(text));
    close(fd);
    return n == (ssize_t)strlen(text) ? 0 : -1;
}

static const char *const teams = "name: k8s\n"
                                 "pools: []\n"
                                 "teams:\n"
                                 "  - {name: research, guaranteed_gpus: 8, burst_gpus: 16}\n";

static KubeNode node(const char *name, const char *product, unsigned gpus, const char *leaf,
                     const char *spine, int tier)
{
    KubeNode n = {.name = strdup(name),
                  .product = strdup(product),
                  .gpus = gpus,
                  .alloc_gpu = gpus,
                  .cpu_milli = 64000,
                  .memory_mib = 512 * 1024,
                  .pods = 110,
                  .ready = true,
                  .leaf = leaf ? strdup(leaf) : NULL,
                  .spine = spine ? strdup(spine) : NULL,
                  .tier = tier,
                  .price_micro_usd = -1};
    return n;
}

static void free_nodes(KubeNode *n, size_t k)
{
    for (size_t i = 0; i < k; i++)
        kube_node_free(&n[i]);
}

static void test_pools_and_switches(void **state)
{
    assert_int_equal(write_spec(teams), 0);
    KubeNode n[4] = {
        node("h100-0", "NVIDIA-H100-80GB-HBM3", 8, "leaf-0", "spine-0", TIER_RESERVED),
        node("h100-1", "NVIDIA-H100-80GB-HBM3", 8, "leaf-1", "spine-0", TIER_RESERVED),
        node("h100-2", "NVIDIA-H100-80GB-HBM3", 8, "leaf-1", "spine-0", TIER_SPOT),
        node("l4-0", "NVIDIA-L4", 4, NULL, NULL, TIER_OWNED),
    };
    Cluster *c = NULL;
    Buf err = {0};
    assert_int_equal(kube_cluster_build(spec_path, n, 4, &c, &err), 0);
    assert_int_equal(c->n_nodes, 4);
    assert_int_equal(c->n_teams, 1);
    /* the two reserved H100s share a pool; the spot one and the L4 have their own */
    assert_int_equal(c->n_pools, 3);
    assert_int_equal(c->nodes[0].pool, c->nodes[1].pool);
    assert_int_not_equal(c->nodes[0].pool, c->nodes[2].pool);
    const Pool *p = &c->pools[c->nodes[0].pool];
    assert_string_equal(p->name, "H100-80GB-SXM5-x8-reserved");
    assert_int_equal(p->tier, TIER_RESERVED);
    assert_int_equal(p->interconnect, IC_NVSWITCH); /* an HBM board of 8: NVSwitch */
    assert_int_equal(c->pools[c->nodes[3].pool].interconnect, IC_PCIE);
    /* leaves under their spine */
    int l0 = cluster_find_switch(c, "leaf-0"), l1 = cluster_find_switch(c, "leaf-1");
    int sp = cluster_find_switch(c, "spine-0");
    assert_true(l0 >= 0 && l1 >= 0 && sp >= 0);
    assert_int_equal(c->nodes[0].leaf, (uint32_t)l0);
    assert_int_equal(c->nodes[1].leaf, (uint32_t)l1);
    assert_int_equal(c->nodes[1].spine, (uint32_t)sp);
    assert_int_equal(c->nodes[3].leaf, NO_SWITCH);
    /* GPUs start whole: an all-zero layout is not "no MIG" */
    for (size_t g = 0; g < c->n_gpus; g++)
        assert_int_equal(c->gpus[g].mode, GPU_WHOLE);
    assert_true(cluster_consistent(c));
    cluster_free(c);
    free_nodes(n, 4);
    buf_free(&err);
    unlink(spec_path);
}

static void test_carved_node_keeps_its_instances(void **state)
{
    assert_int_equal(write_spec(teams), 0);
    KubeNode n = node("a100-0", "NVIDIA-A100-SXM4-80GB", 8, NULL, NULL, TIER_OWNED);
    n.mig_capable = true;
    strcpy(n.mig_strategy, "mixed");
    n.alloc_gpu = 6; /* two GPUs carved: 7 x 1g.10gb and 2 x 3g.40gb */
    n.n_mig = 2;
    strcpy(n.mig[0].profile, "1g.10gb");
    n.mig[0].count = 7;
    strcpy(n.mig[1].profile, "3g.40gb");
    n.mig[1].count = 2;
    Cluster *c = NULL;
    Buf err = {0};
    assert_int_equal(kube_cluster_build(spec_path, &n, 1, &c, &err), 0);
    const Node *nd = &c->nodes[0];
    assert_true(nd->mig_allowed);
    unsigned mig = 0, instances = 0;
    for (unsigned i = 0; i < nd->n_gpus; i++) {
        const Gpu *g = node_gpu_c(c, nd, i);
        if (g->mode == GPU_MIG) {
            mig++;
            instances += (unsigned)mig_layout_count(&g->mig);
            assert_true(mig_layout_valid(node_model(c, nd), &g->mig));
        }
    }
    assert_int_equal(mig, 2);
    assert_int_equal(instances, 9);
    assert_int_equal(nd->free_whole, 6);
    assert_true(cluster_consistent(c));

    /* the mig-parted entry of that layout names each GPU and counts its instances */
    Buf e = {0}, name = {0}, name2 = {0};
    kmig_entry(c, 0, &e);
    assert_non_null(strstr(buf_str(&e), "- devices: [0]\n      mig-enabled: false\n"));
    assert_non_null(strstr(buf_str(&e), "\"3g.40gb\": 2"));
    assert_non_null(strstr(buf_str(&e), "\"1g.10gb\": 7"));
    kmig_name(buf_str(&e), &name);
    assert_int_equal(strncmp(buf_str(&name), "gpuorch-", 8), 0);
    assert_true(name.len <= 63); /* a label value */
    /* another layout, another name; the same layout, the same name */
    kmig_name(buf_str(&e), &name2);
    assert_string_equal(buf_str(&name), buf_str(&name2));
    buf_reset(&name2);
    kmig_name("    - devices: [0]\n      mig-enabled: false\n", &name2);
    assert_string_not_equal(buf_str(&name), buf_str(&name2));
    buf_free(&e);
    buf_free(&name);
    buf_free(&name2);
    cluster_free(c);
    kube_node_free(&n);
    buf_free(&err);
    unlink(spec_path);
}

static void test_spec_with_pools_is_refused(void **state)
{
    assert_int_equal(write_spec("name: x\n"
                                "pools:\n"
                                "  - name: p\n"
                                "    tier: owned\n"
                                "    nodes: 1\n"
                                "    node: {gpu_model: L4, gpus: 1, cpus: 8, memory_gib: 32}\n"),
                     0);
    Cluster *c = NULL;
    Buf err = {0};
    assert_int_equal(kube_cluster_build(spec_path, NULL, 0, &c, &err), -EINVAL);
    assert_non_null(strstr(buf_str(&err), "pools come from the Node objects"));
    assert_null(c);
    buf_free(&err);
    unlink(spec_path);
}

static void test_unknown_model_keeps_its_memory(void **state)
{
    assert_int_equal(write_spec(teams), 0);
    KubeNode n = node("x-0", "NVIDIA-Fancy-9000", 2, NULL, NULL, TIER_OWNED);
    n.gpu_memory_mib = 12345;
    Cluster *c = NULL;
    Buf err = {0};
    assert_int_equal(kube_cluster_build(spec_path, &n, 1, &c, &err), 0);
    const GpuModel *m = node_model(c, &c->nodes[0]);
    assert_int_equal(m->memory_mib, 12345);
    assert_false(gpu_model_has_mig(m));
    cluster_free(c);
    kube_node_free(&n);
    buf_free(&err);
    unlink(spec_path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pools_and_switches),
        cmocka_unit_test(test_carved_node_keeps_its_instances),
        cmocka_unit_test(test_spec_with_pools_is_refused),
        cmocka_unit_test(test_unknown_model_keeps_its_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
