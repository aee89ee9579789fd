/* life.h: what happens to a job after the core decides, written once for every driver.
 * The core (sched.h) decides what starts and what is preempted; this layer carries a
 * job through its run: its workers are assigned to their nodes, reported running, and
 * end; the job then succeeds or fails, or, when it was stopped (preempted, cancelled,
 * torn down, its node lost), gives its GPUs back and is queued again or closed. A
 * worker that ran out of GPU memory teaches its workload class (learn.h): the jobs of
 * the class already waiting are sized again where they wait, and the job runs again one
 * size up, or fails when no larger grant exists. A gang lives and dies whole: when one
 * worker fails, the others are stopped.
 *
 * The simulator drives it on simulated time from its model of the workload (when a run
 * finishes, checkpoints, runs out of memory, how long a stop takes); the server drives
 * it on the real clock from its agents' reports. What the layer does comes back through
 * the driver's LifeSink: events of the job's history, records that changed, the
 * allocation a job gives back (to charge it and count it), classes that learned. Pure,
 * like the core: no I/O, clock or randomness; the time is always the caller's. */
#pragma once

#include "core/job.h"
#include "core/learn.h"
#include "core/sched.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum LifeState {
    LIFE_PENDING,  /* in the core's queue (or sized out of it: see LIFE_FAILED) */
    LIFE_STARTING, /* placed: its workers are assigned, not all running yet */
    LIFE_RUNNING,  /* every worker reported running */
    LIFE_STOPPING, /* stopped: its workers are signalled and it holds its GPUs until they end */
    LIFE_SUCCEEDED,
    LIFE_FAILED,
    LIFE_CANCELLED,
    LIFE_STATE_COUNT
} LifeState;

static inline bool life_state_ended(LifeState s)
{
    return s >= LIFE_SUCCEEDED;
}

typedef enum LifeWorkerState {
    LIFE_WORKER_ASSIGNED, /* its node is told to start it */
    LIFE_WORKER_RUNNING,
    LIFE_WORKER_EXITED, /* with exit_code */
    LIFE_WORKER_FAILED, /* could not start */
    LIFE_WORKER_GONE,   /* its node was lost, or its process went without a status */
} LifeWorkerState;

/* One worker of a job's current run. */
typedef struct LifeWorker {
    uint32_t node;     /* cluster node index */
    uint8_t state;     /* LifeWorkerState */
    int32_t exit_code; /* exited: its code, or 128 + signal */
    int64_t start_ms;  /* reported running since, -1 before */
    uint64_t peak_mib; /* the most GPU memory it was seen to use, 0: unknown */
    bool oom;          /* it ran out of the GPU memory it was given */
    /* the driver's, which the lifecycle leaves alone: */
    uint32_t run;  /* the job's run it belongs to (the server's agents key it by job, run, rank) */
    int32_t pid;   /* its process on its node */
    bool reported; /* named in the report being handled */
} LifeWorker;

static inline bool life_worker_ended(const LifeWorker *w)
{
    return w->state >= LIFE_WORKER_EXITED;
}

typedef enum LifeStop {
    LIFE_STOP_NONE,
    LIFE_STOP_PREEMPT,  /* checkpoint within the grace, then stop */
    LIFE_STOP_CANCEL,   /* a user's cancel: nothing overrides it */
    LIFE_STOP_TEARDOWN, /* a worker failed: the rest of the gang cannot go on */
} LifeStop;

/* A model server the core moves (consolidate.h), make-before-break (life/move.c): its
 * replacement is worker 0 of a new run on sj->pl while the old worker serves from
 * sj->moved_from; once the replacement runs it is the job's worker and the old one,
 * told to stop, retires: what it held goes when it is gone. */
typedef enum LifeMove {
    LIFE_MOVE_NONE,
    LIFE_MOVE_STARTING, /* `shadow` is the replacement */
    LIFE_MOVE_RETIRING, /* `shadow` is the old worker */
} LifeMove;

