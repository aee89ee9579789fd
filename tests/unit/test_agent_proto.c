/* test_agent_proto.c: the agent's half of the heartbeat exchange (agent/proto.c,
 * agent/assign.c): the report's exact shape (GPUs with MIG instances and NVLink peers,
 * workers in each state, pending ones left out, the address when given), the reply
 * read back (heartbeat_ms clamped, MIG wants, workers with their stop, forget), an
 * entry without a key skipped rather than failing the node, malformed replies refused
 * with the field named, and assignments with a bad field refused with its name. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "agent/proto.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

static Worker *worker(const char *spec_json)
{
    json_t *spec = json_loads(spec_json, 0, NULL);
    assert_non_null(spec);
    WorkerKey k;
    assert_int_equal(assign_key(spec, &k.job, &k.run, &k.rank), 0);
    Worker *w = worker_new(&k, spec);
    json_decref(spec);
    return w;
}

static void test_heartbeat_shape(void **state)
{
    AgentGpu g[2] = {0};
    g[0].index = 0;
    strcpy(g[0].uuid, "GPU-0");
    strcpy(g[0].name, "NVIDIA A100-80GB");
    g[0].memory_mib = 81920;
    g[0].mig_capable = g[0].mig_enabled = true;
    g[0].n_mig = 1;
    strcpy(g[0].mig[0].profile, "1g.10gb");
    g[0].mig[0].start = 6;
    strcpy(g[0].mig[0].uuid, "MIG-6");
    g[0].n_peers = 1;
    g[0].peers[0] = 1;
    g[1].index = 1;
    strcpy(g[1].uuid, "GPU-1");
    strcpy(g[1].name, "NVIDIA A100-80GB");
    strcpy(g[1].health, "xid 79"); /* sick: its reason goes out as its health */

    Worker *run = worker("{\"job\": 17, \"run\": 1, \"rank\": 0, \"command\": [\"x\"]}");
    run->state = WK_RUNNING;
    run->pid = 4242;
    run->start_ms = 1764500000000;
    run->checkpoint = strdup("/ck/17/ckpt-3");
    run->checkpoint_ms = 1764500100000;
    Worker *done = worker("{\"job\": 18, \"run\": 2, \"rank\": 1, \"world_size\": 2, "
                          "\"command\": [\"x\"]}");
    done->state = WK_EXITED;
    done->pid = 4243;
    done->has_exit_code = true;
    done->exit_code = 0;
    done->end_ms = 5;
    Worker *killed = worker("{\"job\": 19, \"run\": 1, \"rank\": 0, \"command\": [\"x\"]}");
    killed->state = WK_EXITED;
    killed->signal = SIGKILL;
    Worker *pending = worker("{\"job\": 20, \"run\": 1, \"rank\": 0, \"command\": [\"x\"]}");
    Worker *bad = worker("{\"job\": 21, \"run\": 1, \"rank\": 0, \"command\": []}");
    assert_int_equal(bad->state, WK_FAILED);
    assert_string_equal(bad->error,
                        "bad assignment: 'command' must be a non-empty list of strings");
    Worker *all[] = {run, done, killed, pending, bad};

    Buf out = {0};
    assert_int_equal(
        proto_heartbeat("a100-0", "10.0.0.5", "boot-1", NULL, g, 2, all, 5, NULL, false, &out), 0);
    json_t *got = json_loads(buf_str(&out), 0, NULL);
    json_t *want = json_loads(
        "{\"node\": \"a100-0\", \"address\": \"10.0.0.5\", \"boot_id\": \"boot-1\", \"gpus\": ["
        "{\"index\": 0, \"uuid\": \"GPU-0\", \"name\": \"NVIDIA A100-80GB\", \"memory_mib\": "
        "81920, \"mig_capable\": true, \"mig_enabled\": true, \"mig\": [{\"profile\": "
        "\"1g.10gb\", \"start\": 6, "
        "\"uuid\": \"MIG-6\"}], \"nvlink_peers\": [1], \"health\": \"ok\"},"
        "{\"index\": 1, \"uuid\": \"GPU-1\", \"name\": \"NVIDIA A100-80GB\", \"memory_mib\": 0, "
        "\"mig_capable\": false, \"mig_enabled\": false, \"mig\": [], \"nvlink_peers\": [], "
        "\"health\": \"xid 79\"}],"
        "\"workers\": ["
        "{\"job\": 17, \"run\": 1, \"rank\": 0, \"pid\": 4242, \"state\": \"running\", "
        "\"start_ms\": 1764500000000, \"checkpoint\": \"/ck/17/ckpt-3\", "
        "\"checkpoint_ms\": 1764500100000},"
        "{\"job\": 18, \"run\": 2, \"rank\": 1, \"pid\": 4243, \"state\": \"exited\", "
        "\"start_ms\": null, \"exit_code\": 0, \"signal\": 0, \"end_ms\": 5},"
        "{\"job\": 19, \"run\": 1, \"rank\": 0, \"pid\": 0, \"state\": \"exited\", "
        "\"start_ms\": null, \"exit_code\": null, \"signal\": 9, \"end_ms\": 0},"
        "{\"job\": 21, \"run\": 1, \"rank\": 0, \"pid\": 0, \"state\": \"failed\", "
        "\"start_ms\": null, \"exit_code\": null, \"signal\": 0, \"end_ms\": " /* below */
        "0, \"error\": \"bad assignment: 'command' must be a non-empty list of strings\"}]}",
        0, NULL);
    assert_non_null(got);
    assert_non_null(want);
    /* the failed worker's end time is the wall clock: check it, then compare the rest */
    json_t *bw = json_array_get(json_object_get(got, "workers"), 3);
    assert_true(json_integer_value(json_object_get(bw, "end_ms")) > 1700000000000);
    json_object_set_new(bw, "end_ms", json_integer(0));
    if (!json_equal(got, want))
        fail_msg("heartbeat differs:\n%s", buf_str(&out));
    json_decref(got);
    json_decref(want);

    /* no address: the field is left out */
    buf_reset(&out);
    assert_int_equal(
        proto_heartbeat("a100-0", NULL, "boot-1", NULL, g, 0, NULL, 0, NULL, false, &out), 0);
    assert_string_equal(buf_str(&out),
                        "{\"node\":\"a100-0\",\"boot_id\":\"boot-1\",\"gpus\":[],\"workers\":[]}");

    /* the server the workers belong to, once the agent knows it */
    buf_reset(&out);
    assert_int_equal(
        proto_heartbeat("a100-0", NULL, "boot-1", "ab12", g, 0, NULL, 0, NULL, false, &out), 0);
    got = json_loads(buf_str(&out), 0, NULL);
    assert_string_equal(json_string_value(json_object_get(got, "server_id")), "ab12");
    json_decref(got);
    buf_reset(&out);
    assert_int_equal(
        proto_heartbeat("a100-0", NULL, "boot-1", "", g, 0, NULL, 0, NULL, false, &out), 0);
    assert_null(strstr(buf_str(&out), "server_id"));

    /* shutting down: said at the top, and of each worker the shutdown stopped */
    buf_reset(&out);
    done->shutdown = true;
    Worker *one[] = {done};
    assert_int_equal(
        proto_heartbeat("a100-0", NULL, "boot-1", NULL, g, 0, one, 1, NULL, true, &out), 0);
    got = json_loads(buf_str(&out), 0, NULL);
    assert_true(json_is_true(json_object_get(got, "shutdown")));
    assert_true(json_is_true(
        json_object_get(json_array_get(json_object_get(got, "workers"), 0), "shutdown")));
    json_decref(got);
    buf_free(&out);
    for (size_t i = 0; i < 5; i++)
        worker_free(all[i]);
}

