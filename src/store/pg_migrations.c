/* pg_migrations.c: the PostgreSQL schema as a list of steps: the steps of migrations.c,
 * one for one with the same numbers, in PostgreSQL's dialect (BIGINT for SQLite's
 * 64-bit INTEGER, BIGSERIAL for AUTOINCREMENT ids, DOUBLE PRECISION for REAL, BYTEA for
 * BLOB; "user" quoted, as PostgreSQL reserves the word), with the same tables, columns,
 * indexes and constraints. A database records each step it went through in
 * schema_version; opening applies the steps it lacks in order, each in its own
 * transaction holding a transaction-level advisory lock, so that several servers
 * opening one database at once apply each step once (the one that waited finds the
 * step done); a database that went further than this build knows is refused. A change
 * to the schema is a new step at the end of both lists; a step that has shipped is never
 * edited. */
#include "store/pg.h"

#include "util/macro.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct Migration {
    const char *what;
    const char *sql;
} Migration;

/* Step i takes the database to version i + 1. */
static const Migration steps[] = {
    {"jobs, events, usage, teams, tokens and MIG layouts",
     "CREATE TABLE jobs ("
     " id BIGSERIAL PRIMARY KEY," /* a sequence: ids are never reused */
     " name TEXT NOT NULL,"
     " team TEXT,"
     " project TEXT,"
     " spec_json TEXT NOT NULL,"
     " owner BIGINT NOT NULL,"
     " priority INTEGER NOT NULL,"
     " state INTEGER NOT NULL,"
     " run BIGINT NOT NULL,"
     " preemptions BIGINT NOT NULL,"
     " submit_ms BIGINT NOT NULL,"
     " start_ms BIGINT NOT NULL,"
     " end_ms BIGINT NOT NULL,"
     " exit_code INTEGER NOT NULL,"
     " checkpoint TEXT,"
     " checkpoint_ms BIGINT NOT NULL,"
     " placement_json TEXT);"
     "CREATE INDEX jobs_state ON jobs(state);"
     "CREATE TABLE events ("
     " id BIGSERIAL PRIMARY KEY,"
     " job BIGINT NOT NULL REFERENCES jobs(id),"
     " t_ms BIGINT NOT NULL,"
     " type TEXT NOT NULL,"
     " detail TEXT);"
     "CREATE INDEX events_job ON events(job, t_ms);"
     "CREATE TABLE usage ("
     " id BIGSERIAL PRIMARY KEY,"
     " job BIGINT NOT NULL REFERENCES jobs(id),"
     " team TEXT, project TEXT, pool TEXT, model TEXT, tier TEXT,"
     " gpu_equivalents DOUBLE PRECISION NOT NULL CHECK (gpu_equivalents >= 0),"
     " price_micro_usd BIGINT NOT NULL,"
     " start_ms BIGINT NOT NULL,"
     " end_ms BIGINT NOT NULL CHECK (end_ms >= start_ms));"
     "CREATE INDEX usage_start ON usage(start_ms);"
     "CREATE INDEX usage_end ON usage(end_ms);"
     "CREATE TABLE teams ("
     " name TEXT PRIMARY KEY,"
     " guaranteed_gpus DOUBLE PRECISION NOT NULL,"
     " burst_gpus DOUBLE PRECISION NOT NULL,"
     " weight DOUBLE PRECISION NOT NULL);"
     "CREATE TABLE tokens ("
     " id BIGSERIAL PRIMARY KEY,"
     " hash BYTEA NOT NULL UNIQUE CHECK (octet_length(hash) = 32),"
     " role TEXT NOT NULL,"
     " team TEXT NOT NULL DEFAULT '',"
     " name TEXT NOT NULL DEFAULT '',"
     " created_ms BIGINT NOT NULL);"
     "CREATE TABLE mig_layouts ("
     " node TEXT NOT NULL,"
     " gpu_index BIGINT NOT NULL,"
     " layout_json TEXT NOT NULL,"
     " PRIMARY KEY (node, gpu_index));"},
    {"queue keys of jobs a lead moved (0: ordered by submission)",
     "ALTER TABLE jobs ADD COLUMN queue_key DOUBLE PRECISION NOT NULL DEFAULT 0;"},
    {"teams' monthly GPU-hour budgets set through the API",
     "CREATE TABLE team_budgets ("
     " name TEXT PRIMARY KEY,"
     " budget_gpu_hours DOUBLE PRECISION NOT NULL CHECK (budget_gpu_hours >= 0));"},
    {"agent tokens bound to a node ('' for any node)",
     "ALTER TABLE tokens ADD COLUMN node TEXT NOT NULL DEFAULT '';"},
    {"GPU memory learned per workload class from its runs",
     "CREATE TABLE learned_memory ("
     " class TEXT PRIMARY KEY,"
     " peak_mib BIGINT NOT NULL CHECK (peak_mib >= 0),"
     " ooms BIGINT NOT NULL CHECK (ooms >= 0));"},
    {"spans of time each node counted as capacity; the node of each usage segment",
     "CREATE TABLE node_spans ("
     " id BIGSERIAL PRIMARY KEY,"
     " node TEXT NOT NULL,"
     " pool TEXT, model TEXT, tier TEXT,"
     " basis TEXT NOT NULL,"
     " gpus BIGINT NOT NULL CHECK (gpus >= 0),"
     " price_micro_usd BIGINT NOT NULL CHECK (price_micro_usd >= 0),"
     " start_ms BIGINT NOT NULL,"
     " end_ms BIGINT NOT NULL CHECK (end_ms >= start_ms),"
     " open INTEGER NOT NULL CHECK (open IN (0, 1)));"
     "CREATE INDEX node_spans_start ON node_spans(start_ms);"
     "CREATE INDEX node_spans_end ON node_spans(end_ms);"
     "CREATE INDEX node_spans_open ON node_spans(open) WHERE open = 1;"
     "ALTER TABLE usage ADD COLUMN node TEXT;"},
    {"tokens' user, expiry and revocation; the user who submitted each job",
     "ALTER TABLE tokens ADD COLUMN \"user\" TEXT NOT NULL DEFAULT '';"
     "ALTER TABLE tokens ADD COLUMN expires_ms BIGINT NOT NULL DEFAULT -1;"
     "ALTER TABLE tokens ADD COLUMN revoked_ms BIGINT NOT NULL DEFAULT -1;"
     "UPDATE tokens SET \"user\" = 'admin' WHERE role = 'admin' AND name = 'admin.token';"
     "ALTER TABLE jobs ADD COLUMN \"user\" TEXT;"
     "UPDATE jobs SET \"user\" = (SELECT t.\"user\" FROM tokens t WHERE t.id = jobs.owner "
     "AND t.\"user\" != '');"},
    /* migrations.c says why; strpos for instr, and SQLite's UPDATE OR REPLACE as the
     * delete of the rows the new keys would collide with, then the update */
    {"learned classes belong to a team: rows taught by another team's job are dropped",
     "DELETE FROM learned_memory WHERE class IN ("
     " SELECT c FROM (SELECT j.team AS team, substr(e.detail,"
     "   strpos(e.detail, 'workload class ') + 15,"
     "   strpos(e.detail, ' now asks ') - strpos(e.detail, 'workload class ') - 15) AS c"
     "  FROM events e JOIN jobs j ON j.id = e.job"
     "  WHERE e.type = 'oom' AND strpos(e.detail, 'workload class ') > 0"
     "   AND strpos(e.detail, ' now asks ') > strpos(e.detail, 'workload class ')) x"
     " WHERE substr(c, 1, length(coalesce(team, '')) + 1) != coalesce(team, '') || '/');"
     "DELETE FROM learned_memory WHERE strpos(class, '/') = 0;"
     "DELETE FROM learned_memory WHERE class IN ("
     " SELECT replace(substr(class, 1, strpos(class, '/') - 1), '%', '%25') ||"
     "  substr(class, strpos(class, '/')) FROM learned_memory"
     " WHERE strpos(substr(class, 1, strpos(class, '/') - 1), '%') > 0);"
     "UPDATE learned_memory SET class ="
     " replace(substr(class, 1, strpos(class, '/') - 1), '%', '%25') ||"
     " substr(class, strpos(class, '/'))"
     " WHERE strpos(substr(class, 1, strpos(class, '/') - 1), '%') > 0;"},
    /* 32 hex digits from a random UUID (core since PostgreSQL 13), as SQLite's randomblob */
    {"the server's identity: a random id made once",
     "CREATE TABLE IF NOT EXISTS server_identity (id TEXT NOT NULL CHECK (length(id) = 32));"
     "INSERT INTO server_identity SELECT replace(gen_random_uuid()::text, '-', '')"
     " WHERE NOT EXISTS (SELECT 1 FROM server_identity);"},
    {"jobs by end time", "CREATE INDEX IF NOT EXISTS jobs_end ON jobs(end_ms);"},
    {"the leading server's address and since when it leads",
     "CREATE TABLE leader ("
     " id INTEGER PRIMARY KEY CHECK (id = 1),"
     " url TEXT,"
     " since_ms BIGINT NOT NULL);"},
    {"the measured and busy GPU time of each usage segment",
     "ALTER TABLE usage ADD COLUMN measured_gpu_ms BIGINT NOT NULL DEFAULT 0,"
     " ADD COLUMN busy_gpu_ms BIGINT NOT NULL DEFAULT 0;"},
};

