/* pg.h: the PostgreSQL back end's insides, shared by its files (internal to src/store).
 *
 * Two sessions to one database, as the SQLite back end has two connections: the writer,
 * used only by the thread that runs the current group commit (pg.c), and the reader,
 * used under its own lock by the read functions (pg_read.c). Every statement is
 * prepared once per session (again after a reconnect) and run by name; parameters and
 * results travel as text, the token hash as binary. */
#pragma once

#include "store/backend.h"
#include "store/group.h"

#include <libpq-fe.h>
#include <pthread.h>
#include <stdbool.h>

/* Statements of the writer: the transaction around a batch, then the writes. */
enum {
    PW_BEGIN,
    PW_COMMIT,
    PW_SAVEPOINT,
    PW_RELEASE,
    PW_ROLLBACK_TO,
    PW_JOB_INSERT,
    PW_JOB_UPDATE,
    PW_EVENT_INSERT,
    PW_USAGE_INSERT,
    PW_TEAM_SET,
    PW_TEAM_BUDGET_SET,
    PW_TOKEN_INSERT,
    PW_TOKEN_REVOKE,
    PW_MIG_SET,
    PW_LEARNED_SET,
    PW_LEARNED_FORGET,
    PW_SPAN_OPEN,
    PW_SPAN_END,
    PW_SPANS_CLOSE_OPEN,
    PW_LEADER_SET,
    PW_COUNT
};

/* Statements of the reader. */
enum {
    PR_PING,
    PR_JOBS,
    PR_JOBS_LIVE,
    PR_JOB,
    PR_JOBS_PAGE,
    PR_EVENTS,
    PR_USAGE,
    PR_TEAMS,
    PR_TEAM_BUDGETS,
    PR_TOKEN_FIND,
    PR_TOKEN_COUNT,
    PR_TOKEN_LIST,
    PR_MIG,
    PR_LEARNED,
    PR_SPANS,
    PR_SERVER_ID,
    PR_LEADER,
    PR_COUNT
};

/* The advisory lock keys (one bigint each): a migration step holds MIGRATE for its
 * transaction, the leader holds LEAD for its session. "gpuorch" then a number. */
#define PG_LOCK_MIGRATE INT64_C(0x6770756f72636801)
#define PG_LOCK_LEAD    INT64_C(0x6770756f72636802)

typedef struct PgPending PgPending;

typedef struct PgStore {
    Store base;   /* first: a Store * is a PgStore * */
    char *url;    /* as given: it may hold a password, never shown */
    char *label;  /* the URL with its password masked, for messages */
    char *secret; /* the password as libpq reads it, to mask in libpq's messages; NULL */
    PGconn *wconn;
    PGconn *rconn;
    GroupCommit group;     /* the writers on wconn; its lock also guards `led` and `lost` */
    bool led;              /* store_lead succeeded: wconn holds the lock and is never replaced */
    bool lost;             /* led, and wconn's session is gone: writes fail -ESTALE */
    size_t queued;         /* statements sent in the current pipeline (pg_send counts) */
    bool wfatal, rfatal;   /* the server ended that session while it was idle */
    pthread_mutex_t rlock; /* rconn */
} PgStore;

static inline PgStore *pg_of(Store *s)
{
    return (PgStore *)s;
}

/* One caller's part of a batch. send queues its statements on the writer (pg_send) and
 * must not fail once it sent one (check the arguments before pg_commit); take gets the
 * result of each in turn (i from 0), errors included, and returns 0 or the part's own
 * negative errno with the reason in err (NULL on the batch's first try, whose errors are
 * found again when it is replayed); publish, when given, runs once the batch is
 * committed, to hand ids back. A part whose statement failed is rolled back alone (its
 * own savepoint) and the rest of the batch commits; a negative take on a statement that
 * succeeded (an answer such as -ENOENT) fails only the caller. */
typedef struct PgPart {
    int (*send)(PgStore *db, void *arg);
    int (*take)(PgStore *db, void *arg, size_t i, const PGresult *res, Buf *err);
    void (*publish)(void *arg);
} PgPart;

/* Durably apply one caller's write, group-committed with whatever other threads are
 * writing at the same time: the batch goes as one pipeline, BEGIN ... COMMIT. */
int pg_commit(PgStore *db, const PgPart *part, void *arg, Buf *err);

/* Queue prepared statement `which` on the writer with n text parameters (NULL is SQL
 * NULL); binary_first sends params[0] as binary of length len0. 0 or -EIO. */
int pg_send(PgStore *db, int which, int n, const char *const *params, bool binary_first, int len0);
/* The errno for a failed result, the server's message appended to err: 23505 (unique)
 * -EEXIST, another integrity violation (class 23) -EINVAL, a lost session -EIO, the
 * rest -EIO. 0 for a result that succeeded. */
