/* nodecheck.c: a node's reported GPUs against its pool in the cluster spec. Each kind
 * of difference is one clause, naming the GPUs it concerns as index ranges ("GPUs 0-3,
 * 6"), so that a whole node of the wrong model reads as one line, not eight. */
#include "server/nodecheck.h"

#include "core/catalog.h"
#include "util/macro.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define NAME_MAX_LEN   96 /* reported names beyond this are cut (NVML's buffer is 96) */
#define MAX_MEMORY_MIB (INT64_C(1) << 40) /* past any GPU; keeps the arithmetic exact */

int nodecheck_parse(json_t *gpus, ReportedGpu **ret, size_t *ret_n, Buf *err)
{
    if (!json_is_array(gpus)) {
        buf_puts(err, "'gpus' must be a list of the node's GPUs");
        return -EINVAL;
    }
    size_t n = json_array_size(gpus);
    ReportedGpu *r = calloc(n ? n : 1, sizeof(*r));
    if (!r)
        return -ENOMEM;
    size_t i;
    json_t *g;
    json_array_foreach(gpus, i, g)
    {
        json_t *idx = json_object_get(g, "index"), *name = json_object_get(g, "name");
        json_t *mem = json_object_get(g, "memory_mib"), *mig = json_object_get(g, "mig_capable");
        if (!json_is_object(g) || !json_is_integer(idx) || json_integer_value(idx) < 0 ||
            !json_is_string(name) || (mem && !json_is_null(mem) && !json_is_integer(mem)) ||
            json_integer_value(mem) < 0 || json_integer_value(mem) > MAX_MEMORY_MIB ||
            (mig && !json_is_null(mig) && !json_is_boolean(mig))) {
            buf_printf(err,
                       "gpus[%zu]: expected {\"index\": N >= 0, \"name\": \"...\", "
                       "\"memory_mib\": MiB, \"mig_capable\": true|false}",
                       i);
            free(r);
            return -EINVAL;
        }
        r[i] = (ReportedGpu){.index = json_integer_value(idx),
                             .name = json_string_value(name),
                             .memory_mib = (uint64_t)json_integer_value(mem),
                             .mig_capable = json_is_boolean(mig) ? json_is_true(mig) : -1};
    }
    *ret = r;
    *ret_n = n;
    return 0;
}

/* Is the reported name the node's model? The catalogue decides for names it knows. A
 * model the catalogue lacks is named by the spec as people write it, so a reported
 * name that contains the spec's ("NVIDIA RTX 6000 Ada Generation" for "RTX 6000 Ada")
 * is taken as it; its memory is checked all the same. */
static bool same_model(const ClusterModel *cm, const char *reported, const GpuModel *found)
{
    if (found)
        return cm->in_catalog && !strcmp(found->name, cm->m.name);
    if (cm->in_catalog)
        return false;
    char want[NAME_MAX_LEN], have[NAME_MAX_LEN];
    catalog_normalize_name(cm->m.name, want, sizeof(want));
    catalog_normalize_name(reported, have, sizeof(have));
    return want[0] && strstr(have, want);
}

/* What a reported GPU is called in a sentence: its catalogue model, else its name. */
static void label(Buf *b, const ReportedGpu *g, const GpuModel *found)
{
    if (found)
        buf_puts(b, found->name);
    else
        buf_printf(b, "'%.*s'", NAME_MAX_LEN, g->name);
}

/* The GPUs reported, with the catalogue model each name resolved to (NULL: none). */
typedef struct Reported {
    const ReportedGpu *gpus;
    const GpuModel *const *found;
    size_t n;
} Reported;

/* One kind of GPU: the same catalogue model, or the same name the catalogue lacks. */
static bool same_kind(const Reported *r, size_t i, size_t j)
{
    return r->found[i] ? r->found[j] == r->found[i]
                       : !r->found[j] && !strcmp(r->gpus[j].name, r->gpus[i].name);
}

static bool same_memory(const Reported *r, size_t i, size_t j)
{
    return r->gpus[j].memory_mib == r->gpus[i].memory_mib;
}

/* The GPUs still flagged in left, from i on, that like() puts with GPU i: moved from
 * left into pick (which holds only them after), and how many. */
static size_t take_group(const Reported *r, bool *left, bool *pick, size_t i,
                         bool (*like)(const Reported *r, size_t i, size_t j))
{
    memset(pick, 0, r->n * sizeof(*pick));
    size_t k = 0;
    for (size_t j = i; j < r->n; j++)
        if (left[j] && like(r, i, j)) {
            pick[j] = true;
            left[j] = false;
            k++;
        }
    return k;
}

/* "GPU 3" or "GPUs 0-3, 6" for the GPUs flagged in pick (indices of gpus). */
static void gpu_list(Buf *b, const ReportedGpu *gpus, const bool *pick, size_t n)
{
    int64_t *idx = malloc((n ? n : 1) * sizeof(*idx));
    size_t k = 0;
    for (size_t i = 0; idx && i < n; i++)
        if (pick[i])
            idx[k++] = gpus[i].index;
    if (!idx) {
        b->oom = true;
        return;
    }
    /* sorted by index: reports come in index order, so this is a short insertion sort */
    for (size_t i = 1; i < k; i++)
        for (size_t j = i; j > 0 && idx[j - 1] > idx[j]; j--) {
            int64_t t = idx[j];
            idx[j] = idx[j - 1];
            idx[j - 1] = t;
        }
    buf_puts(b, k == 1 ? "GPU " : "GPUs ");
    for (size_t i = 0; i < k;) {
        size_t j = i;
        while (j + 1 < k && idx[j + 1] == idx[j] + 1)
            j++;
        buf_printf(b, "%s%lld", i ? ", " : "", (long long)idx[i]);
        if (j > i)
            buf_printf(b, "%s%lld", j == i + 1 ? ", " : "-", (long long)idx[j]);
        i = j + 1;
    }
    free(idx);
}

