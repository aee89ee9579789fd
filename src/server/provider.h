/* provider.h: how the server gets and gives back the nodes of autoscaled pools. The
 * core's autoscaler decides (core/autoscale.h); a provider carries it out:
 *  - exec: runs the user's script, `SCRIPT create POOL NODE` or `SCRIPT delete POOL
 *    NODE` (like Slurm's ResumeProgram and SuspendProgram), which talks to the cloud;
 *    the new machine's agent then registers under that node name;
 *  - sim: starts a local `gpuorch agent --gpus sim:MODEL:COUNT` for the node once the
 *    pool's start-up time has passed, and stops it on release (tests, the demo).
 * A node asked for is starting until its agent reports; one that has not reported
 * after its start-up time plus a margin is given up (deleted and absent again). */
#pragma once

#include "server/state.h"

#include <stdbool.h>

/* Parse --provider: "none", "sim" or "exec:PATH". -EINVAL with err set. */
int provider_parse(const char *spec, ProviderKind *ret_kind, char **ret_script, Buf *err);

/* Set up what the provider needs (the sim provider's agent token and command line):
 * url is where agents reach the server. Called once the server listens. */
int provider_start(Server *s, const char *url, Buf *err);
void provider_stop(Server *s);

/* One autoscaler pass after a scheduling cycle, carried out; and the provider's
 * clock work (agents due to start, nodes that never came up, children to reap).
 * Lock held. */
void provider_cycle(Server *s, int64_t now_ms, Changes *ch);

/* What the provider asked to start, forked with the lock released (the scheduler
 * thread, after its cycle): take the queue (lock held), run it (lock released), then
 * record the agents' pids (lock held; it frees sp). provider_spawns_free drops a queue
 * unrun. */
#define PROVIDER_MAX_ARGS 20
typedef struct ProviderSpawns {
    struct ProviderSpawn *v;
    size_t n;
} ProviderSpawns;
void provider_spawns_take(Server *s, ProviderSpawns *ret);
void provider_spawns_run(ProviderSpawns *sp);
void provider_spawns_done(Server *s, ProviderSpawns *sp);
void provider_spawns_free(ProviderSpawns *sp);

/* A node's agent reported (it is up) or the node was lost: tell the provider. */
void provider_node_up(Server *s, uint32_t node);
void provider_node_lost(Server *s, uint32_t node);
