/* test_sched.c: the scheduling cycle (core/sched.c) driven the way the simulator and the
 * server drive it: a cluster built here, a PlaceCtx, SchedJob structs filled by hand,
 * sched_enqueue, sched_cycle at a time we choose, and the decisions applied as a caller
 * would (a started job joins the running list; a finished one is released). Each test
 * works one rule of issue 4 out by hand in the comment above it:
 *  - queue order: class, then fair share (decayed), then age, then id; FIFO; Tiresias;
 *  - tenancy in the cycle: the burst limit, borrowed work, the oldest running work
 *    counted into the guarantee first (a younger, smaller job fills what an older one
 *    left), no quotas without teams; MIG slices and MPS shares as GPU-equivalents; a
 *    waiting job's ask as the share it would get where its model runs without MIG;
 *  - starting applies the placement; sched_release gives it back exactly;
 *  - s->order after a cycle gives queue positions; waiting jobs say why, this cycle;
 *  - EASY backfill: a blocked whole-GPU job reserves the nodes it would get when the
 *    running jobs' (remaining) estimates end; jobs behind it use those nodes only if
 *    they end first or are preemptible; up to max_reservations; at the reservation's
 *    time the preemptible backfill is moved; a gang never holds part of an allocation;
 *  - drain: nearly empty partitioned GPUs stop taking slices while whole GPUs are
 *    wanted, and take them again when nobody waits for whole GPUs;
 *  - consolidation: servers move off the emptiest partitioned GPU into room other
 *    partitioned GPUs have, all of a GPU's or none, never into a whole GPU, only
 *    movable work past its minimum run time;
 *  - tiers: production never lands on spot capacity, and a production job that allows
 *    only spot is refused;
 *  - MIG slices placed by the gpuorch policy through the cycle: reuse an idle instance,
 *    fill a partitioned GPU before cutting a whole one, re-carve only idle instances;
 *  - right-sizing: a gpu_memory job gets the smallest MIG profile that holds it.
 * A comment that begins with "Rule:" pins a rule the code broke when the test was
 * written, and says how it fails; it passes once the code keeps the rule. Victim choice
 * has its own file, test_preempt.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "sched_fixture.h"

#include "core/cluster.h"
#include "core/job.h"
#include "core/place.h"
#include "core/sched.h"
#include "util/buf.h"
#include "util/macro.h"
#include "util/rng.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_JOBS 32
#define HOUR_MS  INT64_C(3600000)
#define GPU      ((double)GPU_UNITS)

#define BURST_REASON "is at its burst limit: it holds "
#define GANG_REASON  "it holds a reservation: "
#define assert_reason_has(j, text)                                                                 \
    do {                                                                                           \
        if (!strstr((j)->reason, text))                                                            \
            fail_msg("the reason \"%s\" lacks \"%s\"", (j)->reason, text);                         \
    } while (0)

#include "sched_world.h"

/* A SCHED_DRAIN or SCHED_UNDRAIN of (node, gpu). */
static bool decided_gpu(const World *w, SchedDecisionKind kind, uint32_t node, unsigned gpu)
{
    for (size_t k = 0; k < w->d.n; k++) {
        const SchedDecision *d = &w->d.d[k];
        if (d->kind == kind && d->job == SCHED_NONE && d->node == node && d->gpu == gpu)
            return true;
    }
    return false;
}

/* s->order after a cycle: the first n entries must be exactly these jobs. */
static void assert_order(const World *w, const SchedJob *const *want, size_t n)
{
    assert_true(w->s.order_cap >= n);
    for (size_t i = 0; i < n; i++)
        if (w->s.order[i] != want[i])
            fail_msg("queue position %zu: job %u, expected job %u", i, w->s.order[i]->id,
                     want[i]->id);
}

/* A reason the placer wrote (not one of the scheduler's own sentences): it counts what is
 * free ("no node has 1 free GPU ...", "the cluster does not have 8 free GPUs ..."). */
static void assert_placer_reason(const SchedJob *j)
{
    if (!strstr(j->reason, "free") || strstr(j->reason, "reserved"))
        fail_msg("job %u: expected the placer's words, got \"%s\"", j->id, j->reason);
}

static int prof(const Cluster *c, const char *name)
{
    int p = catalog_profile_index(node_model(c, &c->nodes[0]), name);
    assert_true(p >= 0);
    return p;
}

/* Put one MIG instance of `profile` at `start` on a GPU (idle). */
static void carve(Cluster *c, unsigned node, unsigned gpu, const char *profile, unsigned start)
{
    MigLayout l = node_gpu_c(c, &c->nodes[node], gpu)->mig;
    l.profile_at[start] = (uint8_t)prof(c, profile);
    assert_int_equal(cluster_set_mig(c, node, gpu, &l), 0);
}

static const Gpu *gpu_at(const Cluster *c, unsigned node, unsigned gpu)
{
    return node_gpu_c(c, &c->nodes[node], gpu);
}

/* ---- queue order ---- */

/* One 4-GPU node that takes nothing (unschedulable), so every job waits and the order is
 * what the cycle computed. Six one-GPU jobs, no teams:
 *   j0 low @0, j1 normal @40, j2 production @50, j3 high @30, j4 normal @20,
 *   j5 normal @40 (same time as j1, larger id),
 * enqueued j5 j2 j0 j4 j3 j1. By class, then age, then id: j2 j3 j4 j1 j5 j0.
 * FIFO ignores the class: j0 j4 j3 j1 j5 j2. Every waiting job gets the placer's reason. */
static void test_order_class_age_id_and_fifo(void **state)
{
    World *w = *state;
    for (int fifo = 0; fifo <= 1; fifo++) {
        Cluster *c = new_cluster();
        add_pool(c, "h", 4, 1, false);
        cluster_set_schedulable(c, 0, false);
        SchedConfig cfg;
        sched_config_gpuorch(&cfg);
        if (fifo)
            cfg.order = SCHED_ORDER_FIFO;
        world_init(w, c, "first-fit", &cfg);
        SchedJob *j[6];
        j[0] = job(w, (JobArgs){.prio = "low", .submit_ms = 0});
        j[1] = job(w, (JobArgs){.prio = "normal", .submit_ms = 40});
        j[2] = job(w, (JobArgs){.prio = "production", .submit_ms = 50});
        j[3] = job(w, (JobArgs){.prio = "high", .submit_ms = 30});
        j[4] = job(w, (JobArgs){.prio = "normal", .submit_ms = 20});
        j[5] = job(w, (JobArgs){.prio = "normal", .submit_ms = 40});
        static const int enq[] = {5, 2, 0, 4, 3, 1};
        for (size_t i = 0; i < 6; i++)
            assert_int_equal(sched_enqueue(&w->s, j[enq[i]]), 0);
        cycle(w, 100);
        assert_int_equal(w->d.n, 0);
        assert_int_equal(sched_queue_len(&w->s), 6);
        const SchedJob *by_class[] = {j[2], j[3], j[4], j[1], j[5], j[0]};
        const SchedJob *by_time[] = {j[0], j[4], j[3], j[1], j[5], j[2]};
        assert_order(w, fifo ? by_time : by_class, 6);
        for (size_t i = 0; i < 6; i++)
            assert_placer_reason(j[i]);
        world_free(w);
    }
}

/* Tiresias (threshold 16 GPU-hours): jobs below it first, FIFO inside each queue, class
 * ignored. a: production, 20 GPU-h attained, @0 (lower queue); b: low, 0, @30; c: normal,
 * 1 GPU-h, @10; d: normal, exactly 16 GPU-h, @5 (the threshold is in the lower queue).
 * Order: c b a d. */
static void test_order_tiresias(void **state)
{
    World *w = *state;
    Cluster *c = new_cluster();
    add_pool(c, "h", 4, 1, false);
    cluster_set_schedulable(c, 0, false);
    SchedConfig cfg;
    sched_config_gpuorch(&cfg);
    cfg.order = SCHED_ORDER_TIRESIAS;
    cfg.preempt = SCHED_PREEMPT_TIRESIAS;
    assert_true(cfg.tiresias_threshold_gpu_ms == 16.0 * HOUR_MS);
    world_init(w, c, "first-fit", &cfg);
    SchedJob *a =
        submit(w, (JobArgs){.prio = "production", .submit_ms = 0, .attained_ms = 20.0 * HOUR_MS});
    SchedJob *b = submit(w, (JobArgs){.prio = "low", .submit_ms = 30});
    SchedJob *cc = submit(w, (JobArgs){.submit_ms = 10, .attained_ms = 1.0 * HOUR_MS});
    SchedJob *d = submit(w, (JobArgs){.submit_ms = 5, .attained_ms = 16.0 * HOUR_MS});
    cycle(w, 100);
    const SchedJob *want[] = {cc, b, a, d};
    assert_order(w, want, 4);
    world_free(w);
}

/* Teams A and B (nothing guaranteed, burst 8, weight 1), half-life 1 h, two nodes of 4
 * GPUs of which node 1 takes nothing. a_run (A, 1 GPU) runs 0-1 h; the caller runs a cycle
 * at 1 h (usage_A = 28,000 h/ln2 (1 - 1/2) = X) before releasing it, then b_run (B, 1 GPU)
 * starts at 1 h. At 1.75 h: usage_A = X 2^-0.75 = 0.595 X, usage_B = 2X (1 - 2^-0.75) =
 * 0.811 X: B has used more lately, so A's probe goes first although B's was submitted
 * earlier: [a_hi (A, high, latest), a_p, b_p]; the class still comes first. Without
 * decay (half-life 0) B used 0.75 of what A used: [a_hi, b_p, a_p]. The probes ask 4 GPUs
 * and b_run holds one: they wait. */
static void test_order_fair_share_decays(void **state)
{
    World *w = *state;
    for (int decayed = 1; decayed >= 0; decayed--) {
        Cluster *c = new_cluster();
        add_pool(c, "h", 4, 2, false);
        add_team(c, "a", 0, 8);
        add_team(c, "b", 0, 8);
        cluster_set_schedulable(c, 1, false);
        SchedConfig cfg;
        sched_config_gpuorch(&cfg);
        cfg.half_life_ms = decayed ? HOUR_MS : 0;
        world_init(w, c, "first-fit", &cfg);
        SchedJob *a_run = submit(w, (JobArgs){.team = "a", .submit_ms = 0});
        cycle(w, 0);
        assert_true(started(w, a_run));
        cycle(w, HOUR_MS);
        finish(w, a_run);
        SchedJob *b_run = submit(w, (JobArgs){.team = "b", .submit_ms = HOUR_MS});
        cycle(w, HOUR_MS);
        assert_true(started(w, b_run));
        int64_t t = HOUR_MS * 7 / 4;
        SchedJob *b_p = submit(w, (JobArgs){.gpus = 4, .team = "b", .submit_ms = t - 30});
        SchedJob *a_p = submit(w, (JobArgs){.gpus = 4, .team = "a", .submit_ms = t - 20});
        SchedJob *a_hi =
            submit(w, (JobArgs){.gpus = 4, .prio = "high", .team = "a", .submit_ms = t - 10});
        cycle(w, t);
        double x = 14000.0 * HOUR_MS / M_LN2;
        if (decayed) {
            assert_float_equal(w->s.ten.teams[0].usage, x * pow(2, -0.75), x * 1e-9);
            assert_float_equal(w->s.ten.teams[1].usage, 2 * x * (1 - pow(2, -0.75)), x * 1e-9);
            const SchedJob *want[] = {a_hi, a_p, b_p};
            assert_order(w, want, 3);
        } else {
            const SchedJob *want[] = {a_hi, b_p, a_p};
            assert_order(w, want, 3);
        }
        world_free(w);
    }
}

/* Rule: fair share counts what a team held up to the end of each run. a_run (A, 1 GPU)
 * runs 0-1 h (half-life 1 h); the caller releases it when it ends, at 1 h, then runs the
 * cycle at 1 h, as a caller does after a job finishes. usage_A must be 14,000 h/ln2 and
 * B's later probe must go before A's earlier one. (sched_release counts the usage up to
 * the release, so the run's last stretch is not lost.) */
