/* report.c: tables, JSON, timeline CSV and the SVG chart of simulation results. */
#include "sim/report.h"
#include "spec/render.h"
#include "util/csv.h"
#include "util/file.h"
#include "util/macro.h"
#include "util/units.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const int table_levels[] = {50, 70, 80, 90, 100, 110, 120, 130};

/* ---- the FGD authors' figures ---- */

static const struct {
    const char *theirs, *ours;
} paper_names[] = {
    {"01-Random", "random"},
    {"02-DotProd", "dot-product"},
    {"03-GpuClustering", "gpu-clustering"},
    {"04-GpuPacking", "gpu-packing"},
    {"05-BestFit", "best-fit"},
    {"06-FGD", "fgd"},
};

int paper_load(const char *path, PaperFigures *ret, Buf *err)
{
    char *text = NULL;
    size_t len = 0;
    int r = file_read_all(path, &text, &len);
    if (r < 0) {
        buf_printf(err, "%s: %s", path, strerror(-r));
        return r;
    }
    CsvReader cr;
    csv_init(&cr, text, len);
    PaperFigures p = {0};
    size_t cap = 0;
    r = csv_next(&cr);
    int c_w = csv_column(&cr, "workload"), c_p = csv_column(&cr, "sc_policy"),
        c_a = csv_column(&cr, "arrived_pct_of_gpu_capacity"),
        c_m = csv_column(&cr, "gpu_alloc_ratio_pct_mean"),
        c_s = csv_column(&cr, "gpu_alloc_ratio_pct_std"),
        c_f = csv_column(&cr, "frag_gpu_over_total_pct_mean");
    if (r <= 0 || c_w < 0 || c_p < 0 || c_a < 0 || c_m < 0 || c_s < 0 || c_f < 0) {
        buf_printf(err, "%s:1: not the FGD authors' summary (fgd_summary_mean_over_10_seeds.csv)",
                   path);
        r = -EINVAL;
        goto out;
    }
    size_t ncols = cr.nfields;
    while ((r = csv_next(&cr)) > 0) {
        if (cr.nfields != ncols) {
            buf_printf(err, "%s:%zu: wrong number of columns", path, cr.line);
            r = -EINVAL;
            goto out;
        }
        const char *ours = NULL;
        for (size_t i = 0; i < ARRAY_SIZE(paper_names); i++)
            if (!strcmp(cr.fields[c_p], paper_names[i].theirs))
                ours = paper_names[i].ours;
        if (!ours)
            continue;
        if (GROW(p.rows, cap, p.n + 1) < 0) {
            r = -ENOMEM;
            goto out;
        }
        PaperRow *row = &p.rows[p.n++];
        snprintf(row->workload, sizeof(row->workload), "%s", cr.fields[c_w]);
        snprintf(row->policy, sizeof(row->policy), "%s", ours);
        char *end;
        row->arrived = (int)strtol(cr.fields[c_a], &end, 10);
        row->alloc_mean = strtod(cr.fields[c_m], NULL);
        row->alloc_std = strtod(cr.fields[c_s], NULL);
        row->frag_mean = strtod(cr.fields[c_f], NULL);
    }
out:
    csv_free(&cr);
    free(text);
    if (r < 0) {
        free(p.rows);
        return r;
    }
    *ret = p;
    return 0;
}

void paper_free(PaperFigures *p)
{
    free(p->rows);
    *p = (PaperFigures){0};
}

const PaperRow *paper_find(const PaperFigures *p, const char *workload, const char *policy,
                           int arrived)
{
    for (size_t i = 0; p && i < p->n; i++)
        if (p->rows[i].arrived == arrived && !strcmp(p->rows[i].policy, policy) &&
            !strcmp(p->rows[i].workload, workload))
            return &p->rows[i];
    return NULL;
}

/* ---- aggregation over seeds ---- */

typedef double (*Metric)(const RunResult *r, size_t arg);

typedef struct Agg {
    double mean, std;
    bool any; /* some seed had a value (not NaN) */
} Agg;

static Agg aggregate(const SimReport *rep, size_t pi, Metric m, size_t arg)
{
    double v[1024];
    size_t n = 0;
    for (size_t s = 0; s < rep->n_seeds && n < ARRAY_SIZE(v); s++) {
        double x = m(&rep->runs[pi * rep->n_seeds + s], arg);
        if (!isnan(x))
            v[n++] = x;
    }
    return (Agg){.mean = mean_of(v, n), .std = stddev_of(v, n), .any = n > 0};
}

static double m_alloc(const RunResult *r, size_t x)
{
    return r->pack.alloc_pct[x];
}
static double m_held(const RunResult *r, size_t x)
{
    return r->pack.held_pct[x];
}
static double m_frag(const RunResult *r, size_t x)
{
    return r->pack.frag_pct[x];
}
static double m_failed(const RunResult *r, size_t x)
{
    (void)x;
    return (double)r->pack.failed;
}
static double m_pods(const RunResult *r, size_t x)
{
    (void)x;
    return (double)r->pack.pods;
}

static bool has_window(const SimReport *r)
{
    return r->mode == SIM_TIME && r->window_to_ms > r->window_from_ms;
}

