/* proto.h: the agent's side of the heartbeat exchange (docs/api.md, "Agent
 * endpoints"): the report it sends and the desired state it gets back, as plain data
 * so the loop in agent.c only decides what to do with it. */
#pragma once

#include "agent/gpus.h"
#include "agent/notice.h"
#include "agent/worker.h"
#include "util/buf.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define PROTO_HEARTBEAT_MIN_MS 100
#define PROTO_HEARTBEAT_MAX_MS 60000

/* The layout one GPU should have, by profile name (the GPU's model resolves them). */
typedef struct MigWant {
    unsigned index;
    size_t n;
    struct {
        char profile[GPU_PROFILE_MAX];
        uint8_t start;
    } inst[MIG_MAX_SLOTS];
} MigWant;

typedef struct ReplyWorker {
    WorkerKey key;
    json_t *spec; /* borrowed from the reply's root */
    uint8_t stop; /* WorkerStop, read even when the rest of spec is bad */
} ReplyWorker;

typedef struct HeartbeatReply {
    json_t *root;
    int64_t heartbeat_ms; /* clamped to [PROTO_HEARTBEAT_MIN_MS, PROTO_HEARTBEAT_MAX_MS] */
    MigWant *mig;
    size_t n_mig;
    ReplyWorker *workers;
    size_t n_workers;
    size_t n_unkeyed; /* workers without a usable job/run/rank: skipped */
    WorkerKey *forget;
    size_t n_forget;
    const char *server_id; /* the server's identity, borrowed from root; NULL when absent */
} HeartbeatReply;

/* The heartbeat body; server_id (NULL or "": left out) is the server the reported
 * workers belong to, as the agent recorded it; address (NULL: left out) is where other nodes reach
 * this one, the MASTER_ADDR of gangs whose rank 0 runs here; interruption (NULL: left out) is the
 * cloud's notice that it takes the machine back; shutdown says the agent is shutting
 * the node down (left out when false). 0 or -ENOMEM. */
int proto_heartbeat(const char *node, const char *address, const char *boot_id,
                    const char *server_id, const AgentGpu *gpus, size_t n_gpus,
                    Worker *const *workers, size_t n_workers, const Notice *interruption,
                    bool shutdown, Buf *out);

/* Parse a 200 reply. -EINVAL with err saying what is wrong when it is not the
 * documented shape (a worker without a key is skipped instead, so one bad entry does
 * not stop the node). */
int proto_reply_parse(const char *body, size_t len, HeartbeatReply *ret, Buf *err);
void proto_reply_free(HeartbeatReply *r);

/* The want for GPU index, or NULL (MIG off). */
const MigWant *proto_mig_want(const HeartbeatReply *r, unsigned index);
/* want as a layout of model m. -EINVAL (err names the profile) when m lacks a profile. */
int proto_mig_layout(const MigWant *want, const GpuModel *m, MigLayout *ret, Buf *err);
