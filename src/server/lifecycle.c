/* lifecycle.c: a job's run after the core placed it: its workers are assigned to the
 * agents of their nodes, reported running, and end; the job then succeeds or fails, or,
 * when it was stopped (preempted, cancelled, its node lost), gives its GPUs back and is
 * requeued or closed. Every step is collected in a Changes list and written to the
 * store in one durable write before the agents or users hear of it.
 *
 * A gang lives and dies whole: when one worker fails, the others are stopped; when a
 * node is lost, the job's workers elsewhere are stopped (with a checkpoint signal) and
 * the job is requeued to resume from its latest checkpoint. */
#include "server/checkpoint.h"
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

int server_job_started(Server *s, ServerJob *j, int64_t now_ms, Changes *ch)
{
    const Placement *pl = &j->sj.pl;
    free(j->workers);
    j->workers = calloc(pl->n_workers ? pl->n_workers : 1, sizeof(*j->workers));
    if (!j->workers)
        return -ENOMEM;
    j->n_workers = pl->n_workers;
    j->gpu_equivalents = 0;
    Buf where = {0};
    for (size_t w = 0; w < pl->n_workers; w++) {
        const WorkerAlloc *wa = &pl->workers[w];
        j->workers[w] = (WorkerRun){
            .node = wa->node, .run = j->st.run + 1, .state = WORKER_ASSIGNED, .start_ms = -1};
        j->gpu_equivalents += worker_eq(s->c, wa);
        /* "on a, b": api_agent.c reads the run's nodes back from this for the log
         * uploads of node-bound agents */
        bool listed = false;
        for (size_t u = 0; u < w && !listed; u++)
            listed = pl->workers[u].node == wa->node;
        if (!listed)
            buf_printf(&where, "%s%s", where.len ? ", " : "on ", s->c->nodes[wa->node].name);
    }
    Buf pj = {0};
    placement_to_json(s->c, pl, &pj);
    free(j->st.placement_json);
    j->st.placement_json = buf_steal(&pj);
    j->st.state = JOB_STARTING;
    j->st.run++;
    j->st.start_ms = -1; /* this run's, once its workers run */
    j->stop_mode = STOP_NONE;
    j->requeue = false;
    /* an engine's workers (pods) have addresses of their own: no port to share out */
    j->master_port = pl->n_workers && !s->opt.external_nodes ? pick_master_port(s, j) : 0;
    j->sj.run_start_ms = now_ms;
    j->sj.last_checkpoint_ms = now_ms;
    j->pl_from_ms = now_ms;
    j->move = MOVE_NONE;
    server_save_mig(s, pl, ch);
    int r = server_hold(s, j);
    s->counters.started++;
    changes_event(ch, j, now_ms, "start", buf_str(&where));
    buf_free(&where);
    return r;
}

void server_charge(Server *s, const ServerJob *j, const Placement *pl, int64_t from_ms,
                   int64_t now_ms, Changes *ch)
{
    for (size_t w = 0; w < pl->n_workers; w++) {
        const WorkerAlloc *wa = &pl->workers[w];
        const Node *n = &s->c->nodes[wa->node];
        const Pool *p = &s->c->pools[n->pool];
        StoreUsage u = {.job = j->st.id,
                        .team = j->st.team,
                        .project = j->st.project,
                        .pool = p->name,
                        .model = node_model(s->c, n)->name,
                        .tier = tier_name(p->tier),
                        .node = n->name,
                        .gpu_equivalents = worker_eq(s->c, wa),
                        .price_micro_usd = p->price_micro_usd,
                        .start_ms = from_ms,
                        .end_ms = now_ms};
        if (u.gpu_equivalents > 0 || wa->cpu_milli)
            changes_usage(ch, &u);
        metering_segment_closed(s, &u);
    }
}

/* The run is over (every worker gone): give the GPUs back, charge the run, and requeue
 * or close the job. */
