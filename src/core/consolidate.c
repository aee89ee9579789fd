/* consolidate.c: emptying nearly empty partitioned GPUs by moving their servers (the
 * rules are in consolidate.h). Replacements are placed with the GPU being emptied
 * drained and reserved or claimed nodes kept out; a GPU whose jobs do not all find room
 * is put back as it was. */
#include "core/consolidate.h"

#include "core/learn.h"
#include "core/place.h"
#include "util/macro.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

typedef struct Cand {
    uint32_t node;
    uint8_t gpu;
    uint32_t used;
} Cand;

static int cand_cmp(const void *a, const void *b)
{
    const Cand *x = a, *y = b;
    if (x->used != y->used)
        return x->used < y->used ? -1 : 1;
    if (x->node != y->node)
        return x->node < y->node ? -1 : 1;
    return (x->gpu > y->gpu) - (x->gpu < y->gpu);
}

static bool movable_now(const Sched *s, const SchedJob *j, int64_t now)
{
    return j->movable && !j->stopping && !j->moving && j->pl.n_workers == 1 &&
           j->pl.workers[0].n_grants == 1 && j->pl.workers[0].grants[0].kind != GRANT_WHOLE &&
           now - j->placed_ms >= s->cfg.min_runtime_ms;
}

static void mark_gpus(const Cluster *c, const Placement *pl, uint8_t *stuck)
{
    for (size_t w = 0; w < pl->n_workers; w++) {
        const WorkerAlloc *wa = &pl->workers[w];
        for (unsigned g = 0; g < wa->n_grants; g++)
            stuck[c->nodes[wa->node].gpu0 + wa->grants[g].index] = 1;
    }
}

/* The replacement went into room a partitioned or shared GPU already had, with at least
 * the GPU memory the server has now (it may use all of it). */
static bool in_existing_room(const Cluster *c, const Placement *p, const Placement *old)
{
    if (p->n_workers != 1 || p->workers[0].n_grants != 1)
        return false;
    const WorkerAlloc *w = &p->workers[0];
    if (learn_granted_mib(c, w) < learn_granted_mib(c, &old->workers[0]))
        return false;
    const Grant *gr = &w->grants[0];
    const Gpu *g = node_gpu_c(c, &c->nodes[w->node], gr->index);
    switch (gr->kind) {
    case GRANT_MIG:
        return (g->mig_busy & (uint8_t) ~(1u << gr->mig_start)) != 0;
    case GRANT_SHARE:
        return g->n_clients > 1;
    default:
        return false;
    }
}

/* Move every job on GPU (node, gpu) or none: 1 moved, 0 not, -ENOMEM. The moved jobs are
 * appended to *moved. */
static int empty_gpu(Sched *s, const Cand *cand, SchedJob **holders, size_t n_holders,
                     uint8_t *stuck, SchedJob ***moved, size_t *n_moved, size_t *moved_cap)
{
    Cluster *c = s->c;
    const Node *nd = &c->nodes[cand->node];
    bool was_draining = node_gpu_c(c, nd, cand->gpu)->draining;
    cluster_set_draining(c, cand->node, cand->gpu, true);
    size_t first = *n_moved;
    int err = 0;
    bool ok = true;
    for (size_t k = 0; k < n_holders && ok && !err; k++) {
        SchedJob *j = holders[k];
        const WorkerAlloc *wa = &j->pl.workers[0];
        if (j->pl.n_workers != 1 || wa->n_grants != 1 || wa->node != cand->node ||
            wa->grants[0].index != cand->gpu)
            continue;
        Request req = j->req;
        req.workers = 1;
        s->ctx->blocked = s->blocked;
        Placement p = {0};
        int placed = place_job(s->ctx, c, &req, &p, NULL);
        s->ctx->blocked = NULL;
        if (placed < 0) {
            err = placed;
        } else if (placed == 1 && !in_existing_room(c, &p, &j->pl)) {
            place_undo(c, &p);
            placed = 0;
        }
        if (placed == 1 && GROW(*moved, *moved_cap, *n_moved + 1) < 0)
            err = -ENOMEM;
        if (err || placed != 1) {
            if (placed == 1)
                place_undo(c, &p);
            placement_free(&p);
            ok = false;
            break;
        }
        mark_gpus(c, &p, stuck);
        placement_free(&j->moved_from);
        j->moved_from = j->pl;
        j->pl = p;
        j->moving = true;
        (*moved)[(*n_moved)++] = j;
    }
    if (ok && !err)
        return 1;
    /* put back those moved: their replacements go, their old allocations stay */
    for (size_t k = *n_moved; k-- > first;) {
        SchedJob *j = (*moved)[k];
        place_undo(c, &j->pl);
        placement_free(&j->pl);
        j->pl = j->moved_from;
        j->moved_from = (Placement){0};
        j->moving = false;
    }
    *n_moved = first;
    cluster_set_draining(c, cand->node, cand->gpu, was_draining);
    return err;
}

