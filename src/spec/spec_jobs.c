/* spec_jobs.c: job files into JobSpecs: YAML or JSON (a mapping is one job, a sequence
 * several, and several YAML documents add up), and the job CSV that traces and
 * spreadsheets produce (docs/job-files.md). Both go through the same checks: one GPU
 * request per job, names of enums, ranges, unique job names; a bad job is reported
 * and the reading goes on, so one pass shows the mistakes of the whole file. */
#include "spec/field.h"
#include "spec/spec.h"

#include "util/csv.h"
#include "util/macro.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define JOB_MAX_WORKERS 100000u
#define JOB_MAX_NAME    253
#define JOB_MAX_ENV     1024 /* environment entries of a job: a worker's exec has room */
#define MAX_CPU_MILLI   (1000000 * INT64_C(1000))
#define MAX_TIME_MS     (INT64_C(1) << 52) /* about 140,000 years: sums stay far from overflow */

static const char *const kinds = "inference, training, batch or interactive";
static const char *const priorities = "production, high, normal or low (batch)";
static const char *const scopes = "node, leaf, spine or any";
static const char *const requests = "gpus, mig, gpu_memory or gpu_fraction";

enum {
    J_NAME,
    J_ID,
    J_TEAM,
    J_PROJECT,
    J_KIND,
    J_PRIORITY,
    J_WORKERS,
    J_GPUS,
    J_MIG,
    J_GPU_MEMORY,
    J_GPU_FRACTION,
    J_GPU_MODELS,
    J_TOPOLOGY,
    J_FABRIC,
    J_PREEMPTIBLE,
    J_CHECKPOINT,
    J_CAPACITY,
    J_COMMAND,
    J_ENV,
    J_DURATION_ESTIMATE,
    J_CPUS,
    J_MEMORY,
    J_SUBMIT,
    J_DURATION,
    J_BUSY,
    J_PEAK_MEMORY,
    J_CLASS,
    J_MAX_WAIT,
    J_COUNT
};
static const char *const job_fields[J_COUNT] = {
    "name",         "id",         "team",     "project",  "kind",
    "priority",     "workers",    "gpus",     "mig",      "gpu_memory",
    "gpu_fraction", "gpu_models", "topology", "fabric",   "preemptible",
    "checkpoint",   "capacity",   "command",  "env",      "duration_estimate",
    "cpus",         "memory",     "submit",   "duration", "busy",
    "peak_memory",  "class",      "max_wait",
};

enum { TOPO_SCOPE, TOPO_MODE, TOPO_COUNT };
static const char *const topology_fields[TOPO_COUNT] = {"scope", "mode"};
enum { CK_INTERVAL, CK_GRACE, CK_COST, CK_COUNT };
static const char *const checkpoint_fields[CK_COUNT] = {"interval", "grace", "cost"};

enum {
    C_ID,
    C_SUBMIT_S,
    C_DURATION_S,
    C_TEAM,
    C_PROJECT,
    C_KIND,
    C_PRIORITY,
    C_WORKERS,
    C_GPUS,
    C_MIG,
    C_GPU_MEMORY_MIB,
    C_GPU_FRACTION,
    C_GPU_MODEL,
    C_TOPOLOGY,
    C_TOPOLOGY_REQUIRED,
    C_PREEMPTIBLE,
    C_CHECKPOINT_INTERVAL_S,
    C_CHECKPOINT_GRACE_S,
    C_CHECKPOINT_COST_S,
    C_BUSY,
    C_TIERS,
    C_PEAK_MEMORY_MIB,
    C_CLASS,
    C_CPU_MILLI,
    C_MEMORY_MIB,
    C_DURATION_ESTIMATE_S,
    C_FABRIC,
    C_MAX_WAIT_S,
    C_COUNT
};
static const char *const job_columns[C_COUNT] = {
    "id",
    "submit_s",
    "duration_s",
    "team",
    "project",
    "kind",
    "priority",
    "workers",
    "gpus",
    "mig",
    "gpu_memory_mib",
    "gpu_fraction",
    "gpu_model",
    "topology",
    "topology_required",
    "preemptible",
    "checkpoint_interval_s",
    "checkpoint_grace_s",
    "checkpoint_cost_s",
    "busy",
    "tiers",
    "peak_memory_mib",
    "class",
    "cpu_milli",
    "memory_mib",
    "duration_estimate_s",
    "fabric",
    "max_wait_s",
};

