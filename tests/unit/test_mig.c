/* test_mig.c: MIG geometry (core/mig.c) against a reference written from first
 * principles in this file. For every MIG-capable model of the catalogue, plus two
 * synthetic models whose count and compute limits bind before the memory slots do,
 * every set of (profile, start) instances that fits the GPU's memory slots is
 * enumerated depth-first (invalid starts, overlaps and limit violations included);
 * mig_layout_valid must agree with the reference on each, mig_reachable_layouts must
 * return exactly the reference's valid layouts (from empty and with kept instances),
 * and mig_recarve_starts, mig_max_addable and mig_place are checked against brute
 * force over those layouts. The placer's MIG decisions rest on these functions, so
 * they are checked exhaustively rather than by example. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core/catalog.h"
#include "core/mig.h"
#include "util/rng.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the reference ---- */

typedef struct RefInst {
    int p, s;
} RefInst;

enum RefVerdict {
    REF_OK,
    REF_BAD_PROFILE,
    REF_BAD_START,
    REF_OUT_OF_RANGE,
    REF_OVERLAP,
    REF_TOO_MANY,
    REF_MEDIA,
    REF_COMPUTE,
    REF_VERDICTS
};

/* Why a set of instances is not a valid layout of m, or REF_OK. */
static int ref_verdict(const GpuModel *m, const RefInst *in, size_t n)
{
    int owner[MIG_MAX_SLOTS];
    unsigned count[256] = {0}, media = 0, compute = 0;
    for (int i = 0; i < MIG_MAX_SLOTS; i++)
        owner[i] = -1;
    if (m->mig_slots == 0)
        return n ? REF_BAD_PROFILE : REF_OK;
    for (size_t k = 0; k < n; k++) {
        int p = in[k].p, s = in[k].s;
        if (p < 0 || p >= m->n_profiles)
            return REF_BAD_PROFILE;
        const MigProfile *pr = &m->profiles[p];
        if (s < 0 || s >= m->mig_slots || !((pr->start_mask >> s) & 1))
            return REF_BAD_START;
        if (s + pr->memory_slices > m->mig_slots)
            return REF_OUT_OF_RANGE;
        for (int j = s; j < s + pr->memory_slices; j++) {
            if (owner[j] >= 0)
                return REF_OVERLAP;
            owner[j] = (int)k;
        }
    }
    for (size_t k = 0; k < n; k++) {
        const MigProfile *pr = &m->profiles[in[k].p];
        if (++count[in[k].p] > pr->max_count)
            return REF_TOO_MANY;
        media += pr->media_extension;
        compute += pr->compute_slices;
    }
    if (media > 1)
        return REF_MEDIA;
    if (compute > m->mig_compute_slices)
        return REF_COMPUTE;
    return REF_OK;
}

static bool ref_valid_layout(const GpuModel *m, const MigLayout *l)
{
    RefInst in[MIG_MAX_SLOTS];
    size_t n = 0;
    for (int s = 0; s < MIG_MAX_SLOTS; s++)
        if (l->profile_at[s] != MIG_NONE)
            in[n++] = (RefInst){l->profile_at[s], s};
    return ref_verdict(m, in, n) == REF_OK;
}

