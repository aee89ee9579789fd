/* field.c: typed values with precise messages, for the YAML and the CSV readers, and the
 * libfyaml stream loader. Every message names the file and a 1-based line; the first
 * FIELD_MAX_ERRORS are kept, so one pass over a bad file shows most of what is wrong. */
#include "spec/field.h"

#include "core/cluster.h"
#include "util/macro.h"
#include "util/units.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

void field_ctx_init(FieldCtx *x, const char *file, const char *word, Buf *err)
{
    *x = (FieldCtx){.file = file ? file : "<input>", .word = word, .err = err};
}

__attribute__((format(printf, 3, 0))) static void error_v(FieldCtx *x, size_t line, const char *fmt,
                                                          va_list ap)
{
    x->n_errors++;
    if (x->n_errors > FIELD_MAX_ERRORS + 1)
        return;
    if (x->err->len)
        buf_putc(x->err, '\n');
    if (x->n_errors == FIELD_MAX_ERRORS + 1) {
        buf_printf(x->err, "%s: too many errors; stopped reporting", x->file);
        return;
    }
    if (line)
        buf_printf(x->err, "%s:%zu: ", x->file, line);
    else
        buf_printf(x->err, "%s: ", x->file);
    buf_vprintf(x->err, fmt, ap);
}

void field_error(FieldCtx *x, size_t line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    error_v(x, line, fmt, ap);
    va_end(ap);
}

int field_bad(FieldCtx *x, const FieldVal *v, const char *fmt, ...)
{
    Buf msg = {0};
    va_list ap;
    va_start(ap, fmt);
    buf_vprintf(&msg, fmt, ap);
    va_end(ap);
    field_error(x, v->line, "%s '%s': %s", x->word, v->name, buf_str(&msg));
    buf_free(&msg);
    return -EINVAL;
}

/* Levenshtein distance, capped: names are short. */
static size_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 40 || lb > 40)
        return SIZE_MAX;
    size_t row[41];
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t cost =
                tolower((unsigned char)a[i - 1]) == tolower((unsigned char)b[j - 1]) ? 0 : 1;
            row[j] = MIN(MIN(row[j] + 1, row[j - 1] + 1), diag + cost);
            diag = up;
        }
    }
    return row[lb];
}

void field_unknown(FieldCtx *x, size_t line, const char *key, const char *where,
                   const char *const *known, size_t n_known)
{
    const char *best = NULL;
    size_t best_d = 3; /* suggest only close names */
    /* past the errors shown, no suggestion is worked out: a body of thousands of
     * unknown keys costs no more than reading them */
    for (size_t i = 0; x->n_errors < FIELD_MAX_ERRORS && i < n_known; i++) {
        size_t d = edit_distance(key, known[i]);
        if (d < best_d) {
            best_d = d;
            best = known[i];
        }
    }
    if (best)
        field_error(x, line, "unknown %s '%s' in %s (did you mean '%s'?)", x->word, key, where,
                    best);
    else
        field_error(x, line, "unknown %s '%s' in %s", x->word, key, where);
}

/* ", not '17'" or ", not a list": what was given, for the end of a message. */
static void describe_given(const FieldVal *v, char *out, size_t outlen)
{
    if (!v->text) {
        snprintf(out, outlen, ", not %s", field_val_shape(v));
        return;
    }
    size_t n = strlen(v->text);
    if (n > 40)
        snprintf(out, outlen, ", not '%.37s...'", v->text);
    else
        snprintf(out, outlen, ", not '%s'", v->text);
    for (char *p = out; *p; p++)
        if ((unsigned char)*p < 0x20)
            *p = '?';
}

static int bad_value(FieldCtx *x, const FieldVal *v, const char *expect)
{
    char given[64];
    describe_given(v, given, sizeof(given));
    return field_bad(x, v, "%s%s", expect, given);
}

static bool all_blank_n(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isspace((unsigned char)s[i]))
            return false;
    return true;
}

int field_text(FieldCtx *x, const FieldVal *v, const char **ret)
{
    if (!v->text)
        return bad_value(x, v, "must be a single value");
    if (all_blank_n(v->text, strlen(v->text)))
        return field_bad(x, v, "must not be empty");
    *ret = v->text;
    return 0;
}

