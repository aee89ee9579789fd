/* learn.h: what the scheduler learns from running work: the peak GPU memory each
 * workload class reached. Sizing the next job of a class from its learned peak is what
 * keeps an out-of-memory failure from happening twice. Pure data: the simulator and the
 * agents report, the core reads.
 *
 * A class belongs to a team. Its key is "TEAM/NAME": TEAM is always the job's own team
 * (the field the server checked against the submitter's token), never text from the job's
 * `class`, and NAME is the job's `class` or, without one, the job's name without a
 * trailing number ("search/llama-serve" for llama-serve-17). So whatever a job of team
 * search writes in `class` ("llama", "research/llama"), it reads and teaches only classes
 * under "search/": one team cannot size, fail or refuse another team's jobs. A `class`
 * that starts with the job's own team and a slash names the same class as the rest
 * ("search/llama" and "llama" are one class of team search), so a key copied from
 * `gpuorch learned` works in a job file. In TEAM, '%' and '/' are written %25 and %2F,
 * so the first '/' of a key always ends the team, whatever the teams are called. */
#pragma once

#include "core/job.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The size of the buffers keys are written into; a longer NAME is cut to fit. */
#define LEARN_CLASS_MAX 256

typedef struct LearnEntry {
    char *cls; /* the key, "TEAM/NAME" */
    uint64_t peak_mib;
    unsigned ooms;
} LearnEntry;

typedef struct Learn {
    LearnEntry *e;
    size_t n, cap;
} Learn;

void learn_free(Learn *l);
/* The key of a job's class, written into out (at most outlen bytes, NAME cut to fit,
 * before a UTF-8 character, never inside one).
 * The team is never cut: when it does not fit, out is "" and false is returned, and the
 * job learns nothing (learn_record and learn_oom refuse ""). */
bool learn_class_of(const JobSpec *j, char *out, size_t outlen);
/* The team a key belongs to, decoded, into out (at most outlen bytes); false when it
 * does not fit or key has no '/'. *ret_name (when given) points at NAME inside key. */
bool learn_class_team(const char *key, char *out, size_t outlen, const char **ret_name);
/* Does the key belong to team (the job's team as written; NULL: no team)? */
bool learn_class_in_team(const char *key, const char *team);
/* Record a peak seen for a class (keeps the largest). 0, -EINVAL for "", or -ENOMEM. */
int learn_record(Learn *l, const char *cls, uint64_t peak_mib);
/* Record an out-of-memory failure of a class in a grant of granted_mib: the class needs
 * a fifth more than the peak it reached (at least the grant it overran), as Kubernetes'
 * vertical pod autoscaler raises memory by a fifth after an OOM kill (its
 * OOMBumpUpRatio): one job overran, so the class's peaks vary, and the next job is not
 * sized to the one peak seen. (A fifth above the grant alone is not enough where grants
 * are exact, as MPS shares of GPUs without MIG are: a peak a tenth above the first
 * overran again.) Returns
 * how many OOMs the class had before this one, -EINVAL for "", or -ENOMEM. */
int learn_oom(Learn *l, const char *cls, uint64_t peak_mib, uint64_t granted_mib);
/* Forget what a class learned (an admin's reset): its next job asks what it writes.
 * 0, or -ENOENT when nothing was known of it. */
int learn_forget(Learn *l, const char *cls);
/* The learned peak of a class, 0 when nothing is known. */
uint64_t learn_peak(const Learn *l, const char *cls);
/* A class's entry, NULL when nothing is known of it. */
const LearnEntry *learn_find(const Learn *l, const char *cls);
/* Put back what a class had learned (a restarted server, from its store). 0 or -ENOMEM. */
int learn_restore(Learn *l, const char *cls, uint64_t peak_mib, unsigned ooms);

/* The GPU memory to ask for a job of the class: what it asks, raised to the learned
 * peak. 0 when the job does not ask by memory and nothing is learned. */
uint64_t learn_memory_for(const Learn *l, const JobSpec *j);

/* Does some GPU model of the cluster have mib of memory? A learned peak that none has
 * makes the class's jobs unschedulable (learn_size_request returns 2). */
bool learn_fits(const Cluster *c, uint64_t mib);

/* The GPU memory one worker was granted: its whole GPUs, MIG instances and shares. */
uint64_t learn_granted_mib(const Cluster *c, const WorkerAlloc *wa);
/* What a class learns is per GPU (per whole GPU, MIG instance or share), as
 * learn_size_request sizes one: mib, a worker's total over its grants (its peak, or
 * learn_granted_mib), split evenly over them, rounded up, and never more than one GPU
 * of the worker's node has (no process holds more; a peak reported above it is
 * wrong). A worker of two whole GPUs that ran out of memory in 2 x 40,960 MiB needs a
 * fifth above 40,960 per GPU, not above 81,920, which no GPU has. So one run teaches
 * its class at most a fifth above the memory of the GPUs it ran on. */
uint64_t learn_per_gpu(const Cluster *c, const WorkerAlloc *wa, uint64_t mib);

/* Size req, built from spec, from what the class is known to need: a slice, share or
 * fraction grows to the smallest that holds the learned peak, whole GPUs keep to the
 * models that hold it. The simulator and the server both size a job this way each time
 * it joins the queue. 0 when nothing changed, 1 when req changed (its shape is then
 * -1), 2 when no GPU of the cluster holds the peak, -ENOMEM. */
int learn_size_request(const Learn *l, const Cluster *c, const JobSpec *spec, Request *req);
