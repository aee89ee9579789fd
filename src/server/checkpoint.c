/* checkpoint.c: the newest step every rank of a run has written becomes the job's
 * checkpoint; the stored form and what each rank resumes from (checkpoint.h). */
#include "server/checkpoint.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static void marks_free(RankMarks *r)
{
    for (size_t i = 0; i < r->n; i++)
        free(r->m[i].path);
    free(r->m);
    *r = (RankMarks){0};
}

void checkpoint_gang_free(GangCkpt *g)
{
    if (!g)
        return;
    for (size_t i = 0; i < g->n_ranks; i++)
        marks_free(&g->ranks[i]);
    free(g->ranks);
    free(g);
}

int checkpoint_report_check(json_t *worker, Buf *err)
{
    json_t *list = json_object_get(worker, "checkpoints");
    if (!list || json_is_null(list))
        return 0;
    if (!json_is_array(list) || json_array_size(list) > CHECKPOINT_REPORT_MAX) {
        buf_printf(err, "'checkpoints' must be a list of at most %d steps", CHECKPOINT_REPORT_MAX);
        return -EINVAL;
    }
    size_t i;
    json_t *o;
    json_array_foreach(list, i, o)
    {
        json_t *step = json_object_get(o, "step"), *ms = json_object_get(o, "ms");
        const char *path = json_string_value(json_object_get(o, "path"));
        const char *wrong = NULL;
        if (!json_is_object(o))
            wrong = "is not an object";
        else if (!json_is_integer(step) || json_integer_value(step) < 0)
            wrong = "needs 'step', a whole number >= 0";
        else if (!path || !*path || strlen(path) > CHECKPOINT_PATH_MAX)
            wrong = "needs 'path', a string of 1 to 4096 bytes";
        else if (ms && !json_is_null(ms) && (!json_is_integer(ms) || json_integer_value(ms) < 0))
            wrong = "has an 'ms' that is not a time (ms since the epoch)";
        if (wrong) {
            buf_printf(err, "'checkpoints'[%zu] %s", i, wrong);
            return -EINVAL;
        }
    }
    return 0;
}

/* The run's reports, started afresh when the run (or the gang's size) changed. */
static GangCkpt *gang_for(ServerJob *j, uint32_t run)
{
    GangCkpt *g = j->ckpt;
    if (g && g->run == run && g->n_ranks == j->life.n_workers)
        return g;
    checkpoint_gang_free(g);
    j->ckpt = NULL;
    g = calloc(1, sizeof(*g));
    if (!g)
        return NULL;
    g->ranks = calloc(j->life.n_workers ? j->life.n_workers : 1, sizeof(*g->ranks));
    if (!g->ranks) {
        free(g);
        return NULL;
    }
    g->run = run;
    g->n_ranks = j->life.n_workers;
    j->ckpt = g;
    return g;
}

/* Replace what the rank reported with a checked list. -ENOMEM keeps the old one. */
static int marks_set(RankMarks *r, json_t *list)
{
    size_t n = json_array_size(list);
    CkptMark *m = calloc(n ? n : 1, sizeof(*m));
    if (!m)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        json_t *o = json_array_get(list, i);
        json_t *ms = json_object_get(o, "ms");
        m[i] = (CkptMark){.step = json_integer_value(json_object_get(o, "step")),
                          .ms = json_is_integer(ms) ? json_integer_value(ms) : 0,
                          .path = strdup(json_string_value(json_object_get(o, "path")))};
        if (!m[i].path) {
            RankMarks undo = {m, i};
            marks_free(&undo);
            return -ENOMEM;
        }
    }
    marks_free(r);
    *r = (RankMarks){m, n};
    return 0;
}

static const CkptMark *mark_of(const RankMarks *r, int64_t step)
{
    /* the newest entry of a step wins (an agent lists each step once) */
    for (size_t i = r->n; i-- > 0;)
        if (r->m[i].step == step)
            return &r->m[i];
    return NULL;
}

