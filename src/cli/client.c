/* client.c: the plumbing every client command shares (see client.h). The exit code of
 * a failed request follows one rule: when the server refused what the user typed
 * (400 malformed or bad value, 413 too big, 422 can never run) it is bad input, 2;
 * anything else the server or the network says is a failure at run time, 1. */
#include "cli/client.h"

#include "util/file.h"
#include "util/macro.h"
#include "util/units.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void client_init(Client *c, const char *cmd)
{
    *c = (Client){.cmd = cmd, .format = "table"};
}

void client_free(Client *c)
{
    http_client_free(c->http);
    free(c->token_file);
    c->http = NULL;
    c->token_file = NULL;
}

bool client_option(Client *c, int opt, const char *arg)
{
    switch (opt) {
    case CLIENT_OPT_SERVER:
        c->server = arg;
        return true;
    case CLIENT_OPT_TOKEN:
        c->token = arg;
        return true;
    case 'o':
        c->format = arg;
        return true;
    default:
        return false;
    }
}

int client_parse_options(Client *c, int argc, char **argv, const char *shortopts,
                         const struct option *opts, ClientOwnOption own, void *ctx,
                         void (*usage)(FILE *))
{
    int opt;
    optind = 1;
    while ((opt = getopt_long(argc, argv, shortopts, opts, NULL)) != -1) {
        if (client_option(c, opt, optarg))
            continue;
        if (opt == 'h') {
            usage(stdout);
            return 0;
        }
        int r = own ? own(ctx, opt, optarg) : -1;
        if (r == -1) {
            usage(stderr);
            return 2;
        }
        if (r > 0)
            return r;
    }
    return -1;
}

int client_check_format(const Client *c, const char *const *allowed)
{
    Buf list = {0};
    for (size_t i = 0; allowed[i]; i++) {
        if (!strcmp(c->format, allowed[i])) {
            buf_free(&list);
            return 0;
        }
        buf_printf(&list, "%s%s", i ? (allowed[i + 1] ? ", " : " or ") : "", allowed[i]);
    }
    client_error(c, "-o must be %s, not '%s'", buf_str(&list), c->format);
    buf_free(&list);
    return 2;
}

bool client_json_output(const Client *c)
{
    return !strcmp(c->format, "json");
}

void client_error(const Client *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "gpuorch %s: ", c->cmd);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

void client_oom(const Client *c)
{
    client_error(c, "out of memory");
}

int client_show(const Client *c, int r, const Buf *text, const Buf *err)
{
    if (r == -ENOMEM) {
        client_oom(c);
        return 1;
    }
    if (r < 0) {
        client_error(c, "%s", buf_str(err));
        return 1;
    }
    fputs(buf_str(text), stdout);
    return 0;
}

/* The token in ./var/admin.token, without its trailing newline; NULL when unreadable. */
static char *read_token_file(void)
{
    char *data = NULL;
    size_t len = 0;
    if (file_read_all(CLIENT_TOKEN_FILE, &data, &len) < 0)
        return NULL;
    while (len > 0 && isspace((unsigned char)data[len - 1]))
        data[--len] = '\0';
    if (len == 0) {
        free(data);
        return NULL;
    }
    return data;
}

int client_connect(Client *c)
{
    if (!c->server) {
        c->server = getenv("GPUORCH_SERVER");
        c->server_from_env = c->server && *c->server;
        if (!c->server_from_env)
            c->server = CLIENT_DEFAULT_SERVER;
    }
    if (!c->token) {
        c->token = getenv("GPUORCH_TOKEN");
        if (!c->token || !*c->token)
            c->token = c->token_file = read_token_file();
    }
    int r = http_client_new(c->server, c->token, 0, &c->http);
    if (r == -EINVAL) {
        client_error(
            c, "%s must be an http:// or https:// URL (or up to 8, comma-separated), not '%s'",
            c->server_from_env ? "GPUORCH_SERVER" : "--server", c->server);
        return 2;
    }
    if (r < 0) {
        client_oom(c);
        return 1;
    }
    return 0;
}

int client_request(Client *c, const char *context, const char *method, const char *path,
                   const char *content_type, const char *body, size_t len, HttpReply *ret)
{
    Buf err = {0};
    int r = http_request(c->http, method, path, content_type, body, len, ret, &err);
    if (r < 0) {
        if (r == -ENOMEM && !err.len)
            buf_puts(&err, "out of memory");
        client_error(c, "%s%s%s", context ? context : "", context ? ": " : "", buf_str(&err));
    }
    buf_free(&err);
    return r < 0 ? 1 : 0;
}

