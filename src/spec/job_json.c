/* job_json.c: a JobSpec as a JSON job file (job_json.h). The writer is the parser's
 * mirror: it writes each field in a form spec_jobs.c reads back exactly (times as whole
 * ms units, sizes as MiB, decimals with at most 3 places) and refuses what the parser
 * would reject or read differently, so that a stored job always loads again as it was
 * submitted. The limits below are the parser's. */
#include "spec/job_json.h"

#include "core/catalog.h"
#include "util/macro.h"
#include "util/units.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define JOB_MAX_WORKERS 100000u
#define JOB_MAX_NAME    253
#define MAX_TIME_MS     (INT64_C(1) << 52)
#define MAX_CPU_MILLI   UINT32_C(1000000000)
#define MAX_SIZE_MIB    ((uint64_t)UINT32_MAX * 1024) /* parse_size_mib's largest */
#define MAX_SIZE_NUMBER UINT64_C(9223372036)          /* parse_size_mib reads it in 10^-9 */

/* Non-empty and not only blanks: what field_text accepts. */
static bool text_ok(const char *s)
{
    for (; s && *s; s++)
        if (!isspace((unsigned char)*s))
            return true;
    return false;
}

/* A list item is trimmed when read: it must have no blanks at its ends. */
static bool item_ok(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    return n && !isspace((unsigned char)s[0]) && !isspace((unsigned char)s[n - 1]);
}

static bool name_ok(const char *s)
{
    size_t n = 0;
    for (; s && s[n]; n++)
        if (isspace((unsigned char)s[n]) || iscntrl((unsigned char)s[n]))
            return false;
    return n && n <= JOB_MAX_NAME;
}

static bool env_name_ok(const char *s, size_t n)
{
    if (!n || (!isalpha((unsigned char)*s) && *s != '_'))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '_')
            return false;
    return true;
}

static bool mig_profile_known(const char *name)
{
    for (size_t i = 0; i < catalog_count(); i++)
        if (catalog_profile_index(catalog_model(i), name) >= 0)
            return true;
    return false;
}

static void key(Buf *b, const char *k)
{
    buf_puts(b, ", ");
    buf_json_str(b, k);
    buf_puts(b, ": ");
}

static int put_str(Buf *b, const char *k, const char *v)
{
    if (!v)
        return 0;
    if (!text_ok(v))
        return -EINVAL;
    key(b, k);
    buf_json_str(b, v);
    return 0;
}

/* Thousandths as a decimal: 250 -> 0.25, 8000 -> 8. */
static void put_milli(Buf *b, const char *k, uint64_t milli)
{
    key(b, k);
    buf_printf(b, "%" PRIu64, milli / 1000);
    unsigned frac = (unsigned)(milli % 1000);
    if (frac) {
        int digits = 3;
        for (; frac % 10 == 0; frac /= 10)
            digits--;
        buf_printf(b, ".%0*u", digits, frac);
    }
}

/* In the largest binary unit that holds it exactly: "64GiB", "18433MiB". */
static int put_mib(Buf *b, const char *k, uint64_t mib)
{
    const char *unit = "MiB";
    uint64_t n = mib;
    if (mib && mib % (1024 * 1024) == 0)
        n = mib / (1024 * 1024), unit = "TiB";
    else if (mib && mib % 1024 == 0)
        n = mib / 1024, unit = "GiB";
    if (mib > MAX_SIZE_MIB || n > MAX_SIZE_NUMBER)
        return -EINVAL;
    key(b, k);
    buf_printf(b, "\"%" PRIu64 "%s\"", n, unit);
    return 0;
}

static int put_time(Buf *b, const char *k, int64_t ms)
{
    if (ms < 0 || ms > MAX_TIME_MS)
        return -EINVAL;
    char s[48];
    format_duration(ms, s, sizeof(s));
    key(b, k);
    buf_json_str(b, s);
    return 0;
}

static int put_list(Buf *b, const char *k, char *const *v, size_t n)
{
    if (!n)
        return 0;
    key(b, k);
    buf_putc(b, '[');
    for (size_t i = 0; i < n; i++) {
        if (!item_ok(v[i]))
            return -EINVAL;
        buf_puts(b, i ? ", " : "");
        buf_json_str(b, v[i]);
    }
    buf_putc(b, ']');
    return 0;
}

static int put_request(Buf *b, const JobSpec *j)
{
    switch (j->req) {
    case REQ_NONE:
        key(b, "gpus");
        buf_putc(b, '0');
        return 0;
    case REQ_GPUS:
        /* gpus: 0 reads back as no GPU request at all */
        if (j->gpus < 1 || j->gpus > NODE_MAX_GPUS)
            return -EINVAL;
        key(b, "gpus");
        buf_printf(b, "%u", (unsigned)j->gpus);
        return 0;
    case REQ_MIG:
        if (!j->mig || !mig_profile_known(j->mig))
            return -EINVAL;
        return put_str(b, "mig", j->mig);
    case REQ_MEMORY:
        if (j->gpu_memory_mib < 1 || j->gpu_memory_mib > UINT32_MAX)
            return -EINVAL;
        return put_mib(b, "gpu_memory", j->gpu_memory_mib);
    case REQ_FRACTION:
        if (j->fraction_milli < 1 || j->fraction_milli > 1000)
            return -EINVAL;
        put_milli(b, "gpu_fraction", j->fraction_milli);
        return 0;
    }
    return -EINVAL;
}

