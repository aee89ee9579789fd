/* job.c: job spec lifetime, names of the enums, and resolution of a job's GPU ask
 * against a cluster's models. */
#include "core/job.h"

#include "util/macro.h"

#include <errno.h>
#include <string.h>
#include <strings.h>

static const char *const kind_names[KIND_COUNT] = {"inference", "training", "batch", "interactive"};
static const char *const prio_names[PRIO_COUNT] = {"production", "high", "normal", "low"};
static const char *const scope_names[] = {"any", "node", "leaf", "spine"};
static const char *const req_names[] = {"none", "gpus", "mig", "gpu_memory", "gpu_fraction"};

static int lookup(const char *const *names, size_t n, const char *s)
{
    for (size_t i = 0; s && i < n; i++)
        if (strcasecmp(names[i], s) == 0)
            return (int)i;
    return -1;
}

const char *job_kind_name(JobKind k)
{
    return k < KIND_COUNT ? kind_names[k] : "?";
}
int job_kind_from_name(const char *s)
{
    return lookup(kind_names, KIND_COUNT, s);
}
const char *priority_name(Priority p)
{
    return p < PRIO_COUNT ? prio_names[p] : "?";
}
int priority_from_name(const char *s)
{
    int p = lookup(prio_names, PRIO_COUNT, s);
    if (p < 0 && s && strcasecmp(s, "batch") == 0)
        p = PRIO_LOW;
    return p;
}
const char *scope_name(Scope s)
{
    return (unsigned)s < ARRAY_SIZE(scope_names) ? scope_names[s] : "?";
}
int scope_from_name(const char *s)
{
    return lookup(scope_names, ARRAY_SIZE(scope_names), s);
}
const char *req_kind_name(ReqKind k)
{
    return (unsigned)k < ARRAY_SIZE(req_names) ? req_names[k] : "?";
}

bool job_spec_checkpoints(const JobSpec *j)
{
    return j->checkpoint_interval_ms > 0 || j->checkpoint_cost_ms > 0;
}

bool job_spec_spot_ok(const JobSpec *j)
{
    return j->priority != PRIO_PRODUCTION && j->preemptible && job_spec_checkpoints(j);
}

bool job_spec_prefers_owned(const JobSpec *j)
{
    return j->priority == PRIO_PRODUCTION || (j->kind == KIND_INFERENCE && !j->preemptible);
}

void job_spec_init(JobSpec *j)
{
    *j = (JobSpec){
        .kind = KIND_BATCH,
        .priority = PRIO_NORMAL,
        .workers = 1,
        .req = REQ_GPUS,
        .gpus = 1,
        .duration_estimate_ms = NO_DURATION,
        .duration_ms = NO_DURATION,
        .busy_milli = BUSY_ALL,
    };
}

static void free_strv(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

void job_spec_free(JobSpec *j)
{
    if (!j)
        return;
    free(j->name);
    free(j->team);
    free(j->project);
    free(j->mig);
    free(j->fabric);
    free(j->workload_class);
    free_strv(j->gpu_models, j->n_gpu_models);
    free_strv(j->command, j->n_command);
    free_strv(j->env, j->n_env);
    job_spec_init(j);
}

static int dup_str(const char *s, char **ret)
{
    *ret = NULL;
    if (!s)
        return 0;
    *ret = strdup(s);
    return *ret ? 0 : -ENOMEM;
}

static int dup_strv(char *const *v, size_t n, char ***ret)
{
    *ret = NULL;
    if (!n)
        return 0;
    char **out = calloc(n, sizeof(char *));
    if (!out)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        if (!(out[i] = strdup(v[i]))) {
            free_strv(out, i);
            return -ENOMEM;
        }
    }
    *ret = out;
    return 0;
}

int job_spec_copy(const JobSpec *src, JobSpec *ret)
{
    JobSpec j = *src;
    j.name = j.team = j.project = j.mig = j.fabric = j.workload_class = NULL;
    j.gpu_models = j.command = j.env = NULL;
    int r = 0;
    r = r ?: dup_str(src->name, &j.name);
    r = r ?: dup_str(src->team, &j.team);
    r = r ?: dup_str(src->project, &j.project);
    r = r ?: dup_str(src->mig, &j.mig);
    r = r ?: dup_str(src->fabric, &j.fabric);
    r = r ?: dup_str(src->workload_class, &j.workload_class);
    r = r ?: dup_strv(src->gpu_models, src->n_gpu_models, &j.gpu_models);
    r = r ?: dup_strv(src->command, src->n_command, &j.command);
    r = r ?: dup_strv(src->env, src->n_env, &j.env);
    if (r < 0) {
        job_spec_free(&j);
        return r;
    }
    *ret = j;
    return 0;
}

