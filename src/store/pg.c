/* pg.c: the PostgreSQL back end's sessions, its group commit, its errors and its
 * leadership.
 *
 * Durability costs one WAL flush per commit (synchronous_commit=on, forced on the
 * writing session), so writes that arrive together share one (group.h): a batch goes as
 * one libpq pipeline, BEGIN, every part's statements, COMMIT, one Sync: one round trip
 * and one flush for the lot. When a part breaks a
 * constraint the whole transaction is aborted; the batch is then replayed with a
 * savepoint per part (a round trip each), so only that part fails, as SQLite's batch
 * with savepoints does.
 *
 * A lost session is found when it is next used (or by the batch that loses it). The
 * reader reconnects and retries its read once. The writer reconnects before the next
 * batch, and a batch whose BEGIN the server refused (the session was already gone, so
 * nothing of it ran) is sent again on the new session; any other batch that loses the
 * session fails, as its commit may or may not have happened. A Store that leads never
 * reconnects its writer: the advisory lock belongs to that session, so once it is gone
 * every write fails -ESTALE and another server may lead. */
#include "store/pg.h"

#include "util/macro.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct PgPending {
    GroupPart g; /* first: the queue's link */
    const PgPart *part;
    void *arg;
    Buf *err;
    size_t err_len; /* err's length on entry: a replay drops what the first try added */
    size_t n;       /* statements sent in this try */
    int r;
    bool sql_failed; /* one of its statements failed: the transaction is aborted */
};

static PgPending *next_of(const PgPending *p)
{
    return (PgPending *)p->g.next;
}

const char *pg_i64(char buf[PG_NUM], int64_t v)
{
    snprintf(buf, PG_NUM, "%" PRId64, v);
    return buf;
}

const char *pg_f64(char buf[PG_NUM], double v)
{
    snprintf(buf, PG_NUM, "%.17g", v);
    return buf;
}

int64_t pg_get_i64(const PGresult *res, int row, int col)
{
    return strtoll(PQgetvalue(res, row, col), NULL, 10);
}

void pg_message(const PgStore *db, const char *msg, Buf *out)
{
    size_t len = strlen(msg);
    while (len && (msg[len - 1] == '\n' || msg[len - 1] == ' '))
        len--;
    size_t slen = db->secret ? strlen(db->secret) : 0;
    for (size_t i = 0; i < len;) {
        if (slen && i + slen <= len && memcmp(msg + i, db->secret, slen) == 0) {
            buf_puts(out, "***");
            i += slen;
        } else if (msg[i] == '\n') {
            buf_puts(out, "; ");
            i++;
            while (i < len && msg[i] == ' ')
                i++;
        } else {
            buf_putc(out, msg[i++]);
        }
    }
}

bool pg_lost(PGconn *conn, const PGresult *res)
{
    if (!conn || PQstatus(conn) == CONNECTION_BAD)
        return true;
    const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    /* 08: connection exception; 57P01-57P03: the server shut the session down */
    return state && (strncmp(state, "08", 2) == 0 || strncmp(state, "57P0", 4) == 0);
}

int pg_result_fail(PgStore *db, PGconn *conn, const PGresult *res, Buf *err)
{
    ExecStatusType st = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
    if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK)
        return 0;
    const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    int e = -EIO;
    if (state && strcmp(state, "23505") == 0)
        e = -EEXIST;
    else if (state && strncmp(state, "23", 2) == 0)
        e = -EINVAL;
    else if (state && strcmp(state, "53200") == 0)
        e = -ENOMEM;
    if (err) {
        Buf msg = {0};
        const char *text = res ? PQresultErrorMessage(res) : "";
        pg_message(db, *text ? text : (conn ? PQerrorMessage(conn) : "no session"), &msg);
        store_fail(err, e, db->label, "%s", buf_str(&msg));
        buf_free(&msg);
    }
    return e;
}

int pg_take_status(PgStore *db, void *arg, size_t i, const PGresult *res, Buf *err)
{
    return pg_result_fail(db, db->wconn, res, err);
}