int consolidate(Sched *s, unsigned want, SchedJob **running, size_t n_running, int64_t now,
                SchedJob ***ret, size_t *ret_n)
{
    Cluster *c = s->c;
    *ret = NULL;
    *ret_n = 0;
    if (!want)
        return 0;
    /* a partitioned GPU light enough to empty, first: without one the holders' GPUs need
     * not be looked at */
    bool any = false;
    for (size_t n = 0; n < c->n_nodes && !any; n++) {
        const Node *nd = &c->nodes[n];
        for (unsigned i = 0; nd->schedulable && i < nd->n_gpus && !any; i++) {
            const Gpu *g = node_gpu_c(c, nd, i);
            any = ((g->mode == GPU_MIG && g->mig_busy) || g->mode == GPU_SHARED) &&
                  g->used_units <= CONSOLIDATE_MAX_USED;
        }
    }
    if (!any)
        return 0;
    size_t n_holders = n_running + s->n_started;
    SchedJob **holders = malloc((n_holders ? n_holders : 1) * sizeof(*holders));
    uint8_t *stuck = calloc(c->n_gpus ? c->n_gpus : 1, 1);
    Cand *cands = malloc((c->n_gpus ? c->n_gpus : 1) * sizeof(*cands));
    int err = holders && stuck && cands ? 0 : -ENOMEM;
    size_t n_cands = 0;
    for (size_t k = 0; k < n_holders && !err; k++) {
        SchedJob *j = k < n_running ? running[k] : s->started[k - n_running];
        holders[k] = j;
        if (!movable_now(s, j, now)) {
            mark_gpus(c, &j->pl, stuck);
            mark_gpus(c, &j->moved_from, stuck);
        }
    }
    for (size_t n = 0; n < c->n_nodes && !err; n++) {
        const Node *nd = &c->nodes[n];
        if (!nd->schedulable)
            continue;
        for (unsigned i = 0; i < nd->n_gpus; i++) {
            const Gpu *g = node_gpu_c(c, nd, i);
            bool parted = (g->mode == GPU_MIG && g->mig_busy) || g->mode == GPU_SHARED;
            if (parted && !stuck[nd->gpu0 + i] && g->used_units <= CONSOLIDATE_MAX_USED)
                cands[n_cands++] =
                    (Cand){.node = (uint32_t)n, .gpu = (uint8_t)i, .used = g->used_units};
        }
    }
    if (!err && n_cands) {
        qsort(cands, n_cands, sizeof(*cands), cand_cmp);
        /* replacements keep out of the nodes held for other jobs */
        for (size_t n = 0; n < c->n_nodes; n++)
            s->blocked[n] = s->node_res[n] != SCHED_NONE || s->node_claim[n] != SCHED_NONE ? 1 : 0;
        s->mask_stamp = failmemo_fresh(&s->memo);
    }
    size_t cap = 0;
    unsigned emptied = 0;
    for (size_t k = 0; k < n_cands && emptied < want && !err; k++) {
        const Cand *cd = &cands[k];
        /* a replacement may have landed on it since */
        if (stuck[c->nodes[cd->node].gpu0 + cd->gpu])
            continue;
        int r = empty_gpu(s, cd, holders, n_holders, stuck, ret, ret_n, &cap);
        if (r < 0)
            err = r;
        emptied += r == 1;
    }
    free(holders);
    free(stuck);
    free(cands);
    return err;
}
