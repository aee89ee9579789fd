/* agent.h: the node agent (gpuorch agent). It reports the node's GPUs and workers to
 * the server every heartbeat and makes the node match the reply: MIG layouts, workers
 * started, stopped, killed and forgotten, logs shipped. On a spot machine it also
 * watches the cloud's interruption notice and reports it at once (notice.h). One
 * thread, one loop: a tick every AGENT_TICK_MS reaps workers and advances their
 * signals; a heartbeat every heartbeat_ms (from the server; backing off to
 * AGENT_BACKOFF_MAX_MS while the server cannot be reached, with the workers left
 * running). */
#pragma once

#include "util/buf.h"

#include <signal.h>
#include <stdint.h>

#define AGENT_TICK_MS            100
#define AGENT_FIRST_HEARTBEAT_MS 500
#define AGENT_BACKOFF_MAX_MS     5000
#define AGENT_PENDING_MAX_MS     60000 /* a worker waits this long for its GPUs' shape */
#define AGENT_MIG_BUDGET_MS      1000  /* MIG changes begun per heartbeat, after the first */
#define AGENT_HTTP_TIMEOUT_MS    5000

typedef struct AgentOptions {
    const char *server_url;      /* http://host:port */
    const char *token;           /* an agent token */
    const char *node;            /* the cluster's name for this node */
    const char *address;         /* how other nodes reach this one (MASTER_ADDR); NULL: the
                                    server uses the node name */
    const char *gpus;            /* "nvml" or "sim:MODEL:COUNT" */
    const char *state_dir;       /* workers.json, logs/, simgpu.json, agent.lock */
    const char *checkpoint_root; /* NULL: <state_dir>/checkpoints */
    const char *spot_notice;     /* NULL or "none", "aws", "gcp", "azure" (notice.h) */
    const char *metadata_url;    /* NULL: the cloud's own metadata address */
    int64_t notice_poll_ms;      /* 0: NOTICE_POLL_MS */
} AgentOptions;

typedef struct Agent Agent;

/* Make the state directory (and lock it: one agent per directory), open the GPU
 * backend and discover the GPUs, reload the worker table, and connect. 0, or a
 * negative errno with err saying why. */
int agent_open(const AgentOptions *o, Agent **ret, Buf *err);
/* Leaves the workers running: a restarted agent finds them again. */
void agent_close(Agent *a);

/* One loop iteration: reap, checkpoint watch, signals, and a heartbeat when due. */
void agent_tick(Agent *a);
/* Milliseconds until the next thing to do (at most AGENT_TICK_MS). */
int64_t agent_wait_ms(const Agent *a);
/* Tick until *quit is set. */
void agent_run(Agent *a, const volatile sig_atomic_t *quit);

/* Counts for logs and tests. */
size_t agent_worker_count(const Agent *a, int state);
