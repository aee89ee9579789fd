/* test_sim_time.c: golden tests of the simulator's time mode (src/sim/timesim.c) on
 * small hand-made traces. Each case is small enough that the right answer can be
 * worked out on paper; the working is in the comment above the test, and the test
 * checks the simulator's figures (waits, JCTs, makespan, utilisation, allocation,
 * preemptions, reconfigurations) and, where the timing is the point, the event log.
 * Covered: utilisation over a --window, FIFO and priority queue orders, gangs that
 * never hold a partial allocation (and k8s-default, which does), the MIG
 * reconfiguration delay, a server moved to empty a GPU for training, the slowdown of a training job
 * given less compute than it uses, Tiresias' preemption at 16 GPU-hours, determinism of the JSON
 * report and event log, and jobs that never run. */
#include "sim/report.h"
#include "sim/sim.h"

#include "core/job.h"
#include "spec/spec.h"
#include "util/buf.h"
#include "util/macro.h"

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

/* ---- helpers ---- */

static void world_init(World *w, const char *cluster_yaml, const char *jobs_csv,
                       int64_t reconfig_delay_ms)
{
    fixture_world(w, cluster_yaml, jobs_csv,
                  (SimOptions){.mode = SIM_TIME,
                               .reconfig_delay_ms = reconfig_delay_ms,
                               .tune_ratio = 1.3,
                               .events = true,
                               .timeline_points = 600});
}

static void policy(const char *name, SimPolicy *ret)
{
    Buf err = {0};
    int r = sim_policy_parse(name, ret, &err);
    if (r)
        print_message("%s\n", buf_str(&err));
    assert_int_equal(r, 0);
    buf_free(&err);
}

static void run(const World *w, const char *policy_name, uint64_t seed, RunResult *ret)
{
    SimPolicy sp;
    policy(policy_name, &sp);
    *ret = (RunResult){0};
    assert_int_equal(sim_run_time(&w->in, &sp, seed, ret), 0);
    assert_int_equal(ret->mode, SIM_TIME);
}

static void near(double actual, double expected, double eps, const char *what)
{
    if (!(fabs(actual - expected) <= eps))
        fail_msg("%s: %.9g, expected %.9g (within %g)", what, actual, expected, eps);
}

#define EPS 1e-9

