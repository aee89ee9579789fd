/* api_agent.c: the agents' side of the API. A heartbeat carries what a node has and
 * what its workers are doing; the server folds that into the jobs' lifecycles, writes
 * the changes durably, and answers with everything the node should be doing now (MIG
 * layouts, the workers to run or stop, the ended workers it may forget). Because the
 * answer is the whole desired state every time, a lost reply or a restart on either
 * side heals on the next heartbeat.
 *
 * Logs arrive as byte ranges of each worker's run log and are appended to the server's
 * copy when they continue it exactly.
 *
 * An agent token bound to a node (auth.h) heartbeats for that node only and uploads only
 * the logs of workers that ran there; an unbound one may act for any node. */
#include "server/api.h"
#include "server/checkpoint.h"
#include "server/gpufence.h"
#include "server/gpusample.h"
#include "server/measured.h"
#include "server/nodecheck.h"
#include "server/nodespan.h"
#include "server/placement_json.h"
#include "server/provider.h"
#include "util/log.h"
#include "util/macro.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_LOG_CHUNK (256u << 10)

static void set_str(char **dst, const char *src)
{
    if (src && (!*dst || strcmp(*dst, src))) {
        char *c = strdup(src);
        if (c) {
            free(*dst);
            *dst = c;
        }
    }
}

/* Fold one reported worker into its job. Returns true when the server has recorded
 * the worker's end (the agent may forget it). */
static bool fold_worker(Server *s, uint32_t node, json_t *w, int64_t now, Changes *ch)
{
    json_int_t id = json_integer_value(json_object_get(w, "job"));
    json_int_t run = json_integer_value(json_object_get(w, "run"));
    json_int_t rank = json_integer_value(json_object_get(w, "rank"));
    const char *state = json_string_value(json_object_get(w, "state"));
    bool ended = state && strcmp(state, "running");
    ServerJob *j = server_job(s, id);
    /* the other worker of a move: its replacement, or the old worker retiring */
    bool shadow = j && j->life.workers && j->life.move != LIFE_MOVE_NONE && rank == 0 &&
                  j->life.shadow.run == run && j->life.shadow.node == node;
    if (!shadow && (!j || !j->life.workers || rank < 0 || (size_t)rank >= j->life.n_workers ||
                    j->life.workers[rank].run != run || j->life.workers[rank].node != node)) {
        /* an earlier run, or a job the server let go: nothing to record, its checkpoints
         * least of all (they are not the current run's to resume from) */
        if (j && run < (json_int_t)j->st.run && run != (json_int_t)j->stale_ckpt_run &&
            (json_array_size(json_object_get(w, "checkpoints")) ||
             json_is_string(json_object_get(w, "checkpoint")))) {
            j->stale_ckpt_run = (uint32_t)run;
            log_info("event=checkpoint_stale job=%lld run=%lld current_run=%u node=%s "
                     "reason=\"a checkpoint of an earlier run is not recorded\"",
                     (long long)id, (long long)run, j->st.run, s->c->nodes[node].name);
        }
        return ended;
    }
    LifeWorker *wr = shadow ? &j->life.shadow : &j->life.workers[rank];
    wr->reported = true;
    json_t *peak = json_object_get(w, "peak_memory_mib");
    if (json_is_integer(peak) && json_integer_value(peak) > 0 &&
        (uint64_t)json_integer_value(peak) > wr->peak_mib)
        wr->peak_mib = (uint64_t)json_integer_value(peak);

    if (!shadow)
        checkpoint_fold(j, (size_t)rank, w, now, ch);
    if (!state)
        return false;
    if (!strcmp(state, "running")) {
        if (wr->state == LIFE_WORKER_ASSIGNED) {
            wr->state = LIFE_WORKER_RUNNING;
            wr->pid = (int32_t)json_integer_value(json_object_get(w, "pid"));
            json_t *st = json_object_get(w, "start_ms");
            wr->start_ms = json_is_integer(st) ? json_integer_value(st) : now;
            changes_job(ch, j);
        }
    } else if (wr->state == LIFE_WORKER_ASSIGNED || wr->state == LIFE_WORKER_RUNNING) {
        json_t *code = json_object_get(w, "exit_code"), *sig = json_object_get(w, "signal");
        if (!strcmp(state, "failed")) {
            wr->state = LIFE_WORKER_FAILED;
            const char *e = json_string_value(json_object_get(w, "error"));
            char detail[300];
            snprintf(detail, sizeof(detail), "rank %lld could not start: %s", (long long)rank,
                     e ? e : "unknown error");
            changes_event(ch, j, now, "fail", detail);
        } else {
            wr->state = LIFE_WORKER_EXITED;
            wr->oom = json_is_true(json_object_get(w, "oom"));
            wr->exit_code = json_is_integer(code) ? (int32_t)json_integer_value(code)
                            : json_is_integer(sig) && json_integer_value(sig)
                                ? 128 + (int32_t)json_integer_value(sig)
                                : -1;
        }
        changes_job(ch, j);
    }
    if (shadow) {
        /* its end is recorded at once: the move is committed, retired or abandoned */
        server_move_progress(s, j, now, ch);
        return ended;
    }
    /* stopped by its node's shutdown (told now, or by an agent since restarted): the
     * run is requeued, not failed for it */
    if (ended && json_is_true(json_object_get(w, "shutdown")))
        server_job_node_shutdown(s, j, node, now, ch);
    server_job_progress(s, j, now, ch);
    /* an ended worker is forgotten once its whole run has closed (and been written):
     * until then a restarted server still learns from its agent that it ended */
    return ended && !j->life.workers;
}

