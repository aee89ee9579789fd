/* bench_store.c: durable submissions per second through the store: N threads, each
 * making single-job store_write calls (a job and its submit event, as the server writes
 * a submission), every call waiting until its commit is durable. The group commit lets
 * concurrent calls share one fsync (SQLite) or one WAL flush (PostgreSQL), so the rate
 * grows with the threads.
 *
 * usage: bench_store [THREADS] [WRITES_PER_THREAD] [DIR | URL]   (defaults 8 5000 /var/tmp)
 * DIR: a SQLite database made in it (on the disk to be measured, not a tmpfs), removed
 * after. URL: postgres://... (an empty database: its jobs are counted before and after;
 * bench/ha.sh starts a throwaway server), or sqlite:PATH. */
#include "store/store.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char spec_json[] =
    "{\"name\": \"train-0\", \"team\": \"research\", \"project\": \"vision\", \"kind\": "
    "\"training\", \"priority\": \"normal\", \"workers\": 2, \"gpus\": 4, \"gpu_models\": "
    "[\"H100-80GB-SXM5\"], \"preemptible\": true, \"checkpoint\": {\"interval\": \"30m\"}, "
    "\"command\": [\"torchrun\", \"train.py\"], \"duration_estimate\": \"6h\"}";

typedef struct Worker {
    Store *s;
    int k, n;
    int failed;
    pthread_barrier_t *go;
} Worker;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *work(void *arg)
{
    Worker *w = arg;
    pthread_barrier_wait(w->go);
    for (int i = 0; i < w->n; i++) {
        char name[32];
        snprintf(name, sizeof(name), "bench-%d-%d", w->k, i);
        StoreJob j = {.name = name,
                      .team = (char *)"research",
                      .project = (char *)"vision",
                      .spec_json = (char *)spec_json,
                      .owner = 1,
                      .priority = 2,
                      .submit_ms = i,
                      .start_ms = -1,
                      .end_ms = -1,
                      .exit_code = -1,
                      .checkpoint_ms = -1};
        StoreEvent e = {.job = -1, .t_ms = i, .type = "submit"};
        Buf err = {0};
        if (store_write(w->s,
                        &(StoreWrite){.inserts = &j, .n_inserts = 1, .events = &e, .n_events = 1},
                        &err) < 0) {
            if (!w->failed++)
                fprintf(stderr, "bench_store: %s\n", buf_str(&err));
        }
        buf_free(&err);
    }
    return NULL;
}

static int count_job(void *arg, StoreJob *j)
{
    ++*(long *)arg;
    store_job_free(j);
    return 0;
}

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 8;
    int per = argc > 2 ? atoi(argv[2]) : 5000;
    const char *base = argc > 3 ? argv[3] : "/var/tmp";
    if (threads < 1 || threads > 1024 || per < 1) {
        fprintf(stderr, "usage: bench_store [THREADS 1-1024] [WRITES_PER_THREAD] [DIR | URL]\n");
        return 2;
    }
    bool is_url = strncmp(base, "postgres://", 11) == 0 ||
                  strncmp(base, "postgresql://", 13) == 0 || strncmp(base, "sqlite:", 7) == 0;
    bool pg = is_url && strncmp(base, "sqlite:", 7) != 0;
    char dir[512] = "", path[600];
    if (is_url) {
        snprintf(path, sizeof(path), "%s", base);
    } else {
        snprintf(dir, sizeof(dir), "%s/bench-store-XXXXXX", base);
        if (!mkdtemp(dir)) {
            fprintf(stderr, "bench_store: %s: %s\n", dir, strerror(errno));
            return 1;
        }
        snprintf(path, sizeof(path), "%s/state.db", dir);
    }
    Store *s;
    Buf err = {0};
    if (store_open(path, &s, &err) < 0) {
        fprintf(stderr, "bench_store: %s\n", buf_str(&err));
        return 1;
    }
    long before = 0;
    store_jobs_load(s, count_job, &before);
    Worker *w = calloc((size_t)threads, sizeof(*w));
    pthread_t *t = calloc((size_t)threads, sizeof(*t));
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, (unsigned)threads + 1);
    for (int k = 0; k < threads; k++) {
        w[k] = (Worker){.s = s, .k = k, .n = per, .go = &go};
        pthread_create(&t[k], NULL, work, &w[k]);
    }
    pthread_barrier_wait(&go);
    double t0 = now_s();
    int failed = 0;
    for (int k = 0; k < threads; k++) {
        pthread_join(t[k], NULL);
        failed += w[k].failed;
    }
    double dt = now_s() - t0;
    long stored = 0;
    store_jobs_load(s, count_job, &stored);
    stored -= before;
    printf("store: %d threads x %d single-job writes: %.0f jobs/s (%s; %ld stored, %d failed, "
           "%.2f s)\n",
           threads, per, (double)threads * per / dt,
           pg ? "postgresql, synchronous_commit=on" : "sqlite WAL, synchronous=FULL", stored,
           failed, dt);
    store_close(s);
    if (!is_url) {
        const char *suffix[] = {"", "-wal", "-shm"};
        for (int i = 0; i < 3; i++) {
            char p[620];
            snprintf(p, sizeof(p), "%s%s", path, suffix[i]);
            unlink(p);
        }
        rmdir(dir);
    }
    pthread_barrier_destroy(&go);
    free(w);
    free(t);
    buf_free(&err);
    return failed || stored != (long)threads * per;
}
