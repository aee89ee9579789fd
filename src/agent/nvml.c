/* nvml.c: the GPUs of a real node through NVML, loaded at run time with dlopen so the
 * build needs no NVIDIA driver. Discovery reads count, UUIDs, names, memory, MIG mode,
 * the MIG instances (GPU instance placement and profile, the MIG device UUID CUDA
 * takes) and NVLink peers. Applying a layout destroys the GPU instances that are not
 * in it (their compute instances first), then creates each missing one at its
 * placement with one compute instance spanning it, as nvidia-smi mig -cgi ... -C does.
 * Profiles are matched by the NVML profile ID the catalogue records (the ID column of
 * nvidia-smi mig -lgip), or by NVML's own profile name where the catalogue lacks it.
 *
 * The NVML types are nvml_types.h's; the entry points below are the ones this file
 * looks up, as the NVML API Reference Guide (docs.nvidia.com/deploy/nvml-api: "Device
 * Queries", "NvLink Methods", "Multi Instance GPU Management") declares them. */
#include "agent/gpus.h"
#include "agent/nvml_health.h"
#include "agent/nvml_sample.h"
#include "agent/nvml_types.h"
#include "util/macro.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* NVML_GPU_INSTANCE_PROFILE_* and NVML_COMPUTE_INSTANCE_PROFILE_* are small indices;
 * newer drivers add more, so every index below these bounds is asked for. */
#define GI_PROFILE_INDICES  32
#define CI_PROFILE_INDICES  16
#define MAX_GIS_PER_PROFILE 8

/* The entry points, resolved once. Optional ones may be NULL on older drivers. */
typedef struct NvmlApi {
    nvmlReturn_t (*Init_v2)(void);
    nvmlReturn_t (*Shutdown)(void);
    const char *(*ErrorString)(nvmlReturn_t);
    nvmlReturn_t (*DeviceGetCount_v2)(unsigned int *);
    nvmlReturn_t (*DeviceGetHandleByIndex_v2)(unsigned int, nvmlDevice_t *);
    nvmlReturn_t (*DeviceGetUUID)(nvmlDevice_t, char *, unsigned int);
    nvmlReturn_t (*DeviceGetName)(nvmlDevice_t, char *, unsigned int);
    nvmlReturn_t (*DeviceGetMemoryInfo)(nvmlDevice_t, nvmlMemory_t *);
    nvmlReturn_t (*DeviceGetPciInfo_v3)(nvmlDevice_t, nvmlPciInfo_t *);
    nvmlReturn_t (*DeviceGetMigMode)(nvmlDevice_t, unsigned int *, unsigned int *);
    nvmlReturn_t (*DeviceSetMigMode)(nvmlDevice_t, unsigned int, nvmlReturn_t *);
    nvmlReturn_t (*DeviceGetNvLinkState)(nvmlDevice_t, unsigned int, int *);
    nvmlReturn_t (*DeviceGetNvLinkRemotePciInfo_v2)(nvmlDevice_t, unsigned int, nvmlPciInfo_t *);
    nvmlReturn_t (*DeviceGetNvLinkRemoteDeviceType)(nvmlDevice_t, unsigned int, int *);
    nvmlReturn_t (*DeviceGetGpuInstanceProfileInfo)(nvmlDevice_t, unsigned int,
                                                    nvmlGpuInstanceProfileInfo_t *);
    nvmlReturn_t (*DeviceGetGpuInstanceProfileInfoV)(nvmlDevice_t, unsigned int,
                                                     nvmlGpuInstanceProfileInfo_v2_t *);
    nvmlReturn_t (*DeviceGetGpuInstances)(nvmlDevice_t, unsigned int, nvmlGpuInstance_t *,
                                          unsigned int *);
    nvmlReturn_t (*DeviceCreateGpuInstanceWithPlacement)(nvmlDevice_t, unsigned int,
                                                         const nvmlGpuInstancePlacement_t *,
                                                         nvmlGpuInstance_t *);
    nvmlReturn_t (*GpuInstanceGetInfo)(nvmlGpuInstance_t, nvmlGpuInstanceInfo_t *);
    nvmlReturn_t (*GpuInstanceDestroy)(nvmlGpuInstance_t);
    nvmlReturn_t (*GpuInstanceGetComputeInstanceProfileInfo)(nvmlGpuInstance_t, unsigned int,
                                                             unsigned int,
                                                             nvmlComputeInstanceProfileInfo_t *);
    nvmlReturn_t (*GpuInstanceCreateComputeInstance)(nvmlGpuInstance_t, unsigned int,
                                                     nvmlComputeInstance_t *);
    nvmlReturn_t (*GpuInstanceGetComputeInstances)(nvmlGpuInstance_t, unsigned int,
                                                   nvmlComputeInstance_t *, unsigned int *);
    nvmlReturn_t (*ComputeInstanceDestroy)(nvmlComputeInstance_t);
    nvmlReturn_t (*DeviceGetMaxMigDeviceCount)(nvmlDevice_t, unsigned int *);
    nvmlReturn_t (*DeviceGetMigDeviceHandleByIndex)(nvmlDevice_t, unsigned int, nvmlDevice_t *);
    nvmlReturn_t (*DeviceGetGpuInstanceId)(nvmlDevice_t, unsigned int *);
    nvmlReturn_t (*DeviceGetGpuInstanceById)(nvmlDevice_t, unsigned int, nvmlGpuInstance_t *);
    nvmlReturn_t (*DeviceGetComputeRunningProcesses_v3)(nvmlDevice_t, unsigned int *,
                                                        nvmlProcessInfo_t *);
    nvmlReturn_t (*DeviceGetUtilizationRates)(nvmlDevice_t, nvmlUtilization_t *);
    nvmlReturn_t (*DeviceGetPowerUsage)(nvmlDevice_t, unsigned int *);
    nvmlReturn_t (*DeviceGetTemperature)(nvmlDevice_t, int, unsigned int *);
    nvmlReturn_t (*DeviceSetComputeMode)(nvmlDevice_t, int);
} NvmlApi;

