/* nvml_double.c: a test double standing in for the NVIDIA driver's libnvidia-ml.so.1,
 * because no GPU is on the test machines. It is not a GPU and drives none: it keeps
 * a scripted node in memory and answers the NVML calls src/agent/nvml.c looks up
 * (its symbols[] table), with the return codes the NVML API Reference Guide gives
 * them (docs.nvidia.com/deploy/nvml-api).
 *
 * The tests build it as libnvidia-ml.so.1 in a directory of its own and put that
 * directory on LD_LIBRARY_PATH. nvmlInit_v2 reads the JSON file GPUORCH_NVML_DOUBLE
 * names:
 *   {"init_error": 0,                           optional: nvmlInit_v2 returns it
 *    "devices": [{"uuid": "GPU-...", "name": "NVIDIA A100-SXM4-80GB",
 *                 "memory_mib": 81920, "pci_bus_id": "00000000:07:00.0",
 *                 "mig_capable": true, "mig_enabled": true,
 *                 "mig_needs_reset": false,     nvmlDeviceSetMigMode says RESET_REQUIRED
 *                 "compute_mode": 0,            nvmlComputeMode_t, set by nvmlDeviceSetComputeMode
 *                 "processes": [{"pid": 10, "used_mib": 500}],
 *                 "sample": {"gpu_util": 73, "memory_util": 40,
 *                            "power_mw": 250500, "temperature_c": 61,
 *                            "utilization_error": 3, ...},
 *                 "nvlinks": [{"link": 0, "peer": "GPU-..."}, {"link": 1, "switch": true}],
 *                 "gpu_instances": [{"profile": "1g.10gb", "start": 0,
 *                                    "compute_instances": [{"uuid": "MIG-..."}],
 *                                    "processes": [{"pid": 11, "used_mib": 900}],
 *                                    "sample": {"gpu_util": 20}}]}]}
 * "sample" scripts nvmlDeviceGetUtilizationRates (gpu_util, memory_util), GetPowerUsage
 * (power_mw) and GetTemperature (temperature_c); a reading not scripted answers
 * NVML_ERROR_NOT_SUPPORTED, as most MIG devices do for utilisation, and
 * utilization_error, power_error or temperature_error make that call return the given
 * code. A GPU instance's sample answers for its MIG device (utilisation only). Memory
 * used is always the processes' sum.
 *
 * Health, per device, read again from the file at every health call (nvmlEventSetWait_v2,
 * nvmlDeviceGetTotalEccErrors) so a test can make a running agent's GPU sick:
 *   "xid": 79                 delivered once as a critical Xid event (each new value once)
 *   "ecc_uncorrected": 2      the volatile uncorrected ECC count; "ecc_supported": false
 *                             makes nvmlDeviceGetTotalEccErrors answer NOT_SUPPORTED
 *   "lost": true              fallen off the bus: nvmlDeviceGetHandleByIndex_v2 and the
 *                             health calls on it answer NVML_ERROR_GPU_IS_LOST
 * and writes it back (same file, every other key kept) whenever MIG mode, a GPU
 * instance or a compute instance changes, so a test can read what the agent did.
 *
 * MIG follows the A100/H100 80GB geometry the catalogue (data/gpu-catalog.json)
 * records and nvidia-smi mig -lgip/-lgipp shows: 8 memory slots, 7 compute slices,
 * profiles by NVML profile index and ID with their valid starts. A GPU instance may
 * not overlap another, exceed its profile's count or the compute slices; destroying
 * one that has compute instances, or any instance whose GPU instance has processes,
 * fails with NVML_ERROR_IN_USE. Handles point into static storage, so a handle to a
 * destroyed instance is refused (INVALID_ARGUMENT), never a dangling pointer. */
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* The NVML types and codes are the agent's own (src/agent/nvml_types.h); the functions
 * below, as nvml.h declares them. */
#include "agent/nvml_types.h"

#define NVML_GPU_INSTANCE_PROFILE_COUNT     10
#define NVML_COMPUTE_INSTANCE_PROFILE_COUNT 8

nvmlReturn_t nvmlInit_v2(void);
nvmlReturn_t nvmlShutdown(void);
const char *nvmlErrorString(nvmlReturn_t result);
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount);
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device);
nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length);
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length);
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory);
nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci);
nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *currentMode,
                                  unsigned int *pendingMode);
nvmlReturn_t nvmlDeviceSetMigMode(nvmlDevice_t device, unsigned int mode,
                                  nvmlReturn_t *activationStatus);
nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link, int *isActive);
nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t device, unsigned int link,
                                                 nvmlPciInfo_t *pci);
nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_t device, unsigned int link,
                                                 int *pNvLinkDeviceType);
nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfo(nvmlDevice_t device, unsigned int profile,
                                                 nvmlGpuInstanceProfileInfo_t *info);
nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfoV(nvmlDevice_t device, unsigned int profile,
                                                  nvmlGpuInstanceProfileInfo_v2_t *info);
nvmlReturn_t nvmlDeviceGetGpuInstances(nvmlDevice_t device, unsigned int profileId,
                                       nvmlGpuInstance_t *gpuInstances, unsigned int *count);
nvmlReturn_t nvmlDeviceCreateGpuInstanceWithPlacement(nvmlDevice_t device, unsigned int profileId,
                                                      const nvmlGpuInstancePlacement_t *placement,
                                                      nvmlGpuInstance_t *gpuInstance);
nvmlReturn_t nvmlGpuInstanceGetInfo(nvmlGpuInstance_t gpuInstance, nvmlGpuInstanceInfo_t *info);
nvmlReturn_t nvmlGpuInstanceDestroy(nvmlGpuInstance_t gpuInstance);
nvmlReturn_t nvmlGpuInstanceGetComputeInstanceProfileInfo(nvmlGpuInstance_t gpuInstance,
                                                          unsigned int profile,
                                                          unsigned int engProfile,
                                                          nvmlComputeInstanceProfileInfo_t *info);
nvmlReturn_t nvmlGpuInstanceCreateComputeInstance(nvmlGpuInstance_t gpuInstance,
                                                  unsigned int profileId,
                                                  nvmlComputeInstance_t *computeInstance);
nvmlReturn_t nvmlGpuInstanceGetComputeInstances(nvmlGpuInstance_t gpuInstance,
                                                unsigned int profileId,
                                                nvmlComputeInstance_t *computeInstances,
                                                unsigned int *count);
