/* pg_read.c: the PostgreSQL back end's reads, on the reading session under its lock.
 * Each is one statement, so each sees one committed state of the database (its own
 * snapshot), never part of a batch. The whole result comes back before the caller's
 * function sees a row, so a read whose session was lost can be sent again on a new
 * session (once) without the caller seeing anything twice. Orders on text use the "C"
 * collation: bytes, as SQLite compares them, whatever the database's locale. */
#include "store/pg.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* a job's columns in the order row_job reads them */
#define JOB_SELECT                                                                                 \
    "SELECT id, name, team, project, spec_json, owner, priority, state, run, preemptions, "        \
    "submit_ms, start_ms, end_ms, exit_code, checkpoint, checkpoint_ms, placement_json, "          \
    "queue_key, \"user\" FROM jobs"

const char *const pg_read_sql[PR_COUNT] = {
    [PR_PING] = "SELECT max(version) FROM schema_version",
    [PR_JOBS] = JOB_SELECT " ORDER BY id",
    /* the states past 3 are the ended ones (the server's JobState) */
    [PR_JOBS_LIVE] = JOB_SELECT " WHERE state <= 3 OR end_ms >= $1 ORDER BY id",
    [PR_JOB] = JOB_SELECT " WHERE id = $1",
    /* a negative limit is none, as in SQLite */
    [PR_JOBS_PAGE] = JOB_SELECT " WHERE id > $1 AND (($2::bigint >> state) & 1) = 1"
                                " AND ($3::text IS NULL OR team = $3)"
                                " AND ($4::text IS NULL OR project = $4) ORDER BY id"
                                " LIMIT CASE WHEN $5::bigint < 0 THEN NULL ELSE $5::bigint END",
    [PR_EVENTS] = "SELECT t_ms, type, detail FROM events WHERE job = $1 ORDER BY t_ms, id",
    [PR_USAGE] = "SELECT job, team, project, pool, model, tier, gpu_equivalents, "
                 "price_micro_usd, GREATEST(start_ms, $1::bigint), LEAST(end_ms, $2::bigint), "
                 "node, "
                 "measured_gpu_ms * (LEAST(end_ms, $2::bigint) - GREATEST(start_ms, $1::bigint)) "
                 "/ (end_ms - start_ms), "
                 "busy_gpu_ms * (LEAST(end_ms, $2::bigint) - GREATEST(start_ms, $1::bigint)) "
                 "/ (end_ms - start_ms) "
                 "FROM usage WHERE start_ms < $2 AND end_ms > $1 AND end_ms > start_ms "
                 "ORDER BY start_ms, id",
    [PR_TEAMS] = "SELECT name, guaranteed_gpus, burst_gpus, weight FROM teams "
                 "ORDER BY name COLLATE \"C\"",
    [PR_TEAM_BUDGETS] = "SELECT name, budget_gpu_hours FROM team_budgets "
                        "ORDER BY name COLLATE \"C\"",
    [PR_TOKEN_FIND] = "SELECT id, role, team, name, node, \"user\", created_ms, expires_ms, "
                      "revoked_ms FROM tokens WHERE hash = $1",
    [PR_TOKEN_COUNT] = "SELECT count(*) FROM tokens",
    [PR_TOKEN_LIST] = "SELECT id, role, team, name, node, \"user\", created_ms, expires_ms, "
                      "revoked_ms FROM tokens ORDER BY id",
    [PR_MIG] = "SELECT node, gpu_index, layout_json FROM mig_layouts "
               "ORDER BY node COLLATE \"C\", gpu_index",
    [PR_LEARNED] = "SELECT class, peak_mib, ooms FROM learned_memory ORDER BY class COLLATE \"C\"",
    /* an open span is still going: it reaches the window's end */
    [PR_SPANS] = "SELECT id, node, pool, model, tier, basis, gpus, price_micro_usd, "
                 "GREATEST(start_ms, $1::bigint), "
                 "CASE WHEN open = 1 THEN $2::bigint ELSE LEAST(end_ms, $2::bigint) END, open "
                 "FROM node_spans WHERE start_ms < $2 AND (end_ms > $1 OR open = 1) "
                 "AND (end_ms > start_ms OR open = 1) ORDER BY node COLLATE \"C\", start_ms, id",
    [PR_SERVER_ID] = "SELECT id FROM server_identity LIMIT 1",
    [PR_LEADER] = "SELECT url, since_ms FROM leader WHERE id = 1",
};