static void mark_unreported(Server *s, uint32_t node)
{
    for (size_t i = 0; i < s->n_holding; i++) {
        ServerJob *j = s->holding[i];
        for (size_t w = 0; w < j->life.n_workers; w++)
            if (j->life.workers[w].node == node)
                j->life.workers[w].reported = false;
        if (j->life.shadow.node == node)
            j->life.shadow.reported = false;
    }
}

/* Workers the node should run that its agent did not mention: one never started that
 * is no longer wanted, or one that was running and vanished without an exit the agent
 * saw (its agent lost track of it), is gone. */
static void fold_unreported(Server *s, uint32_t node, int64_t now, Changes *ch)
{
    size_t n = s->n_holding;
    if (!n)
        return;
    ServerJob **jobs = malloc(n * sizeof(*jobs));
    if (!jobs)
        return;
    memcpy(jobs, s->holding, n * sizeof(*jobs));
    for (size_t i = 0; i < n; i++) {
        ServerJob *j = jobs[i];
        bool changed = false;
        for (size_t w = 0; w < j->life.n_workers; w++) {
            LifeWorker *wr = &j->life.workers[w];
            if (wr->node != node || wr->reported)
                continue;
            if ((wr->state == LIFE_WORKER_ASSIGNED && j->st.state == JOB_STOPPING) ||
                wr->state == LIFE_WORKER_RUNNING) {
                wr->state = LIFE_WORKER_GONE;
                changed = true;
            }
        }
        if (changed) {
            changes_job(ch, j);
            server_job_progress(s, j, now, ch);
        }
        /* a replacement that ran and vanished, or an old worker its agent no longer has */
        LifeWorker *sh = &j->life.shadow;
        if (j->life.move != LIFE_MOVE_NONE && sh->node == node && !sh->reported &&
            (sh->state == LIFE_WORKER_RUNNING || j->life.move == LIFE_MOVE_RETIRING) &&
            !life_worker_ended(sh)) {
            sh->state = LIFE_WORKER_GONE;
            changes_job(ch, j);
            server_move_progress(s, j, now, ch);
        }
    }
    free(jobs);
}

static const char *stop_word(const ServerJob *j)
{
    if (j->st.state != JOB_STOPPING)
        return NULL;
    return j->life.stop_mode == LIFE_STOP_PREEMPT ? "preempt" : "cancel";
}

static json_t *env_json(const JobSpec *spec)
{
    json_t *env = json_object();
    for (size_t i = 0; i < spec->n_env; i++) {
        const char *eq = strchr(spec->env[i], '=');
        if (!eq)
            continue;
        char key[256];
        size_t kl = MIN((size_t)(eq - spec->env[i]), sizeof(key) - 1);
        memcpy(key, spec->env[i], kl);
        key[kl] = '\0';
        json_object_set_new(env, key, json_string(eq + 1));
    }
    return env;
}

/* A job with a worker on a node under an interruption notice has to be stopped by the
 * deadline: its grace is what is left of the notice, if that is shorter. Counted from
 * each reply, so a gang's workers on other nodes, told a heartbeat later, get what is
 * left then. */
