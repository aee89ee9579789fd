/* timesim.c: time mode. Jobs arrive at their submit time, wait in a queue ordered by
 * the run's queue order (FIFO, priority, or Tiresias' two-dimensional least attained
 * service), are placed by the run's placement policy, and run for their duration;
 * a placement that re-carves MIG starts only after the reconfiguration delay. A
 * training or batch job given less compute than it uses (its `busy` times the GPUs it
 * asked) runs proportionally slower. Scheduling passes run whenever something changed
 * at an event time; the clock is simulated, so a run is deterministic.
 *
 * Measured use of a running job is min(busy x GPUs asked, GPU-equivalents given);
 * utilisation is its time integral over capacity x makespan, allocation the same for
 * what is allocated (including GPUs held by a gang that has not started). */
#include "sim/evlog.h"
#include "sim/evq.h"
#include "sim/sim.h"
#include "util/macro.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Tiresias: two queues split at 16 GPU-hours of attained service, FIFO inside a queue
 * (the setting AdaptDL's artifact uses for the same Philly table). */
#define TIRESIAS_THRESHOLD_GPU_MS (16.0 * 3600 * 1000)

typedef enum JobState {
    JS_FUTURE,  /* not submitted yet */
    JS_WAITING, /* in the queue (possibly holding part of a gang under no-gang policies) */
    JS_BINDING, /* placed; MIG reconfiguration in flight */
    JS_RUNNING,
    JS_DONE,
    JS_NEVER, /* unschedulable on this cluster */
} JobState;

typedef struct SimJob {
    uint8_t state;
    uint64_t epoch; /* bumped when a posted event about the job becomes stale */
    int64_t submit_ms;
    double work_ms; /* remaining work at full speed */
    double speed;   /* work per simulated ms while running */
    int64_t run_since_ms;
    int64_t first_start_ms;
    int64_t finish_ms;
    double busy_eq, alloc_eq; /* GPU-equivalents used and held now */
    double attained_gpu_ms;   /* Tiresias: GPUs x time run, past runs */
    int64_t ran_ms;           /* time spent running, past runs */
    double gpus_asked;
    uint32_t workers_placed;
    Placement pl;
} SimJob;

typedef struct Sample {
    int64_t t_ms;
    double busy, alloc;
    uint32_t queued, running;
} Sample;

typedef struct TimeSim {
    const SimInput *in;
    const SimPolicy *sp;
    Cluster *c;
    PlaceCtx ctx;
    ScoreCache cache;
    Rng rng;
    EventQueue q;
    SimJob *jobs;
    size_t n_jobs;
    EvLog ev;
    /* the queue: waiting job indices in queue order */
    uint32_t *wait;
    size_t n_wait, wait_cap;
    /* running (or binding) jobs, for Tiresias' preemption */
    uint32_t *run;
    size_t n_run, run_cap;
    /* current totals and their integrals */
    int64_t now_ms, last_ms, t0_ms;
    double busy, alloc, busy_area, alloc_area;
    double *team_busy, *team_alloc, *team_busy_area, *team_alloc_area;
    double prio_busy[PRIO_COUNT], prio_alloc[PRIO_COUNT];
    double prio_busy_area[PRIO_COUNT], prio_alloc_area[PRIO_COUNT];
    size_t running;
    Sample *samples;
    size_t n_samples, samples_cap;
    /* per-pass memo: the fewest workers of a shape that failed to place */
    uint32_t *failed_workers;
    uint64_t *failed_pass;
    uint64_t pass;
    size_t preemptions, reconfigurations;
    Placement scratch;
    Buf why;
    bool dirty; /* something changed: run a scheduling pass */
} TimeSim;

static const JobSpec *spec_of(const TimeSim *s, uint32_t j)
{
    return &s->in->jobs->jobs[j];
}

/* ---- accounting ---- */

static void integrate(TimeSim *s, int64_t t)
{
    double dt = (double)(t - s->last_ms);
    if (dt > 0) {
        s->busy_area += s->busy * dt;
        s->alloc_area += s->alloc * dt;
        for (size_t i = 0; i < s->in->prep.n_teams; i++) {
            s->team_busy_area[i] += s->team_busy[i] * dt;
            s->team_alloc_area[i] += s->team_alloc[i] * dt;
        }
        for (int p = 0; p < PRIO_COUNT; p++) {
            s->prio_busy_area[p] += s->prio_busy[p] * dt;
            s->prio_alloc_area[p] += s->prio_alloc[p] * dt;
        }
    }
    s->last_ms = t;
}

static int sample(TimeSim *s)
{
    if (s->n_samples && s->samples[s->n_samples - 1].t_ms == s->now_ms)
        s->n_samples--;
    if (GROW(s->samples, s->samples_cap, s->n_samples + 1) < 0)
        return -ENOMEM;
    s->samples[s->n_samples++] = (Sample){.t_ms = s->now_ms,
                                          .busy = s->busy,
                                          .alloc = s->alloc,
                                          .queued = (uint32_t)s->n_wait,
                                          .running = (uint32_t)s->running};
    return 0;
}

/* Add (sign +1) or remove (-1) a job's held and used compute from the totals. */
static void account(TimeSim *s, uint32_t j, double sign, bool busy_too)
{
    SimJob *sj = &s->jobs[j];
    uint32_t team = s->in->prep.team_of[j];
    unsigned prio = spec_of(s, j)->priority;
    s->alloc += sign * sj->alloc_eq;
    s->team_alloc[team] += sign * sj->alloc_eq;
    s->prio_alloc[prio] += sign * sj->alloc_eq;
    if (busy_too) {
        s->busy += sign * sj->busy_eq;
        s->team_busy[team] += sign * sj->busy_eq;
        s->prio_busy[prio] += sign * sj->busy_eq;
    }
}

/* ---- the queue ---- */

static bool before(const TimeSim *s, uint32_t a, uint32_t b)
{
    const SimJob *x = &s->jobs[a], *y = &s->jobs[b];
    switch (s->sp->order) {
    case ORDER_PRIORITY: {
        unsigned pa = spec_of(s, a)->priority, pb = spec_of(s, b)->priority;
        if (pa != pb)
            return pa < pb;
        break;
    }
    case ORDER_TIRESIAS: {
        bool qa = x->attained_gpu_ms >= TIRESIAS_THRESHOLD_GPU_MS;
        bool qb = y->attained_gpu_ms >= TIRESIAS_THRESHOLD_GPU_MS;
        if (qa != qb)
            return !qa;
        break;
    }
    case ORDER_FIFO:
        break;
    }
    if (x->submit_ms != y->submit_ms)
        return x->submit_ms < y->submit_ms;
    return a < b;
}

/* Insert keeping queue order (binary search: arrivals mostly append). */
static int enqueue(TimeSim *s, uint32_t j)
{
    if (GROW(s->wait, s->wait_cap, s->n_wait + 1) < 0)
        return -ENOMEM;
    size_t lo = 0, hi = s->n_wait;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (before(s, s->wait[mid], j))
            lo = mid + 1;
        else
            hi = mid;
    }
    memmove(&s->wait[lo + 1], &s->wait[lo], (s->n_wait - lo) * sizeof(*s->wait));
    s->wait[lo] = j;
    s->n_wait++;
    s->jobs[j].state = JS_WAITING;
    return 0;
}

