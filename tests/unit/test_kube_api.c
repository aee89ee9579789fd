/* test_kube_api.c: the Kubernetes API client (kube/api.c). Kubeconfig reading (a
 * token, a tokenFile and certificate files relative to the kubeconfig, base64 data, the
 * insecure flag, a named context, and errors that name the file and the field), the
 * in-cluster credentials from a service account directory, query escaping, the watch
 * stream's line splitter fed at every split of a stream, the token bucket with the time
 * passed in; then the requests themselves against a scripted API server on loopback
 * (libmicrohttpd in this process): a paged list with a continue token that must
 * survive escaping on one kept-alive connection, a watch stream sent in odd-sized
 * chunks, a 410 ERROR event and an HTTP 410, a 403 Status, a stop flag, a server that
 * is not there, the rate limit holding requests back, and TLS with the CA, the client
 * certificate and its key given as PEM text. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "kube/api.h"
#include "kube/api_internal.h"
#include "util/macro.h"

#include <errno.h>
#include <jansson.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static char dir[] = "/tmp/gpuorch-kapi-XXXXXX";

static void put_file(const char *name, const char *text)
{
    char path[256];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static const char *path_of(const char *name)
{
    static char path[256];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    return path;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- kubeconfig ---- */

/* Two clusters, two users, two contexts: "prod" current (a token, system CAs), "dev"
 * a tokenFile and certificate files by relative paths. */
static const char KUBECONFIG[] = "apiVersion: v1\n"
                                 "kind: Config\n"
                                 "current-context: prod\n"
                                 "clusters:\n"
                                 "- name: prod-cluster\n"
                                 "  cluster:\n"
                                 "    server: https://10.0.0.1:6443/\n"
                                 "- name: dev-cluster\n"
                                 "  cluster:\n"
                                 "    server: https://127.0.0.1:6443\n"
                                 "    certificate-authority: ca.pem\n"
                                 "    insecure-skip-tls-verify: false\n"
                                 "contexts:\n"
                                 "- name: prod\n"
                                 "  context:\n"
                                 "    cluster: prod-cluster\n"
                                 "    user: admin\n"
                                 "    namespace: gpu\n"
                                 "- name: dev\n"
                                 "  context:\n"
                                 "    cluster: dev-cluster\n"
                                 "    user: dev-user\n"
                                 "users:\n"
                                 "- name: admin\n"
                                 "  user:\n"
                                 "    token: abc.def\n"
                                 "- name: dev-user\n"
                                 "  user:\n"
                                 "    tokenFile: secrets/token\n"
                                 "    client-certificate: secrets/client.crt\n"
                                 "    client-key: secrets/client.key\n";

static void test_config_current_context(void **state)
{
    put_file("config", KUBECONFIG);
    KubeConfig c = {0};
    Buf err = {0};
    int r = kube_config_load(path_of("config"), NULL, &c, &err);
    if (r < 0)
        fail_msg("%s", buf_str(&err));
    assert_string_equal(c.server, "https://10.0.0.1:6443/");
    assert_string_equal(c.token, "abc.def");
    assert_string_equal(c.namespace_, "gpu");
    assert_null(c.ca_pem);
    assert_null(c.cert_pem);
    assert_null(c.key_pem);
    assert_false(c.insecure);
    assert_true(c.qps == 0);
    kube_config_free(&c);
    buf_free(&err);
}

static void test_config_named_context_files(void **state)
{
    char sub[256];
    snprintf(sub, sizeof(sub), "%s/secrets", dir);
    mkdir(sub, 0700);
    put_file("config", KUBECONFIG);
    put_file("secrets/token", "tok-from-file\n");
    put_file("secrets/client.crt", "CERT PEM\n");
    put_file("secrets/client.key", "KEY PEM\n");
    put_file("ca.pem", "CA PEM\n");
    KubeConfig c = {0};
    Buf err = {0};
    /* the test's working directory is the source tree: relative paths must not be
     * read from there */
    int r = kube_config_load(path_of("config"), "dev", &c, &err);
    if (r < 0)
        fail_msg("%s", buf_str(&err));
    assert_string_equal(c.server, "https://127.0.0.1:6443");
    assert_string_equal(c.token, "tok-from-file");
    assert_string_equal(c.ca_pem, "CA PEM\n");
    assert_string_equal(c.cert_pem, "CERT PEM\n");
    assert_string_equal(c.key_pem, "KEY PEM\n");
    assert_null(c.namespace_);
    assert_false(c.insecure);
    kube_config_free(&c);

    /* a file it names that is not there: the field and the full path */
    put_file("config2", "current-context: x\n"
                        "clusters: [{name: c, cluster: {server: 'https://h', "
                        "certificate-authority: nope.pem}}]\n"
                        "contexts: [{name: x, context: {cluster: c}}]\n");
    buf_reset(&err);
    assert_int_equal(kube_config_load(path_of("config2"), NULL, &c, &err), -ENOENT);
    assert_non_null(strstr(buf_str(&err), "certificate-authority"));
    assert_non_null(strstr(buf_str(&err), path_of("nope.pem")));
    buf_free(&err);
}

