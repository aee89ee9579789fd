/* test_agent_fabric.c: fabric discovery (agent/fabric.c) on fake sysfs trees built in
 * a temporary directory, one per fabric kind, and the NCCL environment the table
 * (agent/nccl_fabric.c) makes of each, compared exactly: two active mlx5 InfiniBand
 * HCAs with ib0 and a down port left out; RoCE with its v2 GID at index 3 past an
 * all-zero one; EFA; gVNIC interfaces for GPUDirect-TCPX; Azure. Also the sysfs
 * parsers, the label words, and launch_env's rules: only a multi-node run gets the
 * settings, and the job's own env wins over them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "agent/fabric.h"
#include "agent/launch.h"
#include "agent/nccl_fabric.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- the fake tree ---- */

static char root[256];

static void mkdirs(const char *rel)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", root, rel);
    for (char *p = path + strlen(root) + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        mkdir(path, 0755);
        *p = '/';
    }
    mkdir(path, 0755);
}

/* root/rel with text, making its directories */
static void put_file(const char *rel, const char *text)
{
    char dir[1024], path[1024];
    snprintf(dir, sizeof(dir), "%s", rel);
    char *slash = strrchr(dir, '/');
    assert_non_null(slash);
    *slash = '\0';
    mkdirs(dir);
    snprintf(path, sizeof(path), "%s/%s", root, rel);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* root/rel -> a link whose last component is driver, as sysfs's driver links are */
static void put_driver(const char *rel, const char *driver)
{
    char target[256], path[1024];
    snprintf(target, sizeof(target), "../../../bus/pci/drivers/%s", driver);
    snprintf(path, sizeof(path), "%s/%s", root, rel);
    assert_int_equal(symlink(target, path), 0);
}

static void rdma_port(const char *dev, unsigned port, const char *state, const char *link,
                      const char *rate)
{
    char rel[256];
    snprintf(rel, sizeof(rel), "class/infiniband/%s/ports/%u/state", dev, port);
    put_file(rel, state);
    snprintf(rel, sizeof(rel), "class/infiniband/%s/ports/%u/link_layer", dev, port);
    put_file(rel, link);
    snprintf(rel, sizeof(rel), "class/infiniband/%s/ports/%u/rate", dev, port);
    put_file(rel, rate);
}

/* an interface with a device (driver NULL: none) */
static void netif(const char *name, const char *driver, const char *operstate)
{
    char rel[256];
    snprintf(rel, sizeof(rel), "class/net/%s/operstate", name);
    put_file(rel, operstate);
    if (!driver)
        return;
    snprintf(rel, sizeof(rel), "class/net/%s/device", name);
    mkdirs(rel);
    snprintf(rel, sizeof(rel), "class/net/%s/device/driver", name);
    put_driver(rel, driver);
}

static int make_root(void **state)
{
    snprintf(root, sizeof(root), "/tmp/gpuorch-fabric-XXXXXX");
    assert_non_null(mkdtemp(root));
    return 0;
}

static int remove_root(void **state)
{
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
    assert_int_equal(system(cmd), 0);
    return 0;
}

/* Two active NDR HCAs (mlx5_0, mlx5_1), a third whose port is down, IPoIB ib0, an
 * Ethernet eth0 and a docker0 bridge (no device: not an interface for NCCL). */
static void infiniband_tree(void)
{
    rdma_port("mlx5_0", 1, "4: ACTIVE\n", "InfiniBand\n", "400 Gb/sec (4X NDR)\n");
    rdma_port("mlx5_1", 1, "4: ACTIVE\n", "InfiniBand\n", "400 Gb/sec (4X NDR)\n");
    rdma_port("mlx5_2", 1, "1: DOWN\n", "InfiniBand\n", "10 Gb/sec (4X SDR)\n");
    netif("eth0", "hv_netvsc", "up\n");
    netif("ib0", "mlx5_core", "up\n");
    netif("docker0", NULL, "up\n");
    netif("lo", NULL, "unknown\n");
}

/* ---- helpers ---- */

static void expect_env(const char *label, const char *const *want)
{
    FabricInfo f;
    assert_int_equal(fabric_discover(root, &f), 0);
    char **env = NULL;
    assert_int_equal(nccl_fabric_env(&f, label, &env), 0);
    size_t n = 0;
    for (; env && env[n]; n++) {
        if (!want[n])
            fail_msg("unexpected %s", env[n]);
        assert_string_equal(env[n], want[n]);
    }
    if (want[n])
        fail_msg("missing %s", want[n]);
    nccl_fabric_env_free(env);
}

/* ---- the parsers ---- */

static void test_parsers(void **state)
{
    assert_true(fabric_parse_active("4: ACTIVE\n"));
    assert_false(fabric_parse_active("1: DOWN\n"));
    assert_false(fabric_parse_active("2: INIT\n"));
    assert_false(fabric_parse_active("ACTIVE"));
    assert_int_equal(fabric_parse_link_layer("InfiniBand\n"), FLINK_INFINIBAND);
    assert_int_equal(fabric_parse_link_layer("Ethernet\n"), FLINK_ETHERNET);
    assert_int_equal(fabric_parse_link_layer("Unspecified\n"), FLINK_UNKNOWN);
    assert_int_equal(fabric_parse_rate_gbps("400 Gb/sec (4X NDR)\n"), 400);
    assert_int_equal(fabric_parse_rate_gbps("2.5 Gb/sec (1X SDR)\n"), 2);
    assert_int_equal(fabric_parse_rate_gbps("fast\n"), 0);
    assert_true(fabric_parse_roce_v2("RoCE v2\n"));
    assert_false(fabric_parse_roce_v2("IB/RoCE v1\n"));
    assert_true(fabric_parse_gid_zero("0000:0000:0000:0000:0000:0000:0000:0000\n"));
    assert_false(fabric_parse_gid_zero("0000:0000:0000:0000:0000:ffff:0a00:0001\n"));
    assert_true(fabric_parse_gid_zero("garbage\n"));
    assert_true(fabric_parse_gid_zero("\n"));
    assert_true(fabric_parse_up("up\n"));
    assert_false(fabric_parse_up("down\n"));
    assert_false(fabric_parse_up("unknown\n"));
}

static void test_labels(void **state)
{
    assert_int_equal(nccl_fabric_kind_from_label("infiniband-ndr"), FABRIC_INFINIBAND);
    assert_int_equal(nccl_fabric_kind_from_label("IB"), FABRIC_INFINIBAND);
    assert_int_equal(nccl_fabric_kind_from_label("hdr200"), FABRIC_UNKNOWN);
    assert_int_equal(nccl_fabric_kind_from_label("ndr_400"), FABRIC_INFINIBAND);
    assert_int_equal(nccl_fabric_kind_from_label("roce-v2"), FABRIC_ROCE);
    assert_int_equal(nccl_fabric_kind_from_label("RoCEv2"), FABRIC_ROCE);
    assert_int_equal(nccl_fabric_kind_from_label("efa"), FABRIC_EFA);
    assert_int_equal(nccl_fabric_kind_from_label("aws EFA v2"), FABRIC_EFA);
    assert_int_equal(nccl_fabric_kind_from_label("gpudirect-tcpx"), FABRIC_TCPX);
    assert_int_equal(nccl_fabric_kind_from_label("azure-infiniband"), FABRIC_AZURE_IB);
    assert_int_equal(nccl_fabric_kind_from_label("ethernet-100g"), FABRIC_UNKNOWN);
    assert_int_equal(nccl_fabric_kind_from_label("fibre"), FABRIC_UNKNOWN); /* no "ib" word */
    assert_int_equal(nccl_fabric_kind_from_label(""), FABRIC_UNKNOWN);
    assert_int_equal(nccl_fabric_kind_from_label(NULL), FABRIC_UNKNOWN);
}

/* ---- each kind ---- */

static void test_discover_infiniband(void **state)
{
    infiniband_tree();
    FabricInfo f;
    assert_int_equal(fabric_discover(root, &f), 0);
    assert_int_equal(f.n_ports, 3);
    assert_string_equal(f.ports[0].dev, "mlx5_0");
    assert_true(f.ports[0].active);
    assert_int_equal(f.ports[0].link, FLINK_INFINIBAND);
    assert_int_equal(f.ports[0].rate_gbps, 400);
    assert_int_equal(f.ports[0].roce_v2_gid, -1);
    assert_false(f.ports[2].active);
    assert_int_equal(f.n_ifs, 2); /* docker0 and lo left out */
    assert_string_equal(f.ifs[0].name, "eth0");
    assert_string_equal(f.ifs[1].name, "ib0");
    assert_string_equal(f.ifs[1].driver, "mlx5_core");
    assert_true(f.ifs[1].up);
    assert_int_equal(nccl_fabric_kind_infer(&f), FABRIC_INFINIBAND);
}

static void test_env_infiniband(void **state)
{
    infiniband_tree();
    const char *want[] = {"NCCL_IB_HCA==mlx5_0:1,mlx5_1:1", "NCCL_SOCKET_IFNAME==ib0", NULL};
    expect_env("infiniband-ndr", want);
    expect_env(NULL, want); /* inferred from the active InfiniBand ports */
}

static void test_env_azure(void **state)
{
    infiniband_tree();
    const char *want[] = {"NCCL_IB_HCA==mlx5_0:1,mlx5_1:1", "NCCL_IB_PCI_RELAXED_ORDERING=1",
                          "NCCL_SOCKET_IFNAME==eth0", NULL};
    expect_env("azure-infiniband", want);
}

static void test_env_roce(void **state)
{
    rdma_port("mlx5_0", 1, "4: ACTIVE\n", "Ethernet\n", "100 Gb/sec (4X EDR)\n");
    const char *dir = "class/infiniband/mlx5_0/ports/1";
    char rel[256];
    const char *types[] = {"IB/RoCE v1\n", "RoCE v2\n", "IB/RoCE v1\n", "RoCE v2\n"};
    const char *gids[] = {"fe80:0000:0000:0000:0e42:a1ff:fe00:0001\n",
                          "0000:0000:0000:0000:0000:0000:0000:0000\n", /* v2, unused */
                          "0000:0000:0000:0000:0000:ffff:0a00:0001\n",
                          "0000:0000:0000:0000:0000:ffff:0a00:0001\n"};
    for (int i = 0; i < 4; i++) {
        snprintf(rel, sizeof(rel), "%s/gid_attrs/types/%d", dir, i);
        put_file(rel, types[i]);
        snprintf(rel, sizeof(rel), "%s/gids/%d", dir, i);
        put_file(rel, gids[i]);
        snprintf(rel, sizeof(rel), "%s/gid_attrs/ndevs/%d", dir, i);
        put_file(rel, "ens1f0\n");
    }
    netif("eno1", "igb", "up\n");
    netif("ens1f0", "mlx5_core", "up\n");
    FabricInfo f;
    assert_int_equal(fabric_discover(root, &f), 0);
    assert_int_equal(f.ports[0].roce_v2_gid, 3);
    assert_string_equal(f.ports[0].netdev, "ens1f0");
    assert_int_equal(nccl_fabric_kind_infer(&f), FABRIC_ROCE);
    const char *want[] = {"NCCL_IB_HCA==mlx5_0:1", "NCCL_IB_GID_INDEX=3",
                          "NCCL_SOCKET_IFNAME==ens1f0", NULL};
    expect_env("roce-v2", want);
    expect_env(NULL, want);
}

static void test_env_efa(void **state)
{
    rdma_port("efa_0", 1, "4: ACTIVE\n", "Unspecified\n", "100 Gb/sec\n");
    mkdirs("class/infiniband/efa_0/device");
    put_driver("class/infiniband/efa_0/device/driver", "efa");
    netif("ens32", "ena", "up\n");
    netif("ens33", "ena", "down\n");
    const char *want[] = {"FI_PROVIDER=efa", "FI_EFA_USE_DEVICE_RDMA=1",
                          "NCCL_SOCKET_IFNAME==ens32", NULL};
    expect_env("efa", want);
    expect_env(NULL, want); /* an EFA device is enough to infer */
}

static void test_env_tcpx(void **state)
{
    for (int i = 0; i < 5; i++) {
        char name[16];
        snprintf(name, sizeof(name), "eth%d", i);
        netif(name, "gve", "up\n");
    }
    const char *want[] = {"NCCL_SOCKET_IFNAME==eth0", "NCCL_GPUDIRECTTCPX_CTRL_DEV=eth0",
                          "NCCL_GPUDIRECTTCPX_SOCKET_IFNAME=eth1,eth2,eth3,eth4", NULL};
    expect_env("gpudirect-tcpx", want);
    const char *none[] = {NULL};
    expect_env(NULL, none); /* gVNICs alone do not say TCPX */
}

/* A label naming a kind the node cannot back sets nothing, and so does a missing tree. */
static void test_env_nothing_usable(void **state)
{
    const char *none[] = {NULL};
    netif("eth0", "gve", "up\n"); /* one gVNIC: no data NIC for TCPX */
    expect_env("infiniband", none);
    expect_env("roce", none);
    expect_env("efa", none);
    expect_env("tcpx", none);
    expect_env("ethernet", none);
    rdma_port("mlx5_0", 1, "1: DOWN\n", "InfiniBand\n", "400 Gb/sec (4X NDR)\n");
    expect_env("infiniband", none); /* its only port is down */
    FabricInfo f;
    char missing[300];
    snprintf(missing, sizeof(missing), "%s/none", root);
    assert_int_equal(fabric_discover(missing, &f), 0);
    assert_int_equal(f.n_ports + f.n_ifs, 0);
}

/* ---- launch_env ---- */

static const char *env_get(char **env, const char *name)
{
    size_t n = strlen(name);
    for (char **p = env; p && *p; p++)
        if (strncmp(*p, name, n) == 0 && (*p)[n] == '=')
            return *p + n + 1;
    return NULL;
}

static void test_launch_rules(void **state)
{
    char *fabric[] = {"NCCL_IB_HCA==mlx5_0:1", "NCCL_SOCKET_IFNAME==ib0", NULL};
    char *job_env[] = {"NCCL_SOCKET_IFNAME=eth9", NULL};
    char *base[] = {"NCCL_IB_HCA=old", "PATH=/bin", NULL};
    Assignment a = {.job = 7, .run = 1, .rank = 0, .world_size = 16, .env = job_env};
    a.master_addr = "node-a";
    a.multi_node = true;
    char **env = NULL;
    Buf err = {0};
    assert_int_equal(launch_env(&a, NULL, 0, "/ckpt/7", base, fabric, &env, &err), 0);
    assert_string_equal(env_get(env, "NCCL_IB_HCA"), "=mlx5_0:1");   /* over the agent's */
    assert_string_equal(env_get(env, "NCCL_SOCKET_IFNAME"), "eth9"); /* the job's wins */
    launch_env_free(env);

    /* the same world on one node: no network between its ranks, nothing set */
    a.multi_node = false;
    a.env = NULL;
    assert_int_equal(launch_env(&a, NULL, 0, "/ckpt/7", NULL, fabric, &env, &err), 0);
    assert_null(env_get(env, "NCCL_IB_HCA"));
    assert_null(env_get(env, "NCCL_SOCKET_IFNAME"));
    launch_env_free(env);
    buf_free(&err);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parsers),
        cmocka_unit_test(test_labels),
        cmocka_unit_test_setup_teardown(test_discover_infiniband, make_root, remove_root),
        cmocka_unit_test_setup_teardown(test_env_infiniband, make_root, remove_root),
        cmocka_unit_test_setup_teardown(test_env_azure, make_root, remove_root),
        cmocka_unit_test_setup_teardown(test_env_roce, make_root, remove_root),
        cmocka_unit_test_setup_teardown(test_env_efa, make_root, remove_root),
        cmocka_unit_test_setup_teardown(test_env_tcpx, make_root, remove_root),
        cmocka_unit_test_setup_teardown(test_env_nothing_usable, make_root, remove_root),
        cmocka_unit_test(test_launch_rules),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