/* Run reader statement `which` (the caller holds rlock): the rows, or NULL with the
 * errno in *ret_r. A session found gone is replaced and the statement sent once more. */
static PGresult *read_exec(PgStore *db, int which, int n, const char *const *params,
                           bool binary_first, int len0, int *ret_r)
{
    char name[16];
    snprintf(name, sizeof(name), "r%d", which);
    int lengths[PG_MAX_PARAMS] = {len0}, formats[PG_MAX_PARAMS] = {1};
    for (int attempt = 0;; attempt++) {
        if (db->rconn && PQconsumeInput(db->rconn))
            PQisBusy(db->rconn); /* a FATAL that came while idle sets rfatal */
        if ((!db->rconn || db->rfatal || PQstatus(db->rconn) != CONNECTION_OK) &&
            pg_reconnect(db, false, NULL) < 0) {
            *ret_r = -EIO;
            return NULL;
        }
        PGresult *res = PQexecPrepared(db->rconn, name, n, params, binary_first ? lengths : NULL,
                                       binary_first ? formats : NULL, 0);
        if (PQresultStatus(res) == PGRES_TUPLES_OK)
            return res;
        bool lost = pg_lost(db->rconn, res);
        int r = pg_result_fail(db, db->rconn, res, NULL);
        PQclear(res);
        if (lost) {
            PQfinish(db->rconn);
            db->rconn = NULL;
        }
        if (!lost || attempt == 1) {
            *ret_r = r < 0 ? r : -EIO;
            return NULL;
        }
    }
}

/* Take the reader and run `which`: the caller walks the rows, then calls read_end. */
static PGresult *read_begin(PgStore *db, int which, int n, const char *const *params, int *ret_r)
{
    pthread_mutex_lock(&db->rlock);
    return read_exec(db, which, n, params, false, 0, ret_r);
}

static int read_end(PgStore *db, PGresult *res, int r)
{
    PQclear(res);
    pthread_mutex_unlock(&db->rlock);
    return r;
}

/* A column's text, NULL for SQL NULL. */
static const char *val(const PGresult *res, int row, int col)
{
    return PQgetisnull(res, row, col) ? NULL : PQgetvalue(res, row, col);
}

static int col_dup(const PGresult *res, int row, int col, char **ret)
{
    const char *s = val(res, row, col);
    *ret = s ? strdup(s) : NULL;
    return s && !*ret ? -ENOMEM : 0;
}

static double get_f64(const PGresult *res, int row, int col)
{
    return strtod(PQgetvalue(res, row, col), NULL);
}

int pg_read_ping(Store *s)
{
    PgStore *db = pg_of(s);
    int r = 0;
    PGresult *res = read_begin(db, PR_PING, 0, NULL, &r);
    return read_end(db, res, r);
}

