/* sched_world.h: the world the scheduling cycle's tests (test_sched.c, test_reason.c)
 * drive: a cluster built by the test, a PlaceCtx, SchedJob structs from JobArgs,
 * sched_cycle at a time the test picks, and the decisions applied as a caller would (a
 * started job joins the running list; a finished one is released). Include after
 * cmocka.h and sched_fixture.h; MAX_JOBS may be set before. */
#pragma once

#include "core/place.h"
#include "core/sched.h"
#include "util/rng.h"

#ifndef MAX_JOBS
#define MAX_JOBS 32
#endif

/* ---- the world: a cluster, a placer, a scheduler and the caller's jobs ---- */

typedef struct World {
    Cluster *c;
    Rng rng;
    PlaceCtx ctx;
    Sched s;
    SchedJob jobs[MAX_JOBS];
    size_t n_jobs;
    SchedJob *running[MAX_JOBS]; /* every job holding an allocation, in start order */
    size_t n_running;
    SchedDecisions d; /* the last cycle's */
    int64_t now;      /* the last cycle's time */
} World;

static inline void add_pool_of(Cluster *c, const char *name, const char *model, Tier tier,
                               unsigned gpus, unsigned nodes, bool mig)
{
    fixture_add_pool(c, name, model, tier, gpus, nodes, mig);
}

/* A pool of `nodes` owned H100 nodes of `gpus` GPUs each. */
static inline void add_pool(Cluster *c, const char *name, unsigned gpus, unsigned nodes, bool mig)
{
    add_pool_of(c, name, "H100", TIER_OWNED, gpus, nodes, mig);
}

static inline void add_team(Cluster *c, const char *name, double guaranteed, double burst)
{
    fixture_add_team(c, name, guaranteed, burst);
}

static inline Cluster *new_cluster(void)
{
    Cluster *c = cluster_new("t");
    assert_non_null(c);
    return c;
}

static inline void world_init(World *w, Cluster *c, const char *policy, const SchedConfig *cfg)
{
    memset(w, 0, sizeof(*w));
    w->c = c;
    rng_seed(&w->rng, 1);
    const Policy *p = policy_find(policy);
    assert_non_null(p);
    assert_int_equal(place_ctx_init(&w->ctx, c, p, &w->rng, NULL, NULL), 0);
    assert_int_equal(sched_init(&w->s, c, &w->ctx, cfg, 1), 0);
}

static inline void world_free(World *w)
{
    for (size_t i = 0; i < w->n_jobs; i++) {
        placement_free(&w->jobs[i].pl);
        placement_free(&w->jobs[i].moved_from);
    }
    sched_decisions_free(&w->d);
    sched_free(&w->s);
    place_ctx_free(&w->ctx);
    cluster_free(w->c);
    memset(w, 0, sizeof(*w));
}

/* Each test gets a World in *state; the teardown frees what a failed assertion left. */
static inline int world_setup(void **state)
{
    *state = calloc(1, sizeof(World));
    return *state ? 0 : -1;
}

static inline int world_teardown(void **state)
{
    World *w = *state;
    if (w->c)
        world_free(w);
    free(w);
    return 0;
}

static inline SchedJob *job(World *w, JobArgs a)
{
    assert_true(w->n_jobs < MAX_JOBS);
    SchedJob *j = &w->jobs[w->n_jobs];
    *j = fixture_job(w->c, (uint32_t)w->n_jobs, a);
    w->n_jobs++;
    return j;
}

static inline SchedJob *submit(World *w, JobArgs a)
{
    SchedJob *j = job(w, a);
    assert_int_equal(sched_enqueue(&w->s, j), 0);
    return j;
}

/* One cycle at now; started jobs join the running list (the core applied them). */
static inline void cycle(World *w, int64_t now)
{
    w->d.n = 0;
    w->now = now;
    assert_int_equal(sched_cycle(&w->s, now, w->running, w->n_running, &w->d), 0);
    for (size_t k = 0; k < w->d.n; k++) {
        const SchedDecision *d = &w->d.d[k];
        if (d->kind != SCHED_START)
            continue;
        assert_true(d->job < w->n_jobs);
        SchedJob *j = &w->jobs[d->job];
        for (size_t e = k + 1; e < w->d.n; e++)
            if (w->d.d[e].kind == SCHED_START && w->d.d[e].job == d->job)
                fail_msg("job %u started twice in the cycle at %lld", j->id, (long long)now);
        for (size_t i = 0; i < w->n_running; i++)
            if (w->running[i] == j)
                fail_msg("job %u started at %lld while it holds an allocation", j->id,
                         (long long)now);
        assert_true(j->running);
        assert_false(j->queued);
        if (j->pl.n_workers != j->req.workers)
            fail_msg("job %u started with %zu workers placed; it has %u", j->id, j->pl.n_workers,
                     j->req.workers);
        assert_true(w->n_running < MAX_JOBS);
        w->running[w->n_running++] = j;
    }
    assert_true(cluster_consistent(w->c));
}

/* The job stopped at t: release it and drop it from the running list. */
static inline void finish_at(World *w, SchedJob *j, int64_t t)
{
    size_t keep = 0;
    bool found = false;
    for (size_t i = 0; i < w->n_running; i++) {
        if (w->running[i] == j)
            found = true;
        else
            w->running[keep++] = w->running[i];
    }
    assert_true(found);
    w->n_running = keep;
    sched_release(&w->s, j, t);
    assert_true(cluster_consistent(w->c));
}

/* The job ends at the last cycle's time. */
static inline void finish(World *w, SchedJob *j)
{
    finish_at(w, j, w->now);
}

static inline size_t count(const World *w, SchedDecisionKind kind)
{
    size_t n = 0;
    for (size_t k = 0; k < w->d.n; k++)
        n += w->d.d[k].kind == kind;
    return n;
}

static inline bool started(const World *w, const SchedJob *j)
{
    for (size_t k = 0; k < w->d.n; k++)
        if (w->d.d[k].kind == SCHED_START && w->d.d[k].job == j->id)
            return true;
    return false;
}

static inline bool preempted_for(const World *w, const SchedJob *victim, const SchedJob *for_job)
{
    for (size_t k = 0; k < w->d.n; k++) {
        const SchedDecision *d = &w->d.d[k];
        if (d->kind == SCHED_PREEMPT && d->job == victim->id && d->for_job == for_job->id)
            return true;
    }
    return false;
}

/* The node of a started one-worker job. */
static inline uint32_t node_of(const SchedJob *j)
{
    assert_int_equal(j->pl.n_workers, 1);
    return j->pl.workers[0].node;
}
