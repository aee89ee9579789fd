/* provider.c: the server's side of autoscaling: an autoscaler pass after each
 * scheduling cycle, carried out through a provider (provider.h). Nodes the pass starts
 * are starting (paid for, not schedulable) until their agent reports; nodes it releases
 * or drains are deleted through the provider once empty; jobs it moves back to reserved
 * capacity are preempted with their checkpoint and queued again.
 *
 * The provider's programs (the user's script, the sim's agents) are forked with the
 * lock released: what the pass asks for is queued (ProviderSpawn, argument strings
 * copied) and the scheduler thread starts it after the cycle (provider_spawns_*). */
#include "server/provider.h"

#include "server/auth.h"
#include "server/nodespan.h"
#include "util/log.h"
#include "util/macro.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* A node that has not reported this long after its start-up time is given up. */
#define START_MARGIN_MS (5 * 60 * INT64_C(1000))

int provider_parse(const char *spec, ProviderKind *ret_kind, char **ret_script, Buf *err)
{
    if (!strcmp(spec, "none")) {
        *ret_kind = PROVIDER_NONE;
        *ret_script = NULL;
        return 0;
    }
    if (!strcmp(spec, "sim")) {
        *ret_kind = PROVIDER_SIM;
        *ret_script = NULL;
        return 0;
    }
    if (!strncmp(spec, "exec:", 5) && spec[5]) {
        if (access(spec + 5, X_OK) != 0) {
            buf_printf(err, "--provider %s: %s is not an executable file", spec, spec + 5);
            return -EINVAL;
        }
        char *script = strdup(spec + 5);
        if (!script)
            return -ENOMEM;
        *ret_kind = PROVIDER_EXEC;
        *ret_script = script;
        return 0;
    }
    buf_printf(err, "--provider '%s': expected none, sim or exec:PATH", spec);
    return -EINVAL;
}

/* Start argv as a child in a process group of its own, stdout and stderr to log (or
 * the server's stderr); its pid, or -errno. */
static int spawn(char *const argv[], const char *log)
{
    pid_t pid = fork();
    if (pid < 0)
        return -errno;
    if (pid == 0) {
        setpgid(0, 0);
        sigset_t all;
        sigemptyset(&all);
        sigprocmask(SIG_SETMASK, &all, NULL);
        int fd = log ? open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644) : -1;
        int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (devnull >= 0)
            dup2(devnull, STDIN_FILENO);
        if (fd >= 0) {
            dup2(fd, STDOUT_FILENO);
            dup2(fd, STDERR_FILENO);
        }
        execv(argv[0], argv);
        static const char msg[] = "gpuorch server: the provider's program could not be run\n";
        ssize_t w = write(STDERR_FILENO, msg, sizeof(msg) - 1);
        (void)w;
        _exit(127);
    }
    return (int)pid;
}

/* A program to start once the lock is released: its arguments and log copied. */
typedef struct ProviderSpawn {
    char *argv[PROVIDER_MAX_ARGS + 1]; /* owned, NULL-terminated */
    char *log;                         /* NULL: the server's stderr */
    char *what;                        /* the log line's words: "event=... node=..." */
    int64_t agent_node;                /* sim: the node the agent is for, -1: a script */
    int pid;
} ProviderSpawn;

static void spawn_free(ProviderSpawn *p)
{
    for (size_t i = 0; p->argv[i]; i++)
        free(p->argv[i]);
    free(p->log);
    free(p->what);
}

static void queue_spawn(Server *s, char *const argv[], const char *log, int64_t agent_node,
                        const char *what)
{
    ProviderSpawn p = {.agent_node = agent_node};
    bool ok = GROW(s->spawns, s->spawns_cap, s->n_spawns + 1) == 0;
    for (size_t i = 0; ok && argv[i]; i++)
        ok = i < PROVIDER_MAX_ARGS && (p.argv[i] = strdup(argv[i]));
    ok = ok && (!log || (p.log = strdup(log))) && (p.what = strdup(what));
    if (!ok) {
        spawn_free(&p);
        log_error("%s error=\"out of memory\"", what);
        return;
    }
    s->spawns[s->n_spawns++] = p;
}

