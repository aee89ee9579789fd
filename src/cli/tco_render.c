/* tco_render.c: the table, the JSON object and the SVG chart of `gpuorch tco` (see
 * tco_render.h). Money is printed from the integer micro-dollars: exact decimals in
 * JSON, cents rounded half away from zero in the table. */
#include "cli/tco_render.h"

#include "cli/table.h"
#include "util/macro.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

TcoFact *tco_fact(TcoReport *rep, const char *key, const char *label, const char *source)
{
    static TcoFact spare; /* past TCO_MAX_FACTS: written and dropped */
    TcoFact *f = rep->n_facts < TCO_MAX_FACTS ? &rep->facts[rep->n_facts++] : &spare;
    *f = (TcoFact){.key = key, .label = label};
    snprintf(f->source, sizeof(f->source), "%s", source);
    return f;
}

void tco_fact_text(TcoFact *f, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->text, sizeof(f->text), fmt, ap);
    va_end(ap);
}

void tco_fact_json(TcoFact *f, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->json, sizeof(f->json), fmt, ap);
    va_end(ap);
}

static void put_grouped(Buf *b, uint64_t v)
{
    char digits[32];
    int n = snprintf(digits, sizeof(digits), "%" PRIu64, v);
    for (int i = 0; i < n; i++) {
        if (i > 0 && (n - i) % 3 == 0)
            buf_putc(b, ',');
        buf_putc(b, digits[i]);
    }
}

/* |micro| / unit rounded half away from zero. */
static uint64_t round_abs(int64_t micro, uint64_t unit)
{
    uint64_t a = micro < 0 ? (uint64_t)0 - (uint64_t)micro : (uint64_t)micro;
    return (a + unit / 2) / unit;
}

void tco_format_usd(Buf *b, int64_t micro_usd, bool cents)
{
    if (micro_usd < 0)
        buf_putc(b, '-');
    buf_putc(b, '$');
    if (!cents) {
        put_grouped(b, round_abs(micro_usd, 1000000));
        return;
    }
    uint64_t c = round_abs(micro_usd, 10000);
    put_grouped(b, c / 100);
    buf_printf(b, ".%02u", (unsigned)(c % 100));
}

void tco_json_usd(Buf *b, int64_t micro_usd)
{
    uint64_t a = micro_usd < 0 ? (uint64_t)0 - (uint64_t)micro_usd : (uint64_t)micro_usd;
    char frac[8];
    snprintf(frac, sizeof(frac), "%06u", (unsigned)(a % 1000000));
    size_t n = strlen(frac);
    while (n > 0 && frac[n - 1] == '0')
        frac[--n] = '\0';
    buf_printf(b, "%s%" PRIu64 "%s%s", micro_usd < 0 ? "-" : "", a / 1000000, n ? "." : "", frac);
}

void tco_option_label(Buf *b, const TcoInput *in, TcoOption o)
{
    switch (o) {
    case TCO_ON_DEMAND:
        buf_puts(b, "on-demand");
        break;
    case TCO_RESERVED_1Y:
        buf_puts(b, "reserved 1y");
        break;
    case TCO_RESERVED_3Y:
        buf_puts(b, "reserved 3y");
        break;
    default:
        buf_printf(b, "spot mix %g%%", in->spot_share * 100);
        break;
    }
}

static double total_gpu_hours(const TcoResult *r)
{
    double h = 0;
    for (uint32_t m = 0; m < r->months; m++)
        h += r->gpu_hours[m];
    return h;
}

/* The price an option is quoted at per GPU-hour (micro-dollars); a spot mix's is the
 * blend. */
static double list_price(const TcoInput *in, TcoOption o)
{
    switch (o) {
    case TCO_ON_DEMAND:
        return tco_price_per_gpu_hour(&in->price[TCO_PRICE_ON_DEMAND]);
    case TCO_RESERVED_1Y:
        return tco_price_per_gpu_hour(&in->price[TCO_PRICE_RESERVED_1Y]);
    case TCO_RESERVED_3Y:
        return tco_price_per_gpu_hour(&in->price[TCO_PRICE_RESERVED_3Y]);
    default: {
        double s = in->spot_share;
        return (s > 0 ? s * tco_price_per_gpu_hour(&in->price[TCO_PRICE_SPOT]) : 0) +
               (s < 1 ? (1 - s) * tco_price_per_gpu_hour(&in->price[TCO_PRICE_ON_DEMAND]) : 0);
    }
    }
}

