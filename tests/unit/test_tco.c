/* test_tco.c: the owned-versus-cloud arithmetic (core/tco.c) against figures worked out
 * by hand in the comments: the fleet size, each month's owned and cloud cost to the
 * micro-dollar, cumulative totals, break-even months (including none within the period
 * and a lead that is lost and won back), a reservation's commitment past the period,
 * book value, rounding half away from zero, zero usage and bad input; and the cloud
 * prices of one comparison taken from one instance, or given, never another listing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core/catalog.h"
#include "core/pricing.h"
#include "core/tco.h"

#include <errno.h>
#include <string.h>

#define USD(x) ((int64_t)(x)*1000000)

/* The case of docs/tco.md: one 8-GPU server used half the time, 2,920 GPU-hours a month
 * (8 GPUs x 730 h x 50%), over 36 months. */
static TcoInput base_case(const double *hours)
{
    return (TcoInput){
        .gpu_hours = hours,
        .n_gpu_hours = 1,
        .months = 36,
        .gpus_per_server = 8,
        .max_utilisation = 0.8,
        .capex_micro_usd = USD(384000),
        .depreciation_months = 36,
        .power_kw = 7,
        .colo_usd_per_kw_month = 150,
        .typical_kw = 7,
        .electricity_usd_per_kwh = 0,
        .ops_pct_per_year = 10,
        .spot_share = 0.5,
        /* Prices for the arithmetic alone: on-demand is aws/p5.48xlarge's, the others
         * gcp/a3-highgpu-8g's. The command never mixes two listings (tco_prices, tested
         * below); tco_compute prices whatever it is given. */
        .price =
            {
                [TCO_PRICE_ON_DEMAND] = {55040000, 8}, /* $6.88/GPU-h */
                [TCO_PRICE_RESERVED_1Y] = {61383700, 8},
                [TCO_PRICE_RESERVED_3Y] = {38864400, 8},
                [TCO_PRICE_SPOT] = {50609500, 8},
            },
    };
}

