/* test_tracegen.c: the workload generator (src/sim/tracegen.c). The mix reader is pinned
 * field by field and mistake by mistake (each message names mix.yaml and the exact
 * line); generation is checked for what a capacity study relies on: the same seed gives
 * the same bytes and another seed other bytes, Poisson counts within a statistical
 * bound, lifetimes inside their clip, GPU memory from the model size, Philly sizes split
 * into equal gangs, estimates that are noisy within [0.5, 2] x the truth and never the
 * truth, and a CSV that spec_parse_jobs_csv reads back field for field. Training reads a
 * small Philly table written here, so the tests do not need ../shared. */
#include "sim/tracegen.h"

#include "core/job.h"
#include "spec/spec.h"
#include "util/buf.h"

#include <errno.h>
#include <math.h>
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

static char tmpdir[] = "/tmp/gpuorch-test-tracegen-XXXXXX";
static char philly_path[512];

/* A Philly table with one row per size of interest; durations in seconds. */
static const char philly_text[] = "timestamp,duration,num_gpus,gpu_time,cluster\n"
                                  "2017-10-09 07:01:55,60.0,1,60.0,vc1\n"
                                  "2017-10-09 07:02:55,3600.0,2,7200.0,vc1\n"
                                  "2017-10-09 07:03:55,7200.0,4,28800.0,vc2\n"
                                  "2017-10-09 07:04:55,36000.0,8,288000.0,vc2\n"
                                  "2017-10-09 07:05:55,1800.0,12,21600.0,vc3\n"
                                  "2017-10-09 07:06:55,90000.0,16,1440000.0,vc3\n"
                                  "2017-10-09 07:07:55,600.0,24,14400.0,vc3\n"
                                  "2017-10-09 07:08:55,100.0,64,6400.0,vc3\n"
                                  "2017-10-09 07:09:55,50.0,128,6400.0,vc3\n";

static int setup_dir(void **state)
{
    (void)state;
    if (!mkdtemp(tmpdir))
        return -1;
    snprintf(philly_path, sizeof(philly_path), "%s/philly.csv", tmpdir);
    FILE *f = fopen(philly_path, "w");
    if (!f)
        return -1;
    fputs(philly_text, f);
    return fclose(f);
}

