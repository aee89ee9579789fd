/* writer.c: the writer threads: each takes a queued write (binds, evictions and MIG
 * changes first, then reasons), makes it with its own API client, and brings the answer
 * back to the engine's state under the server's lock. A bind the API server refuses, or
 * a MIG change that cannot be written, requeues the run: nothing is left half placed. */
#include "kube/engine_int.h"

#include "util/log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static bool pop(KubeEngine *e, KAct *ret)
{
    pthread_mutex_lock(&e->qlock);
    for (;;) {
        KActQueue *q = e->fast.head < e->fast.len   ? &e->fast
                       : e->slow.head < e->slow.len ? &e->slow
                                                    : NULL;
        if (q) {
            *ret = q->a[q->head++];
            if (q->head == q->len)
                q->head = q->len = 0;
            pthread_mutex_unlock(&e->qlock);
            return true;
        }
        if (e->stop)
            break;
        pthread_cond_wait(&e->qwake, &e->qlock);
    }
    pthread_mutex_unlock(&e->qlock);
    return false;
}

static void rfc3339_now(char *out, size_t len)
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static void pod_path(Buf *b, const KAct *a, const char *sub)
{
    buf_printf(b, "/api/v1/namespaces/%s/pods/%s%s%s", a->ns, a->pod, sub ? "/" : "",
               sub ? sub : "");
}

/* One request; its status, or 0 when no answer came (err says why). */
static long call(KubeApi *api, const char *method, const char *path, const char *type, json_t *body,
                 Buf *msg)
{
    KubeReply r = {0};
    Buf err = {0};
    long st = 0;
    if (kube_request(api, method, path, type, body, &r, &err) == 0) {
        st = r.status;
        if (st >= 300)
            buf_printf(msg, "%s", kube_reply_message(&r));
    } else {
        buf_printf(msg, "%s", buf_str(&err));
    }
    kube_reply_free(&r);
    buf_free(&err);
    json_decref(body);
    return st;
}

static long do_bind(KubeApi *api, const KAct *a, Buf *msg)
{
    Buf p = {0};
    pod_path(&p, a, "binding");
    json_t *b = json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:s, s:s, s:s}}", "apiVersion", "v1", "kind",
                          "Binding", "metadata", "name", a->pod, "uid", a->uid, "target",
                          "apiVersion", "v1", "kind", "Node", "name", a->node);
    long st = call(api, "POST", buf_str(&p), NULL, b, msg);
    buf_free(&p);
    return st;
}

static long do_resume(KubeApi *api, const KAct *a, Buf *msg)
{
    Buf p = {0};
    pod_path(&p, a, NULL);
    json_t *b =
        json_pack("{s:{s:{s:s}}}", "metadata", "annotations", KUBE_ANN_RESUME_FROM, a->text);
    long st = call(api, "PATCH", buf_str(&p), "application/merge-patch+json", b, msg);
    buf_free(&p);
    return st;
}

static long do_evict(KubeApi *api, const KAct *a, Buf *msg)
{
    Buf p = {0};
    pod_path(&p, a, "eviction");
    /* the pod's own termination grace: the time a checkpointing workload saves in */
    json_t *b = json_pack("{s:s, s:s, s:{s:s, s:s}}", "apiVersion", "policy/v1beta1", "kind",
                          "Eviction", "metadata", "name", a->pod, "namespace", a->ns);
    long st = call(api, "POST", buf_str(&p), NULL, b, msg);
    buf_free(&p);
    return st;
}

static long do_delete(KubeApi *api, const KAct *a, Buf *msg)
{
    Buf p = {0};
    pod_path(&p, a, NULL);
    long st = call(api, "DELETE", buf_str(&p), NULL, NULL, msg);
    buf_free(&p);
    return st;
}

static long do_condition(KubeApi *api, const KAct *a, Buf *msg)
{
    char now[32];
    rfc3339_now(now, sizeof(now));
    Buf p = {0};
    pod_path(&p, a, "status");
    json_t *b = json_pack("{s:{s:[{s:s, s:s, s:s, s:s, s:s}]}}", "status", "conditions", "type",
                          "PodScheduled", "status", "False", "reason", "Unschedulable", "message",
                          a->text, "lastTransitionTime", now);
    long st = call(api, "PATCH", buf_str(&p), "application/strategic-merge-patch+json", b, msg);
    buf_reset(&p);
    buf_printf(&p, "/api/v1/namespaces/%s/events", a->ns);
    char name[300];
    snprintf(name, sizeof(name), "%s.", a->pod);
    json_t *ev = json_pack(
        "{s:s, s:s, s:{s:s, s:s}, s:{s:s, s:s, s:s, s:s, s:s}, s:s, s:s, s:s, s:{s:s}, s:s, "
        "s:s, s:i, s:s}",
        "apiVersion", "v1", "kind", "Event", "metadata", "generateName", name, "namespace", a->ns,
        "involvedObject", "apiVersion", "v1", "kind", "Pod", "namespace", a->ns, "name", a->pod,
        "uid", a->uid, "reason", "FailedScheduling", "message", a->text, "type", "Warning",
        "source", "component", "gpuorch", "firstTimestamp", now, "lastTimestamp", now, "count", 1,
        "reportingComponent", "gpuorch");
    Buf evmsg = {0};
    long est = call(api, "POST", buf_str(&p), NULL, ev, &evmsg);
    if (est != 201)
        log_error("event=event_write_failed pod=%s/%s status=%ld reason=\"%s\"", a->ns, a->pod, est,
                  buf_str(&evmsg));
    buf_free(&evmsg);
    buf_free(&p);
    return st;
}

