/* test_agent_notice.c: the spot-interruption notice (agent/notice.c). The three
 * parsers on sample bodies as the clouds document them, and on malformed ones (no
 * notice, and a reason to log); the dates they carry; the heartbeat's "interruption";
 * and the watcher against a scripted metadata service on loopback (libmicrohttpd in this
 * process) that answers only requests carrying each cloud's headers: IMDSv2's token
 * (fetched once, fetched again after a 401), GCP's Metadata-Flavor, Azure's Metadata. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "agent/notice.h"
#include "agent/proto.h"

#include <errno.h>
#include <jansson.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define T_2026_11_30_NOON 1796040000000LL /* 2026-11-30T12:00:00Z */
#define T_2016_09_19      1474309787000LL /* Mon, 19 Sep 2016 18:29:47 GMT */
#define NOW               1764500000000LL

/* ---- dates ---- */

static void test_rfc3339(void **state)
{
    (void)state;
    int64_t ms = 0;
    assert_int_equal(notice_parse_rfc3339("2026-11-30T12:00:00Z", &ms), 0);
    assert_int_equal(ms, T_2026_11_30_NOON);
    assert_int_equal(notice_parse_rfc3339("2026-11-30T12:00:00.250Z", &ms), 0);
    assert_int_equal(ms, T_2026_11_30_NOON + 250);
    assert_int_equal(notice_parse_rfc3339("2026-11-30T14:00:00+02:00", &ms), 0);
    assert_int_equal(ms, T_2026_11_30_NOON);
    assert_int_equal(notice_parse_rfc3339("2024-02-29T23:59:59Z", &ms), 0);
    assert_int_equal(ms, 1709251199000LL);
    static const char *const bad[] = {"",
                                      "2026-11-30",
                                      "2026-11-30T12:00:00",
                                      "2026-13-01T00:00:00Z",
                                      "2025-02-29T00:00:00Z",
                                      "2026-11-30T24:00:00Z",
                                      "2026-11-30T12:00:00Zjunk",
                                      "2026-11-30 12:00:00Z",
                                      "2026-11-30T12:00:00.Z",
                                      "soon"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ms = 42;
        assert_int_equal(notice_parse_rfc3339(bad[i], &ms), -EINVAL);
        assert_int_equal(ms, 42);
    }
}

