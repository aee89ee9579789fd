/* state.h: the server's model of the cluster and its jobs, and the scheduler loop that
 * drives the core on the real clock. The HTTP handlers (api_*.c) read it under the
 * lock and change it only through the functions below, which write the store first:
 * nothing is acknowledged before it is durable.
 *
 * Lifecycle of a job (src/life, shared with the simulator): pending (queued in the
 * core) -> starting (placed; the agents of its nodes are told to launch its workers) ->
 * running (every worker reported running) -> succeeded / failed (workers exited), or
 * stopping (preempted or cancelled; agents signal and stop the workers) -> pending again
 * (preempted: next run resumes from the latest checkpoint) or cancelled. A node whose
 * agent goes silent is lost: its jobs are torn down whole and requeued. */
#pragma once

#include "core/autoscale.h"
#include "core/cluster.h"
#include "core/job.h"
#include "core/learn.h"
#include "core/place.h"
#include "core/sched.h"
#include "life/life.h"
#include "spec/spec.h"
#include "store/store.h"
#include "util/buf.h"
#include "util/rng.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A job's state as stored and shown: the lifecycle's (life.h), by the names the API has
 * always used. */
typedef enum JobState {
    JOB_PENDING = LIFE_PENDING,
    JOB_STARTING = LIFE_STARTING,
    JOB_RUNNING = LIFE_RUNNING,
    JOB_STOPPING = LIFE_STOPPING,
    JOB_SUCCEEDED = LIFE_SUCCEEDED,
    JOB_FAILED = LIFE_FAILED,
    JOB_CANCELLED = LIFE_CANCELLED,
    JOB_STATE_COUNT = LIFE_STATE_COUNT
} JobState;

const char *job_state_name(JobState s);
int job_state_from_name(const char *s); /* -1 when unknown */
static inline bool job_state_ended(JobState s)
{
    return s >= JOB_SUCCEEDED;
}

typedef enum Role { ROLE_ADMIN, ROLE_LEAD, ROLE_MEMBER, ROLE_VIEWER, ROLE_AGENT, ROLE_COUNT } Role;

const char *role_name(Role r);
int role_from_name(const char *s); /* -1 when unknown */

/* Caller.token_id of the engine that drives the nodes (ServerOptions.external_nodes):
 * the one caller that submits jobs then, as its pods are the jobs. */
#define SERVER_ENGINE_CALLER (-1)

/* Who makes a request (from its bearer token). */
typedef struct Caller {
    int64_t token_id;
    Role role;
    char team[64]; /* lead and member: their team */
    char node[64]; /* agent: the only node it may act for ("" any) */
    char user[64]; /* who the token acts for ("" none: a token made before users) */
} Caller;

typedef struct ServerJob {
    StoreJob st;  /* the durable record; st.state is the JobState, st's state, run, exit
                   * code and times copied from life's whenever life changes them */
    JobSpec spec; /* parsed from st.spec_json */
    SchedJob sj;  /* the core's view; sj.id == st.id, sj.pl the allocation */
    LifeJob life; /* its lifecycle (life.h): life.sj is &sj, life.spec &spec, life.workers
                   * the current run's workers (NULL when not placed) */
    uint16_t master_port;
    double gpu_equivalents;     /* what all workers hold (or would hold) */
    uint32_t position;          /* pending: place in the queue (1 = next), as last ordered */
    bool parked;                /* pending but out of the queue: its engine has not the
                                 * pods to run it yet (server_job_park) */
    bool in_changes;            /* listed in a Changes being built (one list at a time) */
    size_t resident;            /* its index in Server.resident */
    int64_t pl_from_ms;         /* sj.pl is charged from then (its run's start, or its move) */
    int64_t moved_from_ms;      /* moving: sj.moved_from was charged from then */
    int64_t no_move_until_ms;   /* a replacement failed: not moved again before then */
    struct GangCkpt *ckpt;      /* the run's checkpoint reports per rank (checkpoint.h), or NULL */
    struct JobMeasure *measure; /* what its GPUs' readings say of sj.pl since pl_from_ms,
                                 * per worker (measured.h), or NULL before any reading */
    size_t n_measure;
    uint32_t stale_ckpt_run; /* the earlier run whose checkpoint report was last logged as
                              * ignored (api_agent.c), so it is logged once, not per beat */
    void *ext;               /* the record of the engine that drives the job's nodes (the Kubernetes
                              * engine's pod group), or NULL; the engine owns and sets it */
} ServerJob;

