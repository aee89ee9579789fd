/* metering.c: the metering rule shared by chargeback (api_usage.c) and budgets, the idle
 * left in each span of a node's counted capacity, and the teams' month-to-date GPU-hours
 * behind their budgets.
 *
 * A team's month is counted once from the store (at the first cycle, and again when a
 * month begins), then kept current cheaply: each run segment that closes is added as
 * it is written, and at each cycle the running jobs add what they held this month so
 * far. The counts live in the scheduler's TeamState, where the cycle reads over_budget.
 * The teams' decayed fair-share usage is rebuilt from the same segments when the server
 * starts. Everything here runs under the server's lock. */
#include "server/metering.h"

#include "util/log.h"
#include "util/macro.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int64_t metering_units(double gpu_equivalents)
{
    return gpu_equivalents > 0 ? llround(gpu_equivalents * GPU_UNITS) : 0;
}

/* Rounded down; q is at most a window's capacity, which needs more than 64 bits only
 * before the division (units x ms x price). */
static int64_t floor_div(__int128 q, int64_t d)
{
    return q > 0 ? (int64_t)(q / d) : 0;
}

Meter metering_of(int64_t units, int64_t ms, int64_t price_micro_usd)
{
    __int128 unit_ms = (__int128)units * (ms > 0 ? ms : 0);
    return (Meter){
        .micro_hours = floor_div(unit_ms, METERING_UNIT_MS_PER_MICRO_HOUR),
        .cost_micro_usd = floor_div(unit_ms * (price_micro_usd > 0 ? price_micro_usd : 0),
                                    METERING_UNIT_MS_PER_MICRO_HOUR * INT64_C(1000000)),
    };
}

Meter metering_capacity(int64_t gpus, int64_t ms, int64_t price_micro_usd)
{
    return metering_of(gpus * GPU_UNITS, ms, price_micro_usd);
}

/* ---- idle showback ---- */

static int span_cmp(const void *a, const void *b)
{
    const MeterSpan *x = a, *y = b;
    int c = strcmp(x->node, y->node);
    if (c)
        return c;
    return x->start_ms < y->start_ms ? -1 : x->start_ms > y->start_ms;
}

void metering_spans_sort(MeterSpan *spans, size_t n)
{
    if (n)
        qsort(spans, n, sizeof(*spans), span_cmp);
}

void metering_spans_alloc(MeterSpan *spans, size_t n, const char *node, int64_t units,
                          int64_t start_ms, int64_t end_ms, int64_t price_micro_usd)
{
    if (!node || end_ms <= start_ms)
        return;
    /* the first span of the node that ends after the allocation starts: a node's spans
     * do not overlap, so in start order their ends are in order too */
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(spans[mid].node, node);
        if (c < 0 || (c == 0 && spans[mid].end_ms <= start_ms))
            lo = mid + 1;
        else
            hi = mid;
    }
    for (size_t i = lo; i < n && !strcmp(spans[i].node, node) && spans[i].start_ms < end_ms; i++) {
        Meter m =
            metering_of(units, MIN(end_ms, spans[i].end_ms) - MAX(start_ms, spans[i].start_ms),
                        price_micro_usd);
        spans[i].alloc.micro_hours += m.micro_hours;
        spans[i].alloc.cost_micro_usd += m.cost_micro_usd;
    }
}

Meter metering_span_idle(const MeterSpan *sp)
{
    Meter cap = metering_capacity(sp->gpus, sp->end_ms - sp->start_ms, sp->price_micro_usd);
    return (Meter){MAX(cap.micro_hours - sp->alloc.micro_hours, (int64_t)0),
                   MAX(cap.cost_micro_usd - sp->alloc.cost_micro_usd, (int64_t)0)};
}

int64_t metering_month_start_ms(int64_t now_ms)
{
    time_t t = (time_t)(now_ms / 1000);
    struct tm tm;
    if (!gmtime_r(&t, &tm))
        return 0;
    tm.tm_mday = 1;
    tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
    return (int64_t)timegm(&tm) * 1000;
}

/* ---- budgets ---- */

static int team_of(const Server *s, const char *name)
{
    return name && *name ? cluster_find_team(s->c, name) : -1;
}

/* What a segment of [start_ms, end_ms) counts in the month being counted. */
static int64_t month_part(const Server *s, int64_t units, int64_t start_ms, int64_t end_ms)
{
    int64_t from = MAX(start_ms, s->sched.ten.month_start_ms);
    return end_ms > from ? metering_of(units, end_ms - from, 0).micro_hours : 0;
}

void metering_segment_closed(Server *s, const StoreUsage *u)
{
    /* before the month was read from the store, the store will have it */
    if (!s->sched.ten.month_start_ms)
        return;
    int t = team_of(s, u->team);
    if (t >= 0)
        s->sched.ten.teams[t].month_ended_micro_hours +=
            month_part(s, metering_units(u->gpu_equivalents), u->start_ms, u->end_ms);
}

static int load_segment(void *arg, const StoreUsage *u)
{
    Server *s = arg;
    int t = team_of(s, u->team);
    if (t >= 0)
        s->sched.ten.teams[t].month_ended_micro_hours +=
            month_part(s, metering_units(u->gpu_equivalents), u->start_ms, u->end_ms);
    return 0;
}

static int load_budget(void *arg, const char *name, double budget_gpu_hours)
{
    Server *s = arg;
    int t = team_of(s, name);
    if (t >= 0)
        s->c->teams[t].budget_gpu_hours = budget_gpu_hours;
    return 0;
}

/* Count the month from the store: every run segment that closed in it. The first time,
 * the budgets set through the API too. */
