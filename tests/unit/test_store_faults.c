/* test_store_faults.c: the store under failing memory and a failing disk, as SQLite's own
 * tests do it (fault_fixture.h). A scenario opens a new store and makes the writes the
 * server makes (a token, a submission of two jobs, a job's start with what its class
 * learned, team quota and budget, two node spans opened, moved on and closed, a MIG
 * layout, a job's end with its usage, another submission, another token, a
 * cancellation, a token's revocation), each against the model a server keeps in memory; for every N
 * the scenario reaches, it runs with the Nth SQLite allocation (or write, fsync, truncate) failing,
 * once or from then on, and records which writes returned success. Then the database is opened
 * again without faults and must open cleanly, hold every acknowledged write and, of every failed
 * one, all or nothing, with its out-parameters untouched; and take a new write. ASan checks that no
 * failure path leaks.
 *
 * `make test` tries every STRIDE-th N (a fixed stride per kind, so the run is seconds
 * and the same every time); GPUORCH_FAULT_STRIDE=1 tries every N (minutes). */
#include "store/store.h"
#include "util/buf.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "fault_fixture.h"

enum {
    OP_TOKEN1,
    OP_SUBMIT_AB,
    OP_START_A,
    OP_TEAM,
    OP_BUDGET,
    OP_SPANS_OPEN,
    OP_SPANS_END,
    OP_MIG,
    OP_FINISH_A,
    OP_SUBMIT_C,
    OP_TOKEN2,
    OP_SPANS_CLOSE,
    OP_CANCEL_B,
    OP_REVOKE1,
    OP_COUNT
};

typedef enum Outcome { NOT_RUN, ACKED, FAILED } Outcome;

/* What one run of the scenario was told. */
typedef struct Run {
    bool opened;
    int64_t open_calls; /* calls of the armed kind opening the store made */
    Outcome op[OP_COUNT];
    int64_t id_a, id_b, id_c;
    int64_t token1, token2;
    int64_t spans[2];
} Run;

enum { ST_PENDING = 0, ST_RUNNING = 2, ST_SUCCEEDED = 4, ST_CANCELLED = 6 };
#define UNSET     (-7) /* an out-parameter before the call */
#define PLACEMENT "{\"workers\":[{\"node\":0}]}"
#define LAYOUT    "[{\"profile\":\"3g.40gb\",\"start\":0}]"

/* The schema version a store opened without faults reaches (main). */
static int latest_version;

static const StoreToken token1 = {.role = "admin",
                                  .name = "admin",
                                  .user = "root",
                                  .created_ms = 10,
                                  .expires_ms = -1,
                                  .revoked_ms = -1};
static const StoreToken token2 = {.role = "member",
                                  .team = "t",
                                  .name = "m",
                                  .user = "ann",
                                  .created_ms = 20,
                                  .expires_ms = 90000,
                                  .revoked_ms = -1};

static const uint8_t hash1[STORE_TOKEN_HASH_LEN] = {1, 2, 3};
static const uint8_t hash2[STORE_TOKEN_HASH_LEN] = {4, 5, 6};

static StoreJob new_job(const char *name, int64_t submit_ms)
{
    return (StoreJob){.name = (char *)name,
                      .team = (char *)"t",
                      .spec_json = (char *)"{\"gpus\":1}",
                      .owner = 1,
                      .state = ST_PENDING,
                      .submit_ms = submit_ms,
                      .start_ms = -1,
                      .end_ms = -1,
                      .exit_code = -1,
                      .checkpoint_ms = -1};
}

/* r of a write: success, or the failure the store documents (never another code, never
 * a positive one). */
static Outcome outcome(int r, const char *what)
{
    if (r != 0 && r != -ENOMEM && r != -EIO) {
        print_message("%s returned %d\n", what, r);
        fail();
    }
    return r == 0 ? ACKED : FAILED;
}