/* ---- table ---- */

static char *usd_str(Buf *scratch, int64_t micro, bool cents)
{
    buf_reset(scratch);
    tco_format_usd(scratch, micro, cents);
    return (char *)buf_str(scratch);
}

static void render_facts(const TcoReport *rep, Buf *out)
{
    static const TableCol cols[] = {
        {"assumption", COL_LEFT, 0, 0, 0},
        {"value", COL_LEFT, 0, 0, 0},
        {"from", COL_LEFT, 0, 0, 0},
    };
    Table t;
    table_init(&t, cols, ARRAY_SIZE(cols));
    for (size_t i = 0; i < rep->n_facts; i++) {
        table_cell(&t, "%s", rep->facts[i].label);
        table_cell(&t, "%s", rep->facts[i].text);
        table_cell(&t, "%s", rep->facts[i].source);
    }
    if (t.oom || table_render(&t, 0, out) < 0)
        out->oom = true;
    table_free(&t);
}

/* GPU-hours to a tenth, digits grouped: "2,920.0". */
static void put_hours(Buf *b, double h)
{
    uint64_t tenths = (uint64_t)llround(h * 10);
    put_grouped(b, tenths / 10);
    buf_printf(b, ".%u", (unsigned)(tenths % 10));
}

static void render_fleet(const TcoReport *rep, Buf *out)
{
    const TcoInput *in = rep->in;
    const TcoResult *r = rep->r;
    Buf s = {0};
    double total = total_gpu_hours(r);
    buf_puts(out, "\nUsage: ");
    put_hours(out, total / r->months);
    buf_puts(out, " GPU-hours a month on average, peak ");
    put_hours(out, r->peak_gpu_hours);
    buf_printf(out, " (%s)\n", rep->usage_source);
    buf_printf(out,
               "Owned: %u server%s of %u GPUs (peak / (%u GPUs x %d h x %g%%), rounded up), "
               "bought ",
               r->servers, r->servers == 1 ? "" : "s", in->gpus_per_server, in->gpus_per_server,
               TCO_HOURS_PER_MONTH, in->max_utilisation * 100);
    if (r->purchases == 1)
        buf_puts(out, "once");
    else
        buf_printf(out, "%u times (once each depreciation period)", r->purchases);
    buf_printf(out, " at %s", usd_str(&s, r->capex_micro_usd, false));
    buf_printf(out, "\n  running %s a month", usd_str(&s, r->running_micro_usd, true));
    buf_printf(out, " (colocation %s", usd_str(&s, r->colo_micro_usd, true));
    buf_printf(out, ", electricity %s", usd_str(&s, r->electricity_micro_usd, true));
    buf_printf(out, ", operations %s)", usd_str(&s, r->ops_micro_usd, true));
    buf_printf(out, "; amortised %s a month\n", usd_str(&s, r->amortised_micro_usd, true));
    if (r->book_value_micro_usd > 0)
        buf_printf(out, "  %s of capex is not yet depreciated at the end (not credited)\n",
                   usd_str(&s, r->book_value_micro_usd, false));
    buf_free(&s);
}

static void option_row(Table *t, Buf *s, const char *name, double price_micro, const TcoLine *l,
                       uint32_t months, double gpu_hours, bool owned)
{
    table_cell(t, "%s", name);
    if (price_micro >= 0)
        table_cell(t, "%.4f", price_micro / 1e6);
    else
        table_cell(t, "-");
    table_cell(t, "%s", usd_str(s, llround((double)l->total_micro_usd / months), true));
    table_cell(t, "%s", usd_str(s, l->total_micro_usd, true));
    if (gpu_hours > 0)
        table_cell(t, "%.4f", (double)l->total_micro_usd / gpu_hours / 1e6);
    else
        table_cell(t, "-");
    if (owned)
        table_cell(t, "-");
    else if (l->break_even_month)
        table_cell(t, "month %u", l->break_even_month);
    else
        table_cell(t, "never");
}

