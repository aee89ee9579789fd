/* oomscan.h: did a worker run out of GPU memory? CUDA programs say so in their output
 * in a handful of fixed phrasings (PyTorch, the CUDA driver and runtime APIs, XLA/JAX,
 * TensorFlow), and the worker's output is its log file, so the agent reads the end of
 * the log once when a worker ends badly and looks for them. The server learns GPU
 * memory per workload class from these verdicts. A bare "out of memory" is not one:
 * the host's OOM killer and malloc failures say that too. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define OOMSCAN_TAIL_BYTES (64 * 1024) /* bytes of a log's end read */

/* Does text (len bytes, NULs allowed) hold one of the GPU out-of-memory messages? */
bool oomscan_text(const char *text, size_t len);

/* Does the last OOMSCAN_TAIL_BYTES of the file at path, counting only bytes at offset
 * from or later (where the current run's output begins), hold one? One read; false
 * when the file cannot be read or is not a regular file. A message that straddles the
 * start of what is read is not found. */
bool oomscan_log_tail(const char *path, int64_t from);
