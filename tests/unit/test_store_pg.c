/* test_store_pg.c: what only the PostgreSQL back end has to prove, against a real
 * throwaway PostgreSQL 15 (pg_fixture.h; the whole binary skips, saying why, without
 * one): sessions cut by pg_terminate_backend, idle and while four threads write (every
 * write that returned 0 is there; writes after the cut succeed on a new session); a
 * crash (pg_ctl stop -m immediate) right after acknowledged writes on a database whose
 * default is synchronous_commit=off loses none of them; bad URLs and refused logins
 * give -EINVAL and -EIO, with the password masked in every message; four threads opening
 * one fresh database at once apply each schema step once; a database of a newer gpuorch
 * is refused; leadership: one of two Stores leads, loses it with its session (-ESTALE),
 * the other takes over, and closing a leader frees it at once. */
#include "store/backend.h"
#include "store/pg.h"
#include "store/store.h"

#include "util/buf.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "pg_fixture.h"

typedef struct Fixture {
    char db[64];
    char url[256];
} Fixture;

static int setup(void **state)
{
    Fixture *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    assert_int_equal(pg_fixture_createdb(f->db, sizeof(f->db), f->url, sizeof(f->url)), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    free(*state);
    return 0;
}

static Store *open_ok(const char *url)
{
    Store *s = NULL;
    Buf err = {0};
    int r = store_open(url, &s, &err);
    if (r)
        print_message("%s\n", buf_str(&err));
    assert_int_equal(r, 0);
    buf_free(&err);
    return s;
}

static StoreJob job(const char *name)
{
    return (StoreJob){
        .name = (char *)name,
        .team = (char *)"search",
        .spec_json = (char *)"{}",
        .owner = 1,
        .submit_ms = 1000,
        .start_ms = -1,
        .end_ms = -1,
        .exit_code = -1,
        .checkpoint_ms = -1,
    };
}

/* One job and its submit event; 0 and the job's id, or the error. */
static int submit(Store *s, const char *name, int64_t *ret_id, Buf *err)
{
    StoreJob j = job(name);
    StoreEvent e = {.job = -1, .t_ms = 1, .type = "submit"};
    int r = store_write(
        s, &(StoreWrite){.inserts = &j, .n_inserts = 1, .events = &e, .n_events = 1}, err);
    if (r == 0)
        *ret_id = j.id;
    return r;
}

static int count_job(void *arg, StoreJob *j)
{
    ++*(long *)arg;
    store_job_free(j);
    return 0;
}

static long jobs_in(Store *s)
{
    long n = 0;
    assert_int_equal(store_jobs_load(s, count_job, &n), 0);
    return n;
}

/* Cut the sessions of this database named app ("gpuorch-writer", "gpuorch-reader"),
 * waiting until they are gone; how many. */
static int cut(const Fixture *f, const char *app)
{
    char sql[256], n[16];
    snprintf(sql, sizeof(sql),
             "SELECT count(pg_terminate_backend(pid, 5000)) FROM pg_stat_activity "
             "WHERE datname = '%s' AND application_name = '%s'",
             f->db, app);
    assert_int_equal(pg_fixture_sql("postgres", sql, n, sizeof(n)), 0);
    return atoi(n);
}

/* Every id in ids is a job of the store. */
static void all_there(Store *s, const int64_t *ids, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        StoreJob j;
        int r = store_job_get(s, ids[i], &j);
        if (r != 0)
            fail_msg("job %" PRId64 ", acknowledged, is missing (%d)", ids[i], r);
        store_job_free(&j);
    }
}

