/* test_audit.c: the audit log's lines (server/audit.c): which requests are logged
 * (mutations; not reads; not an agent's accepted heartbeats, but its refusals), the
 * caller's fields, the object named from the path or the reply, the error sentence of
 * a refusal, the escaping that keeps a client's bytes from forging a field or a line,
 * and the file: created 0600, appended to, one line per request. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "server/audit.h"
#include "util/file.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* 2026-12-02T03:51:57.967Z */
#define NOW_MS 1796183517967LL

static HttpResponse reply(int status, const char *json)
{
    HttpResponse rp = {.status = status};
    buf_puts(&rp.body, json);
    return rp;
}

static const Caller alice = {.token_id = 2, .role = ROLE_LEAD, .team = "search", .user = "alice"};

static char *line_of(const char *method, const char *path, const Caller *who, bool machine,
                     HttpResponse *rp)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(4242)};
    inet_pton(AF_INET, "10.1.2.3", &sa.sin_addr);
    Buf b = {0};
    bool logged = audit_format(&b, method, path, who, machine, rp, (struct sockaddr *)&sa, NOW_MS);
    buf_free(&rp->body);
    if (!logged) {
        assert_int_equal(b.len, 0);
        buf_free(&b);
        return NULL;
    }
    return buf_steal(&b);
}

static void test_what_is_logged(void **state)
{
    HttpResponse rp = reply(200, "{\"jobs\":[]}");
    assert_null(line_of("GET", "/api/v1/jobs", &alice, false, &rp));
    rp = reply(200, "");
    assert_null(line_of("HEAD", "/", NULL, false, &rp));
    /* an agent's accepted heartbeat is machine traffic; its refusal is not */
    Caller agent = {.token_id = 9, .role = ROLE_AGENT, .node = "h100-0"};
    rp = reply(200, "{}");
    assert_null(line_of("POST", "/api/v1/agent/heartbeat", &agent, true, &rp));
    rp = reply(403, "{\"error\":\"this token acts for node h100-0 only\"}");
    char *l = line_of("POST", "/api/v1/agent/heartbeat", &agent, true, &rp);
    assert_non_null(l);
    assert_non_null(strstr(l, " role=agent "));
    assert_non_null(strstr(l, " status=403 "));
    free(l);
}

static void test_fields(void **state)
{
    HttpResponse rp = reply(201, "{\"id\":17,\"name\":\"bert\"}");
    char *l = line_of("POST", "/api/v1/jobs", &alice, false, &rp);
    assert_string_equal(l, "time=2026-12-02T03:51:57.967Z token=2 user=alice role=lead team=search "
                           "method=POST path=/api/v1/jobs status=201 target=job/17 addr=10.1.2.3");
    free(l);
    /* a list submitted names every job */
    rp = reply(201, "{\"jobs\":[{\"id\":3},{\"id\":4}]}");
    l = line_of("POST", "/api/v1/jobs", &alice, false, &rp);
    assert_non_null(strstr(l, " target=jobs/3,4 "));
    free(l);
    /* a token made names the token's id, never the token */
    rp = reply(201, "{\"id\":5,\"token\":\"gpo_secret\"}");
    l = line_of("POST", "/api/v1/tokens", &alice, false, &rp);
    assert_non_null(strstr(l, " target=token/5 "));
    assert_null(strstr(l, "gpo_secret"));
    free(l);
    /* the path names what a change is to; a refusal carries its sentence */
    rp = reply(409, "{\"error\":\"job 12 already ended\"}");
    l = line_of("DELETE", "/api/v1/jobs/12", &alice, false, &rp);
    assert_non_null(strstr(l, " status=409 target=job/12 error=\"job 12 already ended\" "));
    free(l);
    rp = reply(200, "{}");
    l = line_of("PUT", "/api/v1/teams/search", &alice, false, &rp);
    assert_non_null(strstr(l, " target=team/search "));
    free(l);
    /* no token accepted: the caller is unknown; a token without user or team */
    rp = reply(401, "{\"error\":\"the token was revoked\"}");
    l = line_of("DELETE", "/api/v1/tokens/3", NULL, false, &rp);
    assert_non_null(strstr(l, " token=- user=- role=- team=- method=DELETE "));
    assert_non_null(strstr(l, " error=\"the token was revoked\" "));
    free(l);
    Caller viewer = {.token_id = 7, .role = ROLE_VIEWER};
    rp = reply(403, "{\"error\":\"no\"}");
    l = line_of("POST", "/api/v1/jobs", &viewer, false, &rp);
    assert_non_null(strstr(l, " token=7 user=- role=viewer team=- "));
    free(l);
}

/* A client's bytes in the path or the error cannot start a field or a line. */
static void test_escaping(void **state)
{
    HttpResponse rp = reply(404, "{\"error\":\"no such endpoint\"}");
    char *l = line_of("POST", "/x status=200 user=admin\n\"time=1\\", &alice, false, &rp);
    assert_null(strchr(l, '\n'));
    /* one quoted value, as logfmt reads it: the newline and the quote escaped */
    assert_non_null(strstr(l, " path=\"/x status=200 user=admin\\x0a\\\"time=1\\\\\" status=404 "));
    free(l);
    rp = reply(404, "{}");
    l = line_of("POST", "/a\nb", &alice, false, &rp);
    assert_non_null(strstr(l, "path=\"/a\\x0ab\""));
    free(l);
    /* a long value is cut, and says so */
    char path[600];
    memset(path, 'p', sizeof(path) - 1);
    path[0] = '/';
    path[sizeof(path) - 1] = '\0';
    rp = reply(404, "{}");
    l = line_of("POST", path, &alice, false, &rp);
    assert_non_null(strstr(l, "...\""));
    assert_true(strlen(l) < 500);
    free(l);
}

static void test_file(void **state)
{
    char dir[] = "/tmp/gpuorch-audit-XXXXXX";
    assert_non_null(mkdtemp(dir));
    Audit *a = NULL;
    Buf err = {0};
    assert_int_equal(audit_open(dir, &a, &err), 0);
    HttpResponse rp = reply(201, "{\"id\":1}");
    audit_request(a, "POST", "/api/v1/jobs", &alice, false, &rp, NULL, NOW_MS);
    audit_request(a, "GET", "/api/v1/jobs", &alice, false, &rp, NULL, NOW_MS);
    audit_close(a);
    /* opened again: appended to, not truncated */
    assert_int_equal(audit_open(dir, &a, &err), 0);
    audit_request(a, "DELETE", "/api/v1/jobs/1", &alice, false, &rp, NULL, NOW_MS + 1);
    audit_close(a);
    buf_free(&rp.body);
    char path[128];
    snprintf(path, sizeof(path), "%s/audit.log", dir);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    char *text;
    size_t len;
    assert_int_equal(file_read_all(path, &text, &len), 0);
    size_t lines = 0;
    for (size_t i = 0; i < len; i++)
        lines += text[i] == '\n';
    assert_int_equal(lines, 2);
    assert_non_null(strstr(text, "method=POST path=/api/v1/jobs status=201 target=job/1 addr=-\n"));
    assert_non_null(strstr(text, "time=2026-12-02T03:51:57.968Z "));
    free(text);
    unlink(path);
    rmdir(dir);
    /* a directory that is not there: a clear error */
    assert_int_equal(audit_open("/nonexistent/dir", &a, &err), -ENOENT);
    assert_non_null(strstr(buf_str(&err), "cannot open the audit log /nonexistent/dir/audit.log"));
    buf_free(&err);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_what_is_logged),
        cmocka_unit_test(test_fields),
        cmocka_unit_test(test_escaping),
        cmocka_unit_test(test_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
