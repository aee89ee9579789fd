/* output.c: terminal tables for the CLI. */
#include "cli/output.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

void out_table(FILE *f, const char *text)
{
    /* two passes: column widths, then the cells */
    size_t widths[32] = {0};
    for (int pass = 0; pass < 2; pass++) {
        const char *p = text;
        while (*p) {
            const char *eol = strchr(p, '\n');
            if (!eol)
                eol = p + strlen(p);
            size_t col = 0;
            const char *cell = p;
            while (cell <= eol) {
                const char *end = memchr(cell, '\t', (size_t)(eol - cell));
                bool last = !end;
                if (!end)
                    end = eol;
                size_t w = (size_t)(end - cell);
                if (pass == 0 && col < 32 && w > widths[col])
                    widths[col] = w;
                if (pass == 1) {
                    fwrite(cell, 1, w, f);
                    if (!last)
                        fprintf(f, "%*s", (int)(col < 32 ? widths[col] - w + 2 : 2), "");
                }
                col++;
                cell = end + 1;
                if (last)
                    break;
            }
            if (pass == 1)
                fputc('\n', f);
            p = *eol ? eol + 1 : eol;
        }
    }
}