/* An option without a price keeps its row, so that it is seen to be missing rather than
 * taken for one that was never compared. */
static void unpriced_row(Table *t, const char *name, size_t figures)
{
    table_cell(t, "%s", name);
    for (size_t i = 0; i < figures; i++)
        table_cell(t, "-");
    table_cell(t, "not priced");
}

static void render_options(const TcoReport *rep, Buf *out)
{
    static const TableCol cols[] = {
        {"option", COL_LEFT, 0, 0, 0},          {"$/GPU-h", COL_RIGHT, 0, 0, 0},
        {"mean a month", COL_RIGHT, 0, 0, 0},   {"total", COL_RIGHT, 0, 0, 0},
        {"per GPU-h used", COL_RIGHT, 0, 0, 0}, {"owning cheaper from", COL_LEFT, 0, 0, 0},
    };
    const TcoInput *in = rep->in;
    const TcoResult *r = rep->r;
    double hours = total_gpu_hours(r);
    Buf s = {0}, name = {0};
    Table t;
    table_init(&t, cols, ARRAY_SIZE(cols));
    option_row(&t, &s, "owned", -1, &r->owned, r->months, hours, true);
    for (int o = 0; o < TCO_OPTION_COUNT; o++) {
        buf_reset(&name);
        tco_option_label(&name, in, o);
        if (r->option[o].priced)
            option_row(&t, &s, buf_str(&name), list_price(in, o), &r->option[o], r->months, hours,
                       false);
        else
            unpriced_row(&t, buf_str(&name), ARRAY_SIZE(cols) - 2);
    }
    buf_printf(out, "\nCost over %u months (owning: bought outright, cash as paid)\n", r->months);
    if (t.oom || table_render(&t, 0, out) < 0)
        out->oom = true;
    table_free(&t);
    for (int o = 0; o < TCO_OPTION_COUNT; o++) {
        const TcoLine *l = &r->option[o];
        buf_reset(&name);
        tco_option_label(&name, in, o);
        if (!l->priced)
            buf_printf(out, "%s: not priced: %s\n", buf_str(&name), rep->unpriced_why[o]);
        else if (l->committed_after_micro_usd > 0)
            buf_printf(
                out, "%s: its %u-month term still owes %s after the period (not in the total)\n",
                buf_str(&name), l->term_months, usd_str(&s, l->committed_after_micro_usd, true));
    }
    buf_free(&s);
    buf_free(&name);
}

/* Cumulative costs at the end of each year, and of the period when it ends mid-year. */
static void render_cumulative(const TcoReport *rep, Buf *out)
{
    const TcoResult *r = rep->r;
    TableCol cols[1 + 1 + TCO_OPTION_COUNT];
    Buf names[TCO_OPTION_COUNT] = {0};
    size_t n = 0;
    cols[n++] = (TableCol){"month", COL_RIGHT, 0, 0, 0};
    cols[n++] = (TableCol){"owned", COL_RIGHT, 0, 0, 0};
    for (int o = 0; o < TCO_OPTION_COUNT; o++)
        if (r->option[o].priced) {
            tco_option_label(&names[o], rep->in, o);
            cols[n++] = (TableCol){buf_str(&names[o]), COL_RIGHT, 0, 0, 0};
        }
    Table t;
    table_init(&t, cols, n);
    Buf s = {0};
    for (uint32_t m = 12; m < r->months + 12; m += 12) {
        uint32_t at = MIN(m, r->months);
        table_cell(&t, "%u", at);
        table_cell(&t, "%s", usd_str(&s, r->owned.cumulative_micro_usd[at - 1], false));
        for (int o = 0; o < TCO_OPTION_COUNT; o++)
            if (r->option[o].priced)
                table_cell(&t, "%s", usd_str(&s, r->option[o].cumulative_micro_usd[at - 1], false));
    }
    buf_puts(out, "\nCumulative cost by year\n");
    if (t.oom || table_render(&t, 0, out) < 0)
        out->oom = true;
    table_free(&t);
    buf_free(&s);
    for (int o = 0; o < TCO_OPTION_COUNT; o++)
        buf_free(&names[o]);
}

