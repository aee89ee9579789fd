/* fuzz_job_body.c: the body of POST /api/v1/jobs, read as the server reads one of no
 * declared type (src/server/api_jobs.c, parse_jobs: as JSON by jansson, and when it is
 * not JSON at all and small enough, as YAML behind the body's bounds), and the stored form of
 * each job accepted: spec_job_to_json is what the store keeps and reads again at a
 * restart, and job_json.h promises that reading it gives the same job, so it is written,
 * read and written again and the two texts must agree. */
#include "fuzz.h"

#include "spec/job_json.h"
#include "spec/spec.h"

static void round_trip(const JobSpec *j)
{
    Buf a = {0};
    if (spec_job_to_json(j, &a) < 0) {
        buf_free(&a);
        return; /* a job a job file cannot say is refused at submission */
    }
    JobList again = {0};
    Buf err = {0};
    int r = spec_parse_jobs_yaml(a.data, a.len, "stored", &again, &err);
    FUZZ_CHECK(r == 0 || r == -ENOMEM, "the stored form does not read back: %s\n%s", buf_str(&err),
               a.data);
    if (r == 0) {
        FUZZ_CHECK(again.n == 1, "the stored form reads as %zu jobs", again.n);
        Buf b = {0};
        r = spec_job_to_json(&again.jobs[0], &b);
        FUZZ_CHECK(r == 0 || r == -ENOMEM, "the job read back cannot be stored (%d)", r);
        FUZZ_CHECK(r < 0 || !strcmp(buf_str(&a), buf_str(&b)),
                   "the stored form changes when read back:\n%s\n%s", buf_str(&a), buf_str(&b));
        buf_free(&b);
    }
    job_list_free(&again);
    buf_free(&err);
    buf_free(&a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *body = fuzz_text(data, size);
    JobList jobs = {0};
    Buf err = {0};
    int r = spec_parse_jobs_json(body, size, "request", &jobs, &err);
    if (r == -EBADMSG && size <= SPEC_BODY_YAML_BYTES) {
        job_list_free(&jobs);
        buf_reset(&err);
        r = spec_parse_jobs_yaml_body(body, size, "request", &jobs, &err);
    }
    if (r == 0)
        for (size_t i = 0; i < jobs.n; i++)
            round_trip(&jobs.jobs[i]);
    job_list_free(&jobs);
    buf_free(&err);
    free(body);
    return 0;
}
