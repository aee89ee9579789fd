/* worker.h: the agent's record of one worker process, from launch to the moment the
 * server says to forget it: reaping, the checkpoint file it writes, the checkpoint
 * and stop signals it gets, and the table of all of them kept in
 * <state-dir>/workers.json so a restarted agent finds the workers still running.
 *
 * A worker's process group is its pid (launch_spawn makes it so), and every signal
 * goes to the group, so a launcher such as torchrun and the ranks it forks all get it.
 * Stopping is a small state machine advanced on every loop iteration; nothing here
 * blocks. A worker runs under a keeper (keeper.h) that records its exit status in a
 * file, so one found again after an agent restart ("adopted") ends with its real
 * status too. Only a worker whose keeper is gone (killed), or one of a table written
 * before keepers, is watched through /proc, and its exit status cannot be known. */
#pragma once

#include "agent/assign.h"
#include "agent/ckpt.h"
#include "util/buf.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef enum WorkerState {
    WK_PENDING, /* assigned, waiting for its GPUs to take the granted shape; not reported */
    WK_RUNNING,
    WK_EXITED,
    WK_FAILED, /* could not be started; error says why */
} WorkerState;

typedef enum StopPhase {
    SP_NONE,
    SP_CHECKPOINT, /* preempt: checkpoint signal sent, waiting for a marker or grace_ms */
    SP_SETTLE,     /* preempt: a marker changed; a moment for the worker to finish writing */
    SP_TERM,       /* SIGTERM sent, SIGKILL at the deadline */
    SP_KILLED,
} StopPhase;

#define WORKER_SETTLE_MS       500   /* after a marker changed, before SIGTERM */
#define WORKER_PREEMPT_KILL_MS 10000 /* SIGTERM to SIGKILL when preempting */
#define WORKER_LATEST_MAX      4096  /* bytes of LATEST read */

typedef struct WorkerKey {
    int64_t job, run;
    uint32_t rank;
} WorkerKey;

typedef struct Worker {
    WorkerKey key;
    json_t *spec;             /* the assignment as the server sent it (owned reference) */
    Assignment a;             /* parsed from spec; zeroed when it did not parse */
    uint8_t state;            /* WorkerState */
    char *error;              /* WK_FAILED, or an exit whose status is unknown */
    pid_t pid;                /* also its process group; 0 when none ran */
    uint64_t start_ticks;     /* /proc/PID/stat starttime, to tell a reused pid */
    pid_t keeper_pid;         /* its keeper (keeper.h); 0: none, watched through /proc */
    uint64_t keeper_ticks;    /* the keeper's starttime */
    char *exit_path;          /* where the keeper records the exit status */
    int64_t start_ms, end_ms; /* wall clock; 0 when not (yet) */
    bool adopted;             /* started by an earlier agent process */
    bool has_exit_code;       /* WK_EXITED: exit_code is known */
    int exit_code;
    int signal;              /* WK_EXITED: the signal that killed it, or 0 */
    char *checkpoint;        /* the content of LATEST, trimmed; NULL before one */
    int64_t checkpoint_ms;   /* LATEST's mtime */
    int64_t latest_mtime_ns; /* LATEST as last seen (0: absent) */
    int64_t latest_size;
    CkptHistory ckpts;       /* the steps this run marked in LATEST.RANK (ckpt.h) */
    int64_t marker_mtime_ns; /* LATEST.RANK as last seen (0: absent) */
    int64_t marker_size;     /* bytes */
    uint64_t marker_ino;     /* tells two renamed markers of one size apart */
    char *ckpt_dir;          /* GPUORCH_CHECKPOINT_DIR */
    char *log_path;
    int64_t log_base;         /* the log's size when this run started: byte 0 of its upload */
    int64_t log_sent;         /* bytes of this run's log the server holds */
    uint64_t peak_memory_mib; /* 0: unknown */
    bool held_said;           /* the log said a checkpoint signal was held (said once) */
    bool oom;                 /* ended badly on its own with a GPU out-of-memory message in
                               * its log's tail (oomscan.h) */
    bool shutdown;            /* stopped because the node is shutting down (agent_shutdown):
                               * its end is the node's doing, not the job's */

    /* not persisted: a restarted agent starts these afresh */
    int64_t pending_since;   /* monotonic ms the worker began waiting for its GPUs */
    int64_t next_checkpoint; /* monotonic ms of the next periodic checkpoint signal */
    uint8_t stop_mode;       /* WorkerStop being carried out */
    uint8_t stop_phase;      /* StopPhase */
    int64_t stop_deadline;   /* monotonic ms */
    int64_t stop_since;      /* monotonic ms the stop (or its escalation) began */
    int64_t stop_latest_ns;  /* LATEST's mtime when the checkpoint signal went */
    int64_t stop_marker_ns;  /* LATEST.RANK's mtime then */
    uint64_t stop_ino;       /* and its inode */
    int log_status;          /* last non-200 status of a log upload, to log it once */
    bool lost;               /* loaded as running, found ended */
} Worker;

