/* gpusample.h: the GPU readings agents report with each heartbeat (docs/api.md,
 * gpus[].sample): read into the node's NodeState, where /metrics (DCGM_FI_DEV_*) and
 * the utilisation ring (utilization.h) take them from. Only the last heartbeat's
 * readings are kept per node; nothing is stored. */
#pragma once

#include "server/state.h"

#include <jansson.h>
#include <stddef.h>

/* The readings in a heartbeat's "gpus" list, one entry per GPU that has a "sample"
 * object; a reading of the wrong type or out of range is left out rather than refusing
 * the heartbeat (telemetry must not take a node out of service). *ret is malloc'd
 * (NULL when none). 0 or -ENOMEM. */
int gpusample_parse(json_t *gpus, NodeGpuSample **ret, size_t *ret_n);

/* Replace node's readings with those of the heartbeat's gpus; keeps the old ones when
 * out of memory. [lock] */
void gpusample_fold(Server *s, uint32_t node, json_t *gpus);
