/* test_spec_jobs.c: the job file readers (YAML, JSON, CSV): every kind of GPU request,
 * the defaults, topology, capacity and env; and mistakes reported with their file, line
 * and field, with nothing leaked. */
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

static const char *src_path(const char *rel, char *out, size_t outlen)
{
    const char *root = getenv("GPUORCH_SRC");
    snprintf(out, outlen, "%s/%s", root && *root ? root : ".", rel);
    return out;
}

static const JobSpec *job(const JobList *l, const char *name)
{
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->jobs[i].name, name) == 0)
            return &l->jobs[i];
    fail_msg("no job %s", name);
    abort(); /* not reached: fail_msg leaves the test; this tells the compiler so */
}

static void load_ok(const char *rel, JobList *l)
{
    char path[1024];
    Buf err = {0};
    int r = spec_load_jobs(src_path(rel, path, sizeof(path)), l, &err);
    if (r)
        print_message("%s\n", buf_str(&err));
    assert_int_equal(r, 0);
    assert_int_equal(err.len, 0);
    buf_free(&err);
}

static void yaml_ok(const char *yaml, JobList *l)
{
    Buf err = {0};
    int r = spec_parse_jobs_yaml(yaml, strlen(yaml), "j.yaml", l, &err);
    if (r)
        print_message("%s\n", buf_str(&err));
    assert_int_equal(r, 0);
    buf_free(&err);
}

static void csv_ok(const char *csv, JobList *l)
{
    Buf err = {0};
    int r = spec_parse_jobs_csv(csv, strlen(csv), "j.csv", l, &err);
    if (r)
        print_message("%s\n", buf_str(&err));
    assert_int_equal(r, 0);
    buf_free(&err);
}

/* Fails with -EINVAL, the list untouched, the message holding every needle. */
static void check_bad(bool csv, const char *text, va_list ap)
{
    Buf err = {0};
    JobList l = {0};
    int r = csv ? spec_parse_jobs_csv(text, strlen(text), "j.csv", &l, &err)
                : spec_parse_jobs_yaml(text, strlen(text), "j.yaml", &l, &err);
    bool all = true;
    for (const char *n; (n = va_arg(ap, const char *));)
        if (!strstr(buf_str(&err), n)) {
            print_message("missing '%s'\n", n);
            all = false;
        }
    if (r != -EINVAL || !all)
        print_message("input:\n%s\nerror:\n%s\n", text, buf_str(&err));
    assert_int_equal(r, -EINVAL);
    assert_int_equal(l.n, 0);
    assert_null(l.jobs);
    assert_true(all);
    buf_free(&err);
}

static void yaml_bad(const char *yaml, ...)
{
    va_list ap;
    va_start(ap, yaml);
    check_bad(false, yaml, ap);
    va_end(ap);
}

static void csv_bad(const char *csv, ...)
{
    va_list ap;
    va_start(ap, csv);
    check_bad(true, csv, ap);
    va_end(ap);
}

static bool has_env(const JobSpec *j, const char *kv)
{
    for (size_t i = 0; i < j->n_env; i++)
        if (strcmp(j->env[i], kv) == 0)
            return true;
    return false;
}