/* One job being read. */
typedef struct JobReader {
    FieldCtx *x;
    JobSpec j;
    const char *req_field; /* the field that gave the GPU request, or NULL */
    size_t req_line;
    int r; /* 0, -EINVAL once something was wrong, -ENOMEM */
} JobReader;

static void jr_fail(JobReader *jr, int e)
{
    if (e == -ENOMEM || jr->r == 0)
        jr->r = e;
}

static int mode_from_name(const char *s)
{
    if (strcasecmp(s, "required") == 0)
        return 1;
    if (strcasecmp(s, "preferred") == 0)
        return 0;
    return -1;
}

static bool name_ok(const char *s)
{
    size_t n = 0;
    for (; s[n]; n++)
        if (isspace((unsigned char)s[n]) || iscntrl((unsigned char)s[n]))
            return false;
    return n <= JOB_MAX_NAME;
}

static void set_name(JobReader *jr, const FieldVal *v)
{
    char *s;
    int e = field_str(jr->x, v, &s);
    if (e < 0) {
        jr_fail(jr, e);
        return;
    }
    if (!name_ok(s)) {
        free(s);
        jr_fail(jr, field_bad(jr->x, v,
                              "must be at most %d characters without spaces or control "
                              "characters",
                              JOB_MAX_NAME));
        return;
    }
    free(jr->j.name);
    jr->j.name = s;
}

static void set_str(JobReader *jr, const FieldVal *v, char **dst)
{
    char *s;
    int e = field_str(jr->x, v, &s);
    if (e < 0) {
        jr_fail(jr, e);
        return;
    }
    free(*dst);
    *dst = s;
}

/* The job's one GPU request: a second one is an error naming both. */
static bool claim_request(JobReader *jr, const FieldVal *v)
{
    if (jr->req_field) {
        jr_fail(jr, field_bad(jr->x, v,
                              "the job already asks for '%s' on line %zu; give only one of %s",
                              jr->req_field, jr->req_line, requests));
        return false;
    }
    jr->req_field = v->name;
    jr->req_line = v->line;
    return true;
}

static void set_gpus(JobReader *jr, const FieldVal *v)
{
    uint64_t n;
    if (!claim_request(jr, v))
        return;
    int e = field_uint(jr->x, v, 0, NODE_MAX_GPUS, &n);
    if (e < 0) {
        jr_fail(jr, e);
        return;
    }
    jr->j.req = n ? REQ_GPUS : REQ_NONE;
    jr->j.gpus = (uint16_t)n;
}

/* A MIG profile must exist on some catalogue model, or no cluster could ever run it. */
static bool mig_profile_known(const char *name)
{
    for (size_t i = 0; i < catalog_count(); i++)
        if (catalog_profile_index(catalog_model(i), name) >= 0)
            return true;
    return false;
}

static void set_mig(JobReader *jr, const FieldVal *v)
{
    if (!claim_request(jr, v))
        return;
    char *s;
    int e = field_str(jr->x, v, &s);
    if (e < 0) {
        jr_fail(jr, e);
        return;
    }
    if (!mig_profile_known(s)) {
        free(s);
        jr_fail(jr, field_bad(jr->x, v,
                              "'%s' is not a MIG profile of any GPU in the catalogue "
                              "(profiles look like 1g.10gb or 3g.40gb)",
                              v->text));
        return;
    }
    jr->j.req = REQ_MIG;
    jr->j.gpus = 0;
    free(jr->j.mig);
    jr->j.mig = s;
}

static void set_gpu_memory(JobReader *jr, const FieldVal *v, bool mib_only)
{
    if (!claim_request(jr, v))
        return;
    uint64_t mib;
    int e = mib_only ? field_uint(jr->x, v, 1, UINT32_MAX, &mib)
                     : field_size(jr->x, v, 1, UINT32_MAX, &mib);
    if (e < 0) {
        jr_fail(jr, e);
        return;
    }
    jr->j.req = REQ_MEMORY;
    jr->j.gpus = 0;
    jr->j.gpu_memory_mib = mib;
}