static int put_topology(Buf *b, const JobSpec *j)
{
    if (j->scope == SCOPE_ANY && !j->scope_required)
        return 0;
    if (scope_name((Scope)j->scope)[0] == '?')
        return -EINVAL;
    key(b, "topology");
    buf_puts(b, "{\"scope\": ");
    buf_json_str(b, scope_name((Scope)j->scope));
    buf_printf(b, ", \"mode\": \"%s\"}", j->scope_required ? "required" : "preferred");
    return 0;
}

static int put_checkpoint(Buf *b, const JobSpec *j)
{
    const char *names[] = {"interval", "grace", "cost"};
    const int64_t ms[] = {j->checkpoint_interval_ms, j->checkpoint_grace_ms, j->checkpoint_cost_ms};
    bool any = false;
    for (size_t i = 0; i < ARRAY_SIZE(ms); i++) {
        if (!ms[i])
            continue;
        if (ms[i] < 0 || ms[i] > MAX_TIME_MS)
            return -EINVAL;
        char s[48];
        format_duration(ms[i], s, sizeof(s));
        if (!any)
            key(b, "checkpoint");
        buf_printf(b, "%s\"%s\": \"%s\"", any ? ", " : "{", names[i], s);
        any = true;
    }
    if (any)
        buf_putc(b, '}');
    return 0;
}

static int put_tiers(Buf *b, uint8_t mask)
{
    if (!mask)
        return 0;
    if (mask & ~TIERS_ALL)
        return -EINVAL;
    key(b, "capacity");
    const char *sep = "[";
    for (int t = 0; t < TIER_COUNT; t++) {
        if (!(mask & (1u << t)))
            continue;
        buf_puts(b, sep);
        buf_json_str(b, tier_name((Tier)t));
        sep = ", ";
    }
    buf_putc(b, ']');
    return 0;
}

/* The shell form when the argv is exactly what a command string becomes. */
static int put_command(Buf *b, const JobSpec *j)
{
    char *const *a = j->command;
    if (j->n_command == 3 && strcmp(a[0], "/bin/sh") == 0 && strcmp(a[1], "-c") == 0)
        return put_str(b, "command", a[2]);
    return put_list(b, "command", a, j->n_command);
}

static int put_env(Buf *b, const JobSpec *j)
{
    if (!j->n_env)
        return 0;
    key(b, "env");
    buf_putc(b, '{');
    for (size_t i = 0; i < j->n_env; i++) {
        const char *eq = strchr(j->env[i], '=');
        if (!eq || !env_name_ok(j->env[i], (size_t)(eq - j->env[i])))
            return -EINVAL;
        buf_printf(b, "%s\"%.*s\": ", i ? ", " : "", (int)(eq - j->env[i]), j->env[i]);
        buf_json_str(b, eq + 1);
    }
    buf_putc(b, '}');
    return 0;
}

static int write_job(Buf *b, const JobSpec *j)
{
    int r;
    if (!name_ok(j->name) || j->workers < 1 || j->workers > JOB_MAX_WORKERS ||
        job_kind_name((JobKind)j->kind)[0] == '?' || priority_name((Priority)j->priority)[0] == '?')
        return -EINVAL;
    buf_puts(b, "{\"name\": ");
    buf_json_str(b, j->name);
    if ((r = put_str(b, "team", j->team)) < 0 || (r = put_str(b, "project", j->project)) < 0)
        return r;
    key(b, "kind");
    buf_json_str(b, job_kind_name((JobKind)j->kind));
    key(b, "priority");
    buf_json_str(b, priority_name((Priority)j->priority));
    key(b, "workers");
    buf_printf(b, "%" PRIu32, j->workers);
    if ((r = put_request(b, j)) < 0 ||
        (r = put_list(b, "gpu_models", j->gpu_models, j->n_gpu_models)) < 0 ||
        (r = put_topology(b, j)) < 0 || (r = put_str(b, "fabric", j->fabric)) < 0)
        return r;
    key(b, "preemptible");
    buf_puts(b, j->preemptible ? "true" : "false");
    if ((r = put_checkpoint(b, j)) < 0 || (r = put_tiers(b, j->tiers)) < 0 ||
        (r = put_command(b, j)) < 0 || (r = put_env(b, j)) < 0)
        return r;
    if (j->duration_estimate_ms != NO_DURATION &&
        (r = put_time(b, "duration_estimate", j->duration_estimate_ms)) < 0)
        return r;
    if (j->max_wait_ms > 0 && (r = put_time(b, "max_wait", j->max_wait_ms)) < 0)
        return r;
    if (j->cpu_milli > MAX_CPU_MILLI)
        return -EINVAL;
    if (j->cpu_milli)
        put_milli(b, "cpus", j->cpu_milli);
    if (j->memory_mib && (r = put_mib(b, "memory", j->memory_mib)) < 0)
        return r;
    if (j->submit_ms && (r = put_time(b, "submit", j->submit_ms)) < 0)
        return r;
    if (j->duration_ms != NO_DURATION && (r = put_time(b, "duration", j->duration_ms)) < 0)
        return r;
    if (j->busy_milli != BUSY_ALL) {
        if (j->busy_milli > 1000)
            return -EINVAL;
        put_milli(b, "busy", j->busy_milli);
    }
    if (j->peak_memory_mib && (r = put_mib(b, "peak_memory", j->peak_memory_mib)) < 0)
        return r;
    if ((r = put_str(b, "class", j->workload_class)) < 0)
        return r;
    buf_putc(b, '}');
    return 0;
}

int spec_job_to_json(const JobSpec *j, Buf *out)
{
    Buf b = {0};
    int r = write_job(&b, j);
    if (r == 0 && b.oom)
        r = -ENOMEM;
    if (r == 0) {
        buf_append(out, b.data, b.len);
        if (out->oom)
            r = -ENOMEM;
    }
    buf_free(&b);
    return r;
}
