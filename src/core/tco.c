/* tco.c: the owned-versus-cloud arithmetic of tco.h, and the cloud prices it is given
 * (one instance's, or the user's). Every figure of a cost line for a month is one
 * floating-point product rounded once (half away from zero, llround) to micro-dollars,
 * and checked against TCO_MAX_MONTH_MICRO_USD before it is summed, so the integer sums
 * cannot overflow and the results can be checked by hand. */
#include "core/tco.h"

#include "util/macro.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const option_names[TCO_OPTION_COUNT] = {"on_demand", "reserved_1y",
                                                           "reserved_3y", "spot_mix"};
static const char *const price_names[TCO_PRICE_COUNT] = {"on_demand", "reserved_1y", "reserved_3y",
                                                         "spot"};

const char *tco_option_name(TcoOption o)
{
    return (unsigned)o < TCO_OPTION_COUNT ? option_names[o] : "?";
}

const char *tco_price_name(TcoPrice p)
{
    return (unsigned)p < TCO_PRICE_COUNT ? price_names[p] : "?";
}

int tco_price_from_name(const char *name)
{
    for (int p = 0; name && p < TCO_PRICE_COUNT; p++) {
        const char *a = name, *b = price_names[p];
        while (*a && *b && (*a == *b || (*a == '-' && *b == '_')))
            a++, b++;
        if (!*a && !*b)
            return p;
    }
    return -1;
}

static bool price_known(const TcoCloudPrice *p)
{
    return p->micro_usd_per_hour >= 0 && p->gpus > 0;
}

double tco_price_per_gpu_hour(const TcoCloudPrice *p)
{
    return price_known(p) ? (double)p->micro_usd_per_hour / p->gpus : -1;
}

/* A figure in micro-dollars rounded half away from zero; -ERANGE past the cap. */
static int money(double micro, const char *what, int64_t *ret, Buf *err)
{
    if (!(micro >= 0) || micro > (double)TCO_MAX_MONTH_MICRO_USD) {
        buf_printf(err, "%s comes to more than $1,000,000,000 a month; check the inputs", what);
        return -ERANGE;
    }
    *ret = llround(micro);
    return 0;
}

static bool finite_in(double x, double lo, double hi)
{
    return isfinite(x) && x >= lo && x <= hi;
}

static int check_input(const TcoInput *in, Buf *err)
{
#define BAD(...)                                                                                   \
    do {                                                                                           \
        buf_printf(err, __VA_ARGS__);                                                              \
        return -EINVAL;                                                                            \
    } while (0)
    if (!in->gpu_hours || in->n_gpu_hours == 0)
        BAD("no GPU-hours given");
    for (size_t i = 0; i < in->n_gpu_hours; i++)
        if (!finite_in(in->gpu_hours[i], 0, 1e12))
            BAD("the GPU-hours of month %zu must be a number from 0 to 1e12", i + 1);
    if (in->months < 1 || in->months > TCO_MAX_MONTHS)
        BAD("the period must be 1 to %d months", TCO_MAX_MONTHS);
    if (in->gpus_per_server < 1)
        BAD("a server must have at least 1 GPU");
    if (!finite_in(in->max_utilisation, 0, 1) || in->max_utilisation == 0)
        BAD("the planned utilisation must be above 0%% and at most 100%%");
    if (in->capex_micro_usd < 0 || in->capex_micro_usd > TCO_MAX_MONTH_MICRO_USD)
        BAD("the capex per server must be from $0 to $1,000,000,000");
    if (in->depreciation_months < 1)
        BAD("the depreciation period must be at least 1 month");
    if (!finite_in(in->power_kw, 0, 1e6) || !finite_in(in->typical_kw, 0, 1e6))
        BAD("the power per server must be from 0 to 1,000,000 kW");
    if (!finite_in(in->colo_usd_per_kw_month, 0, 1e9))
        BAD("the colocation price must be from $0 to $1e9 per kW-month");
    if (!finite_in(in->electricity_usd_per_kwh, 0, 1e6))
        BAD("the electricity price must be from $0 to $1e6 per kWh");
    if (!finite_in(in->ops_pct_per_year, 0, 100))
        BAD("the operations share must be 0%% to 100%% of capex per year");
    if (!finite_in(in->spot_share, 0, 1))
        BAD("the spot share must be 0%% to 100%%");
    for (int p = 0; p < TCO_PRICE_COUNT; p++)
        if (in->price[p].micro_usd_per_hour >= 0 && in->price[p].gpus == 0)
            BAD("the %s price is for an instance of 0 GPUs", price_names[p]);
    return 0;
#undef BAD
}

static int line_alloc(TcoLine *l, uint32_t months)
{
    l->monthly_micro_usd = calloc(months, sizeof(int64_t));
    l->cumulative_micro_usd = calloc(months, sizeof(int64_t));
    if (!l->monthly_micro_usd || !l->cumulative_micro_usd)
        return -ENOMEM;
    l->priced = true;
    return 0;
}