static int row_job(const PGresult *res, int i, StoreJob *j)
{
    *j = (StoreJob){
        .id = pg_get_i64(res, i, 0),
        .owner = pg_get_i64(res, i, 5),
        .priority = (uint8_t)pg_get_i64(res, i, 6),
        .state = (uint8_t)pg_get_i64(res, i, 7),
        .run = (uint32_t)pg_get_i64(res, i, 8),
        .preemptions = (uint32_t)pg_get_i64(res, i, 9),
        .submit_ms = pg_get_i64(res, i, 10),
        .start_ms = pg_get_i64(res, i, 11),
        .end_ms = pg_get_i64(res, i, 12),
        .exit_code = (int32_t)pg_get_i64(res, i, 13),
        .checkpoint_ms = pg_get_i64(res, i, 15),
        .queue_key = get_f64(res, i, 17),
    };
    if (col_dup(res, i, 1, &j->name) < 0 || col_dup(res, i, 2, &j->team) < 0 ||
        col_dup(res, i, 3, &j->project) < 0 || col_dup(res, i, 4, &j->spec_json) < 0 ||
        col_dup(res, i, 14, &j->checkpoint) < 0 || col_dup(res, i, 16, &j->placement_json) < 0 ||
        col_dup(res, i, 18, &j->user) < 0) {
        store_job_free(j);
        return -ENOMEM;
    }
    return 0;
}

static int read_jobs(PgStore *db, int which, int n, const char *const *params,
                     int (*fn)(void *arg, StoreJob *j), void *arg)
{
    int r = 0;
    PGresult *res = read_begin(db, which, n, params, &r);
    for (int i = 0; res && r == 0 && i < PQntuples(res); i++) {
        StoreJob j;
        if ((r = row_job(res, i, &j)) == 0)
            r = fn(arg, &j);
    }
    return read_end(db, res, r);
}

int pg_read_jobs(Store *s, int (*fn)(void *arg, StoreJob *j), void *arg)
{
    return read_jobs(pg_of(s), PR_JOBS, 0, NULL, fn, arg);
}

int pg_read_jobs_live(Store *s, int64_t ended_since_ms, int (*fn)(void *arg, StoreJob *j),
                      void *arg)
{
    char since[PG_NUM];
    const char *p[] = {pg_i64(since, ended_since_ms)};
    return read_jobs(pg_of(s), PR_JOBS_LIVE, 1, p, fn, arg);
}

int pg_read_job(Store *s, int64_t id, StoreJob *ret)
{
    PgStore *db = pg_of(s);
    char idb[PG_NUM];
    const char *p[] = {pg_i64(idb, id)};
    int r = 0;
    PGresult *res = read_begin(db, PR_JOB, 1, p, &r);
    if (res)
        r = PQntuples(res) == 1 ? row_job(res, 0, ret) : -ENOENT;
    return read_end(db, res, r);
}

int pg_read_jobs_page(Store *s, const StoreJobQuery *q, int (*fn)(void *arg, StoreJob *j),
                      void *arg)
{
    char after[PG_NUM], states[PG_NUM], limit[PG_NUM];
    const char *p[] = {pg_i64(after, q->after_id), pg_i64(states, (int64_t)q->states), q->team,
                       q->project, pg_i64(limit, q->limit)};
    return read_jobs(pg_of(s), PR_JOBS_PAGE, 5, p, fn, arg);
}

int pg_read_events(Store *s, int64_t job,
                   int (*fn)(void *arg, int64_t t_ms, const char *type, const char *detail),
                   void *arg)
{
    PgStore *db = pg_of(s);
    char jb[PG_NUM];
    const char *p[] = {pg_i64(jb, job)};
    int r = 0;
    PGresult *res = read_begin(db, PR_EVENTS, 1, p, &r);
    for (int i = 0; res && r == 0 && i < PQntuples(res); i++)
        r = fn(arg, pg_get_i64(res, i, 0), val(res, i, 1), val(res, i, 2));
    return read_end(db, res, r);
}

