/* mps.h: the MPS control daemons of the GPUs that MPS shares run on. A share's limits
 * (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE, CUDA_MPS_PINNED_DEVICE_MEM_LIMIT) bind only when
 * its process is a client of an MPS control daemon; without one they are ignored and a
 * share can take the whole GPU. So the agent runs one `nvidia-cuda-mps-control -f` per
 * shared GPU, in the foreground as its child (its death is seen by waitpid), with that
 * GPU alone visible and its own pipe and log directories under STATE-DIR/mps/gpuN,
 * which the share's workers are given; it puts the GPU in exclusive-process compute
 * mode while the daemon runs (only the MPS server then holds a context on it) and back
 * to default after. The daemon stops (`quit` on its pipe) when no worker shares the GPU
 * any more. An agent that leaves its workers running (SIGHUP) leaves their daemons too;
 * the next one takes them up from their pid files (STATE-DIR/mps/gpuN/pid).
 * GPUORCH_MPS_CONTROL names another program (the tests' stand-in). */
#pragma once

#include "agent/gpus.h"
#include "util/buf.h"

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define MPS_MAX_GPUS 64

typedef struct MpsDaemon {
    bool running;
    bool adopted; /* started by an earlier agent (its pid file): not our child */
    pid_t pid;
    char pipe_dir[512], log_dir[512];
} MpsDaemon;

typedef struct Mps {
    char root[400];            /* STATE-DIR/mps */
    char control[256];         /* the program: nvidia-cuda-mps-control */
    MpsDaemon d[MPS_MAX_GPUS]; /* by GPU index */
} Mps;

/* Set up (nothing starts yet). state_dir: the agent's. */
void mps_init(Mps *m, const char *state_dir);

/* Make sure GPU g has its daemon: exclusive-process mode (through b, when it can set
 * it), then the daemon started. 0, or a negative errno with err saying why. */
int mps_ensure(Mps *m, GpuBackend *b, const AgentGpu *g, Buf *err);

/* The daemon of GPU index, running, or NULL. */
const MpsDaemon *mps_of(const Mps *m, unsigned index);

/* Stop GPU index's daemon (quit, then SIGKILL after a few seconds) and put the GPU back
 * in default compute mode. */
void mps_stop(Mps *m, GpuBackend *b, unsigned index);

/* A daemon that ended without being asked to: its GPU index in *ret_index and its
 * status in *ret_status (waitpid's), 1; 0 when none. Each is reported once. */
int mps_reap(Mps *m, unsigned *ret_index, int *ret_status);

/* Stop every daemon (no worker is left to use them). */
void mps_close(Mps *m, GpuBackend *b);
/* Whether any daemon runs. */
bool mps_any(const Mps *m);
