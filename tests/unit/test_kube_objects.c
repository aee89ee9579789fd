/* test_kube_objects.c: Kubernetes Node and Pod objects read into gpuorch's terms
 * (kube/objects.c), from JSON as the API server returns it for nodes that the GPU
 * Operator labels and pods that kubectl, a Job or the coscheduling plugin creates.
 * A wrong reading here puts a pod on the wrong GPUs or leaves a node's GPUs unused:
 * every case checks the values, and every refusal checks that it says why. */
#include "kube/objects.h"

#include "core/cluster.h"
#include "core/job.h"
#include "util/buf.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static json_t *load(const char *text)
{
    json_error_t err;
    json_t *j = json_loads(text, 0, &err);
    if (!j)
        fail_msg("bad test JSON at line %d: %s", err.line, err.text);
    return j;
}

static void assert_contains(const char *hay, const char *needle)
{
    if (!hay || !strstr(hay, needle))
        fail_msg("'%s' does not contain '%s'", hay ? hay : "(null)", needle);
}

static void node_ok(const char *text, const KubeLabels *labels, KubeNode *n)
{
    json_t *j = load(text);
    Buf why = {0};
    int r = kube_node_parse(j, labels, n, &why);
    if (r != 0)
        fail_msg("kube_node_parse = %d: %s", r, buf_str(&why));
    buf_free(&why);
    json_decref(j);
}

/* A refused node: -EINVAL, why containing each of the NULL-terminated needles, and the
 * output untouched. */
static void node_refused(const char *text, const KubeLabels *labels, ...)
{
    json_t *j = load(text);
    Buf why = {0};
    KubeNode n = {.gpus = 4242};
    assert_int_equal(kube_node_parse(j, labels, &n, &why), -EINVAL);
    assert_int_equal(n.gpus, 4242);
    assert_null(n.name);
    va_list ap;
    va_start(ap, labels);
    for (const char *s; (s = va_arg(ap, const char *));)
        assert_contains(buf_str(&why), s);
    va_end(ap);
    buf_free(&why);
    json_decref(j);
}

static void pod_ok(const char *text, const char *shared, KubePod *p)
{
    json_t *j = load(text);
    Buf why = {0};
    int r = kube_pod_parse(j, shared, p, &why);
    if (r != 0)
        fail_msg("kube_pod_parse = %d: %s", r, buf_str(&why));
    buf_free(&why);
    json_decref(j);
}

/* ---- nodes -------------------------------------------------------------------------- */

/* A DGX H100 as gpu-feature-discovery labels it, with the platform team's labels. */
static const char h100_node[] =
    "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"gpu-h100-01\","
    "\"uid\":\"0f6b8a52-7d0c-4a43-9f0e-3c1f2d9a1b11\",\"labels\":{"
    "\"kubernetes.io/hostname\":\"gpu-h100-01\","
    "\"nvidia.com/gpu.present\":\"true\",\"nvidia.com/gpu.product\":\"NVIDIA-H100-80GB-HBM3\","
    "\"nvidia.com/gpu.count\":\"8\",\"nvidia.com/gpu.memory\":\"81559\","
    "\"nvidia.com/gpu.family\":\"hopper\",\"nvidia.com/gpu.compute.major\":\"9\","
    "\"nvidia.com/mig.capable\":\"true\",\"nvidia.com/mig.strategy\":\"none\","
    "\"nvidia.com/mig.config\":\"all-disabled\",\"nvidia.com/mig.config.state\":\"success\","
    "\"nvidia.com/gpu.replicas\":\"1\",\"nvidia.com/gpu.sharing-strategy\":\"none\","
    "\"gpuorch.io/leaf\":\"leaf-3\",\"gpuorch.io/spine\":\"spine-1\","
    "\"gpuorch.io/fabric\":\"infiniband-ndr\",\"gpuorch.io/tier\":\"reserved\","
    "\"gpuorch.io/price-per-gpu-hour\":\"2.50\",\"gpuorch.io/interconnect\":\"NVSwitch\"}},"
    "\"spec\":{\"podCIDR\":\"10.244.3.0/24\",\"taints\":[{\"key\":\"nvidia.com/gpu\","
    "\"value\":\"present\",\"effect\":\"NoSchedule\"}]},"
    "\"status\":{\"capacity\":{\"cpu\":\"224\",\"memory\":\"2113745456Ki\",\"pods\":\"110\","
    "\"nvidia.com/gpu\":\"8\",\"rdma/ib\":\"8\"},"
    "\"allocatable\":{\"cpu\":\"222500m\",\"memory\":\"2113645456Ki\",\"pods\":\"110\","
    "\"ephemeral-storage\":\"1699740637556\",\"hugepages-1Gi\":\"0\","
    "\"nvidia.com/gpu\":\"8\",\"rdma/ib\":\"8\",\"nvidia.com/hca\":\"2\"},"
    "\"conditions\":[{\"type\":\"MemoryPressure\",\"status\":\"False\"},"
    "{\"type\":\"DiskPressure\",\"status\":\"False\"},"
    "{\"type\":\"Ready\",\"status\":\"True\",\"reason\":\"KubeletReady\"}]}}";

static void test_node_h100(void **state)
{
    KubeNode n;
    node_ok(h100_node, NULL, &n);
    assert_string_equal(n.name, "gpu-h100-01");
    assert_string_equal(n.product, "NVIDIA-H100-80GB-HBM3");
    assert_int_equal(n.gpus, 8);
    assert_int_equal(n.gpu_memory_mib, 81559);
    assert_true(n.mig_capable);
    assert_string_equal(n.mig_strategy, "none");
    assert_string_equal(n.mig_config, "all-disabled");
    assert_string_equal(n.mig_state, "success");
    assert_int_equal(n.alloc_gpu, 8);
    assert_int_equal(n.shared_replicas, 0); /* replicas=1: nothing shared */
    assert_false(n.time_sliced);
    assert_int_equal(n.n_mig, 0);
    assert_int_equal(n.cpu_milli, 222500);
    assert_int_equal(n.memory_mib, 2064106); /* 2113645456Ki / 1024, rounded down */
    assert_int_equal(n.pods, 110);
    assert_int_equal(n.rdma, 10); /* rdma/ib 8 + nvidia.com/hca 2 */
    assert_true(n.ready);
    assert_false(n.unschedulable);
    assert_null(n.taint); /* GPU pods tolerate nvidia.com/gpu */
    assert_string_equal(n.leaf, "leaf-3");
    assert_string_equal(n.spine, "spine-1");
    assert_string_equal(n.fabric, "infiniband-ndr");
    assert_string_equal(n.interconnect, "nvswitch");
    assert_int_equal(n.tier, TIER_RESERVED);
    assert_int_equal(n.price_micro_usd, 2500000);
    kube_node_free(&n);
    assert_null(n.name);
    kube_node_free(&n); /* twice, and NULL, are fine */
    kube_node_free(NULL);
}

/* An A100 node in MIG mixed mode: one GPU cut into seven 1g.10gb, one into two 3g.40gb
 * and a profile the device plugin lists with none left; the MIG manager mid-change. */
