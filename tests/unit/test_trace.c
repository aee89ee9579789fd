/* test_trace.c: the simulator's trace readers (src/sim/trace.c). A trace misread is a
 * simulation silently wrong, so each rule is pinned on a small file: the Alibaba pod
 * list (CPU-only pods, shares, whole GPUs, gpu_spec lists with '|', creation and
 * deletion times as submit and duration, the multigpu files' shorter header), the
 * Philly job table (times relative to the earliest submission, jobs above 8 GPUs as
 * gangs of equal workers of at most 8, the VC as the team), format detection, and
 * malformed rows, each of which must fail with -EINVAL and a message naming the file,
 * the exact line (blank lines and quoted newlines counted) and the column. */
#include "sim/sim.h"

#include "core/job.h"
#include "spec/spec.h"
#include "util/buf.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* ---- helpers ---- */

static char tmpdir[] = "/tmp/gpuorch-test-trace-XXXXXX";

static int setup_dir(void **state)
{
    (void)state;
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int remove_dir(void **state)
{
    (void)state;
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

/* Write text to tmpdir/name; the path goes to out. */
static const char *write_file(const char *name, const char *text, char *out, size_t outlen)
{
    snprintf(out, outlen, "%s/%s", tmpdir, name);
    FILE *f = fopen(out, "w");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
    return out;
}

static void load_ok(const char *name, const char *text, TraceFormat fmt, JobList *l)
{
    char path[512];
    Buf err = {0};
    *l = (JobList){0};
    int r = trace_load(write_file(name, text, path, sizeof(path)), fmt, l, &err);
    if (r)
        print_message("%s\n", buf_str(&err));
    assert_int_equal(r, 0);
    assert_int_equal(err.len, 0);
    buf_free(&err);
}

/* Fails with -EINVAL, writes nothing to the list, and says "PATH:LINE: column 'COL'"
 * (col NULL: just "PATH:LINE:"), and the hint when given. */
static void load_bad(const char *text, TraceFormat fmt, size_t line, const char *col,
                     const char *hint)
{
    char path[512], want[700];
    Buf err = {0};
    JobList l = {.n = 12345};
    int r = trace_load(write_file("bad.csv", text, path, sizeof(path)), fmt, &l, &err);
    if (col)
        snprintf(want, sizeof(want), "%s:%zu: column '%s'", path, line, col);
    else
        snprintf(want, sizeof(want), "%s:%zu:", path, line);
    bool ok = r == -EINVAL && strstr(buf_str(&err), want) && (!hint || strstr(buf_str(&err), hint));
    char got[1024];
    snprintf(got, sizeof(got), "%s", buf_str(&err));
    buf_free(&err);
    if (!ok)
        fail_msg("got %d '%s', expected -EINVAL and '%s'%s%s", r, got, want, hint ? " with " : "",
                 hint ? hint : "");
    assert_int_equal(l.n, 12345);
    assert_null(l.jobs);
}

static const JobSpec *job(const JobList *l, const char *name)
{
    for (size_t i = 0; i < l->n; i++)
        if (!strcmp(l->jobs[i].name, name))
            return &l->jobs[i];
    fail_msg("no job %s", name);
    abort(); /* not reached: fail_msg leaves the test; this tells the compiler so */
}

/* ---- Alibaba ---- */

#define ALI_HEADER                                                                                 \
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"            \
    "deletion_time,scheduled_time\n"

static void test_alibaba_pods(void **state)
{
    (void)state;
    JobList l;
    load_ok("openb_pod_list_x.csv",
            ALI_HEADER "cpu,12000,16384,0,0,,LS,Running,0,100,0\n"
                       "zero-milli,4000,1024,1,0,,LS,Running,5,10,5\n"
                       "share,6000,12288,1,460,,LS,Running,427061,12902960,427061\n"
                       "one,8000,30720,1,1000,,BE,Succeeded,100,350,100\n"
                       "eight,64000,262144,8,1000,,LS,Running,200,,200\n"
                       "typed,4000,8192,1,1000,V100M16|V100M32,LS,Running,300,300,300\n"
                       "typed2,4000,8192,1,500,|T4||,LS,Running,400,100,400\n"
                       "over,1000,1024,1,1500,,LS,Running,,,\n"
                       "neg,1000,0,1,-5,nan,LS,Running,nan,nan,nan\n",
            TRACE_ALIBABA2023, &l);
    assert_int_equal(l.n, 9);
    const JobSpec *j = job(&l, "cpu");
    assert_int_equal(j->req, REQ_NONE);
    assert_int_equal(j->cpu_milli, 12000);
    assert_int_equal(j->memory_mib, 16384);
    assert_int_equal(j->kind, KIND_BATCH);
    assert_int_equal(j->workers, 1);
    assert_int_equal(j->n_gpu_models, 0);
    assert_int_equal(j->submit_ms, 0);
    assert_int_equal(j->duration_ms, 100000);

    assert_int_equal(job(&l, "zero-milli")->req, REQ_NONE);

    j = job(&l, "share");
    assert_int_equal(j->req, REQ_FRACTION);
    assert_int_equal(j->fraction_milli, 460);
    assert_int_equal(j->submit_ms, 427061000);
    assert_int_equal(j->duration_ms, (12902960 - 427061) * 1000LL);

    j = job(&l, "one");
    assert_int_equal(j->req, REQ_GPUS);
    assert_int_equal(j->gpus, 1);
    assert_int_equal(j->submit_ms, 100000);
    assert_int_equal(j->duration_ms, 250000);

    j = job(&l, "eight");
    assert_int_equal(j->req, REQ_GPUS);
    assert_int_equal(j->gpus, 8);
    assert_int_equal(j->workers, 1);
    assert_int_equal(j->submit_ms, 200000);
    assert_int_equal(j->duration_ms, NO_DURATION); /* no deletion time */

    j = job(&l, "typed");
    assert_int_equal(j->n_gpu_models, 2);
    assert_string_equal(j->gpu_models[0], "V100M16");
    assert_string_equal(j->gpu_models[1], "V100M32");
    assert_int_equal(j->duration_ms, NO_DURATION); /* deleted when created */

    j = job(&l, "typed2");
    assert_int_equal(j->n_gpu_models, 1); /* empty tokens dropped */
    assert_string_equal(j->gpu_models[0], "T4");
    assert_int_equal(j->req, REQ_FRACTION);
    assert_int_equal(j->duration_ms, NO_DURATION); /* deleted before created */

    j = job(&l, "over"); /* gpu_milli clamped to 1000: a whole GPU */
    assert_int_equal(j->req, REQ_GPUS);
    assert_int_equal(j->gpus, 1);
    assert_int_equal(j->submit_ms, 0);
    assert_int_equal(j->duration_ms, NO_DURATION);

    j = job(&l, "neg"); /* clamped to 0: no GPU; "nan" cells are empty */
    assert_int_equal(j->req, REQ_NONE);
    assert_int_equal(j->memory_mib, 0);
    assert_int_equal(j->n_gpu_models, 0);
    job_list_free(&l);
}

/* The multigpu and gpushare files have only the first five columns: no types, no
 * times. Columns may come in any order. */
static void test_alibaba_short_header(void **state)
{
    (void)state;
    JobList l;
    load_ok("openb_pod_list_multigpu20.csv",
            "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n"
            "openb-pod-0000,12000,16384,1,1000\n"
            "openb-pod-0001,6000,12288,1,460\n"
            "openb-pod-0002,32000,65536,4,1000\n",
            TRACE_AUTO, &l);
    assert_int_equal(l.n, 3);
    for (size_t i = 0; i < l.n; i++) {
        assert_int_equal(l.jobs[i].submit_ms, 0);
        assert_int_equal(l.jobs[i].duration_ms, NO_DURATION);
        assert_int_equal(l.jobs[i].n_gpu_models, 0);
    }
    assert_int_equal(job(&l, "openb-pod-0001")->req, REQ_FRACTION);
    assert_int_equal(job(&l, "openb-pod-0002")->gpus, 4);
    job_list_free(&l);

    load_ok("reordered.csv",
            "gpu_milli,num_gpu,name,memory_mib,cpu_milli\n"
            "250,1,p,2048,3000\n",
            TRACE_AUTO, &l);
    assert_int_equal(l.n, 1);
    assert_string_equal(l.jobs[0].name, "p");
    assert_int_equal(l.jobs[0].req, REQ_FRACTION);
    assert_int_equal(l.jobs[0].fraction_milli, 250);
    assert_int_equal(l.jobs[0].cpu_milli, 3000);
    assert_int_equal(l.jobs[0].memory_mib, 2048);
    job_list_free(&l);
}

/* The stored trace reads whole: 8,152 pods, 1,088 of them CPU-only (PROTOCOL.md 5). */
static void test_alibaba_real_file(void **state)
{
    (void)state;
    const char *shared = getenv("GPUORCH_SHARED");
    char path[1024];
    snprintf(path, sizeof(path), "%s/traces/alibaba-gpu-2023/openb_pod_list_default.csv",
             shared && *shared ? shared : "../shared");
    FILE *f = fopen(path, "r");
    if (!f) {
        print_message("skipped: no %s\n", path);
        skip();
    }
    fclose(f);
    JobList l = {0};
    Buf err = {0};
    int r = trace_load(path, TRACE_AUTO, &l, &err);
    if (r)
        print_message("%s\n", buf_str(&err));
    assert_int_equal(r, 0);
    assert_int_equal(l.n, 8152);
    size_t cpu_only = 0, eight = 0;
    for (size_t i = 0; i < l.n; i++) {
        cpu_only += l.jobs[i].req == REQ_NONE;
        eight += l.jobs[i].req == REQ_GPUS && l.jobs[i].gpus == 8;
    }
    assert_int_equal(cpu_only, 1088);
    assert_int_equal(eight, 44);
    job_list_free(&l);
    buf_free(&err);
}

static void test_alibaba_errors(void **state)
{
    (void)state;
    const char *h = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,creation_time\n";
    char text[1024];
    /* line 3: a column missing */
    snprintf(text, sizeof(text), "%sa,1,1,1,1000,0\nb,1,1,1,1000\n", h);
    load_bad(text, TRACE_AUTO, 3, "*", "wrong number of columns");
    snprintf(text, sizeof(text), "%sa,1,1,1,1000,0,7\n", h);
    load_bad(text, TRACE_AUTO, 2, "*", "wrong number of columns");
    snprintf(text, sizeof(text), "%sa,1,1,1,1000,0\nb,x1,1,1,1000,0\n", h);
    load_bad(text, TRACE_AUTO, 3, "cpu_milli", "non-negative whole number");
    snprintf(text, sizeof(text), "%sa,1,-5,1,1000,0\n", h);
    load_bad(text, TRACE_AUTO, 2, "memory_mib", "non-negative whole number");
    snprintf(text, sizeof(text), "%sa,1,1,1.5,1000,0\n", h);
    load_bad(text, TRACE_AUTO, 2, "num_gpu", NULL);
    snprintf(text, sizeof(text), "%sa,1,1,17,1000,0\n", h);
    load_bad(text, TRACE_AUTO, 2, "num_gpu", "more GPUs than a node holds");
    snprintf(text, sizeof(text), "%sa,1,1,1,half,0\n", h);
    load_bad(text, TRACE_AUTO, 2, "gpu_milli", "whole number");
    snprintf(text, sizeof(text), "%sa,1,1,2,500,0\n", h);
    load_bad(text, TRACE_AUTO, 2, "gpu_milli", "needs num_gpu = 1");
    snprintf(text, sizeof(text), "%sa,1,1,1,1000,yesterday\n", h);
    load_bad(text, TRACE_AUTO, 2, "creation_time", NULL);
    load_bad("name,cpu_milli,memory_mib,num_gpu,gpu_milli,deletion_time\na,1,1,1,1000,-3\n",
             TRACE_AUTO, 2, "deletion_time", NULL);
    snprintf(text, sizeof(text), "%sa,5000000000,1,1,1000,0\n", h);
    load_bad(text, TRACE_AUTO, 2, "cpu_milli", "too large");
    /* blank lines count: the bad row is on line 5 */
    snprintf(text, sizeof(text), "%sa,1,1,1,1000,0\n\n   \nb,1,1,1,1000,?\n", h);
    load_bad(text, TRACE_AUTO, 5, "creation_time", NULL);
    /* a quoted name over two lines (2-3): the next row starts on line 4 */
    snprintf(text, sizeof(text), "%s\"a\nb\",1,1,1,1000,0\nc,1,1,zero,1000,0\n", h);
    load_bad(text, TRACE_AUTO, 4, "num_gpu", NULL);
    /* CRLF line ends */
    load_bad("name,cpu_milli,memory_mib,num_gpu,gpu_milli\r\na,1,1,1,1000\r\nb,1,1,1,x\r\n",
             TRACE_AUTO, 3, "gpu_milli", NULL);
    /* an unterminated quote: the row that opens it */
    snprintf(text, sizeof(text), "%sa,1,1,1,1000,0\n\"b,1,1,1,1000,0\n", h);
    load_bad(text, TRACE_AUTO, 3, NULL, "unterminated");
    /* a header without the needed columns, read as Alibaba on request */
    load_bad("name,cpu_milli,num_gpu\na,1,1\n", TRACE_ALIBABA2023, 1, NULL, "gpu_milli");
    /* an empty file */
    char path[512];
    Buf err = {0};
    JobList l = {0};
    assert_int_equal(
        trace_load(write_file("empty.csv", "", path, sizeof(path)), TRACE_ALIBABA2023, &l, &err),
        -EINVAL);
    assert_non_null(strstr(buf_str(&err), path));
    assert_non_null(strstr(buf_str(&err), "empty"));
    assert_int_equal(l.n, 0);
    buf_free(&err);
}

/* A memory_mib too large for the node counters is the memory column's fault. */
static void test_alibaba_memory_too_large_names_memory(void **state)
{
    (void)state;
    load_bad("name,cpu_milli,memory_mib,num_gpu,gpu_milli\na,1000,5000000000,1,1000\n", TRACE_AUTO,
             2, "memory_mib", "too large");
}

/* ---- Philly ---- */

#define PHILLY_HEADER "timestamp,duration,num_gpus,gpu_time,cluster\n"

/* Times are relative to the earliest submission, which need not be the first row
 * (the real file is not sorted). 06:13:03 is the earliest; 07:01:55 is 48 min 52 s =
 * 2,932 s later; a day, a month end and a leap day check the calendar. */
static void test_philly(void **state)
{
    (void)state;
    JobList l;
    load_ok("philly.csv",
            PHILLY_HEADER "2017-10-09 07:01:55,66.0,1,66.0,11cb48\n"
                          "2017-10-09 06:13:03,2951.5,8,23612.0,6214e9\n"
                          "2017-10-10 06:13:03,10,16,160,6214e9\n"
                          "2017-10-31 23:59:59,0.001,24,0.024,103959\n"
                          "2017-11-01 00:00:01,1,12,12,103959\n"
                          "2017-11-01 00:00:01,1,9,9,103959\n"
                          "2017-11-01 00:00:01,1,13,13,103959\n",
            TRACE_AUTO, &l);
    assert_int_equal(l.n, 7);
    const struct {
        const char *name;
        int64_t submit_ms, duration_ms;
        uint32_t workers;
        uint16_t gpus;
        const char *team;
    } want[] = {
        {"philly-1", 2932000, 66000, 1, 1, "11cb48"},
        {"philly-2", 0, 2951500, 1, 8, "6214e9"},
        {"philly-3", 86400000, 10000, 2, 8, "6214e9"},
        {"philly-4", (22LL * 86400 + 17 * 3600 + 46 * 60 + 56) * 1000, 1, 3, 8, "103959"},
        {"philly-5", (22LL * 86400 + 17 * 3600 + 46 * 60 + 58) * 1000, 1000, 2, 6, "103959"},
        {"philly-6", (22LL * 86400 + 17 * 3600 + 46 * 60 + 58) * 1000, 1000, 3, 3, "103959"},
        {"philly-7", (22LL * 86400 + 17 * 3600 + 46 * 60 + 58) * 1000, 1000, 13, 1, "103959"},
    };
    for (size_t i = 0; i < 7; i++) {
        const JobSpec *j = job(&l, want[i].name);
        assert_int_equal(j->submit_ms, want[i].submit_ms);
        assert_int_equal(j->duration_ms, want[i].duration_ms);
        assert_int_equal(j->req, REQ_GPUS);
        assert_int_equal(j->workers, want[i].workers);
        assert_int_equal(j->gpus, want[i].gpus);
        assert_int_equal(j->kind, KIND_TRAINING);
        assert_string_equal(j->team, want[i].team);
    }
    job_list_free(&l);

    load_ok("leap.csv",
            "timestamp,duration,num_gpus\n"
            "2016-02-28 00:00:00,1,1\n"
            "2016-03-01 00:00:00,1,1\n"
            "2017-02-28 00:00:00,1,1\n"
            "2017-03-01 00:00:00,1,1\n",
            TRACE_PHILLY, &l);
    assert_int_equal(l.jobs[1].submit_ms, 2 * 86400000LL);
    assert_int_equal(l.jobs[3].submit_ms - l.jobs[2].submit_ms, 86400000LL);
    assert_int_equal(l.jobs[2].submit_ms, 366 * 86400000LL);
    assert_null(l.jobs[0].team); /* no cluster column */
    job_list_free(&l);
}

static void test_philly_errors(void **state)
{
    (void)state;
    load_bad(PHILLY_HEADER "2017-10-09 07:01:55,66.0,1,66.0,a\n"
                           "2017-10-09 07:01,66.0,1,66.0,a\n",
             TRACE_AUTO, 3, "timestamp", "2017-10-09 07:01:55");
    load_bad(PHILLY_HEADER "2017-13-09 07:01:55,66.0,1,66.0,a\n", TRACE_AUTO, 2, "timestamp", NULL);
    load_bad(PHILLY_HEADER "2017-10-09 07:01:55,-1,1,66.0,a\n", TRACE_AUTO, 2, "duration",
             "non-negative");
    load_bad(PHILLY_HEADER "2017-10-09 07:01:55,ten,1,66.0,a\n", TRACE_AUTO, 2, "duration", NULL);
    load_bad(PHILLY_HEADER "2017-10-09 07:01:55,1,0,66.0,a\n", TRACE_AUTO, 2, "num_gpus",
             "from 1 to 4096");
    load_bad(PHILLY_HEADER "2017-10-09 07:01:55,1,4097,66.0,a\n", TRACE_AUTO, 2, "num_gpus", NULL);
    load_bad(PHILLY_HEADER "\n2017-10-09 07:01:55,1,2,66.0\n", TRACE_AUTO, 3, "*",
             "wrong number of columns");
    load_bad("timestamp,num_gpus\n2017-10-09 07:01:55,1\n", TRACE_PHILLY, 1, NULL, "duration");
}

/* ---- formats ---- */

static void test_format_detection(void **state)
{
    (void)state;
    JobList l;
    /* an Alibaba header, whatever the case, whatever the name */
    load_ok("anything.txt", "Name,CPU_MILLI,memory_mib,NUM_GPU,gpu_milli\np,1,1,1,300\n",
            TRACE_AUTO, &l);
    assert_int_equal(l.jobs[0].req, REQ_FRACTION);
    job_list_free(&l);
    /* Philly */
    load_ok("jobs.csv", PHILLY_HEADER "2017-10-09 07:01:55,66.0,16,66.0,x\n", TRACE_AUTO, &l);
    assert_int_equal(l.jobs[0].workers, 2);
    assert_string_equal(l.jobs[0].name, "philly-1");
    job_list_free(&l);
    /* our job CSV */
    load_ok("ours.csv", "id,kind,workers,gpus,submit_s,duration_s\ntrain,training,3,2,1.5,60\n",
            TRACE_AUTO, &l);
    assert_string_equal(l.jobs[0].name, "train");
    assert_int_equal(l.jobs[0].workers, 3);
    assert_int_equal(l.jobs[0].submit_ms, 1500);
    assert_int_equal(l.jobs[0].duration_ms, 60000);
    job_list_free(&l);
    /* our YAML */
    load_ok("ours.yaml", "- name: y\n  gpus: 4\n  duration: 1h\n", TRACE_AUTO, &l);
    assert_string_equal(l.jobs[0].name, "y");
    assert_int_equal(l.jobs[0].gpus, 4);
    assert_int_equal(l.jobs[0].duration_ms, 3600000);
    job_list_free(&l);
    /* a format forced against the file: the reader's header check says so */
    load_bad("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1,1,1,300\n", TRACE_PHILLY, 1, NULL,
             "Philly");
    load_bad(PHILLY_HEADER "2017-10-09 07:01:55,66.0,16,66.0,x\n", TRACE_ALIBABA2023, 1, NULL,
             "Alibaba");
    /* a missing file */
    Buf err = {0};
    l = (JobList){0};
    assert_int_equal(trace_load("/nonexistent/trace.csv", TRACE_AUTO, &l, &err), -ENOENT);
    assert_non_null(strstr(buf_str(&err), "/nonexistent/trace.csv"));
    buf_free(&err);
}

static void test_format_names(void **state)
{
    (void)state;
    const TraceFormat all[] = {TRACE_AUTO, TRACE_ALIBABA2023, TRACE_PHILLY, TRACE_GPUORCH};
    for (size_t i = 0; i < 4; i++)
        assert_int_equal(trace_format_from_name(trace_format_name(all[i])), all[i]);
    assert_int_equal(trace_format_from_name("Alibaba2023"), TRACE_ALIBABA2023);
    assert_int_equal(trace_format_from_name("csv"), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alibaba_pods),
        cmocka_unit_test(test_alibaba_short_header),
        cmocka_unit_test(test_alibaba_real_file),
        cmocka_unit_test(test_alibaba_errors),
        cmocka_unit_test(test_alibaba_memory_too_large_names_memory),
        cmocka_unit_test(test_philly),
        cmocka_unit_test(test_philly_errors),
        cmocka_unit_test(test_format_detection),
        cmocka_unit_test(test_format_names),
    };
    return cmocka_run_group_tests(tests, setup_dir, remove_dir);
}
