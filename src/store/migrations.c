/* migrations.c: the SQLite schema as a list of steps. A database records each step it
 * went through in schema_version; opening applies the steps it lacks in order, each in
 * its own transaction (BEGIN IMMEDIATE, so two servers opening one file at once cannot
 * both apply a step), and a database that went further than this build knows is refused
 * rather than misread. A change to the schema is a new step at the end; a step that has
 * shipped is never edited. */
#include "store/sqlite.h"

#include "util/macro.h"

#include <errno.h>
#include <stdio.h>
#include <time.h>

typedef struct Migration {
    const char *what;
    const char *sql;
} Migration;

/* Step i takes the database to version i + 1. */
static const Migration steps[] = {
    {"jobs, events, usage, teams, tokens and MIG layouts",
     "CREATE TABLE jobs ("
     " id INTEGER PRIMARY KEY AUTOINCREMENT," /* AUTOINCREMENT: ids are never reused */
     " name TEXT NOT NULL,"
     " team TEXT,"
     " project TEXT,"
     " spec_json TEXT NOT NULL,"
     " owner INTEGER NOT NULL,"
     " priority INTEGER NOT NULL,"
     " state INTEGER NOT NULL,"
     " run INTEGER NOT NULL,"
     " preemptions INTEGER NOT NULL,"
     " submit_ms INTEGER NOT NULL,"
     " start_ms INTEGER NOT NULL,"
     " end_ms INTEGER NOT NULL,"
     " exit_code INTEGER NOT NULL,"
     " checkpoint TEXT,"
     " checkpoint_ms INTEGER NOT NULL,"
     " placement_json TEXT);"
     "CREATE INDEX jobs_state ON jobs(state);"
     "CREATE TABLE events ("
     " id INTEGER PRIMARY KEY,"
     " job INTEGER NOT NULL REFERENCES jobs(id),"
     " t_ms INTEGER NOT NULL,"
     " type TEXT NOT NULL,"
     " detail TEXT);"
     "CREATE INDEX events_job ON events(job, t_ms);"
     "CREATE TABLE usage ("
     " id INTEGER PRIMARY KEY,"
     " job INTEGER NOT NULL REFERENCES jobs(id),"
     " team TEXT, project TEXT, pool TEXT, model TEXT, tier TEXT,"
     " gpu_equivalents REAL NOT NULL CHECK (gpu_equivalents >= 0),"
     " price_micro_usd INTEGER NOT NULL,"
     " start_ms INTEGER NOT NULL,"
     " end_ms INTEGER NOT NULL CHECK (end_ms >= start_ms));"
     "CREATE INDEX usage_start ON usage(start_ms);"
     "CREATE INDEX usage_end ON usage(end_ms);"
     "CREATE TABLE teams ("
     " name TEXT PRIMARY KEY,"
     " guaranteed_gpus REAL NOT NULL,"
     " burst_gpus REAL NOT NULL,"
     " weight REAL NOT NULL);"
     "CREATE TABLE tokens ("
     " id INTEGER PRIMARY KEY AUTOINCREMENT,"
     " hash BLOB NOT NULL UNIQUE CHECK (length(hash) = 32),"
     " role TEXT NOT NULL,"
     " team TEXT NOT NULL DEFAULT '',"
     " name TEXT NOT NULL DEFAULT '',"
     " created_ms INTEGER NOT NULL);"
     "CREATE TABLE mig_layouts ("
     " node TEXT NOT NULL,"
     " gpu_index INTEGER NOT NULL,"
     " layout_json TEXT NOT NULL,"
     " PRIMARY KEY (node, gpu_index)) WITHOUT ROWID;"},
    {"queue keys of jobs a lead moved (0: ordered by submission)",
     "ALTER TABLE jobs ADD COLUMN queue_key REAL NOT NULL DEFAULT 0;"},
    /* its own table: a team's quota row is all or nothing (NOT NULL), a budget is set
     * alone */
    {"teams' monthly GPU-hour budgets set through the API",
     "CREATE TABLE team_budgets ("
     " name TEXT PRIMARY KEY,"
     " budget_gpu_hours REAL NOT NULL CHECK (budget_gpu_hours >= 0));"},
    {"agent tokens bound to a node ('' for any node)",
     "ALTER TABLE tokens ADD COLUMN node TEXT NOT NULL DEFAULT '';"},
    {"GPU memory learned per workload class from its runs",
     "CREATE TABLE learned_memory ("
     " class TEXT PRIMARY KEY,"
     " peak_mib INTEGER NOT NULL CHECK (peak_mib >= 0),"
     " ooms INTEGER NOT NULL CHECK (ooms >= 0)) WITHOUT ROWID;"},
    /* idle showback counts what was there: each node's spans of counted capacity, less
     * the allocations on that node within them (so usage names its node) */
    {"spans of time each node counted as capacity; the node of each usage segment",
     "CREATE TABLE node_spans ("
     " id INTEGER PRIMARY KEY AUTOINCREMENT,"
     " node TEXT NOT NULL,"
     " pool TEXT, model TEXT, tier TEXT,"
     " basis TEXT NOT NULL,"
     " gpus INTEGER NOT NULL CHECK (gpus >= 0),"
     " price_micro_usd INTEGER NOT NULL CHECK (price_micro_usd >= 0),"
     " start_ms INTEGER NOT NULL,"
     " end_ms INTEGER NOT NULL CHECK (end_ms >= start_ms),"
     " open INTEGER NOT NULL CHECK (open IN (0, 1)));"
     "CREATE INDEX node_spans_start ON node_spans(start_ms);"
     "CREATE INDEX node_spans_end ON node_spans(end_ms);"
     "CREATE INDEX node_spans_open ON node_spans(open) WHERE open = 1;"
     "ALTER TABLE usage ADD COLUMN node TEXT;"},
    /* a revoked token keeps its row: the jobs and the audit log name it by id, and its
     * hash must never be taken again. The first admin token acts for user "admin". */
    {"tokens' user, expiry and revocation; the user who submitted each job",
     "ALTER TABLE tokens ADD COLUMN user TEXT NOT NULL DEFAULT '';"
     "ALTER TABLE tokens ADD COLUMN expires_ms INTEGER NOT NULL DEFAULT -1;"
     "ALTER TABLE tokens ADD COLUMN revoked_ms INTEGER NOT NULL DEFAULT -1;"
     "UPDATE tokens SET user = 'admin' WHERE role = 'admin' AND name = 'admin.token';"
     "ALTER TABLE jobs ADD COLUMN user TEXT;"
     "UPDATE jobs SET user = (SELECT t.user FROM tokens t WHERE t.id = jobs.owner "
     "AND t.user != '');"},
    /* Before this step a job's explicit class was its key whatever its team, so one
     * team's job could teach another team's class. Keys are now "TEAM/NAME" with TEAM the
     * job's own team (core/learn.h). A row some other team's out-of-memory failure taught
     * (its "oom" event names the class, the event's job is of another team) is dropped,
     * so the next job of the class asks what it writes; a key without '/' (an explicit
     * class of no team) is never read again and goes; the rest are the team's own and
     * stay, a '%' in the team written %25 as keys now are. */
    {"learned classes belong to a team: rows taught by another team's job are dropped",
     "DELETE FROM learned_memory WHERE class IN ("
     " SELECT c FROM (SELECT j.team AS team, substr(e.detail,"
     "   instr(e.detail, 'workload class ') + 15,"
     "   instr(e.detail, ' now asks ') - instr(e.detail, 'workload class ') - 15) AS c"
     "  FROM events e JOIN jobs j ON j.id = e.job"
     "  WHERE e.type = 'oom' AND instr(e.detail, 'workload class ') > 0"
     "   AND instr(e.detail, ' now asks ') > instr(e.detail, 'workload class '))"
     " WHERE substr(c, 1, length(coalesce(team, '')) + 1) != coalesce(team, '') || '/');"
     "DELETE FROM learned_memory WHERE instr(class, '/') = 0;"
     "UPDATE OR REPLACE learned_memory SET class ="
     " replace(substr(class, 1, instr(class, '/') - 1), '%', '%25') ||"
     " substr(class, instr(class, '/'))"
     " WHERE instr(substr(class, 1, instr(class, '/') - 1), '%') > 0;"},
    /* made once, at the step's first run, and never changed: an agent whose saved
     * workers name another id knows they belong to another server (a reinstall, a
     * wiped database) and drops them rather than match them to this one's job ids */
    {"the server's identity: a random id made once",
     "CREATE TABLE IF NOT EXISTS server_identity (id TEXT NOT NULL CHECK (length(id) = 32));"
     "INSERT INTO server_identity SELECT lower(hex(randomblob(16)))"
     " WHERE NOT EXISTS (SELECT 1 FROM server_identity);"},
    /* a restarted server loads what is live and what ended inside its retention, not
     * every job ever run */
    {"jobs by end time", "CREATE INDEX IF NOT EXISTS jobs_end ON jobs(end_ms);"},
    /* one row: who leads (store_lead), for the servers that stand by and their clients */
    {"the leading server's address and since when it leads",
     "CREATE TABLE leader ("
     " id INTEGER PRIMARY KEY CHECK (id = 1),"
     " url TEXT,"
     " since_ms INTEGER NOT NULL);"},
    /* chargeback shows measured busy GPU-hours beside the held ones */
    {"the measured and busy GPU time of each usage segment",
     "ALTER TABLE usage ADD COLUMN measured_gpu_ms INTEGER NOT NULL DEFAULT 0;"
     "ALTER TABLE usage ADD COLUMN busy_gpu_ms INTEGER NOT NULL DEFAULT 0;"},
};