static uint64_t key_of(const MigLayout *l)
{
    uint64_t k;
    memcpy(&k, l->profile_at, sizeof(k));
    return k;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The instances of l whose start is in keep. */
static MigLayout kept_part(const MigLayout *l, uint8_t keep)
{
    MigLayout k;
    mig_layout_clear(&k);
    for (int s = 0; s < MIG_MAX_SLOTS; s++)
        if ((keep >> s) & 1)
            k.profile_at[s] = l->profile_at[s];
    return k;
}

static bool superset_of(const MigLayout *v, const MigLayout *k)
{
    for (int s = 0; s < MIG_MAX_SLOTS; s++)
        if (k->profile_at[s] != MIG_NONE && v->profile_at[s] != k->profile_at[s])
            return false;
    return true;
}

static uint8_t starts_of(const MigLayout *l)
{
    uint8_t mask = 0;
    for (int s = 0; s < MIG_MAX_SLOTS; s++)
        if (l->profile_at[s] != MIG_NONE)
            mask |= (uint8_t)(1u << s);
    return mask;
}

/* ---- enumeration ---- */

#define MAX_VALID 8192

typedef struct Enum {
    const GpuModel *m;
    RefInst in[MIG_MAX_SLOTS];
    size_t n;
    uint64_t *valid; /* keys of the valid layouts found */
    size_t n_valid;
    size_t checked;
    size_t verdicts[REF_VERDICTS];
} Enum;

static MigLayout layout_of(const RefInst *in, size_t n)
{
    MigLayout l;
    mig_layout_clear(&l);
    for (size_t k = 0; k < n; k++)
        l.profile_at[in[k].s] = (uint8_t)in[k].p;
    return l;
}

static void check_one(Enum *e)
{
    const GpuModel *m = e->m;
    MigLayout l = layout_of(e->in, e->n);
    int v = ref_verdict(m, e->in, e->n);
    e->verdicts[v]++;
    e->checked++;
    bool got = mig_layout_valid(m, &l);
    if (got != (v == REF_OK)) {
        char text[256];
        size_t len = 0;
        for (size_t k = 0; k < e->n; k++)
            len += (size_t)snprintf(text + len, sizeof(text) - len, " %s@%d",
                                    m->profiles[e->in[k].p].name, e->in[k].s);
        fail_msg("%s:%s: mig_layout_valid says %d, reference verdict %d", m->name, text, got, v);
    }
    /* the helpers that count and list agree with the instance list */
    assert_int_equal(mig_layout_count(&l), e->n);
    MigInstance list[MIG_MAX_SLOTS];
    assert_int_equal(mig_layout_list(&l, list), e->n);
    for (size_t k = 0; k < e->n; k++) {
        assert_int_equal(list[k].start, e->in[k].s);
        assert_int_equal(list[k].profile, e->in[k].p);
    }
    if (v != REF_OK)
        return;
    assert_true(e->n_valid < MAX_VALID);
    e->valid[e->n_valid++] = key_of(&l);
    unsigned compute = 0;
    uint8_t occupied = 0;
    for (size_t k = 0; k < e->n; k++) {
        const MigProfile *pr = &m->profiles[e->in[k].p];
        compute += pr->compute_slices;
        for (int j = e->in[k].s; j < e->in[k].s + pr->memory_slices; j++)
            occupied |= (uint8_t)(1u << j);
    }
    assert_int_equal(mig_compute_used(m, &l, 0xff), compute);
    assert_int_equal(mig_occupied_mask(m, &l, 0xff), occupied);
    /* an out-of-range profile index added at a free start is refused */
    for (int s = 0; s < MIG_MAX_SLOTS; s++) {
        if (l.profile_at[s] != MIG_NONE)
            continue;
        MigLayout bad = l;
        bad.profile_at[s] = m->n_profiles;
        assert_false(mig_layout_valid(m, &bad));
        bad.profile_at[s] = MIG_NONE - 1;
        assert_false(mig_layout_valid(m, &bad));
        e->verdicts[REF_BAD_PROFILE] += 2;
    }
}

/* Every set of instances with ascending starts (any of the 8 start slots, any
 * profile) whose memory slices add up to at most the GPU's slots. */
static void enumerate(Enum *e, int from, unsigned slices)
{
    check_one(e);
    for (int s = from; s < MIG_MAX_SLOTS; s++) {
        for (int p = 0; p < e->m->n_profiles; p++) {
            unsigned size = e->m->profiles[p].memory_slices;
            if (slices + size > e->m->mig_slots)
                continue;
            e->in[e->n++] = (RefInst){p, s};
            enumerate(e, s + 1, slices + size);
            e->n--;
        }
    }
}

/* ---- brute-force answers over the reference's valid set ---- */

static uint8_t ref_recarve_starts(const GpuModel *m, const MigLayout *kept, int p)
{
    if (p < 0 || p >= m->n_profiles)
        return 0;
    uint8_t starts = 0;
    for (int s = 0; s < MIG_MAX_SLOTS; s++) {
        if (kept->profile_at[s] != MIG_NONE)
            continue;
        MigLayout t = *kept;
        t.profile_at[s] = (uint8_t)p;
        if (ref_valid_layout(m, &t))
            starts |= (uint8_t)(1u << s);
    }
    return starts;
}

/* Most instances of p addable to l, trying every start again after each one. */
static unsigned ref_max_addable(const GpuModel *m, MigLayout *l, int p, int from)
{
    unsigned best = 0;
    for (int s = from; s < MIG_MAX_SLOTS; s++) {
        if (l->profile_at[s] != MIG_NONE)
            continue;
        l->profile_at[s] = (uint8_t)p;
        if (ref_valid_layout(m, l)) {
            unsigned k = 1 + ref_max_addable(m, l, p, s + 1);
            if (k > best)
                best = k;
        }
        l->profile_at[s] = MIG_NONE;
    }
    return best;
}

static void check_place(const GpuModel *m, const MigLayout *l, uint8_t keep, int p, int s)
{
    MigLayout after = *l;
    uint8_t destroyed = mig_place(m, &after, keep, p, s);
    assert_true(ref_valid_layout(m, &after));
    assert_int_equal(after.profile_at[s], p);
    /* only idle instances die, and they die only when they must */
    assert_int_equal(destroyed & keep, 0);
    assert_int_equal(destroyed & ~starts_of(l), 0);
    uint8_t span = 0;
    for (int j = s; j < s + m->profiles[p].memory_slices; j++)
        span |= (uint8_t)(1u << j);
    for (int i = 0; i < MIG_MAX_SLOTS; i++) {
        if (i == s)
            continue;
        if (!((destroyed >> i) & 1)) {
            assert_int_equal(after.profile_at[i], l->profile_at[i]);
            continue;
        }
        assert_int_equal(after.profile_at[i], MIG_NONE);
        uint8_t ispan = 0;
        for (int j = i; j < i + m->profiles[l->profile_at[i]].memory_slices; j++)
            ispan |= (uint8_t)(1u << j);
        if (ispan & span)
            continue;
        MigLayout back = after;
        back.profile_at[i] = l->profile_at[i];
        if (ref_valid_layout(m, &back))
            fail_msg("%s: placing %s@%d destroyed %s@%d needlessly", m->name, m->profiles[p].name,
                     s, m->profiles[l->profile_at[i]].name, i);
    }
}

/* Run every check on model m. Validity and reachability from empty are checked on
 * every layout; the per-layout checks (reachability with kept instances, re-carve
 * starts, max addable, place) on a seeded sample of one in `every` valid layouts, and
 * reachability with kept instances on one in 4 * `every` (the catalogue's 7-slice
 * models share one geometry, so their different samples add up). */
static void check_model(const GpuModel *m, Rng *rng, unsigned every)
{
    Enum e = {.m = m, .valid = calloc(MAX_VALID, sizeof(uint64_t))};
    assert_non_null(e.valid);
    enumerate(&e, 0, 0);
    /* the enumeration met every kind of invalid layout the model can have */
    assert_true(e.verdicts[REF_OK] > 1);
    assert_true(e.verdicts[REF_BAD_START] > 0);
    assert_true(e.verdicts[REF_OVERLAP] > 0);
    assert_true(e.verdicts[REF_BAD_PROFILE] > 0);
    assert_true(e.verdicts[REF_MEDIA] + e.verdicts[REF_TOO_MANY] > 0);
    qsort(e.valid, e.n_valid, sizeof(uint64_t), cmp_u64);

    /* reachable from empty: exactly the valid layouts */
    MigLayout *out = calloc(MAX_VALID, sizeof(MigLayout));
    uint64_t *keys = calloc(MAX_VALID, sizeof(uint64_t));
    assert_non_null(out);
    assert_non_null(keys);
    MigLayout empty;
    mig_layout_clear(&empty);
    size_t n = mig_reachable_layouts(m, &empty, 0, out, MAX_VALID);
    assert_int_equal(n, e.n_valid);
    for (size_t i = 0; i < n; i++)
        keys[i] = key_of(&out[i]);
    qsort(keys, n, sizeof(uint64_t), cmp_u64);
    assert_memory_equal(keys, e.valid, n * sizeof(uint64_t));
    /* a short buffer gets the first layouts and the full count */
    assert_int_equal(mig_reachable_layouts(m, &empty, 0, out, 3), e.n_valid);

    for (size_t vi = 0; vi < e.n_valid; vi++) {
        if (rng_below(rng, every) != 0)
            continue;
        bool reach_too = rng_below(rng, 4) == 0;
        MigLayout l;
        memcpy(l.profile_at, &e.valid[vi], sizeof(l.profile_at));
        uint8_t all = starts_of(&l);
        uint8_t keeps[3] = {all, 0, (uint8_t)(all & rng_next(rng))};
        for (int ki = 0; ki < 3; ki++) {
            uint8_t keep = keeps[ki];
            MigLayout kept = kept_part(&l, keep);
            /* reachable with kept instances: exactly the valid supersets of them */
            if (ki != 1 && reach_too) {
                size_t want = 0;
                for (size_t j = 0; j < e.n_valid; j++) {
                    MigLayout v;
                    memcpy(v.profile_at, &e.valid[j], sizeof(v.profile_at));
                    want += superset_of(&v, &kept);
                }
                size_t got = mig_reachable_layouts(m, &l, keep, out, MAX_VALID);
                assert_int_equal(got, want);
                for (size_t j = 0; j < got; j++) {
                    uint64_t k = key_of(&out[j]);
                    assert_true(superset_of(&out[j], &kept));
                    assert_non_null(bsearch(&k, e.valid, e.n_valid, sizeof(k), cmp_u64));
                    keys[j] = k;
                }
                qsort(keys, got, sizeof(uint64_t), cmp_u64);
                for (size_t j = 1; j < got; j++)
                    assert_true(keys[j] != keys[j - 1]);
            }
            for (int p = -1; p <= m->n_profiles; p++) {
                uint8_t want = ref_recarve_starts(m, &kept, p);
                uint8_t got = mig_recarve_starts(m, &l, keep, p);
                if (got != want)
                    fail_msg("%s: recarve starts of profile %d keep %#x: got %#x want %#x", m->name,
                             p, keep, got, want);
                if (keep == all)
                    assert_int_equal(mig_free_starts(m, &l, p), want);
                if (p < 0 || p >= m->n_profiles) {
                    assert_int_equal(mig_max_addable(m, &l, keep, p), 0);
                    continue;
                }
                MigLayout t = kept;
                unsigned max = ref_max_addable(m, &t, p, 0);
                assert_int_equal(mig_max_addable(m, &l, keep, p), max);
                assert_int_equal(max > 0, want != 0);
                for (int s = 0; s < MIG_MAX_SLOTS; s++)
                    if ((want >> s) & 1)
                        check_place(m, &l, keep, p, s);
            }
        }
    }
    free(out);
    free(keys);
    free(e.valid);
}

static void test_every_catalog_model(void **state)
{
    Rng rng;
    rng_seed(&rng, 42);
    size_t models = 0;
    for (size_t i = 0; i < catalog_count(); i++) {
        const GpuModel *m = catalog_model(i);
        if (!gpu_model_has_mig(m))
            continue;
        check_model(m, &rng, m->mig_slots < 8 ? 1 : 4);
        models++;
    }
    assert_true(models >= 8);
}

/* A100-40GB's geometry with limits that bind before the slots do: fewer instances
 * of some profiles and less compute than 7 slices. */
static void test_synthetic_limits(void **state)
{
    const GpuModel *a100 = catalog_find("A100-40GB");
    assert_non_null(a100);
    MigProfile prof[MIG_MAX_PROFILES];
    memcpy(prof, a100->profiles, a100->n_profiles * sizeof(MigProfile));
    GpuModel m = *a100;
    m.name = "synthetic-count";
    m.profiles = prof;
    int p1 = catalog_profile_index(a100, "1g.5gb"), p2 = catalog_profile_index(a100, "2g.10gb");
    assert_true(p1 >= 0 && p2 >= 0);
    prof[p1].max_count = 3;
    prof[p2].max_count = 1;
    Rng rng;
    rng_seed(&rng, 7);
    check_model(&m, &rng, 2);

    m.name = "synthetic-compute";
    memcpy(prof, a100->profiles, a100->n_profiles * sizeof(MigProfile));
    m.mig_compute_slices = 5;
    check_model(&m, &rng, 2);
}

static MigLayout L(const GpuModel *m, const char *spec)
{
    /* "1g.5gb@0 3g.20gb@4" */
    MigLayout l;
    mig_layout_clear(&l);
    char buf[128];
    snprintf(buf, sizeof(buf), "%s", spec);
    for (char *tok = strtok(buf, " "); tok; tok = strtok(NULL, " ")) {
        char *at = strchr(tok, '@');
        assert_non_null(at);
        *at = '\0';
        int p = catalog_profile_index(m, tok);
        assert_true(p >= 0);
        l.profile_at[atoi(at + 1)] = (uint8_t)p;
    }
    return l;
}

static void test_known_facts(void **state)
{
    const GpuModel *m = catalog_find("A100-40GB");
    assert_non_null(m);
    assert_int_equal(m->mig_slots, 8);
    assert_int_equal(m->mig_compute_slices, 7);
    int g1 = catalog_profile_index(m, "1g.5gb"), g7 = catalog_profile_index(m, "7g.40gb");
    assert_int_equal(m->profiles[g1].start_mask, 0x7f);
    assert_int_equal(m->profiles[g7].start_mask, 0x01);
    assert_int_equal(m->profiles[g7].memory_slices, 8);
    assert_int_equal(mig_span_mask(m, g7, 0), 0xff);
    assert_int_equal(mig_span_mask(m, catalog_profile_index(m, "3g.20gb"), 4), 0xf0);

    MigLayout l = L(m, "4g.20gb@0 3g.20gb@4");
    assert_true(mig_layout_valid(m, &l));
    l = L(m, "3g.20gb@0 3g.20gb@4");
    assert_true(mig_layout_valid(m, &l));
    l = L(m, "1g.5gb@0 1g.5gb@1 1g.5gb@2 1g.5gb@3 1g.5gb@4 1g.5gb@5 1g.5gb@6");
    assert_true(mig_layout_valid(m, &l));
    assert_int_equal(mig_compute_used(m, &l, 0xff), 7);
    l.profile_at[7] = (uint8_t)g1; /* eight 1g instances */
    assert_false(mig_layout_valid(m, &l));
    l = L(m, "2g.10gb@6");
    assert_false(mig_layout_valid(m, &l));
    l = L(m, "2g.10gb@0 1g.5gb@1"); /* overlap */
    assert_false(mig_layout_valid(m, &l));
    l = L(m, "1g.5gb+me@0 1g.5gb+me@1"); /* two media extensions */
    assert_false(mig_layout_valid(m, &l));
    l = L(m, "7g.40gb@0");
    assert_true(mig_layout_valid(m, &l));
    assert_int_equal(mig_free_starts(m, &l, g1), 0);
    /* 7g idle: re-carving it makes room for seven 1g */
    assert_int_equal(mig_recarve_starts(m, &l, 0, g1), 0x7f);
    assert_int_equal(mig_max_addable(m, &l, 0, g1), 7);
    assert_int_equal(mig_max_addable(m, &l, 0x01, g1), 0);
    uint8_t destroyed = mig_place(m, &l, 0, g1, 3);
    assert_int_equal(destroyed, 0x01);
    assert_int_equal(l.profile_at[3], g1);
    assert_int_equal(mig_layout_count(&l), 1);

    const GpuModel *a30 = catalog_find("A30");
    assert_non_null(a30);
    assert_int_equal(a30->mig_slots, 4);
    assert_int_equal(a30->mig_compute_slices, 4);
    l = L(a30, "2g.12gb@0 2g.12gb@2");
    assert_true(mig_layout_valid(a30, &l));
    l = L(a30, "1g.6gb@4");
    assert_false(mig_layout_valid(a30, &l));

    /* a model without MIG has only the empty layout */
    const GpuModel *l4 = catalog_find("L4");
    assert_non_null(l4);
    mig_layout_clear(&l);
    assert_true(mig_layout_valid(l4, &l));
    assert_true(mig_layout_empty(&l));
    l.profile_at[0] = 0;
    assert_false(mig_layout_valid(l4, &l));
    assert_false(mig_layout_empty(&l));
    assert_int_equal(mig_reachable_layouts(l4, &l, 0, NULL, 0), 0);
    assert_int_equal(mig_recarve_starts(l4, &l, 0, 0), 0);
    assert_int_equal(mig_max_addable(l4, &l, 0, 0), 0);
}

/* The reference choice: fewest memory slices, then fewest compute slices, among the
 * profiles without media extension whose memory holds the ask. */
static int ref_smallest(const GpuModel *m, uint64_t mib)
{
    int best = -1;
    for (int i = 0; i < m->n_profiles; i++) {
        const MigProfile *p = &m->profiles[i];
        if (p->media_extension || p->memory_mib < mib)
            continue;
        if (best < 0 || p->memory_slices < m->profiles[best].memory_slices ||
            (p->memory_slices == m->profiles[best].memory_slices &&
             p->compute_slices < m->profiles[best].compute_slices))
            best = i;
    }
    return best;
}

static const char *smallest_name(const char *model, uint64_t mib)
{
    const GpuModel *m = catalog_find(model);
    assert_non_null(m);
    int p = mig_smallest_profile_for_memory(m, mib);
    return p < 0 ? "none" : m->profiles[p].name;
}

static void test_smallest_profile_for_memory(void **state)
{
    assert_string_equal(smallest_name("H100-80GB-SXM5", 5000), "1g.10gb");
    assert_string_equal(smallest_name("H100-80GB-SXM5", 18 * 1024), "1g.20gb");
    assert_string_equal(smallest_name("H100-80GB-SXM5", 30 * 1024), "3g.40gb");
    assert_string_equal(smallest_name("H100-80GB-SXM5", 80 * 1024), "none");
    assert_string_equal(smallest_name("H100-80GB-SXM5", 81152), "7g.80gb");
    assert_string_equal(smallest_name("A100-40GB", 1), "1g.5gb");
    assert_string_equal(smallest_name("A100-40GB", 4864), "1g.5gb");
    assert_string_equal(smallest_name("A100-40GB", 4865), "1g.10gb");
    assert_string_equal(smallest_name("A100-40GB", 10000), "3g.20gb");
    assert_string_equal(smallest_name("A30", 6000), "2g.12gb"); /* 1g.6gb holds 5952 */
    assert_string_equal(smallest_name("A30", 12000), "4g.24gb");
    /* every model, at every profile's size and just above it */
    for (size_t i = 0; i < catalog_count(); i++) {
        const GpuModel *m = catalog_model(i);
        if (!gpu_model_has_mig(m))
            continue;
        for (int k = 0; k < m->n_profiles; k++) {
            uint64_t sizes[] = {0, 1, m->profiles[k].memory_mib - 1, m->profiles[k].memory_mib,
                                m->profiles[k].memory_mib + 1};
            for (size_t j = 0; j < sizeof(sizes) / sizeof(sizes[0]); j++) {
                int got = mig_smallest_profile_for_memory(m, sizes[j]);
                assert_int_equal(got, ref_smallest(m, sizes[j]));
                if (got >= 0) {
                    assert_false(m->profiles[got].media_extension);
                    assert_true(m->profiles[got].memory_mib >= sizes[j]);
                }
            }
        }
        assert_int_equal(mig_smallest_profile_for_memory(m, (uint64_t)m->memory_mib + 1), -1);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_known_facts),
        cmocka_unit_test(test_smallest_profile_for_memory),
        cmocka_unit_test(test_every_catalog_model),
        cmocka_unit_test(test_synthetic_limits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
