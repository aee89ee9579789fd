/* tracegen.c: the workload generator. A mix file (docs/trace-gen.md) is read with the
 * spec readers' field helpers, so its mistakes read like theirs (file:line: field 'x':
 * ...). Generation draws every number from util/rng: each entry has its own stream,
 * seeded from the seed and the entry's name, and draws job by job (arrival, then what
 * the job is), so entries do not disturb one another and a longer horizon only adds
 * jobs at the end. Times are whole seconds, estimates whole minutes. The CSV writer
 * next to it writes what spec_parse_jobs_csv reads back. */
#include "sim/tracegen.h"

#include "core/catalog.h"
#include "sim/sim.h"
#include "spec/field.h"
#include "util/file.h"
#include "util/macro.h"
#include "util/rng.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIX_MAX_NAME        240 /* so that "<name>-<n>" stays within a job id's 253 */
#define MIX_MAX_RATE_MILLI  (INT64_C(100000) * 1000) /* 100,000 jobs an hour */
#define MIX_MAX_PARAMS      (INT64_C(100000) * 1000) /* 100,000 billion parameters */
#define MIX_MAX_BPP         (INT64_C(16) * 1000)     /* 16 bytes a parameter */
#define MIX_MAX_CPU_MILLI   (INT64_C(1000) * 1000)   /* 1,000 cores */
#define MIX_MAX_SCALE_MILLI (INT64_C(1000) * 1000)   /* duration_scale up to 1000 */
#define MIX_MAX_TIME_MS     (INT64_C(1) << 52)       /* as the job readers allow */
#define MIN_DURATION_MS     1000                     /* every job runs at least 1 s */
#define ESTIMATE_SIGMA      0.5                      /* of ln(estimate / true) */
#define PHILLY_MAX_GPUS     4096u

/* ---- the mix's fields ---- */

enum {
    F_NAME,
    F_TEAM,
    F_PROJECT,
    F_PRIORITY,
    F_RATE,
    F_LIFETIME,
    F_DURATION,
    F_MODEL_PARAMS_B,
    F_BYTES_PER_PARAM,
    F_KV_CACHE,
    F_PEAK_MEMORY_OVERRUN,
    F_PHILLY,
    F_MIN_GPUS,
    F_MAX_GPUS,
    F_DURATION_SCALE,
    F_MAX_DURATION,
    F_GPUS,
    F_GPU_MEMORY,
    F_GPU_FRACTION,
    F_MIG,
    F_BUSY,
    F_PREEMPTIBLE,
    F_CHECKPOINT,
    F_GPU_MODELS,
    F_CPUS,
    F_MEMORY,
    F_CPUS_PER_GPU,
    F_MEMORY_PER_GPU,
    F_FROM,
    F_UNTIL,
    F_COUNT
};
static const char *const field_names[F_COUNT] = {
    "name",
    "team",
    "project",
    "priority",
    "rate_per_hour",
    "lifetime",
    "duration",
    "model_params_b",
    "bytes_per_param",
    "kv_cache",
    "peak_memory_overrun",
    "philly",
    "min_gpus",
    "max_gpus",
    "duration_scale",
    "max_duration",
    "gpus",
    "gpu_memory",
    "gpu_fraction",
    "mig",
    "busy",
    "preemptible",
    "checkpoint",
    "gpu_models",
    "cpus",
    "memory",
    "cpus_per_gpu",
    "memory_per_gpu",
    "from",
    "until",
};

static const uint8_t inference_fields[] = {
    F_NAME,           F_TEAM,
    F_PROJECT,        F_PRIORITY,
    F_RATE,           F_LIFETIME,
    F_MODEL_PARAMS_B, F_BYTES_PER_PARAM,
    F_KV_CACHE,       F_PEAK_MEMORY_OVERRUN,
    F_BUSY,           F_GPU_MODELS,
    F_CPUS,           F_MEMORY,
    F_FROM,           F_UNTIL,
};
static const uint8_t training_fields[] = {
    F_NAME,     F_TEAM,       F_PROJECT,        F_PRIORITY,       F_RATE,        F_PHILLY,
    F_MIN_GPUS, F_MAX_GPUS,   F_DURATION_SCALE, F_MAX_DURATION,   F_PREEMPTIBLE, F_CHECKPOINT,
    F_BUSY,     F_GPU_MODELS, F_CPUS_PER_GPU,   F_MEMORY_PER_GPU, F_FROM,        F_UNTIL,
};
static const uint8_t batch_fields[] = {
    F_NAME,       F_TEAM,       F_PROJECT,      F_PRIORITY, F_RATE, F_DURATION,
    F_GPUS,       F_GPU_MEMORY, F_GPU_FRACTION, F_MIG,      F_BUSY, F_PREEMPTIBLE,
    F_CHECKPOINT, F_GPU_MODELS, F_CPUS,         F_MEMORY,   F_FROM, F_UNTIL,
};
static const uint8_t interactive_fields[] = {
    F_NAME,         F_TEAM, F_PROJECT, F_PRIORITY,   F_RATE, F_DURATION, F_GPUS, F_GPU_MEMORY,
    F_GPU_FRACTION, F_MIG,  F_BUSY,    F_GPU_MODELS, F_CPUS, F_MEMORY,   F_FROM, F_UNTIL,
};

typedef struct Section {
    const char *name; /* the mix's key, and the kind's name */
    uint8_t kind;
    const uint8_t *fields;
    size_t n_fields;
    uint8_t default_priority;
    uint8_t priorities; /* mask of 1 << Priority allowed */
    const char *priority_choices;
} Section;

#define PRIO_BIT(p) (1u << (p))
static const Section sections[] = {
    {"inference", KIND_INFERENCE, inference_fields, ARRAY_SIZE(inference_fields), PRIO_PRODUCTION,
     PRIO_BIT(PRIO_PRODUCTION) | PRIO_BIT(PRIO_HIGH), "production or high"},
    {"training", KIND_TRAINING, training_fields, ARRAY_SIZE(training_fields), PRIO_NORMAL,
     PRIO_BIT(PRIO_HIGH) | PRIO_BIT(PRIO_NORMAL) | PRIO_BIT(PRIO_LOW), "high, normal or low"},
    {"batch", KIND_BATCH, batch_fields, ARRAY_SIZE(batch_fields), PRIO_LOW,
     PRIO_BIT(PRIO_HIGH) | PRIO_BIT(PRIO_NORMAL) | PRIO_BIT(PRIO_LOW), "high, normal or low"},
    {"interactive", KIND_INTERACTIVE, interactive_fields, ARRAY_SIZE(interactive_fields), PRIO_HIGH,
     PRIO_BIT(PRIO_HIGH) | PRIO_BIT(PRIO_NORMAL) | PRIO_BIT(PRIO_LOW), "high, normal or low"},
};

enum { TOP_TEAMS, TOP_INFERENCE, TOP_TRAINING, TOP_BATCH, TOP_INTERACTIVE, TOP_COUNT };
static const char *const top_fields[TOP_COUNT] = {"teams", "inference", "training", "batch",
                                                  "interactive"};
