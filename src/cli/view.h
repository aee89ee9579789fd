/* view.h: the text the client commands print for the server's replies (docs/api.md
 * shapes), as pure functions: a parsed reply and the time in, text out into a Buf.
 * Tables fit `width` columns (0: no limit, the wide form). A reply whose shape is not
 * the documented one gives -EINVAL with err saying what is wrong; a field that is
 * missing or null prints as "-" (or is left out) instead, so an older or newer server
 * still reads. Every function returns 0, -EINVAL or -ENOMEM. */
#pragma once

#include "util/buf.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/* POST /jobs reply (one job or {"jobs": [...]}): per job
 * "submitted 17 bert-finetune: pending, position 3". */
int view_submitted(const json_t *reply, Buf *out, Buf *err);
/* DELETE /jobs/{id} reply: "cancelled 17", "stopping 17". */
int view_cancelled(const json_t *job, Buf *out, Buf *err);
/* GET /jobs: ID NAME TEAM PRIO STATE POS GPUS AGE/ETA, and REASON when a pending job
 * has one. AGE/ETA: a pending job's promised start ("eta 4m") when the server has
 * one, else the time since the job was submitted. */
int view_queue(const json_t *reply, int64_t now_ms, size_t width, Buf *out, Buf *err);
/* GET /nodes: per node a line of facts and the GPU map:
 *   a100-0  A100-80GB x8  owned  ready  cpu 8/128  mem 64/1024 GiB
 *     0 mig [1g.10gb:17,- 3g.40gb:18]   1 whole 21   2 free   3 shared [18:0.25]
 * then a summary line: the nodes by state, the GPU equivalents in use. */
int view_nodes(const json_t *reply, int64_t now_ms, size_t width, Buf *out, Buf *err);
/* GET /learned: the GPU memory each workload class asks at least, and its OOMs. */
int view_learned(const json_t *reply, int64_t now_ms, size_t width, Buf *out, Buf *err);
/* DELETE /learned/TEAM/NAME: the class reset, what it had learned, the jobs resized. */
int view_learned_reset(const json_t *reply, Buf *out, Buf *err);
/* GET /teams ({"teams": [...]}) or one team (GET or PUT /teams/{name}). */
int view_teams(const json_t *reply, size_t width, Buf *out, Buf *err);
/* GET /usage: the window, then one column per group_by key, GPU-HOURS, COST, JOBS
 * and a TOTAL line. */
int view_usage(const json_t *reply, size_t width, Buf *out, Buf *err);

/* A duration in at most five characters: "45s", "12m", "1h05m", "20h", "3d"
 * (rounded down; negative counts as 0). */
void view_duration(Buf *b, int64_t ms);
/* "2026-11-30 14:05" (UTC). */
void view_time_utc(Buf *b, int64_t ms);
