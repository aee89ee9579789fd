/* test_place_bruteforce.c: the placer (core/place.c) against a slow, obvious reference
 * on thousands of seeded random cases. place.h promises completeness: whenever any
 * node (or, for a gang, any set of nodes within the required scope) can take a job
 * now, place_job finds a placement. The reference here decides that question from
 * first principles over the cluster state, with its own job resolution, its own MIG
 * validity check and an exhaustive search of MIG instances per GPU; it shares no code
 * with the placer beyond the catalogue. A job asking by memory may get a profile with
 * the same memory and more compute; the reference then checks, exhaustively, that the
 * GPU can still reach at least as much compute as with the smallest profile. Every placement the
 * placer makes is re-checked grant by grant against a snapshot of the state before it, and a
 * refusal must leave the cluster untouched with a reason. Clusters are small (1-4 nodes of
 * A100-80GB, A30, L4 or H100 with 1-8 GPUs, random MIG permission, interconnect, host size, fabric,
 * tier, leaves and spines); jobs that prefer owned and reserved capacity land there whenever it
 * can hold them; each job set is a sequence of random jobs placed on one cluster, with
 * random releases in between so that idle MIG instances and half-used GPUs appear. A failure prints
 * its seed; BF_SEED=<seed> BF_POLICY=<name> replays one job set and prints the state before each
 * job. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core/cluster.h"
#include "core/job.h"
#include "core/place.h"
#include "util/buf.h"
#include "util/rng.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define SETS_MAIN    2500 /* job sets per main policy (gpuorch, first-fit, best-fit) */
#define SETS_OTHERS  400  /* job sets per other gang policy */
#define JOBS_PER_SET 14

/* ---- failure reporting ---- */

static struct {
    uint64_t seed;
    const char *policy;
    unsigned job;
    bool verbose;
    const Cluster *c;
    const JobSpec *j;
} cur;

static void dump_state(const Cluster *c);
static void dump_job(const JobSpec *j);

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "FAILED: %s (line %d)\n  ", #cond, __LINE__);                          \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
            if (cur.j)                                                                             \
                dump_job(cur.j);                                                                   \
            fail_msg("seed=%llu policy=%s job=%u; replay with BF_SEED=%llu BF_POLICY=%s",          \
                     (unsigned long long)cur.seed, cur.policy, cur.job,                            \
                     (unsigned long long)cur.seed, cur.policy);                                    \
        }                                                                                          \
    } while (0)

/* ---- the reference's own MIG validity ---- */

static bool ref_layout_valid(const GpuModel *m, const MigLayout *l)
{
    unsigned owner = 0, count[256] = {0}, media = 0, compute = 0;
    for (int s = 0; s < MIG_MAX_SLOTS; s++) {
        unsigned p = l->profile_at[s];
        if (p == MIG_NONE)
            continue;
        if (p >= m->n_profiles || s >= m->mig_slots)
            return false;
        const MigProfile *pr = &m->profiles[p];
        if (!((pr->start_mask >> s) & 1) || s + pr->memory_slices > m->mig_slots)
            return false;
        for (int k = s; k < s + pr->memory_slices; k++) {
            if ((owner >> k) & 1)
                return false;
            owner |= 1u << k;
        }
        if (++count[p] > pr->max_count)
            return false;
        media += pr->media_extension;
        compute += pr->compute_slices;
    }
    return media <= 1 && compute <= m->mig_compute_slices;
}

/* Most instances of p that can be added to l: every start, again after each. */
static unsigned ref_mig_room(const GpuModel *m, MigLayout *l, int p, int from, unsigned limit)
{
    unsigned best = 0;
    for (int s = from; s < MIG_MAX_SLOTS && best < limit; s++) {
        if (l->profile_at[s] != MIG_NONE)
            continue;
        l->profile_at[s] = (uint8_t)p;
        if (ref_layout_valid(m, l)) {
            unsigned k = 1 + ref_mig_room(m, l, p, s + 1, limit - 1);
            best = k > best ? k : best;
        }
        l->profile_at[s] = MIG_NONE;
    }
    return best;
}

/* Most compute slices a valid layout can hold that keeps l's instances and adds any
 * (no media-extension ones): every start and profile, again after each. */
static unsigned ref_max_compute(const GpuModel *m, MigLayout *l, int from)
{
    unsigned best = 0;
    for (int s = 0; s < MIG_MAX_SLOTS; s++)
        if (l->profile_at[s] != MIG_NONE)
            best += m->profiles[l->profile_at[s]].compute_slices;
    for (int s = from; s < MIG_MAX_SLOTS; s++) {
        if (l->profile_at[s] != MIG_NONE)
            continue;
        for (int p = 0; p < m->n_profiles; p++) {
            if (m->profiles[p].media_extension)
                continue;
            l->profile_at[s] = (uint8_t)p;
            if (ref_layout_valid(m, l)) {
                unsigned k = ref_max_compute(m, l, s + 1);
                best = k > best ? k : best;
            }
        }
        l->profile_at[s] = MIG_NONE;
    }
    return best;
}

/* ---- the reference's own resolution of a job on a node ---- */

enum { ASK_NONE, ASK_HOST, ASK_WHOLE, ASK_MIG, ASK_SHARE };

typedef struct NodeAsk {
    int how;          /* ASK_*: what one worker takes of this node; ASK_NONE: cannot run */
    int profile;      /* ASK_MIG */
    unsigned milli;   /* ASK_SHARE */
    bool shared_only; /* ASK_SHARE: only on a GPU already in MPS mode */
} NodeAsk;

static const GpuModel *cat_of(const Cluster *c, const Node *n)
{
    return catalog_find(node_model(c, n)->name);
}

