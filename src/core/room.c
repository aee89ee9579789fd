/* room.c: capacity sums per topology domain for one request (room.h). */
#include "core/room.h"

#include "util/macro.h"

#include <errno.h>
#include <stdlib.h>

/* The widest domain place_job may fill r in: a required scope bounds a gang; otherwise
 * (and under a policy that places workers one by one) the cluster is one domain. */
static uint32_t domain_of(const PlaceCtx *ctx, const Cluster *c, const Request *r, const Node *n)
{
    if (!r->scope_required || r->scope == SCOPE_ANY || (ctx->policy->flags & POLICY_NO_GANG))
        return 0;
    uint32_t none = (uint32_t)c->n_switches;
    switch (r->scope) {
    case SCOPE_LEAF:
        return n->leaf != NO_SWITCH ? n->leaf : none;
    case SCOPE_SPINE:
        return n->spine != NO_SWITCH ? n->spine : n->leaf != NO_SWITCH ? n->leaf : none;
    default:
        return (uint32_t)(n - c->nodes); /* SCOPE_NODE */
    }
}

/* What node can take of r now; none where the placer is kept out (ctx->blocked). */
static unsigned node_room(const PlaceCtx *ctx, const Cluster *c, uint32_t node, const Request *r,
                          unsigned want)
{
    if (ctx->blocked && ctx->blocked[node])
        return 0;
    return place_node_capacity(ctx, c, node, r, want);
}

int room_init(Room *rm, const PlaceCtx *ctx, const Cluster *c, const Request *r)
{
    size_t nn = c->n_nodes ? c->n_nodes : 1;
    size_t nd = MAX(c->n_switches + 1, c->n_nodes) + 1;
    *rm = (Room){.ctx = ctx, .r = r, .n_dom = nd};
    rm->cap = malloc(nn * sizeof(*rm->cap));
    rm->dom = malloc(nn * sizeof(*rm->dom));
    rm->sum = calloc(nd, sizeof(*rm->sum));
    if (!rm->cap || !rm->dom || !rm->sum) {
        room_free(rm);
        return -ENOMEM;
    }
    uint32_t want = r->workers ? r->workers : 1;
    for (size_t i = 0; i < c->n_nodes; i++) {
        rm->dom[i] = domain_of(ctx, c, r, &c->nodes[i]);
        rm->cap[i] = node_room(ctx, c, (uint32_t)i, r, want);
        rm->sum[rm->dom[i]] += rm->cap[i];
    }
    for (size_t d = 0; d < nd; d++)
        rm->n_enough += rm->sum[d] >= want;
    return 0;
}

void room_free(Room *rm)
{
    free(rm->cap);
    free(rm->sum);
    free(rm->dom);
    *rm = (Room){0};
}

void room_update(Room *rm, const Cluster *c, uint32_t node)
{
    uint32_t want = rm->r->workers ? rm->r->workers : 1;
    uint32_t now = node_room(rm->ctx, c, node, rm->r, want);
    uint64_t *sum = &rm->sum[rm->dom[node]];
    bool was = *sum >= want;
    *sum = *sum - rm->cap[node] + now;
    rm->cap[node] = now;
    bool is = *sum >= want;
    if (is && !was)
        rm->n_enough++;
    else if (was && !is)
        rm->n_enough--;
}

bool room_enough(const Room *rm)
{
    return rm->n_enough > 0;
}