/* The t_ms of the nth (from 0) event line of this type about this job; -1 if none. */
static int64_t event_t(const Buf *log, const char *type, const char *job, int nth)
{
    char pat[256];
    snprintf(pat, sizeof(pat), "\"type\": \"%s\", \"job\": \"%s\"", type, job);
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

static int count_events(const Buf *log, const char *type, const char *job)
{
    int n = 0;
    while (event_t(log, type, job, n) >= 0)
        n++;
    return n;
}

/* ---- (a) FIFO ---- */

/* One node of 2 GPUs. a asks 2 GPUs for 100 s at t=0; b and c 1 GPU for 50 s at t=10.
 * FIFO: a runs 0-100 and fills the node; b and c wait from 10 to 100, then run 100-150
 * side by side.
 *   waits 0, 90, 90: mean 60, nearest-rank p50 = 2nd of 3 = 90, p95/p99/max = 90
 *   JCT 100, 140, 140: mean 380/3, p50 140
 *   makespan = last event (150) - first submission (0) = 150 s
 *   both GPUs busy for all 150 s (no busy given: a job uses all it holds): 100 %
 *   jobs/hour = 3 / (150/3600) = 72
 * Timeline in 3 slices of 50 s: [0,50) a alone runs, b and c queue from 10: running 1,
 * queued 2; [50,100) the same; [100,150) b and c run: running 2, queued 0. */
static const char *const CLUSTER_1x2 = "name: one\n"
                                       "pools:\n"
                                       "  - name: p\n"
                                       "    tier: owned\n"
                                       "    nodes: 1\n"
                                       "    node: {gpu_model: A100-80GB, gpus: 2}\n";

static void test_fifo_golden(void **state)
{
    (void)state;
    World w;
    world_init(&w, CLUSTER_1x2,
               "id,kind,gpus,submit_s,duration_s\n"
               "a,training,2,0,100\n"
               "b,training,1,10,50\n"
               "c,training,1,10,50\n",
               10000);
    w.in.opt.timeline_points = 3;
    RunResult r;
    run(&w, "first-fit+fifo", 1, &r);
    const TimeResult *t = &r.time;
    assert_int_equal(t->submitted, 3);
    assert_int_equal(t->finished, 3);
    assert_int_equal(t->unschedulable, 0);
    assert_int_equal(t->never_placed, 0);
    assert_int_equal(t->preemptions, 0);
    assert_int_equal(t->reconfigurations, 0);
    assert_int_equal(t->queue_delay_s.n, 3);
    near(t->queue_delay_s.mean, 60, EPS, "wait mean");
    near(t->queue_delay_s.p50, 90, EPS, "wait p50");
    near(t->queue_delay_s.p95, 90, EPS, "wait p95");
    near(t->queue_delay_s.p99, 90, EPS, "wait p99");
    near(t->queue_delay_s.max, 90, EPS, "wait max");
    assert_int_equal(t->jct_s.n, 3);
    near(t->jct_s.mean, 380.0 / 3, EPS, "jct mean");
    near(t->jct_s.p50, 140, EPS, "jct p50");
    near(t->jct_s.max, 140, EPS, "jct max");
    near(t->makespan_s, 150, EPS, "makespan");
    near(t->utilization_pct, 100, EPS, "utilisation");
    near(t->allocation_pct, 100, EPS, "allocation");
    near(t->jobs_per_hour, 72, EPS, "jobs/hour");
    /* the event log agrees */
    assert_int_equal(event_t(&r.events, "start", "a", 0), 0);
    assert_int_equal(event_t(&r.events, "start", "b", 0), 100000);
    assert_int_equal(event_t(&r.events, "start", "c", 0), 100000);
    assert_int_equal(event_t(&r.events, "finish", "b", 0), 150000);
    assert_int_equal(event_t(&r.events, "submit", "c", 0), 10000);
    /* the timeline */
    assert_int_equal(t->n_timeline, 3);
    const double ts[] = {50, 100, 150};
    const uint32_t queued[] = {2, 2, 0}, running[] = {1, 1, 2};
    for (size_t i = 0; i < 3; i++) {
        near(t->timeline[i].t_s, ts[i], EPS, "timeline t");
        near(t->timeline[i].utilization_pct, 100, EPS, "timeline utilisation");
        near(t->timeline[i].allocation_pct, 100, EPS, "timeline allocation");
        assert_int_equal(t->timeline[i].queued, queued[i]);
        assert_int_equal(t->timeline[i].running, running[i]);
    }
    run_result_free(&r);
    world_free(&w);
}

/* A training job that uses half of each of its 2 GPUs (busy 0.5) holds both for its
 * 100 s: it is not slowed (it gets more than it uses), utilisation counts what it
 * uses, min(0.5 x 2, 2) = 1 GPU of 2: 50 %, allocation what it holds: 100 %. */
static void test_busy_counts_in_utilisation_not_allocation(void **state)
{
    (void)state;
    World w;
    world_init(&w, CLUSTER_1x2, "id,kind,gpus,submit_s,duration_s,busy\na,training,2,0,100,0.5\n",
               10000);
    RunResult r;
    run(&w, "first-fit+fifo", 1, &r);
    near(r.time.makespan_s, 100, EPS, "makespan");
    near(r.time.jct_s.max, 100, EPS, "jct");
    near(r.time.utilization_pct, 50, EPS, "utilisation");
    near(r.time.allocation_pct, 100, EPS, "allocation");
    run_result_free(&r);
    world_free(&w);
}

/* --window measures over a stretch from the first submission. Two GPUs: a (1 GPU, busy
 * 0.5) runs 0-100 s; b (2 GPUs, busy 0.75) arrives at 50, waits for a and runs
 * 100-200 s. The whole run: busy 0.5 x 100 + 1.5 x 100 = 200 of 2 x 200 GPU-s: 50 %;
 * held 100 + 200 = 300: 75 %.
 *   0-100 s:   busy 50, held 100, of 200: 25 %, 50 %.
 *   120-300 s: b's last 80 s, busy 120, held 160, then 100 s with nothing left to run,
 *              which still count (the same stretch for every policy): of 2 x 180 = 360,
 *              33.3 % and 44.4 %.
 *   300-400 s: all after the last event: 0 %, 0 %. */
static void test_window(void **state)
{
    (void)state;
    World w;
    world_init(&w, CLUSTER_1x2,
               "id,kind,gpus,submit_s,duration_s,busy\n"
               "a,training,1,0,100,0.5\n"
               "b,training,2,50,100,0.75\n",
               10000);
    const struct {
        int64_t from_s, to_s;
        double util, alloc;
    } cases[] = {{0, 100, 25, 50}, {120, 300, 100.0 / 3, 400.0 / 9}, {300, 400, 0, 0}};
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        w.in.opt.window_from_ms = cases[i].from_s * 1000;
        w.in.opt.window_to_ms = cases[i].to_s * 1000;
        RunResult r;
        run(&w, "first-fit+fifo", 1, &r);
        near(r.time.makespan_s, 200, EPS, "makespan");
        near(r.time.utilization_pct, 50, EPS, "utilisation");
        near(r.time.allocation_pct, 75, EPS, "allocation");
        near(r.time.window_utilization_pct, cases[i].util, 1e-9, "window utilisation");
        near(r.time.window_allocation_pct, cases[i].alloc, 1e-9, "window allocation");
        run_result_free(&r);
    }
    /* without a window there is no figure */
    w.in.opt.window_from_ms = w.in.opt.window_to_ms = 0;
    RunResult r;
    run(&w, "first-fit+fifo", 1, &r);
    assert_true(isnan(r.time.window_utilization_pct));
    assert_true(isnan(r.time.window_allocation_pct));
    run_result_free(&r);
    world_free(&w);
}

/* ---- (b) priority ---- */

/* One GPU. x (normal) runs 0-100. While it runs, lo (low) arrives at 10, no (normal) at
 * 20, hi (high) at 30, pr (production) at 40, each 10 s long.
 * Priority order (production < high < normal < low, then submission): pr 100-110,
 * hi 110-120, no 120-130, lo 130-140; waits pr 60, hi 80, no 100, lo 120 (x 0).
 * FIFO instead: lo 100-110, no 110-120, hi 120-130, pr 130-140; each waits 90. */
