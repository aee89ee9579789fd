/* sched_fixture.h: what the scheduler's tests (test_sched.c, test_preempt.c) build their
 * worlds from: pools of NVSwitch nodes of a catalogue model, teams, and scheduler jobs
 * described by a few fields (JobArgs; zero fields take the defaults in brackets).
 * Include after cmocka.h. */
#pragma once

#include "core/cluster.h"
#include "core/job.h"
#include "core/sched.h"
#include "util/buf.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A pool of `nodes` nodes (NVSwitch) of `gpus` GPUs of a catalogue model, in a tier. */
static inline void fixture_add_pool(Cluster *c, const char *name, const char *model, Tier tier,
                                    unsigned gpus, unsigned nodes, bool mig)
{
    int mi = cluster_model(c, model, 16384);
    assert_true(mi >= 0);
    assert_true(c->models[mi].in_catalog);
    Pool p = {.name = (char *)name,
              .tier = tier,
              .nodes = nodes,
              .model = (uint8_t)mi,
              .gpus = (uint8_t)gpus,
              .interconnect = IC_NVSWITCH,
              .mig = mig,
              .cpu_milli = 64000,
              .memory_mib = 512 * 1024};
    mig_layout_clear(&p.initial_mig);
    int pi = cluster_add_pool(c, &p);
    assert_true(pi >= 0);
    assert_int_equal(cluster_add_pool_nodes(c, (uint32_t)pi), 0);
}

static inline void fixture_add_team(Cluster *c, const char *name, double guaranteed, double burst)
{
    Team t = {
        .name = (char *)name, .guaranteed_gpus = guaranteed, .burst_gpus = burst, .weight = 1};
    assert_true(cluster_add_team(c, &t) >= 0);
}

/* A job as the tests describe it. */
typedef struct JobArgs {
    ReqKind req;        /* [REQ_GPUS] */
    unsigned gpus;      /* per worker [1] */
    unsigned workers;   /* [1] */
    const char *mig;    /* REQ_MIG profile */
    uint64_t mem_mib;   /* REQ_MEMORY: GPU memory */
    unsigned milli;     /* REQ_FRACTION: thousandths of a GPU */
    const char *model;  /* the one GPU model it allows [any] */
    const char *prio;   /* priority name ["normal"] */
    const char *team;   /* team name [none: TEAM_NONE] */
    bool preemptible;   /* */
    int64_t ckpt_ms;    /* checkpoint interval [0: none] */
    bool movable;       /* a service that can be moved (consolidate.h) */
    int64_t submit_ms;  /* */
    int64_t est_ms;     /* remaining estimate [0: unknown, NO_DURATION] */
    int64_t grace_ms;   /* */
    double attained_ms; /* Tiresias: GPU ms run so far */
} JobArgs;

/* The scheduler's job `id` for a (1 CPU, 4 GiB per worker), resolved against c. */
static inline SchedJob fixture_job(const Cluster *c, uint32_t id, JobArgs a)
{
    JobSpec js;
    job_spec_init(&js);
    js.req = (uint8_t)(a.req ? a.req : REQ_GPUS);
    js.gpus = (uint16_t)(a.gpus ? a.gpus : 1);
    js.workers = a.workers ? a.workers : 1;
    js.mig = a.mig ? strdup(a.mig) : NULL;
    js.gpu_memory_mib = a.mem_mib;
    js.fraction_milli = (uint16_t)a.milli;
    if (a.model) {
        js.gpu_models = calloc(1, sizeof(*js.gpu_models));
        assert_non_null(js.gpu_models);
        js.gpu_models[0] = strdup(a.model);
        js.n_gpu_models = 1;
    }
    js.cpu_milli = 1000;
    js.memory_mib = 4096;
    js.preemptible = a.preemptible;
    js.checkpoint_interval_ms = a.ckpt_ms;
    int prio = priority_from_name(a.prio ? a.prio : "normal");
    assert_true(prio >= 0);
    js.priority = (uint8_t)prio;
    uint32_t team = TEAM_NONE;
    if (a.team) {
        int t = cluster_find_team(c, a.team);
        assert_true(t >= 0);
        team = (uint32_t)t;
    }
    Request r;
    Buf why = {0};
    if (request_from_job(c, &js, &r, &why) != 0)
        fail_msg("request_from_job: %s", buf_str(&why));
    buf_free(&why);
    job_spec_free(&js);
    return (SchedJob){.id = id,
                      .team = team,
                      .priority = (uint8_t)prio,
                      .preemptible = a.preemptible,
                      .movable = a.movable,
                      .nominated = SCHED_NONE,
                      .submit_ms = a.submit_ms,
                      .estimate_ms = a.est_ms ? a.est_ms : NO_DURATION,
                      .grace_ms = a.grace_ms,
                      .attained_gpu_ms = a.attained_ms,
                      .req = r};
}