static void line_free(TcoLine *l)
{
    free(l->monthly_micro_usd);
    free(l->cumulative_micro_usd);
}

/* Cumulative figures and the total from the monthly ones. */
static void line_sum(TcoLine *l, uint32_t months)
{
    int64_t sum = 0;
    for (uint32_t m = 0; m < months; m++)
        l->cumulative_micro_usd[m] = sum += l->monthly_micro_usd[m];
    l->total_micro_usd = sum;
}

/* The first month from which owning stays strictly cheaper to the end; 0 for none. Ties
 * are not "cheaper", so with no usage at all nothing breaks even. */
static uint32_t break_even(const TcoLine *owned, const TcoLine *cloud, uint32_t months)
{
    uint32_t m = months;
    while (m > 0 && owned->cumulative_micro_usd[m - 1] < cloud->cumulative_micro_usd[m - 1])
        m--;
    return m == months ? 0 : m + 1;
}

static int owned_line(const TcoInput *in, TcoResult *r, Buf *err)
{
    double n = r->servers;
    int rc;
    if ((rc = money(n * (double)in->capex_micro_usd, "the fleet's capex", &r->capex_micro_usd,
                    err)) < 0 ||
        (rc = money(n * in->power_kw * in->colo_usd_per_kw_month * 1e6, "colocation",
                    &r->colo_micro_usd, err)) < 0 ||
        (rc = money(n * in->typical_kw * TCO_HOURS_PER_MONTH * in->electricity_usd_per_kwh * 1e6,
                    "electricity", &r->electricity_micro_usd, err)) < 0 ||
        (rc = money(n * (double)in->capex_micro_usd * in->ops_pct_per_year / 100.0 / 12.0,
                    "operations", &r->ops_micro_usd, err)) < 0)
        return rc;
    r->running_micro_usd = r->colo_micro_usd + r->electricity_micro_usd + r->ops_micro_usd;
    int64_t per_month;
    if ((rc = money((double)r->capex_micro_usd / in->depreciation_months, "capex per month",
                    &per_month, err)) < 0)
        return rc;
    r->amortised_micro_usd = per_month + r->running_micro_usd;

    /* Bought in month 1 and again at the start of each depreciation period. */
    uint32_t dep = in->depreciation_months, last_buy = 0;
    r->purchases = 0;
    for (uint32_t m = 0; m < r->months; m++) {
        int64_t v = r->running_micro_usd;
        if (m % dep == 0) {
            v += r->capex_micro_usd;
            r->purchases++;
            last_buy = m;
        }
        r->owned.monthly_micro_usd[m] = v;
    }
    uint32_t used = r->months - last_buy; /* months the last purchase served */
    r->book_value_micro_usd =
        used >= dep ? 0 : llround((double)r->capex_micro_usd * (double)(dep - used) / dep);
    line_sum(&r->owned, r->months);
    return 0;
}

/* GPU-hours on one price: hours x price per GPU-hour. */
static double on_price(double gpu_hours, const TcoCloudPrice *p)
{
    return gpu_hours * (double)p->micro_usd_per_hour / p->gpus;
}

int tco_option_missing(const TcoInput *in, TcoOption o)
{
    const TcoCloudPrice *p = in->price;
    switch (o) {
    case TCO_ON_DEMAND:
        return price_known(&p[TCO_PRICE_ON_DEMAND]) ? -1 : TCO_PRICE_ON_DEMAND;
    case TCO_RESERVED_1Y:
        return price_known(&p[TCO_PRICE_RESERVED_1Y]) ? -1 : TCO_PRICE_RESERVED_1Y;
    case TCO_RESERVED_3Y:
        return price_known(&p[TCO_PRICE_RESERVED_3Y]) ? -1 : TCO_PRICE_RESERVED_3Y;
    default:
        if (in->spot_share > 0 && !price_known(&p[TCO_PRICE_SPOT]))
            return TCO_PRICE_SPOT;
        if (in->spot_share < 1 && !price_known(&p[TCO_PRICE_ON_DEMAND]))
            return TCO_PRICE_ON_DEMAND;
        return -1;
    }
}

int64_t tco_listed_price(const InstancePrice *ip, TcoPrice p)
{
    switch (p) {
    case TCO_PRICE_ON_DEMAND:
        return ip->on_demand_micro_usd;
    case TCO_PRICE_RESERVED_1Y:
        return ip->reserved_1y_micro_usd;
    case TCO_PRICE_RESERVED_3Y:
        return ip->reserved_3y_micro_usd;
    case TCO_PRICE_SPOT:
        return ip->spot_micro_usd;
    default:
        return PRICE_UNKNOWN;
    }
}

const InstancePrice *tco_default_instance(const GpuModel *m, uint32_t gpus)
{
    for (size_t i = 0; m && i < pricing_count(); i++) {
        const InstancePrice *ip = pricing_at(i);
        if (ip->on_demand_micro_usd >= 0 && ip->gpus == gpus && catalog_find(ip->gpu_model) == m)
            return ip;
    }
    return NULL;
}