static void test_fair_share_counts_a_run_to_its_end(void **state)
{
    World *w = *state;
    Cluster *c = new_cluster();
    add_pool(c, "h", 4, 1, false);
    add_team(c, "a", 0, 8);
    add_team(c, "b", 0, 8);
    SchedConfig cfg;
    sched_config_gpuorch(&cfg);
    world_init(w, c, "first-fit", &cfg);
    SchedJob *a_run = submit(w, (JobArgs){.team = "a", .submit_ms = 0});
    SchedJob *filler = submit(w, (JobArgs){.submit_ms = 1});
    cycle(w, 0);
    assert_true(started(w, a_run) && started(w, filler));
    finish_at(w, a_run, HOUR_MS);
    SchedJob *a_p = submit(w, (JobArgs){.gpus = 4, .team = "a", .submit_ms = 10});
    SchedJob *b_p = submit(w, (JobArgs){.gpus = 4, .team = "b", .submit_ms = 20});
    cycle(w, HOUR_MS);
    double x = 14000.0 * HOUR_MS / M_LN2;
    if (fabs(w->s.ten.teams[0].usage - x) > x * 1e-9)
        fail_msg("team A's usage after a 1 h run of one GPU: %.6g, expected %.6g",
                 w->s.ten.teams[0].usage, x);
    const SchedJob *want[] = {b_p, a_p};
    assert_order(w, want, 2);
    world_free(w);
}

/* Rule: with equal fair share, age decides. Teams A and B have used nothing (both keys
 * 0); B's job was submitted at 10, A's at 20: B's goes first. */
static void test_order_equal_share_goes_by_age(void **state)
{
    World *w = *state;
    Cluster *c = new_cluster();
    add_pool(c, "h", 4, 1, false);
    add_team(c, "a", 0, 8);
    add_team(c, "b", 0, 8);
    cluster_set_schedulable(c, 0, false);
    SchedConfig cfg;
    sched_config_gpuorch(&cfg);
    world_init(w, c, "first-fit", &cfg);
    SchedJob *a = submit(w, (JobArgs){.team = "a", .submit_ms = 20});
    SchedJob *b = submit(w, (JobArgs){.team = "b", .submit_ms = 10});
    cycle(w, 100);
    const SchedJob *want[] = {b, a};
    assert_order(w, want, 2);
    world_free(w);
}

/* Rule: after a cycle s->order gives queue positions: its first sched_queue_len() entries
 * are the jobs still waiting, in order (callers have no other count; the simulator walks
 * it that way). One 4-GPU node: j0 (4 GPUs, @0) starts, j1 and j2 (4 GPUs, @1 and @2)
 * wait: positions 0 and 1 are j1 and j2. */
static void test_queue_positions_after_a_cycle(void **state)
{
    World *w = *state;
    Cluster *c = new_cluster();
    add_pool(c, "h", 4, 1, false);
    SchedConfig cfg;
    sched_config_gpuorch(&cfg);
    world_init(w, c, "first-fit", &cfg);
    SchedJob *j0 = submit(w, (JobArgs){.gpus = 4, .submit_ms = 0});
    SchedJob *j1 = submit(w, (JobArgs){.gpus = 4, .submit_ms = 1});
    SchedJob *j2 = submit(w, (JobArgs){.gpus = 4, .submit_ms = 2});
    cycle(w, 0);
    assert_true(started(w, j0));
    assert_int_equal(sched_queue_len(&w->s), 2);
    const SchedJob *want[] = {j1, j2};
    assert_order(w, want, 2);
    world_free(w);
}

/* ---- tenancy in the cycle ---- */

/* Team A: guarantee 1 GPU, burst 2; one node of 4 GPUs. a1, a2, a3 (1 GPU, @0 @1 @2) and
 * n1 (no team, @3). a1 starts inside the guarantee, a2 borrowed (held 2 = burst), a3
 * waits: "its team is at its burst limit"; n1 starts, borrowed (no team: no guarantee).
 * At 1000 a1 ends: the oldest remaining run, a2, moves into the guarantee, and a3 starts
 * borrowed (held 1 + 1 = 2 <= 2). At 2000 a2 ends and a1 runs again; at 3000 the older
 * run, a3 (from 1000), is the guaranteed one and a1 (from 2000) borrowed, though a1 has
 * the smaller id. */
static void test_burst_limit_and_borrowing(void **state)
{
    World *w = *state;
    Cluster *c = new_cluster();
    add_pool(c, "h", 4, 1, false);
    add_team(c, "a", 1, 2);
    SchedConfig cfg;
    sched_config_gpuorch(&cfg);
    world_init(w, c, "first-fit", &cfg);
    SchedJob *a1 = submit(w, (JobArgs){.team = "a", .submit_ms = 0});
    SchedJob *a2 = submit(w, (JobArgs){.team = "a", .submit_ms = 1});
    SchedJob *a3 = submit(w, (JobArgs){.team = "a", .submit_ms = 2});
    SchedJob *n1 = submit(w, (JobArgs){.submit_ms = 3});
    cycle(w, 0);
    assert_true(started(w, a1) && started(w, a2) && started(w, n1));
    assert_false(started(w, a3));
    assert_false(a1->borrowed);
    assert_true(a2->borrowed);
    assert_true(n1->borrowed);
    assert_reason_has(a3, BURST_REASON);
    assert_float_equal(w->s.ten.teams[0].held_units, 2 * GPU, 1e-6);
    assert_float_equal(w->s.ten.teams[0].guaranteed_held, GPU, 1e-6);

    finish(w, a1);
    cycle(w, 1000);
    assert_true(started(w, a3));
    assert_false(a2->borrowed);
    assert_true(a3->borrowed);
    assert_string_equal(a3->reason, "");

    finish(w, a2);
    assert_int_equal(sched_enqueue(&w->s, a1), 0);
    cycle(w, 2000);
    assert_true(started(w, a1));
    cycle(w, 3000);
    assert_false(a3->borrowed);
    assert_true(a1->borrowed);
    world_free(w);
}

/* No teams, no quotas: two jobs of 4 GPUs take the whole 8-GPU cluster, neither
 * borrowed. With a team of no guarantee and no burst, quotas off in the config do the
 * same. */
static void test_no_teams_no_quotas(void **state)
{
    World *w = *state;
    for (int with_team = 0; with_team <= 1; with_team++) {
        Cluster *c = new_cluster();
        add_pool(c, "h", 4, 2, false);
        if (with_team)
            add_team(c, "a", 0, 0);
        SchedConfig cfg;
        sched_config_gpuorch(&cfg);
        cfg.quotas = !with_team;
        world_init(w, c, "first-fit", &cfg);
        const char *team = with_team ? "a" : NULL;
        SchedJob *j1 = submit(w, (JobArgs){.gpus = 4, .team = team, .submit_ms = 0});
        SchedJob *j2 = submit(w, (JobArgs){.gpus = 4, .team = team, .submit_ms = 1});
        cycle(w, 0);
        assert_true(started(w, j1) && started(w, j2));
        assert_false(j1->borrowed);
        assert_false(j2->borrowed);
        assert_int_equal(c->used_units, 8 * GPU_UNITS);
        world_free(w);
    }
}

/* One node of 8 GPUs; team A guaranteed 4, burst 8. a1 (2 GPUs) starts at 0, a2 (3) at
 * 10,000, a3 (1) at 20,000, a4 (2) at 30,000. Oldest first into the guarantee of 4:
 *   a1: 0 + 2 = 2 <= 4 guaranteed     a2: 2 + 3 = 5 > 4 borrowed
 *   a3: 2 + 1 = 3 <= 4 guaranteed (younger and smaller, it fills what a2 could not)
 *   a4: 3 + 2 = 5 > 4 borrowed
 * A holds 8 GPUs, 3 of them guaranteed. The cycle at 100,000 classifies again from the
 * running list in reverse order and comes to the same answer. a1 ends; at 200,000:
 * a2 3 <= 4 guaranteed, a3 3 + 1 = 4 <= 4 guaranteed, a4 6 > 4 borrowed: held 6 GPUs,
 * 4 guaranteed. */
static void test_guarantee_filled_oldest_first(void **state)
{
    World *w = *state;
    Cluster *c = new_cluster();
    add_pool(c, "h", 8, 1, false);
    add_team(c, "a", 4, 8);
    SchedConfig cfg;
    sched_config_gpuorch(&cfg);
    world_init(w, c, "first-fit", &cfg);
    static const unsigned gpus[] = {2, 3, 1, 2};
    SchedJob *a[4];
    for (int i = 0; i < 4; i++) {
        a[i] = submit(w, (JobArgs){.gpus = gpus[i], .team = "a", .submit_ms = 10000 * i});
        cycle(w, 10000 * i);
        assert_true(started(w, a[i]));
    }
    for (size_t i = 0; i < w->n_running / 2; i++) {
        SchedJob *t = w->running[i];
        w->running[i] = w->running[w->n_running - 1 - i];
        w->running[w->n_running - 1 - i] = t;
    }
    cycle(w, 100000);
    assert_int_equal(w->d.n, 0);
    assert_false(a[0]->borrowed);
    assert_true(a[1]->borrowed);
    assert_false(a[2]->borrowed);
    assert_true(a[3]->borrowed);
    assert_float_equal(w->s.ten.teams[0].held_units, 8 * GPU, 1e-6);
    assert_float_equal(w->s.ten.teams[0].guaranteed_held, 3 * GPU, 1e-6);

    finish(w, a[0]);
    cycle(w, 200000);
    assert_false(a[1]->borrowed);
    assert_false(a[2]->borrowed);
    assert_true(a[3]->borrowed);
    assert_float_equal(w->s.ten.teams[0].held_units, 6 * GPU, 1e-6);
    assert_float_equal(w->s.ten.teams[0].guaranteed_held, 4 * GPU, 1e-6);
    world_free(w);
}

/* MIG slices and MPS shares count as GPU-equivalents against guarantees and bursts. One
 * node of 2 A100-80GB (MIG allowed) and one of 1 L4 (no MIG).
 * Team M: guarantee 1 GPU, burst 2. m1..m8 each ask a 1g.10gb slice: 1 of the A100's 7
 * compute slices = 28,000 / 7 = 4,000 units.
 *   m1..m7: 7 x 1/7 = exactly 1 GPU-eq: all guaranteed (they fill GPU 0, slots 0..6);
 *   m8: 8/7 > 1: borrowed (it carves GPU 1, slot 0);
 *   M holds 8 x 4,000 = 32,000 units, 28,000 of them guaranteed.
 * Team F: guarantee 0.5, burst 0.75. f1..f4 ask gpu_fraction 0.25 of the L4: 250
 * thousandths x 28 = 7,000 units each.
 *   f1, f2: 0.5 <= 0.5 guaranteed; f3: 0.75 > 0.5 borrowed, but 0.75 <= 0.75 burst;
 *   f4: 1.0 > 0.75: at the burst limit, though the L4 has a quarter left.
 * Eleven starts in one cycle. */
static void test_slices_count_as_gpu_equivalents(void **state)
{
    World *w = *state;
    Cluster *c = new_cluster();
    add_pool_of(c, "a", "A100-80GB", TIER_OWNED, 2, 1, true);
    add_pool_of(c, "l", "L4", TIER_OWNED, 1, 1, false);
    add_team(c, "m", 1, 2);
    add_team(c, "f", 0.5, 0.75);
    SchedConfig cfg;
    sched_config_gpuorch(&cfg);
    world_init(w, c, "first-fit", &cfg);
    SchedJob *m[8], *f[4];
    for (int i = 0; i < 8; i++) {
        m[i] = submit(
            w,
            (JobArgs){.req = REQ_MIG, .mig = "1g.10gb", .team = "m", .submit_ms = 1000 * (i + 1)});
        assert_float_equal(m[i]->ask_units, 4000, 0);
    }
    for (int i = 0; i < 4; i++) {
        f[i] = submit(w, (JobArgs){.req = REQ_FRACTION,
                                   .milli = 250,
                                   .model = "L4",
                                   .team = "f",
                                   .submit_ms = 1000 * (i + 1)});
        assert_float_equal(f[i]->ask_units, 7000, 0);
    }
    cycle(w, 10000);
    assert_int_equal(count(w, SCHED_START), 11);
    for (int i = 0; i < 8; i++) {
        assert_true(m[i]->running);
        assert_float_equal(m[i]->units, 4000, 0);
        assert_int_equal(m[i]->borrowed, i == 7);
        const Grant *g = &m[i]->pl.workers[0].grants[0];
        assert_int_equal(g->kind, GRANT_MIG);
        assert_int_equal(g->index, i == 7 ? 1 : 0);
        assert_int_equal(g->mig_start, i == 7 ? 0 : i);
    }
    assert_float_equal(w->s.ten.teams[0].held_units, 32000, 0);
    assert_float_equal(w->s.ten.teams[0].guaranteed_held, 28000, 0);
    for (int i = 0; i < 3; i++) {
        assert_true(f[i]->running);
        assert_float_equal(f[i]->units, 7000, 0);
        assert_int_equal(f[i]->borrowed, i == 2);
    }
    assert_true(f[3]->queued);
    assert_reason_has(f[3], BURST_REASON);
    assert_float_equal(w->s.ten.teams[1].held_units, 21000, 0);
    assert_float_equal(w->s.ten.teams[1].guaranteed_held, 14000, 0);
    world_free(w);
}

