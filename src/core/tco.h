/* tco.h: owned versus cloud, month by month: what running a given number of GPU-hours
 * per month costs on servers bought outright, and on each cloud option (on-demand, 1- and
 * 3-year reserved, a spot mix), with the month from which owning stays cheaper.
 *
 * Pure arithmetic (docs/tco.md has the model and its assumptions). Money is int64
 * micro-dollars. Each month's figure of each cost line is computed in floating point
 * from the inputs and rounded once, half away from zero, to whole micro-dollars; sums
 * over lines and months are then exact integer sums. A month is 730 hours (8760 / 12).
 *
 * Owning is counted as cash: a server is paid for in full when bought (month 1, and
 * again at the start of each depreciation period when the period is longer), then costs
 * colocation (billed per contracted kW, power included), electricity when it is billed
 * apart (the typical draw, all month), and operations (a share of the capex per year).
 * The fleet is sized once for the peak month: ceil(peak GPU-hours / (GPUs per server x
 * 730 h x the highest utilisation a fleet is planned at)). The amortised monthly figure
 * (capex spread over the depreciation period, plus running costs) is reported beside.
 *
 * Cloud: on-demand pays for the GPU-hours used; a reservation pays for the same
 * capacity as the owned fleet every hour of every month, used or not; the spot mix runs
 * a share of the GPU-hours on spot and the rest on demand. Every cloud price of one
 * comparison is the one instance's (tco_prices) or given by the user: a reservation of
 * one cloud set against another cloud's on-demand price compares nothing real. */
#pragma once

#include "core/catalog.h"
#include "core/pricing.h"
#include "util/buf.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TCO_HOURS_PER_MONTH 730
#define TCO_MAX_MONTHS      600 /* 50 years */
/* The largest figure of one cost line in one month ($1e9): keeps every sum over
 * TCO_MAX_MONTHS months of all lines far inside int64. */
#define TCO_MAX_MONTH_MICRO_USD (INT64_C(1000000000) * 1000000)

/* The prices a cloud option is made of. */
typedef enum TcoPrice {
    TCO_PRICE_ON_DEMAND,
    TCO_PRICE_RESERVED_1Y,
    TCO_PRICE_RESERVED_3Y,
    TCO_PRICE_SPOT,
    TCO_PRICE_COUNT,
} TcoPrice;

/* The cloud options compared with owning. */
typedef enum TcoOption {
    TCO_ON_DEMAND,
    TCO_RESERVED_1Y,
    TCO_RESERVED_3Y,
    TCO_SPOT_MIX,
    TCO_OPTION_COUNT,
} TcoOption;

/* A price as the catalogue gives it: per instance-hour, for an instance of `gpus` GPUs
 * (a price per GPU-hour is one of 1 GPU). Unknown when micro_usd_per_hour < 0. */
typedef struct TcoCloudPrice {
    int64_t micro_usd_per_hour;
    uint32_t gpus;
} TcoCloudPrice;

typedef struct TcoInput {
    /* GPU-hours (GPU-equivalents x hours) used in months 1, 2, ...; months after the
     * last one given use the last figure. At least one, each >= 0. */
    const double *gpu_hours;
    size_t n_gpu_hours;
    uint32_t months; /* the period compared, 1..TCO_MAX_MONTHS */

    uint32_t gpus_per_server;       /* >= 1 */
    double max_utilisation;         /* (0, 1]: the busiest a fleet is planned to run */
    int64_t capex_micro_usd;        /* per server, >= 0 */
    uint32_t depreciation_months;   /* >= 1 */
    double power_kw;                /* contracted per server (colocation bills it), >= 0 */
    double colo_usd_per_kw_month;   /* >= 0, power included up to the contracted kW */
    double typical_kw;              /* drawn per server all month, for electricity; >= 0 */
    double electricity_usd_per_kwh; /* >= 0; 0 when the colocation price includes it */
    double ops_pct_per_year;        /* of capex, 0..100 */

    double spot_share;                    /* [0, 1] of GPU-hours on spot */
    TcoCloudPrice price[TCO_PRICE_COUNT]; /* unknown ones leave options out */
} TcoInput;