static void test_node_a100_mig_mixed(void **state)
{
    KubeNode n;
    node_ok("{\"kind\":\"Node\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"gpu-a100-07\","
            "\"labels\":{\"nvidia.com/gpu.product\":\"NVIDIA-A100-SXM4-80GB\","
            "\"nvidia.com/gpu.count\":\"8\",\"nvidia.com/gpu.memory\":\"81920\","
            "\"nvidia.com/mig.capable\":\"true\",\"nvidia.com/mig.strategy\":\"mixed\","
            "\"nvidia.com/mig.config\":\"custom-inference\","
            "\"nvidia.com/mig.config.state\":\"pending\","
            "\"nvidia.com/mig-1g.10gb.count\":\"7\",\"nvidia.com/mig-1g.10gb.memory\":\"9728\","
            "\"nvidia.com/mig-3g.40gb.count\":\"2\",\"nvidia.com/gpu.replicas\":\"1\","
            "\"gpuorch.io/tier\":\"spot\",\"gpuorch.io/interconnect\":\"nvlink\"}},"
            "\"spec\":{},\"status\":{\"allocatable\":{\"cpu\":\"7500m\",\"memory\":\"1024Gi\","
            "\"pods\":\"250\",\"nvidia.com/gpu\":\"6\",\"nvidia.com/mig-1g.10gb\":\"7\","
            "\"nvidia.com/mig-3g.40gb\":\"2\",\"nvidia.com/mig-2g.20gb\":\"0\","
            "\"vpc.amazonaws.com/efa\":\"4\"},"
            "\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}",
            NULL, &n);
    assert_string_equal(n.product, "NVIDIA-A100-SXM4-80GB");
    assert_int_equal(n.gpus, 8);
    assert_string_equal(n.mig_strategy, "mixed");
    assert_string_equal(n.mig_config, "custom-inference");
    assert_string_equal(n.mig_state, "pending");
    assert_int_equal(n.alloc_gpu, 6);
    assert_int_equal(n.n_mig, 2); /* mig-2g.20gb: 0 left out */
    size_t i1 = strcmp(n.mig[0].profile, "1g.10gb") == 0 ? 0 : 1;
    assert_string_equal(n.mig[i1].profile, "1g.10gb");
    assert_int_equal(n.mig[i1].count, 7);
    assert_string_equal(n.mig[1 - i1].profile, "3g.40gb");
    assert_int_equal(n.mig[1 - i1].count, 2);
    assert_int_equal(n.cpu_milli, 7500);
    assert_int_equal(n.memory_mib, 1048576);
    assert_int_equal(n.pods, 250);
    assert_int_equal(n.rdma, 4);
    assert_int_equal(n.tier, TIER_SPOT);
    assert_string_equal(n.interconnect, "nvlink-pairs"); /* the canonical name */
    assert_int_equal(n.price_micro_usd, -1);
    assert_null(n.leaf);
    kube_node_free(&n);
}

/* MIG single: GFD labels the slices as if they were the GPUs. */
static void test_node_mig_single(void **state)
{
    KubeNode n;
    node_ok("{\"metadata\":{\"name\":\"gpu-a100-40g-2\",\"labels\":{"
            "\"nvidia.com/gpu.product\":\"NVIDIA-A100-SXM4-40GB-MIG-1g.5gb\","
            "\"nvidia.com/gpu.count\":\"56\",\"nvidia.com/gpu.memory\":\"4864\","
            "\"nvidia.com/mig.capable\":\"true\",\"nvidia.com/mig.strategy\":\"single\","
            "\"nvidia.com/mig.config\":\"all-1g.5gb\",\"nvidia.com/mig.config.state\":"
            "\"success\"}},\"status\":{\"allocatable\":{\"nvidia.com/gpu\":\"56\"}}}",
            NULL, &n);
    assert_string_equal(n.product, "NVIDIA-A100-SXM4-40GB");
    assert_int_equal(n.gpus, 8); /* 56 slices, 7 per GPU */
    assert_int_equal(n.gpu_memory_mib, 40960);
    assert_int_equal(n.alloc_gpu, 0);
    assert_int_equal(n.n_mig, 1);
    assert_string_equal(n.mig[0].profile, "1g.5gb");
    assert_int_equal(n.mig[0].count, 56);
    assert_false(n.ready); /* no conditions yet */
    kube_node_free(&n);
}

/* MPS sharing: GFD adds -SHARED to the product; time slicing is told apart. */
static void test_node_shared(void **state)
{
    KubeNode n;
    node_ok("{\"metadata\":{\"name\":\"gpu-t-1\",\"labels\":{"
            "\"nvidia.com/gpu.product\":\"NVIDIA-A100-SXM4-80GB-SHARED\","
            "\"nvidia.com/gpu.count\":\"4\",\"nvidia.com/gpu.replicas\":\"4\","
            "\"nvidia.com/gpu.sharing-strategy\":\"mps\"}},"
            "\"status\":{\"allocatable\":{\"nvidia.com/gpu\":\"16\"}}}",
            NULL, &n);
    assert_string_equal(n.product, "NVIDIA-A100-SXM4-80GB");
    assert_int_equal(n.gpus, 4);
    assert_int_equal(n.shared_replicas, 4);
    assert_false(n.time_sliced);
    assert_int_equal(n.alloc_gpu, 16);
    kube_node_free(&n);

    /* no count label: capacity over the replicas */
    node_ok("{\"metadata\":{\"name\":\"gpu-t-2\",\"labels\":{"
            "\"nvidia.com/gpu.product\":\"NVIDIA-H100-80GB-HBM3-SHARED\","
            "\"nvidia.com/gpu.replicas\":\"4\","
            "\"nvidia.com/gpu.sharing-strategy\":\"time-slicing\"}},"
            "\"status\":{\"capacity\":{\"nvidia.com/gpu\":\"8\"},"
            "\"allocatable\":{\"nvidia.com/gpu\":\"8\"}}}",
            NULL, &n);
    assert_string_equal(n.product, "NVIDIA-H100-80GB-HBM3");
    assert_int_equal(n.gpus, 2);
    assert_true(n.time_sliced);
    assert_int_equal(n.shared_replicas, 0);
    kube_node_free(&n);
}

