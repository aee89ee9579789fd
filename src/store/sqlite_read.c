/* sqlite_read.c: the SQLite back end's reads, on the reading connection under its lock.
 * Each is one statement, so each sees one committed state of the database, never part
 * of a batch; rows go to the caller's function as they are stepped, without a copy of
 * the whole result. */
#include "store/sqlite.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* a job's columns in the order row_job reads them */
#define JOB_SELECT                                                                                 \
    "SELECT id, name, team, project, spec_json, owner, priority, state, run, preemptions, "        \
    "submit_ms, start_ms, end_ms, exit_code, checkpoint, checkpoint_ms, placement_json, "          \
    "queue_key, user FROM jobs"

const char *const sqlite_read_sql[RS_COUNT] = {
    [RS_PING] = "SELECT max(version) FROM schema_version",
    [RS_JOBS] = JOB_SELECT " ORDER BY id",
    /* the states past 3 are the ended ones (the server's JobState) */
    [RS_JOBS_LIVE] = JOB_SELECT " WHERE state <= 3 OR end_ms >= ?1 ORDER BY id",
    [RS_JOB] = JOB_SELECT " WHERE id = ?1",
    [RS_JOBS_PAGE] = JOB_SELECT " WHERE id > ?1 AND (?2 >> state) & 1"
                                " AND (?3 IS NULL OR team = ?3) AND (?4 IS NULL OR project = ?4)"
                                " ORDER BY id LIMIT ?5",
    [RS_EVENTS] = "SELECT t_ms, type, detail FROM events WHERE job = ? ORDER BY t_ms, id",
    [RS_USAGE] = "SELECT job, team, project, pool, model, tier, gpu_equivalents, "
                 "price_micro_usd, max(start_ms, ?1), min(end_ms, ?2), node, "
                 /* what was measured, in proportion to the part inside the window */
                 "measured_gpu_ms * (min(end_ms, ?2) - max(start_ms, ?1)) / (end_ms - start_ms), "
                 "busy_gpu_ms * (min(end_ms, ?2) - max(start_ms, ?1)) / (end_ms - start_ms) "
                 "FROM usage "
                 "WHERE start_ms < ?2 AND end_ms > ?1 AND end_ms > start_ms ORDER BY start_ms, id",
    [RS_TEAMS] = "SELECT name, guaranteed_gpus, burst_gpus, weight FROM teams ORDER BY name",
    [RS_TEAM_BUDGETS] = "SELECT name, budget_gpu_hours FROM team_budgets ORDER BY name",
    [RS_TOKEN_FIND] = "SELECT id, role, team, name, node, user, created_ms, expires_ms, "
                      "revoked_ms FROM tokens WHERE hash = ?",
    [RS_TOKEN_LIST] = "SELECT id, role, team, name, node, user, created_ms, expires_ms, "
                      "revoked_ms FROM tokens ORDER BY id",
    [RS_TOKEN_COUNT] = "SELECT count(*) FROM tokens",
    [RS_MIG] = "SELECT node, gpu_index, layout_json FROM mig_layouts ORDER BY node, gpu_index",
    [RS_LEARNED] = "SELECT class, peak_mib, ooms FROM learned_memory ORDER BY class",
    /* an open span is still going: it reaches the window's end */
    [RS_SPANS] = "SELECT id, node, pool, model, tier, basis, gpus, price_micro_usd, "
                 "max(start_ms, ?1), CASE WHEN open THEN ?2 ELSE min(end_ms, ?2) END, open "
                 "FROM node_spans WHERE start_ms < ?2 AND (end_ms > ?1 OR open = 1) "
                 "AND (end_ms > start_ms OR open = 1) ORDER BY node, start_ms, id",
    [RS_SERVER_ID] = "SELECT id FROM server_identity LIMIT 1",
    [RS_LEADER] = "SELECT url, since_ms FROM leader WHERE id = 1",
};

static const char *col_text(sqlite3_stmt *st, int i)
{
    return (const char *)sqlite3_column_text(st, i);
}

/* A copy of a text column, NULL for NULL. 0 or -ENOMEM. */
static int col_dup(sqlite3_stmt *st, int i, char **ret)
{
    const char *s = col_text(st, i);
    *ret = s ? strdup(s) : NULL;
    return s && !*ret ? -ENOMEM : 0;
}

/* Take the reader and its statement `which`: the caller binds and steps it, then calls
 * read_end. */
static sqlite3_stmt *read_begin(SqliteStore *db, int which)
{
    pthread_mutex_lock(&db->rlock);
    return db->rs[which];
}

