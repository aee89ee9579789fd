/* migcfg.c: MIG layouts as the GPU Operator's MIG manager takes them: an entry of a
 * mig-parted config (`version: v1`, `mig-configs: {NAME: [{devices, mig-enabled,
 * mig-devices}]}`) in a ConfigMap the MIG manager is pointed at, chosen per node by the
 * node's `nvidia.com/mig.config` label. An entry holds the whole node's layout and is
 * named after a hash of it, so nodes with the same layout share one entry and the
 * ConfigMap grows with the distinct layouts in use, not with the nodes. mig-parted
 * counts instances per profile; where on the GPU each sits is the MIG manager's choice. */
#include "kube/engine_int.h"

#include "core/mig.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

void kmig_entry(const Cluster *c, uint32_t node, Buf *ret)
{
    const Node *n = &c->nodes[node];
    const GpuModel *m = node_model(c, n);
    for (unsigned i = 0; i < n->n_gpus; i++) {
        const Gpu *g = node_gpu_c(c, n, i);
        if (g->mode != GPU_MIG) {
            buf_printf(ret, "    - devices: [%u]\n      mig-enabled: false\n", i);
            continue;
        }
        buf_printf(ret, "    - devices: [%u]\n      mig-enabled: true\n      mig-devices:\n", i);
        unsigned count[MIG_MAX_PROFILES] = {0};
        MigInstance inst[MIG_MAX_SLOTS];
        size_t k = mig_layout_list(&g->mig, inst);
        for (size_t q = 0; q < k; q++)
            if (inst[q].profile < m->n_profiles)
                count[inst[q].profile]++;
        for (unsigned p = 0; p < m->n_profiles; p++)
            if (count[p])
                buf_printf(ret, "        \"%s\": %u\n", m->profiles[p].name, count[p]);
    }
}

void kmig_name(const char *entry, Buf *ret)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a: short, stable names for label values */
    for (const unsigned char *p = (const unsigned char *)entry; *p; p++)
        h = (h ^ *p) * 1099511628211ull;
    buf_printf(ret, "gpuorch-%016llx", (unsigned long long)h);
}

#define CONFIG_KEY "config.yaml"
#define CONFIG_HEAD                                                                                \
    "version: v1\n"                                                                                \
    "mig-configs:\n"                                                                               \
    "  all-disabled:\n"                                                                            \
    "    - devices: all\n"                                                                         \
    "      mig-enabled: false\n"

int kmig_write(KubeEngine *e, KubeApi *a, const char *name, const char *node, const char *entry,
               Buf *err)
{
    Buf path = {0}, text = {0}, marker = {0};
    buf_printf(&path, "/api/v1/namespaces/%s/configmaps/%s", e->o.mig_namespace,
               e->o.mig_configmap);
    KubeReply r = {0};
    int rc = kube_request(a, "GET", buf_str(&path), NULL, NULL, &r, err);
    if (rc < 0)
        goto out;
    bool exists = r.status == 200;
    if (!exists && r.status != 404) {
        buf_printf(err, "reading ConfigMap %s/%s: %s", e->o.mig_namespace, e->o.mig_configmap,
                   kube_reply_message(&r));
        rc = r.status == 403 ? -EACCES : -EIO;
        goto out;
    }
    const char *old =
        exists ? json_string_value(json_object_get(json_object_get(r.body, "data"), CONFIG_KEY))
               : NULL;
    buf_printf(&text, "%s", old && *old ? old : CONFIG_HEAD);
    buf_printf(&marker, "\n  %s:\n", name);
    if (!strstr(buf_str(&text), buf_str(&marker))) {
        if (text.len && buf_str(&text)[text.len - 1] != '\n')
            buf_putc(&text, '\n');
        buf_printf(&text, "  %s:\n%s", name, entry);
    } else {
        goto out; /* the layout is there already: another node has it */
    }
    json_t *cm = json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:s}}", "apiVersion", "v1", "kind",
                           "ConfigMap", "metadata", "name", e->o.mig_configmap, "namespace",
                           e->o.mig_namespace, "data", CONFIG_KEY, buf_str(&text));
    if (exists) {
        /* optimistic concurrency: a stale version is refused (409) and written again */
        json_t *md = json_object_get(cm, "metadata");
        json_object_set(md, "resourceVersion",
                        json_object_get(json_object_get(r.body, "metadata"), "resourceVersion"));
    }
    KubeReply w = {0};
    if (!exists) {
        buf_reset(&path);
        buf_printf(&path, "/api/v1/namespaces/%s/configmaps", e->o.mig_namespace);
    }
    rc = kube_request(a, exists ? "PUT" : "POST", buf_str(&path), NULL, cm, &w, err);
    json_decref(cm);
    if (rc == 0 && w.status == 409) {
        kube_reply_free(&w);
        kube_reply_free(&r);
        buf_free(&path);
        buf_free(&text);
        buf_free(&marker);
        return kmig_write(e, a, name, node, entry, err);
    }
    if (rc == 0 && w.status != 200 && w.status != 201) {
        buf_printf(err, "writing ConfigMap %s/%s for node %s: %s", e->o.mig_namespace,
                   e->o.mig_configmap, node, kube_reply_message(&w));
        rc = w.status == 403 ? -EACCES : -EIO;
    }
    kube_reply_free(&w);
out:
    kube_reply_free(&r);
    buf_free(&path);
    buf_free(&text);
    buf_free(&marker);
    return rc;
}