static void test_hand_worked_case(void **state)
{
    const double hours[] = {2920};
    TcoInput in = base_case(hours);
    TcoResult r;
    Buf err = {0};
    assert_int_equal(tco_compute(&in, &r, &err), 0);

    /* Servers: ceil(2920 / (8 x 730 x 0.8 = 4672)) = ceil(0.625) = 1. */
    assert_int_equal(r.servers, 1);
    assert_int_equal(r.purchases, 1);
    assert_true(r.peak_gpu_hours == 2920);
    /* Owned per month: colocation 7 kW x $150 = $1,050; operations $384,000 x 10% / 12
     * = $3,200; no electricity apart: running $4,250. Amortised: $384,000 / 36 =
     * $10,666.666666... -> 10,666,666,667 micro-dollars (rounded half away from zero),
     * plus $4,250 = 14,916,666,667. */
    assert_int_equal(r.capex_micro_usd, USD(384000));
    assert_int_equal(r.colo_micro_usd, USD(1050));
    assert_int_equal(r.ops_micro_usd, USD(3200));
    assert_int_equal(r.electricity_micro_usd, 0);
    assert_int_equal(r.running_micro_usd, USD(4250));
    assert_int_equal(r.amortised_micro_usd, INT64_C(14916666667));
    /* Cash: month 1 pays the server and a month's running, $388,250; then $4,250 a
     * month; over 36 months $384,000 + 36 x $4,250 = $537,000; nothing left to
     * depreciate at the end. */
    assert_int_equal(r.owned.monthly_micro_usd[0], USD(388250));
    assert_int_equal(r.owned.monthly_micro_usd[1], USD(4250));
    assert_int_equal(r.owned.cumulative_micro_usd[23], USD(486000));
    assert_int_equal(r.owned.total_micro_usd, USD(537000));
    assert_int_equal(r.book_value_micro_usd, 0);

    /* On-demand: 2,920 x $55.04 / 8 = 2,920 x $6.88 = $20,089.60 a month; x 36 =
     * $723,225.60. Owning is cheaper once $384,000 + $4,250 m < $20,089.60 m, m >
     * 384,000 / 15,839.60 = 24.24: month 25 ($490,250 against $502,240; at month 24
     * $486,000 against $482,150.40). */
    const TcoLine *od = &r.option[TCO_ON_DEMAND];
    assert_true(od->priced);
    assert_int_equal(od->monthly_micro_usd[0], INT64_C(20089600000));
    assert_int_equal(od->cumulative_micro_usd[23], INT64_C(482150400000));
    assert_int_equal(od->total_micro_usd, INT64_C(723225600000));
    assert_int_equal(od->break_even_month, 25);
    assert_int_equal(od->term_months, 0);

    /* Reserved 1 year: the fleet's 8 GPUs x 730 h = 5,840 GPU-hours paid whether used or
     * not, at $61.3837 / 8: 730 x $61.3837 = $44,810.101 a month; x 36 = $1,613,163.636.
     * m > 384,000 / (44,810.101 - 4,250) = 9.47: month 10 ($426,500 against
     * $448,101.01; month 9: $422,250 against $403,290.909). 36 months are three whole
     * terms: nothing owed after. */
    const TcoLine *r1 = &r.option[TCO_RESERVED_1Y];
    assert_int_equal(r1->monthly_micro_usd[5], INT64_C(44810101000));
    assert_int_equal(r1->total_micro_usd, INT64_C(1613163636000));
    assert_int_equal(r1->break_even_month, 10);
    assert_int_equal(r1->term_months, 12);
    assert_int_equal(r1->committed_after_micro_usd, 0);

    /* Reserved 3 years: 730 x $38.8644 = $28,371.012 a month; x 36 = $1,021,356.432.
     * m > 384,000 / (28,371.012 - 4,250) = 15.92: month 16 ($452,000 against
     * $453,936.192; month 15: $447,750 against $425,565.18). */
    const TcoLine *r3 = &r.option[TCO_RESERVED_3Y];
    assert_int_equal(r3->monthly_micro_usd[0], INT64_C(28371012000));
    assert_int_equal(r3->total_micro_usd, INT64_C(1021356432000));
    assert_int_equal(r3->break_even_month, 16);
    assert_int_equal(r3->term_months, 36);

    /* Spot mix, half on spot: 1,460 x $50.6095 / 8 = $9,236.23375 plus 1,460 x $6.88 =
     * $10,044.80: $19,281.03375 a month; x 36 = $694,117.215. m > 384,000 / 15,031.03375
     * = 25.55: month 26 ($494,500 against $501,306.8775; month 25: $490,250 against
     * $482,025.84375). */
    const TcoLine *sm = &r.option[TCO_SPOT_MIX];
    assert_int_equal(sm->monthly_micro_usd[35], INT64_C(19281033750));
    assert_int_equal(sm->total_micro_usd, INT64_C(694117215000));
    assert_int_equal(sm->break_even_month, 26);
    tco_result_free(&r);
    buf_free(&err);
}

/* The same fleet over one year: owning never catches on-demand up ($435,000 against
 * $241,075.20 at month 12), the 1-year reservation still at month 10, and the 3-year
 * term owes 24 more months, 24 x $28,371.012 = $680,904.288. Two thirds of the server
 * are not yet depreciated: $256,000 of book value, not credited. */
static void test_short_period(void **state)
{
    const double hours[] = {2920};
    TcoInput in = base_case(hours);
    in.months = 12;
    TcoResult r;
    Buf err = {0};
    assert_int_equal(tco_compute(&in, &r, &err), 0);
    assert_int_equal(r.owned.total_micro_usd, USD(435000));
    assert_int_equal(r.option[TCO_ON_DEMAND].total_micro_usd, INT64_C(241075200000));
    assert_int_equal(r.option[TCO_ON_DEMAND].break_even_month, 0);
    assert_int_equal(r.option[TCO_SPOT_MIX].break_even_month, 0);
    assert_int_equal(r.option[TCO_RESERVED_1Y].break_even_month, 10);
    assert_int_equal(r.option[TCO_RESERVED_1Y].committed_after_micro_usd, 0);
    assert_int_equal(r.option[TCO_RESERVED_3Y].break_even_month, 0);
    assert_int_equal(r.option[TCO_RESERVED_3Y].committed_after_micro_usd, INT64_C(680904288000));
    assert_int_equal(r.book_value_micro_usd, USD(256000));
    tco_result_free(&r);
    buf_free(&err);
}

