/* test_server_lock.c: the scheduler's cycle writes its changes with Server.lock
 * released, and no reader that tells sees them before they are durable (commit.c).
 * A server (no HTTP) on the demo cluster, its nodes made ready, takes a one-GPU job;
 * the cycle that starts it commits, and the fault fixture's gate holds that commit's
 * fsync. While it is held: the lock is free (a request that takes it goes on), memory
 * has the job starting, and a reader in server_lock (as every API handler and the
 * engine's threads take the lock) waits. Once the gate opens the reader goes on, sees
 * the start, and the store has it. */
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

static void test_cycle_commits_unlocked(void **state)
{
    char dir[128], url[200];
    fault_tmpdir(dir, sizeof(dir), "srvlock");
    assert_non_null(mkdtemp(dir));
    snprintf(url, sizeof(url), "sqlite:%s/gpuorch.db", dir);
    ServerOptions o = {.config_path = "examples/cluster-demo.yaml",
                       .db_url = url,
                       .data_dir = dir,
                       .cycle_ms = 3600 * 1000,
                       .lost_after_ms = 3600 * 1000};
    Server *s = NULL;
    Buf err = {0};
    int r = server_open(&o, &s, &err);
    if (r)
        print_message("server_open: %s\n", buf_str(&err));
    assert_int_equal(r, 0);
    /* past the thread's first round (its first cycle and its first write of the node
     * spans, whose next comes 5 s later): the next sync it makes is a cycle's commit */
    for (;;) {
        pthread_mutex_lock(&s->lock);
        bool first = s->span_tick_mono_ms != 0 && s->counters.cycles > 0;
        pthread_mutex_unlock(&s->lock);
        if (first)
            break;
        usleep(1000);
    }
    fault_gate_close();
    pthread_mutex_lock(&s->lock);
    int64_t now = server_now_ms();
    for (size_t i = 0; i < s->c->n_nodes; i++)
        server_node_ready(s, (uint32_t)i, AWAY_NONE, now);
    pthread_mutex_unlock(&s->lock);
    JobList jl = {0};
    const char *job =
        "{\"name\": \"j\", \"team\": \"search\", \"gpus\": 1, \"command\": [\"true\"]}";
    assert_int_equal(spec_parse_jobs_yaml(job, strlen(job), "test", &jl, &err), 0);
    int64_t id = 0;
    assert_int_equal(server_submit(s, &lead, &jl, &id, &err), 201);
    job_list_free(&jl);

    /* the cycle that starts it is in its commit's fsync */
    assert_true(fault_gate_wait_held(10000));
    assert_int_equal(pthread_mutex_trylock(&s->lock), 0);
    ServerJob *j = server_job(s, id);
    assert_non_null(j);
    assert_int_equal(j->st.state, JOB_STARTING);
    assert_true(s->committing);
    pthread_mutex_unlock(&s->lock);

    Reader rd = {.s = s, .job = id, .state = -1};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, reader_main, &rd), 0);
    usleep(200 * 1000);
    assert_false(reader_done(&rd)); /* it waits for the write */
    Stored st = {.id = id, .state = -1};
    assert_int_equal(store_jobs_load(s->store, find_stored, &st), 0);
    assert_int_equal(st.state, JOB_PENDING); /* not durable yet */

    fault_gate_open();
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_true(rd.done);
    assert_int_equal(rd.state, JOB_STARTING);
    assert_false(rd.in_write);
    st.state = -1;
    assert_int_equal(store_jobs_load(s->store, find_stored, &st), 0);
    assert_int_equal(st.state, JOB_STARTING);
    server_close(s);
    buf_free(&err);
    char cmd[200];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    if (fault_install() < 0) {
        fprintf(stderr, "cannot install the fault hooks in SQLite\n");
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cycle_commits_unlocked),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
