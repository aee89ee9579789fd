/* placement_json.h: a placement (the workers of one run and their grants) as the JSON
 * the store keeps and the API shows: [{"node": "a100-0", "cpu_milli": 8000,
 * "memory_mib": 65536, "gpus": [...plan's grant shape...]}], and back. */
#pragma once

#include "core/cluster.h"
#include "core/place.h"
#include "util/buf.h"

#include <jansson.h>

void placement_to_json(const Cluster *c, const Placement *p, Buf *out);
/* Read it back against the cluster (node names, profiles); -EINVAL with err set when a
 * node, GPU or profile does not exist there (the cluster file changed), or -ENOMEM.
 * ret is reset first. */
int placement_from_json(const Cluster *c, const char *text, Placement *ret, Buf *err);
/* One worker's grants as a JSON array (plan's shape). */
json_t *placement_grants_json(const Cluster *c, const WorkerAlloc *w);
