/* test_agent_ckpt.c: each rank's own checkpoint marker, as the agent reads it
 * (agent/ckpt.c, agent/worker.c). "STEP PATH" parses and anything else is refused with
 * the reason; the history keeps each step once, oldest first, the newest eight. With
 * real worker processes: a rank's LATEST.RANK steps are seen one by one and reported
 * with their paths, while another rank's marker and one an earlier run left are not
 * this worker's; a malformed marker is left out and a good one after it counts; a
 * preemption stops waiting once the rank's marker changes; and the worker table keeps
 * the steps across an agent restart. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "agent/afile.h"
#include "agent/ckpt.h"
#include "agent/launch.h"
#include "agent/worker.h"
#include "util/file.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "worker_fixture.h"

static void write_text(const char *path, const char *text)
{
    assert_int_equal(afile_write_atomic(path, text, strlen(text)), 0);
}

/* A worker of job `job`, rank `rank` of two, running the shell script, with its
 * checkpoint directory ready (as the agent makes it) before it starts. */
static Worker *start(int job, int rank, const char *script)
{
    json_t *spec = json_pack("{sI sI sI sI sI s[sss]}", "job", (json_int_t)job, "run",
                             (json_int_t)1, "rank", (json_int_t)rank, "world_size", (json_int_t)2,
                             "grace_ms", (json_int_t)20000, "command", "/bin/sh", "-c", script);
    assert_non_null(spec);
    WorkerKey key = {job, 1, (uint32_t)rank};
    Worker *w = worker_new(&key, spec);
    json_decref(spec);
    assert_non_null(w);
    w->ckpt_dir = path_in("ckpt/%d", job);
    assert_int_equal(afile_mkdir_p(w->ckpt_dir), 0);
    char *logs = path_in("logs");
    assert_int_equal(afile_mkdir_p(logs), 0);
    free(logs);
    w->log_path = path_in("logs/%d-%d.log", job, rank);
    char **env = NULL;
    Buf err = {0};
    assert_int_equal(launch_env(&w->a, NULL, 0, w->ckpt_dir, NULL, NULL, &env, &err), 0);
    pid_t pid;
    worker_starting(w);
    assert_int_equal(launch_spawn(w->a.argv, env, w->log_path, NULL, NULL, -1, &pid, &err), 0);
    launch_env_free(env);
    buf_free(&err);
    worker_started(w, pid, agent_mono_ms());
    return w;
}

/* Watch the worker until it has marked `step` (or 5 s pass). */
static void until_step(Worker *w, int64_t step)
{
    for (int t = 0; t < 500; t++) {
        worker_watch_checkpoint(w);
        const CkptStep *last = ckpt_history_last(&w->ckpts);
        if (last && last->step == step)
            return;
        sleep_ms(10);
    }
    fail_msg("the worker never marked step %lld", (long long)step);
}

static void stop(Worker *w)
{
    worker_request_stop(w, WSTOP_CANCEL, agent_mono_ms());
    for (int t = 0; t < 500 && !worker_reap(w); t++) {
        worker_advance(w, agent_mono_ms());
        sleep_ms(10);
    }
    assert_true(worker_ended(w));
}

static void test_marker_parse(void **state)
{
    int64_t step;
    char *path;
    Buf err = {0};
    assert_int_equal(ckpt_marker_parse("68 /ck/17/step-68/rank-1\n", &step, &path, &err), 0);
    assert_int_equal(step, 68);
    assert_string_equal(path, "/ck/17/step-68/rank-1");
    free(path);
    /* blanks around, a path with spaces, only the first line */
    assert_int_equal(ckpt_marker_parse(" 0\t/my ckpts/s 0  \r\nmore", &step, &path, &err), 0);
    assert_int_equal(step, 0);
    assert_string_equal(path, "/my ckpts/s 0");
    free(path);
    const char *bad[] = {"",      "\n",    "/ck/17/step-68", "68",
                         "68 \n", "-1 /x", "6x8 /x",         "1234567890123456789 /x"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        buf_reset(&err);
        assert_int_equal(ckpt_marker_parse(bad[i], &step, &path, &err), -EINVAL);
        assert_true(err.len > 0);
    }
    buf_reset(&err);
    ckpt_marker_parse("68", &step, &path, &err);
    assert_non_null(strstr(buf_str(&err), "STEP PATH"));
    buf_free(&err);
}

