/* test_agent_launch.c: real worker processes, as the agent starts and tracks them
 * (agent/launch.c, agent/worker.c). A shell child is forked and exec'd with the
 * worker environment, reaped with its exit code, its output found in its log; an
 * unrunnable command fails with the exec errno and leaves no child; a command is found
 * in the PATH the job sets; signals reach the whole process group; a preemption
 * checkpoints (LATEST) and then terminates without waiting out the grace; a periodic
 * checkpoint signal arrives; a worker that ignores SIGTERM is killed after the grace;
 * and the worker table brings back a live process started by an earlier "agent"
 * (and reports honestly the ones that ended meanwhile or whose pid was reused). From a
 * review: what a worker's leader leaves in its group is killed when the leader ends; a
 * stop under way is shortened by a later, smaller grace; a /proc read error is not the
 * end of an adopted worker, and a recycled pid is not signalled; a checkpoint written
 * just before the exit is still seen; the log and the table are created 0600. The
 * out-of-memory verdict: judged only on a bad end of the worker's own, from this run's
 * part of the log, kept in the table, reported only for an ended worker. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "agent/afile.h"
#include "agent/launch.h"
#include "agent/worker.h"
#include "util/file.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "worker_fixture.h"

/* What the agent does for an assignment: directories, environment, spawn. Returns the
 * spawn's result; *ret is the worker (running, or failed with the reason). */
static int start(const char *spec_json, char *const *base_env, Worker **ret)
{
    json_t *spec = json_loads(spec_json, 0, NULL);
    assert_non_null(spec);
    WorkerKey key;
    assert_int_equal(assign_key(spec, &key.job, &key.run, &key.rank), 0);
    Worker *w = worker_new(&key, spec);
    json_decref(spec);
    assert_non_null(w);
    assert_int_equal(w->state, WK_PENDING);
    w->ckpt_dir = path_in("ckpt/%lld", (long long)key.job);
    assert_int_equal(afile_mkdir_p(w->ckpt_dir), 0);
    char *logs = path_in("logs");
    assert_int_equal(afile_mkdir_p(logs), 0);
    free(logs);
    w->log_path = path_in("logs/%lld-%u.log", (long long)key.job, key.rank);
    char **env = NULL;
    Buf err = {0};
    assert_int_equal(launch_env(&w->a, NULL, 0, w->ckpt_dir, base_env, NULL, &env, &err), 0);
    pid_t pid;
    worker_starting(w);
    int r = launch_spawn(w->a.argv, env, w->log_path, NULL, NULL, -1, &pid, &err);
    launch_env_free(env);
    if (r == 0)
        worker_started(w, pid, agent_mono_ms());
    else
        worker_failed(w, buf_str(&err));
    buf_free(&err);
    *ret = w;
    return r;
}

/* Run the agent's per-tick calls until the worker ends (or ms pass). */
static bool until_ended(Worker *w, int ms)
{
    for (int t = 0; t < ms; t += 10) {
        worker_watch_checkpoint(w);
        if (worker_reap(w))
            return true;
        worker_advance(w, agent_mono_ms());
        sleep_ms(10);
    }
    return false;
}

static char *read_file(const char *path)
{
    char *text = NULL;
    size_t len;
    int r = file_read_all(path, &text, &len);
    if (r < 0)
        fail_msg("%s: %s", path, strerror(-r));
    return r < 0 ? NULL : text;
}

/* Until path contains s (or 5 s pass). */
static void wait_for_text(const char *path, const char *s)
{
    for (int t = 0; t < 500; t++) {
        char *text = NULL;
        size_t len;
        bool found = file_read_all(path, &text, &len) == 0 && strstr(text, s);
        free(text);
        if (found)
            return;
        sleep_ms(10);
    }
    fail_msg("%s never showed '%s'", path, s);
}

static void test_exit_code_and_log(void **state)
{
    Worker *w;
    char *base[] = {"PATH=/usr/bin:/bin", NULL};
    assert_int_equal(start("{\"job\": 11, \"run\": 1, \"rank\": 1, \"world_size\": 2, "
                           "\"command\": [\"/bin/sh\", \"-c\", \"echo $RANK; exit 3\"]}",
                           base, &w),
                     0);
    assert_int_equal(w->state, WK_RUNNING);
    assert_true(w->pid > 0);
    assert_true(w->start_ms > 0);
    assert_true(until_ended(w, 5000));
    assert_int_equal(w->state, WK_EXITED);
    assert_true(w->has_exit_code);
    assert_int_equal(w->exit_code, 3);
    assert_int_equal(w->signal, 0);
    char *log = read_file(w->log_path);
    assert_string_equal(log, "1\n");
    free(log);

    json_t *rep = worker_report_json(w);
    assert_string_equal(json_string_value(json_object_get(rep, "state")), "exited");
    assert_int_equal(json_integer_value(json_object_get(rep, "exit_code")), 3);
    assert_int_equal(json_integer_value(json_object_get(rep, "rank")), 1);
    assert_null(json_object_get(rep, "error"));
    json_decref(rep);
    worker_free(w);
}

