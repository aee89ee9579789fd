/* sqlite_write.c: the SQLite back end's writes. Each public write becomes one part of a
 * group commit (sqlite_commit): an apply function that runs the prepared statements
 * inside the batch's transaction, and a publish function that hands the new ids back
 * only once the batch is durable, so a failed write leaves its out-parameters alone. */
#include "store/sqlite.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

const char *const sqlite_write_sql[WS_COUNT] = {
    [WS_BEGIN] = "BEGIN IMMEDIATE",
    [WS_COMMIT] = "COMMIT",
    [WS_SAVEPOINT] = "SAVEPOINT part",
    [WS_RELEASE] = "RELEASE part",
    [WS_ROLLBACK_TO] = "ROLLBACK TO part",
    [WS_JOB_INSERT] = "INSERT INTO jobs (name, team, project, spec_json, owner, submit_ms, "
                      "priority, state, run, preemptions, start_ms, end_ms, exit_code, "
                      "checkpoint, checkpoint_ms, placement_json, queue_key, user) "
                      "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    [WS_JOB_UPDATE] = "UPDATE jobs SET priority = ?, state = ?, run = ?, preemptions = ?, "
                      "start_ms = ?, end_ms = ?, exit_code = ?, checkpoint = ?, "
                      "checkpoint_ms = ?, placement_json = ?, queue_key = ? WHERE id = ?",
    [WS_EVENT_INSERT] = "INSERT INTO events (job, t_ms, type, detail) VALUES (?, ?, ?, ?)",
    [WS_USAGE_INSERT] = "INSERT INTO usage (job, team, project, pool, model, tier, "
                        "gpu_equivalents, price_micro_usd, start_ms, end_ms, node, "
                        "measured_gpu_ms, busy_gpu_ms) "
                        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    [WS_TEAM_SET] = "INSERT INTO teams (name, guaranteed_gpus, burst_gpus, weight) "
                    "VALUES (?1, ?2, ?3, ?4) ON CONFLICT (name) DO UPDATE SET "
                    "guaranteed_gpus = ?2, burst_gpus = ?3, weight = ?4",
    [WS_TEAM_BUDGET_SET] = "INSERT INTO team_budgets (name, budget_gpu_hours) VALUES (?1, ?2) "
                           "ON CONFLICT (name) DO UPDATE SET budget_gpu_hours = ?2",
    [WS_TOKEN_INSERT] = "INSERT INTO tokens (hash, role, team, node, name, created_ms, user, "
                        "expires_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
    [WS_TOKEN_REVOKE] = "UPDATE tokens SET revoked_ms = ?2 WHERE id = ?1 AND revoked_ms = -1",
    [WS_TOKEN_EXISTS] = "SELECT 1 FROM tokens WHERE id = ?",
    [WS_MIG_SET] = "INSERT INTO mig_layouts (node, gpu_index, layout_json) VALUES (?1, ?2, ?3) "
                   "ON CONFLICT (node, gpu_index) DO UPDATE SET layout_json = ?3",
    [WS_LEARNED_SET] = "INSERT INTO learned_memory (class, peak_mib, ooms) VALUES (?1, ?2, ?3) "
                       "ON CONFLICT (class) DO UPDATE SET peak_mib = ?2, ooms = ?3",
    [WS_LEARNED_FORGET] = "DELETE FROM learned_memory WHERE class = ?",
    [WS_SPAN_OPEN] =
        "INSERT INTO node_spans (node, pool, model, tier, basis, gpus, "
        "price_micro_usd, start_ms, end_ms, open) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 1)",
    /* a clock stepping back never shortens a span */
    [WS_SPAN_END] = "UPDATE node_spans SET end_ms = max(end_ms, ?2), open = (open AND NOT ?3) "
                    "WHERE id = ?1 AND open = 1",
    [WS_SPANS_CLOSE_OPEN] = "UPDATE node_spans SET open = 0 WHERE open = 1",
    [WS_LEADER_SET] = "INSERT INTO leader (id, url, since_ms) VALUES (1, ?1, ?2) "
                      "ON CONFLICT (id) DO UPDATE SET url = ?1, since_ms = ?2",
};

/* Bind a string, NULL as NULL; the caller's string outlives the statement's step. */
static void bind_text(sqlite3_stmt *st, int i, const char *s)
{
    sqlite3_bind_text(st, i, s, -1, SQLITE_STATIC);
}

