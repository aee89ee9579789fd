/* test_reason.c: the sentence a waiting job is given (core/reason.c, and the placer's
 * explanation in core/place.c), one scenario per cause, each sentence checked whole:
 * nodes that never registered, were lost, are mismatched, are being taken back, are
 * closed, starting, leaving or not started; ready nodes that are full or have room for
 * only part of a gang; the job's own reservation; room kept for another job's
 * reservation or claim, by id; the team's burst limit with its numbers; the jobs being
 * preempted for it, by id; and a job that shares a shape with a reservation's holder is
 * not told it holds one. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "sched_fixture.h"
#include "sched_world.h"

#include "core/cluster.h"
#include "core/sched.h"

#include <stdio.h>
#include <string.h>

#define MIN_MS INT64_C(60000)

/* A world of `nodes` owned H100 nodes of 8 GPUs ("h-0", "h-1", ...), gpuorch's config
 * without a minimum run time. */
static Cluster *scene(World *w, unsigned nodes)
{
    Cluster *c = cluster_new("t");
    assert_non_null(c);
    fixture_add_pool(c, "h", "H100", TIER_OWNED, 8, nodes, false);
    SchedConfig cfg;
    sched_config_gpuorch(&cfg);
    cfg.min_runtime_ms = 0;
    world_init(w, c, "first-fit", &cfg);
    return c;
}

/* Fill a node with one running 8-GPU job (no estimate: it never ends by plan). */
static SchedJob *fill(World *w, unsigned node)
{
    for (unsigned i = 0; i < w->c->n_nodes; i++)
        if (i != node && w->c->nodes[i].schedulable)
            cluster_set_schedulable(w->c, i, false);
    SchedJob *j = submit(w, (JobArgs){.gpus = 8, .submit_ms = -1000});
    cycle(w, 0);
    assert_true(started(w, j));
    assert_int_equal(node_of(j), node);
    return j;
}

static void test_not_ready_nodes_named(void **state)
{
    World *w = *state;
    Cluster *c = scene(w, 7);
    fill(w, 0);
    cluster_set_away(c, 1, AWAY_UNREGISTERED);
    cluster_set_away(c, 2, AWAY_LOST);
    cluster_set_away(c, 3, AWAY_MISMATCHED);
    cluster_set_away(c, 4, AWAY_NOTICE);
    cluster_set_away(c, 5, AWAY_DOWN);
    cluster_set_schedulable(c, 6, false);
    SchedJob *j = submit(w, (JobArgs){.gpus = 1, .submit_ms = 1});
    cycle(w, 1000);
    assert_false(started(w, j));
    assert_string_equal(j->reason,
                        "no node has 1 free GPU with the CPU and memory asked: of the 7 nodes it "
                        "may use, 1 has no room for a worker (the most free GPUs on one: 0), h-1 "
                        "has not registered "
                        "(no agent has reported for it), h-2 is lost (its agent stopped "
                        "answering), h-3 is mismatched (its agent reports other GPUs than the "
                        "cluster spec declares), h-4 is being taken back by its cloud, h-5 is shut "
                        "down (its agent was stopped), h-6 is closed to new work; it can start "
                        "when running work frees room or those "
                        "nodes are ready");
}

/* The node that never registered is the whole story: the job is told to wait for it, not
 * that the cluster lacks free GPUs. */
static void test_the_one_node_has_not_registered(void **state)
{
    World *w = *state;
    Cluster *c = scene(w, 1);
    cluster_set_away(c, 0, AWAY_UNREGISTERED);
    SchedJob *j = submit(w, (JobArgs){.gpus = 8});
    cycle(w, 0);
    assert_string_equal(j->reason, "no node has 8 free GPUs with the CPU and memory asked: the "
                                   "one node it may use, h-0, has not registered (no agent has "
                                   "reported for it); it can start when h-0 is ready");
    /* its agent reports: the node opens and the job starts */
    cluster_set_schedulable(c, 0, true);
    cycle(w, 1000);
    assert_true(started(w, j));
}

