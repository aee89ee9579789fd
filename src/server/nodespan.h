/* nodespan.h: which nodes count as the cluster's capacity, for idle showback, and the
 * spans of time in the store that say so (StoreNodeSpan, store.h).
 *
 * The rule, per tier (docs/api.md, "Idle capacity"): an owned or reserved node counts
 * while it is ready (its agent reports): that is capacity the scheduler could have
 * used. A node of an on-demand or spot pool that the server scales (a provider asks the
 * cloud for its nodes) counts from the moment it is asked for until it is given back,
 * since the cloud bills that whole time, start-up and idling out included. Any other
 * on-demand or spot node counts while ready, as the server knows of it only through its
 * agent. A node that never registered (and was never asked for) counts nothing.
 *
 * Durability: a change of a node's liveness or presence queues the node; the scheduler
 * thread writes the queued nodes' spans in one write with the lock released
 * (nodespan_flush), before its next cycle, so that no request holds the lock across that
 * write and every allocation on a node begins inside its span. While open, its end is
 * moved forward every NODESPAN_TICK_MS; a server that is killed loses at most that much
 * of each span, and the next one closes what it left open where it reached, so the time
 * the server was down never counts. A clean stop closes every span at its moment.
 *
 * All with s->lock held ([lock]); store failures are logged and tried again at the next
 * tick. */
#pragma once

#include "server/state.h"

#include <stdint.h>

/* How often the open spans' ends are written: the most of each span a killed server
 * loses. */
#define NODESPAN_TICK_MS (5 * INT64_C(1000))

/* At startup, before any agent reports: close the spans the last server left open. 0 or
 * a negative errno (the store failed) with err set. */
int nodespan_start(Server *s, Buf *err);
/* The node's liveness or presence changed: queue it, when its span must open or close,
 * and wake the scheduler thread (now_ms is unused: an edge is the moment it is written). */
void nodespan_update(Server *s, uint32_t node, int64_t now_ms);
/* The scheduler thread: open and close the queued nodes' spans, at the moment of the
 * write, in one write made with the lock released (server_write_released). */
void nodespan_flush(Server *s);
/* Called from the scheduler loop: every NODESPAN_TICK_MS, check every node against the
 * rule and move the open spans' ends to now_ms. */
void nodespan_tick(Server *s, int64_t now_ms);
/* The server stops: close every open span at now_ms. */
void nodespan_stop(Server *s, int64_t now_ms);
/* Why the node counts now ("ready" or "present"), or NULL when it does not. */
const char *nodespan_basis(const Server *s, uint32_t node);
