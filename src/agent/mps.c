/* mps.c: the MPS control daemons (mps.h). */
#include "agent/mps.h"

#include "agent/afile.h"
#include "util/log.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MPS_QUIT_WAIT_MS 5000

void mps_init(Mps *m, const char *state_dir)
{
    memset(m, 0, sizeof(*m));
    snprintf(m->root, sizeof(m->root), "%s/mps", state_dir);
    const char *c = getenv("GPUORCH_MPS_CONTROL");
    snprintf(m->control, sizeof(m->control), "%s", c && *c ? c : "nvidia-cuda-mps-control");
    m->stand_in = c && *c;
}

const MpsDaemon *mps_of(const Mps *m, unsigned index)
{
    return index < MPS_MAX_GPUS && m->d[index].running ? &m->d[index] : NULL;
}

/* Run the control program with d's directories and GPU uuid visible; input (NULL: none)
 * on its standard input. Its pid, or -errno. */
static pid_t spawn(const Mps *m, const MpsDaemon *d, const char *uuid, const char *arg,
                   const char *input)
{
    int in[2] = {-1, -1};
    if (input && pipe2(in, O_CLOEXEC) < 0)
        return -errno;
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        if (input) {
            close(in[0]);
            close(in[1]);
        }
        return -e;
    }
    if (pid == 0) {
        int fd = input ? in[0] : open("/dev/null", O_RDONLY);
        if (fd >= 0)
            dup2(fd, 0);
        char log[600];
        snprintf(log, sizeof(log), "%s/agent.out", d->log_dir);
        int out = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (out >= 0) {
            dup2(out, 1);
            dup2(out, 2);
        }
        setenv("CUDA_VISIBLE_DEVICES", uuid, 1);
        setenv("CUDA_MPS_PIPE_DIRECTORY", d->pipe_dir, 1);
        setenv("CUDA_MPS_LOG_DIRECTORY", d->log_dir, 1);
        if (arg)
            execlp(m->control, m->control, arg, (char *)NULL);
        else
            execlp(m->control, m->control, (char *)NULL);
        _exit(127);
    }
    if (input) {
        close(in[0]);
        ssize_t n = write(in[1], input, strlen(input));
        (void)n;
        close(in[1]);
    }
    return pid;
}

static void pid_path(const Mps *m, unsigned index, char *out, size_t n)
{
    snprintf(out, n, "%s/gpu%u/pid", m->root, index);
}

/* A daemon an earlier agent started for this GPU and that still runs: its pid, or 0. */
static pid_t left_running(const Mps *m, unsigned index)
{
    char path[600];
    pid_path(m, index, path, sizeof(path));
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    long pid = 0;
    if (fscanf(f, "%ld", &pid) != 1)
        pid = 0;
    fclose(f);
    if (pid <= 1 || kill((pid_t)pid, 0) < 0)
        return 0;
    /* the same program still (a pid may have been reused since) */
    char exe[64], cmd[256] = "";
    snprintf(exe, sizeof(exe), "/proc/%ld/cmdline", pid);
    FILE *c = fopen(exe, "r");
    size_t got = c ? fread(cmd, 1, sizeof(cmd) - 1, c) : 0;
    if (c)
        fclose(c);
    cmd[got] = '\0';
    const char *base = strrchr(m->control, '/');
    return strstr(cmd, base ? base + 1 : m->control) ? (pid_t)pid : 0;
}

