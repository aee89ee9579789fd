/* test_autoscale.c: the autoscaler's rules (core/autoscale.c), each on a cluster built
 * here with the pools it needs: a reserved pool of fixed nodes, an autoscaled on-demand
 * pool (11 USD per GPU-hour, 0 to 4 nodes of 8 GPUs) and an autoscaled spot pool
 * (3 USD, 0 to 4 nodes). Jobs are SchedJobs with their requests filled by hand, as the
 * scheduler leaves them after a cycle; decisions are checked one by one, and carried
 * out as a caller would (a started node is starting) where a test makes a second pass.
 * Also Young/Daly's checkpoint interval, worked out by hand. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core/autoscale.h"
#include "core/cluster.h"
#include "core/job.h"
#include "core/place.h"
#include "core/sched.h"
#include "util/macro.h"
#include "util/rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MIN_MS    (60 * INT64_C(1000))
#define HOUR_MS   (60 * MIN_MS)
#define TIER(t)   (1u << (t))
#define ALL_TIERS ((uint8_t)TIERS_ALL)
#define NO_SPOT   ((uint8_t)(TIERS_ALL & ~TIER(TIER_SPOT)))

/* Pools in this order, nodes numbered from 0: reserved (R nodes), on-demand, spot. */
enum { P_RESERVED, P_ON_DEMAND, P_SPOT };

typedef struct World {
    Cluster *c;
    Autoscaler a;
    AutoscaleDecisions d;
    uint32_t first[3]; /* first node of each pool */
} World;

static void add_pool(Cluster *c, const char *name, Tier tier, int64_t price_usd, uint32_t min_nodes,
                     uint32_t max_nodes, uint32_t initial)
{
    int mi = cluster_model(c, "H100", 0);
    assert_true(mi >= 0);
    Pool p = {
        .name = (char *)name,
        .tier = tier,
        .price_micro_usd = price_usd * 1000000,
        .nodes = max_nodes,
        .min_nodes = min_nodes,
        .max_nodes = max_nodes,
        .initial_nodes = initial,
        .startup_ms = 3 * MIN_MS,
        .idle_ms = 10 * MIN_MS,
        .model = (uint8_t)mi,
        .gpus = 8,
        .interconnect = IC_NVSWITCH,
        .cpu_milli = 64000,
        .memory_mib = 512 * 1024,
    };
    mig_layout_clear(&p.initial_mig);
    int pi = cluster_add_pool(c, &p);
    assert_true(pi >= 0);
    assert_int_equal(cluster_add_pool_nodes(c, (uint32_t)pi), 0);
}

/* reserved: `reserved` fixed nodes; on-demand 0..od_max from 0; spot 0..spot_max from 0. */
static void world_init(World *w, uint32_t reserved, uint32_t od_max, uint32_t spot_max)
{
    memset(w, 0, sizeof(*w));
    w->c = cluster_new("t");
    assert_non_null(w->c);
    add_pool(w->c, "reserved", TIER_RESERVED, 5, reserved, reserved, reserved);
    add_pool(w->c, "on-demand", TIER_ON_DEMAND, 11, 0, od_max, 0);
    add_pool(w->c, "spot", TIER_SPOT, 3, 0, spot_max, 0);
    w->first[P_RESERVED] = 0;
    w->first[P_ON_DEMAND] = reserved;
    w->first[P_SPOT] = reserved + od_max;
    AutoscaleConfig cfg;
    autoscale_config_default(&cfg);
    assert_int_equal(autoscale_init(&w->a, w->c, &cfg), 0);
    assert_true(cluster_consistent(w->c));
}

static void world_free(World *w)
{
    autoscale_decisions_free(&w->d);
    autoscale_free(&w->a);
    cluster_free(w->c);
}

/* A waiting job of `workers` workers of `gpus` whole GPUs. */
static SchedJob job(uint32_t id, uint32_t workers, uint8_t gpus, uint8_t tiers, bool preemptible)
{
    SchedJob j = {.id = id, .preemptible = preemptible, .queued = true, .nominated = SCHED_NONE};
    j.req = (Request){.kind = REQ_GPUS,
                      .gpus = gpus,
                      .workers = workers,
                      .tiers = tiers,
                      .models = ~UINT64_C(0),
                      .cpu_milli = 1000,
                      .memory_mib = 1024,
                      .shape = -1};
    memset(j.req.mig_profile, -1, sizeof(j.req.mig_profile));
    return j;
}

