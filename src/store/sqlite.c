/* sqlite.c: the SQLite back end's connections, its group commit and its leadership.
 *
 * Durability costs one fsync per commit (WAL, synchronous=FULL), so writes that arrive
 * together share one (group.h): the batch runs as one transaction (BEGIN IMMEDIATE ...
 * COMMIT) and each writer gets its own result. Each part runs under its own savepoint, so a part
 * that breaks a constraint is rolled back alone and the rest of the batch still commits. While one
 * batch syncs, the next one gathers, so the batch grows with the load and the fsync rate stays
 * bounded.
 *
 * Leadership is an exclusive flock(2) on the database file through a descriptor of its
 * own: SQLite locks with fcntl(2) byte ranges, which flock neither sees nor disturbs on
 * Linux, and the kernel drops the flock when the process dies. */
#include "store/sqlite.h"

#include "util/macro.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define BUSY_TIMEOUT_MS 10000

struct SqlitePending {
    GroupPart g; /* first: the queue's link */
    SqliteApply apply;
    SqlitePublish publish;
    void *arg;
    Buf *err;
    int r;
};

static SqlitePending *next_of(const SqlitePending *p)
{
    return (SqlitePending *)p->g.next;
}

int sqlite_fail(SqliteStore *db, sqlite3 *conn, int rc, Buf *err)
{
    int e;
    switch (rc) {
    case SQLITE_CONSTRAINT_UNIQUE:
    case SQLITE_CONSTRAINT_PRIMARYKEY:
        e = -EEXIST;
        break;
    case SQLITE_NOMEM:
        e = -ENOMEM;
        break;
    default:
        e = (rc & 0xff) == SQLITE_CONSTRAINT || rc == SQLITE_TOOBIG ? -EINVAL : -EIO;
    }
    const char *msg =
        conn && sqlite3_extended_errcode(conn) == rc ? sqlite3_errmsg(conn) : sqlite3_errstr(rc);
    return store_fail(err, e, db->path, "%s", msg);
}

int sqlite_run(SqliteStore *db, sqlite3 *conn, sqlite3_stmt *st, Buf *err)
{
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW)
        ;
    int r = rc == SQLITE_DONE ? 0 : sqlite_fail(db, conn, rc, err);
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return r;
}

int sqlite_prepare_all(SqliteStore *db, sqlite3 *conn, const char *const *sql, size_t n,
                       sqlite3_stmt **st, Buf *err)
{
    for (size_t i = 0; i < n; i++) {
        int rc = sqlite3_prepare_v3(conn, sql[i], -1, SQLITE_PREPARE_PERSISTENT, &st[i], NULL);
        if (rc != SQLITE_OK)
            return sqlite_fail(db, conn, rc, err);
    }
    return 0;
}

/* A COMMIT that failed may still have put the whole transaction in the log: its frames
 * written, only their fsync failed. The connection forgets them, but the next opening
 * recovers whatever the log holds, so after a crash a write its callers were told had
 * failed would come back (a refused submission running). The next write that succeeds
 * overwrites those frames; make one now (user_version, which nothing else uses), so that
 * a failed commit is not saved. When that fails too, the disk still fails and nobody can
 * know: the reason says so. */
