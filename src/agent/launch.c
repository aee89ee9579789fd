/* launch.c: a worker's environment and its fork/exec. Everything the child needs is
 * prepared before fork, so the child only calls async-signal-safe functions. */
#include "agent/launch.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

typedef struct EnvList {
    char **v; /* NULL-terminated once len > 0 */
    size_t len, cap;
    bool oom;
} EnvList;

static ssize_t env_find(const EnvList *e, const char *name, size_t nlen)
{
    for (size_t i = 0; i < e->len; i++)
        if (!strncmp(e->v[i], name, nlen) && e->v[i][nlen] == '=')
            return (ssize_t)i;
    return -1;
}

/* Add or replace "NAME=value" (entry is "NAME=value", taken over). */
static void env_put(EnvList *e, char *entry)
{
    if (!entry) {
        e->oom = true;
        return;
    }
    const char *eq = strchr(entry, '=');
    ssize_t at = eq ? env_find(e, entry, (size_t)(eq - entry)) : -1;
    if (at >= 0) {
        free(e->v[at]);
        e->v[at] = entry;
        return;
    }
    if (e->len + 2 > e->cap) {
        size_t cap = e->cap ? e->cap * 2 : 64;
        char **nv = realloc(e->v, cap * sizeof(*nv));
        if (!nv) {
            free(entry);
            e->oom = true;
            return;
        }
        e->v = nv;
        e->cap = cap;
    }
    e->v[e->len++] = entry;
    e->v[e->len] = NULL;
}

static void env_set(EnvList *e, const char *name, const char *value)
{
    size_t n = strlen(name) + strlen(value) + 2;
    char *s = malloc(n);
    if (s)
        snprintf(s, n, "%s=%s", name, value);
    env_put(e, s);
}

