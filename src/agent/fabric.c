/* fabric.c: discovery of the node's RDMA ports and network interfaces from sysfs
 * (fabric.h). The walk reads small files under a root the caller names, so a test can
 * lay out a fake tree; every file's text goes through one pure parser. Nothing here
 * fails the agent: what cannot be read is left out, and an empty list means "no
 * fabric to tune for". */
#include "agent/fabric.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define GID_SLOTS_MAX 256 /* the kernel's GID tables are at most this long */

/* ---- parsing ---- */

/* text without leading blanks, and its length without trailing blanks and newline */
static size_t trimmed(const char **text)
{
    const char *s = *text;
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1]))
        n--;
    *text = s;
    return n;
}

static bool equals(const char *text, const char *word)
{
    size_t n = trimmed(&text);
    return n == strlen(word) && strncasecmp(text, word, n) == 0;
}

bool fabric_parse_active(const char *text)
{
    /* "<number>: <NAME>", where 4 is IB_PORT_ACTIVE */
    char *end;
    long v = strtol(text, &end, 10);
    return end != text && *end == ':' && v == 4;
}

FabricLink fabric_parse_link_layer(const char *text)
{
    if (equals(text, "InfiniBand"))
        return FLINK_INFINIBAND;
    if (equals(text, "Ethernet"))
        return FLINK_ETHERNET;
    return FLINK_UNKNOWN;
}

unsigned fabric_parse_rate_gbps(const char *text)
{
    char *end;
    unsigned long v = strtoul(text, &end, 10);
    return end != text && v <= UINT_MAX && (*end == ' ' || *end == '.') ? (unsigned)v : 0;
}

bool fabric_parse_roce_v2(const char *text)
{
    return equals(text, "RoCE v2");
}

bool fabric_parse_gid_zero(const char *text)
{
    size_t n = trimmed(&text);
    if (!n)
        return true;
    for (size_t i = 0; i < n; i++) {
        char c = text[i];
        if (c == ':')
            continue;
        if (!isxdigit((unsigned char)c))
            return true; /* not a GID: never chosen */
        if (c != '0')
            return false;
    }
    return true;
}

bool fabric_parse_up(const char *text)
{
    return equals(text, "up");
}

/* ---- the walk ---- */

/* snprintf that leaves out "" when the text does not fit, so a path cut short opens
 * nothing rather than some other file. */
__attribute__((format(printf, 3, 4))) static void pathf(char *out, size_t size, const char *fmt,
                                                        ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(out, size, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= size)
        out[0] = '\0';
}

/* The text of root/rel (at most a small file), NUL-terminated, in buf. -errno. */
static int read_small(const char *path, char *buf, size_t size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t n = read(fd, buf, size - 1);
    int e = errno;
    close(fd);
    if (n < 0)
        return -e;
    buf[n] = '\0';
    return 0;
}

/* The last component of the symbolic link at path ("mlx5_core" for a driver link), in
 * out; "" when it is no link. */
static void link_base(const char *path, char *out, size_t size)
{
    char target[PATH_MAX];
    ssize_t n = readlink(path, target, sizeof(target) - 1);
    out[0] = '\0';
    if (n <= 0)
        return;
    target[n] = '\0';
    const char *slash = strrchr(target, '/');
    pathf(out, size, "%s", slash ? slash + 1 : target);
}

static bool is_dir(const char *path)
{
    DIR *d = opendir(path);
    if (!d)
        return false;
    closedir(d);
    return true;
}

/* The first GID index of the port at dir whose type is RoCE v2 and whose GID is in use;
 * -1 when none. Slots are read in order until the table ends (a missing types file). */
static int roce_v2_gid(const char *dir, char *netdev, size_t size)
{
    char path[PATH_MAX], text[128];
    for (int i = 0; i < GID_SLOTS_MAX; i++) {
        pathf(path, sizeof(path), "%s/gid_attrs/types/%d", dir, i);
        int r = read_small(path, text, sizeof(text));
        if (r == -ENOENT)
            break;
        if (r < 0 || !fabric_parse_roce_v2(text)) /* an empty slot reads as EINVAL */
            continue;
        pathf(path, sizeof(path), "%s/gids/%d", dir, i);
        if (read_small(path, text, sizeof(text)) != 0 || fabric_parse_gid_zero(text))
            continue;
        pathf(path, sizeof(path), "%s/gid_attrs/ndevs/%d", dir, i);
        if (read_small(path, text, sizeof(text)) == 0) {
            const char *t = text;
            size_t n = trimmed(&t);
            pathf(netdev, size, "%.*s", (int)n, t);
        }
        return i;
    }
    return -1;
}

