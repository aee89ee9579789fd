/* web.c: the static files of the portal. Every request path is mapped to a file under
 * one root directory by a whitelist of shapes ("/", "/web/a/b.js") rather than by
 * cleaning up what the client sent: a segment that is empty or starts with a dot is
 * never served, so no path climbs out of the root or reaches a hidden file. The files
 * are small and few, so each is read whole per request; nothing is cached, and an
 * edit to web/ shows on the next reload. */
#include "server/web.h"

#include "util/macro.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define WEB_PREFIX   "/web/"
#define WEB_INDEX    "index.html"
#define WEB_MAX_FILE (16u << 20) /* no portal file comes near this */

/* Is every '/'-separated segment of rel non-empty and free of a leading dot? */
static bool segments_ok(const char *rel)
{
    const char *p = rel;
    for (;;) {
        size_t len = strcspn(p, "/");
        if (!len || p[0] == '.')
            return false;
        if (!p[len])
            return true;
        p += len + 1;
    }
}

char *web_file_path(const char *root, const char *url_path)
{
    const char *rel;
    if (!strcmp(url_path, "/"))
        rel = WEB_INDEX;
    else if (!strncmp(url_path, WEB_PREFIX, strlen(WEB_PREFIX)))
        rel = url_path + strlen(WEB_PREFIX);
    else
        return NULL;
    if (!segments_ok(rel) || strchr(rel, '\\'))
        return NULL;
    char *path = NULL;
    if (asprintf(&path, "%s/%s", root, rel) < 0)
        return NULL;
    return path;
}

const char *web_content_type(const char *name)
{
    static const struct {
        const char *ext, *type;
    } types[] = {
        {".html", "text/html; charset=utf-8"},
        {".js", "text/javascript; charset=utf-8"},
        {".mjs", "text/javascript; charset=utf-8"},
        {".css", "text/css; charset=utf-8"},
        {".json", "application/json"},
        {".svg", "image/svg+xml"},
        {".png", "image/png"},
        {".ico", "image/x-icon"},
        {".txt", "text/plain; charset=utf-8"},
        {".map", "application/json"},
        {".woff2", "font/woff2"},
    };
    const char *dot = strrchr(name, '.');
    const char *slash = strrchr(name, '/');
    if (dot && (!slash || dot > slash))
        for (size_t i = 0; i < ARRAY_SIZE(types); i++)
            if (!strcmp(dot, types[i].ext))
                return types[i].type;
    return "application/octet-stream";
}

/* Read a regular file whole into b. 0, -ENOENT for anything that is not a regular
 * file we may read, -EFBIG past WEB_MAX_FILE, or another negative errno. */
static int read_regular(const char *path, Buf *b)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT || errno == ENOTDIR || errno == EACCES || errno == ENAMETOOLONG
                   ? -ENOENT
                   : -errno;
    struct stat st;
    int r = 0;
    if (fstat(fd, &st) < 0)
        r = -errno;
    else if (!S_ISREG(st.st_mode))
        r = -ENOENT;
    else if ((unsigned long long)st.st_size > WEB_MAX_FILE)
        r = -EFBIG;
    char chunk[16384];
    while (r == 0) {
        ssize_t n = read(fd, chunk, sizeof(chunk));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            r = -errno;
        else if (n == 0)
            break;
        else if (b->len + (size_t)n > WEB_MAX_FILE)
            r = -EFBIG;
        else
            buf_append(b, chunk, (size_t)n);
    }
    close(fd);
    if (r == 0 && b->oom)
        r = -ENOMEM;
    return r;
}

void web_reply(const char *root, const char *url_path, HttpResponse *rp)
{
    _cleanup_free_ char *path = root ? web_file_path(root, url_path) : NULL;
    if (!path) {
        http_reply_error(rp, 404, "no such page: %s", url_path);
        return;
    }
    Buf b = {0};
    int r = read_regular(path, &b);
    if (r < 0) {
        buf_free(&b);
        if (r == -ENOENT)
            http_reply_error(rp, 404, "no such page: %s", url_path);
        else
            http_reply_error(rp, 500, "cannot read %s: %s", path, strerror(-r));
        return;
    }
    buf_free(&rp->body);
    rp->body = b;
    rp->status = 200;
    rp->content_type = web_content_type(path);
}