void tco_render_table(const TcoReport *rep, Buf *out)
{
    buf_printf(out, "gpuorch tco: owning %s servers against the cloud over %u months\n\n",
               rep->gpu_model, rep->r->months);
    render_facts(rep, out);
    render_fleet(rep, out);
    render_options(rep, out);
    render_cumulative(rep, out);
    if (rep->chart_path)
        buf_printf(out, "\nChart: %s\n", rep->chart_path);
}

/* ---- JSON ---- */

static void json_money_array(Buf *b, const int64_t *v, uint32_t n)
{
    buf_putc(b, '[');
    for (uint32_t i = 0; i < n; i++) {
        if (i)
            buf_putc(b, ',');
        tco_json_usd(b, v[i]);
    }
    buf_putc(b, ']');
}

static void json_key_usd(Buf *b, const char *key, int64_t micro)
{
    buf_printf(b, ",\"%s\":", key);
    tco_json_usd(b, micro);
}

static void json_line(Buf *b, const TcoLine *l, uint32_t months)
{
    buf_puts(b, "\"monthly_usd\":");
    json_money_array(b, l->monthly_micro_usd, months);
    buf_puts(b, ",\"cumulative_usd\":");
    json_money_array(b, l->cumulative_micro_usd, months);
    json_key_usd(b, "total_usd", l->total_micro_usd);
}

void tco_render_json(const TcoReport *rep, Buf *b)
{
    const TcoInput *in = rep->in;
    const TcoResult *r = rep->r;
    buf_puts(b, "{\"gpu_model\":");
    buf_json_str(b, rep->gpu_model);
    buf_printf(b, ",\"months\":%u,\"assumptions\":{", r->months);
    for (size_t i = 0; i < rep->n_facts; i++) {
        const TcoFact *f = &rep->facts[i];
        buf_printf(b, "%s\"%s\":{\"value\":%s,\"source\":", i ? "," : "", f->key, f->json);
        buf_json_str(b, f->source);
        buf_putc(b, '}');
    }
    buf_puts(b, "},\"usage\":{\"source\":");
    buf_json_str(b, rep->usage_source);
    buf_puts(b, ",\"gpu_hours_per_month\":[");
    for (uint32_t m = 0; m < r->months; m++)
        buf_printf(b, "%s%.6f", m ? "," : "", r->gpu_hours[m]);
    buf_printf(b, "],\"peak_gpu_hours\":%.6f,\"total_gpu_hours\":%.6f}", r->peak_gpu_hours,
               total_gpu_hours(r));
    buf_printf(b, ",\"owned\":{\"servers\":%u,\"gpus_per_server\":%u,\"purchases\":%u", r->servers,
               in->gpus_per_server, r->purchases);
    json_key_usd(b, "capex_usd", r->capex_micro_usd);
    json_key_usd(b, "colocation_per_month_usd", r->colo_micro_usd);
    json_key_usd(b, "electricity_per_month_usd", r->electricity_micro_usd);
    json_key_usd(b, "operations_per_month_usd", r->ops_micro_usd);
    json_key_usd(b, "running_per_month_usd", r->running_micro_usd);
    json_key_usd(b, "amortised_per_month_usd", r->amortised_micro_usd);
    json_key_usd(b, "book_value_at_end_usd", r->book_value_micro_usd);
    buf_putc(b, ',');
    json_line(b, &r->owned, r->months);
    buf_puts(b, "},\"options\":{");
    for (int o = 0; o < TCO_OPTION_COUNT; o++) {
        const TcoLine *l = &r->option[o];
        buf_printf(b, "%s\"%s\":{\"priced\":%s", o ? "," : "", tco_option_name(o),
                   l->priced ? "true" : "false");
        if (!l->priced) {
            /* The same keys as a priced option, null, so a reader finds no figure. */
            buf_puts(b, ",\"price_per_gpu_hour_usd\":null,\"monthly_usd\":null,"
                        "\"cumulative_usd\":null,\"total_usd\":null,\"break_even_month\":null,"
                        "\"why\":");
            buf_json_str(b, rep->unpriced_why[o]);
            buf_putc(b, '}');
            continue;
        }
        buf_printf(b, ",\"price_per_gpu_hour_usd\":%.10g,", list_price(in, o) / 1e6);
        json_line(b, l, r->months);
        if (l->break_even_month)
            buf_printf(b, ",\"break_even_month\":%u", l->break_even_month);
        else
            buf_puts(b, ",\"break_even_month\":null");
        if (l->term_months) {
            buf_printf(b, ",\"term_months\":%u", l->term_months);
            json_key_usd(b, "committed_after_period_usd", l->committed_after_micro_usd);
        }
        if (o == TCO_SPOT_MIX)
            buf_printf(b, ",\"spot_share\":%g", in->spot_share);
        buf_putc(b, '}');
    }
    buf_puts(b, "},\"chart\":");
    if (rep->chart_path)
        buf_json_str(b, rep->chart_path);
    else
        buf_puts(b, "null");
    buf_puts(b, "}\n");
}

