/* lifecycle.c: the server's side of a job's run after the core placed it. The run itself
 * (workers assigned, running, ended; a gang torn down whole; out-of-memory learning;
 * stops, requeues and lost nodes) is the lifecycle the simulator shares (src/life); this
 * file is its sink: each step becomes entries of a Changes list (the job's record, its
 * events, the usage it is charged, what its class learned), written to the store in one
 * durable write before the agents or users hear of it, and what only the server has
 * (placements kept for a restart, the master port, the holding list, counters). It also
 * watches nodes: one lost past its grace, or shutting down, has its jobs requeued to
 * resume from their latest checkpoints. */
#include "server/checkpoint.h"
#include "server/measured.h"
#include "server/metering.h"
#include "server/nodespan.h"
#include "server/placement_json.h"
#include "server/provider.h"
#include "server/state.h"
#include "spec/render.h"
#include "util/log.h"
#include "util/macro.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static double worker_eq(const Cluster *c, const WorkerAlloc *w)
{
    return (double)worker_units(c, w) / GPU_UNITS;
}

/* Remember the MIG layouts the placement set, so that a restarted server knows the
 * instances its running jobs sit in (written with the change, before its rows). */
void server_save_mig(Server *s, const Placement *pl, Changes *ch)
{
    for (size_t k = 0; k < pl->n_changes; k++) {
        const MigChange *mc = &pl->changes[k];
        const Node *n = &s->c->nodes[mc->node];
        Buf b = {0};
        render_json_layout(&b, node_model(s->c, n), &mc->after);
        if (b.oom)
            changes_fail(ch, -ENOMEM);
        else
            changes_mig(ch, n->name, mc->index, buf_steal(&b));
        buf_free(&b);
    }
}

/* The rendezvous port of a run: 20000 + id mod 30000, moved on past the ports that the
 * other runs led from the same node use. (A restart derives the same first guess; a
 * clash then only delays that gang's rendezvous until the other ends.) */
static uint16_t pick_master_port(const Server *s, const ServerJob *j)
{
    uint32_t node = j->sj.pl.workers[0].node;
    uint16_t port = (uint16_t)(20000 + j->st.id % 30000);
    for (size_t tries = 0; tries < 30000; tries++) {
        bool taken = false;
        for (size_t k = 0; k < s->n_holding && !taken; k++) {
            const ServerJob *o = s->holding[k];
            taken = o != j && o->sj.pl.n_workers && o->sj.pl.workers[0].node == node &&
                    o->master_port == port;
        }
        if (!taken)
            break;
        port = port + 1 >= 50000 ? 20000 : (uint16_t)(port + 1);
    }
    return port;
}

/* ---- the lifecycle's sink (life.h): what it does, listed in s->life_ch ---- */

static ServerJob *server_job_of(LifeJob *lj)
{
    return CONTAINER_OF(lj, ServerJob, life);
}

/* The durable record follows the lifecycle's. */
static int on_changed(void *arg, LifeJob *lj)
{
    Server *s = arg;
    ServerJob *j = server_job_of(lj);
    if (life_state_ended(lj->state) && !job_state_ended(j->st.state)) {
        s->counters.finished[lj->state]++;
        server_job_note_ended(s, j);
    }
    if (lj->state == LIFE_PENDING && j->st.state != JOB_PENDING)
        s->dirty = true; /* queued again: a cycle may start it */
    j->st.state = lj->state;
    j->st.run = lj->run;
    j->st.exit_code = lj->exit_code;
    j->st.start_ms = lj->start_ms;
    j->st.end_ms = lj->end_ms;
    s->order_stale = true;
    changes_job(s->life_ch, j);
    return 0;
}

static int on_event(void *arg, LifeJob *lj, int64_t t_ms, const char *type, const char *detail)
{
    Server *s = arg;
    ServerJob *j = server_job_of(lj);
    if (!strcmp(type, "requeue") && !detail) {
        /* what the next run resumes from */
        Buf from = {0};
        checkpoint_label(j->st.checkpoint, &from);
        changes_event(s->life_ch, j, t_ms, type,
                      j->st.checkpoint ? buf_str(&from) : "no checkpoint: starts over");
        buf_free(&from);
        return 0;
    }
    changes_event(s->life_ch, j, t_ms, type, detail);
    return 0;
}