static void seal_failed_commit(SqliteStore *db, Buf *why)
{
    sqlite3 *c = db->wdb;
    sqlite3_stmt *st = NULL;
    bool sealed = false;
    if (sqlite3_exec(c, "BEGIN IMMEDIATE", NULL, NULL, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(c, "PRAGMA user_version", -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW) {
        char sql[64];
        snprintf(sql, sizeof(sql), "PRAGMA user_version = %d",
                 (int)(((unsigned)sqlite3_column_int(st, 0) + 1) & INT32_MAX));
        sqlite3_finalize(st);
        st = NULL;
        sealed = sqlite3_exec(c, sql, NULL, NULL, NULL) == SQLITE_OK &&
                 sqlite3_exec(c, "COMMIT", NULL, NULL, NULL) == SQLITE_OK;
    }
    sqlite3_finalize(st);
    if (!sqlite3_get_autocommit(c))
        sqlite3_exec(c, "ROLLBACK", NULL, NULL, NULL);
    buf_puts(why, sealed ? " (not saved)"
                         : " (it may still be saved: the store could not write after it either)");
}

/* Run the batch as one transaction; every part's r says how it ended. */
static void run_batch(SqliteStore *db, SqlitePending *batch)
{
    Buf why = {0};
    int r = sqlite_run(db, db->wdb, db->ws[WS_BEGIN], &why);
    for (SqlitePending *p = batch; p && r == 0; p = next_of(p)) {
        if ((r = sqlite_run(db, db->wdb, db->ws[WS_SAVEPOINT], &why)) < 0)
            break;
        p->r = p->apply(db, p->arg, p->err);
        if (sqlite3_get_autocommit(db->wdb)) {
            /* SQLite rolled the whole transaction back (I/O error, disk full) */
            r = store_fail(&why, -EIO, db->path, "the transaction was rolled back: %s",
                           sqlite3_errmsg(db->wdb));
            break;
        }
        if (p->r < 0)
            r = sqlite_run(db, db->wdb, db->ws[WS_ROLLBACK_TO], &why);
        if (r == 0)
            r = sqlite_run(db, db->wdb, db->ws[WS_RELEASE], &why);
    }
    bool committing = r == 0;
    if (committing)
        r = sqlite_run(db, db->wdb, db->ws[WS_COMMIT], &why);
    if (r < 0 && !sqlite3_get_autocommit(db->wdb))
        sqlite3_exec(db->wdb, "ROLLBACK", NULL, NULL, NULL);
    if (r < 0 && committing)
        seal_failed_commit(db, &why);
    for (SqlitePending *p = batch; p; p = next_of(p)) {
        if (r == 0) {
            if (p->r == 0 && p->publish)
                p->publish(p->arg);
        } else if (p->r >= 0) {
            /* a part that failed keeps its own reason; the others share the batch's */
            p->r = r;
            if (p->err) {
                if (p->err->len)
                    buf_putc(p->err, '\n');
                buf_puts(p->err, buf_str(&why));
            }
        }
    }
    buf_free(&why);
}

static void run_group(void *ctx, GroupPart *batch)
{
    run_batch(ctx, (SqlitePending *)batch);
}

int sqlite_commit(SqliteStore *db, SqliteApply apply, SqlitePublish publish, void *arg, Buf *err)
{
    SqlitePending me = {.apply = apply, .publish = publish, .arg = arg, .err = err};
    group_commit(&db->group, &me.g, run_group, db);
    return me.r;
}

static int exec(SqliteStore *db, sqlite3 *conn, const char *sql, Buf *err)
{
    int rc = sqlite3_exec(conn, sql, NULL, NULL, NULL);
    return rc == SQLITE_OK ? 0 : sqlite_fail(db, conn, sqlite3_extended_errcode(conn), err);
}

static int wal_mode(void *arg, int n, char **vals, char **names)
{
    *(bool *)arg = n == 1 && vals[0] && strcmp(vals[0], "wal") == 0;
    return 0;
}

static int open_conn(SqliteStore *db, int flags, sqlite3 **ret, Buf *err)
{
    sqlite3 *conn = NULL;
    int rc = sqlite3_open_v2(db->path, &conn, flags | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK) {
        int r = sqlite_fail(db, conn, rc, err);
        sqlite3_close(conn);
        return r;
    }
    *ret = conn;
    sqlite3_extended_result_codes(conn, 1);
    sqlite3_busy_timeout(conn, BUSY_TIMEOUT_MS);
    return exec(db, conn, "PRAGMA foreign_keys = ON; PRAGMA synchronous = FULL", err);
}

/* The file's directory must exist: a typo in a path should not grow a tree. */
static int check_dir(const char *path, Buf *err)
{
    _cleanup_free_ char *copy = strdup(path);
    if (!copy)
        return -ENOMEM;
    const char *dir = dirname(copy);
    struct stat st;
    if (stat(dir, &st) < 0)
        return store_fail(err, -ENOENT, path, "directory %s does not exist", dir);
    if (!S_ISDIR(st.st_mode))
        return store_fail(err, -ENOENT, path, "%s is not a directory", dir);
    return 0;
}

static void sqlite_close(Store *s)
{
    SqliteStore *db = sqlite_of(s);
    for (size_t i = 0; i < WS_COUNT; i++)
        sqlite3_finalize(db->ws[i]);
    for (size_t i = 0; i < RS_COUNT; i++)
        sqlite3_finalize(db->rs[i]);
    sqlite3_close(db->rdb);
    sqlite3_close(db->wdb);
    group_destroy(&db->group);
    pthread_mutex_destroy(&db->rlock);
    if (db->lead_fd >= 0)
        close(db->lead_fd); /* drops the flock */
    pthread_mutex_destroy(&db->lead_lock);
    free(db->path);
    free(db);
}

static int sqlite_lead(Store *s, const char *url, int64_t now_ms, Buf *err)
{
    SqliteStore *db = sqlite_of(s);
    pthread_mutex_lock(&db->lead_lock);
    if (db->lead_fd >= 0) {
        pthread_mutex_unlock(&db->lead_lock);
        return 1;
    }
    int r = 0, fd = open(db->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        r = store_fail(err, -errno, db->path, "opening it to lock: %s", strerror(errno));
    else if (flock(fd, LOCK_EX | LOCK_NB) < 0)
        r = errno == EWOULDBLOCK
                ? 0
                : store_fail(err, -errno, db->path, "locking it: %s", strerror(errno));
    else if ((r = sqlite_write_leader(db, url, now_ms, err)) == 0)
        r = 1;
    if (r == 1)
        db->lead_fd = fd;
    else if (fd >= 0)
        close(fd);
    pthread_mutex_unlock(&db->lead_lock);
    return r;
}

static bool sqlite_leading(Store *s, bool check)
{
    SqliteStore *db = sqlite_of(s);
    pthread_mutex_lock(&db->lead_lock);
    bool leading = db->lead_fd >= 0;
    pthread_mutex_unlock(&db->lead_lock);
    return leading;
}

static const StoreOps sqlite_ops = {
    .close = sqlite_close,
    .ping = sqlite_read_ping,
    .write = sqlite_write_store,
    .jobs_load = sqlite_read_jobs,
    .jobs_load_live = sqlite_read_jobs_live,
    .job_get = sqlite_read_job,
    .jobs_page = sqlite_read_jobs_page,
    .events_for = sqlite_read_events,
    .usage_query = sqlite_read_usage,
    .span_open = sqlite_write_span_open,
    .spans_end = sqlite_write_spans_end,
    .spans_close_open = sqlite_write_spans_close_open,
    .spans_query = sqlite_read_spans,
    .team_set = sqlite_write_team,
    .teams_load = sqlite_read_teams,
    .team_budget_set = sqlite_write_team_budget,
    .team_budgets_load = sqlite_read_team_budgets,
    .token_insert = sqlite_write_token,
    .token_find = sqlite_read_token,
    .token_count = sqlite_read_token_count,
    .token_list = sqlite_read_token_list,
    .token_revoke = sqlite_write_token_revoke,
    .server_id = sqlite_read_server_id,
    .mig_set = sqlite_write_mig,
    .mig_load = sqlite_read_mig,
    .learned_load = sqlite_read_learned,
    .lead = sqlite_lead,
    .leading = sqlite_leading,
    .leader = sqlite_read_leader,
};

static int open_db(SqliteStore *db, Buf *err)
{
    struct stat st;
    bool created = stat(db->path, &st) < 0;
    int r = open_conn(db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, &db->wdb, err);
    if (r < 0)
        return r;
    /* it holds token hashes: the owner only (the -wal and -shm files follow it) */
    if (created)
        chmod(db->path, 0600);
    bool wal = false;
    if (sqlite3_exec(db->wdb, "PRAGMA journal_mode = WAL", wal_mode, &wal, NULL) != SQLITE_OK)
        return sqlite_fail(db, db->wdb, sqlite3_extended_errcode(db->wdb), err);
    if (!wal)
        return store_fail(err, -EIO, db->path,
                          "could not switch the database to WAL mode (is the file system "
                          "local?)");
    if ((r = migrations_apply(db->wdb, db->path, &db->base.schema_version, err)) < 0 ||
        (r = open_conn(db, SQLITE_OPEN_READWRITE, &db->rdb, err)) < 0 ||
        (r = exec(db, db->rdb, "PRAGMA query_only = ON", err)) < 0 ||
        (r = sqlite_prepare_all(db, db->wdb, sqlite_write_sql, WS_COUNT, db->ws, err)) < 0 ||
        (r = sqlite_prepare_all(db, db->rdb, sqlite_read_sql, RS_COUNT, db->rs, err)) < 0)
        return r;
    return 0;
}

int sqlite_open(const char *path, Store **ret, Buf *err)
{
    int r = check_dir(path, err);
    if (r < 0)
        return r;
    SqliteStore *db = calloc(1, sizeof(*db));
    if (!db)
        return -ENOMEM;
    db->base.ops = &sqlite_ops;
    group_init(&db->group);
    pthread_mutex_init(&db->rlock, NULL);
    pthread_mutex_init(&db->lead_lock, NULL);
    db->lead_fd = -1;
    if (!(db->path = strdup(path))) {
        sqlite_close(&db->base);
        return -ENOMEM;
    }
    if ((r = open_db(db, err)) < 0) {
        sqlite_close(&db->base);
        return r;
    }
    *ret = &db->base;
    return 0;
}
