/* runorder.c: running jobs in an order kept across cycles (runorder.h). */
#include "core/runorder.h"
#include "core/sched.h"

#include "util/macro.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void runorder_free(RunOrder *o)
{
    free(o->e);
    free(o->used);
    *o = (RunOrder){0};
}

static bool before(const RunEntry *a, const RunEntry *b)
{
    return a->key != b->key ? a->key < b->key : a->id < b->id;
}

static int entry_cmp(const void *a, const void *b)
{
    const RunEntry *x = a, *y = b;
    return before(x, y) ? -1 : before(y, x) ? 1 : 0;
}

int runorder_update(RunOrder *o, SchedJob **running, size_t n, const uint64_t *in_cycle,
                    uint64_t cycle, SchedJob *const *ptr_of, size_t ids,
                    int64_t (*key)(const SchedJob *), bool (*want)(const SchedJob *))
{
    if (ids > o->used_cap) {
        uint64_t *u = realloc(o->used, ids * sizeof(*u));
        if (!u) {
            o->n = 0;
            return -ENOMEM;
        }
        memset(u + o->used_cap, 0, (ids - o->used_cap) * sizeof(*u));
        o->used = u;
        o->used_cap = ids;
    }
    uint64_t epoch = ++o->epoch;
    /* last order's jobs still running, keys as they are now; one whose key moved it out
     * of order joins the new ones */
    size_t kept = 0;
    for (size_t i = 0; i < o->n; i++) {
        RunEntry e = o->e[i];
        if (e.id >= ids || in_cycle[e.id] != cycle || ptr_of[e.id] != e.j ||
            o->used[e.id] == epoch || (want && !want(e.j)))
            continue;
        e.key = key(e.j);
        if (kept && before(&e, &o->e[kept - 1]))
            continue; /* left unmarked: taken with the new ones below */
        o->used[e.id] = epoch;
        o->e[kept++] = e;
    }
    size_t n_new = 0;
    for (size_t i = 0; i < n; i++)
        n_new +=
            running[i]->id < ids && o->used[running[i]->id] != epoch && (!want || want(running[i]));
    if (GROW(o->e, o->cap, kept + 2 * n_new + 1) < 0) {
        o->n = 0;
        return -ENOMEM;
    }
    /* the new ones sorted after the kept ones, then merged from the back */
    RunEntry *fresh = o->e + kept + n_new;
    size_t f = 0;
    for (size_t i = 0; i < n; i++) {
        SchedJob *j = running[i];
        if (j->id >= ids || o->used[j->id] == epoch || (want && !want(j)))
            continue;
        o->used[j->id] = epoch;
        fresh[f++] = (RunEntry){.j = j, .key = key(j), .id = j->id};
    }
    qsort(fresh, f, sizeof(*fresh), entry_cmp);
    size_t a = kept, b = f, out = kept + f;
    while (b > 0) {
        if (a > 0 && before(&fresh[b - 1], &o->e[a - 1]))
            o->e[--out] = o->e[--a];
        else
            o->e[--out] = fresh[--b];
    }
    o->n = kept + f;
    return 0;
}
