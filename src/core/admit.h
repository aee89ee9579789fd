/* admit.h: whether a job may join this cluster's queue at all. One check, shared by the
 * server's submission (which adds who may ask for what) and `gpuorch validate`, so that
 * both say the same sentence: a field the running system needs is missing (400), the
 * job asks what its team may not have (403), or no state of the cluster could ever run
 * it (422): its GPU models, tiers, fabric, MIG permission, per-node GPUs, CPU and
 * memory, the capacity of every node it may use together, its topology scope, its
 * team's burst limit and what its workload class learned. A job that passes may still
 * wait; one that fails would wait for ever.
 *
 * The capacity counts are of empty nodes, every node of an autoscaled pool included
 * (the autoscaler may start them): a job is refused only when even that cannot hold
 * it. */
#pragma once

#include "core/cluster.h"
#include "core/job.h"
#include "core/learn.h"
#include "util/buf.h"

typedef enum AdmitVerdict {
    ADMIT_OK,
    ADMIT_BAD,       /* a field is missing or does not fit the cluster's names (400) */
    ADMIT_FORBIDDEN, /* its team may not ask for it: a project or tier not its own (403) */
    ADMIT_NEVER,     /* no state of the cluster could ever run it (422) */
} AdmitVerdict;

/* Flags of admit_job. */
#define ADMIT_NEED_COMMAND 1u /* the running system starts it: it must have a command */

/* Check j against c (l, the learned classes, may be NULL). Returns an AdmitVerdict, or
 * -ENOMEM; a verdict other than ADMIT_OK writes why as one sentence naming the job and
 * the cluster, and what would let it in where something would. On ADMIT_OK, ret (when
 * not NULL) is the request sized as the queue will size it. */
int admit_job(const Cluster *c, const Learn *l, const JobSpec *j, unsigned flags, Request *ret,
              Buf *why);

/* GPU-equivalents (in GPU_UNITS) all workers of r would hold for its team's quotas: the
 * most over the models it may run on, as a MIG slice where nodes of the model run MIG
 * and as a share where they do not (the largest, to be safe with quotas). mig_models
 * and plain_models are the models some node runs with and without MIG
 * (admit_mode_models). */
double admit_quota_units(const Cluster *c, const Request *r, uint64_t mig_models,
                         uint64_t plain_models);
void admit_mode_models(const Cluster *c, uint64_t *ret_mig, uint64_t *ret_plain);
