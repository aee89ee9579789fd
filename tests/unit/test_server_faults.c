/* test_server_faults.c: the server's requests when the store or memory fails under them
 * (fault_fixture.h). A server (no HTTP: the request functions of state.h, as the API
 * handlers call them) on the demo cluster takes a scenario of requests: a submission, a
 * submission of two jobs, a priority change, a move in the queue, a cancellation, a team
 * quota change, another submission. For every N the scenario reaches, it runs with the
 * Nth SQLite allocation, the Nth write or fsync, or the Nth allocation of the process
 * (malloc interposed in this binary only, counted on the test's thread only) failing.
 *
 * After each request, memory must match its reply: an accepted submission's jobs are
 * there, a refused one's are not, a change answered 200 is made. A change made in
 * memory that the store could not take (a failed write, or an allocation that failed
 * while the change was listed: Changes.err) marks the server diverged, and the
 * daemon's top level then ends the process (state.h: a restart reloads the durable
 * state); the child does what that top level does. So each run is a child process; the
 * parent then starts a server on the same database without faults and checks that
 * every request answered with success is there, and every refused one is not (or,
 * while the disk fails on, whole); a request the process ended after may be either.
 * Each change is there whole or not at all: its job's row and its event together. `make test` tries
 * every N of the process's allocations and of the I/O when they fail once, every 2nd I/O
 * and every 5th allocation otherwise; GPUORCH_FAULT_STRIDE=1 tries every N.
 *
 * The server's close (server_close) runs with the fault still armed, and ASan checks
 * the parent's restarts for leaks; the children end with _exit, as a crash would. */
#include "server/state.h"
#include "spec/spec.h"
#include "util/buf.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "fault_fixture.h"

#include "fault_malloc.h"

/* ---- the scenario ---- */

enum { OP_SUBMIT1, OP_SUBMIT2, OP_PRIORITY, OP_MOVE, OP_CANCEL, OP_TEAM, OP_SUBMIT3, OP_COUNT };

static const char *const op_name[OP_COUNT] = {"submit", "submit two", "priority", "move",
                                              "cancel", "team",       "submit"};

typedef struct Arm {
    FaultKind kind;
    int64_t at;
    bool persistent;
} Arm;

/* What the child was told, in memory the parent sees after the child is gone. */
typedef struct Shared {
    bool opened;
    bool ran[OP_COUNT];   /* the request was made */
    int status[OP_COUNT]; /* its reply; 0: the process ended inside it */
    int64_t ids[OP_COUNT][2];
    int64_t calls; /* calls of the armed kind the scenario made */
} Shared;

static const Caller lead = {.token_id = 1, .role = ROLE_LEAD, .team = "search"};

/* A check in the child: say what failed and end it with a code the parent reports. */
#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            char msg_[256]; /* no stdio: its buffer needs the malloc that may be failing */        \
            int n_ = snprintf(msg_, sizeof(msg_), "%s:%d: check failed: %s\n", __FILE__, __LINE__, \
                              #cond);                                                              \
            if (write(STDERR_FILENO, msg_, (size_t)n_) < 0)                                        \
                _exit(5);                                                                          \
            _exit(3);                                                                              \
        }                                                                                          \
    } while (0)

/* A line to the child's log, without stdio's buffer (which _exit would lose). */
static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (n > 0 && write(STDERR_FILENO, msg, (size_t)n < sizeof(msg) ? (size_t)n : sizeof(msg)) < 0)
        _exit(5);
}

static char db_url[200], data_dir[128];
/* An empty database at the newest schema, copied for each run (main). */
static char template_dir[128], template_db[160];

static ServerOptions options(void)
{
    /* no cycle, no node lost while the scenario runs: its requests alone touch the store */
    return (ServerOptions){.config_path = "examples/cluster-demo.yaml",
                           .db_url = db_url,
                           .data_dir = data_dir,
                           .cycle_ms = 3600 * 1000,
                           .lost_after_ms = 3600 * 1000};
}

static void parse(const char *json, JobList *ret)
{
    Buf err = {0};
    *ret = (JobList){0};
    CHECK(spec_parse_jobs_yaml(json, strlen(json), "test", ret, &err) == 0);
    buf_free(&err);
}