static void remove_at(uint32_t *arr, size_t *n, uint32_t j)
{
    for (size_t i = 0; i < *n; i++)
        if (arr[i] == j) {
            memmove(&arr[i], &arr[i + 1], (*n - i - 1) * sizeof(*arr));
            (*n)--;
            return;
        }
}

/* ---- job lifecycle ---- */

static double total_units_eq(const Cluster *c, const Placement *pl)
{
    uint64_t u = 0;
    for (size_t w = 0; w < pl->n_workers; w++)
        u += worker_units(c, &pl->workers[w]);
    return (double)u / GPU_UNITS;
}

static void start(TimeSim *s, uint32_t j)
{
    SimJob *sj = &s->jobs[j];
    const JobSpec *spec = spec_of(s, j);
    account(s, j, -1, false);
    sj->alloc_eq = total_units_eq(s->c, &sj->pl);
    double demand =
        spec->busy_milli == BUSY_ALL ? INFINITY : spec->busy_milli / 1000.0 * sj->gpus_asked;
    sj->busy_eq = MIN(demand, sj->alloc_eq);
    sj->speed = 1;
    if ((spec->kind == KIND_TRAINING || spec->kind == KIND_BATCH) && isfinite(demand) &&
        sj->alloc_eq < demand && demand > 0)
        sj->speed = sj->alloc_eq / demand;
    account(s, j, +1, true);
    sj->state = JS_RUNNING;
    sj->run_since_ms = s->now_ms;
    if (sj->first_start_ms < 0)
        sj->first_start_ms = s->now_ms;
    s->running++;
    evlog_workers(&s->ev, s->c, s->now_ms, "start", spec->name, &sj->pl);
    int64_t end = s->now_ms + (int64_t)ceil(sj->work_ms / sj->speed);
    sj->epoch++;
    evq_push(&s->q, end, EV_FINISH, j, sj->epoch);
    if (s->sp->order == ORDER_TIRESIAS && sj->attained_gpu_ms < TIRESIAS_THRESHOLD_GPU_MS &&
        sj->gpus_asked > 0) {
        /* wake the scheduler when the job drops to the lower queue */
        double ms = (TIRESIAS_THRESHOLD_GPU_MS - sj->attained_gpu_ms) / sj->gpus_asked;
        if (s->now_ms + ms < end)
            evq_push(&s->q, s->now_ms + (int64_t)ceil(ms), EV_SCHEDULE, j, sj->epoch);
    }
}

