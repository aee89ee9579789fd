/* field.h: the spec readers' shared half (internal to src/spec): error reports that
 * name the file, the line and the field; typed values read from a YAML node or a CSV
 * cell with one message per kind of mistake; and the YAML stream loader over libfyaml.
 *
 * A value is a FieldVal whatever it came from, so a YAML field and a CSV column say
 * the same thing when they are wrong ("must be a whole number from 0 to 16, not
 * '17'"); only the word differs: "field 'gpus'" in YAML, "column 'gpus'" in CSV. */
#pragma once

#include "util/buf.h"

#include <jansson.h>
#include <libfyaml.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FIELD_MAX_ERRORS 20 /* then one "too many errors" line and silence */
#define FIELD_MAX_DEPTH  64 /* nesting of JSON input (yaml_guard.c bounds YAML's alike) */

typedef struct FieldCtx {
    const char *file; /* the name messages start with */
    const char *word; /* "field" or "column" */
    Buf *err;
    unsigned n_errors;
    uint64_t yaml_max_work; /* YAML events plus nodes that aliases add (yaml_guard.c); 0:
                               bounded only by the guard's fixed limits */
} FieldCtx;

/* A JSON value as the readers see it (field_json.c): its line, a scalar's text as
 * written, and an object's or array's items in the text's order. */
typedef struct FieldJson {
    json_type type;
    size_t line;      /* 1-based: where the value starts */
    const char *text; /* a string's value, a number as written, "true", "false"; "" for
                         null; NULL for an object or an array */
    const char *key;  /* in an object: the key */
    size_t key_line;
    struct FieldJson *items; /* an object's values (with their keys) or an array's */
    size_t n_items;
} FieldJson;

/* One value to read: a YAML field (node set), a JSON one (json set) or a CSV cell
 * (neither). */
typedef struct FieldVal {
    const char *name;      /* field or column name, for messages */
    size_t line;           /* 1-based */
    const char *text;      /* scalar text; NULL when the value is a list or mapping */
    struct fy_node *node;  /* the YAML value, or NULL */
    const FieldJson *json; /* the JSON value, or NULL */
} FieldVal;

void field_ctx_init(FieldCtx *x, const char *file, const char *word, Buf *err);

