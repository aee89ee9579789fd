/* proto.c: building the heartbeat report and reading the server's reply. */
#include "agent/proto.h"
#include "life/life.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* The readings of a GPU or MIG instance, only those taken: {"busy_pct": 0-100,
 * "memory_used_mib": N, "power_w": W, "temperature_c": C}. */
static json_t *sample_json(bool has_busy, unsigned busy_pct, bool has_memory, uint64_t memory_mib,
                           bool has_power, double power_w, bool has_temperature, int temperature_c)
{
    json_t *o = json_object();
    if (has_busy)
        json_object_set_new(o, "busy_pct", json_integer(busy_pct));
    if (has_memory)
        json_object_set_new(o, "memory_used_mib", json_integer((json_int_t)memory_mib));
    if (has_power)
        json_object_set_new(o, "power_w", json_real(power_w));
    if (has_temperature)
        json_object_set_new(o, "temperature_c", json_integer(temperature_c));
    return o;
}

/* The instance starting at start's readings, or NULL. */
static const GpuInstanceSample *instance_sample(const GpuSample *s, uint8_t start)
{
    for (size_t i = 0; i < s->n_mig; i++)
        if (s->mig[i].start == start)
            return &s->mig[i];
    return NULL;
}

static json_t *gpu_json(const AgentGpu *g)
{
    const GpuSample *s = &g->sample;
    json_t *mig = json_array();
    for (size_t i = 0; i < g->n_mig; i++) {
        json_t *in = json_pack("{ss si ss}", "profile", g->mig[i].profile, "start",
                               (int)g->mig[i].start, "uuid", g->mig[i].uuid);
        const GpuInstanceSample *is = instance_sample(s, g->mig[i].start);
        if (in && is)
            json_object_set_new(in, "sample",
                                sample_json(is->has_busy, is->busy_pct, is->has_memory,
                                            is->memory_used_mib, false, 0, false, 0));
        json_array_append_new(mig, in);
    }
    json_t *peers = json_array();
    for (size_t i = 0; i < g->n_peers; i++)
        json_array_append_new(peers, json_integer(g->peers[i]));
    json_t *o = json_pack("{si ss ss sI sb sb so so ss}", "index", (int)g->index, "uuid", g->uuid,
                          "name", g->name, "memory_mib", (json_int_t)g->memory_mib, "mig_capable",
                          g->mig_capable, "mig_enabled", g->mig_enabled, "mig", mig, "nvlink_peers",
                          peers, "health", g->health[0] ? g->health : "ok");
    if (o && (s->has_busy || s->has_memory || s->has_power || s->has_temperature))
        json_object_set_new(o, "sample",
                            sample_json(s->has_busy, s->busy_pct, s->has_memory, s->memory_used_mib,
                                        s->has_power, s->power_w, s->has_temperature,
                                        s->temperature_c));
    return o;
}

int proto_heartbeat(const char *node, const char *address, const char *boot_id,
                    const char *server_id, const AgentGpu *gpus, size_t n_gpus,
                    Worker *const *workers, size_t n_workers, const Notice *interruption,
                    bool shutdown, Buf *out)
{
    json_t *ga = json_array(), *wa = json_array();
    json_t *root =
        json_pack("{ss ss so so}", "node", node, "boot_id", boot_id, "gpus", ga, "workers", wa);
    if (!root)
        return -ENOMEM;
    int r = address ? json_object_set_new(root, "address", json_string(address)) : 0;
    if (!r && server_id && *server_id)
        r = json_object_set_new(root, "server_id", json_string(server_id));
    if (!r && interruption)
        r = json_object_set_new(
            root, "interruption",
            json_pack("{sI ss ss}", "deadline_ms", (json_int_t)interruption->deadline_ms, "source",
                      notice_source_name(interruption->source), "action", interruption->action));
    if (!r && shutdown)
        r = json_object_set_new(root, "shutdown", json_true());
    for (size_t i = 0; i < n_gpus && !r; i++)
        r = json_array_append_new(ga, gpu_json(&gpus[i]));
    for (size_t i = 0; i < n_workers && !r; i++)
        if (workers[i]->state != WK_PENDING)
            r = json_array_append_new(wa, worker_report_json(workers[i]));
    char *text = r ? NULL : json_dumps(root, JSON_COMPACT);
    json_decref(root);
    if (!text)
        return -ENOMEM;
    buf_puts(out, text);
    free(text);
    return out->oom ? -ENOMEM : 0;
}

