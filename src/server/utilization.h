/* utilization.h: the last hour of GPU utilisation, kept in memory by the server for
 * the portal's chart: every UTIL_PERIOD_MS the scheduler thread samples, per GPU
 * model, the GPU-equivalents allocated to jobs and those busy (allocated on ready
 * nodes to running workers, as /metrics counts them) into a ring of UTIL_SLOTS
 * samples, and beside them what the GPUs' agents measured (gpusample.h): busy
 * GPU-equivalents (the reporting GPUs' busy_pct / 100, summed), how many GPUs reported
 * it, and memory used. Nothing is stored: a restart starts the hour afresh. */
#pragma once

#include "server/state.h"

#include <stddef.h>
#include <stdint.h>

#define UTIL_PERIOD_MS 10000
#define UTIL_SLOTS     360 /* an hour of samples */

typedef struct Utilization {
    size_t n_models;
    size_t head;  /* the slot the next sample goes to */
    size_t count; /* slots filled, up to UTIL_SLOTS */
    int64_t t_ms[UTIL_SLOTS];
    double *alloc, *busy; /* [slot * n_models + model], GPU-equivalents */
    /* [slot * n_models + model], measured: busy GPU-equivalents, GPUs that reported a
     * busy share (0: none did, measured is then unknown, not idle), MiB used */
    double *measured, *measured_gpus, *memory_used_mib;
} Utilization;

/* One sample's measured columns, n_models values each (utilization_push). */
typedef struct UtilMeasured {
    const double *busy, *gpus, *memory_used_mib;
} UtilMeasured;

/* An empty ring for n_models models. 0 or -ENOMEM. */
int utilization_init(Utilization *u, size_t n_models);
void utilization_free(Utilization *u);
/* Add a sample (alloc and busy: n_models values each; measured NULL: nothing was
 * measured), dropping the oldest when full. */
void utilization_push(Utilization *u, int64_t t_ms, const double *alloc, const double *busy,
                      const UtilMeasured *measured);
/* The samples taken at or after since_ms: their count, and in *ret_first the slot of
 * the oldest of them (walk on with (slot + 1) % UTIL_SLOTS). */
size_t utilization_since(const Utilization *u, int64_t since_ms, size_t *ret_first);

/* Called by the scheduler thread with s->lock held, as often as it likes: samples the
 * server when UTIL_PERIOD_MS passed since the last sample (or the clock went back),
 * creating s->util at the first call. Out of memory skips the sample. */
void utilization_sample(Server *s, int64_t now_ms);
/* Free s->util (server_close). */
void utilization_destroy(Utilization *u);
