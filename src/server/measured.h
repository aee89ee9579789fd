/* measured.h: what the GPUs' own readings say of a job's run, for the chargeback's
 * measured busy GPU-hours beside the held ones (docs/api.md, GET /usage). Each
 * heartbeat's busy readings (gpusample.h) are folded into the running jobs on that
 * node: for each worker, the GPU-equivalent milliseconds that had a reading and those
 * its GPUs were busy, since its allocation was last charged. A whole GPU counts its
 * busy share; an MPS share the GPU's busy share in proportion to what it holds of what
 * is held; a MIG instance has no busy reading on most drivers and is not measured. The
 * usage segment takes the sums when it closes (server_usage_segment). */
#pragma once

#include "server/state.h"

typedef struct JobMeasure {
    int64_t last_ms; /* the reading before, 0: none yet */
    double measured_ms, busy_ms;
} JobMeasure;

/* Fold the readings node's agent just sent (NodeState.samples) into the jobs running
 * there. [lock] */
void measured_fold(Server *s, uint32_t node, int64_t now_ms);

/* Worker w's sums since j's allocation was last charged, into u. */
void measured_into(const ServerJob *j, size_t w, StoreUsage *u);

/* j's allocation was charged up to now: the sums start again. */
void measured_reset(ServerJob *j);
