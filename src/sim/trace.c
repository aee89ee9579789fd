/* trace.c: trace readers. Each turns a public trace into gpuorch jobs:
 *  - Alibaba GPU-sharing trace (openb_pod_list_*.csv): a pod is a one-worker job;
 *    num_gpu = 0 is CPU-only, gpu_milli < 1000 a share of one GPU, else whole GPUs;
 *    gpu_spec restricts models ('|'-separated); creation/deletion times, when the file
 *    has them, give the submit time and duration.
 *  - Philly (philly_jobs_82k.csv): timestamp, duration (s), num_gpus, VC = team. Jobs
 *    above 8 GPUs become gangs of equal workers of at most 8 GPUs each.
 *  - gpuorch's own job files (spec layer).
 * Errors name the file, the line and the column. */
#include "sim/sim.h"
#include "util/csv.h"
#include "util/file.h"
#include "util/macro.h"
#include "util/units.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *const format_names[] = {"auto", "alibaba2023", "philly", "gpuorch"};

const char *trace_format_name(TraceFormat f)
{
    return (unsigned)f < ARRAY_SIZE(format_names) ? format_names[f] : "?";
}

int trace_format_from_name(const char *s)
{
    for (size_t i = 0; i < ARRAY_SIZE(format_names); i++)
        if (!strcasecmp(s, format_names[i]))
            return (int)i;
    return -1;
}

static int bad(Buf *err, const char *path, size_t line, const char *column, const char *msg)
{
    buf_printf(err, "%s:%zu: column '%s': %s", path, line, column, msg);
    return -EINVAL;
}

static bool empty_or_nan(const char *s)
{
    return !*s || !strcasecmp(s, "nan") || !strcasecmp(s, "null");
}

/* ---- Alibaba ---- */

static int split_models(const char *spec, JobSpec *j)
{
    char *copy = strdup(spec);
    if (!copy)
        return -ENOMEM;
    size_t n = 1;
    for (const char *p = spec; *p; p++)
        n += *p == '|';
    j->gpu_models = calloc(n, sizeof(char *));
    if (!j->gpu_models) {
        free(copy);
        return -ENOMEM;
    }
    char *save = NULL;
    for (char *tok = strtok_r(copy, "|", &save); tok; tok = strtok_r(NULL, "|", &save)) {
        if (!*tok)
            continue;
        if (!(j->gpu_models[j->n_gpu_models] = strdup(tok))) {
            free(copy);
            return -ENOMEM;
        }
        j->n_gpu_models++;
    }
    free(copy);
    return 0;
}

