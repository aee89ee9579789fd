/* tenancy.h: teams as the scheduler sees them: a guaranteed quota, a burst limit and a
 * fair-share weight (GPU-equivalents, counted in GPU_UNITS), what each team holds now,
 * which of its running work is inside the guarantee and which is borrowed, and its
 * decayed usage for fair-share ordering.
 *
 * Work inside a team's guarantee is guaranteed; above it, up to the burst limit, it is
 * borrowed and may be reclaimed. Which running jobs are guaranteed is decided afresh
 * each cycle, oldest first, so when a guaranteed job ends the team's next job moves
 * into the guarantee. Fair share follows Slurm's classic factor: a team's usage decays
 * with a half-life, and teams are ordered by their share of the decayed usage over
 * their share of the weights. A cluster without teams has no quotas: every job is
 * guaranteed and fair share is flat.
 *
 * A team may also have a GPU-hour budget per calendar month. The core keeps no clock
 * or calendar: the caller counts the month's use and says when a team is over. */
#pragma once

#include "core/cluster.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TEAM_NONE          UINT32_MAX
#define TENANCY_REASON_LEN 160

typedef struct TeamState {
    double guaranteed_units; /* GPU_UNITS */
    double burst_units;
    double weight;
    double held_units;      /* allocated now */
    double guaranteed_held; /* the part of held inside the guarantee */
    double usage;           /* decayed usage, GPU_UNITS x ms */
    /* The monthly GPU-hour budget. The caller counts what the team used this calendar
     * month and calls tenancy_set_budget; while over_budget is set, the team's waiting
     * non-production work stays waiting with budget_reason as its reason. */
    bool over_budget;
    double budget_gpu_hours;         /* 0: none */
    int64_t month_micro_hours;       /* used this month, ended and running work (1e-6 h) */
    int64_t month_ended_micro_hours; /* the caller's tally of the runs ended this month */
    char budget_reason[TENANCY_REASON_LEN];
} TeamState;

typedef struct Tenancy {
    TeamState *teams; /* the cluster's teams, then one for work without a known team */
    size_t n_teams;   /* cluster teams + 1 */
    bool quotas;      /* the cluster has teams: guarantees and bursts apply */
    int64_t half_life_ms;
    int64_t last_ms;
    int64_t month_start_ms; /* the caller's: the month its budget counts are of (0: none yet) */
} Tenancy;

/* Teams from the cluster spec; work without a known team gets no guarantee and may
 * borrow up to the whole cluster. */
int tenancy_init(Tenancy *t, const Cluster *c, int64_t half_life_ms);
void tenancy_free(Tenancy *t);

/* The index used for team (a cluster team index, or TEAM_NONE). */
uint32_t tenancy_slot(const Tenancy *t, uint32_t team);

/* Decay usage to now and add what each team held since the last call. */
void tenancy_advance(Tenancy *t, int64_t now_ms);

/* What `units` held over [from_ms, to_ms) add to a decayed usage at now_ms: units times
 * the integral of 2^(-(now - t) / half_life) over the span (no half-life: no decay), the
 * rule tenancy_advance counts by. A restarted server rebuilds usage from its history
 * with it. */
double tenancy_decayed(double units, int64_t from_ms, int64_t to_ms, int64_t now_ms,
                       int64_t half_life_ms);

/* Fair-share key of a team: its share of the decayed usage over its share of the
 * weights. Smaller goes first. */
double tenancy_fair_key(const Tenancy *t, uint32_t slot);

/* Whether a job of units more fits inside the team's guarantee / burst limit now. */
bool tenancy_within_guarantee(const Tenancy *t, uint32_t slot, double units);
bool tenancy_within_burst(const Tenancy *t, uint32_t slot, double units);
/* How far the team would be over its burst limit with units more (<= 0: within it). */
double tenancy_over_burst(const Tenancy *t, uint32_t slot, double units);

/* Record a team's use of its monthly budget (0 GPU-hours: no budget): it is over budget
 * once it used all of it, and the reason its waiting work gives says so in numbers. */
void tenancy_set_budget(Tenancy *t, uint32_t slot, const char *team, int64_t used_micro_hours,
                        double budget_gpu_hours);
