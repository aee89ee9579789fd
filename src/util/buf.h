/* buf.h: a growable NUL-terminated character buffer. Core code builds human-readable
 * reasons with it (the core may not use stdio); the CLI builds its output with it. */
#pragma once

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct Buf {
    char *data; /* NUL-terminated, owned; NULL until first append */
    size_t len;
    size_t cap;
    bool oom; /* an append failed; the content is truncated */
} Buf;

void buf_free(Buf *b);
void buf_reset(Buf *b);
void buf_append(Buf *b, const char *s, size_t n);
void buf_puts(Buf *b, const char *s);
void buf_putc(Buf *b, char c);
void buf_printf(Buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void buf_vprintf(Buf *b, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
/* The text so far, "" when empty; valid until the next append. */
const char *buf_str(const Buf *b);
/* Hand the text to the caller (malloc'd, never NULL unless out of memory). */
char *buf_steal(Buf *b);
/* Append s as a JSON string literal, quotes included. */
void buf_json_str(Buf *b, const char *s);
