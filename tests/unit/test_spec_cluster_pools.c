/* test_spec_cluster_pools.c: the pool fields of issue 6 in the cluster spec reader:
 * prices from the pricing catalogue by tier (instance_type, reservation), an explicit
 * price winning, the counts of an autoscaled pool (min_nodes, max_nodes, nodes) and
 * the nodes it starts with, the timing fields and their defaults, and every mistake
 * with its line and field. Prices are checked against the catalogue's own entry (the
 * instance's price over its GPUs, rounded to the micro-dollar), so that a new price
 * list does not break the test while the tier-to-column mapping is pinned. */
#include "spec/spec.h"

#include "core/cluster.h"
#include "core/pricing.h"
#include "util/buf.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define INSTANCE "gcp/a3-megagpu-8g"

static Cluster *parse_ok(const char *yaml)
{
    Buf err = {0};
    Cluster *c = NULL;
    int r = spec_parse_cluster_yaml(yaml, strlen(yaml), "c.yaml", &c, &err);
    if (r != 0)
        print_message("%s\n", buf_str(&err));
    assert_int_equal(r, 0);
    assert_non_null(c);
    assert_true(cluster_consistent(c));
    buf_free(&err);
    return c;
}

/* The parse fails with -EINVAL and the message holds the needle. */
static void parse_bad(const char *yaml, const char *needle)
{
    Buf err = {0};
    Cluster *c = NULL;
    int r = spec_parse_cluster_yaml(yaml, strlen(yaml), "c.yaml", &c, &err);
    if (r != -EINVAL || !strstr(buf_str(&err), needle))
        print_message("input:\n%s\nerror:\n%s\nwanted: %s\n", yaml, buf_str(&err), needle);
    assert_int_equal(r, -EINVAL);
    assert_non_null(strstr(buf_str(&err), needle));
    assert_null(c);
    buf_free(&err);
}

/* A one-pool spec: the pool's fields (indented lines), then its 8-GPU node template. */
static char *one_pool(const char *fields)
{
    static char text[2048];
    snprintf(text, sizeof(text),
             "pools:\n"
             "  - name: p\n"
             "%s"
             "    node: {gpu_model: H100-80GB-SXM5, gpus: 8}\n",
             fields);
    return text;
}

static int64_t per_gpu(int64_t per_instance, uint8_t gpus)
{
    return (per_instance + gpus / 2) / gpus;
}

/* Each tier takes its column of the instance's prices, spread over its 8 GPUs; the
 * on-demand price is kept beside it for the savings figures; a spot pool takes GCP's
 * 30 s notice from the catalogue. */
static void test_prices_by_tier(void **state)
{
    (void)state;
    const InstancePrice *ip = pricing_find(INSTANCE);
    assert_non_null(ip);
    assert_int_equal(ip->gpus, 8);
    int64_t od = per_gpu(ip->on_demand_micro_usd, 8);
    struct {
        const char *fields;
        int64_t want;
    } cases[] = {
        {"    tier: on-demand\n    instance_type: " INSTANCE "\n    nodes: 1\n", od},
        {"    tier: reserved\n    instance_type: " INSTANCE "\n    nodes: 1\n",
         per_gpu(ip->reserved_1y_micro_usd, 8)},
        {"    tier: reserved\n    instance_type: a3-megagpu-8g\n    reservation: 3y\n"
         "    nodes: 1\n",
         per_gpu(ip->reserved_3y_micro_usd, 8)},
        {"    tier: spot\n    instance_type: " INSTANCE "\n    nodes: 1\n",
         per_gpu(ip->spot_micro_usd, 8)},
        {"    tier: owned\n    instance_type: " INSTANCE "\n    nodes: 1\n", 0},
        {"    tier: spot\n    instance_type: " INSTANCE "\n    price_per_gpu_hour: 2.5\n"
         "    nodes: 1\n",
         2500000},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        Cluster *c = parse_ok(one_pool(cases[i].fields));
        const Pool *p = &c->pools[0];
        assert_true(cases[i].want > 0 || p->tier == TIER_OWNED);
        assert_int_equal(p->price_micro_usd, cases[i].want);
        assert_int_equal(p->on_demand_micro_usd, od);
        if (p->tier == TIER_SPOT)
            assert_int_equal(p->notice_ms, ip->notice_s * 1000);
        cluster_free(c);
    }
    /* without an instance the on-demand price is the pool's own */
    Cluster *c = parse_ok(one_pool("    tier: spot\n    price_per_gpu_hour: 1.25\n    nodes: 1\n"));
    assert_int_equal(c->pools[0].on_demand_micro_usd, 1250000);
    assert_int_equal(c->pools[0].notice_ms, POOL_DEFAULT_NOTICE_MS);
    cluster_free(c);
}