/* The run is over: charge what it held, and let go of what the server kept for it. */
static int on_release(void *arg, LifeJob *lj, int64_t now_ms)
{
    Server *s = arg;
    ServerJob *j = server_job_of(lj);
    server_charge(s, j, &j->sj.pl, j->pl_from_ms, now_ms, s->life_ch);
    measured_reset(j);
    /* a move under way: both allocations were held until now */
    if (j->life.move != LIFE_MOVE_NONE)
        server_charge(s, j, &j->sj.moved_from, j->moved_from_ms, now_ms, s->life_ch);
    server_unhold(s, j);
    checkpoint_gang_free(j->ckpt); /* the run's reports: the next run makes its own */
    j->ckpt = NULL;
    free(j->st.placement_json);
    j->st.placement_json = NULL;
    changes_job(s->life_ch, j);
    s->order_stale = true;
    s->dirty = true;
    return 0;
}

static int on_sized(void *arg, LifeJob *lj)
{
    server_job_shape((Server *)arg, server_job_of(lj));
    return 0;
}

static int on_moved(void *arg, LifeJob *lj, bool done, int64_t now_ms)
{
    Server *s = arg;
    return server_job_moved(s, server_job_of(lj), done, now_ms, s->life_ch);
}

static int on_learned(void *arg, const LearnEntry *e)
{
    changes_learned(((Server *)arg)->life_ch, e);
    return 0;
}

static LifeJob *next_waiting(void *arg, const char *cls, int64_t *pos)
{
    ServerJob *j = server_waiting_of_class(arg, cls, pos);
    return j ? &j->life : NULL;
}

void server_life_init(Server *s)
{
    s->life = (Life){.c = s->c,
                     .sched = &s->sched,
                     .learn = &s->learn,
                     .sink = {.arg = s,
                              .changed = on_changed,
                              .event = on_event,
                              .release = on_release,
                              .sized = on_sized,
                              .moved = on_moved,
                              .learned = on_learned,
                              .next_waiting = next_waiting}};
}

void server_job_life_init(ServerJob *j)
{
    j->life = (LifeJob){.sj = &j->sj,
                        .spec = &j->spec,
                        .state = j->st.state,
                        .run = j->st.run,
                        .exit_code = j->st.exit_code,
                        .start_ms = j->st.start_ms,
                        .end_ms = j->st.end_ms,
                        .checkpoint_ms = j->st.checkpoint_ms,
                        .estimate_total_ms = j->spec.duration_estimate_ms};
}

/* The lifecycle, writing what it does into ch. A failure of the lifecycle (memory) is
 * logged; what it listed is written with the rest. */
Life *server_life(Server *s, Changes *ch)
{
    s->life_ch = ch;
    return &s->life;
}

void server_life_done(Server *s, const ServerJob *j, int err, const char *what)
{
    /* a step cut short (memory) leaves memory ahead of what the change lists: the change
     * fails whole, and its commit says so */
    if (err) {
        log_error("event=lifecycle_failed job=%lld step=%s error=%d", (long long)j->st.id, what,
                  err);
        changes_fail(s->life_ch, err);
    }
    s->life_ch = NULL;
}

int server_job_started(Server *s, ServerJob *j, int64_t now_ms, Changes *ch)
{
    const Placement *pl = &j->sj.pl;
    int r = life_start(server_life(s, ch), &j->life, now_ms);
    server_life_done(s, j, r, "start");
    if (r)
        return r;
    j->gpu_equivalents = 0;
    for (size_t w = 0; w < pl->n_workers; w++) {
        j->life.workers[w].run = j->life.run;
        j->gpu_equivalents += worker_eq(s->c, &pl->workers[w]);
    }
    Buf pj = {0};
    placement_to_json(s->c, pl, &pj);
    free(j->st.placement_json);
    j->st.placement_json = buf_steal(&pj);
    /* an engine's workers (pods) have addresses of their own: no port to share out */
    j->master_port = pl->n_workers && !s->opt.external_nodes ? pick_master_port(s, j) : 0;
    j->pl_from_ms = now_ms;
    server_save_mig(s, pl, ch);
    s->counters.started++;
    return server_hold(s, j);
}

