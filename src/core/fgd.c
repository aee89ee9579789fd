/* fgd.c: Fragmentation Gradient Descent as published (Weng et al., ATC'23): place
 * where the node's fragmentation against the expected mix grows least, scored as
 * trunc(100 * sigmoid(-growth / 1000)) like the authors' simulator; a share goes to
 * the first GPU reaching the node's best score. MIG requests (which the paper does
 * not know) take the placer's default slice. */
#include "core/frag.h"
#include "core/mix.h"
#include "core/policies.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

static double quantize(double drop)
{
    return trunc(100.0 / (1.0 + exp(-drop / 1000.0)));
}

/* FGD scores against its typical requests: the common shapes of the expected mix. */
int fgd_init(PlaceCtx *ctx, const Cluster *c)
{
    FragCache *fc = malloc(sizeof(*fc));
    if (!fc)
        return -ENOMEM;
    Mix typical = {0};
    int err = ctx->mix ? mix_typical(ctx->mix, FGD_TYPICAL_SHARE, &typical) : 0;
    if (!err)
        err = frag_cache_init(fc, c, &typical);
    mix_free(&typical);
    if (err < 0) {
        free(fc);
        return err;
    }
    ctx->policy_state = fc;
    return 0;
}

void fgd_fini(PlaceCtx *ctx)
{
    FragCache *fc = ctx->policy_state;
    if (fc) {
        frag_cache_free(fc);
        free(fc);
    }
    ctx->policy_state = NULL;
}

/* Score of each GPU a share could take; returns the best and its first GPU. */
static double best_share(FragCache *fc, const Cluster *c, const Node *n, const Request *r,
                         double base, unsigned *ret_index)
{
    NodeView v;
    frag_view(c, n, &v);
    unsigned want = r->share_milli[n->model];
    double best = -1;
    for (unsigned i = 0; i < v.n; i++) {
        if (v.left[i] < want || place_share_room(c, n, r, i) < want)
            continue;
        NodeView w = v;
        frag_view_take_share(&w, r, i, want);
        double s = quantize(base - frag_node(&fc->fm, &w, false));
        if (s > best) {
            best = s;
            *ret_index = i;
        }
    }
    return best;
}

double fgd_score(PlaceCtx *ctx, const Cluster *c, uint32_t node, const Request *r)
{
    FragCache *fc = ctx->policy_state;
    const Node *n = &c->nodes[node];
    double base = frag_cache_base(fc, c, node, false);
    SliceMode mode = place_slice_mode(c, n, r);
    unsigned index = 0;
    if (r->kind != REQ_NONE && r->kind != REQ_GPUS && mode == SLICE_SHARE)
        return best_share(fc, c, n, r, base, &index);
    NodeView v;
    frag_view(c, n, &v);
    if (mode == SLICE_MIG && r->kind != REQ_GPUS) {
        SlicePick pick = {0};
        place_default_pick(ctx, c, node, r, &pick);
        frag_view_take_mig(&v, r, pick.index, r->mig_profile[n->model], pick.start);
    } else {
        frag_view_take_whole(&v, r, r->kind == REQ_GPUS ? r->gpus : 0);
    }
    return quantize(base - frag_node(&fc->fm, &v, false));
}

void fgd_pick_slice(PlaceCtx *ctx, const Cluster *c, uint32_t node, const Request *r,
                    SlicePick *ret)
{
    FragCache *fc = ctx->policy_state;
    const Node *n = &c->nodes[node];
    if (place_slice_mode(c, n, r) != SLICE_SHARE) {
        place_default_pick(ctx, c, node, r, ret);
        return;
    }
    unsigned index = 0;
    best_share(fc, c, n, r, frag_cache_base(fc, c, node, false), &index);
    *ret = (SlicePick){.index = (uint8_t)index};
}
