/* pg_write.c: the PostgreSQL back end's writes. Each public write becomes one part of a
 * group commit (pg_commit): a send function that queues its prepared statements on the
 * batch's pipeline without waiting for any answer, a take function that reads their
 * results in order, and a publish function that hands the new ids back only once the
 * batch is durable, so a failed write leaves its out-parameters alone.
 *
 * No statement waits for an earlier one's answer: an insert's new id is kept in the
 * transaction (set_config(..., true), gone at its end) under the insert's number in its
 * write, and the events and usage that name the write's k-th insert as -k read it back
 * there. What SQLite's back end checks between statements (an update that found no job)
 * is made an error of the statement itself, so that the part fails and is rolled back
 * alone. */
#include "store/pg.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* a job id as events and usage give it: -k is the k-th insert of the same write */
#define JOB_REF                                                                                    \
    "CASE WHEN $1::bigint < 0 THEN current_setting('gpuorch.insert_' || (-$1::bigint)::text)"      \
    "::bigint ELSE $1::bigint END"

const char *const pg_write_sql[PW_COUNT] = {
    [PW_BEGIN] = "BEGIN",
    [PW_COMMIT] = "COMMIT",
    [PW_SAVEPOINT] = "SAVEPOINT part",
    [PW_RELEASE] = "RELEASE SAVEPOINT part",
    [PW_ROLLBACK_TO] = "ROLLBACK TO SAVEPOINT part",
    [PW_JOB_INSERT] = "INSERT INTO jobs (name, team, project, spec_json, owner, submit_ms, "
                      "priority, state, run, preemptions, start_ms, end_ms, exit_code, "
                      "checkpoint, checkpoint_ms, placement_json, queue_key, \"user\") "
                      "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, "
                      "$15, $16, $17, $18) "
                      "RETURNING id, set_config('gpuorch.insert_' || $19::text, id::text, true)",
    /* 1 / 0 when no row matched: the part fails (division_by_zero, taken as "no job") */
    [PW_JOB_UPDATE] = "WITH u AS (UPDATE jobs SET priority = $1, state = $2, run = $3, "
                      "preemptions = $4, start_ms = $5, end_ms = $6, exit_code = $7, "
                      "checkpoint = $8, checkpoint_ms = $9, placement_json = $10, "
                      "queue_key = $11 WHERE id = $12 RETURNING 1) SELECT 1 / count(*) FROM u",
    [PW_EVENT_INSERT] =
        "INSERT INTO events (job, t_ms, type, detail) VALUES (" JOB_REF ", $2, $3, $4)",
    [PW_USAGE_INSERT] = "INSERT INTO usage (job, team, project, pool, model, tier, "
                        "gpu_equivalents, price_micro_usd, start_ms, end_ms, node, "
                        "measured_gpu_ms, busy_gpu_ms) VALUES (" JOB_REF
                        ", $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)",
    [PW_TEAM_SET] = "INSERT INTO teams (name, guaranteed_gpus, burst_gpus, weight) "
                    "VALUES ($1, $2, $3, $4) ON CONFLICT (name) DO UPDATE SET "
                    "guaranteed_gpus = EXCLUDED.guaranteed_gpus, burst_gpus = "
                    "EXCLUDED.burst_gpus, weight = EXCLUDED.weight",
    [PW_TEAM_BUDGET_SET] = "INSERT INTO team_budgets (name, budget_gpu_hours) VALUES ($1, $2) "
                           "ON CONFLICT (name) DO UPDATE SET budget_gpu_hours = "
                           "EXCLUDED.budget_gpu_hours",
    [PW_TOKEN_INSERT] = "INSERT INTO tokens (hash, role, team, node, name, created_ms, \"user\", "
                        "expires_ms) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id",
    /* how many it revoked, and whether the token exists (the snapshot before the update) */
    [PW_TOKEN_REVOKE] = "WITH u AS (UPDATE tokens SET revoked_ms = $2 WHERE id = $1 AND "
                        "revoked_ms = -1 RETURNING 1) SELECT (SELECT count(*) FROM u), "
                        "EXISTS (SELECT 1 FROM tokens WHERE id = $1)",
    [PW_MIG_SET] = "INSERT INTO mig_layouts (node, gpu_index, layout_json) VALUES ($1, $2, $3) "
                   "ON CONFLICT (node, gpu_index) DO UPDATE SET layout_json = "
                   "EXCLUDED.layout_json",
    [PW_LEARNED_SET] = "INSERT INTO learned_memory (class, peak_mib, ooms) VALUES ($1, $2, $3) "
                       "ON CONFLICT (class) DO UPDATE SET peak_mib = EXCLUDED.peak_mib, "
                       "ooms = EXCLUDED.ooms",
    [PW_LEARNED_FORGET] = "DELETE FROM learned_memory WHERE class = $1",
    [PW_SPAN_OPEN] = "INSERT INTO node_spans (node, pool, model, tier, basis, gpus, "
                     "price_micro_usd, start_ms, end_ms, open) VALUES ($1, $2, $3, $4, $5, $6, "
                     "$7, $8, $9, 1) RETURNING id",
    /* a clock stepping back never shortens a span */
    [PW_SPAN_END] = "UPDATE node_spans SET end_ms = GREATEST(end_ms, $2), "
                    "open = CASE WHEN $3::boolean THEN 0 ELSE open END "
                    "WHERE id = $1 AND open = 1",
    [PW_SPANS_CLOSE_OPEN] = "UPDATE node_spans SET open = 0 WHERE open = 1",
    [PW_LEADER_SET] = "INSERT INTO leader (id, url, since_ms) VALUES (1, $1, $2) "
                      "ON CONFLICT (id) DO UPDATE SET url = EXCLUDED.url, "
                      "since_ms = EXCLUDED.since_ms",
};