/* Usage that grows, a refresh, and a lead lost and won back. Months 1.. use 1,000 then
 * 5,000 GPU-hours (the last figure repeats): peak 5,000 > 4,672, so 2 servers. Capex
 * $11,000 a server, depreciated over 2 months, no running costs: the fleet ($22,000) is
 * bought in months 1 and 3; cumulative 22,000 22,000 44,000 44,000. On-demand at $4 a
 * GPU-hour: 4,000 then 20,000 a month; cumulative 4,000 24,000 44,000 64,000. Owning
 * is cheaper at month 2, ties at 3 (a tie is not cheaper), cheaper again at 4: it stays
 * cheaper from month 4. Reserved: 2 x 8 x 730 = 11,680 GPU-hours at $2: $23,360 a
 * month. */
static void test_growth_and_refresh(void **state)
{
    const double hours[] = {1000, 5000};
    TcoInput in = {
        .gpu_hours = hours,
        .n_gpu_hours = 2,
        .months = 4,
        .gpus_per_server = 8,
        .max_utilisation = 0.8,
        .capex_micro_usd = USD(11000),
        .depreciation_months = 2,
        .spot_share = 0.5,
        .price =
            {
                [TCO_PRICE_ON_DEMAND] = {USD(4), 1},
                [TCO_PRICE_RESERVED_1Y] = {USD(16), 8},
                [TCO_PRICE_RESERVED_3Y] = {-1, 0},
                [TCO_PRICE_SPOT] = {-1, 0},
            },
    };
    TcoResult r;
    Buf err = {0};
    assert_int_equal(tco_compute(&in, &r, &err), 0);
    assert_int_equal(r.servers, 2);
    assert_int_equal(r.purchases, 2);
    assert_true(r.gpu_hours[0] == 1000 && r.gpu_hours[3] == 5000);
    assert_int_equal(r.owned.monthly_micro_usd[2], USD(22000));
    assert_int_equal(r.owned.cumulative_micro_usd[3], USD(44000));
    assert_int_equal(r.book_value_micro_usd, 0);
    const TcoLine *od = &r.option[TCO_ON_DEMAND];
    assert_int_equal(od->cumulative_micro_usd[1], USD(24000));
    assert_int_equal(od->cumulative_micro_usd[2], USD(44000));
    assert_int_equal(od->break_even_month, 4);
    assert_int_equal(r.option[TCO_RESERVED_1Y].monthly_micro_usd[0], USD(23360));
    /* Unknown prices leave their options out: no 3-year price, and a spot mix without a
     * spot price. */
    assert_false(r.option[TCO_RESERVED_3Y].priced);
    assert_null(r.option[TCO_RESERVED_3Y].monthly_micro_usd);
    assert_false(r.option[TCO_SPOT_MIX].priced);
    /* All on demand, the mix needs no spot price. */
    tco_result_free(&r);
    in.spot_share = 0;
    assert_int_equal(tco_compute(&in, &r, &err), 0);
    assert_true(r.option[TCO_SPOT_MIX].priced);
    assert_int_equal(r.option[TCO_SPOT_MIX].total_micro_usd, USD(64000));
    tco_result_free(&r);
    buf_free(&err);
}

/* A peak that fills the fleet exactly (8 x 730 x 0.8 = 4,672) needs one server, not
 * two; one GPU-hour more needs two. */
static void test_fleet_size_exact(void **state)
{
    double hours[] = {4672};
    TcoInput in = base_case(hours);
    TcoResult r;
    Buf err = {0};
    assert_int_equal(tco_compute(&in, &r, &err), 0);
    assert_int_equal(r.servers, 1);
    tco_result_free(&r);
    hours[0] = 4673;
    assert_int_equal(tco_compute(&in, &r, &err), 0);
    assert_int_equal(r.servers, 2);
    assert_int_equal(r.capex_micro_usd, USD(768000));
    tco_result_free(&r);
    buf_free(&err);
}

