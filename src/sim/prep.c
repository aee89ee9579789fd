/* prep.c: what all runs over one cluster and trace share, computed once: each job's
 * request resolved against the cluster (or why it never could run), request shapes
 * interned for the score cache, the pod and node name orders of the FGD protocol, the
 * expected mix (every job's shape) and its typical part, and the teams. */
#include "core/mix.h"
#include "sim/sim.h"
#include "util/macro.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Score-cache slots: shapes x nodes stays under this many entries. */
#define CACHE_ENTRIES_MAX (32u << 20)

static uint64_t hash_request(const Request *r)
{
    uint64_t h = 1469598103934665603ull;
#define MIXIN(v)                                                                                   \
    do {                                                                                           \
        h ^= (uint64_t)(v);                                                                        \
        h *= 1099511628211ull;                                                                     \
    } while (0)
    MIXIN(r->kind);
    MIXIN(r->gpus);
    MIXIN(r->scope | (unsigned)r->scope_required << 8);
    MIXIN(r->tiers);
    MIXIN(r->fabric);
    MIXIN(r->cpu_milli);
    MIXIN(r->memory_mib);
    MIXIN(r->models);
    for (unsigned i = 0; i < CLUSTER_MAX_MODELS; i++) {
        MIXIN((uint8_t)r->mig_profile[i]);
        MIXIN(r->share_milli[i]);
    }
#undef MIXIN
    return h;
}

typedef struct ShapeTable {
    uint32_t *slot; /* job index + 1 of the shape's first job; 0 empty */
    int32_t *id;
    size_t cap;
} ShapeTable;

/* Give each distinct shape an id in order of first appearance. */
static int intern_shapes(SimInput *in)
{
    const JobList *jobs = in->jobs;
    SimPrep *p = &in->prep;
    ShapeTable t = {.cap = 64};
    while (t.cap < jobs->n * 2)
        t.cap *= 2;
    t.slot = calloc(t.cap, sizeof(*t.slot));
    t.id = calloc(t.cap, sizeof(*t.id));
    if (!t.slot || !t.id) {
        free(t.slot);
        free(t.id);
        return -ENOMEM;
    }
    size_t max_shapes = in->cluster->n_nodes ? CACHE_ENTRIES_MAX / in->cluster->n_nodes : 0;
    int32_t next = 0;
    for (size_t i = 0; i < jobs->n; i++) {
        Request *r = &p->reqs[i];
        r->shape = -1;
        if (p->unschedulable[i])
            continue;
        size_t h = hash_request(r) & (t.cap - 1);
        while (t.slot[h] && !request_same_shape(&p->reqs[t.slot[h] - 1], r))
            h = (h + 1) & (t.cap - 1);
        if (!t.slot[h]) {
            t.slot[h] = (uint32_t)i + 1;
            t.id[h] = (size_t)next < max_shapes ? next++ : -1;
        }
        r->shape = t.id[h];
    }
    p->n_shapes = (size_t)next;
    free(t.slot);
    free(t.id);
    return 0;
}

static int by_job_name(const void *a, const void *b, void *arg)
{
    const JobList *jobs = arg;
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    int c = strcmp(jobs->jobs[x].name, jobs->jobs[y].name);
    return c ? c : (x > y) - (x < y);
}

static int by_node_name(const void *a, const void *b, void *arg)
{
    const Cluster *c = arg;
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return strcmp(c->nodes[x].name, c->nodes[y].name);
}

static int collect_teams(SimInput *in)
{
    SimPrep *p = &in->prep;
    const JobList *jobs = in->jobs;
    p->team_of = calloc(jobs->n ? jobs->n : 1, sizeof(*p->team_of));
    if (!p->team_of)
        return -ENOMEM;
    size_t cap = 0;
    for (size_t i = 0; i < jobs->n; i++) {
        const char *t = jobs->jobs[i].team ? jobs->jobs[i].team : "(none)";
        size_t k = 0;
        while (k < p->n_teams && strcmp(p->team_names[k], t))
            k++;
        if (k == p->n_teams) {
            if (GROW(p->team_names, cap, p->n_teams + 1) < 0 ||
                !(p->team_names[p->n_teams] = strdup(t)))
                return -ENOMEM;
            p->n_teams++;
        }
        p->team_of[i] = (uint32_t)k;
    }
    return 0;
}