static int parse_mig(json_t *arr, HeartbeatReply *r, Buf *err)
{
    if (!arr || json_is_null(arr))
        return 0;
    if (!json_is_array(arr)) {
        buf_puts(err, "'mig' must be a list");
        return -EINVAL;
    }
    r->mig = calloc(json_array_size(arr) + 1, sizeof(*r->mig));
    if (!r->mig)
        return -ENOMEM;
    size_t i;
    json_t *e;
    json_array_foreach(arr, i, e)
    {
        MigWant *w = &r->mig[r->n_mig];
        json_t *idx = json_object_get(e, "index");
        json_t *layout = json_object_get(e, "layout");
        if (!json_is_integer(idx) || json_integer_value(idx) < 0 ||
            (layout && !json_is_null(layout) && !json_is_array(layout)) ||
            json_array_size(layout) > MIG_MAX_SLOTS) {
            buf_printf(err,
                       "mig[%zu]: expected {\"index\": GPU, \"layout\": [...]} with at most "
                       "%d instances",
                       i, MIG_MAX_SLOTS);
            return -EINVAL;
        }
        w->index = (unsigned)json_integer_value(idx);
        size_t k;
        json_t *in;
        json_array_foreach(layout, k, in)
        {
            const char *prof = json_string_value(json_object_get(in, "profile"));
            json_t *st = json_object_get(in, "start");
            if (!prof || strlen(prof) >= GPU_PROFILE_MAX || !json_is_integer(st) ||
                json_integer_value(st) < 0 || json_integer_value(st) >= MIG_MAX_SLOTS) {
                buf_printf(err, "mig[%zu].layout[%zu]: expected {\"profile\": P, \"start\": 0-%d}",
                           i, k, MIG_MAX_SLOTS - 1);
                return -EINVAL;
            }
            strcpy(w->inst[w->n].profile, prof);
            w->inst[w->n].start = (uint8_t)json_integer_value(st);
            w->n++;
        }
        r->n_mig++;
    }
    return 0;
}

static int parse_workers(json_t *arr, HeartbeatReply *r, Buf *err)
{
    if (!arr || json_is_null(arr))
        return 0;
    if (!json_is_array(arr)) {
        buf_puts(err, "'workers' must be a list");
        return -EINVAL;
    }
    r->workers = calloc(json_array_size(arr) + 1, sizeof(*r->workers));
    if (!r->workers)
        return -ENOMEM;
    size_t i;
    json_t *e;
    json_array_foreach(arr, i, e)
    {
        ReplyWorker *w = &r->workers[r->n_workers];
        if (assign_key(e, &w->key.job, &w->key.run, &w->key.rank) < 0) {
            r->n_unkeyed++;
            continue;
        }
        w->spec = e;
        const char *stop = json_string_value(json_object_get(e, "stop"));
        w->stop = !stop                      ? WSTOP_NONE
                  : !strcmp(stop, "preempt") ? WSTOP_PREEMPT
                  : !strcmp(stop, "cancel")  ? WSTOP_CANCEL
                                             : WSTOP_NONE;
        r->n_workers++;
    }
    return 0;
}

