/* launch.c: a worker's environment, identity and limits, and its fork/exec. Everything
 * the child needs is prepared before fork, so the child only calls async-signal-safe
 * functions (setgroups, setgid, setuid, setrlimit, prctl, write, dup2, execve). */
#include "agent/launch.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <math.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
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
               char *const *base, char *const *fabric, char ***ret_env, Buf *err)
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
    for (char *const *p = fabric; a->multi_node && p && *p; p++)
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

/* ---- who the worker runs as, and its limits ---- */

/* A number ("65534") as an id; false when id is not all digits or out of range. */
static bool parse_id(const char *s, uint32_t *ret)
{
    if (!s || !*s || strspn(s, "0123456789") != strlen(s) || strlen(s) > 10)
        return false;
    unsigned long long v = strtoull(s, NULL, 10);
    if (v > ASSIGN_MAX_ID)
        return false;
    *ret = (uint32_t)v;
    return true;
}

int launch_policy_init(LaunchPolicy *p, uid_t euid, gid_t egid, const char *user, const char *group,
                       bool allow_root, Buf *err)
{
    *p = (LaunchPolicy){
        .agent_uid = euid,
        .agent_gid = egid,
        .default_uid = euid,
        .default_gid = egid,
        .allow_root = allow_root,
        .nofile = LAUNCH_NOFILE,
        .nproc = LAUNCH_NPROC,
    };
    if (euid != 0)
        return 0; /* it cannot switch: every worker runs as the agent */
    const char *u = user ? user : "nobody";
    uint32_t id;
    bool have_gid = false;
    if (parse_id(u, &id)) {
        p->default_uid = id;
        struct passwd *pw = getpwuid(id);
        if (pw) {
            p->default_gid = pw->pw_gid;
            have_gid = true;
        }
    } else {
        struct passwd *pw = getpwnam(u);
        if (!pw) {
            buf_printf(err, "--worker-user '%s': no such user on this machine", u);
            return -EINVAL;
        }
        p->default_uid = pw->pw_uid;
        p->default_gid = pw->pw_gid;
        have_gid = true;
    }
    if (!user && !group) {
        struct group *gr = getgrnam("nogroup"); /* Debian's; elsewhere nobody's own group */
        if (gr)
            p->default_gid = gr->gr_gid;
    }
    if (group) {
        if (parse_id(group, &id)) {
            p->default_gid = id;
        } else {
            struct group *gr = getgrnam(group);
            if (!gr) {
                buf_printf(err, "--worker-group '%s': no such group on this machine", group);
                return -EINVAL;
            }
            p->default_gid = gr->gr_gid;
        }
    } else if (!have_gid) {
        buf_printf(err, "--worker-user '%s' has no entry in the user database: give --worker-group",
                   u);
        return -EINVAL;
    }
    return 0;
}

void launch_policy_free(LaunchPolicy *p)
{
    if (!p)
        return;
    cgroup_tree_free(p->cgroups);
    p->cgroups = NULL;
}

int launch_cred(const LaunchPolicy *p, const Assignment *a, LaunchCred *ret, Buf *err)
{
    LaunchCred c = {.uid = p->agent_uid, .gid = p->agent_gid};
    if (p->agent_uid == 0) {
        c.change = true;
        c.mapped = a->has_user;
        c.uid = a->has_user ? a->uid : p->default_uid;
        c.gid = a->has_user ? a->gid : p->default_gid;
        for (size_t i = 0; a->has_user && i < a->n_groups && i < ASSIGN_MAX_GROUPS; i++)
            c.groups[c.n_groups++] = a->groups[i];
        bool root_group = c.gid == 0;
        for (size_t i = 0; i < c.n_groups; i++)
            root_group |= c.groups[i] == 0;
        if ((c.uid == 0 || root_group) && !p->allow_root) {
            buf_printf(err,
                       "refusing to run a worker as %s (%s): map the team to an unprivileged "
                       "user (run_as in the cluster spec), or start the agent with "
                       "--allow-root-workers",
                       c.uid == 0 ? "root (uid 0)" : "group 0 (root)",
                       c.mapped ? "its team's run_as" : "the agent's --worker-user");
            return -EPERM;
        }
    }
    *ret = c;
    return 0;
}

static uint64_t at_most(uint64_t want, uint64_t hard)
{
    return hard && want > hard ? hard : want;
}

