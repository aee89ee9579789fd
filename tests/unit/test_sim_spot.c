/* test_sim_spot.c: pools that come and go in the simulator's time mode (timesim.c):
 * node start-up, idle release, the bill per tier, spot interruptions with their
 * checkpoints and lost work, and production kept off spot. Each case is a hand-made
 * trace on a cluster written here, worked out in the comment above it. Interruptions
 * are drawn from the run's seed: a case takes the first seed (from 1) whose run has
 * exactly one notice during the job's first run, reads its time T from the event
 * log, and checks every figure against the working in terms of T. */
#include "sim/sim.h"

#include "core/job.h"
#include "spec/spec.h"
#include "util/buf.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sim_fixture.h"

static void world_init(World *w, const char *cluster_yaml, const char *jobs_csv)
{
    fixture_world(w, cluster_yaml, jobs_csv,
                  (SimOptions){.mode = SIM_TIME,
                               .reconfig_delay_ms = 10000,
                               .min_runtime_ms = 300000,
                               .half_life_ms = 3600000,
                               .grace_ms = 30000,
                               .oom_after_ms = 30000,
                               .guarantee_tolerance_ms = 120000,
                               .tune_ratio = 1.3,
                               .events = true,
                               .timeline_points = 10});
}

static void run(const World *w, uint64_t seed, RunResult *ret)
{
    SimPolicy sp;
    Buf err = {0};
    assert_int_equal(sim_policy_parse("gpuorch", &sp, &err), 0);
    buf_free(&err);
    *ret = (RunResult){0};
    assert_int_equal(sim_run_time(&w->in, &sp, seed, ret), 0);
}

static void near(double actual, double expected, double eps, const char *what)
{
    if (!(fabs(actual - expected) <= eps))
        fail_msg("%s: %.9g, expected %.9g (within %g)", what, actual, expected, eps);
}

/* The t_ms of the nth (from 0) event line holding `pat`; -1 if none. */
static int64_t event_t(const Buf *log, const char *pat, int nth)
{
    const char *p = buf_str(log);
    while (p && *p) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        const char *hit = strstr(p, pat);
        if (hit && hit < p + len && nth-- == 0) {
            long long t;
            assert_int_equal(sscanf(p, "{\"t_ms\": %lld,", &t), 1);
            return t;
        }
        p = eol ? eol + 1 : NULL;
    }
    return -1;
}

static int count(const Buf *log, const char *pat)
{
    int n = 0;
    while (event_t(log, pat, n) >= 0)
        n++;
    return n;
}

#define NOTICE "\"type\": \"spot-notice\""

/* A run (from seed 1 up) with exactly one notice, before `before_ms`. */
static uint64_t one_notice_seed(const World *w, int64_t before_ms, RunResult *ret)
{
    for (uint64_t seed = 1; seed < 500; seed++) {
        run(w, seed, ret);
        if (count(&ret->events, NOTICE) == 1 && event_t(&ret->events, NOTICE, 0) < before_ms)
            return seed;
        run_result_free(ret);
    }
    fail_msg("no seed gave one interruption");
    return 0;
}

/* ---- an autoscaled on-demand pool: start-up, idle release, the bill ---- */

/* One autoscaled on-demand pool (0 to 2 nodes of 8 GPUs, 10 USD per GPU-hour, start-up
 * 100 s, idle 600 s). a (8 GPUs, 1000 s) comes at 0: a node starts at 0, is up at 100,
 * a runs 100-1100; idle from 1100, the node goes at 1700. b comes at 5000: a node
 * starts, up at 5100, b runs 5100-6100, the last change (the run's end).
 *   present node time: 0-1700 and 5000-6100 = 2800 s; x 8 GPUs = 6.2222 GPU-hours
 *   bill: 6.2222 x 10 = 62.222 USD, all on-demand: savings 0
 *   waits 100 s each, JCT 1100 s each; makespan 6100 s
 *   utilisation: busy 2 x 1000 s x 8 GPUs over present 2800 s x 8 GPUs = 71.43 %
 *   events: node-start at 0 and 5000, node-up at 100 and 5100, node-release at 1700
 *   (and at 6700, after the run: not billed) */
