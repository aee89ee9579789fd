/* learn.c: learned peak GPU memory per workload class, a small sorted-free table (a
 * cluster has tens to hundreds of classes). */
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

void learn_class_of(const JobSpec *j, char *out, size_t outlen)
{
    if (!outlen)
        return;
    if (j->workload_class && *j->workload_class) {
        size_t n = strlen(j->workload_class);
        n = n < outlen ? n : outlen - 1;
        memcpy(out, j->workload_class, n);
        out[n] = '\0';
        return;
    }
    /* team + name without a trailing "-17" / "_3" / "17" */
    const char *name = j->name ? j->name : "";
    size_t n = strlen(name);
    while (n > 0 && isdigit((unsigned char)name[n - 1]))
        n--;
    while (n > 0 && (name[n - 1] == '-' || name[n - 1] == '_' || name[n - 1] == '.'))
        n--;
    if (n == 0)
        n = strlen(name);
    const char *team = j->team ? j->team : "";
    size_t tl = strlen(team), at = 0;
    for (size_t i = 0; i < tl && at + 1 < outlen; i++)
        out[at++] = team[i];
    if (at + 1 < outlen)
        out[at++] = '/';
    for (size_t i = 0; i < n && at + 1 < outlen; i++)
        out[at++] = name[i];
    out[at] = '\0';
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
    LearnEntry *e = entry(l, cls);
    if (!e)
        return -ENOMEM;
    uint64_t seen = peak_mib > granted_mib ? peak_mib : granted_mib;
    uint64_t need = (seen * OOM_BUMP_NUM + OOM_BUMP_DEN - 1) / OOM_BUMP_DEN;
    if (need > e->peak_mib)
        e->peak_mib = need;
    return (int)e->ooms++;
}

uint64_t learn_peak(const Learn *l, const char *cls)
{
    const LearnEntry *e = find(l, cls);
    return e ? e->peak_mib : 0;
}

uint64_t learn_memory_for(const Learn *l, const JobSpec *j)
{
    char cls[256];
    learn_class_of(j, cls, sizeof(cls));
    uint64_t peak = learn_peak(l, cls);
    uint64_t asked = j->req == REQ_MEMORY ? j->gpu_memory_mib : 0;
    return peak > asked ? peak : asked;
}
