/* test_admit.c: the admission check (core/admit.c) on a small cluster worked by hand:
 * two reserved H100 nodes of 8 under leaf-0, an owned MIG-capable A100 node of 8 and
 * an on-demand L4 node of 4 under leaf-1, three teams. Each refusal class has a job
 * that produces it and the sentence it gets; the jobs that could run pass. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core/admit.h"
#include "spec/spec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const CLUSTER =
    "name: t\n"
    "switches:\n"
    "  - {name: spine-0}\n"
    "  - {name: leaf-0, parent: spine-0}\n"
    "  - {name: leaf-1, parent: spine-0}\n"
    "pools:\n"
    "  - {name: h100, tier: reserved, price_per_gpu_hour: 2.5, nodes: 2, leaves: [leaf-0],\n"
    "     node: {gpu_model: H100-80GB-SXM5, gpus: 8, interconnect: nvswitch,\n"
    "            fabric: infiniband-ndr, cpus: 192, memory_gib: 2048}}\n"
    "  - {name: a100, tier: owned, nodes: 1, leaves: [leaf-1],\n"
    "     node: {gpu_model: A100-80GB, gpus: 8, interconnect: nvswitch, cpus: 128,\n"
    "            memory_gib: 1024, mig: true}}\n"
    "  - {name: l4, tier: on-demand, price_per_gpu_hour: 0.8, nodes: 1, leaves: [leaf-1],\n"
    "     node: {gpu_model: L4, gpus: 4, cpus: 48, memory_gib: 192}}\n"
    "teams:\n"
    "  - {name: search, guaranteed_gpus: 8, burst_gpus: 16, projects: [ranking, retrieval]}\n"
    "  - {name: research, guaranteed_gpus: 8, burst_gpus: 24, capacity: [reserved, owned]}\n"
    "  - {name: platform, guaranteed_gpus: 2, burst_gpus: 4}\n";

typedef struct World {
    Cluster *c;
    Learn learn;
} World;

static int setup(void **state)
{
    World *w = calloc(1, sizeof(*w));
    Buf err = {0};
    int r = spec_parse_cluster_yaml(CLUSTER, strlen(CLUSTER), "t.yaml", &w->c, &err);
    if (r < 0)
        fprintf(stderr, "%s\n", buf_str(&err));
    assert_int_equal(r, 0);
    buf_free(&err);
    *state = w;
    return 0;
}

static int teardown(void **state)
{
    World *w = *state;
    cluster_free(w->c);
    learn_free(&w->learn);
    free(w);
    return 0;
}

/* The verdict on one job written as YAML, its sentence in why. */
static int verdict(World *w, const char *yaml, unsigned flags, Buf *why)
{
    JobList jl = {0};
    Buf err = {0};
    int r = spec_parse_jobs_yaml(yaml, strlen(yaml), "job", &jl, &err);
    if (r < 0)
        fprintf(stderr, "%s\n", buf_str(&err));
    assert_int_equal(r, 0);
    assert_int_equal(jl.n, 1);
    buf_free(&err);
    buf_reset(why);
    int v = admit_job(w->c, &w->learn, &jl.jobs[0], flags, NULL, why);
    job_list_free(&jl);
    return v;
}

static void expect(World *w, const char *yaml, unsigned flags, int want, const char *said)
{
    Buf why = {0};
    int v = verdict(w, yaml, flags, &why);
    if (v != want || (said && !strstr(buf_str(&why), said)))
        fail_msg("job %s: verdict %d (want %d), said \"%s\" (want \"%s\")", yaml, v, want,
                 buf_str(&why), said ? said : "");
    if (want == ADMIT_OK && why.len)
        fail_msg("an admitted job was given a reason: %s", buf_str(&why));
    buf_free(&why);
}

static void test_admits_what_could_run(void **state)
{
    World *w = *state;
    expect(w, "{name: a, team: search, gpus: 1, command: [x]}", ADMIT_NEED_COMMAND, ADMIT_OK, NULL);
    /* three whole nodes of eight: the two H100 nodes and the A100 node */
    expect(w, "{name: g, team: research, workers: 3, gpus: 8, command: [x]}", ADMIT_NEED_COMMAND,
           ADMIT_OK, NULL);
    /* 2 x 8 under one leaf: leaf-0 */
    expect(w,
           "{name: l, team: search, workers: 2, gpus: 8, topology: {scope: leaf, mode: required}}",
           0, ADMIT_OK, NULL);
    /* 1g.10gb on the A100, the only pool that may be partitioned */
    expect(w, "{name: m, team: search, mig: 1g.10gb}", 0, ADMIT_OK, NULL);
    /* 56 slices: seven on each of the A100's eight GPUs */
    expect(w, "{name: s, team: research, workers: 56, mig: 1g.10gb, topology: {scope: node}}", 0,
           ADMIT_OK, NULL);
}