/* Rule: a waiting job's ask is what it would hold where it may run: a MIG-capable model
 * in a pool that never partitions it gives a gpu_memory job an MPS share, not a slice. One
 * A100-80GB, MIG off. Team T: guarantee and burst 0.15 GPU = 4,200 units. x asks 15 GiB
 * = 15,360 MiB: a share of whole memory slots of 10,240 MiB, 2 of 8 = 250 thousandths
 * = 250 x 28 = 7,000 units (the 1g.20gb slice it would get with MIG on is 4,000). So
 * ask_units is 7,000, and 0 + 7,000 > 4,200: x waits at its burst limit. (It failed with
 * the slice as the ask, 4,000: x started and T held more than its burst.) */
static void test_ask_is_a_share_where_mig_is_off(void **state)
{
    World *w = *state;
    Cluster *c = new_cluster();
    add_pool_of(c, "a", "A100-80GB", TIER_OWNED, 1, 1, false);
    add_team(c, "t", 0.15, 0.15);
    SchedConfig cfg;
    sched_config_gpuorch(&cfg);
    world_init(w, c, "first-fit", &cfg);
    SchedJob *x = submit(w, (JobArgs){.req = REQ_MEMORY, .mem_mib = 15360, .team = "t"});
    assert_float_equal(x->ask_units, 7000, 0);
    cycle(w, 1000);
    assert_false(started(w, x));
    assert_reason_has(x, BURST_REASON);
    assert_int_equal(c->used_units, 0);
    world_free(w);
}

/* ---- starting and releasing ---- */

/* Two nodes of 4 GPUs, first-fit. j (2 GPUs) and k (4 GPUs) at 500: both start, in queue
 * order; j on node 0 with 2 whole-GPU grants, k on node 1 (node 0 has 2 left). The cluster
 * holds 6 GPUs (168,000 units), j->units is 56,000, its run starts at 500. Releasing j
 * gives node 0 back whole. After a cycle, queued again, it starts again on node 0. */
static void test_start_applies_and_release_gives_back(void **state)
{
    World *w = *state;
    Cluster *c = new_cluster();
    add_pool(c, "h", 4, 2, false);
    SchedConfig cfg;
    sched_config_gpuorch(&cfg);
    world_init(w, c, "first-fit", &cfg);
    SchedJob *j = submit(w, (JobArgs){.gpus = 2, .submit_ms = 0});
    SchedJob *k = submit(w, (JobArgs){.gpus = 4, .submit_ms = 1});
    assert_int_equal(sched_queue_len(&w->s), 2);
    cycle(w, 500);
    assert_int_equal(w->d.n, 2);
    assert_int_equal(w->d.d[0].kind, SCHED_START);
    assert_int_equal(w->d.d[0].job, j->id);
    assert_int_equal(w->d.d[1].job, k->id);
    assert_int_equal(sched_queue_len(&w->s), 0);
    assert_int_equal(node_of(j), 0);
    assert_int_equal(j->pl.workers[0].n_grants, 2);
    assert_int_equal(j->pl.workers[0].grants[0].kind, GRANT_WHOLE);
    assert_int_equal(node_of(k), 1);
    assert_int_equal(c->used_units, 6 * GPU_UNITS);
    assert_int_equal(c->nodes[0].free_whole, 2);
    assert_float_equal(j->units, 2 * GPU, 1e-6);
    assert_int_equal(j->run_start_ms, 500);
    assert_int_equal(j->last_checkpoint_ms, 500);
    assert_false(j->borrowed);

    finish(w, j);
    assert_false(j->running);
    assert_int_equal(j->pl.n_workers, 0);
    assert_float_equal(j->units, 0, 1e-9);
    assert_int_equal(c->used_units, 4 * GPU_UNITS);
    assert_int_equal(c->nodes[0].free_whole, 4);
    assert_int_equal(c->nodes[0].used_units, 0);
    cycle(w, 800);
    assert_int_equal(w->d.n, 0);
    assert_int_equal(sched_enqueue(&w->s, j), 0);
    cycle(w, 900);
    assert_true(started(w, j));
    assert_int_equal(node_of(j), 0);
    assert_int_equal(j->run_start_ms, 900);
    world_free(w);
}

/* Rule: a job released and queued again (preempted, or failed) is one job in the queue.
 * One node of 4 GPUs: j (1 GPU) starts at 0, fails at 10 and the caller releases it and
 * queues it again before the next cycle, as sched_release's comment says to. At 20 j
 * must start once, holding one GPU. */
static void test_requeue_before_next_cycle(void **state)
{
    World *w = *state;
    Cluster *c = new_cluster();
    add_pool(c, "h", 4, 1, false);
    SchedConfig cfg;
    sched_config_gpuorch(&cfg);
    world_init(w, c, "first-fit", &cfg);
    SchedJob *j = submit(w, (JobArgs){.submit_ms = 0});
    cycle(w, 0);
    assert_true(started(w, j));
    finish(w, j);
    assert_int_equal(sched_enqueue(&w->s, j), 0);
    assert_int_equal(sched_queue_len(&w->s), 1);
    cycle(w, 20);
    assert_int_equal(count(w, SCHED_START), 1);
    assert_int_equal(c->used_units, GPU_UNITS);
    assert_int_equal(sched_queue_len(&w->s), 0);
    world_free(w);
}

/* Rule: the same holds for a job taken out of the queue and put back (to change its
 * class, say) before a cycle: k (1 GPU, normal) is dequeued, made high and queued again;
 * the queue holds it once, at its new class, and the cycle starts it once. */
static void test_dequeue_then_enqueue_is_one_job(void **state)
{
    World *w = *state;
    Cluster *c = new_cluster();
    add_pool(c, "h", 4, 1, false);
    cluster_set_schedulable(c, 0, false);
    SchedConfig cfg;
    sched_config_gpuorch(&cfg);
    world_init(w, c, "first-fit", &cfg);
    SchedJob *a = submit(w, (JobArgs){.submit_ms = 0});
    SchedJob *k = submit(w, (JobArgs){.submit_ms = 1});
    sched_dequeue(&w->s, k);
    k->priority = PRIO_HIGH;
    assert_int_equal(sched_enqueue(&w->s, k), 0);
    assert_int_equal(sched_queue_len(&w->s), 2);
    cycle(w, 10);
    const SchedJob *want[] = {k, a};
    assert_order(w, want, 2);
    cluster_set_schedulable(c, 0, true);
    cycle(w, 20);
    assert_int_equal(count(w, SCHED_START), 2);
    assert_int_equal(c->used_units, 2 * GPU_UNITS);
    world_free(w);
}

/* A dequeued job is gone from the queue and from the next cycle's order. */
static void test_dequeue(void **state)
{
    World *w = *state;
    Cluster *c = new_cluster();
    add_pool(c, "h", 4, 1, false);
    cluster_set_schedulable(c, 0, false);
    SchedConfig cfg;
    sched_config_gpuorch(&cfg);
    world_init(w, c, "first-fit", &cfg);
    SchedJob *a = submit(w, (JobArgs){.submit_ms = 0});
    SchedJob *b = submit(w, (JobArgs){.submit_ms = 1});
    sched_dequeue(&w->s, a);
    sched_dequeue(&w->s, a); /* twice is harmless */
    assert_int_equal(sched_queue_len(&w->s), 1);
    cycle(w, 0);
    const SchedJob *want[] = {b};
    assert_order(w, want, 1);
    assert_false(a->queued);
    world_free(w);
}

/* Rule: a waiting job's reason is this cycle's. Team A: guarantee 1, burst 1; team B:
 * burst 4; one node of 2 GPUs; fair share off (order by class, then age); all jobs one
 * GPU of the same shape. At 0: a1 (A) and x (B) start, j (A, low) waits at the burst
 * limit. At 10 a1 has ended; k and k2 (B, high) arrive: k takes the free GPU, k2 does not
 * fit (the placer's reason), and j, now inside its burst, does not fit either: its reason
 * must say so (as k2's does), not "its team is at its burst limit". */
static void test_reason_is_this_cycles(void **state)
{
    World *w = *state;
    Cluster *c = new_cluster();
    add_pool(c, "h", 2, 1, false);
    add_team(c, "a", 1, 1);
    add_team(c, "b", 0, 4);
    SchedConfig cfg;
    sched_config_gpuorch(&cfg);
    cfg.fair_share = false;
    world_init(w, c, "first-fit", &cfg);
    SchedJob *a1 = job(w, (JobArgs){.team = "a", .submit_ms = 0});
    SchedJob *x = job(w, (JobArgs){.team = "b", .submit_ms = 1});
    SchedJob *j = job(w, (JobArgs){.prio = "low", .team = "a", .submit_ms = 2});
    SchedJob *k = job(w, (JobArgs){.prio = "high", .team = "b", .submit_ms = 3});
    SchedJob *k2 = job(w, (JobArgs){.prio = "high", .team = "b", .submit_ms = 4});
    SchedJob *all[] = {a1, x, j, k, k2};
    for (size_t i = 0; i < 5; i++)
        all[i]->req.shape = 0;
    for (size_t i = 0; i < 3; i++)
        assert_int_equal(sched_enqueue(&w->s, all[i]), 0);
    cycle(w, 0);
    assert_true(started(w, a1) && started(w, x));
    assert_reason_has(j, BURST_REASON);

    finish(w, a1);
    assert_int_equal(sched_enqueue(&w->s, k), 0);
    assert_int_equal(sched_enqueue(&w->s, k2), 0);
    cycle(w, 10);
    assert_true(started(w, k));
    assert_false(started(w, j));
    assert_placer_reason(k2);
    assert_string_equal(j->reason, k2->reason);
    world_free(w);
}

/* ---- reservations and backfill ---- */

/* Node 0 has 4 GPUs, node 1 one GPU. r1 (2 GPUs, estimate 10,000) started at 0 in an
 * earlier cycle. Then at 0: g (4 GPUs) cannot start and reserves node 0 from 10,000 (when
 * r1 is expected to end). Behind it:
 *   b1 (1 GPU, estimate 10,000: ends exactly at the start) may use node 0;
 *   b2 (1 GPU, 10,001) may not: it goes to node 1;
 *   b3 (1 GPU, preemptible, no estimate) may use node 0;
 *   b4 (1 GPU, no estimate) may not, and node 1 is full: it waits with the placer's reason.
 * A single-GPU job never reserves: the reservation list holds g alone. */
static void test_backfill_window(void **state)
{
    World *w = *state;
    Cluster *c = new_cluster();
    add_pool(c, "big", 4, 1, false);
    add_pool(c, "small", 1, 1, false);
    SchedConfig cfg;
    sched_config_gpuorch(&cfg);
    world_init(w, c, "first-fit", &cfg);
    SchedJob *r1 = submit(w, (JobArgs){.gpus = 2, .submit_ms = 0, .est_ms = 10000});
    cycle(w, 0);
    assert_true(started(w, r1));
    assert_int_equal(node_of(r1), 0);
    SchedJob *g = submit(w, (JobArgs){.gpus = 4, .submit_ms = 1});
    SchedJob *b1 = submit(w, (JobArgs){.submit_ms = 2, .est_ms = 10000});
    SchedJob *b2 = submit(w, (JobArgs){.submit_ms = 3, .est_ms = 10001});
    SchedJob *b3 = submit(w, (JobArgs){.submit_ms = 4, .preemptible = true});
    SchedJob *b4 = submit(w, (JobArgs){.submit_ms = 5});
    cycle(w, 0);
    assert_false(started(w, g));
    assert_int_equal(w->s.n_res, 1);
    assert_int_equal(w->s.res[0].job, g->id);
    assert_int_equal(w->s.res[0].start_ms, 10000);
    assert_int_equal(w->s.node_res[0], 0);
    assert_int_equal(w->s.node_res[1], SCHED_NONE);
    assert_reason_has(g, GANG_REASON);
    assert_true(started(w, b1));
    assert_int_equal(node_of(b1), 0);
    assert_true(started(w, b2));
    assert_int_equal(node_of(b2), 1);
    assert_true(started(w, b3));
    assert_int_equal(node_of(b3), 0);
    assert_false(started(w, b4));
    assert_placer_reason(b4);
    assert_int_equal(count(w, SCHED_PREEMPT), 0);
    world_free(w);
}