static void finish_run(Server *s, ServerJob *j, JobState final, int64_t now_ms, Changes *ch)
{
    server_charge(s, j, &j->sj.pl, j->pl_from_ms, now_ms, ch);
    /* a move under way: both allocations were held until now */
    if (j->move != MOVE_NONE)
        server_charge(s, j, &j->sj.moved_from, j->moved_from_ms, now_ms, ch);
    j->move = MOVE_NONE;
    sched_release(&s->sched, &j->sj, now_ms);
    server_unhold(s, j);
    free(j->workers);
    j->workers = NULL;
    j->n_workers = 0;
    checkpoint_gang_free(j->ckpt); /* the run's reports: the next run makes its own */
    j->ckpt = NULL;
    free(j->st.placement_json);
    j->st.placement_json = NULL;
    j->stop_mode = STOP_NONE;
    changes_job(ch, j);
    s->order_stale = true;
    s->dirty = true;
    const char *why = NULL;
    if (final == JOB_PENDING && server_job_size(s, j) == 2) {
        /* its class learned, while it ran, that no GPU here holds it */
        final = JOB_FAILED;
        why = "its workload class needs more GPU memory than any GPU of the cluster has";
    }
    if (final == JOB_PENDING) {
        j->st.state = JOB_PENDING;
        j->st.exit_code = -1; /* a worker's code from the run that ran out of memory */
        j->requeue = false;
        j->sj.estimate_ms = j->spec.duration_estimate_ms;
        j->sj.last_checkpoint_ms = j->st.checkpoint_ms;
        int r = sched_enqueue(&s->sched, &j->sj);
        if (r < 0)
            changes_fail(ch, r); /* stored as pending, yet in no queue: a restart queues it */
        Buf from = {0};
        checkpoint_label(j->st.checkpoint, &from);
        changes_event(ch, j, now_ms, "requeue",
                      j->st.checkpoint ? buf_str(&from) : "no checkpoint: starts over");
        buf_free(&from);
        return;
    }
    j->st.state = final;
    j->st.end_ms = now_ms;
    s->counters.finished[final]++;
    char detail[64];
    snprintf(detail, sizeof(detail), "exit code %d", j->st.exit_code);
    changes_event(ch, j, now_ms,
                  final == JOB_SUCCEEDED ? "finish"
                  : final == JOB_FAILED  ? "fail"
                                         : "cancelled",
                  why                      ? why
                  : final == JOB_CANCELLED ? NULL
                                           : detail);
}

void server_job_stop(Server *s, ServerJob *j, StopMode mode, bool requeue, int64_t now_ms,
                     Changes *ch)
{
    changes_job(ch, j);
    if (j->st.state == JOB_PENDING) {
        sched_dequeue(&s->sched, &j->sj);
        s->order_stale = true;
        j->st.state = JOB_CANCELLED;
        j->st.end_ms = now_ms;
        s->counters.finished[JOB_CANCELLED]++;
        return;
    }
    if (job_state_ended(j->st.state))
        return;
    /* a cancel overrides a preemption under way; nothing overrides a cancel */
    if (j->st.state != JOB_STOPPING || mode == STOP_CANCEL) {
        j->stop_mode = (uint8_t)mode;
        j->requeue = requeue;
    }
    if (j->st.state != JOB_STOPPING)
        j->stop_ms = now_ms;
    j->st.state = JOB_STOPPING;
    j->sj.stopping = true;
    server_job_progress(s, j, now_ms, ch);
}

bool server_worker_ended(const WorkerRun *w)
{
    return w->state == WORKER_EXITED || w->state == WORKER_FAILED || w->state == WORKER_GONE;
}

/* The class learned: its jobs already waiting ask what it now needs too, or fail when
 * no GPU here holds that (they would only run out of memory). */
