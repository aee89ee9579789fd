/* worker.c: one worker's life as the agent sees it (reaping and the out-of-memory
 * verdict on its end, checkpoint markers, signals, the stop machine) and the persisted
 * table of workers. */
#include "agent/worker.h"
#include "agent/afile.h"
#include "agent/keeper.h"
#include "agent/oomscan.h"
#include "util/file.h"
#include "util/log.h"
#include "util/macro.h"

#include <ctype.h>
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

#define TABLE_VERSION 1

int64_t agent_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t agent_mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

const char *worker_state_name(uint8_t state)
{
    switch (state) {
    case WK_PENDING:
        return "pending";
    case WK_RUNNING:
        return "running";
    case WK_EXITED:
        return "exited";
    case WK_FAILED:
        return "failed";
    }
    return "?";
}

static void set_str(char **dst, const char *s)
{
    free(*dst);
    *dst = s ? strdup(s) : NULL;
}

Worker *worker_new(const WorkerKey *key, json_t *spec)
{
    Worker *w = calloc(1, sizeof(*w));
    if (!w)
        return NULL;
    w->key = *key;
    w->spec = json_incref(spec);
    w->state = WK_PENDING;
    Buf err = {0};
    if (assign_parse(spec, &w->a, &err) < 0) {
        Buf why = {0};
        buf_printf(&why, "bad assignment: %s", buf_str(&err));
        worker_failed(w, buf_str(&why));
        buf_free(&why);
    }
    buf_free(&err);
    return w;
}

void worker_free(Worker *w)
{
    if (!w)
        return;
    json_decref(w->spec);
    assign_free(&w->a);
    free(w->error);
    free(w->checkpoint);
    ckpt_history_free(&w->ckpts);
    free(w->ckpt_dir);
    free(w->log_path);
    free(w->exit_path);
    free(w);
}

int proc_stat(pid_t pid, uint64_t *ret_ticks, char *ret_state)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    char *text = NULL;
    size_t len = 0;
    int r = file_read_all(path, &text, &len);
    if (r < 0)
        return r == -ENOENT || r == -ESRCH ? -ENOENT : r;
    /* "pid (comm) S ppid ...": comm may hold anything, so count from the last ')' */
    const char *p = strrchr(text, ')');
    r = -EINVAL;
    if (p && p[1] == ' ' && p[2]) {
        char state = p[2];
        p += 3;
        /* after the state: ppid pgrp session tty_nr tpgid flags minflt cminflt majflt
         * cmajflt utime stime cutime cstime priority nice num_threads itrealvalue,
         * then starttime (field 22 of proc(5)) */
        for (int field = 0; field < 18 && p; field++)
            p = strchr(p + 1, ' ');
        if (p) {
            *ret_ticks = strtoull(p + 1, NULL, 10);
            *ret_state = state;
            r = 0;
        }
    }
    free(text);
    return r;
}

int proc_catches(pid_t pid, int sig)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    char *text = NULL;
    size_t len = 0;
    int r = file_read_all(path, &text, &len);
    if (r < 0)
        return r;
    /* caught, or ignored: either way the signal does not end it */
    const char *cgt = strstr(text, "\nSigCgt:"), *ign = strstr(text, "\nSigIgn:");
    r = -EINVAL;
    if (cgt && ign && sig >= 1 && sig <= 64) {
        unsigned long long mask = strtoull(cgt + 8, NULL, 16) | strtoull(ign + 8, NULL, 16);
        r = (mask >> (sig - 1)) & 1;
    }
    free(text);
    return r;
}

/* Send the checkpoint signal, but only to a worker whose process catches (or ignores)
 * it: the default action of SIGUSR1 is to end the process, and a worker still starting
 * (an interpreter importing its modules) has not set its handler yet. Whether it was
 * sent. */
static bool checkpoint_signal(Worker *w)
{
    int sig = w->a.checkpoint_signal ? w->a.checkpoint_signal : SIGUSR1;
    int c = w->pid > 1 ? proc_catches(w->pid, sig) : 0;
    if (c == 0 && !w->held_said) {
        w->held_said = true;
        log_info("event=signal_held job=%lld run=%lld rank=%u pid=%d signal=%s "
                 "reason=\"the worker does not catch it yet\"",
                 (long long)w->key.job, (long long)w->key.run, w->key.rank, (int)w->pid,
                 assign_signal_name(sig));
    }
    if (c == 0)
        return false;
    worker_signal(w, sig); /* where /proc cannot say (c < 0), as before */
    return true;
}

