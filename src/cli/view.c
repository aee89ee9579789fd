/* view.c: the client commands' text for the server's replies (see view.h). Tables go
 * through table.c, which fits them to the width; the node map packs one item per GPU
 * onto lines of the width, so an eight-GPU node takes a line or two and a GPU cut into
 * seven MIG slices still reads as one item: consecutive slices of one profile are
 * written once, with their jobs ("1g.10gb:17,17,-"). */
#include "cli/view.h"

#include "cli/table.h"
#include "spec/render.h"
#include "util/macro.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- reading replies: absent, null or mistyped fields read as absent ---- */

static const char *jstr(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

static bool jint(const json_t *o, const char *key, json_int_t *ret)
{
    const json_t *v = json_object_get(o, key);
    if (json_is_integer(v))
        *ret = json_integer_value(v);
    else if (json_is_real(v))
        *ret = (json_int_t)json_real_value(v);
    else
        return false;
    return true;
}

static bool jnum(const json_t *o, const char *key, double *ret)
{
    const json_t *v = json_object_get(o, key);
    if (!json_is_number(v))
        return false;
    *ret = json_number_value(v);
    return true;
}

static const json_t *reply_list(const json_t *reply, const char *key, Buf *err)
{
    const json_t *list = json_object_get(reply, key);
    if (!json_is_array(list)) {
        buf_printf(err, "the server's reply has no '%s' list", key);
        return NULL;
    }
    return list;
}

void view_duration(Buf *b, int64_t ms)
{
    long long s = ms > 0 ? ms / 1000 : 0;
    if (s < 60)
        buf_printf(b, "%llds", s);
    else if (s < 3600)
        buf_printf(b, "%lldm", s / 60);
    else if (s < 10 * 3600)
        buf_printf(b, "%lldh%02lldm", s / 3600, s % 3600 / 60);
    else if (s < 48 * 3600)
        buf_printf(b, "%lldh", s / 3600);
    else
        buf_printf(b, "%lldd", s / 86400);
}

void view_time_utc(Buf *b, int64_t ms)
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    char s[32];
    if (!gmtime_r(&t, &tm) || !strftime(s, sizeof(s), "%Y-%m-%d %H:%M", &tm)) {
        buf_printf(b, "%lld ms", (long long)ms);
        return;
    }
    buf_puts(b, s);
}

/* ---- submit and cancel ---- */

static int submitted_line(const json_t *job, Buf *out, Buf *err)
{
    json_int_t id, pos;
    if (!jint(job, "id", &id)) {
        buf_puts(err, "a job in the server's reply has no 'id'");
        return -EINVAL;
    }
    const char *name = jstr(job, "name"), *state = jstr(job, "state");
    buf_printf(out, "submitted %lld", (long long)id);
    if (name)
        buf_printf(out, " %s", name);
    buf_printf(out, ": %s", state ? state : "-");
    if (jint(job, "position", &pos))
        buf_printf(out, ", position %lld", (long long)pos);
    buf_putc(out, '\n');
    return 0;
}

int view_submitted(const json_t *reply, Buf *out, Buf *err)
{
    if (!json_is_object(reply)) {
        buf_puts(err, "the server's reply is not a JSON object");
        return -EINVAL;
    }
    const json_t *jobs = json_object_get(reply, "jobs");
    if (!jobs)
        return submitted_line(reply, out, err);
    if (!json_is_array(jobs)) {
        buf_puts(err, "'jobs' in the server's reply is not a list");
        return -EINVAL;
    }
    size_t i;
    const json_t *j;
    json_array_foreach(jobs, i, j)
    {
        int r = submitted_line(j, out, err);
        if (r < 0)
            return r;
    }
    return out->oom ? -ENOMEM : 0;
}

int view_cancelled(const json_t *job, Buf *out, Buf *err)
{
    json_int_t id;
    if (!jint(job, "id", &id)) {
        buf_puts(err, "the server's reply names no job 'id'");
        return -EINVAL;
    }
    const char *state = jstr(job, "state");
    if (state && (!strcmp(state, "cancelled") || !strcmp(state, "stopping")))
        buf_printf(out, "%s %lld\n", state, (long long)id);
    else
        buf_printf(out, "job %lld: %s\n", (long long)id, state ? state : "state unknown");
    return out->oom ? -ENOMEM : 0;
}