int pg_read_usage(Store *s, int64_t from_ms, int64_t to_ms,
                  int (*fn)(void *arg, const StoreUsage *u), void *arg)
{
    PgStore *db = pg_of(s);
    char from[PG_NUM], to[PG_NUM];
    const char *p[] = {pg_i64(from, from_ms), pg_i64(to, to_ms)};
    int r = 0;
    PGresult *res = read_begin(db, PR_USAGE, 2, p, &r);
    for (int i = 0; res && r == 0 && i < PQntuples(res); i++) {
        StoreUsage u = {
            .job = pg_get_i64(res, i, 0),
            .team = val(res, i, 1),
            .project = val(res, i, 2),
            .pool = val(res, i, 3),
            .model = val(res, i, 4),
            .tier = val(res, i, 5),
            .gpu_equivalents = get_f64(res, i, 6),
            .price_micro_usd = pg_get_i64(res, i, 7),
            .start_ms = pg_get_i64(res, i, 8),
            .end_ms = pg_get_i64(res, i, 9),
            .node = val(res, i, 10),
            .measured_gpu_ms = pg_get_i64(res, i, 11),
            .busy_gpu_ms = pg_get_i64(res, i, 12),
        };
        r = fn(arg, &u);
    }
    return read_end(db, res, r);
}

int pg_read_spans(Store *s, int64_t from_ms, int64_t to_ms,
                  int (*fn)(void *arg, const StoreNodeSpan *span), void *arg)
{
    PgStore *db = pg_of(s);
    char from[PG_NUM], to[PG_NUM];
    const char *p[] = {pg_i64(from, from_ms), pg_i64(to, to_ms)};
    int r = 0;
    PGresult *res = read_begin(db, PR_SPANS, 2, p, &r);
    for (int i = 0; res && r == 0 && i < PQntuples(res); i++) {
        StoreNodeSpan sp = {
            .id = pg_get_i64(res, i, 0),
            .node = val(res, i, 1),
            .pool = val(res, i, 2),
            .model = val(res, i, 3),
            .tier = val(res, i, 4),
            .basis = val(res, i, 5),
            .gpus = (uint32_t)pg_get_i64(res, i, 6),
            .price_micro_usd = pg_get_i64(res, i, 7),
            .start_ms = pg_get_i64(res, i, 8),
            .end_ms = pg_get_i64(res, i, 9),
            .open = pg_get_i64(res, i, 10) != 0,
        };
        r = fn(arg, &sp);
    }
    return read_end(db, res, r);
}

int pg_read_teams(Store *s,
                  int (*fn)(void *arg, const char *name, double guaranteed_gpus, double burst_gpus,
                            double weight),
                  void *arg)
{
    PgStore *db = pg_of(s);
    int r = 0;
    PGresult *res = read_begin(db, PR_TEAMS, 0, NULL, &r);
    for (int i = 0; res && r == 0 && i < PQntuples(res); i++)
        r = fn(arg, val(res, i, 0), get_f64(res, i, 1), get_f64(res, i, 2), get_f64(res, i, 3));
    return read_end(db, res, r);
}

int pg_read_team_budgets(Store *s, int (*fn)(void *arg, const char *name, double budget_gpu_hours),
                         void *arg)
{
    PgStore *db = pg_of(s);
    int r = 0;
    PGresult *res = read_begin(db, PR_TEAM_BUDGETS, 0, NULL, &r);
    for (int i = 0; res && r == 0 && i < PQntuples(res); i++)
        r = fn(arg, val(res, i, 0), get_f64(res, i, 1));
    return read_end(db, res, r);
}

static void copy_field(char *dst, size_t size, const char *s)
{
    snprintf(dst, size, "%s", s ? s : "");
}

/* A token row in the column order of PR_TOKEN_FIND and PR_TOKEN_LIST. */
static StoreToken row_token(const PGresult *res, int i)
{
    StoreToken t = {
        .id = pg_get_i64(res, i, 0),
        .created_ms = pg_get_i64(res, i, 6),
        .expires_ms = pg_get_i64(res, i, 7),
        .revoked_ms = pg_get_i64(res, i, 8),
    };
    copy_field(t.role, sizeof(t.role), val(res, i, 1));
    copy_field(t.team, sizeof(t.team), val(res, i, 2));
    copy_field(t.name, sizeof(t.name), val(res, i, 3));
    copy_field(t.node, sizeof(t.node), val(res, i, 4));
    copy_field(t.user, sizeof(t.user), val(res, i, 5));
    return t;
}

