/* test_store.c: the store's contract, run on both back ends: on a SQLite file in a
 * temporary directory and on a fresh database of a throwaway PostgreSQL 15 (pg_fixture.h;
 * skipped, saying why, where PostgreSQL is not installed): reopening, job ids, what an
 * update may change, events, usage clipped to a window (with its node), the spans of time
 * nodes counted as capacity (and what a crash leaves of an open one), tokens, team
 * overrides and budgets, MIG layouts, learned classes, the server's identity, many
 * threads writing at once through the group commit (and a failing write among them
 * failing alone), and leadership (two Stores on one database: one leads).
 *
 * SQLite only, as they are about its files: WAL and the file's mode, the URL spellings
 * of a file, databases of older schemas made by dropping what later steps added (the
 * PostgreSQL back end has no databases older than itself), a database from a newer
 * gpuorch refused (test_store_pg.c has PostgreSQL's), and the URLs the store does not
 * take. PostgreSQL's own proofs (lost sessions, a crash, logins, concurrent migrations,
 * leadership lost) are in test_store_pg.c. */
#include "store/store.h"

#include "util/buf.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "pg_fixture.h"

typedef struct Fixture {
    bool pg;         /* on PostgreSQL: url names a fresh database */
    char dir[64];    /* SQLite: the file's directory */
    char path[128];  /* SQLite: the file */
    char url[256];   /* what the store is opened with */
    char label[256]; /* what its messages name it by */
    Store *s;
} Fixture;

/* The test's fixture; the test skips when its back end is not there. */
static Fixture *fixture(void **state)
{
    Fixture *f = *state;
    if (!f->s)
        skip();
    return f;
}

static Store *open_ok(const char *url)
{
    Store *s = NULL;
    Buf err = {0};
    int r = store_open(url, &s, &err);
    if (r)
        print_message("%s\n", buf_str(&err));
    assert_int_equal(r, 0);
    assert_int_equal(err.len, 0);
    buf_free(&err);
    return s;
}

