/* failmemo.h: what a scheduling cycle remembers of the placements that failed, so that
 * a deep queue of jobs alike costs one placer call per kind of job, not one per job.
 *
 * Within a cycle capacity only shrinks (jobs start; stopping work keeps what it holds
 * until it is released, between cycles), so a shape that did not fit with W workers
 * under a set of blocked nodes does not fit with W or more under the same set later in
 * the cycle. A failure is kept by (request shape, stamp): the stamp names the set of
 * nodes the placement had to keep out of. Which nodes a job must keep out of depends
 * on the job (its place in the queue, its estimate, whether it is preemptible), but
 * only through which reservations bind it: so a set is named by that pattern, one
 * stamp per distinct pattern in the cycle, and jobs that alternate between two patterns
 * do not wipe each other's memory. The placer's words for the failure are kept with it:
 * the reason a job sees is the one the placer gave the first job of its shape that
 * failed under the same pattern. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct FailEntry {
    uint64_t stamp;
    uint32_t workers; /* the fewest workers of the shape seen failing under stamp */
    uint32_t next;    /* the shape's next entry, UINT32_MAX at the end */
} FailEntry;

typedef struct FailPattern {
    uint64_t hash, stamp;
    size_t n, at; /* n bytes at bits[at] */
} FailPattern;

typedef struct FailMemo {
    size_t n_shapes;
    size_t why_len; /* bytes kept per reason, its NUL included */
    uint64_t cycle, stamp;
    uint64_t *head_cycle; /* by shape: the cycle head[] was set in */
    uint32_t *head;       /* by shape: its first entry */
    FailEntry *e;
    size_t n_e, e_cap;
    char *text; /* entry i's reason: text + i * why_len */
    size_t text_cap;
    FailPattern *p;
    size_t n_p, p_cap;
    uint8_t *bits;
    size_t n_bits, bits_cap;
} FailMemo;

int failmemo_init(FailMemo *m, size_t n_shapes, size_t why_len);
void failmemo_free(FailMemo *m);

/* A new cycle: everything remembered is forgotten. */
void failmemo_cycle(FailMemo *m);

/* A stamp no failure was kept under. */
uint64_t failmemo_fresh(FailMemo *m);

/* The stamp of a blocking pattern (n bytes, one per reservation: whether it binds): the
 * same bytes get the same stamp for the rest of the cycle. Out of memory, a fresh stamp. */
uint64_t failmemo_pattern(FailMemo *m, const uint8_t *bits, size_t n);

/* The placer's words for shape failing under stamp with at most workers workers, or
 * NULL when no such failure is kept. */
const char *failmemo_find(const FailMemo *m, int32_t shape, uint64_t stamp, uint32_t workers);

/* Keep a failure (nothing when out of memory: the memo only saves work). */
void failmemo_note(FailMemo *m, int32_t shape, uint64_t stamp, uint32_t workers, const char *why);