/* Shapes past this many go unmemoised (each job of them is tried every cycle). */
#define SERVER_MAX_SHAPES 4096

typedef enum NodeLiveness {
    NODE_UNKNOWN,    /* its agent has not reported since the server started */
    NODE_READY,      /* its agent reports */
    NODE_LOST,       /* its agent went silent */
    NODE_MISMATCHED, /* its agent reports other GPUs than the cluster file declares */
    NODE_DOWN,       /* its agent shut the node down (SIGTERM) and said so */
    NODE_LIVENESS_COUNT
} NodeLiveness;

/* "unknown", "ready", "lost", "mismatched", "down": the node's state in the API. */
const char *node_liveness_name(NodeLiveness l);

/* One GPU's readings as its agent last reported them (docs/api.md, the heartbeat's
 * gpus[].sample; gpusample.h); a has_ flag is false for a reading it left out. */
typedef struct NodeGpuSample {
    unsigned index; /* node-local GPU index */
    char uuid[96];
    char name[96]; /* as NVML names the model: DCGM's modelName */
    bool has_busy, has_memory, has_power, has_temperature;
    double busy_pct; /* 0-100 */
    uint64_t memory_used_mib;
    double power_w;
    int temperature_c;
} NodeGpuSample;
#define NODE_GPU_HEALTH_MAX 48 /* a sick GPU's reason, as the agent's GPU_HEALTH_MAX */

typedef struct NodeState {
    uint8_t liveness;     /* NodeLiveness */
    int64_t last_seen_ms; /* wall clock, for people */
    int64_t seen_mono_ms; /* monotonic, for the silence check (clock steps do not count) */
    char *boot_id;
    char *address;   /* where its workers' peers reach it (MASTER_ADDR), or NULL: the name */
    char *gpus_json; /* the GPUs as its agent last reported them ("[...]"), or NULL */
    char *mismatch;  /* mismatched: how its GPUs differ from the spec (nodecheck.h) */
    int64_t interruption_deadline_ms; /* its cloud takes it back then (wall ms); 0: no notice */
    int64_t span_id;      /* its open span of counted capacity in the store (nodespan.h), 0: none */
    bool span_queued;     /* its span opens or closes at the next flush (nodespan.h) */
    int64_t lost_mono_ms; /* lost: when it was declared so (monotonic) */
    bool gave_up;         /* lost past the grace: its jobs were requeued */
    /* the GPU readings of its last heartbeat (malloc'd; NULL, 0: none) */
    NodeGpuSample *samples;
    size_t n_samples;
    uint16_t gpu_sick_mask; /* GPUs (by node-local index) its agent reports sick (gpufence.h) */
    char gpu_sick[NODE_MAX_GPUS][NODE_GPU_HEALTH_MAX]; /* their reasons, "" for healthy ones */
} NodeState;

typedef enum ProviderKind { PROVIDER_NONE, PROVIDER_SIM, PROVIDER_EXEC } ProviderKind;

/* What the provider (provider.c) keeps per node. */
typedef struct ProviderNode {
    int agent_pid;        /* sim: the local agent it started, 0: none */
    int64_t launch_at_ms; /* sim: when to start the agent (the pool's start-up), 0: none */
    int64_t asked_ms;     /* when the node was asked for, 0: not starting */
} ProviderNode;