/* The tiers j may run on: what it allows, less spot unless an interruption cannot lose
 * its work (preemptible, with a checkpoint interval or cost, and not production). */
static unsigned ref_tiers(const JobSpec *j)
{
    unsigned tiers = j->tiers ? j->tiers : TIERS_ALL;
    bool saves = j->checkpoint_interval_ms > 0 || j->checkpoint_cost_ms > 0;
    if (j->priority == PRIO_PRODUCTION || !j->preemptible || !saves)
        tiers &= ~(1u << TIER_SPOT);
    return tiers;
}

/* Owned and reserved, for the jobs that prefer them (production, and inference that is
 * not preemptible), when they allow them and something else besides; else 0. */
static unsigned ref_preferred(const JobSpec *j)
{
    unsigned all = ref_tiers(j);
    unsigned own = all & ((1u << TIER_OWNED) | (1u << TIER_RESERVED));
    bool prefers = j->priority == PRIO_PRODUCTION || (j->kind == KIND_INFERENCE && !j->preemptible);
    return prefers && own != all ? own : 0;
}

static bool ref_admits(const Cluster *c, const Node *n, const JobSpec *j)
{
    if (!n->schedulable)
        return false;
    if (j->n_gpu_models) {
        bool ok = false;
        for (size_t i = 0; i < j->n_gpu_models; i++)
            ok |= catalog_find(j->gpu_models[i]) == cat_of(c, n);
        if (!ok)
            return false;
    }
    if (j->fabric && *j->fabric && strcasecmp(c->fabrics[n->fabric], j->fabric) != 0)
        return false;
    return (ref_tiers(j) >> c->pools[n->pool].tier) & 1;
}

/* The smallest MIG profile holding mib: fewest memory slices, then fewest compute
 * slices; never a media-extension profile. */
static int ref_profile_for_memory(const GpuModel *m, uint64_t mib)
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

static unsigned gpu_share_room(const Gpu *g);

/* gpus: the state to judge by (the node's GPUs start at n->gpu0). */
static NodeAsk ref_ask(const Cluster *c, const Gpu *gpus, const Node *n, const JobSpec *j)
{
    NodeAsk a = {.how = ASK_NONE, .profile = -1};
    if (!ref_admits(c, n, j))
        return a;
    const GpuModel *m = cat_of(c, n);
    bool mig = n->mig_allowed && m->mig_slots > 0;
    switch (j->req) {
    case REQ_NONE:
        a.how = ASK_HOST;
        break;
    case REQ_GPUS:
        a.how = j->gpus <= n->n_gpus ? ASK_WHOLE : ASK_NONE;
        break;
    case REQ_MIG:
        for (int p = 0; mig && p < m->n_profiles; p++)
            if (strcasecmp(m->profiles[p].name, j->mig) == 0)
                a.how = ASK_MIG, a.profile = p;
        break;
    case REQ_MEMORY: {
        /* the smallest fitting slice where MIG is on, else an MPS share; where MIG is on,
         * a share too when only the whole GPU's slice holds it, or for a single worker
         * (only on an MPS GPU) when an MPS GPU of the node has room for it. A share of a
         * MIG-capable model is whole memory slots: the fewest k with k/slots of the memory
         * holding the ask */
        unsigned milli =
            j->gpu_memory_mib <= m->memory_mib
                ? (unsigned)((j->gpu_memory_mib * 1000 + m->memory_mib - 1) / m->memory_mib)
                : 0;
        for (unsigned k = 1; milli && m->mig_slots && k <= m->mig_slots; k++)
            if ((uint64_t)k * m->memory_mib >= j->gpu_memory_mib * m->mig_slots) {
                milli = (k * 1000 + m->mig_slots - 1) / m->mig_slots;
                break;
            }
        if (mig && (a.profile = ref_profile_for_memory(m, j->gpu_memory_mib)) >= 0) {
            a.how = ASK_MIG;
            if (m->profiles[a.profile].compute_slices == m->mig_compute_slices && milli) {
                a.how = ASK_SHARE;
                a.milli = milli;
            }
            for (unsigned i = 0; a.how == ASK_MIG && milli && j->workers <= 1 && i < n->n_gpus;
                 i++) {
                const Gpu *g = &gpus[n->gpu0 + i];
                if (g->mode == GPU_SHARED && gpu_share_room(g) >= milli) {
                    a.how = ASK_SHARE;
                    a.milli = milli;
                    a.shared_only = true;
                }
            }
        } else if (milli) {
            a.how = ASK_SHARE;
            a.milli = milli;
        }
        break;
    }
    case REQ_FRACTION:
        a.how = ASK_SHARE;
        a.milli = j->fraction_milli;
        break;
    }
    return a;
}

/* ---- the reference's own view of the state ---- */

#define MIN_OF(a, b) ((a) < (b) ? (a) : (b))

static unsigned min_u(unsigned a, unsigned b)
{
    return a < b ? a : b;
}

static bool gpu_takes_whole(const Gpu *g)
{
    return (g->mode == GPU_WHOLE && g->used_units == 0) || (g->mode == GPU_MIG && !g->mig_busy);
}

static unsigned gpu_share_room(const Gpu *g)
{
    switch (g->mode) {
    case GPU_WHOLE:
        return g->used_units ? 0 : 1000;
    case GPU_SHARED:
        return 1000 - g->used_units / (GPU_UNITS / 1000);
    default:
        return g->mig_busy ? 0 : 1000;
    }
}