static void test_demo_yaml(void **state)
{
    JobList l = {0};
    load_ok("examples/jobs-demo.yaml", &l);
    assert_int_equal(l.n, 12);
    assert_string_equal(l.jobs[0].name, "llama-serve"); /* file order */

    const JobSpec *j = job(&l, "llama-serve");
    assert_string_equal(j->team, "search");
    assert_string_equal(j->project, "ranking");
    assert_int_equal(j->kind, KIND_INFERENCE);
    assert_int_equal(j->priority, PRIO_PRODUCTION);
    assert_int_equal(j->workers, 2);
    assert_int_equal(j->req, REQ_MEMORY);
    assert_int_equal(j->gpu_memory_mib, 18 * 1024);
    assert_int_equal(j->tiers, (1u << TIER_RESERVED) | (1u << TIER_OWNED));
    assert_int_equal(j->n_command, 4);
    assert_string_equal(j->command[0], "python3");
    assert_string_equal(j->command[3], "llama-3-8b");
    assert_int_equal(j->n_env, 2);
    assert_true(has_env(j, "MODEL=llama-3-8b"));
    assert_true(has_env(j, "MAX_BATCH=32"));
    assert_int_equal(j->cpu_milli, 8000);
    assert_int_equal(j->memory_mib, 64 * 1024);

    j = job(&l, "ranker-mig");
    assert_int_equal(j->req, REQ_MIG);
    assert_string_equal(j->mig, "1g.10gb");
    assert_int_equal(j->n_gpu_models, 1);
    assert_string_equal(j->gpu_models[0], "A100-80GB");
    assert_string_equal(j->command[2], "8080");

    j = job(&l, "embed-small");
    assert_int_equal(j->req, REQ_FRACTION);
    assert_int_equal(j->fraction_milli, 250);
    assert_int_equal(j->n_gpu_models, 1); /* a single string is a one-item list */
    assert_string_equal(j->gpu_models[0], "L4");
    assert_int_equal(j->busy_milli, 400);

    j = job(&l, "notebook-alice");
    assert_int_equal(j->req, REQ_GPUS);
    assert_int_equal(j->gpus, 1);
    assert_int_equal(j->kind, KIND_INTERACTIVE);
    assert_int_equal(j->duration_estimate_ms, 4 * 3600 * 1000);

    j = job(&l, "vision-train");
    assert_int_equal(j->scope, SCOPE_LEAF);
    assert_true(j->scope_required);
    assert_string_equal(j->fabric, "infiniband-ndr");
    assert_true(j->preemptible);
    assert_int_equal(j->checkpoint_interval_ms, 20 * 60000);
    assert_int_equal(j->checkpoint_grace_ms, 2 * 60000);
    assert_int_equal(j->checkpoint_cost_ms, 30000);
    assert_int_equal(j->n_command, 3); /* one string runs through the shell */
    assert_string_equal(j->command[0], "/bin/sh");
    assert_string_equal(j->command[1], "-c");
    assert_string_equal(j->command[2], "torchrun train.py --config vit-l.yaml");

    j = job(&l, "llm-sft");
    assert_int_equal(j->scope, SCOPE_NODE);
    assert_int_equal(j->memory_mib, 1024 * 1024);

    j = job(&l, "llm-pretrain-70b");
    assert_int_equal(j->workers, 2);
    assert_int_equal(j->gpus, 8);
    assert_int_equal(j->checkpoint_cost_ms, 3 * 60000);

    j = job(&l, "data-prep");
    assert_int_equal(j->req, REQ_NONE);
    assert_int_equal(j->gpus, 0);
    assert_int_equal(j->cpu_milli, 16000);

    j = job(&l, "ci-smoke");
    assert_int_equal(j->priority, PRIO_LOW);
    assert_int_equal(j->fraction_milli, 100);

    j = job(&l, "eval-sweep");
    assert_int_equal(j->tiers, (1u << TIER_SPOT) | (1u << TIER_ON_DEMAND));
    job_list_free(&l);
    assert_int_equal(l.n, 0);
}

static void test_defaults(void **state)
{
    JobList l = {0};
    yaml_ok("name: x\n", &l);
    assert_int_equal(l.n, 1);
    const JobSpec *j = &l.jobs[0];
    assert_string_equal(j->name, "x");
    assert_null(j->team);
    assert_null(j->project);
    assert_int_equal(j->kind, KIND_BATCH);
    assert_int_equal(j->priority, PRIO_NORMAL);
    assert_int_equal(j->workers, 1);
    assert_int_equal(j->req, REQ_GPUS);
    assert_int_equal(j->gpus, 1);
    assert_int_equal(j->scope, SCOPE_ANY);
    assert_false(j->scope_required);
    assert_int_equal(j->tiers, 0);
    assert_false(j->preemptible);
    assert_null(j->fabric);
    assert_int_equal(j->n_gpu_models, 0);
    assert_int_equal(j->n_command, 0);
    assert_int_equal(j->duration_estimate_ms, NO_DURATION);
    assert_int_equal(j->duration_ms, NO_DURATION);
    assert_int_equal(j->busy_milli, BUSY_ALL);
    assert_int_equal(j->cpu_milli, 0);
    assert_int_equal(j->memory_mib, 0);
    job_list_free(&l);

    /* id instead of name, null values count as not given, topology mode alone */
    yaml_ok("id: y\nfabric: null\nteam: ~\ngpus:\ntopology: {mode: required}\n"
            "submit: 90\nduration: 1h30m\npeak_memory: 14GiB\nclass: c1\n",
            &l);
    j = &l.jobs[0];
    assert_string_equal(j->name, "y");
    assert_null(j->fabric);
    assert_null(j->team);
    assert_int_equal(j->req, REQ_GPUS);
    assert_int_equal(j->gpus, 1);
    assert_int_equal(j->scope, SCOPE_ANY);
    assert_true(j->scope_required);
    assert_int_equal(j->submit_ms, 90000);
    assert_int_equal(j->duration_ms, 90 * 60000);
    assert_int_equal(j->peak_memory_mib, 14 * 1024);
    assert_string_equal(j->workload_class, "c1");
    job_list_free(&l);
}

