/* spec_cluster.c: the cluster spec (YAML, docs/cluster-spec.md) into a Cluster. The
 * spec is read strictly: unknown fields, missing required ones, names that do not
 * resolve and values out of range are all errors with a line. Everything is checked
 * before any node exists; the nodes of each pool are created last, in pool order, so
 * node and GPU indices follow the file. */
#include "core/pricing.h"
#include "spec/field.h"
#include "spec/spec.h"

#include "util/macro.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define POOL_MAX_NODES       100000u
#define MAX_PRICE_MICRO_USD  (10000 * INT64_C(1000000)) /* 10,000 USD per GPU-hour */
#define MAX_CPU_MILLI        (1000000 * INT64_C(1000))  /* a million cores */
#define MAX_MEMORY_GIB_MILLI (4000000 * INT64_C(1000))  /* fits memory_mib in 32 bits */
#define MAX_TEAM_GPUS_MILLI  (10000000 * INT64_C(1000))
#define MAX_BUDGET_MILLI     (1000000000 * INT64_C(1000)) /* GPU-hours per month */

enum { TOP_NAME, TOP_SWITCHES, TOP_POOLS, TOP_TEAMS, TOP_COUNT };
static const char *const top_fields[TOP_COUNT] = {"name", "switches", "pools", "teams"};

enum { SW_NAME, SW_PARENT, SW_COUNT };
static const char *const switch_fields[SW_COUNT] = {"name", "parent"};

enum {
    P_NAME,
    P_TIER,
    P_PRICE,
    P_NODES,
    P_LEAVES,
    P_NODE,
    P_INSTANCE,
    P_RESERVATION,
    P_MIN,
    P_MAX,
    P_STARTUP,
    P_IDLE,
    P_INTERRUPT,
    P_NOTICE,
    P_COUNT
};
static const char *const pool_fields[P_COUNT] = {
    "name",      "tier",          "price_per_gpu_hour",    "nodes",     "leaves",
    "node",      "instance_type", "reservation",           "min_nodes", "max_nodes",
    "startup_s", "idle_s",        "interruption_per_hour", "notice_s",
};
#define MAX_POOL_SECONDS_MILLI (7 * 86400 * INT64_C(1000)) /* a week, in ms */
#define MAX_INTERRUPT_MICRO    (1000 * INT64_C(1000000))   /* per node-hour */

enum {
    N_GPU_MODEL,
    N_GPU_MEMORY,
    N_GPUS,
    N_INTERCONNECT,
    N_FABRIC,
    N_CPUS,
    N_MEMORY_GIB,
    N_MIG,
    N_MIG_LAYOUT,
    N_COUNT
};
static const char *const node_fields[N_COUNT] = {
    "gpu_model", "gpu_memory", "gpus", "interconnect", "fabric",
    "cpus",      "memory_gib", "mig",  "mig_layout",
};

enum {
    T_NAME,
    T_GUARANTEED,
    T_BURST,
    T_WEIGHT,
    T_PROJECTS,
    T_BUDGET,
    T_CAPACITY,
    T_RUN_AS,
    T_COUNT
};
static const char *const team_fields[T_COUNT] = {
    "name",     "guaranteed_gpus", "burst_gpus", "weight", "projects", "budget_gpu_hours_per_month",
    "capacity", "run_as"};

enum { RA_UID, RA_GID, RA_GROUPS, RA_COUNT };
static const char *const run_as_fields[RA_COUNT] = {"uid", "gid", "groups"};
#define MAX_UNIX_ID 4294967294u /* (uid_t)-1 means "no change" to setresuid */

/* What the reader keeps besides the cluster: where each named thing was defined. */
typedef struct ClusterReader {
    FieldCtx *x;
    Cluster *c;
    size_t *switch_lines; /* by switch index */
    size_t n_switch_lines, switch_lines_cap;
    size_t *pool_lines; /* by pool index */
    size_t n_pool_lines, pool_lines_cap;
    size_t *team_lines;
    size_t n_team_lines, team_lines_cap;
} ClusterReader;

static int push_line(size_t **v, size_t *n, size_t *cap, size_t line)
{
    if (GROW(*v, *cap, *n + 1) < 0)
        return -ENOMEM;
    (*v)[(*n)++] = line;
    return 0;
}

static void where_of(char *out, size_t outlen, const char *kind, struct fy_node *map)
{
    const char *name = field_map_text(map, "name");
    if (name)
        snprintf(out, outlen, "%s '%.64s'", kind, name);
    else
        snprintf(out, outlen, "%s", kind);
}

/* Is the mapping value v a list? Reports "must be a list of ..." otherwise. */
static bool want_list(FieldCtx *x, const FieldVal *v, const char *of)
{
    if (v->node && fy_node_is_sequence(v->node))
        return true;
    field_bad(x, v, "must be a list of %s, not %s", of, field_node_shape(v->node));
    return false;
}

