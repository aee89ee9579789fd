/* consolidate.h: moving model servers off nearly empty partitioned GPUs so that the GPUs
 * come back whole, as KAI's consolidation and the Kubernetes descheduler re-place
 * running pods to undo fragmentation.
 *
 * Servers come and go by the hour; the holes they leave in partitioned GPUs are filled
 * only as fast as new servers arrive, so GPUs that hold one or two small slices keep
 * whole-GPU training waiting (on mix-demo seed 1, at 10 h, 17 A100s held inference that
 * fits on 9). Draining (sched.c) stops new slices landing on such a GPU but waits for
 * its servers to end. Consolidation moves them: while whole GPUs are wanted, a
 * partitioned or shared GPU holding at most CONSOLIDATE_MAX_USED, whose every job is
 * movable (a service that can start a replacement before it stops: the caller's
 * SchedJob.movable), has run its minimum time since it started or last moved, and is
 * not being stopped, is emptied when each of its jobs fits in room that other
 * partitioned or shared GPUs already have (never a whole GPU cut for it, never a node
 * reserved or claimed for another job). The emptiest GPUs go first.
 *
 * A move is make-before-break: the replacement's placement is applied at once (j->pl)
 * while the old one (j->moved_from) stays held until the caller reports the replacement
 * ready (sched_move_done); the emptied GPU is drained meanwhile so nothing new lands on
 * it. A replacement gets at least the GPU memory the server has now. All of a GPU's jobs
 * move, or none do.
 *
 * Over 20 days of each examples/mix-*.yaml (bench/RESULTS.md) utilisation rose from 78.5
 * to 80.0% (mix-demo) and from 79.8 to 80.7% (mix-backlog), for about 160 and 150 moves
 * in a day's trace. Fewer free slices are left for new servers: a production server
 * that finds none preempts training, so its worst p99 wait rose from 10 s to 30 s (a
 * victim's grace and a MIG change). Measured before the memory rule, emptying GPUs
 * that hold up to 3/7 gained 0.45 and 0.2 points less; any GPU whose jobs can all move,
 * 0.3 and 0.2 more for four times the moves. */
#pragma once

#include "core/sched.h"

#define CONSOLIDATE_MAX_USED (GPU_UNITS * 4 / 7)

/* Empty up to `want` GPUs; the jobs moved (their pl already the replacement, moving set)
 * into *ret (malloc'd, NULL when none) and *ret_n. 0 or -ENOMEM. */
int consolidate(Sched *s, unsigned want, SchedJob **running, size_t n_running, int64_t now_ms,
                SchedJob ***ret, size_t *ret_n);