/* The job's workers are all placed: start now, or after the MIG reconfiguration. */
static int bind(TimeSim *s, uint32_t j)
{
    SimJob *sj = &s->jobs[j];
    if (GROW(s->run, s->run_cap, s->n_run + 1) < 0)
        return -ENOMEM;
    s->run[s->n_run++] = j;
    if (sj->pl.n_changes) {
        s->reconfigurations += sj->pl.n_changes;
        evlog_reconfig(&s->ev, s->c, s->now_ms, spec_of(s, j)->name, &sj->pl);
        sj->state = JS_BINDING;
        sj->epoch++;
        return evq_push(&s->q, s->now_ms + s->in->opt.reconfig_delay_ms, EV_RECONFIGURED, j,
                        sj->epoch);
    }
    start(s, j);
    return 0;
}

/* Stop a running job: what it did counts, the rest waits in the queue again. */
static int stop(TimeSim *s, uint32_t j, bool finished)
{
    SimJob *sj = &s->jobs[j];
    if (sj->state == JS_RUNNING) {
        sj->ran_ms += s->now_ms - sj->run_since_ms;
        double ran = (double)(s->now_ms - sj->run_since_ms);
        sj->work_ms = MAX(0.0, sj->work_ms - ran * sj->speed);
        sj->attained_gpu_ms += ran * sj->gpus_asked;
        s->running--;
    }
    account(s, j, -1, sj->state == JS_RUNNING);
    const char *name = spec_of(s, j)->name;
    evlog_workers(&s->ev, s->c, s->now_ms, finished ? "finish" : "preempt", name, &sj->pl);
    place_release(s->c, &sj->pl);
    placement_reset(&sj->pl);
    sj->alloc_eq = sj->busy_eq = 0;
    sj->workers_placed = 0;
    sj->epoch++;
    remove_at(s->run, &s->n_run, j);
    s->dirty = true;
    if (finished) {
        sj->state = JS_DONE;
        sj->finish_ms = s->now_ms;
        return 0;
    }
    s->preemptions++;
    return enqueue(s, j);
}

/* ---- scheduling ---- */