static Outcome write_one(Store *s, StoreWrite *w, const char *what)
{
    Buf err = {0};
    int r = store_write(s, w, &err);
    /* a failure says why */
    if (r < 0)
        assert_true(err.len > 0);
    buf_free(&err);
    return outcome(r, what);
}

/* Which calls a loop fails: those of opening the new store (its migrations), or those
 * of the writes after it (the fault armed once the store is open). */
typedef enum Phase { PHASE_OPEN, PHASE_WRITES } Phase;

/* The plan a scenario arms, at the start or once the store is open. */
typedef struct Arm {
    Phase phase;
    FaultKind kind;
    int64_t at;
    bool persistent;
} Arm;

/* What a process killed now leaves: the database and its log as the kernel has them
 * (the -shm index is rebuilt by whoever opens the database first). */
static void copy_file(const char *from, const char *to)
{
    FILE *in = fopen(from, "rb");
    if (!in)
        return; /* no log: nothing was written since the last checkpoint */
    FILE *out = fopen(to, "wb");
    assert_non_null(out);
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), in)) > 0)
        assert_int_equal(fwrite(buf, 1, n, out), n);
    fclose(in);
    assert_int_equal(fclose(out), 0);
}

static void copy_db(const char *path, const char *to)
{
    char a[160], b[160];
    copy_file(path, to);
    snprintf(a, sizeof(a), "%s-wal", path);
    snprintf(b, sizeof(b), "%s-wal", to);
    copy_file(a, b);
}

/* Run the scenario on a new database at path; when crash_path is given, copy what a
 * crash after the last write would leave there. */