_Static_assert(ARRAY_SIZE(steps) == STORE_SCHEMA_VERSIONS,
               "the SQLite and PostgreSQL back ends must know the same schema versions");

int pg_migrations_latest(void)
{
    return (int)ARRAY_SIZE(steps);
}

static int exec_fail(PGconn *conn, PGresult *res, const char *label, const char *what, Buf *err)
{
    const char *msg = res ? PQresultErrorMessage(res) : "";
    Buf m = {0};
    buf_puts(&m, *msg ? msg : PQerrorMessage(conn));
    while (m.len && (m.data[m.len - 1] == '\n'))
        m.data[--m.len] = '\0';
    int r = store_fail(err, -EIO, label, "%s: %s", what, buf_str(&m));
    buf_free(&m);
    return r;
}

/* One or more statements, without parameters. */
static int exec(PGconn *conn, const char *label, const char *sql, const char *what, Buf *err)
{
    PGresult *res = PQexec(conn, sql);
    ExecStatusType st = PQresultStatus(res);
    int r = st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK
                ? 0
                : exec_fail(conn, res, label, what, err);
    PQclear(res);
    return r;
}

/* The version conn's database is at: 0 for a new one. */
static int read_version(PGconn *conn, const char *label, int *ret, Buf *err)
{
    PGresult *res = PQexec(conn, "SELECT CASE WHEN to_regclass('schema_version') IS NULL "
                                 "THEN 0 ELSE 1 END");
    int r = 0;
    int64_t v = 0;
    if (PQresultStatus(res) != PGRES_TUPLES_OK)
        r = exec_fail(conn, res, label, "reading the schema version", err);
    else if (strcmp(PQgetvalue(res, 0, 0), "1") == 0) {
        PQclear(res);
        res = PQexec(conn, "SELECT coalesce(max(version), 0) FROM schema_version");
        if (PQresultStatus(res) != PGRES_TUPLES_OK)
            r = exec_fail(conn, res, label, "reading the schema version", err);
        else
            v = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
    }
    PQclear(res);
    if (r == 0)
        *ret = (int)MIN(v, INT32_MAX);
    return r;
}

