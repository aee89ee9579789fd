/* tco.c: `gpuorch tco`: owned versus cloud. Reads the GPU-hours per month (given, from
 * a `gpuorch usage -o csv` file, or from a server's /api/v1/usage), fills every figure
 * the user did not give from the pricing catalogue (core/pricing.h) or a documented
 * default, notes where each came from, runs core/tco.c and prints the comparison
 * (tco_render.c). docs/tco.md describes the model and the defaults. */
#include "core/tco.h"
#include "cli/cli.h"
#include "cli/client.h"
#include "cli/tco_render.h"
#include "core/catalog.h"
#include "core/pricing.h"
#include "util/csv.h"
#include "util/file.h"
#include "util/macro.h"
#include "util/units.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define DEFAULT_OPS_PCT      10.0
#define DEFAULT_MAX_UTIL_PCT 80.0
#define DEFAULT_SPOT_PCT     50.0
#define DEFAULT_SPAN_DAYS    30.0 /* the window `gpuorch usage` reports by default */
#define MAX_YEARS            (TCO_MAX_MONTHS / 12)
#define MAX_USD_PER_GPU_HOUR 1e6
#define MAX_CAPEX_USD        1e9
#define MAX_GPU_HOURS        1e12
#define IDLE_TEAM            "(idle)" /* the team of /usage's idle showback lines */

static void tco_usage(FILE *f)
{
    fprintf(
        f, "usage: gpuorch tco (--gpu-hours N[,N...] | --usage FILE | --from-server) [OPTIONS]\n\n"
           "Compares owning GPU servers (bought outright) with renting the same GPU-hours\n"
           "in the cloud: on-demand, 1- and 3-year reserved, and a spot mix. Prints the\n"
           "month from which owning stays cheaper and the cost over the period; every\n"
           "figure not given is taken from the pricing catalogue or a default, and printed\n"
           "with its source. The model: docs/tco.md.\n\n"
           "Usage, one of:\n"
           "  --gpu-hours LIST        GPU-hours per month: one figure for every month, or\n"
           "                          months 1, 2, ... (\"1000,2000,4000\"; the last repeats)\n"
           "  --usage FILE            the CSV of 'gpuorch usage -o csv': its gpu_hours summed;\n"
           "                          per month when it has a month column (YYYY-MM), else\n"
           "                          over the span of --days D (default 30) or --months N\n"
           "  --from-server           the last 30 days from the server's /api/v1/usage\n\n"
           "Owning:\n"
           "  --gpu MODEL             GPU model (default: the catalogue's H100 server)\n"
           "  --gpus-per-server N     GPUs in a server (default: the catalogue's, else 8)\n"
           "  --capex USD             price of one server, all-in\n"
           "  --power-kw KW           contracted power per server (colocation bills it)\n"
           "  --typical-kw KW         typical draw, for --electricity-usd-per-kwh\n"
           "  --colo-usd-per-kw-month X  colocation, power included up to the contracted kW\n"
           "  --electricity-usd-per-kwh X  electricity billed apart (default 0: included)\n"
           "  --ops-pct P             operations a year, percent of capex (default 10)\n"
           "  --max-util P            busiest a fleet is planned to run, percent (default 80)\n"
           "  --depreciation-years N  (default: the catalogue's shortest, 3)\n"
           "  --years N               the period compared (default: the depreciation period)\n\n"
           "Cloud:\n"
           "  --instance ID           the one catalogue instance every price comes from\n"
           "                          (default: the GPU's first listing with an on-demand\n"
           "                          price); a price it lists none for is not priced\n"
           "  --cloud-price OPTION=USD  a price per GPU-hour, over the instance's; OPTION is\n"
           "                          on_demand, reserved_1y, reserved_3y or spot (repeat)\n"
           "  --spot-share P          percent of GPU-hours on spot in the spot mix (default 50)\n\n"
           "Output:\n"
           "  -o, --output FORMAT     table (default) or json\n"
           "  --out DIR               write DIR/tco.svg: cumulative costs, break-evens "
           "marked\n" CLIENT_HELP
           "\nExit 0 on success, 2 on bad usage or bad input, 1 when the server or a write\n"
           "fails.\n");
}

enum {
    OPT_USAGE = 0x200,
    OPT_FROM_SERVER,
    OPT_GPU_HOURS,
    OPT_MONTHS,
    OPT_DAYS,
    OPT_GPU,
    OPT_GPUS_PER_SERVER,
    OPT_CAPEX,
    OPT_POWER,
    OPT_TYPICAL,
    OPT_COLO,
    OPT_ELECTRICITY,
    OPT_OPS,
    OPT_MAX_UTIL,
    OPT_DEPRECIATION,
    OPT_YEARS,
    OPT_INSTANCE,
    OPT_CLOUD_PRICE,
    OPT_SPOT_SHARE,
    OPT_OUT,
};

typedef struct TcoArgs {
    const Client *c;
    const char *usage_file, *gpu_hours, *months, *days;
    bool from_server;
    const char *gpu, *gpus_per_server, *capex, *power_kw, *typical_kw, *colo, *electricity;
    const char *ops, *max_util, *depreciation, *years, *instance, *spot_share, *out;
    double cloud_price_usd[TCO_PRICE_COUNT]; /* < 0: not given */
} TcoArgs;