/* "8 x H100-80GB-SXM5" or "6 x H100-80GB-SXM5 and 2 x 'NVIDIA X'", in report order;
 * left and pick are scratch of r->n flags. */
static void summary(Buf *b, const Reported *r, bool *left, bool *pick)
{
    if (!r->n) {
        buf_puts(b, "no GPUs");
        return;
    }
    for (size_t i = 0; i < r->n; i++)
        left[i] = true;
    bool first = true;
    for (size_t i = 0; i < r->n; i++) {
        if (!left[i])
            continue;
        size_t count = take_group(r, left, pick, i, same_kind);
        buf_printf(b, "%s%zu x ", first ? "" : " and ", count);
        label(b, &r->gpus[i], r->found[i]);
        first = false;
    }
}

/* Start a clause of the list of differences. */
static void clause(Buf *diff, bool *any)
{
    buf_puts(diff, *any ? "; " : ": ");
    *any = true;
}

bool nodecheck_matches(const Cluster *c, uint32_t node, const ReportedGpu *gpus, size_t n,
                       Buf *diff)
{
    const Node *nd = &c->nodes[node];
    const Pool *pool = &c->pools[nd->pool];
    const ClusterModel *cm = &c->models[nd->model];
    const GpuModel **found = calloc(n ? n : 1, sizeof(*found));
    bool *bad = calloc(n ? n : 1, sizeof(*bad));
    bool *pick = calloc(n ? n : 1, sizeof(*pick));
    bool *seen = calloc(nd->n_gpus ? nd->n_gpus : 1, sizeof(*seen));
    if (!found || !bad || !pick || !seen) {
        free(found);
        free(bad);
        free(pick);
        free(seen);
        buf_puts(diff, "out of memory comparing the node's GPUs with the cluster file");
        return false;
    }
    for (size_t i = 0; i < n; i++)
        found[i] = catalog_find(gpus[i].name);
    const Reported rep = {.gpus = gpus, .found = found, .n = n};

    Buf why = {0};
    bool any = false;
    if (n != nd->n_gpus) {
        clause(&why, &any);
        buf_printf(&why, "%zu GPU%s, not %u", n, n == 1 ? "" : "s", nd->n_gpus);
    } else {
        /* the grants name GPUs by index: each of 0..n-1 exactly once */
        for (size_t i = 0; i < n; i++) {
            int64_t x = gpus[i].index;
            if (x < (int64_t)nd->n_gpus && !seen[x]) {
                seen[x] = true;
                continue;
            }
            clause(&why, &any);
            if (x < (int64_t)nd->n_gpus)
                buf_printf(&why, "GPU index %lld twice", (long long)x);
            else
                buf_printf(&why, "GPU index %lld, where the node's GPUs are 0-%u", (long long)x,
                           nd->n_gpus - 1);
            break;
        }
    }

    /* the model, one clause per model reported in its place (a node declared without
     * GPUs has no model to compare with: the count said it) */
    for (size_t i = 0; i < n; i++)
        bad[i] = nd->n_gpus && !same_model(cm, gpus[i].name, found[i]);
    for (size_t i = 0; i < n; i++) {
        if (!bad[i])
            continue;
        size_t k = take_group(&rep, bad, pick, i, same_kind);
        clause(&why, &any);
        gpu_list(&why, gpus, pick, n);
        buf_puts(&why, k == 1 ? " is " : " are ");
        label(&why, &gpus[i], found[i]);
        buf_printf(&why, ", not %s", cm->m.name);
    }

    /* memory, for GPUs of the right model (another model's memory says nothing new) */
    uint64_t want = cm->m.memory_mib;
    for (size_t i = 0; i < n; i++)
        bad[i] = nd->n_gpus && want && gpus[i].memory_mib &&
                 same_model(cm, gpus[i].name, found[i]) &&
                 (gpus[i].memory_mib * 10 < want * 9 || gpus[i].memory_mib * 10 > want * 11);
    for (size_t i = 0; i < n; i++) {
        if (!bad[i])
            continue;
        size_t k = take_group(&rep, bad, pick, i, same_memory);
        clause(&why, &any);
        gpu_list(&why, gpus, pick, n);
        buf_printf(&why, " %s %llu MiB of memory, not about %llu", k == 1 ? "has" : "have",
                   (unsigned long long)gpus[i].memory_mib, (unsigned long long)want);
    }

    /* MIG, where the pool may be partitioned: what the agent says, else the catalogue */
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        int capable = gpus[i].mig_capable >= 0 ? gpus[i].mig_capable
                      : found[i]               ? gpu_model_has_mig(found[i])
                                               : -1;
        bad[i] = nd->mig_allowed && capable == 0;
        k += bad[i];
    }
    if (k) {
        clause(&why, &any);
        gpu_list(&why, gpus, bad, n);
        buf_printf(&why, " cannot be MIG-partitioned, and pool %s allows MIG", pool->name);
    }

    if (any) {
        buf_puts(diff, "the agent reports ");
        summary(diff, &rep, bad, pick);
        buf_puts(diff, " where the cluster file declares ");
        if (nd->n_gpus)
            buf_printf(diff, "%u x %s", nd->n_gpus, cm->m.name);
        else
            buf_puts(diff, "no GPUs");
        buf_printf(diff, " (pool %s)%s", pool->name, buf_str(&why));
    }
    diff->oom |= why.oom;
    buf_free(&why);
    free(found);
    free(bad);
    free(pick);
    free(seen);
    return !any;
}