/* ---- queue ---- */

/* At 80 columns the fixed columns take about 47, which leaves some 33 to share: the
 * reason gives way first, down to 16, then the name (to 10) and the team (to 6). */
static const TableCol queue_cols[] = {
    {"ID", COL_RIGHT, 0, 0, 0},   {"NAME", COL_LEFT, 20, 10, 1},   {"TEAM", COL_LEFT, 10, 6, 1},
    {"PRIO", COL_LEFT, 0, 0, 0},  {"STATE", COL_LEFT, 0, 0, 0},    {"POS", COL_RIGHT, 0, 0, 0},
    {"GPUS", COL_RIGHT, 0, 0, 0}, {"AGE/ETA", COL_RIGHT, 0, 0, 0}, {"REASON", COL_LEFT, 0, 16, 2},
};

static const char *queue_reason(const json_t *job)
{
    const char *state = jstr(job, "state"), *reason = jstr(job, "reason");
    return state && !strcmp(state, "pending") && reason && *reason ? reason : NULL;
}

static void queue_time(Buf *b, const json_t *job, int64_t now_ms)
{
    const char *state = jstr(job, "state");
    json_int_t eta, submit;
    if (state && !strcmp(state, "pending") && jint(job, "eta_ms", &eta)) {
        if (eta <= now_ms) {
            buf_puts(b, "eta now");
        } else {
            buf_puts(b, "eta ");
            view_duration(b, eta - now_ms);
        }
    } else if (jint(job, "submit_ms", &submit)) {
        view_duration(b, now_ms - submit);
    } else {
        buf_puts(b, "-");
    }
}

int view_queue(const json_t *reply, int64_t now_ms, size_t width, Buf *out, Buf *err)
{
    const json_t *jobs = reply_list(reply, "jobs", err);
    if (!jobs)
        return -EINVAL;
    size_t i;
    const json_t *job;
    bool reasons = false;
    json_array_foreach(jobs, i, job)
    {
        if (!json_is_object(job)) {
            buf_printf(err, "job %zu of the server's reply is not an object", i + 1);
            return -EINVAL;
        }
        reasons |= queue_reason(job) != NULL;
    }
    /* who submitted, after the team, when the server names anyone (it names the user of
     * the submitter's token) */
    static const TableCol user_col = {"USER", COL_LEFT, 10, 5, 1};
    bool users = false;
    json_array_foreach(jobs, i, job)
    {
        users |= jstr(job, "user") != NULL;
    }
    TableCol cols[ARRAY_SIZE(queue_cols) + 1];
    size_t n_cols = 0;
    for (size_t k = 0; k < ARRAY_SIZE(queue_cols); k++) {
        if (k == ARRAY_SIZE(queue_cols) - 1 && !reasons)
            break;
        cols[n_cols++] = queue_cols[k];
        if (users && !strcmp(queue_cols[k].header, "TEAM"))
            cols[n_cols++] = user_col;
    }
    Table t;
    table_init(&t, cols, n_cols);
    Buf cell = {0};
    json_array_foreach(jobs, i, job)
    {
        json_int_t id, pos;
        double gpus;
        const char *prio = jstr(job, "priority"), *state = jstr(job, "state");
        if (jint(job, "id", &id))
            table_cell(&t, "%lld", (long long)id);
        else
            table_cell(&t, "-");
        table_cell(&t, "%s", jstr(job, "name") ? jstr(job, "name") : "-");
        table_cell(&t, "%s", jstr(job, "team") ? jstr(job, "team") : "-");
        if (users)
            table_cell(&t, "%s", jstr(job, "user") ? jstr(job, "user") : "-");
        table_cell(&t, "%s", !prio ? "-" : !strcmp(prio, "production") ? "prod" : prio);
        table_cell(&t, "%s", state ? state : "-");
        if (jint(job, "position", &pos))
            table_cell(&t, "%lld", (long long)pos);
        else
            table_cell(&t, "%s", "");
        buf_reset(&cell);
        if (jnum(job, "gpu_equivalents", &gpus))
            render_num(&cell, gpus, 2);
        else
            buf_puts(&cell, "-");
        table_cell(&t, "%s", buf_str(&cell));
        buf_reset(&cell);
        queue_time(&cell, job, now_ms);
        table_cell(&t, "%s", buf_str(&cell));
        if (reasons)
            table_cell(&t, "%s", queue_reason(job) ? queue_reason(job) : "");
    }
    int r = cell.oom ? -ENOMEM : table_render(&t, width, out);
    buf_free(&cell);
    table_free(&t);
    return r;
}

