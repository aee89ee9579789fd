/* simpolicy.c: what --policy names: "PLACEMENT[+ORDER]". A bare queue order
 * ("fifo", "tiresias") places with gpuorch; a bare placement policy comes with its own
 * scheduler: gpuorch with priority (classes, fair share, quotas, backfill,
 * quota-aware preemption), k8s-default with kube (priority then age, priority
 * preemption), the others FIFO. */
#include "sim/sim.h"
#include "util/macro.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

static const char *const order_names[] = {"fifo", "tiresias", "priority", "kube"};

const char *queue_order_name(QueueOrder o)
{
    return (unsigned)o < ARRAY_SIZE(order_names) ? order_names[o] : "?";
}

static int order_from_name(const char *s)
{
    for (size_t i = 0; i < ARRAY_SIZE(order_names); i++)
        if (!strcasecmp(s, order_names[i]))
            return (int)i;
    return -1;
}

void sched_config_for(QueueOrder o, SchedConfig *ret)
{
    SchedConfig c;
    sched_config_gpuorch(&c);
    switch (o) {
    case ORDER_PRIORITY:
        break;
    case ORDER_FIFO:
        /* arrival order, nothing preempted, no quotas, no reservations */
        c.order = SCHED_ORDER_FIFO;
        c.preempt = SCHED_PREEMPT_NONE;
        c.fair_share = c.quotas = c.backfill = c.drain = c.consolidate = false;
        break;
    case ORDER_TIRESIAS:
        c.order = SCHED_ORDER_TIRESIAS;
        c.preempt = SCHED_PREEMPT_TIRESIAS;
        c.fair_share = c.quotas = c.backfill = c.drain = c.consolidate = false;
        break;
    case ORDER_KUBE:
        /* kube-scheduler: priority then age; preempt any lower priority; no quotas */
        c.order = SCHED_ORDER_PRIORITY;
        c.preempt = SCHED_PREEMPT_PRIORITY;
        c.fair_share = c.quotas = c.backfill = c.drain = c.consolidate = false;
        break;
    }
    *ret = c;
}

int sim_policy_parse(const char *s, SimPolicy *ret, Buf *err)
{
    char place[64], order[64] = "";
    const char *plus = strchr(s, '+');
    size_t n = plus ? (size_t)(plus - s) : strlen(s);
    if (n >= sizeof(place) || (plus && strlen(plus + 1) >= sizeof(order))) {
        buf_printf(err, "policy name too long: '%s'", s);
        return -1;
    }
    memcpy(place, s, n);
    place[n] = '\0';
    if (plus)
        strcpy(order, plus + 1);
    SimPolicy p = {0};
    int o = order_from_name(place);
    if (!plus && o >= 0) {
        /* "tiresias": a queue order alone */
        p.place = policy_find("gpuorch");
        p.order = (QueueOrder)o;
    } else {
        p.place = policy_find(place);
        if (!p.place) {
            buf_printf(err, "unknown placement policy '%s' (see 'gpuorch policies')", place);
            return -1;
        }
        if (plus) {
            o = order_from_name(order);
            if (o < 0) {
                buf_printf(err, "unknown queue order '%s' (fifo, tiresias, priority or kube)",
                           order);
                return -1;
            }
            p.order = (QueueOrder)o;
        } else {
            /* each placement with the scheduler it comes with */
            p.order = !strcmp(p.place->name, "gpuorch")       ? ORDER_PRIORITY
                      : !strcmp(p.place->name, "k8s-default") ? ORDER_KUBE
                                                              : ORDER_FIFO;
        }
    }
    sched_config_for(p.order, &p.sched);
    snprintf(p.name, sizeof(p.name), "%s", s);
    *ret = p;
    return 0;
}

void run_result_free(RunResult *r)
{
    for (size_t i = 0; i < r->time.n_teams; i++)
        free(r->time.by_team[i].name);
    free(r->time.by_team);
    free(r->time.timeline);
    buf_free(&r->events);
    *r = (RunResult){0};
}
