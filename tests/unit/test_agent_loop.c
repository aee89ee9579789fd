/* test_agent_loop.c: the agent's loop (agent/agent.c) against a scripted server on
 * loopback (libmicrohttpd in this process, speaking docs/api.md's agent endpoints), so
 * each step of the exchange can be set and checked: the heartbeat's content, a MIG
 * layout reached before the MIG worker starts and its instance UUID in the worker's
 * environment, a layout that would destroy a busy instance refused, a preemption
 * (checkpoint, then exit) reported and forgotten, logs that heal after the server lost
 * them (409 and resend), workers left running while the server is away, an agent
 * restart that takes its worker back, and a worker the server stops listing killed.
 * From a review: the table is on disk before the round's log uploads (a crash then does
 * not start a worker twice); one upload that cannot reach the server ends the round's
 * uploads; a later reply's smaller grace shortens a stop under way; an agent started
 * with fds 0-2 closed puts /dev/null there. SIGTERM's shutdown stops every worker, by a
 * checkpoint where it can, and says so; a refused heartbeat is asked again without
 * back-off. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "agent/agent.h"
#include "agent/worker.h"

#include <errno.h>
#include <jansson.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TOKEN "gpo_agent_test"

/* ---- the scripted server ---- */

typedef struct Scripted {
    pthread_mutex_t lock;
    struct MHD_Daemon *d;
    unsigned port;
    int heartbeat_status; /* 200, or 503 to play a server in trouble */
    char *reply;          /* the heartbeat reply */
    json_t *last;         /* the last heartbeat body */
    int heartbeats;
    int unauthorized;
    Buf log[4]; /* job 1..4, rank 0, whatever run: the server's copy */
    int conflicts;
    bool drop_logs;         /* close log uploads' connections unanswered */
    int drops;              /* log uploads dropped */
    const char *table_path; /* with table_job: checked on every log upload once armed */
    const char *table_job;  /* the text the table must hold, e.g. "\"job\": 4" */
    bool table_armed;       /* a heartbeat was answered since table_job was set */
    int table_checks, table_misses;
} Scripted;

static Scripted srv;

typedef struct Req {
    Buf body;
} Req;

static enum MHD_Result respond(struct MHD_Connection *c, unsigned status, const char *body)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_MUST_COPY);
    MHD_add_response_header(r, "Content-Type", "application/json");
    /* curl tries a request again, once, when a reused connection closes unanswered:
     * with fresh connections each dropped upload is one try */
    if (srv.drop_logs)
        MHD_add_response_header(r, "Connection", "close");
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result logs(struct MHD_Connection *c, const char *url, const Buf *body)
{
    long long job = 0, rank = -1;
    sscanf(url, "/api/v1/agent/logs/%lld/%lld", &job, &rank);
    const char *off = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "offset");
    const char *run = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "run");
    if (job < 1 || job > 4 || rank != 0 || !off || !run)
        return respond(c, 400, "{\"error\": \"bad log upload\"}");
    if (srv.table_armed) {
        FILE *f = fopen(srv.table_path, "r");
        char text[16384] = "";
        if (f) {
            text[fread(text, 1, sizeof(text) - 1, f)] = '\0';
            fclose(f);
        }
        srv.table_checks++;
        srv.table_misses += !strstr(text, srv.table_job);
    }
    size_t offset = strtoull(off, NULL, 10);
    Buf *held = &srv.log[job - 1];
    char reply[64];
    if (offset > held->len) {
        srv.conflicts++;
        snprintf(reply, sizeof(reply), "{\"size\": %zu}", held->len);
        return respond(c, 409, reply);
    }
    if (offset + body->len > held->len)
        buf_append(held, buf_str(body) + (held->len - offset), offset + body->len - held->len);
    snprintf(reply, sizeof(reply), "{\"size\": %zu}", held->len);
    return respond(c, 200, reply);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
    Req *rq = *con_cls;
    if (!rq) {
        *con_cls = calloc(1, sizeof(Req));
        return *con_cls ? MHD_YES : MHD_NO;
    }
    if (*upload_data_size) {
        buf_append(&rq->body, upload_data, *upload_data_size);
        *upload_data_size = 0;
        return MHD_YES;
    }
    pthread_mutex_lock(&srv.lock);
    enum MHD_Result ret;
    const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    if (!auth || strcmp(auth, "Bearer " TOKEN)) {
        srv.unauthorized++;
        ret = respond(c, 401, "{\"error\": \"no such token\"}");
    } else if (!strcmp(method, "POST") && !strcmp(url, "/api/v1/agent/heartbeat")) {
        json_decref(srv.last);
        srv.last = json_loadb(buf_str(&rq->body), rq->body.len, 0, NULL);
        srv.heartbeats++;
        srv.table_armed = srv.table_job != NULL;
        ret = srv.heartbeat_status == 200
                  ? respond(c, 200, srv.reply)
                  : respond(c, (unsigned)srv.heartbeat_status, "{\"error\": \"try later\"}");
    } else if (!strcmp(method, "POST") && !strncmp(url, "/api/v1/agent/logs/", 19)) {
        if (srv.drop_logs) {
            srv.drops++;
            ret = MHD_NO; /* the connection closes: to the agent, the server is away */
        } else {
            ret = logs(c, url, &rq->body);
        }
    } else {
        ret = respond(c, 404, "{\"error\": \"no such route\"}");
    }
    pthread_mutex_unlock(&srv.lock);
    return ret;
}