StoreUsage server_usage_segment(const Server *s, const ServerJob *j, const WorkerAlloc *wa,
                                int64_t from_ms, int64_t to_ms)
{
    const Node *n = &s->c->nodes[wa->node];
    const Pool *p = &s->c->pools[n->pool];
    StoreUsage u = (StoreUsage){.job = j->st.id,
                                .team = j->st.team,
                                .project = j->st.project,
                                .pool = p->name,
                                .model = node_model(s->c, n)->name,
                                .tier = tier_name(p->tier),
                                .node = n->name,
                                .gpu_equivalents = worker_eq(s->c, wa),
                                .price_micro_usd = p->price_micro_usd,
                                .start_ms = from_ms,
                                .end_ms = to_ms};
    /* what its GPUs measured: only of the allocation it holds now (a move's old one is
     * charged unmeasured) */
    const WorkerAlloc *w0 = j->sj.pl.workers;
    if (wa >= w0 && wa < w0 + j->sj.pl.n_workers)
        measured_into(j, (size_t)(wa - w0), &u);
    return u;
}

void server_charge(Server *s, const ServerJob *j, const Placement *pl, int64_t from_ms,
                   int64_t now_ms, Changes *ch)
{
    for (size_t w = 0; w < pl->n_workers; w++) {
        const WorkerAlloc *wa = &pl->workers[w];
        StoreUsage u = server_usage_segment(s, j, wa, from_ms, now_ms);
        if (u.gpu_equivalents > 0 || wa->cpu_milli)
            changes_usage(ch, &u);
        metering_segment_closed(s, &u);
    }
}

void server_job_stop(Server *s, ServerJob *j, LifeStop mode, bool requeue, int64_t now_ms,
                     Changes *ch)
{
    int r = life_stop(server_life(s, ch), &j->life, mode, requeue, now_ms);
    server_life_done(s, j, r, "stop");
}

void server_job_end(Server *s, ServerJob *j, JobState final, int64_t now_ms, Changes *ch)
{
    int r = life_end(server_life(s, ch), &j->life, (LifeState) final, now_ms);
    server_life_done(s, j, r, "end");
}

void server_job_progress(Server *s, ServerJob *j, int64_t now_ms, Changes *ch)
{
    int r = life_progress(server_life(s, ch), &j->life, now_ms);
    server_life_done(s, j, r, "progress");
}

bool server_job_on_node(const ServerJob *j, uint32_t node, bool running_only)
{
    return life_on_node(&j->life, node, running_only);
}

/* Whatever the job ran on the node is taken as gone: the run is torn down and requeued
 * (a job already stopping ends its stop). */
static void requeue_from_node(Server *s, ServerJob *j, uint32_t node, const char *why,
                              int64_t now_ms, Changes *ch)
{
    s->counters.requeued_lost++;
    int r = life_node_gone(server_life(s, ch), &j->life, node, why, now_ms);
    server_life_done(s, j, r, "node_gone");
}

ServerJob **server_jobs_on_node(Server *s, uint32_t node, size_t *ret_n)
{
    size_t n = 0;
    ServerJob **jobs = s->n_holding ? malloc(s->n_holding * sizeof(*jobs)) : NULL;
    for (size_t i = 0; jobs && i < s->n_holding; i++) {
        ServerJob *j = s->holding[i];
        if (server_job_on_node(j, node, false) ||
            (j->life.move != LIFE_MOVE_NONE && j->life.shadow.node == node &&
             !life_worker_ended(&j->life.shadow)))
            jobs[n++] = j;
    }
    *ret_n = n;
    return jobs;
}

/* The lost node's grace is over (or it was none): what ran there is gone, and its jobs
 * are requeued to resume from their checkpoints. */
static void node_give_up(Server *s, uint32_t node, int64_t now_ms, Changes *ch)
{
    NodeState *ns = &s->nodes[node];
    ns->gave_up = true;
    provider_node_lost(s, node);
    size_t n;
    ServerJob **jobs = server_jobs_on_node(s, node, &n);
    char why[200];
    snprintf(why, sizeof(why), "node %s stopped answering %lld s ago", s->c->nodes[node].name,
             (long long)((server_mono_ms() - ns->seen_mono_ms) / 1000));
    for (size_t i = 0; i < n; i++) {
        ServerJob *j = jobs[i];
        if (j->life.move != LIFE_MOVE_NONE && j->life.shadow.node == node &&
            !life_worker_ended(&j->life.shadow)) {
            j->life.shadow.state = LIFE_WORKER_GONE;
            server_move_progress(s, j, now_ms, ch);
        }
        if (server_job_on_node(j, node, false))
            requeue_from_node(s, j, node, why, now_ms, ch);
    }
    free(jobs);
    log_error("event=node_given_up node=%s jobs_requeued=%zu", s->c->nodes[node].name, n);
}

