/* macro.c: the one out-of-line helper behind macro.h, array growth by doubling. */
#include "util/macro.h"

#include <errno.h>
#include <stdint.h>

int grow_array(void **arr, size_t *cap, size_t need, size_t elem_size)
{
    if (need <= *cap)
        return 0;
    size_t n = *cap ? *cap : 8;
    while (n < need) {
        if (n > SIZE_MAX / 2 / elem_size)
            return -ENOMEM;
        n *= 2;
    }
    void *p = realloc(*arr, n * elem_size);
    if (!p)
        return -ENOMEM;
    *arr = p;
    *cap = n;
    return 0;
}