static void set_fraction(JobReader *jr, const FieldVal *v)
{
    if (!claim_request(jr, v))
        return;
    int64_t milli;
    int e = field_fixed(jr->x, v, 3, 1, 1000, &milli);
    if (e < 0) {
        jr_fail(jr, e);
        return;
    }
    jr->j.req = REQ_FRACTION;
    jr->j.gpus = 0;
    jr->j.fraction_milli = (uint16_t)milli;
}

static void set_enum(JobReader *jr, const FieldVal *v, int (*from_name)(const char *),
                     const char *choices, uint8_t *dst)
{
    int e, val;
    if ((e = field_enum(jr->x, v, from_name, choices, &val)) < 0) {
        jr_fail(jr, e);
        return;
    }
    *dst = (uint8_t)val;
}

static void set_uint32(JobReader *jr, const FieldVal *v, uint64_t min, uint64_t max, uint32_t *dst)
{
    uint64_t n;
    int e = field_uint(jr->x, v, min, max, &n);
    if (e < 0) {
        jr_fail(jr, e);
        return;
    }
    *dst = (uint32_t)n;
}

/* A time: a duration string in YAML, decimal seconds in CSV (both exact, in ms). */
static void set_time(JobReader *jr, const FieldVal *v, bool seconds, int64_t *dst)
{
    int64_t ms;
    int e = seconds ? field_fixed(jr->x, v, 3, 0, MAX_TIME_MS, &ms) : field_duration(jr->x, v, &ms);
    if (e == 0 && ms > MAX_TIME_MS)
        e = field_bad(jr->x, v, "is too long");
    if (e < 0) {
        jr_fail(jr, e);
        return;
    }
    *dst = ms;
}

static void set_bool(JobReader *jr, const FieldVal *v, bool *dst)
{
    int e = field_bool(jr->x, v, dst);
    if (e < 0)
        jr_fail(jr, e);
}

static void set_strv(JobReader *jr, const FieldVal *v, char sep, char ***dst, size_t *n)
{
    char **s;
    size_t k;
    int e = field_strv(jr->x, v, sep, &s, &k);
    if (e < 0) {
        jr_fail(jr, e);
        return;
    }
    field_strv_free(*dst, *n);
    *dst = s;
    *n = k;
}

static void set_tiers(JobReader *jr, const FieldVal *v)
{
    uint8_t mask = 0;
    int e = field_tiers(jr->x, v, &mask);
    if (e < 0) {
        jr_fail(jr, e);
        return;
    }
    jr->j.tiers = mask;
}

static void set_milli(JobReader *jr, const FieldVal *v, int64_t max, uint32_t *dst)
{
    int64_t milli;
    int e = field_fixed(jr->x, v, 3, 0, max, &milli);
    if (e < 0) {
        jr_fail(jr, e);
        return;
    }
    *dst = (uint32_t)milli;
}

static void set_memory(JobReader *jr, const FieldVal *v, bool mib_only, uint64_t max, uint64_t *dst)
{
    uint64_t mib;
    int e = mib_only ? field_uint(jr->x, v, 0, max, &mib) : field_size(jr->x, v, 0, max, &mib);
    if (e < 0) {
        jr_fail(jr, e);
        return;
    }
    *dst = mib;
}

static void set_busy(JobReader *jr, const FieldVal *v)
{
    int64_t milli;
    int e = field_fixed(jr->x, v, 3, 0, 1000, &milli);
    if (e < 0) {
        jr_fail(jr, e);
        return;
    }
    jr->j.busy_milli = (uint16_t)milli;
}

/* YAML only: sub-mappings, command and env. */

static bool sub_map(JobReader *jr, const FieldVal *v, const char *what, const char *const *names,
                    size_t n, FieldVal *vals, bool *has)
{
    if (!field_val_is_map(v)) {
        jr_fail(jr,
                field_bad(jr->x, v, "must be a mapping (%s), not %s", what, field_val_shape(v)));
        return false;
    }
    char where[96];
    snprintf(where, sizeof(where), "%s of job '%.64s'", v->name, jr->j.name ? jr->j.name : "?");
    int e = field_collect_val(jr->x, v, where, names, n, vals, has);
    if (e < 0)
        jr_fail(jr, e);
    return true;
}