static void test_config_data_and_insecure(void **state)
{
    /* base64 of "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n", the CA
     * folded over two lines as a block scalar may be */
    put_file("config", "current-context: lab\n"
                       "clusters:\n"
                       "- name: lab\n"
                       "  cluster:\n"
                       "    server: https://lab:6443\n"
                       "    insecure-skip-tls-verify: true\n"
                       "    certificate-authority-data: |\n"
                       "      LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUIKLS0t\n"
                       "      LS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo=\n"
                       "    certificate-authority: /no/such/file\n"
                       "contexts:\n"
                       "- {name: lab, context: {cluster: lab, user: lab}}\n"
                       "users:\n"
                       "- name: lab\n"
                       "  user:\n"
                       "    client-certificate-data: Q0VSVA==\n"
                       "    client-key-data: S0VZ\n"
                       "    token: t1\n"
                       "    tokenFile: /no/such/token\n");
    KubeConfig c = {0};
    Buf err = {0};
    int r = kube_config_load(path_of("config"), NULL, &c, &err);
    if (r < 0)
        fail_msg("%s", buf_str(&err));
    assert_true(c.insecure);
    /* the data wins over the file, the token over the tokenFile */
    assert_string_equal(c.ca_pem, "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n");
    assert_string_equal(c.cert_pem, "CERT");
    assert_string_equal(c.key_pem, "KEY");
    assert_string_equal(c.token, "t1");
    kube_config_free(&c);
    buf_free(&err);
}

/* kube_config_load must fail with r, and err must name the file and hold `word`. */
static void load_fails(const char *text, const char *context, int r, const char *word)
{
    put_file("bad", text);
    KubeConfig c = {.server = NULL};
    Buf err = {0};
    int got = kube_config_load(path_of("bad"), context, &c, &err);
    if (got != r || !strstr(buf_str(&err), path_of("bad")) || !strstr(buf_str(&err), word))
        fail_msg("got %d (want %d), err '%s' (want '%s')", got, r, buf_str(&err), word);
    assert_null(c.server); /* not written */
    buf_free(&err);
}

static void test_config_errors(void **state)
{
    const char *tail = "clusters: [{name: c, cluster: {server: 'https://h'}}]\n"
                       "users: [{name: u, user: {token: t}}]\n";
    char text[1024];
    snprintf(text, sizeof(text), "contexts: [{name: x, context: {cluster: c, user: u}}]\n%s", tail);
    load_fails(text, NULL, -EINVAL, "current-context");
    load_fails(text, "y", -EINVAL, "context 'y'");
    snprintf(text, sizeof(text),
             "current-context: x\ncontexts: [{name: x, context: {cluster: nope, user: u}}]\n%s",
             tail);
    load_fails(text, NULL, -EINVAL, "cluster 'nope' (of context 'x')");
    snprintf(text, sizeof(text),
             "current-context: x\ncontexts: [{name: x, context: {cluster: c, user: ghost}}]\n%s",
             tail);
    load_fails(text, NULL, -EINVAL, "user 'ghost' (of context 'x')");
    load_fails("current-context: x\ncontexts: [{name: x, context: {cluster: c}}]\n"
               "clusters: [{name: c, cluster: {certificate-authority-data: abc}}]\n",
               NULL, -EINVAL, "cluster 'c' has no 'server'");
    load_fails("current-context: x\ncontexts: [{name: x, context: {cluster: c}}]\n"
               "clusters: [{name: c, cluster: {server: 'https://h', "
               "insecure-skip-tls-verify: maybe}}]\n",
               NULL, -EINVAL, "'insecure-skip-tls-verify' must be true or false, not 'maybe'");
    load_fails("current-context: x\ncontexts: [{name: x, context: {cluster: c}}]\n"
               "clusters: [{name: c, cluster: {server: 'https://h', "
               "certificate-authority-data: 'not base64!'}}]\n",
               NULL, -EINVAL, "'certificate-authority-data' is not base64");
    load_fails("current-context: x\ncontexts: [{name: x, context: {cluster: c, user: u}}]\n"
               "clusters: [{name: c, cluster: {server: 'https://h'}}]\n"
               "users: [{name: u, user: {exec: {command: aws}}}]\n",
               NULL, -EINVAL, "credential plugin ('exec')");
    load_fails("current-context: x\ncontexts: [{name: x, context: {cluster: c, user: u}}]\n"
               "clusters: [{name: c, cluster: {server: 'https://h'}}]\n"
               "users: [{name: u, user: {client-certificate-data: Q0VSVA==}}]\n",
               NULL, -EINVAL, "needs its key");
    load_fails("current-context: [a, b]\n", NULL, -EINVAL, "'current-context' must be a value");
    load_fails("clusters: [unclosed\n", NULL, -EINVAL, "invalid YAML");
    load_fails("- just\n- a list\n", NULL, -EINVAL, "not a kubeconfig");

    KubeConfig c = {0};
    Buf err = {0};
    assert_int_equal(kube_config_load(path_of("absent"), NULL, &c, &err), -ENOENT);
    assert_non_null(strstr(buf_str(&err), path_of("absent")));
    buf_free(&err);
}