int pg_send(PgStore *db, int which, int n, const char *const *params, bool binary_first, int len0)
{
    char name[16];
    snprintf(name, sizeof(name), "w%d", which);
    /* libpq reads a format for every parameter once it has formats */
    int lengths[PG_MAX_PARAMS] = {len0}, formats[PG_MAX_PARAMS] = {1};
    if (n > PG_MAX_PARAMS)
        return -EINVAL;
    int ok = PQsendQueryPrepared(db->wconn, name, n, params, binary_first ? lengths : NULL,
                                 binary_first ? formats : NULL, 0);
    db->queued++;
    return ok ? 0 : -EIO;
}

/* Send what libpq holds for the server, reading what the server answers meanwhile so
 * that neither side waits on a full socket while the other does. */
static int flush_all(PGconn *c)
{
    for (;;) {
        int f = PQflush(c);
        if (f == 0)
            return 0;
        if (f < 0)
            return -EIO;
        struct pollfd p = {.fd = PQsocket(c), .events = POLLIN | POLLOUT};
        if (poll(&p, 1, -1) < 0 && errno != EINTR)
            return -EIO;
        if ((p.revents & POLLIN) && !PQconsumeInput(c))
            return -EIO;
    }
}

/* The next statement's result in the pipeline (its terminating NULL consumed), or the
 * Sync's; NULL when the session is gone. */
static PGresult *next_result(PGconn *c)
{
    PGresult *res = PQgetResult(c);
    if (res && PQresultStatus(res) != PGRES_PIPELINE_SYNC)
        PQclear(PQgetResult(c));
    return res;
}

/* How one try of a batch ended. */
typedef struct Try {
    bool nothing_ran; /* the server refused BEGIN or nothing reached it: safe to resend */
    bool gone;        /* the session was lost */
    bool refused;     /* the server aborted the transaction itself (known not saved) */
    bool committed;   /* COMMIT's answer came back, successful */
    bool sql_failed;  /* a part's statement failed: replay with savepoints */
    Buf why;          /* the batch's own failure */
} Try;

/* COMMIT of a failed transaction answers "ROLLBACK", successfully. */
static bool is_commit(const PGresult *res)
{
    return PQresultStatus(res) == PGRES_COMMAND_OK &&
           strcmp(PQcmdStatus((PGresult *)res), "COMMIT") == 0;
}

/* Read the result of one statement of the batch's own (BEGIN, SAVEPOINT, ...): false
 * when it failed, with the reason in t. */
static bool take_own(PgStore *db, Try *t)
{
    PGresult *res = next_result(db->wconn);
    bool ok = res && (PQresultStatus(res) == PGRES_COMMAND_OK);
    if (!ok) {
        if (!res || pg_lost(db->wconn, res))
            t->gone = true;
        if (res && PQresultStatus(res) == PGRES_FATAL_ERROR &&
            PQresultErrorField(res, PG_DIAG_SQLSTATE))
            t->refused = true;
        if (!t->why.len)
            pg_result_fail(db, db->wconn, res, &t->why);
    }
    PQclear(res);
    return ok;
}

static bool take_sync(PgStore *db, Try *t)
{
    PGresult *res = next_result(db->wconn);
    bool ok = res && PQresultStatus(res) == PGRES_PIPELINE_SYNC;
    if (!ok) {
        t->gone = true;
        if (!t->why.len)
            pg_result_fail(db, db->wconn, res, &t->why);
    }
    PQclear(res);
    return ok;
}

/* Read p's results: each goes to its take, in order. */
static void take_part(PgStore *db, PgPending *p, Try *t)
{
    for (size_t i = 0; i < p->n && !t->gone; i++) {
        PGresult *res = next_result(db->wconn);
        ExecStatusType st = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
        if (!res || pg_lost(db->wconn, res)) {
            t->gone = true;
            if (res && PQresultErrorField(res, PG_DIAG_SQLSTATE))
                t->refused = true;
            if (!t->why.len)
                pg_result_fail(db, db->wconn, res, &t->why);
        } else if (st != PGRES_PIPELINE_ABORTED) {
            int r = p->part->take(db, p->arg, i, res, p->err);
            if (st == PGRES_FATAL_ERROR) {
                p->sql_failed = t->sql_failed = true;
                if (r >= 0) /* a take must not let a failed statement pass */
                    r = pg_result_fail(db, db->wconn, res, p->err);
            }
            if (r < 0 && p->r == 0)
                p->r = r;
        }
        PQclear(res);
    }
}

