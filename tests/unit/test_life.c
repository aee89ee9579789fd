/* test_life.c: the job lifecycle both drivers share (src/life): a run from the core's
 * start to its end through the workers' reports; a gang that loses a worker is torn
 * down whole; a worker out of GPU memory teaches its class, resizes the class's waiting
 * jobs and runs again one size up, or fails when no GPU holds what it needs; a stop
 * requeues with what is left of the estimate, a cancel overrides a preemption; a lost
 * node requeues the run; a model server moves make-before-break, or keeps its place when
 * its replacement cannot start; and a sink that fails stops the step with its error. Driven by
 * the real core (scheduler, placer, learned memory) on a small cluster. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core/catalog.h"
#include "core/cluster.h"
#include "core/learn.h"
#include "core/place.h"
#include "core/sched.h"
#include "life/life.h"
#include "spec/spec.h"
#include "util/buf.h"
#include "util/rng.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_JOBS   8
#define MAX_EVENTS 64

typedef struct Seen {
    char type[32];
    char detail[512];
    uint32_t job;
} Seen;

typedef struct World {
    Cluster *c;
    Rng rng;
    PlaceCtx ctx;
    Sched sched;
    Learn learn;
    Life life;
    JobSpec specs[MAX_JOBS];
    SchedJob sched_jobs[MAX_JOBS];
    LifeJob jobs[MAX_JOBS];
    size_t n_jobs;
    Seen ev[MAX_EVENTS];
    size_t n_ev;
    unsigned released, learned, changed, moves_done, moves_abandoned;
    int fail_release; /* the release callback returns this */
} World;

static int on_event(void *arg, LifeJob *j, int64_t t_ms, const char *type, const char *detail)
{
    (void)t_ms;
    World *w = arg;
    assert_true(w->n_ev < MAX_EVENTS);
    Seen *e = &w->ev[w->n_ev++];
    snprintf(e->type, sizeof(e->type), "%s", type);
    snprintf(e->detail, sizeof(e->detail), "%s", detail ? detail : "");
    e->job = j->sj->id;
    return 0;
}

static int on_release(void *arg, LifeJob *j, int64_t now_ms)
{
    (void)now_ms;
    World *w = arg;
    assert_true(j->sj->running); /* still held when its driver hears of it */
    w->released++;
    return w->fail_release;
}

static int on_changed(void *arg, LifeJob *j)
{
    (void)j;
    ((World *)arg)->changed++;
    return 0;
}

static int on_moved(void *arg, LifeJob *j, bool done, int64_t now_ms)
{
    (void)now_ms;
    World *w = arg;
    assert_true(j->sj->moving); /* the core lets go after its driver heard */
    if (done)
        w->moves_done++;
    else
        w->moves_abandoned++;
    return 0;
}

static int on_learned(void *arg, const LearnEntry *e)
{
    assert_non_null(e);
    ((World *)arg)->learned++;
    return 0;
}

static LifeJob *next_waiting(void *arg, const char *cls, int64_t *pos)
{
    World *w = arg;
    char other[LEARN_CLASS_MAX];
    for (size_t i = (size_t)*pos; i < w->n_jobs; i++) {
        LifeJob *j = &w->jobs[i];
        learn_class_of(j->spec, other, sizeof(other));
        if (j->state != LIFE_PENDING || !j->sj->queued || strcmp(other, cls))
            continue;
        *pos = (int64_t)i + 1;
        return j;
    }
    *pos = (int64_t)w->n_jobs;
    return NULL;
}

/* `nodes` nodes of two H100s, MIG allowed. */
static World *world_of(unsigned nodes)
{
    World *w = calloc(1, sizeof(*w));
    assert_non_null(w);
    char yaml[256];
    snprintf(yaml, sizeof(yaml),
             "name: t\n"
             "pools:\n"
             "  - {name: h, tier: owned, nodes: %u,\n"
             "     node: {gpu_model: H100-80GB-SXM5, gpus: 2, mig: true}}\n",
             nodes);
    Buf err = {0};
    if (spec_parse_cluster_yaml(yaml, strlen(yaml), "c.yaml", &w->c, &err))
        fail_msg("cluster: %s", buf_str(&err));
    buf_free(&err);
    SchedConfig cfg;
    sched_config_gpuorch(&cfg);
    rng_seed(&w->rng, 1);
    assert_int_equal(place_ctx_init(&w->ctx, w->c, policy_find("first-fit"), &w->rng, NULL, NULL),
                     0);
    assert_int_equal(sched_init(&w->sched, w->c, &w->ctx, &cfg, 0), 0);
    w->life = (Life){.c = w->c,
                     .sched = &w->sched,
                     .learn = &w->learn,
                     .sink = {.arg = w,
                              .changed = on_changed,
                              .event = on_event,
                              .release = on_release,
                              .learned = on_learned,
                              .moved = on_moved,
                              .next_waiting = next_waiting}};
    return w;
}

