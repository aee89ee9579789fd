/* test_http_client.c: the client's list of servers (net/http_client.h) against real HTTP
 * servers on loopback (libmicrohttpd): a leader, a standby that sends clients to it (307),
 * a standby that knows no leader (503, X-Gpuorch-Role: standby), a port nothing listens
 * on, and a server that hangs up on a request it has read. A 307 is followed and its
 * leader kept; unreachable servers and leaderless standbys are passed over; a POST that
 * reached a server is never sent to another; a standby naming a dead leader ends the
 * request rather than looping; bad lists are refused. */
#include "net/http_client.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

typedef enum { LEADER, STANDBY_TO, STANDBY_NONE, HANG_UP } Kind;

typedef struct Peer {
    Kind kind;
    struct MHD_Daemon *d;
    int port;
    char url[64];
    char leader[64]; /* STANDBY_TO: where it sends clients */
    atomic_int hits;
} Peer;

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **con_cls)
{
    (void)method;
    (void)version;
    (void)upload;
    Peer *p = cls;
    if (!*con_cls) {
        *con_cls = p;
        return MHD_YES;
    }
    if (*upload_size) {
        *upload_size = 0;
        return MHD_YES;
    }
    atomic_fetch_add(&p->hits, 1);
    if (p->kind == HANG_UP)
        return MHD_NO; /* the request was read: the connection closes with no reply */
    static const char body[] = "{}";
    struct MHD_Response *r =
        MHD_create_response_from_buffer(2, (void *)body, MHD_RESPMEM_PERSISTENT);
    unsigned status = 200;
    if (p->kind == STANDBY_TO) {
        char loc[128];
        snprintf(loc, sizeof(loc), "%s%s", p->leader, url);
        MHD_add_response_header(r, "Location", loc);
        status = 307;
    } else if (p->kind == STANDBY_NONE) {
        status = 503;
    }
    if (p->kind != LEADER)
        MHD_add_response_header(r, "X-Gpuorch-Role", "standby");
    enum MHD_Result ret = MHD_queue_response(conn, status, r);
    MHD_destroy_response(r);
    return ret;
}

static void peer_start(Peer *p, Kind kind, const char *leader)
{
    memset(p, 0, sizeof(*p));
    p->kind = kind;
    if (leader)
        snprintf(p->leader, sizeof(p->leader), "%s", leader);
    p->d = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO, 0, NULL, NULL, on_request, p,
        MHD_OPTION_SOCK_ADDR,
        &(struct sockaddr_in){.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)},
        MHD_OPTION_END);
    assert_non_null(p->d);
    p->port = MHD_get_daemon_info(p->d, MHD_DAEMON_INFO_BIND_PORT)->port;
    snprintf(p->url, sizeof(p->url), "http://127.0.0.1:%d", p->port);
}

static void peer_stop(Peer *p)
{
    MHD_stop_daemon(p->d);
}

/* A loopback URL nothing listens on. */
static void dead_url(char *out, size_t n)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof(a);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &al), 0);
    snprintf(out, n, "http://127.0.0.1:%d", ntohs(a.sin_port));
    close(fd);
}