static bool send_part(PgStore *db, PgPending *p)
{
    size_t before = db->queued;
    int r = p->part->send(db, p->arg);
    p->n = db->queued - before;
    return r == 0;
}

static bool begin_pipeline(PgStore *db)
{
    if (!PQenterPipelineMode(db->wconn))
        return false;
    PQsetnonblocking(db->wconn, 1);
    db->queued = 0;
    return true;
}

static void end_pipeline(PgStore *db, Try *t)
{
    if (t->gone)
        return;
    PQsetnonblocking(db->wconn, 0);
    if (!PQexitPipelineMode(db->wconn)) {
        t->gone = true; /* results left unread: the session is of no further use */
        if (!t->why.len)
            store_fail(&t->why, -EIO, db->label, "the pipeline did not end: %s",
                       PQerrorMessage(db->wconn));
    }
}

static void reset_parts(PgPending *batch)
{
    for (PgPending *p = batch; p; p = next_of(p)) {
        p->r = 0;
        p->sql_failed = false;
        if (p->err && p->err->len > p->err_len) {
            p->err->len = p->err_len;
            p->err->data[p->err_len] = '\0';
        }
    }
}

/* The first try: the whole batch in one pipeline, one transaction. */
static void try_fast(PgStore *db, PgPending *batch, Try *t)
{
    if (!begin_pipeline(db)) {
        t->nothing_ran = t->gone = true;
        store_fail(&t->why, -EIO, db->label, "%s", PQerrorMessage(db->wconn));
        return;
    }
    bool sent = pg_send(db, PW_BEGIN, 0, NULL, false, 0) == 0;
    if (!sent)
        t->nothing_ran = true;
    for (PgPending *p = batch; p && sent; p = next_of(p))
        sent = send_part(db, p);
    sent = sent && pg_send(db, PW_COMMIT, 0, NULL, false, 0) == 0 &&
           PQpipelineSync(db->wconn) == 1 && flush_all(db->wconn) == 0;
    if (!sent) {
        t->gone = true;
        store_fail(&t->why, -EIO, db->label, "sending the batch: %s", PQerrorMessage(db->wconn));
        return;
    }
    if (!take_own(db, t) && !t->gone)
        t->nothing_ran = true; /* a BEGIN refused: nothing after it ran */
    else if (t->gone && t->refused && !t->committed)
        t->nothing_ran = true; /* the session was shut before our BEGIN */
    for (PgPending *p = batch; p && !t->gone; p = next_of(p))
        take_part(db, p, t);
    if (!t->gone) {
        bool aborted = t->sql_failed || t->nothing_ran;
        PGresult *res = next_result(db->wconn);
        ExecStatusType st = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
        if (!res || pg_lost(db->wconn, res)) {
            t->gone = true;
        } else if (st == PGRES_COMMAND_OK && !aborted && is_commit(res)) {
            t->committed = true;
        } else if (st == PGRES_FATAL_ERROR) {
            t->refused = true; /* a COMMIT the server refused rolled back */
            pg_result_fail(db, db->wconn, res, &t->why);
        }
        if (t->gone && !t->why.len)
            pg_result_fail(db, db->wconn, res, &t->why);
        PQclear(res);
    }
    if (!t->gone)
        take_sync(db, t);
    end_pipeline(db, t);
}

/* The replay after a part failed: one transaction, each part under its own savepoint,
 * one round trip per part (a part's failure aborts the rest of its pipeline segment). */
