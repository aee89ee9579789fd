/* timesim.c: time mode. Jobs arrive at their submit time and join the core scheduler's
 * queue; after the events of each moment the scheduler runs one cycle (sched.h) and the
 * simulator carries out its decisions on simulated time:
 *  - a start that re-carves MIG begins after the reconfiguration delay;
 *  - a running job makes progress at its speed (a training or batch job given less
 *    compute than it uses, busy x GPUs asked, runs proportionally slower) and stops for
 *    its checkpoint cost at each checkpoint interval;
 *  - a preempted job checkpoints within its grace when its checkpoint cost allows
 *    (losing nothing), or is killed at the end of its grace, losing the work since its
 *    last checkpoint; either way it holds its GPUs until then and is queued again;
 *  - a job whose true peak GPU memory exceeds what it was given runs out of memory
 *    shortly after it starts: the simulator records the peak with the core (learn.h),
 *    which sizes this job, the jobs of its class already waiting and every later one
 *    from it.
 * The scheduler is never told a job's true duration unless --oracle-estimates.
 *
 * Nodes come and go when a pool autoscales or spot is interrupted: the autoscaler
 * (core/autoscale.h) runs after each cycle and its starts come up after the pool's
 * start-up; up spot nodes draw notices from a stream of their own, and a notice stops
 * the node's jobs within it. Node events have a queue of their own, so they never keep
 * a finished run going; the bill and the capacity figures count present nodes only.
 *
 * Measured use of a running job is min(busy x GPUs asked, GPU-equivalents given), and
 * nothing while it checkpoints or stops; utilisation is its integral over capacity x
 * makespan, allocation the same for what is held; the saturated figures integrate only
 * over the time the waiting work could fill every idle GPU (its GPU-equivalents at least
 * the idle ones), which leaves out the warm-up, the drain at the end, and a lone gang
 * waiting in an emptying cluster. */
#include "core/autoscale.h"
#include "core/learn.h"
#include "life/life.h"
#include "sim/evlog.h"
#include "sim/evq.h"
#include "sim/sim.h"
#include "util/macro.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef enum Phase {
    PH_FUTURE,        /* not submitted yet */
    PH_WAITING,       /* in the queue */
    PH_BINDING,       /* placed; MIG reconfiguration in flight */
    PH_RUNNING,       /* making progress */
    PH_CHECKPOINTING, /* a periodic checkpoint: no progress */
    PH_STOPPING,      /* preempted: checkpointing or in its grace */
    PH_DONE,
    PH_NEVER, /* unschedulable on this cluster */
} Phase;

/* A job as simulated: its lifecycle (life.h), which the orchestrator sees, and the
 * model of its workload, which only the simulator knows (how much work it has done, how
 * fast it runs, when it checkpoints). */
typedef struct SimJob {
    SchedJob sj;  /* sj.id is the job's index */
    LifeJob life; /* life.sj is &sj; life.saved_work_ms the work a resume starts from (its
                   * last checkpoint) */
    uint8_t phase;
    uint64_t epoch;    /* bumped when a posted event about the job becomes stale */
    uint64_t move_seq; /* its moves so far: an EV_MOVED of an earlier one is stale */
    double work_ms;    /* total work at full speed */
    double done_ms;    /* work done */
    double speed;      /* work per simulated ms while running */
    int64_t since_ms;  /* when the current phase began */
    int64_t hold_since_ms;
    int64_t first_start_ms, finish_ms, wait_since_ms;
    int64_t held_ms; /* time holding GPUs while running, checkpointing or stopping */
    double busy_eq, alloc_eq;
    int64_t ckpt_interval_ms, ckpt_cost_ms;
    uint32_t team;
    int64_t stop_at_ms;          /* stopping: when its last checkpoint is done */
    double saved_before_stop_ms; /* stopping: what a checkpoint cut short leaves it with */
    bool moved;                  /* moved back to reserved or owned capacity once */
    bool ran_on_spot;
} SimJob;

typedef struct Sample {
    int64_t t_ms;
    double busy, alloc, cap;
    uint32_t queued, running;
} Sample;

typedef struct TimeSim {
    const SimInput *in;
    const SimPolicy *sp;
    Cluster *c;
    PlaceCtx ctx;
    ScoreCache cache;
    Sched sched;
    Learn learn;
    Life life; /* what happens to the jobs after the core decides (life.h) */
    Rng rng;
    EventQueue q;
    SimJob *jobs;
    size_t n_jobs;
    EvLog ev;
    uint32_t *holding; /* jobs holding GPUs (binding, running, checkpointing, stopping) */
    size_t n_holding, holding_cap;
    SchedJob **ptrs;
    size_t ptrs_cap;
    SchedDecisions dec;
    int64_t now_ms, last_ms, t0_ms, next_wake_ms;
    int64_t end_ms; /* the last moment something changed */
    double busy, alloc, busy_area, alloc_area;
    double sat_ms, sat_busy_area, sat_alloc_area; /* while work waits (the queue is not empty) */
    double win_ms, win_busy_area, win_alloc_area; /* inside --window */
    bool saturated;
    double *team_busy, *team_alloc, *team_busy_area, *team_alloc_area, *team_unmet_ms;
    bool *team_unmet;
    double prio_busy[PRIO_COUNT], prio_alloc[PRIO_COUNT];
    double prio_busy_area[PRIO_COUNT], prio_alloc_area[PRIO_COUNT];
    size_t running;
    Sample *samples;
    size_t n_samples, samples_cap;
    size_t preemptions, reconfigurations, drains, server_moves;
    double lost_gpu_ms, ckpt_gpu_ms;
    bool dirty;
    uint64_t changes; /* bumped by every event that changes something */
    /* nodes that come and go: autoscaled pools and spot interruptions */
    bool elastic;
    Autoscaler as;
    AutoscaleDecisions asd;
    AutoscaleJob *asj; /* the pass's waiting jobs, then its running ones */
    size_t asj_cap;
    int64_t as_wake_ms;   /* the autoscaler's wake-up posted, or 0 */
    EventQueue nq;        /* node events (a queue of their own: they never keep a run going) */
    uint64_t *node_epoch; /* bumped on every state change: posted node events go stale */
    Rng spot_rng;         /* interruptions: a stream apart, so placement draws stay as they were */
    double present_gpus;  /* GPUs of present nodes */
    double cap_area, sat_cap_area, win_cap_area;
    uint32_t *pool_present; /* per pool: present nodes */
    double *pool_node_ms;   /* per pool: present node-ms so far */
    double *end_node_ms;    /* the same at the last change (the end of the run) */
    double end_cap_area;
    size_t interruptions, nodes_started, moves, production_on_spot, unsaved_on_spot;
    size_t end_interruptions, end_nodes_started; /* at the last change */
    size_t n_leaving;                            /* nodes leaving */
    uint32_t *on_node;                           /* scratch: the jobs on one node */
    size_t on_node_cap;
} TimeSim;

static const JobSpec *spec_of(const TimeSim *s, uint32_t j)
{
    return &s->in->jobs->jobs[j];
}

/* ---- accounting ---- */