typedef struct ServerOptions {
    const char *config_path;     /* cluster spec */
    const char *db_url;          /* "sqlite:PATH" or "postgres://..." */
    const char *advertise_url;   /* how clients reach this server, recorded as the leader's */
    const char *data_dir;        /* admin.token and logs/ go here (the database's directory) */
    int64_t heartbeat_ms;        /* what agents are told (default 500) */
    int64_t lost_after_ms;       /* silence that makes a node lost (default 40000) */
    int64_t lost_grace_ms;       /* a lost node's running work waits this long for it to come
                                    back before its jobs are requeued (-1: 300000; 0: none) */
    int64_t cycle_ms;            /* scheduling cycle at the latest every (default 1000) */
    int64_t min_runtime_ms;      /* a job runs this long before it may be preempted (-1: 5 min) */
    int64_t job_retention_ms;    /* an ended job stays in memory this long (0: 5 min, as
                                    Slurm's MinJobAge), then is read from the store */
    int64_t max_ended_jobs;      /* and at most this many ended jobs stay (0: 10,000) */
    ProviderKind provider;       /* who starts and stops the nodes of autoscaled pools */
    const char *provider_script; /* PROVIDER_EXEC: the script */
    /* The store, opened and leading (store_lead) by the caller, which a standby does while
     * it waits to lead; server_open takes it, even when it fails. NULL: server_open opens
     * db_url and leads it, or fails with -EBUSY when another server leads it. */
    Store *store;
    /* An engine outside the server carries out its decisions (the Kubernetes engine,
     * src/kube): the cluster it built (server_open takes it; config_path then only names
     * it in messages), nodes' readiness from it rather than from agents' heartbeats, and
     * a call after every scheduling cycle (lock held, the cycle's changes durable) so
     * that it acts on the decisions. */
    Cluster *cluster;
    bool external_nodes;
    void (*after_cycle)(void *arg);
    void *after_cycle_arg;
} ServerOptions;

/* Counters for /metrics. */
typedef struct ServerCounters {
    uint64_t started, preempted, requeued_lost;
    uint64_t spot_interruptions;        /* nodes whose agents reported an interruption notice */
    uint64_t finished[JOB_STATE_COUNT]; /* by ending state */
    uint64_t cycles;
    double cycle_seconds_sum;
    uint64_t cycle_buckets[8]; /* <= 1ms, 5ms, 10ms, 50ms, 100ms, 500ms, 1s, +Inf */
} ServerCounters;

typedef struct Server {
    pthread_mutex_t lock; /* guards everything below but what says otherwise */
    pthread_cond_t wake;  /* the scheduler thread waits on it */
    /* held across every write of a Changes (commit.c), taken after lock: the writes go
     * to the store in the order the changes were made, one of them out of the lock */
    pthread_mutex_t commit_lock;
    pthread_cond_t durable; /* with lock: `committing` went to 0 */
    /* how many writes are under way with the lock released (a cycle's, a request's): the
     * model holds changes the store may not have yet, so server_lock waits for 0 */
    unsigned committing;
    unsigned durable_waiters; /* threads waiting in server_lock */
    bool dirty;               /* something changed: run a cycle soon */
    bool quit;
    /* a negative errno once a change made in memory could not be made durable (memory
     * is ahead of the store: server_diverge); read without the lock */
    _Atomic int diverged;
    pthread_t thread;
    bool thread_started;

    ServerOptions opt;
    char *log_dir;
    Store *store;
    /* the HTTP front's token cache (auth.h), so that revoking a token forgets it at
     * once; NULL while no front runs. Locks itself: not under lock. */
    struct AuthCache *auth_cache;
    char server_id[STORE_SERVER_ID_LEN + 1]; /* the store's identity, told to agents */
    Cluster *c;
    Rng rng;
    PlaceCtx ctx;
    ScoreCache cache; /* the placer's scores per node and shape (ctx.cache) */
    Mix mix;
    Sched sched;
    Learn learn;             /* GPU memory per workload class, from the runs (core/learn.h) */
    Life life;               /* what happens to the jobs after the core decides (life.h) */
    struct Changes *life_ch; /* where life's sink lists what it does: the Changes of the
                              * lifecycle call under way (set by lifecycle.c, lock held) */
    NodeState *nodes;        /* per cluster node */

    ServerJob **jobs; /* by id: jobs[id], NULL for ids not in memory; [0] unused */
    size_t jobs_cap;
    int64_t max_id;
    /* The jobs in memory: every live one (pending, starting, running, stopping) and the
     * ended ones inside the retention, in no order (j->resident is each one's index).
     * Every walk over jobs is over these, so its work is bounded by what is live, not by
     * everything ever submitted; an ended job past the retention is read from the store. */
    ServerJob **resident;
    size_t n_resident, resident_cap;
    /* the ended jobs in memory, oldest end first (a queue: [ended_head, n_ended)) */
    ServerJob **ended;
    size_t ended_head, n_ended, ended_cap;
    Request *shapes; /* distinct request shapes seen, by shape id (SERVER_MAX_SHAPES) */
    size_t n_shapes;
    ServerJob **holding; /* jobs holding an allocation (starting, running, stopping) */
    size_t n_holding, holding_cap;
    SchedJob **running; /* scratch for sched_cycle */
    size_t running_cap;
    bool order_stale; /* the queue changed since positions were computed */
    uint16_t next_port;
    ServerCounters counters;
    /* autoscaling (provider.c): only with a provider and an autoscaled pool */
    bool autoscaling;
    Autoscaler as;
    ProviderNode *pnodes;         /* per cluster node */
    struct ProviderSpawn *spawns; /* programs to start once the lock is released */
    size_t n_spawns, spawns_cap;
    char *agent_token;        /* sim: the token its agents use */
    char *url;                /* sim: where its agents reach the server */
    struct Utilization *util; /* the last hour's samples (utilization.h), NULL until the first */

    /* when the open node spans' ends were last written (nodespan.h), monotonic ms */
    int64_t span_tick_mono_ms;
    /* the nodes whose spans are to open or close at the next nodespan_flush, in one
     * write (an engine makes thousands of nodes ready at once) */
    uint32_t *span_batched;
    size_t n_span_batched, span_batched_cap;
} Server;