uint32_t request_units_on(const Cluster *c, const Request *r, unsigned model, bool mig)
{
    const GpuModel *m = &c->models[model].m;
    switch (r->kind) {
    case REQ_GPUS:
        return r->gpus * GPU_UNITS;
    case REQ_MIG:
    case REQ_MEMORY:
    case REQ_FRACTION:
        if (mig && r->mig_profile[model] >= 0)
            return m->profiles[r->mig_profile[model]].compute_slices *
                   (GPU_UNITS / m->mig_compute_slices);
        return r->share_milli[model] * (GPU_UNITS / 1000);
    default:
        return 0;
    }
}

PoolMisfit request_pool_misfit(const Pool *p, const Request *r)
{
    if (!(r->models & (1ull << p->model)))
        return POOL_MODEL;
    if (!(r->tiers & (1u << p->tier)))
        return POOL_TIER;
    if (r->fabric && p->fabric != r->fabric)
        return POOL_FABRIC;
    bool gpus;
    switch (r->kind) {
    case REQ_GPUS:
        gpus = p->gpus >= r->gpus;
        break;
    case REQ_MIG:
        gpus = p->gpus && p->mig && r->mig_profile[p->model] >= 0;
        break;
    case REQ_MEMORY:
        gpus = p->gpus && ((p->mig && r->mig_profile[p->model] >= 0) || r->share_milli[p->model]);
        break;
    case REQ_FRACTION:
        gpus = p->gpus > 0;
        break;
    default:
        gpus = true;
    }
    if (!gpus)
        return POOL_GPUS;
    if (p->cpu_milli < r->cpu_milli)
        return POOL_CPU;
    if (p->memory_mib < r->memory_mib)
        return POOL_MEMORY;
    return POOL_FITS;
}

bool request_same_shape(const Request *a, const Request *b)
{
    return a->kind == b->kind && a->gpus == b->gpus && a->scope == b->scope &&
           a->scope_required == b->scope_required && a->tiers == b->tiers &&
           a->prefer == b->prefer && a->fabric == b->fabric && a->cpu_milli == b->cpu_milli &&
           a->memory_mib == b->memory_mib && a->models == b->models &&
           memcmp(a->mig_profile, b->mig_profile, sizeof(a->mig_profile)) == 0 &&
           memcmp(a->share_milli, b->share_milli, sizeof(a->share_milli)) == 0;
}

/* Which cluster models the job allows, as a mask; why names what is unknown. */
static int allowed_models(const Cluster *c, const JobSpec *j, uint64_t *ret, Buf *why)
{
    if (!j->n_gpu_models) {
        *ret = c->n_models >= 64 ? UINT64_MAX : (1ull << c->n_models) - 1;
        return 0;
    }
    uint64_t mask = 0;
    for (size_t i = 0; i < j->n_gpu_models; i++) {
        int mi = cluster_find_model(c, j->gpu_models[i]);
        if (mi >= 0)
            mask |= 1ull << mi;
    }
    if (!mask) {
        buf_puts(why, "none of the GPU models it allows (");
        for (size_t i = 0; i < j->n_gpu_models; i++)
            buf_printf(why, "%s%s", i ? ", " : "", j->gpu_models[i]);
        buf_puts(why, ") is in this cluster");
        return -EINVAL;
    }
    *ret = mask;
    return 0;
}

