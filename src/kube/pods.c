/* pods.c: the pods that name gpuorch as their scheduler, grouped into the jobs the
 * server schedules, and what their phases mean for those jobs' runs.
 *
 * A group (a PodGroup's members, a Job's pods, or one pod) is one server job at a time,
 * named after the group. It is submitted once it has the pods to start (a PodGroup's
 * minMember; a Job's pods as they are at that moment; one pod), and it is parked out of
 * the queue whenever it has fewer unbound pods than workers: a preempted gang waits for
 * its owner to recreate its pods, keeping its place, its fair share and its checkpoint.
 * A bound pod is worker `rank` of the job's current run: Running makes the worker run,
 * Succeeded and Failed end it with the container's exit code, and a pod that goes away
 * ends it (stopped, when the run was being stopped; else the run is torn down and
 * requeued, or closed when nothing can recreate the pod). */
#include "kube/engine_int.h"

#include "util/log.h"
#include "util/macro.h"

#include <errno.h>
#include <search.h>
#include <stdlib.h>
#include <string.h>

typedef struct KPodGroup {
    char *key; /* "<ns>/<name>" */
    uint32_t min_member;
} KPodGroup;

static int cmp_pod(const void *a, const void *b)
{
    return strcmp(((const KPod *)a)->uid, ((const KPod *)b)->uid);
}
static int cmp_group(const void *a, const void *b)
{
    return strcmp(((const KGroup *)a)->key, ((const KGroup *)b)->key);
}
static int cmp_pg(const void *a, const void *b)
{
    return strcmp(((const KPodGroup *)a)->key, ((const KPodGroup *)b)->key);
}

KPod *kpod_find(KubeEngine *e, const char *uid)
{
    KPod k = {.uid = (char *)uid};
    void **f = tfind(&k, &e->pods_by_uid, cmp_pod);
    return f ? *f : NULL;
}

static KGroup *group_find(KubeEngine *e, const char *key)
{
    KGroup k = {.key = (char *)key};
    void **f = tfind(&k, &e->groups_by_key, cmp_group);
    return f ? *f : NULL;
}

static uint32_t pod_group_min(KubeEngine *e, const char *ns, const char *name)
{
    char key[512];
    snprintf(key, sizeof(key), "%s/%s", ns, name);
    KPodGroup k = {.key = key};
    void **f = tfind(&k, &e->pod_groups, cmp_pg);
    return f ? ((KPodGroup *)*f)->min_member : 0;
}

/* The group's job in the server, or NULL (none, or it ended: the group starts over). */
static ServerJob *group_job(KubeEngine *e, KGroup *g)
{
    if (!g->job)
        return NULL;
    ServerJob *j = server_job(e->s, g->job);
    if (j && !job_state_ended(j->st.state))
        return j;
    g->job = 0;
    for (size_t i = 0; i < g->n_pods; i++)
        g->pods[i]->rank = -1;
    return NULL;
}

KGroup *kgroup_of_job(KubeEngine *e, int64_t job)
{
    ServerJob *j = server_job(e->s, job);
    KGroup *g = j ? j->ext : NULL;
    return g && g->job == job ? g : NULL;
}

void kgroup_set_job(KubeEngine *e, KGroup *g, int64_t job)
{
    ServerJob *j = server_job(e->s, job);
    g->job = j ? job : 0;
    if (j)
        j->ext = g;
}

static bool pod_live(const KPod *kp)
{
    return !kp->p.deleting && kp->p.phase != POD_SUCCEEDED && kp->p.phase != POD_FAILED;
}

static bool pod_free(const KPod *kp)
{
    return pod_live(kp) && !kp->p.node && !kp->bound && !kp->binding && kp->rank < 0;
}

size_t kgroup_free_pods(const KGroup *g)
{
    size_t n = 0;
    for (size_t i = 0; i < g->n_pods; i++)
        n += pod_free(g->pods[i]);
    return n;
}