/* Cordoned, and the kubelet stopped reporting: the lifecycle controller's taints. */
static void test_node_cordoned_not_ready(void **state)
{
    KubeNode n;
    node_ok("{\"kind\":\"Node\",\"metadata\":{\"name\":\"gpu-h100-09\",\"labels\":{"
            "\"nvidia.com/gpu.product\":\"NVIDIA-H100-80GB-HBM3\",\"nvidia.com/gpu.count\":"
            "\"8\"}},\"spec\":{\"unschedulable\":true,\"taints\":["
            "{\"key\":\"node.kubernetes.io/unschedulable\",\"effect\":\"NoSchedule\","
            "\"timeAdded\":\"2024-05-01T11:00:00Z\"},"
            "{\"key\":\"node.kubernetes.io/unreachable\",\"effect\":\"NoExecute\","
            "\"timeAdded\":\"2024-05-01T11:05:00Z\"}]},"
            "\"status\":{\"allocatable\":{\"cpu\":\"8\",\"memory\":\"64Gi\"},"
            "\"conditions\":[{\"type\":\"Ready\",\"status\":\"Unknown\","
            "\"reason\":\"NodeStatusUnknown\"}]}}",
            NULL, &n);
    assert_true(n.unschedulable);
    assert_false(n.ready);
    assert_string_equal(n.taint, "node.kubernetes.io/unreachable");
    assert_int_equal(n.cpu_milli, 8000);
    assert_int_equal(n.memory_mib, 65536);
    assert_int_equal(n.gpus, 8);
    assert_int_equal(n.alloc_gpu, 0);
    kube_node_free(&n);

    /* only cordoned: the mirror taint is not a taint of its own */
    node_ok("{\"metadata\":{\"name\":\"c\"},\"spec\":{\"unschedulable\":true,\"taints\":["
            "{\"key\":\"node.kubernetes.io/unschedulable\",\"effect\":\"NoSchedule\"}]},"
            "\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}",
            NULL, &n);
    assert_true(n.unschedulable);
    assert_true(n.ready);
    assert_null(n.taint);
    assert_null(n.product); /* no GPU */
    assert_int_equal(n.gpus, 0);
    assert_int_equal(n.tier, TIER_OWNED);
    kube_node_free(&n);
}

static void test_node_tainted(void **state)
{
    KubeNode n;
    node_ok("{\"metadata\":{\"name\":\"gpu-h100-12\"},\"spec\":{\"taints\":["
            "{\"key\":\"nvidia.com/gpu\",\"value\":\"present\",\"effect\":\"NoSchedule\"},"
            "{\"key\":\"example.com/flaky-nic\",\"effect\":\"PreferNoSchedule\"},"
            "{\"key\":\"dedicated\",\"value\":\"team-a\",\"effect\":\"NoSchedule\"},"
            "{\"key\":\"maintenance\",\"effect\":\"NoExecute\"}]},"
            "\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}",
            NULL, &n);
    assert_string_equal(n.taint, "dedicated");
    assert_true(n.ready);
    kube_node_free(&n);
}

/* Custom label names for the platform team's topology; NULL fields keep the defaults. */
static void test_node_custom_labels(void **state)
{
    KubeLabels l = {.leaf = "topology.example.com/leaf", .tier = "example.com/capacity"};
    KubeNode n;
    node_ok("{\"metadata\":{\"name\":\"n1\",\"labels\":{"
            "\"topology.example.com/leaf\":\"tor-17\",\"gpuorch.io/leaf\":\"ignored\","
            "\"gpuorch.io/spine\":\"sp-2\",\"example.com/capacity\":\"on-demand\","
            "\"gpuorch.io/tier\":\"spot\",\"gpuorch.io/price-per-gpu-hour\":\"12.345678\"}}}",
            &l, &n);
    assert_string_equal(n.leaf, "tor-17");
    assert_string_equal(n.spine, "sp-2");
    assert_int_equal(n.tier, TIER_ON_DEMAND);
    assert_int_equal(n.price_micro_usd, 12345678);
    kube_node_free(&n);

    KubeLabels d;
    kube_labels_defaults(&d);
    assert_string_equal(d.leaf, "gpuorch.io/leaf");
    assert_string_equal(d.price, "gpuorch.io/price-per-gpu-hour");
    assert_string_equal(d.interconnect, "gpuorch.io/interconnect");
}

static void test_node_refused(void **state)
{
    node_refused("{\"metadata\":{\"name\":\"n\",\"labels\":{\"gpuorch.io/tier\":\"cheap\"}}}", NULL,
                 "gpuorch.io/tier", "cheap", NULL);
    KubeLabels l = {.tier = "example.com/capacity"};
    node_refused("{\"metadata\":{\"name\":\"n\",\"labels\":{\"example.com/capacity\":\"x\"}}}", &l,
                 "example.com/capacity", NULL);
    node_refused("{\"metadata\":{\"name\":\"n\",\"labels\":{"
                 "\"gpuorch.io/price-per-gpu-hour\":\"2,50\"}}}",
                 NULL, "gpuorch.io/price-per-gpu-hour", "2,50", NULL);
    node_refused("{\"metadata\":{\"name\":\"n\",\"labels\":{"
                 "\"gpuorch.io/interconnect\":\"carrier-pigeon\"}}}",
                 NULL, "gpuorch.io/interconnect", NULL);
    node_refused("{\"metadata\":{\"name\":\"n\",\"labels\":{\"nvidia.com/gpu.count\":\"eight\"}}}",
                 NULL, "nvidia.com/gpu.count", NULL);
    node_refused("{\"metadata\":{\"name\":\"n\"},\"status\":{\"allocatable\":{"
                 "\"nvidia.com/gpu\":\"1.5\"}}}",
                 NULL, "nvidia.com/gpu", "1.5", NULL);
    node_refused("{\"metadata\":{\"labels\":{}},\"status\":{}}", NULL, "metadata.name", NULL);
    node_refused("{\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\"}}", NULL, "Pod", NULL);
}

/* ---- quantities --------------------------------------------------------------------- */

/* Allocatable cpu/memory rounds down (a node offers no more than it has), a container's
 * request up (a pod gets no less than it asks). */
static void check_cpu(const char *q, uint32_t node_milli, uint32_t pod_milli)
{
    char text[512];
    KubeNode n;
    KubePod p;
    snprintf(text, sizeof(text),
             "{\"metadata\":{\"name\":\"n\"},\"status\":{\"allocatable\":{\"cpu\":\"%s\"}}}", q);
    node_ok(text, NULL, &n);
    if (n.cpu_milli != node_milli)
        fail_msg("node cpu '%s' = %u milli, expected %u", q, n.cpu_milli, node_milli);
    kube_node_free(&n);
    snprintf(text, sizeof(text),
             "{\"metadata\":{\"name\":\"p\",\"namespace\":\"d\"},\"spec\":{\"containers\":["
             "{\"name\":\"c\",\"resources\":{\"requests\":{\"cpu\":\"%s\"}}}]}}",
             q);
    pod_ok(text, NULL, &p);
    assert_false(p.bad);
    if (p.spec.cpu_milli != pod_milli)
        fail_msg("pod cpu '%s' = %u milli, expected %u", q, p.spec.cpu_milli, pod_milli);
    kube_pod_free(&p);
}

