/* reason.c: the words of reason.h. Built in the scheduler's scratch buffer (s->why),
 * which the placer has finished with by the time the cycle decides what to tell a job,
 * so that a cycle allocates nothing per waiting job. */
#include "core/reason.h"

#include "util/macro.h"

#include <math.h>
#include <string.h>

#define NAMED 3 /* jobs or nodes named in one sentence; more are counted */

void reason_set(SchedJob *j, const char *text)
{
    size_t n = strlen(text);
    if (n >= sizeof(j->reason))
        n = sizeof(j->reason) - 1;
    memcpy(j->reason, text, n);
    j->reason[n] = '\0';
}

/* GPU-equivalents as people write them: 8, 2.5, 0.14 (whole numbers printed: a
 * floating-point format costs more than the rest of a cycle's reasons together). */
static void say_gpus(Buf *b, double units)
{
    long long hundredths = llround(units * 100 / GPU_UNITS);
    long long whole = hundredths / 100, frac = hundredths % 100;
    if (!frac)
        buf_printf(b, "%lld", whole);
    else if (frac % 10 == 0)
        buf_printf(b, "%lld.%lld", whole, frac / 10);
    else
        buf_printf(b, "%lld.%02lld", whole, frac);
}

/* "now", "in about 40 s", "in about 12 min", "in about 3.5 h". */
static void say_in(Buf *b, int64_t ms)
{
    if (ms <= 0) {
        buf_puts(b, "now");
        return;
    }
    long long sec = (long long)((ms + 999) / 1000);
    if (sec < 90)
        buf_printf(b, "in about %lld s", sec);
    else if (sec < 90 * 60)
        buf_printf(b, "in about %lld min", (sec + 30) / 60);
    else
        buf_printf(b, "in about %.1f h", (double)sec / 3600);
}

static const char *team_name(const Sched *s, uint32_t slot)
{
    return slot < s->c->n_teams ? s->c->teams[slot].name : "(no team)";
}

void reason_burst(Sched *s, SchedJob *j, uint32_t slot, double units)
{
    const TeamState *ts = &s->ten.teams[slot];
    /* a team's held-back jobs are mostly of a few sizes: one sentence each */
    SchedBurstWhy *memo = &s->burst_why[slot];
    if (memo->cycle == s->cycle && memo->held == ts->held_units && memo->units == units) {
        memcpy(j->reason, memo->text, sizeof(j->reason));
        return;
    }
    Buf *b = &s->why;
    buf_reset(b);
    buf_printf(b, "its team %s is at its burst limit: it holds ", team_name(s, slot));
    say_gpus(b, ts->held_units);
    buf_puts(b, " of ");
    say_gpus(b, fmax(ts->burst_units, ts->guaranteed_units));
    buf_puts(b, " GPU-equivalents and this job needs ");
    say_gpus(b, units);
    buf_puts(b, "; it can start when the team's running work ends or an admin raises its limit");
    reason_set(j, buf_str(b));
    *memo = (SchedBurstWhy){.cycle = s->cycle, .held = ts->held_units, .units = units};
    memcpy(memo->text, j->reason, sizeof(memo->text));
}

void reason_victims(Sched *s, SchedJob *j, const char *what, SchedJob *const *running,
                    size_t n_running, int64_t now_ms)
{
    Buf *b = &s->why;
    buf_reset(b);
    buf_puts(b, what);
    size_t n = 0;
    int64_t until = 0;
    for (size_t i = 0; i < n_running; i++) {
        const SchedJob *v = running[i];
        if (!v->stopping || v->nominated != j->id)
            continue;
        if (n < NAMED)
            buf_printf(b, "%sjob %u", n == 0 ? ": " : ", ", v->id);
        n++;
        until = MAX(until, v->stop_at_ms);
    }
    if (n > NAMED)
        buf_printf(b, " and %zu more", n - NAMED);
    if (n && until > now_ms) {
        buf_printf(b, " (%s after a checkpoint, ", n == 1 ? "it stops" : "they stop");
        say_in(b, until - now_ms);
        buf_puts(b, " at the latest)");
    } else if (n) {
        buf_printf(b, " (%s)", n == 1 ? "it is stopping" : "they are stopping");
    }
    reason_set(j, buf_str(b));
}

/* The nodes of reservation ri, named (at most NAMED, then counted); how many. */
static size_t say_nodes(Sched *s, uint32_t ri, Buf *b)
{
    size_t n = 0;
    for (size_t i = 0; i < s->n_res_nodes; i++) {
        uint32_t node = s->res_nodes[i];
        if (s->node_res[node] != ri)
            continue;
        if (n < NAMED)
            buf_printf(b, "%s%s", n ? ", " : "", s->c->nodes[node].name);
        n++;
    }
    if (n > NAMED)
        buf_printf(b, " and %zu more", n - NAMED);
    return n;
}

void reason_holds(Sched *s, SchedJob *j, uint32_t ri, int64_t now_ms)
{
    const Reservation *r = &s->res[ri];
    Buf *b = &s->why;
    buf_reset(b);
    buf_puts(b, "it holds a reservation: ");
    const char *are = say_nodes(s, ri, b) == 1 ? "is" : "are";
    if (r->stuck) {
        buf_printf(b,
                   " %s kept for it, but work there has run past its estimate; it starts when "
                   "that work ends",
                   are);
    } else if (r->start_ms <= now_ms) {
        buf_printf(b, " %s kept for it and should be free now", are);
    } else {
        buf_printf(b, " %s kept for it and should be free ", are);
        say_in(b, r->start_ms - now_ms);
        buf_puts(b, ", when the work there ends by its estimates");
    }
    reason_set(j, buf_str(b));
}

void reason_kept(Sched *s, SchedJob *j, uint32_t ri, int64_t now_ms)
{
    /* the words depend on the reservation alone (and the cycle's clock) */
    if (s->kept_cycle == s->cycle && s->kept_ri == ri) {
        memcpy(j->reason, s->kept_text, sizeof(j->reason));
        return;
    }
    const Reservation *r = &s->res[ri];
    Buf *b = &s->why;
    buf_reset(b);
    buf_puts(b, "the room it fits in, on ");
    say_nodes(s, ri, b);
    if (r->claim) {
        buf_printf(b, ", is held for job %u, whose preemptions freed it, until that job's turn",
                   r->job);
    } else {
        buf_printf(b, ", is kept for job %u, ahead of it in the queue, which should start there ",
                   r->job);
        say_in(b, r->start_ms - now_ms);
        buf_puts(b, "; it may run there first only if it is preemptible or its duration estimate "
                    "ends it by then");
    }
    reason_set(j, buf_str(b));
    s->kept_cycle = s->cycle;
    s->kept_ri = ri;
    memcpy(s->kept_text, j->reason, sizeof(s->kept_text));
}