/* A marker may name the run that wrote it in a later line "run N". */
static void test_marker_run(void **state)
{
    assert_int_equal(ckpt_marker_run("68 /ck/step-68/rank-1\n"), 0);
    assert_int_equal(ckpt_marker_run("68 /ck/step-68\nrun 3\n"), 3);
    assert_int_equal(ckpt_marker_run("68 /ck/step-68\r\n  run\t12 \r\n"), 12);
    assert_int_equal(ckpt_marker_run("68 /ck/run 7\n"), 0); /* the path, not a run line */
    assert_int_equal(ckpt_marker_run("68 /ck\nrunner 7\n"), 0);
    static const char *const bad[] = {"68 /ck\nrun\n", "68 /ck\nrun 0\n", "68 /ck\nrun x\n",
                                      "68 /ck\nrun 2 3\n", "68 /ck\nrun -1\n"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(ckpt_marker_run(bad[i]), -EINVAL);
}

/* The job's checkpoint directory is shared by its runs: a marker another run wrote
 * (a worker of run 1 still running somewhere) is not this run's step; one that names
 * this run, or no run, is. */
static void test_other_run_marker(void **state)
{
    char *d = path_in("ckpt/32");
    assert_int_equal(afile_mkdir_p(d), 0);
    char *marker = path_in("ckpt/32/LATEST.0");
    Worker *w = start(32, 0,
                      "until [ -e \"$GPUORCH_CHECKPOINT_DIR/go\" ]; do sleep 0.02; done; "
                      "printf '4 /ck/32/step-4\\nrun %s\\n' \"$GPUORCH_RUN\" > "
                      "\"$GPUORCH_CHECKPOINT_DIR/t\" && mv \"$GPUORCH_CHECKPOINT_DIR/t\" "
                      "\"$GPUORCH_CHECKPOINT_DIR/LATEST.0\"; exec sleep 30");
    assert_true(w->key.run != 9);
    write_text(marker, "900 /ck/32/run-9/step-900\nrun 9\n");
    assert_int_equal(worker_watch_checkpoint(w), 0);
    assert_int_equal(w->ckpts.n, 0);
    char *go = path_in("ckpt/32/go");
    write_text(go, "");
    until_step(w, 4);
    assert_int_equal(w->ckpts.n, 1);
    assert_string_equal(w->ckpts.steps[0].path, "/ck/32/step-4");
    stop(w);
    worker_free(w);
    free(go);
    free(marker);
    free(d);
}

static void test_history(void **state)
{
    CkptHistory h = {0};
    assert_null(ckpt_history_last(&h));
    ckpt_history_add(&h, 1, 100, strdup("/a/1"));
    ckpt_history_add(&h, 2, 200, strdup("/a/2"));
    /* the same step again (a SIGTERM's checkpoint rewritten over the periodic one) */
    ckpt_history_add(&h, 1, 300, strdup("/b/1"));
    assert_int_equal(h.n, 2);
    assert_int_equal(h.steps[0].step, 2);
    assert_int_equal(h.steps[1].step, 1);
    assert_string_equal(h.steps[1].path, "/b/1");
    assert_int_equal(h.steps[1].ms, 300);
    for (int64_t s = 3; s <= 12; s++) {
        char p[32];
        snprintf(p, sizeof(p), "/a/%lld", (long long)s);
        ckpt_history_add(&h, s, s * 100, strdup(p));
    }
    assert_int_equal(h.n, CKPT_HISTORY);
    assert_int_equal(h.steps[0].step, 12 - CKPT_HISTORY + 1);
    assert_int_equal(ckpt_history_last(&h)->step, 12);

    json_t *j = ckpt_history_json(&h);
    assert_int_equal(json_array_size(j), CKPT_HISTORY);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(j, 7), "step")), 12);
    assert_string_equal(json_string_value(json_object_get(json_array_get(j, 7), "path")), "/a/12");
    assert_int_equal(json_integer_value(json_object_get(json_array_get(j, 7), "ms")), 1200);
    CkptHistory back;
    ckpt_history_from_json(j, &back);
    assert_int_equal(back.n, h.n);
    for (size_t i = 0; i < h.n; i++) {
        assert_int_equal(back.steps[i].step, h.steps[i].step);
        assert_int_equal(back.steps[i].ms, h.steps[i].ms);
        assert_string_equal(back.steps[i].path, h.steps[i].path);
    }
    json_decref(j);
    ckpt_history_free(&back);
    ckpt_history_free(&h);
}

/* Rank 1 marks steps 1 and 2 in LATEST.1; the stale LATEST.1 an earlier run left and
 * rank 0's LATEST.0 are not its steps. */
