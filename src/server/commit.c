/* commit.c: what a step changed (Changes) and its durable write. A step lists its
 * changes under Server.lock; a change it cannot list fails the whole (Changes.err), so
 * the store never gets a change with entries missing. The writes are made with the lock
 * released (the fsync): server_commit_begin copies what the write needs into a
 * CommitBatch (the jobs' rows may change under it once the lock is free), and until
 * server_commit_finish has written it, the model is ahead of the store. Readers that tell
 * anyone what they see take the lock through server_lock, which waits for that write, so
 * nothing is told before it is durable; the requests that only queue work do not wait
 * for another's fsync. The scheduler's cycle and the requests' changes
 * (server_commit_released) write so; server_commit, with the lock held, is left to a
 * writer that waits for readers (no reader waits for more than one write) and to the
 * Kubernetes engine's threads.
 *
 * Server.commit_lock is held across every write, taken with the lock held, so that
 * the writes reach the store in the order their changes were made: a cancel of a job
 * a cycle just started is written after that start, never before it. */
#include "server/state.h"

#include "util/log.h"
#include "util/macro.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* A MIG layout a placement set, for a restarted server (store_mig_set). */
typedef struct ChangeMig {
    const char *node; /* the cluster's name: the cluster outlives every write */
    unsigned index;
    char *layout_json; /* owned */
} ChangeMig;

void changes_fail(Changes *ch, int err)
{
    if (!ch->err)
        ch->err = err;
}

void changes_job(Changes *ch, ServerJob *j)
{
    /* the mark, not a search of the list: a cycle that starts thousands of jobs adds
     * each several times */
    if (j->in_changes)
        return;
    if (GROW(ch->jobs, ch->jobs_cap, ch->n_jobs + 1) == 0) {
        ch->jobs[ch->n_jobs++] = j;
        j->in_changes = true;
    } else {
        changes_fail(ch, -ENOMEM);
    }
}

void changes_event(Changes *ch, ServerJob *j, int64_t t_ms, const char *type, const char *detail)
{
    char *copy = detail ? strdup(detail) : NULL;
    if ((detail && !copy) || GROW(ch->events, ch->events_cap, ch->n_events + 1) < 0 ||
        GROW(ch->strs, ch->strs_cap, ch->n_strs + 1) < 0) {
        free(copy);
        changes_fail(ch, -ENOMEM);
        return;
    }
    if (copy)
        ch->strs[ch->n_strs++] = copy;
    ch->events[ch->n_events++] =
        (StoreEvent){.job = j->st.id, .t_ms = t_ms, .type = type, .detail = copy};
    changes_job(ch, j);
}

void changes_usage(Changes *ch, const StoreUsage *u)
{
    if (GROW(ch->usage, ch->usage_cap, ch->n_usage + 1) == 0)
        ch->usage[ch->n_usage++] = *u;
    else
        changes_fail(ch, -ENOMEM);
}

void changes_learned(Changes *ch, const LearnEntry *e)
{
    for (size_t i = 0; i < ch->n_learned; i++)
        if (ch->learned[i].cls == e->cls) {
            ch->learned[i].peak_mib = e->peak_mib;
            ch->learned[i].ooms = e->ooms;
            return;
        }
    if (GROW(ch->learned, ch->learned_cap, ch->n_learned + 1) == 0)
        ch->learned[ch->n_learned++] =
            (StoreLearned){.cls = e->cls, .peak_mib = e->peak_mib, .ooms = e->ooms};
    else
        changes_fail(ch, -ENOMEM);
}

void changes_mig(Changes *ch, const char *node, unsigned index, char *layout_json)
{
    if (!layout_json || GROW(ch->mig, ch->mig_cap, ch->n_mig + 1) < 0) {
        free(layout_json);
        changes_fail(ch, -ENOMEM);
        return;
    }
    ch->mig[ch->n_mig++] = (ChangeMig){.node = node, .index = index, .layout_json = layout_json};
}

void changes_forget(Changes *ch, const char *cls)
{
    char *copy = strdup(cls);
    if (!copy || GROW(ch->forget, ch->forget_cap, ch->n_forget + 1) < 0) {
        free(copy);
        changes_fail(ch, -ENOMEM);
        return;
    }
    ch->forget[ch->n_forget++] = copy;
}

static bool changes_empty(const Changes *ch)
{
    return !ch->n_jobs && !ch->n_events && !ch->n_usage && !ch->n_learned && !ch->n_mig &&
           !ch->n_forget && !ch->err;
}

static void changes_clear(Changes *ch)
{
    for (size_t i = 0; i < ch->n_jobs; i++)
        ch->jobs[i]->in_changes = false;
    for (size_t i = 0; i < ch->n_strs; i++)
        free(ch->strs[i]);
    for (size_t i = 0; i < ch->n_mig; i++)
        free(ch->mig[i].layout_json);
    for (size_t i = 0; i < ch->n_forget; i++)
        free(ch->forget[i]);
    ch->n_jobs = ch->n_events = ch->n_usage = ch->n_learned = ch->n_strs = ch->n_mig = 0;
    ch->n_forget = 0;
    ch->err = 0;
}