static bool want_map(FieldCtx *x, const FieldVal *v, const char *what)
{
    if (v->node && fy_node_is_mapping(v->node))
        return true;
    field_bad(x, v, "must be a mapping (%s), not %s", what, field_node_shape(v->node));
    return false;
}

/* The line a later entry of seq named `name` is on, or 0. */
static size_t defined_later(struct fy_node *seq, struct fy_node *after, const char *name)
{
    bool past = false;
    void *it = NULL;
    struct fy_node *item;
    while ((item = fy_node_sequence_iterate(seq, &it))) {
        if (item == after) {
            past = true;
            continue;
        }
        const char *n = field_map_text(item, "name");
        if (past && n && strcmp(n, name) == 0)
            return field_node_line(item, 0);
    }
    return 0;
}

static int read_switch(ClusterReader *cr, struct fy_node *seq, struct fy_node *item, size_t line)
{
    FieldCtx *x = cr->x;
    if (!fy_node_is_mapping(item)) {
        field_error(x, line, "each switch must be a mapping with name and parent, not %s",
                    field_node_shape(item));
        return -EINVAL;
    }
    char where[96];
    where_of(where, sizeof(where), "switch", item);
    FieldVal v[SW_COUNT];
    bool has[SW_COUNT];
    int r = field_collect(x, item, line, where, switch_fields, SW_COUNT, v, has);
    const char *name = NULL, *parent = NULL;
    if (!has[SW_NAME]) {
        field_error(x, line, "missing field 'name' in switch");
        return -EINVAL;
    }
    if (field_text(x, &v[SW_NAME], &name) < 0)
        return -EINVAL;
    if (has[SW_PARENT] && field_text(x, &v[SW_PARENT], &parent) < 0)
        r = -EINVAL;
    if (parent && strcmp(parent, name) == 0) {
        field_bad(x, &v[SW_PARENT], "a switch cannot be its own parent");
        parent = NULL;
        r = -EINVAL;
    } else if (parent && cluster_find_switch(cr->c, parent) < 0) {
        size_t later = defined_later(seq, item, parent);
        if (later)
            field_bad(x, &v[SW_PARENT],
                      "switch '%s' is defined later, on line %zu; list a parent before its "
                      "children",
                      parent, later);
        else
            field_bad(x, &v[SW_PARENT], "switch '%s' is not defined", parent);
        parent = NULL; /* add it anyway so that its children do not fail too */
        r = -EINVAL;
    }
    int si = cluster_add_switch(cr->c, name, parent);
    if (si == -EEXIST) {
        int first = cluster_find_switch(cr->c, name);
        field_error(x, v[SW_NAME].line, "duplicate switch '%s' (first on line %zu)", name,
                    cr->switch_lines[first]);
        return -EINVAL;
    }
    if (si < 0)
        return si;
    if (push_line(&cr->switch_lines, &cr->n_switch_lines, &cr->switch_lines_cap, v[SW_NAME].line) <
        0)
        return -ENOMEM;
    return r;
}

/* The pool being read, for the per-item callbacks. */
typedef struct PoolReader {
    ClusterReader *cr;
    uint32_t *leaves;
    size_t n_leaves, leaves_cap;
    const GpuModel *model;
    MigLayout layout;
    size_t n_layout;
} PoolReader;

static int pool_leaf(FieldCtx *x, const FieldVal *item, void *ud)
{
    PoolReader *pr = ud;
    const Cluster *c = pr->cr->c;
    const char *name;
    int r = field_text(x, item, &name);
    if (r < 0)
        return r;
    int si = cluster_find_switch(c, name);
    if (si < 0)
        return field_bad(x, item, "switch '%s' is not defined", name);
    for (size_t i = 0; i < c->n_switches; i++)
        if (c->switches[i].parent == (uint32_t)si)
            return field_bad(
                x, item, "switch '%s' has switches under it; nodes attach to leaf switches", name);
    for (size_t i = 0; i < pr->n_leaves; i++)
        if (pr->leaves[i] == (uint32_t)si)
            return field_bad(x, item, "switch '%s' is listed twice", name);
    if (GROW(pr->leaves, pr->leaves_cap, pr->n_leaves + 1) < 0)
        return -ENOMEM;
    pr->leaves[pr->n_leaves++] = (uint32_t)si;
    return 0;
}

static void list_profiles(const GpuModel *m, char *out, size_t outlen)
{
    size_t used = 0;
    out[0] = '\0';
    for (unsigned i = 0; i < m->n_profiles && used + 1 < outlen; i++) {
        int n = snprintf(out + used, outlen - used, "%s%s", i ? ", " : "", m->profiles[i].name);
        if (n < 0)
            break;
        used += (size_t)n;
    }
}