static int parse_forget(json_t *arr, HeartbeatReply *r, Buf *err)
{
    if (!arr || json_is_null(arr))
        return 0;
    if (!json_is_array(arr)) {
        buf_puts(err, "'forget' must be a list");
        return -EINVAL;
    }
    r->forget = calloc(json_array_size(arr) + 1, sizeof(*r->forget));
    if (!r->forget)
        return -ENOMEM;
    size_t i;
    json_t *e;
    json_array_foreach(arr, i, e)
    {
        WorkerKey *k = &r->forget[r->n_forget];
        if (assign_key(e, &k->job, &k->run, &k->rank) < 0) {
            buf_printf(err, "forget[%zu]: expected {\"job\": J, \"run\": R, \"rank\": K}", i);
            return -EINVAL;
        }
        r->n_forget++;
    }
    return 0;
}

int proto_reply_parse(const char *body, size_t len, HeartbeatReply *ret, Buf *err)
{
    HeartbeatReply r = {0};
    json_error_t jerr;
    r.root = json_loadb(body, len, 0, &jerr);
    if (!json_is_object(r.root)) {
        buf_printf(err, "the heartbeat reply is not a JSON object%s%s", r.root ? "" : ": ",
                   r.root ? "" : jerr.text);
        json_decref(r.root);
        return -EINVAL;
    }
    const char *sid = json_string_value(json_object_get(r.root, "server_id"));
    r.server_id = sid && *sid && strlen(sid) <= WORKER_SERVER_ID_MAX ? sid : NULL;
    json_t *hb = json_object_get(r.root, "heartbeat_ms");
    r.heartbeat_ms = json_is_integer(hb) ? json_integer_value(hb) : LIFE_HEARTBEAT_MS;
    if (r.heartbeat_ms < PROTO_HEARTBEAT_MIN_MS)
        r.heartbeat_ms = PROTO_HEARTBEAT_MIN_MS;
    if (r.heartbeat_ms > PROTO_HEARTBEAT_MAX_MS)
        r.heartbeat_ms = PROTO_HEARTBEAT_MAX_MS;
    int rc = parse_mig(json_object_get(r.root, "mig"), &r, err);
    if (!rc)
        rc = parse_workers(json_object_get(r.root, "workers"), &r, err);
    if (!rc)
        rc = parse_forget(json_object_get(r.root, "forget"), &r, err);
    if (rc) {
        if (rc == -ENOMEM)
            buf_puts(err, "out of memory");
        proto_reply_free(&r);
        return rc;
    }
    *ret = r;
    return 0;
}

void proto_reply_free(HeartbeatReply *r)
{
    if (!r)
        return;
    json_decref(r->root);
    free(r->mig);
    free(r->workers);
    free(r->forget);
    *r = (HeartbeatReply){0};
}

const MigWant *proto_mig_want(const HeartbeatReply *r, unsigned index)
{
    for (size_t i = 0; i < r->n_mig; i++)
        if (r->mig[i].index == index)
            return &r->mig[i];
    return NULL;
}

int proto_mig_layout(const MigWant *want, const GpuModel *m, MigLayout *ret, Buf *err)
{
    MigLayout l;
    mig_layout_clear(&l);
    for (size_t i = 0; want && i < want->n; i++) {
        int p = m ? catalog_profile_index(m, want->inst[i].profile) : -1;
        if (p < 0) {
            buf_printf(err, "GPU %u: '%s' is not a MIG profile of %s", want->index,
                       want->inst[i].profile, m ? m->name : "this (uncatalogued) GPU");
            if (m) {
                buf_puts(err, " (");
                gpu_profile_names(err, m);
                buf_puts(err, ")");
            }
            return -EINVAL;
        }
        if (l.profile_at[want->inst[i].start] != MIG_NONE) {
            buf_printf(err, "GPU %u: two instances start at slot %u", want->index,
                       want->inst[i].start);
            return -EINVAL;
        }
        l.profile_at[want->inst[i].start] = (uint8_t)p;
    }
    *ret = l;
    return 0;
}