/* Workers of j node n can take now, at most limit, by exhaustive counting. */
static unsigned ref_node_room(const Cluster *c, uint32_t ni, const JobSpec *j, unsigned limit)
{
    const Node *n = &c->nodes[ni];
    NodeAsk a = ref_ask(c, c->gpus, n, j);
    if (a.how == ASK_NONE)
        return 0;
    unsigned room = limit;
    if (j->cpu_milli)
        room = min_u(room, (n->cpu_milli - n->cpu_used_milli) / j->cpu_milli);
    if (j->memory_mib)
        room = min_u(room, (n->memory_mib - n->memory_used_mib) / j->memory_mib);
    unsigned gpu = 0;
    const GpuModel *m = cat_of(c, n);
    for (unsigned i = 0; i < n->n_gpus && a.how != ASK_HOST; i++) {
        const Gpu *g = node_gpu_c(c, n, i);
        switch (a.how) {
        case ASK_WHOLE:
            gpu += gpu_takes_whole(g);
            break;
        case ASK_SHARE:
            if (!a.shared_only || g->mode == GPU_SHARED)
                gpu += gpu_share_room(g) / a.milli;
            break;
        case ASK_MIG: {
            if (g->mode == GPU_SHARED || (g->mode == GPU_WHOLE && g->used_units))
                break;
            MigLayout busy;
            mig_layout_clear(&busy);
            for (int s = 0; s < MIG_MAX_SLOTS; s++)
                if ((g->mig_busy >> s) & 1)
                    busy.profile_at[s] = g->mig.profile_at[s];
            gpu += ref_mig_room(m, &busy, a.profile, 0, limit);
            break;
        }
        }
    }
    if (a.how == ASK_WHOLE)
        gpu /= j->gpus;
    if (a.how != ASK_HOST)
        room = min_u(room, gpu);
    return room;
}

static uint32_t leaf_dom(const Cluster *c, const Node *n)
{
    return n->leaf != NO_SWITCH ? n->leaf : (uint32_t)c->n_switches;
}

static uint32_t spine_dom(const Cluster *c, const Node *n)
{
    return n->spine != NO_SWITCH ? n->spine : leaf_dom(c, n);
}

/* Whether all workers of j can be placed now. Nodes are independent, so the gang
 * fits exactly when some domain's nodes have room for W workers in total. */
static bool ref_feasible(const Cluster *c, const JobSpec *j)
{
    unsigned W = j->workers ? j->workers : 1;
    unsigned room[8];
    for (size_t i = 0; i < c->n_nodes; i++)
        room[i] = ref_node_room(c, (uint32_t)i, j, W);
    int scope = W > 1 && j->scope_required ? j->scope : SCOPE_ANY;
    if (scope == SCOPE_NODE) {
        for (size_t i = 0; i < c->n_nodes; i++)
            if (room[i] >= W)
                return true;
        return false;
    }
    uint64_t sum[16] = {0};
    for (size_t i = 0; i < c->n_nodes; i++) {
        const Node *n = &c->nodes[i];
        uint32_t d = scope == SCOPE_LEAF    ? leaf_dom(c, n)
                     : scope == SCOPE_SPINE ? spine_dom(c, n)
                                            : 0;
        sum[d] += room[i];
    }
    for (size_t d = 0; d <= c->n_switches; d++)
        if (sum[d] >= W)
            return true;
    return false;
}

/* ---- checking a placement grant by grant ---- */

typedef struct Snap {
    Node nodes[8];
    Gpu gpus[64];
    uint64_t used;
} Snap;

static void take_snap(const Cluster *c, Snap *s)
{
    memcpy(s->nodes, c->nodes, c->n_nodes * sizeof(Node));
    memcpy(s->gpus, c->gpus, c->n_gpus * sizeof(Gpu));
    s->used = c->used_units;
}

static void check_unchanged(const Cluster *c, const Snap *s)
{
    CHECK(memcmp(s->nodes, c->nodes, c->n_nodes * sizeof(Node)) == 0, "a node changed");
    CHECK(memcmp(s->gpus, c->gpus, c->n_gpus * sizeof(Gpu)) == 0, "a GPU changed");
    CHECK(s->used == c->used_units, "cluster used units changed");
}

static bool same_layout(const MigLayout *a, const MigLayout *b)
{
    return memcmp(a->profile_at, b->profile_at, sizeof(a->profile_at)) == 0;
}