static const char *const CLUSTER_1x1 = "name: one\n"
                                       "pools:\n"
                                       "  - name: p\n"
                                       "    tier: owned\n"
                                       "    nodes: 1\n"
                                       "    node: {gpu_model: A100-80GB, gpus: 1}\n";

static const char *const PRIORITY_JOBS = "id,kind,priority,gpus,submit_s,duration_s\n"
                                         "x,training,normal,1,0,100\n"
                                         "lo,training,low,1,10,10\n"
                                         "no,training,normal,1,20,10\n"
                                         "hi,training,high,1,30,10\n"
                                         "pr,training,production,1,40,10\n";

static void test_priority_order(void **state)
{
    (void)state;
    World w;
    world_init(&w, CLUSTER_1x1, PRIORITY_JOBS, 10000);
    RunResult r;
    run(&w, "first-fit+priority", 1, &r);
    assert_int_equal(event_t(&r.events, "start", "pr", 0), 100000);
    assert_int_equal(event_t(&r.events, "start", "hi", 0), 110000);
    assert_int_equal(event_t(&r.events, "start", "no", 0), 120000);
    assert_int_equal(event_t(&r.events, "start", "lo", 0), 130000);
    const GroupResult *g = r.time.by_priority;
    near(g[PRIO_PRODUCTION].queue_delay_s.mean, 60, EPS, "production wait");
    near(g[PRIO_HIGH].queue_delay_s.mean, 80, EPS, "high wait");
    near(g[PRIO_NORMAL].queue_delay_s.mean, 50, EPS, "normal wait (x 0, no 100)");
    near(g[PRIO_LOW].queue_delay_s.mean, 120, EPS, "low wait");
    assert_int_equal(g[PRIO_NORMAL].finished, 2);
    near(r.time.queue_delay_s.mean, (60 + 80 + 100 + 120) / 5.0, EPS, "wait mean");
    near(r.time.makespan_s, 140, EPS, "makespan");
    run_result_free(&r);

    run(&w, "first-fit+fifo", 1, &r);
    assert_int_equal(event_t(&r.events, "start", "lo", 0), 100000);
    assert_int_equal(event_t(&r.events, "start", "no", 0), 110000);
    assert_int_equal(event_t(&r.events, "start", "hi", 0), 120000);
    assert_int_equal(event_t(&r.events, "start", "pr", 0), 130000);
    near(r.time.by_priority[PRIO_PRODUCTION].queue_delay_s.mean, 90, EPS, "fifo production wait");
    near(r.time.queue_delay_s.mean, 4 * 90 / 5.0, EPS, "fifo wait mean");
    run_result_free(&r);
    world_free(&w);
}

/* What --policy names: gpuorch alone orders by priority, other placements by FIFO. */
static void test_policy_names(void **state)
{
    (void)state;
    SimPolicy sp;
    policy("gpuorch", &sp);
    assert_int_equal(sp.order, ORDER_PRIORITY);
    policy("first-fit", &sp);
    assert_int_equal(sp.order, ORDER_FIFO);
    policy("tiresias", &sp);
    assert_int_equal(sp.order, ORDER_TIRESIAS);
    assert_string_equal(sp.place->name, "gpuorch");
    policy("best-fit+priority", &sp);
    assert_int_equal(sp.order, ORDER_PRIORITY);
    assert_string_equal(sp.place->name, "best-fit");
    Buf err = {0};
    assert_true(sim_policy_parse("no-such-policy", &sp, &err) < 0);
    assert_non_null(strstr(buf_str(&err), "no-such-policy"));
    buf_reset(&err);
    assert_true(sim_policy_parse("first-fit+lifo", &sp, &err) < 0);
    assert_non_null(strstr(buf_str(&err), "lifo"));
    buf_free(&err);
}

/* ---- (c) gangs ---- */

/* Two nodes of 2 GPUs (4 GPUs). blocker takes 1 GPU for 100 s at t=0; at t=10 comes a
 * gang of 2 workers x 2 GPUs for 50 s, which needs both nodes whole.
 * With a gang policy (first-fit) the gang holds nothing until blocker leaves at 100,
 * then runs 100-150: held = used = 1 GPU x 100 s + 4 GPUs x 50 s = 300 GPU-s of
 * 4 x 150 = 600: allocation 50 %, utilisation 50 %; the gang waits 90 s.
 * k8s-default places workers one by one: at t=10 one worker takes the free node and
 * sits there until the second fits at 100. Held: 1 x 10 + 3 x 90 + 4 x 50 = 480 GPU-s:
 * allocation 80 %; used is still 300: utilisation 50 %; the wait is still 90 s. */
static const char *const CLUSTER_2x2 = "name: two\n"
                                       "pools:\n"
                                       "  - name: p\n"
                                       "    tier: owned\n"
                                       "    nodes: 2\n"
                                       "    node: {gpu_model: A100-80GB, gpus: 2}\n";