static const char *const CLUSTER_OD = "pools:\n"
                                      "  - name: od\n"
                                      "    tier: on-demand\n"
                                      "    price_per_gpu_hour: 10\n"
                                      "    max_nodes: 2\n"
                                      "    startup_s: 100\n"
                                      "    idle_s: 600\n"
                                      "    node: {gpu_model: H100-80GB-SXM5, gpus: 8}\n";

static void test_autoscaled_bill(void **state)
{
    (void)state;
    World w;
    world_init(&w, CLUSTER_OD,
               "id,submit_s,duration_s,gpus\n"
               "a,0,1000,8\n"
               "b,5000,1000,8\n");
    RunResult r;
    run(&w, 1, &r);
    const TimeResult *t = &r.time;
    assert_true(t->elastic);
    assert_int_equal(t->finished, 2);
    near(t->makespan_s, 6100, 1e-9, "makespan");
    near(t->queue_delay_s.mean, 100, 1e-9, "wait");
    near(t->jct_s.mean, 1100, 1e-9, "jct");
    near(t->capacity_gpu_hours, 2800.0 * 8 / 3600, 1e-9, "capacity");
    near(t->cost_usd, 2800.0 * 8 / 3600 * 10, 1e-6, "cost");
    near(t->cost_by_tier_usd[TIER_ON_DEMAND], t->cost_usd, 1e-9, "on-demand tier");
    near(t->on_demand_cost_usd, t->cost_usd, 1e-9, "at on-demand");
    near(t->savings_pct, 0, 1e-9, "savings");
    near(t->utilization_pct, 100.0 * 2000 / 2800, 1e-9, "utilisation");
    assert_int_equal(t->nodes_started, 2);
    assert_int_equal(t->interruptions, 0);
    const Buf *ev = &r.events;
    assert_int_equal(event_t(ev, "\"type\": \"node-start\"", 0), 0);
    assert_int_equal(event_t(ev, "\"type\": \"node-up\"", 0), 100000);
    assert_int_equal(event_t(ev, "\"type\": \"node-release\"", 0), 1700000);
    assert_int_equal(event_t(ev, "\"type\": \"node-start\"", 1), 5000000);
    assert_int_equal(event_t(ev, "\"type\": \"node-up\"", 1), 5100000);
    /* after the run the node idles out too, but the bill stops at the run's end */
    assert_int_equal(event_t(ev, "\"type\": \"node-release\"", 1), 6700000);
    assert_int_equal(count(ev, "\"type\": \"node-release\""), 2);
    run_result_free(&r);
    world_free(&w);
}

/* ---- tiers: production off spot, checkpointing work on it ---- */

/* An on-demand and a spot pool, both autoscaled from 0 (start-up 100 s), prices 10 and
 * 3 USD per GPU-hour, no interruptions. p (production, 8 GPUs, 1000 s) and t (normal,
 * preemptible, 8 GPUs, 1000 s, a checkpoint cost of 10 s: it saves its work, though
 * without interruptions it takes no periodic checkpoint) come at 0. p may not run on spot: an
 * on-demand node starts for it; t goes to spot first: a spot node starts. Both are up
 * at 100, both jobs run 100-1100.
 *   node time 1100 s each: on-demand 1100/3600 x 8 x 10 = 24.444, spot 1100/3600 x 8 x
 *   3 = 7.3333; at on-demand prices (the spot pool's on-demand price is its own without
 *   an instance type: 3) the same, so savings 0; production on spot: none. */
