/* notice.c: the spot-interruption watch. Each cloud says "your machine goes at T" its
 * own way; everything here turns that into one Notice (a deadline and an action) and
 * keeps it while the service keeps saying so. The service is on the machine's link
 * (169.254.169.254 or metadata.google.internal), so requests get a short timeout: a
 * poll never holds the agent's loop for long. */
#include "agent/notice.h"
#include "net/http_client.h"
#include "util/log.h"
#include "util/macro.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

static const char *const source_names[] = {"none", "aws", "gcp", "azure"};

int notice_source_parse(const char *name, NoticeSource *ret)
{
    for (size_t i = 0; name && i < ARRAY_SIZE(source_names); i++)
        if (!strcmp(name, source_names[i])) {
            *ret = (NoticeSource)i;
            return 0;
        }
    return -EINVAL;
}

const char *notice_source_name(NoticeSource s)
{
    return (size_t)s < ARRAY_SIZE(source_names) ? source_names[s] : "?";
}

const char *notice_default_url(NoticeSource s)
{
    switch (s) {
    case NOTICE_AWS:
    case NOTICE_AZURE:
        return "http://169.254.169.254";
    case NOTICE_GCP:
        return "http://metadata.google.internal";
    default:
        return NULL;
    }
}

/* ---- times ---- */

/* Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm). */
static int64_t days_from_civil(int64_t y, unsigned m, unsigned d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    unsigned yoe = (unsigned)(y - era * 400);
    unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
    unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + (int64_t)doe - 719468;
}

static bool leap(int y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static int civil_ms(int y, int mo, int d, int h, int mi, int s, int64_t *ret)
{
    static const int mdays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (y < 1970 || y > 9999 || mo < 1 || mo > 12 || d < 1 ||
        d > mdays[mo - 1] + (mo == 2 && leap(y)) || h < 0 || h > 23 || mi < 0 || mi > 59 || s < 0 ||
        s > 60)
        return -EINVAL;
    *ret = ((days_from_civil(y, (unsigned)mo, (unsigned)d) * 24 + h) * 60 + mi) * 60000 +
           (int64_t)s * 1000;
    return 0;
}

/* n digits at *p as a number, advancing *p; -1 when they are not digits. */
static int digits(const char **p, int n)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (!isdigit((unsigned char)(*p)[i]))
            return -1;
        v = v * 10 + ((*p)[i] - '0');
    }
    *p += n;
    return v;
}

static bool expect(const char **p, char c)
{
    if (**p != c && !(c == 'T' && **p == 't') && !(c == 'Z' && **p == 'z'))
        return false;
    (*p)++;
    return true;
}

int notice_parse_rfc3339(const char *s, int64_t *ret_ms)
{
    if (!s)
        return -EINVAL;
    const char *p = s;
    int y = digits(&p, 4), mo = -1, d = -1, h = -1, mi = -1, sec = -1;
    if (y >= 0 && expect(&p, '-') && (mo = digits(&p, 2)) >= 0 && expect(&p, '-') &&
        (d = digits(&p, 2)) >= 0 && expect(&p, 'T') && (h = digits(&p, 2)) >= 0 &&
        expect(&p, ':') && (mi = digits(&p, 2)) >= 0 && expect(&p, ':'))
        sec = digits(&p, 2);
    if (sec < 0)
        return -EINVAL;
    int64_t frac_ms = 0;
    if (*p == '.') {
        p++;
        int n = 0;
        for (; isdigit((unsigned char)*p); p++, n++)
            if (n < 3)
                frac_ms = frac_ms * 10 + (*p - '0');
        if (!n)
            return -EINVAL;
        for (; n < 3; n++)
            frac_ms *= 10;
    }
    int64_t offset_ms = 0;
    if (*p == '+' || *p == '-') {
        int sign = *p++ == '-' ? -1 : 1;
        int oh = digits(&p, 2), om = -1;
        if (oh < 0 || oh > 23 || !expect(&p, ':') || (om = digits(&p, 2)) < 0 || om > 59)
            return -EINVAL;
        offset_ms = sign * ((int64_t)oh * 60 + om) * 60000;
    } else if (!expect(&p, 'Z')) {
        return -EINVAL;
    }
    int64_t ms;
    if (*p || civil_ms(y, mo, d, h, mi, sec, &ms) < 0)
        return -EINVAL;
    *ret_ms = ms + frac_ms - offset_ms;
    return 0;
}

