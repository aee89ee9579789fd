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
#include <stdbool.h>
#include <stdint.h>

#define AGENT_TICK_MS            100
#define AGENT_FIRST_HEARTBEAT_MS 500
#define AGENT_BACKOFF_MAX_MS     5000
#define AGENT_PENDING_MAX_MS     60000 /* a worker waits this long for its GPUs' shape */
#define AGENT_MIG_BUDGET_MS      1000  /* MIG changes begun per heartbeat, after the first */
#define AGENT_HTTP_TIMEOUT_MS    5000
/* shutting down, with every worker ended: how long the agent tries to tell the server
 * before it exits anyway (the worker table keeps the ends for the next agent) */
#define AGENT_SHUTDOWN_REPORT_MS 10000

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
    /* who workers run as when the agent is root (launch.h) */
    const char *worker_user;  /* workers without a run_as; NULL: "nobody" */
    const char *worker_group; /* NULL: worker_user's group ("nogroup" for nobody) */
    bool allow_root_workers;  /* may a worker run as uid 0 or group 0 */
    bool no_cgroups;          /* do not make a cgroup per worker even where possible */
    const char *sysfs_root;   /* where fabric discovery reads class/infiniband and
                                 class/net; NULL: "/sys" (tests give a fake tree) */
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
/* Shut the node down (SIGTERM): a worker that can checkpoint (worker_checkpoints) gets
 * the checkpoint signal and up to its grace to write one, then SIGTERM; the others get
 * SIGTERM, then SIGKILL after their grace; one not started yet is dropped. Nothing new
 * starts. The heartbeats say so ("shutdown": true, and per worker), and the server
 * requeues their jobs to resume: the stop is the node's, not a failure of the jobs. */
void agent_shutdown(Agent *a);
/* Shutting down, every worker has ended, and a heartbeat that says so was answered (or
 * refused), or AGENT_SHUTDOWN_REPORT_MS went by without the server. */
bool agent_shutdown_done(const Agent *a);

/* What agent_run is told by the signal handler. */
enum { AGENT_STOP_NONE, AGENT_STOP_SHUTDOWN, AGENT_STOP_LEAVE };
/* Tick until *stop says AGENT_STOP_LEAVE (stop the agent alone, the workers run on), or
 * says AGENT_STOP_SHUTDOWN and the shutdown is done. */
void agent_run(Agent *a, const volatile sig_atomic_t *stop);

/* Counts for logs and tests. */
size_t agent_worker_count(const Agent *a, int state);
