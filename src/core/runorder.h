/* runorder.h: the running jobs in an order (by start, by expected end) kept from one
 * cycle to the next. A cycle's running jobs are mostly last cycle's, in the same order:
 * the order is checked and the jobs new to it sorted and merged in, so that a cycle
 * costs a pass over the running jobs, not a sort of them. The result is exactly the
 * sort by (key, id). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct SchedJob SchedJob; /* sched.h */

typedef struct RunEntry {
    SchedJob *j;
    int64_t key;
    uint32_t id;
} RunEntry;

typedef struct RunOrder {
    RunEntry *e;
    size_t n, cap;
    uint64_t *used; /* by job id: the update that placed it */
    size_t used_cap;
    uint64_t epoch;
} RunOrder;

void runorder_free(RunOrder *o);

/* The jobs of running[0..n) that want() keeps (NULL: all), by key() then id, into
 * o->e[0..o->n). in_cycle[id] == cycle and ptr_of[id] == the job say that a job is in
 * running[] now (ids below ids): an entry of the last order is only dereferenced once
 * found there. 0 or -ENOMEM (the order is then empty). */
int runorder_update(RunOrder *o, SchedJob **running, size_t n, const uint64_t *in_cycle,
                    uint64_t cycle, SchedJob *const *ptr_of, size_t ids,
                    int64_t (*key)(const SchedJob *), bool (*want)(const SchedJob *));
