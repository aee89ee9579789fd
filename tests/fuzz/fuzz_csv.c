/* fuzz_csv.c: the CSV reader under every table (src/util/csv.c): every row read to the
 * end, every field touched, and the header's column lookup; rows come in line order. */
#include "fuzz.h"

#include "util/csv.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* not NUL-terminated: the reader must keep to its length */
    char *text = malloc(size ? size : 1);
    if (!text)
        abort();
    memcpy(text, data, size);
    CsvReader r;
    csv_init(&r, text, size);
    size_t last_line = 0, rows = 0;
    int rc;
    while ((rc = csv_next(&r)) > 0) {
        FUZZ_CHECK(r.line > last_line, "row at line %zu after line %zu", r.line, last_line);
        last_line = r.line;
        size_t bytes = 0;
        for (size_t i = 0; i < r.nfields; i++)
            bytes += strlen(r.fields[i]);
        FUZZ_CHECK(bytes <= size, "a row of %zu bytes from %zu of input", bytes, size);
        if (rows++ == 0) {
            (void)csv_column(&r, "name");
            (void)csv_column(&r, r.nfields ? r.fields[r.nfields - 1] : "x");
        }
    }
    FUZZ_CHECK(rc == 0 || rc == -EINVAL || rc == -ENOMEM, "csv_next returned %d", rc);
    csv_free(&r);
    free(text);
    return 0;
}
