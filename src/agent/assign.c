/* assign.c: reading a worker assignment from the server's JSON. Every field is checked
 * and a bad one named, so a broken assignment becomes a worker reported as failed
 * with a reason rather than a process started with nonsense. */
#include "agent/assign.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const struct {
    const char *name;
    int sig;
} signals[] = {
    {"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT},   {"KILL", SIGKILL},
    {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"TERM", SIGTERM},   {"CONT", SIGCONT},
    {"STOP", SIGSTOP}, {"ALRM", SIGALRM}, {"WINCH", SIGWINCH},
};

int assign_signal_from_name(const char *name)
{
    if (!name || !*name)
        return -1;
    char *end;
    long v = strtol(name, &end, 10);
    if (end != name && !*end)
        return v > 0 && v < NSIG ? (int)v : -1;
    if (!strncasecmp(name, "SIG", 3))
        name += 3;
    for (size_t i = 0; i < sizeof(signals) / sizeof(signals[0]); i++)
        if (!strcasecmp(name, signals[i].name))
            return signals[i].sig;
    return -1;
}

const char *assign_signal_name(int sig)
{
    for (size_t i = 0; i < sizeof(signals) / sizeof(signals[0]); i++)
        if (signals[i].sig == sig)
            return signals[i].name;
    return "?";
}

static int get_int(json_t *o, const char *key, bool required, int64_t lo, int64_t hi, int64_t dflt,
                   int64_t *ret, Buf *err)
{
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) {
        if (required) {
            buf_printf(err, "'%s' is missing", key);
            return -EINVAL;
        }
        *ret = dflt;
        return 0;
    }
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi) {
        buf_printf(err, "'%s' must be a whole number from %lld to %lld", key, (long long)lo,
                   (long long)hi);
        return -EINVAL;
    }
    *ret = json_integer_value(v);
    return 0;
}

int assign_key(json_t *o, int64_t *ret_job, int64_t *ret_run, uint32_t *ret_rank)
{
    int64_t job, run, rank;
    Buf err = {0};
    int r = 0;
    if (!json_is_object(o) || get_int(o, "job", true, 1, INT64_MAX, 0, &job, &err) < 0 ||
        get_int(o, "run", true, 1, INT32_MAX, 0, &run, &err) < 0 ||
        get_int(o, "rank", true, 0, UINT16_MAX, 0, &rank, &err) < 0)
        r = -EINVAL;
    buf_free(&err);
    if (r)
        return r;
    *ret_job = job;
    *ret_run = run;
    *ret_rank = (uint32_t)rank;
    return 0;
}

static int parse_gpus(json_t *arr, Assignment *a, Buf *err)
{
    if (!json_is_array(arr)) {
        buf_puts(err, "'gpus' must be a list");
        return -EINVAL;
    }
    size_t n = json_array_size(arr);
    a->gpus = calloc(n ? n : 1, sizeof(*a->gpus));
    if (!a->gpus)
        return -ENOMEM;
    size_t i;
    json_t *g;
    json_array_foreach(arr, i, g)
    {
        WorkerGpu *w = &a->gpus[i];
        json_t *idx = json_object_get(g, "index");
        if (!json_is_integer(idx) || json_integer_value(idx) < 0 ||
            json_integer_value(idx) > 1024) {
            buf_printf(err, "gpus[%zu]: 'index' must be a GPU index", i);
            return -EINVAL;
        }
        w->index = (unsigned)json_integer_value(idx);
        json_t *mig = json_object_get(g, "mig");
        json_t *frac = json_object_get(g, "fraction");
        if (mig && !json_is_null(mig)) {
            const char *prof = json_string_value(json_object_get(mig, "profile"));
            json_t *st = json_object_get(mig, "start");
            if (!prof || strlen(prof) >= sizeof(w->profile) || !json_is_integer(st) ||
                json_integer_value(st) < 0 || json_integer_value(st) >= MIG_MAX_SLOTS) {
                buf_printf(err, "gpus[%zu]: 'mig' must be {\"profile\": P, \"start\": 0-%d}", i,
                           MIG_MAX_SLOTS - 1);
                return -EINVAL;
            }
            w->kind = WGPU_MIG;
            strcpy(w->profile, prof);
            w->start = (uint8_t)json_integer_value(st);
        } else if (frac && !json_is_null(frac)) {
            double f = json_number_value(frac);
            if (!json_is_number(frac) || !(f > 0) || !(f < 1)) {
                buf_printf(err, "gpus[%zu]: 'fraction' must be a number between 0 and 1", i);
                return -EINVAL;
            }
            w->kind = WGPU_SHARE;
            w->fraction = f;
        } else {
            w->kind = WGPU_WHOLE;
        }
        a->n_gpus++;
    }
    return 0;
}

