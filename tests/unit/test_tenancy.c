/* test_tenancy.c: teams as the scheduler sees them (core/tenancy.c), checked against
 * numbers worked out by hand. Guarantees and burst limits are GPU-equivalents times
 * GPU_UNITS; work without a known team gets no guarantee but may borrow the whole
 * cluster; a cluster without teams has no quotas at all. Fair-share usage is the
 * integral of what a team held, decayed with the configured half-life, so a team that
 * held U units for dt has U * h / ln 2 * (1 - 2^(-dt/h)) at the end of it, and halves
 * every h after; the key is the team's share of the usage over its share of the weights.
 * The scheduler orders whole classes of work by these numbers, so they are pinned
 * exactly here rather than only by the order they produce. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core/cluster.h"
#include "core/tenancy.h"

#include <math.h>

#define HOUR_MS   3600000
#define GPU       ((double)GPU_UNITS)
#define REL_ERROR 1e-9

/* A cluster of `nodes` H100 nodes of 4 GPUs and the given teams. */
typedef struct TeamArgs {
    const char *name;
    double guaranteed, burst, weight;
} TeamArgs;

static Cluster *cluster_with(unsigned nodes, const TeamArgs *teams, size_t n_teams)
{
    Cluster *c = cluster_new("t");
    assert_non_null(c);
    int mi = cluster_model(c, "H100", 16384);
    assert_true(mi >= 0);
    Pool p = {.name = "h",
              .nodes = nodes,
              .model = (uint8_t)mi,
              .gpus = 4,
              .interconnect = IC_NVSWITCH,
              .cpu_milli = 64000,
              .memory_mib = 512 * 1024};
    mig_layout_clear(&p.initial_mig);
    int pi = cluster_add_pool(c, &p);
    assert_true(pi >= 0);
    assert_int_equal(cluster_add_pool_nodes(c, (uint32_t)pi), 0);
    for (size_t i = 0; i < n_teams; i++) {
        Team t = {.name = (char *)teams[i].name,
                  .guaranteed_gpus = teams[i].guaranteed,
                  .burst_gpus = teams[i].burst,
                  .weight = teams[i].weight};
        assert_int_equal(cluster_add_team(c, &t), (int)i);
    }
    return c;
}

static void assert_near(double actual, double expected)
{
    double tol = REL_ERROR * fmax(1.0, fabs(expected));
    if (!(fabs(actual - expected) <= tol))
        fail_msg("got %.17g, expected %.17g", actual, expected);
}

/* Teams of 2 and 1 GPUs guaranteed on an 8-GPU cluster: the units are GPUs x 28,000; the
 * slot after the teams is for work of no known team: nothing guaranteed, the whole
 * cluster (8 x 28,000 = 224,000) as its burst, weight 1. Unknown team indices map to it. */
static void test_init_and_slots(void **state)
{
    (void)state;
    TeamArgs teams[] = {{"vision", 2, 3, 2}, {"speech", 1, 1, 1}};
    Cluster *c = cluster_with(2, teams, 2);
    Tenancy t;
    assert_int_equal(tenancy_init(&t, c, HOUR_MS), 0);
    assert_true(t.quotas);
    assert_int_equal(t.n_teams, 3);
    assert_near(t.teams[0].guaranteed_units, 56000);
    assert_near(t.teams[0].burst_units, 84000);
    assert_near(t.teams[0].weight, 2);
    assert_near(t.teams[1].guaranteed_units, 28000);
    assert_near(t.teams[2].guaranteed_units, 0);
    assert_near(t.teams[2].burst_units, 224000);
    assert_near(t.teams[2].weight, 1);
    assert_int_equal(tenancy_slot(&t, 0), 0);
    assert_int_equal(tenancy_slot(&t, 1), 1);
    assert_int_equal(tenancy_slot(&t, TEAM_NONE), 2);
    assert_int_equal(tenancy_slot(&t, 7), 2);
    tenancy_free(&t);
    cluster_free(c);
}

/* Guarantee 2 GPUs, burst 3 GPUs. Holding 1 GPU inside the guarantee, one more GPU lands
 * exactly on the guarantee (inside), a thousandth more does not. With 3 GPUs held, 2 of
 * them guaranteed, nothing more is inside the guarantee and nothing more fits the burst.
 * A burst below the guarantee counts as the guarantee; work of no team bursts to the
 * cluster (8 GPUs) and is never guaranteed. */
