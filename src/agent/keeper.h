/* keeper.h: a worker's keeper, the small process between the agent and the worker. The
 * agent forks the keeper; the keeper starts the worker (launch_spawn, so the worker's
 * environment, user and process group are launch.c's), waits for it, and writes its
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

/* Fork a keeper that runs argv with env (launch_spawn: stdout and stderr appended to
 * log_path) and, when the worker has ended, kills what is left of its process group
 * and writes its exit status to exit_path (replaced atomically; the directory must
 * exist). 0 with the keeper's pid (the caller's child, which the caller reaps) and the
 * worker's (also its process group) once the worker was exec'd; a negative errno with
 * err saying why when the keeper or the worker could not start (then the keeper is
 * reaped already and exit_path is not written). */
int keeper_spawn(char *const *argv, char *const *env, const char *log_path, const char *exit_path,
                 pid_t *ret_keeper, pid_t *ret_worker, Buf *err);

/* What a keeper wrote to path. 0 with *ret; -ENOENT when nothing is there yet; -EINVAL
 * when it is not a keeper's record. */
int keeper_exit_read(const char *path, KeeperExit *ret);
