/* report.h: turning simulation runs into what people read: a terminal table, one
 * JSON object (-o json), and an output folder (summary.json, timeline.csv, chart.svg).
 * With several seeds each figure is the mean over seeds, with its standard deviation
 * beside it. Packing reports can carry the FGD authors' published figures for the
 * same trace and policy next to ours. */
#pragma once

#include "sim/sim.h"

#include <stdio.h>

/* The FGD authors' per-policy means over ten seeds (fgd_summary_mean_over_10_seeds.csv). */
typedef struct PaperRow {
    char workload[64];
    char policy[32]; /* ours: "fgd", "best-fit", ... */
    int arrived;     /* percent */
    double alloc_mean, alloc_std, frag_mean;
} PaperRow;

typedef struct PaperFigures {
    PaperRow *rows;
    size_t n;
} PaperFigures;

int paper_load(const char *path, PaperFigures *ret, Buf *err);
void paper_free(PaperFigures *p);
/* The authors' row for (workload, our policy name, arrived %), or NULL. */
const PaperRow *paper_find(const PaperFigures *p, const char *workload, const char *policy,
                           int arrived);

typedef struct SimReport {
    SimMode mode;
    const char *cluster_name;
    const char *trace_name;
    double gpus; /* the cluster's GPUs */
    const SimPolicy *policies;
    size_t n_policies;
    const uint64_t *seeds;
    size_t n_seeds;
    RunResult *runs;           /* [policy * n_seeds + seed] */
    const PaperFigures *paper; /* optional */
    /* --window, from the first submission (time mode; none when to <= from): the
     * table then shows utilisation and allocation over it beside the whole run's */
    int64_t window_from_ms, window_to_ms;
} SimReport;

void report_json(const SimReport *r, Buf *out);
/* print() lays out a tab-separated table (the CLI's aligner). */
void report_table(const SimReport *r, FILE *f, void (*print)(FILE *, const char *));
/* Write summary.json, timeline.csv and chart.svg into dir (created if missing). */
int report_write_dir(const SimReport *r, const char *dir, Buf *err);
