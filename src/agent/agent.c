/* agent.c: the node agent's loop. The exchange with the server is declarative: each
 * heartbeat reports everything (GPUs, workers) and each reply says everything the node
 * should be doing, so the agent only compares and acts. Order within a reply: forget
 * ended workers, reach the MIG layouts (idle instances only), start the missing
 * workers, stop the ones marked, kill the running ones the server no longer lists,
 * then ship new log bytes. Events are logged one key=value line each; a repeated
 * failure (server down, a MIG layout that cannot be reached) is logged when it begins
 * and when it ends, not on every try. */
#include "agent/agent.h"
#include "agent/afile.h"
#include "agent/gpus.h"
#include "agent/keeper.h"
#include "agent/launch.h"
#include "agent/mps.h"
#include "agent/nccl_fabric.h"
#include "agent/notice.h"
#include "agent/proto.h"
#include "agent/upload.h"
#include "agent/worker.h"
#include "net/http_client.h"
#include "spec/render.h"
#include "util/file.h"
#include "util/log.h"
#include "util/macro.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define FORGOTTEN_MAX  256
#define MEMORY_POLL_MS 5000

struct Agent {
    char *node, *address, *gpus_spec, *state_dir, *ckpt_root, *logs_dir, *table_path;
    char *exits_dir; /* the keepers' records of how workers ended (keeper.h) */
    int lock_fd;
    LaunchPolicy launch; /* who workers run as, their limits and cgroups (launch.h) */
    FabricInfo fabric;   /* the node's RDMA ports and interfaces, read at start (fabric.h) */
    Mps mps;             /* the MPS control daemons of shared GPUs (mps.h) */
    HttpClient *http;
    NoticeWatch *notice; /* NULL: not a spot machine */
    GpuBackend *gb;
    AgentGpu *gpus;
    size_t n_gpus;
    char **mig_error; /* per GPU: the last MIG failure logged, or NULL */
    size_t mig_next;  /* the GPU the next MIG pass begins with */

    Worker **w;
    size_t n_w, cap_w;
    WorkerKey forgotten[FORGOTTEN_MAX]; /* ring: never restart what the server forgot */
    size_t n_forgotten, forgotten_next;

    char boot_id[64];      /* this agent process */
    char machine_boot[64]; /* this boot of the machine */
    /* the server the workers belong to (its identity, from the heartbeat replies, kept
     * in workers.json); "" until a server said */
    char server_id[WORKER_SERVER_ID_MAX + 1];
    int64_t heartbeat_ms;
    int64_t next_heartbeat; /* monotonic */
    int64_t backoff_ms;     /* 0 while the server answers */
    char *link_error;       /* the failure logged, NULL while the server answers */
    char *refusal;          /* the 4xx the server last refused a heartbeat with, or NULL */
    int64_t next_memory_poll;
    bool logs_down; /* this heartbeat's round: a log upload found the server away */
    /* shutting the node down (agent_shutdown): nothing new starts, every worker stops */
    bool shutdown;
    int64_t shutdown_idle_since; /* monotonic ms since no worker is left, 0 while some are */
    bool shutdown_told;          /* the server heard, or refused, a report with none left */
    bool dirty;                  /* the worker table needs saving */
    bool table_loaded;           /* the table may be written: it was read first */
};

static char *join(const char *a, const char *b)
{
    size_t n = strlen(a) + strlen(b) + 2;
    char *s = malloc(n);
    if (s)
        snprintf(s, n, "%s/%s", a, b);
    return s;
}

/* The first line of a /proc file, trimmed. */
static void read_id(const char *path, char *out, size_t cap)
{
    out[0] = '\0';
    char *text = NULL;
    size_t len = 0;
    if (file_read_all(path, &text, &len) < 0)
        return;
    text[strcspn(text, "\r\n")] = '\0';
    snprintf(out, cap, "%s", text);
    free(text);
}

static void mark_dirty(Agent *a)
{
    a->dirty = true;
}

static void save_table(Agent *a)
{
    if (!a->dirty)
        return;
    int r = worker_table_save(a->table_path, a->machine_boot, a->server_id, a->w, a->n_w);
    if (r < 0)
        log_error("event=state_save path=%s error=\"%s\"", a->table_path, strerror(-r));
    else
        a->dirty = false;
}

static Worker *find_worker(Agent *a, const WorkerKey *k)
{
    for (size_t i = 0; i < a->n_w; i++)
        if (worker_key_eq(&a->w[i]->key, k))
            return a->w[i];
    return NULL;
}

static bool was_forgotten(const Agent *a, const WorkerKey *k)
{
    for (size_t i = 0; i < a->n_forgotten; i++)
        if (worker_key_eq(&a->forgotten[i], k))
            return true;
    return false;
}

static void remember_forgotten(Agent *a, const WorkerKey *k)
{
    a->forgotten[a->forgotten_next] = *k;
    a->forgotten_next = (a->forgotten_next + 1) % FORGOTTEN_MAX;
    if (a->n_forgotten < FORGOTTEN_MAX)
        a->n_forgotten++;
}

static void remove_worker(Agent *a, size_t i)
{
    if (a->w[i]->state != WK_PENDING)
        mark_dirty(a);
    if (a->w[i]->exit_path && worker_ended(a->w[i]))
        unlink(a->w[i]->exit_path); /* read already: the end is in the table */
    worker_free(a->w[i]);
    memmove(&a->w[i], &a->w[i + 1], (a->n_w - i - 1) * sizeof(*a->w));
    a->n_w--;
}

#define WLOG(fn, w, fmt, ...)                                                                      \
    fn("event=" fmt " job=%lld run=%lld rank=%u", ##__VA_ARGS__, (long long)(w)->key.job,          \
       (long long)(w)->key.run, (w)->key.rank)

/* ---- GPUs and MIG ---- */

static void refresh_gpu(Agent *a, AgentGpu *g)
{
    Buf err = {0};
    bool enabled;
    GpuInstance inst[MIG_MAX_SLOTS];
    size_t n;
    if (a->gb->ops->mig_list(a->gb, g->index, &enabled, inst, &n, &err) == 0) {
        g->mig_enabled = enabled;
        g->n_mig = n;
        memcpy(g->mig, inst, n * sizeof(*inst));
    } else {
        log_error("event=gpu_list gpu=%u error=\"%s\"", g->index, buf_str(&err));
    }
    buf_free(&err);
}