/* The lifecycle's clock on the nodes, beside the core's defaults (sched.h: minimum run
 * time, fair-share half-life, grace), defined once for every driver and the agents: how
 * often a node reports, the silence after which it is lost and takes no new work, and
 * how long a lost node's running work waits for it before its jobs are requeued
 * (Kubernetes' node-monitor-grace-period is 40 s and its pod eviction 5 min after that;
 * Slurm's SlurmdTimeout is 300 s: docs/agent.md says why). Plain numbers, so that help
 * texts can quote them. */
#define LIFE_HEARTBEAT_MS  500
#define LIFE_LOST_AFTER_MS 40000
#define LIFE_LOST_GRACE_MS 300000

/* The reason a job is failed when its class needs more GPU memory than any GPU of the
 * cluster has: the same words wherever it is seen. */
#define LIFE_UNFIT_REASON "its workload class needs more GPU memory than any GPU of the cluster has"

typedef struct LifeJob {
    SchedJob *sj;        /* the core's view of the job: the driver's, kept beside this */
    const JobSpec *spec; /* what was submitted (the driver owns it) */
    uint8_t state;       /* LifeState */
    uint8_t stop_mode;   /* LifeStop while stopping */
    bool requeue;        /* stopping: queue it again when its workers are gone */
    bool unfit;          /* failed because no GPU here holds what its class needs */
    uint32_t run;        /* runs started so far */
    int32_t exit_code;   /* -1 until it ended with one */
    LifeWorker *workers; /* the current run, one per worker of sj.pl; NULL when not placed */
    size_t n_workers;
    uint8_t move;              /* LifeMove */
    LifeWorker shadow;         /* moving: the worker of the allocation that is not sj->pl's */
    int64_t stop_ms;           /* when the stop under way was decided */
    int64_t start_ms;          /* when the current run's last worker started, -1 before */
    int64_t end_ms;            /* when it ended, -1 before */
    int64_t checkpoint_ms;     /* its last completed checkpoint, -1: none */
    int64_t estimate_total_ms; /* its whole run at full speed, NO_DURATION when unknown */
    double saved_work_ms;      /* work its last checkpoint saved, in ms at full speed */
    double start_saved_ms;     /* saved_work_ms when the current run started (resumed) */
    double gpus_asked;         /* GPUs it asks (Tiresias counts attained service in them) */
    double attained_base_ms;   /* GPUs x ms run before the current run */
} LifeJob;

/* What the layer tells its driver. Each callback returns 0 or a negative errno, which
 * stops the call under way and is returned by it; NULL callbacks are skipped. */
typedef struct LifeSink {
    void *arg;
    /* j's durable record changed (its state, run, exit code, times) */
    int (*changed)(void *arg, LifeJob *j);
    /* an event of j's history: type "start", "oom", "resized", "fail", "requeue", "lost",
     * "finish", "cancelled"; detail a sentence or NULL ("requeue": the driver says what
     * the run resumes from) */
    int (*event)(void *arg, LifeJob *j, int64_t t_ms, const char *type, const char *detail);
    /* j gives back what it holds (j->sj.pl, and j->sj.moved_from while moving), now:
     * called before the core releases it, so that the driver charges and counts it */
    int (*release)(void *arg, LifeJob *j, int64_t now_ms);
    /* j was sized for the queue and its request changed (the driver's shape of it) */
    int (*sized)(void *arg, LifeJob *j);
    /* a move ends (life/move.c): done, the old allocation (sj->moved_from) is given back;
     * abandoned, the replacement's (sj->pl). Called before the core lets go of it. */
    int (*moved)(void *arg, LifeJob *j, bool done, int64_t now_ms);
    /* the class learned: e is its entry now */
    int (*learned)(void *arg, const LearnEntry *e);
    /* the next job after *pos (the driver's cursor, from 0) that waits in the core's
     * queue with workload class cls, or NULL: the jobs a class's learning resizes, in an
     * order of the driver's that does not change between runs */
    LifeJob *(*next_waiting)(void *arg, const char *cls, int64_t *pos);
} LifeSink;