static void scenario(const char *path, const Arm *arm, Run *run, const char *crash_path)
{
    *run = (Run){.id_a = UNSET,
                 .id_b = UNSET,
                 .id_c = UNSET,
                 .token1 = UNSET,
                 .token2 = UNSET,
                 .spans = {UNSET, UNSET}};
    Store *s = NULL;
    Buf err = {0};
    if (arm && arm->phase == PHASE_OPEN)
        fault_arm(arm->kind, arm->at, arm->persistent);
    int r = store_open(path, &s, &err);
    run->open_calls = fault_plan.count;
    if (arm && arm->phase == PHASE_WRITES)
        fault_arm(arm->kind, arm->at, arm->persistent);
    if (r < 0) {
        assert_true(r == -ENOMEM || r == -EIO);
        assert_true(err.len > 0);
        assert_null(s);
        buf_free(&err);
        return;
    }
    buf_free(&err);
    run->opened = true;

    int64_t id = UNSET;
    run->op[OP_TOKEN1] = outcome(store_token_insert(s, hash1, &token1, &id), "token 1");
    if (run->op[OP_TOKEN1] == ACKED)
        run->token1 = id;
    else
        assert_int_equal(id, UNSET);

    StoreJob ab[2] = {new_job("a", 100), new_job("b", 100)};
    StoreEvent submit_ev[2] = {{.job = -1, .t_ms = 100, .type = "submit"},
                               {.job = -2, .t_ms = 100, .type = "submit"}};
    StoreWrite w = {.inserts = ab, .n_inserts = 2, .events = submit_ev, .n_events = 2};
    run->op[OP_SUBMIT_AB] = write_one(s, &w, "submit a, b");
    if (run->op[OP_SUBMIT_AB] == ACKED) {
        assert_true(ab[0].id > 0 && ab[1].id == ab[0].id + 1);
        run->id_a = ab[0].id;
        run->id_b = ab[1].id;
    } else {
        assert_int_equal(ab[0].id, 0);
        assert_int_equal(ab[1].id, 0);
    }

    /* the server's model of job a: changed on a copy, kept only when the write is */
    StoreJob a = ab[0];
    if (run->op[OP_SUBMIT_AB] == ACKED) {
        StoreJob next = a;
        next.state = ST_RUNNING;
        next.run = 1;
        next.start_ms = 1000;
        next.placement_json = (char *)PLACEMENT;
        const StoreJob *up[] = {&next};
        StoreEvent ev = {.job = a.id, .t_ms = 1000, .type = "start", .detail = "on n0"};
        StoreLearned l = {.cls = "c1", .peak_mib = 4096, .ooms = 1};
        w = (StoreWrite){.updates = up,
                         .n_updates = 1,
                         .events = &ev,
                         .n_events = 1,
                         .learned = &l,
                         .n_learned = 1};
        run->op[OP_START_A] = write_one(s, &w, "start a");
        if (run->op[OP_START_A] == ACKED)
            a = next;
    }

    run->op[OP_TEAM] = outcome(store_team_set(s, "t", 1, 2, 0.5), "team");
    run->op[OP_BUDGET] = outcome(store_team_budget_set(s, "t", 10), "budget");

    StoreNodeSpan spans[2] = {
        {.node = "n0",
         .pool = "p",
         .model = "H100",
         .tier = "on-demand",
         .basis = "ready",
         .gpus = 8,
         .price_micro_usd = 100,
         .start_ms = 1000,
         .end_ms = 1001},
        {.node = "n1",
         .pool = "p",
         .model = "H100",
         .tier = "on-demand",
         .basis = "ready",
         .gpus = 8,
         .price_micro_usd = 100,
         .start_ms = 1000,
         .end_ms = 1001},
    };
    int64_t span_ids[2] = {UNSET, UNSET};
    run->op[OP_SPANS_OPEN] = outcome(store_node_spans_open(s, spans, 2, span_ids), "spans open");
    if (run->op[OP_SPANS_OPEN] == ACKED) {
        memcpy(run->spans, span_ids, sizeof(span_ids));
        run->op[OP_SPANS_END] =
            outcome(store_node_spans_end(s, span_ids, 2, 5000, false), "spans end");
    } else {
        assert_int_equal(span_ids[0], UNSET);
        assert_int_equal(span_ids[1], UNSET);
    }

    run->op[OP_MIG] = outcome(store_mig_set(s, "n0", 0, LAYOUT), "mig");

    if (run->op[OP_START_A] == ACKED) {
        StoreJob next = a;
        next.state = ST_SUCCEEDED;
        next.end_ms = 6000;
        next.exit_code = 0;
        next.placement_json = NULL;
        const StoreJob *up[] = {&next};
        StoreEvent ev = {.job = a.id, .t_ms = 6000, .type = "finish", .detail = "exit 0"};
        StoreUsage u = {.job = a.id,
                        .team = "t",
                        .pool = "p",
                        .model = "H100",
                        .tier = "on-demand",
                        .node = "n0",
                        .gpu_equivalents = 1,
                        .price_micro_usd = 100,
                        .start_ms = 1000,
                        .end_ms = 6000};
        w = (StoreWrite){
            .updates = up, .n_updates = 1, .events = &ev, .n_events = 1, .usage = &u, .n_usage = 1};
        run->op[OP_FINISH_A] = write_one(s, &w, "finish a");
    }

    StoreJob c = new_job("c", 6500);
    StoreEvent cev = {.job = -1, .t_ms = 6500, .type = "submit"};
    w = (StoreWrite){.inserts = &c, .n_inserts = 1, .events = &cev, .n_events = 1};
    run->op[OP_SUBMIT_C] = write_one(s, &w, "submit c");
    if (run->op[OP_SUBMIT_C] == ACKED)
        run->id_c = c.id;
    else
        assert_int_equal(c.id, 0);

    id = UNSET;
    run->op[OP_TOKEN2] = outcome(store_token_insert(s, hash2, &token2, &id), "token 2");
    if (run->op[OP_TOKEN2] == ACKED)
        run->token2 = id;
    else
        assert_int_equal(id, UNSET);

    size_t n_closed = 99;
    run->op[OP_SPANS_CLOSE] = outcome(store_node_spans_close_open(s, &n_closed), "spans close");
    if (run->op[OP_SPANS_CLOSE] == ACKED)
        assert_true(n_closed <= 2);
    else
        assert_int_equal(n_closed, 99);

    if (run->op[OP_SUBMIT_AB] == ACKED) {
        StoreJob next = ab[1];
        next.state = ST_CANCELLED;
        next.end_ms = 7000;
        const StoreJob *up[] = {&next};
        StoreEvent ev = {.job = next.id, .t_ms = 7000, .type = "cancel"};
        w = (StoreWrite){.updates = up, .n_updates = 1, .events = &ev, .n_events = 1};
        run->op[OP_CANCEL_B] = write_one(s, &w, "cancel b");
    }

    if (run->op[OP_TOKEN1] == ACKED) {
        int r1 = store_token_revoke(s, run->token1, 9000);
        /* it exists and was never revoked: success or a failure of the store */
        run->op[OP_REVOKE1] = outcome(r1, "revoke token 1");
    }

    /* a read under the fault: an error, or a view that holds what was acknowledged */
    int64_t tokens = UNSET;
    if (store_token_count(s, &tokens) == 0)
        assert_true(tokens >= (run->op[OP_TOKEN1] == ACKED) + (run->op[OP_TOKEN2] == ACKED));
    if (crash_path)
        copy_db(path, crash_path);
    store_close(s);
}