static World *world_new(void)
{
    return world_of(2);
}

static void world_free(World *w)
{
    for (size_t i = 0; i < w->n_jobs; i++) {
        life_job_free(&w->jobs[i]);
        placement_free(&w->sched_jobs[i].pl);
        placement_free(&w->sched_jobs[i].moved_from);
    }
    sched_free(&w->sched);
    place_ctx_free(&w->ctx);
    learn_free(&w->learn);
    cluster_free(w->c);
    free(w);
}

/* A job of `workers` workers, each of `gpus` whole GPUs or of the MIG profile mig,
 * queued through the lifecycle at submit_ms. */
static LifeJob *submit(World *w, const char *name, unsigned workers, unsigned gpus, const char *mig,
                       int64_t estimate_ms, int64_t submit_ms)
{
    assert_true(w->n_jobs < MAX_JOBS);
    size_t i = w->n_jobs++;
    JobSpec *s = &w->specs[i];
    job_spec_init(s);
    s->name = (char *)name;
    s->team = (char *)"ml";
    s->workers = workers;
    s->req = mig ? REQ_MIG : REQ_GPUS;
    s->gpus = (uint16_t)gpus;
    s->mig = (char *)mig;
    s->preemptible = true;
    s->duration_estimate_ms = estimate_ms;
    s->submit_ms = submit_ms;
    LifeJob *j = &w->jobs[i];
    *j = (LifeJob){.sj = &w->sched_jobs[i],
                   .spec = s,
                   .exit_code = -1,
                   .start_ms = -1,
                   .end_ms = -1,
                   .checkpoint_ms = -1,
                   .estimate_total_ms = estimate_ms,
                   .gpus_asked = (double)(workers * (mig ? 1 : gpus))};
    *j->sj = (SchedJob){.id = (uint32_t)i,
                        .team = TEAM_NONE,
                        .priority = s->priority,
                        .preemptible = true,
                        .movable = mig != NULL, /* a model server in a slice */
                        .submit_ms = submit_ms,
                        .grace_ms = SCHED_GRACE_MS,
                        .nominated = SCHED_NONE};
    Buf why = {0};
    if (request_from_job(w->c, s, &j->sj->req, &why) < 0)
        fail_msg("request: %s", buf_str(&why));
    buf_free(&why);
    assert_int_equal(life_enqueue(&w->life, j, submit_ms), 0);
    return j;
}

/* One scheduling cycle at now; its starts go to the lifecycle. */
static void cycle(World *w, int64_t now)
{
    SchedJob *running[MAX_JOBS];
    size_t n = 0;
    for (size_t i = 0; i < w->n_jobs; i++)
        if (w->jobs[i].sj->running)
            running[n++] = w->jobs[i].sj;
    SchedDecisions d = {0};
    assert_int_equal(sched_cycle(&w->sched, now, running, n, &d), 0);
    for (size_t k = 0; k < d.n; k++) {
        if (d.d[k].kind == SCHED_START)
            assert_int_equal(life_start(&w->life, &w->jobs[d.d[k].job], now), 0);
        if (d.d[k].kind == SCHED_MOVE)
            assert_int_equal(life_move_start(&w->life, &w->jobs[d.d[k].job], now), 0);
    }
    sched_decisions_free(&d);
}

static void all_running(World *w, LifeJob *j, int64_t now)
{
    for (size_t k = 0; k < j->n_workers; k++)
        assert_int_equal(life_worker_running(&w->life, j, k, now, now), 0);
    assert_int_equal(j->state, LIFE_RUNNING);
}

