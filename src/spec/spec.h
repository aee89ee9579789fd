/* spec.h: reading what people and other tools write: the cluster spec (YAML), the
 * Alibaba node list (CSV) as a cluster, and job files (YAML or JSON, one job or a
 * list; or the job CSV of docs/job-csv.md). Errors name the file, the line and the
 * field ("jobs.yaml:12: field 'gpus': must be a whole number from 0 to 16"), and the
 * functions return -EINVAL for bad input (the CLI exits 2), -ENOENT/-EIO for files. */
#pragma once

#include "core/cluster.h"
#include "core/job.h"
#include "util/buf.h"

#include <stddef.h>

/* Load a cluster: a YAML spec, or an Alibaba node list (a CSV whose header has
 * sn,cpu_milli,memory_mib,gpu,model). On error, err holds the message. */
int spec_load_cluster(const char *path, Cluster **ret, Buf *err);
int spec_parse_cluster_yaml(const char *text, size_t len, const char *name, Cluster **ret,
                            Buf *err);
int spec_parse_alibaba_nodes(const char *text, size_t len, const char *name, Cluster **ret,
                             Buf *err);

typedef struct JobList {
    JobSpec *jobs;
    size_t n, cap;
} JobList;

void job_list_free(JobList *l);
/* Append a copy of j. 0 or -ENOMEM. */
int job_list_push(JobList *l, const JobSpec *j);

/* Load jobs: YAML or JSON (a mapping = one job, a sequence = several), or CSV
 * (detected by a .csv name or a header line naming the job columns). */
int spec_load_jobs(const char *path, JobList *ret, Buf *err);
int spec_parse_jobs_yaml(const char *text, size_t len, const char *name, JobList *ret, Buf *err);
int spec_parse_jobs_csv(const char *text, size_t len, const char *name, JobList *ret, Buf *err);

/* What a file looks like, for `gpuorch validate`: a cluster or jobs. */
typedef enum SpecKind { SPEC_UNKNOWN, SPEC_CLUSTER, SPEC_JOBS } SpecKind;
SpecKind spec_sniff(const char *path, const char *text, size_t len);