/* ---- what the reopened database holds ---- */

typedef struct Seen {
    StoreJob jobs[8];
    size_t n_jobs;
    char events[8][8][16]; /* per job found: its event types */
    size_t n_events[8];
    bool team, budget, mig, learned;
    double team_w, budget_h;
    uint64_t learned_mib;
    StoreNodeSpan spans[4];
    size_t n_spans;
    size_t n_usage;
    StoreUsage usage;
} Seen;

static int seen_job(void *arg, StoreJob *j)
{
    Seen *s = arg;
    assert_true(s->n_jobs < 8);
    s->jobs[s->n_jobs++] = *j;
    return 0;
}

typedef struct EvCtx {
    Seen *s;
    size_t k;
} EvCtx;

static int seen_event(void *arg, int64_t t_ms, const char *type, const char *detail)
{
    EvCtx *e = arg;
    assert_true(e->s->n_events[e->k] < 8);
    snprintf(e->s->events[e->k][e->s->n_events[e->k]++], 16, "%s", type);
    return 0;
}

static int seen_team(void *arg, const char *name, double g, double b, double w)
{
    Seen *s = arg;
    assert_string_equal(name, "t");
    assert_true(g == 1 && b == 2);
    s->team = true;
    s->team_w = w;
    return 0;
}

static int seen_budget(void *arg, const char *name, double h)
{
    Seen *s = arg;
    assert_string_equal(name, "t");
    s->budget = true;
    s->budget_h = h;
    return 0;
}

static int seen_mig(void *arg, const char *node, unsigned index, const char *layout)
{
    Seen *s = arg;
    assert_string_equal(node, "n0");
    assert_int_equal(index, 0);
    assert_string_equal(layout, LAYOUT);
    s->mig = true;
    return 0;
}

static int seen_learned(void *arg, const char *cls, uint64_t peak_mib, unsigned ooms)
{
    Seen *s = arg;
    assert_string_equal(cls, "c1");
    assert_int_equal(ooms, 1);
    s->learned = true;
    s->learned_mib = peak_mib;
    return 0;
}

static int seen_span(void *arg, const StoreNodeSpan *sp)
{
    Seen *s = arg;
    assert_true(s->n_spans < 4);
    s->spans[s->n_spans++] = *sp;
    s->spans[s->n_spans - 1].node = NULL; /* valid during the call only */
    return 0;
}

static int seen_usage(void *arg, const StoreUsage *u)
{
    Seen *s = arg;
    s->n_usage++;
    s->usage = *u;
    assert_string_equal(u->node, "n0");
    assert_string_equal(u->team, "t");
    return 0;
}

