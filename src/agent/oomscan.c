/* oomscan.c: the GPU out-of-memory messages and the one read of a log's end that looks
 * for them. Matching is exact and case-sensitive: these are strings compiled into the
 * libraries, not prose, and a loose match would blame GPU memory for a host OOM. */
#include "agent/oomscan.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const markers[] = {
    /* PyTorch's caching allocator: "torch.OutOfMemoryError: CUDA out of memory. Tried
     * to allocate ..." */
    "CUDA out of memory",
    /* the exception's qualified name, which every traceback of it prints; qualified,
     * because a bare "OutOfMemoryError" is also Java's heap exhaustion, a host OOM */
    "torch.OutOfMemoryError",      /* PyTorch 2.5 and later */
    "torch.cuda.OutOfMemoryError", /* PyTorch 1.13 to 2.4, still an alias */
    /* cudaGetErrorString(cudaErrorMemoryAllocation) as PyTorch's C10_CUDA_CHECK, CuPy
     * and most CUDA C++ code print it */
    "CUDA error: out of memory",
    /* the driver API's CUresult name (cuMemAlloc), as Numba, Triton and CUDA C print it */
    "CUDA_ERROR_OUT_OF_MEMORY",
    /* the runtime API's cudaError_t name (cudaGetErrorName) */
    "cudaErrorMemoryAllocation",
    /* XLA's allocator, under JAX: "RESOURCE_EXHAUSTED: Out of memory while trying to
     * allocate ..." */
    "RESOURCE_EXHAUSTED: Out of memory",
    /* TensorFlow's ResourceExhaustedError: "OOM when allocating tensor with shape ..." */
    "OOM when allocating tensor",
};

bool oomscan_text(const char *text, size_t len)
{
    for (size_t i = 0; i < sizeof(markers) / sizeof(markers[0]); i++)
        if (memmem(text, len, markers[i], strlen(markers[i])))
            return true;
    return false;
}

bool oomscan_log_tail(const char *path, int64_t from)
{
    if (!path)
        return false;
    /* O_NONBLOCK: should the path have become a FIFO, the agent's loop must not wait */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0)
        return false;
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return false;
    }
    int64_t start = st.st_size > OOMSCAN_TAIL_BYTES ? st.st_size - OOMSCAN_TAIL_BYTES : 0;
    if (from > start)
        start = from;
    if (start >= st.st_size) {
        close(fd);
        return false;
    }
    size_t want = (size_t)(st.st_size - start);
    char *buf = malloc(want);
    if (!buf) {
        close(fd); /* no verdict is better than a guess; the end is still reported */
        return false;
    }
    ssize_t n;
    do
        n = pread(fd, buf, want, (off_t)start);
    while (n < 0 && errno == EINTR);
    close(fd);
    bool found = n > 0 && oomscan_text(buf, (size_t)n);
    free(buf);
    return found;
}