nvmlReturn_t nvmlComputeInstanceDestroy(nvmlComputeInstance_t computeInstance);
nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int *count);
nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index,
                                                 nvmlDevice_t *migDevice);
nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int *id);
nvmlReturn_t nvmlDeviceGetGpuInstanceById(nvmlDevice_t device, unsigned int id,
                                          nvmlGpuInstance_t *gpuInstance);
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int *infoCount,
                                                     nvmlProcessInfo_t *infos);
nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *utilization);
nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int *power);
nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, int sensorType, unsigned int *temp);

/* The scripted node. */
#define MAX_GPUS       16
#define MAX_GIS        8 /* at most 7 on an 8-slot GPU */
#define MAX_CIS        7
#define MAX_PROCS      16
#define SLOTS          8
#define COMPUTE_SLICES 7
#define MAX_MIG        7 /* nvmlDeviceGetMaxMigDeviceCount on A100/H100 */
#define UUID_CAP       96

/* A GPU instance profile: NVML's index (NVML_GPU_INSTANCE_PROFILE_*) and ID. */
typedef struct Profile {
    unsigned index, id;
    const char *name;
    unsigned compute, memory_slices, start_mask, max_count;
    bool media;
    unsigned long long memory_mb;
} Profile;

static const Profile profiles[] = {
    {0, 19, "1g.10gb", 1, 1, 0x7f, 7, false, 9728},
    {1, 14, "2g.20gb", 2, 2, 0x15, 3, false, 19968},
    {2, 9, "3g.40gb", 3, 4, 0x11, 2, false, 40192},
    {3, 5, "4g.40gb", 4, 4, 0x01, 1, false, 40192},
    {4, 0, "7g.80gb", 7, 8, 0x01, 1, false, 80640},
    {7, 20, "1g.10gb+me", 1, 1, 0x7f, 1, true, 9728},
    {9, 15, "1g.20gb", 1, 2, 0x55, 4, false, 19968},
};
#define N_PROFILES (sizeof(profiles) / sizeof(profiles[0]))

/* Compute instance profiles by index (NVML_COMPUTE_INSTANCE_PROFILE_*): their compute
 * slices; 0 where this double offers none (8, 6 slices and the REV1 variant). The ID
 * of each is its index. */
static const unsigned ci_slices[NVML_COMPUTE_INSTANCE_PROFILE_COUNT] = {1, 2, 3, 4, 7, 0, 0, 0};

typedef struct Proc {
    unsigned pid;
    unsigned long long used_mib;
} Proc;

typedef struct Gpu Gpu;

/* A scripted reading: what the call returns, and its value when that is success. */
typedef struct Reading {
    nvmlReturn_t rc;
    unsigned value, value2;
} Reading;

/* The readings of a GPU or a GPU instance's MIG device. */
typedef struct Sample {
    Reading util, power, temp;
} Sample;

/* A device handle: a whole GPU (ci NULL) or the MIG device of one compute instance. */
struct nvmlDevice_st {
    Gpu *gpu;
    struct nvmlComputeInstance_st *ci;
};

struct nvmlComputeInstance_st {
    bool used;
    unsigned id, profile;
    struct nvmlGpuInstance_st *gi;
    struct nvmlDevice_st dev;
    char uuid[UUID_CAP];
};

struct nvmlGpuInstance_st {
    bool used;
    unsigned id, start;
    const Profile *profile;
    Gpu *gpu;
    struct nvmlComputeInstance_st cis[MAX_CIS];
    Proc procs[MAX_PROCS]; /* running on this instance: it cannot be destroyed */
    size_t n_procs;
    Sample sample;
};

typedef struct Link {
    bool active, to_switch;
    char peer[UUID_CAP];
} Link;

struct Gpu {
    json_t *json; /* its object in the state file, updated on write-back */
    struct nvmlDevice_st dev;
    char uuid[UUID_CAP], name[96], bus_id[32];
    unsigned long long memory_mib;
    bool mig_capable, mig_enabled, mig_needs_reset, has_nvlink;
    int compute_mode; /* nvmlComputeMode_t: 0 default, 2 prohibited, 3 exclusive-process */
    Proc procs[MAX_PROCS];
    size_t n_procs;
    Link links[NVML_NVLINK_MAX_LINKS];
    struct nvmlGpuInstance_st gis[MAX_GIS];
    Sample sample;
    /* health, from the live keys */
    bool lost, ecc_unsupported, xid_registered;
    unsigned long long ecc_uncorrected, xid_last, xid_pending;
};

static struct {
    int refs; /* nvmlInit_v2 calls not yet shut down */
    char path[4096];
    json_t *root;
    unsigned count;
    Gpu gpus[MAX_GPUS];
} st;

#define CHECK_INIT()                                                                               \
    do {                                                                                           \
        if (st.refs <= 0)                                                                          \
            return NVML_ERROR_UNINITIALIZED;                                                       \
    } while (0)

static const Profile *profile_by_index(unsigned index)
{
    for (size_t i = 0; i < N_PROFILES; i++)
        if (profiles[i].index == index)
            return &profiles[i];
    return NULL;
}

static const Profile *profile_by_id(unsigned id)
{
    for (size_t i = 0; i < N_PROFILES; i++)
        if (profiles[i].id == id)
            return &profiles[i];
    return NULL;
}

static const Profile *profile_by_name(const char *name)
{
    for (size_t i = 0; name && i < N_PROFILES; i++)
        if (!strcasecmp(profiles[i].name, name))
            return &profiles[i];
    return NULL;
}

/* A whole GPU, or NULL for anything else (a MIG device, a stale or foreign pointer). */
static Gpu *gpu_of(nvmlDevice_t d)
{
    for (unsigned i = 0; d && i < st.count; i++)
        if (d == &st.gpus[i].dev)
            return &st.gpus[i];
    return NULL;
}

/* The compute instance of a live MIG device, or NULL. */
static struct nvmlComputeInstance_st *mig_of(nvmlDevice_t d)
{
    for (unsigned i = 0; d && i < st.count; i++)
        for (unsigned g = 0; g < MAX_GIS; g++)
            for (unsigned c = 0; c < MAX_CIS; c++) {
                struct nvmlComputeInstance_st *ci = &st.gpus[i].gis[g].cis[c];
                if (d == &ci->dev)
                    return ci->used && ci->gi->used ? ci : NULL;
            }
    return NULL;
}

