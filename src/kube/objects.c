/* objects.c: Kubernetes Node and Pod objects read into gpuorch's terms (objects.h).
 * Everything here is a pure function of the JSON it is given. Quantities are parsed
 * exactly, as Kubernetes' resource.Quantity writes them, and rounded the safe way for
 * each side: what a node offers rounds down, what a pod asks rounds up. A pod whose
 * request cannot be read is still a pod (bad + why), so the engine can say so on it;
 * only something that is not a pod at all is an error. */
#include "kube/objects.h"

#include "core/catalog.h"
#include "core/cluster.h"
#include "util/macro.h"
#include "util/units.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define MIG_PREFIX "nvidia.com/mig-"
#define GPU_RES    "nvidia.com/gpu"

void kube_labels_defaults(KubeLabels *l)
{
    *l = (KubeLabels){
        .leaf = "gpuorch.io/leaf",
        .spine = "gpuorch.io/spine",
        .fabric = "gpuorch.io/fabric",
        .tier = "gpuorch.io/tier",
        .price = "gpuorch.io/price-per-gpu-hour",
        .interconnect = "gpuorch.io/interconnect",
    };
}

static int fail(Buf *why, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(Buf *why, int err, const char *fmt, ...)
{
    if (why) {
        va_list ap;
        va_start(ap, fmt);
        buf_vprintf(why, fmt, ap);
        va_end(ap);
    }
    return err;
}

/* A string member, or NULL when absent or not a string. */
static const char *str_of(const json_t *obj, const char *key)
{
    return json_string_value(json_object_get(obj, key));
}

/* A copy of s, NULL for NULL and for "" (an empty label says nothing). */
static int dup_opt(const char *s, char **ret)
{
    char *d = NULL;
    if (s && *s && !(d = strdup(s)))
        return -ENOMEM;
    *ret = d;
    return 0;
}

/* ---- Kubernetes quantities ---------------------------------------------------------- */

typedef enum QRound {
    Q_DOWN,  /* what a node offers: never more than it has */
    Q_UP,    /* what a pod asks: never less than it needs */
    Q_EXACT, /* counts of devices: Kubernetes allows only integers */
} QRound;

#define QUANTITY_MAX_DIGITS 18 /* significant digits kept exactly in a uint64_t */
#define QUANTITY_MAX_EXP    30 /* |decimal exponent|: 10^30 * 2^20 still fits 128 bits */
#define QUANTITY_MAX_LEN    64 /* the API server writes them far shorter */

static bool mul_u128(unsigned __int128 *v, uint64_t f)
{
    if (f && *v > ~(unsigned __int128)0 / f)
        return false;
    *v *= f;
    return true;
}

/* A Kubernetes quantity (resource.Quantity's text form): an optional "+", a decimal
 * number ("5", "1.5", ".5", "5."), then a binary suffix (Ki Mi Gi Ti Pi Ei), a decimal
 * one (m k M G T P E) or a decimal exponent ("1e3", "2E-2"; a bare "E" is exa).
 * *ret = value * mul / div, rounded as asked, exactly: 128-bit integers, no floating
 * point. A negative value is refused: no resource is negative. 0, -EINVAL (not a
 * quantity, or not whole under Q_EXACT), -ERANGE (too large or too precise). */
static int quantity_parse(const char *s, uint64_t mul, uint64_t div, QRound round, uint64_t *ret)
{
    if (!s || !div)
        return -EINVAL;
    if (strlen(s) > QUANTITY_MAX_LEN)
        return -ERANGE; /* and exp10 below cannot overflow */
    const char *p = s;
    if (*p == '+')
        p++;
    uint64_t mant = 0;
    int exp10 = 0;
    unsigned sig = 0;
    bool digits = false, frac = false;
    for (;; p++) {
        if (*p == '.' && !frac) {
            frac = true;
            continue;
        }
        if (!isdigit((unsigned char)*p))
            break;
        digits = true;
        int d = *p - '0';
        if (sig < QUANTITY_MAX_DIGITS) {
            mant = mant * 10 + (uint64_t)d;
            sig += mant != 0;
            exp10 -= frac;
        } else if (d) {
            return -ERANGE;
        } else if (!frac) {
            exp10++; /* a trailing zero of the integer part beyond the kept digits */
        }
    }
    if (!digits)
        return -EINVAL;

    unsigned bin = 0;
    if (!*p) {
        /* no suffix */
    } else if (p[1] == 'i' && !p[2]) {
        static const char bins[] = "KMGTPE";
        const char *b = strchr(bins, *p);
        if (!b)
            return -EINVAL;
        bin = 10 * (unsigned)(b - bins + 1);
    } else if (!p[1] && strchr("mkMGTPE", *p)) {
        static const char decs[] = "mkMGTPE";
        static const int exps[] = {-3, 3, 6, 9, 12, 15, 18};
        exp10 += exps[strchr(decs, *p) - decs];
    } else if (*p == 'e' || *p == 'E') {
        int64_t e;
        int r = parse_i64(p + 1, &e);
        if (r < 0)
            return r;
        if (e > QUANTITY_MAX_EXP || e < -QUANTITY_MAX_EXP)
            return -ERANGE;
        exp10 += (int)e;
    } else {
        return -EINVAL;
    }
    if (!mant) {
        *ret = 0;
        return 0;
    }
    if (exp10 > QUANTITY_MAX_EXP || exp10 < -QUANTITY_MAX_EXP)
        return -ERANGE;

    unsigned __int128 num = mant, den = div;
    if (!mul_u128(&num, mul) || (bin && num > (~(unsigned __int128)0 >> bin)))
        return -ERANGE;
    num <<= bin;
    for (; exp10 > 0; exp10--)
        if (!mul_u128(&num, 10))
            return -ERANGE;
    for (; exp10 < 0; exp10++)
        den *= 10; /* div <= 2^20 in our callers: 2^20 * 10^30 < 2^128 */
    unsigned __int128 q = num / den;
    bool rest = num % den != 0;
    if (rest && round == Q_EXACT)
        return -EINVAL;
    if (rest && round == Q_UP)
        q++;
    if (q > UINT64_MAX)
        return -ERANGE;
    *ret = (uint64_t)q;
    return 0;
}

/* The text of a quantity: the API server always writes strings, but a hand-made object
 * may hold a JSON integer. NULL when it is neither. */
static const char *quantity_text(const json_t *v, char *buf, size_t len)
{
    if (json_is_string(v))
        return json_string_value(v);
    if (json_is_integer(v)) {
        snprintf(buf, len, "%lld", (long long)json_integer_value(v));
        return buf;
    }
    return NULL;
}

static int quantity_of(const json_t *v, uint64_t mul, uint64_t div, QRound round, uint64_t *ret)
{
    char buf[32];
    return quantity_parse(quantity_text(v, buf, sizeof(buf)), mul, div, round, ret);
}

/* ---- resource names ----------------------------------------------------------------- */

typedef enum ResClass {
    RES_OTHER,
    RES_CPU,
    RES_MEMORY,
    RES_PODS,
    RES_GPU,    /* nvidia.com/gpu: whole GPUs */
    RES_SHARED, /* the MPS replicas' resource */
    RES_MIG,    /* nvidia.com/mig-<profile> */
    RES_FABRIC, /* an RDMA device: InfiniBand, RoCE, EFA */
} ResClass;

static bool starts_with(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* shared first: a device plugin that shares without renaming advertises its replicas as
 * nvidia.com/gpu itself, and then no pod asks whole GPUs of it. */
static ResClass res_class(const char *name, const char *shared)
{
    if (shared && strcmp(name, shared) == 0)
        return RES_SHARED;
    if (strcmp(name, "cpu") == 0)
        return RES_CPU;
    if (strcmp(name, "memory") == 0)
        return RES_MEMORY;
    if (strcmp(name, "pods") == 0)
        return RES_PODS;
    if (strcmp(name, GPU_RES) == 0)
        return RES_GPU;
    if (starts_with(name, MIG_PREFIX) && name[strlen(MIG_PREFIX)])
        return RES_MIG;
    if (starts_with(name, "rdma/") || starts_with(name, "vpc.amazonaws.com/efa") ||
        starts_with(name, "nvidia.com/hca"))
        return RES_FABRIC;
    return RES_OTHER;
}

/* ---- nodes -------------------------------------------------------------------------- */

void kube_node_free(KubeNode *n)
{
    if (!n)
        return;
    free(n->name);
    free(n->product);
    free(n->mig_config);
    free(n->mig_state);
    free(n->taint);
    free(n->leaf);
    free(n->spine);
    free(n->fabric);
    free(n->interconnect);
    *n = (KubeNode){.tier = TIER_OWNED, .price_micro_usd = -1};
}

static int label_u32(const json_t *labels, const char *key, uint32_t *dst, Buf *why)
{
    const char *v = str_of(labels, key);
    int64_t x;
    if (!v)
        return 0;
    if (parse_i64(v, &x) < 0 || x < 0 || x > UINT32_MAX)
        return fail(why, -EINVAL, "label %s: '%s' is not a whole number", key, v);
    *dst = (uint32_t)x;
    return 0;
}

static int add_mig(KubeNode *n, const char *profile, uint32_t count, Buf *why)
{
    for (size_t i = 0; i < n->n_mig; i++) {
        if (strcmp(n->mig[i].profile, profile) == 0) {
            n->mig[i].count += count;
            return 0;
        }
    }
    if (strlen(profile) >= sizeof(n->mig[0].profile))
        return fail(why, -EINVAL, "MIG profile '%s' is longer than gpuorch keeps", profile);
    if (n->n_mig == KUBE_MAX_MIG_RESOURCES)
        return fail(why, -EINVAL, "more than %d MIG resources", KUBE_MAX_MIG_RESOURCES);
    KubeMigResource *m = &n->mig[n->n_mig++];
    snprintf(m->profile, sizeof(m->profile), "%s", profile);
    m->count = count;
    return 0;
}

/* What the device plugin offers (status.allocatable). */
static int node_allocatable(KubeNode *n, json_t *alloc, Buf *why)
{
    const char *key;
    json_t *v;
    json_object_foreach(alloc, key, v)
    {
        ResClass c = res_class(key, NULL);
        uint64_t x;
        int r;
        switch (c) {
        case RES_CPU:
            r = quantity_of(v, 1000, 1, Q_DOWN, &x);
            break;
        case RES_MEMORY:
            r = quantity_of(v, 1, 1024 * 1024, Q_DOWN, &x);
            break;
        case RES_OTHER:
            continue;
        default:
            r = quantity_of(v, 1, 1, Q_EXACT, &x);
        }
        if (r < 0 || x > UINT32_MAX) {
            char buf[32];
            const char *text = quantity_text(v, buf, sizeof(buf));
            return fail(why, -EINVAL, "status.allocatable %s: '%s' is %s", key,
                        text ? text : "(not a string)",
                        r == 0 || r == -ERANGE            ? "more than gpuorch counts"
                        : c == RES_CPU || c == RES_MEMORY ? "not a Kubernetes quantity"
                                                          : "not a whole number of devices");
        }
        uint32_t x32 = (uint32_t)x;
        switch (c) {
        case RES_CPU:
            n->cpu_milli = x32;
            break;
        case RES_MEMORY:
            n->memory_mib = x32;
            break;
        case RES_PODS:
            n->pods = x32;
            break;
        case RES_GPU:
            n->alloc_gpu = x32;
            break;
        case RES_MIG:
            if (x32 && (r = add_mig(n, key + strlen(MIG_PREFIX), x32, why)) < 0)
                return r;
            break;
        case RES_FABRIC:
            n->rdma = x32 > UINT32_MAX - n->rdma ? UINT32_MAX : n->rdma + x32;
            break;
        default:
            break;
        }
    }
    return 0;
}

/* GFD appends "-SHARED" to the product of a shared GPU (renameByDefault off): the model
 * is still the one before it. */
static void strip_suffix(char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    if (n > k && strcmp(s + n - k, suffix) == 0)
        s[n - k] = '\0';
}

/* MIG strategy "single": GFD overloads the GPU labels with the slice: the product is
 * "<model>-MIG-<profile>", the count is of slices, the memory a slice's, and the device
 * plugin advertises the slices as nvidia.com/gpu. Turn it back into the GPUs and one MIG
 * resource. The physical GPU count comes from the catalogue (a single-strategy layout is
 * one profile repeated as often as it fits, as the all-<profile> configs are); 0 when
 * the catalogue does not know the model or the profile. */
static int node_mig_single(KubeNode *n, Buf *why)
{
    char *mark = n->product ? strstr(n->product, "-MIG-") : NULL;
    if (!mark || !mark[5])
        return 0;
    char profile[sizeof(n->mig[0].profile)];
    if (strlen(mark + 5) >= sizeof(profile))
        return fail(why, -EINVAL, "label nvidia.com/gpu.product: MIG profile '%s' is too long",
                    mark + 5);
    snprintf(profile, sizeof(profile), "%s", mark + 5);
    *mark = '\0';
    uint32_t slices = n->gpus;
    int r = add_mig(n, profile, n->alloc_gpu, why);
    if (r < 0)
        return r;
    n->alloc_gpu = 0;
    n->gpus = 0;
    n->gpu_memory_mib = 0;
    const GpuModel *m = catalog_find(n->product);
    int pi = m ? catalog_profile_index(m, profile) : -1;
    if (pi >= 0 && m->profiles[pi].max_count) {
        unsigned per = m->profiles[pi].max_count;
        n->gpus = (slices + per - 1) / per;
        n->gpu_memory_mib = m->memory_mib;
    }
    return 0;
}

static int node_gpu_labels(KubeNode *n, const json_t *labels, const json_t *status, Buf *why)
{
    int r;
    if ((r = dup_opt(str_of(labels, "nvidia.com/gpu.product"), &n->product)) < 0 ||
        (r = dup_opt(str_of(labels, "nvidia.com/mig.config"), &n->mig_config)) < 0 ||
        (r = dup_opt(str_of(labels, "nvidia.com/mig.config.state"), &n->mig_state)) < 0)
        return r;
    uint32_t count = 0, replicas = 0;
    bool counted = str_of(labels, "nvidia.com/gpu.count") != NULL;
    if ((r = label_u32(labels, "nvidia.com/gpu.count", &count, why)) < 0 ||
        (r = label_u32(labels, "nvidia.com/gpu.memory", &n->gpu_memory_mib, why)) < 0 ||
        (r = label_u32(labels, "nvidia.com/gpu.replicas", &replicas, why)) < 0)
        return r;
    const char *v = str_of(labels, "nvidia.com/mig.capable");
    n->mig_capable = v && strcasecmp(v, "true") == 0;
    v = str_of(labels, "nvidia.com/mig.strategy");
    if (v && strlen(v) < sizeof(n->mig_strategy))
        snprintf(n->mig_strategy, sizeof(n->mig_strategy), "%s", v);

    /* GFD labels every node with replicas, 1 when nothing is shared; the strategy label
     * says whether the replicas are MPS clients or time slices */
    const char *sharing = str_of(labels, "nvidia.com/gpu.sharing-strategy");
    if (replicas > 1) {
        n->time_sliced = sharing && strcmp(sharing, "time-slicing") == 0;
        n->shared_replicas = n->time_sliced ? 0 : replicas;
        if (n->product)
            strip_suffix(n->product, "-SHARED");
    }
    if (counted) {
        n->gpus = count;
    } else {
        uint64_t cap = 0;
        json_t *c = json_object_get(json_object_get(status, "capacity"), GPU_RES);
        if (c && (quantity_of(c, 1, 1, Q_EXACT, &cap) < 0 || cap > UINT32_MAX))
            return fail(why, -EINVAL, "status.capacity %s is not a whole number", GPU_RES);
        n->gpus = (uint32_t)(cap / (replicas > 1 ? replicas : 1));
    }
    return 0;
}

/* The first NoSchedule/NoExecute taint a GPU pod is not expected to tolerate: the GPU
 * Operator's nvidia.com/gpu taint is tolerated by GPU pods, and node.kubernetes.io/
 * unschedulable only mirrors the cordon, which `unschedulable` already says. */
static const char *node_taint(const json_t *spec)
{
    const json_t *taints = json_object_get(spec, "taints");
    for (size_t i = 0; i < json_array_size(taints); i++) {
        const json_t *t = json_array_get(taints, i);
        const char *key = str_of(t, "key"), *effect = str_of(t, "effect");
        if (!key || !effect || (strcmp(effect, "NoSchedule") && strcmp(effect, "NoExecute")))
            continue;
        if (strcmp(key, GPU_RES) == 0 || strcmp(key, "node.kubernetes.io/unschedulable") == 0)
            continue;
        return key;
    }
    return NULL;
}

static bool node_ready(const json_t *status)
{
    const json_t *conds = json_object_get(status, "conditions");
    for (size_t i = 0; i < json_array_size(conds); i++) {
        const json_t *c = json_array_get(conds, i);
        const char *type = str_of(c, "type"), *st = str_of(c, "status");
        if (type && strcmp(type, "Ready") == 0)
            return st && strcmp(st, "True") == 0;
    }
    return false;
}

/* The platform team's labels: topology, tier, price, interconnect. */
static int node_site_labels(KubeNode *n, const json_t *labels, const KubeLabels *l, Buf *why)
{
    int r;
    if ((r = dup_opt(str_of(labels, l->leaf), &n->leaf)) < 0 ||
        (r = dup_opt(str_of(labels, l->spine), &n->spine)) < 0 ||
        (r = dup_opt(str_of(labels, l->fabric), &n->fabric)) < 0)
        return r;
    const char *v = str_of(labels, l->tier);
    if (v) {
        int t = tier_from_name(v);
        if (t < 0)
            return fail(why, -EINVAL,
                        "label %s: '%s' is not a tier (owned, reserved, on-demand or spot)",
                        l->tier, v);
        n->tier = t;
    }
    if ((v = str_of(labels, l->price))) {
        int64_t micro;
        if (parse_fixed(v, 6, &micro) < 0)
            return fail(why, -EINVAL,
                        "label %s: '%s' is not a price in USD per GPU-hour (like 2.50)", l->price,
                        v);
        n->price_micro_usd = micro;
    }
    if ((v = str_of(labels, l->interconnect))) {
        int ic = interconnect_from_name(v);
        if (ic < 0)
            return fail(why, -EINVAL,
                        "label %s: '%s' is not an interconnect (nvswitch, nvlink-pairs or pcie)",
                        l->interconnect, v);
        if (!(n->interconnect = strdup(interconnect_name((Interconnect)ic))))
            return -ENOMEM;
    }
    return 0;
}

int kube_node_parse(const json_t *node, const KubeLabels *labels, KubeNode *ret, Buf *why)
{
    KubeLabels l;
    kube_labels_defaults(&l);
    if (labels) {
        l.leaf = labels->leaf ?: l.leaf;
        l.spine = labels->spine ?: l.spine;
        l.fabric = labels->fabric ?: l.fabric;
        l.tier = labels->tier ?: l.tier;
        l.price = labels->price ?: l.price;
        l.interconnect = labels->interconnect ?: l.interconnect;
    }
    const char *kind = str_of(node, "kind");
    if (kind && strcmp(kind, "Node") != 0)
        return fail(why, -EINVAL, "not a Node but a %s", kind);
    const json_t *meta = json_object_get(node, "metadata");
    const char *name = str_of(meta, "name");
    if (!name || !*name)
        return fail(why, -EINVAL, "not a Node: no metadata.name");

    _cleanup_(kube_node_free) KubeNode n = {.tier = TIER_OWNED, .price_micro_usd = -1};
    if (!(n.name = strdup(name)))
        return -ENOMEM;
    const json_t *node_labels = json_object_get(meta, "labels");
    const json_t *spec = json_object_get(node, "spec");
    const json_t *status = json_object_get(node, "status");
    int r;
    if ((r = node_allocatable(&n, json_object_get(status, "allocatable"), why)) < 0 ||
        (r = node_gpu_labels(&n, node_labels, status, why)) < 0 ||
        (r = node_site_labels(&n, node_labels, &l, why)) < 0)
        return r;
    if (strcmp(n.mig_strategy, "single") == 0 && (r = node_mig_single(&n, why)) < 0)
        return r;
    n.ready = node_ready(status);
    n.unschedulable = json_is_true(json_object_get(spec, "unschedulable"));
    if ((r = dup_opt(node_taint(spec), &n.taint)) < 0)
        return r;
    *ret = n;
    n = (KubeNode){0};
    return 0;
}

/* ---- pods --------------------------------------------------------------------------- */

/* What containers ask, per resource, before it is turned into a request. */
typedef struct PodRes {
    uint64_t cpu_milli, memory_bytes, gpus, shared, rdma;
    struct {
        char profile[24];
        uint64_t count;
    } mig[KUBE_MAX_MIG_RESOURCES];
    size_t n_mig;
} PodRes;

static uint64_t sat_add(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static void pod_bad(KubePod *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void pod_bad(KubePod *p, const char *fmt, ...)
{
    if (p->bad)
        return; /* the first problem is the one to fix first */
    p->bad = true;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->why, sizeof(p->why), fmt, ap);
    va_end(ap);
}

static uint64_t *res_mig_slot(PodRes *r, const char *profile)
{
    for (size_t i = 0; i < r->n_mig; i++)
        if (strcmp(r->mig[i].profile, profile) == 0)
            return &r->mig[i].count;
    if (r->n_mig == KUBE_MAX_MIG_RESOURCES || strlen(profile) >= sizeof(r->mig[0].profile))
        return NULL;
    snprintf(r->mig[r->n_mig].profile, sizeof(r->mig[0].profile), "%s", profile);
    r->mig[r->n_mig].count = 0;
    return &r->mig[r->n_mig++].count;
}

/* combine: a + b (take_max false) or max(a, b) per resource, into a */
static void res_combine(PodRes *a, const PodRes *b, bool take_max)
{
#define COMBINE(x, y) ((x) = take_max ? MAX((x), (y)) : sat_add((x), (y)))
    COMBINE(a->cpu_milli, b->cpu_milli);
    COMBINE(a->memory_bytes, b->memory_bytes);
    COMBINE(a->gpus, b->gpus);
    COMBINE(a->shared, b->shared);
    COMBINE(a->rdma, b->rdma);
    for (size_t i = 0; i < b->n_mig; i++) {
        uint64_t *slot = res_mig_slot(a, b->mig[i].profile);
        if (slot)
            COMBINE(*slot, b->mig[i].count);
    }
#undef COMBINE
}

static void res_add_one(KubePod *p, PodRes *r, const char *cname, const char *key, const json_t *v,
                        const char *shared)
{
    ResClass c = res_class(key, shared);
    uint64_t x = 0;
    int e = 0;
    switch (c) {
    case RES_CPU:
        e = quantity_of(v, 1000, 1, Q_UP, &x);
        break;
    case RES_MEMORY:
        e = quantity_of(v, 1, 1, Q_UP, &x);
        break;
    case RES_GPU:
    case RES_SHARED:
    case RES_MIG:
    case RES_FABRIC:
        e = quantity_of(v, 1, 1, Q_EXACT, &x);
        break;
    default:
        return;
    }
    if (e < 0) {
        char buf[32];
        const char *text = quantity_text(v, buf, sizeof(buf));
        pod_bad(p, "container %s: resource %s: '%s' is not %s", cname, key,
                text ? text : "(not a string)",
                c == RES_CPU || c == RES_MEMORY ? "a Kubernetes quantity"
                                                : "a whole number of devices");
        return;
    }
    switch (c) {
    case RES_CPU:
        r->cpu_milli = sat_add(r->cpu_milli, x);
        break;
    case RES_MEMORY:
        r->memory_bytes = sat_add(r->memory_bytes, x);
        break;
    case RES_GPU:
        r->gpus = sat_add(r->gpus, x);
        break;
    case RES_SHARED:
        r->shared = sat_add(r->shared, x);
        break;
    case RES_FABRIC:
        r->rdma = sat_add(r->rdma, x);
        break;
    case RES_MIG: {
        uint64_t *slot = res_mig_slot(r, key + strlen(MIG_PREFIX));
        if (!slot)
            pod_bad(p, "container %s: resource %s: too many or too long MIG resources", cname, key);
        else
            *slot = sat_add(*slot, x);
        break;
    }
    default:
        break;
    }
}

/* One container's ask: its requests, and its limits where a request is missing (the
 * API server defaults a missing request to the limit, and extended resources may only
 * be given as limits). */
static void container_res(KubePod *p, json_t *ctr, const char *shared, PodRes *ret)
{
    *ret = (PodRes){0};
    const char *cname = str_of(ctr, "name") ?: "?";
    json_t *res = json_object_get(ctr, "resources");
    json_t *req = json_object_get(res, "requests"), *lim = json_object_get(res, "limits");
    const char *key;
    json_t *v;
    json_object_foreach(req, key, v)
    {
        res_add_one(p, ret, cname, key, v, shared);
    }
    json_object_foreach(lim, key, v)
    {
        if (!json_object_get(req, key))
            res_add_one(p, ret, cname, key, v, shared);
    }
}

/* The pod's effective ask, as the scheduler computes it (k8s.io/component-helpers
 * resource.PodRequests): the larger of the sum of its containers and its heaviest init
 * step, where sidecars (init containers with restartPolicy Always) keep running beside
 * whatever starts after them; plus the runtime class's overhead. */
static void pod_res(KubePod *p, const json_t *spec, const char *shared, PodRes *ret)
{
    PodRes sum = {0}, init = {0}, sidecars = {0}, one;
    json_t *ctrs = json_object_get(spec, "containers");
    for (size_t i = 0; i < json_array_size(ctrs); i++) {
        container_res(p, json_array_get(ctrs, i), shared, &one);
        res_combine(&sum, &one, false);
    }
    json_t *inits = json_object_get(spec, "initContainers");
    for (size_t i = 0; i < json_array_size(inits); i++) {
        json_t *c = json_array_get(inits, i);
        container_res(p, c, shared, &one);
        const char *restart = str_of(c, "restartPolicy");
        if (restart && strcmp(restart, "Always") == 0) {
            res_combine(&sidecars, &one, false);
            one = sidecars;
        } else {
            res_combine(&one, &sidecars, false);
        }
        res_combine(&init, &one, true);
    }
    res_combine(&sum, &sidecars, false);
    res_combine(&sum, &init, true);
    json_t *overhead = json_object_get(spec, "overhead");
    if (overhead) {
        PodRes o = {0};
        const char *key;
        json_t *v;
        json_object_foreach(overhead, key, v)
        {
            res_add_one(p, &o, "(overhead)", key, v, shared);
        }
        res_combine(&sum, &o, false);
    }
    *ret = sum;
}

/* Name one more GPU resource the pod asks; the first two are kept for the why. */
static void note_kind(char names[2][64], size_t *n, const char *prefix, const char *s)
{
    if (*n < 2)
        snprintf(names[*n], sizeof(names[0]), "%s%s", prefix, s);
    (*n)++;
}

/* The GPU part of the request: exactly one kind of GPU resource, or none. 0, -ENOMEM. */
static int pod_gpu_request(KubePod *p, const PodRes *r, const char *shared)
{
    JobSpec *j = &p->spec;
    char names[2][64];
    size_t n = 0;
    const char *mig = NULL;
    uint64_t mig_count = 0;
    j->req = REQ_NONE;
    j->gpus = 0;
    if (r->gpus)
        note_kind(names, &n, "", GPU_RES);
    if (r->shared)
        note_kind(names, &n, "", shared);
    for (size_t i = 0; i < r->n_mig; i++) {
        if (!r->mig[i].count)
            continue;
        note_kind(names, &n, MIG_PREFIX, r->mig[i].profile);
        mig = r->mig[i].profile;
        mig_count = r->mig[i].count;
    }
    if (n > 1) {
        pod_bad(p, "it asks %s and %s at once; gpuorch gives a pod one kind of GPU resource",
                names[0], names[1]);
        return 0;
    }
    if (r->gpus > UINT16_MAX) {
        pod_bad(p, "it asks %llu %s", (unsigned long long)r->gpus, GPU_RES);
    } else if (r->gpus) {
        j->req = REQ_GPUS;
        j->gpus = (uint16_t)r->gpus;
    } else if (mig && mig_count > 1) {
        pod_bad(p, "it asks %llu %s; gpuorch gives a pod one MIG slice (a job asks one per worker)",
                (unsigned long long)mig_count, names[0]);
    } else if (mig) {
        j->req = REQ_MIG;
        if (!(j->mig = strdup(mig)))
            return -ENOMEM;
    } else if (r->shared > 1) {
        pod_bad(p, "it asks %llu %s; an MPS client gets one replica", (unsigned long long)r->shared,
                shared);
    } else if (r->shared) {
        j->req = REQ_FRACTION;
        j->fraction_milli = 0; /* gpu-fraction says, or the engine fills in 1/replicas */
    }
    return 0;
}

static void pod_host_request(KubePod *p, const PodRes *r)
{
    uint64_t mib = r->memory_bytes / (1024 * 1024) + (r->memory_bytes % (1024 * 1024) != 0);
    if (r->cpu_milli > UINT32_MAX)
        pod_bad(p, "it asks more CPU (%llu millicores) than gpuorch counts",
                (unsigned long long)r->cpu_milli);
    else if (mib > UINT32_MAX)
        pod_bad(p, "it asks more memory (%llu MiB) than gpuorch counts", (unsigned long long)mib);
    p->spec.cpu_milli = (uint32_t)MIN(r->cpu_milli, (uint64_t)UINT32_MAX);
    p->spec.memory_mib = (uint32_t)MIN(mib, (uint64_t)UINT32_MAX);
    p->rdma = (uint32_t)MIN(r->rdma, (uint64_t)UINT32_MAX);
}

#define ann_bad(p, key, fmt, ...) pod_bad((p), "annotation %s: " fmt, (key), ##__VA_ARGS__)

static void ann_duration(KubePod *p, const json_t *ann, const char *key, bool positive,
                         int64_t *dst)
{
    const char *v = str_of(ann, key);
    int64_t ms;
    if (!v)
        return;
    if (parse_duration_ms(v, &ms) < 0 || (positive && ms <= 0))
        ann_bad(p, key, "'%s' is not a %sduration like 30m, 2h or 1h30m", v,
                positive ? "positive " : "");
    else
        *dst = ms;
}

static int ann_string(KubePod *p, const json_t *ann, const char *key, char **dst)
{
    const char *v = str_of(ann, key);
    if (!v)
        return 0;
    if (!*v) {
        ann_bad(p, key, "empty");
        return 0;
    }
    char *d = strdup(v);
    if (!d)
        return -ENOMEM;
    free(*dst);
    *dst = d;
    return 0;
}

/* The annotations that size the GPU request: gpu-memory right-sizes a pod that asks no
 * GPU resource or one whole GPU; gpu-fraction gives a share to one that asks none or an
 * MPS replica. Anything else asks for two things at once. */
static void ann_gpu_size(KubePod *p, const json_t *ann, const char *shared)
{
    JobSpec *j = &p->spec;
    const char *k = KUBE_ANN_GPU_MEMORY, *v = str_of(ann, k);
    uint64_t mib;
    if (v && (parse_size_mib(v, &mib) < 0 || mib == 0 || mib > UINT32_MAX)) {
        ann_bad(p, k, "'%s' is not a GPU memory size like 20Gi", v);
    } else if (v && j->req == REQ_GPUS && j->gpus > 1) {
        ann_bad(p, k, "the pod asks %u whole GPUs; right-sizing is for one", j->gpus);
    } else if (v && j->req == REQ_MIG) {
        ann_bad(p, k, "the pod asks the MIG slice " MIG_PREFIX "%s already", j->mig);
    } else if (v && j->req == REQ_FRACTION) {
        ann_bad(p, k, "the pod asks an MPS replica (%s), whose size the node sets; use %s", shared,
                KUBE_ANN_FRACTION);
    } else if (v) {
        j->req = REQ_MEMORY;
        j->gpus = 0;
        j->gpu_memory_mib = mib;
    }

    k = KUBE_ANN_FRACTION;
    v = str_of(ann, k);
    int64_t milli;
    if (!v)
        return;
    if (parse_fixed(v, 3, &milli) < 0 || milli < 1 || milli > 1000)
        ann_bad(p, k, "'%s' is not a share of one GPU from 0.001 to 1", v);
    else if (j->req == REQ_MEMORY)
        ann_bad(p, k, "%s is given too; give one of them", KUBE_ANN_GPU_MEMORY);
    else if (j->req == REQ_GPUS)
        ann_bad(p, k, "the pod asks %u whole GPU%s (%s)", j->gpus, j->gpus == 1 ? "" : "s",
                GPU_RES);
    else if (j->req == REQ_MIG)
        ann_bad(p, k, "the pod asks the MIG slice " MIG_PREFIX "%s", j->mig);
    else {
        j->req = REQ_FRACTION;
        j->fraction_milli = (uint16_t)milli;
    }
}

/* gpuorch's annotations; *ret_kind_given: a valid kind annotation set the kind.
 * 0, -ENOMEM. */
static int pod_annotations(KubePod *p, const json_t *ann, const char *shared, bool *ret_kind_given)
{
    JobSpec *j = &p->spec;
    const char *k, *v;
    bool kind_given = false;
    int r;
    ann_gpu_size(p, ann, shared);

    if ((v = str_of(ann, k = KUBE_ANN_PREEMPTIBLE))) {
        if (strcasecmp(v, "true") == 0)
            j->preemptible = true;
        else if (strcasecmp(v, "false") == 0)
            j->preemptible = false;
        else
            ann_bad(p, k, "'%s' is not true or false", v);
    }
    ann_duration(p, ann, KUBE_ANN_CKPT_INTERVAL, false, &j->checkpoint_interval_ms);
    ann_duration(p, ann, KUBE_ANN_CKPT_COST, false, &j->checkpoint_cost_ms);
    ann_duration(p, ann, KUBE_ANN_ESTIMATE, true, &j->duration_estimate_ms);
    if ((r = ann_string(p, ann, KUBE_ANN_CLASS, &j->workload_class)) < 0 ||
        (r = ann_string(p, ann, KUBE_ANN_PROJECT, &j->project)) < 0 ||
        (r = ann_string(p, ann, KUBE_ANN_FABRIC, &j->fabric)) < 0)
        return r;
    if ((v = str_of(ann, k = KUBE_ANN_KIND))) {
        int kind = job_kind_from_name(v);
        if (kind < 0)
            ann_bad(p, k, "'%s' is not training, inference, batch or interactive", v);
        else {
            j->kind = (uint8_t)kind;
            kind_given = true;
        }
    }
    if ((v = str_of(ann, k = KUBE_ANN_PRIORITY))) {
        int prio = priority_from_name(v);
        if (prio < 0)
            ann_bad(p, k, "'%s' is not production, high, normal or low", v);
        else
            j->priority = (uint8_t)prio;
    }
    if ((v = str_of(ann, k = KUBE_ANN_SCOPE))) {
        char scope[16];
        size_t n = strlen(v);
        bool required = n > 0 && v[n - 1] == '!';
        int s = -1;
        if (n - required < sizeof(scope)) {
            snprintf(scope, sizeof(scope), "%.*s", (int)(n - required), v);
            s = scope_from_name(scope);
        }
        if (s < 0 || (required && s == SCOPE_ANY))
            ann_bad(p, k, "'%s' is not node, leaf or spine (a trailing ! makes it required)", v);
        else {
            j->scope = (uint8_t)s;
            j->scope_required = required;
        }
    }
    *ret_kind_given = kind_given;
    return 0;
}

/* "2024-05-01T12:00:00Z", "2024-05-01T12:00:00.123+02:00" (RFC 3339) in ms since the
 * epoch. */
static int parse_rfc3339_ms(const char *s, int64_t *ret_ms)
{
    int y, mo, d, h, mi, sec, used = 0;
    if (!s ||
        sscanf(s, "%4d-%2d-%2d%*1[Tt ]%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &sec, &used) != 6 ||
        used != 19)
        return -EINVAL;
    if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60)
        return -EINVAL;
    const char *p = s + used;
    int64_t ms = 0;
    if (*p == '.') {
        int64_t scale = 100;
        if (!isdigit((unsigned char)*++p))
            return -EINVAL;
        for (; isdigit((unsigned char)*p); p++, scale /= 10)
            ms += (*p - '0') * scale;
    }
    int64_t offset_s = 0;
    if (*p == 'Z' || *p == 'z') {
        p++;
    } else if (*p == '+' || *p == '-') {
        int oh, om, n = 0;
        if (sscanf(p + 1, "%2d:%2d%n", &oh, &om, &n) != 2 || n != 5 || oh > 23 || om > 59)
            return -EINVAL;
        offset_s = (*p == '-' ? -1 : 1) * (int64_t)(oh * 3600 + om * 60);
        p += 6;
    } else {
        return -EINVAL;
    }
    if (*p)
        return -EINVAL;
    struct tm tm = {.tm_year = y - 1900,
                    .tm_mon = mo - 1,
                    .tm_mday = d,
                    .tm_hour = h,
                    .tm_min = mi,
                    .tm_sec = sec};
    time_t t = timegm(&tm);
    *ret_ms = ((int64_t)t - offset_s) * 1000 + ms;
    return 0;
}

static int pod_group(KubePod *p, const json_t *meta)
{
    const char *pg = str_of(json_object_get(meta, "labels"), KUBE_LABEL_POD_GROUP);
    int r;
    if (pg && *pg) {
        r = asprintf(&p->group, "pg/%s", pg);
    } else {
        const char *job = NULL;
        const json_t *owners = json_object_get(meta, "ownerReferences");
        for (size_t i = 0; !job && i < json_array_size(owners); i++) {
            const json_t *o = json_array_get(owners, i);
            const char *kind = str_of(o, "kind"), *api = str_of(o, "apiVersion");
            if (kind && api && strcmp(kind, "Job") == 0 && strcmp(api, "batch/v1") == 0)
                job = str_of(o, "name");
        }
        r = job && *job ? asprintf(&p->group, "job/%s", job)
                        : asprintf(&p->group, "pod/%s", p->name);
    }
    if (r < 0) {
        p->group = NULL;
        return -ENOMEM;
    }
    return 0;
}

static uint8_t pod_phase(const char *s)
{
    static const char *const names[] = {"Pending", "Running", "Succeeded", "Failed", "Unknown"};
    for (size_t i = 0; s && i < ARRAY_SIZE(names); i++)
        if (strcmp(s, names[i]) == 0)
            return (uint8_t)i;
    return s ? POD_UNKNOWN : POD_PENDING;
}

static int32_t pod_exit_code(const json_t *status)
{
    const json_t *cs = json_object_get(status, "containerStatuses");
    for (size_t i = 0; i < json_array_size(cs); i++) {
        const json_t *term =
            json_object_get(json_object_get(json_array_get(cs, i), "state"), "terminated");
        const json_t *code = json_object_get(term, "exitCode");
        if (json_is_integer(code))
            return (int32_t)json_integer_value(code);
    }
    return -1;
}

void kube_pod_free(KubePod *p)
{
    if (!p)
        return;
    free(p->ns);
    free(p->name);
    free(p->uid);
    free(p->node);
    free(p->scheduler);
    free(p->group);
    free(p->priority_class);
    job_spec_free(&p->spec);
    *p = (KubePod){.exit_code = -1, .grace_s = 30};
    job_spec_init(&p->spec);
}

/* The kind, when no annotation says: a gang or a Job's pods asking whole GPUs are
 * training (preemptible work whose progress its checkpoints carry); a slice, a share or
 * a memory ask is inference: a model server, which prefers owned capacity unless it is
 * preemptible and which the consolidator may move (a replacement starts first); the
 * rest is batch. */
static uint8_t pod_default_kind(const KubePod *p)
{
    const JobSpec *j = &p->spec;
    if (j->req == REQ_GPUS && (starts_with(p->group, "pg/") || starts_with(p->group, "job/")))
        return KIND_TRAINING;
    if (j->req == REQ_MIG || j->req == REQ_MEMORY || j->req == REQ_FRACTION)
        return KIND_INFERENCE;
    return KIND_BATCH;
}

int kube_pod_parse(const json_t *pod, const char *shared_resource, KubePod *ret, Buf *why)
{
    const char *shared = shared_resource ?: "nvidia.com/gpu.shared";
    const char *kind = str_of(pod, "kind");
    if (kind && strcmp(kind, "Pod") != 0)
        return fail(why, -EINVAL, "not a Pod but a %s", kind);
    const json_t *meta = json_object_get(pod, "metadata");
    const char *ns = str_of(meta, "namespace"), *name = str_of(meta, "name");
    if (!ns || !*ns || !name || !*name)
        return fail(why, -EINVAL, "not a Pod: no metadata.namespace and metadata.name");
    const json_t *spec = json_object_get(pod, "spec");
    const json_t *status = json_object_get(pod, "status");

    _cleanup_(kube_pod_free) KubePod p = {.exit_code = -1, .grace_s = 30};
    job_spec_init(&p.spec);
    int r;
    if ((r = dup_opt(ns, &p.ns)) < 0 || (r = dup_opt(name, &p.name)) < 0 ||
        (r = dup_opt(str_of(meta, "uid"), &p.uid)) < 0 ||
        (r = dup_opt(str_of(spec, "nodeName"), &p.node)) < 0 ||
        (r = dup_opt(str_of(spec, "schedulerName"), &p.scheduler)) < 0 ||
        (r = dup_opt(str_of(spec, "priorityClassName"), &p.priority_class)) < 0 ||
        (r = pod_group(&p, meta)) < 0)
        return r;
    const char *created = str_of(meta, "creationTimestamp");
    if (created && parse_rfc3339_ms(created, &p.created_ms) < 0)
        return fail(why, -EINVAL, "pod %s/%s: metadata.creationTimestamp '%s' is not RFC 3339", ns,
                    name, created);
    const json_t *del = json_object_get(meta, "deletionTimestamp");
    p.deleting = del && !json_is_null(del);
    const json_t *grace = json_object_get(spec, "terminationGracePeriodSeconds");
    if (json_is_integer(grace) && json_integer_value(grace) >= 0)
        p.grace_s = json_integer_value(grace);
    p.phase = pod_phase(str_of(status, "phase"));
    p.exit_code = pod_exit_code(status);

    JobSpec *j = &p.spec;
    if (asprintf(&j->name, "%s/%s", ns, name) < 0) {
        j->name = NULL;
        return -ENOMEM;
    }
    if ((r = dup_opt(ns, &j->team)) < 0)
        return r;
    j->workers = 1;
    /* Kubernetes gives a pod its grace period between SIGTERM and SIGKILL: the time a
     * checkpoint on stop has */
    j->checkpoint_grace_ms = p.grace_s * 1000;
    int prio = kube_priority_from_class(p.priority_class);
    j->priority = prio >= 0 ? (uint8_t)prio : PRIO_NORMAL;

    PodRes res;
    bool kind_given;
    pod_res(&p, spec, shared, &res);
    if ((r = pod_gpu_request(&p, &res, shared)) < 0)
        return r;
    pod_host_request(&p, &res);
    if ((r = pod_annotations(&p, json_object_get(meta, "annotations"), shared, &kind_given)) < 0)
        return r;
    if (!kind_given)
        j->kind = pod_default_kind(&p);
    *ret = p;
    p = (KubePod){0};
    return 0;
}

int kube_priority_from_class(const char *name)
{
    if (!name || starts_with(name, "system-"))
        return -1;
    if (starts_with(name, "gpuorch-"))
        name += strlen("gpuorch-");
    return priority_from_name(name);
}