int notice_parse_http_date(const char *s, int64_t *ret_ms)
{
    static const char months[] = "JanFebMarAprMayJunJulAugSepOctNovDec";
    if (!s)
        return -EINVAL;
    const char *comma = strchr(s, ',');
    if (!comma || comma - s != 3)
        return -EINVAL;
    int d, y, h, mi, sec, used = 0;
    char mon[4];
    if (sscanf(comma + 1, " %2d %3s %4d %2d:%2d:%2d GMT%n", &d, mon, &y, &h, &mi, &sec, &used) !=
            6 ||
        !used || comma[1 + used] != '\0')
        return -EINVAL;
    const char *m = strlen(mon) == 3 ? strstr(months, mon) : NULL;
    if (!m || (m - months) % 3)
        return -EINVAL;
    return civil_ms(y, (int)(m - months) / 3 + 1, d, h, mi, sec, ret_ms);
}

/* ---- the parsers ---- */

static int set_action(Notice *n, NoticeSource source, const char *action)
{
    n->source = source;
    snprintf(n->action, sizeof(n->action), "%s", action);
    return 1;
}

int notice_parse_aws(const char *body, size_t len, Notice *ret, Buf *err)
{
    static const char *const actions[] = {"terminate", "stop", "hibernate"};
    json_error_t jerr;
    json_t *o = json_loadb(body ? body : "", len, 0, &jerr);
    int r = -EINVAL;
    const char *action = json_string_value(json_object_get(o, "action"));
    const char *time = json_string_value(json_object_get(o, "time"));
    Notice n = {0};
    if (!json_is_object(o)) {
        buf_printf(err, "instance-action is not a JSON object%s%s", o ? "" : ": ",
                   o ? "" : jerr.text);
    } else if (!action || !time) {
        buf_puts(err, "instance-action lacks \"action\" or \"time\" (strings)");
    } else if (notice_parse_rfc3339(time, &n.deadline_ms) < 0) {
        buf_printf(err, "instance-action: time '%s' is not an RFC 3339 UTC time", time);
    } else {
        for (size_t i = 0; i < ARRAY_SIZE(actions) && r < 0; i++)
            if (!strcmp(action, actions[i]))
                r = set_action(&n, NOTICE_AWS, action);
        if (r < 0)
            buf_printf(err, "instance-action: action '%s' is not terminate, stop or hibernate",
                       action);
    }
    json_decref(o);
    if (r > 0)
        *ret = n;
    return r;
}

int notice_parse_gcp(const char *body, size_t len, int64_t now_ms, Notice *ret, Buf *err)
{
    const char *b = body ? body : "";
    while (len > 0 && isspace((unsigned char)*b))
        b++, len--;
    while (len > 0 && isspace((unsigned char)b[len - 1]))
        len--;
    if (len == 5 && !strncmp(b, "FALSE", 5))
        return 0;
    if (len == 4 && !strncmp(b, "TRUE", 4)) {
        ret->deadline_ms = now_ms + NOTICE_LEAD_MS;
        return set_action(ret, NOTICE_GCP, "preempt");
    }
    buf_printf(err, "preempted is '%.*s', not TRUE or FALSE", (int)MIN(len, (size_t)40), b);
    return -EINVAL;
}

static bool names_vm(json_t *resources, const char *vm_name)
{
    if (!vm_name)
        return true;
    size_t i;
    json_t *r;
    json_array_foreach(resources, i, r)
    {
        const char *name = json_string_value(r);
        if (name && !strcasecmp(name, vm_name))
            return true;
    }
    return false;
}

