/* test_agent_simgpu.c: the simulated GPU backend (agent/simgpu.c) through the GPU
 * interface the agent uses: stable, well-formed and distinct UUIDs (GPU and MIG),
 * catalogue facts, clear errors for a bad --gpus, MIG layouts checked with the core's
 * rules (an invalid one refused, nothing changed), busy instances never destroyed,
 * MIG turned off only when nothing is busy, layouts kept across a reopen of the same
 * state directory, and the apply delay from GPUORCH_SIM_MIG_DELAY_MS. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "agent/gpus.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static char dir[] = "/tmp/gpuorch-simgpu-XXXXXX";

static int setup(void **state)
{
    if (!mkdtemp(dir))
        return -1;
    setenv("GPUORCH_SIM_MIG_DELAY_MS", "0", 1);
    return 0;
}

static int teardown(void **state)
{
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* a fresh state directory for a test */
static const char *subdir(const char *name)
{
    static char path[256];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s' && mkdir -p '%s'", path, path);
    assert_int_equal(system(cmd), 0);
    return path;
}

static GpuBackend *open_ok(const char *spec, const char *node, const char *state_dir)
{
    GpuBackend *b = NULL;
    Buf err = {0};
    int r = gpus_open(spec, node, state_dir, &b, &err);
    if (r < 0)
        fail_msg("gpus_open %s: %s", spec, buf_str(&err));
    buf_free(&err);
    return b;
}

static void discover(GpuBackend *b, AgentGpu **g, size_t *n)
{
    Buf err = {0};
    assert_int_equal(b->ops->discover(b, g, n, &err), 0);
    buf_free(&err);
}

/* "PREFIX" + 8-4-4-4-12 lowercase hex */
static void assert_uuid(const char *s, const char *prefix)
{
    size_t pl = strlen(prefix);
    assert_memory_equal(s, prefix, pl);
    s += pl;
    static const int groups[] = {8, 4, 4, 4, 12};
    for (int g = 0; g < 5; g++) {
        for (int i = 0; i < groups[g]; i++, s++)
            if (!isxdigit((unsigned char)*s) || isupper((unsigned char)*s))
                fail_msg("not a UUID: %s", s);
        if (g < 4)
            assert_int_equal(*s++, '-');
    }
    assert_int_equal(*s, '\0');
}

static MigLayout layout(const GpuModel *m, const char *p0, int s0, const char *p1, int s1)
{
    MigLayout l;
    mig_layout_clear(&l);
    if (p0)
        l.profile_at[s0] = (uint8_t)catalog_profile_index(m, p0);
    if (p1)
        l.profile_at[s1] = (uint8_t)catalog_profile_index(m, p1);
    return l;
}

static int apply(GpuBackend *b, unsigned gpu, const MigLayout *l, uint8_t busy, Buf *err)
{
    buf_reset(err);
    return b->ops->mig_apply(b, gpu, l, busy, err);
}

static void test_inventory(void **state)
{
    const char *sd = subdir("inv");
    GpuBackend *b = open_ok("sim:A100-80GB:4", "node-a", sd);
    assert_string_equal(b->ops->name, "sim");
    AgentGpu *g;
    size_t n;
    discover(b, &g, &n);
    assert_int_equal(n, 4);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(g[i].index, i);
        assert_uuid(g[i].uuid, "GPU-");
        assert_string_equal(g[i].name, "NVIDIA A100-80GB");
        assert_ptr_equal(g[i].model, catalog_find("A100-80GB"));
        assert_int_equal(g[i].memory_mib, 81920);
        assert_true(g[i].mig_capable);
        assert_false(g[i].mig_enabled); /* MIG starts off */
        assert_int_equal(g[i].n_mig, 0);
        assert_int_equal(g[i].n_peers, 3); /* NVLink: every other GPU */
        for (size_t k = 0; k < i; k++)
            assert_string_not_equal(g[i].uuid, g[k].uuid);
    }
    /* the same node and index give the same UUID; another node, others */
    GpuBackend *again = open_ok("sim:a100-80gb:4", "node-a", subdir("inv2"));
    GpuBackend *other = open_ok("sim:A100-80GB:4", "node-b", subdir("inv3"));
    AgentGpu *g2, *g3;
    size_t n2, n3;
    discover(again, &g2, &n2);
    discover(other, &g3, &n3);
    for (size_t i = 0; i < n; i++) {
        assert_string_equal(g[i].uuid, g2[i].uuid);
        for (size_t k = 0; k < n3; k++)
            assert_string_not_equal(g[i].uuid, g3[k].uuid);
    }
    free(g);
    free(g2);
    free(g3);
    gpus_close(b);
    gpus_close(again);
    gpus_close(other);

    /* a card without MIG or NVLink */
    b = open_ok("sim:T4:1", "node-t", NULL);
    discover(b, &g, &n);
    assert_int_equal(n, 1);
    assert_false(g[0].mig_capable);
    assert_int_equal(g[0].n_peers, 0);
    assert_int_equal(g[0].memory_mib, 16384);
    free(g);
    gpus_close(b);
}

