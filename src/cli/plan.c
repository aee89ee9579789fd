/* plan.c: `gpuorch plan`: place jobs, in the order given, onto the empty cluster or
 * onto a previous plan's state, and print where each worker goes, what stays pending
 * and why, and the MIG layouts the placement needs. The output JSON doubles as the
 * --state input of the next plan. */
#include "cli/cli.h"
#include "cli/output.h"
#include "core/mix.h"
#include "core/place.h"
#include "spec/render.h"
#include "spec/spec.h"
#include "util/file.h"
#include "util/macro.h"
#include "util/units.h"

#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct PlanRow {
    const char *job; /* borrowed from the job list or the state document */
    uint32_t worker;
    WorkerAlloc w;
} PlanRow;

typedef struct PendingRow {
    const char *job;
    char *reason;
} PendingRow;

typedef struct Plan {
    PlanRow *rows;
    size_t n_rows, rows_cap;
    PendingRow *pending;
    size_t n_pending, pending_cap;
    /* GPUs whose MIG layout the plan changed (node, index), final layout read at print */
    MigChange *changed;
    size_t n_changed, changed_cap;
} Plan;

static void plan_free(Plan *p)
{
    for (size_t i = 0; i < p->n_pending; i++)
        free(p->pending[i].reason);
    free(p->rows);
    free(p->pending);
    free(p->changed);
}

static int plan_row(Plan *p, const char *job, uint32_t worker, const WorkerAlloc *w)
{
    if (GROW(p->rows, p->rows_cap, p->n_rows + 1) < 0)
        return -ENOMEM;
    p->rows[p->n_rows++] = (PlanRow){.job = job, .worker = worker, .w = *w};
    return 0;
}

static int plan_pending(Plan *p, const char *job, const char *reason)
{
    if (GROW(p->pending, p->pending_cap, p->n_pending + 1) < 0)
        return -ENOMEM;
    char *copy = strdup(reason);
    if (!copy)
        return -ENOMEM;
    p->pending[p->n_pending++] = (PendingRow){.job = job, .reason = copy};
    return 0;
}

static int plan_changed(Plan *p, uint32_t node, unsigned index)
{
    for (size_t i = 0; i < p->n_changed; i++)
        if (p->changed[i].node == node && p->changed[i].index == index)
            return 0;
    if (GROW(p->changed, p->changed_cap, p->n_changed + 1) < 0)
        return -ENOMEM;
    p->changed[p->n_changed++] = (MigChange){.node = node, .index = (uint8_t)index};
    return 0;
}

/* ---- --state: a previous plan's JSON ---- */

static int state_fail(Buf *err, const char *path, const char *what, size_t i, const char *msg)
{
    buf_printf(err, "%s: %s %zu: %s", path, what, i, msg);
    return -EINVAL;
}

/* Whether the cluster can take w as it stands (the state file is input: check it). */
static bool grant_fits(const Cluster *c, const WorkerAlloc *w)
{
    const Node *n = &c->nodes[w->node];
    if (n->cpu_milli - n->cpu_used_milli < w->cpu_milli ||
        n->memory_mib - n->memory_used_mib < w->memory_mib)
        return false;
    for (unsigned i = 0; i < w->n_grants; i++) {
        const Grant *g = &w->grants[i];
        const Gpu *gpu = node_gpu_c(c, n, g->index);
        for (unsigned j = 0; j < i; j++)
            if (w->grants[j].index == g->index)
                return false;
        switch (g->kind) {
        case GRANT_WHOLE:
            if (gpu->mode != GPU_WHOLE || gpu->used_units)
                return false;
            break;
        case GRANT_SHARE:
            if (gpu->mode == GPU_MIG || gpu_free_milli(gpu) < g->milli)
                return false;
            break;
        case GRANT_MIG:
            if (gpu->mode != GPU_MIG || gpu->mig.profile_at[g->mig_start] != g->mig_profile ||
                (gpu->mig_busy & (1u << g->mig_start)))
                return false;
            break;
        }
    }
    return true;
}