static void set_topology(JobReader *jr, const FieldVal *v)
{
    FieldVal t[TOPO_COUNT];
    bool has[TOPO_COUNT];
    if (!sub_map(jr, v, "scope and mode", topology_fields, TOPO_COUNT, t, has))
        return;
    if (has[TOPO_SCOPE])
        set_enum(jr, &t[TOPO_SCOPE], scope_from_name, scopes, &jr->j.scope);
    int mode, e;
    if (has[TOPO_MODE]) {
        e = field_enum(jr->x, &t[TOPO_MODE], mode_from_name, "required or preferred", &mode);
        if (e < 0) {
            jr_fail(jr, e);
            return;
        }
        jr->j.scope_required = mode == 1;
    }
}

static void set_checkpoint(JobReader *jr, const FieldVal *v)
{
    FieldVal c[CK_COUNT];
    bool has[CK_COUNT];
    if (!sub_map(jr, v, "interval, grace and cost", checkpoint_fields, CK_COUNT, c, has))
        return;
    if (has[CK_INTERVAL])
        set_time(jr, &c[CK_INTERVAL], false, &jr->j.checkpoint_interval_ms);
    if (has[CK_GRACE])
        set_time(jr, &c[CK_GRACE], false, &jr->j.checkpoint_grace_ms);
    if (has[CK_COST])
        set_time(jr, &c[CK_COST], false, &jr->j.checkpoint_cost_ms);
}

/* One string is a shell command line; a list is the argv itself. */
static void set_command(JobReader *jr, const FieldVal *v)
{
    if (field_val_is_seq(v)) {
        set_strv(jr, v, 0, &jr->j.command, &jr->j.n_command);
        return;
    }
    const char *s;
    int e = field_text(jr->x, v, &s);
    if (e < 0) {
        jr_fail(jr, e);
        return;
    }
    char **argv = calloc(3, sizeof(*argv));
    if (!argv) {
        jr_fail(jr, -ENOMEM);
        return;
    }
    argv[0] = strdup("/bin/sh");
    argv[1] = strdup("-c");
    argv[2] = strdup(s);
    if (!argv[0] || !argv[1] || !argv[2]) {
        field_strv_free(argv, 3);
        jr_fail(jr, -ENOMEM);
        return;
    }
    field_strv_free(jr->j.command, jr->j.n_command);
    jr->j.command = argv;
    jr->j.n_command = 3;
}

static bool env_name_ok(const char *s)
{
    if (!isalpha((unsigned char)*s) && *s != '_')
        return false;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '_')
            return false;
    return true;
}

static void set_env(JobReader *jr, const FieldVal *v)
{
    if (!field_val_is_map(v)) {
        jr_fail(jr, field_bad(jr->x, v, "must be a mapping of NAME: value, not %s",
                              field_val_shape(v)));
        return;
    }
    size_t n = field_val_count(v), k = 0;
    if (n > JOB_MAX_ENV) {
        jr_fail(jr,
                field_bad(jr->x, v, "has %zu entries; a job may set at most %d", n, JOB_MAX_ENV));
        return;
    }
    char **env = calloc(n ? n : 1, sizeof(*env));
    if (!env) {
        jr_fail(jr, -ENOMEM);
        return;
    }
    void *it = NULL;
    FieldVal e;
    size_t key_line;
    bool named;
    while (k < n && field_val_next_pair(v, &it, &e, &key_line, &named) > 0) {
        if (!named || !env_name_ok(e.name)) {
            jr_fail(jr, field_bad(jr->x, &e,
                                  "environment names are letters, digits and _, not "
                                  "starting with a digit"));
            continue;
        }
        if (!e.text) {
            jr_fail(jr, field_bad(jr->x, &e, "an environment value must be a single value, not %s",
                                  field_val_shape(&e)));
            continue;
        }
        const char *val = field_val_is_null(&e) ? "" : e.text;
        size_t len = strlen(e.name) + strlen(val) + 2;
        if (!(env[k] = malloc(len))) {
            jr_fail(jr, -ENOMEM);
            break;
        }
        snprintf(env[k++], len, "%s=%s", e.name, val);
    }
    field_strv_free(jr->j.env, jr->j.n_env);
    jr->j.env = env;
    jr->j.n_env = k;
}