/* What each function below needs of Server.lock is the tag its comment begins with:
 * [lock] the caller holds it; [takes lock] it takes the lock itself (through
 * server_lock where it tells what it sees), so the caller must not hold it; [any
 * thread] it needs none. docs/ARCHITECTURE.md, "Locks", says what each lock guards. */

/* [takes lock] Load the cluster, open the store (migrating it), load jobs and rebuild the
 * allocation of the running ones, and start the scheduler thread. 0, or a negative errno with err
 * saying why. */
int server_open(const ServerOptions *o, Server **ret, Buf *err);
/* [takes lock] */
void server_close(Server *s);

/* [any thread] Wall clock in ms since the epoch (the one place the server reads it), and a
 * monotonic clock in ms for intervals. */
int64_t server_now_ms(void);
/* [any thread] */
int64_t server_mono_ms(void);

/* The request calls return an HTTP status (2xx on success, 4xx with err set to a
 * sentence for the caller, 500 when the store failed). */

/* [takes lock] Accept jobs (all or none). On success ret_ids[i] holds each job's id. */
int server_submit(Server *s, const Caller *who, JobList *jobs, int64_t *ret_ids, Buf *err);
/* [takes lock] */
int server_cancel(Server *s, const Caller *who, int64_t id, Buf *err);
/* [takes lock] */
int server_set_priority(Server *s, const Caller *who, int64_t id, Priority p, Buf *err);
/* [takes lock] Move a pending job just before (after) another pending job of its team and class. */
int server_move(Server *s, const Caller *who, int64_t id, int64_t anchor, bool after, Buf *err);
/* [takes lock] */
int server_team_set(Server *s, const char *team, const double *guaranteed_gpus,
                    const double *burst_gpus, const double *weight, Buf *err);

/* [lock] A job by id, or NULL. */
ServerJob *server_job(Server *s, int64_t id);
/* [lock] Queue position (1 = next) of a pending job, 0 when not pending. Recomputes the
 * queue order when it is stale. */
uint32_t server_position(Server *s, const ServerJob *j);
/* [lock] The same for a job just submitted, counted when it was queued without ordering the
 * whole queue (exact unless a submission of the same millisecond overtook it). */
