/* test_agent_env.c: what a worker process sees (agent/launch.c launch_env), without
 * forking: the exact environment for whole GPUs, a MIG instance and an MPS share;
 * the order of precedence (agent's environment < job's env < gpuorch's variables);
 * the agent's own token kept from the worker;
 * GPUORCH_RESUME_FROM only when resuming; rounding of the MPS thread percentage and
 * memory limit; GPUORCH_GPU_MEMORY_MIB summed over whole GPUs, MIG instances (the
 * catalogue's profile memory) and MPS shares, and absent without GPUs; and the answers
 * for grants the node cannot honour (yet). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "agent/launch.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *UUID0 = "GPU-11111111-2222-3333-4444-555555555555";
static const char *UUID1 = "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee";
static const char *MIG_UUID = "MIG-99999999-8888-7777-6666-555555555555";

/* Two A100s: GPU 0 whole (MIG off), GPU 1 in MIG mode with a 1g.10gb at slot 2. */
static void gpus(AgentGpu g[2])
{
    memset(g, 0, 2 * sizeof(*g));
    for (unsigned i = 0; i < 2; i++) {
        g[i].index = i;
        strcpy(g[i].uuid, i ? UUID1 : UUID0);
        strcpy(g[i].name, "NVIDIA A100-80GB");
        g[i].memory_mib = 81920;
        g[i].model = catalog_find("A100-80GB");
        g[i].mig_capable = true;
    }
    g[1].mig_enabled = true;
    g[1].n_mig = 1;
    strcpy(g[1].mig[0].profile, "1g.10gb");
    g[1].mig[0].start = 2;
    strcpy(g[1].mig[0].uuid, MIG_UUID);
}

static void parse(const char *json, Assignment *a)
{
    json_error_t jerr;
    json_t *o = json_loads(json, 0, &jerr);
    assert_non_null(o);
    Buf err = {0};
    int r = assign_parse(o, a, &err);
    if (r < 0)
        fail_msg("%s", buf_str(&err));
    json_decref(o);
    buf_free(&err);
}

static int cmp_str(const void *x, const void *y)
{
    return strcmp(*(char *const *)x, *(char *const *)y);
}

/* env sorted, joined with '\n', for an exact comparison */
static char *flatten(char **env)
{
    size_t n = 0;
    while (env[n])
        n++;
    qsort(env, n, sizeof(*env), cmp_str);
    Buf b = {0};
    for (size_t i = 0; i < n; i++)
        buf_printf(&b, "%s\n", env[i]);
    return buf_steal(&b);
}

static char *build(const char *json, char *const *base, int want_r)
{
    AgentGpu g[2];
    gpus(g);
    Assignment a;
    parse(json, &a);
    char **env = NULL;
    Buf err = {0};
    int r = launch_env(&a, g, 2, "/ckpt/17", base, NULL, &env, &err);
    assign_free(&a);
    if (r != want_r)
        fail_msg("launch_env returned %d (%s), expected %d", r, buf_str(&err), want_r);
    if (r < 0) {
        assert_null(env);
        char *msg = buf_steal(&err);
        return msg;
    }
    buf_free(&err);
    char *flat = flatten(env);
    launch_env_free(env);
    return flat;
}

static void test_whole_gpus(void **state)
{
    char *base[] = {"PATH=/usr/bin:/bin",
                    "HOME=/root",
                    "RANK=7",
                    "GPUORCH_RESUME_FROM=/old",
                    "MODEL=base",
                    "GPUORCH_TOKEN=gpo_secret",
                    NULL};
    char *got = build("{\"job\": 17, \"run\": 2, \"rank\": 1, \"local_rank\": 0, "
                      "\"world_size\": 2, \"master_addr\": \"h100-0\", \"master_port\": 29517, "
                      "\"gpus\": [{\"index\": 1}, {\"index\": 0}], \"command\": [\"python3\", "
                      "\"train.py\"], \"env\": {\"MODEL\": \"x\", \"WORLD_SIZE\": \"99\"}}",
                      base, -EAGAIN);
    /* GPU 1 is in MIG mode: a whole-GPU grant on it must wait */
    assert_string_equal(got, "GPU 1 is still in MIG mode");
    free(got);

    got = build("{\"job\": 17, \"run\": 2, \"rank\": 1, \"local_rank\": 0, "
                "\"world_size\": 2, \"master_addr\": \"h100-0\", \"master_port\": 29517, "
                "\"gpus\": [{\"index\": 0}], \"command\": [\"python3\", \"train.py\"], "
                "\"env\": {\"MODEL\": \"x\", \"WORLD_SIZE\": \"99\"}}",
                base, 0);
    assert_string_equal(got, "CUDA_VISIBLE_DEVICES=GPU-11111111-2222-3333-4444-555555555555\n"
                             "GPUORCH_CHECKPOINT_DIR=/ckpt/17\n"
                             "GPUORCH_GPU_MEMORY_MIB=81920\n"
                             "GPUORCH_JOB_ID=17\n"
                             "GPUORCH_RUN=2\n"
                             "HOME=/root\n"
                             "LOCAL_RANK=0\n"
                             "MASTER_ADDR=h100-0\n"
                             "MASTER_PORT=29517\n"
                             "MODEL=x\n"
                             "PATH=/usr/bin:/bin\n"
                             "RANK=1\n"
                             "WORLD_SIZE=2\n");
    free(got);
}