/* A number written in full ("8", "2.5", "1e3"; no "nan", "inf" or hex) within [lo, hi]. */
static bool parse_number(const char *s, double lo, double hi, double *ret)
{
    if (!*s || strspn(s, "0123456789.eE+-") != strlen(s))
        return false;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (*end || errno || !isfinite(v) || v < lo || v > hi)
        return false;
    *ret = v;
    return true;
}

static int cloud_price_option(TcoArgs *a, const char *arg)
{
    const char *eq = strchr(arg, '=');
    char name[32];
    if (!eq || (size_t)(eq - arg) >= sizeof(name)) {
        client_error(a->c, "--cloud-price takes OPTION=USD_PER_GPU_HOUR, not '%s'", arg);
        return 2;
    }
    memcpy(name, arg, (size_t)(eq - arg));
    name[eq - arg] = '\0';
    int p = tco_price_from_name(name);
    if (p < 0) {
        client_error(a->c,
                     "--cloud-price: unknown option '%s' (on_demand, reserved_1y, reserved_3y "
                     "or spot)",
                     name);
        return 2;
    }
    if (a->cloud_price_usd[p] >= 0) {
        client_error(a->c, "--cloud-price %s given twice", tco_price_name(p));
        return 2;
    }
    if (!parse_number(eq + 1, 0, MAX_USD_PER_GPU_HOUR, &a->cloud_price_usd[p])) {
        client_error(a->c,
                     "--cloud-price %s: expected dollars per GPU-hour from 0 to 1000000, not "
                     "'%s'",
                     name, eq + 1);
        return 2;
    }
    return 0;
}

static int tco_option(void *ctx, int opt, const char *arg)
{
    TcoArgs *a = ctx;
    const char **slot = NULL;
    switch (opt) {
    case OPT_FROM_SERVER:
        a->from_server = true;
        return 0;
    case OPT_CLOUD_PRICE:
        return cloud_price_option(a, arg);
    case OPT_USAGE:
        slot = &a->usage_file;
        break;
    case OPT_GPU_HOURS:
        slot = &a->gpu_hours;
        break;
    case OPT_MONTHS:
        slot = &a->months;
        break;
    case OPT_DAYS:
        slot = &a->days;
        break;
    case OPT_GPU:
        slot = &a->gpu;
        break;
    case OPT_GPUS_PER_SERVER:
        slot = &a->gpus_per_server;
        break;
    case OPT_CAPEX:
        slot = &a->capex;
        break;
    case OPT_POWER:
        slot = &a->power_kw;
        break;
    case OPT_TYPICAL:
        slot = &a->typical_kw;
        break;
    case OPT_COLO:
        slot = &a->colo;
        break;
    case OPT_ELECTRICITY:
        slot = &a->electricity;
        break;
    case OPT_OPS:
        slot = &a->ops;
        break;
    case OPT_MAX_UTIL:
        slot = &a->max_util;
        break;
    case OPT_DEPRECIATION:
        slot = &a->depreciation;
        break;
    case OPT_YEARS:
        slot = &a->years;
        break;
    case OPT_INSTANCE:
        slot = &a->instance;
        break;
    case OPT_SPOT_SHARE:
        slot = &a->spot_share;
        break;
    case OPT_OUT:
        slot = &a->out;
        break;
    default:
        return -1;
    }
    *slot = arg;
    return 0;
}

/* ---- facts: a value with where it came from ---- */

static void fact_json_str(TcoFact *f, const char *s)
{
    Buf b = {0};
    buf_json_str(&b, s);
    tco_fact_json(f, "%s", b.oom ? "null" : buf_str(&b));
    buf_free(&b);
}

static void fact_usd(TcoReport *rep, const char *key, const char *label, int64_t micro,
                     const char *source)
{
    TcoFact *f = tco_fact(rep, key, label, source);
    Buf b = {0};
    tco_format_usd(&b, micro, micro % 1000000 != 0);
    tco_fact_text(f, "%s", buf_str(&b));
    buf_reset(&b);
    tco_json_usd(&b, micro);
    tco_fact_json(f, "%s", buf_str(&b));
    buf_free(&b);
}

/* A number; in the table written into `unit` where it says %g ("$%g", "%g kW"; not a
 * printf format, so a "%" after it is plain text). */
static void fact_num(TcoReport *rep, const char *key, const char *label, double v, const char *unit,
                     const char *source)
{
    TcoFact *f = tco_fact(rep, key, label, source);
    const char *pct = strstr(unit, "%g");
    tco_fact_text(f, "%.*s%g%s", pct ? (int)(pct - unit) : 0, unit, v, pct ? pct + 2 : unit);
    tco_fact_json(f, "%.10g", v);
}

/* ---- the GPU-hours per month ---- */

typedef struct Usage {
    double *hours; /* per month */
    size_t n;
    char source[200];
} Usage;

