/* test_job_json.c: spec_job_to_json round-trips through the job-file parser: every job
 * of the demo files, hand-built jobs of each request kind with every field set, awkward
 * strings and extreme values; the forms it writes; and the jobs it must refuse because a
 * job file could not say them. */
#include "spec/job_json.h"
#include "spec/spec.h"

#include "core/job.h"
#include "util/buf.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static void assert_str_same(const char *a, const char *b)
{
    if (!a || !b)
        assert_ptr_equal(a, b);
    else
        assert_string_equal(a, b);
}

static void assert_strv_same(char *const *a, size_t na, char *const *b, size_t nb)
{
    assert_int_equal(na, nb);
    for (size_t i = 0; i < na; i++)
        assert_string_equal(a[i], b[i]);
}

static void assert_job_equal(const JobSpec *a, const JobSpec *b)
{
    assert_str_same(a->name, b->name);
    assert_str_same(a->team, b->team);
    assert_str_same(a->project, b->project);
    assert_int_equal(a->kind, b->kind);
    assert_int_equal(a->priority, b->priority);
    assert_int_equal(a->workers, b->workers);
    assert_int_equal(a->req, b->req);
    assert_int_equal(a->gpus, b->gpus);
    assert_str_same(a->mig, b->mig);
    assert_int_equal(a->gpu_memory_mib, b->gpu_memory_mib);
    assert_int_equal(a->fraction_milli, b->fraction_milli);
    assert_strv_same(a->gpu_models, a->n_gpu_models, b->gpu_models, b->n_gpu_models);
    assert_int_equal(a->scope, b->scope);
    assert_int_equal(a->scope_required, b->scope_required);
    assert_str_same(a->fabric, b->fabric);
    assert_int_equal(a->preemptible, b->preemptible);
    assert_int_equal(a->checkpoint_interval_ms, b->checkpoint_interval_ms);
    assert_int_equal(a->checkpoint_grace_ms, b->checkpoint_grace_ms);
    assert_int_equal(a->checkpoint_cost_ms, b->checkpoint_cost_ms);
    assert_int_equal(a->tiers, b->tiers);
    assert_strv_same(a->command, a->n_command, b->command, b->n_command);
    assert_strv_same(a->env, a->n_env, b->env, b->n_env);
    assert_int_equal(a->duration_estimate_ms, b->duration_estimate_ms);
    assert_int_equal(a->max_wait_ms, b->max_wait_ms);
    assert_int_equal(a->cpu_milli, b->cpu_milli);
    assert_int_equal(a->memory_mib, b->memory_mib);
    assert_int_equal(a->submit_ms, b->submit_ms);
    assert_int_equal(a->duration_ms, b->duration_ms);
    assert_int_equal(a->busy_milli, b->busy_milli);
    assert_int_equal(a->peak_memory_mib, b->peak_memory_mib);
    assert_str_same(a->workload_class, b->workload_class);
}

/* Write j, parse the text back, compare; the JSON text is left in *ret_json. */
static void round_trip(const JobSpec *j, Buf *ret_json)
{
    Buf json = {0}, err = {0};
    assert_int_equal(spec_job_to_json(j, &json), 0);
    JobList back = {0};
    int r = spec_parse_jobs_yaml(json.data, json.len, "job.json", &back, &err);
    if (r)
        print_message("%s\n%s\n", buf_str(&json), buf_str(&err));
    assert_int_equal(r, 0);
    assert_int_equal(back.n, 1);
    assert_job_equal(j, &back.jobs[0]);
    job_list_free(&back);
    buf_free(&err);
    if (ret_json)
        *ret_json = json;
    else
        buf_free(&json);
}

static void round_trip_file(const char *rel, size_t min_jobs)
{
    char path[1024];
    const char *root = getenv("GPUORCH_SRC");
    snprintf(path, sizeof(path), "%s/%s", root && *root ? root : ".", rel);
    JobList l = {0};
    Buf err = {0};
    int r = spec_load_jobs(path, &l, &err);
    if (r)
        print_message("%s\n", buf_str(&err));
    assert_int_equal(r, 0);
    assert_true(l.n >= min_jobs);
    for (size_t i = 0; i < l.n; i++)
        round_trip(&l.jobs[i], NULL);
    job_list_free(&l);
    buf_free(&err);
}

static void test_demo_files(void **state)
{
    round_trip_file("examples/jobs-demo.yaml", 12);
    round_trip_file("examples/jobs-demo.csv", 8);
}

static char **strv(size_t n, ...)
{
    char **v = calloc(n, sizeof(*v));
    assert_non_null(v);
    va_list ap;
    va_start(ap, n);
    for (size_t i = 0; i < n; i++)
        assert_non_null(v[i] = strdup(va_arg(ap, const char *)));
    va_end(ap);
    return v;
}