enum { TEAM_NAME, TEAM_PROJECTS, TEAM_COUNT };
static const char *const team_fields[TEAM_COUNT] = {"name", "projects"};
enum { T_MEAN, T_MIN, T_MAX, T_COUNT };
static const char *const time_fields[T_COUNT] = {"mean", "min", "max"};
enum { CK_INTERVAL, CK_GRACE, CK_COST, CK_COUNT };
static const char *const checkpoint_fields[CK_COUNT] = {"interval", "grace", "cost"};

static const char *const gpu_asks = "gpus, gpu_memory, gpu_fraction or mig";

static void entry_free(TraceMixEntry *e)
{
    free(e->name);
    free(e->project);
    field_strv_free(e->gpu_models, e->n_gpu_models);
    free(e->mig);
    free(e->philly);
}

void tracegen_mix_free(TraceMix *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->n_teams; i++) {
        free(m->teams[i].name);
        field_strv_free(m->teams[i].projects, m->teams[i].n_projects);
    }
    free(m->teams);
    for (size_t i = 0; i < m->n_entries; i++)
        entry_free(&m->entries[i]);
    free(m->entries);
    free(m->file);
    *m = (TraceMix){0};
}

/* The reader's state: the mix being built, and the first error kind (-EINVAL once a
 * mistake was reported, -ENOMEM wins). */
typedef struct MixReader {
    FieldCtx *x;
    TraceMix mix;
    size_t teams_cap, entries_cap;
    FieldName *names; /* every entry's name and line, for the duplicate check */
    size_t n_names, names_cap;
    int r;
} MixReader;

static void fail(MixReader *mr, int e)
{
    if (e < 0 && (e == -ENOMEM || mr->r == 0))
        mr->r = e;
}

static bool name_ok(const char *s, size_t max)
{
    size_t n = 0;
    for (; s[n]; n++)
        if (isspace((unsigned char)s[n]) || iscntrl((unsigned char)s[n]))
            return false;
    return n > 0 && n <= max;
}

/* A sub-mapping's fields; false (reported) when the value is not a mapping. */
static bool sub_map(MixReader *mr, const FieldVal *v, const char *what, const char *const *names,
                    size_t n, FieldVal *vals, bool *has, const char *entry)
{
    if (!v->node || !fy_node_is_mapping(v->node)) {
        fail(mr, field_bad(mr->x, v, "must be a mapping (%s), not %s", what,
                           field_node_shape(v->node)));
        return false;
    }
    char where[96];
    snprintf(where, sizeof(where), "%s of '%.64s'", v->name, entry);
    fail(mr, field_collect(mr->x, v->node, v->line, where, names, n, vals, has));
    return true;
}

/* ---- teams ---- */

static int read_projects(MixReader *mr, const FieldVal *v, TraceMixTeam *t)
{
    int r = field_strv(mr->x, v, 0, &t->projects, &t->n_projects);
    if (r < 0)
        return r;
    for (size_t i = 0; i < t->n_projects; i++)
        for (size_t k = 0; k < i; k++)
            if (strcmp(t->projects[i], t->projects[k]) == 0)
                return field_bad(mr->x, v, "project '%s' of team '%s' is listed twice",
                                 t->projects[i], t->name);
    return 0;
}

static int team_item(FieldCtx *x, const FieldVal *item, void *ud)
{
    MixReader *mr = ud;
    TraceMixTeam t = {.line = item->line};
    int r;
    if (item->node && fy_node_is_mapping(item->node)) {
        FieldVal v[TEAM_COUNT];
        bool has[TEAM_COUNT];
        r = field_collect(x, item->node, item->line, "team", team_fields, TEAM_COUNT, v, has);
        if (r == 0 && !has[TEAM_NAME]) {
            field_error(x, item->line, "missing field 'name' in team");
            r = -EINVAL;
        }
        if (r == 0)
            r = field_str(x, &v[TEAM_NAME], &t.name);
        if (r == 0 && has[TEAM_PROJECTS])
            r = read_projects(mr, &v[TEAM_PROJECTS], &t);
    } else {
        FieldVal v = *item;
        v.name = "teams";
        r = field_str(x, &v, &t.name);
    }
    if (r == 0 && GROW(mr->mix.teams, mr->teams_cap, mr->mix.n_teams + 1) < 0)
        r = -ENOMEM;
    if (r < 0) {
        free(t.name);
        field_strv_free(t.projects, t.n_projects);
        fail(mr, r);
        return r == -ENOMEM ? r : 0; /* go on to the next team */
    }
    mr->mix.teams[mr->mix.n_teams++] = t;
    return 0;
}

static void read_teams(MixReader *mr, const FieldVal *v)
{
    if (!v->node || !fy_node_is_sequence(v->node)) {
        fail(mr, field_bad(mr->x, v, "must be a list of team names (or {name, projects}), not %s",
                           field_node_shape(v->node)));
        return;
    }
    fail(mr, field_each(mr->x, v, team_item, mr));
    for (size_t i = 0; i < mr->mix.n_teams; i++)
        for (size_t k = 0; k < i; k++)
            if (strcmp(mr->mix.teams[i].name, mr->mix.teams[k].name) == 0) {
                field_error(mr->x, mr->mix.teams[i].line, "duplicate team '%s' (first on line %zu)",
                            mr->mix.teams[i].name, mr->mix.teams[k].line);
                fail(mr, -EINVAL);
                break;
            }
}

static int team_index(const TraceMix *m, const char *name)
{
    for (size_t i = 0; i < m->n_teams; i++)
        if (strcmp(m->teams[i].name, name) == 0)
            return (int)i;
    return -1;
}

/* "search, ads, research" (shortened when long), for messages. */
static void list_names(Buf *b, char *const *names, size_t stride, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (b->len > 200) {
            buf_puts(b, ", ...");
            return;
        }
        if (i)
            buf_puts(b, ", ");
        buf_puts(b, *(char *const *)((const char *)names + i * stride));
    }
}

/* ---- one entry ---- */

typedef struct EntryReader {
    MixReader *mr;
    const Section *s;
    TraceMixEntry e;
    const char *ask_field; /* the GPU request given, or NULL */
    size_t ask_line;
    int r;
} EntryReader;

static void efail(EntryReader *er, int e)
{
    if (e < 0 && (e == -ENOMEM || er->r == 0))
        er->r = e;
}