static bool gi_live(nvmlGpuInstance_t gi)
{
    for (unsigned i = 0; gi && i < st.count; i++)
        for (unsigned g = 0; g < MAX_GIS; g++)
            if (gi == &st.gpus[i].gis[g])
                return gi->used;
    return false;
}

static bool ci_live(nvmlComputeInstance_t ci)
{
    for (unsigned i = 0; ci && i < st.count; i++)
        for (unsigned g = 0; g < MAX_GIS; g++)
            for (unsigned c = 0; c < MAX_CIS; c++)
                if (ci == &st.gpus[i].gis[g].cis[c])
                    return ci->used && ci->gi->used;
    return false;
}

static size_t n_cis(const struct nvmlGpuInstance_st *gi)
{
    size_t n = 0;
    for (unsigned c = 0; c < MAX_CIS; c++)
        n += gi->cis[c].used;
    return n;
}

static unsigned span(const Profile *p, unsigned start)
{
    return ((1u << p->memory_slices) - 1) << start;
}

/* Whether an instance of p fits at start..start+size-1 beside g's instances. */
static nvmlReturn_t can_place(const Gpu *g, const Profile *p, unsigned start, unsigned size)
{
    if (start >= SLOTS || !((p->start_mask >> start) & 1) || size != p->memory_slices)
        return NVML_ERROR_INVALID_ARGUMENT;
    unsigned used = 0, compute = 0, same = 0, media = 0;
    for (unsigned i = 0; i < MAX_GIS; i++) {
        const struct nvmlGpuInstance_st *gi = &g->gis[i];
        if (!gi->used)
            continue;
        used |= span(gi->profile, gi->start);
        compute += gi->profile->compute;
        same += gi->profile == p;
        media += gi->profile->media;
    }
    if ((used & span(p, start)) || compute + p->compute > COMPUTE_SLICES || same >= p->max_count ||
        (p->media && media))
        return NVML_ERROR_INSUFFICIENT_RESOURCES;
    return NVML_SUCCESS;
}

static const Sample unsupported = {{NVML_ERROR_NOT_SUPPORTED, 0, 0},
                                   {NVML_ERROR_NOT_SUPPORTED, 0, 0},
                                   {NVML_ERROR_NOT_SUPPORTED, 0, 0}};

static struct nvmlGpuInstance_st *gi_add(Gpu *g, const Profile *p, unsigned start)
{
    unsigned id = 1;
    for (bool taken = true; taken; id += taken) {
        taken = false;
        for (unsigned i = 0; i < MAX_GIS; i++)
            taken |= g->gis[i].used && g->gis[i].id == id;
    }
    for (unsigned i = 0; i < MAX_GIS; i++) {
        struct nvmlGpuInstance_st *gi = &g->gis[i];
        if (gi->used)
            continue;
        /* a new instance's MIG device has no utilisation, as on most drivers */
        *gi = (struct nvmlGpuInstance_st){
            .used = true, .id = id, .start = start, .profile = p, .gpu = g, .sample = unsupported};
        return gi;
    }
    return NULL;
}

static struct nvmlComputeInstance_st *ci_add(struct nvmlGpuInstance_st *gi, unsigned profile,
                                             const char *uuid)
{
    for (unsigned c = 0; c < MAX_CIS; c++) {
        struct nvmlComputeInstance_st *ci = &gi->cis[c];
        if (ci->used)
            continue;
        *ci = (struct nvmlComputeInstance_st){
            .used = true, .id = c, .profile = profile, .gi = gi, .dev = {gi->gpu, ci}};
        if (uuid)
            snprintf(ci->uuid, sizeof(ci->uuid), "%s", uuid);
        else /* stable for a GPU, instance and compute instance, and not a GPU- UUID */
            snprintf(ci->uuid, sizeof(ci->uuid), "MIG-%.40s-g%u-c%u", gi->gpu->uuid + 4, gi->id, c);
        return ci;
    }
    return NULL;
}

static json_t *procs_json(const Proc *p, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++)
        json_array_append_new(a, json_pack("{sI sI}", "pid", (json_int_t)p[i].pid, "used_mib",
                                           (json_int_t)p[i].used_mib));
    return a;
}

/* The state file as the node is now: MIG mode and instances replaced, the rest kept. */
static void write_back(void)
{
    for (unsigned i = 0; i < st.count; i++) {
        Gpu *g = &st.gpus[i];
        json_t *gis = json_array();
        for (unsigned k = 0; gis && k < MAX_GIS; k++) {
            struct nvmlGpuInstance_st *gi = &g->gis[k];
            if (!gi->used)
                continue;
            json_t *cis = json_array();
            for (unsigned c = 0; cis && c < MAX_CIS; c++)
                if (gi->cis[c].used)
                    json_array_append_new(
                        cis, json_pack("{sI sI ss}", "id", (json_int_t)gi->cis[c].id, "profile_id",
                                       (json_int_t)gi->cis[c].profile, "uuid", gi->cis[c].uuid));
            json_array_append_new(
                gis, json_pack("{sI ss sI sI sI so so}", "id", (json_int_t)gi->id, "profile",
                               gi->profile->name, "profile_id", (json_int_t)gi->profile->id,
                               "start", (json_int_t)gi->start, "size",
                               (json_int_t)gi->profile->memory_slices, "compute_instances", cis,
                               "processes", procs_json(gi->procs, gi->n_procs)));
        }
        json_object_set_new(g->json, "mig_enabled", json_boolean(g->mig_enabled));
        json_object_set_new(g->json, "compute_mode", json_integer(g->compute_mode));
        json_object_set_new(g->json, "gpu_instances", gis);
    }
    char tmp[sizeof(st.path) + 8];
    snprintf(tmp, sizeof(tmp), "%s.tmp", st.path);
    if (json_dump_file(st.root, tmp, JSON_INDENT(2) | JSON_SORT_KEYS) == 0)
        rename(tmp, st.path);
    else
        fprintf(stderr, "nvml double: cannot write %s\n", st.path);
}