static const StoreJob *job_named(const Seen *s, const char *name, size_t *ret_k)
{
    for (size_t k = 0; k < s->n_jobs; k++)
        if (!strcmp(s->jobs[k].name, name)) {
            *ret_k = k;
            return &s->jobs[k];
        }
    return NULL;
}

static bool has_event(const Seen *s, size_t k, const char *type)
{
    for (size_t i = 0; i < s->n_events[k]; i++)
        if (!strcmp(s->events[k][i], type))
            return true;
    return false;
}

/* Whether a failed write may still turn up: only while the disk fails on (a commit
 * whose fsync failed may be whole in the log, which the next opening recovers). Once a
 * write after it succeeds, or the store's own check after the failure does, a failed
 * write is gone for good: the caller was told it was not saved. */
static bool failed_may_remain;

/* A write's effect: there when acknowledged, absent when not run or failed, except as
 * above. */
static void effect(Outcome o, bool there, const char *what)
{
    if ((o == ACKED && !there) || (o == NOT_RUN && there) ||
        (o == FAILED && there && !failed_may_remain)) {
        print_message("%s: %s but %s\n", what,
                      o == ACKED    ? "acknowledged"
                      : o == FAILED ? "failed"
                                    : "never written",
                      there ? "there" : "missing");
        fail();
    }
}

static void check_jobs(const Run *run, const Seen *seen)
{
    size_t ka = 0, kb = 0, kc = 0;
    const StoreJob *a = job_named(seen, "a", &ka), *b = job_named(seen, "b", &kb),
                   *c = job_named(seen, "c", &kc);
    /* a and b went in one write */
    assert_true(!a == !b);
    effect(run->op[OP_SUBMIT_AB], a != NULL, "jobs a and b");
    effect(run->op[OP_SUBMIT_C], c != NULL, "job c");
    assert_int_equal(seen->n_jobs, (a != NULL) + (b != NULL) + (c != NULL));
    if (a && run->op[OP_SUBMIT_AB] == ACKED) {
        assert_int_equal(a->id, run->id_a);
        assert_int_equal(b->id, run->id_b);
    }
    if (c && run->op[OP_SUBMIT_C] == ACKED)
        assert_int_equal(c->id, run->id_c);
    if (a) {
        assert_true(has_event(seen, ka, "submit") && has_event(seen, kb, "submit"));
        bool started = a->state == ST_RUNNING || a->state == ST_SUCCEEDED;
        bool finished = a->state == ST_SUCCEEDED;
        assert_true(a->state == ST_PENDING || started);
        effect(run->op[OP_START_A], started, "a's start");
        effect(run->op[OP_FINISH_A], finished, "a's end");
        /* each write whole: the state, its event, what the class learned, the usage */
        assert_int_equal(has_event(seen, ka, "start"), started);
        assert_int_equal(seen->learned, started);
        assert_int_equal(has_event(seen, ka, "finish"), finished);
        assert_int_equal(seen->n_usage, finished);
        if (started) {
            assert_int_equal(a->run, 1);
            assert_int_equal(a->start_ms, 1000);
            assert_int_equal(seen->learned_mib, 4096);
        }
        if (a->state == ST_RUNNING)
            assert_string_equal(a->placement_json, PLACEMENT);
        if (finished) {
            assert_null(a->placement_json);
            assert_int_equal(a->end_ms, 6000);
            assert_int_equal(a->exit_code, 0);
            assert_int_equal(seen->usage.start_ms, 1000);
            assert_int_equal(seen->usage.end_ms, 6000);
        }
        bool cancelled = b->state == ST_CANCELLED;
        assert_true(b->state == ST_PENDING || cancelled);
        effect(run->op[OP_CANCEL_B], cancelled, "b's cancellation");
        assert_int_equal(has_event(seen, kb, "cancel"), cancelled);
        if (cancelled)
            assert_int_equal(b->end_ms, 7000);
    } else {
        assert_false(seen->learned);
        assert_int_equal(seen->n_usage, 0);
    }
    if (c)
        assert_true(has_event(seen, kc, "submit") && c->state == ST_PENDING);
}

