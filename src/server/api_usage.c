/* api_usage.c: GET /api/v1/usage, the chargeback report: GPU-hours and cost of every
 * run inside a window, grouped by any of team, project, pool, model and tier. Closed
 * run segments come from the store; runs still going count from their start to now.
 *
 * Idle showback: what the cluster's counted capacity (nodespan.h: a node while its
 * tier's rule counts it, from the store's spans) held no job for. Each span's idle is
 * its capacity less the allocations on its node inside it; idle rows (team and project
 * "(idle)", kind "idle") are rows of their own under every grouping, never folded into
 * the use of a pool, model or tier. The report's total is then use + idle.
 *
 * Every number is an integer of millionths (metering.h), metered once per segment (and
 * once per part of a segment inside a span, for idle); rows and totals are sums of
 * them, so use + idle = total exactly under any grouping. */
#include "server/api.h"

#include "server/metering.h"
#include "util/macro.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define USAGE_DEFAULT_WINDOW_MS (30LL * 24 * 3600 * 1000)
#define IDLE                    "(idle)"

enum { KEY_TEAM, KEY_PROJECT, KEY_POOL, KEY_MODEL, KEY_TIER, KEY_COUNT };
static const char *const key_names[KEY_COUNT] = {"team", "project", "pool", "model", "tier"};

/* Of the held GPU-equivalent milliseconds, those with a reading and those busy. */
typedef struct Measured {
    int64_t ms, busy_ms;
} Measured;

typedef struct UsageRow {
    char *key;            /* kind, then the group's values, joined by '\x1f' (hash key) */
    char *val[KEY_COUNT]; /* the group's values (NULL: none), for the grouped keys */
    bool idle;            /* idle capacity, not use */
    Meter m;
    Measured measured; /* what the GPUs' readings said of it (measured.h) */
    int64_t *jobs;     /* the jobs that ran in it (duplicates until counted) */
    size_t n_jobs, jobs_cap;
} UsageRow;

typedef struct Usage {
    int64_t from_ms, to_ms;
    int keys[KEY_COUNT]; /* grouped keys in request order */
    size_t n_keys;
    UsageRow *rows;
    size_t n_rows, rows_cap;
    uint32_t *slot; /* hash table of row index + 1, 0 = empty */
    size_t n_slots;
    MeterSpan *spans; /* counted capacity in the window, sorted by node (with_idle) */
    size_t n_spans, spans_cap;
    char **span_strs; /* per span (its tag): copies of its node, pool, model and tier */
    size_t span_strs_cap;
    int err;
} Usage;

static void usage_free(Usage *u)
{
    for (size_t i = 0; i < u->n_rows; i++) {
        free(u->rows[i].key);
        for (int k = 0; k < KEY_COUNT; k++)
            free(u->rows[i].val[k]);
        free(u->rows[i].jobs);
    }
    free(u->rows);
    free(u->slot);
    for (size_t i = 0; i < 4 * u->n_spans; i++)
        free(u->span_strs[i]);
    free(u->span_strs);
    free(u->spans);
}

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static int rehash(Usage *u, size_t n_slots)
{
    uint32_t *slot = calloc(n_slots, sizeof(*slot));
    if (!slot)
        return -ENOMEM;
    for (size_t i = 0; i < u->n_rows; i++) {
        size_t h = fnv1a(u->rows[i].key) % n_slots;
        while (slot[h])
            h = (h + 1) % n_slots;
        slot[h] = (uint32_t)i + 1;
    }
    free(u->slot);
    u->slot = slot;
    u->n_slots = n_slots;
    return 0;
}

/* The row of a group (of use, or of idle capacity), created on first use; NULL when out
 * of memory. Use rows sort before idle rows. */
static UsageRow *row_for(Usage *u, bool idle, const char *const vals[KEY_COUNT])
{
    Buf key = {0};
    buf_puts(&key, idle ? "1\x1f" : "0\x1f");
    for (size_t i = 0; i < u->n_keys; i++) {
        const char *v = vals[u->keys[i]];
        buf_puts(&key, v && *v ? v : "");
        buf_putc(&key, '\x1f');
    }
    if (key.oom || (u->n_slots < 2 * (u->n_rows + 1) && rehash(u, 4 * (u->n_rows + 8)) < 0)) {
        buf_free(&key);
        return NULL;
    }
    const char *k = buf_str(&key);
    size_t h = fnv1a(k) % u->n_slots;
    for (; u->slot[h]; h = (h + 1) % u->n_slots)
        if (!strcmp(u->rows[u->slot[h] - 1].key, k)) {
            buf_free(&key);
            return &u->rows[u->slot[h] - 1];
        }
    if (GROW(u->rows, u->rows_cap, u->n_rows + 1) < 0) {
        buf_free(&key);
        return NULL;
    }
    UsageRow *r = &u->rows[u->n_rows];
    *r = (UsageRow){.key = buf_steal(&key), .idle = idle};
    bool oom = !r->key;
    for (size_t i = 0; i < u->n_keys; i++) {
        const char *v = vals[u->keys[i]];
        if (v && *v && !(r->val[u->keys[i]] = strdup(v)))
            oom = true;
    }
    if (oom) {
        free(r->key);
        for (int x = 0; x < KEY_COUNT; x++)
            free(r->val[x]);
        return NULL;
    }
    u->slot[h] = (uint32_t)++u->n_rows;
    return r;
}