static void test_fields(void **state)
{
    World *w = *state;
    /* the readers insist on a name; a spec built another way is refused too */
    JobSpec nameless;
    job_spec_init(&nameless);
    Buf why = {0};
    assert_int_equal(admit_job(w->c, NULL, &nameless, 0, NULL, &why), ADMIT_BAD);
    assert_string_equal(buf_str(&why), "job: field 'name' is required");
    buf_free(&why);
    expect(w, "{name: a, team: search, gpus: 1}", ADMIT_NEED_COMMAND, ADMIT_BAD,
           "job a: field 'command' is required");
    expect(w, "{name: a, team: search, gpus: 1}", 0, ADMIT_OK, NULL);
    expect(w, "{name: a, gpus: 1}", 0, ADMIT_BAD,
           "field 'team' is required: the cluster has teams");
    expect(w, "{name: a, team: nobody, gpus: 1}", 0, ADMIT_BAD, "the cluster has no team 'nobody'");
}

static void test_what_the_team_may_not_have(void **state)
{
    World *w = *state;
    expect(w, "{name: a, team: search, project: vision, gpus: 1}", 0, ADMIT_FORBIDDEN,
           "job a: field 'project': team 'search' has no project 'vision' (its projects: "
           "ranking, retrieval)");
    expect(w, "{name: a, team: search, project: ranking, gpus: 1}", 0, ADMIT_OK, NULL);
    /* a team without projects takes any */
    expect(w, "{name: a, team: platform, project: whatever, gpus: 1}", 0, ADMIT_OK, NULL);
    expect(w, "{name: a, team: research, capacity: [reserved, on-demand], gpus: 1}", 0,
           ADMIT_FORBIDDEN,
           "job a: field 'capacity': team 'research' may use owned, reserved capacity, not "
           "on-demand");
    expect(w, "{name: a, team: research, capacity: reserved, gpus: 1}", 0, ADMIT_OK, NULL);
}

static void test_never_fits(void **state)
{
    World *w = *state;
    expect(w, "{name: big, team: research, workers: 10000, gpus: 8}", 0, ADMIT_NEVER,
           "job big cannot run on cluster t: its 10000 workers could never all run at once: every "
           "node it may use together holds at most 3 of them");
    expect(w, "{name: c, team: search, gpus: 1, cpus: 5000}", 0, ADMIT_NEVER,
           "job c cannot run on cluster t: it asks for 5000 CPUs per worker, and a node it may use "
           "has at most 192");
    expect(w, "{name: h, team: search, gpus: 1, memory: 4TiB}", 0, ADMIT_NEVER,
           "it asks for 4096 GiB of host memory per worker, and a node it may use has at most "
           "2048 GiB");
    expect(w, "{name: m, team: search, mig: 1g.10gb, gpu_models: [H100]}", 0, ADMIT_NEVER,
           "it asks for a MIG slice of profile 1g.10gb, and none of the pools it may use lets its "
           "GPUs be partitioned (h100 (reserved); a pool allows it with 'mig: true')");
    expect(w, "{name: m, team: search, mig: 1g.10gb, gpu_models: [L4]}", 0, ADMIT_NEVER,
           "MIG profile 1g.10gb exists on none of the allowed GPU models");
    expect(w, "{name: x, team: search, gpus: 1, gpu_models: [H200]}", 0, ADMIT_NEVER,
           "none of the GPU models it allows (H200) is in this cluster");
    expect(w, "{name: g, team: search, gpus: 16}", 0, ADMIT_NEVER, "16 GPUs per worker");
    /* 8 L4s per worker: only the 4-GPU L4 node has that model */
    expect(w, "{name: g, team: search, gpus: 8, gpu_models: [L4]}", 0, ADMIT_NEVER,
           "8 GPUs per worker");
    expect(w,
           "{name: s, team: search, gpus: 1, capacity: spot, preemptible: true,"
           " checkpoint: {interval: 30m}}",
           0, ADMIT_NEVER,
           "it may run on spot capacity, and the pools of the GPU models it may use are h100 "
           "(reserved), a100 (owned), l4 (on-demand)");
    expect(w, "{name: s, team: search, gpus: 1, capacity: spot}", 0, ADMIT_NEVER,
           "job s cannot run on cluster t: work that is not preemptible may not run on spot "
           "capacity (an interruption would lose it), and spot is all it allows");
    expect(w, "{name: f, team: search, gpus: 1, fabric: efa}", 0, ADMIT_NEVER,
           "no node has fabric 'efa'");
    /* fabric of the H100 pools only, on A100s */
    expect(w, "{name: f, team: search, gpus: 1, fabric: infiniband-ndr, gpu_models: [A100-80GB]}",
           0, ADMIT_NEVER,
           "it asks for fabric 'infiniband-ndr', which none of the pools it may "
           "use has (a100 (owned))");
    expect(w, "{name: p, team: search, priority: production, gpus: 1, capacity: spot}", 0,
           ADMIT_NEVER, "production jobs may not run on spot capacity");
}