static void read_time(EntryReader *er, const FieldVal *v, TraceMixTime *t)
{
    FieldCtx *x = er->mr->x;
    *t = (TraceMixTime){.min_ms = MIN_DURATION_MS, .max_ms = INT64_MAX};
    if (v->text) { /* a bare duration is the mean, unclipped */
        int e = field_duration(x, v, &t->mean_ms);
        if (e == 0 && t->mean_ms <= 0)
            e = field_bad(x, v, "must be longer than 0s");
        efail(er, e);
        return;
    }
    FieldVal tv[T_COUNT];
    bool has[T_COUNT];
    if (!sub_map(er->mr, v, "mean, min and max", time_fields, T_COUNT, tv, has, er->e.name)) {
        efail(er, -EINVAL);
        return;
    }
    int e = 0;
    if (!has[T_MEAN]) {
        field_error(x, v->line, "missing field 'mean' in %s of '%s'", v->name, er->e.name);
        e = -EINVAL;
    } else if ((e = field_duration(x, &tv[T_MEAN], &t->mean_ms)) == 0 && t->mean_ms <= 0) {
        e = field_bad(x, &tv[T_MEAN], "must be longer than 0s");
    }
    efail(er, e);
    int64_t ms;
    if (has[T_MIN] && (e = field_duration(x, &tv[T_MIN], &ms)) == 0)
        t->min_ms = MAX(ms, MIN_DURATION_MS);
    efail(er, e);
    e = 0;
    if (has[T_MAX] && (e = field_duration(x, &tv[T_MAX], &ms)) == 0) {
        if (ms < t->min_ms)
            e = field_bad(x, &tv[T_MAX], "must be at least the minimum (%s, and never under 1s)",
                          has[T_MIN] ? tv[T_MIN].text : "1s");
        else
            t->max_ms = ms;
    }
    efail(er, e);
}

static void read_checkpoint(EntryReader *er, const FieldVal *v)
{
    FieldVal c[CK_COUNT];
    bool has[CK_COUNT];
    if (!sub_map(er->mr, v, "interval, grace and cost", checkpoint_fields, CK_COUNT, c, has,
                 er->e.name)) {
        efail(er, -EINVAL);
        return;
    }
    int64_t *dst[CK_COUNT] = {&er->e.checkpoint_interval_ms, &er->e.checkpoint_grace_ms,
                              &er->e.checkpoint_cost_ms};
    for (int i = 0; i < CK_COUNT; i++) {
        if (!has[i])
            continue;
        int e = field_duration(er->mr->x, &c[i], dst[i]);
        if (e == 0 && *dst[i] > MIX_MAX_TIME_MS)
            e = field_bad(er->mr->x, &c[i], "is too long");
        efail(er, e);
    }
}

static bool mig_profile_known(const char *name)
{
    for (size_t i = 0; i < catalog_count(); i++)
        if (catalog_profile_index(catalog_model(i), name) >= 0)
            return true;
    return false;
}

static void read_ask(EntryReader *er, int f, const FieldVal *v)
{
    FieldCtx *x = er->mr->x;
    TraceMixEntry *e = &er->e;
    if (er->ask_field) {
        efail(er,
              field_bad(x, v, "the entry already asks for '%s' on line %zu; give only one of %s",
                        er->ask_field, er->ask_line, gpu_asks));
        return;
    }
    er->ask_field = v->name;
    er->ask_line = v->line;
    int r = 0;
    uint64_t n;
    int64_t milli;
    switch (f) {
    case F_GPUS:
        if ((r = field_uint(x, v, 1, NODE_MAX_GPUS, &n)) == 0) {
            e->req = REQ_GPUS;
            e->gpus = (uint16_t)n;
        }
        break;
    case F_GPU_MEMORY:
        if ((r = field_size(x, v, 1, UINT32_MAX, &n)) == 0) {
            e->req = REQ_MEMORY;
            e->gpu_memory_mib = n;
        }
        break;
    case F_GPU_FRACTION:
        if ((r = field_fixed(x, v, 3, 1, 1000, &milli)) == 0) {
            e->req = REQ_FRACTION;
            e->fraction_milli = (uint16_t)milli;
        }
        break;
    case F_MIG:
        if ((r = field_str(x, v, &e->mig)) == 0) {
            e->req = REQ_MIG;
            if (!mig_profile_known(e->mig))
                r = field_bad(x, v,
                              "'%s' is not a MIG profile of any GPU in the catalogue "
                              "(profiles look like 1g.10gb or 3g.40gb)",
                              e->mig);
        }
        break;
    }
    efail(er, r);
}

/* The entry's team; false (reported) when it is not one of the mix's. */
static bool read_team(EntryReader *er, const FieldVal *v)
{
    FieldCtx *x = er->mr->x;
    const TraceMix *m = &er->mr->mix;
    const char *s;
    int r = field_text(x, v, &s);
    if (r < 0) {
        efail(er, r);
        return false;
    }
    int t = team_index(m, s);
    if (t < 0) {
        Buf known = {0};
        if (m->n_teams) /* &m->teams[0] of no teams is arithmetic on NULL */
            list_names(&known, &m->teams[0].name, sizeof(m->teams[0]), m->n_teams);
        efail(er, field_bad(x, v, "'%s' is not one of the mix's teams (%s)", s,
                            m->n_teams ? buf_str(&known) : "none are listed under 'teams'"));
        buf_free(&known);
        return false;
    }
    er->e.team = (size_t)t;
    return true;
}

static void read_project(EntryReader *er, const FieldVal *v, bool team_ok)
{
    FieldCtx *x = er->mr->x;
    int r = field_str(x, v, &er->e.project);
    if (r < 0 || !team_ok) {
        efail(er, r);
        return;
    }
    const TraceMixTeam *t = &er->mr->mix.teams[er->e.team];
    for (size_t i = 0; i < t->n_projects; i++)
        if (strcmp(t->projects[i], er->e.project) == 0)
            return;
    Buf known = {0};
    list_names(&known, t->projects, sizeof(char *), t->n_projects);
    if (t->n_projects)
        r = field_bad(x, v, "'%s' is not a project of team '%s' (%s)", er->e.project, t->name,
                      buf_str(&known));
    else
        r = field_bad(x, v, "team '%s' lists no projects; give them as {name: %s, projects: [...]}",
                      t->name, t->name);
    buf_free(&known);
    efail(er, r);
}

static void read_priority(EntryReader *er, const FieldVal *v)
{
    int p;
    int r = field_enum(er->mr->x, v, priority_from_name, er->s->priority_choices, &p);
    if (r == 0 && !(er->s->priorities & PRIO_BIT(p)))
        r = field_bad(er->mr->x, v, "must be %s for %s, not '%s'", er->s->priority_choices,
                      er->s->name, v->text);
    if (r == 0)
        er->e.priority = (uint8_t)p;
    efail(er, r);
}

static void read_fixed(EntryReader *er, const FieldVal *v, int64_t min, int64_t max, int64_t *dst)
{
    efail(er, field_fixed(er->mr->x, v, 3, min, max, dst));
}