uint32_t server_position_new(Server *s, const ServerJob *j);
/* [lock] When a pending job is expected to start (a reservation holds nodes for it), or -1. */
int64_t server_eta_ms(Server *s, const ServerJob *j);
/* [lock] Wake the scheduler thread for a cycle now. */
void server_kick(Server *s);
/* [any thread] Memory is ahead of the store (err: why, a negative errno): from now on the server
 * tells nobody anything from it (heartbeats are refused, no cycle runs), and the daemon's top level
 * (the scheduler thread's loop, the HTTP reply path) ends the process, so that a restart reloads
 * the durable state. The first err stays. */
void server_diverge(Server *s, int err);
/* [any thread] 0, or the err of the first server_diverge. */
int server_diverged(const Server *s);

/* For the agent endpoints (api_agent.c), the scheduler thread and the engine. */

/* What a step changed, to persist in one durable write (server_commit) before anyone
 * is told: jobs (each once), events, closed usage segments. */
typedef struct Changes {
    ServerJob **jobs;
    size_t n_jobs, jobs_cap;
    StoreEvent *events;
    size_t n_events, events_cap;
    StoreUsage *usage;
    size_t n_usage, usage_cap;
    StoreLearned *learned; /* classes whose learned memory changed; strings are s->learn's */
    size_t n_learned, learned_cap;
    char **strs; /* event details, owned */
    size_t n_strs, strs_cap;
    struct ChangeMig *mig; /* MIG layouts placements set, written before the rows */
    size_t n_mig, mig_cap;
    char **forget; /* classes whose learned memory was reset, owned */
    size_t n_forget, forget_cap;
    /* sticky: the first failure to list a change (or to make one in memory), a negative
     * errno; server_commit then writes none of the rest, which alone would be a change
     * with entries missing (SQLite's mallocFailed) */
    int err;
} Changes;
/* [lock] The changes_* calls cannot fail: a change they cannot list sets ch->err. */
void changes_job(Changes *ch, ServerJob *j);
/* [lock] A change was made in memory that the lists cannot carry (err < 0): the whole fails. */
void changes_fail(Changes *ch, int err);
/* [lock] A closed usage segment; its strings must stay valid until the commit (they are the
 * job's and the cluster's). */
void changes_usage(Changes *ch, const StoreUsage *u);
/* [lock] A GPU's MIG layout to remember (node: the cluster's name; layout_json: taken, NULL
 * for want of memory fails the change). */
void changes_mig(Changes *ch, const char *node, unsigned index, char *layout_json);
/* [lock] */
void changes_event(Changes *ch, ServerJob *j, int64_t t_ms, const char *type, const char *detail);
/* [lock] A class's learned memory changed: write its entry (e stays valid: Learn keeps it). */
void changes_learned(Changes *ch, const LearnEntry *e);
/* [lock] A class's learned memory was forgotten: the store forgets it too. */
void changes_forget(Changes *ch, const char *cls);
/* [any thread] */
void changes_free(Changes *ch);
/* [lock] Write the changes durably and empty the lists: 0, or a negative errno (ch->err, or
 * the store's). On failure nothing of ch is written; memory is then ahead of the store,
 * so the server is marked diverged (server_diverge) and the caller passes the error up.
 * Only the daemon's top level decides what follows (it ends the process, so that a
 * restart reloads the durable state). */
int server_commit(Server *s, Changes *ch);
/* [lock] As server_commit, but the lock is released while the store writes (its fsync),
 * and taken back, once nothing written out of the lock is still under way (as
 * server_lock), before it returns. The model may have changed meanwhile: the caller holds
 * no pointer to a job across it (a job that ended may have left memory). While another
 * thread waits in server_lock it writes with the lock held, so no reader waits for more
 * than one write. */
int server_commit_released(Server *s, Changes *ch);
/* [lock] A write of the caller's own (a team's quotas, its budget), made as
 * server_commit_released makes one, in order after every write listed before it: the
 * caller changes memory after it succeeds. write's result. */
int server_write_released(Server *s, int (*write)(Store *st, void *arg), void *arg);

/* A Changes taken out of the model to be written with the lock released (the
 * scheduler's cycle): copies of what the write needs, owned. */
