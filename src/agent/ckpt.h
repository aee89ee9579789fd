/* ckpt.h: what one rank says about its checkpoints (docs/agent.md, "The checkpoint
 * contract"). A rank that has written the whole of a step replaces its own marker,
 * GPUORCH_CHECKPOINT_DIR/LATEST.RANK, with one line "STEP PATH": the step's number and
 * what it resumes that step from (its directory). The agent keeps the last few steps a
 * worker marked, in the order it marked them, and reports them all in each heartbeat:
 * the server, which hears from every rank of a gang, picks the newest step they all
 * have. Keeping several, not just the newest, is what lets a rank that got one step
 * further than the others still be matched on the step before. */
#pragma once

#include "util/buf.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define CKPT_HISTORY    8    /* steps kept and reported per worker */
#define CKPT_MARKER_MAX 4096 /* bytes of a marker read */

typedef struct CkptStep {
    int64_t step; /* >= 0 */
    int64_t ms;   /* the marker's mtime, ms since the epoch */
    char *path;   /* owned: what the rank resumes this step from */
} CkptStep;

/* Oldest first; at most CKPT_HISTORY, each step once. */
typedef struct CkptHistory {
    CkptStep steps[CKPT_HISTORY];
    size_t n;
} CkptHistory;

/* Parse a marker's content: a whole number, blanks, and the path (the rest of the first
 * line, trimmed). 0 with *ret_step and *ret_path (malloc'd); -EINVAL with err saying what
 * is wrong; -ENOMEM. */
int ckpt_marker_parse(const char *text, int64_t *ret_step, char **ret_path, Buf *err);
/* The run a marker says wrote it: a later line "run N" (N >= 1, the writer's
 * GPUORCH_RUN). 0 when it names none (a marker of the first contract); -EINVAL when
 * such a line is there but N is not a whole number >= 1. The job's checkpoint
 * directory is shared by its runs, and a worker of an earlier run that is still
 * running (on a node declared lost, say) writes there too: the run tells its markers
 * from the current run's. */
int64_t ckpt_marker_run(const char *text);

/* Record a step (path is taken over). The same step again replaces its entry and
 * becomes the newest; past CKPT_HISTORY the oldest goes. */
void ckpt_history_add(CkptHistory *h, int64_t step, int64_t ms, char *path);
void ckpt_history_free(CkptHistory *h);
/* The newest entry, NULL when empty. */
const CkptStep *ckpt_history_last(const CkptHistory *h);

/* [{"step": S, "path": P, "ms": T}, ...] oldest first, as the heartbeat reports it and
 * workers.json keeps it. New reference, NULL on out of memory. */
json_t *ckpt_history_json(const CkptHistory *h);
/* Read that list back (NULL or absent: empty). Entries that are not of that shape are
 * skipped: the table is the agent's own file. */
void ckpt_history_from_json(json_t *list, CkptHistory *ret);