static void meter_add(Meter *to, Meter m)
{
    to->micro_hours += m.micro_hours;
    to->cost_micro_usd += m.cost_micro_usd;
}

/* Count one run segment, clipped to the window: into its row, and into the spans of
 * counted capacity on its node (for idle). */
static int add_segment(Usage *u, const StoreUsage *s)
{
    int64_t from = MAX(s->start_ms, u->from_ms), to = MIN(s->end_ms, u->to_ms);
    if (to <= from)
        return 0;
    const char *vals[KEY_COUNT] = {s->team, s->project, s->pool, s->model, s->tier};
    UsageRow *r = row_for(u, false, vals);
    if (!r || GROW(r->jobs, r->jobs_cap, r->n_jobs + 1) < 0)
        return u->err = -ENOMEM;
    int64_t units = metering_units(s->gpu_equivalents);
    meter_add(&r->m, metering_of(units, to - from, s->price_micro_usd));
    /* an open run is clipped here, a stored one by the store already */
    double part = (double)(to - from) / (double)(s->end_ms - s->start_ms);
    r->measured.ms += (int64_t)((double)s->measured_gpu_ms * part + 0.5);
    r->measured.busy_ms += (int64_t)((double)s->busy_gpu_ms * part + 0.5);
    metering_spans_alloc(u->spans, u->n_spans, s->node, units, from, to, s->price_micro_usd);
    r->jobs[r->n_jobs++] = s->job;
    return 0;
}

/* The runs going when the report was asked for, taken under the lock: copies, as a job
 * may end and leave memory once the lock is released. A closed segment the store has by
 * the time it is read supersedes its open copy (the same job, node and start), so that a
 * run closing while the store is read counts once. */
typedef struct OpenSeg {
    StoreUsage u;
    bool closed;
} OpenSeg;

typedef struct OpenSegs {
    OpenSeg *seg; /* sorted by job */
    size_t n, cap;
    char **strs; /* the copies the segments point at */
    size_t n_strs, strs_cap;
} OpenSegs;

static void open_free(OpenSegs *o)
{
    for (size_t i = 0; i < o->n_strs; i++)
        free(o->strs[i]);
    free(o->strs);
    free(o->seg);
}

static int open_str(OpenSegs *o, const char **str)
{
    if (!*str)
        return 0;
    char *copy = strdup(*str);
    if (!copy || GROW(o->strs, o->strs_cap, o->n_strs + 1) < 0) {
        free(copy);
        return -ENOMEM;
    }
    o->strs[o->n_strs++] = copy;
    *str = copy;
    return 0;
}

/* Runs still going: from their start to now, per worker (workers may sit in different
 * pools). Lock held. */
static int take_open(OpenSegs *o, Server *s, int64_t now)
{
    for (size_t k = 0; k < s->n_holding; k++) {
        const ServerJob *j = s->holding[k];
        /* a move under way holds both allocations */
        size_t n_allocs =
            j->sj.pl.n_workers + (j->life.move != LIFE_MOVE_NONE ? j->sj.moved_from.n_workers : 0);
        for (size_t w = 0; w < n_allocs; w++) {
            bool old = w >= j->sj.pl.n_workers;
            const WorkerAlloc *wa =
                old ? &j->sj.moved_from.workers[w - j->sj.pl.n_workers] : &j->sj.pl.workers[w];
            if (GROW(o->seg, o->cap, o->n + 1) < 0)
                return -ENOMEM;
            o->seg[o->n] = (OpenSeg){0};
            StoreUsage *seg = &o->seg[o->n++].u;
            *seg = server_usage_segment(s, j, wa, old ? j->moved_from_ms : j->pl_from_ms, now);
            if (open_str(o, &seg->team) < 0 || open_str(o, &seg->project) < 0 ||
                open_str(o, &seg->pool) < 0 || open_str(o, &seg->model) < 0 ||
                open_str(o, &seg->node) < 0)
                return -ENOMEM;
        }
    }
    return 0;
}