static int64_t mtime_ns(const struct stat *st)
{
    return (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
}

/* The legacy LATEST of the job (rank < 0) or the rank's LATEST.RANK. */
static void marker_path(const Worker *w, int rank, char *path, size_t size)
{
    if (rank < 0)
        snprintf(path, size, "%s/LATEST", w->ckpt_dir);
    else
        snprintf(path, size, "%s/LATEST.%d", w->ckpt_dir, rank);
}

/* A marker's mtime, size and inode now; zeros when it is absent. */
static void file_seen(const Worker *w, int rank, int64_t *ret_mtime, int64_t *ret_size,
                      uint64_t *ret_ino)
{
    *ret_mtime = 0;
    *ret_size = 0;
    *ret_ino = 0;
    if (!w->ckpt_dir)
        return;
    char path[4096];
    marker_path(w, rank, path, sizeof(path));
    struct stat st;
    if (stat(path, &st) == 0) {
        *ret_mtime = mtime_ns(&st);
        *ret_size = st.st_size;
        *ret_ino = (uint64_t)st.st_ino;
    }
}

/* LATEST's mtime and size now; 0 and 0 when it is absent. */
static void latest_stat(const Worker *w, int64_t *ret_mtime, int64_t *ret_size)
{
    uint64_t ino;
    file_seen(w, -1, ret_mtime, ret_size, &ino);
}

void worker_starting(Worker *w)
{
    /* markers left by an earlier run are what this run resumes from, not news; seen
     * before the exec, or one the worker writes at once would pass for old */
    latest_stat(w, &w->latest_mtime_ns, &w->latest_size);
    file_seen(w, (int)w->key.rank, &w->marker_mtime_ns, &w->marker_size, &w->marker_ino);
}

void worker_started(Worker *w, pid_t pid, int64_t mono_ms)
{
    w->state = WK_RUNNING;
    w->pid = pid;
    char st;
    if (proc_stat(pid, &w->start_ticks, &st) < 0)
        w->start_ticks = 0;
    w->start_ms = agent_wall_ms();
    if (w->a.checkpoint_interval_ms > 0)
        w->next_checkpoint = mono_ms + w->a.checkpoint_interval_ms;
}

void worker_kept(Worker *w, pid_t keeper, const char *exit_path)
{
    w->keeper_pid = keeper;
    char st;
    if (proc_stat(keeper, &w->keeper_ticks, &st) < 0)
        w->keeper_ticks = 0;
    set_str(&w->exit_path, exit_path);
}

void worker_failed(Worker *w, const char *why)
{
    w->state = WK_FAILED;
    set_str(&w->error, why);
    w->end_ms = agent_wall_ms();
}

static void ended_unknown(Worker *w, const char *why)
{
    w->state = WK_EXITED;
    w->has_exit_code = false;
    w->signal = 0;
    set_str(&w->error, why);
    w->end_ms = agent_wall_ms();
}

/* The leader ended: what it left in its group (a python a shell started, say) would
 * keep the GPUs the server is about to hand to the next job, and no stop chases it
 * once the worker is reported ended. The group may hold only the leader's zombie, so
 * this is not logged. */
static void kill_rest_of_group(const Worker *w)
{
    if (w->pid > 1) /* -1 would be every process, 0 the agent's own group */
        kill(-w->pid, SIGKILL);
}

/* Was sig one the stop under way sends (its checkpoint signal, SIGTERM, SIGKILL)? Such
 * an end was asked for; any other signal (SIGSEGV, SIGABRT) is the worker's own. */
static bool sent_by_stop(const Worker *w, int sig)
{
    if (w->stop_mode == WSTOP_NONE)
        return false;
    int ckpt = w->a.checkpoint_signal ? w->a.checkpoint_signal : SIGUSR1;
    return sig == SIGTERM || sig == SIGKILL || (w->stop_mode == WSTOP_PREEMPT && sig == ckpt);
}

/* A worker that ended badly on its own may have run out of GPU memory; its log says
 * so. Only this run's bytes count (an earlier run's OOM is not this one's), and only
 * the tail: the message is among the last lines a dying program prints. */
static void judge_end(Worker *w)
{
    bool badly = w->has_exit_code ? w->exit_code != 0 : w->signal && !sent_by_stop(w, w->signal);
    w->oom = badly && oomscan_log_tail(w->log_path, w->log_base);
}

/* Has the keeper ended? Reaped when it is this process's child; else /proc says (gone,
 * a zombie no one reaps, or its pid now another process's). */
static bool keeper_gone(Worker *w)
{
    if (!w->adopted) {
        int status;
        pid_t r = waitpid(w->keeper_pid, &status, WNOHANG);
        if (r == w->keeper_pid)
            return true;
        if (r == 0 || (r < 0 && errno == EINTR))
            return false;
    }
    uint64_t ticks;
    char st;
    int r = proc_stat(w->keeper_pid, &ticks, &st);
    if (r < 0)
        return r == -ENOENT;
    return ticks != w->keeper_ticks || st == 'Z' || st == 'X';
}

/* A worker under a keeper: its end is the keeper's record. */
static bool reap_kept(Worker *w)
{
    KeeperExit x;
    int r = keeper_exit_read(w->exit_path, &x);
    if (r == -ENOENT) {
        if (!keeper_gone(w))
            return false;
        /* the keeper writes its record before it exits: look again */
        r = keeper_exit_read(w->exit_path, &x);
        if (r == -ENOENT) {
            /* killed before the worker ended: from here the worker is watched as a
             * process that is not the agent's child, and its status is unknown */
            log_error("event=keeper_lost job=%lld run=%lld rank=%u pid=%d keeper=%d",
                      (long long)w->key.job, (long long)w->key.run, w->key.rank, (int)w->pid,
                      (int)w->keeper_pid);
            w->keeper_pid = 0;
            w->adopted = true;
            return false;
        }
    } else if (!w->adopted) {
        /* its child, which exits right after the record: reaped so no zombie is left */
        while (waitpid(w->keeper_pid, NULL, 0) < 0 && errno == EINTR) {
        }
    }
    if (r < 0) {
        ended_unknown(w, "exit status unknown: the keeper's record cannot be read");
        worker_watch_checkpoint(w);
        return true;
    }
    w->state = WK_EXITED;
    w->end_ms = x.end_ms;
    w->has_exit_code = x.has_exit_code;
    w->exit_code = x.exit_code;
    w->signal = x.signal;
    judge_end(w);
    worker_watch_checkpoint(w);
    return true;
}

bool worker_reap(Worker *w)
{
    if (w->state != WK_RUNNING)
        return false;
    if (w->keeper_pid > 0)
        return reap_kept(w);
    if (w->adopted) {
        uint64_t ticks;
        char st;
        int r = proc_stat(w->pid, &ticks, &st);
        if (r < 0 && r != -ENOENT)
            return false; /* /proc could not be read this time: not an end */
        bool same = r == 0 && ticks == w->start_ticks;
        if (same && st != 'Z' && st != 'X')
            return false;
        /* a zombie leader reserves its group id, and a free pid is not handed out while
         * its group has members, so the group holds only what the worker left; a pid
         * now another process's means the old group is empty */
        if (r == -ENOENT || same)
            kill_rest_of_group(w);
        ended_unknown(w, "exit status unknown: the worker outlived the agent process that "
                         "started it");
        worker_watch_checkpoint(w);
        return true;
    }
    /* look before reaping: until the leader is reaped its group id cannot be reused, so
     * killing the group hits only what the worker left */
    siginfo_t info = {0};
    if (waitid(P_PID, (id_t)w->pid, &info, WEXITED | WNOHANG | WNOWAIT) < 0) {
        if (errno == EINTR)
            return false;
    } else if (info.si_pid == 0) {
        return false;
    } else {
        kill_rest_of_group(w);
    }
    int status;
    pid_t r = waitpid(w->pid, &status, WNOHANG);
    if (r == 0 || (r < 0 && errno == EINTR))
        return false;
    if (r < 0) { /* ECHILD: not ours after all */
        ended_unknown(w, "exit status unknown: the process was not the agent's child");
        worker_watch_checkpoint(w);
        return true;
    }
    w->state = WK_EXITED;
    w->end_ms = agent_wall_ms();
    if (WIFEXITED(status)) {
        w->has_exit_code = true;
        w->exit_code = WEXITSTATUS(status);
        w->signal = 0;
    } else {
        w->has_exit_code = false;
        w->signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    }
    judge_end(w);
    /* a checkpoint written just before the end: this is the last look at the markers */
    worker_watch_checkpoint(w);
    return true;
}

/* Up to max bytes of a marker, NUL-terminated in buf; false when it cannot be read. */
static bool read_marker(const Worker *w, int rank, char *buf, size_t max)
{
    char path[4096];
    marker_path(w, rank, path, sizeof(path));
    /* the worker owns the directory: a link to a file it may not read (the agent is
     * root), or a FIFO that would block the agent, is not a marker */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return false;
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return false;
    }
    ssize_t n = read(fd, buf, max);
    close(fd);
    if (n <= 0)
        return false;
    buf[n] = '\0';
    return true;
}

