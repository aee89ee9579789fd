/* measured.c: the GPUs' readings folded into the running jobs (measured.h). */
#include "server/measured.h"

#include <stdlib.h>

/* A gap longer than this between two readings (an agent away) is not counted: nothing
 * says what the GPUs did meanwhile. */
#define MAX_GAP_BEATS 5

static const NodeGpuSample *busy_reading(const NodeState *ns, unsigned index)
{
    for (size_t i = 0; i < ns->n_samples; i++)
        if (ns->samples[i].index == index && ns->samples[i].has_busy)
            return &ns->samples[i];
    return NULL;
}

/* One worker's part of dt_ms: its measured and busy GPU-equivalent milliseconds. */
static void fold_worker(const Server *s, const NodeState *ns, const WorkerAlloc *wa, double dt,
                        JobMeasure *m)
{
    const Node *n = &s->c->nodes[wa->node];
    for (size_t g = 0; g < wa->n_grants; g++) {
        const Grant *gr = &wa->grants[g];
        const NodeGpuSample *r = busy_reading(ns, gr->index);
        if (!r || gr->kind == GRANT_MIG)
            continue;
        double busy = r->busy_pct / 100.0;
        if (gr->kind == GRANT_WHOLE) {
            m->measured_ms += dt;
            m->busy_ms += dt * busy;
            continue;
        }
        /* a share: the GPU's busy time in proportion to its part of what is held */
        double held = (double)node_gpu_c(s->c, n, gr->index)->used_units / GPU_UNITS;
        double part = gr->milli / 1000.0;
        m->measured_ms += dt * part;
        m->busy_ms += dt * (held > part ? busy * part / held : busy * part);
    }
}

void measured_fold(Server *s, uint32_t node, int64_t now_ms)
{
    const NodeState *ns = &s->nodes[node];
    if (!ns->n_samples)
        return;
    int64_t gap = MAX_GAP_BEATS * s->opt.heartbeat_ms;
    for (size_t i = 0; i < s->n_holding; i++) {
        ServerJob *j = s->holding[i];
        if (j->st.state != JOB_RUNNING || !server_job_on_node(j, node, false))
            continue;
        if (j->n_measure != j->sj.pl.n_workers) {
            free(j->measure);
            j->measure = calloc(j->sj.pl.n_workers, sizeof(*j->measure));
            j->n_measure = j->measure ? j->sj.pl.n_workers : 0;
            if (!j->measure)
                continue; /* out of memory: this reading is not counted */
        }
        for (size_t w = 0; w < j->sj.pl.n_workers; w++) {
            const WorkerAlloc *wa = &j->sj.pl.workers[w];
            JobMeasure *m = &j->measure[w];
            if (wa->node != node)
                continue;
            int64_t from = m->last_ms > j->pl_from_ms ? m->last_ms : j->pl_from_ms;
            if (m->last_ms && now_ms > from && now_ms - from <= gap)
                fold_worker(s, ns, wa, (double)(now_ms - from), m);
            m->last_ms = now_ms;
        }
    }
}

void measured_into(const ServerJob *j, size_t w, StoreUsage *u)
{
    if (w >= j->n_measure)
        return;
    u->measured_gpu_ms = (int64_t)(j->measure[w].measured_ms + 0.5);
    u->busy_gpu_ms = (int64_t)(j->measure[w].busy_ms + 0.5);
}

void measured_reset(ServerJob *j)
{
    for (size_t w = 0; w < j->n_measure; w++)
        j->measure[w].measured_ms = j->measure[w].busy_ms = 0;
}