static int load_state(const char *path, Cluster *c, Plan *plan, json_t **ret_doc, Buf *err)
{
    json_error_t jerr;
    json_t *doc = json_load_file(path, 0, &jerr);
    if (!doc) {
        buf_printf(err, "%s:%d: %s", path, jerr.line, jerr.text);
        return -EINVAL;
    }
    *ret_doc = doc;
    json_t *changes = json_object_get(doc, "mig_reconfigurations");
    json_t *placements = json_object_get(doc, "placements");
    if (!json_is_array(placements)) {
        buf_printf(err, "%s: not a plan: it has no 'placements' array", path);
        return -EINVAL;
    }
    size_t i;
    json_t *e;
    json_array_foreach(changes, i, e)
    {
        int node = cluster_find_node(c, json_string_value(json_object_get(e, "node")) ?: "");
        json_t *gpu = json_object_get(e, "gpu");
        if (node < 0 || !json_is_integer(gpu) || json_integer_value(gpu) < 0 ||
            json_integer_value(gpu) >= c->nodes[node].n_gpus)
            return state_fail(err, path, "mig_reconfigurations entry", i,
                              "names a node or GPU this cluster does not have");
        const GpuModel *m = node_model(c, &c->nodes[node]);
        MigLayout l;
        mig_layout_clear(&l);
        size_t k;
        json_t *inst;
        json_array_foreach(json_object_get(e, "layout"), k, inst)
        {
            int p = catalog_profile_index(m, json_string_value(json_object_get(inst, "profile")));
            json_int_t s = json_integer_value(json_object_get(inst, "start"));
            if (p < 0 || s < 0 || s >= MIG_MAX_SLOTS || l.profile_at[s] != MIG_NONE)
                return state_fail(err, path, "mig_reconfigurations entry", i,
                                  "has an instance this GPU model cannot hold");
            l.profile_at[s] = (uint8_t)p;
        }
        unsigned index = (unsigned)json_integer_value(gpu);
        if (cluster_set_mig(c, (uint32_t)node, index, &l) < 0)
            return state_fail(err, path, "mig_reconfigurations entry", i,
                              "is not a valid MIG layout for this GPU");
        if (plan_changed(plan, (uint32_t)node, index) < 0)
            return -ENOMEM;
    }
    json_array_foreach(placements, i, e)
    {
        const char *job = json_string_value(json_object_get(e, "job"));
        const char *node_name = json_string_value(json_object_get(e, "node"));
        int node = node_name ? cluster_find_node(c, node_name) : -1;
        if (!job || node < 0)
            return state_fail(err, path, "placement", i,
                              "needs a 'job' and a 'node' this cluster has");
        WorkerAlloc w = {
            .node = (uint32_t)node,
            .cpu_milli = (uint32_t)json_integer_value(json_object_get(e, "cpu_milli")),
            .memory_mib = (uint32_t)json_integer_value(json_object_get(e, "memory_mib")),
        };
        const char *msg = NULL;
        if (render_grants_from_json(c, &c->nodes[node], json_object_get(e, "gpus"), &w, &msg) < 0)
            return state_fail(err, path, "placement", i, msg);
        if (!grant_fits(c, &w))
            return state_fail(err, path, "placement", i,
                              "does not fit: its GPUs, slices, CPU or memory are already taken");
        cluster_apply_worker(c, &w);
        json_t *worker = json_object_get(e, "worker");
        if (plan_row(plan, job, (uint32_t)json_integer_value(worker), &w) < 0)
            return -ENOMEM;
    }
    return 0;
}

static bool state_has_job(const Plan *p, const char *job)
{
    for (size_t i = 0; i < p->n_rows; i++)
        if (!strcmp(p->rows[i].job, job))
            return true;
    return false;
}

/* ---- output ---- */