int request_from_job(const Cluster *c, const JobSpec *j, Request *ret, Buf *why)
{
    Request r = {
        .kind = j->req,
        .scope = j->scope,
        .scope_required = j->scope_required,
        .workers = j->workers ? j->workers : 1,
        .cpu_milli = j->cpu_milli,
        .memory_mib = j->memory_mib,
        .shape = -1,
    };
    memset(r.mig_profile, -1, sizeof(r.mig_profile));
    r.tiers = j->tiers ? j->tiers : TIERS_ALL;
    if (!job_spec_spot_ok(j))
        r.tiers &= (uint8_t) ~(1u << TIER_SPOT);
    if (!r.tiers) {
        if (j->priority == PRIO_PRODUCTION)
            buf_puts(why,
                     "production jobs may not run on spot capacity, and spot is all it allows");
        else
            buf_printf(why,
                       "work that %s may not run on spot capacity (an interruption would lose "
                       "it), and spot is all it allows: %s, or allow another tier",
                       j->preemptible ? "does not checkpoint" : "is not preemptible",
                       j->preemptible ? "give it a checkpoint interval or cost"
                                      : "make it preemptible with a checkpoint");
        return -EINVAL;
    }
    int team = j->team ? cluster_find_team(c, j->team) : -1;
    if (team >= 0 && c->teams[team].tiers) {
        r.tiers &= c->teams[team].tiers;
        if (!r.tiers) {
            buf_printf(why, "team '%s' may not use the capacity it asks for", j->team);
            return -EINVAL;
        }
    }
    if (job_spec_prefers_owned(j))
        r.prefer = r.tiers & (uint8_t)((1u << TIER_OWNED) | (1u << TIER_RESERVED));
    if (j->fabric && *j->fabric) {
        r.fabric = 0;
        for (size_t i = 1; i < c->n_fabrics; i++)
            if (strcasecmp(c->fabrics[i], j->fabric) == 0)
                r.fabric = (uint16_t)i;
        if (!r.fabric) {
            buf_printf(why, "no node has fabric '%s'", j->fabric);
            return -EINVAL;
        }
    }
    int err = allowed_models(c, j, &r.models, why);
    if (err < 0)
        return err;

    uint64_t usable = 0;
    switch (j->req) {
    case REQ_NONE:
        usable = r.models;
        break;
    case REQ_GPUS:
        if (j->gpus == 0 || j->gpus > NODE_MAX_GPUS) {
            buf_printf(why, "asks for %u GPUs per worker; a worker runs on one node (at most %u)",
                       j->gpus, NODE_MAX_GPUS);
            return -EINVAL;
        }
        r.gpus = (uint8_t)j->gpus;
        for (size_t i = 0; i < c->n_pools; i++)
            if (c->pools[i].gpus >= r.gpus && (r.models & (1ull << c->pools[i].model)))
                usable |= 1ull << c->pools[i].model;
        if (!usable) {
            buf_printf(why,
                       "asks for %u GPUs per worker; no node of an allowed model has that many",
                       r.gpus);
            return -EINVAL;
        }
        break;
    case REQ_MIG:
        for (size_t mi = 0; mi < c->n_models; mi++) {
            if (!(r.models & (1ull << mi)))
                continue;
            int p = catalog_profile_index(&c->models[mi].m, j->mig);
            if (p >= 0) {
                r.mig_profile[mi] = (int8_t)p;
                usable |= 1ull << mi;
            }
        }
        if (!usable) {
            buf_printf(why, "MIG profile %s exists on none of the allowed GPU models", j->mig);
            return -EINVAL;
        }
        break;
    case REQ_MEMORY:
        for (size_t mi = 0; mi < c->n_models; mi++) {
            if (!(r.models & (1ull << mi)))
                continue;
            const GpuModel *m = &c->models[mi].m;
            int p =
                gpu_model_has_mig(m) ? mig_smallest_profile_for_memory(m, j->gpu_memory_mib) : -1;
            if (p >= 0)
                r.mig_profile[mi] = (int8_t)p;
            if (m->memory_mib && j->gpu_memory_mib <= m->memory_mib) {
                uint64_t milli = (j->gpu_memory_mib * 1000 + m->memory_mib - 1) / m->memory_mib;
                /* On a MIG-capable model, whole memory slots, as its slices are: the share
                 * that stands in for a slice keeps a slice's headroom (an exact share of a
                 * learned need let a class run out of memory twice on mix-demo, seed 16),
                 * and shares pack into the room slices leave. */
                if (gpu_model_has_mig(m)) {
                    uint64_t slots =
                        (j->gpu_memory_mib * m->mig_slots + m->memory_mib - 1) / m->memory_mib;
                    milli = (slots * 1000 + m->mig_slots - 1) / m->mig_slots;
                }
                r.share_milli[mi] = (uint16_t)(milli ? milli : 1);
            }
            if (p >= 0 || r.share_milli[mi])
                usable |= 1ull << mi;
        }
        if (!usable) {
            buf_printf(why, "asks for %llu MiB of GPU memory; no allowed GPU model has that much",
                       (unsigned long long)j->gpu_memory_mib);
            return -EINVAL;
        }
        break;
    case REQ_FRACTION:
        if (j->fraction_milli == 0 || j->fraction_milli > 1000) {
            buf_puts(why, "gpu_fraction must be above 0 and at most 1");
            return -EINVAL;
        }
        for (size_t mi = 0; mi < c->n_models; mi++)
            if (r.models & (1ull << mi))
                r.share_milli[mi] = j->fraction_milli;
        usable = r.models;
        break;
    default:
        buf_puts(why, "has no valid GPU request");
        return -EINVAL;
    }
    r.models = usable;
    *ret = r;
    return 0;
}