/* Log a MIG failure for a GPU when it differs from the last one; NULL: it cleared. */
static void mig_note(Agent *a, size_t gi, const char *error)
{
    char **last = &a->mig_error[gi];
    if (!error) {
        if (*last)
            log_info("event=mig_ok gpu=%u", a->gpus[gi].index);
        free(*last);
        *last = NULL;
        return;
    }
    if (*last && !strcmp(*last, error))
        return;
    log_error("event=mig_apply gpu=%u error=\"%s\"", a->gpus[gi].index, error);
    free(*last);
    *last = strdup(error);
}

/* Start masks of GPU index's instances that running workers use, and whether a running
 * worker holds the GPU whole or as an MPS share. */
static void gpu_usage(const Agent *a, unsigned index, uint8_t *ret_busy, bool *ret_whole)
{
    uint8_t busy = 0;
    bool whole = false;
    for (size_t i = 0; i < a->n_w; i++) {
        const Worker *w = a->w[i];
        if (!worker_live(w))
            continue;
        for (size_t k = 0; k < w->a.n_gpus; k++) {
            const WorkerGpu *g = &w->a.gpus[k];
            if (g->index != index)
                continue;
            if (g->kind == WGPU_MIG)
                busy |= (uint8_t)(1u << g->start);
            else
                whole = true;
        }
    }
    *ret_busy = busy;
    *ret_whole = whole;
}

/* What the live workers hold of GPU g (GpuLoad): whole GPUs, MPS fractions and MIG
 * instances by their compute slices. */
static GpuLoad gpu_load(const Agent *a, const AgentGpu *g)
{
    GpuLoad l = {0};
    for (size_t i = 0; i < a->n_w; i++) {
        const Worker *w = a->w[i];
        if (!worker_live(w))
            continue;
        for (size_t k = 0; k < w->a.n_gpus; k++) {
            const WorkerGpu *wg = &w->a.gpus[k];
            if (wg->index != g->index)
                continue;
            if (wg->kind == WGPU_WHOLE)
                l.share += 1;
            else if (wg->kind == WGPU_SHARE)
                l.share += wg->fraction;
            else if (!((l.mig_busy >> wg->start) & 1)) {
                l.mig_busy |= (uint8_t)(1u << wg->start);
                int p = g->model ? catalog_profile_index(g->model, wg->profile) : -1;
                if (p >= 0 && g->model->mig_compute_slices)
                    l.share +=
                        (double)g->model->profiles[p].compute_slices / g->model->mig_compute_slices;
            }
        }
    }
    if (l.share > 1)
        l.share = 1;
    return l;
}

/* Each GPU's readings, taken once per heartbeat so the report carries them fresh. A
 * GPU that cannot be read reports none this time. */
static void sample_gpus(Agent *a)
{
    if (!a->gb->ops->sample)
        return;
    for (size_t i = 0; i < a->n_gpus; i++) {
        AgentGpu *g = &a->gpus[i];
        GpuLoad load = gpu_load(a, g);
        Buf err = {0};
        GpuSample s;
        if (a->gb->ops->sample(a->gb, g, &load, &s, &err) == 0)
            g->sample = s;
        else {
            /* logged when readings stop, not at every heartbeat they stay away */
            if (g->sample.has_busy || g->sample.has_memory)
                log_error("event=gpu_sample gpu=%u error=\"%s\"", g->index, buf_str(&err));
            g->sample = (GpuSample){0};
        }
        buf_free(&err);
    }
}

/* A change can take seconds per GPU (2 s simulated); past AGENT_MIG_BUDGET_MS the rest
 * waits for the next heartbeat, so the node keeps reporting while it reconfigures. The
 * next heartbeat begins where this one stopped, so a slow GPU cannot starve the rest. */
static void apply_mig(Agent *a, const HeartbeatReply *rep)
{
    int64_t began = agent_mono_ms();
    size_t first = a->mig_next < a->n_gpus ? a->mig_next : 0;
    for (size_t k = 0; k < a->n_gpus; k++) {
        size_t gi = (first + k) % a->n_gpus;
        AgentGpu *g = &a->gpus[gi];
        const MigWant *want = proto_mig_want(rep, g->index);
        if (!g->mig_capable) {
            mig_note(a, gi, want && want->n ? "this GPU has no MIG" : NULL);
            continue;
        }
        Buf err = {0};
        MigLayout target, cur;
        if (proto_mig_layout(want, g->model, &target, &err) < 0) {
            mig_note(a, gi, buf_str(&err));
            buf_free(&err);
            continue;
        }
        bool same = gpu_layout(g, &cur, &err) == 0 && !memcmp(&cur, &target, sizeof(cur)) &&
                    g->mig_enabled == !mig_layout_empty(&target);
        buf_reset(&err);
        if (same) {
            mig_note(a, gi, NULL);
            buf_free(&err);
            continue;
        }
        uint8_t busy;
        bool whole;
        gpu_usage(a, g->index, &busy, &whole);
        if (whole && g->mig_enabled != !mig_layout_empty(&target)) {
            buf_printf(&err, "GPU %u: MIG mode cannot change while a worker holds the GPU",
                       g->index);
            mig_note(a, gi, buf_str(&err));
            buf_free(&err);
            continue;
        }
        int64_t t0 = agent_mono_ms();
        if (t0 - began >= AGENT_MIG_BUDGET_MS) {
            a->mig_next = gi;
            buf_free(&err);
            break;
        }
        Buf text = {0};
        if (g->model)
            render_text_layout(&text, g->model, &target);
        int r = a->gb->ops->mig_apply(a->gb, g->index, &target, busy, &err);
        refresh_gpu(a, g);
        if (r < 0) {
            mig_note(a, gi, buf_str(&err));
        } else {
            log_info("event=mig_applied gpu=%u layout=\"%s\" ms=%lld", g->index, buf_str(&text),
                     (long long)(agent_mono_ms() - t0));
            mig_note(a, gi, NULL);
        }
        buf_free(&text);
        buf_free(&err);
    }
}

/* ---- workers ---- */

/* What the keeper needs to start a worker (launch_worker), in its copy of the agent. */
typedef struct StartArgs {
    const LaunchPolicy *policy;
    const Assignment *a;
    const char *ckpt_dir;
    char *const *env;
    const char *log_path;
} StartArgs;

static int start_worker(void *arg, pid_t *ret_pid, Buf *err)
{
    const StartArgs *s = arg;
    return launch_worker(s->policy, s->a, s->ckpt_dir, s->env, s->log_path, ret_pid, err);
}

/* One line at start: what discovery found, and the kind it would infer without a
 * label, so an operator sees why a worker did or did not get NCCL settings. */