bool checkpoint_common(const GangCkpt *g, int64_t *ret_step)
{
    if (!g || !g->n_ranks)
        return false;
    bool found = false;
    int64_t best = 0;
    const RankMarks *first = &g->ranks[0];
    for (size_t i = 0; i < first->n; i++) {
        int64_t step = first->m[i].step;
        if (found && step <= best)
            continue;
        bool all = true;
        for (size_t r = 1; r < g->n_ranks && all; r++)
            all = mark_of(&g->ranks[r], step) != NULL;
        if (all) {
            best = step;
            found = true;
        }
    }
    if (found)
        *ret_step = best;
    return found;
}

/* The stored form's run, step and ranks (a borrowed array of root, which the caller
 * frees); NULL when stored is LATEST's text (or NULL). */
static json_t *decode(const char *stored, json_t **ret_root, int64_t *ret_run, int64_t *ret_step)
{
    *ret_root = NULL;
    if (!stored || stored[0] != '{')
        return NULL;
    json_t *root = json_loads(stored, 0, NULL);
    json_t *run = json_object_get(root, "run"), *step = json_object_get(root, "step");
    json_t *ranks = json_object_get(root, "ranks");
    /* exactly these three keys: LATEST's text could be JSON of its own */
    bool ours = json_object_size(root) == 3 && json_is_integer(run) && json_is_integer(step) &&
                json_is_array(ranks) && json_array_size(ranks) > 0;
    for (size_t i = 0; ours && i < json_array_size(ranks); i++)
        ours = json_is_string(json_array_get(ranks, i));
    if (!ours) {
        json_decref(root);
        return NULL;
    }
    *ret_root = root;
    *ret_run = json_integer_value(run);
    *ret_step = json_integer_value(step);
    return ranks;
}

