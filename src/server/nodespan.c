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

void nodespan_update(Server *s, uint32_t node, int64_t now_ms)
{
    (void)now_ms; /* an edge is the moment it is written (nodespan_flush) */
    if (!s->store || !s->nodes || s->nodes[node].span_queued)
        return;
    if (!nodespan_basis(s, node) == !s->nodes[node].span_id)
        return; /* counted as it should be */
    if (GROW(s->span_batched, s->span_batched_cap, s->n_span_batched + 1) < 0)
        return; /* the tick looks at every node again */
    s->span_batched[s->n_span_batched++] = node;
    s->nodes[node].span_queued = true;
    server_kick(s);
}

/* What one flush writes: the spans to open and the ids to close. */
typedef struct SpanWrite {
    StoreNodeSpan *open;
    uint32_t *open_nodes;
    int64_t *open_ids;
    size_t n_open;
    int64_t *close;
    uint32_t *close_nodes;
    size_t n_close;
    int64_t now_ms;
    int r_open, r_close;
} SpanWrite;

static int write_spans(Store *st, void *arg)
{
    SpanWrite *w = arg;
    w->r_open = w->n_open ? store_node_spans_open(st, w->open, w->n_open, w->open_ids) : 0;
    w->r_close = w->n_close ? store_node_spans_end(st, w->close, w->n_close, w->now_ms, true) : 0;
    return w->r_open < 0 ? w->r_open : w->r_close;
}

void nodespan_flush(Server *s)
{
    size_t n = s->n_span_batched;
    if (!n)
        return;
    SpanWrite w = {.open = calloc(n, sizeof(*w.open)),
                   .open_nodes = calloc(n, sizeof(*w.open_nodes)),
                   .open_ids = calloc(n, sizeof(*w.open_ids)),
                   .close = calloc(n, sizeof(*w.close)),
                   .close_nodes = calloc(n, sizeof(*w.close_nodes)),
                   /* a span's edges are the moments they become durable, never earlier:
                    * a report of a window that has ended then never changes when a late
                    * edge is written into it */
                   .now_ms = server_now_ms()};
    bool oom = !w.open || !w.open_nodes || !w.open_ids || !w.close || !w.close_nodes;
    for (size_t i = 0; i < n; i++) {
        uint32_t node = s->span_batched[i];
        s->nodes[node].span_queued = false;
        const char *basis = nodespan_basis(s, node);
        if (oom)
            continue;
        if (basis && !s->nodes[node].span_id) {
            w.open_nodes[w.n_open] = node;
            w.open[w.n_open++] = span_of(s, node, basis, w.now_ms);
        } else if (!basis && s->nodes[node].span_id) {
            w.close_nodes[w.n_close] = node;
            w.close[w.n_close++] = s->nodes[node].span_id;
        }
    }
    s->n_span_batched = 0;
    if (oom) {
        log_error("event=node_spans_skipped reason=out_of_memory");
    } else if (w.n_open || w.n_close) {
        /* written with the lock released; only this thread opens and closes spans, so
         * what it listed is still its to record (a node that changed meanwhile is queued
         * again and set right by the next flush) */
        server_write_released(s, write_spans, &w);
        if (w.r_open < 0)
            log_error("event=store_write_failed what=node_spans nodes=%zu error=%d", w.n_open,
                      w.r_open);
        for (size_t i = 0; w.r_open == 0 && i < w.n_open; i++)
            span_counted(s, w.open_nodes[i], &w.open[i], w.open_ids[i]);
        if (w.r_close < 0)
            log_error("event=store_write_failed what=node_spans closing=%zu error=%d", w.n_close,
                      w.r_close);
        for (size_t i = 0; w.r_close == 0 && i < w.n_close; i++) {
            /* kept on a failure: the store would show it still going, so the tick closes it */
            s->nodes[w.close_nodes[i]].span_id = 0;
            log_info("event=node_uncounted node=%s span=%lld until_ms=%lld",
                     s->c->nodes[w.close_nodes[i]].name, (long long)w.close[i],
                     (long long)w.now_ms);
        }
    }
    free(w.open);
    free(w.open_nodes);
    free(w.open_ids);
    free(w.close);
    free(w.close_nodes);
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

typedef struct SpanEnds {
    int64_t *ids;
    size_t n;
    int64_t now_ms;
} SpanEnds;

/* Moving an open span's end forward: a span closed meanwhile is left as it is (store.h). */
static int write_ends(Store *st, void *arg)
{
    const SpanEnds *e = arg;
    return store_node_spans_end(st, e->ids, e->n, e->now_ms, false);
}

void nodespan_tick(Server *s, int64_t now_ms)
{
    int64_t mono = server_mono_ms();
    if (mono - s->span_tick_mono_ms < NODESPAN_TICK_MS)
        return;
    s->span_tick_mono_ms = mono;
    for (size_t i = 0; i < s->c->n_nodes; i++)
        nodespan_update(s, (uint32_t)i, now_ms);
    nodespan_flush(s);
    SpanEnds e = {.now_ms = now_ms};
    e.ids = open_ids(s, &e.n);
    int r = e.n ? server_write_released(s, write_ends, &e) : 0;
    if (r < 0)
        log_error("event=store_write_failed what=node_spans open=%zu error=%d", e.n, r);
    free(e.ids);
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