static void test_rank_marks_its_steps(void **state)
{
    char *d = path_in("ckpt/30");
    assert_int_equal(afile_mkdir_p(d), 0);
    char *stale = path_in("ckpt/30/LATEST.1"), *other = path_in("ckpt/30/LATEST.0");
    write_text(stale, "9 /earlier/run/step-9/rank-1\n");
    Worker *w = start(
        30, 1,
        "mark() { mkdir -p \"$GPUORCH_CHECKPOINT_DIR/step-$1/rank-$RANK\" && "
        "echo \"$1 $GPUORCH_CHECKPOINT_DIR/step-$1/rank-$RANK\" > "
        "\"$GPUORCH_CHECKPOINT_DIR/L.$RANK.tmp\" && mv "
        "\"$GPUORCH_CHECKPOINT_DIR/L.$RANK.tmp\" \"$GPUORCH_CHECKPOINT_DIR/LATEST.$RANK\"; }; "
        "until [ -e \"$GPUORCH_CHECKPOINT_DIR/go1\" ]; do sleep 0.02; done; mark 1; "
        "until [ -e \"$GPUORCH_CHECKPOINT_DIR/go2\" ]; do sleep 0.02; done; mark 2; "
        "exec sleep 30");
    assert_int_equal(w->ckpts.n, 0);
    write_text(other, "5 /ck/30/step-5/rank-0\n");
    char *go = path_in("ckpt/30/go1");
    write_text(go, "");
    until_step(w, 1);
    char *want1 = path_in("ckpt/30/step-1/rank-1");
    assert_string_equal(ckpt_history_last(&w->ckpts)->path, want1);
    assert_true(ckpt_history_last(&w->ckpts)->ms > 0);
    assert_int_equal(worker_watch_checkpoint(w), 0); /* nothing new */
    free(go);
    go = path_in("ckpt/30/go2");
    write_text(go, "");
    until_step(w, 2);
    assert_int_equal(w->ckpts.n, 2);
    assert_int_equal(w->ckpts.steps[0].step, 1);

    json_t *rep = worker_report_json(w);
    json_t *list = json_object_get(rep, "checkpoints");
    assert_int_equal(json_array_size(list), 2);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(list, 0), "step")), 1);
    assert_string_equal(json_string_value(json_object_get(json_array_get(list, 0), "path")), want1);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(list, 1), "step")), 2);
    assert_null(json_object_get(rep, "checkpoint")); /* no LATEST was written */
    json_decref(rep);
    stop(w);
    worker_free(w);
    free(want1);
    free(go);
    free(stale);
    free(other);
    free(d);
}

/* A marker that is not "STEP PATH" is left out; the next good one counts. */
static void test_bad_marker(void **state)
{
    char *go = path_in("ckpt/31/go1");
    Worker *w = start(31, 0,
                      "until [ -e \"$GPUORCH_CHECKPOINT_DIR/go1\" ]; do sleep 0.02; done; "
                      "echo 'step-3' > \"$GPUORCH_CHECKPOINT_DIR/t\" && mv "
                      "\"$GPUORCH_CHECKPOINT_DIR/t\" \"$GPUORCH_CHECKPOINT_DIR/LATEST.0\"; "
                      "until [ -e \"$GPUORCH_CHECKPOINT_DIR/go2\" ]; do sleep 0.02; done; "
                      "echo '4 /ck/31/step-4' > \"$GPUORCH_CHECKPOINT_DIR/t\" && mv "
                      "\"$GPUORCH_CHECKPOINT_DIR/t\" \"$GPUORCH_CHECKPOINT_DIR/LATEST.0\"; "
                      "exec sleep 30");
    write_text(go, "");
    char *marker = path_in("ckpt/31/LATEST.0");
    struct stat st;
    for (int t = 0; t < 500 && stat(marker, &st) < 0; t++)
        sleep_ms(10);
    assert_int_equal(worker_watch_checkpoint(w), 0);
    assert_int_equal(w->ckpts.n, 0);
    free(go);
    go = path_in("ckpt/31/go2");
    write_text(go, "");
    until_step(w, 4);
    assert_int_equal(w->ckpts.n, 1);
    assert_string_equal(w->ckpts.steps[0].path, "/ck/31/step-4");
    stop(w);
    worker_free(w);
    free(go);
    free(marker);
}

/* Preempt: the wait for the checkpoint ends when the rank's own marker changes (a gang
 * writes no LATEST), well inside the 20 s grace. */
