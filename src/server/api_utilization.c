/* api_utilization.c: the ring of utilisation samples (utilization.h) and GET
 * /api/v1/utilization?minutes=N, which replies with the samples of the last N minutes
 * (1 to 60, default 60) column-wise: one list of times, and per GPU model of the
 * cluster its GPU count and the allocated and busy GPU-equivalents at those times,
 * the shape a chart draws from. */
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
    if (!u->alloc || !u->busy) {
        utilization_free(u);
        return -ENOMEM;
    }
    return 0;
}

void utilization_free(Utilization *u)
{
    free(u->alloc);
    free(u->busy);
    u->alloc = u->busy = NULL;
    u->count = u->head = 0;
}

void utilization_push(Utilization *u, int64_t t_ms, const double *alloc, const double *busy)
{
    size_t slot = u->head;
    u->t_ms[slot] = t_ms;
    if (u->n_models) {
        memcpy(u->alloc + slot * u->n_models, alloc, u->n_models * sizeof(*alloc));
        memcpy(u->busy + slot * u->n_models, busy, u->n_models * sizeof(*busy));
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
    if (!alloc || !busy)
        return;
    measure(s, alloc, busy);
    utilization_push(u, now_ms, alloc, busy);
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
        json_t *alloc = json_array(), *busy = json_array();
        for (size_t i = 0; u && m < u->n_models && i < n; i++) {
            size_t slot = (first + i) % UTIL_SLOTS;
            json_array_append_new(alloc, api_json_num(u->alloc[slot * u->n_models + m]));
            json_array_append_new(busy, api_json_num(u->busy[slot * u->n_models + m]));
        }
        json_array_append_new(models,
                              json_pack("{s:s,s:i,s:o,s:o}", "model", c->models[m].m.name, "gpus",
                                        (int)gpus, "allocated", alloc, "busy", busy));
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