static void on_done(void *cls, struct MHD_Connection *c, void **con_cls,
                    enum MHD_RequestTerminationCode toe)
{
    Req *rq = *con_cls;
    if (rq) {
        buf_free(&rq->body);
        free(rq);
    }
    *con_cls = NULL;
}

static void srv_reply(const char *json)
{
    pthread_mutex_lock(&srv.lock);
    free(srv.reply);
    srv.reply = strdup(json);
    pthread_mutex_unlock(&srv.lock);
}

/* ---- driving the agent ---- */

static char dir[] = "/tmp/gpuorch-loop-XXXXXX";

static int setup(void **state)
{
    if (!mkdtemp(dir))
        return -1;
    /* run as root, the agent runs workers as nobody: they must reach their checkpoint
     * directories under it (launch.h) */
    if (chmod(dir, 0755) < 0)
        return -1;
    setenv("GPUORCH_SIM_MIG_DELAY_MS", "0", 1);
    pthread_mutex_init(&srv.lock, NULL);
    srv.heartbeat_status = 200;
    srv.reply = strdup("{\"heartbeat_ms\": 100}");
    struct sockaddr_in loopback = {.sin_family = AF_INET,
                                   .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    srv.d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, 0, NULL, NULL,
                             on_request, NULL, MHD_OPTION_NOTIFY_COMPLETED, on_done, NULL,
                             MHD_OPTION_SOCK_ADDR, &loopback, MHD_OPTION_END);
    if (!srv.d)
        return -1;
    srv.port = MHD_get_daemon_info(srv.d, MHD_DAEMON_INFO_BIND_PORT)->port;
    return 0;
}

static pid_t review_pids[2]; /* jobs 3 and 4: killed here should their test fail */