/* Place one profile of mig_layout at its lowest valid free start. */
static int pool_mig_profile(FieldCtx *x, const FieldVal *item, void *ud)
{
    PoolReader *pr = ud;
    const GpuModel *m = pr->model;
    const char *name;
    int r = field_text(x, item, &name);
    if (r < 0)
        return r;
    int p = catalog_profile_index(m, name);
    if (p < 0) {
        char profiles[256];
        list_profiles(m, profiles, sizeof(profiles));
        return field_bad(x, item, "%s has no MIG profile '%s' (it has %s)", m->name, name,
                         profiles);
    }
    uint8_t starts = mig_free_starts(m, &pr->layout, p);
    if (!starts) {
        unsigned same = 0;
        for (int i = 0; i < MIG_MAX_SLOTS; i++)
            same += pr->layout.profile_at[i] == p;
        if (same >= m->profiles[p].max_count)
            return field_bad(x, item, "%s does not fit: a %s holds at most %u of it", name, m->name,
                             (unsigned)m->profiles[p].max_count);
        return field_bad(x, item,
                         "%s does not fit on the %s: the %zu profile%s before it leave no "
                         "valid place for it",
                         name, m->name, pr->n_layout, pr->n_layout == 1 ? "" : "s");
    }
    int start = __builtin_ctz(starts);
    MigLayout next = pr->layout;
    next.profile_at[start] = (uint8_t)p;
    if (!mig_layout_valid(m, &next))
        return field_bad(x, item, "%s does not fit on the %s after the profiles before it", name,
                         m->name);
    pr->layout = next;
    pr->n_layout++;
    return 0;
}

/* The GPU model of a pool's node template: a catalogue model, or one the spec describes
 * with gpu_memory. Writes the cluster model index. */
static int pool_model(ClusterReader *cr, const FieldVal *v, const bool *has, uint64_t gpus,
                      size_t node_line, const char *pool, uint8_t *ret_model)
{
    FieldCtx *x = cr->x;
    Cluster *c = cr->c;
    int mi;
    if (gpus == 0) {
        if (has[N_GPU_MODEL])
            return field_bad(x, &v[N_GPU_MODEL], "a pool with gpus: 0 has no GPU model");
        if (has[N_GPU_MEMORY])
            return field_bad(x, &v[N_GPU_MEMORY], "a pool with gpus: 0 has no GPU memory");
        mi = cluster_model(c, SPEC_CPU_ONLY_MODEL, 0);
    } else {
        if (!has[N_GPU_MODEL]) {
            field_error(x, node_line, "missing field 'gpu_model' in pool '%s' (it has GPUs)", pool);
            return -EINVAL;
        }
        const char *name;
        if (field_text(x, &v[N_GPU_MODEL], &name) < 0)
            return -EINVAL;
        if (strcasecmp(name, SPEC_CPU_ONLY_MODEL) == 0)
            return field_bad(x, &v[N_GPU_MODEL], "'%s' is reserved for pools without GPUs", name);
        const GpuModel *cat = catalog_find(name);
        uint64_t mem = 0;
        if (has[N_GPU_MEMORY]) {
            if (cat)
                return field_bad(x, &v[N_GPU_MEMORY],
                                 "%s is in the GPU catalogue (%" PRIu32
                                 " MiB); gpu_memory is only for models it lacks",
                                 cat->name, cat->memory_mib);
            if (field_size(x, &v[N_GPU_MEMORY], 1, UINT32_MAX, &mem) < 0)
                return -EINVAL;
        } else if (!cat) {
            return field_bad(x, &v[N_GPU_MODEL],
                             "'%s' is not in the GPU catalogue; give its gpu_memory", name);
        }
        mi = cluster_model(c, name, (uint32_t)mem);
        if (mi >= 0 && !cat && c->models[mi].m.memory_mib != mem)
            return field_bad(x, &v[N_GPU_MEMORY],
                             "model '%s' already has %" PRIu32 " MiB from an earlier pool", name,
                             c->models[mi].m.memory_mib);
    }
    if (mi == -E2BIG)
        return field_bad(x, &v[N_GPU_MODEL], "a cluster has at most %d GPU models",
                         CLUSTER_MAX_MODELS);
    if (mi < 0)
        return mi;
    *ret_model = (uint8_t)mi;
    return 0;
}

