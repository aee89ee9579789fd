/* bench_cycle.c: how long one scheduling cycle takes on a large, busy cluster with a deep
 * queue. The cluster is a spec's pools scaled up (every pool's node count and every
 * team's quota times --scale), the jobs are ten shapes (whole GPUs, a leaf-bound gang,
 * MIG profiles, GPU memory, MPS shares, CPU-only) in the four classes, 70% of normal
 * and low work preemptible, estimates log-uniform from 5 minutes to 12 hours. The
 * driver calls sched_cycle as the simulator does: every cycle the clock moves on, jobs
 * past their run time leave, preempted jobs past their grace are released and queued
 * again, and new arrivals keep the queue at its depth. Warm-up cycles fill the cluster
 * first; the measured ones go through measured_cycle, which callgrind can count alone
 * (bench/cycle.sh: --toggle-collect=measured_cycle).
 *
 * With --print, the generator alone: the scaled spec (or mix, whose rates it scales)
 * on standard output, for gpuorch sim and trace gen.
 *
 * usage: bench_cycle [--cluster PATH] [--scale K] [--waiting N] [--cycles C]
 *                    [--seed S] [--step-s SECONDS]
 *        bench_cycle --print FILE.yaml [--scale K] */
#include "core/sched.h"
#include "spec/spec.h"
#include "util/macro.h"
#include "util/rng.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define N_SHAPES   10
#define MAX_SHAPES 64 /* shapes once tiers and classes split them */
#define WARMUP     3

typedef struct Shape {
    const char *label;
    double weight;
    ReqKind kind;
    unsigned gpus, workers, milli;
    const char *mig;
    uint64_t mem_mib;
} Shape;

static const Shape shapes[N_SHAPES] = {
    {"1 GPU", 0.20, REQ_GPUS, 1, 1, 0, NULL, 0},
    {"2 GPUs", 0.06, REQ_GPUS, 2, 1, 0, NULL, 0},
    {"8 GPUs", 0.06, REQ_GPUS, 8, 1, 0, NULL, 0},
    {"4x8 GPU gang, leaf", 0.02, REQ_GPUS, 8, 4, 0, NULL, 0},
    {"mig 1g.10gb", 0.18, REQ_MIG, 0, 1, 0, "1g.10gb", 0},
    {"mig 3g.40gb", 0.06, REQ_MIG, 0, 1, 0, "3g.40gb", 0},
    {"18 GiB memory", 0.14, REQ_MEMORY, 0, 1, 0, NULL, 18432},
    {"0.25 share", 0.14, REQ_FRACTION, 0, 1, 250, NULL, 0},
    {"cpu only", 0.04, REQ_NONE, 0, 1, 0, NULL, 0},
    {"0.5 share", 0.10, REQ_FRACTION, 0, 1, 500, NULL, 0},
};

typedef struct Bench {
    Cluster *c;
    Rng rng;
    PlaceCtx ctx;
    ScoreCache cache;
    Sched s;
    SchedJob *jobs;
    int64_t *end_ms; /* by id: when a running job finishes (its true run time) */
    size_t n_jobs, cap;
    SchedJob **running;
    size_t n_running;
    Request *reqs; /* interned shapes */
    size_t n_reqs;
    int64_t now;
} Bench;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void die(const char *what)
{
    fprintf(stderr, "bench_cycle: %s\n", what);
    exit(1);
}

/* ---- the cluster generator ---- */

/* The spec's text with each "nodes: N" (a pool's size), each team's "guaranteed_gpus:"
 * and "burst_gpus:", and each mix entry's "rate_per_hour:" multiplied by k: the same
 * fleet (or the same workload for it), k times over. */
