/* act.c: from the server's state to writes to the API server. The actuator wakes after
 * every scheduling cycle and every batch of pod events and, under the server's lock,
 * (1) submits the groups that have the pods to start, (2) for each run the core started,
 * gives each worker a pod, asks the MIG manager for the layouts the placement needs and,
 * once they are in, binds, (3) evicts (or, for a cancel, deletes) the pods of runs being
 * stopped, and (4) writes the reason of each pod that waits. The writes themselves are
 * queued to a few writer threads with their own API clients, binds and evictions ahead
 * of reasons, and their results come back under the lock. */
#include "kube/engine_int.h"

#include "util/log.h"
#include "util/macro.h"

#include <errno.h>
#include <search.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void kact_free(KAct *a)
{
    free(a->ns);
    free(a->pod);
    free(a->uid);
    free(a->node);
    free(a->text);
    free(a->body);
}

static int64_t clock_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void kact_kick(KubeEngine *e)
{
    e->work = true;
    pthread_cond_signal(&e->act_wake);
}

void kube_engine_after_cycle(void *engine)
{
    KubeEngine *e = engine;
    e->cycled = true;
    kact_kick(e);
}

/* Queue a write: binds, evictions and MIG changes go ahead of the reasons. */
static void push(KubeEngine *e, KAct *a)
{
    pthread_mutex_lock(&e->qlock);
    KActQueue *q = a->kind == KA_CONDITION ? &e->slow : &e->fast;
    if (GROW(q->a, q->cap, q->len + 1) < 0) {
        pthread_mutex_unlock(&e->qlock);
        kact_free(a);
        return;
    }
    q->a[q->len++] = *a;
    pthread_cond_signal(&e->qwake);
    pthread_mutex_unlock(&e->qlock);
}

static void push_pod(KubeEngine *e, KActKind kind, const KPod *kp, const char *node,
                     const char *text)
{
    KAct a = {.kind = (uint8_t)kind,
              .ns = strdup(kp->p.ns),
              .pod = strdup(kp->p.name),
              .uid = strdup(kp->uid),
              .node = node ? strdup(node) : NULL,
              .text = text ? strdup(text) : NULL,
              .grace_s = kp->p.grace_s};
    if (!a.ns || !a.pod || !a.uid || (node && !a.node) || (text && !a.text)) {
        kact_free(&a);
        return;
    }
    push(e, &a);
}

/* ---- (1) submissions ---- */

typedef struct Ready {
    KubeEngine *e;
    KGroup **g;
    size_t n, cap;
} Ready;

static void collect_ready(const void *node, VISIT v, void *arg)
{
    if (v != postorder && v != leaf)
        return;
    Ready *r = arg;
    KGroup *g = *(KGroup *const *)node;
    if (g->submitting || g->job || g->refused || !kgroup_free_pods(g))
        return;
    if (GROW(r->g, r->cap, r->n + 1) == 0)
        r->g[r->n++] = g;
}

static bool same_request(const JobSpec *a, const JobSpec *b)
{
    return a->req == b->req && a->gpus == b->gpus && a->gpu_memory_mib == b->gpu_memory_mib &&
           a->fraction_milli == b->fraction_milli && a->cpu_milli == b->cpu_milli &&
           a->memory_mib == b->memory_mib && !strcmp(a->mig ? a->mig : "", b->mig ? b->mig : "");
}

static void set_why(KGroup *g, const char *why)
{
    if (g->why && why && !strcmp(g->why, why))
        return;
    free(g->why);
    g->why = why ? strdup(why) : NULL;
}

/* An MPS replica's share: 1/replicas of a GPU, as the nodes that share say. */
static uint16_t replica_milli(const KubeEngine *e)
{
    for (size_t i = 0; i < e->n_nodes; i++)
        if (e->nodes[i].n.shared_replicas > 1)
            return (uint16_t)(1000 / e->nodes[i].n.shared_replicas);
    return 0;
}

/* The job the group's free pods make, or 1 with g->why set when they do not make one
 * yet (too few, a bad annotation, a namespace of no team). */