/* Try to place (the rest of) waiting job j. 1 placed fully, 0 not, <0 error. */
static int try_place(TimeSim *s, uint32_t j)
{
    SimJob *sj = &s->jobs[j];
    Request r = s->in->prep.reqs[j];
    r.workers -= sj->workers_placed;
    if (r.shape >= 0 && s->failed_pass[r.shape] == s->pass &&
        r.workers >= s->failed_workers[r.shape])
        return 0;
    buf_reset(&s->why);
    int placed = place_job(&s->ctx, s->c, &r, &s->scratch, &s->why);
    if (placed < 0)
        return placed;
    if (s->scratch.n_workers) {
        /* keep what was placed (all of it, or part of a gang under no-gang policies) */
        Placement *pl = &sj->pl;
        if (GROW(pl->workers, pl->workers_cap, pl->n_workers + s->scratch.n_workers) < 0 ||
            GROW(pl->changes, pl->changes_cap, pl->n_changes + s->scratch.n_changes) < 0)
            return -ENOMEM;
        memcpy(pl->workers + pl->n_workers, s->scratch.workers,
               s->scratch.n_workers * sizeof(*pl->workers));
        if (s->scratch.n_changes)
            memcpy(pl->changes + pl->n_changes, s->scratch.changes,
                   s->scratch.n_changes * sizeof(*pl->changes));
        pl->n_workers += s->scratch.n_workers;
        pl->n_changes += s->scratch.n_changes;
        sj->workers_placed += (uint32_t)s->scratch.n_workers;
        account(s, j, -1, false);
        sj->alloc_eq = total_units_eq(s->c, pl);
        account(s, j, +1, false);
    }
    if (!placed && r.shape >= 0) {
        if (s->failed_pass[r.shape] != s->pass || r.workers < s->failed_workers[r.shape])
            s->failed_workers[r.shape] = r.workers;
        s->failed_pass[r.shape] = s->pass;
    }
    return placed;
}

/* Place waiting jobs in queue order; those that fit leave the queue. */
static int fill(TimeSim *s)
{
    s->pass++;
    size_t keep = 0;
    int err = 0;
    /* binding changes s->wait only through this loop's compaction */
    for (size_t i = 0; i < s->n_wait; i++) {
        uint32_t j = s->wait[i];
        int placed = err ? 0 : try_place(s, j);
        if (placed < 0) {
            err = placed;
            placed = 0;
        }
        if (placed == 1) {
            int e = bind(s, j);
            if (e < 0)
                err = e;
        } else {
            s->wait[keep++] = j;
        }
    }
    s->n_wait = keep;
    return err;
}

static double gpus_free(const Cluster *c)
{
    return (double)c->n_gpus - (double)c->used_units / GPU_UNITS;
}

static bool lower_queue(const TimeSim *s, const SimJob *r)
{
    double attained = r->attained_gpu_ms;
    if (r->state == JS_RUNNING)
        attained += (double)(s->now_ms - r->run_since_ms) * r->gpus_asked;
    return attained >= TIRESIAS_THRESHOLD_GPU_MS;
}

/* Tiresias: a waiting job of the upper queue may push out running jobs of the lower
 * queue, the most recently submitted first, when that frees enough GPUs for it. A
 * waiting job's attained service does not change, so the queue stays ordered; only
 * running jobs move down, which their EV_SCHEDULE event announces. */
static int tiresias_preempt(TimeSim *s)
{
    size_t n_upper = 0;
    while (n_upper < s->n_wait && !lower_queue(s, &s->jobs[s->wait[n_upper]]))
        n_upper++;
    if (!n_upper)
        return 0;
    uint32_t *upper = malloc(n_upper * sizeof(*upper));
    if (!upper)
        return -ENOMEM;
    memcpy(upper, s->wait, n_upper * sizeof(*upper));
    int err = 0;
    for (size_t i = 0; i < n_upper && !err; i++) {
        uint32_t j = upper[i];
        double lower = 0;
        for (size_t k = 0; k < s->n_run; k++)
            if (lower_queue(s, &s->jobs[s->run[k]]))
                lower += s->jobs[s->run[k]].alloc_eq;
        if (lower <= 0)
            break;
        if (gpus_free(s->c) + lower < s->jobs[j].gpus_asked)
            continue;
        for (;;) {
            s->pass++; /* the cluster changed since the last try: forget failures */
            int placed = try_place(s, j);
            if (placed < 0) {
                err = placed;
                break;
            }
            if (placed == 1) {
                remove_at(s->wait, &s->n_wait, j);
                err = bind(s, j);
                break;
            }
            /* the victim: the lower-queue job submitted last */
            int64_t victim = -1;
            for (size_t k = 0; k < s->n_run; k++) {
                uint32_t r = s->run[k];
                if (!lower_queue(s, &s->jobs[r]))
                    continue;
                if (victim < 0 || s->jobs[r].submit_ms > s->jobs[victim].submit_ms ||
                    (s->jobs[r].submit_ms == s->jobs[victim].submit_ms && r > victim))
                    victim = r;
            }
            if (victim < 0)
                break;
            err = stop(s, (uint32_t)victim, false);
            if (err)
                break;
        }
    }
    free(upper);
    return err;
}