static AutoscaleJob waiting(const SchedJob *j, int64_t since, bool checkpoints)
{
    return (AutoscaleJob){.j = j, .waiting_since_ms = since, .checkpoints = checkpoints};
}

static void pass(World *w, const AutoscaleJob *wait, size_t n_wait, const AutoscaleJob *run,
                 size_t n_run, int64_t now)
{
    w->d.n = 0;
    assert_int_equal(autoscale_pass(&w->a, w->c, wait, n_wait, run, n_run, now, &w->d), 0);
}

static void expect(const World *w, size_t k, AutoscaleKind kind, uint32_t node)
{
    assert_true(k < w->d.n);
    assert_int_equal(w->d.d[k].kind, kind);
    assert_int_equal(w->d.d[k].node, node);
}

/* Carry out the starts: the nodes are starting (then up, when `up`). */
static void carry_out(World *w, bool up)
{
    for (size_t k = 0; k < w->d.n; k++)
        if (w->d.d[k].kind == AS_START)
            cluster_set_node_state(w->c, w->d.d[k].node, up ? NODE_UP : NODE_STARTING);
}

/* The nodes the pool starts as absent past initial_nodes; a fixed pool's are up. */
static void test_absent_nodes(void **state)
{
    (void)state;
    World w;
    world_init(&w, 2, 4, 4);
    assert_int_equal(w.c->n_nodes, 10);
    for (uint32_t i = 0; i < 10; i++) {
        const Node *n = &w.c->nodes[i];
        assert_int_equal(n->state, i < 2 ? NODE_UP : NODE_ABSENT);
        assert_int_equal(n->schedulable, i < 2);
    }
    /* an absent node that holds nothing is consistent; one that takes work is not */
    cluster_set_node_state(w.c, 2, NODE_STARTING);
    assert_true(cluster_consistent(w.c));
    w.c->nodes[2].schedulable = true;
    assert_false(cluster_consistent(w.c));
    world_free(&w);
}

/* A preemptible job that checkpoints goes to spot first (3 USD, cheaper than on-demand's
 * 11): the first spot node starts, and the pass asks to be woken when the job's max_wait
 * (the default 15 min from when it began to wait) runs out. */
static void test_checkpointing_work_goes_to_spot(void **state)
{
    (void)state;
    World w;
    world_init(&w, 0, 4, 4);
    SchedJob j = job(1, 1, 8, ALL_TIERS, true);
    AutoscaleJob aj = waiting(&j, 0, true);
    pass(&w, &aj, 1, NULL, 0, MIN_MS);
    assert_int_equal(w.d.n, 1);
    expect(&w, 0, AS_START, w.first[P_SPOT]);
    assert_int_equal(w.d.wake_ms, 15 * MIN_MS);
    world_free(&w);
}

/* Production (its mask has no spot), a job that does not checkpoint and one that is not
 * preemptible all scale on-demand, though spot is cheaper. Rule: work an interruption
 * would lose never scales spot, even when its mask (built by hand here; request_from_job
 * refuses it) allows only spot: it scales nothing. It started a spot node when the rule
 * allowed what a mask of spot alone asked for. */
static void test_only_saved_work_scales_spot(void **state)
{
    (void)state;
    World w;
    world_init(&w, 0, 4, 4);
    SchedJob prod = job(1, 1, 8, NO_SPOT, false);
    prod.priority = PRIO_PRODUCTION;
    SchedJob nockpt = job(2, 1, 8, ALL_TIERS, true);
    SchedJob nopre = job(3, 1, 8, ALL_TIERS, false);
    SchedJob spot_only = job(4, 1, 8, TIER(TIER_SPOT), false);
    AutoscaleJob aj[] = {waiting(&prod, 0, true), waiting(&nockpt, 0, false),
                         waiting(&nopre, 0, true), waiting(&spot_only, 0, false)};
    pass(&w, aj, 4, NULL, 0, MIN_MS);
    assert_int_equal(w.d.n, 3);
    for (size_t k = 0; k < 3; k++)
        expect(&w, k, AS_START, w.first[P_ON_DEMAND] + (uint32_t)k);
    assert_int_equal(w.d.wake_ms, INT64_MAX);
    /* the same mask on preemptible work that checkpoints starts a spot node */
    spot_only.preemptible = true;
    AutoscaleJob saved = waiting(&spot_only, 0, true);
    pass(&w, &saved, 1, NULL, 0, MIN_MS);
    assert_int_equal(w.d.n, 1);
    expect(&w, 0, AS_START, w.first[P_SPOT]);
    world_free(&w);
}