static int remove_dir(void **state)
{
    (void)state;
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

static void parse_ok(const char *text, TraceMix *m)
{
    Buf err = {0};
    int r = tracegen_mix_parse(text, strlen(text), "mix.yaml", m, &err);
    if (r)
        fail_msg("parse failed %d: %s", r, buf_str(&err));
    assert_int_equal(err.len, 0);
    buf_free(&err);
}

/* Fails with -EINVAL, leaves *m alone, and the message holds each of the given texts
 * (NULL-terminated). */
static void parse_bad(const char *text, ...)
{
    Buf err = {0};
    TraceMix m = {.n_teams = 777};
    int r = tracegen_mix_parse(text, strlen(text), "mix.yaml", &m, &err);
    va_list ap;
    va_start(ap, text);
    const char *want;
    while ((want = va_arg(ap, const char *)))
        if (!strstr(buf_str(&err), want))
            fail_msg("message lacks '%s':\n%s", want, buf_str(&err));
    va_end(ap);
    if (r != -EINVAL)
        fail_msg("got %d, expected -EINVAL: %s", r, buf_str(&err));
    assert_int_equal(m.n_teams, 777);
    assert_null(m.entries);
    buf_free(&err);
}

static void generate_ok(const char *text, uint64_t seed, double hours, JobList *l)
{
    TraceMix m;
    parse_ok(text, &m);
    Buf err = {0};
    *l = (JobList){0};
    int r = tracegen_generate(&m, seed, (int64_t)(hours * 3600000.0), l, &err);
    if (r)
        fail_msg("generate failed %d: %s", r, buf_str(&err));
    buf_free(&err);
    tracegen_mix_free(&m);
}

static char *csv_of(const JobList *l)
{
    Buf b = {0};
    assert_int_equal(tracegen_write_csv(l, &b), 0);
    return buf_steal(&b);
}

static size_t count_class(const JobList *l, const char *cls)
{
    size_t n = 0;
    for (size_t i = 0; i < l->n; i++)
        n += !strcmp(l->jobs[i].workload_class, cls);
    return n;
}

/* A mix with one entry of each kind; %s is the Philly table. */
static const char mix_all[] = "teams: [search, {name: research, projects: [pre, fine]}, ads]\n"
                              "inference:\n"
                              "  - name: serve\n"
                              "    team: search\n"
                              "    priority: production\n"
                              "    rate_per_hour: 6\n"
                              "    lifetime: {mean: 2h, min: 30m, max: 8h}\n"
                              "    model_params_b: 8\n"
                              "    kv_cache: 4GiB\n"
                              "    busy: 0.15\n"
                              "    peak_memory_overrun: 0.1\n"
                              "training:\n"
                              "  - name: train\n"
                              "    team: research\n"
                              "    rate_per_hour: 3\n"
                              "    philly: %s\n"
                              "    max_gpus: 64\n"
                              "    max_duration: 20h\n"
                              "batch:\n"
                              "  - name: embed\n"
                              "    team: ads\n"
                              "    rate_per_hour: 20\n"
                              "    duration: {mean: 20m, min: 2m, max: 2h}\n"
                              "    gpu_memory: 18GiB\n"
                              "interactive:\n"
                              "  - name: nb\n"
                              "    team: research\n"
                              "    project: fine\n"
                              "    rate_per_hour: 4\n"
                              "    duration: 1h\n"
                              "    gpu_fraction: 0.25\n";

static char *mix_all_text(void)
{
    size_t n = sizeof(mix_all) + strlen(philly_path);
    char *s = malloc(n);
    assert_non_null(s);
    snprintf(s, n, mix_all, philly_path);
    return s;
}

/* ---- the mix ---- */

static void test_parse_every_field(void **state)
{
    (void)state;
    TraceMix m;
    parse_ok("teams:\n"
             "  - search\n"
             "  - {name: research, projects: [llm, vision]}\n"
             "inference:\n"
             "  - name: serve\n"
             "    team: search\n"
             "    project: null\n"
             "    priority: high\n"
             "    rate_per_hour: 6.5\n"
             "    lifetime: {mean: 2h, min: 30m, max: 8h}\n"
             "    model_params_b: 7.5\n"
             "    bytes_per_param: 1\n"
             "    kv_cache: 4GiB\n"
             "    busy: 0.15\n"
             "    peak_memory_overrun: 0.25\n"
             "    gpu_models: [A100-80GB, H100-80GB-SXM5]\n"
             "    cpus: 8.5\n"
             "    memory: 64GiB\n"
             "training:\n"
             "  - name: pretrain\n"
             "    team: research\n"
             "    project: llm\n"
             "    priority: low\n"
             "    rate_per_hour: 3\n"
             "    philly: /data/philly.csv\n"
             "    min_gpus: 2\n"
             "    max_gpus: 64\n"
             "    duration_scale: 0.5\n"
             "    max_duration: 24h\n"
             "    preemptible: true\n"
             "    checkpoint: {interval: 30m, grace: 2m, cost: 60s}\n"
             "    busy: 0.9\n"
             "    gpu_models: H100-80GB-SXM5\n"
             "    cpus_per_gpu: 12\n"
             "    memory_per_gpu: 96GiB\n"
             "  - name: tune\n"
             "    team: research\n"
             "    rate_per_hour: 0\n"
             "batch:\n"
             "  - {name: b-gpus, team: search, rate_per_hour: 1, duration: 1h, gpus: 2,\n"
             "     preemptible: yes, checkpoint: {interval: 10m}}\n"
             "  - {name: b-mem, team: search, rate_per_hour: 1, duration: 1h, gpu_memory: 18GiB}\n"
             "  - {name: b-frac, team: search, rate_per_hour: 1, duration: 1h, gpu_fraction: 0.3,\n"
             "     priority: high, cpus: 2, memory: 8GiB}\n"
             "interactive:\n"
             "  - {name: nb, team: research, rate_per_hour: 2, duration: {mean: 1h, min: 0s},\n"
             "     mig: 1g.10gb, busy: 0}\n",
             &m);
    assert_string_equal(m.file, "mix.yaml");
    assert_int_equal(m.n_teams, 2);
    assert_string_equal(m.teams[0].name, "search");
    assert_int_equal(m.teams[0].n_projects, 0);
    assert_int_equal(m.teams[1].n_projects, 2);
    assert_string_equal(m.teams[1].projects[1], "vision");
    assert_int_equal(m.n_entries, 7);

    const TraceMixEntry *e = &m.entries[0];
    assert_string_equal(e->name, "serve");
    assert_int_equal(e->line, 5);
    assert_int_equal(e->kind, KIND_INFERENCE);
    assert_int_equal(e->team, 0);
    assert_null(e->project);
    assert_int_equal(e->priority, PRIO_HIGH);
    assert_int_equal(e->rate_milli_per_hour, 6500);
    assert_int_equal(e->time.mean_ms, 7200000);
    assert_int_equal(e->time.min_ms, 1800000);
    assert_int_equal(e->time.max_ms, 8 * 3600000);
    assert_int_equal(e->params_milli_b, 7500);
    assert_int_equal(e->bytes_per_param_milli, 1000);
    assert_int_equal(e->kv_cache_mib, 4096);
    assert_int_equal(e->busy_milli, 150);
    assert_true(e->has_overrun);
    assert_int_equal(e->overrun_milli, 250);
    assert_int_equal(e->n_gpu_models, 2);
    assert_string_equal(e->gpu_models[1], "H100-80GB-SXM5");
    assert_int_equal(e->cpu_milli, 8500);
    assert_int_equal(e->memory_mib, 65536);
    assert_int_equal(e->req, REQ_MEMORY);
    /* 7.5e9 x 1 byte x 1.2 = 9e9 bytes = 8583.07 MiB -> 8584, + 4096 */
    assert_int_equal(e->gpu_memory_mib, 8584 + 4096);

    e = &m.entries[1];
    assert_string_equal(e->name, "pretrain");
    assert_int_equal(e->kind, KIND_TRAINING);
    assert_int_equal(e->team, 1);
    assert_string_equal(e->project, "llm");
    assert_int_equal(e->priority, PRIO_LOW);
    assert_string_equal(e->philly, "/data/philly.csv");
    assert_int_equal(e->philly_line, 25);
    assert_int_equal(e->min_gpus, 2);
    assert_int_equal(e->max_gpus, 64);
    assert_int_equal(e->duration_scale_milli, 500);
    assert_int_equal(e->max_duration_ms, 24 * 3600000);
    assert_true(e->preemptible);
    assert_int_equal(e->checkpoint_interval_ms, 1800000);
    assert_int_equal(e->checkpoint_grace_ms, 120000);
    assert_int_equal(e->checkpoint_cost_ms, 60000);
    assert_int_equal(e->busy_milli, 900);
    assert_int_equal(e->n_gpu_models, 1);
    assert_int_equal(e->cpu_milli, 12000);
    assert_int_equal(e->memory_mib, 96 * 1024);

    e = &m.entries[2]; /* defaults */
    assert_string_equal(e->name, "tune");
    assert_int_equal(e->priority, PRIO_NORMAL);
    assert_int_equal(e->rate_milli_per_hour, 0);
    assert_string_equal(e->philly, TRACEGEN_PHILLY_DEFAULT);
    assert_int_equal(e->philly_line, e->line);
    assert_int_equal(e->min_gpus, 1);
    assert_int_equal(e->duration_scale_milli, 1000);
    assert_int_equal(e->max_duration_ms, INT64_MAX);
    assert_false(e->preemptible);
    assert_int_equal(e->busy_milli, BUSY_ALL);

    e = &m.entries[3];
    assert_int_equal(e->kind, KIND_BATCH);
    assert_int_equal(e->priority, PRIO_LOW); /* batch's default */
    assert_int_equal(e->req, REQ_GPUS);
    assert_int_equal(e->gpus, 2);
    assert_true(e->preemptible);
    assert_int_equal(e->checkpoint_interval_ms, 600000);
    assert_int_equal(e->time.mean_ms, 3600000); /* a bare duration: the mean, unclipped */
    assert_int_equal(e->time.min_ms, 1000);
    assert_int_equal(e->time.max_ms, INT64_MAX);
    assert_int_equal(m.entries[4].req, REQ_MEMORY);
    assert_int_equal(m.entries[4].gpu_memory_mib, 18432);
    e = &m.entries[5];
    assert_int_equal(e->req, REQ_FRACTION);
    assert_int_equal(e->fraction_milli, 300);
    assert_int_equal(e->priority, PRIO_HIGH);
    assert_int_equal(e->cpu_milli, 2000);
    assert_int_equal(e->memory_mib, 8192);

    e = &m.entries[6];
    assert_int_equal(e->kind, KIND_INTERACTIVE);
    assert_int_equal(e->priority, PRIO_HIGH); /* interactive's default */
    assert_int_equal(e->req, REQ_MIG);
    assert_string_equal(e->mig, "1g.10gb");
    assert_int_equal(e->busy_milli, 0);
    assert_int_equal(e->time.min_ms, 1000); /* never under a second */
    tracegen_mix_free(&m);
    tracegen_mix_free(&m); /* cleared: a second free is harmless */
}

#define TEAMS      "teams: [search, ads]\n"
#define BATCH_HEAD "batch:\n  - name: b\n    team: search\n    rate_per_hour: 1\n"

static void test_parse_errors(void **state)
{
    (void)state;
    /* unknown fields, with a suggestion when close, at every level */
    parse_bad(TEAMS BATCH_HEAD "    duration: 1h\n    gpus: 1\n    rate_per_hr: 2\n",
              "mix.yaml:8: unknown field 'rate_per_hr' in batch entry 'b' (did you mean "
              "'rate_per_hour'?)",
              NULL);
    parse_bad(TEAMS "trainig: []\n",
              "mix.yaml:2: unknown field 'trainig' in the mix (did you mean 'training'?)", NULL);
    parse_bad(TEAMS BATCH_HEAD "    duration: {mean: 1h, mx: 2h}\n    gpus: 1\n",
              "mix.yaml:6: unknown field 'mx' in duration of 'b'", NULL);
    parse_bad(TEAMS BATCH_HEAD "    duration: 1h\n    gpus: 1\n    lifetime: 2h\n",
              "mix.yaml:8: unknown field 'lifetime' in batch entry 'b'", NULL);
    /* a field of another section is unknown here */
    parse_bad(TEAMS BATCH_HEAD "    duration: 1h\n    gpus: 1\n    model_params_b: 7\n",
              "mix.yaml:8: unknown field 'model_params_b'", NULL);
    /* bad durations and sizes */
    parse_bad(TEAMS BATCH_HEAD "    duration: {mean: 20 minutes}\n    gpus: 1\n",
              "mix.yaml:6: field 'mean': must be a duration like 90s, 30m, 2h or 1h30m", NULL);
    parse_bad(TEAMS BATCH_HEAD "    duration: 1h\n    gpu_memory: lots\n",
              "mix.yaml:7: field 'gpu_memory': must be a size like 24GiB", NULL);
    parse_bad(TEAMS BATCH_HEAD "    duration: {mean: 1h, min: 30m, max: 10m}\n    gpus: 1\n",
              "mix.yaml:6: field 'max': must be at least the minimum (30m", NULL);
    parse_bad(TEAMS BATCH_HEAD "    duration: 0s\n    gpus: 1\n",
              "mix.yaml:6: field 'duration': must be longer than 0s", NULL);
    /* two GPU asks: the later one is the mistake, naming the earlier one's line */
    parse_bad(TEAMS BATCH_HEAD "    duration: 1h\n    gpu_fraction: 0.5\n    mig: 1g.10gb\n",
              "mix.yaml:8: field 'mig': the entry already asks for 'gpu_fraction' on line 7; "
              "give only one of gpus, gpu_memory, gpu_fraction or mig",
              NULL);
    parse_bad(TEAMS BATCH_HEAD "    duration: 1h\n",
              "mix.yaml:3: missing GPU request in batch entry 'b': give one of gpus", NULL);
    parse_bad(TEAMS BATCH_HEAD "    duration: 1h\n    mig: 9g.99gb\n",
              "mix.yaml:7: field 'mig': '9g.99gb' is not a MIG profile", NULL);
    /* teams and projects */
    parse_bad(TEAMS "batch:\n  - {name: b, team: serch, rate_per_hour: 1, duration: 1h, gpus: 1}\n",
              "mix.yaml:3: field 'team': 'serch' is not one of the mix's teams (search, ads)",
              NULL);
    parse_bad("teams: [{name: search, projects: [ranking]}]\n"
              "batch:\n  - {name: b, team: search, project: rank, rate_per_hour: 1,\n"
              "     duration: 1h, gpus: 1}\n",
              "mix.yaml:3: field 'project': 'rank' is not a project of team 'search' (ranking)",
              NULL);
    parse_bad(TEAMS "batch:\n  - {name: b, team: ads, project: x, rate_per_hour: 1,\n"
                    "     duration: 1h, gpus: 1}\n",
              "mix.yaml:3: field 'project': team 'ads' lists no projects", NULL);
    parse_bad("teams: [search, ads, search]\n", "mix.yaml:1: duplicate team 'search'", NULL);
    parse_bad("inference: []\n", "mix.yaml:1: missing field 'teams' in the mix", NULL);
    /* priorities per section */
    parse_bad(TEAMS "inference:\n  - {name: s, team: ads, priority: low, rate_per_hour: 1,\n"
                    "     lifetime: 1h, model_params_b: 7}\n",
              "mix.yaml:3: field 'priority': must be production or high for inference, not 'low'",
              NULL);
    parse_bad(TEAMS BATCH_HEAD "    duration: 1h\n    gpus: 1\n    priority: production\n",
              "mix.yaml:8: field 'priority': must be high, normal or low for batch", NULL);
    /* required fields and ranges */
    parse_bad(TEAMS "inference:\n  - {name: s, team: ads, rate_per_hour: 1, lifetime: 1h}\n",
              "mix.yaml:3: missing field 'model_params_b' in inference entry 's'", NULL);
    parse_bad(TEAMS "inference:\n  - {name: s, team: ads, rate_per_hour: 1, model_params_b: 7}\n",
              "mix.yaml:3: missing field 'lifetime' in inference entry 's'", NULL);
    parse_bad(TEAMS "training:\n  - {name: t, team: ads, rate_per_hour: -1}\n",
              "mix.yaml:3: field 'rate_per_hour': must be a number from 0 to 100000", NULL);
    parse_bad(TEAMS "training:\n  - {name: t, rate_per_hour: 1}\n",
              "mix.yaml:3: missing field 'team' in training entry 't'", NULL);
    parse_bad(TEAMS "training:\n  - {name: t, team: ads, rate_per_hour: 1, min_gpus: 8,\n"
                    "     max_gpus: 4}\n",
              "mix.yaml:4: field 'max_gpus': must be at least min_gpus (8)", NULL);
    parse_bad(TEAMS BATCH_HEAD "    duration: 1h\n    gpus: 1\n    busy: 1.5\n",
              "mix.yaml:8: field 'busy': must be a number from 0 to 1", NULL);
    parse_bad(TEAMS "inference:\n  - {name: s, team: ads, rate_per_hour: 1, lifetime: 1h,\n"
                    "     model_params_b: 7, peak_memory_overrun: 2}\n",
              "mix.yaml:4: field 'peak_memory_overrun': must be a number from 0 to 1", NULL);
    /* names: unique across sections, usable in a job id */
    parse_bad(TEAMS BATCH_HEAD "    duration: 1h\n    gpus: 1\n"
                               "interactive:\n  - {name: b, team: ads, rate_per_hour: 1,\n"
                               "     duration: 1h, gpus: 1}\n",
              "mix.yaml:9: duplicate entry 'b' (first on line 3)", NULL);
    parse_bad(TEAMS "batch:\n  - {name: 'a b', team: ads, rate_per_hour: 1, duration: 1h, "
                    "gpus: 1}\n",
              "mix.yaml:3: field 'name': must be at most 240 characters without spaces", NULL);
    /* shapes */
    parse_bad(TEAMS "batch: {name: b}\n", "mix.yaml:2: field 'batch': must be a list of batch",
              NULL);
    parse_bad("", "mix.yaml:1: empty", NULL);
    parse_bad("- a\n", "mix.yaml:1: a mix must be a mapping, not a list", NULL);
    parse_bad(TEAMS, "mix.yaml:1: the mix has no entries", NULL);
    parse_bad("teams: [a\n", "mix.yaml:", "invalid YAML", NULL);
    parse_bad(TEAMS "batch:\n  - {name: b, team: ads, rate_per_hour: 1, duration: 1h, gpus: 1}\n"
                    "---\nteams: [x]\n",
              "a mix is one YAML document", NULL);
    /* several mistakes are reported in one pass */
    parse_bad(TEAMS "batch:\n  - {name: b, team: nobody, rate_per_hour: 1, duration: 1h, gpus: 1}\n"
                    "  - {name: c, team: ads, rate_per_hour: x, duration: 1h, gpus: 1}\n",
              "mix.yaml:3: field 'team'", "mix.yaml:4: field 'rate_per_hour'", NULL);
}

static void test_mix_load_missing_file(void **state)
{
    (void)state;
    TraceMix m = {0};
    Buf err = {0};
    assert_int_equal(tracegen_mix_load("/nonexistent/mix.yaml", &m, &err), -ENOENT);
    assert_non_null(strstr(buf_str(&err), "/nonexistent/mix.yaml: "));
    assert_null(m.entries);
    buf_free(&err);
}

/* ---- sizes ---- */

static void test_model_memory(void **state)
{
    (void)state;
    /* 8e9 x 2 bytes x 1.2 = 1.92e10 bytes = 18310.55 MiB, rounded up, + 4 GiB */
    assert_int_equal(tracegen_model_memory_mib(8000, 2000, 4096), 18311 + 4096);
    /* 7e9 x 1 byte x 1.2 = 8.4e9 bytes = 8010.86 MiB */
    assert_int_equal(tracegen_model_memory_mib(7000, 1000, 1024), 8011 + 1024);
    /* 70e9 x 2 x 1.2 = 1.68e11 bytes = 160217.29 MiB */
    assert_int_equal(tracegen_model_memory_mib(70000, 2000, 0), 160218);
    /* exact: 0.001e9 params x 0.5 bytes x 1.2 = 600,000 bytes, just under 1 MiB */
    assert_int_equal(tracegen_model_memory_mib(1, 500, 0), 1);
    /* 131.072 billion parameters at 0.001 bytes: 125 MiB x 1.2 = exactly 150 MiB, and a
     * thousandth of a billion more rounds up */
    assert_int_equal(tracegen_model_memory_mib(131072, 1, 0), 150);
    assert_int_equal(tracegen_model_memory_mib(131073, 1, 0), 151);

    /* generated inference jobs ask for exactly that memory */
    JobList l;
    generate_ok("teams: [s]\ninference:\n  - {name: llm, team: s, rate_per_hour: 10,\n"
                "     lifetime: 1h, model_params_b: 13, kv_cache: 2GiB}\n",
                3, 10, &l);
    assert_true(l.n > 20);
    for (size_t i = 0; i < l.n; i++) {
        assert_int_equal(l.jobs[i].req, REQ_MEMORY);
        assert_int_equal(l.jobs[i].gpu_memory_mib, tracegen_model_memory_mib(13000, 2000, 2048));
        assert_int_equal(l.jobs[i].peak_memory_mib, 0); /* no overrun given: no peak written */
        assert_int_equal(l.jobs[i].tiers, (1u << TIER_OWNED) | (1u << TIER_RESERVED) |
                                              (1u << TIER_ON_DEMAND)); /* production */
    }
    job_list_free(&l);
}

static void test_gang_split(void **state)
{
    (void)state;
    static const struct {
        uint32_t n, workers;
        uint16_t gpus;
    } cases[] = {{1, 1, 1},  {2, 1, 2},  {7, 1, 7},  {8, 1, 8},   {9, 3, 3},
                 {10, 2, 5}, {12, 2, 6}, {16, 2, 8}, {17, 17, 1}, {24, 3, 8},
                 {32, 4, 8}, {36, 6, 6}, {64, 8, 8}, {128, 16, 8}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        uint32_t w;
        uint16_t g;
        tracegen_gang_split(cases[i].n, &w, &g);
        if (w != cases[i].workers || g != cases[i].gpus)
            fail_msg("%u GPUs: %u x %u, expected %u x %u", cases[i].n, w, g, cases[i].workers,
                     cases[i].gpus);
    }
    /* every size: equal workers of at most 8 covering it exactly, the fewest such */
    for (uint32_t n = 1; n <= 4096; n++) {
        uint32_t w;
        uint16_t g;
        tracegen_gang_split(n, &w, &g);
        assert_true(g >= 1 && g <= 8);
        assert_int_equal(w * g, n);
        for (uint32_t fewer = (n + 7) / 8; fewer < w; fewer++)
            assert_true(n % fewer != 0);
    }
}

/* Training draws rows of the Philly table in [min_gpus, max_gpus], split into gangs,
 * durations scaled and clipped. */
static void test_training_from_philly(void **state)
{
    (void)state;
    char text[1024];
    snprintf(text, sizeof(text),
             "teams: [r]\ntraining:\n"
             "  - {name: big, team: r, rate_per_hour: 30, philly: %s, min_gpus: 8,\n"
             "     max_gpus: 64, duration_scale: 0.5, max_duration: 10h, cpus_per_gpu: 12,\n"
             "     memory_per_gpu: 96GiB, preemptible: true, checkpoint: {interval: 30m}}\n",
             philly_path);
    JobList l;
    generate_ok(text, 11, 20, &l);
    assert_true(l.n > 300);
    /* rows 8..64 GPUs: 8 (36000 s), 12 (1800 s), 16 (90000 s), 24 (600 s), 64 (100 s) */
    bool seen[65] = {0};
    for (size_t i = 0; i < l.n; i++) {
        const JobSpec *j = &l.jobs[i];
        uint32_t n = j->workers * j->gpus;
        assert_int_equal(j->kind, KIND_TRAINING);
        assert_int_equal(j->req, REQ_GPUS);
        assert_true(n == 8 || n == 12 || n == 16 || n == 24 || n == 64);
        seen[n] = true;
        uint32_t w;
        uint16_t g;
        tracegen_gang_split(n, &w, &g);
        assert_int_equal(j->workers, w);
        assert_int_equal(j->gpus, g);
        int64_t want = n == 8    ? 18000000
                       : n == 12 ? 900000
                       : n == 16 ? 36000000
                       : n == 24 ? 300000
                                 : 50000;
        assert_int_equal(j->duration_ms, want); /* x 0.5; 16 GPUs: 12.5h clipped to 10h */
        assert_int_equal(j->cpu_milli, 12000u * g);
        assert_int_equal(j->memory_mib, 96u * 1024 * g);
        assert_true(j->preemptible);
        assert_int_equal(j->checkpoint_interval_ms, 1800000);
        assert_int_equal(j->tiers, 0);
        assert_string_equal(j->team, "r");
        assert_null(j->project);
    }
    assert_true(seen[8] && seen[12] && seen[16] && seen[24] && seen[64]);
    job_list_free(&l);

    /* no row in range */
    snprintf(text, sizeof(text),
             "teams: [r]\ntraining:\n  - {name: huge, team: r, rate_per_hour: 1, philly: %s,\n"
             "     min_gpus: 200}\n",
             philly_path);
    TraceMix m;
    parse_ok(text, &m);
    Buf err = {0};
    assert_int_equal(tracegen_generate(&m, 1, 3600000 * 10, &l, &err), -EINVAL);
    assert_non_null(strstr(buf_str(&err), "mix.yaml:3: training entry 'huge': no row of the "
                                          "Philly table"));
    buf_free(&err);
    tracegen_mix_free(&m);
}

static void test_philly_absent(void **state)
{
    (void)state;
    TraceMix m;
    parse_ok("teams: [r]\n"
             "training:\n"
             "  - name: t\n"
             "    team: r\n"
             "    rate_per_hour: 1\n"
             "    philly: /nonexistent/philly_jobs_82k.csv\n",
             &m);
    Buf err = {0};
    JobList l = {.n = 99};
    assert_int_equal(tracegen_generate(&m, 1, 3600000, &l, &err), -ENOENT);
    const char *msg = buf_str(&err);
    if (!strstr(msg, "mix.yaml:6: field 'philly': the Philly job table "
                     "'/nonexistent/philly_jobs_82k.csv' is absent") ||
        !strstr(msg, "training entry 't'"))
        fail_msg("unclear message: %s", msg);
    assert_int_equal(l.n, 99);
    buf_free(&err);
    tracegen_mix_free(&m);

    /* an idle entry (rate 0) reads nothing */
    parse_ok("teams: [r]\ntraining:\n  - {name: t, team: r, rate_per_hour: 0,\n"
             "     philly: /nonexistent/x.csv}\n",
             &m);
    assert_int_equal(tracegen_generate(&m, 1, 3600000, &l, &err), 0);
    assert_int_equal(l.n, 0);
    job_list_free(&l);
    tracegen_mix_free(&m);
}

/* ---- generation ---- */

static void test_deterministic(void **state)
{
    (void)state;
    char *text = mix_all_text();
    JobList a, b, c;
    generate_ok(text, 7, 24, &a);
    generate_ok(text, 7, 24, &b);
    generate_ok(text, 8, 24, &c);
    char *ca = csv_of(&a), *cb = csv_of(&b), *cc = csv_of(&c);
    assert_true(a.n > 100);
    assert_string_equal(ca, cb);
    assert_true(strcmp(ca, cc) != 0);
    /* every kind is there */
    assert_true(count_class(&a, "serve") && count_class(&a, "train") && count_class(&a, "embed") &&
                count_class(&a, "nb"));
    /* a longer horizon extends the trace: the first 24 hours are the same jobs */
    JobList d;
    generate_ok(text, 7, 48, &d);
    size_t k = 0;
    for (size_t i = 0; i < d.n; i++) {
        if (d.jobs[i].submit_ms >= 24 * 3600000)
            continue;
        assert_true(k < a.n);
        assert_string_equal(d.jobs[i].name, a.jobs[k].name);
        assert_int_equal(d.jobs[i].duration_ms, a.jobs[k].duration_ms);
        k++;
    }
    assert_int_equal(k, a.n);
    /* an entry's stream does not depend on the others: drop the batch entry */
    char *cut = strstr(text, "batch:\n");
    char *end = strstr(text, "interactive:\n");
    memmove(cut, end, strlen(end) + 1);
    JobList e;
    generate_ok(text, 7, 24, &e);
    assert_int_equal(e.n, a.n - count_class(&a, "embed"));
    for (size_t i = 0, j = 0; i < a.n; i++) {
        if (!strcmp(a.jobs[i].workload_class, "embed"))
            continue;
        assert_string_equal(a.jobs[i].name, e.jobs[j].name);
        assert_int_equal(a.jobs[i].duration_estimate_ms, e.jobs[j].duration_estimate_ms);
        j++;
    }
    free(ca);
    free(cb);
    free(cc);
    free(text);
    job_list_free(&a);
    job_list_free(&b);
    job_list_free(&c);
    job_list_free(&d);
    job_list_free(&e);
}

/* Poisson arrivals: over 100 hours at 20 an hour the count is 2000 +- 44.7 (sd); five
 * sd either side fails a correct generator about once in 1.7 million seeds. Submit
 * times lie in [0, 100h), whole seconds, sorted by time then id; ids count from 1. */
static void test_poisson_counts(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 5; seed++) {
        JobList l;
        generate_ok("teams: [t]\nbatch:\n"
                    "  - {name: a, team: t, rate_per_hour: 20, duration: 10m, gpus: 1}\n"
                    "  - {name: b, team: t, rate_per_hour: 2.5, duration: 10m, gpus: 1}\n",
                    seed, 100, &l);
        size_t na = count_class(&l, "a"), nb = count_class(&l, "b");
        if (na < 2000 - 224 || na > 2000 + 224 || nb < 250 - 80 || nb > 250 + 80)
            fail_msg("seed %llu: %zu and %zu arrivals, expected 2000 +- 224 and 250 +- 80",
                     (unsigned long long)seed, na, nb);
        bool found_last = false;
        char last[32];
        snprintf(last, sizeof(last), "a-%zu", na);
        for (size_t i = 0; i < l.n; i++) {
            const JobSpec *j = &l.jobs[i];
            assert_true(j->submit_ms >= 0 && j->submit_ms < 100 * 3600000LL);
            assert_int_equal(j->submit_ms % 1000, 0);
            if (i)
                assert_true(l.jobs[i - 1].submit_ms < j->submit_ms ||
                            (l.jobs[i - 1].submit_ms == j->submit_ms &&
                             strcmp(l.jobs[i - 1].name, j->name) < 0));
            found_last |= !strcmp(j->name, last);
        }
        assert_true(found_last);
        /* the gaps look exponential: their mean is 1/rate (3 min for 'a') within 10 % */
        double sum = 0, prev = 0;
        size_t n = 0;
        for (size_t i = 0; i < l.n; i++)
            if (!strcmp(l.jobs[i].workload_class, "a")) {
                sum += (double)l.jobs[i].submit_ms - prev;
                prev = (double)l.jobs[i].submit_ms;
                n++;
            }
        assert_true(fabs(sum / (double)n - 180000.0) < 18000.0);
        job_list_free(&l);
    }
}

