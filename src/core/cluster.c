/* cluster.c: building the cluster and keeping its allocation counters exact as
 * workers come and go. Every change to a node bumps its version. */
#include "core/cluster.h"

#include "util/macro.h"

#include <errno.h>
#include <string.h>
#include <strings.h>

static const char *const tier_names[TIER_COUNT] = {"owned", "reserved", "on-demand", "spot"};
static const char *const ic_names[] = {"pcie", "nvlink-pairs", "nvswitch"};

const char *tier_name(Tier t)
{
    return t < TIER_COUNT ? tier_names[t] : "?";
}

int tier_from_name(const char *s)
{
    if (!s)
        return -1;
    for (int i = 0; i < TIER_COUNT; i++)
        if (strcasecmp(s, tier_names[i]) == 0)
            return i;
    if (strcasecmp(s, "ondemand") == 0 || strcasecmp(s, "on_demand") == 0)
        return TIER_ON_DEMAND;
    return -1;
}

const char *interconnect_name(Interconnect ic)
{
    return (unsigned)ic < ARRAY_SIZE(ic_names) ? ic_names[ic] : "?";
}

int interconnect_from_name(const char *s)
{
    if (!s)
        return -1;
    for (size_t i = 0; i < ARRAY_SIZE(ic_names); i++)
        if (strcasecmp(s, ic_names[i]) == 0)
            return (int)i;
    if (strcasecmp(s, "nvlink") == 0)
        return IC_NVLINK_PAIRS;
    return -1;
}

Cluster *cluster_new(const char *name)
{
    Cluster *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->name = strdup(name ? name : "cluster");
    if (!c->name || cluster_fabric(c, NULL) < 0) {
        cluster_free(c);
        return NULL;
    }
    return c;
}

void cluster_free(Cluster *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->n_models; i++)
        if (!c->models[i].in_catalog)
            free((char *)c->models[i].m.name);
    for (size_t i = 0; i < c->n_switches; i++)
        free(c->switches[i].name);
    for (size_t i = 0; i < c->n_pools; i++) {
        free(c->pools[i].name);
        free(c->pools[i].leaves);
    }
    for (size_t i = 0; i < c->n_teams; i++) {
        free(c->teams[i].name);
        for (size_t j = 0; j < c->teams[i].n_projects; j++)
            free(c->teams[i].projects[j]);
        free(c->teams[i].projects);
    }
    for (size_t i = 0; i < c->n_nodes; i++)
        free(c->nodes[i].name);
    for (size_t i = 0; i < c->n_fabrics; i++)
        free(c->fabrics[i]);
    free(c->switches);
    free(c->pools);
    free(c->teams);
    free(c->nodes);
    free(c->gpus);
    free(c->fabrics);
    free(c->name);
    free(c);
}

static void *dup_mem(const void *p, size_t n)
{
    if (!n)
        return NULL;
    void *q = malloc(n);
    if (q)
        memcpy(q, p, n);
    return q;
}