static const Seen *last_event(const World *w, uint32_t job, const char *type)
{
    for (size_t i = w->n_ev; i-- > 0;)
        if (w->ev[i].job == job && !strcmp(w->ev[i].type, type))
            return &w->ev[i];
    return NULL;
}

static double held_gpus(const World *w)
{
    return (double)w->c->used_units / GPU_UNITS;
}

/* A run from the start to its end: starting until every worker runs (the run's start is
 * its last worker's), then succeeded when all exited 0; the GPUs go back once. */
static void test_run_succeeds(void **state)
{
    (void)state;
    World *w = world_new();
    LifeJob *j = submit(w, "train", 2, 2, NULL, 3600000, 0);
    assert_int_equal(j->state, LIFE_PENDING);
    assert_true(j->sj->queued);
    cycle(w, 1000);
    assert_int_equal(j->state, LIFE_STARTING);
    assert_int_equal(j->run, 1);
    assert_int_equal(j->n_workers, 2);
    assert_string_equal(last_event(w, 0, "start")->detail, "on h-0, h-1");
    assert_int_equal(life_worker_running(&w->life, j, 0, 1200, 1300), 0);
    assert_int_equal(j->state, LIFE_STARTING);
    assert_int_equal(life_worker_running(&w->life, j, 1, 1500, 1600), 0);
    assert_int_equal(j->state, LIFE_RUNNING);
    assert_int_equal(j->start_ms, 1500);
    assert_true(held_gpus(w) == 4);
    assert_int_equal(life_worker_end(&w->life, j, 0, LIFE_WORKER_EXITED, 0, 0, false, 9000), 0);
    assert_int_equal(j->state, LIFE_RUNNING);
    assert_int_equal(w->released, 0);
    assert_int_equal(life_worker_end(&w->life, j, 1, LIFE_WORKER_EXITED, 0, 0, false, 9100), 0);
    assert_int_equal(j->state, LIFE_SUCCEEDED);
    assert_int_equal(j->end_ms, 9100);
    assert_int_equal(j->exit_code, 0);
    assert_int_equal(w->released, 1);
    assert_false(j->sj->running);
    assert_null(j->workers);
    assert_true(held_gpus(w) == 0);
    assert_string_equal(last_event(w, 0, "finish")->detail, "exit code 0");
    assert_int_equal(w->life.finished[LIFE_SUCCEEDED], 1);
    world_free(w);
}

/* A gang lives and dies whole: a worker that fails tears the others down, and the job
 * fails with the first bad worker's code once they are gone. */
static void test_gang_torn_down(void **state)
{
    (void)state;
    World *w = world_new();
    LifeJob *j = submit(w, "gang", 2, 2, NULL, NO_DURATION, 0);
    cycle(w, 1000);
    all_running(w, j, 2000);
    assert_int_equal(life_worker_end(&w->life, j, 1, LIFE_WORKER_EXITED, 3, 0, false, 5000), 0);
    assert_int_equal(j->state, LIFE_STOPPING);
    assert_int_equal(j->stop_mode, LIFE_STOP_TEARDOWN);
    assert_false(j->requeue);
    assert_string_equal(last_event(w, 0, "fail")->detail,
                        "a worker failed: the others are stopped");
    assert_true(j->sj->running); /* it holds its GPUs until the rest are gone */
    assert_int_equal(life_end_workers(&w->life, j, LIFE_WORKER_EXITED, 143, 6000), 0);
    assert_int_equal(j->state, LIFE_FAILED);
    assert_int_equal(j->exit_code, 3);
    assert_int_equal(w->released, 1);
    world_free(w);
}

/* A 1g.10gb worker that reached 15,000 MiB teaches its class: the class's waiting job is
 * resized where it waits, and the job itself runs again one size up. */