static int group_spec(KubeEngine *e, KGroup *g, JobSpec *ret)
{
    KPod *first = NULL;
    size_t n = 0;
    char why[512];
    for (size_t i = 0; i < g->n_pods; i++) {
        KPod *kp = g->pods[i];
        if (kp->p.deleting || kp->p.node || kp->bound || kp->binding || kp->rank >= 0 ||
            kp->p.phase != POD_PENDING)
            continue;
        if (kp->p.bad) {
            snprintf(why, sizeof(why), "gpuorch cannot read pod %s: %s", kp->p.name, kp->p.why);
            set_why(g, why);
            return 1;
        }
        if (first && !same_request(&first->p.spec, &kp->p.spec)) {
            snprintf(why, sizeof(why),
                     "the pods of %s ask for different resources (%s and %s): the workers of "
                     "one gang must be alike",
                     g->key, first->p.name, kp->p.name);
            set_why(g, why);
            return 1;
        }
        first = first ? first : kp;
        n++;
    }
    if (!first)
        return 1;
    uint32_t need = kgroup_min_member(e, g);
    if (!need) {
        snprintf(why, sizeof(why), "waiting for its PodGroup %s/%s", g->ns, g->name);
        set_why(g, why);
        return 1;
    }
    if (n < need) {
        snprintf(why, sizeof(why),
                 "waiting for the pods of PodGroup %s/%s: %zu of minMember %u are here", g->ns,
                 g->name, n, need);
        set_why(g, why);
        return 1;
    }
    if (cluster_find_team(e->s->c, g->ns) < 0) {
        snprintf(why, sizeof(why),
                 "namespace %s is no team's: gpuorch's config (ConfigMap gpuorch-config) needs "
                 "a team named %s",
                 g->ns, g->ns);
        set_why(g, why);
        return 1;
    }
    int r = job_spec_copy(&first->p.spec, ret);
    if (r < 0)
        return r;
    free(ret->name);
    free(ret->team);
    ret->name = strdup(g->key);
    ret->team = strdup(g->ns);
    ret->workers = (uint32_t)n;
    if (ret->req == REQ_FRACTION && !ret->fraction_milli)
        ret->fraction_milli = replica_milli(e);
    if (!ret->name || !ret->team) {
        job_spec_free(ret);
        return -ENOMEM;
    }
    return 0;
}

/* Submit the groups in one durable write; when the server refuses it (one bad job
 * refuses the lot), each alone, so that each refusal lands on its own pods. Lock held
 * on entry and exit; dropped around the submission. */
static void submit_ready(KubeEngine *e)
{
    if (!e->maybe_ready)
        return;
    e->maybe_ready = false;
    Ready rd = {.e = e};
    twalk_r(e->groups_by_key, collect_ready, &rd);
    JobList list = {0};
    KGroup **subs = rd.n ? calloc(rd.n, sizeof(*subs)) : NULL;
    size_t n = 0;
    for (size_t i = 0; subs && i < rd.n; i++) {
        JobSpec js;
        job_spec_init(&js);
        if (group_spec(e, rd.g[i], &js) != 0)
            continue;
        if (job_list_take(&list, &js) < 0) {
            job_spec_free(&js);
            break;
        }
        rd.g[i]->submitting = true;
        subs[n++] = rd.g[i];
    }
    free(rd.g);
    if (!n) {
        free(subs);
        job_list_free(&list);
        return;
    }
    int64_t *ids = calloc(n, sizeof(*ids));
    Caller engine = {.token_id = SERVER_ENGINE_CALLER, .role = ROLE_ADMIN, .user = "kubernetes"};
    pthread_mutex_unlock(&e->s->lock);
    Buf err = {0};
    int status = ids ? server_submit(e->s, &engine, &list, ids, &err) : 500;
    bool each = status != 201 && n > 1;
    char **whys = calloc(n, sizeof(*whys));
    for (size_t i = 0; each && whys && i < n; i++) {
        JobList one = {.jobs = &list.jobs[i], .n = 1, .cap = 1};
        buf_reset(&err);
        int st = server_submit(e->s, &engine, &one, &ids[i], &err);
        if (st != 201) {
            ids[i] = 0;
            whys[i] = strdup(buf_str(&err));
        }
    }
    if (!each && status != 201 && whys)
        whys[0] = strdup(buf_str(&err));
    buf_free(&err);
    server_lock(e->s);
    for (size_t i = 0; i < n; i++) {
        KGroup *g = subs[i];
        g->submitting = false;
        if (ids && ids[i] && (status == 201 || each)) {
            kgroup_set_job(e, g, ids[i]);
            set_why(g, NULL);
            e->submitted++;
        } else {
            /* refused: not offered again until a pod joins the group; the log says each
             * refusal once */
            const char *why = whys && whys[i] ? whys[i] : "the server refused it";
            bool news = !g->why || strcmp(g->why, why);
            set_why(g, why);
            g->refused = true;
            if (news)
                log_info("event=pod_group_refused group=%s reason=\"%s\"", g->key, g->why);
        }
        free(whys ? whys[i] : NULL);
    }
    free(whys);
    free(ids);
    free(subs);
    job_list_free(&list);
}