/* A pool with only nodes is fixed: every node up. With max_nodes it holds max_nodes
 * nodes, the first `nodes` (default min_nodes) up, the others absent. */
static void test_counts(void **state)
{
    (void)state;
    Cluster *c = parse_ok(one_pool("    tier: on-demand\n    nodes: 3\n"));
    const Pool *p = &c->pools[0];
    assert_int_equal(p->min_nodes, 3);
    assert_int_equal(p->max_nodes, 3);
    assert_false(pool_autoscaled(p));
    assert_int_equal(c->n_nodes, 3);
    for (size_t i = 0; i < 3; i++)
        assert_int_equal(c->nodes[i].state, NODE_UP);
    cluster_free(c);

    c = parse_ok(one_pool("    tier: on-demand\n    max_nodes: 4\n"));
    p = &c->pools[0];
    assert_true(pool_autoscaled(p));
    assert_int_equal(p->min_nodes, 0);
    assert_int_equal(p->initial_nodes, 0);
    assert_int_equal(c->n_nodes, 4);
    assert_int_equal(c->n_gpus, 32);
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(c->nodes[i].state, NODE_ABSENT);
        assert_false(c->nodes[i].schedulable);
    }
    assert_int_equal(p->startup_ms, 180000);
    assert_int_equal(p->idle_ms, 600000);
    cluster_free(c);

    c = parse_ok(one_pool("    tier: on-demand\n    min_nodes: 1\n    max_nodes: 4\n    nodes: 2\n"
                          "    startup_s: 90.5\n    idle_s: 300\n"));
    p = &c->pools[0];
    assert_int_equal(p->min_nodes, 1);
    assert_int_equal(p->initial_nodes, 2);
    assert_int_equal(p->startup_ms, 90500);
    assert_int_equal(p->idle_ms, 300000);
    for (size_t i = 0; i < 4; i++)
        assert_int_equal(c->nodes[i].state, i < 2 ? NODE_UP : NODE_ABSENT);
    cluster_free(c);

    c = parse_ok(one_pool("    tier: on-demand\n    min_nodes: 2\n    max_nodes: 3\n"));
    assert_int_equal(c->pools[0].initial_nodes, 2);
    cluster_free(c);

    /* a fixed spot pool is interrupted and replaced: it has a rate and a startup */
    c = parse_ok(one_pool("    tier: spot\n    nodes: 2\n    interruption_per_hour: 0.05\n"
                          "    notice_s: 120\n    startup_s: 60\n"));
    p = &c->pools[0];
    assert_true(p->interruptions_per_hour > 0.0499999 && p->interruptions_per_hour < 0.0500001);
    assert_int_equal(p->notice_ms, 120000);
    assert_int_equal(p->startup_ms, 60000);
    cluster_free(c);
}

