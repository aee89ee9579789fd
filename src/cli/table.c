/* table.c: text tables fitted to a terminal width (see table.h). The fitting takes
 * one column at a time off the widest shrinkable column of the highest shrink order,
 * so the least important column (a free-text reason) gives way first and names keep
 * as much as they can. */
#include "cli/table.h"

#include "util/macro.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void table_init(Table *t, const TableCol *cols, size_t n_cols)
{
    *t = (Table){.cols = cols, .n_cols = n_cols};
}

void table_free(Table *t)
{
    for (size_t i = 0; i < t->n_cells; i++)
        free(t->cells[i]);
    free(t->cells);
    t->cells = NULL;
    t->n_cells = t->cap = 0;
}

void table_cell(Table *t, const char *fmt, ...)
{
    if (t->oom)
        return;
    if (GROW(t->cells, t->cap, t->n_cells + 1) < 0) {
        t->oom = true;
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (n < 0) {
        t->oom = true;
        return;
    }
    for (char *p = s; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = ' ';
    t->cells[t->n_cells++] = s;
}

size_t table_rows(const Table *t)
{
    return t->n_cols ? t->n_cells / t->n_cols : 0;
}

size_t text_width(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        if (((unsigned char)*s & 0xc0) != 0x80)
            n++;
    return n;
}

/* Byte length of the first `cols` code points of s. */
static size_t prefix_bytes(const char *s, size_t cols)
{
    size_t i = 0, seen = 0;
    while (s[i]) {
        if (((unsigned char)s[i] & 0xc0) != 0x80) {
            if (seen == cols)
                break;
            seen++;
        }
        i++;
    }
    return i;
}

void text_cut(Buf *b, const char *s, size_t width)
{
    if (text_width(s) <= width) {
        buf_puts(b, s);
        return;
    }
    if (width == 0)
        return;
    buf_append(b, s, prefix_bytes(s, width - 1));
    buf_putc(b, '~');
}

static void pad(Buf *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        buf_putc(b, ' ');
}

/* One line: each cell cut to its column and aligned; the last one not padded. */
static void render_line(const Table *t, const char *const *cells, const size_t *w, Buf *out)
{
    size_t start = out->len;
    for (size_t c = 0; c < t->n_cols; c++) {
        const char *s = cells[c] ? cells[c] : "";
        size_t sw = MIN(text_width(s), w[c]);
        if (c > 0)
            pad(out, 2);
        if (t->cols[c].align == COL_RIGHT)
            pad(out, w[c] - sw);
        text_cut(out, s, w[c]);
        if (t->cols[c].align == COL_LEFT && c + 1 < t->n_cols)
            pad(out, w[c] - sw);
    }
    /* an empty last cell would leave the padding of the one before it */
    while (out->len > start && out->data[out->len - 1] == ' ')
        out->len--;
    if (out->data)
        out->data[out->len] = '\0';
    buf_putc(out, '\n');
}

int table_render(const Table *t, size_t width, Buf *out)
{
    if (t->oom)
        return -ENOMEM;
    size_t n = t->n_cols, rows = table_rows(t);
    if (n == 0)
        return 0;
    size_t *w = calloc(n, sizeof(*w));
    const char **header = calloc(n, sizeof(*header));
    if (!w || !header) {
        free(w);
        free(header);
        return -ENOMEM;
    }
    for (size_t c = 0; c < n; c++) {
        header[c] = t->cols[c].header;
        w[c] = text_width(header[c]);
        for (size_t r = 0; r < rows; r++)
            w[c] = MAX(w[c], text_width(t->cells[r * n + c]));
        if (width && t->cols[c].cap && w[c] > t->cols[c].cap)
            w[c] = t->cols[c].cap;
    }
    size_t total = 2 * (n - 1);
    for (size_t c = 0; c < n; c++)
        total += w[c];
    while (width && total > width) {
        size_t best = n;
        for (size_t c = 0; c < n; c++) {
            const TableCol *col = &t->cols[c];
            if (!col->shrink || w[c] <= MAX(col->min, 1))
                continue;
            if (best == n || col->shrink > t->cols[best].shrink ||
                (col->shrink == t->cols[best].shrink && w[c] > w[best]))
                best = c;
        }
        if (best == n)
            break; /* nothing left to give: the line stays too wide */
        w[best]--;
        total--;
    }
    render_line(t, header, w, out);
    for (size_t r = 0; r < rows; r++)
        render_line(t, (const char *const *)&t->cells[r * n], w, out);
    free(w);
    free(header);
    return out->oom ? -ENOMEM : 0;
}