int field_str(FieldCtx *x, const FieldVal *v, char **ret)
{
    const char *s = NULL;
    int r = field_text(x, v, &s);
    if (r < 0)
        return r;
    char *copy = strdup(s);
    if (!copy)
        return -ENOMEM;
    *ret = copy;
    return 0;
}

int field_uint(FieldCtx *x, const FieldVal *v, uint64_t min, uint64_t max, uint64_t *ret)
{
    int64_t n = 0;
    bool ok = v->text && parse_i64(v->text, &n) == 0 && n >= 0 && (uint64_t)n >= min &&
              (uint64_t)n <= max;
    if (!ok) {
        char expect[96];
        if (max >= (uint64_t)INT64_MAX)
            snprintf(expect, sizeof(expect), "must be a whole number of at least %" PRIu64, min);
        else
            snprintf(expect, sizeof(expect), "must be a whole number from %" PRIu64 " to %" PRIu64,
                     min, max);
        return bad_value(x, v, expect);
    }
    *ret = (uint64_t)n;
    return 0;
}

/* Write the scaled fixed-point value v as a plain decimal ("2.5", "16"). */
static void format_fixed(int64_t v, unsigned digits, char *out, size_t outlen)
{
    int64_t scale = 1;
    for (unsigned i = 0; i < digits; i++)
        scale *= 10;
    int64_t whole = v / scale, frac = v % scale;
    if (!frac) {
        snprintf(out, outlen, "%" PRId64, whole);
        return;
    }
    int w = (int)digits;
    while (frac % 10 == 0) {
        frac /= 10;
        w--;
    }
    snprintf(out, outlen, "%" PRId64 ".%0*" PRId64, whole, w, frac);
}

int field_fixed(FieldCtx *x, const FieldVal *v, unsigned digits, int64_t min, int64_t max,
                int64_t *ret)
{
    int64_t n = 0;
    bool ok = v->text && parse_fixed(v->text, digits, &n) == 0 && n >= min && n <= max;
    if (!ok) {
        char lo[32], hi[32], expect[128];
        format_fixed(min, digits, lo, sizeof(lo));
        format_fixed(max, digits, hi, sizeof(hi));
        snprintf(expect, sizeof(expect), "must be a number from %s to %s with at most %u decimal%s",
                 lo, hi, digits, digits == 1 ? "" : "s");
        return bad_value(x, v, expect);
    }
    *ret = n;
    return 0;
}

int field_size(FieldCtx *x, const FieldVal *v, uint64_t min_mib, uint64_t max_mib, uint64_t *ret)
{
    uint64_t mib = 0;
    if (!v->text || parse_size_mib(v->text, &mib) < 0)
        return bad_value(x, v, "must be a size like 24GiB, 512MiB or 80GB (a bare number is MiB)");
    if (mib < min_mib || mib > max_mib) {
        char expect[128];
        snprintf(expect, sizeof(expect), "must be from %" PRIu64 " to %" PRIu64 " MiB", min_mib,
                 max_mib);
        return bad_value(x, v, expect);
    }
    *ret = mib;
    return 0;
}

int field_duration(FieldCtx *x, const FieldVal *v, int64_t *ret)
{
    int64_t ms = 0;
    if (!v->text || parse_duration_ms(v->text, &ms) < 0)
        return bad_value(
            x, v, "must be a duration like 90s, 30m, 2h or 1h30m (a bare number is seconds)");
    *ret = ms;
    return 0;
}

int field_bool(FieldCtx *x, const FieldVal *v, bool *ret)
{
    static const char *const yes[] = {"true", "yes", "on", "1"};
    static const char *const no[] = {"false", "no", "off", "0"};
    for (size_t i = 0; v->text && i < ARRAY_SIZE(yes); i++) {
        if (strcasecmp(v->text, yes[i]) == 0) {
            *ret = true;
            return 0;
        }
        if (strcasecmp(v->text, no[i]) == 0) {
            *ret = false;
            return 0;
        }
    }
    return bad_value(x, v, "must be true or false");
}

