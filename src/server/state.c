/* state.c: the server's model: loading it (cluster, store, jobs, the allocation of
 * the running ones), the requests that change it (submit, cancel, priority, team
 * quotas), queue positions, and the scheduler thread that runs the core's cycle on the
 * real clock and watches for silent nodes. The job lifecycle after a placement lives in
 * lifecycle.c; the agents' side in api_agent.c.
 *
 * Durability: a request's changes are written to the store before the reply. A
 * submission is written before it enters the in-memory queue and without the lock held,
 * so that concurrent submissions share one commit (the store group-commits them). */
#include "server/state.h"

#include "core/admit.h"
#include "core/mix.h"
#include "server/checkpoint.h"
#include "server/metering.h"
#include "server/nodespan.h"
#include "server/placement_json.h"
#include "server/provider.h"
#include "server/utilization.h"
#include "spec/job_json.h"
#include "spec/spec.h"
#include "util/log.h"
#include "util/macro.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_CYCLE_MS 1000
/* Slurm's MinJobAge (300 s), and a bound on the ended jobs kept that a burst of short
 * jobs cannot pass (Slurm's MaxJobCount is 10,000 in all) */
#define DEFAULT_JOB_RETENTION_MS (5 * 60 * 1000)
#define DEFAULT_MAX_ENDED_JOBS   10000
/* Kicks closer together than this share one cycle: a burst of submissions is placed
 * in one pass over the queue. */
#define MIN_CYCLE_GAP_MS 20
/* how often a leader asks the database whether it still leads */
#define LEAD_CHECK_MS 1000

static const char *const state_names[JOB_STATE_COUNT] = {
    "pending", "starting", "running", "stopping", "succeeded", "failed", "cancelled"};

const char *job_state_name(JobState st)
{
    return (unsigned)st < JOB_STATE_COUNT ? state_names[st] : "?";
}

int job_state_from_name(const char *name)
{
    for (int i = 0; i < JOB_STATE_COUNT; i++)
        if (!strcmp(name, state_names[i]))
            return i;
    return -1;
}

const char *node_liveness_name(NodeLiveness l)
{
    static const char *const names[NODE_LIVENESS_COUNT] = {"unknown", "ready", "lost", "mismatched",
                                                           "down"};
    return (unsigned)l < NODE_LIVENESS_COUNT ? names[l] : "unknown";
}

int64_t server_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t server_mono_ms(void)
{
    return mono_ns() / 1000000;
}

ServerJob *server_job(Server *s, int64_t id)
{
    return id > 0 && (size_t)id < s->jobs_cap ? s->jobs[id] : NULL;
}

void server_diverge(Server *s, int err)
{
    int none = 0;
    atomic_compare_exchange_strong(&s->diverged, &none, err < 0 ? err : -EIO);
}

int server_diverged(const Server *s)
{
    return atomic_load(&s->diverged);
}

void server_kick(Server *s)
{
    s->dirty = true;
    pthread_cond_signal(&s->wake);
}

static void server_job_free(ServerJob *j);

static int job_table_put(Server *s, ServerJob *j)
{
    size_t need = (size_t)j->st.id + 1;
    if (need > s->jobs_cap) {
        size_t cap = s->jobs_cap ? s->jobs_cap : 1024;
        while (cap < need)
            cap *= 2;
        ServerJob **n = realloc(s->jobs, cap * sizeof(*n));
        if (!n)
            return -ENOMEM;
        memset(n + s->jobs_cap, 0, (cap - s->jobs_cap) * sizeof(*n));
        s->jobs = n;
        s->jobs_cap = cap;
    }
    if (GROW(s->resident, s->resident_cap, s->n_resident + 1) < 0)
        return -ENOMEM;
    j->resident = s->n_resident;
    s->resident[s->n_resident++] = j;
    s->jobs[j->st.id] = j;
    if (j->st.id > s->max_id)
        s->max_id = j->st.id;
    return 0;
}

/* Out of the table and the resident set (the caller frees it). */
static void job_table_drop(Server *s, ServerJob *j)
{
    s->jobs[j->st.id] = NULL;
    ServerJob *last = s->resident[--s->n_resident];
    s->resident[j->resident] = last;
    last->resident = j->resident;
}

int server_job_note_ended(Server *s, ServerJob *j)
{
    if (s->ended_head && s->ended_head * 2 >= s->n_ended) {
        /* the queue's front is used up: move the rest down */
        memmove(s->ended, s->ended + s->ended_head,
                (s->n_ended - s->ended_head) * sizeof(*s->ended));
        s->n_ended -= s->ended_head;
        s->ended_head = 0;
    }
    if (GROW(s->ended, s->ended_cap, s->n_ended + 1) < 0)
        return -ENOMEM; /* it stays in memory: only a bound is missed */
    s->ended[s->n_ended++] = j;
    return 0;
}

void server_evict_ended(Server *s, int64_t now_ms)
{
    while (s->ended_head < s->n_ended) {
        ServerJob *j = s->ended[s->ended_head];
        size_t kept = s->n_ended - s->ended_head;
        bool old = j->st.end_ms + s->opt.job_retention_ms <= now_ms;
        if (!old && (int64_t)kept <= s->opt.max_ended_jobs)
            break;
        /* listed in a change not written yet; still in a bucket of the core's queue (a
         * cancelled pending job stays there until the queue is next walked, sched.c); or
         * an engine's record points at it (the Kubernetes engine keeps its pods'
         * groups): it stays, and so do those after it */
        if (j->in_changes || j->sj.listed || j->ext)
            break;
        s->ended_head++;
        job_table_drop(s, j);
        server_job_free(j);
    }
}

static void server_job_free(ServerJob *j)
{
    if (!j)
        return;
    store_job_free(&j->st);
    job_spec_free(&j->spec);
    placement_free(&j->sj.pl);
    placement_free(&j->sj.moved_from);
    life_job_free(&j->life);
    checkpoint_gang_free(j->ckpt);
    free(j->measure);
    free(j);
}

/* GPU-equivalents a request asks for: on the model where it costs least. */
static double ask_equivalents(const Cluster *c, const Request *r)
{
    uint32_t least = UINT32_MAX;
    for (size_t m = 0; m < c->n_models; m++)
        if (r->models & (1ull << m)) {
            uint32_t u = request_units_on(c, r, (unsigned)m, c->models[m].m.mig_slots > 0);
            least = MIN(least, u);
        }
    return least == UINT32_MAX ? 0 : (double)least * r->workers / GPU_UNITS;
}

/* The placer's score cache (a score per node and shape, kept until the node changes)
 * holds every shape seen: a larger one, empty, when a new shape does not fit. Without
 * it every placement scores every node again (on 5,000 nodes, 8 times the cost). Before
 * the placer is set up (the jobs loading) there is nothing to fit. */