/* The fields of one entry, in file order where order matters (the GPU request). */
static void read_entry_fields(EntryReader *er, const FieldVal *v, const bool *has, size_t line)
{
    FieldCtx *x = er->mr->x;
    TraceMixEntry *e = &er->e;
    const Section *s = er->s;
    int64_t milli = 0;
    uint64_t n = 0;
    bool team_ok = false;
    if (!has[F_TEAM]) {
        field_error(x, line, "missing field 'team' in %s entry '%s'", s->name, e->name);
        efail(er, -EINVAL);
    } else {
        team_ok = read_team(er, &v[F_TEAM]);
    }
    if (has[F_PROJECT])
        read_project(er, &v[F_PROJECT], team_ok);
    if (has[F_PRIORITY])
        read_priority(er, &v[F_PRIORITY]);
    if (!has[F_RATE]) {
        field_error(x, line, "missing field 'rate_per_hour' in %s entry '%s'", s->name, e->name);
        efail(er, -EINVAL);
    } else {
        read_fixed(er, &v[F_RATE], 0, MIX_MAX_RATE_MILLI, &e->rate_milli_per_hour);
    }
    if (has[F_FROM])
        efail(er, field_duration(x, &v[F_FROM], &e->from_ms));
    if (has[F_UNTIL]) {
        int r = field_duration(x, &v[F_UNTIL], &e->until_ms);
        if (r == 0 && e->until_ms <= e->from_ms)
            r = field_bad(x, &v[F_UNTIL], "must be later than from (%s)",
                          has[F_FROM] ? v[F_FROM].text : "0");
        efail(er, r);
    }
    int time_field = s->kind == KIND_INFERENCE ? F_LIFETIME : F_DURATION;
    if (s->kind != KIND_TRAINING) {
        if (has[time_field]) {
            read_time(er, &v[time_field], &e->time);
        } else {
            field_error(x, line, "missing field '%s' in %s entry '%s'", field_names[time_field],
                        s->name, e->name);
            efail(er, -EINVAL);
        }
    }
    if (has[F_BUSY]) {
        read_fixed(er, &v[F_BUSY], 0, 1000, &milli);
        e->busy_milli = (uint16_t)milli;
    }
    if (has[F_GPU_MODELS])
        efail(er, field_strv(x, &v[F_GPU_MODELS], 0, &e->gpu_models, &e->n_gpu_models));
    int cpus = s->kind == KIND_TRAINING ? F_CPUS_PER_GPU : F_CPUS;
    int mem = s->kind == KIND_TRAINING ? F_MEMORY_PER_GPU : F_MEMORY;
    uint64_t max_mib = s->kind == KIND_TRAINING ? UINT32_MAX / NODE_MAX_GPUS : UINT32_MAX;
    if (has[cpus]) {
        read_fixed(er, &v[cpus], 0, MIX_MAX_CPU_MILLI, &milli);
        e->cpu_milli = (uint32_t)milli;
    }
    if (has[mem])
        efail(er, field_size(x, &v[mem], 0, max_mib, &e->memory_mib));
    if (has[F_PREEMPTIBLE])
        efail(er, field_bool(x, &v[F_PREEMPTIBLE], &e->preemptible));
    if (has[F_CHECKPOINT])
        read_checkpoint(er, &v[F_CHECKPOINT]);

    /* the GPU request: batch and interactive name exactly one, in file order */
    if (s->kind == KIND_BATCH || s->kind == KIND_INTERACTIVE) {
        int asks[4], k = 0;
        for (int f = F_GPUS; f <= F_MIG; f++) {
            if (!has[f])
                continue;
            int i = k++;
            for (; i > 0 && v[asks[i - 1]].line > v[f].line; i--)
                asks[i] = asks[i - 1];
            asks[i] = f;
        }
        for (int i = 0; i < k; i++)
            read_ask(er, asks[i], &v[asks[i]]);
        if (!k) {
            field_error(x, line, "missing GPU request in %s entry '%s': give one of %s", s->name,
                        e->name, gpu_asks);
            efail(er, -EINVAL);
        }
    }

    if (s->kind == KIND_INFERENCE) {
        e->req = REQ_MEMORY;
        if (!has[F_MODEL_PARAMS_B]) {
            field_error(x, line, "missing field 'model_params_b' in inference entry '%s'", e->name);
            efail(er, -EINVAL);
        } else {
            read_fixed(er, &v[F_MODEL_PARAMS_B], 1, MIX_MAX_PARAMS, &e->params_milli_b);
        }
        if (has[F_BYTES_PER_PARAM])
            read_fixed(er, &v[F_BYTES_PER_PARAM], 1, MIX_MAX_BPP, &e->bytes_per_param_milli);
        if (has[F_KV_CACHE])
            efail(er, field_size(x, &v[F_KV_CACHE], 0, UINT32_MAX, &e->kv_cache_mib));
        if (has[F_PEAK_MEMORY_OVERRUN]) {
            read_fixed(er, &v[F_PEAK_MEMORY_OVERRUN], 0, 1000, &milli);
            e->overrun_milli = (uint16_t)milli;
            e->has_overrun = true;
        }
        if (er->r == 0) {
            e->gpu_memory_mib = tracegen_model_memory_mib(
                e->params_milli_b, e->bytes_per_param_milli, e->kv_cache_mib);
            /* the overrun's peak (up to 1.4 x) must fit the job CSV's columns too */
            if (e->gpu_memory_mib > UINT32_MAX / 2)
                efail(er, field_bad(x, &v[F_MODEL_PARAMS_B],
                                    "a model this size needs %" PRIu64 " MiB, more than any GPU",
                                    e->gpu_memory_mib));
        }
    }

    if (s->kind == KIND_TRAINING) {
        e->req = REQ_GPUS;
        if (has[F_PHILLY]) {
            efail(er, field_str(x, &v[F_PHILLY], &e->philly));
            e->philly_line = v[F_PHILLY].line;
        } else {
            e->philly = strdup(TRACEGEN_PHILLY_DEFAULT);
            e->philly_line = line;
            if (!e->philly)
                efail(er, -ENOMEM);
        }
        int r = 0;
        if (has[F_MIN_GPUS] && (r = field_uint(x, &v[F_MIN_GPUS], 1, PHILLY_MAX_GPUS, &n)) == 0)
            e->min_gpus = (uint32_t)n;
        efail(er, r);
        if (has[F_MAX_GPUS] && (r = field_uint(x, &v[F_MAX_GPUS], 1, PHILLY_MAX_GPUS, &n)) == 0) {
            e->max_gpus = (uint32_t)n;
            if (e->max_gpus < e->min_gpus)
                r = field_bad(x, &v[F_MAX_GPUS], "must be at least min_gpus (%" PRIu32 ")",
                              e->min_gpus);
        }
        efail(er, r);
        if (has[F_DURATION_SCALE])
            read_fixed(er, &v[F_DURATION_SCALE], 1, MIX_MAX_SCALE_MILLI, &e->duration_scale_milli);
        if (has[F_MAX_DURATION]) {
            r = field_duration(x, &v[F_MAX_DURATION], &e->max_duration_ms);
            if (r == 0 && e->max_duration_ms < MIN_DURATION_MS)
                r = field_bad(x, &v[F_MAX_DURATION], "must be at least 1s");
            efail(er, r);
        }
    }
}

static void push_name(MixReader *mr, const char *name, size_t line)
{
    if (GROW(mr->names, mr->names_cap, mr->n_names + 1) < 0) {
        fail(mr, -ENOMEM);
        return;
    }
    mr->names[mr->n_names++] = (FieldName){.name = name, .line = line};
}