static void test_exec_failure(void **state)
{
    Worker *w;
    assert_int_equal(start("{\"job\": 12, \"run\": 1, \"rank\": 0, "
                           "\"command\": [\"/nonexistent/program\", \"--flag\"]}",
                           NULL, &w),
                     -ENOENT);
    assert_int_equal(w->state, WK_FAILED);
    assert_string_equal(w->error, "cannot run '/nonexistent/program': No such file or directory");
    /* the reason is in the log too, so `gpuorch logs` shows it */
    char *log = read_file(w->log_path);
    assert_string_equal(log, "gpuorch agent: cannot run '/nonexistent/program': No such file or "
                             "directory\n");
    free(log);
    /* and the failed child is already reaped */
    errno = 0;
    assert_int_equal(waitpid(-1, NULL, WNOHANG), -1);
    assert_int_equal(errno, ECHILD);

    json_t *rep = worker_report_json(w);
    assert_string_equal(json_string_value(json_object_get(rep, "state")), "failed");
    assert_non_null(strstr(json_string_value(json_object_get(rep, "error")), "No such file"));
    json_decref(rep);
    worker_free(w);

    /* not executable */
    char *script = path_in("not-exec.sh");
    FILE *f = fopen(script, "w");
    fputs("#!/bin/sh\necho hi\n", f);
    fclose(f);
    Buf spec = {0};
    buf_printf(&spec, "{\"job\": 13, \"run\": 1, \"rank\": 0, \"command\": [\"%s\"]}", script);
    assert_int_equal(start(buf_str(&spec), NULL, &w), -EACCES);
    assert_non_null(strstr(w->error, "Permission denied"));
    worker_free(w);
    buf_free(&spec);
    free(script);
}

/* The command is looked up in the worker's PATH, which the job's env may set. */
static void test_job_path(void **state)
{
    char *bin = path_in("bin");
    assert_int_equal(afile_mkdir_p(bin), 0);
    char *prog = path_in("bin/myprog");
    FILE *f = fopen(prog, "w");
    fputs("#!/bin/sh\necho \"myprog ran as rank $RANK of $WORLD_SIZE\"\n", f);
    fclose(f);
    chmod(prog, 0755);
    Buf spec = {0};
    buf_printf(&spec,
               "{\"job\": 14, \"run\": 1, \"rank\": 0, \"command\": [\"myprog\"], "
               "\"env\": {\"PATH\": \"%s:/usr/bin:/bin\"}}",
               bin);
    char *base[] = {"PATH=/usr/bin:/bin", NULL};
    Worker *w;
    assert_int_equal(start(buf_str(&spec), base, &w), 0);
    assert_true(until_ended(w, 5000));
    assert_int_equal(w->exit_code, 0);
    char *log = read_file(w->log_path);
    assert_string_equal(log, "myprog ran as rank 0 of 1\n");
    free(log);
    worker_free(w);
    buf_free(&spec);
    free(prog);
    free(bin);
}

/* Cancel: SIGTERM to the group ends the shell and the child it waits for. */
static void test_cancel_reaches_group(void **state)
{
    Worker *w;
    assert_int_equal(start("{\"job\": 15, \"run\": 1, \"rank\": 0, \"command\": [\"/bin/sh\", "
                           "\"-c\", \"sleep 30 & echo child $!; wait\"]}",
                           NULL, &w),
                     0);
    assert_int_equal(getpgid(w->pid), w->pid); /* its own process group */
    wait_for_text(w->log_path, "child ");
    char *log = read_file(w->log_path);
    pid_t child = (pid_t)atoi(strstr(log, "child ") + 6);
    free(log);
    assert_true(child > 0);
    assert_int_equal(getpgid(child), w->pid);

    worker_request_stop(w, WSTOP_CANCEL, agent_mono_ms());
    assert_int_equal(w->stop_phase, SP_TERM);
    assert_true(until_ended(w, 5000));
    assert_false(w->has_exit_code);
    assert_int_equal(w->signal, SIGTERM);
    json_t *rep = worker_report_json(w);
    assert_true(json_is_null(json_object_get(rep, "exit_code")));
    assert_int_equal(json_integer_value(json_object_get(rep, "signal")), SIGTERM);
    json_decref(rep);
    /* the grandchild got it too (gone, or a zombie waiting for init) */
    uint64_t ticks;
    char st = 0;
    for (int t = 0; t < 200 && proc_stat(child, &ticks, &st) == 0 && st != 'Z'; t++)
        sleep_ms(10);
    assert_true(proc_stat(child, &ticks, &st) == -ENOENT || st == 'Z');
    worker_free(w);
}

