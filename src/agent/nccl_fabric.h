/* nccl_fabric.h: the environment a multi-node NCCL job needs on this node's fabric.
 * The kind of fabric comes from the pool's `fabric` label in the cluster spec when the
 * label names one, else from what discovery found (fabric.h); the values (which HCAs,
 * which interface, which GID index) always come from discovery. launch_env puts the
 * result under the job's own env, so a job that sets a variable keeps its value. */
#pragma once

#include "agent/fabric.h"

typedef enum FabricKind {
    FABRIC_UNKNOWN,
    FABRIC_INFINIBAND,
    FABRIC_ROCE,
    FABRIC_EFA,      /* AWS Elastic Fabric Adapter, through aws-ofi-nccl */
    FABRIC_TCPX,     /* Google Cloud GPUDirect-TCPX, through its NCCL plugin */
    FABRIC_AZURE_IB, /* InfiniBand on Azure's ND-series virtual machines */
} FabricKind;

/* The kind a label names, matching words case-insensitively: "azure" -> Azure IB;
 * "tcpx" -> TCPX; "efa" -> EFA; "roce" (also "rocev2") -> RoCE; "infiniband", "ib",
 * "ndr", "hdr", "edr", "xdr" -> InfiniBand. FABRIC_UNKNOWN for NULL, "" or none. */
FabricKind nccl_fabric_kind_from_label(const char *label);
/* The kind the node's devices say: an EFA device -> EFA; an active InfiniBand port ->
 * InfiniBand; an active Ethernet port with a RoCE v2 GID -> RoCE. Never TCPX or Azure:
 * a gVNIC or a Hyper-V VM alone does not prove them; the label must say. */
FabricKind nccl_fabric_kind_infer(const FabricInfo *f);
/* "infiniband", "roce", "efa", "tcpx", "azure-infiniband"; "unknown". */
const char *nccl_fabric_kind_name(FabricKind k);

/* The variables for label's kind (else the inferred one) on f, as a NULL-terminated
 * array of "NAME=value" the caller frees with nccl_fabric_env_free. *ret is NULL when
 * the kind is unknown or f has nothing the kind can use. 0, or -ENOMEM. */
int nccl_fabric_env(const FabricInfo *f, const char *label, char ***ret);
void nccl_fabric_env_free(char **env);
