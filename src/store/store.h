/* store.h: the server's durable state behind one interface: jobs, their events and
 * usage records, the spans of time each node counted as capacity, team quota and
 * budget overrides, API tokens (hashed) and the MIG layouts the server set on each
 * node. SQLite (WAL) is the embedded back end; PostgreSQL (libpq) the one for production
 * and for several servers on one database, one of them leading (store_lead).
 *
 * Every write function is durable when it returns 0: the transaction is committed
 * and synced (SQLite: WAL with synchronous=FULL; PostgreSQL: synchronous_commit=on,
 * forced on the writing session whatever the server's default). Concurrent writers are
 * group-committed: each caller's write waits for the one commit that carries it, so
 * many small submissions share an fsync. All functions are thread-safe.
 *
 * The schema is versioned: opening a store applies the migrations it lacks, each in its
 * own transaction, and refuses a database written by a newer gpuorch.
 *
 * Errors: a negative errno (-EINVAL bad URL or arguments, a constraint the write broke
 * (an unknown job), -EEXIST a unique key already taken (a token's hash), -ENOENT the
 * database's directory is missing, -ENOTSUP a back end this build lacks or a database
 * written by a newer gpuorch, -EIO the database failed or cannot be reached, -ESTALE
 * this Store led and lost its leadership, -ENOMEM) with the reason appended to err when
 * given. A message that names a PostgreSQL URL shows it with its password masked
 * (store_url_redact).
 *
 * A write that fails is not saved, whole: when its commit failed (an fsync), the store
 * writes again at once so that the failed commit's frames cannot come back from the log
 * after a crash, and the reason ends "(not saved)"; only when that write fails too (the
 * disk still failing) may the failed write still turn up at the next opening, and the
 * reason says so. Tested with failing allocations and I/O (tests/unit/test_store_faults.c).
 * PostgreSQL: a connection lost before its commit's answer leaves the write's fate
 * unknown, and the reason says it may still be saved; otherwise "(not saved)". */
#pragma once

#include "util/buf.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct Store Store;

/* Open "sqlite:PATH", a bare PATH (SQLite), or "postgres://..." / "postgresql://..."
 * (libpq's URI syntax: postgres://USER:PASSWORD@HOST:PORT/DB?OPTIONS, or
 * postgres:///DB?host=/SOCKET/DIR). SQLite creates the database file on first use; its
 * directory must exist (-ENOENT). PostgreSQL: the database must exist; -EINVAL for a URL
 * libpq cannot parse, -EIO for a server that cannot be reached or refuses the login. */
int store_open(const char *url, Store **ret, Buf *err);
void store_close(Store *s);
/* url with its password masked, appended to out: postgres://user:secret@host/db becomes
 * postgres://user:***@host/db, and a password=... in a query string or in key=value
 * conninfo becomes password=***. Anything else is copied as it is. */
void store_url_redact(const char *url, Buf *out);
/* The schema version the store is at (the newest migration applied); both back ends
 * number the same steps the same way. */
int store_schema_version(Store *s);
/* A cheap round trip to the database, for /healthz. 0 or -EIO. */
int store_ping(Store *s);

/* A job as stored. Strings are owned by the struct (store_job_free frees them); the
 * store copies what it is given. Times are ms since the epoch, -1 when not yet. */
typedef struct StoreJob {
    int64_t id; /* assigned by store_write on insert, from 1, never reused */
    char *name;
    char *team;       /* NULL: none */
    char *project;    /* NULL: none */
    char *spec_json;  /* the job as submitted, normalised (spec_job_to_json) */
    int64_t owner;    /* token id of the submitter */
    char *user;       /* the user the submitter's token acts for, NULL: none known */
    uint8_t priority; /* Priority (core/job.h) */
    uint8_t state;    /* the server's JobState */
    uint32_t run;     /* runs started so far */
    uint32_t preemptions;
    int64_t submit_ms, start_ms, end_ms;
    int32_t exit_code; /* -1 until it ended with one */
    char *checkpoint;  /* latest completed checkpoint, NULL: none */
    int64_t checkpoint_ms;
    double queue_key;     /* where a lead moved it in its queue (0: by submission) */
    char *placement_json; /* the allocation while it holds one, else NULL */
} StoreJob;

void store_job_free(StoreJob *j);

/* In events and usage, job -k (k >= 1) names the k-th insert of the same StoreWrite,
 * whose id is not known before the write: a job and its "submit" event in one commit. */
typedef struct StoreEvent {
    int64_t job;
    int64_t t_ms;
    const char *type;   /* "start", "preempt", "checkpoint", "requeue", "finish", ... */
    const char *detail; /* a sentence, or NULL */
} StoreEvent;

/* One closed run segment, for chargeback: a job held gpu_equivalents of a pool's node
 * from start to end. */