static void test_gang_holds_nothing_until_it_fits(void **state)
{
    (void)state;
    World w;
    world_init(&w, CLUSTER_2x2,
               "id,kind,workers,gpus,submit_s,duration_s\n"
               "blocker,training,1,1,0,100\n"
               "gang,training,2,2,10,50\n",
               10000);
    RunResult r;
    run(&w, "first-fit+fifo", 1, &r);
    near(r.time.allocation_pct, 50, EPS, "gang allocation");
    near(r.time.utilization_pct, 50, EPS, "gang utilisation");
    near(r.time.makespan_s, 150, EPS, "makespan");
    assert_int_equal(count_events(&r.events, "start", "gang"), 2);
    assert_int_equal(event_t(&r.events, "start", "gang", 0), 100000);
    assert_int_equal(event_t(&r.events, "start", "gang", 1), 100000);
    /* the gang's wait: 150 - 10 - 50 */
    near(r.time.queue_delay_s.max, 90, EPS, "gang wait");
    /* a gang never holds part of the cluster: no timeline slice between 10 and 100
     * shows more allocated than the blocker's one GPU (25 %) */
    for (size_t i = 0; i < r.time.n_timeline; i++)
        if (r.time.timeline[i].t_s > 15 && r.time.timeline[i].t_s <= 100)
            near(r.time.timeline[i].allocation_pct, 25, 1e-6, "gang timeline allocation");
    run_result_free(&r);

    run(&w, "k8s-default+fifo", 1, &r);
    near(r.time.allocation_pct, 80, EPS, "k8s-default allocation");
    near(r.time.utilization_pct, 50, EPS, "k8s-default utilisation");
    near(r.time.makespan_s, 150, EPS, "k8s-default makespan");
    near(r.time.queue_delay_s.max, 90, EPS, "k8s-default gang wait");
    assert_int_equal(r.time.finished, 2);
    for (size_t i = 0; i < r.time.n_timeline; i++)
        if (r.time.timeline[i].t_s > 15 && r.time.timeline[i].t_s <= 100)
            near(r.time.timeline[i].allocation_pct, 75, 1e-6, "k8s-default timeline allocation");
    run_result_free(&r);
    world_free(&w);
}

/* ---- (d) MIG reconfiguration ---- */

/* One A100-80GB that may be MIG-partitioned and starts unpartitioned. m1 asks a 1g.10gb
 * instance for 100 s at t=0: the placement carves the GPU, so m1 starts after the
 * reconfiguration delay D and finishes at D + 100; its wait is D (it held its slice all
 * along). m2 asks the same at t=200: the idle instance is still there, so it starts at
 * once and waits 0. One reconfiguration in all.
 * With D = 10 s: makespan 250; a 1g slice is 1/7 of the GPU, held 110 + 50 s and used
 * 100 + 50 s: allocation 100 x 160/7 / 250 %, utilisation 100 x 150/7 / 250 %. */
static const char *const CLUSTER_MIG = "name: mig\n"
                                       "pools:\n"
                                       "  - name: a\n"
                                       "    tier: owned\n"
                                       "    nodes: 1\n"
                                       "    node: {gpu_model: A100-80GB, gpus: 1, mig: true}\n";

static const char *const MIG_JOBS = "id,kind,mig,submit_s,duration_s\n"
                                    "m1,inference,1g.10gb,0,100\n"
                                    "m2,inference,1g.10gb,200,50\n";

static void test_mig_reconfiguration_delay(void **state)
{
    (void)state;
    World w;
    world_init(&w, CLUSTER_MIG, MIG_JOBS, 10000);
    RunResult r;
    run(&w, "first-fit+fifo", 1, &r);
    assert_int_equal(r.time.reconfigurations, 1);
    assert_int_equal(count_events(&r.events, "reconfigure", "m1"), 1);
    assert_int_equal(event_t(&r.events, "reconfigure", "m1", 0), 0);
    assert_int_equal(count_events(&r.events, "reconfigure", "m2"), 0);
    assert_int_equal(event_t(&r.events, "start", "m1", 0), 10000);
    assert_int_equal(event_t(&r.events, "finish", "m1", 0), 110000);
    assert_int_equal(event_t(&r.events, "start", "m2", 0), 200000);
    near(r.time.queue_delay_s.max, 10, EPS, "m1 wait");
    near(r.time.queue_delay_s.mean, 5, EPS, "wait mean");
    near(r.time.jct_s.max, 110, EPS, "m1 jct");
    near(r.time.makespan_s, 250, EPS, "makespan");
    near(r.time.allocation_pct, 100.0 * 160 / 7 / 250, 1e-9, "allocation");
    near(r.time.utilization_pct, 100.0 * 150 / 7 / 250, 1e-9, "utilisation");
    run_result_free(&r);
    world_free(&w);

    /* the delay is the option's, not a constant */
    world_init(&w, CLUSTER_MIG, MIG_JOBS, 25000);
    run(&w, "first-fit+fifo", 1, &r);
    assert_int_equal(event_t(&r.events, "start", "m1", 0), 25000);
    near(r.time.queue_delay_s.max, 25, EPS, "m1 wait, 25 s delay");
    run_result_free(&r);
    world_free(&w);
}

/* ---- (d2) consolidation ---- */

