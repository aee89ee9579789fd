/* sim.c: `gpuorch sim`: replay a trace through the scheduling core under several
 * policies and seeds, side by side. Runs are independent and go to a pool of threads;
 * results are printed in a fixed order, so the output does not depend on timing. */
#include "sim/sim.h"
#include "cli/cli.h"
#include "cli/output.h"
#include "sim/report.h"
#include "util/macro.h"
#include "util/units.h"

#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct RunPool {
    const SimInput *in;
    const SimPolicy *policies;
    const uint64_t *seeds;
    size_t n_seeds, n_runs;
    RunResult *runs;
    int *errors;
    size_t next; /* next run to take, atomically */
    size_t done; /* runs finished, atomically */
} RunPool;

static void *worker(void *arg)
{
    RunPool *p = arg;
    for (;;) {
        size_t k = __atomic_fetch_add(&p->next, 1, __ATOMIC_RELAXED);
        if (k >= p->n_runs)
            return NULL;
        const SimPolicy *sp = &p->policies[k / p->n_seeds];
        uint64_t seed = p->seeds[k % p->n_seeds];
        p->errors[k] = p->in->opt.mode == SIM_PACKING
                           ? sim_run_packing(p->in, sp, seed, &p->runs[k])
                           : sim_run_time(p->in, sp, seed, &p->runs[k]);
        __atomic_fetch_add(&p->done, 1, __ATOMIC_RELEASE);
    }
}

static double wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A progress bar on stderr, only on a terminal and only once a run takes over a
 * second; it reads the wall clock for display and never touches the results. */
static void progress(double started, uint64_t units, uint64_t total, size_t done, size_t runs,
                     bool *shown)
{
    if (!isatty(STDERR_FILENO) || wall_s() - started < 1.0)
        return;
    double f = total ? (double)units / (double)total : 0;
    f = MAX(f, runs ? (double)done / (double)runs : 0);
    f = MIN(f, 1.0);
    int width = 40, fill = (int)(f * width);
    fprintf(stderr, "\r[%.*s%*s] %3.0f%%  %zu/%zu runs  %.0fs", fill,
            "########################################", width - fill, "", 100 * f, done, runs,
            wall_s() - started);
    *shown = true;
}

static int parse_seeds(const char *s, uint64_t **ret, size_t *ret_n)
{
    char *end;
    unsigned long long a = strtoull(s, &end, 10), b = a;
    if (end == s)
        return -EINVAL;
    if (*end == '-') {
        const char *t = end + 1;
        b = strtoull(t, &end, 10);
        if (end == t)
            return -EINVAL;
    }
    if (*end || b < a || b - a >= 1000)
        return -EINVAL;
    uint64_t *v = malloc((size_t)(b - a + 1) * sizeof(*v));
    if (!v)
        return -ENOMEM;
    for (unsigned long long x = a; x <= b; x++)
        v[x - a] = x;
    *ret = v;
    *ret_n = (size_t)(b - a + 1);
    return 0;
}

static const char *const all_packing[] = {
    "gpuorch",     "fgd",    "best-fit",  "gpu-packing", "gpu-clustering",
    "dot-product", "random", "first-fit", "k8s-default"};
static const char *const all_time[] = {"gpuorch",     "gpuorch+fifo",      "gpuorch+tiresias",
                                       "fgd",         "best-fit",          "first-fit",
                                       "k8s-default", "first-fit+tiresias"};