/* The node template of a pool into p (model, GPUs, host resources, MIG). */
static int read_node(ClusterReader *cr, PoolReader *pr, const FieldVal *nv, const char *pool,
                     Pool *p)
{
    FieldCtx *x = cr->x;
    char where[96];
    snprintf(where, sizeof(where), "pool '%.64s'", pool);
    FieldVal v[N_COUNT];
    bool has[N_COUNT];
    int r = field_collect(x, nv->node, nv->line, where, node_fields, N_COUNT, v, has);
    uint64_t gpus = 0;
    if (!has[N_GPUS]) {
        field_error(x, nv->line, "missing field 'gpus' in pool '%s'", pool);
        return -EINVAL;
    }
    if (field_uint(x, &v[N_GPUS], 0, NODE_MAX_GPUS, &gpus) < 0)
        return -EINVAL;
    p->gpus = (uint8_t)gpus;
    int e = pool_model(cr, v, has, gpus, nv->line, pool, &p->model);
    if (e == -ENOMEM)
        return e;
    if (e < 0)
        r = -EINVAL;

    int ic = IC_PCIE;
    if (has[N_INTERCONNECT] && field_enum(x, &v[N_INTERCONNECT], interconnect_from_name,
                                          "nvswitch, nvlink-pairs or pcie", &ic) < 0)
        r = -EINVAL;
    p->interconnect = (uint8_t)ic;

    const char *fabric;
    if (has[N_FABRIC]) {
        if (field_text(x, &v[N_FABRIC], &fabric) < 0) {
            r = -EINVAL;
        } else {
            int f = cluster_fabric(cr->c, fabric);
            if (f < 0)
                return f == -E2BIG ? field_bad(x, &v[N_FABRIC], "too many fabrics") : f;
            p->fabric = (uint16_t)f;
        }
    }

    int64_t cpu_milli = (int64_t)MAX(8, 8 * gpus) * 1000;
    if (has[N_CPUS] && field_fixed(x, &v[N_CPUS], 3, 0, MAX_CPU_MILLI, &cpu_milli) < 0)
        r = -EINVAL;
    p->cpu_milli = (uint32_t)cpu_milli;
    int64_t mem_milli = (int64_t)MAX(64, 64 * gpus) * 1000;
    if (has[N_MEMORY_GIB] &&
        field_fixed(x, &v[N_MEMORY_GIB], 3, 0, MAX_MEMORY_GIB_MILLI, &mem_milli) < 0)
        r = -EINVAL;
    p->memory_mib = (uint32_t)((mem_milli * 1024 + 999) / 1000);

    bool mig = false;
    if (has[N_MIG] && field_bool(x, &v[N_MIG], &mig) < 0)
        r = -EINVAL;
    if (e < 0)
        return r; /* without a model MIG cannot be checked */
    const GpuModel *m = &cr->c->models[p->model].m;
    if (mig && !gpu_model_has_mig(m)) {
        field_bad(x, &v[N_MIG], "%s does not support MIG", gpus ? m->name : "a node without GPUs");
        return -EINVAL;
    }
    p->mig = mig;
    if (has[N_MIG_LAYOUT]) {
        if (!mig)
            return field_bad(x, &v[N_MIG_LAYOUT], "needs mig: true");
        pr->model = m;
        mig_layout_clear(&pr->layout);
        pr->n_layout = 0;
        e = field_each(x, &v[N_MIG_LAYOUT], pool_mig_profile, pr);
        if (e == -ENOMEM)
            return e;
        if (e < 0)
            return -EINVAL;
        p->initial_mig = pr->layout;
    }
    return r;
}

static int reservation_from_name(const char *s)
{
    if (strcasecmp(s, "1y") == 0)
        return 1;
    if (strcasecmp(s, "3y") == 0)
        return 3;
    return -1;
}

/* An instance's price per hour spread over its GPUs, or PRICE_UNKNOWN. */
static int64_t per_gpu(int64_t per_instance, uint8_t gpus)
{
    if (per_instance == PRICE_UNKNOWN || !gpus)
        return PRICE_UNKNOWN;
    return (per_instance + gpus / 2) / gpus;
}

/* The pool's price per GPU-hour: price_per_gpu_hour when given, else its tier's price
 * of instance_type in the pricing catalogue; and the on-demand price of the same
 * capacity, for the savings figures. */
static int pool_price(FieldCtx *x, const FieldVal *v, const bool *has, const char *pool, Pool *p)
{
    int years = 1;
    if (has[P_RESERVATION]) {
        if (p->tier != TIER_RESERVED)
            return field_bad(x, &v[P_RESERVATION], "only a reserved pool has a reservation term");
        if (field_enum(x, &v[P_RESERVATION], reservation_from_name, "1y or 3y", &years) < 0)
            return -EINVAL;
    }
    p->on_demand_micro_usd = p->price_micro_usd;
    if (!has[P_INSTANCE])
        return 0;
    const char *type;
    if (field_text(x, &v[P_INSTANCE], &type) < 0)
        return -EINVAL;
    const InstancePrice *ip = pricing_find(type);
    if (!ip)
        return field_bad(x, &v[P_INSTANCE],
                         "'%s' is not in the pricing catalogue (data/pricing-catalog.json); give "
                         "price_per_gpu_hour instead",
                         type);
    int64_t od = per_gpu(ip->on_demand_micro_usd, ip->gpus);
    int64_t tier_price = 0;
    const char *what = "";
    switch (p->tier) {
    case TIER_ON_DEMAND:
        tier_price = od;
        what = "on-demand";
        break;
    case TIER_RESERVED:
        tier_price =
            per_gpu(years == 3 ? ip->reserved_3y_micro_usd : ip->reserved_1y_micro_usd, ip->gpus);
        what = years == 3 ? "3-year reserved" : "1-year reserved";
        break;
    case TIER_SPOT:
        tier_price = per_gpu(ip->spot_micro_usd, ip->gpus);
        what = "spot";
        break;
    default: /* owned: paid for already; the instance only says what it would cost */
        break;
    }
    if (!has[P_PRICE]) {
        if (tier_price == PRICE_UNKNOWN)
            return field_bad(x, &v[P_INSTANCE],
                             "the pricing catalogue has no %s price for %s; give "
                             "price_per_gpu_hour for pool '%s'",
                             what, ip->id, pool);
        p->price_micro_usd = tier_price;
    }
    if (p->tier == TIER_SPOT && !has[P_NOTICE] && ip->notice_s >= 0)
        p->notice_ms = ip->notice_s * INT64_C(1000);
    p->on_demand_micro_usd = od != PRICE_UNKNOWN ? od : p->price_micro_usd;
    return 0;
}

