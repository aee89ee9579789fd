/* nvml_sample.c: one GPU's readings through NVML, taken at each heartbeat: SM busy
 * share (nvmlDeviceGetUtilizationRates), memory used (nvmlDeviceGetMemoryInfo), power
 * (nvmlDeviceGetPowerUsage, milliwatts) and die temperature (nvmlDeviceGetTemperature),
 * and per MIG device what NVML gives of the first two. A call answering anything but
 * success (NOT_SUPPORTED on most MIG devices' utilisation, on some boards' power)
 * leaves that reading out rather than failing the sample: the server shows what was
 * measured and nothing made up. */
#include "agent/nvml_sample.h"

#include <errno.h>
#include <string.h>

static void sample_mig(const NvmlSampleApi *f, nvmlDevice_t dev, const AgentGpu *g, GpuSample *s)
{
    unsigned max = 0;
    if (!g->mig_enabled || !f->DeviceGetMaxMigDeviceCount || !f->DeviceGetMigDeviceHandleByIndex ||
        f->DeviceGetMaxMigDeviceCount(dev, &max) != NVML_SUCCESS)
        return;
    for (unsigned k = 0; k < max && s->n_mig < MIG_MAX_SLOTS; k++) {
        nvmlDevice_t mig;
        char uuid[GPU_UUID_MAX];
        if (f->DeviceGetMigDeviceHandleByIndex(dev, k, &mig) != NVML_SUCCESS ||
            f->DeviceGetUUID(mig, uuid, sizeof(uuid)) != NVML_SUCCESS)
            continue;
        const GpuInstance *in = NULL;
        for (size_t i = 0; i < g->n_mig && !in; i++)
            if (!strcmp(g->mig[i].uuid, uuid))
                in = &g->mig[i];
        if (!in) /* made since discovery: the next refresh of g->mig names it */
            continue;
        GpuInstanceSample *m = &s->mig[s->n_mig];
        *m = (GpuInstanceSample){.start = in->start};
        nvmlMemory_t mem;
        if (f->DeviceGetMemoryInfo(mig, &mem) == NVML_SUCCESS) {
            m->has_memory = true;
            m->memory_used_mib = mem.used >> 20;
        }
        nvmlUtilization_t u;
        if (f->DeviceGetUtilizationRates && f->DeviceGetUtilizationRates(mig, &u) == NVML_SUCCESS &&
            u.gpu <= 100) {
            m->has_busy = true;
            m->busy_pct = (uint8_t)u.gpu;
        }
        if (m->has_memory || m->has_busy)
            s->n_mig++;
    }
}

int nvml_sample_gpu(const NvmlSampleApi *f, const AgentGpu *g, GpuSample *ret, Buf *err)
{
    nvmlDevice_t dev;
    nvmlReturn_t r = f->DeviceGetHandleByIndex_v2(g->index, &dev);
    if (r != NVML_SUCCESS) {
        buf_printf(err, "GPU %u: nvmlDeviceGetHandleByIndex: error %d", g->index, r);
        return -EIO;
    }
    GpuSample s = {0};
    nvmlUtilization_t u;
    if (f->DeviceGetUtilizationRates && f->DeviceGetUtilizationRates(dev, &u) == NVML_SUCCESS &&
        u.gpu <= 100) {
        s.has_busy = true;
        s.busy_pct = (uint8_t)u.gpu;
    }
    nvmlMemory_t mem;
    if (f->DeviceGetMemoryInfo(dev, &mem) == NVML_SUCCESS) {
        s.has_memory = true;
        s.memory_used_mib = mem.used >> 20;
    }
    unsigned mw;
    if (f->DeviceGetPowerUsage && f->DeviceGetPowerUsage(dev, &mw) == NVML_SUCCESS) {
        s.has_power = true;
        s.power_w = mw / 1000.0;
    }
    unsigned c;
    if (f->DeviceGetTemperature &&
        f->DeviceGetTemperature(dev, NVML_TEMPERATURE_GPU, &c) == NVML_SUCCESS) {
        s.has_temperature = true;
        s.temperature_c = (int)c;
    }
    sample_mig(f, dev, g, &s);
    *ret = s;
    return 0;
}