/* One job mapping (YAML or JSON) into jr->j. */
static void read_job_map(JobReader *jr, const FieldVal *map, size_t line)
{
    FieldCtx *x = jr->x;
    FieldVal v[J_COUNT];
    bool has[J_COUNT];
    const char *nm = field_val_map_text(map, "name");
    if (!nm)
        nm = field_val_map_text(map, "id");
    char where[96];
    if (nm)
        snprintf(where, sizeof(where), "job '%.64s'", nm);
    else
        snprintf(where, sizeof(where), "job");
    jr_fail(jr, field_collect_val(x, map, where, job_fields, J_COUNT, v, has));
    if (has[J_NAME] && has[J_ID])
        jr_fail(jr, field_bad(x, &v[J_ID], "give the job's name or its id, not both"));
    else if (has[J_NAME] || has[J_ID])
        set_name(jr, &v[has[J_NAME] ? J_NAME : J_ID]);
    else {
        field_error(x, line, "missing field 'name' in job");
        jr_fail(jr, -EINVAL);
    }
    /* in file order, so that messages (one GPU request "already" given) follow the file */
    int order[J_COUNT], n = 0;
    for (int f = J_TEAM; f < J_COUNT; f++) {
        if (!has[f])
            continue;
        int i = n++;
        for (; i > 0 && v[order[i - 1]].line > v[f].line; i--)
            order[i] = order[i - 1];
        order[i] = f;
    }
    for (int k = 0; k < n; k++) {
        int f = order[k];
        const FieldVal *fv = &v[f];
        switch (f) {
        case J_TEAM:
            set_str(jr, fv, &jr->j.team);
            break;
        case J_PROJECT:
            set_str(jr, fv, &jr->j.project);
            break;
        case J_KIND:
            set_enum(jr, fv, job_kind_from_name, kinds, &jr->j.kind);
            break;
        case J_PRIORITY:
            set_enum(jr, fv, priority_from_name, priorities, &jr->j.priority);
            break;
        case J_WORKERS:
            set_uint32(jr, fv, 1, JOB_MAX_WORKERS, &jr->j.workers);
            break;
        case J_GPUS:
            set_gpus(jr, fv);
            break;
        case J_MIG:
            set_mig(jr, fv);
            break;
        case J_GPU_MEMORY:
            set_gpu_memory(jr, fv, false);
            break;
        case J_GPU_FRACTION:
            set_fraction(jr, fv);
            break;
        case J_GPU_MODELS:
            set_strv(jr, fv, 0, &jr->j.gpu_models, &jr->j.n_gpu_models);
            break;
        case J_TOPOLOGY:
            set_topology(jr, fv);
            break;
        case J_FABRIC:
            set_str(jr, fv, &jr->j.fabric);
            break;
        case J_PREEMPTIBLE:
            set_bool(jr, fv, &jr->j.preemptible);
            break;
        case J_CHECKPOINT:
            set_checkpoint(jr, fv);
            break;
        case J_CAPACITY:
            set_tiers(jr, fv);
            break;
        case J_COMMAND:
            set_command(jr, fv);
            break;
        case J_ENV:
            set_env(jr, fv);
            break;
        case J_DURATION_ESTIMATE:
            set_time(jr, fv, false, &jr->j.duration_estimate_ms);
            break;
        case J_MAX_WAIT:
            set_time(jr, fv, false, &jr->j.max_wait_ms);
            break;
        case J_CPUS:
            set_milli(jr, fv, MAX_CPU_MILLI, &jr->j.cpu_milli);
            break;
        case J_MEMORY: {
            uint64_t mib = 0;
            set_memory(jr, fv, false, UINT32_MAX, &mib);
            jr->j.memory_mib = (uint32_t)mib;
            break;
        }
        case J_SUBMIT:
            set_time(jr, fv, false, &jr->j.submit_ms);
            break;
        case J_DURATION:
            set_time(jr, fv, false, &jr->j.duration_ms);
            break;
        case J_BUSY:
            set_busy(jr, fv);
            break;
        case J_PEAK_MEMORY:
            set_memory(jr, fv, false, UINT64_MAX >> 20, &jr->j.peak_memory_mib);
            break;
        case J_CLASS:
            set_str(jr, fv, &jr->j.workload_class);
            break;
        }
    }
}

/* Jobs read so far and every job name seen with its line, for the duplicate check at
 * the end (the names of bad jobs too, kept in `orphans`, so that one pass reports all). */
