/* test_agent_keeper.c: the keeper (agent/keeper.h) with real processes: it reports the
 * worker's pid, records an exit code and a signal, kills what the worker left in its
 * process group, reports an exec failure without a record, lives in a session of its
 * own, ignores the signals that stop an agent, and holds none of the agent's
 * descriptors (the agent's lock above all). Records that are not a keeper's are
 * refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "agent/keeper.h"
#include "agent/launch.h"
#include "util/buf.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static char dir[64];

typedef struct Spawn {
    char *const *argv;
    const char *log;
} Spawn;

/* The keeper's start: the command as the agent's own user, no limits, no cgroup. */
static int spawn(void *arg, pid_t *ret_pid, Buf *err)
{
    const Spawn *s = arg;
    return launch_spawn(s->argv, environ, s->log, NULL, NULL, -1, ret_pid, err);
}

static int setup(void **state)
{
    snprintf(dir, sizeof(dir), "/tmp/gpuorch-keeper-XXXXXX");
    assert_non_null(mkdtemp(dir));
    return 0;
}

static int teardown(void **state)
{
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
    return 0;
}

static void path(char *out, size_t n, const char *name)
{
    snprintf(out, n, "%s/%s", dir, name);
}

/* Is pid gone, or a zombie (an orphan's, that init reaps in its own time)? */
static bool gone(pid_t pid)
{
    for (int i = 0; i < 200; i++) {
        char p[64], text[512] = "";
        snprintf(p, sizeof(p), "/proc/%d/stat", (int)pid);
        FILE *f = fopen(p, "r");
        if (!f)
            return true;
        size_t n = fread(text, 1, sizeof(text) - 1, f);
        fclose(f);
        text[n] = '\0';
        const char *paren = strrchr(text, ')');
        if (paren && (paren[2] == 'Z' || paren[2] == 'X'))
            return true;
        usleep(10000);
    }
    return false;
}

/* Wait (up to 5 s) for the keeper's record, then for the keeper to exit 0. */
static KeeperExit wait_exit(pid_t keeper, const char *exit_path)
{
    KeeperExit x = {0};
    int r = -ENOENT;
    for (int i = 0; i < 500 && (r = keeper_exit_read(exit_path, &x)) == -ENOENT; i++)
        usleep(10000);
    assert_int_equal(r, 0);
    int status;
    assert_int_equal(waitpid(keeper, &status, 0), keeper);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    return x;
}

static void test_exit_code(void **state)
{
    char log[128], ex[128], left[128];
    path(log, sizeof(log), "w.log");
    path(ex, sizeof(ex), "w.exit");
    path(left, sizeof(left), "left.pid");
    char script[256];
    /* a child left behind in the worker's group, its pid written down */
    snprintf(script, sizeof(script), "sleep 30 & echo $! >%s; echo hello; exit 3", left);
    char *argv[] = {"sh", "-c", script, NULL};
    pid_t keeper = 0, worker = 0;
    Buf err = {0};
    assert_int_equal(keeper_spawn(spawn, &(Spawn){argv, log}, -1, log, ex, &keeper, &worker, &err),
                     0);
    assert_true(keeper > 0 && worker > 0 && keeper != worker);
    KeeperExit x = wait_exit(keeper, ex);
    assert_true(x.has_exit_code);
    assert_int_equal(x.exit_code, 3);
    assert_int_equal(x.signal, 0);
    assert_true(x.end_ms > 0);
    FILE *f = fopen(left, "r");
    assert_non_null(f);
    int orphan = 0;
    assert_int_equal(fscanf(f, "%d", &orphan), 1);
    fclose(f);
    assert_true(gone(orphan)); /* killed with the rest of the group */
    char text[64] = "";
    f = fopen(log, "r");
    assert_non_null(f);
    assert_non_null(fgets(text, sizeof(text), f));
    fclose(f);
    assert_string_equal(text, "hello\n");
    buf_free(&err);
}

/* The signals that stop an agent do not stop its keeper; the worker's end by a signal
 * is recorded as such. */