/* One node of 2 A100-80GB that may be MIG-partitioned. Three model servers at t=0 ask
 * 3g.40gb: gpuorch cuts GPU 0 for x (slot 0) and y (slot 4), GPU 1 for a (slot 0); all
 * start after the 10 s reconfiguration. y ends at 610. A 1-GPU training job t arrives at
 * 700: no GPU is whole. Both GPUs hold 3/7 (within the 4/7 a GPU may hold to be emptied)
 * and x has run past the 5-minute minimum, so GPU 0, the first of the emptiest, is
 * emptied: x's replacement needs a new 3g instance at GPU 1's slot 4 (10 s), then loads
 * for the move delay M; x serves from GPU 0 meanwhile. At 700 + 10 + M the old instance
 * goes, GPU 0 is idle, and t starts after GPU 0's MIG comes off (10 s): at 720 + M.
 * With M = 60 s: t starts at 780, ends at 1780; x and a end at 7210 (makespan).
 *   held: x 3/7 x (770 + 6510) + y 3/7 x 610 + a 3/7 x 7210 + t 1010 = 7481.43 GPU-s of
 *         2 x 7210: 51.88 %;
 *   used: x and a 3/7 x 7200 each, y 3/7 x 600, t 1000 = 7428.57 GPU-s: 51.52 %.
 * With M = 120 s, t starts at 840. */
static const char *const CLUSTER_MIG2 = "name: mig2\n"
                                        "pools:\n"
                                        "  - name: a\n"
                                        "    tier: owned\n"
                                        "    nodes: 1\n"
                                        "    node: {gpu_model: A100-80GB, gpus: 2, mig: true}\n";

static const char *const MOVE_JOBS = "id,kind,mig,gpus,submit_s,duration_s\n"
                                     "x,inference,3g.40gb,,0,7200\n"
                                     "y,inference,3g.40gb,,0,600\n"
                                     "a,inference,3g.40gb,,0,7200\n"
                                     "t,training,,1,700,1000\n";

static void test_consolidation_moves_a_server(void **state)
{
    (void)state;
    static const int64_t delays[] = {60000, 120000};
    for (size_t i = 0; i < ARRAY_SIZE(delays); i++) {
        World w;
        fixture_world(&w, CLUSTER_MIG2, MOVE_JOBS,
                      (SimOptions){.mode = SIM_TIME,
                                   .reconfig_delay_ms = 10000,
                                   .move_delay_ms = delays[i],
                                   .min_runtime_ms = 5 * 60 * 1000,
                                   .tune_ratio = 1.3,
                                   .events = true,
                                   .timeline_points = 600});
        RunResult r;
        run(&w, "gpuorch", 1, &r);
        assert_int_equal(r.time.server_moves, 1);
        assert_int_equal(event_t(&r.events, "move", "x", 0), 700000);
        assert_int_equal(event_t(&r.events, "moved", "x", 0), 710000 + delays[i]);
        assert_int_equal(event_t(&r.events, "start", "t", 0), 720000 + delays[i]);
        assert_int_equal(count_events(&r.events, "move", "a"), 0);
        if (i == 0) {
            near(r.time.makespan_s, 7210, EPS, "makespan");
            near(r.time.allocation_pct,
                 100.0 * (3.0 / 7 * (770 + 6510 + 610 + 7210) + 1010) / 14420, 1e-9, "allocation");
            near(r.time.utilization_pct, 100.0 * (3.0 / 7 * (7200 + 600 + 7200) + 1000) / 14420,
                 1e-9, "utilisation");
        }
        run_result_free(&r);
        world_free(&w);
    }
}

/* ---- (e) stretch ---- */

/* One A100 (no MIG), three jobs at t=0 for 100 s, each on a 0.25 MPS share:
 *  t: training, busy 0.5: it uses 0.5 x 1 GPU asked but gets 0.25, so it runs at half
 *     speed: 200 s;
 *  i: inference, busy 0.5: inference is not slowed: 100 s;
 *  b: batch, busy 0.2: it gets more than the 0.2 it uses: 100 s.
 * No one waits (wait = finish - submit - time running = 0). Makespan 200.
 * Used: t min(0.5, 0.25) x 200 + i 0.25 x 100 + b 0.2 x 100 = 95 GPU-s of 200: 47.5 %;
 * held: 0.25 x (200 + 100 + 100) = 100 of 200: 50 %. */
static void test_stretch(void **state)
{
    (void)state;
    World w;
    world_init(&w, CLUSTER_1x1,
               "id,kind,gpu_fraction,submit_s,duration_s,busy\n"
               "t,training,0.25,0,100,0.5\n"
               "i,inference,0.25,0,100,0.5\n"
               "b,batch,0.25,0,100,0.2\n",
               10000);
    RunResult r;
    run(&w, "first-fit+fifo", 1, &r);
    assert_int_equal(event_t(&r.events, "finish", "t", 0), 200000);
    assert_int_equal(event_t(&r.events, "finish", "i", 0), 100000);
    assert_int_equal(event_t(&r.events, "finish", "b", 0), 100000);
    near(r.time.queue_delay_s.max, 0, EPS, "waits");
    near(r.time.jct_s.max, 200, EPS, "t jct");
    near(r.time.jct_s.p50, 100, EPS, "jct p50");
    near(r.time.makespan_s, 200, EPS, "makespan");
    near(r.time.utilization_pct, 47.5, 1e-9, "utilisation");
    near(r.time.allocation_pct, 50, 1e-9, "allocation");
    run_result_free(&r);
    world_free(&w);
}