static void try_savepoints(PgStore *db, PgPending *batch, Try *t)
{
    if (PQtransactionStatus(db->wconn) != PQTRANS_IDLE) {
        PGresult *res = PQexec(db->wconn, "ROLLBACK");
        PQclear(res);
    }
    reset_parts(batch);
    t->sql_failed = false;
    if (!begin_pipeline(db)) {
        t->gone = true;
        store_fail(&t->why, -EIO, db->label, "%s", PQerrorMessage(db->wconn));
        return;
    }
    bool ok = pg_send(db, PW_BEGIN, 0, NULL, false, 0) == 0;
    if (ok) {
        ok = PQpipelineSync(db->wconn) == 1 && flush_all(db->wconn) == 0;
        ok = ok && take_own(db, t) && take_sync(db, t);
    }
    for (PgPending *p = batch; p && ok; p = next_of(p)) {
        ok = pg_send(db, PW_SAVEPOINT, 0, NULL, false, 0) == 0 && send_part(db, p) &&
             pg_send(db, PW_RELEASE, 0, NULL, false, 0) == 0 && PQpipelineSync(db->wconn) == 1 &&
             flush_all(db->wconn) == 0;
        ok = ok && take_own(db, t);
        if (ok)
            take_part(db, p, t);
        if (ok && !t->gone) {
            /* RELEASE: aborted when the part failed */
            PGresult *res = next_result(db->wconn);
            if (!res || pg_lost(db->wconn, res))
                t->gone = true;
            PQclear(res);
        }
        ok = ok && !t->gone && take_sync(db, t);
        if (ok && p->sql_failed)
            ok = pg_send(db, PW_ROLLBACK_TO, 0, NULL, false, 0) == 0 &&
                 pg_send(db, PW_RELEASE, 0, NULL, false, 0) == 0 &&
                 PQpipelineSync(db->wconn) == 1 && flush_all(db->wconn) == 0 && take_own(db, t) &&
                 take_own(db, t) && take_sync(db, t);
    }
    t->sql_failed = false;
    if (ok) {
        ok = pg_send(db, PW_COMMIT, 0, NULL, false, 0) == 0 && PQpipelineSync(db->wconn) == 1 &&
             flush_all(db->wconn) == 0;
        PGresult *res = ok ? next_result(db->wconn) : NULL;
        if (res && is_commit(res)) {
            t->committed = true;
        } else if (ok) {
            if (!res || pg_lost(db->wconn, res))
                t->gone = true;
            else
                t->refused = true;
            if (!t->why.len && pg_result_fail(db, db->wconn, res, &t->why) == 0)
                store_fail(&t->why, -EIO, db->label, "the commit was rolled back");
        }
        PQclear(res);
        if (ok && !t->gone)
            take_sync(db, t);
    }
    if (!ok && !t->gone && !t->why.len)
        store_fail(&t->why, -EIO, db->label, "%s", PQerrorMessage(db->wconn));
    if (!ok && !t->gone)
        t->refused = true; /* the server answered, refusing: the transaction is gone */
    end_pipeline(db, t);
    if (!t->committed && !t->gone && PQtransactionStatus(db->wconn) != PQTRANS_IDLE)
        PQclear(PQexec(db->wconn, "ROLLBACK"));
}

static void set_lost(PgStore *db)
{
    pthread_mutex_lock(&db->group.lock);
    db->lost = true;
    pthread_mutex_unlock(&db->group.lock);
}

static int stale(PgStore *db, Buf *err)
{
    return store_fail(err, -ESTALE, db->label,
                      "this server is no longer the leader (its database session was lost)");
}

/* Make sure the writer has a session, reading what the server said while it was idle
 * (a session shut down while idle is found here). */
static int writer_ready(PgStore *db, Buf *err)
{
    if (db->led && db->lost)
        return stale(db, err);
    /* PQisBusy parses what came: a FATAL while idle goes to on_notice */
    if (db->wconn && PQconsumeInput(db->wconn) && !PQisBusy(db->wconn) && !db->wfatal &&
        PQstatus(db->wconn) == CONNECTION_OK)
        return 0;
    if (db->led) {
        set_lost(db);
        return stale(db, err);
    }
    return pg_reconnect(db, true, err);
}