static int64_t stop_grace_ms(const Server *s, const ServerJob *j, int64_t now)
{
    int64_t grace = j->sj.grace_ms;
    for (size_t w = 0; w < j->life.n_workers; w++) {
        int64_t deadline = s->nodes[j->life.workers[w].node].interruption_deadline_ms;
        if (deadline > 0)
            grace = MIN(grace, MAX(deadline - now, 0));
    }
    return grace;
}

/* The job's checkpoint interval; a job that gives none but says what a checkpoint costs
 * gets Young/Daly's on interruptible capacity (its most interruptible pool). */
static int64_t checkpoint_interval_ms(const Server *s, const ServerJob *j)
{
    if (j->spec.checkpoint_interval_ms > 0 || j->spec.checkpoint_cost_ms <= 0)
        return j->spec.checkpoint_interval_ms;
    double rate = 0;
    for (size_t w = 0; w < j->sj.pl.n_workers; w++) {
        const Pool *p = &s->c->pools[s->c->nodes[j->sj.pl.workers[w].node].pool];
        rate = MAX(rate, p->interruptions_per_hour);
    }
    return autoscale_checkpoint_interval_ms(j->spec.checkpoint_cost_ms, rate);
}

/* Does the job save its work? It has a checkpoint setting. Its agent stops it by a
 * checkpoint when the node shuts down, and stops any other with SIGTERM. */
static bool job_checkpoints(const ServerJob *j)
{
    return j->spec.checkpoint_interval_ms > 0 || j->spec.checkpoint_cost_ms > 0 ||
           j->spec.checkpoint_grace_ms > 0;
}

/* Who the worker runs as and what host resources it asked for: "user" (the job's team's
 * run_as in the cluster spec; left out without one, and the agent uses its default
 * unprivileged user), "cpu_milli" and "memory_mib" per worker (0: not asked). */
static void worker_limits_json(const Server *s, const ServerJob *j, json_t *o)
{
    int t = j->spec.team ? cluster_find_team(s->c, j->spec.team) : -1;
    const RunAs *ra = t >= 0 ? &s->c->teams[t].run_as : NULL;
    if (ra && ra->set) {
        json_t *groups = json_array();
        for (size_t i = 0; i < ra->n_groups; i++)
            json_array_append_new(groups, json_integer(ra->groups[i]));
        json_object_set_new(o, "user",
                            json_pack("{s:I, s:I, s:o}", "uid", (json_int_t)ra->uid, "gid",
                                      (json_int_t)ra->gid, "groups", groups));
    }
    json_object_set_new(o, "cpu_milli", json_integer(j->spec.cpu_milli));
    json_object_set_new(o, "memory_mib", json_integer(j->spec.memory_mib));
}

/* What the agent needs to set NCCL up for the network (docs/agent.md, "NCCL and the
 * fabric"): "fabric", the node's pool's label from the cluster spec (left out without
 * one), and "multi_node", whether the run's workers are on more than one node (only
 * then does NCCL cross the network; the agent cannot tell from world_size alone). */
static void worker_fabric_json(const Server *s, const Placement *pl, const WorkerAlloc *wa,
                               json_t *o)
{
    uint16_t f = s->c->nodes[wa->node].fabric;
    if (f && f < s->c->n_fabrics && *s->c->fabrics[f])
        json_object_set_new(o, "fabric", json_string(s->c->fabrics[f]));
    bool multi = false;
    for (size_t w = 0; !multi && w < pl->n_workers; w++)
        multi = pl->workers[w].node != wa->node;
    json_object_set_new(o, "multi_node", json_boolean(multi));
}

/* Worker `rank` of run `run` on allocation pl (the job's, or the one a move leaves). */
static json_t *worker_json(Server *s, ServerJob *j, const Placement *pl, size_t rank, uint32_t run,
                           int64_t now)
{
    const WorkerAlloc *wa = &pl->workers[rank];
    size_t local = 0;
    for (size_t w = 0; w < rank; w++)
        local += pl->workers[w].node == wa->node;
    const NodeState *ns0 = &s->nodes[pl->workers[0].node];
    const char *master = ns0->address ? ns0->address : s->c->nodes[pl->workers[0].node].name;
    json_t *cmd = json_array();
    for (size_t i = 0; i < j->spec.n_command; i++)
        json_array_append_new(cmd, json_string(j->spec.command[i]));
    const char *stop = stop_word(j);
    json_t *o = json_pack(
        "{s:I, s:I, s:I, s:I, s:I, s:s, s:i, s:o, s:o, s:o, s:o, s:I, s:s, s:I, s:o}", "job",
        (json_int_t)j->st.id, "run", (json_int_t)run, "rank", (json_int_t)rank, "local_rank",
        (json_int_t)local, "world_size", (json_int_t)j->life.n_workers, "master_addr", master,
        "master_port", (int)j->master_port, "gpus", placement_grants_json(s->c, wa), "command", cmd,
        "env", env_json(&j->spec), "resume_from", checkpoint_resume_json(j->st.checkpoint, rank),
        "checkpoint_interval_ms", (json_int_t)checkpoint_interval_ms(s, j), "checkpoint_signal",
        "USR1", "grace_ms", (json_int_t)stop_grace_ms(s, j, now), "stop",
        stop ? json_string(stop) : json_null());
    if (o) {
        json_object_set_new(o, "checkpoints", json_boolean(job_checkpoints(j)));
        worker_limits_json(s, j, o);
        worker_fabric_json(s, pl, wa, o);
    }
    return o;
}