static void test_oom_runs_again_one_size_up(void **state)
{
    (void)state;
    World *w = world_new();
    LifeJob *a = submit(w, "serve-1", 1, 0, "1g.10gb", NO_DURATION, 0);
    cycle(w, 1000);
    all_running(w, a, 2000);
    /* the class's second job waits: every GPU is taken by whole-GPU work */
    LifeJob *big = submit(w, "fill", 1, 2, NULL, NO_DURATION, 1500);
    LifeJob *big2 = submit(w, "fill2", 1, 1, NULL, NO_DURATION, 1500);
    cycle(w, 2500);
    all_running(w, big, 3000);
    all_running(w, big2, 3000);
    LifeJob *b = submit(w, "serve-2", 1, 0, "1g.10gb", NO_DURATION, 3500);
    assert_int_equal(b->state, LIFE_PENDING);
    int hm = w->c->nodes[0].model;
    const GpuModel *m = &w->c->models[hm].m;
    assert_int_equal(b->sj->req.mig_profile[hm], catalog_profile_index(m, "1g.10gb"));

    assert_int_equal(life_worker_end(&w->life, a, 0, LIFE_WORKER_EXITED, 1, 15000, true, 4000), 0);
    assert_int_equal(w->learned, 1);
    assert_int_equal(w->life.ooms, 1);
    assert_int_equal(a->state, LIFE_PENDING);
    assert_true(a->sj->queued);
    assert_int_equal(a->exit_code, -1);
    assert_non_null(last_event(w, 0, "requeue"));
    assert_non_null(strstr(last_event(w, 0, "oom")->detail,
                           "rank 0 ran out of GPU memory in the 9984 MiB it was given (peak seen "
                           "15000 MiB)"));
    /* both are sized to the class's peak and a fifth: 1g.20gb */
    assert_int_equal(a->sj->req.mig_profile[hm], catalog_profile_index(m, "1g.20gb"));
    assert_int_equal(b->sj->req.mig_profile[hm], catalog_profile_index(m, "1g.20gb"));
    assert_non_null(strstr(last_event(w, b->sj->id, "resized")->detail, "now asks 18000 MiB"));
    world_free(w);
}

/* A class whose peak no GPU holds fails, with the reason every driver gives, and so do
 * the class's waiting jobs. */
static void test_oom_beyond_every_gpu_fails(void **state)
{
    (void)state;
    World *w = world_new();
    LifeJob *a = submit(w, "huge-1", 1, 1, NULL, NO_DURATION, 0);
    LifeJob *fill = submit(w, "other", 1, 2, NULL, NO_DURATION, 0);
    LifeJob *fill2 = submit(w, "other2", 1, 1, NULL, NO_DURATION, 0);
    cycle(w, 1000);
    all_running(w, a, 1500);
    all_running(w, fill, 1500);
    all_running(w, fill2, 1500);
    LifeJob *b = submit(w, "huge-2", 1, 1, NULL, NO_DURATION, 1600);
    assert_int_equal(b->state, LIFE_PENDING);
    assert_int_equal(life_worker_end(&w->life, a, 0, LIFE_WORKER_EXITED, 1, 81920, true, 2000), 0);
    assert_int_equal(a->state, LIFE_FAILED);
    assert_true(a->unfit);
    assert_string_equal(last_event(w, 0, "fail")->detail, LIFE_UNFIT_REASON);
    assert_int_equal(b->state, LIFE_FAILED);
    assert_false(b->sj->queued);
    assert_string_equal(last_event(w, b->sj->id, "fail")->detail, LIFE_UNFIT_REASON);
    assert_int_equal(w->life.unfit, 2);
    world_free(w);
}

/* A preempted run holds its GPUs until its workers are gone, then waits again with
 * what its checkpoint left of its estimate; a cancel overrides a preemption under way;
 * a pending job is cancelled at once. */
