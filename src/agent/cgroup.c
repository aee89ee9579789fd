/* cgroup.c: finding the agent's delegated cgroup v2, arranging it (cgroup.h) and one
 * cgroup per worker. Everything here runs in the agent before a fork or after a reap;
 * the child only writes "0" to the descriptor cgroup_worker_make opened. */
#include "agent/cgroup.h"
#include "util/file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CPU_PERIOD_US 100000

struct CgroupTree {
    char *base;    /* the agent's cgroup (the delegated subtree's top) */
    char *workers; /* base/gpuorch */
};

static int write_text(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    size_t len = strlen(text);
    ssize_t n = write(fd, text, len);
    int r = n == (ssize_t)len ? 0 : n < 0 ? -errno : -EIO;
    close(fd);
    return r;
}

static int write_at(const char *dir, const char *file, const char *text, Buf *err)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/%s", dir, file);
    int r = write_text(path, text);
    if (r < 0)
        buf_printf(err, "cannot write '%s' to %s: %s", text, path, strerror(-r));
    return r;
}

/* The mount point of the cgroup2 file system and its root within the hierarchy. */
static int find_mount(char **ret_point, char **ret_root)
{
    char *text = NULL;
    size_t len = 0;
    int r = file_read_all("/proc/self/mountinfo", &text, &len);
    if (r < 0)
        return r;
    r = -ENOENT;
    for (char *line = strtok(text, "\n"); line && r == -ENOENT; line = strtok(NULL, "\n")) {
        /* ID PARENT MAJ:MIN ROOT POINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER */
        char root[PATH_MAX], point[PATH_MAX];
        const char *dash = strstr(line, " - ");
        if (!dash || strncmp(dash + 3, "cgroup2 ", 8) ||
            sscanf(line, "%*s %*s %*s %4095s %4095s", root, point) != 2)
            continue;
        *ret_point = strdup(point);
        *ret_root = strdup(root);
        r = *ret_point && *ret_root ? 0 : -ENOMEM;
    }
    free(text);
    return r;
}

/* The "0::PATH" line of /proc/self/cgroup. */
static int own_cgroup(char **ret)
{
    char *text = NULL;
    size_t len = 0;
    int r = file_read_all("/proc/self/cgroup", &text, &len);
    if (r < 0)
        return r;
    r = -ENOENT;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n"))
        if (!strncmp(line, "0::", 3)) {
            *ret = strdup(line + 3);
            r = *ret ? 0 : -ENOMEM;
            break;
        }
    free(text);
    return r;
}

