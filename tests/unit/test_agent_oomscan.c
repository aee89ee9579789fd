/* test_agent_oomscan.c: the GPU out-of-memory verdict on a worker's log
 * (agent/oomscan.c): each framework's message is found at the end of a log; one that
 * lies before the last 64 KiB, or before the current run's first byte, is not; a
 * missing file, an ordinary failure, the host's OOM killer and Java's heap exhaustion
 * are not GPU out-of-memory. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "agent/oomscan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[] = "/tmp/gpuorch-oomscan-XXXXXX";
static char path[sizeof(dir) + 16];

static int setup(void **state)
{
    if (!mkdtemp(dir))
        return -1;
    snprintf(path, sizeof(path), "%s/w.log", dir);
    return 0;
}

static int teardown(void **state)
{
    unlink(path);
    return rmdir(dir);
}

/* The log: pad bytes of filler lines, then text, then tail bytes of filler. */
static void write_log(size_t pad, const char *text, size_t tail)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    static const char line[] = "step 1200 loss 0.4512 lr 3e-4 tokens/s 81234\n";
    for (size_t n = 0; n < pad; n += sizeof(line) - 1)
        fwrite(line, 1, pad - n < sizeof(line) - 1 ? pad - n : sizeof(line) - 1, f);
    fputs(text, f);
    for (size_t n = 0; n < tail; n += sizeof(line) - 1)
        fwrite(line, 1, tail - n < sizeof(line) - 1 ? tail - n : sizeof(line) - 1, f);
    fclose(f);
}

/* What each framework prints, as it prints it. */
static const char *const oom_logs[] = {
    /* PyTorch 2.5+: the class and the allocator's message */
    "Traceback (most recent call last):\n  File \"train.py\", line 88, in <module>\n"
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
    "total capacity of 79.25 GiB of which 1.06 GiB is free.\n",
    /* the allocator's message alone */
    "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB\n",
    /* the class names alone (a handler that printed only the type) */
    "caught torch.OutOfMemoryError, giving up\n",
    "torch.cuda.OutOfMemoryError\n",
    /* cudaGetErrorString(cudaErrorMemoryAllocation) */
    "RuntimeError: CUDA error: out of memory\nCUDA kernel errors might be asynchronously "
    "reported at some other API call\n",
    /* the driver API */
    "numba.cuda.cudadrv.driver.CudaAPIError: [2] Call to cuMemAlloc results in "
    "CUDA_ERROR_OUT_OF_MEMORY\n",
    /* the runtime API's error name */
    "terminate called after throwing an instance of 'std::runtime_error'\n  what():  "
    "cudaMalloc failed: cudaErrorMemoryAllocation\n",
    /* XLA under JAX */
    "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to "
    "allocate 17179869184 bytes.\n",
    /* TensorFlow */
    "tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating "
    "tensor with shape[8192,8192] and type float on /job:localhost/replica:0/task:0/device:"
    "GPU:0 by allocator GPU_0_bfc\n",
};

static void test_each_marker(void **state)
{
    for (size_t i = 0; i < sizeof(oom_logs) / sizeof(oom_logs[0]); i++) {
        write_log(100000, oom_logs[i], 0);
        if (!oomscan_log_tail(path, 0))
            fail_msg("not found at the end of a log: %s", oom_logs[i]);
        /* a few lines of teardown output after it */
        write_log(1000, oom_logs[i], 2000);
        if (!oomscan_log_tail(path, 0))
            fail_msg("not found before a short tail: %s", oom_logs[i]);
        assert_true(oomscan_text(oom_logs[i], strlen(oom_logs[i])));
    }
}

/* The markers are what the libraries print, letter for letter. */
static void test_case_sensitive(void **state)
{
    static const char *const near[] = {
        "cuda out of memory",       "CUDA Out Of Memory",         "torch.outofmemoryerror",
        "cuda_error_out_of_memory", "OOM when allocating Tensor",
    };
    for (size_t i = 0; i < sizeof(near) / sizeof(near[0]); i++)
        if (oomscan_text(near[i], strlen(near[i])))
            fail_msg("matched %s", near[i]);
}

/* Only the last 64 KiB are read: an OOM long before the end (a recovered one, say) is
 * not the verdict on this end. */
static void test_only_the_tail(void **state)
{
    const char *msg = "torch.OutOfMemoryError: CUDA out of memory.\n";
    write_log(0, msg, OOMSCAN_TAIL_BYTES);
    assert_false(oomscan_log_tail(path, 0));
    /* just inside the window: found */
    write_log(0, msg, OOMSCAN_TAIL_BYTES - strlen(msg));
    assert_true(oomscan_log_tail(path, 0));
}

/* The log holds every run of the rank on this node; only the current run's bytes count. */
static void test_from_offset(void **state)
{
    const char *msg = "RuntimeError: CUDA error: out of memory\n";
    write_log(500, msg, 500);
    long at = 500 + (long)strlen(msg); /* the second run's output begins after the OOM */
    assert_true(oomscan_log_tail(path, 0));
    assert_true(oomscan_log_tail(path, 500));
    assert_false(oomscan_log_tail(path, at));
    assert_false(oomscan_log_tail(path, 1000000)); /* past the end */
}

static void test_no_file(void **state)
{
    char missing[sizeof(dir) + 32];
    snprintf(missing, sizeof(missing), "%s/no-such.log", dir);
    assert_false(oomscan_log_tail(missing, 0));
    assert_false(oomscan_log_tail(NULL, 0));
    assert_false(oomscan_log_tail(dir, 0)); /* a directory is not a log */
}

static void test_ordinary_failure(void **state)
{
    write_log(3000,
              "Traceback (most recent call last):\n  File \"train.py\", line 12, in <module>\n"
              "FileNotFoundError: [Errno 2] No such file or directory: '/data/shard-0007'\n",
              0);
    assert_false(oomscan_log_tail(path, 0));
    write_log(0, "", 0); /* an empty log */
    assert_false(oomscan_log_tail(path, 0));
}

/* The host ran out of memory, not the GPU: "out of memory" alone is not a GPU OOM. */
static void test_host_oom(void **state)
{
    write_log(3000,
              "[12345.678901] Out of memory: Killed process 4242 (python3) total-vm:123456kB, "
              "anon-rss:98765kB\nmalloc: out of memory\nMemoryError\n"
              "Exception in thread \"main\" java.lang.OutOfMemoryError: Java heap space\n",
              0);
    assert_false(oomscan_log_tail(path, 0));
}

/* A log may hold binary output; a NUL before the message does not hide it. */
static void test_nul_bytes(void **state)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fwrite("\x00\x01progress\x00", 1, 11, f);
    fputs("OOM when allocating tensor with shape[1]\n", f);
    fclose(f);
    assert_true(oomscan_log_tail(path, 0));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_each_marker),   cmocka_unit_test(test_case_sensitive),
        cmocka_unit_test(test_only_the_tail), cmocka_unit_test(test_from_offset),
        cmocka_unit_test(test_no_file),       cmocka_unit_test(test_ordinary_failure),
        cmocka_unit_test(test_host_oom),      cmocka_unit_test(test_nul_bytes),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
