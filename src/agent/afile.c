/* afile.c: atomic file replacement and mkdir -p for the agent's state directory. */
#include "agent/afile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int afile_write_atomic(const char *path, const char *data, size_t len)
{
    size_t n = strlen(path) + 32;
    char *tmp = malloc(n);
    if (!tmp)
        return -ENOMEM;
    snprintf(tmp, n, "%s.tmp.%ld", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        int r = -errno;
        free(tmp);
        return r;
    }
    int r = 0;
    for (size_t off = 0; off < len && !r;) {
        ssize_t w = write(fd, data + off, len - off);
        if (w < 0 && errno != EINTR)
            r = -errno;
        else if (w > 0)
            off += (size_t)w;
    }
    if (!r && fsync(fd) < 0)
        r = -errno;
    if (close(fd) < 0 && !r)
        r = -errno;
    if (!r && rename(tmp, path) < 0)
        r = -errno;
    if (r)
        unlink(tmp);
    free(tmp);
    return r;
}

int afile_mkdir_p(const char *path)
{
    size_t n = strlen(path);
    if (n == 0)
        return -EINVAL;
    char *p = strdup(path);
    if (!p)
        return -ENOMEM;
    int r = 0;
    for (size_t i = 1; i <= n && !r; i++) {
        if (p[i] != '/' && p[i] != '\0')
            continue;
        char c = p[i];
        p[i] = '\0';
        if (mkdir(p, 0755) < 0 && errno != EEXIST)
            r = -errno;
        p[i] = c;
    }
    struct stat st;
    if (!r && stat(path, &st) < 0)
        r = -errno;
    else if (!r && !S_ISDIR(st.st_mode))
        r = -ENOTDIR;
    free(p);
    return r;
}
