/* cgroup.h: a cgroup v2 per worker, where the machine delegates one to the agent.
 *
 * The layout follows systemd's delegation rules (a delegated subtree is the agent's to
 * arrange; no cgroup with controllers enabled for its children may hold processes):
 *
 *   <agent's cgroup>/agent            the agent itself, moved there at start
 *   <agent's cgroup>/gpuorch/J.R.K    one per worker (job J, run R, rank K), with
 *                                     memory.max and cpu.max from its request
 *
 * Started by systemd with Delegate=yes, the agent's cgroup is its service's; started
 * from a shell as root, it is the shell's (which must then hold no other process, or the
 * controllers cannot be enabled and the agent goes on without cgroups). */
#pragma once

#include "util/buf.h"

#include <stdint.h>

typedef struct CgroupTree CgroupTree;

/* Find the agent's cgroup v2 (the cgroup2 mount in /proc/self/mountinfo, the "0::"
 * line of /proc/self/cgroup), check it offers the memory and cpu controllers, move the
 * agent into <it>/agent and enable the controllers for <it>/gpuorch's children. 0 with
 * *ret, or a negative errno with why saying what is missing (no cgroup2 mount, a
 * controller not delegated, a file not writable). */
int cgroup_tree_open(CgroupTree **ret, Buf *why);
void cgroup_tree_free(CgroupTree *t);
/* <agent's cgroup>/gpuorch, as a path under the cgroup2 mount. */
const char *cgroup_tree_path(const CgroupTree *t);

/* Make the cgroup of a worker (name: "J.R.K") with memory.max = memory_mib MiB and
 * cpu.max = cpu_milli thousandths of a core per 100 ms (0: "max"), memory.swap.max 0
 * when memory is bounded (where the file exists), and open its cgroup.procs for writing
 * (close-on-exec) in *ret_fd: the child writes "0" there before exec. A cgroup of that
 * name left over is reused. */
int cgroup_worker_make(CgroupTree *t, const char *name, uint32_t memory_mib, uint32_t cpu_milli,
                       int *ret_fd, Buf *err);
/* The worker ended: kill what is left in its cgroup (cgroup.kill, Linux 5.14+; a process
 * that left the worker's process group too) and remove it. -EBUSY while processes are
 * still on their way out; cgroup_sweep removes it later. */
int cgroup_worker_remove(CgroupTree *t, const char *name);
/* Remove every worker cgroup without processes (those of workers that ended while the
 * agent was down, or whose removal was busy). Ones with processes stay. */
void cgroup_sweep(CgroupTree *t);