static void log_fabric(const FabricInfo *f)
{
    size_t active = 0, up = 0;
    for (size_t i = 0; i < f->n_ports; i++)
        active += f->ports[i].active;
    for (size_t i = 0; i < f->n_ifs; i++)
        up += f->ifs[i].up;
    log_info("event=fabric rdma_ports=%zu active=%zu interfaces=%zu up=%zu inferred=%s", f->n_ports,
             active, f->n_ifs, up, nccl_fabric_kind_name(nccl_fabric_kind_infer(f)));
}

/* The GPU w holds an MPS share of, or -1 (a share is of one GPU). */
static int shared_gpu(const Worker *w)
{
    for (size_t i = 0; i < w->a.n_gpus; i++)
        if (w->a.gpus[i].kind == WGPU_SHARE)
            return (int)w->a.gpus[i].index;
    return -1;
}

/* NAME=value into a launch_env list: in place of a NAME there, else at the end. */
static int env_put_var(char ***env, const char *name, const char *value)
{
    size_t nl = strlen(name), n = 0;
    char *kv = malloc(nl + strlen(value) + 2);
    if (!kv)
        return -ENOMEM;
    sprintf(kv, "%s=%s", name, value);
    for (; *env && (*env)[n]; n++)
        if (!strncmp((*env)[n], name, nl) && (*env)[n][nl] == '=') {
            free((*env)[n]);
            (*env)[n] = kv;
            return 0;
        }
    char **v = realloc(*env, (n + 2) * sizeof(*v));
    if (!v) {
        free(kv);
        return -ENOMEM;
    }
    v[n] = kv;
    v[n + 1] = NULL;
    *env = v;
    return 0;
}

/* launch_env with the node's NCCL settings for w's fabric (nccl_fabric.h) when its run
 * spans nodes, and for a share its GPU's MPS daemon. Cheap: the table is applied to
 * what discovery read at start. */
static int worker_env(Agent *a, Worker *w, const char *ckpt_dir, char ***ret_env, Buf *err)
{
    char **fabric = NULL;
    int r = w->a.multi_node ? nccl_fabric_env(&a->fabric, w->a.fabric, &fabric) : 0;
    if (r < 0) {
        buf_puts(err, "out of memory");
        return r;
    }
    r = launch_env(&w->a, a->gpus, a->n_gpus, ckpt_dir, environ, fabric, ret_env, err);
    nccl_fabric_env_free(fabric);
    /* a share talks to its GPU's MPS daemon through these: the agent's, not the job's */
    int gi = r == 0 ? shared_gpu(w) : -1;
    const MpsDaemon *d = gi < 0 ? NULL : mps_of(&a->mps, (unsigned)gi);
    if (d && (env_put_var(ret_env, "CUDA_MPS_PIPE_DIRECTORY", d->pipe_dir) < 0 ||
              env_put_var(ret_env, "CUDA_MPS_LOG_DIRECTORY", d->log_dir) < 0)) {
        launch_env_free(*ret_env);
        *ret_env = NULL;
        buf_puts(err, "out of memory");
        return -ENOMEM;
    }
    return r;
}

/* A share's limits bind only under an MPS daemon: its GPU's is started first. */
static int ensure_mps(Agent *a, const Worker *w, Buf *err)
{
    int gi = shared_gpu(w);
    /* simulated GPUs have no MPS to run, but for a test's stand-in */
    if (gi < 0 || (strcmp(a->gb->ops->name, "nvml") && !a->mps.stand_in))
        return 0;
    for (size_t i = 0; i < a->n_gpus; i++)
        if (a->gpus[i].index == (unsigned)gi)
            return mps_ensure(&a->mps, a->gb, &a->gpus[i], err);
    return 0; /* launch_env names the GPU that does not exist */
}

/* Daemons whose GPU no live worker shares any more are stopped; one that died is a
 * fault of its GPU (its clients' contexts went with it), reported as the GPU's health. */
static void tidy_mps(Agent *a)
{
    unsigned gi;
    int status;
    while (mps_reap(&a->mps, &gi, &status) == 1) {
        log_error("event=mps_daemon_exited gpu=%u status=%d", gi, status);
        for (size_t i = 0; i < a->n_gpus; i++)
            if (a->gpus[i].index == gi && !a->gpus[i].health[0])
                snprintf(a->gpus[i].health, sizeof(a->gpus[i].health),
                         "the MPS control daemon exited");
        a->next_heartbeat = agent_mono_ms();
    }
    if (!mps_any(&a->mps))
        return;
    for (size_t i = 0; i < a->n_gpus; i++) {
        unsigned idx = a->gpus[i].index;
        if (!mps_of(&a->mps, idx))
            continue;
        bool used = false;
        for (size_t k = 0; k < a->n_w && !used; k++)
            used = (worker_live(a->w[k]) || a->w[k]->state == WK_PENDING) &&
                   shared_gpu(a->w[k]) == (int)idx;
        if (!used)
            mps_stop(&a->mps, a->gb, idx);
    }
}