static void resize_waiting(Server *s, const ServerJob *learner, const char *cls, int64_t now_ms,
                           Changes *ch)
{
    ServerJob *j;
    for (int64_t pos = 0; (j = server_waiting_of_class(s, cls, &pos));) {
        if (j == learner)
            continue;
        sched_dequeue(&s->sched, &j->sj);
        s->order_stale = true;
        int r = server_job_size(s, j);
        if (r == 2) {
            j->st.state = JOB_FAILED;
            j->st.end_ms = now_ms;
            s->counters.finished[JOB_FAILED]++;
            changes_event(ch, j, now_ms, "fail",
                          "its workload class needs more GPU memory than any GPU of the cluster "
                          "has");
            continue;
        }
        if (r == 1) {
            char detail[320];
            snprintf(detail, sizeof(detail), "workload class %s now asks %llu MiB", cls,
                     (unsigned long long)learn_peak(&s->learn, cls));
            changes_event(ch, j, now_ms, "resized", detail);
        }
        r = sched_enqueue(&s->sched, &j->sj);
        if (r < 0)
            changes_fail(ch, r); /* stored as pending, yet in no queue: a restart queues it */
    }
}

/* Workers of the run that ran out of GPU memory teach their class to ask a fifth more
 * than they reached (core/learn.h). True when the job should run again, sized from
 * that: a larger grant exists for it on this cluster. Only a failure teaches: the peak
 * of a run that went well says little, as caching allocators and serving engines (vLLM
 * takes nine tenths of what it sees) hold what they are given, and learning it would
 * ratchet every class up to the largest grant it once had. */
static bool learn_oom_run(Server *s, ServerJob *j, int64_t now_ms, Changes *ch)
{
    char cls[256];
    learn_class_of(&j->spec, cls, sizeof(cls));
    bool any = false;
    for (size_t w = 0; w < j->n_workers && w < j->sj.pl.n_workers; w++) {
        WorkerRun *wr = &j->workers[w];
        if (!wr->oom)
            continue;
        wr->oom = false; /* once per run: the teardown that follows comes back here */
        const WorkerAlloc *wa = &j->sj.pl.workers[w];
        uint64_t granted = learn_granted_mib(s->c, wa);
        int before = learn_oom(&s->learn, cls, learn_per_gpu(s->c, wa, wr->peak_mib),
                               learn_per_gpu(s->c, wa, granted));
        const LearnEntry *e = learn_find(&s->learn, cls);
        if (before < 0 || !e)
            continue;
        changes_learned(ch, e);
        any = true;
        char detail[512];
        int at = snprintf(detail, sizeof(detail),
                          "rank %zu ran out of GPU memory in the %llu MiB "
                          "it was given",
                          w, (unsigned long long)granted);
        if (wr->peak_mib && at > 0 && (size_t)at < sizeof(detail))
            at += snprintf(detail + at, sizeof(detail) - (size_t)at, " (peak seen %llu MiB)",
                           (unsigned long long)wr->peak_mib);
        if (at > 0 && (size_t)at < sizeof(detail))
            snprintf(detail + at, sizeof(detail) - (size_t)at,
                     "; workload class %s now asks %llu MiB%s", cls,
                     (unsigned long long)e->peak_mib,
                     before ? " (not its first out-of-memory failure)" : "");
        changes_event(ch, j, now_ms, "oom", detail);
    }
    if (!any)
        return false;
    resize_waiting(s, j, cls, now_ms, ch);
    Request r = j->sj.req;
    return learn_size_request(&s->learn, s->c, &j->spec, &r) == 1;
}

