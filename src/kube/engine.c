/* engine.c: the engine's life: credentials and the access it needs, leadership, the
 * cluster from the Node objects, the first lists (pods before nodes take work, so that
 * no job a restart reloads is placed before its pods are known), the watches that
 * follow them, and the actuator and writers (act.c, writer.c). */
#include "kube/engine_int.h"

#include "util/log.h"
#include "util/macro.h"

#include <errno.h>
#include <search.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void kube_options_defaults(KubeOptions *o)
{
    *o = (KubeOptions){
        .scheduler_name = "gpuorch",
        .namespace_ = "gpuorch-system",
        .lease_name = "gpuorch",
        .lease_seconds = 15,
        .mig_namespace = "gpu-operator",
        .mig_configmap = "gpuorch-mig-parted-config",
        .shared_resource = "nvidia.com/gpu.shared",
        .writers = 4,
        .mig_timeout_ms = 600 * INT64_C(1000),
    };
    kube_labels_defaults(&o->labels);
}

/* What gpuorch does through the API server, verb by verb (deploy/kubernetes/rbac.yaml
 * grants exactly these). */
static const struct {
    const char *group, *resource, *sub, *verb;
} needed[] = {
    {"", "nodes", "", "list"},
    {"", "nodes", "", "watch"},
    {"", "nodes", "", "patch"},
    {"", "pods", "", "list"},
    {"", "pods", "", "watch"},
    {"", "pods", "", "patch"},
    {"", "pods", "", "delete"},
    {"", "pods", "binding", "create"},
    {"", "pods", "status", "patch"},
    {"", "pods", "eviction", "create"},
    {"", "events", "", "create"},
    {"", "configmaps", "", "get"},
    {"", "configmaps", "", "create"},
    {"", "configmaps", "", "update"},
    {"scheduling.x-k8s.io", "podgroups", "", "list"},
    {"scheduling.x-k8s.io", "podgroups", "", "watch"},
};