typedef struct Nvml {
    GpuBackend base;
    void *lib;
    NvmlApi f;
    unsigned count;
    NvmlHealth *health; /* nvml_health.c */
} Nvml;

static const struct {
    const char *name;
    size_t offset;
    bool required;
} symbols[] = {
    {"nvmlInit_v2", offsetof(NvmlApi, Init_v2), true},
    {"nvmlShutdown", offsetof(NvmlApi, Shutdown), true},
    {"nvmlErrorString", offsetof(NvmlApi, ErrorString), true},
    {"nvmlDeviceGetCount_v2", offsetof(NvmlApi, DeviceGetCount_v2), true},
    {"nvmlDeviceGetHandleByIndex_v2", offsetof(NvmlApi, DeviceGetHandleByIndex_v2), true},
    {"nvmlDeviceGetUUID", offsetof(NvmlApi, DeviceGetUUID), true},
    {"nvmlDeviceGetName", offsetof(NvmlApi, DeviceGetName), true},
    {"nvmlDeviceGetMemoryInfo", offsetof(NvmlApi, DeviceGetMemoryInfo), true},
    {"nvmlDeviceGetPciInfo_v3", offsetof(NvmlApi, DeviceGetPciInfo_v3), false},
    {"nvmlDeviceGetMigMode", offsetof(NvmlApi, DeviceGetMigMode), false},
    {"nvmlDeviceSetMigMode", offsetof(NvmlApi, DeviceSetMigMode), false},
    {"nvmlDeviceGetNvLinkState", offsetof(NvmlApi, DeviceGetNvLinkState), false},
    {"nvmlDeviceGetNvLinkRemotePciInfo_v2", offsetof(NvmlApi, DeviceGetNvLinkRemotePciInfo_v2),
     false},
    {"nvmlDeviceGetNvLinkRemoteDeviceType", offsetof(NvmlApi, DeviceGetNvLinkRemoteDeviceType),
     false},
    {"nvmlDeviceGetGpuInstanceProfileInfo", offsetof(NvmlApi, DeviceGetGpuInstanceProfileInfo),
     false},
    {"nvmlDeviceGetGpuInstanceProfileInfoV", offsetof(NvmlApi, DeviceGetGpuInstanceProfileInfoV),
     false},
    {"nvmlDeviceGetGpuInstances", offsetof(NvmlApi, DeviceGetGpuInstances), false},
    {"nvmlDeviceCreateGpuInstanceWithPlacement",
     offsetof(NvmlApi, DeviceCreateGpuInstanceWithPlacement), false},
    {"nvmlGpuInstanceGetInfo", offsetof(NvmlApi, GpuInstanceGetInfo), false},
    {"nvmlGpuInstanceDestroy", offsetof(NvmlApi, GpuInstanceDestroy), false},
    {"nvmlGpuInstanceGetComputeInstanceProfileInfo",
     offsetof(NvmlApi, GpuInstanceGetComputeInstanceProfileInfo), false},
    {"nvmlGpuInstanceCreateComputeInstance", offsetof(NvmlApi, GpuInstanceCreateComputeInstance),
     false},
    {"nvmlGpuInstanceGetComputeInstances", offsetof(NvmlApi, GpuInstanceGetComputeInstances),
     false},
    {"nvmlComputeInstanceDestroy", offsetof(NvmlApi, ComputeInstanceDestroy), false},
    {"nvmlDeviceGetMaxMigDeviceCount", offsetof(NvmlApi, DeviceGetMaxMigDeviceCount), false},
    {"nvmlDeviceGetMigDeviceHandleByIndex", offsetof(NvmlApi, DeviceGetMigDeviceHandleByIndex),
     false},
    {"nvmlDeviceGetGpuInstanceId", offsetof(NvmlApi, DeviceGetGpuInstanceId), false},
    {"nvmlDeviceGetGpuInstanceById", offsetof(NvmlApi, DeviceGetGpuInstanceById), false},
    {"nvmlDeviceGetComputeRunningProcesses_v3",
     offsetof(NvmlApi, DeviceGetComputeRunningProcesses_v3), false},
    {"nvmlDeviceGetUtilizationRates", offsetof(NvmlApi, DeviceGetUtilizationRates), false},
    {"nvmlDeviceGetPowerUsage", offsetof(NvmlApi, DeviceGetPowerUsage), false},
    {"nvmlDeviceGetTemperature", offsetof(NvmlApi, DeviceGetTemperature), false},
    {"nvmlDeviceSetComputeMode", offsetof(NvmlApi, DeviceSetComputeMode), false},
};

static const char *nerr(const Nvml *n, nvmlReturn_t r)
{
    const char *s = n->f.ErrorString ? n->f.ErrorString(r) : NULL;
    return s ? s : "unknown NVML error";
}

