/* nodespan.c: the spans of time nodes count as capacity (nodespan.h): the rule per tier,
 * and keeping the store's spans in step with the nodes. Each node has at most one open
 * span (NodeState.span_id); nodespan_update is called where a node's liveness or
 * presence changes, and the tick catches any change made elsewhere within one tick. */
#include "server/nodespan.h"
#include "util/macro.h"

#include "util/log.h"

#include <errno.h>
#include <stdlib.h>

/* On-demand and spot nodes the server asks the cloud for are billed from the ask. */
static bool billed_from_ask(const Server *s, const Pool *p)
{
    return (p->tier == TIER_ON_DEMAND || p->tier == TIER_SPOT) && s->autoscaling &&
           pool_autoscaled(p);
}

const char *nodespan_basis(const Server *s, uint32_t node)
{
    const Node *n = &s->c->nodes[node];
    const Pool *p = &s->c->pools[n->pool];
    if (!node_present(n))
        return NULL;
    bool asked = billed_from_ask(s, p);
    if (asked && n->state == NODE_STARTING)
        return "present";
    if (s->nodes[node].liveness == NODE_READY)
        return asked ? "present" : "ready";
    return NULL;
}

static StoreNodeSpan span_of(const Server *s, uint32_t node, const char *basis, int64_t now_ms)
{
    const Node *n = &s->c->nodes[node];
    const Pool *p = &s->c->pools[n->pool];
    return (StoreNodeSpan){.node = n->name,
                           .pool = p->name,
                           .model = node_model(s->c, n)->name,
                           .tier = tier_name(p->tier),
                           .basis = basis,
                           .gpus = n->n_gpus,
                           .price_micro_usd = p->price_micro_usd > 0 ? p->price_micro_usd : 0,
                           .start_ms = now_ms,
                           .end_ms = now_ms};
}

static void span_counted(Server *s, uint32_t node, const StoreNodeSpan *sp, int64_t id)
{
    s->nodes[node].span_id = id;
    log_info("event=node_counted node=%s pool=%s tier=%s basis=%s gpus=%u span=%lld since_ms=%lld",
             sp->node, sp->pool, sp->tier, sp->basis, sp->gpus, (long long)id,
             (long long)sp->start_ms);
}

static void span_open(Server *s, uint32_t node, const char *basis, int64_t now_ms)
{
    if (s->span_batch) {
        if (!s->nodes[node].span_queued &&
            GROW(s->span_batched, s->span_batched_cap, s->n_span_batched + 1) == 0) {
            s->span_batched[s->n_span_batched++] = node;
            s->nodes[node].span_queued = true;
        }
        return;
    }
    StoreNodeSpan sp = span_of(s, node, basis, now_ms);
    int64_t id = 0;
    int r = store_node_span_open(s->store, &sp, &id);
    if (r < 0) {
        log_error("event=store_write_failed what=node_span node=%s error=%d", sp.node, r);
        return;
    }
    span_counted(s, node, &sp, id);
}

void nodespan_batch_begin(Server *s)
{
    s->span_batch = true;
}

void nodespan_batch_end(Server *s, int64_t now_ms)
{
    s->span_batch = false;
    now_ms = MAX(now_ms, server_now_ms());
    size_t n = 0;
    StoreNodeSpan *sp = calloc(s->n_span_batched ? s->n_span_batched : 1, sizeof(*sp));
    uint32_t *nodes = calloc(s->n_span_batched ? s->n_span_batched : 1, sizeof(*nodes));
    int64_t *ids = calloc(s->n_span_batched ? s->n_span_batched : 1, sizeof(*ids));
    for (size_t i = 0; sp && nodes && ids && i < s->n_span_batched; i++) {
        uint32_t node = s->span_batched[i];
        s->nodes[node].span_queued = false;
        const char *basis = nodespan_basis(s, node); /* it may have changed since */
        if (basis && !s->nodes[node].span_id) {
            nodes[n] = node;
            sp[n++] = span_of(s, node, basis, now_ms);
        }
    }
    int r = sp && nodes && ids ? store_node_spans_open(s->store, sp, n, ids) : -ENOMEM;
    if (r < 0)
        log_error("event=store_write_failed what=node_spans nodes=%zu error=%d", n, r);
    for (size_t i = 0; r == 0 && i < n; i++)
        span_counted(s, nodes[i], &sp[i], ids[i]);
    /* on a failure the tick opens them one by one */
    for (size_t i = 0; i < s->n_span_batched; i++)
        s->nodes[s->span_batched[i]].span_queued = false;
    s->n_span_batched = 0;
    free(sp);
    free(nodes);
    free(ids);
}

