/* life.c: a job's run after the core placed it (life.h): the state machine both drivers
 * share. Every step is reported to the driver's sink as it happens, so the server
 * collects one durable write of a whole step and the simulator counts it. */
#include "life/life.h"
#include "life/sink.h"

#include "util/buf.h"
#include "util/macro.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char *const state_names[LIFE_STATE_COUNT] = {
    "pending", "starting", "running", "stopping", "succeeded", "failed", "cancelled"};

const char *life_state_name(LifeState s)
{
    return (unsigned)s < LIFE_STATE_COUNT ? state_names[s] : "?";
}

static int end_job(Life *l, LifeJob *j, LifeState final, int64_t now_ms)
{
    j->state = (uint8_t) final;
    j->end_ms = now_ms;
    l->finished[final]++;
    return life_changed(l, j);
}

static int fail_unfit(Life *l, LifeJob *j, int64_t now_ms)
{
    j->unfit = true;
    l->unfit++;
    int err = end_job(l, j, LIFE_FAILED, now_ms);
    return err ? err : life_event(l, j, now_ms, "fail", LIFE_UNFIT_REASON);
}

/* Size j's request from its class. 1: it changed, 0: it did not, 2: no GPU holds it. */
static int size(Life *l, LifeJob *j)
{
    int r = learn_size_request(l->learn, l->c, j->spec, &j->sj->req);
    if (r == 1 && l->sink.sized) {
        int err = l->sink.sized(l->sink.arg, j);
        if (err)
            return err;
    }
    return r;
}

int life_enqueue(Life *l, LifeJob *j, int64_t now_ms)
{
    j->state = LIFE_PENDING;
    j->exit_code = -1;
    j->requeue = false;
    j->stop_mode = LIFE_STOP_NONE;
    j->sj->attained_gpu_ms = j->attained_base_ms;
    j->sj->estimate_ms = j->estimate_total_ms == NO_DURATION
                             ? NO_DURATION
                             : (int64_t)MAX(0.0, (double)j->estimate_total_ms - j->saved_work_ms);
    j->sj->last_checkpoint_ms = j->checkpoint_ms;
    int r = size(l, j);
    if (r < 0)
        return r;
    if (r == 2)
        return fail_unfit(l, j, now_ms);
    r = sched_enqueue(l->sched, j->sj);
    return r < 0 ? r : life_changed(l, j);
}

int life_start(Life *l, LifeJob *j, int64_t now_ms)
{
    const Placement *pl = &j->sj->pl;
    LifeWorker *w = calloc(pl->n_workers ? pl->n_workers : 1, sizeof(*w));
    if (!w)
        return -ENOMEM;
    free(j->workers);
    j->workers = w;
    j->n_workers = pl->n_workers;
    /* "on a, b": the run's nodes, each once (the server reads them back from this) */
    Buf where = {0};
    for (size_t k = 0; k < pl->n_workers; k++) {
        const WorkerAlloc *wa = &pl->workers[k];
        w[k] = (LifeWorker){.node = wa->node, .state = LIFE_WORKER_ASSIGNED, .start_ms = -1};
        bool listed = false;
        for (size_t u = 0; u < k && !listed; u++)
            listed = pl->workers[u].node == wa->node;
        if (!listed)
            buf_printf(&where, "%s%s", where.len ? ", " : "on ", l->c->nodes[wa->node].name);
    }
    j->state = LIFE_STARTING;
    j->move = LIFE_MOVE_NONE;
    j->run++;
    j->start_ms = -1;
    j->stop_mode = LIFE_STOP_NONE;
    j->requeue = false;
    j->sj->run_start_ms = now_ms;
    j->sj->last_checkpoint_ms = now_ms;
    j->start_saved_ms = j->saved_work_ms;
    int err = life_changed(l, j);
    if (err) {
        buf_free(&where);
        return err;
    }
    return life_event_buf(l, j, now_ms, "start", &where);
}

int life_worker_running(Life *l, LifeJob *j, size_t w, int64_t start_ms, int64_t now_ms)
{
    if (w >= j->n_workers || life_worker_ended(&j->workers[w]))
        return 0;
    j->workers[w].state = LIFE_WORKER_RUNNING;
    j->workers[w].start_ms = start_ms;
    return life_progress(l, j, now_ms);
}

int life_worker_end(Life *l, LifeJob *j, size_t w, LifeWorkerState state, int32_t code,
                    uint64_t peak_mib, bool oom, int64_t now_ms)
{
    if (w >= j->n_workers || life_worker_ended(&j->workers[w]))
        return 0;
    LifeWorker *wr = &j->workers[w];
    wr->state = (uint8_t)state;
    wr->exit_code = code;
    if (peak_mib)
        wr->peak_mib = peak_mib;
    wr->oom |= oom;
    return life_progress(l, j, now_ms);
}

int life_end_workers(Life *l, LifeJob *j, LifeWorkerState state, int32_t code, int64_t now_ms)
{
    for (size_t w = 0; w < j->n_workers; w++)
        if (!life_worker_ended(&j->workers[w])) {
            j->workers[w].state = (uint8_t)state;
            j->workers[w].exit_code = code;
        }
    return life_progress(l, j, now_ms);
}