/* The last step's code turned into the read's result: r when the walk stopped on its
 * own (fn's non-zero return, an error), -EIO when SQLite failed. */
static int read_end(SqliteStore *db, sqlite3_stmt *st, int rc, int r)
{
    if (r == 0 && rc != SQLITE_DONE && rc != SQLITE_ROW)
        r = sqlite_fail(db, db->rdb, rc, NULL);
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    pthread_mutex_unlock(&db->rlock);
    return r;
}

int sqlite_read_ping(Store *s)
{
    SqliteStore *db = sqlite_of(s);
    sqlite3_stmt *st = read_begin(db, RS_PING);
    int rc = sqlite3_step(st);
    return read_end(db, st, rc, 0);
}

static int row_job(sqlite3_stmt *st, StoreJob *j)
{
    *j = (StoreJob){
        .id = sqlite3_column_int64(st, 0),
        .owner = sqlite3_column_int64(st, 5),
        .priority = (uint8_t)sqlite3_column_int(st, 6),
        .state = (uint8_t)sqlite3_column_int(st, 7),
        .run = (uint32_t)sqlite3_column_int64(st, 8),
        .preemptions = (uint32_t)sqlite3_column_int64(st, 9),
        .submit_ms = sqlite3_column_int64(st, 10),
        .start_ms = sqlite3_column_int64(st, 11),
        .end_ms = sqlite3_column_int64(st, 12),
        .exit_code = sqlite3_column_int(st, 13),
        .checkpoint_ms = sqlite3_column_int64(st, 15),
        .queue_key = sqlite3_column_double(st, 17),
    };
    if (col_dup(st, 1, &j->name) < 0 || col_dup(st, 2, &j->team) < 0 ||
        col_dup(st, 3, &j->project) < 0 || col_dup(st, 4, &j->spec_json) < 0 ||
        col_dup(st, 14, &j->checkpoint) < 0 || col_dup(st, 16, &j->placement_json) < 0 ||
        col_dup(st, 18, &j->user) < 0) {
        store_job_free(j);
        return -ENOMEM;
    }
    return 0;
}

/* Step a jobs statement, bound, to its end: each row to fn; then read_end. */
static int step_jobs(SqliteStore *db, sqlite3_stmt *st, int (*fn)(void *arg, StoreJob *j),
                     void *arg)
{
    int rc = SQLITE_DONE, r = 0;
    while (r == 0 && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        StoreJob j;
        if ((r = row_job(st, &j)) == 0)
            r = fn(arg, &j);
    }
    return read_end(db, st, rc, r);
}

int sqlite_read_jobs(Store *s, int (*fn)(void *arg, StoreJob *j), void *arg)
{
    SqliteStore *db = sqlite_of(s);
    sqlite3_stmt *st = read_begin(db, RS_JOBS);
    return step_jobs(db, st, fn, arg);
}

int sqlite_read_jobs_live(Store *s, int64_t ended_since_ms, int (*fn)(void *arg, StoreJob *j),
                          void *arg)
{
    SqliteStore *db = sqlite_of(s);
    sqlite3_stmt *st = read_begin(db, RS_JOBS_LIVE);
    sqlite3_bind_int64(st, 1, ended_since_ms);
    return step_jobs(db, st, fn, arg);
}

int sqlite_read_job(Store *s, int64_t id, StoreJob *ret)
{
    SqliteStore *db = sqlite_of(s);
    sqlite3_stmt *st = read_begin(db, RS_JOB);
    sqlite3_bind_int64(st, 1, id);
    int rc = sqlite3_step(st), r = -ENOENT;
    if (rc == SQLITE_ROW)
        r = row_job(st, ret);
    return read_end(db, st, rc, r);
}

static void bind_text_or_null(sqlite3_stmt *st, int i, const char *v)
{
    if (v)
        sqlite3_bind_text(st, i, v, -1, SQLITE_TRANSIENT);
    else
        sqlite3_bind_null(st, i);
}

int sqlite_read_jobs_page(Store *s, const StoreJobQuery *q, int (*fn)(void *arg, StoreJob *j),
                          void *arg)
{
    SqliteStore *db = sqlite_of(s);
    sqlite3_stmt *st = read_begin(db, RS_JOBS_PAGE);
    sqlite3_bind_int64(st, 1, q->after_id);
    sqlite3_bind_int64(st, 2, (sqlite3_int64)q->states);
    bind_text_or_null(st, 3, q->team);
    bind_text_or_null(st, 4, q->project);
    sqlite3_bind_int64(st, 5, q->limit);
    return step_jobs(db, st, fn, arg);
}