static int refuse_newer(const char *label, int v, Buf *err)
{
    return store_fail(err, -ENOTSUP, label,
                      "the database is at schema version %d, newer than this gpuorch knows (%d); "
                      "use the gpuorch that wrote it, or a newer one",
                      v, pg_migrations_latest());
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Step i inside its transaction, unless another server applied it meanwhile. */
static int apply_step(PGconn *conn, const char *label, int i, Buf *err)
{
    char sql[256];
    int v = 0, r;
    snprintf(sql, sizeof(sql),
             "BEGIN; SELECT pg_advisory_xact_lock(%" PRId64 ");"
             "CREATE TABLE IF NOT EXISTS schema_version ("
             " version INTEGER PRIMARY KEY, applied_ms BIGINT NOT NULL)",
             PG_LOCK_MIGRATE);
    r = exec(conn, label, sql, "starting a migration", err);
    if (r == 0)
        r = read_version(conn, label, &v, err);
    if (r == 0 && v < i + 1) {
        Buf why = {0};
        r = exec(conn, label, steps[i].sql, "step", &why);
        if (r < 0)
            store_fail(err, r, label, "migrating to schema version %d (%s) failed: %s", i + 1,
                       steps[i].what, buf_str(&why));
        buf_free(&why);
        snprintf(sql, sizeof(sql), "INSERT INTO schema_version VALUES (%d, %" PRId64 ")", i + 1,
                 now_ms());
        if (r == 0)
            r = exec(conn, label, sql, "recording the schema version", err);
    }
    if (r == 0)
        r = exec(conn, label, "COMMIT", "committing a migration", err);
    if (r < 0 && PQtransactionStatus(conn) != PQTRANS_IDLE)
        PQclear(PQexec(conn, "ROLLBACK"));
    return r;
}

int pg_migrations_apply(PGconn *conn, const char *label, int *ret_version, Buf *err)
{
    int v, r;
    if ((r = read_version(conn, label, &v, err)) < 0)
        return r;
    if (v > pg_migrations_latest())
        return refuse_newer(label, v, err);
    for (int i = v; i < pg_migrations_latest(); i++)
        if ((r = apply_step(conn, label, i, err)) < 0)
            return r;
    /* another server may have gone further while we stepped */
    if ((r = read_version(conn, label, &v, err)) < 0)
        return r;
    if (v > pg_migrations_latest())
        return refuse_newer(label, v, err);
    *ret_version = v;
    return 0;
}
