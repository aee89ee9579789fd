/* test_preempt.c: victim selection (core/preempt.c) and what the cycle does with the
 * victims (core/sched.c). Running work is put on the nodes a scene needs (the placer,
 * kept to chosen nodes), the teams' guaranteed and borrowed work is classified by a
 * cycle, and preempt_plan is asked directly; every plan is checked to leave the cluster
 * exactly as it found it (all counters, every GPU's MIG layout and busy mask). Each scene
 * is worked out by hand above its test, with lost work = GPU units held x ms since the
 * victim's last checkpoint (28,000 units a GPU):
 *  - quota mode (gpuorch): borrowed work of another team first, preemptible or not; then
 *    preemptible work of a lower class; never another team's guaranteed work for a
 *    normal or low job; never production (which may borrow above its guarantee, up to
 *    its burst limit); never before min_runtime_ms, except for production (whose
 *    victims get their grace and go however young); the set losing the least work wins,
 *    then the fewest victims, then the shortest grace; a gang victim counts and goes
 *    whole; only production or work inside its guarantee may preempt at all;
 *  - kube priority mode: any lower class, the node whose victims' highest class is the
 *    least important, then the fewest victims;
 *  - Tiresias: lower-queue work, the latest submitted first;
 *  - in the cycle: victims are marked stopping for the preemptor, keep their allocation
 *    until sched_release, and the room they free is held for the preemptor;
 *  - a job its team's burst limit holds back: the team's own preemptible work of a
 *    lower class, past its minimum (any, for production), yields the quota (least lost work), and
 * the job starts before the team's smaller, lower work can take the room. A comment that begins
 * with "Rule:" pins a rule the code broke when the test was written, and says how it fails. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "sched_fixture.h"

#include "core/cluster.h"
#include "core/job.h"
#include "core/place.h"
#include "core/preempt.h"
#include "core/sched.h"
#include "util/buf.h"
#include "util/rng.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_JOBS  32
#define MAX_NODES 8
#define MAX_GPUS  32
#define MIN_MS    INT64_C(60000)
#define HOUR_MS   INT64_C(3600000)
#define NOW       HOUR_MS /* every victim started at 0 ran an hour: past min_runtime_ms */

#define PREEMPTING_REASON "preempting lower-priority or borrowed work to make room: job "
#define STOPPING_REASON   "waiting for the work preempted for it to stop: job "
#define assert_reason_has(j, text)                                                                 \
    do {                                                                                           \
        if (!strstr((j)->reason, text))                                                            \
            fail_msg("the reason \"%s\" lacks \"%s\"", (j)->reason, text);                         \
    } while (0)

/* ---- the world: a cluster, a placer, a scheduler and the caller's jobs ---- */

typedef struct World {
    Cluster *c;
    Rng rng;
    PlaceCtx ctx;
    Sched s;
    SchedJob jobs[MAX_JOBS];
    size_t n_jobs;
    SchedJob *running[MAX_JOBS];
    size_t n_running;
    SchedDecisions d;
    int64_t now; /* the last cycle's time */
} World;

static int world_setup(void **state)
{
    *state = calloc(1, sizeof(World));
    return *state ? 0 : -1;
}

static void world_free(World *w)
{
    for (size_t i = 0; i < w->n_jobs; i++)
        placement_free(&w->jobs[i].pl);
    sched_decisions_free(&w->d);
    sched_free(&w->s);
    place_ctx_free(&w->ctx);
    cluster_free(w->c);
    memset(w, 0, sizeof(*w));
}

static int world_teardown(void **state)
{
    World *w = *state;
    if (w->c)
        world_free(w);
    free(w);
    return 0;
}

/* A pool of `nodes` H100 nodes of `gpus` GPUs. */
static void add_pool(Cluster *c, const char *name, unsigned gpus, unsigned nodes, bool mig)
{
    fixture_add_pool(c, name, "H100", TIER_OWNED, gpus, nodes, mig);
}

static void add_team(Cluster *c, const char *name, double guaranteed, double burst)
{
    fixture_add_team(c, name, guaranteed, burst);
}

/* A world on a new cluster of `n` nodes of `gpus` GPUs; add teams or pools, then call
 * world_start. */
static Cluster *world_init(World *w, unsigned gpus, unsigned n, bool mig)
{
    memset(w, 0, sizeof(*w));
    w->c = cluster_new("t");
    assert_non_null(w->c);
    add_pool(w->c, "h", gpus, n, mig);
    return w->c;
}

/* The placer (first-fit) and the scheduler (the gpuorch defaults with the preemption
 * mode and order given; min_runtime_ms stays 5 minutes), once the cluster is built. */
static void world_start(World *w, SchedPreempt mode, SchedOrder order)
{
    SchedConfig cfg;
    sched_config_gpuorch(&cfg);
    cfg.preempt = mode;
    cfg.order = order;
    assert_int_equal(cfg.min_runtime_ms, 5 * MIN_MS);
    rng_seed(&w->rng, 1);
    assert_int_equal(place_ctx_init(&w->ctx, w->c, policy_find("first-fit"), &w->rng, NULL, NULL),
                     0);
    assert_int_equal(sched_init(&w->s, w->c, &w->ctx, &cfg, 0), 0);
}

static SchedJob *job(World *w, JobArgs a)
{
    assert_true(w->n_jobs < MAX_JOBS);
    SchedJob *j = &w->jobs[w->n_jobs];
    *j = fixture_job(w->c, (uint32_t)w->n_jobs, a);
    w->n_jobs++;
    return j;
}

/* Run j from start_ms with its last checkpoint at ckpt_ms, on the nodes of `mask` (bit i:
 * node i) as an earlier cycle would have started it there. */
static SchedJob *run_on(World *w, JobArgs a, unsigned mask, int64_t start_ms, int64_t ckpt_ms)
{
    SchedJob *j = job(w, a);
    uint8_t blocked[MAX_NODES];
    assert_true(w->c->n_nodes <= MAX_NODES);
    for (size_t i = 0; i < w->c->n_nodes; i++)
        blocked[i] = !(mask & (1u << i));
    w->ctx.blocked = blocked;
    Buf why = {0};
    int rc = place_job(&w->ctx, w->c, &j->req, &j->pl, &why);
    w->ctx.blocked = NULL;
    if (rc != 1)
        fail_msg("job %u does not fit on nodes %#x: %s", j->id, mask, buf_str(&why));
    buf_free(&why);
    for (size_t i = 0; i < j->pl.n_workers; i++)
        j->units += worker_units(w->c, &j->pl.workers[i]);
    j->running = true;
    j->run_start_ms = start_ms;
    j->last_checkpoint_ms = ckpt_ms;
    w->running[w->n_running++] = j;
    return j;
}

/* One cycle at now over the queue (the running work is classified by it). */
static void cycle(World *w, int64_t now)
{
    w->d.n = 0;
    w->now = now;
    assert_int_equal(sched_cycle(&w->s, now, w->running, w->n_running, &w->d), 0);
    for (size_t k = 0; k < w->d.n; k++) {
        if (w->d.d[k].kind != SCHED_START)
            continue;
        SchedJob *j = &w->jobs[w->d.d[k].job];
        assert_true(j->running);
        assert_int_equal(j->pl.n_workers, j->req.workers);
        w->running[w->n_running++] = j;
    }
    assert_true(cluster_consistent(w->c));
}

/* The job ends at t. */
static void finish_at(World *w, SchedJob *j, int64_t t)
{
    size_t keep = 0;
    for (size_t i = 0; i < w->n_running; i++)
        if (w->running[i] != j)
            w->running[keep++] = w->running[i];
    assert_int_equal(keep + 1, w->n_running);
    w->n_running = keep;
    sched_release(&w->s, j, t);
    assert_true(cluster_consistent(w->c));
}

/* The job ends at the last cycle's time. */
static void finish(World *w, SchedJob *j)
{
    finish_at(w, j, w->now);
}