/* The run is over (every worker gone): give the GPUs back and queue the job again or
 * close it. */
static int finish_run(Life *l, LifeJob *j, LifeState final, int64_t now_ms)
{
    int err = l->sink.release ? l->sink.release(l->sink.arg, j, now_ms) : 0;
    if (err)
        return err;
    j->move = LIFE_MOVE_NONE; /* a move under way ends with the run: both were given back */
    j->attained_base_ms += (double)(now_ms - j->sj->run_start_ms) * j->gpus_asked;
    sched_release(l->sched, j->sj, now_ms);
    free(j->workers);
    j->workers = NULL;
    j->n_workers = 0;
    j->stop_mode = LIFE_STOP_NONE;
    if (final == LIFE_PENDING) {
        err = life_enqueue(l, j, now_ms);
        if (err || j->state != LIFE_PENDING)
            return err;
        return life_event(l, j, now_ms, "requeue", NULL);
    }
    if (final == LIFE_FAILED && j->unfit)
        return fail_unfit(l, j, now_ms);
    if ((err = end_job(l, j, final, now_ms)))
        return err;
    if (final == LIFE_CANCELLED)
        return life_event(l, j, now_ms, "cancelled", NULL);
    Buf detail = {0};
    buf_printf(&detail, "exit code %d", j->exit_code);
    return life_event_buf(l, j, now_ms, final == LIFE_SUCCEEDED ? "finish" : "fail", &detail);
}

/* The class cls learned: its jobs already waiting (not j) ask what it now needs, or
 * fail when no GPU here holds that (they would only run out of memory). */
static int resize_waiting(Life *l, const LifeJob *learner, const char *cls, int64_t now_ms)
{
    if (!l->sink.next_waiting)
        return 0;
    LifeJob *w;
    for (int64_t pos = 0; (w = l->sink.next_waiting(l->sink.arg, cls, &pos));) {
        if (w == learner)
            continue;
        sched_dequeue(l->sched, w->sj);
        int r = size(l, w);
        if (r < 0)
            return r;
        if (r == 2) {
            if ((r = fail_unfit(l, w, now_ms)))
                return r;
            continue;
        }
        if (r == 1) {
            Buf detail = {0};
            buf_printf(&detail, "workload class %s now asks %llu MiB", cls,
                       (unsigned long long)learn_peak(l->learn, cls));
            if ((r = life_event_buf(l, w, now_ms, "resized", &detail)))
                return r;
        }
        if ((r = sched_enqueue(l->sched, w->sj)) < 0)
            return r;
    }
    return 0;
}

/* Workers of the run that ran out of GPU memory teach their class to ask a fifth more
 * than they reached (learn.h). 1 when the job should run again, sized from that (a
 * larger grant exists for it here), 0 when not (j->unfit: no GPU here holds it), or a
 * negative errno. Only a failure teaches: the peak of a run that went well says little,
 * as caching allocators and serving engines hold what they are given, and learning it
 * would ratchet every class up to the largest grant it once had. */
static int learn_oom_run(Life *l, LifeJob *j, int64_t now_ms)
{
    char cls[LEARN_CLASS_MAX];
    learn_class_of(j->spec, cls, sizeof(cls));
    bool any = false;
    for (size_t w = 0; w < j->n_workers && w < j->sj->pl.n_workers; w++) {
        LifeWorker *wr = &j->workers[w];
        if (!wr->oom)
            continue;
        wr->oom = false; /* once per run: the teardown that follows comes back here */
        const WorkerAlloc *wa = &j->sj->pl.workers[w];
        uint64_t granted = learn_granted_mib(l->c, wa);
        int before = learn_oom(l->learn, cls, learn_per_gpu(l->c, wa, wr->peak_mib),
                               learn_per_gpu(l->c, wa, granted));
        if (before == -ENOMEM)
            return before;
        const LearnEntry *e = learn_find(l->learn, cls);
        if (before < 0 || !e)
            continue;
        l->ooms++;
        if (before > 0)
            l->oom_repeats++; /* the class had run out before, was sized, and still did */
        int err = l->sink.learned ? l->sink.learned(l->sink.arg, e) : 0;
        if (err)
            return err;
        any = true;
        Buf detail = {0};
        buf_printf(&detail, "rank %zu ran out of GPU memory in the %llu MiB it was given", w,
                   (unsigned long long)granted);
        if (wr->peak_mib)
            buf_printf(&detail, " (peak seen %llu MiB)", (unsigned long long)wr->peak_mib);
        buf_printf(&detail, "; workload class %s now asks %llu MiB%s", cls,
                   (unsigned long long)e->peak_mib,
                   before ? " (not its first out-of-memory failure)" : "");
        if ((err = life_event_buf(l, j, now_ms, "oom", &detail)))
            return err;
    }
    if (!any)
        return 0;
    int err = resize_waiting(l, j, cls, now_ms);
    if (err)
        return err;
    Request r = j->sj->req;
    int sized = learn_size_request(l->learn, l->c, j->spec, &r);
    if (sized < 0)
        return sized;
    j->unfit = sized == 2;
    return sized == 1;
}