/* Spot short: both spot nodes up and busy (max_nodes 2 reached), so the job falls back
 * to on-demand at once. Past its max_wait, a job goes on-demand even with spot room. */
static void test_fallback_to_on_demand(void **state)
{
    (void)state;
    World w;
    world_init(&w, 0, 4, 2);
    for (uint32_t i = 0; i < 2; i++) {
        uint32_t n = w.first[P_SPOT] + i;
        cluster_set_node_state(w.c, n, NODE_UP);
        WorkerAlloc wa = {.node = n, .n_grants = 8};
        for (uint8_t g = 0; g < 8; g++)
            wa.grants[g] = (Grant){.index = g, .kind = GRANT_WHOLE};
        cluster_apply_worker(w.c, &wa);
    }
    SchedJob j = job(1, 1, 8, ALL_TIERS, true);
    AutoscaleJob aj = waiting(&j, 0, true);
    pass(&w, &aj, 1, NULL, 0, MIN_MS);
    assert_int_equal(w.d.n, 1);
    expect(&w, 0, AS_START, w.first[P_ON_DEMAND]);
    world_free(&w);

    world_init(&w, 0, 4, 2);
    j = job(1, 1, 8, ALL_TIERS, true);
    aj = waiting(&j, 0, true);
    aj.max_wait_ms = 5 * MIN_MS; /* its own, shorter than the default 15 min */
    pass(&w, &aj, 1, NULL, 0, 4 * MIN_MS);
    expect(&w, 0, AS_START, w.first[P_SPOT]);
    assert_int_equal(w.d.wake_ms, 5 * MIN_MS);
    carry_out(&w, false);
    /* at 5 min the spot node is still starting: the job waited its max_wait, on-demand
     * starts for it and the spot node is left to come up (it idles out later) */
    pass(&w, &aj, 1, NULL, 0, 5 * MIN_MS);
    assert_int_equal(w.d.n, 1);
    expect(&w, 0, AS_START, w.first[P_ON_DEMAND]);
    world_free(&w);
}

/* Only jobs that wait for room count: a job held by its team's burst limit or budget,
 * or one for which preemption makes room, starts no node. */
static void test_held_jobs_do_not_scale(void **state)
{
    (void)state;
    World w;
    world_init(&w, 0, 4, 4);
    SchedJob q = job(1, 1, 8, NO_SPOT, false);
    q.held_back = SCHED_HELD_QUOTA;
    SchedJob p = job(2, 1, 8, NO_SPOT, false);
    p.held_back = SCHED_HELD_PREEMPTING;
    AutoscaleJob aj[] = {waiting(&q, 0, false), waiting(&p, 0, false)};
    pass(&w, aj, 2, NULL, 0, MIN_MS);
    assert_int_equal(w.d.n, 0);
    world_free(&w);
}

/* The scheduler says which jobs wait for room: with one reserved node and team a's
 * burst limit at 8 GPUs, a's first 8-GPU job starts, its second is held by the burst
 * limit (SCHED_HELD_QUOTA) and a job without a team waits for room (SCHED_HELD_NO).
 * The pass after that cycle starts one on-demand node: for the job without a team. */
