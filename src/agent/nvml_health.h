/* nvml_health.h: the health watch of the NVML backend (nvml_health.c), for nvml.c
 * alone: it shares nvml.c's dlopen'd library and nothing else. */
#pragma once

#include "agent/gpus.h"

#include <stddef.h>

typedef struct NvmlHealth NvmlHealth;

/* Resolve the health calls in lib (libnvidia-ml.so.1, NVML started) and register the
 * count GPUs for critical Xid events. Calls the driver lacks are skipped (their sickness
 * goes unseen). NULL only when out of memory. */
NvmlHealth *nvml_health_open(void *lib, unsigned count);
/* The first n GPUs' health into ret; never waits (events are polled with a 0 ms
 * timeout). A GPU once sick stays so for the life of h. */
int nvml_health_check(NvmlHealth *h, GpuHealth *ret, size_t n, Buf *err);
void nvml_health_close(NvmlHealth *h);
