/* test_sched_faults.c: sched_cycle's contract when an allocation fails part-way
 * (core/sched.h): every change the cycle made that its caller must carry out is listed in
 * its decisions, and nothing it did not list was applied. The process's allocations are
 * interposed (fault_malloc.h) and the Nth one made on the test's thread fails, once or
 * from then on, for every N the cycle reaches.
 *
 * The scene, on two 8-GPU H100 nodes and a MIG node of 2 H100s, set up without faults:
 * two low-priority preemptible 8-GPU jobs fill the whole-GPU nodes, three movable model
 * servers hold 1g.10gb slices on the MIG node (as in test_sched.c's consolidation
 * scene). An hour later a production 8-GPU job (it preempts), a 2x8 gang (it reserves),
 * two 1-GPU jobs (whole GPUs wanted: servers are moved) and a 1g.10gb job (it starts)
 * arrive. The cycle without faults makes a start, a preemption and a move; with a fault
 * at N it returns 0 or -ENOMEM, and then:
 *   - the jobs holding an allocation are those running before and those with a
 *     SCHED_START, each with all its workers; a job not started holds nothing and waits;
 *   - the jobs stopping are those stopping before and those with a SCHED_PREEMPT;
 *   - the jobs moving are those with a SCHED_MOVE;
 *   - every GPU whose drain mark changed has its SCHED_DRAIN or SCHED_UNDRAIN, or is one
 *     a listed move emptied;
 *   - the cluster's counters are consistent and hold exactly what the jobs hold;
 *   - a next cycle without faults runs on it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "fault_fixture.h"

#include "fault_malloc.h"

#include "sched_fixture.h"

#include "core/cluster.h"
#include "core/job.h"
#include "core/place.h"
#include "core/sched.h"
#include "util/buf.h"
#include "util/rng.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define MAX_JOBS 16
#define HOUR_MS  INT64_C(3600000)

#include "sched_world.h"

#define MAX_GPUS 32

typedef struct Arm {
    int64_t at;
    bool persistent;
} Arm;

/* What the scene held before the faulted cycle. */
typedef struct Before {
    bool running[MAX_JOBS], stopping[MAX_JOBS];
    bool draining[MAX_GPUS];
} Before;

static void carve(Cluster *c, unsigned node, unsigned gpu, const char *profile, unsigned start)
{
    int p = catalog_profile_index(node_model(c, &c->nodes[node]), profile);
    assert_true(p >= 0);
    MigLayout l = node_gpu_c(c, &c->nodes[node], gpu)->mig;
    l.profile_at[start] = (uint8_t)p;
    assert_int_equal(cluster_set_mig(c, node, gpu, &l), 0);
}

/* The scene, up to the arrivals of the hour (no fault armed). */
static void scene(World *w)
{
    Cluster *c = new_cluster();
    add_pool(c, "h", 8, 2, false);
    add_pool(c, "m", 2, 1, true);
    /* the MIG node is node 2 */
    carve(c, 2, 0, "1g.10gb", 0);
    carve(c, 2, 1, "1g.10gb", 0);
    carve(c, 2, 1, "1g.10gb", 1);
    SchedConfig cfg;
    sched_config_gpuorch(&cfg);
    world_init(w, c, "first-fit", &cfg);
    for (int i = 0; i < 2; i++)
        submit(w, (JobArgs){.gpus = 8, .prio = "low", .preemptible = true, .ckpt_ms = 60000});
    for (int i = 0; i < 3; i++)
        submit(w, (JobArgs){.req = REQ_MIG, .mig = "1g.10gb", .submit_ms = i, .movable = true});
    cycle(w, 0);
    assert_int_equal(w->n_running, 5);
    submit(w, (JobArgs){.gpus = 8, .prio = "production", .submit_ms = HOUR_MS});
    submit(w, (JobArgs){.gpus = 8, .workers = 2, .submit_ms = HOUR_MS + 1});
    submit(w, (JobArgs){.gpus = 1, .submit_ms = HOUR_MS + 2});
    submit(w, (JobArgs){.gpus = 1, .submit_ms = HOUR_MS + 3});
    submit(w, (JobArgs){.req = REQ_MIG, .mig = "1g.10gb", .submit_ms = HOUR_MS + 4});
}

