/* tracegen.h: synthetic workloads. A mix (YAML, docs/trace-gen.md) describes the work
 * a fleet sees: long-running inference services sized from their model, gang training
 * drawn from the Philly job table, batch jobs and interactive notebooks, each entry with
 * a Poisson arrival rate. tracegen_generate turns a mix, a seed and a horizon into jobs,
 * deterministically: the only randomness is util/rng, one stream per entry seeded from
 * the seed and the entry's name, and no clock is read. tracegen_write_csv writes the
 * jobs as the job CSV of docs/job-files.md, which spec_parse_jobs_csv reads back.
 *
 * Errors follow the spec readers: "mix.yaml:12: field 'team': ...", one per line, -EINVAL
 * for bad input, -ENOENT when a file the mix needs is absent. Output parameters are
 * written only on success. */
#pragma once

#include "spec/spec.h"
#include "util/buf.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Where training entries find the Philly job table unless they say otherwise; relative
 * paths are taken from the current directory (the repository root). */
#define TRACEGEN_PHILLY_DEFAULT "../shared/traces/philly/philly_jobs_82k.csv"

/* A generated trace may hold at most this many jobs (a guard against a typo in a rate). */
#define TRACEGEN_MAX_JOBS 5000000u

/* The bounds of a user's duration estimate around the true duration (before rounding up
 * to whole minutes): estimate / true is in [TRACEGEN_ESTIMATE_MIN, TRACEGEN_ESTIMATE_MAX]. */
#define TRACEGEN_ESTIMATE_MIN 0.5
#define TRACEGEN_ESTIMATE_MAX 2.0

/* An exponential duration clipped to [min_ms, max_ms]. */
typedef struct TraceMixTime {
    int64_t mean_ms; /* > 0 */
    int64_t min_ms;  /* >= 1 s */
    int64_t max_ms;  /* >= min_ms; INT64_MAX = no clip */
} TraceMixTime;

typedef struct TraceMixTeam {
    char *name;
    char **projects; /* may be empty */
    size_t n_projects;
    size_t line;
} TraceMixTeam;

/* One entry of a section: a stream of jobs named <name>-<n>. Fields that do not apply
 * to the entry's kind keep their zero or default values. */
typedef struct TraceMixEntry {
    char *name; /* also the workload class */
    size_t line;
    uint8_t kind;     /* JobKind: the section it came from */
    size_t team;      /* index into TraceMix.teams */
    char *project;    /* NULL: each job takes one of the team's projects at random */
    uint8_t priority; /* Priority */
    int64_t rate_milli_per_hour;
    /* jobs arrive in [from_ms, until_ms) of the horizon: a rollout or a backlog dumped at
     * the start is a burst at a high rate (until_ms INT64_MAX: to the horizon's end) */
    int64_t from_ms, until_ms;
    TraceMixTime time;   /* inference: lifetime; batch, interactive: duration */
    uint16_t busy_milli; /* BUSY_ALL when not given */
    char **gpu_models;
    size_t n_gpu_models;
    uint32_t cpu_milli;  /* per instance; training: per GPU */
    uint64_t memory_mib; /* per instance; training: per GPU */
    bool preemptible;
    int64_t checkpoint_interval_ms, checkpoint_grace_ms, checkpoint_cost_ms; /* 0 = none */
    /* the GPU request of batch and interactive entries (inference: REQ_MEMORY, computed) */
    uint8_t req; /* ReqKind */
    uint16_t gpus;
    char *mig;
    uint64_t gpu_memory_mib;
    uint16_t fraction_milli;
    /* inference */
    int64_t params_milli_b; /* model parameters, thousandths of a billion */
    int64_t bytes_per_param_milli;
    uint64_t kv_cache_mib;
    bool has_overrun;       /* peak_memory_overrun given: write peak_memory_mib */
    uint16_t overrun_milli; /* share of instances whose peak exceeds the size */
    /* training */
    char *philly;       /* the Philly table's path */
    size_t philly_line; /* where it was given, or the entry's line */
    uint32_t min_gpus, max_gpus;
    int64_t duration_scale_milli;
    int64_t max_duration_ms; /* INT64_MAX = no clip */
} TraceMixEntry;

typedef struct TraceMix {
    char *file; /* the name messages start with */
    TraceMixTeam *teams;
    size_t n_teams;
    TraceMixEntry *entries; /* in file order: inference, training, batch, interactive sections */
    size_t n_entries;
} TraceMix;

/* Read a mix. name: what messages start with. On success *ret owns everything. */
int tracegen_mix_parse(const char *text, size_t len, const char *name, TraceMix *ret, Buf *err);
int tracegen_mix_load(const char *path, TraceMix *ret, Buf *err);
void tracegen_mix_free(TraceMix *m); /* accepts a zeroed TraceMix */

/* GPU memory of a model server: params x bytes_per_param x 1.2, in MiB rounded up, plus
 * the KV cache. params in thousandths of a billion, bytes per parameter in thousandths. */
uint64_t tracegen_model_memory_mib(int64_t params_milli_b, int64_t bytes_per_param_milli,
                                   uint64_t kv_cache_mib);

/* A gang of n GPUs as equal workers of at most 8: the fewest workers from ceil(n/8) up
 * that divide n (16 = 2x8, 12 = 2x6, 24 = 3x8, 9 = 3x3), as the Philly reader does. */
void tracegen_gang_split(uint32_t n_gpus, uint32_t *ret_workers, uint16_t *ret_gpus);

/* Generate the jobs that arrive in [0, horizon_ms), sorted by submit time, then id.
 * The same mix, seed and horizon give the same jobs; a longer horizon extends a shorter
 * one's trace (each entry's stream is drawn job by job). Training entries read their
 * Philly tables here: -ENOENT with a message naming the mix line when one is absent.
 * *ret is overwritten on success: pass an empty list. */
int tracegen_generate(const TraceMix *m, uint64_t seed, int64_t horizon_ms, JobList *ret, Buf *err);

/* Append the jobs to out as a job CSV (header first): the columns the generator fills
 * (id, submit_s, duration_s, duration_estimate_s, team, project, kind, priority, class,
 * workers, gpus, gpu_memory_mib, gpu_fraction, mig, gpu_model, tiers, preemptible,
 * checkpoint_interval_s, checkpoint_cost_s, busy, peak_memory_mib, cpu_milli,
 * memory_mib), plus topology, topology_required, fabric and checkpoint_grace_s when a
 * job uses them. Command and env have no column. 0, or -ENOMEM. */
int tracegen_write_csv(const JobList *l, Buf *out);