int client_reply_error(const Client *c, const char *context, const HttpReply *r)
{
    Buf msg = {0};
    json_t *doc = json_loadb(r->body.data ? r->body.data : "", r->body.len, 0, NULL);
    const char *text = json_string_value(json_object_get(doc, "error"));
    if (text && *text) {
        buf_puts(&msg, text);
    } else {
        /* not our server's error shape (a proxy, say): its first line tells most */
        const char *b = buf_str(&r->body);
        size_t n = strcspn(b, "\r\n");
        buf_printf(&msg, "the server answered HTTP %ld%s%.*s", r->status, n ? ": " : "",
                   (int)MIN(n, (size_t)200), b);
    }
    const char *hint = "";
    if (r->status == 401)
        hint = "; give --token or set GPUORCH_TOKEN";
    client_error(c, "%s%s%s (HTTP %ld%s)", context ? context : "", context ? ": " : "",
                 buf_str(&msg), r->status, hint);
    json_decref(doc);
    buf_free(&msg);
    return r->status == 400 || r->status == 413 || r->status == 422 ? 2 : 1;
}

int client_call(Client *c, const char *context, const char *method, const char *path,
                const char *content_type, const char *body, size_t len, HttpReply *ret)
{
    int rc = client_request(c, context, method, path, content_type, body, len, ret);
    if (rc)
        return rc;
    if (ret->status < 200 || ret->status > 299)
        return client_reply_error(c, context, ret);
    return 0;
}

int client_parse(const Client *c, const HttpReply *r, json_t **ret)
{
    json_error_t e;
    json_t *doc = json_loadb(r->body.data ? r->body.data : "", r->body.len, 0, &e);
    if (!doc) {
        client_error(c, "the server's reply is not JSON (%s)", e.text);
        return 1;
    }
    *ret = doc;
    return 0;
}

void client_print_body(const HttpReply *r, bool one_line)
{
    const char *b = buf_str(&r->body);
    size_t n = r->body.len;
    if (one_line) {
        for (size_t i = 0; i < n; i++)
            if (b[i] != '\n' && b[i] != '\r')
                fputc(b[i], stdout);
    } else {
        fwrite(b, 1, n, stdout);
    }
    if (one_line || n == 0 || b[n - 1] != '\n')
        fputc('\n', stdout);
}

void client_escape(Buf *b, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (isalnum(ch) || ch == '-' || ch == '_' || ch == '.' || ch == '~') {
            buf_putc(b, (char)ch);
        } else {
            char enc[3] = {'%', hex[ch >> 4], hex[ch & 15]};
            buf_append(b, enc, 3);
        }
    }
}

void client_query(Buf *path, const char *key, const char *value)
{
    buf_putc(path, strchr(buf_str(path), '?') ? '&' : '?');
    client_escape(path, key);
    buf_putc(path, '=');
    client_escape(path, value);
}

int client_parse_id(const char *s, int64_t *ret_id)
{
    int64_t v;
    if (parse_i64(s, &v) < 0 || v <= 0)
        return -EINVAL;
    *ret_id = v;
    return 0;
}

bool client_words_known(const char *list, const char *const *known, size_t n_known)
{
    const char *p = list;
    for (;;) {
        size_t n = strcspn(p, ",");
        bool ok = false;
        for (size_t i = 0; i < n_known; i++)
            ok |= strlen(known[i]) == n && !strncmp(p, known[i], n);
        if (!ok)
            return false;
        if (!p[n])
            return true;
        p += n + 1;
    }
}

int client_parse_time_ms(const char *s, int64_t *ret_ms)
{
    int64_t ms;
    if (parse_i64(s, &ms) == 0) {
        if (ms < 0)
            return -EINVAL;
        *ret_ms = ms;
        return 0;
    }
    int y, mo, d, h = 0, mi = 0, sec = 0, n = -1;
    size_t len = strlen(s);
    if (len == 10)
        sscanf(s, "%4d-%2d-%2d%n", &y, &mo, &d, &n);
    else if (len == 16)
        sscanf(s, "%4d-%2d-%2dT%2d:%2d%n", &y, &mo, &d, &h, &mi, &n);
    else if (len == 19)
        sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &sec, &n);
    if (n < 0 || (size_t)n != len)
        return -EINVAL;
    for (size_t i = 0; i < len; i++)
        if (!isdigit((unsigned char)s[i]) && s[i] != '-' && s[i] != 'T' && s[i] != ':')
            return -EINVAL; /* sscanf takes signs and spaces inside a field */
    if (y < 1970 || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 59)
        return -EINVAL;
    struct tm tm = {.tm_year = y - 1900,
                    .tm_mon = mo - 1,
                    .tm_mday = d,
                    .tm_hour = h,
                    .tm_min = mi,
                    .tm_sec = sec};
    time_t t = timegm(&tm);
    /* timegm rolls 2026-02-30 over into March: a date that moved did not exist */
    if (t == (time_t)-1 || tm.tm_mday != d || tm.tm_mon != mo - 1)
        return -EINVAL;
    *ret_ms = (int64_t)t * 1000;
    return 0;
}

int client_parse_amount(const char *s, double *ret)
{
    char *end;
    if (!*s || isspace((unsigned char)*s))
        return -EINVAL;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || !isfinite(v) || v < 0)
        return -EINVAL;
    *ret = v;
    return 0;
}

int64_t client_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void client_sleep_ms(long ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}
