/* simgpu.c: simulated GPUs (--gpus sim:MODEL:COUNT), so the whole system runs on a
 * machine without NVIDIA hardware. The facts come from the catalogue; UUIDs are
 * derived from the node name and index (and, for MIG instances, from the GPU UUID,
 * profile and start), so they stay the same across agent restarts as real ones do.
 * MIG layouts follow the core's validity rules, take a realistic time to apply
 * (GPUORCH_SIM_MIG_DELAY_MS per GPU changed, default 2 s) and are kept in
 * <state-dir>/simgpu.json so a restarted agent finds the GPUs as it left them. A GPU
 * starts with MIG off; a non-empty layout turns it on, an empty one off.
 *
 * Readings (GpuOps.sample) follow from what the agent's workers hold, as nothing runs
 * on a simulated GPU: busy is the held share, memory used the held share of the GPU's
 * memory (a MIG instance in use: all of its own), power and temperature rise linearly
 * from an idle 60 W and 35 C to 300 W and 75 C. Deterministic, so tests can expect
 * the figures.
 *
 * For tests, a simulated GPU falls sick when <state-dir>/simgpu-sick (read at every
 * health check) has a line "INDEX REASON", e.g. "1 xid 79": the reason is reported as
 * the real backend would report it (docs/agent.md, "Sick GPUs"). */
#include "agent/afile.h"
#include "agent/gpus.h"
#include "spec/render.h"
#include "util/file.h"
#include "util/macro.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SIM_MAX_GPUS         32
#define SIM_DEFAULT_DELAY_MS 2000
#define SIM_STATE_FILE       "simgpu.json"
#define SIM_SICK_FILE        "simgpu-sick"

typedef struct SimGpus {
    GpuBackend base;
    const GpuModel *model;
    unsigned count;
    char *node;
    char *state_path; /* NULL: layouts are not kept */
    char *sick_path;  /* the test hook naming sick GPUs; NULL without a state dir */
    long long delay_ms;
    AgentGpu gpus[SIM_MAX_GPUS];
    MigLayout layout[SIM_MAX_GPUS];
} SimGpus;