int notice_parse_azure(const char *body, size_t len, const char *vm_name, int64_t now_ms,
                       Notice *ret, Buf *err)
{
    json_error_t jerr;
    json_t *o = json_loadb(body ? body : "", len, 0, &jerr);
    json_t *events = json_object_get(o, "Events");
    if (!json_is_object(o) || !json_is_array(events)) {
        buf_printf(err, "scheduledevents is not a JSON object with an \"Events\" list%s%s",
                   o ? "" : ": ", o ? "" : jerr.text);
        json_decref(o);
        return -EINVAL;
    }
    int r = 0;
    Notice n = {.deadline_ms = INT64_MAX};
    size_t i;
    json_t *e;
    json_array_foreach(events, i, e)
    {
        const char *type = json_string_value(json_object_get(e, "EventType"));
        json_t *resources = json_object_get(e, "Resources");
        if (!type) {
            buf_printf(err, "scheduledevents: Events[%zu] has no \"EventType\" (a string)", i);
            r = -EINVAL;
            break;
        }
        if (strcmp(type, "Preempt"))
            continue;
        if (!json_is_array(resources)) {
            buf_printf(err, "scheduledevents: Events[%zu] has no \"Resources\" (a list)", i);
            r = -EINVAL;
            break;
        }
        if (!names_vm(resources, vm_name))
            continue;
        json_t *nb = json_object_get(e, "NotBefore");
        const char *text = json_string_value(nb);
        int64_t at = now_ms + NOTICE_LEAD_MS;
        if (nb && !json_is_null(nb) &&
            (!text || (*text && notice_parse_http_date(text, &at) < 0))) {
            buf_printf(err,
                       "scheduledevents: Events[%zu].NotBefore '%s' is not a date like "
                       "'Mon, 19 Sep 2016 18:29:47 GMT'",
                       i, text ? text : "(not a string)");
            r = -EINVAL;
            break;
        }
        n.deadline_ms = MIN(n.deadline_ms, at); /* the earliest, when there are several */
        r = set_action(&n, NOTICE_AZURE, "preempt");
    }
    json_decref(o);
    if (r > 0)
        *ret = n;
    return r;
}

/* ---- the watcher ---- */

struct NoticeWatch {
    NoticeSource source;
    HttpClient *http;
    char *url;
    char *node;
    int64_t poll_ms;
    int64_t next_poll; /* monotonic */
    char *token;       /* AWS: the IMDSv2 session token, or NULL */
    int64_t token_until;
    char *vm_name; /* Azure: this VM's name, once asked */
    bool have_notice;
    Notice notice;
    char *error; /* the failure logged, NULL while the service answers sensibly */
};

int notice_watch_new(NoticeSource source, const char *base_url, int64_t poll_ms, const char *node,
                     NoticeWatch **ret, Buf *err)
{
    if (source == NOTICE_NONE || !notice_default_url(source)) {
        buf_puts(err, "a spot notice watch needs a cloud: aws, gcp or azure");
        return -EINVAL;
    }
    const char *url = base_url ? base_url : notice_default_url(source);
    NoticeWatch *w = calloc(1, sizeof(*w));
    if (!w) {
        buf_puts(err, "out of memory");
        return -ENOMEM;
    }
    w->source = source;
    w->poll_ms = poll_ms > 0 ? poll_ms : NOTICE_POLL_MS;
    int r = http_client_new(url, NULL, NOTICE_HTTP_TIMEOUT_MS, &w->http);
    if (r == -EINVAL)
        buf_printf(err, "--metadata-url '%s': expected http://HOST[:PORT]", url);
    if (!r) {
        static const char *const peers[] = {"", "the AWS instance metadata service",
                                            "the GCP metadata server",
                                            "the Azure instance metadata service"};
        r = http_client_set_peer(w->http, peers[source]);
    }
    if (!r && (!(w->url = strdup(url)) || !(w->node = strdup(node ? node : ""))))
        r = -ENOMEM;
    for (size_t n = w->url ? strlen(w->url) : 0; n > 0 && w->url[n - 1] == '/'; n--)
        w->url[n - 1] = '\0';
    if (r < 0) {
        if (r == -ENOMEM)
            buf_puts(err, "out of memory");
        notice_watch_free(w);
        return r;
    }
    *ret = w;
    return 0;
}

void notice_watch_free(NoticeWatch *w)
{
    if (!w)
        return;
    http_client_free(w->http);
    free(w->url);
    free(w->node);
    free(w->token);
    free(w->vm_name);
    free(w->error);
    free(w);
}