static void test_guarantee_and_burst(void **state)
{
    (void)state;
    TeamArgs teams[] = {{"vision", 2, 3, 1}, {"odd", 2, 1, 1}};
    Cluster *c = cluster_with(2, teams, 2);
    Tenancy t;
    assert_int_equal(tenancy_init(&t, c, HOUR_MS), 0);
    double milli = GPU / 1000;

    t.teams[0].held_units = GPU;
    t.teams[0].guaranteed_held = GPU;
    assert_true(tenancy_within_guarantee(&t, 0, GPU));
    assert_false(tenancy_within_guarantee(&t, 0, GPU + milli));
    assert_true(tenancy_within_burst(&t, 0, 2 * GPU));
    assert_false(tenancy_within_burst(&t, 0, 2 * GPU + milli));

    t.teams[0].held_units = 3 * GPU;
    t.teams[0].guaranteed_held = 2 * GPU;
    assert_true(tenancy_within_guarantee(&t, 0, 0));
    assert_false(tenancy_within_guarantee(&t, 0, milli));
    assert_false(tenancy_within_burst(&t, 0, milli));

    /* burst 1 < guarantee 2: the guarantee is the limit */
    assert_true(tenancy_within_burst(&t, 1, 2 * GPU));
    assert_false(tenancy_within_burst(&t, 1, 2 * GPU + milli));

    uint32_t none = tenancy_slot(&t, TEAM_NONE);
    assert_false(tenancy_within_guarantee(&t, none, milli));
    assert_true(tenancy_within_burst(&t, none, 8 * GPU));
    assert_false(tenancy_within_burst(&t, none, 8 * GPU + milli));
    tenancy_free(&t);
    cluster_free(c);
}

/* No teams: no quotas, one slot holding everything, guaranteed up to the whole cluster
 * (4 GPUs), and fair share flat: the one slot has all the usage and all the weight, so
 * its key is 1 however much it used. */
static void test_no_teams(void **state)
{
    (void)state;
    Cluster *c = cluster_with(1, NULL, 0);
    Tenancy t;
    assert_int_equal(tenancy_init(&t, c, HOUR_MS), 0);
    assert_false(t.quotas);
    assert_int_equal(t.n_teams, 1);
    uint32_t none = tenancy_slot(&t, TEAM_NONE);
    assert_int_equal(none, 0);
    assert_true(tenancy_within_guarantee(&t, none, 4 * GPU));
    assert_true(tenancy_within_burst(&t, none, 4 * GPU));
    t.teams[0].held_units = 4 * GPU;
    tenancy_advance(&t, HOUR_MS);
    assert_true(t.teams[0].usage > 0);
    assert_near(tenancy_fair_key(&t, none), 1.0); /* all the usage, all the weight */
    tenancy_free(&t);
    cluster_free(c);
}

/* Half-life h = 1 h, teams A and B of weight 1 (and the no-team slot, weight 1: the
 * weights sum to 3, each share is 1/3).
 *  - 0 to h: A holds one GPU (28,000). usage_A(h) = 28,000 * h/ln2 * (1 - 1/2)
 *    = 14,000 h/ln2 = X. Keys: A = (X/X) / (1/3) = 3, B = 0.
 *  - h to 2h: A holds nothing, B one GPU. usage_A(2h) = X/2, usage_B(2h) = X. Total 1.5 X:
 *    A's share 1/3, key 1; B's share 2/3, key 2. A, the team that used more overall but
 *    longer ago, now goes first: that is the decay.
 *  - 2h to 5h, nobody holds anything: both halve three times; the keys stay 1 and 2.
 * Without decay (half-life 0) the same history gives equal usage, 28,000 h each: keys
 * 1.5 and 1.5. */
