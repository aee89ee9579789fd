/* nvml_sample.h: what nvml.c shares with nvml_sample.c, which reads each GPU's
 * utilisation, memory, power and temperature: the entry points sampling needs, handed
 * over from nvml.c's loaded table (the types are nvml_types.h's). */
#pragma once

#include "agent/gpus.h"
#include "agent/nvml_types.h"
#include "util/buf.h"

/* The entry points sampling calls. The last five may be NULL (an older driver, or no
 * MIG): the readings they give are then left out. */
typedef struct NvmlSampleApi {
    nvmlReturn_t (*DeviceGetHandleByIndex_v2)(unsigned int, nvmlDevice_t *);
    nvmlReturn_t (*DeviceGetUUID)(nvmlDevice_t, char *, unsigned int);
    nvmlReturn_t (*DeviceGetMemoryInfo)(nvmlDevice_t, nvmlMemory_t *);
    nvmlReturn_t (*DeviceGetUtilizationRates)(nvmlDevice_t, nvmlUtilization_t *);
    nvmlReturn_t (*DeviceGetPowerUsage)(nvmlDevice_t, unsigned int *);
    nvmlReturn_t (*DeviceGetTemperature)(nvmlDevice_t, int, unsigned int *);
    nvmlReturn_t (*DeviceGetMaxMigDeviceCount)(nvmlDevice_t, unsigned int *);
    nvmlReturn_t (*DeviceGetMigDeviceHandleByIndex)(nvmlDevice_t, unsigned int, nvmlDevice_t *);
} NvmlSampleApi;

/* GPU g's readings (GpuOps.sample); MIG instances are matched to g->mig by UUID. -EIO
 * (err says why) only when the GPU itself cannot be reached. */
int nvml_sample_gpu(const NvmlSampleApi *f, const AgentGpu *g, GpuSample *ret, Buf *err);