/* The readings: only those taken, per GPU and per MIG instance by start; a GPU with
 * none has no "sample" at all. */
static void test_heartbeat_samples(void **state)
{
    (void)state;
    AgentGpu g[2] = {0};
    g[0].index = 0;
    strcpy(g[0].uuid, "GPU-0");
    strcpy(g[0].name, "NVIDIA A100-80GB");
    g[0].mig_capable = g[0].mig_enabled = true;
    g[0].n_mig = 2;
    strcpy(g[0].mig[0].profile, "1g.10gb");
    g[0].mig[0].start = 0;
    strcpy(g[0].mig[0].uuid, "MIG-0");
    strcpy(g[0].mig[1].profile, "3g.40gb");
    g[0].mig[1].start = 4;
    strcpy(g[0].mig[1].uuid, "MIG-4");
    g[0].sample = (GpuSample){.has_memory = true,
                              .memory_used_mib = 31000,
                              .has_power = true,
                              .power_w = 98.25,
                              .has_temperature = true,
                              .temperature_c = 44,
                              .n_mig = 1,
                              .mig = {{.start = 4,
                                       .has_busy = true,
                                       .busy_pct = 35,
                                       .has_memory = true,
                                       .memory_used_mib = 30000}}};
    g[1].index = 1;
    strcpy(g[1].uuid, "GPU-1");
    strcpy(g[1].name, "NVIDIA H100");
    Buf out = {0};
    assert_int_equal(proto_heartbeat("n", NULL, "b", NULL, g, 2, NULL, 0, NULL, false, &out), 0);
    json_t *got = json_loads(buf_str(&out), 0, NULL);
    json_t *want = json_loads(
        "[{\"index\": 0, \"uuid\": \"GPU-0\", \"name\": \"NVIDIA A100-80GB\", \"memory_mib\": 0,"
        " \"mig_capable\": true, \"mig_enabled\": true, \"mig\": ["
        "  {\"profile\": \"1g.10gb\", \"start\": 0, \"uuid\": \"MIG-0\"},"
        "  {\"profile\": \"3g.40gb\", \"start\": 4, \"uuid\": \"MIG-4\","
        "   \"sample\": {\"busy_pct\": 35, \"memory_used_mib\": 30000}}],"
        " \"nvlink_peers\": [], \"health\": \"ok\","
        " \"sample\": {\"memory_used_mib\": 31000, \"power_w\": 98.25, \"temperature_c\": 44}},"
        "{\"index\": 1, \"uuid\": \"GPU-1\", \"name\": \"NVIDIA H100\", \"memory_mib\": 0,"
        " \"mig_capable\": false, \"mig_enabled\": false, \"mig\": [], \"nvlink_peers\": [], "
        "\"health\": \"ok\"}]",
        0, NULL);
    assert_non_null(got);
    assert_non_null(want);
    if (!json_equal(json_object_get(got, "gpus"), want))
        fail_msg("heartbeat differs:\n%s", buf_str(&out));
    json_decref(got);

    /* every reading of a whole GPU */
    g[1].sample = (GpuSample){.has_busy = true,
                              .busy_pct = 87,
                              .has_memory = true,
                              .memory_used_mib = 2500,
                              .has_power = true,
                              .power_w = 612.5,
                              .has_temperature = true,
                              .temperature_c = 71};
    buf_reset(&out);
    assert_int_equal(proto_heartbeat("n", NULL, "b", NULL, g + 1, 1, NULL, 0, NULL, false, &out),
                     0);
    got = json_loads(buf_str(&out), 0, NULL);
    json_decref(want);
    want = json_loads(
        "{\"busy_pct\": 87, \"memory_used_mib\": 2500, \"power_w\": 612.5, \"temperature_c\": 71}",
        0, NULL);
    if (!json_equal(json_object_get(json_array_get(json_object_get(got, "gpus"), 0), "sample"),
                    want))
        fail_msg("sample differs:\n%s", buf_str(&out));
    json_decref(got);
    json_decref(want);
    buf_free(&out);
}