static void test_json_and_documents(void **state)
{
    JobList l = {0};
    yaml_ok("[\n"
            "\t{\"id\": \"a\", \"gpus\": 4, \"workers\": 2, \"capacity\": \"spot\",\n"
            "\t \"env\": {\"DEBUG\": true, \"N\": 3, \"EMPTY\": null}},\n"
            "\t{\"name\": \"b\", \"gpu_fraction\": 0.5, \"preemptible\": false,\n"
            "\t \"topology\": {\"scope\": \"spine\"}}\n"
            "]\n",
            &l);
    assert_int_equal(l.n, 2);
    const JobSpec *a = job(&l, "a");
    assert_int_equal(a->gpus, 4);
    assert_int_equal(a->workers, 2);
    assert_int_equal(a->tiers, 1u << TIER_SPOT);
    assert_true(has_env(a, "DEBUG=true"));
    assert_true(has_env(a, "N=3"));
    assert_true(has_env(a, "EMPTY="));
    const JobSpec *b = job(&l, "b");
    assert_int_equal(b->req, REQ_FRACTION);
    assert_int_equal(b->fraction_milli, 500);
    assert_int_equal(b->scope, SCOPE_SPINE);
    assert_false(b->scope_required);
    job_list_free(&l);

    /* several YAML documents add up; a document may hold one job or a list */
    yaml_ok("name: one\n---\n- name: two\n- name: three\n---\n", &l);
    assert_int_equal(l.n, 3);
    assert_string_equal(l.jobs[2].name, "three");
    job_list_free(&l);

    /* anchors and merge keys */
    yaml_ok("- &base {name: p, team: t, kind: training, gpus: 8}\n"
            "- {<<: *base, name: q}\n",
            &l);
    assert_int_equal(l.n, 2);
    assert_string_equal(job(&l, "q")->team, "t");
    assert_int_equal(job(&l, "q")->gpus, 8);
    job_list_free(&l);
}

static void test_demo_csv(void **state)
{
    JobList l = {0};
    load_ok("examples/jobs-demo.csv", &l);
    assert_int_equal(l.n, 8);
    const JobSpec *j = job(&l, "serve-a");
    assert_int_equal(j->req, REQ_MEMORY);
    assert_int_equal(j->gpu_memory_mib, 18432);
    assert_int_equal(j->tiers, (1u << TIER_RESERVED) | (1u << TIER_OWNED));
    assert_int_equal(j->duration_ms, 7200000);
    assert_int_equal(j->busy_milli, 350);
    assert_int_equal(j->peak_memory_mib, 15360);
    assert_string_equal(j->workload_class, "llama-8b-serve");
    j = job(&l, "serve-b");
    assert_int_equal(j->req, REQ_MIG);
    assert_string_equal(j->mig, "1g.10gb");
    j = job(&l, "share-a");
    assert_int_equal(j->submit_ms, 45500);
    assert_int_equal(j->fraction_milli, 250);
    j = job(&l, "train-a");
    assert_int_equal(j->workers, 2);
    assert_int_equal(j->gpus, 4);
    assert_int_equal(j->n_gpu_models, 2);
    assert_string_equal(j->gpu_models[1], "H100-80GB-SXM5");
    assert_int_equal(j->scope, SCOPE_LEAF);
    assert_true(j->scope_required);
    assert_true(j->preemptible);
    assert_int_equal(j->checkpoint_interval_ms, 1800000);
    assert_int_equal(j->checkpoint_cost_ms, 45000);
    j = job(&l, "train-b");
    assert_true(j->scope_required);
    assert_false(j->preemptible);
    j = job(&l, "cpu-prep");
    assert_int_equal(j->req, REQ_NONE);
    j = job(&l, "sweep-1");
    assert_int_equal(j->submit_ms, 900250);
    assert_int_equal(j->busy_milli, 1000);
    assert_int_equal(j->priority, PRIO_LOW);
    job_list_free(&l);
}