/* The part of [from, to) inside --window, at the current use. */
static void integrate_window(TimeSim *s, int64_t from, int64_t to)
{
    const SimOptions *o = &s->in->opt;
    if (o->window_to_ms <= o->window_from_ms)
        return;
    double lo = (double)MAX(from - s->t0_ms, o->window_from_ms);
    double hi = (double)MIN(to - s->t0_ms, o->window_to_ms);
    if (hi > lo) {
        s->win_ms += hi - lo;
        s->win_busy_area += s->busy * (hi - lo);
        s->win_alloc_area += s->alloc * (hi - lo);
        s->win_cap_area += s->present_gpus * (hi - lo);
    }
}

static void integrate(TimeSim *s, int64_t t)
{
    double dt = (double)(t - s->last_ms);
    if (dt > 0) {
        s->busy_area += s->busy * dt;
        s->alloc_area += s->alloc * dt;
        s->cap_area += s->present_gpus * dt;
        for (size_t p = 0; p < s->c->n_pools; p++)
            s->pool_node_ms[p] += (double)s->pool_present[p] * dt;
        if (s->saturated) {
            s->sat_ms += dt;
            s->sat_busy_area += s->busy * dt;
            s->sat_alloc_area += s->alloc * dt;
            s->sat_cap_area += s->present_gpus * dt;
        }
        integrate_window(s, s->last_ms, t);
        for (size_t i = 0; i < s->in->prep.n_teams; i++) {
            s->team_busy_area[i] += s->team_busy[i] * dt;
            s->team_alloc_area[i] += s->team_alloc[i] * dt;
            if (s->team_unmet[i])
                s->team_unmet_ms[i] += dt;
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
                                          .cap = s->present_gpus,
                                          .queued = (uint32_t)sched_queue_len(&s->sched),
                                          .running = (uint32_t)s->running};
    return 0;
}

/* Add (+1) or remove (-1) a job's held and used compute from the totals. */
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

static double placement_eq(const Cluster *c, const Placement *pl)
{
    uint64_t u = 0;
    for (size_t w = 0; w < pl->n_workers; w++)
        u += worker_units(c, &pl->workers[w]);
    return (double)u / GPU_UNITS;
}

static int hold(TimeSim *s, uint32_t j)
{
    if (GROW(s->holding, s->holding_cap, s->n_holding + 1) < 0)
        return -ENOMEM;
    s->holding[s->n_holding++] = j;
    s->jobs[j].hold_since_ms = s->now_ms;
    return 0;
}

static void unhold(TimeSim *s, uint32_t j)
{
    for (size_t i = 0; i < s->n_holding; i++)
        if (s->holding[i] == j) {
            s->holding[i] = s->holding[--s->n_holding];
            return;
        }
}

/* ---- progress ---- */

/* Count the progress of a running job up to now. */
static void advance(TimeSim *s, SimJob *sj)
{
    if (sj->phase == PH_RUNNING) {
        double ran = (double)(s->now_ms - sj->since_ms);
        sj->done_ms = MIN(sj->work_ms, sj->done_ms + ran * sj->speed);
    }
    if (sj->phase == PH_CHECKPOINTING)
        s->ckpt_gpu_ms += sj->alloc_eq * (double)(s->now_ms - sj->since_ms);
    sj->since_ms = s->now_ms;
}

/* Post the running job's next event: its finish or its next checkpoint. */
static int next_event(TimeSim *s, uint32_t j)
{
    SimJob *sj = &s->jobs[j];
    sj->epoch++;
    double left = sj->work_ms - sj->done_ms;
    int64_t end = s->now_ms + (int64_t)ceil(left / sj->speed);
    if (sj->ckpt_interval_ms > 0) {
        int64_t ck = sj->sj.last_checkpoint_ms + sj->ckpt_interval_ms;
        if (ck < s->now_ms)
            ck = s->now_ms;
        if (ck < end)
            return evq_push(&s->q, ck, EV_CHECKPOINT, j, sj->epoch);
    }
    return evq_push(&s->q, end, EV_FINISH, j, sj->epoch);
}

/* The worker of the run granted the least GPU memory (NULL when none holds a GPU). */
static const WorkerAlloc *least_worker(const Cluster *c, const Placement *pl)
{
    const WorkerAlloc *least = NULL;
    uint64_t least_mib = UINT64_MAX;
    for (size_t w = 0; w < pl->n_workers; w++) {
        const WorkerAlloc *wa = &pl->workers[w];
        uint64_t mib = learn_granted_mib(c, wa);
        if (wa->n_grants && mib < least_mib) {
            least = wa;
            least_mib = mib;
        }
    }
    return least;
}

/* The least GPU memory a worker of the run was granted. */
static uint64_t granted_mib(const Cluster *c, const Placement *pl)
{
    const WorkerAlloc *wa = least_worker(c, pl);
    return wa ? learn_granted_mib(c, wa) : UINT64_MAX;
}

/* A run on spot nodes: a job that gives a checkpoint cost but no interval checkpoints
 * at the Young/Daly interval for the interruption rate of its nodes together; and a
 * production job there, or one an interruption would lose work of, is counted (the
 * tier rules say it never happens). */
static void on_spot(TimeSim *s, uint32_t j)
{
    SimJob *sj = &s->jobs[j];
    const JobSpec *spec = spec_of(s, j);
    const Placement *pl = &sj->sj.pl;
    double rate = 0;
    bool spot = false;
    for (size_t w = 0; w < pl->n_workers; w++) {
        uint32_t node = pl->workers[w].node;
        bool seen = false;
        for (size_t v = 0; v < w; v++)
            seen |= pl->workers[v].node == node;
        const Pool *p = &s->c->pools[s->c->nodes[node].pool];
        if (p->tier == TIER_SPOT) {
            spot = true;
            if (!seen)
                rate += p->interruptions_per_hour;
        }
    }
    sj->ckpt_interval_ms = spec->checkpoint_interval_ms;
    if (!sj->ckpt_interval_ms)
        sj->ckpt_interval_ms = autoscale_checkpoint_interval_ms(sj->ckpt_cost_ms, rate);
    if (spot && !sj->ran_on_spot) {
        sj->ran_on_spot = true;
        if (spec->priority == PRIO_PRODUCTION)
            s->production_on_spot++;
        if (!job_spec_spot_ok(spec))
            s->unsaved_on_spot++;
    }
}

/* The GPU-equivalents a job uses while it runs, given all it asks (INFINITY: all it holds). */
static double demand_of(const TimeSim *s, uint32_t j)
{
    const JobSpec *spec = spec_of(s, j);
    return spec->busy_milli == BUSY_ALL ? INFINITY
                                        : spec->busy_milli / 1000.0 * s->jobs[j].life.gpus_asked;
}

static int start_run(TimeSim *s, uint32_t j)
{
    SimJob *sj = &s->jobs[j];
    const JobSpec *spec = spec_of(s, j);
    sj->alloc_eq = placement_eq(s->c, &sj->sj.pl);
    double demand = demand_of(s, j);
    sj->busy_eq = MIN(demand, sj->alloc_eq);
    sj->speed = 1;
    if ((spec->kind == KIND_TRAINING || spec->kind == KIND_BATCH) && isfinite(demand) &&
        sj->alloc_eq < demand && demand > 0)
        sj->speed = sj->alloc_eq / demand;
    account(s, j, +1, true);
    sj->phase = PH_RUNNING;
    sj->since_ms = s->now_ms;
    sj->hold_since_ms = s->now_ms;
    sj->sj.run_start_ms = s->now_ms;
    sj->sj.last_checkpoint_ms = s->now_ms;
    if (sj->first_start_ms < 0)
        sj->first_start_ms = s->now_ms;
    s->running++;
    for (size_t w = 0; w < sj->life.n_workers; w++) {
        int err = life_worker_running(&s->life, &sj->life, w, s->now_ms, s->now_ms);
        if (err)
            return err;
    }
    on_spot(s, j);
    evlog_workers(&s->ev, s->c, s->now_ms, "start", spec->name, &sj->sj.pl);
    /* too big for what it got: it runs out of memory as it loads */
    if (spec->peak_memory_mib && spec->peak_memory_mib > granted_mib(s->c, &sj->sj.pl)) {
        sj->epoch++;
        int64_t at = s->now_ms + MIN(s->in->opt.oom_after_ms,
                                     (int64_t)ceil((sj->work_ms - sj->done_ms) / sj->speed));
        return evq_push(&s->q, at, EV_OOM, j, sj->epoch);
    }
    int err = next_event(s, j);
    if (!err && s->sp->sched.order == SCHED_ORDER_TIRESIAS && sj->life.gpus_asked > 0) {
        /* wake the scheduler when the job drops to the lower queue */
        double thr = s->sp->sched.tiresias_threshold_gpu_ms, at = sj->life.attained_base_ms;
        if (at < thr)
            err = evq_push(&s->q, s->now_ms + (int64_t)ceil((thr - at) / sj->life.gpus_asked),
                           EV_SCHEDULE, j, sj->epoch);
    }
    return err;
}

/* The scheduler placed job j: start now, or after the MIG reconfiguration. */
static int bind(TimeSim *s, uint32_t j)
{
    SimJob *sj = &s->jobs[j];
    int err = life_start(&s->life, &sj->life, s->now_ms);
    if (!err)
        err = hold(s, j);
    if (err)
        return err;
    if (sj->alloc_eq > 0) {
        /* it held part of a gang while waiting (no-gang policies): recount it whole */
        account(s, j, -1, false);
        sj->alloc_eq = 0;
    }
    if (sj->sj.pl.n_changes) {
        s->reconfigurations += sj->sj.pl.n_changes;
        evlog_reconfig(&s->ev, s->c, s->now_ms, spec_of(s, j)->name, &sj->sj.pl);
        sj->alloc_eq = placement_eq(s->c, &sj->sj.pl);
        account(s, j, +1, false);
        sj->phase = PH_BINDING;
        sj->epoch++;
        return evq_push(&s->q, s->now_ms + s->in->opt.reconfig_delay_ms, EV_RECONFIGURED, j,
                        sj->epoch);
    }
    return start_run(s, j);
}

/* The scheduler moved a server (consolidate.h): its replacement loads (after any MIG
 * reconfiguration) while the old one serves; both are held until it is ready. */
static int start_move(TimeSim *s, uint32_t j)
{
    SimJob *sj = &s->jobs[j];
    const char *name = spec_of(s, j)->name;
    int64_t delay = s->in->opt.move_delay_ms;
    s->server_moves++;
    if (sj->sj.pl.n_changes) {
        s->reconfigurations += sj->sj.pl.n_changes;
        evlog_reconfig(&s->ev, s->c, s->now_ms, name, &sj->sj.pl);
        delay += s->in->opt.reconfig_delay_ms;
    }
    evlog_workers(&s->ev, s->c, s->now_ms, "move", name, &sj->sj.pl);
    int err = life_move_start(&s->life, &sj->life, s->now_ms);
    if (err)
        return err;
    account(s, j, -1, false);
    sj->alloc_eq = placement_eq(s->c, &sj->sj.pl) + placement_eq(s->c, &sj->sj.moved_from);
    account(s, j, +1, false);
    return evq_push(&s->q, s->now_ms + delay, EV_MOVED, j, ++sj->move_seq);
}

/* The replacement is ready: it serves, and the old worker stops at once. */
static int end_move(TimeSim *s, uint32_t j)
{
    SimJob *sj = &s->jobs[j];
    if (!sj->sj.moving)
        return 0;
    sj->life.shadow.state = LIFE_WORKER_RUNNING;
    sj->life.shadow.start_ms = s->now_ms;
    int err = life_move_progress(&s->life, &sj->life, s->now_ms);
    if (err)
        return err;
    sj->life.shadow.state = LIFE_WORKER_EXITED;
    return life_move_progress(&s->life, &sj->life, s->now_ms);
}

/* ---- the lifecycle's sink (life.h) ---- */

static SimJob *sim_job(LifeJob *lj)
{
    return CONTAINER_OF(lj, SimJob, life);
}

/* A job gives its GPUs back (the lifecycle releases them in the core next): its held
 * and used compute leave the totals. */
static int on_release(void *arg, LifeJob *lj, int64_t now_ms)
{
    TimeSim *s = arg;
    SimJob *sj = sim_job(lj);
    uint32_t j = lj->sj->id;
    bool productive = sj->phase == PH_RUNNING;
    if (sj->phase == PH_RUNNING || sj->phase == PH_CHECKPOINTING || sj->phase == PH_STOPPING)
        sj->held_ms += now_ms - sj->hold_since_ms;
    if (sj->phase == PH_RUNNING || sj->phase == PH_CHECKPOINTING)
        s->running--;
    account(s, j, -1, productive);
    sj->alloc_eq = sj->busy_eq = 0;
    if (lj->sj->moving)
        evlog_workers(&s->ev, s->c, now_ms, "moved", spec_of(s, j)->name, &lj->sj->moved_from);
    unhold(s, j);
    sj->epoch++;
    s->dirty = true;
    return 0;
}

/* A move is over: the old allocation goes (the core lets go of it next). */
static int on_moved(void *arg, LifeJob *lj, bool done, int64_t now_ms)
{
    TimeSim *s = arg;
    SimJob *sj = sim_job(lj);
    uint32_t j = lj->sj->id;
    if (!done)
        return -EINVAL; /* a simulated replacement always starts */
    evlog_workers(&s->ev, s->c, now_ms, "moved", spec_of(s, j)->name, &lj->sj->moved_from);
    bool busy = sj->phase == PH_RUNNING;
    account(s, j, -1, busy);
    sj->alloc_eq = placement_eq(s->c, &lj->sj->pl);
    if (busy)
        sj->busy_eq = MIN(demand_of(s, j), sj->alloc_eq);
    account(s, j, +1, busy);
    s->changes++;
    s->dirty = true;
    return 0;
}

/* The lifecycle moved a job: queued (again), done, or failed (its class outgrew every
 * GPU, or it ran out of memory with no larger grant to try). */
static int on_changed(void *arg, LifeJob *lj)
{
    TimeSim *s = arg;
    SimJob *sj = sim_job(lj);
    switch (lj->state) {
    case LIFE_PENDING:
        if (sj->phase != PH_WAITING) {
            sj->phase = PH_WAITING;
            sj->wait_since_ms = s->now_ms;
        }
        s->dirty = true;
        break;
    case LIFE_SUCCEEDED:
        sj->phase = PH_DONE;
        sj->finish_ms = s->now_ms;
        break;
    case LIFE_FAILED:
    case LIFE_CANCELLED:
        sj->phase = PH_NEVER;
        s->dirty = true;
        break;
    default:
        break;
    }
    return 0;
}

/* What the event log shows of the lifecycle's events (the simulator logs starts, stops
 * and finishes itself, with their GPUs). */
static int on_event(void *arg, LifeJob *lj, int64_t t_ms, const char *type, const char *detail)
{
    TimeSim *s = arg;
    const char *name = spec_of(s, lj->sj->id)->name;
    if (!strcmp(type, "oom"))
        evlog_job(&s->ev, t_ms, "oom", name, NULL);
    else if (!strcmp(type, "fail") && lj->unfit)
        evlog_job(&s->ev, t_ms, "unschedulable", name, detail);
    return 0;
}

/* The waiting jobs of a class, by index. */
static LifeJob *next_waiting(void *arg, const char *cls, int64_t *pos)
{
    TimeSim *s = arg;
    char other[LEARN_CLASS_MAX];
    for (size_t i = (size_t)*pos; i < s->n_jobs; i++) {
        SimJob *w = &s->jobs[i];
        if (w->phase != PH_WAITING || !w->sj.queued)
            continue;
        learn_class_of(spec_of(s, (uint32_t)i), other, sizeof(other));
        if (strcmp(other, cls))
            continue;
        *pos = (int64_t)i + 1;
        return &w->life;
    }
    *pos = (int64_t)s->n_jobs;
    return NULL;
}

static int enqueue(TimeSim *s, uint32_t j)
{
    return life_enqueue(&s->life, &s->jobs[j].life, s->now_ms);
}

/* A preemption signal: checkpoint within the grace (at most max_grace) when the cost
 * allows, else lose the work since the last checkpoint; hold the GPUs until then. */
static int signal_stop_within(TimeSim *s, uint32_t j, int64_t max_grace)
{
    SimJob *sj = &s->jobs[j];
    if (sj->phase == PH_BINDING) {
        /* never started: let go at once */
        evlog_workers(&s->ev, s->c, s->now_ms, "preempt", spec_of(s, j)->name, &sj->sj.pl);
        s->preemptions++;
        int err = life_stop(&s->life, &sj->life, LIFE_STOP_PREEMPT, true, s->now_ms);
        return err ? err : life_end_workers(&s->life, &sj->life, LIFE_WORKER_GONE, -1, s->now_ms);
    }
    advance(s, sj);
    bool was_running = sj->phase == PH_RUNNING;
    int64_t grace = MIN(sj->sj.grace_ms, max_grace), stop_in;
    sj->saved_before_stop_ms = sj->life.saved_work_ms;
    /* a job that declares no checkpoint cost is taken to checkpoint for free */
    if (sj->ckpt_cost_ms <= grace) {
        sj->life.saved_work_ms = sj->done_ms; /* a last checkpoint within the grace */
        stop_in = sj->ckpt_cost_ms;
        s->ckpt_gpu_ms += sj->alloc_eq * (double)stop_in;
    } else {
        double lost = sj->done_ms - sj->life.saved_work_ms;
        s->lost_gpu_ms += sj->alloc_eq * lost / sj->speed;
        sj->done_ms = sj->life.saved_work_ms;
        stop_in = grace;
    }
    if (was_running) {
        account(s, j, -1, true);
        sj->busy_eq = 0;
        account(s, j, +1, false);
    }
    if (sj->phase == PH_RUNNING || sj->phase == PH_CHECKPOINTING)
        s->running--;
    sj->phase = PH_STOPPING;
    sj->since_ms = s->now_ms;
    sj->stop_at_ms = s->now_ms + stop_in;
    sj->epoch++;
    s->preemptions++;
    evlog_workers(&s->ev, s->c, s->now_ms, "preempt", spec_of(s, j)->name, &sj->sj.pl);
    int err = life_stop(&s->life, &sj->life, LIFE_STOP_PREEMPT, true, s->now_ms);
    return err ? err : evq_push(&s->q, s->now_ms + stop_in, EV_STOPPED, j, sj->epoch);
}

static int signal_stop(TimeSim *s, uint32_t j)
{
    return signal_stop_within(s, j, INT64_MAX);
}

/* ---- nodes that come and go ---- */

static void set_presence(TimeSim *s, uint32_t node, NodePresence st)
{
    Node *n = &s->c->nodes[node];
    bool was = node_present(n), is = st != NODE_ABSENT;
    if (was != is) {
        s->present_gpus += is ? n->n_gpus : -(double)n->n_gpus;
        s->pool_present[n->pool] += is ? 1 : (uint32_t)-1;
    }
    s->n_leaving += (st == NODE_LEAVING) - (n->state == NODE_LEAVING);
    cluster_set_node_state(s->c, node, st);
    s->node_epoch[node]++;
    s->dirty = true;
}

/* An up spot node's next interruption notice: exponential at its pool's rate. */
static int draw_interruption(TimeSim *s, uint32_t node)
{
    const Pool *p = &s->c->pools[s->c->nodes[node].pool];
    if (p->tier != TIER_SPOT || !(p->interruptions_per_hour > 0))
        return 0;
    double ms = -log1p(-rng_unit(&s->spot_rng)) / p->interruptions_per_hour * 3.6e6;
    if (ms > 1e15)
        return 0; /* not in any run */
    return evq_push(&s->nq, s->now_ms + (int64_t)ceil(ms), EV_NOTICE, node, s->node_epoch[node]);
}

/* Leaving nodes that hold nothing any more go. */
static void sweep_leaving(TimeSim *s)
{
    for (size_t i = 0; s->n_leaving && i < s->c->n_nodes; i++) {
        const Node *n = &s->c->nodes[i];
        if (n->state == NODE_LEAVING && node_empty(n)) {
            evlog_node(&s->ev, s->c, s->now_ms, "node-gone", (uint32_t)i);
            set_presence(s, (uint32_t)i, NODE_ABSENT);
        }
    }
}

/* The jobs holding GPUs on a node, into s->on_node; their count or -ENOMEM. */
static int jobs_on(TimeSim *s, uint32_t node)
{
    size_t n = 0;
    for (size_t i = 0; i < s->n_holding; i++) {
        const Placement *pl = &s->jobs[s->holding[i]].sj.pl;
        bool on = false;
        for (size_t w = 0; w < pl->n_workers && !on; w++)
            on = pl->workers[w].node == node;
        if (!on)
            continue;
        if (GROW(s->on_node, s->on_node_cap, n + 1) < 0)
            return -ENOMEM;
        s->on_node[n++] = s->holding[i];
    }
    return (int)n;
}

/* Stop a job the scheduler did not choose to stop (an interruption, a move): it
 * checkpoints within max_grace when it can and is queued again. */
static int stop_for_node(TimeSim *s, uint32_t j, int64_t max_grace)
{
    SimJob *sj = &s->jobs[j];
    sj->sj.stopping = true;
    sj->sj.nominated = SCHED_NONE;
    int err = signal_stop_within(s, j, max_grace);
    if (sj->phase == PH_STOPPING)
        sj->sj.stop_at_ms = sj->stop_at_ms;
    return err;
}

/* Waiting jobs that hold part of a gang on the node (no-gang policies) let it go. */
static void drop_partial(TimeSim *s, uint32_t node)
{
    for (size_t j = 0; j < s->n_jobs; j++) {
        SimJob *sj = &s->jobs[j];
        const Placement *pl = &sj->sj.pl;
        if (sj->phase != PH_WAITING || !pl->n_workers)
            continue;
        bool on = false;
        for (size_t w = 0; w < pl->n_workers && !on; w++)
            on = pl->workers[w].node == node;
        if (!on)
            continue;
        account(s, (uint32_t)j, -1, false);
        sj->alloc_eq = 0;
        sched_release(&s->sched, &sj->sj, s->now_ms);
    }
}

/* A spot notice: the node takes nothing new, its jobs checkpoint within the notice, and
 * it is gone when the notice is over. */
static int on_notice(TimeSim *s, uint32_t node)
{
    const Node *n = &s->c->nodes[node];
    int64_t notice = s->c->pools[n->pool].notice_ms;
    s->interruptions++;
    evlog_node(&s->ev, s->c, s->now_ms, "spot-notice", node);
    set_presence(s, node, NODE_LEAVING);
    drop_partial(s, node);
    int err = evq_push(&s->nq, s->now_ms + notice, EV_NODE_GONE, node, s->node_epoch[node]);
    int k = err ? err : jobs_on(s, node);
    for (int i = 0; i < k && !err; i++) {
        uint32_t j = s->on_node[i];
        /* already stopping: its end is checked when the node goes */
        if (s->jobs[j].phase != PH_STOPPING)
            err = stop_for_node(s, j, notice);
    }
    return k < 0 ? k : err;
}

/* The notice is over: what still runs there loses the work its unfinished checkpoint
 * was saving, and is queued again. */
static int on_gone(TimeSim *s, uint32_t node)
{
    int k = jobs_on(s, node);
    int err = 0;
    for (int i = 0; i < k && !err; i++) {
        uint32_t j = s->on_node[i];
        SimJob *sj = &s->jobs[j];
        s->lost_gpu_ms += sj->alloc_eq * (sj->done_ms - sj->saved_before_stop_ms) / sj->speed;
        sj->done_ms = sj->life.saved_work_ms = sj->saved_before_stop_ms;
        err = life_end_workers(&s->life, &sj->life, LIFE_WORKER_GONE, -1, s->now_ms);
    }
    sweep_leaving(s);
    return k < 0 ? k : err;
}

static int handle_node(TimeSim *s, const Event *e)
{
    uint32_t node = e->job;
    if (e->epoch != s->node_epoch[node])
        return 0;
    switch (s->c->nodes[node].state) {
    case NODE_STARTING:
        if (e->kind != EV_NODE_UP)
            return 0;
        evlog_node(&s->ev, s->c, s->now_ms, "node-up", node);
        set_presence(s, node, NODE_UP);
        return draw_interruption(s, node);
    case NODE_UP:
        return e->kind == EV_NOTICE ? on_notice(s, node) : 0;
    case NODE_LEAVING:
        return e->kind == EV_NODE_GONE ? on_gone(s, node) : 0;
    default:
        return 0;
    }
}

/* One autoscaler pass over the queue after a scheduling cycle, carried out at once. */
static int autoscale(TimeSim *s)
{
    size_t nw = s->sched.n_order, nr = s->n_holding;
    if (GROW(s->asj, s->asj_cap, nw + nr + 1) < 0)
        return -ENOMEM;
    for (size_t i = 0; i < nw + nr; i++) {
        const SchedJob *q = i < nw ? s->sched.order[i] : &s->jobs[s->holding[i - nw]].sj;
        const SimJob *sj = &s->jobs[q->id];
        const JobSpec *spec = spec_of(s, q->id);
        s->asj[i] = (AutoscaleJob){
            .j = q,
            .waiting_since_ms = sj->wait_since_ms,
            .max_wait_ms = spec->max_wait_ms,
            .checkpoints = job_spec_checkpoints(spec),
            .moved = sj->moved,
        };
    }
    s->asd.n = 0;
    int err = autoscale_pass(&s->as, s->c, s->asj, nw, s->asj + nw, nr, s->now_ms, &s->asd);
    for (size_t k = 0; k < s->asd.n && !err; k++) {
        const AutoscaleDecision *d = &s->asd.d[k];
        const Pool *p = &s->c->pools[s->c->nodes[d->node].pool];
        switch (d->kind) {
        case AS_START:
            s->nodes_started++;
            evlog_node(&s->ev, s->c, s->now_ms, "node-start", d->node);
            set_presence(s, d->node, NODE_STARTING);
            err = evq_push(&s->nq, s->now_ms + p->startup_ms, EV_NODE_UP, d->node,
                           s->node_epoch[d->node]);
            break;
        case AS_RELEASE:
            evlog_node(&s->ev, s->c, s->now_ms, "node-release", d->node);
            set_presence(s, d->node, NODE_ABSENT);
            break;
        case AS_DRAIN:
            evlog_node(&s->ev, s->c, s->now_ms, "node-drain", d->node);
            set_presence(s, d->node, NODE_LEAVING);
            break;
        case AS_MOVE:
            s->moves++;
            s->jobs[d->job].moved = true;
            err = stop_for_node(s, d->job, INT64_MAX);
            break;
        default:
            break;
        }
    }
    sweep_leaving(s);
    /* wake up when an idle time or a max_wait runs out */
    int64_t at = s->asd.wake_ms;
    if (!err && at != INT64_MAX && at > s->now_ms &&
        (s->as_wake_ms <= s->now_ms || at < s->as_wake_ms)) {
        s->as_wake_ms = at;
        err = evq_push(&s->q, at, EV_SCHEDULE, UINT32_MAX, 0);
    }
    return err;
}

/* ---- scheduling ---- */

/* The scheduler's view of the jobs holding GPUs: their attained service and what is
 * left of their estimate. */
static void refresh_running(TimeSim *s)
{
    for (size_t i = 0; i < s->n_holding; i++) {
        SimJob *sj = &s->jobs[s->holding[i]];
        double ran = (double)(s->now_ms - sj->sj.run_start_ms);
        sj->sj.attained_gpu_ms =
            sj->life.attained_base_ms + (ran > 0 ? ran : 0) * sj->life.gpus_asked;
        if (sj->life.estimate_total_ms == NO_DURATION) {
            sj->sj.estimate_ms = NO_DURATION;
        } else {
            double done = sj->done_ms;
            if (sj->phase == PH_RUNNING)
                done += (double)(s->now_ms - sj->since_ms) * sj->speed;
            double left = (double)sj->life.estimate_total_ms - done;
            sj->sj.estimate_ms = left > 0 ? (int64_t)left : 0;
        }
    }
}

/* Teams of the cluster with work that fits their guarantee waiting past the tolerance. */
static void check_guarantees(TimeSim *s)
{
    const Cluster *c = s->c;
    const SimPrep *prep = &s->in->prep;
    for (size_t t = 0; t < prep->n_teams; t++)
        s->team_unmet[t] = false;
    if (!c->n_teams)
        return;
    for (size_t i = 0; i < s->sched.n_order; i++) {
        const SchedJob *q = s->sched.order[i];
        if (!q->queued || q->team == TEAM_NONE)
            continue;
        const SimJob *sj = &s->jobs[q->id];
        uint32_t pt = sj->team;
        if (s->team_unmet[pt] || s->now_ms - sj->wait_since_ms < s->in->opt.guarantee_tolerance_ms)
            continue;
        double guarantee = c->teams[q->team].guaranteed_gpus;
        if (s->team_alloc[pt] + q->ask_units / GPU_UNITS <= guarantee + 1e-9)
            s->team_unmet[pt] = true;
    }
}

static int schedule(TimeSim *s)
{
    refresh_running(s);
    if (GROW(s->ptrs, s->ptrs_cap, s->n_holding + 1) < 0)
        return -ENOMEM;
    for (size_t i = 0; i < s->n_holding; i++)
        s->ptrs[i] = &s->jobs[s->holding[i]].sj;
    s->dec.n = 0;
    int err = sched_cycle(&s->sched, s->now_ms, s->ptrs, s->n_holding, &s->dec);
    for (size_t k = 0; k < s->dec.n && !err; k++) {
        const SchedDecision *d = &s->dec.d[k];
        switch (d->kind) {
        case SCHED_START:
            err = bind(s, d->job);
            break;
        case SCHED_PREEMPT:
            err = signal_stop(s, d->job);
            break;
        case SCHED_DRAIN:
            s->drains++;
            break;
        case SCHED_MOVE:
            err = start_move(s, d->job);
            break;
        default:
            break;
        }
    }
    /* jobs that hold part of a gang while waiting (no-gang policies) */
    for (size_t i = 0; i < s->sched.n_order && !err; i++) {
        SchedJob *q = s->sched.order[i];
        SimJob *sj = &s->jobs[q->id];
        if (!q->queued || !q->pl.n_workers)
            continue;
        double eq = placement_eq(s->c, &q->pl);
        if (eq != sj->alloc_eq) {
            account(s, q->id, -1, false);
            sj->alloc_eq = eq;
            account(s, q->id, +1, false);
        }
    }
    /* wake up when a reservation is due */
    for (size_t r = 0; r < s->sched.n_res && !err; r++) {
        int64_t at = s->sched.res[r].start_ms;
        if (at > s->now_ms && (s->next_wake_ms <= s->now_ms || at < s->next_wake_ms)) {
            s->next_wake_ms = at;
            err = evq_push(&s->q, at, EV_SCHEDULE, UINT32_MAX, 0);
        }
    }
    if (!err && s->elastic)
        err = autoscale(s);
    check_guarantees(s);
    /* saturated: the waiting work could fill every idle GPU */
    double waiting = 0;
    for (size_t i = 0; i < s->sched.n_order; i++)
        if (s->sched.order[i]->queued)
            waiting += s->sched.order[i]->ask_units / GPU_UNITS;
    double cap = s->elastic ? s->present_gpus : (double)s->c->n_gpus;
    s->saturated = waiting > 0 && waiting >= cap - s->alloc;
    s->dirty = false;
    return err;
}

/* ---- events ---- */

/* The job runs out of GPU memory: its worker granted the least memory overruns it (a
 * job's peak is per worker), the work since the last checkpoint is lost with the
 * process, the rest of the gang is torn down, and the lifecycle teaches the class and
 * queues the job one size up. */
static int on_oom(TimeSim *s, uint32_t j)
{
    SimJob *sj = &s->jobs[j];
    const JobSpec *spec = spec_of(s, j);
    const WorkerAlloc *wa = least_worker(s->c, &sj->sj.pl);
    if (!wa)
        return -EINVAL; /* only a job given GPU memory overruns it */
    advance(s, sj);
    s->lost_gpu_ms += sj->alloc_eq * (sj->done_ms - sj->life.saved_work_ms) / sj->speed;
    sj->done_ms = sj->life.saved_work_ms;
    size_t w = (size_t)(wa - sj->sj.pl.workers);
    int err = life_worker_end(&s->life, &sj->life, w, LIFE_WORKER_EXITED, 1, spec->peak_memory_mib,
                              true, s->now_ms);
    if (!err && sj->life.state == LIFE_STOPPING)
        err = life_end_workers(&s->life, &sj->life, LIFE_WORKER_EXITED, 128 + 9, s->now_ms);
    return err;
}

static int handle(TimeSim *s, const Event *e)
{
    if (e->kind == EV_SCHEDULE && e->job == UINT32_MAX) {
        s->dirty = true;
        return 0;
    }
    if (e->kind == EV_MOVED)
        return e->epoch == s->jobs[e->job].move_seq ? end_move(s, e->job) : 0;
    SimJob *sj = &s->jobs[e->job];
    bool live = e->epoch == sj->epoch;
    if (live || e->kind == EV_ARRIVAL)
        s->changes++;
    switch (e->kind) {
    case EV_ARRIVAL:
        evlog_job(&s->ev, s->now_ms, "submit", spec_of(s, e->job)->name, NULL);
        return enqueue(s, e->job);
    case EV_FINISH:
        if (!live || sj->phase != PH_RUNNING)
            return 0;
        advance(s, sj);
        evlog_workers(&s->ev, s->c, s->now_ms, "finish", spec_of(s, e->job)->name, &sj->sj.pl);
        return life_end_workers(&s->life, &sj->life, LIFE_WORKER_EXITED, 0, s->now_ms);
    case EV_CHECKPOINT:
        if (!live || sj->phase != PH_RUNNING)
            return 0;
        advance(s, sj);
        account(s, e->job, -1, true);
        sj->busy_eq = 0;
        account(s, e->job, +1, false);
        sj->phase = PH_CHECKPOINTING;
        sj->epoch++;
        return evq_push(&s->q, s->now_ms + sj->ckpt_cost_ms, EV_CKPT_DONE, e->job, sj->epoch);
    case EV_CKPT_DONE: {
        if (!live || sj->phase != PH_CHECKPOINTING)
            return 0;
        advance(s, sj);
        life_checkpoint(&sj->life, s->now_ms, sj->done_ms);
        account(s, e->job, -1, false);
        sj->busy_eq = MIN(demand_of(s, e->job), sj->alloc_eq);
        account(s, e->job, +1, true);
        sj->phase = PH_RUNNING;
        return next_event(s, e->job);
    }
    case EV_STOPPED:
        if (!live || sj->phase != PH_STOPPING)
            return 0;
        /* its workers took the signal: exited, having checkpointed or not */
        return life_end_workers(&s->life, &sj->life, LIFE_WORKER_EXITED, 128 + 15, s->now_ms);
    case EV_OOM:
        if (!live || sj->phase != PH_RUNNING)
            return 0;
        return on_oom(s, e->job);
    case EV_RECONFIGURED:
        if (!live || sj->phase != PH_BINDING)
            return 0;
        account(s, e->job, -1, false);
        s->dirty = true;
        return start_run(s, e->job);
    case EV_SCHEDULE:
        /* a Tiresias demotion: the queue order changed */
        if (live && sj->phase == PH_RUNNING)
            s->dirty = true;
        return 0;
    default:
        return 0;
    }
}

/* ---- the run ---- */

/* The next event: the job queue's, or the node queue's when it comes first (and the
 * run goes on: job events are left, or a node is starting or leaving). */
static const Event *next_event_of(TimeSim *s)
{
    const Event *j = evq_peek(&s->q), *n = evq_peek(&s->nq);
    if (!n)
        return j;
    if (j && j->t_ms <= n->t_ms)
        return j;
    if (j)
        return n;
    /* a starting node may be what a waiting job needs; a leaving one frees room */
    for (size_t i = 0; i < s->c->n_nodes; i++)
        if (s->c->nodes[i].state == NODE_STARTING || s->c->nodes[i].state == NODE_LEAVING)
            return n;
    return NULL;
}

static void finish_groups(TimeSim *s, TimeResult *res, double span_ms);
static void bill(TimeSim *s, TimeResult *res, double cap_gpu_ms);

static void sim_free(TimeSim *s)
{
    for (size_t i = 0; s->jobs && i < s->n_jobs; i++) {
        life_job_free(&s->jobs[i].life);
        placement_free(&s->jobs[i].sj.pl);
        placement_free(&s->jobs[i].sj.moved_from);
    }
    free(s->jobs);
    free(s->holding);
    free(s->ptrs);
    free(s->samples);
    free(s->team_busy);
    free(s->team_alloc);
    free(s->team_busy_area);
    free(s->team_alloc_area);
    free(s->team_unmet_ms);
    free(s->team_unmet);
    free(s->asj);
    free(s->node_epoch);
    free(s->pool_present);
    free(s->pool_node_ms);
    free(s->end_node_ms);
    free(s->on_node);
    autoscale_decisions_free(&s->asd);
    autoscale_free(&s->as);
    evq_free(&s->nq);
    sched_decisions_free(&s->dec);
    sched_free(&s->sched);
    learn_free(&s->learn);
    evq_free(&s->q);
    score_cache_free(&s->cache);
    place_ctx_free(&s->ctx);
    cluster_free(s->c);
}

static int setup(TimeSim *s)
{
    const SimInput *in = s->in;
    const SimPrep *prep = &in->prep;
    const JobList *jl = in->jobs;
    size_t nt = prep->n_teams ? prep->n_teams : 1;
    s->c = cluster_clone(in->cluster);
    s->jobs = calloc(jl->n ? jl->n : 1, sizeof(*s->jobs));
    s->team_busy = calloc(nt, sizeof(double));
    s->team_alloc = calloc(nt, sizeof(double));
    s->team_busy_area = calloc(nt, sizeof(double));
    s->team_alloc_area = calloc(nt, sizeof(double));
    s->team_unmet_ms = calloc(nt, sizeof(double));
    s->team_unmet = calloc(nt, sizeof(bool));
    size_t np = s->c && s->c->n_pools ? s->c->n_pools : 1;
    s->pool_present = calloc(np, sizeof(*s->pool_present));
    s->pool_node_ms = calloc(np, sizeof(*s->pool_node_ms));
    s->end_node_ms = calloc(np, sizeof(*s->end_node_ms));
    s->node_epoch = calloc(s->c && s->c->n_nodes ? s->c->n_nodes : 1, sizeof(*s->node_epoch));
    if (!s->c || !s->jobs || !s->team_busy || !s->team_alloc || !s->team_busy_area ||
        !s->team_alloc_area || !s->team_unmet_ms || !s->team_unmet || !s->pool_present ||
        !s->pool_node_ms || !s->end_node_ms || !s->node_epoch)
        return -ENOMEM;
    /* nodes come and go when a pool autoscales or spot is interrupted */
    for (size_t i = 0; i < s->c->n_nodes; i++) {
        const Node *n = &s->c->nodes[i];
        if (node_present(n)) {
            s->present_gpus += n->n_gpus;
            s->pool_present[n->pool]++;
        }
    }
    for (size_t p = 0; p < s->c->n_pools; p++) {
        const Pool *pool = &s->c->pools[p];
        s->elastic |=
            pool_autoscaled(pool) || (pool->tier == TIER_SPOT && pool->interruptions_per_hour > 0);
    }
    if (s->elastic) {
        AutoscaleConfig acfg;
        autoscale_config_default(&acfg);
        int e = autoscale_init(&s->as, s->c, &acfg);
        if (e)
            return e;
    }
    int err = place_ctx_init(&s->ctx, s->c, s->sp->place, &s->rng, NULL, &prep->expected);
    if (!err)
        err = score_cache_init(&s->cache, s->c->n_nodes, prep->n_shapes);
    if (err)
        return err;
    s->ctx.cache = &s->cache;
    SchedConfig cfg = s->sp->sched;
    cfg.min_runtime_ms = in->opt.min_runtime_ms;
    cfg.half_life_ms = in->opt.half_life_ms;
    s->life = (Life){.c = s->c,
                     .sched = &s->sched,
                     .learn = &s->learn,
                     .sink = {.arg = s,
                              .changed = on_changed,
                              .event = on_event,
                              .release = on_release,
                              .moved = on_moved,
                              .next_waiting = next_waiting}};
    return sched_init(&s->sched, s->c, &s->ctx, &cfg, prep->n_shapes);
}

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
    rng_seed(&s.rng, seed);
    rng_seed(&s.spot_rng, seed ^ UINT64_C(0x53504f54)); /* "SPOT" */
    evq_init(&s.q);
    evq_init(&s.nq);
    int err = setup(&s);
    if (err)
        goto out;

    int64_t t0 = INT64_MAX;
    for (size_t i = 0; i < jl->n; i++) {
        const JobSpec *j = &jl->jobs[i];
        SimJob *sj = &s.jobs[i];
        const Request *r = &prep->reqs[i];
        int team = j->team ? cluster_find_team(s.c, j->team) : -1;
        sj->sj = (SchedJob){
            .id = (uint32_t)i,
            .req = *r,
            .team = team >= 0 ? (uint32_t)team : TEAM_NONE,
            .priority = j->priority,
            .preemptible = j->preemptible,
            .movable = j->kind == KIND_INFERENCE,
            .submit_ms = j->submit_ms,
            .grace_ms = j->checkpoint_grace_ms > 0 ? j->checkpoint_grace_ms : in->opt.grace_ms,
            .nominated = SCHED_NONE,
        };
        sj->life.sj = &sj->sj;
        sj->life.spec = j;
        sj->life.exit_code = -1;
        sj->life.start_ms = sj->life.end_ms = sj->life.checkpoint_ms = -1;
        sj->team = prep->team_of[i];
        sj->first_start_ms = -1;
        sj->work_ms = (double)j->duration_ms;
        sj->life.gpus_asked = (double)r->workers * (r->kind == REQ_GPUS   ? r->gpus
                                                    : r->kind == REQ_NONE ? 0
                                                                          : 1);
        sj->ckpt_interval_ms = j->checkpoint_interval_ms;
        sj->ckpt_cost_ms = j->checkpoint_cost_ms;
        sj->life.estimate_total_ms =
            in->opt.oracle_estimates ? j->duration_ms : j->duration_estimate_ms;
        res->submitted++;
        if (prep->unschedulable[i] || j->duration_ms < 0) {
            sj->phase = PH_NEVER;
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
    s.sched.ten.last_ms = t0;
    for (size_t i = 0; s.elastic && i < s.c->n_nodes && !err; i++)
        if (s.c->nodes[i].state == NODE_UP)
            err = draw_interruption(&s, (uint32_t)i);
    if (err)
        goto out;

    /* Handle every event of a time, then schedule once at that time (which may post
     * events at the same time), sample, and move the clock to the next event. Job
     * events come before node events of the same time; node events alone do not keep
     * the run going, unless a node is starting or leaving (work may wait for it). */
    for (;;) {
        const Event *next = next_event_of(&s);
        if (!next || next->t_ms != s.now_ms) {
            if (s.dirty && (err = schedule(&s)) < 0)
                goto out;
            if ((err = sample(&s)) < 0)
                goto out;
            next = next_event_of(&s);
            if (!next)
                break;
            if (next->t_ms != s.now_ms) {
                integrate(&s, next->t_ms);
                s.now_ms = next->t_ms;
            }
        }
        Event e;
        bool node_ev = next != evq_peek(&s.q);
        evq_pop(node_ev ? &s.nq : &s.q, &e);
        uint64_t before = s.changes;
        if ((err = node_ev ? handle_node(&s, &e) : handle(&s, &e)) < 0)
            goto out;
        if (s.changes != before) {
            s.end_ms = s.now_ms;
            s.end_cap_area = s.cap_area;
            s.end_interruptions = s.interruptions;
            s.end_nodes_started = s.nodes_started;
            memcpy(s.end_node_ms, s.pool_node_ms, s.c->n_pools * sizeof(*s.end_node_ms));
        }
        if (in->progress && e.kind == EV_ARRIVAL)
            __atomic_fetch_add(in->progress, 1, __ATOMIC_RELAXED);
    }
    /* A window reaching past the last event measures the rest of it too, as it stands
     * (idle, or held by what never started): policies that finish early are compared
     * over the same stretch as the others, not over a shorter one. */
    integrate_window(&s, s.last_ms, s.t0_ms + in->opt.window_to_ms);
    /* the run ends with the last event; what still waits never got placed */
    res->never_placed = sched_queue_len(&s.sched);
    res->unschedulable += s.life.unfit;
    int n_left = sched_order(&s.sched);
    if (n_left < 0) {
        err = n_left;
        goto out;
    }
    for (int i = 0; i < n_left; i++)
        evlog_job(&s.ev, s.now_ms, "never-placed", spec_of(&s, s.sched.order[i]->id)->name,
                  s.sched.order[i]->reason);
    if (s.end_ms < s.t0_ms)
        s.end_ms = s.t0_ms;
    double span_ms = (double)(s.end_ms - s.t0_ms);
    double cap = (double)s.c->n_gpus;
    /* capacity over each stretch: every GPU, or the GPUs present through it */
    double cap_run = cap * span_ms, cap_win = cap * s.win_ms, cap_sat = cap * s.sat_ms;
    if (s.elastic) {
        cap_run = s.end_cap_area;
        cap_win = s.win_cap_area;
        cap_sat = s.sat_cap_area;
    }
    res->utilization_pct = span_ms > 0 && cap_run > 0 ? 100.0 * s.busy_area / cap_run : 0;
    res->allocation_pct = span_ms > 0 && cap_run > 0 ? 100.0 * s.alloc_area / cap_run : 0;
    res->makespan_s = span_ms / 1000.0;
    res->saturated_s = s.sat_ms / 1000.0;
    res->window_utilization_pct = s.win_ms > 0 ? 100.0 * s.win_busy_area / cap_win : NAN;
    res->window_allocation_pct = s.win_ms > 0 ? 100.0 * s.win_alloc_area / cap_win : NAN;
    res->saturated_utilization_pct = s.sat_ms > 0 ? 100.0 * s.sat_busy_area / cap_sat : NAN;
    res->saturated_allocation_pct = s.sat_ms > 0 ? 100.0 * s.sat_alloc_area / cap_sat : NAN;
    bill(&s, res, cap_run);
    res->preemptions = s.preemptions;
    res->reconfigurations = s.reconfigurations;
    res->oom_failures = s.life.ooms;
    res->oom_repeats = s.life.oom_repeats;
    res->drains = s.drains;
    res->server_moves = s.server_moves;
    res->lost_gpu_hours = s.lost_gpu_ms / 3.6e6;
    res->checkpoint_gpu_hours = s.ckpt_gpu_ms / 3.6e6;
    finish_groups(&s, res, span_ms);
    err = evlog_error(&s.ev);
out:
    sim_free(&s);
    return err;
}

/* ---- results ---- */

/* The bill over the run from the node-hours of each pool. */
static void bill(TimeSim *s, TimeResult *res, double cap_gpu_ms)
{
    double cost = 0, od = 0;
    for (size_t p = 0; p < s->c->n_pools; p++) {
        const Pool *pool = &s->c->pools[p];
        double gpu_h = s->end_node_ms[p] * pool->gpus / 3.6e6;
        double c = gpu_h * (double)pool->price_micro_usd / 1e6;
        res->cost_by_tier_usd[pool->tier] += c;
        cost += c;
        od += gpu_h * (double)pool->on_demand_micro_usd / 1e6;
    }
    res->elastic = s->elastic;
    res->capacity_gpu_hours = cap_gpu_ms / 3.6e6;
    res->cost_usd = cost;
    res->on_demand_cost_usd = od;
    res->savings_pct = od > 0 ? 100.0 * (1.0 - cost / od) : NAN;
    res->interruptions = s->end_interruptions;
    res->nodes_started = s->end_nodes_started;
    res->moved_to_reserved = s->moves;
    res->production_on_spot = s->production_on_spot;
    res->unsaved_on_spot = s->unsaved_on_spot;
}

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
        /* waiting is all the time not holding GPUs to run: before the first start, during
         * MIG reconfigurations, and after preemptions */
        if (sj->phase == PH_DONE) {
            qd[nq++] = (double)(sj->finish_ms - sj->sj.submit_ms - sj->held_ms) / 1000.0;
            jct[nf++] = (double)(sj->finish_ms - sj->sj.submit_ms) / 1000.0;
        } else if (sj->first_start_ms >= 0) {
            qd[nq++] = (double)(sj->first_start_ms - sj->sj.submit_ms) / 1000.0;
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
        res->by_priority[p].guaranteed_gpus = NAN;
        res->by_priority[p].guarantee_met_pct = NAN;
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
            int ct = cluster_find_team(s->c, prep->team_names[t]);
            g->guaranteed_gpus = ct >= 0 ? s->c->teams[ct].guaranteed_gpus : NAN;
            g->guarantee_met_pct =
                ct >= 0 && span_ms > 0 ? 100.0 * (1.0 - s->team_unmet_ms[t] / span_ms) : NAN;
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
        double busy = 0, alloc = 0, capa = 0;
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
            capa += s->samples[m].cap * (to - from);
            queued = MAX(queued, s->samples[m].queued);
            running = MAX(running, s->samples[m].running);
        }
        double over = s->elastic ? capa : width * cap;
        res->timeline[b] = (TimelinePoint){
            .t_s = (hi - (double)s->t0_ms) / 1000.0,
            .utilization_pct = over > 0 ? 100.0 * busy / over : 0,
            .allocation_pct = over > 0 ? 100.0 * alloc / over : 0,
            .queued = queued,
            .running = running,
        };
    }
}
