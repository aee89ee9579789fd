/* fabric.h: what the node's network looks like to NCCL, read from sysfs once at agent
 * start: the RDMA ports (/sys/class/infiniband/<dev>/ports/<n>) with their state, link
 * layer, rate and RoCE v2 GID index, and the network interfaces (/sys/class/net/<if>)
 * with their state and driver. The parsing of each sysfs file is a pure function of
 * its text, apart from the directory walk, so both are tested on their own (tests pass
 * a fake root). nccl_fabric.h turns what was found into a worker's environment. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FABRIC_MAX_PORTS 64
#define FABRIC_MAX_IFS   64
#define FABRIC_NAME_MAX  64

typedef enum FabricLink { FLINK_UNKNOWN, FLINK_INFINIBAND, FLINK_ETHERNET } FabricLink;

/* One port of one RDMA device. */
typedef struct FabricPort {
    char dev[FABRIC_NAME_MAX];    /* "mlx5_0", "efa_0" */
    unsigned port;                /* 1-based, as sysfs numbers them */
    bool active;                  /* state is "4: ACTIVE" */
    bool efa;                     /* an AWS Elastic Fabric Adapter (name efa_* or driver efa) */
    uint8_t link;                 /* FabricLink */
    unsigned rate_gbps;           /* 0: unknown */
    int roce_v2_gid;              /* the first non-zero GID of type RoCE v2; -1: none */
    char netdev[FABRIC_NAME_MAX]; /* gid_attrs/ndevs/<roce_v2_gid>: its interface; "" */
} FabricPort;

/* One network interface with a device behind it (lo and virtual ones are skipped). */
typedef struct FabricIf {
    char name[FABRIC_NAME_MAX];
    char driver[FABRIC_NAME_MAX]; /* "mlx5_core", "gve" (Google gVNIC), "ena" (AWS); "" unknown */
    bool up;                      /* operstate is "up" */
} FabricIf;

typedef struct FabricInfo {
    FabricPort ports[FABRIC_MAX_PORTS]; /* sorted by device, then port */
    size_t n_ports;
    FabricIf ifs[FABRIC_MAX_IFS]; /* sorted by name */
    size_t n_ifs;
} FabricInfo;

/* Walk sysfs_root ("/sys" on a real node) and fill *ret. A missing class directory is
 * no error (a node without RDMA has none): the list is empty. Entries past the limits
 * are dropped. Always 0; it never allocates what outlives the call. */
int fabric_discover(const char *sysfs_root, FabricInfo *ret);

/* ---- the parsing of one sysfs file's text (trailing newline allowed) ---- */

/* ports/<n>/state: "4: ACTIVE" -> true. */
bool fabric_parse_active(const char *text);
/* ports/<n>/link_layer: "InfiniBand" or "Ethernet". */
FabricLink fabric_parse_link_layer(const char *text);
/* ports/<n>/rate: "400 Gb/sec (4X NDR)" -> 400; 0 when not a number. */
unsigned fabric_parse_rate_gbps(const char *text);
/* gid_attrs/types/<i>: "RoCE v2" (not "IB/RoCE v1"). */
bool fabric_parse_roce_v2(const char *text);
/* gids/<i>: "0000:0000:0000:0000:0000:0000:0000:0000" (an unused slot) -> true; also
 * true for text that is not a GID, so a garbled slot is never chosen. */
bool fabric_parse_gid_zero(const char *text);
/* net/<if>/operstate: "up". */
bool fabric_parse_up(const char *text);
