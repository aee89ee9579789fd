/* mig.h: MIG geometry. A layout is the set of GPU instances on one GPU; an instance is
 * named by the memory slot it starts at (no two instances share a start), so a layout
 * is 8 bytes and "busy" is a bit mask over start slots. A layout is valid when every
 * instance sits on one of its profile's valid starts, no two instances' memory slices
 * overlap, no profile exceeds its count limit, at most one instance takes the media
 * engines, and the compute slices add up to at most the GPU's. */
#pragma once

#include "core/catalog.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MIG_NONE 0xff

typedef struct MigLayout {
    uint8_t profile_at[MIG_MAX_SLOTS]; /* profile index starting at slot i, or MIG_NONE */
} MigLayout;

typedef struct MigInstance {
    uint8_t profile;
    uint8_t start;
} MigInstance;

void mig_layout_clear(MigLayout *l);
bool mig_layout_empty(const MigLayout *l);
size_t mig_layout_count(const MigLayout *l);
/* Instances in start order; returns how many were written (at most MIG_MAX_SLOTS). */
size_t mig_layout_list(const MigLayout *l, MigInstance out[MIG_MAX_SLOTS]);
/* Slots an instance of profile p starting at start occupies, as a bit mask. */
uint8_t mig_span_mask(const GpuModel *m, int p, int start);
/* Slots occupied by all instances of l (or only those whose start bit is in `only`). */
uint8_t mig_occupied_mask(const GpuModel *m, const MigLayout *l, uint8_t only);
unsigned mig_compute_used(const GpuModel *m, const MigLayout *l, uint8_t only);

bool mig_layout_valid(const GpuModel *m, const MigLayout *l);

/* Start slots where one instance of profile p can be added to l as it is. */
uint8_t mig_free_starts(const GpuModel *m, const MigLayout *l, int p);

/* Start slots where p can go if every instance of l outside `keep` (a start mask: the
 * busy ones) may be destroyed first. */
uint8_t mig_recarve_starts(const GpuModel *m, const MigLayout *l, uint8_t keep, int p);

/* Most instances of p that can be added to the instances of l whose start is in keep
 * (the others destroyed). */
unsigned mig_max_addable(const GpuModel *m, const MigLayout *l, uint8_t keep, int p);

/* What adding instances to a layout depends on, computed once per GPU so that the
 * count for each profile is a few operations (fragmentation asks it per profile). */
typedef struct MigSummary {
    uint8_t used;    /* occupied memory slots */
    uint8_t compute; /* compute slices taken */
    uint8_t media;   /* instances holding the media engines */
    uint8_t count[MIG_MAX_PROFILES];
} MigSummary;

void mig_summarize(const GpuModel *m, const MigLayout *l, uint8_t keep, MigSummary *ret);
unsigned mig_addable(const GpuModel *m, const MigSummary *s, int p);

/* l with an instance of p at start added, destroying the instances outside keep that
 * overlap it, and as few more idle ones as the count, media-engine and compute limits
 * require (an idle +me instance when the new one takes the media engines, say).
 * Returns the start mask of the destroyed instances. The caller has checked that start
 * is in mig_recarve_starts(). */
uint8_t mig_place(const GpuModel *m, MigLayout *l, uint8_t keep, int p, int start);

/* The smallest profile whose memory holds memory_mib: fewest memory slices, then
 * fewest compute slices; media-extension profiles are never chosen. -1 if none. */
int mig_smallest_profile_for_memory(const GpuModel *m, uint64_t memory_mib);

/* Every valid layout reachable from l by destroying only instances outside keep and
 * creating new ones (l itself included). Writes up to cap layouts to out and returns
 * how many exist. */
size_t mig_reachable_layouts(const GpuModel *m, const MigLayout *l, uint8_t keep, MigLayout *out,
                             size_t cap);