/* An arrival window: a burst at a high rate in [from, until), the other entries as
 * they were; until before from is refused on its line. */
static void test_arrival_window(void **state)
{
    (void)state;
    const char *base = "teams: [t]\nbatch:\n"
                       "  - {name: a, team: t, rate_per_hour: 20, duration: 10m, gpus: 1}\n";
    char text[512];
    snprintf(text, sizeof(text),
             "%s  - {name: burst, team: t, rate_per_hour: 36000, from: 1m, until: 2m,\n"
             "     duration: 10m, gpus: 1}\n",
             base);
    JobList l, plain;
    generate_ok(text, 3, 10, &l);
    generate_ok(base, 3, 10, &plain);
    /* 600 expected in the minute: 5 sd of a Poisson count is about 122 */
    size_t nb = count_class(&l, "burst");
    if (nb < 600 - 122 || nb > 600 + 122)
        fail_msg("%zu arrivals in the window, expected 600 +- 122", nb);
    for (size_t i = 0; i < l.n; i++)
        if (!strcmp(l.jobs[i].workload_class, "burst"))
            assert_true(l.jobs[i].submit_ms >= 60000 && l.jobs[i].submit_ms < 120000);
    assert_int_equal(count_class(&l, "a"), plain.n);
    /* a horizon that ends inside the window cuts it there */
    JobList short_run;
    generate_ok("teams: [t]\nbatch:\n"
                "  - {name: b, team: t, rate_per_hour: 100, from: 30m, duration: 10m, gpus: 1}\n",
                3, 1, &short_run);
    assert_true(short_run.n > 20);
    for (size_t i = 0; i < short_run.n; i++)
        assert_true(short_run.jobs[i].submit_ms >= 1800000 &&
                    short_run.jobs[i].submit_ms < 3600000);
    job_list_free(&l);
    job_list_free(&plain);
    job_list_free(&short_run);
    parse_bad("teams: [t]\nbatch:\n  - name: b\n    team: t\n    rate_per_hour: 1\n"
              "    duration: 1h\n    gpus: 1\n    from: 2h\n    until: 1h\n",
              "mix.yaml:9: field 'until': must be later than from (2h)", NULL);
}