/* The mutable fields as parameters from..from + 10, in the order both job statements
 * list them; returns the next parameter's index. */
static int bind_job_state(sqlite3_stmt *st, int from, const StoreJob *j)
{
    sqlite3_bind_int(st, from, j->priority);
    sqlite3_bind_int(st, from + 1, j->state);
    sqlite3_bind_int64(st, from + 2, j->run);
    sqlite3_bind_int64(st, from + 3, j->preemptions);
    sqlite3_bind_int64(st, from + 4, j->start_ms);
    sqlite3_bind_int64(st, from + 5, j->end_ms);
    sqlite3_bind_int(st, from + 6, j->exit_code);
    bind_text(st, from + 7, j->checkpoint);
    sqlite3_bind_int64(st, from + 8, j->checkpoint_ms);
    bind_text(st, from + 9, j->placement_json);
    sqlite3_bind_double(st, from + 10, j->queue_key);
    return from + 11;
}

/* A StoreWrite on its way, and the ids of its inserts until they are published. */
typedef struct WritePart {
    StoreWrite *w;
    int64_t *ids;
    int64_t one_id; /* ids when there is one insert: the common submission allocates nothing */
} WritePart;

static int insert_job(SqliteStore *db, const StoreJob *j, int64_t *ret_id, Buf *err)
{
    sqlite3_stmt *st = db->ws[WS_JOB_INSERT];
    bind_text(st, 1, j->name);
    bind_text(st, 2, j->team);
    bind_text(st, 3, j->project);
    bind_text(st, 4, j->spec_json);
    sqlite3_bind_int64(st, 5, j->owner);
    sqlite3_bind_int64(st, 6, j->submit_ms);
    bind_text(st, bind_job_state(st, 7, j), j->user);
    int r = sqlite_run(db, db->wdb, st, err);
    if (r == 0)
        *ret_id = sqlite3_last_insert_rowid(db->wdb);
    return r;
}

static int update_job(SqliteStore *db, const StoreJob *j, Buf *err)
{
    sqlite3_stmt *st = db->ws[WS_JOB_UPDATE];
    sqlite3_bind_int64(st, bind_job_state(st, 1, j), j->id);
    int r = sqlite_run(db, db->wdb, st, err);
    if (r == 0 && sqlite3_changes(db->wdb) == 0)
        r = store_fail(err, -EINVAL, db->path, "no job %lld to update", (long long)j->id);
    return r;
}

/* A job id as events and usage give it: -k is the k-th insert of the same write. */
static int resolve_job(SqliteStore *db, const WritePart *p, int64_t job, int64_t *ret, Buf *err)
{
    if (job >= 0) {
        *ret = job;
        return 0;
    }
    if ((uint64_t) - (job + 1) >= p->w->n_inserts)
        return store_fail(err, -EINVAL, db->path,
                          "job %lld names insert %llu of a write that has %zu", (long long)job,
                          (unsigned long long)-(job + 1) + 1, p->w->n_inserts);
    *ret = p->ids[-(job + 1)];
    return 0;
}

static int insert_event(SqliteStore *db, const WritePart *p, const StoreEvent *e, Buf *err)
{
    int64_t job = 0;
    int r = resolve_job(db, p, e->job, &job, err);
    if (r < 0)
        return r;
    sqlite3_stmt *st = db->ws[WS_EVENT_INSERT];
    sqlite3_bind_int64(st, 1, job);
    sqlite3_bind_int64(st, 2, e->t_ms);
    bind_text(st, 3, e->type);
    bind_text(st, 4, e->detail);
    return sqlite_run(db, db->wdb, st, err);
}

static int insert_usage(SqliteStore *db, const WritePart *p, const StoreUsage *u, Buf *err)
{
    int64_t job = 0;
    int r = resolve_job(db, p, u->job, &job, err);
    if (r < 0)
        return r;
    sqlite3_stmt *st = db->ws[WS_USAGE_INSERT];
    sqlite3_bind_int64(st, 1, job);
    bind_text(st, 2, u->team);
    bind_text(st, 3, u->project);
    bind_text(st, 4, u->pool);
    bind_text(st, 5, u->model);
    bind_text(st, 6, u->tier);
    sqlite3_bind_double(st, 7, u->gpu_equivalents);
    sqlite3_bind_int64(st, 8, u->price_micro_usd);
    sqlite3_bind_int64(st, 9, u->start_ms);
    sqlite3_bind_int64(st, 10, u->end_ms);
    bind_text(st, 11, u->node);
    sqlite3_bind_int64(st, 12, u->measured_gpu_ms);
    sqlite3_bind_int64(st, 13, u->busy_gpu_ms);
    return sqlite_run(db, db->wdb, st, err);
}