static uint64_t fnv1a(uint64_t h, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* splitmix64's finalizer: FNV alone leaves keys that differ in the last byte with
 * look-alike hashes */
static uint64_t mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* prefix + a UUID-shaped rendering of 128 bits hashed from key. */
static void fake_uuid(char *out, size_t cap, const char *prefix, const char *key, size_t len)
{
    uint64_t a = mix(fnv1a(0xcbf29ce484222325ull, key, len));
    uint64_t b = mix(a ^ fnv1a(0x84222325cbf29ce4ull, key, len));
    snprintf(out, cap, "%s%08x-%04x-%04x-%04x-%012llx", prefix, (unsigned)(a >> 32),
             (unsigned)(a >> 16) & 0xffff, (unsigned)a & 0xffff, (unsigned)(b >> 48),
             (unsigned long long)(b & 0xffffffffffffull));
}

/* g->mig and mig_enabled from the layout. */
static void fill_instances(const SimGpus *s, AgentGpu *g, const MigLayout *l)
{
    MigInstance inst[MIG_MAX_SLOTS];
    size_t n = mig_layout_list(l, inst);
    g->n_mig = n;
    g->mig_enabled = n > 0;
    for (size_t i = 0; i < n; i++) {
        GpuInstance *gi = &g->mig[i];
        snprintf(gi->profile, sizeof(gi->profile), "%s", s->model->profiles[inst[i].profile].name);
        gi->start = inst[i].start;
        char key[GPU_UUID_MAX + GPU_PROFILE_MAX + 16];
        int k = snprintf(key, sizeof(key), "%s/%s@%u", g->uuid, gi->profile, gi->start);
        fake_uuid(gi->uuid, sizeof(gi->uuid), "MIG-", key, (size_t)k);
    }
}

static int state_save(const SimGpus *s)
{
    if (!s->state_path)
        return 0;
    Buf b = {0};
    buf_puts(&b, "{\"model\": ");
    buf_json_str(&b, s->model->name);
    buf_printf(&b, ", \"count\": %u, \"gpus\": [", s->count);
    for (unsigned i = 0; i < s->count; i++) {
        buf_printf(&b, "%s\n  {\"index\": %u, \"layout\": ", i ? "," : "", i);
        render_json_layout(&b, s->model, &s->layout[i]);
        buf_putc(&b, '}');
    }
    buf_puts(&b, "]}\n");
    int r = b.oom ? -ENOMEM : afile_write_atomic(s->state_path, buf_str(&b), b.len);
    buf_free(&b);
    return r;
}

/* Parse [{"profile": P, "start": S}, ...] of model m. */
static int layout_from_json(const GpuModel *m, json_t *arr, MigLayout *ret, Buf *err)
{
    MigLayout l;
    mig_layout_clear(&l);
    if (!json_is_array(arr)) {
        buf_puts(err, "a layout is not a list");
        return -EINVAL;
    }
    size_t i;
    json_t *v;
    json_array_foreach(arr, i, v)
    {
        const char *prof = json_string_value(json_object_get(v, "profile"));
        json_t *st = json_object_get(v, "start");
        int p = prof ? catalog_profile_index(m, prof) : -1;
        if (p < 0 || !json_is_integer(st) || json_integer_value(st) < 0 ||
            json_integer_value(st) >= MIG_MAX_SLOTS ||
            l.profile_at[json_integer_value(st)] != MIG_NONE) {
            buf_printf(err, "instance %zu is not a %s profile at a free slot", i, m->name);
            return -EINVAL;
        }
        l.profile_at[json_integer_value(st)] = (uint8_t)p;
    }
    *ret = l;
    return 0;
}

/* Restore the layouts of an earlier run of the same simulated node. A state file of
 * another model or count is left alone: that node was reconfigured. */
static int state_load(SimGpus *s, Buf *err)
{
    char *text = NULL;
    size_t len = 0;
    int r = file_read_all(s->state_path, &text, &len);
    if (r == -ENOENT)
        return 0;
    if (r < 0) {
        buf_printf(err, "%s: %s", s->state_path, strerror(-r));
        return r;
    }
    json_error_t jerr;
    json_t *root = json_loadb(text, len, 0, &jerr);
    free(text);
    if (!root) {
        buf_printf(err, "%s: line %d: %s (delete it to start with MIG off)", s->state_path,
                   jerr.line, jerr.text);
        return -EINVAL;
    }
    const char *model = json_string_value(json_object_get(root, "model"));
    json_t *count = json_object_get(root, "count");
    json_t *gpus = json_object_get(root, "gpus");
    r = 0;
    if (model && catalog_find(model) == s->model && json_is_integer(count) &&
        json_integer_value(count) == s->count && json_is_array(gpus)) {
        size_t i;
        json_t *g;
        json_array_foreach(gpus, i, g)
        {
            json_t *idx = json_object_get(g, "index");
            MigLayout l;
            Buf why = {0};
            if (!json_is_integer(idx) || json_integer_value(idx) < 0 ||
                json_integer_value(idx) >= s->count ||
                layout_from_json(s->model, json_object_get(g, "layout"), &l, &why) < 0 ||
                (!mig_layout_empty(&l) && !mig_layout_valid(s->model, &l))) {
                buf_printf(err, "%s: GPU entry %zu: %s (delete the file to start with MIG off)",
                           s->state_path, i, why.len ? buf_str(&why) : "not a valid layout");
                buf_free(&why);
                r = -EINVAL;
                break;
            }
            unsigned k = (unsigned)json_integer_value(idx);
            s->layout[k] = l;
            fill_instances(s, &s->gpus[k], &l);
        }
    }
    json_decref(root);
    return r;
}

static void sleep_ms(long long ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
    }
}

static int sim_discover(GpuBackend *b, AgentGpu **ret, size_t *ret_n, Buf *err)
{
    SimGpus *s = (SimGpus *)b;
    AgentGpu *out = calloc(s->count, sizeof(*out));
    if (!out) {
        buf_puts(err, "out of memory");
        return -ENOMEM;
    }
    memcpy(out, s->gpus, s->count * sizeof(*out));
    *ret = out;
    *ret_n = s->count;
    return 0;
}