static KGroup *group_get(KubeEngine *e, const KubePod *p)
{
    char key[512];
    snprintf(key, sizeof(key), "%s/%s", p->ns, p->group);
    KGroup *g = group_find(e, key);
    if (g)
        return g;
    g = calloc(1, sizeof(*g));
    if (!g || !(g->key = strdup(key)) || !(g->ns = strdup(p->ns))) {
        if (g)
            free(g->key);
        free(g);
        return NULL;
    }
    const char *slash = strchr(p->group, '/');
    g->name = strdup(slash ? slash + 1 : p->group);
    g->kind = !strncmp(p->group, "pg/", 3)    ? KG_POD_GROUP
              : !strncmp(p->group, "job/", 4) ? KG_JOB
                                              : KG_POD;
    if (!g->name || !tsearch(g, &e->groups_by_key, cmp_group)) {
        free(g->name);
        free(g->ns);
        free(g->key);
        free(g);
        return NULL;
    }
    /* a server job of this name that is not over is this group's (a restarted server) */
    KJobName kn = {.name = key};
    void **f = tfind(&kn, &e->job_names, kjob_name_cmp);
    if (f)
        kgroup_set_job(e, g, ((KJobName *)*f)->id);
    return g;
}

static void group_drop_pod(KGroup *g, KPod *kp)
{
    for (size_t i = 0; i < g->n_pods; i++)
        if (g->pods[i] == kp) {
            g->pods[i] = g->pods[--g->n_pods];
            return;
        }
}

static void pod_free_mem(KPod *kp)
{
    kube_pod_free(&kp->p);
    free(kp->uid);
    free(kp->reason);
    free(kp->ckpt);
    free(kp->resume);
    free(kp);
}

/* The job's worker this pod is, in the current run, or NULL. */
static LifeWorker *pod_worker(KubeEngine *e, KPod *kp, ServerJob **ret_job)
{
    ServerJob *j = kp->g ? group_job(e, kp->g) : NULL;
    if (!j || kp->rank < 0 || !j->life.workers || (size_t)kp->rank >= j->life.n_workers ||
        j->life.workers[kp->rank].run != kp->run)
        return NULL;
    *ret_job = j;
    return &j->life.workers[kp->rank];
}

/* A pod's phase moves its worker along; gone: the pod was deleted. */
static void pod_progress(KubeEngine *e, KPod *kp, bool gone, Changes *ch)
{
    ServerJob *j = NULL;
    LifeWorker *w = pod_worker(e, kp, &j);
    if (!w || life_worker_ended(w))
        return;
    int64_t now = server_now_ms();
    if (kp->ckpt && (!j->st.checkpoint || strcmp(j->st.checkpoint, kp->ckpt))) {
        /* the workload said where it saved: the next run resumes from there */
        free(j->st.checkpoint);
        j->st.checkpoint = strdup(kp->ckpt);
        j->st.checkpoint_ms = now;
        life_checkpoint_run(&j->life, now);
        changes_event(ch, j, now, "checkpoint", kp->ckpt);
    }
    if (kp->p.deleting && !gone)
        return; /* its end comes with the DELETED event, once its grace is over */
    if (gone) {
        if (j->st.state == JOB_STOPPING) {
            w->state = LIFE_WORKER_EXITED;
            w->exit_code = kp->p.exit_code >= 0 ? kp->p.exit_code : 128 + 15;
            server_job_progress(e->s, j, now, ch);
            return;
        }
        w->state = LIFE_WORKER_GONE;
        char why[600];
        snprintf(why, sizeof(why), "pod %s/%s was deleted while it ran", kp->p.ns, kp->p.name);
        changes_event(ch, j, now, "lost", why);
        server_job_stop(e->s, j, LIFE_STOP_PREEMPT, true, now, ch);
        return;
    }
    switch (kp->p.phase) {
    case POD_RUNNING:
        if (w->state == LIFE_WORKER_ASSIGNED) {
            w->state = LIFE_WORKER_RUNNING;
            w->start_ms = now;
            server_job_progress(e->s, j, now, ch);
        }
        break;
    case POD_SUCCEEDED:
    case POD_FAILED:
        w->state = LIFE_WORKER_EXITED;
        w->exit_code = kp->p.phase == POD_SUCCEEDED ? 0 : kp->p.exit_code > 0 ? kp->p.exit_code : 1;
        if (w->start_ms < 0)
            w->start_ms = now;
        server_job_progress(e->s, j, now, ch);
        break;
    default:
        break;
    }
}

