/* metrics.c: GET /metrics (the Prometheus text format 0.0.4), GET /healthz and /readyz. The
 * gauges are read from the model under its lock at scrape time; the counters and the
 * cycle-time histogram are kept by the scheduler thread (ServerCounters). */
#include "server/api.h"

#include "util/macro.h"

#include <stdlib.h>
#include <string.h>

/* A label value, escaped as the text format wants (backslash, quote, newline). */
static void label(Buf *b, const char *v)
{
    buf_putc(b, '"');
    for (; v && *v; v++) {
        if (*v == '\\' || *v == '"')
            buf_putc(b, '\\');
        if (*v == '\n')
            buf_puts(b, "\\n");
        else
            buf_putc(b, *v);
    }
    buf_putc(b, '"');
}

static void head(Buf *b, const char *name, const char *type, const char *help)
{
    buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void gpu_gauges(Server *s, Buf *b)
{
    const Cluster *c = s->c;
    size_t nm = c->n_models, nt = c->n_teams + 1; /* [n_teams]: jobs without a team */
    uint32_t *gpus = calloc(nm, sizeof(*gpus));
    uint64_t *alloc = calloc(nm * nt, sizeof(*alloc));
    uint64_t *busy = calloc(nm, sizeof(*busy));
    if (!gpus || !alloc || !busy) {
        b->oom = true;
        goto out;
    }
    for (size_t i = 0; i < c->n_nodes; i++)
        gpus[c->nodes[i].model] += c->nodes[i].n_gpus;
    for (size_t k = 0; k < s->n_holding; k++) {
        const ServerJob *j = s->holding[k];
        size_t t = j->sj.team < c->n_teams ? j->sj.team : c->n_teams;
        for (size_t w = 0; w < j->sj.pl.n_workers; w++) {
            const WorkerAlloc *wa = &j->sj.pl.workers[w];
            uint8_t m = c->nodes[wa->node].model;
            uint32_t units = worker_units(c, wa);
            alloc[m * nt + t] += units;
            bool running = w < j->life.n_workers && j->life.workers[w].state == LIFE_WORKER_RUNNING;
            if (running && s->nodes[wa->node].liveness == NODE_READY)
                busy[m] += units;
        }
    }

    head(b, "gpuorch_gpus", "gauge", "GPUs in the cluster, by model.");
    for (size_t m = 0; m < nm; m++)
        if (gpus[m]) {
            buf_puts(b, "gpuorch_gpus{model=");
            label(b, c->models[m].m.name);
            buf_printf(b, "} %u\n", gpus[m]);
        }
    head(b, "gpuorch_gpus_allocated", "gauge",
         "GPU-equivalents allocated to jobs, by model and team.");
    for (size_t m = 0; m < nm; m++)
        for (size_t t = 0; t < nt; t++)
            if (alloc[m * nt + t] || (gpus[m] && t < c->n_teams)) {
                buf_puts(b, "gpuorch_gpus_allocated{model=");
                label(b, c->models[m].m.name);
                buf_puts(b, ",team=");
                label(b, t < c->n_teams ? c->teams[t].name : "");
                buf_printf(b, "} %.6g\n", (double)alloc[m * nt + t] / GPU_UNITS);
            }
    head(b, "gpuorch_gpus_busy", "gauge",
         "GPU-equivalents allocated on ready nodes to running workers, by model.");
    for (size_t m = 0; m < nm; m++)
        if (gpus[m]) {
            buf_puts(b, "gpuorch_gpus_busy{model=");
            label(b, c->models[m].m.name);
            buf_printf(b, "} %.6g\n", (double)busy[m] / GPU_UNITS);
        }
out:
    free(gpus);
    free(alloc);
    free(busy);
}

typedef enum DcgmField { DCGM_UTIL, DCGM_FB_USED, DCGM_POWER, DCGM_TEMP } DcgmField;

/* The GPUs' readings under the names and default labels of NVIDIA's DCGM exporter
 * (dcgm-exporter's default-counters.csv), so dashboards made for it work here: only
 * GPUs of ready nodes whose agents reported the reading. */
static void dcgm_metric(Server *s, Buf *b, const char *name, const char *type, const char *help,
                        DcgmField which)
{
    bool headed = false;
    for (size_t i = 0; i < s->c->n_nodes; i++) {
        const NodeState *ns = &s->nodes[i];
        if (ns->liveness != NODE_READY)
            continue;
        for (size_t k = 0; k < ns->n_samples; k++) {
            const NodeGpuSample *g = &ns->samples[k];
            bool has = which == DCGM_UTIL      ? g->has_busy
                       : which == DCGM_FB_USED ? g->has_memory
                       : which == DCGM_POWER   ? g->has_power
                                               : g->has_temperature;
            if (!has)
                continue;
            if (!headed)
                head(b, name, type, help);
            headed = true;
            buf_printf(b, "%s{gpu=\"%u\",UUID=", name, g->index);
            label(b, g->uuid);
            buf_puts(b, ",modelName=");
            label(b, g->name);
            buf_puts(b, ",Hostname=");
            label(b, s->c->nodes[i].name);
            if (which == DCGM_UTIL)
                buf_printf(b, "} %.6g\n", g->busy_pct);
            else if (which == DCGM_FB_USED)
                buf_printf(b, "} %llu\n", (unsigned long long)g->memory_used_mib);
            else if (which == DCGM_POWER)
                buf_printf(b, "} %.6g\n", g->power_w);
            else
                buf_printf(b, "} %d\n", g->temperature_c);
        }
    }
}

static void dcgm_metrics(Server *s, Buf *b)
{
    dcgm_metric(s, b, "DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", DCGM_UTIL);
    dcgm_metric(s, b, "DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).",
                DCGM_FB_USED);
    dcgm_metric(s, b, "DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", DCGM_POWER);
    dcgm_metric(s, b, "DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", DCGM_TEMP);
}

static void job_metrics(Server *s, Buf *b)
{
    uint64_t queued[PRIO_COUNT] = {0};
    for (size_t i = 0; i < s->n_resident; i++) {
        const ServerJob *j = s->resident[i];
        if (j->st.state == JOB_PENDING && j->st.priority < PRIO_COUNT)
            queued[j->st.priority]++;
    }
    head(b, "gpuorch_queue_length", "gauge", "Pending jobs, by priority class.");
    for (int p = 0; p < PRIO_COUNT; p++)
        buf_printf(b, "gpuorch_queue_length{priority=\"%s\"} %llu\n", priority_name((Priority)p),
                   (unsigned long long)queued[p]);

    const ServerCounters *k = &s->counters;
    head(b, "gpuorch_jobs_started_total", "counter", "Job runs started.");
    buf_printf(b, "gpuorch_jobs_started_total %llu\n", (unsigned long long)k->started);
    head(b, "gpuorch_jobs_finished_total", "counter", "Jobs ended, by result.");
    for (int st = 0; st < JOB_STATE_COUNT; st++)
        if (job_state_ended((JobState)st))
            buf_printf(b, "gpuorch_jobs_finished_total{result=\"%s\"} %llu\n",
                       job_state_name((JobState)st), (unsigned long long)k->finished[st]);
    head(b, "gpuorch_jobs_preempted_total", "counter", "Job runs preempted.");
    buf_printf(b, "gpuorch_jobs_preempted_total %llu\n", (unsigned long long)k->preempted);
    head(b, "gpuorch_jobs_requeued_lost_total", "counter",
         "Job runs requeued because a node was lost.");
    buf_printf(b, "gpuorch_jobs_requeued_lost_total %llu\n", (unsigned long long)k->requeued_lost);
    head(b, "gpuorch_spot_interruptions_total", "counter",
         "Interruption notices reported by nodes' agents (their cloud takes them back).");
    buf_printf(b, "gpuorch_spot_interruptions_total %llu\n",
               (unsigned long long)k->spot_interruptions);

    /* ServerCounters counts each cycle in the first bucket it fits; Prometheus buckets
     * are cumulative. */
    static const char *const le[ARRAY_SIZE(k->cycle_buckets)] = {"0.001", "0.005", "0.01", "0.05",
                                                                 "0.1",   "0.5",   "1",    "+Inf"};
    head(b, "gpuorch_schedule_cycle_seconds", "histogram", "Time one scheduling cycle took.");
    uint64_t cum = 0;
    for (size_t i = 0; i < ARRAY_SIZE(le); i++) {
        cum += k->cycle_buckets[i];
        buf_printf(b, "gpuorch_schedule_cycle_seconds_bucket{le=\"%s\"} %llu\n", le[i],
                   (unsigned long long)cum);
    }
    buf_printf(b, "gpuorch_schedule_cycle_seconds_sum %.9g\n", k->cycle_seconds_sum);
    buf_printf(b, "gpuorch_schedule_cycle_seconds_count %llu\n", (unsigned long long)k->cycles);

    uint64_t nodes[NODE_LIVENESS_COUNT] = {0};
    for (size_t i = 0; i < s->c->n_nodes; i++)
        nodes[s->nodes[i].liveness < NODE_LIVENESS_COUNT ? s->nodes[i].liveness : NODE_UNKNOWN]++;
    head(b, "gpuorch_nodes", "gauge", "Nodes, by the state of their agent.");
    for (unsigned l = 0; l < NODE_LIVENESS_COUNT; l++)
        buf_printf(b, "gpuorch_nodes{state=\"%s\"} %llu\n", node_liveness_name((NodeLiveness)l),
                   (unsigned long long)nodes[l]);
    /* which ones, for an alert that names them: a node is mismatched until someone fixes
     * the cluster file or the agent */
    head(b, "gpuorch_node_mismatched", "gauge",
         "1 for each node whose agent reports other GPUs than the cluster file declares.");
    for (size_t i = 0; i < s->c->n_nodes; i++)
        if (s->nodes[i].liveness == NODE_MISMATCHED) {
            buf_puts(b, "gpuorch_node_mismatched{node=");
            label(b, s->c->nodes[i].name);
            buf_puts(b, "} 1\n");
        }
    head(b, "gpuorch_gpu_fenced", "gauge",
         "1 for each GPU fenced because its agent reports it sick (reason: why).");
    for (size_t i = 0; i < s->c->n_nodes; i++)
        for (unsigned g = 0; g < s->c->nodes[i].n_gpus && g < NODE_MAX_GPUS; g++)
            if (s->nodes[i].gpu_sick_mask & (1u << g)) {
                buf_puts(b, "gpuorch_gpu_fenced{node=");
                label(b, s->c->nodes[i].name);
                buf_printf(b, ",gpu=\"%u\",reason=", g);
                label(b, s->nodes[i].gpu_sick[g]);
                buf_puts(b, "} 1\n");
            }
}

/* Budgets, as the scheduler's last cycle counted them (metering.c). */
static void budget_metrics(Server *s, Buf *b)
{
    const Cluster *c = s->c;
    const Tenancy *ten = &s->sched.ten;
    head(b, "gpuorch_team_used_gpu_hours_month", "gauge",
         "GPU-hours a team used this calendar month (UTC), ended and running work.");
    for (size_t t = 0; t < c->n_teams && t < ten->n_teams; t++) {
        buf_puts(b, "gpuorch_team_used_gpu_hours_month{team=");
        label(b, c->teams[t].name);
        buf_printf(b, "} %.6f\n", (double)ten->teams[t].month_micro_hours / 1e6);
    }
    head(b, "gpuorch_team_budget_gpu_hours", "gauge",
         "A team's GPU-hour budget per month (0: none).");
    for (size_t t = 0; t < c->n_teams; t++) {
        buf_puts(b, "gpuorch_team_budget_gpu_hours{team=");
        label(b, c->teams[t].name);
        buf_printf(b, "} %.6g\n", c->teams[t].budget_gpu_hours);
    }
    head(b, "gpuorch_team_budget_exhausted", "gauge",
         "1 while a team has used its monthly budget: its non-production work waits.");
    for (size_t t = 0; t < c->n_teams && t < ten->n_teams; t++) {
        buf_puts(b, "gpuorch_team_budget_exhausted{team=");
        label(b, c->teams[t].name);
        buf_printf(b, "} %d\n", ten->teams[t].over_budget ? 1 : 0);
    }
}

void api_metrics(Server *s, const HttpRequest *rq, HttpResponse *rp)
{
    Buf b = {0};
    /* a standby answers 0 (standby.c): alerts can count the leaders of a group */
    head(&b, "gpuorch_leader", "gauge", "1 when this server leads its store (docs/ha.md).");
    buf_puts(&b, "gpuorch_leader 1\n");
    server_lock(s);
    gpu_gauges(s, &b);
    dcgm_metrics(s, &b);
    job_metrics(s, &b);
    budget_metrics(s, &b);
    pthread_mutex_unlock(&s->lock);
    if (b.oom) {
        buf_free(&b);
        http_reply_error(rp, 500, "out of memory");
        return;
    }
    buf_free(&rp->body);
    rp->body = b;
    rp->status = 200;
    rp->content_type = "text/plain; version=0.0.4; charset=utf-8";
}

void api_healthz(Server *s, const HttpRequest *rq, HttpResponse *rp)
{
    if (store_ping(s->store) < 0) {
        http_reply_error(rp, 503, "the store does not answer");
        return;
    }
    http_reply_text(rp, 200, "text/plain; charset=utf-8", "ok\n", 3);
}

/* Ready to take requests: this server leads (a standby answers 503, standby.c), so a load
 * balancer in front of an HA group sends clients to the leader. */
void api_readyz(Server *s, const HttpRequest *rq, HttpResponse *rp)
{
    (void)rq;
    if (store_ping(s->store) < 0) {
        http_reply_error(rp, 503, "the store does not answer");
        return;
    }
    http_reply_text(rp, 200, "text/plain; charset=utf-8", "leader\n", 7);
}