static void test_stop_requeue_and_cancel(void **state)
{
    (void)state;
    World *w = world_new();
    LifeJob *j = submit(w, "train", 2, 2, NULL, 3600000, 0);
    cycle(w, 1000);
    all_running(w, j, 1000);
    life_checkpoint(j, 601000, 600000);
    assert_int_equal(life_stop(&w->life, j, LIFE_STOP_PREEMPT, true, 700000), 0);
    assert_int_equal(j->state, LIFE_STOPPING);
    assert_true(j->sj->stopping);
    assert_true(j->sj->running);
    assert_int_equal(life_end_workers(&w->life, j, LIFE_WORKER_EXITED, 143, 710000), 0);
    assert_int_equal(j->state, LIFE_PENDING);
    assert_true(j->sj->queued);
    assert_int_equal(j->sj->estimate_ms, 3000000);
    assert_int_equal(j->sj->last_checkpoint_ms, 601000);
    assert_true(j->attained_base_ms > 0);

    cycle(w, 720000);
    assert_int_equal(j->state, LIFE_STARTING);
    assert_int_equal(j->run, 2);
    assert_int_equal(life_stop(&w->life, j, LIFE_STOP_PREEMPT, true, 730000), 0);
    assert_int_equal(life_stop(&w->life, j, LIFE_STOP_CANCEL, false, 731000), 0);
    assert_int_equal(life_stop(&w->life, j, LIFE_STOP_PREEMPT, true, 732000), 0);
    assert_int_equal(j->stop_mode, LIFE_STOP_CANCEL);
    assert_int_equal(life_end_workers(&w->life, j, LIFE_WORKER_GONE, -1, 733000), 0);
    assert_int_equal(j->state, LIFE_CANCELLED);
    const Seen *cancelled = last_event(w, 0, "cancelled");
    assert_non_null(cancelled);
    assert_string_equal(cancelled->detail, "");

    LifeJob *p = submit(w, "later", 1, 1, NULL, NO_DURATION, 740000);
    assert_int_equal(life_stop(&w->life, p, LIFE_STOP_CANCEL, false, 741000), 0);
    assert_int_equal(p->state, LIFE_CANCELLED);
    assert_false(p->sj->queued);
    world_free(w);
}

/* A node lost with a worker of the run: the run is torn down and queued again, once the
 * workers elsewhere are gone too. */
static void test_node_gone_requeues(void **state)
{
    (void)state;
    World *w = world_new();
    LifeJob *j = submit(w, "gang", 2, 2, NULL, NO_DURATION, 0);
    cycle(w, 1000);
    all_running(w, j, 1000);
    assert_int_equal(
        life_node_gone(&w->life, j, j->workers[1].node, "node h-1 stopped answering", 5000), 0);
    assert_string_equal(last_event(w, 0, "lost")->detail, "node h-1 stopped answering");
    assert_int_equal(j->state, LIFE_STOPPING);
    assert_true(j->requeue);
    assert_true(life_on_node(j, j->workers[0].node, true));
    assert_false(life_on_node(j, j->workers[1].node, false));
    assert_int_equal(life_worker_end(&w->life, j, 0, LIFE_WORKER_EXITED, 143, 0, false, 6000), 0);
    assert_int_equal(j->state, LIFE_PENDING);
    assert_true(j->sj->queued);
    world_free(w);
}

/* What the driver's sink fails with stops the step and comes back from it. */
static void test_sink_error_returned(void **state)
{
    (void)state;
    World *w = world_new();
    LifeJob *j = submit(w, "train", 1, 1, NULL, NO_DURATION, 0);
    cycle(w, 1000);
    all_running(w, j, 1000);
    w->fail_release = -ENOMEM;
    assert_int_equal(life_end_workers(&w->life, j, LIFE_WORKER_EXITED, 0, 2000), -ENOMEM);
    assert_int_equal(w->released, 1);
    assert_int_equal(j->state, LIFE_RUNNING); /* not closed without its charge */
    world_free(w);
}

/* One node of two H100s, GPU 0 holding one idle 1g.10gb at slot 0 and GPU 1 two at slots
 * 0 and 1; three model servers in them (s0 alone on GPU 0), and at 10 minutes a
 * whole-GPU job that cannot start: the core moves s0 off GPU 0 (test_sched.c says why). */
static World *moving_world(LifeJob **s0)
{
    World *w = world_of(1);
    const GpuModel *m = &w->c->models[w->c->nodes[0].model].m;
    int p = catalog_profile_index(m, "1g.10gb");
    assert_true(p >= 0);
    const unsigned at[3][2] = {{0, 0}, {1, 0}, {1, 1}};
    for (size_t k = 0; k < 3; k++) {
        MigLayout l = node_gpu_c(w->c, &w->c->nodes[0], at[k][0])->mig;
        l.profile_at[at[k][1]] = (uint8_t)p;
        assert_int_equal(cluster_set_mig(w->c, 0, at[k][0], &l), 0);
    }
    const char *names[3] = {"serve-a", "serve-b", "serve-c"};
    for (size_t k = 0; k < 3; k++)
        submit(w, names[k], 1, 0, "1g.10gb", NO_DURATION, (int64_t)k);
    cycle(w, 0);
    for (size_t k = 0; k < 3; k++)
        all_running(w, &w->jobs[k], 0);
    *s0 = &w->jobs[0];
    assert_int_equal((*s0)->sj->pl.workers[0].grants[0].index, 0);
    submit(w, "whole", 1, 1, NULL, NO_DURATION, 600000);
    cycle(w, 600000);
    return w;
}