static void test_http_date(void **state)
{
    (void)state;
    int64_t ms = 0;
    assert_int_equal(notice_parse_http_date("Mon, 19 Sep 2016 18:29:47 GMT", &ms), 0);
    assert_int_equal(ms, T_2016_09_19);
    static const char *const bad[] = {"",
                                      "19 Sep 2016 18:29:47 GMT",
                                      "Mon, 19 Sept 2016 18:29:47 GMT",
                                      "Mon, 19 Sex 2016 18:29:47 GMT",
                                      "Mon, 31 Sep 2016 18:29:47 GMT",
                                      "Mon, 19 Sep 2016 18:29:47",
                                      "Mon, 19 Sep 2016 18:29:47 GMT+1",
                                      "Monday, 19 Sep 2016 18:29:47 GMT"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(notice_parse_http_date(bad[i], &ms), -EINVAL);
}

/* ---- the parsers ---- */

static int parse(NoticeSource src, const char *body, const char *vm, Notice *n, Buf *err)
{
    buf_reset(err);
    size_t len = strlen(body);
    return src == NOTICE_AWS   ? notice_parse_aws(body, len, n, err)
           : src == NOTICE_GCP ? notice_parse_gcp(body, len, NOW, n, err)
                               : notice_parse_azure(body, len, vm, NOW, n, err);
}

/* Malformed: -EINVAL, a reason, and the notice untouched. */
static void assert_malformed(NoticeSource src, const char *body, const char *vm, const char *why)
{
    Buf err = {0};
    Notice n = {.deadline_ms = 7, .action = "x"};
    int r = parse(src, body, vm, &n, &err);
    if (r != -EINVAL || !err.len || !strstr(buf_str(&err), why))
        fail_msg("%s body '%s': r=%d err='%s', expected -EINVAL naming '%s'",
                 notice_source_name(src), body, r, buf_str(&err), why);
    assert_int_equal(n.deadline_ms, 7);
    assert_string_equal(n.action, "x");
    buf_free(&err);
}

static void test_aws(void **state)
{
    (void)state;
    Buf err = {0};
    Notice n = {0};
    assert_int_equal(parse(NOTICE_AWS,
                           "{\"action\": \"terminate\", \"time\": \"2026-11-30T12:00:00Z\"}", NULL,
                           &n, &err),
                     1);
    assert_int_equal(n.deadline_ms, T_2026_11_30_NOON);
    assert_int_equal(n.source, NOTICE_AWS);
    assert_string_equal(n.action, "terminate");
    assert_int_equal(parse(NOTICE_AWS, "{\"action\":\"stop\",\"time\":\"2026-11-30T12:02:00Z\"}",
                           NULL, &n, &err),
                     1);
    assert_string_equal(n.action, "stop");
    assert_int_equal(n.deadline_ms, T_2026_11_30_NOON + 120000);
    assert_int_equal(parse(NOTICE_AWS,
                           "{\"action\":\"hibernate\",\"time\":\"2026-11-30T12:00:00Z\"}", NULL, &n,
                           &err),
                     1);
    assert_string_equal(n.action, "hibernate");
    assert_int_equal(err.len, 0);

    assert_malformed(NOTICE_AWS, "", NULL, "not a JSON object");
    assert_malformed(NOTICE_AWS, "<html>404</html>", NULL, "not a JSON object");
    assert_malformed(NOTICE_AWS, "[\"terminate\"]", NULL, "not a JSON object");
    assert_malformed(NOTICE_AWS, "{\"action\": \"terminate\"}", NULL, "lacks");
    assert_malformed(NOTICE_AWS, "{\"action\": 1, \"time\": \"2026-11-30T12:00:00Z\"}", NULL,
                     "lacks");
    assert_malformed(NOTICE_AWS, "{\"action\": \"terminate\", \"time\": \"in two minutes\"}", NULL,
                     "'in two minutes' is not an RFC 3339");
    assert_malformed(NOTICE_AWS, "{\"action\": \"reboot\", \"time\": \"2026-11-30T12:00:00Z\"}",
                     NULL, "action 'reboot'");
    buf_free(&err);
}

static void test_gcp(void **state)
{
    (void)state;
    Buf err = {0};
    Notice n = {0};
    assert_int_equal(parse(NOTICE_GCP, "TRUE", NULL, &n, &err), 1);
    assert_int_equal(n.deadline_ms, NOW + NOTICE_LEAD_MS);
    assert_int_equal(n.source, NOTICE_GCP);
    assert_string_equal(n.action, "preempt");
    assert_int_equal(parse(NOTICE_GCP, "TRUE\n", NULL, &n, &err), 1);
    n.deadline_ms = 7;
    assert_int_equal(parse(NOTICE_GCP, "FALSE", NULL, &n, &err), 0);
    assert_int_equal(parse(NOTICE_GCP, " FALSE\r\n", NULL, &n, &err), 0);
    assert_int_equal(n.deadline_ms, 7);
    assert_malformed(NOTICE_GCP, "", NULL, "not TRUE or FALSE");
    assert_malformed(NOTICE_GCP, "true", NULL, "'true'");
    assert_malformed(NOTICE_GCP, "TRUEISH", NULL, "not TRUE or FALSE");
    assert_malformed(NOTICE_GCP, "{\"preempted\": true}", NULL, "not TRUE or FALSE");
    buf_free(&err);
}

/* Azure's documented sample, with the event type, VM and NotBefore to fill in. */
static char *azure_body(const char *type, const char *vm, const char *not_before)
{
    char *s = NULL;
    if (asprintf(&s,
                 "{\"DocumentIncarnation\": 3, \"Events\": [{\"EventId\": "
                 "\"602d9444-d2cd-49c7-8624-8643e7171297\", \"EventType\": \"%s\", "
                 "\"ResourceType\": \"VirtualMachine\", \"Resources\": [\"%s\"], "
                 "\"EventStatus\": \"Scheduled\", \"NotBefore\": \"%s\", \"Description\": "
                 "\"\", \"EventSource\": \"Platform\", \"DurationInSeconds\": -1}]}",
                 type, vm, not_before) < 0)
        fail();
    return s;
}

static void test_azure(void **state)
{
    (void)state;
    Buf err = {0};
    Notice n = {0};
    char *b = azure_body("Preempt", "vm-7", "Mon, 19 Sep 2016 18:29:47 GMT");
    assert_int_equal(parse(NOTICE_AZURE, b, "vm-7", &n, &err), 1);
    assert_int_equal(n.deadline_ms, T_2016_09_19);
    assert_int_equal(n.source, NOTICE_AZURE);
    assert_string_equal(n.action, "preempt");
    assert_int_equal(parse(NOTICE_AZURE, b, "VM-7", &n, &err), 1); /* Azure's names ignore case */
    assert_int_equal(parse(NOTICE_AZURE, b, NULL, &n, &err), 1);
    assert_int_equal(parse(NOTICE_AZURE, b, "vm-8", &n, &err), 0); /* another VM's */
    free(b);
    b = azure_body("Freeze", "vm-7", "Mon, 19 Sep 2016 18:29:47 GMT");
    assert_int_equal(parse(NOTICE_AZURE, b, "vm-7", &n, &err), 0);
    free(b);
    b = azure_body("Preempt", "vm-7", ""); /* started: no NotBefore */
    assert_int_equal(parse(NOTICE_AZURE, b, "vm-7", &n, &err), 1);
    assert_int_equal(n.deadline_ms, NOW + NOTICE_LEAD_MS);
    free(b);
    assert_int_equal(
        parse(NOTICE_AZURE, "{\"DocumentIncarnation\": 0, \"Events\": []}", "vm-7", &n, &err), 0);
    /* two preemptions: the earlier counts */
    assert_int_equal(
        parse(NOTICE_AZURE,
              "{\"Events\": [{\"EventType\": \"Preempt\", \"Resources\": [\"vm-7\"], "
              "\"NotBefore\": \"Mon, 19 Sep 2016 18:31:47 GMT\"}, {\"EventType\": \"Preempt\", "
              "\"Resources\": [\"vm-1\", \"vm-7\"], \"NotBefore\": \"Mon, 19 Sep 2016 18:29:47 "
              "GMT\"}]}",
              "vm-7", &n, &err),
        1);
    assert_int_equal(n.deadline_ms, T_2016_09_19);
    assert_int_equal(err.len, 0);

    assert_malformed(NOTICE_AZURE, "", "vm-7", "not a JSON object");
    assert_malformed(NOTICE_AZURE, "{\"DocumentIncarnation\": 1}", "vm-7", "\"Events\" list");
    assert_malformed(NOTICE_AZURE, "{\"Events\": {}}", "vm-7", "\"Events\" list");
    assert_malformed(NOTICE_AZURE, "{\"Events\": [{\"Resources\": [\"vm-7\"]}]}", "vm-7",
                     "Events[0] has no \"EventType\"");
    assert_malformed(NOTICE_AZURE, "{\"Events\": [{\"EventType\": \"Preempt\"}]}", "vm-7",
                     "Events[0] has no \"Resources\"");
    b = azure_body("Preempt", "vm-7", "2016-09-19T18:29:47Z");
    assert_malformed(NOTICE_AZURE, b, "vm-7", "NotBefore '2016-09-19T18:29:47Z'");
    free(b);
    buf_free(&err);
}

static void test_sources(void **state)
{
    (void)state;
    NoticeSource s = NOTICE_AWS;
    assert_int_equal(notice_source_parse("none", &s), 0);
    assert_int_equal(s, NOTICE_NONE);
    assert_int_equal(notice_source_parse("gcp", &s), 0);
    assert_int_equal(s, NOTICE_GCP);
    assert_int_equal(notice_source_parse("azure", &s), 0);
    assert_int_equal(s, NOTICE_AZURE);
    assert_int_equal(notice_source_parse("AWS", &s), -EINVAL);
    assert_int_equal(notice_source_parse("", &s), -EINVAL);
    assert_int_equal(s, NOTICE_AZURE);
    assert_string_equal(notice_default_url(NOTICE_AWS), "http://169.254.169.254");
    assert_string_equal(notice_default_url(NOTICE_GCP), "http://metadata.google.internal");
    assert_string_equal(notice_default_url(NOTICE_AZURE), "http://169.254.169.254");
    Buf err = {0};
    NoticeWatch *w = NULL;
    assert_int_equal(notice_watch_new(NOTICE_NONE, NULL, 0, "n", &w, &err), -EINVAL);
    buf_reset(&err);
    assert_int_equal(notice_watch_new(NOTICE_AWS, "169.254.169.254", 0, "n", &w, &err), -EINVAL);
    assert_non_null(strstr(buf_str(&err), "--metadata-url '169.254.169.254'"));
    assert_null(w);
    buf_free(&err);
}

static void test_heartbeat_interruption(void **state)
{
    (void)state;
    Notice n = {.deadline_ms = T_2026_11_30_NOON, .source = NOTICE_AWS, .action = "terminate"};
    Buf out = {0};
    assert_int_equal(
        proto_heartbeat("h100-0", NULL, "boot-1", NULL, NULL, 0, NULL, 0, &n, false, &out), 0);
    json_t *o = json_loads(buf_str(&out), 0, NULL);
    json_t *in = json_object_get(o, "interruption");
    assert_true(json_is_object(in));
    assert_int_equal(json_object_size(in), 3);
    assert_int_equal(json_integer_value(json_object_get(in, "deadline_ms")), T_2026_11_30_NOON);
    assert_string_equal(json_string_value(json_object_get(in, "source")), "aws");
    assert_string_equal(json_string_value(json_object_get(in, "action")), "terminate");
    json_decref(o);
    buf_reset(&out);
    assert_int_equal(
        proto_heartbeat("h100-0", NULL, "boot-1", NULL, NULL, 0, NULL, 0, NULL, false, &out), 0);
    o = json_loads(buf_str(&out), 0, NULL);
    assert_null(json_object_get(o, "interruption"));
    json_decref(o);
    buf_free(&out);
}

/* ---- the watcher against a scripted metadata service ---- */

typedef struct Meta {
    pthread_mutex_t lock;
    struct MHD_Daemon *d;
    char url[64];
    char token[32]; /* the IMDSv2 token it hands out; changing it lapses the old one */
    int puts, gets, unauthorized, refused;
    int status;          /* of the notice path: 200 with body, or 404 */
    char body[512];      /* AWS instance-action, GCP preempted or Azure scheduledevents */
    const char *vm_name; /* Azure's compute/name, NULL: 404 */
} Meta;

static Meta meta;

static enum MHD_Result answer(struct MHD_Connection *c, unsigned status, const char *body)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_MUST_COPY);
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