int life_progress(Life *l, LifeJob *j, int64_t now_ms)
{
    if (!j->workers || life_state_ended(j->state) || j->state == LIFE_PENDING)
        return 0;
    size_t running = 0, ended = 0, bad = 0;
    int32_t first_bad = 0;
    for (size_t w = 0; w < j->n_workers; w++) {
        const LifeWorker *wr = &j->workers[w];
        if (wr->state == LIFE_WORKER_RUNNING)
            running++;
        if (!life_worker_ended(wr))
            continue;
        ended++;
        bool ok = wr->state == LIFE_WORKER_EXITED && wr->exit_code == 0;
        if (!ok && !bad++)
            first_bad = wr->state == LIFE_WORKER_EXITED ? wr->exit_code : 127;
    }
    int err = 0;
    if (j->state == LIFE_STARTING && running == j->n_workers) {
        /* the run started when its last worker's process did (the nodes' clocks) */
        int64_t started = -1;
        for (size_t w = 0; w < j->n_workers; w++)
            started = MAX(started, j->workers[w].start_ms);
        j->state = LIFE_RUNNING;
        j->start_ms = started > 0 ? started : now_ms;
        if ((err = life_changed(l, j)))
            return err;
    }
    if (j->state == LIFE_STARTING || j->state == LIFE_RUNNING) {
        /* out of GPU memory: run again one size up, as its class now asks */
        int again = bad ? learn_oom_run(l, j, now_ms) : 0;
        if (again < 0)
            return again;
        if (ended == j->n_workers) {
            j->exit_code = bad ? first_bad : 0;
            return finish_run(l, j,
                              again ? LIFE_PENDING
                              : bad ? LIFE_FAILED
                                    : LIFE_SUCCEEDED,
                              now_ms);
        }
        if (bad) {
            /* one worker of the gang failed: the rest cannot go on without it */
            j->exit_code = first_bad;
            if (!again && !j->unfit &&
                (err = life_event(l, j, now_ms, "fail", "a worker failed: the others are stopped")))
                return err;
            return life_stop(l, j, LIFE_STOP_TEARDOWN, again, now_ms);
        }
        return 0;
    }
    if (j->state == LIFE_STOPPING && ended == j->n_workers) {
        LifeState final = j->requeue                         ? LIFE_PENDING
                          : j->stop_mode == LIFE_STOP_CANCEL ? LIFE_CANCELLED
                                                             : LIFE_FAILED;
        return finish_run(l, j, final, now_ms);
    }
    return 0;
}

int life_stop(Life *l, LifeJob *j, LifeStop mode, bool requeue, int64_t now_ms)
{
    if (j->state == LIFE_PENDING) {
        sched_dequeue(l->sched, j->sj);
        return end_job(l, j, LIFE_CANCELLED, now_ms);
    }
    if (life_state_ended(j->state))
        return 0;
    /* a cancel overrides a preemption under way; nothing overrides a cancel */
    if (j->state != LIFE_STOPPING || mode == LIFE_STOP_CANCEL) {
        j->stop_mode = (uint8_t)mode;
        j->requeue = requeue;
    }
    if (j->state != LIFE_STOPPING)
        j->stop_ms = now_ms;
    j->state = LIFE_STOPPING;
    j->sj->stopping = true;
    int err = life_changed(l, j);
    return err ? err : life_progress(l, j, now_ms);
}

int life_node_gone(Life *l, LifeJob *j, uint32_t node, const char *why, int64_t now_ms)
{
    for (size_t w = 0; w < j->n_workers; w++)
        if (j->workers[w].node == node && !life_worker_ended(&j->workers[w]))
            j->workers[w].state = LIFE_WORKER_GONE;
    int err = life_event(l, j, now_ms, "lost", why);
    if (err)
        return err;
    if (j->state == LIFE_STOPPING)
        return life_progress(l, j, now_ms);
    return life_stop(l, j, LIFE_STOP_PREEMPT, true, now_ms);
}

void life_checkpoint(LifeJob *j, int64_t t_ms, double saved_work_ms)
{
    j->checkpoint_ms = t_ms;
    j->sj->last_checkpoint_ms = t_ms;
    j->saved_work_ms = saved_work_ms;
}

void life_checkpoint_run(LifeJob *j, int64_t t_ms)
{
    double ran = (double)(t_ms - j->sj->run_start_ms);
    life_checkpoint(j, t_ms, j->start_saved_ms + MAX(0.0, ran));
}

int life_end(Life *l, LifeJob *j, LifeState final, int64_t now_ms)
{
    return end_job(l, j, final, now_ms);
}

bool life_on_node(const LifeJob *j, uint32_t node, bool running_only)
{
    for (size_t w = 0; w < j->n_workers; w++) {
        const LifeWorker *wr = &j->workers[w];
        if (wr->node == node && !life_worker_ended(wr) &&
            (!running_only || wr->state == LIFE_WORKER_RUNNING))
            return true;
    }
    return false;
}

void life_job_free(LifeJob *j)
{
    free(j->workers);
    j->workers = NULL;
    j->n_workers = 0;
}