static void check_placement(const Cluster *c, const JobSpec *j, const Snap *before,
                            const Placement *pl)
{
    unsigned W = j->workers ? j->workers : 1;
    Gpu work[64];
    memcpy(work, before->gpus, c->n_gpus * sizeof(Gpu));
    bool changed[64] = {false}, used_by_worker[64] = {false};
    /* MIG changes: only idle instances die, the results are valid layouts */
    for (size_t k = 0; k < pl->n_changes; k++) {
        const MigChange *ch = &pl->changes[k];
        CHECK(ch->node < c->n_nodes, "change on node %u", ch->node);
        const Node *n = &before->nodes[ch->node];
        CHECK(ch->index < n->n_gpus, "change on GPU %u", ch->index);
        uint32_t gi = n->gpu0 + ch->index;
        const Gpu *g0 = &before->gpus[gi];
        const GpuModel *m = cat_of(c, n);
        CHECK(!changed[gi], "two changes for one GPU");
        changed[gi] = true;
        CHECK(same_layout(&ch->before, &g0->mig), "change's before is not the GPU's layout");
        CHECK(g0->mode != GPU_SHARED && !(g0->mode == GPU_WHOLE && g0->used_units),
              "MIG change on a GPU in use");
        CHECK(ref_layout_valid(m, &ch->after), "after layout invalid");
        CHECK(mig_layout_empty(&ch->after) || n->mig_allowed, "MIG on a node without MIG");
        for (int s = 0; s < MIG_MAX_SLOTS; s++)
            if ((g0->mig_busy >> s) & 1)
                CHECK(ch->after.profile_at[s] == g0->mig.profile_at[s],
                      "busy instance at slot %d destroyed", s);
        work[gi].mig = ch->after;
        work[gi].mode = mig_layout_empty(&ch->after) ? GPU_WHOLE : GPU_MIG;
    }
    /* the workers, one by one, against the state the changes leave */
    CHECK(pl->n_workers == W, "%zu workers placed of %u", pl->n_workers, W);
    uint32_t cpu[8], mem[8];
    for (size_t i = 0; i < c->n_nodes; i++) {
        cpu[i] = before->nodes[i].cpu_used_milli;
        mem[i] = before->nodes[i].memory_used_mib;
    }
    for (size_t k = 0; k < pl->n_workers; k++) {
        const WorkerAlloc *w = &pl->workers[k];
        CHECK(w->node < c->n_nodes, "worker on node %u", w->node);
        const Node *n = &before->nodes[w->node];
        NodeAsk a = ref_ask(c, before->gpus, n, j);
        CHECK(a.how != ASK_NONE, "worker on node %s, which cannot run the job", n->name);
        CHECK(w->cpu_milli == j->cpu_milli && w->memory_mib == j->memory_mib, "host ask");
        cpu[w->node] += w->cpu_milli;
        mem[w->node] += w->memory_mib;
        CHECK(cpu[w->node] <= n->cpu_milli, "CPU overcommitted on %s", n->name);
        CHECK(mem[w->node] <= n->memory_mib, "memory overcommitted on %s", n->name);
        const GpuModel *m = cat_of(c, n);
        unsigned want = a.how == ASK_WHOLE ? j->gpus : a.how == ASK_HOST ? 0 : 1;
        CHECK(w->n_grants == want, "worker has %u grants, wants %u", w->n_grants, want);
        for (unsigned gk = 0; gk < w->n_grants; gk++) {
            const Grant *gr = &w->grants[gk];
            CHECK(gr->index < n->n_gpus, "grant on GPU %u", gr->index);
            uint32_t gi = n->gpu0 + gr->index;
            Gpu *g = &work[gi];
            used_by_worker[gi] = true;
            switch (a.how) {
            case ASK_WHOLE:
                CHECK(gr->kind == GRANT_WHOLE, "grant kind %u for whole GPUs", gr->kind);
                CHECK(g->mode == GPU_WHOLE && g->used_units == 0, "whole GPU not free");
                g->used_units = GPU_UNITS;
                break;
            case ASK_MIG:
                CHECK(gr->kind == GRANT_MIG, "grant kind %u for a MIG slice", gr->kind);
                CHECK(gr->mig_start < MIG_MAX_SLOTS && g->mode == GPU_MIG &&
                          g->mig.profile_at[gr->mig_start] == gr->mig_profile,
                      "instance %u@%u not in the layout", gr->mig_profile, gr->mig_start);
                CHECK(!((g->mig_busy >> gr->mig_start) & 1), "instance already busy");
                if (gr->mig_profile != a.profile) {
                    /* a job by memory may get more compute, only what no instance could
                     * otherwise use: the GPU can reach at least as much compute */
                    const MigProfile *q = &m->profiles[gr->mig_profile],
                                     *p = &m->profiles[a.profile];
                    CHECK(j->req == REQ_MEMORY && gr->mig_profile < m->n_profiles &&
                              !q->media_extension && q->memory_slices == p->memory_slices &&
                              q->compute_slices > p->compute_slices,
                          "profile %u, want %d", gr->mig_profile, a.profile);
                    MigLayout kept, narrow;
                    mig_layout_clear(&kept);
                    for (int st = 0; st < MIG_MAX_SLOTS; st++)
                        if ((g->mig_busy >> st) & 1)
                            kept.profile_at[st] = g->mig.profile_at[st];
                    narrow = kept;
                    kept.profile_at[gr->mig_start] = gr->mig_profile;
                    narrow.profile_at[gr->mig_start] = (uint8_t)a.profile;
                    CHECK(ref_layout_valid(m, &narrow), "no %d@%u beside the busy instances",
                          a.profile, gr->mig_start);
                    unsigned wide_max = ref_max_compute(m, &kept, 0),
                             narrow_max = ref_max_compute(m, &narrow, 0);
                    CHECK(wide_max >= narrow_max,
                          "widened to %u@%u, the GPU can reach %u compute slices, not %u",
                          gr->mig_profile, gr->mig_start, wide_max, narrow_max);
                }
                g->mig_busy |= (uint8_t)(1u << gr->mig_start);
                g->used_units += m->profiles[gr->mig_profile].compute_slices *
                                 (GPU_UNITS / m->mig_compute_slices);
                break;
            case ASK_SHARE:
                CHECK(gr->kind == GRANT_SHARE, "grant kind %u for a share", gr->kind);
                CHECK(gr->milli == a.milli, "share %u, want %u", gr->milli, a.milli);
                CHECK(g->mode == GPU_SHARED || (g->mode == GPU_WHOLE && g->used_units == 0),
                      "share on a GPU in mode %u", g->mode);
                CHECK(!a.shared_only || g->mode == GPU_SHARED,
                      "a share of a slice-sized memory ask cut into GPU %u in mode %u", gr->index,
                      g->mode);
                g->mode = GPU_SHARED;
                g->n_clients++;
                g->used_units += a.milli * (GPU_UNITS / 1000);
                CHECK(g->used_units <= GPU_UNITS, "shares above a whole GPU");
                break;
            }
        }
        for (unsigned x = 0; x < w->n_grants; x++)
            for (unsigned y = x + 1; y < w->n_grants; y++)
                CHECK(w->grants[x].index != w->grants[y].index, "GPU granted twice");
    }
    /* required scope */
    if (W > 1 && j->scope_required && j->scope != SCOPE_ANY) {
        for (size_t k = 1; k < pl->n_workers; k++) {
            const Node *a = &before->nodes[pl->workers[0].node];
            const Node *b = &before->nodes[pl->workers[k].node];
            if (j->scope == SCOPE_NODE)
                CHECK(a == b, "workers on %s and %s, scope node", a->name, b->name);
            else if (j->scope == SCOPE_LEAF)
                CHECK(leaf_dom(c, a) == leaf_dom(c, b), "workers on two leaves");
            else
                CHECK(spine_dom(c, a) == spine_dom(c, b), "workers on two spines");
        }
    }
    for (size_t gi = 0; gi < c->n_gpus; gi++)
        CHECK(!changed[gi] || used_by_worker[gi], "MIG change on GPU %zu no worker uses", gi);
    /* the cluster holds exactly what the grants say */
    for (size_t gi = 0; gi < c->n_gpus; gi++) {
        const Gpu *g = &c->gpus[gi];
        CHECK(g->mode == work[gi].mode && g->used_units == work[gi].used_units &&
                  g->mig_busy == work[gi].mig_busy && g->n_clients == work[gi].n_clients &&
                  same_layout(&g->mig, &work[gi].mig),
              "GPU %zu differs from its grants", gi);
    }
    for (size_t i = 0; i < c->n_nodes; i++)
        CHECK(c->nodes[i].cpu_used_milli == cpu[i] && c->nodes[i].memory_used_mib == mem[i],
              "host counters of node %zu", i);
    CHECK(cluster_consistent(c), "cluster inconsistent after placement");
}