/* The node's desired state: MIG layouts and the workers it should run. */
static json_t *desired(Server *s, uint32_t node, json_t *forget, int64_t now)
{
    const Node *n = &s->c->nodes[node];
    const GpuModel *m = node_model(s->c, n);
    json_t *mig = json_array();
    for (unsigned i = 0; i < n->n_gpus; i++) {
        const Gpu *g = node_gpu_c(s->c, n, i);
        if (g->mode != GPU_MIG)
            continue;
        MigInstance inst[MIG_MAX_SLOTS];
        size_t k = mig_layout_list(&g->mig, inst);
        json_t *layout = json_array();
        for (size_t x = 0; x < k; x++)
            json_array_append_new(layout, json_pack("{s:s, s:i}", "profile",
                                                    m->profiles[inst[x].profile].name, "start",
                                                    (int)inst[x].start));
        json_array_append_new(mig, json_pack("{s:i, s:o}", "index", (int)i, "layout", layout));
    }
    json_t *workers = json_array();
    for (size_t k = 0; k < s->n_holding; k++) {
        ServerJob *j = s->holding[k];
        /* while a replacement starts, the old worker serves from where it was */
        const Placement *pl = j->life.move == LIFE_MOVE_STARTING ? &j->sj.moved_from : &j->sj.pl;
        for (size_t w = 0; w < j->life.n_workers; w++) {
            const LifeWorker *wr = &j->life.workers[w];
            if (wr->node == node &&
                (wr->state == LIFE_WORKER_ASSIGNED || wr->state == LIFE_WORKER_RUNNING))
                json_array_append_new(workers, worker_json(s, j, pl, w, wr->run, now));
        }
        /* the replacement, unless the job is being stopped; a retiring worker is left
         * out, so its agent stops it */
        const LifeWorker *sh = &j->life.shadow;
        if (j->life.move == LIFE_MOVE_STARTING && sh->node == node && j->st.state == JOB_RUNNING &&
            (sh->state == LIFE_WORKER_ASSIGNED || sh->state == LIFE_WORKER_RUNNING))
            json_array_append_new(workers, worker_json(s, j, &j->sj.pl, 0, sh->run, now));
    }
    return json_pack("{s:I, s:o, s:o, s:O, s:s}", "heartbeat_ms", (json_int_t)s->opt.heartbeat_ms,
                     "mig", mig, "workers", workers, "forget", forget, "server_id", s->server_id);
}

/* The cloud's notice that it takes a node back (a spot interruption), from a heartbeat. */
typedef struct Interruption {
    int64_t deadline_ms; /* wall clock */
    const char *source, *action;
} Interruption;

/* "interruption" of a heartbeat: false when it is there but not the documented shape. */
static bool parse_interruption(json_t *body, Interruption *ret)
{
    json_t *o = json_object_get(body, "interruption");
    *ret = (Interruption){0};
    if (!o || json_is_null(o))
        return true;
    json_t *deadline = json_object_get(o, "deadline_ms");
    ret->source = json_string_value(json_object_get(o, "source"));
    ret->action = json_string_value(json_object_get(o, "action"));
    if (!json_is_integer(deadline) || json_integer_value(deadline) <= 0 || !ret->source ||
        !ret->action || strlen(ret->source) > 32 || strlen(ret->action) > 32)
        return false;
    ret->deadline_ms = json_integer_value(deadline);
    return true;
}