/* Bound pods of a run that a restarted server knows only by its workers' nodes: each
 * takes the first worker on its node that has no pod. */
static void adopt_bound(KubeEngine *e, KGroup *g, ServerJob *j)
{
    if (!j->life.workers)
        return;
    for (size_t i = 0; i < g->n_pods; i++) {
        KPod *kp = g->pods[i];
        if (kp->rank >= 0 || !kp->p.node)
            continue;
        int node = cluster_find_node(e->s->c, kp->p.node);
        for (size_t w = 0; w < j->life.n_workers && node >= 0; w++) {
            bool taken = false;
            for (size_t k = 0; k < g->n_pods && !taken; k++)
                taken = g->pods[k]->rank == (int32_t)w && g->pods[k]->run == j->life.workers[w].run;
            if (!taken && j->life.workers[w].node == (uint32_t)node) {
                kp->rank = (int32_t)w;
                kp->run = j->life.workers[w].run;
                kp->bound = true;
                break;
            }
        }
    }
}

/* What the group's pods now mean for its job: park or unpark it, close it when its
 * pod is gone for good, adopt bound pods, and tell the actuator. */
static void group_sync(KubeEngine *e, KGroup *g, Changes *ch)
{
    ServerJob *j = group_job(e, g);
    e->work = true;
    if (!j) {
        e->maybe_ready = true; /* it may make a job now */
        return;
    }
    size_t free_pods = kgroup_free_pods(g), live = 0;
    for (size_t i = 0; i < g->n_pods; i++)
        live += pod_live(g->pods[i]);
    if (j->st.state == JOB_PENDING) {
        if (!live && g->kind == KG_POD) {
            server_job_vanished(e->s, j, "its pod was deleted", server_now_ms(), ch);
            g->job = 0;
            return;
        }
        server_job_park(e->s, j, free_pods < j->spec.workers);
        return;
    }
    adopt_bound(e, g, j);
}

/* ---- pods no job of ours claims ---- */

/* A pod bound to a node of ours that no job of this server claims (an earlier leader,
 * with a store of its own, bound it; or its job is gone from the store) still holds
 * GPUs there: they are taken out of the core's view of the node from when the pod is
 * seen until it ends, goes away (gone) or a job adopts it, so that nothing is placed
 * onto them. */
static void pod_hold(KubeEngine *e, KPod *kp, bool gone)
{
    bool want = !gone && kp->p.node && kp->rank < 0 && kp->p.phase != POD_SUCCEEDED &&
                kp->p.phase != POD_FAILED;
    if (want == kp->held)
        return;
    Cluster *c = e->s->c;
    if (!want) {
        cluster_release_worker(c, &kp->hold);
        kp->held = false;
        server_kick(e->s);
        return;
    }
    int node = cluster_find_node(c, kp->p.node);
    if (node < 0)
        return; /* not a GPU node of the cluster */
    WorkerAlloc w;
    if (!khold_take(c, (uint32_t)node, &kp->p.spec, &w)) {
        if (!kp->held_short)
            log_error("event=pod_overlaps pod=%s/%s node=%s reason=\"bound by no job of ours, "
                      "it asks for what the node's jobs hold\"",
                      kp->p.ns, kp->p.name, kp->p.node);
        kp->held_short = true;
        return;
    }
    cluster_apply_worker(c, &w);
    kp->hold = w;
    kp->held = true;
    e->s->dirty = true;
    log_info("event=pod_held pod=%s/%s node=%s gpus=%u reason=\"bound by no job of ours: "
             "what it holds is not placed onto\"",
             kp->p.ns, kp->p.name, kp->p.node, (unsigned)w.n_grants);
}