static void read_entry(MixReader *mr, const Section *s, struct fy_node *map, size_t line)
{
    FieldCtx *x = mr->x;
    if (!fy_node_is_mapping(map)) {
        field_error(x, line, "a %s entry must be a mapping of its fields, not %s", s->name,
                    field_node_shape(map));
        fail(mr, -EINVAL);
        return;
    }
    const char *names[F_COUNT];
    FieldVal vals[F_COUNT], v[F_COUNT];
    bool has_local[F_COUNT], has[F_COUNT] = {0};
    for (size_t i = 0; i < s->n_fields; i++)
        names[i] = field_names[s->fields[i]];
    const char *nm = field_map_text(map, "name");
    char where[96];
    snprintf(where, sizeof(where), "%s entry '%.64s'", s->name, nm ? nm : "?");
    EntryReader er = {.mr = mr, .s = s};
    er.e = (TraceMixEntry){
        .line = line,
        .kind = s->kind,
        .priority = s->default_priority,
        .busy_milli = BUSY_ALL,
        .bytes_per_param_milli = 2000,
        .min_gpus = 1,
        .max_gpus = PHILLY_MAX_GPUS,
        .duration_scale_milli = 1000,
        .max_duration_ms = INT64_MAX,
        .until_ms = INT64_MAX,
    };
    efail(&er, field_collect(x, map, line, where, names, s->n_fields, vals, has_local));
    for (size_t i = 0; i < s->n_fields; i++) {
        v[s->fields[i]] = vals[i];
        has[s->fields[i]] = has_local[i];
    }
    if (!has[F_NAME]) {
        field_error(x, line, "missing field 'name' in %s entry", s->name);
        efail(&er, -EINVAL);
        er.e.name = strdup("?");
        if (!er.e.name)
            efail(&er, -ENOMEM);
    } else {
        int r = field_str(x, &v[F_NAME], &er.e.name);
        if (r == 0 && !name_ok(er.e.name, MIX_MAX_NAME))
            r = field_bad(x, &v[F_NAME],
                          "must be at most %d characters without spaces or control characters",
                          MIX_MAX_NAME);
        if (r == 0)
            push_name(mr, v[F_NAME].text, v[F_NAME].line);
        efail(&er, r);
        if (!er.e.name) {
            er.e.name = strdup("?");
            if (!er.e.name)
                efail(&er, -ENOMEM);
        }
    }
    if (er.r != -ENOMEM && er.e.name)
        read_entry_fields(&er, v, has, line);
    if (er.r == 0 && GROW(mr->mix.entries, mr->entries_cap, mr->mix.n_entries + 1) < 0)
        er.r = -ENOMEM;
    if (er.r < 0) {
        fail(mr, er.r);
        entry_free(&er.e);
        return;
    }
    mr->mix.entries[mr->mix.n_entries++] = er.e;
}

static void read_section(MixReader *mr, const Section *s, const FieldVal *v)
{
    if (!v->node || !fy_node_is_sequence(v->node)) {
        fail(mr, field_bad(mr->x, v, "must be a list of %s entries, not %s", s->name,
                           field_node_shape(v->node)));
        return;
    }
    void *it = NULL;
    struct fy_node *item;
    while (mr->r != -ENOMEM && (item = fy_node_sequence_iterate(v->node, &it)))
        read_entry(mr, s, item, field_node_line(item, v->line));
}

int tracegen_mix_parse(const char *text, size_t len, const char *name, TraceMix *ret, Buf *err)
{
    FieldCtx x;
    field_ctx_init(&x, name, "field", err);
    MixReader mr = {.x = &x};
    FieldYaml y;
    int r = field_yaml_open(&y, &x, text, len);
    if (r < 0)
        return r;
    r = field_yaml_next(&y);
    struct fy_node *root = r > 0 ? fy_document_root(y.doc) : NULL;
    if (r < 0) {
        fail(&mr, r);
    } else if (!root || field_node_is_null(root)) {
        field_error(&x, 1,
                    "empty; a mix is a mapping with teams and inference, training, "
                    "batch or interactive entries");
        fail(&mr, -EINVAL);
    } else if (!fy_node_is_mapping(root)) {
        field_error(&x, field_node_line(root, 1), "a mix must be a mapping, not %s",
                    field_node_shape(root));
        fail(&mr, -EINVAL);
    } else {
        FieldVal v[TOP_COUNT];
        bool has[TOP_COUNT];
        size_t line = field_node_line(root, 1);
        fail(&mr, field_collect(&x, root, line, "the mix", top_fields, TOP_COUNT, v, has));
        if (has[TOP_TEAMS]) {
            read_teams(&mr, &v[TOP_TEAMS]);
        } else {
            field_error(&x, line, "missing field 'teams' in the mix");
            fail(&mr, -EINVAL);
        }
        for (size_t i = 0; i < ARRAY_SIZE(sections) && mr.r != -ENOMEM; i++)
            if (has[TOP_INFERENCE + i])
                read_section(&mr, &sections[i], &v[TOP_INFERENCE + i]);
        if (mr.r != -ENOMEM && field_report_duplicates(&x, mr.names, mr.n_names, "entry") > 0)
            fail(&mr, -EINVAL);
        if (mr.r == 0 && !mr.mix.n_entries) {
            field_error(&x, line,
                        "the mix has no entries: give inference, training, batch or "
                        "interactive entries");
            fail(&mr, -EINVAL);
        }
        /* a second document would be silently ignored: say so */
        if (mr.r == 0 && field_yaml_next(&y) != 0) {
            if (!x.n_errors)
                field_error(&x, 0, "a mix is one YAML document; remove the second one");
            fail(&mr, -EINVAL);
        }
    }
    field_yaml_close(&y);
    free(mr.names);
    if (mr.r == 0 && x.n_errors)
        mr.r = -EINVAL;
    if (mr.r == 0 && !(mr.mix.file = strdup(x.file)))
        mr.r = -ENOMEM;
    if (mr.r < 0) {
        tracegen_mix_free(&mr.mix);
        return mr.r;
    }
    *ret = mr.mix;
    return 0;
}

int tracegen_mix_load(const char *path, TraceMix *ret, Buf *err)
{
    char *text = NULL;
    size_t len = 0;
    int r = file_read_all(path, &text, &len);
    if (r < 0) {
        if (err->len)
            buf_putc(err, '\n');
        buf_printf(err, "%s: %s", path, strerror(-r));
        return r;
    }
    r = tracegen_mix_parse(text, len, path, ret, err);
    free(text);
    return r;
}

/* ---- sizes ---- */

uint64_t tracegen_model_memory_mib(int64_t params_milli_b, int64_t bytes_per_param_milli,
                                   uint64_t kv_cache_mib)
{
    /* params x 1e9 x bytes: (params_milli / 1e3) x 1e9 x (bpp_milli / 1e3) */
    unsigned __int128 bytes =
        (unsigned __int128)params_milli_b * (unsigned __int128)bytes_per_param_milli * 1000u;
    unsigned __int128 den = (unsigned __int128)5 << 20; /* x 6/5 overhead, then bytes -> MiB */
    return (uint64_t)((bytes * 6 + den - 1) / den) + kv_cache_mib;
}