static void score_cache_fit(Server *s)
{
    if (!s->ctx.policy || s->n_shapes <= s->cache.n_shapes)
        return;
    size_t want = s->cache.n_shapes ? s->cache.n_shapes : 64;
    while (want < s->n_shapes)
        want *= 2;
    ScoreCache next;
    if (score_cache_init(&next, s->c->n_nodes, MIN(want, (size_t)SERVER_MAX_SHAPES)) < 0)
        return; /* shapes past the cache are scored afresh: slower, not wrong */
    score_cache_free(&s->cache);
    s->cache = next;
    s->ctx.cache = &s->cache;
}

/* The shape id of r: requests asking the same of a node share one, so that the
 * scheduler tries each shape once per cycle instead of every job of it. */
static int32_t shape_of(Server *s, const Request *r)
{
    for (size_t i = 0; i < s->n_shapes; i++)
        if (request_same_shape(&s->shapes[i], r))
            return (int32_t)i;
    if (s->n_shapes >= SERVER_MAX_SHAPES)
        return -1;
    s->shapes[s->n_shapes] = *r;
    s->n_shapes++;
    score_cache_fit(s);
    return (int32_t)(s->n_shapes - 1);
}

void server_job_shape(Server *s, ServerJob *j)
{
    j->sj.req.shape = shape_of(s, &j->sj.req);
    j->gpu_equivalents = ask_equivalents(s->c, &j->sj.req);
}

int server_job_size(Server *s, ServerJob *j)
{
    int r = learn_size_request(&s->learn, s->c, &j->spec, &j->sj.req);
    if (r == 1)
        server_job_shape(s, j);
    return r;
}

ServerJob *server_waiting_of_class(Server *s, const char *cls, int64_t *pos)
{
    char other[LEARN_CLASS_MAX];
    while ((size_t)*pos < s->n_resident) {
        ServerJob *j = s->resident[(*pos)++];
        if (j->st.state != JOB_PENDING || !j->sj.queued)
            continue;
        learn_class_of(&j->spec, other, sizeof(other));
        if (!strcmp(other, cls))
            return j;
    }
    return NULL;
}

int server_job_size_afresh(Server *s, ServerJob *j)
{
    Request r;
    Buf why = {0};
    int rc = request_from_job(s->c, &j->spec, &r, &why);
    buf_free(&why);
    if (rc < 0)
        return rc;
    rc = learn_size_request(&s->learn, s->c, &j->spec, &r);
    if (rc < 0)
        return rc;
    r.shape = shape_of(s, &r);
    bool same = request_same_shape(&r, &j->sj.req);
    j->sj.req = r;
    j->gpu_equivalents = ask_equivalents(s->c, &r);
    return same ? 0 : 1;
}

/* The core's view of a job, from its spec and record; -EINVAL with err when the
 * cluster cannot run it (422 at submission). A queued job is sized from what its class
 * learned; one that holds GPUs keeps what it holds until it is queued again. */
static int job_bind_core(Server *s, ServerJob *j, Buf *err)
{
    Request r;
    int rc = request_from_job(s->c, &j->spec, &r, err);
    if (rc < 0)
        return rc;
    r.shape = shape_of(s, &r);
    int team = j->spec.team ? cluster_find_team(s->c, j->spec.team) : -1;
    j->sj = (SchedJob){
        .id = (uint32_t)j->st.id,
        .req = r,
        .team = team >= 0 ? (uint32_t)team : TEAM_NONE,
        .priority = j->st.priority,
        .preemptible = j->spec.preemptible,
        .submit_ms = j->st.submit_ms,
        .estimate_ms = j->spec.duration_estimate_ms,
        .grace_ms = j->spec.checkpoint_grace_ms > 0 ? j->spec.checkpoint_grace_ms : SCHED_GRACE_MS,
        .nominated = SCHED_NONE,
        .backfill_for = SCHED_NONE,
        .last_checkpoint_ms = j->st.checkpoint_ms,
    };
    j->gpu_equivalents = ask_equivalents(s->c, &r);
    if (j->st.state == JOB_PENDING) {
        int z = server_job_size(s, j);
        if (z < 0)
            return z;
    }
    return 0;
}

/* j->spec from its stored form (st.spec_json): 0, -ENOMEM, or -EINVAL with why said. */
static int parse_stored_spec(ServerJob *j, Buf *why)
{
    JobList jl = {0};
    const char *text = j->st.spec_json ? j->st.spec_json : "";
    int r = spec_parse_jobs_yaml(text, strlen(text), "stored job", &jl, why);
    if (r == 0 && jl.n == 1) {
        job_spec_free(&j->spec);
        j->spec = jl.jobs[0];
        jl.n = 0;
    } else if (r == 0) {
        r = -EINVAL;
    }
    job_list_free(&jl);
    return r;
}

int server_job_view(Server *s, StoreJob *rec, ServerJob **ret)
{
    ServerJob *j = calloc(1, sizeof(*j));
    if (!j) {
        store_job_free(rec);
        return -ENOMEM;
    }
    j->st = *rec;
    job_spec_init(&j->spec);
    Buf why = {0};
    int r = parse_stored_spec(j, &why);
    /* what it asked, as it was bound when it was live (a cluster changed since may not
     * hold it: then it shows none) */
    Request req;
    if (r == 0 && request_from_job(s->c, &j->spec, &req, &why) == 0)
        j->gpu_equivalents = ask_equivalents(s->c, &req);
    buf_free(&why);
    j->sj.id = (uint32_t)j->st.id;
    server_job_life_init(j);
    if (r == -ENOMEM) {
        server_job_free(j);
        return -ENOMEM;
    }
    *ret = j;
    return 0;
}

void server_job_view_free(ServerJob *j)
{
    server_job_free(j);
}

ServerJob *server_job_find(Server *s, int64_t id, ServerJob **view, int *err)
{
    *view = NULL;
    *err = 0;
    ServerJob *j = server_job(s, id);
    if (j || id <= 0 || id > s->max_id)
        return j;
    pthread_mutex_unlock(&s->lock);
    StoreJob rec;
    int r = store_job_get(s->store, id, &rec);
    server_lock(s);
    if (r == -ENOENT)
        return NULL;
    if (r == 0 && (j = server_job(s, id))) {
        store_job_free(&rec); /* a submission put in memory while the store was read */
        return j;
    }
    if (r == 0 && !job_state_ended(rec.state)) {
        /* a submission being written, not in memory yet: not there until it is */
        store_job_free(&rec);
        return NULL;
    }
    if (r == 0)
        r = server_job_view(s, &rec, view);
    *err = r;
    return r < 0 ? NULL : *view;
}