/* Rule: SchedJob.estimate_ms is what is left of a run. Same cluster; r1 (2 GPUs) started
 * at 0 and at 5,000 has 10,000 left: it is expected to end at 15,000. g (4 GPUs) arriving
 * at 5,000 reserves node 0 from 15,000; b (1 GPU, estimate 7,000: gone at 12,000) fits in
 * the window and starts on node 0. */
static void test_reservation_uses_remaining_estimate(void **state)
{
    World *w = *state;
    Cluster *c = new_cluster();
    add_pool(c, "big", 4, 1, false);
    add_pool(c, "small", 1, 1, false);
    SchedConfig cfg;
    sched_config_gpuorch(&cfg);
    world_init(w, c, "first-fit", &cfg);
    SchedJob *r1 = submit(w, (JobArgs){.gpus = 2, .submit_ms = 0, .est_ms = 15000});
    cycle(w, 0);
    assert_true(started(w, r1));
    r1->estimate_ms = 10000; /* the caller keeps it current: 15,000 - 5,000 */
    SchedJob *g = submit(w, (JobArgs){.gpus = 4, .submit_ms = 5000});
    SchedJob *b = submit(w, (JobArgs){.submit_ms = 5001, .est_ms = 7000});
    cycle(w, 5000);
    assert_int_equal(w->s.n_res, 1);
    assert_int_equal(w->s.res[0].job, g->id);
    assert_int_equal(w->s.res[0].start_ms, 15000);
    assert_true(started(w, b));
    assert_int_equal(node_of(b), 0);
    world_free(w);
}

/* Rule: the reservation counts every running job, including one the same cycle started.
 * Same cluster; r1 (2 GPUs, estimate 10,000), g (4 GPUs) and b (1 GPU, estimate 20,000)
 * all arrive at 0. r1 starts on node 0; g reserves node 0 from 10,000; b, which would
 * run past 10,000, goes to node 1. */
static void test_reservation_counts_jobs_started_this_cycle(void **state)
{
    World *w = *state;
    Cluster *c = new_cluster();
    add_pool(c, "big", 4, 1, false);
    add_pool(c, "small", 1, 1, false);
    SchedConfig cfg;
    sched_config_gpuorch(&cfg);
    world_init(w, c, "first-fit", &cfg);
    SchedJob *r1 = submit(w, (JobArgs){.gpus = 2, .submit_ms = 0, .est_ms = 10000});
    SchedJob *g = submit(w, (JobArgs){.gpus = 4, .submit_ms = 1});
    SchedJob *b = submit(w, (JobArgs){.submit_ms = 2, .est_ms = 20000});
    cycle(w, 0);
    assert_true(started(w, r1));
    assert_int_equal(node_of(r1), 0);
    assert_int_equal(w->s.n_res, 1);
    assert_int_equal(w->s.res[0].job, g->id);
    assert_int_equal(w->s.res[0].start_ms, 10000);
    assert_true(started(w, b));
    assert_int_equal(node_of(b), 1);
    world_free(w);
}

/* Two nodes of 4 GPUs; r0 (3 GPUs, estimate 10,000) on node 0 and r1 (3 GPUs, 20,000) on
 * node 1 from an earlier cycle. g1 and g2 (4 GPUs each) and s (1 GPU, estimate 25,000)
 * arrive. With max_reservations 2, g1 reserves node 0 from 10,000 and g2 node 1 from
 * 20,000 (node 0 is g1's); s would outlast both, so it waits although each node has a free
 * GPU. With max_reservations 1 only g1 reserves, and s starts on node 1. */
static void test_max_reservations(void **state)
{
    World *w = *state;
    for (unsigned max = 1; max <= 2; max++) {
        Cluster *c = new_cluster();
        add_pool(c, "h", 4, 2, false);
        SchedConfig cfg;
        sched_config_gpuorch(&cfg);
        cfg.max_reservations = max;
        world_init(w, c, "first-fit", &cfg);
        SchedJob *r0 = submit(w, (JobArgs){.gpus = 3, .submit_ms = 0, .est_ms = 10000});
        SchedJob *r1 = submit(w, (JobArgs){.gpus = 3, .submit_ms = 1, .est_ms = 20000});
        cycle(w, 0);
        assert_int_equal(node_of(r0), 0);
        assert_int_equal(node_of(r1), 1);
        SchedJob *g1 = submit(w, (JobArgs){.gpus = 4, .submit_ms = 2});
        SchedJob *g2 = submit(w, (JobArgs){.gpus = 4, .submit_ms = 3});
        SchedJob *s = submit(w, (JobArgs){.submit_ms = 4, .est_ms = 25000});
        cycle(w, 0);
        assert_int_equal(w->s.n_res, max);
        assert_int_equal(w->s.res[0].job, g1->id);
        assert_int_equal(w->s.res[0].start_ms, 10000);
        assert_int_equal(w->s.node_res[0], 0);
        assert_reason_has(g1, GANG_REASON);
        if (max == 2) {
            assert_int_equal(w->s.res[1].job, g2->id);
            assert_int_equal(w->s.res[1].start_ms, 20000);
            assert_int_equal(w->s.node_res[1], 1);
            assert_reason_has(g2, GANG_REASON);
            assert_false(started(w, s));
        } else {
            assert_int_equal(w->s.node_res[1], SCHED_NONE);
            assert_placer_reason(g2);
            assert_true(started(w, s));
            assert_int_equal(node_of(s), 1);
        }
        world_free(w);
    }
}

/* Rule: a waiting job's reason says what keeps it waiting. In the max_reservations scene
 * (two reservations) s waits only because both nodes' free GPUs are reserved for the
 * gangs ahead: its reason must say so. */
static void test_reason_names_the_reservation(void **state)
{
    World *w = *state;
    Cluster *c = new_cluster();
    add_pool(c, "h", 4, 2, false);
    SchedConfig cfg;
    sched_config_gpuorch(&cfg);
    world_init(w, c, "first-fit", &cfg);
    submit(w, (JobArgs){.gpus = 3, .submit_ms = 0, .est_ms = 10000});
    submit(w, (JobArgs){.gpus = 3, .submit_ms = 1, .est_ms = 20000});
    cycle(w, 0);
    submit(w, (JobArgs){.gpus = 4, .submit_ms = 2});
    submit(w, (JobArgs){.gpus = 4, .submit_ms = 3});
    SchedJob *s = submit(w, (JobArgs){.submit_ms = 4, .est_ms = 25000});
    cycle(w, 0);
    assert_int_equal(w->s.n_res, 2);
    assert_false(started(w, s));
    assert_int_equal(c->nodes[0].free_whole, 1);
    assert_int_equal(c->nodes[1].free_whole, 1);
    /* named by id, with when it should start (job 0, 3 GPUs of h-0, ends at 10 s) */
    assert_string_equal(s->reason,
                        "the room it fits in, on h-0, is kept for job 2, ahead of it in the queue, "
                        "which should start there in about 10 s; it may run there first only if "
                        "it is preemptible or its duration estimate ends it by then");
    world_free(w);
}

/* Rule: when a reservation's time comes, the preemptible work that backfilled its nodes
 * is preempted for it, once it has run the minimum run time (5 minutes by default). One
 * node of 4 GPUs: r1 (2 GPUs, estimate 10,000) runs; g (4 GPUs) reserves the node from
 * 10,000; b (1 GPU, normal like g, preemptible, no estimate) backfills it at 0. At 10,000
 * r1 ends: g does not fit because of b, but b has run 10 s, so g waits and its node takes
 * no new backfill (late, 1 GPU, preemptible, stays queued); at 300,000 b has run its 5
 * minutes and gets a SCHED_PREEMPT for g (stopping, nominated g); once b is released, g
 * starts. (b is of g's class, so quota preemption would not take it: only the reservation
 * rule does. It failed with b preempted at 10,000, ten seconds after it started.) */
static void test_reservation_time_moves_backfill(void **state)
{
    World *w = *state;
    Cluster *c = new_cluster();
    add_pool(c, "h", 4, 1, false);
    SchedConfig cfg;
    sched_config_gpuorch(&cfg);
    world_init(w, c, "first-fit", &cfg);
    SchedJob *r1 = submit(w, (JobArgs){.gpus = 2, .submit_ms = 0, .est_ms = 10000});
    cycle(w, 0);
    SchedJob *g = submit(w, (JobArgs){.gpus = 4, .submit_ms = 1});
    SchedJob *b = submit(w, (JobArgs){.submit_ms = 2, .preemptible = true, .grace_ms = 100});
    cycle(w, 0);
    assert_int_equal(w->s.n_res, 1);
    assert_true(started(w, b));

    finish(w, r1);
    SchedJob *late = submit(w, (JobArgs){.submit_ms = 10000, .preemptible = true});
    cycle(w, 10000);
    assert_false(started(w, g));
    assert_false(b->stopping);
    assert_false(started(w, late));
    cycle(w, 299999);
    assert_false(b->stopping);
    cycle(w, 300000);
    assert_false(started(w, g));
    assert_true(preempted_for(w, b, g));
    assert_true(b->stopping);
    assert_int_equal(b->nominated, g->id);
    finish(w, b);
    cycle(w, 300100);
    assert_true(started(w, g));
    assert_false(started(w, late));
    world_free(w);
}

/* Rule: a reservation whose time has come while work that cannot be moved still holds
 * its room (a job running past its estimate) leaves that room to preemptible work until
 * only backfill stands in the way. One node of 4 GPUs: r1 (2 GPUs, estimate 10,000, not
 * preemptible) runs; g (4 GPUs) reserves the node; at 10,000 r1 has used its estimate
 * (0 left), so the reservation's time has come. At 20,000 r1 still runs:
 * b (1 GPU, preemptible) starts on the reserved node, where two GPUs would otherwise sit
 * idle. r1 ends at 30,000: now only b is in g's way, but it ran 10 s, so nothing moves
 * and late (1 GPU, preemptible) is kept off the node; at 320,000 b is preempted for g, and
 * when it is released g starts. (It failed with b kept waiting until r1 ended.) */
static void test_stuck_reservation_takes_backfill(void **state)
{
    World *w = *state;
    Cluster *c = new_cluster();
    add_pool(c, "h", 4, 1, false);
    SchedConfig cfg;
    sched_config_gpuorch(&cfg);
    world_init(w, c, "first-fit", &cfg);
    SchedJob *r1 = submit(w, (JobArgs){.gpus = 2, .submit_ms = 0, .est_ms = 10000});
    cycle(w, 0);
    SchedJob *g = submit(w, (JobArgs){.gpus = 4, .submit_ms = 1});
    r1->estimate_ms = 0; /* the caller keeps it current: nothing left by its estimate */
    cycle(w, 10000);
    assert_int_equal(w->s.n_res, 1);
    assert_false(started(w, g));
    SchedJob *b = submit(w, (JobArgs){.submit_ms = 20000, .preemptible = true, .grace_ms = 100});
    cycle(w, 20000);
    assert_true(started(w, b));
    assert_false(b->stopping);

    finish(w, r1);
    SchedJob *late = submit(w, (JobArgs){.submit_ms = 30000, .preemptible = true});
    cycle(w, 30000);
    assert_false(started(w, g));
    assert_false(b->stopping);
    assert_false(started(w, late));
    cycle(w, 320000);
    assert_true(preempted_for(w, b, g));
    finish(w, b);
    cycle(w, 320100);
    assert_true(started(w, g));
    world_free(w);
}

/* A gang never holds part of an allocation. Two nodes of 4 GPUs, a blocker holding 2 GPUs
 * of node 1 (no estimate); gang g of 2 workers x 4 GPUs: only node 0 is whole, so g does
 * not start, holds nothing, and the cluster holds the blocker's 2 GPUs alone; with no
 * estimate to wait for there is no reservation. Given an estimate of 5,000 the blocker
 * will end, and g reserves both nodes; a later small job (no estimate) cannot use them. */