static int usage_from_list(const TcoArgs *a, Usage *u)
{
    _cleanup_free_ char *copy = strdup(a->gpu_hours);
    if (!copy) {
        client_oom(a->c);
        return 1;
    }
    size_t n = 1;
    for (const char *p = copy; *p; p++)
        n += *p == ',';
    if (n > TCO_MAX_MONTHS) {
        client_error(a->c, "--gpu-hours: at most %d months", TCO_MAX_MONTHS);
        return 2;
    }
    u->hours = calloc(n, sizeof(double));
    if (!u->hours) {
        client_oom(a->c);
        return 1;
    }
    char *save = NULL, *s = copy;
    for (size_t i = 0; i < n; i++, s = NULL) {
        char *t = strtok_r(s, ",", &save);
        if (!t || !parse_number(t, 0, MAX_GPU_HOURS, &u->hours[i])) {
            client_error(a->c,
                         "--gpu-hours takes GPU-hours per month (numbers from 0, separated by "
                         "commas), not '%s'",
                         a->gpu_hours);
            return 2;
        }
    }
    u->n = n;
    snprintf(u->source, sizeof(u->source), "--gpu-hours");
    return 0;
}

/* The span a usage total covers, in hours: --days, --months or 30 days. */
static int usage_span_hours(const TcoArgs *a, TcoReport *rep, double *ret)
{
    double v;
    if (a->days && a->months) {
        client_error(a->c, "give --days or --months, not both");
        return 2;
    }
    if (a->months) {
        if (!parse_number(a->months, 1e-3, TCO_MAX_MONTHS, &v)) {
            client_error(a->c, "--months must be a number of months above 0, not '%s'", a->months);
            return 2;
        }
        fact_num(rep, "usage_span_months", "usage file covers", v, "%g months", "--months");
        *ret = v * TCO_HOURS_PER_MONTH;
        return 0;
    }
    if (a->days && !parse_number(a->days, 1e-3, TCO_MAX_MONTHS * 31.0, &v)) {
        client_error(a->c, "--days must be a number of days above 0, not '%s'", a->days);
        return 2;
    }
    if (!a->days)
        v = DEFAULT_SPAN_DAYS;
    fact_num(rep, "usage_span_days", "usage file covers", v, "%g days",
             a->days ? "--days" : "default: the window 'gpuorch usage' reports");
    *ret = v * 24;
    return 0;
}

/* "2026-03" -> months since year 0; -1 when not YYYY-MM. */
static long month_index(const char *s)
{
    if (strlen(s) != 7 || s[4] != '-' || strspn(s, "0123456789") != 4 ||
        strspn(s + 5, "0123456789") != 2)
        return -1;
    long y = strtol(s, NULL, 10), m = strtol(s + 5, NULL, 10);
    return m >= 1 && m <= 12 ? y * 12 + m - 1 : -1;
}

typedef struct MonthSum {
    long index;
    double hours;
} MonthSum;

/* Months from the first to the last listed, those not listed at 0 GPU-hours. */
static int months_series(const TcoArgs *a, const MonthSum *ms, size_t n, Usage *u)
{
    long lo = ms[0].index, hi = ms[0].index;
    for (size_t i = 1; i < n; i++) {
        lo = MIN(lo, ms[i].index);
        hi = MAX(hi, ms[i].index);
    }
    if (hi - lo + 1 > TCO_MAX_MONTHS) {
        client_error(a->c, "%s: its months span more than %d months", a->usage_file,
                     TCO_MAX_MONTHS);
        return 2;
    }
    u->n = (size_t)(hi - lo + 1);
    if (!(u->hours = calloc(u->n, sizeof(double)))) {
        client_oom(a->c);
        return 1;
    }
    for (size_t i = 0; i < n; i++)
        u->hours[ms[i].index - lo] += ms[i].hours;
    return 0;
}