static void try_launch(Agent *a, Worker *w, int64_t mono)
{
    Buf err = {0};
    char **env = NULL;
    int r = worker_env(a, w, "", &env, &err);
    launch_env_free(env);
    env = NULL;
    if (r == -EAGAIN) {
        if (!w->pending_since) {
            w->pending_since = mono;
            WLOG(log_info, w, "worker_waits reason=\"%s\"", buf_str(&err));
        } else if (mono - w->pending_since >= AGENT_PENDING_MAX_MS) {
            Buf why = {0};
            buf_printf(&why, "its GPUs did not take the granted shape within %d s: %s",
                       AGENT_PENDING_MAX_MS / 1000, buf_str(&err));
            worker_failed(w, buf_str(&why));
            WLOG(log_error, w, "worker_failed error=\"%s\"", buf_str(&why));
            buf_free(&why);
            mark_dirty(a);
        }
        buf_free(&err);
        return;
    }
    if (r < 0) {
        worker_failed(w, buf_str(&err));
        WLOG(log_error, w, "worker_failed error=\"%s\"", buf_str(&err));
        mark_dirty(a);
        buf_free(&err);
        return;
    }
    char name[128];
    snprintf(name, sizeof(name), "%lld", (long long)w->key.job);
    w->ckpt_dir = join(a->ckpt_root, name);
    snprintf(name, sizeof(name), "%lld-%u.log", (long long)w->key.job, w->key.rank);
    w->log_path = join(a->logs_dir, name);
    /* this agent process's id in the name: a keeper of an earlier agent (of another
     * server, even) never writes where this one reads */
    snprintf(name, sizeof(name), "%lld-%lld-%u.%.36s", (long long)w->key.job, (long long)w->key.run,
             w->key.rank, a->boot_id);
    char *exit_path = join(a->exits_dir, name);
    if (!w->ckpt_dir || !w->log_path || !exit_path) {
        free(exit_path);
        worker_failed(w, "out of memory");
        mark_dirty(a);
        return;
    }
    if ((r = afile_mkdir_p(w->ckpt_dir)) < 0) {
        buf_printf(&err, "cannot make the checkpoint directory %s: %s", w->ckpt_dir, strerror(-r));
    } else if ((r = ensure_mps(a, w, &err)) < 0) {
        /* a share without its daemon would run unbounded: not started */
    } else if ((r = worker_env(a, w, w->ckpt_dir, &env, &err)) == 0) {
        struct stat st;
        w->log_base = stat(w->log_path, &st) == 0 ? (int64_t)st.st_size : 0;
        w->log_sent = 0;
        pid_t pid, keeper;
        worker_starting(w);
        /* a record of the same worker left by an earlier server's run is not this end */
        unlink(exit_path);
        StartArgs sa = {&a->launch, &w->a, w->ckpt_dir, env, w->log_path};
        r = keeper_spawn(start_worker, &sa, a->lock_fd, w->log_path, exit_path, &keeper, &pid,
                         &err);
        if (r == 0) {
            worker_started(w, pid, mono);
            worker_kept(w, keeper, exit_path);
            WLOG(log_info, w, "worker_start pid=%d keeper=%d command=\"%s\"", (int)pid, (int)keeper,
                 w->a.argv[0]);
            /* on disk at once, not after the round's other starts: an agent killed in
             * between would not know this worker, start it again beside the first and
             * never read its keeper's record */
            mark_dirty(a);
            save_table(a);
        }
    }
    free(exit_path);
    launch_env_free(env);
    if (r < 0) {
        worker_failed(w, buf_str(&err));
        WLOG(log_error, w, "worker_failed error=\"%s\"", buf_str(&err));
    }
    mark_dirty(a);
    buf_free(&err);
}

/* Once an upload could not reach the server (logs_down), the round sends no more:
 * each would wait out the HTTP timeout while reaping and SIGKILL deadlines slip. The
 * next heartbeat's round tries again. */
static void flush_logs(Agent *a, Worker *w, bool quiet)
{
    if (a->logs_down)
        return;
    Buf err = {0};
    int status = 0;
    int r = upload_log(a->http, w, &status, &err);
    if (r < 0 && !status) {
        a->logs_down = true;
    } else if (r < 0 && status != w->log_status) {
        w->log_status = status;
        if (!quiet)
            log_error("event=log_upload error=\"%s\"", buf_str(&err));
    } else if (status == 200) {
        w->log_status = 0;
    }
    /* log_sent is not worth an fsync of the table per heartbeat: it is saved with the
     * next change or at exit, and a server ignores bytes it already holds */
    buf_free(&err);
}

static void apply_forget(Agent *a, const HeartbeatReply *rep)
{
    for (size_t f = 0; f < rep->n_forget; f++) {
        remember_forgotten(a, &rep->forget[f]);
        for (size_t i = 0; i < a->n_w; i++) {
            Worker *w = a->w[i];
            if (!worker_key_eq(&w->key, &rep->forget[f]) || worker_live(w))
                continue;
            flush_logs(a, w, true); /* the last bytes, before the record goes */
            WLOG(log_info, w, "worker_forget");
            remove_worker(a, i);
            break;
        }
    }
}

/* The grace of a stop is the one the stop comes with, not the one the worker started
 * with: the server shortens it to fit an interruption notice. The agent's own notice
 * bounds it too, should the server not know of it yet. rw is NULL for a worker the
 * server no longer lists. */
static void stop_grace(Agent *a, Worker *w, const ReplyWorker *rw)
{
    if (!w->a.argv)
        return;
    json_t *g = rw ? json_object_get(rw->spec, "grace_ms") : NULL;
    if (json_is_integer(g) && json_integer_value(g) >= 0)
        w->a.grace_ms = json_integer_value(g);
    const Notice *n = notice_watch_notice(a->notice);
    if (n)
        w->a.grace_ms = MIN(w->a.grace_ms, MAX(n->deadline_ms - agent_wall_ms(), 0));
}

/* Begin a stop, or shorten one under way: every reply that marks a running worker
 * stopped (or no longer lists it) carries the grace as it is now. */
static void stop_worker(Agent *a, Worker *w, const ReplyWorker *rw, uint8_t mode, int64_t mono)
{
    stop_grace(a, w, rw);
    int64_t grace = w->a.argv ? w->a.grace_ms : ASSIGN_DEFAULT_GRACE_MS;
    if (w->stop_mode == mode || w->stop_mode == WSTOP_CANCEL) {
        int64_t before = w->stop_deadline;
        worker_request_stop(w, mode, mono);
        if (w->stop_deadline < before)
            WLOG(log_info, w, "worker_stop_shortened grace_ms=%lld", (long long)grace);
        return;
    }
    if (rw)
        WLOG(log_info, w, "worker_stop mode=%s grace_ms=%lld",
             mode == WSTOP_PREEMPT ? "preempt" : "cancel", (long long)grace);
    else
        WLOG(log_info, w,
             "worker_stop mode=cancel grace_ms=%lld reason=\"not assigned to this "
             "node\"",
             (long long)grace);
    worker_request_stop(w, mode, mono);
}

static void apply_workers(Agent *a, const HeartbeatReply *rep, int64_t mono)
{
    for (size_t i = 0; i < rep->n_workers; i++) {
        const ReplyWorker *rw = &rep->workers[i];
        Worker *w = find_worker(a, &rw->key);
        if (w) {
            if (rw->stop != WSTOP_NONE && w->state == WK_PENDING) {
                /* never ran: dropping it is the whole stop */
                WLOG(log_info, w, "worker_stop mode=%s reason=\"had not started\"",
                     rw->stop == WSTOP_PREEMPT ? "preempt" : "cancel");
                for (size_t k = 0; k < a->n_w; k++)
                    if (a->w[k] == w)
                        remove_worker(a, k);
            } else if (rw->stop != WSTOP_NONE && worker_live(w)) {
                stop_worker(a, w, rw, rw->stop, mono);
            }
            continue;
        }
        if (rw->stop != WSTOP_NONE || was_forgotten(a, &rw->key) || a->shutdown)
            continue;
        if (GROW(a->w, a->cap_w, a->n_w + 1) < 0 || !(w = worker_new(&rw->key, rw->spec))) {
            log_error("event=worker_start error=\"out of memory\"");
            return;
        }
        a->w[a->n_w++] = w;
        if (w->state == WK_FAILED) {
            WLOG(log_error, w, "worker_failed error=\"%s\"", w->error);
            mark_dirty(a);
        }
    }
    if (rep->n_unkeyed)
        log_error("event=reply_workers skipped=%zu error=\"entries without job, run and rank\"",
                  rep->n_unkeyed);
    /* what the server no longer lists: running ones are killed, waiting ones dropped */
    for (size_t i = 0; i < a->n_w;) {
        Worker *w = a->w[i];
        bool listed = false;
        for (size_t k = 0; k < rep->n_workers && !listed; k++)
            listed = worker_key_eq(&rep->workers[k].key, &w->key);
        if (!listed && w->state == WK_PENDING) {
            remove_worker(a, i);
            continue;
        }
        if (!listed && worker_live(w))
            stop_worker(a, w, NULL, WSTOP_CANCEL, mono);
        i++;
    }
    for (size_t i = 0; i < a->n_w && !a->shutdown; i++)
        if (a->w[i]->state == WK_PENDING)
            try_launch(a, a->w[i], mono);
}