static void test_gang_all_or_nothing(void **state)
{
    World *w = *state;
    for (int policy = 0; policy <= 1; policy++) {
        for (int known = 0; known <= 1; known++) {
            Cluster *c = new_cluster();
            add_pool(c, "h", 4, 2, false);
            SchedConfig cfg;
            sched_config_gpuorch(&cfg);
            world_init(w, c, policy ? "gpuorch" : "first-fit", &cfg);
            SchedJob *fill = submit(w, (JobArgs){.gpus = 2, .submit_ms = 0});
            SchedJob *blocker =
                submit(w, (JobArgs){.gpus = 2, .submit_ms = 1, .est_ms = known ? 5000 : 0});
            cycle(w, 0);
            /* keep the blocker alone on one node, whichever the policy chose */
            finish(w, fill);
            uint32_t busy = node_of(blocker);
            SchedJob *g = submit(w, (JobArgs){.gpus = 4, .workers = 2, .submit_ms = 2});
            SchedJob *small = submit(w, (JobArgs){.submit_ms = 3});
            cycle(w, 0);
            assert_false(started(w, g));
            assert_int_equal(g->pl.n_workers, 0);
            assert_true(g->queued);
            if (known) {
                assert_int_equal(w->s.n_res, 1);
                assert_int_equal(w->s.res[0].start_ms, 5000);
                assert_int_equal(w->s.node_res[0], 0);
                assert_int_equal(w->s.node_res[1], 0);
                assert_reason_has(g, GANG_REASON);
                assert_false(started(w, small));
                assert_int_equal(c->used_units, 2 * GPU_UNITS);
                assert_int_equal(c->nodes[busy].used_units, 2 * GPU_UNITS);
            } else {
                assert_int_equal(w->s.n_res, 0);
                assert_placer_reason(g);
                assert_true(started(w, small));
                assert_int_equal(c->used_units, 3 * GPU_UNITS);
            }
            world_free(w);
        }
    }
}

/* ---- tiers ---- */

/* Production never lands on spot capacity, nor does work that cannot checkpoint. Pool
 * "spot" (spot tier) comes first, so first-fit tries node 0 (spot-0) before node 1 (od-0,
 * on demand); 2 H100 each. n1 (low, preemptible, checkpointing every 10 min, @0),
 * production p1, p2, p3 (@1,000, @2,000, @3,000) and n2 (low, preemptible but without a
 * checkpoint, @4,000), 1 GPU each, wait at 10,000. Production goes first: p1 and p2 skip
 * spot-0 and take od-0's two GPUs; p3 finds od-0 full and spot-0 excluded: it waits,
 * though spot-0 has room, and the placer says od-0 is the one node it may use. n1 lands
 * on spot-0;
 * n2 waits as p3 does, for the same reason, beside spot-0's free GPU (an interruption
 * would lose its work; it landed there when only production was kept off spot). At
 * 400,000 (n1 past its minimum run time) p3 still waits and does not preempt n1: stopping
 * it would free only spot capacity. A production job that allows only spot is refused by
 * request_from_job. */
static void test_production_never_on_spot(void **state)
{
    World *w = *state;
    Cluster *c = new_cluster();
    add_pool_of(c, "spot", "H100", TIER_SPOT, 2, 1, false);
    add_pool_of(c, "od", "H100", TIER_ON_DEMAND, 2, 1, false);
    SchedConfig cfg;
    sched_config_gpuorch(&cfg);
    world_init(w, c, "first-fit", &cfg);
    SchedJob *n1 = submit(
        w, (JobArgs){.prio = "low", .preemptible = true, .ckpt_ms = 10 * 60000, .submit_ms = 0});
    SchedJob *p[3];
    for (int i = 0; i < 3; i++)
        p[i] = submit(w, (JobArgs){.prio = "production", .submit_ms = 1000 * (i + 1)});
    SchedJob *n2 = submit(w, (JobArgs){.prio = "low", .preemptible = true, .submit_ms = 4000});
    assert_false(p[0]->req.tiers & (1u << TIER_SPOT));
    assert_true(n1->req.tiers & (1u << TIER_SPOT));
    assert_false(n2->req.tiers & (1u << TIER_SPOT));
    cycle(w, 10000);
    assert_int_equal(w->d.n, 3);
    assert_true(started(w, p[0]) && started(w, p[1]) && started(w, n1));
    assert_string_equal(c->nodes[node_of(p[0])].name, "od-0");
    assert_string_equal(c->nodes[node_of(p[1])].name, "od-0");
    assert_string_equal(c->nodes[node_of(n1)].name, "spot-0");
    assert_true(p[2]->queued);
    if (!strstr(p[2]->reason, "the one node it may use, od-0, has no room for a worker"))
        fail_msg("p3 waits for on-demand room, its reason says: \"%s\"", p[2]->reason);
    assert_true(n2->queued);
    if (!strstr(n2->reason, "the one node it may use, od-0, has no room for a worker"))
        fail_msg("n2 waits for on-demand room, its reason says: \"%s\"", n2->reason);

    cycle(w, 400000);
    assert_int_equal(w->d.n, 0);
    assert_false(n1->stopping);
    assert_true(p[2]->queued && n2->queued);
    world_free(w);

    c = new_cluster();
    add_pool_of(c, "spot", "H100", TIER_SPOT, 2, 1, false);
    JobSpec js;
    job_spec_init(&js);
    js.req = REQ_GPUS;
    js.gpus = 1;
    js.priority = PRIO_PRODUCTION;
    js.tiers = 1u << TIER_SPOT;
    Request r;
    Buf why = {0};
    assert_int_equal(request_from_job(c, &js, &r, &why), -EINVAL);
    assert_string_equal(buf_str(&why),
                        "production jobs may not run on spot capacity, and spot is all it allows");
    buf_free(&why);
    cluster_free(c);
}

/* ---- drain ---- */

#define TEN_MIN (10 * 60 * INT64_C(1000))

/* One MIG node of 2 H100s; each GPU has one 1g.10gb instance (4,000 units, a seventh),
 * taken by s0 (GPU 0) and s1 (GPU 1), both expected to end within 10 minutes. A
 * whole-GPU job w cannot start: whole GPUs are wanted, both GPUs hold at most a fifth
 * and will be free within the half-hour horizon; one GPU is wanted, so one is drained,
 * the first of the emptiest: SCHED_DRAIN (0, 0). A later slice s2 then goes to GPU 1, not to the
 * draining GPU 0 (first-fit's own choice would be GPU 0: fresh slots, lowest index), and
 * no second drain is decided. When s0 ends, w starts on GPU 0 taken whole: the MIG layout
 * comes off (a change to an empty layout) and the drain with it. */
static void test_drain_for_whole_gpu_work(void **state)
{
    World *w = *state;
    Cluster *c = new_cluster();
    add_pool(c, "m", 2, 1, true);
    carve(c, 0, 0, "1g.10gb", 0);
    carve(c, 0, 1, "1g.10gb", 0);
    SchedConfig cfg;
    sched_config_gpuorch(&cfg);
    world_init(w, c, "first-fit", &cfg);
    SchedJob *s0 =
        submit(w, (JobArgs){.req = REQ_MIG, .mig = "1g.10gb", .submit_ms = 0, .est_ms = TEN_MIN});
    SchedJob *s1 =
        submit(w, (JobArgs){.req = REQ_MIG, .mig = "1g.10gb", .submit_ms = 1, .est_ms = TEN_MIN});
    cycle(w, 0);
    assert_int_equal(s0->pl.workers[0].grants[0].index, 0);
    assert_int_equal(s1->pl.workers[0].grants[0].index, 1);
    assert_int_equal(gpu_at(c, 0, 0)->used_units, GPU_UNITS / 7);
    assert_int_equal(count(w, SCHED_DRAIN), 0);

    SchedJob *wj = submit(w, (JobArgs){.gpus = 1, .submit_ms = 10});
    cycle(w, 100);
    assert_false(started(w, wj));
    assert_int_equal(count(w, SCHED_DRAIN), 1);
    assert_true(decided_gpu(w, SCHED_DRAIN, 0, 0));
    assert_true(gpu_at(c, 0, 0)->draining);
    assert_false(gpu_at(c, 0, 1)->draining);
    assert_placer_reason(wj);

    SchedJob *s2 = submit(w, (JobArgs){.req = REQ_MIG, .mig = "1g.10gb", .submit_ms = 20});
    cycle(w, 200);
    assert_true(started(w, s2));
    assert_int_equal(s2->pl.workers[0].grants[0].index, 1);
    assert_int_equal(count(w, SCHED_DRAIN), 0);
    assert_int_equal(count(w, SCHED_UNDRAIN), 0);

    finish(w, s0);
    cycle(w, 300);
    assert_true(started(w, wj));
    const Grant *gr = &wj->pl.workers[0].grants[0];
    assert_int_equal(gr->index, 0);
    assert_int_equal(gr->kind, GRANT_WHOLE);
    assert_int_equal(wj->pl.n_changes, 1);
    assert_true(mig_layout_empty(&wj->pl.changes[0].after));
    assert_int_equal(gpu_at(c, 0, 0)->mode, GPU_WHOLE);
    assert_false(gpu_at(c, 0, 0)->draining);
    world_free(w);
}

/* Rule: a draining GPU takes no new slices, also once its last slice has ended. The same
 * start: GPU 0 is draining for w. s0 ends, so GPU 0 is idle (its 1g instance kept); a
 * high-priority slice s3 arrives and goes before w in the queue. s3 must go to GPU 1
 * (a fresh slot beside s1) and w must get GPU 0. */
static void test_draining_gpu_takes_no_slice_when_idle(void **state)
{
    World *w = *state;
    Cluster *c = new_cluster();
    add_pool(c, "m", 2, 1, true);
    carve(c, 0, 0, "1g.10gb", 0);
    carve(c, 0, 1, "1g.10gb", 0);
    SchedConfig cfg;
    sched_config_gpuorch(&cfg);
    world_init(w, c, "first-fit", &cfg);
    SchedJob *s0 =
        submit(w, (JobArgs){.req = REQ_MIG, .mig = "1g.10gb", .submit_ms = 0, .est_ms = TEN_MIN});
    submit(w, (JobArgs){.req = REQ_MIG, .mig = "1g.10gb", .submit_ms = 1, .est_ms = TEN_MIN});
    cycle(w, 0);
    assert_int_equal(s0->pl.workers[0].grants[0].index, 0);
    SchedJob *wj = submit(w, (JobArgs){.gpus = 1, .submit_ms = 10});
    cycle(w, 100);
    assert_true(gpu_at(c, 0, 0)->draining);
    finish(w, s0);
    SchedJob *s3 =
        submit(w, (JobArgs){.req = REQ_MIG, .mig = "1g.10gb", .prio = "high", .submit_ms = 20});
    cycle(w, 200);
    assert_true(started(w, s3));
    assert_int_equal(s3->pl.workers[0].grants[0].index, 1);
    assert_true(started(w, wj));
    world_free(w);
}

/* The same start; when the whole-GPU job is taken out of the queue nobody wants whole
 * GPUs any more: SCHED_UNDRAIN (0, 0), and a new slice may land on GPU 0 again. */
static void test_undrain_when_nobody_waits(void **state)
{
    World *w = *state;
    Cluster *c = new_cluster();
    add_pool(c, "m", 2, 1, true);
    carve(c, 0, 0, "1g.10gb", 0);
    carve(c, 0, 1, "1g.10gb", 0);
    SchedConfig cfg;
    sched_config_gpuorch(&cfg);
    world_init(w, c, "first-fit", &cfg);
    submit(w, (JobArgs){.req = REQ_MIG, .mig = "1g.10gb", .submit_ms = 0, .est_ms = TEN_MIN});
    submit(w, (JobArgs){.req = REQ_MIG, .mig = "1g.10gb", .submit_ms = 1, .est_ms = TEN_MIN});
    cycle(w, 0);
    SchedJob *wj = submit(w, (JobArgs){.gpus = 1, .submit_ms = 10});
    cycle(w, 100);
    assert_true(gpu_at(c, 0, 0)->draining);
    sched_dequeue(&w->s, wj);
    cycle(w, 200);
    assert_int_equal(count(w, SCHED_UNDRAIN), 1);
    assert_true(decided_gpu(w, SCHED_UNDRAIN, 0, 0));
    assert_false(gpu_at(c, 0, 0)->draining);
    SchedJob *s2 = submit(w, (JobArgs){.req = REQ_MIG, .mig = "1g.10gb", .submit_ms = 20});
    cycle(w, 300);
    assert_true(started(w, s2));
    assert_int_equal(s2->pl.workers[0].grants[0].index, 0);
    world_free(w);
}

