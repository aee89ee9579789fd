/* nodes_watch.c: the Node objects' events: whether each GPU node takes work (Ready, not
 * cordoned, no taint GPU pods do not tolerate, its last MIG change not failed) and
 * where its MIG manager is with the layout gpuorch asked for. The node set is the one
 * the engine started with: a GPU node that joins later makes the engine ask for a
 * restart (kube_engine_joined), which builds the cluster again with it. */
#include "kube/engine_int.h"

#include "core/mig.h"
#include "util/log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int knode_find(KubeEngine *e, const char *name)
{
    return cluster_find_node(e->s->c, name);
}

static NodeAway away_of(const KNode *kn)
{
    if (!kn->known || !kn->n.ready)
        return AWAY_NOT_READY;
    if (kn->n.unschedulable)
        return AWAY_CORDONED;
    if (kn->n.taint)
        return AWAY_TAINTED;
    if (kn->mig_failed)
        return AWAY_MIG_FAILED;
    return AWAY_NONE;
}

/* Does the node advertise (allocatable nvidia.com/mig-<profile>) at least the instances
 * of each profile that its layout in the core holds? */
static bool advertises_layout(KubeEngine *e, uint32_t idx)
{
    const Cluster *c = e->s->c;
    const Node *n = &c->nodes[idx];
    const GpuModel *m = node_model(c, n);
    unsigned want[MIG_MAX_PROFILES] = {0};
    for (unsigned i = 0; i < n->n_gpus; i++) {
        const Gpu *g = node_gpu_c(c, n, i);
        for (unsigned st = 0; g->mode == GPU_MIG && st < MIG_MAX_SLOTS; st++)
            if (g->mig.profile_at[st] < m->n_profiles)
                want[g->mig.profile_at[st]]++;
    }
    const KubeNode *kn = &e->nodes[idx].n;
    for (unsigned p = 0; p < m->n_profiles; p++) {
        unsigned have = 0;
        for (size_t k = 0; k < kn->n_mig; k++)
            if (!strcmp(kn->mig[k].profile, m->profiles[p].name))
                have = kn->mig[k].count;
        if (have < want[p])
            return false;
    }
    return true;
}

/* Our MIG change on the node: done (its manager says success for our config), failed,
 * or still under way. */
static void follow_mig(KubeEngine *e, uint32_t idx, KNode *kn)
{
    const KubeNode *n = &kn->n;
    if (!kn->mig_want || kn->mig_writing || !n->mig_config || strcmp(n->mig_config, kn->mig_want))
        return;
    if (n->mig_state && !strcmp(n->mig_state, "success") && !advertises_layout(e, idx)) {
        return; /* applied; the device plugin has yet to publish the new devices */
    }
    if (n->mig_state && !strcmp(n->mig_state, "success")) {
        log_info("event=mig_applied node=%s config=%s", n->name, kn->mig_want);
        free(kn->mig_want);
        kn->mig_want = NULL;
        kn->mig_failed = false;
        e->work = true;
    } else if (n->mig_state && !strcmp(n->mig_state, "failed")) {
        log_error("event=mig_failed node=%s config=%s action=node_closed", n->name, kn->mig_want);
        free(kn->mig_want);
        kn->mig_want = NULL;
        kn->mig_failed = true;
        e->work = true;
    }
}

int knode_event(KubeEngine *e, const char *type, json_t *obj)
{
    KubeNode n;
    Buf why = {0};
    int r = kube_node_parse(obj, &e->o.labels, &n, &why);
    if (r < 0) {
        if (r != -ENOMEM) {
            const char *name =
                json_string_value(json_object_get(json_object_get(obj, "metadata"), "name"));
            log_error("event=node_unreadable node=%s reason=\"%s\"", name ? name : "?",
                      buf_str(&why));
        }
        buf_free(&why);
        return r == -ENOMEM ? r : 0;
    }
    buf_free(&why);
    int idx = kube_node_has_gpus(&n) ? knode_find(e, n.name) : -1;
    if (idx < 0 || (size_t)idx >= e->n_nodes) {
        if (kube_node_has_gpus(&n) && strcmp(type, "DELETED") && !e->joined_mono_ms) {
            /* the core's cluster is sized at start: take the node in by starting again
             * (kube_engine_joined), once the nodes joining together have all come */
            log_info("event=node_joined node=%s action=restart_after_s=%d", n.name,
                     KUBE_JOIN_SETTLE_MS / 1000);
            e->joined_mono_ms = server_mono_ms();
        }
        kube_node_free(&n);
        return 0;
    }
    KNode *kn = &e->nodes[idx];
    bool deleted = !strcmp(type, "DELETED");
    kube_node_free(&kn->n);
    kn->n = n;
    kn->known = !deleted;
    /* the failed state stays until someone sets a config that succeeds */
    if (kn->mig_failed && n.mig_state && !strcmp(n.mig_state, "success"))
        kn->mig_failed = false;
    follow_mig(e, (uint32_t)idx, kn);
    if (e->synced)
        server_node_ready(e->s, (uint32_t)idx, away_of(kn), server_now_ms());
    return 0;
}

void knode_mig_failed(KubeEngine *e, uint32_t idx, const char *why)
{
    KNode *kn = &e->nodes[idx];
    log_error("event=mig_failed node=%s config=%s reason=\"%s\" action=node_closed", kn->n.name,
              kn->mig_want ? kn->mig_want : "?", why);
    free(kn->mig_want);
    kn->mig_want = NULL;
    kn->mig_writing = false;
    kn->mig_failed = true;
    e->work = true;
    if (e->synced)
        server_node_ready(e->s, idx, away_of(kn), server_now_ms());
}

/* Changes the MIG manager has not finished in time are failed changes: the node is
 * closed and the runs waiting for it are requeued, rather than wait for ever. */
void knodes_check_mig(KubeEngine *e, int64_t mono_ms)
{
    for (size_t i = 0; i < e->n_nodes; i++) {
        KNode *kn = &e->nodes[i];
        if (kn->mig_want && !kn->mig_writing && mono_ms - kn->mig_since_ms > e->o.mig_timeout_ms)
            knode_mig_failed(e, (uint32_t)i, "the MIG manager did not finish the change in time");
    }
}

void knodes_open(KubeEngine *e)
{
    int64_t now = server_now_ms();
    /* thousands of nodes become ready at once: the scheduler thread writes their
     * capacity spans in one write (nodespan_flush) */
    for (size_t i = 0; i < e->n_nodes; i++)
        server_node_ready(e->s, (uint32_t)i, away_of(&e->nodes[i]), now);
}