static int read_procs(json_t *a, Proc *out, size_t *ret_n)
{
    size_t i;
    json_t *p;
    *ret_n = 0;
    if (json_array_size(a) > MAX_PROCS)
        return -1;
    json_array_foreach(a, i, p)
    {
        out[i].pid = (unsigned)json_integer_value(json_object_get(p, "pid"));
        out[i].used_mib = (unsigned long long)json_integer_value(json_object_get(p, "used_mib"));
        ++*ret_n;
    }
    return 0;
}

/* One reading of a "sample" object: key's value (and key2's) or NOT_SUPPORTED, unless
 * error_key names another code. */
static Reading read_reading(json_t *o, const char *key, const char *key2, const char *error_key)
{
    json_t *v = json_object_get(o, key), *e = json_object_get(o, error_key);
    if (e)
        return (Reading){.rc = (nvmlReturn_t)json_integer_value(e)};
    if (!json_is_integer(v))
        return (Reading){.rc = NVML_ERROR_NOT_SUPPORTED};
    return (Reading){.rc = NVML_SUCCESS,
                     .value = (unsigned)json_integer_value(v),
                     .value2 = key2 ? (unsigned)json_integer_value(json_object_get(o, key2)) : 0};
}

static Sample read_sample(json_t *o)
{
    return (Sample){
        .util = read_reading(o, "gpu_util", "memory_util", "utilization_error"),
        .power = read_reading(o, "power_mw", NULL, "power_error"),
        .temp = read_reading(o, "temperature_c", NULL, "temperature_error"),
    };
}

static int read_gpu(Gpu *g, unsigned index, json_t *d)
{
    g->json = d;
    g->dev = (struct nvmlDevice_st){g, NULL};
    const char *s = json_string_value(json_object_get(d, "uuid"));
    if (!s || strncmp(s, "GPU-", 4))
        return fprintf(stderr, "nvml double: device %u: uuid must be GPU-...\n", index), -1;
    snprintf(g->uuid, sizeof(g->uuid), "%s", s);
    s = json_string_value(json_object_get(d, "name"));
    snprintf(g->name, sizeof(g->name), "%s", s ? s : "NVIDIA A100-SXM4-80GB");
    s = json_string_value(json_object_get(d, "pci_bus_id"));
    if (s)
        snprintf(g->bus_id, sizeof(g->bus_id), "%s", s);
    else
        snprintf(g->bus_id, sizeof(g->bus_id), "00000000:%02X:00.0", 0x07 + index);
    g->memory_mib = (unsigned long long)json_integer_value(json_object_get(d, "memory_mib"));
    g->mig_capable = json_is_true(json_object_get(d, "mig_capable"));
    g->mig_enabled = g->mig_capable && json_is_true(json_object_get(d, "mig_enabled"));
    g->mig_needs_reset = json_is_true(json_object_get(d, "mig_needs_reset"));
    g->sample = read_sample(json_object_get(d, "sample"));
    g->compute_mode = (int)json_integer_value(json_object_get(d, "compute_mode"));
    if (read_procs(json_object_get(d, "processes"), g->procs, &g->n_procs) < 0)
        return -1;
    json_t *links = json_object_get(d, "nvlinks"), *l, *gi_j;
    size_t i;
    g->has_nvlink = links != NULL;
    json_array_foreach(links, i, l)
    {
        json_int_t k = json_integer_value(json_object_get(l, "link"));
        const char *peer = json_string_value(json_object_get(l, "peer"));
        if (k < 0 || k >= NVML_NVLINK_MAX_LINKS)
            return fprintf(stderr, "nvml double: device %u: bad link %lld\n", index, (long long)k),
                   -1;
        g->links[k].active = true;
        g->links[k].to_switch = json_is_true(json_object_get(l, "switch"));
        snprintf(g->links[k].peer, sizeof(g->links[k].peer), "%s", peer ? peer : "");
    }
    json_array_foreach(json_object_get(d, "gpu_instances"), i, gi_j)
    {
        const Profile *p = profile_by_name(json_string_value(json_object_get(gi_j, "profile")));
        unsigned start = (unsigned)json_integer_value(json_object_get(gi_j, "start"));
        if (!g->mig_enabled || !p || can_place(g, p, start, p->memory_slices) != NVML_SUCCESS)
            return fprintf(stderr, "nvml double: device %u: gpu instance %zu cannot be\n", index,
                           i),
                   -1;
        struct nvmlGpuInstance_st *gi = gi_add(g, p, start);
        if (read_procs(json_object_get(gi_j, "processes"), gi->procs, &gi->n_procs) < 0)
            return -1;
        gi->sample = read_sample(json_object_get(gi_j, "sample"));
        json_t *ci_j;
        size_t c;
        json_array_foreach(json_object_get(gi_j, "compute_instances"), c, ci_j)
        {
            /* the compute instance spanning the GPU instance unless it names another */
            unsigned prof = 0;
            while (prof + 1 < NVML_COMPUTE_INSTANCE_PROFILE_COUNT && ci_slices[prof] != p->compute)
                prof++;
            json_t *pj = json_object_get(ci_j, "profile_id");
            if (pj)
                prof = (unsigned)json_integer_value(pj);
            if (!ci_add(gi, prof, json_string_value(json_object_get(ci_j, "uuid"))))
                return -1;
        }
    }
    return 0;
}