static int set_learned(SqliteStore *db, const StoreLearned *l, Buf *err)
{
    sqlite3_stmt *st = db->ws[WS_LEARNED_SET];
    bind_text(st, 1, l->cls);
    sqlite3_bind_int64(st, 2, (sqlite3_int64)l->peak_mib);
    sqlite3_bind_int64(st, 3, l->ooms);
    return sqlite_run(db, db->wdb, st, err);
}

static int forget_learned(SqliteStore *db, const char *cls, Buf *err)
{
    sqlite3_stmt *st = db->ws[WS_LEARNED_FORGET];
    bind_text(st, 1, cls);
    return sqlite_run(db, db->wdb, st, err);
}

static int apply_write(SqliteStore *db, void *arg, Buf *err)
{
    WritePart *p = arg;
    const StoreWrite *w = p->w;
    int r = 0;
    for (size_t i = 0; r == 0 && i < w->n_inserts; i++)
        r = insert_job(db, &w->inserts[i], &p->ids[i], err);
    for (size_t i = 0; r == 0 && i < w->n_updates; i++)
        r = update_job(db, w->updates[i], err);
    for (size_t i = 0; r == 0 && i < w->n_events; i++)
        r = insert_event(db, p, &w->events[i], err);
    for (size_t i = 0; r == 0 && i < w->n_usage; i++)
        r = insert_usage(db, p, &w->usage[i], err);
    for (size_t i = 0; r == 0 && i < w->n_learned; i++)
        r = set_learned(db, &w->learned[i], err);
    for (size_t i = 0; r == 0 && i < w->n_forget; i++)
        r = forget_learned(db, w->forget[i], err);
    return r;
}

static void publish_write(void *arg)
{
    WritePart *p = arg;
    for (size_t i = 0; i < p->w->n_inserts; i++)
        p->w->inserts[i].id = p->ids[i];
}

int sqlite_write_store(Store *s, StoreWrite *w, Buf *err)
{
    if ((w->n_inserts && !w->inserts) || (w->n_updates && !w->updates) ||
        (w->n_events && !w->events) || (w->n_usage && !w->usage) || (w->n_learned && !w->learned) ||
        (w->n_forget && !w->forget))
        return -EINVAL;
    WritePart p = {.w = w, .ids = &p.one_id};
    if (w->n_inserts > 1 && !(p.ids = calloc(w->n_inserts, sizeof(*p.ids))))
        return -ENOMEM;
    int r = sqlite_commit(sqlite_of(s), apply_write, publish_write, &p, err);
    if (p.ids != &p.one_id)
        free(p.ids);
    return r;
}

typedef struct TeamPart {
    const char *name;
    double guaranteed_gpus, burst_gpus, weight;
} TeamPart;

static int apply_team(SqliteStore *db, void *arg, Buf *err)
{
    const TeamPart *t = arg;
    sqlite3_stmt *st = db->ws[WS_TEAM_SET];
    bind_text(st, 1, t->name);
    sqlite3_bind_double(st, 2, t->guaranteed_gpus);
    sqlite3_bind_double(st, 3, t->burst_gpus);
    sqlite3_bind_double(st, 4, t->weight);
    return sqlite_run(db, db->wdb, st, err);
}

int sqlite_write_team(Store *s, const char *name, double guaranteed_gpus, double burst_gpus,
                      double weight)
{
    TeamPart t = {name, guaranteed_gpus, burst_gpus, weight};
    return sqlite_commit(sqlite_of(s), apply_team, NULL, &t, NULL);
}

typedef struct BudgetPart {
    const char *name;
    double budget_gpu_hours;
} BudgetPart;