/* The server is not the one the saved workers belong to (it was reinstalled, or its
 * database wiped): their jobs are another server's, whose ids this one reuses, so
 * matching them by id would take this server's job 1 for that one's. They are
 * dropped, and those still running are killed: no server will ever want them. A table
 * that named no server (new, or of an older agent) is taken to be this server's. */
static void server_changed(Agent *a, const char *id)
{
    if (a->server_id[0]) {
        size_t running = 0, n = a->n_w;
        for (size_t i = 0; i < a->n_w; i++)
            if (worker_live(a->w[i])) {
                worker_signal(a->w[i], SIGKILL);
                running++;
            }
        log_error("event=server_changed server_id=%s was=%s workers_dropped=%zu "
                  "workers_killed=%zu reason=\"the saved workers belong to another server\"",
                  id, a->server_id, n, running);
        while (a->n_w)
            remove_worker(a, a->n_w - 1);
        a->n_forgotten = a->forgotten_next = 0; /* keys of that server's jobs */
    }
    snprintf(a->server_id, sizeof(a->server_id), "%s", id);
    mark_dirty(a);
    save_table(a);
}

/* ---- the heartbeat ---- */

static void link_note(Agent *a, const char *error)
{
    if (!error) {
        if (a->link_error)
            log_info("event=server_ok");
        free(a->link_error);
        a->link_error = NULL;
        return;
    }
    if (a->link_error && !strcmp(a->link_error, error))
        return;
    log_error("event=server_unreachable error=\"%s\" workers_running=%zu", error,
              agent_worker_count(a, WK_RUNNING));
    free(a->link_error);
    a->link_error = strdup(error);
}

static void heartbeat_failed(Agent *a, int64_t mono, const char *error)
{
    link_note(a, error);
    a->backoff_ms =
        a->backoff_ms ? MIN(a->backoff_ms * 2, AGENT_BACKOFF_MAX_MS) : AGENT_FIRST_HEARTBEAT_MS;
    a->next_heartbeat = mono + a->backoff_ms;
}

/* The server answered, but refused the heartbeat (a 4xx: this node's GPUs are not what
 * the cluster file declares, a token for another node, ...). It is not away, so there
 * is no back-off: the agent asks again at its pace, and fixing the cause (the cluster
 * file, the agent's GPUs) clears it without a restart. Its workers keep running
 * meanwhile, as when the server is away. */
static void heartbeat_refused(Agent *a, int64_t mono, const char *error)
{
    link_note(a, NULL);
    a->backoff_ms = 0;
    if (!a->refusal || strcmp(a->refusal, error)) {
        log_error("event=heartbeat_refused error=\"%s\" workers_running=%zu action=retry", error,
                  agent_worker_count(a, WK_RUNNING));
        free(a->refusal);
        a->refusal = strdup(error);
    }
    a->next_heartbeat = mono + a->heartbeat_ms;
}

/* Is any worker still running or waiting to start? */
static bool any_worker_left(const Agent *a)
{
    for (size_t i = 0; i < a->n_w; i++)
        if (worker_live(a->w[i]) || a->w[i]->state == WK_PENDING)
            return true;
    return false;
}

/* Each GPU's health, before a heartbeat reports it. A reason once seen is kept until
 * the agent restarts: a sick GPU is brought back by a driver reset, an operator's act,
 * not by a quiet spell. */
static void poll_health(Agent *a)
{
    if (!a->gb->ops->health || !a->n_gpus)
        return;
    GpuHealth *h = calloc(a->n_gpus, sizeof(*h));
    Buf err = {0};
    if (h && a->gb->ops->health(a->gb, h, a->n_gpus, &err) == 0)
        for (size_t i = 0; i < a->n_gpus; i++) {
            AgentGpu *g = &a->gpus[i];
            if (g->health[0] || !h[i].why[0])
                continue;
            snprintf(g->health, sizeof(g->health), "%s", h[i].why);
            log_error("event=gpu_sick gpu=%u uuid=%s reason=\"%s\"", g->index, g->uuid, g->health);
        }
    else if (h)
        log_error("event=gpu_health_failed error=\"%s\"", buf_str(&err));
    free(h);
    buf_free(&err);
}

static void heartbeat(Agent *a, int64_t mono)
{
    poll_health(a);
    Buf body = {0}, err = {0};
    HttpReply rep = {0};
    HeartbeatReply hr = {0};
    /* the report the shutdown waits for: one that says every worker has ended */
    bool final = a->shutdown && !any_worker_left(a);
    sample_gpus(a);
    if (proto_heartbeat(a->node, a->address, a->boot_id, a->server_id, a->gpus, a->n_gpus, a->w,
                        a->n_w, notice_watch_notice(a->notice), a->shutdown, &body) < 0) {
        heartbeat_failed(a, mono, "out of memory building the heartbeat");
        goto out;
    }
    if (http_request(a->http, "POST", "/api/v1/agent/heartbeat", "application/json", buf_str(&body),
                     body.len, &rep, &err) < 0) {
        heartbeat_failed(a, mono, buf_str(&err));
        goto out;
    }
    if (rep.status != 200) {
        json_t *o = json_loadb(buf_str(&rep.body), rep.body.len, 0, NULL);
        const char *msg = json_string_value(json_object_get(o, "error"));
        buf_printf(&err, "the server answered %ld%s%s", rep.status, msg ? ": " : "",
                   msg ? msg : "");
        json_decref(o);
        if (rep.status >= 400 && rep.status < 500) {
            heartbeat_refused(a, mono, buf_str(&err));
            a->shutdown_told |= final; /* it will not take it: nothing more to tell */
        } else
            heartbeat_failed(a, mono, buf_str(&err));
        goto out;
    }
    if (proto_reply_parse(buf_str(&rep.body), rep.body.len, &hr, &err) < 0) {
        heartbeat_failed(a, mono, buf_str(&err));
        goto out;
    }
    link_note(a, NULL);
    if (a->refusal)
        log_info("event=heartbeat_accepted was=\"%s\"", a->refusal);
    free(a->refusal);
    a->refusal = NULL;
    a->backoff_ms = 0;
    a->heartbeat_ms = hr.heartbeat_ms;
    a->logs_down = false;
    a->shutdown_told |= final;
    if (hr.server_id && strcmp(hr.server_id, a->server_id))
        server_changed(a, hr.server_id);
    apply_forget(a, &hr);
    if (!a->shutdown) /* a node going down is not reconfigured */
        apply_mig(a, &hr);
    apply_workers(a, &hr, agent_mono_ms());
    /* before the uploads, which take seconds: a crash then must not start again the
     * workers just launched */
    save_table(a);
    for (size_t i = 0; i < a->n_w; i++)
        if (a->w[i]->state != WK_PENDING)
            flush_logs(a, a->w[i], false);
    a->next_heartbeat = mono + a->heartbeat_ms;
out:
    proto_reply_free(&hr);
    http_reply_free(&rep);
    buf_free(&body);
    buf_free(&err);
}

