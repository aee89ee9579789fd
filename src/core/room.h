/* room.h: whether a request could fit by capacity alone, kept up to date as nodes change.
 * The sum of what the nodes of the scope a request needs (one node, a leaf, a spine, or
 * the cluster) can take of it is a necessary condition for place_job to place it, and
 * costs one node's capacity to keep when that node changes. Victim planning
 * (preempt.c) asks it before each trial placement: most trials are hopeless, and the
 * placer walks the whole cluster to say so. */
#pragma once

#include "core/place.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct Room {
    const PlaceCtx *ctx;
    const Request *r;
    uint32_t *cap; /* per node: workers of r it takes now, at most r->workers */
    uint64_t *sum; /* per domain: the sum over its nodes */
    uint32_t *dom; /* per node: its domain */
    size_t n_dom;
    size_t n_enough; /* domains whose sum covers r */
} Room;

/* Count r's room (r as the policy sees it: place_effective_request) on every node of c
 * the placer may use (ctx->blocked, read now and on each update, keeps nodes out); r is
 * kept by pointer. 0 or -ENOMEM. */
int room_init(Room *rm, const PlaceCtx *ctx, const Cluster *c, const Request *r);
void room_free(Room *rm);

/* The node's allocations changed: count its room again. */
void room_update(Room *rm, const Cluster *c, uint32_t node);

/* Whether some domain of r's scope could take all of it. */
bool room_enough(const Room *rm);
