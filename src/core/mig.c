/* mig.c: MIG layout validity, placement and reachability over start-slot bit masks.
 * Valid starts of every profile are aligned to its size, so filling starts in
 * ascending order is an optimal packing of one profile; the count and compute limits
 * only cap that number. */
#include "core/mig.h"

#include <string.h>

void mig_layout_clear(MigLayout *l)
{
    memset(l->profile_at, MIG_NONE, sizeof(l->profile_at));
}

bool mig_layout_empty(const MigLayout *l)
{
    for (int i = 0; i < MIG_MAX_SLOTS; i++)
        if (l->profile_at[i] != MIG_NONE)
            return false;
    return true;
}

size_t mig_layout_count(const MigLayout *l)
{
    size_t n = 0;
    for (int i = 0; i < MIG_MAX_SLOTS; i++)
        n += l->profile_at[i] != MIG_NONE;
    return n;
}

size_t mig_layout_list(const MigLayout *l, MigInstance out[MIG_MAX_SLOTS])
{
    size_t n = 0;
    for (int i = 0; i < MIG_MAX_SLOTS; i++)
        if (l->profile_at[i] != MIG_NONE)
            out[n++] = (MigInstance){.profile = l->profile_at[i], .start = (uint8_t)i};
    return n;
}

uint8_t mig_span_mask(const GpuModel *m, int p, int start)
{
    unsigned size = m->profiles[p].memory_slices;
    if (size >= 8)
        return (uint8_t)(0xffu << start);
    return (uint8_t)(((1u << size) - 1) << start);
}

uint8_t mig_occupied_mask(const GpuModel *m, const MigLayout *l, uint8_t only)
{
    uint8_t mask = 0;
    for (int i = 0; i < MIG_MAX_SLOTS; i++)
        if (l->profile_at[i] != MIG_NONE && (only & (1u << i)))
            mask |= mig_span_mask(m, l->profile_at[i], i);
    return mask;
}

unsigned mig_compute_used(const GpuModel *m, const MigLayout *l, uint8_t only)
{
    unsigned c = 0;
    for (int i = 0; i < MIG_MAX_SLOTS; i++)
        if (l->profile_at[i] != MIG_NONE && (only & (1u << i)))
            c += m->profiles[l->profile_at[i]].compute_slices;
    return c;
}

/* How many instances of p, and of media-extension profiles, the kept part holds. */
static void kept_counts(const GpuModel *m, const MigLayout *l, uint8_t keep, int p,
                        unsigned *ret_same, unsigned *ret_media)
{
    unsigned same = 0, media = 0;
    for (int i = 0; i < MIG_MAX_SLOTS; i++) {
        uint8_t q = l->profile_at[i];
        if (q == MIG_NONE || !(keep & (1u << i)))
            continue;
        same += q == p;
        media += m->profiles[q].media_extension;
    }
    *ret_same = same;
    *ret_media = media;
}

bool mig_layout_valid(const GpuModel *m, const MigLayout *l)
{
    if (!gpu_model_has_mig(m))
        return mig_layout_empty(l);
    uint8_t used = 0;
    unsigned count[MIG_MAX_PROFILES] = {0}, media = 0, compute = 0;
    for (int i = 0; i < MIG_MAX_SLOTS; i++) {
        uint8_t p = l->profile_at[i];
        if (p == MIG_NONE)
            continue;
        if (p >= m->n_profiles || i >= m->mig_slots)
            return false;
        const MigProfile *pr = &m->profiles[p];
        if (!(pr->start_mask & (1u << i)) || i + pr->memory_slices > m->mig_slots)
            return false;
        uint8_t span = mig_span_mask(m, p, i);
        if (used & span)
            return false;
        used |= span;
        if (++count[p] > pr->max_count)
            return false;
        media += pr->media_extension;
        compute += pr->compute_slices;
    }
    return media <= 1 && compute <= m->mig_compute_slices;
}

/* Starts where p fits into the free slots `used` leaves, given the limits. */
static uint8_t starts_in(const GpuModel *m, int p, uint8_t used, unsigned same, unsigned media,
                         unsigned compute)
{
    const MigProfile *pr = &m->profiles[p];
    if (same >= pr->max_count || (pr->media_extension && media >= 1) ||
        compute + pr->compute_slices > m->mig_compute_slices)
        return 0;
    uint8_t starts = 0;
    for (int s = 0; s < m->mig_slots; s++) {
        if (!(pr->start_mask & (1u << s)) || s + pr->memory_slices > m->mig_slots)
            continue;
        if (!(mig_span_mask(m, p, s) & used))
            starts |= (uint8_t)(1u << s);
    }
    return starts;
}

uint8_t mig_free_starts(const GpuModel *m, const MigLayout *l, int p)
{
    return mig_recarve_starts(m, l, 0xff, p);
}

uint8_t mig_recarve_starts(const GpuModel *m, const MigLayout *l, uint8_t keep, int p)
{
    if (!gpu_model_has_mig(m) || p < 0 || p >= m->n_profiles)
        return 0;
    unsigned same, media;
    kept_counts(m, l, keep, p, &same, &media);
    return starts_in(m, p, mig_occupied_mask(m, l, keep), same, media,
                     mig_compute_used(m, l, keep));
}

void mig_summarize(const GpuModel *m, const MigLayout *l, uint8_t keep, MigSummary *ret)
{
    *ret = (MigSummary){0};
    for (int i = 0; i < MIG_MAX_SLOTS; i++) {
        uint8_t q = l->profile_at[i];
        if (q == MIG_NONE || !(keep & (1u << i)))
            continue;
        ret->used |= mig_span_mask(m, q, i);
        ret->compute += m->profiles[q].compute_slices;
        ret->media += m->profiles[q].media_extension;
        ret->count[q]++;
    }
}

