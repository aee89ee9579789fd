/* nvml_health.c: whether each GPU of a real node may take work, through NVML. A GPU is
 * sick when it reported a critical Xid event that is the GPU's fault (not the
 * application's), when its volatile uncorrectable ECC count is above 0 (errors since
 * the driver loaded: the memory it holds cannot be trusted), or when it fell off the
 * bus (any call on it answers NVML_ERROR_GPU_IS_LOST). Sickness is sticky: only a
 * driver reset, an operator's act, followed by an agent restart clears it.
 *
 * Xid events come from one event set on which every GPU is registered for
 * nvmlEventTypeXidCriticalError, drained with nvmlEventSetWait_v2 and a 0 ms timeout
 * once per heartbeat. The declarations follow the NVML API Reference Guide
 * (docs.nvidia.com/deploy/nvml-api: "Event Handling Methods", nvmlEventData_t,
 * "Device Queries" nvmlDeviceGetTotalEccErrors). */
#include "agent/nvml_health.h"
#include "agent/nvml_types.h"
#include "util/macro.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_EVENTS_PER_CHECK 64 /* a storm of events waits for the next beat */

/* The Xids NVML reports as critical, judged by NVIDIA's "Xid Errors" document
 * (docs.nvidia.com/deploy/xid-errors): those that come from the application's own
 * faults leave the GPU fit for the next job; the rest fence it. An Xid not listed here
 * counts as sick: NVML already called it critical. */
static const struct {
    unsigned xid;
    bool fatal;
    const char *what;
} xids[] = {
    {13, false, "graphics engine exception (an application fault)"},
    {31, false, "GPU memory page fault (an application fault)"},
    {43, false, "GPU stopped processing (an application fault)"},
    {45, false, "preemptive cleanup after earlier errors"},
    {63, false, "ECC page retirement or row remap recorded"},
    {48, true, "double-bit ECC error"},
    {64, true, "ECC page retirement or row remap failed"},
    {74, true, "NVLink error"},
    {79, true, "GPU has fallen off the bus"},
    {94, true, "contained ECC error"},
    {95, true, "uncontained ECC error"},
    {119, true, "GSP RPC timeout"},
    {120, true, "GSP error"},
};

static bool xid_fatal(unsigned long long xid)
{
    for (size_t i = 0; i < ARRAY_SIZE(xids); i++)
        if (xids[i].xid == xid)
            return xids[i].fatal;
    return true;
}

typedef struct HealthApi {
    nvmlReturn_t (*DeviceGetHandleByIndex_v2)(unsigned int, nvmlDevice_t *);
    nvmlReturn_t (*EventSetCreate)(nvmlEventSet_t *);
    nvmlReturn_t (*DeviceRegisterEvents)(nvmlDevice_t, unsigned long long, nvmlEventSet_t);
    nvmlReturn_t (*EventSetWait_v2)(nvmlEventSet_t, nvmlEventData_t *, unsigned int);
    nvmlReturn_t (*EventSetFree)(nvmlEventSet_t);
    nvmlReturn_t (*DeviceGetTotalEccErrors)(nvmlDevice_t, int, int, unsigned long long *);
} HealthApi;

static const struct {
    const char *name;
    size_t offset;
} symbols[] = {
    {"nvmlDeviceGetHandleByIndex_v2", offsetof(HealthApi, DeviceGetHandleByIndex_v2)},
    {"nvmlEventSetCreate", offsetof(HealthApi, EventSetCreate)},
    {"nvmlDeviceRegisterEvents", offsetof(HealthApi, DeviceRegisterEvents)},
    {"nvmlEventSetWait_v2", offsetof(HealthApi, EventSetWait_v2)},
    {"nvmlEventSetFree", offsetof(HealthApi, EventSetFree)},
    {"nvmlDeviceGetTotalEccErrors", offsetof(HealthApi, DeviceGetTotalEccErrors)},
};

struct NvmlHealth {
    HealthApi f;
    nvmlEventSet_t set; /* NULL: the driver offers no events */
    unsigned count;
    nvmlDevice_t *dev; /* by index, NULL where the handle could not be had */
    GpuHealth *sticky; /* by index: the first reason seen */
};

static const char LOST[] = "fallen off the bus";

static void mark(NvmlHealth *h, unsigned i, const char *why)
{
    if (i < h->count && !h->sticky[i].why[0])
        snprintf(h->sticky[i].why, sizeof(h->sticky[i].why), "%s", why);
}