static void test_autoscaled_nodes(void **state)
{
    World *w = *state;
    Cluster *c = scene(w, 4);
    fill(w, 0);
    cluster_set_node_state(c, 1, NODE_STARTING);
    cluster_set_node_state(c, 2, NODE_LEAVING);
    cluster_set_node_state(c, 3, NODE_ABSENT);
    SchedJob *j = submit(w, (JobArgs){.gpus = 2, .submit_ms = 1});
    cycle(w, 1000);
    assert_string_equal(
        j->reason,
        "no node has 2 free GPUs with the CPU and memory asked: of the 4 nodes it "
        "may use, 1 has no room for a worker (the most free GPUs on one: 0), h-1 is starting, h-2 "
        "is leaving, h-3 is not started (the autoscaler may start it); it can "
        "start when running work frees room or h-1 and h-2 are ready or the "
        "autoscaler starts nodes");
}

/* A gang: one node has room for one of its two workers, the other none and is lost. */
static void test_gang_partly_room(void **state)
{
    World *w = *state;
    Cluster *c = scene(w, 3);
    fill(w, 0);
    cluster_set_schedulable(c, 1, true);
    cluster_set_away(c, 2, AWAY_LOST);
    SchedJob *g = submit(w, (JobArgs){.gpus = 8, .workers = 2, .submit_ms = 1});
    cycle(w, 1000);
    assert_false(started(w, g));
    assert_string_equal(g->reason,
                        "the cluster does not have 16 free GPUs for 2 workers of 8 (room for 1 of "
                        "2 workers): of the 3 nodes it may use, 1 has no room for a worker, h-2 "
                        "is lost (its agent stopped answering); it can "
                        "start when running work frees room or h-2 is ready");
}

/* A one-worker job of 8 GPUs reserves the node whose work ends first; the job behind it
 * of the same shape is told what the placer found, not that it holds a reservation. */
static void test_own_reservation_and_same_shape(void **state)
{
    World *w = *state;
    scene(w, 1);
    SchedJob *r = submit(w, (JobArgs){.gpus = 8, .est_ms = 10 * MIN_MS, .submit_ms = -1});
    cycle(w, 0);
    assert_true(started(w, r));
    SchedJob *a = submit(w, (JobArgs){.gpus = 8, .submit_ms = 1});
    SchedJob *b = submit(w, (JobArgs){.gpus = 8, .submit_ms = 2});
    /* estimates are what is left of the run: the caller keeps them, here unchanged */
    cycle(w, MIN_MS);
    assert_string_equal(a->reason, "it holds a reservation: h-0 is kept for it and should be "
                                   "free in about 10 min, when the work there ends by its "
                                   "estimates");
    assert_null(strstr(b->reason, "reservation"));
    assert_string_equal(b->reason, "no node has 8 free GPUs with the CPU and memory asked: the "
                                   "one node it may use, h-0, is kept for another job; it can "
                                   "start when running work frees room");
}

/* Room another job's reservation keeps, by the job's id and when it should start. */
static void test_kept_for_a_reservation(void **state)
{
    World *w = *state;
    scene(w, 1);
    SchedJob *r = submit(w, (JobArgs){.gpus = 4, .est_ms = 10 * MIN_MS, .submit_ms = -1});
    cycle(w, 0);
    assert_true(started(w, r));
    SchedJob *g = submit(w, (JobArgs){.gpus = 8, .submit_ms = 1});
    SchedJob *s = submit(w, (JobArgs){.gpus = 1, .submit_ms = 2});
    cycle(w, 0);
    assert_false(started(w, s));
    char want[SCHED_REASON_LEN];
    snprintf(want, sizeof(want),
             "the room it fits in, on h-0, is kept for job %u, ahead of it in the queue, which "
             "should start there in about 10 min; it may run there first only if it is "
             "preemptible or its duration estimate ends it by then",
             g->id);
    assert_string_equal(s->reason, want);
}