/* time-mode scalars, addressed by offset into TimeResult */
#define TOFF(field) offsetof(TimeResult, field)
static double m_time_double(const RunResult *r, size_t off)
{
    return *(const double *)((const char *)&r->time + off);
}
static double m_time_size(const RunResult *r, size_t off)
{
    return (double)*(const size_t *)((const char *)&r->time + off);
}

static void json_agg(Buf *b, const char *key, Agg a, int digits, bool with_std)
{
    buf_printf(b, ", \"%s\": ", key);
    if (a.any)
        render_num(b, a.mean, digits);
    else
        buf_puts(b, "null");
    if (with_std) {
        buf_printf(b, ", \"%s_std\": ", key);
        render_num(b, a.std, digits);
    }
}

static void json_seeds(Buf *b, const SimReport *r)
{
    buf_puts(b, ", \"seeds\": [");
    for (size_t s = 0; s < r->n_seeds; s++)
        buf_printf(b, "%s%llu", s ? ", " : "", (unsigned long long)r->seeds[s]);
    buf_putc(b, ']');
}

static void json_levels(Buf *b, const SimReport *r, size_t pi, const char *key, Metric m, bool std)
{
    buf_printf(b, ", \"%s%s\": {", key, std ? "_std" : "");
    for (size_t x = 0; x < PACK_LEVELS; x++) {
        Agg a = aggregate(r, pi, m, x);
        buf_printf(b, "%s\"%zu\": ", x ? ", " : "", x);
        if (!a.any)
            buf_puts(b, "null");
        else
            render_num(b, std ? a.std : a.mean, 2);
    }
    buf_putc(b, '}');
}

static void json_packing(Buf *b, const SimReport *r, size_t pi)
{
    bool std = r->n_seeds > 1;
    json_levels(b, r, pi, "allocation_pct", m_alloc, false);
    if (std)
        json_levels(b, r, pi, "allocation_pct", m_alloc, true);
    json_levels(b, r, pi, "held_pct", m_held, false);
    json_levels(b, r, pi, "fragmentation_pct", m_frag, false);
    json_agg(b, "pods", aggregate(r, pi, m_pods, 0), 1, false);
    json_agg(b, "failed_pods", aggregate(r, pi, m_failed, 0), 1, false);
    const char *pname = r->policies[pi].name;
    bool any = false;
    for (size_t i = 0; i < ARRAY_SIZE(table_levels); i++) {
        const PaperRow *row = paper_find(r->paper, r->trace_name, pname, table_levels[i]);
        if (!row)
            continue;
        buf_puts(b, any ? ", " : ", \"paper\": {\"allocation_pct\": {");
        any = true;
        buf_printf(b, "\"%d\": ", table_levels[i]);
        render_num(b, row->alloc_mean, 2);
    }
    if (any)
        buf_puts(b, "}}");
}

static void json_dist(Buf *b, const char *key, const SimReport *r, size_t pi, size_t off)
{
    static const char *const f[] = {"mean", "p50", "p95", "p99", "max"};
    static const size_t o[] = {offsetof(Dist, mean), offsetof(Dist, p50), offsetof(Dist, p95),
                               offsetof(Dist, p99), offsetof(Dist, max)};
    buf_printf(b, ", \"%s\": {", key);
    for (size_t i = 0; i < ARRAY_SIZE(f); i++) {
        Agg a = aggregate(r, pi, m_time_double, off + o[i]);
        buf_printf(b, "%s\"%s\": ", i ? ", " : "", f[i]);
        render_num(b, a.mean, 1);
    }
    buf_putc(b, '}');
}

/* Group figures (by priority or team) are means over seeds of the first seed's groups;
 * every seed has the same groups because they come from the trace. */
static double group_mean(const SimReport *r, size_t pi, bool team, size_t gi, size_t off,
                         bool is_size)
{
    double s = 0;
    for (size_t k = 0; k < r->n_seeds; k++) {
        const TimeResult *t = &r->runs[pi * r->n_seeds + k].time;
        const GroupResult *g =
            team ? (gi < t->n_teams ? &t->by_team[gi] : NULL) : &t->by_priority[gi];
        if (!g)
            continue;
        const char *p = (const char *)g + off;
        s += is_size ? (double)*(const size_t *)p : *(const double *)p;
    }
    return r->n_seeds ? s / (double)r->n_seeds : 0;
}

static void json_group(Buf *b, const SimReport *r, size_t pi, bool team, size_t gi, double cap_s)
{
    static const char *const f[] = {"mean", "p50", "p95", "p99", "max"};
    static const size_t o[] = {offsetof(Dist, mean), offsetof(Dist, p50), offsetof(Dist, p95),
                               offsetof(Dist, p99), offsetof(Dist, max)};
    buf_printf(b, "{\"jobs_finished\": ");
    render_num(b, group_mean(r, pi, team, gi, offsetof(GroupResult, finished), true), 1);
    buf_puts(b, ", \"utilization_pct\": ");
    double busy = group_mean(r, pi, team, gi, offsetof(GroupResult, busy_gpu_s), false);
    double alloc = group_mean(r, pi, team, gi, offsetof(GroupResult, alloc_gpu_s), false);
    render_num(b, cap_s > 0 ? 100.0 * busy / cap_s : 0, 2);
    buf_puts(b, ", \"allocation_pct\": ");
    render_num(b, cap_s > 0 ? 100.0 * alloc / cap_s : 0, 2);
    buf_puts(b, ", \"gpu_hours\": ");
    render_num(b, alloc / 3600.0, 2);
    if (team) {
        double g = group_mean(r, pi, team, gi, offsetof(GroupResult, guaranteed_gpus), false);
        double met = group_mean(r, pi, team, gi, offsetof(GroupResult, guarantee_met_pct), false);
        if (!isnan(g)) {
            buf_puts(b, ", \"guaranteed_gpus\": ");
            render_num(b, g, 2);
            buf_puts(b, ", \"guarantee_met_pct\": ");
            render_num(b, met, 2);
        }
    }
    const char *keys[] = {"queue_delay_s", "jct_s"};
    size_t offs[] = {offsetof(GroupResult, queue_delay_s), offsetof(GroupResult, jct_s)};
    for (size_t k = 0; k < 2; k++) {
        buf_printf(b, ", \"%s\": {", keys[k]);
        for (size_t i = 0; i < ARRAY_SIZE(f); i++) {
            buf_printf(b, "%s\"%s\": ", i ? ", " : "", f[i]);
            render_num(b, group_mean(r, pi, team, gi, offs[k] + o[i], false), 1);
        }
        buf_putc(b, '}');
    }
    buf_putc(b, '}');
}