int server_hold(Server *s, ServerJob *j)
{
    if (GROW(s->holding, s->holding_cap, s->n_holding + 1) < 0)
        return -ENOMEM;
    s->holding[s->n_holding++] = j;
    return 0;
}

void server_unhold(Server *s, ServerJob *j)
{
    for (size_t i = 0; i < s->n_holding; i++)
        if (s->holding[i] == j) {
            s->holding[i] = s->holding[--s->n_holding];
            return;
        }
}

static void *sched_main(void *arg);

/* ---- loading ---- */

typedef struct LoadCtx {
    Server *s;
    Buf *err;
    size_t n_loaded, n_bad;
} LoadCtx;

/* A job that held GPUs when the server stopped: take its allocation back, so nothing
 * else lands there, and wait for its agents to say how it is doing. */
static int restore_allocation(Server *s, ServerJob *j, Buf *why)
{
    int r = placement_from_json(s->c, j->st.placement_json ? j->st.placement_json : "[]", &j->sj.pl,
                                why);
    if (r < 0)
        return r;
    j->life.workers = calloc(j->sj.pl.n_workers ? j->sj.pl.n_workers : 1, sizeof(*j->life.workers));
    if (!j->life.workers)
        return -ENOMEM;
    j->life.n_workers = j->sj.pl.n_workers;
    uint64_t units = 0;
    for (size_t w = 0; w < j->sj.pl.n_workers; w++) {
        const WorkerAlloc *wa = &j->sj.pl.workers[w];
        cluster_apply_worker(s->c, wa);
        units += worker_units(s->c, wa);
        j->life.workers[w] = (LifeWorker){
            .node = wa->node,
            .run = j->st.run,
            .state = j->st.state == JOB_RUNNING ? LIFE_WORKER_RUNNING : LIFE_WORKER_ASSIGNED,
            .start_ms = -1};
    }
    j->sj.running = true;
    j->sj.units = (double)units;
    j->sj.run_start_ms = j->st.start_ms > 0 ? j->st.start_ms : server_now_ms();
    j->pl_from_ms = j->sj.run_start_ms;
    j->gpu_equivalents = (double)units / GPU_UNITS;
    j->master_port = (uint16_t)(20000 + j->st.id % 30000);
    return server_hold(s, j);
}

/* Why a job was stopping, from its events: a cancel wins over a failure, which wins
 * over a preemption, a lost node or a spot notice (all three requeue it). */
static int last_event(void *arg, int64_t t_ms, const char *type, const char *detail)
{
    uint8_t *mode = arg;
    if (!strcmp(type, "cancel"))
        *mode = LIFE_STOP_CANCEL;
    else if (!strcmp(type, "fail") && *mode != LIFE_STOP_CANCEL)
        *mode = LIFE_STOP_TEARDOWN;
    return 0;
}

static int load_job(void *arg, StoreJob *sjob)
{
    LoadCtx *lc = arg;
    Server *s = lc->s;
    ServerJob *j = calloc(1, sizeof(*j));
    if (!j) {
        store_job_free(sjob);
        return -ENOMEM;
    }
    j->st = *sjob;
    job_spec_init(&j->spec);
    Buf why = {0};
    int r = parse_stored_spec(j, &why);
    if (r == 0)
        r = job_bind_core(s, j, &why);
    if (r == -ENOMEM) {
        buf_free(&why);
        server_job_free(j);
        return r;
    }
    server_job_life_init(j);
    if (r == 0 && !job_state_ended(j->st.state)) {
        if (j->st.state == JOB_PENDING) {
            if (j->st.queue_key != 0) {
                j->sj.moved = true;
                j->sj.queue_key = j->st.queue_key;
            }
            r = sched_enqueue(&s->sched, &j->sj);
        } else {
            r = restore_allocation(s, j, &why);
            if (r == 0 && j->st.state == JOB_STOPPING) {
                /* why it was stopping comes from its events, once the walk is over */
                j->life.stop_mode = LIFE_STOP_PREEMPT;
                j->sj.stopping = true;
                j->life.stop_ms = server_now_ms();
            }
        }
    }
    if (r == -ENOMEM) {
        buf_free(&why);
        server_job_free(j);
        return r;
    }
    if (r < 0) {
        /* the cluster file changed under it: it can no longer run here */
        log_error("event=job_unloadable job=%lld reason=\"%s\"", (long long)j->st.id,
                  buf_str(&why));
        placement_free(&j->sj.pl);
        j->sj.pl = (Placement){0};
        j->st.state = JOB_FAILED;
        j->life.state = LIFE_FAILED;
        lc->n_bad++;
    }
    buf_free(&why);
    r = job_table_put(s, j);
    if (r < 0) {
        server_job_free(j);
        return r;
    }
    if (job_state_ended(j->st.state) && (r = server_job_note_ended(s, j)) < 0)
        return r;
    lc->n_loaded++;
    return 0;
}

static int load_team(void *arg, const char *name, double guaranteed, double burst, double weight)
{
    Cluster *c = arg;
    int t = cluster_find_team(c, name);
    if (t >= 0) {
        c->teams[t].guaranteed_gpus = guaranteed;
        c->teams[t].burst_gpus = burst;
        c->teams[t].weight = weight;
    }
    return 0;
}

static int load_learned(void *arg, const char *cls, uint64_t peak_mib, unsigned ooms)
{
    return learn_restore(arg, cls, peak_mib, ooms);
}

static int load_mig(void *arg, const char *node, unsigned index, const char *layout_json)
{
    Cluster *c = arg;
    int n = cluster_find_node(c, node);
    if (n < 0 || index >= c->nodes[n].n_gpus)
        return 0;
    const GpuModel *m = node_model(c, &c->nodes[n]);
    MigLayout l;
    mig_layout_clear(&l);
    json_t *root = json_loads(layout_json, 0, NULL), *e;
    size_t i;
    json_array_foreach(root, i, e)
    {
        const char *prof = json_string_value(json_object_get(e, "profile"));
        json_int_t start = json_integer_value(json_object_get(e, "start"));
        int p = prof ? catalog_profile_index(m, prof) : -1;
        if (p >= 0 && start >= 0 && start < MIG_MAX_SLOTS)
            l.profile_at[start] = (uint8_t)p;
    }
    json_decref(root);
    /* a layout the catalogue no longer accepts is dropped: the agent reports the truth */
    cluster_set_mig(c, (uint32_t)n, index, &l);
    return 0;
}

/* The expected mix the packing policy scores against: the shapes of the jobs the store
 * remembers (the recent workload is the best guess of the next). */