static const char *ckpt_script =
    "trap 'echo \\\"$GPUORCH_CHECKPOINT_DIR/ckpt-$n\\\" > "
    "\\\"$GPUORCH_CHECKPOINT_DIR/LATEST.tmp\\\"; "
    "mv \\\"$GPUORCH_CHECKPOINT_DIR/LATEST.tmp\\\" \\\"$GPUORCH_CHECKPOINT_DIR/LATEST\\\"' USR1; "
    "trap 'exit 143' TERM; n=7; echo ready; while :; do sleep 0.05; n=$((n+1)); done";

/* Preempt: checkpoint signal, LATEST changes, a short moment, SIGTERM; the worker does
 * not sit out its 20 s grace. */
static void test_preempt(void **state)
{
    Buf spec = {0};
    buf_printf(&spec,
               "{\"job\": 16, \"run\": 1, \"rank\": 0, \"grace_ms\": 20000, "
               "\"command\": [\"/bin/sh\", \"-c\", \"%s\"]}",
               ckpt_script);
    Worker *w;
    assert_int_equal(start(buf_str(&spec), NULL, &w), 0);
    wait_for_text(w->log_path, "ready");
    int64_t t0 = agent_mono_ms();
    worker_request_stop(w, WSTOP_PREEMPT, t0);
    assert_int_equal(w->stop_phase, SP_CHECKPOINT);
    /* well inside the 20 s grace, with room for a loaded machine */
    assert_true(until_ended(w, 15000));
    assert_true(agent_mono_ms() - t0 < 15000);
    assert_true(w->has_exit_code);
    assert_int_equal(w->exit_code, 143);
    assert_non_null(w->checkpoint);
    char *want = path_in("ckpt/16/ckpt-");
    assert_memory_equal(w->checkpoint, want, strlen(want));
    free(want);
    assert_true(w->checkpoint_ms > 0);
    json_t *rep = worker_report_json(w);
    assert_string_equal(json_string_value(json_object_get(rep, "checkpoint")), w->checkpoint);
    json_decref(rep);
    worker_free(w);
    buf_free(&spec);
}

/* checkpoint_interval_ms: the checkpoint signal comes by itself. */
static void test_periodic_checkpoint(void **state)
{
    Buf spec = {0};
    buf_printf(&spec,
               "{\"job\": 17, \"run\": 1, \"rank\": 0, \"checkpoint_interval_ms\": 200, "
               "\"checkpoint_signal\": \"SIGUSR1\", \"command\": [\"/bin/sh\", \"-c\", \"%s\"]}",
               ckpt_script);
    Worker *w;
    assert_int_equal(start(buf_str(&spec), NULL, &w), 0);
    wait_for_text(w->log_path, "ready");
    bool seen = false;
    for (int t = 0; t < 500 && !seen; t++) {
        worker_advance(w, agent_mono_ms());
        seen = worker_watch_checkpoint(w);
        sleep_ms(10);
    }
    assert_true(seen);
    assert_int_equal(w->state, WK_RUNNING);
    worker_request_stop(w, WSTOP_CANCEL, agent_mono_ms());
    assert_true(until_ended(w, 5000));
    assert_int_equal(w->exit_code, 143);
    worker_free(w);
    buf_free(&spec);
}

/* A worker that has not set its handler yet is not sent the checkpoint signal, whose
 * default action would end it: the periodic one is held until it catches it, and a
 * preemption stops it with SIGTERM instead. The worker sleeps half a second before it
 * sets its trap (an interpreter importing its modules), with checkpoints every 50 ms. */
static void test_checkpoint_signal_held_until_caught(void **state)
{
    Worker *w;
    assert_int_equal(start("{\"job\": 31, \"run\": 1, \"rank\": 0, \"checkpoint_interval_ms\": "
                           "50, \"command\": [\"/bin/sh\", \"-c\", \"sleep 0.5; trap 'echo "
                           "got-usr1' USR1; echo ready; while :; do sleep 0.05; done\"]}",
                           NULL, &w),
                     0);
    assert_int_equal(proc_catches(w->pid, SIGUSR1), 0);
    int64_t t0 = agent_mono_ms();
    while (agent_mono_ms() - t0 < 300) {
        worker_advance(w, agent_mono_ms());
        sleep_ms(10);
    }
    assert_false(worker_reap(w));
    assert_int_equal(w->state, WK_RUNNING);
    wait_for_text(w->log_path, "ready");
    /* held signals come again within 5 s (at most an interval later, here 50 ms) */
    for (int t = 0; t < 500; t++) {
        worker_advance(w, agent_mono_ms());
        char *text = read_file(w->log_path);
        bool got = strstr(text, "got-usr1") != NULL;
        free(text);
        if (got)
            break;
        sleep_ms(10);
    }
    wait_for_text(w->log_path, "got-usr1");
    assert_int_equal(proc_catches(w->pid, SIGUSR1), 1);
    worker_request_stop(w, WSTOP_CANCEL, agent_mono_ms());
    assert_true(until_ended(w, 5000));
    worker_free(w);

    /* preempted before it catches the signal: SIGTERM at once, not a wait for a
     * checkpoint it cannot write */
    assert_int_equal(start("{\"job\": 32, \"run\": 1, \"rank\": 0, \"grace_ms\": 20000, "
                           "\"command\": [\"/bin/sh\", \"-c\", \"exec sleep 30\"]}",
                           NULL, &w),
                     0);
    worker_request_stop(w, WSTOP_PREEMPT, agent_mono_ms());
    assert_int_equal(w->stop_phase, SP_TERM);
    assert_true(until_ended(w, 5000));
    assert_int_equal(w->signal, SIGTERM);
    worker_free(w);
}