static int parse_command(json_t *arr, Assignment *a, Buf *err)
{
    size_t n = json_array_size(arr);
    if (!json_is_array(arr) || n == 0) {
        buf_puts(err, "'command' must be a non-empty list of strings");
        return -EINVAL;
    }
    a->argv = calloc(n + 1, sizeof(*a->argv));
    if (!a->argv)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        const char *s = json_string_value(json_array_get(arr, i));
        if (!s || (i == 0 && !*s)) {
            buf_printf(err, "'command'[%zu] must be a%s string", i, i ? "" : " non-empty");
            return -EINVAL;
        }
        if (!(a->argv[i] = strdup(s)))
            return -ENOMEM;
    }
    return 0;
}

static int parse_env(json_t *obj, Assignment *a, Buf *err)
{
    if (obj && !json_is_null(obj) && !json_is_object(obj)) {
        buf_puts(err, "'env' must be an object of strings");
        return -EINVAL;
    }
    size_t n = obj ? json_object_size(obj) : 0;
    a->env = calloc(n + 1, sizeof(*a->env));
    if (!a->env)
        return -ENOMEM;
    size_t i = 0;
    const char *k;
    json_t *v;
    json_object_foreach(obj, k, v)
    {
        const char *s = json_string_value(v);
        if (!*k || strchr(k, '=') || !s) {
            buf_printf(err, "env '%s': names may not be empty or hold '=', values are strings", k);
            return -EINVAL;
        }
        size_t len = strlen(k) + strlen(s) + 2;
        if (!(a->env[i] = malloc(len)))
            return -ENOMEM;
        strcpy(a->env[i], k);
        strcat(a->env[i], "=");
        strcat(a->env[i], s);
        i++;
    }
    return 0;
}

/* "user": {"uid", "gid", "groups"}; absent or null: none given. */
static int parse_user(json_t *u, Assignment *a, Buf *err)
{
    if (!u || json_is_null(u))
        return 0;
    int64_t uid, gid;
    json_t *groups = json_object_get(u, "groups");
    if (!json_is_object(u) || get_int(u, "uid", true, 0, ASSIGN_MAX_ID, 0, &uid, err) < 0 ||
        get_int(u, "gid", true, 0, ASSIGN_MAX_ID, 0, &gid, err) < 0 ||
        (groups && !json_is_null(groups) && !json_is_array(groups)) ||
        json_array_size(groups) > ASSIGN_MAX_GROUPS) {
        buf_reset(err);
        buf_printf(err,
                   "'user' must be {\"uid\": N, \"gid\": N, \"groups\": [N, ...]} with ids from 0 "
                   "to %lld and at most %d groups",
                   (long long)ASSIGN_MAX_ID, ASSIGN_MAX_GROUPS);
        return -EINVAL;
    }
    size_t i;
    json_t *g;
    json_array_foreach(groups, i, g)
    {
        if (!json_is_integer(g) || json_integer_value(g) < 0 ||
            json_integer_value(g) > ASSIGN_MAX_ID) {
            buf_printf(err, "'user': groups[%zu] must be a group id from 0 to %lld", i,
                       (long long)ASSIGN_MAX_ID);
            return -EINVAL;
        }
        a->groups[i] = (uint32_t)json_integer_value(g);
    }
    a->n_groups = json_array_size(groups);
    a->uid = (uint32_t)uid;
    a->gid = (uint32_t)gid;
    a->has_user = true;
    return 0;
}

