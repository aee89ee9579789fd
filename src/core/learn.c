/* learn.c: learned peak GPU memory per workload class, a small sorted-free table (a
 * cluster has tens to hundreds of classes), keyed by team (learn.h says the rule). */
#include "core/learn.h"

#include "util/macro.h"

#include <ctype.h>
#include <errno.h>
#include <string.h>

void learn_free(Learn *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->e[i].cls);
    free(l->e);
    *l = (Learn){0};
}

/* Append the team, with '%' and '/' escaped, and the '/' that ends it; false when it
 * does not all fit before the terminator. */
static bool put_team(const char *team, char *out, size_t outlen, size_t *at)
{
    for (const char *p = team; *p; p++) {
        const char *w = *p == '%' ? "%25" : *p == '/' ? "%2F" : NULL;
        size_t n = w ? 3 : 1;
        if (*at + n + 1 >= outlen)
            return false;
        memcpy(out + *at, w ? w : p, n);
        *at += n;
    }
    if (*at + 1 >= outlen)
        return false;
    out[(*at)++] = '/';
    return true;
}

bool learn_class_of(const JobSpec *j, char *out, size_t outlen)
{
    if (!outlen)
        return false;
    const char *team = j->team ? j->team : "";
    size_t at = 0;
    if (!put_team(team, out, outlen, &at)) {
        out[0] = '\0';
        return false;
    }
    const char *name = j->workload_class;
    size_t n = 0;
    if (name && *name) {
        /* "search/llama" written by team search is its class "llama" */
        size_t tl = strlen(team);
        if (!strncmp(name, team, tl) && name[tl] == '/' && name[tl + 1])
            name += tl + 1;
        n = strlen(name);
    } else {
        /* the name without a trailing "-17" / "_3" / "17" */
        name = j->name ? j->name : "";
        n = strlen(name);
        while (n > 0 && isdigit((unsigned char)name[n - 1]))
            n--;
        while (n > 0 && (name[n - 1] == '-' || name[n - 1] == '_' || name[n - 1] == '.'))
            n--;
        if (n == 0)
            n = strlen(name);
    }
    if (n > outlen - 1 - at) {
        /* cut before a character, not inside one: the key stays UTF-8 (JSON) */
        n = outlen - 1 - at;
        while (n > 0 && ((unsigned char)name[n] & 0xC0) == 0x80)
            n--;
    }
    memcpy(out + at, name, n);
    out[at + n] = '\0';
    return true;
}

bool learn_class_team(const char *key, char *out, size_t outlen, const char **ret_name)
{
    const char *slash = strchr(key, '/');
    if (!slash || !outlen)
        return false;
    size_t at = 0;
    for (const char *p = key; p < slash; p++) {
        char c = *p;
        if (c == '%' && slash - p >= 3 && p[1] == '2' && (p[2] == '5' || p[2] == 'F')) {
            c = p[2] == '5' ? '%' : '/';
            p += 2;
        }
        if (at + 1 >= outlen)
            return false;
        out[at++] = c;
    }
    out[at] = '\0';
    if (ret_name)
        *ret_name = slash + 1;
    return true;
}

bool learn_class_in_team(const char *key, const char *team)
{
    char enc[LEARN_CLASS_MAX];
    size_t at = 0;
    if (!put_team(team ? team : "", enc, sizeof(enc), &at))
        return false;
    return !strncmp(key, enc, at);
}

static LearnEntry *find(const Learn *l, const char *cls)
{
    for (size_t i = 0; i < l->n; i++)
        if (!strcmp(l->e[i].cls, cls))
            return &l->e[i];
    return NULL;
}

/* The entry of a class, added when new; NULL when out of memory. */
static LearnEntry *entry(Learn *l, const char *cls)
{
    LearnEntry *e = find(l, cls);
    if (e)
        return e;
    if (GROW(l->e, l->cap, l->n + 1) < 0)
        return NULL;
    char *copy = strdup(cls);
    if (!copy)
        return NULL;
    e = &l->e[l->n++];
    *e = (LearnEntry){.cls = copy};
    return e;
}

int learn_record(Learn *l, const char *cls, uint64_t peak_mib)
{
    if (!*cls)
        return -EINVAL;
    LearnEntry *e = entry(l, cls);
    if (!e)
        return -ENOMEM;
    if (peak_mib > e->peak_mib)
        e->peak_mib = peak_mib;
    return 0;
}

/* VPA's OOMBumpUpRatio, 1.2, as a fraction */
#define OOM_BUMP_NUM 6
#define OOM_BUMP_DEN 5

