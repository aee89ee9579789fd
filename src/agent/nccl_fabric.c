/* nccl_fabric.c: the table of what each fabric kind sets for a multi-node NCCL job
 * (nccl_fabric.h). Each setting names where its meaning is documented; nothing is set
 * that a node's own discovery cannot back (no guessed interface names), so a variable
 * left out is one NCCL or its plugin then picks by itself.
 *
 * Sources:
 *   [NCCL] NVIDIA NCCL User Guide, "Environment Variables"
 *          (docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html)
 *   [EFA]  AWS EC2 User Guide, "Get started with EFA and NCCL", and aws-ofi-nccl
 *   [TCPX] Google Cloud, "Maximize GPU network bandwidth with GPUDirect-TCPX"
 *   [AZ]   Azure HPC blog, "NCCL Performance Impact with PCIe Relaxed Ordering" */
#include "agent/nccl_fabric.h"

#include "util/buf.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- the kind ---- */

static bool isalnum_ascii(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

static bool word_is(const char *w, size_t n, const char *word)
{
    return n == strlen(word) && strncasecmp(w, word, n) == 0;
}

FabricKind nccl_fabric_kind_from_label(const char *label)
{
    bool azure = false, tcpx = false, efa = false, roce = false, ib = false;
    for (const char *s = label; s && *s;) {
        while (*s && !isalnum_ascii(*s))
            s++;
        const char *w = s;
        while (*s && isalnum_ascii(*s))
            s++;
        size_t n = (size_t)(s - w);
        if (!n)
            break;
        azure |= word_is(w, n, "azure");
        tcpx |= word_is(w, n, "tcpx");
        efa |= word_is(w, n, "efa");
        roce |= word_is(w, n, "roce") || word_is(w, n, "rocev2");
        ib |= word_is(w, n, "infiniband") || word_is(w, n, "ib") || word_is(w, n, "ndr") ||
              word_is(w, n, "hdr") || word_is(w, n, "edr") || word_is(w, n, "xdr");
    }
    /* the cloud's words first: "azure-infiniband" is Azure, "gpudirect-tcpx" is TCPX */
    if (azure)
        return FABRIC_AZURE_IB;
    if (tcpx)
        return FABRIC_TCPX;
    if (efa)
        return FABRIC_EFA;
    if (roce)
        return FABRIC_ROCE;
    return ib ? FABRIC_INFINIBAND : FABRIC_UNKNOWN;
}

FabricKind nccl_fabric_kind_infer(const FabricInfo *f)
{
    bool ib = false, roce = false;
    for (size_t i = 0; i < f->n_ports; i++) {
        const FabricPort *p = &f->ports[i];
        if (p->efa)
            return FABRIC_EFA;
        ib |= p->active && p->link == FLINK_INFINIBAND;
        roce |= p->active && p->link == FLINK_ETHERNET && p->roce_v2_gid >= 0;
    }
    return ib ? FABRIC_INFINIBAND : roce ? FABRIC_ROCE : FABRIC_UNKNOWN;
}

const char *nccl_fabric_kind_name(FabricKind k)
{
    switch (k) {
    case FABRIC_INFINIBAND:
        return "infiniband";
    case FABRIC_ROCE:
        return "roce";
    case FABRIC_EFA:
        return "efa";
    case FABRIC_TCPX:
        return "tcpx";
    case FABRIC_AZURE_IB:
        return "azure-infiniband";
    case FABRIC_UNKNOWN:
        break;
    }
    return "unknown";
}

/* ---- what each kind sets ---- */

typedef struct Vars {
    char **v; /* NULL-terminated once n > 0 */
    size_t n;
    bool oom;
} Vars;

static void put(Vars *e, const char *name, const char *value)
{
    if (e->oom)
        return;
    Buf b = {0};
    buf_printf(&b, "%s=%s", name, value);
    char *entry = b.oom ? NULL : buf_steal(&b);
    char **v = entry ? realloc(e->v, (e->n + 2) * sizeof(char *)) : NULL;
    if (!v) {
        buf_free(&b);
        free(entry);
        e->oom = true;
        return;
    }
    e->v = v;
    e->v[e->n++] = entry;
    e->v[e->n] = NULL;
}

/* The active ports NCCL's IB transport should use: InfiniBand ones (roce false) or
 * Ethernet ones with a RoCE v2 GID (roce true), as "=mlx5_0:1,mlx5_1:1" ([NCCL]
 * NCCL_IB_HCA: a leading '=' matches the names exactly, ":<port>" picks the port). */
static void hca_list(const FabricInfo *f, bool roce, Buf *out)
{
    for (size_t i = 0; i < f->n_ports; i++) {
        const FabricPort *p = &f->ports[i];
        bool use =
            p->active && !p->efa &&
            (roce ? p->link == FLINK_ETHERNET && p->roce_v2_gid >= 0 : p->link == FLINK_INFINIBAND);
        if (use)
            buf_printf(out, "%s%s:%u", out->len ? "," : "=", p->dev, p->port);
    }
}

/* The first interface that is up and matches: driver (NULL: any), and a name that does
 * (ipoib true) or does not (false) begin with "ib", the IPoIB interfaces. NULL: none. */
static const FabricIf *first_if(const FabricInfo *f, const char *driver, int ipoib)
{
    for (size_t i = 0; i < f->n_ifs; i++) {
        const FabricIf *x = &f->ifs[i];
        bool is_ib = strncmp(x->name, "ib", 2) == 0;
        if (x->up && (!driver || strcmp(x->driver, driver) == 0) &&
            (ipoib < 0 || is_ib == (ipoib > 0)))
            return x;
    }
    return NULL;
}

/* [NCCL] NCCL_SOCKET_IFNAME: "=<name>" is that interface only. NCCL's bootstrap and
 * its socket transport use it; the RDMA traffic does not. */
static void socket_ifname(Vars *e, const FabricIf *x)
{
    if (!x)
        return;
    Buf b = {0};
    buf_printf(&b, "=%s", x->name);
    if (b.oom)
        e->oom = true;
    else
        put(e, "NCCL_SOCKET_IFNAME", buf_str(&b));
    buf_free(&b);
}

static void infiniband(const FabricInfo *f, Vars *e, bool azure)
{
    Buf hca = {0};
    hca_list(f, false, &hca);
    if (hca.len) {
        put(e, "NCCL_IB_HCA", buf_str(&hca)); /* [NCCL] the HCAs found active */
        if (azure) {
            /* [NCCL] NCCL_IB_PCI_RELAXED_ORDERING=1 enables PCIe Relaxed Ordering for
             * the IB Verbs transport (default 2: only where NCCL detects it helps); [AZ]
             * Azure's ND-series VMs, virtualised, need it on for full bandwidth */
            put(e, "NCCL_IB_PCI_RELAXED_ORDERING", "1");
            /* Azure's bootstrap network is the VM's Ethernet (eth0), not IPoIB */
            socket_ifname(e, first_if(f, NULL, 0));
        } else {
            const FabricIf *x = first_if(f, NULL, 1);
            socket_ifname(e, x ? x : first_if(f, NULL, 0));
        }
    }
    e->oom |= hca.oom;
    buf_free(&hca);
}

static void roce(const FabricInfo *f, Vars *e)
{
    Buf hca = {0};
    hca_list(f, true, &hca);
    if (!hca.len) {
        buf_free(&hca);
        return;
    }
    put(e, "NCCL_IB_HCA", buf_str(&hca));
    /* [NCCL] NCCL_IB_GID_INDEX: the GID index RoCE uses. Set only when every port
     * found has its RoCE v2 GID at the same index (one value is global); else NCCL's
     * own choice (a RoCE v2 GID since 2.21) is better than a wrong one */
    int gid = -1;
    bool same = true;
    const FabricIf *netdev = NULL;
    for (size_t i = 0; i < f->n_ports; i++) {
        const FabricPort *p = &f->ports[i];
        if (!p->active || p->efa || p->link != FLINK_ETHERNET || p->roce_v2_gid < 0)
            continue;
        same = same && (gid < 0 || gid == p->roce_v2_gid);
        gid = gid < 0 ? p->roce_v2_gid : gid;
        for (size_t k = 0; !netdev && k < f->n_ifs; k++)
            if (f->ifs[k].up && strcmp(f->ifs[k].name, p->netdev) == 0)
                netdev = &f->ifs[k];
    }
    if (same && gid >= 0) {
        Buf b = {0};
        buf_printf(&b, "%d", gid);
        put(e, "NCCL_IB_GID_INDEX", buf_str(&b));
        e->oom |= b.oom;
        buf_free(&b);
    }
    /* the RoCE port's own interface (its GID's ndev), else the first Mellanox one */
    socket_ifname(e, netdev ? netdev : first_if(f, "mlx5_core", -1));
    e->oom |= hca.oom;
    buf_free(&hca);
}

static void efa(const FabricInfo *f, Vars *e)
{
    bool any = false;
    for (size_t i = 0; i < f->n_ports; i++)
        any |= f->ports[i].efa;
    if (!any)
        return;
    /* [EFA] libfabric's EFA provider for aws-ofi-nccl, and GPUDirect RDMA through the
     * device (the EFA docs set it on instances whose EFA supports RDMA read: p4d, p5) */
    put(e, "FI_PROVIDER", "efa");
    put(e, "FI_EFA_USE_DEVICE_RDMA", "1");
    /* [NCCL] bootstrap on the ENA interface (the AWS Elastic Network Adapter) */
    socket_ifname(e, first_if(f, "ena", -1));
}

static void tcpx(const FabricInfo *f, Vars *e)
{
    /* [TCPX] the first gVNIC (eth0) carries control and bootstrap, the others the
     * GPU data; without a data NIC there is no GPUDirect-TCPX to set up */
    const FabricIf *ctrl = first_if(f, "gve", -1);
    Buf data = {0};
    for (size_t i = 0; ctrl && i < f->n_ifs; i++) {
        const FabricIf *x = &f->ifs[i];
        if (x != ctrl && x->up && strcmp(x->driver, "gve") == 0)
            buf_printf(&data, "%s%s", data.len ? "," : "", x->name);
    }
    if (data.len) {
        socket_ifname(e, ctrl);
        put(e, "NCCL_GPUDIRECTTCPX_CTRL_DEV", ctrl->name);
        put(e, "NCCL_GPUDIRECTTCPX_SOCKET_IFNAME", buf_str(&data));
    }
    e->oom |= data.oom;
    buf_free(&data);
}

int nccl_fabric_env(const FabricInfo *f, const char *label, char ***ret)
{
    FabricKind k = nccl_fabric_kind_from_label(label);
    if (k == FABRIC_UNKNOWN)
        k = nccl_fabric_kind_infer(f);
    Vars e = {0};
    switch (k) {
    case FABRIC_INFINIBAND:
        infiniband(f, &e, false);
        break;
    case FABRIC_AZURE_IB:
        infiniband(f, &e, true);
        break;
    case FABRIC_ROCE:
        roce(f, &e);
        break;
    case FABRIC_EFA:
        efa(f, &e);
        break;
    case FABRIC_TCPX:
        tcpx(f, &e);
        break;
    case FABRIC_UNKNOWN:
        break;
    }
    if (e.oom) {
        nccl_fabric_env_free(e.v);
        return -ENOMEM;
    }
    *ret = e.v;
    return 0;
}

void nccl_fabric_env_free(char **env)
{
    for (char **p = env; p && *p; p++)
        free(*p);
    free(env);
}