/* Everything about the allocation state but the nodes' version stamps. */
typedef struct Snapshot {
    uint64_t used;
    struct {
        uint32_t used_units, cpu_used, mem_used;
        uint8_t free_whole, idle_mig;
        uint16_t by_gpus[NODE_MAX_GPUS + 1];
    } node[MAX_NODES];
    Gpu gpu[MAX_GPUS];
} Snapshot;

static void snapshot(const Cluster *c, Snapshot *s)
{
    assert_true(c->n_nodes <= MAX_NODES && c->n_gpus <= MAX_GPUS);
    memset(s, 0, sizeof(*s));
    s->used = c->used_units;
    for (size_t i = 0; i < c->n_nodes; i++) {
        const Node *n = &c->nodes[i];
        s->node[i].used_units = n->used_units;
        s->node[i].cpu_used = n->cpu_used_milli;
        s->node[i].mem_used = n->memory_used_mib;
        s->node[i].free_whole = n->free_whole;
        s->node[i].idle_mig = n->idle_mig;
        memcpy(s->node[i].by_gpus, n->workers_by_gpus, sizeof(n->workers_by_gpus));
    }
    for (size_t i = 0; i < c->n_gpus; i++) {
        const Gpu *g = &c->gpus[i];
        s->gpu[i] = (Gpu){.mode = g->mode,
                          .mig_busy = g->mig_busy,
                          .draining = g->draining,
                          .n_clients = g->n_clients,
                          .used_units = g->used_units,
                          .mig = g->mig};
    }
}

/* preempt_plan for j at now; the cluster must come back exactly as it was. The victims
 * go to ret (MAX_JOBS of them at most); returns how many. */
static size_t plan(World *w, int64_t now, const SchedJob *j, SchedJob **ret)
{
    Snapshot before, after;
    snapshot(w->c, &before);
    SchedJob **v = NULL;
    size_t n = 0;
    int rc = preempt_plan(&w->s, now, j, w->running, w->n_running, &v, &n);
    if (n <= MAX_JOBS && v)
        memcpy(ret, v, n * sizeof(*v));
    free(v);
    assert_int_equal(rc, 0);
    assert_true(n <= MAX_JOBS);
    assert_true(cluster_consistent(w->c));
    snapshot(w->c, &after);
    assert_int_equal(after.used, before.used);
    assert_memory_equal(&after, &before, sizeof(before));
    return n;
}

/* The victims are exactly `want` (in any order). */
static void assert_victims(SchedJob *const *v, size_t n, const SchedJob *const *want, size_t n_want)
{
    bool ok = n == n_want;
    for (size_t i = 0; ok && i < n_want; i++) {
        bool found = false;
        for (size_t k = 0; k < n; k++)
            found |= v[k] == want[i];
        ok = found;
    }
    if (!ok) {
        char got[128] = "", exp[128] = "";
        for (size_t k = 0; k < n && k < 16; k++)
            snprintf(got + strlen(got), sizeof(got) - strlen(got), " %u", v[k]->id);
        for (size_t k = 0; k < n_want && k < 16; k++)
            snprintf(exp + strlen(exp), sizeof(exp) - strlen(exp), " %u", want[k]->id);
        fail_msg("victims {%s }, expected {%s }", got, exp);
    }
}

static void expect_plan(World *w, int64_t now, const SchedJob *j, const SchedJob *const *want,
                        size_t n_want)
{
    SchedJob *v[MAX_JOBS];
    size_t n = plan(w, now, j, v);
    assert_victims(v, n, want, n_want);
}

static bool preempted_for(const World *w, const SchedJob *victim, const SchedJob *for_job)
{
    for (size_t k = 0; k < w->d.n; k++) {
        const SchedDecision *d = &w->d.d[k];
        if (d->kind == SCHED_PREEMPT && d->job == victim->id && d->for_job == for_job->id)
            return true;
    }
    return false;
}

static size_t count(const World *w, SchedDecisionKind kind)
{
    size_t n = 0;
    for (size_t k = 0; k < w->d.n; k++)
        n += w->d.d[k].kind == kind;
    return n;
}

static bool started(const World *w, const SchedJob *j)
{
    for (size_t k = 0; k < w->d.n; k++)
        if (w->d.d[k].kind == SCHED_START && w->d.d[k].job == j->id)
            return true;
    return false;
}

/* ---- quota mode (gpuorch) ---- */

/* Teams A and B, each guaranteed 4 GPUs, burst 8; two nodes of 4 GPUs.
 *   b1: B, high, not preemptible, 4 GPUs on node 0, from 0 (inside B's guarantee);
 *   b2: B, high, not preemptible, 2 GPUs on node 1, from 1,000 (B would hold 6: borrowed),
 *       last checkpoint 0: loses 2 x 28,000 x 3,600,000 = 2.0e11;
 *   a1: A, low, preemptible, 2 GPUs on node 1, from 0, checkpointed a second ago: would
 *       lose only 2 x 28,000 x 1,000 = 5.6e7.
 * p (A, normal, 2 GPUs): A holds 2, so 2 more are inside its guarantee and p may preempt.
 * Borrowed work goes first, of any team, preemptible or not, of a higher class too: the
 * victim is b2, not the far cheaper a1. In the cycle: SCHED_PREEMPT b2 for p, b2 stopping
 * and nominated p, still holding its GPUs; p says it is preempting. The next cycle takes
 * nobody else and p waits for b2 to stop; once b2 is released p starts on node 1. */
static void test_quota_borrowed_first_across_teams(void **state)
{
    World *w = *state;
    Cluster *c = world_init(w, 4, 2, false);
    add_team(c, "a", 4, 8);
    add_team(c, "b", 4, 8);
    world_start(w, SCHED_PREEMPT_QUOTA, SCHED_ORDER_PRIORITY);
    SchedJob *b1 = run_on(w, (JobArgs){.gpus = 4, .prio = "high", .team = "b"}, 1, 0, 0);
    SchedJob *b2 = run_on(w, (JobArgs){.gpus = 2, .prio = "high", .team = "b"}, 2, 1000, 0);
    SchedJob *a1 = run_on(w, (JobArgs){.gpus = 2, .prio = "low", .team = "a", .preemptible = true},
                          2, 0, NOW - 1000);
    SchedJob *p = job(w, (JobArgs){.gpus = 2, .team = "a", .submit_ms = 10});
    cycle(w, NOW); /* classify */
    assert_false(b1->borrowed);
    assert_true(b2->borrowed);
    assert_false(a1->borrowed);
    const SchedJob *want[] = {b2};
    expect_plan(w, NOW, p, want, 1);

    assert_int_equal(sched_enqueue(&w->s, p), 0);
    cycle(w, NOW);
    assert_int_equal(count(w, SCHED_PREEMPT), 1);
    assert_true(preempted_for(w, b2, p));
    assert_true(b2->stopping);
    assert_int_equal(b2->nominated, p->id);
    assert_true(b2->running);
    assert_int_equal(b2->pl.n_workers, 1);
    assert_int_equal(c->used_units, 8 * GPU_UNITS);
    assert_false(a1->stopping);
    assert_reason_has(p, PREEMPTING_REASON);

    cycle(w, NOW + 1000);
    assert_int_equal(count(w, SCHED_PREEMPT), 0);
    assert_false(started(w, p));
    assert_reason_has(p, STOPPING_REASON);

    finish(w, b2);
    assert_false(b2->stopping);
    assert_int_equal(b2->nominated, SCHED_NONE);
    cycle(w, NOW + 2000);
    assert_true(started(w, p));
    assert_int_equal(p->pl.workers[0].node, 1);
}