static void test_held_back_from_the_cycle(void **state)
{
    (void)state;
    World w;
    world_init(&w, 1, 4, 0);
    Team t = {.name = "a", .guaranteed_gpus = 8, .burst_gpus = 8, .weight = 1};
    assert_true(cluster_add_team(w.c, &t) >= 0);
    Rng rng;
    rng_seed(&rng, 1);
    PlaceCtx ctx;
    assert_int_equal(place_ctx_init(&ctx, w.c, policy_find("gpuorch"), &rng, NULL, NULL), 0);
    SchedConfig cfg;
    sched_config_gpuorch(&cfg);
    Sched s;
    assert_int_equal(sched_init(&s, w.c, &ctx, &cfg, 1), 0);
    SchedJob j[3] = {job(0, 1, 8, NO_SPOT, false), job(1, 1, 8, NO_SPOT, false),
                     job(2, 1, 8, NO_SPOT, false)};
    j[0].team = j[1].team = 0;
    j[2].team = TEAM_NONE;
    for (int i = 0; i < 3; i++) {
        j[i].queued = false;
        j[i].submit_ms = i;
        assert_int_equal(sched_enqueue(&s, &j[i]), 0);
    }
    SchedDecisions d = {0};
    SchedJob *running[1] = {NULL};
    assert_int_equal(sched_cycle(&s, 10, running, 0, &d), 0);
    assert_int_equal(d.n, 1);
    assert_int_equal(d.d[0].job, 0);
    assert_int_equal(j[1].held_back, SCHED_HELD_QUOTA);
    assert_int_equal(j[2].held_back, SCHED_HELD_NO);
    assert_int_equal(s.n_order, 2);
    AutoscaleJob aj[2];
    for (size_t i = 0; i < 2; i++)
        aj[i] = waiting(s.order[i], 0, false);
    pass(&w, aj, 2, NULL, 0, 10);
    assert_int_equal(w.d.n, 1);
    expect(&w, 0, AS_START, w.first[P_ON_DEMAND]);
    sched_decisions_free(&d);
    for (int i = 0; i < 3; i++)
        placement_free(&j[i].pl);
    sched_free(&s);
    place_ctx_free(&ctx);
    world_free(&w);
}

/* Nodes already starting are filled first: two 4-GPU jobs share the one starting
 * on-demand node (no new start); a third needs a second node. */
static void test_starting_nodes_filled_first(void **state)
{
    (void)state;
    World w;
    world_init(&w, 0, 4, 4);
    SchedJob a = job(1, 1, 4, NO_SPOT, false), b = job(2, 1, 4, NO_SPOT, false),
             c = job(3, 1, 4, NO_SPOT, false);
    AutoscaleJob aj[] = {waiting(&a, 0, false), waiting(&b, 0, false), waiting(&c, 0, false)};
    pass(&w, aj, 1, NULL, 0, 0);
    expect(&w, 0, AS_START, w.first[P_ON_DEMAND]);
    carry_out(&w, false);
    pass(&w, aj, 2, NULL, 0, MIN_MS);
    assert_int_equal(w.d.n, 0);
    pass(&w, aj, 3, NULL, 0, MIN_MS);
    assert_int_equal(w.d.n, 1);
    expect(&w, 0, AS_START, w.first[P_ON_DEMAND] + 1);
    world_free(&w);
}

/* A gang is planned whole in one pool: 3 workers of 8 GPUs start 3 spot nodes; 5 such
 * workers do not fit spot's 4 nodes and go to on-demand (5 of its 6). The cheaper of two
 * on-demand pools is the one that scales. */
static void test_gangs_and_cheapest_pool(void **state)
{
    (void)state;
    World w;
    world_init(&w, 0, 6, 4);
    SchedJob g3 = job(1, 3, 8, ALL_TIERS, true);
    AutoscaleJob aj = waiting(&g3, 0, true);
    pass(&w, &aj, 1, NULL, 0, 0);
    assert_int_equal(w.d.n, 3);
    for (uint32_t k = 0; k < 3; k++)
        expect(&w, k, AS_START, w.first[P_SPOT] + k);
    SchedJob g5 = job(2, 5, 8, ALL_TIERS, true);
    aj = waiting(&g5, 0, true);
    pass(&w, &aj, 1, NULL, 0, 0);
    assert_int_equal(w.d.n, 5);
    for (uint32_t k = 0; k < 5; k++)
        expect(&w, k, AS_START, w.first[P_ON_DEMAND] + k);
    world_free(&w);

    /* a second on-demand pool at 9 USD, listed after the 11 USD one, wins */
    world_init(&w, 0, 2, 0);
    add_pool(w.c, "cheap", TIER_ON_DEMAND, 9, 0, 2, 0);
    autoscale_free(&w.a);
    AutoscaleConfig cfg;
    autoscale_config_default(&cfg);
    assert_int_equal(autoscale_init(&w.a, w.c, &cfg), 0);
    SchedJob one = job(1, 1, 8, NO_SPOT, false);
    aj = waiting(&one, 0, false);
    pass(&w, &aj, 1, NULL, 0, 0);
    assert_int_equal(w.d.n, 1);
    expect(&w, 0, AS_START, 2); /* nodes 0-1 on-demand, 2-3 cheap */
    world_free(&w);
}