static char *scale_spec(const char *text, unsigned k)
{
    static const char *const keys[] = {
        "nodes:", "guaranteed_gpus:", "burst_gpus:", "rate_per_hour:"};
    Buf out = {0};
    const char *p = text;
    while (*p) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p + 1) : strlen(p);
        const char *q = p;
        while (q < p + len && (*q == ' ' || *q == '\t'))
            q++;
        bool done = false;
        for (size_t i = 0; i < sizeof(keys) / sizeof(*keys) && !done; i++) {
            size_t kl = strlen(keys[i]);
            char *end;
            if (strncmp(q, keys[i], kl) != 0)
                continue;
            double v = strtod(q + kl, &end);
            if (end == q + kl)
                continue;
            buf_printf(&out, "%.*s %.10g%.*s", (int)(q + kl - p), p, v * k, (int)(p + len - end),
                       end);
            done = true;
        }
        if (!done)
            buf_printf(&out, "%.*s", (int)len, p);
        p += len;
    }
    char *s = strdup(buf_str(&out));
    buf_free(&out);
    return s;
}

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "bench_cycle: %s: %s\n", path, strerror(errno));
        exit(2);
    }
    Buf text = {0};
    char chunk[4096];
    size_t got;
    while ((got = fread(chunk, 1, sizeof(chunk), f)) > 0)
        buf_printf(&text, "%.*s", (int)got, chunk);
    fclose(f);
    char *s = strdup(buf_str(&text));
    buf_free(&text);
    return s;
}

static Cluster *load_scaled(const char *path, unsigned k)
{
    char *text = read_file(path);
    char *scaled = scale_spec(text, k);
    Cluster *c = NULL;
    Buf err = {0};
    if (spec_parse_cluster(scaled, strlen(scaled), path, 0, &c, &err) < 0) {
        fprintf(stderr, "bench_cycle: %s\n", buf_str(&err));
        exit(2);
    }
    free(scaled);
    free(text);
    buf_free(&err);
    return c;
}

/* ---- jobs ---- */

static int32_t intern(Bench *b, const Request *r)
{
    for (size_t i = 0; i < b->n_reqs; i++)
        if (request_same_shape(&b->reqs[i], r))
            return (int32_t)i;
    if (b->n_reqs == MAX_SHAPES)
        die("too many request shapes");
    b->reqs[b->n_reqs] = *r;
    return (int32_t)b->n_reqs++;
}

/* A new job, queued. */
static void submit(Bench *b, int64_t *est_total, int64_t submit_ms)
{
    if (b->n_jobs == b->cap) {
        /* SchedJob pointers are held by the scheduler: the array never moves */
        die("job table full (raise --waiting or lower --cycles)");
    }
    uint32_t id = (uint32_t)b->n_jobs++;
    SchedJob *j = &b->jobs[id];
    double u = rng_unit(&b->rng), acc = 0;
    size_t k = 0;
    for (; k + 1 < N_SHAPES; k++) {
        acc += shapes[k].weight;
        if (u < acc)
            break;
    }
    const Shape *sh = &shapes[k];
    double pu = rng_unit(&b->rng);
    uint8_t prio = pu < 0.05   ? PRIO_PRODUCTION
                   : pu < 0.25 ? PRIO_HIGH
                   : pu < 0.75 ? PRIO_NORMAL
                               : PRIO_LOW;
    bool preemptible = prio >= PRIO_NORMAL && rng_unit(&b->rng) < 0.7;
    /* 5 min to 12 h, log-uniform */
    double lo = log(5 * 60e3), hi = log(12 * 3600e3);
    int64_t estimate = (int64_t)exp(lo + rng_unit(&b->rng) * (hi - lo));

    JobSpec spec;
    job_spec_init(&spec);
    spec.req = (uint8_t)sh->kind;
    spec.gpus = (uint16_t)sh->gpus;
    spec.mig = sh->mig ? (char *)sh->mig : NULL;
    spec.gpu_memory_mib = sh->mem_mib;
    spec.fraction_milli = (uint16_t)sh->milli;
    spec.workers = sh->workers;
    spec.cpu_milli = 4000 * (sh->gpus ? sh->gpus : 1);
    spec.memory_mib = 16384 * (sh->gpus ? sh->gpus : 1);
    spec.priority = prio;
    spec.preemptible = preemptible;
    spec.checkpoint_interval_ms = preemptible ? 30 * 60 * 1000 : 0;
    spec.duration_estimate_ms = estimate;
    if (sh->workers > 1) {
        spec.scope = SCOPE_LEAF;
        spec.scope_required = true;
    }
    Request r;
    Buf why = {0};
    if (request_from_job(b->c, &spec, &r, &why) < 0) {
        fprintf(stderr, "bench_cycle: shape '%s': %s\n", sh->label, buf_str(&why));
        exit(2);
    }
    buf_free(&why);
    spec.mig = NULL; /* not ours to free */
    job_spec_free(&spec);
    r.shape = intern(b, &r);

    *j = (SchedJob){
        .id = id,
        .team = b->c->n_teams ? (uint32_t)rng_below(&b->rng, b->c->n_teams) : TEAM_NONE,
        .priority = prio,
        .preemptible = preemptible,
        .submit_ms = submit_ms,
        .estimate_ms = estimate,
        .grace_ms = SCHED_GRACE_MS,
        .nominated = SCHED_NONE,
        .backfill_for = SCHED_NONE,
        .req = r,
    };
    /* the true run time: within a fifth of the estimate either way, so some overrun */
    est_total[id] = estimate;
    b->end_ms[id] = (int64_t)((double)estimate * (0.8 + 0.4 * rng_unit(&b->rng)));
    if (sched_enqueue(&b->s, j) < 0)
        die("out of memory");
}