/* ---- random clusters and jobs ---- */

static const char *const models4[] = {"A100-80GB", "A30", "L4", "H100-80GB-SXM5"};

static MigLayout random_layout(Rng *rng, const GpuModel *m)
{
    MigLayout l;
    mig_layout_clear(&l);
    for (int tries = 0; tries < 10; tries++) {
        int p = (int)rng_below(rng, m->n_profiles);
        int s = (int)rng_below(rng, m->mig_slots);
        if (l.profile_at[s] != MIG_NONE)
            continue;
        l.profile_at[s] = (uint8_t)p;
        if (!ref_layout_valid(m, &l))
            l.profile_at[s] = MIG_NONE;
    }
    return l;
}

static Cluster *random_cluster(Rng *rng)
{
    Cluster *c = cluster_new("bf");
    if (!c)
        return NULL;
    unsigned n_leaves = 1 + (unsigned)rng_below(rng, 2);
    unsigned spines = (unsigned)rng_below(rng, 3); /* 0 none, 1 one above all, 2 only leaf0 */
    if (spines && cluster_add_switch(c, "spine", NULL) < 0)
        goto fail;
    for (unsigned l = 0; l < n_leaves; l++) {
        char name[16];
        snprintf(name, sizeof(name), "leaf%u", l);
        const char *parent = spines == 1 || (spines == 2 && l == 0) ? "spine" : NULL;
        if (cluster_add_switch(c, name, parent) < 0)
            goto fail;
    }
    unsigned n_nodes = 1 + (unsigned)rng_below(rng, 4);
    for (unsigned i = 0; i < n_nodes; i++) {
        static const uint32_t cpus[] = {8000, 16000, 32000, 64000, 128000};
        static const uint32_t mems[] = {32768, 65536, 262144, 1048576};
        static const char *const fabrics[] = {"", "ib", "roce"};
        char name[16];
        snprintf(name, sizeof(name), "p%u", i);
        int mi = cluster_model(c, models4[rng_below(rng, 4)], 0);
        if (mi < 0)
            goto fail;
        int fab = cluster_fabric(c, fabrics[rng_below(rng, 3)]);
        char leaf_name[16];
        snprintf(leaf_name, sizeof(leaf_name), "leaf%u", (unsigned)rng_below(rng, n_leaves));
        uint32_t leaf = (uint32_t)cluster_find_switch(c, leaf_name);
        bool no_leaf = rng_below(rng, 6) == 0;
        Pool p = {
            .name = name,
            .tier = (Tier)rng_below(rng, TIER_COUNT),
            .nodes = 1,
            .leaves = no_leaf ? NULL : &leaf,
            .n_leaves = no_leaf ? 0 : 1,
            .model = (uint8_t)mi,
            .gpus = (uint8_t)(1 + rng_below(rng, 8)),
            .interconnect = (uint8_t)rng_below(rng, 3),
            .mig = rng_below(rng, 3) != 0,
            .fabric = (uint16_t)(fab < 0 ? 0 : fab),
            .cpu_milli = cpus[rng_below(rng, 5)],
            .memory_mib = mems[rng_below(rng, 4)],
        };
        mig_layout_clear(&p.initial_mig);
        const GpuModel *m = &c->models[mi].m;
        if (gpu_model_has_mig(m) && rng_below(rng, 3) == 0)
            p.initial_mig = random_layout(rng, m);
        int pi = cluster_add_pool(c, &p);
        if (pi < 0 || cluster_add_pool_nodes(c, (uint32_t)pi) < 0)
            goto fail;
    }
    for (size_t i = 0; i < c->n_nodes; i++)
        if (rng_below(rng, 25) == 0)
            cluster_set_schedulable(c, (uint32_t)i, false);
    return c;
fail:
    cluster_free(c);
    return NULL;
}

static char *dup_or_die(const char *s)
{
    char *d = strdup(s);
    assert_non_null(d);
    return d;
}