static bool watch_latest(Worker *w)
{
    int64_t mt, size;
    latest_stat(w, &mt, &size);
    if (mt == w->latest_mtime_ns && size == w->latest_size)
        return false;
    w->latest_mtime_ns = mt;
    w->latest_size = size;
    char buf[WORKER_LATEST_MAX + 1];
    if (!mt || !read_marker(w, -1, buf, WORKER_LATEST_MAX))
        return false;
    char *s = buf;
    while (*s && isspace((unsigned char)*s))
        s++;
    size_t len = strlen(s);
    while (len > 0 && isspace((unsigned char)s[len - 1]))
        s[--len] = '\0';
    if (!len)
        return false;
    set_str(&w->checkpoint, s);
    w->checkpoint_ms = mt / 1000000;
    return true;
}

static bool watch_marker(Worker *w)
{
    int64_t mt, size;
    uint64_t ino;
    int rank = (int)w->key.rank;
    file_seen(w, rank, &mt, &size, &ino);
    if (mt == w->marker_mtime_ns && size == w->marker_size && ino == w->marker_ino)
        return false;
    w->marker_mtime_ns = mt;
    w->marker_size = size;
    w->marker_ino = ino;
    char buf[CKPT_MARKER_MAX + 1];
    if (!mt || !read_marker(w, rank, buf, CKPT_MARKER_MAX))
        return false;
    int64_t step;
    char *path;
    Buf err = {0};
    if (ckpt_marker_parse(buf, &step, &path, &err) < 0) {
        /* read once per change, so logged once per change */
        log_error("event=checkpoint_invalid job=%lld run=%lld rank=%u file=\"%s/LATEST.%d\" "
                  "error=\"%s\"",
                  (long long)w->key.job, (long long)w->key.run, w->key.rank, w->ckpt_dir, rank,
                  err.len ? buf_str(&err) : "out of memory");
        buf_free(&err);
        return false;
    }
    int64_t run = ckpt_marker_run(buf);
    if (run < 0) {
        log_error("event=checkpoint_invalid job=%lld run=%lld rank=%u file=\"%s/LATEST.%d\" "
                  "error=\"its run line must be 'run N', N the writer's GPUORCH_RUN\"",
                  (long long)w->key.job, (long long)w->key.run, w->key.rank, w->ckpt_dir, rank);
        free(path);
        return false;
    }
    if (run != 0 && run != w->key.run) {
        /* another run's worker wrote it (one still running on a node the server gave up
         * on): not this run's checkpoint. Read once per change, so logged once. */
        log_error("event=checkpoint_other_run job=%lld run=%lld rank=%u file=\"%s/LATEST.%d\" "
                  "marker_run=%lld step=%lld",
                  (long long)w->key.job, (long long)w->key.run, w->key.rank, w->ckpt_dir, rank,
                  (long long)run, (long long)step);
        free(path);
        return false;
    }
    ckpt_history_add(&w->ckpts, step, mt / 1000000, path);
    return true;
}