static bool has_mig_api(const Nvml *n)
{
    const NvmlApi *f = &n->f;
    return f->DeviceGetMigMode && f->DeviceSetMigMode && f->DeviceGetGpuInstanceProfileInfo &&
           f->DeviceGetGpuInstances && f->DeviceCreateGpuInstanceWithPlacement &&
           f->GpuInstanceGetInfo && f->GpuInstanceDestroy &&
           f->GpuInstanceGetComputeInstanceProfileInfo && f->GpuInstanceCreateComputeInstance &&
           f->GpuInstanceGetComputeInstances && f->ComputeInstanceDestroy &&
           f->DeviceGetMaxMigDeviceCount && f->DeviceGetMigDeviceHandleByIndex &&
           f->DeviceGetGpuInstanceId && f->DeviceGetGpuInstanceById;
}

static int device(Nvml *n, unsigned index, nvmlDevice_t *ret, Buf *err)
{
    if (index >= n->count) {
        buf_printf(err, "no GPU %u: NVML sees %u", index, n->count);
        return -ENODEV;
    }
    nvmlReturn_t r = n->f.DeviceGetHandleByIndex_v2(index, ret);
    if (r != NVML_SUCCESS) {
        buf_printf(err, "GPU %u: nvmlDeviceGetHandleByIndex: %s", index, nerr(n, r));
        return -EIO;
    }
    return 0;
}

/* NVML's name of a GPU instance profile ("MIG 1g.10gb" -> "1g.10gb"), or "". */
static void nvml_profile_name(Nvml *n, nvmlDevice_t dev, unsigned profile_index, char *out,
                              size_t cap)
{
    out[0] = '\0';
    if (!n->f.DeviceGetGpuInstanceProfileInfoV)
        return;
    nvmlGpuInstanceProfileInfo_v2_t v = {.version = nvmlGpuInstanceProfileInfo_v2};
    if (n->f.DeviceGetGpuInstanceProfileInfoV(dev, profile_index, &v) != NVML_SUCCESS)
        return;
    v.name[sizeof(v.name) - 1] = '\0';
    const char *s = v.name;
    if (!strncasecmp(s, "MIG ", 4))
        s += 4;
    size_t len = strnlen(s, cap - 1);
    memcpy(out, s, len);
    out[len] = '\0';
}

/* The profile name of NVML GPU instance profile id: the catalogue's where it records
 * the id, else NVML's own. */
static void profile_name_of_id(Nvml *n, nvmlDevice_t dev, const GpuModel *m, unsigned id, char *out,
                               size_t cap)
{
    for (int p = 0; m && p < m->n_profiles; p++)
        if (m->profiles[p].nvml_id == id) {
            snprintf(out, cap, "%s", m->profiles[p].name);
            return;
        }
    for (unsigned k = 0; k < GI_PROFILE_INDICES; k++) {
        nvmlGpuInstanceProfileInfo_t info;
        if (n->f.DeviceGetGpuInstanceProfileInfo(dev, k, &info) == NVML_SUCCESS && info.id == id) {
            nvml_profile_name(n, dev, k, out, cap);
            if (out[0])
                return;
        }
    }
    snprintf(out, cap, "profile-%u", id);
}

/* The NVML profile id and info of catalogue profile p of m on dev. */
static int profile_info(Nvml *n, nvmlDevice_t dev, const GpuModel *m, int p,
                        nvmlGpuInstanceProfileInfo_t *ret)
{
    const MigProfile *mp = &m->profiles[p];
    for (unsigned k = 0; k < GI_PROFILE_INDICES; k++) {
        nvmlGpuInstanceProfileInfo_t info;
        if (n->f.DeviceGetGpuInstanceProfileInfo(dev, k, &info) != NVML_SUCCESS)
            continue;
        bool match = mp->nvml_id != 0xffff && info.id == mp->nvml_id;
        if (!match && mp->nvml_id == 0xffff) {
            char name[GPU_PROFILE_MAX];
            nvml_profile_name(n, dev, k, name, sizeof(name));
            match = !strcasecmp(name, mp->name);
        }
        if (match) {
            *ret = info;
            return 0;
        }
    }
    return -ENOENT;
}

/* The MIG devices of dev (GPU instances that have a compute instance), in start
 * order. */
static int list_instances(Nvml *n, nvmlDevice_t dev, unsigned index, const GpuModel *m,
                          GpuInstance out[MIG_MAX_SLOTS], size_t *ret_n, Buf *err)
{
    unsigned max = 0;
    nvmlReturn_t r = n->f.DeviceGetMaxMigDeviceCount(dev, &max);
    if (r != NVML_SUCCESS) {
        buf_printf(err, "GPU %u: nvmlDeviceGetMaxMigDeviceCount: %s", index, nerr(n, r));
        return -EIO;
    }
    size_t cnt = 0;
    for (unsigned i = 0; i < max && cnt < MIG_MAX_SLOTS; i++) {
        nvmlDevice_t mig;
        if (n->f.DeviceGetMigDeviceHandleByIndex(dev, i, &mig) != NVML_SUCCESS)
            continue; /* NVML_ERROR_NOT_FOUND: no MIG device at this index */
        unsigned gid;
        nvmlGpuInstance_t gi;
        nvmlGpuInstanceInfo_t info;
        GpuInstance in = {0};
        if (n->f.DeviceGetUUID(mig, in.uuid, sizeof(in.uuid)) != NVML_SUCCESS ||
            n->f.DeviceGetGpuInstanceId(mig, &gid) != NVML_SUCCESS ||
            n->f.DeviceGetGpuInstanceById(dev, gid, &gi) != NVML_SUCCESS ||
            n->f.GpuInstanceGetInfo(gi, &info) != NVML_SUCCESS)
            continue;
        if (info.placement.start >= MIG_MAX_SLOTS)
            continue;
        in.start = (uint8_t)info.placement.start;
        profile_name_of_id(n, dev, m, info.profileId, in.profile, sizeof(in.profile));
        bool dup = false;
        for (size_t k = 0; k < cnt; k++)
            dup |= out[k].start == in.start; /* several compute instances in one GPU instance */
        if (!dup)
            out[cnt++] = in;
    }
    for (size_t i = 1; i < cnt; i++) /* insertion sort by start */
        for (size_t k = i; k > 0 && out[k - 1].start > out[k].start; k--) {
            GpuInstance t = out[k];
            out[k] = out[k - 1];
            out[k - 1] = t;
        }
    *ret_n = cnt;
    return 0;
}