/* Only GPUs holding at most a fifth (5,600 units), whose slices are expected to end
 * within half an hour, are drained: GPU 0 with a busy 2g.20gb (8,000 units) is passed
 * over for GPU 1 with a 1g.10gb (4,000), though it comes first. With both GPUs at 2g
 * nothing is drained. Two whole GPUs wanted drain two GPUs; but not a GPU whose slice is
 * expected to run 2 hours more, nor one whose slice has no estimate (it would hold the
 * GPU out of use for as long as it runs). The drain switch in the config turns it all
 * off. */
static void test_drain_only_nearly_empty(void **state)
{
    World *w = *state;
    static const struct {
        const char *p0, *p1;
        int64_t est0, est1;
        unsigned gpus;
        bool drain;
        size_t drains;
        bool d0, d1;
    } cases[] = {
        {"2g.20gb", "1g.10gb", TEN_MIN, TEN_MIN, 1, true, 1, false, true},
        {"2g.20gb", "2g.20gb", TEN_MIN, TEN_MIN, 1, true, 0, false, false},
        {"1g.10gb", "1g.10gb", TEN_MIN, TEN_MIN, 2, true, 2, true, true},
        {"1g.10gb", "1g.10gb", 2 * HOUR_MS, TEN_MIN, 2, true, 1, false, true},
        {"1g.10gb", "1g.10gb", TEN_MIN, 0, 2, true, 1, true, false},
        {"1g.10gb", "1g.10gb", TEN_MIN, TEN_MIN, 1, false, 0, false, false},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        Cluster *c = new_cluster();
        add_pool(c, "m", 2, 1, true);
        carve(c, 0, 0, cases[i].p0, 0);
        carve(c, 0, 1, cases[i].p1, 0);
        SchedConfig cfg;
        sched_config_gpuorch(&cfg);
        cfg.drain = cases[i].drain;
        world_init(w, c, "first-fit", &cfg);
        SchedJob *s0 = submit(
            w,
            (JobArgs){.req = REQ_MIG, .mig = cases[i].p0, .submit_ms = 0, .est_ms = cases[i].est0});
        SchedJob *s1 = submit(
            w,
            (JobArgs){.req = REQ_MIG, .mig = cases[i].p1, .submit_ms = 1, .est_ms = cases[i].est1});
        cycle(w, 0);
        assert_true(started(w, s0) && started(w, s1));
        assert_int_equal(s0->pl.workers[0].grants[0].index, 0);
        assert_int_equal(s1->pl.workers[0].grants[0].index, 1);
        submit(w, (JobArgs){.gpus = cases[i].gpus, .submit_ms = 10});
        cycle(w, 100);
        if (count(w, SCHED_DRAIN) != cases[i].drains || gpu_at(c, 0, 0)->draining != cases[i].d0 ||
            gpu_at(c, 0, 1)->draining != cases[i].d1)
            fail_msg("case %zu: %zu drains (GPU 0 %d, GPU 1 %d), expected %zu (%d, %d)", i,
                     count(w, SCHED_DRAIN), gpu_at(c, 0, 0)->draining, gpu_at(c, 0, 1)->draining,
                     cases[i].drains, cases[i].d0, cases[i].d1);
        world_free(w);
    }
}

/* ---- consolidation ---- */

#define MIN_MS (60 * INT64_C(1000))

/* Three model servers on one MIG node of 2 H100s, first-fit, no estimates (so nothing is
 * drained: drain() waits only for slices expected to end). GPU 0 has an idle 1g.10gb at
 * slot 0, GPU 1 two at slots 0 and 1; s0 takes GPU 0's (the reuse class, lowest index),
 * s1 and s2 GPU 1's. */
static void three_servers(World *w, const SchedConfig *cfg, bool movable0, SchedJob **s0,
                          SchedJob **s1, SchedJob **s2)
{
    Cluster *c = new_cluster();
    add_pool(c, "m", 2, 1, true);
    carve(c, 0, 0, "1g.10gb", 0);
    carve(c, 0, 1, "1g.10gb", 0);
    carve(c, 0, 1, "1g.10gb", 1);
    world_init(w, c, "first-fit", cfg);
    *s0 = submit(w, (JobArgs){.req = REQ_MIG, .mig = "1g.10gb", .movable = movable0});
    *s1 = submit(w, (JobArgs){.req = REQ_MIG, .mig = "1g.10gb", .submit_ms = 1, .movable = true});
    *s2 = submit(w, (JobArgs){.req = REQ_MIG, .mig = "1g.10gb", .submit_ms = 2, .movable = true});
    cycle(w, 0);
    assert_int_equal((*s0)->pl.workers[0].grants[0].index, 0);
    assert_int_equal((*s1)->pl.workers[0].grants[0].index, 1);
    assert_int_equal((*s2)->pl.workers[0].grants[0].index, 1);
}

static bool moved(const World *w, const SchedJob *j)
{
    for (size_t k = 0; k < w->d.n; k++)
        if (w->d.d[k].kind == SCHED_MOVE && w->d.d[k].job == j->id)
            return true;
    return false;
}

/* The three servers; at 10 minutes (past the 5-minute minimum run time) a whole-GPU job
 * w arrives and cannot start. GPU 0 holds 4,000 units and GPU 1 8,000, both under the
 * 16,000 (4/7) a GPU may hold to be emptied; GPU 0 is the emptiest. s0's replacement is
 * placed with GPU 0 drained: no idle 1g instance is left, so a new one is cut in GPU 1's
 * first free slot, 2 (one MIG change), beside s1 and s2. One GPU is wanted and one is
 * emptied: SCHED_MOVE of s0 only. Until the caller reports the replacement ready s0
 * holds both (GPU 0 at 4,000, GPU 1 at 12,000) and w waits; after sched_move_done GPU 0
 * is idle and w starts on it, whole. */
static void test_consolidate_moves_servers_for_whole_gpu(void **state)
{
    World *w = *state;
    SchedConfig cfg;
    sched_config_gpuorch(&cfg);
    SchedJob *s0, *s1, *s2;
    three_servers(w, &cfg, true, &s0, &s1, &s2);
    Cluster *c = w->c;
    SchedJob *wj = submit(w, (JobArgs){.gpus = 1, .submit_ms = 10 * MIN_MS});
    cycle(w, 10 * MIN_MS);
    assert_false(started(w, wj));
    assert_int_equal(count(w, SCHED_MOVE), 1);
    assert_true(moved(w, s0));
    assert_true(s0->moving);
    assert_int_equal(s0->placed_ms, 10 * MIN_MS);
    const Grant *to = &s0->pl.workers[0].grants[0];
    assert_int_equal(to->index, 1);
    assert_int_equal(to->mig_start, 2);
    assert_int_equal(s0->pl.n_changes, 1);
    assert_int_equal(s0->moved_from.workers[0].grants[0].index, 0);
    assert_true(gpu_at(c, 0, 0)->draining);
    assert_int_equal(gpu_at(c, 0, 0)->used_units, GPU_UNITS / 7);
    assert_int_equal(gpu_at(c, 0, 1)->used_units, 3 * (GPU_UNITS / 7));

    sched_move_done(&w->s, s0);
    assert_false(s0->moving);
    assert_int_equal(gpu_at(c, 0, 0)->used_units, 0);
    assert_true(cluster_consistent(c));
    cycle(w, 11 * MIN_MS);
    assert_true(started(w, wj));
    assert_int_equal(wj->pl.workers[0].grants[0].index, 0);
    assert_int_equal(wj->pl.workers[0].grants[0].kind, GRANT_WHOLE);
    assert_int_equal(count(w, SCHED_MOVE), 0);

    /* s0 ends on its new GPU: what it holds there goes back */
    finish(w, s0);
    assert_int_equal(gpu_at(c, 0, 1)->used_units, 2 * (GPU_UNITS / 7));
    world_free(w);
}

/* Who moves. The same three servers and w:
 *  - at 4 minutes nobody has run the 5-minute minimum: no move;
 *  - s0 not movable: GPU 0 cannot be emptied, so GPU 1 is, the emptiest GPU left: s1 and
 *    s2 move into GPU 0's free slots 1 and 2, and GPU 1 is drained;
 *  - consolidation off in the config: no move. */
static void test_consolidate_who_moves(void **state)
{
    World *w = *state;
    SchedConfig cfg;
    sched_config_gpuorch(&cfg);
    SchedJob *s0, *s1, *s2;

    three_servers(w, &cfg, true, &s0, &s1, &s2);
    submit(w, (JobArgs){.gpus = 1, .submit_ms = MIN_MS});
    cycle(w, 4 * MIN_MS);
    assert_int_equal(count(w, SCHED_MOVE), 0);
    assert_false(gpu_at(w->c, 0, 0)->draining || gpu_at(w->c, 0, 1)->draining);
    world_free(w);

    three_servers(w, &cfg, false, &s0, &s1, &s2);
    submit(w, (JobArgs){.gpus = 1, .submit_ms = MIN_MS});
    cycle(w, 10 * MIN_MS);
    assert_int_equal(count(w, SCHED_MOVE), 2);
    assert_true(moved(w, s1) && moved(w, s2));
    assert_int_equal(s1->pl.workers[0].grants[0].index, 0);
    assert_int_equal(s1->pl.workers[0].grants[0].mig_start, 1);
    assert_int_equal(s2->pl.workers[0].grants[0].index, 0);
    assert_int_equal(s2->pl.workers[0].grants[0].mig_start, 2);
    assert_true(gpu_at(w->c, 0, 1)->draining);
    assert_false(gpu_at(w->c, 0, 0)->draining);
    world_free(w);

    cfg.consolidate = false;
    three_servers(w, &cfg, true, &s0, &s1, &s2);
    submit(w, (JobArgs){.gpus = 1, .submit_ms = MIN_MS});
    cycle(w, 10 * MIN_MS);
    assert_int_equal(count(w, SCHED_MOVE), 0);
    world_free(w);
}

/* All of a GPU's servers move, or none. One MIG node of 2 H100s: GPU 0 holds movable s0
 * (1g.10gb at slot 0) and s1 (3g.40gb at slot 4): 16,000 units, just within 4/7. GPU 1
 * holds n0 (4g.40gb at 0) and n1 (1g.10gb at 4), not movable: slots 5 and 6 are free,
 * room for a 1g but not a 3g (which starts only at 0 or 4). s0's replacement fits in
 * slot 5, s1's nowhere (GPU 0 is being emptied, GPU 1 has no room): s0's is undone, GPU 1
 * keeps its layout and units, GPU 0 is not left drained, and no move is decided. */
static void test_consolidate_all_or_nothing(void **state)
{
    World *w = *state;
    Cluster *c = new_cluster();
    add_pool(c, "m", 2, 1, true);
    carve(c, 0, 0, "1g.10gb", 0);
    carve(c, 0, 0, "3g.40gb", 4);
    carve(c, 0, 1, "4g.40gb", 0);
    carve(c, 0, 1, "1g.10gb", 4);
    SchedConfig cfg;
    sched_config_gpuorch(&cfg);
    world_init(w, c, "first-fit", &cfg);
    SchedJob *s0 = submit(w, (JobArgs){.req = REQ_MIG, .mig = "1g.10gb", .movable = true});
    SchedJob *s1 =
        submit(w, (JobArgs){.req = REQ_MIG, .mig = "3g.40gb", .submit_ms = 1, .movable = true});
    SchedJob *n0 = submit(w, (JobArgs){.req = REQ_MIG, .mig = "4g.40gb", .submit_ms = 2});
    SchedJob *n1 = submit(w, (JobArgs){.req = REQ_MIG, .mig = "1g.10gb", .submit_ms = 3});
    cycle(w, 0);
    assert_int_equal(s0->pl.workers[0].grants[0].index, 0);
    assert_int_equal(s1->pl.workers[0].grants[0].index, 0);
    assert_int_equal(n0->pl.workers[0].grants[0].index, 1);
    assert_int_equal(n1->pl.workers[0].grants[0].index, 1);
    MigLayout before = gpu_at(c, 0, 1)->mig;
    submit(w, (JobArgs){.gpus = 1, .submit_ms = MIN_MS});
    cycle(w, 10 * MIN_MS);
    assert_int_equal(count(w, SCHED_MOVE), 0);
    assert_false(s0->moving || s1->moving);
    assert_int_equal(s0->pl.workers[0].grants[0].index, 0);
    assert_int_equal(s0->moved_from.n_workers, 0);
    assert_false(gpu_at(c, 0, 0)->draining);
    assert_int_equal(gpu_at(c, 0, 1)->used_units, 5 * (GPU_UNITS / 7));
    assert_memory_equal(&gpu_at(c, 0, 1)->mig, &before, sizeof(before));
    world_free(w);
}