nvmlReturn_t nvmlInit_v2(void)
{
    if (st.refs > 0) {
        st.refs++;
        return NVML_SUCCESS;
    }
    const char *path = getenv("GPUORCH_NVML_DOUBLE");
    if (!path || !*path)
        return NVML_ERROR_DRIVER_NOT_LOADED;
    memset(&st, 0, sizeof(st));
    snprintf(st.path, sizeof(st.path), "%s", path);
    json_error_t e;
    st.root = json_load_file(path, 0, &e);
    if (!st.root) {
        fprintf(stderr, "nvml double: %s:%d: %s\n", path, e.line, e.text);
        return NVML_ERROR_UNKNOWN;
    }
    json_int_t init_error = json_integer_value(json_object_get(st.root, "init_error"));
    json_t *devs = json_object_get(st.root, "devices"), *d;
    size_t i;
    if (init_error || json_array_size(devs) > MAX_GPUS) {
        json_decref(st.root);
        st.root = NULL;
        return init_error ? (nvmlReturn_t)init_error : NVML_ERROR_UNKNOWN;
    }
    st.count = (unsigned)json_array_size(devs);
    json_array_foreach(devs, i, d) if (read_gpu(&st.gpus[i], (unsigned)i, d) < 0)
    {
        json_decref(st.root);
        memset(&st, 0, sizeof(st));
        return NVML_ERROR_UNKNOWN;
    }
    st.refs = 1;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlShutdown(void)
{
    CHECK_INIT();
    if (--st.refs == 0) {
        json_decref(st.root);
        memset(&st, 0, sizeof(st));
    }
    return NVML_SUCCESS;
}

const char *nvmlErrorString(nvmlReturn_t result)
{
    switch (result) {
    case NVML_SUCCESS:
        return "Success";
    case NVML_ERROR_UNINITIALIZED:
        return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT:
        return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED:
        return "Not Supported";
    case NVML_ERROR_NOT_FOUND:
        return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE:
        return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED:
        return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT:
        return "Timeout";
    case NVML_ERROR_GPU_IS_LOST:
        return "GPU is lost";
    case NVML_ERROR_RESET_REQUIRED:
        return "GPU requires reset";
    case NVML_ERROR_IN_USE:
        return "In use by another client";
    case NVML_ERROR_INSUFFICIENT_RESOURCES:
        return "Insufficient resources";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH:
        return "Argument version mismatch";
    default:
        return "Unknown Error";
    }
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount)
{
    CHECK_INIT();
    if (!deviceCount)
        return NVML_ERROR_INVALID_ARGUMENT;
    *deviceCount = st.count;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
    CHECK_INIT();
    if (index >= st.count || !device)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (st.gpus[index].lost)
        return NVML_ERROR_GPU_IS_LOST;
    *device = &st.gpus[index].dev;
    return NVML_SUCCESS;
}

static nvmlReturn_t copy_out(char *out, unsigned length, const char *s)
{
    if (!out)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(s) + 1 > length)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(out, s, strlen(s) + 1);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length)
{
    CHECK_INIT();
    Gpu *g = gpu_of(device);
    struct nvmlComputeInstance_st *ci = mig_of(device);
    if (!g && !ci)
        return NVML_ERROR_INVALID_ARGUMENT;
    return copy_out(uuid, length, g ? g->uuid : ci->uuid);
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length)
{
    CHECK_INIT();
    Gpu *g = gpu_of(device);
    struct nvmlComputeInstance_st *ci = mig_of(device);
    if (!g && !ci)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (g)
        return copy_out(name, length, g->name);
    char s[160];
    snprintf(s, sizeof(s), "%s MIG %s", ci->gi->gpu->name, ci->gi->profile->name);
    return copy_out(name, length, s);
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
    CHECK_INIT();
    Gpu *g = gpu_of(device);
    struct nvmlComputeInstance_st *ci = mig_of(device);
    if ((!g && !ci) || !memory)
        return NVML_ERROR_INVALID_ARGUMENT;
    const Proc *p = g ? g->procs : ci->gi->procs;
    size_t n = g ? g->n_procs : ci->gi->n_procs;
    unsigned long long used = 0;
    for (size_t i = 0; i < n; i++)
        used += p[i].used_mib << 20;
    memory->total = g ? g->memory_mib << 20 : ci->gi->profile->memory_mb << 20;
    memory->used = used < memory->total ? used : memory->total;
    memory->free = memory->total - memory->used;
    return NVML_SUCCESS;
}

static void fill_pci(nvmlPciInfo_t *pci, const char *bus_id)
{
    memset(pci, 0, sizeof(*pci));
    snprintf(pci->busId, sizeof(pci->busId), "%s", bus_id);
    snprintf(pci->busIdLegacy, sizeof(pci->busIdLegacy), "%s",
             bus_id + (strlen(bus_id) > 12 ? 4 : 0));
    sscanf(bus_id, "%x:%x:%x", &pci->domain, &pci->bus, &pci->device);
    pci->pciDeviceId = 0x20b210de; /* an A100-SXM4-80GB's */
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
    CHECK_INIT();
    Gpu *g = gpu_of(device);
    if (!g || !pci)
        return NVML_ERROR_INVALID_ARGUMENT;
    fill_pci(pci, g->bus_id);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceSetComputeMode(nvmlDevice_t device, int mode);
/* Default, prohibited or exclusive-process (1, the old exclusive-thread, is gone). */
nvmlReturn_t nvmlDeviceSetComputeMode(nvmlDevice_t device, int mode)
{
    CHECK_INIT();
    Gpu *g = gpu_of(device);
    if (!g || (mode != NVML_COMPUTEMODE_DEFAULT && mode != NVML_COMPUTEMODE_PROHIBITED &&
               mode != NVML_COMPUTEMODE_EXCLUSIVE_PROCESS))
        return NVML_ERROR_INVALID_ARGUMENT;
    g->compute_mode = mode;
    write_back();
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *currentMode,
                                  unsigned int *pendingMode)
{
    CHECK_INIT();
    Gpu *g = gpu_of(device);
    if (!g || !currentMode || !pendingMode)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!g->mig_capable)
        return NVML_ERROR_NOT_SUPPORTED;
    *currentMode = *pendingMode = g->mig_enabled ? NVML_DEVICE_MIG_ENABLE : NVML_DEVICE_MIG_DISABLE;
    if (g->mig_needs_reset) /* a change waits for a reset that never comes here */
        *pendingMode = !g->mig_enabled;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceSetMigMode(nvmlDevice_t device, unsigned int mode,
                                  nvmlReturn_t *activationStatus)
{
    CHECK_INIT();
    Gpu *g = gpu_of(device);
    if (!g || !activationStatus || mode > NVML_DEVICE_MIG_ENABLE)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!g->mig_capable)
        return NVML_ERROR_NOT_SUPPORTED;
    bool on = mode == NVML_DEVICE_MIG_ENABLE;
    if (on == g->mig_enabled) {
        *activationStatus = NVML_SUCCESS;
        return NVML_SUCCESS;
    }
    for (unsigned i = 0; i < MAX_GIS; i++)
        if (g->gis[i].used)
            return NVML_ERROR_IN_USE;
    if (g->mig_needs_reset) {
        *activationStatus = NVML_ERROR_RESET_REQUIRED;
        return NVML_SUCCESS;
    }
    g->mig_enabled = on;
    *activationStatus = NVML_SUCCESS;
    write_back();
    return NVML_SUCCESS;
}