static int usage_from_csv(const TcoArgs *a, TcoReport *rep, Usage *u)
{
    _cleanup_free_ char *data = NULL;
    _cleanup_free_ MonthSum *ms = NULL;
    size_t len, n_ms = 0, ms_cap = 0, rows = 0;
    int r = file_read_all(a->usage_file, &data, &len);
    if (r < 0) {
        client_error(a->c, "%s: %s", a->usage_file, strerror(-r));
        return 2;
    }
    CsvReader csv;
    csv_init(&csv, data, len);
    int rc = 2, col_hours = -1, col_month = -1, col_team = -1, col_kind = -1;
    size_t idle = 0;
    double total = 0;
    if ((r = csv_next(&csv)) == 1) {
        col_hours = csv_column(&csv, "gpu_hours");
        col_month = csv_column(&csv, "month");
        col_team = csv_column(&csv, "team");
        col_kind = csv_column(&csv, "kind");
    }
    if (col_hours < 0) {
        client_error(a->c,
                     "%s: no gpu_hours column in the first line (the CSV of 'gpuorch "
                     "usage -o csv')",
                     a->usage_file);
        goto out;
    }
    while ((r = csv_next(&csv)) == 1) {
        double h;
        size_t need = (size_t)MAX(col_hours, col_month) + 1;
        if (csv.nfields < need || !parse_number(csv.fields[col_hours], 0, MAX_GPU_HOURS, &h)) {
            client_error(a->c, "%s:%zu: gpu_hours must be a number from 0, not '%s'", a->usage_file,
                         csv.line, csv.nfields > (size_t)col_hours ? csv.fields[col_hours] : "");
            goto out;
        }
        /* Idle showback lines are capacity nobody used, not usage (marked by their kind,
         * and by their team in files from before the kind column) */
        if ((col_kind >= 0 && (size_t)col_kind < csv.nfields &&
             !strcmp(csv.fields[col_kind], "idle")) ||
            (col_team >= 0 && (size_t)col_team < csv.nfields &&
             !strcmp(csv.fields[col_team], IDLE_TEAM))) {
            idle++;
            continue;
        }
        rows++;
        total += h;
        if (col_month < 0)
            continue;
        long m = month_index(csv.fields[col_month]);
        if (m < 0) {
            client_error(a->c, "%s:%zu: month must be YYYY-MM, not '%s'", a->usage_file, csv.line,
                         csv.fields[col_month]);
            goto out;
        }
        if (GROW(ms, ms_cap, n_ms + 1) < 0)
            goto out_oom;
        ms[n_ms++] = (MonthSum){m, h};
    }
    if (r < 0) {
        client_error(a->c, "%s:%zu: %s", a->usage_file, csv.line,
                     r == -EINVAL ? "a quote is not closed" : strerror(-r));
        rc = r == -ENOMEM ? 1 : 2;
        goto out;
    }
    if (rows == 0) {
        client_error(a->c, "%s: no usage rows%s", a->usage_file,
                     idle ? " (only idle capacity)" : "");
        goto out;
    }
    if (col_month >= 0) {
        if (a->days || a->months) {
            client_error(a->c, "%s has a month column: --days and --months do not apply",
                         a->usage_file);
            goto out;
        }
        if ((rc = months_series(a, ms, n_ms, u)))
            goto out;
        snprintf(u->source, sizeof(u->source), "%s: %zu rows, %zu months%s", a->usage_file, rows,
                 u->n, idle ? ", idle lines left out" : "");
    } else {
        double span;
        if ((rc = usage_span_hours(a, rep, &span)))
            goto out;
        if (!(u->hours = malloc(sizeof(double))))
            goto out_oom;
        u->hours[0] = total * TCO_HOURS_PER_MONTH / span;
        u->n = 1;
        snprintf(u->source, sizeof(u->source), "%s: %zu rows, %.1f GPU-hours over %g %s%s",
                 a->usage_file, rows, total, a->months ? span / TCO_HOURS_PER_MONTH : span / 24,
                 a->months ? "months" : "days", idle ? ", idle lines left out" : "");
    }
    rc = 0;
    goto out;
out_oom:
    client_oom(a->c);
    rc = 1;
out:
    csv_free(&csv);
    return rc;
}

static int usage_from_server(Client *c, const TcoArgs *a, Usage *u)
{
    if (a->days || a->months) {
        client_error(c, "--days and --months go with --usage FILE");
        return 2;
    }
    int rc = client_connect(c);
    if (rc)
        return rc;
    HttpReply reply = {0};
    json_t *doc = NULL;
    if ((rc = client_call(c, NULL, "GET", "/api/v1/usage?include_idle=false", NULL, NULL, 0,
                          &reply)) ||
        (rc = client_parse(c, &reply, &doc)))
        goto out;
    json_t *total = json_object_get(json_object_get(doc, "total"), "gpu_hours");
    json_t *from = json_object_get(doc, "from_ms"), *to = json_object_get(doc, "to_ms");
    if (!json_is_number(total) || !json_is_integer(from) || !json_is_integer(to) ||
        json_integer_value(to) <= json_integer_value(from) || json_number_value(total) < 0) {
        client_error(c, "the server's usage reply lacks total.gpu_hours, from_ms or to_ms");
        rc = 1;
        goto out;
    }
    double span_h = (double)(json_integer_value(to) - json_integer_value(from)) / 3.6e6;
    if (!(u->hours = malloc(sizeof(double)))) {
        client_oom(c);
        rc = 1;
        goto out;
    }
    u->hours[0] = json_number_value(total) * TCO_HOURS_PER_MONTH / span_h;
    u->n = 1;
    snprintf(u->source, sizeof(u->source), "%s: %.1f GPU-hours over %.4g days", c->server,
             json_number_value(total), span_h / 24);
out:
    json_decref(doc);
    http_reply_free(&reply);
    return rc;
}

/* ---- owning and prices: given, else from the catalogue ---- */

typedef struct Choice {
    const GpuModel *model;
    const OwnedServer *owned;      /* the catalogue's server of that model, or NULL */
    const InstancePrice *instance; /* --instance, or NULL */
} Choice;

static const OwnedServer *owned_for(const GpuModel *m)
{
    for (size_t i = 0; i < pricing_owned_count(); i++)
        if (catalog_find(pricing_owned_at(i)->gpu_model) == m)
            return pricing_owned_at(i);
    return NULL;
}

static void known_instances(Buf *b)
{
    for (size_t i = 0; i < pricing_count(); i++)
        buf_printf(b, "%s%s", i ? ", " : "", pricing_at(i)->id);
}