/* A StoreWrite on its way, and the ids of its inserts until they are published. */
typedef struct WritePart {
    StoreWrite *w;
    int64_t *ids;
    int64_t one_id; /* ids when there is one insert: the common submission allocates nothing */
} WritePart;

/* The mutable fields as params[0..10], in the order both job statements list them. */
typedef struct JobState {
    char n[9][PG_NUM];
    char key[PG_NUM];
} JobState;

static void job_state(const StoreJob *j, JobState *b, const char **p)
{
    p[0] = pg_i64(b->n[0], j->priority);
    p[1] = pg_i64(b->n[1], j->state);
    p[2] = pg_i64(b->n[2], j->run);
    p[3] = pg_i64(b->n[3], j->preemptions);
    p[4] = pg_i64(b->n[4], j->start_ms);
    p[5] = pg_i64(b->n[5], j->end_ms);
    p[6] = pg_i64(b->n[6], j->exit_code);
    p[7] = j->checkpoint;
    p[8] = pg_i64(b->n[7], j->checkpoint_ms);
    p[9] = j->placement_json;
    p[10] = pg_f64(b->key, j->queue_key);
}

static int send_insert(PgStore *db, const StoreJob *j, size_t k)
{
    JobState b;
    char owner[PG_NUM], submit[PG_NUM], nth[PG_NUM];
    const char *p[19] = {j->name,
                         j->team,
                         j->project,
                         j->spec_json,
                         pg_i64(owner, j->owner),
                         pg_i64(submit, j->submit_ms)};
    job_state(j, &b, p + 6);
    p[17] = j->user;
    p[18] = pg_i64(nth, (int64_t)k);
    return pg_send(db, PW_JOB_INSERT, 19, p, false, 0);
}

static int send_update(PgStore *db, const StoreJob *j)
{
    JobState b;
    char id[PG_NUM];
    const char *p[12];
    job_state(j, &b, p);
    p[11] = pg_i64(id, j->id);
    return pg_send(db, PW_JOB_UPDATE, 12, p, false, 0);
}

static int send_event(PgStore *db, const StoreEvent *e)
{
    char job[PG_NUM], t[PG_NUM];
    const char *p[] = {pg_i64(job, e->job), pg_i64(t, e->t_ms), e->type, e->detail};
    return pg_send(db, PW_EVENT_INSERT, 4, p, false, 0);
}