/* What the scheduler is told of job i's length, hours; 0 when nothing. */
static double told_h(const SimInput *in, size_t i)
{
    const JobSpec *j = &in->jobs->jobs[i];
    int64_t d = in->opt.oracle_estimates ? j->duration_ms : j->duration_estimate_ms;
    return d > 0 ? (double)d / 3600000.0 : 0;
}

/* The mean of the lengths the scheduler is told, hours (1 when none is told). */
static double mean_estimate_h(const SimInput *in)
{
    double sum = 0;
    size_t n = 0;
    for (size_t i = 0; i < in->jobs->n; i++) {
        double h = told_h(in, i);
        sum += h;
        n += h > 0;
    }
    return n ? sum / (double)n : 1;
}

/* A shape's weight in the expected mix. Packing mode (pods never leave): how often it
 * comes, as FGD counts. Time mode: how many of it are running at once on average, by
 * Little's law arrivals x length (the length the scheduler is told; the mean told
 * length when a job has none): a shape that comes rarely but stays long, gang training,
 * is what free GPUs will most often be wanted for. On the mixed cluster (the days of
 * bench/RESULTS.md section 4, seeds 1-8 of both mixes) this raised gpuorch's windowed
 * utilisation on 14 of 16 days, by 1.5 points on mix-demo and 2.3 on mix-backlog on
 * average. */
static double mix_weight(const SimInput *in, size_t i, double mean_h)
{
    double w = in->prep.reqs[i].workers;
    if (in->opt.mode != SIM_TIME)
        return w;
    double h = told_h(in, i);
    return w * (h > 0 ? h : mean_h);
}

int sim_prepare(SimInput *in)
{
    const Cluster *c = in->cluster;
    const JobList *jobs = in->jobs;
    SimPrep *p = &in->prep;
    *p = (SimPrep){.capacity_milli = (uint64_t)c->n_gpus * 1000};
    size_t n = jobs->n ? jobs->n : 1;
    p->reqs = calloc(n, sizeof(*p->reqs));
    p->unschedulable = calloc(n, sizeof(*p->unschedulable));
    p->by_name = calloc(n, sizeof(*p->by_name));
    p->node_by_name = calloc(c->n_nodes ? c->n_nodes : 1, sizeof(*p->node_by_name));
    if (!p->reqs || !p->unschedulable || !p->by_name || !p->node_by_name)
        return -ENOMEM;
    Buf why = {0};
    for (size_t i = 0; i < jobs->n; i++) {
        buf_reset(&why);
        if (request_from_job(c, &jobs->jobs[i], &p->reqs[i], &why) < 0 &&
            !(p->unschedulable[i] = strdup(buf_str(&why)))) {
            buf_free(&why);
            return -ENOMEM;
        }
        p->by_name[i] = (uint32_t)i;
    }
    buf_free(&why);
    qsort_r(p->by_name, jobs->n, sizeof(*p->by_name), by_job_name, (void *)jobs);
    for (size_t i = 0; i < c->n_nodes; i++)
        p->node_by_name[i] = (uint32_t)i;
    qsort_r(p->node_by_name, c->n_nodes, sizeof(*p->node_by_name), by_node_name, (void *)c);
    int err = intern_shapes(in);
    double mean_h = mean_estimate_h(in);
    for (size_t i = 0; !err && i < jobs->n; i++)
        if (!p->unschedulable[i])
            err = mix_add(&p->expected, &p->reqs[i], mix_weight(in, i, mean_h));
    mix_normalize(&p->expected);
    if (!err)
        err = mix_typical(&p->expected, FGD_TYPICAL_SHARE, &p->typical);
    if (!err)
        err = collect_teams(in);
    return err;
}

void sim_input_free(SimInput *in)
{
    SimPrep *p = &in->prep;
    for (size_t i = 0; in->jobs && i < in->jobs->n && p->unschedulable; i++)
        free(p->unschedulable[i]);
    for (size_t i = 0; i < p->n_teams; i++)
        free(p->team_names[i]);
    free(p->team_names);
    free(p->team_of);
    free(p->unschedulable);
    free(p->reqs);
    free(p->by_name);
    free(p->node_by_name);
    mix_free(&p->typical);
    mix_free(&p->expected);
    *p = (SimPrep){0};
}