static int sim_mig_apply(GpuBackend *b, unsigned index, const MigLayout *target, uint8_t busy,
                         Buf *err)
{
    SimGpus *s = (SimGpus *)b;
    if (index >= s->count) {
        buf_printf(err, "no GPU %u: the node has %u", index, s->count);
        return -ENODEV;
    }
    AgentGpu *g = &s->gpus[index];
    bool off = mig_layout_empty(target);
    if (!off && !g->mig_capable) {
        buf_printf(err, "GPU %u (%s) has no MIG", index, s->model->name);
        return -EINVAL;
    }
    if (!off && !mig_layout_valid(s->model, target)) {
        buf_printf(err, "GPU %u: '", index);
        render_text_layout(err, s->model, target);
        buf_printf(err, "' is not a valid MIG layout of %s", s->model->name);
        return -EINVAL;
    }
    const MigLayout *cur = &s->layout[index];
    uint8_t destroy = 0;
    bool create = false;
    for (int i = 0; i < MIG_MAX_SLOTS; i++) {
        if (cur->profile_at[i] != MIG_NONE && cur->profile_at[i] != target->profile_at[i])
            destroy |= (uint8_t)(1u << i);
        if (target->profile_at[i] != MIG_NONE && cur->profile_at[i] != target->profile_at[i])
            create = true;
    }
    if (destroy & busy) {
        for (int i = 0; i < MIG_MAX_SLOTS; i++)
            if (destroy & busy & (1u << i)) {
                buf_printf(err, "GPU %u: the %s instance at slot %d is in use", index,
                           s->model->profiles[cur->profile_at[i]].name, i);
                break;
            }
        return -EBUSY;
    }
    if (!destroy && !create)
        return 0;
    sleep_ms(s->delay_ms);
    MigLayout before = *cur;
    s->layout[index] = *target;
    int r = state_save(s);
    if (r < 0) {
        s->layout[index] = before;
        buf_printf(err, "%s: %s", s->state_path, strerror(-r));
        return r;
    }
    fill_instances(s, g, target);
    return 0;
}

static int sim_mig_list(GpuBackend *b, unsigned index, bool *ret_enabled,
                        GpuInstance ret[MIG_MAX_SLOTS], size_t *ret_n, Buf *err)
{
    SimGpus *s = (SimGpus *)b;
    if (index >= s->count) {
        buf_printf(err, "no GPU %u: the node has %u", index, s->count);
        return -ENODEV;
    }
    const AgentGpu *g = &s->gpus[index];
    memcpy(ret, g->mig, g->n_mig * sizeof(*ret));
    *ret_n = g->n_mig;
    *ret_enabled = g->mig_enabled;
    return 0;
}

/* The test hook's sick GPUs: an absent file names none. */
static int sim_health(GpuBackend *b, GpuHealth *ret, size_t n, Buf *err)
{
    (void)err;
    SimGpus *s = (SimGpus *)b;
    for (size_t i = 0; i < n; i++)
        ret[i] = (GpuHealth){{0}};
    FILE *f = s->sick_path ? fopen(s->sick_path, "re") : NULL;
    if (!f)
        return 0;
    char line[128];
    while (fgets(line, sizeof(line), f)) {
        char *end;
        unsigned long idx = strtoul(line, &end, 10);
        if (end == line || *end != ' ' || idx >= n)
            continue;
        end += strspn(end, " ");
        end[strcspn(end, "\r\n")] = '\0';
        if (*end)
            snprintf(ret[idx].why, sizeof(ret[idx].why), "%s", end);
    }
    fclose(f);
    return 0;
}

static void sim_close(GpuBackend *b)
{
    SimGpus *s = (SimGpus *)b;
    free(s->node);
    free(s->state_path);
    free(s->sick_path);
    free(s);
}

#define SIM_IDLE_W 60.0
#define SIM_FULL_W 300.0
#define SIM_IDLE_C 35
#define SIM_FULL_C 75

static int sim_sample(GpuBackend *b, const AgentGpu *g, const GpuLoad *load, GpuSample *ret,
                      Buf *err)
{
    SimGpus *s = (SimGpus *)b;
    if (g->index >= s->count) {
        buf_printf(err, "no GPU %u: the node simulates %u", g->index, s->count);
        return -ENODEV;
    }
    double share = load ? load->share : 0;
    share = share < 0 ? 0 : share > 1 ? 1 : share;
    GpuSample out = {
        .has_busy = true, .has_memory = true, .has_power = true, .has_temperature = true};
    out.busy_pct = (uint8_t)(share * 100 + 0.5);
    out.memory_used_mib = (uint64_t)(share * (double)g->memory_mib);
    out.power_w = SIM_IDLE_W + share * (SIM_FULL_W - SIM_IDLE_W);
    out.temperature_c = SIM_IDLE_C + (int)(share * (SIM_FULL_C - SIM_IDLE_C) + 0.5);
    /* per instance memory only: NVML gives no utilisation per MIG device either */
    for (size_t i = 0; i < g->n_mig && out.n_mig < MIG_MAX_SLOTS; i++) {
        int p = catalog_profile_index(s->model, g->mig[i].profile);
        bool used = load && (load->mig_busy >> g->mig[i].start) & 1;
        out.mig[out.n_mig++] = (GpuInstanceSample){
            .start = g->mig[i].start,
            .has_memory = true,
            .memory_used_mib = used && p >= 0 ? s->model->profiles[p].memory_mib : 0,
        };
    }
    *ret = out;
    return 0;
}