static void test_errors(void **state)
{
    (void)state;
    parse_bad(one_pool("    tier: on-demand\n    instance_type: no-such-box\n    nodes: 1\n"),
              "c.yaml:4: field 'instance_type': 'no-such-box' is not in the pricing catalogue");
    /* AWS's p5 has no spot price in the catalogue */
    if (pricing_find("aws/p5.48xlarge") &&
        pricing_find("aws/p5.48xlarge")->spot_micro_usd == PRICE_UNKNOWN)
        parse_bad(one_pool("    tier: spot\n    instance_type: aws/p5.48xlarge\n    nodes: 1\n"),
                  "the pricing catalogue has no spot price for aws/p5.48xlarge; give "
                  "price_per_gpu_hour for pool 'p'");
    parse_bad(one_pool("    tier: on-demand\n    reservation: 3y\n    nodes: 1\n"),
              "field 'reservation': only a reserved pool has a reservation term");
    parse_bad(one_pool("    tier: reserved\n    reservation: 2y\n    nodes: 1\n"), "1y or 3y");
    parse_bad(one_pool("    tier: on-demand\n    min_nodes: 1\n    nodes: 1\n"),
              "c.yaml:4: field 'min_nodes': needs max_nodes");
    parse_bad(one_pool("    tier: on-demand\n    min_nodes: 3\n    max_nodes: 2\n"),
              "field 'min_nodes': must be at most max_nodes (2), not 3");
    parse_bad(one_pool("    tier: on-demand\n    max_nodes: 4\n    nodes: 5\n"),
              "field 'nodes': the initial count must be from min_nodes (0) to max_nodes (4), "
              "not 5");
    parse_bad(one_pool("    tier: on-demand\n    min_nodes: 2\n    max_nodes: 4\n    nodes: 1\n"),
              "not 1");
    parse_bad(one_pool("    tier: on-demand\n"), "missing field 'nodes' in pool 'p' (or max_nodes");
    parse_bad(one_pool("    tier: on-demand\n    nodes: 2\n    startup_s: 60\n"),
              "field 'startup_s': only nodes that come and go start up");
    parse_bad(one_pool("    tier: spot\n    nodes: 2\n    idle_s: 60\n"),
              "field 'idle_s': only an autoscaled pool");
    parse_bad(one_pool("    tier: on-demand\n    max_nodes: 2\n    interruption_per_hour: 1\n"),
              "field 'interruption_per_hour': only a spot pool is interrupted");
    parse_bad(one_pool("    tier: reserved\n    nodes: 2\n    notice_s: 30\n"),
              "field 'notice_s': only a spot pool gets an interruption notice");
    parse_bad(one_pool("    tier: spot\n    max_nodes: 2\n    interruption_per_hour: lots\n"),
              "field 'interruption_per_hour'");
    parse_bad(one_pool("    tier: spot\n    max_nodes: 2\n    startup_s: -1\n"), "startup_s");
}

/* The examples of the proof load: the tiered fleet and its all-on-demand twin hold the
 * same 42 nodes, of which only the 6 reserved are up at the start. */
static void test_examples(void **state)
{
    (void)state;
    const char *root = getenv("GPUORCH_SRC");
    char path[1024];
    const char *names[] = {"examples/cluster-tiers.yaml", "examples/cluster-ondemand.yaml"};
    size_t up[] = {6, 0};
    for (size_t k = 0; k < 2; k++) {
        snprintf(path, sizeof(path), "%s/%s", root && *root ? root : ".", names[k]);
        Buf err = {0};
        Cluster *c = NULL;
        int r = spec_load_cluster(path, &c, &err);
        if (r)
            print_message("%s\n", buf_str(&err));
        assert_int_equal(r, 0);
        assert_int_equal(c->n_nodes, 42);
        size_t n_up = 0;
        for (size_t i = 0; i < c->n_nodes; i++)
            n_up += c->nodes[i].state == NODE_UP;
        assert_int_equal(n_up, up[k]);
        for (size_t p = 0; p < c->n_pools; p++)
            assert_true(c->pools[p].price_micro_usd > 0);
        cluster_free(c);
        buf_free(&err);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prices_by_tier),
        cmocka_unit_test(test_counts),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_examples),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