/* Run the batch; every part's r says how it ended. */
static void run_batch(PgStore *db, PgPending *batch)
{
    Try t = {0};
    int r = writer_ready(db, &t.why);
    for (int attempt = 0; r == 0; attempt++) {
        buf_reset(&t.why);
        t = (Try){.why = t.why};
        reset_parts(batch);
        try_fast(db, batch, &t);
        if (!t.gone && t.sql_failed && !t.committed)
            try_savepoints(db, batch, &t);
        if (t.committed)
            break;
        if (t.gone && t.nothing_ran && !db->led && attempt == 0) {
            /* the session was gone before this batch: nothing of it ran; again, anew */
            buf_reset(&t.why);
            r = pg_reconnect(db, true, &t.why);
            continue;
        }
        if (t.gone && db->led)
            set_lost(db);
        r = db->led && t.gone ? -ESTALE : -EIO;
        if (r == -ESTALE) {
            Buf why = {0};
            stale(db, &why);
            buf_puts(&why, ": ");
            buf_puts(&why, buf_str(&t.why));
            buf_free(&t.why);
            t.why = why;
        }
        if (!t.why.len)
            store_fail(&t.why, -EIO, db->label, "the transaction was not committed");
        buf_puts(&t.why, t.gone && !t.refused && !t.nothing_ran
                             ? " (it may still be saved: the session was lost before the "
                               "commit's answer)"
                             : " (not saved)");
        break;
    }
    if (t.gone && db->wconn && !db->led) {
        PQfinish(db->wconn); /* the next batch connects anew */
        db->wconn = NULL;
    }
    for (PgPending *p = batch; p; p = next_of(p)) {
        if (r == 0) {
            if (p->r == 0 && p->part->publish)
                p->part->publish(p->arg);
        } else if (p->r >= 0 || t.gone) {
            /* a part that failed keeps its own reason; the others share the batch's */
            p->r = r;
            if (p->err) {
                if (p->err->len)
                    buf_putc(p->err, '\n');
                buf_puts(p->err, buf_str(&t.why));
            }
        }
    }
    buf_free(&t.why);
}

static void run_group(void *ctx, GroupPart *batch)
{
    run_batch(ctx, (PgPending *)batch);
}

int pg_commit(PgStore *db, const PgPart *part, void *arg, Buf *err)
{
    PgPending me = {.part = part, .arg = arg, .err = err, .err_len = err ? err->len : 0};
    group_commit(&db->group, &me.g, run_group, db);
    return me.r;
}

/* A statement on the writer outside a batch, with text parameters. */
static PGresult *writer_exec(PgStore *db, const char *sql, int n, const char *const *params)
{
    return PQexecParams(db->wconn, sql, n, NULL, params, NULL, NULL, 0);
}

static int pg_lead(Store *s, const char *url, int64_t now_ms, Buf *err)
{
    PgStore *db = pg_of(s);
    group_take(&db->group);
    int r = db->led ? (db->lost ? stale(db, err) : 1) : writer_ready(db, err);
    if (r != 0) {
        group_give(&db->group);
        return r;
    }
    char key[PG_NUM], now[PG_NUM];
    const char *p[] = {pg_i64(key, PG_LOCK_LEAD)};
    PGresult *res = writer_exec(db, "SELECT pg_try_advisory_lock($1::bigint)", 1, p);
    if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
        r = pg_result_fail(db, db->wconn, res, err);
        if (r == 0)
            r = store_fail(err, -EIO, db->label, "pg_try_advisory_lock gave no answer");
    } else if (strcmp(PQgetvalue(res, 0, 0), "t") == 0) {
        r = 1;
    }
    PQclear(res);
    if (r == 1) {
        /* recorded by the session that holds the lock: a leader that lost it meanwhile
         * cannot overwrite its successor's row (it would have no session to do it with) */
        const char *q[] = {url, pg_i64(now, now_ms)};
        char name[16];
        snprintf(name, sizeof(name), "w%d", PW_LEADER_SET);
        res = PQexecPrepared(db->wconn, name, 2, q, NULL, NULL, 0);
        int w = pg_result_fail(db, db->wconn, res, err);
        PQclear(res);
        if (w < 0) {
            r = w;
            PQclear(writer_exec(db, "SELECT pg_advisory_unlock($1::bigint)", 1, p));
        }
    }
    if (r == 1) {
        pthread_mutex_lock(&db->group.lock);
        db->led = true;
        pthread_mutex_unlock(&db->group.lock);
    }
    group_give(&db->group);
    return r;
}