/* "file:line: message" (line 0: "file: message"), one report per line. */
void field_error(FieldCtx *x, size_t line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* "file:line: field 'name': message" at the value's line. Returns -EINVAL. */
int field_bad(FieldCtx *x, const FieldVal *v, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* "unknown field 'key' in <where>" ("column" in CSV) with a suggestion when a known
 * name is close. */
void field_unknown(FieldCtx *x, size_t line, const char *key, const char *where,
                   const char *const *known, size_t n_known);

/* Typed readers. Each returns 0, or -EINVAL after reporting why. */
int field_str(FieldCtx *x, const FieldVal *v, char **ret); /* non-empty, copied */
int field_text(FieldCtx *x, const FieldVal *v, const char **ret);
int field_uint(FieldCtx *x, const FieldVal *v, uint64_t min, uint64_t max, uint64_t *ret);
/* A decimal with at most `digits` decimals scaled by 10^digits, in [min, max] (scaled). */
int field_fixed(FieldCtx *x, const FieldVal *v, unsigned digits, int64_t min, int64_t max,
                int64_t *ret);
int field_size(FieldCtx *x, const FieldVal *v, uint64_t min_mib, uint64_t max_mib, uint64_t *ret);
int field_duration(FieldCtx *x, const FieldVal *v, int64_t *ret);
int field_bool(FieldCtx *x, const FieldVal *v, bool *ret);
/* A name through from_name() (-1 = unknown); choices lists the valid names ("a, b or c"). */
int field_enum(FieldCtx *x, const FieldVal *v, int (*from_name)(const char *), const char *choices,
               int *ret);
/* A list of non-empty strings: a YAML sequence or a single scalar; in CSV the cell split
 * at sep (0: no splitting). Items are trimmed. */
int field_strv(FieldCtx *x, const FieldVal *v, char sep, char ***ret, size_t *ret_n);
void field_strv_free(char **v, size_t n);
/* Call fn for each item of a list value (a YAML sequence, or the single value), with the
 * item's own line. Stops at the first error fn returns. */
int field_each(FieldCtx *x, const FieldVal *v,
               int (*fn)(FieldCtx *x, const FieldVal *item, void *ud), void *ud);

/* Capacity tiers: one name or a list (in CSV, names separated by '|'), at least one, as a
 * mask of 1 << Tier. */
int field_tiers(FieldCtx *x, const FieldVal *v, uint8_t *ret);

/* YAML glue. */

/* Line (1-based) where a node starts: a scalar's token, a collection's first entry;
 * fallback when neither is known (an empty value). */
size_t field_node_line(struct fy_node *n, size_t fallback);
/* A plain null: no value, "~" or "null". Such a field counts as not given. */
bool field_node_is_null(struct fy_node *n);
/* "a list", "a mapping", "a value". */
const char *field_node_shape(struct fy_node *n);
/* The FieldVal of a mapping pair, with the key's name and the value's line. */
void field_from_pair(struct fy_node_pair *p, size_t fallback_line, FieldVal *ret);

/* The scalar value of key in a mapping, or NULL. */
const char *field_map_text(struct fy_node *map, const char *key);
/* Read a mapping's pairs into vals[i] / has[i] for the known names[i]; a null value
 * counts as absent. Unknown keys are reported through field_unknown().
 * 0 or -EINVAL. */
int field_collect(FieldCtx *x, struct fy_node *map, size_t line, const char *where,
                  const char *const *names, size_t n, FieldVal *vals, bool *has);

/* The documents of a YAML (or JSON) text, one at a time. Syntax errors are reported
 * through x with their line. */
typedef struct FieldYaml {
    struct fy_diag *diag;
    struct fy_parser *parser;
    struct fy_document *doc; /* the current one; owned */
    FieldCtx *x;
} FieldYaml;

int field_yaml_open(FieldYaml *y, FieldCtx *x, const char *text, size_t len);
/* yaml_guard.c: UTF-8, no directives, aliases that do not expand past a bound; -EINVAL
 * with the reason in x. field_yaml_open asks it before anything is parsed. */
int yaml_guard(FieldCtx *x, const char *text, size_t len);
/* Load the next document into y->doc: 1, 0 at the end, -EINVAL on a syntax error
 * (reported), -ENOMEM. */
int field_yaml_next(FieldYaml *y);
void field_yaml_close(FieldYaml *y);

/* Values of either tree (YAML or JSON). */

/* "a list", "a mapping", "a value". */
const char *field_val_shape(const FieldVal *v);
bool field_val_is_map(const FieldVal *v);
bool field_val_is_seq(const FieldVal *v);
/* A null value (YAML's plain null, JSON's null): a field given so counts as absent. */
bool field_val_is_null(const FieldVal *v);
/* The number of entries of a mapping or list (0 for a scalar). */
size_t field_val_count(const FieldVal *v);
/* The next pair of a mapping: 1 with ret set (the key's name, the value's line for a
 * scalar, the key's for a list or mapping), 0 at the end. *it starts NULL.
 * ret_named: the key is a name (a YAML key may be a list or a mapping). */
int field_val_next_pair(const FieldVal *map, void **it, FieldVal *ret, size_t *ret_key_line,
                        bool *ret_named);
/* The scalar value of key in a mapping (not null), or NULL. */
const char *field_val_map_text(const FieldVal *map, const char *key);
/* field_collect over either tree. */
int field_collect_val(FieldCtx *x, const FieldVal *map, const char *where, const char *const *names,
                      size_t n, FieldVal *vals, bool *has);

/* A parsed JSON text: the tree and what it points into. */
typedef struct FieldJsonDoc {
    json_t *json; /* jansson's tree: the strings the FieldJson texts point to */
    FieldJson root;
    char *lits; /* the number literals */
} FieldJsonDoc;

/* Parse JSON text (any value at the top) with jansson; duplicate keys, NUL in strings,
 * invalid UTF-8 and nesting deeper than FIELD_MAX_DEPTH are refused with the line.
 * 0, -EBADMSG when the text is not JSON, -EINVAL when it is but too deep (both
 * reported through x), or -ENOMEM. */
int field_json_parse(FieldCtx *x, const char *text, size_t len, FieldJsonDoc *ret);
void field_json_free(FieldJsonDoc *d);

/* For "duplicate name" checks over many entries in O(n log n). */
typedef struct FieldName {
    const char *name;
    size_t line;
} FieldName;

/* Report every name that repeats one before it: "duplicate <what> 'x' (also on line N)".
 * Sorts a (stably: by name, then line). Returns the number of duplicates. */
size_t field_report_duplicates(FieldCtx *x, FieldName *a, size_t n, const char *what);

/* Does s end with suffix, ignoring case? */
bool field_has_suffix(const char *s, const char *suffix);
