/* test_render.c: the renderings every command shares (spec/render.c): the JSON of a
 * worker's grants (whole, MIG, share) and of a MIG layout, byte for byte as render.h
 * documents them, since plan and sim --events print them and scripts read them; the
 * compact text forms for tables; and render_num, which drops trailing zeros and never
 * prints "-0". */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core/cluster.h"
#include "spec/render.h"
#include "util/buf.h"

#include <math.h>
#include <string.h>

static Cluster *h100(void)
{
    Cluster *c = cluster_new("r");
    assert_non_null(c);
    int mi = cluster_model(c, "H100", 0);
    assert_true(mi >= 0);
    Pool p = {.name = "h",
              .nodes = 1,
              .model = (uint8_t)mi,
              .gpus = 8,
              .mig = true,
              .cpu_milli = 64000,
              .memory_mib = 1 << 20};
    mig_layout_clear(&p.initial_mig);
    int pi = cluster_add_pool(c, &p);
    assert_true(pi >= 0);
    assert_int_equal(cluster_add_pool_nodes(c, (uint32_t)pi), 0);
    return c;
}

static int profile(const Cluster *c, const char *name)
{
    int p = catalog_profile_index(node_model(c, &c->nodes[0]), name);
    assert_true(p >= 0);
    return p;
}

static void test_grants(void **state)
{
    (void)state;
    Cluster *c = h100();
    WorkerAlloc w = {.node = 0, .n_grants = 3};
    w.grants[0] = (Grant){.index = 4, .kind = GRANT_WHOLE};
    w.grants[1] = (Grant){.index = 3,
                          .kind = GRANT_MIG,
                          .mig_profile = (uint8_t)profile(c, "1g.10gb"),
                          .mig_start = 2};
    w.grants[2] = (Grant){.index = 2, .kind = GRANT_SHARE, .milli = 250};
    Buf b = {0};
    render_json_grants(&b, c, &w);
    assert_string_equal(buf_str(&b), "[{\"index\": 4}, {\"index\": 3, \"mig\": {\"profile\": "
                                     "\"1g.10gb\", \"start\": 2}}, {\"index\": 2, \"fraction\": "
                                     "0.25}]");
    buf_reset(&b);
    render_text_grants(&b, c, &w);
    assert_string_equal(buf_str(&b), "4 3:1g.10gb@2 2:0.250");

    /* shares: thousandths, trailing zeros dropped in JSON, kept in text */
    w.n_grants = 1;
    const struct {
        uint16_t milli;
        const char *json, *text;
    } shares[] = {
        {1, "[{\"index\": 0, \"fraction\": 0.001}]", "0:0.001"},
        {333, "[{\"index\": 0, \"fraction\": 0.333}]", "0:0.333"},
        {500, "[{\"index\": 0, \"fraction\": 0.5}]", "0:0.500"},
        {1000, "[{\"index\": 0, \"fraction\": 1}]", "0:1.000"},
    };
    for (size_t i = 0; i < sizeof(shares) / sizeof(shares[0]); i++) {
        w.grants[0] = (Grant){.index = 0, .kind = GRANT_SHARE, .milli = shares[i].milli};
        buf_reset(&b);
        render_json_grants(&b, c, &w);
        assert_string_equal(buf_str(&b), shares[i].json);
        buf_reset(&b);
        render_text_grants(&b, c, &w);
        assert_string_equal(buf_str(&b), shares[i].text);
    }

    /* a whole 7g instance and two whole GPUs */
    w.n_grants = 2;
    w.grants[0] = (Grant){.index = 6, .kind = GRANT_WHOLE};
    w.grants[1] = (Grant){.index = 7, .kind = GRANT_WHOLE};
    buf_reset(&b);
    render_json_grants(&b, c, &w);
    assert_string_equal(buf_str(&b), "[{\"index\": 6}, {\"index\": 7}]");
    buf_reset(&b);
    render_text_grants(&b, c, &w);
    assert_string_equal(buf_str(&b), "6 7");
    w.n_grants = 1;
    w.grants[0] =
        (Grant){.index = 0, .kind = GRANT_MIG, .mig_profile = (uint8_t)profile(c, "7g.80gb")};
    buf_reset(&b);
    render_json_grants(&b, c, &w);
    assert_string_equal(buf_str(&b),
                        "[{\"index\": 0, \"mig\": {\"profile\": \"7g.80gb\", \"start\": 0}}]");

    /* CPU-only work has no grants */
    w.n_grants = 0;
    buf_reset(&b);
    render_json_grants(&b, c, &w);
    assert_string_equal(buf_str(&b), "[]");
    buf_reset(&b);
    render_text_grants(&b, c, &w);
    assert_string_equal(buf_str(&b), "-");
    buf_free(&b);
    cluster_free(c);
}