static void test_lifetimes_clipped(void **state)
{
    (void)state;
    JobList l;
    generate_ok("teams: [t]\ninference:\n"
                "  - {name: s, team: t, rate_per_hour: 50, model_params_b: 1,\n"
                "     lifetime: {mean: 2h, min: 30m, max: 3h}}\n"
                "interactive:\n"
                "  - {name: nb, team: t, rate_per_hour: 50, gpus: 1,\n"
                "     duration: {mean: 1h, max: 90m}}\n",
                5, 40, &l);
    size_t at_min = 0, at_max = 0, inside = 0, nb_max = 0;
    for (size_t i = 0; i < l.n; i++) {
        const JobSpec *j = &l.jobs[i];
        assert_int_equal(j->duration_ms % 1000, 0);
        if (j->kind == KIND_INFERENCE) {
            assert_true(j->duration_ms >= 1800000 && j->duration_ms <= 3 * 3600000);
            at_min += j->duration_ms == 1800000;
            at_max += j->duration_ms == 3 * 3600000;
            inside += j->duration_ms > 1800000 && j->duration_ms < 3 * 3600000;
        } else {
            assert_true(j->duration_ms >= 1000 && j->duration_ms <= 90 * 60000);
            nb_max += j->duration_ms == 90 * 60000;
        }
    }
    /* exponential with mean 2h: 22 % fall under 30m, 22 % over 3h */
    assert_true(at_min > 100 && at_max > 100 && inside > 500);
    assert_true(nb_max > 100);
    job_list_free(&l);
}

