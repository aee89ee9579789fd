/* csv.h: a small RFC 4180 reader over a buffer in memory: quoted fields, doubled
 * quotes, CRLF, and the line number of every row for error messages. Fields point into
 * a per-row scratch copy owned by the reader and valid until the next row. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

typedef struct CsvReader {
    const char *p, *end;
    size_t line;      /* line number (from 1) where the current row starts */
    size_t next_line; /* line number where the next row starts */
    char *scratch;
    size_t scratch_cap;
    char **fields;
    size_t nfields, fields_cap;
} CsvReader;

void csv_init(CsvReader *r, const char *data, size_t len);
void csv_free(CsvReader *r);
/* Read the next row; blank lines are skipped. 1 = a row, 0 = end, -EINVAL = an
 * unterminated quote, -ENOMEM. */
int csv_next(CsvReader *r);

/* Column lookup in a header row: index or -1. Case-insensitive, trims spaces. */
int csv_column(const CsvReader *r, const char *name);