/* GPU-seconds of capacity for the group figures: every GPU over the makespan, or the
 * GPUs present over the run when nodes came and went. */
static double capacity_s(const SimReport *r, size_t pi)
{
    if (r->runs[pi * r->n_seeds].time.elastic)
        return 3600.0 * aggregate(r, pi, m_time_double, TOFF(capacity_gpu_hours)).mean;
    return r->gpus * aggregate(r, pi, m_time_double, TOFF(makespan_s)).mean;
}

static void json_cost(Buf *b, const SimReport *r, size_t pi)
{
    bool std = r->n_seeds > 1;
    json_agg(b, "capacity_gpu_hours", aggregate(r, pi, m_time_double, TOFF(capacity_gpu_hours)), 2,
             false);
    json_agg(b, "cost_usd", aggregate(r, pi, m_time_double, TOFF(cost_usd)), 2, std);
    buf_puts(b, ", \"cost_by_tier_usd\": {");
    for (int t = 0; t < TIER_COUNT; t++) {
        buf_printf(b, "%s\"%s\": ", t ? ", " : "", tier_name((Tier)t));
        render_num(
            b,
            aggregate(r, pi, m_time_double, TOFF(cost_by_tier_usd) + (size_t)t * sizeof(double))
                .mean,
            2);
    }
    buf_putc(b, '}');
    json_agg(b, "on_demand_cost_usd", aggregate(r, pi, m_time_double, TOFF(on_demand_cost_usd)), 2,
             false);
    json_agg(b, "savings_pct", aggregate(r, pi, m_time_double, TOFF(savings_pct)), 2, std);
    json_agg(b, "interruptions", aggregate(r, pi, m_time_size, TOFF(interruptions)), 1, false);
    json_agg(b, "nodes_started", aggregate(r, pi, m_time_size, TOFF(nodes_started)), 1, false);
    json_agg(b, "moved_to_reserved", aggregate(r, pi, m_time_size, TOFF(moved_to_reserved)), 1,
             false);
    json_agg(b, "production_jobs_on_spot", aggregate(r, pi, m_time_size, TOFF(production_on_spot)),
             1, false);
    json_agg(b, "unsaved_jobs_on_spot", aggregate(r, pi, m_time_size, TOFF(unsaved_on_spot)), 1,
             false);
}