static void check_spans(const Run *run, const Seen *seen)
{
    /* opened together */
    assert_true(seen->n_spans == 0 || seen->n_spans == 2);
    effect(run->op[OP_SPANS_OPEN], seen->n_spans == 2, "the spans");
    if (!seen->n_spans)
        return;
    const StoreNodeSpan *s0 = &seen->spans[0], *s1 = &seen->spans[1];
    if (run->op[OP_SPANS_OPEN] == ACKED) {
        assert_int_equal(s0->id, run->spans[0]);
        assert_int_equal(s1->id, run->spans[1]);
    }
    assert_int_equal(s0->open, s1->open);
    /* spans whose opening failed and came back with the log (a dead disk: the failed
     * commit's frames stay in the WAL, which the next opening recovers) came back after
     * the closing, which saw none */
    if (run->op[OP_SPANS_OPEN] == ACKED)
        effect(run->op[OP_SPANS_CLOSE], !s0->open, "the spans' closing");
    if (!s0->open)
        return; /* an open span reaches the query's end: its own end is not shown */
    assert_int_equal(s0->end_ms, 10000);
    (void)s1;
}

static void check_closed_ends(const Run *run, const Seen *seen)
{
    for (size_t i = 0; i < seen->n_spans; i++) {
        const StoreNodeSpan *sp = &seen->spans[i];
        if (sp->open)
            continue;
        assert_true(sp->end_ms == 1001 || sp->end_ms == 5000);
        effect(run->op[OP_SPANS_END], sp->end_ms == 5000, "the spans' end");
    }
}

static int64_t tokens_check(Store *s, const Run *run)
{
    StoreToken t;
    int f1 = store_token_find(s, hash1, &t);
    assert_true(f1 == 0 || f1 == 1);
    effect(run->op[OP_TOKEN1], f1 == 1, "token 1");
    if (f1 == 1) {
        assert_string_equal(t.role, "admin");
        assert_string_equal(t.user, "root");
        if (run->op[OP_TOKEN1] == ACKED)
            assert_int_equal(t.id, run->token1);
        assert_true(t.revoked_ms == -1 || t.revoked_ms == 9000);
        effect(run->op[OP_REVOKE1], t.revoked_ms == 9000, "token 1's revocation");
    }
    int f2 = store_token_find(s, hash2, &t);
    assert_true(f2 == 0 || f2 == 1);
    effect(run->op[OP_TOKEN2], f2 == 1, "token 2");
    if (f2 == 1) {
        assert_string_equal(t.role, "member");
        assert_string_equal(t.team, "t");
        assert_int_equal(t.expires_ms, 90000);
        if (run->op[OP_TOKEN2] == ACKED)
            assert_int_equal(t.id, run->token2);
    }
    int64_t n = 0;
    assert_int_equal(store_token_count(s, &n), 0);
    assert_int_equal(n, f1 + f2);
    return n;
}

static Store *reopen_clean(const char *path)
{
    Store *s = NULL;
    Buf err = {0};
    int r = store_open(path, &s, &err);
    if (r)
        print_message("reopening after the fault: %s\n", buf_str(&err));
    assert_int_equal(r, 0);
    assert_int_equal(err.len, 0);
    buf_free(&err);
    return s;
}