static int parse_fields(json_t *o, Assignment *a, Buf *err)
{
    int64_t v;
    int r;
    if ((r = assign_key(o, &a->job, &a->run, &a->rank)) < 0) {
        buf_puts(err, "'job', 'run' and 'rank' must be whole numbers (job, run >= 1)");
        return r;
    }
    if ((r = get_int(o, "world_size", false, 1, UINT16_MAX, 1, &v, err)) < 0)
        return r;
    a->world_size = (uint32_t)v;
    if (a->rank >= a->world_size) {
        buf_printf(err, "'rank' %u is not below 'world_size' %u", a->rank, a->world_size);
        return -EINVAL;
    }
    if ((r = get_int(o, "local_rank", false, 0, UINT16_MAX, a->rank, &v, err)) < 0)
        return r;
    a->local_rank = (uint32_t)v;
    if ((r = get_int(o, "master_port", false, 0, 65535, 29500, &v, err)) < 0)
        return r;
    a->master_port = (uint32_t)v;
    json_t *ma = json_object_get(o, "master_addr");
    if (ma && !json_is_null(ma) && !json_is_string(ma)) {
        buf_puts(err, "'master_addr' must be a string");
        return -EINVAL;
    }
    if (!(a->master_addr = strdup(ma && json_is_string(ma) ? json_string_value(ma) : "127.0.0.1")))
        return -ENOMEM;
    json_t *gpus = json_object_get(o, "gpus");
    if (gpus && !json_is_null(gpus) && (r = parse_gpus(gpus, a, err)) < 0)
        return r;
    if ((r = parse_command(json_object_get(o, "command"), a, err)) < 0)
        return r;
    if ((r = parse_env(json_object_get(o, "env"), a, err)) < 0)
        return r;
    json_t *rf = json_object_get(o, "resume_from");
    if (rf && !json_is_null(rf)) {
        if (!json_is_string(rf)) {
            buf_puts(err, "'resume_from' must be a string");
            return -EINVAL;
        }
        if (*json_string_value(rf) && !(a->resume_from = strdup(json_string_value(rf))))
            return -ENOMEM;
    }
    if ((r = get_int(o, "checkpoint_interval_ms", false, 0, INT64_MAX / 4, 0,
                     &a->checkpoint_interval_ms, err)) < 0)
        return r;
    if ((r = get_int(o, "grace_ms", false, 0, INT64_MAX / 4, ASSIGN_DEFAULT_GRACE_MS, &a->grace_ms,
                     err)) < 0)
        return r;
    json_t *ck = json_object_get(o, "checkpoints");
    if (ck && !json_is_null(ck) && !json_is_boolean(ck)) {
        buf_puts(err, "'checkpoints' must be true or false");
        return -EINVAL;
    }
    a->checkpoints = json_is_true(ck);
    json_t *sig = json_object_get(o, "checkpoint_signal");
    a->checkpoint_signal = SIGUSR1;
    if (sig && !json_is_null(sig)) {
        a->checkpoint_signal = json_is_integer(sig)
                                   ? (int)json_integer_value(sig)
                                   : assign_signal_from_name(json_string_value(sig));
        if (a->checkpoint_signal <= 0 || a->checkpoint_signal >= NSIG ||
            a->checkpoint_signal == SIGKILL || a->checkpoint_signal == SIGSTOP) {
            buf_puts(err, "'checkpoint_signal' must name a catchable signal (\"USR1\")");
            return -EINVAL;
        }
    }
    if ((r = parse_user(json_object_get(o, "user"), a, err)) < 0)
        return r;
    json_t *fab = json_object_get(o, "fabric");
    if (fab && !json_is_null(fab)) {
        if (!json_is_string(fab)) {
            buf_puts(err, "'fabric' must be a string");
            return -EINVAL;
        }
        if (*json_string_value(fab) && !(a->fabric = strdup(json_string_value(fab))))
            return -ENOMEM;
    }
    json_t *mn = json_object_get(o, "multi_node");
    if (mn && !json_is_null(mn) && !json_is_boolean(mn)) {
        buf_puts(err, "'multi_node' must be true or false");
        return -EINVAL;
    }
    a->multi_node = json_is_true(mn);
    if ((r = get_int(o, "cpu_milli", false, 0, UINT32_MAX, 0, &v, err)) < 0)
        return r;
    a->cpu_milli = (uint32_t)v;
    if ((r = get_int(o, "memory_mib", false, 0, UINT32_MAX, 0, &v, err)) < 0)
        return r;
    a->memory_mib = (uint32_t)v;
    json_t *stop = json_object_get(o, "stop");
    const char *st = json_string_value(stop);
    if (!stop || json_is_null(stop))
        a->stop = WSTOP_NONE;
    else if (st && !strcmp(st, "preempt"))
        a->stop = WSTOP_PREEMPT;
    else if (st && !strcmp(st, "cancel"))
        a->stop = WSTOP_CANCEL;
    else {
        buf_puts(err, "'stop' must be null, \"preempt\" or \"cancel\"");
        return -EINVAL;
    }
    return 0;
}

int assign_parse(json_t *o, Assignment *ret, Buf *err)
{
    Assignment a = {0};
    if (!json_is_object(o)) {
        buf_puts(err, "a worker must be an object");
        return -EINVAL;
    }
    int r = parse_fields(o, &a, err);
    if (r < 0) {
        if (r == -ENOMEM)
            buf_puts(err, "out of memory");
        assign_free(&a);
        return r;
    }
    *ret = a;
    return 0;
}

void assign_free(Assignment *a)
{
    if (!a)
        return;
    free(a->master_addr);
    free(a->gpus);
    for (char **p = a->argv; p && *p; p++)
        free(*p);
    free(a->argv);
    for (char **p = a->env; p && *p; p++)
        free(*p);
    free(a->env);
    free(a->resume_from);
    free(a->fabric);
    *a = (Assignment){0};
}
