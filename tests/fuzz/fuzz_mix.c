/* fuzz_mix.c: the workload mixes of `gpuorch tracegen` (tracegen_mix_parse,
 * docs/trace-gen.md). Only the reader: generating reads Philly tables from disk. */
#include "fuzz.h"

#include "sim/tracegen.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_text(data, size);
    TraceMix mix = {0};
    Buf err = {0};
    int r = tracegen_mix_parse(text, size, "fuzz", &mix, &err);
    FUZZ_CHECK(r == 0 || err.len || r == -ENOMEM, "rejected without a message (%d)", r);
    tracegen_mix_free(&mix);
    buf_free(&err);
    free(text);
    return 0;
}