int worker_watch_checkpoint(Worker *w)
{
    return (watch_latest(w) ? WORKER_SAW_LATEST : 0) | (watch_marker(w) ? WORKER_SAW_STEP : 0);
}

void worker_signal(Worker *w, int sig)
{
    if (w->pid <= 1 || w->state != WK_RUNNING)
        return;
    if (w->keeper_pid > 0) {
        /* until the keeper's record exists the worker's pid (a zombie at worst) holds
         * its group id; once it exists the group may be gone and its id reused */
        if (w->exit_path && access(w->exit_path, F_OK) == 0)
            return;
        kill(-w->pid, sig);
    } else if (w->adopted) {
        /* not the agent's child, so nothing holds its pid: check it is still the worker
         * right before signalling; if not, the next reap reports the end */
        uint64_t ticks;
        char st;
        if (proc_stat(w->pid, &ticks, &st) < 0 || ticks != w->start_ticks)
            return;
        kill(-w->pid, sig);
    } else if (kill(-w->pid, sig) < 0 && errno == ESRCH) {
        kill(w->pid, sig); /* the group is gone but the leader may linger */
    }
    log_info("event=signal job=%lld run=%lld rank=%u pid=%d signal=%s", (long long)w->key.job,
             (long long)w->key.run, w->key.rank, (int)w->pid, assign_signal_name(sig));
}

