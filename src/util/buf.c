/* buf.c: growable text buffer; failures are sticky (oom) so callers check once. */
#include "util/buf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void buf_free(Buf *b)
{
    free(b->data);
    *b = (Buf){0};
}

void buf_reset(Buf *b)
{
    b->len = 0;
    if (b->data)
        b->data[0] = '\0';
}

static bool reserve(Buf *b, size_t extra)
{
    if (b->oom)
        return false;
    if (b->len + extra + 1 <= b->cap)
        return true;
    size_t n = b->cap ? b->cap : 64;
    while (n < b->len + extra + 1)
        n *= 2;
    char *p = realloc(b->data, n);
    if (!p) {
        b->oom = true;
        return false;
    }
    b->data = p;
    b->cap = n;
    return true;
}

void buf_append(Buf *b, const char *s, size_t n)
{
    if (!reserve(b, n))
        return;
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void buf_puts(Buf *b, const char *s)
{
    buf_append(b, s, strlen(s));
}

void buf_putc(Buf *b, char c)
{
    buf_append(b, &c, 1);
}

void buf_vprintf(Buf *b, const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    char small[256];
    int n = vsnprintf(small, sizeof(small), fmt, ap);
    if (n < 0) {
        va_end(ap2);
        return;
    }
    if ((size_t)n < sizeof(small)) {
        buf_append(b, small, (size_t)n);
    } else if (reserve(b, (size_t)n)) {
        vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap2);
        b->len += (size_t)n;
    }
    va_end(ap2);
}

void buf_printf(Buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    buf_vprintf(b, fmt, ap);
    va_end(ap);
}

const char *buf_str(const Buf *b)
{
    return b->data ? b->data : "";
}

char *buf_steal(Buf *b)
{
    char *s = b->data ? b->data : strdup("");
    *b = (Buf){0};
    return s;
}

void buf_json_str(Buf *b, const char *s)
{
    buf_putc(b, '"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"':
            buf_puts(b, "\\\"");
            break;
        case '\\':
            buf_puts(b, "\\\\");
            break;
        case '\n':
            buf_puts(b, "\\n");
            break;
        case '\t':
            buf_puts(b, "\\t");
            break;
        case '\r':
            buf_puts(b, "\\r");
            break;
        default:
            if (*p < 0x20)
                buf_printf(b, "\\u%04x", *p);
            else
                buf_putc(b, (char)*p);
        }
    }
    buf_putc(b, '"');
}
