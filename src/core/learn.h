/* learn.h: what the scheduler learns from running work: the peak GPU memory each
 * workload class reached. A class is the job's explicit `class`, or its team and its name
 * without a trailing number ("search/llama-serve" for llama-serve-17). Sizing the next
 * job of a class from its learned peak is what keeps an out-of-memory failure from
 * happening twice. Pure data: the simulator and the agents report, the core reads. */
#pragma once

#include "core/job.h"

#include <stddef.h>
#include <stdint.h>

typedef struct LearnEntry {
    char *cls;
    uint64_t peak_mib;
    unsigned ooms;
} LearnEntry;

typedef struct Learn {
    LearnEntry *e;
    size_t n, cap;
} Learn;

void learn_free(Learn *l);
/* The class of a job, written into out (at most outlen bytes). */
void learn_class_of(const JobSpec *j, char *out, size_t outlen);
/* Record a peak seen for a class (keeps the largest). 0 or -ENOMEM. */
int learn_record(Learn *l, const char *cls, uint64_t peak_mib);
/* Record an out-of-memory failure of a class in a grant of granted_mib: the class needs
 * a fifth more than the peak it reached (at least the grant it overran), as Kubernetes'
 * vertical pod autoscaler raises memory by a fifth after an OOM kill (its
 * OOMBumpUpRatio): one job overran, so the class's peaks vary, and the next job is not
 * sized to the one peak seen. (A fifth above the grant alone is not enough where grants
 * are exact, as MPS shares of GPUs without MIG are: a peak a tenth above the first
 * overran again.) Returns
 * how many OOMs the class had before this one, or -ENOMEM. */
int learn_oom(Learn *l, const char *cls, uint64_t peak_mib, uint64_t granted_mib);
/* The learned peak of a class, 0 when nothing is known. */
uint64_t learn_peak(const Learn *l, const char *cls);
/* A class's entry, NULL when nothing is known of it. */
const LearnEntry *learn_find(const Learn *l, const char *cls);
/* Put back what a class had learned (a restarted server, from its store). 0 or -ENOMEM. */
int learn_restore(Learn *l, const char *cls, uint64_t peak_mib, unsigned ooms);

/* The GPU memory to ask for a job of the class: what it asks, raised to the learned
 * peak. 0 when the job does not ask by memory and nothing is learned. */
uint64_t learn_memory_for(const Learn *l, const JobSpec *j);

/* The GPU memory one worker was granted: its whole GPUs, MIG instances and shares. */
uint64_t learn_granted_mib(const Cluster *c, const WorkerAlloc *wa);

/* Size req, built from spec, from what the class is known to need: a slice, share or
 * fraction grows to the smallest that holds the learned peak, whole GPUs keep to the
 * models that hold it. The simulator and the server both size a job this way each time
 * it joins the queue. 0 when nothing changed, 1 when req changed (its shape is then
 * -1), 2 when no GPU of the cluster holds the peak, -ENOMEM. */
int learn_size_request(const Learn *l, const Cluster *c, const JobSpec *spec, Request *req);