void changes_free(Changes *ch)
{
    changes_clear(ch);
    free(ch->jobs);
    free(ch->events);
    free(ch->usage);
    free(ch->learned);
    free(ch->strs);
    free(ch->mig);
    free(ch->forget);
    *ch = (Changes){0};
}

/* The write itself, commit_lock held: the MIG layouts first (a restart that finds the
 * run finds the instances it sits in), then the rest in one transaction. A layout that
 * fails to be written is logged, as the placement can be rebuilt without it. */
static int write_all(Server *s, const ChangeMig *mig, size_t n_mig, StoreWrite *w, Buf *err)
{
    for (size_t k = 0; k < n_mig; k++)
        if (store_mig_set(s->store, mig[k].node, mig[k].index, mig[k].layout_json) < 0)
            log_error("event=store_write_failed what=mig node=%s gpu=%u", mig[k].node,
                      mig[k].index);
    return store_write(s->store, w, err);
}

static void write_failed(Server *s, size_t n_jobs, int r, const Buf *err)
{
    /* memory is ahead of the store now: nothing more may be told from it */
    log_error("event=store_write_failed jobs=%zu error=\"%s\"", n_jobs, buf_str(err));
    server_diverge(s, r);
}

int server_commit(Server *s, Changes *ch)
{
    if (changes_empty(ch))
        return 0;
    Buf err = {0};
    int r = ch->err;
    const StoreJob **up = r ? NULL : calloc(ch->n_jobs ? ch->n_jobs : 1, sizeof(*up));
    if (!r && !up)
        r = -ENOMEM;
    if (!r) {
        for (size_t i = 0; i < ch->n_jobs; i++)
            up[i] = &ch->jobs[i]->st;
        StoreWrite w = {.updates = up,
                        .n_updates = ch->n_jobs,
                        .events = ch->events,
                        .n_events = ch->n_events,
                        .usage = ch->usage,
                        .n_usage = ch->n_usage,
                        .learned = ch->learned,
                        .n_learned = ch->n_learned,
                        .forget = (const char *const *)ch->forget,
                        .n_forget = ch->n_forget};
        pthread_mutex_lock(&s->commit_lock);
        r = write_all(s, ch->mig, ch->n_mig, &w, &err);
        pthread_mutex_unlock(&s->commit_lock);
    } else {
        buf_puts(&err, ch->err ? "out of memory listing a change" : "out of memory");
    }
    free(up);
    if (r < 0)
        write_failed(s, ch->n_jobs, r, &err);
    buf_free(&err);
    changes_clear(ch);
    return r < 0 ? r : 0;
}

/* ---- the cycle's write, lock released ---- */

static void batch_free(CommitBatch *b)
{
    for (size_t i = 0; i < b->n_rows; i++) {
        free(b->rows[i].checkpoint);
        free(b->rows[i].placement_json);
    }
    for (size_t i = 0; i < b->n_strs; i++)
        free(b->strs[i]);
    for (size_t i = 0; i < b->n_mig; i++)
        free(b->mig[i].layout_json);
    for (size_t i = 0; i < b->n_forget; i++)
        free(b->forget[i]);
    free(b->forget);
    free(b->rows);
    free(b->up);
    free(b->events);
    free(b->usage);
    free(b->learned);
    free(b->mig);
    free(b->strs);
    *b = (CommitBatch){0};
}

/* A copy of str the batch owns (NULL stays NULL); false for want of memory. */
static bool batch_str(CommitBatch *b, const char **str)
{
    if (!*str)
        return true;
    char *copy = strdup(*str);
    if (!copy || GROW(b->strs, b->strs_cap, b->n_strs + 1) < 0) {
        free(copy);
        return false;
    }
    b->strs[b->n_strs++] = copy;
    *str = copy;
    return true;
}

/* Copy what the write needs out of the model (lock held). The events' details, the
 * learned entries and the layouts are taken from ch; the rows and the strings of jobs
 * and classes, which others may change or free once the lock is released, are copied. */
