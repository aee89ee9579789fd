/* sched.h: the scheduling cycle. Given the cluster, the waiting jobs and the running
 * ones at a moment, decide what starts, what is preempted and what waits (and why).
 * The simulator calls it on simulated time and the server on the real clock; neither
 * adds rules of its own.
 *
 * One cycle:
 *  1. account fair-share usage up to now; decide which running work is inside each
 *     team's guarantee and which is borrowed;
 *  2. order the waiting jobs (queue order: priority class, then fair share, then age;
 *     or FIFO, or Tiresias' least attained service);
 *  3. for each in turn: check the team's burst limit, then try to place it, keeping out of
 *     nodes reserved for jobs ahead of it unless it will be gone before they start
 *     (by its duration estimate) or is preemptible;
 *  4. a job that does not fit may preempt, when the rules allow (preempt.c), or, if it
 *     is a gang, reserve the nodes it will get at the earliest time the running
 *     jobs' estimates free them (EASY backfill);
 *  5. when whole GPUs are wanted and partitioned GPUs hold little that is expected to
 *     end soon, drain those GPUs (no new slices) so they come back whole; move the
 *     servers off those that hold little, where other partitioned GPUs have room
 *     (consolidate.h).
 *
 * Starting a job applies its placement to the cluster at once. A preempted job keeps its
 * resources until the caller, after the job's grace period, calls sched_release; the
 * nodes it frees are claimed for the job that preempted it until that job's next turn
 * in the queue, against every other job (a victim of a higher class, queued again ahead
 * of its preemptor, would otherwise take its room straight back). */
#pragma once

#include "core/cluster.h"
#include "core/failmemo.h"
#include "core/place.h"
#include "core/runorder.h"
#include "core/tenancy.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum SchedOrder {
    SCHED_ORDER_FIFO,     /* submission time */
    SCHED_ORDER_PRIORITY, /* class, then fair share, then submission */
    SCHED_ORDER_TIRESIAS, /* two queues by attained service, FIFO inside */
} SchedOrder;

typedef enum SchedPreempt {
    SCHED_PREEMPT_NONE,
    SCHED_PREEMPT_QUOTA,    /* gpuorch: guarantees, borrowed first, least lost work */
    SCHED_PREEMPT_PRIORITY, /* kube-scheduler: any lower priority, fewest victims */
    SCHED_PREEMPT_TIRESIAS, /* the upper queue pushes out the lower, latest first */
} SchedPreempt;

/* The lifecycle's defaults, defined once for every driver (the server, the simulator,
 * the Kubernetes engine), so that the simulator's figures describe what the server does:
 * how long a job runs before preemption may take it, how fast fair share forgets usage,
 * and how long a preempted job that names no grace has to checkpoint. */
#define SCHED_MIN_RUNTIME_MS (5 * 60 * 1000)
#define SCHED_HALF_LIFE_MS   (60 * 60 * 1000)
#define SCHED_GRACE_MS       (30 * 1000)

typedef struct SchedConfig {
    SchedOrder order;
    SchedPreempt preempt;
    bool fair_share;        /* inside a class, the team with the least decayed usage first */
    bool quotas;            /* enforce guarantees and burst limits */
    bool backfill;          /* gangs reserve; others backfill around the reservation */
    bool drain;             /* drain nearly empty partitioned GPUs for whole-GPU work */
    bool consolidate;       /* move servers off them (consolidate.h) */
    int64_t min_runtime_ms; /* a job runs this long before it may be preempted, except for
                             * production (preempt_old_enough) */
    int64_t half_life_ms;   /* fair-share usage decay */
    double tiresias_threshold_gpu_ms; /* Tiresias: attained service of the upper queue */
    unsigned max_preempt_tries;       /* jobs per cycle that may look for victims */
    unsigned max_reservations;        /* blocked multi-GPU jobs that reserve, per cycle */
} SchedConfig;

/* Defaults for gpuorch (priority order, quota-aware preemption, backfill, drain). */
void sched_config_gpuorch(SchedConfig *cfg);

#define SCHED_REASON_LEN 512