/* Estimates: the true duration x a factor in [0.5, 2], rounded up to whole minutes, and
 * never the true duration; spread on both sides of it. */
static void test_estimates(void **state)
{
    (void)state;
    char *text = mix_all_text();
    JobList l;
    generate_ok(text, 3, 200, &l);
    assert_true(l.n > 5000);
    size_t under = 0, over = 0, first_other = 0;
    double first = (double)l.jobs[0].duration_estimate_ms / (double)l.jobs[0].duration_ms;
    for (size_t i = 0; i < l.n; i++) {
        const JobSpec *j = &l.jobs[i];
        int64_t d = j->duration_ms, e = j->duration_estimate_ms;
        assert_true(d > 0);
        assert_int_equal(e % 60000, 0);
        assert_true(e >= 60000);
        assert_true(e != d);
        assert_true((double)e >= 0.5 * (double)d);
        assert_true(e <= 2 * d + 60000);
        under += e < d;
        over += e > d;
        first_other += fabs((double)e / (double)d - first) > 0.01;
    }
    /* a median of 1 before rounding up: both sides well represented */
    assert_true(under > l.n / 5 && over > l.n / 5);
    assert_true(first_other > l.n / 2);
    job_list_free(&l);
    free(text);
}

static void test_projects_and_overrun(void **state)
{
    (void)state;
    JobList l;
    generate_ok("teams: [{name: t, projects: [p1, p2, p3]}]\n"
                "inference:\n"
                "  - {name: s, team: t, rate_per_hour: 100, lifetime: 1h, model_params_b: 8,\n"
                "     peak_memory_overrun: 0.1}\n"
                "  - {name: z, team: t, project: p2, rate_per_hour: 10, lifetime: 1h,\n"
                "     model_params_b: 8, peak_memory_overrun: 0, priority: high}\n",
                9, 30, &l);
    uint64_t mem = tracegen_model_memory_mib(8000, 2000, 0);
    size_t over = 0, n = 0, by_project[3] = {0};
    for (size_t i = 0; i < l.n; i++) {
        const JobSpec *j = &l.jobs[i];
        assert_non_null(j->project);
        if (!strcmp(j->workload_class, "z")) {
            assert_string_equal(j->project, "p2");
            assert_int_equal(j->peak_memory_mib, mem);
            assert_int_equal(j->tiers, 0); /* high: any tier */
            continue;
        }
        n++;
        by_project[j->project[1] - '1']++;
        if (j->peak_memory_mib == mem)
            continue;
        over++;
        assert_true(j->peak_memory_mib >= (uint64_t)(mem * 1.1) &&
                    j->peak_memory_mib <= (uint64_t)ceil(mem * 1.4));
    }
    /* 3000 instances, 10 % overrun: 300 +- 16.4 (sd); 5 sd either side */
    assert_true(n > 2500);
    if (fabs((double)over - 0.1 * (double)n) > 5 * sqrt(0.09 * (double)n))
        fail_msg("%zu of %zu overrun, expected about 10 %%", over, n);
    for (int p = 0; p < 3; p++)
        assert_true(by_project[p] > n / 4);
    job_list_free(&l);
}