/* Seconds with up to three decimals, into milliseconds. */
static int seconds_ms(FieldCtx *x, const FieldVal *v, int64_t *ret_ms)
{
    return field_fixed(x, v, 3, 0, MAX_POOL_SECONDS_MILLI, ret_ms);
}

/* nodes, min_nodes, max_nodes and the timing of nodes that come and go. A pool with
 * only nodes is fixed; with max_nodes it is autoscaled between min_nodes (default 0)
 * and max_nodes, starting with nodes (default min_nodes). */
static int pool_scaling(FieldCtx *x, const FieldVal *v, const bool *has, size_t line,
                        const char *pool, Pool *p)
{
    int r = 0;
    uint64_t nodes = 0, lo = 0, hi = 0;
    if (!has[P_NODES] && !has[P_MAX]) {
        field_error(x, line, "missing field 'nodes' in pool '%s' (or max_nodes, to autoscale it)",
                    pool);
        r = -EINVAL;
    }
    if (has[P_NODES] && field_uint(x, &v[P_NODES], 0, POOL_MAX_NODES, &nodes) < 0)
        r = -EINVAL;
    if (has[P_MIN] && field_uint(x, &v[P_MIN], 0, POOL_MAX_NODES, &lo) < 0)
        r = -EINVAL;
    if (has[P_MAX] && field_uint(x, &v[P_MAX], 0, POOL_MAX_NODES, &hi) < 0)
        r = -EINVAL;
    if (r < 0)
        return r;
    if (has[P_MIN] && !has[P_MAX])
        return field_bad(x, &v[P_MIN], "needs max_nodes (a pool with only nodes is fixed)");
    if (has[P_MAX]) {
        if (!has[P_NODES])
            nodes = lo;
        if (lo > hi)
            return field_bad(x, &v[P_MIN], "must be at most max_nodes (%" PRIu64 "), not %" PRIu64,
                             hi, lo);
        if (nodes < lo || nodes > hi)
            return field_bad(x, &v[P_NODES],
                             "the initial count must be from min_nodes (%" PRIu64
                             ") to max_nodes (%" PRIu64 "), not %" PRIu64,
                             lo, hi, nodes);
    } else {
        lo = hi = nodes;
    }
    p->nodes = (uint32_t)hi;
    p->min_nodes = (uint32_t)lo;
    p->max_nodes = (uint32_t)hi;
    p->initial_nodes = (uint32_t)nodes;
    p->startup_ms = POOL_DEFAULT_STARTUP_MS;
    p->idle_ms = POOL_DEFAULT_IDLE_MS;
    if (p->tier == TIER_SPOT && !p->notice_ms)
        p->notice_ms = POOL_DEFAULT_NOTICE_MS;
    bool scaled = hi > lo, spot = p->tier == TIER_SPOT;
    if (has[P_STARTUP]) {
        if (!scaled && !spot)
            r = field_bad(x, &v[P_STARTUP],
                          "only nodes that come and go start up: give max_nodes above "
                          "min_nodes, or make it a spot pool");
        else if (seconds_ms(x, &v[P_STARTUP], &p->startup_ms) < 0)
            r = -EINVAL;
    }
    if (has[P_IDLE]) {
        if (!scaled)
            r = field_bad(x, &v[P_IDLE],
                          "only an autoscaled pool (max_nodes above min_nodes) "
                          "releases idle nodes");
        else if (seconds_ms(x, &v[P_IDLE], &p->idle_ms) < 0)
            r = -EINVAL;
    }
    if (has[P_INTERRUPT]) {
        int64_t micro = 0;
        if (!spot)
            r = field_bad(x, &v[P_INTERRUPT], "only a spot pool is interrupted");
        else if (field_fixed(x, &v[P_INTERRUPT], 6, 0, MAX_INTERRUPT_MICRO, &micro) < 0)
            r = -EINVAL;
        p->interruptions_per_hour = (double)micro / 1e6;
    }
    if (has[P_NOTICE]) {
        if (!spot)
            r = field_bad(x, &v[P_NOTICE], "only a spot pool gets an interruption notice");
        else if (seconds_ms(x, &v[P_NOTICE], &p->notice_ms) < 0)
            r = -EINVAL;
    }
    return r;
}

