/* lease.c: leader election through a coordination.k8s.io/v1 Lease, as kube-scheduler
 * and the controllers do it: the holder renews spec.renewTime every third of the lease;
 * another replica takes the Lease once it has seen the record unchanged for the whole
 * lease (its own clock: clocks of different machines are not compared). Writes carry
 * the resourceVersion they read, so of two replicas racing for it one gets 409. A
 * leader that cannot renew in time exits, and the next one rebuilds from the API server
 * and the store. */
#include "kube/engine_int.h"

#include "util/log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void micro_time(char *out, size_t len)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char sec[24];
    strftime(sec, sizeof(sec), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out, len, "%.20s.%06dZ", sec, (int)(ts.tv_nsec / 1000) % 1000000);
}

int klease_try(KubeEngine *e, KubeApi *a, bool *ret_leader, Buf *err)
{
    Buf path = {0};
    buf_printf(&path, "/apis/coordination.k8s.io/v1/namespaces/%s/leases/%s", e->o.namespace_,
               e->o.lease_name);
    KubeReply r = {0};
    int rc = kube_request(a, "GET", buf_str(&path), NULL, NULL, &r, err);
    if (rc < 0) {
        buf_free(&path);
        return rc;
    }
    char now[48];
    micro_time(now, sizeof(now));
    bool leader = false;
    json_t *spec = NULL;
    if (r.status == 404) {
        json_t *l =
            json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:s, s:i, s:s, s:s, s:i}}", "apiVersion",
                      "coordination.k8s.io/v1", "kind", "Lease", "metadata", "name",
                      e->o.lease_name, "namespace", e->o.namespace_, "spec", "holderIdentity",
                      e->o.identity, "leaseDurationSeconds", e->o.lease_seconds, "acquireTime", now,
                      "renewTime", now, "leaseTransitions", 0);
        Buf coll = {0};
        buf_printf(&coll, "/apis/coordination.k8s.io/v1/namespaces/%s/leases", e->o.namespace_);
        KubeReply w = {0};
        rc = kube_request(a, "POST", buf_str(&coll), NULL, l, &w, err);
        json_decref(l);
        buf_free(&coll);
        leader = rc == 0 && w.status == 201;
        if (rc == 0 && w.status != 201 && w.status != 409) {
            buf_printf(err, "creating Lease %s/%s: %s", e->o.namespace_, e->o.lease_name,
                       kube_reply_message(&w));
            rc = w.status == 403 ? -EACCES : -EIO;
        }
        kube_reply_free(&w);
    } else if (r.status == 200) {
        spec = json_object_get(r.body, "spec");
        const char *holder = json_string_value(json_object_get(spec, "holderIdentity"));
        const char *renew = json_string_value(json_object_get(spec, "renewTime"));
        char record[512];
        snprintf(record, sizeof(record), "%s|%s", holder ? holder : "", renew ? renew : "");
        int64_t t = mono_ms();
        if (strcmp(record, e->lease_seen)) {
            snprintf(e->lease_seen, sizeof(e->lease_seen), "%s", record);
            e->lease_seen_ms = t;
        }
        json_int_t dur = json_integer_value(json_object_get(spec, "leaseDurationSeconds"));
        bool mine = holder && !strcmp(holder, e->o.identity);
        bool expired = !holder || !*holder || t - e->lease_seen_ms > (dur > 0 ? dur : 15) * 1000;
        if (mine || expired) {
            json_t *l = json_deep_copy(r.body);
            json_t *ls = json_object_get(l, "spec");
            json_object_set_new(ls, "holderIdentity", json_string(e->o.identity));
            json_object_set_new(ls, "leaseDurationSeconds", json_integer(e->o.lease_seconds));
            json_object_set_new(ls, "renewTime", json_string(now));
            if (!mine) {
                json_object_set_new(ls, "acquireTime", json_string(now));
                json_int_t tr = json_integer_value(json_object_get(ls, "leaseTransitions"));
                json_object_set_new(ls, "leaseTransitions", json_integer(tr + 1));
            }
            KubeReply w = {0};
            rc = kube_request(a, "PUT", buf_str(&path), NULL, l, &w, err);
            json_decref(l);
            leader = rc == 0 && w.status == 200;
            if (rc == 0 && w.status != 200 && w.status != 409) {
                buf_printf(err, "updating Lease %s/%s: %s", e->o.namespace_, e->o.lease_name,
                           kube_reply_message(&w));
                rc = w.status == 403 ? -EACCES : -EIO;
            }
            if (leader && !mine)
                log_info("event=lease_acquired lease=%s/%s identity=%s previous=%s",
                         e->o.namespace_, e->o.lease_name, e->o.identity,
                         holder && *holder ? holder : "none");
            kube_reply_free(&w);
        }
    } else {
        buf_printf(err, "reading Lease %s/%s: %s", e->o.namespace_, e->o.lease_name,
                   kube_reply_message(&r));
        rc = r.status == 403 ? -EACCES : -EIO;
    }
    kube_reply_free(&r);
    buf_free(&path);
    if (rc < 0)
        return rc;
    *ret_leader = leader;
    return 0;
}

void *klease_main(void *arg)
{
    KubeEngine *e = arg;
    KubeApi *a = NULL;
    if (kube_api_new(&e->cfg, 5000, &a) < 0)
        return NULL;
    int64_t renewed = mono_ms();
    while (!e->stop) {
        for (int i = 0; i < e->o.lease_seconds * 1000 / 3 / 100 && !e->stop; i++)
            usleep(100 * 1000);
        if (e->stop)
            break;
        bool leader = false;
        Buf err = {0};
        int r = klease_try(e, a, &leader, &err);
        if (r == 0 && leader) {
            renewed = mono_ms();
        } else if (r == 0 || mono_ms() - renewed > (int64_t)e->o.lease_seconds * 1000) {
            /* someone else holds it, or we could not renew for a whole lease: another
             * replica may lead now; two must never bind at once */
            log_error("event=lease_lost lease=%s/%s identity=%s reason=\"%s\" action=exit",
                      e->o.namespace_, e->o.lease_name, e->o.identity,
                      r == 0 ? "another replica holds it" : buf_str(&err));
            _exit(1);
        }
        buf_free(&err);
    }
    kube_api_free(a);
    return NULL;
}
