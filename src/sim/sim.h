/* sim.h: the simulator's inputs and results. A run is one (policy, seed) over a
 * cluster and a trace; runs are independent, so several run on threads side by side
 * and their results are reported in a fixed order, byte-identical for the same
 * inputs. Time is simulated (milliseconds from the first submission); the wall clock
 * only drives the progress bar. */
#pragma once

#include "core/cluster.h"
#include "core/place.h"
#include "core/sched.h"
#include "spec/spec.h"
#include "util/buf.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum SimMode { SIM_PACKING, SIM_TIME } SimMode;

typedef enum TraceFormat {
    TRACE_AUTO,
    TRACE_ALIBABA2023, /* openb_pod_list_*.csv */
    TRACE_PHILLY,      /* philly_jobs_82k.csv */
    TRACE_GPUORCH,     /* our job CSV / YAML / JSON */
} TraceFormat;

typedef enum QueueOrder {
    ORDER_FIFO,     /* by submission, no preemption */
    ORDER_TIRESIAS, /* two-dimensional least attained service, preemptive */
    ORDER_PRIORITY, /* gpuorch: class, fair share, age; quotas, backfill, preemption */
    ORDER_KUBE,     /* kube-scheduler: priority then age, priority preemption */
} QueueOrder;

/* One entry of --policy: a placement policy and a queue order ("best-fit+tiresias"). */
typedef struct SimPolicy {
    char name[64];
    const Policy *place;
    QueueOrder order;
    SchedConfig sched; /* what the order means for the core scheduler */
} SimPolicy;

/* Read a trace into jobs (names, requests, submit and duration). */
int trace_load(const char *path, TraceFormat fmt, JobList *ret, Buf *err);
/* The same over text already in memory (NUL-terminated at text[len]); name is what
 * messages call it. */
int trace_parse(const char *text, size_t len, const char *name, TraceFormat fmt, JobList *ret,
                Buf *err);
const char *trace_format_name(TraceFormat f);
int trace_format_from_name(const char *s);

int sim_policy_parse(const char *s, SimPolicy *ret, Buf *err);
/* The core scheduler's configuration a queue order stands for. */
void sched_config_for(QueueOrder o, SchedConfig *ret);
const char *queue_order_name(QueueOrder o);

typedef struct SimOptions {
    SimMode mode;
    int64_t reconfig_delay_ms;      /* MIG reconfiguration takes this long (default 10 s) */
    int64_t move_delay_ms;          /* a moved server's replacement loads this long (60 s) */
    bool oracle_estimates;          /* hand the scheduler true durations as estimates */
    int64_t min_runtime_ms;         /* before a job may be preempted (default 5 min) */
    int64_t half_life_ms;           /* fair-share decay (default 1 h) */
    int64_t grace_ms;               /* a preempted job's grace when its spec gives none (30 s) */
    int64_t oom_after_ms;           /* a job too big for its slice fails this long after start */
    int64_t guarantee_tolerance_ms; /* in-guarantee work may wait this long (2 min) */
    int64_t window_from_ms, window_to_ms; /* --window: measure utilisation here too */
    double tune_ratio;                    /* packing: arrived demand to reach, of capacity (1.3) */
    bool events;                          /* collect the per-run event log (JSON lines) */
    size_t timeline_points; /* time mode: samples kept for the timeline (default 600) */
} SimOptions;

/* ---- packing mode (the FGD protocol) ---- */

#define PACK_LEVELS 131 /* arrived demand 0..130 % of capacity */

typedef struct PackResult {
    /* GPU demand placed (what the pods asked for), % of capacity; NaN where no event
     * fell in the bucket */
    double alloc_pct[PACK_LEVELS];
    double held_pct[PACK_LEVELS]; /* GPU capacity held, % (above alloc when a policy
                                     gives more than asked) */
    double frag_pct[PACK_LEVELS]; /* fragmented GPU capacity, % of all GPUs */
    size_t pods, placed, failed;
    double final_alloc_pct;
} PackResult;

/* ---- time mode ---- */

typedef struct Dist {
    double mean, p50, p95, p99, max;
    size_t n;
} Dist;

typedef struct GroupResult {
    char *name;
    Dist queue_delay_s, jct_s;
    size_t finished;
    double busy_gpu_s, alloc_gpu_s; /* GPU-equivalent seconds */
    /* teams of the cluster spec: their guarantee, and the share of the run it was met
     * (no in-guarantee work of the team waited past the tolerance); NaN otherwise */
    double guaranteed_gpus;
    double guarantee_met_pct;
} GroupResult;