int field_enum(FieldCtx *x, const FieldVal *v, int (*from_name)(const char *), const char *choices,
               int *ret)
{
    int e = v->text ? from_name(v->text) : -1;
    if (e < 0) {
        char expect[160];
        snprintf(expect, sizeof(expect), "must be %s", choices);
        return bad_value(x, v, expect);
    }
    *ret = e;
    return 0;
}

void field_strv_free(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

/* Append a trimmed copy of s[0..len) to *v. */
static int strv_push(char ***v, size_t *n, size_t *cap, const char *s, size_t len)
{
    while (len && isspace((unsigned char)*s))
        s++, len--;
    while (len && isspace((unsigned char)s[len - 1]))
        len--;
    if (GROW(*v, *cap, *n + 1) < 0)
        return -ENOMEM;
    char *copy = strndup(s, len);
    if (!copy)
        return -ENOMEM;
    (*v)[(*n)++] = copy;
    return 0;
}

int field_each(FieldCtx *x, const FieldVal *v,
               int (*fn)(FieldCtx *x, const FieldVal *item, void *ud), void *ud)
{
    if (v->json && v->json->type == JSON_ARRAY) {
        for (size_t i = 0; i < v->json->n_items; i++) {
            const FieldJson *it = &v->json->items[i];
            FieldVal iv = {.name = v->name, .line = it->line, .text = it->text, .json = it};
            int r = fn(x, &iv, ud);
            if (r < 0)
                return r;
        }
        return 0;
    }
    if (!v->node || !fy_node_is_sequence(v->node))
        return fn(x, v, ud);
    void *it = NULL;
    struct fy_node *item;
    while ((item = fy_node_sequence_iterate(v->node, &it))) {
        FieldVal iv = {.name = v->name, .line = field_node_line(item, v->line), .node = item};
        iv.text = fy_node_is_scalar(item) ? fy_node_get_scalar0(item) : NULL;
        if (field_node_is_null(item))
            iv.text = "";
        int r = fn(x, &iv, ud);
        if (r < 0)
            return r;
    }
    return 0;
}

static const char *const tier_choices = "owned, reserved, on-demand or spot";

static int tier_item(FieldCtx *x, const FieldVal *item, void *ud)
{
    uint8_t *mask = ud;
    const char *s = NULL;
    int e = field_text(x, item, &s);
    if (e < 0)
        return e;
    /* one cell may hold several, "reserved|on-demand" */
    for (;;) {
        const char *end = strchr(s, '|');
        char one[32];
        size_t n = end ? (size_t)(end - s) : strlen(s);
        while (n && isspace((unsigned char)*s))
            s++, n--;
        while (n && isspace((unsigned char)s[n - 1]))
            n--;
        int t = -1;
        if (n < sizeof(one)) {
            memcpy(one, s, n);
            one[n] = '\0';
            t = tier_from_name(one);
        }
        if (t < 0)
            return field_bad(x, item, "'%.*s' is not a tier; tiers are %s", (int)MIN(n, 40), s,
                             tier_choices);
        *mask |= (uint8_t)(1u << t);
        if (!end)
            return 0;
        s = end + 1;
    }
}

int field_tiers(FieldCtx *x, const FieldVal *v, uint8_t *ret)
{
    uint8_t mask = 0;
    int e = field_each(x, v, tier_item, &mask);
    if (e == 0 && !mask)
        e = field_bad(x, v, "must name at least one tier (%s)", tier_choices);
    if (e == 0)
        *ret = mask;
    return e;
}

typedef struct StrvAcc {
    char sep;
    char **v;
    size_t n, cap;
} StrvAcc;

static int strv_item(FieldCtx *x, const FieldVal *item, void *ud)
{
    StrvAcc *a = ud;
    const char *s = NULL;
    int r = field_text(x, item, &s);
    if (r < 0)
        return r;
    for (;;) {
        const char *end = a->sep ? strchr(s, a->sep) : NULL;
        size_t len = end ? (size_t)(end - s) : strlen(s);
        if (all_blank_n(s, len))
            return field_bad(x, item, "has an empty item in '%s'", item->text);
        if ((r = strv_push(&a->v, &a->n, &a->cap, s, len)) < 0)
            return r;
        if (!end)
            return 0;
        s = end + 1;
    }
}

int field_strv(FieldCtx *x, const FieldVal *v, char sep, char ***ret, size_t *ret_n)
{
    StrvAcc a = {.sep = sep};
    int r = field_each(x, v, strv_item, &a);
    if (r == 0 && !a.n)
        r = field_bad(x, v, "must not be an empty list");
    if (r < 0) {
        field_strv_free(a.v, a.n);
        return r;
    }
    *ret = a.v;
    *ret_n = a.n;
    return 0;
}

size_t field_node_line(struct fy_node *n, size_t fallback)
{
    if (!n)
        return fallback;
    if (fy_node_is_scalar(n)) {
        struct fy_token *t = fy_node_get_scalar_token(n);
        const struct fy_mark *m = t ? fy_token_start_mark(t) : NULL;
        return m && m->line >= 0 ? (size_t)m->line + 1 : fallback;
    }
    void *it = NULL;
    if (fy_node_is_mapping(n)) {
        struct fy_node_pair *p = fy_node_mapping_iterate(n, &it);
        return p ? field_node_line(fy_node_pair_key(p), fallback) : fallback;
    }
    if (fy_node_is_sequence(n))
        return field_node_line(fy_node_sequence_iterate(n, &it), fallback);
    return fallback;
}

bool field_node_is_null(struct fy_node *n)
{
    if (!n)
        return true;
    if (!fy_node_is_scalar(n) || fy_node_get_style(n) != FYNS_PLAIN)
        return false;
    const char *s = fy_node_get_scalar0(n);
    return !s || !*s || strcmp(s, "~") == 0 || strcasecmp(s, "null") == 0;
}

const char *field_node_shape(struct fy_node *n)
{
    if (n && fy_node_is_sequence(n))
        return "a list";
    if (n && fy_node_is_mapping(n))
        return "a mapping";
    return "a value";
}

void field_from_pair(struct fy_node_pair *p, size_t fallback_line, FieldVal *ret)
{
    struct fy_node *k = fy_node_pair_key(p), *v = fy_node_pair_value(p);
    size_t key_line = field_node_line(k, fallback_line);
    const char *name = k && fy_node_is_scalar(k) ? fy_node_get_scalar0(k) : NULL;
    *ret = (FieldVal){
        .name = name ? name : "?",
        /* a list or mapping is blamed on its key's line, a value on its own */
        .line = v && fy_node_is_scalar(v) ? field_node_line(v, key_line) : key_line,
        .text = !v                     ? ""
                : fy_node_is_scalar(v) ? fy_node_get_scalar0(v)
                                       : NULL,
        .node = v,
    };
}

const char *field_map_text(struct fy_node *map, const char *key)
{
    void *it = NULL;
    struct fy_node_pair *p;
    while (map && fy_node_is_mapping(map) && (p = fy_node_mapping_iterate(map, &it))) {
        struct fy_node *k = fy_node_pair_key(p), *v = fy_node_pair_value(p);
        if (k && fy_node_is_scalar(k) && strcmp(fy_node_get_scalar0(k), key) == 0)
            return v && fy_node_is_scalar(v) && !field_node_is_null(v) ? fy_node_get_scalar0(v)
                                                                       : NULL;
    }
    return NULL;
}

int field_collect(FieldCtx *x, struct fy_node *map, size_t line, const char *where,
                  const char *const *names, size_t n, FieldVal *vals, bool *has)
{
    int r = 0;
    for (size_t i = 0; i < n; i++) {
        has[i] = false;
        vals[i] = (FieldVal){.name = names[i], .line = line};
    }
    void *it = NULL;
    struct fy_node_pair *p;
    while ((p = fy_node_mapping_iterate(map, &it))) {
        FieldVal v;
        field_from_pair(p, line, &v);
        struct fy_node *k = fy_node_pair_key(p);
        if (!k || !fy_node_is_scalar(k)) {
            field_error(x, v.line, "in %s: keys must be names, not %s", where, field_node_shape(k));
            r = -EINVAL;
            continue;
        }
        size_t i = 0;
        while (i < n && strcmp(names[i], v.name) != 0)
            i++;
        if (i == n) {
            field_unknown(x, field_node_line(k, line), v.name, where, names, n);
            r = -EINVAL;
            continue;
        }
        vals[i] = v;
        vals[i].name = names[i];
        has[i] = !field_node_is_null(v.node);
    }
    return r;
}

const char *field_val_shape(const FieldVal *v)
{
    if (v->json)
        return v->json->type == JSON_ARRAY    ? "a list"
               : v->json->type == JSON_OBJECT ? "a mapping"
                                              : "a value";
    return field_node_shape(v->node);
}

bool field_val_is_map(const FieldVal *v)
{
    return v->json ? v->json->type == JSON_OBJECT : v->node && fy_node_is_mapping(v->node);
}

bool field_val_is_seq(const FieldVal *v)
{
    return v->json ? v->json->type == JSON_ARRAY : v->node && fy_node_is_sequence(v->node);
}

bool field_val_is_null(const FieldVal *v)
{
    return v->json ? v->json->type == JSON_NULL : field_node_is_null(v->node);
}

size_t field_val_count(const FieldVal *v)
{
    if (v->json)
        return v->json->n_items;
    if (field_val_is_map(v))
        return (size_t)fy_node_mapping_item_count(v->node);
    if (field_val_is_seq(v))
        return (size_t)fy_node_sequence_item_count(v->node);
    return 0;
}

int field_val_next_pair(const FieldVal *map, void **it, FieldVal *ret, size_t *ret_key_line,
                        bool *ret_named)
{
    if (map->json) {
        size_t i = (size_t)(uintptr_t)*it;
        if (map->json->type != JSON_OBJECT || i >= map->json->n_items)
            return 0;
        const FieldJson *e = &map->json->items[i];
        *it = (void *)(uintptr_t)(i + 1);
        bool scalar = e->type != JSON_OBJECT && e->type != JSON_ARRAY;
        *ret = (FieldVal){
            .name = e->key, .line = scalar ? e->line : e->key_line, .text = e->text, .json = e};
        *ret_key_line = e->key_line;
        *ret_named = true;
        return 1;
    }
    if (!field_val_is_map(map))
        return 0;
    struct fy_node_pair *p = fy_node_mapping_iterate(map->node, it);
    if (!p)
        return 0;
    field_from_pair(p, map->line, ret);
    struct fy_node *k = fy_node_pair_key(p);
    *ret_key_line = field_node_line(k, map->line);
    *ret_named = k && fy_node_is_scalar(k);
    return 1;
}

const char *field_val_map_text(const FieldVal *map, const char *key)
{
    if (!map->json)
        return field_map_text(map->node, key);
    void *it = NULL;
    FieldVal v;
    size_t kl;
    bool named;
    while (field_val_next_pair(map, &it, &v, &kl, &named) > 0)
        if (strcmp(v.name, key) == 0)
            return v.text && !field_val_is_null(&v) ? v.text : NULL;
    return NULL;
}

int field_collect_val(FieldCtx *x, const FieldVal *map, const char *where, const char *const *names,
                      size_t n, FieldVal *vals, bool *has)
{
    if (!map->json)
        return field_collect(x, map->node, map->line, where, names, n, vals, has);
    int r = 0;
    for (size_t i = 0; i < n; i++) {
        has[i] = false;
        vals[i] = (FieldVal){.name = names[i], .line = map->line};
    }
    void *it = NULL;
    FieldVal v;
    size_t key_line;
    bool named;
    while (field_val_next_pair(map, &it, &v, &key_line, &named) > 0) {
        size_t i = 0;
        while (i < n && strcmp(names[i], v.name) != 0)
            i++;
        if (i == n) {
            field_unknown(x, key_line, v.name, where, names, n);
            r = -EINVAL;
            continue;
        }
        vals[i] = v;
        vals[i].name = names[i];
        has[i] = !field_val_is_null(&v);
    }
    return r;
}

int field_yaml_open(FieldYaml *y, FieldCtx *x, const char *text, size_t len)
{
    *y = (FieldYaml){.x = x};
    int g = yaml_guard(x, text, len);
    if (g < 0)
        return g;
    struct fy_diag_cfg dc;
    fy_diag_cfg_default(&dc);
    dc.fp = NULL;
    dc.output_fn = NULL;
    dc.colorize = false;
    y->diag = fy_diag_create(&dc);
    if (!y->diag)
        return -ENOMEM;
    fy_diag_set_collect_errors(y->diag, true);
    /* YAML 1.2 reads JSON as it is; resolving expands anchors, aliases and merge keys */
    struct fy_parse_cfg cfg = {
        .flags = FYPCF_QUIET | FYPCF_RESOLVE_DOCUMENT | FYPCF_DISABLE_MMAP_OPT,
        .diag = y->diag,
    };
    y->parser = fy_parser_create(&cfg);
    if (!y->parser || fy_parser_set_string(y->parser, text, len) < 0) {
        field_yaml_close(y);
        return -ENOMEM;
    }
    return 0;
}

/* Move libfyaml's collected errors into x. Returns how many there were. */
static unsigned report_diag(FieldYaml *y)
{
    unsigned n = 0;
    void *it = NULL;
    struct fy_diag_error *e;
    while ((e = fy_diag_errors_iterate(y->diag, &it))) {
        if (e->type < FYET_ERROR)
            continue;
        field_error(y->x, e->line > 0 ? (size_t)e->line : 0, "invalid YAML: %s",
                    e->msg ? e->msg : "syntax error");
        n++;
    }
    return n;
}

int field_yaml_next(FieldYaml *y)
{
    if (y->doc) {
        fy_parse_document_destroy(y->parser, y->doc);
        y->doc = NULL;
    }
    y->doc = fy_parse_load_document(y->parser);
    if (fy_diag_got_error(y->diag)) {
        if (!report_diag(y))
            field_error(y->x, 0, "invalid YAML");
        return -EINVAL;
    }
    return y->doc ? 1 : 0;
}

void field_yaml_close(FieldYaml *y)
{
    if (y->doc)
        fy_parse_document_destroy(y->parser, y->doc);
    if (y->parser)
        fy_parser_destroy(y->parser);
    if (y->diag)
        fy_diag_destroy(y->diag);
    *y = (FieldYaml){0};
}

static int cmp_name(const void *a, const void *b)
{
    const FieldName *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    if (c)
        return c;
    return x->line < y->line ? -1 : x->line > y->line;
}

static int cmp_line(const void *a, const void *b)
{
    const FieldName *x = a, *y = b;
    return x->line < y->line ? -1 : x->line > y->line;
}

size_t field_report_duplicates(FieldCtx *x, FieldName *a, size_t n, const char *what)
{
    if (n < 2)
        return 0;
    qsort(a, n, sizeof(*a), cmp_name);
    /* the later occurrence is the mistake: collect them, then report in file order */
    FieldName *dups = malloc(n * sizeof(*dups));
    size_t nd = 0, first = 0;
    for (size_t i = 1; i < n; i++) {
        if (strcmp(a[i].name, a[first].name) != 0) {
            first = i;
            continue;
        }
        if (dups)
            dups[nd] = (FieldName){.name = a[i].name, .line = a[i].line};
        /* remember the first line in the name slot's partner below */
        nd++;
    }
    if (!nd || !dups) {
        free(dups);
        return nd;
    }
    /* find each duplicate's first occurrence again (a is sorted by name, then line) */
    qsort(dups, nd, sizeof(*dups), cmp_line);
    for (size_t i = 0; i < nd; i++) {
        FieldName key = {.name = dups[i].name, .line = 0};
        size_t lo = 0, hi = n;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (cmp_name(&a[mid], &key) < 0)
                lo = mid + 1;
            else
                hi = mid;
        }
        field_error(x, dups[i].line, "duplicate %s '%s' (first on line %zu)", what, dups[i].name,
                    a[lo].line);
    }
    free(dups);
    return nd;
}

bool field_has_suffix(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcasecmp(s + n - m, suffix) == 0;
}