static int check_access(KubeEngine *e, Buf *err)
{
    Buf missing = {0};
    for (size_t i = 0; i < ARRAY_SIZE(needed); i++) {
        json_t *ra = json_pack("{s:s, s:s, s:s}", "group", needed[i].group, "resource",
                               needed[i].resource, "verb", needed[i].verb);
        if (*needed[i].sub)
            json_object_set_new(ra, "subresource", json_string(needed[i].sub));
        json_t *req =
            json_pack("{s:s, s:s, s:{s:o}}", "apiVersion", "authorization.k8s.io/v1", "kind",
                      "SelfSubjectAccessReview", "spec", "resourceAttributes", ra);
        KubeReply r = {0};
        int rc =
            kube_request(e->api, "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                         NULL, req, &r, err);
        json_decref(req);
        if (rc < 0) {
            kube_reply_free(&r);
            buf_free(&missing);
            return rc;
        }
        if (r.status == 401) {
            buf_printf(err, "the API server %s does not accept our credentials: %s", e->cfg.server,
                       kube_reply_message(&r));
            kube_reply_free(&r);
            buf_free(&missing);
            return -EACCES;
        }
        bool allowed = json_is_true(json_object_get(json_object_get(r.body, "status"), "allowed"));
        if (!allowed)
            buf_printf(&missing, "%s%s %s%s%s%s%s", missing.len ? ", " : "", needed[i].verb,
                       needed[i].resource, *needed[i].sub ? "/" : "", needed[i].sub,
                       *needed[i].group ? "." : "", needed[i].group);
        kube_reply_free(&r);
    }
    if (missing.len) {
        buf_printf(err,
                   "RBAC does not let gpuorch %s (deploy/kubernetes/rbac.yaml grants what it "
                   "needs)",
                   buf_str(&missing));
        buf_free(&missing);
        return -EACCES;
    }
    return 0;
}

int kube_engine_new(const KubeOptions *o, KubeEngine **ret, Buf *err)
{
    KubeEngine *e = calloc(1, sizeof(*e));
    if (!e)
        return -ENOMEM;
    e->o = *o;
    pthread_mutex_init(&e->qlock, NULL);
    pthread_mutex_init(&e->mig_lock, NULL);
    pthread_cond_init(&e->qwake, NULL);
    pthread_cond_init(&e->act_wake, NULL);
    int r = o->kubeconfig ? kube_config_load(o->kubeconfig, o->context, &e->cfg, err)
                          : kube_config_in_cluster(NULL, &e->cfg, err);
    if (r == 0) {
        if (o->qps > 0) {
            e->cfg.qps = o->qps;
            e->cfg.burst = o->burst > 0 ? o->burst : (int)o->qps;
        }
        r = kube_api_new(&e->cfg, 30000, &e->api);
    }
    if (r == 0)
        r = check_access(e, err);
    if (r < 0) {
        kube_engine_free(e);
        return r;
    }
    *ret = e;
    return 0;
}

int kube_engine_lead(KubeEngine *e, Buf *err)
{
    if (!e->o.leader_elect)
        return 0;
    bool said = false;
    for (;;) {
        bool leader = false;
        int r = klease_try(e, e->api, &leader, err);
        if (r == -EACCES)
            return r;
        if (r == 0 && leader)
            break;
        if (r < 0) {
            log_error("event=lease_error reason=\"%s\"", buf_str(err));
            buf_reset(err);
        } else if (!said) {
            log_info("event=lease_waiting lease=%s/%s identity=%s", e->o.namespace_,
                     e->o.lease_name, e->o.identity);
            said = true;
        }
        sleep(2);
    }
    log_info("event=leading lease=%s/%s identity=%s", e->o.namespace_, e->o.lease_name,
             e->o.identity);
    if (pthread_create(&e->lease, NULL, klease_main, e) != 0)
        return -EAGAIN;
    e->lease_started = true;
    return 0;
}

/* ---- the first lists ---- */

typedef struct NodeList {
    KubeEngine *e;
    KubeNode *n;
    size_t len, cap;
} NodeList;

static int add_node(void *arg, json_t *item)
{
    NodeList *l = arg;
    KubeNode n;
    Buf why = {0};
    int r = kube_node_parse(item, &l->e->o.labels, &n, &why);
    if (r < 0) {
        if (r != -ENOMEM)
            log_error("event=node_unreadable reason=\"%s\" action=left_out", buf_str(&why));
        buf_free(&why);
        return r == -ENOMEM ? r : 0;
    }
    buf_free(&why);
    if (!kube_node_has_gpus(&n)) {
        kube_node_free(&n);
        return 0;
    }
    if (GROW(l->n, l->cap, l->len + 1) < 0) {
        kube_node_free(&n);
        return -ENOMEM;
    }
    l->n[l->len++] = n;
    return 0;
}

int kube_engine_cluster(KubeEngine *e, const char *spec_path, Cluster **ret, Buf *err)
{
    NodeList l = {.e = e};
    free(e->nodes_rv);
    e->nodes_rv = NULL;
    int r = kube_list(e->api, "/api/v1/nodes", add_node, &l, &e->nodes_rv, err);
    Cluster *c = NULL;
    if (r == 0)
        r = kube_cluster_build(spec_path, l.n, l.len, &c, err);
    if (r == 0 && c->n_nodes != l.len) {
        buf_printf(err, "the cluster took %zu of %zu GPU nodes", c->n_nodes, l.len);
        r = -EINVAL;
    }
    if (r < 0) {
        for (size_t i = 0; i < l.len; i++)
            kube_node_free(&l.n[i]);
        free(l.n);
        cluster_free(c);
        return r;
    }
    /* the cluster's nodes are the list's, in its order */
    e->nodes = calloc(l.len ? l.len : 1, sizeof(*e->nodes));
    if (!e->nodes) {
        for (size_t i = 0; i < l.len; i++)
            kube_node_free(&l.n[i]);
        free(l.n);
        cluster_free(c);
        return -ENOMEM;
    }
    for (size_t i = 0; i < l.len; i++)
        e->nodes[i] = (KNode){.n = l.n[i], .known = true};
    e->n_nodes = l.len;
    free(l.n);
    log_info("event=cluster_built nodes=%zu pools=%zu gpus=%zu teams=%zu", c->n_nodes, c->n_pools,
             c->n_gpus, c->n_teams);
    *ret = c;
    return 0;
}

/* ---- watches ---- */

typedef int (*EventFn)(KubeEngine *e, const char *type, json_t *obj);

typedef struct Watch {
    KubeEngine *e;
    const char *what;
    char *path;
    char *rv;
    EventFn fn;
    /* a relist drops the objects it does not see: these mark and sweep (or NULL) */
    void (*relist_begin)(KubeEngine *e);
    void (*relist_end)(KubeEngine *e);
    /* when the watch (or list) first failed since it last delivered, 0: it delivers;
     * the first event after a failure says the watch is back, so that the log of an API
     * server outage has its end */
    int64_t failed_ms;
} Watch;

static int on_event(void *arg, const char *type, json_t *obj)
{
    Watch *w = arg;
    if (w->failed_ms) {
        log_info("event=watch_resumed what=%s down_ms=%lld", w->what,
                 (long long)(server_mono_ms() - w->failed_ms));
        w->failed_ms = 0;
    }
    if (!strcmp(type, "BOOKMARK") || !strcmp(type, "ERROR"))
        return 0;
    server_lock(w->e->s);
    int r = w->fn(w->e, type, obj);
    kact_kick(w->e);
    pthread_mutex_unlock(&w->e->s->lock);
    return r;
}

static int on_item(void *arg, json_t *item)
{
    return on_event(arg, "ADDED", item);
}

static int relist(Watch *w, KubeApi *a, Buf *err)
{
    if (w->relist_begin) {
        server_lock(w->e->s);
        w->relist_begin(w->e);
        pthread_mutex_unlock(&w->e->s->lock);
    }
    free(w->rv);
    w->rv = NULL;
    int r = kube_list(a, w->path, on_item, w, &w->rv, err);
    if (w->relist_end && r == 0) {
        server_lock(w->e->s);
        w->relist_end(w->e);
        kact_kick(w->e);
        pthread_mutex_unlock(&w->e->s->lock);
    }
    return r;
}

static void *watch_main(void *arg)
{
    Watch *w = arg;
    KubeEngine *e = w->e;
    KubeApi *a = NULL;
    if (kube_api_new(&e->cfg, 30000, &a) < 0)
        return NULL;
    int backoff = 0;
    bool stale = false;
    while (!e->stop) {
        Buf err = {0};
        int r = stale ? relist(w, a, &err) : 0;
        if (r == 0) {
            stale = false;
            r = kube_watch(a, w->path, &w->rv, 300, on_event, w, &e->stop, &err);
        }
        if (r == -ESTALE) {
            log_info("event=watch_expired what=%s action=relist", w->what);
            stale = true;
            backoff = 0;
        } else if (r < 0 && !e->stop) {
            if (!w->failed_ms)
                w->failed_ms = server_mono_ms();
            /* the API server restarting or unreachable: watch again from where we were */
            log_error("event=watch_failed what=%s error=\"%s\" retry_s=%d", w->what, buf_str(&err),
                      1 << backoff);
            for (int i = 0; i < 10 * (1 << backoff) && !e->stop; i++)
                usleep(100 * 1000);
            backoff = MIN(backoff + 1, 4);
        } else {
            backoff = 0;
        }
        buf_free(&err);
    }
    kube_api_free(a);
    return NULL;
}

static Watch *watch_new(KubeEngine *e, const char *what, const char *path, EventFn fn)
{
    Watch *w = calloc(1, sizeof(*w));
    if (!w || !(w->path = strdup(path))) {
        free(w);
        return NULL;
    }
    w->e = e;
    w->what = what;
    w->fn = fn;
    return w;
}

static void watch_free(Watch *w)
{
    if (!w)
        return;
    free(w->path);
    free(w->rv);
    free(w);
}

static int name_jobs(KubeEngine *e)
{
    for (size_t i = 0; i < e->s->n_resident; i++) {
        ServerJob *j = e->s->resident[i];
        if (job_state_ended(j->st.state) || !j->st.name)
            continue;
        KJobName *kn = malloc(sizeof(*kn));
        if (!kn)
            return -ENOMEM;
        *kn = (KJobName){.name = j->st.name, .id = j->st.id};
        void **f = tsearch(kn, &e->job_names, kjob_name_cmp);
        if (!f)
            return free(kn), -ENOMEM;
        if (*f != kn) {
            ((KJobName *)*f)->id = MAX(((KJobName *)*f)->id, j->st.id);
            free(kn);
        }
        /* pending jobs wait for their pods: the first list unparks those that have them */
        if (j->st.state == JOB_PENDING)
            server_job_park(e->s, j, true);
    }
    return 0;
}

int kube_engine_start(KubeEngine *e, Server *s, Buf *err)
{
    e->s = s;
    Buf pods = {0};
    buf_printf(&pods, "/api/v1/pods?fieldSelector=");
    Buf sel = {0};
    buf_printf(&sel, "spec.schedulerName=%s", e->o.scheduler_name);
    kube_query_escape(&pods, buf_str(&sel));
    buf_reset(&sel);
    e->w_pods = watch_new(e, "pods", buf_str(&pods), kpod_event);
    buf_reset(&pods);
    buf_printf(&pods, "/api/v1/pods?fieldSelector=");
    buf_printf(&sel, "spec.schedulerName!=%s,spec.nodeName!=", e->o.scheduler_name);
    kube_query_escape(&pods, buf_str(&sel));
    buf_free(&sel);
    e->w_foreign = watch_new(e, "other schedulers' pods", buf_str(&pods), kforeign_event);
    buf_free(&pods);
    e->w_nodes = watch_new(e, "nodes", "/api/v1/nodes", knode_event);
    e->w_pgs =
        watch_new(e, "podgroups", "/apis/scheduling.x-k8s.io/v1alpha1/podgroups", kpodgroup_event);
    if (!e->w_pods || !e->w_nodes || !e->w_pgs || !e->w_foreign)
        return -ENOMEM;
    e->w_pods->relist_begin = kpods_relist_begin;
    e->w_pods->relist_end = kpods_relist_end;
    e->w_foreign->relist_begin = kforeign_relist_begin;
    e->w_foreign->relist_end = kforeign_relist_end;
    e->w_nodes->rv = e->nodes_rv;
    e->nodes_rv = NULL;

    pthread_mutex_lock(&s->lock);
    int r = name_jobs(e);
    pthread_mutex_unlock(&s->lock);
    if (r < 0)
        return r;
    /* PodGroups first (the pods' gangs), then the pods, then the nodes take work */
    r = kube_list(e->api, e->w_pgs->path, on_item, e->w_pgs, &e->w_pgs->rv, err);
    if (r == -ENOENT) {
        log_error("event=podgroups_missing reason=\"the PodGroup CRD (scheduling.x-k8s.io) is "
                  "not installed: deploy/kubernetes/podgroup-crd.yaml\" action=no_gangs");
        buf_reset(err);
        watch_free(e->w_pgs);
        e->w_pgs = NULL;
        r = 0;
    }
    /* what other schedulers hold, then our pods: the first cycle sees both */
    if (r == 0)
        r = relist(e->w_foreign, e->api, err);
    if (r == 0)
        r = relist(e->w_pods, e->api, err);
    if (r < 0)
        return r;
    pthread_mutex_lock(&s->lock);
    e->synced = true;
    knodes_open(e);
    server_kick(s);
    pthread_mutex_unlock(&s->lock);

    e->n_writers = (size_t)MAX(1, e->o.writers);
    e->writer = calloc(e->n_writers, sizeof(*e->writer));
    if (!e->writer)
        return -ENOMEM;
    bool ok = pthread_create(&e->watch_pods, NULL, watch_main, e->w_pods) == 0 &&
              pthread_create(&e->watch_nodes, NULL, watch_main, e->w_nodes) == 0 &&
              pthread_create(&e->watch_foreign, NULL, watch_main, e->w_foreign) == 0 &&
              (!e->w_pgs || pthread_create(&e->watch_pgs, NULL, watch_main, e->w_pgs) == 0) &&
              pthread_create(&e->actuator, NULL, kact_main, e) == 0;
    for (size_t i = 0; ok && i < e->n_writers; i++)
        ok = pthread_create(&e->writer[i], NULL, kwriter_main, e) == 0;
    e->started = true;
    if (!ok) {
        buf_printf(err, "cannot start the engine's threads");
        return -EAGAIN;
    }
    log_info("event=engine_started nodes=%zu scheduler=%s writers=%zu", e->n_nodes,
             e->o.scheduler_name, e->n_writers);
    return 0;
}

const char *kube_engine_server(const KubeEngine *e)
{
    return e->cfg.server;
}

bool kube_engine_joined(KubeEngine *e)
{
    if (!e || !e->started)
        return false;
    pthread_mutex_lock(&e->s->lock);
    bool due = e->joined_mono_ms && server_mono_ms() - e->joined_mono_ms >= KUBE_JOIN_SETTLE_MS;
    pthread_mutex_unlock(&e->s->lock);
    return due;
}

void kube_engine_stop(KubeEngine *e)
{
    if (!e || !e->started)
        return;
    e->stop = true;
    pthread_mutex_lock(&e->s->lock);
    pthread_cond_broadcast(&e->act_wake);
    pthread_mutex_unlock(&e->s->lock);
    pthread_mutex_lock(&e->qlock);
    pthread_cond_broadcast(&e->qwake);
    pthread_mutex_unlock(&e->qlock);
    /* the watches poll e->stop about every second */
    pthread_join(e->watch_pods, NULL);
    pthread_join(e->watch_nodes, NULL);
    pthread_join(e->watch_foreign, NULL);
    if (e->w_pgs)
        pthread_join(e->watch_pgs, NULL);
    pthread_join(e->actuator, NULL);
    for (size_t i = 0; i < e->n_writers; i++)
        pthread_join(e->writer[i], NULL);
    if (e->lease_started)
        pthread_join(e->lease, NULL);
    e->started = false;
    log_info("event=engine_stopped submitted=%llu binds=%llu bind_errors=%llu evictions=%llu "
             "reasons=%llu passes=%llu pass_cpu_ms=%lld",
             (unsigned long long)e->submitted, (unsigned long long)e->binds,
             (unsigned long long)e->bind_errors, (unsigned long long)e->evictions,
             (unsigned long long)e->conditions, (unsigned long long)e->passes,
             (long long)(e->pass_ns / 1000000));
}

static void free_queue(KActQueue *q)
{
    for (size_t i = q->head; i < q->len; i++)
        kact_free(&q->a[i]);
    free(q->a);
}

void kube_engine_free(KubeEngine *e)
{
    if (!e)
        return;
    kube_engine_stop(e);
    kgroups_free(e);
    kforeign_free(e);
    tdestroy(e->job_names, free);
    for (size_t i = 0; i < e->n_nodes; i++) {
        kube_node_free(&e->nodes[i].n);
        free(e->nodes[i].mig_want);
    }
    free(e->nodes);
    free(e->writer);
    free_queue(&e->fast);
    free_queue(&e->slow);
    watch_free(e->w_pods);
    watch_free(e->w_nodes);
    watch_free(e->w_pgs);
    watch_free(e->w_foreign);
    free(e->nodes_rv);
    kube_api_free(e->api);
    kube_config_free(&e->cfg);
    pthread_mutex_destroy(&e->qlock);
    pthread_mutex_destroy(&e->mig_lock);
    pthread_cond_destroy(&e->qwake);
    pthread_cond_destroy(&e->act_wake);
    free(e);
}