/* An up node that holds nothing is released once idle for the pool's idle time (10
 * min), and never below min_nodes; until then the pass asks to be woken when it is
 * due. A pool below min_nodes (a spot node was interrupted) gets a node started. */
static void test_idle_release_and_minimum(void **state)
{
    (void)state;
    World w;
    world_init(&w, 0, 4, 4);
    w.c->pools[P_ON_DEMAND].min_nodes = 1;
    uint32_t a = w.first[P_ON_DEMAND], b = a + 1;
    cluster_set_node_state(w.c, a, NODE_UP);
    cluster_set_node_state(w.c, b, NODE_UP);
    pass(&w, NULL, 0, NULL, 0, 0); /* both idle from 0 */
    assert_int_equal(w.d.n, 0);
    assert_int_equal(w.d.wake_ms, 10 * MIN_MS);
    pass(&w, NULL, 0, NULL, 0, 10 * MIN_MS - 1);
    assert_int_equal(w.d.n, 0);
    pass(&w, NULL, 0, NULL, 0, 10 * MIN_MS);
    assert_int_equal(w.d.n, 1); /* one goes; the other is the pool's minimum */
    expect(&w, 0, AS_RELEASE, a);
    cluster_set_node_state(w.c, a, NODE_ABSENT);
    pass(&w, NULL, 0, NULL, 0, 20 * MIN_MS);
    assert_int_equal(w.d.n, 0);
    assert_int_equal(w.d.wake_ms, INT64_MAX);
    /* the minimum node is interrupted and gone: it is replaced */
    cluster_set_node_state(w.c, b, NODE_ABSENT);
    pass(&w, NULL, 0, NULL, 0, 21 * MIN_MS);
    assert_int_equal(w.d.n, 1);
    expect(&w, 0, AS_START, a);
    world_free(&w);
}

/* A node busy for a while is idle only from the pass that sees it empty. */
static void test_idle_counts_from_empty(void **state)
{
    (void)state;
    World w;
    world_init(&w, 0, 2, 0);
    uint32_t n = w.first[P_ON_DEMAND];
    cluster_set_node_state(w.c, n, NODE_UP);
    WorkerAlloc wa = {.node = n, .n_grants = 1, .grants = {{.index = 0, .kind = GRANT_WHOLE}}};
    cluster_apply_worker(w.c, &wa);
    pass(&w, NULL, 0, NULL, 0, 0);
    assert_int_equal(w.d.wake_ms, INT64_MAX);
    cluster_release_worker(w.c, &wa);
    pass(&w, NULL, 0, NULL, 0, 30 * MIN_MS);
    assert_int_equal(w.d.n, 0);
    assert_int_equal(w.d.wake_ms, 40 * MIN_MS);
    world_free(&w);
}

/* A running job on an on-demand node: put it there as the scheduler would. */
static void run_on(World *w, SchedJob *j, uint32_t node, uint8_t gpus)
{
    cluster_set_node_state(w->c, node, NODE_UP);
    WorkerAlloc wa = {.node = node, .n_grants = gpus, .cpu_milli = 1000, .memory_mib = 1024};
    for (uint8_t g = 0; g < gpus; g++)
        wa.grants[g] = (Grant){.index = g, .kind = GRANT_WHOLE};
    cluster_apply_worker(w->c, &wa);
    assert_int_equal(GROW(j->pl.workers, j->pl.workers_cap, 1), 0);
    j->pl.workers[0] = wa;
    j->pl.n_workers = 1;
    j->queued = false;
    j->running = true;
    j->estimate_ms = NO_DURATION;
}

/* Reserved capacity frees up (one of its 2 nodes idle): a preemptible checkpointing job
 * alone on an on-demand node, running 20 min, moves back (preempted, its node leaving).
 * One move per pass. Not moved: a job that ran 5 min, one with 10 min left, one moved
 * before, one not preemptible, one sharing its node; nor anything while a job waits
 * for reserved capacity. */