static const char *header(struct MHD_Connection *c, const char *name)
{
    return MHD_lookup_connection_value(c, MHD_HEADER_KIND, name);
}

static enum MHD_Result on_meta(void *cls, struct MHD_Connection *c, const char *url,
                               const char *method, const char *version, const char *upload,
                               size_t *upload_size, void **ctx)
{
    (void)cls, (void)version, (void)upload;
    if (!*ctx) { /* the headers; the body (none expected) comes next */
        *ctx = &meta;
        return MHD_YES;
    }
    if (*upload_size) {
        *upload_size = 0;
        return MHD_YES;
    }
    pthread_mutex_lock(&meta.lock);
    unsigned status = 404;
    char body[512] = "";
    const char *flavor = header(c, "Metadata-Flavor"), *azure = header(c, "Metadata");
    const char *tok = header(c, "X-aws-ec2-metadata-token");
    if (!strcmp(url, "/latest/api/token")) {
        const char *ttl = header(c, "X-aws-ec2-metadata-token-ttl-seconds");
        if (strcmp(method, "PUT") || !ttl || strcmp(ttl, "21600")) {
            status = 400;
            meta.refused++;
        } else {
            status = 200;
            meta.puts++;
            snprintf(body, sizeof(body), "%s", meta.token);
        }
    } else if (!strcmp(url, "/latest/meta-data/spot/instance-action")) {
        meta.gets++;
        if (!tok || strcmp(tok, meta.token)) {
            status = 401;
            meta.unauthorized++;
        } else {
            status = (unsigned)meta.status;
            snprintf(body, sizeof(body), "%s", status == 200 ? meta.body : "Not Found");
        }
    } else if (!strcmp(url, "/computeMetadata/v1/instance/preempted")) {
        meta.gets++;
        status = flavor && !strcmp(flavor, "Google") ? 200 : 403;
        meta.refused += status == 403;
        snprintf(body, sizeof(body), "%s", status == 200 ? meta.body : "");
    } else if (!strcmp(url, "/metadata/scheduledevents") ||
               !strcmp(url, "/metadata/instance/compute/name")) {
        const char *api = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "api-version");
        bool events = !strcmp(url, "/metadata/scheduledevents");
        meta.gets += events;
        if (!azure || strcmp(azure, "true") || !api) {
            status = 400;
            meta.refused++;
        } else if (events) {
            status = strcmp(api, "2020-07-01") ? 400 : 200;
            snprintf(body, sizeof(body), "%s", meta.body);
        } else if (meta.vm_name) {
            status = 200;
            snprintf(body, sizeof(body), "%s", meta.vm_name);
        }
    }
    pthread_mutex_unlock(&meta.lock);
    return answer(c, status, body);
}

