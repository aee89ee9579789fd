/* sqlite.h: the SQLite back end's insides, shared by its files (internal to src/store).
 *
 * Two connections to one WAL database: the writer, used only by the thread that leads
 * the current group commit (sqlite.c), and the reader, used under its own lock by the
 * read functions (sqlite_read.c); WAL lets the reader see the last commit while the next
 * one is being written. Every statement is prepared once at open and reused. */
#pragma once

#include "store/backend.h"
#include "store/group.h"

#include <pthread.h>
#include <sqlite3.h>
#include <stdbool.h>

/* Statements of the writer: the transaction around a batch, then the writes. */
enum {
    WS_BEGIN,
    WS_COMMIT,
    WS_SAVEPOINT,
    WS_RELEASE,
    WS_ROLLBACK_TO,
    WS_JOB_INSERT,
    WS_JOB_UPDATE,
    WS_EVENT_INSERT,
    WS_USAGE_INSERT,
    WS_TEAM_SET,
    WS_TEAM_BUDGET_SET,
    WS_TOKEN_INSERT,
    WS_TOKEN_REVOKE,
    WS_TOKEN_EXISTS,
    WS_MIG_SET,
    WS_LEARNED_SET,
    WS_LEARNED_FORGET,
    WS_SPAN_OPEN,
    WS_SPAN_END,
    WS_SPANS_CLOSE_OPEN,
    WS_LEADER_SET,
    WS_COUNT
};

/* Statements of the reader. */
enum {
    RS_PING,
    RS_JOBS,
    RS_JOBS_LIVE,
    RS_JOB,
    RS_JOBS_PAGE,
    RS_EVENTS,
    RS_USAGE,
    RS_TEAMS,
    RS_TEAM_BUDGETS,
    RS_TOKEN_FIND,
    RS_TOKEN_COUNT,
    RS_TOKEN_LIST,
    RS_MIG,
    RS_LEARNED,
    RS_SPANS,
    RS_SERVER_ID,
    RS_LEADER,
    RS_COUNT
};

typedef struct SqlitePending SqlitePending;

typedef struct SqliteStore {
    Store base; /* first: a Store * is a SqliteStore * */
    char *path;
    sqlite3 *wdb;
    sqlite3 *rdb;
    sqlite3_stmt *ws[WS_COUNT];
    sqlite3_stmt *rs[RS_COUNT];
    GroupCommit group;         /* the writers on wdb */
    pthread_mutex_t rlock;     /* rdb and its statements */
    pthread_mutex_t lead_lock; /* lead_fd */
    int lead_fd;               /* the database file, flock'ed while this Store leads; -1 */
} SqliteStore;

static inline SqliteStore *sqlite_of(Store *s)
{
    return (SqliteStore *)s;
}

/* One caller's part of a batch: apply runs inside the batch's transaction (under its
 * own savepoint) and returns 0 or a negative errno with the reason in err; publish,
 * when given, runs once the batch is committed, to hand ids back. */
typedef int (*SqliteApply)(SqliteStore *db, void *arg, Buf *err);
typedef void (*SqlitePublish)(void *arg);

/* Durably apply one caller's write, group-committed with whatever other threads are
 * writing at the same time. Returns apply's result, or the batch's failure. */
int sqlite_commit(SqliteStore *db, SqliteApply apply, SqlitePublish publish, void *arg, Buf *err);

/* Step st to its end and reset it (bindings cleared). 0, or the error mapped to an errno
 * with the message appended to err: -EEXIST a unique key taken, -EINVAL another
 * constraint, -ENOMEM, -EIO. */
int sqlite_run(SqliteStore *db, sqlite3 *conn, sqlite3_stmt *st, Buf *err);
/* The errno for a SQLite result code, and its message appended to err. */
int sqlite_fail(SqliteStore *db, sqlite3 *conn, int rc, Buf *err);
/* Prepare n statements of sql[] on conn into st[]. */
int sqlite_prepare_all(SqliteStore *db, sqlite3 *conn, const char *const *sql, size_t n,
                       sqlite3_stmt **st, Buf *err);

