/* test_report.c: what the simulator hands people (sim/report.c, sim/simpolicy.c).
 * sim_policy_parse: what --policy names (a placement, a queue order, or both) and its
 * errors. report_json on hand-filled results, read back with jansson: the keys and
 * values put in come out, with several seeds as means and sample standard deviations,
 * null where a packing level has no data, and the FGD authors' figures beside ours
 * when a matching row is given. report_table in time mode, with and without --window.
 * report_write_dir: the three files, the timeline's
 * header exact. paper_load on small CSV files and on the authors' real summary, and
 * its refusal of a file that is not one. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "sim/report.h"
#include "sim/sim.h"
#include "util/buf.h"
#include "util/file.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- sim_policy_parse ---- */

static void expect_policy(const char *s, const char *place, QueueOrder order)
{
    SimPolicy p;
    Buf err = {0};
    if (sim_policy_parse(s, &p, &err) != 0)
        fail_msg("'%s': %s", s, buf_str(&err));
    assert_non_null(p.place);
    assert_string_equal(p.place->name, place);
    assert_int_equal(p.order, order);
    assert_string_equal(p.name, s);
    assert_int_equal(err.len, 0);
    buf_free(&err);
}

static void expect_policy_error(const char *s, const char *msg)
{
    SimPolicy p = {.name = "untouched"};
    Buf err = {0};
    assert_int_equal(sim_policy_parse(s, &p, &err), -1);
    if (!strstr(buf_str(&err), msg))
        fail_msg("'%s': error '%s' does not say '%s'", s, buf_str(&err), msg);
    assert_string_equal(p.name, "untouched");
    buf_free(&err);
}