static nvmlReturn_t link_of(nvmlDevice_t device, unsigned link, Link **ret)
{
    CHECK_INIT();
    Gpu *g = gpu_of(device);
    if (!g || link >= NVML_NVLINK_MAX_LINKS)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!g->has_nvlink)
        return NVML_ERROR_NOT_SUPPORTED;
    *ret = &g->links[link];
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link, int *isActive)
{
    Link *l;
    nvmlReturn_t r = link_of(device, link, &l);
    if (r != NVML_SUCCESS)
        return r;
    if (!isActive)
        return NVML_ERROR_INVALID_ARGUMENT;
    *isActive = l->active ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t device, unsigned int link,
                                                 nvmlPciInfo_t *pci)
{
    Link *l;
    nvmlReturn_t r = link_of(device, link, &l);
    if (r != NVML_SUCCESS)
        return r;
    if (!pci)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!l->active)
        return NVML_ERROR_NOT_SUPPORTED;
    if (l->to_switch) {
        char bus[32];
        snprintf(bus, sizeof(bus), "00000000:%02X:00.0", 0xc0 + link);
        fill_pci(pci, bus);
        return NVML_SUCCESS;
    }
    for (unsigned i = 0; i < st.count; i++)
        if (!strcmp(st.gpus[i].uuid, l->peer)) {
            fill_pci(pci, st.gpus[i].bus_id);
            return NVML_SUCCESS;
        }
    return NVML_ERROR_NOT_FOUND;
}

nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_t device, unsigned int link,
                                                 int *pNvLinkDeviceType)
{
    Link *l;
    nvmlReturn_t r = link_of(device, link, &l);
    if (r != NVML_SUCCESS)
        return r;
    if (!pNvLinkDeviceType)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!l->active)
        return NVML_ERROR_NOT_SUPPORTED;
    *pNvLinkDeviceType =
        l->to_switch ? NVML_NVLINK_DEVICE_TYPE_SWITCH : NVML_NVLINK_DEVICE_TYPE_GPU;
    return NVML_SUCCESS;
}

/* The GPU behind device when it is in MIG mode; *ret NULL with the error otherwise. */
static nvmlReturn_t mig_gpu(nvmlDevice_t device, Gpu **ret)
{
    CHECK_INIT();
    Gpu *g = gpu_of(device);
    if (!g)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!g->mig_capable || !g->mig_enabled)
        return NVML_ERROR_NOT_SUPPORTED;
    *ret = g;
    return NVML_SUCCESS;
}

static void fill_profile(const Profile *p, nvmlGpuInstanceProfileInfo_t *info)
{
    *info = (nvmlGpuInstanceProfileInfo_t){
        .id = p->id,
        .isP2pSupported = 0,
        .sliceCount = p->compute,
        .instanceCount = p->max_count,
        .multiprocessorCount = 14 * p->compute,
        .copyEngineCount = p->memory_slices,
        .decoderCount = p->media ? 1 : p->compute / 2,
        .jpegCount = p->media || p->compute == 7,
        .ofaCount = p->media || p->compute == 7,
        .memorySizeMB = p->memory_mb,
    };
}

nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfo(nvmlDevice_t device, unsigned int profile,
                                                 nvmlGpuInstanceProfileInfo_t *info)
{
    Gpu *g = NULL;
    nvmlReturn_t r = mig_gpu(device, &g);
    if (r != NVML_SUCCESS)
        return r;
    if (!info || profile >= NVML_GPU_INSTANCE_PROFILE_COUNT)
        return NVML_ERROR_INVALID_ARGUMENT;
    const Profile *p = profile_by_index(profile);
    if (!p)
        return NVML_ERROR_NOT_SUPPORTED;
    fill_profile(p, info);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfoV(nvmlDevice_t device, unsigned int profile,
                                                  nvmlGpuInstanceProfileInfo_v2_t *info)
{
    nvmlGpuInstanceProfileInfo_t v1;
    if (info && info->version != nvmlGpuInstanceProfileInfo_v2)
        return st.refs > 0 ? NVML_ERROR_ARGUMENT_VERSION_MISMATCH : NVML_ERROR_UNINITIALIZED;
    nvmlReturn_t r = nvmlDeviceGetGpuInstanceProfileInfo(device, profile, info ? &v1 : NULL);
    if (r != NVML_SUCCESS)
        return r;
    const Profile *p = profile_by_index(profile);
    *info = (nvmlGpuInstanceProfileInfo_v2_t){
        .version = nvmlGpuInstanceProfileInfo_v2,
        .id = v1.id,
        .isP2pSupported = v1.isP2pSupported,
        .sliceCount = v1.sliceCount,
        .instanceCount = v1.instanceCount,
        .multiprocessorCount = v1.multiprocessorCount,
        .copyEngineCount = v1.copyEngineCount,
        .decoderCount = v1.decoderCount,
        .encoderCount = v1.encoderCount,
        .jpegCount = v1.jpegCount,
        .ofaCount = v1.ofaCount,
        .memorySizeMB = v1.memorySizeMB,
    };
    snprintf(info->name, sizeof(info->name), "MIG %s", p->name);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuInstances(nvmlDevice_t device, unsigned int profileId,
                                       nvmlGpuInstance_t *gpuInstances, unsigned int *count)
{
    Gpu *g = NULL;
    nvmlReturn_t r = mig_gpu(device, &g);
    if (r != NVML_SUCCESS)
        return r;
    const Profile *p = profile_by_id(profileId);
    if (!p || !gpuInstances || !count)
        return NVML_ERROR_INVALID_ARGUMENT;
    /* the array holds the profile's instanceCount; count only reports */
    unsigned n = 0;
    for (unsigned i = 0; i < MAX_GIS && n < p->max_count; i++)
        if (g->gis[i].used && g->gis[i].profile == p)
            gpuInstances[n++] = &g->gis[i];
    *count = n;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceCreateGpuInstanceWithPlacement(nvmlDevice_t device, unsigned int profileId,
                                                      const nvmlGpuInstancePlacement_t *placement,
                                                      nvmlGpuInstance_t *gpuInstance)
{
    Gpu *g = NULL;
    nvmlReturn_t r = mig_gpu(device, &g);
    if (r != NVML_SUCCESS)
        return r;
    const Profile *p = profile_by_id(profileId);
    if (!p || !placement || !gpuInstance)
        return NVML_ERROR_INVALID_ARGUMENT;
    if ((r = can_place(g, p, placement->start, placement->size)) != NVML_SUCCESS)
        return r;
    *gpuInstance = gi_add(g, p, placement->start);
    write_back();
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpuInstanceGetInfo(nvmlGpuInstance_t gpuInstance, nvmlGpuInstanceInfo_t *info)
{
    CHECK_INIT();
    if (!gi_live(gpuInstance) || !info)
        return NVML_ERROR_INVALID_ARGUMENT;
    *info = (nvmlGpuInstanceInfo_t){
        .device = &gpuInstance->gpu->dev,
        .id = gpuInstance->id,
        .profileId = gpuInstance->profile->id,
        .placement = {gpuInstance->start, gpuInstance->profile->memory_slices},
    };
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpuInstanceDestroy(nvmlGpuInstance_t gpuInstance)
{
    CHECK_INIT();
    if (!gi_live(gpuInstance))
        return NVML_ERROR_INVALID_ARGUMENT;
    if (n_cis(gpuInstance) > 0 || gpuInstance->n_procs > 0)
        return NVML_ERROR_IN_USE;
    gpuInstance->used = false;
    write_back();
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpuInstanceGetComputeInstanceProfileInfo(nvmlGpuInstance_t gpuInstance,
                                                          unsigned int profile,
                                                          unsigned int engProfile,
                                                          nvmlComputeInstanceProfileInfo_t *info)
{
    CHECK_INIT();
    if (!gi_live(gpuInstance) || !info || profile >= NVML_COMPUTE_INSTANCE_PROFILE_COUNT)
        return NVML_ERROR_INVALID_ARGUMENT;
    unsigned slices = ci_slices[profile], gi_slices = gpuInstance->profile->compute;
    if (engProfile != NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED || !slices || slices > gi_slices)
        return NVML_ERROR_NOT_SUPPORTED;
    *info = (nvmlComputeInstanceProfileInfo_t){
        .id = profile,
        .sliceCount = slices,
        .instanceCount = gi_slices / slices,
        .multiprocessorCount = 14 * slices,
        .sharedCopyEngineCount = gpuInstance->profile->memory_slices,
    };
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpuInstanceCreateComputeInstance(nvmlGpuInstance_t gpuInstance,
                                                  unsigned int profileId,
                                                  nvmlComputeInstance_t *computeInstance)
{
    CHECK_INIT();
    if (!gi_live(gpuInstance) || !computeInstance ||
        profileId >= NVML_COMPUTE_INSTANCE_PROFILE_COUNT || !ci_slices[profileId] ||
        ci_slices[profileId] > gpuInstance->profile->compute)
        return NVML_ERROR_INVALID_ARGUMENT;
    unsigned used = 0;
    for (unsigned c = 0; c < MAX_CIS; c++)
        if (gpuInstance->cis[c].used)
            used += ci_slices[gpuInstance->cis[c].profile];
    if (used + ci_slices[profileId] > gpuInstance->profile->compute)
        return NVML_ERROR_INSUFFICIENT_RESOURCES;
    *computeInstance = ci_add(gpuInstance, profileId, NULL);
    write_back();
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpuInstanceGetComputeInstances(nvmlGpuInstance_t gpuInstance,
                                                unsigned int profileId,
                                                nvmlComputeInstance_t *computeInstances,
                                                unsigned int *count)
{
    CHECK_INIT();
    if (!gi_live(gpuInstance) || !computeInstances || !count ||
        profileId >= NVML_COMPUTE_INSTANCE_PROFILE_COUNT)
        return NVML_ERROR_INVALID_ARGUMENT;
    unsigned n = 0;
    for (unsigned c = 0; c < MAX_CIS; c++)
        if (gpuInstance->cis[c].used && gpuInstance->cis[c].profile == profileId)
            computeInstances[n++] = &gpuInstance->cis[c];
    *count = n;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlComputeInstanceDestroy(nvmlComputeInstance_t computeInstance)
{
    CHECK_INIT();
    if (!ci_live(computeInstance))
        return NVML_ERROR_INVALID_ARGUMENT;
    if (computeInstance->gi->n_procs > 0)
        return NVML_ERROR_IN_USE;
    computeInstance->used = false;
    write_back();
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int *count)
{
    CHECK_INIT();
    Gpu *g = gpu_of(device);
    if (!g || !count)
        return NVML_ERROR_INVALID_ARGUMENT;
    *count = g->mig_capable ? MAX_MIG : 0;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index,
                                                 nvmlDevice_t *migDevice)
{
    Gpu *g = NULL;
    nvmlReturn_t r = mig_gpu(device, &g);
    if (r != NVML_SUCCESS)
        return r;
    if (index >= MAX_MIG || !migDevice)
        return NVML_ERROR_INVALID_ARGUMENT;
    unsigned k = 0;
    for (unsigned i = 0; i < MAX_GIS; i++)
        for (unsigned c = 0; g->gis[i].used && c < MAX_CIS; c++)
            if (g->gis[i].cis[c].used && k++ == index) {
                *migDevice = &g->gis[i].cis[c].dev;
                return NVML_SUCCESS;
            }
    return NVML_ERROR_NOT_FOUND;
}

nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int *id)
{
    CHECK_INIT();
    struct nvmlComputeInstance_st *ci = mig_of(device);
    if (!id || (!ci && !gpu_of(device)))
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!ci)
        return NVML_ERROR_NOT_SUPPORTED; /* a whole GPU is no MIG device */
    *id = ci->gi->id;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuInstanceById(nvmlDevice_t device, unsigned int id,
                                          nvmlGpuInstance_t *gpuInstance)
{
    Gpu *g = NULL;
    nvmlReturn_t r = mig_gpu(device, &g);
    if (r != NVML_SUCCESS)
        return r;
    if (!gpuInstance)
        return NVML_ERROR_INVALID_ARGUMENT;
    for (unsigned i = 0; i < MAX_GIS; i++)
        if (g->gis[i].used && g->gis[i].id == id) {
            *gpuInstance = &g->gis[i];
            return NVML_SUCCESS;
        }
    return NVML_ERROR_NOT_FOUND;
}

/* A whole GPU reports the processes scripted on it; a MIG device those of its GPU
 * instance (on the instance's first compute instance). */
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int *infoCount,
                                                     nvmlProcessInfo_t *infos)
{
    CHECK_INIT();
    Gpu *g = gpu_of(device);
    struct nvmlComputeInstance_st *ci = mig_of(device);
    if ((!g && !ci) || !infoCount)
        return NVML_ERROR_INVALID_ARGUMENT;
    const Proc *p = g ? g->procs : ci->gi->procs;
    size_t n = g ? g->n_procs : ci->gi->n_procs;
    if (ci) {
        for (unsigned c = 0; c < MAX_CIS; c++)
            if (ci->gi->cis[c].used) {
                if (&ci->gi->cis[c] != ci)
                    n = 0;
                break;
            }
    }
    if (n > *infoCount) {
        *infoCount = (unsigned)n;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    if (n && !infos)
        return NVML_ERROR_INVALID_ARGUMENT;
    for (size_t i = 0; i < n; i++)
        infos[i] = (nvmlProcessInfo_t){
            .pid = p[i].pid,
            .usedGpuMemory = p[i].used_mib << 20,
            .gpuInstanceId = ci ? ci->gi->id : 0xffffffffu,
            .computeInstanceId = ci ? ci->id : 0xffffffffu,
        };
    *infoCount = (unsigned)n;
    return NVML_SUCCESS;
}

/* The scripted readings of a GPU or a MIG device, or NULL for a bad handle. */
static const Sample *sample_of(nvmlDevice_t device)
{
    Gpu *g = gpu_of(device);
    struct nvmlComputeInstance_st *ci = mig_of(device);
    return g ? &g->sample : ci ? &ci->gi->sample : NULL;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *utilization)
{
    CHECK_INIT();
    const Sample *s = sample_of(device);
    if (!s || !utilization)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (s->util.rc == NVML_SUCCESS)
        *utilization = (nvmlUtilization_t){s->util.value, s->util.value2};
    return s->util.rc;
}

/* Power and temperature are the whole board's: a MIG device has none. */
nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int *power)
{
    CHECK_INIT();
    if (mig_of(device))
        return NVML_ERROR_NOT_SUPPORTED;
    const Sample *s = sample_of(device);
    if (!s || !power)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (s->power.rc == NVML_SUCCESS)
        *power = s->power.value;
    return s->power.rc;
}

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, int sensorType, unsigned int *temp)
{
    CHECK_INIT();
    if (mig_of(device))
        return NVML_ERROR_NOT_SUPPORTED;
    const Sample *s = sample_of(device);
    if (!s || !temp || sensorType != NVML_TEMPERATURE_GPU)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (s->temp.rc == NVML_SUCCESS)
        *temp = s->temp.value;
    return s->temp.rc;
}

/* ---- health: events and ECC ---- */

nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set);
nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long eventTypes,
                                      nvmlEventSet_t set);
nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeoutms);
nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set);
nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device, int errorType, int counterType,
                                         unsigned long long *eccCounts);

static int event_set_token; /* the one event set's handle points here */

/* The live health keys from the file as it is now. */
static void refresh_health(void)
{
    json_t *root = json_load_file(st.path, 0, NULL);
    json_t *devs = json_object_get(root, "devices");
    for (unsigned i = 0; i < st.count; i++) {
        Gpu *g = &st.gpus[i];
        json_t *d = json_array_get(devs, i);
        if (!d)
            continue;
        g->lost = json_is_true(json_object_get(d, "lost"));
        g->ecc_unsupported = json_is_false(json_object_get(d, "ecc_supported"));
        g->ecc_uncorrected =
            (unsigned long long)json_integer_value(json_object_get(d, "ecc_uncorrected"));
        unsigned long long xid = (unsigned long long)json_integer_value(json_object_get(d, "xid"));
        if (xid && xid != g->xid_last) {
            g->xid_last = xid;
            g->xid_pending = xid;
        }
    }
    json_decref(root);
}

nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set)
{
    CHECK_INIT();
    if (!set)
        return NVML_ERROR_INVALID_ARGUMENT;
    *set = (nvmlEventSet_t)&event_set_token;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long eventTypes,
                                      nvmlEventSet_t set)
{
    CHECK_INIT();
    Gpu *g = gpu_of(device);
    if (!g || set != (nvmlEventSet_t)&event_set_token)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (g->lost)
        return NVML_ERROR_GPU_IS_LOST;
    if (eventTypes & ~NVML_EVENT_TYPE_XID_CRITICAL_ERROR)
        return NVML_ERROR_NOT_SUPPORTED; /* the only type this double delivers */
    g->xid_registered = true;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeoutms)
{
    (void)timeoutms; /* never sleeps: an event is there or it is not */
    CHECK_INIT();
    if (set != (nvmlEventSet_t)&event_set_token || !data)
        return NVML_ERROR_INVALID_ARGUMENT;
    refresh_health();
    for (unsigned i = 0; i < st.count; i++) {
        Gpu *g = &st.gpus[i];
        if (!g->xid_registered || !g->xid_pending)
            continue;
        *data = (nvmlEventData_t){.device = &g->dev,
                                  .eventType = NVML_EVENT_TYPE_XID_CRITICAL_ERROR,
                                  .eventData = g->xid_pending,
                                  .gpuInstanceId = 0xffffffffu,
                                  .computeInstanceId = 0xffffffffu};
        g->xid_pending = 0;
        return NVML_SUCCESS;
    }
    return NVML_ERROR_TIMEOUT;
}

nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set)
{
    CHECK_INIT();
    return set == (nvmlEventSet_t)&event_set_token ? NVML_SUCCESS : NVML_ERROR_INVALID_ARGUMENT;
}

nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device, int errorType, int counterType,
                                         unsigned long long *eccCounts)
{
    CHECK_INIT();
    Gpu *g = gpu_of(device);
    if (!g || !eccCounts || errorType < 0 || errorType > 1 || counterType < 0 || counterType > 1)
        return NVML_ERROR_INVALID_ARGUMENT;
    refresh_health();
    if (g->lost)
        return NVML_ERROR_GPU_IS_LOST;
    if (g->ecc_unsupported)
        return NVML_ERROR_NOT_SUPPORTED;
    /* uncorrected (1) as scripted, volatile and aggregate alike; no corrected ones */
    *eccCounts = errorType == 1 ? g->ecc_uncorrected : 0;
    return NVML_SUCCESS;
}