/* While a node's heartbeats carry an interruption notice it takes no new work; the
 * first one stops every job with a worker there (checkpoint, then requeue: the node is
 * unschedulable, so they resume elsewhere), their grace cut to the notice
 * (stop_grace_ms). A notice that clears gives the node back to the scheduler. */
static void fold_interruption(Server *s, uint32_t node, const Interruption *in, int64_t now,
                              Changes *ch)
{
    NodeState *ns = &s->nodes[node];
    const char *name = s->c->nodes[node].name;
    if (!in->deadline_ms) {
        if (ns->interruption_deadline_ms) {
            log_info("event=node_interruption_cleared node=%s", name);
            ns->interruption_deadline_ms = 0;
            /* a node fenced for a sick GPU stays closed */
            if (!gpufence_fenced(s, node))
                cluster_set_schedulable(s->c, node, s->c->nodes[node].state == NODE_UP);
            server_kick(s);
        }
        return;
    }
    cluster_set_away(s->c, node, AWAY_NOTICE);
    bool first = !ns->interruption_deadline_ms;
    ns->interruption_deadline_ms = in->deadline_ms;
    if (!first)
        return;
    s->counters.spot_interruptions++;
    char at[32];
    time_t t = (time_t)(in->deadline_ms / 1000);
    struct tm tm;
    if (!gmtime_r(&t, &tm) || !strftime(at, sizeof(at), "%Y-%m-%dT%H:%M:%SZ", &tm))
        snprintf(at, sizeof(at), "%lld ms", (long long)in->deadline_ms);
    size_t n, stopped = 0;
    ServerJob **jobs = server_jobs_on_node(s, node, &n);
    for (size_t i = 0; i < n; i++) {
        ServerJob *j = jobs[i];
        if (!server_job_on_node(j, node, false) || j->st.state == JOB_STOPPING ||
            job_state_ended(j->st.state))
            continue;
        char detail[256];
        snprintf(detail, sizeof(detail),
                 "node %s: %s interruption notice (%s) for %s, %lld s ahead; grace %lld ms", name,
                 in->source, in->action, at, (long long)((in->deadline_ms - now) / 1000),
                 (long long)stop_grace_ms(s, j, now));
        j->st.preemptions++;
        s->counters.preempted++;
        changes_event(ch, j, now, "interrupted", detail);
        server_job_stop(s, j, LIFE_STOP_PREEMPT, true, now, ch);
        stopped++;
    }
    free(jobs);
    log_error("event=node_interrupted node=%s source=%s action=%s deadline=%s in_ms=%lld "
              "jobs_stopped=%zu",
              name, in->source, in->action, at, (long long)(in->deadline_ms - now), stopped);
    server_kick(s);
}

/* The node's agent reports other GPUs than the spec declares (nodecheck.h): the node
 * takes no work until one of them is fixed. Its agent is there, so the node is not
 * lost; what runs there is left as it was (the refused heartbeat changes nothing), and
 * the agent, refused, keeps its workers running and reports them once it matches. An
 * autoscaled node that came up this way is up (it is paid for), and closed. */
/* The NVLink links the agent sees (each GPU's nvlink_peers) into the cluster, so that
 * multi-GPU workers land on GPUs really linked rather than on pairs by index. */
static void set_nvlinks(Server *s, uint32_t node, json_t *gpus)
{
    size_t i, k;
    json_t *g, *p;
    json_array_foreach(gpus, i, g)
    {
        json_int_t index = json_integer_value(json_object_get(g, "index"));
        if (index < 0 || index >= NODE_MAX_GPUS)
            continue;
        uint16_t mask = 0;
        json_array_foreach(json_object_get(g, "nvlink_peers"), k, p)
        {
            json_int_t peer = json_integer_value(p);
            if (peer >= 0 && peer < NODE_MAX_GPUS)
                mask |= (uint16_t)(1u << peer);
        }
        cluster_set_nvlink(s->c, node, (unsigned)index, mask);
    }
}

static void node_mismatched(Server *s, uint32_t node, const char *diff)
{
    NodeState *ns = &s->nodes[node];
    uint8_t presence = s->c->nodes[node].state;
    if (presence == NODE_ABSENT || presence == NODE_STARTING) {
        cluster_set_node_state(s->c, node, NODE_UP);
        provider_node_up(s, node);
    }
    cluster_set_away(s->c, node, AWAY_MISMATCHED);
    if (ns->liveness != NODE_MISMATCHED || !ns->mismatch || strcmp(ns->mismatch, diff)) {
        log_error("event=node_mismatched node=%s was=%s mismatch=\"%s\"", s->c->nodes[node].name,
                  node_liveness_name(ns->liveness), diff);
        set_str(&ns->mismatch, diff);
    }
    ns->liveness = NODE_MISMATCHED;
    ns->last_seen_ms = server_now_ms();
    ns->seen_mono_ms = server_mono_ms();
    nodespan_update(s, node, ns->last_seen_ms);
}