int sqlite_read_events(Store *s, int64_t job,
                       int (*fn)(void *arg, int64_t t_ms, const char *type, const char *detail),
                       void *arg)
{
    SqliteStore *db = sqlite_of(s);
    sqlite3_stmt *st = read_begin(db, RS_EVENTS);
    sqlite3_bind_int64(st, 1, job);
    int rc = SQLITE_DONE, r = 0;
    while (r == 0 && (rc = sqlite3_step(st)) == SQLITE_ROW)
        r = fn(arg, sqlite3_column_int64(st, 0), col_text(st, 1), col_text(st, 2));
    return read_end(db, st, rc, r);
}

int sqlite_read_usage(Store *s, int64_t from_ms, int64_t to_ms,
                      int (*fn)(void *arg, const StoreUsage *u), void *arg)
{
    SqliteStore *db = sqlite_of(s);
    sqlite3_stmt *st = read_begin(db, RS_USAGE);
    sqlite3_bind_int64(st, 1, from_ms);
    sqlite3_bind_int64(st, 2, to_ms);
    int rc = SQLITE_DONE, r = 0;
    while (r == 0 && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        StoreUsage u = {
            .job = sqlite3_column_int64(st, 0),
            .team = col_text(st, 1),
            .project = col_text(st, 2),
            .pool = col_text(st, 3),
            .model = col_text(st, 4),
            .tier = col_text(st, 5),
            .gpu_equivalents = sqlite3_column_double(st, 6),
            .price_micro_usd = sqlite3_column_int64(st, 7),
            .start_ms = sqlite3_column_int64(st, 8),
            .end_ms = sqlite3_column_int64(st, 9),
            .node = col_text(st, 10),
            .measured_gpu_ms = sqlite3_column_int64(st, 11),
            .busy_gpu_ms = sqlite3_column_int64(st, 12),
        };
        r = fn(arg, &u);
    }
    return read_end(db, st, rc, r);
}

int sqlite_read_spans(Store *s, int64_t from_ms, int64_t to_ms,
                      int (*fn)(void *arg, const StoreNodeSpan *span), void *arg)
{
    SqliteStore *db = sqlite_of(s);
    sqlite3_stmt *st = read_begin(db, RS_SPANS);
    sqlite3_bind_int64(st, 1, from_ms);
    sqlite3_bind_int64(st, 2, to_ms);
    int rc = SQLITE_DONE, r = 0;
    while (r == 0 && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        StoreNodeSpan sp = {
            .id = sqlite3_column_int64(st, 0),
            .node = col_text(st, 1),
            .pool = col_text(st, 2),
            .model = col_text(st, 3),
            .tier = col_text(st, 4),
            .basis = col_text(st, 5),
            .gpus = (uint32_t)sqlite3_column_int64(st, 6),
            .price_micro_usd = sqlite3_column_int64(st, 7),
            .start_ms = sqlite3_column_int64(st, 8),
            .end_ms = sqlite3_column_int64(st, 9),
            .open = sqlite3_column_int(st, 10) != 0,
        };
        r = fn(arg, &sp);
    }
    return read_end(db, st, rc, r);
}

int sqlite_read_teams(Store *s,
                      int (*fn)(void *arg, const char *name, double guaranteed_gpus,
                                double burst_gpus, double weight),
                      void *arg)
{
    SqliteStore *db = sqlite_of(s);
    sqlite3_stmt *st = read_begin(db, RS_TEAMS);
    int rc = SQLITE_DONE, r = 0;
    while (r == 0 && (rc = sqlite3_step(st)) == SQLITE_ROW)
        r = fn(arg, col_text(st, 0), sqlite3_column_double(st, 1), sqlite3_column_double(st, 2),
               sqlite3_column_double(st, 3));
    return read_end(db, st, rc, r);
}

int sqlite_read_team_budgets(Store *s,
                             int (*fn)(void *arg, const char *name, double budget_gpu_hours),
                             void *arg)
{
    SqliteStore *db = sqlite_of(s);
    sqlite3_stmt *st = read_begin(db, RS_TEAM_BUDGETS);
    int rc = SQLITE_DONE, r = 0;
    while (r == 0 && (rc = sqlite3_step(st)) == SQLITE_ROW)
        r = fn(arg, col_text(st, 0), sqlite3_column_double(st, 1));
    return read_end(db, st, rc, r);
}

static void copy_field(char *dst, size_t size, const char *s)
{
    snprintf(dst, size, "%s", s ? s : "");
}