void tracegen_gang_split(uint32_t n_gpus, uint32_t *ret_workers, uint16_t *ret_gpus)
{
    uint32_t n = MAX(n_gpus, 1u);
    uint32_t workers = (n + 7) / 8;
    while (n % workers)
        workers++;
    *ret_workers = workers;
    *ret_gpus = (uint16_t)(n / workers);
}

/* ---- generation ---- */

/* A Philly table reduced to what training entries draw: GPUs and duration per row. */
typedef struct PhillyTable {
    const char *path;
    uint32_t *gpus;
    int64_t *duration_ms;
    size_t n;
} PhillyTable;

static void philly_free(PhillyTable *t, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(t[i].gpus);
        free(t[i].duration_ms);
    }
    free(t);
}

static int philly_load(const TraceMix *m, const TraceMixEntry *e, PhillyTable *t, Buf *err)
{
    JobList l = {0};
    Buf terr = {0};
    int r = trace_load(e->philly, TRACE_PHILLY, &l, &terr);
    if (err->len && r < 0)
        buf_putc(err, '\n');
    if (r == -ENOENT) {
        buf_printf(err,
                   "%s:%zu: field 'philly': the Philly job table '%s' is absent; training entry "
                   "'%s' draws its GPU counts and durations from it: fetch the trace, or give its "
                   "path with 'philly:' (relative paths are from the current directory)",
                   m->file, e->philly_line, e->philly, e->name);
    } else if (r < 0) {
        buf_printf(err, "%s:%zu: field 'philly': cannot read the Philly job table: %s", m->file,
                   e->philly_line, buf_str(&terr));
    }
    buf_free(&terr);
    if (r < 0)
        return r;
    *t = (PhillyTable){.path = e->philly, .n = l.n};
    t->gpus = malloc(MAX(l.n, 1) * sizeof(*t->gpus));
    t->duration_ms = malloc(MAX(l.n, 1) * sizeof(*t->duration_ms));
    if (!t->gpus || !t->duration_ms) {
        job_list_free(&l);
        free(t->gpus);
        free(t->duration_ms);
        return -ENOMEM;
    }
    for (size_t i = 0; i < l.n; i++) {
        t->gpus[i] = l.jobs[i].workers * l.jobs[i].gpus;
        t->duration_ms[i] = l.jobs[i].duration_ms;
    }
    job_list_free(&l);
    return 0;
}

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

/* Exponential with the given mean, rounded to whole seconds, clipped. */
static int64_t draw_time(Rng *r, const TraceMixTime *t)
{
    double x = -log(1.0 - rng_unit(r)) * (double)t->mean_ms;
    double s = floor(x / 1000.0 + 0.5);
    int64_t ms = s * 1000.0 >= (double)MIX_MAX_TIME_MS ? MIX_MAX_TIME_MS : (int64_t)s * 1000;
    return MIN(MAX(ms, t->min_ms), t->max_ms);
}

/* The user's guess: the true duration times a lognormal factor clipped to [0.5, 2],
 * rounded up to whole minutes, and never the true duration itself. */
static int64_t draw_estimate(Rng *r, int64_t duration_ms)
{
    double u1 = rng_unit(r), u2 = rng_unit(r);
    double z = sqrt(-2.0 * log(1.0 - u1)) * cos(2.0 * M_PI * u2);
    double f = exp(ESTIMATE_SIGMA * z);
    f = MIN(MAX(f, TRACEGEN_ESTIMATE_MIN), TRACEGEN_ESTIMATE_MAX);
    int64_t est = (int64_t)ceil((double)duration_ms * f / 60000.0) * 60000;
    if (est == duration_ms)
        est += 60000;
    return est;
}

static char *str_or_null(const char *s, int *r)
{
    if (!s)
        return NULL;
    char *c = strdup(s);
    if (!c)
        *r = -ENOMEM;
    return c;
}

/* The job of entry e submitted at submit_ms, drawing from r; rows: the entry's eligible
 * Philly rows (training). */
static int make_job(const TraceMix *m, const TraceMixEntry *e, uint64_t n, int64_t submit_ms,
                    Rng *r, const PhillyTable *philly, const uint32_t *rows, size_t n_rows,
                    JobSpec *j)
{
    int rc = 0;
    const TraceMixTeam *team = &m->teams[e->team];
    char id[MIX_MAX_NAME + 24];
    snprintf(id, sizeof(id), "%s-%" PRIu64, e->name, n);
    job_spec_init(j);
    j->name = str_or_null(id, &rc);
    j->team = str_or_null(team->name, &rc);
    if (e->project)
        j->project = str_or_null(e->project, &rc);
    else if (team->n_projects)
        j->project = str_or_null(team->projects[rng_below(r, team->n_projects)], &rc);
    j->kind = e->kind;
    j->priority = e->priority;
    j->workload_class = str_or_null(e->name, &rc);
    j->busy_milli = e->busy_milli;
    j->submit_ms = submit_ms;
    j->preemptible = e->preemptible;
    j->checkpoint_interval_ms = e->checkpoint_interval_ms;
    j->checkpoint_grace_ms = e->checkpoint_grace_ms;
    j->checkpoint_cost_ms = e->checkpoint_cost_ms;
    if (e->priority == PRIO_PRODUCTION)
        j->tiers = (uint8_t)((1u << TIER_RESERVED) | (1u << TIER_ON_DEMAND) | (1u << TIER_OWNED));
    if (e->n_gpu_models) {
        j->gpu_models = calloc(e->n_gpu_models, sizeof(char *));
        if (!j->gpu_models)
            rc = -ENOMEM;
        for (size_t i = 0; j->gpu_models && i < e->n_gpu_models; i++) {
            j->gpu_models[i] = str_or_null(e->gpu_models[i], &rc);
            j->n_gpu_models += j->gpu_models[i] != NULL;
        }
    }
    j->req = e->req;
    j->gpus = e->req == REQ_GPUS ? e->gpus : 0;
    j->gpu_memory_mib = e->gpu_memory_mib;
    j->fraction_milli = e->fraction_milli;
    if (e->mig)
        j->mig = str_or_null(e->mig, &rc);
    j->cpu_milli = e->cpu_milli;
    j->memory_mib = (uint32_t)e->memory_mib;

    switch (e->kind) {
    case KIND_INFERENCE:
        j->duration_ms = draw_time(r, &e->time);
        if (e->has_overrun) {
            j->peak_memory_mib = e->gpu_memory_mib;
            if (rng_unit(r) * 1000.0 < (double)e->overrun_milli) {
                double over = 1.1 + 0.3 * rng_unit(r); /* 10-40 % above the size */
                j->peak_memory_mib = (uint64_t)ceil((double)e->gpu_memory_mib * over);
            }
        }
        break;
    case KIND_TRAINING: {
        size_t row = rows[rng_below(r, n_rows)];
        tracegen_gang_split(philly->gpus[row], &j->workers, &j->gpus);
        int64_t d = philly->duration_ms[row];
        double scaled = (double)d * (double)e->duration_scale_milli / 1000.0;
        double s = floor(scaled / 1000.0 + 0.5);
        d = s * 1000.0 >= (double)MIX_MAX_TIME_MS ? MIX_MAX_TIME_MS : (int64_t)s * 1000;
        j->duration_ms = MIN(MAX(d, MIN_DURATION_MS), e->max_duration_ms);
        j->cpu_milli = e->cpu_milli * j->gpus;
        j->memory_mib = (uint32_t)(e->memory_mib * j->gpus);
        break;
    }
    default:
        j->duration_ms = draw_time(r, &e->time);
        break;
    }
    j->duration_estimate_ms = draw_estimate(r, j->duration_ms);
    return rc;
}