void launch_limits(const LaunchPolicy *p, const Assignment *a, bool in_cgroup,
                   const LaunchLimits *hard, LaunchLimits *ret)
{
    *ret = (LaunchLimits){
        .nofile = at_most(p->nofile, hard->nofile),
        .nproc = p->nproc ? at_most(p->nproc, hard->nproc) : 0,
        .data_bytes = !in_cgroup && a->memory_mib ? (uint64_t)a->memory_mib << 20 : 0,
    };
}

/* ---- the child ---- */

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

/* The steps of the child, as reported through the error pipe. */
enum {
    STEP_FDS,
    STEP_CGROUP,
    STEP_RLIMIT,
    STEP_SETGROUPS,
    STEP_SETGID,
    STEP_SETUID,
    STEP_STILL_ROOT,
    STEP_NO_NEW_PRIVS,
    STEP_EXEC,
    STEP_COUNT
};
static const char *const step_names[STEP_COUNT] = {
    "redirecting stdin, stdout and stderr",
    "joining its cgroup",
    "setting its resource limits",
    "setgroups",
    "setgid",
    "setuid",
    "dropping root (setuid(0) still worked)",
    "prctl(PR_SET_NO_NEW_PRIVS)",
    "exec",
};

/* Everything the child needs, prepared by the parent. */
typedef struct ChildPlan {
    char *const *argv, *const *env;
    int logfd, nullfd, errfd, cgfd;
    const LaunchCred *cred;
    struct {
        int resource;
        struct rlimit value;
    } limits[4];
    size_t n_limits;
} ChildPlan;

static _Noreturn void child_fail(int errfd, int step)
{
    int report[2] = {step, errno ? errno : EIO};
    (void)!write(errfd, report, sizeof(report));
    _exit(127);
}

static _Noreturn void child(const ChildPlan *c)
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
    if (dup2(c->nullfd, 0) < 0 || dup2(c->logfd, 1) < 0 || dup2(c->logfd, 2) < 0)
        child_fail(c->errfd, STEP_FDS);
    /* into the cgroup while still privileged: its cgroup.procs is the agent's */
    if (c->cgfd >= 0 && write(c->cgfd, "0", 1) != 1)
        child_fail(c->errfd, STEP_CGROUP);
    for (size_t i = 0; i < c->n_limits; i++)
        if (setrlimit(c->limits[i].resource, &c->limits[i].value) < 0)
            child_fail(c->errfd, STEP_RLIMIT);
    /* groups first, then the gid, then the uid: each needs the privilege the next drops */
    const LaunchCred *cr = c->cred;
    if (cr && cr->change) {
        if (setgroups(cr->n_groups, cr->groups) < 0)
            child_fail(c->errfd, STEP_SETGROUPS);
        if (setgid(cr->gid) < 0)
            child_fail(c->errfd, STEP_SETGID);
        if (setuid(cr->uid) < 0)
            child_fail(c->errfd, STEP_SETUID);
        if (cr->uid != 0 && setuid(0) == 0) {
            errno = EPERM;
            child_fail(c->errfd, STEP_STILL_ROOT);
        }
        /* and no way back up: a setuid binary (sudo, su) runs without its privileges */
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
            child_fail(c->errfd, STEP_NO_NEW_PRIVS);
    }
    cloexec_from_3();
    environ = (char **)c->env;
    execvp(c->argv[0], c->argv);
    child_fail(c->errfd, STEP_EXEC);
}

static void plan_limit(ChildPlan *c, int resource, uint64_t value)
{
    c->limits[c->n_limits].resource = resource;
    c->limits[c->n_limits].value = (struct rlimit){.rlim_cur = value, .rlim_max = value};
    c->n_limits++;
}