const Notice *notice_watch_notice(const NoticeWatch *w)
{
    return w && w->have_notice ? &w->notice : NULL;
}

NoticeSource notice_watch_source(const NoticeWatch *w)
{
    return w->source;
}

int64_t notice_watch_next_ms(const NoticeWatch *w)
{
    return w->next_poll;
}

/* Log a failure when it differs from the last one; NULL: the service answers again. */
static void watch_error(NoticeWatch *w, const char *error)
{
    if (!error) {
        if (w->error)
            log_info("event=spot_notice_watch_ok source=%s", notice_source_name(w->source));
        free(w->error);
        w->error = NULL;
        return;
    }
    if (w->error && !strcmp(w->error, error))
        return;
    log_error("event=spot_notice_watch_failed source=%s url=%s error=\"%s\"",
              notice_source_name(w->source), w->url, error);
    free(w->error);
    w->error = strdup(error);
}

/* A GET (or PUT) that must answer 200 or one of the statuses in ok (0-terminated). */
static int ask(NoticeWatch *w, const char *method, const char *path, const char *const *headers,
               const long *ok, HttpReply *rep, Buf *err)
{
    int r = http_request_headers(w->http, method, path, headers, NULL, NULL, 0, rep, err);
    if (r < 0)
        return r;
    for (size_t i = 0; ok && ok[i]; i++)
        if (rep->status == ok[i])
            return 0;
    if (rep->status == 200)
        return 0;
    buf_printf(err, "%s %s%s answered %ld", method, w->url, path, rep->status);
    return -EIO;
}

static int aws_token(NoticeWatch *w, int64_t mono, Buf *err)
{
    if (w->token && mono < w->token_until)
        return 0;
    char ttl[64];
    snprintf(ttl, sizeof(ttl), "X-aws-ec2-metadata-token-ttl-seconds: %d", NOTICE_AWS_TOKEN_TTL_S);
    const char *const h[] = {ttl, NULL};
    HttpReply rep = {0};
    int r = ask(w, "PUT", "/latest/api/token", h, NULL, &rep, err);
    if (!r) {
        const char *t = buf_str(&rep.body);
        size_t n = strcspn(t, "\r\n");
        char *tok = NULL;
        if (!n || n >= 512) {
            buf_printf(err, "PUT %s/latest/api/token answered a token of %zu bytes", w->url, n);
            r = -EIO;
        } else if (!(tok = strndup(t, n))) {
            buf_puts(err, "out of memory");
            r = -ENOMEM;
        } else {
            free(w->token);
            w->token = tok;
            /* renew a minute before it lapses */
            w->token_until = mono + (NOTICE_AWS_TOKEN_TTL_S - 60) * 1000LL;
        }
    }
    http_reply_free(&rep);
    return r;
}

/* 1 notice, 0 none, < 0 failed (err says why). */
static int poll_aws(NoticeWatch *w, int64_t mono, Notice *ret, Buf *err)
{
    static const long ok[] = {404, 401, 0};
    HttpReply rep = {0};
    int r = 0;
    for (int attempt = 0; attempt < 2; attempt++) {
        if ((r = aws_token(w, mono, err)) < 0)
            break;
        char hdr[600];
        snprintf(hdr, sizeof(hdr), "X-aws-ec2-metadata-token: %s", w->token);
        const char *const h[] = {hdr, NULL};
        if ((r = ask(w, "GET", "/latest/meta-data/spot/instance-action", h, ok, &rep, err)) < 0)
            break;
        if (rep.status != 401)
            break;
        /* the token lapsed (the service restarted, say): one new token, once */
        free(w->token);
        w->token = NULL;
        if (attempt) {
            buf_printf(err,
                       "GET %s/latest/meta-data/spot/instance-action answered 401 with a "
                       "fresh token",
                       w->url);
            r = -EACCES;
        }
    }
    if (!r && rep.status == 200)
        r = notice_parse_aws(buf_str(&rep.body), rep.body.len, ret, err);
    http_reply_free(&rep);
    return r;
}