/* The CSV: what the generator writes reads back field for field. */
static void assert_same_job(const JobSpec *a, const JobSpec *b)
{
    assert_string_equal(a->name, b->name);
#define SAME_STR(f)                                                                                \
    do {                                                                                           \
        if (a->f || b->f) {                                                                        \
            assert_non_null(a->f);                                                                 \
            assert_non_null(b->f);                                                                 \
            assert_string_equal(a->f, b->f);                                                       \
        }                                                                                          \
    } while (0)
    SAME_STR(team);
    SAME_STR(project);
    SAME_STR(workload_class);
    SAME_STR(fabric);
    assert_int_equal(a->kind, b->kind);
    assert_int_equal(a->priority, b->priority);
    assert_int_equal(a->workers, b->workers);
    assert_int_equal(a->req, b->req);
    if (a->req == REQ_GPUS)
        assert_int_equal(a->gpus, b->gpus);
    if (a->req == REQ_MIG)
        SAME_STR(mig);
    if (a->req == REQ_MEMORY)
        assert_int_equal(a->gpu_memory_mib, b->gpu_memory_mib);
    if (a->req == REQ_FRACTION)
        assert_int_equal(a->fraction_milli, b->fraction_milli);
#undef SAME_STR
    assert_int_equal(a->n_gpu_models, b->n_gpu_models);
    for (size_t i = 0; i < a->n_gpu_models; i++)
        assert_string_equal(a->gpu_models[i], b->gpu_models[i]);
    assert_int_equal(a->scope, b->scope);
    assert_int_equal(a->scope_required, b->scope_required);
    assert_int_equal(a->preemptible, b->preemptible);
    assert_int_equal(a->checkpoint_interval_ms, b->checkpoint_interval_ms);
    assert_int_equal(a->checkpoint_grace_ms, b->checkpoint_grace_ms);
    assert_int_equal(a->checkpoint_cost_ms, b->checkpoint_cost_ms);
    assert_int_equal(a->tiers, b->tiers);
    assert_int_equal(a->duration_estimate_ms, b->duration_estimate_ms);
    assert_int_equal(a->cpu_milli, b->cpu_milli);
    assert_int_equal(a->memory_mib, b->memory_mib);
    assert_int_equal(a->submit_ms, b->submit_ms);
    assert_int_equal(a->duration_ms, b->duration_ms);
    assert_int_equal(a->busy_milli, b->busy_milli);
    assert_int_equal(a->peak_memory_mib, b->peak_memory_mib);
}

