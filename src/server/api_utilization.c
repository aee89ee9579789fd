/* api_utilization.c: the ring of utilisation samples (utilization.h) and GET
 * /api/v1/utilization?minutes=N, which replies with the samples of the last N minutes
 * (1 to 60, default 60) column-wise: one list of times, and per GPU model of the
 * cluster its GPU count and the allocated and busy GPU-equivalents at those times,
 * and what the agents measured (measured busy GPU-equivalents, the GPUs that reported,
 * memory used), the shape a chart draws from. */
#include "server/api.h"
#include "server/utilization.h"

#include "util/macro.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define UTIL_DEFAULT_MINUTES 60
#define UTIL_MAX_MINUTES     (UTIL_SLOTS * UTIL_PERIOD_MS / 60000)

int utilization_init(Utilization *u, size_t n_models)
{
    *u = (Utilization){.n_models = n_models};
    size_t n = UTIL_SLOTS * (n_models ? n_models : 1);
    u->alloc = calloc(n, sizeof(*u->alloc));
    u->busy = calloc(n, sizeof(*u->busy));
    u->measured = calloc(n, sizeof(*u->measured));
    u->measured_gpus = calloc(n, sizeof(*u->measured_gpus));
    u->memory_used_mib = calloc(n, sizeof(*u->memory_used_mib));
    if (!u->alloc || !u->busy || !u->measured || !u->measured_gpus || !u->memory_used_mib) {
        utilization_free(u);
        return -ENOMEM;
    }
    return 0;
}

void utilization_free(Utilization *u)
{
    free(u->alloc);
    free(u->busy);
    free(u->measured);
    free(u->measured_gpus);
    free(u->memory_used_mib);
    u->alloc = u->busy = u->measured = u->measured_gpus = u->memory_used_mib = NULL;
    u->count = u->head = 0;
}

void utilization_push(Utilization *u, int64_t t_ms, const double *alloc, const double *busy,
                      const UtilMeasured *measured)
{
    size_t slot = u->head, nm = u->n_models, size = nm * sizeof(double);
    u->t_ms[slot] = t_ms;
    if (nm) {
        memcpy(u->alloc + slot * nm, alloc, size);
        memcpy(u->busy + slot * nm, busy, size);
        if (measured) {
            memcpy(u->measured + slot * nm, measured->busy, size);
            memcpy(u->measured_gpus + slot * nm, measured->gpus, size);
            memcpy(u->memory_used_mib + slot * nm, measured->memory_used_mib, size);
        } else {
            memset(u->measured + slot * nm, 0, size);
            memset(u->measured_gpus + slot * nm, 0, size);
            memset(u->memory_used_mib + slot * nm, 0, size);
        }
    }
    u->head = (slot + 1) % UTIL_SLOTS;
    if (u->count < UTIL_SLOTS)
        u->count++;
}

size_t utilization_since(const Utilization *u, int64_t since_ms, size_t *ret_first)
{
    size_t oldest = (u->head + UTIL_SLOTS - u->count) % UTIL_SLOTS;
    size_t skip = 0;
    /* samples are in time order (a clock that went back aside): skip the old ones */
    while (skip < u->count && u->t_ms[(oldest + skip) % UTIL_SLOTS] < since_ms)
        skip++;
    *ret_first = (oldest + skip) % UTIL_SLOTS;
    return u->count - skip;
}

void utilization_destroy(Utilization *u)
{
    if (!u)
        return;
    utilization_free(u);
    free(u);
}

/* What the jobs holding GPUs hold per model: allocated, and busy when the worker runs
 * on a ready node (the same count as gpuorch_gpus_allocated and _busy). */
static void measure(Server *s, double *alloc, double *busy)
{
    const Cluster *c = s->c;
    for (size_t k = 0; k < s->n_holding; k++) {
        const ServerJob *j = s->holding[k];
        for (size_t w = 0; w < j->sj.pl.n_workers; w++) {
            const WorkerAlloc *wa = &j->sj.pl.workers[w];
            uint8_t m = c->nodes[wa->node].model;
            double g = (double)worker_units(c, wa) / GPU_UNITS;
            alloc[m] += g;
            if (w < j->life.n_workers && j->life.workers[w].state == LIFE_WORKER_RUNNING &&
                s->nodes[wa->node].liveness == NODE_READY)
                busy[m] += g;
        }
    }
}

/* What the agents of ready nodes last measured, per model (gpusample.h). */
static void measure_reported(Server *s, double *busy, double *gpus, double *memory)
{
    const Cluster *c = s->c;
    for (size_t i = 0; i < c->n_nodes; i++) {
        const NodeState *ns = &s->nodes[i];
        if (ns->liveness != NODE_READY)
            continue;
        uint8_t m = c->nodes[i].model;
        for (size_t k = 0; k < ns->n_samples; k++) {
            const NodeGpuSample *g = &ns->samples[k];
            if (g->has_busy) {
                busy[m] += g->busy_pct / 100;
                gpus[m] += 1;
            }
            if (g->has_memory)
                memory[m] += (double)g->memory_used_mib;
        }
    }
}