typedef struct Life {
    Cluster *c;
    Sched *sched;
    Learn *learn;
    LifeSink sink;
    /* counts over the life of the Life */
    uint64_t ooms;                       /* workers that ran out of GPU memory */
    uint64_t oom_repeats;                /* of those, in classes that had run out before */
    uint64_t unfit;                      /* jobs failed because their class outgrew every GPU */
    uint64_t finished[LIFE_STATE_COUNT]; /* jobs ended, by ending state */
} Life;

/* "pending", "starting", "running", "stopping", "succeeded", "failed", "cancelled". */
const char *life_state_name(LifeState s);

/* Put a job in the queue (a new job, or one whose run is over): sized from what its
 * class learned, its estimate what is left after its last checkpoint; or failed when no
 * GPU of the cluster holds what its class needs. */
int life_enqueue(Life *l, LifeJob *j, int64_t now_ms);

/* The core started j (SCHED_START): its workers are assigned on j->sj.pl. */
int life_start(Life *l, LifeJob *j, int64_t now_ms);

/* Worker w reported running since start_ms. */
int life_worker_running(Life *l, LifeJob *j, size_t w, int64_t start_ms, int64_t now_ms);

/* Worker w ended: state (exited, failed, gone), code (exited), peak and oom as seen. */
int life_worker_end(Life *l, LifeJob *j, size_t w, LifeWorkerState state, int32_t code,
                    uint64_t peak_mib, bool oom, int64_t now_ms);

/* Every worker not ended yet ends so (a stop carried out, a node gone with the run). */
int life_end_workers(Life *l, LifeJob *j, LifeWorkerState state, int32_t code, int64_t now_ms);

/* Act on what the workers' states now say (after a driver set several of them). */
int life_progress(Life *l, LifeJob *j, int64_t now_ms);

/* Stop j: a pending job is cancelled at once; a placed one stops (its workers are to be
 * signalled: the driver tells its nodes) and is queued again (requeue) or closed when
 * they are gone. A cancel overrides a preemption under way; nothing overrides a cancel. */
int life_stop(Life *l, LifeJob *j, LifeStop mode, bool requeue, int64_t now_ms);

/* j's workers on node are gone with it (why: a sentence for its history): the run is
 * torn down and queued again. */
int life_node_gone(Life *l, LifeJob *j, uint32_t node, const char *why, int64_t now_ms);

/* The core moved j (SCHED_MOVE): its replacement's run begins on j->sj->pl, beside the
 * old worker (j->shadow until the replacement runs). */
int life_move_start(Life *l, LifeJob *j, int64_t now_ms);

/* A worker of a move under way changed state (the driver set j->shadow's, or worker
 * 0's): the move commits when the replacement runs, retires the old worker once it is
 * gone, or is abandoned when the replacement cannot start. */
int life_move_progress(Life *l, LifeJob *j, int64_t now_ms);

/* A checkpoint completed at t_ms, saving saved_work_ms of work in all. */
void life_checkpoint(LifeJob *j, int64_t t_ms, double saved_work_ms);
/* A checkpoint of the current run completed at t_ms, the run having worked at full
 * speed since it started from its last checkpoint (what a real run is taken to do). */
void life_checkpoint_run(LifeJob *j, int64_t t_ms);

/* A job out of the queue and holding nothing (a driver parked it) ends so. */
int life_end(Life *l, LifeJob *j, LifeState final, int64_t now_ms);

/* Does j hold a worker on node that has not ended (that runs, when running_only)? */
bool life_on_node(const LifeJob *j, uint32_t node, bool running_only);

/* Free what the lifecycle allocated for j (its workers; the SchedJob is the driver's). */
void life_job_free(LifeJob *j);