/* An MPS-shared GPU is emptied the same way. Node 0 has one A100, node 1 one H100, no
 * MIG. n0 and x (half a GPU each, H100 only) fill node 1; s1 (a quarter, movable, any
 * model) goes to node 0. x ends; at 10 minutes w wants a whole GPU: node 1's GPU holds
 * n0, which cannot move; node 0's holds only s1 (7,000 units). s1's replacement must not
 * land beside it on the GPU being emptied (first-fit tries node 0 first: a draining GPU
 * takes no new share), so it goes to node 1's free half, with the same 20 GB. Once it is
 * ready node 0's GPU is whole again, no longer drained, and w starts on it. */
static void test_consolidate_empties_a_shared_gpu(void **state)
{
    World *w = *state;
    Cluster *c = new_cluster();
    add_pool_of(c, "a", "A100-80GB", TIER_OWNED, 1, 1, false);
    add_pool_of(c, "h", "H100", TIER_OWNED, 1, 1, false);
    SchedConfig cfg;
    sched_config_gpuorch(&cfg);
    world_init(w, c, "first-fit", &cfg);
    SchedJob *n0 = submit(w, (JobArgs){.req = REQ_FRACTION, .milli = 500, .model = "H100"});
    SchedJob *x =
        submit(w, (JobArgs){.req = REQ_FRACTION, .milli = 500, .model = "H100", .submit_ms = 1});
    SchedJob *s1 =
        submit(w, (JobArgs){.req = REQ_FRACTION, .milli = 250, .submit_ms = 2, .movable = true});
    cycle(w, 0);
    assert_true(started(w, n0) && started(w, x) && started(w, s1));
    assert_int_equal(node_of(n0), 1);
    assert_int_equal(node_of(s1), 0);
    finish(w, x);
    SchedJob *wj = submit(w, (JobArgs){.gpus = 1, .submit_ms = MIN_MS});
    cycle(w, 10 * MIN_MS);
    assert_false(started(w, wj));
    assert_true(moved(w, s1));
    assert_int_equal(node_of(s1), 1);
    assert_int_equal(s1->pl.workers[0].grants[0].kind, GRANT_SHARE);
    assert_true(gpu_at(c, 0, 0)->draining);
    sched_move_done(&w->s, s1);
    assert_int_equal(gpu_at(c, 0, 0)->mode, GPU_WHOLE);
    assert_false(gpu_at(c, 0, 0)->draining);
    cycle(w, 11 * MIN_MS);
    assert_true(started(w, wj));
    assert_int_equal(node_of(wj), 0);
    world_free(w);
}

/* A replacement goes only into room a partitioned GPU already has, never into a whole
 * GPU cut for it (that would only move the fragment). One MIG node of 3 H100s: s0 holds
 * GPU 0's 1g.10gb, r GPU 1 whole, GPU 2 is whole and free; w asks 2 GPUs and cannot
 * start. s0's only option is to cut GPU 2: that is undone, so GPU 2 stays whole and
 * free, GPU 0 undrained, no move. */
static void test_consolidate_never_cuts_a_whole_gpu(void **state)
{
    World *w = *state;
    Cluster *c = new_cluster();
    add_pool(c, "m", 3, 1, true);
    carve(c, 0, 0, "1g.10gb", 0);
    SchedConfig cfg;
    sched_config_gpuorch(&cfg);
    world_init(w, c, "first-fit", &cfg);
    SchedJob *s0 = submit(w, (JobArgs){.req = REQ_MIG, .mig = "1g.10gb", .movable = true});
    SchedJob *r = submit(w, (JobArgs){.gpus = 1, .submit_ms = 1});
    cycle(w, 0);
    assert_int_equal(s0->pl.workers[0].grants[0].index, 0);
    assert_int_equal(r->pl.workers[0].grants[0].index, 1);
    SchedJob *wj = submit(w, (JobArgs){.gpus = 2, .submit_ms = MIN_MS});
    cycle(w, 10 * MIN_MS);
    assert_false(started(w, wj));
    assert_int_equal(count(w, SCHED_MOVE), 0);
    assert_false(s0->moving);
    assert_int_equal(gpu_at(c, 0, 2)->mode, GPU_WHOLE);
    assert_int_equal(gpu_at(c, 0, 2)->used_units, 0);
    assert_false(gpu_at(c, 0, 0)->draining);
    world_free(w);
}

/* ---- MIG slices through the cycle (gpuorch policy) ---- */

/* One MIG node of 2 H100s, policy gpuorch, no mix.
 * Reuse: GPU 0 has an idle 3g.40gb at slot 0, GPU 1 an idle 1g.10gb at slot 6. A 1g job
 *   takes GPU 1's instance as it is (no change), not a new one in GPU 0's free slots.
 * Partitioned first: GPU 0 whole and free, GPU 1 holds a busy 3g.40gb (s3). A 1g job goes
 *   into GPU 1's free slots (one change, on GPU 1, the 3g kept) and GPU 0 stays whole. */
static void test_mig_reuse_and_fill_partitioned(void **state)
{
    World *w = *state;
    Cluster *c = new_cluster();
    add_pool(c, "m", 2, 1, true);
    carve(c, 0, 0, "3g.40gb", 0);
    carve(c, 0, 1, "1g.10gb", 6);
    SchedConfig cfg;
    sched_config_gpuorch(&cfg);
    world_init(w, c, "gpuorch", &cfg);
    SchedJob *s = submit(w, (JobArgs){.req = REQ_MIG, .mig = "1g.10gb", .submit_ms = 0});
    cycle(w, 0);
    assert_true(started(w, s));
    assert_int_equal(s->pl.n_changes, 0);
    assert_int_equal(s->pl.workers[0].grants[0].kind, GRANT_MIG);
    assert_int_equal(s->pl.workers[0].grants[0].index, 1);
    assert_int_equal(s->pl.workers[0].grants[0].mig_start, 6);
    world_free(w);

    c = new_cluster();
    add_pool(c, "m", 2, 1, true);
    carve(c, 0, 1, "3g.40gb", 0);
    world_init(w, c, "gpuorch", &cfg);
    SchedJob *s3 = submit(w, (JobArgs){.req = REQ_MIG, .mig = "3g.40gb", .submit_ms = 0});
    cycle(w, 0);
    assert_int_equal(s3->pl.workers[0].grants[0].index, 1);
    SchedJob *s1 = submit(w, (JobArgs){.req = REQ_MIG, .mig = "1g.10gb", .submit_ms = 1});
    cycle(w, 10);
    assert_true(started(w, s1));
    assert_int_equal(s1->pl.workers[0].grants[0].index, 1);
    assert_int_equal(s1->pl.n_changes, 1);
    const MigChange *ch = &s1->pl.changes[0];
    assert_int_equal(ch->index, 1);
    assert_int_equal(ch->before.profile_at[0], prof(c, "3g.40gb"));
    assert_int_equal(ch->after.profile_at[0], prof(c, "3g.40gb"));
    assert_int_equal(gpu_at(c, 0, 0)->mode, GPU_WHOLE);
    assert_int_equal(c->nodes[0].free_whole, 1);
    world_free(w);
}

/* Re-carving destroys only idle instances. One H100 cut into seven 1g.10gb; s0 (1g)
 * takes one of them. A 3g.40gb job needs four slots of one half: the change's before is
 * the seven, its after keeps s0's instance where it was, and every instance busy before
 * is still there, with the same profile; the new layout is valid and is the GPU's. */
static void test_mig_recarve_only_idle(void **state)
{
    World *w = *state;
    Cluster *c = new_cluster();
    add_pool(c, "m", 1, 1, true);
    for (unsigned s = 0; s < 7; s++)
        carve(c, 0, 0, "1g.10gb", s);
    MigLayout seven = gpu_at(c, 0, 0)->mig;
    SchedConfig cfg;
    sched_config_gpuorch(&cfg);
    world_init(w, c, "gpuorch", &cfg);
    SchedJob *s0 = submit(w, (JobArgs){.req = REQ_MIG, .mig = "1g.10gb", .submit_ms = 0});
    cycle(w, 0);
    assert_int_equal(s0->pl.n_changes, 0);
    unsigned busy = s0->pl.workers[0].grants[0].mig_start;
    uint8_t busy_mask = gpu_at(c, 0, 0)->mig_busy;
    SchedJob *t = submit(w, (JobArgs){.req = REQ_MIG, .mig = "3g.40gb", .submit_ms = 1});
    cycle(w, 10);
    assert_true(started(w, t));
    assert_int_equal(t->pl.n_changes, 1);
    const MigChange *ch = &t->pl.changes[0];
    assert_memory_equal(&ch->before, &seven, sizeof(seven));
    for (unsigned s = 0; s < MIG_MAX_SLOTS; s++)
        if (busy_mask & (1u << s))
            assert_int_equal(ch->after.profile_at[s], ch->before.profile_at[s]);
    assert_int_equal(ch->after.profile_at[busy], prof(c, "1g.10gb"));
    unsigned start = t->pl.workers[0].grants[0].mig_start;
    assert_int_equal(ch->after.profile_at[start], prof(c, "3g.40gb"));
    assert_true(mig_layout_valid(node_model(c, &c->nodes[0]), &ch->after));
    assert_memory_equal(&gpu_at(c, 0, 0)->mig, &ch->after, sizeof(MigLayout));
    world_free(w);
}

/* ---- right-sizing ---- */

/* A gpu_memory job gets the smallest MIG profile that holds it. A100-80GB profiles
 * (memory the instance reports; memory slots, compute slices):
 *   1g.10gb 9,728 (1, 1)   1g.20gb 19,968 (2, 1)   2g.20gb 19,968 (2, 2)
 *   3g.40gb 40,192 (4, 3)  4g.40gb 40,192 (4, 4)   7g.80gb 80,640 (8, 7)
 * The smallest: fewest memory slots, then fewest compute slices.
 *   9,728 MiB -> 1g.10gb;  9,729 -> 1g.20gb (not 2g.20gb: fewer compute slices);
 *   15 GiB = 15,360 -> 1g.20gb;  40,192 -> 3g.40gb;  40 GiB = 40,960 -> 7g.80gb (the
 *   "40gb" profiles report 40,192 MiB, less than 40 GiB).
 * Through the cycle (first-fit) on one unpartitioned A100 (MIG allowed): r15 carves a
 * 1g.20gb at slot 0 (slots 0-1); r9728 a 1g.10gb in the first free slot, 2; r9729 a
 * 1g.20gb at the first of its starts (0, 2, 4, 6) free for two slots: 4. Each holds 1/7
 * GPU (4,000 units). */
static void test_right_size_by_memory(void **state)
{
    World *w = *state;
    Cluster *c = new_cluster();
    add_pool_of(c, "a", "A100-80GB", TIER_OWNED, 1, 1, true);
    SchedConfig cfg;
    sched_config_gpuorch(&cfg);
    world_init(w, c, "first-fit", &cfg);
    const GpuModel *m = node_model(c, &c->nodes[0]);
    unsigned mi = c->nodes[0].model;
    static const struct {
        uint64_t mib;
        const char *profile;
    } want[] = {{15360, "1g.20gb"},
                {9728, "1g.10gb"},
                {9729, "1g.20gb"},
                {40192, "3g.40gb"},
                {40960, "7g.80gb"}};
    SchedJob *r[5];
    for (size_t i = 0; i < 5; i++) {
        r[i] =
            job(w, (JobArgs){.req = REQ_MEMORY, .mem_mib = want[i].mib, .submit_ms = (int64_t)i});
        int p = r[i]->req.mig_profile[mi];
        if (p < 0 || strcmp(m->profiles[p].name, want[i].profile))
            fail_msg("%llu MiB: profile %d, expected %s", (unsigned long long)want[i].mib, p,
                     want[i].profile);
    }
    for (size_t i = 0; i < 3; i++)
        assert_int_equal(sched_enqueue(&w->s, r[i]), 0);
    cycle(w, 0);
    assert_int_equal(w->d.n, 3);
    static const unsigned start[] = {0, 2, 4};
    for (size_t i = 0; i < 3; i++) {
        const Grant *g = &r[i]->pl.workers[0].grants[0];
        assert_int_equal(g->kind, GRANT_MIG);
        assert_string_equal(m->profiles[g->mig_profile].name, want[i].profile);
        assert_int_equal(g->mig_start, start[i]);
        assert_true(r[i]->units == GPU_UNITS / 7);
    }
    world_free(w);
}

