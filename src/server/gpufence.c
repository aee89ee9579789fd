/* gpufence.c: what the server does with a GPU its agent reports sick. The whole node
 * is closed to new work, not only the sick GPU: the core's placement has no per-GPU
 * fence, and a node whose GPU fell off the bus or lost memory is one an operator looks
 * at before trusting it again. Only the jobs holding the sick GPU are stopped: they
 * checkpoint if they still can and are requeued, resuming from their last checkpoint
 * on another node; the jobs on the node's healthy GPUs run on. The agent keeps a sick
 * GPU sick until it restarts (after a driver reset), so the server follows its report:
 * the fence lifts when a report says every GPU is healthy again. */
#include "server/gpufence.h"
#include "util/log.h"

#include <string.h>

/* Does any worker of j on node hold GPU index? */
static bool holds_gpu(const ServerJob *j, uint32_t node, unsigned index)
{
    const Placement *pl = &j->sj.pl;
    for (size_t w = 0; w < pl->n_workers; w++) {
        if (pl->workers[w].node != node)
            continue;
        for (uint8_t g = 0; g < pl->workers[w].n_grants; g++)
            if (pl->workers[w].grants[g].index == index)
                return true;
    }
    return false;
}

static void stop_jobs_on_gpu(Server *s, uint32_t node, unsigned index, const char *reason,
                             int64_t now_ms, Changes *ch, size_t *ret_stopped)
{
    size_t n;
    ServerJob **jobs = server_jobs_on_node(s, node, &n);
    for (size_t i = 0; i < n; i++) {
        ServerJob *j = jobs[i];
        if (!holds_gpu(j, node, index) || !server_job_on_node(j, node, false) ||
            (j->st.state != JOB_STARTING && j->st.state != JOB_RUNNING))
            continue; /* stopping already (a cancel stays a cancel) or ended */
        char detail[256];
        snprintf(detail, sizeof(detail),
                 "GPU %u of node %s is sick (%s): the run checkpoints if it can, stops and is "
                 "requeued to resume from its last checkpoint",
                 index, s->c->nodes[node].name, reason);
        changes_event(ch, j, now_ms, "gpu_fenced", detail);
        server_job_stop(s, j, LIFE_STOP_PREEMPT, true, now_ms, ch);
        ++*ret_stopped;
    }
    free(jobs);
}

void gpufence_fold(Server *s, uint32_t node, json_t *gpus, int64_t now_ms, Changes *ch)
{
    NodeState *ns = &s->nodes[node];
    const Node *nd = &s->c->nodes[node];
    uint16_t sick = 0;
    size_t i;
    json_t *g;
    json_array_foreach(gpus, i, g)
    {
        json_t *idx = json_object_get(g, "index");
        const char *h = json_string_value(json_object_get(g, "health"));
        if (!json_is_integer(idx) || json_integer_value(idx) < 0 ||
            json_integer_value(idx) >= nd->n_gpus || !h || !*h || !strcmp(h, "ok"))
            continue; /* no "health": an agent from before it was reported */
        unsigned k = (unsigned)json_integer_value(idx);
        sick |= (uint16_t)(1u << k);
        if (ns->gpu_sick_mask & (1u << k))
            continue;
        snprintf(ns->gpu_sick[k], sizeof(ns->gpu_sick[k]), "%s", h);
        size_t stopped = 0;
        stop_jobs_on_gpu(s, node, k, ns->gpu_sick[k], now_ms, ch, &stopped);
        log_error("event=gpu_fenced node=%s gpu=%u reason=\"%s\" jobs_stopped=%zu", nd->name, k,
                  ns->gpu_sick[k], stopped);
        server_kick(s);
    }
    if (sick) {
        ns->gpu_sick_mask |= sick;
        cluster_set_away(s->c, node, AWAY_GPU_SICK);
        return;
    }
    if (!ns->gpu_sick_mask)
        return;
    log_info("event=gpu_fence_lifted node=%s", nd->name);
    ns->gpu_sick_mask = 0;
    memset(ns->gpu_sick, 0, sizeof(ns->gpu_sick));
    if (nd->away == AWAY_GPU_SICK && !ns->interruption_deadline_ms && nd->state == NODE_UP &&
        ns->liveness == NODE_READY)
        cluster_set_schedulable(s->c, node, true);
    server_kick(s);
}

bool gpufence_fenced(const Server *s, uint32_t node)
{
    return s->nodes[node].gpu_sick_mask != 0;
}