static void test_layout(void **state)
{
    (void)state;
    Cluster *c = h100();
    const GpuModel *m = node_model(c, &c->nodes[0]);
    MigLayout l;
    mig_layout_clear(&l);
    Buf b = {0};
    render_json_layout(&b, m, &l);
    assert_string_equal(buf_str(&b), "[]");
    buf_reset(&b);
    render_text_layout(&b, m, &l);
    assert_string_equal(buf_str(&b), "(MIG off)");

    /* listed in start order whatever order they were set in */
    l.profile_at[6] = (uint8_t)profile(c, "1g.10gb");
    l.profile_at[0] = (uint8_t)profile(c, "3g.40gb");
    l.profile_at[4] = (uint8_t)profile(c, "1g.20gb");
    assert_true(mig_layout_valid(m, &l));
    buf_reset(&b);
    render_json_layout(&b, m, &l);
    assert_string_equal(buf_str(&b),
                        "[{\"profile\": \"3g.40gb\", \"start\": 0}, {\"profile\": \"1g.20gb\", "
                        "\"start\": 4}, {\"profile\": \"1g.10gb\", \"start\": 6}]");
    buf_reset(&b);
    render_text_layout(&b, m, &l);
    assert_string_equal(buf_str(&b), "3g.40gb@0 1g.20gb@4 1g.10gb@6");

    /* one instance; a media-extension name needs no escaping but is quoted whole */
    mig_layout_clear(&l);
    l.profile_at[1] = (uint8_t)profile(c, "1g.10gb+me");
    buf_reset(&b);
    render_json_layout(&b, m, &l);
    assert_string_equal(buf_str(&b), "[{\"profile\": \"1g.10gb+me\", \"start\": 1}]");
    buf_reset(&b);
    render_text_layout(&b, m, &l);
    assert_string_equal(buf_str(&b), "1g.10gb+me@1");
    buf_free(&b);
    cluster_free(c);
}

static void expect_num(double v, int digits, const char *want)
{
    Buf b = {0};
    render_num(&b, v, digits);
    if (strcmp(buf_str(&b), want) != 0)
        fail_msg("render_num(%.17g, %d) = \"%s\", want \"%s\"", v, digits, buf_str(&b), want);
    buf_free(&b);
}

static void test_num(void **state)
{
    (void)state;
    expect_num(11.43, 2, "11.43");
    expect_num(11.43, 4, "11.43");
    expect_num(11.4, 2, "11.4");
    expect_num(2.0, 2, "2");
    expect_num(0, 2, "0");
    expect_num(0, 0, "0");
    /* integers keep their zeros */
    expect_num(100, 0, "100");
    expect_num(100, 2, "100");
    expect_num(1000000, 1, "1000000");
    expect_num(10.5, 0, "10"); /* printf rounds half to even */
    expect_num(2.675, 1, "2.7");
    expect_num(61.23456, 2, "61.23");
    expect_num(-1.5, 2, "-1.5");
    expect_num(-40, 1, "-40");
    /* never -0 */
    expect_num(-0.0, 2, "0");
    expect_num(-0.0001, 2, "0");
    expect_num(-0.004, 2, "0");
    expect_num(-0.4, 0, "0");
    expect_num(0.0001, 3, "0");
    /* not a number: 0 (JSON has no NaN) */
    expect_num(NAN, 2, "0");
    expect_num(INFINITY, 2, "0");
    expect_num(-INFINITY, 2, "0");
    /* appends */
    Buf b = {0};
    buf_puts(&b, "x=");
    render_num(&b, 0.5, 3);
    assert_string_equal(buf_str(&b), "x=0.5");
    buf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grants),
        cmocka_unit_test(test_layout),
        cmocka_unit_test(test_num),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