static void group_hold(KubeEngine *e, KGroup *g)
{
    for (size_t i = 0; i < g->n_pods; i++)
        pod_hold(e, g->pods[i], false);
}

static void pod_take(KubeEngine *e, KPod *kp, KubePod *p)
{
    kube_pod_free(&kp->p);
    kp->p = *p;
    memset(p, 0, sizeof(*p));
    job_spec_init(&p->spec);
    kp->seen = true;
}

/* The pod is gone (deleted, or not in a relist): its worker ends, and it is forgotten. */
static void pod_gone(KubeEngine *e, KPod *kp, Changes *ch)
{
    pod_progress(e, kp, true, ch);
    pod_hold(e, kp, true);
    KGroup *g = kp->g;
    tdelete(kp, &e->pods_by_uid, cmp_pod);
    if (g)
        group_drop_pod(g, kp);
    pod_free_mem(kp);
    if (g) {
        group_sync(e, g, ch);
        group_hold(e, g);
    }
}

int kpod_read(KubeEngine *e, json_t *obj, KubePod *ret)
{
    Buf why = {0};
    int r = kube_pod_parse(obj, e->o.shared_resource, ret, &why);
    buf_free(&why);
    return r == -ENOMEM ? r : r == 0;
}

int kjob_name_cmp(const void *a, const void *b)
{
    return strcmp(((const KJobName *)a)->name, ((const KJobName *)b)->name);
}

int kpod_event(KubeEngine *e, const char *type, json_t *obj)
{
    KubePod p;
    int r = kpod_read(e, obj, &p);
    if (r <= 0)
        return r;
    json_t *ann = json_object_get(json_object_get(obj, "metadata"), "annotations");
    const char *ckpt = json_string_value(json_object_get(ann, KUBE_ANN_CHECKPOINT));
    const char *resume = json_string_value(json_object_get(ann, KUBE_ANN_RESUME_FROM));
    Changes ch = {0};
    KPod *kp = kpod_find(e, p.uid);
    if (!strcmp(type, "DELETED")) {
        if (kp) {
            pod_take(e, kp, &p);
            pod_gone(e, kp, &ch);
        }
        kube_pod_free(&p);
        r = server_commit(e->s, &ch);
        changes_free(&ch);
        return r;
    }
    if (!kp) {
        kp = calloc(1, sizeof(*kp));
        if (!kp || !(kp->uid = strdup(p.uid))) {
            free(kp);
            kube_pod_free(&p);
            return -ENOMEM;
        }
        kp->rank = -1;
        KGroup *g = group_get(e, &p);
        if (!g || GROW(g->pods, g->cap, g->n_pods + 1) < 0 ||
            !tsearch(kp, &e->pods_by_uid, cmp_pod)) {
            free(kp->uid);
            free(kp);
            kube_pod_free(&p);
            return -ENOMEM;
        }
        g->pods[g->n_pods++] = kp;
        g->refused = false; /* a new pod: the group may make a job now */
        kp->g = g;
        if (p.node)
            kp->bound = true; /* bound before we saw it: a run a restart adopts */
    }
    pod_take(e, kp, &p);
    if (ckpt && (!kp->ckpt || strcmp(kp->ckpt, ckpt))) {
        free(kp->ckpt);
        kp->ckpt = strdup(ckpt);
    }
    if (resume && (!kp->resume || strcmp(kp->resume, resume))) {
        free(kp->resume);
        kp->resume = strdup(resume);
    }
    group_sync(e, kp->g, &ch);
    pod_progress(e, kp, false, &ch);
    group_hold(e, kp->g);
    r = server_commit(e->s, &ch);
    changes_free(&ch);
    return r;
}

