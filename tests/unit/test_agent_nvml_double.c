/* test_agent_nvml_double.c: the NVML backend (agent/nvml.c) run for real against
 * tests/nvml/nvml_double.c, the test double of libnvidia-ml.so.1 that ctest puts on
 * LD_LIBRARY_PATH (no GPU is on the test machines). Each test scripts a node in a state
 * file, opens the backend, and checks what it reports or, after mig_apply, what the
 * double's written-back state says it did. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "agent/gpus.h"
#include "agent/mps.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[] = "/tmp/gpuorch-nvml-XXXXXX";
static char path[64];

/* Four GPUs: 0 an A100 in MIG mode with 1g.10gb@0 and 3g.40gb@4 (a process on the
 * 3g), 1 an H100 with MIG off and a process, 2 an H100 that needs a reset to change
 * MIG mode, 3 a T4 without MIG. NVLinks: 0 and 2 directly (two links on 0, one on
 * 2), 1 and 2 through an NVSwitch; none on 3. */
static const char *NODE =
    "{\"devices\": ["
    " {\"uuid\": \"GPU-a0\", \"name\": \"NVIDIA A100-SXM4-80GB\", \"memory_mib\": 81920,"
    "  \"mig_capable\": true, \"mig_enabled\": true,"
    "  \"nvlinks\": [{\"link\": 0, \"peer\": \"GPU-h2\"}, {\"link\": 3, \"peer\": \"GPU-h2\"}],"
    "  \"gpu_instances\": ["
    "   {\"profile\": \"3g.40gb\", \"start\": 4, \"compute_instances\": [{\"uuid\": \"MIG-3g\"}],"
    "    \"processes\": [{\"pid\": 200, \"used_mib\": 30000}]},"
    "   {\"profile\": \"1g.10gb\", \"start\": 0, \"compute_instances\": [{\"uuid\": "
    "\"MIG-1g\"}]}]},"
    " {\"uuid\": \"GPU-h1\", \"name\": \"NVIDIA H100 80GB HBM3\", \"memory_mib\": 81559,"
    "  \"mig_capable\": true, \"mig_enabled\": false,"
    "  \"nvlinks\": [{\"link\": 1, \"switch\": true}],"
    "  \"processes\": [{\"pid\": 100, \"used_mib\": 2000}]},"
    " {\"uuid\": \"GPU-h2\", \"name\": \"NVIDIA H100 80GB HBM3\", \"memory_mib\": 81559,"
    "  \"mig_capable\": true, \"mig_needs_reset\": true,"
    "  \"nvlinks\": [{\"link\": 5, \"peer\": \"GPU-a0\"}, {\"link\": 6, \"switch\": true}]},"
    " {\"uuid\": \"GPU-t3\", \"name\": \"Tesla T4\", \"memory_mib\": 15360}]}";

static void script(const char *json)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(json, f);
    fclose(f);
}

static GpuBackend *open_node(const char *json)
{
    script(json);
    GpuBackend *b = NULL;
    Buf err = {0};
    if (gpus_open("nvml", "node", NULL, &b, &err) < 0)
        fail_msg("gpus_open: %s", buf_str(&err));
    buf_free(&err);
    assert_string_equal(b->ops->name, "nvml");
    return b;
}

static char *slurp(void)
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    static char text[1 << 16];
    size_t n = fread(text, 1, sizeof(text) - 1, f);
    fclose(f);
    text[n] = '\0';
    return strdup(text);
}

/* The double's state of GPU index now. */
static json_t *state_of(unsigned index)
{
    json_error_t e;
    json_t *root = json_load_file(path, 0, &e);
    if (!root)
        fail_msg("%s: %s", path, e.text);
    json_t *g = json_incref(json_array_get(json_object_get(root, "devices"), index));
    json_decref(root);
    return g;
}