/* The reported workers' checkpoint lists, all checked before any is folded in, so a
 * malformed one changes nothing (400). */
static bool workers_check(json_t *workers, HttpResponse *rp)
{
    size_t i;
    json_t *w;
    json_array_foreach(workers, i, w)
    {
        Buf err = {0};
        if (checkpoint_report_check(w, &err) < 0) {
            http_reply_error(rp, 400, "workers[%zu] (job %lld, rank %lld): %s", i,
                             (long long)json_integer_value(json_object_get(w, "job")),
                             (long long)json_integer_value(json_object_get(w, "rank")),
                             buf_str(&err));
            buf_free(&err);
            return false;
        }
    }
    return true;
}

void api_agent_heartbeat(Server *s, const HttpRequest *rq, HttpResponse *rp)
{
    json_t *body = http_body_json(rq, rp);
    if (!body)
        return;
    const char *name = json_string_value(json_object_get(body, "node"));
    json_t *workers = json_object_get(body, "workers");
    if (!name || !json_is_array(workers)) {
        http_reply_error(rp, 400, "a heartbeat needs 'node' (a string) and 'workers' (a list)");
        json_decref(body);
        return;
    }
    if (rq->who.node[0] && strcmp(rq->who.node, name)) {
        http_reply_error(rp, 403, "this agent token is for node '%s', not '%s'", rq->who.node,
                         name);
        json_decref(body);
        return;
    }
    json_t *down = json_object_get(body, "shutdown");
    if (down && !json_is_boolean(down) && !json_is_null(down)) {
        http_reply_error(rp, 400, "'shutdown' must be true or false");
        json_decref(body);
        return;
    }
    bool shutdown = json_is_true(down);
    if (!workers_check(workers, rp)) {
        json_decref(body);
        return;
    }
    json_t *sid = json_object_get(body, "server_id");
    if (sid && !(json_is_string(sid) && json_string_length(sid) <= 64)) {
        http_reply_error(rp, 400, "'server_id' must be a string of at most 64 characters");
        json_decref(body);
        return;
    }
    Interruption intr;
    if (!parse_interruption(body, &intr)) {
        http_reply_error(rp, 400,
                         "'interruption' needs 'deadline_ms' (ms since the epoch, > 0), "
                         "'source' and 'action' (strings of at most 32 characters)");
        json_decref(body);
        return;
    }
    server_lock(s);
    if (server_diverged(s)) {
        /* a change failed to be written while this waited for the lock: the reply would
         * tell the agent of it (state.h, server_diverge) */
        pthread_mutex_unlock(&s->lock);
        http_reply_error(rp, 503, "the server is restarting; report again");
        json_decref(body);
        return;
    }
    int idx = cluster_find_node(s->c, name);
    if (idx < 0) {
        pthread_mutex_unlock(&s->lock);
        http_reply_error(rp, 404, "node '%s' is not in cluster %s", name, s->c->name);
        json_decref(body);
        return;
    }
    int64_t now = server_now_ms();
    NodeState *ns = &s->nodes[idx];
    uint8_t presence = s->c->nodes[idx].state;
    if (presence == NODE_ABSENT && s->autoscaling) {
        /* given back (or never asked for): its agent is on its way out */
        pthread_mutex_unlock(&s->lock);
        http_reply_error(rp, 409, "node '%s' is not in service: the autoscaler gave it back", name);
        json_decref(body);
        return;
    }
    ReportedGpu *reported = NULL;
    size_t n_reported = 0;
    Buf why = {0};
    int pr = nodecheck_parse(json_object_get(body, "gpus"), &reported, &n_reported, &why);
    if (pr < 0) {
        pthread_mutex_unlock(&s->lock);
        if (pr == -ENOMEM)
            http_reply_error(rp, 500, "out of memory");
        else
            http_reply_error(rp, 400, "%s", buf_str(&why));
        buf_free(&why);
        json_decref(body);
        return;
    }
    bool matches = nodecheck_matches(s->c, (uint32_t)idx, reported, n_reported, &why);
    free(reported);
    if (!matches) {
        node_mismatched(s, (uint32_t)idx, buf_str(&why));
        pthread_mutex_unlock(&s->lock);
        Buf msg = {0};
        buf_printf(&msg,
                   "node %s: %s; it takes no work until the cluster file or the agent's GPUs "
                   "are fixed",
                   name, buf_str(&why));
        http_reply_json(rp, 409,
                        json_pack("{s:s, s:s}", "error", buf_str(&msg), "mismatch", buf_str(&why)));
        buf_free(&msg);
        buf_free(&why);
        json_decref(body);
        return;
    }
    buf_free(&why);
    if (ns->liveness == NODE_MISMATCHED)
        log_info("event=node_matches node=%s", name);
    bool arriving = presence == NODE_ABSENT || presence == NODE_STARTING;
    /* a node going down is not brought up (server_node_shutdown closes it below) */
    if (!shutdown && (ns->liveness != NODE_READY || arriving)) {
        log_info("event=node_ready node=%s was=%s", name,
                 arriving ? "starting" : node_liveness_name(ns->liveness));
        ns->liveness = NODE_READY;
        if (arriving) {
            /* an autoscaled pool's node came up (or an agent was started by hand) */
            cluster_set_node_state(s->c, (uint32_t)idx, NODE_UP);
            provider_node_up(s, (uint32_t)idx);
        } else if (presence == NODE_UP) {
            cluster_set_schedulable(s->c, (uint32_t)idx, true);
        }
        nodespan_update(s, (uint32_t)idx, now);
        server_kick(s);
    }
    ns->last_seen_ms = now;
    ns->seen_mono_ms = server_mono_ms();
    set_str(&ns->boot_id, json_string_value(json_object_get(body, "boot_id")));
    set_str(&ns->address, json_string_value(json_object_get(body, "address")));
    json_t *gpus = json_object_get(body, "gpus");
    if (json_is_array(gpus)) {
        char *g = json_dumps(gpus, JSON_COMPACT);
        if (g) {
            free(ns->gpus_json);
            ns->gpus_json = g;
        }
        set_nvlinks(s, (uint32_t)idx, gpus);
    }
    gpusample_fold(s, (uint32_t)idx, gpus);
    measured_fold(s, (uint32_t)idx, now);
    Changes ch = {0};
    json_t *forget = json_array();
    size_t i;
    json_t *w;
    /* workers the agent keeps for another server (one reinstalled, or whose database was
     * wiped): their job ids are that server's and must not be matched to this one's.
     * The reply names this server; the agent drops them and reports afresh. */
    const char *their = json_string_value(sid);
    bool foreign = their && *their && strcmp(their, s->server_id);
    if (foreign) {
        log_info("event=heartbeat_other_server node=%s server_id=%s agent_server_id=%s "
                 "workers_ignored=%zu",
                 name, s->server_id, their, json_array_size(workers));
    } else {
        mark_unreported(s, (uint32_t)idx);
    }
    if (shutdown)
        server_node_shutdown(s, (uint32_t)idx, now, &ch);
    json_array_foreach(workers, i, w)
    {
        if (!foreign && fold_worker(s, (uint32_t)idx, w, now, &ch))
            json_array_append_new(
                forget, json_pack("{s:O, s:O, s:O}", "job", json_object_get(w, "job"), "run",
                                  json_object_get(w, "run"), "rank", json_object_get(w, "rank")));
    }
    if (!foreign)
        fold_unreported(s, (uint32_t)idx, now, &ch);
    if (!shutdown || intr.deadline_ms) /* a notice cleared does not reopen a node going down */
        fold_interruption(s, (uint32_t)idx, &intr, now, &ch);
    if (!shutdown)
        gpufence_fold(s, (uint32_t)idx, json_object_get(body, "gpus"), now, &ch);
    int r = server_commit_released(s, &ch);
    changes_free(&ch);
    if (r < 0) {
        pthread_mutex_unlock(&s->lock);
        json_decref(forget);
        json_decref(body);
        http_reply_error(rp, 500, "the store failed; report again");
        return;
    }
    json_t *reply = desired(s, (uint32_t)idx, forget, now);
    pthread_mutex_unlock(&s->lock);
    json_decref(forget);
    json_decref(body);
    http_reply_json(rp, 200, reply);
}

