/* bench_place.c: placement decisions per second on a large cluster with a mixed
 * stream of jobs (whole GPUs, gangs, MIG profiles, GPU memory, MPS shares, CPU-only),
 * with departures so the cluster stays busy: once allocation passes a high-water mark
 * the oldest placements leave. A decision is one place_job call, placed or not. Every
 * job is preemptible and checkpoints, so it may use every node, spot included.
 *
 * usage: bench_place CLUSTER.yaml [JOBS] [POLICY] [SEED] */
#include "core/place.h"
#include "spec/spec.h"
#include "util/rng.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LIVE_MAX 65536

typedef struct Shape {
    const char *label;
    double weight;
    JobSpec spec;
} Shape;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void shape(Shape *s, const char *label, double weight, ReqKind kind, unsigned gpus,
                  const char *mig, uint64_t mem_mib, unsigned milli, unsigned workers)
{
    s->label = label;
    s->weight = weight;
    job_spec_init(&s->spec);
    s->spec.req = (uint8_t)kind;
    s->spec.gpus = (uint16_t)gpus;
    s->spec.mig = mig ? strdup(mig) : NULL;
    s->spec.gpu_memory_mib = mem_mib;
    s->spec.fraction_milli = (uint16_t)milli;
    s->spec.workers = workers;
    s->spec.cpu_milli = 4000 * (gpus ? gpus : 1);
    s->spec.memory_mib = 16384 * (gpus ? gpus : 1);
    /* preemptible and checkpointing, so that every tier is open to the stream (spot only
     * takes work that saves itself): the nodes it may use are the cluster's */
    s->spec.preemptible = true;
    s->spec.checkpoint_interval_ms = 30 * 60 * 1000;
    if (workers > 1) {
        s->spec.scope = SCOPE_LEAF;
        s->spec.scope_required = true;
    }
}

int main(int argc, char **argv)
{
    const char *cluster_path = argc > 1 ? argv[1] : "examples/cluster-large.yaml";
    long njobs = argc > 2 ? atol(argv[2]) : 100000;
    const char *policy_name = argc > 3 ? argv[3] : "gpuorch";
    uint64_t seed = argc > 4 ? strtoull(argv[4], NULL, 10) : 42;

    Buf err = {0};
    Cluster *c = NULL;
    if (spec_load_cluster(cluster_path, &c, &err) < 0) {
        fprintf(stderr, "bench_place: %s\n", buf_str(&err));
        return 2;
    }
    const Policy *policy = policy_find(policy_name);
    if (!policy) {
        fprintf(stderr, "bench_place: unknown policy '%s'\n", policy_name);
        return 2;
    }

    Shape shapes[10];
    size_t ns = 0;
    shape(&shapes[ns++], "1 GPU", 0.20, REQ_GPUS, 1, NULL, 0, 0, 1);
    shape(&shapes[ns++], "2 GPUs", 0.06, REQ_GPUS, 2, NULL, 0, 0, 1);
    shape(&shapes[ns++], "8 GPUs", 0.06, REQ_GPUS, 8, NULL, 0, 0, 1);
    shape(&shapes[ns++], "4x8 GPU gang, leaf", 0.02, REQ_GPUS, 8, NULL, 0, 0, 4);
    shape(&shapes[ns++], "mig 1g.10gb", 0.18, REQ_MIG, 0, "1g.10gb", 0, 0, 1);
    shape(&shapes[ns++], "mig 3g.40gb", 0.06, REQ_MIG, 0, "3g.40gb", 0, 0, 1);
    shape(&shapes[ns++], "18 GiB memory", 0.14, REQ_MEMORY, 0, NULL, 18432, 0, 1);
    shape(&shapes[ns++], "0.25 share", 0.14, REQ_FRACTION, 0, NULL, 0, 250, 1);
    shape(&shapes[ns++], "cpu only", 0.04, REQ_NONE, 0, NULL, 0, 0, 1);
    shape(&shapes[ns++], "0.5 share", 0.10, REQ_FRACTION, 0, NULL, 0, 500, 1);

    Request req[10];
    Mix mix = {.e = calloc(ns, sizeof(MixEntry)), .n = 0};
    double wsum = 0;
    for (size_t i = 0; i < ns; i++) {
        Buf why = {0};
        if (request_from_job(c, &shapes[i].spec, &req[i], &why) < 0) {
            fprintf(stderr, "bench_place: shape '%s': %s\n", shapes[i].label, buf_str(&why));
            return 2;
        }
        req[i].shape = (int32_t)i;
        buf_free(&why);
        wsum += shapes[i].weight;
        if (req[i].workers == 1) {
            mix.e[mix.n].r = req[i];
            mix.e[mix.n++].weight = shapes[i].weight;
        }
    }
    for (size_t i = 0; i < mix.n; i++)
        mix.e[i].weight /= wsum;

    Rng rng;
    rng_seed(&rng, seed);
    PlaceCtx ctx;
    ScoreCache cache;
    if (place_ctx_init(&ctx, c, policy, &rng, NULL, &mix) < 0 ||
        score_cache_init(&cache, c->n_nodes, ns) < 0) {
        fprintf(stderr, "bench_place: out of memory\n");
        return 1;
    }
    ctx.cache = &cache;

    Placement *live = calloc(LIVE_MAX, sizeof(*live));
    size_t head = 0, tail = 0; /* live ring: [tail, head) */
    uint64_t capacity = (uint64_t)c->n_gpus * GPU_UNITS;
    long placed = 0, pending = 0;
    Buf why = {0};
    double alloc_sum = 0;

    double t0 = now_s();
    for (long j = 0; j < njobs; j++) {
        double u = rng_unit(&rng) * wsum, acc = 0;
        size_t k = 0;
        for (; k + 1 < ns; k++) {
            acc += shapes[k].weight;
            if (u < acc)
                break;
        }
        buf_reset(&why);
        Placement *slot = &live[head % LIVE_MAX];
        int r = place_job(&ctx, c, &req[k], slot, &why);
        if (r == 1) {
            placed++;
            head++;
        } else {
            pending++;
        }
        /* departures keep allocation near 85%, and the live ring bounded */
        while (tail < head &&
               (c->used_units > capacity * 85 / 100 || head - tail >= LIVE_MAX - 1)) {
            place_release(c, &live[tail % LIVE_MAX]);
            tail++;
        }
        alloc_sum += (double)c->used_units / capacity;
    }
    double dt = now_s() - t0;

    printf("cluster: %s (%zu nodes, %zu GPUs)\n", cluster_path, c->n_nodes, c->n_gpus);
    printf("policy: %s, seed %llu\n", policy->name, (unsigned long long)seed);
    printf("jobs: %ld (placed %ld, not placed %ld)\n", njobs, placed, pending);
    printf("mean GPU allocation during the run: %.1f%%\n", 100 * alloc_sum / njobs);
    printf("time: %.3f s\n", dt);
    printf("decisions per second: %.0f\n", njobs / dt);

    for (size_t i = 0; i < LIVE_MAX; i++)
        placement_free(&live[i]);
    free(live);
    buf_free(&why);
    score_cache_free(&cache);
    place_ctx_free(&ctx);
    free(mix.e);
    for (size_t i = 0; i < ns; i++)
        job_spec_free(&shapes[i].spec);
    buf_free(&err);
    cluster_free(c);
    return 0;
}