static void test_csv_order_and_lists(void **state)
{
    JobList l = {0};
    csv_ok("tiers , gpu_model,ID,gpus,submit_s,cpu_milli,memory_mib,duration_estimate_s,fabric,"
           "checkpoint_grace_s\n"
           "spot|on-demand,A100-80GB|L4 | H100,j1,2,1.5,4000,8192,3600,roce-v2,90\n"
           "\"reserved\",,\"j,2\",,,,,,,\n",
           &l);
    assert_int_equal(l.n, 2);
    const JobSpec *j = &l.jobs[0];
    assert_string_equal(j->name, "j1");
    assert_int_equal(j->tiers, (1u << TIER_SPOT) | (1u << TIER_ON_DEMAND));
    assert_int_equal(j->n_gpu_models, 3);
    assert_string_equal(j->gpu_models[1], "L4");
    assert_string_equal(j->gpu_models[2], "H100");
    assert_int_equal(j->gpus, 2);
    assert_int_equal(j->submit_ms, 1500);
    assert_int_equal(j->cpu_milli, 4000);
    assert_int_equal(j->memory_mib, 8192);
    assert_int_equal(j->duration_estimate_ms, 3600000);
    assert_string_equal(j->fabric, "roce-v2");
    assert_int_equal(j->checkpoint_grace_ms, 90000);
    j = &l.jobs[1];
    assert_string_equal(j->name, "j,2");
    assert_int_equal(j->tiers, 1u << TIER_RESERVED);
    assert_int_equal(j->req, REQ_GPUS); /* empty cells take the defaults */
    assert_int_equal(j->gpus, 1);
    assert_int_equal(j->submit_ms, 0);
    job_list_free(&l);
}

