/* render.c: JSON and text renderings of placements, layouts and numbers, in the one
 * shape every command and the simulator's event log share. */
#include "spec/render.h"

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
