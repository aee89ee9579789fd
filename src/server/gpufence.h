/* gpufence.h: fencing the GPUs a node's agent reports sick (docs/agent.md, "Sick
 * GPUs"), called from the heartbeat (api_agent.c). */
#pragma once

#include "server/state.h"

#include <jansson.h>
#include <stdint.h>

/* [lock] Fold the heartbeat's per-GPU "health" into the node's state: a GPU newly
 * reported sick is logged (event=gpu_fenced) and the jobs holding it are stopped
 * (checkpoint within their grace, then requeued: they resume from their last checkpoint
 * elsewhere); while any GPU is sick the node takes no new work (AWAY_GPU_SICK). A report
 * with every GPU healthy (the agent restarted after a driver reset) reopens it. */
void gpufence_fold(Server *s, uint32_t node, json_t *gpus, int64_t now_ms, Changes *ch);

/* Whether node is fenced for a sick GPU. */
bool gpufence_fenced(const Server *s, uint32_t node);