static void test_yaml_errors(void **state)
{
    yaml_bad("- name: a\n  gpu: 2\n", "j.yaml:2: unknown field 'gpu' in job 'a'",
             "did you mean 'gpus'", NULL);
    yaml_bad("- name: a\n  kind: traning\n",
             "j.yaml:2: field 'kind': must be inference, training, batch or interactive",
             "not 'traning'", NULL);
    yaml_bad("- name: a\n  priority: urgent\n", "j.yaml:2: field 'priority'", NULL);
    yaml_bad("- name: a\n  gpus: 2\n  mig: 1g.10gb\n",
             "j.yaml:3: field 'mig': the job already asks for 'gpus' on line 2", NULL);
    yaml_bad("- name: a\n  gpu_fraction: 0.5\n\n  gpu_memory: 4GiB\n",
             "j.yaml:4: field 'gpu_memory': the job already asks for 'gpu_fraction' on line 2",
             NULL);
    yaml_bad("- name: a\n  workers: -1\n",
             "j.yaml:2: field 'workers': must be a whole number from 1", "not '-1'", NULL);
    yaml_bad("- name: a\n  workers: 0\n", "j.yaml:2: field 'workers'", NULL);
    yaml_bad("- name: a\n  gpus: 17\n",
             "j.yaml:2: field 'gpus': must be a whole number from 0 to 16", NULL);
    yaml_bad("- name: a\n  gpu_memory: 18GX\n", "j.yaml:2: field 'gpu_memory': must be a size",
             NULL);
    yaml_bad("- name: a\n  gpu_memory: 0\n", "j.yaml:2: field 'gpu_memory'", NULL);
    yaml_bad("- name: a\n  memory: lots\n", "j.yaml:2: field 'memory': must be a size", NULL);
    yaml_bad("- name: a\n  checkpoint:\n    interval: 30x\n",
             "j.yaml:3: field 'interval': must be a duration", NULL);
    yaml_bad("- name: a\n  checkpoint: {every: 30m}\n",
             "j.yaml:2: unknown field 'every' in checkpoint of job 'a'", NULL);
    yaml_bad("- name: a\n  duration_estimate: soon\n", "j.yaml:2: field 'duration_estimate'", NULL);
    yaml_bad("- name: a\n  gpu_fraction: 0\n", "j.yaml:2: field 'gpu_fraction'", NULL);
    yaml_bad("- name: a\n  gpu_fraction: 1.5\n", "j.yaml:2: field 'gpu_fraction'",
             "from 0.001 to 1", NULL);
    yaml_bad("- name: a\n  gpu_fraction: 0.0001\n", "j.yaml:2: field 'gpu_fraction'", NULL);
    yaml_bad("- name: a\n  busy: 2\n", "j.yaml:2: field 'busy'", NULL);
    yaml_bad("- name: a\n  mig: 1g.11gb\n", "j.yaml:2: field 'mig'", "not a MIG profile", NULL);
    yaml_bad("- name: a\n  topology: {scope: rack}\n", "j.yaml:2: field 'scope'",
             "node, leaf, spine or any", NULL);
    yaml_bad("- name: a\n  topology: {mode: strict}\n", "j.yaml:2: field 'mode'", NULL);
    yaml_bad("- name: a\n  topology: leaf\n", "j.yaml:2: field 'topology': must be a mapping",
             NULL);
    yaml_bad("- name: a\n  capacity: [reserved, cheap]\n",
             "j.yaml:2: field 'capacity': 'cheap' is not a tier", NULL);
    yaml_bad("- name: a\n  capacity: []\n", "j.yaml:2: field 'capacity'", NULL);
    yaml_bad("- name: a\n  preemptible: sometimes\n",
             "j.yaml:2: field 'preemptible': must be true or false", NULL);
    yaml_bad("- name: a\n  env: {1BAD: x}\n", "j.yaml:2: field '1BAD'", NULL);
    yaml_bad("- name: a\n  env: [A=1]\n", "j.yaml:2: field 'env': must be a mapping", NULL);
    yaml_bad("- name: a\n  env:\n    A: [1, 2]\n", "j.yaml:3: field 'A'", NULL);
    yaml_bad("- name: a\n  command: {run: x}\n", "j.yaml:2: field 'command'", "not a mapping",
             NULL);
    yaml_bad("- name: a\n  gpu_models: [H100, [A100]]\n", "j.yaml:2: field 'gpu_models'", NULL);
    /* wrong types */
    yaml_bad("- name: a\n  gpus: [1]\n", "j.yaml:2: field 'gpus'", "not a list", NULL);
    yaml_bad("- name: a\n  team: {x: 1}\n", "j.yaml:2: field 'team'", "not a mapping", NULL);
    yaml_bad("- name: [a]\n", "j.yaml:1: field 'name'", NULL);
    yaml_bad("- name: \"a b\"\n", "j.yaml:1: field 'name'", "without spaces", NULL);
    yaml_bad("- name: \"\"\n", "j.yaml:1: field 'name': must not be empty", NULL);
    /* names */
    yaml_bad("- name: a\n  id: b\n", "j.yaml:2: field 'id': give the job's name or its id", NULL);
    yaml_bad("- gpus: 1\n", "j.yaml:1: missing field 'name' in job", NULL);
    yaml_bad("- name: a\n- name: b\n-\n  name: a\n",
             "j.yaml:4: duplicate job 'a' (first on line 1)", NULL);
    /* shape and syntax */
    yaml_bad("- a\n- b\n", "j.yaml:1: a job must be a mapping", NULL);
    yaml_bad("", "j.yaml:1: empty", NULL);
    yaml_bad("- name: a\n  command: [python3, \"x\n", "j.yaml:", "invalid YAML", NULL);
    yaml_bad("- name: a\n  gpus: 1\n  gpus: 2\n", "j.yaml:3: invalid YAML: duplicate key", NULL);
    yaml_bad("- name: a\n\tgpus: 1\n", "j.yaml:2", "invalid YAML", NULL);
    /* a duplicate is reported even when the job has other mistakes */
    yaml_bad("- name: a\n- name: a\n  gpus: x\n", "j.yaml:3: field 'gpus'",
             "j.yaml:2: duplicate job 'a' (first on line 1)", NULL);
    /* every bad job of a file in one pass */
    yaml_bad("- name: a\n  gpus: x\n- name: b\n  kind: y\n- name: c\n  workers: z\n",
             "j.yaml:2: field 'gpus'", "j.yaml:4: field 'kind'", "j.yaml:6: field 'workers'", NULL);
}