/* A worker that ignores SIGTERM is killed when the grace runs out. */
static void test_kill_after_grace(void **state)
{
    Worker *w;
    assert_int_equal(start("{\"job\": 18, \"run\": 1, \"rank\": 0, \"grace_ms\": 300, "
                           "\"command\": [\"/bin/sh\", \"-c\", \"trap '' TERM; echo ready; "
                           "while :; do sleep 0.05; done\"]}",
                           NULL, &w),
                     0);
    wait_for_text(w->log_path, "ready");
    int64_t t0 = agent_mono_ms();
    worker_request_stop(w, WSTOP_CANCEL, t0);
    assert_true(until_ended(w, 5000));
    assert_true(agent_mono_ms() - t0 >= 300);
    assert_int_equal(w->signal, SIGKILL);
    worker_free(w);
}

/* The table brings back a live worker of an earlier agent; one that died meanwhile,
 * one on another boot, and one whose pid now belongs to another process come back
 * ended with an unknown status. */
static void test_table_reload(void **state)
{
    Worker *live, *done, *failed;
    assert_int_equal(start("{\"job\": 20, \"run\": 2, \"rank\": 0, \"checkpoint_interval_ms\": "
                           "60000, \"command\": [\"sleep\", \"30\"]}",
                           NULL, &live),
                     0);
    assert_int_equal(start("{\"job\": 21, \"run\": 1, \"rank\": 0, \"command\": [\"/bin/sh\", "
                           "\"-c\", \"exit 4\"]}",
                           NULL, &done),
                     0);
    assert_true(until_ended(done, 5000));
    assert_int_equal(
        start("{\"job\": 22, \"run\": 1, \"rank\": 0, \"command\": [\"/nonexistent\"]}", NULL,
              &failed),
        -ENOENT);
    json_t *pspec =
        json_loads("{\"job\": 23, \"run\": 1, \"rank\": 0, \"command\": [\"x\"]}", 0, NULL);
    WorkerKey pk = {23, 1, 0};
    Worker *pending = worker_new(&pk, pspec);
    json_decref(pspec);
    live->checkpoint = strdup("/ckpt/20/step-9");
    live->checkpoint_ms = 1764500100000;
    live->log_sent = 5;

    char *table = path_in("workers.json");
    Worker *all[] = {live, done, failed, pending};
    assert_int_equal(worker_table_save(table, "boot-A", NULL, all, 4), 0);

    Worker **back = NULL;
    size_t n = 0;
    Buf err = {0};
    assert_int_equal(worker_table_load(table, "boot-A", NULL, &back, &n, &err), 0);
    assert_int_equal(n, 3); /* the pending one is not saved: the server sends it again */
    Worker *b = back[0];
    assert_int_equal(b->key.job, 20);
    assert_int_equal(b->key.run, 2);
    assert_int_equal(b->state, WK_RUNNING);
    assert_true(b->adopted);
    assert_int_equal(b->pid, live->pid);
    assert_int_equal(b->start_ticks, live->start_ticks);
    assert_string_equal(b->a.argv[0], "sleep");
    assert_int_equal(b->a.checkpoint_interval_ms, 60000);
    assert_string_equal(b->checkpoint, "/ckpt/20/step-9");
    assert_int_equal(b->checkpoint_ms, 1764500100000);
    assert_string_equal(b->log_path, live->log_path);
    assert_int_equal(b->log_sent, 5);
    assert_int_equal(back[1]->state, WK_EXITED);
    assert_true(back[1]->has_exit_code);
    assert_int_equal(back[1]->exit_code, 4);
    assert_int_equal(back[2]->state, WK_FAILED);
    assert_string_equal(back[2]->error, failed->error);
    assert_false(worker_reap(b)); /* still there */

    /* the same table on another boot of the machine: nothing survived */
    Worker **other = NULL;
    size_t n_other = 0;
    assert_int_equal(worker_table_load(table, "boot-B", NULL, &other, &n_other, &err), 0);
    assert_int_equal(other[0]->state, WK_EXITED);
    assert_false(other[0]->has_exit_code);
    assert_string_equal(other[0]->error, "ended while the agent was down");
    assert_true(other[0]->lost);
    assert_false(other[1]->lost); /* it had ended before: nothing was lost */
    json_t *rep = worker_report_json(other[0]);
    assert_string_equal(json_string_value(json_object_get(rep, "state")), "exited");
    assert_true(json_is_null(json_object_get(rep, "exit_code")));
    json_decref(rep);
    for (size_t i = 0; i < n_other; i++)
        worker_free(other[i]);
    free(other);

    /* the adopted worker ends: seen through /proc, status unknown */
    kill(live->pid, SIGKILL);
    bool ended = false;
    for (int t = 0; t < 500 && !ended; t++) {
        ended = worker_reap(b);
        sleep_ms(10);
    }
    assert_true(ended);
    assert_int_equal(b->state, WK_EXITED);
    assert_false(b->has_exit_code);
    assert_non_null(strstr(b->error, "exit status unknown"));
    waitpid(live->pid, NULL, 0); /* this test is its real parent */

    /* once it is gone, a reload reports it as having ended while the agent was down */
    assert_int_equal(worker_table_load(table, "boot-A", NULL, &other, &n_other, &err), 0);
    assert_int_equal(other[0]->state, WK_EXITED);
    assert_string_equal(other[0]->error, "ended while the agent was down");
    for (size_t i = 0; i < n_other; i++)
        worker_free(other[i]);
    free(other);

    /* a recorded pid that now belongs to another process (its start time differs) */
    live->pid = getpid();
    live->start_ticks = 1;
    live->state = WK_RUNNING;
    Worker *reused[] = {live};
    assert_int_equal(worker_table_save(table, "boot-A", NULL, reused, 1), 0);
    assert_int_equal(worker_table_load(table, "boot-A", NULL, &other, &n_other, &err), 0);
    assert_int_equal(n_other, 1);
    assert_int_equal(other[0]->state, WK_EXITED);
    assert_false(other[0]->adopted);
    worker_free(other[0]);
    free(other);

    /* a damaged table is an error naming the file */
    FILE *f = fopen(table, "w");
    fputs("{\"version\": 1, \"workers\": [{\"job\": 1}]}", f);
    fclose(f);
    assert_int_equal(worker_table_load(table, "boot-A", NULL, &other, &n_other, &err), -EINVAL);
    assert_non_null(strstr(buf_str(&err), "workers.json: record 0"));

    for (size_t i = 0; i < n; i++)
        worker_free(back[i]);
    free(back);
    for (size_t i = 0; i < 4; i++)
        worker_free(all[i]);
    free(table);
    buf_free(&err);
}