static void test_config_in_cluster(void **state)
{
    char sa[256];
    snprintf(sa, sizeof(sa), "%s/sa", dir);
    mkdir(sa, 0700);
    KubeConfig c = {0};
    Buf err = {0};
    unsetenv("KUBERNETES_SERVICE_HOST");
    unsetenv("KUBERNETES_SERVICE_PORT");
    assert_int_equal(kube_config_in_cluster(sa, &c, &err), -ENOENT);
    assert_non_null(strstr(buf_str(&err), "KUBERNETES_SERVICE_HOST"));

    setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
    setenv("KUBERNETES_SERVICE_PORT", "443", 1);
    buf_reset(&err);
    assert_int_equal(kube_config_in_cluster(sa, &c, &err), -ENOENT);
    assert_non_null(strstr(buf_str(&err), "sa/token"));

    put_file("sa/token", "eyJhbGciOi.sa-token\n");
    put_file("sa/ca.crt", "CLUSTER CA\n");
    put_file("sa/namespace", "gpuorch-system");
    buf_reset(&err);
    int r = kube_config_in_cluster(sa, &c, &err);
    if (r < 0)
        fail_msg("%s", buf_str(&err));
    assert_string_equal(c.server, "https://10.96.0.1:443");
    assert_string_equal(c.token, "eyJhbGciOi.sa-token");
    assert_string_equal(c.ca_pem, "CLUSTER CA\n");
    assert_string_equal(c.namespace_, "gpuorch-system");
    assert_false(c.insecure);
    kube_config_free(&c);

    setenv("KUBERNETES_SERVICE_HOST", "fd00:10:96::1", 1);
    assert_int_equal(kube_config_in_cluster(sa, &c, &err), 0);
    assert_string_equal(c.server, "https://[fd00:10:96::1]:443");
    kube_config_free(&c);
    unsetenv("KUBERNETES_SERVICE_HOST");
    unsetenv("KUBERNETES_SERVICE_PORT");
    buf_free(&err);
}

/* ---- escaping, the line splitter, the bucket ---- */

static void test_query_escape(void **state)
{
    Buf b = {0};
    kube_query_escape(&b, "spec.nodeName=n1,status.phase!=Succeeded");
    assert_string_equal(buf_str(&b), "spec.nodeName%3Dn1%2Cstatus.phase%21%3DSucceeded");
    buf_reset(&b);
    kube_query_escape(&b, "a b/c&d+e?f#g%h");
    assert_string_equal(buf_str(&b), "a%20b%2Fc%26d%2Be%3Ff%23g%25h");
    buf_reset(&b);
    kube_query_escape(&b, "AZaz09-._~");
    assert_string_equal(buf_str(&b), "AZaz09-._~");
    buf_reset(&b);
    kube_query_escape(&b, "");
    assert_string_equal(buf_str(&b), "");
    buf_free(&b);
}

typedef struct Lines {
    char got[8][64];
    size_t n;
    size_t stop_at; /* return -EPIPE at this line (1-based); 0: never */
} Lines;

static int collect_line(void *arg, const char *line, size_t len)
{
    Lines *l = arg;
    if (l->n == ARRAY_SIZE(l->got) || len >= sizeof(l->got[0]))
        return -E2BIG;
    memcpy(l->got[l->n], line, len);
    l->got[l->n][len] = '\0';
    if (++l->n == l->stop_at)
        return -EPIPE;
    return 0;
}

/* The stream cut at i and j (0 <= i <= j <= n): three chunks, some empty. */
static void split3(const char *text, size_t i, size_t j, Lines *l)
{
    KubeLines s = {.fn = collect_line, .arg = l};
    size_t n = strlen(text);
    assert_int_equal(kube_lines_feed(&s, text, i), 0);
    assert_int_equal(kube_lines_feed(&s, text + i, j - i), 0);
    assert_int_equal(kube_lines_feed(&s, text + j, n - j), 0);
    assert_int_equal(kube_lines_end(&s), 0);
    kube_lines_free(&s);
}

static void test_lines_every_split(void **state)
{
    /* CRLF, an empty line between, and a last line without its newline */
    const char *text = "{\"type\":\"ADDED\"}\n{\"a\":1}\r\n\n{\"b\":[2,3]}\n{\"last\":true}";
    const char *want[] = {"{\"type\":\"ADDED\"}", "{\"a\":1}", "{\"b\":[2,3]}", "{\"last\":true}"};
    size_t n = strlen(text);
    for (size_t i = 0; i <= n; i++)
        for (size_t j = i; j <= n; j++) {
            Lines l = {0};
            split3(text, i, j, &l);
            if (l.n != ARRAY_SIZE(want))
                fail_msg("split at %zu, %zu: %zu lines", i, j, l.n);
            for (size_t k = 0; k < l.n; k++)
                if (strcmp(l.got[k], want[k]))
                    fail_msg("split at %zu, %zu: line %zu '%s'", i, j, k, l.got[k]);
        }

    /* byte by byte */
    Lines l = {0};
    KubeLines s = {.fn = collect_line, .arg = &l};
    for (size_t i = 0; i < n; i++)
        assert_int_equal(kube_lines_feed(&s, text + i, 1), 0);
    assert_int_equal(l.n, 3);
    assert_int_equal(kube_lines_end(&s), 0);
    assert_int_equal(l.n, 4);
    assert_string_equal(l.got[3], "{\"last\":true}");
    /* nothing is left over to deliver twice */
    assert_int_equal(kube_lines_end(&s), 0);
    assert_int_equal(l.n, 4);
    kube_lines_free(&s);
}