static void check_memory(const char *q, uint32_t node_mib, uint32_t pod_mib)
{
    char text[512];
    KubeNode n;
    KubePod p;
    snprintf(text, sizeof(text),
             "{\"metadata\":{\"name\":\"n\"},\"status\":{\"allocatable\":{\"memory\":\"%s\"}}}", q);
    node_ok(text, NULL, &n);
    if (n.memory_mib != node_mib)
        fail_msg("node memory '%s' = %u MiB, expected %u", q, n.memory_mib, node_mib);
    kube_node_free(&n);
    snprintf(text, sizeof(text),
             "{\"metadata\":{\"name\":\"p\",\"namespace\":\"d\"},\"spec\":{\"containers\":["
             "{\"name\":\"c\",\"resources\":{\"limits\":{\"memory\":\"%s\"}}}]}}",
             q);
    pod_ok(text, NULL, &p);
    assert_false(p.bad);
    if (p.spec.memory_mib != pod_mib)
        fail_msg("pod memory '%s' = %u MiB, expected %u", q, p.spec.memory_mib, pod_mib);
    kube_pod_free(&p);
}

/* Garbage is refused on a node (-EINVAL naming the resource) and marks a pod bad. */
static void check_garbage(const char *q)
{
    char text[512];
    snprintf(text, sizeof(text),
             "{\"metadata\":{\"name\":\"n\"},\"status\":{\"allocatable\":{\"memory\":\"%s\"}}}", q);
    json_t *j = load(text);
    Buf why = {0};
    KubeNode n = {.cpu_milli = 99};
    int r = kube_node_parse(j, NULL, &n, &why);
    if (r != -EINVAL)
        fail_msg("node memory '%s': %d (memory_mib %u), expected -EINVAL", q, r, n.memory_mib);
    assert_int_equal(n.cpu_milli, 99);
    assert_contains(buf_str(&why), "status.allocatable memory");
    buf_free(&why);
    json_decref(j);

    KubePod p;
    snprintf(text, sizeof(text),
             "{\"metadata\":{\"name\":\"p\",\"namespace\":\"d\"},\"spec\":{\"containers\":["
             "{\"name\":\"main\",\"resources\":{\"requests\":{\"cpu\":\"%s\"}}}]}}",
             q);
    pod_ok(text, NULL, &p);
    if (!p.bad)
        fail_msg("pod cpu '%s' not bad (cpu_milli %u)", q, p.spec.cpu_milli);
    assert_contains(p.why, "container main");
    assert_contains(p.why, "cpu");
    assert_string_equal(p.spec.name, "d/p"); /* the rest is still read */
    kube_pod_free(&p);
}

static void test_quantities(void **state)
{
    check_cpu("500m", 500, 500);
    check_cpu("1.5", 1500, 1500);
    check_cpu("8", 8000, 8000);
    check_cpu("7500m", 7500, 7500);
    check_cpu("1e3", 1000000, 1000000);
    check_cpu("1E-3", 1, 1);
    check_cpu("2k", 2000000, 2000000);
    check_cpu("+2", 2000, 2000);
    check_cpu(".5", 500, 500);
    check_cpu("5.", 5000, 5000);
    check_cpu("0.0001", 0, 1); /* a tenth of a millicore */

    check_memory("2Gi", 2048, 2048);
    check_memory("1024Mi", 1024, 1024);
    check_memory("12345Ki", 12, 13); /* 12.06 MiB */
    check_memory("536870912", 512, 512);
    check_memory("128974848", 123, 123);
    check_memory("1e9", 953, 954); /* 953.67 MiB */
    check_memory("1G", 953, 954);
    check_memory("1.5Gi", 1536, 1536);
    check_memory("0.5Ti", 524288, 524288);
    check_memory("500m", 0, 1); /* half a byte */
    check_memory("00000000000000000000000000001Mi", 1, 1);
    /* 18 significant digits are kept exactly */
    check_memory("123456789012345678m", 117737568, 117737569);
    /* 19 digits, one past those kept exactly, then milli: 10^15 bytes */
    check_memory("1000000000000000000m", 953674316, 953674317);

    static const char *const garbage[] = {
        "",
        "abc",
        "12x",
        "1.2.3",
        "-1",
        "1Kb",
        "Gi",
        "1 Gi",
        "1e",
        "1e3.5",
        "1ki",
        "1.5.Gi",
        "++1",
        "1e99",
        "1Gi ",
        "0x10",
        "99999999999999999999Ei",
        "1.0000000000000000001",
        "100u",
        "1mi",
        "e3",
        ".",
    };
    for (size_t i = 0; i < sizeof(garbage) / sizeof(garbage[0]); i++)
        check_garbage(garbage[i]);
}

/* ---- pods --------------------------------------------------------------------------- */

/* One worker of an 8-GPU gang, as the coscheduling plugin's PodGroup members look. */
static const char gang_pod[] =
    "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"llama-train-worker-3\","
    "\"namespace\":\"ml-research\",\"uid\":\"8c4f7d3e-2b1a-4e5f-9a6b-1c2d3e4f5a6b\","
    "\"creationTimestamp\":\"2024-05-01T12:00:00Z\",\"resourceVersion\":\"48213\","
    "\"labels\":{\"scheduling.x-k8s.io/pod-group\":\"llama-train\",\"app\":\"llama\"},"
    "\"annotations\":{\"gpuorch.io/preemptible\":\"true\","
    "\"gpuorch.io/checkpoint-interval\":\"30m\",\"gpuorch.io/checkpoint-cost\":\"2m\","
    "\"gpuorch.io/topology\":\"leaf!\",\"gpuorch.io/duration-estimate\":\"36h\","
    "\"gpuorch.io/project\":\"llama\",\"gpuorch.io/fabric\":\"infiniband-ndr\","
    "\"gpuorch.io/workload-class\":\"llm-pretrain\"}},"
    "\"spec\":{\"schedulerName\":\"gpuorch\",\"priorityClassName\":\"gpuorch-high\","
    "\"priority\":100000,\"terminationGracePeriodSeconds\":120,\"restartPolicy\":\"Never\","
    "\"containers\":[{\"name\":\"trainer\",\"image\":\"nvcr.io/nvidia/pytorch:24.04-py3\","
    "\"resources\":{\"requests\":{\"cpu\":\"96\",\"memory\":\"1600Gi\","
    "\"nvidia.com/gpu\":\"8\",\"rdma/ib\":\"8\"},\"limits\":{\"memory\":\"1600Gi\","
    "\"nvidia.com/gpu\":\"8\",\"rdma/ib\":\"8\"}}}],"
    "\"tolerations\":[{\"key\":\"nvidia.com/gpu\",\"operator\":\"Exists\","
    "\"effect\":\"NoSchedule\"}]},"
    "\"status\":{\"phase\":\"Pending\",\"qosClass\":\"Burstable\"}}";