static void test_policy_parse(void **state)
{
    (void)state;
    /* a placement alone queues FIFO, except gpuorch (priority classes) and k8s-default
     * (kube-scheduler: priority then age, priority preemption) */
    expect_policy("best-fit", "best-fit", ORDER_FIFO);
    expect_policy("fgd", "fgd", ORDER_FIFO);
    expect_policy("k8s-default", "k8s-default", ORDER_KUBE);
    expect_policy("k8s-default+fifo", "k8s-default", ORDER_FIFO);
    expect_policy("kube", "gpuorch", ORDER_KUBE);
    expect_policy("gpuorch", "gpuorch", ORDER_PRIORITY);
    /* an order alone places with gpuorch */
    expect_policy("tiresias", "gpuorch", ORDER_TIRESIAS);
    expect_policy("fifo", "gpuorch", ORDER_FIFO);
    expect_policy("priority", "gpuorch", ORDER_PRIORITY);
    /* both */
    expect_policy("fgd+tiresias", "fgd", ORDER_TIRESIAS);
    expect_policy("gpuorch+fifo", "gpuorch", ORDER_FIFO);
    expect_policy("best-fit+priority", "best-fit", ORDER_PRIORITY);
    expect_policy("FGD+Tiresias", "fgd", ORDER_TIRESIAS);
    assert_string_equal(queue_order_name(ORDER_TIRESIAS), "tiresias");
    assert_string_equal(queue_order_name(ORDER_FIFO), "fifo");
    assert_string_equal(queue_order_name(ORDER_PRIORITY), "priority");
    assert_string_equal(queue_order_name(ORDER_KUBE), "kube");

    expect_policy_error("nope", "unknown placement policy 'nope'");
    expect_policy_error("nope+fifo", "unknown placement policy 'nope'");
    expect_policy_error("fgd+lifo", "unknown queue order 'lifo'");
    expect_policy_error("+fifo", "unknown placement policy ''");
    expect_policy_error("tiresias+fifo", "unknown placement policy 'tiresias'");
    char longname[200];
    memset(longname, 'x', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    expect_policy_error(longname, "too long");
}

/* ---- results filled by hand ---- */

static SimPolicy parse(const char *s)
{
    SimPolicy p;
    Buf err = {0};
    assert_int_equal(sim_policy_parse(s, &p, &err), 0);
    buf_free(&err);
    return p;
}

static void pack_nan(RunResult *r, uint64_t seed)
{
    *r = (RunResult){.seed = seed, .mode = SIM_PACKING};
    for (size_t x = 0; x < PACK_LEVELS; x++)
        r->pack.alloc_pct[x] = r->pack.held_pct[x] = r->pack.frag_pct[x] = NAN;
}

static json_t *parse_json(const Buf *b)
{
    json_error_t e;
    json_t *j = json_loads(buf_str(b), 0, &e);
    if (!j)
        fail_msg("not JSON (%s at %d:%d): %s", e.text, e.line, e.column, buf_str(b));
    return j;
}

/* The value at a path of object keys ("results" arrays are indexed by the caller). */
static json_t *at(json_t *j, const char *k1, const char *k2)
{
    json_t *v = json_object_get(j, k1);
    if (v && k2)
        v = json_object_get(v, k2);
    if (!v) {
        fail_msg("no key '%s%s%s'", k1, k2 ? "." : "", k2 ? k2 : "");
        abort(); /* not reached: fail_msg leaves the test; this tells the compiler so */
    }
    return v;
}

static void expect_num(json_t *j, const char *k1, const char *k2, double want)
{
    json_t *v = at(j, k1, k2);
    if (!json_is_number(v))
        fail_msg("%s.%s is not a number", k1, k2 ? k2 : "");
    if (fabs(json_number_value(v) - want) > 1e-9)
        fail_msg("%s.%s = %.10g, want %.10g", k1, k2 ? k2 : "", json_number_value(v), want);
}

static void expect_null(json_t *j, const char *k1, const char *k2)
{
    if (!json_is_null(at(j, k1, k2)))
        fail_msg("%s.%s is not null", k1, k2 ? k2 : "");
}

static void expect_str(json_t *j, const char *k, const char *want)
{
    json_t *v = at(j, k, NULL);
    assert_true(json_is_string(v));
    assert_string_equal(json_string_value(v), want);
}

static void test_json_packing_one_seed(void **state)
{
    (void)state;
    SimPolicy pol = parse("best-fit");
    uint64_t seeds[] = {11};
    RunResult run;
    pack_nan(&run, 11);
    run.pack.alloc_pct[50] = 49.5;
    run.pack.alloc_pct[100] = 88.25;
    run.pack.alloc_pct[130] = 90;
    run.pack.held_pct[50] = 50;
    run.pack.frag_pct[100] = 12.34;
    run.pack.pods = 1000;
    run.pack.failed = 25;
    SimReport rep = {.mode = SIM_PACKING,
                     .cluster_name = "lab \"one\"",
                     .trace_name = "openb_pod_list_default",
                     .gpus = 64,
                     .policies = &pol,
                     .n_policies = 1,
                     .seeds = seeds,
                     .n_seeds = 1,
                     .runs = &run};
    Buf b = {0};
    report_json(&rep, &b);
    json_t *j = parse_json(&b);
    expect_str(j, "mode", "packing");
    expect_str(j, "cluster", "lab \"one\"");
    expect_str(j, "trace", "openb_pod_list_default");
    json_t *res = at(j, "results", NULL);
    assert_int_equal(json_array_size(res), 1);
    json_t *r = json_array_get(res, 0);
    expect_str(r, "policy", "best-fit");
    expect_str(r, "placement", "best-fit");
    expect_str(r, "order", "fifo");
    json_t *s = at(r, "seeds", NULL);
    assert_int_equal(json_array_size(s), 1);
    assert_int_equal(json_integer_value(json_array_get(s, 0)), 11);
    /* one key per level 0..130, null where nothing fell */
    assert_int_equal(json_object_size(at(r, "allocation_pct", NULL)), PACK_LEVELS);
    expect_num(r, "allocation_pct", "50", 49.5);
    expect_num(r, "allocation_pct", "100", 88.25);
    expect_num(r, "allocation_pct", "130", 90);
    expect_null(r, "allocation_pct", "0");
    expect_null(r, "allocation_pct", "99");
    expect_num(r, "held_pct", "50", 50);
    expect_null(r, "held_pct", "100");
    expect_num(r, "fragmentation_pct", "100", 12.34);
    expect_null(r, "fragmentation_pct", "50");
    expect_num(r, "pods", NULL, 1000);
    expect_num(r, "failed_pods", NULL, 25);
    /* one seed: no spread, and no paper figures without a table */
    assert_null(json_object_get(r, "allocation_pct_std"));
    assert_null(json_object_get(r, "paper"));
    json_decref(j);
    buf_free(&b);
}

static void test_json_packing_seeds_and_paper(void **state)
{
    (void)state;
    SimPolicy pols[] = {parse("best-fit"), parse("fgd")};
    uint64_t seeds[] = {1, 2, 3};
    RunResult runs[6];
    for (size_t i = 0; i < 6; i++)
        pack_nan(&runs[i], seeds[i % 3]);
    /* best-fit: 40, 50, 60 at 50%: mean 50, sd 10 */
    const double a50[] = {40, 50, 60}, a70[] = {NAN, 70, 80};
    const size_t failed[] = {1, 2, 6};
    for (size_t s = 0; s < 3; s++) {
        runs[s].pack.alloc_pct[50] = a50[s];
        runs[s].pack.alloc_pct[70] = a70[s];
        runs[s].pack.pods = 1000;
        runs[s].pack.failed = failed[s];
        runs[3 + s].pack.alloc_pct[50] = 45;
        runs[3 + s].pack.pods = 1000;
    }
    PaperRow rows[] = {
        {"openb_pod_list_default", "best-fit", 50, 49.91, 0.12, 10.74},
        {"openb_pod_list_default", "best-fit", 100, 88.12, 0.3, 5},
        {"openb_pod_list_cpu050", "best-fit", 70, 1, 1, 1}, /* another trace */
        {"openb_pod_list_default", "fgd", 70, 69.5, 0.1, 2},
        {"openb_pod_list_default", "fgd", 75, 74, 0.1, 2}, /* not a table level */
    };
    PaperFigures paper = {.rows = rows, .n = sizeof(rows) / sizeof(rows[0])};
    SimReport rep = {.mode = SIM_PACKING,
                     .cluster_name = "lab",
                     .trace_name = "openb_pod_list_default",
                     .gpus = 64,
                     .policies = pols,
                     .n_policies = 2,
                     .seeds = seeds,
                     .n_seeds = 3,
                     .runs = runs,
                     .paper = &paper};
    Buf b = {0};
    report_json(&rep, &b);
    json_t *j = parse_json(&b);
    json_t *res = at(j, "results", NULL);
    assert_int_equal(json_array_size(res), 2);
    json_t *bf = json_array_get(res, 0), *fgd = json_array_get(res, 1);
    expect_str(bf, "policy", "best-fit");
    expect_str(fgd, "policy", "fgd");
    assert_int_equal(json_array_size(at(bf, "seeds", NULL)), 3);
    assert_int_equal(json_integer_value(json_array_get(at(bf, "seeds", NULL), 2)), 3);
    expect_num(bf, "allocation_pct", "50", 50);
    expect_num(bf, "allocation_pct_std", "50", 10);
    /* a seed without data at a level is left out of that level's figures */
    expect_num(bf, "allocation_pct", "70", 75);
    expect_num(bf, "allocation_pct_std", "70", 7.07); /* sqrt(50), 2 decimals */
    expect_null(bf, "allocation_pct", "90");
    expect_null(bf, "allocation_pct_std", "90");
    expect_num(bf, "failed_pods", NULL, 3);
    expect_num(bf, "pods", NULL, 1000);
    expect_num(fgd, "allocation_pct", "50", 45);
    expect_num(fgd, "allocation_pct_std", "50", 0);
    /* the authors' figures: this trace and policy, table levels only */
    json_t *pa = at(bf, "paper", "allocation_pct");
    assert_int_equal(json_object_size(pa), 2);
    expect_num(pa, "50", NULL, 49.91);
    expect_num(pa, "100", NULL, 88.12);
    pa = at(fgd, "paper", "allocation_pct");
    assert_int_equal(json_object_size(pa), 1);
    expect_num(pa, "70", NULL, 69.5);
    json_decref(j);

    /* no matching row: no "paper" key */
    rep.trace_name = "openb_pod_list_gpushare100";
    buf_reset(&b);
    report_json(&rep, &b);
    j = parse_json(&b);
    assert_null(json_object_get(json_array_get(at(j, "results", NULL), 0), "paper"));
    json_decref(j);
    buf_free(&b);
}

/* ---- time mode ---- */

/* One time-mode run: figures scaled by k (k = 1, 2, 3 for three seeds). */
static void time_run(RunResult *r, uint64_t seed, double k)
{
    *r = (RunResult){.seed = seed, .mode = SIM_TIME};
    TimeResult *t = &r->time;
    t->utilization_pct = 40 + 10 * k;
    t->allocation_pct = 70;
    t->queue_delay_s = (Dist){.mean = 10 * k, .p50 = 5, .p95 = 30, .p99 = 40, .max = 50, .n = 9};
    t->jct_s = (Dist){.mean = 100, .p50 = 90, .p95 = 200, .p99 = 250, .max = 300 * k, .n = 9};
    t->makespan_s = 3000 + 600 * (k - 1);
    t->jobs_per_hour = 12;
    t->submitted = 20;
    t->finished = (size_t)(8 + 2 * k);
    t->never_placed = 1;
    t->unschedulable = 2;
    t->preemptions = (size_t)k;
    t->reconfigurations = 4;
    t->by_priority[PRIO_NORMAL] =
        (GroupResult){.finished = 5, .busy_gpu_s = 12000, .alloc_gpu_s = 18000};
    t->by_priority[PRIO_NORMAL].queue_delay_s = (Dist){.mean = 3, .max = 9, .n = 5};
    /* low: nothing finished, but jobs waited: listed */
    t->by_priority[PRIO_LOW].queue_delay_s = (Dist){.mean = 60, .n = 2};
    t->n_teams = 2;
    t->by_team = calloc(2, sizeof(GroupResult));
    assert_non_null(t->by_team);
    t->by_team[0] = (GroupResult){.name = strdup("alpha"), .finished = 4, .busy_gpu_s = 3600};
    t->by_team[1] = (GroupResult){.name = strdup("beta"), .finished = 1, .alloc_gpu_s = 7200};
    t->n_timeline = 2;
    t->timeline = calloc(2, sizeof(TimelinePoint));
    assert_non_null(t->timeline);
    t->timeline[0] = (TimelinePoint){0, 10, 20, 3, 4};
    t->timeline[1] = (TimelinePoint){60.25, 55.5, 60, 0, 7};
}

static void test_json_time(void **state)
{
    (void)state;
    SimPolicy pol = parse("gpuorch");
    uint64_t seeds[] = {5, 6, 7};
    RunResult runs[3];
    for (size_t s = 0; s < 3; s++)
        time_run(&runs[s], seeds[s], (double)s + 1);
    SimReport rep = {.mode = SIM_TIME,
                     .cluster_name = "lab",
                     .trace_name = "jobs.csv",
                     .gpus = 8,
                     .policies = &pol,
                     .n_policies = 1,
                     .seeds = seeds,
                     .n_seeds = 1,
                     .runs = runs};

    /* one seed: the first run's figures, no spreads */
    Buf b = {0};
    report_json(&rep, &b);
    json_t *j = parse_json(&b);
    expect_str(j, "mode", "time");
    json_t *r = json_array_get(at(j, "results", NULL), 0);
    expect_str(r, "placement", "gpuorch");
    expect_str(r, "order", "priority");
    expect_num(r, "utilization_pct", NULL, 50);
    expect_num(r, "allocation_pct", NULL, 70);
    assert_null(json_object_get(r, "utilization_pct_std"));
    assert_null(json_object_get(r, "makespan_s_std"));
    expect_num(r, "queue_delay_s", "mean", 10);
    expect_num(r, "queue_delay_s", "p95", 30);
    expect_num(r, "jct_s", "max", 300);
    expect_num(r, "makespan_s", NULL, 3000);
    expect_num(r, "jobs_submitted", NULL, 20);
    expect_num(r, "jobs_finished", NULL, 10);
    expect_num(r, "jobs_per_hour", NULL, 12);
    expect_num(r, "unschedulable", NULL, 2);
    expect_num(r, "never_placed", NULL, 1);
    expect_num(r, "preemptions", NULL, 1);
    expect_num(r, "reconfigurations", NULL, 4);
    /* groups: 8 GPUs x 3000 s = 24000 GPU-s of capacity */
    json_t *bp = at(r, "by_priority", NULL);
    assert_int_equal(json_object_size(bp), 2);
    json_t *normal = at(bp, "normal", NULL);
    expect_num(normal, "jobs_finished", NULL, 5);
    expect_num(normal, "utilization_pct", NULL, 50);
    expect_num(normal, "allocation_pct", NULL, 75);
    expect_num(normal, "gpu_hours", NULL, 5);
    expect_num(normal, "queue_delay_s", "mean", 3);
    expect_num(normal, "queue_delay_s", "max", 9);
    expect_num(at(bp, "low", NULL), "queue_delay_s", "mean", 60);
    json_t *bt = at(r, "by_team", NULL);
    assert_int_equal(json_object_size(bt), 2);
    expect_num(at(bt, "alpha", NULL), "jobs_finished", NULL, 4);
    expect_num(at(bt, "alpha", NULL), "utilization_pct", NULL, 15);
    expect_num(at(bt, "beta", NULL), "gpu_hours", NULL, 2);
    expect_num(at(bt, "beta", NULL), "allocation_pct", NULL, 30);
    json_decref(j);

    /* three seeds: means, and sample standard deviations beside the headline figures */
    rep.n_seeds = 3;
    buf_reset(&b);
    report_json(&rep, &b);
    j = parse_json(&b);
    r = json_array_get(at(j, "results", NULL), 0);
    assert_int_equal(json_array_size(at(r, "seeds", NULL)), 3);
    expect_num(r, "utilization_pct", NULL, 60);
    expect_num(r, "utilization_pct_std", NULL, 10);
    expect_num(r, "allocation_pct", NULL, 70);
    expect_num(r, "allocation_pct_std", NULL, 0);
    expect_num(r, "makespan_s", NULL, 3600);
    expect_num(r, "makespan_s_std", NULL, 600);
    expect_num(r, "jobs_finished", NULL, 12);
    expect_num(r, "jobs_finished_std", NULL, 2);
    expect_num(r, "jobs_per_hour_std", NULL, 0);
    assert_null(json_object_get(r, "jobs_submitted_std"));
    expect_num(r, "queue_delay_s", "mean", 20);
    expect_num(r, "jct_s", "max", 600);
    expect_num(r, "preemptions", NULL, 2);
    /* 8 GPUs x 3600 s (the mean makespan): 12000 / 28800 = 41.67% (2 decimals) */
    expect_num(at(at(r, "by_priority", NULL), "normal", NULL), "utilization_pct", NULL, 41.67);
    json_decref(j);
    buf_free(&b);
    for (size_t s = 0; s < 3; s++)
        run_result_free(&runs[s]);
    assert_null(runs[0].time.by_team);
}

/* The terminal table lays columns out with the CLI's aligner; here tabs stay tabs. */
static void print_plain(FILE *f, const char *text)
{
    fputs(text, f);
}

static char *table_text(const SimReport *rep)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    report_table(rep, f, print_plain);
    assert_int_equal(fclose(f), 0);
    return text;
}

