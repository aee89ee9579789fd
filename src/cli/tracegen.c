/* tracegen.c: `gpuorch trace gen`: a synthetic workload from a mix file, written as the
 * job CSV that `gpuorch sim --trace` and `gpuorch validate` read. The generation itself
 * lives in src/sim/tracegen.c; this file reads the options, writes the file and says
 * on stderr what it wrote. */
#include "sim/tracegen.h"
#include "cli/cli.h"
#include "util/units.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_HOURS_MILLI (INT64_C(1000000) * 1000) /* a million hours */

static void usage_trace(FILE *f)
{
    fprintf(f, "usage: gpuorch trace gen --mix FILE --hours H [--seed N] [-o FILE]\n\n"
               "Generates a workload from a mix (docs/trace-gen.md): inference services, gang\n"
               "training drawn from the Philly table, batch and interactive jobs, with Poisson\n"
               "arrivals over H hours (decimals allowed). The same mix, seed (default 1) and\n"
               "hours give the same bytes. Writes the job CSV (docs/job-files.md) to FILE, or to\n"
               "standard output without -o or with '-o -'; a summary goes to standard error.\n"
               "Exit 0 on success, 2 on bad usage or a bad mix, 1 when writing fails.\n");
}

static const char *const kind_names[KIND_COUNT] = {"inference", "training", "batch", "interactive"};

/* One line on stderr: jobs by kind, and the GPU time offered. Whole GPUs and MPS shares
 * count in GPU-hours; MIG and memory requests in slice-hours (their size in GPUs depends
 * on the slice the scheduler picks). */
static void summary(const JobList *l, const char *out, uint64_t seed, int64_t hours_milli)
{
    size_t by_kind[KIND_COUNT] = {0};
    double gpu_h = 0, slice_h = 0;
    for (size_t i = 0; i < l->n; i++) {
        const JobSpec *j = &l->jobs[i];
        by_kind[j->kind < KIND_COUNT ? j->kind : KIND_BATCH]++;
        double h = (double)j->duration_ms / 3.6e6 * j->workers;
        if (j->req == REQ_GPUS)
            gpu_h += h * j->gpus;
        else if (j->req == REQ_FRACTION)
            gpu_h += h * j->fraction_milli / 1000.0;
        else if (j->req != REQ_NONE)
            slice_h += h;
    }
    fprintf(stderr, "gpuorch trace gen: wrote %s: %zu jobs over %.10gh, seed %" PRIu64 ":",
            out ? out : "standard output", l->n, (double)hours_milli / 1000.0, seed);
    for (int k = 0; k < KIND_COUNT; k++)
        fprintf(stderr, " %s %zu%s", kind_names[k], by_kind[k], k + 1 < KIND_COUNT ? "," : ";");
    fprintf(stderr, " %.1f GPU-hours of whole GPUs and shares, %.1f slice-hours\n", gpu_h, slice_h);
}

static int write_out(const char *path, const Buf *csv)
{
    FILE *f = path ? fopen(path, "w") : stdout;
    if (!f) {
        fprintf(stderr, "gpuorch trace gen: %s: %s\n", path, strerror(errno));
        return 1;
    }
    size_t n = fwrite(buf_str(csv), 1, csv->len, f);
    int bad = n != csv->len || ferror(f);
    if (path)
        bad |= fclose(f) != 0;
    else
        bad |= fflush(f) != 0;
    if (bad) {
        fprintf(stderr, "gpuorch trace gen: %s: write failed\n", path ? path : "standard output");
        return 1;
    }
    return 0;
}

static int trace_gen(int argc, char **argv)
{
    static const struct option opts[] = {
        {"mix", required_argument, NULL, 'm'},   {"seed", required_argument, NULL, 's'},
        {"hours", required_argument, NULL, 'H'}, {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},        {NULL, 0, NULL, 0},
    };
    const char *mix_path = NULL, *out = NULL, *hours_s = NULL;
    uint64_t seed = 1;
    int o;
    optind = 1;
    while ((o = getopt_long(argc, argv, "m:s:H:o:h", opts, NULL)) != -1) {
        int64_t v;
        switch (o) {
        case 'm':
            mix_path = optarg;
            break;
        case 's':
            if (parse_i64(optarg, &v) < 0 || v < 0) {
                fprintf(stderr, "gpuorch trace gen: --seed must be a whole number, not '%s'\n",
                        optarg);
                return 2;
            }
            seed = (uint64_t)v;
            break;
        case 'H':
            hours_s = optarg;
            break;
        case 'o':
            out = strcmp(optarg, "-") ? optarg : NULL;
            break;
        case 'h':
            usage_trace(stdout);
            return 0;
        default:
            usage_trace(stderr);
            return 2;
        }
    }
    if (!mix_path || !hours_s || optind < argc) {
        if (optind < argc)
            fprintf(stderr, "gpuorch trace gen: unexpected argument '%s'\n", argv[optind]);
        else
            fprintf(stderr, "gpuorch trace gen: --mix and --hours are required\n");
        usage_trace(stderr);
        return 2;
    }
    int64_t hours_milli;
    if (parse_fixed(hours_s, 3, &hours_milli) < 0 || hours_milli <= 0 ||
        hours_milli > MAX_HOURS_MILLI) {
        fprintf(stderr,
                "gpuorch trace gen: --hours must be a number of hours above 0 (at most 1000000, "
                "3 decimals), not '%s'\n",
                hours_s);
        return 2;
    }
    TraceMix mix = {0};
    Buf err = {0};
    int r = tracegen_mix_load(mix_path, &mix, &err);
    JobList jobs = {0};
    if (r == 0)
        r = tracegen_generate(&mix, seed, hours_milli * 3600, &jobs, &err);
    tracegen_mix_free(&mix);
    if (r < 0) {
        if (err.len)
            fprintf(stderr, "%s\n", buf_str(&err));
        else
            fprintf(stderr, "gpuorch trace gen: %s\n", strerror(-r));
        buf_free(&err);
        return r == -ENOMEM ? 1 : 2;
    }
    buf_free(&err);
    Buf csv = {0};
    int rc = 0;
    if (tracegen_write_csv(&jobs, &csv) < 0) {
        fprintf(stderr, "gpuorch trace gen: out of memory\n");
        rc = 1;
    } else {
        rc = write_out(out, &csv);
    }
    if (rc == 0)
        summary(&jobs, out, seed, hours_milli);
    buf_free(&csv);
    job_list_free(&jobs);
    return rc;
}

int cmd_trace(int argc, char **argv)
{
    if (argc < 2) {
        usage_trace(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage_trace(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "gen"))
        return trace_gen(argc - 1, argv + 1);
    fprintf(stderr, "gpuorch trace: unknown subcommand '%s'\n", argv[1]);
    usage_trace(stderr);
    return 2;
}