/* The stored form of step of g, with its newest time; NULL on out of memory. */
static char *encode(const GangCkpt *g, int64_t step, int64_t *ret_ms)
{
    json_t *ranks = json_array();
    int64_t ms = 0;
    for (size_t r = 0; ranks && r < g->n_ranks; r++) {
        const CkptMark *m = mark_of(&g->ranks[r], step);
        if (!m) { /* not a step every rank marked: the caller checked it is */
            json_decref(ranks);
            return NULL;
        }
        ms = m->ms > ms ? m->ms : ms;
        json_array_append_new(ranks, json_string(m->path));
    }
    json_t *root = json_pack("{sI sI so}", "run", (json_int_t)g->run, "step", (json_int_t)step,
                             "ranks", ranks);
    char *text = root ? json_dumps(root, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(root);
    *ret_ms = ms;
    return text;
}

static void fold_steps(ServerJob *j, const GangCkpt *g, int64_t now_ms, Changes *ch)
{
    int64_t step;
    if (!checkpoint_common(g, &step))
        return;
    json_t *root;
    int64_t run = 0, stored_step = 0;
    bool ours = decode(j->st.checkpoint, &root, &run, &stored_step) != NULL;
    json_decref(root);
    if (ours && run == g->run && stored_step > step)
        return; /* a rank's older list: the run has a newer common step already */
    int64_t ms;
    char *text = encode(g, step, &ms);
    if (!text)
        return;
    if (j->st.checkpoint && !strcmp(text, j->st.checkpoint)) {
        free(text);
        return;
    }
    free(j->st.checkpoint);
    j->st.checkpoint = text;
    j->st.checkpoint_ms = ms > 0 ? ms : now_ms;
    life_checkpoint_run(&j->life, j->st.checkpoint_ms);
    Buf label = {0};
    checkpoint_label(text, &label);
    changes_event(ch, j, now_ms, "checkpoint", buf_str(&label));
    buf_free(&label);
}

void checkpoint_fold(ServerJob *j, size_t rank, json_t *worker, int64_t now_ms, Changes *ch)
{
    json_t *list = json_object_get(worker, "checkpoints");
    const char *latest = json_string_value(json_object_get(worker, "checkpoint"));
    bool steps = json_array_size(list) > 0, legacy = latest && *latest;
    if ((!steps && !legacy) || !j->life.workers || rank >= j->life.n_workers)
        return;
    GangCkpt *g = gang_for(j, j->life.workers[rank].run);
    if (!g)
        return; /* out of memory: the next heartbeat reports it all again */
    if (steps) {
        if (marks_set(&g->ranks[rank], list) == 0)
            fold_steps(j, g, now_ms, ch);
        return;
    }
    if (j->life.n_workers == 1 && !g->ranks[0].n) {
        /* the old contract, for one worker: LATEST's text is the checkpoint */
        if (j->st.checkpoint && !strcmp(latest, j->st.checkpoint))
            return;
        char *copy = strdup(latest);
        if (!copy)
            return;
        json_t *at = json_object_get(worker, "checkpoint_ms");
        free(j->st.checkpoint);
        j->st.checkpoint = copy;
        j->st.checkpoint_ms = json_is_integer(at) ? json_integer_value(at) : now_ms;
        life_checkpoint_run(&j->life, j->st.checkpoint_ms);
        changes_event(ch, j, now_ms, "checkpoint", latest);
        return;
    }
    /* one worker that marks steps: those count, LATEST is only an old habit */
    if (j->life.n_workers == 1 || g->legacy_noted)
        return;
    g->legacy_noted = true;
    char detail[256];
    snprintf(detail, sizeof(detail),
             "rank %zu wrote LATEST, which the ranks of a gang share, so it names whichever "
             "wrote last: each rank marks its steps in LATEST.RANK (docs/agent.md)",
             rank);
    changes_event(ch, j, now_ms, "checkpoint-ignored", detail);
}

json_t *checkpoint_resume_json(const char *stored, size_t rank)
{
    json_t *root;
    int64_t run, step;
    json_t *ranks = decode(stored, &root, &run, &step);
    if (!ranks)
        return stored ? json_string(stored) : json_null();
    json_t *path = json_array_get(ranks, rank);
    json_t *r = path ? json_incref(path) : json_null();
    json_decref(root);
    return r;
}

void checkpoint_label(const char *stored, Buf *out)
{
    json_t *root;
    int64_t run, step;
    json_t *ranks = decode(stored, &root, &run, &step);
    if (!ranks) {
        buf_puts(out, stored ? stored : "none");
        return;
    }
    size_t n = json_array_size(ranks);
    const char *first = json_string_value(json_array_get(ranks, 0));
    if (n == 1)
        buf_printf(out, "step %lld: %s", (long long)step, first);
    else
        buf_printf(out, "step %lld of all %zu ranks (rank 0: %s)", (long long)step, n, first);
    json_decref(root);
}

void checkpoint_api_fields(const char *stored, json_t *job)
{
    json_t *root;
    int64_t run, step;
    json_t *ranks = decode(stored, &root, &run, &step);
    if (!ranks) {
        json_object_set_new(job, "checkpoint", stored ? json_string(stored) : json_null());
        json_object_set_new(job, "checkpoint_step", json_null());
        json_object_set_new(job, "checkpoint_ranks", json_null());
        return;
    }
    json_object_set(job, "checkpoint", json_array_get(ranks, 0));
    json_object_set_new(job, "checkpoint_step", json_integer((json_int_t)step));
    json_object_set(job, "checkpoint_ranks", ranks);
    json_decref(root);
}

int64_t checkpoint_rank_step(const ServerJob *j, size_t rank)
{
    const GangCkpt *g = j->ckpt;
    if (!g || !j->life.workers || rank >= j->life.n_workers || rank >= g->n_ranks ||
        g->run != j->life.workers[rank].run || !g->ranks[rank].n)
        return -1;
    return g->ranks[rank].m[g->ranks[rank].n - 1].step;
}