static void test_preempt_waits_for_marker(void **state)
{
    Worker *w = start(32, 1,
                      "trap 'echo \"7 $GPUORCH_CHECKPOINT_DIR/step-7/rank-1\" > "
                      "\"$GPUORCH_CHECKPOINT_DIR/t\"; mv \"$GPUORCH_CHECKPOINT_DIR/t\" "
                      "\"$GPUORCH_CHECKPOINT_DIR/LATEST.1\"' USR1; trap 'exit 143' TERM; "
                      "echo ready; while :; do sleep 0.05; done");
    char *log = w->log_path;
    for (int t = 0; t < 500; t++) {
        char *text = NULL;
        size_t len;
        bool ready = file_read_all(log, &text, &len) == 0 && strstr(text, "ready");
        free(text);
        if (ready)
            break;
        sleep_ms(10);
    }
    int64_t t0 = agent_mono_ms();
    worker_request_stop(w, WSTOP_PREEMPT, t0);
    assert_int_equal(w->stop_phase, SP_CHECKPOINT);
    bool ended = false;
    for (int t = 0; t < 1500 && !ended; t++) {
        worker_watch_checkpoint(w);
        ended = worker_reap(w);
        worker_advance(w, agent_mono_ms());
        sleep_ms(10);
    }
    assert_true(ended);
    assert_true(agent_mono_ms() - t0 < 15000);
    assert_int_equal(w->exit_code, 143);
    assert_int_equal(w->ckpts.n, 1);
    assert_int_equal(w->ckpts.steps[0].step, 7);
    worker_free(w);
}

/* The steps and the marker as last seen survive an agent restart; a table written
 * before LATEST.RANK takes a marker already there as not news. */
static void test_table_keeps_steps(void **state)
{
    Worker *w = start(33, 0,
                      "until [ -e \"$GPUORCH_CHECKPOINT_DIR/go\" ]; do sleep 0.02; done; "
                      "echo \"3 $GPUORCH_CHECKPOINT_DIR/step-3/rank-0\" > "
                      "\"$GPUORCH_CHECKPOINT_DIR/t\" && mv \"$GPUORCH_CHECKPOINT_DIR/t\" "
                      "\"$GPUORCH_CHECKPOINT_DIR/LATEST.0\"; exec sleep 30");
    char *go = path_in("ckpt/33/go");
    write_text(go, "");
    until_step(w, 3);
    free(go);
    char *table = path_in("workers-33.json");
    Worker *all[] = {w};
    assert_int_equal(worker_table_save(table, "boot-A", NULL, all, 1), 0);
    Worker **back = NULL;
    size_t n = 0;
    Buf err = {0};
    assert_int_equal(worker_table_load(table, "boot-A", NULL, &back, &n, &err), 0);
    assert_int_equal(n, 1);
    assert_true(back[0]->adopted);
    assert_int_equal(back[0]->ckpts.n, 1);
    assert_int_equal(back[0]->ckpts.steps[0].step, 3);
    assert_string_equal(back[0]->ckpts.steps[0].path, w->ckpts.steps[0].path);
    assert_int_equal(back[0]->ckpts.steps[0].ms, w->ckpts.steps[0].ms);
    assert_int_equal(worker_watch_checkpoint(back[0]), 0); /* seen before the restart */
    worker_free(back[0]);
    free(back);

    /* the same record as an older agent wrote it: no steps, no marker fields */
    char *text = NULL;
    size_t len;
    assert_int_equal(file_read_all(table, &text, &len), 0);
    json_t *root = json_loads(text, 0, NULL);
    free(text);
    json_t *rec = json_array_get(json_object_get(root, "workers"), 0);
    json_object_del(rec, "checkpoints");
    json_object_del(rec, "marker_mtime_ns");
    json_object_del(rec, "marker_size");
    json_object_del(rec, "marker_ino");
    char *old = json_dumps(root, 0);
    json_decref(root);
    write_text(table, old);
    free(old);
    assert_int_equal(worker_table_load(table, "boot-A", NULL, &back, &n, &err), 0);
    assert_int_equal(back[0]->ckpts.n, 0);
    assert_int_equal(worker_watch_checkpoint(back[0]), 0);
    assert_int_equal(back[0]->ckpts.n, 0);
    worker_free(back[0]);
    free(back);
    buf_free(&err);
    stop(w);
    worker_free(w);
    free(table);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_marker_parse),
        cmocka_unit_test(test_marker_run),
        cmocka_unit_test(test_other_run_marker),
        cmocka_unit_test(test_history),
        cmocka_unit_test(test_rank_marks_its_steps),
        cmocka_unit_test(test_bad_marker),
        cmocka_unit_test(test_preempt_waits_for_marker),
        cmocka_unit_test(test_table_keeps_steps),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