/* A token row in the column order of RS_TOKEN_FIND and RS_TOKEN_LIST. */
static StoreToken row_token(sqlite3_stmt *st)
{
    StoreToken t = {
        .id = sqlite3_column_int64(st, 0),
        .created_ms = sqlite3_column_int64(st, 6),
        .expires_ms = sqlite3_column_int64(st, 7),
        .revoked_ms = sqlite3_column_int64(st, 8),
    };
    copy_field(t.role, sizeof(t.role), col_text(st, 1));
    copy_field(t.team, sizeof(t.team), col_text(st, 2));
    copy_field(t.name, sizeof(t.name), col_text(st, 3));
    copy_field(t.node, sizeof(t.node), col_text(st, 4));
    copy_field(t.user, sizeof(t.user), col_text(st, 5));
    return t;
}

int sqlite_read_token(Store *s, const uint8_t hash[STORE_TOKEN_HASH_LEN], StoreToken *ret)
{
    SqliteStore *db = sqlite_of(s);
    sqlite3_stmt *st = read_begin(db, RS_TOKEN_FIND);
    sqlite3_bind_blob(st, 1, hash, STORE_TOKEN_HASH_LEN, SQLITE_STATIC);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        *ret = row_token(st);
    int r = read_end(db, st, rc, 0);
    return r < 0 ? r : rc == SQLITE_ROW;
}

int sqlite_read_token_list(Store *s, int (*fn)(void *arg, const StoreToken *t), void *arg)
{
    SqliteStore *db = sqlite_of(s);
    sqlite3_stmt *st = read_begin(db, RS_TOKEN_LIST);
    int rc = SQLITE_DONE, r = 0;
    while (r == 0 && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        StoreToken t = row_token(st);
        r = fn(arg, &t);
    }
    return read_end(db, st, rc, r);
}

int sqlite_read_token_count(Store *s, int64_t *ret)
{
    SqliteStore *db = sqlite_of(s);
    sqlite3_stmt *st = read_begin(db, RS_TOKEN_COUNT);
    int rc = sqlite3_step(st);
    int64_t n = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
    int r = read_end(db, st, rc, 0);
    if (r == 0)
        *ret = n;
    return r;
}

int sqlite_read_server_id(Store *s, char ret[STORE_SERVER_ID_LEN + 1])
{
    SqliteStore *db = sqlite_of(s);
    sqlite3_stmt *st = read_begin(db, RS_SERVER_ID);
    int rc = sqlite3_step(st);
    const char *id = rc == SQLITE_ROW ? col_text(st, 0) : NULL;
    char copy[STORE_SERVER_ID_LEN + 1] = "";
    if (id && strlen(id) == STORE_SERVER_ID_LEN)
        memcpy(copy, id, sizeof(copy));
    int r = read_end(db, st, rc == SQLITE_ROW ? SQLITE_DONE : rc, 0);
    if (r == 0 && !copy[0])
        r = -EIO; /* the migration made the row: a database without one is damaged */
    if (r == 0)
        memcpy(ret, copy, sizeof(copy));
    return r;
}

int sqlite_read_mig(Store *s,
                    int (*fn)(void *arg, const char *node, unsigned index, const char *layout_json),
                    void *arg)
{
    SqliteStore *db = sqlite_of(s);
    sqlite3_stmt *st = read_begin(db, RS_MIG);
    int rc = SQLITE_DONE, r = 0;
    while (r == 0 && (rc = sqlite3_step(st)) == SQLITE_ROW)
        r = fn(arg, col_text(st, 0), (unsigned)sqlite3_column_int64(st, 1), col_text(st, 2));
    return read_end(db, st, rc, r);
}

int sqlite_read_learned(Store *s,
                        int (*fn)(void *arg, const char *cls, uint64_t peak_mib, unsigned ooms),
                        void *arg)
{
    SqliteStore *db = sqlite_of(s);
    sqlite3_stmt *st = read_begin(db, RS_LEARNED);
    int rc = SQLITE_DONE, r = 0;
    while (r == 0 && (rc = sqlite3_step(st)) == SQLITE_ROW)
        r = fn(arg, col_text(st, 0), (uint64_t)sqlite3_column_int64(st, 1),
               (unsigned)sqlite3_column_int64(st, 2));
    return read_end(db, st, rc, r);
}

int sqlite_read_leader(Store *s, char *url, size_t n, int64_t *since_ms)
{
    SqliteStore *db = sqlite_of(s);
    sqlite3_stmt *st = read_begin(db, RS_LEADER);
    int rc = sqlite3_step(st), r = rc == SQLITE_ROW ? 0 : -ENOENT;
    if (rc == SQLITE_ROW) {
        copy_field(url, n, col_text(st, 0));
        *since_ms = sqlite3_column_int64(st, 1);
    }
    return read_end(db, st, rc, r);
}