typedef struct StoreUsage {
    int64_t job;
    const char *team, *project, *pool, *model, *tier; /* NULL or "" when none */
    const char *node; /* NULL in segments written before the store kept it */
    double gpu_equivalents;
    int64_t price_micro_usd; /* per GPU-hour of the pool */
    int64_t start_ms, end_ms;
    /* What the GPUs' own readings say of the segment (their agents' busy share): of its
     * GPU-equivalent milliseconds, measured_gpu_ms had a reading, and they were busy
     * busy_gpu_ms; 0 and 0 when nothing was measured (simulated time, a MIG instance, a
     * driver without readings). Clipped to a window in proportion. */
    int64_t measured_gpu_ms, busy_gpu_ms;
} StoreUsage;

/* The GPU memory learned for a workload class (core/learn.h): the peak to size its
 * next job by and how many out-of-memory failures taught it. */
typedef struct StoreLearned {
    const char *cls;
    uint64_t peak_mib;
    unsigned ooms;
} StoreLearned;

/* One transaction: insert jobs (ids written back into inserts[i].id), update jobs
 * (every field but id, name, team, project, spec_json, owner and submit_ms), append
 * events and usage, set learned classes, forget learned classes (an admin's reset; a
 * class not in the store is no error). All or nothing: a job requeued after running
 * out of memory and what its class learned from it are durable together. */
typedef struct StoreWrite {
    StoreJob *inserts;
    size_t n_inserts;
    const StoreJob *const *updates;
    size_t n_updates;
    const StoreEvent *events;
    size_t n_events;
    const StoreUsage *usage;
    size_t n_usage;
    const StoreLearned *learned;
    size_t n_learned;
    const char *const *forget; /* learned classes' keys */
    size_t n_forget;
} StoreWrite;

int store_write(Store *s, StoreWrite *w, Buf *err);

/* The read functions call fn while they hold the store's reading connection: fn may
 * write to the store but must not call another read function. */

/* Call fn for every job in id order; fn takes ownership of the job's strings (it may
 * keep them and must free what it does not keep with store_job_free). A non-zero
 * return from fn stops the walk and is returned. */
int store_jobs_load(Store *s, int (*fn)(void *arg, StoreJob *j), void *arg);

/* The same for the jobs that are not ended (states up to the server's stopping) and
 * those that ended at ended_since_ms or later: what a server keeps in memory. */
int store_jobs_load_live(Store *s, int64_t ended_since_ms, int (*fn)(void *arg, StoreJob *j),
                         void *arg);
/* One job into *ret (the caller frees it with store_job_free): 0, -ENOENT, -EIO, -ENOMEM. */
int store_job_get(Store *s, int64_t id, StoreJob *ret);

/* A page of jobs, in id order: those after after_id whose state is in the states mask
 * (bit 1 << state), of the team and project when given, at most limit of them; fn as
 * store_jobs_load's. */
typedef struct StoreJobQuery {
    int64_t after_id;
    uint32_t states;
    const char *team, *project; /* NULL: any */
    int64_t limit;
} StoreJobQuery;
int store_jobs_page(Store *s, const StoreJobQuery *q, int (*fn)(void *arg, StoreJob *j), void *arg);

/* The events of one job in time order; the strings are valid during the call. */
int store_events_for(Store *s, int64_t job,
                     int (*fn)(void *arg, int64_t t_ms, const char *type, const char *detail),
                     void *arg);

/* Usage segments overlapping [from_ms, to_ms), in start order, their start_ms and
 * end_ms clipped to the window; strings valid during the call. */
int store_usage_query(Store *s, int64_t from_ms, int64_t to_ms,
                      int (*fn)(void *arg, const StoreUsage *u), void *arg);

/* A span of time a node counted as the cluster's capacity, for idle showback: from when
 * its tier's rule began to count it (its agent reported, or the server asked the cloud
 * for it) to when it stopped (lost, given back, the server stopped). An open span is
 * still going: the server moves its end forward every few seconds, so a server that
 * dies loses only the time since; store_node_spans_close_open ends what it left open. */
typedef struct StoreNodeSpan {
    int64_t id;                      /* assigned by store_node_span_open, from 1 */
    const char *node;                /* the node's name */
    const char *pool, *model, *tier; /* as the cluster had them then */
    const char *basis;               /* why it counted: "ready" or "present" */
    uint32_t gpus;                   /* its GPUs */
    int64_t price_micro_usd;         /* per GPU-hour of its pool */
    int64_t start_ms, end_ms;        /* end_ms: how far it is known to have reached */
    bool open;
} StoreNodeSpan;

/* Begin a span, open, reaching span->end_ms so far (its start); its id in *ret_id. */
int store_node_span_open(Store *s, const StoreNodeSpan *span, int64_t *ret_id);
/* Begin n spans in one durable write (all or none); their ids in ret_ids[i]. */
int store_node_spans_open(Store *s, const StoreNodeSpan *spans, size_t n, int64_t *ret_ids);
/* Move the end of the open spans among ids to end_ms (never back), and close them when
 * close is set. Closed spans, and ids that name none, are left as they are. */
int store_node_spans_end(Store *s, const int64_t *ids, size_t n, int64_t end_ms, bool close);
/* Close every open span where its end last reached (a server starting closes what the
 * one before it left open); how many in *ret_n. */