static bool alive(const MpsDaemon *d)
{
    int status;
    if (!d->adopted)
        return waitpid(d->pid, &status, WNOHANG) == 0;
    return kill(d->pid, 0) == 0;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

int mps_ensure(Mps *m, GpuBackend *b, const AgentGpu *g, Buf *err)
{
    if (g->index >= MPS_MAX_GPUS) {
        buf_printf(err, "GPU %u: no MPS daemon for an index this high", g->index);
        return -EINVAL;
    }
    MpsDaemon *d = &m->d[g->index];
    if (d->running)
        return 0;
    char root[sizeof(m->root)]; /* a copy: the destinations are in *m too */
    memcpy(root, m->root, sizeof(root));
    snprintf(d->pipe_dir, sizeof(d->pipe_dir), "%s/gpu%u/pipe", root, g->index);
    snprintf(d->log_dir, sizeof(d->log_dir), "%s/gpu%u/log", root, g->index);
    int r;
    if ((r = afile_mkdir_p(d->pipe_dir)) < 0 || (r = afile_mkdir_p(d->log_dir)) < 0) {
        buf_printf(err, "GPU %u: cannot make the MPS directories under %s: %s", g->index, m->root,
                   strerror(-r));
        return r;
    }
    /* workers run as other users: they must reach the daemon's pipes */
    chmod(d->pipe_dir, 0777);
    pid_t left = left_running(m, g->index);
    if (left) {
        d->pid = left;
        d->running = d->adopted = true;
        log_info("event=mps_adopted gpu=%u pid=%d", g->index, (int)left);
        return 0;
    }
    if (b->ops->set_compute_mode && (r = b->ops->set_compute_mode(b, g->index, true, err)) < 0)
        return r;
    pid_t pid = spawn(m, d, g->uuid, "-f", NULL);
    if (pid < 0) {
        buf_printf(err, "GPU %u: cannot start %s: %s", g->index, m->control, strerror((int)-pid));
        if (b->ops->set_compute_mode)
            b->ops->set_compute_mode(b, g->index, false, NULL);
        return (int)pid;
    }
    /* a daemon that cannot start (no driver, the pipe directory taken) ends at once */
    sleep_ms(50);
    int status;
    if (waitpid(pid, &status, WNOHANG) == pid) {
        buf_printf(err, "GPU %u: %s -f ended at once (%s %d; its log: %s)", g->index, m->control,
                   WIFEXITED(status) ? "exit" : "signal",
                   WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), d->log_dir);
        if (b->ops->set_compute_mode)
            b->ops->set_compute_mode(b, g->index, false, NULL);
        return -EIO;
    }
    d->pid = pid;
    d->running = true;
    d->adopted = false;
    char path[600];
    pid_path(m, g->index, path, sizeof(path));
    FILE *f = fopen(path, "w");
    if (f) {
        fprintf(f, "%d\n", (int)pid);
        fclose(f);
    }
    log_info("event=mps_started gpu=%u pid=%d pipe=%s", g->index, (int)pid, d->pipe_dir);
    return 0;
}

void mps_stop(Mps *m, GpuBackend *b, unsigned index)
{
    if (index >= MPS_MAX_GPUS || !m->d[index].running)
        return;
    MpsDaemon *d = &m->d[index];
    d->running = false;
    /* the documented way: `quit` to the control program, which tells the daemon */
    pid_t q = spawn(m, d, "", NULL, "quit\n");
    if (q > 0)
        waitpid(q, NULL, 0);
    int waited = 0;
    while (alive(d)) {
        if (waited >= MPS_QUIT_WAIT_MS) {
            kill(d->pid, SIGKILL);
            if (!d->adopted)
                waitpid(d->pid, NULL, 0);
            log_error("event=mps_killed gpu=%u pid=%d reason=\"quit not done within %d ms\"", index,
                      (int)d->pid, MPS_QUIT_WAIT_MS);
            break;
        }
        sleep_ms(20);
        waited += 20;
    }
    char path[600];
    pid_path(m, index, path, sizeof(path));
    unlink(path);
    if (b && b->ops->set_compute_mode)
        b->ops->set_compute_mode(b, index, false, NULL);
    log_info("event=mps_stopped gpu=%u pid=%d", index, (int)d->pid);
}

int mps_reap(Mps *m, unsigned *ret_index, int *ret_status)
{
    for (unsigned i = 0; i < MPS_MAX_GPUS; i++) {
        MpsDaemon *d = &m->d[i];
        int status = 0;
        bool gone = d->running && (d->adopted ? kill(d->pid, 0) < 0
                                              : waitpid(d->pid, &status, WNOHANG) == d->pid);
        if (gone) {
            d->running = false;
            char path[600];
            pid_path(m, i, path, sizeof(path));
            unlink(path);
            *ret_index = i;
            *ret_status = status;
            return 1;
        }
    }
    return 0;
}

bool mps_any(const Mps *m)
{
    for (unsigned i = 0; i < MPS_MAX_GPUS; i++)
        if (m->d[i].running)
            return true;
    return false;
}

void mps_close(Mps *m, GpuBackend *b)
{
    for (unsigned i = 0; i < MPS_MAX_GPUS; i++)
        mps_stop(m, b, i);
}