static int choose_model(const TcoArgs *a, TcoReport *rep, Choice *ch)
{
    if (a->instance && !(ch->instance = pricing_find(a->instance))) {
        Buf b = {0};
        known_instances(&b);
        client_error(a->c, "unknown instance '%s'; the catalogue has %s", a->instance, buf_str(&b));
        buf_free(&b);
        return 2;
    }
    const GpuModel *inst_model = ch->instance ? catalog_find(ch->instance->gpu_model) : NULL;
    const char *source;
    if (a->gpu) {
        if (!(ch->model = catalog_find(a->gpu))) {
            client_error(a->c,
                         "unknown GPU model '%s' (the GPU catalogue has H100-80GB-SXM5, "
                         "A100-80GB, H200-141GB, ...)",
                         a->gpu);
            return 2;
        }
        source = "--gpu";
    } else if (inst_model) {
        ch->model = inst_model;
        source = "the GPU of --instance";
    } else {
        const OwnedServer *first = pricing_owned_at(0);
        if (!first || !(ch->model = catalog_find(first->gpu_model))) {
            client_error(a->c, "the pricing catalogue has no server to own: give --gpu");
            return 2;
        }
        source = "default: the catalogue's first owned server";
    }
    if (inst_model && inst_model != ch->model) {
        client_error(a->c, "instance %s has %s GPUs, not %s: compare like with like",
                     ch->instance->id, inst_model->name, ch->model->name);
        return 2;
    }
    ch->owned = owned_for(ch->model);
    TcoFact *f = tco_fact(rep, "gpu_model", "GPU model", source);
    tco_fact_text(f, "%s", ch->model->name);
    fact_json_str(f, ch->model->name);
    rep->gpu_model = ch->model->name;
    return 0;
}

/* Owning: GPUs per server, capex, power, colocation, electricity, operations, planned
 * utilisation, depreciation and the period. */