static int build_mix(Server *s)
{
    for (size_t i = 0; i < s->n_resident; i++) {
        ServerJob *j = s->resident[i];
        if (j->st.state != JOB_FAILED && j->sj.req.workers) {
            int r = mix_add(&s->mix, &j->sj.req, j->sj.req.workers);
            if (r < 0)
                return r;
        }
    }
    mix_normalize(&s->mix);
    return 0;
}

int server_open(const ServerOptions *o, Server **ret, Buf *err)
{
    Server *s = calloc(1, sizeof(*s));
    if (!s) {
        store_close(o->store);
        return -ENOMEM;
    }
    s->opt = *o;
    s->store = o->store; /* ours now, even when opening fails */
    s->opt.store = NULL;
    if (s->opt.heartbeat_ms <= 0)
        s->opt.heartbeat_ms = LIFE_HEARTBEAT_MS;
    if (s->opt.lost_after_ms <= 0)
        s->opt.lost_after_ms = LIFE_LOST_AFTER_MS;
    if (s->opt.lost_grace_ms < 0)
        s->opt.lost_grace_ms = LIFE_LOST_GRACE_MS;
    if (s->opt.cycle_ms <= 0)
        s->opt.cycle_ms = DEFAULT_CYCLE_MS;
    if (s->opt.job_retention_ms <= 0)
        s->opt.job_retention_ms = DEFAULT_JOB_RETENTION_MS;
    if (s->opt.max_ended_jobs <= 0)
        s->opt.max_ended_jobs = DEFAULT_MAX_ENDED_JOBS;
    pthread_mutex_init(&s->lock, NULL);
    pthread_mutex_init(&s->commit_lock, NULL);
    pthread_cond_init(&s->durable, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->wake, &ca);
    pthread_condattr_destroy(&ca);

    int r = 0;
    Buf shown = {0}; /* the store's URL, its password masked */
    if (o->cluster) {
        s->c = o->cluster; /* ours now, even when opening fails */
        s->opt.cluster = NULL;
    } else if ((r = spec_load_cluster(o->config_path, &s->c, err)) < 0) {
        goto fail;
    }
    Buf dir = {0};
    buf_printf(&dir, "%s/logs", o->data_dir);
    s->log_dir = buf_steal(&dir);
    s->nodes = calloc(s->c->n_nodes ? s->c->n_nodes : 1, sizeof(*s->nodes));
    s->running = NULL;
    if (!s->log_dir || !s->nodes) {
        r = -ENOMEM;
        goto fail;
    }
    store_url_redact(o->db_url, &shown);
    if (!s->store && (r = store_open(o->db_url, &s->store, err)) < 0)
        goto fail;
    r = store_lead(s->store, o->advertise_url, server_now_ms(), err);
    if (r == 0) {
        char at[256] = "";
        store_leader(s->store, at, sizeof(at), NULL);
        buf_printf(err,
                   "another server leads the store %s%s%s; a second server waits as a "
                   "standby only when started by `gpuorch server`",
                   buf_str(&shown), *at ? " from " : "", at);
        r = -EBUSY;
    }
    if (r < 0)
        goto fail;
    if ((r = store_server_id(s->store, s->server_id)) < 0) {
        buf_printf(err, "cannot read the server's identity from the store %s", buf_str(&shown));
        goto fail;
    }
    /* what the classes learned sizes the queued jobs loaded below */
    if ((r = store_teams_load(s->store, load_team, s->c)) < 0 ||
        (r = store_mig_load(s->store, load_mig, s->c)) < 0 ||
        (r = store_learned_load(s->store, load_learned, &s->learn)) < 0) {
        buf_printf(err, "cannot read the store %s", buf_str(&shown));
        goto fail;
    }
    if ((r = nodespan_start(s, err)) < 0)
        goto fail;
    /* nothing lands on a node before its agent reports */
    int64_t now = server_now_ms();
    for (size_t i = 0; i < s->c->n_nodes; i++) {
        cluster_set_away(s->c, (uint32_t)i, AWAY_UNREGISTERED);
        s->nodes[i].last_seen_ms = now;
        s->nodes[i].seen_mono_ms = server_mono_ms();
    }
    rng_seed(&s->rng, 42);
    SchedConfig cfg;
    sched_config_gpuorch(&cfg);
    if (o->min_runtime_ms >= 0)
        cfg.min_runtime_ms = o->min_runtime_ms;
    /* the policy is set up after the jobs are known (its mix); the scheduler's queue
     * needs only the context's address until the first cycle */
    s->shapes = calloc(SERVER_MAX_SHAPES, sizeof(*s->shapes));
    r = s->shapes ? sched_init(&s->sched, s->c, &s->ctx, &cfg, SERVER_MAX_SHAPES) : -ENOMEM;
    if (r < 0)
        goto fail;
    server_life_init(s);
    LoadCtx lc = {.s = s, .err = err};
    /* what is live, and what ended inside the retention; the rest is read when asked */
    r = store_jobs_load_live(s->store, server_now_ms() - s->opt.job_retention_ms, load_job, &lc);
    if (r < 0) {
        buf_printf(err, "cannot load the jobs of %s", buf_str(&shown));
        goto fail;
    }
    for (size_t i = 0; i < s->n_holding; i++) {
        ServerJob *j = s->holding[i];
        if (j->st.state == JOB_STOPPING) {
            store_events_for(s->store, j->st.id, last_event, &j->life.stop_mode);
            j->life.requeue = j->life.stop_mode == LIFE_STOP_PREEMPT;
        }
    }
    if ((r = build_mix(s)) < 0 ||
        (r = place_ctx_init(&s->ctx, s->c, policy_find("gpuorch"), &s->rng, NULL,
                            s->mix.n ? &s->mix : NULL)) < 0)
        goto fail;
    score_cache_fit(s);
    if ((r = metering_restore_fair_share(s, server_now_ms())) < 0) {
        buf_printf(err, "cannot read the teams' past usage from %s", buf_str(&shown));
        goto fail;
    }
    s->order_stale = true;
    log_info("event=store_loaded db=%s jobs=%zu unloadable=%zu holding=%zu queued=%zu",
             buf_str(&shown), lc.n_loaded, lc.n_bad, s->n_holding, sched_queue_len(&s->sched));

    if (pthread_create(&s->thread, NULL, sched_main, s) != 0) {
        buf_printf(err, "cannot start the scheduler thread");
        r = -EAGAIN;
        goto fail;
    }
    s->thread_started = true;
    buf_free(&shown);
    *ret = s;
    return 0;
fail:
    buf_free(&shown);
    server_close(s);
    return r < 0 ? r : -EINVAL;
}