static void test_lines_stop(void **state)
{
    /* fn's error stops the feed at that line: the next one in the same chunk is not
     * given */
    Lines l = {.stop_at = 2};
    KubeLines s = {.fn = collect_line, .arg = &l};
    assert_int_equal(kube_lines_feed(&s, "one\ntw", 6), 0);
    assert_int_equal(kube_lines_feed(&s, "o\nthree\n", 8), -EPIPE);
    assert_int_equal(l.n, 2);
    assert_string_equal(l.got[1], "two");
    kube_lines_free(&s);
}

static void test_bucket(void **state)
{
    const int64_t ms = 1000000;
    KubeBucket b;
    kube_bucket_init(&b, 10, 2, 0);
    /* burst 2 go at once; then one every 100 ms, each promised the next free slot */
    assert_int_equal(kube_bucket_take(&b, 0), 0);
    assert_int_equal(kube_bucket_take(&b, 0), 0);
    int64_t w = kube_bucket_take(&b, 0);
    assert_true(w >= 99 * ms && w <= 100 * ms);
    w = kube_bucket_take(&b, 0);
    assert_true(w >= 199 * ms && w <= 200 * ms);
    /* at 150 ms the third went and the fourth waits 50 ms more */
    w = kube_bucket_take(&b, 150 * ms);
    assert_true(w >= 149 * ms && w <= 150 * ms);
    /* a long pause refills to the burst, not beyond */
    kube_bucket_take(&b, 10000 * ms);
    assert_int_equal(kube_bucket_take(&b, 10000 * ms), 0);
    assert_true(kube_bucket_take(&b, 10000 * ms) > 0);

    /* no limit */
    kube_bucket_init(&b, 0, 0, 0);
    for (int i = 0; i < 1000; i++)
        assert_int_equal(kube_bucket_take(&b, 0), 0);
    /* burst 0 counts as 1 */
    kube_bucket_init(&b, 1000, 0, 0);
    assert_int_equal(kube_bucket_take(&b, 0), 0);
    assert_true(kube_bucket_take(&b, 0) > 0);
}

/* ---- a scripted API server ---- */

static struct {
    struct MHD_Daemon *d;
    unsigned port;
    pthread_mutex_t lock;
    int connections;      /* connections accepted */
    int list_calls;       /* GETs of /api/v1/pods without watch */
    char last_ct[128];    /* the last request's Content-Type */
    char last_body[1024]; /* and its body */
    volatile bool quit;   /* the idle stream ends */
} srv;

typedef struct Req {
    Buf body;
} Req;

/* A reply streamed in chunks of odd sizes, a little apart, so the client's write
 * callback sees events cut anywhere; idle: then nothing more until the test ends. */
typedef struct Stream {
    char *text;
    size_t len, off, step;
    bool idle;
} Stream;

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    static const size_t sizes[] = {1, 7, 13, 2, 40, 5, 64, 3};
    Stream *s = cls;
    if (s->off < s->len) {
        size_t n = sizes[s->step++ % ARRAY_SIZE(sizes)];
        n = n < s->len - s->off ? n : s->len - s->off;
        n = n < max ? n : max;
        memcpy(buf, s->text + s->off, n);
        s->off += n;
        usleep(500);
        return (ssize_t)n;
    }
    for (int i = 0; s->idle && !srv.quit && i < 300; i++)
        usleep(10000);
    return MHD_CONTENT_READER_END_OF_STREAM;
}

static void stream_free(void *cls)
{
    Stream *s = cls;
    free(s->text);
    free(s);
}

static enum MHD_Result send_stream(struct MHD_Connection *c, const char *text, bool idle)
{
    Stream *s = calloc(1, sizeof(*s));
    s->text = strdup(text);
    s->len = strlen(text);
    s->idle = idle;
    struct MHD_Response *resp =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 256, stream_read, s, stream_free);
    MHD_add_response_header(resp, "Content-Type", "application/json");
    enum MHD_Result r = MHD_queue_response(c, 200, resp);
    MHD_destroy_response(resp);
    return r;
}

static enum MHD_Result respond(struct MHD_Connection *c, unsigned status, const char *ct,
                               const char *body)
{
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_MUST_COPY);
    MHD_add_response_header(resp, "Content-Type", ct);
    enum MHD_Result r = MHD_queue_response(c, status, resp);
    MHD_destroy_response(resp);
    return r;
}

#define STATUS_410                                                                                 \
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\",\"message\":\"too old "     \
    "resource version: 5 (40)\",\"reason\":\"Expired\",\"code\":410}"

static const char WATCH_OK[] =
    "{\"type\":\"ADDED\",\"object\":{\"kind\":\"Pod\",\"metadata\":{\"name\":\"p4\","
    "\"resourceVersion\":\"12\"}}}\n"
    "{\"type\":\"MODIFIED\",\"object\":{\"kind\":\"Pod\",\"metadata\":{\"name\":\"p4\","
    "\"resourceVersion\":\"13\"},\"spec\":{\"nodeName\":\"n1\"}}}\n"
    "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Pod\",\"metadata\":{\"resourceVersion\":"
    "\"20\"}}}\n";