/* ---- (f) Tiresias ---- */

/* One node of 8 GPUs. long asks 8 GPUs for 3 h at t=0; short 8 GPUs for 30 min at 1 h.
 * Tiresias: long runs from 0; short waits in the upper queue behind a running job of
 * the upper queue (no preemption before the crossing). At 2 h long has attained
 * 8 GPUs x 2 h = 16 GPU-hours and drops to the lower queue; short then preempts it and
 * runs 2 h-2.5 h; long resumes at 2.5 h with 1 h left and finishes at 3.5 h, having
 * run 3 h in all. Waits: long 3.5 - 3 = 0.5 h, short 2 - 1 = 1 h; JCT long 3.5 h,
 * short 1.5 h; makespan 3.5 h; the 8 GPUs are busy throughout: 100 %.
 * FIFO: long runs 0-3 h, short 3-3.5 h, waits 2 h, no preemption. */
static void test_tiresias_preempts_at_crossing(void **state)
{
    (void)state;
    World w;
    world_init(&w,
               "name: eight\n"
               "pools:\n"
               "  - name: p\n"
               "    tier: owned\n"
               "    nodes: 1\n"
               "    node: {gpu_model: A100-80GB, gpus: 8}\n",
               "id,kind,gpus,submit_s,duration_s\n"
               "long,training,8,0,10800\n"
               "short,training,8,3600,1800\n",
               10000);
    RunResult r;
    run(&w, "first-fit+tiresias", 1, &r);
    assert_int_equal(r.time.preemptions, 1);
    assert_int_equal(count_events(&r.events, "preempt", "long"), 1);
    assert_int_equal(event_t(&r.events, "preempt", "long", 0), 7200000);
    assert_int_equal(count_events(&r.events, "preempt", "short"), 0);
    assert_int_equal(event_t(&r.events, "start", "short", 0), 7200000);
    assert_int_equal(event_t(&r.events, "finish", "short", 0), 9000000);
    assert_int_equal(count_events(&r.events, "start", "long"), 2);
    int64_t s0 = event_t(&r.events, "start", "long", 0);
    int64_t p0 = event_t(&r.events, "preempt", "long", 0);
    int64_t s1 = event_t(&r.events, "start", "long", 1);
    int64_t f1 = event_t(&r.events, "finish", "long", 0);
    assert_int_equal(s0, 0);
    assert_int_equal(s1, 9000000);
    assert_int_equal(f1, 12600000);
    assert_int_equal((p0 - s0) + (f1 - s1), 10800000); /* run time unchanged: 3 h */
    assert_int_equal(r.time.finished, 2);
    near(r.time.queue_delay_s.max, 3600, EPS, "short wait");
    near(r.time.queue_delay_s.mean, (1800 + 3600) / 2.0, EPS, "wait mean");
    near(r.time.jct_s.max, 12600, EPS, "long jct");
    near(r.time.jct_s.mean, (12600 + 5400) / 2.0, EPS, "jct mean");
    near(r.time.makespan_s, 12600, EPS, "makespan");
    near(r.time.utilization_pct, 100, 1e-9, "utilisation");
    run_result_free(&r);

    run(&w, "first-fit+fifo", 1, &r);
    assert_int_equal(r.time.preemptions, 0);
    assert_int_equal(event_t(&r.events, "start", "short", 0), 10800000);
    near(r.time.queue_delay_s.max, 7200, EPS, "fifo short wait");
    near(r.time.makespan_s, 12600, EPS, "fifo makespan");
    run_result_free(&r);
    world_free(&w);
}

/* The victim is the lower-queue job submitted last. One node of 8 GPUs; a and b ask
 * 4 GPUs for 6 h, at 0 and 60 s; both pass 16 GPU-hours (4 GPUs x 4 h) before w, 4 GPUs
 * for 30 min, arrives at 5 h. w preempts b (the later), not a: w runs 5 h-5.5 h, a
 * finishes at 6 h untouched, b resumes at 5.5 h with 6 h - (5 h - 60 s) = 3,660 s left
 * and finishes at 23,460 s; its wait is 23,460 - 60 - 21,600 = 1,800 s. */
static void test_tiresias_victim_is_latest_submitted(void **state)
{
    (void)state;
    World w;
    world_init(&w,
               "name: eight\n"
               "pools:\n"
               "  - name: p\n"
               "    tier: owned\n"
               "    nodes: 1\n"
               "    node: {gpu_model: A100-80GB, gpus: 8}\n",
               "id,kind,gpus,submit_s,duration_s\n"
               "a,training,4,0,21600\n"
               "b,training,4,60,21600\n"
               "w,training,4,18000,1800\n",
               10000);
    RunResult r;
    run(&w, "first-fit+tiresias", 1, &r);
    assert_int_equal(r.time.preemptions, 1);
    assert_int_equal(count_events(&r.events, "preempt", "a"), 0);
    assert_int_equal(event_t(&r.events, "preempt", "b", 0), 18000000);
    assert_int_equal(event_t(&r.events, "start", "w", 0), 18000000);
    assert_int_equal(event_t(&r.events, "finish", "a", 0), 21600000);
    assert_int_equal(event_t(&r.events, "start", "b", 1), 19800000);
    assert_int_equal(event_t(&r.events, "finish", "b", 0), 23460000);
    near(r.time.queue_delay_s.max, 1800, EPS, "b wait");
    near(r.time.queue_delay_s.mean, 600, EPS, "wait mean");
    run_result_free(&r);
    world_free(&w);
}

