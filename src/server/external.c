/* external.c: the server's side of an engine that drives the nodes itself instead of
 * gpuorch agents (the Kubernetes engine, src/kube): it says which nodes take work and
 * why not, parks the jobs it cannot start yet, and closes the ones whose workers went
 * away before they ran. Everything else (placement, runs, preemption, requeue,
 * chargeback) is the lifecycle the agents' nodes go through. Lock held. */
#include "server/nodespan.h"
#include "server/state.h"
#include "util/log.h"

void server_node_ready(Server *s, uint32_t node, NodeAway why, int64_t now_ms)
{
    NodeState *ns = &s->nodes[node];
    NodeLiveness want = why == AWAY_NONE ? NODE_READY : NODE_DOWN;
    const Node *n = &s->c->nodes[node];
    if (ns->liveness == want && (why == AWAY_NONE ? n->schedulable : n->away == why))
        return;
    ns->liveness = (uint8_t)want;
    ns->last_seen_ms = now_ms;
    ns->seen_mono_ms = server_mono_ms();
    if (why == AWAY_NONE)
        cluster_set_schedulable(s->c, node, n->state == NODE_UP);
    else
        cluster_set_away(s->c, node, why);
    nodespan_update(s, node, now_ms);
    s->dirty = true;
}

void server_job_park(Server *s, ServerJob *j, bool park)
{
    if (j->st.state != JOB_PENDING || j->parked == park)
        return;
    if (park)
        sched_dequeue(&s->sched, &j->sj);
    else if (sched_enqueue(&s->sched, &j->sj) < 0) {
        log_error("event=unpark_failed job=%lld reason=out_of_memory", (long long)j->st.id);
        return;
    }
    j->parked = park;
    s->order_stale = true;
    s->dirty = true;
}

void server_job_vanished(Server *s, ServerJob *j, const char *why, int64_t now_ms, Changes *ch)
{
    if (job_state_ended(j->st.state))
        return;
    if (j->st.state == JOB_PENDING) {
        if (j->parked) {
            /* out of the queue already: server_job_stop would dequeue it again */
            j->parked = false;
            server_job_end(s, j, JOB_CANCELLED, now_ms, ch);
        } else {
            server_job_stop(s, j, LIFE_STOP_CANCEL, false, now_ms, ch);
        }
        changes_event(ch, j, now_ms, "cancelled", why);
        return;
    }
    for (size_t w = 0; w < j->life.n_workers; w++)
        if (!life_worker_ended(&j->life.workers[w]))
            j->life.workers[w].state = LIFE_WORKER_GONE;
    changes_event(ch, j, now_ms, "cancelled", why);
    server_job_stop(s, j, LIFE_STOP_CANCEL, false, now_ms, ch);
}