static void strv_free(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

/* Every optional field set, with values that need each written form. */
static void full_job(JobSpec *j, const char *name)
{
    job_spec_init(j);
    j->name = strdup(name);
    j->team = strdup("search");
    j->project = strdup("ranking");
    j->kind = KIND_TRAINING;
    j->priority = PRIO_LOW;
    j->workers = 4;
    j->gpu_models = strv(2, "H100-80GB-SXM5", "A100-80GB");
    j->n_gpu_models = 2;
    j->scope = SCOPE_LEAF;
    j->scope_required = true;
    j->fabric = strdup("infiniband-ndr");
    j->preemptible = true;
    j->checkpoint_interval_ms = 90 * 60000;
    j->checkpoint_grace_ms = 1500;
    j->checkpoint_cost_ms = 45000;
    j->tiers = (1u << TIER_SPOT) | (1u << TIER_OWNED);
    j->command = strv(4, "torchrun", "--nproc", "8", "train.py");
    j->n_command = 4;
    j->env = strv(2, "MODEL=llama-3-8b", "MAX_BATCH=32");
    j->n_env = 2;
    j->duration_estimate_ms = 2 * 3600000 + 1;
    j->max_wait_ms = 15 * 60000;
    j->cpu_milli = 8500;
    j->memory_mib = 65536;
    j->submit_ms = 86400000;
    j->duration_ms = 0;
    j->busy_milli = 0;
    j->peak_memory_mib = 70000;
    j->workload_class = strdup("search/llama");
}

static void test_each_request_kind(void **state)
{
    JobSpec j;
    Buf json = {0};

    full_job(&j, "none");
    j.req = REQ_NONE;
    j.gpus = 0;
    round_trip(&j, &json);
    assert_non_null(strstr(json.data, "\"gpus\": 0"));
    job_spec_free(&j);
    buf_free(&json);

    full_job(&j, "whole");
    j.gpus = 16;
    round_trip(&j, &json);
    assert_non_null(strstr(json.data, "\"gpus\": 16"));
    assert_non_null(
        strstr(json.data, "\"topology\": {\"scope\": \"leaf\", \"mode\": \"required\"}"));
    assert_non_null(strstr(json.data, "\"capacity\": [\"owned\", \"spot\"]"));
    assert_non_null(strstr(json.data, "\"interval\": \"1h30m\""));
    assert_non_null(strstr(json.data, "\"grace\": \"1500ms\""));
    assert_non_null(strstr(json.data, "\"cpus\": 8.5"));
    assert_non_null(strstr(json.data, "\"memory\": \"64GiB\""));
    assert_non_null(strstr(json.data, "\"busy\": 0,"));
    job_spec_free(&j);
    buf_free(&json);

    full_job(&j, "slice");
    j.req = REQ_MIG;
    j.gpus = 0;
    j.mig = strdup("3g.40gb");
    round_trip(&j, &json);
    assert_non_null(strstr(json.data, "\"mig\": \"3g.40gb\""));
    job_spec_free(&j);
    buf_free(&json);

    full_job(&j, "memory");
    j.req = REQ_MEMORY;
    j.gpus = 0;
    j.gpu_memory_mib = 18 * 1024 + 1;
    round_trip(&j, &json);
    assert_non_null(strstr(json.data, "\"gpu_memory\": \"18433MiB\""));
    job_spec_free(&j);
    buf_free(&json);

    static const uint16_t fractions[] = {1, 250, 999, 1000};
    for (size_t i = 0; i < sizeof(fractions) / sizeof(fractions[0]); i++) {
        full_job(&j, "share");
        j.req = REQ_FRACTION;
        j.gpus = 0;
        j.fraction_milli = fractions[i];
        j.busy_milli = fractions[i];
        round_trip(&j, NULL);
        job_spec_free(&j);
    }
}

/* Defaults stay defaults: a minimal job writes no optional field. */
static void test_minimal(void **state)
{
    JobSpec j;
    job_spec_init(&j);
    j.name = strdup("tiny");
    Buf json = {0};
    round_trip(&j, &json);
    assert_string_equal(json.data, "{\"name\": \"tiny\", \"kind\": \"batch\", \"priority\": "
                                   "\"normal\", \"workers\": 1, \"gpus\": 1, \"preemptible\": "
                                   "false}");
    buf_free(&json);
    job_spec_free(&j);
}

/* Strings that need escaping, a shell command, extreme numbers. */
static void test_awkward_values(void **state)
{
    JobSpec j;
    full_job(&j, "w\"e\\ird/ü");
    free(j.team);
    j.team = strdup(" padded team ");
    free(j.project);
    j.project = strdup("null");
    strv_free(j.env, j.n_env);
    j.env = strv(5, "QUOTE=say \"hi\"\tnow", "EMPTY=", "NL=a\nb\\c", "EQ=a=b", "NUM=007");
    j.n_env = 5;
    strv_free(j.command, j.n_command);
    j.command = strv(3, "/bin/sh", "-c", "  echo \"$HOME\" | tr a b  ");
    j.n_command = 3;
    j.workers = 100000;
    j.duration_estimate_ms = INT64_C(1) << 52;
    j.submit_ms = 1;
    j.duration_ms = 59999;
    j.cpu_milli = 1000000000;
    j.memory_mib = UINT32_MAX;
    j.peak_memory_mib = (uint64_t)UINT32_MAX * 1024;
    Buf json = {0};
    round_trip(&j, &json);
    assert_non_null(strstr(json.data, "\"peak_memory\": \"4294967295GiB\""));
    assert_non_null(strstr(json.data, "\"memory\": \"4294967295MiB\""));
    buf_free(&json);
    j.peak_memory_mib = 3 * 1024 * 1024;
    round_trip(&j, &json);
    assert_non_null(strstr(json.data, "\"peak_memory\": \"3TiB\""));
    assert_non_null(strstr(json.data, "\"command\": \"  echo"));
    buf_free(&json);

    /* an argv that only looks like the shell form in part stays a list */
    strv_free(j.command, j.n_command);
    j.command = strv(2, "/bin/sh", "-c");
    j.n_command = 2;
    round_trip(&j, &json);
    assert_non_null(strstr(json.data, "\"command\": [\"/bin/sh\", \"-c\"]"));
    buf_free(&json);
    job_spec_free(&j);
}

/* What a job file cannot say is refused, and out keeps what it held. */
static void test_refused(void **state)
{
    enum {
        BAD_NAME,
        NO_NAME,
        EMPTY_TEAM,
        ZERO_GPUS,
        UNKNOWN_MIG,
        NO_MEMORY,
        FRACTION,
        WORKERS,
        NEG_TIME,
        LONG_TIME,
        BUSY,
        TIERS,
        ENV_NO_EQ,
        ENV_NAME,
        MODEL_PADDED,
        COMMAND_BLANK,
        CPUS,
        PEAK_MEMORY,
        BAD_COUNT
    };
    for (int c = 0; c < BAD_COUNT; c++) {
        JobSpec j;
        full_job(&j, "ok");
        switch (c) {
        case BAD_NAME:
            free(j.name);
            j.name = strdup("two words");
            break;
        case NO_NAME:
            free(j.name);
            j.name = NULL;
            break;
        case EMPTY_TEAM:
            free(j.team);
            j.team = strdup("  ");
            break;
        case ZERO_GPUS:
            j.gpus = 0;
            break;
        case UNKNOWN_MIG:
            j.req = REQ_MIG;
            j.mig = strdup("9g.999gb");
            break;
        case NO_MEMORY:
            j.req = REQ_MEMORY;
            j.gpu_memory_mib = 0;
            break;
        case FRACTION:
            j.req = REQ_FRACTION;
            j.fraction_milli = 1001;
            break;
        case WORKERS:
            j.workers = 0;
            break;
        case NEG_TIME:
            j.checkpoint_cost_ms = -5;
            break;
        case LONG_TIME:
            j.duration_ms = (INT64_C(1) << 52) + 1;
            break;
        case BUSY:
            j.busy_milli = 1001;
            break;
        case TIERS:
            j.tiers = 0x80;
            break;
        case ENV_NO_EQ:
            free(j.env[1]);
            j.env[1] = strdup("NOVALUE");
            break;
        case ENV_NAME:
            free(j.env[0]);
            j.env[0] = strdup("1BAD=x");
            break;
        case MODEL_PADDED:
            free(j.gpu_models[1]);
            j.gpu_models[1] = strdup("A100-80GB ");
            break;
        case COMMAND_BLANK:
            free(j.command[2]);
            j.command[2] = strdup("");
            break;
        case CPUS:
            j.cpu_milli = 1000000001;
            break;
        case PEAK_MEMORY: /* too big for MiB, not whole GiB */
            j.peak_memory_mib = (uint64_t)UINT32_MAX * 1024 - 1;
            break;
        }
        Buf out = {0};
        buf_puts(&out, "kept");
        if (spec_job_to_json(&j, &out) != -EINVAL)
            fail_msg("case %d: not refused: %s", c, buf_str(&out));
        assert_string_equal(buf_str(&out), "kept");
        buf_free(&out);
        job_spec_free(&j);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_demo_files), cmocka_unit_test(test_each_request_kind),
        cmocka_unit_test(test_minimal),    cmocka_unit_test(test_awkward_values),
        cmocka_unit_test(test_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