/* ---- (g) determinism ---- */

/* Twenty jobs of every kind of request over three MIG-capable nodes, under a
 * policy that draws random numbers and one that preempts: the same seed gives the
 * same report and event log, byte for byte; another seed changes the random policy's
 * choices (so the seed is really used and the equality above means something). */
static const char *const CLUSTER_3x4 = "name: three\n"
                                       "pools:\n"
                                       "  - name: a\n"
                                       "    tier: owned\n"
                                       "    nodes: 3\n"
                                       "    node: {gpu_model: A100-80GB, gpus: 4, mig: true}\n";

static const char *const MIXED_JOBS =
    "id,kind,priority,workers,gpus,mig,gpu_fraction,submit_s,duration_s,busy\n"
    "j01,training,normal,1,2,,,0,3600,0.8\n"
    "j02,inference,high,1,,1g.10gb,,5,7200,\n"
    "j03,batch,low,1,,,0.5,10,1800,1\n"
    "j04,training,normal,2,2,,,20,5400,\n"
    "j05,inference,production,1,,2g.20gb,,30,9000,0.3\n"
    "j06,training,normal,1,4,,,40,4000,\n"
    "j07,batch,low,1,1,,,50,600,\n"
    "j08,interactive,high,1,1,,,60,1200,0.1\n"
    "j09,training,normal,3,1,,,70,2000,\n"
    "j10,batch,normal,1,,,0.25,80,300,0.5\n"
    "j11,inference,normal,1,,3g.40gb,,90,2500,\n"
    "j12,training,high,1,4,,,100,8000,\n"
    "j13,batch,low,1,2,,,110,900,\n"
    "j14,training,normal,2,4,,,120,3000,\n"
    "j15,inference,high,1,,1g.10gb,,130,400,\n"
    "j16,batch,normal,1,1,,,140,100,\n"
    "j17,training,low,1,1,,,150,50000,\n"
    "j18,batch,normal,1,,,0.75,160,700,\n"
    "j19,training,normal,1,8,,,170,100,\n"
    "j20,batch,normal,1,1,,,180,1000,\n";

static void report(const World *w, const char *policy_name, uint64_t seed, Buf *json, Buf *events)
{
    SimPolicy sp;
    policy(policy_name, &sp);
    RunResult r = {0};
    assert_int_equal(sim_run_time(&w->in, &sp, seed, &r), 0);
    SimReport rep = {.mode = SIM_TIME,
                     .cluster_name = w->c->name,
                     .trace_name = "mixed",
                     .gpus = (double)w->c->n_gpus,
                     .policies = &sp,
                     .n_policies = 1,
                     .seeds = &seed,
                     .n_seeds = 1,
                     .runs = &r};
    report_json(&rep, json);
    buf_append(events, buf_str(&r.events), r.events.len);
    run_result_free(&r);
}

static void test_determinism(void **state)
{
    (void)state;
    World w;
    world_init(&w, CLUSTER_3x4, MIXED_JOBS, 10000);
    const char *policies[] = {"random", "random+tiresias", "gpuorch", "k8s-default"};
    for (size_t i = 0; i < sizeof(policies) / sizeof(*policies); i++) {
        Buf j1 = {0}, e1 = {0}, j2 = {0}, e2 = {0};
        report(&w, policies[i], 7, &j1, &e1);
        report(&w, policies[i], 7, &j2, &e2);
        assert_true(j1.len > 0);
        assert_true(e1.len > 0);
        assert_string_equal(buf_str(&j1), buf_str(&j2));
        assert_string_equal(buf_str(&e1), buf_str(&e2));
        /* every job of the trace shows up: 19 submit lines, and j19 (8 GPUs on nodes
         * of 4) as unschedulable */
        int submits = 0;
        for (const char *p = buf_str(&e1); (p = strstr(p, "\"type\": \"submit\"")); p++)
            submits++;
        assert_int_equal(submits, 19);
        assert_int_equal(count_events(&e1, "unschedulable", "j19"), 1);
        buf_free(&j1);
        buf_free(&e1);
        buf_free(&j2);
        buf_free(&e2);
    }
    /* the random policy really uses the seed */
    Buf j7 = {0}, e7 = {0}, j8 = {0}, e8 = {0};
    report(&w, "random", 7, &j7, &e7);
    report(&w, "random", 8, &j8, &e8);
    assert_string_not_equal(buf_str(&e7), buf_str(&e8));
    buf_free(&j7);
    buf_free(&e7);
    buf_free(&j8);
    buf_free(&e8);
    world_free(&w);
}

/* ---- (h) jobs that never run ---- */