static int seg_job_cmp(const void *a, const void *b)
{
    int64_t x = ((const OpenSeg *)a)->u.job, y = ((const OpenSeg *)b)->u.job;
    return (x > y) - (x < y);
}

typedef struct Closed {
    Usage *u;
    OpenSegs *open;
} Closed;

static int add_closed(void *arg, const StoreUsage *s)
{
    Closed *c = arg;
    OpenSegs *o = c->open;
    /* the first open segment of the job, by bisection */
    size_t lo = 0, hi = o->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (o->seg[mid].u.job < s->job)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (size_t i = lo; i < o->n && o->seg[i].u.job == s->job; i++) {
        OpenSeg *g = &o->seg[i];
        if (!g->closed && g->u.start_ms == s->start_ms && s->node && !strcmp(g->u.node, s->node)) {
            g->closed = true;
            break;
        }
    }
    return add_segment(c->u, s);
}

/* The open segments no closed one superseded. */
static int add_open(Usage *u, const OpenSegs *o)
{
    for (size_t i = 0; i < o->n; i++)
        if (!o->seg[i].closed && add_segment(u, &o->seg[i].u) < 0)
            return -ENOMEM;
    return 0;
}

/* A span of counted capacity from the store, kept with copies of its names (the
 * store's strings last only for the call). */
static int keep_span(void *arg, const StoreNodeSpan *sp)
{
    Usage *u = arg;
    if (sp->end_ms <= sp->start_ms)
        return 0;
    if (GROW(u->spans, u->spans_cap, u->n_spans + 1) < 0 ||
        GROW(u->span_strs, u->span_strs_cap, 4 * (u->n_spans + 1)) < 0)
        return -ENOMEM;
    char **str = &u->span_strs[4 * u->n_spans];
    const char *from[4] = {sp->node, sp->pool, sp->model, sp->tier};
    bool oom = false;
    for (int i = 0; i < 4; i++) {
        str[i] = from[i] ? strdup(from[i]) : NULL;
        oom |= from[i] && !str[i];
    }
    /* counted before a failure returns, so usage_free frees what was copied */
    u->spans[u->n_spans] = (MeterSpan){.node = str[0] ? str[0] : "",
                                       .start_ms = sp->start_ms,
                                       .end_ms = sp->end_ms,
                                       .gpus = sp->gpus,
                                       .price_micro_usd = sp->price_micro_usd,
                                       .tag = u->n_spans};
    u->n_spans++;
    return oom ? -ENOMEM : 0;
}

/* The idle rows: each span's capacity that no allocation on its node used, under the
 * span's pool, model and tier. A span that was used all the time adds nothing. */
static int add_idle(Usage *u)
{
    for (size_t i = 0; i < u->n_spans; i++) {
        Meter idle = metering_span_idle(&u->spans[i]);
        if (!idle.micro_hours && !idle.cost_micro_usd)
            continue;
        char *const *str = &u->span_strs[4 * u->spans[i].tag];
        const char *vals[KEY_COUNT] = {IDLE, IDLE, str[1], str[2], str[3]};
        UsageRow *r = row_for(u, true, vals);
        if (!r)
            return u->err = -ENOMEM;
        meter_add(&r->m, idle);
    }
    return 0;
}

static int i64_cmp(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static size_t count_distinct(int64_t *v, size_t n)
{
    if (!n)
        return 0;
    qsort(v, n, sizeof(*v), i64_cmp);
    size_t d = 1;
    for (size_t i = 1; i < n; i++)
        d += v[i] != v[i - 1];
    return d;
}

static int row_cmp(const void *a, const void *b)
{
    return strcmp(((const UsageRow *)a)->key, ((const UsageRow *)b)->key);
}

/* Millionths as a JSON number: exact in the reply's 15 significant digits below a
 * billion (hours or dollars). */
static json_t *micro_json(int64_t micro)
{
    return api_json_num((double)micro / 1e6);
}

/* Millionths in decimal, exactly. */
static void put_micro(Buf *b, int64_t micro)
{
    buf_printf(b, "%s%lld.%06lld", micro < 0 ? "-" : "", (long long)(llabs(micro) / 1000000),
               (long long)(llabs(micro) % 1000000));
}

static int parse_group_by(const char *q, Usage *u, Buf *err)
{
    if (!q)
        q = "team,project";
    _cleanup_free_ char *copy = strdup(q);
    if (!copy)
        return -ENOMEM;
    char *save = NULL;
    for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int k = 0;
        while (k < KEY_COUNT && strcmp(t, key_names[k]))
            k++;
        if (k == KEY_COUNT) {
            buf_printf(err, "query 'group_by': unknown key '%s' (team, project, pool, model, tier)",
                       t);
            return -EINVAL;
        }
        for (size_t i = 0; i < u->n_keys; i++)
            if (u->keys[i] == k) {
                buf_printf(err, "query 'group_by': '%s' given twice", t);
                return -EINVAL;
            }
        u->keys[u->n_keys++] = k;
    }
    return 0;
}

