/* spec.h: reading what people and other tools write: the cluster spec (YAML), the
 * Alibaba node list (CSV) as a cluster, and job files (YAML or JSON, one job or a
 * list; or the job CSV of docs/job-files.md). Errors name the file, the line and the
 * field ("jobs.yaml:12: field 'gpus': must be a whole number from 0 to 16"), and the
 * functions return -EINVAL for bad input (the CLI exits 2), -ENOENT/-EIO for files.
 *
 * err: messages are appended, one per line, without a trailing newline; when err
 * already holds text a newline separates the new messages from it. Output parameters
 * are written only on success; on failure nothing is allocated for the caller.
 * docs/cluster-spec.md and docs/job-files.md describe the formats. */
#pragma once

#include "core/cluster.h"
#include "core/job.h"
#include "util/buf.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Load a cluster: a YAML spec, or an Alibaba node list (a CSV whose header has
 * sn,cpu_milli,memory_mib,gpu,model). On error, err holds the message. */
int spec_load_cluster(const char *path, Cluster **ret, Buf *err);
int spec_parse_cluster_yaml(const char *text, size_t len, const char *name, Cluster **ret,
                            Buf *err);
/* With SPEC_POOLS_ELSEWHERE a YAML spec may leave out `pools`: the nodes come from
 * elsewhere (the Kubernetes engine adds them from Node objects); teams and switches are
 * read as always. */
#define SPEC_POOLS_ELSEWHERE 1u
int spec_load_cluster_flags(const char *path, unsigned flags, Cluster **ret, Buf *err);
/* What spec_load_cluster_flags does with the text of a file: a node list or a YAML spec,
 * by its content (name, the file's, counts as a .csv hint and starts messages). */
int spec_parse_cluster(const char *text, size_t len, const char *name, unsigned flags,
                       Cluster **ret, Buf *err);
int spec_parse_cluster_yaml_flags(const char *text, size_t len, const char *name, unsigned flags,
                                  Cluster **ret, Buf *err);
int spec_parse_alibaba_nodes(const char *text, size_t len, const char *name, Cluster **ret,
                             Buf *err);

/* The model of pools without GPUs (gpus: 0 in a spec, gpu 0 in a node list): a
 * cluster-local model with no memory and no MIG. Reserved: a spec may not name it. */
#define SPEC_CPU_ONLY_MODEL "cpu-only"

/* The file name of path without directories and extension ("a/b/demo.yaml" -> "demo"),
 * newly allocated; NULL when out of memory. Names clusters that do not name themselves. */
char *spec_base_name(const char *path);

typedef struct JobList {
    JobSpec *jobs;
    size_t n, cap;
} JobList;

void job_list_free(JobList *l);
/* Append a copy of j. 0 or -ENOMEM. */
int job_list_push(JobList *l, const JobSpec *j);
/* Append j itself: the list takes its strings and j is left freshly initialised.
 * 0 or -ENOMEM (j untouched). */
int job_list_take(JobList *l, JobSpec *j);

/* Load jobs: YAML or JSON (a mapping = one job, a sequence = several; several YAML
 * documents add up), or CSV (detected by a .csv name or a header line naming the job
 * columns). *ret is overwritten on success: pass an empty list. Job names are unique
 * within one file. */
int spec_load_jobs(const char *path, JobList *ret, Buf *err);
/* The same over a file's text: CSV or YAML/JSON by its content (name as above). */
int spec_parse_jobs(const char *text, size_t len, const char *name, JobList *ret, Buf *err);
int spec_parse_jobs_yaml(const char *text, size_t len, const char *name, JobList *ret, Buf *err);
/* The same for outside input (a request body), bounded so that reading it costs about a
 * tenth of a second at most: libfyaml looks ahead through whole flow collections, so a
 * body's size is bounded (SPEC_BODY_YAML_BYTES: -EFBIG, reported), and so are its
 * events plus the nodes aliases add (SPEC_BODY_YAML_WORK: -EINVAL). JSON has neither
 * bound. */
#define SPEC_BODY_YAML_BYTES (64u << 10)
#define SPEC_BODY_YAML_WORK  40000
int spec_parse_jobs_yaml_body(const char *text, size_t len, const char *name, JobList *ret,
                              Buf *err);
/* JSON alone (jansson: linear in the text, duplicate keys refused), with the same fields,
 * checks and messages as YAML. -EBADMSG (reported) when the text is not JSON at all. */
int spec_parse_jobs_json(const char *text, size_t len, const char *name, JobList *ret, Buf *err);
int spec_parse_jobs_csv(const char *text, size_t len, const char *name, JobList *ret, Buf *err);

/* What a file looks like, for `gpuorch validate`: a cluster or jobs. A CSV (a .csv name
 * or a first line of comma-separated names) is a cluster when its header has sn and
 * model, else a job table (for plan and sim: it has no commands, and the server takes
 * YAML or JSON); YAML or JSON is a cluster when it is a mapping with pools. A file that
 * does not parse is still classed, so that its reader can report the errors. Empty:
 * unknown. */
typedef enum SpecKind { SPEC_UNKNOWN, SPEC_CLUSTER, SPEC_JOBS, SPEC_JOBS_CSV } SpecKind;
SpecKind spec_sniff(const char *path, const char *text, size_t len);