typedef struct JobsAcc {
    FieldCtx *x;
    JobList list;
    FieldName *names;
    size_t n_names, names_cap;
    char **orphans;
    size_t n_orphans, orphans_cap;
    int r;
} JobsAcc;

/* Keep a job that read cleanly, and the name of one that did not. */
static void acc_take(JobsAcc *a, JobReader *jr, size_t name_line)
{
    const char *name = NULL;
    if (GROW(a->names, a->names_cap, a->n_names + 1) < 0)
        jr->r = -ENOMEM;
    if (jr->r < 0) {
        if (jr->r == -ENOMEM || a->r == 0)
            a->r = jr->r;
        if (jr->r != -ENOMEM && jr->j.name &&
            GROW(a->orphans, a->orphans_cap, a->n_orphans + 1) == 0) {
            name = a->orphans[a->n_orphans++] = jr->j.name;
            jr->j.name = NULL;
        }
        job_spec_free(&jr->j);
    } else if (job_list_take(&a->list, &jr->j) < 0) {
        job_spec_free(&jr->j);
        a->r = -ENOMEM;
    } else {
        name = a->list.jobs[a->list.n - 1].name;
    }
    if (name)
        a->names[a->n_names++] = (FieldName){.name = name, .line = name_line};
}

static int acc_finish(JobsAcc *a, JobList *ret)
{
    if (a->r != -ENOMEM && field_report_duplicates(a->x, a->names, a->n_names, "job") > 0)
        a->r = -EINVAL;
    free(a->names);
    field_strv_free(a->orphans, a->n_orphans);
    if (a->r == 0 && a->x->n_errors)
        a->r = -EINVAL;
    if (a->r < 0) {
        job_list_free(&a->list);
        return a->r;
    }
    *ret = a->list;
    return 0;
}

/* One job: n is the value of a YAML node or a JSON one, its line set. */
static void read_job_val(JobsAcc *a, const FieldVal *n)
{
    size_t line = n->line;
    if (!field_val_is_map(n)) {
        field_error(a->x, line, "a job must be a mapping of its fields, not %s",
                    field_val_shape(n));
        if (a->r == 0)
            a->r = -EINVAL;
        return;
    }
    JobReader jr = {.x = a->x};
    job_spec_init(&jr.j);
    read_job_map(&jr, n, line);
    FieldVal name_v = {0}, fv;
    void *it = NULL;
    size_t key_line;
    bool named;
    while (field_val_next_pair(n, &it, &fv, &key_line, &named) > 0)
        if (strcmp(fv.name, "name") == 0 || strcmp(fv.name, "id") == 0)
            name_v = fv;
    acc_take(a, &jr, name_v.line ? name_v.line : line);
}

static void read_job_node(JobsAcc *a, struct fy_node *n, size_t fallback)
{
    FieldVal v = {.line = field_node_line(n, fallback), .node = n};
    read_job_val(a, &v);
}

static int parse_jobs_yaml(const char *text, size_t len, const char *name, uint64_t max_work,
                           JobList *ret, Buf *err);

int spec_parse_jobs_yaml(const char *text, size_t len, const char *name, JobList *ret, Buf *err)
{
    return parse_jobs_yaml(text, len, name, 0, ret, err);
}

int spec_parse_jobs_yaml_body(const char *text, size_t len, const char *name, JobList *ret,
                              Buf *err)
{
    if (len > SPEC_BODY_YAML_BYTES) {
        FieldCtx x;
        field_ctx_init(&x, name, "field", err);
        field_error(&x, 0,
                    "a YAML body is at most %u KiB (this one is %zu bytes): send fewer jobs at a "
                    "time, or JSON (up to 1 MiB)",
                    SPEC_BODY_YAML_BYTES >> 10, len);
        return -EFBIG;
    }
    return parse_jobs_yaml(text, len, name, SPEC_BODY_YAML_WORK, ret, err);
}