static void json_time(Buf *b, const SimReport *r, size_t pi)
{
    bool std = r->n_seeds > 1;
    json_agg(b, "utilization_pct", aggregate(r, pi, m_time_double, TOFF(utilization_pct)), 2, std);
    json_agg(b, "allocation_pct", aggregate(r, pi, m_time_double, TOFF(allocation_pct)), 2, std);
    json_agg(b, "saturated_utilization_pct",
             aggregate(r, pi, m_time_double, TOFF(saturated_utilization_pct)), 2, std);
    json_agg(b, "saturated_allocation_pct",
             aggregate(r, pi, m_time_double, TOFF(saturated_allocation_pct)), 2, false);
    json_agg(b, "saturated_s", aggregate(r, pi, m_time_double, TOFF(saturated_s)), 1, false);
    json_agg(b, "window_utilization_pct",
             aggregate(r, pi, m_time_double, TOFF(window_utilization_pct)), 2, std);
    json_agg(b, "window_allocation_pct",
             aggregate(r, pi, m_time_double, TOFF(window_allocation_pct)), 2, false);
    json_dist(b, "queue_delay_s", r, pi, TOFF(queue_delay_s));
    json_dist(b, "jct_s", r, pi, TOFF(jct_s));
    json_agg(b, "makespan_s", aggregate(r, pi, m_time_double, TOFF(makespan_s)), 1, std);
    json_agg(b, "jobs_submitted", aggregate(r, pi, m_time_size, TOFF(submitted)), 1, false);
    json_agg(b, "jobs_finished", aggregate(r, pi, m_time_size, TOFF(finished)), 1, std);
    json_agg(b, "jobs_per_hour", aggregate(r, pi, m_time_double, TOFF(jobs_per_hour)), 2, std);
    json_agg(b, "unschedulable", aggregate(r, pi, m_time_size, TOFF(unschedulable)), 1, false);
    json_agg(b, "never_placed", aggregate(r, pi, m_time_size, TOFF(never_placed)), 1, false);
    json_agg(b, "preemptions", aggregate(r, pi, m_time_size, TOFF(preemptions)), 1, false);
    json_agg(b, "reconfigurations", aggregate(r, pi, m_time_size, TOFF(reconfigurations)), 1,
             false);
    json_agg(b, "lost_gpu_hours", aggregate(r, pi, m_time_double, TOFF(lost_gpu_hours)), 2, std);
    json_agg(b, "checkpoint_gpu_hours", aggregate(r, pi, m_time_double, TOFF(checkpoint_gpu_hours)),
             2, false);
    json_agg(b, "oom_failures", aggregate(r, pi, m_time_size, TOFF(oom_failures)), 1, false);
    json_agg(b, "oom_repeats", aggregate(r, pi, m_time_size, TOFF(oom_repeats)), 1, false);
    json_agg(b, "drains", aggregate(r, pi, m_time_size, TOFF(drains)), 1, false);
    json_agg(b, "server_moves", aggregate(r, pi, m_time_size, TOFF(server_moves)), 1, false);
    json_cost(b, r, pi);
    double cap_s = capacity_s(r, pi);
    buf_puts(b, ", \"by_priority\": {");
    bool first = true;
    const TimeResult *t0 = &r->runs[pi * r->n_seeds].time;
    for (size_t p = 0; p < PRIO_COUNT; p++) {
        if (!t0->by_priority[p].finished && !t0->by_priority[p].queue_delay_s.n)
            continue;
        buf_printf(b, "%s\"%s\": ", first ? "" : ", ", priority_name((Priority)p));
        json_group(b, r, pi, false, p, cap_s);
        first = false;
    }
    buf_puts(b, "}, \"by_team\": {");
    for (size_t t = 0; t < t0->n_teams; t++) {
        buf_puts(b, t ? ", " : "");
        buf_json_str(b, t0->by_team[t].name);
        buf_puts(b, ": ");
        json_group(b, r, pi, true, t, cap_s);
    }
    buf_putc(b, '}');
}

void report_json(const SimReport *r, Buf *b)
{
    buf_printf(b, "{\"mode\": \"%s\", \"cluster\": ", r->mode == SIM_PACKING ? "packing" : "time");
    buf_json_str(b, r->cluster_name);
    buf_puts(b, ", \"trace\": ");
    buf_json_str(b, r->trace_name);
    if (has_window(r))
        buf_printf(b, ", \"window_s\": [%.3f, %.3f]", r->window_from_ms / 1000.0,
                   r->window_to_ms / 1000.0);
    buf_puts(b, ", \"results\": [");
    for (size_t pi = 0; pi < r->n_policies; pi++) {
        buf_puts(b, pi ? ",\n  {\"policy\": " : "\n  {\"policy\": ");
        buf_json_str(b, r->policies[pi].name);
        buf_puts(b, ", \"placement\": ");
        buf_json_str(b, r->policies[pi].place->name);
        buf_puts(b, ", \"order\": ");
        buf_json_str(b, queue_order_name(r->policies[pi].order));
        json_seeds(b, r);
        if (r->mode == SIM_PACKING)
            json_packing(b, r, pi);
        else
            json_time(b, r, pi);
        buf_putc(b, '}');
    }
    buf_puts(b, "]}\n");
}

/* ---- the terminal table ---- */

static void cell_agg(Buf *b, Agg a, int digits, bool std)
{
    if (!a.any) {
        buf_puts(b, "-");
        return;
    }
    buf_printf(b, "%.*f", digits, a.mean);
    if (std)
        buf_printf(b, " ±%.*f", digits, a.std);
}

static void table_packing(const SimReport *r, Buf *t)
{
    bool std = r->n_seeds > 1;
    buf_puts(t, "POLICY");
    for (size_t i = 0; i < ARRAY_SIZE(table_levels); i++)
        buf_printf(t, "\t@%d%%", table_levels[i]);
    buf_puts(t, "\tHELD@130%\tFRAG@100%\tFAILED PODS\n");
    for (size_t pi = 0; pi < r->n_policies; pi++) {
        buf_puts(t, r->policies[pi].name);
        for (size_t i = 0; i < ARRAY_SIZE(table_levels); i++) {
            buf_putc(t, '\t');
            cell_agg(t, aggregate(r, pi, m_alloc, (size_t)table_levels[i]), 2, std);
        }
        buf_putc(t, '\t');
        cell_agg(t, aggregate(r, pi, m_held, 130), 2, false);
        buf_putc(t, '\t');
        cell_agg(t, aggregate(r, pi, m_frag, 100), 2, false);
        buf_putc(t, '\t');
        cell_agg(t, aggregate(r, pi, m_failed, 0), 0, false);
        buf_putc(t, '\n');
        /* the authors' figures for the same trace and policy, when known */
        bool any = false;
        for (size_t i = 0; i < ARRAY_SIZE(table_levels); i++)
            any |=
                paper_find(r->paper, r->trace_name, r->policies[pi].name, table_levels[i]) != NULL;
        if (!any)
            continue;
        buf_puts(t, "  paper");
        for (size_t i = 0; i < ARRAY_SIZE(table_levels); i++) {
            const PaperRow *row =
                paper_find(r->paper, r->trace_name, r->policies[pi].name, table_levels[i]);
            if (row)
                buf_printf(t, "\t%.2f%s", row->alloc_mean, std ? " ±" : "");
            else
                buf_puts(t, "\t-");
            if (row && std)
                buf_printf(t, "%.2f", row->alloc_std);
        }
        const PaperRow *f100 = paper_find(r->paper, r->trace_name, r->policies[pi].name, 100);
        if (f100)
            buf_printf(t, "\t-\t%.2f\t\n", f100->frag_mean);
        else
            buf_puts(t, "\t-\t-\t\n");
    }
}

