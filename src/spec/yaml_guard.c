/* yaml_guard.c: what YAML input may hold before libfyaml builds a document of it. Every
 * reader of outside YAML (job files and request bodies, cluster specs, mix files) goes
 * through field_yaml_open, which asks this first, because building trusts the input:
 *  - the text must be UTF-8 (the validity check is jansson's): libfyaml 0.7.12, Debian
 *    12's, loops for ever on some invalid bytes after a '%';
 *  - no control characters but tab, line feed and carriage return (YAML allows no
 *    other): libfyaml 0.7.12 crashes freeing a parser that stopped on a NUL;
 *  - no directives (lines starting with '%'): nothing here needs %YAML or %TAG;
 *  - no run of more than YAML_MAX_BLANKS spaces or tabs: libfyaml's cost of the blanks
 *    after a flow collection ('}' or ']') grows with the square of the run (20,000
 *    spaces took 3 s), and no file of ours needs that many;
 *  - no mapping of more than YAML_MAX_KEYS keys: libfyaml checks each key against every
 *    other (10,000 environment variables took 18 s);
 *  - anchors and aliases may not expand past YAML_MAX_NODES nodes (a "billion laughs"
 *    of a few hundred bytes otherwise takes gigabytes), nor nest past YAML_MAX_DEPTH;
 *  - where the caller sets a work budget (x->yaml_max_work: the server's request
 *    bodies), the stream's events plus the nodes aliases add may not pass it. libfyaml
 *    reads a few hundred thousand events a second (a megabyte of deeply nested flow
 *    lists took 1.8 s, 250,000 empty documents 0.9 s); the budget holds a body's
 *    reading to about a tenth of a second, and counting keeps the verdict the same on
 *    every machine, which a clock would not.
 * The alias count is taken on libfyaml's event stream, which does not expand anything;
 * a syntax error there is left for the real parse to report. */
#include "spec/field.h"

#include "util/macro.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <libfyaml.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define YAML_MAX_NODES   200000 /* after aliases are expanded */
#define YAML_MAX_DEPTH   64
#define YAML_MAX_ANCHORS 1024
#define YAML_MAX_BLANKS  256
#define YAML_MAX_KEYS    512

/* Names are copies: a token lives only as long as its event. */
typedef struct Anchor {
    char *name;
    size_t len;
    uint64_t nodes; /* of the node it names, its aliases expanded */
} Anchor;

typedef struct Level {
    uint64_t nodes;
    uint64_t items; /* its children so far (a mapping's keys and values) */
    bool mapping;
    char *anchor; /* the collection's anchor, or NULL */
    size_t anchor_len;
} Level;

/* A copy of a token's text (NUL-terminated), or NULL. */
static char *token_copy(struct fy_token *tok, size_t *ret_len)
{
    size_t len = 0;
    const char *t = tok ? fy_token_get_text(tok, &len) : NULL;
    char *c = t ? strndup(t, len) : NULL;
    *ret_len = c ? len : 0;
    return c;
}

static uint64_t anchor_nodes(const Anchor *a, size_t n, struct fy_token *alias)
{
    size_t len = 0;
    const char *name = alias ? fy_token_get_text(alias, &len) : NULL;
    for (size_t i = n; name && i-- > 0;) /* the latest definition wins */
        if (a[i].len == len && !memcmp(a[i].name, name, len))
            return a[i].nodes;
    return 1;
}

/* Record an anchor (taking name); false past YAML_MAX_ANCHORS. */
static bool add_anchor(Anchor *a, size_t *n, char *name, size_t len, uint64_t nodes)
{
    if (!name)
        return true;
    if (*n >= YAML_MAX_ANCHORS) {
        free(name);
        return false;
    }
    a[(*n)++] = (Anchor){name, len, nodes};
    return true;
}