_Static_assert(ARRAY_SIZE(steps) == STORE_SCHEMA_VERSIONS,
               "the SQLite and PostgreSQL back ends must know the same schema versions");

int migrations_latest(void)
{
    return (int)ARRAY_SIZE(steps);
}

static int exec(sqlite3 *conn, const char *label, const char *sql, Buf *err)
{
    char *msg = NULL;
    int rc = sqlite3_exec(conn, sql, NULL, NULL, &msg);
    if (rc == SQLITE_OK)
        return 0;
    int e = rc == SQLITE_NOMEM ? -ENOMEM : -EIO;
    store_fail(err, e, label, "%s", msg ? msg : sqlite3_errstr(rc));
    sqlite3_free(msg);
    return e;
}

/* The version conn's database is at: 0 for a new one. */
static int read_version(sqlite3 *conn, const char *label, int *ret, Buf *err)
{
    static const char *const sql[] = {
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'",
        "SELECT coalesce(max(version), 0) FROM schema_version",
    };
    int64_t v = 0;
    for (size_t i = 0; i < ARRAY_SIZE(sql); i++) {
        sqlite3_stmt *st = NULL;
        int rc = sqlite3_prepare_v2(conn, sql[i], -1, &st, NULL);
        if (rc == SQLITE_OK) {
            rc = sqlite3_step(st);
            v = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
        }
        if (rc != SQLITE_ROW) {
            store_fail(err, -EIO, label, "reading the schema version: %s", sqlite3_errmsg(conn));
            sqlite3_finalize(st);
            return -EIO;
        }
        sqlite3_finalize(st);
        if (v == 0)
            break;
    }
    *ret = (int)MIN(v, INT32_MAX);
    return 0;
}

