/* fuzz_trace.c: the simulator's trace readers (src/sim/trace.c: trace_parse), the
 * format found from the header as `gpuorch sim --trace` does: the Alibaba pod list, the
 * Philly job table, else a job file. Each format is also forced, so that a header the
 * sniffer would not route still reaches every reader. */
#include "fuzz.h"

#include "sim/sim.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_text(data, size);
    static const TraceFormat formats[] = {TRACE_AUTO, TRACE_ALIBABA2023, TRACE_PHILLY};
    for (size_t i = 0; i < sizeof(formats) / sizeof(formats[0]); i++) {
        JobList jobs = {0};
        Buf err = {0};
        int r = trace_parse(text, size, "fuzz", formats[i], &jobs, &err);
        FUZZ_CHECK(r == 0 || err.len || r == -ENOMEM, "rejected without a message (%d)", r);
        job_list_free(&jobs);
        buf_free(&err);
    }
    free(text);
    return 0;
}