static int nvml_mig_list(GpuBackend *b, unsigned index, bool *ret_enabled,
                         GpuInstance ret[MIG_MAX_SLOTS], size_t *ret_n, Buf *err)
{
    Nvml *n = (Nvml *)b;
    nvmlDevice_t dev;
    int r = device(n, index, &dev, err);
    if (r < 0)
        return r;
    unsigned cur = 0, pending = 0;
    if (!has_mig_api(n) || n->f.DeviceGetMigMode(dev, &cur, &pending) != NVML_SUCCESS ||
        cur != NVML_DEVICE_MIG_ENABLE) {
        *ret_enabled = false;
        *ret_n = 0;
        return 0;
    }
    char name[GPU_NAME_MAX] = "";
    n->f.DeviceGetName(dev, name, sizeof(name));
    r = list_instances(n, dev, index, catalog_find(name), ret, ret_n, err);
    if (r < 0)
        return r;
    *ret_enabled = true;
    return 0;
}

/* NVLink peers: GPUs at the far end of an active link, and, on NVSwitch systems where
 * every link ends at a switch, every other GPU with switch links. Best effort: a
 * driver without these calls gives no peers. */
static void nvlink_peers(Nvml *n, AgentGpu *gpus, nvmlDevice_t *devs, unsigned count)
{
    if (!n->f.DeviceGetNvLinkState || !n->f.DeviceGetNvLinkRemotePciInfo_v2 ||
        !n->f.DeviceGetPciInfo_v3)
        return;
    char(*bus)[32] = calloc(count, sizeof(*bus));
    bool *switched = calloc(count, sizeof(*switched));
    if (!bus || !switched) {
        free(bus);
        free(switched);
        return;
    }
    for (unsigned i = 0; i < count; i++) {
        nvmlPciInfo_t pci;
        if (n->f.DeviceGetPciInfo_v3(devs[i], &pci) == NVML_SUCCESS)
            snprintf(bus[i], sizeof(bus[i]), "%s", pci.busId);
    }
    for (unsigned i = 0; i < count; i++) {
        AgentGpu *g = &gpus[i];
        for (unsigned link = 0; link < NVML_NVLINK_MAX_LINKS; link++) {
            int active = 0;
            nvmlPciInfo_t pci;
            if (n->f.DeviceGetNvLinkState(devs[i], link, &active) != NVML_SUCCESS ||
                active != NVML_FEATURE_ENABLED ||
                n->f.DeviceGetNvLinkRemotePciInfo_v2(devs[i], link, &pci) != NVML_SUCCESS)
                continue;
            int type = -1;
            if (n->f.DeviceGetNvLinkRemoteDeviceType)
                n->f.DeviceGetNvLinkRemoteDeviceType(devs[i], link, &type);
            bool found = false;
            for (unsigned j = 0; j < count; j++) {
                if (j == i || !bus[j][0] || strcasecmp(bus[j], pci.busId))
                    continue;
                found = true;
                bool have = false;
                for (size_t k = 0; k < g->n_peers; k++)
                    have |= g->peers[k] == j;
                if (!have && g->n_peers < GPU_MAX_PEERS)
                    g->peers[g->n_peers++] = j;
            }
            if (!found && type != NVML_NVLINK_DEVICE_TYPE_GPU)
                switched[i] = true;
        }
    }
    for (unsigned i = 0; i < count; i++)
        for (unsigned j = 0; switched[i] && j < count; j++) {
            if (j == i || !switched[j])
                continue;
            bool have = false;
            for (size_t k = 0; k < gpus[i].n_peers; k++)
                have |= gpus[i].peers[k] == j;
            if (!have && gpus[i].n_peers < GPU_MAX_PEERS)
                gpus[i].peers[gpus[i].n_peers++] = j;
        }
    free(bus);
    free(switched);
}