/* ---- logs ---- */

static bool parse_id(const char *s, long long lo, long long *ret)
{
    char *end;
    errno = 0;
    long long v = s ? strtoll(s, &end, 10) : 0;
    if (!s || !*s || *end || errno || v < lo)
        return false;
    *ret = v;
    return true;
}

/* Whether the run-th run of a job had a worker on `node`: its "start" event, the run-th,
 * names the run's nodes ("on a, b"). */
typedef struct RunNodes {
    long long run, seen;
    const char *node;
    bool on;
} RunNodes;

static int run_nodes(void *arg, int64_t t_ms, const char *type, const char *detail)
{
    (void)t_ms;
    RunNodes *r = arg;
    if (strcmp(type, "start") || ++r->seen != r->run || !detail)
        return 0;
    const char *p = strncmp(detail, "on ", 3) ? detail : detail + 3;
    size_t len = strlen(r->node);
    for (;;) {
        const char *end = strstr(p, ", ");
        size_t n = end ? (size_t)(end - p) : strlen(p);
        r->on |= n == len && !memcmp(p, r->node, len);
        if (!end)
            return 0;
        p = end + 2;
    }
}

void api_agent_logs(Server *s, const HttpRequest *rq, HttpResponse *rp)
{
    long long job, rank, run, offset;
    if (!parse_id(rq->params[0], 1, &job) || !parse_id(rq->params[1], 0, &rank) ||
        !parse_id(http_query(rq, "run"), 1, &run) ||
        !parse_id(http_query(rq, "offset"), 0, &offset)) {
        http_reply_error(rp, 400,
                         "a log upload needs /logs/JOB/RANK?run=R&offset=N, whole numbers");
        return;
    }
    if (rq->body_len > MAX_LOG_CHUNK) {
        http_reply_error(rp, 413, "a log chunk is at most 256 KiB");
        return;
    }
    const char *bound = rq->who.node[0] ? rq->who.node : NULL;
    server_lock(s);
    ServerJob *j = server_job(s, job);
    /* a rank the job has: a log of no worker would be served as one */
    bool known = j && run <= j->st.run && (uint64_t)rank < j->spec.workers;
    /* a token bound to a node uploads only what ran there: 1 yes, 0 no, -1 ask the store
     * (an earlier run, or one whose workers are gone) */
    int here = -1;
    if (known && bound && run == j->st.run && j->life.workers && (size_t)rank < j->life.n_workers)
        here = !strcmp(s->c->nodes[j->life.workers[rank].node].name, bound);
    pthread_mutex_unlock(&s->lock);
    if (!known) {
        http_reply_error(rp, 404, "no rank %lld of run %lld of job %lld", rank, run, job);
        return;
    }
    if (bound && here < 0) {
        RunNodes rn = {.run = run, .node = bound};
        if (store_events_for(s->store, job, run_nodes, &rn) < 0) {
            http_reply_error(rp, 500, "cannot read the job's events");
            return;
        }
        here = rn.on;
    }
    if (bound && !here) {
        http_reply_error(rp, 403,
                         "this agent token is for node '%s', where rank %lld of run %lld "
                         "of job %lld did not run",
                         bound, rank, run, job);
        return;
    }
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/%lld-%lld-%lld.log", s->log_dir, job, rank, run);
    /* the server's alone: a job's output may hold what its owner would not show (the API
     * decides who reads it); a directory an older server made open is closed again */
    if (mkdir(s->log_dir, 0700) < 0 && errno == EEXIST)
        chmod(s->log_dir, 0700);
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    struct stat stt;
    if (fd < 0 || fstat(fd, &stt) < 0) {
        if (fd >= 0)
            close(fd);
        log_error("event=log_write_failed path=%s errno=%d", path, errno);
        http_reply_error(rp, 500, "cannot write the log");
        return;
    }
    long long held = stt.st_size;
    int status = 200;
    if (offset > held) {
        status = 409; /* a gap: the agent resends from what is held */
    } else if (offset + (long long)rq->body_len > held) {
        size_t skip = (size_t)(held - offset);
        const char *p = rq->body + skip;
        size_t left = rq->body_len - skip;
        while (left > 0) {
            ssize_t k = write(fd, p, left);
            if (k < 0 && errno == EINTR)
                continue;
            if (k <= 0) {
                status = 500;
                break;
            }
            p += k;
            left -= (size_t)k;
            held += k;
        }
    }
    close(fd);
    if (status == 500) {
        http_reply_error(rp, 500, "cannot write the log");
        return;
    }
    http_reply_json(rp, status, json_pack("{s:I}", "size", (json_int_t)held));
}