Cluster *cluster_clone(const Cluster *c)
{
    Cluster *d = calloc(1, sizeof(*d));
    if (!d)
        return NULL;
    *d = *c;
    /* nothing below may point into c once we are done; start from empty arrays */
    d->name = NULL;
    d->switches = NULL;
    d->pools = NULL;
    d->teams = NULL;
    d->nodes = NULL;
    d->gpus = NULL;
    d->fabrics = NULL;
    d->n_switches = d->n_pools = d->n_teams = d->n_nodes = d->n_fabrics = 0;
    for (size_t i = 0; i < c->n_models; i++)
        if (!c->models[i].in_catalog)
            d->models[i].m.name = NULL;
    bool ok = (d->name = strdup(c->name)) != NULL;
    for (size_t i = 0; ok && i < c->n_models; i++)
        if (!c->models[i].in_catalog)
            ok = (d->models[i].m.name = strdup(c->models[i].m.name)) != NULL;
    if (ok && c->n_switches) {
        ok = (d->switches = calloc(c->n_switches, sizeof(Switch))) != NULL;
        for (size_t i = 0; ok && i < c->n_switches; i++, d->n_switches++) {
            d->switches[i] = c->switches[i];
            ok = (d->switches[i].name = strdup(c->switches[i].name)) != NULL;
        }
        d->switches_cap = c->n_switches;
    }
    if (ok && c->n_pools) {
        ok = (d->pools = calloc(c->n_pools, sizeof(Pool))) != NULL;
        for (size_t i = 0; ok && i < c->n_pools; i++, d->n_pools++) {
            const Pool *p = &c->pools[i];
            d->pools[i] = *p;
            d->pools[i].leaves = dup_mem(p->leaves, p->n_leaves * sizeof(*p->leaves));
            ok = (d->pools[i].name = strdup(p->name)) != NULL &&
                 (!p->n_leaves || d->pools[i].leaves);
        }
        d->pools_cap = c->n_pools;
    }
    if (ok && c->n_teams) {
        ok = (d->teams = calloc(c->n_teams, sizeof(Team))) != NULL;
        for (size_t i = 0; ok && i < c->n_teams; i++, d->n_teams++) {
            const Team *t = &c->teams[i];
            d->teams[i] = *t;
            d->teams[i].projects = NULL;
            d->teams[i].n_projects = 0;
            ok = (d->teams[i].name = strdup(t->name)) != NULL;
            if (ok && t->n_projects)
                ok = (d->teams[i].projects = calloc(t->n_projects, sizeof(char *))) != NULL;
            for (size_t j = 0; ok && j < t->n_projects; j++, d->teams[i].n_projects++)
                ok = (d->teams[i].projects[j] = strdup(t->projects[j])) != NULL;
        }
        d->teams_cap = c->n_teams;
    }
    if (ok && c->n_nodes) {
        ok = (d->nodes = calloc(c->n_nodes, sizeof(Node))) != NULL;
        for (size_t i = 0; ok && i < c->n_nodes; i++, d->n_nodes++) {
            d->nodes[i] = c->nodes[i];
            ok = (d->nodes[i].name = strdup(c->nodes[i].name)) != NULL;
        }
        d->nodes_cap = c->n_nodes;
    }
    if (ok && c->n_gpus) {
        ok = (d->gpus = dup_mem(c->gpus, c->n_gpus * sizeof(Gpu))) != NULL;
        d->gpus_cap = c->n_gpus;
    }
    if (ok && c->n_fabrics) {
        ok = (d->fabrics = calloc(c->n_fabrics, sizeof(char *))) != NULL;
        for (size_t i = 0; ok && i < c->n_fabrics; i++, d->n_fabrics++)
            ok = (d->fabrics[i] = strdup(c->fabrics[i])) != NULL;
        d->fabrics_cap = c->n_fabrics;
    }
    if (!ok) {
        cluster_free(d);
        return NULL;
    }
    return d;
}

int cluster_find_model(const Cluster *c, const char *name)
{
    const GpuModel *cat = catalog_find(name);
    for (size_t i = 0; i < c->n_models; i++) {
        if (cat ? c->models[i].m.name == cat->name : strcasecmp(c->models[i].m.name, name) == 0)
            return (int)i;
    }
    return -1;
}

int cluster_model(Cluster *c, const char *name, uint32_t memory_mib_if_unknown)
{
    int i = cluster_find_model(c, name);
    if (i >= 0) {
        ClusterModel *cm = &c->models[i];
        if (!cm->in_catalog && !cm->m.memory_mib)
            cm->m.memory_mib = memory_mib_if_unknown;
        return i;
    }
    if (c->n_models >= CLUSTER_MAX_MODELS)
        return -E2BIG;
    ClusterModel *cm = &c->models[c->n_models];
    const GpuModel *cat = catalog_find(name);
    if (cat) {
        *cm = (ClusterModel){.m = *cat, .in_catalog = true};
    } else {
        char *copy = strdup(name);
        if (!copy)
            return -ENOMEM;
        *cm = (ClusterModel){.m = {.name = copy, .memory_mib = memory_mib_if_unknown}};
    }
    return (int)c->n_models++;
}

int cluster_find_switch(const Cluster *c, const char *name)
{
    for (size_t i = 0; i < c->n_switches; i++)
        if (strcmp(c->switches[i].name, name) == 0)
            return (int)i;
    return -1;
}

