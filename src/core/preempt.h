/* preempt.h: choosing what to preempt so that a waiting job fits.
 *
 * Who may go (gpuorch, SCHED_PREEMPT_QUOTA): running work that has run its minimum time
 * (for a production job any running work: production never waits for a minimum run time,
 * its victims get their grace and go), never production; borrowed work of another team first
 * (borrowing makes work reclaimable, preemptible or not, as Kueue reclaims within a cohort; what
 * cannot checkpoint loses its progress), then preemptible work of a lower class, the job's own
 * team's included; never a team's guaranteed work for a normal or low job of another
 * team. A job never reclaims its own team's borrowed work of its class: the team would
 * only swap one job for another (the newer one counted inside the guarantee, the older
 * borrowed), and two of its gangs took turns preempting each other, losing up to half an
 * hour of 64 GPUs each time (mix-demo seed 4: 52 GPU-hours lost, 15 after). Among
 * the sets that make room, the one that loses the least work wins: GPU-equivalents
 * times the time since each victim's last checkpoint, then the fewest victims, then the
 * shortest wait (the longest grace among them). A gang goes whole. A job its own
 * team's burst limit holds back preempts nothing for room, but its team's lower classes
 * yield it their quota (preempt_plan_team).
 *
 * kube-scheduler (SCHED_PREEMPT_PRIORITY): any running work of a lower priority class;
 * the node whose victims have the lowest highest priority, then the fewest victims.
 * Tiresias (SCHED_PREEMPT_TIRESIAS): work in the lower queue, the latest submitted first.
 *
 * A one-worker job is tried node by node, three ways on each: victims taken cheapest
 * first until it fits, cheapest per GPU freed first, and each victim alone; those that
 * turn out unneeded are spared, and the best set over all counts. A gang is tried on
 * the whole cluster, cheapest first. The cluster is left as it was. */
#pragma once

#include "core/sched.h"

/* Whether v has run long enough to be stopped for j. The minimum run time keeps work
 * from being stopped as soon as it started, for another job that could as well wait a
 * few minutes; a production server cannot: on a cluster a training backlog filled in
 * its first seconds, a rollout a minute later waited out the victims' 5 minutes (260-326
 * s at p99 over examples/mix-coldstart.yaml, where kube-scheduler starts it in 30 s). So
 * for production the victims get their grace and go, however young. */
bool preempt_old_enough(const Sched *s, int64_t now_ms, const SchedJob *j, const SchedJob *v);

/* Victims to stop so that j fits; *ret (malloc'd, NULL when none) and *ret_n. */
int preempt_plan(Sched *s, int64_t now_ms, const SchedJob *j, SchedJob **running, size_t n_running,
                 SchedJob ***ret, size_t *ret_n);

/* For a job its team's burst limit holds back (gpuorch): victims among its own team's
 * preemptible work of a lower class, past its minimum run time (preempt_old_enough),
 * never production, that
 * give back at least need_units of the team's quota and after which j fits. The team
 * keeps its share; only which of its jobs runs changes, by class, as a queue's own
 * lower-priority work yields in KAI and in Kueue (withinClusterQueue: LowerPriority).
 * Without it a team at its limit hands every unit it frees to its smallest waiting job:
 * 1-GPU low trials took it 1,055 times in a day while its 8-GPU normal gangs waited 40
 * hours (mix-demo seed 1). With it, over 20 days of each examples/mix-*.yaml, the high
 * class's p99 wait fell from 18 hours to 9 and 8 and the low class's rose from 11 and 10
 * to 25 and 24; utilisation fell 0.3 points, mostly as the team's high fine-tuning
 * (busy 0.9) now comes before its normal pretraining (0.95). Cheapest lost work per unit
 * first, then those not needed spared, most expensive first. None when no such set
 * exists. */
int preempt_plan_team(Sched *s, int64_t now_ms, const SchedJob *j, double need_units,
                      SchedJob **running, size_t n_running, SchedJob ***ret, size_t *ret_n);