static bool listed(const World *w, SchedDecisionKind kind, uint32_t job)
{
    for (size_t k = 0; k < w->d.n; k++)
        if (w->d.d[k].kind == kind && w->d.d[k].job == job)
            return true;
    return false;
}

static bool listed_gpu(const World *w, uint32_t node, unsigned gpu)
{
    for (size_t k = 0; k < w->d.n; k++) {
        const SchedDecision *d = &w->d.d[k];
        if ((d->kind == SCHED_DRAIN || d->kind == SCHED_UNDRAIN) && d->node == node &&
            d->gpu == gpu)
            return true;
    }
    return false;
}

/* A listed move left the GPU: the consolidation emptied it (and marked it draining). */
static bool moved_off(const World *w, uint32_t node, unsigned gpu)
{
    for (size_t i = 0; i < w->n_jobs; i++) {
        const SchedJob *j = &w->jobs[i];
        if (!j->moving || !listed(w, SCHED_MOVE, j->id))
            continue;
        for (size_t k = 0; k < j->moved_from.n_workers; k++) {
            const WorkerAlloc *wa = &j->moved_from.workers[k];
            for (unsigned g = 0; g < wa->n_grants; g++)
                if (wa->node == node && wa->grants[g].index == gpu)
                    return true;
        }
    }
    return false;
}

static uint64_t placement_units_sum(const Cluster *c, const Placement *pl)
{
    uint64_t u = 0;
    for (size_t k = 0; k < pl->n_workers; k++)
        u += worker_units(c, &pl->workers[k]);
    return u;
}

/* The contract, checked on the world after a cycle that returned r. */
static void check_contract(World *w, const Before *b, int r, const char *what)
{
    if (r != 0 && r != -ENOMEM)
        fail_msg("%s: sched_cycle returned %d", what, r);
    Cluster *c = w->c;
    uint64_t held = 0;
    for (size_t i = 0; i < w->n_jobs; i++) {
        SchedJob *j = &w->jobs[i];
        bool start = listed(w, SCHED_START, j->id);
        if (start && b->running[i])
            fail_msg("%s: job %zu was running, yet started again", what, i);
        if (j->running != (b->running[i] || start))
            fail_msg("%s: job %zu %s an allocation, %s", what, i,
                     j->running ? "holds" : "does not hold",
                     start           ? "started"
                     : b->running[i] ? "running before"
                                     : "not started");
        if (j->running && j->pl.n_workers != j->req.workers)
            fail_msg("%s: job %zu holds %zu of its %u workers", what, i, j->pl.n_workers,
                     j->req.workers);
        if (!j->running && (j->pl.n_workers || !j->queued))
            fail_msg("%s: job %zu not started holds %zu workers (queued %d)", what, i,
                     j->pl.n_workers, j->queued);
        bool stop = listed(w, SCHED_PREEMPT, j->id);
        if (j->stopping != (b->stopping[i] || stop))
            fail_msg("%s: job %zu %s stopping, %s", what, i, j->stopping ? "is" : "is not",
                     stop ? "preempted" : "not preempted");
        if (j->moving != listed(w, SCHED_MOVE, j->id))
            fail_msg("%s: job %zu %s moving, %s", what, i, j->moving ? "is" : "is not",
                     j->moving ? "no move listed" : "a move listed");
        held += placement_units_sum(c, &j->pl) + placement_units_sum(c, &j->moved_from);
    }
    uint64_t used = 0;
    for (size_t n = 0; n < c->n_nodes; n++)
        for (unsigned g = 0; g < c->nodes[n].n_gpus; g++) {
            const Gpu *gpu = node_gpu_c(c, &c->nodes[n], g);
            used += gpu->used_units;
            bool was = b->draining[c->nodes[n].gpu0 + g];
            if (gpu->draining != was && !listed_gpu(w, (uint32_t)n, g) &&
                !moved_off(w, (uint32_t)n, g))
                fail_msg("%s: GPU %u of node %zu %s draining, and no decision says so", what, g, n,
                         gpu->draining ? "began" : "stopped");
        }
    if (!cluster_consistent(c))
        fail_msg("%s: the cluster's counters are inconsistent", what);
    if (used != held)
        fail_msg("%s: the GPUs hold %llu units, the jobs %llu", what, (unsigned long long)used,
                 (unsigned long long)held);
}