static int cmp_job(const void *a, const void *b)
{
    const JobSpec *x = a, *y = b;
    if (x->submit_ms != y->submit_ms)
        return x->submit_ms < y->submit_ms ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* Generate one entry's jobs into out. */
static int generate_entry(const TraceMix *m, const TraceMixEntry *e, uint64_t seed,
                          int64_t horizon_ms, const PhillyTable *philly, JobList *out, Buf *err)
{
    if (!e->rate_milli_per_hour)
        return 0;
    _cleanup_free_ uint32_t *rows = NULL;
    size_t n_rows = 0;
    if (e->kind == KIND_TRAINING) {
        rows = malloc(MAX(philly->n, 1) * sizeof(*rows));
        if (!rows)
            return -ENOMEM;
        for (size_t i = 0; i < philly->n; i++)
            if (philly->gpus[i] >= e->min_gpus && philly->gpus[i] <= e->max_gpus)
                rows[n_rows++] = (uint32_t)i;
        if (!n_rows) {
            if (err->len)
                buf_putc(err, '\n');
            buf_printf(err,
                       "%s:%zu: training entry '%s': no row of the Philly table '%s' asks for "
                       "%" PRIu32 " to %" PRIu32 " GPUs",
                       m->file, e->line, e->name, philly->path, e->min_gpus, e->max_gpus);
            return -EINVAL;
        }
    }
    Rng r;
    rng_seed(&r, seed ^ fnv1a(e->name));
    double mean_gap_ms = 3600000.0 * 1000.0 / (double)e->rate_milli_per_hour;
    double t = (double)e->from_ms, end = (double)MIN(horizon_ms, e->until_ms);
    for (uint64_t n = 1;; n++) {
        t += -log(1.0 - rng_unit(&r)) * mean_gap_ms;
        if (t >= end)
            return 0;
        if (out->n >= TRACEGEN_MAX_JOBS) {
            if (err->len)
                buf_putc(err, '\n');
            buf_printf(err,
                       "%s: the mix would generate more than %u jobs; lower the rates or "
                       "the hours",
                       m->file, TRACEGEN_MAX_JOBS);
            return -E2BIG;
        }
        int64_t submit_ms = (int64_t)(t / 1000.0) * 1000;
        JobSpec j;
        int rc = make_job(m, e, n, submit_ms, &r, philly, rows, n_rows, &j);
        if (rc == 0)
            rc = job_list_take(out, &j);
        if (rc < 0) {
            job_spec_free(&j);
            return rc;
        }
    }
}

int tracegen_generate(const TraceMix *m, uint64_t seed, int64_t horizon_ms, JobList *ret, Buf *err)
{
    if (horizon_ms <= 0 || horizon_ms > MIX_MAX_TIME_MS) {
        if (err->len)
            buf_putc(err, '\n');
        buf_printf(err, "%s: the horizon must be longer than 0 hours", m->file);
        return -EINVAL;
    }
    /* a rough guard before anything is drawn: expected jobs over the horizon */
    double expected = 0;
    for (size_t i = 0; i < m->n_entries; i++) {
        const TraceMixEntry *e = &m->entries[i];
        int64_t span = MIN(horizon_ms, e->until_ms) - e->from_ms;
        if (span > 0)
            expected += (double)e->rate_milli_per_hour / 1000.0 * (double)span / 3600000.0;
    }
    if (expected > TRACEGEN_MAX_JOBS) {
        if (err->len)
            buf_putc(err, '\n');
        buf_printf(err,
                   "%s: the mix would generate about %.0f jobs, more than %u; lower the "
                   "rates or the hours",
                   m->file, expected, TRACEGEN_MAX_JOBS);
        return -E2BIG;
    }
    /* each Philly table the training entries name, read once */
    PhillyTable *tables = calloc(MAX(m->n_entries, 1), sizeof(*tables));
    size_t *table_of = calloc(MAX(m->n_entries, 1), sizeof(*table_of));
    size_t n_tables = 0;
    JobList out = {0};
    int r = tables && table_of ? 0 : -ENOMEM;
    for (size_t i = 0; r == 0 && i < m->n_entries; i++) {
        const TraceMixEntry *e = &m->entries[i];
        if (e->kind != KIND_TRAINING || !e->rate_milli_per_hour)
            continue;
        size_t k = 0;
        while (k < n_tables && strcmp(tables[k].path, e->philly) != 0)
            k++;
        if (k == n_tables) {
            if ((r = philly_load(m, e, &tables[k], err)) < 0)
                break;
            n_tables++;
        }
        table_of[i] = k;
    }
    for (size_t i = 0; r == 0 && i < m->n_entries; i++) {
        const TraceMixEntry *e = &m->entries[i];
        const PhillyTable *t = e->kind == KIND_TRAINING ? &tables[table_of[i]] : NULL;
        r = generate_entry(m, e, seed, horizon_ms, t, &out, err);
    }
    if (tables)
        philly_free(tables, n_tables);
    free(table_of);
    if (r < 0) {
        job_list_free(&out);
        return r;
    }
    if (out.n > 1)
        qsort(out.jobs, out.n, sizeof(*out.jobs), cmp_job);
    *ret = out;
    return 0;
}

/* ---- the job CSV ---- */

/* A cell, quoted when it holds a separator, a quote, a line break or edge spaces. */
static void put_cell(Buf *b, const char *s)
{
    size_t n = strlen(s);
    bool quote = n && (isspace((unsigned char)s[0]) || isspace((unsigned char)s[n - 1]));
    for (const char *p = s; *p && !quote; p++)
        quote = *p == ',' || *p == '"' || *p == '\n' || *p == '\r';
    if (!quote) {
        buf_puts(b, s);
        return;
    }
    buf_putc(b, '"');
    for (const char *p = s; *p; p++) {
        if (*p == '"')
            buf_putc(b, '"');
        buf_putc(b, *p);
    }
    buf_putc(b, '"');
}

/* v / 10^digits as a plain decimal without trailing zeros ("7200", "0.25"). */
static void put_fixed(Buf *b, int64_t v, unsigned digits)
{
    int64_t scale = 1;
    for (unsigned i = 0; i < digits; i++)
        scale *= 10;
    int64_t whole = v / scale, frac = v % scale;
    if (!frac) {
        buf_printf(b, "%" PRId64, whole);
        return;
    }
    int w = (int)digits;
    while (frac % 10 == 0) {
        frac /= 10;
        w--;
    }
    buf_printf(b, "%" PRId64 ".%0*" PRId64, whole, w, frac);
}

static void put_seconds(Buf *b, int64_t ms)
{
    if (ms >= 0)
        put_fixed(b, ms, 3);
}

enum {
    W_ID,
    W_SUBMIT_S,
    W_DURATION_S,
    W_DURATION_ESTIMATE_S,
    W_TEAM,
    W_PROJECT,
    W_KIND,
    W_PRIORITY,
    W_CLASS,
    W_WORKERS,
    W_GPUS,
    W_GPU_MEMORY_MIB,
    W_GPU_FRACTION,
    W_MIG,
    W_GPU_MODEL,
    W_TOPOLOGY,
    W_TOPOLOGY_REQUIRED,
    W_FABRIC,
    W_TIERS,
    W_PREEMPTIBLE,
    W_CHECKPOINT_INTERVAL_S,
    W_CHECKPOINT_GRACE_S,
    W_CHECKPOINT_COST_S,
    W_BUSY,
    W_PEAK_MEMORY_MIB,
    W_CPU_MILLI,
    W_MEMORY_MIB,
    W_COUNT
};
static const char *const write_columns[W_COUNT] = {
    "id",
    "submit_s",
    "duration_s",
    "duration_estimate_s",
    "team",
    "project",
    "kind",
    "priority",
    "class",
    "workers",
    "gpus",
    "gpu_memory_mib",
    "gpu_fraction",
    "mig",
    "gpu_model",
    "topology",
    "topology_required",
    "fabric",
    "tiers",
    "preemptible",
    "checkpoint_interval_s",
    "checkpoint_grace_s",
    "checkpoint_cost_s",
    "busy",
    "peak_memory_mib",
    "cpu_milli",
    "memory_mib",
};

static void put_column(Buf *b, const JobSpec *j, int c)
{
    switch (c) {
    case W_ID:
        put_cell(b, j->name ? j->name : "");
        break;
    case W_SUBMIT_S:
        put_seconds(b, j->submit_ms);
        break;
    case W_DURATION_S:
        put_seconds(b, j->duration_ms);
        break;
    case W_DURATION_ESTIMATE_S:
        put_seconds(b, j->duration_estimate_ms);
        break;
    case W_TEAM:
        if (j->team)
            put_cell(b, j->team);
        break;
    case W_PROJECT:
        if (j->project)
            put_cell(b, j->project);
        break;
    case W_KIND:
        buf_puts(b, job_kind_name(j->kind));
        break;
    case W_PRIORITY:
        buf_puts(b, priority_name(j->priority));
        break;
    case W_CLASS:
        if (j->workload_class)
            put_cell(b, j->workload_class);
        break;
    case W_WORKERS:
        buf_printf(b, "%" PRIu32, j->workers);
        break;
    case W_GPUS:
        if (j->req == REQ_GPUS || j->req == REQ_NONE)
            buf_printf(b, "%u", j->req == REQ_NONE ? 0u : (unsigned)j->gpus);
        break;
    case W_GPU_MEMORY_MIB:
        if (j->req == REQ_MEMORY)
            buf_printf(b, "%" PRIu64, j->gpu_memory_mib);
        break;
    case W_GPU_FRACTION:
        if (j->req == REQ_FRACTION)
            put_fixed(b, j->fraction_milli, 3);
        break;
    case W_MIG:
        if (j->req == REQ_MIG && j->mig)
            put_cell(b, j->mig);
        break;
    case W_GPU_MODEL: {
        Buf models = {0};
        for (size_t i = 0; i < j->n_gpu_models; i++) {
            if (i)
                buf_putc(&models, '|');
            buf_puts(&models, j->gpu_models[i]);
        }
        put_cell(b, buf_str(&models));
        if (models.oom)
            b->oom = true;
        buf_free(&models);
        break;
    }
    case W_TOPOLOGY:
        if (j->scope != SCOPE_ANY)
            buf_puts(b, scope_name(j->scope));
        break;
    case W_TOPOLOGY_REQUIRED:
        if (j->scope_required)
            buf_puts(b, "true");
        break;
    case W_FABRIC:
        if (j->fabric)
            put_cell(b, j->fabric);
        break;
    case W_TIERS:
        for (unsigned t = 0, first = 1; t < TIER_COUNT; t++)
            if (j->tiers & (1u << t)) {
                if (!first)
                    buf_putc(b, '|');
                buf_puts(b, tier_name((Tier)t));
                first = 0;
            }
        break;
    case W_PREEMPTIBLE:
        buf_puts(b, j->preemptible ? "true" : "false");
        break;
    case W_CHECKPOINT_INTERVAL_S:
        if (j->checkpoint_interval_ms)
            put_seconds(b, j->checkpoint_interval_ms);
        break;
    case W_CHECKPOINT_GRACE_S:
        if (j->checkpoint_grace_ms)
            put_seconds(b, j->checkpoint_grace_ms);
        break;
    case W_CHECKPOINT_COST_S:
        if (j->checkpoint_cost_ms)
            put_seconds(b, j->checkpoint_cost_ms);
        break;
    case W_BUSY:
        if (j->busy_milli <= 1000)
            put_fixed(b, j->busy_milli, 3);
        break;
    case W_PEAK_MEMORY_MIB:
        if (j->peak_memory_mib)
            buf_printf(b, "%" PRIu64, j->peak_memory_mib);
        break;
    case W_CPU_MILLI:
        buf_printf(b, "%" PRIu32, j->cpu_milli);
        break;
    case W_MEMORY_MIB:
        buf_printf(b, "%" PRIu32, j->memory_mib);
        break;
    }
}

int tracegen_write_csv(const JobList *l, Buf *out)
{
    bool use[W_COUNT];
    for (int c = 0; c < W_COUNT; c++)
        use[c] = c != W_TOPOLOGY && c != W_TOPOLOGY_REQUIRED && c != W_FABRIC &&
                 c != W_CHECKPOINT_GRACE_S;
    for (size_t i = 0; i < l->n; i++) {
        const JobSpec *j = &l->jobs[i];
        use[W_TOPOLOGY] |= j->scope != SCOPE_ANY;
        use[W_TOPOLOGY_REQUIRED] |= j->scope_required;
        use[W_FABRIC] |= j->fabric != NULL;
        use[W_CHECKPOINT_GRACE_S] |= j->checkpoint_grace_ms != 0;
    }
    bool first = true;
    for (int c = 0; c < W_COUNT; c++) {
        if (!use[c])
            continue;
        if (!first)
            buf_putc(out, ',');
        buf_puts(out, write_columns[c]);
        first = false;
    }
    buf_putc(out, '\n');
    for (size_t i = 0; i < l->n; i++) {
        first = true;
        for (int c = 0; c < W_COUNT; c++) {
            if (!use[c])
                continue;
            if (!first)
                buf_putc(out, ',');
            put_column(out, &l->jobs[i], c);
            first = false;
        }
        buf_putc(out, '\n');
    }
    return out->oom ? -ENOMEM : 0;
}