static void test_signal_and_session(void **state)
{
    char log[128], ex[128];
    path(log, sizeof(log), "s.log");
    path(ex, sizeof(ex), "s.exit");
    char *argv[] = {"sleep", "30", NULL};
    pid_t keeper, worker;
    Buf err = {0};
    assert_int_equal(keeper_spawn(spawn, &(Spawn){argv, log}, -1, log, ex, &keeper, &worker, &err),
                     0);
    assert_int_equal(getsid(keeper), keeper);
    assert_int_equal(getpgid(worker), worker);
    assert_int_not_equal(getpgid(worker), getpgrp());
    assert_int_equal(kill(keeper, SIGTERM), 0);
    assert_int_equal(kill(keeper, SIGHUP), 0);
    assert_int_equal(kill(keeper, SIGINT), 0);
    usleep(200000);
    assert_int_equal(waitpid(keeper, NULL, WNOHANG), 0); /* still there */
    assert_int_equal(keeper_exit_read(ex, &(KeeperExit){0}), -ENOENT);
    assert_int_equal(kill(-worker, SIGTERM), 0);
    KeeperExit x = wait_exit(keeper, ex);
    assert_false(x.has_exit_code);
    assert_int_equal(x.signal, SIGTERM);
    buf_free(&err);
}

/* A keeper keeps none of the agent's descriptors: a lock the agent holds is free once
 * the agent lets it go, while the keeper runs on. */
static void test_no_agent_fds(void **state)
{
    char lock[128], log[128], ex[128];
    path(lock, sizeof(lock), "agent.lock");
    path(log, sizeof(log), "l.log");
    path(ex, sizeof(ex), "l.exit");
    char other[128];
    path(other, sizeof(other), "other.lock");
    int fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    int fd2 = open(other, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    assert_true(fd >= 0 && fd2 >= 0);
    assert_int_equal(flock(fd, LOCK_EX | LOCK_NB), 0);
    assert_int_equal(flock(fd2, LOCK_EX | LOCK_NB), 0);
    char *argv[] = {"sleep", "30", NULL};
    pid_t keeper, worker;
    Buf err = {0};
    /* the lock is closed before the worker starts; every other descriptor once it runs */
    assert_int_equal(keeper_spawn(spawn, &(Spawn){argv, log}, fd, log, ex, &keeper, &worker, &err),
                     0);
    close(fd);
    close(fd2);
    fd = open(lock, O_RDWR | O_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(flock(fd, LOCK_EX | LOCK_NB), 0);
    close(fd);
    fd2 = open(other, O_RDWR | O_CLOEXEC);
    assert_true(fd2 >= 0);
    int r = -1;
    for (int i = 0; i < 200 && (r = flock(fd2, LOCK_EX | LOCK_NB)) < 0; i++)
        usleep(10000);
    assert_int_equal(r, 0);
    close(fd2);
    kill(-worker, SIGKILL);
    KeeperExit x = wait_exit(keeper, ex);
    assert_int_equal(x.signal, SIGKILL);
    buf_free(&err);
}

static void test_exec_failure(void **state)
{
    char log[128], ex[128];
    path(log, sizeof(log), "f.log");
    path(ex, sizeof(ex), "f.exit");
    char *argv[] = {"/nonexistent/gpuorch-cmd", NULL};
    pid_t keeper = -7, worker = -7;
    Buf err = {0};
    assert_int_equal(keeper_spawn(spawn, &(Spawn){argv, log}, -1, log, ex, &keeper, &worker, &err),
                     -ENOENT);
    assert_int_equal(keeper, -7);
    assert_string_equal(buf_str(&err),
                        "cannot run '/nonexistent/gpuorch-cmd': No such file or directory");
    /* no record, and the keeper is reaped already */
    assert_int_equal(keeper_exit_read(ex, &(KeeperExit){0}), -ENOENT);
    assert_int_equal(waitpid(-1, NULL, WNOHANG), -1);
    assert_int_equal(errno, ECHILD);
    buf_free(&err);
}

static void test_bad_records(void **state)
{
    char p[128];
    path(p, sizeof(p), "bad.exit");
    static const char *const bad[] = {"", "gpuorch-exit 2 end_ms=1 exit_code=0 signal=0\n",
                                      "gpuorch-exit 1 end_ms=1 exit_code=-1 signal=0\n",
                                      "exit 0\n"};
    KeeperExit x = {.exit_code = 99};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        FILE *f = fopen(p, "w");
        assert_non_null(f);
        fputs(bad[i], f);
        fclose(f);
        assert_int_equal(keeper_exit_read(p, &x), -EINVAL);
    }
    assert_int_equal(x.exit_code, 99);
    path(p, sizeof(p), "absent.exit");
    assert_int_equal(keeper_exit_read(p, &x), -ENOENT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exit_code),    cmocka_unit_test(test_signal_and_session),
        cmocka_unit_test(test_no_agent_fds), cmocka_unit_test(test_exec_failure),
        cmocka_unit_test(test_bad_records),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