/* With --window the table puts utilisation and allocation over the window beside the
 * whole run's (which, after the arrivals stop, counts the backlog draining too), names
 * the window in the header, says which is which under the table, and JSON gives the
 * window's bounds; without one, none of that. */
static void test_table_time_window(void **state)
{
    (void)state;
    SimPolicy pol = parse("gpuorch");
    uint64_t seeds[] = {5};
    RunResult run;
    time_run(&run, 5, 1);
    run.time.window_utilization_pct = 78.94;
    run.time.window_allocation_pct = 95.86;
    SimReport rep = {.mode = SIM_TIME,
                     .cluster_name = "lab",
                     .trace_name = "jobs.csv",
                     .gpus = 8,
                     .policies = &pol,
                     .n_policies = 1,
                     .seeds = seeds,
                     .n_seeds = 1,
                     .runs = &run,
                     .window_from_ms = 4 * 3600000LL,
                     .window_to_ms = 24 * 3600000LL};
    char *text = table_text(&rep);
    assert_non_null(strstr(text, "POLICY\tUTIL%\tALLOC%\tUTIL% 4h-24h\tALLOC% 4h-24h\tWAIT"));
    assert_non_null(strstr(text, "\ngpuorch\t50.0\t70.0\t78.9\t95.9\t10/5/30/40\t"));
    assert_non_null(strstr(text, "4h-24h: over that stretch from the first submission"));
    free(text);
    Buf b = {0};
    report_json(&rep, &b);
    json_t *j = parse_json(&b);
    json_t *w = at(j, "window_s", NULL);
    assert_int_equal(json_array_size(w), 2);
    assert_true(json_number_value(json_array_get(w, 0)) == 14400);
    assert_true(json_number_value(json_array_get(w, 1)) == 86400);
    json_decref(j);

    /* a window from the start reads "0-30m" */
    rep.window_from_ms = 0;
    rep.window_to_ms = 30 * 60000LL;
    text = table_text(&rep);
    assert_non_null(strstr(text, "\tUTIL% 0-30m\tALLOC% 0-30m\t"));
    free(text);

    rep.window_to_ms = 0;
    text = table_text(&rep);
    assert_null(strstr(text, "UTIL% 0"));
    assert_null(strstr(text, "78.9"));
    assert_null(strstr(text, "stretch"));
    assert_non_null(strstr(text, "\ngpuorch\t50.0\t70.0\t10/5/30/40\t"));
    free(text);
    buf_reset(&b);
    report_json(&rep, &b);
    j = parse_json(&b);
    assert_null(json_object_get(j, "window_s"));
    json_decref(j);
    buf_free(&b);
    run_result_free(&run);
}