static int nvml_discover(GpuBackend *b, AgentGpu **ret, size_t *ret_n, Buf *err)
{
    Nvml *n = (Nvml *)b;
    AgentGpu *gpus = calloc(n->count ? n->count : 1, sizeof(*gpus));
    nvmlDevice_t *devs = calloc(n->count ? n->count : 1, sizeof(*devs));
    int r = 0;
    if (!gpus || !devs) {
        buf_puts(err, "out of memory");
        r = -ENOMEM;
        goto fail;
    }
    for (unsigned i = 0; i < n->count; i++) {
        AgentGpu *g = &gpus[i];
        g->index = i;
        if ((r = device(n, i, &devs[i], err)) < 0)
            goto fail;
        nvmlReturn_t nr = n->f.DeviceGetUUID(devs[i], g->uuid, sizeof(g->uuid));
        if (nr != NVML_SUCCESS) {
            buf_printf(err, "GPU %u: nvmlDeviceGetUUID: %s", i, nerr(n, nr));
            r = -EIO;
            goto fail;
        }
        if (n->f.DeviceGetName(devs[i], g->name, sizeof(g->name)) != NVML_SUCCESS)
            snprintf(g->name, sizeof(g->name), "unknown");
        nvmlMemory_t mem;
        if (n->f.DeviceGetMemoryInfo(devs[i], &mem) == NVML_SUCCESS)
            g->memory_mib = mem.total >> 20;
        g->model = catalog_find(g->name);
        unsigned cur = 0, pending = 0;
        if (has_mig_api(n) && n->f.DeviceGetMigMode(devs[i], &cur, &pending) == NVML_SUCCESS) {
            g->mig_capable = true;
            g->mig_enabled = cur == NVML_DEVICE_MIG_ENABLE;
        }
        if (g->mig_enabled &&
            (r = list_instances(n, devs[i], i, g->model, g->mig, &g->n_mig, err)) < 0)
            goto fail;
    }
    nvlink_peers(n, gpus, devs, n->count);
    free(devs);
    *ret = gpus;
    *ret_n = n->count;
    return 0;
fail:
    free(gpus);
    free(devs);
    return r;
}

typedef struct Existing {
    nvmlGpuInstance_t gi;
    unsigned start, profile_id;
} Existing;

/* Every GPU instance on dev, with or without compute instances. */
static size_t existing_instances(Nvml *n, nvmlDevice_t dev, Existing *out, size_t cap)
{
    size_t cnt = 0;
    unsigned seen_ids[GI_PROFILE_INDICES];
    size_t n_seen = 0;
    for (unsigned k = 0; k < GI_PROFILE_INDICES; k++) {
        nvmlGpuInstanceProfileInfo_t info;
        if (n->f.DeviceGetGpuInstanceProfileInfo(dev, k, &info) != NVML_SUCCESS)
            continue;
        bool dup = false;
        for (size_t s = 0; s < n_seen; s++)
            dup |= seen_ids[s] == info.id;
        if (dup)
            continue;
        seen_ids[n_seen++] = info.id;
        nvmlGpuInstance_t gis[MAX_GIS_PER_PROFILE];
        unsigned c = MAX_GIS_PER_PROFILE;
        if (n->f.DeviceGetGpuInstances(dev, info.id, gis, &c) != NVML_SUCCESS)
            continue;
        for (unsigned i = 0; i < c && cnt < cap; i++) {
            nvmlGpuInstanceInfo_t gi;
            if (n->f.GpuInstanceGetInfo(gis[i], &gi) != NVML_SUCCESS)
                continue;
            out[cnt++] =
                (Existing){.gi = gis[i], .start = gi.placement.start, .profile_id = gi.profileId};
        }
    }
    return cnt;
}

/* Whether a compute process runs in gi (its first pid in *ret_pid): through the MIG
 * devices of dev that belong to it. A MIG device NVML cannot answer for counts as free:
 * the destroy that follows still refuses with NVML_ERROR_IN_USE. */
static bool instance_in_use(Nvml *n, nvmlDevice_t dev, nvmlGpuInstance_t gi, unsigned *ret_pid)
{
    nvmlGpuInstanceInfo_t info;
    unsigned max = 0;
    if (!n->f.DeviceGetMaxMigDeviceCount || !n->f.DeviceGetMigDeviceHandleByIndex ||
        !n->f.DeviceGetGpuInstanceId || !n->f.DeviceGetComputeRunningProcesses_v3 ||
        n->f.GpuInstanceGetInfo(gi, &info) != NVML_SUCCESS ||
        n->f.DeviceGetMaxMigDeviceCount(dev, &max) != NVML_SUCCESS)
        return false;
    for (unsigned i = 0; i < max; i++) {
        nvmlDevice_t mig;
        unsigned gid;
        if (n->f.DeviceGetMigDeviceHandleByIndex(dev, i, &mig) != NVML_SUCCESS ||
            n->f.DeviceGetGpuInstanceId(mig, &gid) != NVML_SUCCESS || gid != info.id)
            continue;
        nvmlProcessInfo_t one[1];
        unsigned c = 1;
        nvmlReturn_t r = n->f.DeviceGetComputeRunningProcesses_v3(mig, &c, one);
        if (r == NVML_ERROR_INSUFFICIENT_SIZE || (r == NVML_SUCCESS && c > 0)) {
            *ret_pid = r == NVML_SUCCESS ? one[0].pid : 0;
            return true;
        }
    }
    return false;
}

/* Destroy a GPU instance and its compute instances. */
static nvmlReturn_t destroy_instance(Nvml *n, nvmlGpuInstance_t gi)
{
    for (unsigned k = 0; k < CI_PROFILE_INDICES; k++) {
        nvmlComputeInstanceProfileInfo_t ci;
        if (n->f.GpuInstanceGetComputeInstanceProfileInfo(
                gi, k, NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED, &ci) != NVML_SUCCESS)
            continue;
        nvmlComputeInstance_t cis[MIG_MAX_SLOTS];
        unsigned c = MIG_MAX_SLOTS;
        if (n->f.GpuInstanceGetComputeInstances(gi, ci.id, cis, &c) != NVML_SUCCESS)
            continue;
        for (unsigned i = 0; i < c; i++) {
            nvmlReturn_t r = n->f.ComputeInstanceDestroy(cis[i]);
            if (r != NVML_SUCCESS)
                return r;
        }
    }
    return n->f.GpuInstanceDestroy(gi);
}