void server_job_progress(Server *s, ServerJob *j, int64_t now_ms, Changes *ch)
{
    if (!j->workers || job_state_ended(j->st.state) || j->st.state == JOB_PENDING)
        return;
    size_t running = 0, ended = 0, bad = 0;
    int32_t first_bad = 0;
    for (size_t w = 0; w < j->n_workers; w++) {
        const WorkerRun *wr = &j->workers[w];
        if (wr->state == WORKER_RUNNING)
            running++;
        if (!server_worker_ended(wr))
            continue;
        ended++;
        bool ok = wr->state == WORKER_EXITED && wr->exit_code == 0;
        if (!ok && !bad++)
            first_bad = wr->state == WORKER_EXITED ? wr->exit_code : 127;
    }
    if (j->st.state == JOB_STARTING && running == j->n_workers) {
        /* the run started when its last worker's process did (the agents' clocks) */
        int64_t started = -1;
        for (size_t w = 0; w < j->n_workers; w++)
            started = MAX(started, j->workers[w].start_ms);
        j->st.state = JOB_RUNNING;
        j->st.start_ms = started > 0 ? started : now_ms;
        changes_job(ch, j);
    }
    if (j->st.state == JOB_STARTING || j->st.state == JOB_RUNNING) {
        /* out of GPU memory: run again one size up, as its class now asks */
        bool again = bad && learn_oom_run(s, j, now_ms, ch);
        if (ended == j->n_workers) {
            j->st.exit_code = bad ? first_bad : 0;
            finish_run(s, j, again ? JOB_PENDING : bad ? JOB_FAILED : JOB_SUCCEEDED, now_ms, ch);
        } else if (bad) {
            /* one worker of the gang failed: the rest cannot go on without it */
            j->st.exit_code = first_bad;
            if (!again)
                changes_event(ch, j, now_ms, "fail", "a worker failed: the others are stopped");
            server_job_stop(s, j, STOP_TEARDOWN, again, now_ms, ch);
        }
        return;
    }
    if (j->st.state == JOB_STOPPING && ended == j->n_workers) {
        JobState final = j->requeue                    ? JOB_PENDING
                         : j->stop_mode == STOP_CANCEL ? JOB_CANCELLED
                                                       : JOB_FAILED;
        finish_run(s, j, final, now_ms, ch);
    }
}

bool server_job_on_node(const ServerJob *j, uint32_t node, bool running_only)
{
    for (size_t w = 0; w < j->n_workers; w++) {
        const WorkerRun *wr = &j->workers[w];
        if (wr->node == node && !server_worker_ended(wr) &&
            (!running_only || wr->state == WORKER_RUNNING))
            return true;
    }
    return false;
}

/* Whatever the job ran on the node is taken as gone: the run is torn down and requeued
 * (a job already stopping ends its stop). */
static void requeue_from_node(Server *s, ServerJob *j, uint32_t node, const char *why,
                              int64_t now_ms, Changes *ch)
{
    for (size_t w = 0; w < j->n_workers; w++)
        if (j->workers[w].node == node && !server_worker_ended(&j->workers[w]))
            j->workers[w].state = WORKER_GONE;
    changes_event(ch, j, now_ms, "lost", why);
    s->counters.requeued_lost++;
    if (j->st.state == JOB_STOPPING)
        server_job_progress(s, j, now_ms, ch);
    else
        server_job_stop(s, j, STOP_PREEMPT, true, now_ms, ch);
}

ServerJob **server_jobs_on_node(Server *s, uint32_t node, size_t *ret_n)
{
    size_t n = 0;
    ServerJob **jobs = s->n_holding ? malloc(s->n_holding * sizeof(*jobs)) : NULL;
    for (size_t i = 0; jobs && i < s->n_holding; i++) {
        ServerJob *j = s->holding[i];
        if (server_job_on_node(j, node, false) ||
            (j->move != MOVE_NONE && j->shadow.node == node && !server_worker_ended(&j->shadow)))
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
        if (j->move != MOVE_NONE && j->shadow.node == node && !server_worker_ended(&j->shadow)) {
            j->shadow.state = WORKER_GONE;
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
    server_job_stop(s, j, STOP_PREEMPT, true, now_ms, ch);
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
    int r = server_commit(s, &ch);
    changes_free(&ch);
    return r;
}