void provider_spawns_take(Server *s, ProviderSpawns *ret)
{
    *ret = (ProviderSpawns){.v = s->spawns, .n = s->n_spawns};
    s->spawns = NULL;
    s->n_spawns = s->spawns_cap = 0;
}

void provider_spawns_run(ProviderSpawns *sp)
{
    for (size_t i = 0; i < sp->n; i++) {
        ProviderSpawn *p = &sp->v[i];
        p->pid = spawn(p->argv, p->log);
        if (p->pid < 0)
            log_error("%s error=\"%s\"", p->what, strerror(-p->pid));
        else
            log_info("%s pid=%d", p->what, p->pid);
    }
}

void provider_spawns_done(Server *s, ProviderSpawns *sp)
{
    for (size_t i = 0; i < sp->n; i++) {
        const ProviderSpawn *p = &sp->v[i];
        if (p->agent_node >= 0 && p->pid > 0 && s->pnodes)
            s->pnodes[p->agent_node].agent_pid = p->pid;
    }
    provider_spawns_free(sp);
}

void provider_spawns_free(ProviderSpawns *sp)
{
    for (size_t i = 0; i < sp->n; i++)
        spawn_free(&sp->v[i]);
    free(sp->v);
    *sp = (ProviderSpawns){0};
}

/* The exec provider: `SCRIPT create|delete POOL NODE`, not waited for (reaped later). */
static void run_script(Server *s, const char *verb, uint32_t node)
{
    const Node *n = &s->c->nodes[node];
    char *argv[] = {(char *)s->opt.provider_script, (char *)verb, s->c->pools[n->pool].name,
                    n->name, NULL};
    char what[256];
    snprintf(what, sizeof(what), "event=provider_%s node=%s pool=%s", verb, n->name,
             s->c->pools[n->pool].name);
    queue_spawn(s, argv, NULL, -1, what);
}

