/* evlog.c: JSON lines for the simulator's event log. */
#include "sim/evlog.h"

#include "spec/render.h"

#include <errno.h>

static void head(EvLog *ev, int64_t t_ms, const char *type, const char *job)
{
    buf_printf(ev->out, "{\"t_ms\": %lld, \"type\": \"%s\", \"job\": ", (long long)t_ms, type);
    buf_json_str(ev->out, job);
}

static void tail(EvLog *ev)
{
    buf_puts(ev->out, ", \"policy\": ");
    buf_json_str(ev->out, ev->policy ? ev->policy : "");
    buf_printf(ev->out, ", \"seed\": %llu}\n", (unsigned long long)ev->seed);
}

void evlog_job(EvLog *ev, int64_t t_ms, const char *type, const char *job, const char *reason)
{
    if (!ev->on)
        return;
    head(ev, t_ms, type, job);
    if (reason) {
        buf_puts(ev->out, ", \"reason\": ");
        buf_json_str(ev->out, reason);
    }
    tail(ev);
}

void evlog_reconfig(EvLog *ev, const Cluster *c, int64_t t_ms, const char *job, const Placement *pl)
{
    if (!ev->on)
        return;
    for (size_t i = 0; i < pl->n_changes; i++) {
        const MigChange *ch = &pl->changes[i];
        const Node *n = &c->nodes[ch->node];
        head(ev, t_ms, "reconfigure", job);
        buf_puts(ev->out, ", \"node\": ");
        buf_json_str(ev->out, n->name);
        buf_printf(ev->out, ", \"gpu\": %u, \"layout\": ", ch->index);
        render_json_layout(ev->out, node_model(c, n), &ch->after);
        tail(ev);
    }
}

void evlog_workers(EvLog *ev, const Cluster *c, int64_t t_ms, const char *type, const char *job,
                   const Placement *pl)
{
    if (!ev->on)
        return;
    for (size_t w = 0; w < pl->n_workers; w++) {
        head(ev, t_ms, type, job);
        buf_printf(ev->out, ", \"worker\": %zu, \"node\": ", w);
        buf_json_str(ev->out, c->nodes[pl->workers[w].node].name);
        buf_puts(ev->out, ", \"gpus\": ");
        render_json_grants(ev->out, c, &pl->workers[w]);
        tail(ev);
    }
}

void evlog_placement(EvLog *ev, const Cluster *c, int64_t t_ms, const char *job,
                     const Placement *pl, const Buf *why)
{
    if (!ev->on)
        return;
    if (!pl) {
        evlog_job(ev, t_ms, "fail", job, buf_str(why));
        return;
    }
    evlog_reconfig(ev, c, t_ms, job, pl);
    evlog_workers(ev, c, t_ms, "start", job, pl);
}

void evlog_node(EvLog *ev, const Cluster *c, int64_t t_ms, const char *type, uint32_t node)
{
    if (!ev->on)
        return;
    const Node *n = &c->nodes[node];
    buf_printf(ev->out, "{\"t_ms\": %lld, \"type\": \"%s\", \"node\": ", (long long)t_ms, type);
    buf_json_str(ev->out, n->name);
    buf_puts(ev->out, ", \"pool\": ");
    buf_json_str(ev->out, c->pools[n->pool].name);
    tail(ev);
}

int evlog_error(const EvLog *ev)
{
    return ev->on && ev->out->oom ? -ENOMEM : 0;
}