static void test_two_whole_gpus_in_grant_order(void **state)
{
    AgentGpu g[2];
    gpus(g);
    g[1].mig_enabled = false;
    g[1].n_mig = 0;
    Assignment a;
    parse("{\"job\": 3, \"run\": 1, \"rank\": 0, \"gpus\": [{\"index\": 1}, {\"index\": 0}], "
          "\"command\": [\"true\"], \"resume_from\": \"/ckpt/3/ckpt-40\"}",
          &a);
    char **env = NULL;
    Buf err = {0};
    assert_int_equal(launch_env(&a, g, 2, "/ckpt/3", NULL, NULL, &env, &err), 0);
    char *flat = flatten(env);
    assert_string_equal(flat, "CUDA_VISIBLE_DEVICES=GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee,"
                              "GPU-11111111-2222-3333-4444-555555555555\n"
                              "GPUORCH_CHECKPOINT_DIR=/ckpt/3\n"
                              "GPUORCH_GPU_MEMORY_MIB=163840\n"
                              "GPUORCH_JOB_ID=3\n"
                              "GPUORCH_RESUME_FROM=/ckpt/3/ckpt-40\n"
                              "GPUORCH_RUN=1\n"
                              "LOCAL_RANK=0\n"
                              "MASTER_ADDR=127.0.0.1\n"
                              "MASTER_PORT=29500\n"
                              "RANK=0\n"
                              "WORLD_SIZE=1\n");
    free(flat);
    launch_env_free(env);
    assign_free(&a);
    buf_free(&err);
}

static void test_mig_instance(void **state)
{
    char *base[] = {"CUDA_VISIBLE_DEVICES=0,1,2", NULL};
    char *got = build("{\"job\": 5, \"run\": 1, \"rank\": 0, \"gpus\": [{\"index\": 1, \"mig\": "
                      "{\"profile\": \"1g.10gb\", \"start\": 2}}], \"command\": [\"serve\"]}",
                      base, 0);
    /* the instance's memory is its profile's in the catalogue: 1g.10gb has 9728 MiB */
    assert_string_equal(got, "CUDA_VISIBLE_DEVICES=MIG-99999999-8888-7777-6666-555555555555\n"
                             "GPUORCH_CHECKPOINT_DIR=/ckpt/17\n"
                             "GPUORCH_GPU_MEMORY_MIB=9728\n"
                             "GPUORCH_JOB_ID=5\n"
                             "GPUORCH_RUN=1\n"
                             "LOCAL_RANK=0\n"
                             "MASTER_ADDR=127.0.0.1\n"
                             "MASTER_PORT=29500\n"
                             "RANK=0\n"
                             "WORLD_SIZE=1\n");
    free(got);
    /* an instance the GPU does not have (yet): wait for the MIG layout */
    got = build("{\"job\": 5, \"run\": 1, \"rank\": 0, \"gpus\": [{\"index\": 1, \"mig\": "
                "{\"profile\": \"1g.10gb\", \"start\": 3}}], \"command\": [\"serve\"]}",
                NULL, -EAGAIN);
    assert_string_equal(got, "GPU 1 has no 1g.10gb instance at slot 3 yet");
    free(got);
    /* a MIG grant on a GPU with MIG off is the same wait */
    got = build("{\"job\": 5, \"run\": 1, \"rank\": 0, \"gpus\": [{\"index\": 0, \"mig\": "
                "{\"profile\": \"1g.10gb\", \"start\": 0}}], \"command\": [\"serve\"]}",
                NULL, -EAGAIN);
    assert_string_equal(got, "GPU 0 has no 1g.10gb instance at slot 0 yet");
    free(got);
}

