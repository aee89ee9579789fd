/* spec.c: the entry points of the spec readers: read a file, decide what it is (YAML or
 * JSON, node-list CSV or job CSV) and hand it to the right parser; and the job list.
 * What a file is follows from its content, with the .csv name as the one hint, so a
 * spec piped through a temporary file reads the same. */
#include "spec/spec.h"

#include "spec/field.h"
#include "util/file.h"
#include "util/macro.h"

#include <ctype.h>
#include <errno.h>
#include <string.h>
#include <strings.h>

void job_list_free(JobList *l)
{
    if (!l)
        return;
    for (size_t i = 0; i < l->n; i++)
        job_spec_free(&l->jobs[i]);
    free(l->jobs);
    *l = (JobList){0};
}

int job_list_push(JobList *l, const JobSpec *j)
{
    if (GROW(l->jobs, l->cap, l->n + 1) < 0)
        return -ENOMEM;
    int r = job_spec_copy(j, &l->jobs[l->n]);
    if (r < 0)
        return r;
    l->n++;
    return 0;
}

int job_list_take(JobList *l, JobSpec *j)
{
    if (GROW(l->jobs, l->cap, l->n + 1) < 0)
        return -ENOMEM;
    l->jobs[l->n++] = *j;
    job_spec_init(j);
    return 0;
}

char *spec_base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    const char *dot = strrchr(base, '.');
    size_t n = dot && dot != base ? (size_t)(dot - base) : strlen(base);
    return strndup(base, n);
}

/* The first non-blank line of text, as [*ret_start, *ret_end). */
static bool first_line(const char *text, size_t len, const char **ret_start, const char **ret_end)
{
    const char *p = text, *end = text + len;
    if (len >= 3 && memcmp(p, "\xEF\xBB\xBF", 3) == 0)
        p += 3;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *e = nl ? nl : end;
        const char *q = p;
        while (q < e && isspace((unsigned char)*q))
            q++;
        if (q < e) {
            while (e > q && isspace((unsigned char)e[-1]))
                e--;
            *ret_start = q;
            *ret_end = e;
            return true;
        }
        p = nl ? nl + 1 : end;
    }
    return false;
}

/* A CSV header: two or more comma-separated names of letters, digits and _. Says
 * whether it has the node list's sn and model columns. */
static bool csv_header(const char *s, const char *end, bool *ret_node_list)
{
    size_t cells = 0;
    bool sn = false, model = false;
    while (s <= end) {
        const char *comma = memchr(s, ',', (size_t)(end - s));
        const char *e = comma ? comma : end;
        const char *a = s, *b = e;
        while (a < b && (isspace((unsigned char)*a) || *a == '"'))
            a++;
        while (b > a && (isspace((unsigned char)b[-1]) || b[-1] == '"'))
            b--;
        if (a == b || !(isalpha((unsigned char)*a) || *a == '_'))
            return false;
        for (const char *q = a; q < b; q++)
            if (!isalnum((unsigned char)*q) && *q != '_')
                return false;
        sn |= (size_t)(b - a) == 2 && strncasecmp(a, "sn", 2) == 0;
        model |= (size_t)(b - a) == 5 && strncasecmp(a, "model", 5) == 0;
        cells++;
        if (!comma)
            break;
        s = comma + 1;
    }
    *ret_node_list = sn && model;
    return cells >= 2;
}

/* Does a YAML text that does not parse look like a cluster spec? A line that starts a
 * top-level "pools" key, in YAML or JSON spelling. */
static bool mentions_pools(const char *text, size_t len)
{
    const char *p = text, *end = text + len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *e = nl ? nl : end;
        while (p < e && (*p == ' ' || *p == '\t' || *p == '{' || *p == '"' || *p == '\''))
            p++;
        if (e - p >= 6 && strncmp(p, "pools", 5) == 0 &&
            (p[5] == ':' ||
             ((p[5] == '"' || p[5] == '\'') && memchr(p + 5, ':', (size_t)(e - p - 5)))))
            return true;
        p = nl ? nl + 1 : end;
    }
    return false;
}

typedef enum Format { FMT_EMPTY, FMT_YAML, FMT_NODE_CSV, FMT_JOB_CSV } Format;

static Format sniff_format(const char *path, const char *text, size_t len)
{
    const char *s, *e;
    if (!first_line(text, len, &s, &e))
        return FMT_EMPTY;
    bool node_list = false;
    bool header = csv_header(s, e, &node_list);
    if (header || (path && field_has_suffix(path, ".csv")))
        return node_list ? FMT_NODE_CSV : FMT_JOB_CSV;
    return FMT_YAML;
}