/* A random job; with a cluster, most jobs name models, profiles and fabrics it has. */
static void random_job(Rng *rng, const Cluster *c, JobSpec *j)
{
    static const char *const profiles[] = {"1g.10gb",   "1g.10gb+me", "1g.20gb",    "2g.20gb",
                                           "3g.40gb",   "4g.40gb",    "7g.80gb",    "1g.6gb",
                                           "1g.6gb+me", "2g.12gb",    "2g.12gb+me", "4g.24gb"};
    static const uint64_t memories[] = {3000,  5952,  9000,  10000, 16000, 20000,
                                        24000, 30000, 40000, 60000, 81920, 90000};
    static const uint16_t fractions[] = {100, 250, 300, 333, 500, 700, 1000};
    static const uint32_t cpus[] = {0, 0, 500, 1000, 4000, 8000, 16000};
    static const uint32_t mems[] = {0, 0, 1024, 8192, 32768, 131072};
    static const char *const names[] = {"A100-SXM4-80GB", "A30", "L4", "H100", "T4"};
    job_spec_init(j);
    j->req = (uint8_t)rng_below(rng, 5);
    j->workers = rng_below(rng, 3) == 0 ? 1 : 1 + (uint32_t)rng_below(rng, 4);
    switch (j->req) {
    case REQ_GPUS:
        j->gpus = (uint16_t)(rng_below(rng, 2) ? 1 + rng_below(rng, 2) : 1 + rng_below(rng, 8));
        if (c && rng_below(rng, 4)) {
            unsigned most = c->max_gpus_per_node;
            j->gpus = (uint16_t)MIN_OF(j->gpus, most);
        }
        break;
    case REQ_MIG: {
        const GpuModel *m = c ? node_model(c, &c->nodes[rng_below(rng, c->n_nodes)]) : NULL;
        if (m && m->n_profiles && rng_below(rng, 4))
            j->mig = dup_or_die(m->profiles[rng_below(rng, m->n_profiles)].name);
        else
            j->mig = dup_or_die(profiles[rng_below(rng, sizeof(profiles) / sizeof(profiles[0]))]);
        break;
    }
    case REQ_MEMORY:
        j->gpu_memory_mib = memories[rng_below(rng, sizeof(memories) / sizeof(memories[0]))];
        break;
    case REQ_FRACTION:
        j->fraction_milli = rng_below(rng, 4) == 0 ? (uint16_t)(1 + rng_below(rng, 1000))
                                                   : fractions[rng_below(rng, 7)];
        break;
    default:
        break;
    }
    j->cpu_milli = cpus[rng_below(rng, 7)];
    j->memory_mib = mems[rng_below(rng, 6)];
    j->scope = (uint8_t)rng_below(rng, 4);
    j->scope_required = rng_below(rng, 2);
    if (rng_below(rng, 4) == 0) {
        j->n_gpu_models = 1 + rng_below(rng, 2);
        j->gpu_models = calloc(j->n_gpu_models, sizeof(char *));
        assert_non_null(j->gpu_models);
        for (size_t i = 0; i < j->n_gpu_models; i++)
            j->gpu_models[i] = dup_or_die(
                c && rng_below(rng, 4) ? node_model(c, &c->nodes[rng_below(rng, c->n_nodes)])->name
                                       : names[rng_below(rng, 5)]);
    }
    if (rng_below(rng, 6) == 0)
        j->fabric = dup_or_die(c && c->n_fabrics > 1 && rng_below(rng, 4)
                                   ? c->fabrics[1 + rng_below(rng, c->n_fabrics - 1)]
                               : rng_below(rng, 2) ? "ib"
                                                   : "roce");
    if (rng_below(rng, 5) == 0)
        j->tiers = (uint8_t)(1 + rng_below(rng, TIERS_ALL));
    if (rng_below(rng, 8) == 0)
        j->priority = PRIO_PRODUCTION;
    j->kind = (uint8_t)rng_below(rng, KIND_COUNT);
    j->preemptible = rng_below(rng, 2);
    if (rng_below(rng, 3) == 0)
        j->checkpoint_interval_ms = 600000;
    else if (rng_below(rng, 3) == 0)
        j->checkpoint_cost_ms = 20000;
}

/* ---- dumps for a failure or a replay ---- */

static void dump_job(const JobSpec *j)
{
    fprintf(stderr,
            "  job: req=%s workers=%u gpus=%u mig=%s mem=%llu frac=%u cpu=%u hostmem=%u "
            "scope=%s%s tiers=%#x prio=%u fabric=%s models=",
            req_kind_name((ReqKind)j->req), j->workers, j->gpus, j->mig ? j->mig : "-",
            (unsigned long long)j->gpu_memory_mib, j->fraction_milli, j->cpu_milli, j->memory_mib,
            scope_name((Scope)j->scope), j->scope_required ? "(required)" : "", j->tiers,
            j->priority, j->fabric ? j->fabric : "-");
    for (size_t i = 0; i < j->n_gpu_models; i++)
        fprintf(stderr, "%s%s", i ? "," : "", j->gpu_models[i]);
    fprintf(stderr, "\n");
    if (cur.c)
        dump_state(cur.c);
}