static bool pg_leading(Store *s, bool check)
{
    PgStore *db = pg_of(s);
    pthread_mutex_lock(&db->group.lock);
    bool leading = db->led && !db->lost;
    pthread_mutex_unlock(&db->group.lock);
    if (!leading || !check)
        return leading;
    group_take(&db->group);
    leading = writer_ready(db, NULL) == 0;
    if (leading) {
        char key[PG_NUM];
        const char *p[] = {pg_i64(key, PG_LOCK_LEAD)};
        /* a bigint key is classid (high half), objid (low half), objsubid 1 */
        PGresult *res = writer_exec(db,
                                    "SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND "
                                    "pid = pg_backend_pid() AND granted AND objsubid = 1 AND "
                                    "classid::bigint = ($1::bigint >> 32) AND "
                                    "objid::bigint = ($1::bigint & 4294967295)",
                                    1, p);
        leading = PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1;
        PQclear(res);
    }
    if (!leading)
        set_lost(db);
    group_give(&db->group);
    return leading;
}

static int session_fail(PgStore *db, PGconn *c, const char *what, Buf *err)
{
    Buf msg = {0};
    pg_message(db, c ? PQerrorMessage(c) : "out of memory", &msg);
    int r = store_fail(err, c ? -EIO : -ENOMEM, db->label, "%s: %s", what, buf_str(&msg));
    buf_free(&msg);
    return r;
}

static int prepare_all(PgStore *db, PGconn *c, char prefix, const char *const *sql, size_t n,
                       Buf *err)
{
    for (size_t i = 0; i < n; i++) {
        char name[32];
        snprintf(name, sizeof(name), "%c%zu", prefix, i);
        PGresult *res = PQprepare(c, name, sql[i], 0, NULL);
        int r = PQresultStatus(res) == PGRES_COMMAND_OK ? 0 : -EIO;
        if (r < 0) {
            Buf msg = {0};
            pg_message(db, PQresultErrorMessage(res), &msg);
            store_fail(err, r, db->label, "preparing %s: %s", sql[i], buf_str(&msg));
            buf_free(&msg);
        }
        PQclear(res);
        if (r < 0)
            return r;
    }
    return 0;
}

/* What the server says outside an answer. Library code does not log, so its notices
 * ("already exists, skipping") go; but a FATAL that arrives while the session is idle
 * (pg_terminate_backend, a server shutting down) comes here too, and says the session
 * is gone before the next statement finds out the hard way. */
static void on_notice(void *arg, const PGresult *res)
{
    const char *severity = PQresultErrorField(res, PG_DIAG_SEVERITY_NONLOCALIZED);
    if (severity && (strcmp(severity, "FATAL") == 0 || strcmp(severity, "PANIC") == 0))
        *(bool *)arg = true;
}

int pg_reconnect(PgStore *db, bool writer, Buf *err)
{
    PGconn **slot = writer ? &db->wconn : &db->rconn;
    PQfinish(*slot);
    *slot = NULL;
    /* the URL first (expanded), then a name for the session that the URL may override */
    const char *keys[] = {"dbname", "fallback_application_name", NULL};
    const char *vals[] = {db->url, writer ? "gpuorch-writer" : "gpuorch-reader", NULL};
    PGconn *c = PQconnectdbParams(keys, vals, 1);
    if (!c || PQstatus(c) != CONNECTION_OK) {
        int r = session_fail(db, c, "cannot connect", err);
        PQfinish(c);
        return r;
    }
    bool *fatal = writer ? &db->wfatal : &db->rfatal;
    *fatal = false;
    PQsetNoticeReceiver(c, on_notice, fatal);
    /* durable replies whatever the server's or the database's default; the reader
     * refuses writes as SQLite's query_only reader does */
    PGresult *res = PQexec(c, writer ? "SET synchronous_commit = on"
                                     : "SET default_transaction_read_only = on");
    int r = PQresultStatus(res) == PGRES_COMMAND_OK ? 0 : session_fail(db, c, "setting up", err);
    PQclear(res);
    int version = 0;
    if (r == 0 && writer)
        r = pg_migrations_apply(c, db->label, &version, err);
    if (r == 0)
        r = writer ? prepare_all(db, c, 'w', pg_write_sql, PW_COUNT, err)
                   : prepare_all(db, c, 'r', pg_read_sql, PR_COUNT, err);
    if (r < 0) {
        PQfinish(c);
        return r;
    }
    if (writer)
        db->base.schema_version = version;
    *slot = c;
    return 0;
}