static enum MHD_Result watch_reply(struct MHD_Connection *c)
{
    const char *rv = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "resourceVersion");
    const char *bm = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "allowWatchBookmarks");
    const char *to = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "timeoutSeconds");
    if (!rv || !bm || strcmp(bm, "true") || !to || strcmp(to, "5"))
        return respond(c, 400, "text/plain", "bad watch query\n");
    if (!strcmp(rv, "11"))
        return send_stream(c, WATCH_OK, false);
    if (!strcmp(rv, "5"))
        return send_stream(c,
                           "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"resourceVersion\":"
                           "\"6\"}}}\n{\"type\":\"ERROR\",\"object\":" STATUS_410 "}\n",
                           false);
    if (!strcmp(rv, "gone"))
        return respond(c, 410, "application/json", STATUS_410);
    if (!strcmp(rv, "idle"))
        return send_stream(c,
                           "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"resourceVersion\":"
                           "\"31\"}}}\n",
                           true);
    if (!strcmp(rv, "junk"))
        return send_stream(c, "{\"type\":\"ADDED\",\"object\":{}}\nnot json\n", false);
    return respond(c, 400, "text/plain", "unknown version\n");
}

static enum MHD_Result list_reply(struct MHD_Connection *c)
{
    const char *limit = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "limit");
    const char *fs = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "fieldSelector");
    const char *cont = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "continue");
    if (!limit || strcmp(limit, "500") || !fs || strcmp(fs, "spec.nodeName=n1"))
        return respond(c, 400, "text/plain", "bad list query\n");
    pthread_mutex_lock(&srv.lock);
    srv.list_calls++;
    pthread_mutex_unlock(&srv.lock);
    if (!cont)
        return respond(c, 200, "application/json",
                       "{\"kind\":\"PodList\",\"metadata\":{\"resourceVersion\":\"10\","
                       "\"continue\":\"tok/1+=\"},\"items\":[{\"metadata\":{\"name\":\"p1\"}},"
                       "{\"metadata\":{\"name\":\"p2\"}}]}");
    if (!strcmp(cont, "tok/1+="))
        return respond(c, 200, "application/json",
                       "{\"kind\":\"PodList\",\"metadata\":{\"resourceVersion\":\"11\"},"
                       "\"items\":[{\"metadata\":{\"name\":\"p3\"}}]}");
    return respond(c, 410, "application/json",
                   "{\"kind\":\"Status\",\"message\":\"The provided continue parameter is too "
                   "old\",\"code\":410}");
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
    Req *rq = *con_cls;
    if (!rq) {
        *con_cls = calloc(1, sizeof(Req));
        return *con_cls ? MHD_YES : MHD_NO;
    }
    if (*upload_data_size) {
        buf_append(&rq->body, upload_data, *upload_data_size);
        *upload_data_size = 0;
        return MHD_YES;
    }
    const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    if (!auth || strcmp(auth, "Bearer s3cret"))
        return respond(c, 401, "application/json",
                       "{\"kind\":\"Status\",\"message\":\"Unauthorized\",\"code\":401}");
    const char *ct = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Type");
    pthread_mutex_lock(&srv.lock);
    snprintf(srv.last_ct, sizeof(srv.last_ct), "%s", ct ? ct : "");
    snprintf(srv.last_body, sizeof(srv.last_body), "%s", buf_str(&rq->body));
    pthread_mutex_unlock(&srv.lock);
    if (!strcmp(url, "/api/v1/pods") && !strcmp(method, "GET"))
        return MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "watch") ? watch_reply(c)
                                                                              : list_reply(c);
    if (!strcmp(url, "/api/v1/secrets"))
        return respond(c, 403, "application/json",
                       "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\","
                       "\"message\":\"secrets is forbidden: User \\\"gpuorch\\\" cannot list "
                       "resource \\\"secrets\\\"\",\"reason\":\"Forbidden\",\"code\":403}");
    if (!strcmp(url, "/api/v1/namespaces/default/events") && !strcmp(method, "POST"))
        return respond(c, 201, "application/json", buf_str(&rq->body));
    if (!strcmp(url, "/api/v1/nodes/n1") && !strcmp(method, "PATCH"))
        return respond(c, 200, "application/json", "{\"kind\":\"Node\"}");
    if (!strcmp(url, "/oops"))
        return respond(c, 500, "text/plain", "\n  upstream broke\nsecond line\n");
    if (!strcmp(url, "/empty"))
        return respond(c, 503, "text/plain", "");
    return respond(c, 404, "application/json",
                   "{\"kind\":\"Status\",\"message\":\"the server could not find the requested "
                   "resource\",\"code\":404}");
}

static void on_done(void *cls, struct MHD_Connection *c, void **con_cls,
                    enum MHD_RequestTerminationCode toe)
{
    Req *rq = *con_cls;
    if (rq) {
        buf_free(&rq->body);
        free(rq);
    }
    *con_cls = NULL;
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
    if (toe != MHD_CONNECTION_NOTIFY_STARTED)
        return;
    pthread_mutex_lock(&srv.lock);
    srv.connections++;
    pthread_mutex_unlock(&srv.lock);
}