static void dump_state(const Cluster *c)
{
    for (size_t i = 0; i < c->n_nodes; i++) {
        const Node *n = &c->nodes[i];
        const GpuModel *m = node_model(c, n);
        fprintf(stderr,
                "  node %s: %s x%u %s mig=%d leaf=%d spine=%d tier=%s fabric=%s sched=%d "
                "cpu %u/%u mem %u/%u\n",
                n->name, m->name, n->n_gpus, interconnect_name((Interconnect)n->interconnect),
                n->mig_allowed, (int)n->leaf, (int)n->spine, tier_name(c->pools[n->pool].tier),
                c->fabrics[n->fabric], n->schedulable, n->cpu_used_milli, n->cpu_milli,
                n->memory_used_mib, n->memory_mib);
        for (unsigned g = 0; g < n->n_gpus; g++) {
            const Gpu *gpu = node_gpu_c(c, n, g);
            fprintf(stderr, "    gpu%u mode=%u used=%u clients=%u busy=%#x layout:", g, gpu->mode,
                    gpu->used_units, gpu->n_clients, gpu->mig_busy);
            for (int s = 0; s < MIG_MAX_SLOTS; s++)
                if (gpu->mig.profile_at[s] != MIG_NONE)
                    fprintf(stderr, " %s@%d", m->profiles[gpu->mig.profile_at[s]].name, s);
            fprintf(stderr, "\n");
        }
    }
}

/* ---- the driver ---- */

typedef struct Stats {
    unsigned sets, jobs, placed, refused, invalid, ref_yes, recarved, released;
    unsigned preferred; /* jobs that prefer owned and reserved capacity and fit there */
    unsigned placed_kind[5];
} Stats;

/* A random expected mix for the fragmentation-aware policies. */
static int random_mix(Rng *rng, const Cluster *c, Mix *mix)
{
    mix->n = 0;
    mix->e = calloc(4, sizeof(MixEntry));
    if (!mix->e)
        return -1;
    for (int k = 0; k < 4; k++) {
        JobSpec j;
        random_job(rng, NULL, &j);
        Buf why = {0};
        if (request_from_job(c, &j, &mix->e[mix->n].r, &why) == 0)
            mix->e[mix->n++].weight = 1;
        buf_free(&why);
        job_spec_free(&j);
    }
    for (size_t k = 0; k < mix->n; k++)
        mix->e[k].weight = 1.0 / (double)mix->n;
    return 0;
}

static void run_set(uint64_t seed, const Policy *pol, Stats *st)
{
    Rng crng, jrng, prng;
    rng_seed(&crng, seed);
    rng_seed(&jrng, seed ^ 0x5eed5eed5eedull);
    rng_seed(&prng, seed * 31 + 7);
    cur.seed = seed;
    cur.policy = pol->name;
    cur.job = 0;
    cur.j = NULL;
    Cluster *c = random_cluster(&crng);
    assert_non_null(c);
    cur.c = c;
    Mix mix = {0};
    bool with_mix = rng_below(&crng, 2) == 0;
    if (with_mix)
        assert_int_equal(random_mix(&crng, c, &mix), 0);
    /* sometimes a node order for ties, sometimes a score cache */
    uint32_t order[8];
    for (uint32_t i = 0; i < c->n_nodes; i++)
        order[i] = i;
    bool with_order = rng_below(&crng, 2) == 0;
    if (with_order)
        rng_shuffle(&crng, order, c->n_nodes, sizeof(order[0]));
    PlaceCtx ctx;
    assert_int_equal(
        place_ctx_init(&ctx, c, pol, &prng, with_order ? order : NULL, with_mix ? &mix : NULL), 0);
    ScoreCache cache;
    Request shapes[JOBS_PER_SET];
    size_t n_shapes = 0;
    bool with_cache = rng_below(&crng, 2) == 0;
    if (with_cache) {
        assert_int_equal(score_cache_init(&cache, c->n_nodes, JOBS_PER_SET), 0);
        ctx.cache = &cache;
    }
    Placement live[JOBS_PER_SET];
    size_t n_live = 0;
    st->sets++;
    for (unsigned k = 0; k < JOBS_PER_SET; k++) {
        cur.job = k;
        /* sometimes release an earlier placement first */
        if (n_live && rng_below(&jrng, 3) == 0) {
            size_t v = rng_below(&jrng, n_live);
            place_release(c, &live[v]);
            placement_free(&live[v]);
            live[v] = live[--n_live];
            st->released++;
            CHECK(cluster_consistent(c), "inconsistent after release");
        }
        JobSpec j;
        random_job(&jrng, c, &j);
        cur.j = &j;
        st->jobs++;
        if (cur.verbose) {
            fprintf(stderr, "--- job %u\n", k);
            dump_job(&j);
        }
        bool feasible = ref_feasible(c, &j);
        st->ref_yes += feasible;
        /* a job that prefers owned and reserved capacity and fits there lands there */
        unsigned preferred = ref_preferred(&j);
        JobSpec on_preferred = j;
        on_preferred.tiers = (uint8_t)preferred;
        bool fits_preferred = preferred && ref_feasible(c, &on_preferred);
        st->preferred += fits_preferred;
        Request r;
        Buf why = {0};
        int rc = request_from_job(c, &j, &r, &why);
        if (rc < 0) {
            CHECK(rc == -EINVAL, "request_from_job = %d", rc);
            CHECK(buf_str(&why)[0] != '\0', "no reason for an unresolvable job");
            CHECK(!feasible, "unresolvable job (%s) that the reference can place", buf_str(&why));
            st->invalid++;
            buf_free(&why);
            job_spec_free(&j);
            continue;
        }
        /* the resolution agrees with the reference's */
        for (size_t i = 0; i < c->n_nodes; i++) {
            const Node *n = &c->nodes[i];
            NodeAsk a = ref_ask(c, c->gpus, n, &j);
            if (a.how == ASK_MIG)
                CHECK(r.mig_profile[n->model] == a.profile, "resolved profile %d, want %d",
                      r.mig_profile[n->model], a.profile);
            if (a.how == ASK_SHARE)
                CHECK(r.share_milli[n->model] == a.milli, "resolved share %u, want %u",
                      r.share_milli[n->model], a.milli);
        }
        if (with_cache) {
            /* requests of the same shape share a cache row */
            size_t sh = 0;
            while (sh < n_shapes && !request_same_shape(&shapes[sh], &r))
                sh++;
            if (sh == n_shapes)
                shapes[n_shapes++] = r;
            r.shape = (int32_t)sh;
        }
        static Snap before;
        take_snap(c, &before);
        Placement pl = {0};
        rc = place_job(&ctx, c, &r, &pl, &why);
        CHECK(rc == 0 || rc == 1, "place_job = %d (%s)", rc, buf_str(&why));
        if (rc == 1) {
            check_placement(c, &j, &before, &pl);
            CHECK(feasible, "placed a job the reference says cannot be placed");
            for (size_t w = 0; fits_preferred && w < pl.n_workers; w++)
                CHECK((preferred >> c->pools[c->nodes[pl.workers[w].node].pool].tier) & 1,
                      "worker %zu on %s, though owned and reserved capacity had room", w,
                      tier_name(c->pools[c->nodes[pl.workers[w].node].pool].tier));
            st->placed++;
            st->placed_kind[j.req]++;
            for (size_t x = 0; x < pl.n_changes; x++)
                for (int s = 0; s < MIG_MAX_SLOTS; s++)
                    st->recarved +=
                        pl.changes[x].before.profile_at[s] != MIG_NONE &&
                        pl.changes[x].after.profile_at[s] != pl.changes[x].before.profile_at[s];
            live[n_live++] = pl;
        } else {
            CHECK(!feasible, "refused a job the reference can place: %s", buf_str(&why));
            check_unchanged(c, &before);
            CHECK(buf_str(&why)[0] != '\0', "refused without a reason");
            st->refused++;
            placement_free(&pl);
        }
        buf_free(&why);
        job_spec_free(&j);
        cur.j = NULL;
    }
    for (size_t v = n_live; v-- > 0;) {
        place_release(c, &live[v]);
        placement_free(&live[v]);
    }
    CHECK(c->used_units == 0 && cluster_consistent(c), "cluster not empty after releasing all");
    place_ctx_free(&ctx);
    if (with_cache)
        score_cache_free(&cache);
    free(mix.e);
    cluster_free(c);
    cur.c = NULL;
}

