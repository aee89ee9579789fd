/* catalog.h: the GPU catalogue, compiled in from data/gpu-catalog.json by the build
 * (tools/catalog_gen.c). One table of facts per model (memory, SMs, NVLink, MIG
 * profiles with their valid placements); code never hard-codes a GPU fact. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MIG_MAX_SLOTS    8  /* memory slices of the largest MIG geometry */
#define MIG_MAX_PROFILES 12 /* profiles per model, media-extension variants included */

typedef struct MigProfile {
    const char *name;       /* "1g.10gb", "1g.10gb+me" */
    uint32_t memory_mib;    /* what the instance reports */
    uint16_t nvml_id;       /* nvmlGpuInstanceProfileInfo_t.id; 0xffff unknown */
    uint8_t compute_slices; /* of the model's mig_compute_slices */
    uint8_t memory_slices;  /* memory slots one instance occupies */
    uint8_t start_mask;     /* bit i: an instance may start at memory slot i */
    uint8_t max_count;      /* most instances of this profile on one GPU */
    bool media_extension;   /* "+me": takes the GPU's media engines; never right-sized to */
    bool estimated;         /* memory not observed on a device */
} MigProfile;

typedef struct GpuModel {
    const char *name;           /* canonical: "H100-80GB-SXM5" */
    const char *const *aliases; /* NULL-terminated; may be NULL */
    uint32_t memory_mib;        /* 0 = unknown (a model from a trace) */
    uint16_t sms;               /* 0 = unknown */
    uint8_t nvlink_generation;  /* 0 = none */
    uint8_t mig_slots;          /* memory slots; 0 = no MIG */
    uint8_t mig_compute_slices; /* compute slices of the whole GPU (7 on A100/H100) */
    uint8_t n_profiles;
    const MigProfile *profiles; /* n_profiles entries, ascending memory */
} GpuModel;

size_t catalog_count(void);
const GpuModel *catalog_model(size_t i);

/* Look a model up by its canonical name or an alias ("A100-SXM4-80GB", "NVIDIA H100
 * 80GB HBM3", "Tesla T4"): case, spaces, dashes and a leading NVIDIA/Tesla are ignored.
 * NULL when unknown. */
const GpuModel *catalog_find(const char *name);
/* A model name reduced to upper-case letters and digits without vendor prefixes, as
 * catalog_find compares them: "NVIDIA A100-SXM4-80GB" and "a100 sxm4 80gb" both become
 * "A100SXM480GB". Cut to outlen - 1 characters. */
void catalog_normalize_name(const char *in, char *out, size_t outlen);

static inline bool gpu_model_has_mig(const GpuModel *m)
{
    return m->mig_slots > 0;
}

/* Index of the named profile of m, or -1. */
int catalog_profile_index(const GpuModel *m, const char *profile);