static void test_move_back_to_reserved(void **state)
{
    (void)state;
    World w;
    world_init(&w, 2, 4, 0);
    SchedJob fill = job(9, 1, 8, ALL_TIERS, false);
    run_on(&w, &fill, 0, 8); /* reserved node 0 full, node 1 free */
    uint32_t od = w.first[P_ON_DEMAND];
    SchedJob a = job(1, 1, 8, ALL_TIERS, true), b = job(2, 1, 8, ALL_TIERS, true);
    run_on(&w, &a, od, 8);
    run_on(&w, &b, od + 1, 8);
    AutoscaleJob run[] = {waiting(&fill, 0, false), waiting(&a, 0, true), waiting(&b, 0, true)};
    pass(&w, NULL, 0, run, 3, 20 * MIN_MS);
    assert_int_equal(w.d.n, 2);
    assert_int_equal(w.d.d[0].kind, AS_MOVE);
    assert_int_equal(w.d.d[0].job, 1);
    expect(&w, 1, AS_DRAIN, od);

    pass(&w, NULL, 0, run, 3, 5 * MIN_MS); /* ran 5 min: too soon */
    assert_int_equal(w.d.n, 0);
    a.estimate_ms = b.estimate_ms = 10 * MIN_MS; /* ends soon anyway */
    pass(&w, NULL, 0, run, 3, 20 * MIN_MS);
    assert_int_equal(w.d.n, 0);
    a.estimate_ms = b.estimate_ms = NO_DURATION;
    run[1].moved = run[2].moved = true;
    pass(&w, NULL, 0, run, 3, 20 * MIN_MS);
    assert_int_equal(w.d.n, 0);
    run[1].moved = run[2].moved = false;
    a.preemptible = b.preemptible = false;
    pass(&w, NULL, 0, run, 3, 20 * MIN_MS);
    assert_int_equal(w.d.n, 0);
    a.preemptible = b.preemptible = true;

    SchedJob wants = job(3, 1, 1, NO_SPOT, false);
    AutoscaleJob wj = waiting(&wants, 0, false);
    pass(&w, &wj, 1, run, 3, 20 * MIN_MS);
    for (size_t k = 0; k < w.d.n; k++)
        assert_int_not_equal(w.d.d[k].kind, AS_MOVE);

    /* a small job shares a's node: a is not alone there, b moves instead */
    WorkerAlloc extra = {.node = od, .cpu_milli = 500};
    cluster_apply_worker(w.c, &extra);
    pass(&w, NULL, 0, run, 3, 20 * MIN_MS);
    assert_int_equal(w.d.n, 2);
    assert_int_equal(w.d.d[0].job, 2);
    expect(&w, 1, AS_DRAIN, od + 1);
    free(fill.pl.workers);
    free(a.pl.workers);
    free(b.pl.workers);
    world_free(&w);
}

/* Young/Daly: sqrt(2 x cost x MTBI). A 60 s checkpoint at 0.1 interruptions an hour (a
 * mean of 10 h = 36,000 s between them): sqrt(2 x 60 x 36,000) = sqrt(4,320,000) =
 * 2,078.46 s. 1 s at 10 an hour: sqrt(2 x 1 x 360) = 26.8 s, raised to the 5 min floor;
 * 1 h at 0.001 an hour: sqrt(2 x 3,600 x 3,600,000) = 161,000 s, cut to the 6 h cap.
 * No cost or no interruptions: no interval. */
static void test_young_daly(void **state)
{
    (void)state;
    assert_int_equal(autoscale_checkpoint_interval_ms(60000, 0.1), 2078461);
    assert_int_equal(autoscale_checkpoint_interval_ms(1000, 10), 5 * MIN_MS);
    assert_int_equal(autoscale_checkpoint_interval_ms(HOUR_MS, 0.001), 6 * HOUR_MS);
    assert_int_equal(autoscale_checkpoint_interval_ms(0, 0.1), 0);
    assert_int_equal(autoscale_checkpoint_interval_ms(60000, 0), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_absent_nodes),
        cmocka_unit_test(test_checkpointing_work_goes_to_spot),
        cmocka_unit_test(test_only_saved_work_scales_spot),
        cmocka_unit_test(test_fallback_to_on_demand),
        cmocka_unit_test(test_held_jobs_do_not_scale),
        cmocka_unit_test(test_held_back_from_the_cycle),
        cmocka_unit_test(test_starting_nodes_filled_first),
        cmocka_unit_test(test_gangs_and_cheapest_pool),
        cmocka_unit_test(test_idle_release_and_minimum),
        cmocka_unit_test(test_idle_counts_from_empty),
        cmocka_unit_test(test_move_back_to_reserved),
        cmocka_unit_test(test_young_daly),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