/* One way of paying, month by month. Arrays have TcoResult.months entries. */
typedef struct TcoLine {
    bool priced;                   /* false: a price it needs is unknown; rest empty */
    int64_t *monthly_micro_usd;    /* owned */
    int64_t *cumulative_micro_usd; /* owned */
    int64_t total_micro_usd;       /* the cumulative figure of the last month */
    /* Cloud options: the first month (from 1) from which owning's cumulative cost stays
     * below this option's to the end of the period; 0 when it never does. */
    uint32_t break_even_month;
    /* Reservations: the term in months, and what the term still commits to after the
     * period ends (a 3-year term compared over 1 year still owes 24 months). */
    uint32_t term_months;
    int64_t committed_after_micro_usd;
} TcoLine;

typedef struct TcoResult {
    uint32_t months;
    double *gpu_hours; /* owned, [months]: the usage of each month */
    double peak_gpu_hours;
    uint32_t servers;
    uint32_t purchases; /* times the fleet is bought within the period */
    /* Owned, per month for the whole fleet. */
    int64_t capex_micro_usd;       /* one purchase of the fleet */
    int64_t colo_micro_usd;        /* colocation */
    int64_t electricity_micro_usd; /* electricity billed apart */
    int64_t ops_micro_usd;         /* operations */
    int64_t running_micro_usd;     /* colo + electricity + ops */
    int64_t amortised_micro_usd;   /* capex / depreciation months + running */
    int64_t book_value_micro_usd;  /* capex not yet depreciated at the end (not credited) */
    TcoLine owned;
    TcoLine option[TCO_OPTION_COUNT];
} TcoResult;

/* Compute the comparison. 0; -EINVAL (an input out of range, err says which), -ERANGE
 * (a monthly figure beyond TCO_MAX_MONTH_MICRO_USD, err says which) or -ENOMEM. *ret is
 * written only on success and owned by the caller (tco_result_free). */
int tco_compute(const TcoInput *in, TcoResult *ret, Buf *err);
void tco_result_free(TcoResult *r);

/* "on_demand", "reserved_1y", "reserved_3y", "spot_mix"; and the prices' names
 * "on_demand", "reserved_1y", "reserved_3y", "spot". */
const char *tco_option_name(TcoOption o);
const char *tco_price_name(TcoPrice p);
/* A price by name, '-' and '_' alike ("on-demand"); -1 when unknown. */
int tco_price_from_name(const char *name);
/* The price per GPU-hour in micro-dollars (fractional), or -1 when unknown. */
double tco_price_per_gpu_hour(const TcoCloudPrice *p);

/* The first price option o needs that is unknown (a spot mix needs the spot price
 * unless its spot share is 0, and the on-demand one unless it is 1); -1 when all are
 * known. An option missing one is left out of the arithmetic, break-even included. */
int tco_option_missing(const TcoInput *in, TcoOption o);

/* A listing's price p per instance-hour; PRICE_UNKNOWN where it lists none. */
int64_t tco_listed_price(const InstancePrice *ip, TcoPrice p);

/* The instance a comparison prices when none is named: the catalogue's first listing of
 * GPU model m with `gpus` GPUs that has an on-demand price; NULL when there is none. */
const InstancePrice *tco_default_instance(const GpuModel *m, uint32_t gpus);

/* Where a price of a comparison came from. */
typedef enum TcoPriceFrom {
    TCO_FROM_NONE,     /* unknown: neither given nor listed by the instance */
    TCO_FROM_GIVEN,    /* given by the user */
    TCO_FROM_INSTANCE, /* the instance's own listing */
} TcoPriceFrom;

/* The cloud prices of a comparison. A price given (micro-dollars per GPU-hour, < 0 when
 * not given) is used as it is; every other is the one instance ip's (NULL: no instance),
 * and unknown where ip lists none: never another listing's, even of the same GPU. */
void tco_prices(const InstancePrice *ip, const int64_t given_micro_usd[TCO_PRICE_COUNT],
                TcoCloudPrice ret_price[TCO_PRICE_COUNT], TcoPriceFrom ret_from[TCO_PRICE_COUNT]);