/* "4h-24h", as --window takes it. */
static void window_label(const SimReport *r, char *out, size_t len)
{
    char from[32] = "0", to[32];
    if (r->window_from_ms)
        format_duration(r->window_from_ms, from, sizeof(from));
    format_duration(r->window_to_ms, to, sizeof(to));
    snprintf(out, len, "%s-%s", from, to);
}

static void table_time(const SimReport *r, Buf *t)
{
    bool std = r->n_seeds > 1;
    char win[80];
    window_label(r, win, sizeof(win));
    buf_puts(t, "POLICY\tUTIL%\tALLOC%");
    if (has_window(r))
        buf_printf(t, "\tUTIL%% %s\tALLOC%% %s", win, win);
    buf_puts(t, "\tWAIT mean/p50/p95/p99 (s)\tJCT mean/p95 (s)\t"
                "MAKESPAN (h)\tDONE\tJOBS/H\tPREEMPT\tLOST GPU-h\tOOM\tNEVER\n");
    for (size_t pi = 0; pi < r->n_policies; pi++) {
        const SimReport *rp = r;
        buf_puts(t, r->policies[pi].name);
        buf_putc(t, '\t');
        cell_agg(t, aggregate(rp, pi, m_time_double, TOFF(utilization_pct)), 1, std);
        buf_putc(t, '\t');
        cell_agg(t, aggregate(rp, pi, m_time_double, TOFF(allocation_pct)), 1, std);
        if (has_window(r)) {
            buf_putc(t, '\t');
            cell_agg(t, aggregate(rp, pi, m_time_double, TOFF(window_utilization_pct)), 1, std);
            buf_putc(t, '\t');
            cell_agg(t, aggregate(rp, pi, m_time_double, TOFF(window_allocation_pct)), 1, std);
        }
        buf_printf(t, "\t%.0f/%.0f/%.0f/%.0f",
                   aggregate(rp, pi, m_time_double, TOFF(queue_delay_s.mean)).mean,
                   aggregate(rp, pi, m_time_double, TOFF(queue_delay_s.p50)).mean,
                   aggregate(rp, pi, m_time_double, TOFF(queue_delay_s.p95)).mean,
                   aggregate(rp, pi, m_time_double, TOFF(queue_delay_s.p99)).mean);
        buf_printf(t, "\t%.0f/%.0f", aggregate(rp, pi, m_time_double, TOFF(jct_s.mean)).mean,
                   aggregate(rp, pi, m_time_double, TOFF(jct_s.p95)).mean);
        buf_printf(t, "\t%.1f", aggregate(rp, pi, m_time_double, TOFF(makespan_s)).mean / 3600.0);
        buf_printf(t, "\t%.0f", aggregate(rp, pi, m_time_size, TOFF(finished)).mean);
        buf_printf(t, "\t%.1f", aggregate(rp, pi, m_time_double, TOFF(jobs_per_hour)).mean);
        buf_printf(t, "\t%.0f", aggregate(rp, pi, m_time_size, TOFF(preemptions)).mean);
        buf_printf(t, "\t%.1f", aggregate(rp, pi, m_time_double, TOFF(lost_gpu_hours)).mean);
        buf_printf(t, "\t%.0f", aggregate(rp, pi, m_time_size, TOFF(oom_failures)).mean);
        buf_printf(t, "\t%.0f\n", aggregate(rp, pi, m_time_size, TOFF(never_placed)).mean);
    }
}

/* The bill, when there is one (a priced pool, or nodes that came and go). */
static void table_cost(const SimReport *r, Buf *t)
{
    bool any = false;
    for (size_t i = 0; i < r->n_policies * r->n_seeds; i++)
        any |= r->runs[i].time.cost_usd > 0 || r->runs[i].time.elastic;
    if (!any)
        return;
    buf_puts(t, "POLICY\tCOST $");
    for (int k = 0; k < TIER_COUNT; k++)
        buf_printf(t, "\t%s $", tier_name((Tier)k));
    buf_puts(t, "\tAT ON-DEMAND $\tSAVINGS %\tINTERRUPTIONS\tNODES STARTED\tMOVED BACK\t"
                "PRODUCTION ON SPOT\tUNSAVED ON SPOT\n");
    for (size_t pi = 0; pi < r->n_policies; pi++) {
        buf_printf(t, "%s\t%.0f", r->policies[pi].name,
                   aggregate(r, pi, m_time_double, TOFF(cost_usd)).mean);
        for (int k = 0; k < TIER_COUNT; k++)
            buf_printf(
                t, "\t%.0f",
                aggregate(r, pi, m_time_double, TOFF(cost_by_tier_usd) + (size_t)k * sizeof(double))
                    .mean);
        buf_printf(t, "\t%.0f\t", aggregate(r, pi, m_time_double, TOFF(on_demand_cost_usd)).mean);
        cell_agg(t, aggregate(r, pi, m_time_double, TOFF(savings_pct)), 1, false);
        buf_printf(t, "\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\n",
                   aggregate(r, pi, m_time_size, TOFF(interruptions)).mean,
                   aggregate(r, pi, m_time_size, TOFF(nodes_started)).mean,
                   aggregate(r, pi, m_time_size, TOFF(moved_to_reserved)).mean,
                   aggregate(r, pi, m_time_size, TOFF(production_on_spot)).mean,
                   aggregate(r, pi, m_time_size, TOFF(unsaved_on_spot)).mean);
    }
}