int launch_spawn(char *const *argv, char *const *env, const char *log_path, const LaunchCred *cred,
                 const LaunchLimits *lim, int cgroup_procs_fd, pid_t *ret_pid, Buf *err)
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
    ChildPlan plan = {.argv = argv,
                      .env = env,
                      .logfd = logfd,
                      .nullfd = nullfd,
                      .errfd = pfd[1],
                      .cgfd = cgroup_procs_fd,
                      .cred = cred};
    plan_limit(&plan, RLIMIT_CORE, 0); /* a core of a job's memory is the job's data */
    if (lim && lim->nofile)
        plan_limit(&plan, RLIMIT_NOFILE, lim->nofile);
    if (lim && lim->nproc)
        plan_limit(&plan, RLIMIT_NPROC, lim->nproc);
    if (lim && lim->data_bytes)
        plan_limit(&plan, RLIMIT_DATA, lim->data_bytes);
    pid_t pid = fork();
    if (pid == 0)
        child(&plan);
    int r = 0;
    if (pid < 0) {
        r = -errno;
        buf_printf(err, "cannot start '%s': fork: %s", argv[0], strerror(-r));
    } else {
        setpgid(pid, pid); /* also here: no signal may reach the group before it exists */
        close(pfd[1]);
        pfd[1] = -1;
        int report[2] = {0, 0};
        ssize_t n;
        do
            n = read(pfd[0], report, sizeof(report));
        while (n < 0 && errno == EINTR);
        if (n == (ssize_t)sizeof(report)) {
            r = report[1] > 0 ? -report[1] : -EIO;
            int step = report[0] >= 0 && report[0] < STEP_COUNT ? report[0] : STEP_EXEC;
            if (step == STEP_EXEC)
                buf_printf(err, "cannot run '%s': %s", argv[0], strerror(-r));
            else
                buf_printf(err, "cannot run '%s': %s: %s", argv[0], step_names[step], strerror(-r));
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

/* ---- a worker's whole start ---- */

/* The checkpoint directory belongs to the worker's user, and to it alone: workers of
 * other teams may share the default user, never each other's checkpoints. Through a
 * descriptor opened without following a link, so a link put in its place is refused. */
static int give_dir(const char *dir, const LaunchCred *c, Buf *err)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int r = 0;
    if (fd < 0 || fchown(fd, c->uid, c->gid) < 0 || fchmod(fd, 0700) < 0) {
        r = -errno;
        buf_printf(err, "cannot give the checkpoint directory %s to uid %u gid %u: %s", dir,
                   (unsigned)c->uid, (unsigned)c->gid, strerror(-r));
    }
    if (fd >= 0)
        close(fd);
    return r;
}

static void cgroup_name(char *buf, size_t size, int64_t job, int64_t run, uint32_t rank)
{
    snprintf(buf, size, "%lld.%lld.%u", (long long)job, (long long)run, rank);
}

static uint64_t hard_limit(int resource)
{
    struct rlimit rl;
    if (getrlimit(resource, &rl) < 0 || rl.rlim_max == RLIM_INFINITY)
        return 0;
    return (uint64_t)rl.rlim_max;
}

int launch_worker(const LaunchPolicy *p, const Assignment *a, const char *ckpt_dir,
                  char *const *env, const char *log_path, pid_t *ret_pid, Buf *err)
{
    LaunchCred cred;
    int r = launch_cred(p, a, &cred, err);
    if (r < 0)
        return r;
    if (cred.change && ckpt_dir && *ckpt_dir && (r = give_dir(ckpt_dir, &cred, err)) < 0)
        return r;
    char name[64];
    cgroup_name(name, sizeof(name), a->job, a->run, a->rank);
    int cgfd = -1;
    if (p->cgroups &&
        (r = cgroup_worker_make(p->cgroups, name, a->memory_mib, a->cpu_milli, &cgfd, err)) < 0)
        return r;
    LaunchLimits hard = {.nofile = hard_limit(RLIMIT_NOFILE), .nproc = hard_limit(RLIMIT_NPROC)};
    LaunchLimits lim;
    launch_limits(p, a, cgfd >= 0, &hard, &lim);
    r = launch_spawn(a->argv, env, log_path, &cred, &lim, cgfd, ret_pid, err);
    if (cgfd >= 0) {
        close(cgfd);
        if (r < 0)
            (void)cgroup_worker_remove(p->cgroups, name);
    }
    return r;
}

void launch_worker_ended(const LaunchPolicy *p, int64_t job, int64_t run, uint32_t rank)
{
    if (!p->cgroups)
        return;
    char name[64];
    cgroup_name(name, sizeof(name), job, run, rank);
    if (cgroup_worker_remove(p->cgroups, name) == -EBUSY)
        return;               /* its last processes are on their way out: a later sweep takes it */
    cgroup_sweep(p->cgroups); /* and any an earlier end left busy */
}