static void read_port(FabricInfo *f, const char *devdir, const char *dev, bool efa,
                      const char *port)
{
    char *end;
    unsigned long n = strtoul(port, &end, 10);
    if (*end || n == 0 || n > UINT_MAX || f->n_ports >= FABRIC_MAX_PORTS ||
        strlen(dev) >= FABRIC_NAME_MAX)
        return;
    char dir[PATH_MAX], path[PATH_MAX], text[128];
    pathf(dir, sizeof(dir), "%s/ports/%s", devdir, port);
    FabricPort *p = &f->ports[f->n_ports];
    memset(p, 0, sizeof(*p));
    pathf(p->dev, sizeof(p->dev), "%s", dev);
    p->port = (unsigned)n;
    p->efa = efa;
    pathf(path, sizeof(path), "%s/state", dir);
    p->active = read_small(path, text, sizeof(text)) == 0 && fabric_parse_active(text);
    pathf(path, sizeof(path), "%s/link_layer", dir);
    p->link = read_small(path, text, sizeof(text)) == 0 ? (uint8_t)fabric_parse_link_layer(text)
                                                        : FLINK_UNKNOWN;
    pathf(path, sizeof(path), "%s/rate", dir);
    p->rate_gbps = read_small(path, text, sizeof(text)) == 0 ? fabric_parse_rate_gbps(text) : 0;
    p->roce_v2_gid =
        p->link == FLINK_ETHERNET ? roce_v2_gid(dir, p->netdev, sizeof(p->netdev)) : -1;
    f->n_ports++;
}

static void read_rdma(FabricInfo *f, const char *root)
{
    char cls[PATH_MAX];
    pathf(cls, sizeof(cls), "%s/class/infiniband", root);
    DIR *d = opendir(cls);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        char devdir[PATH_MAX], path[PATH_MAX], driver[FABRIC_NAME_MAX];
        pathf(devdir, sizeof(devdir), "%s/%s", cls, de->d_name);
        pathf(path, sizeof(path), "%s/device/driver", devdir);
        link_base(path, driver, sizeof(driver));
        bool efa = strncmp(de->d_name, "efa", 3) == 0 || strcmp(driver, "efa") == 0;
        pathf(path, sizeof(path), "%s/ports", devdir);
        DIR *pd = opendir(path);
        if (!pd)
            continue;
        struct dirent *pe;
        while ((pe = readdir(pd)))
            if (pe->d_name[0] != '.')
                read_port(f, devdir, de->d_name, efa, pe->d_name);
        closedir(pd);
    }
    closedir(d);
}

static void read_net(FabricInfo *f, const char *root)
{
    char cls[PATH_MAX];
    pathf(cls, sizeof(cls), "%s/class/net", root);
    DIR *d = opendir(cls);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d)) && f->n_ifs < FABRIC_MAX_IFS) {
        if (de->d_name[0] == '.' || strcmp(de->d_name, "lo") == 0 ||
            strlen(de->d_name) >= FABRIC_NAME_MAX)
            continue;
        char path[PATH_MAX], text[64];
        /* bridges, veths, docker0 and the like have no device behind them */
        pathf(path, sizeof(path), "%s/%s/device", cls, de->d_name);
        if (!is_dir(path))
            continue;
        FabricIf *i = &f->ifs[f->n_ifs];
        memset(i, 0, sizeof(*i));
        pathf(i->name, sizeof(i->name), "%s", de->d_name);
        pathf(path, sizeof(path), "%s/%s/device/driver", cls, de->d_name);
        link_base(path, i->driver, sizeof(i->driver));
        pathf(path, sizeof(path), "%s/%s/operstate", cls, de->d_name);
        i->up = read_small(path, text, sizeof(text)) == 0 && fabric_parse_up(text);
        f->n_ifs++;
    }
    closedir(d);
}

static int cmp_port(const void *x, const void *y)
{
    const FabricPort *a = x, *b = y;
    int c = strverscmp(a->dev, b->dev); /* mlx5_2 before mlx5_10 */
    return c ? c : (a->port > b->port) - (a->port < b->port);
}

static int cmp_if(const void *x, const void *y)
{
    const FabricIf *a = x, *b = y;
    return strverscmp(a->name, b->name);
}

int fabric_discover(const char *sysfs_root, FabricInfo *ret)
{
    memset(ret, 0, sizeof(*ret));
    const char *root = sysfs_root && *sysfs_root ? sysfs_root : "/sys";
    read_rdma(ret, root);
    read_net(ret, root);
    qsort(ret->ports, ret->n_ports, sizeof(ret->ports[0]), cmp_port);
    qsort(ret->ifs, ret->n_ifs, sizeof(ret->ifs[0]), cmp_if);
    return 0;
}