typedef struct CommitBatch {
    StoreJob *rows; /* the columns an update writes (store.h); checkpoint and placement
                     * owned, the other strings NULL */
    const StoreJob **up;
    size_t n_rows;
    StoreEvent *events;
    size_t n_events;
    StoreUsage *usage;
    size_t n_usage;
    StoreLearned *learned;
    size_t n_learned;
    struct ChangeMig *mig;
    size_t n_mig;
    char **forget;
    size_t n_forget;
    char **strs; /* every string the lists point at that the batch owns */
    size_t n_strs, strs_cap;
    bool pending; /* a write to make: commit_lock is held, s->committing counts it */
} CommitBatch;
/* [lock] Take the changes into b and begin the write: 0 (ch emptied; b pending
 * when there was anything to write), or a negative errno when they cannot be copied
 * (the server has diverged, nothing is pending). Until server_commit_finish, readers
 * that take the lock through server_lock wait. */
int server_commit_begin(Server *s, Changes *ch, CommitBatch *b);
/* [lock released on entry, held on return] Write b and end it: 0, or a negative errno (the server
 * has diverged: the waiting readers are not woken, and the caller's top level ends the process).
 * Returns with the lock held, once no other write out of the lock is under way (what the
 * caller then sees is durable). */
int server_commit_finish(Server *s, CommitBatch *b);
/* [takes lock] Take the lock as a reader that tells agents, users or an engine what it sees: once
 * no cycle's changes are being written, so that what it sees is durable. Release it
 * with pthread_mutex_unlock. The scheduler thread, which writes them, takes s->lock
 * itself. */
void server_lock(Server *s);
/* [lock] Worker state has changed: move the job along its lifecycle (running, ended,
 * released, requeued). */
void server_job_progress(Server *s, ServerJob *j, int64_t now_ms, Changes *ch);
/* [lock] The core placed the job: its run begins (workers assigned to their nodes' agents). */
int server_job_started(Server *s, ServerJob *j, int64_t now_ms, Changes *ch);
/* [lock] The core moved a model server (SCHED_MOVE): its replacement's run begins (move.c). */
int server_job_move(Server *s, ServerJob *j, int64_t now_ms, Changes *ch);
/* [lock] The shadow worker of a move changed state: commit, retire or abandon the move. */
void server_move_progress(Server *s, ServerJob *j, int64_t now_ms, Changes *ch);
/* [lock] The lifecycle ended a move (its sink, move.c): done, charge the old allocation;
 * abandoned, the replacement's, and hold the job back from moving for a while. */
int server_job_moved(Server *s, ServerJob *j, bool done, int64_t now_ms, Changes *ch);
/* [lock] The lifecycle, its sink writing into ch, and the end of the call: an error of it
 * is logged and fails ch whole. */
Life *server_life(Server *s, Changes *ch);
void server_life_done(Server *s, const ServerJob *j, int err, const char *what);
/* [lock] The usage segment of one worker's allocation from from_ms to to_ms (its strings
 * are the job's and the cluster's). */
StoreUsage server_usage_segment(const Server *s, const ServerJob *j, const WorkerAlloc *wa,
                                int64_t from_ms, int64_t to_ms);
/* [lock] Charge what pl held from from_ms to now_ms (usage records, per worker). */
void server_charge(Server *s, const ServerJob *j, const Placement *pl, int64_t from_ms,
                   int64_t now_ms, Changes *ch);
/* [lock] Remember the MIG layouts a placement set, for a restarted server. */
void server_save_mig(Server *s, const Placement *pl, Changes *ch);
/* [lock] Has the job a worker on the node that its agent runs (or was told to and may run)?
 * running_only: one reported running. */
bool server_job_on_node(const ServerJob *j, uint32_t node, bool running_only);
/* [lock] The jobs with a worker (or a moving server's other worker) on the node, copied:
 * stopping or finishing a run takes a job off the holding list. The caller frees the
 * array; NULL when there are none (or out of memory). */
ServerJob **server_jobs_on_node(Server *s, uint32_t node, size_t *ret_n);
/* [lock] Nodes whose agents went silent: lost, their jobs torn down and requeued. 0, or the
 * commit's negative errno. */