static long do_mig(KubeEngine *e, KubeApi *api, const KAct *a, Buf *msg)
{
    pthread_mutex_lock(&e->mig_lock);
    Buf err = {0};
    int r = kmig_write(e, api, a->text, a->node, a->body, &err);
    pthread_mutex_unlock(&e->mig_lock);
    if (r < 0) {
        buf_printf(msg, "%s", buf_str(&err));
        buf_free(&err);
        return 0;
    }
    buf_free(&err);
    Buf p = {0};
    buf_printf(&p, "/api/v1/nodes/%s", a->node);
    json_t *b = json_pack("{s:{s:{s:s}}}", "metadata", "labels", "nvidia.com/mig.config", a->text);
    /* Until the MIG manager takes up the new config, the node's mig.config.state is
     * still the previous change's: a "success" next to our config name would read as
     * our layout being in place, and the pods would be bound before it is. pending,
     * written with the name, is what the manager itself says first; a success or
     * failure after it is its answer to this change. (A name that does not change
     * starts nothing: its state stands.) */
    if (a->relabel)
        json_object_set_new(json_object_get(json_object_get(b, "metadata"), "labels"),
                            "nvidia.com/mig.config.state", json_string("pending"));
    long st = call(api, "PATCH", buf_str(&p), "application/merge-patch+json", b, msg);
    buf_free(&p);
    return st;
}

/* The answer, under the lock. */
static void settle(KubeEngine *e, const KAct *a, long st, const char *msg)
{
    Server *s = e->s;
    server_lock(s);
    Changes ch = {0};
    KPod *kp = a->uid ? kpod_find(e, a->uid) : NULL;
    switch (a->kind) {
    case KA_BIND:
    case KA_RESUME: {
        if (!kp)
            break;
        kp->binding = false;
        if (st == 201 || (st == 409 && kp->p.node && !strcmp(kp->p.node, a->node))) {
            kp->bound = true;
            e->binds++;
            break;
        }
        e->bind_errors++;
        log_error("event=bind_failed pod=%s/%s node=%s status=%ld reason=\"%s\"", a->ns, a->pod,
                  a->node, st, msg);
        ServerJob *j = kp->g && kp->g->job ? server_job(s, kp->g->job) : NULL;
        if (j && (j->st.state == JOB_STARTING || j->st.state == JOB_STOPPING) && kp->rank >= 0 &&
            (size_t)kp->rank < j->life.n_workers && j->life.workers[kp->rank].run == kp->run) {
            char why[700];
            snprintf(why, sizeof(why), "binding pod %s to %s failed: %s", a->pod, a->node, msg);
            /* this worker never started; the stop that follows evicts the gang's others */
            j->life.workers[kp->rank].state = LIFE_WORKER_GONE;
            kp->rank = -1;
            changes_event(&ch, j, server_now_ms(), "lost", why);
            server_job_stop(s, j, LIFE_STOP_PREEMPT, true, server_now_ms(), &ch);
        }
        break;
    }
    case KA_EVICT:
    case KA_DELETE:
        if (!kp)
            break;
        if (st == 429 || (st >= 500 && st != 0) || st == 0) {
            /* a disruption budget says not now, or no answer: try again */
            log_info("event=evict_retry pod=%s/%s status=%ld reason=\"%s\"", a->ns, a->pod, st,
                     msg);
            kp->evicting = false;
        }
        break;
    case KA_CONDITION:
        if (!kp)
            break;
        kp->writing = false;
        if (st == 200) {
            free(kp->reason);
            kp->reason = strdup(a->text);
            e->conditions++;
        }
        break;
    case KA_MIG: {
        int idx = knode_find(e, a->node);
        if (idx < 0 || (size_t)idx >= e->n_nodes)
            break;
        KNode *kn = &e->nodes[idx];
        kn->mig_writing = false;
        if (st != 200) {
            char why[600];
            snprintf(why, sizeof(why), "writing the layout failed (HTTP %ld): %s", st, msg);
            knode_mig_failed(e, (uint32_t)idx, why);
        }
        break;
    }
    }
    server_commit(s, &ch);
    changes_free(&ch);
    kact_kick(e);
    pthread_mutex_unlock(&s->lock);
}

void *kwriter_main(void *arg)
{
    KubeEngine *e = arg;
    KubeApi *api = NULL;
    if (kube_api_new(&e->cfg, 30000, &api) < 0)
        return NULL;
    KAct a;
    while (pop(e, &a)) {
        Buf msg = {0};
        long st = 0;
        switch (a.kind) {
        case KA_BIND:
            st = do_bind(api, &a, &msg);
            break;
        case KA_RESUME:
            st = do_resume(api, &a, &msg);
            if (st == 200) {
                buf_reset(&msg);
                st = do_bind(api, &a, &msg);
            }
            break;
        case KA_EVICT:
            st = do_evict(api, &a, &msg);
            break;
        case KA_DELETE:
            st = do_delete(api, &a, &msg);
            break;
        case KA_CONDITION:
            st = do_condition(api, &a, &msg);
            break;
        case KA_MIG:
            st = do_mig(e, api, &a, &msg);
            break;
        }
        settle(e, &a, st, buf_str(&msg));
        buf_free(&msg);
        kact_free(&a);
    }
    kube_api_free(api);
    return NULL;
}