/* ---- nodes ---- */

/* Items laid out on lines of at most `width` columns: the first line starts at
 * first_indent, the others at indent; padding asked for after an item is written
 * only if another item follows on the same line. */
typedef struct Packer {
    Buf *out;
    size_t width, first_indent, indent;
    size_t col, owed, lines;
    bool empty;
} Packer;

static void pack_begin(Packer *p, Buf *out, size_t width, size_t first_indent, size_t indent)
{
    *p = (Packer){
        .out = out, .width = width, .first_indent = first_indent, .indent = indent, .empty = true};
}

static void pack_end(Packer *p)
{
    if (p->empty)
        return;
    buf_putc(p->out, '\n');
    p->lines++;
    p->empty = true;
    p->owed = 0;
}

static void spaces(Buf *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        buf_putc(b, ' ');
}

static void pack_item(Packer *p, const char *item, const char *sep, size_t pad_to)
{
    size_t w = text_width(item), sw = strlen(sep) + p->owed;
    if (!p->empty && p->width && p->col + sw + w > p->width)
        pack_end(p);
    if (p->empty) {
        p->col = p->lines ? p->indent : p->first_indent;
        spaces(p->out, p->col);
        p->empty = false;
    } else {
        spaces(p->out, p->owed);
        buf_puts(p->out, sep);
        p->col += sw;
    }
    size_t room = !p->width ? w : p->width > p->col ? p->width - p->col : 1;
    text_cut(p->out, item, room);
    p->col += MIN(w, room);
    p->owed = pad_to > w ? pad_to - w : 0;
}

typedef struct MigSlice {
    json_int_t start;
    const char *profile;
    json_int_t job; /* 0: free */
} MigSlice;

static int slice_cmp(const void *a, const void *b)
{
    const MigSlice *x = a, *y = b;
    return (x->start > y->start) - (x->start < y->start);
}

/* "0 mig [1g.10gb:17,- 3g.40gb:18]": slices by start, a profile written once for a
 * run of slices of it. */
static int gpu_mig(Buf *b, const json_t *mig)
{
    size_t n = json_array_size(mig);
    MigSlice *s = calloc(n ? n : 1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        const json_t *m = json_array_get(mig, i);
        const char *profile = jstr(m, "profile");
        s[i].profile = profile ? profile : "?";
        if (!jint(m, "start", &s[i].start))
            s[i].start = (json_int_t)i;
        if (!jint(m, "job", &s[i].job))
            s[i].job = 0;
    }
    qsort(s, n, sizeof(*s), slice_cmp);
    buf_puts(b, " mig [");
    for (size_t i = 0; i < n; i++) {
        bool same = i > 0 && !strcmp(s[i].profile, s[i - 1].profile);
        if (same)
            buf_putc(b, ',');
        else
            buf_printf(b, "%s%s:", i ? " " : "", s[i].profile);
        if (s[i].job > 0)
            buf_printf(b, "%lld", (long long)s[i].job);
        else
            buf_putc(b, '-');
    }
    buf_putc(b, ']');
    free(s);
    return 0;
}

/* What a GPU holds, after its index: " free", " whole 21", " mig [...]", ... */
static int gpu_state(Buf *b, const json_t *g)
{
    const char *mode = jstr(g, "mode");
    const json_t *jobs = json_object_get(g, "jobs");
    size_t k;
    const json_t *j;
    if (mode && !strcmp(mode, "mig")) {
        if (gpu_mig(b, json_object_get(g, "mig")) < 0)
            return -ENOMEM;
    } else if (mode && !strcmp(mode, "shared")) {
        buf_puts(b, " shared [");
        json_array_foreach(jobs, k, j)
        {
            json_int_t id;
            double f;
            buf_printf(b, "%s%lld:", k ? " " : "", jint(j, "job", &id) ? (long long)id : 0LL);
            if (jnum(j, "fraction", &f))
                render_num(b, f, 3);
            else
                buf_putc(b, '?');
        }
        buf_putc(b, ']');
    } else if (json_array_size(jobs) == 0) {
        buf_printf(b, " %s", !mode || !strcmp(mode, "whole") ? "free" : mode);
    } else {
        buf_printf(b, " %s ", mode ? mode : "whole");
        json_array_foreach(jobs, k, j)
        {
            json_int_t id;
            buf_printf(b, "%s%lld", k ? "," : "", jint(j, "job", &id) ? (long long)id : 0LL);
        }
    }
    if (json_is_true(json_object_get(g, "draining")))
        buf_puts(b, " drain");
    return 0;
}