/* Peak GPU memory per worker: the processes of its group, summed. */
static void poll_memory(Agent *a)
{
    if (!a->gb->ops->processes)
        return;
    GpuProcess *procs = NULL;
    size_t n = 0;
    Buf err = {0};
    if (a->gb->ops->processes(a->gb, &procs, &n, &err) == 0) {
        for (size_t i = 0; i < a->n_w; i++) {
            Worker *w = a->w[i];
            if (!worker_live(w))
                continue;
            uint64_t sum = 0;
            for (size_t k = 0; k < n; k++)
                if (getpgid(procs[k].pid) == w->pid)
                    sum += procs[k].used_mib;
            if (sum > w->peak_memory_mib) {
                w->peak_memory_mib = sum;
                mark_dirty(a);
            }
        }
    }
    free(procs);
    buf_free(&err);
}

/* What worker_watch_checkpoint saw (WORKER_SAW_*), one line each. */
static void log_checkpoint(const Worker *w, int saw)
{
    if ((saw & WORKER_SAW_LATEST) && w->checkpoint)
        WLOG(log_info, w, "checkpoint path=\"%s\"", w->checkpoint);
    const CkptStep *last = ckpt_history_last(&w->ckpts);
    if ((saw & WORKER_SAW_STEP) && last)
        WLOG(log_info, w, "checkpoint step=%lld path=\"%s\"", (long long)last->step, last->path);
}

void agent_tick(Agent *a)
{
    int64_t mono = agent_mono_ms();
    for (size_t i = 0; i < a->n_w; i++) {
        Worker *w = a->w[i];
        if (!worker_live(w))
            continue;
        int saw = worker_watch_checkpoint(w);
        if (saw) {
            log_checkpoint(w, saw);
            mark_dirty(a);
        }
        int64_t seen = w->latest_mtime_ns;
        size_t steps = w->ckpts.n;
        const CkptStep *last = ckpt_history_last(&w->ckpts);
        int64_t last_step = last ? last->step : -1, last_ms = last ? last->ms : -1;
        if (worker_reap(w)) {
            last = ckpt_history_last(&w->ckpts);
            bool step_news =
                last && (w->ckpts.n != steps || last->step != last_step || last->ms != last_ms);
            log_checkpoint(w,
                           (w->checkpoint && w->latest_mtime_ns != seen ? WORKER_SAW_LATEST : 0) |
                               (step_news ? WORKER_SAW_STEP : 0));
            launch_worker_ended(&a->launch, w->key.job, w->key.run, w->key.rank);
            if (w->has_exit_code)
                WLOG(log_info, w, "worker_exit code=%d", w->exit_code);
            else if (w->signal)
                WLOG(log_info, w, "worker_exit signal=%d", w->signal);
            else
                WLOG(log_info, w, "worker_exit status=unknown reason=\"%s\"", w->error);
            mark_dirty(a);
            continue;
        }
        worker_advance(w, mono);
    }
    tidy_mps(a);
    if (mono >= a->next_memory_poll) {
        poll_memory(a);
        a->next_memory_poll = mono + MEMORY_POLL_MS;
    }
    /* a notice that appears (or clears) is told at once: the deadline is minutes away
     * at most, and the server needs them to move the node's jobs */
    if (a->notice && notice_watch_tick(a->notice, mono, agent_wall_ms()))
        a->next_heartbeat = mono;
    if (a->shutdown && !a->shutdown_idle_since && !any_worker_left(a)) {
        /* the last worker ended: tell the server now, not a heartbeat later */
        a->shutdown_idle_since = mono;
        a->next_heartbeat = mono;
        a->shutdown_told = false;
    }
    if (mono >= a->next_heartbeat)
        heartbeat(a, mono);
    save_table(a);
}

void agent_shutdown(Agent *a)
{
    if (a->shutdown)
        return;
    a->shutdown = true;
    int64_t mono = agent_mono_ms();
    size_t saving = 0, stopping = 0, dropped = 0;
    for (size_t i = 0; i < a->n_w;) {
        Worker *w = a->w[i];
        if (w->state == WK_PENDING) {
            /* never ran: there is nothing to stop, and the server requeues its job */
            WLOG(log_info, w, "worker_stop mode=drop reason=\"shutdown, had not started\"");
            remove_worker(a, i);
            dropped++;
            continue;
        }
        i++;
        if (!worker_live(w))
            continue;
        /* what can checkpoint is preempted (the checkpoint signal, up to its grace for
         * LATEST, then SIGTERM); the rest gets SIGTERM, then SIGKILL after its grace */
        bool saves = worker_checkpoints(w);
        w->shutdown = true;
        worker_request_stop(w, saves ? WSTOP_PREEMPT : WSTOP_CANCEL, mono);
        WLOG(log_info, w, "worker_stop mode=%s reason=shutdown grace_ms=%lld",
             saves ? "preempt" : "cancel", (long long)(w->a.argv ? w->a.grace_ms : 0));
        saving += saves;
        stopping += !saves;
        mark_dirty(a);
    }
    save_table(a);
    log_info("event=agent_shutdown workers_checkpointing=%zu workers_stopping=%zu "
             "workers_dropped=%zu",
             saving, stopping, dropped);
    a->next_heartbeat = mono; /* the server stops sending work here at once */
}