/* ---- the output folder ---- */

static char *slurp(const char *dir, const char *name)
{
    char path[4096];
    if (snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path))
        fail_msg("path too long: %s/%s", dir, name);
    char *text = NULL;
    size_t len = 0;
    if (file_read_all(path, &text, &len) != 0)
        fail_msg("cannot read %s", path);
    return text;
}

static void remove_dir(const char *dir)
{
    const char *names[] = {"summary.json", "timeline.csv", "chart.svg", "chart-fgd+tiresias.svg"};
    char path[4096];
    for (size_t i = 0; i < 4; i++) {
        if (snprintf(path, sizeof(path), "%s/%s", dir, names[i]) < (int)sizeof(path))
            unlink(path);
    }
    assert_int_equal(rmdir(dir), 0);
}

static bool ends_with(const char *s, const char *end)
{
    size_t n = strlen(s), m = strlen(end);
    return n >= m && strcmp(s + n - m, end) == 0;
}

static void test_write_dir(void **state)
{
    (void)state;
    char tmp[] = "/tmp/gpuorch-report-XXXXXX";
    assert_non_null(mkdtemp(tmp));
    char out[4096];
    snprintf(out, sizeof(out), "%s/out", tmp);

    /* packing: the folder is created */
    SimPolicy pol = parse("best-fit");
    uint64_t seed = 11;
    RunResult run;
    pack_nan(&run, seed);
    run.pack.alloc_pct[50] = 49.5;
    run.pack.alloc_pct[100] = 88.25;
    run.pack.frag_pct[100] = 12.34;
    SimReport rep = {.mode = SIM_PACKING,
                     .cluster_name = "lab",
                     .trace_name = "t",
                     .gpus = 8,
                     .policies = &pol,
                     .n_policies = 1,
                     .seeds = &seed,
                     .n_seeds = 1,
                     .runs = &run};
    Buf err = {0}, b = {0};
    assert_int_equal(report_write_dir(&rep, out, &err), 0);
    assert_int_equal(err.len, 0);
    char *text = slurp(out, "summary.json");
    report_json(&rep, &b);
    assert_string_equal(text, buf_str(&b));
    free(text);
    text = slurp(out, "timeline.csv");
    assert_string_equal(text,
                        "policy,arrived_pct,allocation_pct,allocation_pct_std,fragmentation_pct\n"
                        "best-fit,50,49.50,0.00,0.00\n"
                        "best-fit,100,88.25,0.00,12.34\n");
    free(text);
    text = slurp(out, "chart.svg");
    assert_true(strncmp(text, "<svg ", 5) == 0);
    assert_true(ends_with(text, "</svg>\n"));
    assert_non_null(strstr(text, ">best-fit</text>"));
    free(text);

    /* time mode into the same (existing) folder: files replaced */
    RunResult trun;
    time_run(&trun, 5, 1);
    SimPolicy tpol = parse("fgd+tiresias");
    uint64_t tseed = 5;
    SimReport trep = {.mode = SIM_TIME,
                      .cluster_name = "lab",
                      .trace_name = "t",
                      .gpus = 8,
                      .policies = &tpol,
                      .n_policies = 1,
                      .seeds = &tseed,
                      .n_seeds = 1,
                      .runs = &trun};
    assert_int_equal(report_write_dir(&trep, out, &err), 0);
    text = slurp(out, "timeline.csv");
    assert_string_equal(text, "policy,seed,t_s,utilization_pct,allocation_pct,queued,running\n"
                              "fgd+tiresias,5,0.0,10.00,20.00,3,4\n"
                              "fgd+tiresias,5,60.2,55.50,60.00,0,7\n");
    free(text);
    text = slurp(out, "summary.json");
    buf_reset(&b);
    report_json(&trep, &b);
    assert_string_equal(text, buf_str(&b));
    free(text);
    text = slurp(out, "chart.svg");
    assert_true(ends_with(text, "</svg>\n"));
    assert_non_null(strstr(text, ">fgd+tiresias</text>"));
    free(text);
    /* and the policy's own chart, titled with its figures */
    text = slurp(out, "chart-fgd+tiresias.svg");
    assert_true(strncmp(text, "<svg ", 5) == 0);
    assert_true(ends_with(text, "</svg>\n"));
    char title[200];
    snprintf(title, sizeof(title),
             ">fgd+tiresias: t on lab (utilisation %.1f%%, allocation %.1f%%)<",
             trun.time.utilization_pct, trun.time.allocation_pct);
    if (!strstr(text, title))
        fail_msg("chart-fgd+tiresias.svg has no title %s", title);
    free(text);
    run_result_free(&trun);
    remove_dir(out);

    /* a folder that cannot be made: an error naming it */
    char bad[4096];
    snprintf(bad, sizeof(bad), "%s/missing/out", tmp);
    assert_true(report_write_dir(&rep, bad, &err) < 0);
    assert_non_null(strstr(buf_str(&err), bad));
    assert_int_equal(rmdir(tmp), 0);
    buf_free(&err);
    buf_free(&b);
}