static int parse_ms(const HttpRequest *rq, const char *key, int64_t def, int64_t *ret, Buf *err)
{
    const char *v = http_query(rq, key);
    if (!v) {
        *ret = def;
        return 0;
    }
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (!*v || *end || errno) {
        buf_printf(err, "query '%s': expected milliseconds since the epoch", key);
        return -EINVAL;
    }
    *ret = x;
    return 0;
}

static void csv_field(Buf *b, const char *v)
{
    if (!v)
        return;
    if (!strpbrk(v, ",\"\r\n")) {
        buf_puts(b, v);
        return;
    }
    buf_putc(b, '"');
    for (; *v; v++) {
        if (*v == '"')
            buf_putc(b, '"');
        buf_putc(b, *v);
    }
    buf_putc(b, '"');
}

static void reply_csv(const Usage *u, const size_t *jobs, HttpResponse *rp)
{
    Buf b = {0};
    for (size_t i = 0; i < u->n_keys; i++)
        buf_printf(&b, "%s,", key_names[u->keys[i]]);
    buf_puts(&b, "gpu_hours,cost_usd,jobs,kind\n");
    for (size_t r = 0; r < u->n_rows; r++) {
        const UsageRow *row = &u->rows[r];
        for (size_t i = 0; i < u->n_keys; i++) {
            csv_field(&b, row->val[u->keys[i]]);
            buf_putc(&b, ',');
        }
        put_micro(&b, row->m.micro_hours);
        buf_putc(&b, ',');
        put_micro(&b, row->m.cost_micro_usd);
        buf_printf(&b, ",%zu,%s\n", jobs[r], row->idle ? "idle" : "use");
    }
    buf_free(&rp->body);
    rp->body = b;
    rp->status = 200;
    rp->content_type = "text/csv; charset=utf-8";
}

/* ms as hours, rounded to the micro-hour as gpu_hours is */
static json_t *ms_hours_json(int64_t ms)
{
    return micro_json((ms * 1000 + 1800) / 3600);
}

static json_t *totals_json(Meter m, Measured me, size_t jobs)
{
    return json_pack("{s:o,s:o,s:I,s:o,s:o}", "gpu_hours", micro_json(m.micro_hours), "cost_usd",
                     micro_json(m.cost_micro_usd), "jobs", (json_int_t)jobs, "measured_gpu_hours",
                     ms_hours_json(me.ms), "busy_gpu_hours", ms_hours_json(me.busy_ms));
}

static void measured_add(Measured *to, Measured m)
{
    to->ms += m.ms;
    to->busy_ms += m.busy_ms;
}

/* The rows, the total, and the total's two parts: use and idle. */
static void reply_json(const Usage *u, const size_t *jobs, size_t total_jobs, HttpResponse *rp)
{
    json_t *keys = json_array(), *rows = json_array();
    for (size_t i = 0; i < u->n_keys; i++)
        json_array_append_new(keys, json_string(key_names[u->keys[i]]));
    Meter total = {0, 0}, part[2] = {{0, 0}, {0, 0}};
    Measured mtotal = {0, 0}, mpart[2] = {{0, 0}, {0, 0}};
    for (size_t r = 0; r < u->n_rows; r++) {
        const UsageRow *row = &u->rows[r];
        json_t *o = totals_json(row->m, row->measured, jobs[r]);
        for (size_t i = 0; i < u->n_keys; i++) {
            const char *v = row->val[u->keys[i]];
            json_object_set_new(o, key_names[u->keys[i]], v ? json_string(v) : json_null());
        }
        json_object_set_new(o, "kind", json_string(row->idle ? "idle" : "use"));
        json_array_append_new(rows, o);
        meter_add(&total, row->m);
        meter_add(&part[row->idle], row->m);
        measured_add(&mtotal, row->measured);
        measured_add(&mpart[row->idle], row->measured);
    }
    http_reply_json(rp, 200,
                    json_pack("{s:I,s:I,s:o,s:o,s:o,s:o,s:o}", "from_ms", (json_int_t)u->from_ms,
                              "to_ms", (json_int_t)u->to_ms, "group_by", keys, "rows", rows,
                              "total", totals_json(total, mtotal, total_jobs), "use",
                              totals_json(part[0], mpart[0], total_jobs), "idle",
                              totals_json(part[1], mpart[1], 0)));
}

