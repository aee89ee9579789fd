/* placement_json.c: placements to and from JSON, in plan's grant shape so that the
 * store, the API and the agents read one format. */
#include "server/placement_json.h"

#include "spec/render.h"
#include "util/macro.h"

#include <errno.h>
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
        const char *msg = NULL;
        r = render_grants_from_json(c, &c->nodes[node], json_object_get(w, "gpus"), &wa, &msg);
        if (r < 0) {
            buf_printf(err, "node %s: %s", name, msg);
            break;
        }
        ret->workers[ret->n_workers++] = wa;
    }
    json_decref(root);
    if (r < 0)
        placement_reset(ret);
    return r;
}
