/* api_nodes.c: GET /api/v1/nodes: every node of the cluster with its liveness, CPU and
 * memory in use, and per GPU its mode, MIG instances and who holds what. The holders
 * come from the jobs holding an allocation, gathered and sorted by GPU once per
 * request, so the walk over the nodes stays linear. */
#include "server/api.h"

#include "util/macro.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* One grant of a running worker, keyed by the cluster-wide GPU index. */
typedef struct Holder {
    uint32_t gpu; /* index into Cluster.gpus */
    uint8_t kind; /* GrantKind */
    uint8_t start;
    uint16_t milli;
    int64_t job;
    uint32_t rank;
} Holder;

static int holder_cmp(const void *a, const void *b)
{
    const Holder *x = a, *y = b;
    if (x->gpu != y->gpu)
        return x->gpu < y->gpu ? -1 : 1;
    if (x->job != y->job)
        return x->job < y->job ? -1 : 1;
    return x->rank < y->rank ? -1 : x->rank > y->rank;
}

static int collect_holders(Server *s, Holder **ret, size_t *ret_n)
{
    Holder *h = NULL;
    size_t n = 0, cap = 0;
    for (size_t k = 0; k < s->n_holding; k++) {
        const ServerJob *j = s->holding[k];
        /* a model server being moved holds its old GPUs too */
        const Placement *pls[2] = {&j->sj.pl, &j->sj.moved_from};
        size_t n_pls = j->life.move != LIFE_MOVE_NONE ? 2 : 1;
        for (size_t p = 0; p < n_pls; p++)
            for (size_t w = 0; w < pls[p]->n_workers; w++) {
                const WorkerAlloc *wa = &pls[p]->workers[w];
                const Node *node = &s->c->nodes[wa->node];
                for (unsigned g = 0; g < wa->n_grants; g++) {
                    const Grant *gr = &wa->grants[g];
                    if (GROW(h, cap, n + 1) < 0) {
                        free(h);
                        return -ENOMEM;
                    }
                    h[n++] = (Holder){.gpu = node->gpu0 + gr->index,
                                      .kind = gr->kind,
                                      .start = gr->mig_start,
                                      .milli = gr->milli,
                                      .job = j->st.id,
                                      .rank = (uint32_t)w};
                }
            }
    }
    if (n)
        qsort(h, n, sizeof(*h), holder_cmp);
    *ret = h;
    *ret_n = n;
    return 0;
}

static const char *gpu_mode_name(GpuMode m)
{
    switch (m) {
    case GPU_MIG:
        return "mig";
    case GPU_SHARED:
        return "shared";
    default:
        return "whole";
    }
}

/* The UUID the node's agent reported for GPU index, or NULL. */
static json_t *reported_uuid(json_t *reported, unsigned index)
{
    size_t i;
    json_t *g;
    json_array_foreach(reported, i, g)
    {
        json_t *idx = json_object_get(g, "index");
        if (json_is_integer(idx) && json_integer_value(idx) == (json_int_t)index) {
            json_t *u = json_object_get(g, "uuid");
            return json_is_string(u) ? json_incref(u) : NULL;
        }
    }
    return NULL;
}

static json_t *gpu_json(const Cluster *c, const Node *n, unsigned index, json_t *reported,
                        const Holder *h, size_t nh)
{
    const Gpu *g = node_gpu_c(c, n, index);
    const GpuModel *m = node_model(c, n);
    json_t *o = json_object();
    json_object_set_new(o, "index", json_integer(index));
    json_t *uuid = reported_uuid(reported, index);
    json_object_set_new(o, "uuid", uuid ? uuid : json_null());
    json_object_set_new(o, "mode", json_string(gpu_mode_name(g->mode)));
    json_object_set_new(o, "draining", json_boolean(g->draining));
    json_object_set_new(o, "used", json_real((double)g->used_units / GPU_UNITS));

    json_t *mig = json_array();
    if (g->mode == GPU_MIG) {
        MigInstance inst[MIG_MAX_SLOTS];
        size_t k = mig_layout_list(&g->mig, inst);
        for (size_t i = 0; i < k; i++) {
            json_t *e = json_pack("{s:s,s:i}", "profile", m->profiles[inst[i].profile].name,
                                  "start", inst[i].start);
            const Holder *who = NULL;
            for (size_t x = 0; x < nh && !who; x++)
                if (h[x].kind == GRANT_MIG && h[x].start == inst[i].start)
                    who = &h[x];
            json_object_set_new(e, "job", who ? json_integer(who->job) : json_null());
            json_object_set_new(e, "rank", who ? json_integer(who->rank) : json_null());
            json_array_append_new(mig, e);
        }
    }
    json_object_set_new(o, "mig", mig);

    json_t *jobs = json_array();
    for (size_t x = 0; x < nh; x++) {
        if (h[x].kind == GRANT_MIG)
            continue;
        double fraction = h[x].kind == GRANT_SHARE ? h[x].milli / 1000.0 : 1.0;
        json_array_append_new(jobs, json_pack("{s:I,s:i,s:f}", "job", (json_int_t)h[x].job, "rank",
                                              (int)h[x].rank, "fraction", fraction));
    }
    json_object_set_new(o, "jobs", jobs);
    return o;
}