int learn_oom(Learn *l, const char *cls, uint64_t peak_mib, uint64_t granted_mib)
{
    if (!*cls)
        return -EINVAL;
    LearnEntry *e = entry(l, cls);
    if (!e)
        return -ENOMEM;
    uint64_t seen = peak_mib > granted_mib ? peak_mib : granted_mib;
    uint64_t need = (seen * OOM_BUMP_NUM + OOM_BUMP_DEN - 1) / OOM_BUMP_DEN;
    if (need > e->peak_mib)
        e->peak_mib = need;
    return (int)e->ooms++;
}

const LearnEntry *learn_find(const Learn *l, const char *cls)
{
    return find(l, cls);
}

int learn_restore(Learn *l, const char *cls, uint64_t peak_mib, unsigned ooms)
{
    LearnEntry *e = entry(l, cls);
    if (!e)
        return -ENOMEM;
    e->peak_mib = peak_mib;
    e->ooms = ooms;
    return 0;
}

int learn_forget(Learn *l, const char *cls)
{
    LearnEntry *e = find(l, cls);
    if (!e)
        return -ENOENT;
    free(e->cls);
    /* order does not matter: the table is searched whole, the API sorts its reply */
    *e = l->e[--l->n];
    return 0;
}

uint64_t learn_peak(const Learn *l, const char *cls)
{
    const LearnEntry *e = find(l, cls);
    return e ? e->peak_mib : 0;
}

uint64_t learn_memory_for(const Learn *l, const JobSpec *j)
{
    char cls[LEARN_CLASS_MAX];
    learn_class_of(j, cls, sizeof(cls));
    uint64_t peak = learn_peak(l, cls);
    uint64_t asked = j->req == REQ_MEMORY ? j->gpu_memory_mib : 0;
    return peak > asked ? peak : asked;
}

bool learn_fits(const Cluster *c, uint64_t mib)
{
    for (size_t mi = 0; mi < c->n_models; mi++)
        if (c->models[mi].m.memory_mib >= mib)
            return true;
    return false;
}

uint64_t learn_granted_mib(const Cluster *c, const WorkerAlloc *wa)
{
    const GpuModel *m = node_model(c, &c->nodes[wa->node]);
    uint64_t mib = 0;
    for (unsigned g = 0; g < wa->n_grants; g++) {
        const Grant *gr = &wa->grants[g];
        if (gr->kind == GRANT_WHOLE)
            mib += m->memory_mib;
        else if (gr->kind == GRANT_MIG)
            mib += m->profiles[gr->mig_profile].memory_mib;
        else
            mib += (uint64_t)m->memory_mib * gr->milli / 1000;
    }
    return mib;
}

uint64_t learn_per_gpu(const Cluster *c, const WorkerAlloc *wa, uint64_t mib)
{
    uint64_t n = wa->n_grants ? wa->n_grants : 1;
    uint64_t per = mib / n + (mib % n != 0);
    return MIN(per, node_model(c, &c->nodes[wa->node])->memory_mib);
}

int learn_size_request(const Learn *l, const Cluster *c, const JobSpec *spec, Request *req)
{
    uint64_t want = learn_memory_for(l, spec);
    if (!want || req->kind == REQ_NONE)
        return 0;
    /* the least the current request gives on a model it may get */
    uint64_t have = UINT64_MAX, holds = 0;
    for (size_t mi = 0; mi < c->n_models; mi++) {
        uint64_t bit = 1ull << mi;
        if (!(req->models & bit))
            continue;
        const GpuModel *m = &c->models[mi].m;
        uint64_t g = m->memory_mib;
        if (req->kind != REQ_GPUS) {
            int p = req->mig_profile[mi];
            if (req->share_milli[mi])
                g = (uint64_t)m->memory_mib * req->share_milli[mi] / 1000;
            if (p >= 0 && m->profiles[p].memory_mib < g)
                g = m->profiles[p].memory_mib;
        }
        have = MIN(have, g);
        if (m->memory_mib >= want)
            holds |= bit;
    }
    if (want <= have)
        return 0;
    if (!holds)
        return 2;
    if (req->kind == REQ_GPUS) {
        req->models &= holds;
        req->shape = -1;
        return 1;
    }
    JobSpec tmp = *spec;
    tmp.req = REQ_MEMORY;
    tmp.gpu_memory_mib = want;
    Request r;
    Buf why = {0};
    int rc = request_from_job(c, &tmp, &r, &why);
    buf_free(&why);
    if (rc == -ENOMEM)
        return rc;
    if (rc < 0)
        return 2;
    r.shape = -1;
    *req = r;
    return 1;
}