static int parse_jobs_yaml(const char *text, size_t len, const char *name, uint64_t max_work,
                           JobList *ret, Buf *err)
{
    FieldCtx x;
    field_ctx_init(&x, name, "field", err);
    x.yaml_max_work = max_work;
    JobsAcc a = {.x = &x};
    FieldYaml y;
    int r = field_yaml_open(&y, &x, text, len);
    if (r < 0)
        return r;
    size_t docs = 0;
    while (a.r != -ENOMEM && (r = field_yaml_next(&y)) > 0) {
        struct fy_node *root = fy_document_root(y.doc);
        if (!root || field_node_is_null(root))
            continue;
        docs++;
        if (fy_node_is_sequence(root)) {
            void *it = NULL;
            struct fy_node *item;
            while (a.r != -ENOMEM && (item = fy_node_sequence_iterate(root, &it)))
                read_job_node(&a, item, field_node_line(root, 1));
        } else {
            read_job_node(&a, root, 1);
        }
    }
    field_yaml_close(&y);
    if (r < 0 && a.r != -ENOMEM)
        a.r = r;
    if (a.r == 0 && !docs && !x.n_errors) {
        field_error(&x, 1, "empty; a job file is a job (a mapping) or a list of jobs");
        a.r = -EINVAL;
    }
    return acc_finish(&a, ret);
}

int spec_parse_jobs_json(const char *text, size_t len, const char *name, JobList *ret, Buf *err)
{
    FieldCtx x;
    field_ctx_init(&x, name, "field", err);
    JobsAcc a = {.x = &x};
    FieldJsonDoc d;
    int r = field_json_parse(&x, text, len, &d);
    if (r < 0)
        return r;
    const FieldJson *root = &d.root;
    if (root->type == JSON_NULL) {
        field_error(&x, 1, "empty; a job file is a job (a mapping) or a list of jobs");
        a.r = -EINVAL;
    } else if (root->type == JSON_ARRAY) {
        for (size_t i = 0; a.r != -ENOMEM && i < root->n_items; i++) {
            FieldVal v = {.line = root->items[i].line, .json = &root->items[i]};
            read_job_val(&a, &v);
        }
    } else {
        FieldVal v = {.line = root->line, .json = root, .text = root->text};
        read_job_val(&a, &v);
    }
    r = acc_finish(&a, ret);
    field_json_free(&d);
    return r;
}

/* CSV. */

static void read_job_row(JobReader *jr, const CsvReader *csv, const int *col)
{
    for (int c = 0; c < C_COUNT; c++) {
        if (col[c] < 0)
            continue;
        const char *cell = csv->fields[col[c]];
        while (isspace((unsigned char)*cell))
            cell++;
        if (!*cell) {
            if (c == C_ID) {
                field_error(jr->x, csv->line, "column 'id': every job needs an id");
                jr_fail(jr, -EINVAL);
            }
            continue;
        }
        FieldVal fv = {.name = job_columns[c], .line = csv->line, .text = cell};
        FieldVal *v = &fv;
        switch (c) {
        case C_ID:
            set_name(jr, v);
            break;
        case C_SUBMIT_S:
            set_time(jr, v, true, &jr->j.submit_ms);
            break;
        case C_DURATION_S:
            set_time(jr, v, true, &jr->j.duration_ms);
            break;
        case C_TEAM:
            set_str(jr, v, &jr->j.team);
            break;
        case C_PROJECT:
            set_str(jr, v, &jr->j.project);
            break;
        case C_KIND:
            set_enum(jr, v, job_kind_from_name, kinds, &jr->j.kind);
            break;
        case C_PRIORITY:
            set_enum(jr, v, priority_from_name, priorities, &jr->j.priority);
            break;
        case C_WORKERS:
            set_uint32(jr, v, 1, JOB_MAX_WORKERS, &jr->j.workers);
            break;
        case C_GPUS:
            set_gpus(jr, v);
            break;
        case C_MIG:
            set_mig(jr, v);
            break;
        case C_GPU_MEMORY_MIB:
            set_gpu_memory(jr, v, true);
            break;
        case C_GPU_FRACTION:
            set_fraction(jr, v);
            break;
        case C_GPU_MODEL:
            set_strv(jr, v, '|', &jr->j.gpu_models, &jr->j.n_gpu_models);
            break;
        case C_TOPOLOGY:
            set_enum(jr, v, scope_from_name, scopes, &jr->j.scope);
            break;
        case C_TOPOLOGY_REQUIRED:
            set_bool(jr, v, &jr->j.scope_required);
            break;
        case C_PREEMPTIBLE:
            set_bool(jr, v, &jr->j.preemptible);
            break;
        case C_CHECKPOINT_INTERVAL_S:
            set_time(jr, v, true, &jr->j.checkpoint_interval_ms);
            break;
        case C_CHECKPOINT_GRACE_S:
            set_time(jr, v, true, &jr->j.checkpoint_grace_ms);
            break;
        case C_CHECKPOINT_COST_S:
            set_time(jr, v, true, &jr->j.checkpoint_cost_ms);
            break;
        case C_BUSY:
            set_busy(jr, v);
            break;
        case C_TIERS:
            set_tiers(jr, v);
            break;
        case C_PEAK_MEMORY_MIB:
            set_memory(jr, v, true, UINT64_MAX >> 20, &jr->j.peak_memory_mib);
            break;
        case C_CLASS:
            set_str(jr, v, &jr->j.workload_class);
            break;
        case C_CPU_MILLI:
            set_uint32(jr, v, 0, UINT32_MAX, &jr->j.cpu_milli);
            break;
        case C_MEMORY_MIB:
            set_uint32(jr, v, 0, UINT32_MAX, &jr->j.memory_mib);
            break;
        case C_DURATION_ESTIMATE_S:
            set_time(jr, v, true, &jr->j.duration_estimate_ms);
            break;
        case C_FABRIC:
            set_str(jr, v, &jr->j.fabric);
            break;
        case C_MAX_WAIT_S:
            set_time(jr, v, true, &jr->j.max_wait_ms);
            break;
        }
    }
}