/* Borrowed first holds between nodes too. Team A guaranteed 6, team B 2 (bursts 8); two
 * nodes of 4 GPUs.
 *   node 0: a1 (A, low, preemptible, 2 GPUs, checkpointed a second ago: 5.6e7) and a2
 *           (A, normal, not preemptible, 2 GPUs), both inside A's guarantee;
 *   node 1: b1 (B, high, 2 GPUs, from 0: B's guarantee) and b2 (B, high, 2 GPUs, from
 *           1,000: borrowed, never checkpointed: 2 x 28,000 x 3,600,000 = 2.0e11).
 * p (A, normal, 2 GPUs; A would hold 6, inside): {b2} on node 1, not the far cheaper {a1}
 * on node 0. */
static void test_quota_borrowed_first_over_cheaper_nodes(void **state)
{
    World *w = *state;
    Cluster *c = world_init(w, 4, 2, false);
    add_team(c, "a", 6, 8);
    add_team(c, "b", 2, 8);
    world_start(w, SCHED_PREEMPT_QUOTA, SCHED_ORDER_PRIORITY);
    run_on(w, (JobArgs){.gpus = 2, .prio = "low", .team = "a", .preemptible = true}, 1, 0,
           NOW - 1000);
    run_on(w, (JobArgs){.gpus = 2, .team = "a"}, 1, 0, 0);
    run_on(w, (JobArgs){.gpus = 2, .prio = "high", .team = "b"}, 2, 0, 0);
    SchedJob *b2 = run_on(w, (JobArgs){.gpus = 2, .prio = "high", .team = "b"}, 2, 1000, 0);
    SchedJob *p = job(w, (JobArgs){.gpus = 2, .team = "a"});
    cycle(w, NOW);
    assert_true(b2->borrowed);
    const SchedJob *want[] = {b2};
    expect_plan(w, NOW, p, want, 1);
}

/* Rule: a job never reclaims its own team's borrowed work of its class. Team A guaranteed
 * 6, team B 2 (bursts 12); three nodes of 4 GPUs:
 *   a1: A, normal, preemptible, 4 GPUs on node 0, from 0: inside A's guarantee;
 *   a2: A, normal, preemptible, 4 GPUs on node 1, from 1,000: A would hold 8 > 6, so
 *       borrowed; checkpointed a second ago: would lose 4 x 28,000 x 1,000 = 1.1e8;
 *   b1: B, low, preemptible, 4 GPUs on node 2, from 2,000: borrowed (4 > 2), never
 *       checkpointed: would lose 4 x 28,000 x 3,600,000 = 4.0e11.
 * p (A, normal, 2 GPUs): A's guaranteed part is 4, so 2 more are inside and p may
 * preempt. Only B's borrowed b1 may go: taking a2 would swap one of A's jobs for
 * another. The test failed with the plan {a2}, the cheaper: two pretraining gangs of one
 * team took turns preempting each other in mix-demo (seed 4). */
static void test_quota_never_own_teams_borrowed(void **state)
{
    World *w = *state;
    Cluster *c = world_init(w, 4, 3, false);
    add_team(c, "a", 6, 12);
    add_team(c, "b", 2, 12);
    world_start(w, SCHED_PREEMPT_QUOTA, SCHED_ORDER_PRIORITY);
    SchedJob *a1 = run_on(w, (JobArgs){.gpus = 4, .team = "a", .preemptible = true}, 1, 0, 0);
    SchedJob *a2 =
        run_on(w, (JobArgs){.gpus = 4, .team = "a", .preemptible = true}, 2, 1000, NOW - 1000);
    SchedJob *b1 = run_on(w, (JobArgs){.gpus = 4, .prio = "low", .team = "b", .preemptible = true},
                          4, 2000, 0);
    SchedJob *p = job(w, (JobArgs){.gpus = 2, .team = "a"});
    cycle(w, NOW);
    assert_false(a1->borrowed);
    assert_true(a2->borrowed);
    assert_true(b1->borrowed);
    const SchedJob *want[] = {b1};
    expect_plan(w, NOW, p, want, 1);
}

/* Team A guaranteed 4, team B guaranteed 4 (bursts 8); two nodes of 4 GPUs:
 *   b1: B, low, preemptible, 4 GPUs on node 0 (inside B's guarantee);
 *   x:  no team, production, 4 GPUs on node 1 (borrowed, but production).
 * A job of A asking 4 GPUs is inside A's guarantee. As normal or low it may not take B's
 * guaranteed work, and production is never a victim: no victims. As high (or production)
 * it may take b1, a preemptible job of a lower class. A normal job of B itself may take
 * its own team's low preemptible work when that stays inside B's guarantee (B guaranteed
 * 8 in that case). */
static void test_quota_other_teams_guaranteed_work(void **state)
{
    World *w = *state;
    static const struct {
        const char *team, *prio;
        double b_guarantee;
        bool takes_b1;
    } cases[] = {
        {"a", "normal", 4, false},    {"a", "low", 4, false},   {"a", "high", 4, true},
        {"a", "production", 4, true}, {"b", "normal", 8, true},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        Cluster *c = world_init(w, 4, 2, false);
        add_team(c, "a", 4, 8);
        add_team(c, "b", cases[i].b_guarantee, 8);
        world_start(w, SCHED_PREEMPT_QUOTA, SCHED_ORDER_PRIORITY);
        SchedJob *b1 = run_on(
            w, (JobArgs){.gpus = 4, .prio = "low", .team = "b", .preemptible = true}, 1, 0, 0);
        SchedJob *x =
            run_on(w, (JobArgs){.gpus = 4, .prio = "production", .preemptible = true}, 2, 0, 0);
        SchedJob *p = job(w, (JobArgs){.gpus = 4, .prio = cases[i].prio, .team = cases[i].team});
        cycle(w, NOW);
        assert_false(b1->borrowed);
        assert_true(x->borrowed);
        const SchedJob *want[] = {b1};
        expect_plan(w, NOW, p, want, cases[i].takes_b1 ? 1 : 0);
        world_free(w);
    }
}

/* Only production work or work inside its team's guarantee may preempt. Team A is
 * guaranteed 1 GPU (burst 8); one node of 4 GPUs held by x (no team, low, preemptible,
 * borrowed: the easiest victim there is). At 1 h: p (A, normal, 2 GPUs) is outside A's
 * guarantee: it waits and preempts nobody; p1 (A, normal, 1 GPU) behind it is inside and
 * preempts x. In another run q (A, production, 4 GPUs), far outside A's guarantee,
 * preempts x because it is production. */
static void test_quota_who_may_preempt(void **state)
{
    World *w = *state;
    Cluster *c = world_init(w, 4, 1, false);
    add_team(c, "a", 1, 8);
    world_start(w, SCHED_PREEMPT_QUOTA, SCHED_ORDER_PRIORITY);
    SchedJob *x = run_on(w, (JobArgs){.gpus = 4, .prio = "low", .preemptible = true}, 1, 0, 0);
    SchedJob *p = job(w, (JobArgs){.gpus = 2, .team = "a", .submit_ms = 1});
    SchedJob *p1 = job(w, (JobArgs){.gpus = 1, .team = "a", .submit_ms = 2});
    assert_int_equal(sched_enqueue(&w->s, p), 0);
    cycle(w, NOW);
    assert_int_equal(count(w, SCHED_PREEMPT), 0);
    assert_false(x->stopping);
    assert_int_equal(sched_enqueue(&w->s, p1), 0);
    cycle(w, NOW + 1);
    assert_int_equal(count(w, SCHED_PREEMPT), 1);
    assert_true(preempted_for(w, x, p1));
    world_free(w);

    c = world_init(w, 4, 1, false);
    add_team(c, "a", 1, 8);
    world_start(w, SCHED_PREEMPT_QUOTA, SCHED_ORDER_PRIORITY);
    x = run_on(w, (JobArgs){.gpus = 4, .prio = "low", .preemptible = true}, 1, 0, 0);
    SchedJob *q = job(w, (JobArgs){.gpus = 4, .prio = "production", .team = "a"});
    assert_int_equal(sched_enqueue(&w->s, q), 0);
    cycle(w, NOW);
    assert_true(preempted_for(w, x, q));
    world_free(w);
}