/* Utilisation by team: a row per team, a column per policy; for the teams of the
 * cluster spec, the share of the run their guarantee was met. */
static void table_teams(const SimReport *r, Buf *t)
{
    const TimeResult *t0 = &r->runs[0].time;
    if (t0->n_teams < 2)
        return;
    buf_puts(t, "TEAM (util %, jobs done, guarantee met %)");
    for (size_t pi = 0; pi < r->n_policies; pi++)
        buf_printf(t, "\t%s", r->policies[pi].name);
    buf_putc(t, '\n');
    for (size_t gi = 0; gi < t0->n_teams; gi++) {
        buf_puts(t, t0->by_team[gi].name);
        for (size_t pi = 0; pi < r->n_policies; pi++) {
            double cap_s = capacity_s(r, pi);
            double busy = group_mean(r, pi, true, gi, offsetof(GroupResult, busy_gpu_s), false);
            double done = group_mean(r, pi, true, gi, offsetof(GroupResult, finished), true);
            double met =
                group_mean(r, pi, true, gi, offsetof(GroupResult, guarantee_met_pct), false);
            buf_printf(t, "\t%.1f%%  %.0f", cap_s > 0 ? 100 * busy / cap_s : 0, done);
            if (!isnan(met))
                buf_printf(t, "  %.1f%%", met);
        }
        buf_putc(t, '\n');
    }
}

void report_table(const SimReport *r, FILE *f, void (*print)(FILE *, const char *))
{
    Buf t = {0};
    fprintf(f, "%s mode: cluster %s (%.0f GPUs), trace %s, %zu seed%s\n\n",
            r->mode == SIM_PACKING ? "Packing" : "Time", r->cluster_name, r->gpus, r->trace_name,
            r->n_seeds, r->n_seeds == 1 ? "" : "s");
    if (r->mode == SIM_PACKING) {
        fprintf(f, "GPU allocation (%% of capacity) at each arrived demand (%% of capacity)%s:\n",
                r->n_seeds > 1 ? ", mean ±sd over seeds" : "");
        table_packing(r, &t);
        print(f, buf_str(&t));
    } else {
        table_time(r, &t);
        print(f, buf_str(&t));
        if (has_window(r)) {
            char win[80];
            window_label(r, win, sizeof(win));
            fprintf(f,
                    "UTIL%% and ALLOC%%: over the whole run, to its last event; %s: over that "
                    "stretch from the first submission.\n",
                    win);
        }
        buf_reset(&t);
        table_teams(r, &t);
        if (t.len) {
            fputc('\n', f);
            print(f, buf_str(&t));
        }
        buf_reset(&t);
        table_cost(r, &t);
        if (t.len) {
            fputc('\n', f);
            print(f, buf_str(&t));
        }
    }
    buf_free(&t);
}

/* ---- the output folder ---- */

static int write_file(const char *dir, const char *name, const Buf *b, Buf *err)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f) {
        int e = errno;
        buf_printf(err, "%s: %s", path, strerror(e));
        return -e;
    }
    fwrite(buf_str(b), 1, b->len, f);
    if (fclose(f) != 0) {
        buf_printf(err, "%s: %s", path, strerror(errno));
        return -EIO;
    }
    return 0;
}

static void timeline_csv(const SimReport *r, Buf *b)
{
    if (r->mode == SIM_PACKING) {
        buf_puts(b, "policy,arrived_pct,allocation_pct,allocation_pct_std,fragmentation_pct\n");
        for (size_t pi = 0; pi < r->n_policies; pi++)
            for (size_t x = 0; x < PACK_LEVELS; x++) {
                Agg a = aggregate(r, pi, m_alloc, x), fr = aggregate(r, pi, m_frag, x);
                if (!a.any)
                    continue;
                buf_printf(b, "%s,%zu,%.2f,%.2f,%.2f\n", r->policies[pi].name, x, a.mean, a.std,
                           fr.mean);
            }
        return;
    }
    buf_puts(b, "policy,seed,t_s,utilization_pct,allocation_pct,queued,running\n");
    for (size_t pi = 0; pi < r->n_policies; pi++)
        for (size_t s = 0; s < r->n_seeds; s++) {
            const RunResult *run = &r->runs[pi * r->n_seeds + s];
            for (size_t k = 0; k < run->time.n_timeline; k++) {
                const TimelinePoint *p = &run->time.timeline[k];
                buf_printf(b, "%s,%llu,%.1f,%.2f,%.2f,%u,%u\n", r->policies[pi].name,
                           (unsigned long long)run->seed, p->t_s, p->utilization_pct,
                           p->allocation_pct, p->queued, p->running);
            }
        }
}