/* No usage: no servers, every cost 0, and nothing breaks even (a tie is not cheaper). */
static void test_zero_usage(void **state)
{
    const double hours[] = {0};
    TcoInput in = base_case(hours);
    TcoResult r;
    Buf err = {0};
    assert_int_equal(tco_compute(&in, &r, &err), 0);
    assert_int_equal(r.servers, 0);
    assert_int_equal(r.owned.total_micro_usd, 0);
    for (int o = 0; o < TCO_OPTION_COUNT; o++) {
        assert_true(r.option[o].priced);
        assert_int_equal(r.option[o].total_micro_usd, 0);
        assert_int_equal(r.option[o].break_even_month, 0);
    }
    tco_result_free(&r);
    buf_free(&err);
}

/* One GPU-hour at 5 micro-dollars for 2 GPUs is 2.5 micro-dollars: rounded half away
 * from zero to 3 (half to even would give 2, truncation 2). Electricity: 1 server x
 * 0.5 kW x 730 h x $0.10 = $36.50. */
static void test_rounding_and_electricity(void **state)
{
    const double hours[] = {1};
    TcoInput in = base_case(hours);
    in.price[TCO_PRICE_ON_DEMAND] = (TcoCloudPrice){5, 2};
    in.typical_kw = 0.5;
    in.electricity_usd_per_kwh = 0.10;
    TcoResult r;
    Buf err = {0};
    assert_int_equal(tco_compute(&in, &r, &err), 0);
    assert_int_equal(r.option[TCO_ON_DEMAND].monthly_micro_usd[0], 3);
    assert_int_equal(r.electricity_micro_usd, 36500000);
    assert_int_equal(r.running_micro_usd, USD(4250) + 36500000);
    tco_result_free(&r);
    buf_free(&err);
}

static void expect_bad(TcoInput *in, int want, const char *needle)
{
    TcoResult r = {0};
    Buf err = {0};
    assert_int_equal(tco_compute(in, &r, &err), want);
    if (!strstr(buf_str(&err), needle))
        fail_msg("error '%s' lacks '%s'", buf_str(&err), needle);
    assert_null(r.gpu_hours); /* not written */
    buf_free(&err);
}

static void test_bad_input(void **state)
{
    double hours[] = {-1};
    TcoInput in = base_case(hours);
    expect_bad(&in, -EINVAL, "GPU-hours of month 1");
    hours[0] = 100;
    in.months = 0;
    expect_bad(&in, -EINVAL, "period");
    in = base_case(hours);
    in.max_utilisation = 0;
    expect_bad(&in, -EINVAL, "utilisation");
    in = base_case(hours);
    in.ops_pct_per_year = 101;
    expect_bad(&in, -EINVAL, "operations");
    in = base_case(hours);
    in.spot_share = 1.5;
    expect_bad(&in, -EINVAL, "spot share");
    in = base_case(hours);
    in.n_gpu_hours = 0;
    expect_bad(&in, -EINVAL, "no GPU-hours");
    in = base_case(hours);
    in.price[TCO_PRICE_SPOT].gpus = 0;
    expect_bad(&in, -EINVAL, "spot price");
    /* 1e11 GPU-hours a month at $6.88 is $688e9 a month: refused, not overflowed. */
    in = base_case(hours);
    in.max_utilisation = 1;
    in.gpus_per_server = 100000;
    hours[0] = 1e11;
    expect_bad(&in, -ERANGE, "on_demand");
}

static void test_names(void **state)
{
    assert_int_equal(tco_price_from_name("on-demand"), TCO_PRICE_ON_DEMAND);
    assert_int_equal(tco_price_from_name("reserved_3y"), TCO_PRICE_RESERVED_3Y);
    assert_int_equal(tco_price_from_name("spot"), TCO_PRICE_SPOT);
    assert_int_equal(tco_price_from_name("spot_mix"), -1);
    assert_int_equal(tco_price_from_name("on"), -1);
    assert_string_equal(tco_option_name(TCO_SPOT_MIX), "spot_mix");
    TcoCloudPrice p = {55040000, 8};
    assert_true(tco_price_per_gpu_hour(&p) == 6880000);
    p.micro_usd_per_hour = -1;
    assert_true(tco_price_per_gpu_hour(&p) < 0);
}