/* ---- (2) and (3): the runs ---- */

static KPod *pod_of_worker(KGroup *g, int32_t rank, uint32_t run)
{
    for (size_t i = 0; i < g->n_pods; i++)
        if (g->pods[i]->rank == rank && g->pods[i]->run == run)
            return g->pods[i];
    return NULL;
}

static KPod *take_free_pod(KGroup *g, int32_t rank, uint32_t run)
{
    for (size_t i = 0; i < g->n_pods; i++) {
        KPod *kp = g->pods[i];
        if (!kp->p.deleting && !kp->p.node && !kp->bound && !kp->binding && kp->rank < 0 &&
            kp->p.phase == POD_PENDING) {
            kp->rank = rank;
            kp->run = run;
            return kp;
        }
    }
    return NULL;
}

/* The run cannot start as placed: its workers are given up and the job requeued. */
static void run_fails(KubeEngine *e, KGroup *g, ServerJob *j, const char *why, Changes *ch)
{
    int64_t now = server_now_ms();
    /* workers whose pods were not bound never started; the stop evicts the bound ones */
    for (size_t w = 0; w < j->life.n_workers; w++) {
        LifeWorker *wr = &j->life.workers[w];
        KPod *kp = pod_of_worker(g, (int32_t)w, wr->run);
        if (wr->state != LIFE_WORKER_ASSIGNED || (kp && (kp->bound || kp->binding)))
            continue;
        if (kp)
            kp->rank = -1;
        wr->state = LIFE_WORKER_GONE;
    }
    changes_event(ch, j, now, "lost", why);
    server_job_stop(e->s, j, LIFE_STOP_PREEMPT, true, now, ch);
}

/* Ask the MIG manager for the layouts the run's placement set, once per run. */
static void ask_mig(KubeEngine *e, KGroup *g, ServerJob *j)
{
    if (g->mig_run == j->st.run)
        return;
    g->mig_run = j->st.run;
    const Placement *pl = &j->sj.pl;
    for (size_t k = 0; k < pl->n_changes; k++) {
        uint32_t node = pl->changes[k].node;
        bool done = false;
        for (size_t q = 0; q < k && !done; q++)
            done = pl->changes[q].node == node;
        if (done || node >= e->n_nodes)
            continue;
        KNode *kn = &e->nodes[node];
        Buf entry = {0}, name = {0};
        kmig_entry(e->s->c, node, &entry);
        kmig_name(buf_str(&entry), &name);
        free(kn->mig_want);
        kn->mig_want = buf_steal(&name);
        kn->mig_writing = true;
        kn->mig_since_ms = server_mono_ms();
        KAct a = {.kind = KA_MIG,
                  .node = strdup(e->s->c->nodes[node].name),
                  .text = strdup(kn->mig_want ? kn->mig_want : ""),
                  .body = buf_steal(&entry),
                  .relabel =
                      !kn->n.mig_config || !kn->mig_want || strcmp(kn->n.mig_config, kn->mig_want)};
        log_info("event=mig_change node=%s config=%s job=%lld", a.node ? a.node : "?",
                 a.text ? a.text : "?", (long long)j->st.id);
        push(e, &a);
    }
}