/* Open without faults, compare with what the run was told, and take a new write. */
static void check_run(const char *path, const Run *run)
{
    Store *s = reopen_clean(path);
    Seen seen = {0};
    assert_int_equal(store_jobs_load(s, seen_job, &seen), 0);
    for (size_t k = 0; k < seen.n_jobs; k++) {
        EvCtx e = {&seen, k};
        assert_int_equal(store_events_for(s, seen.jobs[k].id, seen_event, &e), 0);
    }
    assert_int_equal(store_teams_load(s, seen_team, &seen), 0);
    assert_int_equal(store_team_budgets_load(s, seen_budget, &seen), 0);
    assert_int_equal(store_mig_load(s, seen_mig, &seen), 0);
    assert_int_equal(store_learned_load(s, seen_learned, &seen), 0);
    assert_int_equal(store_node_spans_query(s, 0, 10000, seen_span, &seen), 0);
    assert_int_equal(store_usage_query(s, 0, 10000, seen_usage, &seen), 0);

    if (!run->opened)
        for (size_t i = 0; i < OP_COUNT; i++)
            assert_int_equal(run->op[i], NOT_RUN);
    check_jobs(run, &seen);
    check_spans(run, &seen);
    check_closed_ends(run, &seen);
    effect(run->op[OP_TEAM], seen.team, "the team's quota");
    effect(run->op[OP_BUDGET], seen.budget, "the team's budget");
    effect(run->op[OP_MIG], seen.mig, "the MIG layout");
    tokens_check(s, run);

    /* it takes a new write, under a new id: never one a job had or was told */
    int64_t max_id = 0;
    for (size_t k = 0; k < seen.n_jobs; k++)
        max_id = seen.jobs[k].id > max_id ? seen.jobs[k].id : max_id;
    const int64_t told[] = {run->id_a, run->id_b, run->id_c};
    for (size_t i = 0; i < 3; i++)
        max_id = told[i] > max_id ? told[i] : max_id;
    StoreJob d = new_job("d", 8000);
    StoreWrite w = {.inserts = &d, .n_inserts = 1};
    assert_int_equal(store_write(s, &w, NULL), 0);
    assert_true(d.id > max_id);
    for (size_t k = 0; k < seen.n_jobs; k++)
        store_job_free(&seen.jobs[k]);
    store_close(s);

    /* ... which a second opening finds */
    s = reopen_clean(path);
    Seen again = {0};
    assert_int_equal(store_jobs_load(s, seen_job, &again), 0);
    assert_int_equal(again.n_jobs, seen.n_jobs + 1);
    assert_string_equal(again.jobs[again.n_jobs - 1].name, "d");
    for (size_t k = 0; k < again.n_jobs; k++)
        store_job_free(&again.jobs[k]);
    assert_int_equal(store_schema_version(s), latest_version);
    store_close(s);
}

/* Remove a database's files, and its directory once it is empty. */
static void remove_db(const char *dir, const char *path)
{
    const char *suffix[] = {"", "-wal", "-shm", "-journal"};
    for (size_t i = 0; i < 4; i++) {
        char p[256];
        snprintf(p, sizeof(p), "%s%s", path, suffix[i]);
        unlink(p);
    }
    rmdir(dir);
}

/* A new database's directory and path. */
static void new_db(char *dir, size_t dir_len, char *path, size_t path_len)
{
    fault_tmpdir(dir, dir_len, "faults");
    assert_non_null(mkdtemp(dir));
    snprintf(path, path_len, "%s/state.db", dir);
}

/* Run the scenario with a fault at N for N = 1, 1 + stride, ... until it no longer
 * reaches N (in the phase's calls). */
