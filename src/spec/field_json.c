/* field_json.c: JSON input read by jansson (linear in the text, duplicate keys refused,
 * NUL refused) into the FieldJson tree the spec readers walk, so that a JSON job and a
 * YAML job go through the same field checks and say the same things when wrong.
 *
 * jansson gives values but no positions, and numbers only as binary values; the
 * readers want each value's line and a number as written ("2.0" is not a whole
 * number, 0.1 is exactly 0.1). So after jansson has accepted the text, one pass over
 * that text, in step with the tree (objects keep their keys in insertion order, which
 * is the text's order once duplicates are refused), records each value's line and
 * each number's literal. That pass reads only text jansson has checked, so it needs no
 * error handling beyond a consistency check. */
#include "spec/field.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

typedef struct Walk {
    const char *p, *end;
    size_t line;
    char *lits; /* number literals, NUL-terminated, one after another */
    size_t lits_used;
} Walk;

static void skip_ws(Walk *w)
{
    while (w->p < w->end && (*w->p == ' ' || *w->p == '\t' || *w->p == '\r' || *w->p == '\n')) {
        if (*w->p == '\n')
            w->line++;
        w->p++;
    }
}

/* Past a string jansson accepted: no raw control characters, so no newline inside. */
static void skip_string(Walk *w)
{
    w->p++;
    while (w->p < w->end && *w->p != '"')
        w->p += *w->p == '\\' ? 2 : 1;
    w->p++;
}

/* Is the next character c? Then step over it. */
static bool expect(Walk *w, char c)
{
    skip_ws(w);
    if (w->p >= w->end || *w->p != c)
        return false;
    w->p++;
    return true;
}

static int build(Walk *w, json_t *v, FieldJson *out, unsigned depth)
{
    skip_ws(w);
    if (w->p >= w->end)
        return -EPROTO;
    out->type = json_typeof(v);
    out->line = w->line;
    /* as in YAML: the 65th list or mapping inside one another is refused */
    if ((out->type == JSON_OBJECT || out->type == JSON_ARRAY) && depth >= FIELD_MAX_DEPTH)
        return -E2BIG;
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        if (!expect(w, '{'))
            return -EPROTO;
        size_t n = json_object_size(v), i = 0;
        if (n && !(out->items = calloc(n, sizeof(*out->items))))
            return -ENOMEM;
        out->n_items = n;
        const char *key;
        json_t *val;
        json_object_foreach(v, key, val)
        {
            if (i == n || (i && !expect(w, ',')))
                return -EPROTO;
            skip_ws(w);
            FieldJson *it = &out->items[i++];
            it->key = key;
            it->key_line = w->line;
            if (w->p >= w->end || *w->p != '"')
                return -EPROTO;
            skip_string(w);
            if (!expect(w, ':'))
                return -EPROTO;
            int r = build(w, val, it, depth + 1);
            if (r < 0)
                return r;
        }
        return i == n && expect(w, '}') ? 0 : -EPROTO;
    }
    case JSON_ARRAY: {
        if (!expect(w, '['))
            return -EPROTO;
        size_t n = json_array_size(v);
        if (n && !(out->items = calloc(n, sizeof(*out->items))))
            return -ENOMEM;
        out->n_items = n;
        for (size_t i = 0; i < n; i++) {
            if (i && !expect(w, ','))
                return -EPROTO;
            int r = build(w, json_array_get(v, i), &out->items[i], depth + 1);
            if (r < 0)
                return r;
        }
        return expect(w, ']') ? 0 : -EPROTO;
    }
    case JSON_STRING:
        if (*w->p != '"')
            return -EPROTO;
        out->text = json_string_value(v);
        skip_string(w);
        return 0;
    case JSON_INTEGER:
    case JSON_REAL: {
        const char *start = w->p;
        while (w->p < w->end && *w->p && strchr("+-0123456789.eE", *w->p))
            w->p++;
        size_t n = (size_t)(w->p - start);
        if (!n)
            return -EPROTO;
        char *lit = w->lits + w->lits_used;
        memcpy(lit, start, n);
        lit[n] = '\0';
        w->lits_used += n + 1;
        out->text = lit;
        return 0;
    }
    case JSON_TRUE:
    case JSON_FALSE:
    case JSON_NULL: {
        static const char *const words[] = {
            [JSON_TRUE] = "true", [JSON_FALSE] = "false", [JSON_NULL] = "null"};
        const char *word = words[json_typeof(v)];
        size_t n = strlen(word);
        if ((size_t)(w->end - w->p) < n || memcmp(w->p, word, n))
            return -EPROTO;
        w->p += n;
        out->text = json_typeof(v) == JSON_NULL ? "" : word;
        return 0;
    }
    }
    return -EPROTO;
}

static void free_items(FieldJson *n)
{
    for (size_t i = 0; i < n->n_items; i++)
        free_items(&n->items[i]);
    free(n->items);
    n->items = NULL;
    n->n_items = 0;
}

void field_json_free(FieldJsonDoc *d)
{
    if (!d)
        return;
    free_items(&d->root);
    json_decref(d->json);
    free(d->lits);
    *d = (FieldJsonDoc){0};
}

int field_json_parse(FieldCtx *x, const char *text, size_t len, FieldJsonDoc *ret)
{
    json_error_t e;
    json_t *v = json_loadb(text, len, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &e);
    if (!v) {
        /* jansson counts the line a message is about from 1, its column from 1 */
        field_error(x, e.line > 0 ? (size_t)e.line : 0, "invalid JSON: %s (column %d)", e.text,
                    e.column);
        return -EBADMSG;
    }
    FieldJsonDoc d = {.json = v};
    Walk w = {.p = text, .end = text + len, .line = 1, .lits = malloc(len + 1)};
    d.lits = w.lits;
    int r = w.lits ? build(&w, v, &d.root, 0) : -ENOMEM;
    if (r == -E2BIG) {
        field_error(x, 0, "nested deeper than %d levels", FIELD_MAX_DEPTH);
        r = -EINVAL;
    } else if (r == -EPROTO) {
        /* the text and jansson's tree disagree: a bug here, not the input's fault */
        field_error(x, w.line, "cannot follow the JSON text here");
        r = -EINVAL;
    }
    if (r < 0) {
        field_json_free(&d);
        return r;
    }
    *ret = d;
    return 0;
}