void tco_prices(const InstancePrice *ip, const int64_t given_micro_usd[TCO_PRICE_COUNT],
                TcoCloudPrice ret_price[TCO_PRICE_COUNT], TcoPriceFrom ret_from[TCO_PRICE_COUNT])
{
    for (int p = 0; p < TCO_PRICE_COUNT; p++) {
        int64_t listed = ip ? tco_listed_price(ip, p) : PRICE_UNKNOWN;
        if (given_micro_usd[p] >= 0) {
            ret_price[p] = (TcoCloudPrice){given_micro_usd[p], 1};
            ret_from[p] = TCO_FROM_GIVEN;
        } else if (listed >= 0) {
            ret_price[p] = (TcoCloudPrice){listed, ip->gpus};
            ret_from[p] = TCO_FROM_INSTANCE;
        } else {
            ret_price[p] = (TcoCloudPrice){PRICE_UNKNOWN, 0};
            ret_from[p] = TCO_FROM_NONE;
        }
    }
}

static int cloud_line(const TcoInput *in, TcoResult *r, TcoOption o, Buf *err)
{
    const TcoCloudPrice *od = &in->price[TCO_PRICE_ON_DEMAND], *spot = &in->price[TCO_PRICE_SPOT];
    const TcoCloudPrice *res = o == TCO_RESERVED_1Y ? &in->price[TCO_PRICE_RESERVED_1Y]
                                                    : &in->price[TCO_PRICE_RESERVED_3Y];
    TcoLine *l = &r->option[o];
    if (tco_option_missing(in, o) >= 0)
        return 0;
    int rc = line_alloc(l, r->months);
    if (rc < 0)
        return rc;
    /* A reservation holds the owned fleet's GPUs every hour of the month. */
    double reserved_hours = (double)r->servers * in->gpus_per_server * TCO_HOURS_PER_MONTH;
    for (uint32_t m = 0; m < r->months; m++) {
        double h = r->gpu_hours[m], v;
        switch (o) {
        case TCO_ON_DEMAND:
            v = on_price(h, od);
            break;
        case TCO_SPOT_MIX:
            v = (in->spot_share > 0 ? on_price(h * in->spot_share, spot) : 0) +
                (in->spot_share < 1 ? on_price(h * (1 - in->spot_share), od) : 0);
            break;
        default:
            v = on_price(reserved_hours, res);
            break;
        }
        if ((rc = money(v, option_names[o], &l->monthly_micro_usd[m], err)) < 0)
            return rc;
    }
    line_sum(l, r->months);
    l->break_even_month = break_even(&r->owned, l, r->months);
    if (o == TCO_RESERVED_1Y || o == TCO_RESERVED_3Y) {
        l->term_months = o == TCO_RESERVED_1Y ? 12 : 36;
        uint32_t left = (l->term_months - r->months % l->term_months) % l->term_months;
        l->committed_after_micro_usd = (int64_t)left * l->monthly_micro_usd[0];
    }
    return 0;
}

int tco_compute(const TcoInput *in, TcoResult *ret, Buf *err)
{
    int rc = check_input(in, err);
    if (rc < 0)
        return rc;
    TcoResult r = {.months = in->months};
    r.gpu_hours = calloc(in->months, sizeof(double));
    if (!r.gpu_hours || line_alloc(&r.owned, in->months) < 0) {
        rc = -ENOMEM;
        goto fail;
    }
    for (uint32_t m = 0; m < in->months; m++) {
        r.gpu_hours[m] = in->gpu_hours[MIN((size_t)m, in->n_gpu_hours - 1)];
        if (r.gpu_hours[m] > r.peak_gpu_hours)
            r.peak_gpu_hours = r.gpu_hours[m];
    }
    /* The small slack keeps a peak that fills the fleet exactly (4672 = 8 x 730 x 0.8)
     * from asking for one more server through rounding in the product. */
    double per_server = (double)in->gpus_per_server * TCO_HOURS_PER_MONTH * in->max_utilisation;
    double servers = ceil(r.peak_gpu_hours / per_server - 1e-9);
    if (servers > 1e6) {
        buf_printf(err, "%.0f GPU-hours a month need more than a million servers",
                   r.peak_gpu_hours);
        rc = -ERANGE;
        goto fail;
    }
    r.servers = servers > 0 ? (uint32_t)servers : 0;
    if ((rc = owned_line(in, &r, err)) < 0)
        goto fail;
    for (int o = 0; o < TCO_OPTION_COUNT; o++)
        if ((rc = cloud_line(in, &r, o, err)) < 0)
            goto fail;
    *ret = r;
    return 0;
fail:
    tco_result_free(&r);
    return rc;
}

void tco_result_free(TcoResult *r)
{
    if (!r)
        return;
    free(r->gpu_hours);
    line_free(&r->owned);
    for (int o = 0; o < TCO_OPTION_COUNT; o++)
        line_free(&r->option[o]);
    memset(r, 0, sizeof(*r));
}