static void term(Worker *w, int64_t deadline)
{
    worker_signal(w, SIGTERM);
    w->stop_phase = SP_TERM;
    w->stop_deadline = deadline;
}

/* Is the phase under way timed by the grace (preempt's wait for a checkpoint, cancel's
 * SIGTERM to SIGKILL) rather than by a fixed delay? */
static bool grace_timed(const Worker *w)
{
    return w->stop_phase == SP_CHECKPOINT ||
           (w->stop_phase == SP_TERM && w->stop_mode == WSTOP_CANCEL);
}

void worker_request_stop(Worker *w, uint8_t mode, int64_t mono_ms)
{
    if (w->state != WK_RUNNING || mode == WSTOP_NONE)
        return;
    int64_t grace = w->a.argv ? w->a.grace_ms : ASSIGN_DEFAULT_GRACE_MS;
    if (w->stop_mode == WSTOP_CANCEL || w->stop_mode == mode) {
        /* under way already: a later, shorter grace (a spot notice) still counts */
        if (grace_timed(w) && w->stop_deadline > w->stop_since + grace)
            w->stop_deadline = w->stop_since + grace;
        return;
    }
    w->stop_mode = mode;
    w->stop_since = mono_ms;
    if (mode == WSTOP_PREEMPT) {
        int64_t size;
        latest_stat(w, &w->stop_latest_ns, &size);
        file_seen(w, (int)w->key.rank, &w->stop_marker_ns, &size, &w->stop_ino);
        if (!checkpoint_signal(w)) {
            /* it cannot checkpoint now: it stops as a cancel would */
            term(w, mono_ms + grace);
            return;
        }
        w->stop_phase = SP_CHECKPOINT;
        w->stop_deadline = mono_ms + grace;
        return;
    }
    /* cancel: at once, or sooner if a preemption was already terminating it */
    if (w->stop_phase == SP_TERM || w->stop_phase == SP_KILLED) {
        if (w->stop_deadline > mono_ms + grace)
            w->stop_deadline = mono_ms + grace;
        return;
    }
    term(w, mono_ms + grace);
}

bool worker_checkpoints(const Worker *w)
{
    return w->a.checkpoints || w->checkpoint || w->ckpts.n || w->a.resume_from;
}

void worker_advance(Worker *w, int64_t mono_ms)
{
    if (w->state != WK_RUNNING)
        return;
    if (w->stop_mode == WSTOP_NONE && w->a.checkpoint_interval_ms > 0 &&
        mono_ms >= w->next_checkpoint) {
        /* held: asked again soon, not a whole interval later */
        bool sent = checkpoint_signal(w);
        w->next_checkpoint =
            mono_ms + (sent ? w->a.checkpoint_interval_ms : MIN(w->a.checkpoint_interval_ms, 5000));
    }
    switch (w->stop_phase) {
    case SP_CHECKPOINT: {
        int64_t mt, size, marker_mt;
        uint64_t ino;
        latest_stat(w, &mt, &size);
        file_seen(w, (int)w->key.rank, &marker_mt, &size, &ino);
        /* either marker will do: a one-worker job may still write only LATEST */
        if ((mt && mt != w->stop_latest_ns) ||
            (marker_mt && (marker_mt != w->stop_marker_ns || ino != w->stop_ino))) {
            w->stop_phase = SP_SETTLE;
            w->stop_deadline = mono_ms + WORKER_SETTLE_MS;
        } else if (mono_ms >= w->stop_deadline) {
            term(w, mono_ms + WORKER_PREEMPT_KILL_MS);
        }
        break;
    }
    case SP_SETTLE:
        if (mono_ms >= w->stop_deadline)
            term(w, mono_ms + WORKER_PREEMPT_KILL_MS);
        break;
    case SP_TERM:
        if (mono_ms >= w->stop_deadline) {
            worker_signal(w, SIGKILL);
            w->stop_phase = SP_KILLED;
        }
        break;
    default:
        break;
    }
}