static KubeApi *client(double qps, int burst)
{
    char server[64];
    snprintf(server, sizeof(server), "http://127.0.0.1:%u", srv.port);
    KubeConfig cfg = {.server = server, .token = "s3cret", .qps = qps, .burst = burst};
    KubeApi *a = NULL;
    assert_int_equal(kube_api_new(&cfg, 5000, &a), 0);
    return a;
}

typedef struct Items {
    char names[8][16];
    size_t n;
} Items;

static int collect_item(void *arg, json_t *item)
{
    Items *it = arg;
    const char *name =
        json_string_value(json_object_get(json_object_get(item, "metadata"), "name"));
    if (it->n == ARRAY_SIZE(it->names) || !name)
        return -E2BIG;
    snprintf(it->names[it->n++], sizeof(it->names[0]), "%s", name);
    return 0;
}

static void test_list_pages(void **state)
{
    KubeApi *a = client(0, 0);
    pthread_mutex_lock(&srv.lock);
    srv.connections = srv.list_calls = 0;
    pthread_mutex_unlock(&srv.lock);
    Items it = {0};
    char *rv = NULL;
    Buf err = {0};
    int r =
        kube_list(a, "/api/v1/pods?fieldSelector=spec.nodeName%3Dn1", collect_item, &it, &rv, &err);
    if (r < 0)
        fail_msg("%s", buf_str(&err));
    assert_int_equal(it.n, 3);
    assert_string_equal(it.names[0], "p1");
    assert_string_equal(it.names[2], "p3");
    assert_string_equal(rv, "11");
    assert_int_equal(srv.list_calls, 2);
    assert_int_equal(srv.connections, 1); /* both pages on one kept-alive connection */
    free(rv);

    /* the callback's error stops the list */
    Items full = {.n = ARRAY_SIZE(full.names)};
    rv = NULL;
    assert_int_equal(kube_list(a, "/api/v1/pods?fieldSelector=spec.nodeName%3Dn1", collect_item,
                               &full, &rv, &err),
                     -E2BIG);
    assert_null(rv);

    /* 403: the Status message in err */
    buf_reset(&err);
    assert_int_equal(kube_list(a, "/api/v1/secrets", collect_item, &it, &rv, &err), -EACCES);
    assert_non_null(strstr(buf_str(&err), "HTTP 403"));
    assert_non_null(strstr(buf_str(&err), "secrets is forbidden: User \"gpuorch\""));
    buf_reset(&err);
    assert_int_equal(kube_list(a, "/apis/nope/v1/things", collect_item, &it, &rv, &err), -ENOENT);
    assert_non_null(strstr(buf_str(&err), "could not find"));
    buf_free(&err);
    kube_api_free(a);
}

static void test_request(void **state)
{
    KubeApi *a = client(0, 0);
    KubeReply rep = {0};
    Buf err = {0};
    json_t *ev = json_pack("{s:s, s:{s:s}, s:s}", "kind", "Event", "metadata", "name", "e1",
                           "message", "bound to n1");
    assert_int_equal(
        kube_request(a, "POST", "/api/v1/namespaces/default/events", NULL, ev, &rep, &err), 0);
    assert_int_equal(rep.status, 201);
    assert_true(json_equal(rep.body, ev));
    assert_string_equal(srv.last_ct, "application/json");
    /* compact, in the order it was built */
    const char *sent =
        "{\"kind\":\"Event\",\"metadata\":{\"name\":\"e1\"},\"message\":\"bound to n1\"}";
    assert_string_equal(srv.last_body, sent);
    /* an Event's own message is not a Status message: the body's first line */
    assert_string_equal(kube_reply_message(&rep), sent);
    json_decref(ev);

    json_t *patch = json_pack("{s:{s:{s:s}}}", "metadata", "labels", "gpuorch.io/leaf", "l1");
    assert_int_equal(kube_request(a, "PATCH", "/api/v1/nodes/n1", "application/merge-patch+json",
                                  patch, &rep, &err),
                     0);
    assert_int_equal(rep.status, 200);
    assert_string_equal(srv.last_ct, "application/merge-patch+json");
    json_decref(patch);

    assert_int_equal(kube_request(a, "GET", "/api/v1/secrets", NULL, NULL, &rep, &err), 0);
    assert_int_equal(rep.status, 403);
    assert_string_equal(kube_reply_message(&rep),
                        "secrets is forbidden: User \"gpuorch\" cannot list resource \"secrets\"");
    assert_int_equal(kube_request(a, "GET", "/oops", NULL, NULL, &rep, &err), 0);
    assert_int_equal(rep.status, 500);
    assert_null(rep.body);
    assert_string_equal(kube_reply_message(&rep), "upstream broke");
    assert_int_equal(kube_request(a, "DELETE", "/empty", NULL, NULL, &rep, &err), 0);
    assert_int_equal(rep.status, 503);
    assert_string_equal(kube_reply_message(&rep), "HTTP 503");
    kube_reply_free(&rep);
    kube_api_free(a);

    /* a wrong token */
    char server[64];
    snprintf(server, sizeof(server), "http://127.0.0.1:%u", srv.port);
    KubeConfig cfg = {.server = server, .token = "wrong"};
    assert_int_equal(kube_api_new(&cfg, 5000, &a), 0);
    Items it = {0};
    assert_int_equal(kube_list(a, "/api/v1/pods", collect_item, &it, NULL, &err), -EACCES);
    assert_non_null(strstr(buf_str(&err), "Unauthorized"));
    kube_api_free(a);
    buf_free(&err);
}