static void round_trip(const JobList *l)
{
    char *csv = csv_of(l);
    JobList back = {0};
    Buf err = {0};
    int r = spec_parse_jobs_csv(csv, strlen(csv), "gen.csv", &back, &err);
    if (r)
        fail_msg("read back failed: %s", buf_str(&err));
    assert_int_equal(back.n, l->n);
    for (size_t i = 0; i < l->n; i++)
        assert_same_job(&l->jobs[i], &back.jobs[i]);
    /* and writing it again gives the same bytes */
    char *again = csv_of(&back);
    assert_string_equal(csv, again);
    free(again);
    free(csv);
    buf_free(&err);
    job_list_free(&back);
}

static void test_csv_round_trip(void **state)
{
    (void)state;
    char *text = mix_all_text();
    JobList l;
    generate_ok(text, 21, 48, &l);
    round_trip(&l);
    char *csv = csv_of(&l);
    assert_non_null(strstr(csv, "id,submit_s,duration_s,duration_estimate_s,team,project,kind,"
                                "priority,class,workers,gpus,gpu_memory_mib,gpu_fraction,mig,"
                                "gpu_model,tiers,preemptible,checkpoint_interval_s,"
                                "checkpoint_cost_s,busy,peak_memory_mib,cpu_milli,memory_mib\n"));
    free(csv);
    job_list_free(&l);
    free(text);

    /* hand-made jobs: every column, quoting, exact milliseconds */
    JobList h = {0};
    JobSpec j;
    job_spec_init(&j);
    j.name = strdup("odd-1");
    j.team = strdup("team, with \"comma\"");
    j.kind = KIND_TRAINING;
    j.priority = PRIO_HIGH;
    j.workers = 3;
    j.req = REQ_GPUS;
    j.gpus = 8;
    j.gpu_models = calloc(2, sizeof(char *));
    j.gpu_models[0] = strdup("H100-80GB-SXM5");
    j.gpu_models[1] = strdup("A100-80GB");
    j.n_gpu_models = 2;
    j.scope = SCOPE_LEAF;
    j.scope_required = true;
    j.fabric = strdup("infiniband-ndr");
    j.preemptible = true;
    j.checkpoint_interval_ms = 1800000;
    j.checkpoint_grace_ms = 120500;
    j.checkpoint_cost_ms = 45000;
    j.tiers = 1u << TIER_SPOT;
    j.submit_ms = 1234;
    j.duration_ms = 3600001;
    j.duration_estimate_ms = 7200000;
    j.busy_milli = 905;
    j.cpu_milli = 96500;
    j.memory_mib = 786432;
    assert_int_equal(job_list_take(&h, &j), 0);
    job_spec_init(&j);
    j.name = strdup("odd-2");
    j.req = REQ_NONE;
    j.gpus = 0;
    assert_int_equal(job_list_take(&h, &j), 0);
    job_spec_init(&j);
    j.name = strdup("odd-3");
    j.req = REQ_MIG;
    j.gpus = 0;
    j.mig = strdup("3g.40gb");
    j.peak_memory_mib = 41000;
    assert_int_equal(job_list_take(&h, &j), 0);
    round_trip(&h);
    csv = csv_of(&h);
    assert_non_null(strstr(csv, ",topology,topology_required,fabric,"));
    assert_non_null(strstr(csv, "odd-1,1.234,3600.001,7200,\"team, with \"\"comma\"\"\","));
    free(csv);
    job_list_free(&h);

    /* an empty list is a header alone */
    JobList none = {0};
    csv = csv_of(&none);
    assert_non_null(strchr(csv, '\n'));
    assert_int_equal(strchr(csv, '\n')[1], '\0');
    free(csv);
}