static void drop_running(Bench *b, size_t i)
{
    b->running[i] = b->running[--b->n_running];
}

/* Jobs past their run time leave; preempted ones past their grace are released and
 * queued again. */
static void advance(Bench *b, int64_t *est_total)
{
    for (size_t i = b->n_running; i-- > 0;) {
        SchedJob *j = b->running[i];
        bool done = !j->stopping && b->now >= j->run_start_ms + b->end_ms[j->id];
        bool stopped = j->stopping && b->now >= j->stop_at_ms;
        if (done || stopped) {
            sched_release(&b->s, j, b->now);
            drop_running(b, i);
            if (stopped) {
                /* it checkpointed: what is left of it runs on its next start */
                int64_t ran = b->now - j->run_start_ms;
                b->end_ms[j->id] = MAX(b->end_ms[j->id] - ran, 60 * 1000);
                est_total[j->id] = j->estimate_ms;
                if (sched_enqueue(&b->s, j) < 0)
                    die("out of memory");
            }
        }
    }
}

/* The running jobs' estimates as what is left from now (the scheduler reads them so). */
static void refresh(Bench *b, int64_t *est_total)
{
    for (size_t i = 0; i < b->n_running; i++) {
        SchedJob *j = b->running[i];
        int64_t left = j->run_start_ms + est_total[j->id] - b->now;
        j->estimate_ms = left > 0 ? left : 0;
    }
}

typedef struct CycleStats {
    size_t starts, preempts;
} CycleStats;

static void apply(Bench *b, const SchedDecisions *d, CycleStats *st)
{
    for (size_t k = 0; k < d->n; k++) {
        uint32_t id = d->d[k].job; /* SCHED_NONE for drains */
        switch (d->d[k].kind) {
        case SCHED_START:
            b->running[b->n_running++] = &b->jobs[id];
            st->starts++;
            break;
        case SCHED_PREEMPT:
            st->preempts++;
            break;
        case SCHED_MOVE:
            sched_move_done(&b->s, &b->jobs[id]);
            break;
        default:
            break;
        }
    }
}