int kpodgroup_event(KubeEngine *e, const char *type, json_t *obj)
{
    json_t *md = json_object_get(obj, "metadata");
    const char *ns = json_string_value(json_object_get(md, "namespace"));
    const char *name = json_string_value(json_object_get(md, "name"));
    json_int_t min = json_integer_value(json_object_get(json_object_get(obj, "spec"), "minMember"));
    if (!ns || !name)
        return 0;
    char key[512];
    snprintf(key, sizeof(key), "%s/%s", ns, name);
    KPodGroup k = {.key = key};
    void **f = tfind(&k, &e->pod_groups, cmp_pg);
    if (!strcmp(type, "DELETED")) {
        if (f) {
            KPodGroup *pg = *f;
            tdelete(pg, &e->pod_groups, cmp_pg);
            free(pg->key);
            free(pg);
        }
        return 0;
    }
    KPodGroup *pg = f ? *f : NULL;
    if (!pg) {
        pg = calloc(1, sizeof(*pg));
        if (!pg || !(pg->key = strdup(key)) || !tsearch(pg, &e->pod_groups, cmp_pg)) {
            if (pg)
                free(pg->key);
            free(pg);
            return -ENOMEM;
        }
    }
    pg->min_member = min > 0 && min < 100000 ? (uint32_t)min : 1;
    char gkey[600];
    snprintf(gkey, sizeof(gkey), "%s/pg/%s", ns, name);
    KGroup *g = group_find(e, gkey);
    if (g) {
        g->min_member = pg->min_member;
        e->work = true;
        e->maybe_ready = true;
    }
    return 0;
}

uint32_t kgroup_min_member(KubeEngine *e, KGroup *g)
{
    if (g->kind != KG_POD_GROUP)
        return 1;
    if (!g->min_member)
        g->min_member = pod_group_min(e, g->ns, g->name);
    return g->min_member;
}

static void free_pod_node(void *p)
{
    pod_free_mem(p);
}
static void free_group_node(void *p)
{
    KGroup *g = p;
    free(g->key);
    free(g->ns);
    free(g->name);
    free(g->pods);
    free(g->why);
    free(g);
}
static void free_pg_node(void *p)
{
    KPodGroup *pg = p;
    free(pg->key);
    free(pg);
}

typedef struct Unseen {
    KPod **pods;
    size_t n, cap;
} Unseen;

static void mark_unseen(const void *node, VISIT v, void *arg)
{
    if (v == postorder || v == leaf)
        (*(KPod *const *)node)->seen = false;
}

static void collect_unseen(const void *node, VISIT v, void *arg)
{
    Unseen *u = arg;
    KPod *kp = *(KPod *const *)node;
    if ((v == postorder || v == leaf) && !kp->seen && GROW(u->pods, u->cap, u->n + 1) == 0)
        u->pods[u->n++] = kp;
}

void kpods_relist_begin(KubeEngine *e)
{
    twalk_r(e->pods_by_uid, mark_unseen, NULL);
}

void kpods_relist_end(KubeEngine *e)
{
    Unseen u = {0};
    twalk_r(e->pods_by_uid, collect_unseen, &u);
    Changes ch = {0};
    for (size_t i = 0; i < u.n; i++) {
        /* gone while we were not watching: as if its DELETED event came */
        KPod *kp = u.pods[i];
        pod_gone(e, kp, &ch);
    }
    server_commit(e->s, &ch);
    changes_free(&ch);
    free(u.pods);
}

void kgroups_free(KubeEngine *e)
{
    tdestroy(e->pods_by_uid, free_pod_node);
    e->pods_by_uid = NULL;
    tdestroy(e->groups_by_key, free_group_node);
    e->groups_by_key = NULL;
    tdestroy(e->pod_groups, free_pg_node);
    e->pod_groups = NULL;
}