int cluster_add_switch(Cluster *c, const char *name, const char *parent)
{
    if (cluster_find_switch(c, name) >= 0)
        return -EEXIST;
    uint32_t p = NO_SWITCH;
    if (parent && *parent) {
        int pi = cluster_find_switch(c, parent);
        if (pi < 0)
            return -ENOENT;
        p = (uint32_t)pi;
    }
    if (GROW(c->switches, c->switches_cap, c->n_switches + 1) < 0)
        return -ENOMEM;
    char *copy = strdup(name);
    if (!copy)
        return -ENOMEM;
    c->switches[c->n_switches] = (Switch){.name = copy, .parent = p};
    return (int)c->n_switches++;
}

int cluster_fabric(Cluster *c, const char *label)
{
    if (!label)
        label = "";
    for (size_t i = 0; i < c->n_fabrics; i++)
        if (strcasecmp(c->fabrics[i], label) == 0)
            return (int)i;
    if (c->n_fabrics >= UINT16_MAX)
        return -E2BIG;
    if (GROW(c->fabrics, c->fabrics_cap, c->n_fabrics + 1) < 0)
        return -ENOMEM;
    char *copy = strdup(label);
    if (!copy)
        return -ENOMEM;
    c->fabrics[c->n_fabrics] = copy;
    return (int)c->n_fabrics++;
}

int cluster_add_pool(Cluster *c, const Pool *tmpl)
{
    for (size_t i = 0; i < c->n_pools; i++)
        if (strcmp(c->pools[i].name, tmpl->name) == 0)
            return -EEXIST;
    if (tmpl->gpus > NODE_MAX_GPUS || tmpl->model >= c->n_models)
        return -E2BIG;
    if (GROW(c->pools, c->pools_cap, c->n_pools + 1) < 0)
        return -ENOMEM;
    Pool p = *tmpl;
    p.name = strdup(tmpl->name);
    p.leaves = NULL;
    if (tmpl->n_leaves) {
        p.leaves = malloc(tmpl->n_leaves * sizeof(*p.leaves));
        if (p.leaves)
            memcpy(p.leaves, tmpl->leaves, tmpl->n_leaves * sizeof(*p.leaves));
    }
    if (!p.name || (tmpl->n_leaves && !p.leaves)) {
        free(p.name);
        free(p.leaves);
        return -ENOMEM;
    }
    c->pools[c->n_pools] = p;
    return (int)c->n_pools++;
}

int cluster_find_team(const Cluster *c, const char *name)
{
    for (size_t i = 0; i < c->n_teams; i++)
        if (strcmp(c->teams[i].name, name) == 0)
            return (int)i;
    return -1;
}

int cluster_add_team(Cluster *c, const Team *t)
{
    if (cluster_find_team(c, t->name) >= 0)
        return -EEXIST;
    if (GROW(c->teams, c->teams_cap, c->n_teams + 1) < 0)
        return -ENOMEM;
    Team copy = *t;
    copy.name = strdup(t->name);
    copy.projects = t->n_projects ? calloc(t->n_projects, sizeof(char *)) : NULL;
    bool ok = copy.name && (!t->n_projects || copy.projects);
    for (size_t i = 0; ok && i < t->n_projects; i++)
        ok = (copy.projects[i] = strdup(t->projects[i])) != NULL;
    if (!ok) {
        for (size_t i = 0; copy.projects && i < t->n_projects; i++)
            free(copy.projects[i]);
        free(copy.projects);
        free(copy.name);
        return -ENOMEM;
    }
    c->teams[c->n_teams] = copy;
    return (int)c->n_teams++;
}

int cluster_find_node(const Cluster *c, const char *name)
{
    for (size_t i = 0; i < c->n_nodes; i++)
        if (strcmp(c->nodes[i].name, name) == 0)
            return (int)i;
    return -1;
}

