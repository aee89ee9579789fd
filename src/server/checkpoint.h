/* checkpoint.h: a job's checkpoint, as the server decides it (docs/agent.md, "The
 * checkpoint contract").
 *
 * Each rank marks the steps it has written (its agent reads LATEST.RANK) and every
 * heartbeat lists the last few per worker. The server, the only one that hears from
 * every rank of a gang, keeps each rank's latest list for the current run, and a step
 * becomes the job's checkpoint once every rank of the run has it: the newest such step,
 * with what each rank said to resume it from. Ranks that got different distances before
 * a preemption (one wrote step 69, the other only 68) thus resume together from 68,
 * each from its own directory. A step of the run replaces the one an earlier run left,
 * even a higher one: the newest run's progress is what the next run continues.
 *
 * A one-worker job may still write only the old LATEST file: its text is the job's
 * checkpoint, as before, until the run marks a step. A gang's LATEST is not one: its
 * ranks share the file, so it names whichever rank wrote last (an event says so, once a
 * run, when a rank that marks no steps wrote it).
 *
 * The checkpoint is stored in the job's checkpoint text, durable like the rest of it:
 * LATEST's text as it was, or {"run": R, "step": S, "ranks": [PATH, ...]}. */
#pragma once

#include "server/state.h"
#include "util/buf.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CHECKPOINT_REPORT_MAX 64   /* entries of one worker's "checkpoints" */
#define CHECKPOINT_PATH_MAX   4096 /* bytes of one path */

typedef struct CkptMark {
    int64_t step;
    int64_t ms;
    char *path; /* owned */
} CkptMark;

/* What one rank last reported for the run. */
typedef struct RankMarks {
    CkptMark *m;
    size_t n;
} RankMarks;

/* The current run's reports, per rank (ServerJob.ckpt). */
typedef struct GangCkpt {
    uint32_t run;
    size_t n_ranks;
    RankMarks *ranks;
    bool legacy_noted; /* the run's "checkpoint-ignored" event was written */
} GangCkpt;

void checkpoint_gang_free(GangCkpt *g);

/* Is a reported worker's "checkpoints" (absent, null, or a list of at most
 * CHECKPOINT_REPORT_MAX {"step": S >= 0, "path": P, "ms": T}) well formed? 0, or
 * -EINVAL with err saying what is wrong. Heartbeats are checked whole before anything
 * of them is folded in. */
int checkpoint_report_check(json_t *worker, Buf *err);

/* Fold a checked worker report of rank `rank` (j->life.workers[rank], this run) into the
 * job: a step every rank now has becomes the job's checkpoint (event "checkpoint"). */
void checkpoint_fold(ServerJob *j, size_t rank, json_t *worker, int64_t now_ms, Changes *ch);

/* The newest step every rank of g has; false when there is none. */
bool checkpoint_common(const GangCkpt *g, int64_t *ret_step);

/* What rank `rank` resumes from, given the stored checkpoint (NULL: none): its path of
 * the step, or LATEST's text. New reference: a string, or null. */
json_t *checkpoint_resume_json(const char *stored, size_t rank);

/* The stored checkpoint in words, for events: "step 68 of all 2 ranks (rank 0: PATH)",
 * LATEST's text, or "none" when stored is NULL. */
void checkpoint_label(const char *stored, Buf *out);

/* The API's fields of a job (docs/api.md, GET /jobs): "checkpoint" (what rank 0 resumes
 * from), "checkpoint_step" and "checkpoint_ranks". */
void checkpoint_api_fields(const char *stored, json_t *job);

/* The newest step rank `rank` of the job reported in its current run, or -1. */
int64_t checkpoint_rank_step(const ServerJob *j, size_t rank);