int64_t agent_wall_ms(void);
int64_t agent_mono_ms(void);

static inline bool worker_key_eq(const WorkerKey *a, const WorkerKey *b)
{
    return a->job == b->job && a->run == b->run && a->rank == b->rank;
}
static inline bool worker_live(const Worker *w)
{
    return w->state == WK_RUNNING;
}
static inline bool worker_ended(const Worker *w)
{
    return w->state == WK_EXITED || w->state == WK_FAILED;
}

/* A pending worker for an assignment (spec's reference is taken). When spec does not
 * parse, the worker is WK_FAILED with the reason. NULL on out of memory. */
Worker *worker_new(const WorkerKey *key, json_t *spec);
void worker_free(Worker *w);
const char *worker_state_name(uint8_t state);

/* Right before the worker is started: the checkpoint baseline (LATEST and its rank's
 * marker as an earlier run left them). */
void worker_starting(Worker *w);
/* The worker ran: record pid and start time. */
void worker_started(Worker *w, pid_t pid, int64_t mono_ms);
/* It runs under a keeper, which records its end in exit_path (copied). */
void worker_kept(Worker *w, pid_t keeper, const char *exit_path);
/* The worker could not start. */
void worker_failed(Worker *w, const char *why);

/* /proc/PID/stat's start time and state letter. -ENOENT when no such process. */
int proc_stat(pid_t pid, uint64_t *ret_ticks, char *ret_state);
/* Does sig leave the process running: caught or ignored (SigCgt, SigIgn in
 * /proc/PID/status)? 1, 0, or a negative errno when /proc cannot say. */
int proc_catches(pid_t pid, int sig);

/* Has the worker ended? One under a keeper has ended when the keeper's record exists
 * (its status is the record's; the keeper, when this process's child, is reaped); a
 * keeper gone without a record (killed) leaves the worker watched through /proc. Else
 * reaps a child (WNOHANG); watches /proc for an adopted one (a
 * /proc read that fails other than "no such process" is not an end). When the leader
 * has ended, what is left of its process group is killed (SIGKILL) before the worker is
 * reported ended, and the checkpoint markers are read one last time. A child that
 * ended badly on its own (a non-zero exit code, or a signal no stop of the agent's sent)
 * has its log's tail read once for GPU out-of-memory messages (oom); an end whose status
 * is unknown is not judged. True when the state changed. */
bool worker_reap(Worker *w);

/* Read the checkpoint markers that changed: the legacy LATEST (checkpoint) and the
 * rank's own LATEST.RANK (a step added to ckpts; a marker that is not "STEP PATH" is
 * logged, event=checkpoint_invalid, and left out). Returns what changed:
 * WORKER_SAW_LATEST, WORKER_SAW_STEP, both or 0. */
#define WORKER_SAW_LATEST 1
#define WORKER_SAW_STEP   2
int worker_watch_checkpoint(Worker *w);

/* Send sig to the worker's process group. */
void worker_signal(Worker *w, int sig);

/* Begin (or escalate: cancel overrides preempt) a stop. One under way already is
 * shortened when the grace (w->a.grace_ms) has shrunk since: the deadline of a phase
 * timed by the grace becomes at most the stop's beginning plus the new grace. */
void worker_request_stop(Worker *w, uint8_t mode, int64_t mono_ms);
/* Can the worker save its work when told? Its job has a checkpoint setting, or it has
 * written a checkpoint (LATEST, or its rank's marker), or it resumes from one. */
bool worker_checkpoints(const Worker *w);
/* Periodic checkpoint signals and the stop machine's deadlines. */
void worker_advance(Worker *w, int64_t mono_ms);

/* The worker as the heartbeat reports it (docs/api.md); "checkpoints" once it marked a
 * step; "oom": true only for an ended worker that ran out of GPU memory. New reference. */
json_t *worker_report_json(const Worker *w);

/* The longest server id a table keeps (the server's is 32 hex digits). */
#define WORKER_SERVER_ID_MAX 64

/* Save the running and ended workers (not the pending) to path atomically, with the
 * id of the server they belong to (NULL or "": not known yet). */
int worker_table_save(const char *path, const char *machine_boot_id, const char *server_id,
                      Worker *const *w, size_t n);
/* Load path. Running workers whose keeper is still there, or whose keeper recorded
 * their end, or (no keeper) whose process is still there (same machine boot, same pid
 * start time) come back adopted; the others come back exited with an unknown status
 * ("ended while the agent was down"). No file: an empty table. ret_server_id (when not
 * NULL) gets the table's server id, "" when it names none. */
int worker_table_load(const char *path, const char *machine_boot_id,
                      char ret_server_id[WORKER_SERVER_ID_MAX + 1], Worker ***ret, size_t *ret_n,
                      Buf *err);
