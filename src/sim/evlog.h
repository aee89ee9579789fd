/* evlog.h: the simulator's event log (--events): one JSON object per line for every
 * state change, so anyone can recheck the reported figures from it. Lines carry the
 * run's policy and seed; each run writes into its own buffer. */
#pragma once

#include "core/cluster.h"
#include "core/place.h"
#include "util/buf.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct EvLog {
    bool on;
    Buf *out;
    const char *policy;
    uint64_t seed;
} EvLog;

/* "reconfigure" lines for the placement's MIG changes and a "start" line per worker;
 * with pl NULL, a "fail" line with the reason. */
void evlog_placement(EvLog *ev, const Cluster *c, int64_t t_ms, const char *job,
                     const Placement *pl, const Buf *why);
/* One line per worker of an applied placement: type "start", "finish" or "preempt". */
void evlog_workers(EvLog *ev, const Cluster *c, int64_t t_ms, const char *type, const char *job,
                   const Placement *pl);
/* The MIG changes of a placement, as "reconfigure" lines. */
void evlog_reconfig(EvLog *ev, const Cluster *c, int64_t t_ms, const char *job,
                    const Placement *pl);
/* A line about a job alone ("submit", "unschedulable", ...), with an optional reason. */
void evlog_job(EvLog *ev, int64_t t_ms, const char *type, const char *job, const char *reason);
/* -ENOMEM when a line could not be written. */
/* A node coming or going: node-start, node-up, node-release, node-drain, spot-notice,
 * node-gone. */
void evlog_node(EvLog *ev, const Cluster *c, int64_t t_ms, const char *type, uint32_t node);
int evlog_error(const EvLog *ev);