/* ---- the authors' figures ---- */

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
}

static void test_paper_load(void **state)
{
    (void)state;
    char path[] = "/tmp/gpuorch-paper-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);

    write_text(path,
               "workload,sc_policy,arrived_pct_of_gpu_capacity,gpu_alloc_ratio_pct_mean,"
               "gpu_alloc_ratio_pct_std,unallocated_gpu_pct_mean,frag_gpu_over_total_pct_mean,"
               "frag_over_idle_pct_mean\n"
               "openb_pod_list_default,05-BestFit,50,49.91,0.12,50.09,10.74,21.43\n"
               "openb_pod_list_default,06-FGD,100,93.5,0.2,6.5,3.1,40\n"
               "openb_pod_list_default,99-Other,50,1,1,1,1,1\n"
               "openb_pod_list_cpu050,01-Random,70,69.11,0.37,30.89,12.06,39.07\n");
    PaperFigures p = {0};
    Buf err = {0};
    assert_int_equal(paper_load(path, &p, &err), 0);
    assert_int_equal(p.n, 3); /* the unknown policy is skipped */
    const PaperRow *row = paper_find(&p, "openb_pod_list_default", "best-fit", 50);
    assert_non_null(row);
    assert_float_equal(row->alloc_mean, 49.91, 1e-12);
    assert_float_equal(row->alloc_std, 0.12, 1e-12);
    assert_float_equal(row->frag_mean, 10.74, 1e-12);
    row = paper_find(&p, "openb_pod_list_default", "fgd", 100);
    assert_non_null(row);
    assert_float_equal(row->alloc_mean, 93.5, 1e-12);
    row = paper_find(&p, "openb_pod_list_cpu050", "random", 70);
    assert_non_null(row);
    assert_float_equal(row->frag_mean, 12.06, 1e-12);
    assert_null(paper_find(&p, "openb_pod_list_default", "best-fit", 70));
    assert_null(paper_find(&p, "openb_pod_list_cpu050", "best-fit", 50));
    assert_null(paper_find(NULL, "openb_pod_list_default", "best-fit", 50));
    paper_free(&p);
    assert_null(p.rows);

    /* columns found by name, in any order */
    write_text(path, "sc_policy,frag_gpu_over_total_pct_mean,workload,gpu_alloc_ratio_pct_std,"
                     "arrived_pct_of_gpu_capacity,gpu_alloc_ratio_pct_mean\n"
                     "02-DotProd,7.5,w,0.5,80,79.25\n");
    assert_int_equal(paper_load(path, &p, &err), 0);
    assert_int_equal(p.n, 1);
    row = paper_find(&p, "w", "dot-product", 80);
    assert_non_null(row);
    assert_float_equal(row->alloc_mean, 79.25, 1e-12);
    assert_float_equal(row->frag_mean, 7.5, 1e-12);
    paper_free(&p);

    /* not the authors' summary: refused, nothing returned */
    PaperFigures keep = {.n = 42};
    write_text(path, "a,b,c\n1,2,3\n");
    assert_int_equal(paper_load(path, &keep, &err), -EINVAL);
    assert_non_null(strstr(buf_str(&err), ":1: not the FGD authors' summary"));
    assert_non_null(strstr(buf_str(&err), path));
    assert_int_equal(keep.n, 42);
    buf_reset(&err);
    write_text(path, "");
    assert_int_equal(paper_load(path, &keep, &err), -EINVAL);
    assert_non_null(strstr(buf_str(&err), "not the FGD authors' summary"));
    buf_reset(&err);
    /* a short row */
    write_text(path, "workload,sc_policy,arrived_pct_of_gpu_capacity,gpu_alloc_ratio_pct_mean,"
                     "gpu_alloc_ratio_pct_std,frag_gpu_over_total_pct_mean\n"
                     "w,06-FGD,50,49,1,2\n"
                     "w,06-FGD,70\n");
    assert_int_equal(paper_load(path, &keep, &err), -EINVAL);
    assert_non_null(strstr(buf_str(&err), ":3: wrong number of columns"));
    assert_int_equal(keep.n, 42);
    buf_reset(&err);
    unlink(path);
    /* no file */
    assert_true(paper_load(path, &keep, &err) < 0);
    assert_non_null(strstr(buf_str(&err), path));
    buf_free(&err);
}

