/* test_server_lock.c: the scheduler's cycle writes its changes with Server.lock
 * released, and no reader that tells sees them before they are durable (commit.c).
 * A server (no HTTP) on the demo cluster, its nodes made ready, takes a one-GPU job;
 * the cycle that starts it commits, and the fault fixture's gate holds that commit's
 * fsync. While it is held: the lock is free (a request that takes it goes on), memory
 * has the job starting, and a reader in server_lock (as every API handler and the
 * engine's threads take the lock) waits. Once the gate opens the reader goes on, sees
 * the start, and the store has it. A request's change (a cancel) is held the same way:
 * the lock is free while it is written, and the request returns once it is durable. */
#include "server/state.h"
#include "spec/spec.h"
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

static const Caller lead = {.token_id = 1, .role = ROLE_LEAD, .team = "search"};

typedef struct Reader {
    Server *s;
    int64_t job;
    bool done;     /* set under the lock: it got in */
    int state;     /* the job's state it saw */
    bool in_write; /* it saw a write under way */
} Reader;

static void *reader_main(void *arg)
{
    Reader *r = arg;
    server_lock(r->s);
    ServerJob *j = server_job(r->s, r->job);
    r->state = j ? j->st.state : -1;
    r->in_write = r->s->committing;
    r->done = true;
    pthread_mutex_unlock(&r->s->lock);
    return NULL;
}

static bool reader_done(Reader *r)
{
    pthread_mutex_lock(&r->s->lock);
    bool done = r->done;
    pthread_mutex_unlock(&r->s->lock);
    return done;
}

typedef struct Stored {
    int64_t id;
    int state;
} Stored;

static int find_stored(void *arg, StoreJob *j)
{
    Stored *st = arg;
    if (j->id == st->id)
        st->state = j->state;
    store_job_free(j);
    return 0;
}

typedef struct Fixture {
    char dir[128];
    Server *s;
    Buf err;
} Fixture;

/* A server on the demo cluster with its nodes ready, past its thread's first round (its
 * first cycle and the first writes of the node spans, whose next comes 5 s later). */
static void fixture_open(Fixture *f)
{
    char url[200];
    fault_tmpdir(f->dir, sizeof(f->dir), "srvlock");
    assert_non_null(mkdtemp(f->dir));
    snprintf(url, sizeof(url), "sqlite:%s/gpuorch.db", f->dir);
    ServerOptions o = {.config_path = "examples/cluster-demo.yaml",
                       .db_url = url,
                       .data_dir = f->dir,
                       .cycle_ms = 3600 * 1000,
                       .lost_after_ms = 3600 * 1000};
    int r = server_open(&o, &f->s, &f->err);
    if (r)
        print_message("server_open: %s\n", buf_str(&f->err));
    assert_int_equal(r, 0);
    Server *s = f->s;
    for (;;) {
        pthread_mutex_lock(&s->lock);
        bool first = s->span_tick_mono_ms != 0 && s->counters.cycles > 0;
        pthread_mutex_unlock(&s->lock);
        if (first)
            break;
        usleep(1000);
    }
    pthread_mutex_lock(&s->lock);
    int64_t now = server_now_ms();
    for (size_t i = 0; i < s->c->n_nodes; i++)
        server_node_ready(s, (uint32_t)i, AWAY_NONE, now);
    pthread_mutex_unlock(&s->lock);
    /* the nodes' capacity spans are written by the scheduler thread (nodespan_flush) */
    for (;;) {
        pthread_mutex_lock(&s->lock);
        bool counted = s->nodes[0].span_id != 0;
        pthread_mutex_unlock(&s->lock);
        if (counted)
            break;
        usleep(1000);
    }
}

static void fixture_close(Fixture *f)
{
    server_close(f->s);
    buf_free(&f->err);
    char cmd[200];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
    assert_int_equal(system(cmd), 0);
}

static int64_t submit_one(Fixture *f)
{
    JobList jl = {0};
    const char *job =
        "{\"name\": \"j\", \"team\": \"search\", \"gpus\": 1, \"command\": [\"true\"]}";
    assert_int_equal(spec_parse_jobs_yaml(job, strlen(job), "test", &jl, &f->err), 0);
    int64_t id = 0;
    assert_int_equal(server_submit(f->s, &lead, &jl, &id, &f->err), 201);
    job_list_free(&jl);
    return id;
}

static int stored_state(Server *s, int64_t id)
{
    Stored st = {.id = id, .state = -1};
    assert_int_equal(store_jobs_load(s->store, find_stored, &st), 0);
    return st.state;
}

/* With a write held at the gate: the lock is free, memory has `want`, a reader waits
 * while the store still has `was`; once the gate opens, the reader sees `want` with
 * nothing under way and the store has it. (then) runs after the gate opens. */
static void check_held_write(Server *s, int64_t id, int want, int was, pthread_t *then)
{
    assert_true(fault_gate_wait_held(10000));
    assert_int_equal(pthread_mutex_trylock(&s->lock), 0);
    ServerJob *j = server_job(s, id);
    assert_non_null(j);
    assert_int_equal(j->st.state, want);
    assert_true(s->committing);
    pthread_mutex_unlock(&s->lock);

    Reader rd = {.s = s, .job = id, .state = -1};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, reader_main, &rd), 0);
    usleep(200 * 1000);
    assert_false(reader_done(&rd));             /* it waits for the write */
    assert_int_equal(stored_state(s, id), was); /* not durable yet */

    fault_gate_open();
    if (then)
        assert_int_equal(pthread_join(*then, NULL), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_true(rd.done);
    assert_int_equal(rd.state, want);
    assert_false(rd.in_write);
    assert_int_equal(stored_state(s, id), want);
}

/* The cycle that starts a job commits with the lock released. */
static void test_cycle_commits_unlocked(void **state)
{
    (void)state;
    Fixture f = {0};
    fixture_open(&f);
    fault_gate_close();
    int64_t id = submit_one(&f);
    check_held_write(f.s, id, JOB_STARTING, JOB_PENDING, NULL);
    fixture_close(&f);
}

typedef struct Cancel {
    Server *s;
    int64_t id;
    int status;
} Cancel;

static void *cancel_main(void *arg)
{
    Cancel *c = arg;
    Buf err = {0};
    c->status = server_cancel(c->s, &lead, c->id, &err);
    buf_free(&err);
    return NULL;
}

/* A request's change (a cancel) is written with the lock released too, and answered
 * once it is durable. */
static void test_request_commits_unlocked(void **state)
{
    (void)state;
    Fixture f = {0};
    fixture_open(&f);
    Server *s = f.s;
    int64_t id = submit_one(&f);
    /* its start is durable, and the scheduler has nothing left to do */
    for (;;) {
        server_lock(s);
        ServerJob *j = server_job(s, id);
        bool started = j && j->st.state == JOB_STARTING && !s->dirty;
        pthread_mutex_unlock(&s->lock);
        if (started)
            break;
        usleep(1000);
    }
    fault_gate_close();
    Cancel c = {.s = s, .id = id, .status = -1};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, cancel_main, &c), 0);
    /* its worker is told to stop: the job is stopping until the agent reports the end */
    check_held_write(s, id, JOB_STOPPING, JOB_STARTING, &t);
    assert_int_equal(c.status, 200);
    fixture_close(&f);
}

int main(void)
{
    if (fault_install() < 0) {
        fprintf(stderr, "cannot install the fault hooks in SQLite\n");
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cycle_commits_unlocked),
        cmocka_unit_test(test_request_commits_unlocked),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
