/* inventory.c: the agent's read-only look at its GPUs (inventory.h). The GPUs are
 * printed exactly as the heartbeat carries them (proto.c), their readings and health
 * included, so what this shows is what the server would be told. */
#include "agent/inventory.h"

#include "agent/fabric.h"
#include "agent/gpus.h"
#include "agent/nccl_fabric.h"
#include "agent/proto.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>

/* The RDMA ports and interfaces found, and what a multi-node job's workers would get
 * for NCCL when the node's pool names no fabric (inferred from the devices). */
static json_t *fabric_json(const char *sysfs_root)
{
    FabricInfo *f = calloc(1, sizeof(*f));
    if (!f)
        return NULL;
    fabric_discover(sysfs_root ? sysfs_root : "/sys", f);
    json_t *ports = json_array(), *ifs = json_array(), *env = json_array();
    for (size_t i = 0; i < f->n_ports; i++) {
        const FabricPort *p = &f->ports[i];
        json_array_append_new(
            ports, json_pack("{ss si sb sb ss si si}", "device", p->dev, "port", (int)p->port,
                             "active", p->active, "efa", p->efa, "link",
                             p->link == FLINK_INFINIBAND ? "infiniband"
                             : p->link == FLINK_ETHERNET ? "ethernet"
                                                         : "unknown",
                             "rate_gbps", (int)p->rate_gbps, "roce_v2_gid", p->roce_v2_gid));
    }
    for (size_t i = 0; i < f->n_ifs; i++)
        json_array_append_new(ifs, json_pack("{ss ss sb}", "name", f->ifs[i].name, "driver",
                                             f->ifs[i].driver, "up", f->ifs[i].up));
    char **vars = NULL;
    if (nccl_fabric_env(f, NULL, &vars) == 0)
        for (char **v = vars; v && *v; v++)
            json_array_append_new(env, json_string(*v));
    nccl_fabric_env_free(vars);
    json_t *j =
        json_pack("{ss so so so}", "inferred", nccl_fabric_kind_name(nccl_fabric_kind_infer(f)),
                  "ports", ports, "interfaces", ifs, "nccl_env", env);
    free(f);
    return j;
}

int agent_inventory(const char *gpus_spec, const char *node, const char *sysfs_root, Buf *out,
                    Buf *err)
{
    GpuBackend *b = NULL;
    /* no state directory: simulated GPUs start from their defaults and keep nothing */
    int r = gpus_open(gpus_spec, node, NULL, &b, err);
    if (r < 0)
        return r;
    AgentGpu *gpus = NULL;
    size_t n = 0;
    GpuProcess *procs = NULL;
    size_t n_procs = 0;
    Buf report = {0};
    json_t *root = NULL;
    if ((r = b->ops->discover(b, &gpus, &n, err)) < 0)
        goto out;
    if (b->ops->processes && (r = b->ops->processes(b, &procs, &n_procs, err)) < 0)
        goto out;
    /* the readings and health the heartbeat would carry: an idle look, nothing held */
    for (size_t i = 0; b->ops->sample && i < n; i++) {
        GpuLoad idle = {0};
        Buf why = {0};
        GpuSample smp;
        if (b->ops->sample(b, &gpus[i], &idle, &smp, &why) == 0)
            gpus[i].sample = smp;
        buf_free(&why);
    }
    GpuHealth *h = b->ops->health && n ? calloc(n, sizeof(*h)) : NULL;
    Buf hwhy = {0};
    if (h && b->ops->health(b, h, n, &hwhy) == 0)
        for (size_t i = 0; i < n; i++)
            snprintf(gpus[i].health, sizeof(gpus[i].health), "%s", h[i].why);
    buf_free(&hwhy);
    free(h);
    if ((r = proto_heartbeat(node, NULL, "", NULL, gpus, n, NULL, 0, NULL, false, &report)) < 0) {
        buf_puts(err, "out of memory");
        goto out;
    }
    json_error_t je;
    json_t *hb = json_loadb(report.data, report.len, 0, &je);
    json_t *pa = json_array();
    for (size_t i = 0; i < n_procs && pa; i++)
        json_array_append_new(pa, json_pack("{sI sI}", "pid", (json_int_t)procs[i].pid, "used_mib",
                                            (json_int_t)procs[i].used_mib));
    json_t *ga = json_object_get(hb, "gpus");
    json_t *fa = fabric_json(sysfs_root);
    if (ga && pa && fa)
        root = json_pack("{ss ss sO sO sO}", "node", node, "backend", b->ops->name, "gpus", ga,
                         "processes", pa, "fabric", fa);
    json_decref(fa);
    json_decref(pa);
    json_decref(hb);
    char *text = root ? json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
    if (!text) {
        r = -ENOMEM;
        buf_puts(err, "out of memory");
        goto out;
    }
    buf_puts(out, text);
    buf_putc(out, '\n');
    free(text);
out:
    json_decref(root);
    buf_free(&report);
    free(procs);
    free(gpus);
    gpus_close(b);
    return r;
}
