/* fuzz_jobs.c: job files as `gpuorch validate`, plan and sim read them (spec_parse_jobs):
 * YAML or JSON, one job or a list, or the job CSV, chosen by the content as for a file;
 * and spec_sniff, which classes any file before its reader runs. */
#include "fuzz.h"

#include "spec/spec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_text(data, size);
    (void)spec_sniff("fuzz", text, size);
    JobList jobs = {0};
    Buf err = {0};
    int r = spec_parse_jobs(text, size, "fuzz", &jobs, &err);
    FUZZ_CHECK(r == 0 || err.len || r == -ENOMEM, "rejected without a message (%d)", r);
    job_list_free(&jobs);
    buf_free(&err);
    free(text);
    return 0;
}