/* Give gi one compute instance spanning all of it, unless it has one. */
static nvmlReturn_t ensure_compute_instance(Nvml *n, nvmlGpuInstance_t gi, unsigned slices)
{
    nvmlComputeInstanceProfileInfo_t full = {0};
    for (unsigned k = 0; k < CI_PROFILE_INDICES; k++) {
        nvmlComputeInstanceProfileInfo_t ci;
        if (n->f.GpuInstanceGetComputeInstanceProfileInfo(
                gi, k, NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED, &ci) != NVML_SUCCESS)
            continue;
        nvmlComputeInstance_t cis[MIG_MAX_SLOTS];
        unsigned c = MIG_MAX_SLOTS;
        if (n->f.GpuInstanceGetComputeInstances(gi, ci.id, cis, &c) == NVML_SUCCESS && c > 0)
            return NVML_SUCCESS;
        if (full.sliceCount != slices &&
            (ci.sliceCount == slices || ci.sliceCount > full.sliceCount))
            full = ci;
    }
    if (!full.sliceCount)
        return NVML_ERROR_NOT_SUPPORTED;
    nvmlComputeInstance_t ci;
    return n->f.GpuInstanceCreateComputeInstance(gi, full.id, &ci);
}

static int nvml_mig_apply(GpuBackend *b, unsigned index, const MigLayout *target, uint8_t busy,
                          Buf *err)
{
    Nvml *n = (Nvml *)b;
    nvmlDevice_t dev;
    int r = device(n, index, &dev, err);
    if (r < 0)
        return r;
    bool off = mig_layout_empty(target);
    unsigned cur = 0, pending = 0;
    if (!has_mig_api(n) || n->f.DeviceGetMigMode(dev, &cur, &pending) != NVML_SUCCESS) {
        if (off)
            return 0;
        buf_printf(err, "GPU %u has no MIG (or the driver's NVML lacks the MIG calls)", index);
        return -EINVAL;
    }
    char name[GPU_NAME_MAX] = "";
    n->f.DeviceGetName(dev, name, sizeof(name));
    const GpuModel *m = catalog_find(name);
    if (!off && !m) {
        buf_printf(err, "GPU %u (%s) is not in the GPU catalogue: its MIG profiles are unknown",
                   index, name);
        return -EINVAL;
    }
    if (!off && !mig_layout_valid(m, target)) {
        buf_printf(err, "GPU %u: not a valid MIG layout of %s", index, m->name);
        return -EINVAL;
    }
    if (off && cur != NVML_DEVICE_MIG_ENABLE)
        return 0;
    nvmlReturn_t act = NVML_SUCCESS;
    nvmlReturn_t nr;
    if (!off && cur != NVML_DEVICE_MIG_ENABLE) {
        /* first: NVML describes the GPU instance profiles only in MIG mode, and with MIG
         * off no instance exists that could be busy */
        nr = n->f.DeviceSetMigMode(dev, NVML_DEVICE_MIG_ENABLE, &act);
        if (nr != NVML_SUCCESS || act != NVML_SUCCESS ||
            n->f.DeviceGetMigMode(dev, &cur, &pending) != NVML_SUCCESS ||
            cur != NVML_DEVICE_MIG_ENABLE) {
            buf_printf(err,
                       "GPU %u: turning MIG on: %s (the change may wait for a GPU reset: "
                       "nvidia-smi -i %u -r)",
                       index, nerr(n, nr != NVML_SUCCESS ? nr : act), index);
            return -EIO;
        }
    }

    Existing ex[MIG_MAX_SLOTS * 2];
    size_t n_ex = existing_instances(n, dev, ex, ARRAY_SIZE(ex));
    /* what stays, what goes; refuse before touching anything when a busy one would go */
    bool keep_ex[MIG_MAX_SLOTS * 2] = {false};
    nvmlGpuInstanceProfileInfo_t want_info[MIG_MAX_SLOTS];
    for (int s = 0; s < MIG_MAX_SLOTS; s++) {
        if (target->profile_at[s] == MIG_NONE)
            continue;
        if (profile_info(n, dev, m, target->profile_at[s], &want_info[s]) < 0) {
            buf_printf(err, "GPU %u (%s): NVML offers no %s profile", index, name,
                       m->profiles[target->profile_at[s]].name);
            return -EINVAL;
        }
        for (size_t i = 0; i < n_ex; i++)
            if (ex[i].start == (unsigned)s && ex[i].profile_id == want_info[s].id)
                keep_ex[i] = true;
    }
    for (size_t i = 0; i < n_ex; i++)
        if (!keep_ex[i] && ex[i].start < MIG_MAX_SLOTS && (busy & (1u << ex[i].start))) {
            char pname[GPU_PROFILE_MAX];
            profile_name_of_id(n, dev, m, ex[i].profile_id, pname, sizeof(pname));
            buf_printf(err, "GPU %u: the %s instance at slot %u is in use", index, pname,
                       ex[i].start);
            return -EBUSY;
        }

    /* the driver may know a process the server does not (started outside gpuorch): ask
     * it for every instance that would go, before any goes, so a refusal leaves the GPU
     * as it was rather than half changed */
    for (size_t i = 0; i < n_ex; i++) {
        unsigned pid = 0;
        if (!keep_ex[i] && instance_in_use(n, dev, ex[i].gi, &pid)) {
            char pname[GPU_PROFILE_MAX];
            profile_name_of_id(n, dev, m, ex[i].profile_id, pname, sizeof(pname));
            buf_printf(err,
                       "GPU %u: the %s instance at slot %u has a process (pid %u) that "
                       "gpuorch did not start: nothing changed",
                       index, pname, ex[i].start, pid);
            return -EBUSY;
        }
    }
    for (size_t i = 0; i < n_ex; i++) {
        if (keep_ex[i])
            continue;
        nr = destroy_instance(n, ex[i].gi);
        if (nr != NVML_SUCCESS) {
            buf_printf(err, "GPU %u: destroying the instance at slot %u: %s", index, ex[i].start,
                       nerr(n, nr));
            return nr == NVML_ERROR_IN_USE ? -EBUSY : -EIO;
        }
    }
    if (off) {
        nr = n->f.DeviceSetMigMode(dev, NVML_DEVICE_MIG_DISABLE, &act);
        if (nr != NVML_SUCCESS || act != NVML_SUCCESS) {
            buf_printf(err, "GPU %u: turning MIG off: %s", index,
                       nerr(n, nr != NVML_SUCCESS ? nr : act));
            return -EIO;
        }
        return 0;
    }
    for (size_t i = 0; i < n_ex; i++)
        if (keep_ex[i]) {
            nvmlGpuInstanceInfo_t info;
            if (n->f.GpuInstanceGetInfo(ex[i].gi, &info) == NVML_SUCCESS)
                ensure_compute_instance(n, ex[i].gi, want_info[ex[i].start].sliceCount);
        }
    for (int s = 0; s < MIG_MAX_SLOTS; s++) {
        if (target->profile_at[s] == MIG_NONE)
            continue;
        bool kept = false;
        for (size_t i = 0; i < n_ex; i++)
            kept |= keep_ex[i] && ex[i].start == (unsigned)s;
        if (kept)
            continue;
        const MigProfile *mp = &m->profiles[target->profile_at[s]];
        nvmlGpuInstancePlacement_t pl = {.start = (unsigned)s, .size = mp->memory_slices};
        nvmlGpuInstance_t gi;
        nr = n->f.DeviceCreateGpuInstanceWithPlacement(dev, want_info[s].id, &pl, &gi);
        if (nr == NVML_SUCCESS)
            nr = ensure_compute_instance(n, gi, want_info[s].sliceCount);
        if (nr != NVML_SUCCESS) {
            buf_printf(err, "GPU %u: creating %s at slot %d: %s", index, mp->name, s, nerr(n, nr));
            return -EIO;
        }
    }
    return 0;
}