typedef struct Events {
    char types[8][16];
    char rvs[8][16];
    size_t n;
    volatile bool *stop_on_first;
} Events;

static int collect_event(void *arg, const char *type, json_t *obj)
{
    Events *e = arg;
    if (e->n == ARRAY_SIZE(e->types))
        return -E2BIG;
    const char *rv =
        json_string_value(json_object_get(json_object_get(obj, "metadata"), "resourceVersion"));
    snprintf(e->types[e->n], sizeof(e->types[0]), "%s", type);
    snprintf(e->rvs[e->n], sizeof(e->rvs[0]), "%s", rv ? rv : "");
    e->n++;
    if (e->stop_on_first)
        *e->stop_on_first = true;
    return 0;
}

static void test_watch(void **state)
{
    KubeApi *a = client(0, 0);
    Buf err = {0};
    Events ev = {0};
    char *rv = strdup("11");
    volatile bool stop = false;
    int r = kube_watch(a, "/api/v1/pods", &rv, 5, collect_event, &ev, &stop, &err);
    if (r < 0)
        fail_msg("%d: %s", r, buf_str(&err));
    assert_int_equal(ev.n, 3);
    assert_string_equal(ev.types[0], "ADDED");
    assert_string_equal(ev.types[1], "MODIFIED");
    assert_string_equal(ev.rvs[1], "13");
    assert_string_equal(ev.types[2], "BOOKMARK");
    assert_string_equal(rv, "20"); /* the bookmark's version */

    /* the ERROR event with code 410 after one event: that event's version kept */
    free(rv);
    rv = strdup("5");
    ev.n = 0;
    assert_int_equal(kube_watch(a, "/api/v1/pods", &rv, 5, collect_event, &ev, NULL, &err),
                     -ESTALE);
    assert_int_equal(ev.n, 1);
    assert_string_equal(rv, "6");
    assert_non_null(strstr(buf_str(&err), "too old resource version"));

    /* HTTP 410 */
    free(rv);
    rv = strdup("gone");
    ev.n = 0;
    buf_reset(&err);
    assert_int_equal(kube_watch(a, "/api/v1/pods", &rv, 5, collect_event, &ev, NULL, &err),
                     -ESTALE);
    assert_int_equal(ev.n, 0);
    assert_non_null(strstr(buf_str(&err), "HTTP 410: too old resource version"));
    assert_string_equal(rv, "gone");

    /* a line that is not JSON */
    free(rv);
    rv = strdup("junk");
    ev.n = 0;
    buf_reset(&err);
    assert_int_equal(kube_watch(a, "/api/v1/pods", &rv, 5, collect_event, &ev, NULL, &err), -EIO);
    assert_int_equal(ev.n, 1);
    assert_non_null(strstr(buf_str(&err), "not JSON"));

    /* stop: set by the first event, while the server sends nothing more */
    free(rv);
    rv = strdup("idle");
    ev = (Events){.stop_on_first = &stop};
    int64_t t0 = now_ms();
    assert_int_equal(kube_watch(a, "/api/v1/pods", &rv, 5, collect_event, &ev, &stop, &err), 0);
    assert_int_equal(ev.n, 1);
    assert_string_equal(rv, "31");
    assert_true(now_ms() - t0 < 1500);

    /* and the handle still works after the aborted stream */
    free(rv);
    rv = strdup("11");
    ev = (Events){0};
    stop = false;
    assert_int_equal(kube_watch(a, "/api/v1/pods", &rv, 5, collect_event, &ev, &stop, &err), 0);
    assert_int_equal(ev.n, 3);
    free(rv);
    buf_free(&err);
    kube_api_free(a);
}

static void test_refused(void **state)
{
    /* a port that was free a moment ago */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sin);
    assert_int_equal(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sin, &len), 0);
    close(fd);
    char server[64];
    snprintf(server, sizeof(server), "http://127.0.0.1:%u", ntohs(sin.sin_port));
    KubeConfig cfg = {.server = server};
    KubeApi *a = NULL;
    assert_int_equal(kube_api_new(&cfg, 2000, &a), 0);
    KubeReply rep = {0};
    Buf err = {0};
    assert_int_equal(kube_request(a, "GET", "/version", NULL, NULL, &rep, &err), -ECONNREFUSED);
    assert_non_null(strstr(buf_str(&err), server));
    char *rv = NULL;
    assert_int_equal(kube_watch(a, "/api/v1/pods", &rv, 5, collect_event, NULL, NULL, &err),
                     -ECONNREFUSED);
    assert_null(rv);
    kube_reply_free(&rep);
    buf_free(&err);
    kube_api_free(a);
}

static void test_rate_limit(void **state)
{
    /* 100 requests/s, 2 at once: six requests, the last four 10 ms apart */
    KubeApi *a = client(100, 2);
    KubeReply rep = {0};
    Buf err = {0};
    int64_t t0 = now_ms();
    for (int i = 0; i < 6; i++)
        assert_int_equal(kube_request(a, "GET", "/api/v1/secrets", NULL, NULL, &rep, &err), 0);
    int64_t took = now_ms() - t0;
    if (took < 38)
        fail_msg("six requests at 100/s with a burst of 2 took %lld ms", (long long)took);
    kube_reply_free(&rep);
    buf_free(&err);
    kube_api_free(a);
}