/* The child's pid from a line "child PID" of the worker's log. */
static pid_t logged_child(const Worker *w)
{
    wait_for_text(w->log_path, "child ");
    char *log = read_file(w->log_path);
    pid_t child = (pid_t)atoi(strstr(log, "child ") + 6);
    free(log);
    assert_true(child > 0);
    assert_int_equal(getpgid(child), w->pid);
    return child;
}

/* Gone, or a zombie waiting for init: it holds nothing any more. */
static bool process_over(pid_t pid)
{
    uint64_t ticks;
    char st = 0;
    for (int t = 0; t < 200; t++) {
        int r = proc_stat(pid, &ticks, &st);
        if (r == -ENOENT || (r == 0 && st == 'Z'))
            return true;
        sleep_ms(10);
    }
    return false;
}

/* The leader ends (killed by the stop's SIGTERM, or by itself) while a process it
 * started would go on (it ignores SIGTERM): once the worker is reported ended, nothing
 * of its group is left. */
static void test_leftovers_killed(void **state)
{
    Worker *w;
    assert_int_equal(start("{\"job\": 24, \"run\": 1, \"rank\": 0, \"grace_ms\": 20000, "
                           "\"command\": [\"/bin/sh\", \"-c\", \"trap '' TERM; sleep 300 & "
                           "trap - TERM; echo child $!; wait\"]}",
                           NULL, &w),
                     0);
    pid_t child = logged_child(w);
    worker_request_stop(w, WSTOP_CANCEL, agent_mono_ms());
    assert_true(until_ended(w, 5000));
    assert_int_equal(w->signal, SIGTERM); /* the leader's own end is what is reported */
    assert_true(process_over(child));
    worker_free(w);

    assert_int_equal(start("{\"job\": 29, \"run\": 1, \"rank\": 0, \"command\": [\"/bin/sh\", "
                           "\"-c\", \"sleep 300 & echo child $!; exit 0\"]}",
                           NULL, &w),
                     0);
    child = logged_child(w);
    assert_true(until_ended(w, 5000));
    assert_true(w->has_exit_code);
    assert_int_equal(w->exit_code, 0);
    assert_true(process_over(child));
    worker_free(w);
}

