/* admit.c: the admission check of admit.h. The request is resolved against the cluster
 * (job.c says what no model could hold), then the pools it could use are narrowed one
 * condition at a time, so that the sentence names the first condition nothing passes:
 * tier, fabric, MIG permission, GPUs per node, CPU, memory. What is left is counted as
 * empty nodes: all of them together, then per topology domain, then against the team's
 * burst limit. */
#include "core/admit.h"

#include "util/macro.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

void admit_mode_models(const Cluster *c, uint64_t *ret_mig, uint64_t *ret_plain)
{
    uint64_t mig = 0, plain = 0;
    for (size_t i = 0; i < c->n_nodes; i++) {
        if (c->nodes[i].mig_allowed)
            mig |= 1ull << c->nodes[i].model;
        else
            plain |= 1ull << c->nodes[i].model;
    }
    *ret_mig = mig;
    *ret_plain = plain;
}

double admit_quota_units(const Cluster *c, const Request *r, uint64_t mig_models,
                         uint64_t plain_models)
{
    double most = 0;
    for (size_t mi = 0; mi < c->n_models; mi++) {
        uint64_t bit = 1ull << mi;
        if (!(r->models & bit))
            continue;
        if (mig_models & bit)
            most = fmax(most, request_units_on(c, r, (unsigned)mi, true));
        if (plain_models & bit)
            most = fmax(most, request_units_on(c, r, (unsigned)mi, false));
    }
    return most * r->workers;
}

/* Workers of r one empty node of pool p could hold; UINT32_MAX when nothing bounds it. */
static uint32_t pool_takes(const Cluster *c, const Pool *p, const Request *r)
{
    const GpuModel *m = &c->models[p->model].m;
    uint32_t k = UINT32_MAX;
    switch (r->kind) {
    case REQ_GPUS:
        k = p->gpus / r->gpus;
        break;
    case REQ_MIG:
    case REQ_MEMORY:
    case REQ_FRACTION: {
        /* the most that could ever share one GPU: slices where it may be partitioned,
         * shares where a share is asked or stands in for a slice */
        uint32_t per_gpu = 0;
        int prof = r->mig_profile[p->model];
        if (p->mig && prof >= 0)
            per_gpu = m->profiles[prof].max_count;
        uint16_t milli = r->share_milli[p->model];
        if (r->kind != REQ_MIG && milli)
            per_gpu = MAX(per_gpu, 1000u / milli);
        k = per_gpu * p->gpus;
        break;
    }
    default:
        break;
    }
    if (r->cpu_milli)
        k = MIN(k, p->cpu_milli / r->cpu_milli);
    if (r->memory_mib)
        k = MIN(k, p->memory_mib / r->memory_mib);
    return k;
}

static void tiers_text(uint8_t mask, Buf *b)
{
    bool first = true;
    for (int t = 0; t < TIER_COUNT; t++)
        if (mask & (1u << t)) {
            buf_printf(b, "%s%s", first ? "" : ", ", tier_name((Tier)t));
            first = false;
        }
}

typedef struct Admit {
    const Cluster *c;
    const JobSpec *j;
    const Request *r;
    Buf *why;
    uint8_t *in;  /* per pool: still a candidate */
    uint8_t *was; /* per pool: a candidate before the last narrowing */
    Buf pools;    /* scratch: the pools of `was`, named */
} Admit;