/* The sim provider: a local agent with simulated GPUs of the node's model. */
static void launch_agent(Server *s, uint32_t node)
{
    const Node *n = &s->c->nodes[node];
    char exe[PATH_MAX], gpus[160], dir[PATH_MAX], ckpt[PATH_MAX], log[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (len <= 0) {
        log_error("event=provider_failed node=%s error=\"cannot find the gpuorch binary\"",
                  n->name);
        return;
    }
    exe[len] = '\0';
    snprintf(gpus, sizeof(gpus), "sim:%s:%u", node_model(s->c, n)->name, n->n_gpus);
    snprintf(dir, sizeof(dir), "%s/sim-agents/%s", s->opt.data_dir, n->name);
    snprintf(ckpt, sizeof(ckpt), "%s/checkpoints", s->opt.data_dir);
    snprintf(log, sizeof(log), "%s/sim-agents/%s.log", s->opt.data_dir, n->name);
    char parent[PATH_MAX];
    snprintf(parent, sizeof(parent), "%s/sim-agents", s->opt.data_dir);
    mkdir(parent, 0755);
    char *argv[] = {exe,
                    "agent",
                    "--server",
                    s->url,
                    "--token",
                    s->agent_token,
                    "--node",
                    (char *)n->name,
                    "--gpus",
                    gpus,
                    "--state-dir",
                    dir,
                    "--checkpoint-root",
                    ckpt,
                    "--address",
                    "127.0.0.1",
                    NULL};
    char what[256];
    snprintf(what, sizeof(what), "event=provider_agent_started node=%s gpus=%s", n->name, gpus);
    queue_spawn(s, argv, log, node, what);
}

/* Ask for the node: the cloud (exec) starts booting it; the sim agent starts after the
 * pool's start-up time. */
static void ask(Server *s, uint32_t node, int64_t now)
{
    ProviderNode *pn = &s->pnodes[node];
    cluster_set_node_state(s->c, node, NODE_STARTING);
    pn->asked_ms = now;
    nodespan_update(s, node, now);
    if (s->opt.provider == PROVIDER_EXEC)
        run_script(s, "create", node);
    else
        pn->launch_at_ms = now + s->c->pools[s->c->nodes[node].pool].startup_ms;
}

/* Give the node back: it is absent from now on. */
static void give_back(Server *s, uint32_t node)
{
    ProviderNode *pn = &s->pnodes[node];
    if (s->opt.provider == PROVIDER_EXEC) {
        run_script(s, "delete", node);
    } else if (pn->agent_pid > 0) {
        /* the agent's workers have ended: the node was empty */
        kill(-pn->agent_pid, SIGTERM);
        kill(pn->agent_pid, SIGTERM);
    }
    pn->launch_at_ms = 0;
    pn->asked_ms = 0;
    /* the core forgets the machine's MIG layouts (a new one comes up unpartitioned):
     * so does the store, or a restart would bring them back */
    const Node *n = &s->c->nodes[node];
    bool carved[NODE_MAX_GPUS] = {false};
    for (unsigned i = 0; i < n->n_gpus && i < NODE_MAX_GPUS; i++)
        carved[i] = node_gpu_c(s->c, n, i)->mode == GPU_MIG;
    cluster_set_node_state(s->c, node, NODE_ABSENT);
    for (unsigned i = 0; i < n->n_gpus && i < NODE_MAX_GPUS; i++)
        if (carved[i] && node_gpu_c(s->c, n, i)->mode != GPU_MIG &&
            store_mig_set(s->store, n->name, i, "[]") < 0)
            log_error("event=store_write_failed what=mig node=%s gpu=%u", n->name, i);
    s->nodes[node].liveness = NODE_UNKNOWN;
    s->nodes[node].seen_mono_ms = server_mono_ms();
    nodespan_update(s, node, server_now_ms());
    log_info("event=provider_released node=%s", s->c->nodes[node].name);
}

int provider_start(Server *s, const char *url, Buf *err)
{
    bool elastic = false;
    for (size_t p = 0; p < s->c->n_pools; p++)
        elastic |= pool_autoscaled(&s->c->pools[p]);
    if (s->opt.provider == PROVIDER_NONE || !elastic)
        return 0;
    char token[AUTH_TOKEN_SIZE] = "";
    if (s->opt.provider == PROVIDER_SIM) {
        int64_t id;
        AuthTokenSpec spec = {.role = ROLE_AGENT, .name = "sim provider", .expires_ms = -1};
        int r = auth_token_create(s->store, &spec, server_now_ms(), token, &id, err);
        if (r < 0)
            return r;
    }
    /* heartbeats and the scheduler thread read these: set them under the lock */
    pthread_mutex_lock(&s->lock);
    s->pnodes = calloc(s->c->n_nodes ? s->c->n_nodes : 1, sizeof(*s->pnodes));
    s->url = strdup(url);
    s->agent_token = strdup(token);
    AutoscaleConfig cfg;
    autoscale_config_default(&cfg);
    int r = !s->pnodes || !s->url || !s->agent_token ? -ENOMEM : autoscale_init(&s->as, s->c, &cfg);
    if (r == 0) {
        s->autoscaling = true;
        server_kick(s);
    }
    pthread_mutex_unlock(&s->lock);
    return r;
}

void provider_stop(Server *s)
{
    if (!s->pnodes)
        return;
    for (size_t i = 0; i < s->c->n_nodes; i++)
        if (s->pnodes[i].agent_pid > 0) {
            kill(-s->pnodes[i].agent_pid, SIGTERM);
            kill(s->pnodes[i].agent_pid, SIGTERM);
        }
    if (s->autoscaling)
        autoscale_free(&s->as);
    s->autoscaling = false;
    free(s->pnodes);
    s->pnodes = NULL;
    free(s->agent_token);
    s->agent_token = NULL;
    free(s->url);
    s->url = NULL;
    ProviderSpawns left;
    provider_spawns_take(s, &left);
    provider_spawns_free(&left);
}

void provider_node_up(Server *s, uint32_t node)
{
    if (s->pnodes)
        s->pnodes[node].asked_ms = 0;
}

void provider_node_lost(Server *s, uint32_t node)
{
    if (!s->autoscaling || !pool_autoscaled(&s->c->pools[s->c->nodes[node].pool]))
        return;
    /* an elastic node that stopped answering is gone: the pass may ask for another */
    give_back(s, node);
}

/* Children that ended (scripts, agents): reap them and say how they ended. */
static void reap(Server *s)
{
    int status;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        for (size_t i = 0; i < s->c->n_nodes; i++)
            if (s->pnodes[i].agent_pid == pid)
                s->pnodes[i].agent_pid = 0;
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            log_error("event=provider_child_ended pid=%d status=%d", (int)pid, status);
    }
}