/* sched_position_newest counts a new submission's place from the buckets without
 * building the order; it must agree with sched_order: classes first, teams by fair
 * share (team a has run for an hour, so its key is larger than b's and c's, which are
 * equal and merged by age), then age. Jobs taken out of the queue are not counted. */
static void test_position_newest_matches_order(void **state)
{
    World *w = *state;
    Cluster *c = new_cluster();
    add_pool(c, "p", 8, 2, false);
    add_team(c, "a", 4, 16);
    add_team(c, "b", 4, 16);
    add_team(c, "c", 4, 16);
    SchedConfig cfg;
    sched_config_gpuorch(&cfg);
    world_init(w, c, "gpuorch", &cfg);
    submit(w, (JobArgs){.gpus = 8, .team = "a"});
    cycle(w, 0);
    assert_int_equal(w->n_running, 1);
    cycle(w, HOUR_MS);
    static const char *const prios[] = {"normal", "high", "low", "normal", "production", "high"};
    static const char *const teams[] = {"b", "a", "c", "a", "c", "b", "c", "a", "b", "c", "b"};
    SchedJob *taken = NULL;
    for (size_t k = 0; k < 18; k++) {
        SchedJob *j = submit(w, (JobArgs){.gpus = 8,
                                          .workers = 2,
                                          .team = teams[k % ARRAY_SIZE(teams)],
                                          .prio = prios[k % ARRAY_SIZE(prios)],
                                          .submit_ms = HOUR_MS + (int64_t)k});
        if (k == 7) {
            taken = j;
            sched_dequeue(&w->s, j);
            continue;
        }
        uint32_t p = sched_position_newest(&w->s, j);
        int n = sched_order(&w->s);
        assert_true(n > 0);
        uint32_t at = 0;
        for (int i = 0; i < n; i++)
            if (w->s.order[i] == j)
                at = (uint32_t)i + 1;
        if (p != at)
            fail_msg("job %zu (%s, team %s): counted position %u, ordered %u", k,
                     prios[k % ARRAY_SIZE(prios)], teams[k % ARRAY_SIZE(teams)], p, at);
    }
    assert_int_equal(sched_position_newest(&w->s, taken), 0);
}

/* A lead moves a job inside its team and class: sched_move puts it just before or
 * after another queued job of the same bucket, the order shows it, and jobs submitted in
 * the same millisecond (ordered only by id) can be moved between too. Moving across
 * buckets (another class or team) is refused. */
static void test_move_within_bucket(void **state)
{
    World *w = *state;
    Cluster *c = new_cluster();
    add_pool(c, "p", 8, 1, false);
    add_team(c, "a", 4, 16);
    add_team(c, "b", 4, 16);
    SchedConfig cfg;
    sched_config_gpuorch(&cfg);
    world_init(w, c, "gpuorch", &cfg);
    SchedJob *big = submit(w, (JobArgs){.gpus = 8, .team = "a"});
    cycle(w, 0);
    assert_true(started(w, big));
    /* four waiting jobs of team a, the last three in one millisecond, and one of b */
    SchedJob *j1 = submit(w, (JobArgs){.gpus = 8, .team = "a", .submit_ms = 10});
    SchedJob *j2 = submit(w, (JobArgs){.gpus = 8, .team = "a", .submit_ms = 20});
    SchedJob *j3 = submit(w, (JobArgs){.gpus = 8, .team = "a", .submit_ms = 20});
    SchedJob *j4 = submit(w, (JobArgs){.gpus = 8, .team = "a", .submit_ms = 20});
    SchedJob *other = submit(w, (JobArgs){.gpus = 8, .team = "b", .submit_ms = 15});
    SchedJob *hi = submit(w, (JobArgs){.gpus = 8, .team = "a", .prio = "high", .submit_ms = 30});
    assert_int_equal(sched_move(&w->s, j4, j1, false), 0); /* j4 to the front of a's jobs */
    assert_int_equal(sched_order(&w->s), 6);
    const SchedJob *want1[] = {hi, j4, j1, other, j2, j3};
    assert_order(w, want1, 6);
    /* between two jobs of one millisecond: j4 goes between j2 and j3 */
    assert_int_equal(sched_move(&w->s, j4, j2, true), 0);
    assert_int_equal(sched_order(&w->s), 6);
    const SchedJob *want2[] = {hi, j1, other, j2, j4, j3};
    assert_order(w, want2, 6);
    assert_int_equal(sched_move(&w->s, j1, j3, true), 0); /* to the back */
    assert_int_equal(sched_order(&w->s), 6);
    const SchedJob *want3[] = {hi, other, j2, j4, j3, j1};
    assert_order(w, want3, 6);
    /* another team's job, another class, or a job not queued: refused */
    assert_int_equal(sched_move(&w->s, j1, other, false), -EINVAL);
    assert_int_equal(sched_move(&w->s, j1, hi, false), -EINVAL);
    assert_int_equal(sched_move(&w->s, j1, big, false), -EINVAL);
}

/* Budgets: the caller marks team a over its monthly budget (12.345678 GPU-hours of 10).
 * Its normal job waits, saying so in numbers; its production job starts, and so does
 * team b's normal job, all in one cycle. Exactly at the budget is over it too; a
 * millionth of an hour under it (a new month, a raised budget) and the job starts.
 * Small numbers keep their digits (0.00056 of 0.0001), and no budget is never over. */
static void test_over_budget_waits_but_production_starts(void **state)
{
    World *w = *state;
    Cluster *c = new_cluster();
    add_pool(c, "h", 4, 1, false);
    add_team(c, "a", 1, 4);
    add_team(c, "b", 1, 4);
    SchedConfig cfg;
    sched_config_gpuorch(&cfg);
    world_init(w, c, "first-fit", &cfg);
    tenancy_set_budget(&w->s.ten, 0, "a", 12345678, 10);
    assert_true(w->s.ten.teams[0].over_budget);
    SchedJob *a1 = submit(w, (JobArgs){.team = "a", .submit_ms = 0});
    SchedJob *ap = submit(w, (JobArgs){.team = "a", .prio = "production", .submit_ms = 1});
    SchedJob *b1 = submit(w, (JobArgs){.team = "b", .submit_ms = 2});
    cycle(w, 0);
    assert_false(started(w, a1));
    assert_true(started(w, ap) && started(w, b1));
    assert_string_equal(a1->reason, "team a used its GPU-hour budget for this month (12.3 of 10)");

    tenancy_set_budget(&w->s.ten, 0, "a", 10000000, 10);
    cycle(w, 1000);
    assert_false(started(w, a1));
    assert_string_equal(a1->reason, "team a used its GPU-hour budget for this month (10 of 10)");

    tenancy_set_budget(&w->s.ten, 0, "a", 9999999, 10);
    assert_false(w->s.ten.teams[0].over_budget);
    cycle(w, 2000);
    assert_true(started(w, a1));
    assert_string_equal(a1->reason, "");

    tenancy_set_budget(&w->s.ten, 1, "b", 560, 0.0001);
    assert_string_equal(w->s.ten.teams[1].budget_reason,
                        "team b used its GPU-hour budget for this month (0.00056 of 0.0001)");
    tenancy_set_budget(&w->s.ten, 1, "b", INT64_C(1) << 50, 0);
    assert_false(w->s.ten.teams[1].over_budget);
    assert_string_equal(w->s.ten.teams[1].budget_reason, "");
    world_free(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_order_class_age_id_and_fifo, world_setup,
                                        world_teardown),
        cmocka_unit_test_setup_teardown(test_order_tiresias, world_setup, world_teardown),
        cmocka_unit_test_setup_teardown(test_order_fair_share_decays, world_setup, world_teardown),
        cmocka_unit_test_setup_teardown(test_fair_share_counts_a_run_to_its_end, world_setup,
                                        world_teardown),
        cmocka_unit_test_setup_teardown(test_order_equal_share_goes_by_age, world_setup,
                                        world_teardown),
        cmocka_unit_test_setup_teardown(test_queue_positions_after_a_cycle, world_setup,
                                        world_teardown),
        cmocka_unit_test_setup_teardown(test_burst_limit_and_borrowing, world_setup,
                                        world_teardown),
        cmocka_unit_test_setup_teardown(test_no_teams_no_quotas, world_setup, world_teardown),
        cmocka_unit_test_setup_teardown(test_guarantee_filled_oldest_first, world_setup,
                                        world_teardown),
        cmocka_unit_test_setup_teardown(test_slices_count_as_gpu_equivalents, world_setup,
                                        world_teardown),
        cmocka_unit_test_setup_teardown(test_ask_is_a_share_where_mig_is_off, world_setup,
                                        world_teardown),
        cmocka_unit_test_setup_teardown(test_start_applies_and_release_gives_back, world_setup,
                                        world_teardown),
        cmocka_unit_test_setup_teardown(test_requeue_before_next_cycle, world_setup,
                                        world_teardown),
        cmocka_unit_test_setup_teardown(test_dequeue_then_enqueue_is_one_job, world_setup,
                                        world_teardown),
        cmocka_unit_test_setup_teardown(test_dequeue, world_setup, world_teardown),
        cmocka_unit_test_setup_teardown(test_reason_is_this_cycles, world_setup, world_teardown),
        cmocka_unit_test_setup_teardown(test_backfill_window, world_setup, world_teardown),
        cmocka_unit_test_setup_teardown(test_reservation_uses_remaining_estimate, world_setup,
                                        world_teardown),
        cmocka_unit_test_setup_teardown(test_reservation_counts_jobs_started_this_cycle,
                                        world_setup, world_teardown),
        cmocka_unit_test_setup_teardown(test_max_reservations, world_setup, world_teardown),
        cmocka_unit_test_setup_teardown(test_reason_names_the_reservation, world_setup,
                                        world_teardown),
        cmocka_unit_test_setup_teardown(test_reservation_time_moves_backfill, world_setup,
                                        world_teardown),
        cmocka_unit_test_setup_teardown(test_stuck_reservation_takes_backfill, world_setup,
                                        world_teardown),
        cmocka_unit_test_setup_teardown(test_gang_all_or_nothing, world_setup, world_teardown),
        cmocka_unit_test_setup_teardown(test_production_never_on_spot, world_setup, world_teardown),
        cmocka_unit_test_setup_teardown(test_drain_for_whole_gpu_work, world_setup, world_teardown),
        cmocka_unit_test_setup_teardown(test_draining_gpu_takes_no_slice_when_idle, world_setup,
                                        world_teardown),
        cmocka_unit_test_setup_teardown(test_undrain_when_nobody_waits, world_setup,
                                        world_teardown),
        cmocka_unit_test_setup_teardown(test_drain_only_nearly_empty, world_setup, world_teardown),
        cmocka_unit_test_setup_teardown(test_consolidate_moves_servers_for_whole_gpu, world_setup,
                                        world_teardown),
        cmocka_unit_test_setup_teardown(test_consolidate_who_moves, world_setup, world_teardown),
        cmocka_unit_test_setup_teardown(test_consolidate_all_or_nothing, world_setup,
                                        world_teardown),
        cmocka_unit_test_setup_teardown(test_consolidate_never_cuts_a_whole_gpu, world_setup,
                                        world_teardown),
        cmocka_unit_test_setup_teardown(test_consolidate_empties_a_shared_gpu, world_setup,
                                        world_teardown),
        cmocka_unit_test_setup_teardown(test_mig_reuse_and_fill_partitioned, world_setup,
                                        world_teardown),
        cmocka_unit_test_setup_teardown(test_mig_recarve_only_idle, world_setup, world_teardown),
        cmocka_unit_test_setup_teardown(test_right_size_by_memory, world_setup, world_teardown),
        cmocka_unit_test_setup_teardown(test_position_newest_matches_order, world_setup,
                                        world_teardown),
        cmocka_unit_test_setup_teardown(test_move_within_bucket, world_setup, world_teardown),
        cmocka_unit_test_setup_teardown(test_over_budget_waits_but_production_starts, world_setup,
                                        world_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