/* One item, its indexes first ("4" or "4-7"); an item wider than a line has its words
 * go on as many lines as they need. */
static void gpu_item(Packer *p, Buf *item, json_int_t first, json_int_t last, const char *state)
{
    buf_reset(item);
    if (first == last)
        buf_printf(item, "%lld%s", (long long)first, state);
    else
        buf_printf(item, "%lld-%lld%s", (long long)first, (long long)last, state);
    if (!p->width || text_width(buf_str(item)) + p->indent <= p->width) {
        pack_item(p, buf_str(item), "   ", 0);
        return;
    }
    char *save = NULL;
    bool first_word = true;
    for (char *w = strtok_r(item->data, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
        pack_item(p, w, first_word ? "   " : " ", 0);
        first_word = false;
    }
}

/* GPUs in a row of indexes that hold the same ("free", "whole 21") make one item,
 * "4-7 free", so an eight-GPU node mostly takes one line. */
static void gpu_map(Buf *out, const json_t *gpus, size_t width)
{
    Packer p;
    pack_begin(&p, out, width, 2, 2);
    Buf item = {0}, state = {0}, run = {0};
    json_int_t first = 0, last = -2;
    size_t i;
    const json_t *g;
    json_array_foreach(gpus, i, g)
    {
        json_int_t index;
        if (!jint(g, "index", &index))
            index = (json_int_t)i;
        buf_reset(&state);
        if (gpu_state(&state, g) < 0) {
            out->oom = true;
            break;
        }
        if (index == last + 1 && !strcmp(buf_str(&state), buf_str(&run))) {
            last = index;
            continue;
        }
        if (last >= first)
            gpu_item(&p, &item, first, last, buf_str(&run));
        buf_reset(&run);
        buf_puts(&run, buf_str(&state));
        first = last = index;
    }
    if (last >= first && !out->oom)
        gpu_item(&p, &item, first, last, buf_str(&run));
    pack_end(&p);
    out->oom |= item.oom || state.oom || run.oom;
    buf_free(&item);
    buf_free(&state);
    buf_free(&run);
}

typedef struct NodeWidths {
    size_t name, model, tier, state;
} NodeWidths;

static void model_text(Buf *b, const json_t *node)
{
    const char *model = jstr(node, "model");
    size_t n = json_array_size(json_object_get(node, "gpus"));
    if (n)
        buf_printf(b, "%s x%zu", model ? model : "GPU", n);
    else
        buf_puts(b, "no GPUs");
}

static void node_line(Buf *out, const json_t *node, const NodeWidths *nw, int64_t now_ms,
                      size_t width)
{
    Packer p;
    Buf f = {0};
    const char *name = jstr(node, "name"), *tier = jstr(node, "tier"), *state = jstr(node, "state");
    pack_begin(&p, out, width, 0, 4);
    pack_item(&p, name ? name : "-", "", nw->name);
    model_text(&f, node);
    pack_item(&p, buf_str(&f), "  ", nw->model);
    pack_item(&p, tier ? tier : "-", "  ", nw->tier);
    pack_item(&p, state ? state : "-", "  ", nw->state);
    double total, used;
    if (jnum(node, "cpu_milli", &total) && jnum(node, "cpu_used_milli", &used)) {
        buf_reset(&f);
        buf_puts(&f, "cpu ");
        render_num(&f, used / 1000, 1);
        buf_putc(&f, '/');
        render_num(&f, total / 1000, 1);
        pack_item(&p, buf_str(&f), "  ", 0);
    }
    if (jnum(node, "memory_mib", &total) && jnum(node, "memory_used_mib", &used)) {
        buf_reset(&f);
        buf_puts(&f, "mem ");
        render_num(&f, used / 1024, 1);
        buf_putc(&f, '/');
        render_num(&f, total / 1024, 1);
        buf_puts(&f, " GiB");
        pack_item(&p, buf_str(&f), "  ", 0);
    }
    /* when a node that is not ready was last heard from ("unknown" alone says it
     * never was) */
    json_int_t seen;
    if ((!state || strcmp(state, "ready")) && jint(node, "last_seen_ms", &seen)) {
        buf_reset(&f);
        buf_puts(&f, "seen ");
        view_duration(&f, now_ms - seen);
        buf_puts(&f, " ago");
        pack_item(&p, buf_str(&f), "  ", 0);
    }
    pack_end(&p);
    out->oom |= f.oom;
    buf_free(&f);
}

/* A node's sick GPUs (fenced: the node takes no new work), one line each. */
static void sick_lines(Buf *out, const json_t *node)
{
    size_t i;
    json_t *g;
    json_array_foreach(json_object_get(node, "sick_gpus"), i, g)
    {
        const char *why = jstr(g, "reason");
        buf_printf(out, "  GPU %lld sick: %s (fenced: no new work on this node)\n",
                   (long long)json_integer_value(json_object_get(g, "index")), why ? why : "?");
    }
}

/* A mismatched node's difference, under its line, wrapped at word boundaries. */
static void mismatch_lines(Buf *out, const json_t *node, size_t width)
{
    const char *text = jstr(node, "mismatch");
    if (!text)
        return;
    Packer p;
    Buf word = {0};
    pack_begin(&p, out, width, 2, 4);
    pack_item(&p, "mismatch:", "", 0);
    for (const char *c = text; *c;) {
        size_t n = strcspn(c, " ");
        buf_reset(&word);
        buf_printf(&word, "%.*s", (int)n, c);
        if (n)
            pack_item(&p, buf_str(&word), " ", 0);
        c += n;
        c += strspn(c, " ");
    }
    pack_end(&p);
    out->oom |= word.oom;
    buf_free(&word);
}

static void nodes_summary(Buf *out, const json_t *nodes)
{
    static const char *const states[] = {"ready", "unknown", "lost", "mismatched", "down"};
    size_t count[ARRAY_SIZE(states) + 1] = {0}, n = json_array_size(nodes), i, k;
    double gpus = 0, used = 0, u;
    const json_t *node, *g;
    json_array_foreach(nodes, i, node)
    {
        const char *state = jstr(node, "state");
        size_t s = 0;
        while (s < ARRAY_SIZE(states) && (!state || strcmp(state, states[s])))
            s++;
        count[s]++;
        json_array_foreach(json_object_get(node, "gpus"), k, g)
        {
            gpus++;
            used += jnum(g, "used", &u) ? u : 0;
        }
    }
    buf_printf(out, "%zu node%s:", n, n == 1 ? "" : "s");
    const char *sep = " ";
    for (size_t s = 0; s <= ARRAY_SIZE(states); s++) {
        if (count[s]) {
            buf_printf(out, "%s%zu %s", sep, count[s],
                       s < ARRAY_SIZE(states) ? states[s] : "other");
            sep = ", ";
        }
    }
    buf_puts(out, "; ");
    render_num(out, used, 2);
    buf_printf(out, " of %.0f GPUs in use\n", gpus);
}

int view_nodes(const json_t *reply, int64_t now_ms, size_t width, Buf *out, Buf *err)
{
    const json_t *nodes = reply_list(reply, "nodes", err);
    if (!nodes)
        return -EINVAL;
    NodeWidths nw = {0};
    Buf f = {0};
    size_t i;
    const json_t *node;
    json_array_foreach(nodes, i, node)
    {
        if (!json_is_object(node)) {
            buf_printf(err, "node %zu of the server's reply is not an object", i + 1);
            buf_free(&f);
            return -EINVAL;
        }
        const char *name = jstr(node, "name"), *tier = jstr(node, "tier"),
                   *state = jstr(node, "state");
        buf_reset(&f);
        model_text(&f, node);
        /* a very long name would push every node's facts off the line: align up to 20 */
        nw.name = MAX(nw.name, MIN(text_width(name ? name : "-"), 20));
        nw.model = MAX(nw.model, text_width(buf_str(&f)));
        nw.tier = MAX(nw.tier, text_width(tier ? tier : "-"));
        nw.state = MAX(nw.state, text_width(state ? state : "-"));
    }
    buf_free(&f);
    if (json_array_size(nodes) == 0) {
        buf_puts(out, "no nodes\n");
        return out->oom ? -ENOMEM : 0;
    }
    json_array_foreach(nodes, i, node)
    {
        node_line(out, node, &nw, now_ms, width);
        mismatch_lines(out, node, width);
        sick_lines(out, node);
        gpu_map(out, json_object_get(node, "gpus"), width);
    }
    nodes_summary(out, nodes);
    return out->oom ? -ENOMEM : 0;
}

/* ---- teams ---- */

static const TableCol team_cols[] = {
    {"TEAM", COL_LEFT, 16, 6, 1},    {"GUAR", COL_RIGHT, 0, 0, 0},
    {"BURST", COL_RIGHT, 0, 0, 0},   {"WEIGHT", COL_RIGHT, 0, 0, 0},
    {"HELD", COL_RIGHT, 0, 0, 0},    {"BORROWED", COL_RIGHT, 0, 0, 0},
    {"PENDING", COL_RIGHT, 0, 0, 0}, {"RUNNING", COL_RIGHT, 0, 0, 0},
    {"SHARE", COL_RIGHT, 0, 0, 0},
};

/* The teams that have a budget, in a table of their own below: the quota table is as
 * wide as a terminal already. */
static const TableCol budget_cols[] = {
    {"TEAM", COL_LEFT, 24, 6, 1},    {"BUDGET GPU-H", COL_RIGHT, 0, 0, 0},
    {"USED", COL_RIGHT, 0, 0, 0},    {"BURN", COL_RIGHT, 0, 0, 0},
    {"NEW WORK", COL_LEFT, 0, 0, 0},
};

static void num_cell(Table *t, Buf *scratch, const json_t *o, const char *key, int digits)
{
    double v;
    buf_reset(scratch);
    if (jnum(o, key, &v))
        render_num(scratch, v, digits);
    else
        buf_puts(scratch, "-");
    table_cell(t, "%s", buf_str(scratch));
}

static void team_row(Table *t, Buf *s, const json_t *team)
{
    table_cell(t, "%s", jstr(team, "name") ? jstr(team, "name") : "-");
    num_cell(t, s, team, "guaranteed_gpus", 2);
    num_cell(t, s, team, "burst_gpus", 2);
    num_cell(t, s, team, "weight", 2);
    num_cell(t, s, team, "held_gpus", 2);
    num_cell(t, s, team, "borrowed_gpus", 2);
    num_cell(t, s, team, "pending_jobs", 0);
    num_cell(t, s, team, "running_jobs", 0);
    num_cell(t, s, team, "fair_share_usage", 2);
}

static bool has_budget(const json_t *team)
{
    double v;
    return jnum(team, "budget_gpu_hours", &v) && v > 0;
}

/* GPU-hours to about four digits: 500, 12.35, 0.0001. */
static void hours_cell(Table *t, const json_t *o, const char *key)
{
    double v;
    if (jnum(o, key, &v))
        table_cell(t, "%.4g", v);
    else
        table_cell(t, "-");
}

static void budget_row(Table *t, const json_t *team)
{
    double pct;
    table_cell(t, "%s", jstr(team, "name") ? jstr(team, "name") : "-");
    hours_cell(t, team, "budget_gpu_hours");
    hours_cell(t, team, "used_gpu_hours_month");
    if (jnum(team, "burn_pct", &pct))
        table_cell(t, "%.1f%%", pct);
    else
        table_cell(t, "-");
    table_cell(t, "%s",
               json_is_true(json_object_get(team, "over_budget")) ? "production only" : "starts");
}

static int budget_table(const json_t *one, const json_t *teams, size_t width, Buf *out)
{
    Table t;
    table_init(&t, budget_cols, ARRAY_SIZE(budget_cols));
    size_t i, n = 0;
    const json_t *team;
    if (one && has_budget(one)) {
        budget_row(&t, one);
        n++;
    }
    json_array_foreach(teams, i, team)
    {
        if (has_budget(team)) {
            budget_row(&t, team);
            n++;
        }
    }
    int r = 0;
    if (n) {
        buf_puts(out, "\nGPU-hour budgets, this calendar month (UTC):\n");
        r = table_render(&t, width, out);
    }
    table_free(&t);
    return r;
}

int view_teams(const json_t *reply, size_t width, Buf *out, Buf *err)
{
    const json_t *teams = json_object_get(reply, "teams");
    bool one = !teams && json_is_object(reply) && jstr(reply, "name");
    if (!one && !json_is_array(teams)) {
        buf_puts(err, "the server's reply has no 'teams' list");
        return -EINVAL;
    }
    Table t;
    table_init(&t, team_cols, ARRAY_SIZE(team_cols));
    Buf s = {0};
    size_t i;
    const json_t *team;
    if (one)
        team_row(&t, &s, reply);
    json_array_foreach(teams, i, team)
    {
        team_row(&t, &s, team);
    }
    int r = s.oom ? -ENOMEM : table_render(&t, width, out);
    if (r == 0)
        r = budget_table(one ? reply : NULL, teams, width, out);
    buf_free(&s);
    table_free(&t);
    return r;
}

/* ---- learned memory ---- */

static const TableCol learned_cols[] = {
    {"CLASS", COL_LEFT, 48, 12, 1},
    {"ASKS AT LEAST", COL_RIGHT, 0, 0, 0},
    {"OOMS", COL_RIGHT, 0, 0, 0},
    {"FITS", COL_LEFT, 0, 0, 0},
};

int view_learned(const json_t *reply, int64_t now_ms, size_t width, Buf *out, Buf *err)
{
    (void)now_ms;
    const json_t *list = json_object_get(reply, "classes");
    if (!json_is_array(list)) {
        buf_puts(err, "the server's reply has no 'classes' list");
        return -EINVAL;
    }
    if (!json_array_size(list)) {
        buf_puts(out,
                 "nothing learned yet: no workload class has reported a peak or run out of GPU "
                 "memory\n");
        return 0;
    }
    Table t;
    table_init(&t, learned_cols, ARRAY_SIZE(learned_cols));
    size_t i;
    const json_t *e;
    json_array_foreach(list, i, e)
    {
        const char *cls = jstr(e, "class");
        table_cell(&t, "%s", cls ? cls : "-");
        double mib = (double)json_integer_value(json_object_get(e, "peak_memory_mib"));
        table_cell(&t, "%.1f GiB", mib / 1024);
        table_cell(&t, "%lld", (long long)json_integer_value(json_object_get(e, "ooms")));
        /* no: no GPU of the cluster holds it, and the class's jobs are refused */
        const json_t *fits = json_object_get(e, "fits");
        table_cell(&t, "%s", !json_is_boolean(fits) ? "-" : json_is_true(fits) ? "yes" : "no");
    }
    int r = table_render(&t, width, out);
    table_free(&t);
    return r;
}

int view_learned_reset(const json_t *reply, Buf *out, Buf *err)
{
    const char *cls = jstr(reply, "class");
    if (!cls) {
        buf_puts(err, "the server's reply names no 'class'");
        return -EINVAL;
    }
    double mib = (double)json_integer_value(json_object_get(reply, "peak_memory_mib"));
    long long ooms = (long long)json_integer_value(json_object_get(reply, "ooms"));
    long long resized = (long long)json_integer_value(json_object_get(reply, "resized_jobs"));
    buf_printf(out,
               "reset %s: it asked at least %.1f GiB after %lld out-of-memory failure%s; %lld "
               "waiting job%s resized\n",
               cls, mib / 1024, ooms, ooms == 1 ? "" : "s", resized, resized == 1 ? "" : "s");
    return out->oom ? -ENOMEM : 0;
}

/* ---- usage ---- */

static void group_value(Table *t, const json_t *row, const char *key)
{
    const json_t *v = json_object_get(row, key);
    if (json_is_string(v))
        table_cell(t, "%s", json_string_value(v));
    else if (json_is_integer(v))
        table_cell(t, "%lld", (long long)json_integer_value(v));
    else
        table_cell(t, "-");
}

/* The numbers of a row or a subtotal; idle capacity has no jobs ("-"). */
static void usage_numbers(Table *t, const json_t *o, bool idle)
{
    double hours = 0, cost = 0;
    json_int_t jobs;
    jnum(o, "gpu_hours", &hours);
    jnum(o, "cost_usd", &cost);
    table_cell(t, "%.2f", hours);
    table_cell(t, "%.2f", cost);
    if (!idle && jint(o, "jobs", &jobs))
        table_cell(t, "%lld", (long long)jobs);
    else
        table_cell(t, "-");
}

static bool row_is_idle(const json_t *row)
{
    const char *kind = json_string_value(json_object_get(row, "kind"));
    return kind && !strcmp(kind, "idle");
}

/* A line LABEL ... numbers, for the total and its parts (none when the reply has no o). */
static void usage_subtotal(Table *t, const char *label, const json_t *o, size_t n_group_cols)
{
    if (!json_is_object(o))
        return;
    table_cell(t, "%s", label);
    for (size_t k = 1; k < n_group_cols; k++)
        table_cell(t, "%s", "");
    usage_numbers(t, o, !strcmp(label, "IDLE"));
}

int view_usage(const json_t *reply, size_t width, Buf *out, Buf *err)
{
    const json_t *rows = reply_list(reply, "rows", err);
    if (!rows)
        return -EINVAL;
    const json_t *by = json_object_get(reply, "group_by");
    size_t n_by = json_array_size(by), n_cols = MAX(n_by, 1) + 3, i, k;
    for (k = 0; k < n_by; k++)
        if (!json_is_string(json_array_get(by, k))) {
            buf_puts(err, "'group_by' in the server's reply is not a list of names");
            return -EINVAL;
        }
    TableCol *cols = calloc(n_cols, sizeof(*cols));
    char **headers = calloc(n_cols, sizeof(*headers));
    int r = -ENOMEM;
    Table t;
    table_init(&t, cols, n_cols);
    if (!cols || !headers)
        goto out;
    for (k = 0; k < MAX(n_by, 1); k++) {
        headers[k] = strdup(n_by ? json_string_value(json_array_get(by, k)) : "");
        if (!headers[k])
            goto out;
        for (char *c = headers[k]; *c; c++)
            if (*c >= 'a' && *c <= 'z')
                *c = (char)(*c - 'a' + 'A');
        cols[k] = (TableCol){headers[k], COL_LEFT, 24, 6, 1};
    }
    cols[n_cols - 3] = (TableCol){"GPU-HOURS", COL_RIGHT, 0, 0, 0};
    cols[n_cols - 2] = (TableCol){"COST USD", COL_RIGHT, 0, 0, 0};
    cols[n_cols - 1] = (TableCol){"JOBS", COL_RIGHT, 0, 0, 0};

    /* use rows, then idle rows (the server sorts them so), each block closed by its
     * subtotal when the report has idle rows: idle never reads as some group's use */
    bool any_idle = false;
    const json_t *row;
    json_array_foreach(rows, i, row) any_idle |= row_is_idle(row);
    bool idle_block = false;
    json_array_foreach(rows, i, row)
    {
        if (row_is_idle(row) && !idle_block) {
            usage_subtotal(&t, "USE", json_object_get(reply, "use"), MAX(n_by, 1));
            idle_block = true;
        }
        if (!n_by)
            table_cell(&t, "%s", "");
        for (k = 0; k < n_by; k++)
            group_value(&t, row, json_string_value(json_array_get(by, k)));
        usage_numbers(&t, row, row_is_idle(row));
    }
    if (any_idle)
        usage_subtotal(&t, "IDLE", json_object_get(reply, "idle"), MAX(n_by, 1));
    usage_subtotal(&t, "TOTAL", json_object_get(reply, "total"), MAX(n_by, 1));
    json_int_t from, to;
    if (jint(reply, "from_ms", &from) && jint(reply, "to_ms", &to)) {
        buf_puts(out, "usage from ");
        view_time_utc(out, from);
        buf_puts(out, " to ");
        view_time_utc(out, to);
        buf_puts(out, " UTC\n");
    }
    r = table_render(&t, width, out);
out:
    table_free(&t);
    if (headers)
        for (k = 0; k < n_cols; k++)
            free(headers[k]);
    free(headers);
    free(cols);
    return r;
}
