/* tenancy.c: guarantees, bursts and decayed fair-share usage per team. */
#include "core/tenancy.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int tenancy_init(Tenancy *t, const Cluster *c, int64_t half_life_ms)
{
    *t = (Tenancy){
        .n_teams = c->n_teams + 1, .quotas = c->n_teams > 0, .half_life_ms = half_life_ms};
    t->teams = calloc(t->n_teams, sizeof(*t->teams));
    if (!t->teams)
        return -ENOMEM;
    double cluster_units = (double)c->n_gpus * GPU_UNITS;
    for (size_t i = 0; i < c->n_teams; i++) {
        const Team *tm = &c->teams[i];
        t->teams[i] = (TeamState){.guaranteed_units = tm->guaranteed_gpus * GPU_UNITS,
                                  .burst_units = tm->burst_gpus * GPU_UNITS,
                                  .weight = tm->weight > 0 ? tm->weight : 0,
                                  .budget_gpu_hours = tm->budget_gpu_hours};
    }
    /* work of no known team: nothing guaranteed, may borrow everything */
    t->teams[c->n_teams] = (TeamState){.burst_units = cluster_units, .weight = 1};
    if (!t->quotas)
        t->teams[c->n_teams].guaranteed_units = cluster_units;
    return 0;
}

void tenancy_free(Tenancy *t)
{
    free(t->teams);
    *t = (Tenancy){0};
}

uint32_t tenancy_slot(const Tenancy *t, uint32_t team)
{
    return team < t->n_teams - 1 ? team : (uint32_t)(t->n_teams - 1);
}

void tenancy_advance(Tenancy *t, int64_t now_ms)
{
    if (now_ms <= t->last_ms) {
        t->last_ms = now_ms > t->last_ms ? now_ms : t->last_ms;
        return;
    }
    double dt = (double)(now_ms - t->last_ms);
    /* usage(t+dt) = usage 2^(-dt/h) + held x integral of the decay over dt */
    double decay = t->half_life_ms > 0 ? exp(-log(2.0) / (double)t->half_life_ms * dt) : 1;
    double gain = tenancy_decayed(1, t->last_ms, now_ms, now_ms, t->half_life_ms);
    for (size_t i = 0; i < t->n_teams; i++)
        t->teams[i].usage = t->teams[i].usage * decay + t->teams[i].held_units * gain;
    t->last_ms = now_ms;
}

double tenancy_decayed(double units, int64_t from_ms, int64_t to_ms, int64_t now_ms,
                       int64_t half_life_ms)
{
    if (to_ms > now_ms)
        to_ms = now_ms;
    if (to_ms <= from_ms)
        return 0;
    if (half_life_ms <= 0)
        return units * (double)(to_ms - from_ms);
    double k = log(2.0) / (double)half_life_ms;
    return units * (exp(-k * (double)(now_ms - to_ms)) - exp(-k * (double)(now_ms - from_ms))) / k;
}

double tenancy_fair_key(const Tenancy *t, uint32_t slot)
{
    double usage = 0, weight = 0;
    for (size_t i = 0; i < t->n_teams; i++) {
        usage += t->teams[i].usage;
        weight += t->teams[i].weight;
    }
    const TeamState *ts = &t->teams[slot];
    if (ts->weight <= 0)
        return INFINITY; /* no share: after everyone else of its class */
    double share = ts->weight / weight;
    double used = usage > 0 ? ts->usage / usage : 0;
    return used / share;
}

bool tenancy_within_guarantee(const Tenancy *t, uint32_t slot, double units)
{
    const TeamState *ts = &t->teams[slot];
    return ts->guaranteed_held + units <= ts->guaranteed_units + 1e-6;
}

double tenancy_over_burst(const Tenancy *t, uint32_t slot, double units)
{
    const TeamState *ts = &t->teams[slot];
    double limit = ts->burst_units > ts->guaranteed_units ? ts->burst_units : ts->guaranteed_units;
    return ts->held_units + units - limit;
}

bool tenancy_within_burst(const Tenancy *t, uint32_t slot, double units)
{
    return tenancy_over_burst(t, slot, units) <= 1e-6;
}

/* Append text to the reason, cut at its end. */
static size_t put_text(char *out, size_t at, const char *text)
{
    size_t n = strlen(text);
    if (at + n >= TENANCY_REASON_LEN)
        n = TENANCY_REASON_LEN - 1 - at;
    memcpy(out + at, text, n);
    out[at + n] = '\0';
    return at + n;
}

/* Append GPU-hours as a person reads them (no stdio in the core): about three
 * significant digits, at most six decimals, trailing zeros dropped (12.3, 0.00056). */
static size_t put_hours(char *out, size_t at, double v)
{
    int decimals = v >= 100 ? 0 : v >= 10 ? 1 : v >= 1 ? 2 : 6;
    double scale = 1;
    for (int i = 0; i < decimals; i++)
        scale *= 10;
    uint64_t x = v > 0 && v < 1e15 ? (uint64_t)llround(v * scale) : 0;
    char digits[32];
    size_t n = 0;
    do {
        digits[n++] = (char)('0' + x % 10);
        x /= 10;
    } while (x || (int)n <= decimals);
    /* digits holds the number backwards: [0, decimals) are the decimals, and the
     * zeros at their low end are trailing zeros */
    int zeros = 0;
    while (zeros < decimals && digits[zeros] == '0')
        zeros++;
    char text[40];
    size_t m = 0;
    for (size_t i = n; i-- > (size_t)decimals;)
        text[m++] = digits[i];
    if (zeros < decimals)
        text[m++] = '.';
    for (int i = decimals - 1; i >= zeros; i--)
        text[m++] = digits[i];
    text[m] = '\0';
    return put_text(out, at, text);
}

void tenancy_set_budget(Tenancy *t, uint32_t slot, const char *team, int64_t used_micro_hours,
                        double budget_gpu_hours)
{
    TeamState *ts = &t->teams[slot];
    ts->month_micro_hours = used_micro_hours;
    ts->budget_gpu_hours = budget_gpu_hours > 0 ? budget_gpu_hours : 0;
    ts->over_budget =
        ts->budget_gpu_hours > 0 && (double)used_micro_hours >= ts->budget_gpu_hours * 1e6;
    ts->budget_reason[0] = '\0';
    if (!ts->over_budget)
        return;
    size_t at = put_text(ts->budget_reason, 0, "team ");
    at = put_text(ts->budget_reason, at, team ? team : "");
    at = put_text(ts->budget_reason, at, " used its GPU-hour budget for this month (");
    at = put_hours(ts->budget_reason, at, (double)used_micro_hours / 1e6);
    at = put_text(ts->budget_reason, at, " of ");
    at = put_hours(ts->budget_reason, at, ts->budget_gpu_hours);
    put_text(ts->budget_reason, at, ")");
}