/* ---- SVG ---- */

static const char *const colours[1 + TCO_OPTION_COUNT] = {"#222222", "#1f77b4", "#2ca02c",
                                                          "#9467bd", "#ff7f0e"};

static void svg_text(Buf *b, const char *s)
{
    for (; *s; s++) {
        if (*s == '<')
            buf_puts(b, "&lt;");
        else if (*s == '>')
            buf_puts(b, "&gt;");
        else if (*s == '&')
            buf_puts(b, "&amp;");
        else if (*s == '"')
            buf_puts(b, "&quot;");
        else
            buf_putc(b, *s);
    }
}

/* A round step for about five ticks up to max: 1, 2 or 5 times a power of ten. */
static double nice_step(double max)
{
    double raw = max / 5, p = pow(10, floor(log10(raw))), f = raw / p;
    return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * p;
}

/* "$480k", "$1.2M": axis labels. */
static void short_usd(Buf *b, double usd)
{
    if (usd >= 1e6)
        buf_printf(b, "$%gM", round(usd / 1e5) / 10);
    else if (usd >= 1e3)
        buf_printf(b, "$%gk", round(usd / 1e2) / 10);
    else
        buf_printf(b, "$%g", usd);
}

typedef struct Plot {
    double left, top, width, height, x_max, y_max;
} Plot;

static double px(const Plot *p, double month)
{
    return p->left + p->width * month / p->x_max;
}

static double py(const Plot *p, double usd)
{
    return p->top + p->height * (1 - usd / p->y_max);
}

static void svg_series(Buf *b, const Plot *p, const TcoLine *l, uint32_t months, const char *c)
{
    buf_printf(b, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"%.1f,%.1f", c,
               px(p, 0), py(p, 0));
    for (uint32_t m = 0; m < months; m++)
        buf_printf(b, " %.1f,%.1f", px(p, m + 1), py(p, l->cumulative_micro_usd[m] / 1e6));
    buf_puts(b, "\"/>\n");
}

static void svg_axes(Buf *b, const Plot *p, uint32_t months)
{
    double ystep = nice_step(p->y_max);
    for (double y = 0; y <= p->y_max * 1.0001; y += ystep) {
        buf_printf(b,
                   "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#dddddd\"/>\n"
                   "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">",
                   p->left, py(p, y), p->left + p->width, py(p, y), p->left - 6, py(p, y) + 4);
        short_usd(b, y);
        buf_puts(b, "</text>\n");
    }
    uint32_t xstep = months <= 12 ? 1 : months <= 36 ? 6 : months <= 120 ? 12 : 60;
    for (uint32_t m = 0; m <= months; m += xstep)
        buf_printf(b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%u</text>\n", px(p, m),
                   p->top + p->height + 18, m);
    buf_printf(b,
               "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000000\"/>\n"
               "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000000\"/>\n"
               "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">month</text>\n",
               p->left, p->top + p->height, p->left + p->width, p->top + p->height, p->left, p->top,
               p->left, p->top + p->height, p->left + p->width / 2, p->top + p->height + 38);
}

