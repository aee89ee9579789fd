/* keeper.c: the keeper process (keeper.h). Everything it needs is prepared before the
 * fork; in the keeper, the start function runs as it would in the agent, and the rest is
 * plain system calls. The keeper leaves with _exit: it is a copy of the agent, whose exit handlers
 * (and a sanitizer's leak report) are the agent's business. */
#include "agent/keeper.h"
#include "agent/afile.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* What the keeper tells the agent once: the worker's pid, or why it did not start
 * (followed by the message's text, up to the pipe's end). */
typedef struct KeeperHello {
    int32_t error; /* 0, or a negative errno */
    int32_t pid;   /* the worker, when error is 0 */
} KeeperHello;

static void write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n > 0) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        c += w;
        n -= (size_t)w;
    }
}

/* stdin, stdout and stderr on /dev/null: the keeper must not hold the agent's terminal
 * or a pipe someone waits on. */
static void keeper_stdio(void)
{
    int null = open("/dev/null", O_RDWR);
    if (null < 0)
        return;
    for (int fd = 0; fd <= 2; fd++)
        dup2(null, fd);
    if (null > 2)
        close(null);
}

/* Every descriptor past stderr: nothing of the agent's (its connections, the GPU
 * backend's files) stays with a process that outlives it. */
static void close_from_3(void)
{
#ifdef CLOSE_RANGE_CLOEXEC
    if (close_range(3, ~0u, 0) == 0)
        return;
#endif
    for (int fd = 3; fd < 4096; fd++)
        close(fd);
}

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static _Noreturn void keeper_main(KeeperStart start, void *arg, int close_fd, const char *log_path,
                                  const char *exit_path, int report)
{
    /* out of the agent's session and process group: a Ctrl-C at its terminal, or a
     * signal to its group, is not for the keeper */
    setsid();
    prctl(PR_SET_NAME, "gpuorch-keeper", 0, 0, 0);
    struct sigaction ign = {.sa_handler = SIG_IGN}, dfl = {.sa_handler = SIG_DFL};
    static const int ignored[] = {SIGHUP, SIGINT, SIGTERM, SIGQUIT, SIGPIPE, SIGUSR1, SIGUSR2};
    for (size_t i = 0; i < sizeof(ignored) / sizeof(ignored[0]); i++)
        sigaction(ignored[i], &ign, NULL);
    sigaction(SIGCHLD, &dfl, NULL); /* ignored, the worker would be reaped unseen */
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    keeper_stdio();
    if (close_fd > 2 && close_fd != report)
        close(close_fd); /* the agent's lock: the next agent takes it while this runs on */

    Buf err = {0};
    pid_t pid = 0;
    int r = start(arg, &pid, &err);
    KeeperHello hello = {.error = r, .pid = r == 0 ? (int32_t)pid : 0};
    write_all(report, &hello, sizeof(hello));
    if (r < 0) {
        write_all(report, buf_str(&err), err.len);
        _exit(1);
    }
    close_from_3();

    /* look before reaping: until the worker is reaped its process group id cannot be
     * reused, so killing the group hits only what the worker left, and the agent may
     * signal the group until the record below exists */
    siginfo_t info = {0};
    while (waitid(P_PID, (id_t)pid, &info, WEXITED | WNOWAIT) < 0 && errno == EINTR) {
    }
    kill(-pid, SIGKILL);
    int64_t end = wall_ms();
    bool exited = info.si_code == CLD_EXITED;
    char text[128];
    int n = snprintf(text, sizeof(text), "gpuorch-exit 1 end_ms=%lld exit_code=%d signal=%d\n",
                     (long long)end, exited ? info.si_status : -1, exited ? 0 : info.si_status);
    int wr = afile_write_atomic(exit_path, text, (size_t)n);
    int logfd = wr < 0 ? open(log_path, O_WRONLY | O_APPEND | O_CLOEXEC) : -1;
    if (logfd >= 0) { /* the agent then reports the end as unknown; the log says why */
        dprintf(logfd, "gpuorch keeper: cannot record the exit status in %s: %s\n", exit_path,
                strerror(-wr));
        close(logfd);
    }
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
    }
    _exit(0);
}

int keeper_spawn(KeeperStart start, void *arg, int close_fd, const char *log_path,
                 const char *exit_path, pid_t *ret_keeper, pid_t *ret_worker, Buf *err)
{
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) < 0) {
        int e = errno;
        buf_printf(err, "cannot start the worker's keeper: %s", strerror(e));
        return -e;
    }
    pid_t keeper = fork();
    if (keeper < 0) {
        int e = errno;
        buf_printf(err, "cannot start the worker's keeper: fork: %s", strerror(e));
        close(pfd[0]);
        close(pfd[1]);
        return -e;
    }
    if (keeper == 0) {
        close(pfd[0]);
        keeper_main(start, arg, close_fd, log_path, exit_path, pfd[1]);
    }
    close(pfd[1]);
    KeeperHello hello = {0};
    size_t got = 0;
    while (got < sizeof(hello)) {
        ssize_t n = read(pfd[0], (char *)&hello + got, sizeof(hello) - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    int r = 0;
    if (got < sizeof(hello)) {
        r = -EIO;
        buf_puts(err, "cannot start the worker: its keeper ended before it said");
    } else if (hello.error < 0) {
        r = hello.error;
        char msg[512];
        size_t len = 0;
        for (;;) {
            ssize_t n = read(pfd[0], msg + len, sizeof(msg) - 1 - len);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0 || (len += (size_t)n) == sizeof(msg) - 1)
                break;
        }
        msg[len] = '\0';
        buf_puts(err, len ? msg : strerror(-r));
    }
    close(pfd[0]);
    if (r < 0) {
        while (waitpid(keeper, NULL, 0) < 0 && errno == EINTR) {
        }
        return r;
    }
    *ret_keeper = keeper;
    *ret_worker = (pid_t)hello.pid;
    return 0;
}

int keeper_exit_read(const char *path, KeeperExit *ret)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? -ENOENT : -errno;
    char text[256];
    ssize_t n = read(fd, text, sizeof(text) - 1);
    close(fd);
    if (n <= 0)
        return -EINVAL;
    text[n] = '\0';
    long long end;
    int code, sig, version;
    if (sscanf(text, "gpuorch-exit %d end_ms=%lld exit_code=%d signal=%d", &version, &end, &code,
               &sig) != 4 ||
        version != 1 || (code < 0 && sig <= 0))
        return -EINVAL;
    *ret = (KeeperExit){.end_ms = end,
                        .has_exit_code = code >= 0,
                        .exit_code = code >= 0 ? code : 0,
                        .signal = code >= 0 ? 0 : sig};
    return 0;
}