/* One node of 2 A100s (16 cores by default). ok runs 0-100. wrongmodel asks for an
 * H100 the cluster lacks and nodur has no duration: both unschedulable, never
 * submitted to the queue. toobig asks 100 cores: the cluster knows its GPU ask but no
 * node can ever host it, so it waits until the events run out: never placed.
 * Submitted 4, finished 1, unschedulable 2, never placed 1; waits and JCTs count only
 * ok (a job that never started has no wait to report); the makespan runs from the
 * first arrival (0) to the last event (ok's finish at 100). */
static void test_never_placed_and_unschedulable(void **state)
{
    (void)state;
    World w;
    world_init(&w, CLUSTER_1x2,
               "id,kind,gpus,gpu_model,cpu_milli,submit_s,duration_s\n"
               "ok,training,1,,,0,100\n"
               "wrongmodel,training,1,H100-80GB-SXM5,,5,100\n"
               "nodur,training,1,,,5,\n"
               "toobig,training,1,,100000,10,100\n",
               10000);
    RunResult r;
    run(&w, "first-fit+fifo", 1, &r);
    assert_int_equal(r.time.submitted, 4);
    assert_int_equal(r.time.finished, 1);
    assert_int_equal(r.time.unschedulable, 2);
    assert_int_equal(r.time.never_placed, 1);
    assert_int_equal(r.time.queue_delay_s.n, 1);
    assert_int_equal(r.time.jct_s.n, 1);
    near(r.time.jct_s.mean, 100, EPS, "ok jct");
    near(r.time.makespan_s, 100, EPS, "makespan");
    /* 1 GPU of 2 for 100 s */
    near(r.time.utilization_pct, 50, EPS, "utilisation");
    assert_int_equal(count_events(&r.events, "unschedulable", "wrongmodel"), 1);
    assert_int_equal(count_events(&r.events, "unschedulable", "nodur"), 1);
    assert_int_equal(count_events(&r.events, "never-placed", "toobig"), 1);
    assert_int_equal(count_events(&r.events, "start", "toobig"), 0);
    assert_int_equal(count_events(&r.events, "submit", "wrongmodel"), 0);
    assert_non_null(strstr(buf_str(&r.events), "H100-80GB-SXM5) is in this cluster"));
    assert_non_null(strstr(buf_str(&r.events), "the job has no duration"));
    run_result_free(&r);
    world_free(&w);
}

/* The expected mix that fragmentation-aware policies score against. Packing mode
 * counts how often each shape comes; time mode how many of it run at once (arrivals x
 * the length the scheduler is told). Ten 1-GPU jobs told 1 h, one 2-GPU job told 20 h,
 * one half-GPU share told nothing (it counts the mean told length, (10 x 1 + 20) / 11 =
 * 30/11 h):
 *   time:    10 x 1 = 10, 1 x 20 = 20, 30/11: total 360/11, so 110/360, 220/360, 30/360
 *   packing: 10, 1, 1 of 12. */
static void test_expected_mix_weights(void **state)
{
    (void)state;
    Buf csv = {0};
    buf_puts(&csv, "id,kind,gpus,gpu_fraction,submit_s,duration_s,duration_estimate_s\n");
    for (int i = 0; i < 10; i++)
        buf_printf(&csv, "a%d,training,1,,%d,3000,3600\n", i, i);
    buf_puts(&csv, "g,training,2,,20,70000,72000\nc,batch,,0.5,30,100,\n");
    for (int mode = 0; mode <= 1; mode++) {
        World w;
        world_init(&w, CLUSTER_1x2, buf_str(&csv), 0);
        if (mode == 1) {
            sim_input_free(&w.in);
            w.in = (SimInput){.cluster = w.c,
                              .jobs = &w.jobs,
                              .trace_name = "j",
                              .opt = {.mode = SIM_PACKING, .tune_ratio = 1.3}};
            assert_int_equal(sim_prepare(&w.in), 0);
        }
        const Mix *m = &w.in.prep.expected;
        assert_int_equal(m->n, 3);
        double want_time[] = {110.0 / 360, 220.0 / 360, 30.0 / 360};
        double want_pack[] = {10.0 / 12, 1.0 / 12, 1.0 / 12};
        for (size_t k = 0; k < m->n; k++) {
            const Request *r = &m->e[k].r;
            size_t which = r->kind == REQ_FRACTION ? 2 : r->gpus == 2 ? 1 : 0;
            near(m->e[k].weight, mode ? want_pack[which] : want_time[which], 1e-12,
                 mode ? "packing weight" : "time weight");
        }
        world_free(&w);
    }
    buf_free(&csv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fifo_golden),
        cmocka_unit_test(test_busy_counts_in_utilisation_not_allocation),
        cmocka_unit_test(test_window),
        cmocka_unit_test(test_priority_order),
        cmocka_unit_test(test_policy_names),
        cmocka_unit_test(test_gang_holds_nothing_until_it_fits),
        cmocka_unit_test(test_mig_reconfiguration_delay),
        cmocka_unit_test(test_consolidation_moves_a_server),
        cmocka_unit_test(test_stretch),
        cmocka_unit_test(test_tiresias_preempts_at_crossing),
        cmocka_unit_test(test_tiresias_victim_is_latest_submitted),
        cmocka_unit_test(test_determinism),
        cmocka_unit_test(test_never_placed_and_unschedulable),
        cmocka_unit_test(test_expected_mix_weights),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
