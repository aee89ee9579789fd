/* bench_history.c: a server's speed as its history grows (bench/RESULTS.md section 5).
 *
 *   bench_history URL TOKEN PID THREADS TOTAL ROUND TEAM
 *
 * THREADS clients each submit one single-GPU job at a time (every reply must be 201:
 * durable when it comes) and cancel it at once (200: durable too), leaving one in 500
 * pending, until TOTAL jobs are stored: the store fills with ended jobs, as a cluster's
 * does, while the live queue stays at what users leave waiting. After every ROUND
 * jobs it prints that round's submissions per second, the jobs stored and the server's
 * resident memory (VmRSS of process PID). At the end, 200 requests each, one after the
 * other: GET /api/v1/jobs?state=active (the live queue) and GET /metrics, p50 and p99.
 *
 * Exit 1 when a request fails, so a broken server cannot produce a figure. */
#include "net/http_client.h"

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define KEEP_EVERY 500 /* one job in this many is left pending */
#define PROBES     200

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

typedef struct History {
    const char *url, *token, *team;
    long total;
    atomic_long taken; /* jobs handed to clients to submit */
    atomic_long stored;
    atomic_long failed;
} History;

static void *client(void *arg)
{
    History *h = arg;
    HttpClient *c;
    if (http_client_new(h->url, h->token, 30000, &c) < 0) {
        atomic_fetch_add(&h->failed, 1);
        return NULL;
    }
    char body[256], path[64];
    snprintf(body, sizeof(body),
             "{\"name\": \"history\", \"team\": \"%s\", \"gpus\": 1, \"command\": [\"true\"]}",
             h->team);
    HttpReply r = {0};
    Buf err = {0};
    long n;
    while ((n = atomic_fetch_add(&h->taken, 1)) < h->total && !atomic_load(&h->failed)) {
        if (http_request(c, "POST", "/api/v1/jobs", "application/json", body, strlen(body), &r,
                         &err) < 0 ||
            r.status != 201) {
            fprintf(stderr, "bench_history: submit failed: %s%ld %s\n", buf_str(&err), r.status,
                    buf_str(&r.body));
            atomic_fetch_add(&h->failed, 1);
            break;
        }
        atomic_fetch_add(&h->stored, 1);
        if (n % KEEP_EVERY == 0)
            continue;
        json_t *reply = json_loads(buf_str(&r.body), 0, NULL);
        long long id = json_integer_value(json_object_get(reply, "id"));
        json_decref(reply);
        snprintf(path, sizeof(path), "/api/v1/jobs/%lld", id);
        if (http_request(c, "DELETE", path, NULL, NULL, 0, &r, &err) < 0 || r.status != 200) {
            fprintf(stderr, "bench_history: cancel of job %lld failed: %s%ld %s\n", id,
                    buf_str(&err), r.status, buf_str(&r.body));
            atomic_fetch_add(&h->failed, 1);
            break;
        }
    }
    http_reply_free(&r);
    buf_free(&err);
    http_client_free(c);
    return NULL;
}

/* The resident memory of process pid in MB, -1 when unknown. */
static double rss_mb(const char *pid)
{
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%s/status", pid);
    FILE *f = fopen(path, "r");
    double kb = -1;
    while (f && fgets(line, sizeof(line), f))
        if (!strncmp(line, "VmRSS:", 6))
            kb = strtod(line + 6, NULL);
    if (f)
        fclose(f);
    return kb < 0 ? -1 : kb / 1024;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* PROBES requests of path, one after the other: p50 and p99 in ms. */
static int probe(const char *url, const char *token, const char *path)
{
    HttpClient *c;
    if (http_client_new(url, token, 30000, &c) < 0)
        return 1;
    double ms[PROBES];
    HttpReply r = {0};
    Buf err = {0};
    int rc = 0;
    size_t bytes = 0;
    for (int i = 0; i < PROBES && !rc; i++) {
        double t0 = now_s();
        if (http_request(c, "GET", path, NULL, NULL, 0, &r, &err) < 0 || r.status != 200) {
            fprintf(stderr, "bench_history: GET %s failed: %s%ld\n", path, buf_str(&err), r.status);
            rc = 1;
        }
        ms[i] = (now_s() - t0) * 1000;
        bytes = r.body.len;
    }
    if (!rc) {
        qsort(ms, PROBES, sizeof(*ms), cmp_d);
        printf("GET %s: %d requests, p50 %.1f ms, p99 %.1f ms (%zu bytes)\n", path, PROBES,
               ms[PROBES / 2], ms[(PROBES * 99 - 1) / 100], bytes);
    }
    http_reply_free(&r);
    buf_free(&err);
    http_client_free(c);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc != 8) {
        fprintf(stderr, "usage: bench_history URL TOKEN PID THREADS TOTAL ROUND TEAM\n");
        return 2;
    }
    History h = {.url = argv[1], .token = argv[2], .team = argv[7], .total = atol(argv[5])};
    const char *pid = argv[3];
    int threads = atoi(argv[4]);
    long round = atol(argv[6]);
    if (threads < 1 || h.total < 1 || round < 1) {
        fprintf(stderr, "bench_history: THREADS, TOTAL and ROUND must be above 0\n");
        return 2;
    }
    pthread_t *t = calloc((size_t)threads, sizeof(*t));
    if (!t)
        return 1;
    double t0 = now_s(), last = t0;
    long last_n = 0;
    for (int i = 0; i < threads; i++)
        pthread_create(&t[i], NULL, client, &h);
    printf("round  jobs stored  submissions/s  server RSS MB\n");
    for (int k = 1; last_n < h.total && !atomic_load(&h.failed); k++) {
        long goal = k * round < h.total ? k * round : h.total;
        while (atomic_load(&h.stored) < goal && !atomic_load(&h.failed) &&
               atomic_load(&h.taken) < h.total + threads) {
            struct timespec ts = {0, 20 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
        if (atomic_load(&h.failed))
            break;
        double at = now_s();
        long n = atomic_load(&h.stored);
        printf("%5d  %11ld  %13.0f  %13.0f\n", k, n, (n - last_n) / (at - last), rss_mb(pid));
        fflush(stdout);
        last = at;
        last_n = n;
    }
    for (int i = 0; i < threads; i++)
        pthread_join(t[i], NULL);
    free(t);
    if (atomic_load(&h.failed))
        return 1;
    printf("all: %ld jobs in %.0f s, %ld left pending; server RSS %.0f MB\n", last_n, now_s() - t0,
           (h.total + KEEP_EVERY - 1) / KEEP_EVERY, rss_mb(pid));
    return probe(h.url, h.token, "/api/v1/jobs?state=active") || probe(h.url, h.token, "/metrics");
}