int cluster_add_node(Cluster *c, uint32_t pool, const char *name, uint32_t leaf)
{
    if (pool >= c->n_pools || (leaf != NO_SWITCH && leaf >= c->n_switches))
        return -EINVAL;
    const Pool *p = &c->pools[pool];
    if (GROW(c->nodes, c->nodes_cap, c->n_nodes + 1) < 0 ||
        GROW(c->gpus, c->gpus_cap, c->n_gpus + p->gpus) < 0)
        return -ENOMEM;
    char *copy = strdup(name);
    if (!copy)
        return -ENOMEM;
    Node *n = &c->nodes[c->n_nodes];
    *n = (Node){
        .name = copy,
        .pool = pool,
        .leaf = leaf,
        .spine = leaf == NO_SWITCH ? NO_SWITCH : c->switches[leaf].parent,
        .gpu0 = (uint32_t)c->n_gpus,
        .n_gpus = p->gpus,
        .model = p->model,
        .interconnect = p->interconnect,
        .mig_allowed = p->mig && gpu_model_has_mig(&c->models[p->model].m),
        .schedulable = true,
        .fabric = p->fabric,
        .cpu_milli = p->cpu_milli,
        .memory_mib = p->memory_mib,
    };
    if (leaf != NO_SWITCH)
        c->switches[leaf].is_leaf = true;
    bool mig_start = n->mig_allowed && !mig_layout_empty(&p->initial_mig);
    for (unsigned i = 0; i < p->gpus; i++) {
        Gpu *g = &c->gpus[c->n_gpus++];
        *g = (Gpu){.mode = GPU_WHOLE};
        mig_layout_clear(&g->mig);
        if (mig_start) {
            g->mode = GPU_MIG;
            g->mig = p->initial_mig;
            n->idle_mig++;
        } else {
            n->free_whole++;
        }
    }
    if (p->gpus > c->max_gpus_per_node)
        c->max_gpus_per_node = p->gpus;
    c->pools[pool].nodes++;
    return (int)c->n_nodes++;
}

int cluster_add_pool_nodes(Cluster *c, uint32_t pool)
{
    const Pool *p = &c->pools[pool];
    uint32_t want = p->nodes;
    c->pools[pool].nodes = 0; /* counts the nodes as they are added */
    char name[256];
    for (uint32_t i = 0; i < want; i++) {
        size_t len = strlen(p->name);
        if (len + 12 > sizeof(name))
            return -ENAMETOOLONG;
        memcpy(name, p->name, len);
        name[len++] = '-';
        /* decimal index without stdio */
        char digits[11];
        int nd = 0;
        uint32_t v = i;
        do {
            digits[nd++] = (char)('0' + v % 10);
            v /= 10;
        } while (v);
        while (nd)
            name[len++] = digits[--nd];
        name[len] = '\0';
        if (cluster_find_node(c, name) >= 0)
            return -EEXIST;
        uint32_t leaf = p->n_leaves ? p->leaves[i % p->n_leaves] : NO_SWITCH;
        int r = cluster_add_node(c, pool, name, leaf);
        if (r < 0)
            return r;
        if (pool_autoscaled(p) && i >= p->initial_nodes)
            cluster_set_node_state(c, (uint32_t)r, NODE_ABSENT);
    }
    return 0;
}

uint32_t grant_units(const Cluster *c, const Node *n, const Grant *g)
{
    switch (g->kind) {
    case GRANT_WHOLE:
        return GPU_UNITS;
    case GRANT_SHARE:
        return (uint32_t)g->milli * (GPU_UNITS / 1000);
    case GRANT_MIG: {
        const GpuModel *m = node_model(c, n);
        return m->profiles[g->mig_profile].compute_slices * (GPU_UNITS / m->mig_compute_slices);
    }
    }
    return 0;
}

uint32_t worker_units(const Cluster *c, const WorkerAlloc *w)
{
    const Node *n = &c->nodes[w->node];
    uint32_t u = 0;
    for (unsigned i = 0; i < w->n_grants; i++)
        u += grant_units(c, n, &w->grants[i]);
    return u;
}

/* Every change to a node: its version for score caches, the change log for indexes. */
static void node_touch(Cluster *c, Node *n)
{
    n->version++;
    c->change_ring[c->change_seq++ % CLUSTER_CHANGE_RING] = (uint32_t)(n - c->nodes);
}