static int parse_policies(const char *list, SimMode mode, SimPolicy **ret, size_t *ret_n, Buf *err)
{
    char *copy = strdup(list), *save = NULL;
    SimPolicy *v = NULL;
    size_t n = 0, cap = 0;
    if (!copy)
        return -ENOMEM;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        const char *one = tok;
        const char *const *names = &one;
        size_t count = 1;
        if (!strcmp(tok, "all")) {
            names = mode == SIM_PACKING ? all_packing : all_time;
            count = mode == SIM_PACKING ? ARRAY_SIZE(all_packing) : ARRAY_SIZE(all_time);
        }
        for (size_t i = 0; i < count; i++) {
            if (GROW(v, cap, n + 1) < 0) {
                free(copy);
                free(v);
                return -ENOMEM;
            }
            if (sim_policy_parse(names[i], &v[n], err) < 0) {
                free(copy);
                free(v);
                return -EINVAL;
            }
            n++;
        }
    }
    free(copy);
    if (!n) {
        buf_puts(err, "--policy names no policy");
        free(v);
        return -EINVAL;
    }
    *ret = v;
    *ret_n = n;
    return 0;
}

static void base_name(const char *path, char *out, size_t outlen)
{
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    snprintf(out, outlen, "%s", b);
    char *dot = strrchr(out, '.');
    if (dot && dot != out)
        *dot = '\0';
}

/* The FGD authors' results sit beside the Alibaba traces in ../shared/traces. */
static bool find_paper(const char *trace, char *out, size_t outlen)
{
    char dir[4096];
    snprintf(dir, sizeof(dir), "%s", trace);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    else
        strcpy(dir, ".");
    snprintf(out, outlen, "%s/../fgd-results/fgd_summary_mean_over_10_seeds.csv", dir);
    return access(out, R_OK) == 0;
}

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: gpuorch sim --cluster FILE --trace FILE [--format "
        "auto|alibaba2023|philly|gpuorch]\n"
        "                   [--policy P[,P...]|all] [--mode time|packing] [--seed N | --seeds "
        "A-B]\n"
        "                   [--events FILE] [-o table|json] [--out DIR] [--compare "
        "FGD_SUMMARY.csv]\n"
        "                   [--reconfig-delay DURATION] [--move-delay DURATION] [--tune RATIO]\n"
        "                   [--threads N] [--oracle-estimates] [--min-runtime D] [--half-life D]\n"
        "                   [--grace D] [--guarantee-tolerance D] [--window FROM-TO]\n\n"
        "Replays a trace through the scheduling core. A policy is PLACEMENT[+ORDER]: a placement\n"
        "policy ('gpuorch policies') and a queue order (fifo, tiresias, priority, kube), e.g.\n"
        "best-fit+tiresias; 'tiresias' alone is gpuorch+tiresias; 'all' lists the usual set.\n"
        "--mode packing replays the FGD paper's protocol (pods never leave, demand tuned to\n"
        "--tune x capacity, default 1.3); time mode runs jobs for their durations. The default\n"
        "mode is packing for Alibaba pod lists and time otherwise. --compare (found on its own\n"
        "next to ../shared/traces) puts the FGD authors' figures beside ours.\n");
}