static int send_usage(PgStore *db, const StoreUsage *u)
{
    char job[PG_NUM], ge[PG_NUM], price[PG_NUM], start[PG_NUM], end[PG_NUM], meas[PG_NUM],
        busy[PG_NUM];
    const char *p[] = {pg_i64(job, u->job),
                       u->team,
                       u->project,
                       u->pool,
                       u->model,
                       u->tier,
                       pg_f64(ge, u->gpu_equivalents),
                       pg_i64(price, u->price_micro_usd),
                       pg_i64(start, u->start_ms),
                       pg_i64(end, u->end_ms),
                       u->node,
                       pg_i64(meas, u->measured_gpu_ms),
                       pg_i64(busy, u->busy_gpu_ms)};
    return pg_send(db, PW_USAGE_INSERT, 13, p, false, 0);
}

static int send_write(PgStore *db, void *arg)
{
    const StoreWrite *w = ((WritePart *)arg)->w;
    int r = 0;
    for (size_t i = 0; r == 0 && i < w->n_inserts; i++)
        r = send_insert(db, &w->inserts[i], i + 1);
    for (size_t i = 0; r == 0 && i < w->n_updates; i++)
        r = send_update(db, w->updates[i]);
    for (size_t i = 0; r == 0 && i < w->n_events; i++)
        r = send_event(db, &w->events[i]);
    for (size_t i = 0; r == 0 && i < w->n_usage; i++)
        r = send_usage(db, &w->usage[i]);
    for (size_t i = 0; r == 0 && i < w->n_learned; i++) {
        char peak[PG_NUM], ooms[PG_NUM];
        const StoreLearned *l = &w->learned[i];
        const char *p[] = {l->cls, pg_i64(peak, (int64_t)l->peak_mib), pg_i64(ooms, l->ooms)};
        r = pg_send(db, PW_LEARNED_SET, 3, p, false, 0);
    }
    for (size_t i = 0; r == 0 && i < w->n_forget; i++)
        r = pg_send(db, PW_LEARNED_FORGET, 1, &w->forget[i], false, 0);
    return r;
}

static int take_write(PgStore *db, void *arg, size_t i, const PGresult *res, Buf *err)
{
    WritePart *p = arg;
    const StoreWrite *w = p->w;
    bool ok = PQresultStatus(res) == PGRES_TUPLES_OK || PQresultStatus(res) == PGRES_COMMAND_OK;
    if (i < w->n_inserts) {
        if (ok)
            p->ids[i] = pg_get_i64(res, 0, 0);
    } else if (i < w->n_inserts + w->n_updates && !ok) {
        const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
        if (state && strcmp(state, "22012") == 0)
            return store_fail(err, -EINVAL, db->label, "no job %" PRId64 " to update",
                              w->updates[i - w->n_inserts]->id);
    }
    return pg_result_fail(db, db->wconn, res, err);
}

static void publish_write(void *arg)
{
    WritePart *p = arg;
    for (size_t i = 0; i < p->w->n_inserts; i++)
        p->w->inserts[i].id = p->ids[i];
}

static const PgPart write_part = {send_write, take_write, publish_write};

/* A job id as events and usage give it: -k must name one of the write's inserts. */
static int check_ref(PgStore *db, const StoreWrite *w, int64_t job, Buf *err)
{
    if (job >= 0 || (uint64_t) - (job + 1) < w->n_inserts)
        return 0;
    return store_fail(err, -EINVAL, db->label,
                      "job %" PRId64 " names insert %" PRIu64 " of a write that has %zu", job,
                      (uint64_t) - (job + 1) + 1, w->n_inserts);
}

int pg_write_store(Store *s, StoreWrite *w, Buf *err)
{
    PgStore *db = pg_of(s);
    if ((w->n_inserts && !w->inserts) || (w->n_updates && !w->updates) ||
        (w->n_events && !w->events) || (w->n_usage && !w->usage) || (w->n_learned && !w->learned) ||
        (w->n_forget && !w->forget))
        return -EINVAL;
    int r = 0;
    for (size_t i = 0; r == 0 && i < w->n_events; i++)
        r = check_ref(db, w, w->events[i].job, err);
    for (size_t i = 0; r == 0 && i < w->n_usage; i++)
        r = check_ref(db, w, w->usage[i].job, err);
    if (r < 0)
        return r;
    WritePart p = {.w = w, .ids = &p.one_id};
    if (w->n_inserts > 1 && !(p.ids = calloc(w->n_inserts, sizeof(*p.ids))))
        return -ENOMEM;
    r = pg_commit(db, &write_part, &p, err);
    if (p.ids != &p.one_id)
        free(p.ids);
    return r;
}