/* 0 for a slice or share, else the number of whole GPUs. */
static unsigned worker_shape_tag(const WorkerAlloc *w)
{
    return w->grants[0].kind == GRANT_WHOLE ? w->n_grants : 0;
}

void cluster_apply_worker(Cluster *c, const WorkerAlloc *w)
{
    Node *n = &c->nodes[w->node];
    n->cpu_used_milli += w->cpu_milli;
    n->memory_used_mib += w->memory_mib;
    if (w->n_grants)
        n->workers_by_gpus[worker_shape_tag(w)]++;
    for (unsigned i = 0; i < w->n_grants; i++) {
        const Grant *gr = &w->grants[i];
        Gpu *g = node_gpu(c, n, gr->index);
        uint32_t u = grant_units(c, n, gr);
        switch (gr->kind) {
        case GRANT_WHOLE:
            n->free_whole--;
            break;
        case GRANT_SHARE:
            if (g->mode == GPU_WHOLE) {
                g->mode = GPU_SHARED;
                n->free_whole--;
            }
            g->n_clients++;
            break;
        case GRANT_MIG:
            if (!g->mig_busy)
                n->idle_mig--;
            g->mig_busy |= (uint8_t)(1u << gr->mig_start);
            break;
        }
        g->used_units += u;
        n->used_units += u;
        c->used_units += u;
    }
    node_touch(c, n);
}

void cluster_release_worker(Cluster *c, const WorkerAlloc *w)
{
    Node *n = &c->nodes[w->node];
    n->cpu_used_milli -= w->cpu_milli;
    n->memory_used_mib -= w->memory_mib;
    if (w->n_grants)
        n->workers_by_gpus[worker_shape_tag(w)]--;
    for (unsigned i = 0; i < w->n_grants; i++) {
        const Grant *gr = &w->grants[i];
        Gpu *g = node_gpu(c, n, gr->index);
        uint32_t u = grant_units(c, n, gr);
        g->used_units -= u;
        n->used_units -= u;
        c->used_units -= u;
        switch (gr->kind) {
        case GRANT_WHOLE:
            n->free_whole++;
            break;
        case GRANT_SHARE:
            if (--g->n_clients == 0) {
                /* back whole: a drain (consolidate.h) has done its work */
                g->mode = GPU_WHOLE;
                g->draining = false;
                g->used_units = 0;
                n->free_whole++;
            }
            break;
        case GRANT_MIG:
            g->mig_busy &= (uint8_t) ~(1u << gr->mig_start);
            if (!g->mig_busy)
                n->idle_mig++;
            break;
        }
    }
    node_touch(c, n);
}

void cluster_set_draining(Cluster *c, uint32_t node, unsigned index, bool on)
{
    Node *n = &c->nodes[node];
    Gpu *g = node_gpu(c, n, index);
    if (g->draining != on) {
        g->draining = on;
        node_touch(c, n);
    }
}

void cluster_set_schedulable(Cluster *c, uint32_t node, bool on)
{
    Node *n = &c->nodes[node];
    if (on)
        n->away = AWAY_NONE;
    if (n->schedulable != on) {
        n->schedulable = on;
        node_touch(c, n);
    }
}

void cluster_set_nvlink(Cluster *c, uint32_t node, unsigned gpu, uint16_t peers)
{
    Node *n = &c->nodes[node];
    if (gpu >= n->n_gpus)
        return;
    Gpu *g = &c->gpus[n->gpu0 + gpu];
    peers &= (uint16_t)(((1u << n->n_gpus) - 1) & ~(1u << gpu));
    if (g->nvlink != peers) {
        g->nvlink = peers;
        node_touch(c, n);
    }
}

void cluster_set_away(Cluster *c, uint32_t node, NodeAway why)
{
    Node *n = &c->nodes[node];
    n->away = (uint8_t)why;
    if (why != AWAY_NONE && n->schedulable) {
        n->schedulable = false;
        node_touch(c, n);
    }
}

const char *node_away_name(NodeAway why)
{
    static const char *const names[AWAY_COUNT] = {
        "",         "unregistered", "lost",    "mismatched", "notice",  "down",
        "cordoned", "not-ready",    "tainted", "mig-failed", "gpu-sick"};
    return (unsigned)why < AWAY_COUNT ? names[why] : "?";
}

