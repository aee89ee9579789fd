/* gpusample.c: reading the GPU samples of a heartbeat (gpusample.h). */
#include "server/gpusample.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

/* A number in [lo, hi] at key, or false. */
static bool number(json_t *o, const char *key, double lo, double hi, double *ret)
{
    json_t *v = json_object_get(o, key);
    if (!json_is_number(v))
        return false;
    double d = json_number_value(v);
    if (!(d >= lo && d <= hi))
        return false;
    *ret = d;
    return true;
}

int gpusample_parse(json_t *gpus, NodeGpuSample **ret, size_t *ret_n)
{
    *ret = NULL;
    *ret_n = 0;
    if (!json_is_array(gpus) || !json_array_size(gpus))
        return 0;
    NodeGpuSample *out = calloc(json_array_size(gpus), sizeof(*out));
    if (!out)
        return -ENOMEM;
    size_t n = 0, i;
    json_t *g;
    json_array_foreach(gpus, i, g)
    {
        json_t *smp = json_object_get(g, "sample"), *idx = json_object_get(g, "index");
        if (!json_is_object(smp) || !json_is_integer(idx) || json_integer_value(idx) < 0 ||
            json_integer_value(idx) > 0xffff)
            continue;
        NodeGpuSample *o = &out[n];
        *o = (NodeGpuSample){.index = (unsigned)json_integer_value(idx)};
        const char *uuid = json_string_value(json_object_get(g, "uuid"));
        const char *name = json_string_value(json_object_get(g, "name"));
        snprintf(o->uuid, sizeof(o->uuid), "%s", uuid ? uuid : "");
        snprintf(o->name, sizeof(o->name), "%s", name ? name : "");
        double v;
        o->has_busy = number(smp, "busy_pct", 0, 100, &o->busy_pct);
        if ((o->has_memory = number(smp, "memory_used_mib", 0, 1e12, &v)))
            o->memory_used_mib = (uint64_t)v;
        o->has_power = number(smp, "power_w", 0, 1e5, &o->power_w);
        if ((o->has_temperature = number(smp, "temperature_c", -100, 300, &v)))
            o->temperature_c = (int)v;
        if (o->has_busy || o->has_memory || o->has_power || o->has_temperature)
            n++;
    }
    if (!n) {
        free(out);
        return 0;
    }
    *ret = out;
    *ret_n = n;
    return 0;
}

void gpusample_fold(Server *s, uint32_t node, json_t *gpus)
{
    NodeGpuSample *smp;
    size_t n;
    if (gpusample_parse(gpus, &smp, &n) < 0)
        return;
    NodeState *ns = &s->nodes[node];
    free(ns->samples);
    ns->samples = smp;
    ns->n_samples = n;
}