/* After a submission: its jobs in memory when accepted, no new job when refused. */
static void check_submitted(Server *s, Shared *sh, int op, size_t n, int64_t max_before)
{
    int st = sh->status[op];
    CHECK(st == 201 || st == 500);
    pthread_mutex_lock(&s->lock);
    if (st == 201) {
        for (size_t i = 0; i < n; i++) {
            ServerJob *j = server_job(s, sh->ids[op][i]);
            CHECK(j && j->st.state == JOB_PENDING && j->sj.queued);
        }
    } else {
        CHECK(s->max_id == max_before);
    }
    pthread_mutex_unlock(&s->lock);
}

/* What the daemon's top level does after a request (http.c): when memory went ahead of
 * the store, the process ends, and the request's outcome is the restart's to tell. */
static void end_if_diverged(Server *s, Shared *sh, int op)
{
    if (!server_diverged(s))
        return;
    sh->status[op] = 0;
    _exit(1);
}

static int submit(Server *s, Shared *sh, int op, JobList *jl)
{
    int64_t ids[2] = {0, 0};
    pthread_mutex_lock(&s->lock);
    int64_t max_before = s->max_id;
    pthread_mutex_unlock(&s->lock);
    Buf err = {0};
    sh->ran[op] = true;
    size_t n = jl->n;
    int st = server_submit(s, &lead, jl, ids, &err);
    sh->status[op] = st;
    end_if_diverged(s, sh, op);
    memcpy(sh->ids[op], ids, sizeof(ids));
    check_submitted(s, sh, op, n, max_before);
    buf_free(&err);
    return st;
}

static void child(const Arm *arm, Shared *sh)
{
    /* the server's log lines, and a failed check, go to the run's folder */
    char log[200];
    snprintf(log, sizeof(log), "%s/child.log", data_dir);
    if (!freopen(log, "w", stderr))
        _exit(4);
    ServerOptions o = options();
    Server *s = NULL;
    Buf err = {0};
    CHECK(server_open(&o, &s, &err) == 0);
    buf_free(&err);
    sh->opened = true;
    /* the requests as the API hands them over, parsed (the parsers have tests of their own) */
    JobList jl[3];
    parse("{\"name\": \"s1\", \"team\": \"search\", \"gpus\": 1, \"command\": [\"true\"]}", &jl[0]);
    parse("[{\"name\": \"s2a\", \"team\": \"search\", \"gpus\": 1, \"command\": [\"true\"]},"
          " {\"name\": \"s2b\", \"team\": \"search\", \"gpus\": 1, \"command\": [\"true\"]}]",
          &jl[1]);
    parse("{\"name\": \"s3\", \"team\": \"search\", \"gpus\": 1, \"command\": [\"true\"]}", &jl[2]);
    fault_arm(arm->kind, arm->at, arm->persistent);

    submit(s, sh, OP_SUBMIT1, &jl[0]);
    submit(s, sh, OP_SUBMIT2, &jl[1]);

    if (sh->status[OP_SUBMIT1] == 201) {
        sh->ran[OP_PRIORITY] = true;
        int st = server_set_priority(s, &lead, sh->ids[OP_SUBMIT1][0], PRIO_HIGH, &err);
        sh->status[OP_PRIORITY] = st;
        end_if_diverged(s, sh, OP_PRIORITY);
        CHECK(st == 200 || st == 500);
        pthread_mutex_lock(&s->lock);
        ServerJob *j = server_job(s, sh->ids[OP_SUBMIT1][0]);
        /* a change answered 200 is made and queued where it now belongs; one refused is
         * not made */
        CHECK(j && (st == 200) == (j->st.priority == PRIO_HIGH) && j->sj.queued &&
              j->sj.priority == j->st.priority);
        pthread_mutex_unlock(&s->lock);
    }
    if (sh->status[OP_SUBMIT2] == 201) {
        int64_t a = sh->ids[OP_SUBMIT2][0], b = sh->ids[OP_SUBMIT2][1];
        sh->ran[OP_MOVE] = true;
        int st = server_move(s, &lead, b, a, false, &err);
        sh->status[OP_MOVE] = st;
        end_if_diverged(s, sh, OP_MOVE);
        if (st != 200 && st != 500)
            say("move: %d %s\n", st, buf_str(&err));
        CHECK(st == 200 || st == 500);
        pthread_mutex_lock(&s->lock);
        ServerJob *jb = server_job(s, b);
        CHECK(jb && jb->sj.queued && (st != 200 || jb->st.queue_key != 0));
        pthread_mutex_unlock(&s->lock);

        sh->ran[OP_CANCEL] = true;
        st = server_cancel(s, &lead, a, &err);
        sh->status[OP_CANCEL] = st;
        end_if_diverged(s, sh, OP_CANCEL);
        CHECK(st == 200 || st == 500);
        pthread_mutex_lock(&s->lock);
        ServerJob *ja = server_job(s, a);
        CHECK(ja && (st == 200) == (ja->st.state == JOB_CANCELLED));
        pthread_mutex_unlock(&s->lock);
    }
    sh->ran[OP_TEAM] = true;
    double weight = 3;
    int st = server_team_set(s, "search", NULL, NULL, &weight, &err);
    sh->status[OP_TEAM] = st;
    end_if_diverged(s, sh, OP_TEAM);
    CHECK(st == 200 || st == 500);
    pthread_mutex_lock(&s->lock);
    int t = cluster_find_team(s->c, "search");
    CHECK(t >= 0 && (st == 200) == (s->c->teams[t].weight == 3));
    pthread_mutex_unlock(&s->lock);

    submit(s, sh, OP_SUBMIT3, &jl[2]);
    sh->calls = fault_plan.count;
    buf_free(&err);
    for (size_t i = 0; i < 3; i++)
        job_list_free(&jl[i]);
    server_close(s);
    _exit(0);
}