/* A stop under way takes a later, smaller grace (a spot notice): the deadline comes
 * down to the stop's beginning plus the new grace; a larger one does not push it out. */
static void test_stop_shortened(void **state)
{
    Worker *w;
    assert_int_equal(start("{\"job\": 25, \"run\": 1, \"rank\": 0, \"grace_ms\": 20000, "
                           "\"command\": [\"/bin/sh\", \"-c\", \"trap '' TERM; echo ready; "
                           "while :; do sleep 0.05; done\"]}",
                           NULL, &w),
                     0);
    wait_for_text(w->log_path, "ready");
    int64_t t0 = agent_mono_ms();
    worker_request_stop(w, WSTOP_CANCEL, t0);
    assert_int_equal(w->stop_phase, SP_TERM);
    assert_int_equal(w->stop_deadline, t0 + 20000);
    w->a.grace_ms = 60000;
    worker_request_stop(w, WSTOP_CANCEL, t0 + 50);
    assert_int_equal(w->stop_deadline, t0 + 20000);
    w->a.grace_ms = 200;
    worker_request_stop(w, WSTOP_CANCEL, agent_mono_ms());
    assert_int_equal(w->stop_deadline, t0 + 200);
    assert_true(until_ended(w, 5000));
    assert_int_equal(w->signal, SIGKILL);
    assert_true(agent_mono_ms() - t0 < 5000);
    worker_free(w);

    /* preempt: the wait for a checkpoint that never comes is cut short the same way */
    assert_int_equal(start("{\"job\": 30, \"run\": 1, \"rank\": 0, \"grace_ms\": 20000, "
                           "\"command\": [\"/bin/sh\", \"-c\", \"trap '' USR1; trap 'exit 143' "
                           "TERM; echo ready; while :; do sleep 0.05; done\"]}",
                           NULL, &w),
                     0);
    wait_for_text(w->log_path, "ready");
    t0 = agent_mono_ms();
    worker_request_stop(w, WSTOP_PREEMPT, t0);
    assert_int_equal(w->stop_phase, SP_CHECKPOINT);
    assert_int_equal(w->stop_deadline, t0 + 20000);
    w->a.grace_ms = 100;
    worker_request_stop(w, WSTOP_PREEMPT, agent_mono_ms());
    assert_int_equal(w->stop_deadline, t0 + 100);
    assert_true(until_ended(w, 5000));
    assert_int_equal(w->exit_code, 143);
    assert_true(agent_mono_ms() - t0 < 5000);
    worker_free(w);
}

/* An adopted worker (not this process's child as far as the worker code knows) is
 * watched through /proc: a read that fails for want of file descriptors is not its
 * end; a pid whose start time differs is not signalled. */
static void test_adopted_proc_error(void **state)
{
    Worker *w;
    assert_int_equal(
        start("{\"job\": 26, \"run\": 1, \"rank\": 0, \"command\": [\"sleep\", \"30\"]}", NULL, &w),
        0);
    w->adopted = true;
    assert_false(worker_reap(w));

    struct rlimit old;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
    struct rlimit low = {.rlim_cur = 64, .rlim_max = old.rlim_max};
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
    int fds[64];
    size_t n = 0;
    while (n < 64 && (fds[n] = dup(0)) >= 0)
        n++;
    errno = 0;
    int probe = dup(0);
    int probe_errno = errno;
    bool reaped = worker_reap(w);
    if (probe >= 0)
        close(probe);
    for (size_t i = 0; i < n; i++)
        close(fds[i]);
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
    assert_int_equal(probe, -1);
    assert_int_equal(probe_errno, EMFILE);
    assert_false(reaped);
    assert_int_equal(w->state, WK_RUNNING);

    /* the recorded start time no longer matches: the process is someone else's */
    w->start_ticks++;
    worker_signal(w, SIGTERM);
    sleep_ms(100);
    uint64_t ticks;
    char st;
    assert_int_equal(proc_stat(w->pid, &ticks, &st), 0);
    assert_true(st != 'Z');
    w->start_ticks--;

    worker_signal(w, SIGTERM);
    bool ended = false;
    for (int t = 0; t < 500 && !ended; t++) {
        ended = worker_reap(w);
        sleep_ms(10);
    }
    assert_true(ended);
    assert_false(w->has_exit_code);
    waitpid(w->pid, NULL, 0); /* this test is its real parent */
    worker_free(w);
}

/* LATEST written just before the exit, with no look at it in between: the reap reads
 * it one last time. */
