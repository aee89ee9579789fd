/* test_checkpoint.c: the server's side of the checkpoint contract (server/checkpoint.c).
 * The gang: rank 1 got to step 2 and rank 0 only to step 1 when it stopped, so
 * the job's checkpoint is step 1, and each rank resumes from its own directory of it;
 * step 2 counts once rank 0 has it too, and an older list from a rank never takes the
 * checkpoint back. A gang's shared LATEST is not a checkpoint (one event says so); a
 * one-worker job's LATEST still is. A new run's steps replace what an earlier run left,
 * even a lower step, but only once every rank of the new run has one. Malformed
 * reports are refused with the reason; LATEST text that happens to be JSON is kept as
 * text; the API shows rank 0's path, the step and every rank's path. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "server/checkpoint.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* A job of n workers in run `run`, as lifecycle.c makes it when it starts. */
static ServerJob *job(size_t n, uint32_t run)
{
    ServerJob *j = calloc(1, sizeof(*j));
    assert_non_null(j);
    j->st.id = 7;
    j->st.run = run;
    j->life.sj = &j->sj;
    j->life.n_workers = n;
    j->life.workers = calloc(n, sizeof(*j->life.workers));
    assert_non_null(j->life.workers);
    for (size_t i = 0; i < n; i++)
        j->life.workers[i] = (LifeWorker){.run = run, .state = LIFE_WORKER_RUNNING};
    return j;
}

static void job_free(ServerJob *j)
{
    checkpoint_gang_free(j->ckpt);
    free(j->life.workers);
    free(j->st.checkpoint);
    free(j);
}

/* A worker report (as the heartbeat carries it) listing steps[0..n) of `rank`, each
 * under /ck/7/step-S/rank-R, marked at 1000 * S ms. */
static json_t *report(size_t rank, const int64_t *steps, size_t n)
{
    json_t *list = json_array();
    for (size_t i = 0; i < n; i++) {
        char path[64];
        snprintf(path, sizeof(path), "/ck/7/step-%lld/rank-%zu", (long long)steps[i], rank);
        json_array_append_new(list, json_pack("{sI ss sI}", "step", (json_int_t)steps[i], "path",
                                              path, "ms", (json_int_t)(steps[i] * 1000)));
    }
    return json_pack("{sI sI sI ss so}", "job", (json_int_t)7, "run", (json_int_t)1, "rank",
                     (json_int_t)rank, "state", "running", "checkpoints", list);
}

static void fold(ServerJob *j, size_t rank, const int64_t *steps, size_t n, Changes *ch)
{
    json_t *w = report(rank, steps, n);
    Buf err = {0};
    assert_int_equal(checkpoint_report_check(w, &err), 0);
    checkpoint_fold(j, rank, w, 5000, ch);
    json_decref(w);
    buf_free(&err);
}

static size_t events(const Changes *ch, const char *type)
{
    size_t n = 0;
    for (size_t i = 0; i < ch->n_events; i++)
        n += !strcmp(ch->events[i].type, type);
    return n;
}

static void assert_resume(const ServerJob *j, size_t rank, const char *want)
{
    json_t *r = checkpoint_resume_json(j->st.checkpoint, rank);
    if (want)
        assert_string_equal(json_string_value(r), want);
    else
        assert_true(json_is_null(r));
    json_decref(r);
}

static void test_report_check(void **state)
{
    const char *good[] = {
        "{}",
        "{\"checkpoints\": null}",
        "{\"checkpoints\": []}",
        "{\"checkpoints\": [{\"step\": 0, \"path\": \"/a\"}, {\"step\": 9, \"path\": \"b\", "
        "\"ms\": 1764500100000}]}",
    };
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        json_t *w = json_loads(good[i], 0, NULL);
        Buf err = {0};
        assert_int_equal(checkpoint_report_check(w, &err), 0);
        json_decref(w);
        buf_free(&err);
    }
    struct {
        const char *json, *says;
    } bad[] = {
        {"{\"checkpoints\": {\"step\": 1}}", "a list"},
        {"{\"checkpoints\": [3]}", "[0] is not an object"},
        {"{\"checkpoints\": [{\"path\": \"/a\"}]}", "'step'"},
        {"{\"checkpoints\": [{\"step\": -1, \"path\": \"/a\"}]}", "'step'"},
        {"{\"checkpoints\": [{\"step\": \"68\", \"path\": \"/a\"}]}", "'step'"},
        {"{\"checkpoints\": [{\"step\": 1, \"path\": \"/a\"}, {\"step\": 2}]}", "[1] needs 'path'"},
        {"{\"checkpoints\": [{\"step\": 1, \"path\": \"\"}]}", "'path'"},
        {"{\"checkpoints\": [{\"step\": 1, \"path\": \"/a\", \"ms\": \"now\"}]}", "'ms'"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        json_t *w = json_loads(bad[i].json, 0, NULL);
        assert_non_null(w);
        Buf err = {0};
        assert_int_equal(checkpoint_report_check(w, &err), -EINVAL);
        if (!strstr(buf_str(&err), bad[i].says))
            fail_msg("%s: '%s' does not say %s", bad[i].json, buf_str(&err), bad[i].says);
        json_decref(w);
        buf_free(&err);
    }
    /* too many, and a path too long */
    json_t *list = json_array();
    for (int i = 0; i <= CHECKPOINT_REPORT_MAX; i++)
        json_array_append_new(list, json_pack("{si ss}", "step", i, "path", "/a"));
    json_t *w = json_pack("{so}", "checkpoints", list);
    Buf err = {0};
    assert_int_equal(checkpoint_report_check(w, &err), -EINVAL);
    json_decref(w);
    char *longpath = malloc(CHECKPOINT_PATH_MAX + 2);
    memset(longpath, 'x', CHECKPOINT_PATH_MAX + 1);
    longpath[CHECKPOINT_PATH_MAX + 1] = '\0';
    w = json_pack("{s[{si ss}]}", "checkpoints", "step", 1, "path", longpath);
    assert_int_equal(checkpoint_report_check(w, &err), -EINVAL);
    json_decref(w);
    free(longpath);
    buf_free(&err);
}

