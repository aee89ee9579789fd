/* keeper.h: a worker's keeper, the small process between the agent and the worker. The
 * agent forks the keeper; the keeper starts the worker (launch_worker, so the worker's
 * identity, limits, cgroup and process group are launch.c's), waits for it, and writes its
 * exit status atomically to a file in the agent's state directory before it exits.
 * The keeper is in a session of its own and ignores the signals that stop an agent, so
 * it outlives an agent that is killed or restarted: the next agent finds the worker
 * running (the keeper is there) or reads how it ended (the file), instead of a worker
 * that is not its child and whose exit status nobody could wait for. Signals for the
 * worker still go straight to the worker's process group, never through the keeper. */
#pragma once

#include "util/buf.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct KeeperExit {
    int64_t end_ms;     /* wall clock, ms since the epoch */
    bool has_exit_code; /* false: ended by a signal */
    int exit_code;
    int signal; /* the signal that ended it, or 0 */
} KeeperExit;

/* How the keeper starts the worker, in the keeper's process: launch_worker, say (its
 * identity, cgroup, limits, launch_spawn). 0 with the worker's pid (its own process
 * group, the keeper's child), or a negative errno with err saying why. */
typedef int (*KeeperStart)(void *arg, pid_t *ret_pid, Buf *err);

/* Fork a keeper that closes close_fd (-1: none; the agent's lock, which the next agent
 * must be able to take), starts the worker with start(arg) and, when the worker has
 * ended, kills what is left of its process group and writes its exit status to
 * exit_path (replaced atomically; the directory must exist; log_path, the worker's log,
 * says so when that fails). Once the worker runs the keeper closes every descriptor
 * past stderr. 0 with the keeper's pid (the caller's child, which the caller reaps) and
 * the worker's once it was exec'd; a negative errno with err saying why when the keeper
 * or the worker could not start (then the keeper is reaped already and exit_path is not
 * written). */
int keeper_spawn(KeeperStart start, void *arg, int close_fd, const char *log_path,
                 const char *exit_path, pid_t *ret_keeper, pid_t *ret_worker, Buf *err);

/* What a keeper wrote to path. 0 with *ret; -ENOENT when nothing is there yet; -EINVAL
 * when it is not a keeper's record. */
int keeper_exit_read(const char *path, KeeperExit *ret);