NvmlHealth *nvml_health_open(void *lib, unsigned count)
{
    NvmlHealth *h = calloc(1, sizeof(*h));
    if (!h)
        return NULL;
    h->count = count;
    h->dev = calloc(count ? count : 1, sizeof(*h->dev));
    h->sticky = calloc(count ? count : 1, sizeof(*h->sticky));
    if (!h->dev || !h->sticky) {
        nvml_health_close(h);
        return NULL;
    }
    for (size_t i = 0; i < ARRAY_SIZE(symbols); i++) {
        void *sym = dlsym(lib, symbols[i].name);
        memcpy((char *)&h->f + symbols[i].offset, &sym, sizeof(sym));
    }
    if (!h->f.DeviceGetHandleByIndex_v2)
        return h;
    for (unsigned i = 0; i < count; i++)
        if (h->f.DeviceGetHandleByIndex_v2(i, &h->dev[i]) != NVML_SUCCESS)
            h->dev[i] = NULL;
    if (!h->f.EventSetCreate || !h->f.DeviceRegisterEvents || !h->f.EventSetWait_v2 ||
        h->f.EventSetCreate(&h->set) != NVML_SUCCESS)
        h->set = NULL;
    for (unsigned i = 0; h->set && i < count; i++) {
        if (!h->dev[i])
            continue;
        /* NOT_SUPPORTED (a GPU without Xid events): its Xids go unseen, nothing more */
        nvmlReturn_t r =
            h->f.DeviceRegisterEvents(h->dev[i], NVML_EVENT_TYPE_XID_CRITICAL_ERROR, h->set);
        if (r == NVML_ERROR_GPU_IS_LOST)
            mark(h, i, LOST);
    }
    return h;
}

static void drain_events(NvmlHealth *h)
{
    for (int k = 0; h->set && k < MAX_EVENTS_PER_CHECK; k++) {
        nvmlEventData_t d = {0};
        nvmlReturn_t r = h->f.EventSetWait_v2(h->set, &d, 0);
        if (r != NVML_SUCCESS)
            return; /* TIMEOUT: none left; GPU_IS_LOST: the ECC query names the GPU */
        if (!(d.eventType & NVML_EVENT_TYPE_XID_CRITICAL_ERROR) || !xid_fatal(d.eventData))
            continue;
        for (unsigned i = 0; i < h->count; i++)
            if (h->dev[i] && h->dev[i] == d.device) {
                char why[GPU_HEALTH_MAX];
                snprintf(why, sizeof(why), "xid %llu", d.eventData);
                mark(h, i, why);
            }
    }
}

int nvml_health_check(NvmlHealth *h, GpuHealth *ret, size_t n, Buf *err)
{
    (void)err;
    drain_events(h);
    for (unsigned i = 0; i < h->count && i < n; i++) {
        nvmlDevice_t dev = h->dev[i];
        nvmlReturn_t r = NVML_SUCCESS;
        if (!dev && h->f.DeviceGetHandleByIndex_v2)
            r = h->f.DeviceGetHandleByIndex_v2(i, &dev);
        if (r == NVML_ERROR_GPU_IS_LOST)
            mark(h, i, LOST);
        unsigned long long ecc = 0;
        if (r == NVML_SUCCESS && dev && h->f.DeviceGetTotalEccErrors) {
            /* NOT_SUPPORTED: a GPU without ECC (most consumer cards) is not sick */
            r = h->f.DeviceGetTotalEccErrors(dev, NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
                                             NVML_VOLATILE_ECC, &ecc);
            if (r == NVML_ERROR_GPU_IS_LOST)
                mark(h, i, LOST);
            else if (r == NVML_SUCCESS && ecc > 0) {
                char why[GPU_HEALTH_MAX];
                snprintf(why, sizeof(why), "ecc uncorrected %llu", ecc);
                mark(h, i, why);
            }
        }
        ret[i] = h->sticky[i];
    }
    for (size_t i = h->count; i < n; i++)
        ret[i] = (GpuHealth){{0}};
    return 0;
}

void nvml_health_close(NvmlHealth *h)
{
    if (!h)
        return;
    if (h->set && h->f.EventSetFree)
        h->f.EventSetFree(h->set);
    free(h->dev);
    free(h->sticky);
    free(h);
}