static int read_pool(ClusterReader *cr, struct fy_node *item, size_t line)
{
    FieldCtx *x = cr->x;
    if (!fy_node_is_mapping(item)) {
        field_error(x, line, "each pool must be a mapping, not %s", field_node_shape(item));
        return -EINVAL;
    }
    char where[96];
    where_of(where, sizeof(where), "pool", item);
    FieldVal v[P_COUNT];
    bool has[P_COUNT];
    int r = field_collect(x, item, line, where, pool_fields, P_COUNT, v, has);
    const char *name;
    if (!has[P_NAME]) {
        field_error(x, line, "missing field 'name' in pool");
        return -EINVAL;
    }
    if (field_text(x, &v[P_NAME], &name) < 0)
        return -EINVAL;
    for (size_t i = 0; i < cr->c->n_pools; i++)
        if (strcmp(cr->c->pools[i].name, name) == 0) {
            field_error(x, v[P_NAME].line, "duplicate pool '%s' (first on line %zu)", name,
                        cr->pool_lines[i]);
            return -EINVAL;
        }

    Pool p = {.name = (char *)name};
    mig_layout_clear(&p.initial_mig);
    PoolReader pr = {.cr = cr};
    int tier = 0;
    if (!has[P_TIER]) {
        field_error(x, line, "missing field 'tier' in pool '%s'", name);
        r = -EINVAL;
    } else if (field_enum(x, &v[P_TIER], tier_from_name, "owned, reserved, on-demand or spot",
                          &tier) < 0) {
        r = -EINVAL;
    }
    p.tier = (Tier)tier;
    if (has[P_PRICE] &&
        field_fixed(x, &v[P_PRICE], 6, 0, MAX_PRICE_MICRO_USD, &p.price_micro_usd) < 0)
        r = -EINVAL;
    if (r == 0 && pool_price(x, v, has, name, &p) < 0)
        r = -EINVAL;
    if (pool_scaling(x, v, has, line, name, &p) < 0)
        r = -EINVAL;
    int e = 0;
    if (has[P_LEAVES]) {
        e = field_each(x, &v[P_LEAVES], pool_leaf, &pr);
        if (e < 0)
            r = e == -ENOMEM ? e : -EINVAL;
    }
    if (r != -ENOMEM) {
        if (!has[P_NODE]) {
            field_error(x, line, "missing field 'node' in pool '%s' (the node template)", name);
            r = -EINVAL;
        } else if (!want_map(x, &v[P_NODE], "the node template")) {
            r = -EINVAL;
        } else if ((e = read_node(cr, &pr, &v[P_NODE], name, &p)) < 0) {
            r = e == -ENOMEM ? e : -EINVAL;
        }
    }
    if (r == 0) {
        p.leaves = pr.leaves;
        p.n_leaves = pr.n_leaves;
        int pi = cluster_add_pool(cr->c, &p);
        if (pi < 0)
            r = pi;
        else if (push_line(&cr->pool_lines, &cr->n_pool_lines, &cr->pool_lines_cap,
                           v[P_NAME].line) < 0)
            r = -ENOMEM;
    }
    free(pr.leaves);
    return r;
}

static int team_project(FieldCtx *x, const FieldVal *item, void *ud)
{
    Team *t = ud;
    const char *name;
    int r = field_text(x, item, &name);
    if (r < 0)
        return r;
    for (size_t i = 0; i < t->n_projects; i++)
        if (strcmp(t->projects[i], name) == 0)
            return field_bad(x, item, "project '%s' is listed twice", name);
    char **grown = realloc(t->projects, (t->n_projects + 1) * sizeof(*grown));
    if (!grown)
        return -ENOMEM;
    t->projects = grown;
    if (!(t->projects[t->n_projects] = strdup(name)))
        return -ENOMEM;
    t->n_projects++;
    return 0;
}

static int run_as_group(FieldCtx *x, const FieldVal *item, void *ud)
{
    RunAs *ra = ud;
    uint64_t g;
    if (field_uint(x, item, 0, MAX_UNIX_ID, &g) < 0)
        return -EINVAL;
    for (size_t i = 0; i < ra->n_groups; i++)
        if (ra->groups[i] == g)
            return field_bad(x, item, "group %llu is listed twice", (unsigned long long)g);
    if (ra->n_groups >= RUN_AS_MAX_GROUPS)
        return field_bad(x, item, "at most %d groups", RUN_AS_MAX_GROUPS);
    ra->groups[ra->n_groups++] = (uint32_t)g;
    return 0;
}

/* run_as: {uid, gid, groups}, numeric ids as the nodes know them (names would resolve
 * differently on each node, or not at all on the server). uid 0 is accepted here: the
 * agent refuses it unless its operator allowed root workers. */
