/* csv.c: row-at-a-time CSV parsing with line tracking. */
#include "util/csv.h"

#include "util/macro.h"

#include <ctype.h>
#include <errno.h>
#include <string.h>
#include <strings.h>

void csv_init(CsvReader *r, const char *data, size_t len)
{
    *r = (CsvReader){.p = data, .end = data + len, .line = 0, .next_line = 1};
    /* skip a UTF-8 byte order mark */
    if (len >= 3 && memcmp(data, "\xEF\xBB\xBF", 3) == 0)
        r->p += 3;
}

void csv_free(CsvReader *r)
{
    free(r->scratch);
    free(r->fields);
    *r = (CsvReader){0};
}

static bool blank_line(const char *p, const char *end)
{
    for (; p < end && *p != '\n'; p++)
        if (*p != '\r' && *p != ' ' && *p != '\t')
            return false;
    return true;
}

int csv_next(CsvReader *r)
{
    while (r->p < r->end && blank_line(r->p, r->end)) {
        const char *nl = memchr(r->p, '\n', (size_t)(r->end - r->p));
        r->p = nl ? nl + 1 : r->end;
        r->next_line++;
    }
    if (r->p >= r->end)
        return 0;
    r->line = r->next_line;
    /* the row is at most as long as the rest of the input */
    size_t need = (size_t)(r->end - r->p) + 1;
    const char *nl = memchr(r->p, '\n', (size_t)(r->end - r->p));
    if (nl && !memchr(r->p, '"', (size_t)(nl - r->p)))
        need = (size_t)(nl - r->p) + 1;
    if (GROW(r->scratch, r->scratch_cap, need) < 0)
        return -ENOMEM;
    char *out = r->scratch;
    r->nfields = 0;
    const char *p = r->p;
    for (;;) {
        if (GROW(r->fields, r->fields_cap, r->nfields + 1) < 0)
            return -ENOMEM;
        r->fields[r->nfields++] = out;
        if (p < r->end && *p == '"') {
            p++;
            for (;;) {
                if (p >= r->end)
                    return -EINVAL;
                if (*p == '"') {
                    if (p + 1 < r->end && p[1] == '"') {
                        *out++ = '"';
                        p += 2;
                        continue;
                    }
                    p++;
                    break;
                }
                if (*p == '\n')
                    r->next_line++;
                *out++ = *p++;
            }
            /* tolerate spaces between the closing quote and the separator */
            while (p < r->end && (*p == ' ' || *p == '\t'))
                p++;
        } else {
            while (p < r->end && *p != ',' && *p != '\n')
                *out++ = *p++;
            if (out > r->fields[r->nfields - 1] && out[-1] == '\r')
                out--;
        }
        *out++ = '\0';
        if (p < r->end && *p == ',') {
            p++;
            continue;
        }
        if (p < r->end && *p == '\r')
            p++;
        if (p < r->end && *p == '\n')
            p++;
        else if (p < r->end)
            return -EINVAL; /* text after a closing quote */
        break;
    }
    r->next_line++;
    r->p = p;
    return 1;
}

int csv_column(const CsvReader *r, const char *name)
{
    for (size_t i = 0; i < r->nfields; i++) {
        const char *f = r->fields[i];
        while (isspace((unsigned char)*f))
            f++;
        size_t n = strlen(f);
        while (n && isspace((unsigned char)f[n - 1]))
            n--;
        if (n == strlen(name) && strncasecmp(f, name, n) == 0)
            return (int)i;
    }
    return -1;
}
