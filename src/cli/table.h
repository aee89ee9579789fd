/* table.h: text tables fitted to a terminal width, for the client commands. A table
 * is built cell by cell, then laid out: each column as wide as its widest cell (or its
 * cap), and when the whole is wider than the limit the columns that may shrink give
 * up width, in their order, down to their minimum; a cell wider than its column is cut
 * and ends in '~'. Widths count UTF-8 code points, so names in any script line up as
 * long as they are not double-width. Pure: no I/O. */
#pragma once

#include "util/buf.h"

#include <stdbool.h>
#include <stddef.h>

typedef enum ColAlign { COL_LEFT, COL_RIGHT } ColAlign;

typedef struct TableCol {
    const char *header;
    ColAlign align;
    size_t cap;      /* natural width at most this when fitting (0: none) */
    size_t min;      /* may shrink down to this (ignored when shrink is 0) */
    unsigned shrink; /* 0: keeps its width; higher numbers give up width first */
} TableCol;

typedef struct Table {
    const TableCol *cols; /* borrowed */
    size_t n_cols;
    char **cells; /* row-major, owned; a row is complete after n_cols cells */
    size_t n_cells, cap;
    bool oom;
} Table;

void table_init(Table *t, const TableCol *cols, size_t n_cols);
void table_free(Table *t);
/* Append the next cell (rows fill left to right). Tabs, newlines and other control
 * characters become spaces, so a server's message cannot break the layout. */
void table_cell(Table *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
size_t table_rows(const Table *t);
/* Header line, then one line per row, columns two spaces apart, no trailing spaces.
 * width: the limit to fit in, 0 for none (then caps do not apply either). Returns 0 or
 * -ENOMEM (a cell failed to append). */
int table_render(const Table *t, size_t width, Buf *out);

/* The width of s in columns: its UTF-8 code points. */
size_t text_width(const char *s);
/* Append s cut to at most width columns; a cut string ends in '~'. */
void text_cut(Buf *b, const char *s, size_t width);