static int read_run_as(FieldCtx *x, const FieldVal *v, const char *team, RunAs *ret)
{
    if (!v->node || !fy_node_is_mapping(v->node))
        return field_bad(x, v, "must be a mapping {uid, gid, groups}, not %s",
                         v->node ? field_node_shape(v->node) : "a value");
    char where[96];
    snprintf(where, sizeof(where), "run_as of team '%.64s'", team);
    FieldVal f[RA_COUNT];
    bool has[RA_COUNT];
    int r = field_collect(x, v->node, v->line, where, run_as_fields, RA_COUNT, f, has);
    if (!has[RA_UID] || !has[RA_GID]) {
        field_error(x, v->line, "missing field '%s' in %s", has[RA_UID] ? "gid" : "uid", where);
        return -EINVAL;
    }
    RunAs ra = {.set = true};
    uint64_t id;
    if (field_uint(x, &f[RA_UID], 0, MAX_UNIX_ID, &id) < 0)
        r = -EINVAL;
    ra.uid = (uint32_t)id;
    if (field_uint(x, &f[RA_GID], 0, MAX_UNIX_ID, &id) < 0)
        r = -EINVAL;
    ra.gid = (uint32_t)id;
    if (has[RA_GROUPS] && field_each(x, &f[RA_GROUPS], run_as_group, &ra) < 0)
        r = -EINVAL;
    if (r == 0)
        *ret = ra;
    return r;
}

static int read_team(ClusterReader *cr, struct fy_node *item, size_t line)
{
    FieldCtx *x = cr->x;
    if (!fy_node_is_mapping(item)) {
        field_error(x, line, "each team must be a mapping, not %s", field_node_shape(item));
        return -EINVAL;
    }
    char where[96];
    where_of(where, sizeof(where), "team", item);
    FieldVal v[T_COUNT];
    bool has[T_COUNT];
    int r = field_collect(x, item, line, where, team_fields, T_COUNT, v, has);
    const char *name;
    if (!has[T_NAME]) {
        field_error(x, line, "missing field 'name' in team");
        return -EINVAL;
    }
    if (field_text(x, &v[T_NAME], &name) < 0)
        return -EINVAL;
    int64_t guaranteed = 0, burst = -1, weight = 1000;
    if (has[T_GUARANTEED] &&
        field_fixed(x, &v[T_GUARANTEED], 3, 0, MAX_TEAM_GPUS_MILLI, &guaranteed) < 0)
        r = -EINVAL;
    if (has[T_BURST] && field_fixed(x, &v[T_BURST], 3, 0, MAX_TEAM_GPUS_MILLI, &burst) < 0)
        r = -EINVAL;
    if (has[T_WEIGHT] && field_fixed(x, &v[T_WEIGHT], 3, 0, 1000000 * INT64_C(1000), &weight) < 0)
        r = -EINVAL;
    int64_t budget = 0; /* GPU-hours per month, in thousandths; 0: none */
    if (has[T_BUDGET] && field_fixed(x, &v[T_BUDGET], 3, 0, MAX_BUDGET_MILLI, &budget) < 0)
        r = -EINVAL;
    uint8_t tiers = 0;
    if (has[T_CAPACITY] && field_tiers(x, &v[T_CAPACITY], &tiers) < 0)
        r = -EINVAL;
    if (burst < 0) {
        burst = guaranteed;
    } else if (r == 0 && burst < guaranteed) {
        field_bad(x, &v[T_BURST], "must be at least guaranteed_gpus (%s)", v[T_GUARANTEED].text);
        r = -EINVAL;
    }
    Team t = {
        .name = (char *)name,
        .guaranteed_gpus = (double)guaranteed / 1000.0,
        .burst_gpus = (double)burst / 1000.0,
        .weight = (double)weight / 1000.0,
        .budget_gpu_hours = (double)budget / 1000.0,
        .tiers = tiers,
    };
    if (has[T_RUN_AS] && read_run_as(x, &v[T_RUN_AS], name, &t.run_as) < 0)
        r = -EINVAL;
    if (has[T_PROJECTS]) {
        int e = field_each(x, &v[T_PROJECTS], team_project, &t);
        if (e < 0)
            r = e == -ENOMEM ? e : -EINVAL;
    }
    if (r == 0) {
        int ti = cluster_add_team(cr->c, &t);
        if (ti == -EEXIST) {
            field_error(x, v[T_NAME].line, "duplicate team '%s' (first on line %zu)", name,
                        cr->team_lines[cluster_find_team(cr->c, name)]);
            r = -EINVAL;
        } else if (ti < 0) {
            r = ti;
        } else if (push_line(&cr->team_lines, &cr->n_team_lines, &cr->team_lines_cap,
                             v[T_NAME].line) < 0) {
            r = -ENOMEM;
        }
    }
    field_strv_free(t.projects, t.n_projects);
    return r;
}

/* Read each entry of a list field with fn; keeps going after bad entries so that one
 * pass reports them all. -ENOMEM stops it. */
static int read_list(ClusterReader *cr, const FieldVal *v, const char *of,
                     int (*fn)(ClusterReader *cr, struct fy_node *seq, struct fy_node *item,
                               size_t line))
{
    if (!want_list(cr->x, v, of))
        return -EINVAL;
    int r = 0;
    void *it = NULL;
    struct fy_node *item;
    while ((item = fy_node_sequence_iterate(v->node, &it))) {
        int e = fn(cr, v->node, item, field_node_line(item, v->line));
        if (e == -ENOMEM)
            return e;
        if (e < 0)
            r = -EINVAL;
    }
    return r;
}

