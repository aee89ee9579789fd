/* inventory.h: `gpuorch agent --inventory`: what the agent sees on this node's GPUs,
 * read once and printed, changing nothing (no MIG change, no worker, no server): the
 * GPUs as the heartbeat reports them (with their readings and health), the compute processes with
 * their memory, and the RDMA ports and interfaces the NCCL settings come from (fabric.h). It is how
 * a platform team checks a node before it joins, and what tools/gpu-check.sh runs against a real
 * driver. */
#pragma once

#include "util/buf.h"

/* The inventory of gpus_spec ("nvml" or "sim:MODEL:COUNT") and of the RDMA devices under
 * sysfs_root (NULL: /sys) as indented JSON into out. 0, or a negative errno with err
 * saying why (no driver, ...). */
int agent_inventory(const char *gpus_spec, const char *node, const char *sysfs_root, Buf *out,
                    Buf *err);