/* No teams; p is production and asks 4 GPUs; every victim is low and preemptible and ran
 * from 0. Node 0: v3 (4 GPUs) last checkpointed 20 min ago: 4 x 28,000 x 1,200,000 =
 * 1.344e11. Node 1: v1 and v2 (2 GPUs each) checkpointed 10 min ago: 2 x 2 x 28,000 x
 * 600,000 = 6.72e10. The set that loses the least work wins although it has two victims,
 * and although node 0 comes first: {v1, v2}. */
static void test_quota_least_lost_work_beats_fewer_victims(void **state)
{
    World *w = *state;
    world_init(w, 4, 2, false);
    world_start(w, SCHED_PREEMPT_QUOTA, SCHED_ORDER_PRIORITY);
    JobArgs low4 = {.gpus = 4, .prio = "low", .preemptible = true};
    JobArgs low2 = {.gpus = 2, .prio = "low", .preemptible = true};
    run_on(w, low4, 1, 0, NOW - 20 * MIN_MS);
    SchedJob *v1 = run_on(w, low2, 2, 0, NOW - 10 * MIN_MS);
    SchedJob *v2 = run_on(w, low2, 2, 0, NOW - 10 * MIN_MS);
    SchedJob *p = job(w, (JobArgs){.gpus = 4, .prio = "production"});
    cycle(w, NOW);
    const SchedJob *want[] = {v1, v2};
    expect_plan(w, NOW, p, want, 2);
}

/* Ties. Node 0: v1 and v2 (2 GPUs each, 10 min since checkpoint): 6.72e10 together;
 * node 1: v3 (4 GPUs, 10 min): 4 x 28,000 x 600,000 = 6.72e10 too. Equal lost work: the
 * fewer victims win, {v3}, though node 0 comes first. Then equal lost work and count:
 * node 0's v4 has a grace of 60 s, node 1's v5 one of 10 s: the shorter wait, {v5}. */
static void test_quota_ties_fewer_victims_then_grace(void **state)
{
    World *w = *state;
    world_init(w, 4, 2, false);
    world_start(w, SCHED_PREEMPT_QUOTA, SCHED_ORDER_PRIORITY);
    JobArgs low2 = {.gpus = 2, .prio = "low", .preemptible = true};
    run_on(w, low2, 1, 0, NOW - 10 * MIN_MS);
    run_on(w, low2, 1, 0, NOW - 10 * MIN_MS);
    SchedJob *v3 = run_on(w, (JobArgs){.gpus = 4, .prio = "low", .preemptible = true}, 2, 0,
                          NOW - 10 * MIN_MS);
    SchedJob *p = job(w, (JobArgs){.gpus = 4, .prio = "production"});
    cycle(w, NOW);
    const SchedJob *want[] = {v3};
    expect_plan(w, NOW, p, want, 1);
    world_free(w);

    world_init(w, 4, 2, false);
    world_start(w, SCHED_PREEMPT_QUOTA, SCHED_ORDER_PRIORITY);
    run_on(w, (JobArgs){.gpus = 4, .prio = "low", .preemptible = true, .grace_ms = 60000}, 1, 0,
           NOW - 10 * MIN_MS);
    SchedJob *v5 =
        run_on(w, (JobArgs){.gpus = 4, .prio = "low", .preemptible = true, .grace_ms = 10000}, 2, 0,
               NOW - 10 * MIN_MS);
    p = job(w, (JobArgs){.gpus = 4, .prio = "production"});
    cycle(w, NOW);
    const SchedJob *want5[] = {v5};
    expect_plan(w, NOW, p, want5, 1);
}

/* Rule: among the sets that make room, the one that loses the least work wins, on one
 * node too. One node of 4 GPUs, all held by low preemptible work from 0: a (2 GPUs, 5 min
 * since its checkpoint: 2 x 28,000 x 300,000 = 1.68e10), b and c (1 GPU each, 6 min:
 * 28,000 x 360,000 = 1.008e10 each, 2.016e10 together). p (production, 2 GPUs) needs two
 * GPUs: {a} loses less than {b, c}, and is one victim. */
static void test_quota_least_lost_work_on_one_node(void **state)
{
    World *w = *state;
    world_init(w, 4, 1, false);
    world_start(w, SCHED_PREEMPT_QUOTA, SCHED_ORDER_PRIORITY);
    JobArgs low1 = {.gpus = 1, .prio = "low", .preemptible = true};
    SchedJob *a =
        run_on(w, (JobArgs){.gpus = 2, .prio = "low", .preemptible = true}, 1, 0, NOW - 5 * MIN_MS);
    run_on(w, low1, 1, 0, NOW - 6 * MIN_MS);
    run_on(w, low1, 1, 0, NOW - 6 * MIN_MS);
    SchedJob *p = job(w, (JobArgs){.gpus = 2, .prio = "production"});
    cycle(w, NOW);
    const SchedJob *want[] = {a};
    expect_plan(w, NOW, p, want, 1);
}

/* min_runtime_ms (5 min) protects a fresh job from work that can wait: v (low,
 * preemptible, 4 GPUs) started at 1,000; for p (high, 4 GPUs) at 1,000 + 299,999 there is
 * no victim and the cycle decides no preemption; at 1,000 + 300,000 v has run its minimum
 * and goes. */
static void test_min_runtime_protects_fresh_job(void **state)
{
    World *w = *state;
    world_init(w, 4, 1, false);
    world_start(w, SCHED_PREEMPT_QUOTA, SCHED_ORDER_PRIORITY);
    SchedJob *v =
        run_on(w, (JobArgs){.gpus = 4, .prio = "low", .preemptible = true}, 1, 1000, 1000);
    SchedJob *p = job(w, (JobArgs){.gpus = 4, .prio = "high"});
    int64_t early = 1000 + 5 * MIN_MS - 1, due = 1000 + 5 * MIN_MS;
    cycle(w, early);
    expect_plan(w, early, p, NULL, 0);
    assert_int_equal(sched_enqueue(&w->s, p), 0);
    cycle(w, early);
    assert_int_equal(count(w, SCHED_PREEMPT), 0);
    const SchedJob *want[] = {v};
    expect_plan(w, due, p, want, 1);
    cycle(w, due);
    assert_true(preempted_for(w, v, p));
}

/* Rule: production never waits for a minimum run time; its victims get their grace and
 * go. One node of 4 GPUs; v (low, preemptible, 4 GPUs, grace 30 s) started at 1,000, as a
 * training backlog fills an empty cluster. A minute later, at 61,000, v has run 60 s of
 * its 300: h (high, 4 GPUs) still finds no victim, but p (production, 4 GPUs) does, and
 * the cycle stops v for p at once, v to be gone at 61,000 + 30,000 = 91,000 (h, behind p
 * in the queue, takes nothing); when v has stopped then, p starts on the node, 30 s after
 * it came rather than the 240 s the minimum would have made it wait. Without the rule
 * p's plan at 61,000 is empty (the test fails there). */
