/* render.h: how placements, GPUs and MIG layouts are written: the JSON shape every
 * command shares (plan, sim --events, the server's store and API) and compact text for
 * tables; and that JSON read back. */
#pragma once

#include "core/cluster.h"
#include "util/buf.h"

#include <jansson.h>

/* [{"index": 4}, {"index": 3, "mig": {"profile": "1g.10gb", "start": 2}},
 *  {"index": 2, "fraction": 0.25}] */
void render_json_grants(Buf *b, const Cluster *c, const WorkerAlloc *w);
/* Read a grant array of that shape back into w's grants, against node n (whose GPUs,
 * MIG profiles and starts it must name). 0, or -EINVAL with ret_msg a sentence. */
int render_grants_from_json(const Cluster *c, const Node *n, json_t *gpus, WorkerAlloc *w,
                            const char **ret_msg);
/* [{"profile": "1g.10gb", "start": 2}, ...] */
void render_json_layout(Buf *b, const GpuModel *m, const MigLayout *l);
/* "3:1g.10gb@2 4 5:0.250" */
void render_text_grants(Buf *b, const Cluster *c, const WorkerAlloc *w);
void render_text_layout(Buf *b, const GpuModel *m, const MigLayout *l);
/* A number with at most `digits` decimals, trailing zeros dropped ("11.43", "0"). */
void render_num(Buf *b, double v, int digits);