static int choose_owning(const TcoArgs *a, const Choice *ch, TcoReport *rep, TcoInput *in)
{
    const OwnedServer *o = ch->owned;
    char src[200];
    int64_t v;
    double d;
    const char *model = ch->model->name;

    if (a->gpus_per_server) {
        if (parse_i64(a->gpus_per_server, &v) < 0 || v < 1 || v > 1024) {
            client_error(a->c, "--gpus-per-server must be a whole number from 1 to 1024, not '%s'",
                         a->gpus_per_server);
            return 2;
        }
        in->gpus_per_server = (uint32_t)v;
        snprintf(src, sizeof(src), "--gpus-per-server");
    } else {
        in->gpus_per_server = o ? o->gpus : 8;
        snprintf(src, sizeof(src), o ? "catalogue %s" : "default", o ? o->key : "");
    }
    fact_num(rep, "gpus_per_server", "GPUs per server", in->gpus_per_server, "%g", src);

    if (a->capex) {
        if (!parse_number(a->capex, 0, MAX_CAPEX_USD, &d)) {
            client_error(a->c, "--capex must be dollars from 0 to 1000000000, not '%s'", a->capex);
            return 2;
        }
        in->capex_micro_usd = llround(d * 1e6);
        snprintf(src, sizeof(src), "--capex");
    } else if (o && o->capex_micro_usd >= 0) {
        in->capex_micro_usd = o->capex_micro_usd;
        Buf list = {0};
        if (o->capex_list_micro_usd >= 0)
            tco_format_usd(&list, o->capex_list_micro_usd, false);
        snprintf(src, sizeof(src), "catalogue %s: all-in per node, fabric included%s%s%s", o->key,
                 list.len ? " (the box alone lists at " : "", buf_str(&list), list.len ? ")" : "");
        buf_free(&list);
    } else {
        client_error(a->c, "the pricing catalogue has no server price for %s: give --capex USD",
                     model);
        return 2;
    }
    fact_usd(rep, "capex_usd_per_server", "capex per server", in->capex_micro_usd, src);

    int dep_lo, dep_hi;
    pricing_depreciation_years(&dep_lo, &dep_hi);
    int64_t dep_years = dep_lo;
    if (a->depreciation) {
        if (parse_i64(a->depreciation, &dep_years) < 0 || dep_years < 1 || dep_years > MAX_YEARS) {
            client_error(a->c,
                         "--depreciation-years must be a whole number from 1 to %d, not "
                         "'%s'",
                         MAX_YEARS, a->depreciation);
            return 2;
        }
        snprintf(src, sizeof(src), "--depreciation-years");
    } else {
        snprintf(src, sizeof(src), "catalogue: the shortest of the %d-%d years commonly used",
                 dep_lo, dep_hi);
    }
    in->depreciation_months = (uint32_t)dep_years * 12;
    fact_num(rep, "depreciation_years", "depreciation", (double)dep_years, "%g years", src);

    int64_t years = dep_years;
    if (a->years && (parse_i64(a->years, &years) < 0 || years < 1 || years > MAX_YEARS)) {
        client_error(a->c, "--years must be a whole number from 1 to %d, not '%s'", MAX_YEARS,
                     a->years);
        return 2;
    }
    in->months = (uint32_t)years * 12;
    fact_num(rep, "years", "period compared", (double)years, "%g years",
             a->years ? "--years" : "default: the depreciation period");

    if (a->power_kw) {
        if (!parse_number(a->power_kw, 0, 1e6, &in->power_kw)) {
            client_error(a->c, "--power-kw must be kW from 0, not '%s'", a->power_kw);
            return 2;
        }
        snprintf(src, sizeof(src), "--power-kw");
    } else if (o && o->power_kw_max > 0) {
        in->power_kw = o->power_kw_max;
        snprintf(src, sizeof(src),
                 "catalogue %s: maximum draw (a colocation contract covers the peak)", o->key);
    } else {
        client_error(a->c, "the pricing catalogue has no power figure for %s: give --power-kw KW",
                     model);
        return 2;
    }
    fact_num(rep, "power_kw_per_server", "contracted power per server", in->power_kw, "%g kW", src);

    double colo_lo, colo_hi;
    pricing_colocation_usd_per_kw_month(&colo_lo, &colo_hi);
    if (a->colo) {
        if (!parse_number(a->colo, 0, 1e9, &in->colo_usd_per_kw_month)) {
            client_error(a->c, "--colo-usd-per-kw-month must be dollars from 0, not '%s'", a->colo);
            return 2;
        }
        snprintf(src, sizeof(src), "--colo-usd-per-kw-month");
    } else {
        in->colo_usd_per_kw_month = (colo_lo + colo_hi) / 2;
        snprintf(src, sizeof(src),
                 "catalogue: the middle of $%g-%g per kW-month quoted for GPU colocation, "
                 "power included",
                 colo_lo, colo_hi);
    }
    fact_num(rep, "colo_usd_per_kw_month", "colocation per kW-month", in->colo_usd_per_kw_month,
             "$%g", src);

    if (a->electricity) {
        if (!parse_number(a->electricity, 0, 1e6, &in->electricity_usd_per_kwh)) {
            client_error(a->c, "--electricity-usd-per-kwh must be dollars from 0, not '%s'",
                         a->electricity);
            return 2;
        }
    }
    fact_num(rep, "electricity_usd_per_kwh", "electricity billed apart",
             in->electricity_usd_per_kwh, "$%g per kWh",
             a->electricity ? "--electricity-usd-per-kwh"
                            : "default: included in the colocation price");

    if (a->typical_kw) {
        if (!parse_number(a->typical_kw, 0, 1e6, &in->typical_kw)) {
            client_error(a->c, "--typical-kw must be kW from 0, not '%s'", a->typical_kw);
            return 2;
        }
        snprintf(src, sizeof(src), "--typical-kw");
    } else if (o && o->power_kw_typical > 0) {
        in->typical_kw = o->power_kw_typical;
        snprintf(src, sizeof(src),
                 "catalogue %s (unverified); counts only with electricity billed "
                 "apart",
                 o->key);
    } else {
        in->typical_kw = in->power_kw;
        snprintf(src, sizeof(src), "the contracted power: the catalogue has no typical draw");
    }
    fact_num(rep, "typical_kw_per_server", "typical draw per server", in->typical_kw, "%g kW", src);

    d = DEFAULT_OPS_PCT;
    if (a->ops && !parse_number(a->ops, 0, 100, &d)) {
        client_error(a->c, "--ops-pct must be a percentage from 0 to 100, not '%s'", a->ops);
        return 2;
    }
    in->ops_pct_per_year = d;
    fact_num(rep, "ops_pct_of_capex_per_year", "operations a year", d, "%g% of capex",
             a->ops ? "--ops-pct" : "default: an assumption (staff, support, spares)");

    d = DEFAULT_MAX_UTIL_PCT;
    if (a->max_util && (!parse_number(a->max_util, 0, 100, &d) || d == 0)) {
        client_error(a->c, "--max-util must be a percentage above 0, at most 100, not '%s'",
                     a->max_util);
        return 2;
    }
    in->max_utilisation = d / 100;
    fact_num(rep, "max_utilisation_pct", "planned peak utilisation", d, "%g%",
             a->max_util ? "--max-util" : "default: an assumption (room for failures, drains)");
    fact_num(rep, "hours_per_month", "hours in a month", TCO_HOURS_PER_MONTH, "%g h", "8760 / 12");
    return 0;
}

static const char *const price_labels[TCO_PRICE_COUNT] = {"on-demand price", "reserved 1y price",
                                                          "reserved 3y price", "spot price"};
static const char *const price_keys[TCO_PRICE_COUNT] = {
    "on_demand_usd_per_gpu_hour", "reserved_1y_usd_per_gpu_hour", "reserved_3y_usd_per_gpu_hour",
    "spot_usd_per_gpu_hour"};

/* The instance priced: --instance, else the catalogue's default for the model and the
 * server's GPU count; none when every price is given, as none of its prices would count. */