static int apply_team_budget(SqliteStore *db, void *arg, Buf *err)
{
    const BudgetPart *b = arg;
    sqlite3_stmt *st = db->ws[WS_TEAM_BUDGET_SET];
    bind_text(st, 1, b->name);
    sqlite3_bind_double(st, 2, b->budget_gpu_hours);
    return sqlite_run(db, db->wdb, st, err);
}

int sqlite_write_team_budget(Store *s, const char *name, double budget_gpu_hours)
{
    BudgetPart b = {name, budget_gpu_hours};
    return sqlite_commit(sqlite_of(s), apply_team_budget, NULL, &b, NULL);
}

typedef struct TokenPart {
    const uint8_t *hash;
    const StoreToken *t;
    int64_t id;
    int64_t *ret_id;
} TokenPart;

static int apply_token(SqliteStore *db, void *arg, Buf *err)
{
    TokenPart *p = arg;
    const StoreToken *t = p->t;
    sqlite3_stmt *st = db->ws[WS_TOKEN_INSERT];
    sqlite3_bind_blob(st, 1, p->hash, STORE_TOKEN_HASH_LEN, SQLITE_STATIC);
    bind_text(st, 2, t->role);
    bind_text(st, 3, t->team);
    bind_text(st, 4, t->node);
    bind_text(st, 5, t->name);
    sqlite3_bind_int64(st, 6, t->created_ms);
    bind_text(st, 7, t->user);
    sqlite3_bind_int64(st, 8, t->expires_ms);
    int r = sqlite_run(db, db->wdb, st, err);
    if (r == 0)
        p->id = sqlite3_last_insert_rowid(db->wdb);
    return r;
}

static void publish_token(void *arg)
{
    TokenPart *p = arg;
    if (p->ret_id)
        *p->ret_id = p->id;
}

int sqlite_write_token(Store *s, const uint8_t hash[STORE_TOKEN_HASH_LEN], const StoreToken *t,
                       int64_t *ret_id)
{
    TokenPart p = {hash, t, 0, ret_id};
    return sqlite_commit(sqlite_of(s), apply_token, publish_token, &p, NULL);
}

typedef struct RevokePart {
    int64_t id, now_ms;
} RevokePart;

/* -ENOENT and -EALREADY are this part's own answers: the batch goes on without it. */
static int apply_token_revoke(SqliteStore *db, void *arg, Buf *err)
{
    RevokePart *p = arg;
    sqlite3_stmt *st = db->ws[WS_TOKEN_REVOKE];
    sqlite3_bind_int64(st, 1, p->id);
    sqlite3_bind_int64(st, 2, p->now_ms);
    int r = sqlite_run(db, db->wdb, st, err);
    if (r < 0 || sqlite3_changes(db->wdb) == 1)
        return r;
    st = db->ws[WS_TOKEN_EXISTS];
    sqlite3_bind_int64(st, 1, p->id);
    int rc = sqlite3_step(st);
    r = rc == SQLITE_ROW    ? -EALREADY
        : rc == SQLITE_DONE ? -ENOENT
                            : sqlite_fail(db, db->wdb, rc, err);
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return r;
}

int sqlite_write_token_revoke(Store *s, int64_t id, int64_t now_ms)
{
    RevokePart p = {id, now_ms};
    return sqlite_commit(sqlite_of(s), apply_token_revoke, NULL, &p, NULL);
}

typedef struct MigPart {
    const char *node;
    unsigned index;
    const char *layout_json;
} MigPart;

static int apply_mig(SqliteStore *db, void *arg, Buf *err)
{
    const MigPart *m = arg;
    sqlite3_stmt *st = db->ws[WS_MIG_SET];
    bind_text(st, 1, m->node);
    sqlite3_bind_int64(st, 2, m->index);
    bind_text(st, 3, m->layout_json);
    return sqlite_run(db, db->wdb, st, err);
}

int sqlite_write_mig(Store *s, const char *node, unsigned index, const char *layout_json)
{
    MigPart m = {node, index, layout_json};
    return sqlite_commit(sqlite_of(s), apply_mig, NULL, &m, NULL);
}

typedef struct SpanOpenPart {
    const StoreNodeSpan *spans;
    size_t n;
    int64_t *ids; /* n, written by apply */
    int64_t *ret_ids;
} SpanOpenPart;