int store_node_spans_close_open(Store *s, size_t *ret_n);
/* Spans overlapping [from_ms, to_ms), ordered by node then start, their start and end
 * clipped to the window; an open span reaches to_ms (it is still going). Strings valid
 * during the call. */
int store_node_spans_query(Store *s, int64_t from_ms, int64_t to_ms,
                           int (*fn)(void *arg, const StoreNodeSpan *span), void *arg);

/* Team quota overrides (set through PUT /teams). */
int store_team_set(Store *s, const char *name, double guaranteed_gpus, double burst_gpus,
                   double weight);
int store_teams_load(Store *s,
                     int (*fn)(void *arg, const char *name, double guaranteed_gpus,
                               double burst_gpus, double weight),
                     void *arg);

/* Team GPU-hour budgets per calendar month (set through PUT /teams; 0: none), which
 * override the cluster file's. */
int store_team_budget_set(Store *s, const char *name, double budget_gpu_hours);
int store_team_budgets_load(Store *s,
                            int (*fn)(void *arg, const char *name, double budget_gpu_hours),
                            void *arg);

/* Every learned class, in class order. */
int store_learned_load(Store *s,
                       int (*fn)(void *arg, const char *cls, uint64_t peak_mib, unsigned ooms),
                       void *arg);

/* API tokens, kept as their hash. A revoked token keeps its row (revoked_ms set), so
 * its id stays unique and its hash is never accepted again. */
#define STORE_TOKEN_HASH_LEN 32
typedef struct StoreToken {
    int64_t id;
    char role[16]; /* "admin", "lead", "member", "viewer", "agent" */
    char team[64]; /* "" when none */
    char node[64]; /* agent: the only node it may act for; "" any */
    char name[64];
    char user[64];      /* who the token acts for; "" none (tokens made before users) */
    int64_t created_ms; /* ms since the epoch */
    int64_t expires_ms; /* refused from then on; -1 never */
    int64_t revoked_ms; /* refused since then; -1 not revoked */
} StoreToken;

/* Insert t (its id is ignored) with hash; *ret_id the new id. -EINVAL when a field is
 * empty where needed or does not fit, -EEXIST when the hash is taken. */
int store_token_insert(Store *s, const uint8_t hash[STORE_TOKEN_HASH_LEN], const StoreToken *t,
                       int64_t *ret_id);
/* 1 and *ret filled when a token with this hash exists (revoked or not), 0 when not, or
 * an error. */
int store_token_find(Store *s, const uint8_t hash[STORE_TOKEN_HASH_LEN], StoreToken *ret);
/* How many tokens exist, revoked ones too (the first start creates the admin token
 * when none). */
int store_token_count(Store *s, int64_t *ret);
/* Every token, by id; fn's nonzero return stops the walk and is returned. */
int store_token_list(Store *s, int (*fn)(void *arg, const StoreToken *t), void *arg);
/* Mark token id revoked at now_ms. 0; -ENOENT no such token; -EALREADY revoked before. */
int store_token_revoke(Store *s, int64_t id, int64_t now_ms);

/* The server's identity: 32 hex digits made at random when the store was first opened
 * (or first opened by a gpuorch that keeps one), the same ever after. */
#define STORE_SERVER_ID_LEN 32
int store_server_id(Store *s, char ret[STORE_SERVER_ID_LEN + 1]);

/* The MIG layout the server set on a node's GPU, as JSON ([{"profile":..,"start":..}]),
 * so a restarted server knows the instances its running jobs sit in. */
int store_mig_set(Store *s, const char *node, unsigned index, const char *layout_json);
int store_mig_load(Store *s,
                   int (*fn)(void *arg, const char *node, unsigned index, const char *layout_json),
                   void *arg);

/* Leadership: at most one server decides for a database; the others stand by.
 * store_lead tries to become the leader, without waiting: 1 when this Store now leads
 * (or already led), 0 when another server leads, or a negative errno. On becoming the
 * leader it records url (how clients reach this server; may be NULL) and now_ms as the
 * leader's, in the `leader` table (one row), in the same session.
 * PostgreSQL: a session-level advisory lock (pg_try_advisory_lock with a fixed key) held
 * on the write connection, so every write of the leader goes through the session that
 * holds the lock and the lock goes when that session does (a leader killed, or its
 * connection cut, loses it at once). Once leading, the write connection is never
 * reconnected: when it is lost, this and every later write fail with -ESTALE
 * ("this server is no longer the leader"), and store_leading returns false.
 * SQLite: an exclusive flock(2) on the database file (never on the fcntl locks SQLite
 * itself uses), held until store_close: 0 while another process holds it. */
int store_lead(Store *s, const char *url, int64_t now_ms, Buf *err);
/* Whether this Store leads. check: ask the database (PostgreSQL: that the write session
 * still holds the lock, one round trip; SQLite: true once led) rather than the last
 * known answer; a lost lock found here turns every later write into -ESTALE. */
bool store_leading(Store *s, bool check);
/* Who leads according to the `leader` table: the url (copied into url, at most n bytes
 * with its NUL) and since_ms (when given); 0, -ENOENT when none was ever recorded. */
int store_leader(Store *s, char *url, size_t n, int64_t *since_ms);