static int load_alibaba(const char *path, const char *text, size_t len, JobList *ret, Buf *err)
{
    CsvReader r;
    csv_init(&r, text, len);
    int rc = csv_next(&r);
    if (rc <= 0) {
        csv_free(&r);
        buf_printf(err, "%s: empty trace", path);
        return -EINVAL;
    }
    int c_name = csv_column(&r, "name"), c_cpu = csv_column(&r, "cpu_milli"),
        c_mem = csv_column(&r, "memory_mib"), c_num = csv_column(&r, "num_gpu"),
        c_milli = csv_column(&r, "gpu_milli"), c_spec = csv_column(&r, "gpu_spec"),
        c_create = csv_column(&r, "creation_time"), c_delete = csv_column(&r, "deletion_time");
    if (c_name < 0 || c_cpu < 0 || c_mem < 0 || c_num < 0 || c_milli < 0) {
        csv_free(&r);
        buf_printf(err,
                   "%s:1: an Alibaba pod list needs the columns name, cpu_milli, "
                   "memory_mib, num_gpu, gpu_milli",
                   path);
        return -EINVAL;
    }
    size_t ncols = r.nfields;
    JobList out = {0};
    JobSpec j;
    job_spec_init(&j);
    while ((rc = csv_next(&r)) > 0) {
        if (r.nfields != ncols) {
            rc = bad(err, path, r.line, "*", "wrong number of columns");
            break;
        }
        int64_t cpu, mem, num, milli, create = 0, del = 0;
#define NUM(col, var, label)                                                                       \
    if (parse_i64(r.fields[col], &var) < 0 || var < 0) {                                           \
        rc = bad(err, path, r.line, label, "must be a non-negative whole number");                 \
        break;                                                                                     \
    }
        NUM(c_cpu, cpu, "cpu_milli");
        NUM(c_mem, mem, "memory_mib");
        NUM(c_num, num, "num_gpu");
        if (parse_i64(r.fields[c_milli], &milli) < 0) {
            rc = bad(err, path, r.line, "gpu_milli", "must be a whole number");
            break;
        }
        if (c_create >= 0 && !empty_or_nan(r.fields[c_create]))
            NUM(c_create, create, "creation_time");
        if (c_delete >= 0 && !empty_or_nan(r.fields[c_delete]))
            NUM(c_delete, del, "deletion_time");
#undef NUM
        if (num > NODE_MAX_GPUS) {
            rc = bad(err, path, r.line, "num_gpu", "more GPUs than a node holds");
            break;
        }
        if (cpu > UINT32_MAX || mem > UINT32_MAX) {
            rc = bad(err, path, r.line, cpu > UINT32_MAX ? "cpu_milli" : "memory_mib",
                     "value too large");
            break;
        }
        /* the FGD simulator clamps gpu_milli to [0, 1000] */
        milli = milli < 0 ? 0 : milli > 1000 ? 1000 : milli;
        job_spec_free(&j);
        j.name = strdup(r.fields[c_name]);
        j.cpu_milli = (uint32_t)cpu;
        j.memory_mib = (uint32_t)mem;
        j.kind = KIND_BATCH;
        if (num == 0 || milli == 0) {
            j.req = REQ_NONE;
            j.gpus = 0;
        } else if (milli < 1000) {
            if (num > 1) {
                rc = bad(err, path, r.line, "gpu_milli",
                         "a share of a GPU (gpu_milli < 1000) needs num_gpu = 1");
                break;
            }
            j.req = REQ_FRACTION;
            j.fraction_milli = (uint16_t)milli;
        } else {
            j.req = REQ_GPUS;
            j.gpus = (uint16_t)num;
        }
        if (c_spec >= 0 && !empty_or_nan(r.fields[c_spec]) &&
            (rc = split_models(r.fields[c_spec], &j)) < 0)
            break;
        j.submit_ms = create * 1000;
        j.duration_ms = del > create ? (del - create) * 1000 : NO_DURATION;
        if (!j.name || (rc = job_list_push(&out, &j)) < 0) {
            rc = -ENOMEM;
            break;
        }
    }
    job_spec_free(&j);
    if (rc == -EINVAL && !err->len)
        buf_printf(err, "%s:%zu: unterminated quoted field", path, r.line);
    csv_free(&r);
    if (rc < 0) {
        job_list_free(&out);
        return rc;
    }
    *ret = out;
    return 0;
}

/* ---- Philly ---- */

/* Days from 1970-01-01 to y-m-d in the proleptic Gregorian calendar. */
static int64_t days_from_civil(int64_t y, unsigned m, unsigned d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    unsigned yoe = (unsigned)(y - era * 400);
    unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + (int64_t)doe - 719468;
}

static int parse_timestamp_s(const char *s, int64_t *ret)
{
    int y, mo, d, h, mi, sec;
    char tail;
    if (sscanf(s, "%d-%d-%d %d:%d:%d%c", &y, &mo, &d, &h, &mi, &sec, &tail) != 6 || mo < 1 ||
        mo > 12 || d < 1 || d > 31 || h < 0 || h > 23 || mi < 0 || mi > 59 || sec < 0 || sec > 60)
        return -EINVAL;
    *ret = days_from_civil(y, (unsigned)mo, (unsigned)d) * 86400 + h * 3600 + mi * 60 + sec;
    return 0;
}

