/* fuzz.h: what the libFuzzer targets share. The parsers read text that files and
 * request bodies give them, NUL-terminated past its length (file_read_all and the HTTP
 * front both add the NUL), so each target hands them such a copy of libFuzzer's bytes;
 * and a target that checks a property (a round trip, a path that stays in its root)
 * stops with FUZZ_CHECK, which libFuzzer reports as a crash with its input. */
#pragma once

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* data as a malloc'd NUL-terminated string (embedded NULs kept); aborts when out of
 * memory, which libFuzzer's malloc limit reports. */
static inline char *fuzz_text(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s)
        abort();
    memcpy(s, data, size);
    s[size] = '\0';
    return s;
}

#define FUZZ_CHECK(cond, ...)                                                                      \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz check failed: %s: ", #cond);                                     \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            abort();                                                                               \
        }                                                                                          \
    } while (0)