static void test_cut_idle(void **state)
{
    Fixture *f = *state;
    Store *s = open_ok(f->url);
    int64_t id = 0;
    Buf err = {0};
    assert_int_equal(submit(s, "a", &id, &err), 0);
    assert_int_equal(jobs_in(s), 1);
    /* a writer cut while idle: the next write finds out, reconnects and succeeds */
    assert_int_equal(cut(f, "gpuorch-writer"), 1);
    int r = submit(s, "b", &id, &err);
    if (r)
        print_message("%s\n", buf_str(&err));
    assert_int_equal(r, 0);
    assert_int_equal(cut(f, "gpuorch-reader"), 1);
    assert_int_equal(jobs_in(s), 2);
    /* both at once, twice */
    for (int i = 0; i < 2; i++) {
        cut(f, "gpuorch-writer");
        cut(f, "gpuorch-reader");
        assert_int_equal(store_ping(s), 0);
        assert_int_equal(submit(s, "c", &id, &err), 0);
    }
    assert_int_equal(jobs_in(s), 4);
    buf_free(&err);
    store_close(s);
}

#define WRITERS    4
#define PER_WRITER 75 /* 300 in all */
#define MOST       4000

typedef struct Writer {
    Store *s;
    int k;
    int n;             /* writes to make, or until stop */
    atomic_bool *stop; /* NULL: n of them */
    int64_t ids[MOST]; /* of the writes acknowledged */
    size_t ok;
    int failed, odd;
} Writer;