static void svg_text_escaped(Buf *b, const char *text)
{
    for (const char *p = text; *p; p++)
        if (*p == '<' || *p == '>' || *p == '&')
            buf_printf(b, "&#%d;", *p);
        else
            buf_putc(b, *p);
}

/* The SVG element, a white page, and the start of the title text at x. */
static void svg_open(Buf *b, double w, double h, double x)
{
    buf_printf(b,
               "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
               "viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\" font-size=\"12\">\n",
               w, h, w, h);
    buf_puts(b, "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n");
    buf_printf(b, "<text x=\"%.0f\" y=\"24\" font-size=\"15\">", x);
}

static const char *const palette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                      "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

/* One self-contained SVG: utilisation over time (time mode, first seed) or allocation
 * over arrived demand (packing, mean over seeds), one line per policy. */
static void chart_svg(const SimReport *r, Buf *b)
{
    const double W = 960, H = 520, L = 70, R = 220, T = 40, B = 60;
    const double pw = W - L - R, ph = H - T - B;
    bool pack = r->mode == SIM_PACKING;
    double xmax = pack ? 130 : 0, ymin = pack ? 0 : 0, ymax = 100;
    if (!pack)
        for (size_t pi = 0; pi < r->n_policies; pi++) {
            const TimeResult *t = &r->runs[pi * r->n_seeds].time;
            if (t->n_timeline)
                xmax = MAX(xmax, t->timeline[t->n_timeline - 1].t_s / 3600.0);
        }
    if (xmax <= 0)
        xmax = 1;
    svg_open(b, W, H, L);
    buf_printf(b, "%s — %s on %s</text>\n",
               pack ? "GPU allocation vs arrived demand" : "GPU utilisation over time",
               r->trace_name, r->cluster_name);
    for (int i = 0; i <= 10; i++) {
        double y = T + ph - ph * i / 10.0;
        buf_printf(b,
                   "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>"
                   "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%.0f%%</text>\n",
                   L, y, L + pw, y, L - 6, y + 4, ymin + (ymax - ymin) * i / 10.0);
    }
    for (int i = 0; i <= 10; i++) {
        double x = L + pw * i / 10.0;
        buf_printf(b,
                   "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#eee\"/>"
                   "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%.*f</text>\n",
                   x, T, x, T + ph, x, T + ph + 18, xmax * i / 10.0 < 10 && !pack ? 1 : 0,
                   xmax * i / 10.0);
    }
    buf_printf(b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n", L + pw / 2,
               H - 16, pack ? "arrived GPU demand (% of capacity)" : "time (hours)");
    buf_printf(b,
               "<text x=\"16\" y=\"%.1f\" transform=\"rotate(-90 16 %.1f)\" "
               "text-anchor=\"middle\">%s</text>\n",
               T + ph / 2, T + ph / 2, pack ? "GPU allocation (%)" : "GPU utilisation (%)");
    for (size_t pi = 0; pi < r->n_policies; pi++) {
        const char *color = palette[pi % ARRAY_SIZE(palette)];
        buf_printf(b, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.6\" points=\"",
                   color);
        if (pack) {
            for (size_t x = 0; x < PACK_LEVELS; x++) {
                Agg a = aggregate(r, pi, m_alloc, x);
                if (a.any)
                    buf_printf(b, "%.1f,%.1f ", L + pw * (double)x / xmax,
                               T + ph - ph * (a.mean - ymin) / (ymax - ymin));
            }
        } else {
            const TimeResult *t = &r->runs[pi * r->n_seeds].time;
            for (size_t k = 0; k < t->n_timeline; k++)
                buf_printf(b, "%.1f,%.1f ", L + pw * (t->timeline[k].t_s / 3600.0) / xmax,
                           T + ph - ph * MIN(100.0, t->timeline[k].utilization_pct) / 100.0);
        }
        buf_puts(b, "\"/>\n");
        double ly = T + 14 + 20.0 * (double)pi;
        buf_printf(b,
                   "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                   "stroke-width=\"3\"/><text x=\"%.1f\" y=\"%.1f\">",
                   L + pw + 16, ly, L + pw + 40, ly, color, L + pw + 46, ly + 4);
        svg_text_escaped(b, r->policies[pi].name);
        buf_puts(b, "</text>\n");
    }
    buf_puts(b, "</svg>\n");
}

/* One policy's run over time (time mode, first seed): utilisation as a filled area,
 * allocation as a line above it (the gap is held but idle compute), and the number of
 * waiting jobs on the right-hand axis. */