json_t *worker_report_json(const Worker *w)
{
    json_t *o = json_pack("{sI sI si si ss}", "job", (json_int_t)w->key.job, "run",
                          (json_int_t)w->key.run, "rank", (int)w->key.rank, "pid", (int)w->pid,
                          "state", worker_state_name(w->state));
    if (!o)
        return NULL;
    json_object_set_new(o, "start_ms", w->start_ms ? json_integer(w->start_ms) : json_null());
    if (worker_ended(w)) {
        json_object_set_new(o, "exit_code",
                            w->has_exit_code ? json_integer(w->exit_code) : json_null());
        json_object_set_new(o, "signal", json_integer(w->signal));
        json_object_set_new(o, "end_ms", json_integer(w->end_ms));
    }
    if (w->checkpoint) {
        json_object_set_new(o, "checkpoint", json_string(w->checkpoint));
        json_object_set_new(o, "checkpoint_ms", json_integer(w->checkpoint_ms));
    }
    if (w->ckpts.n)
        json_object_set_new(o, "checkpoints", ckpt_history_json(&w->ckpts));
    if (w->error)
        json_object_set_new(o, "error", json_string(w->error));
    if (w->peak_memory_mib)
        json_object_set_new(o, "peak_memory_mib", json_integer((json_int_t)w->peak_memory_mib));
    if (w->oom && worker_ended(w))
        json_object_set_new(o, "oom", json_true());
    if (w->shutdown)
        json_object_set_new(o, "shutdown", json_true());
    return o;
}

static json_t *str_or_null(const char *s)
{
    return s ? json_string(s) : json_null();
}

int worker_table_save(const char *path, const char *machine_boot_id, const char *server_id,
                      Worker *const *w, size_t n)
{
    json_t *arr = json_array();
    json_t *root = json_pack("{si ss ss so}", "version", TABLE_VERSION, "machine_boot_id",
                             machine_boot_id ? machine_boot_id : "", "server_id",
                             server_id ? server_id : "", "workers", arr);
    if (!root)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        const Worker *x = w[i];
        if (x->state == WK_PENDING)
            continue;
        json_t *o = json_object();
        json_object_set_new(o, "job", json_integer(x->key.job));
        json_object_set_new(o, "run", json_integer(x->key.run));
        json_object_set_new(o, "rank", json_integer(x->key.rank));
        json_object_set(o, "spec", x->spec ? x->spec : json_null());
        json_object_set_new(o, "state", json_string(worker_state_name(x->state)));
        json_object_set_new(o, "error", str_or_null(x->error));
        json_object_set_new(o, "pid", json_integer(x->pid));
        json_object_set_new(o, "start_ticks", json_integer((json_int_t)x->start_ticks));
        json_object_set_new(o, "keeper_pid", json_integer(x->keeper_pid));
        json_object_set_new(o, "keeper_ticks", json_integer((json_int_t)x->keeper_ticks));
        json_object_set_new(o, "exit_path", str_or_null(x->exit_path));
        json_object_set_new(o, "start_ms", json_integer(x->start_ms));
        json_object_set_new(o, "end_ms", json_integer(x->end_ms));
        json_object_set_new(o, "exit_code",
                            x->has_exit_code ? json_integer(x->exit_code) : json_null());
        json_object_set_new(o, "signal", json_integer(x->signal));
        json_object_set_new(o, "checkpoint", str_or_null(x->checkpoint));
        json_object_set_new(o, "checkpoint_ms", json_integer(x->checkpoint_ms));
        json_object_set_new(o, "latest_mtime_ns", json_integer(x->latest_mtime_ns));
        json_object_set_new(o, "latest_size", json_integer(x->latest_size));
        json_object_set_new(o, "checkpoints", ckpt_history_json(&x->ckpts));
        json_object_set_new(o, "marker_mtime_ns", json_integer(x->marker_mtime_ns));
        json_object_set_new(o, "marker_size", json_integer(x->marker_size));
        json_object_set_new(o, "marker_ino", json_integer((json_int_t)x->marker_ino));
        json_object_set_new(o, "ckpt_dir", str_or_null(x->ckpt_dir));
        json_object_set_new(o, "log_path", str_or_null(x->log_path));
        json_object_set_new(o, "log_base", json_integer(x->log_base));
        json_object_set_new(o, "log_sent", json_integer(x->log_sent));
        json_object_set_new(o, "peak_memory_mib", json_integer((json_int_t)x->peak_memory_mib));
        json_object_set_new(o, "oom", json_boolean(x->oom));
        json_object_set_new(o, "shutdown", json_boolean(x->shutdown));
        if (json_array_append_new(arr, o) < 0) {
            json_decref(root);
            return -ENOMEM;
        }
    }
    char *text = json_dumps(root, JSON_INDENT(1) | JSON_SORT_KEYS);
    json_decref(root);
    if (!text)
        return -ENOMEM;
    int r = afile_write_atomic(path, text, strlen(text));
    free(text);
    return r;
}