static bool has_word(const char *list, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = list; (p = strstr(p, word)); p += n)
        if ((p == list || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\n' || p[n] == '\0'))
            return true;
    return false;
}

static int need_controllers(const char *dir, Buf *why)
{
    char path[PATH_MAX], *text = NULL;
    size_t len = 0;
    snprintf(path, sizeof(path), "%s/cgroup.controllers", dir);
    int r = file_read_all(path, &text, &len);
    if (r < 0) {
        buf_printf(why, "cannot read %s: %s", path, strerror(-r));
        return r;
    }
    text[strcspn(text, "\n")] = '\0';
    if (!has_word(text, "memory") || !has_word(text, "cpu")) {
        buf_printf(why, "the cgroup %s does not offer the memory and cpu controllers (it has: %s)",
                   dir, *text ? text : "none");
        r = -ENOTSUP;
    }
    free(text);
    return r;
}

static int make_dir(const char *path, Buf *err)
{
    if (mkdir(path, 0755) < 0 && errno != EEXIST) {
        int r = -errno;
        buf_printf(err, "cannot make the cgroup %s: %s", path, strerror(-r));
        return r;
    }
    return 0;
}

/* Does the cgroup hold a process other than the agent? Then its controllers cannot be
 * given to its children, and the agent leaves it (and them) as it is. */
static int others_inside(const char *dir, Buf *why)
{
    char path[PATH_MAX], *text = NULL;
    size_t len = 0;
    snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
    int r = file_read_all(path, &text, &len);
    if (r < 0) {
        buf_printf(why, "cannot read %s: %s", path, strerror(-r));
        return r;
    }
    long self = (long)getpid();
    size_t others = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n"))
        others += strtol(line, NULL, 10) != self;
    free(text);
    if (others) {
        buf_printf(why,
                   "%zu other processes live in the cgroup %s: start the agent in a cgroup of "
                   "its own, as systemd's Delegate=yes does",
                   others, dir);
        return -EBUSY;
    }
    return 0;
}

/* The agent's cgroup from the mount and its own path. An agent restarted from where an
 * earlier one moved itself (<base>/agent next to <base>/gpuorch) takes <base> again. */
static char *base_path(const char *point, const char *root, const char *own)
{
    size_t rl = strlen(root);
    if (strcmp(root, "/") && !strncmp(own, root, rl))
        own += rl;
    size_t n = strlen(point) + strlen(own) + 2;
    char *base = malloc(n);
    if (!base)
        return NULL;
    snprintf(base, n, "%s%s%s", point, *own == '/' ? "" : "/", own);
    size_t bl = strlen(base);
    while (bl > 1 && base[bl - 1] == '/')
        base[--bl] = '\0';
    char *slash = strrchr(base, '/');
    if (slash && !strcmp(slash, "/agent")) {
        *slash = '\0';
        char probe[PATH_MAX];
        struct stat st;
        snprintf(probe, sizeof(probe), "%s/gpuorch", base);
        if (stat(probe, &st) < 0 || !S_ISDIR(st.st_mode))
            *slash = '/';
    }
    return base;
}

int cgroup_tree_open(CgroupTree **ret, Buf *why)
{
    char *point = NULL, *root = NULL, *own = NULL;
    CgroupTree *t = calloc(1, sizeof(*t));
    int r = t ? find_mount(&point, &root) : -ENOMEM;
    if (r == -ENOENT)
        buf_puts(why, "no cgroup2 file system is mounted");
    else if (r < 0)
        buf_printf(why, "cannot read /proc/self/mountinfo: %s", strerror(-r));
    if (!r && (r = own_cgroup(&own)) < 0)
        buf_printf(why, "/proc/self/cgroup has no cgroup v2 line: %s", strerror(-r));
    if (!r && !(t->base = base_path(point, root, own)))
        r = -ENOMEM;
    if (!r)
        r = need_controllers(t->base, why);
    if (!r)
        r = others_inside(t->base, why);
    char leaf[PATH_MAX], pid[32];
    if (!r) {
        snprintf(leaf, sizeof(leaf), "%s/agent", t->base);
        snprintf(pid, sizeof(pid), "%d", (int)getpid());
        r = make_dir(leaf, why);
    }
    /* no internal processes: the agent leaves the cgroup whose children get controllers */
    if (!r)
        r = write_at(leaf, "cgroup.procs", pid, why);
    if (!r)
        r = write_at(t->base, "cgroup.subtree_control", "+memory +cpu", why);
    if (!r) {
        size_t n = strlen(t->base) + sizeof("/gpuorch");
        if (!(t->workers = malloc(n)))
            r = -ENOMEM;
        else
            snprintf(t->workers, n, "%s/gpuorch", t->base);
    }
    if (!r)
        r = make_dir(t->workers, why);
    if (!r)
        r = write_at(t->workers, "cgroup.subtree_control", "+memory +cpu", why);
    if (r == -ENOMEM && !why->len)
        buf_puts(why, "out of memory");
    free(point);
    free(root);
    free(own);
    if (r < 0) {
        cgroup_tree_free(t);
        return r;
    }
    *ret = t;
    return 0;
}

void cgroup_tree_free(CgroupTree *t)
{
    if (!t)
        return;
    free(t->base);
    free(t->workers);
    free(t);
}

const char *cgroup_tree_path(const CgroupTree *t)
{
    return t->workers;
}

int cgroup_worker_make(CgroupTree *t, const char *name, uint32_t memory_mib, uint32_t cpu_milli,
                       int *ret_fd, Buf *err)
{
    char dir[PATH_MAX], text[64];
    snprintf(dir, sizeof(dir), "%s/%s", t->workers, name);
    int r = make_dir(dir, err);
    if (!r) {
        if (memory_mib)
            snprintf(text, sizeof(text), "%" PRIu64, (uint64_t)memory_mib << 20);
        else
            snprintf(text, sizeof(text), "max");
        r = write_at(dir, "memory.max", text, err);
    }
    if (!r && memory_mib) {
        /* a bound that swap could stretch is no bound; no swap controller: nothing to do */
        char swap[PATH_MAX + 32];
        snprintf(swap, sizeof(swap), "%s/memory.swap.max", dir);
        if (access(swap, F_OK) == 0)
            r = write_at(dir, "memory.swap.max", "0", err);
    }
    if (!r) {
        if (cpu_milli)
            snprintf(text, sizeof(text), "%" PRIu64 " %d",
                     (uint64_t)cpu_milli * CPU_PERIOD_US / 1000, CPU_PERIOD_US);
        else
            snprintf(text, sizeof(text), "max %d", CPU_PERIOD_US);
        r = write_at(dir, "cpu.max", text, err);
    }
    if (r < 0) {
        rmdir(dir);
        return r;
    }
    char procs[PATH_MAX + 32];
    snprintf(procs, sizeof(procs), "%s/cgroup.procs", dir);
    int fd = open(procs, O_WRONLY | O_CLOEXEC);
    if (fd < 0) {
        r = -errno;
        buf_printf(err, "cannot open %s: %s", procs, strerror(-r));
        rmdir(dir);
        return r;
    }
    *ret_fd = fd;
    return 0;
}

int cgroup_worker_remove(CgroupTree *t, const char *name)
{
    char dir[PATH_MAX], kill_path[PATH_MAX + 32];
    snprintf(dir, sizeof(dir), "%s/%s", t->workers, name);
    snprintf(kill_path, sizeof(kill_path), "%s/cgroup.kill", dir);
    (void)write_text(kill_path, "1"); /* absent before Linux 5.14: the group kill has to do */
    return rmdir(dir) < 0 ? -errno : 0;
}

void cgroup_sweep(CgroupTree *t)
{
    DIR *d = opendir(t->workers);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.' || e->d_type != DT_DIR)
            continue;
        char dir[PATH_MAX];
        snprintf(dir, sizeof(dir), "%s/%s", t->workers, e->d_name);
        (void)rmdir(dir); /* EBUSY: its processes are there, it stays */
    }
    closedir(d);
}