static void test_reply(void **state)
{
    const char *body =
        "{\"heartbeat_ms\": 250,"
        " \"mig\": [{\"index\": 0, \"layout\": [{\"profile\": \"1g.10gb\", \"start\": 0},"
        "                                      {\"profile\": \"3g.40gb\", \"start\": 4}]},"
        "          {\"index\": 3, \"layout\": []}],"
        " \"workers\": [{\"job\": 17, \"run\": 1, \"rank\": 0, \"command\": [\"x\"], \"stop\": "
        "null},"
        "              {\"job\": 18, \"run\": 2, \"rank\": 1, \"stop\": \"preempt\"},"
        "              {\"run\": 1, \"rank\": 0},"
        "              {\"job\": 19, \"run\": 1, \"rank\": 0, \"stop\": \"cancel\"}],"
        " \"forget\": [{\"job\": 16, \"run\": 2, \"rank\": 0}]}";
    HeartbeatReply r;
    Buf err = {0};
    assert_int_equal(proto_reply_parse(body, strlen(body), &r, &err), 0);
    assert_int_equal(r.heartbeat_ms, 250);
    assert_int_equal(r.n_mig, 2);
    const MigWant *w0 = proto_mig_want(&r, 0);
    assert_non_null(w0);
    assert_int_equal(w0->n, 2);
    assert_string_equal(w0->inst[1].profile, "3g.40gb");
    assert_int_equal(w0->inst[1].start, 4);
    assert_null(proto_mig_want(&r, 1)); /* not listed: MIG off */
    assert_int_equal(proto_mig_want(&r, 3)->n, 0);

    const GpuModel *m = catalog_find("A100-80GB");
    MigLayout l;
    assert_int_equal(proto_mig_layout(w0, m, &l, &err), 0);
    assert_int_equal(l.profile_at[0], catalog_profile_index(m, "1g.10gb"));
    assert_int_equal(l.profile_at[4], catalog_profile_index(m, "3g.40gb"));
    assert_int_equal(mig_layout_count(&l), 2);
    assert_int_equal(proto_mig_layout(NULL, m, &l, &err), 0);
    assert_true(mig_layout_empty(&l));
    /* the H100's profile names differ: a want the model lacks is named */
    assert_int_equal(proto_mig_layout(w0, catalog_find("A30"), &l, &err), -EINVAL);
    assert_non_null(strstr(buf_str(&err), "GPU 0: '1g.10gb' is not a MIG profile of A30 ("));

    assert_int_equal(r.n_workers, 3);
    assert_int_equal(r.n_unkeyed, 1);
    assert_int_equal(r.workers[0].key.job, 17);
    assert_int_equal(r.workers[0].stop, WSTOP_NONE);
    assert_int_equal(r.workers[1].key.run, 2);
    assert_int_equal(r.workers[1].key.rank, 1);
    assert_int_equal(r.workers[1].stop, WSTOP_PREEMPT);
    assert_int_equal(r.workers[2].stop, WSTOP_CANCEL);
    assert_int_equal(r.n_forget, 1);
    assert_int_equal(r.forget[0].job, 16);
    assert_int_equal(r.forget[0].run, 2);
    assert_null(r.server_id);
    proto_reply_free(&r);

    const char *named = "{\"server_id\": \"0123456789abcdef0123456789abcdef\"}";
    assert_int_equal(proto_reply_parse(named, strlen(named), &r, &err), 0);
    assert_string_equal(r.server_id, "0123456789abcdef0123456789abcdef");
    proto_reply_free(&r);

    /* heartbeat_ms is kept within bounds; absent, it is 500 */
    const char *fast = "{\"heartbeat_ms\": 1}";
    assert_int_equal(proto_reply_parse(fast, strlen(fast), &r, &err), 0);
    assert_int_equal(r.heartbeat_ms, PROTO_HEARTBEAT_MIN_MS);
    proto_reply_free(&r);
    assert_int_equal(proto_reply_parse("{}", 2, &r, &err), 0);
    assert_int_equal(r.heartbeat_ms, 500);
    assert_int_equal(r.n_workers, 0);
    proto_reply_free(&r);
    buf_free(&err);
}