/* A part of one statement whose parameters are all given at the call. */
typedef struct OnePart {
    int which;
    int n;
    const char *const *params;
} OnePart;

static int send_one(PgStore *db, void *arg)
{
    const OnePart *o = arg;
    return pg_send(db, o->which, o->n, o->params, false, 0);
}

static const PgPart one_part = {send_one, pg_take_status, NULL};

static int commit_one(Store *s, int which, int n, const char *const *params)
{
    OnePart o = {which, n, params};
    return pg_commit(pg_of(s), &one_part, &o, NULL);
}

int pg_write_team(Store *s, const char *name, double guaranteed_gpus, double burst_gpus,
                  double weight)
{
    char g[PG_NUM], b[PG_NUM], w[PG_NUM];
    const char *p[] = {name, pg_f64(g, guaranteed_gpus), pg_f64(b, burst_gpus), pg_f64(w, weight)};
    return commit_one(s, PW_TEAM_SET, 4, p);
}

int pg_write_team_budget(Store *s, const char *name, double budget_gpu_hours)
{
    char b[PG_NUM];
    const char *p[] = {name, pg_f64(b, budget_gpu_hours)};
    return commit_one(s, PW_TEAM_BUDGET_SET, 2, p);
}

int pg_write_mig(Store *s, const char *node, unsigned index, const char *layout_json)
{
    char i[PG_NUM];
    const char *p[] = {node, pg_i64(i, index), layout_json};
    return commit_one(s, PW_MIG_SET, 3, p);
}

typedef struct TokenPart {
    const uint8_t *hash;
    const StoreToken *t;
    int64_t id;
    int64_t *ret_id;
} TokenPart;

static int send_token(PgStore *db, void *arg)
{
    const TokenPart *p = arg;
    const StoreToken *t = p->t;
    char created[PG_NUM], expires[PG_NUM];
    const char *q[] = {(const char *)p->hash,
                       t->role,
                       t->team,
                       t->node,
                       t->name,
                       pg_i64(created, t->created_ms),
                       t->user,
                       pg_i64(expires, t->expires_ms)};
    return pg_send(db, PW_TOKEN_INSERT, 8, q, true, STORE_TOKEN_HASH_LEN);
}

static int take_token(PgStore *db, void *arg, size_t i, const PGresult *res, Buf *err)
{
    TokenPart *p = arg;
    if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1)
        p->id = pg_get_i64(res, 0, 0);
    return pg_result_fail(db, db->wconn, res, err);
}

static void publish_token(void *arg)
{
    TokenPart *p = arg;
    if (p->ret_id)
        *p->ret_id = p->id;
}

static const PgPart token_part = {send_token, take_token, publish_token};

int pg_write_token(Store *s, const uint8_t hash[STORE_TOKEN_HASH_LEN], const StoreToken *t,
                   int64_t *ret_id)
{
    TokenPart p = {hash, t, 0, ret_id};
    return pg_commit(pg_of(s), &token_part, &p, NULL);
}

typedef struct RevokePart {
    int64_t id, now_ms;
} RevokePart;

static int send_revoke(PgStore *db, void *arg)
{
    const RevokePart *p = arg;
    char id[PG_NUM], now[PG_NUM];
    const char *q[] = {pg_i64(id, p->id), pg_i64(now, p->now_ms)};
    return pg_send(db, PW_TOKEN_REVOKE, 2, q, false, 0);
}

/* -ENOENT and -EALREADY are this part's own answers: the batch goes on without it. */
static int take_revoke(PgStore *db, void *arg, size_t i, const PGresult *res, Buf *err)
{
    int r = pg_result_fail(db, db->wconn, res, err);
    if (r < 0 || PQntuples(res) != 1)
        return r < 0 ? r : -EIO;
    if (pg_get_i64(res, 0, 0) == 1)
        return 0;
    return strcmp(PQgetvalue(res, 0, 1), "t") == 0 ? -EALREADY : -ENOENT;
}

static const PgPart revoke_part = {send_revoke, take_revoke, NULL};