static void test_pod_gang(void **state)
{
    KubePod p;
    pod_ok(gang_pod, NULL, &p);
    assert_false(p.bad);
    assert_string_equal(p.ns, "ml-research");
    assert_string_equal(p.name, "llama-train-worker-3");
    assert_string_equal(p.uid, "8c4f7d3e-2b1a-4e5f-9a6b-1c2d3e4f5a6b");
    assert_null(p.node);
    assert_string_equal(p.scheduler, "gpuorch");
    assert_int_equal(p.phase, POD_PENDING);
    assert_false(p.deleting);
    assert_int_equal(p.grace_s, 120);
    assert_int_equal(p.created_ms, INT64_C(1714564800000));
    assert_int_equal(p.exit_code, -1);
    assert_string_equal(p.group, "pg/llama-train");
    assert_string_equal(p.priority_class, "gpuorch-high");
    assert_int_equal(p.rdma, 8);

    const JobSpec *j = &p.spec;
    assert_string_equal(j->name, "ml-research/llama-train-worker-3");
    assert_string_equal(j->team, "ml-research");
    assert_string_equal(j->project, "llama");
    assert_int_equal(j->workers, 1);
    assert_int_equal(j->req, REQ_GPUS);
    assert_int_equal(j->gpus, 8);
    assert_null(j->mig);
    assert_int_equal(j->cpu_milli, 96000);
    assert_int_equal(j->memory_mib, 1600 * 1024);
    assert_int_equal(j->kind, KIND_TRAINING);
    assert_int_equal(j->priority, PRIO_HIGH);
    assert_true(j->preemptible);
    assert_int_equal(j->checkpoint_interval_ms, 30 * 60000);
    assert_int_equal(j->checkpoint_cost_ms, 2 * 60000);
    assert_int_equal(j->checkpoint_grace_ms, 120000);
    assert_int_equal(j->duration_estimate_ms, INT64_C(36) * 3600000);
    assert_int_equal(j->scope, SCOPE_LEAF);
    assert_true(j->scope_required);
    assert_string_equal(j->fabric, "infiniband-ndr");
    assert_string_equal(j->workload_class, "llm-pretrain");
    assert_int_equal(j->n_command, 0);
    assert_true(job_spec_spot_ok(j));
    kube_pod_free(&p);
    assert_null(p.name);
    kube_pod_free(&p);
    kube_pod_free(NULL);
}

/* A batch/v1 Job's pod: GPUs given as limits only, failed with an OOM kill, being
 * deleted; a timestamp with fraction and offset. */
static void test_pod_job(void **state)
{
    KubePod p;
    pod_ok("{\"kind\":\"Pod\",\"metadata\":{\"name\":\"nightly-eval-x7k2p\","
           "\"generateName\":\"nightly-eval-\",\"namespace\":\"eval\",\"uid\":\"u-1\","
           "\"creationTimestamp\":\"2024-05-01T14:00:00.250+02:00\","
           "\"deletionTimestamp\":\"2024-05-01T13:00:00Z\",\"deletionGracePeriodSeconds\":30,"
           "\"labels\":{\"batch.kubernetes.io/job-name\":\"nightly-eval\","
           "\"job-name\":\"nightly-eval\"},"
           "\"ownerReferences\":[{\"apiVersion\":\"batch/v1\",\"kind\":\"Job\","
           "\"name\":\"nightly-eval\",\"uid\":\"j-1\",\"controller\":true,"
           "\"blockOwnerDeletion\":true}]},"
           "\"spec\":{\"nodeName\":\"gpu-h100-01\",\"schedulerName\":\"default-scheduler\","
           "\"priorityClassName\":\"batch\",\"containers\":[{\"name\":\"eval\","
           "\"resources\":{\"requests\":{\"cpu\":\"4\",\"memory\":\"32Gi\"},"
           "\"limits\":{\"nvidia.com/gpu\":2}}}]},"
           "\"status\":{\"phase\":\"Failed\",\"containerStatuses\":["
           "{\"name\":\"eval\",\"state\":{\"terminated\":{\"exitCode\":137,"
           "\"reason\":\"OOMKilled\"}}}]}}",
           NULL, &p);
    assert_false(p.bad);
    assert_string_equal(p.group, "job/nightly-eval");
    assert_string_equal(p.node, "gpu-h100-01");
    assert_string_equal(p.scheduler, "default-scheduler");
    assert_int_equal(p.phase, POD_FAILED);
    assert_true(p.deleting);
    assert_int_equal(p.exit_code, 137);
    assert_int_equal(p.grace_s, 30); /* the default */
    assert_int_equal(p.created_ms, INT64_C(1714564800250));
    assert_int_equal(p.spec.req, REQ_GPUS);
    assert_int_equal(p.spec.gpus, 2); /* from the limit */
    assert_int_equal(p.spec.cpu_milli, 4000);
    assert_int_equal(p.spec.memory_mib, 32768);
    assert_int_equal(p.spec.priority, PRIO_LOW); /* class "batch" */
    assert_int_equal(p.spec.kind, KIND_TRAINING);
    assert_int_equal(p.spec.checkpoint_grace_ms, 30000);
    assert_false(p.spec.preemptible);
    kube_pod_free(&p);

    /* the same pod owned by something else is a bare pod: batch */
    pod_ok("{\"metadata\":{\"name\":\"x\",\"namespace\":\"eval\",\"ownerReferences\":["
           "{\"apiVersion\":\"example.com/v1\",\"kind\":\"Job\",\"name\":\"other\"}]},"
           "\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":"
           "{\"nvidia.com/gpu\":\"1\"}}}]},\"status\":{\"phase\":\"Running\","
           "\"containerStatuses\":[{\"name\":\"c\",\"state\":{\"running\":{}}}]}}",
           NULL, &p);
    assert_string_equal(p.group, "pod/x");
    assert_int_equal(p.spec.kind, KIND_BATCH);
    assert_int_equal(p.phase, POD_RUNNING);
    assert_int_equal(p.exit_code, -1);
    kube_pod_free(&p);
}

/* A Deployment's replica asking one MIG slice. */
static void test_pod_mig(void **state)
{
    KubePod p;
    pod_ok("{\"metadata\":{\"name\":\"bert-serve-6d4f8-abcde\",\"namespace\":\"serving\","
           "\"ownerReferences\":[{\"apiVersion\":\"apps/v1\",\"kind\":\"ReplicaSet\","
           "\"name\":\"bert-serve-6d4f8\",\"controller\":true}]},"
           "\"spec\":{\"priorityClassName\":\"gpuorch-production\",\"containers\":["
           "{\"name\":\"server\",\"resources\":{\"requests\":{\"cpu\":\"2\",\"memory\":\"8Gi\","
           "\"nvidia.com/mig-1g.10gb\":\"1\"},\"limits\":{\"nvidia.com/mig-1g.10gb\":\"1\"}}}]},"
           "\"status\":{\"phase\":\"Running\"}}",
           NULL, &p);
    assert_false(p.bad);
    assert_string_equal(p.group, "pod/bert-serve-6d4f8-abcde");
    assert_int_equal(p.spec.req, REQ_MIG);
    assert_string_equal(p.spec.mig, "1g.10gb");
    assert_int_equal(p.spec.gpus, 0);
    assert_int_equal(p.spec.kind, KIND_INFERENCE);
    assert_int_equal(p.spec.priority, PRIO_PRODUCTION);
    assert_int_equal(p.spec.cpu_milli, 2000);
    assert_int_equal(p.spec.memory_mib, 8192);
    kube_pod_free(&p);

    /* two slices of one profile: one per pod */
    pod_ok("{\"metadata\":{\"name\":\"m2\",\"namespace\":\"serving\"},\"spec\":{\"containers\":["
           "{\"name\":\"a\",\"resources\":{\"limits\":{\"nvidia.com/mig-1g.10gb\":\"1\"}}},"
           "{\"name\":\"b\",\"resources\":{\"limits\":{\"nvidia.com/mig-1g.10gb\":\"1\"}}}]}}",
           NULL, &p);
    assert_true(p.bad);
    assert_contains(p.why, "2 nvidia.com/mig-1g.10gb");
    assert_contains(p.why, "one MIG slice");
    kube_pod_free(&p);
}