/* Fields are ordered so that what a cycle reads for every waiting job comes first. */
typedef struct SchedJob {
    /* what it asks (set by the caller) */
    uint32_t id;      /* the caller's index, echoed in decisions */
    uint32_t team;    /* cluster team index or TEAM_NONE */
    uint8_t priority; /* Priority */
    bool preemptible;
    bool movable; /* a service that can start a replacement before it stops (consolidate.h) */
    /* the scheduler's, read every cycle */
    bool queued;        /* in the scheduler's queue */
    bool borrowed;      /* running above its team's guarantee */
    bool stopping;      /* preempted: waiting for the caller to release it */
    uint32_t nominated; /* stopping: the job it makes room for (SCHED_NONE: none) */
    double ask_units;   /* what it would hold, for quotas (set on enqueue) */
    double units;       /* GPU_UNITS held */
    int64_t submit_ms;
    bool moved;          /* a lead moved it: queue_key orders it, not submit_ms */
    double queue_key;    /* moved: its place among its bucket's jobs, in ms like submit_ms */
    int64_t estimate_ms; /* expected remaining run time, NO_DURATION when unknown */
    int64_t grace_ms;    /* how long it takes to stop after a preemption signal */
    /* its run (kept true by the caller) */
    bool running;               /* holds an allocation (running or stopping) */
    int64_t run_start_ms;       /* start of the current run */
    int64_t last_checkpoint_ms; /* last completed checkpoint (or the run's start) */
    int64_t placed_ms;          /* when it started or last moved */
    bool moving;                /* moved: it holds moved_from too until sched_move_done */
    double attained_gpu_ms;     /* Tiresias: GPUs x time run so far, current run included */
    /* the scheduler's, read now and then */
    bool listed;                   /* has an entry in a queue bucket (maybe stale) */
    uint32_t bucket;               /* listed: which bucket */
    uint32_t backfill_for;         /* running: the reservation holder whose nodes it backfilled as
                                    * preemptible work, to be moved when that job is ready */
    int64_t stop_at_ms;            /* stopping: when its grace ends (when its room comes free) */
    Placement pl;                  /* the allocation while running */
    Placement moved_from;          /* moving: the allocation its replacement takes over from */
    Request req;                   /* all workers */
    char reason[SCHED_REASON_LEN]; /* waiting: why, in words */
    uint8_t held_back;             /* waiting: SchedHeld, why more nodes would not start it now */
} SchedJob;

/* Why a waiting job would not start on new capacity (the autoscaler scales only for
 * SCHED_HELD_NO, jobs that wait for room). */
typedef enum SchedHeld {
    SCHED_HELD_NO,         /* waiting for room (or not looked at yet) */
    SCHED_HELD_QUOTA,      /* its team's burst limit or budget */
    SCHED_HELD_PREEMPTING, /* room is being made for it by preemption */
} SchedHeld;

#define SCHED_NONE UINT32_MAX

typedef enum SchedDecisionKind {
    SCHED_START,   /* placed: job->pl holds the allocation, applied to the cluster */
    SCHED_PREEMPT, /* stop the job (checkpoint within its grace), then sched_release */
    SCHED_DRAIN,   /* a partitioned GPU takes no new slices (node, gpu) */
    SCHED_UNDRAIN, /* it takes slices again */
    SCHED_MOVE,    /* start a replacement on job->pl, then stop the one on job->moved_from and
                    * call sched_move_done */
} SchedDecisionKind;

typedef struct SchedDecision {
    uint8_t kind;
    uint32_t job;     /* SchedJob.id */
    uint32_t for_job; /* SCHED_PREEMPT: the job it makes room for */
    uint32_t node;    /* SCHED_DRAIN/UNDRAIN */
    uint8_t gpu;
} SchedDecision;

typedef struct SchedDecisions {
    SchedDecision *d;
    size_t n, cap;
} SchedDecisions;

/* A reservation: nodes held for a waiting job from a time on. */
typedef struct Reservation {
    uint32_t job;     /* SchedJob.id */
    int64_t start_ms; /* when it expects to start */
    bool claim;       /* room preemption frees: binds every other job, not only those
                       * behind the holder in the queue */
    bool stuck;       /* due, but work that cannot be moved still stands in the way */
} Reservation;

/* The queue: jobs in buckets kept in submission order; a cycle merges the buckets in
 * the configured order (by class, then teams by fair share; or by Tiresias queue). */
typedef struct SchedBucket {
    SchedJob **j;
    size_t n, cap;
    size_t live; /* entries still queued (the others are dropped on the next walk) */
} SchedBucket;

/* The burst-limit sentence last written for a team (reason.c), and what it says. */
typedef struct SchedBurstWhy {
    uint64_t cycle;
    double held, units;
    char text[SCHED_REASON_LEN];
} SchedBurstWhy;