static void test_production_skips_min_runtime(void **state)
{
    World *w = *state;
    world_init(w, 4, 1, false);
    world_start(w, SCHED_PREEMPT_QUOTA, SCHED_ORDER_PRIORITY);
    SchedJob *v =
        run_on(w, (JobArgs){.gpus = 4, .prio = "low", .preemptible = true, .grace_ms = 30000}, 1,
               1000, 1000);
    int64_t at = 61000;
    SchedJob *h = job(w, (JobArgs){.gpus = 4, .prio = "high", .submit_ms = at});
    SchedJob *p = job(w, (JobArgs){.gpus = 4, .prio = "production", .submit_ms = at});
    cycle(w, at);
    expect_plan(w, at, h, NULL, 0);
    const SchedJob *want[] = {v};
    expect_plan(w, at, p, want, 1);
    assert_int_equal(sched_enqueue(&w->s, h), 0);
    assert_int_equal(sched_enqueue(&w->s, p), 0);
    cycle(w, at);
    assert_int_equal(count(w, SCHED_PREEMPT), 1);
    assert_true(preempted_for(w, v, p));
    assert_true(v->stopping);
    assert_int_equal(v->stop_at_ms, at + 30000);
    assert_reason_has(p, PREEMPTING_REASON);
    assert_reason_has(p, "in about 30 s at the latest");

    finish_at(w, v, at + 30000);
    assert_int_equal(sched_enqueue(&w->s, v), 0);
    cycle(w, at + 30000);
    assert_true(started(w, p));
    assert_false(started(w, h));
    assert_false(started(w, v));
}

/* Production is never a victim, even borrowed and preemptible. Team A guaranteed 4; a
 * node of 4 GPUs held by x (no team, production, preemptible: borrowed). p (A,
 * production, 4 GPUs) inside its guarantee finds no victim. The same x as high is taken. */
static void test_production_never_a_victim(void **state)
{
    World *w = *state;
    for (int prod = 1; prod >= 0; prod--) {
        Cluster *c = world_init(w, 4, 1, false);
        add_team(c, "a", 4, 8);
        world_start(w, SCHED_PREEMPT_QUOTA, SCHED_ORDER_PRIORITY);
        SchedJob *x = run_on(
            w, (JobArgs){.gpus = 4, .prio = prod ? "production" : "high", .preemptible = true}, 1,
            0, 0);
        SchedJob *p = job(w, (JobArgs){.gpus = 4, .prio = "production", .team = "a"});
        cycle(w, NOW);
        assert_true(x->borrowed);
        const SchedJob *want[] = {x};
        expect_plan(w, NOW, p, want, prod ? 0 : 1);
        world_free(w);
    }
}

/* Production may borrow: only the burst limit holds it, not its team's guarantee; and
 * borrowed production is still never a victim. One node of 8 GPUs; teams A and B, each
 * guaranteed 4, burst 8. p1 (A, production, 4 GPUs) starts at 0, inside A's guarantee;
 * p2 (A, 4 GPUs) starts at 10,000: A holds 8 > 4, so p2 is borrowed. At 1 h, b1 (B, high,
 * 4 GPUs) finds the node full; it is inside B's guarantee, so it may preempt, and
 * borrowed work goes first. With p2 production there is no victim: no SCHED_PREEMPT, b1
 * waits and neither p1 nor p2 stops. The same scene with p2 high: b1 takes p2. */
static void test_production_may_borrow_never_a_victim(void **state)
{
    World *w = *state;
    for (int prod = 1; prod >= 0; prod--) {
        Cluster *c = world_init(w, 8, 1, false);
        add_team(c, "a", 4, 8);
        add_team(c, "b", 4, 8);
        world_start(w, SCHED_PREEMPT_QUOTA, SCHED_ORDER_PRIORITY);
        SchedJob *p1 = job(w, (JobArgs){.gpus = 4, .prio = "production", .team = "a"});
        assert_int_equal(sched_enqueue(&w->s, p1), 0);
        cycle(w, 0);
        assert_true(started(w, p1));
        assert_false(p1->borrowed);
        SchedJob *p2 = job(w, (JobArgs){.gpus = 4,
                                        .prio = prod ? "production" : "high",
                                        .team = "a",
                                        .submit_ms = 10000});
        assert_int_equal(sched_enqueue(&w->s, p2), 0);
        cycle(w, 10000);
        assert_true(started(w, p2));
        assert_true(p2->borrowed);
        assert_float_equal(w->s.ten.teams[0].held_units, 8.0 * GPU_UNITS, 1e-6);

        SchedJob *b1 = job(w, (JobArgs){.gpus = 4, .prio = "high", .team = "b", .submit_ms = NOW});
        const SchedJob *want[] = {p2};
        expect_plan(w, NOW, b1, want, prod ? 0 : 1);
        assert_int_equal(sched_enqueue(&w->s, b1), 0);
        cycle(w, NOW);
        assert_false(p1->stopping);
        if (prod) {
            assert_int_equal(w->d.n, 0);
            assert_true(b1->queued);
            assert_false(p2->stopping);
        } else {
            assert_int_equal(count(w, SCHED_PREEMPT), 1);
            assert_true(preempted_for(w, p2, b1));
            assert_reason_has(b1, PREEMPTING_REASON);
        }
        world_free(w);
    }
}

/* A gang victim counts whole and goes whole. Three nodes of 4 GPUs; all work low and
 * preemptible except f (normal). v is a gang of 2 workers x 2 GPUs, one on node 0 (with 2
 * GPUs free beside it) and one on node 1 (beside f, 2 GPUs). x holds 3 GPUs of node 2.
 * p (production, 3 GPUs) fits on node 0 without v, or on node 2 without x.
 *  - 10 min since both checkpoints: v loses 4 GPUs x 28,000 x 600,000 = 6.72e10 (both
 *    workers, not the 2 GPUs on node 0), x 3 x 28,000 x 600,000 = 5.04e10: x goes.
 *  - v checkpointed 5 min ago: 4 x 28,000 x 300,000 = 3.36e10 < 5.04e10: v goes, once,
 *    and releasing it frees both nodes: node 0 empty, node 1 holding f alone. */
static void test_gang_victim_goes_whole(void **state)
{
    World *w = *state;
    for (int recent = 0; recent <= 1; recent++) {
        world_init(w, 4, 3, false);
        world_start(w, SCHED_PREEMPT_QUOTA, SCHED_ORDER_PRIORITY);
        JobArgs two = {.gpus = 2};
        SchedJob *fill = run_on(w, two, 1, 0, 0);
        SchedJob *f = run_on(w, two, 2, 0, 0);
        SchedJob *v =
            run_on(w, (JobArgs){.gpus = 2, .workers = 2, .prio = "low", .preemptible = true}, 3, 0,
                   NOW - (recent ? 5 : 10) * MIN_MS);
        assert_int_equal(v->pl.workers[0].node + v->pl.workers[1].node, 1);
        finish(w, fill);
        SchedJob *x = run_on(w, (JobArgs){.gpus = 3, .prio = "low", .preemptible = true}, 4, 0,
                             NOW - 10 * MIN_MS);
        SchedJob *p = job(w, (JobArgs){.gpus = 3, .prio = "production"});
        cycle(w, NOW);
        assert_float_equal(v->units, 4.0 * GPU_UNITS, 1e-6);
        const SchedJob *want[] = {recent ? v : x};
        expect_plan(w, NOW, p, want, 1);
        if (recent) {
            finish(w, v);
            assert_int_equal(w->c->nodes[0].used_units, 0);
            assert_int_equal(w->c->nodes[1].used_units, 2 * GPU_UNITS);
            assert_int_equal(f->pl.workers[0].node, 1);
        }
        world_free(w);
    }
}

/* The cluster is left as it was, where planning has to place and undo: a gang preemptor
 * (production, 2 workers x 4 GPUs) on two nodes held by low preemptible work (v1 4 GPUs
 * on node 0; v2 and v3, 2 GPUs each, on node 1) needs all three; with v3 not preemptible
 * it needs what it cannot have, and gets nobody. MIG: one H100 cut into seven 1g.10gb,
 * three of them (slots 0-2) held by low preemptible work; a gang of two 3g.40gb needs
 * slots 0-3 and 4-7, so all three go, and the plan's re-carving is undone: the seven
 * instances and their busy mask are back. (plan() compares every counter and layout.) */