/* Rank 1 has steps 1 and 2, rank 0 only 1: the checkpoint is step 1, each rank its own
 * directory of it. */
static void test_common_step(void **state)
{
    ServerJob *j = job(2, 1);
    Changes ch = {0};
    const int64_t one[] = {1}, both[] = {1, 2};
    fold(j, 0, one, 1, &ch);
    assert_null(j->st.checkpoint); /* rank 1 has not said */
    assert_int_equal(events(&ch, "checkpoint"), 0);
    fold(j, 1, both, 2, &ch);
    assert_non_null(j->st.checkpoint);
    assert_int_equal(events(&ch, "checkpoint"), 1);
    assert_resume(j, 0, "/ck/7/step-1/rank-0");
    assert_resume(j, 1, "/ck/7/step-1/rank-1");
    assert_resume(j, 2, NULL);
    assert_int_equal(j->st.checkpoint_ms, 1000);
    assert_int_equal(j->sj.last_checkpoint_ms, 1000);
    assert_int_equal(checkpoint_rank_step(j, 0), 1);
    assert_int_equal(checkpoint_rank_step(j, 1), 2);
    int64_t step;
    assert_true(checkpoint_common(j->ckpt, &step));
    assert_int_equal(step, 1);

    /* the same lists again (every heartbeat carries them): nothing new */
    fold(j, 1, both, 2, &ch);
    fold(j, 0, one, 1, &ch);
    assert_int_equal(events(&ch, "checkpoint"), 1);

    /* rank 0 catches up: step 2 */
    fold(j, 0, both, 2, &ch);
    assert_int_equal(events(&ch, "checkpoint"), 2);
    assert_resume(j, 0, "/ck/7/step-2/rank-0");
    assert_resume(j, 1, "/ck/7/step-2/rank-1");
    assert_int_equal(j->st.checkpoint_ms, 2000);
    Buf label = {0};
    checkpoint_label(j->st.checkpoint, &label);
    assert_string_equal(buf_str(&label), "step 2 of all 2 ranks (rank 0: /ck/7/step-2/rank-0)");
    buf_free(&label);
    assert_string_equal(ch.events[ch.n_events - 1].detail,
                        "step 2 of all 2 ranks (rank 0: /ck/7/step-2/rank-0)");

    /* an older list of rank 0 (its step 2 fell out of a shorter report) does not take the
     * run's checkpoint back to step 1 */
    fold(j, 0, one, 1, &ch);
    assert_resume(j, 0, "/ck/7/step-2/rank-0");
    assert_int_equal(events(&ch, "checkpoint"), 2);

    /* the API: rank 0's path, the step, every rank's */
    json_t *o = json_object();
    checkpoint_api_fields(j->st.checkpoint, o);
    assert_string_equal(json_string_value(json_object_get(o, "checkpoint")), "/ck/7/step-2/rank-0");
    assert_int_equal(json_integer_value(json_object_get(o, "checkpoint_step")), 2);
    json_t *ranks = json_object_get(o, "checkpoint_ranks");
    assert_int_equal(json_array_size(ranks), 2);
    assert_string_equal(json_string_value(json_array_get(ranks, 1)), "/ck/7/step-2/rank-1");
    json_decref(o);
    changes_free(&ch);
    job_free(j);
}

/* Both ranks of a gang write the one LATEST: the last writer's path would be every
 * rank's. It is not taken, and the job hears why once. */
static void test_gang_latest_ignored(void **state)
{
    ServerJob *j = job(2, 1);
    Changes ch = {0};
    for (int i = 0; i < 3; i++) {
        json_t *w = json_pack("{sI sI sI ss ss sI}", "job", (json_int_t)7, "run", (json_int_t)1,
                              "rank", (json_int_t)(i % 2), "state", "running", "checkpoint",
                              "/ck/7/ckpt-68-rank1", "checkpoint_ms", (json_int_t)68000);
        checkpoint_fold(j, (size_t)(i % 2), w, 5000, &ch);
        json_decref(w);
    }
    assert_null(j->st.checkpoint);
    assert_int_equal(events(&ch, "checkpoint"), 0);
    assert_int_equal(events(&ch, "checkpoint-ignored"), 1);
    assert_non_null(strstr(ch.events[0].detail, "LATEST.RANK"));
    assert_resume(j, 0, NULL);
    changes_free(&ch);
    job_free(j);
}