void utilization_sample(Server *s, int64_t now_ms)
{
    Utilization *u = s->util;
    if (u && u->count) {
        int64_t last = u->t_ms[(u->head + UTIL_SLOTS - 1) % UTIL_SLOTS];
        if (now_ms >= last && now_ms - last < UTIL_PERIOD_MS)
            return;
    }
    if (!u) {
        u = malloc(sizeof(*u));
        if (!u || utilization_init(u, s->c->n_models) < 0) {
            free(u);
            return;
        }
        s->util = u;
    }
    size_t n = s->c->n_models ? s->c->n_models : 1;
    _cleanup_free_ double *alloc = calloc(n, sizeof(*alloc));
    _cleanup_free_ double *busy = calloc(n, sizeof(*busy));
    _cleanup_free_ double *m_busy = calloc(n, sizeof(*m_busy));
    _cleanup_free_ double *m_gpus = calloc(n, sizeof(*m_gpus));
    _cleanup_free_ double *m_mem = calloc(n, sizeof(*m_mem));
    if (!alloc || !busy || !m_busy || !m_gpus || !m_mem)
        return;
    measure(s, alloc, busy);
    measure_reported(s, m_busy, m_gpus, m_mem);
    UtilMeasured measured = {.busy = m_busy, .gpus = m_gpus, .memory_used_mib = m_mem};
    utilization_push(u, now_ms, alloc, busy, &measured);
}

/* ---- GET /api/v1/utilization ---- */

static int query_minutes(const HttpRequest *rq, int64_t *ret)
{
    const char *v = http_query(rq, "minutes");
    if (!v) {
        *ret = UTIL_DEFAULT_MINUTES;
        return 0;
    }
    char *end;
    errno = 0;
    long long m = strtoll(v, &end, 10);
    if (!*v || *end || errno || m < 1 || m > UTIL_MAX_MINUTES)
        return -EINVAL;
    *ret = m;
    return 0;
}

/* The reply, built under the lock. NULL when out of memory. */
static json_t *utilization_json(Server *s, int64_t now_ms, int64_t minutes)
{
    int64_t from = now_ms - minutes * 60000;
    const Utilization *u = s->util;
    size_t first = 0, n = u ? utilization_since(u, from, &first) : 0;
    json_t *o = json_object();
    json_t *times = json_array();
    json_t *models = json_array();
    if (!o || !times || !models) {
        json_decref(o);
        json_decref(times);
        json_decref(models);
        return NULL;
    }
    json_object_set_new(o, "period_ms", json_integer(UTIL_PERIOD_MS));
    json_object_set_new(o, "from_ms", json_integer(from));
    json_object_set_new(o, "to_ms", json_integer(now_ms));
    for (size_t i = 0; i < n; i++)
        json_array_append_new(times, json_integer(u->t_ms[(first + i) % UTIL_SLOTS]));
    const Cluster *c = s->c;
    for (size_t m = 0; m < c->n_models; m++) {
        uint32_t gpus = 0;
        for (size_t i = 0; i < c->n_nodes; i++)
            if (c->nodes[i].model == m)
                gpus += c->nodes[i].n_gpus;
        if (!gpus)
            continue;
        json_t *alloc = json_array(), *busy = json_array(), *meas = json_array(),
               *meas_gpus = json_array(), *mem = json_array();
        for (size_t i = 0; u && m < u->n_models && i < n; i++) {
            size_t at = (first + i) % UTIL_SLOTS * u->n_models + m;
            json_array_append_new(alloc, api_json_num(u->alloc[at]));
            json_array_append_new(busy, api_json_num(u->busy[at]));
            /* null where no GPU reported: unknown is not idle */
            bool known = u->measured_gpus[at] > 0;
            json_array_append_new(meas, known ? api_json_num(u->measured[at]) : json_null());
            json_array_append_new(meas_gpus, json_integer((json_int_t)u->measured_gpus[at]));
            json_array_append_new(mem, known || u->memory_used_mib[at] > 0
                                           ? json_integer((json_int_t)u->memory_used_mib[at])
                                           : json_null());
        }
        json_array_append_new(
            models, json_pack("{s:s,s:i,s:o,s:o,s:o,s:o,s:o}", "model", c->models[m].m.name, "gpus",
                              (int)gpus, "allocated", alloc, "busy", busy, "measured", meas,
                              "measured_gpus", meas_gpus, "memory_used_mib", mem));
    }
    json_object_set_new(o, "t_ms", times);
    json_object_set_new(o, "models", models);
    return o;
}

void api_utilization(Server *s, const HttpRequest *rq, HttpResponse *rp)
{
    int64_t minutes;
    if (query_minutes(rq, &minutes) < 0) {
        http_reply_error(rp, 400, "query 'minutes': expected a whole number from 1 to %d",
                         UTIL_MAX_MINUTES);
        return;
    }
    int64_t now = server_now_ms();
    server_lock(s);
    json_t *o = utilization_json(s, now, minutes);
    pthread_mutex_unlock(&s->lock);
    if (!o) {
        http_reply_error(rp, 500, "out of memory");
        return;
    }
    http_reply_json(rp, 200, o);
}
