/* upload.c: a worker's log, in chunks, to the server. Offsets count from the byte the
 * run's output began at (log_base), since one log file holds every run of a rank. */
#include "agent/upload.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The server's "size" from a reply body, or -1. */
static int64_t reply_size(const HttpReply *rep)
{
    json_t *o = json_loadb(buf_str(&rep->body), rep->body.len, 0, NULL);
    json_t *s = json_object_get(o, "size");
    int64_t v = json_is_integer(s) ? json_integer_value(s) : -1;
    json_decref(o);
    return v;
}

int upload_log(HttpClient *h, Worker *w, int *ret_status, Buf *err)
{
    *ret_status = 0;
    if (!w->log_path)
        return 0;
    int fd = open(w->log_path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0; /* nothing written yet, or removed by hand: nothing to send */
    char *chunk = malloc(UPLOAD_CHUNK);
    HttpReply rep = {0};
    int r = chunk ? 0 : -ENOMEM;
    for (int req = 0; req < UPLOAD_MAX_REQUESTS && !r; req++) {
        struct stat st;
        if (fstat(fd, &st) < 0)
            break;
        int64_t avail = (int64_t)st.st_size - w->log_base;
        if (avail <= w->log_sent)
            break;
        size_t want = (size_t)(avail - w->log_sent);
        if (want > UPLOAD_CHUNK)
            want = UPLOAD_CHUNK;
        ssize_t n = pread(fd, chunk, want, (off_t)(w->log_base + w->log_sent));
        if (n <= 0)
            break;
        char path[160];
        snprintf(path, sizeof(path), "/api/v1/agent/logs/%lld/%u?run=%lld&offset=%lld",
                 (long long)w->key.job, w->key.rank, (long long)w->key.run, (long long)w->log_sent);
        r = http_request(h, "POST", path, "application/octet-stream", chunk, (size_t)n, &rep, err);
        if (r < 0) {
            r = -EIO;
            break;
        }
        *ret_status = (int)rep.status;
        int64_t size = reply_size(&rep);
        if (rep.status == 200) {
            w->log_sent = size >= w->log_sent && size <= avail ? size : w->log_sent + n;
        } else if (rep.status == 409 && size >= 0) {
            w->log_sent = size <= avail ? size : avail;
        } else {
            json_t *o = json_loadb(buf_str(&rep.body), rep.body.len, 0, NULL);
            const char *msg = json_string_value(json_object_get(o, "error"));
            buf_printf(err, "log upload of job %lld rank %u: the server answered %ld%s%s",
                       (long long)w->key.job, w->key.rank, rep.status, msg ? ": " : "",
                       msg ? msg : "");
            json_decref(o);
            r = -EIO;
        }
    }
    http_reply_free(&rep);
    free(chunk);
    close(fd);
    return r;
}