static int teardown(void **state)
{
    for (size_t i = 0; i < 2; i++)
        if (review_pids[i] > 1)
            kill(-review_pids[i], SIGKILL);
    MHD_stop_daemon(srv.d);
    json_decref(srv.last);
    free(srv.reply);
    for (size_t i = 0; i < 4; i++)
        buf_free(&srv.log[i]);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static Agent *open_agent_in(const char *sub)
{
    char url[64], state_dir[256];
    snprintf(url, sizeof(url), "http://127.0.0.1:%u", srv.port);
    snprintf(state_dir, sizeof(state_dir), "%s/%s", dir, sub);
    AgentOptions o = {.server_url = url,
                      .token = TOKEN,
                      .node = "a100-0",
                      .address = "10.1.2.3",
                      .gpus = "sim:A100-80GB:2",
                      .state_dir = state_dir};
    Agent *a = NULL;
    Buf err = {0};
    if (agent_open(&o, &a, &err) < 0)
        fail_msg("agent_open: %s", buf_str(&err));
    buf_free(&err);
    return a;
}

static Agent *open_agent(void)
{
    return open_agent_in("agent");
}

/* The last heartbeat's worker (job, rank 0), or NULL. A new reference. */
static json_t *reported(int64_t job)
{
    pthread_mutex_lock(&srv.lock);
    json_t *found = NULL;
    size_t i;
    json_t *w;
    json_array_foreach(json_object_get(srv.last, "workers"), i, w)
    {
        if (json_integer_value(json_object_get(w, "job")) == job)
            found = json_incref(w);
    }
    pthread_mutex_unlock(&srv.lock);
    return found;
}

static bool reported_state(int64_t job, const char *state)
{
    json_t *w = reported(job);
    bool ok = w && !strcmp(json_string_value(json_object_get(w, "state")), state);
    json_decref(w);
    return ok;
}

static bool reported_none(int64_t job)
{
    json_t *w = reported(job);
    json_decref(w);
    return w == NULL;
}

static bool log_has(int64_t job, const char *s)
{
    pthread_mutex_lock(&srv.lock);
    bool ok = strstr(buf_str(&srv.log[job - 1]), s) != NULL;
    pthread_mutex_unlock(&srv.lock);
    return ok;
}

/* Tick the agent until the condition holds (or 10 s pass): returns whether it held. */
#define TICK_UNTIL(a, cond)                                                                        \
    ({                                                                                             \
        bool held_ = false;                                                                        \
        for (int t_ = 0; t_ < 1000 && !(held_ = (cond)); t_++) {                                   \
            agent_tick(a);                                                                         \
            struct timespec ts_ = {0, 10 * 1000000L};                                              \
            nanosleep(&ts_, NULL);                                                                 \
        }                                                                                          \
        held_;                                                                                     \
    })

static void tick_for(Agent *a, int ms)
{
    for (int t = 0; t < ms; t += 10) {
        agent_tick(a);
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
}

/* The two assignments, up to their "stop" field. */
static const char *W1 =
    "{\"job\": 1, \"run\": 1, \"rank\": 0, \"world_size\": 1, \"gpus\": [{\"index\": 1, \"mig\": "
    "{\"profile\": \"1g.10gb\", \"start\": 0}}], \"command\": [\"/bin/sh\", \"-c\", \"echo "
    "cvd=$CUDA_VISIBLE_DEVICES; while :; do echo tick; sleep 0.05; done\"], \"grace_ms\": 2000, ";
static const char *W2 =
    "{\"job\": 2, \"run\": 1, \"rank\": 0, \"gpus\": [{\"index\": 0}], \"grace_ms\": 20000, "
    "\"command\": [\"/bin/sh\", \"-c\", \"trap 'echo $GPUORCH_CHECKPOINT_DIR/ckpt-5 > "
    "$GPUORCH_CHECKPOINT_DIR/L.tmp; mv $GPUORCH_CHECKPOINT_DIR/L.tmp "
    "$GPUORCH_CHECKPOINT_DIR/LATEST' USR1; trap 'exit 143' TERM; echo ready; while :; do sleep "
    "0.05; done\"], ";
static const char *MIG1 =
    "[{\"index\": 1, \"layout\": [{\"profile\": \"1g.10gb\", \"start\": 0}]}]";

static void reply(const char *mig, const char *w1_stop, const char *w2_stop, const char *forget)
{
    Buf b = {0}, w = {0};
    if (w1_stop)
        buf_printf(&w, "%s\"stop\": %s}", W1, w1_stop);
    if (w2_stop) {
        if (w.len)
            buf_puts(&w, ", ");
        buf_printf(&w, "%s\"stop\": %s}", W2, w2_stop);
    }
    buf_printf(&b, "{\"heartbeat_ms\": 100, \"mig\": %s, \"workers\": [%s], \"forget\": %s}", mig,
               buf_str(&w), forget ? forget : "[]");
    srv_reply(buf_str(&b));
    buf_free(&b);
    buf_free(&w);
}

static void test_loop(void **state)
{
    Agent *a = open_agent();
    /* the first heartbeat: the node and its GPUs, no workers */
    assert_true(TICK_UNTIL(a, srv.heartbeats > 0));
    pthread_mutex_lock(&srv.lock);
    json_t *hb = json_incref(srv.last);
    pthread_mutex_unlock(&srv.lock);
    assert_string_equal(json_string_value(json_object_get(hb, "node")), "a100-0");
    assert_string_equal(json_string_value(json_object_get(hb, "address")), "10.1.2.3");
    const char *boot1 = json_string_value(json_object_get(hb, "boot_id"));
    assert_true(boot1 && strlen(boot1) >= 32);
    char boot_first[64];
    snprintf(boot_first, sizeof(boot_first), "%s", boot1);
    assert_int_equal(json_array_size(json_object_get(hb, "gpus")), 2);
    assert_int_equal(json_array_size(json_object_get(hb, "workers")), 0);
    json_decref(hb);
    assert_int_equal(srv.unauthorized, 0);

    /* a MIG layout and two workers: the MIG one sees its instance's UUID */
    reply(MIG1, "null", "null", NULL);
    assert_true(TICK_UNTIL(a, reported_state(1, "running") && reported_state(2, "running")));
    assert_true(TICK_UNTIL(a, log_has(1, "cvd=MIG-") && log_has(2, "ready")));
    pthread_mutex_lock(&srv.lock);
    json_t *g1 = json_array_get(json_object_get(srv.last, "gpus"), 1);
    assert_true(json_is_true(json_object_get(g1, "mig_enabled")));
    const char *mig_uuid =
        json_string_value(json_object_get(json_array_get(json_object_get(g1, "mig"), 0), "uuid"));
    char want[128];
    snprintf(want, sizeof(want), "cvd=%s\n", mig_uuid);
    assert_non_null(strstr(buf_str(&srv.log[0]), want));
    pthread_mutex_unlock(&srv.lock);

    /* a layout that would destroy the busy instance is refused: nothing changes */
    reply("[{\"index\": 1, \"layout\": [{\"profile\": \"2g.20gb\", \"start\": 0}]}]", "null",
          "null", NULL);
    tick_for(a, 400);
    pthread_mutex_lock(&srv.lock);
    g1 = json_array_get(json_object_get(srv.last, "gpus"), 1);
    assert_string_equal(json_string_value(json_object_get(
                            json_array_get(json_object_get(g1, "mig"), 0), "profile")),
                        "1g.10gb");
    pthread_mutex_unlock(&srv.lock);
    assert_true(reported_state(1, "running"));

    /* preempt job 2: it checkpoints, exits 143 well before its 20 s grace, and is
     * reported with its checkpoint; the server forgets it */
    reply(MIG1, "null", "\"preempt\"", NULL);
    int64_t t0 = agent_mono_ms();
    assert_true(TICK_UNTIL(a, reported_state(2, "exited")));
    assert_true(agent_mono_ms() - t0 < 5000);
    json_t *w2 = reported(2);
    assert_int_equal(json_integer_value(json_object_get(w2, "exit_code")), 143);
    assert_non_null(strstr(json_string_value(json_object_get(w2, "checkpoint")), "/2/ckpt-5"));
    json_decref(w2);
    reply(MIG1, "null", NULL, "[{\"job\": 2, \"run\": 1, \"rank\": 0}]");
    assert_true(TICK_UNTIL(a, reported_none(2)));

    /* the server loses job 1's log: the next upload gets a 409 and resends from 0 */
    pthread_mutex_lock(&srv.lock);
    buf_reset(&srv.log[0]);
    pthread_mutex_unlock(&srv.lock);
    assert_true(TICK_UNTIL(a, srv.conflicts > 0 && log_has(1, "cvd=MIG-")));

    /* the server answers 503 for a while: the worker keeps running */
    pthread_mutex_lock(&srv.lock);
    srv.heartbeat_status = 503;
    pthread_mutex_unlock(&srv.lock);
    json_t *w1 = reported(1);
    pid_t pid = (pid_t)json_integer_value(json_object_get(w1, "pid"));
    json_decref(w1);
    tick_for(a, 800);
    assert_int_equal(kill(pid, 0), 0);
    pthread_mutex_lock(&srv.lock);
    srv.heartbeat_status = 200;
    int before = srv.heartbeats;
    pthread_mutex_unlock(&srv.lock);
    assert_true(TICK_UNTIL(a, srv.heartbeats > before + 1));

    /* the agent restarts: the worker is taken back, under a new boot id */
    agent_close(a);
    assert_int_equal(kill(pid, 0), 0);
    a = open_agent();
    before = srv.heartbeats;
    assert_true(TICK_UNTIL(a, srv.heartbeats > before));
    pthread_mutex_lock(&srv.lock);
    assert_string_not_equal(json_string_value(json_object_get(srv.last, "boot_id")), boot_first);
    pthread_mutex_unlock(&srv.lock);
    w1 = reported(1);
    assert_string_equal(json_string_value(json_object_get(w1, "state")), "running");
    assert_int_equal(json_integer_value(json_object_get(w1, "pid")), pid);
    json_decref(w1);

    /* the server stops listing it: it is stopped, and its end reported as it was, though
     * the agent that started it is gone: its keeper recorded it */
    reply("[]", NULL, NULL, NULL);
    assert_true(TICK_UNTIL(a, reported_state(1, "exited")));
    w1 = reported(1);
    assert_true(json_is_null(json_object_get(w1, "exit_code")));
    assert_int_equal(json_integer_value(json_object_get(w1, "signal")), SIGTERM);
    assert_null(json_object_get(w1, "error"));
    json_decref(w1);
    for (int i = 0; i < 200 && kill(pid, 0) == 0; i++) /* reaped by its keeper */
        usleep(10000);
    assert_int_equal(kill(pid, 0), -1);
    /* with no MIG wanted and the instance idle, GPU 1 goes back to MIG off */
    assert_true(
        TICK_UNTIL(a, ({
                       pthread_mutex_lock(&srv.lock);
                       bool off_ = json_is_false(json_object_get(
                           json_array_get(json_object_get(srv.last, "gpus"), 1), "mig_enabled"));
                       pthread_mutex_unlock(&srv.lock);
                       off_;
                   })));

    /* everything job 1 wrote reached the server, once */
    char path[512];
    snprintf(path, sizeof(path), "%s/agent/logs/1-0.log", dir);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    Buf file = {0};
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
        buf_append(&file, chunk, n);
    fclose(f);
    assert_true(TICK_UNTIL(a, ({
                               pthread_mutex_lock(&srv.lock);
                               bool same_ = !strcmp(buf_str(&srv.log[0]), buf_str(&file));
                               pthread_mutex_unlock(&srv.lock);
                               same_;
                           })));
    buf_free(&file);
    agent_close(a);
}

/* A second agent on the same state directory is refused; a bad server URL is named. */
static void test_one_agent_per_dir(void **state)
{
    Agent *a = open_agent();
    char url[64], state_dir[256];
    snprintf(url, sizeof(url), "http://127.0.0.1:%u", srv.port);
    snprintf(state_dir, sizeof(state_dir), "%s/agent", dir);
    AgentOptions o = {.server_url = url,
                      .token = TOKEN,
                      .node = "a100-0",
                      .gpus = "sim:A100-80GB:2",
                      .state_dir = state_dir};
    Agent *b = NULL;
    Buf err = {0};
    assert_int_equal(agent_open(&o, &b, &err), -EBUSY);
    assert_non_null(strstr(buf_str(&err), "another agent is running with the state directory"));
    assert_null(b);
    agent_close(a);
    /* once it is gone, the directory is free again; a bad URL is named */
    buf_reset(&err);
    o.server_url = "ftp://x";
    assert_int_equal(agent_open(&o, &b, &err), -EINVAL);
    assert_string_equal(
        buf_str(&err),
        "--server 'ftp://x': expected http://HOST:PORT (or up to 8, comma-separated)");
    buf_free(&err);
}

/* Jobs 3 and 4 of the review's tests: both write a line every 10 ms, so each round has
 * log bytes to send; job 4 ignores SIGTERM. */
static const char *W3 = "{\"job\": 3, \"run\": 1, \"rank\": 0, \"grace_ms\": 2000, \"command\": "
                        "[\"/bin/sh\", \"-c\", \"while :; do echo three; sleep 0.01; done\"]";
static const char *W4 = "{\"job\": 4, \"run\": 1, \"rank\": 0, \"command\": [\"/bin/sh\", \"-c\", "
                        "\"trap '' TERM; while :; do echo four; sleep 0.01; done\"]";

/* w3 and w4: the rest of each entry ("" when not listed). */
static void reply34(const char *w3, const char *w4, const char *forget)
{
    Buf b = {0};
    buf_printf(&b, "{\"heartbeat_ms\": 100, \"workers\": [");
    if (*w3)
        buf_printf(&b, "%s%s}", W3, w3);
    if (*w4)
        buf_printf(&b, "%s%s%s}", *w3 ? ", " : "", W4, w4);
    buf_printf(&b, "], \"forget\": %s}", forget ? forget : "[]");
    srv_reply(buf_str(&b));
    buf_free(&b);
}

static int srv_int(const int *v)
{
    pthread_mutex_lock(&srv.lock);
    int x = *v;
    pthread_mutex_unlock(&srv.lock);
    return x;
}

static void test_review_fixes(void **state)
{
    char table[512];
    snprintf(table, sizeof(table), "%s/agent-review/workers.json", dir);
    Agent *a = open_agent_in("agent-review");
    reply34(", \"stop\": null", "", NULL);
    assert_true(TICK_UNTIL(a, reported_state(3, "running") && log_has(3, "three")));

    /* job 4 arrives: when the round's first upload (job 3's) reaches the server, the
     * table on disk already holds job 4 */
    pthread_mutex_lock(&srv.lock);
    srv.table_path = table;
    srv.table_job = "\"job\": 4";
    pthread_mutex_unlock(&srv.lock);
    reply34(", \"stop\": null", ", \"grace_ms\": 30000, \"stop\": null", NULL);
    assert_true(TICK_UNTIL(a, srv_int(&srv.table_checks) > 0));
    pthread_mutex_lock(&srv.lock);
    assert_int_equal(srv.table_misses, 0);
    srv.table_job = NULL;
    srv.table_armed = false;
    pthread_mutex_unlock(&srv.lock);
    assert_true(TICK_UNTIL(a, reported_state(4, "running") && log_has(4, "four")));
    for (int64_t job = 3; job <= 4; job++) {
        json_t *w = reported(job);
        review_pids[job - 3] = (pid_t)json_integer_value(json_object_get(w, "pid"));
        json_decref(w);
    }

    /* log uploads cannot reach the server: one try per round, not one per worker */
    pthread_mutex_lock(&srv.lock);
    srv.drop_logs = true;
    int hb0 = srv.heartbeats;
    pthread_mutex_unlock(&srv.lock);
    assert_true(TICK_UNTIL(a, srv_int(&srv.heartbeats) >= hb0 + 6));
    pthread_mutex_lock(&srv.lock);
    int rounds = srv.heartbeats - hb0, drops = srv.drops;
    srv.drop_logs = false;
    pthread_mutex_unlock(&srv.lock);
    assert_true(drops >= rounds - 1);
    assert_true(drops <= rounds);

    /* job 4 (deaf to SIGTERM) is cancelled with 30 s of grace; a later reply cuts the
     * grace to 100 ms: it is killed now, not in 30 s */
    reply34(", \"stop\": null", ", \"grace_ms\": 30000, \"stop\": \"cancel\"", NULL);
    tick_for(a, 500);
    assert_true(reported_state(4, "running"));
    int64_t t0 = agent_mono_ms();
    reply34(", \"stop\": null", ", \"grace_ms\": 100, \"stop\": \"cancel\"", NULL);
    assert_true(TICK_UNTIL(a, reported_state(4, "exited")));
    assert_true(agent_mono_ms() - t0 < 5000);
    json_t *w4 = reported(4);
    assert_int_equal(json_integer_value(json_object_get(w4, "signal")), SIGKILL);
    json_decref(w4);

    reply34(", \"stop\": \"cancel\"", "", "[{\"job\": 4, \"run\": 1, \"rank\": 0}]");
    assert_true(TICK_UNTIL(a, reported_state(3, "exited") && reported_none(4)));
    reply34("", "", "[{\"job\": 3, \"run\": 1, \"rank\": 0}]");
    assert_true(TICK_UNTIL(a, reported_none(3)));
    agent_close(a);
    review_pids[0] = review_pids[1] = 0; /* reaped: the numbers may be reused */
}

/* SIGTERM's shutdown: the worker that checkpoints gets the checkpoint signal, writes
 * LATEST and stops; the one that does not gets SIGTERM (not the checkpoint signal, which
 * would kill it); one the server assigns meanwhile never starts. The heartbeats say
 * "shutdown", each stopped worker is reported with "shutdown": true, and the agent is
 * done once a heartbeat reported every worker ended. */
static const char *SA = "{\"job\": 1, \"run\": 7, \"rank\": 0, \"gpus\": [{\"index\": 0}], "
                        "\"grace_ms\": 20000, \"checkpoints\": true, \"command\": [\"/bin/sh\", "
                        "\"-c\", \"trap 'echo $GPUORCH_CHECKPOINT_DIR/ckpt-9 > "
                        "$GPUORCH_CHECKPOINT_DIR/L.tmp; mv $GPUORCH_CHECKPOINT_DIR/L.tmp "
                        "$GPUORCH_CHECKPOINT_DIR/LATEST' USR1; trap 'exit 143' TERM; while :; "
                        "do sleep 0.05; done\"], \"stop\": null}";
static const char *SB = "{\"job\": 2, \"run\": 7, \"rank\": 0, \"gpus\": [{\"index\": 1}], "
                        "\"grace_ms\": 20000, \"command\": [\"/bin/sh\", \"-c\", \"trap 'exit 0' "
                        "TERM; while :; do sleep 0.05; done\"], \"stop\": null}";
static const char *SC = "{\"job\": 3, \"run\": 7, \"rank\": 0, \"gpus\": [], \"command\": "
                        "[\"/bin/sh\", \"-c\", \"sleep 30\"], \"stop\": null}";

static void test_shutdown(void **state)
{
    Agent *a = open_agent_in("shutdown");
    Buf b = {0};
    buf_printf(&b, "{\"heartbeat_ms\": 100, \"workers\": [%s, %s]}", SA, SB);
    srv_reply(buf_str(&b));
    assert_true(TICK_UNTIL(a, reported_state(1, "running") && reported_state(2, "running")));
    assert_false(agent_shutdown_done(a));
    agent_shutdown(a);
    buf_reset(&b);
    buf_printf(&b, "{\"heartbeat_ms\": 100, \"workers\": [%s, %s, %s]}", SA, SB, SC);
    srv_reply(buf_str(&b));
    int64_t t0 = agent_mono_ms();
    assert_true(TICK_UNTIL(a, agent_shutdown_done(a)));
    assert_true(agent_mono_ms() - t0 < 5000); /* neither waited out its 20 s grace */
    pthread_mutex_lock(&srv.lock);
    assert_true(json_is_true(json_object_get(srv.last, "shutdown")));
    pthread_mutex_unlock(&srv.lock);
    json_t *wa = reported(1), *wb = reported(2);
    assert_string_equal(json_string_value(json_object_get(wa, "state")), "exited");
    assert_int_equal(json_integer_value(json_object_get(wa, "exit_code")), 143);
    assert_true(json_is_true(json_object_get(wa, "shutdown")));
    const char *ck = json_string_value(json_object_get(wa, "checkpoint"));
    assert_non_null(ck);
    assert_non_null(strstr(ck, "/1/ckpt-9"));
    assert_string_equal(json_string_value(json_object_get(wb, "state")), "exited");
    assert_int_equal(json_integer_value(json_object_get(wb, "exit_code")), 0);
    assert_int_equal(json_integer_value(json_object_get(wb, "signal")), 0);
    assert_true(json_is_true(json_object_get(wb, "shutdown")));
    assert_null(json_object_get(wb, "checkpoint"));
    json_decref(wa);
    json_decref(wb);
    assert_true(reported_none(3));
    assert_int_equal(agent_worker_count(a, WK_PENDING), 0);
    assert_int_equal(agent_worker_count(a, WK_RUNNING), 0);
    agent_close(a);

    /* the table keeps the shutdown's ends: a later agent reports them so */
    a = open_agent_in("shutdown");
    srv_reply("{\"heartbeat_ms\": 100}");
    int before = srv_int(&srv.heartbeats);
    assert_true(TICK_UNTIL(a, srv_int(&srv.heartbeats) > before + 1));
    wa = reported(1);
    assert_true(json_is_true(json_object_get(wa, "shutdown")));
    assert_int_equal(json_integer_value(json_object_get(wa, "exit_code")), 143);
    json_decref(wa);
    pthread_mutex_lock(&srv.lock);
    assert_null(json_object_get(srv.last, "shutdown"));
    pthread_mutex_unlock(&srv.lock);
    agent_close(a);
    buf_free(&b);
}

/* A heartbeat refused (4xx) is asked again at the heartbeat's pace, not backed off like
 * a server away (5xx); a shutdown the server refuses is done at once. */
static void test_refused(void **state)
{
    Agent *a = open_agent_in("refused");
    srv_reply("{\"heartbeat_ms\": 100}");
    int before = srv_int(&srv.heartbeats);
    assert_true(TICK_UNTIL(a, srv_int(&srv.heartbeats) > before)); /* heartbeat_ms 100 learned */
    pthread_mutex_lock(&srv.lock);
    srv.heartbeat_status = 409;
    pthread_mutex_unlock(&srv.lock);
    before = srv_int(&srv.heartbeats);
    tick_for(a, 1500);
    int refused = srv_int(&srv.heartbeats) - before;
    pthread_mutex_lock(&srv.lock);
    srv.heartbeat_status = 503;
    pthread_mutex_unlock(&srv.lock);
    before = srv_int(&srv.heartbeats);
    tick_for(a, 1500);
    int away = srv_int(&srv.heartbeats) - before;
    /* every 100 ms against 0.5 s, then 1 s, of back-off */
    assert_true(refused >= 8);
    assert_true(away <= 3);
    pthread_mutex_lock(&srv.lock);
    srv.heartbeat_status = 409;
    pthread_mutex_unlock(&srv.lock);
    agent_shutdown(a);
    int64_t t0 = agent_mono_ms();
    assert_true(TICK_UNTIL(a, agent_shutdown_done(a)));
    assert_true(agent_mono_ms() - t0 < AGENT_SHUTDOWN_REPORT_MS / 2);
    pthread_mutex_lock(&srv.lock);
    srv.heartbeat_status = 200;
    pthread_mutex_unlock(&srv.lock);
    agent_close(a);
}

/* Started with stdin, stdout and stderr closed, the agent puts /dev/null there, so no
 * file of its own (the lock, a worker's log) lands on them. In a child process. */
static void test_std_fds_closed(void **state)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(0);
        close(1);
        close(2);
        char url[64], state_dir[256];
        snprintf(url, sizeof(url), "http://127.0.0.1:%u", srv.port);
        snprintf(state_dir, sizeof(state_dir), "%s/agent-fds", dir);
        AgentOptions o = {.server_url = url,
                          .token = TOKEN,
                          .node = "a100-0",
                          .gpus = "sim:A100-80GB:1",
                          .state_dir = state_dir};
        Agent *a = NULL;
        Buf err = {0};
        if (agent_open(&o, &a, &err) < 0)
            _exit(10);
        int bad = 0;
        for (int fd = 0; fd <= 2; fd++) {
            char link[64], target[256];
            snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
            ssize_t n = readlink(link, target, sizeof(target) - 1);
            target[n > 0 ? n : 0] = '\0';
            bad += strcmp(target, "/dev/null") != 0;
        }
        agent_close(a);
        _exit(bad ? 11 : 0);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_loop),         cmocka_unit_test(test_one_agent_per_dir),
        cmocka_unit_test(test_review_fixes), cmocka_unit_test(test_std_fds_closed),
        cmocka_unit_test(test_shutdown),     cmocka_unit_test(test_refused),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