static void meta_set(int status, const char *body)
{
    pthread_mutex_lock(&meta.lock);
    meta.status = status;
    snprintf(meta.body, sizeof(meta.body), "%s", body);
    pthread_mutex_unlock(&meta.lock);
}

static int meta_start(void **state)
{
    (void)state;
    pthread_mutex_init(&meta.lock, NULL);
    snprintf(meta.token, sizeof(meta.token), "token-1");
    meta.status = 404;
    struct sockaddr_in loopback = {.sin_family = AF_INET,
                                   .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    meta.d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, 0, NULL, NULL,
                              on_meta, NULL, MHD_OPTION_SOCK_ADDR, &loopback, MHD_OPTION_END);
    if (!meta.d)
        return -1;
    snprintf(meta.url, sizeof(meta.url), "http://127.0.0.1:%u/",
             MHD_get_daemon_info(meta.d, MHD_DAEMON_INFO_BIND_PORT)->port);
    return 0;
}

static void meta_down(void)
{
    if (meta.d)
        MHD_stop_daemon(meta.d);
    meta.d = NULL;
}

static int meta_stop(void **state)
{
    (void)state;
    meta_down();
    pthread_mutex_destroy(&meta.lock);
    return 0;
}

static NoticeWatch *watch(NoticeSource src)
{
    NoticeWatch *w = NULL;
    Buf err = {0};
    if (notice_watch_new(src, meta.url, 1000, "node-7", &w, &err) < 0)
        fail_msg("notice_watch_new: %s", buf_str(&err));
    buf_free(&err);
    assert_int_equal(notice_watch_source(w), src);
    return w;
}