static int poll_gcp(NoticeWatch *w, int64_t wall, Notice *ret, Buf *err)
{
    static const char *const h[] = {"Metadata-Flavor: Google", NULL};
    HttpReply rep = {0};
    int r = ask(w, "GET", "/computeMetadata/v1/instance/preempted", h, NULL, &rep, err);
    if (!r)
        r = notice_parse_gcp(buf_str(&rep.body), rep.body.len, wall, ret, err);
    http_reply_free(&rep);
    return r;
}

static int poll_azure(NoticeWatch *w, int64_t wall, Notice *ret, Buf *err)
{
    static const char *const h[] = {"Metadata: true", NULL};
    HttpReply rep = {0};
    int r = 0;
    if (!w->vm_name) {
        /* Scheduled Events name VMs as Azure knows them, which need not be the node's
         * name in the cluster file; when the service does not say, the node's name
         * stands in (and when it does not answer at all, the next poll asks again) */
        Buf why = {0};
        r = ask(w, "GET", "/metadata/instance/compute/name?api-version=2021-02-01&format=text", h,
                NULL, &rep, &why);
        if (r < 0 && !rep.status) {
            buf_puts(err, buf_str(&why));
            buf_free(&why);
            http_reply_free(&rep);
            return r;
        }
        size_t n = strcspn(buf_str(&rep.body), "\r\n");
        if (r == 0 && n && n < 256) {
            w->vm_name = strndup(buf_str(&rep.body), n);
        } else {
            if (r == 0)
                buf_puts(&why, "compute/name answered an empty or overlong name");
            w->vm_name = strdup(w->node);
        }
        r = 0;
        if (!w->vm_name) {
            buf_puts(err, "out of memory");
            r = -ENOMEM;
        } else {
            log_info("event=spot_notice_vm source=azure vm=\"%s\"%s%s%s", w->vm_name,
                     why.len ? " error=\"" : "", buf_str(&why), why.len ? "\"" : "");
        }
        buf_free(&why);
    }
    if (!r)
        r = ask(w, "GET", "/metadata/scheduledevents?api-version=2020-07-01", h, NULL, &rep, err);
    if (!r)
        r = notice_parse_azure(buf_str(&rep.body), rep.body.len, w->vm_name, wall, ret, err);
    http_reply_free(&rep);
    return r;
}

static void iso_time(int64_t ms, char *out, size_t cap)
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    if (!gmtime_r(&t, &tm) || !strftime(out, cap, "%Y-%m-%dT%H:%M:%SZ", &tm))
        snprintf(out, cap, "%lld", (long long)ms);
}

bool notice_watch_tick(NoticeWatch *w, int64_t mono_ms, int64_t wall_ms)
{
    if (mono_ms < w->next_poll)
        return false;
    w->next_poll = mono_ms + w->poll_ms;
    Notice n = {0};
    Buf err = {0};
    int r = w->source == NOTICE_AWS   ? poll_aws(w, mono_ms, &n, &err)
            : w->source == NOTICE_GCP ? poll_gcp(w, wall_ms, &n, &err)
                                      : poll_azure(w, wall_ms, &n, &err);
    bool changed = false;
    if (r < 0) {
        watch_error(w, buf_str(&err));
    } else {
        watch_error(w, NULL);
        if (r > 0 && !w->have_notice) {
            char at[32];
            iso_time(n.deadline_ms, at, sizeof(at));
            log_error("event=spot_notice source=%s action=%s deadline=%s in_ms=%lld",
                      notice_source_name(w->source), n.action, at,
                      (long long)(n.deadline_ms - wall_ms));
            changed = true;
        } else if (!r && w->have_notice) {
            log_info("event=spot_notice_cleared source=%s", notice_source_name(w->source));
            changed = true;
        }
        if (r > 0 && w->have_notice)
            /* GCP's "TRUE" dates from when it was first seen, not from each poll; an
             * Azure event may be moved, but a deadline never comes later than said */
            n.deadline_ms = MIN(n.deadline_ms, w->notice.deadline_ms);
        w->have_notice = r > 0;
        if (r > 0)
            w->notice = n;
    }
    buf_free(&err);
    return changed;
}