/* Its GPU instances as "profile@start/compute-instances ..." in start order. */
static void instances_of(unsigned index, char *out, size_t cap)
{
    json_t *g = state_of(index), *gi;
    char by_start[MIG_MAX_SLOTS][48] = {{0}};
    size_t i;
    json_array_foreach(json_object_get(g, "gpu_instances"), i, gi)
    {
        json_int_t s = json_integer_value(json_object_get(gi, "start"));
        assert_true(s >= 0 && s < MIG_MAX_SLOTS);
        snprintf(by_start[s], sizeof(by_start[s]), "%s@%lld/%zu ",
                 json_string_value(json_object_get(gi, "profile")), (long long)s,
                 json_array_size(json_object_get(gi, "compute_instances")));
    }
    out[0] = '\0';
    for (int s = 0; s < MIG_MAX_SLOTS; s++)
        strncat(out, by_start[s], cap - strlen(out) - 1);
    json_decref(g);
}

static MigLayout layout(const char *model, const char *spec)
{
    const GpuModel *m = catalog_find(model);
    assert_non_null(m);
    MigLayout l;
    mig_layout_clear(&l);
    char buf[128], *save = NULL;
    snprintf(buf, sizeof(buf), "%s", spec);
    for (char *t = strtok_r(buf, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
        char *at = strchr(t, '@');
        assert_non_null(at);
        *at = '\0';
        int p = catalog_profile_index(m, t);
        assert_true(p >= 0);
        l.profile_at[atoi(at + 1)] = (uint8_t)p;
    }
    return l;
}

static void test_discover(void **state)
{
    (void)state;
    GpuBackend *b = open_node(NODE);
    AgentGpu *g = NULL;
    size_t n = 0;
    Buf err = {0};
    if (b->ops->discover(b, &g, &n, &err) < 0)
        fail_msg("discover: %s", buf_str(&err));
    assert_int_equal(n, 4);
    assert_string_equal(g[0].uuid, "GPU-a0");
    assert_string_equal(g[0].name, "NVIDIA A100-SXM4-80GB");
    assert_non_null(g[0].model);
    assert_string_equal(g[0].model->name, "A100-80GB");
    assert_int_equal(g[0].memory_mib, 81920);
    assert_true(g[0].mig_capable && g[0].mig_enabled);
    assert_int_equal(g[0].n_mig, 2);
    assert_string_equal(g[0].mig[0].profile, "1g.10gb");
    assert_int_equal(g[0].mig[0].start, 0);
    assert_string_equal(g[0].mig[0].uuid, "MIG-1g");
    assert_string_equal(g[0].mig[1].profile, "3g.40gb");
    assert_int_equal(g[0].mig[1].start, 4);
    assert_string_equal(g[0].mig[1].uuid, "MIG-3g");
    assert_string_equal(g[1].model->name, "H100-80GB-SXM5");
    assert_int_equal(g[1].memory_mib, 81559);
    assert_true(g[1].mig_capable && !g[1].mig_enabled);
    assert_int_equal(g[1].n_mig, 0);
    assert_false(g[3].mig_capable);
    assert_non_null(g[3].model);
    /* peers from the scripted links: 0-2 direct (two links, one peer), 1-2 by switch */
    assert_int_equal(g[0].n_peers, 1);
    assert_int_equal(g[0].peers[0], 2);
    assert_int_equal(g[1].n_peers, 1);
    assert_int_equal(g[1].peers[0], 2);
    assert_int_equal(g[2].n_peers, 2);
    assert_int_equal(g[2].peers[0], 0);
    assert_int_equal(g[2].peers[1], 1);
    assert_int_equal(g[3].n_peers, 0);
    bool on;
    GpuInstance in[MIG_MAX_SLOTS];
    size_t k;
    assert_int_equal(b->ops->mig_list(b, 0, &on, in, &k, &err), 0);
    assert_true(on);
    assert_int_equal(k, 2);
    assert_string_equal(in[1].uuid, "MIG-3g");
    free(g);
    buf_free(&err);
    gpus_close(b);
}

static void test_apply(void **state)
{
    (void)state;
    GpuBackend *b = open_node(NODE);
    Buf err = {0};
    char got[256];
    /* keep the busy 3g.40gb@4, replace 1g.10gb@0 by two 2g.20gb */
    MigLayout l = layout("A100-80GB", "2g.20gb@0 2g.20gb@2 3g.40gb@4");
    if (b->ops->mig_apply(b, 0, &l, 1u << 4, &err) < 0)
        fail_msg("mig_apply: %s", buf_str(&err));
    instances_of(0, got, sizeof(got));
    assert_string_equal(got, "2g.20gb@0/1 2g.20gb@2/1 3g.40gb@4/1 ");
    bool on;
    GpuInstance in[MIG_MAX_SLOTS];
    size_t k;
    assert_int_equal(b->ops->mig_list(b, 0, &on, in, &k, &err), 0);
    assert_int_equal(k, 3);
    assert_string_equal(in[2].uuid, "MIG-3g"); /* kept, not recreated */
    assert_memory_equal(in[0].uuid, "MIG-", 4);
    assert_string_not_equal(in[0].uuid, in[1].uuid);
    /* seven 1g.10gb where the two 2g were, the 3g kept */
    l = layout("A100-80GB", "1g.10gb@0 1g.10gb@1 1g.10gb@2 1g.10gb@3 3g.40gb@4");
    if (b->ops->mig_apply(b, 0, &l, 0, &err) < 0)
        fail_msg("mig_apply: %s", buf_str(&err));
    instances_of(0, got, sizeof(got));
    assert_string_equal(got, "1g.10gb@0/1 1g.10gb@1/1 1g.10gb@2/1 1g.10gb@3/1 3g.40gb@4/1 ");
    /* MIG on for an H100, then one 7g */
    l = layout("H100-80GB-SXM5", "7g.80gb@0");
    if (b->ops->mig_apply(b, 1, &l, 0, &err) < 0)
        fail_msg("mig_apply: %s", buf_str(&err));
    json_t *g1 = state_of(1);
    assert_true(json_is_true(json_object_get(g1, "mig_enabled")));
    json_decref(g1);
    instances_of(1, got, sizeof(got));
    assert_string_equal(got, "7g.80gb@0/1 ");
    /* and off again: instances (compute ones first) destroyed, mode off */
    mig_layout_clear(&l);
    if (b->ops->mig_apply(b, 1, &l, 0, &err) < 0)
        fail_msg("mig_apply off: %s", buf_str(&err));
    g1 = state_of(1);
    assert_false(json_is_true(json_object_get(g1, "mig_enabled")));
    assert_int_equal(json_array_size(json_object_get(g1, "gpu_instances")), 0);
    json_decref(g1);
    buf_free(&err);
    gpus_close(b);
}

static void test_busy(void **state)
{
    (void)state;
    GpuBackend *b = open_node(NODE);
    Buf err = {0};
    char *before = slurp();
    MigLayout l = layout("A100-80GB", "7g.80gb@0");
    assert_int_equal(b->ops->mig_apply(b, 0, &l, 1u << 4, &err), -EBUSY);
    assert_string_equal(buf_str(&err), "GPU 0: the 3g.40gb instance at slot 4 is in use");
    char *after = slurp();
    assert_string_equal(before, after); /* nothing changed, nothing written */
    free(after);
    /* the agent thinks it idle, the driver knows its process: found before anything is
     * destroyed, so the GPU stays as it was (1g.10gb@0 too) */
    buf_free(&err);
    assert_int_equal(b->ops->mig_apply(b, 0, &l, 0, &err), -EBUSY);
    assert_string_equal(buf_str(&err), "GPU 0: the 3g.40gb instance at slot 4 has a process "
                                       "(pid 200) that gpuorch did not start: nothing changed");
    after = slurp();
    assert_string_equal(before, after);
    free(after);
    free(before);
    buf_free(&err);
    gpus_close(b);
}

static void test_processes(void **state)
{
    (void)state;
    GpuBackend *b = open_node(NODE);
    Buf err = {0};
    GpuProcess *p = NULL;
    size_t n = 0;
    assert_int_equal(b->ops->processes(b, &p, &n, &err), 0);
    assert_int_equal(n, 2);
    for (size_t i = 0; i < n; i++) {
        if (p[i].pid == 100)
            assert_int_equal(p[i].used_mib, 2000);
        else if (p[i].pid == 200)
            assert_int_equal(p[i].used_mib, 30000);
        else
            fail_msg("pid %d not scripted", (int)p[i].pid);
    }
    free(p);
    buf_free(&err);
    gpus_close(b);
}

static void test_errors(void **state)
{
    (void)state;
    GpuBackend *b = open_node(NODE);
    Buf err = {0};
    MigLayout l = layout("A100-80GB", "7g.80gb@0");
    assert_int_equal(b->ops->mig_apply(b, 3, &l, 0, &err), -EINVAL);
    assert_string_equal(buf_str(&err),
                        "GPU 3 has no MIG (or the driver's NVML lacks the MIG calls)");
    buf_free(&err);
    assert_int_equal(b->ops->mig_apply(b, 2, &l, 0, &err), -EIO);
    assert_string_equal(buf_str(&err), "GPU 2: turning MIG on: GPU requires reset (the change "
                                       "may wait for a GPU reset: nvidia-smi -i 2 -r)");
    buf_free(&err);
    l = layout("A100-80GB", "7g.80gb@0 3g.40gb@4"); /* overlapping */
    assert_int_equal(b->ops->mig_apply(b, 0, &l, 0, &err), -EINVAL);
    assert_string_equal(buf_str(&err), "GPU 0: not a valid MIG layout of A100-80GB");
    buf_free(&err);
    assert_int_equal(b->ops->mig_apply(b, 9, &l, 0, &err), -ENODEV);
    assert_string_equal(buf_str(&err), "no GPU 9: NVML sees 4");
    buf_free(&err);
    gpus_close(b);

    script("{\"init_error\": 9, \"devices\": []}");
    assert_int_equal(gpus_open("nvml", "node", NULL, &b, &err), -EIO);
    assert_string_equal(buf_str(&err), "NVML could not start: Driver Not Loaded");
    buf_free(&err);
}

/* GPU 0: an A100 in MIG mode whose 3g instance reports utilisation and whose 1g does
 * not (NOT_SUPPORTED, as on most drivers); 1: an H100 with every reading; 2: a T4
 * whose power call fails (NOT_SUPPORTED) and whose utilisation answers GPU_IS_LOST. */
static const char *SAMPLED =
    "{\"devices\": ["
    " {\"uuid\": \"GPU-a0\", \"name\": \"NVIDIA A100-SXM4-80GB\", \"memory_mib\": 81920,"
    "  \"mig_capable\": true, \"mig_enabled\": true,"
    "  \"sample\": {\"power_mw\": 98250, \"temperature_c\": 44},"
    "  \"gpu_instances\": ["
    "   {\"profile\": \"3g.40gb\", \"start\": 4, \"compute_instances\": [{\"uuid\": \"MIG-3g\"}],"
    "    \"processes\": [{\"pid\": 200, \"used_mib\": 30000}], \"sample\": {\"gpu_util\": 35}},"
    "   {\"profile\": \"1g.10gb\", \"start\": 0, \"compute_instances\": [{\"uuid\": "
    "\"MIG-1g\"}]}]},"
    " {\"uuid\": \"GPU-h1\", \"name\": \"NVIDIA H100 80GB HBM3\", \"memory_mib\": 81559,"
    "  \"processes\": [{\"pid\": 100, \"used_mib\": 2000}, {\"pid\": 101, \"used_mib\": 500}],"
    "  \"sample\": {\"gpu_util\": 87, \"memory_util\": 40, \"power_mw\": 612345,"
    "   \"temperature_c\": 71}},"
    " {\"uuid\": \"GPU-t3\", \"name\": \"Tesla T4\", \"memory_mib\": 15360,"
    "  \"sample\": {\"gpu_util\": 50, \"utilization_error\": 15, \"temperature_c\": 50}}]}";

static void test_sample(void **state)
{
    (void)state;
    GpuBackend *b = open_node(SAMPLED);
    assert_non_null(b->ops->sample);
    AgentGpu *g = NULL;
    size_t n = 0;
    Buf err = {0};
    if (b->ops->discover(b, &g, &n, &err) < 0)
        fail_msg("discover: %s", buf_str(&err));
    assert_int_equal(n, 3);
    GpuSample s;
    GpuLoad load = {.share = 1};

    /* every reading, milliwatts to watts, memory from the processes */
    assert_int_equal(b->ops->sample(b, &g[1], &load, &s, &err), 0);
    assert_true(s.has_busy && s.has_memory && s.has_power && s.has_temperature);
    assert_int_equal(s.busy_pct, 87);
    assert_int_equal(s.memory_used_mib, 2500);
    assert_true(s.power_w > 612.344 && s.power_w < 612.346);
    assert_int_equal(s.temperature_c, 71);
    assert_int_equal(s.n_mig, 0);

    /* MIG: the whole GPU's utilisation is not supported; the 3g gives its own, the 1g
     * only its memory */
    assert_int_equal(b->ops->sample(b, &g[0], &load, &s, &err), 0);
    assert_false(s.has_busy);
    assert_true(s.has_memory && s.has_power && s.has_temperature);
    assert_true(s.power_w > 98.24 && s.power_w < 98.26);
    assert_int_equal(s.temperature_c, 44);
    assert_int_equal(s.n_mig, 2);
    for (size_t i = 0; i < s.n_mig; i++) {
        const GpuInstanceSample *m = &s.mig[i];
        assert_true(m->has_memory);
        if (m->start == 4) {
            assert_true(m->has_busy);
            assert_int_equal(m->busy_pct, 35);
            assert_int_equal(m->memory_used_mib, 30000);
        } else {
            assert_int_equal(m->start, 0);
            assert_false(m->has_busy);
            assert_int_equal(m->memory_used_mib, 0);
        }
    }

    /* a failing call leaves its reading out, not the sample */
    assert_int_equal(b->ops->sample(b, &g[2], &load, &s, &err), 0);
    assert_false(s.has_busy);
    assert_false(s.has_power);
    assert_true(s.has_memory && s.has_temperature);
    assert_int_equal(s.temperature_c, 50);

    /* a GPU NVML does not have */
    AgentGpu gone = g[2];
    gone.index = 9;
    assert_int_equal(b->ops->sample(b, &gone, &load, &s, &err), -EIO);
    free(g);
    buf_free(&err);
    gpus_close(b);
}

/* The GPUs' health as the backend reports it now, "ok" for healthy ones, joined by
 * "|". */
static void health_of(GpuBackend *b, size_t n, char *out, size_t cap)
{
    GpuHealth h[8];
    Buf err = {0};
    assert_true(n <= 8);
    assert_non_null(b->ops->health);
    assert_int_equal(b->ops->health(b, h, n, &err), 0);
    out[0] = '\0';
    for (size_t i = 0; i < n; i++)
        snprintf(out + strlen(out), cap - strlen(out), "%s%s", i ? "|" : "",
                 h[i].why[0] ? h[i].why : "ok");
    buf_free(&err);
}

/* Two GPUs: 0 a datacenter one with ECC, 1 a consumer one without (NOT_SUPPORTED). */
static const char *HEALTHY = "{\"devices\": ["
                             " {\"uuid\": \"GPU-a0\", \"name\": \"NVIDIA A100-SXM4-80GB\"},"
                             " {\"uuid\": \"GPU-g1\", \"name\": \"NVIDIA GeForce RTX 4090\","
                             "  \"ecc_supported\": false}]}";

static void test_health(void **state)
{
    (void)state;
    char got[256];
    GpuBackend *b = open_node(HEALTHY);
    health_of(b, 2, got, sizeof(got));
    assert_string_equal(got, "ok|ok"); /* no ECC on the consumer GPU is not sickness */
    /* an application's Xid (a page fault) leaves the GPU fit */
    script("{\"devices\": [{\"uuid\": \"GPU-a0\", \"xid\": 31},"
           " {\"uuid\": \"GPU-g1\", \"ecc_supported\": false}]}");
    health_of(b, 2, got, sizeof(got));
    assert_string_equal(got, "ok|ok");
    /* a double-bit ECC Xid on GPU 1 fences it, and it stays sick once the event is gone */
    script("{\"devices\": [{\"uuid\": \"GPU-a0\", \"xid\": 31},"
           " {\"uuid\": \"GPU-g1\", \"ecc_supported\": false, \"xid\": 48}]}");
    health_of(b, 2, got, sizeof(got));
    assert_string_equal(got, "ok|xid 48");
    health_of(b, 2, got, sizeof(got));
    assert_string_equal(got, "ok|xid 48");
    /* uncorrectable ECC errors on GPU 0 */
    script("{\"devices\": [{\"uuid\": \"GPU-a0\", \"ecc_uncorrected\": 3},"
           " {\"uuid\": \"GPU-g1\", \"ecc_supported\": false}]}");
    health_of(b, 2, got, sizeof(got));
    assert_string_equal(got, "ecc uncorrected 3|xid 48");
    gpus_close(b);

    /* fallen off the bus while the agent runs: GPU_IS_LOST on every call on it */
    b = open_node(HEALTHY);
    script("{\"devices\": [{\"uuid\": \"GPU-a0\", \"lost\": true},"
           " {\"uuid\": \"GPU-g1\", \"ecc_supported\": false}]}");
    health_of(b, 2, got, sizeof(got));
    assert_string_equal(got, "fallen off the bus|ok");
    gpus_close(b);
}

static int setup(void **state)
{
    (void)state;
    if (!mkdtemp(dir))
        return -1;
    snprintf(path, sizeof(path), "%s/node.json", dir);
    return setenv("GPUORCH_NVML_DOUBLE", path, 1);
}

static int teardown(void **state)
{
    (void)state;
    unlink(path);
    return rmdir(dir);
}

/* An MPS share's GPU goes into exclusive-process compute mode while its daemon runs
 * and back to default after (mps.h), through NVML; the daemon is a stand-in script. */
static void test_mps_compute_mode(void **state)
{
    (void)state;
    GpuBackend *b = open_node(NODE);
    char mdir[] = "/tmp/gpuorch-mps-XXXXXX";
    assert_non_null(mkdtemp(mdir));
    char control[96];
    snprintf(control, sizeof(control), "%s/mps-control", mdir);
    FILE *f = fopen(control, "w");
    assert_non_null(f);
    /* -f: the daemon, until quit arrives; else the client, which passes quit on */
    fputs("#!/bin/sh\nif [ \"$1\" = -f ]; then\n"
          "  while [ ! -e \"$CUDA_MPS_PIPE_DIRECTORY/quit\" ]; do sleep 0.02; done; exit 0\n"
          "fi\nread -r c; [ \"$c\" = quit ] && : >\"$CUDA_MPS_PIPE_DIRECTORY/quit\"\n",
          f);
    fclose(f);
    chmod(control, 0755);
    setenv("GPUORCH_MPS_CONTROL", control, 1);
    AgentGpu *gpus = NULL;
    size_t n = 0;
    Buf err = {0};
    assert_int_equal(b->ops->discover(b, &gpus, &n, &err), 0);
    Mps m;
    mps_init(&m, mdir);
    if (mps_ensure(&m, b, &gpus[1], &err) < 0)
        fail_msg("mps_ensure: %s", buf_str(&err));
    assert_non_null(mps_of(&m, 1));
    json_t *g = state_of(1);
    assert_int_equal(json_integer_value(json_object_get(g, "compute_mode")), 3);
    json_decref(g);
    g = state_of(0);
    assert_int_equal(json_integer_value(json_object_get(g, "compute_mode")), 0); /* others */
    json_decref(g);
    mps_stop(&m, b, 1);
    assert_null(mps_of(&m, 1));
    g = state_of(1);
    assert_int_equal(json_integer_value(json_object_get(g, "compute_mode")), 0);
    json_decref(g);
    unsigned gi;
    int st;
    assert_int_equal(mps_reap(&m, &gi, &st), 0); /* asked to stop: not a fault */
    unsetenv("GPUORCH_MPS_CONTROL");
    char cmd[160];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", mdir);
    assert_int_equal(system(cmd), 0);
    free(gpus);
    buf_free(&err);
    gpus_close(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_discover), cmocka_unit_test(test_apply),
        cmocka_unit_test(test_busy),     cmocka_unit_test(test_processes),
        cmocka_unit_test(test_errors),   cmocka_unit_test(test_health),
        cmocka_unit_test(test_sample),   cmocka_unit_test(test_mps_compute_mode),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