int pg_result_fail(PgStore *db, PGconn *conn, const PGresult *res, Buf *err);
/* A take for statements whose result says nothing more than success. */
int pg_take_status(PgStore *db, void *arg, size_t i, const PGresult *res, Buf *err);
/* Whether a result or the session says the session is gone (reconnect). */
bool pg_lost(PGconn *conn, const PGresult *res);
/* Replace the writer's or the reader's session with a fresh one on db->url, set up and
 * its statements prepared (the writer's after the migrations it lacks). 0, -EIO, ... */
int pg_reconnect(PgStore *db, bool writer, Buf *err);
/* A server's or libpq's message (trailing newline dropped, lines joined, the password
 * masked should libpq have echoed it) appended to out. */
void pg_message(const PgStore *db, const char *msg, Buf *out);
/* Format helpers for text parameters: buffers of PG_NUM bytes. */
#define PG_NUM 32
/* The most parameters a statement takes. */
#define PG_MAX_PARAMS 24
const char *pg_i64(char buf[PG_NUM], int64_t v);
const char *pg_f64(char buf[PG_NUM], double v);
int64_t pg_get_i64(const PGresult *res, int row, int col);

/* The writes (pg_write.c) and the reads (pg_read.c), as StoreOps wants them. */
extern const char *const pg_write_sql[PW_COUNT];
extern const char *const pg_read_sql[PR_COUNT];
int pg_write_store(Store *s, StoreWrite *w, Buf *err);
int pg_write_team(Store *s, const char *name, double guaranteed_gpus, double burst_gpus,
                  double weight);
int pg_write_team_budget(Store *s, const char *name, double budget_gpu_hours);
int pg_write_token(Store *s, const uint8_t hash[STORE_TOKEN_HASH_LEN], const StoreToken *t,
                   int64_t *ret_id);
int pg_write_token_revoke(Store *s, int64_t id, int64_t now_ms);
int pg_write_mig(Store *s, const char *node, unsigned index, const char *layout_json);
int pg_write_span_open(Store *s, const StoreNodeSpan *spans, size_t n, int64_t *ret_ids);
int pg_write_spans_end(Store *s, const int64_t *ids, size_t n, int64_t end_ms, bool close);
int pg_write_spans_close_open(Store *s, size_t *ret_n);
int pg_read_ping(Store *s);
int pg_read_jobs(Store *s, int (*fn)(void *arg, StoreJob *j), void *arg);
int pg_read_jobs_live(Store *s, int64_t ended_since_ms, int (*fn)(void *arg, StoreJob *j),
                      void *arg);
int pg_read_job(Store *s, int64_t id, StoreJob *ret);
int pg_read_jobs_page(Store *s, const StoreJobQuery *q, int (*fn)(void *arg, StoreJob *j),
                      void *arg);
int pg_read_events(Store *s, int64_t job,
                   int (*fn)(void *arg, int64_t t_ms, const char *type, const char *detail),
                   void *arg);
int pg_read_usage(Store *s, int64_t from_ms, int64_t to_ms,
                  int (*fn)(void *arg, const StoreUsage *u), void *arg);
int pg_read_teams(Store *s,
                  int (*fn)(void *arg, const char *name, double guaranteed_gpus, double burst_gpus,
                            double weight),
                  void *arg);
int pg_read_team_budgets(Store *s, int (*fn)(void *arg, const char *name, double budget_gpu_hours),
                         void *arg);
int pg_read_token(Store *s, const uint8_t hash[STORE_TOKEN_HASH_LEN], StoreToken *ret);
int pg_read_token_count(Store *s, int64_t *ret);
int pg_read_token_list(Store *s, int (*fn)(void *arg, const StoreToken *t), void *arg);
int pg_read_server_id(Store *s, char ret[STORE_SERVER_ID_LEN + 1]);
int pg_read_mig(Store *s,
                int (*fn)(void *arg, const char *node, unsigned index, const char *layout_json),
                void *arg);
int pg_read_spans(Store *s, int64_t from_ms, int64_t to_ms,
                  int (*fn)(void *arg, const StoreNodeSpan *span), void *arg);
int pg_read_learned(Store *s,
                    int (*fn)(void *arg, const char *cls, uint64_t peak_mib, unsigned ooms),
                    void *arg);
int pg_read_leader(Store *s, char *url, size_t n, int64_t *since_ms);

/* The schema (pg_migrations.c): bring conn's database up to the newest version this
 * build knows, one transaction per step under an advisory lock; -ENOTSUP for a database
 * of a newer gpuorch. */
int pg_migrations_apply(PGconn *conn, const char *label, int *ret_version, Buf *err);
int pg_migrations_latest(void);