static void print_json(const Cluster *c, const Plan *p, const char *policy, FILE *out)
{
    Buf b = {0};
    buf_puts(&b, "{\"policy\": ");
    buf_json_str(&b, policy);
    buf_puts(&b, ",\n \"placements\": [");
    for (size_t i = 0; i < p->n_rows; i++) {
        const PlanRow *r = &p->rows[i];
        buf_puts(&b, i ? ",\n                {\"job\": " : "{\"job\": ");
        buf_json_str(&b, r->job);
        buf_printf(&b, ", \"worker\": %u, \"node\": ", r->worker);
        buf_json_str(&b, c->nodes[r->w.node].name);
        buf_puts(&b, ", \"gpus\": ");
        render_json_grants(&b, c, &r->w);
        buf_printf(&b, ", \"cpu_milli\": %u, \"memory_mib\": %u}", r->w.cpu_milli, r->w.memory_mib);
    }
    buf_puts(&b, "],\n \"pending\": [");
    for (size_t i = 0; i < p->n_pending; i++) {
        buf_puts(&b, i ? ",\n             {\"job\": " : "{\"job\": ");
        buf_json_str(&b, p->pending[i].job);
        buf_puts(&b, ", \"reason\": ");
        buf_json_str(&b, p->pending[i].reason);
        buf_putc(&b, '}');
    }
    buf_puts(&b, "],\n \"mig_reconfigurations\": [");
    for (size_t i = 0; i < p->n_changed; i++) {
        const Node *n = &c->nodes[p->changed[i].node];
        buf_puts(&b, i ? ",\n                          {\"node\": " : "{\"node\": ");
        buf_json_str(&b, n->name);
        buf_printf(&b, ", \"gpu\": %u, \"layout\": ", p->changed[i].index);
        render_json_layout(&b, node_model(c, n), &node_gpu_c(c, n, p->changed[i].index)->mig);
        buf_putc(&b, '}');
    }
    double eq = (double)c->used_units / GPU_UNITS;
    buf_printf(&b, "],\n \"summary\": {\"gpus\": %zu, \"gpu_equivalents_allocated\": ", c->n_gpus);
    render_num(&b, eq, 2);
    buf_puts(&b, ", \"allocation_pct\": ");
    render_num(&b, c->n_gpus ? 100.0 * eq / (double)c->n_gpus : 0, 2);
    buf_printf(&b, ", \"workers_placed\": %zu, \"jobs_pending\": %zu}}\n", p->n_rows, p->n_pending);
    fputs(buf_str(&b), out);
    buf_free(&b);
}

static void print_table(const Cluster *c, const Plan *p, const char *policy, FILE *out)
{
    Buf b = {0};
    buf_puts(&b, "JOB\tWORKER\tNODE\tGPUS\n");
    for (size_t i = 0; i < p->n_rows; i++) {
        const PlanRow *r = &p->rows[i];
        buf_printf(&b, "%s\t%u\t%s\t", r->job, r->worker, c->nodes[r->w.node].name);
        render_text_grants(&b, c, &r->w);
        buf_putc(&b, '\n');
    }
    fprintf(out, "Placements (policy %s):\n", policy);
    out_table(out, buf_str(&b));
    if (p->n_pending) {
        buf_reset(&b);
        buf_puts(&b, "JOB\tREASON\n");
        for (size_t i = 0; i < p->n_pending; i++)
            buf_printf(&b, "%s\t%s\n", p->pending[i].job, p->pending[i].reason);
        fprintf(out, "\nPending:\n");
        out_table(out, buf_str(&b));
    }
    if (p->n_changed) {
        buf_reset(&b);
        buf_puts(&b, "NODE\tGPU\tLAYOUT\n");
        for (size_t i = 0; i < p->n_changed; i++) {
            const Node *n = &c->nodes[p->changed[i].node];
            buf_printf(&b, "%s\t%u\t", n->name, p->changed[i].index);
            render_text_layout(&b, node_model(c, n), &node_gpu_c(c, n, p->changed[i].index)->mig);
            buf_putc(&b, '\n');
        }
        fprintf(out, "\nMIG reconfigurations:\n");
        out_table(out, buf_str(&b));
    }
    double eq = (double)c->used_units / GPU_UNITS;
    fprintf(out,
            "\n%zu GPUs, %.2f GPU-equivalents allocated (%.1f%%), %zu workers placed, %zu jobs "
            "pending\n",
            c->n_gpus, eq, c->n_gpus ? 100.0 * eq / (double)c->n_gpus : 0.0, p->n_rows,
            p->n_pending);
    buf_free(&b);
}

/* ---- the command ---- */

static void usage(FILE *f)
{
    fprintf(f, "usage: gpuorch plan --cluster FILE --jobs FILE [--policy NAME] [-o table|json]\n"
               "                    [--state PLAN.json] [--seed N]\n\n"
               "Places the jobs in the order given onto the empty cluster (or onto the state a\n"
               "previous plan's JSON describes) and prints each worker's node and GPUs, the\n"
               "pending jobs with the reason, and the MIG layouts the placement needs.\n"
               "Policies: 'gpuorch policies'.\n");
}