/* ---- after the run: a server started again on its database ---- */

static bool failed_may_remain;

static void effect(const Shared *sh, int op, int ok_status, bool there)
{
    bool acked = sh->ran[op] && sh->status[op] == ok_status;
    /* a request the process ended in got no reply: like a crash, either outcome */
    bool refused = sh->ran[op] && !acked && sh->status[op] != 0;
    if ((acked && !there) || (!sh->ran[op] && there) || (refused && there && !failed_may_remain)) {
        print_message("%s: %s (%d) but %s after a restart\n", op_name[op],
                      acked         ? "acknowledged"
                      : sh->ran[op] ? "refused"
                                    : "never asked",
                      sh->status[op], there ? "there" : "missing");
        fail();
    }
}

static ServerJob *job_named(Server *s, const char *name)
{
    for (int64_t id = 1; id <= s->max_id; id++) {
        ServerJob *j = server_job(s, id);
        if (j && !strcmp(j->st.name, name))
            return j;
    }
    return NULL;
}

typedef struct EventCount {
    const char *type;
    int n;
} EventCount;

static int count_event(void *arg, int64_t t_ms, const char *type, const char *detail)
{
    EventCount *c = arg;
    c->n += !strcmp(type, c->type);
    return 0;
}

/* The job has an event of the type: its change was written with its event. */
static bool has_event(Server *s, const ServerJob *j, const char *type)
{
    EventCount c = {.type = type};
    assert_int_equal(store_events_for(s->store, j->st.id, count_event, &c), 0);
    return c.n > 0;
}

static void check_restart(const Shared *sh)
{
    ServerOptions o = options();
    Server *s = NULL;
    Buf err = {0};
    /* the restarted server's log lines to the run's folder too */
    char log[200];
    snprintf(log, sizeof(log), "%s/restart.log", data_dir);
    fflush(stderr);
    int saved = dup(STDERR_FILENO), fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(saved >= 0 && fd >= 0);
    dup2(fd, STDERR_FILENO);
    close(fd);
    int r = server_open(&o, &s, &err);
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    if (r)
        print_message("restarting: %s\n", buf_str(&err));
    assert_int_equal(r, 0);
    buf_free(&err);
    pthread_mutex_lock(&s->lock);
    ServerJob *s1 = job_named(s, "s1"), *s2a = job_named(s, "s2a"), *s2b = job_named(s, "s2b"),
              *s3 = job_named(s, "s3");
    effect(sh, OP_SUBMIT1, 201, s1 != NULL);
    assert_true(!s2a == !s2b); /* one request: both or neither */
    effect(sh, OP_SUBMIT2, 201, s2a != NULL);
    effect(sh, OP_SUBMIT3, 201, s3 != NULL);
    if (s1 && sh->status[OP_SUBMIT1] == 201)
        assert_int_equal(s1->st.id, sh->ids[OP_SUBMIT1][0]);
    if (s2a && sh->status[OP_SUBMIT2] == 201) {
        assert_int_equal(s2a->st.id, sh->ids[OP_SUBMIT2][0]);
        assert_int_equal(s2b->st.id, sh->ids[OP_SUBMIT2][1]);
    }
    if (s1) {
        effect(sh, OP_PRIORITY, 200, s1->st.priority == PRIO_HIGH);
        /* never half a change: the row and its event are written together or not at all */
        assert_int_equal(s1->st.priority == PRIO_HIGH, has_event(s, s1, "priority"));
    }
    if (s2a) {
        effect(sh, OP_MOVE, 200, s2b->st.queue_key != 0);
        effect(sh, OP_CANCEL, 200, s2a->st.state == JOB_CANCELLED);
        assert_int_equal(s2b->st.queue_key != 0, has_event(s, s2b, "move"));
        assert_int_equal(s2a->st.state == JOB_CANCELLED, has_event(s, s2a, "cancel"));
    }
    int t = cluster_find_team(s->c, "search");
    assert_true(t >= 0);
    effect(sh, OP_TEAM, 200, s->c->teams[t].weight == 3);
    pthread_mutex_unlock(&s->lock);
    server_close(s);
}