/* The valid starts of a profile are disjoint blocks (the catalogue generator checks
 * it), so the most that fit is the number of free blocks, capped by the limits. */
unsigned mig_addable(const GpuModel *m, const MigSummary *s, int p)
{
    const MigProfile *pr = &m->profiles[p];
    if (s->count[p] >= pr->max_count || (pr->media_extension && s->media) ||
        s->compute + pr->compute_slices > m->mig_compute_slices)
        return 0;
    unsigned blocks = 0;
    for (uint8_t starts = pr->start_mask; starts; starts &= (uint8_t)(starts - 1)) {
        int st = __builtin_ctz(starts);
        if (st + pr->memory_slices <= m->mig_slots && !(mig_span_mask(m, p, st) & s->used))
            blocks++;
    }
    unsigned by_count = pr->max_count - s->count[p];
    unsigned by_compute = (m->mig_compute_slices - s->compute) / pr->compute_slices;
    unsigned k = blocks < by_count ? blocks : by_count;
    k = k < by_compute ? k : by_compute;
    return pr->media_extension && k > 1 ? 1 : k;
}

unsigned mig_max_addable(const GpuModel *m, const MigLayout *l, uint8_t keep, int p)
{
    if (!gpu_model_has_mig(m) || p < 0 || p >= m->n_profiles)
        return 0;
    MigSummary s;
    mig_summarize(m, l, keep, &s);
    return mig_addable(m, &s, p);
}

/* Destroy one idle instance outside keep: kind 0 one of profile p, 1 one holding the
 * media engines, 2 the one with the most compute. Returns its start bit, 0 if none. */
static uint8_t destroy_one(const GpuModel *m, MigLayout *l, uint8_t keep, int p, int kind)
{
    int victim = -1;
    for (int i = 0; i < MIG_MAX_SLOTS; i++) {
        uint8_t q = l->profile_at[i];
        if (q == MIG_NONE || (keep & (1u << i)))
            continue;
        bool ok = kind == 0 ? q == p : kind == 1 ? m->profiles[q].media_extension : true;
        /* for compute, free the most compute with one instance */
        if (ok && (victim < 0 || m->profiles[q].compute_slices >
                                     m->profiles[l->profile_at[victim]].compute_slices))
            victim = i;
    }
    if (victim < 0)
        return 0;
    l->profile_at[victim] = MIG_NONE;
    return (uint8_t)(1u << victim);
}

uint8_t mig_place(const GpuModel *m, MigLayout *l, uint8_t keep, int p, int start)
{
    const MigProfile *pr = &m->profiles[p];
    uint8_t span = mig_span_mask(m, p, start), destroyed = 0;
    for (int i = 0; i < MIG_MAX_SLOTS; i++) {
        uint8_t q = l->profile_at[i];
        if (q != MIG_NONE && !(keep & (1u << i)) && (mig_span_mask(m, q, i) & span)) {
            l->profile_at[i] = MIG_NONE;
            destroyed |= (uint8_t)(1u << i);
        }
    }
    /* the count, media and compute limits may force further idle instances out */
    for (;;) {
        unsigned same, media;
        kept_counts(m, l, 0xff, p, &same, &media);
        uint8_t d = 0;
        if (same >= pr->max_count)
            d = destroy_one(m, l, keep, p, 0);
        else if (pr->media_extension && media >= 1)
            d = destroy_one(m, l, keep, p, 1);
        else if (mig_compute_used(m, l, 0xff) + pr->compute_slices > m->mig_compute_slices)
            d = destroy_one(m, l, keep, p, 2);
        if (!d)
            break;
        destroyed |= d;
    }
    l->profile_at[start] = (uint8_t)p;
    return destroyed;
}

int mig_smallest_profile_for_memory(const GpuModel *m, uint64_t memory_mib)
{
    int best = -1;
    for (int i = 0; i < m->n_profiles; i++) {
        const MigProfile *pr = &m->profiles[i];
        if (pr->media_extension || pr->memory_mib < memory_mib)
            continue;
        if (best < 0)
            best = i;
        const MigProfile *b = &m->profiles[best];
        if (pr->memory_slices < b->memory_slices ||
            (pr->memory_slices == b->memory_slices && pr->compute_slices < b->compute_slices))
            best = i;
    }
    return best;
}

typedef struct Reach {
    const GpuModel *m;
    MigLayout *out;
    size_t cap, n;
} Reach;

/* Depth-first over (slot, profile): at each free slot either leave it or start an
 * instance there; every layout is produced once because instances are added in
 * ascending start order. */
static void reach(Reach *r, MigLayout *l, int from)
{
    if (r->n < r->cap)
        r->out[r->n] = *l;
    r->n++;
    for (int s = from; s < r->m->mig_slots; s++) {
        for (int p = 0; p < r->m->n_profiles; p++) {
            if (!(mig_free_starts(r->m, l, p) & (1u << s)))
                continue;
            l->profile_at[s] = (uint8_t)p;
            reach(r, l, s + 1);
            l->profile_at[s] = MIG_NONE;
        }
    }
}

size_t mig_reachable_layouts(const GpuModel *m, const MigLayout *l, uint8_t keep, MigLayout *out,
                             size_t cap)
{
    if (!gpu_model_has_mig(m))
        return 0;
    MigLayout base;
    mig_layout_clear(&base);
    for (int i = 0; i < MIG_MAX_SLOTS; i++)
        if (keep & (1u << i))
            base.profile_at[i] = l->profile_at[i];
    Reach r = {.m = m, .out = out, .cap = cap};
    reach(&r, &base, 0);
    return r.n;
}
