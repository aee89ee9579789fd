/* file.c: read a file into memory in one go; specs and traces are small enough. */
#include "util/file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

int file_read_all(const char *path, char **ret_data, size_t *ret_len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -errno;
    size_t cap = 1 << 16, len = 0;
    char *data = malloc(cap);
    if (!data) {
        fclose(f);
        return -ENOMEM;
    }
    for (;;) {
        if (len + 1 >= cap) {
            char *p = realloc(data, cap * 2);
            if (!p) {
                free(data);
                fclose(f);
                return -ENOMEM;
            }
            data = p;
            cap *= 2;
        }
        size_t n = fread(data + len, 1, cap - len - 1, f);
        len += n;
        if (n == 0)
            break;
    }
    int err = ferror(f) ? -EIO : 0;
    fclose(f);
    if (err) {
        free(data);
        return err;
    }
    data[len] = '\0';
    *ret_data = data;
    *ret_len = len;
    return 0;
}