void server_close(Server *s)
{
    if (!s)
        return;
    if (s->thread_started) {
        pthread_mutex_lock(&s->lock);
        s->quit = true;
        pthread_cond_signal(&s->wake);
        pthread_mutex_unlock(&s->lock);
        pthread_join(s->thread, NULL);
    }
    nodespan_stop(s, server_now_ms());
    provider_stop(s);
    for (size_t i = 0; i < s->n_resident; i++)
        server_job_free(s->resident[i]);
    free(s->jobs);
    free(s->resident);
    free(s->ended);
    free(s->holding);
    free(s->running);
    free(s->shapes);
    free(s->span_batched);
    if (s->c) {
        sched_free(&s->sched);
        place_ctx_free(&s->ctx);
        score_cache_free(&s->cache);
        for (size_t i = 0; i < s->c->n_nodes && s->nodes; i++) {
            free(s->nodes[i].boot_id);
            free(s->nodes[i].address);
            free(s->nodes[i].gpus_json);
            free(s->nodes[i].samples);
            free(s->nodes[i].mismatch);
        }
    }
    mix_free(&s->mix);
    learn_free(&s->learn);
    utilization_destroy(s->util);
    free(s->nodes);
    cluster_free(s->c);
    store_close(s->store);
    free(s->log_dir);
    pthread_cond_destroy(&s->wake);
    pthread_cond_destroy(&s->durable);
    pthread_mutex_destroy(&s->commit_lock);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

/* ---- requests ---- */

static bool may_act_for_team(const Caller *who, const char *team)
{
    if (who->role == ROLE_ADMIN)
        return true;
    if (who->role != ROLE_LEAD && who->role != ROLE_MEMBER)
        return false;
    return team && !strcmp(team, who->team);
}

/* Who may ask for what at submission (the rest of the check is admit.h's, which
 * `gpuorch validate` runs too): a lead or member submits for its own team, a member at
 * normal or low priority, a lead up to high; production is an admin's, as changing a
 * job's class is (server_set_priority). 0, or 403 with err set. */
static int check_rights(const Caller *who, JobSpec *js, Buf *err)
{
    if (who->role != ROLE_ADMIN && who->role != ROLE_LEAD && who->role != ROLE_MEMBER) {
        buf_printf(err, "a %s token may not submit jobs", role_name(who->role));
        return 403;
    }
    if (who->role == ROLE_ADMIN)
        return 0;
    if (!js->team) {
        js->team = strdup(who->team);
        if (!js->team)
            return 500;
    }
    const char *name = js->name && *js->name ? js->name : "?";
    if (strcmp(js->team, who->team)) {
        buf_printf(err, "job %s: a %s of team '%s' may not submit for team '%s'", name,
                   role_name(who->role), who->team, js->team);
        return 403;
    }
    if (js->priority == PRIO_PRODUCTION) {
        buf_printf(err, "job %s: field 'priority': only an admin may submit production work", name);
        return 403;
    }
    if (js->priority == PRIO_HIGH && who->role != ROLE_LEAD) {
        buf_printf(err,
                   "job %s: field 'priority': a member submits at normal or low; the lead of team "
                   "'%s' may raise it to high",
                   name, who->team);
        return 403;
    }
    return 0;
}

/* Checks a job must pass before it is accepted; status code, err set. */
static int check_job(Server *s, const Caller *who, JobSpec *js, Buf *err)
{
    int status = check_rights(who, js, err);
    if (status)
        return status;
    /* an engine's jobs run what their pods say: there is no command of ours */
    int v =
        admit_job(s->c, &s->learn, js, s->opt.external_nodes ? 0 : ADMIT_NEED_COMMAND, NULL, err);
    switch (v) {
    case ADMIT_OK:
        return 0;
    case ADMIT_BAD:
        return 400;
    case ADMIT_FORBIDDEN:
        return 403;
    case ADMIT_NEVER:
        return 422;
    default:
        return 500;
    }
}

/* A submitted job in memory before it is written: its strings copied and its request
 * bound to the core (all that can fail for want of memory), so that once the write is
 * durable nothing is left that can fail. The spec is the caller's until then. */
static int submit_prepare(Server *s, JobSpec *js, const StoreJob *st, ServerJob **ret, Buf *why)
{
    ServerJob *j = calloc(1, sizeof(*j));
    if (!j)
        return -ENOMEM;
    j->st = *st;
    j->st.spec_json = NULL;
    j->st.name = strdup(js->name);
    j->st.team = js->team ? strdup(js->team) : NULL;
    j->st.project = js->project ? strdup(js->project) : NULL;
    j->st.user = st->user ? strdup(st->user) : NULL;
    job_spec_init(&j->spec);
    int r = !j->st.name || (js->team && !j->st.team) || (js->project && !j->st.project) ||
                    (st->user && !j->st.user)
                ? -ENOMEM
                : 0;
    if (r == 0) {
        /* bound on the spec while the caller keeps it; the job takes it once written */
        j->spec = *js;
        r = job_bind_core(s, j, why);
        job_spec_init(&j->spec);
    }
    if (r < 0) {
        server_job_free(j);
        return r;
    }
    *ret = j;
    return 0;
}

int server_submit(Server *s, const Caller *who, JobList *jobs, int64_t *ret_ids, Buf *err)
{
    if (!jobs->n) {
        buf_printf(err, "the request holds no job");
        return 400;
    }
    if (s->opt.external_nodes && who->token_id != SERVER_ENGINE_CALLER) {
        buf_printf(err, "on Kubernetes a job is pods: create them with schedulerName: gpuorch "
                        "(docs/kubernetes.md), and gpuorch schedules them");
        return 409;
    }
    size_t n = jobs->n;
    StoreJob *ins = calloc(n, sizeof(*ins));
    ServerJob **sj = calloc(n, sizeof(*sj));
    StoreEvent *ev = calloc(n, sizeof(*ev));
    int status = ins && sj && ev ? 0 : 500;
    int64_t now = server_now_ms();
    pthread_mutex_lock(&s->lock);
    for (size_t i = 0; i < n && !status; i++)
        status = check_job(s, who, &jobs->jobs[i], err);
    pthread_mutex_unlock(&s->lock);
    for (size_t i = 0; i < n && !status; i++) {
        JobSpec *js = &jobs->jobs[i];
        Buf spec = {0};
        if (spec_job_to_json(js, &spec) < 0 || spec.oom) {
            buf_free(&spec);
            status = 500;
            break;
        }
        ins[i] = (StoreJob){
            .name = js->name,
            .team = js->team,
            .project = js->project,
            .spec_json = buf_steal(&spec),
            .owner = who->token_id,
            .user = who->user[0] ? (char *)who->user : NULL,
            .priority = js->priority,
            .state = JOB_PENDING,
            .submit_ms = now,
            .start_ms = -1,
            .end_ms = -1,
            .exit_code = -1,
            .checkpoint_ms = -1,
        };
    }
    if (!status) {
        pthread_mutex_lock(&s->lock);
        for (size_t i = 0; i < n && !status; i++) {
            Buf why = {0};
            int r = submit_prepare(s, &jobs->jobs[i], &ins[i], &sj[i], &why);
            /* check_job bound it already: only memory can fail here */
            if (r < 0)
                status = 500;
            buf_free(&why);
        }
        pthread_mutex_unlock(&s->lock);
    }
    if (!status) {
        for (size_t i = 0; i < n; i++)
            ev[i] = (StoreEvent){.job = -(int64_t)(i + 1), .t_ms = now, .type = "submit"};
        StoreWrite w = {.inserts = ins, .n_inserts = n, .events = ev, .n_events = n};
        if (store_write(s->store, &w, err) < 0)
            status = 500;
    }
    if (!status) {
        server_lock(s);
        for (size_t i = 0; i < n && !status; i++) {
            ServerJob *j = sj[i];
            JobSpec *js = &jobs->jobs[i];
            j->st.id = ins[i].id;
            j->sj.id = (uint32_t)ins[i].id;
            int r = job_table_put(s, j);
            if (r == 0) {
                sj[i] = NULL; /* the table's now */
                j->st.spec_json = TAKE_PTR(ins[i].spec_json);
                j->spec = *js; /* the job takes the spec's strings */
                job_spec_init(js);
                server_job_life_init(j);
                r = sched_enqueue(&s->sched, &j->sj);
            }
            if (r < 0) {
                /* durable, yet memory cannot hold it: as with any write memory cannot
                 * follow (server_commit), the server has diverged, and the restart that
                 * follows loads it */
                log_error("event=submit_memory job=%lld error=\"out of memory\"",
                          (long long)j->st.id);
                server_diverge(s, r);
                buf_printf(err, "out of memory after the jobs were saved: the server restarts "
                                "and they are queued then");
                status = 500;
                break;
            }
            j->position = sched_position_newest(&s->sched, &j->sj);
            ret_ids[i] = j->st.id;
        }
        s->order_stale = true;
        server_kick(s);
        pthread_mutex_unlock(&s->lock);
    }
    for (size_t i = 0; i < n; i++) {
        if (ins)
            free(ins[i].spec_json);
        if (sj)
            server_job_free(sj[i]);
    }
    free(ins);
    free(sj);
    free(ev);
    return status ? status : 201;
}

int server_cancel(Server *s, const Caller *who, int64_t id, Buf *err)
{
    server_lock(s);
    int status = 200;
    ServerJob *view;
    int found;
    ServerJob *j = server_job_find(s, id, &view, &found);
    Changes ch = {0};
    if (found < 0) {
        buf_printf(err, "cannot read job %lld from the store", (long long)id);
        status = 500;
    } else if (!j) {
        buf_printf(err, "no job %lld", (long long)id);
        status = 404;
    } else if (who->role == ROLE_LEAD || who->role == ROLE_MEMBER
                   ? !may_act_for_team(who, j->st.team)
                   : who->role != ROLE_ADMIN) {
        buf_printf(err, "a %s%s%s may not cancel job %lld of team '%s'", role_name(who->role),
                   who->team[0] ? " of team " : "", who->team, (long long)id,
                   j->st.team ? j->st.team : "");
        status = 403;
    } else if (job_state_ended(j->st.state)) {
        buf_printf(err, "job %lld already ended (%s)", (long long)id, job_state_name(j->st.state));
        status = 409;
    } else if (j->st.state == JOB_STOPPING && j->life.stop_mode == LIFE_STOP_CANCEL) {
        status = 200; /* already being cancelled */
    } else {
        int64_t now = server_now_ms();
        server_job_stop(s, j, LIFE_STOP_CANCEL, false, now, &ch);
        changes_event(&ch, j, now, "cancel", NULL);
        if (server_commit_released(s, &ch) < 0) {
            buf_printf(err, "the store failed; the cancellation may not have been saved");
            status = 500;
        }
        server_kick(s);
    }
    changes_free(&ch);
    pthread_mutex_unlock(&s->lock);
    server_job_view_free(view);
    return status;
}

int server_set_priority(Server *s, const Caller *who, int64_t id, Priority p, Buf *err)
{
    server_lock(s);
    int status = 200;
    ServerJob *view;
    int found;
    ServerJob *j = server_job_find(s, id, &view, &found);
    Changes ch = {0};
    if (found < 0) {
        buf_printf(err, "cannot read job %lld from the store", (long long)id);
        status = 500;
    } else if (!j) {
        buf_printf(err, "no job %lld", (long long)id);
        status = 404;
    } else if (who->role != ROLE_ADMIN &&
               (who->role != ROLE_LEAD || !may_act_for_team(who, j->st.team))) {
        buf_printf(err,
                   "only an admin or the lead of team '%s' may change the priority of job %lld",
                   j->st.team ? j->st.team : "", (long long)id);
        status = 403;
    } else if (p == PRIO_PRODUCTION && who->role != ROLE_ADMIN) {
        buf_printf(err, "only an admin may make a job production");
        status = 403;
    } else if (job_state_ended(j->st.state)) {
        buf_printf(err, "job %lld already ended (%s)", (long long)id, job_state_name(j->st.state));
        status = 409;
    } else if (j->st.priority != p) {
        int64_t now = server_now_ms();
        char detail[64];
        snprintf(detail, sizeof(detail), "%s -> %s", priority_name(j->st.priority),
                 priority_name(p));
        bool queued = j->sj.queued;
        Priority was = j->st.priority;
        if (queued)
            sched_dequeue(&s->sched, &j->sj);
        j->st.priority = p;
        j->sj.priority = p;
        j->spec.priority = p;
        if (queued && sched_enqueue(&s->sched, &j->sj) < 0) {
            /* no room in the new class's queue: back where it was, which had room for it
             * a moment ago (so this cannot fail), and nothing written */
            j->st.priority = was;
            j->sj.priority = was;
            j->spec.priority = was;
            sched_enqueue(&s->sched, &j->sj);
            buf_printf(err, "out of memory; the priority of job %lld was not changed",
                       (long long)id);
            status = 500;
        } else {
            changes_job(&ch, j);
            changes_event(&ch, j, now, "priority", detail);
            if (server_commit_released(s, &ch) < 0) {
                buf_printf(err, "the store failed; the priority change may not have been saved");
                status = 500;
            }
        }
        s->order_stale = true;
        server_kick(s);
    }
    changes_free(&ch);
    pthread_mutex_unlock(&s->lock);
    server_job_view_free(view);
    return status;
}

int server_move(Server *s, const Caller *who, int64_t id, int64_t anchor, bool after, Buf *err)
{
    server_lock(s);
    int status = 200;
    ServerJob *vj, *va;
    int ej, ea;
    ServerJob *j = server_job_find(s, id, &vj, &ej);
    ServerJob *a = server_job_find(s, anchor, &va, &ea);
    /* the second read may have let go of the lock: the first job may have ended and left
     * meanwhile (its view, then, is a copy) */
    if (!vj && j != server_job(s, id))
        j = NULL;
    Changes ch = {0};
    if (ej < 0 || ea < 0) {
        buf_printf(err, "cannot read job %lld from the store", (long long)(ej < 0 ? id : anchor));
        status = 500;
    } else if (!j || !a) {
        buf_printf(err, "no job %lld", (long long)(j ? anchor : id));
        status = 404;
    } else if (who->role != ROLE_ADMIN &&
               (who->role != ROLE_LEAD || !may_act_for_team(who, j->st.team))) {
        buf_printf(err, "only an admin or the lead of team '%s' may reorder its jobs",
                   j->st.team ? j->st.team : "");
        status = 403;
    } else if (j->st.state != JOB_PENDING || a->st.state != JOB_PENDING) {
        buf_printf(err, "only pending jobs are reordered: job %lld is %s",
                   (long long)(j->st.state != JOB_PENDING ? id : anchor),
                   job_state_name(j->st.state != JOB_PENDING ? j->st.state : a->st.state));
        status = 409;
    } else if (j->sj.team != a->sj.team || j->st.priority != a->st.priority) {
        buf_printf(err,
                   "jobs %lld and %lld are not of one team and priority class; a job moves "
                   "among its team's jobs of its class",
                   (long long)id, (long long)anchor);
        status = 409;
    } else if (id != anchor) {
        int r = sched_move(&s->sched, &j->sj, &a->sj, after);
        if (r < 0) {
            buf_printf(err, "cannot move job %lld there", (long long)id);
            status = r == -ENOMEM ? 500 : 409;
        } else {
            /* every moved job of the bucket keeps its key across a restart */
            for (size_t k = 0; k < s->sched.buckets[j->sj.bucket].n; k++) {
                ServerJob *q = server_job(s, s->sched.buckets[j->sj.bucket].j[k]->id);
                if (q && q->sj.moved) {
                    q->st.queue_key = q->sj.queue_key;
                    changes_job(&ch, q);
                }
            }
            char detail[64];
            snprintf(detail, sizeof(detail), "%s job %lld", after ? "after" : "before",
                     (long long)anchor);
            changes_event(&ch, j, server_now_ms(), "move", detail);
            if (server_commit_released(s, &ch) < 0) {
                buf_printf(err, "the store failed; the move may not have been saved");
                status = 500;
            }
            s->order_stale = true;
            server_kick(s);
        }
    }
    changes_free(&ch);
    pthread_mutex_unlock(&s->lock);
    server_job_view_free(vj);
    server_job_view_free(va);
    return status;
}

typedef struct TeamRow {
    const char *team;
    double g, b, w;
} TeamRow;

static int write_team(Store *st, void *arg)
{
    const TeamRow *t = arg;
    return store_team_set(st, t->team, t->g, t->b, t->w);
}

int server_team_set(Server *s, const char *team, const double *guaranteed_gpus,
                    const double *burst_gpus, const double *weight, Buf *err)
{
    server_lock(s);
    int t = cluster_find_team(s->c, team);
    int status = 200;
    if (t < 0) {
        buf_printf(err, "no team '%s' (teams are declared in the cluster file)", team);
        status = 404;
        goto out;
    }
    Team *tm = &s->c->teams[t];
    double g = guaranteed_gpus ? *guaranteed_gpus : tm->guaranteed_gpus;
    double b = burst_gpus ? *burst_gpus : tm->burst_gpus;
    double w = weight ? *weight : tm->weight;
    if (!(g >= 0) || !(b >= 0) || !(w >= 0) || !isfinite(g + b + w)) {
        buf_printf(err, "quotas and weights are numbers of at least 0");
        status = 400;
    } else if (b < g) {
        buf_printf(err, "burst_gpus (%g) may not be below guaranteed_gpus (%g)", b, g);
        status = 400;
    } else if (server_write_released(s, write_team, &(TeamRow){team, g, b, w}) < 0) {
        buf_printf(err, "the store failed; the change was not saved");
        status = 500;
    } else {
        tm = &s->c->teams[t];
        tm->guaranteed_gpus = g;
        tm->burst_gpus = b;
        tm->weight = w;
        TeamState *ts = &s->sched.ten.teams[t];
        ts->guaranteed_units = g * GPU_UNITS;
        ts->burst_units = b * GPU_UNITS;
        ts->weight = w;
        s->order_stale = true;
        server_kick(s);
    }
out:
    pthread_mutex_unlock(&s->lock);
    return status;
}

/* ---- queue positions ---- */

static void note_positions(Server *s)
{
    for (size_t i = 0; i < s->sched.n_order; i++) {
        ServerJob *j = server_job(s, s->sched.order[i]->id);
        if (j)
            j->position = (uint32_t)i + 1;
    }
    s->order_stale = false;
}

uint32_t server_position(Server *s, const ServerJob *j)
{
    if (j->st.state != JOB_PENDING)
        return 0;
    if (s->order_stale) {
        if (sched_order(&s->sched) < 0)
            return 0;
        note_positions(s);
    }
    return j->position;
}

uint32_t server_position_new(Server *s, const ServerJob *j)
{
    /* counted when it was queued (it was the newest then), or by a cycle since */
    return j->st.state == JOB_PENDING ? j->position : 0;
}

int64_t server_eta_ms(Server *s, const ServerJob *j)
{
    if (j->st.state != JOB_PENDING)
        return -1;
    for (size_t r = 0; r < s->sched.n_res; r++)
        if (s->sched.res[r].job == j->sj.id)
            return s->sched.res[r].start_ms;
    return -1;
}

/* ---- the scheduler thread ---- */

/* What the core needs of the jobs holding GPUs: what is left of their estimates. */
static int collect_running(Server *s, int64_t now, size_t *ret_n)
{
    if (GROW(s->running, s->running_cap, s->n_holding + 1) < 0)
        return -ENOMEM;
    size_t n = 0;
    for (size_t i = 0; i < s->n_holding; i++) {
        ServerJob *j = s->holding[i];
        int64_t est = j->spec.duration_estimate_ms;
        j->sj.estimate_ms =
            est == NO_DURATION ? NO_DURATION : MAX((int64_t)0, est - (now - j->sj.run_start_ms));
        j->sj.attained_gpu_ms = j->gpu_equivalents * (double)(now - j->sj.run_start_ms);
        /* a model server whose one worker runs may be moved (move.c) */
        j->sj.movable = j->spec.kind == KIND_INFERENCE && j->st.state == JOB_RUNNING &&
                        j->life.move == LIFE_MOVE_NONE && now >= j->no_move_until_ms &&
                        j->life.n_workers == 1 && j->life.workers[0].state == LIFE_WORKER_RUNNING;
        s->running[n++] = &j->sj;
    }
    *ret_n = n;
    return 0;
}

static void count_cycle(Server *s, double seconds)
{
    static const double bounds[] = {0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1};
    ServerCounters *k = &s->counters;
    k->cycles++;
    k->cycle_seconds_sum += seconds;
    size_t b = 0;
    while (b < ARRAY_SIZE(bounds) && seconds > bounds[b])
        b++;
    k->cycle_buckets[b]++;
}

/* Write a cycle's changes, and start what the provider asked for, with the lock
 * released (the fsync and the forks): readers that tell wait in server_lock for the
 * write. While a reader already waits the write is made with the lock held, so that no
 * reader waits more than one write. Lock held on return; 0, or the commit's error. */
static int cycle_commit(Server *s, Changes *ch)
{
    ProviderSpawns sp;
    provider_spawns_take(s, &sp);
    CommitBatch b = {0};
    int r = s->durable_waiters ? server_commit(s, ch) : server_commit_begin(s, ch, &b);
    if (r < 0) {
        /* diverged: the lock stays held until the top level ends the process */
        provider_spawns_free(&sp);
        return r;
    }
    pthread_mutex_unlock(&s->lock);
    provider_spawns_run(&sp);
    r = server_commit_finish(s, &b);
    provider_spawns_done(s, &sp);
    return r;
}

/* One cycle: the core's decisions carried out, and written in one commit before the
 * engine (after_cycle) or the agents hear of them. 0, or the commit's negative errno (the
 * server has diverged then); a cycle the core could not finish for want of memory is
 * logged, not an error: what it decided is carried out (sched.h). */
static int run_cycle(Server *s, int64_t now)
{
    size_t n;
    if (collect_running(s, now, &n) < 0) {
        log_error("event=cycle_skipped reason=out_of_memory");
        return 0;
    }
    int64_t t0 = mono_ns();
    SchedDecisions dec = {0};
    metering_cycle(s, now);
    int r = sched_cycle(&s->sched, now, s->running, n, &dec);
    Changes ch = {0};
    /* every listed decision, even when the cycle failed part-way: the core applied each
     * (sched.h), so a start left out would leave its job holding GPUs in the core while
     * the server lists it pending. One the server cannot follow fails the whole commit. */
    for (size_t k = 0; k < dec.n; k++) {
        const SchedDecision *d = &dec.d[k];
        ServerJob *j = server_job(s, d->job);
        if (!j)
            continue;
        if (d->kind == SCHED_START) {
            int e = server_job_started(s, j, now, &ch);
            if (e < 0)
                changes_fail(&ch, e);
        } else if (d->kind == SCHED_PREEMPT) {
            char why[64];
            snprintf(why, sizeof(why), "to make room for job %u", d->for_job);
            j->st.preemptions++;
            s->counters.preempted++;
            server_job_stop(s, j, LIFE_STOP_PREEMPT, true, now, &ch);
            changes_event(&ch, j, now, "preempt", why);
        } else if (d->kind == SCHED_MOVE) {
            int e = server_job_move(s, j, now, &ch);
            if (e < 0)
                changes_fail(&ch, e);
        }
    }
    if (r < 0)
        log_error("event=cycle_failed error=%d", r);
    note_positions(s);
    provider_cycle(s, now, &ch);
    int cr = cycle_commit(s, &ch);
    changes_free(&ch);
    /* the engine acts on the decisions (binds) once they are durable */
    if (cr == 0 && s->opt.after_cycle)
        s->opt.after_cycle(s->opt.after_cycle_arg);
    sched_decisions_free(&dec);
    count_cycle(s, (double)(mono_ns() - t0) / 1e9);
    return cr;
}

/* The daemon's top level for what the scheduler thread does: memory ahead of the store
 * (server_diverge, from any thread) ends the process here, lock held, so that no reader
 * sees a state the store lacks; the restart reloads the durable one. */
static void stop_if_diverged(Server *s)
{
    int err = server_diverged(s);
    if (!err)
        return;
    log_error("event=server_diverged error=%d action=exit", err);
    _exit(1);
}

/* A leader whose hold on the store is gone (its session ended: a standby may lead now)
 * decides nothing more: it ends as a server whose memory went ahead of the store does.
 * Asked of the database once a second; a write in between fails by itself (-ESTALE). */
static void stop_if_deposed(Server *s, int64_t mono, int64_t *next_check)
{
    if (mono < *next_check)
        return;
    *next_check = mono + LEAD_CHECK_MS;
    if (store_leading(s->store, true))
        return;
    log_error("event=leadership_lost action=exit reason=\"the store's session that held the "
              "lead is gone\"");
    server_diverge(s, -ESTALE);
    stop_if_diverged(s);
}

static void *sched_main(void *arg)
{
    Server *s = arg;
    pthread_mutex_lock(&s->lock);
    int64_t next_cycle = 0, last_cycle = 0, gap = MIN_CYCLE_GAP_MS, next_lead_check = 0;
    while (!s->quit) {
        int64_t now = server_now_ms(), mono = mono_ns() / 1000000;
        stop_if_deposed(s, mono, &next_lead_check);
        stop_if_diverged(s);
        server_check_nodes(s, now);
        stop_if_diverged(s);
        server_evict_ended(s, now);
        nodespan_flush(s); /* before the cycle places work on a node that just came */
        nodespan_tick(s, now);
        utilization_sample(s, now);
        if ((s->dirty && mono - last_cycle >= gap) || mono >= next_cycle) {
            s->dirty = false;
            run_cycle(s, now);
            stop_if_diverged(s);
            last_cycle = mono_ns() / 1000000;
            next_cycle = last_cycle + s->opt.cycle_ms;
            /* a long queue makes cycles long: space them so that they take at most a
             * fifth of the time (submissions share the lock) */
            gap = MAX((int64_t)MIN_CYCLE_GAP_MS, 4 * (last_cycle - mono));
        }
        int64_t wake = s->dirty ? last_cycle + gap : MIN(next_cycle, mono + 1000);
        struct timespec ts = {.tv_sec = wake / 1000, .tv_nsec = (wake % 1000) * 1000000};
        if (!s->quit && wake > mono)
            pthread_cond_timedwait(&s->wake, &s->lock, &ts);
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}