static void env_setf(EnvList *e, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void env_setf(EnvList *e, const char *name, const char *fmt, ...)
{
    Buf b = {0};
    va_list ap;
    va_start(ap, fmt);
    buf_vprintf(&b, fmt, ap);
    va_end(ap);
    if (b.oom)
        e->oom = true;
    else
        env_set(e, name, buf_str(&b));
    buf_free(&b);
}

static void env_unset(EnvList *e, const char *name)
{
    ssize_t at = env_find(e, name, strlen(name));
    if (at < 0)
        return;
    free(e->v[at]);
    memmove(&e->v[at], &e->v[at + 1], (e->len - (size_t)at) * sizeof(*e->v));
    e->len--;
}

void launch_env_free(char **env)
{
    for (char **p = env; p && *p; p++)
        free(*p);
    free(env);
}

/* The GPU memory of one MIG instance: its profile's, from the catalogue (NVML does
 * not say per instance what it said per GPU). 0 when the catalogue does not know the
 * model or the profile. */
static uint64_t mig_memory_mib(const AgentGpu *g, const char *profile)
{
    int p = g->model ? catalog_profile_index(g->model, profile) : -1;
    return p < 0 ? 0 : g->model->profiles[p].memory_mib;
}

/* CUDA_VISIBLE_DEVICES, the MPS limits and the GPU memory granted, from the grants.
 * *ret_memory_mib is 0 when there are no grants or one's memory is unknown: no figure
 * is better than a short one a serving engine would size its cache by. */
static int gpu_vars(const Assignment *a, const AgentGpu *gpus, size_t n_gpus, Buf *visible,
                    Buf *mem_limit, unsigned *ret_percent, uint64_t *ret_memory_mib, Buf *err)
{
    int again = 0;
    unsigned percent = 0;
    uint64_t memory = 0;
    bool memory_known = a->n_gpus > 0;
    for (size_t i = 0; i < a->n_gpus; i++) {
        const WorkerGpu *w = &a->gpus[i];
        const AgentGpu *g = gpu_by_index((AgentGpu *)gpus, n_gpus, w->index);
        if (!g) {
            buf_reset(err);
            buf_printf(err, "GPU %u does not exist on this node (it has %zu)", w->index, n_gpus);
            return -ENOENT;
        }
        const char *uuid = g->uuid;
        if (w->kind == WGPU_MIG) {
            const GpuInstance *in = gpu_instance(g, w->profile, w->start);
            if (!in) {
                if (!again)
                    buf_printf(err, "GPU %u has no %s instance at slot %u yet", w->index,
                               w->profile, w->start);
                again = -EAGAIN;
                continue;
            }
            uuid = in->uuid;
            uint64_t mib = mig_memory_mib(g, w->profile);
            memory += mib;
            memory_known = memory_known && mib;
        } else if (g->mig_enabled) {
            if (!again)
                buf_printf(err, "GPU %u is still in MIG mode", w->index);
            again = -EAGAIN;
            continue;
        }
        if (w->kind == WGPU_SHARE) {
            /* ceil(fraction x 100) without letting 0.3 x 100 = 30.000000000000004 become 31 */
            unsigned p = (unsigned)ceil(w->fraction * 100.0 - 1e-9);
            percent = p > percent ? p : percent;
            uint64_t mib = (uint64_t)floor((double)g->memory_mib * w->fraction + 1e-9);
            mib = mib ? mib : 1;
            buf_printf(mem_limit, "%s%s=%lluM", mem_limit->len ? "," : "", g->uuid,
                       (unsigned long long)mib);
            memory += mib;
            memory_known = memory_known && g->memory_mib;
        } else if (w->kind == WGPU_WHOLE) {
            memory += g->memory_mib;
            memory_known = memory_known && g->memory_mib;
        }
        buf_printf(visible, "%s%s", visible->len ? "," : "", uuid);
    }
    *ret_percent = percent ? percent : 1;
    *ret_memory_mib = memory_known ? memory : 0;
    return again;
}

int launch_env(const Assignment *a, const AgentGpu *gpus, size_t n_gpus, const char *checkpoint_dir,
               char *const *base, char ***ret_env, Buf *err)
{
    Buf visible = {0}, mem_limit = {0};
    unsigned percent = 0;
    uint64_t memory_mib = 0;
    int r = gpu_vars(a, gpus, n_gpus, &visible, &mem_limit, &percent, &memory_mib, err);
    if (r < 0) {
        buf_free(&visible);
        buf_free(&mem_limit);
        return r;
    }
    EnvList e = {0};
    for (char *const *p = base; p && *p; p++)
        if (strchr(*p, '=') && strncmp(*p, "GPUORCH_TOKEN=", 14)) /* the agent's secret */
            env_put(&e, strdup(*p));
    for (char **p = a->env; p && *p; p++)
        env_put(&e, strdup(*p));
    env_set(&e, "CUDA_VISIBLE_DEVICES", buf_str(&visible));
    if (mem_limit.len) {
        env_setf(&e, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "%u", percent);
        env_set(&e, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", buf_str(&mem_limit));
    }
    if (memory_mib)
        env_setf(&e, "GPUORCH_GPU_MEMORY_MIB", "%llu", (unsigned long long)memory_mib);
    else
        env_unset(&e, "GPUORCH_GPU_MEMORY_MIB");
    env_setf(&e, "GPUORCH_JOB_ID", "%lld", (long long)a->job);
    env_setf(&e, "GPUORCH_RUN", "%lld", (long long)a->run);
    env_setf(&e, "RANK", "%u", a->rank);
    env_setf(&e, "LOCAL_RANK", "%u", a->local_rank);
    env_setf(&e, "WORLD_SIZE", "%u", a->world_size);
    env_set(&e, "MASTER_ADDR", a->master_addr ? a->master_addr : "127.0.0.1");
    env_setf(&e, "MASTER_PORT", "%u", a->master_port);
    env_set(&e, "GPUORCH_CHECKPOINT_DIR", checkpoint_dir);
    if (a->resume_from)
        env_set(&e, "GPUORCH_RESUME_FROM", a->resume_from);
    else
        env_unset(&e, "GPUORCH_RESUME_FROM");
    bool oom = e.oom || visible.oom || mem_limit.oom;
    buf_free(&visible);
    buf_free(&mem_limit);
    if (oom) {
        launch_env_free(e.v);
        buf_puts(err, "out of memory");
        return -ENOMEM;
    }
    *ret_env = e.v;
    return 0;
}

/* In the child: every descriptor past stderr closes on exec (curl's sockets, the
 * agent's lock file), so a worker holds nothing of the agent's. */
static void cloexec_from_3(void)
{
#ifdef CLOSE_RANGE_CLOEXEC
    if (close_range(3, ~0u, CLOSE_RANGE_CLOEXEC) == 0)
        return;
#endif
    for (int fd = 3; fd < 4096; fd++) {
        int fl = fcntl(fd, F_GETFD);
        if (fl >= 0)
            fcntl(fd, F_SETFD, fl | FD_CLOEXEC);
    }
}

static _Noreturn void child(char *const *argv, char *const *env, int logfd, int nullfd, int errfd)
{
    setpgid(0, 0);
    /* the agent's dispositions and mask must not leak: an ignored SIGPIPE or a
     * blocked SIGTERM is inherited across exec */
    struct sigaction dfl = {.sa_handler = SIG_DFL};
    for (int s = 1; s < NSIG; s++)
        if (s != SIGKILL && s != SIGSTOP)
            sigaction(s, &dfl, NULL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    if (dup2(nullfd, 0) < 0 || dup2(logfd, 1) < 0 || dup2(logfd, 2) < 0) {
        int e = errno;
        (void)!write(errfd, &e, sizeof(e));
        _exit(127);
    }
    cloexec_from_3();
    environ = (char **)env;
    execvp(argv[0], argv);
    int e = errno;
    (void)!write(errfd, &e, sizeof(e));
    _exit(127);
}

int launch_spawn(char *const *argv, char *const *env, const char *log_path, pid_t *ret_pid,
                 Buf *err)
{
    int logfd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (logfd < 0) {
        int e = errno;
        buf_printf(err, "cannot open the log %s: %s", log_path, strerror(e));
        return -e;
    }
    int nullfd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    int pfd[2] = {-1, -1};
    if (nullfd < 0 || pipe2(pfd, O_CLOEXEC) < 0) {
        int e = errno;
        buf_printf(err, "cannot start '%s': %s", argv[0], strerror(e));
        close(logfd);
        if (nullfd >= 0)
            close(nullfd);
        return -e;
    }
    pid_t pid = fork();
    if (pid == 0)
        child(argv, env, logfd, nullfd, pfd[1]);
    int r = 0;
    if (pid < 0) {
        r = -errno;
        buf_printf(err, "cannot start '%s': fork: %s", argv[0], strerror(-r));
    } else {
        setpgid(pid, pid); /* also here: no signal may reach the group before it exists */
        close(pfd[1]);
        pfd[1] = -1;
        int e = 0;
        ssize_t n;
        do
            n = read(pfd[0], &e, sizeof(e));
        while (n < 0 && errno == EINTR);
        if (n == (ssize_t)sizeof(e)) {
            r = e > 0 ? -e : -EIO;
            buf_printf(err, "cannot run '%s': %s", argv[0], strerror(-r));
            dprintf(logfd, "gpuorch agent: %s\n", buf_str(err));
            while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
            }
        }
    }
    if (pfd[1] >= 0)
        close(pfd[1]);
    close(pfd[0]);
    close(nullfd);
    close(logfd);
    if (r == 0)
        *ret_pid = pid;
    return r;
}
