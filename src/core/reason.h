/* reason.h: the sentence a waiting job is given, for what the scheduling cycle decided
 * about it (the placer words what it found on the nodes itself, place.h). Each names
 * the real cause with what a person can look up (the team and its numbers, the jobs
 * being preempted for it, the job that holds a reservation, by id, and the nodes) and
 * what would let the job run. Written into SchedJob.reason, cut at its end. */
#pragma once

#include "core/sched.h"

void reason_set(SchedJob *j, const char *text);

/* Its team is at its burst limit: what the team holds, the limit, what j needs. */
void reason_burst(Sched *s, SchedJob *j, uint32_t slot, double units);

/* Work is stopping to make room for j: "{what}: job 12 and job 15 (their grace ends in
 * about 20 s)". The stopping jobs are those of running nominated for j. */
void reason_victims(Sched *s, SchedJob *j, const char *what, SchedJob *const *running,
                    size_t n_running, int64_t now_ms);

/* j holds reservation ri: its nodes, and when they are expected to be free. */
void reason_holds(Sched *s, SchedJob *j, uint32_t ri, int64_t now_ms);

/* The room j could use is kept by reservation ri of another job. */
void reason_kept(Sched *s, SchedJob *j, uint32_t ri, int64_t now_ms);