static int batch_take(CommitBatch *b, Changes *ch)
{
    if (ch->err)
        return ch->err;
    size_t n = ch->n_jobs;
    b->rows = calloc(n ? n : 1, sizeof(*b->rows));
    b->up = calloc(n ? n : 1, sizeof(*b->up));
    b->usage = calloc(ch->n_usage ? ch->n_usage : 1, sizeof(*b->usage));
    if (!b->rows || !b->up || !b->usage)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        const StoreJob *st = &ch->jobs[i]->st;
        StoreJob *row = &b->rows[b->n_rows];
        *row = *st;
        row->name = row->team = row->project = row->spec_json = row->user = NULL;
        row->checkpoint = st->checkpoint ? strdup(st->checkpoint) : NULL;
        row->placement_json = st->placement_json ? strdup(st->placement_json) : NULL;
        b->up[b->n_rows++] = row;
        if ((st->checkpoint && !row->checkpoint) || (st->placement_json && !row->placement_json))
            return -ENOMEM;
    }
    for (size_t i = 0; i < ch->n_usage; i++) {
        StoreUsage *u = &b->usage[b->n_usage++];
        *u = ch->usage[i];
        if (!batch_str(b, &u->team) || !batch_str(b, &u->project))
            return -ENOMEM;
    }
    /* the rest is taken whole: ch's arrays become the batch's */
    for (size_t i = 0; i < ch->n_learned; i++)
        if (!batch_str(b, &ch->learned[i].cls))
            return -ENOMEM;
    if (ch->n_strs) {
        if (GROW(b->strs, b->strs_cap, b->n_strs + ch->n_strs) < 0)
            return -ENOMEM;
        memcpy(b->strs + b->n_strs, ch->strs, ch->n_strs * sizeof(*ch->strs));
        b->n_strs += ch->n_strs;
        ch->n_strs = 0;
    }
    b->events = TAKE_PTR(ch->events);
    b->n_events = ch->n_events;
    ch->n_events = ch->events_cap = 0;
    b->learned = TAKE_PTR(ch->learned);
    b->n_learned = ch->n_learned;
    ch->n_learned = ch->learned_cap = 0;
    b->mig = TAKE_PTR(ch->mig);
    b->n_mig = ch->n_mig;
    ch->n_mig = ch->mig_cap = 0;
    b->forget = TAKE_PTR(ch->forget);
    b->n_forget = ch->n_forget;
    ch->n_forget = ch->forget_cap = 0;
    return 0;
}

int server_commit_begin(Server *s, Changes *ch, CommitBatch *b)
{
    *b = (CommitBatch){0};
    if (changes_empty(ch))
        return 0;
    int r = batch_take(b, ch);
    size_t n_jobs = ch->n_jobs;
    changes_clear(ch);
    if (r < 0) {
        Buf err = {0};
        buf_puts(&err, "out of memory listing a change");
        write_failed(s, n_jobs, r, &err);
        buf_free(&err);
        batch_free(b);
        return r;
    }
    pthread_mutex_lock(&s->commit_lock);
    s->committing++;
    b->pending = true;
    return 0;
}

/* [lock] Wait until nothing is being written out of the lock. */
static void wait_durable(Server *s)
{
    while (s->committing) {
        s->durable_waiters++;
        pthread_cond_wait(&s->durable, &s->lock);
        s->durable_waiters--;
    }
}

int server_commit_finish(Server *s, CommitBatch *b)
{
    int r = 0;
    Buf err = {0};
    if (b->pending) {
        StoreWrite w = {.updates = b->up,
                        .n_updates = b->n_rows,
                        .events = b->events,
                        .n_events = b->n_events,
                        .usage = b->usage,
                        .n_usage = b->n_usage,
                        .learned = b->learned,
                        .n_learned = b->n_learned,
                        .forget = (const char *const *)b->forget,
                        .n_forget = b->n_forget};
        r = write_all(s, b->mig, b->n_mig, &w, &err);
        pthread_mutex_unlock(&s->commit_lock);
    }
    pthread_mutex_lock(&s->lock);
    if (b->pending && r < 0) {
        /* the readers stay asleep: the caller's top level ends the process */
        write_failed(s, b->n_rows, r, &err);
    } else if (b->pending && --s->committing == 0) {
        pthread_cond_broadcast(&s->durable);
    }
    if (r == 0)
        wait_durable(s); /* another's write began while this one was made */
    buf_free(&err);
    batch_free(b);
    return r < 0 ? r : 0;
}

int server_commit_released(Server *s, Changes *ch)
{
    if (s->durable_waiters)
        return server_commit(s, ch);
    CommitBatch b;
    int r = server_commit_begin(s, ch, &b);
    if (r < 0 || !b.pending)
        return r; /* diverged (the lock stays held), or nothing to write */
    pthread_mutex_unlock(&s->lock);
    return server_commit_finish(s, &b);
}

int server_write_released(Server *s, int (*write)(Store *st, void *arg), void *arg)
{
    bool release = !s->durable_waiters;
    pthread_mutex_lock(&s->commit_lock);
    if (release) {
        s->committing++;
        pthread_mutex_unlock(&s->lock);
    }
    int r = write(s->store, arg);
    pthread_mutex_unlock(&s->commit_lock);
    if (release) {
        pthread_mutex_lock(&s->lock);
        if (--s->committing == 0)
            pthread_cond_broadcast(&s->durable);
        wait_durable(s);
    }
    return r;
}

void server_lock(Server *s)
{
    pthread_mutex_lock(&s->lock);
    wait_durable(s);
}