static void test_final_checkpoint(void **state)
{
    Worker *w;
    assert_int_equal(start("{\"job\": 27, \"run\": 1, \"rank\": 0, \"command\": [\"/bin/sh\", "
                           "\"-c\", \"echo $GPUORCH_CHECKPOINT_DIR/ckpt-last > "
                           "$GPUORCH_CHECKPOINT_DIR/L.tmp && mv $GPUORCH_CHECKPOINT_DIR/L.tmp "
                           "$GPUORCH_CHECKPOINT_DIR/LATEST\"]}",
                           NULL, &w),
                     0);
    uint64_t ticks;
    char st = 0;
    for (int t = 0; t < 500 && proc_stat(w->pid, &ticks, &st) == 0 && st != 'Z'; t++)
        sleep_ms(10);
    assert_int_equal(st, 'Z');
    assert_null(w->checkpoint);
    assert_true(worker_reap(w));
    assert_int_equal(w->exit_code, 0);
    assert_non_null(w->checkpoint);
    char *want = path_in("ckpt/27/ckpt-last");
    assert_string_equal(w->checkpoint, want);
    free(want);
    worker_free(w);
}

/* The log (a job's output) and the table (each job's env) are the owner's alone. */
static void test_private_files(void **state)
{
    Worker *w;
    assert_int_equal(start("{\"job\": 28, \"run\": 1, \"rank\": 0, \"env\": {\"SECRET\": \"s\"}, "
                           "\"command\": [\"/bin/sh\", \"-c\", \"echo $SECRET\"]}",
                           NULL, &w),
                     0);
    assert_true(until_ended(w, 5000));
    struct stat st;
    assert_int_equal(stat(w->log_path, &st), 0);
    assert_int_equal(st.st_mode & 077, 0);
    char *table = path_in("private-workers.json");
    Worker *all[] = {w};
    assert_int_equal(worker_table_save(table, "boot-A", NULL, all, 1), 0);
    assert_int_equal(stat(table, &st), 0);
    assert_int_equal(st.st_mode & 077, 0);
    free(table);
    worker_free(w);
}

/* Run spec to its end (no stop) and return the worker. */
static Worker *run_to_end(const char *spec)
{
    Worker *w;
    assert_int_equal(start(spec, NULL, &w), 0);
    assert_true(until_ended(w, 5000));
    return w;
}

static bool report_oom(const Worker *w)
{
    json_t *rep = worker_report_json(w);
    json_t *oom = json_object_get(rep, "oom");
    bool present = oom != NULL;
    if (present)
        assert_true(json_is_true(oom));
    json_decref(rep);
    return present;
}

/* A worker that ends badly on its own with a GPU out-of-memory message in its log is
 * reported "oom": true; a clean exit, an ordinary failure and a stop the agent made are
 * not, whatever the log says; nor is an OOM of an earlier run in the same log file. */
static void test_oom_verdict(void **state)
{
    /* PyTorch's message on stderr, then a non-zero exit */
    Worker *w = run_to_end("{\"job\": 40, \"run\": 1, \"rank\": 0, \"command\": [\"/bin/sh\", "
                           "\"-c\", \"echo 'torch.OutOfMemoryError: CUDA out of memory. Tried "
                           "to allocate 2.00 GiB' >&2; exit 1\"]}");
    assert_int_equal(w->exit_code, 1);
    assert_true(w->oom);
    assert_true(report_oom(w));
    worker_free(w);

    /* killed by a signal no stop sent (here its own SIGKILL, as a watchdog might) */
    w = run_to_end("{\"job\": 41, \"run\": 1, \"rank\": 0, \"command\": [\"/bin/sh\", \"-c\", "
                   "\"echo 'CUDA_ERROR_OUT_OF_MEMORY'; kill -KILL $$\"]}");
    assert_false(w->has_exit_code);
    assert_int_equal(w->signal, SIGKILL);
    assert_true(w->oom);
    assert_true(report_oom(w));
    worker_free(w);

    /* the same message, but the worker recovered and exited 0 */
    w = run_to_end("{\"job\": 42, \"run\": 1, \"rank\": 0, \"command\": [\"/bin/sh\", \"-c\", "
                   "\"echo 'CUDA out of memory; retrying with a smaller batch'; exit 0\"]}");
    assert_false(w->oom);
    assert_false(report_oom(w));
    worker_free(w);

    /* an ordinary failure, and the host's OOM */
    w = run_to_end("{\"job\": 43, \"run\": 1, \"rank\": 0, \"command\": [\"/bin/sh\", \"-c\", "
                   "\"echo 'Out of memory: Killed process 4242 (python3)'; exit 2\"]}");
    assert_int_equal(w->exit_code, 2);
    assert_false(w->oom);
    assert_false(report_oom(w));
    worker_free(w);

    /* cancelled: the SIGTERM was the agent's, so the log is not judged */
    assert_int_equal(start("{\"job\": 44, \"run\": 1, \"rank\": 0, \"command\": [\"/bin/sh\", "
                           "\"-c\", \"echo 'CUDA error: out of memory'; echo ready; "
                           "while :; do sleep 0.05; done\"]}",
                           NULL, &w),
                     0);
    wait_for_text(w->log_path, "ready");
    worker_request_stop(w, WSTOP_CANCEL, agent_mono_ms());
    assert_true(until_ended(w, 5000));
    assert_int_equal(w->signal, SIGTERM);
    assert_false(w->oom);
    assert_false(report_oom(w));
    worker_free(w);

    /* run 1 of job 45 ran out of memory; run 2 (same log, from log_base on) failed
     * otherwise */
    w = run_to_end("{\"job\": 45, \"run\": 1, \"rank\": 0, \"command\": [\"/bin/sh\", \"-c\", "
                   "\"echo 'OOM when allocating tensor with shape[8192,8192]'; exit 1\"]}");
    assert_true(w->oom);
    char *log_path = strdup(w->log_path);
    worker_free(w);
    struct stat st;
    assert_int_equal(stat(log_path, &st), 0);
    assert_int_equal(start("{\"job\": 45, \"run\": 2, \"rank\": 0, \"command\": [\"/bin/sh\", "
                           "\"-c\", \"echo 'No such file: /data/shard-7'; exit 1\"]}",
                           NULL, &w),
                     0);
    w->log_base = st.st_size; /* as the agent records it when the run starts */
    assert_true(until_ended(w, 5000));
    assert_string_equal(w->log_path, log_path);
    assert_int_equal(w->exit_code, 1);
    assert_false(w->oom);
    free(log_path);
    worker_free(w);
}