static int schedule(TimeSim *s)
{
    int err = 0;
    if (s->sp->order == ORDER_TIRESIAS)
        err = tiresias_preempt(s);
    if (!err)
        err = fill(s);
    s->dirty = false;
    return err;
}

/* ---- the run ---- */

static int handle(TimeSim *s, const Event *e)
{
    SimJob *sj = &s->jobs[e->job];
    switch (e->kind) {
    case EV_ARRIVAL:
        evlog_job(&s->ev, s->now_ms, "submit", spec_of(s, e->job)->name, NULL);
        s->dirty = true;
        return enqueue(s, e->job);
    case EV_FINISH:
        if (e->epoch != sj->epoch || sj->state != JS_RUNNING)
            return 0;
        return stop(s, e->job, true);
    case EV_RECONFIGURED:
        if (e->epoch != sj->epoch || sj->state != JS_BINDING)
            return 0;
        start(s, e->job);
        s->dirty = true;
        return 0;
    case EV_SCHEDULE:
        /* a Tiresias demotion: the queue order changed */
        if (e->epoch == sj->epoch && sj->state == JS_RUNNING)
            s->dirty = true;
        return 0;
    default:
        return 0;
    }
}

static void finish_groups(TimeSim *s, TimeResult *res, double span_ms);

int sim_run_time(const SimInput *in, const SimPolicy *sp, uint64_t seed, RunResult *ret)
{
    const JobList *jl = in->jobs;
    const SimPrep *prep = &in->prep;
    TimeSim s = {.in = in, .sp = sp, .n_jobs = jl->n};
    TimeResult *res = &ret->time;
    *res = (TimeResult){0};
    ret->seed = seed;
    ret->mode = SIM_TIME;
    s.ev = (EvLog){.on = in->opt.events, .out = &ret->events, .policy = sp->name, .seed = seed};
    int err = -ENOMEM;
    rng_seed(&s.rng, seed);
    evq_init(&s.q);
    size_t nt = prep->n_teams ? prep->n_teams : 1;
    s.c = cluster_clone(in->cluster);
    s.jobs = calloc(jl->n ? jl->n : 1, sizeof(*s.jobs));
    s.team_busy = calloc(nt, sizeof(double));
    s.team_alloc = calloc(nt, sizeof(double));
    s.team_busy_area = calloc(nt, sizeof(double));
    s.team_alloc_area = calloc(nt, sizeof(double));
    s.failed_workers = calloc(prep->n_shapes ? prep->n_shapes : 1, sizeof(*s.failed_workers));
    s.failed_pass = calloc(prep->n_shapes ? prep->n_shapes : 1, sizeof(*s.failed_pass));
    if (!s.c || !s.jobs || !s.team_busy || !s.team_alloc || !s.team_busy_area ||
        !s.team_alloc_area || !s.failed_workers || !s.failed_pass)
        goto out;
    if ((err = place_ctx_init(&s.ctx, s.c, sp->place, &s.rng, NULL, &prep->expected)) < 0 ||
        (err = score_cache_init(&s.cache, s.c->n_nodes, prep->n_shapes)) < 0)
        goto out;
    s.ctx.cache = &s.cache;

    int64_t t0 = INT64_MAX;
    for (size_t i = 0; i < jl->n; i++) {
        const JobSpec *j = &jl->jobs[i];
        SimJob *sj = &s.jobs[i];
        sj->submit_ms = j->submit_ms;
        sj->first_start_ms = -1;
        sj->work_ms = (double)j->duration_ms;
        const Request *r = &prep->reqs[i];
        sj->gpus_asked = (double)r->workers * (r->kind == REQ_GPUS   ? r->gpus
                                               : r->kind == REQ_NONE ? 0
                                                                     : 1);
        res->submitted++;
        if (prep->unschedulable[i] || j->duration_ms < 0) {
            sj->state = JS_NEVER;
            res->unschedulable++;
            evlog_job(&s.ev, j->submit_ms, "unschedulable", j->name,
                      prep->unschedulable[i] ? prep->unschedulable[i] : "the job has no duration");
            continue;
        }
        t0 = MIN(t0, j->submit_ms);
        if ((err = evq_push(&s.q, j->submit_ms, EV_ARRIVAL, (uint32_t)i, 0)) < 0)
            goto out;
    }
    if (t0 == INT64_MAX)
        t0 = 0;
    s.t0_ms = s.now_ms = s.last_ms = t0;

    /* Handle every event of a time, then schedule once at that time (which may post
     * events at the same time), sample, and move the clock to the next event. */
    for (;;) {
        const Event *next = evq_peek(&s.q);
        if (!next || next->t_ms != s.now_ms) {
            if (s.dirty && (err = schedule(&s)) < 0)
                goto out;
            if ((err = sample(&s)) < 0)
                goto out;
            next = evq_peek(&s.q);
            if (!next)
                break;
            if (next->t_ms != s.now_ms) {
                integrate(&s, next->t_ms);
                s.now_ms = next->t_ms;
            }
        }
        Event e;
        evq_pop(&s.q, &e);
        if ((err = handle(&s, &e)) < 0)
            goto out;
        if (in->progress && e.kind == EV_ARRIVAL)
            __atomic_fetch_add(in->progress, 1, __ATOMIC_RELAXED);
    }
    /* the run ends with the last event; what still waits never got placed */
    res->never_placed = s.n_wait;
    for (size_t i = 0; i < s.n_wait; i++)
        evlog_job(&s.ev, s.now_ms, "never-placed", spec_of(&s, s.wait[i])->name, NULL);
    double span_ms = (double)(s.now_ms - s.t0_ms);
    double cap = (double)s.c->n_gpus;
    res->utilization_pct = span_ms > 0 && cap > 0 ? 100.0 * s.busy_area / (cap * span_ms) : 0;
    res->allocation_pct = span_ms > 0 && cap > 0 ? 100.0 * s.alloc_area / (cap * span_ms) : 0;
    res->makespan_s = span_ms / 1000.0;
    res->preemptions = s.preemptions;
    res->reconfigurations = s.reconfigurations;
    finish_groups(&s, res, span_ms);
    err = evlog_error(&s.ev);
out:
    for (size_t i = 0; s.jobs && i < s.n_jobs; i++)
        placement_free(&s.jobs[i].pl);
    free(s.jobs);
    free(s.wait);
    free(s.run);
    free(s.samples);
    free(s.team_busy);
    free(s.team_alloc);
    free(s.team_busy_area);
    free(s.team_alloc_area);
    free(s.failed_workers);
    free(s.failed_pass);
    placement_free(&s.scratch);
    buf_free(&s.why);
    evq_free(&s.q);
    score_cache_free(&s.cache);
    place_ctx_free(&s.ctx);
    cluster_free(s.c);
    return err;
}