static void start_run(KubeEngine *e, KGroup *g, ServerJob *j, Changes *ch)
{
    ask_mig(e, g, j);
    /* a gang binds whole: none of its pods before every layout it needs is in */
    bool mig_wait = false;
    for (size_t w = 0; w < j->life.n_workers && !mig_wait; w++)
        mig_wait = e->nodes[j->life.workers[w].node].mig_want != NULL;
    size_t placed = 0; /* workers whose pods are bound or being bound */
    for (size_t w = 0; w < j->life.n_workers; w++) {
        LifeWorker *wr = &j->life.workers[w];
        if (wr->state != LIFE_WORKER_ASSIGNED)
            continue;
        KPod *kp = pod_of_worker(g, (int32_t)w, wr->run);
        if (!kp && !(kp = take_free_pod(g, (int32_t)w, wr->run))) {
            run_fails(e, g, j, "a pod of the gang went away before it was bound", ch);
            return;
        }
        if (kp->bound || kp->binding) {
            placed++;
            continue;
        }
        KNode *kn = &e->nodes[wr->node];
        const char *node = e->s->c->nodes[wr->node].name;
        if (kn->mig_failed) {
            char why[400];
            snprintf(why, sizeof(why),
                     "the MIG manager of node %s failed the layout change the placement "
                     "needed",
                     node);
            run_fails(e, g, j, why, ch);
            return;
        }
        if (mig_wait)
            continue; /* a layout of the gang is being applied */
        kp->binding = true;
        placed++;
        bool resume = j->st.checkpoint && (!kp->resume || strcmp(kp->resume, j->st.checkpoint));
        push_pod(e, resume ? KA_RESUME : KA_BIND, kp, node, resume ? j->st.checkpoint : NULL);
    }
    /* every worker has its pod: nothing more to do for this run until its pods move */
    if (placed == j->life.n_workers)
        g->bound_run = j->st.run;
}

static void stop_run(KubeEngine *e, KGroup *g, ServerJob *j, Changes *ch)
{
    bool changed = false;
    for (size_t w = 0; w < j->life.n_workers; w++) {
        LifeWorker *wr = &j->life.workers[w];
        if (life_worker_ended(wr))
            continue;
        KPod *kp = pod_of_worker(g, (int32_t)w, wr->run);
        if (kp && kp->binding)
            continue; /* its bind's answer decides */
        if (!kp || !kp->bound) {
            if (kp)
                kp->rank = -1; /* never bound: free for the next run */
            wr->state = LIFE_WORKER_GONE;
            changed = true;
            continue;
        }
        if (kp->evicting || kp->p.deleting)
            continue;
        kp->evicting = true;
        push_pod(e, j->life.stop_mode == LIFE_STOP_CANCEL ? KA_DELETE : KA_EVICT, kp, NULL, NULL);
        e->evictions++;
    }
    if (changed)
        server_job_progress(e->s, j, server_now_ms(), ch);
}

