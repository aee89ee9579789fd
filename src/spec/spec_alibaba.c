/* spec_alibaba.c: the Alibaba GPU trace's node list (openb_node_list_*.csv: sn,
 * cpu_milli, memory_mib, gpu, model) as a cluster. Every row is a node; rows alike in
 * model, GPU count, CPU and memory share one owned pool, so the pools say what kinds of
 * machine the fleet has. Nodes keep the file's order and attach to no switch (the trace
 * has no topology). Models the catalogue lacks (G2, G3, P100) become non-MIG models of
 * unknown memory; rows without GPUs use the cpu-only model. */
#include "spec/field.h"
#include "spec/spec.h"

#include "util/csv.h"
#include "util/macro.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

enum { A_SN, A_CPU, A_MEM, A_GPU, A_MODEL, A_COUNT };
static const char *const alibaba_columns[A_COUNT] = {"sn", "cpu_milli", "memory_mib", "gpu",
                                                     "model"};

typedef struct NodeRow {
    char *sn;
    size_t line;
    uint32_t pool;
} NodeRow;

/* The pool for a (model, gpus, cpu, memory) kind of node, created on first sight. */
static int pool_for(Cluster *c, uint8_t model, uint8_t gpus, uint32_t cpu_milli,
                    uint32_t memory_mib, uint32_t *ret)
{
    for (size_t i = 0; i < c->n_pools; i++) {
        const Pool *p = &c->pools[i];
        if (p->model == model && p->gpus == gpus && p->cpu_milli == cpu_milli &&
            p->memory_mib == memory_mib) {
            *ret = (uint32_t)i;
            return 0;
        }
    }
    char name[160], cpu[32];
    if (cpu_milli % 1000 == 0)
        snprintf(cpu, sizeof(cpu), "%" PRIu32, cpu_milli / 1000);
    else
        snprintf(cpu, sizeof(cpu), "%" PRIu32 ".%03" PRIu32, cpu_milli / 1000, cpu_milli % 1000);
    snprintf(name, sizeof(name), "openb-%.64s-%ug-%sc-%" PRIu32 "m", c->models[model].m.name,
             (unsigned)gpus, cpu, memory_mib);
    Pool p = {
        .name = name,
        .tier = TIER_OWNED,
        .model = model,
        .gpus = gpus,
        .interconnect = IC_PCIE,
        .cpu_milli = cpu_milli,
        .memory_mib = memory_mib,
    };
    mig_layout_clear(&p.initial_mig);
    int pi = cluster_add_pool(c, &p);
    if (pi < 0)
        return pi;
    *ret = (uint32_t)pi;
    return 0;
}

/* One data row into a NodeRow (its pool created as needed). */
static int read_row(FieldCtx *x, Cluster *c, const CsvReader *csv, const int *col, NodeRow *ret)
{
    FieldVal v[A_COUNT];
    for (int i = 0; i < A_COUNT; i++)
        v[i] =
            (FieldVal){.name = alibaba_columns[i], .line = csv->line, .text = csv->fields[col[i]]};
    int r = 0;
    const char *sn = NULL, *model = v[A_MODEL].text;
    uint64_t cpu = 0, mem = 0, gpus = 0;
    if (field_text(x, &v[A_SN], &sn) < 0)
        r = -EINVAL;
    if (field_uint(x, &v[A_CPU], 0, UINT32_MAX, &cpu) < 0)
        r = -EINVAL;
    if (field_uint(x, &v[A_MEM], 0, UINT32_MAX, &mem) < 0)
        r = -EINVAL;
    if (field_uint(x, &v[A_GPU], 0, NODE_MAX_GPUS, &gpus) < 0)
        r = -EINVAL;
    bool no_model = !*model || strcasecmp(model, "nan") == 0;
    if (r == 0 && gpus > 0 && no_model)
        r = field_bad(x, &v[A_MODEL], "a node with %" PRIu64 " GPUs needs a model", gpus);
    if (r < 0)
        return r;
    int mi = cluster_model(c, gpus ? model : SPEC_CPU_ONLY_MODEL, 0);
    if (mi == -E2BIG)
        return field_bad(x, &v[A_MODEL], "a cluster has at most %d GPU models", CLUSTER_MAX_MODELS);
    if (mi < 0)
        return mi;
    uint32_t pool;
    r = pool_for(c, (uint8_t)mi, (uint8_t)gpus, (uint32_t)cpu, (uint32_t)mem, &pool);
    if (r < 0)
        return r;
    char *copy = strdup(sn);
    if (!copy)
        return -ENOMEM;
    *ret = (NodeRow){.sn = copy, .line = csv->line, .pool = pool};
    return 0;
}