/* What a YAML text is: parsed when it parses, guessed when it does not (so that the
 * right reader reports its errors). */
static SpecKind sniff_yaml(const char *text, size_t len)
{
    Buf ignore = {0};
    FieldCtx x;
    field_ctx_init(&x, "", "field", &ignore);
    FieldYaml y;
    SpecKind kind = SPEC_UNKNOWN;
    if (field_yaml_open(&y, &x, text, len) < 0) {
        buf_free(&ignore);
        return mentions_pools(text, len) ? SPEC_CLUSTER : SPEC_JOBS;
    }
    int r = field_yaml_next(&y);
    struct fy_node *root = r > 0 ? fy_document_root(y.doc) : NULL;
    if (r < 0)
        kind = mentions_pools(text, len) ? SPEC_CLUSTER : SPEC_JOBS;
    else if (root && fy_node_is_mapping(root) && fy_node_mapping_lookup_by_string(root, "pools", 5))
        kind = SPEC_CLUSTER;
    else if (root && (fy_node_is_mapping(root) || fy_node_is_sequence(root)))
        kind = SPEC_JOBS;
    field_yaml_close(&y);
    buf_free(&ignore);
    return kind;
}

SpecKind spec_sniff(const char *path, const char *text, size_t len)
{
    switch (sniff_format(path, text, len)) {
    case FMT_NODE_CSV:
        return SPEC_CLUSTER;
    case FMT_JOB_CSV:
        return SPEC_JOBS_CSV;
    case FMT_YAML:
        return sniff_yaml(text, len);
    case FMT_EMPTY:
        break;
    }
    return SPEC_UNKNOWN;
}

static int read_file(const char *path, char **ret_text, size_t *ret_len, Buf *err)
{
    int r = file_read_all(path, ret_text, ret_len);
    if (r < 0) {
        if (err->len)
            buf_putc(err, '\n');
        buf_printf(err, "%s: %s", path, strerror(-r));
    }
    return r;
}

int spec_load_cluster(const char *path, Cluster **ret, Buf *err)
{
    return spec_load_cluster_flags(path, 0, ret, err);
}

int spec_load_cluster_flags(const char *path, unsigned flags, Cluster **ret, Buf *err)
{
    _cleanup_free_ char *text = NULL;
    size_t len;
    int r = read_file(path, &text, &len, err);
    if (r < 0)
        return r;
    return spec_parse_cluster(text, len, path, flags, ret, err);
}

int spec_parse_cluster(const char *text, size_t len, const char *name, unsigned flags,
                       Cluster **ret, Buf *err)
{
    switch (sniff_format(name, text, len)) {
    case FMT_NODE_CSV:
        return spec_parse_alibaba_nodes(text, len, name, ret, err);
    case FMT_JOB_CSV:
        if (err->len)
            buf_putc(err, '\n');
        buf_printf(err,
                   "%s:1: not a node list: a node list's header has sn, cpu_milli, "
                   "memory_mib, gpu and model",
                   name);
        return -EINVAL;
    case FMT_EMPTY:
    case FMT_YAML:
        break;
    }
    return spec_parse_cluster_yaml_flags(text, len, name, flags, ret, err);
}

int spec_load_jobs(const char *path, JobList *ret, Buf *err)
{
    _cleanup_free_ char *text = NULL;
    size_t len;
    int r = read_file(path, &text, &len, err);
    if (r < 0)
        return r;
    return spec_parse_jobs(text, len, path, ret, err);
}

int spec_parse_jobs(const char *text, size_t len, const char *name, JobList *ret, Buf *err)
{
    switch (sniff_format(name, text, len)) {
    case FMT_NODE_CSV:
        if (err->len)
            buf_putc(err, '\n');
        buf_printf(err, "%s:1: this is a node list (a cluster), not a job file", name);
        return -EINVAL;
    case FMT_JOB_CSV:
        return spec_parse_jobs_csv(text, len, name, ret, err);
    case FMT_EMPTY:
    case FMT_YAML:
        break;
    }
    if (sniff_yaml(text, len) == SPEC_CLUSTER) {
        if (err->len)
            buf_putc(err, '\n');
        buf_printf(err, "%s:1: this is a cluster spec (it has pools), not a job file", name);
        return -EINVAL;
    }
    return spec_parse_jobs_yaml(text, len, name, ret, err);
}