void cluster_set_node_state(Cluster *c, uint32_t node, NodePresence st)
{
    Node *n = &c->nodes[node];
    if (st == NODE_ABSENT && n->state != NODE_ABSENT && node_empty(n)) {
        /* the machine is given back: the one that comes up in its place has its GPUs
         * as they leave the factory, MIG off (an autoscaler that kept the old layout
         * saw no room for whole-GPU work on a node it would start) */
        MigLayout off;
        mig_layout_clear(&off);
        for (unsigned i = 0; i < n->n_gpus; i++)
            if (node_gpu(c, n, i)->mode == GPU_MIG)
                cluster_set_mig(c, node, i, &off);
    }
    n->state = (uint8_t)st;
    n->schedulable = st == NODE_UP;
    if (n->schedulable)
        n->away = AWAY_NONE;
    node_touch(c, n);
}

int cluster_set_mig(Cluster *c, uint32_t node, unsigned index, const MigLayout *after)
{
    Node *n = &c->nodes[node];
    Gpu *g = node_gpu(c, n, index);
    const GpuModel *m = node_model(c, n);
    if (!mig_layout_valid(m, after))
        return -EINVAL;
    bool off = mig_layout_empty(after);
    if (!off && !n->mig_allowed)
        return -EINVAL;
    if (g->mode == GPU_SHARED || (g->mode == GPU_WHOLE && g->used_units))
        return -EBUSY;
    for (int s = 0; s < MIG_MAX_SLOTS; s++)
        if ((g->mig_busy & (1u << s)) && after->profile_at[s] != g->mig.profile_at[s])
            return -EBUSY;
    if (g->mode == GPU_WHOLE && !off) {
        g->mode = GPU_MIG;
        n->free_whole--;
        n->idle_mig++;
    } else if (g->mode == GPU_MIG && off) {
        g->mode = GPU_WHOLE;
        g->draining = false;
        n->idle_mig--;
        n->free_whole++;
    }
    g->mig = *after;
    node_touch(c, n);
    return 0;
}

bool cluster_consistent(const Cluster *c)
{
    uint64_t total = 0;
    for (size_t i = 0; i < c->n_nodes; i++) {
        const Node *n = &c->nodes[i];
        const GpuModel *m = node_model(c, n);
        unsigned free_whole = 0, idle_mig = 0;
        uint32_t used = 0;
        for (unsigned j = 0; j < n->n_gpus; j++) {
            const Gpu *g = node_gpu_c(c, n, j);
            if (g->used_units > GPU_UNITS)
                return false;
            switch (g->mode) {
            case GPU_WHOLE:
                if (g->used_units != 0 && g->used_units != GPU_UNITS)
                    return false;
                free_whole += g->used_units == 0;
                break;
            case GPU_SHARED:
                if (!g->n_clients || !g->used_units)
                    return false;
                break;
            case GPU_MIG: {
                if (!mig_layout_valid(m, &g->mig) || mig_layout_empty(&g->mig))
                    return false;
                uint8_t busy_units_mask = g->mig_busy;
                for (int s = 0; s < MIG_MAX_SLOTS; s++)
                    if ((busy_units_mask & (1u << s)) && g->mig.profile_at[s] == MIG_NONE)
                        return false;
                uint32_t u =
                    mig_compute_used(m, &g->mig, g->mig_busy) * (GPU_UNITS / m->mig_compute_slices);
                if (u != g->used_units)
                    return false;
                idle_mig += g->mig_busy == 0;
                break;
            }
            default:
                return false;
            }
            used += g->used_units;
        }
        if (free_whole != n->free_whole || idle_mig != n->idle_mig || used != n->used_units ||
            n->cpu_used_milli > n->cpu_milli || n->memory_used_mib > n->memory_mib)
            return false;
        /* only up and leaving nodes hold work; only up ones take it */
        if ((n->state == NODE_ABSENT || n->state == NODE_STARTING) &&
            (!node_empty(n) || n->schedulable))
            return false;
        if (n->state == NODE_LEAVING && n->schedulable)
            return false;
        total += used;
    }
    return total == c->used_units;
}