static const GpuOps sim_ops = {
    .name = "sim",
    .discover = sim_discover,
    .mig_apply = sim_mig_apply,
    .mig_list = sim_mig_list,
    .processes = NULL,
    .sample = sim_sample,
    .health = sim_health,
    .close = sim_close,
};

static int parse_delay(long long *ret, Buf *err)
{
    const char *v = getenv("GPUORCH_SIM_MIG_DELAY_MS");
    if (!v || !*v) {
        *ret = SIM_DEFAULT_DELAY_MS;
        return 0;
    }
    char *end;
    errno = 0;
    long long ms = strtoll(v, &end, 10);
    if (errno || *end || ms < 0 || ms > 600000) {
        buf_printf(err, "GPUORCH_SIM_MIG_DELAY_MS='%s' is not a number of milliseconds (0-600000)",
                   v);
        return -EINVAL;
    }
    *ret = ms;
    return 0;
}

int simgpu_open(const char *model_count, const char *node, const char *state_dir, GpuBackend **ret,
                Buf *err)
{
    const char *colon = strrchr(model_count, ':');
    if (!colon || colon == model_count) {
        buf_printf(err, "--gpus sim:%s: expected sim:MODEL:COUNT (sim:A100-80GB:8)", model_count);
        return -EINVAL;
    }
    char model_name[64];
    size_t mlen = (size_t)(colon - model_count);
    if (mlen >= sizeof(model_name))
        mlen = sizeof(model_name) - 1;
    memcpy(model_name, model_count, mlen);
    model_name[mlen] = '\0';
    const GpuModel *m = catalog_find(model_name);
    if (!m) {
        buf_printf(err, "--gpus sim:%s: unknown GPU model '%s'; models:", model_count, model_name);
        for (size_t i = 0; i < catalog_count(); i++)
            buf_printf(err, "%s %s", i ? "," : "", catalog_model(i)->name);
        return -EINVAL;
    }
    char *end;
    errno = 0;
    long count = strtol(colon + 1, &end, 10);
    if (errno || end == colon + 1 || *end || count < 1 || count > SIM_MAX_GPUS) {
        buf_printf(err, "--gpus sim:%s: the GPU count must be a whole number from 1 to %d",
                   model_count, SIM_MAX_GPUS);
        return -EINVAL;
    }
    long long delay;
    int r = parse_delay(&delay, err);
    if (r < 0)
        return r;

    SimGpus *s = calloc(1, sizeof(*s));
    if (!s) {
        buf_puts(err, "out of memory");
        return -ENOMEM;
    }
    s->base.ops = &sim_ops;
    s->model = m;
    s->count = (unsigned)count;
    s->delay_ms = delay;
    s->node = strdup(node ? node : "");
    if (state_dir) {
        size_t n = strlen(state_dir) + sizeof(SIM_STATE_FILE) + 2;
        s->state_path = malloc(n);
        if (s->state_path)
            snprintf(s->state_path, n, "%s/%s", state_dir, SIM_STATE_FILE);
        n = strlen(state_dir) + sizeof(SIM_SICK_FILE) + 2;
        s->sick_path = malloc(n);
        if (s->sick_path)
            snprintf(s->sick_path, n, "%s/%s", state_dir, SIM_SICK_FILE);
    }
    if (!s->node || (state_dir && (!s->state_path || !s->sick_path))) {
        sim_close(&s->base);
        buf_puts(err, "out of memory");
        return -ENOMEM;
    }
    for (unsigned i = 0; i < s->count; i++) {
        AgentGpu *g = &s->gpus[i];
        g->index = i;
        char key[256];
        int k = snprintf(key, sizeof(key), "%s/%u", s->node, i);
        fake_uuid(g->uuid, sizeof(g->uuid), "GPU-", key, (size_t)MIN((size_t)k, sizeof(key) - 1));
        snprintf(g->name, sizeof(g->name), "NVIDIA %s", m->name);
        g->memory_mib = m->memory_mib;
        g->model = m;
        g->mig_capable = gpu_model_has_mig(m);
        if (m->nvlink_generation)
            for (unsigned j = 0; j < s->count; j++)
                if (j != i)
                    g->peers[g->n_peers++] = j;
        mig_layout_clear(&s->layout[i]);
    }
    if (s->state_path && (r = state_load(s, err)) < 0) {
        sim_close(&s->base);
        return r;
    }
    *ret = &s->base;
    return 0;
}
