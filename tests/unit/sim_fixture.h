/* sim_fixture.h: the time-mode simulator's tests (test_sim_time.c, test_sim_spot.c,
 * test_learn.c) build their worlds from here: a cluster from YAML and jobs from the
 * simulator's CSV, prepared for a run with the options the test gives. Include after
 * cmocka.h. */
#pragma once

#include "core/cluster.h"
#include "core/job.h"
#include "sim/sim.h"
#include "spec/spec.h"
#include "util/buf.h"

#include <string.h>

typedef struct World {
    Cluster *c;
    JobList jobs;
    SimInput in;
} World;

static inline void fixture_world(World *w, const char *cluster_yaml, const char *jobs_csv,
                                 SimOptions opt)
{
    Buf err = {0};
    *w = (World){0};
    int r = spec_parse_cluster_yaml(cluster_yaml, strlen(cluster_yaml), "c.yaml", &w->c, &err);
    if (r)
        print_message("%s\n", buf_str(&err));
    assert_int_equal(r, 0);
    r = spec_parse_jobs_csv(jobs_csv, strlen(jobs_csv), "j.csv", &w->jobs, &err);
    if (r)
        print_message("%s\n", buf_str(&err));
    assert_int_equal(r, 0);
    buf_free(&err);
    w->in = (SimInput){.cluster = w->c, .jobs = &w->jobs, .trace_name = "j", .opt = opt};
    assert_int_equal(sim_prepare(&w->in), 0);
}

static inline void world_free(World *w)
{
    sim_input_free(&w->in);
    job_list_free(&w->jobs);
    cluster_free(w->c);
}