int server_check_nodes(Server *s, int64_t now_ms);
/* [lock] The node's agent is shutting it down: it takes no work, and every job with a worker
 * there is stopped (with a checkpoint) and requeued to resume, as a preemption. */
void server_node_shutdown(Server *s, uint32_t node, int64_t now_ms, Changes *ch);
/* [lock] A worker of the job ended because its node shut down: the run is stopped and
 * requeued as above (the ends of a shutdown an earlier agent reported), not failed. */
void server_job_node_shutdown(Server *s, ServerJob *j, uint32_t node, int64_t now_ms, Changes *ch);
/* [lock] A job just ended (or was loaded ended): it leaves memory after the retention. */
int server_job_note_ended(Server *s, ServerJob *j);
/* [lock] Ended jobs past the retention (or past the count kept) leave memory. */
void server_evict_ended(Server *s, int64_t now_ms);
/* [lock] A job as the store has it, for one that left memory: its record in ret->st, its spec
 * parsed and bound to the cluster as when it was loaded (lock held). 0, -ENOENT, or a
 * negative errno; free with server_job_view_free. */
int server_job_view(Server *s, StoreJob *rec, ServerJob **ret);
void server_job_view_free(ServerJob *j);
/* [lock] Job id, in memory or, once it left, as the store has it: called and returning with the
 * lock held, which it lets go of while it reads the store. *view is set to what the
 * caller frees with server_job_view_free when done (NULL for a job in memory). NULL when
 * there is no such job, or (*err < 0) the store could not be read. */
ServerJob *server_job_find(Server *s, int64_t id, ServerJob **view, int *err);

/* [lock] The lifecycle's sink (lifecycle.c), set once the core is; a job's LifeJob, from
 * its durable record. */
void server_life_init(Server *s);
void server_job_life_init(ServerJob *j);
/* [lock] The job's request changed: its shape for the score cache, and what it asks. */
void server_job_shape(Server *s, ServerJob *j);
/* [lock] Size a queued job from what its workload class learned (core/learn.h): 0 unchanged,
 * 1 resized, 2 when no GPU of the cluster holds what the class needs, -ENOMEM. */
int server_job_size(Server *s, ServerJob *j);
/* [lock] Size a queued job again from its spec and what its class learned now (after a class
 * was reset, when it may ask less): 0 unchanged, 1 resized, a negative errno. */
int server_job_size_afresh(Server *s, ServerJob *j);
/* [lock] The next job after *pos that waits in the queue and is of workload class cls, or NULL
 * (start with *pos = 0). What a class learns or forgets re-sizes these. */
ServerJob *server_waiting_of_class(Server *s, const char *cls, int64_t *pos);
/* [lock] The list of jobs holding an allocation. */
int server_hold(Server *s, ServerJob *j);
/* [lock] */
void server_unhold(Server *s, ServerJob *j);
/* For an engine that drives the nodes itself (ServerOptions.external_nodes; external.c). */

/* [lock] The node takes work (why AWAY_NONE) or not, for the cause its engine knows. */
void server_node_ready(Server *s, uint32_t node, NodeAway why, int64_t now_ms);
/* [lock] Take a pending job out of the queue (park) or put it back: an engine parks a job whose
 * workers it cannot start yet (a preempted Kubernetes job whose pods are being
 * recreated). A parked job keeps its place in the store as pending. */
void server_job_park(Server *s, ServerJob *j, bool park);
/* [lock] The job's run ended outside the scheduler's control before it could start (its pods
 * were deleted): closed as cancelled, with why as the event. */
void server_job_vanished(Server *s, ServerJob *j, const char *why, int64_t now_ms, Changes *ch);

/* [lock] A job out of the queue and holding nothing (parked) ends as final. */
void server_job_end(Server *s, ServerJob *j, JobState final, int64_t now_ms, Changes *ch);
/* [lock] Stop a job's workers (mode LIFE_STOP_*); requeue says what happens when they are
 * gone. */
void server_job_stop(Server *s, ServerJob *j, LifeStop mode, bool requeue, int64_t now_ms,
                     Changes *ch);