static void *writer(void *arg)
{
    Writer *w = arg;
    for (int i = 0; i < w->n && !(w->stop && atomic_load(w->stop)); i++) {
        char name[32];
        snprintf(name, sizeof(name), "w%d-%d", w->k, i);
        Buf err = {0};
        int64_t id;
        int r = submit(w->s, name, &id, &err);
        if (r == 0) {
            w->ids[w->ok++] = id;
        } else {
            w->failed++;
            /* a cut session fails the batch it cut, saying whether it may be saved */
            if (r != -EIO || (!strstr(buf_str(&err), "(not saved)") &&
                              !strstr(buf_str(&err), "may still be saved")))
                w->odd++, print_message("writer %d: %d %s\n", w->k, r, buf_str(&err));
        }
        buf_free(&err);
    }
    return NULL;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

/* Sessions cut while four threads write: a batch the cut catches fails, saying whether
 * it may still be saved; every write acknowledged is there; the rest go on. */
static void test_cut_busy(void **state)
{
    Fixture *f = *state;
    Store *s = open_ok(f->url);
    atomic_bool stop = false;
    Writer *w = calloc(WRITERS, sizeof(*w));
    assert_non_null(w);
    pthread_t t[WRITERS];
    for (int k = 0; k < WRITERS; k++) {
        w[k] = (Writer){.s = s, .k = k, .n = MOST, .stop = &stop};
        assert_int_equal(pthread_create(&t[k], NULL, writer, &w[k]), 0);
    }
    int cuts = 0;
    for (int i = 0; i < 8; i++) {
        sleep_ms(30);
        cuts += cut(f, i % 2 ? "gpuorch-reader" : "gpuorch-writer");
        assert_true(jobs_in(s) >= 0);
    }
    sleep_ms(30);
    atomic_store(&stop, true);
    for (int k = 0; k < WRITERS; k++)
        pthread_join(t[k], NULL);
    size_t ok = 0, failed = 0;
    for (int k = 0; k < WRITERS; k++) {
        assert_int_equal(w[k].odd, 0);
        ok += w[k].ok;
        failed += (size_t)w[k].failed;
        all_there(s, w[k].ids, w[k].ok);
    }
    print_message("%d sessions cut; %zu writes acknowledged, %zu failed\n", cuts, ok, failed);
    assert_true(cuts >= 4);
    assert_true(ok > 0);
    /* after the cuts, writes and reads go on */
    int64_t id;
    assert_int_equal(submit(s, "after", &id, NULL), 0);
    all_there(s, &id, 1);
    store_close(s);
    free(w);
}

/* Acknowledged writes survive a crash even where the database's default would not make
 * them durable: the store forces synchronous_commit on in its session, and the fixture's
 * WAL writer waits 10 s, so a commit not flushed by its own session is lost here. */
static void test_crash(void **state)
{
    Fixture *f = *state;
    char sql[128], v[16];
    snprintf(sql, sizeof(sql), "ALTER DATABASE %s SET synchronous_commit = off", f->db);
    assert_int_equal(pg_fixture_sql("postgres", sql, NULL, 0), 0);
    assert_int_equal(pg_fixture_sql(f->db, "SHOW synchronous_commit", v, sizeof(v)), 0);
    assert_string_equal(v, "off");
    Store *s = open_ok(f->url);
    Writer *w = calloc(WRITERS, sizeof(*w));
    pthread_t t[WRITERS];
    assert_non_null(w);
    for (int k = 0; k < WRITERS; k++) {
        w[k] = (Writer){.s = s, .k = k, .n = PER_WRITER};
        assert_int_equal(pthread_create(&t[k], NULL, writer, &w[k]), 0);
    }
    for (int k = 0; k < WRITERS; k++)
        pthread_join(t[k], NULL);
    size_t ok = 0;
    for (int k = 0; k < WRITERS; k++)
        ok += w[k].ok;
    assert_int_equal(ok, (size_t)WRITERS * PER_WRITER);
    assert_int_equal(pg_fixture_crash_restart(), 0);
    store_close(s);
    s = open_ok(f->url);
    for (int k = 0; k < WRITERS; k++)
        all_there(s, w[k].ids, w[k].ok);
    assert_int_equal(jobs_in(s), (long)ok);
    store_close(s);
    free(w);
}

static void open_fails(const char *url, int e, const char *msg, const char *secret)
{
    Buf err = {0};
    Store *s = NULL;
    int r = store_open(url, &s, &err);
    if (r != e)
        fail_msg("%s: %d, not %d: %s", url, r, e, buf_str(&err));
    assert_null(s);
    if (!strstr(buf_str(&err), msg))
        fail_msg("%s: '%s' lacks '%s'", url, buf_str(&err), msg);
    if (secret && strstr(buf_str(&err), secret))
        fail_msg("'%s' shows the password", buf_str(&err));
    buf_free(&err);
}

static void redacts(const char *url, const char *want)
{
    Buf b = {0};
    store_url_redact(url, &b);
    assert_string_equal(buf_str(&b), want);
    buf_free(&b);
}

static void test_urls_and_logins(void **state)
{
    Fixture *f = *state;
    redacts("postgres://user:secret@host/db", "postgres://user:***@host/db");
    redacts("postgresql://user@host:5433/db?sslmode=require",
            "postgresql://user@host:5433/db?sslmode=require");
    redacts("postgres:///db?host=/tmp/x&password=secret&user=u",
            "postgres:///db?host=/tmp/x&password=***&user=u");
    redacts("host=/tmp user=u password='a b\\' c' dbname=d",
            "host=/tmp user=u password=*** dbname=d");
    redacts("host=h password = secret", "host=h password = ***");
    redacts("/var/lib/gpuorch/state.db", "/var/lib/gpuorch/state.db");

    char sql[160], url[320], db[80];
    assert_int_equal(
        pg_fixture_sql("postgres", "CREATE ROLE gpuorch LOGIN PASSWORD 'sekrit-pw'", NULL, 0), 0);
    snprintf(db, sizeof(db), "%s_owned", f->db);
    snprintf(sql, sizeof(sql), "CREATE DATABASE %s OWNER gpuorch", db);
    assert_int_equal(pg_fixture_sql("postgres", sql, NULL, 0), 0);

    /* the right password opens it, and the store's messages mask it */
    pg_fixture_url(url, sizeof(url), db, "gpuorch", "sekrit-pw");
    Store *s = open_ok(url);
    Buf err = {0};
    StoreEvent bad = {.job = 12345, .t_ms = 1, .type = "x"};
    assert_int_equal(store_write(s, &(StoreWrite){.events = &bad, .n_events = 1}, &err), -EINVAL);
    assert_non_null(strstr(buf_str(&err), "gpuorch:***@"));
    assert_null(strstr(buf_str(&err), "sekrit-pw"));
    buf_free(&err);
    store_close(s);

    pg_fixture_url(url, sizeof(url), db, "gpuorch", "wrong-pw");
    open_fails(url, -EIO, "password authentication failed", "wrong-pw");
    open_fails(url, -EIO, "gpuorch:***@", "wrong-pw");
    snprintf(url, sizeof(url), "postgresql:///%s?host=%s&user=gpuorch&password=wrong-pw", db,
             pg.dir);
    open_fails(url, -EIO, "password=***", "wrong-pw");
    snprintf(url, sizeof(url), "postgresql:///no_such_db?host=%s&user=postgres", pg.dir);
    open_fails(url, -EIO, "does not exist", NULL);
    open_fails("postgresql:///x?host=/nonexistent/dir", -EIO, "cannot connect", NULL);
    /* what libpq cannot parse */
    snprintf(url, sizeof(url), "postgresql://gpuorch:sekrit-pw@/%s?host=%s&bogus=1", db, pg.dir);
    open_fails(url, -EINVAL, "bogus", "sekrit-pw");
    open_fails("postgres://u:p%zz@h/d", -EINVAL, "percent", "p%zz");
    open_fails("postgresql://[::1/d", -EINVAL, "libpq", NULL);
}

#define OPENERS 4

typedef struct Opener {
    const char *url;
    pthread_barrier_t *go;
    int r, version;
    Buf err;
} Opener;

static void *opener(void *arg)
{
    Opener *o = arg;
    Store *s = NULL;
    pthread_barrier_wait(o->go);
    o->r = store_open(o->url, &s, &o->err);
    if (o->r == 0) {
        o->version = store_schema_version(s);
        store_close(s);
    }
    return NULL;
}

/* Several servers opening one fresh database at once: each step is applied once, under
 * the migrations' advisory lock, and every one of them ends at the latest version. */
static void test_concurrent_migrations(void **state)
{
    Fixture *f = *state;
    Opener o[OPENERS];
    pthread_t t[OPENERS];
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, OPENERS);
    for (int k = 0; k < OPENERS; k++) {
        o[k] = (Opener){.url = f->url, .go = &go};
        assert_int_equal(pthread_create(&t[k], NULL, opener, &o[k]), 0);
    }
    for (int k = 0; k < OPENERS; k++)
        pthread_join(t[k], NULL);
    pthread_barrier_destroy(&go);
    for (int k = 0; k < OPENERS; k++) {
        if (o[k].r)
            fail_msg("opener %d: %d %s", k, o[k].r, buf_str(&o[k].err));
        assert_int_equal(o[k].version, STORE_SCHEMA_VERSIONS);
        buf_free(&o[k].err);
    }
    char v[32];
    assert_int_equal(pg_fixture_sql(f->db,
                                    "SELECT count(*) || ' ' || count(DISTINCT version) || ' ' || "
                                    "max(version) FROM schema_version",
                                    v, sizeof(v)),
                     0);
    char want[32];
    snprintf(want, sizeof(want), "%d %d %d", STORE_SCHEMA_VERSIONS, STORE_SCHEMA_VERSIONS,
             STORE_SCHEMA_VERSIONS);
    assert_string_equal(v, want);
    assert_int_equal(pg_fixture_sql(f->db, "SELECT count(*) FROM server_identity", v, sizeof(v)),
                     0);
    assert_string_equal(v, "1");
    assert_int_equal(pg_migrations_latest(), STORE_SCHEMA_VERSIONS);
}