/* BF_SETS=<n> runs n job sets per policy instead (for long searches). */
static void run_policy(const char *name, unsigned sets, uint64_t base)
{
    if (getenv("BF_SETS"))
        sets = (unsigned)strtoul(getenv("BF_SETS"), NULL, 0);
    const Policy *pol = policy_find(name);
    assert_non_null(pol);
    Stats st = {0};
    for (unsigned s = 0; s < sets; s++)
        run_set(base + s, pol, &st);
    print_message("%s: %u job sets, %u jobs: %u placed (%u none, %u gpus, %u mig, %u memory, "
                  "%u fraction), %u refused, %u unresolvable, %u releases, %u instances "
                  "re-carved, %u kept to owned and reserved capacity\n",
                  name, st.sets, st.jobs, st.placed, st.placed_kind[REQ_NONE],
                  st.placed_kind[REQ_GPUS], st.placed_kind[REQ_MIG], st.placed_kind[REQ_MEMORY],
                  st.placed_kind[REQ_FRACTION], st.refused, st.invalid, st.released, st.recarved,
                  st.preferred);
    /* the generator reaches every case it is meant to */
    assert_true(st.placed > st.jobs / 4);
    assert_true(st.refused > st.jobs / 20);
    assert_true(st.recarved > 0);
    assert_true(st.preferred > 0);
    for (int k = 0; k < 5; k++)
        assert_true(st.placed_kind[k] > 0);
}

static void test_gpuorch(void **state)
{
    run_policy("gpuorch", SETS_MAIN, 1000000);
}

static void test_first_fit(void **state)
{
    run_policy("first-fit", SETS_MAIN, 1000000);
}

static void test_best_fit(void **state)
{
    run_policy("best-fit", SETS_MAIN, 1000000);
}

/* The other policies that place gangs whole share the same promise. */
static void test_other_gang_policies(void **state)
{
    for (size_t i = 0; i < policy_count(); i++) {
        const Policy *p = policy_at(i);
        if (p->flags & (POLICY_NO_GANG | POLICY_INDIVISIBLE))
            continue;
        if (!strcmp(p->name, "gpuorch") || !strcmp(p->name, "first-fit") ||
            !strcmp(p->name, "best-fit"))
            continue;
        run_policy(p->name, SETS_OTHERS, 2000000);
    }
}

/* BF_SEED=<seed> [BF_POLICY=<name>]: replay one job set verbosely. */
static void test_replay(void **state)
{
    const char *seed = getenv("BF_SEED");
    if (!seed) {
        skip();
        return;
    }
    const char *name = getenv("BF_POLICY") ? getenv("BF_POLICY") : "gpuorch";
    const Policy *pol = policy_find(name);
    assert_non_null(pol);
    cur.verbose = true;
    Stats st = {0};
    run_set(strtoull(seed, NULL, 0), pol, &st);
    print_message("replayed: %u placed, %u refused\n", st.placed, st.refused);
}

int main(void)
{
    if (getenv("BF_SEED")) {
        const struct CMUnitTest replay[] = {cmocka_unit_test(test_replay)};
        return cmocka_run_group_tests(replay, NULL, NULL);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpuorch),
        cmocka_unit_test(test_first_fit),
        cmocka_unit_test(test_best_fit),
        cmocka_unit_test(test_other_gang_policies),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
