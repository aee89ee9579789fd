/* test_agent_nvml.c: the NVML backend (agent/nvml.c) as far as the machine allows.
 * Without the NVIDIA driver, opening it must fail with the error that tells the user
 * what to do. With one, discovery runs for real and read-only (nothing is applied to
 * the GPUs): every GPU has a UUID, a name and memory, MIG instances have MIG UUIDs,
 * and listing one GPU's instances agrees with the discovery. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "agent/gpus.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void test_nvml(void **state)
{
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    GpuBackend *b = NULL;
    Buf err = {0};
    int r = gpus_open("nvml", "node", NULL, &b, &err);
    if (!lib) {
        assert_int_equal(r, -ENOENT);
        assert_null(b);
        assert_string_equal(buf_str(&err),
                            "NVML not found (libnvidia-ml.so.1): is the NVIDIA driver installed? "
                            "Use --gpus sim:MODEL:COUNT to simulate");
        buf_free(&err);
        return;
    }
    dlclose(lib);
    if (r < 0) /* a driver without devices, or a container without access */
        fail_msg("NVML is installed but did not open: %s", buf_str(&err));
    assert_string_equal(b->ops->name, "nvml");
    AgentGpu *g = NULL;
    size_t n = 0;
    r = b->ops->discover(b, &g, &n, &err);
    if (r < 0)
        fail_msg("discover: %s", buf_str(&err));
    for (size_t i = 0; i < n; i++) {
        print_message("GPU %u %s %s %llu MiB mig=%s instances=%zu peers=%zu\n", g[i].index,
                      g[i].uuid, g[i].name, (unsigned long long)g[i].memory_mib,
                      !g[i].mig_capable  ? "unsupported"
                      : g[i].mig_enabled ? "on"
                                         : "off",
                      g[i].n_mig, g[i].n_peers);
        assert_int_equal(g[i].index, i);
        assert_memory_equal(g[i].uuid, "GPU-", 4);
        assert_true(g[i].name[0]);
        assert_true(g[i].memory_mib > 0);
        bool on;
        GpuInstance in[MIG_MAX_SLOTS];
        size_t k;
        assert_int_equal(b->ops->mig_list(b, g[i].index, &on, in, &k, &err), 0);
        assert_int_equal(on, g[i].mig_enabled);
        assert_int_equal(k, g[i].n_mig);
        for (size_t j = 0; j < k; j++) {
            print_message("  %s@%u %s\n", in[j].profile, in[j].start, in[j].uuid);
            assert_memory_equal(in[j].uuid, "MIG-", 4);
            assert_string_equal(in[j].uuid, g[i].mig[j].uuid);
            assert_true(j == 0 || in[j - 1].start < in[j].start);
        }
    }
    GpuProcess *procs = NULL;
    size_t np = 0;
    assert_int_equal(b->ops->processes(b, &procs, &np, &err), 0);
    free(procs);
    free(g);
    buf_free(&err);
    gpus_close(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nvml),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