/* ---- results ---- */

static int collect(TimeSim *s, GroupResult *g, bool (*member)(TimeSim *, uint32_t, size_t),
                   size_t key)
{
    double *qd = malloc((s->n_jobs ? s->n_jobs : 1) * sizeof(double));
    double *jct = malloc((s->n_jobs ? s->n_jobs : 1) * sizeof(double));
    if (!qd || !jct) {
        free(qd);
        free(jct);
        return -ENOMEM;
    }
    size_t nq = 0, nf = 0;
    for (size_t i = 0; i < s->n_jobs; i++) {
        const SimJob *sj = &s->jobs[i];
        if (member && !member(s, (uint32_t)i, key))
            continue;
        /* waiting is all the time not running: before the first start, during MIG
         * reconfigurations, and after preemptions */
        if (sj->state == JS_DONE) {
            qd[nq++] = (double)(sj->finish_ms - sj->submit_ms - sj->ran_ms) / 1000.0;
            jct[nf++] = (double)(sj->finish_ms - sj->submit_ms) / 1000.0;
        } else if (sj->first_start_ms >= 0) {
            qd[nq++] = (double)(sj->first_start_ms - sj->submit_ms) / 1000.0;
        }
    }
    dist_from(qd, nq, &g->queue_delay_s);
    dist_from(jct, nf, &g->jct_s);
    g->finished = nf;
    free(qd);
    free(jct);
    return 0;
}

