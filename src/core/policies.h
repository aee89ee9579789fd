/* policies.h: the functions behind the policy table (policy.c), one file per family.
 * Only place.c's table and the tests use these names directly. */
#pragma once

#include "core/place.h"

double node_gpu_left(const Node *n);

/* The placer's default choice of GPU (and MIG start) for a slice. */
void place_default_pick(PlaceCtx *ctx, const Cluster *c, uint32_t node, const Request *r,
                        SlicePick *ret);

/* peers.c: the FGD paper's baselines */
double peer_dot_product_score(PlaceCtx *ctx, const Cluster *c, uint32_t node, const Request *r);
double peer_gpu_packing_score(PlaceCtx *ctx, const Cluster *c, uint32_t node, const Request *r);
double peer_gpu_clustering_score(PlaceCtx *ctx, const Cluster *c, uint32_t node, const Request *r);

/* fgd.c */
int fgd_init(PlaceCtx *ctx, const Cluster *c);
void fgd_fini(PlaceCtx *ctx);
double fgd_score(PlaceCtx *ctx, const Cluster *c, uint32_t node, const Request *r);
void fgd_pick_slice(PlaceCtx *ctx, const Cluster *c, uint32_t node, const Request *r,
                    SlicePick *ret);

/* gpuorch.c */
int gpuorch_init(PlaceCtx *ctx, const Cluster *c);
void gpuorch_fini(PlaceCtx *ctx);
double gpuorch_score(PlaceCtx *ctx, const Cluster *c, uint32_t node, const Request *r);
void gpuorch_pick_slice(PlaceCtx *ctx, const Cluster *c, uint32_t node, const Request *r,
                        SlicePick *ret);