static void test_watch_aws(void **state)
{
    (void)state;
    NoticeWatch *w = watch(NOTICE_AWS);
    int64_t mono = 1000;
    /* no notice: one token, one question */
    assert_false(notice_watch_tick(w, mono, NOW));
    assert_null(notice_watch_notice(w));
    assert_int_equal(meta.puts, 1);
    assert_int_equal(meta.gets, 1);
    assert_int_equal(notice_watch_next_ms(w), mono + 1000);
    /* not due yet: nothing asked */
    assert_false(notice_watch_tick(w, mono + 999, NOW));
    assert_int_equal(meta.gets, 1);

    meta_set(200, "{\"action\": \"terminate\", \"time\": \"2026-11-30T12:00:00Z\"}");
    mono += 1000;
    assert_true(notice_watch_tick(w, mono, NOW));
    const Notice *n = notice_watch_notice(w);
    assert_non_null(n);
    assert_int_equal(n->deadline_ms, T_2026_11_30_NOON);
    assert_string_equal(n->action, "terminate");
    assert_int_equal(meta.puts, 1); /* the token is kept */
    mono += 1000;
    assert_false(notice_watch_tick(w, mono, NOW)); /* still there: not news */
    assert_non_null(notice_watch_notice(w));

    /* the service forgot the token: a new one, and the notice read with it */
    pthread_mutex_lock(&meta.lock);
    snprintf(meta.token, sizeof(meta.token), "token-2");
    pthread_mutex_unlock(&meta.lock);
    mono += 1000;
    assert_false(notice_watch_tick(w, mono, NOW));
    assert_non_null(notice_watch_notice(w));
    assert_int_equal(meta.unauthorized, 1);
    assert_int_equal(meta.puts, 2);

    /* garbage, then the service gone: the notice stands */
    meta_set(200, "{\"action\": \"terminate\"}");
    mono += 1000;
    assert_false(notice_watch_tick(w, mono, NOW));
    assert_non_null(notice_watch_notice(w));

    /* withdrawn */
    meta_set(404, "");
    mono += 1000;
    assert_true(notice_watch_tick(w, mono, NOW));
    assert_null(notice_watch_notice(w));

    /* a garbled answer is no notice */
    meta_set(200, "terminate at noon");
    mono += 1000;
    assert_false(notice_watch_tick(w, mono, NOW));
    assert_null(notice_watch_notice(w));
    assert_int_equal(meta.refused, 0);
    notice_watch_free(w);
}