bool agent_shutdown_done(const Agent *a)
{
    if (!a->shutdown || any_worker_left(a))
        return false;
    return a->shutdown_told ||
           (a->shutdown_idle_since &&
            agent_mono_ms() - a->shutdown_idle_since >= AGENT_SHUTDOWN_REPORT_MS);
}

int64_t agent_wait_ms(const Agent *a)
{
    int64_t next = a->next_heartbeat;
    if (a->notice)
        next = MIN(next, notice_watch_next_ms(a->notice));
    int64_t left = next - agent_mono_ms();
    return left < 0 ? 0 : left < AGENT_TICK_MS ? left : AGENT_TICK_MS;
}

void agent_run(Agent *a, const volatile sig_atomic_t *stop)
{
    while (*stop != AGENT_STOP_LEAVE) {
        if (*stop == AGENT_STOP_SHUTDOWN)
            agent_shutdown(a);
        if (agent_shutdown_done(a))
            break;
        agent_tick(a);
        int64_t ms = agent_wait_ms(a);
        struct timespec ts = {.tv_sec = 0, .tv_nsec = ms * 1000000L};
        if (ms > 0)
            nanosleep(&ts, NULL); /* a signal cuts it short, and the loop sees quit */
    }
}

size_t agent_worker_count(const Agent *a, int state)
{
    size_t n = 0;
    for (size_t i = 0; i < a->n_w; i++)
        n += a->w[i]->state == state;
    return n;
}

/* ---- open and close ---- */

static int take_lock(Agent *a, Buf *err)
{
    char *path = join(a->state_dir, "agent.lock");
    if (!path)
        return -ENOMEM;
    /* close-on-exec: a worker must not keep the lock after the agent is gone */
    a->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    int r = 0;
    if (a->lock_fd < 0) {
        r = -errno;
        buf_printf(err, "%s: %s", path, strerror(-r));
    } else if (flock(a->lock_fd, LOCK_EX | LOCK_NB) < 0) {
        r = errno == EWOULDBLOCK ? -EBUSY : -errno;
        buf_printf(err, "another agent is running with the state directory %s", a->state_dir);
    } else {
        (void)!ftruncate(a->lock_fd, 0);
        dprintf(a->lock_fd, "%d\n", (int)getpid());
    }
    free(path);
    return r;
}

/* Records in exits/ that no worker of the table names (nor their temporary files): the
 * keepers' of workers dropped as another server's, whose ends no one will read. One whose keeper
 * still runs leaves its record later, for the next start to sweep. */
static void sweep_exits(Agent *a)
{
    DIR *d = opendir(a->exits_dir);
    if (!d)
        return;
    size_t swept = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        bool named = false;
        for (size_t i = 0; i < a->n_w && !named; i++) {
            const char *p = a->w[i]->exit_path, *slash = p ? strrchr(p, '/') : NULL;
            /* a prefix: the temporary file a keeper is writing its record through */
            named = slash && !strncmp(slash + 1, e->d_name, strlen(slash + 1));
        }
        if (!named && unlinkat(dirfd(d), e->d_name, 0) == 0)
            swept++;
    }
    closedir(d);
    if (swept)
        log_info("event=exits_swept dir=%s records=%zu", a->exits_dir, swept);
}

/* path made (with parents) and made absolute, so workers that change directory still
 * find their checkpoint directory. */
static int make_dir(const char *path, char **ret, Buf *err)
{
    int r = afile_mkdir_p(path);
    if (r < 0) {
        buf_printf(err, "cannot make the directory %s: %s", path, strerror(-r));
        return r;
    }
    char *abs = realpath(path, NULL);
    if (!abs) {
        r = -errno;
        buf_printf(err, "%s: %s", path, strerror(-r));
        return r;
    }
    *ret = abs;
    return 0;
}

/* An agent started with stdin, stdout or stderr closed would open its lock, sockets and
 * a worker's log or /dev/null on fds 0-2, and a worker's stdout would then be whatever
 * landed there (or be closed at exec). Open fds are left alone; open() takes the lowest
 * free number, so each closed one gets /dev/null in order. */
static int std_fds_open(Buf *err)
{
    for (int fd = 0; fd <= 2; fd++) {
        if (fcntl(fd, F_GETFD) >= 0 || errno != EBADF)
            continue;
        int n = open("/dev/null", O_RDWR);
        if (n < 0) {
            int r = -errno;
            buf_printf(err, "stdin, stdout or stderr is closed and /dev/null cannot be opened: %s",
                       strerror(-r));
            return r;
        }
        if (n != fd) { /* another thread took the number first */
            close(n);
            buf_puts(err, "stdin, stdout or stderr is closed and could not be reopened");
            return -EBADF;
        }
    }
    return 0;
}

/* Who workers run as, said once: an operator reads it at start (docs/agent.md). */
static int open_launch(Agent *a, const AgentOptions *o, Buf *err)
{
    int r = launch_policy_init(&a->launch, geteuid(), getegid(), o->worker_user, o->worker_group,
                               o->allow_root_workers, err);
    if (r < 0)
        return r;
    if (a->launch.agent_uid != 0) {
        log_info("event=workers_run_as uid=%u gid=%u reason=\"the agent is not root: every "
                 "worker runs as the agent's own user, and run_as mappings are not applied\"",
                 (unsigned)a->launch.agent_uid, (unsigned)a->launch.agent_gid);
    } else {
        log_info("event=workers_run_as default_uid=%u default_gid=%u allow_root=%s "
                 "reason=\"the team's run_as, else the default\"",
                 (unsigned)a->launch.default_uid, (unsigned)a->launch.default_gid,
                 a->launch.allow_root ? "yes" : "no");
    }
    Buf why = {0};
    CgroupTree *t = NULL;
    if (o->no_cgroups) {
        log_info("event=cgroups state=off reason=\"--no-cgroups\"");
    } else if (cgroup_tree_open(&t, &why) == 0) {
        a->launch.cgroups = t;
        cgroup_sweep(t); /* what workers that ended while no agent ran left behind */
        log_info("event=cgroups state=on path=%s", cgroup_tree_path(t));
    } else {
        log_info("event=cgroups state=off reason=\"%s\" action=\"memory and CPU are bounded by "
                 "rlimits only\"",
                 buf_str(&why));
    }
    buf_free(&why);
    return 0;
}