static void test_csv_errors(void **state)
{
    csv_bad("id,gpus,colour\na,1,red\n", "j.csv:1: unknown column 'colour' in the job CSV header",
            NULL);
    csv_bad("name,gpus\na,1\n", "j.csv:1: unknown column 'name'", "missing column 'id'", NULL);
    csv_bad("id,gpus,GPUS\na,1,1\n", "j.csv:1: column 'gpus' appears twice", NULL);
    csv_bad("id,gpus\na,1\nb,x\n", "j.csv:3: column 'gpus': must be a whole number from 0 to 16",
            "not 'x'", NULL);
    csv_bad("id,gpus\na,1\n,2\n", "j.csv:3: column 'id': every job needs an id", NULL);
    csv_bad("id,gpus,mig\na,1,1g.10gb\n",
            "j.csv:2: column 'mig': the job already asks for 'gpus' on line 2", NULL);
    csv_bad("id,gpus\na,1\nb,1,3\n", "j.csv:3: 3 cells; the header has 2", NULL);
    csv_bad("id,gpus\na,1\nb,2\na,3\n", "j.csv:4: duplicate job 'a' (first on line 2)", NULL);
    csv_bad("id,tiers\na,reserved|spots\n", "j.csv:2: column 'tiers': 'spots' is not a tier", NULL);
    csv_bad("id,gpu_model\na,A100||L4\n", "j.csv:2: column 'gpu_model'", "empty item", NULL);
    csv_bad("id,topology_required\na,perhaps\n", "j.csv:2: column 'topology_required'", NULL);
    csv_bad("id,submit_s\na,1.2345\n", "j.csv:2: column 'submit_s'", "at most 3 decimals", NULL);
    csv_bad("id,gpu_memory_mib\na,16GiB\n", "j.csv:2: column 'gpu_memory_mib'", NULL);
    csv_bad("id,workers\na,-3\n", "j.csv:2: column 'workers'", NULL);
    csv_bad("id,gpus\n\"a,1\n", "j.csv:2: unterminated quote", NULL);
    csv_bad("", "j.csv:1: empty", NULL);
}

static void test_load_dispatch(void **state)
{
    JobList l = {0};
    Buf err = {0};
    char path[1024];
    assert_int_equal(spec_load_jobs("/nonexistent/jobs.yaml", &l, &err), -ENOENT);
    assert_string_equal(buf_str(&err), "/nonexistent/jobs.yaml: No such file or directory");
    buf_free(&err);
    assert_int_equal(
        spec_load_jobs(src_path("examples/cluster-demo.yaml", path, sizeof(path)), &l, &err),
        -EINVAL);
    assert_non_null(strstr(buf_str(&err), "cluster-demo.yaml:1: this is a cluster spec"));
    assert_int_equal(l.n, 0);
    buf_free(&err);
}

/* max_wait (issue 6): how long spot-first work waits for spot; a duration in YAML,
 * seconds in the CSV; absent: 0 (the autoscaler's default). */
static void test_max_wait(void **state)
{
    (void)state;
    JobList l = {0};
    yaml_ok("- {name: a, gpus: 8, preemptible: true, max_wait: 20m}\n- {name: b, gpus: 1}\n", &l);
    assert_int_equal(l.n, 2);
    assert_int_equal(l.jobs[0].max_wait_ms, 20 * 60 * 1000);
    assert_int_equal(l.jobs[1].max_wait_ms, 0);
    job_list_free(&l);
    csv_ok("id,gpus,max_wait_s\na,8,90.5\nb,1,\n", &l);
    assert_int_equal(l.jobs[0].max_wait_ms, 90500);
    assert_int_equal(l.jobs[1].max_wait_ms, 0);
    job_list_free(&l);
    yaml_bad("- {name: a, gpus: 1, max_wait: later}\n", "j.yaml:1: field 'max_wait'", NULL);
    csv_bad("id,max_wait_s\na,-5\n", "j.csv:2: column 'max_wait_s'", NULL);
}

static void test_job_list(void **state)
{
    JobList l = {0};
    JobSpec j;
    job_spec_init(&j);
    j.name = strdup("a");
    assert_int_equal(job_list_push(&l, &j), 0);
    assert_string_equal(l.jobs[0].name, "a");
    assert_ptr_not_equal(l.jobs[0].name, j.name);
    assert_int_equal(job_list_take(&l, &j), 0);
    assert_null(j.name);
    assert_int_equal(l.n, 2);
    job_spec_free(&j);
    job_list_free(&l);
    job_list_free(&l);
    job_list_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_demo_yaml),
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_json_and_documents),
        cmocka_unit_test(test_demo_csv),
        cmocka_unit_test(test_csv_order_and_lists),
        cmocka_unit_test(test_yaml_errors),
        cmocka_unit_test(test_csv_errors),
        cmocka_unit_test(test_load_dispatch),
        cmocka_unit_test(test_job_list),
        cmocka_unit_test(test_max_wait),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