static HttpClient *client(const char *fmt, ...)
{
    char list[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(list, sizeof(list), fmt, ap);
    va_end(ap);
    HttpClient *h = NULL;
    assert_int_equal(http_client_new(list, "t", 2000, &h), 0);
    return h;
}

static long request(HttpClient *h, const char *method, int want_r)
{
    HttpReply rp = {0};
    Buf err = {0};
    int r = http_request(h, method, "/api/v1/jobs", method[0] == 'P' ? "application/json" : NULL,
                         method[0] == 'P' ? "{}" : NULL, method[0] == 'P' ? 2 : 0, &rp, &err);
    if (r != want_r)
        print_message("%s: %d %s\n", method, r, buf_str(&err));
    assert_int_equal(r, want_r);
    long status = rp.status;
    http_reply_free(&rp);
    buf_free(&err);
    return status;
}

static void test_redirect_followed_and_kept(void **state)
{
    (void)state;
    Peer lead, sb;
    peer_start(&lead, LEADER, NULL);
    peer_start(&sb, STANDBY_TO, lead.url);
    HttpClient *h = client("%s,%s", sb.url, lead.url);
    assert_int_equal(request(h, "POST", 0), 200);
    assert_int_equal(atomic_load(&sb.hits), 1);
    assert_int_equal(atomic_load(&lead.hits), 1);
    /* the leader it was sent to is asked first from then on */
    assert_int_equal(request(h, "GET", 0), 200);
    assert_int_equal(atomic_load(&sb.hits), 1);
    assert_int_equal(atomic_load(&lead.hits), 2);
    http_client_free(h);
    /* one server given: a 307 is still followed */
    h = client("%s", sb.url);
    assert_int_equal(request(h, "GET", 0), 200);
    assert_int_equal(atomic_load(&lead.hits), 3);
    http_client_free(h);
    peer_stop(&sb);
    peer_stop(&lead);
}

static void test_passed_over(void **state)
{
    (void)state;
    char dead[64];
    dead_url(dead, sizeof(dead));
    Peer lead, none;
    peer_start(&lead, LEADER, NULL);
    peer_start(&none, STANDBY_NONE, NULL);
    HttpClient *h = client("%s,%s,%s", dead, none.url, lead.url);
    assert_int_equal(request(h, "POST", 0), 200); /* refused, then 503 standby: not taken */
    assert_int_equal(atomic_load(&none.hits), 1);
    assert_int_equal(atomic_load(&lead.hits), 1);
    assert_int_equal(request(h, "POST", 0), 200); /* it stays with the one that answered */
    assert_int_equal(atomic_load(&none.hits), 1);
    assert_int_equal(atomic_load(&lead.hits), 2);
    http_client_free(h);
    /* one server, standing by with no leader: its 503 is the answer */
    h = client("%s", none.url);
    assert_int_equal(request(h, "GET", 0), 503);
    http_client_free(h);
    /* nothing answers: an error, after the rounds (bounded) */
    h = client("%s,%s", dead, dead);
    assert_int_equal(request(h, "GET", -ECONNREFUSED), 0);
    http_client_free(h);
    peer_stop(&none);
    peer_stop(&lead);
}

static void test_never_sent_twice(void **state)
{
    (void)state;
    Peer hang, lead;
    peer_start(&hang, HANG_UP, NULL);
    peer_start(&lead, LEADER, NULL);
    HttpClient *h = client("%s,%s", hang.url, lead.url);
    /* the POST reached the first server: not known whether it was taken, so not resent */
    assert_int_equal(request(h, "POST", -EIO), 0);
    assert_int_equal(atomic_load(&hang.hits), 1);
    assert_int_equal(atomic_load(&lead.hits), 0);
    http_client_free(h);
    /* a GET is safe to send again */
    h = client("%s,%s", hang.url, lead.url);
    assert_int_equal(request(h, "GET", 0), 200);
    assert_int_equal(atomic_load(&lead.hits), 1);
    http_client_free(h);
    peer_stop(&lead);
    peer_stop(&hang);
}

static void test_dead_leader_named(void **state)
{
    (void)state;
    char dead[64];
    dead_url(dead, sizeof(dead));
    Peer sb, lead;
    peer_start(&sb, STANDBY_TO, dead); /* its leader row names a server just killed */
    peer_start(&lead, LEADER, NULL);
    HttpClient *h = client("%s,%s", sb.url, lead.url);
    assert_int_equal(request(h, "POST", 0), 200);
    assert_int_equal(atomic_load(&lead.hits), 1);
    http_client_free(h);
    /* nobody else to ask: the request ends, with the refused leader's error */
    h = client("%s", sb.url);
    assert_int_equal(request(h, "POST", -ECONNREFUSED), 0);
    http_client_free(h);
    peer_stop(&lead);
    peer_stop(&sb);
}

static void test_bad_lists(void **state)
{
    (void)state;
    HttpClient *h = NULL;
    assert_int_equal(http_client_new("", NULL, 0, &h), -EINVAL);
    assert_int_equal(http_client_new("http://a:1,", NULL, 0, &h), -EINVAL);
    assert_int_equal(http_client_new("http://a:1,ftp://b", NULL, 0, &h), -EINVAL);
    assert_int_equal(http_client_new("http://a:1, http://b:2", NULL, 0, &h), -EINVAL);
    assert_int_equal(http_client_new("http://a,http://a,http://a,http://a,http://a,http://a,"
                                     "http://a,http://a,http://a",
                                     NULL, 0, &h),
                     -EINVAL);
    assert_int_equal(http_client_new("http://a:1/,https://b:2", NULL, 0, &h), 0);
    http_client_free(h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_redirect_followed_and_kept),
        cmocka_unit_test(test_passed_over),
        cmocka_unit_test(test_never_sent_twice),
        cmocka_unit_test(test_dead_leader_named),
        cmocka_unit_test(test_bad_lists),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
