/* launch.h: starting a worker process. The environment, the identity the worker runs
 * as and its limits are decided by pure functions (unit-tested without forking); the
 * spawn forks, puts the child in its own process group (so signals reach the worker and
 * its children, and a Ctrl-C at the agent's terminal does not), moves it into its
 * cgroup, sets its limits, drops to its user (setgroups, setgid, setuid, each checked,
 * then no_new_privs so that no setuid binary takes it back up),
 * appends its stdout and stderr to its log file (opened by the agent, so the worker
 * needs no right on the logs directory) and execs the command, reporting a failure of
 * any step back through a close-on-exec pipe.
 *
 * Who a worker runs as (launch_cred): an agent running as root runs it as the job's
 * team's run_as from the cluster spec (the heartbeat's "user"), else as its default
 * worker user (--worker-user, default nobody/nogroup); it refuses uid 0 and group 0
 * unless started with --allow-root-workers. An agent that is not root cannot switch,
 * and runs every worker as itself. */
#pragma once

#include "agent/assign.h"
#include "agent/cgroup.h"
#include "agent/gpus.h"
#include "util/buf.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define LAUNCH_NOFILE 65536 /* RLIMIT_NOFILE per worker process (at most the agent's hard) */
#define LAUNCH_NPROC  16384 /* RLIMIT_NPROC: processes and threads of the worker's uid */

/* What the agent was told at start about who runs workers, and what bounds them. */
typedef struct LaunchPolicy {
    uid_t agent_uid; /* the agent's effective ids: 0 lets it switch */
    gid_t agent_gid;
    uid_t default_uid; /* a worker without "user" */
    gid_t default_gid;
    bool allow_root;     /* uid 0 or group 0 allowed (--allow-root-workers) */
    uint64_t nofile;     /* RLIMIT_NOFILE */
    uint64_t nproc;      /* RLIMIT_NPROC; 0: left as the agent's */
    CgroupTree *cgroups; /* NULL: none (cgroup v2 not delegated); owned */
} LaunchPolicy;

/* The Unix identity of one worker. */
typedef struct LaunchCred {
    bool change; /* false: the worker runs as the agent (it is not root) */
    uid_t uid;
    gid_t gid;
    gid_t groups[ASSIGN_MAX_GROUPS]; /* supplementary; none: only gid */
    size_t n_groups;
    bool mapped; /* from the assignment's "user", not the default */
} LaunchCred;

/* The limits set in the child before exec. 0 in a field: left as inherited. */
typedef struct LaunchLimits {
    uint64_t nofile, nproc;
    uint64_t data_bytes; /* RLIMIT_DATA: the memory asked, where no cgroup bounds it */
} LaunchLimits;

/* The policy for an agent running as euid with --worker-user user (a name or a number;
 * NULL: "nobody") and --worker-group group (NULL: user's primary group when user is a
 * name, else "nogroup"), resolved now. -EINVAL (err says which) when a name does not
 * resolve. cgroups is left NULL: the caller opens the tree. */
int launch_policy_init(LaunchPolicy *p, uid_t euid, gid_t egid, const char *user, const char *group,
                       bool allow_root, Buf *err);
void launch_policy_free(LaunchPolicy *p);

/* The identity a's worker runs as under p. -EPERM (err says why and what to do) when
 * that is uid 0 or has group 0 and p does not allow root workers. */
int launch_cred(const LaunchPolicy *p, const Assignment *a, LaunchCred *ret, Buf *err);
/* The limits of a's worker: RLIMIT_NOFILE and RLIMIT_NPROC from p (each at most
 * the agent's own hard limits in hard, 0 there: unlimited), RLIMIT_DATA from a's memory_mib when
 * in_cgroup is false (RLIMIT_AS would also count the address space CUDA reserves, tens
 * of GiB it never touches, and stop every GPU job). RLIMIT_CORE is always 0. */
void launch_limits(const LaunchPolicy *p, const Assignment *a, bool in_cgroup,
                   const LaunchLimits *hard, LaunchLimits *ret);

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
 * by the caller (launch_env_free).
 *
 * fabric (NULL: none) is the node's NCCL settings for its fabric (nccl_fabric_env),
 * applied only when a->multi_node (one node's ranks talk over NVLink and PCIe, not the
 * network), between base and the job's env: a variable the job sets keeps the job's
 * value, and one the agent's own environment sets gives way to the fabric's. */
int launch_env(const Assignment *a, const AgentGpu *gpus, size_t n_gpus, const char *checkpoint_dir,
               char *const *base, char *const *fabric, char ***ret_env, Buf *err);
void launch_env_free(char **env);

/* Fork and exec argv (searched in env's PATH) with env, in a new process group, stdin
 * from /dev/null, stdout and stderr appended to log_path (created 0600, owned by the
 * agent: a job's output is its own, and the worker writes it through the descriptor
 * only). cred (NULL: no change) and lim (NULL: none) are applied in the child, which
 * first writes itself into cgroup_procs_fd (-1: no cgroup). The caller keeps fds 0-2
 * open, so the log and /dev/null never land on them. 0 with *ret_pid once the exec
 * succeeded; a negative errno when the log cannot be opened, the fork fails or a step
 * in the child fails (then err says "cannot run 'CMD': STEP: REASON", the line is also
 * appended to the log, and the child is already reaped). */
int launch_spawn(char *const *argv, char *const *env, const char *log_path, const LaunchCred *cred,
                 const LaunchLimits *lim, int cgroup_procs_fd, pid_t *ret_pid, Buf *err);

/* A worker's whole start under p: its identity (launch_cred), its checkpoint directory
 * given to that identity (chown, mode 0700) when it switches, its cgroup ("J.R.K",
 * cgroup.h) where p has cgroups, its limits, and launch_spawn. On failure nothing is left
 * behind (the cgroup is removed) and err says why. */
int launch_worker(const LaunchPolicy *p, const Assignment *a, const char *ckpt_dir,
                  char *const *env, const char *log_path, pid_t *ret_pid, Buf *err);
/* The worker (job, run, rank) ended: its cgroup, if any, goes (cgroup_worker_remove;
 * a busy one is left to cgroup_sweep). */
void launch_worker_ended(const LaunchPolicy *p, int64_t job, int64_t run, uint32_t rank);