static void chart_policy_svg(const SimReport *r, size_t pi, Buf *b)
{
    const double W = 960, H = 460, L = 70, R = 90, T = 40, B = 60;
    const double pw = W - L - R, ph = H - T - B;
    const TimeResult *t = &r->runs[pi * r->n_seeds].time;
    double xmax = 0, qmax = 1;
    for (size_t k = 0; k < t->n_timeline; k++) {
        xmax = MAX(xmax, t->timeline[k].t_s / 3600.0);
        qmax = MAX(qmax, (double)t->timeline[k].queued);
    }
    if (xmax <= 0)
        xmax = 1;
    /* a round top for the queue axis: 1, 2 or 5 times a power of ten */
    double step = pow(10, floor(log10(qmax)));
    double qtop = qmax <= step       ? step
                  : qmax <= 2 * step ? 2 * step
                  : qmax <= 5 * step ? 5 * step
                                     : 10 * step;
    svg_open(b, W, H, L);
    svg_text_escaped(b, r->policies[pi].name);
    buf_printf(b, ": %s on %s (utilisation %.1f%%, allocation %.1f%%)</text>\n", r->trace_name,
               r->cluster_name, t->utilization_pct, t->allocation_pct);
    for (int i = 0; i <= 10; i++) {
        double y = T + ph - ph * i / 10.0;
        buf_printf(b,
                   "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>"
                   "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%d%%</text>"
                   "<text x=\"%.1f\" y=\"%.1f\" fill=\"#ff7f0e\">%.0f</text>\n",
                   L, y, L + pw, y, L - 6, y + 4, i * 10, L + pw + 6, y + 4, qtop * i / 10.0);
    }
    for (int i = 0; i <= 10; i++) {
        double x = L + pw * i / 10.0;
        buf_printf(b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%.*f</text>\n", x,
                   T + ph + 18, xmax * i / 10.0 < 10 ? 1 : 0, xmax * i / 10.0);
    }
    buf_printf(b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">time (hours)</text>\n",
               L + pw / 2, H - 16);
    buf_printf(b,
               "<text x=\"16\" y=\"%.1f\" transform=\"rotate(-90 16 %.1f)\" "
               "text-anchor=\"middle\">GPU capacity (%%)</text>\n",
               T + ph / 2, T + ph / 2);
    buf_printf(b,
               "<text x=\"%.1f\" y=\"%.1f\" transform=\"rotate(90 %.1f %.1f)\" "
               "text-anchor=\"middle\" fill=\"#ff7f0e\">waiting jobs</text>\n",
               W - 14, T + ph / 2, W - 14, T + ph / 2);
#define X(k) (L + pw * (t->timeline[k].t_s / 3600.0) / xmax)
#define Y(v) (T + ph - ph * MIN(100.0, (v)) / 100.0)
    if (t->n_timeline) {
        buf_printf(b, "<polygon fill=\"#1f77b4\" fill-opacity=\"0.35\" points=\"%.1f,%.1f ", X(0),
                   T + ph);
        for (size_t k = 0; k < t->n_timeline; k++)
            buf_printf(b, "%.1f,%.1f ", X(k), Y(t->timeline[k].utilization_pct));
        buf_printf(b, "%.1f,%.1f\"/>\n", X(t->n_timeline - 1), T + ph);
        buf_puts(b, "<polyline fill=\"none\" stroke=\"#d62728\" stroke-width=\"1.4\" points=\"");
        for (size_t k = 0; k < t->n_timeline; k++)
            buf_printf(b, "%.1f,%.1f ", X(k), Y(t->timeline[k].allocation_pct));
        buf_puts(b, "\"/>\n");
        buf_puts(b, "<polyline fill=\"none\" stroke=\"#ff7f0e\" stroke-width=\"1.2\" points=\"");
        for (size_t k = 0; k < t->n_timeline; k++)
            buf_printf(b, "%.1f,%.1f ", X(k), Y(100.0 * t->timeline[k].queued / qtop));
        buf_puts(b, "\"/>\n");
    }
#undef X
#undef Y
    const char *const legend[][2] = {{"#1f77b4", "utilisation (busy)"},
                                     {"#d62728", "allocation (held)"},
                                     {"#ff7f0e", "waiting jobs (right axis)"}};
    for (size_t i = 0; i < ARRAY_SIZE(legend); i++) {
        double lx = L + 10 + 200.0 * (double)i;
        buf_printf(b,
                   "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                   "stroke-width=\"4\"/><text x=\"%.1f\" y=\"%.1f\">%s</text>\n",
                   lx, T + ph + 40, lx + 22, T + ph + 40, legend[i][0], lx + 28, T + ph + 44,
                   legend[i][1]);
    }
    buf_puts(b, "</svg>\n");
}

/* A file name from a policy name: letters, digits, '-', '+' and '.' kept, the rest '_'. */
static void chart_name(const char *policy, char *out, size_t len)
{
    size_t n = (size_t)snprintf(out, len, "chart-");
    for (const char *p = policy; *p && n + 5 < len; p++)
        out[n++] = (isalnum((unsigned char)*p) || strchr("-+.", *p)) ? *p : '_';
    snprintf(out + n, len - n, ".svg");
}

int report_write_dir(const SimReport *r, const char *dir, Buf *err)
{
    if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
        int e = errno;
        buf_printf(err, "%s: %s", dir, strerror(e));
        return -e;
    }
    Buf b = {0};
    int rc;
    report_json(r, &b);
    rc = write_file(dir, "summary.json", &b, err);
    buf_reset(&b);
    if (!rc) {
        timeline_csv(r, &b);
        rc = write_file(dir, "timeline.csv", &b, err);
        buf_reset(&b);
    }
    if (!rc) {
        chart_svg(r, &b);
        rc = write_file(dir, "chart.svg", &b, err);
        buf_reset(&b);
    }
    for (size_t pi = 0; !rc && r->mode == SIM_TIME && pi < r->n_policies; pi++) {
        char name[160];
        chart_name(r->policies[pi].name, name, sizeof(name));
        chart_policy_svg(r, pi, &b);
        rc = write_file(dir, name, &b, err);
        buf_reset(&b);
    }
    if (!rc && b.oom)
        rc = -ENOMEM;
    buf_free(&b);
    return rc;
}