/* The faulted cycle on a new scene: what it returned. */
static int faulted_cycle(World *w, const Arm *arm, Before *b)
{
    scene(w);
    assert_true(w->c->n_gpus <= MAX_GPUS);
    *b = (Before){0};
    for (size_t i = 0; i < w->n_jobs; i++) {
        b->running[i] = w->jobs[i].running;
        b->stopping[i] = w->jobs[i].stopping;
    }
    for (size_t n = 0; n < w->c->n_nodes; n++)
        for (unsigned g = 0; g < w->c->nodes[n].n_gpus; g++)
            b->draining[w->c->nodes[n].gpu0 + g] = node_gpu_c(w->c, &w->c->nodes[n], g)->draining;
    w->d.n = 0;
    w->now = HOUR_MS;
    if (arm)
        fault_arm(FAULT_PROCESS, arm->at, arm->persistent);
    int r = sched_cycle(&w->s, HOUR_MS, w->running, w->n_running, &w->d);
    fault_disarm();
    return r;
}

/* The jobs the faulted cycle started join the running list, as a caller carries them
 * out; a cycle without faults then runs on what is left. */
static void cycle_after(World *w)
{
    for (size_t k = 0; k < w->d.n; k++)
        if (w->d.d[k].kind == SCHED_START)
            w->running[w->n_running++] = &w->jobs[w->d.d[k].job];
    cycle(w, HOUR_MS + 1000);
}

static void test_scene_decides_every_kind(void **state)
{
    World *w = *state;
    Before b;
    int r = faulted_cycle(w, NULL, &b);
    assert_int_equal(r, 0);
    check_contract(w, &b, r, "no fault");
    /* the scene reaches every decision that changes who holds what */
    assert_true(count(w, SCHED_START) >= 1);
    assert_true(count(w, SCHED_PREEMPT) >= 1);
    assert_true(count(w, SCHED_MOVE) >= 1);
    cycle_after(w);
    world_free(w);
}

static void fault_loop(World *w, bool persistent)
{
    int64_t n, failed = 0;
    for (n = 1;; n++) {
        Arm arm = {n, persistent};
        Before b;
        int r = faulted_cycle(w, &arm, &b);
        bool reached = fault_reached();
        char what[64];
        snprintf(what, sizeof(what), "%s fault at allocation %lld",
                 persistent ? "persistent" : "transient", (long long)n);
        check_contract(w, &b, r, what);
        failed += r < 0;
        cycle_after(w);
        world_free(w);
        if (!reached)
            break;
    }
    print_message("%s: N from 1 to %lld, %lld cycles failed part-way\n",
                  persistent ? "persistent" : "transient", (long long)n, (long long)failed);
    /* the loop ran past the cycle's first allocations: it can fail, and did */
    assert_true(n > 10);
    assert_true(failed > 0);
}

static void test_transient(void **state)
{
    fault_loop(*state, false);
}

static void test_persistent(void **state)
{
    fault_loop(*state, true);
}

int main(void)
{
    in_main = true;
    if (fault_install() < 0)
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_scene_decides_every_kind, world_setup, world_teardown),
        cmocka_unit_test_setup_teardown(test_transient, world_setup, world_teardown),
        cmocka_unit_test_setup_teardown(test_persistent, world_setup, world_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
