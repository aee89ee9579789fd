/* render.h: how placements, GPUs and MIG layouts are written: the JSON shape every
 * command shares (plan, sim --events) and compact text for tables. */
#pragma once

#include "core/cluster.h"
#include "util/buf.h"

/* [{"index": 4}, {"index": 3, "mig": {"profile": "1g.10gb", "start": 2}},
 *  {"index": 2, "fraction": 0.25}] */
void render_json_grants(Buf *b, const Cluster *c, const WorkerAlloc *w);
/* [{"profile": "1g.10gb", "start": 2}, ...] */
void render_json_layout(Buf *b, const GpuModel *m, const MigLayout *l);
/* "3:1g.10gb@2 4 5:0.250" */
void render_text_grants(Buf *b, const Cluster *c, const WorkerAlloc *w);
void render_text_layout(Buf *b, const GpuModel *m, const MigLayout *l);
/* A number with at most `digits` decimals, trailing zeros dropped ("11.43", "0"). */
void render_num(Buf *b, double v, int digits);