static int64_t get_i64(json_t *o, const char *k)
{
    return json_integer_value(json_object_get(o, k));
}

static const char *get_str(json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

/* One record of the table, or NULL (err set) when it is not one. */
static Worker *record_load(json_t *o, bool same_boot, Buf *err)
{
    WorkerKey key;
    if (assign_key(o, &key.job, &key.run, &key.rank) < 0) {
        buf_puts(err, "a record lacks job, run or rank");
        return NULL;
    }
    const char *state = get_str(o, "state");
    uint8_t st = WK_PENDING;
    for (uint8_t s = WK_RUNNING; s <= WK_FAILED; s++)
        if (state && !strcmp(state, worker_state_name(s)))
            st = s;
    if (st == WK_PENDING) {
        buf_printf(err, "job %lld rank %u: unknown state", (long long)key.job, key.rank);
        return NULL;
    }
    json_t *spec = json_object_get(o, "spec");
    Worker *w = worker_new(&key, spec ? spec : json_null());
    if (!w) {
        buf_puts(err, "out of memory");
        return NULL;
    }
    w->state = st;
    set_str(&w->error, get_str(o, "error"));
    w->pid = (pid_t)get_i64(o, "pid");
    w->start_ticks = (uint64_t)get_i64(o, "start_ticks");
    w->keeper_pid = (pid_t)get_i64(o, "keeper_pid"); /* absent in older tables: none */
    w->keeper_ticks = (uint64_t)get_i64(o, "keeper_ticks");
    set_str(&w->exit_path, get_str(o, "exit_path"));
    if (!w->exit_path)
        w->keeper_pid = 0;
    w->start_ms = get_i64(o, "start_ms");
    w->end_ms = get_i64(o, "end_ms");
    json_t *ec = json_object_get(o, "exit_code");
    w->has_exit_code = json_is_integer(ec);
    w->exit_code = (int)json_integer_value(ec);
    w->signal = (int)get_i64(o, "signal");
    set_str(&w->checkpoint, get_str(o, "checkpoint"));
    w->checkpoint_ms = get_i64(o, "checkpoint_ms");
    w->latest_mtime_ns = get_i64(o, "latest_mtime_ns");
    w->latest_size = get_i64(o, "latest_size");
    set_str(&w->ckpt_dir, get_str(o, "ckpt_dir"));
    ckpt_history_from_json(json_object_get(o, "checkpoints"), &w->ckpts);
    if (json_object_get(o, "marker_mtime_ns")) {
        w->marker_mtime_ns = get_i64(o, "marker_mtime_ns");
        w->marker_size = get_i64(o, "marker_size");
        w->marker_ino = (uint64_t)get_i64(o, "marker_ino");
    } else {
        /* a table of an agent before LATEST.RANK: a marker there now is not news */
        file_seen(w, (int)w->key.rank, &w->marker_mtime_ns, &w->marker_size, &w->marker_ino);
    }
    set_str(&w->log_path, get_str(o, "log_path"));
    w->log_base = get_i64(o, "log_base");
    w->log_sent = get_i64(o, "log_sent");
    w->peak_memory_mib = (uint64_t)get_i64(o, "peak_memory_mib");
    w->oom = json_is_true(json_object_get(o, "oom")); /* absent in older tables: false */
    w->shutdown = json_is_true(json_object_get(o, "shutdown"));
    if (w->state == WK_RUNNING) {
        uint64_t ticks;
        char ps;
        bool kept = w->keeper_pid > 0;
        if (kept && ((same_boot && proc_stat(w->keeper_pid, &ticks, &ps) == 0 &&
                      ticks == w->keeper_ticks && ps != 'Z' && ps != 'X') ||
                     access(w->exit_path, F_OK) == 0)) {
            /* the keeper runs on, or recorded the end (even before a reboot): the first
             * reap reads it */
            w->adopted = true;
            if (w->a.checkpoint_interval_ms > 0)
                w->next_checkpoint = agent_mono_ms() + w->a.checkpoint_interval_ms;
        } else if (same_boot && w->pid > 0 && proc_stat(w->pid, &ticks, &ps) == 0 &&
                   ticks == w->start_ticks && ps != 'Z' && ps != 'X') {
            w->keeper_pid = 0; /* its keeper is gone: watched through /proc */
            w->adopted = true;
            if (w->a.checkpoint_interval_ms > 0)
                w->next_checkpoint = agent_mono_ms() + w->a.checkpoint_interval_ms;
        } else {
            ended_unknown(w, "ended while the agent was down");
            w->lost = true;
        }
    }
    return w;
}

int worker_table_load(const char *path, const char *machine_boot_id,
                      char ret_server_id[WORKER_SERVER_ID_MAX + 1], Worker ***ret, size_t *ret_n,
                      Buf *err)
{
    char *text = NULL;
    size_t len = 0;
    int r = file_read_all(path, &text, &len);
    if (r == -ENOENT) {
        if (ret_server_id)
            ret_server_id[0] = '\0';
        *ret = NULL;
        *ret_n = 0;
        return 0;
    }
    if (r < 0) {
        buf_printf(err, "%s: %s", path, strerror(-r));
        return r;
    }
    json_error_t jerr;
    json_t *root = json_loadb(text, len, 0, &jerr);
    free(text);
    json_t *arr = json_object_get(root, "workers");
    if (!root || !json_is_array(arr) || get_i64(root, "version") != TABLE_VERSION) {
        buf_printf(err, "%s: not a worker table of this agent version%s%s", path, root ? "" : ": ",
                   root ? "" : jerr.text);
        json_decref(root);
        return -EINVAL;
    }
    const char *boot = get_str(root, "machine_boot_id");
    const char *server = get_str(root, "server_id"); /* absent in older tables */
    char server_id[WORKER_SERVER_ID_MAX + 1] = "";
    if (server && strlen(server) <= WORKER_SERVER_ID_MAX)
        snprintf(server_id, sizeof(server_id), "%s", server);
    bool same_boot = boot && machine_boot_id && !strcmp(boot, machine_boot_id);
    size_t n = json_array_size(arr);
    Worker **list = calloc(n ? n : 1, sizeof(*list));
    if (!list) {
        json_decref(root);
        buf_puts(err, "out of memory");
        return -ENOMEM;
    }
    size_t got = 0;
    r = 0;
    for (size_t i = 0; i < n && !r; i++) {
        Buf why = {0};
        Worker *w = record_load(json_array_get(arr, i), same_boot, &why);
        if (!w) {
            buf_printf(err, "%s: record %zu: %s", path, i, buf_str(&why));
            r = -EINVAL;
        } else {
            list[got++] = w;
        }
        buf_free(&why);
    }
    json_decref(root);
    if (r < 0) {
        for (size_t i = 0; i < got; i++)
            worker_free(list[i]);
        free(list);
        return r;
    }
    if (ret_server_id)
        memcpy(ret_server_id, server_id, sizeof(server_id));
    *ret = list;
    *ret_n = got;
    return 0;
}
