/* metering.h: what a run segment (one worker of one run, on one pool, for a span of
 * time) is metered at, what a node's counted capacity left idle, and the teams' use of
 * their monthly GPU-hour budgets.
 *
 * Exactness: a segment is held GPU_UNITS x ms (an integer), metered once in millionths
 * of a GPU-hour and millionths of a dollar, each rounded down. Chargeback rows, their
 * totals and the budgets all add up these integers, so any grouping of the same
 * segments gives the same totals, and nothing is rounded again before it is printed.
 * Rounding down also keeps a pool's allocations at or under its capacity metered the
 * same way, so the idle rest is never negative. */
#pragma once

#include "server/state.h"
#include "util/buf.h"

#include <stdint.h>

/* GPU_UNITS x ms in a millionth of a GPU-hour: 28000 x 3600000 / 1000000. */
#define METERING_UNIT_MS_PER_MICRO_HOUR INT64_C(100800)

typedef struct Meter {
    int64_t micro_hours;    /* GPU-equivalent hours x 1e6 */
    int64_t cost_micro_usd; /* dollars x 1e6 */
} Meter;

/* GPU_UNITS of a segment's GPU-equivalents (the store keeps them as a double, which
 * holds units / GPU_UNITS exactly enough to round back). */
int64_t metering_units(double gpu_equivalents);
/* units held for ms at price_micro_usd per GPU-hour. */
Meter metering_of(int64_t units, int64_t ms, int64_t price_micro_usd);
/* The same for `gpus` whole GPUs (a pool's capacity), without overflow for any window. */
Meter metering_capacity(int64_t gpus, int64_t ms, int64_t price_micro_usd);

/* Idle showback: a span of a node's counted capacity (nodespan.h) within a report's
 * window, and what the allocations on that node held inside it. Its idle is its
 * capacity less those allocations, each part of an allocation metered on its own
 * (rounded down), so the allocations inside a span never add up past its capacity and
 * idle + allocations inside = capacity, exactly. An allocation outside every span of
 * its node (it ran while the server was down, or on a node not counted) is use that
 * takes nothing from idle. */
typedef struct MeterSpan {
    const char *node;         /* allocations are matched to the span by node name */
    int64_t start_ms, end_ms; /* clipped to the window */
    int64_t gpus;
    int64_t price_micro_usd; /* per GPU-hour */
    Meter alloc;             /* the allocations on the node inside the span */
    size_t tag;              /* the caller's (what the span stands for) */
} MeterSpan;

/* Order spans by node, then start, as metering_spans_alloc needs them. The spans of one
 * node must not overlap (a node has one open span at a time). */
void metering_spans_sort(MeterSpan *spans, size_t n);
/* `units` held on `node` over [start_ms, end_ms) at price_micro_usd per GPU-hour: the
 * part inside each span of that node, metered, is added to the span's alloc. */
void metering_spans_alloc(MeterSpan *spans, size_t n, const char *node, int64_t units,
                          int64_t start_ms, int64_t end_ms, int64_t price_micro_usd);
/* The span's capacity (metering_capacity of its GPUs over its length) less its
 * allocations, each part never below zero. */
Meter metering_span_idle(const MeterSpan *sp);

/* The start of the UTC calendar month that now_ms falls in, in ms since the epoch. */
int64_t metering_month_start_ms(int64_t now_ms);

/* Budgets. All with s->lock held. */

/* A closed run segment was just written (lifecycle.c, finish_run): count it into its
 * team's month. */
void metering_segment_closed(Server *s, const StoreUsage *u);
/* Before each scheduling cycle: count the month from the store when it is new (at
 * startup, and when a month begins; budgets set through the API are read then too),
 * add what running jobs used this month so far, and mark the teams over budget. */
void metering_cycle(Server *s, int64_t now_ms);

/* Fair share after a restart: set each team's decayed usage at now_ms from the store,
 * as tenancy_advance would have counted it: every run segment that closed within the
 * last 30 half-lives, and the runs the server holds again since they began. Call once
 * the jobs are loaded, before the first cycle; without it every team starts at zero. 0
 * or a negative errno (the store failed, or out of memory). */
int metering_restore_fair_share(Server *s, int64_t now_ms);

/* PUT /teams: set a team's budget (GPU-hours per month, 0: none), stored first. Takes
 * the lock; returns an HTTP status with err set as state.h's calls do. */
int metering_set_budget(Server *s, const char *team, double budget_gpu_hours, Buf *err);