/* The issue-17 case: the H100 comparison priced on-demand from AWS's p5.48xlarge and
 * the reservations and spot from GCP's a3-highgpu-8g, which put a 1-year reservation
 * ($61.3837 / 8 = $7.6730 a GPU-hour) above on-demand ($55.04 / 8 = $6.88). Every price
 * is now the one instance's: p5.48xlarge lists only on-demand, so the other three
 * options are not priced, whatever another listing of the same GPU says. */
static void test_prices_one_instance(void **state)
{
    const InstancePrice *p5 = pricing_find("aws/p5.48xlarge");
    const InstancePrice *a3 = pricing_find("gcp/a3-highgpu-8g");
    assert_non_null(p5);
    assert_non_null(a3);
    /* The listing that used to be borrowed from: same GPU, same count, all four prices. */
    assert_ptr_equal(catalog_find(p5->gpu_model), catalog_find(a3->gpu_model));
    assert_int_equal(p5->gpus, a3->gpus);
    for (int p = 0; p < TCO_PRICE_COUNT; p++)
        assert_true(tco_listed_price(a3, p) > 0);

    const int64_t none[TCO_PRICE_COUNT] = {-1, -1, -1, -1};
    const double hours[] = {2920};
    TcoInput in = base_case(hours);
    TcoPriceFrom from[TCO_PRICE_COUNT];
    tco_prices(p5, none, in.price, from);
    assert_int_equal(in.price[TCO_PRICE_ON_DEMAND].micro_usd_per_hour, 55040000);
    assert_int_equal(in.price[TCO_PRICE_ON_DEMAND].gpus, 8);
    assert_int_equal(from[TCO_PRICE_ON_DEMAND], TCO_FROM_INSTANCE);
    for (int p = TCO_PRICE_RESERVED_1Y; p < TCO_PRICE_COUNT; p++) {
        assert_true(tco_price_per_gpu_hour(&in.price[p]) < 0);
        assert_int_equal(from[p], TCO_FROM_NONE);
    }
    assert_int_equal(tco_option_missing(&in, TCO_ON_DEMAND), -1);
    assert_int_equal(tco_option_missing(&in, TCO_RESERVED_1Y), TCO_PRICE_RESERVED_1Y);
    assert_int_equal(tco_option_missing(&in, TCO_RESERVED_3Y), TCO_PRICE_RESERVED_3Y);
    assert_int_equal(tco_option_missing(&in, TCO_SPOT_MIX), TCO_PRICE_SPOT);

    /* The arithmetic prices on-demand (the hand-worked case: month 25) and skips the
     * rest: no figures and no break-even, not the a3's month 10, 16 and 26. */
    TcoResult r;
    Buf err = {0};
    assert_int_equal(tco_compute(&in, &r, &err), 0);
    assert_true(r.option[TCO_ON_DEMAND].priced);
    assert_int_equal(r.option[TCO_ON_DEMAND].total_micro_usd, INT64_C(723225600000));
    assert_int_equal(r.option[TCO_ON_DEMAND].break_even_month, 25);
    for (int o = TCO_RESERVED_1Y; o < TCO_OPTION_COUNT; o++) {
        assert_false(r.option[o].priced);
        assert_null(r.option[o].monthly_micro_usd);
        assert_null(r.option[o].cumulative_micro_usd);
        assert_int_equal(r.option[o].total_micro_usd, 0);
        assert_int_equal(r.option[o].break_even_month, 0);
    }
    tco_result_free(&r);

    /* Priced from the a3 alone, all four are GCP's, and the 1-year reservation is below
     * that same listing's on-demand price, as a commitment discount is. */
    tco_prices(a3, none, in.price, from);
    for (int p = 0; p < TCO_PRICE_COUNT; p++) {
        assert_int_equal(in.price[p].micro_usd_per_hour, tco_listed_price(a3, p));
        assert_int_equal(in.price[p].gpus, 8);
        assert_int_equal(from[p], TCO_FROM_INSTANCE);
    }
    assert_true(tco_price_per_gpu_hour(&in.price[TCO_PRICE_RESERVED_1Y]) <
                tco_price_per_gpu_hour(&in.price[TCO_PRICE_ON_DEMAND]));
    buf_free(&err);
}

/* A price given by the user wins over the instance's and fills one it lacks; the others
 * stay the instance's. Without an instance only the given prices are known. */
