/* gpus.c: picking a GPU backend from the --gpus argument, and the small questions
 * about an inventory that the agent and both backends ask. */
#include "agent/gpus.h"

#include <errno.h>
#include <string.h>
#include <strings.h>

int gpus_open(const char *spec, const char *node, const char *state_dir, GpuBackend **ret, Buf *err)
{
    if (!spec || !strcmp(spec, "nvml"))
        return nvml_open(ret, err);
    if (!strncmp(spec, "sim:", 4))
        return simgpu_open(spec + 4, node, state_dir, ret, err);
    buf_printf(err, "--gpus '%s': expected 'nvml' or 'sim:MODEL:COUNT' (sim:A100-80GB:8)", spec);
    return -EINVAL;
}

void gpus_close(GpuBackend *b)
{
    if (b)
        b->ops->close(b);
}

int gpu_layout(const AgentGpu *g, MigLayout *ret, Buf *err)
{
    MigLayout l;
    mig_layout_clear(&l);
    if (g->n_mig && !g->model) {
        buf_printf(err, "GPU %u (%s) is not in the GPU catalogue", g->index, g->name);
        return -EINVAL;
    }
    for (size_t i = 0; i < g->n_mig; i++) {
        const GpuInstance *in = &g->mig[i];
        int p = catalog_profile_index(g->model, in->profile);
        if (p < 0 || in->start >= MIG_MAX_SLOTS) {
            buf_printf(err, "GPU %u has a %s instance at slot %u that the catalogue's %s lacks",
                       g->index, in->profile, in->start, g->model->name);
            return -EINVAL;
        }
        l.profile_at[in->start] = (uint8_t)p;
    }
    *ret = l;
    return 0;
}

const GpuInstance *gpu_instance(const AgentGpu *g, const char *profile, unsigned start)
{
    for (size_t i = 0; i < g->n_mig; i++)
        if (g->mig[i].start == start && !strcasecmp(g->mig[i].profile, profile))
            return &g->mig[i];
    return NULL;
}

AgentGpu *gpu_by_index(AgentGpu *gpus, size_t n, unsigned index)
{
    for (size_t i = 0; i < n; i++)
        if (gpus[i].index == index)
            return &gpus[i];
    return NULL;
}

void gpu_profile_names(Buf *b, const GpuModel *m)
{
    for (int i = 0; i < m->n_profiles; i++)
        buf_printf(b, "%s%s", i ? ", " : "", m->profiles[i].name);
}