/* The node's agent stopped answering: the node takes no new work. What runs there may
 * still run (a network cut, an agent restarting), so jobs whose workers there run keep
 * them for the grace (--lost-grace-ms): a node back within it goes on with them. A run
 * that had not started there, or one being stopped anyway, is not waited for. */
static void node_lost(Server *s, uint32_t node, int64_t now_ms, Changes *ch)
{
    NodeState *ns = &s->nodes[node];
    ns->liveness = NODE_LOST;
    ns->lost_mono_ms = server_mono_ms();
    ns->gave_up = false;
    cluster_set_away(s->c, node, AWAY_LOST);
    nodespan_update(s, node, now_ms);
    log_error("event=node_lost node=%s silent_ms=%lld grace_ms=%lld", s->c->nodes[node].name,
              (long long)(ns->lost_mono_ms - ns->seen_mono_ms), (long long)s->opt.lost_grace_ms);
    if (s->opt.lost_grace_ms <= 0) {
        node_give_up(s, node, now_ms, ch);
        return;
    }
    size_t n;
    ServerJob **jobs = server_jobs_on_node(s, node, &n);
    char why[200];
    snprintf(why, sizeof(why), "node %s stopped answering before the run started there",
             s->c->nodes[node].name);
    for (size_t i = 0; i < n; i++)
        if (server_job_on_node(jobs[i], node, false) &&
            (!server_job_on_node(jobs[i], node, true) || jobs[i]->st.state == JOB_STOPPING))
            requeue_from_node(s, jobs[i], node, why, now_ms, ch);
    free(jobs);
}

void server_job_node_shutdown(Server *s, ServerJob *j, uint32_t node, int64_t now_ms, Changes *ch)
{
    if (j->st.state != JOB_STARTING && j->st.state != JOB_RUNNING)
        return; /* stopping already (a cancel stays a cancel) or ended */
    char why[200];
    snprintf(why, sizeof(why),
             "node %s is shutting down (its agent was stopped): the run checkpoints, stops "
             "and is requeued",
             s->c->nodes[node].name);
    changes_event(ch, j, now_ms, "shutdown", why);
    server_job_stop(s, j, LIFE_STOP_PREEMPT, true, now_ms, ch);
}

void server_node_shutdown(Server *s, uint32_t node, int64_t now_ms, Changes *ch)
{
    NodeState *ns = &s->nodes[node];
    bool first = ns->liveness != NODE_DOWN;
    ns->liveness = NODE_DOWN;
    cluster_set_away(s->c, node, AWAY_DOWN);
    if (!first)
        return;
    nodespan_update(s, node, now_ms);
    size_t n;
    ServerJob **jobs = server_jobs_on_node(s, node, &n);
    size_t stopped = 0;
    for (size_t i = 0; i < n; i++) {
        ServerJob *j = jobs[i];
        if (!server_job_on_node(j, node, false) ||
            (j->st.state != JOB_STARTING && j->st.state != JOB_RUNNING))
            continue;
        server_job_node_shutdown(s, j, node, now_ms, ch);
        stopped++;
    }
    free(jobs);
    log_info("event=node_shutdown node=%s jobs_stopped=%zu", s->c->nodes[node].name, stopped);
    server_kick(s);
}

int server_check_nodes(Server *s, int64_t now_ms)
{
    if (s->opt.external_nodes)
        return 0; /* their engine says when they are gone */
    Changes ch = {0};
    int64_t mono = server_mono_ms();
    for (size_t i = 0; i < s->c->n_nodes; i++) {
        NodeState *ns = &s->nodes[i];
        if (ns->liveness == NODE_LOST) {
            if (!ns->gave_up && mono - ns->lost_mono_ms >= s->opt.lost_grace_ms)
                node_give_up(s, (uint32_t)i, now_ms, &ch);
            continue;
        }
        if (mono - ns->seen_mono_ms <= s->opt.lost_after_ms)
            continue;
        if (ns->liveness == NODE_UNKNOWN || ns->liveness == NODE_DOWN) {
            /* never reported since the server started, or shut down by its agent: lost
             * only if work sits there */
            bool busy = false;
            for (size_t k = 0; k < s->n_holding && !busy; k++)
                busy = server_job_on_node(s->holding[k], (uint32_t)i, false);
            if (!busy)
                continue;
        }
        node_lost(s, (uint32_t)i, now_ms, &ch);
    }
    int r = server_commit_released(s, &ch);
    changes_free(&ch);
    return r;
}