void tco_render_svg(const TcoReport *rep, Buf *b)
{
    const TcoResult *r = rep->r;
    const double W = 960, H = 480;
    Plot p = {.left = 80, .top = 50, .width = 560, .height = 360, .x_max = r->months};
    double y_max = r->owned.total_micro_usd / 1e6;
    for (int o = 0; o < TCO_OPTION_COUNT; o++)
        if (r->option[o].priced)
            y_max = MAX(y_max, r->option[o].total_micro_usd / 1e6);
    p.y_max = y_max > 0 ? y_max * 1.05 : 1;

    buf_printf(b,
               "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
               "viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\" font-size=\"12\">\n"
               "<rect width=\"100%%\" height=\"100%%\" fill=\"#ffffff\"/>\n"
               "<text x=\"%.1f\" y=\"24\" font-size=\"15\">Cumulative cost: owning ",
               W, H, W, H, p.left);
    svg_text(b, rep->gpu_model);
    buf_printf(b, " (%u server%s) against the cloud, %u months</text>\n", r->servers,
               r->servers == 1 ? "" : "s", r->months);
    svg_axes(b, &p, r->months);

    Buf name = {0};
    double ly = p.top + 10;
    for (int i = 0; i <= TCO_OPTION_COUNT; i++) {
        const TcoLine *l = i == 0 ? &r->owned : &r->option[i - 1];
        buf_reset(&name);
        if (i == 0)
            buf_puts(&name, "owned");
        else
            tco_option_label(&name, rep->in, i - 1);
        if (!l->priced) {
            /* In the legend without a line: not priced, not forgotten. */
            buf_printf(b, "<text class=\"not-priced\" x=\"%.1f\" y=\"%.1f\" fill=\"#888888\">",
                       p.left + p.width + 50, ly + 4);
            svg_text(b, buf_str(&name));
            buf_puts(b, ": not priced</text>\n");
            ly += 20;
            continue;
        }
        svg_series(b, &p, l, r->months, colours[i]);
        buf_printf(b,
                   "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                   "stroke-width=\"3\"/>\n<text x=\"%.1f\" y=\"%.1f\">",
                   p.left + p.width + 20, ly, p.left + p.width + 44, ly, colours[i],
                   p.left + p.width + 50, ly + 4);
        svg_text(b, buf_str(&name));
        if (i > 0 && l->break_even_month)
            buf_printf(b, ": from month %u", l->break_even_month);
        else if (i > 0)
            buf_puts(b, ": never");
        buf_puts(b, "</text>\n");
        ly += 20;
        if (i > 0 && l->break_even_month) {
            uint32_t m = l->break_even_month;
            double x = px(&p, m), y = py(&p, l->cumulative_micro_usd[m - 1] / 1e6);
            buf_printf(b,
                       "<circle class=\"break-even\" cx=\"%.1f\" cy=\"%.1f\" r=\"5\" fill=\"none\" "
                       "stroke=\"%s\" stroke-width=\"2\"/>\n"
                       "<text x=\"%.1f\" y=\"%.1f\" fill=\"%s\">%u</text>\n",
                       x, y, colours[i], x + 7, i % 2 ? y + 17 : y - 8, colours[i], m);
        }
    }
    buf_printf(b,
               "<text x=\"%.1f\" y=\"%.1f\" fill=\"#555555\">from month N, circled: owning is"
               "<tspan x=\"%.1f\" dy=\"15\">cheaper from then to the end</tspan></text>\n",
               p.left + p.width + 20, ly + 10, p.left + p.width + 20);
    buf_puts(b, "</svg>\n");
    buf_free(&name);
}