static const InstancePrice *instance_priced(const TcoArgs *a, const Choice *ch, const TcoInput *in,
                                            TcoReport *rep)
{
    bool all_given = true;
    for (int p = 0; p < TCO_PRICE_COUNT; p++)
        all_given &= a->cloud_price_usd[p] >= 0;
    const InstancePrice *ip = ch->instance;
    const char *why = "--instance";
    char none[200];
    if (!ip && all_given) {
        why = "none: every price is given (--cloud-price)";
    } else if (!ip && (ip = tco_default_instance(ch->model, in->gpus_per_server))) {
        why = "default: the catalogue's first listing of this GPU with this many GPUs and an "
              "on-demand price";
    } else if (!ip) {
        snprintf(none, sizeof(none),
                 "none: no catalogue listing of %s with %u GPUs has an on-demand price",
                 ch->model->name, in->gpus_per_server);
        why = none;
    }
    TcoFact *f = tco_fact(rep, "instance", "instance priced", why);
    tco_fact_text(f, "%s", ip ? ip->id : "none");
    if (ip)
        fact_json_str(f, ip->id);
    else
        tco_fact_json(f, "null");
    return ip;
}

static void price_fact(const InstancePrice *ip, TcoPrice p, TcoPriceFrom from, TcoReport *rep,
                       const TcoInput *in)
{
    char src[200];
    if (from == TCO_FROM_GIVEN) {
        snprintf(src, sizeof(src), "--cloud-price");
    } else if (from == TCO_FROM_INSTANCE) {
        Buf hourly = {0};
        tco_json_usd(&hourly, tco_listed_price(ip, p));
        snprintf(src, sizeof(src), "catalogue %s: $%s an hour for %u GPUs, as of %s", ip->id,
                 buf_str(&hourly), ip->gpus, ip->as_of ? ip->as_of : "an unknown date");
        buf_free(&hourly);
    } else if (ip) {
        snprintf(src, sizeof(src), "%s lists none: give --cloud-price %s=USD", ip->id,
                 tco_price_name(p));
    } else {
        snprintf(src, sizeof(src), "no instance priced: give --cloud-price %s=USD",
                 tco_price_name(p));
    }
    TcoFact *f = tco_fact(rep, price_keys[p], price_labels[p], src);
    double per = tco_price_per_gpu_hour(&in->price[p]);
    if (per < 0) {
        tco_fact_text(f, "not priced");
        tco_fact_json(f, "null");
    } else {
        tco_fact_text(f, "$%.4f per GPU-h", per / 1e6);
        tco_fact_json(f, "%.10g", per / 1e6);
    }
}

/* Every cloud price from the one instance priced, or given with --cloud-price: an
 * option whose price that instance does not list is not priced, and is not filled in
 * from another listing (that put GCP's 1-year commitment above AWS's on-demand). */
static int choose_prices(const TcoArgs *a, const Choice *ch, TcoReport *rep, TcoInput *in)
{
    double d = DEFAULT_SPOT_PCT;
    if (a->spot_share && !parse_number(a->spot_share, 0, 100, &d)) {
        client_error(a->c, "--spot-share must be a percentage from 0 to 100, not '%s'",
                     a->spot_share);
        return 2;
    }
    in->spot_share = d / 100;
    fact_num(rep, "spot_share_pct", "spot share of the spot mix", d, "%g%",
             a->spot_share ? "--spot-share" : "default: an assumption (checkpointed training)");

    const InstancePrice *ip = instance_priced(a, ch, in, rep);
    int64_t given[TCO_PRICE_COUNT];
    TcoPriceFrom from[TCO_PRICE_COUNT];
    for (int p = 0; p < TCO_PRICE_COUNT; p++)
        given[p] = a->cloud_price_usd[p] >= 0 ? llround(a->cloud_price_usd[p] * 1e6) : -1;
    tco_prices(ip, given, in->price, from);
    for (int p = 0; p < TCO_PRICE_COUNT; p++)
        price_fact(ip, p, from[p], rep, in);

    bool any = false;
    for (int o = 0; o < TCO_OPTION_COUNT; o++) {
        int missing = tco_option_missing(in, o);
        any |= missing < 0;
        if (missing < 0)
            continue;
        char *why = rep->unpriced_why[o];
        size_t n = sizeof(rep->unpriced_why[o]);
        if (ip)
            snprintf(why, n, "%s lists no %s: give --cloud-price %s=USD", ip->id,
                     price_labels[missing], tco_price_name(missing));
        else
            snprintf(why, n, "no %s: give --cloud-price %s=USD", price_labels[missing],
                     tco_price_name(missing));
    }
    if (!any) {
        if (ip)
            client_error(a->c,
                         "%s lists no price to compare with: give --cloud-price on_demand=USD or "
                         "another --instance",
                         ip->id);
        else
            client_error(a->c,
                         "no cloud price is known for %s: give --instance ID or --cloud-price "
                         "on_demand=USD",
                         ch->model->name);
        return 2;
    }
    return 0;
}

/* ---- output ---- */