int cmd_sim(int argc, char **argv)
{
    static const struct option opts[] = {
        {"cluster", required_argument, NULL, 'c'},
        {"trace", required_argument, NULL, 't'},
        {"format", required_argument, NULL, 'f'},
        {"policy", required_argument, NULL, 'p'},
        {"mode", required_argument, NULL, 'm'},
        {"seed", required_argument, NULL, 's'},
        {"seeds", required_argument, NULL, 'S'},
        {"events", required_argument, NULL, 'e'},
        {"output", required_argument, NULL, 'o'},
        {"out", required_argument, NULL, 'O'},
        {"compare", required_argument, NULL, 'C'},
        {"reconfig-delay", required_argument, NULL, 'r'},
        {"move-delay", required_argument, NULL, 'D'},
        {"tune", required_argument, NULL, 'T'},
        {"threads", required_argument, NULL, 'j'},
        {"oracle-estimates", no_argument, NULL, 'E'},
        {"min-runtime", required_argument, NULL, 'M'},
        {"half-life", required_argument, NULL, 'H'},
        {"grace", required_argument, NULL, 'G'},
        {"guarantee-tolerance", required_argument, NULL, 'g'},
        {"window", required_argument, NULL, 'W'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *cluster_path = NULL, *trace_path = NULL, *policy_list = "all", *mode_s = NULL;
    const char *seeds_s = "42", *events_path = NULL, *format = "table", *out_dir = NULL;
    const char *compare_path = NULL;
    int trace_fmt = TRACE_AUTO;
    SimOptions opt = {.reconfig_delay_ms = 10000,
                      .move_delay_ms = 60000,
                      .tune_ratio = 1.3,
                      .timeline_points = 600,
                      .min_runtime_ms = SCHED_MIN_RUNTIME_MS,
                      .half_life_ms = SCHED_HALF_LIFE_MS,
                      .grace_ms = SCHED_GRACE_MS,
                      .oom_after_ms = 30 * 1000,
                      .guarantee_tolerance_ms = 2 * 60 * 1000};
    long threads = sysconf(_SC_NPROCESSORS_ONLN);
    int o;
    optind = 1;
    while ((o = getopt_long(argc, argv, "c:t:f:p:m:s:S:e:o:O:C:r:D:T:j:EM:H:G:g:W:h", opts,
                            NULL)) != -1) {
        switch (o) {
        case 'c':
            cluster_path = optarg;
            break;
        case 't':
            trace_path = optarg;
            break;
        case 'f':
            if ((trace_fmt = trace_format_from_name(optarg)) < 0) {
                fprintf(stderr, "gpuorch sim: --format must be auto, alibaba2023, philly or "
                                "gpuorch\n");
                return 2;
            }
            break;
        case 'p':
            policy_list = optarg;
            break;
        case 'm':
            mode_s = optarg;
            break;
        case 's':
        case 'S':
            seeds_s = optarg;
            break;
        case 'e':
            events_path = optarg;
            break;
        case 'o':
            format = optarg;
            break;
        case 'O':
            out_dir = optarg;
            break;
        case 'C':
            compare_path = optarg;
            break;
        case 'r':
            if (parse_duration_ms(optarg, &opt.reconfig_delay_ms) < 0) {
                fprintf(stderr, "gpuorch sim: --reconfig-delay: not a duration: '%s'\n", optarg);
                return 2;
            }
            break;
        case 'D':
            if (parse_duration_ms(optarg, &opt.move_delay_ms) < 0) {
                fprintf(stderr, "gpuorch sim: --move-delay: not a duration: '%s'\n", optarg);
                return 2;
            }
            break;
        case 'T': {
            int64_t milli;
            if (parse_fixed(optarg, 3, &milli) < 0 || milli <= 0 || milli > 100000) {
                fprintf(stderr, "gpuorch sim: --tune must be a positive ratio like 1.3\n");
                return 2;
            }
            opt.tune_ratio = (double)milli / 1000.0;
            break;
        }
        case 'j': {
            int64_t v;
            if (parse_i64(optarg, &v) < 0 || v < 1 || v > 256) {
                fprintf(stderr, "gpuorch sim: --threads must be from 1 to 256\n");
                return 2;
            }
            threads = (long)v;
            break;
        }
        case 'E':
            opt.oracle_estimates = true;
            break;
        case 'M':
        case 'H':
        case 'G':
        case 'g': {
            int64_t *dst = o == 'M'   ? &opt.min_runtime_ms
                           : o == 'H' ? &opt.half_life_ms
                           : o == 'G' ? &opt.grace_ms
                                      : &opt.guarantee_tolerance_ms;
            if (parse_duration_ms(optarg, dst) < 0) {
                fprintf(stderr, "gpuorch sim: not a duration: '%s'\n", optarg);
                return 2;
            }
            break;
        }
        case 'W': {
            /* FROM-TO, durations from the first submission: "4h-24h" */
            char from[64], *dash = strchr(optarg, '-');
            size_t fl = dash ? (size_t)(dash - optarg) : 0;
            if (!dash || fl >= sizeof(from) ||
                (memcpy(from, optarg, fl), from[fl] = '\0',
                 parse_duration_ms(from, &opt.window_from_ms) < 0) ||
                parse_duration_ms(dash + 1, &opt.window_to_ms) < 0 ||
                opt.window_to_ms <= opt.window_from_ms) {
                fprintf(stderr, "gpuorch sim: --window must be FROM-TO, like 4h-24h\n");
                return 2;
            }
            break;
        }
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (!cluster_path || !trace_path || optind < argc) {
        usage(stderr);
        return 2;
    }
    if (strcmp(format, "table") && strcmp(format, "json")) {
        fprintf(stderr, "gpuorch sim: -o must be 'table' or 'json'\n");
        return 2;
    }
    if (mode_s && strcmp(mode_s, "time") && strcmp(mode_s, "packing")) {
        fprintf(stderr, "gpuorch sim: --mode must be 'time' or 'packing'\n");
        return 2;
    }
    uint64_t *seeds = NULL;
    size_t n_seeds = 0;
    if (parse_seeds(seeds_s, &seeds, &n_seeds) < 0) {
        fprintf(stderr, "gpuorch sim: seeds must be N or A-B (at most 1000 seeds): '%s'\n",
                seeds_s);
        return 2;
    }

    int rc = 2;
    Buf err = {0};
    Cluster *c = NULL;
    JobList jobs = {0};
    SimPolicy *policies = NULL;
    size_t n_policies = 0;
    SimInput in = {0};
    RunResult *runs = NULL;
    int *errors = NULL;
    PaperFigures paper = {0};
    pthread_t *tids = NULL;
    char trace_name[256], cluster_name[256], paper_path[4096];
    if (spec_load_cluster(cluster_path, &c, &err) < 0 ||
        trace_load(trace_path, (TraceFormat)trace_fmt, &jobs, &err) < 0) {
        fprintf(stderr, "gpuorch sim: %s\n", buf_str(&err));
        goto out;
    }
    if (mode_s)
        opt.mode = !strcmp(mode_s, "packing") ? SIM_PACKING : SIM_TIME;
    else {
        char text[512] = "";
        FILE *f = fopen(trace_path, "r");
        if (f) {
            if (!fgets(text, sizeof(text), f))
                text[0] = '\0';
            fclose(f);
        }
        opt.mode = strstr(text, "gpu_milli") ? SIM_PACKING : SIM_TIME;
    }
    if (parse_policies(policy_list, opt.mode, &policies, &n_policies, &err) < 0) {
        fprintf(stderr, "gpuorch sim: %s\n", buf_str(&err));
        goto out;
    }
    if (!compare_path && opt.mode == SIM_PACKING &&
        find_paper(trace_path, paper_path, sizeof(paper_path)))
        compare_path = paper_path;
    if (compare_path && paper_load(compare_path, &paper, &err) < 0) {
        fprintf(stderr, "gpuorch sim: %s\n", buf_str(&err));
        goto out;
    }
    rc = 1;
    opt.events = events_path != NULL;
    base_name(trace_path, trace_name, sizeof(trace_name));
    snprintf(cluster_name, sizeof(cluster_name), "%s", c->name);
    uint64_t units = 0;
    in = (SimInput){
        .cluster = c, .jobs = &jobs, .trace_name = trace_name, .opt = opt, .progress = &units};
    if (sim_prepare(&in) < 0)
        goto oom;
    size_t n_runs = n_policies * n_seeds;
    runs = calloc(n_runs, sizeof(*runs));
    errors = calloc(n_runs, sizeof(*errors));
    threads = MIN(threads, (long)n_runs);
    tids = calloc((size_t)threads, sizeof(*tids));
    if (!runs || !errors || !tids)
        goto oom;
    /* work estimate for the progress bar: pods (packing) or arrivals (time) per run */
    double per_run = (double)jobs.n;
    if (opt.mode == SIM_PACKING && c->n_gpus) {
        double demand = 0;
        for (size_t i = 0; i < jobs.n; i++) {
            const JobSpec *j = &jobs.jobs[i];
            demand += j->req == REQ_GPUS       ? j->gpus * 1000.0
                      : j->req == REQ_FRACTION ? j->fraction_milli
                                               : 0;
        }
        double ratio = demand / (double)in.prep.capacity_milli;
        if (ratio > 0 && ratio < opt.tune_ratio)
            per_run *= opt.tune_ratio / ratio;
    }
    uint64_t total_units = (uint64_t)(per_run * (double)n_runs);
    RunPool pool = {.in = &in,
                    .policies = policies,
                    .seeds = seeds,
                    .n_seeds = n_seeds,
                    .n_runs = n_runs,
                    .runs = runs,
                    .errors = errors};
    double started = wall_s();
    long spawned = 0;
    for (; spawned < threads; spawned++)
        if (pthread_create(&tids[spawned], NULL, worker, &pool) != 0)
            break;
    if (!spawned)
        worker(&pool);
    bool shown = false;
    while (__atomic_load_n(&pool.done, __ATOMIC_ACQUIRE) < n_runs && spawned) {
        struct timespec nap = {.tv_nsec = 100 * 1000 * 1000};
        nanosleep(&nap, NULL);
        progress(started, __atomic_load_n(&units, __ATOMIC_RELAXED), total_units,
                 __atomic_load_n(&pool.done, __ATOMIC_RELAXED), n_runs, &shown);
    }
    for (long i = 0; i < spawned; i++)
        pthread_join(tids[i], NULL);
    if (shown)
        fprintf(stderr, "\r%*s\r", 79, "");
    for (size_t k = 0; k < n_runs; k++)
        if (errors[k] < 0) {
            fprintf(stderr, "gpuorch sim: run %s seed %llu failed: %s\n",
                    policies[k / n_seeds].name, (unsigned long long)seeds[k % n_seeds],
                    strerror(-errors[k]));
            goto out;
        }

    SimReport rep = {.mode = opt.mode,
                     .cluster_name = cluster_name,
                     .trace_name = trace_name,
                     .gpus = (double)c->n_gpus,
                     .policies = policies,
                     .n_policies = n_policies,
                     .seeds = seeds,
                     .n_seeds = n_seeds,
                     .runs = runs,
                     .paper = compare_path ? &paper : NULL,
                     .window_from_ms = opt.window_from_ms,
                     .window_to_ms = opt.window_to_ms};
    if (events_path) {
        FILE *f = fopen(events_path, "w");
        if (!f) {
            fprintf(stderr, "gpuorch sim: %s: %s\n", events_path, strerror(errno));
            goto out;
        }
        for (size_t k = 0; k < n_runs; k++)
            fwrite(buf_str(&runs[k].events), 1, runs[k].events.len, f);
        if (fclose(f) != 0) {
            fprintf(stderr, "gpuorch sim: %s: %s\n", events_path, strerror(errno));
            goto out;
        }
    }
    if (out_dir && report_write_dir(&rep, out_dir, &err) < 0) {
        fprintf(stderr, "gpuorch sim: %s\n", buf_str(&err));
        goto out;
    }
    if (!strcmp(format, "json")) {
        Buf b = {0};
        report_json(&rep, &b);
        fputs(buf_str(&b), stdout);
        buf_free(&b);
    } else {
        report_table(&rep, stdout, out_table);
    }
    rc = 0;
    goto out;
oom:
    fprintf(stderr, "gpuorch sim: out of memory\n");
out:
    for (size_t k = 0; runs && k < n_policies * n_seeds; k++)
        run_result_free(&runs[k]);
    free(runs);
    free(errors);
    free(tids);
    paper_free(&paper);
    sim_input_free(&in);
    free(policies);
    free(seeds);
    job_list_free(&jobs);
    cluster_free(c);
    buf_free(&err);
    return rc;
}