/* A move begins as the next run beside the old worker, commits when the replacement
 * runs (it is worker 0 now), and retires the old worker once it is gone: only then does
 * the core let go of the old allocation, and the whole-GPU job starts. */
static void test_move_commits_then_retires(void **state)
{
    (void)state;
    LifeJob *s0;
    World *w = moving_world(&s0);
    assert_int_equal(s0->move, LIFE_MOVE_STARTING);
    assert_true(s0->sj->moving);
    assert_int_equal(s0->run, 2);
    assert_int_equal(s0->shadow.run, 2);
    assert_int_equal(s0->shadow.state, LIFE_WORKER_ASSIGNED);
    assert_string_equal(last_event(w, 0, "move")->detail,
                        "from h-0 to h-0, to empty a GPU for whole-GPU work");
    assert_string_equal(last_event(w, 0, "start")->detail, "on h-0");
    assert_int_equal(life_move_progress(&w->life, s0, 610000), 0);
    assert_int_equal(s0->move, LIFE_MOVE_STARTING); /* nothing reported yet */

    s0->shadow.state = LIFE_WORKER_RUNNING;
    s0->shadow.start_ms = 620000;
    assert_int_equal(life_move_progress(&w->life, s0, 621000), 0);
    assert_int_equal(s0->move, LIFE_MOVE_RETIRING);
    assert_int_equal(s0->workers[0].run, 2);
    assert_int_equal(s0->shadow.state, LIFE_WORKER_RUNNING); /* the old one, told to stop */
    assert_int_equal(s0->start_ms, 620000);
    assert_non_null(last_event(w, 0, "moved"));
    assert_int_equal(w->moves_done, 0);

    s0->shadow.state = LIFE_WORKER_EXITED;
    assert_int_equal(life_move_progress(&w->life, s0, 630000), 0);
    assert_int_equal(s0->move, LIFE_MOVE_NONE);
    assert_int_equal(w->moves_done, 1);
    assert_false(s0->sj->moving);
    assert_int_equal(s0->state, LIFE_RUNNING);
    cycle(w, 640000);
    assert_int_equal(w->jobs[3].state, LIFE_STARTING);
    world_free(w);
}

/* A replacement that cannot start is abandoned: the job keeps its old worker and
 * allocation, and its run number stays used. */
static void test_move_abandoned(void **state)
{
    (void)state;
    LifeJob *s0;
    World *w = moving_world(&s0);
    assert_int_equal(s0->move, LIFE_MOVE_STARTING);
    s0->shadow.state = LIFE_WORKER_FAILED;
    assert_int_equal(life_move_progress(&w->life, s0, 610000), 0);
    assert_int_equal(s0->move, LIFE_MOVE_NONE);
    assert_int_equal(w->moves_abandoned, 1);
    assert_false(s0->sj->moving);
    assert_int_equal(s0->sj->pl.workers[0].grants[0].index, 0);
    assert_int_equal(s0->workers[0].state, LIFE_WORKER_RUNNING); /* the old worker serves on */
    assert_int_equal(s0->run, 2);
    assert_string_equal(last_event(w, 0, "move-failed")->detail, "its replacement could not start");
    assert_int_equal(s0->state, LIFE_RUNNING);
    world_free(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_run_succeeds),
        cmocka_unit_test(test_gang_torn_down),
        cmocka_unit_test(test_oom_runs_again_one_size_up),
        cmocka_unit_test(test_oom_beyond_every_gpu_fails),
        cmocka_unit_test(test_stop_requeue_and_cancel),
        cmocka_unit_test(test_node_gone_requeues),
        cmocka_unit_test(test_sink_error_returned),
        cmocka_unit_test(test_move_commits_then_retires),
        cmocka_unit_test(test_move_abandoned),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