static char *slurp(const char *name)
{
    FILE *f = fopen(path_of(name), "r");
    if (!f)
        return NULL;
    char *text = calloc(1, 8192);
    if (text)
        text[fread(text, 1, 8191, f)] = '\0';
    fclose(f);
    return text;
}

/* TLS: the CA from memory verifies the server, a client certificate and key from memory
 * are offered, and without the CA (the system's roots) the handshake fails. */
static void test_tls(void **state)
{
    if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES)
        skip();
    char cmd[512];
    snprintf(cmd, sizeof(cmd),
             "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
             "-keyout '%s/tls.key' -out '%s/tls.crt' -subj /CN=localhost "
             "-addext subjectAltName=IP:127.0.0.1 -days 1 >/dev/null 2>&1",
             dir, dir);
    if (system(cmd) != 0)
        skip(); /* no openssl command */
    char *crt = slurp("tls.crt"), *key = slurp("tls.key");
    assert_non_null(crt);
    assert_non_null(key);
    struct sockaddr_in loopback = {.sin_family = AF_INET,
                                   .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct MHD_Daemon *d =
        MHD_start_daemon(MHD_USE_TLS | MHD_USE_INTERNAL_POLLING_THREAD, 0, NULL, NULL, on_request,
                         NULL, MHD_OPTION_NOTIFY_COMPLETED, on_done, NULL, MHD_OPTION_HTTPS_MEM_KEY,
                         key, MHD_OPTION_HTTPS_MEM_CERT, crt, MHD_OPTION_HTTPS_MEM_TRUST, crt,
                         MHD_OPTION_SOCK_ADDR, &loopback, MHD_OPTION_END);
    assert_non_null(d);
    char server[64];
    snprintf(server, sizeof(server), "https://127.0.0.1:%u",
             MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT)->port);
    KubeConfig cfg = {
        .server = server, .token = "s3cret", .ca_pem = crt, .cert_pem = crt, .key_pem = key};
    KubeApi *a = NULL;
    KubeReply rep = {0};
    Buf err = {0};
    assert_int_equal(kube_api_new(&cfg, 5000, &a), 0);
    int r = kube_request(a, "GET", "/api/v1/secrets", NULL, NULL, &rep, &err);
    if (r < 0)
        fail_msg("%s", buf_str(&err));
    assert_int_equal(rep.status, 403);
    kube_api_free(a);

    /* the key is read from memory: not a key, no handshake */
    cfg.key_pem = crt;
    assert_int_equal(kube_api_new(&cfg, 5000, &a), 0);
    assert_int_equal(kube_request(a, "GET", "/api/v1/secrets", NULL, NULL, &rep, &err), -EIO);
    kube_api_free(a);

    cfg.ca_pem = cfg.cert_pem = cfg.key_pem = NULL;
    assert_int_equal(kube_api_new(&cfg, 5000, &a), 0);
    assert_int_equal(kube_request(a, "GET", "/api/v1/secrets", NULL, NULL, &rep, &err), -EIO);
    assert_non_null(strstr(buf_str(&err), "certificate"));
    kube_api_free(a);

    cfg.insecure = true;
    assert_int_equal(kube_api_new(&cfg, 5000, &a), 0);
    assert_int_equal(kube_request(a, "GET", "/api/v1/secrets", NULL, NULL, &rep, &err), 0);
    assert_int_equal(rep.status, 403);
    kube_api_free(a);

    kube_reply_free(&rep);
    buf_free(&err);
    MHD_stop_daemon(d);
    free(crt);
    free(key);
}

static int setup(void **state)
{
    if (!mkdtemp(dir))
        return -1;
    pthread_mutex_init(&srv.lock, NULL);
    struct sockaddr_in loopback = {.sin_family = AF_INET,
                                   .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    /* a thread per connection: the streams sleep between their chunks */
    srv.d = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                                 MHD_USE_ERROR_LOG,
                             0, NULL, NULL, on_request, NULL, MHD_OPTION_NOTIFY_COMPLETED, on_done,
                             NULL, MHD_OPTION_NOTIFY_CONNECTION, on_connection, NULL,
                             MHD_OPTION_SOCK_ADDR, &loopback, MHD_OPTION_END);
    if (!srv.d)
        return -1;
    srv.port = MHD_get_daemon_info(srv.d, MHD_DAEMON_INFO_BIND_PORT)->port;
    return 0;
}

static int teardown(void **state)
{
    srv.quit = true;
    MHD_stop_daemon(srv.d);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_current_context),
        cmocka_unit_test(test_config_named_context_files),
        cmocka_unit_test(test_config_data_and_insecure),
        cmocka_unit_test(test_config_errors),
        cmocka_unit_test(test_config_in_cluster),
        cmocka_unit_test(test_query_escape),
        cmocka_unit_test(test_lines_every_split),
        cmocka_unit_test(test_lines_stop),
        cmocka_unit_test(test_bucket),
        cmocka_unit_test(test_list_pages),
        cmocka_unit_test(test_request),
        cmocka_unit_test(test_watch),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_rate_limit),
        cmocka_unit_test(test_tls),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