static int count_month(Server *s, int64_t month_start_ms)
{
    Tenancy *ten = &s->sched.ten;
    bool first = !ten->month_start_ms;
    int r = first ? store_team_budgets_load(s->store, load_budget, s) : 0;
    if (r < 0)
        return r;
    for (size_t t = 0; t < s->c->n_teams; t++)
        ten->teams[t].month_ended_micro_hours = 0;
    ten->month_start_ms = month_start_ms;
    r = store_usage_query(s->store, month_start_ms, INT64_MAX, load_segment, s);
    if (r < 0)
        ten->month_start_ms = 0; /* not counted: again at the next cycle */
    return r;
}

void metering_cycle(Server *s, int64_t now_ms)
{
    Tenancy *ten = &s->sched.ten;
    int64_t month = metering_month_start_ms(now_ms);
    if (ten->month_start_ms != month) {
        int r = count_month(s, month);
        if (r < 0) {
            log_error("event=budget_count_failed error=%d reason=%s", r,
                      r == -ENOMEM ? "out_of_memory" : "store_read_failed");
            return; /* the teams keep their last marks until the count succeeds */
        }
    }
    for (size_t t = 0; t < s->c->n_teams; t++)
        ten->teams[t].month_micro_hours = ten->teams[t].month_ended_micro_hours;
    for (size_t k = 0; k < s->n_holding; k++) {
        const ServerJob *j = s->holding[k];
        if (j->sj.team >= s->c->n_teams)
            continue;
        for (size_t w = 0; w < j->sj.pl.n_workers; w++)
            ten->teams[j->sj.team].month_micro_hours +=
                month_part(s, worker_units(s->c, &j->sj.pl.workers[w]), j->pl_from_ms, now_ms);
        for (size_t w = 0; j->life.move != LIFE_MOVE_NONE && w < j->sj.moved_from.n_workers; w++)
            ten->teams[j->sj.team].month_micro_hours += month_part(
                s, worker_units(s->c, &j->sj.moved_from.workers[w]), j->moved_from_ms, now_ms);
    }
    for (size_t t = 0; t < s->c->n_teams; t++)
        tenancy_set_budget(ten, (uint32_t)t, s->c->teams[t].name, ten->teams[t].month_micro_hours,
                           s->c->teams[t].budget_gpu_hours);
}

typedef struct BudgetRow {
    const char *team;
    double gpu_hours;
} BudgetRow;

static int write_budget(Store *st, void *arg)
{
    const BudgetRow *b = arg;
    return store_team_budget_set(st, b->team, b->gpu_hours);
}

int metering_set_budget(Server *s, const char *team, double budget_gpu_hours, Buf *err)
{
    server_lock(s);
    int t = cluster_find_team(s->c, team);
    int status = 200;
    if (t < 0) {
        buf_printf(err, "no team '%s' (teams are declared in the cluster file)", team);
        status = 404;
    } else if (!(budget_gpu_hours >= 0) || !isfinite(budget_gpu_hours) || budget_gpu_hours > 1e12) {
        buf_printf(err, "a budget is a number of GPU-hours from 0 (none) to 1e12");
        status = 400;
    } else if (server_write_released(s, write_budget, &(BudgetRow){team, budget_gpu_hours}) < 0) {
        buf_printf(err, "the store failed; the change was not saved");
        status = 500;
    } else {
        s->c->teams[t].budget_gpu_hours = budget_gpu_hours;
        TeamState *ts = &s->sched.ten.teams[t];
        tenancy_set_budget(&s->sched.ten, (uint32_t)t, team, ts->month_micro_hours,
                           budget_gpu_hours);
        server_kick(s);
    }
    pthread_mutex_unlock(&s->lock);
    return status;
}

/* ---- fair share ---- */

/* Half-lives of history that still count: 2^-30 of a segment is below anything the
 * ordering could tell apart. */
#define FAIR_SHARE_HALF_LIVES 30

typedef struct Restore {
    Server *s;
    int64_t now_ms;
} Restore;

static int restore_segment(void *arg, const StoreUsage *u)
{
    Restore *r = arg;
    Tenancy *ten = &r->s->sched.ten;
    int t = team_of(r->s, u->team);
    uint32_t slot = tenancy_slot(ten, t >= 0 ? (uint32_t)t : TEAM_NONE);
    ten->teams[slot].usage += tenancy_decayed((double)metering_units(u->gpu_equivalents),
                                              u->start_ms, u->end_ms, r->now_ms, ten->half_life_ms);
    return 0;
}

int metering_restore_fair_share(Server *s, int64_t now_ms)
{
    Tenancy *ten = &s->sched.ten;
    for (size_t i = 0; i < ten->n_teams; i++)
        ten->teams[i].usage = 0;
    int64_t from = ten->half_life_ms > 0
                       ? MAX((int64_t)0, now_ms - FAIR_SHARE_HALF_LIVES * ten->half_life_ms)
                       : 0;
    Restore r = {s, now_ms};
    int rc = store_usage_query(s->store, from, now_ms, restore_segment, &r);
    if (rc < 0)
        return rc;
    for (size_t k = 0; k < s->n_holding; k++) {
        const ServerJob *j = s->holding[k];
        TeamState *ts = &ten->teams[tenancy_slot(ten, j->sj.team)];
        for (size_t w = 0; w < j->sj.pl.n_workers; w++)
            ts->usage += tenancy_decayed((double)worker_units(s->c, &j->sj.pl.workers[w]),
                                         j->sj.run_start_ms, now_ms, now_ms, ten->half_life_ms);
    }
    ten->last_ms = now_ms;
    return 0;
}
