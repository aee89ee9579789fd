/* bench_api.c: load against a running gpuorch server through its HTTP API.
 *
 *   bench_api submit  URL TOKEN THREADS SECONDS TEAM   sustained submissions per second:
 *       THREADS clients each POST one single-GPU job at a time, for SECONDS; every
 *       reply must be 201 (each is durable in the store when it comes).
 *   bench_api latency URL TOKEN COUNT TEAM             submit-to-start on an idle cluster:
 *       COUNT jobs one after the other, each after a random pause of up to a second (so
 *       that submissions fall at any phase of the agents' heartbeats); each is waited
 *       for until it runs, and its latency is its run's start (the worker process
 *       start the agent reports) minus its submission, both as the server recorded
 *       them. Prints p50/p95/p99/max.
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
#include <unistd.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

typedef struct Load {
    const char *url, *token, *team;
    double until;
    atomic_long ok, failed;
} Load;

static void *submitter(void *arg)
{
    Load *l = arg;
    HttpClient *h;
    if (http_client_new(l->url, l->token, 10000, &h) < 0) {
        atomic_fetch_add(&l->failed, 1);
        return NULL;
    }
    char body[256];
    snprintf(body, sizeof(body),
             "{\"name\": \"bench\", \"team\": \"%s\", \"gpus\": 1, \"command\": [\"true\"]}",
             l->team);
    HttpReply r = {0};
    Buf err = {0};
    while (now_s() < l->until) {
        int rc = http_request(h, "POST", "/api/v1/jobs", "application/json", body, strlen(body), &r,
                              &err);
        if (rc == 0 && r.status == 201) {
            atomic_fetch_add(&l->ok, 1);
        } else {
            if (atomic_fetch_add(&l->failed, 1) == 0)
                fprintf(stderr, "bench_api: submit failed: %s%ld %s\n", buf_str(&err), r.status,
                        buf_str(&r.body));
            buf_reset(&err);
        }
    }
    http_reply_free(&r);
    buf_free(&err);
    http_client_free(h);
    return NULL;
}

static int run_submit(const char *url, const char *token, int threads, double seconds,
                      const char *team)
{
    Load l = {.url = url, .token = token, .team = team, .until = now_s() + seconds};
    pthread_t *t = calloc((size_t)threads, sizeof(*t));
    double t0 = now_s();
    for (int i = 0; i < threads; i++)
        pthread_create(&t[i], NULL, submitter, &l);
    for (int i = 0; i < threads; i++)
        pthread_join(t[i], NULL);
    double dt = now_s() - t0;
    free(t);
    long ok = atomic_load(&l.ok), failed = atomic_load(&l.failed);
    printf("submit: %d clients, %.1f s: %ld jobs accepted (201), %ld failed: %.0f jobs/s\n",
           threads, dt, ok, failed, ok / dt);
    return failed ? 1 : 0;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static int run_latency(const char *url, const char *token, int count, const char *team)
{
    HttpClient *h;
    if (http_client_new(url, token, 10000, &h) < 0)
        return 1;
    int64_t *lat = calloc((size_t)count, sizeof(*lat));
    HttpReply r = {0};
    Buf err = {0};
    char body[256], path[64];
    snprintf(body, sizeof(body),
             "{\"name\": \"latency\", \"team\": \"%s\", \"gpus\": 1, \"command\": [\"sleep\", "
             "\"2\"]}",
             team);
    int rc = 0;
    /* arrivals at a random phase of the agents' heartbeats, as real ones come */
    unsigned seed = 1;
    for (int i = 0; i < count && !rc; i++) {
        usleep((useconds_t)(rand_r(&seed) % 1000) * 1000);
        if (http_request(h, "POST", "/api/v1/jobs", "application/json", body, strlen(body), &r,
                         &err) < 0 ||
            r.status != 201) {
            fprintf(stderr, "bench_api: submit failed: %s%s\n", buf_str(&err), buf_str(&r.body));
            rc = 1;
            break;
        }
        json_t *reply = json_loads(buf_str(&r.body), 0, NULL);
        long long id = json_integer_value(json_object_get(reply, "id"));
        json_decref(reply);
        snprintf(path, sizeof(path), "/api/v1/jobs/%lld", id);
        double give_up = now_s() + 30;
        for (;;) {
            if (http_request(h, "GET", path, NULL, NULL, 0, &r, &err) < 0 || r.status != 200) {
                rc = 1;
                break;
            }
            json_t *j = json_loads(buf_str(&r.body), 0, NULL);
            json_t *start = json_object_get(j, "start_ms");
            if (json_is_integer(start)) {
                lat[i] =
                    json_integer_value(start) - json_integer_value(json_object_get(j, "submit_ms"));
                json_decref(j);
                break;
            }
            json_decref(j);
            if (now_s() > give_up) {
                fprintf(stderr, "bench_api: job %lld did not start within 30 s\n", id);
                rc = 1;
                break;
            }
            usleep(20000);
        }
    }
    if (!rc) {
        qsort(lat, (size_t)count, sizeof(*lat), cmp_i64);
        int64_t p50 = lat[count / 2], p95 = lat[(count * 95 - 1) / 100],
                p99 = lat[(count * 99 - 1) / 100], max = lat[count - 1];
        printf("latency: %d jobs on an idle cluster, submit to worker start: p50 %lld ms, p95 "
               "%lld ms, p99 %lld ms, max %lld ms\n",
               count, (long long)p50, (long long)p95, (long long)p99, (long long)max);
    }
    free(lat);
    http_reply_free(&r);
    buf_free(&err);
    http_client_free(h);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc == 7 && !strcmp(argv[1], "submit"))
        return run_submit(argv[2], argv[3], atoi(argv[4]), atof(argv[5]), argv[6]);
    if (argc == 6 && !strcmp(argv[1], "latency"))
        return run_latency(argv[2], argv[3], atoi(argv[4]), argv[5]);
    fprintf(stderr, "usage: bench_api submit URL TOKEN THREADS SECONDS TEAM\n"
                    "       bench_api latency URL TOKEN COUNT TEAM\n");
    return 2;
}
