/* test_pricing.c: the compiled pricing catalogue (core/pricing.c over the table
 * tools/pricing_gen.c makes of data/pricing-catalog.json): lookups by id and by
 * instance type, dollars turned into exact micro-dollars, unknown prices marked, the
 * owned-server facts; and every entry sane (GPUs, at least one price, no negative
 * price other than the unknown mark). */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core/pricing.h"

#include <string.h>

static void test_lookup(void **state)
{
    const InstancePrice *p = pricing_find("aws/p5.48xlarge");
    assert_non_null(p);
    assert_ptr_equal(pricing_find("p5.48xlarge"), p);
    assert_string_equal(p->provider, "aws");
    assert_int_equal(p->gpus, 8);
    assert_int_equal(p->on_demand_micro_usd, 55040000); /* $55.04 per instance-hour */
    assert_int_equal(p->spot_micro_usd, PRICE_UNKNOWN);
    assert_int_equal(p->notice_s, 120);
    const InstancePrice *g = pricing_find("gcp/a3-highgpu-8g");
    assert_non_null(g);
    assert_int_equal(g->reserved_1y_micro_usd, 61383700);
    assert_int_equal(g->reserved_3y_micro_usd, 38864400);
    assert_int_equal(g->spot_micro_usd, 50609500);
    assert_int_equal(g->notice_s, 30);
    assert_null(pricing_find("p9.huge"));
    assert_null(pricing_find(NULL));
}

static void test_every_entry_sane(void **state)
{
    assert_true(pricing_count() >= 20);
    for (size_t i = 0; i < pricing_count(); i++) {
        const InstancePrice *p = pricing_at(i);
        assert_non_null(p);
        assert_true(p->gpus >= 1 && p->gpus <= 16);
        int64_t prices[] = {p->on_demand_micro_usd, p->reserved_1y_micro_usd,
                            p->reserved_3y_micro_usd, p->spot_micro_usd};
        bool any = false;
        for (size_t k = 0; k < 4; k++) {
            assert_true(prices[k] == PRICE_UNKNOWN || prices[k] > 0);
            any |= prices[k] > 0;
        }
        /* one entry (aws/p5e) has no price of its own in the notebook; the others do */
        if (strcmp(p->id, "aws/p5e.48xlarge") && strcmp(p->id, "azure/Standard_ND96amsr_A100_v4"))
            assert_true(any);
        assert_ptr_equal(pricing_find(p->id), p);
    }
    assert_null(pricing_at(pricing_count()));
}

static void test_owned(void **state)
{
    const OwnedServer *h = pricing_owned("hgx_h100_8gpu");
    assert_non_null(h);
    assert_string_equal(h->gpu_model, "H100-80GB-SXM5");
    assert_int_equal(h->gpus, 8);
    assert_int_equal(h->capex_micro_usd, INT64_C(384000000000));
    assert_int_equal(h->capex_list_micro_usd, INT64_C(199000000000));
    assert_true(h->power_kw_max == 10.2);
    assert_true(h->power_kw_typical == 7.0);
    assert_non_null(pricing_owned("hgx_a100_8gpu"));
    assert_int_equal(pricing_owned("hgx_a100_8gpu")->capex_micro_usd, PRICE_UNKNOWN);
    assert_null(pricing_owned("dgx_b300"));
    double lo, hi;
    pricing_colocation_usd_per_kw_month(&lo, &hi);
    assert_true(lo == 130 && hi == 250);
    int ylo, yhi;
    pricing_depreciation_years(&ylo, &yhi);
    assert_int_equal(ylo, 3);
    assert_int_equal(yhi, 6);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lookup),
        cmocka_unit_test(test_every_entry_sane),
        cmocka_unit_test(test_owned),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