static void test_fair_key_decay(void **state)
{
    (void)state;
    TeamArgs teams[] = {{"a", 0, 4, 1}, {"b", 0, 4, 1}};
    Cluster *c = cluster_with(2, teams, 2);
    double h = HOUR_MS, x = 14000.0 * h / M_LN2;
    for (int decayed = 1; decayed >= 0; decayed--) {
        Tenancy t;
        assert_int_equal(tenancy_init(&t, c, decayed ? HOUR_MS : 0), 0);
        t.teams[0].held_units = GPU;
        tenancy_advance(&t, HOUR_MS);
        if (decayed) {
            assert_near(t.teams[0].usage, x);
            assert_near(tenancy_fair_key(&t, 0), 3);
        } else {
            assert_near(t.teams[0].usage, GPU * h);
        }
        assert_near(t.teams[1].usage, 0);
        assert_near(tenancy_fair_key(&t, 1), 0);

        t.teams[0].held_units = 0;
        t.teams[1].held_units = GPU;
        tenancy_advance(&t, 2 * HOUR_MS);
        if (decayed) {
            assert_near(t.teams[0].usage, x / 2);
            assert_near(t.teams[1].usage, x);
            assert_near(tenancy_fair_key(&t, 0), 1);
            assert_near(tenancy_fair_key(&t, 1), 2);
        } else {
            assert_near(t.teams[0].usage, GPU * h);
            assert_near(t.teams[1].usage, GPU * h);
            assert_near(tenancy_fair_key(&t, 0), 1.5);
            assert_near(tenancy_fair_key(&t, 1), 1.5);
        }
        assert_near(tenancy_fair_key(&t, 2), 0);

        t.teams[1].held_units = 0;
        tenancy_advance(&t, 5 * HOUR_MS);
        if (decayed) {
            assert_near(t.teams[0].usage, x / 16);
            assert_near(t.teams[1].usage, x / 8);
            assert_near(tenancy_fair_key(&t, 0), 1);
            assert_near(tenancy_fair_key(&t, 1), 2);
        }
        tenancy_free(&t);
    }
    cluster_free(c);
}

/* The integral composes: holding the same units from 0 to h in three uneven steps gives
 * what one step gives. Advancing to the same time again, or to an earlier one, adds
 * nothing and does not move the clock back. */
static void test_advance_in_steps(void **state)
{
    (void)state;
    TeamArgs teams[] = {{"a", 0, 4, 1}};
    Cluster *c = cluster_with(1, teams, 1);
    Tenancy one, steps;
    assert_int_equal(tenancy_init(&one, c, HOUR_MS), 0);
    assert_int_equal(tenancy_init(&steps, c, HOUR_MS), 0);
    one.teams[0].held_units = steps.teams[0].held_units = 3 * GPU;
    tenancy_advance(&one, HOUR_MS);
    tenancy_advance(&steps, 600000);
    tenancy_advance(&steps, 1500000);
    tenancy_advance(&steps, HOUR_MS);
    assert_near(steps.teams[0].usage, one.teams[0].usage);
    assert_near(one.teams[0].usage, 3 * 14000.0 * HOUR_MS / M_LN2);

    double before = one.teams[0].usage;
    tenancy_advance(&one, HOUR_MS);
    assert_near(one.teams[0].usage, before);
    tenancy_advance(&one, HOUR_MS / 2);
    assert_near(one.teams[0].usage, before);
    assert_int_equal(one.last_ms, HOUR_MS);
    tenancy_free(&one);
    tenancy_free(&steps);
    cluster_free(c);
}

/* Weights 3 and 1 (plus 1 for the no-team slot: 5 in all) with equal usage: A's key is
 * (1/2) / (3/5) = 5/6, B's (1/2) / (1/5) = 5/2, so the heavier team goes first. A team of
 * weight 0 has no share at all: its key is infinite, after everyone of its class. */
static void test_fair_key_weights(void **state)
{
    (void)state;
    TeamArgs teams[] = {{"a", 0, 4, 3}, {"b", 0, 4, 1}, {"z", 0, 4, 0}};
    Cluster *c = cluster_with(2, teams, 3);
    Tenancy t;
    assert_int_equal(tenancy_init(&t, c, HOUR_MS), 0);
    t.teams[0].held_units = t.teams[1].held_units = 2 * GPU;
    tenancy_advance(&t, HOUR_MS);
    assert_near(tenancy_fair_key(&t, 0), 5.0 / 6);
    assert_near(tenancy_fair_key(&t, 1), 5.0 / 2);
    assert_true(isinf(tenancy_fair_key(&t, 2)));
    tenancy_free(&t);
    cluster_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_init_and_slots),   cmocka_unit_test(test_guarantee_and_burst),
        cmocka_unit_test(test_no_teams),         cmocka_unit_test(test_fair_key_decay),
        cmocka_unit_test(test_advance_in_steps), cmocka_unit_test(test_fair_key_weights),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
