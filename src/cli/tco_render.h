/* tco_render.h: what `gpuorch tco` prints: the assumptions it used (each with where it
 * came from), the comparison as a table or one JSON object, and the cumulative costs as
 * a self-contained SVG chart with the break-even months marked. Pure: builds text in a
 * Buf, no I/O. Money is shown from the exact micro-dollar figures of core/tco.h. */
#pragma once

#include "core/tco.h"
#include "util/buf.h"

#include <stdbool.h>
#include <stddef.h>

/* One assumption: a default the command took, or a value given on the command line. */
typedef struct TcoFact {
    const char *key;   /* JSON key: "capex_usd_per_server" */
    const char *label; /* table label: "capex per server" */
    char text[48];     /* for the table, with its unit: "$384,000" */
    char json[48];     /* a JSON literal: 384000, "H100-80GB-SXM5", null */
    char source[200];  /* "catalogue hgx_h100_8gpu (all-in, fabric included)", "--capex" */
} TcoFact;

#define TCO_MAX_FACTS 32

typedef struct TcoReport {
    const TcoInput *in;
    const TcoResult *r;
    const char *gpu_model;    /* catalogue name */
    const char *usage_source; /* "--gpu-hours", "usage.csv (12 rows, 3 months)", ... */
    TcoFact facts[TCO_MAX_FACTS];
    size_t n_facts;
    /* Why an option is not priced, for those that are not ("" otherwise). */
    char unpriced_why[TCO_OPTION_COUNT][160];
    const char *chart_path; /* the SVG written, or NULL */
} TcoReport;

/* Append a fact; the text and JSON forms are printf formats. Silently ignored past
 * TCO_MAX_FACTS (the command adds a fixed set, fewer). */
TcoFact *tco_fact(TcoReport *rep, const char *key, const char *label, const char *source);
void tco_fact_text(TcoFact *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void tco_fact_json(TcoFact *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* "$1,234,567.89" (cents rounded half away from zero); with cents false "$1,234,568". */
void tco_format_usd(Buf *b, int64_t micro_usd, bool cents);
/* The exact decimal of a micro-dollar figure as a JSON number: "20089.6", "-3", "0". */
void tco_json_usd(Buf *b, int64_t micro_usd);
/* The label of an option in tables: "on-demand", "reserved 1y", "spot mix 50%". */
void tco_option_label(Buf *b, const TcoInput *in, TcoOption o);

void tco_render_table(const TcoReport *rep, Buf *out);
void tco_render_json(const TcoReport *rep, Buf *out);
void tco_render_svg(const TcoReport *rep, Buf *out);