static int read_header(FieldCtx *x, const CsvReader *csv, int *col)
{
    int r = 0;
    for (int i = 0; i < A_COUNT; i++)
        col[i] = -1;
    for (size_t f = 0; f < csv->nfields; f++) {
        int i = 0;
        while (i < A_COUNT && strcasecmp(csv->fields[f], alibaba_columns[i]) != 0)
            i++;
        if (i == A_COUNT) {
            field_error(x, csv->line,
                        "unknown column '%s' (a node list has sn, cpu_milli, memory_mib, gpu, "
                        "model)",
                        csv->fields[f]);
            r = -EINVAL;
        } else if (col[i] >= 0) {
            field_error(x, csv->line, "column '%s' appears twice", alibaba_columns[i]);
            r = -EINVAL;
        } else {
            col[i] = (int)f;
        }
    }
    for (int i = 0; i < A_COUNT; i++)
        if (col[i] < 0) {
            field_error(x, csv->line, "missing column '%s'", alibaba_columns[i]);
            r = -EINVAL;
        }
    return r;
}

static int read_nodes(FieldCtx *x, Cluster *c, const char *text, size_t len)
{
    CsvReader csv;
    csv_init(&csv, text, len);
    NodeRow *rows = NULL;
    size_t n = 0, cap = 0;
    int col[A_COUNT];
    bool header_ok = false;
    int r = csv_next(&csv);
    if (r == 0)
        field_error(x, 1,
                    "empty; a node list starts with the header sn,cpu_milli,memory_mib,"
                    "gpu,model");
    else if (r > 0)
        header_ok = read_header(x, &csv, col) == 0;
    /* rows are read only under a good header; bad rows are reported and skipped */
    while (header_ok && (r = csv_next(&csv)) > 0) {
        if (csv.nfields != (size_t)A_COUNT) {
            field_error(x, csv.line, "%zu cells; the header has %d", csv.nfields, A_COUNT);
            continue;
        }
        if (GROW(rows, cap, n + 1) < 0) {
            r = -ENOMEM;
            break;
        }
        int e = read_row(x, c, &csv, col, &rows[n]);
        if (e == -ENOMEM) {
            r = e;
            break;
        }
        if (e == 0)
            n++;
    }
    if (r == -EINVAL)
        field_error(x, csv.line, "unterminated quote, or text after a closing quote");
    if (r != -ENOMEM) {
        FieldName *names = malloc((n ? n : 1) * sizeof(*names));
        if (!names)
            r = -ENOMEM;
        for (size_t i = 0; names && i < n; i++)
            names[i] = (FieldName){.name = rows[i].sn, .line = rows[i].line};
        if (names)
            field_report_duplicates(x, names, n, "node");
        free(names);
    }
    for (size_t i = 0; r != -ENOMEM && !x->n_errors && i < n; i++) {
        int e = cluster_add_node(c, rows[i].pool, rows[i].sn, NO_SWITCH);
        if (e < 0)
            r = e;
    }
    for (size_t i = 0; i < n; i++)
        free(rows[i].sn);
    free(rows);
    csv_free(&csv);
    if (r == -ENOMEM)
        return r;
    return x->n_errors ? -EINVAL : r < 0 ? r : 0;
}

int spec_parse_alibaba_nodes(const char *text, size_t len, const char *name, Cluster **ret,
                             Buf *err)
{
    FieldCtx x;
    field_ctx_init(&x, name, "column", err);
    _cleanup_free_ char *base = spec_base_name(name ? name : "nodes");
    if (!base)
        return -ENOMEM;
    Cluster *c = cluster_new(base);
    if (!c)
        return -ENOMEM;
    int r = read_nodes(&x, c, text, len);
    if (r < 0) {
        cluster_free(c);
        return r;
    }
    *ret = c;
    return 0;
}