static void say(Admit *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(Admit *a, const char *fmt, ...)
{
    buf_printf(a->why, "job %s cannot run on cluster %s: ", a->j->name, a->c->name);
    va_list ap;
    va_start(ap, fmt);
    buf_vprintf(a->why, fmt, ap);
    va_end(ap);
}

/* Drop the candidate pools whose first misfit is `why` (earlier ones are gone
 * already); false when none is left. */
static bool narrow(Admit *a, PoolMisfit why)
{
    memcpy(a->was, a->in, a->c->n_pools);
    bool any = false;
    for (size_t p = 0; p < a->c->n_pools; p++) {
        if (a->in[p] && request_pool_misfit(&a->c->pools[p], a->r) == why)
            a->in[p] = 0;
        any |= a->in[p];
    }
    return any;
}

/* The pools that were candidates, named with their tiers: "a100 (owned), l4 (on-demand)". */
static const char *was_text(Admit *a)
{
    buf_reset(&a->pools);
    bool first = true;
    for (size_t p = 0; p < a->c->n_pools; p++)
        if (a->was[p]) {
            const Pool *pl = &a->c->pools[p];
            buf_printf(&a->pools, "%s%s (%s)", first ? "" : ", ", pl->name, tier_name(pl->tier));
            first = false;
        }
    return buf_str(&a->pools);
}

static uint32_t pool_gpus(const Pool *p)
{
    return p->gpus;
}
static uint32_t pool_cpu_milli(const Pool *p)
{
    return p->cpu_milli;
}
static uint32_t pool_memory_mib(const Pool *p)
{
    return p->memory_mib;
}

/* The largest per-node value among the pools that were candidates. */
static uint32_t most_was(const Admit *a, uint32_t (*of)(const Pool *p))
{
    uint32_t most = 0;
    for (size_t p = 0; p < a->c->n_pools; p++)
        if (a->was[p])
            most = MAX(most, of(&a->c->pools[p]));
    return most;
}

/* The first condition that no pool the job could use meets, said; false when some pool
 * meets them all (a->in then holds those pools). */
static bool no_pool(Admit *a)
{
    const Request *r = a->r;
    narrow(a, POOL_MODEL);
    if (!narrow(a, POOL_TIER)) {
        Buf t = {0};
        tiers_text(r->tiers, &t);
        say(a, "it may run on %s capacity, and the pools of the GPU models it may use are %s",
            buf_str(&t), was_text(a));
        buf_free(&t);
        int team = a->j->team ? cluster_find_team(a->c, a->j->team) : -1;
        bool spot_was = false;
        for (size_t p = 0; p < a->c->n_pools; p++)
            spot_was |= a->was[p] && a->c->pools[p].tier == TIER_SPOT;
        if (team >= 0 && a->c->teams[team].tiers)
            buf_printf(a->why, " (team '%s' may use only the tiers of its 'capacity')", a->j->team);
        else if (a->j->priority == PRIO_PRODUCTION)
            buf_puts(a->why, " (production never runs on spot)");
        else if (spot_was && !job_spec_spot_ok(a->j))
            buf_puts(a->why, " (spot takes only preemptible work that checkpoints)");
    } else if (!narrow(a, POOL_FABRIC)) {
        say(a, "it asks for fabric '%s', which none of the pools it may use has (%s)",
            a->c->fabrics[r->fabric], was_text(a));
    } else if (!narrow(a, POOL_GPUS)) {
        if (r->kind == REQ_GPUS)
            say(a,
                "it asks for %u GPUs per worker, and a node of the pools it may use has at most %u",
                r->gpus, most_was(a, pool_gpus));
        else if (r->kind == REQ_MIG)
            say(a,
                "it asks for a MIG slice of profile %s, and none of the pools it may use lets its "
                "GPUs be partitioned (%s; a pool allows it with 'mig: true')",
                a->j->mig ? a->j->mig : "?", was_text(a));
        else
            say(a, "none of the pools it may use has GPUs (%s)", was_text(a));
    } else if (!narrow(a, POOL_CPU)) {
        say(a, "it asks for %g CPUs per worker, and a node it may use has at most %g",
            r->cpu_milli / 1000.0, most_was(a, pool_cpu_milli) / 1000.0);
    } else if (!narrow(a, POOL_MEMORY)) {
        say(a,
            "it asks for %g GiB of host memory per worker, and a node it may use has at most %g "
            "GiB",
            r->memory_mib / 1024.0, most_was(a, pool_memory_mib) / 1024.0);
    } else {
        return false;
    }
    return true;
}

/* Workers the candidate nodes hold, all together and in the best domain of the job's
 * scope (when it requires one); false when either falls short, said. */
static int short_of_room(Admit *a, bool *ret)
{
    const Cluster *c = a->c;
    const Request *r = a->r;
    uint32_t *takes = calloc(c->n_pools ? c->n_pools : 1, sizeof(*takes));
    bool scoped = r->scope_required && r->scope != SCOPE_ANY;
    size_t nd = !scoped ? 1 : r->scope == SCOPE_NODE ? c->n_nodes : c->n_switches + 1;
    uint64_t *sum = calloc(nd ? nd : 1, sizeof(*sum));
    if (!takes || !sum) {
        free(takes);
        free(sum);
        return -ENOMEM;
    }
    for (size_t p = 0; p < c->n_pools; p++)
        takes[p] = a->in[p] ? MIN(pool_takes(c, &c->pools[p], r), r->workers) : 0;
    uint64_t total = 0, best = 0;
    for (size_t i = 0; i < c->n_nodes; i++) {
        const Node *n = &c->nodes[i];
        uint32_t k = takes[n->pool];
        total += k;
        if (!scoped)
            continue;
        uint32_t sw = r->scope == SCOPE_LEAF ? n->leaf : n->spine;
        size_t d = r->scope == SCOPE_NODE ? i : sw == NO_SWITCH ? c->n_switches : sw;
        sum[d] += k;
        best = MAX(best, sum[d]);
    }
    free(takes);
    free(sum);
    *ret = true;
    if (total < r->workers)
        say(a,
            "its %u workers could never all run at once: every node it may use together holds "
            "at most %llu of them",
            r->workers, (unsigned long long)total);
    else if (scoped && best < r->workers)
        say(a,
            "its topology requires one %s, and no %s holds its %u workers (the most one holds "
            "is %llu)",
            scope_name(r->scope), scope_name(r->scope), r->workers, (unsigned long long)best);
    else
        *ret = false;
    return 0;
}

/* Over the team's burst limit even with nothing else of the team running? */
static bool over_burst(Admit *a)
{
    const Cluster *c = a->c;
    int t = a->j->team ? cluster_find_team(c, a->j->team) : -1;
    if (t < 0)
        return false;
    const Team *tm = &c->teams[t];
    uint64_t mig, plain;
    admit_mode_models(c, &mig, &plain);
    double units = admit_quota_units(c, a->r, mig, plain);
    double limit = fmax(tm->burst_gpus, tm->guaranteed_gpus) * GPU_UNITS;
    if (units <= limit + 1e-6)
        return false;
    say(a,
        "it would hold %g GPU-equivalents, more than team '%s' may ever hold (its burst limit is "
        "%g); it runs as a smaller job, or once an admin raises the limit",
        units / GPU_UNITS, tm->name, fmax(tm->burst_gpus, tm->guaranteed_gpus));
    return true;
}

/* The checks of the fields themselves, before the cluster's capacity is asked. */
static int check_fields(const Cluster *c, const JobSpec *j, unsigned flags, Buf *why)
{
    if (!j->name || !*j->name) {
        buf_puts(why, "job: field 'name' is required");
        return ADMIT_BAD;
    }
    if ((flags & ADMIT_NEED_COMMAND) && !j->n_command) {
        buf_printf(why, "job %s: field 'command' is required: the agent runs it", j->name);
        return ADMIT_BAD;
    }
    if (c->n_teams && !j->team) {
        buf_printf(why, "job %s: field 'team' is required: the cluster has teams", j->name);
        return ADMIT_BAD;
    }
    int t = j->team ? cluster_find_team(c, j->team) : -1;
    if (j->team && t < 0 && c->n_teams) {
        buf_printf(why, "job %s: field 'team': the cluster has no team '%s'", j->name, j->team);
        return ADMIT_BAD;
    }
    if (t < 0)
        return ADMIT_OK;
    const Team *tm = &c->teams[t];
    if (j->project && tm->n_projects) {
        bool known = false;
        for (size_t p = 0; p < tm->n_projects && !known; p++)
            known = !strcmp(tm->projects[p], j->project);
        if (!known) {
            buf_printf(why,
                       "job %s: field 'project': team '%s' has no project '%s' (its projects: ",
                       j->name, j->team, j->project);
            for (size_t p = 0; p < tm->n_projects; p++)
                buf_printf(why, "%s%s", p ? ", " : "", tm->projects[p]);
            buf_puts(why, ")");
            return ADMIT_FORBIDDEN;
        }
    }
    if (tm->tiers && (j->tiers & ~tm->tiers)) {
        Buf may = {0}, asked = {0};
        tiers_text(tm->tiers, &may);
        tiers_text(j->tiers & ~tm->tiers, &asked);
        buf_printf(why, "job %s: field 'capacity': team '%s' may use %s capacity, not %s", j->name,
                   j->team, buf_str(&may), buf_str(&asked));
        buf_free(&may);
        buf_free(&asked);
        return ADMIT_FORBIDDEN;
    }
    return ADMIT_OK;
}

int admit_job(const Cluster *c, const Learn *l, const JobSpec *j, unsigned flags, Request *ret,
              Buf *why)
{
    int v = check_fields(c, j, flags, why);
    if (v != ADMIT_OK)
        return v;
    Request r;
    Buf inner = {0};
    int e = request_from_job(c, j, &r, &inner);
    if (e < 0) {
        if (e != -ENOMEM)
            buf_printf(why, "job %s cannot run on cluster %s: %s", j->name, c->name,
                       buf_str(&inner));
        buf_free(&inner);
        return e == -ENOMEM ? e : ADMIT_NEVER;
    }
    buf_free(&inner);
    if (l) {
        e = learn_size_request(l, c, j, &r);
        if (e < 0)
            return e;
        if (e == 2) {
            char cls[LEARN_CLASS_MAX];
            learn_class_of(j, cls, sizeof(cls));
            buf_printf(why,
                       "job %s cannot run on cluster %s: its workload class %s ran out of GPU "
                       "memory and needs %llu MiB, more than any GPU here has (an admin or the "
                       "team's lead can reset the class: gpuorch learned reset %s)",
                       j->name, c->name, cls, (unsigned long long)learn_peak(l, cls), cls);
            return ADMIT_NEVER;
        }
    }
    Admit a = {.c = c, .j = j, .r = &r, .why = why};
    a.in = malloc(c->n_pools ? c->n_pools : 1);
    a.was = malloc(c->n_pools ? c->n_pools : 1);
    if (!a.in || !a.was) {
        v = -ENOMEM;
        goto out;
    }
    for (size_t p = 0; p < c->n_pools; p++)
        a.in[p] = c->pools[p].nodes > 0; /* a pool of no nodes holds nothing */
    bool refused = no_pool(&a);
    if (!refused && (e = short_of_room(&a, &refused)) < 0) {
        v = e;
        goto out;
    }
    if (!refused)
        refused = over_burst(&a);
    v = refused ? ADMIT_NEVER : ADMIT_OK;
    if (v == ADMIT_OK && ret)
        *ret = r;
out:
    free(a.in);
    free(a.was);
    buf_free(&a.pools);
    return v;
}