static void test_newer_schema(void **state)
{
    Fixture *f = *state;
    store_close(open_ok(f->url));
    assert_int_equal(pg_fixture_sql(f->db, "INSERT INTO schema_version VALUES (999, 0)", NULL, 0),
                     0);
    Buf err = {0};
    Store *s = NULL;
    assert_int_equal(store_open(f->url, &s, &err), -ENOTSUP);
    assert_null(s);
    assert_non_null(strstr(buf_str(&err), "schema version 999"));
    buf_free(&err);
}

/* Cut the session that holds the leader's advisory lock; how many were cut. */
static int cut_leader(const Fixture *f)
{
    char sql[320], n[16];
    snprintf(sql, sizeof(sql),
             "SELECT count(pg_terminate_backend(pid, 5000)) FROM pg_locks "
             "WHERE locktype = 'advisory' AND granted AND objsubid = 1 "
             "AND classid::bigint = %" PRId64 " AND objid::bigint = %" PRId64,
             PG_LOCK_LEAD >> 32, PG_LOCK_LEAD & INT64_C(0xffffffff));
    assert_int_equal(pg_fixture_sql(f->db, sql, n, sizeof(n)), 0);
    return atoi(n);
}

static void test_leadership(void **state)
{
    Fixture *f = *state;
    Store *a = open_ok(f->url), *b = open_ok(f->url);
    Buf err = {0};
    assert_int_equal(store_lead(a, "http://a:8080", 1000, &err), 1);
    assert_int_equal(store_lead(b, "http://b:8080", 1100, &err), 0);
    assert_int_equal(err.len, 0);
    char url[64];
    int64_t since;
    assert_int_equal(store_leader(b, url, sizeof(url), &since), 0);
    assert_string_equal(url, "http://a:8080");
    assert_int_equal(since, 1000);
    int64_t id;
    assert_int_equal(submit(a, "by-a", &id, &err), 0);
    assert_true(store_leading(a, true));
    assert_false(store_leading(b, true));

    /* the leader's session goes: its next write is refused, and it knows it leads no more */
    assert_int_equal(cut_leader(f), 1);
    assert_int_equal(submit(a, "stale", &id, &err), -ESTALE);
    assert_non_null(strstr(buf_str(&err), "no longer the leader"));
    buf_reset(&err);
    assert_int_equal(submit(a, "stale-again", &id, &err), -ESTALE);
    buf_reset(&err);
    assert_int_equal(store_team_set(a, "search", 1, 1, 1), -ESTALE);
    assert_false(store_leading(a, true));
    assert_false(store_leading(a, false));
    assert_int_equal(store_lead(a, "http://a:8080", 1200, &err), -ESTALE);
    buf_reset(&err);
    /* reads still work: a standing-by server reads */
    assert_int_equal(jobs_in(a), 1);

    /* the other takes over and writes */
    assert_int_equal(store_lead(b, "http://b:8080", 2000, &err), 1);
    assert_true(store_leading(b, true));
    assert_int_equal(store_leader(a, url, sizeof(url), &since), 0);
    assert_string_equal(url, "http://b:8080");
    assert_int_equal(since, 2000);
    assert_int_equal(submit(b, "by-b", &id, &err), 0);

    /* a lost lock found by asking, before any write */
    Store *c = open_ok(f->url);
    assert_int_equal(store_lead(c, "http://c:8080", 3000, &err), 0);
    assert_int_equal(cut_leader(f), 1);
    assert_false(store_leading(b, true));
    assert_int_equal(submit(b, "stale-b", &id, &err), -ESTALE);
    buf_reset(&err);
    assert_int_equal(store_lead(c, "http://c:8080", 3100, &err), 1);

    /* closing the leader frees the lock at once */
    Store *d = open_ok(f->url);
    assert_int_equal(store_lead(d, "http://d:8080", 4000, &err), 0);
    store_close(c);
    assert_int_equal(store_lead(d, "http://d:8080", 4100, &err), 1);
    assert_int_equal(store_leader(d, url, sizeof(url), &since), 0);
    assert_string_equal(url, "http://d:8080");
    assert_int_equal(jobs_in(d), 2);
    buf_free(&err);
    store_close(a);
    store_close(b);
    store_close(d);
}

int main(void)
{
    if (pg_fixture_start() < 0) {
        fprintf(stderr, "test_store_pg: could not start PostgreSQL\n");
        pg_fixture_stop();
        return 1;
    }
    if (!pg.up) {
        printf("test_store_pg: skipped: %s\n", pg.why);
        return 77; /* ctest's SKIP_RETURN_CODE */
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_cut_idle, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cut_busy, setup, teardown),
        cmocka_unit_test_setup_teardown(test_crash, setup, teardown),
        cmocka_unit_test_setup_teardown(test_urls_and_logins, setup, teardown),
        cmocka_unit_test_setup_teardown(test_concurrent_migrations, setup, teardown),
        cmocka_unit_test_setup_teardown(test_newer_schema, setup, teardown),
        cmocka_unit_test_setup_teardown(test_leadership, setup, teardown),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    pg_fixture_stop();
    return failed;
}