int agent_open(const AgentOptions *o, Agent **ret, Buf *err)
{
    int fr = std_fds_open(err);
    if (fr < 0)
        return fr;
    if (!o->node || !*o->node || strchr(o->node, '/') || strchr(o->node, '"')) {
        buf_puts(err, "the node name must be non-empty, without '/' or '\"'");
        return -EINVAL;
    }
    NoticeSource src = NOTICE_NONE;
    if (o->spot_notice && notice_source_parse(o->spot_notice, &src) < 0) {
        buf_printf(err, "--spot-notice '%s': expected none, aws, gcp or azure", o->spot_notice);
        return -EINVAL;
    }
    if (src == NOTICE_NONE && o->metadata_url) {
        buf_puts(err, "--metadata-url needs --spot-notice aws, gcp or azure");
        return -EINVAL;
    }
    Agent *a = calloc(1, sizeof(*a));
    if (!a) {
        buf_puts(err, "out of memory");
        return -ENOMEM;
    }
    a->lock_fd = -1;
    a->heartbeat_ms = AGENT_FIRST_HEARTBEAT_MS;
    fabric_discover(o->sysfs_root, &a->fabric);
    log_fabric(&a->fabric);
    int r;
    a->node = strdup(o->node);
    a->gpus_spec = strdup(o->gpus ? o->gpus : "nvml");
    a->address = o->address ? strdup(o->address) : NULL;
    if (!a->node || !a->gpus_spec || (o->address && !a->address)) {
        r = -ENOMEM;
        buf_puts(err, "out of memory");
        goto fail;
    }
    if ((r = make_dir(o->state_dir, &a->state_dir, err)) < 0)
        goto fail;
    mps_init(&a->mps, a->state_dir);
    if ((r = take_lock(a, err)) < 0)
        goto fail;
    char *logs = join(a->state_dir, "logs");
    char *ckpt =
        o->checkpoint_root ? strdup(o->checkpoint_root) : join(a->state_dir, "checkpoints");
    a->table_path = join(a->state_dir, "workers.json");
    char *exits = join(a->state_dir, "exits");
    if (!logs || !ckpt || !a->table_path || !exits) {
        free(logs);
        free(ckpt);
        free(exits);
        r = -ENOMEM;
        buf_puts(err, "out of memory");
        goto fail;
    }
    r = make_dir(logs, &a->logs_dir, err);
    if (!r)
        r = make_dir(ckpt, &a->ckpt_root, err);
    if (!r)
        r = make_dir(exits, &a->exits_dir, err);
    free(logs);
    free(ckpt);
    free(exits);
    if (r < 0)
        goto fail;

    read_id("/proc/sys/kernel/random/uuid", a->boot_id, sizeof(a->boot_id));
    read_id("/proc/sys/kernel/random/boot_id", a->machine_boot, sizeof(a->machine_boot));
    if (!a->boot_id[0])
        snprintf(a->boot_id, sizeof(a->boot_id), "%d-%lld", (int)getpid(),
                 (long long)agent_wall_ms());

    if ((r = gpus_open(a->gpus_spec, a->node, a->state_dir, &a->gb, err)) < 0)
        goto fail;
    if ((r = a->gb->ops->discover(a->gb, &a->gpus, &a->n_gpus, err)) < 0)
        goto fail;
    a->mig_error = calloc(a->n_gpus ? a->n_gpus : 1, sizeof(*a->mig_error));
    if (!a->mig_error) {
        r = -ENOMEM;
        buf_puts(err, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < a->n_gpus; i++) {
        const AgentGpu *g = &a->gpus[i];
        log_info("event=gpu index=%u uuid=%s name=\"%s\" memory_mib=%llu mig=%s instances=%zu",
                 g->index, g->uuid, g->name, (unsigned long long)g->memory_mib,
                 !g->mig_capable  ? "unsupported"
                 : g->mig_enabled ? "on"
                                  : "off",
                 g->n_mig);
    }

    if ((r = open_launch(a, o, err)) < 0)
        goto fail;

    Worker **loaded = NULL;
    size_t n_loaded = 0;
    if ((r = worker_table_load(a->table_path, a->machine_boot, a->server_id, &loaded, &n_loaded,
                               err)) < 0)
        goto fail;
    a->w = loaded;
    a->n_w = a->cap_w = n_loaded;
    a->table_loaded = true;
    for (size_t i = 0; i < a->n_w; i++) {
        Worker *w = a->w[i];
        if (w->adopted)
            WLOG(log_info, w, "worker_found pid=%d", (int)w->pid);
        else if (w->lost)
            WLOG(log_info, w, "worker_lost pid=%d reason=\"%s\"", (int)w->pid,
                 w->error ? w->error : "");
    }
    if (n_loaded)
        mark_dirty(a);
    sweep_exits(a);

    if ((r = http_client_new(o->server_url, o->token, AGENT_HTTP_TIMEOUT_MS, &a->http)) < 0) {
        if (r == -EINVAL)
            buf_printf(err,
                       "--server '%s': expected http://HOST:PORT (or up to 8, comma-separated)",
                       o->server_url);
        else
            buf_puts(err, "out of memory");
        goto fail;
    }
    if (src != NOTICE_NONE && (r = notice_watch_new(src, o->metadata_url, o->notice_poll_ms,
                                                    a->node, &a->notice, err)) < 0)
        goto fail;
    log_info("event=agent_start node=%s server=%s gpus=%s state_dir=%s boot_id=%s workers=%zu "
             "spot_notice=%s",
             a->node, o->server_url, a->gpus_spec, a->state_dir, a->boot_id, a->n_w,
             notice_source_name(src));
    *ret = a;
    return 0;
fail:
    agent_close(a);
    return r;
}

void agent_close(Agent *a)
{
    if (!a)
        return;
    if (a->table_loaded) {
        a->dirty = true; /* log offsets, saved only now */
        save_table(a);
    }
    /* workers left running (SIGHUP) keep their daemons; the next agent takes them up */
    bool left = false;
    for (size_t i = 0; i < a->n_w; i++)
        left |= worker_live(a->w[i]);
    if (!left && a->gb)
        mps_close(&a->mps, a->gb);
    for (size_t i = 0; i < a->n_w; i++)
        worker_free(a->w[i]);
    free(a->w);
    for (size_t i = 0; a->mig_error && i < a->n_gpus; i++)
        free(a->mig_error[i]);
    free(a->mig_error);
    free(a->gpus);
    gpus_close(a->gb);
    http_client_free(a->http);
    notice_watch_free(a->notice);
    launch_policy_free(&a->launch);
    if (a->lock_fd >= 0)
        close(a->lock_fd);
    free(a->link_error);
    free(a->refusal);
    free(a->node);
    free(a->address);
    free(a->gpus_spec);
    free(a->state_dir);
    free(a->ckpt_root);
    free(a->logs_dir);
    free(a->exits_dir);
    free(a->table_path);
    free(a);
}