static int apply_one_span(SqliteStore *db, const StoreNodeSpan *sp, int64_t *ret_id, Buf *err)
{
    sqlite3_stmt *st = db->ws[WS_SPAN_OPEN];
    bind_text(st, 1, sp->node);
    bind_text(st, 2, sp->pool);
    bind_text(st, 3, sp->model);
    bind_text(st, 4, sp->tier);
    bind_text(st, 5, sp->basis);
    sqlite3_bind_int64(st, 6, sp->gpus);
    sqlite3_bind_int64(st, 7, sp->price_micro_usd);
    sqlite3_bind_int64(st, 8, sp->start_ms);
    sqlite3_bind_int64(st, 9, sp->end_ms);
    int r = sqlite_run(db, db->wdb, st, err);
    if (r == 0)
        *ret_id = sqlite3_last_insert_rowid(db->wdb);
    return r;
}

static int apply_span_open(SqliteStore *db, void *arg, Buf *err)
{
    SpanOpenPart *p = arg;
    int r = 0;
    for (size_t i = 0; i < p->n && r == 0; i++)
        r = apply_one_span(db, &p->spans[i], &p->ids[i], err);
    return r;
}

static void publish_span_open(void *arg)
{
    SpanOpenPart *p = arg;
    memcpy(p->ret_ids, p->ids, p->n * sizeof(*p->ids));
}

int sqlite_write_span_open(Store *s, const StoreNodeSpan *spans, size_t n, int64_t *ret_ids)
{
    SpanOpenPart p = {spans, n, calloc(n ? n : 1, sizeof(int64_t)), ret_ids};
    if (!p.ids)
        return -ENOMEM;
    int r = sqlite_commit(sqlite_of(s), apply_span_open, publish_span_open, &p, NULL);
    free(p.ids);
    return r;
}

typedef struct SpansEndPart {
    const int64_t *ids;
    size_t n;
    int64_t end_ms;
    bool close;
} SpansEndPart;

static int apply_spans_end(SqliteStore *db, void *arg, Buf *err)
{
    const SpansEndPart *p = arg;
    sqlite3_stmt *st = db->ws[WS_SPAN_END];
    int r = 0;
    for (size_t i = 0; r == 0 && i < p->n; i++) {
        sqlite3_bind_int64(st, 1, p->ids[i]);
        sqlite3_bind_int64(st, 2, p->end_ms);
        sqlite3_bind_int(st, 3, p->close);
        r = sqlite_run(db, db->wdb, st, err);
    }
    return r;
}

int sqlite_write_spans_end(Store *s, const int64_t *ids, size_t n, int64_t end_ms, bool close)
{
    SpansEndPart p = {ids, n, end_ms, close};
    return sqlite_commit(sqlite_of(s), apply_spans_end, NULL, &p, NULL);
}

typedef struct CloseOpenPart {
    size_t n;
    size_t *ret_n;
} CloseOpenPart;

static int apply_spans_close_open(SqliteStore *db, void *arg, Buf *err)
{
    CloseOpenPart *p = arg;
    int r = sqlite_run(db, db->wdb, db->ws[WS_SPANS_CLOSE_OPEN], err);
    if (r == 0)
        p->n = (size_t)sqlite3_changes(db->wdb);
    return r;
}

static void publish_close_open(void *arg)
{
    CloseOpenPart *p = arg;
    if (p->ret_n)
        *p->ret_n = p->n;
}

int sqlite_write_spans_close_open(Store *s, size_t *ret_n)
{
    CloseOpenPart p = {0, ret_n};
    return sqlite_commit(sqlite_of(s), apply_spans_close_open, publish_close_open, &p, NULL);
}

typedef struct LeaderPart {
    const char *url;
    int64_t now_ms;
} LeaderPart;

static int apply_leader(SqliteStore *db, void *arg, Buf *err)
{
    const LeaderPart *p = arg;
    sqlite3_stmt *st = db->ws[WS_LEADER_SET];
    bind_text(st, 1, p->url);
    sqlite3_bind_int64(st, 2, p->now_ms);
    return sqlite_run(db, db->wdb, st, err);
}

int sqlite_write_leader(SqliteStore *db, const char *url, int64_t now_ms, Buf *err)
{
    LeaderPart p = {url, now_ms};
    return sqlite_commit(db, apply_leader, NULL, &p, err);
}