/* The authors' real summary, as the CLI finds it beside a trace. */
static void test_paper_real(void **state)
{
    (void)state;
    const char *shared = getenv("GPUORCH_SHARED");
    char path[4096];
    snprintf(path, sizeof(path), "%s/traces/fgd-results/fgd_summary_mean_over_10_seeds.csv",
             shared ? shared : "../shared");
    if (access(path, R_OK) != 0)
        skip();
    PaperFigures p = {0};
    Buf err = {0};
    assert_int_equal(paper_load(path, &p, &err), 0);
    assert_int_equal(p.n, 6 * 104);
    const PaperRow *row = paper_find(&p, "openb_pod_list_cpu050", "random", 50);
    assert_non_null(row);
    assert_float_equal(row->alloc_mean, 49.91, 1e-12);
    assert_float_equal(row->alloc_std, 0.12, 1e-12);
    assert_float_equal(row->frag_mean, 10.74, 1e-12);
    paper_free(&p);
    buf_free(&err);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_policy_parse),
        cmocka_unit_test(test_json_packing_one_seed),
        cmocka_unit_test(test_json_packing_seeds_and_paper),
        cmocka_unit_test(test_json_time),
        cmocka_unit_test(test_table_time_window),
        cmocka_unit_test(test_write_dir),
        cmocka_unit_test(test_paper_load),
        cmocka_unit_test(test_paper_real),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