static void test_watch_gcp(void **state)
{
    (void)state;
    meta.refused = 0;
    NoticeWatch *w = watch(NOTICE_GCP);
    meta_set(200, "FALSE");
    assert_false(notice_watch_tick(w, 0, NOW));
    meta_set(200, "TRUE");
    assert_true(notice_watch_tick(w, 1000, NOW));
    assert_int_equal(notice_watch_notice(w)->deadline_ms, NOW + NOTICE_LEAD_MS);
    /* asked again later, the deadline stays where the first TRUE put it */
    assert_false(notice_watch_tick(w, 2000, NOW + 1000));
    assert_int_equal(notice_watch_notice(w)->deadline_ms, NOW + NOTICE_LEAD_MS);
    assert_int_equal(notice_watch_notice(w)->source, NOTICE_GCP);
    assert_int_equal(meta.refused, 0); /* every request had Metadata-Flavor: Google */
    notice_watch_free(w);
}

static void test_watch_azure(void **state)
{
    (void)state;
    meta.refused = 0;
    meta.vm_name = "vm-7";
    char *b = azure_body("Preempt", "vm-8", "Mon, 19 Sep 2016 18:29:47 GMT");
    meta_set(200, b);
    free(b);
    NoticeWatch *w = watch(NOTICE_AZURE);
    assert_false(notice_watch_tick(w, 0, NOW)); /* another VM's */
    b = azure_body("Preempt", "vm-7", "Mon, 19 Sep 2016 18:29:47 GMT");
    meta_set(200, b);
    free(b);
    assert_true(notice_watch_tick(w, 1000, NOW));
    assert_int_equal(notice_watch_notice(w)->deadline_ms, T_2016_09_19);
    assert_int_equal(meta.refused, 0); /* every request had Metadata: true */
    notice_watch_free(w);

    /* without compute/name, the node's name stands for the VM's */
    meta.vm_name = NULL;
    b = azure_body("Preempt", "node-7", "");
    meta_set(200, b);
    free(b);
    w = watch(NOTICE_AZURE);
    assert_true(notice_watch_tick(w, 0, NOW));
    assert_int_equal(notice_watch_notice(w)->deadline_ms, NOW + NOTICE_LEAD_MS);
    notice_watch_free(w);

    /* nobody listening: no notice, and the watch goes on */
    meta_down();
    w = watch(NOTICE_AZURE);
    assert_false(notice_watch_tick(w, 0, NOW));
    assert_null(notice_watch_notice(w));
    assert_int_equal(notice_watch_next_ms(w), 1000);
    notice_watch_free(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rfc3339),
        cmocka_unit_test(test_http_date),
        cmocka_unit_test(test_aws),
        cmocka_unit_test(test_gcp),
        cmocka_unit_test(test_azure),
        cmocka_unit_test(test_sources),
        cmocka_unit_test(test_heartbeat_interruption),
        cmocka_unit_test(test_watch_aws),
        cmocka_unit_test(test_watch_gcp),
        cmocka_unit_test(test_watch_azure),
    };
    return cmocka_run_group_tests(tests, meta_start, meta_stop);
}