static void act_runs(KubeEngine *e)
{
    Server *s = e->s;
    size_t n = s->n_holding;
    int64_t *ids = n ? malloc(n * sizeof(*ids)) : NULL;
    size_t k = 0;
    for (size_t i = 0; ids && i < n; i++) {
        /* only runs being started or stopped need writes; a started run whose pods are
         * all bound waits for their phases */
        const ServerJob *j = s->holding[i];
        const KGroup *g = j->ext;
        if (j->st.state == JOB_STOPPING || !g ||
            (j->st.state == JOB_STARTING && g->bound_run != j->st.run))
            ids[k++] = j->st.id;
    }
    Changes ch = {0};
    for (size_t i = 0; ids && i < k; i++) {
        ServerJob *j = server_job(s, ids[i]);
        KGroup *g = j ? kgroup_of_job(e, ids[i]) : NULL;
        if (!j || !j->life.workers)
            continue;
        if (!g) {
            /* a run a restart reloaded whose pods are all gone: it cannot go on */
            for (size_t w = 0; w < j->life.n_workers; w++)
                if (!life_worker_ended(&j->life.workers[w]))
                    j->life.workers[w].state = LIFE_WORKER_GONE;
            changes_event(&ch, j, server_now_ms(), "lost", "its pods are gone");
            if (j->st.state != JOB_STOPPING)
                server_job_stop(s, j, LIFE_STOP_PREEMPT, true, server_now_ms(), &ch);
            else
                server_job_progress(s, j, server_now_ms(), &ch);
            continue;
        }
        if (j->st.state == JOB_STARTING)
            start_run(e, g, j, &ch);
        else if (j->st.state == JOB_STOPPING)
            stop_run(e, g, j, &ch);
    }
    free(ids);
    server_commit(s, &ch);
    changes_free(&ch);
}

/* ---- (4) reasons ---- */

static void tell_group(const void *node, VISIT v, void *arg)
{
    if (v != postorder && v != leaf)
        return;
    KubeEngine *e = arg;
    KGroup *g = *(KGroup *const *)node;
    const char *why = g->why;
    if (g->job) {
        ServerJob *j = server_job(e->s, g->job);
        why =
            j && j->st.state == JOB_PENDING && !j->parked && j->sj.reason[0] ? j->sj.reason : NULL;
    }
    if (!why)
        return;
    for (size_t i = 0; i < g->n_pods; i++) {
        KPod *kp = g->pods[i];
        if (kp->writing || kp->p.node || kp->bound || kp->binding || kp->p.deleting ||
            (kp->reason && !strcmp(kp->reason, why)))
            continue;
        kp->writing = true;
        push_pod(e, KA_CONDITION, kp, NULL, why);
    }
}

/* A pass walks every group and every job holding an allocation, and a busy cluster's
 * events (each bind comes back as a pod event, each write's answer kicks too) come far
 * faster than one pass per event is worth: at 5,000 pods that made the actuator's CPU
 * grow as pods x binds. So a pass waits, after the one before, 20 times the CPU that
 * one took (2 to 50 ms): the actuator keeps to about 5% of a core, and the events that
 * came meanwhile are served together. */
#define PACE_MIN_NS 2000000
#define PACE_MAX_NS 50000000
#define PACE_FACTOR 20

void *kact_main(void *arg)
{
    KubeEngine *e = arg;
    Server *s = e->s;
    int64_t next_ns = 0; /* monotonic: no pass before then */
    server_lock(s);
    while (!e->stop) {
        if (!e->work) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_sec += 1;
            pthread_cond_timedwait(&e->act_wake, &s->lock, &ts);
            e->work = true; /* at least once a second: parked jobs, retries */
        }
        if (e->stop)
            break;
        int64_t wait_ns = next_ns - clock_ns(CLOCK_MONOTONIC);
        if (wait_ns > 0) {
            pthread_mutex_unlock(&s->lock);
            struct timespec ts = {.tv_sec = wait_ns / 1000000000, .tv_nsec = wait_ns % 1000000000};
            nanosleep(&ts, NULL);
            server_lock(s);
            if (e->stop)
                break;
        }
        e->work = false;
        if (!e->synced)
            continue;
        int64_t t0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
        submit_ready(e);
        knodes_check_mig(e, server_mono_ms());
        act_runs(e);
        if (e->cycled) {
            e->cycled = false;
            twalk_r(e->groups_by_key, tell_group, e);
        }
        int64_t took = clock_ns(CLOCK_THREAD_CPUTIME_ID) - t0;
        e->passes++;
        e->pass_ns += took;
        next_ns =
            clock_ns(CLOCK_MONOTONIC) + MIN(MAX(PACE_FACTOR * took, PACE_MIN_NS), PACE_MAX_NS);
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}