/* Room a preemption freed is its preemptor's until that job's turn: a job ahead of the
 * preemptor is told so, by the preemptor's id. */
static void test_kept_for_a_claim(void **state)
{
    World *w = *state;
    scene(w, 1);
    SchedJob *l = submit(
        w, (JobArgs){
               .gpus = 8, .prio = "low", .preemptible = true, .grace_ms = 10000, .submit_ms = -1});
    cycle(w, 0);
    assert_true(started(w, l));
    SchedJob *p = submit(w, (JobArgs){.gpus = 4, .prio = "production", .submit_ms = 100});
    cycle(w, MIN_MS);
    assert_true(preempted_for(w, l, p));
    char want[SCHED_REASON_LEN];
    snprintf(want, sizeof(want),
             "preempting lower-priority or borrowed work to make room: job %u (it stops after a "
             "checkpoint, in about 10 s at the latest)",
             l->id);
    assert_string_equal(p->reason, want);
    cycle(w, MIN_MS + 5000);
    snprintf(want, sizeof(want),
             "waiting for the work preempted for it to stop: job %u (it stops after a "
             "checkpoint, in about 5 s at the latest)",
             l->id);
    assert_string_equal(p->reason, want);
    finish_at(w, l, MIN_MS + 10000);
    /* a production job older than p, arriving now: p's claim keeps it off the node */
    SchedJob *q = submit(w, (JobArgs){.gpus = 2, .prio = "production", .submit_ms = 50});
    w->d.n = 0;
    assert_int_equal(sched_cycle(&w->s, MIN_MS + 10000, w->running, w->n_running, &w->d), 0);
    assert_false(started(w, q));
    assert_true(started(w, p));
    snprintf(want, sizeof(want),
             "the room it fits in, on h-0, is held for job %u, whose preemptions freed it, until "
             "that job's turn",
             p->id);
    assert_string_equal(q->reason, want);
    for (size_t k = 0; k < w->d.n; k++)
        if (w->d.d[k].kind == SCHED_START)
            w->running[w->n_running++] = &w->jobs[w->d.d[k].job];
}

static void test_burst_limit_numbers(void **state)
{
    World *w = *state;
    Cluster *c = cluster_new("t");
    assert_non_null(c);
    fixture_add_pool(c, "h", "H100", TIER_OWNED, 8, 1, false);
    fixture_add_team(c, "research", 1, 2.5);
    SchedConfig cfg;
    sched_config_gpuorch(&cfg);
    world_init(w, c, "first-fit", &cfg);
    submit(w, (JobArgs){.gpus = 2, .team = "research", .submit_ms = 0});
    SchedJob *j = submit(w, (JobArgs){.gpus = 1, .team = "research", .submit_ms = 1});
    cycle(w, 0);
    assert_string_equal(j->reason,
                        "its team research is at its burst limit: it holds 2 of 2.5 "
                        "GPU-equivalents and this job needs 1; it can start when the team's "
                        "running work ends or an admin raises its limit");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_not_ready_nodes_named, world_setup, world_teardown),
        cmocka_unit_test_setup_teardown(test_the_one_node_has_not_registered, world_setup,
                                        world_teardown),
        cmocka_unit_test_setup_teardown(test_autoscaled_nodes, world_setup, world_teardown),
        cmocka_unit_test_setup_teardown(test_gang_partly_room, world_setup, world_teardown),
        cmocka_unit_test_setup_teardown(test_own_reservation_and_same_shape, world_setup,
                                        world_teardown),
        cmocka_unit_test_setup_teardown(test_kept_for_a_reservation, world_setup, world_teardown),
        cmocka_unit_test_setup_teardown(test_kept_for_a_claim, world_setup, world_teardown),
        cmocka_unit_test_setup_teardown(test_burst_limit_numbers, world_setup, world_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
