/* launch.h: starting a worker process. The environment is built by a pure function
 * (what a worker sees is decided there and unit-tested without forking); the spawn
 * forks, puts the child in its own process group (so signals reach the worker and its
 * children, and a Ctrl-C at the agent's terminal does not), appends its stdout and
 * stderr to its log file and execs the command, reporting an exec failure back through
 * a close-on-exec pipe. */
#pragma once

#include "agent/assign.h"
#include "agent/gpus.h"
#include "util/buf.h"

#include <stddef.h>
#include <sys/types.h>

/* The environment of a worker: base (the agent's own, less GPUORCH_TOKEN: the agent's
 * credential is not the job's), then the job's env on top,
 * then what gpuorch sets on top of both: CUDA_VISIBLE_DEVICES (GPU UUIDs for whole
 * GPUs and MPS shares, the MIG device UUID for an instance), GPUORCH_JOB_ID,
 * GPUORCH_RUN, RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT,
 * GPUORCH_CHECKPOINT_DIR, GPUORCH_RESUME_FROM (removed when not resuming),
 * GPUORCH_GPU_MEMORY_MIB (the GPU memory granted; removed without GPUs), and for MPS
 * shares CUDA_MPS_ACTIVE_THREAD_PERCENTAGE and CUDA_MPS_PINNED_DEVICE_MEM_LIMIT.
 * -ENOENT when a granted GPU does not exist on this node; -EAGAIN when it exists but
 * not yet in the granted shape (its MIG instance is missing, or it is still in MIG mode
 * for a whole-GPU or MPS grant). err says which. *ret_env is NULL-terminated and owned
 * by the caller (launch_env_free). */
int launch_env(const Assignment *a, const AgentGpu *gpus, size_t n_gpus, const char *checkpoint_dir,
               char *const *base, char ***ret_env, Buf *err);
void launch_env_free(char **env);

/* Fork and exec argv (searched in env's PATH) with env, in a new process group, stdin
 * from /dev/null, stdout and stderr appended to log_path (created 0600: a job's output
 * is its own). The caller keeps fds 0-2 open, so the log and /dev/null never land on
 * them. 0 with *ret_pid once the
 * exec succeeded; a negative errno when the log cannot be opened, the fork fails or
 * the exec fails (then err says "cannot run 'CMD': REASON", the line is also appended
 * to the log, and the child is already reaped). */
int launch_spawn(char *const *argv, char *const *env, const char *log_path, pid_t *ret_pid,
                 Buf *err);