typedef struct TimelinePoint {
    double t_s;
    double utilization_pct, allocation_pct;
    uint32_t queued, running;
} TimelinePoint;

typedef struct TimeResult {
    double utilization_pct, allocation_pct;
    /* the same while the waiting work could fill every idle GPU, and how long that was */
    double saturated_utilization_pct, saturated_allocation_pct, saturated_s;
    /* the same inside --window (from the first submission), NaN without one */
    double window_utilization_pct, window_allocation_pct;
    Dist queue_delay_s, jct_s;
    double makespan_s, jobs_per_hour;
    size_t submitted, finished, never_placed, unschedulable, preemptions, reconfigurations;
    size_t oom_failures, oom_repeats, drains;
    size_t server_moves;         /* servers moved off nearly empty partitioned GPUs */
    double lost_gpu_hours;       /* work lost to preemption, interruption or OOM (since the
                                  * last checkpoint) */
    double checkpoint_gpu_hours; /* GPUs held while checkpointing */
    /* the bill: node-hours of present nodes (starting, up, leaving) x GPUs x the pool's
     * price per GPU-hour, over the run (first submission to the last change) */
    bool elastic;              /* some node came or went (autoscaling, interruptions):
                                * capacity figures are over present GPUs */
    double capacity_gpu_hours; /* GPU-hours of present nodes */
    double cost_usd;
    double cost_by_tier_usd[TIER_COUNT];
    double on_demand_cost_usd; /* the same node-hours at the on-demand price */
    double savings_pct;        /* 1 - cost / on-demand cost, %; NaN without a price */
    size_t interruptions;      /* spot notices */
    size_t nodes_started;      /* by the autoscaler */
    size_t moved_to_reserved;  /* jobs moved back to reserved or owned capacity */
    size_t production_on_spot; /* production jobs that ran on a spot node: must be 0 */
    size_t unsaved_on_spot;    /* jobs not preemptible or without a checkpoint that ran on a
                                * spot node (job_spec_spot_ok): must be 0 */
    GroupResult by_priority[PRIO_COUNT];
    GroupResult *by_team;
    size_t n_teams;
    TimelinePoint *timeline;
    size_t n_timeline;
} TimeResult;

typedef struct RunResult {
    uint64_t seed;
    SimMode mode;
    PackResult pack;
    TimeResult time;
    Buf events; /* JSON lines, when asked for */
} RunResult;

void run_result_free(RunResult *r);

/* What every run of one input shares, computed once by sim_prepare. */
typedef struct SimPrep {
    Request *reqs;        /* per job, resolved against the cluster */
    char **unschedulable; /* per job: why no node of the cluster could ever run it, or NULL */
    uint32_t *by_name;    /* job indices sorted by name (the FGD protocol's pod order) */
    uint32_t *node_by_name;
    size_t n_shapes;         /* distinct request shapes with a score-cache slot */
    Mix expected;            /* every job's shape, weighted by its workers: what policies get */
    Mix typical;             /* its common shapes (mix_typical): fragmentation is reported
                                against these, as the FGD paper does */
    uint64_t capacity_milli; /* GPUs x 1000 */
    char **team_names;       /* distinct teams of the jobs, sorted */
    size_t n_teams;
    uint32_t *team_of; /* per job: index into team_names */
} SimPrep;

/* Inputs shared read-only by every run of one `gpuorch sim`. */
typedef struct SimInput {
    const Cluster *cluster; /* each run works on its own clone */
    const JobList *jobs;
    const char *trace_name; /* file base name, e.g. openb_pod_list_default */
    SimOptions opt;
    SimPrep prep;
    uint64_t *progress; /* optional: bumped (atomically) per pod or event handled */
} SimInput;

int sim_prepare(SimInput *in);
void sim_input_free(SimInput *in);

int sim_run_packing(const SimInput *in, const SimPolicy *p, uint64_t seed, RunResult *ret);
int sim_run_time(const SimInput *in, const SimPolicy *p, uint64_t seed, RunResult *ret);

/* Statistics helpers. */
void dist_from(double *values, size_t n, Dist *ret); /* sorts values */
double mean_of(const double *v, size_t n);
double stddev_of(const double *v, size_t n);
