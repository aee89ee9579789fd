/* job_json.h: a JobSpec written back as a job file in JSON: the normalised form the
 * server stores and shows for a submitted job. Reading the text again with
 * spec_parse_jobs_yaml (JSON is YAML) gives the same JobSpec, field by field. */
#pragma once

#include "core/job.h"
#include "util/buf.h"

/* Append j to out as one JSON object in the job-file format of docs/job-files.md. The
 * request, kind, priority, workers and preemptible are always written, the rest when set;
 * durations in forms the parser reads exactly ("90s", "1h30m", "1500ms"), sizes in MiB.
 * -EINVAL when j holds what a job file cannot say (a name with spaces, an empty string,
 * a negative time, gpus: 0 as a GPU request, an env entry without '=', ...), -ENOMEM;
 * on failure out is left as it was. */
int spec_job_to_json(const JobSpec *j, Buf *out);