typedef struct Sched {
    Cluster *c;
    PlaceCtx *ctx;
    SchedConfig cfg;
    Tenancy ten;
    /* per node: the reservation holding it (index into res), or SCHED_NONE */
    uint32_t *node_res;
    Reservation *res;
    size_t n_res, res_cap;
    uint32_t *res_nodes; /* the reserved nodes */
    size_t n_res_nodes, res_nodes_cap;
    /* per node: the job whose preempted victims freed it and that has not had its turn
     * since (SCHED_NONE: none); claim_nodes lists them */
    uint32_t *node_claim;
    uint32_t *claim_nodes;
    size_t n_claim_nodes, claim_nodes_cap;
    uint32_t *rank;        /* by job id: place in this cycle's queue, UINT32_MAX not waiting */
    uint32_t *victims_for; /* by job id: victims stopping to make room for it */
    uint64_t *id_cycle;    /* by job id: the cycle rank and victims_for were set */
    uint8_t *prio_of;      /* by job id: a waiting job's class, set with rank */
    uint64_t *run_mark;    /* by job id: the cycle it was last among the running jobs */
    SchedJob **run_ptr;    /* by job id: its entry in the running jobs then */
    size_t ids_cap;
    /* the running jobs by start (classify) and, those with an estimate, by expected end
     * (reserve_gang; by_end_cycle: the cycle it was brought up to date in) */
    RunOrder by_start, by_end;
    uint64_t by_end_cycle;
    uint64_t *team_yield_cycle; /* by team slot: the cycle it last asked its lower classes */
    SchedBurstWhy *burst_why;   /* by team slot */
    /* the kept-room sentence last written (reason_kept): for reservation kept_ri in
     * cycle kept_cycle; jobs kept out of one reservation read the same words */
    uint64_t kept_cycle;
    uint32_t kept_ri;
    char kept_text[SCHED_REASON_LEN];
    uint8_t *blocked; /* scratch node mask for one placement */
    uint8_t *taken;   /* scratch: nodes reserved, while planning another reservation */
    /* per cycle: the placements that failed, by shape and blocking pattern */
    FailMemo memo;
    size_t n_shapes;
    uint64_t cycle;
    /* memo stamps: one for placements with no node kept out, one for the blocking
     * pattern the node mask (blocked) now holds */
    uint64_t free_stamp, mask_stamp;
    uint8_t *res_binds; /* by reservation: whether it binds the job being placed */
    size_t res_binds_cap;
    Placement scratch;
    Buf why;
    SchedBucket *buckets;
    size_t n_buckets;
    size_t queued;
    SchedJob **order; /* the queue in order (this cycle's, or sched_order's) */
    size_t n_order, order_cap;
    SchedJob **started; /* started in this cycle: running, but not in the caller's list */
    size_t n_started, started_cap;
    uint64_t mig_models, plain_models; /* models some node runs with / without MIG */
} Sched;

int sched_init(Sched *s, Cluster *c, PlaceCtx *ctx, const SchedConfig *cfg, size_t n_shapes);
void sched_free(Sched *s);

/* Queue a waiting job (not running); the scheduler keeps the pointer until the job
 * starts (a SCHED_START decision) or is taken out with sched_dequeue. */
int sched_enqueue(Sched *s, SchedJob *j);
void sched_dequeue(Sched *s, SchedJob *j);
size_t sched_queue_len(const Sched *s);

/* One cycle at now over the queue and the running jobs (a pointer array the caller
 * owns: every job holding an allocation). Decisions are appended to out. After it,
 * s->order[0..n_order) holds the jobs still waiting, in the order the cycle saw them.
 * 0 or -ENOMEM.
 *
 * On -ENOMEM the cycle stopped part-way, and this holds, as on success: every change
 * it made that its caller must carry out is in out, and nothing it did not list was
 * applied. A job it started (out of the queue, its allocation applied to the cluster,
 * counted for its team) has its SCHED_START; a job it marked stopping, its
 * SCHED_PREEMPT; a move it made (the replacement's allocation applied), its SCHED_MOVE;
 * a GPU it drained or undrained for whole GPUs wanted, its SCHED_DRAIN or SCHED_UNDRAIN
 * (the GPU a move empties is marked draining with the move: a mark only the placer
 * reads, which the SCHED_MOVE stands for). A start, a stop or
 * a move the failure interrupted was taken back whole, or never begun: the room for
 * its decision is made before it is applied. So the caller carries out every decision
 * in out, failure or not, and the core and the caller agree on who holds what. What
 * may be left half done is the core's own bookkeeping, which the next cycle builds
 * again: reservations, claims, the waiting jobs' reasons, the placer's memo. (Under a
 * no-gang policy a job may hold some of its workers while it waits, as on success; no
 * decision names those.) */
int sched_cycle(Sched *s, int64_t now_ms, SchedJob **running, size_t n_running,
                SchedDecisions *out);

/* The waiting jobs in queue order now (arrivals since the last cycle included), into
 * s->order[0..n_order); returns n_order, or -ENOMEM. */
int sched_order(Sched *s);

/* The key that orders a job among the jobs of its bucket (and among teams of equal fair
 * share): its submission time, or where it was moved. */
double sched_queue_key(const SchedJob *j);
/* Move a queued job just before (or after) another queued job of the same bucket (the
 * same class and team): its key becomes one between that job and its neighbour. 0, or
 * -EINVAL when they are not both queued in one bucket, or -ENOMEM. */
int sched_move(Sched *s, SchedJob *j, const SchedJob *anchor, bool after);

/* The place (1 = next) sched_order would give a queued job that was submitted after
 * every other job of its class and fair-share group (a new submission), counted from
 * the buckets without building the order. */
uint32_t sched_position_newest(Sched *s, const SchedJob *j);

/* The job stopped at now (finished, failed, or preempted and past its grace): count its
 * usage up to now and release what it holds. The caller then queues it again or
 * forgets it. */
void sched_release(Sched *s, SchedJob *j, int64_t now_ms);

/* A moved job's replacement is ready: release what it held before the move. */
void sched_move_done(Sched *s, SchedJob *j);
/* Its replacement could not start: it keeps what it held before the move and lets the
 * replacement's allocation go (MIG layouts kept). */
void sched_move_abort(Sched *s, SchedJob *j);

void sched_decisions_free(SchedDecisions *d);
