/* autoscale.h: pools that grow and shrink. One pass turns the jobs that wait for room
 * into nodes to start, idle nodes into nodes to release, and now and then moves a
 * preemptible job off paid elastic capacity when reserved or owned capacity has room
 * for it. Pure like the rest of the core: the caller (the simulator, the server) gives
 * the cluster, the queue and the time, and carries out the decisions.
 *
 * The rules (issue 6):
 *  - only jobs that wait for room count (not those held by their team's burst limit or
 *    budget, nor those for which preemption is making room);
 *  - a job goes to the cheapest pool that may run it (its tier mask, GPU models,
 *    fabric) and whose nodes can hold it (a gang in one pool); nodes already starting
 *    are filled first, as a pass plans every waiting job from scratch;
 *  - preemptible jobs that checkpoint look at spot pools first; other jobs never scale
 *    a spot pool (job_spec_spot_ok: their tier mask already excludes spot, and a job
 *    whose mask is spot alone is refused when its request is built). When the spot
 *    pools cannot hold the job (at max_nodes) or it has waited past its max_wait, it
 *    falls back to the other tiers;
 *  - a pool below min_nodes (a spot node was interrupted) gets its nodes back;
 *  - an up node idle for the pool's idle time is released while its pool keeps more
 *    than min_nodes and no waiting job wants that pool;
 *  - when no job waits for reserved or owned capacity, a preemptible checkpointing job
 *    alone on its on-demand or spot nodes (of an autoscaled pool) that fits into the
 *    free reserved or owned capacity is moved: it is preempted with its checkpoint and
 *    its nodes leave once empty. At most max_moves per pass, each job at most once,
 *    only after it ran move_min_run_ms and with move_min_left_ms left by its estimate
 *    (or no estimate), so moves stay few and worth their checkpoint. */
#pragma once

#include "core/cluster.h"
#include "core/sched.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Bounds of the derived checkpoint interval. */
#define AUTOSCALE_CKPT_MIN_MS (5 * 60 * INT64_C(1000))
#define AUTOSCALE_CKPT_MAX_MS (6 * 3600 * INT64_C(1000))

typedef struct AutoscaleConfig {
    int64_t max_wait_ms;      /* a spot-first job's wait before other tiers scale for it */
    unsigned max_moves;       /* moves back to reserved or owned capacity per pass; 0: none */
    int64_t move_min_run_ms;  /* a job runs this long before it is moved */
    int64_t move_min_left_ms; /* and has this much left by its estimate */
} AutoscaleConfig;

/* max_wait 15 min, one move per pass after 10 min of running with 30 min left. */
void autoscale_config_default(AutoscaleConfig *cfg);

/* A job as the autoscaler sees it: the scheduler's job and what the caller knows. */
typedef struct AutoscaleJob {
    const SchedJob *j;
    int64_t waiting_since_ms; /* waiting: when it last joined the queue */
    int64_t max_wait_ms;      /* its own max_wait; 0: the config's */
    bool checkpoints;         /* saves its work now and then: job_spec_checkpoints */
    bool moved;               /* running: moved once already */
} AutoscaleJob;

typedef enum AutoscaleKind {
    AS_START,   /* start the absent node `node`: starting now, up after its startup */
    AS_RELEASE, /* the idle node `node` goes (absent) */
    AS_DRAIN,   /* the node `node` is leaving: nothing new lands; absent once empty */
    AS_MOVE,    /* preempt job `job` (with its checkpoint) and queue it again */
} AutoscaleKind;

typedef struct AutoscaleDecision {
    uint8_t kind;
    uint32_t node;
    uint32_t job; /* AS_MOVE: SchedJob.id */
} AutoscaleDecision;

typedef struct AutoscaleDecisions {
    AutoscaleDecision *d;
    size_t n, cap;
    int64_t wake_ms; /* the next time a pass has something to do by the clock alone
                      * (an idle time or a max_wait running out); INT64_MAX: none */
} AutoscaleDecisions;

void autoscale_decisions_free(AutoscaleDecisions *d);

/* A node being planned on: what it has left. */
typedef struct AutoscaleBin {
    uint32_t node, pool;
    uint8_t free_whole;  /* whole GPUs not handed out */
    uint32_t part_units; /* compute left on the GPU slices are taken from */
    uint32_t cpu_milli, memory_mib;
} AutoscaleBin;

typedef struct Autoscaler {
    AutoscaleConfig cfg;
    int64_t *idle_since_ms; /* per node: since when an up node holds nothing; -1 */
    size_t n_nodes;
    /* per pass, per pool */
    uint32_t *kept;     /* starting or up nodes */
    uint32_t *absent;   /* absent nodes not yet planned to start */
    uint32_t *cursor;   /* where to look for the next absent node */
    bool *wanted;       /* a waiting job was planned onto it */
    uint32_t *by_price; /* pool indices, cheapest first */
    AutoscaleBin *bins; /* starting nodes and the nodes this pass starts */
    size_t n_bins, bins_cap;
    AutoscaleBin *saved; /* a copy to undo a job that does not fit */
    size_t saved_cap;
} Autoscaler;

int autoscale_init(Autoscaler *a, const Cluster *c, const AutoscaleConfig *cfg);
void autoscale_free(Autoscaler *a);

/* One pass at now. waiting: the queue in order; running: every job holding an
 * allocation. Decisions are appended to out (out->wake_ms is set); the caller carries
 * them out before the next pass: a started node is starting, a released one absent, a
 * drained one leaving. 0 or -ENOMEM. */
int autoscale_pass(Autoscaler *a, const Cluster *c, const AutoscaleJob *waiting, size_t n_waiting,
                   const AutoscaleJob *running, size_t n_running, int64_t now_ms,
                   AutoscaleDecisions *out);

/* Young/Daly: the checkpoint interval that loses the least to checkpoints and
 * interruptions together, sqrt(2 x cost x mean time between interruptions), within
 * [AUTOSCALE_CKPT_MIN_MS, AUTOSCALE_CKPT_MAX_MS]; 0 when there is no cost or no
 * interruption. */
int64_t autoscale_checkpoint_interval_ms(int64_t cost_ms, double interruptions_per_hour);