/* Out of line, so that callgrind counts the measured cycles alone. */
__attribute__((noinline)) int measured_cycle(Bench *b, SchedDecisions *d);
__attribute__((noinline)) int measured_cycle(Bench *b, SchedDecisions *d)
{
    return sched_cycle(&b->s, b->now, b->running, b->n_running, d);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double pct(const double *v, size_t n, double p)
{
    if (!n)
        return 0;
    size_t i = (size_t)(p * (double)(n - 1) + 0.5);
    return v[i];
}

int main(int argc, char **argv)
{
    const char *path = "examples/cluster-large.yaml";
    unsigned scale = 11, cycles = 20;
    size_t waiting = 10000;
    uint64_t seed = 1;
    int64_t step_ms = 10 * 1000;
    const char *print = NULL;
    for (int i = 1; i < argc; i += 2) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) {
            fprintf(stderr, "bench_cycle: %s needs a value\n", a);
            return 2;
        }
        if (!strcmp(a, "--cluster"))
            path = v;
        else if (!strcmp(a, "--scale"))
            scale = (unsigned)atoi(v);
        else if (!strcmp(a, "--waiting"))
            waiting = (size_t)atol(v);
        else if (!strcmp(a, "--cycles"))
            cycles = (unsigned)atoi(v);
        else if (!strcmp(a, "--seed"))
            seed = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--step-s"))
            step_ms = atol(v) * 1000;
        else if (!strcmp(a, "--print"))
            print = v;
        else {
            fprintf(stderr,
                    "usage: bench_cycle [--cluster PATH] [--scale K] [--waiting N] [--cycles C] "
                    "[--seed S] [--step-s SECONDS]\n"
                    "       bench_cycle --print FILE.yaml [--scale K]\n");
            return 2;
        }
    }
    if (scale < 1 || cycles < 1 || step_ms < 1000) {
        fprintf(stderr, "bench_cycle: --scale, --cycles at least 1, --step-s at least 1\n");
        return 2;
    }

    if (print) {
        /* the generator alone: a cluster spec or a mix, scaled, for gpuorch sim */
        char *text = read_file(print), *scaled = scale_spec(text, scale);
        fputs(scaled, stdout);
        free(text);
        free(scaled);
        return 0;
    }
    Bench b = {.c = load_scaled(path, scale)};
    rng_seed(&b.rng, seed);
    b.reqs = calloc(MAX_SHAPES, sizeof(*b.reqs));
    Mix mix = {0};
    SchedConfig cfg;
    sched_config_gpuorch(&cfg);
    if (place_ctx_init(&b.ctx, b.c, policy_find("gpuorch"), &b.rng, NULL, &mix) < 0 ||
        score_cache_init(&b.cache, b.c->n_nodes, MAX_SHAPES) < 0 ||
        sched_init(&b.s, b.c, &b.ctx, &cfg, MAX_SHAPES) < 0)
        die("out of memory");
    b.ctx.cache = &b.cache;

    /* room for the fill, the queue, and every cycle's arrivals */
    size_t gpus = b.c->n_gpus ? b.c->n_gpus : 1;
    b.cap = waiting + 2 * gpus + (size_t)(cycles + WARMUP) * (gpus / 8 + 64) + 1024;
    b.jobs = calloc(b.cap, sizeof(*b.jobs));
    b.end_ms = calloc(b.cap, sizeof(*b.end_ms));
    int64_t *est_total = calloc(b.cap, sizeof(*est_total));
    b.running = calloc(b.cap, sizeof(*b.running));
    double *ms = calloc(cycles, sizeof(*ms));
    double *pre_ms = calloc(cycles, sizeof(*pre_ms));
    if (!b.jobs || !b.end_ms || !est_total || !b.running || !ms || !pre_ms || !b.reqs)
        die("out of memory");

    SchedDecisions d = {0};
    CycleStats st = {0};
    /* the fill: work in batches until the cluster takes no more */
    for (;;) {
        size_t before = st.starts;
        while (sched_queue_len(&b.s) < gpus / 4)
            submit(&b, est_total, b.now);
        d.n = 0;
        if (sched_cycle(&b.s, b.now, b.running, b.n_running, &d) < 0)
            die("sched_cycle failed");
        apply(&b, &d, &st);
        if (st.starts == before)
            break;
    }
    /* as if the running jobs had started over the past hours: they end at a steady
     * rate from now on */
    b.now = 24 * 3600 * 1000;
    for (size_t i = 0; i < b.n_running; i++) {
        SchedJob *j = b.running[i];
        j->run_start_ms = b.now - (int64_t)(rng_unit(&b.rng) * (double)b.end_ms[j->id]);
        j->last_checkpoint_ms = j->placed_ms = j->run_start_ms;
    }
    /* the queue at its depth, jobs submitted over the past hour */
    for (size_t i = 0; i < b.n_jobs; i++)
        if (b.jobs[i].queued)
            sched_dequeue(&b.s, &b.jobs[i]);
    for (size_t i = 0; sched_queue_len(&b.s) < waiting; i++)
        submit(&b, est_total, b.now - 3600 * 1000 + (int64_t)(i * 3600000 / waiting));

    double wait_sum = 0, start_sum = 0, alloc_sum = 0;
    size_t n_ms = 0, n_pre = 0;
    for (unsigned cyc = 0; cyc < WARMUP + cycles; cyc++) {
        while (sched_queue_len(&b.s) < waiting)
            submit(&b, est_total, b.now);
        advance(&b, est_total);
        refresh(&b, est_total);
        d.n = 0;
        st = (CycleStats){0};
        int err;
        double dt = 0;
        if (cyc < WARMUP) {
            err = sched_cycle(&b.s, b.now, b.running, b.n_running, &d);
        } else {
            wait_sum += (double)sched_queue_len(&b.s);
            double t0 = now_s();
            err = measured_cycle(&b, &d);
            dt = (now_s() - t0) * 1e3;
        }
        if (err < 0)
            die("sched_cycle failed");
        apply(&b, &d, &st);
        if (cyc >= WARMUP) {
            ms[n_ms++] = dt;
            if (st.preempts)
                pre_ms[n_pre++] = dt;
            start_sum += (double)st.starts;
            alloc_sum += (double)b.c->used_units / ((double)gpus * GPU_UNITS);
        }
        b.now += step_ms;
    }
    qsort(ms, n_ms, sizeof(*ms), cmp_double);
    qsort(pre_ms, n_pre, sizeof(*pre_ms), cmp_double);

    printf("cluster: %s x%u (%zu nodes, %zu GPUs)\n", path, scale, b.c->n_nodes, b.c->n_gpus);
    printf("request shapes: %zu\n", b.n_reqs);
    printf("jobs waiting: %.0f\n", wait_sum / n_ms);
    printf("jobs running: %zu\n", b.n_running);
    printf("GPU allocation: %.1f%%\n", 100 * alloc_sum / n_ms);
    printf("starts per cycle: %.1f\n", start_sum / n_ms);
    printf("cycles: %zu measured after %d warm-up, %.0f s apart\n", n_ms, WARMUP,
           (double)step_ms / 1e3);
    printf("cycle ms: p50 %.1f p90 %.1f max %.1f\n", pct(ms, n_ms, 0.5), pct(ms, n_ms, 0.9),
           ms[n_ms - 1]);
    if (n_pre)
        printf("cycles that preempted: %zu, ms p50 %.1f max %.1f\n", n_pre, pct(pre_ms, n_pre, 0.5),
               pre_ms[n_pre - 1]);
    else
        printf("cycles that preempted: 0\n");

    free(ms);
    free(pre_ms);
    sched_decisions_free(&d);
    for (size_t i = 0; i < b.n_jobs; i++) {
        placement_free(&b.jobs[i].pl);
        placement_free(&b.jobs[i].moved_from);
    }
    sched_free(&b.s);
    score_cache_free(&b.cache);
    place_ctx_free(&b.ctx);
    free(b.jobs);
    free(b.end_ms);
    free(est_total);
    free(b.running);
    free(b.reqs);
    cluster_free(b.c);
    return 0;
}