int cmd_plan(int argc, char **argv)
{
    static const struct option opts[] = {
        {"cluster", required_argument, NULL, 'c'}, {"jobs", required_argument, NULL, 'j'},
        {"policy", required_argument, NULL, 'p'},  {"output", required_argument, NULL, 'o'},
        {"state", required_argument, NULL, 's'},   {"seed", required_argument, NULL, 'S'},
        {"help", no_argument, NULL, 'h'},          {NULL, 0, NULL, 0},
    };
    const char *cluster_path = NULL, *jobs_path = NULL, *policy_name = "gpuorch";
    const char *format = "table", *state_path = NULL;
    uint64_t seed = 1;
    int opt;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "c:j:p:o:s:S:h", opts, NULL)) != -1) {
        switch (opt) {
        case 'c':
            cluster_path = optarg;
            break;
        case 'j':
            jobs_path = optarg;
            break;
        case 'p':
            policy_name = optarg;
            break;
        case 'o':
            format = optarg;
            break;
        case 's':
            state_path = optarg;
            break;
        case 'S': {
            int64_t v;
            if (parse_i64(optarg, &v) < 0 || v < 0) {
                fprintf(stderr, "gpuorch plan: --seed must be a whole number, not '%s'\n", optarg);
                return 2;
            }
            seed = (uint64_t)v;
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
    if (!cluster_path || !jobs_path || optind < argc) {
        usage(stderr);
        return 2;
    }
    if (strcmp(format, "table") && strcmp(format, "json")) {
        fprintf(stderr, "gpuorch plan: -o must be 'table' or 'json', not '%s'\n", format);
        return 2;
    }
    const Policy *policy = policy_find(policy_name);
    if (!policy) {
        fprintf(stderr, "gpuorch plan: unknown policy '%s' (see 'gpuorch policies')\n",
                policy_name);
        return 2;
    }

    int rc = 2;
    Buf err = {0}, why = {0};
    Cluster *c = NULL;
    JobList jobs = {0};
    Plan plan = {0};
    json_t *state = NULL;
    Request *reqs = NULL;
    bool *ok = NULL;
    Mix mix = {0};
    Placement pl = {0};
    PlaceCtx ctx = {0};
    if (spec_load_cluster(cluster_path, &c, &err) < 0 ||
        spec_load_jobs(jobs_path, &jobs, &err) < 0 ||
        (state_path && load_state(state_path, c, &plan, &state, &err) < 0)) {
        fprintf(stderr, "gpuorch plan: %s\n", buf_str(&err));
        goto out;
    }
    rc = 1;
    reqs = calloc(jobs.n ? jobs.n : 1, sizeof(*reqs));
    ok = calloc(jobs.n ? jobs.n : 1, sizeof(*ok));
    if (!reqs || !ok)
        goto oom;
    /* the expected mix is the jobs being planned, worker by worker */
    for (size_t i = 0; i < jobs.n; i++) {
        buf_reset(&why);
        ok[i] = request_from_job(c, &jobs.jobs[i], &reqs[i], &why) == 0;
        if (!ok[i]) {
            if (plan_pending(&plan, jobs.jobs[i].name, buf_str(&why)) < 0)
                goto oom;
        } else if (mix_add(&mix, &reqs[i], reqs[i].workers) < 0) {
            goto oom;
        }
    }
    mix_normalize(&mix);
    Rng rng;
    rng_seed(&rng, seed);
    if (place_ctx_init(&ctx, c, policy, &rng, NULL, &mix) < 0)
        goto oom;
    for (size_t i = 0; i < jobs.n; i++) {
        const JobSpec *j = &jobs.jobs[i];
        if (!ok[i] || state_has_job(&plan, j->name))
            continue;
        buf_reset(&why);
        int r = place_job(&ctx, c, &reqs[i], &pl, &why);
        if (r < 0)
            goto oom;
        for (size_t w = 0; w < pl.n_workers; w++)
            if (plan_row(&plan, j->name, (uint32_t)w, &pl.workers[w]) < 0)
                goto oom;
        for (size_t k = 0; k < pl.n_changes; k++)
            if (plan_changed(&plan, pl.changes[k].node, pl.changes[k].index) < 0)
                goto oom;
        if (r == 0 && plan_pending(&plan, j->name, buf_str(&why)) < 0)
            goto oom;
    }
    if (!strcmp(format, "json"))
        print_json(c, &plan, policy->name, stdout);
    else
        print_table(c, &plan, policy->name, stdout);
    rc = 0;
    goto out;
oom:
    fprintf(stderr, "gpuorch plan: out of memory\n");
out:
    place_ctx_free(&ctx);
    placement_free(&pl);
    mix_free(&mix);
    free(reqs);
    free(ok);
    plan_free(&plan);
    json_decref(state);
    job_list_free(&jobs);
    cluster_free(c);
    buf_free(&err);
    buf_free(&why);
    return rc;
}
