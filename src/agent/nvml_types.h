/* nvml_types.h: the NVML types, return codes and constants the agent's NVML files
 * (nvml.c, nvml_sample.c, nvml_health.c) and the NVML test double (tests/nvml) use,
 * declared once as the NVML API Reference Guide (docs.nvidia.com/deploy/nvml-api) and
 * nvml.h define them: the build needs no NVIDIA headers, and the double answers in the
 * very types the agent reads. Only what gpuorch calls is here. */
#pragma once

typedef int nvmlReturn_t;
typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct nvmlGpuInstance_st *nvmlGpuInstance_t;
typedef struct nvmlComputeInstance_st *nvmlComputeInstance_t;
typedef struct nvmlEventSet_st *nvmlEventSet_t;

enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_NO_PERMISSION = 4,
    NVML_ERROR_NOT_FOUND = 6,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_DRIVER_NOT_LOADED = 9,
    NVML_ERROR_TIMEOUT = 10,
    NVML_ERROR_GPU_IS_LOST = 15,
    NVML_ERROR_RESET_REQUIRED = 16,
    NVML_ERROR_IN_USE = 19,
    NVML_ERROR_INSUFFICIENT_RESOURCES = 23,
    NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
    NVML_ERROR_UNKNOWN = 999,
};
#define NVML_DEVICE_MIG_DISABLE                     0
#define NVML_DEVICE_MIG_ENABLE                      1
#define NVML_FEATURE_DISABLED                       0
#define NVML_FEATURE_ENABLED                        1
#define NVML_NVLINK_MAX_LINKS                       18
#define NVML_NVLINK_DEVICE_TYPE_GPU                 0
#define NVML_NVLINK_DEVICE_TYPE_SWITCH              2
#define NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED 0
#define NVML_VALUE_NOT_AVAILABLE_ULL                0xffffffffffffffffull
#define NVML_TEMPERATURE_GPU                        0
#define NVML_EVENT_TYPE_XID_CRITICAL_ERROR          0x8ull /* nvmlEventTypeXidCriticalError */
#define NVML_MEMORY_ERROR_TYPE_UNCORRECTED          1
#define NVML_VOLATILE_ECC                           0
/* nvmlComputeMode_t */
#define NVML_COMPUTEMODE_DEFAULT           0
#define NVML_COMPUTEMODE_PROHIBITED        2
#define NVML_COMPUTEMODE_EXCLUSIVE_PROCESS 3

typedef struct {
    unsigned long long total, free, used; /* bytes */
} nvmlMemory_t;

typedef struct {
    unsigned int gpu, memory; /* percent of the last sample period */
} nvmlUtilization_t;

typedef struct {
    char busIdLegacy[16];
    unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
} nvmlPciInfo_t;

typedef struct {
    unsigned int start, size; /* memory slices */
} nvmlGpuInstancePlacement_t;

typedef struct {
    unsigned int id, isP2pSupported, sliceCount, instanceCount, multiprocessorCount,
        copyEngineCount, decoderCount, encoderCount, jpegCount, ofaCount;
    unsigned long long memorySizeMB;
} nvmlGpuInstanceProfileInfo_t;

typedef struct {
    unsigned int version, id, isP2pSupported, sliceCount, instanceCount, multiprocessorCount,
        copyEngineCount, decoderCount, encoderCount, jpegCount, ofaCount;
    unsigned long long memorySizeMB;
    char name[96];
} nvmlGpuInstanceProfileInfo_v2_t;
#define nvmlGpuInstanceProfileInfo_v2                                                              \
    ((unsigned int)(sizeof(nvmlGpuInstanceProfileInfo_v2_t) | (2u << 24)))

typedef struct {
    unsigned int id, sliceCount, instanceCount, multiprocessorCount, sharedCopyEngineCount,
        sharedDecoderCount, sharedEncoderCount, sharedJpegCount, sharedOfaCount;
} nvmlComputeInstanceProfileInfo_t;

typedef struct {
    nvmlDevice_t device;
    unsigned int id, profileId;
    nvmlGpuInstancePlacement_t placement;
} nvmlGpuInstanceInfo_t;

typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory; /* bytes */
    unsigned int gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_t;

typedef struct {
    nvmlDevice_t device;
    unsigned long long eventType;
    unsigned long long eventData; /* the Xid, for nvmlEventTypeXidCriticalError */
    unsigned int gpuInstanceId, computeInstanceId;
} nvmlEventData_t;