static void test_production_off_spot(void **state)
{
    (void)state;
    World w;
    world_init(&w,
               "pools:\n"
               "  - {name: od, tier: on-demand, price_per_gpu_hour: 10, max_nodes: 1, startup_s: "
               "100,\n"
               "     node: {gpu_model: H100-80GB-SXM5, gpus: 8}}\n"
               "  - {name: spot, tier: spot, price_per_gpu_hour: 3, max_nodes: 1, startup_s: "
               "100,\n"
               "     node: {gpu_model: H100-80GB-SXM5, gpus: 8}}\n",
               "id,submit_s,duration_s,gpus,priority,preemptible,checkpoint_interval_s,"
               "checkpoint_cost_s\n"
               "p,0,1000,8,production,false,,\n"
               "t,0,1000,8,normal,true,,10\n");
    RunResult r;
    run(&w, 1, &r);
    const TimeResult *t = &r.time;
    assert_int_equal(t->finished, 2);
    assert_int_equal(t->production_on_spot, 0);
    /* where each ran: the start lines name the node */
    assert_true(event_t(&r.events,
                        "\"type\": \"start\", \"job\": \"p\", \"worker\": 0, "
                        "\"node\": \"od-0\"",
                        0) == 100000);
    assert_true(event_t(&r.events,
                        "\"type\": \"start\", \"job\": \"t\", \"worker\": 0, "
                        "\"node\": \"spot-0\"",
                        0) == 100000);
    near(t->cost_by_tier_usd[TIER_ON_DEMAND], 1100.0 / 3600 * 8 * 10, 1e-6, "on-demand");
    near(t->cost_by_tier_usd[TIER_SPOT], 1100.0 / 3600 * 8 * 3, 1e-6, "spot");
    near(t->cost_usd, 1100.0 / 3600 * 8 * 13, 1e-6, "cost");
    run_result_free(&r);
    world_free(&w);
}

/* ---- spot interruptions ---- */

/* One spot pool, 0 to 2 nodes (one up at the start), start-up 100 s, notice 30 s, one
 * interruption an hour per node, 4 USD per GPU-hour. j: 8 GPUs, 3600 s, preemptible,
 * checkpoint cost 10 s, an interval longer than the run (no periodic checkpoint).
 * The notice comes at T during its run: its checkpoint (10 s) fits the notice, so it
 * keeps all T s of work and lets go at T+10, when its node, empty, goes. It waits for
 * room, so the autoscaler starts the other node at T+10, up at T+110; j resumes there
 * with 3600 - T s left and ends at T+110 + 3600 - T = 3710.
 *   JCT 3710 s, lost 0, one interruption, one preemption (the stop)
 *   node time: T+10 (the first) + 3710 - (T+10) (the second) = 3710 s: the bill is
 *   3710/3600 x 8 x 4 = 32.978 USD whatever T */
static const char *const CLUSTER_SPOT = "pools:\n"
                                        "  - name: spot\n"
                                        "    tier: spot\n"
                                        "    price_per_gpu_hour: 4\n"
                                        "    min_nodes: 0\n"
                                        "    max_nodes: 2\n"
                                        "    nodes: 1\n"
                                        "    startup_s: 100\n"
                                        "    notice_s: 30\n"
                                        "    interruption_per_hour: 1\n"
                                        "    node: {gpu_model: H100-80GB-SXM5, gpus: 8}\n";

static void test_interruption_checkpoint_fits(void **state)
{
    (void)state;
    World w;
    world_init(&w, CLUSTER_SPOT,
               "id,submit_s,duration_s,gpus,preemptible,checkpoint_interval_s,checkpoint_cost_s\n"
               "j,0,3600,8,true,100000,10\n");
    RunResult r;
    one_notice_seed(&w, 3600000, &r);
    const TimeResult *t = &r.time;
    int64_t T = event_t(&r.events, NOTICE, 0);
    print_message("notice at %lld ms\n", (long long)T);
    assert_true(T > 0);
    assert_int_equal(t->finished, 1);
    assert_int_equal(t->interruptions, 1);
    assert_int_equal(t->preemptions, 1);
    near(t->lost_gpu_hours, 0, 1e-9, "lost");
    near(t->jct_s.mean, 3710, 1e-3, "jct");
    near(t->cost_usd, 3710.0 / 3600 * 8 * 4, 1e-6, "cost");
    assert_int_equal(event_t(&r.events, "\"type\": \"node-gone\"", 0), T + 10000);
    assert_int_equal(event_t(&r.events, "\"type\": \"node-start\"", 0), T + 10000);
    assert_int_equal(event_t(&r.events, "\"type\": \"start\", \"job\": \"j\"", 1), T + 110000);
    run_result_free(&r);
    world_free(&w);
}

