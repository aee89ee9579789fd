/* nodecheck.h: does a node's agent report the GPUs the cluster file declares for the
 * node? The scheduler sizes every grant from the spec (an MPS share's memory, a MIG
 * profile, the GPU indices), so a node whose GPUs are not what the spec says must take
 * no work until one of them is fixed. Pure: it reads the cluster and the report and
 * writes a sentence; the heartbeat handler (api_agent.c) acts on it.
 *
 * What counts: the number of GPUs and their indices, the model (the catalogue's aliases
 * name the same model: NVML's "NVIDIA A100-SXM4-80GB" is A100-80GB), MIG capability on
 * a pool that may be partitioned, and memory where both sides know it, within a tenth
 * (NVML reports a little less than the marketed size, while the variants that share a
 * name differ by far more: A100 40/80 GB, H100 80/94 GB, V100 16/32 GB). */
#pragma once

#include "core/cluster.h"
#include "util/buf.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One GPU as an agent reports it in a heartbeat (docs/api.md). */
typedef struct ReportedGpu {
    int64_t index;
    const char *name;    /* as reported: NVML's name, or "NVIDIA <model>" when simulated */
    uint64_t memory_mib; /* 0: not reported */
    int mig_capable;     /* 1 or 0; -1: not reported */
} ReportedGpu;

/* A heartbeat's "gpus" into *ret (malloc'd, names borrowed from gpus). -EINVAL with err
 * naming the entry when it is not a list of {"index", "name", ...}; -ENOMEM. */
int nodecheck_parse(json_t *gpus, ReportedGpu **ret, size_t *ret_n, Buf *err);

/* True when the report matches node's pool in the spec. Otherwise diff gets what
 * differs, in words ("the agent reports 8 x H100-80GB-SXM5 where the cluster file
 * declares 4 x L4 (pool l4): 8 GPUs, not 4; ..."). */
bool nodecheck_matches(const Cluster *c, uint32_t node, const ReportedGpu *gpus, size_t n,
                       Buf *diff);