/* On a cluster of spot nodes alone, work an interruption would lose has nowhere to go,
 * and the sentence says why; preemptible work that checkpoints is admitted. */
static void test_spot_only_cluster(void **state)
{
    World *w = *state;
    static const char spot[] = "name: s\n"
                               "pools:\n"
                               "  - {name: cheap, tier: spot, price_per_gpu_hour: 1, nodes: 2,\n"
                               "     node: {gpu_model: H100-80GB-SXM5, gpus: 8}}\n";
    cluster_free(w->c);
    w->c = NULL;
    Buf err = {0};
    assert_int_equal(spec_parse_cluster_yaml(spot, strlen(spot), "s.yaml", &w->c, &err), 0);
    buf_free(&err);
    expect(w, "{name: e, gpus: 1}", 0, ADMIT_NEVER,
           "it may run on owned, reserved, on-demand capacity, and the pools of the GPU models "
           "it may use are cheap (spot) (spot takes only preemptible work that checkpoints)");
    expect(w, "{name: t, gpus: 1, preemptible: true}", 0, ADMIT_NEVER,
           "(spot takes only preemptible work that checkpoints)");
    expect(w, "{name: t, gpus: 1, preemptible: true, checkpoint: {cost: 30s}}", 0, ADMIT_OK, NULL);
}

static void test_topology_and_burst(void **state)
{
    World *w = *state;
    expect(
        w,
        "{name: l, team: research, workers: 3, gpus: 8, topology: {scope: leaf, mode: required}}",
        0, ADMIT_NEVER,
        "its topology requires one leaf, and no leaf holds its 3 workers (the most one holds is "
        "2)");
    /* the same gang preferring a leaf is only slower */
    expect(w, "{name: l, team: research, workers: 3, gpus: 8, topology: {scope: leaf}}", 0,
           ADMIT_OK, NULL);
    expect(
        w,
        "{name: n, team: research, workers: 2, gpus: 4, topology: {scope: node, mode: required}}",
        0, ADMIT_OK, NULL);
    /* three of four GPUs on one node: each node holds two */
    expect(w,
           "{name: n, team: research, workers: 3, gpus: 4, topology: {scope: node, mode: "
           "required}}",
           0, ADMIT_NEVER, "no node holds its 3 workers (the most one holds is 2)");
    expect(w, "{name: b, team: platform, workers: 2, gpus: 4}", 0, ADMIT_NEVER,
           "it would hold 8 GPU-equivalents, more than team 'platform' may ever hold (its burst "
           "limit is 4)");
    expect(w, "{name: b, team: platform, workers: 1, gpus: 4}", 0, ADMIT_OK, NULL);
}

static void test_learned_memory(void **state)
{
    World *w = *state;
    /* the class ran out at 90 GiB: no GPU here has that much */
    assert_true(learn_oom(&w->learn, "search/serve", 90 * 1024, 80 * 1024) >= 0);
    expect(w, "{name: serve, team: search, gpu_memory: 10GiB}", 0, ADMIT_NEVER,
           "its workload class search/serve ran out of GPU memory and needs");
    expect(w, "{name: other, team: search, gpu_memory: 10GiB}", 0, ADMIT_OK, NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_admits_what_could_run, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fields, setup, teardown),
        cmocka_unit_test_setup_teardown(test_what_the_team_may_not_have, setup, teardown),
        cmocka_unit_test_setup_teardown(test_never_fits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_spot_only_cluster, setup, teardown),
        cmocka_unit_test_setup_teardown(test_topology_and_burst, setup, teardown),
        cmocka_unit_test_setup_teardown(test_learned_memory, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