static void test_prices_given(void **state)
{
    const InstancePrice *p5 = pricing_find("aws/p5.48xlarge");
    const int64_t given[TCO_PRICE_COUNT] = {[TCO_PRICE_ON_DEMAND] = 7000000,
                                            [TCO_PRICE_RESERVED_1Y] = -1,
                                            [TCO_PRICE_RESERVED_3Y] = 4500000,
                                            [TCO_PRICE_SPOT] = -1};
    TcoCloudPrice price[TCO_PRICE_COUNT];
    TcoPriceFrom from[TCO_PRICE_COUNT];
    tco_prices(p5, given, price, from);
    assert_int_equal(price[TCO_PRICE_ON_DEMAND].micro_usd_per_hour, 7000000);
    assert_int_equal(price[TCO_PRICE_ON_DEMAND].gpus, 1);
    assert_int_equal(from[TCO_PRICE_ON_DEMAND], TCO_FROM_GIVEN);
    assert_int_equal(price[TCO_PRICE_RESERVED_3Y].micro_usd_per_hour, 4500000);
    assert_int_equal(from[TCO_PRICE_RESERVED_3Y], TCO_FROM_GIVEN);
    assert_int_equal(from[TCO_PRICE_RESERVED_1Y], TCO_FROM_NONE);
    assert_int_equal(from[TCO_PRICE_SPOT], TCO_FROM_NONE);

    tco_prices(NULL, given, price, from);
    assert_int_equal(from[TCO_PRICE_ON_DEMAND], TCO_FROM_GIVEN);
    assert_int_equal(from[TCO_PRICE_RESERVED_1Y], TCO_FROM_NONE);
    assert_true(tco_price_per_gpu_hour(&price[TCO_PRICE_RESERVED_1Y]) < 0);
    assert_true(tco_price_per_gpu_hour(&price[TCO_PRICE_SPOT]) < 0);

    /* A spot mix needs only the prices its share uses. */
    const double hours[] = {100};
    TcoInput in = base_case(hours);
    memcpy(in.price, price, sizeof(price));
    in.spot_share = 0;
    assert_int_equal(tco_option_missing(&in, TCO_SPOT_MIX), -1);
    in.spot_share = 1;
    assert_int_equal(tco_option_missing(&in, TCO_SPOT_MIX), TCO_PRICE_SPOT);
    in.price[TCO_PRICE_SPOT] = (TcoCloudPrice){2000000, 1};
    in.price[TCO_PRICE_ON_DEMAND] = (TcoCloudPrice){PRICE_UNKNOWN, 0};
    assert_int_equal(tco_option_missing(&in, TCO_SPOT_MIX), -1);
    in.spot_share = 0.5;
    assert_int_equal(tco_option_missing(&in, TCO_SPOT_MIX), TCO_PRICE_ON_DEMAND);
}

/* The instance priced by default: the first listing of the GPU with the server's GPU
 * count that has an on-demand price. */
static void test_default_instance(void **state)
{
    const GpuModel *h100 = catalog_find("H100-80GB-SXM5");
    assert_non_null(h100);
    assert_ptr_equal(tco_default_instance(h100, 8), pricing_find("aws/p5.48xlarge"));
    assert_null(tco_default_instance(h100, 4));
    assert_null(tco_default_instance(NULL, 8));
    /* p5e.48xlarge, listed first, has no price at all: p5en.48xlarge is priced. */
    const GpuModel *h200 = catalog_find("H200-141GB");
    assert_non_null(h200);
    assert_true(pricing_find("aws/p5e.48xlarge")->on_demand_micro_usd < 0);
    assert_ptr_equal(tco_default_instance(h200, 8), pricing_find("aws/p5en.48xlarge"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hand_worked_case),    cmocka_unit_test(test_short_period),
        cmocka_unit_test(test_growth_and_refresh),  cmocka_unit_test(test_fleet_size_exact),
        cmocka_unit_test(test_zero_usage),          cmocka_unit_test(test_rounding_and_electricity),
        cmocka_unit_test(test_bad_input),           cmocka_unit_test(test_names),
        cmocka_unit_test(test_prices_one_instance), cmocka_unit_test(test_prices_given),
        cmocka_unit_test(test_default_instance),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
