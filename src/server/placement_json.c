/* placement_json.c: placements to and from JSON, in plan's grant shape so that the
 * store, the API and the agents read one format. */
#include "server/placement_json.h"

#include "spec/render.h"
#include "util/macro.h"

#include <errno.h>
#include <math.h>
#include <string.h>

void placement_to_json(const Cluster *c, const Placement *p, Buf *out)
{
    buf_putc(out, '[');
    for (size_t w = 0; w < p->n_workers; w++) {
        const WorkerAlloc *wa = &p->workers[w];
        if (w)
            buf_puts(out, ", ");
        buf_puts(out, "{\"node\": ");
        buf_json_str(out, c->nodes[wa->node].name);
        buf_printf(out, ", \"cpu_milli\": %u, \"memory_mib\": %u, \"gpus\": ", wa->cpu_milli,
                   wa->memory_mib);
        render_json_grants(out, c, wa);
        buf_putc(out, '}');
    }
    buf_putc(out, ']');
}

json_t *placement_grants_json(const Cluster *c, const WorkerAlloc *w)
{
    Buf b = {0};
    render_json_grants(&b, c, w);
    json_t *v = json_loads(buf_str(&b), 0, NULL);
    buf_free(&b);
    return v;
}

/* One grant object: {"index": i} | {"index": i, "mig": {"profile": p, "start": s}} |
 * {"index": i, "fraction": f}. */
static int grant_from_json(const Cluster *c, const Node *n, json_t *g, Grant *ret, Buf *err)
{
    json_t *idx = json_object_get(g, "index");
    if (!json_is_integer(idx) || json_integer_value(idx) < 0 ||
        json_integer_value(idx) >= n->n_gpus) {
        buf_printf(err, "node %s has no such GPU", n->name);
        return -EINVAL;
    }
    Grant gr = {.index = (uint8_t)json_integer_value(idx), .kind = GRANT_WHOLE};
    json_t *mig = json_object_get(g, "mig"), *frac = json_object_get(g, "fraction");
    if (mig) {
        const GpuModel *m = node_model(c, n);
        const char *name = json_string_value(json_object_get(mig, "profile"));
        json_t *start = json_object_get(mig, "start");
        int p = name ? catalog_profile_index(m, name) : -1;
        if (p < 0 || !json_is_integer(start) || json_integer_value(start) < 0 ||
            json_integer_value(start) >= MIG_MAX_SLOTS) {
            buf_printf(err, "GPU model %s has no MIG profile %s", m->name, name ? name : "?");
            return -EINVAL;
        }
        gr.kind = GRANT_MIG;
        gr.mig_profile = (uint8_t)p;
        gr.mig_start = (uint8_t)json_integer_value(start);
    } else if (frac) {
        double f = json_number_value(frac);
        if (!json_is_number(frac) || f <= 0 || f > 1) {
            buf_printf(err, "a GPU fraction must be in (0, 1]");
            return -EINVAL;
        }
        gr.kind = GRANT_SHARE;
        gr.milli = (uint16_t)lround(f * 1000);
    }
    *ret = gr;
    return 0;
}

int placement_from_json(const Cluster *c, const char *text, Placement *ret, Buf *err)
{
    placement_reset(ret);
    json_error_t jerr;
    json_t *root = json_loads(text, 0, &jerr);
    if (!json_is_array(root)) {
        buf_printf(err, "a stored placement is not a JSON list: %s", jerr.text);
        json_decref(root);
        return -EINVAL;
    }
    int r = 0;
    size_t i;
    json_t *w;
    json_array_foreach(root, i, w)
    {
        const char *name = json_string_value(json_object_get(w, "node"));
        int node = name ? cluster_find_node(c, name) : -1;
        if (node < 0) {
            buf_printf(err, "node %s is no longer in the cluster", name ? name : "?");
            r = -EINVAL;
            break;
        }
        if (GROW(ret->workers, ret->workers_cap, ret->n_workers + 1) < 0) {
            r = -ENOMEM;
            break;
        }
        WorkerAlloc wa = {
            .node = (uint32_t)node,
            .cpu_milli = (uint32_t)json_integer_value(json_object_get(w, "cpu_milli")),
            .memory_mib = (uint32_t)json_integer_value(json_object_get(w, "memory_mib")),
        };
        json_t *gpus = json_object_get(w, "gpus"), *g;
        size_t k;
        json_array_foreach(gpus, k, g)
        {
            if (k >= NODE_MAX_GPUS ||
                (r = grant_from_json(c, &c->nodes[node], g, &wa.grants[wa.n_grants], err)) < 0) {
                r = r < 0 ? r : -EINVAL;
                break;
            }
            wa.n_grants++;
        }
        if (r < 0)
            break;
        ret->workers[ret->n_workers++] = wa;
    }
    json_decref(root);
    if (r < 0)
        placement_reset(ret);
    return r;
}
