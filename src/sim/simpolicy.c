/* simpolicy.c: what --policy names: "PLACEMENT[+ORDER]". A bare queue order
 * ("fifo", "tiresias") places with gpuorch; a bare placement policy queues FIFO,
 * except gpuorch, which orders by priority class. */
#include "sim/sim.h"
#include "util/macro.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

static const char *const order_names[] = {"fifo", "tiresias", "priority"};

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
                buf_printf(err, "unknown queue order '%s' (fifo, tiresias or priority)", order);
                return -1;
            }
            p.order = (QueueOrder)o;
        } else {
            p.order = !strcmp(p.place->name, "gpuorch") ? ORDER_PRIORITY : ORDER_FIFO;
        }
    }
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