static int list_switch(ClusterReader *cr, struct fy_node *seq, struct fy_node *item, size_t line)
{
    return read_switch(cr, seq, item, line);
}
static int list_pool(ClusterReader *cr, struct fy_node *seq, struct fy_node *item, size_t line)
{
    return read_pool(cr, item, line);
}
static int list_team(ClusterReader *cr, struct fy_node *seq, struct fy_node *item, size_t line)
{
    return read_team(cr, item, line);
}

static int read_cluster(FieldCtx *x, struct fy_node *root, const char *file, unsigned flags,
                        Cluster **ret)
{
    size_t line = field_node_line(root, 1);
    FieldVal v[TOP_COUNT];
    bool has[TOP_COUNT];
    int r = field_collect(x, root, line, "the cluster spec", top_fields, TOP_COUNT, v, has);
    const char *name = NULL;
    if (has[TOP_NAME] && field_text(x, &v[TOP_NAME], &name) < 0)
        r = -EINVAL;
    _cleanup_free_ char *base = name ? NULL : spec_base_name(file);
    if (!name && !base)
        return -ENOMEM;
    ClusterReader cr = {.x = x, .c = cluster_new(name ? name : base)};
    if (!cr.c)
        return -ENOMEM;
    int e = 0;
    if (has[TOP_SWITCHES] && (e = read_list(&cr, &v[TOP_SWITCHES], "switches", list_switch)) < 0)
        r = e;
    if (e != -ENOMEM && !has[TOP_POOLS] && (flags & SPEC_POOLS_ELSEWHERE)) {
        /* the nodes come from elsewhere (Kubernetes Node objects) */
    } else if (e != -ENOMEM && !has[TOP_POOLS]) {
        field_error(x, line, "missing field 'pools' in the cluster spec");
        r = -EINVAL;
    } else if (e != -ENOMEM && (e = read_list(&cr, &v[TOP_POOLS], "pools", list_pool)) < 0) {
        r = e;
    }
    if (e != -ENOMEM && has[TOP_TEAMS] &&
        (e = read_list(&cr, &v[TOP_TEAMS], "teams", list_team)) < 0)
        r = e;
    if (e == -ENOMEM)
        r = e;
    for (size_t i = 0; r == 0 && i < cr.c->n_pools; i++) {
        e = cluster_add_pool_nodes(cr.c, (uint32_t)i);
        if (e == -EEXIST || e == -ENAMETOOLONG) {
            field_error(x, cr.pool_lines[i], "pool '%s': %s", cr.c->pools[i].name,
                        e == -EEXIST ? "its node names collide with another pool's"
                                     : "the name is too long");
            r = -EINVAL;
        } else if (e < 0) {
            r = e;
        }
    }
    free(cr.switch_lines);
    free(cr.pool_lines);
    free(cr.team_lines);
    if (r < 0 || x->n_errors) {
        cluster_free(cr.c);
        return r < 0 ? r : -EINVAL;
    }
    *ret = cr.c;
    return 0;
}

int spec_parse_cluster_yaml(const char *text, size_t len, const char *name, Cluster **ret, Buf *err)
{
    return spec_parse_cluster_yaml_flags(text, len, name, 0, ret, err);
}

int spec_parse_cluster_yaml_flags(const char *text, size_t len, const char *name, unsigned flags,
                                  Cluster **ret, Buf *err)
{
    FieldCtx x;
    field_ctx_init(&x, name, "field", err);
    FieldYaml y;
    int r = field_yaml_open(&y, &x, text, len);
    if (r < 0)
        return r;
    Cluster *c = NULL;
    r = field_yaml_next(&y);
    struct fy_node *root = r > 0 ? fy_document_root(y.doc) : NULL;
    if (r >= 0 && !root) {
        field_error(&x, 1,
                    "empty; a cluster spec is a mapping with name, switches, pools and "
                    "teams");
        r = -EINVAL;
    } else if (r > 0 && !fy_node_is_mapping(root)) {
        field_error(&x, field_node_line(root, 1),
                    "a cluster spec is a mapping with name, switches, pools and teams, not %s",
                    field_node_shape(root));
        r = -EINVAL;
    } else if (r > 0) {
        r = read_cluster(&x, root, name ? name : "cluster", flags, &c);
    }
    if (r >= 0) {
        int more;
        /* an empty document after the spec (a trailing ---) is harmless */
        while ((more = field_yaml_next(&y)) > 0 && field_node_is_null(fy_document_root(y.doc)))
            ;
        if (more > 0) {
            field_error(&x, field_node_line(fy_document_root(y.doc), 0),
                        "a second YAML document; a cluster spec is one document");
            r = -EINVAL;
        } else if (more < 0) {
            r = more;
        }
    }
    field_yaml_close(&y);
    if (r < 0) {
        cluster_free(c);
        return r;
    }
    *ret = c;
    return 0;
}
