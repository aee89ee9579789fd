/* render.c: JSON and text renderings of placements, layouts and numbers, in the one
 * shape every command and the simulator's event log share, and grants read back. */
#include "spec/render.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void render_num(Buf *b, double v, int digits)
{
    char tmp[64];
    if (!isfinite(v))
        v = 0;
    snprintf(tmp, sizeof(tmp), "%.*f", digits, v);
    if (strchr(tmp, '.')) {
        size_t n = strlen(tmp);
        while (n > 0 && tmp[n - 1] == '0')
            tmp[--n] = '\0';
        if (n > 0 && tmp[n - 1] == '.')
            tmp[--n] = '\0';
    }
    if (!strcmp(tmp, "-0"))
        strcpy(tmp, "0");
    buf_puts(b, tmp);
}

void render_json_grants(Buf *b, const Cluster *c, const WorkerAlloc *w)
{
    const Node *n = &c->nodes[w->node];
    const GpuModel *m = node_model(c, n);
    buf_putc(b, '[');
    for (unsigned i = 0; i < w->n_grants; i++) {
        const Grant *g = &w->grants[i];
        buf_printf(b, "%s{\"index\": %u", i ? ", " : "", g->index);
        if (g->kind == GRANT_MIG) {
            buf_puts(b, ", \"mig\": {\"profile\": ");
            buf_json_str(b, m->profiles[g->mig_profile].name);
            buf_printf(b, ", \"start\": %u}", g->mig_start);
        } else if (g->kind == GRANT_SHARE) {
            buf_puts(b, ", \"fraction\": ");
            render_num(b, g->milli / 1000.0, 3);
        }
        buf_putc(b, '}');
    }
    buf_putc(b, ']');
}

void render_json_layout(Buf *b, const GpuModel *m, const MigLayout *l)
{
    MigInstance inst[MIG_MAX_SLOTS];
    size_t n = mig_layout_list(l, inst);
    buf_putc(b, '[');
    for (size_t i = 0; i < n; i++) {
        buf_puts(b, i ? ", {\"profile\": " : "{\"profile\": ");
        buf_json_str(b, m->profiles[inst[i].profile].name);
        buf_printf(b, ", \"start\": %u}", inst[i].start);
    }
    buf_putc(b, ']');
}

void render_text_grants(Buf *b, const Cluster *c, const WorkerAlloc *w)
{
    const GpuModel *m = node_model(c, &c->nodes[w->node]);
    if (!w->n_grants)
        buf_puts(b, "-");
    for (unsigned i = 0; i < w->n_grants; i++) {
        const Grant *g = &w->grants[i];
        buf_printf(b, "%s%u", i ? " " : "", g->index);
        if (g->kind == GRANT_MIG)
            buf_printf(b, ":%s@%u", m->profiles[g->mig_profile].name, g->mig_start);
        else if (g->kind == GRANT_SHARE)
            buf_printf(b, ":%u.%03u", g->milli / 1000, g->milli % 1000);
    }
}

void render_text_layout(Buf *b, const GpuModel *m, const MigLayout *l)
{
    MigInstance inst[MIG_MAX_SLOTS];
    size_t n = mig_layout_list(l, inst);
    if (!n)
        buf_puts(b, "(MIG off)");
    for (size_t i = 0; i < n; i++)
        buf_printf(b, "%s%s@%u", i ? " " : "", m->profiles[inst[i].profile].name, inst[i].start);
}

int render_grants_from_json(const Cluster *c, const Node *n, json_t *gpus, WorkerAlloc *w,
                            const char **ret_msg)
{
    size_t gi;
    json_t *g;
    if (!json_is_array(gpus) || json_array_size(gpus) > NODE_MAX_GPUS) {
        *ret_msg = "'gpus' must be an array of at most 16 GPUs";
        return -EINVAL;
    }
    const GpuModel *m = node_model(c, n);
    json_array_foreach(gpus, gi, g)
    {
        json_t *idx = json_object_get(g, "index");
        if (!json_is_integer(idx) || json_integer_value(idx) < 0 ||
            json_integer_value(idx) >= n->n_gpus) {
            *ret_msg = "a GPU 'index' is missing or outside the node";
            return -EINVAL;
        }
        Grant gr = {.index = (uint8_t)json_integer_value(idx), .kind = GRANT_WHOLE};
        json_t *mig = json_object_get(g, "mig"), *frac = json_object_get(g, "fraction");
        if (mig) {
            int p = catalog_profile_index(m, json_string_value(json_object_get(mig, "profile")));
            json_t *start = json_object_get(mig, "start");
            if (p < 0 || !json_is_integer(start) || json_integer_value(start) < 0 ||
                json_integer_value(start) >= MIG_MAX_SLOTS) {
                *ret_msg = "a MIG grant names a profile or start this GPU model does not have";
                return -EINVAL;
            }
            gr.kind = GRANT_MIG;
            gr.mig_profile = (uint8_t)p;
            gr.mig_start = (uint8_t)json_integer_value(start);
        } else if (frac) {
            double f = json_number_value(frac);
            if (!json_is_number(frac) || f <= 0 || f > 1) {
                *ret_msg = "'fraction' must be a number above 0 and at most 1";
                return -EINVAL;
            }
            gr.kind = GRANT_SHARE;
            gr.milli = (uint16_t)(f * 1000 + 0.5);
        }
        w->grants[w->n_grants++] = gr;
    }
    return 0;
}