static void test_bad_replies(void **state)
{
    static const struct {
        const char *body, *says;
    } cases[] = {
        {"not json", "the heartbeat reply is not a JSON object"},
        {"[1]", "the heartbeat reply is not a JSON object"},
        {"{\"workers\": {}}", "'workers' must be a list"},
        {"{\"mig\": [{\"layout\": []}]}", "mig[0]: expected {\"index\": GPU"},
        {"{\"mig\": [{\"index\": 0, \"layout\": [{\"profile\": \"1g.10gb\", \"start\": 9}]}]}",
         "mig[0].layout[0]: expected {\"profile\": P, \"start\": 0-7}"},
        {"{\"forget\": [{\"job\": 1}]}", "forget[0]: expected"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        HeartbeatReply r;
        Buf err = {0};
        assert_int_equal(proto_reply_parse(cases[i].body, strlen(cases[i].body), &r, &err),
                         -EINVAL);
        if (!strstr(buf_str(&err), cases[i].says))
            fail_msg("%s: '%s' lacks '%s'", cases[i].body, buf_str(&err), cases[i].says);
        buf_free(&err);
    }
}

static void test_bad_assignments(void **state)
{
    static const struct {
        const char *spec, *says;
    } cases[] = {
        {"{\"job\": 1, \"run\": 1, \"rank\": 0}", "'command' must be a non-empty list"},
        {"{\"job\": 1, \"run\": 1, \"rank\": 0, \"command\": [\"\"]}", "'command'[0] must be a "
                                                                       "non-empty string"},
        {"{\"job\": 1, \"run\": 1, \"rank\": 2, \"world_size\": 2, \"command\": [\"x\"]}",
         "'rank' 2 is not below 'world_size' 2"},
        {"{\"job\": 1, \"run\": 1, \"rank\": 0, \"command\": [\"x\"], \"stop\": \"halt\"}",
         "'stop' must be null, \"preempt\" or \"cancel\""},
        {"{\"job\": 1, \"run\": 1, \"rank\": 0, \"command\": [\"x\"], \"checkpoint_signal\": "
         "\"KILL\"}",
         "'checkpoint_signal' must name a catchable signal"},
        {"{\"job\": 1, \"run\": 1, \"rank\": 0, \"command\": [\"x\"], \"gpus\": [{\"index\": 0, "
         "\"fraction\": 1.5}]}",
         "gpus[0]: 'fraction' must be a number between 0 and 1"},
        {"{\"job\": 1, \"run\": 1, \"rank\": 0, \"command\": [\"x\"], \"gpus\": [{\"index\": 0, "
         "\"mig\": {\"profile\": \"1g.10gb\"}}]}",
         "gpus[0]: 'mig' must be"},
        {"{\"job\": 1, \"run\": 1, \"rank\": 0, \"command\": [\"x\"], \"env\": {\"A\": 1}}",
         "env 'A'"},
        {"{\"job\": 1, \"run\": 1, \"rank\": 0, \"command\": [\"x\"], \"grace_ms\": -1}",
         "'grace_ms' must be a whole number"},
        {"{\"job\": 0, \"run\": 1, \"rank\": 0, \"command\": [\"x\"]}", "'job', 'run' and 'rank'"},
        {"{\"job\": 1, \"run\": 1, \"rank\": 0, \"command\": [\"x\"], \"fabric\": 3}",
         "'fabric' must be a string"},
        {"{\"job\": 1, \"run\": 1, \"rank\": 0, \"command\": [\"x\"], \"multi_node\": 1}",
         "'multi_node' must be true or false"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_t *o = json_loads(cases[i].spec, 0, NULL);
        assert_non_null(o);
        Assignment a;
        Buf err = {0};
        assert_int_equal(assign_parse(o, &a, &err), -EINVAL);
        if (!strstr(buf_str(&err), cases[i].says))
            fail_msg("%s: '%s' lacks '%s'", cases[i].spec, buf_str(&err), cases[i].says);
        buf_free(&err);
        json_decref(o);
    }
    /* the defaults of a minimal assignment */
    json_t *o =
        json_loads("{\"job\": 4, \"run\": 1, \"rank\": 0, \"command\": [\"x\", \"y\"]}", 0, NULL);
    Assignment a;
    Buf err = {0};
    assert_int_equal(assign_parse(o, &a, &err), 0);
    assert_int_equal(a.world_size, 1);
    assert_int_equal(a.checkpoint_signal, SIGUSR1);
    assert_int_equal(a.grace_ms, ASSIGN_DEFAULT_GRACE_MS);
    assert_int_equal(a.checkpoint_interval_ms, 0);
    assert_null(a.resume_from);
    assert_string_equal(a.argv[1], "y");
    assert_null(a.argv[2]);
    assert_null(a.env[0]);
    assert_null(a.fabric);
    assert_false(a.multi_node);
    assign_free(&a);
    json_decref(o);
    /* the node's pool's fabric label and whether the run spans nodes */
    o = json_loads("{\"job\": 4, \"run\": 1, \"rank\": 3, \"world_size\": 16, \"command\": "
                   "[\"x\"], \"fabric\": \"infiniband-ndr\", \"multi_node\": true}",
                   0, NULL);
    assert_int_equal(assign_parse(o, &a, &err), 0);
    assert_string_equal(a.fabric, "infiniband-ndr");
    assert_true(a.multi_node);
    assign_free(&a);
    json_decref(o);
    assert_int_equal(assign_signal_from_name("SIGTERM"), SIGTERM);
    assert_int_equal(assign_signal_from_name("usr2"), SIGUSR2);
    assert_int_equal(assign_signal_from_name("10"), 10);
    assert_int_equal(assign_signal_from_name("NOPE"), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_heartbeat_shape), cmocka_unit_test(test_heartbeat_samples),
        cmocka_unit_test(test_reply),           cmocka_unit_test(test_bad_replies),
        cmocka_unit_test(test_bad_assignments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