void provider_cycle(Server *s, int64_t now, Changes *ch)
{
    if (!s->autoscaling)
        return;
    reap(s);
    for (size_t i = 0; i < s->c->n_nodes; i++) {
        ProviderNode *pn = &s->pnodes[i];
        const Node *n = &s->c->nodes[i];
        if (pn->launch_at_ms && now >= pn->launch_at_ms) {
            pn->launch_at_ms = 0;
            launch_agent(s, (uint32_t)i);
        }
        int64_t limit = s->c->pools[n->pool].startup_ms + START_MARGIN_MS;
        if (n->state == NODE_STARTING && pn->asked_ms && now - pn->asked_ms > limit) {
            log_error("event=provider_node_never_came node=%s waited_ms=%lld", n->name,
                      (long long)(now - pn->asked_ms));
            give_back(s, (uint32_t)i);
        }
        if (n->state == NODE_LEAVING && node_empty(n))
            give_back(s, (uint32_t)i);
    }
    /* the queue in order, then the jobs holding GPUs */
    size_t nw = s->sched.n_order, nr = s->n_holding;
    AutoscaleJob *aj = calloc(nw + nr + 1, sizeof(*aj));
    if (!aj)
        return;
    size_t k = 0;
    for (size_t i = 0; i < nw; i++) {
        ServerJob *j = server_job(s, s->sched.order[i]->id);
        if (!j || !j->sj.queued)
            continue;
        aj[k++] = (AutoscaleJob){
            .j = &j->sj,
            .waiting_since_ms = j->st.submit_ms,
            .max_wait_ms = j->spec.max_wait_ms,
            .checkpoints = job_spec_checkpoints(&j->spec),
        };
    }
    size_t n_wait = k;
    for (size_t i = 0; i < nr; i++) {
        ServerJob *j = s->holding[i];
        aj[k++] = (AutoscaleJob){.j = &j->sj,
                                 .checkpoints = job_spec_checkpoints(&j->spec),
                                 .moved = j->st.preemptions > 0};
    }
    AutoscaleDecisions d = {0};
    int r = autoscale_pass(&s->as, s->c, aj, n_wait, aj + n_wait, k - n_wait, now, &d);
    for (size_t i = 0; i < d.n && r == 0; i++) {
        const AutoscaleDecision *x = &d.d[i];
        const char *name = s->c->nodes[x->node].name;
        switch (x->kind) {
        case AS_START:
            log_info("event=autoscale_start node=%s pool=%s", name,
                     s->c->pools[s->c->nodes[x->node].pool].name);
            ask(s, x->node, now);
            break;
        case AS_RELEASE:
            log_info("event=autoscale_release node=%s", name);
            give_back(s, x->node);
            break;
        case AS_DRAIN:
            log_info("event=autoscale_drain node=%s", name);
            cluster_set_node_state(s->c, x->node, NODE_LEAVING);
            break;
        case AS_MOVE: {
            ServerJob *j = server_job(s, x->job);
            if (j && (j->st.state == JOB_RUNNING || j->st.state == JOB_STARTING)) {
                j->st.preemptions++;
                server_job_stop(s, j, LIFE_STOP_PREEMPT, true, now, ch);
                changes_event(ch, j, now, "preempt", "moved back to reserved capacity");
            }
            break;
        }
        default:
            break;
        }
    }
    if (r < 0)
        log_error("event=autoscale_failed error=%d", r);
    autoscale_decisions_free(&d);
    free(aj);
}