static int load_philly(const char *path, const char *text, size_t len, JobList *ret, Buf *err)
{
    CsvReader r;
    csv_init(&r, text, len);
    int rc = csv_next(&r);
    /* the header's fields exist only when it was read (an unterminated quote is not) */
    int c_ts = rc > 0 ? csv_column(&r, "timestamp") : -1,
        c_dur = rc > 0 ? csv_column(&r, "duration") : -1,
        c_gpus = rc > 0 ? csv_column(&r, "num_gpus") : -1,
        c_vc = rc > 0 ? csv_column(&r, "cluster") : -1;
    if (rc <= 0 || c_ts < 0 || c_dur < 0 || c_gpus < 0) {
        csv_free(&r);
        buf_printf(err, "%s:1: a Philly job table needs the columns timestamp, duration, num_gpus",
                   path);
        return -EINVAL;
    }
    size_t ncols = r.nfields;
    JobList out = {0};
    JobSpec j;
    job_spec_init(&j);
    int64_t t0 = INT64_MAX;
    size_t row = 0;
    while ((rc = csv_next(&r)) > 0) {
        if (r.nfields != ncols) {
            rc = bad(err, path, r.line, "*", "wrong number of columns");
            break;
        }
        int64_t ts, dur_ms, gpus;
        if (parse_timestamp_s(r.fields[c_ts], &ts) < 0) {
            rc = bad(err, path, r.line, "timestamp", "must look like 2017-10-09 07:01:55");
            break;
        }
        if (parse_fixed(r.fields[c_dur], 3, &dur_ms) < 0) {
            rc = bad(err, path, r.line, "duration", "must be a non-negative number of seconds");
            break;
        }
        if (parse_i64(r.fields[c_gpus], &gpus) < 0 || gpus < 1 || gpus > 4096) {
            rc = bad(err, path, r.line, "num_gpus", "must be a whole number from 1 to 4096");
            break;
        }
        /* gangs of equal workers of at most 8 GPUs: the fewest workers that divide it */
        int64_t workers = (gpus + 7) / 8;
        while (gpus % workers)
            workers++;
        job_spec_free(&j);
        char name[32];
        snprintf(name, sizeof(name), "philly-%zu", ++row);
        j.name = strdup(name);
        j.team = c_vc >= 0 ? strdup(r.fields[c_vc]) : NULL;
        j.kind = KIND_TRAINING;
        j.req = REQ_GPUS;
        j.gpus = (uint16_t)(gpus / workers);
        j.workers = (uint32_t)workers;
        j.submit_ms = ts * 1000;
        j.duration_ms = dur_ms;
        if (ts < t0)
            t0 = ts;
        if (!j.name || (c_vc >= 0 && !j.team) || (rc = job_list_push(&out, &j)) < 0) {
            rc = -ENOMEM;
            break;
        }
    }
    job_spec_free(&j);
    if (rc == -EINVAL && !err->len)
        buf_printf(err, "%s:%zu: unterminated quoted field", path, r.line);
    csv_free(&r);
    if (rc < 0) {
        job_list_free(&out);
        return rc;
    }
    /* times from the first submission */
    for (size_t i = 0; i < out.n; i++)
        out.jobs[i].submit_ms -= t0 * 1000;
    *ret = out;
    return 0;
}

/* ---- dispatch ---- */

static TraceFormat sniff(const char *text)
{
    const char *eol = strchr(text, '\n');
    size_t n = eol ? (size_t)(eol - text) : strlen(text);
    char head[512];
    n = MIN(n, sizeof(head) - 1);
    for (size_t i = 0; i < n; i++)
        head[i] = (char)tolower((unsigned char)text[i]);
    head[n] = '\0';
    if (strstr(head, "num_gpu") && strstr(head, "gpu_milli") && strstr(head, "cpu_milli"))
        return TRACE_ALIBABA2023;
    if (strstr(head, "timestamp") && strstr(head, "num_gpus") && strstr(head, "duration"))
        return TRACE_PHILLY;
    return TRACE_GPUORCH;
}

int trace_parse(const char *text, size_t len, const char *name, TraceFormat fmt, JobList *ret,
                Buf *err)
{
    if (fmt == TRACE_AUTO)
        fmt = sniff(text);
    switch (fmt) {
    case TRACE_ALIBABA2023:
        return load_alibaba(name, text, len, ret, err);
    case TRACE_PHILLY:
        return load_philly(name, text, len, ret, err);
    default:
        return spec_parse_jobs(text, len, name, ret, err);
    }
}

int trace_load(const char *path, TraceFormat fmt, JobList *ret, Buf *err)
{
    char *text = NULL;
    size_t len = 0;
    int r = file_read_all(path, &text, &len);
    if (r < 0) {
        buf_printf(err, "%s: %s", path, strerror(-r));
        return r;
    }
    r = trace_parse(text, len, path, fmt, ret, err);
    free(text);
    return r;
}