static void test_mps_share(void **state)
{
    char *got = build("{\"job\": 9, \"run\": 1, \"rank\": 0, \"gpus\": [{\"index\": 0, "
                      "\"fraction\": 0.25}], \"command\": [\"serve\"]}",
                      NULL, 0);
    assert_string_equal(got, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=25\n"
                             "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT="
                             "GPU-11111111-2222-3333-4444-555555555555=20480M\n"
                             "CUDA_VISIBLE_DEVICES=GPU-11111111-2222-3333-4444-555555555555\n"
                             "GPUORCH_CHECKPOINT_DIR=/ckpt/17\n"
                             "GPUORCH_GPU_MEMORY_MIB=20480\n"
                             "GPUORCH_JOB_ID=9\n"
                             "GPUORCH_RUN=1\n"
                             "LOCAL_RANK=0\n"
                             "MASTER_ADDR=127.0.0.1\n"
                             "MASTER_PORT=29500\n"
                             "RANK=0\n"
                             "WORLD_SIZE=1\n");
    free(got);
}

/* The percentage rounds up, but 0.3 x 100 in binary is 30.000000000000004, not 31;
 * a tiny share still gets 1 %. */
static void test_mps_rounding(void **state)
{
    static const struct {
        const char *fraction;
        const char *percent, *limit;
        const char *memory; /* the same figure as the limit */
    } cases[] = {
        {"0.3", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=30\n", "=24576M\n",
         "GPUORCH_GPU_MEMORY_MIB=24576\n"},
        {"0.333", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=34\n", "=27279M\n",
         "GPUORCH_GPU_MEMORY_MIB=27279\n"},
        {"0.001", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=1\n", "=81M\n", "GPUORCH_GPU_MEMORY_MIB=81\n"},
        {"0.5", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50\n", "=40960M\n",
         "GPUORCH_GPU_MEMORY_MIB=40960\n"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char json[256];
        snprintf(json, sizeof(json),
                 "{\"job\": 9, \"run\": 1, \"rank\": 0, \"gpus\": [{\"index\": 0, "
                 "\"fraction\": %s}], \"command\": [\"serve\"]}",
                 cases[i].fraction);
        char *got = build(json, NULL, 0);
        if (!strstr(got, cases[i].percent) || !strstr(got, cases[i].limit) ||
            !strstr(got, cases[i].memory))
            fail_msg("fraction %s: %s", cases[i].fraction, got);
        free(got);
    }
}

static void test_missing_gpu(void **state)
{
    char *got = build("{\"job\": 9, \"run\": 1, \"rank\": 0, \"gpus\": [{\"index\": 1, \"mig\": "
                      "{\"profile\": \"1g.10gb\", \"start\": 3}}, {\"index\": 5}], "
                      "\"command\": [\"serve\"]}",
                      NULL, -ENOENT);
    /* a GPU that does not exist wins over one that is merely not ready */
    assert_string_equal(got, "GPU 5 does not exist on this node (it has 2)");
    free(got);
}

/* A worker without GPUs sees none rather than all of the node's, and no GPU memory,
 * not even one the agent's environment or the job's env names. */
static void test_no_gpus(void **state)
{
    char *base[] = {"CUDA_VISIBLE_DEVICES=0", "GPUORCH_GPU_MEMORY_MIB=81920", NULL};
    char *got = build("{\"job\": 2, \"run\": 1, \"rank\": 0, \"command\": [\"true\"]}", base, 0);
    assert_non_null(strstr(got, "CUDA_VISIBLE_DEVICES=\n"));
    assert_null(strstr(got, "GPUORCH_GPU_MEMORY_MIB"));
    free(got);
    got = build("{\"job\": 2, \"run\": 1, \"rank\": 0, \"command\": [\"true\"], "
                "\"env\": {\"GPUORCH_GPU_MEMORY_MIB\": \"4096\"}}",
                base, 0);
    assert_null(strstr(got, "GPUORCH_GPU_MEMORY_MIB"));
    free(got);
}

/* GPUORCH_GPU_MEMORY_MIB sums the grants, each in its own unit: a whole GPU's memory, a
 * MIG instance's profile memory, an MPS share's memory limit. It wins over a job's own
 * figure, and is left out when one grant's memory is not known: a short figure would
 * size a serving engine's cache wrong. */
static void test_gpu_memory_sum(void **state)
{
    AgentGpu g[2];
    gpus(g);
    /* the 1g.10gb on GPU 1, a 3g.40gb beside it, and whole GPU 0 */
    g[1].n_mig = 2;
    strcpy(g[1].mig[1].profile, "3g.40gb");
    g[1].mig[1].start = 4;
    strcpy(g[1].mig[1].uuid, "MIG-33333333-8888-7777-6666-555555555555");
    Assignment a;
    parse("{\"job\": 4, \"run\": 1, \"rank\": 0, \"gpus\": [{\"index\": 0}, {\"index\": 1, "
          "\"mig\": {\"profile\": \"1g.10gb\", \"start\": 2}}, {\"index\": 1, \"mig\": "
          "{\"profile\": \"3g.40gb\", \"start\": 4}}], \"command\": [\"serve\"], "
          "\"env\": {\"GPUORCH_GPU_MEMORY_MIB\": \"1\"}}",
          &a);
    char **env = NULL;
    Buf err = {0};
    assert_int_equal(launch_env(&a, g, 2, "/ckpt/4", NULL, NULL, &env, &err), 0);
    char *flat = flatten(env);
    /* 81920 + 9728 + 40192 */
    if (!strstr(flat, "GPUORCH_GPU_MEMORY_MIB=131840\n"))
        fail_msg("%s", flat);
    free(flat);
    launch_env_free(env);

    /* a model the catalogue does not know: its instances' memory is not known */
    g[1].model = NULL;
    assert_int_equal(launch_env(&a, g, 2, "/ckpt/4", NULL, NULL, &env, &err), 0);
    flat = flatten(env);
    assert_null(strstr(flat, "GPUORCH_GPU_MEMORY_MIB"));
    free(flat);
    launch_env_free(env);
    assign_free(&a);

    /* MPS shares on two GPUs: the sum of their limits */
    gpus(g);
    g[1].mig_enabled = false;
    g[1].n_mig = 0;
    parse("{\"job\": 4, \"run\": 1, \"rank\": 0, \"gpus\": [{\"index\": 0, \"fraction\": 0.3}, "
          "{\"index\": 1, \"fraction\": 0.5}], \"command\": [\"serve\"]}",
          &a);
    assert_int_equal(launch_env(&a, g, 2, "/ckpt/4", NULL, NULL, &env, &err), 0);
    flat = flatten(env);
    /* 24576 + 40960 */
    if (!strstr(flat, "GPUORCH_GPU_MEMORY_MIB=65536\n"))
        fail_msg("%s", flat);
    free(flat);
    launch_env_free(env);
    assign_free(&a);
    buf_free(&err);
}

/* An H100's MIG profiles come from its own catalogue entry, not the A100's. */
static void test_gpu_memory_h100(void **state)
{
    AgentGpu g;
    memset(&g, 0, sizeof(g));
    strcpy(g.uuid, UUID0);
    g.model = catalog_find("H100-80GB-SXM5");
    assert_non_null(g.model);
    g.memory_mib = g.model->memory_mib;
    g.mig_capable = g.mig_enabled = true;
    g.n_mig = 1;
    strcpy(g.mig[0].profile, "1g.10gb");
    strcpy(g.mig[0].uuid, MIG_UUID);
    Assignment a;
    parse("{\"job\": 6, \"run\": 1, \"rank\": 0, \"gpus\": [{\"index\": 0, \"mig\": "
          "{\"profile\": \"1g.10gb\", \"start\": 0}}], \"command\": [\"serve\"]}",
          &a);
    char **env = NULL;
    Buf err = {0};
    assert_int_equal(launch_env(&a, &g, 1, "/ckpt/6", NULL, NULL, &env, &err), 0);
    char *flat = flatten(env);
    /* the H100's 1g.10gb reports 9984 MiB; the A100-80GB's 9728 */
    if (!strstr(flat, "GPUORCH_GPU_MEMORY_MIB=9984\n"))
        fail_msg("%s", flat);
    free(flat);
    launch_env_free(env);
    assign_free(&a);
    buf_free(&err);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_whole_gpus),
        cmocka_unit_test(test_two_whole_gpus_in_grant_order),
        cmocka_unit_test(test_mig_instance),
        cmocka_unit_test(test_mps_share),
        cmocka_unit_test(test_mps_rounding),
        cmocka_unit_test(test_missing_gpu),
        cmocka_unit_test(test_no_gpus),
        cmocka_unit_test(test_gpu_memory_sum),
        cmocka_unit_test(test_gpu_memory_h100),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