static int refuse_newer(const char *label, int v, Buf *err)
{
    return store_fail(err, -ENOTSUP, label,
                      "the database is at schema version %d, newer than this gpuorch knows (%d); "
                      "use the gpuorch that wrote it, or a newer one",
                      v, migrations_latest());
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Step i inside its transaction, unless another process applied it meanwhile. */
static int apply_step(sqlite3 *conn, const char *label, int i, Buf *err)
{
    int v, r;
    if ((r = exec(conn, label, "BEGIN IMMEDIATE", err)) < 0)
        return r;
    r = exec(conn, label,
             "CREATE TABLE IF NOT EXISTS schema_version ("
             " version INTEGER PRIMARY KEY, applied_ms INTEGER NOT NULL)",
             err);
    if (r == 0)
        r = read_version(conn, label, &v, err);
    if (r == 0 && v < i + 1) {
        Buf why = {0};
        r = exec(conn, label, steps[i].sql, &why);
        if (r < 0)
            store_fail(err, r, label, "migrating to schema version %d (%s) failed: %s", i + 1,
                       steps[i].what, buf_str(&why));
        buf_free(&why);
        char sql[128];
        snprintf(sql, sizeof(sql), "INSERT INTO schema_version VALUES (%d, %lld)", i + 1,
                 (long long)now_ms());
        if (r == 0)
            r = exec(conn, label, sql, err);
    }
    if (r == 0)
        r = exec(conn, label, "COMMIT", err);
    if (r < 0 && !sqlite3_get_autocommit(conn))
        sqlite3_exec(conn, "ROLLBACK", NULL, NULL, NULL);
    return r;
}

int migrations_apply(sqlite3 *conn, const char *label, int *ret_version, Buf *err)
{
    int v, r;
    if ((r = read_version(conn, label, &v, err)) < 0)
        return r;
    if (v > migrations_latest())
        return refuse_newer(label, v, err);
    for (int i = v; i < migrations_latest(); i++)
        if ((r = apply_step(conn, label, i, err)) < 0)
            return r;
    /* another process may have gone further while we stepped */
    if ((r = read_version(conn, label, &v, err)) < 0)
        return r;
    if (v > migrations_latest())
        return refuse_newer(label, v, err);
    *ret_version = v;
    return 0;
}
