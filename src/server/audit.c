/* audit.c: the audit log of audit.h. A line is built whole in memory, values quoted
 * where they hold a space, a quote or a non-printable byte (escaped as \xNN), so a path
 * or an error sentence a client chose cannot forge a second line or another field; the
 * object changed comes from the path (a job, a team, a token) or, for a creation, from
 * the reply's ids. */
#include "server/audit.h"

#include "util/log.h"
#include "util/macro.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define AUDIT_MAX_VALUE 256 /* a longer value is cut (and says so with "...") */

struct Audit {
    int fd;
    char *path;
    bool failing; /* the last write failed: logged once until one succeeds */
};

int audit_open(const char *dir, Audit **ret, Buf *err)
{
    Audit *a = calloc(1, sizeof(*a));
    if (!a)
        return -ENOMEM;
    if (asprintf(&a->path, "%s/audit.log", dir && *dir ? dir : ".") < 0) {
        free(a);
        return -ENOMEM;
    }
    a->fd = open(a->path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (a->fd < 0) {
        int e = errno;
        buf_printf(err, "cannot open the audit log %s: %s", a->path, strerror(e));
        free(a->path);
        free(a);
        return -e;
    }
    *ret = a;
    return 0;
}

void audit_close(Audit *a)
{
    if (!a)
        return;
    close(a->fd);
    free(a->path);
    free(a);
}

static void put_value(Buf *b, const char *v)
{
    if (!v || !*v) {
        buf_putc(b, '-');
        return;
    }
    size_t n = strlen(v);
    bool plain = true;
    for (size_t i = 0; i < n && plain; i++) {
        unsigned char ch = (unsigned char)v[i];
        plain = ch > ' ' && ch < 0x7f && ch != '"' && ch != '\\' && ch != '=';
    }
    if (plain && n <= AUDIT_MAX_VALUE) {
        buf_puts(b, v);
        return;
    }
    buf_putc(b, '"');
    for (size_t i = 0; i < n && i < AUDIT_MAX_VALUE; i++) {
        unsigned char ch = (unsigned char)v[i];
        if (ch == '"' || ch == '\\')
            buf_printf(b, "\\%c", ch);
        else if (ch < ' ' || ch >= 0x7f)
            buf_printf(b, "\\x%02x", ch);
        else
            buf_putc(b, (char)ch);
    }
    if (n > AUDIT_MAX_VALUE)
        buf_puts(b, "...");
    buf_putc(b, '"');
}

static void put_field(Buf *b, const char *key, const char *v)
{
    buf_printf(b, " %s=", key);
    put_value(b, v);
}

/* The ids a creation's reply names: {"id": N} or {"jobs": [{"id": N}, ...]}, as
 * "N" or "N,M,...". */
static void reply_ids(const HttpResponse *rp, Buf *ret)
{
    if (rp->content_type || !rp->body.len)
        return;
    json_t *v = json_loadb(rp->body.data, rp->body.len, 0, NULL);
    json_t *id = json_object_get(v, "id");
    if (json_is_integer(id))
        buf_printf(ret, "%lld", (long long)json_integer_value(id));
    size_t i;
    json_t *j;
    json_array_foreach(json_object_get(v, "jobs"), i, j)
    {
        id = json_object_get(j, "id");
        if (json_is_integer(id))
            buf_printf(ret, "%s%lld", ret->len ? "," : "", (long long)json_integer_value(id));
    }
    json_decref(v);
}

/* The object a request made or changed, as "kind/name": job/12, team/search, token/5,
 * jobs/12,13 (a list submitted), or NULL when none can be named. */
static void target(const char *method, const char *path, const HttpResponse *rp, Buf *ret)
{
    static const struct {
        const char *prefix, *kind;
    } kinds[] = {
        {"/api/v1/jobs/", "job"},
        {"/api/v1/teams/", "team"},
        {"/api/v1/tokens/", "token"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(kinds); i++) {
        size_t n = strlen(kinds[i].prefix);
        if (!strncmp(path, kinds[i].prefix, n) && path[n]) {
            buf_printf(ret, "%s/%s", kinds[i].kind, path + n);
            return;
        }
    }
    bool made = rp->status / 100 == 2 && !strcmp(method, "POST");
    Buf ids = {0};
    if (made)
        reply_ids(rp, &ids);
    if (ids.len && !strcmp(path, "/api/v1/jobs"))
        buf_printf(ret, "%s/%s", strchr(buf_str(&ids), ',') ? "jobs" : "job", buf_str(&ids));
    else if (ids.len && !strcmp(path, "/api/v1/tokens"))
        buf_printf(ret, "token/%s", buf_str(&ids));
    buf_free(&ids);
}

/* The error sentence of a refusal's {"error": "..."} reply. */
static char *reply_error(const HttpResponse *rp)
{
    if (rp->status < 400 || rp->content_type || !rp->body.len)
        return NULL;
    json_t *v = json_loadb(rp->body.data, rp->body.len, 0, NULL);
    const char *e = json_string_value(json_object_get(v, "error"));
    char *r = e ? strdup(e) : NULL;
    json_decref(v);
    return r;
}

bool audit_format(Buf *line, const char *method, const char *path, const Caller *who, bool machine,
                  const HttpResponse *rp, const struct sockaddr *addr, int64_t now_ms)
{
    if (!strcmp(method, "GET") || !strcmp(method, "HEAD"))
        return false;
    if (machine && who && rp->status / 100 == 2)
        return false;
    time_t sec = (time_t)(now_ms / 1000);
    struct tm tm;
    char when[32];
    gmtime_r(&sec, &tm);
    strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
    buf_printf(line, "time=%s.%03dZ", when, (int)(now_ms % 1000));
    if (who) {
        buf_printf(line, " token=%lld", (long long)who->token_id);
        put_field(line, "user", who->user);
        put_field(line, "role", role_name(who->role));
        put_field(line, "team", who->team);
    } else {
        buf_puts(line, " token=- user=- role=- team=-");
    }
    put_field(line, "method", method);
    put_field(line, "path", path);
    buf_printf(line, " status=%d", rp->status);
    Buf obj = {0};
    target(method, path, rp, &obj);
    if (obj.len)
        put_field(line, "target", buf_str(&obj));
    buf_free(&obj);
    _cleanup_free_ char *error = reply_error(rp);
    if (error)
        put_field(line, "error", error);
    char host[64] = "";
    if (addr)
        getnameinfo(addr,
                    addr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                                : sizeof(struct sockaddr_in),
                    host, sizeof(host), NULL, 0, NI_NUMERICHOST);
    put_field(line, "addr", host);
    return true;
}

void audit_request(Audit *a, const char *method, const char *path, const Caller *who, bool machine,
                   const HttpResponse *rp, const struct sockaddr *addr, int64_t now_ms)
{
    if (!a)
        return;
    Buf line = {0};
    if (!audit_format(&line, method, path, who, machine, rp, addr, now_ms)) {
        buf_free(&line);
        return;
    }
    buf_putc(&line, '\n');
    ssize_t w = line.oom ? -1 : write(a->fd, line.data, line.len);
    int e = w < 0 ? errno : 0;
    if (w != (ssize_t)line.len && !__atomic_exchange_n(&a->failing, true, __ATOMIC_RELAXED))
        log_error("event=audit_write_failed path=%s error=\"%s\"", a->path,
                  line.oom ? "out of memory"
                  : w < 0  ? strerror(e)
                           : "short write");
    else if (w == (ssize_t)line.len)
        __atomic_store_n(&a->failing, false, __ATOMIC_RELAXED);
    buf_free(&line);
}