static void test_bad_specs(void **state)
{
    static const struct {
        const char *spec, *says;
    } cases[] = {
        {"sim:Z999:2", "unknown GPU model 'Z999'; models: A30, A100-40GB, A100-80GB"},
        {"sim:A100-80GB", "expected sim:MODEL:COUNT"},
        {"sim:A100-80GB:0", "the GPU count must be a whole number from 1 to 32"},
        {"sim:A100-80GB:x", "the GPU count must be a whole number"},
        {"sim:A100-80GB:2x", "the GPU count must be a whole number"},
        {"cuda", "expected 'nvml' or 'sim:MODEL:COUNT'"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        GpuBackend *b = NULL;
        Buf err = {0};
        assert_int_equal(gpus_open(cases[i].spec, "n", NULL, &b, &err), -EINVAL);
        assert_null(b);
        if (!strstr(buf_str(&err), cases[i].says))
            fail_msg("%s: '%s' lacks '%s'", cases[i].spec, buf_str(&err), cases[i].says);
        buf_free(&err);
    }
    setenv("GPUORCH_SIM_MIG_DELAY_MS", "soon", 1);
    GpuBackend *b = NULL;
    Buf err = {0};
    assert_int_equal(gpus_open("sim:A100-80GB:1", "n", NULL, &b, &err), -EINVAL);
    assert_non_null(strstr(buf_str(&err), "GPUORCH_SIM_MIG_DELAY_MS='soon'"));
    buf_free(&err);
    setenv("GPUORCH_SIM_MIG_DELAY_MS", "0", 1);
}

static void test_mig_apply(void **state)
{
    const char *sd = subdir("mig");
    GpuBackend *b = open_ok("sim:A100-80GB:2", "node-m", sd);
    const GpuModel *m = catalog_find("A100-80GB");
    Buf err = {0};

    MigLayout l = layout(m, "1g.10gb", 0, "3g.40gb", 4);
    assert_int_equal(apply(b, 1, &l, 0, &err), 0);
    bool on;
    GpuInstance in[MIG_MAX_SLOTS];
    size_t n;
    assert_int_equal(b->ops->mig_list(b, 1, &on, in, &n, &err), 0);
    assert_true(on);
    assert_int_equal(n, 2);
    assert_string_equal(in[0].profile, "1g.10gb");
    assert_int_equal(in[0].start, 0);
    assert_string_equal(in[1].profile, "3g.40gb");
    assert_int_equal(in[1].start, 4);
    assert_uuid(in[0].uuid, "MIG-");
    assert_uuid(in[1].uuid, "MIG-");
    assert_string_not_equal(in[0].uuid, in[1].uuid);
    /* GPU 0 untouched */
    assert_int_equal(b->ops->mig_list(b, 0, &on, in + 2, &n, &err), 0);
    assert_false(on);
    assert_int_equal(n, 0);

    /* invalid layouts are refused and change nothing: overlapping memory slots, a start
     * the profile may not use, a profile on a card without MIG */
    MigLayout overlap = layout(m, "3g.40gb", 4, "1g.10gb", 5);
    assert_int_equal(apply(b, 1, &overlap, 0, &err), -EINVAL);
    assert_non_null(strstr(buf_str(&err), "is not a valid MIG layout of A100-80GB"));
    MigLayout bad_start = layout(m, "3g.40gb", 1, NULL, 0);
    assert_int_equal(apply(b, 1, &bad_start, 0, &err), -EINVAL);
    assert_int_equal(b->ops->mig_list(b, 1, &on, in, &n, &err), 0);
    assert_int_equal(n, 2);
    assert_int_equal(apply(b, 7, &l, 0, &err), -ENODEV);

    /* the instance at slot 0 is busy: a layout that replaces it is refused whole */
    MigLayout replace = layout(m, "2g.20gb", 0, "3g.40gb", 4);
    assert_int_equal(apply(b, 1, &replace, 1u << 0, &err), -EBUSY);
    assert_string_equal(buf_str(&err), "GPU 1: the 1g.10gb instance at slot 0 is in use");
    assert_int_equal(b->ops->mig_list(b, 1, &on, in, &n, &err), 0);
    assert_int_equal(n, 2);
    assert_string_equal(in[0].profile, "1g.10gb");
    /* ... but one that keeps it and changes only idle ones goes through */
    MigLayout keep = layout(m, "1g.10gb", 0, "2g.20gb", 4);
    char uuid0[GPU_UUID_MAX];
    strcpy(uuid0, in[0].uuid);
    assert_int_equal(apply(b, 1, &keep, 1u << 0, &err), 0);
    assert_int_equal(b->ops->mig_list(b, 1, &on, in, &n, &err), 0);
    assert_int_equal(n, 2);
    assert_string_equal(in[0].uuid, uuid0); /* the busy instance is the same one */
    assert_string_equal(in[1].profile, "2g.20gb");
    /* MIG off: refused while an instance is busy, done when none is */
    MigLayout off;
    mig_layout_clear(&off);
    assert_int_equal(apply(b, 1, &off, 1u << 0, &err), -EBUSY);
    assert_int_equal(b->ops->mig_list(b, 1, &on, in, &n, &err), 0);
    assert_true(on);
    assert_int_equal(apply(b, 1, &off, 0, &err), 0);
    assert_int_equal(b->ops->mig_list(b, 1, &on, in, &n, &err), 0);
    assert_false(on);
    assert_int_equal(n, 0);
    buf_free(&err);
    gpus_close(b);

    GpuBackend *t4 = open_ok("sim:T4:1", "node-t", NULL);
    MigLayout any = layout(m, "1g.10gb", 0, NULL, 0);
    assert_int_equal(t4->ops->mig_apply(t4, 0, &any, 0, &err), -EINVAL);
    assert_string_equal(buf_str(&err), "GPU 0 (T4) has no MIG");
    buf_free(&err);
    gpus_close(t4);
}

/* A restarted agent sees the layouts its predecessor made, with the same UUIDs. */
static void test_layout_persists(void **state)
{
    const char *sd = subdir("persist");
    const GpuModel *m = catalog_find("H100-80GB-SXM5");
    GpuBackend *b = open_ok("sim:H100-80GB-SXM5:2", "node-p", sd);
    MigLayout l = layout(m, "2g.20gb", 2, "1g.10gb", 6);
    Buf err = {0};
    assert_int_equal(apply(b, 0, &l, 0, &err), 0);
    AgentGpu *g1, *g2;
    size_t n1, n2;
    discover(b, &g1, &n1);
    gpus_close(b);

    b = open_ok("sim:H100-80GB-SXM5:2", "node-p", sd);
    discover(b, &g2, &n2);
    assert_int_equal(n2, 2);
    assert_true(g2[0].mig_enabled);
    assert_false(g2[1].mig_enabled);
    assert_int_equal(g2[0].n_mig, 2);
    MigLayout back;
    assert_int_equal(gpu_layout(&g2[0], &back, &err), 0);
    assert_memory_equal(&back, &l, sizeof(l));
    for (size_t i = 0; i < 2; i++)
        assert_string_equal(g1[0].mig[i].uuid, g2[0].mig[i].uuid);
    free(g1);
    free(g2);
    gpus_close(b);

    /* the state of another model is not this node's: start with MIG off */
    b = open_ok("sim:A100-80GB:2", "node-p", sd);
    discover(b, &g1, &n1);
    assert_false(g1[0].mig_enabled);
    free(g1);
    gpus_close(b);

    /* a damaged state file is an error that says how to recover */
    char path[512];
    snprintf(path, sizeof(path), "%s/simgpu.json", sd);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("{\"model\": ", f);
    fclose(f);
    GpuBackend *none = NULL;
    assert_int_equal(gpus_open("sim:H100-80GB-SXM5:2", "node-p", sd, &none, &err), -EINVAL);
    assert_non_null(strstr(buf_str(&err), "delete it to start with MIG off"));
    buf_free(&err);
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Applying takes the configured time per GPU changed, and nothing when nothing
 * changes. */
static void test_delay(void **state)
{
    setenv("GPUORCH_SIM_MIG_DELAY_MS", "300", 1);
    GpuBackend *b = open_ok("sim:A100-80GB:1", "node-d", NULL);
    setenv("GPUORCH_SIM_MIG_DELAY_MS", "0", 1);
    const GpuModel *m = catalog_find("A100-80GB");
    MigLayout l = layout(m, "7g.80gb", 0, NULL, 0);
    Buf err = {0};
    int64_t t0 = now_ms();
    assert_int_equal(apply(b, 0, &l, 0, &err), 0);
    int64_t took = now_ms() - t0;
    assert_true(took >= 300);
    t0 = now_ms();
    assert_int_equal(apply(b, 0, &l, 0, &err), 0); /* already so */
    assert_true(now_ms() - t0 < 300);
    buf_free(&err);
    gpus_close(b);
}

/* Readings follow the load: idle 0 % at 60 W and 35 C, half held 50 % at 180 W and
 * 55 C with half the memory; a MIG instance in use reports all of its memory. */
static void test_sample(void **state)
{
    (void)state;
    GpuBackend *b = open_ok("sim:A100-80GB:2", "node-s", subdir("sample"));
    const GpuModel *m = catalog_find("A100-80GB");
    AgentGpu *g;
    size_t n;
    discover(b, &g, &n);
    Buf err = {0};
    GpuSample s;
    GpuLoad idle = {0}, half = {.share = 0.5};
    assert_int_equal(b->ops->sample(b, &g[0], &idle, &s, &err), 0);
    assert_true(s.has_busy && s.has_memory && s.has_power && s.has_temperature);
    assert_int_equal(s.busy_pct, 0);
    assert_int_equal(s.memory_used_mib, 0);
    assert_true(s.power_w == 60);
    assert_int_equal(s.temperature_c, 35);
    assert_int_equal(b->ops->sample(b, &g[0], &half, &s, &err), 0);
    assert_int_equal(s.busy_pct, 50);
    assert_int_equal(s.memory_used_mib, g[0].memory_mib / 2);
    assert_true(s.power_w == 180);
    assert_int_equal(s.temperature_c, 55);
    assert_int_equal(s.n_mig, 0);

    MigLayout l = layout(m, "1g.10gb", 0, "3g.40gb", 4);
    assert_int_equal(apply(b, 1, &l, 0, &err), 0);
    free(g);
    discover(b, &g, &n);
    GpuLoad mig = {.share = 3.0 / 7, .mig_busy = 1u << 4};
    assert_int_equal(b->ops->sample(b, &g[1], &mig, &s, &err), 0);
    assert_int_equal(s.busy_pct, 43);
    assert_int_equal(s.n_mig, 2);
    assert_int_equal(s.mig[0].start, 0);
    assert_int_equal(s.mig[0].memory_used_mib, 0);
    assert_false(s.mig[0].has_busy);
    assert_int_equal(s.mig[1].start, 4);
    assert_int_equal(s.mig[1].memory_used_mib,
                     m->profiles[catalog_profile_index(m, "3g.40gb")].memory_mib);
    free(g);
    buf_free(&err);
    gpus_close(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_inventory), cmocka_unit_test(test_bad_specs),
        cmocka_unit_test(test_mig_apply), cmocka_unit_test(test_layout_persists),
        cmocka_unit_test(test_delay),     cmocka_unit_test(test_sample),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