/* Processes on dev and, in MIG mode, on each of its MIG devices. */
static int add_processes(Nvml *n, nvmlDevice_t dev, GpuProcess **list, size_t *len, size_t *cap)
{
    unsigned c = 64;
    nvmlProcessInfo_t *infos = NULL;
    for (int attempt = 0; attempt < 2; attempt++) {
        free(infos);
        infos = calloc(c ? c : 1, sizeof(*infos));
        if (!infos)
            return -ENOMEM;
        nvmlReturn_t r = n->f.DeviceGetComputeRunningProcesses_v3(dev, &c, infos);
        if (r == NVML_SUCCESS)
            break;
        if (r != NVML_ERROR_INSUFFICIENT_SIZE || attempt == 1) {
            c = 0;
            break;
        }
        c += 16;
    }
    for (unsigned i = 0; i < c; i++) {
        if (infos[i].usedGpuMemory == NVML_VALUE_NOT_AVAILABLE_ULL)
            continue;
        uint64_t mib = infos[i].usedGpuMemory >> 20;
        bool merged = false;
        for (size_t k = 0; k < *len; k++)
            if ((*list)[k].pid == (pid_t)infos[i].pid) {
                if (mib > (*list)[k].used_mib)
                    (*list)[k].used_mib = mib;
                merged = true;
            }
        if (merged)
            continue;
        if (GROW(*list, *cap, *len + 1) < 0) {
            free(infos);
            return -ENOMEM;
        }
        (*list)[(*len)++] = (GpuProcess){.pid = (pid_t)infos[i].pid, .used_mib = mib};
    }
    free(infos);
    return 0;
}

static int nvml_processes(GpuBackend *b, GpuProcess **ret, size_t *ret_n, Buf *err)
{
    Nvml *n = (Nvml *)b;
    GpuProcess *list = NULL;
    size_t len = 0, cap = 0;
    if (!n->f.DeviceGetComputeRunningProcesses_v3) {
        *ret = NULL;
        *ret_n = 0;
        return 0;
    }
    for (unsigned i = 0; i < n->count; i++) {
        nvmlDevice_t dev;
        if (n->f.DeviceGetHandleByIndex_v2(i, &dev) != NVML_SUCCESS)
            continue;
        int r = add_processes(n, dev, &list, &len, &cap);
        unsigned cur = 0, pending = 0, max = 0;
        if (r == 0 && has_mig_api(n) &&
            n->f.DeviceGetMigMode(dev, &cur, &pending) == NVML_SUCCESS &&
            cur == NVML_DEVICE_MIG_ENABLE &&
            n->f.DeviceGetMaxMigDeviceCount(dev, &max) == NVML_SUCCESS)
            for (unsigned k = 0; k < max && r == 0; k++) {
                nvmlDevice_t mig;
                if (n->f.DeviceGetMigDeviceHandleByIndex(dev, k, &mig) == NVML_SUCCESS)
                    r = add_processes(n, mig, &list, &len, &cap);
            }
        if (r < 0) {
            free(list);
            buf_puts(err, "out of memory");
            return r;
        }
    }
    *ret = list;
    *ret_n = len;
    return 0;
}