/* The same pool; j now checkpoints every 600 s at a cost of 60 s, more than the 30 s
 * notice (and the 30 s grace). Its first run goes in cycles of 660 s: 600 s of work,
 * then 60 s of checkpoint, after which the 600 s are saved. With the notice at T, k =
 * floor(T / 660) checkpoints are done and T - 660k into the next cycle it has done
 * 600k + min(T - 660k, 600) s of work and saved 600k. The last checkpoint cannot be
 * made in time: the unsaved work is lost, j holds its node to the end of its grace
 * (T+30, when the node goes anyway), and is queued again; the other node starts at
 * T+30, is up at T+130, and j resumes from 600k with r = 3600 - 600k left, taking a
 * checkpoint every 600 s but not at its end: ceil(r/600) - 1 of them.
 *   lost GPU-hours = 8 x min(T - 660k, 600) / 3600
 *   JCT = T + 130 + r + 60 (ceil(r/600) - 1) */
static void test_interruption_loses_work(void **state)
{
    (void)state;
    World w;
    world_init(&w, CLUSTER_SPOT,
               "id,submit_s,duration_s,gpus,preemptible,checkpoint_interval_s,checkpoint_cost_s\n"
               "j,0,3600,8,true,600,60\n");
    RunResult r;
    one_notice_seed(&w, 3900000, &r);
    const TimeResult *t = &r.time;
    int64_t T = event_t(&r.events, NOTICE, 0);
    print_message("notice at %lld ms\n", (long long)T);
    double ts = (double)T / 1000;
    double k = floor(ts / 660);
    double unsaved = fmin(ts - 660 * k, 600);
    double left = 3600 - 600 * k;
    assert_int_equal(t->finished, 1);
    assert_int_equal(t->interruptions, 1);
    near(t->lost_gpu_hours, 8 * unsaved / 3600, 1e-6, "lost");
    near(t->jct_s.mean, ts + 130 + left + 60 * (ceil(left / 600) - 1), 1e-3, "jct");
    assert_int_equal(event_t(&r.events, "\"type\": \"node-gone\"", 0), T + 30000);
    run_result_free(&r);
    world_free(&w);
}

/* A job with a checkpoint cost and no interval checkpoints, on spot, at the Young/Daly
 * interval for its node's rate: with 60 s of cost and 4 interruptions an hour (a mean of
 * 900 s between them), sqrt(2 x 60 x 900) = 328.63 s. j (100 s) and k (1000 s) share
 * the one node, one after the other. j ends before its first checkpoint is due; k works
 * 328.63 s, checkpoints 60 s, three times (after 985.9 s of work 14.1 s are left), and
 * ends 1000 + 3 x 60 = 1180 s after its start: the later of the two ends at 1280 s
 * whichever goes first. A seed without interruptions is taken. */
static void test_young_daly_on_spot(void **state)
{
    (void)state;
    World w;
    world_init(&w,
               "pools:\n"
               "  - {name: spot, tier: spot, price_per_gpu_hour: 4, nodes: 1,\n"
               "     interruption_per_hour: 4, node: {gpu_model: H100-80GB-SXM5, gpus: 8}}\n",
               "id,submit_s,duration_s,gpus,preemptible,checkpoint_cost_s\n"
               "j,0,100,8,true,60\n"
               "k,0,1000,8,true,60\n");
    RunResult r;
    /* j (100 s) ends before any checkpoint; k runs after it from 100 s */
    for (uint64_t seed = 1;; seed++) {
        run(&w, seed, &r);
        if (count(&r.events, NOTICE) == 0)
            break;
        run_result_free(&r);
        assert_true(seed < 500);
    }
    near(r.time.jct_s.max, 1280, 2e-3, "the later JCT");
    near(r.time.checkpoint_gpu_hours, 3 * 60.0 * 8 / 3600, 1e-6, "checkpoint GPU-hours");
    run_result_free(&r);
    world_free(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_autoscaled_bill),
        cmocka_unit_test(test_production_off_spot),
        cmocka_unit_test(test_interruption_checkpoint_fits),
        cmocka_unit_test(test_interruption_loses_work),
        cmocka_unit_test(test_young_daly_on_spot),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