/* The writes (sqlite_write.c) and the reads (sqlite_read.c), as StoreOps wants them. */
extern const char *const sqlite_write_sql[WS_COUNT];
extern const char *const sqlite_read_sql[RS_COUNT];
int sqlite_write_store(Store *s, StoreWrite *w, Buf *err);
int sqlite_write_team(Store *s, const char *name, double guaranteed_gpus, double burst_gpus,
                      double weight);
int sqlite_write_team_budget(Store *s, const char *name, double budget_gpu_hours);
int sqlite_write_token(Store *s, const uint8_t hash[STORE_TOKEN_HASH_LEN], const StoreToken *t,
                       int64_t *ret_id);
int sqlite_write_token_revoke(Store *s, int64_t id, int64_t now_ms);
int sqlite_write_mig(Store *s, const char *node, unsigned index, const char *layout_json);
int sqlite_write_span_open(Store *s, const StoreNodeSpan *spans, size_t n, int64_t *ret_ids);
int sqlite_write_spans_end(Store *s, const int64_t *ids, size_t n, int64_t end_ms, bool close);
int sqlite_write_spans_close_open(Store *s, size_t *ret_n);
int sqlite_write_leader(SqliteStore *db, const char *url, int64_t now_ms, Buf *err);
int sqlite_read_leader(Store *s, char *url, size_t n, int64_t *since_ms);
int sqlite_read_ping(Store *s);
int sqlite_read_jobs(Store *s, int (*fn)(void *arg, StoreJob *j), void *arg);
int sqlite_read_jobs_live(Store *s, int64_t ended_since_ms, int (*fn)(void *arg, StoreJob *j),
                          void *arg);
int sqlite_read_job(Store *s, int64_t id, StoreJob *ret);
int sqlite_read_jobs_page(Store *s, const StoreJobQuery *q, int (*fn)(void *arg, StoreJob *j),
                          void *arg);
int sqlite_read_events(Store *s, int64_t job,
                       int (*fn)(void *arg, int64_t t_ms, const char *type, const char *detail),
                       void *arg);
int sqlite_read_usage(Store *s, int64_t from_ms, int64_t to_ms,
                      int (*fn)(void *arg, const StoreUsage *u), void *arg);
int sqlite_read_teams(Store *s,
                      int (*fn)(void *arg, const char *name, double guaranteed_gpus,
                                double burst_gpus, double weight),
                      void *arg);
int sqlite_read_team_budgets(Store *s,
                             int (*fn)(void *arg, const char *name, double budget_gpu_hours),
                             void *arg);
int sqlite_read_token(Store *s, const uint8_t hash[STORE_TOKEN_HASH_LEN], StoreToken *ret);
int sqlite_read_token_count(Store *s, int64_t *ret);
int sqlite_read_token_list(Store *s, int (*fn)(void *arg, const StoreToken *t), void *arg);
int sqlite_read_server_id(Store *s, char ret[STORE_SERVER_ID_LEN + 1]);
int sqlite_read_mig(Store *s,
                    int (*fn)(void *arg, const char *node, unsigned index, const char *layout_json),
                    void *arg);
int sqlite_read_spans(Store *s, int64_t from_ms, int64_t to_ms,
                      int (*fn)(void *arg, const StoreNodeSpan *span), void *arg);
int sqlite_read_learned(Store *s,
                        int (*fn)(void *arg, const char *cls, uint64_t peak_mib, unsigned ooms),
                        void *arg);

/* The schema (migrations.c): bring conn's database up to the newest version this build
 * knows, one transaction per step; -ENOTSUP for a database of a newer gpuorch. */
int migrations_apply(sqlite3 *conn, const char *label, int *ret_version, Buf *err);
int migrations_latest(void);