/* nvml_sample.c does the reading, with the entry points it needs from the table. */
static int nvml_sample(GpuBackend *b, const AgentGpu *g, const GpuLoad *load, GpuSample *ret,
                       Buf *err)
{
    (void)load;
    const NvmlApi *f = &((Nvml *)b)->f;
    bool mig = has_mig_api((Nvml *)b);
    NvmlSampleApi api = {
        .DeviceGetHandleByIndex_v2 = f->DeviceGetHandleByIndex_v2,
        .DeviceGetUUID = f->DeviceGetUUID,
        .DeviceGetMemoryInfo = f->DeviceGetMemoryInfo,
        .DeviceGetUtilizationRates = f->DeviceGetUtilizationRates,
        .DeviceGetPowerUsage = f->DeviceGetPowerUsage,
        .DeviceGetTemperature = f->DeviceGetTemperature,
        .DeviceGetMaxMigDeviceCount = mig ? f->DeviceGetMaxMigDeviceCount : NULL,
        .DeviceGetMigDeviceHandleByIndex = mig ? f->DeviceGetMigDeviceHandleByIndex : NULL,
    };
    return nvml_sample_gpu(&api, g, ret, err);
}

static int nvml_health(GpuBackend *b, GpuHealth *ret, size_t n_ret, Buf *err)
{
    Nvml *n = (Nvml *)b;
    return nvml_health_check(n->health, ret, n_ret, err);
}

static void nvml_close(GpuBackend *b)
{
    Nvml *n = (Nvml *)b;
    nvml_health_close(n->health);
    if (n->f.Shutdown)
        n->f.Shutdown();
    if (n->lib)
        dlclose(n->lib);
    free(n);
}

static int nvml_set_compute_mode(GpuBackend *b, unsigned index, bool exclusive, Buf *err)
{
    Nvml *n = (Nvml *)b;
    nvmlDevice_t dev;
    int r = device(n, index, &dev, err);
    if (r < 0)
        return r;
    if (!n->f.DeviceSetComputeMode) {
        buf_printf(err, "GPU %u: the driver's NVML cannot set the compute mode", index);
        return -ENOSYS;
    }
    nvmlReturn_t nr = n->f.DeviceSetComputeMode(dev, exclusive ? NVML_COMPUTEMODE_EXCLUSIVE_PROCESS
                                                               : NVML_COMPUTEMODE_DEFAULT);
    if (nr != NVML_SUCCESS) {
        buf_printf(err, "GPU %u: setting the %s compute mode: %s", index,
                   exclusive ? "exclusive-process" : "default", nerr(n, nr));
        return nr == NVML_ERROR_NOT_SUPPORTED ? -ENOTSUP : -EIO;
    }
    return 0;
}

static const GpuOps nvml_ops = {
    .name = "nvml",
    .discover = nvml_discover,
    .mig_apply = nvml_mig_apply,
    .mig_list = nvml_mig_list,
    .processes = nvml_processes,
    .sample = nvml_sample,
    .health = nvml_health,
    .set_compute_mode = nvml_set_compute_mode,
    .close = nvml_close,
};

int nvml_open(GpuBackend **ret, Buf *err)
{
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        buf_puts(err, "NVML not found (libnvidia-ml.so.1): is the NVIDIA driver installed? "
                      "Use --gpus sim:MODEL:COUNT to simulate");
        return -ENOENT;
    }
    Nvml *n = calloc(1, sizeof(*n));
    if (!n) {
        dlclose(lib);
        buf_puts(err, "out of memory");
        return -ENOMEM;
    }
    n->base.ops = &nvml_ops;
    n->lib = lib;
    for (size_t i = 0; i < sizeof(symbols) / sizeof(symbols[0]); i++) {
        void *sym = dlsym(lib, symbols[i].name);
        if (!sym && symbols[i].required) {
            buf_printf(err, "libnvidia-ml.so.1 lacks %s: the NVIDIA driver is too old",
                       symbols[i].name);
            dlclose(lib);
            free(n);
            return -ENOSYS;
        }
        memcpy((char *)&n->f + symbols[i].offset, &sym, sizeof(sym));
    }
    nvmlReturn_t r = n->f.Init_v2();
    if (r != NVML_SUCCESS) {
        buf_printf(err, "NVML could not start: %s", nerr(n, r));
        n->f.Shutdown = NULL;
        nvml_close(&n->base);
        return -EIO;
    }
    r = n->f.DeviceGetCount_v2(&n->count);
    if (r != NVML_SUCCESS) {
        buf_printf(err, "nvmlDeviceGetCount: %s", nerr(n, r));
        nvml_close(&n->base);
        return -EIO;
    }
    if (!(n->health = nvml_health_open(lib, n->count))) {
        buf_puts(err, "out of memory");
        nvml_close(&n->base);
        return -ENOMEM;
    }
    *ret = &n->base;
    return 0;
}