static int write_chart(const Client *c, TcoReport *rep, const char *dir, char **ret_path)
{
    if (mkdir(dir, 0777) < 0 && errno != EEXIST) {
        client_error(c, "%s: %s", dir, strerror(errno));
        return 1;
    }
    char *path = NULL;
    if (asprintf(&path, "%s/tco.svg", dir) < 0) {
        client_oom(c);
        return 1;
    }
    Buf svg = {0};
    tco_render_svg(rep, &svg);
    FILE *f = svg.oom ? NULL : fopen(path, "w");
    bool ok = f && fwrite(buf_str(&svg), 1, svg.len, f) == svg.len;
    if (f)
        ok &= fclose(f) == 0;
    if (!ok)
        client_error(c, "%s: %s", path, svg.oom ? "out of memory" : "cannot write it");
    buf_free(&svg);
    if (!ok) {
        free(path);
        return 1;
    }
    *ret_path = path;
    return 0;
}

static int get_usage(Client *c, const TcoArgs *a, TcoReport *rep, Usage *u)
{
    int sources = !!a->usage_file + a->from_server + !!a->gpu_hours;
    if (sources != 1) {
        client_error(c, "give one of --gpu-hours N, --usage FILE or --from-server");
        return 2;
    }
    if (a->gpu_hours && (a->days || a->months)) {
        client_error(c, "--days and --months go with --usage FILE");
        return 2;
    }
    if (a->gpu_hours)
        return usage_from_list(a, u);
    if (a->usage_file)
        return usage_from_csv(a, rep, u);
    return usage_from_server(c, a, u);
}

int cmd_tco(int argc, char **argv)
{
    static const struct option opts[] = {
        CLIENT_OPTIONS,
        CLIENT_OPT_OUTPUT,
        {"usage", required_argument, NULL, OPT_USAGE},
        {"from-server", no_argument, NULL, OPT_FROM_SERVER},
        {"gpu-hours", required_argument, NULL, OPT_GPU_HOURS},
        {"months", required_argument, NULL, OPT_MONTHS},
        {"days", required_argument, NULL, OPT_DAYS},
        {"gpu", required_argument, NULL, OPT_GPU},
        {"gpus-per-server", required_argument, NULL, OPT_GPUS_PER_SERVER},
        {"capex", required_argument, NULL, OPT_CAPEX},
        {"power-kw", required_argument, NULL, OPT_POWER},
        {"typical-kw", required_argument, NULL, OPT_TYPICAL},
        {"colo-usd-per-kw-month", required_argument, NULL, OPT_COLO},
        {"electricity-usd-per-kwh", required_argument, NULL, OPT_ELECTRICITY},
        {"ops-pct", required_argument, NULL, OPT_OPS},
        {"max-util", required_argument, NULL, OPT_MAX_UTIL},
        {"depreciation-years", required_argument, NULL, OPT_DEPRECIATION},
        {"years", required_argument, NULL, OPT_YEARS},
        {"instance", required_argument, NULL, OPT_INSTANCE},
        {"cloud-price", required_argument, NULL, OPT_CLOUD_PRICE},
        {"spot-share", required_argument, NULL, OPT_SPOT_SHARE},
        {"out", required_argument, NULL, OPT_OUT},
        {NULL, 0, NULL, 0},
    };
    static const char *const formats[] = {"table", "json", NULL};
    Client c;
    client_init(&c, "tco");
    TcoArgs a = {.c = &c};
    for (int p = 0; p < TCO_PRICE_COUNT; p++)
        a.cloud_price_usd[p] = -1;
    TcoReport rep = {0};
    TcoInput in = {0};
    TcoResult res = {0};
    Usage u = {0};
    Choice ch = {0};
    Buf out = {0}, err = {0};
    char *chart = NULL;
    int rc = client_parse_options(&c, argc, argv, "o:h", opts, tco_option, &a, tco_usage);
    if (rc >= 0)
        goto done;
    rc = 2;
    if (optind < argc) {
        client_error(&c, "unexpected argument '%s'", argv[optind]);
        goto done;
    }
    if ((rc = client_check_format(&c, formats)) || (rc = choose_model(&a, &rep, &ch)) ||
        (rc = choose_owning(&a, &ch, &rep, &in)) || (rc = choose_prices(&a, &ch, &rep, &in)) ||
        (rc = get_usage(&c, &a, &rep, &u)))
        goto done;
    rep.usage_source = u.source;
    in.gpu_hours = u.hours;
    in.n_gpu_hours = u.n;
    int r = tco_compute(&in, &res, &err);
    if (r < 0) {
        if (r == -ENOMEM)
            client_oom(&c);
        else
            client_error(&c, "%s", buf_str(&err));
        rc = r == -ENOMEM ? 1 : 2;
        goto done;
    }
    rep.in = &in;
    rep.r = &res;
    if (a.out && (rc = write_chart(&c, &rep, a.out, &chart)))
        goto done;
    rep.chart_path = chart;
    if (client_json_output(&c))
        tco_render_json(&rep, &out);
    else
        tco_render_table(&rep, &out);
    if (out.oom) {
        client_oom(&c);
        rc = 1;
        goto done;
    }
    fwrite(buf_str(&out), 1, out.len, stdout);
    rc = fflush(stdout) ? 1 : 0;
done:
    tco_result_free(&res);
    free(u.hours);
    free(chart);
    buf_free(&out);
    buf_free(&err);
    client_free(&c);
    return rc;
}