void api_usage(Server *s, const HttpRequest *rq, HttpResponse *rp)
{
    Usage u = {0};
    OpenSegs open = {0};
    Buf err = {0};
    size_t *jobs = NULL;
    int64_t *all = NULL;
    int64_t now = server_now_ms();
    int r = parse_ms(rq, "to", now, &u.to_ms, &err);
    if (r == 0)
        r = parse_ms(rq, "from", u.to_ms - USAGE_DEFAULT_WINDOW_MS, &u.from_ms, &err);
    if (r == 0)
        r = parse_group_by(http_query(rq, "group_by"), &u, &err);
    /* nothing is metered yet after now, idle capacity included */
    u.to_ms = MIN(u.to_ms, now);
    if (r == 0 && u.from_ms >= u.to_ms) {
        buf_printf(&err, "query 'from' must be before 'to' and before now");
        r = -EINVAL;
    }
    const char *idle = http_query(rq, "include_idle");
    bool with_idle = !idle || !strcmp(idle, "true") || !strcmp(idle, "1");
    bool without_idle = idle && (!strcmp(idle, "false") || !strcmp(idle, "0"));
    if (r == 0 && !with_idle && !without_idle) {
        buf_printf(&err, "query 'include_idle': expected true or false");
        r = -EINVAL;
    }
    const char *format = http_query(rq, "format");
    const char *accept = http_header(rq, "Accept");
    bool csv = format ? !strcmp(format, "csv") : accept && strstr(accept, "text/csv");
    if (r == 0 && format && strcmp(format, "csv") && strcmp(format, "json")) {
        buf_printf(&err, "query 'format': expected json or csv");
        r = -EINVAL;
    }
    if (r < 0) {
        if (r == -ENOMEM)
            http_reply_error(rp, 500, "out of memory");
        else
            http_reply_error(rp, 400, "%s", buf_str(&err));
        goto out;
    }

    /* Only the runs going now are read under the lock (once what it holds is durable);
     * the history is read from the store without it. */
    server_lock(s);
    r = take_open(&open, s, u.to_ms);
    pthread_mutex_unlock(&s->lock);
    if (open.n)
        qsort(open.seg, open.n, sizeof(*open.seg), seg_job_cmp);
    if (r == 0 && with_idle)
        r = store_node_spans_query(s->store, u.from_ms, u.to_ms, keep_span, &u);
    metering_spans_sort(u.spans, u.n_spans);
    if (r == 0)
        r = store_usage_query(s->store, u.from_ms, u.to_ms, add_closed,
                              &(Closed){.u = &u, .open = &open});
    if (r == 0 && !u.err)
        r = add_open(&u, &open);
    if (r == 0 && !u.err)
        r = add_idle(&u);
    if (r < 0 || u.err) {
        http_reply_error(rp, 500,
                         r == -ENOMEM || u.err ? "out of memory"
                                               : "cannot read the usage from the store");
        goto out;
    }

    if (u.n_rows)
        qsort(u.rows, u.n_rows, sizeof(*u.rows), row_cmp);
    size_t n_all = 0;
    for (size_t i = 0; i < u.n_rows; i++)
        n_all += u.rows[i].n_jobs;
    jobs = calloc(u.n_rows + 1, sizeof(*jobs));
    all = malloc((n_all + 1) * sizeof(*all));
    if (!jobs || !all) {
        http_reply_error(rp, 500, "out of memory");
        goto out;
    }
    n_all = 0;
    for (size_t i = 0; i < u.n_rows; i++) {
        if (u.rows[i].n_jobs) /* idle lines have none */
            memcpy(all + n_all, u.rows[i].jobs, u.rows[i].n_jobs * sizeof(*all));
        n_all += u.rows[i].n_jobs;
        jobs[i] = count_distinct(u.rows[i].jobs, u.rows[i].n_jobs);
    }
    if (csv)
        reply_csv(&u, jobs, rp);
    else
        reply_json(&u, jobs, count_distinct(all, n_all), rp);
out:
    free(jobs);
    free(all);
    buf_free(&err);
    usage_free(&u);
    open_free(&open);
}