static void fault_loop(FaultKind kind, bool persistent, int64_t def_stride)
{
    int64_t stride = fault_stride(def_stride), runs = 0, died = 0, n;
    Shared *sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(sh != MAP_FAILED);
    for (n = 1;; n += stride) {
        fault_tmpdir(data_dir, sizeof(data_dir), "srvfaults");
        assert_non_null(mkdtemp(data_dir));
        snprintf(db_url, sizeof(db_url), "sqlite:%s/gpuorch.db", data_dir);
        /* a new database, migrated once (the store's tests fail its migrations) */
        char cmd[512];
        snprintf(cmd, sizeof(cmd), "cp '%s' '%s/gpuorch.db'", template_db, data_dir);
        assert_int_equal(system(cmd), 0);
        memset(sh, 0, sizeof(*sh));
        fflush(NULL);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            Arm arm = {kind, n, persistent};
            child(&arm, sh);
        }
        int wst = 0;
        assert_int_equal(waitpid(pid, &wst, 0), pid);
        /* 0: the scenario ran to its end; 1: the server ended itself on a failed write
         * (state.h); anything else is a failed check or a crash */
        if (!WIFEXITED(wst) || (WEXITSTATUS(wst) != 0 && WEXITSTATUS(wst) != 1)) {
            snprintf(cmd, sizeof(cmd), "tail -5 '%s/child.log' >&2", data_dir);
            if (system(cmd) != 0)
                print_message("(no log)\n");
            print_message("%s %s fault at %lld: the child %s %d\n", fault_kind_name(kind),
                          persistent ? "persistent" : "transient", (long long)n,
                          WIFEXITED(wst) ? "exited" : "was killed by signal",
                          WIFEXITED(wst) ? WEXITSTATUS(wst) : WTERMSIG(wst));
            fail();
        }
        assert_true(sh->opened);
        died += WEXITSTATUS(wst) == 1;
        failed_may_remain = persistent && kind == FAULT_IO;
        check_restart(sh);
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", data_dir);
        assert_int_equal(system(cmd), 0);
        runs++;
        /* a run that ended early did not count its calls: it reached N */
        if (WEXITSTATUS(wst) == 0 && sh->calls < n)
            break;
    }
    print_message("%s %s: N from 1 to %lld every %lld, %lld runs, %lld ended by a failed "
                  "write\n",
                  fault_kind_name(kind), persistent ? "persistent" : "transient", (long long)n,
                  (long long)stride, (long long)runs, (long long)died);
    munmap(sh, sizeof(*sh));
}

static void test_store_io(void **state)
{
    fault_loop(FAULT_IO, false, 1);
    fault_loop(FAULT_IO, true, 2);
}

static void test_store_malloc(void **state)
{
    fault_loop(FAULT_MALLOC, false, 5);
    fault_loop(FAULT_MALLOC, true, 5);
}

static void test_process_malloc(void **state)
{
    fault_loop(FAULT_PROCESS, false, 1);
    fault_loop(FAULT_PROCESS, true, 5);
}

int main(void)
{
    in_main = true;
    if (fault_install() < 0) {
        fprintf(stderr, "cannot install the fault hooks in SQLite\n");
        return 1;
    }
    fault_tmpdir(template_dir, sizeof(template_dir), "srvfaults");
    if (!mkdtemp(template_dir))
        return 1;
    snprintf(template_db, sizeof(template_db), "%s/template.db", template_dir);
    Store *st = NULL;
    if (store_open(template_db, &st, NULL) < 0)
        return 1;
    store_close(st);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_store_io),
        cmocka_unit_test(test_store_malloc),
        cmocka_unit_test(test_process_malloc),
    };
    int r = cmocka_run_group_tests(tests, NULL, NULL);
    char cmd[200];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", template_dir);
    if (system(cmd) != 0)
        r = 1;
    return r;
}