int pg_read_token(Store *s, const uint8_t hash[STORE_TOKEN_HASH_LEN], StoreToken *ret)
{
    PgStore *db = pg_of(s);
    const char *p[] = {(const char *)hash};
    int r = 0;
    pthread_mutex_lock(&db->rlock);
    PGresult *res = read_exec(db, PR_TOKEN_FIND, 1, p, true, STORE_TOKEN_HASH_LEN, &r);
    if (res && PQntuples(res) == 1) {
        *ret = row_token(res, 0);
        r = 1;
    }
    return read_end(db, res, r);
}

int pg_read_token_list(Store *s, int (*fn)(void *arg, const StoreToken *t), void *arg)
{
    PgStore *db = pg_of(s);
    int r = 0;
    PGresult *res = read_begin(db, PR_TOKEN_LIST, 0, NULL, &r);
    for (int i = 0; res && r == 0 && i < PQntuples(res); i++) {
        StoreToken t = row_token(res, i);
        r = fn(arg, &t);
    }
    return read_end(db, res, r);
}

int pg_read_token_count(Store *s, int64_t *ret)
{
    PgStore *db = pg_of(s);
    int r = 0;
    PGresult *res = read_begin(db, PR_TOKEN_COUNT, 0, NULL, &r);
    if (res && PQntuples(res) == 1)
        *ret = pg_get_i64(res, 0, 0);
    else if (res)
        r = -EIO;
    return read_end(db, res, r);
}

int pg_read_server_id(Store *s, char ret[STORE_SERVER_ID_LEN + 1])
{
    PgStore *db = pg_of(s);
    int r = 0;
    PGresult *res = read_begin(db, PR_SERVER_ID, 0, NULL, &r);
    if (res) {
        const char *id = PQntuples(res) == 1 ? val(res, 0, 0) : NULL;
        if (id && strlen(id) == STORE_SERVER_ID_LEN)
            memcpy(ret, id, STORE_SERVER_ID_LEN + 1);
        else
            r = -EIO; /* the migration made the row: a database without one is damaged */
    }
    return read_end(db, res, r);
}

int pg_read_mig(Store *s,
                int (*fn)(void *arg, const char *node, unsigned index, const char *layout_json),
                void *arg)
{
    PgStore *db = pg_of(s);
    int r = 0;
    PGresult *res = read_begin(db, PR_MIG, 0, NULL, &r);
    for (int i = 0; res && r == 0 && i < PQntuples(res); i++)
        r = fn(arg, val(res, i, 0), (unsigned)pg_get_i64(res, i, 1), val(res, i, 2));
    return read_end(db, res, r);
}

int pg_read_learned(Store *s,
                    int (*fn)(void *arg, const char *cls, uint64_t peak_mib, unsigned ooms),
                    void *arg)
{
    PgStore *db = pg_of(s);
    int r = 0;
    PGresult *res = read_begin(db, PR_LEARNED, 0, NULL, &r);
    for (int i = 0; res && r == 0 && i < PQntuples(res); i++)
        r = fn(arg, val(res, i, 0), (uint64_t)pg_get_i64(res, i, 1),
               (unsigned)pg_get_i64(res, i, 2));
    return read_end(db, res, r);
}

int pg_read_leader(Store *s, char *url, size_t n, int64_t *since_ms)
{
    PgStore *db = pg_of(s);
    int r = 0;
    PGresult *res = read_begin(db, PR_LEADER, 0, NULL, &r);
    if (res && PQntuples(res) == 1) {
        copy_field(url, n, val(res, 0, 0));
        *since_ms = pg_get_i64(res, 0, 1);
    } else if (res) {
        r = -ENOENT;
    }
    return read_end(db, res, r);
}
