/* evq.c: binary heap of simulator events. */
#include "sim/evq.h"

#include "util/macro.h"

#include <errno.h>

void evq_init(EventQueue *q)
{
    *q = (EventQueue){0};
}

void evq_free(EventQueue *q)
{
    free(q->h);
    *q = (EventQueue){0};
}

static int before(const Event *a, const Event *b)
{
    if (a->t_ms != b->t_ms)
        return a->t_ms < b->t_ms;
    if (a->kind != b->kind)
        return a->kind < b->kind;
    return a->seq < b->seq;
}

int evq_push(EventQueue *q, int64_t t_ms, EventKind kind, uint32_t job, uint64_t epoch)
{
    if (GROW(q->h, q->cap, q->n + 1) < 0)
        return -ENOMEM;
    Event e = {.t_ms = t_ms, .kind = kind, .job = job, .seq = q->next_seq++, .epoch = epoch};
    size_t i = q->n++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!before(&e, &q->h[parent]))
            break;
        q->h[i] = q->h[parent];
        i = parent;
    }
    q->h[i] = e;
    return 0;
}

const Event *evq_peek(const EventQueue *q)
{
    return q->n ? &q->h[0] : NULL;
}

int evq_pop(EventQueue *q, Event *ret)
{
    if (!q->n)
        return 0;
    *ret = q->h[0];
    Event last = q->h[--q->n];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        const Event *best = &last;
        if (l < q->n && before(&q->h[l], best)) {
            m = l;
            best = &q->h[l];
        }
        if (r < q->n && before(&q->h[r], best))
            m = r;
        if (m == i)
            break;
        q->h[i] = q->h[m];
        i = m;
    }
    if (q->n)
        q->h[i] = last;
    return 1;
}