static void pg_close(Store *s)
{
    PgStore *db = pg_of(s);
    /* a leader's lock goes now, not when the server notices the session ended */
    if (db->led && !db->lost && db->wconn && PQstatus(db->wconn) == CONNECTION_OK)
        PQclear(PQexec(db->wconn, "SELECT pg_advisory_unlock_all()"));
    PQfinish(db->wconn);
    PQfinish(db->rconn);
    group_destroy(&db->group);
    pthread_mutex_destroy(&db->rlock);
    free(db->url);
    free(db->label);
    free(db->secret);
    free(db);
}

static const StoreOps pg_ops = {
    .close = pg_close,
    .ping = pg_read_ping,
    .write = pg_write_store,
    .jobs_load = pg_read_jobs,
    .jobs_load_live = pg_read_jobs_live,
    .job_get = pg_read_job,
    .jobs_page = pg_read_jobs_page,
    .events_for = pg_read_events,
    .usage_query = pg_read_usage,
    .span_open = pg_write_span_open,
    .spans_end = pg_write_spans_end,
    .spans_close_open = pg_write_spans_close_open,
    .spans_query = pg_read_spans,
    .team_set = pg_write_team,
    .teams_load = pg_read_teams,
    .team_budget_set = pg_write_team_budget,
    .team_budgets_load = pg_read_team_budgets,
    .token_insert = pg_write_token,
    .token_find = pg_read_token,
    .token_count = pg_read_token_count,
    .token_list = pg_read_token_list,
    .token_revoke = pg_write_token_revoke,
    .server_id = pg_read_server_id,
    .mig_set = pg_write_mig,
    .mig_load = pg_read_mig,
    .learned_load = pg_read_learned,
    .lead = pg_lead,
    .leading = pg_leading,
    .leader = pg_read_leader,
};

/* The password in a URL's user information as written, for masking libpq's messages
 * about a URL it could not parse; NULL when none. */
static char *raw_password(const char *url)
{
    const char *auth = strstr(url, "://");
    if (!auth)
        return NULL;
    auth += 3;
    const char *at = auth;
    while (*at && *at != '@' && *at != '/')
        at++;
    const char *colon = *at == '@' ? memchr(auth, ':', (size_t)(at - auth)) : NULL;
    return colon && at > colon + 1 ? strndup(colon + 1, (size_t)(at - colon - 1)) : NULL;
}

/* The password libpq reads from url (decoded), or the raw one when it cannot parse it. */
static int parse_url(PgStore *db, Buf *err)
{
    char *msg = NULL;
    PQconninfoOption *opts = PQconninfoParse(db->url, &msg);
    if (!opts) {
        db->secret = raw_password(db->url);
        Buf why = {0};
        pg_message(db, msg ? msg : "out of memory", &why);
        int r = store_fail(err, msg ? -EINVAL : -ENOMEM, db->label,
                           "not a PostgreSQL URL libpq can read: %s", buf_str(&why));
        buf_free(&why);
        PQfreemem(msg);
        return r;
    }
    for (PQconninfoOption *o = opts; o->keyword; o++)
        if (strcmp(o->keyword, "password") == 0 && o->val && *o->val)
            db->secret = strdup(o->val);
    PQconninfoFree(opts);
    return 0;
}

int pg_open(const char *url, Store **ret, Buf *err)
{
    PgStore *db = calloc(1, sizeof(*db));
    if (!db)
        return -ENOMEM;
    db->base.ops = &pg_ops;
    group_init(&db->group);
    pthread_mutex_init(&db->rlock, NULL);
    Buf label = {0};
    store_url_redact(url, &label);
    db->url = strdup(url);
    db->label = buf_steal(&label);
    int r = !db->url || !db->label ? -ENOMEM : parse_url(db, err);
    if (r == 0)
        r = pg_reconnect(db, true, err);
    if (r == 0)
        r = pg_reconnect(db, false, err);
    if (r < 0) {
        pg_close(&db->base);
        return r;
    }
    *ret = &db->base;
    return 0;
}