int pg_write_token_revoke(Store *s, int64_t id, int64_t now_ms)
{
    RevokePart p = {id, now_ms};
    return pg_commit(pg_of(s), &revoke_part, &p, NULL);
}

typedef struct SpanOpenPart {
    const StoreNodeSpan *spans;
    size_t n;
    int64_t *ids; /* n, written by take */
    int64_t *ret_ids;
} SpanOpenPart;

static int send_span_open(PgStore *db, void *arg)
{
    const SpanOpenPart *p = arg;
    int r = 0;
    for (size_t i = 0; i < p->n && r == 0; i++) {
        const StoreNodeSpan *sp = &p->spans[i];
        char gpus[PG_NUM], price[PG_NUM], start[PG_NUM], end[PG_NUM];
        const char *q[] = {sp->node,
                           sp->pool,
                           sp->model,
                           sp->tier,
                           sp->basis,
                           pg_i64(gpus, sp->gpus),
                           pg_i64(price, sp->price_micro_usd),
                           pg_i64(start, sp->start_ms),
                           pg_i64(end, sp->end_ms)};
        r = pg_send(db, PW_SPAN_OPEN, 9, q, false, 0);
    }
    return r;
}

static int take_span_open(PgStore *db, void *arg, size_t i, const PGresult *res, Buf *err)
{
    SpanOpenPart *p = arg;
    if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1 && i < p->n)
        p->ids[i] = pg_get_i64(res, 0, 0);
    return pg_result_fail(db, db->wconn, res, err);
}

static void publish_span_open(void *arg)
{
    SpanOpenPart *p = arg;
    memcpy(p->ret_ids, p->ids, p->n * sizeof(*p->ids));
}

static const PgPart span_open_part = {send_span_open, take_span_open, publish_span_open};

int pg_write_span_open(Store *s, const StoreNodeSpan *spans, size_t n, int64_t *ret_ids)
{
    SpanOpenPart p = {spans, n, calloc(n ? n : 1, sizeof(int64_t)), ret_ids};
    if (!p.ids)
        return -ENOMEM;
    int r = pg_commit(pg_of(s), &span_open_part, &p, NULL);
    free(p.ids);
    return r;
}

typedef struct SpansEndPart {
    const int64_t *ids;
    size_t n;
    int64_t end_ms;
    bool close;
} SpansEndPart;

static int send_spans_end(PgStore *db, void *arg)
{
    const SpansEndPart *p = arg;
    int r = 0;
    for (size_t i = 0; r == 0 && i < p->n; i++) {
        char id[PG_NUM], end[PG_NUM];
        const char *q[] = {pg_i64(id, p->ids[i]), pg_i64(end, p->end_ms), p->close ? "t" : "f"};
        r = pg_send(db, PW_SPAN_END, 3, q, false, 0);
    }
    return r;
}

static const PgPart spans_end_part = {send_spans_end, pg_take_status, NULL};

int pg_write_spans_end(Store *s, const int64_t *ids, size_t n, int64_t end_ms, bool close)
{
    SpansEndPart p = {ids, n, end_ms, close};
    return pg_commit(pg_of(s), &spans_end_part, &p, NULL);
}

typedef struct CloseOpenPart {
    size_t n;
    size_t *ret_n;
} CloseOpenPart;

static int send_close_open(PgStore *db, void *arg)
{
    return pg_send(db, PW_SPANS_CLOSE_OPEN, 0, NULL, false, 0);
}

static int take_close_open(PgStore *db, void *arg, size_t i, const PGresult *res, Buf *err)
{
    CloseOpenPart *p = arg;
    int r = pg_result_fail(db, db->wconn, res, err);
    if (r == 0)
        p->n = (size_t)strtoull(PQcmdTuples((PGresult *)res), NULL, 10);
    return r;
}

static void publish_close_open(void *arg)
{
    CloseOpenPart *p = arg;
    if (p->ret_n)
        *p->ret_n = p->n;
}

static const PgPart close_open_part = {send_close_open, take_close_open, publish_close_open};

int pg_write_spans_close_open(Store *s, size_t *ret_n)
{
    CloseOpenPart p = {0, ret_n};
    return pg_commit(pg_of(s), &close_open_part, &p, NULL);
}