static void test_plan_leaves_cluster_as_it_was(void **state)
{
    World *w = *state;
    for (int stuck = 0; stuck <= 1; stuck++) {
        world_init(w, 4, 2, false);
        world_start(w, SCHED_PREEMPT_QUOTA, SCHED_ORDER_PRIORITY);
        SchedJob *v1 = run_on(w, (JobArgs){.gpus = 4, .prio = "low", .preemptible = true}, 1, 0, 0);
        SchedJob *v2 = run_on(w, (JobArgs){.gpus = 2, .prio = "low", .preemptible = true}, 2, 0, 0);
        SchedJob *v3 =
            run_on(w, (JobArgs){.gpus = 2, .prio = "low", .preemptible = !stuck}, 2, 0, 0);
        SchedJob *p = job(w, (JobArgs){.gpus = 4, .workers = 2, .prio = "production"});
        cycle(w, NOW);
        const SchedJob *want[] = {v1, v2, v3};
        expect_plan(w, NOW, p, want, stuck ? 0 : 3);
        world_free(w);
    }

    Cluster *c = world_init(w, 1, 1, true);
    int g1 = catalog_profile_index(node_model(c, &c->nodes[0]), "1g.10gb");
    assert_true(g1 >= 0);
    MigLayout seven;
    mig_layout_clear(&seven);
    for (int s = 0; s < 7; s++)
        seven.profile_at[s] = (uint8_t)g1;
    assert_int_equal(cluster_set_mig(c, 0, 0, &seven), 0);
    world_start(w, SCHED_PREEMPT_QUOTA, SCHED_ORDER_PRIORITY);
    JobArgs slice = {.req = REQ_MIG, .mig = "1g.10gb", .prio = "low", .preemptible = true};
    SchedJob *s0 = run_on(w, slice, 1, 0, 0);
    SchedJob *s1 = run_on(w, slice, 1, 0, 0);
    SchedJob *s2 = run_on(w, slice, 1, 0, 0);
    assert_int_equal(node_gpu_c(c, &c->nodes[0], 0)->mig_busy, 0x07);
    SchedJob *p = job(w, (JobArgs){.req = REQ_MIG, .mig = "3g.40gb", .workers = 2, .prio = "high"});
    cycle(w, NOW);
    const SchedJob *want[] = {s0, s1, s2};
    expect_plan(w, NOW, p, want, 3);
    assert_memory_equal(&node_gpu_c(c, &c->nodes[0], 0)->mig, &seven, sizeof(seven));
}

/* ---- kube priority mode ---- */

/* Two nodes of 4 GPUs, p high asking 4 GPUs.
 *  - Node 0: one normal job of 4 GPUs; node 1: two low jobs of 2 GPUs. The node whose
 *    victims' highest class is the least important is node 1 (low < normal): {l1, l2},
 *    although it means two victims and node 0 comes first.
 *  - Node 0: two low jobs of 2 GPUs; node 1: one low of 4: the fewest victims, {l3}.
 *  - Any lower class goes, preemptible or not, however fresh: the low job started a
 *    second ago and not preemptible is taken.
 *  - Nothing of p's class or above: p normal, node 0 normal, node 1 high: no victims. */
static void test_priority_mode(void **state)
{
    World *w = *state;
    world_init(w, 4, 2, false);
    world_start(w, SCHED_PREEMPT_PRIORITY, SCHED_ORDER_PRIORITY);
    run_on(w, (JobArgs){.gpus = 4, .prio = "normal", .preemptible = true}, 1, 0, 0);
    SchedJob *l1 = run_on(w, (JobArgs){.gpus = 2, .prio = "low", .preemptible = true}, 2, 0, 0);
    SchedJob *l2 = run_on(w, (JobArgs){.gpus = 2, .prio = "low", .preemptible = true}, 2, 0, 0);
    SchedJob *p = job(w, (JobArgs){.gpus = 4, .prio = "high"});
    cycle(w, NOW);
    const SchedJob *want[] = {l1, l2};
    expect_plan(w, NOW, p, want, 2);
    world_free(w);

    world_init(w, 4, 2, false);
    world_start(w, SCHED_PREEMPT_PRIORITY, SCHED_ORDER_PRIORITY);
    run_on(w, (JobArgs){.gpus = 2, .prio = "low"}, 1, 0, 0);
    run_on(w, (JobArgs){.gpus = 2, .prio = "low"}, 1, 0, 0);
    SchedJob *l3 = run_on(w, (JobArgs){.gpus = 4, .prio = "low"}, 2, NOW - 1000, NOW - 1000);
    p = job(w, (JobArgs){.gpus = 4, .prio = "high"});
    cycle(w, NOW);
    const SchedJob *want3[] = {l3};
    expect_plan(w, NOW, p, want3, 1);
    world_free(w);

    world_init(w, 4, 2, false);
    world_start(w, SCHED_PREEMPT_PRIORITY, SCHED_ORDER_PRIORITY);
    run_on(w, (JobArgs){.gpus = 4, .prio = "normal", .preemptible = true}, 1, 0, 0);
    run_on(w, (JobArgs){.gpus = 4, .prio = "high", .preemptible = true}, 2, 0, 0);
    p = job(w, (JobArgs){.gpus = 4, .prio = "normal"});
    cycle(w, NOW);
    expect_plan(w, NOW, p, NULL, 0);
}

/* ---- Tiresias ---- */

/* One node of 4 GPUs; threshold 16 GPU-hours. l1 (2 GPUs, 20 GPU-h, submitted at 100) and
 * l2 (1 GPU, 17 GPU-h, at 200) are in the lower queue, u (1 GPU, 1 GPU-h, at 300) in the
 * upper. p (upper, 1 GPU) takes the latest-submitted lower-queue job, l2, alone; p3
 * (upper, 3 GPUs) needs l2 and l1; p4 (4 GPUs) would need u, which is not lower-queue
 * work: nobody; pl (1 GPU, itself at 16 GPU-h, lower queue) may take nobody. */
static void test_tiresias_mode(void **state)
{
    World *w = *state;
    world_init(w, 4, 1, false);
    world_start(w, SCHED_PREEMPT_TIRESIAS, SCHED_ORDER_TIRESIAS);
    double h = (double)HOUR_MS;
    SchedJob *l1 =
        run_on(w, (JobArgs){.gpus = 2, .submit_ms = 100, .attained_ms = 20 * h}, 1, NOW, NOW);
    SchedJob *l2 =
        run_on(w, (JobArgs){.gpus = 1, .submit_ms = 200, .attained_ms = 17 * h}, 1, NOW, NOW);
    run_on(w, (JobArgs){.gpus = 1, .submit_ms = 300, .attained_ms = h}, 1, NOW, NOW);
    SchedJob *p = job(w, (JobArgs){.gpus = 1, .submit_ms = 400});
    SchedJob *p3 = job(w, (JobArgs){.gpus = 3, .submit_ms = 400});
    SchedJob *p4 = job(w, (JobArgs){.gpus = 4, .submit_ms = 400});
    SchedJob *pl = job(w, (JobArgs){.gpus = 1, .submit_ms = 400, .attained_ms = 16 * h});
    cycle(w, NOW);
    const SchedJob *want[] = {l2, l1};
    expect_plan(w, NOW, p, want, 1);
    expect_plan(w, NOW, p3, want, 2);
    expect_plan(w, NOW, p4, NULL, 0);
    expect_plan(w, NOW, pl, NULL, 0);
}

/* ---- the cycle holds the room ---- */

/* Node 0 has 4 GPUs, node 1 two. v (low, preemptible, 2 GPUs, grace 60 s) runs on node 0
 * since 0. At 1 h, p (high, 4 GPUs) fits nowhere and preempts v: v is stopping for p and
 * still holds its 2 GPUs. At 1 h + 1 s, c (normal, 1 GPU, not preemptible, no estimate)
 * arrives behind p: node 0 has 2 free GPUs, but they are p's (with v's, from when v
 * stops), so c goes to node 1. At 1 h + 60 s v has stopped: the caller releases it and
 * queues it again; p starts on node 0 and v waits. */