static void test_pod_gpu_memory(void **state)
{
    KubePod p;
    /* no GPU resource: a memory ask, right-sized by the engine */
    pod_ok("{\"metadata\":{\"name\":\"embed\",\"namespace\":\"serving\",\"annotations\":{"
           "\"gpuorch.io/gpu-memory\":\"20Gi\",\"gpuorch.io/priority\":\"high\"}},"
           "\"spec\":{\"priorityClassName\":\"gpuorch-low\",\"containers\":[{\"name\":\"c\","
           "\"resources\":{\"requests\":{\"cpu\":\"1\"}}}]}}",
           NULL, &p);
    assert_false(p.bad);
    assert_int_equal(p.spec.req, REQ_MEMORY);
    assert_int_equal(p.spec.gpu_memory_mib, 20480);
    assert_int_equal(p.spec.gpus, 0);
    assert_int_equal(p.spec.kind, KIND_INFERENCE);
    assert_int_equal(p.spec.priority, PRIO_HIGH); /* the annotation beats the class */
    kube_pod_free(&p);

    /* one whole GPU asked, memory annotated: right-size it */
    pod_ok("{\"metadata\":{\"name\":\"embed2\",\"namespace\":\"serving\",\"annotations\":{"
           "\"gpuorch.io/gpu-memory\":\"10GiB\",\"gpuorch.io/kind\":\"batch\"}},"
           "\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":{"
           "\"nvidia.com/gpu\":\"1\"}}}]}}",
           NULL, &p);
    assert_false(p.bad);
    assert_int_equal(p.spec.req, REQ_MEMORY);
    assert_int_equal(p.spec.gpu_memory_mib, 10240);
    assert_int_equal(p.spec.kind, KIND_BATCH); /* the annotation says */
    kube_pod_free(&p);

    /* two whole GPUs cannot be right-sized into one slice */
    pod_ok("{\"metadata\":{\"name\":\"e3\",\"namespace\":\"serving\",\"annotations\":{"
           "\"gpuorch.io/gpu-memory\":\"10Gi\"}},\"spec\":{\"containers\":[{\"name\":\"c\","
           "\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"2\"}}}]}}",
           NULL, &p);
    assert_true(p.bad);
    assert_contains(p.why, "annotation gpuorch.io/gpu-memory:");
    assert_contains(p.why, "2 whole GPUs");
    assert_int_equal(p.spec.req, REQ_GPUS);
    assert_int_equal(p.spec.gpus, 2);
    kube_pod_free(&p);

    /* a MIG slice and a memory size: two asks */
    pod_ok("{\"metadata\":{\"name\":\"e4\",\"namespace\":\"serving\",\"annotations\":{"
           "\"gpuorch.io/gpu-memory\":\"10Gi\"}},\"spec\":{\"containers\":[{\"name\":\"c\","
           "\"resources\":{\"limits\":{\"nvidia.com/mig-2g.20gb\":\"1\"}}}]}}",
           NULL, &p);
    assert_true(p.bad);
    assert_contains(p.why, "annotation gpuorch.io/gpu-memory:");
    assert_contains(p.why, "mig-2g.20gb");
    kube_pod_free(&p);
}

static void test_pod_mps(void **state)
{
    KubePod p;
    pod_ok("{\"metadata\":{\"name\":\"tts\",\"namespace\":\"serving\",\"annotations\":{"
           "\"gpuorch.io/gpu-fraction\":\"0.25\",\"gpuorch.io/preemptible\":\"false\"}},"
           "\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":{"
           "\"nvidia.com/gpu.shared\":\"1\",\"memory\":\"4Gi\"}}}]}}",
           NULL, &p);
    assert_false(p.bad);
    assert_int_equal(p.spec.req, REQ_FRACTION);
    assert_int_equal(p.spec.fraction_milli, 250);
    assert_int_equal(p.spec.kind, KIND_INFERENCE);
    assert_int_equal(p.spec.memory_mib, 4096);
    assert_false(p.spec.preemptible);
    kube_pod_free(&p);

    /* no share given: the engine fills in 1/replicas */
    pod_ok("{\"metadata\":{\"name\":\"tts2\",\"namespace\":\"serving\"},"
           "\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":{"
           "\"nvidia.com/gpu.shared\":\"1\"}}}]}}",
           NULL, &p);
    assert_false(p.bad);
    assert_int_equal(p.spec.req, REQ_FRACTION);
    assert_int_equal(p.spec.fraction_milli, 0);
    kube_pod_free(&p);

    /* replicas left under nvidia.com/gpu: then that is the shared resource */
    pod_ok("{\"metadata\":{\"name\":\"tts3\",\"namespace\":\"serving\"},"
           "\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":{"
           "\"nvidia.com/gpu\":\"1\"}}}]}}",
           "nvidia.com/gpu", &p);
    assert_false(p.bad);
    assert_int_equal(p.spec.req, REQ_FRACTION);
    kube_pod_free(&p);

    /* an MPS client gets one replica */
    pod_ok("{\"metadata\":{\"name\":\"tts4\",\"namespace\":\"serving\"},"
           "\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":{"
           "\"example.com/mps\":\"2\"}}}]}}",
           "example.com/mps", &p);
    assert_true(p.bad);
    assert_contains(p.why, "2 example.com/mps");
    kube_pod_free(&p);

    /* a share with no GPU resource at all */
    pod_ok("{\"metadata\":{\"name\":\"tts5\",\"namespace\":\"serving\",\"annotations\":{"
           "\"gpuorch.io/gpu-fraction\":\"1\"}},\"spec\":{\"containers\":[{\"name\":\"c\"}]}}",
           NULL, &p);
    assert_false(p.bad);
    assert_int_equal(p.spec.req, REQ_FRACTION);
    assert_int_equal(p.spec.fraction_milli, 1000);
    kube_pod_free(&p);
}

static void test_pod_init_containers(void **state)
{
    KubePod p;
    /* classic init containers run one at a time before the others: the largest of
     * them against the sum of the rest, per resource; plus the runtime's overhead */
    pod_ok("{\"metadata\":{\"name\":\"i1\",\"namespace\":\"d\"},\"spec\":{"
           "\"overhead\":{\"cpu\":\"250m\",\"memory\":\"120Mi\"},"
           "\"initContainers\":["
           "{\"name\":\"warmup\",\"resources\":{\"requests\":{\"cpu\":\"2\",\"memory\":\"256Mi\"},"
           "\"limits\":{\"nvidia.com/gpu\":\"1\"}}},"
           "{\"name\":\"fetch\",\"resources\":{\"requests\":{\"cpu\":\"250m\","
           "\"memory\":\"2Gi\"}}}],"
           "\"containers\":["
           "{\"name\":\"a\",\"resources\":{\"requests\":{\"cpu\":\"500m\",\"memory\":\"1Gi\","
           "\"nvidia.com/gpu\":\"1\"},\"limits\":{\"nvidia.com/gpu\":\"1\"}}},"
           "{\"name\":\"b\",\"resources\":{\"requests\":{\"cpu\":\"1\",\"memory\":\"512Mi\","
           "\"nvidia.com/gpu\":\"1\"},\"limits\":{\"nvidia.com/gpu\":\"1\"}}}]}}",
           NULL, &p);
    assert_false(p.bad);
    assert_int_equal(p.spec.cpu_milli, 2000 + 250);  /* warmup's 2 > 1.5, + overhead */
    assert_int_equal(p.spec.memory_mib, 2048 + 120); /* fetch's 2Gi > 1.5Gi, + overhead */
    assert_int_equal(p.spec.req, REQ_GPUS);
    assert_int_equal(p.spec.gpus, 2); /* the containers' 1 + 1 > warmup's 1 */
    kube_pod_free(&p);

    /* a sidecar (restartPolicy Always) keeps running beside what starts after it */
    pod_ok("{\"metadata\":{\"name\":\"i2\",\"namespace\":\"d\"},\"spec\":{"
           "\"initContainers\":["
           "{\"name\":\"log-shipper\",\"restartPolicy\":\"Always\",\"resources\":{"
           "\"requests\":{\"cpu\":\"250m\",\"memory\":\"128Mi\"}}},"
           "{\"name\":\"fetch\",\"resources\":{\"requests\":{\"cpu\":\"2\",\"memory\":\"3Gi\"}}}],"
           "\"containers\":[{\"name\":\"main\",\"resources\":{\"requests\":{\"cpu\":\"1\","
           "\"memory\":\"1Gi\"}}}]}}",
           NULL, &p);
    assert_false(p.bad);
    assert_int_equal(p.spec.cpu_milli, 2250);  /* fetch 2 + sidecar 0.25 */
    assert_int_equal(p.spec.memory_mib, 3200); /* 3Gi + 128Mi */
    assert_int_equal(p.spec.req, REQ_NONE);
    assert_int_equal(p.spec.gpus, 0);
    assert_int_equal(p.spec.kind, KIND_BATCH);
    kube_pod_free(&p);

    /* with a small fetch the sum wins: main + sidecar */
    pod_ok("{\"metadata\":{\"name\":\"i3\",\"namespace\":\"d\"},\"spec\":{"
           "\"initContainers\":["
           "{\"name\":\"log-shipper\",\"restartPolicy\":\"Always\",\"resources\":{"
           "\"requests\":{\"cpu\":\"250m\",\"memory\":\"128Mi\"}}},"
           "{\"name\":\"fetch\",\"resources\":{\"requests\":{\"cpu\":\"100m\"}}}],"
           "\"containers\":[{\"name\":\"main\",\"resources\":{\"requests\":{\"cpu\":\"1\","
           "\"memory\":\"1Gi\"}}}]}}",
           NULL, &p);
    assert_int_equal(p.spec.cpu_milli, 1250);
    assert_int_equal(p.spec.memory_mib, 1152);
    kube_pod_free(&p);
}

/* Each malformed annotation: bad, a why naming it and its value, the rest still read. */
static void test_pod_bad_annotations(void **state)
{
    static const struct {
        const char *key, *value;
    } cases[] = {
        {KUBE_ANN_GPU_MEMORY, "lots"},  {KUBE_ANN_GPU_MEMORY, "0"},
        {KUBE_ANN_FRACTION, "1.5"},     {KUBE_ANN_FRACTION, "0"},
        {KUBE_ANN_FRACTION, "0.0005"},  {KUBE_ANN_FRACTION, "quarter"},
        {KUBE_ANN_PREEMPTIBLE, "yes"},  {KUBE_ANN_CKPT_INTERVAL, "soon"},
        {KUBE_ANN_CKPT_COST, "-5m"},    {KUBE_ANN_ESTIMATE, "0"},
        {KUBE_ANN_ESTIMATE, "2 weeks"}, {KUBE_ANN_KIND, "serving"},
        {KUBE_ANN_SCOPE, "rack"},       {KUBE_ANN_SCOPE, "any!"},
        {KUBE_ANN_PRIORITY, "urgent"},  {KUBE_ANN_PROJECT, ""},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char text[1024], prefix[128];
        snprintf(text, sizeof(text),
                 "{\"metadata\":{\"name\":\"p%zu\",\"namespace\":\"vision\",\"annotations\":{"
                 "\"%s\":\"%s\",\"gpuorch.io/workload-class\":\"resnet\"}},"
                 "\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{\"requests\":{"
                 "\"cpu\":\"3\"}}}]}}",
                 i, cases[i].key, cases[i].value);
        KubePod p;
        pod_ok(text, NULL, &p);
        if (!p.bad)
            fail_msg("%s: '%s' not refused", cases[i].key, cases[i].value);
        snprintf(prefix, sizeof(prefix), "annotation %s: ", cases[i].key);
        if (strncmp(p.why, prefix, strlen(prefix)) != 0)
            fail_msg("%s: why '%s' does not start with '%s'", cases[i].key, p.why, prefix);
        if (*cases[i].value)
            assert_contains(p.why, cases[i].value);
        assert_string_equal(p.spec.workload_class, "resnet");
        assert_int_equal(p.spec.cpu_milli, 3000);
        assert_string_equal(p.spec.team, "vision");
        kube_pod_free(&p);
    }

    /* a share and a memory size at once */
    KubePod p;
    pod_ok("{\"metadata\":{\"name\":\"x\",\"namespace\":\"v\",\"annotations\":{"
           "\"gpuorch.io/gpu-memory\":\"8Gi\",\"gpuorch.io/gpu-fraction\":\"0.5\"}},"
           "\"spec\":{\"containers\":[]}}",
           NULL, &p);
    assert_true(p.bad);
    assert_contains(p.why, "annotation gpuorch.io/gpu-fraction:");
    assert_contains(p.why, "gpuorch.io/gpu-memory");
    assert_int_equal(p.spec.req, REQ_MEMORY);
    kube_pod_free(&p);

    /* every valid scope form */
    pod_ok("{\"metadata\":{\"name\":\"x\",\"namespace\":\"v\",\"annotations\":{"
           "\"gpuorch.io/topology\":\"spine\"}}}",
           NULL, &p);
    assert_false(p.bad);
    assert_int_equal(p.spec.scope, SCOPE_SPINE);
    assert_false(p.spec.scope_required);
    assert_int_equal(p.spec.req, REQ_NONE);
    kube_pod_free(&p);
    pod_ok("{\"metadata\":{\"name\":\"x\",\"namespace\":\"v\",\"annotations\":{"
           "\"gpuorch.io/topology\":\"node!\",\"gpuorch.io/kind\":\"interactive\"}}}",
           NULL, &p);
    assert_int_equal(p.spec.scope, SCOPE_NODE);
    assert_true(p.spec.scope_required);
    assert_int_equal(p.spec.kind, KIND_INTERACTIVE);
    kube_pod_free(&p);
}

static void test_pod_two_gpu_kinds(void **state)
{
    KubePod p;
    pod_ok("{\"metadata\":{\"name\":\"mixed\",\"namespace\":\"d\"},\"spec\":{\"containers\":["
           "{\"name\":\"a\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"1\"}}},"
           "{\"name\":\"b\",\"resources\":{\"limits\":{\"nvidia.com/mig-1g.10gb\":\"1\"}}}]}}",
           NULL, &p);
    assert_true(p.bad);
    assert_contains(p.why, "nvidia.com/gpu and nvidia.com/mig-1g.10gb at once");
    assert_int_equal(p.spec.req, REQ_NONE);
    assert_string_equal(p.spec.name, "d/mixed");
    kube_pod_free(&p);

    pod_ok("{\"metadata\":{\"name\":\"two-migs\",\"namespace\":\"d\"},\"spec\":{\"containers\":["
           "{\"name\":\"a\",\"resources\":{\"limits\":{\"nvidia.com/mig-1g.10gb\":\"1\","
           "\"nvidia.com/mig-3g.40gb\":\"1\"}}}]}}",
           NULL, &p);
    assert_true(p.bad);
    assert_contains(p.why, "at once");
    assert_contains(p.why, "nvidia.com/mig-1g.10gb");
    assert_contains(p.why, "nvidia.com/mig-3g.40gb");
    kube_pod_free(&p);

    pod_ok("{\"metadata\":{\"name\":\"gpu-and-share\",\"namespace\":\"d\"},\"spec\":{"
           "\"containers\":[{\"name\":\"a\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"1\","
           "\"nvidia.com/gpu.shared\":\"1\"}}}]}}",
           NULL, &p);
    assert_true(p.bad);
    assert_contains(p.why, "nvidia.com/gpu and nvidia.com/gpu.shared");
    kube_pod_free(&p);

    /* a whole GPU and a fraction annotation: two asks */
    pod_ok("{\"metadata\":{\"name\":\"f\",\"namespace\":\"d\",\"annotations\":{"
           "\"gpuorch.io/gpu-fraction\":\"0.5\"}},\"spec\":{\"containers\":[{\"name\":\"a\","
           "\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"1\"}}}]}}",
           NULL, &p);
    assert_true(p.bad);
    assert_contains(p.why, "annotation gpuorch.io/gpu-fraction:");
    assert_int_equal(p.spec.req, REQ_GPUS);
    kube_pod_free(&p);

    /* a GPU count that is not whole */
    pod_ok("{\"metadata\":{\"name\":\"h\",\"namespace\":\"d\"},\"spec\":{\"containers\":["
           "{\"name\":\"a\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"500m\"}}}]}}",
           NULL, &p);
    assert_true(p.bad);
    assert_contains(p.why, "nvidia.com/gpu");
    assert_contains(p.why, "500m");
    kube_pod_free(&p);
}

static void test_pod_refused(void **state)
{
    static const char *const texts[] = {
        "{\"metadata\":{\"name\":\"p\"}}",
        "{\"metadata\":{\"namespace\":\"d\"}}",
        "{\"kind\":\"Node\",\"metadata\":{\"name\":\"p\",\"namespace\":\"d\"}}",
        "{\"metadata\":{\"name\":\"p\",\"namespace\":\"d\",\"creationTimestamp\":\"yesterday\"}}",
        "{\"metadata\":{\"name\":\"p\",\"namespace\":\"d\","
        "\"creationTimestamp\":\"2024-13-01T00:00:00Z\"}}",
        "[]",
    };
    for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
        json_t *j = load(texts[i]);
        Buf why = {0};
        KubePod p = {.grace_s = 777};
        int r = kube_pod_parse(j, NULL, &p, &why);
        if (r != -EINVAL)
            fail_msg("case %zu: %d, expected -EINVAL", i, r);
        assert_int_equal(p.grace_s, 777);
        assert_null(p.name);
        assert_true(why.len > 0);
        buf_free(&why);
        json_decref(j);
    }
}

static void test_priority_from_class(void **state)
{
    assert_int_equal(kube_priority_from_class("gpuorch-production"), PRIO_PRODUCTION);
    assert_int_equal(kube_priority_from_class("production"), PRIO_PRODUCTION);
    assert_int_equal(kube_priority_from_class("gpuorch-high"), PRIO_HIGH);
    assert_int_equal(kube_priority_from_class("high"), PRIO_HIGH);
    assert_int_equal(kube_priority_from_class("gpuorch-normal"), PRIO_NORMAL);
    assert_int_equal(kube_priority_from_class("low"), PRIO_LOW);
    assert_int_equal(kube_priority_from_class("gpuorch-batch"), PRIO_LOW);
    assert_int_equal(kube_priority_from_class("batch"), PRIO_LOW);
    assert_int_equal(kube_priority_from_class("system-cluster-critical"), -1);
    assert_int_equal(kube_priority_from_class("system-node-critical"), -1);
    assert_int_equal(kube_priority_from_class("team-a-important"), -1);
    assert_int_equal(kube_priority_from_class("gpuorch-"), -1);
    assert_int_equal(kube_priority_from_class(""), -1);
    assert_int_equal(kube_priority_from_class(NULL), -1);

    /* a system class leaves the pod normal */
    KubePod p;
    pod_ok("{\"metadata\":{\"name\":\"dns\",\"namespace\":\"kube-system\"},"
           "\"spec\":{\"priorityClassName\":\"system-cluster-critical\"}}",
           NULL, &p);
    assert_int_equal(p.spec.priority, PRIO_NORMAL);
    assert_string_equal(p.priority_class, "system-cluster-critical");
    kube_pod_free(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_node_h100),
        cmocka_unit_test(test_node_a100_mig_mixed),
        cmocka_unit_test(test_node_mig_single),
        cmocka_unit_test(test_node_shared),
        cmocka_unit_test(test_node_cordoned_not_ready),
        cmocka_unit_test(test_node_tainted),
        cmocka_unit_test(test_node_custom_labels),
        cmocka_unit_test(test_node_refused),
        cmocka_unit_test(test_quantities),
        cmocka_unit_test(test_pod_gang),
        cmocka_unit_test(test_pod_job),
        cmocka_unit_test(test_pod_mig),
        cmocka_unit_test(test_pod_gpu_memory),
        cmocka_unit_test(test_pod_mps),
        cmocka_unit_test(test_pod_init_containers),
        cmocka_unit_test(test_pod_bad_annotations),
        cmocka_unit_test(test_pod_two_gpu_kinds),
        cmocka_unit_test(test_pod_refused),
        cmocka_unit_test(test_priority_from_class),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