static void fault_loop(Phase phase, FaultKind kind, bool persistent, int64_t def_stride)
{
    int64_t stride = fault_stride(def_stride), runs = 0, n;
    size_t acked = 0, failed = 0, open_failed = 0;
    for (n = 1;; n += stride) {
        char dir[64], path[128], crash[160];
        new_db(dir, sizeof(dir), path, sizeof(path));
        snprintf(crash, sizeof(crash), "%s/crashed.db", dir);
        Run run;
        Arm arm = {phase, kind, n, persistent};
        scenario(path, &arm, &run, crash);
        bool reached = phase == PHASE_OPEN ? n <= run.open_calls : fault_reached();
        fault_disarm();
        failed_may_remain = persistent;
        if (run.opened)
            check_run(crash, &run);
        check_run(path, &run);
        remove_db(dir, crash);
        remove_db(dir, path);
        runs++;
        open_failed += !run.opened;
        for (size_t i = 0; i < OP_COUNT; i++) {
            acked += run.op[i] == ACKED;
            failed += run.op[i] == FAILED;
        }
        if (!reached)
            break;
    }
    print_message("%s %s %s: N from 1 to %lld every %lld, %lld runs: %zu failed to open, "
                  "%zu writes acknowledged, %zu failed\n",
                  phase == PHASE_OPEN ? "opening" : "writes", fault_kind_name(kind),
                  persistent ? "persistent" : "transient", (long long)n, (long long)stride,
                  (long long)runs, open_failed, acked, failed);
    /* the loop went through runs that failed and runs that did not */
    if (phase == PHASE_OPEN)
        assert_true(open_failed > 0 && open_failed < (size_t)runs);
    else
        assert_true(failed > 0 && acked > 0);
}

/* Without a fault, every write is acknowledged (the checks above would pass vacuously
 * if the scenario failed on its own). */
static void test_no_fault(void **state)
{
    int64_t calls[2][2];
    for (FaultKind k = FAULT_MALLOC; k <= FAULT_IO; k++) {
        char dir[64], path[128];
        new_db(dir, sizeof(dir), path, sizeof(path));
        Run run;
        Arm arm = {PHASE_OPEN, k, INT64_MAX, false};
        scenario(path, &arm, &run, NULL);
        calls[k][0] = run.open_calls;
        calls[k][1] = fault_plan.count - run.open_calls;
        fault_disarm();
        assert_true(run.opened);
        for (size_t i = 0; i < OP_COUNT; i++)
            assert_int_equal(run.op[i], ACKED);
        check_run(path, &run);
        remove_db(dir, path);
    }
    print_message("opening a new store makes %lld SQLite allocations and %lld writes, syncs "
                  "and truncates; the writes after it %lld and %lld\n",
                  (long long)calls[0][0], (long long)calls[1][0], (long long)calls[0][1],
                  (long long)calls[1][1]);
}

static void test_open_malloc(void **state)
{
    fault_loop(PHASE_OPEN, FAULT_MALLOC, false, 157);
    fault_loop(PHASE_OPEN, FAULT_MALLOC, true, 157);
}

static void test_open_io(void **state)
{
    fault_loop(PHASE_OPEN, FAULT_IO, false, 1);
    fault_loop(PHASE_OPEN, FAULT_IO, true, 1);
}

static void test_writes_malloc(void **state)
{
    fault_loop(PHASE_WRITES, FAULT_MALLOC, false, 5);
    fault_loop(PHASE_WRITES, FAULT_MALLOC, true, 5);
}

static void test_writes_io(void **state)
{
    fault_loop(PHASE_WRITES, FAULT_IO, false, 1);
    fault_loop(PHASE_WRITES, FAULT_IO, true, 1);
}

int main(void)
{
    if (fault_install() < 0) {
        fprintf(stderr, "cannot install the fault hooks in SQLite\n");
        return 1;
    }
    char dir[64], path[128];
    fault_tmpdir(dir, sizeof(dir), "faults");
    if (!mkdtemp(dir))
        return 1;
    snprintf(path, sizeof(path), "%s/state.db", dir);
    Store *s = NULL;
    if (store_open(path, &s, NULL) < 0)
        return 1;
    latest_version = store_schema_version(s);
    store_close(s);
    remove_db(dir, path);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_fault),      cmocka_unit_test(test_open_io),
        cmocka_unit_test(test_open_malloc),   cmocka_unit_test(test_writes_io),
        cmocka_unit_test(test_writes_malloc),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