static void test_victims_stop_and_room_is_held(void **state)
{
    World *w = *state;
    Cluster *c = world_init(w, 4, 1, false);
    add_pool(c, "small", 2, 1, false);
    world_start(w, SCHED_PREEMPT_QUOTA, SCHED_ORDER_PRIORITY);
    SchedJob *v = run_on(
        w, (JobArgs){.gpus = 2, .prio = "low", .preemptible = true, .grace_ms = 60000}, 1, 0, 0);
    SchedJob *p = job(w, (JobArgs){.gpus = 4, .prio = "high", .submit_ms = NOW});
    assert_int_equal(sched_enqueue(&w->s, p), 0);
    cycle(w, NOW);
    assert_true(preempted_for(w, v, p));
    assert_true(v->stopping);
    assert_int_equal(v->nominated, p->id);
    assert_int_equal(c->nodes[0].used_units, 2 * GPU_UNITS);
    assert_reason_has(p, PREEMPTING_REASON);

    SchedJob *cj = job(w, (JobArgs){.gpus = 1, .submit_ms = NOW + 1000});
    assert_int_equal(sched_enqueue(&w->s, cj), 0);
    cycle(w, NOW + 1000);
    assert_int_equal(count(w, SCHED_PREEMPT), 0);
    assert_reason_has(p, STOPPING_REASON);
    assert_true(started(w, cj));
    assert_int_equal(cj->pl.workers[0].node, 1);
    assert_true(w->s.node_res[0] != SCHED_NONE);
    assert_int_equal(w->s.res[w->s.node_res[0]].job, p->id);

    finish(w, v);
    assert_int_equal(sched_enqueue(&w->s, v), 0);
    cycle(w, NOW + 60000);
    assert_true(started(w, p));
    assert_int_equal(p->pl.workers[0].node, 0);
    assert_false(started(w, v));
}

/* Rule: the room a victim frees is held from when the victim will have stopped. Same
 * cluster; v (grace 60 s) is preempted for p at 1 h, so it is gone at 1 h + 60 s and
 * p's reservation of node 0 starts then. At 1 h + 30 s, b (normal, 1 GPU, estimate 40 s:
 * running until 1 h + 70 s) arrives behind p: it would still hold a GPU of node 0 when p
 * should start, so it must go to node 1. */
static void test_held_room_starts_when_the_victim_stops(void **state)
{
    World *w = *state;
    Cluster *c = world_init(w, 4, 1, false);
    add_pool(c, "small", 2, 1, false);
    world_start(w, SCHED_PREEMPT_QUOTA, SCHED_ORDER_PRIORITY);
    SchedJob *v = run_on(
        w, (JobArgs){.gpus = 2, .prio = "low", .preemptible = true, .grace_ms = 60000}, 1, 0, 0);
    SchedJob *p = job(w, (JobArgs){.gpus = 4, .prio = "high", .submit_ms = NOW});
    assert_int_equal(sched_enqueue(&w->s, p), 0);
    cycle(w, NOW);
    assert_true(preempted_for(w, v, p));

    SchedJob *b = job(w, (JobArgs){.gpus = 1, .submit_ms = NOW + 30000});
    b->estimate_ms = 40000;
    assert_int_equal(sched_enqueue(&w->s, b), 0);
    cycle(w, NOW + 30000);
    assert_true(w->s.node_res[0] != SCHED_NONE);
    assert_int_equal(w->s.res[w->s.node_res[0]].start_ms, NOW + 60000);
    assert_true(started(w, b));
    assert_int_equal(b->pl.workers[0].node, 1);

    finish(w, v);
    cycle(w, NOW + 60000);
    assert_true(started(w, p));
}

/* Rule: the room a preemption frees is its preemptor's, against every other job, until
 * the preemptor's next turn. One node of 4 GPUs; team a guarantees nothing (burst 4),
 * team b guarantees 4. v (team a, high, preemptible, 4 GPUs) runs borrowed; p (team b,
 * normal, 4 GPUs) is inside b's guarantee and reclaims the node: v is preempted for p.
 * v stops after its 30 s grace and is queued again, as the simulator does; being high,
 * it now stands ahead of p in the queue. If the freed GPUs went by queue order v would
 * take them straight back (and be preempted again 5 minutes later, and so on); they are
 * p's, so p starts and v waits. */
static void test_freed_room_is_the_preemptors(void **state)
{
    World *w = *state;
    Cluster *c = world_init(w, 4, 1, false);
    add_team(c, "a", 0, 4);
    add_team(c, "b", 4, 4);
    world_start(w, SCHED_PREEMPT_QUOTA, SCHED_ORDER_PRIORITY);
    SchedJob *v = run_on(
        w,
        (JobArgs){.gpus = 4, .prio = "high", .team = "a", .preemptible = true, .grace_ms = 30000},
        1, 0, 0);
    SchedJob *p = job(w, (JobArgs){.gpus = 4, .team = "b", .submit_ms = NOW});
    assert_int_equal(sched_enqueue(&w->s, p), 0);
    cycle(w, NOW);
    assert_true(preempted_for(w, v, p));

    finish_at(w, v, NOW + 30000);
    assert_int_equal(sched_enqueue(&w->s, v), 0);
    cycle(w, NOW + 30000);
    assert_true(started(w, p));
    assert_false(started(w, v));
    assert_ptr_equal(w->s.order[0], v);
    assert_int_equal(w->s.n_order, 1);
}

/* ---- a team's own lower classes yield its quota ---- */

/* The scene: two nodes of 4 GPUs. Team a guarantees 2 GPUs, bursts to 6; team b 4 and 8.
 * Node 0: s1..s4 (a, low, preemptible, 1 GPU each, started at 0), last checkpointed 10,
 * 2, 20 and 5 minutes before NOW. Node 1: f (a, low, not preemptible), b1 (b, low,
 * preemptible), y (a, low, preemptible, started 2 minutes before NOW: under its minimum
 * run time), one GPU free. Team a holds 6 GPUs: its burst limit. */
typedef struct TeamScene {
    SchedJob *s[4], *f, *b1, *y;
} TeamScene;

static void team_scene(World *w, TeamScene *t)
{
    Cluster *c = world_init(w, 4, 2, false);
    add_team(c, "a", 2, 6);
    add_team(c, "b", 4, 8);
    world_start(w, SCHED_PREEMPT_QUOTA, SCHED_ORDER_PRIORITY);
    const int64_t ckpt_min[] = {10, 2, 20, 5};
    JobArgs low_a = {.prio = "low", .team = "a", .preemptible = true, .grace_ms = 30000};
    for (int i = 0; i < 4; i++)
        t->s[i] = run_on(w, low_a, 1, 0, NOW - ckpt_min[i] * MIN_MS);
    t->f = run_on(w, (JobArgs){.prio = "low", .team = "a"}, 2, 0, 0);
    t->b1 = run_on(w, (JobArgs){.prio = "low", .team = "b", .preemptible = true}, 2, 0, 0);
    t->y = run_on(w, low_a, 2, NOW - 2 * MIN_MS, NOW - 2 * MIN_MS);
}

/* preempt_plan_team for j, needing `need` GPUs of quota; the cluster comes back as it was. */
static size_t team_plan(World *w, const SchedJob *j, double need, SchedJob **ret)
{
    Snapshot before, after;
    snapshot(w->c, &before);
    SchedJob **v = NULL;
    size_t n = 0;
    int rc = preempt_plan_team(&w->s, NOW, j, need * GPU_UNITS, w->running, w->n_running, &v, &n);
    if (n <= MAX_JOBS && v)
        memcpy(ret, v, n * sizeof(*v));
    free(v);
    assert_int_equal(rc, 0);
    snapshot(w->c, &after);
    assert_memory_equal(&after, &before, sizeof(before));
    return n;
}