static void test_generate_limits(void **state)
{
    (void)state;
    TraceMix m;
    parse_ok("teams: [t]\nbatch:\n  - {name: a, team: t, rate_per_hour: 100000, duration: 1m,\n"
             "     gpus: 1}\n",
             &m);
    Buf err = {0};
    JobList l = {0};
    assert_int_equal(tracegen_generate(&m, 1, 3600000LL * 1000, &l, &err), -E2BIG);
    assert_non_null(strstr(buf_str(&err), "more than"));
    buf_reset(&err);
    assert_int_equal(tracegen_generate(&m, 1, 0, &l, &err), -EINVAL);
    assert_null(l.jobs);
    buf_free(&err);
    tracegen_mix_free(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_every_field),
        cmocka_unit_test(test_parse_errors),
        cmocka_unit_test(test_mix_load_missing_file),
        cmocka_unit_test(test_model_memory),
        cmocka_unit_test(test_gang_split),
        cmocka_unit_test(test_training_from_philly),
        cmocka_unit_test(test_philly_absent),
        cmocka_unit_test(test_deterministic),
        cmocka_unit_test(test_poisson_counts),
        cmocka_unit_test(test_arrival_window),
        cmocka_unit_test(test_lifetimes_clipped),
        cmocka_unit_test(test_estimates),
        cmocka_unit_test(test_projects_and_overrun),
        cmocka_unit_test(test_csv_round_trip),
        cmocka_unit_test(test_generate_limits),
    };
    return cmocka_run_group_tests(tests, setup_dir, remove_dir);
}