/* The verdict survives an agent restart, and is reported only once the worker ended. */
static void test_oom_table(void **state)
{
    Worker *oom = run_to_end("{\"job\": 46, \"run\": 1, \"rank\": 0, \"command\": "
                             "[\"/bin/sh\", \"-c\", \"echo cudaErrorMemoryAllocation; exit 1\"]}");
    Worker *plain = run_to_end("{\"job\": 47, \"run\": 1, \"rank\": 0, \"command\": "
                               "[\"/bin/sh\", \"-c\", \"exit 1\"]}");
    assert_true(oom->oom);
    assert_false(plain->oom);
    char *table = path_in("oom-workers.json");
    Worker *all[] = {oom, plain};
    assert_int_equal(worker_table_save(table, "boot-A", NULL, all, 2), 0);
    Worker **back = NULL;
    size_t n = 0;
    Buf err = {0};
    assert_int_equal(worker_table_load(table, "boot-A", NULL, &back, &n, &err), 0);
    assert_int_equal(n, 2);
    assert_true(back[0]->oom);
    assert_true(report_oom(back[0]));
    assert_false(back[1]->oom);
    assert_false(report_oom(back[1]));
    /* a table from before the field: no verdict */
    FILE *f = fopen(table, "w");
    fputs("{\"version\": 1, \"machine_boot_id\": \"boot-A\", \"workers\": [{\"job\": 48, "
          "\"run\": 1, \"rank\": 0, \"state\": \"exited\", \"exit_code\": 1}]}",
          f);
    fclose(f);
    Worker **old = NULL;
    size_t n_old = 0;
    assert_int_equal(worker_table_load(table, "boot-A", NULL, &old, &n_old, &err), 0);
    assert_int_equal(n_old, 1);
    assert_false(old[0]->oom);
    worker_free(old[0]);
    free(old);

    /* a live worker carries no verdict in its report */
    back[0]->state = WK_RUNNING;
    assert_false(report_oom(back[0]));
    for (size_t i = 0; i < n; i++)
        worker_free(back[i]);
    free(back);
    free(table);
    buf_free(&err);
    worker_free(oom);
    worker_free(plain);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exit_code_and_log),
        cmocka_unit_test(test_exec_failure),
        cmocka_unit_test(test_job_path),
        cmocka_unit_test(test_cancel_reaches_group),
        cmocka_unit_test(test_preempt),
        cmocka_unit_test(test_periodic_checkpoint),
        cmocka_unit_test(test_checkpoint_signal_held_until_caught),
        cmocka_unit_test(test_kill_after_grace),
        cmocka_unit_test(test_table_reload),
        cmocka_unit_test(test_leftovers_killed),
        cmocka_unit_test(test_stop_shortened),
        cmocka_unit_test(test_adopted_proc_error),
        cmocka_unit_test(test_final_checkpoint),
        cmocka_unit_test(test_private_files),
        cmocka_unit_test(test_oom_verdict),
        cmocka_unit_test(test_oom_table),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