/* j (a, high, 2 GPUs) would take team a to 8 of its 6: 2 GPUs of quota must come back,
 * and j needs 2 GPUs on one node. Only s1..s4 may go (f cannot checkpoint, b1 is another
 * team's, y has not run its minimum); the two that lose least, s2 (2 min) and s4
 * (5 min), free both the quota and 2 GPUs of node 0. With s2 not preemptible, s4 and s1
 * (10 min). A low job of team a is of the victims' class: nothing. A high gang of 2 x 4
 * GPUs would need 8 GPUs of quota back and only 4 may yield: nothing. A production job
 * of team a in j's place may take y too (below). */
static void test_team_yields_quota_plan(void **state)
{
    World *w = *state;
    TeamScene t;
    SchedJob *v[MAX_JOBS];
    for (int s2_pinned = 0; s2_pinned <= 1; s2_pinned++) {
        team_scene(w, &t);
        t.s[1]->preemptible = !s2_pinned;
        SchedJob *j = job(w, (JobArgs){.gpus = 2, .prio = "high", .team = "a", .submit_ms = NOW});
        cycle(w, NOW - 1); /* classifies the running work */
        assert_float_equal(w->s.ten.teams[0].held_units, 6.0 * GPU_UNITS, 1e-6);
        const SchedJob *want[] = {s2_pinned ? t.s[0] : t.s[1], t.s[3]};
        size_t n = team_plan(w, j, 2, v);
        assert_victims(v, n, want, 2);
        world_free(w);
    }
    /* production does not wait for y's minimum: y (2 min since its start, on node 1
     * beside the free GPU) ties with s2 on lost work per GPU and comes after it by id;
     * with both gone the quota is back and node 1 has 2 GPUs free, neither can be spared */
    team_scene(w, &t);
    SchedJob *prod =
        job(w, (JobArgs){.gpus = 2, .prio = "production", .team = "a", .submit_ms = NOW});
    cycle(w, NOW - 1);
    const SchedJob *young[] = {t.s[1], t.y};
    assert_victims(v, team_plan(w, prod, 2, v), young, 2);
    world_free(w);
    team_scene(w, &t);
    cycle(w, NOW - 1);
    SchedJob *low = job(w, (JobArgs){.prio = "low", .team = "a", .submit_ms = NOW});
    assert_int_equal(team_plan(w, low, 1, v), 0);
    SchedJob *gang =
        job(w, (JobArgs){.gpus = 4, .workers = 2, .prio = "high", .team = "a", .submit_ms = NOW});
    assert_int_equal(team_plan(w, gang, 8, v), 0);
}

/* Rule: a team at its burst limit gives the room it frees to its highest class first.
 * The scene, with j (a, high, 2 GPUs) and then q (a, low, 1 GPU) waiting. At NOW the
 * cycle stops s2 and s4 for j (nothing starts: q is held by the limit, and the GPU free on
 * node 1 is no use to j); 10 s later j waits for them; when they have stopped (30 s
 * grace) and are queued again, j starts on node 0 and neither they nor q do: team a is at
 * 6 again. Without the rule the cycle at NOW preempts nothing (the test fails there):
 * j waits at the limit until team a's work ends, and the first GPU it frees goes to q,
 * which fits in one. */
static void test_team_yields_quota_in_the_cycle(void **state)
{
    World *w = *state;
    TeamScene t;
    team_scene(w, &t);
    SchedJob *j = job(w, (JobArgs){.gpus = 2, .prio = "high", .team = "a", .submit_ms = NOW});
    SchedJob *q = job(w, (JobArgs){.prio = "low", .team = "a", .submit_ms = NOW + 1});
    assert_int_equal(sched_enqueue(&w->s, j), 0);
    assert_int_equal(sched_enqueue(&w->s, q), 0);
    cycle(w, NOW);
    assert_int_equal(count(w, SCHED_PREEMPT), 2);
    assert_true(preempted_for(w, t.s[1], j));
    assert_true(preempted_for(w, t.s[3], j));
    assert_int_equal(count(w, SCHED_START), 0);
    assert_reason_has(j,
                      "preempting its team's lower-priority work to make room in its quota: job ");
    assert_reason_has(q, "its team a is at its burst limit: it holds ");

    cycle(w, NOW + 10000);
    assert_int_equal(w->d.n, 0);
    assert_reason_has(j, "waiting for its team's lower-priority work to stop: job ");

    finish_at(w, t.s[1], NOW + 30000);
    finish_at(w, t.s[3], NOW + 30000);
    assert_int_equal(sched_enqueue(&w->s, t.s[1]), 0);
    assert_int_equal(sched_enqueue(&w->s, t.s[3]), 0);
    cycle(w, NOW + 30000);
    assert_true(started(w, j));
    assert_int_equal(j->pl.workers[0].node, 0);
    assert_int_equal(count(w, SCHED_START), 1);
    assert_int_equal(count(w, SCHED_PREEMPT), 0);
    assert_true(q->queued && t.s[1]->queued && t.s[3]->queued);
    assert_float_equal(w->s.ten.teams[0].held_units, 6.0 * GPU_UNITS, 1e-6);
}

/* Under kube-scheduler's rules the freed node is held for the preemptor (its nominated
 * node) only against pods of lower or equal priority. One node of 4 GPUs: v (low, 4
 * GPUs) runs; p (normal) preempts it. When v has stopped, q (normal, submitted before p,
 * so ahead of it) must not take the node; in a second run h (high) arrives instead and
 * does take it, as kube-scheduler lets a higher-priority pod onto a nominated node. */
static void test_kube_holds_freed_room_against_lower_or_equal(void **state)
{
    World *w = *state;
    for (int higher = 0; higher <= 1; higher++) {
        world_init(w, 4, 1, false);
        world_start(w, SCHED_PREEMPT_PRIORITY, SCHED_ORDER_PRIORITY);
        w->s.cfg.fair_share = false;
        w->s.ten.quotas = false;
        SchedJob *v = run_on(w, (JobArgs){.gpus = 4, .prio = "low", .grace_ms = 30000}, 1, 0, 0);
        SchedJob *p = job(w, (JobArgs){.gpus = 4, .submit_ms = NOW});
        assert_int_equal(sched_enqueue(&w->s, p), 0);
        cycle(w, NOW);
        assert_true(preempted_for(w, v, p));
        finish_at(w, v, NOW + 30000);
        SchedJob *other = job(w, (JobArgs){.gpus = 4,
                                           .prio = higher ? "high" : "normal",
                                           .submit_ms = higher ? NOW + 10000 : NOW - 1});
        assert_int_equal(sched_enqueue(&w->s, other), 0);
        cycle(w, NOW + 30000);
        assert_int_equal(started(w, other), higher);
        assert_int_equal(started(w, p), !higher);
        world_free(w);
    }
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, world_setup, world_teardown)
    const struct CMUnitTest tests[] = {
        T(test_quota_borrowed_first_across_teams),
        T(test_quota_borrowed_first_over_cheaper_nodes),
        T(test_quota_never_own_teams_borrowed),
        T(test_quota_other_teams_guaranteed_work),
        T(test_quota_who_may_preempt),
        T(test_quota_least_lost_work_beats_fewer_victims),
        T(test_quota_ties_fewer_victims_then_grace),
        T(test_quota_least_lost_work_on_one_node),
        T(test_min_runtime_protects_fresh_job),
        T(test_production_skips_min_runtime),
        T(test_production_never_a_victim),
        T(test_production_may_borrow_never_a_victim),
        T(test_gang_victim_goes_whole),
        T(test_plan_leaves_cluster_as_it_was),
        T(test_priority_mode),
        T(test_tiresias_mode),
        T(test_victims_stop_and_room_is_held),
        T(test_held_room_starts_when_the_victim_stops),
        T(test_freed_room_is_the_preemptors),
        T(test_kube_holds_freed_room_against_lower_or_equal),
        T(test_team_yields_quota_plan),
        T(test_team_yields_quota_in_the_cycle),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
