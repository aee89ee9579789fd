/* tenancy.c: guarantees, bursts and decayed fair-share usage per team. */
#include "core/tenancy.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

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
                                  .weight = tm->weight > 0 ? tm->weight : 0};
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
    double decay = 1, gain = dt;
    if (t->half_life_ms > 0) {
        double k = log(2.0) / (double)t->half_life_ms;
        decay = exp(-k * dt);
        gain = (1 - decay) / k;
    }
    for (size_t i = 0; i < t->n_teams; i++)
        t->teams[i].usage = t->teams[i].usage * decay + t->teams[i].held_units * gain;
    t->last_ms = now_ms;
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

bool tenancy_within_burst(const Tenancy *t, uint32_t slot, double units)
{
    const TeamState *ts = &t->teams[slot];
    double limit = ts->burst_units > ts->guaranteed_units ? ts->burst_units : ts->guaranteed_units;
    return ts->held_units + units <= limit + 1e-6;
}