static int setup(void **state)
{
    Fixture *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    snprintf(f->dir, sizeof(f->dir), "/tmp/gpuorch-store-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->path, sizeof(f->path), "%s/state.db", f->dir);
    snprintf(f->url, sizeof(f->url), "%s", f->path);
    snprintf(f->label, sizeof(f->label), "%s", f->path);
    f->s = open_ok(f->url);
    *state = f;
    return 0;
}

/* A fresh PostgreSQL database per test. */
static int setup_pg(void **state)
{
    Fixture *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    f->pg = true;
    *state = f;
    if (!pg.up)
        return 0;
    char name[64];
    assert_int_equal(pg_fixture_createdb(name, sizeof(name), f->url, sizeof(f->url)), 0);
    snprintf(f->label, sizeof(f->label), "%s", f->url);
    f->s = open_ok(f->url);
    return 0;
}

static int teardown_pg(void **state)
{
    Fixture *f = *state;
    store_close(f->s);
    free(f);
    return 0;
}

static int group_pg_up(void **state)
{
    if (pg_fixture_start() < 0)
        return -1;
    if (!pg.up)
        print_message("PostgreSQL tests skipped: %s\n", pg.why);
    return 0;
}

static int group_pg_down(void **state)
{
    pg_fixture_stop();
    return 0;
}

static int teardown(void **state)
{
    Fixture *f = *state;
    store_close(f->s);
    const char *suffix[] = {"", "-wal", "-shm"};
    for (size_t i = 0; i < 3; i++) {
        char p[160];
        snprintf(p, sizeof(p), "%s%s", f->path, suffix[i]);
        unlink(p);
    }
    rmdir(f->dir);
    free(f);
    return 0;
}

static void reopen(Fixture *f)
{
    store_close(f->s);
    f->s = open_ok(f->url);
}

static StoreJob job(const char *name, const char *team)
{
    return (StoreJob){
        .name = (char *)name,
        .team = (char *)team,
        .spec_json = (char *)"{\"name\": \"x\"}",
        .owner = 7,
        .user = team ? (char *)"alice" : NULL,
        .priority = 2,
        .submit_ms = 1000,
        .start_ms = -1,
        .end_ms = -1,
        .exit_code = -1,
        .checkpoint_ms = -1,
    };
}

static void write_ok(Store *s, StoreWrite *w)
{
    Buf err = {0};
    int r = store_write(s, w, &err);
    if (r)
        print_message("%s\n", buf_str(&err));
    assert_int_equal(r, 0);
    buf_free(&err);
}

/* Jobs as loaded, in order. */
typedef struct Jobs {
    StoreJob j[1024];
    size_t n;
} Jobs;

static int keep_job(void *arg, StoreJob *j)
{
    Jobs *l = arg;
    if (l->n == 1024) {
        store_job_free(j);
        return -ENOSPC;
    }
    l->j[l->n++] = *j;
    return 0;
}

static void jobs_free(Jobs *l)
{
    for (size_t i = 0; i < l->n; i++)
        store_job_free(&l->j[i]);
    l->n = 0;
}

static void test_open_reopen(void **state)
{
    Fixture *f = fixture(state);
    int v = store_schema_version(f->s);
    assert_true(v >= 1);
    assert_int_equal(store_ping(f->s), 0);
    StoreJob a = job("a", "search");
    write_ok(f->s, &(StoreWrite){.inserts = &a, .n_inserts = 1});
    reopen(f);
    assert_int_equal(store_schema_version(f->s), v);
    Jobs l = {0};
    assert_int_equal(store_jobs_load(f->s, keep_job, &l), 0);
    assert_int_equal(l.n, 1);
    assert_int_equal(l.j[0].id, a.id);
    assert_string_equal(l.j[0].name, "a");
    jobs_free(&l);
    if (f->pg)
        return;

    /* WAL is a property of the file; the file is the owner's alone */
    sqlite3 *db;
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(st, 0), "wal");
    sqlite3_finalize(st);
    sqlite3_close(db);
    struct stat sb;
    assert_int_equal(stat(f->path, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0600);

    /* the URL forms name the same file */
    char url[200];
    store_close(f->s);
    snprintf(url, sizeof(url), "sqlite:%s", f->path);
    f->s = open_ok(url);
    assert_int_equal(store_jobs_load(f->s, keep_job, &l), 0);
    assert_int_equal(l.n, 1);
    jobs_free(&l);
    store_close(f->s);
    snprintf(url, sizeof(url), "sqlite://%s", f->path);
    f->s = open_ok(url);
    assert_int_equal(store_jobs_load(f->s, keep_job, &l), 0);
    assert_int_equal(l.n, 1);
    jobs_free(&l);
}

static void test_insert_ids(void **state)
{
    Fixture *f = fixture(state);
    StoreJob three[3] = {job("a", "search"), job("b", NULL), job("c", "vision")};
    three[1].project = (char *)"ranking";
    three[2].checkpoint = (char *)"/ckpt/c-1";
    three[2].placement_json = (char *)"[{\"node\": \"n0\"}]";
    three[2].state = 3;
    three[2].run = 2;
    three[2].preemptions = 1;
    three[2].start_ms = 5000;
    three[2].checkpoint_ms = 6000;
    write_ok(f->s, &(StoreWrite){.inserts = three, .n_inserts = 3});
    assert_true(three[0].id >= 1);
    assert_int_equal(three[1].id, three[0].id + 1);
    assert_int_equal(three[2].id, three[1].id + 1);
    StoreJob d = job("d", "search");
    write_ok(f->s, &(StoreWrite){.inserts = &d, .n_inserts = 1});
    assert_int_equal(d.id, three[2].id + 1);

    Jobs l = {0};
    assert_int_equal(store_jobs_load(f->s, keep_job, &l), 0);
    assert_int_equal(l.n, 4);
    for (size_t i = 0; i < 3; i++) {
        const StoreJob *a = &three[i], *b = &l.j[i];
        assert_int_equal(b->id, a->id);
        assert_string_equal(b->name, a->name);
        if (a->team)
            assert_string_equal(b->team, a->team);
        else
            assert_null(b->team);
        assert_string_equal(b->spec_json, a->spec_json);
        assert_int_equal(b->owner, 7);
        if (a->team) /* job() gives jobs of a team a user, the others none */
            assert_string_equal(b->user, "alice");
        else
            assert_null(b->user);
        assert_int_equal(b->priority, 2);
        assert_int_equal(b->state, a->state);
        assert_int_equal(b->run, a->run);
        assert_int_equal(b->preemptions, a->preemptions);
        assert_int_equal(b->submit_ms, 1000);
        assert_int_equal(b->start_ms, a->start_ms);
        assert_int_equal(b->end_ms, -1);
        assert_int_equal(b->exit_code, -1);
        assert_int_equal(b->checkpoint_ms, a->checkpoint_ms);
    }
    assert_string_equal(l.j[1].project, "ranking");
    assert_null(l.j[0].project);
    assert_null(l.j[0].checkpoint);
    assert_string_equal(l.j[2].checkpoint, "/ckpt/c-1");
    assert_string_equal(l.j[2].placement_json, "[{\"node\": \"n0\"}]");
    assert_int_equal(l.j[3].id, d.id);
    jobs_free(&l);
}

static int stop_at_second(void *arg, StoreJob *j)
{
    int *seen = arg;
    store_job_free(j);
    return ++*seen == 2 ? 42 : 0;
}

static void test_load_stops(void **state)
{
    Fixture *f = fixture(state);
    StoreJob three[3] = {job("a", NULL), job("b", NULL), job("c", NULL)};
    write_ok(f->s, &(StoreWrite){.inserts = three, .n_inserts = 3});
    int seen = 0;
    assert_int_equal(store_jobs_load(f->s, stop_at_second, &seen), 42);
    assert_int_equal(seen, 2);
}

static void test_update(void **state)
{
    Fixture *f = fixture(state);
    StoreJob a = job("a", "search");
    a.project = (char *)"ranking";
    write_ok(f->s, &(StoreWrite){.inserts = &a, .n_inserts = 1});
    /* every field changed: only the mutable ones may land */
    StoreJob u = {
        .id = a.id,
        .name = (char *)"renamed",
        .team = (char *)"other",
        .project = NULL,
        .spec_json = (char *)"{}",
        .owner = 99,
        .priority = 0,
        .state = 4,
        .run = 3,
        .preemptions = 2,
        .submit_ms = 1,
        .start_ms = 7000,
        .end_ms = 9000,
        .exit_code = 137,
        .checkpoint = (char *)"/ckpt/a-3",
        .checkpoint_ms = 8000,
        .placement_json = (char *)"[]",
    };
    const StoreJob *up = &u;
    write_ok(f->s, &(StoreWrite){.updates = &up, .n_updates = 1});
    Jobs l = {0};
    assert_int_equal(store_jobs_load(f->s, keep_job, &l), 0);
    assert_int_equal(l.n, 1);
    const StoreJob *b = &l.j[0];
    assert_string_equal(b->name, "a");
    assert_string_equal(b->team, "search");
    assert_string_equal(b->project, "ranking");
    assert_string_equal(b->spec_json, a.spec_json);
    assert_int_equal(b->owner, 7);
    assert_string_equal(b->user, "alice"); /* who submitted it is never updated */
    assert_int_equal(b->submit_ms, 1000);
    assert_int_equal(b->priority, 0);
    assert_int_equal(b->state, 4);
    assert_int_equal(b->run, 3);
    assert_int_equal(b->preemptions, 2);
    assert_int_equal(b->start_ms, 7000);
    assert_int_equal(b->end_ms, 9000);
    assert_int_equal(b->exit_code, 137);
    assert_string_equal(b->checkpoint, "/ckpt/a-3");
    assert_int_equal(b->checkpoint_ms, 8000);
    assert_string_equal(b->placement_json, "[]");
    jobs_free(&l);

    /* back to no checkpoint and no placement */
    u.checkpoint = u.placement_json = NULL;
    write_ok(f->s, &(StoreWrite){.updates = &up, .n_updates = 1});
    assert_int_equal(store_jobs_load(f->s, keep_job, &l), 0);
    assert_null(l.j[0].checkpoint);
    assert_null(l.j[0].placement_json);
    jobs_free(&l);

    /* a job that is not there */
    u.id = a.id + 100;
    Buf err = {0};
    assert_int_equal(store_write(f->s, &(StoreWrite){.updates = &up, .n_updates = 1}, &err),
                     -EINVAL);
    assert_non_null(strstr(buf_str(&err), "no job"));
    assert_non_null(strstr(buf_str(&err), f->label));
    buf_free(&err);
}

typedef struct Seen {
    char text[2048];
    int n;
} Seen;

static int see_event(void *arg, int64_t t_ms, const char *type, const char *detail)
{
    Seen *s = arg;
    size_t len = strlen(s->text);
    snprintf(s->text + len, sizeof(s->text) - len, "%lld %s %s; ", (long long)t_ms, type,
             detail ? detail : "-");
    s->n++;
    return 0;
}

static int see_usage(void *arg, const StoreUsage *u)
{
    Seen *s = arg;
    size_t len = strlen(s->text);
    snprintf(s->text + len, sizeof(s->text) - len, "%lld %s %s %s %s %s %s %.3f %lld [%lld,%lld); ",
             (long long)u->job, u->team ? u->team : "-", u->project ? u->project : "-",
             u->pool ? u->pool : "-", u->node ? u->node : "-", u->model ? u->model : "-",
             u->tier ? u->tier : "-", u->gpu_equivalents, (long long)u->price_micro_usd,
             (long long)u->start_ms, (long long)u->end_ms);
    s->n++;
    return 0;
}

/* The measured and busy GPU-ms of the vision team's segment. */
static int see_measured(void *arg, const StoreUsage *u)
{
    int64_t *m = arg;
    if (u->team && !strcmp(u->team, "vision")) {
        m[0] = u->measured_gpu_ms;
        m[1] = u->busy_gpu_ms;
    } else if (u->measured_gpu_ms || u->busy_gpu_ms) {
        m[0] = m[1] = -2; /* measured where nothing was */
    }
    return 0;
}

static void test_events_and_usage(void **state)
{
    Fixture *f = fixture(state);
    /* a job and its events in one write: -1 is the write's first insert */
    StoreJob two[2] = {job("a", "search"), job("b", "vision")};
    StoreEvent ev[] = {
        {.job = -1, .t_ms = 30, .type = "start", .detail = "on n0"},
        {.job = -1, .t_ms = 10, .type = "submit"},
        {.job = -2, .t_ms = 20, .type = "submit", .detail = "b's"},
    };
    write_ok(f->s, &(StoreWrite){.inserts = two, .n_inserts = 2, .events = ev, .n_events = 3});
    StoreEvent more = {.job = two[0].id, .t_ms = 20, .type = "checkpoint", .detail = "/ckpt/1"};
    write_ok(f->s, &(StoreWrite){.events = &more, .n_events = 1});
    Seen s = {0};
    assert_int_equal(store_events_for(f->s, two[0].id, see_event, &s), 0);
    assert_string_equal(s.text, "10 submit -; 20 checkpoint /ckpt/1; 30 start on n0; ");
    memset(&s, 0, sizeof(s));
    assert_int_equal(store_events_for(f->s, two[1].id, see_event, &s), 0);
    assert_string_equal(s.text, "20 submit b's; ");

    /* an event for no job, and -3 in a write of two inserts, are refused */
    Buf err = {0};
    StoreEvent bad = {.job = two[1].id + 50, .t_ms = 1, .type = "start"};
    assert_int_equal(store_write(f->s, &(StoreWrite){.events = &bad, .n_events = 1}, &err),
                     -EINVAL);
    assert_non_null(strcasestr(buf_str(&err), "foreign key"));
    buf_reset(&err);
    StoreJob c[2] = {job("c", NULL), job("d", NULL)};
    bad.job = -3;
    assert_int_equal(
        store_write(
            f->s, &(StoreWrite){.inserts = c, .n_inserts = 2, .events = &bad, .n_events = 1}, &err),
        -EINVAL);
    assert_int_equal(c[0].id, 0); /* not written on failure */
    buf_free(&err);
    Jobs l = {0}; /* and the write's inserts were rolled back with it */
    assert_int_equal(store_jobs_load(f->s, keep_job, &l), 0);
    assert_int_equal(l.n, 2);
    jobs_free(&l);

    /* usage: [0,10) [5,15) [20,30), and an empty one at 10 that overlaps nothing */
    StoreUsage u[] = {
        {.job = two[0].id,
         .team = "search",
         .project = "ranking",
         .pool = "a100",
         .model = "A100-80GB",
         .tier = "owned",
         .node = "a100-0",
         .gpu_equivalents = 1.0 / 7,
         .price_micro_usd = 0,
         .start_ms = 0,
         .end_ms = 10},
        {.job = two[1].id,
         .team = "vision",
         .pool = "h100",
         .model = "H100-80GB-SXM5",
         .tier = "spot",
         .gpu_equivalents = 8,
         .price_micro_usd = 2500000,
         .start_ms = 5,
         .end_ms = 15,
         .measured_gpu_ms = 80,
         .busy_gpu_ms = 40},
        {.job = -1, .gpu_equivalents = 0.25, .start_ms = 20, .end_ms = 30},
        {.job = two[0].id, .gpu_equivalents = 1, .start_ms = 10, .end_ms = 10},
    };
    StoreJob e = job("e", NULL);
    write_ok(f->s, &(StoreWrite){.inserts = &e, .n_inserts = 1, .usage = u, .n_usage = 4});
    memset(&s, 0, sizeof(s));
    assert_int_equal(store_usage_query(f->s, 8, 21, see_usage, &s), 0);
    char want[512];
    snprintf(want, sizeof(want),
             "%lld search ranking a100 a100-0 A100-80GB owned 0.143 0 [8,10); "
             "%lld vision - h100 - H100-80GB-SXM5 spot 8.000 2500000 [8,15); "
             "%lld - - - - - - 0.250 0 [20,21); ",
             (long long)two[0].id, (long long)two[1].id, (long long)e.id);
    assert_string_equal(s.text, want);
    /* what the GPUs measured, clipped in proportion: [8,15) of [5,15) */
    int64_t measured[2] = {-1, -1};
    assert_int_equal(store_usage_query(f->s, 8, 21, see_measured, measured), 0);
    assert_int_equal(measured[0], 56);
    assert_int_equal(measured[1], 28);
    /* ends and starts are open and closed as the window is */
    memset(&s, 0, sizeof(s));
    assert_int_equal(store_usage_query(f->s, 10, 20, see_usage, &s), 0);
    assert_int_equal(s.n, 1);
    memset(&s, 0, sizeof(s));
    assert_int_equal(store_usage_query(f->s, 30, 100, see_usage, &s), 0);
    assert_int_equal(s.n, 0);
    assert_int_equal(store_usage_query(f->s, 100, 30, see_usage, &s), -EINVAL);
}

static int see_span(void *arg, const StoreNodeSpan *sp)
{
    Seen *s = arg;
    size_t len = strlen(s->text);
    snprintf(s->text + len, sizeof(s->text) - len, "%lld %s %s %s %u [%lld,%lld)%s; ",
             (long long)sp->id, sp->node, sp->tier ? sp->tier : "-", sp->basis, sp->gpus,
             (long long)sp->start_ms, (long long)sp->end_ms, sp->open ? " open" : "");
    s->n++;
    return 0;
}

static StoreNodeSpan span(const char *node, const char *basis, uint32_t gpus, int64_t start_ms)
{
    return (StoreNodeSpan){.node = node,
                           .pool = "h100",
                           .model = "H100-80GB-SXM5",
                           .tier = "reserved",
                           .basis = basis,
                           .gpus = gpus,
                           .price_micro_usd = 2500000,
                           .start_ms = start_ms,
                           .end_ms = start_ms};
}

/* The spans in [from, to) as see_span prints them, against want (printf-style, ids). */
static void spans_are(Store *st, int64_t from, int64_t to, const char *want)
{
    Seen s = {0};
    assert_int_equal(store_node_spans_query(st, from, to, see_span, &s), 0);
    assert_string_equal(s.text, want);
}

/* Spans open where they start, are moved forward and closed; a query sees an open one
 * reach the window's end; a crash leaves an open span where its last move took it, and
 * the next server's store_node_spans_close_open ends it there, so the time the server
 * was down is not counted. */
static void test_node_spans(void **state)
{
    Fixture *f = fixture(state);
    int64_t a = 0, b = 0, c = 0;
    char want[512];
    StoreNodeSpan sa = span("h100-0", "ready", 8, 1000), sb = span("burst-1", "present", 4, 2000);
    assert_int_equal(store_node_span_open(f->s, &sa, &a), 0);
    assert_int_equal(store_node_span_open(f->s, &sb, &b), 0);
    assert_true(a >= 1 && b > a);
    /* open spans go on to the window's end, whatever their stored end */
    snprintf(want, sizeof(want),
             "%lld burst-1 reserved present 4 [2000,10000) open; "
             "%lld h100-0 reserved ready 8 [1000,10000) open; ",
             (long long)b, (long long)a);
    spans_are(f->s, 0, 10000, want);

    /* moved forward, then a closed; a clock that steps back moves nothing back; a closed
     * span moves no more */
    int64_t both[] = {a, b};
    assert_int_equal(store_node_spans_end(f->s, both, 2, 5000, false), 0);
    assert_int_equal(store_node_spans_end(f->s, both, 1, 6000, true), 0);
    assert_int_equal(store_node_spans_end(f->s, both, 2, 4000, false), 0);
    assert_int_equal(store_node_spans_end(f->s, both, 1, 9000, false), 0);
    snprintf(want, sizeof(want),
             "%lld burst-1 reserved present 4 [5500,7000) open; "
             "%lld h100-0 reserved ready 8 [5500,6000); ",
             (long long)b, (long long)a);
    spans_are(f->s, 5500, 7000, want);
    /* clipped as usage is: a closed span ending at the window's start is outside it */
    snprintf(want, sizeof(want), "%lld burst-1 reserved present 4 [6000,6500) open; ",
             (long long)b);
    spans_are(f->s, 6000, 6500, want);
    spans_are(f->s, 0, 1000, "");

    /* a span that never moved past its start counts nothing once closed */
    StoreNodeSpan sc = span("h100-1", "ready", 8, 7000);
    assert_int_equal(store_node_span_open(f->s, &sc, &c), 0);

    /* the server dies: what it left open stays open in the file until the next one
     * starts, which closes it where it last reached */
    reopen(f);
    size_t n = 99;
    assert_int_equal(store_node_spans_close_open(f->s, &n), 0);
    assert_int_equal(n, 2);
    snprintf(want, sizeof(want),
             "%lld burst-1 reserved present 4 [2000,5000); "
             "%lld h100-0 reserved ready 8 [1000,6000); ",
             (long long)b, (long long)a);
    spans_are(f->s, 0, 100000, want);
    assert_int_equal(store_node_spans_close_open(f->s, &n), 0);
    assert_int_equal(n, 0);
    assert_int_equal(store_node_spans_end(f->s, &b, 1, 50000, false), 0);
    spans_are(f->s, 0, 100000, want);

    /* what the store refuses */
    StoreNodeSpan bad = span(NULL, "ready", 8, 0);
    int64_t id = -5;
    assert_int_equal(store_node_span_open(f->s, &bad, &id), -EINVAL);
    bad = span("x", NULL, 8, 0);
    assert_int_equal(store_node_span_open(f->s, &bad, &id), -EINVAL);
    bad = span("x", "ready", 8, 10);
    bad.end_ms = 5;
    assert_int_equal(store_node_span_open(f->s, &bad, &id), -EINVAL);
    assert_int_equal(id, -5);
    Seen s = {0};
    assert_int_equal(store_node_spans_query(f->s, 10, 5, see_span, &s), -EINVAL);
    assert_int_equal(store_node_spans_end(f->s, NULL, 1, 5, false), -EINVAL);
}

/* What migration 7 added (tokens' user, expiry, revocation; jobs' user), and the
 * leader table of migration 11 and the measured columns of 12, dropped to make a database
 * as an older gpuorch left it (the tests using it go back to before 7). */
#define UNDO_USERS                                                                                 \
    "ALTER TABLE jobs DROP COLUMN user; ALTER TABLE tokens DROP COLUMN user; "                     \
    "ALTER TABLE tokens DROP COLUMN expires_ms; ALTER TABLE tokens DROP COLUMN revoked_ms; "       \
    "DROP TABLE leader; ALTER TABLE usage DROP COLUMN measured_gpu_ms; "                           \
    "ALTER TABLE usage DROP COLUMN busy_gpu_ms; "

/* The server's identity is made once, at the first open: 32 hex digits, the same on
 * every later open, and another database's differs. (test_migrate_to_spans applies the
 * step that makes it again over a table that has one.) */
static void test_server_id(void **state)
{
    Fixture *f = fixture(state);
    char id[STORE_SERVER_ID_LEN + 1], again[STORE_SERVER_ID_LEN + 1];
    assert_int_equal(store_server_id(f->s, id), 0);
    assert_int_equal(strlen(id), STORE_SERVER_ID_LEN);
    assert_int_equal(strspn(id, "0123456789abcdef"), STORE_SERVER_ID_LEN);
    reopen(f);
    assert_int_equal(store_server_id(f->s, again), 0);
    assert_string_equal(again, id);

    char other[sizeof(f->url) + 16], name[64];
    if (f->pg)
        assert_int_equal(pg_fixture_createdb(name, sizeof(name), other, sizeof(other)), 0);
    else
        snprintf(other, sizeof(other), "%s.other", f->path);
    Store *o = open_ok(other);
    assert_int_equal(store_server_id(o, again), 0);
    assert_string_not_equal(again, id);
    store_close(o);
    if (f->pg)
        return;
    unlink(other);
    snprintf(other, sizeof(other), "%s.other-wal", f->path);
    unlink(other);
    snprintf(other, sizeof(other), "%s.other-shm", f->path);
    unlink(other);
}

/* A database of the schema before node spans (version 5, usage without a node) is
 * migrated on opening: its usage is kept, with no node, and spans can be kept. */
static void test_migrate_to_spans(void **state)
{
    Fixture *f = fixture(state);
    StoreJob j = job("old", "search");
    StoreUsage u = {.job = -1,
                    .team = "search",
                    .pool = "h100",
                    .gpu_equivalents = 2,
                    .start_ms = 100,
                    .end_ms = 200};
    write_ok(f->s, &(StoreWrite){.inserts = &j, .n_inserts = 1, .usage = &u, .n_usage = 1});
    int v = store_schema_version(f->s);
    char sid[STORE_SERVER_ID_LEN + 1], again[STORE_SERVER_ID_LEN + 1];
    assert_int_equal(store_server_id(f->s, sid), 0);
    store_close(f->s);
    f->s = NULL;
    /* back to version 5, as a gpuorch of then left it */
    sqlite3 *db;
    assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db,
                                  UNDO_USERS
                                  "DROP TABLE node_spans; ALTER TABLE usage DROP COLUMN node; "
                                  "DELETE FROM schema_version WHERE version > 5",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(db);
    f->s = open_ok(f->path);
    assert_int_equal(store_schema_version(f->s), v);
    /* the step that made the server's identity ran again and kept it */
    assert_int_equal(store_server_id(f->s, again), 0);
    assert_string_equal(again, sid);
    Seen s = {0};
    assert_int_equal(store_usage_query(f->s, 0, 1000, see_usage, &s), 0);
    char want[128];
    snprintf(want, sizeof(want), "%lld search - h100 - - - 2.000 0 [100,200); ", (long long)j.id);
    assert_string_equal(s.text, want);
    StoreNodeSpan sp = span("h100-0", "ready", 8, 300);
    int64_t id = 0;
    assert_int_equal(store_node_span_open(f->s, &sp, &id), 0);
    assert_true(id >= 1);
}

static void hash_of(uint8_t h[STORE_TOKEN_HASH_LEN], int seed)
{
    for (int i = 0; i < STORE_TOKEN_HASH_LEN; i++)
        h[i] = (uint8_t)(seed * 31 + i);
}

/* A token row from the fields the tests vary. */
static int token_insert(Store *s, const uint8_t *hash, const char *role, const char *team,
                        const char *node, const char *name, int64_t created_ms, int64_t *ret_id)
{
    StoreToken t = {.created_ms = created_ms, .expires_ms = -1, .revoked_ms = -1};
    snprintf(t.role, sizeof(t.role), "%s", role);
    snprintf(t.team, sizeof(t.team), "%s", team ? team : "");
    snprintf(t.node, sizeof(t.node), "%s", node ? node : "");
    snprintf(t.name, sizeof(t.name), "%s", name ? name : "");
    return store_token_insert(s, hash, &t, ret_id);
}

static int collect_token(void *arg, const StoreToken *t)
{
    StoreToken *seen = arg;
    for (int i = 0; i < 8; i++)
        if (!seen[i].id) {
            seen[i] = *t;
            return 0;
        }
    return -ENOSPC;
}

static void test_tokens(void **state)
{
    Fixture *f = fixture(state);
    int64_t n = -1, id1 = 0, id2 = 0;
    assert_int_equal(store_token_count(f->s, &n), 0);
    assert_int_equal(n, 0);
    uint8_t h1[STORE_TOKEN_HASH_LEN], h2[STORE_TOKEN_HASH_LEN], h3[STORE_TOKEN_HASH_LEN];
    hash_of(h1, 1);
    hash_of(h2, 2);
    hash_of(h3, 3);
    assert_int_equal(token_insert(f->s, h1, "admin", NULL, NULL, "admin.token", 5, &id1), 0);
    assert_int_equal(token_insert(f->s, h2, "member", "search", NULL, "ci", 6, &id2), 0);
    assert_true(id1 >= 1);
    assert_int_equal(id2, id1 + 1);
    assert_int_equal(store_token_count(f->s, &n), 0);
    assert_int_equal(n, 2);

    StoreToken t;
    assert_int_equal(store_token_find(f->s, h2, &t), 1);
    assert_int_equal(t.id, id2);
    assert_string_equal(t.role, "member");
    assert_string_equal(t.team, "search");
    assert_string_equal(t.node, "");
    assert_string_equal(t.name, "ci");
    assert_int_equal(store_token_find(f->s, h1, &t), 1);
    assert_int_equal(t.id, id1);
    assert_string_equal(t.team, "");
    memset(&t, 0x5a, sizeof(t));
    assert_int_equal(store_token_find(f->s, h3, &t), 0);
    assert_int_equal(t.id, 0x5a5a5a5a5a5a5a5a); /* untouched */

    /* the same hash twice is refused; the id is left alone */
    int64_t id3 = -5;
    assert_int_equal(token_insert(f->s, h2, "viewer", NULL, NULL, "again", 7, &id3), -EEXIST);
    assert_int_equal(id3, -5);
    /* fields too long for StoreToken */
    char longname[80];
    memset(longname, 'x', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    StoreToken bad = {.expires_ms = -1, .revoked_ms = -1};
    snprintf(bad.role, sizeof(bad.role), "member");
    memset(bad.name, 'x', sizeof(bad.name)); /* no terminator: it does not fit */
    assert_int_equal(store_token_insert(f->s, h3, &bad, &id3), -EINVAL);
    memset(bad.name, 0, sizeof(bad.name));
    memset(bad.user, 'x', sizeof(bad.user));
    assert_int_equal(store_token_insert(f->s, h3, &bad, &id3), -EINVAL);
    memset(bad.user, 0, sizeof(bad.user));
    bad.role[0] = '\0'; /* a role is required */
    assert_int_equal(store_token_insert(f->s, h3, &bad, &id3), -EINVAL);
    assert_int_equal(store_token_count(f->s, &n), 0);
    assert_int_equal(n, 2);
    /* an agent token bound to a node */
    int64_t id4 = 0;
    assert_int_equal(token_insert(f->s, h3, "agent", NULL, "h100-0", "a", 8, &id4), 0);
    reopen(f);
    assert_int_equal(store_token_find(f->s, h2, &t), 1);
    assert_int_equal(t.id, id2);
    assert_int_equal(store_token_find(f->s, h3, &t), 1);
    assert_int_equal(t.id, id4);
    assert_string_equal(t.role, "agent");
    assert_string_equal(t.node, "h100-0");
    assert_int_equal(t.expires_ms, -1);
    assert_int_equal(t.revoked_ms, -1);

    /* a user and an expiry go in and come back; revoking keeps the row */
    uint8_t h4[STORE_TOKEN_HASH_LEN];
    hash_of(h4, 4);
    StoreToken u = {.created_ms = 9, .expires_ms = 90000, .revoked_ms = -1};
    snprintf(u.role, sizeof(u.role), "lead");
    snprintf(u.team, sizeof(u.team), "search");
    snprintf(u.user, sizeof(u.user), "alice");
    int64_t id5 = 0;
    assert_int_equal(store_token_insert(f->s, h4, &u, &id5), 0);
    assert_int_equal(store_token_revoke(f->s, id5, 1234), 0);
    assert_int_equal(store_token_revoke(f->s, id5, 1300), -EALREADY);
    assert_int_equal(store_token_revoke(f->s, id5 + 100, 1300), -ENOENT);
    reopen(f);
    assert_int_equal(store_token_find(f->s, h4, &t), 1);
    assert_string_equal(t.user, "alice");
    assert_int_equal(t.created_ms, 9);
    assert_int_equal(t.expires_ms, 90000);
    assert_int_equal(t.revoked_ms, 1234); /* the first revocation's time */
    StoreToken seen[8] = {0};
    assert_int_equal(store_token_list(f->s, collect_token, seen), 0);
    assert_int_equal(seen[0].id, id1);
    assert_int_equal(seen[1].id, id2);
    assert_int_equal(seen[2].id, id4);
    assert_int_equal(seen[3].id, id5);
    assert_int_equal(seen[3].revoked_ms, 1234);
    assert_int_equal(seen[4].id, 0);
    assert_string_equal(seen[0].name, "admin.token");
    assert_int_equal(store_token_count(f->s, &n), 0);
    assert_int_equal(n, 4); /* revoked tokens count: the first start makes no new one */
}

static int keep_user(void *arg, StoreJob *j)
{
    char **user = arg;
    free(*user);
    *user = j->user ? strdup(j->user) : NULL;
    store_job_free(j);
    return 0;
}

/* A database of version 6 (tokens without a user, jobs without one): the first admin
 * token becomes user "admin", its jobs name it, the other tokens and jobs none; no
 * token is revoked or expires. */
static void test_migrate_to_users(void **state)
{
    Fixture *f = fixture(state);
    uint8_t h1[STORE_TOKEN_HASH_LEN], h2[STORE_TOKEN_HASH_LEN];
    hash_of(h1, 1);
    hash_of(h2, 2);
    int64_t admin = 0, ci = 0;
    assert_int_equal(token_insert(f->s, h1, "admin", NULL, NULL, "admin.token", 5, &admin), 0);
    assert_int_equal(token_insert(f->s, h2, "member", "search", NULL, "ci", 6, &ci), 0);
    StoreJob j = job("old", "search");
    j.owner = admin;
    write_ok(f->s, &(StoreWrite){.inserts = &j, .n_inserts = 1});
    int v = store_schema_version(f->s);
    store_close(f->s);
    f->s = NULL;
    sqlite3 *db;
    assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, UNDO_USERS "DELETE FROM schema_version WHERE version > 6",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(db);
    f->s = open_ok(f->path);
    assert_int_equal(store_schema_version(f->s), v);
    StoreToken t;
    assert_int_equal(store_token_find(f->s, h1, &t), 1);
    assert_string_equal(t.user, "admin");
    assert_int_equal(t.expires_ms, -1);
    assert_int_equal(t.revoked_ms, -1);
    assert_int_equal(store_token_find(f->s, h2, &t), 1);
    assert_string_equal(t.user, "");
    char *user = NULL;
    assert_int_equal(store_jobs_load(f->s, keep_user, &user), 0);
    assert_non_null(user);
    assert_string_equal(user, "admin");
    free(user);
}

static int see_team(void *arg, const char *name, double g, double b, double w)
{
    Seen *s = arg;
    size_t len = strlen(s->text);
    snprintf(s->text + len, sizeof(s->text) - len, "%s %g %g %g; ", name, g, b, w);
    s->n++;
    return 0;
}

static void test_teams(void **state)
{
    Fixture *f = fixture(state);
    assert_int_equal(store_team_set(f->s, "search", 8, 16, 2), 0);
    assert_int_equal(store_team_set(f->s, "research", 4, 4, 1), 0);
    assert_int_equal(store_team_set(f->s, "search", 10, 20, 1.5), 0);
    assert_int_equal(store_team_set(f->s, "bad", -1, 0, 1), -EINVAL);
    assert_int_equal(store_team_set(f->s, "", 1, 1, 1), -EINVAL);
    reopen(f);
    Seen s = {0};
    assert_int_equal(store_teams_load(f->s, see_team, &s), 0);
    assert_string_equal(s.text, "research 4 4 1; search 10 20 1.5; ");
}

static int see_budget(void *arg, const char *name, double budget)
{
    Seen *s = arg;
    size_t len = strlen(s->text);
    snprintf(s->text + len, sizeof(s->text) - len, "%s %g; ", name, budget);
    s->n++;
    return 0;
}

/* Budgets live beside the quota overrides and leave them alone. A database from before
 * the budgets' step (version 2: the table and its version row gone) gets the step when
 * opened, keeping its jobs. */
static void test_team_budgets(void **state)
{
    Fixture *f = fixture(state);
    assert_int_equal(store_team_set(f->s, "search", 8, 16, 2), 0);
    assert_int_equal(store_team_budget_set(f->s, "search", 100), 0);
    assert_int_equal(store_team_budget_set(f->s, "vision", 0.0001), 0);
    assert_int_equal(store_team_budget_set(f->s, "search", 250.5), 0);
    assert_int_equal(store_team_budget_set(f->s, "bad", -1), -EINVAL);
    assert_int_equal(store_team_budget_set(f->s, "bad", NAN), -EINVAL);
    assert_int_equal(store_team_budget_set(f->s, "", 1), -EINVAL);
    reopen(f);
    Seen s = {0};
    assert_int_equal(store_team_budgets_load(f->s, see_budget, &s), 0);
    assert_string_equal(s.text, "search 250.5; vision 0.0001; ");
    Seen q = {0};
    assert_int_equal(store_teams_load(f->s, see_team, &q), 0);
    assert_string_equal(q.text, "search 8 16 2; ");
    if (f->pg)
        return; /* what follows takes a SQLite file back to an older schema */

    int v = store_schema_version(f->s);
    assert_true(v >= 3);
    StoreJob a = job("a", "search");
    write_ok(f->s, &(StoreWrite){.inserts = &a, .n_inserts = 1});
    store_close(f->s);
    f->s = NULL;
    sqlite3 *db;
    assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db,
                                  UNDO_USERS
                                  "DROP TABLE team_budgets; ALTER TABLE tokens DROP COLUMN node; "
                                  "DROP TABLE learned_memory; DROP TABLE node_spans; "
                                  "ALTER TABLE usage DROP COLUMN node; "
                                  "DELETE FROM schema_version WHERE version >= 3",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(db);
    reopen(f);
    assert_int_equal(store_schema_version(f->s), v);
    Seen none = {0};
    assert_int_equal(store_team_budgets_load(f->s, see_budget, &none), 0);
    assert_int_equal(none.n, 0);
    assert_int_equal(store_team_budget_set(f->s, "search", 7), 0);
    Jobs l = {0};
    assert_int_equal(store_jobs_load(f->s, keep_job, &l), 0);
    assert_int_equal(l.n, 1);
    jobs_free(&l);
}

static int see_mig(void *arg, const char *node, unsigned index, const char *layout)
{
    Seen *s = arg;
    size_t len = strlen(s->text);
    snprintf(s->text + len, sizeof(s->text) - len, "%s/%u %s; ", node, index, layout);
    s->n++;
    return 0;
}

static void test_mig(void **state)
{
    Fixture *f = fixture(state);
    assert_int_equal(store_mig_set(f->s, "n1", 0, "[]"), 0);
    assert_int_equal(store_mig_set(f->s, "n0", 1, "[{\"profile\": \"7g.80gb\", \"start\": 0}]"), 0);
    assert_int_equal(store_mig_set(f->s, "n0", 0, "[{\"profile\": \"1g.10gb\", \"start\": 0}]"), 0);
    assert_int_equal(store_mig_set(f->s, "n0", 0, "[{\"profile\": \"3g.40gb\", \"start\": 4}]"), 0);
    reopen(f);
    Seen s = {0};
    assert_int_equal(store_mig_load(f->s, see_mig, &s), 0);
    assert_string_equal(s.text, "n0/0 [{\"profile\": \"3g.40gb\", \"start\": 4}]; "
                                "n0/1 [{\"profile\": \"7g.80gb\", \"start\": 0}]; "
                                "n1/0 []; ");
}

static int see_learned(void *arg, const char *cls, uint64_t peak_mib, unsigned ooms)
{
    Seen *s = arg;
    size_t len = strlen(s->text);
    snprintf(s->text + len, sizeof(s->text) - len, "%s %llu/%u; ", cls,
             (unsigned long long)peak_mib, ooms);
    s->n++;
    return 0;
}

/* Learned classes ride in a job write (one transaction with the requeue they cause), a
 * later write of a class replaces its row, and they survive a reopen in class order. A
 * write whose event names a missing job takes its learned rows down with it. */
static void test_learned(void **state)
{
    Fixture *f = fixture(state);
    StoreLearned a[] = {{.cls = "search/serve", .peak_mib = 12000, .ooms = 1},
                        {.cls = "ads/embed", .peak_mib = 9000, .ooms = 0}};
    StoreWrite w = {.learned = a, .n_learned = 2};
    assert_int_equal(store_write(f->s, &w, NULL), 0);
    StoreLearned b = {.cls = "search/serve", .peak_mib = 14400, .ooms = 2};
    w = (StoreWrite){.learned = &b, .n_learned = 1};
    assert_int_equal(store_write(f->s, &w, NULL), 0);
    StoreEvent bad = {.job = 999, .t_ms = 1, .type = "oom"};
    StoreLearned c = {.cls = "research/train", .peak_mib = 70000, .ooms = 1};
    w = (StoreWrite){.events = &bad, .n_events = 1, .learned = &c, .n_learned = 1};
    assert_true(store_write(f->s, &w, NULL) < 0);
    reopen(f);
    Seen s = {0};
    assert_int_equal(store_learned_load(f->s, see_learned, &s), 0);
    assert_string_equal(s.text, "ads/embed 9000/0; search/serve 14400/2; ");

    /* a reset forgets the row for good; forgetting a class the store lacks is no error,
     * and a forget rides with the write it is in, all or nothing */
    const char *gone[] = {"search/serve", "nobody/knows"};
    w = (StoreWrite){.forget = gone, .n_forget = 2};
    assert_int_equal(store_write(f->s, &w, NULL), 0);
    const char *embed = "ads/embed";
    w = (StoreWrite){.events = &bad, .n_events = 1, .forget = &embed, .n_forget = 1};
    assert_true(store_write(f->s, &w, NULL) < 0);
    reopen(f);
    Seen after = {0};
    assert_int_equal(store_learned_load(f->s, see_learned, &after), 0);
    assert_string_equal(after.text, "ads/embed 9000/0; ");
}

/* The schema step that keys learned rows by team (migrations.c). The test below takes a
 * store back to the version before it; a step added after it must be undone there too. */
#define LEARNED_BY_TEAM_VERSION 8

/* A store from before classes belonged to teams (schema version 7) holds keys that are
 * any job's `class` text. The step that takes it to 8 drops the rows another team's
 * out-of-memory failure taught (search's job with class "research/llama" taught
 * research/llama, as its "oom" event says: the attack), the keys without a team
 * ("serving-llm", which no job reads any more), and keeps the team's own rows
 * (search/serve, taught by search's job; research/train, taught by nobody this store
 * still has events of), a '%' in a team written %25 as keys now are. */
static void test_learned_migration(void **state)
{
    Fixture *f = fixture(state);
    StoreJob a = job("fake-oom", "search"), b = job("serve-1", "search");
    write_ok(f->s, &(StoreWrite){.inserts = &a, .n_inserts = 1});
    write_ok(f->s, &(StoreWrite){.inserts = &b, .n_inserts = 1});
    StoreEvent ev[] = {
        {.job = a.id,
         .t_ms = 1,
         .type = "oom",
         .detail = "rank 0 ran out of GPU memory in the 81920 MiB it was given; workload class "
                   "research/llama now asks 98304 MiB"},
        {.job = b.id,
         .t_ms = 2,
         .type = "oom",
         .detail = "rank 0 ran out of GPU memory in the 9728 MiB it was given; workload class "
                   "search/serve now asks 11674 MiB"},
        {.job = b.id, .t_ms = 3, .type = "resized", .detail = "workload class x now asks 1 MiB"},
    };
    write_ok(f->s, &(StoreWrite){.events = ev, .n_events = 3});
    store_close(f->s);
    f->s = NULL;
    sqlite3 *db;
    assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
    char sql[512];
    snprintf(sql, sizeof(sql),
             "DELETE FROM schema_version WHERE version >= %d; DROP TABLE leader;"
             "ALTER TABLE usage DROP COLUMN measured_gpu_ms;"
             "ALTER TABLE usage DROP COLUMN busy_gpu_ms;"
             "INSERT INTO learned_memory VALUES"
             " ('research/llama', 98304, 1), ('search/serve', 11674, 1),"
             " ('serving-llm', 40000, 2), ('research/train', 30000, 1),"
             " ('50%%/x', 1000, 1)",
             LEARNED_BY_TEAM_VERSION);
    assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    reopen(f);
    assert_true(store_schema_version(f->s) >= LEARNED_BY_TEAM_VERSION);
    Seen s = {0};
    assert_int_equal(store_learned_load(f->s, see_learned, &s), 0);
    assert_string_equal(s.text, "50%25/x 1000/1; research/train 30000/1; search/serve 11674/1; ");
}

#define THREADS     4
#define PER_THREAD  200
#define BAD_THREADS 1

typedef struct Writer {
    Store *s;
    int k;
    bool bad; /* every write breaks a constraint */
    int64_t ids[PER_THREAD];
    int ok, failed;
    pthread_barrier_t *go;
} Writer;

static void *writer(void *arg)
{
    Writer *w = arg;
    pthread_barrier_wait(w->go);
    for (int i = 0; i < PER_THREAD; i++) {
        char name[32];
        snprintf(name, sizeof(name), "t%d-%d", w->k, i);
        StoreJob j = job(name, "search");
        StoreEvent e = {.job = -1, .t_ms = i, .type = "submit"};
        /* the bad writer's event names a job that does not exist */
        StoreEvent bad = {.job = INT64_C(1) << 40, .t_ms = i, .type = "submit"};
        StoreWrite sw = {
            .inserts = &j, .n_inserts = 1, .events = w->bad ? &bad : &e, .n_events = 1};
        Buf err = {0};
        int r = store_write(w->s, &sw, &err);
        if (r == 0) {
            w->ids[w->ok++] = j.id;
        } else {
            w->failed++;
            if (!w->bad || r != -EINVAL || !strcasestr(buf_str(&err), "foreign key"))
                print_message("writer %d: %d %s\n", w->k, r, buf_str(&err));
        }
        buf_free(&err);
    }
    return NULL;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static int count_event(void *arg, int64_t t_ms, const char *type, const char *detail)
{
    ++*(int *)arg;
    return 0;
}

/* Writers at once, good ones and one whose every write fails: each good write lands with
 * its own id and its event, each bad one fails alone and leaves nothing. */
static int count_job(void *arg, StoreJob *j)
{
    ++*(long *)arg;
    store_job_free(j);
    return 0;
}

/* Reads while the writers write: each sees a whole commit, so the count never drops. */
typedef struct Reader {
    Store *s;
    atomic_bool *stop;
    int reads, errors, drops;
} Reader;

static void *reader(void *arg)
{
    Reader *r = arg;
    long last = 0;
    while (!*r->stop) {
        long n = 0;
        int64_t tokens;
        if (store_jobs_load(r->s, count_job, &n) < 0 || store_token_count(r->s, &tokens) < 0 ||
            store_ping(r->s) < 0)
            r->errors++;
        if (n < last)
            r->drops++;
        last = n;
        r->reads++;
    }
    return NULL;
}

static void test_threads(void **state)
{
    Fixture *f = fixture(state);
    Writer w[THREADS + BAD_THREADS];
    pthread_t t[THREADS + BAD_THREADS], rt;
    pthread_barrier_t go;
    atomic_bool stop = false;
    Reader rd = {.s = f->s, .stop = &stop};
    assert_int_equal(pthread_create(&rt, NULL, reader, &rd), 0);
    pthread_barrier_init(&go, NULL, THREADS + BAD_THREADS);
    for (int k = 0; k < THREADS + BAD_THREADS; k++) {
        w[k] = (Writer){.s = f->s, .k = k, .bad = k >= THREADS, .go = &go};
        assert_int_equal(pthread_create(&t[k], NULL, writer, &w[k]), 0);
    }
    for (int k = 0; k < THREADS + BAD_THREADS; k++)
        pthread_join(t[k], NULL);
    stop = true;
    pthread_join(rt, NULL);
    pthread_barrier_destroy(&go);
    assert_true(rd.reads > 0);
    assert_int_equal(rd.errors, 0);
    assert_int_equal(rd.drops, 0);

    int64_t all[THREADS * PER_THREAD];
    size_t n = 0;
    for (int k = 0; k < THREADS; k++) {
        assert_int_equal(w[k].ok, PER_THREAD);
        memcpy(all + n, w[k].ids, sizeof(w[k].ids));
        n += PER_THREAD;
    }
    assert_int_equal(w[THREADS].ok, 0);
    assert_int_equal(w[THREADS].failed, PER_THREAD);
    qsort(all, n, sizeof(all[0]), cmp_i64);
    for (size_t i = 1; i < n; i++)
        assert_true(all[i] > all[i - 1]);

    reopen(f);
    Jobs *l = calloc(1, sizeof(*l));
    assert_non_null(l);
    assert_int_equal(store_jobs_load(f->s, keep_job, l), 0);
    assert_int_equal(l->n, THREADS * PER_THREAD);
    for (size_t i = 0; i < l->n; i++) {
        assert_int_equal(l->j[i].id, all[i]);
        assert_true(l->j[i].name[1] - '0' < THREADS);
    }
    int events = 0;
    assert_int_equal(store_events_for(f->s, all[0], count_event, &events), 0);
    assert_int_equal(store_events_for(f->s, all[n - 1], count_event, &events), 0);
    assert_int_equal(events, 2);
    jobs_free(l);
    free(l);
}

static void test_newer_schema(void **state)
{
    Fixture *f = fixture(state);
    store_close(f->s);
    f->s = NULL;
    sqlite3 *db;
    assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
    assert_int_equal(
        sqlite3_exec(db, "INSERT INTO schema_version VALUES (999, 0)", NULL, NULL, NULL),
        SQLITE_OK);
    sqlite3_close(db);
    Buf err = {0};
    Store *s = NULL;
    assert_int_equal(store_open(f->path, &s, &err), -ENOTSUP);
    assert_null(s);
    assert_non_null(strstr(buf_str(&err), "schema version 999"));
    assert_non_null(strstr(buf_str(&err), f->path));
    buf_free(&err);
}

static void open_fails(const char *url, int e, const char *msg)
{
    Buf err = {0};
    Store *s = NULL;
    assert_int_equal(store_open(url, &s, &err), e);
    assert_null(s);
    if (!strstr(buf_str(&err), msg))
        fail_msg("%s: '%s' lacks '%s'", url, buf_str(&err), msg);
    buf_free(&err);
}

static void test_bad_urls(void **state)
{
    Fixture *f = fixture(state);
    open_fails("", -EINVAL, "sqlite:PATH");
    open_fails("sqlite:", -EINVAL, "no file name");
    open_fails("mysql://h/d", -EINVAL, "unknown kind of store 'mysql'");
    open_fails(":memory:", -EINVAL, "must be a file");
    char url[200];
    snprintf(url, sizeof(url), "%s/no/such/dir/x.db", f->dir);
    open_fails(url, -ENOENT, "does not exist");
    snprintf(url, sizeof(url), "%s/x.db", f->path); /* a file as the directory */
    open_fails(url, -ENOENT, "not a directory");
    /* a file that is not a database */
    snprintf(url, sizeof(url), "%s/junk.db", f->dir);
    FILE *fp = fopen(url, "w");
    assert_non_null(fp);
    for (int i = 0; i < 100; i++)
        fputs("not a database at all\n", fp);
    fclose(fp);
    open_fails(url, -EIO, "not a database");
    unlink(url);
}

/* Two Stores on one database: the first to ask leads, the other stands by and reads who
 * leads; once the leader's Store is closed the other leads. */
static void test_lead(void **state)
{
    Fixture *f = fixture(state);
    Store *b = open_ok(f->url);
    char url[64] = "";
    int64_t since = -1;
    assert_int_equal(store_leader(f->s, url, sizeof(url), &since), -ENOENT);
    assert_false(store_leading(f->s, true));
    Buf err = {0};
    assert_int_equal(store_lead(f->s, "http://a:8080", 1000, &err), 1);
    assert_int_equal(store_lead(f->s, "http://a:8080", 1001, &err), 1); /* already */
    assert_int_equal(store_lead(b, "http://b:8080", 2000, &err), 0);
    assert_int_equal(err.len, 0);
    assert_true(store_leading(f->s, false));
    assert_true(store_leading(f->s, true));
    assert_false(store_leading(b, true));
    assert_int_equal(store_leader(b, url, sizeof(url), &since), 0);
    assert_string_equal(url, "http://a:8080");
    assert_int_equal(since, 1000);
    /* the leader writes as before */
    StoreJob a = job("a", "search");
    write_ok(f->s, &(StoreWrite){.inserts = &a, .n_inserts = 1});
    char small[8];
    assert_int_equal(store_leader(b, small, sizeof(small), &since), 0);
    assert_string_equal(small, "http://"); /* cut to fit, with its NUL */

    store_close(f->s);
    f->s = NULL;
    assert_int_equal(store_lead(b, NULL, 3000, &err), 1);
    assert_true(store_leading(b, true));
    assert_int_equal(store_leader(b, url, sizeof(url), &since), 0);
    assert_string_equal(url, "");
    assert_int_equal(since, 3000);
    buf_free(&err);
    f->s = b;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_open_reopen, setup, teardown),
        cmocka_unit_test_setup_teardown(test_insert_ids, setup, teardown),
        cmocka_unit_test_setup_teardown(test_load_stops, setup, teardown),
        cmocka_unit_test_setup_teardown(test_update, setup, teardown),
        cmocka_unit_test_setup_teardown(test_events_and_usage, setup, teardown),
        cmocka_unit_test_setup_teardown(test_node_spans, setup, teardown),
        cmocka_unit_test_setup_teardown(test_migrate_to_spans, setup, teardown),
        cmocka_unit_test_setup_teardown(test_migrate_to_users, setup, teardown),
        cmocka_unit_test_setup_teardown(test_server_id, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tokens, setup, teardown),
        cmocka_unit_test_setup_teardown(test_teams, setup, teardown),
        cmocka_unit_test_setup_teardown(test_team_budgets, setup, teardown),
        cmocka_unit_test_setup_teardown(test_mig, setup, teardown),
        cmocka_unit_test_setup_teardown(test_learned, setup, teardown),
        cmocka_unit_test_setup_teardown(test_learned_migration, setup, teardown),
        cmocka_unit_test_setup_teardown(test_threads, setup, teardown),
        cmocka_unit_test_setup_teardown(test_newer_schema, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_urls, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lead, setup, teardown),
    };
    const struct CMUnitTest pg_tests[] = {
        cmocka_unit_test_setup_teardown(test_open_reopen, setup_pg, teardown_pg),
        cmocka_unit_test_setup_teardown(test_insert_ids, setup_pg, teardown_pg),
        cmocka_unit_test_setup_teardown(test_load_stops, setup_pg, teardown_pg),
        cmocka_unit_test_setup_teardown(test_update, setup_pg, teardown_pg),
        cmocka_unit_test_setup_teardown(test_events_and_usage, setup_pg, teardown_pg),
        cmocka_unit_test_setup_teardown(test_node_spans, setup_pg, teardown_pg),
        cmocka_unit_test_setup_teardown(test_server_id, setup_pg, teardown_pg),
        cmocka_unit_test_setup_teardown(test_tokens, setup_pg, teardown_pg),
        cmocka_unit_test_setup_teardown(test_teams, setup_pg, teardown_pg),
        cmocka_unit_test_setup_teardown(test_team_budgets, setup_pg, teardown_pg),
        cmocka_unit_test_setup_teardown(test_mig, setup_pg, teardown_pg),
        cmocka_unit_test_setup_teardown(test_learned, setup_pg, teardown_pg),
        cmocka_unit_test_setup_teardown(test_threads, setup_pg, teardown_pg),
        cmocka_unit_test_setup_teardown(test_lead, setup_pg, teardown_pg),
    };
    int failed = cmocka_run_group_tests_name("sqlite", tests, NULL, NULL);
    failed += cmocka_run_group_tests_name("postgresql", pg_tests, group_pg_up, group_pg_down);
    return failed;
}