/* The nodes the stream's documents hold with their aliases expanded, or a verdict. */
static int count_expanded(FieldCtx *x, const char *text, size_t len)
{
    struct fy_diag_cfg dc;
    fy_diag_cfg_default(&dc);
    dc.fp = NULL;
    dc.output_fn = NULL;
    struct fy_diag *diag = fy_diag_create(&dc);
    /* collected, not formatted: libfyaml 0.7.12 formats a report with the source line
     * it points into, and on some input (tabs, a control character, a long line) reads
     * far outside it and crashes (tests/fuzz/regressions/yaml_guard) */
    if (diag)
        fy_diag_set_collect_errors(diag, true);
    struct fy_parse_cfg cfg = {.flags = FYPCF_QUIET | FYPCF_DISABLE_MMAP_OPT, .diag = diag};
    struct fy_parser *p = diag ? fy_parser_create(&cfg) : NULL;
    Anchor *anchors = calloc(YAML_MAX_ANCHORS, sizeof(*anchors));
    Level stack[YAML_MAX_DEPTH + 1];
    size_t depth = 0, n_anchors = 0;
    uint64_t total = 0, work = 0;
    int r = 0;
    if (!diag || !p || !anchors || fy_parser_set_string(p, text, len) < 0)
        r = -ENOMEM;
    struct fy_event *ev;
    while (r == 0 && (ev = fy_parser_parse(p))) {
        uint64_t add = 0;
        switch (ev->type) {
        case FYET_SCALAR: {
            add = 1;
            size_t al;
            char *an = token_copy(ev->scalar.anchor, &al);
            if (!add_anchor(anchors, &n_anchors, an, al, 1))
                r = -E2BIG;
            break;
        }
        case FYET_ALIAS:
            add = anchor_nodes(anchors, n_anchors, ev->alias.anchor);
            break;
        case FYET_SEQUENCE_START:
        case FYET_MAPPING_START:
            if (depth >= YAML_MAX_DEPTH) {
                field_error(x, 0, "nested deeper than %d levels", YAML_MAX_DEPTH);
                r = -EINVAL;
                break;
            }
            stack[depth].nodes = 1;
            stack[depth].items = 0;
            stack[depth].mapping = ev->type == FYET_MAPPING_START;
            stack[depth].anchor =
                token_copy(ev->type == FYET_SEQUENCE_START ? ev->sequence_start.anchor
                                                           : ev->mapping_start.anchor,
                           &stack[depth].anchor_len);
            depth++;
            break;
        case FYET_SEQUENCE_END:
        case FYET_MAPPING_END:
            if (depth) {
                Level l = stack[--depth];
                add = l.nodes;
                if (!add_anchor(anchors, &n_anchors, l.anchor, l.anchor_len, l.nodes))
                    r = -E2BIG;
            }
            break;
        default:
            break;
        }
        if (add && depth && stack[depth - 1].mapping &&
            ++stack[depth - 1].items > 2 * YAML_MAX_KEYS && r == 0) {
            field_error(x, 0, "a mapping of more than %d keys", YAML_MAX_KEYS);
            r = -EINVAL;
        }
        if (add && r == 0) {
            uint64_t *into = depth ? &stack[depth - 1].nodes : &total;
            *into = *into + add < *into ? UINT64_MAX : *into + add;
            if (*into > YAML_MAX_NODES || total > YAML_MAX_NODES) {
                field_error(x, 0,
                            "its anchors and aliases expand to more than %d nodes; write the "
                            "values out",
                            YAML_MAX_NODES);
                r = -EINVAL;
            }
        }
        work += 1 + (ev->type == FYET_ALIAS ? add : 0);
        if (x->yaml_max_work && work > x->yaml_max_work && r == 0) {
            /* an alias that passes the bound is named as the expansion it is */
            if (ev->type == FYET_ALIAS)
                field_error(x, 0,
                            "its anchors and aliases expand to more than %" PRIu64
                            " nodes (the bound on a request's YAML); write the values out",
                            x->yaml_max_work);
            else
                field_error(x, 0,
                            "more than %" PRIu64 " YAML values to read (the bound on a "
                            "request's YAML); send fewer jobs at a time, or JSON",
                            x->yaml_max_work);
            r = -EINVAL;
        }
        fy_parser_event_free(p, ev);
    }
    if (r == -E2BIG) {
        field_error(x, 0, "more than %d anchors", YAML_MAX_ANCHORS);
        r = -EINVAL;
    }
    while (depth)
        free(stack[--depth].anchor);
    for (size_t i = 0; anchors && i < n_anchors; i++)
        free(anchors[i].name);
    free(anchors);
    if (p)
        fy_parser_destroy(p);
    if (diag)
        fy_diag_destroy(diag);
    return r;
}

int yaml_guard(FieldCtx *x, const char *text, size_t len)
{
    json_t *utf8 = json_stringn(text, len);
    if (!utf8) {
        field_error(x, 0, "not UTF-8 text");
        return -EINVAL;
    }
    json_decref(utf8);
    size_t line = 1, blanks = 0;
    for (size_t i = 0; i < len; i++) {
        if ((i == 0 || text[i - 1] == '\n') && text[i] == '%') {
            field_error(x, line, "a YAML directive ('%%...'): none is read here");
            return -EINVAL;
        }
        /* YAML's printable characters leave out the other C0 controls and DEL; a NUL
         * also crashes libfyaml 0.7.12 as it frees a parser it stopped on one */
        unsigned char c = (unsigned char)text[i];
        if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7f) {
            field_error(x, line, "a control character (byte 0x%02x): YAML allows none", c);
            return -EINVAL;
        }
        blanks = text[i] == ' ' || text[i] == '\t' ? blanks + 1 : 0;
        if (blanks > YAML_MAX_BLANKS) {
            field_error(x, line, "more than %d spaces or tabs in a row", YAML_MAX_BLANKS);
            return -EINVAL;
        }
        line += text[i] == '\n';
    }
    return count_expanded(x, text, len);
}