static int read_job_header(FieldCtx *x, const CsvReader *csv, int *col)
{
    int r = 0;
    for (int c = 0; c < C_COUNT; c++)
        col[c] = -1;
    for (size_t f = 0; f < csv->nfields; f++) {
        char name[64];
        const char *s = csv->fields[f];
        while (isspace((unsigned char)*s))
            s++;
        size_t n = strlen(s);
        while (n && isspace((unsigned char)s[n - 1]))
            n--;
        snprintf(name, sizeof(name), "%.*s", (int)MIN(n, sizeof(name) - 1), s);
        int c = 0;
        while (c < C_COUNT && strcasecmp(job_columns[c], name) != 0)
            c++;
        if (c == C_COUNT) {
            field_unknown(x, csv->line, name, "the job CSV header", job_columns, C_COUNT);
            r = -EINVAL;
        } else if (col[c] >= 0) {
            field_error(x, csv->line, "column '%s' appears twice", job_columns[c]);
            r = -EINVAL;
        } else {
            col[c] = (int)f;
        }
    }
    if (col[C_ID] < 0) {
        field_error(x, csv->line, "missing column 'id'");
        r = -EINVAL;
    }
    return r;
}

int spec_parse_jobs_csv(const char *text, size_t len, const char *name, JobList *ret, Buf *err)
{
    FieldCtx x;
    field_ctx_init(&x, name, "column", err);
    JobsAcc a = {.x = &x};
    CsvReader csv;
    csv_init(&csv, text, len);
    int col[C_COUNT];
    int r = csv_next(&csv);
    size_t width = csv.nfields;
    if (r == -EINVAL) {
        field_error(&x, csv.line, "unterminated quote, or text after a closing quote");
        a.r = r;
    } else if (r == 0) {
        field_error(&x, 1, "empty; a job CSV starts with a header naming its columns");
        a.r = -EINVAL;
    } else if (r > 0 && read_job_header(&x, &csv, col) < 0) {
        a.r = -EINVAL; /* the rows cannot be read without their columns */
    }
    bool header_ok = r > 0 && a.r == 0;
    while (header_ok && a.r != -ENOMEM && (r = csv_next(&csv)) > 0) {
        /* a row of another width would put values under the wrong names */
        if (csv.nfields != width) {
            field_error(&x, csv.line, "%zu cells; the header has %zu", csv.nfields, width);
            continue;
        }
        JobReader jr = {.x = &x};
        job_spec_init(&jr.j);
        read_job_row(&jr, &csv, col);
        acc_take(&a, &jr, csv.line);
    }
    if (r == -ENOMEM) {
        a.r = r;
    } else if (r < 0 && header_ok) {
        field_error(&x, csv.line, "unterminated quote, or text after a closing quote");
        if (a.r == 0)
            a.r = -EINVAL;
    }
    csv_free(&csv);
    return acc_finish(&a, ret);
}