static bool in_team(TimeSim *s, uint32_t j, size_t team)
{
    return s->in->prep.team_of[j] == team;
}

static bool in_priority(TimeSim *s, uint32_t j, size_t prio)
{
    return spec_of(s, j)->priority == prio;
}

static void finish_groups(TimeSim *s, TimeResult *res, double span_ms)
{
    GroupResult all = {0};
    collect(s, &all, NULL, 0);
    res->queue_delay_s = all.queue_delay_s;
    res->jct_s = all.jct_s;
    res->finished = all.finished;
    res->jobs_per_hour = span_ms > 0 ? (double)all.finished / (span_ms / 3600000.0) : 0;
    for (int p = 0; p < PRIO_COUNT; p++) {
        collect(s, &res->by_priority[p], in_priority, (size_t)p);
        res->by_priority[p].busy_gpu_s = s->prio_busy_area[p] / 1000.0;
        res->by_priority[p].alloc_gpu_s = s->prio_alloc_area[p] / 1000.0;
    }
    const SimPrep *prep = &s->in->prep;
    res->by_team = calloc(prep->n_teams ? prep->n_teams : 1, sizeof(*res->by_team));
    if (res->by_team) {
        res->n_teams = prep->n_teams;
        for (size_t t = 0; t < prep->n_teams; t++) {
            GroupResult *g = &res->by_team[t];
            g->name = strdup(prep->team_names[t]);
            collect(s, g, in_team, t);
            g->busy_gpu_s = s->team_busy_area[t] / 1000.0;
            g->alloc_gpu_s = s->team_alloc_area[t] / 1000.0;
        }
    }
    /* the timeline: time-weighted means over equal slices of the run */
    size_t np = s->in->opt.timeline_points ? s->in->opt.timeline_points : 600;
    double cap = (double)s->c->n_gpus;
    if (span_ms <= 0 || !s->n_samples || cap <= 0)
        return;
    res->timeline = calloc(np, sizeof(*res->timeline));
    if (!res->timeline)
        return;
    res->n_timeline = np;
    double width = span_ms / (double)np;
    size_t k = 0;
    for (size_t b = 0; b < np; b++) {
        double lo = (double)s->t0_ms + width * (double)b, hi = lo + width;
        double busy = 0, alloc = 0;
        uint32_t queued = 0, running = 0;
        while (k + 1 < s->n_samples && (double)s->samples[k + 1].t_ms <= lo)
            k++;
        for (size_t m = k; m < s->n_samples && (double)s->samples[m].t_ms < hi; m++) {
            double from = MAX(lo, (double)s->samples[m].t_ms);
            double to = m + 1 < s->n_samples ? MIN(hi, (double)s->samples[m + 1].t_ms) : hi;
            if (to <= from)
                continue;
            busy += s->samples[m].busy * (to - from);
            alloc += s->samples[m].alloc * (to - from);
            queued = MAX(queued, s->samples[m].queued);
            running = MAX(running, s->samples[m].running);
        }
        res->timeline[b] = (TimelinePoint){
            .t_s = (hi - (double)s->t0_ms) / 1000.0,
            .utilization_pct = 100.0 * busy / (width * cap),
            .allocation_pct = 100.0 * alloc / (width * cap),
            .queued = queued,
            .running = running,
        };
    }
}