static json_t *node_json(Server *s, uint32_t i, const Holder *h, size_t nh)
{
    const Cluster *c = s->c;
    const Node *n = &c->nodes[i];
    const Pool *p = &c->pools[n->pool];
    const NodeState *ns = &s->nodes[i];
    json_t *o = json_object();
    json_object_set_new(o, "name", json_string(n->name));
    json_object_set_new(o, "pool", json_string(p->name));
    json_object_set_new(o, "tier", json_string(tier_name(p->tier)));
    json_object_set_new(o, "model", json_string(node_model(c, n)->name));
    json_object_set_new(o, "state", json_string(node_liveness_name(ns->liveness)));
    if (ns->liveness == NODE_MISMATCHED && ns->mismatch)
        json_object_set_new(o, "mismatch", json_string(ns->mismatch));
    /* the GPUs fenced for sickness (gpufence.c): the node takes no new work while any is */
    json_t *sick = json_array();
    for (unsigned g = 0; g < n->n_gpus && g < NODE_MAX_GPUS; g++)
        if (ns->gpu_sick_mask & (1u << g))
            json_array_append_new(
                sick, json_pack("{s:i, s:s}", "index", (int)g, "reason", ns->gpu_sick[g]));
    json_object_set_new(o, "sick_gpus", sick);
    /* autoscaled pools: whether the node is there at all (absent, starting, up, leaving) */
    static const char *const presence[] = {"up", "starting", "leaving", "absent"};
    json_object_set_new(o, "presence",
                        json_string(n->state < ARRAY_SIZE(presence) ? presence[n->state] : "?"));
    json_object_set_new(o, "last_seen_ms",
                        ns->liveness != NODE_UNKNOWN ? json_integer(ns->last_seen_ms)
                                                     : json_null());
    json_object_set_new(o, "cpu_milli", json_integer(n->cpu_milli));
    json_object_set_new(o, "cpu_used_milli", json_integer(n->cpu_used_milli));
    json_object_set_new(o, "memory_mib", json_integer(n->memory_mib));
    json_object_set_new(o, "memory_used_mib", json_integer(n->memory_used_mib));
    json_t *reported = ns->gpus_json ? json_loads(ns->gpus_json, 0, NULL) : NULL;
    json_t *gpus = json_array();
    size_t x = 0;
    for (unsigned g = 0; g < n->n_gpus; g++) {
        uint32_t gi = n->gpu0 + g;
        while (x < nh && h[x].gpu < gi)
            x++;
        size_t end = x;
        while (end < nh && h[end].gpu == gi)
            end++;
        json_array_append_new(gpus, gpu_json(c, n, g, reported, h + x, end - x));
        x = end;
    }
    json_decref(reported);
    json_object_set_new(o, "gpus", gpus);
    return o;
}

void api_nodes_list(Server *s, const HttpRequest *rq, HttpResponse *rp)
{
    json_t *arr = json_array();
    Holder *h = NULL;
    size_t nh = 0;
    server_lock(s);
    int r = collect_holders(s, &h, &nh);
    for (size_t i = 0; r == 0 && i < s->c->n_nodes; i++)
        json_array_append_new(arr, node_json(s, (uint32_t)i, h, nh));
    pthread_mutex_unlock(&s->lock);
    free(h);
    if (r < 0) {
        json_decref(arr);
        http_reply_error(rp, 500, "out of memory");
        return;
    }
    http_reply_json(rp, 200, json_pack("{s:o}", "nodes", arr));
}