static void span_close(Server *s, uint32_t node, int64_t now_ms)
{
    NodeState *ns = &s->nodes[node];
    int64_t id = ns->span_id;
    int r = store_node_spans_end(s->store, &id, 1, now_ms, true);
    if (r < 0) {
        /* kept: the store would show it still going, so the next tick closes it */
        log_error("event=store_write_failed what=node_span node=%s span=%lld error=%d",
                  s->c->nodes[node].name, (long long)id, r);
        return;
    }
    ns->span_id = 0;
    log_info("event=node_uncounted node=%s span=%lld until_ms=%lld", s->c->nodes[node].name,
             (long long)id, (long long)now_ms);
}

void nodespan_update(Server *s, uint32_t node, int64_t now_ms)
{
    if (!s->store || !s->nodes)
        return;
    /* a span's edges are the moments they become durable, never earlier (a caller's
     * now_ms may be from before it waited for the lock): a report of a window that has
     * ended then never changes when a late edge is written into it */
    now_ms = MAX(now_ms, server_now_ms());
    const char *basis = nodespan_basis(s, node);
    if (basis && !s->nodes[node].span_id)
        span_open(s, node, basis, now_ms);
    else if (!basis && s->nodes[node].span_id)
        span_close(s, node, now_ms);
}

int nodespan_start(Server *s, Buf *err)
{
    size_t n = 0;
    int r = store_node_spans_close_open(s->store, &n);
    if (r < 0) {
        buf_printf(err, "cannot close the node spans the last server left open");
        return r;
    }
    if (n)
        log_info("event=node_spans_recovered closed=%zu", n);
    s->span_tick_mono_ms = server_mono_ms();
    return 0;
}

/* The ids of the open spans; NULL with *ret_n 0 when there are none (or out of memory,
 * logged: the ends are then moved at the next tick). */
static int64_t *open_ids(Server *s, size_t *ret_n)
{
    size_t n = 0;
    int64_t *ids = malloc((s->c->n_nodes + 1) * sizeof(*ids));
    if (!ids) {
        log_error("event=node_spans_skipped reason=out_of_memory");
        *ret_n = 0;
        return NULL;
    }
    for (size_t i = 0; i < s->c->n_nodes; i++)
        if (s->nodes[i].span_id)
            ids[n++] = s->nodes[i].span_id;
    *ret_n = n;
    return ids;
}

void nodespan_tick(Server *s, int64_t now_ms)
{
    int64_t mono = server_mono_ms();
    if (mono - s->span_tick_mono_ms < NODESPAN_TICK_MS)
        return;
    s->span_tick_mono_ms = mono;
    for (size_t i = 0; i < s->c->n_nodes; i++)
        nodespan_update(s, (uint32_t)i, now_ms);
    size_t n;
    int64_t *ids = open_ids(s, &n);
    int r = store_node_spans_end(s->store, ids, n, now_ms, false);
    if (r < 0)
        log_error("event=store_write_failed what=node_spans open=%zu error=%d", n, r);
    free(ids);
}

void nodespan_stop(Server *s, int64_t now_ms)
{
    if (!s->store || !s->nodes || !s->c)
        return;
    size_t n;
    int64_t *ids = open_ids(s, &n);
    int r = store_node_spans_end(s->store, ids, n, now_ms, true);
    if (r < 0)
        log_error("event=store_write_failed what=node_spans open=%zu error=%d", n, r);
    else if (n)
        log_info("event=node_spans_closed closed=%zu until_ms=%lld", n, (long long)now_ms);
    for (size_t i = 0; i < s->c->n_nodes; i++)
        s->nodes[i].span_id = 0;
    free(ids);
}