/* One worker that writes only LATEST: its text is the checkpoint, as before. */
static void test_single_latest(void **state)
{
    ServerJob *j = job(1, 1);
    Changes ch = {0};
    for (int i = 0; i < 2; i++) {
        json_t *w = json_pack("{sI sI sI ss ss sI}", "job", (json_int_t)7, "run", (json_int_t)1,
                              "rank", (json_int_t)0, "state", "running", "checkpoint",
                              "{\"step\": 3}", "checkpoint_ms", (json_int_t)3000);
        checkpoint_fold(j, 0, w, 5000, &ch);
        json_decref(w);
    }
    assert_string_equal(j->st.checkpoint, "{\"step\": 3}");
    assert_int_equal(j->st.checkpoint_ms, 3000);
    assert_int_equal(events(&ch, "checkpoint"), 1);
    /* JSON of the job's own is its text, not the server's form */
    assert_resume(j, 0, "{\"step\": 3}");
    json_t *o = json_object();
    checkpoint_api_fields(j->st.checkpoint, o);
    assert_string_equal(json_string_value(json_object_get(o, "checkpoint")), "{\"step\": 3}");
    assert_true(json_is_null(json_object_get(o, "checkpoint_step")));
    json_decref(o);

    /* once it marks steps, those count and LATEST no longer does */
    const int64_t four[] = {4};
    fold(j, 0, four, 1, &ch);
    assert_resume(j, 0, "/ck/7/step-4/rank-0");
    json_t *w = json_pack("{sI sI sI ss ss}", "job", (json_int_t)7, "run", (json_int_t)1, "rank",
                          (json_int_t)0, "state", "running", "checkpoint", "/ck/7/other");
    checkpoint_fold(j, 0, w, 5000, &ch);
    json_decref(w);
    assert_resume(j, 0, "/ck/7/step-4/rank-0");
    Buf label = {0};
    checkpoint_label(j->st.checkpoint, &label);
    assert_string_equal(buf_str(&label), "step 4: /ck/7/step-4/rank-0");
    buf_free(&label);
    changes_free(&ch);
    job_free(j);
}

/* Run 2 resumed from run 1's step 50; once both of its ranks have step 3 (it could not
 * read step 50, say, and started over), that is what run 3 continues from. Before both
 * have one, run 1's stays. */
static void test_new_run(void **state)
{
    ServerJob *j = job(2, 1);
    Changes ch = {0};
    const int64_t fifty[] = {50}, three[] = {3}, fiftyone[] = {51};
    fold(j, 0, fifty, 1, &ch);
    fold(j, 1, fifty, 1, &ch);
    assert_resume(j, 1, "/ck/7/step-50/rank-1");
    /* run 2 begins: rank 0 reports a step, rank 1 has not yet */
    for (size_t i = 0; i < 2; i++)
        j->life.workers[i].run = 2;
    j->st.run = 2;
    fold(j, 0, fiftyone, 1, &ch);
    assert_resume(j, 0, "/ck/7/step-50/rank-0");
    assert_int_equal(checkpoint_rank_step(j, 1), -1); /* run 1's report is not run 2's */
    fold(j, 0, three, 1, &ch);
    fold(j, 1, three, 1, &ch);
    assert_resume(j, 0, "/ck/7/step-3/rank-0");
    assert_resume(j, 1, "/ck/7/step-3/rank-1");
    assert_int_equal(events(&ch, "checkpoint"), 2);
    changes_free(&ch);
    job_free(j);
}

static void test_stored_forms(void **state)
{
    Buf label = {0};
    checkpoint_label(NULL, &label);
    assert_string_equal(buf_str(&label), "none");
    buf_reset(&label);
    /* a checkpoint stored before this change: LATEST's text, every rank's */
    checkpoint_label("/ck/7/ckpt-68", &label);
    assert_string_equal(buf_str(&label), "/ck/7/ckpt-68");
    buf_free(&label);
    json_t *r = checkpoint_resume_json("/ck/7/ckpt-68", 1);
    assert_string_equal(json_string_value(r), "/ck/7/ckpt-68");
    json_decref(r);
    r = checkpoint_resume_json(NULL, 0);
    assert_true(json_is_null(r));
    json_decref(r);
    /* close to the server's form but with a key more: text */
    const char *near = "{\"ranks\": [\"/a\"], \"run\": 1, \"step\": 2, \"x\": 0}";
    r = checkpoint_resume_json(near, 0);
    assert_string_equal(json_string_value(r), near);
    json_decref(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_report_check),
        cmocka_unit_test(test_common_step),
        cmocka_unit_test(test_gang_latest_ignored),
        cmocka_unit_test(test_single_latest),
        cmocka_unit_test(test_new_run),
        cmocka_unit_test(test_stored_forms),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
