/* engine_int.h: what the engine's files share: the pods and the jobs they form, the
 * nodes as their Node objects say, and the queue of API writes. All of it is guarded by
 * the server's lock (s->lock), except the write queue, which has its own. */
#pragma once

#include "kube/engine.h"

#include <pthread.h>
#include <stdint.h>

typedef struct KGroup KGroup;

/* A pod that names gpuorch as its scheduler. */
typedef struct KPod {
    char *uid; /* the tree key */
    KubePod p;
    KGroup *g;
    int32_t rank;  /* its worker in the group's job's run `run`, -1: none */
    uint32_t run;  /* that run */
    bool binding;  /* a bind is queued or under way */
    bool bound;    /* bound by us (or found bound) */
    bool evicting; /* an eviction or deletion is queued or was made */
    bool writing;  /* its condition is being written */
    char *reason;  /* the reason last written to its PodScheduled condition, or NULL */
    char *ckpt;    /* the checkpoint it reported (annotation gpuorch.io/checkpoint) */
    bool seen;     /* in the list under way (a relist drops the pods it does not see) */
    char *resume;  /* its gpuorch.io/resume-from annotation, or NULL */
    /* bound while no job of ours claims it (an earlier leader with a store of its own
     * bound it): what it holds, taken out of its node until it ends (pods.c) */
    bool held;
    bool held_short; /* its node lacked free what it asks: said once in the log */
    WorkerAlloc hold;
} KPod;

/* A server job not over, by name: what a restarted engine finds its groups' jobs by. */
typedef struct KJobName {
    const char *name; /* the server's string */
    int64_t id;
} KJobName;
int kjob_name_cmp(const void *a, const void *b);

typedef enum KGroupKind { KG_POD, KG_JOB, KG_POD_GROUP } KGroupKind;

/* The pods that run as one gpuorch job: a PodGroup's members, a Job's pods, one pod. */
struct KGroup {
    char *key; /* "<ns>/<pod.group>" ("team/pg/train"): also the server job's name */
    char *ns;
    char *name; /* the PodGroup's, the Job's or the pod's name */
    uint8_t kind;
    KPod **pods;
    size_t n_pods, cap;
    int64_t job;         /* the server job running it, 0: none yet */
    uint32_t min_member; /* PodGroup: minMember (0: the PodGroup is not known yet) */
    bool submitting;     /* in the actuator's submission under way */
    uint32_t mig_run;    /* the job's run whose MIG layouts were asked for */
    uint32_t bound_run;  /* the job's run whose workers all have their pods bound (or being
                          * bound): the actuator leaves it to the pods' phases */
    bool refused;        /* the server refused its pods (why says why): not submitted
                          * again until a pod joins it */
    char *why;           /* why it is not submitted (its pods' condition), or NULL */
};

/* A Node object of a GPU node, beside the cluster's node of the same index. */
typedef struct KNode {
    KubeNode n;
    bool known;           /* its Node object exists */
    char *mig_want;       /* the mig.config we set and wait for, NULL: none */
    uint32_t mig_seq;     /* the last layout number written for it */
    bool mig_writing;     /* the config and label are being written */
    bool mig_failed;      /* the MIG manager failed our last change */
    int64_t mig_since_ms; /* monotonic: when mig_want was asked for */
} KNode;

typedef enum KActKind {
    KA_BIND,
    KA_EVICT,
    KA_DELETE,
    KA_CONDITION, /* PodScheduled=False with the reason, and a FailedScheduling event */
    KA_RESUME,    /* annotate the pod with the checkpoint it resumes from, then bind */
    KA_MIG,       /* write a node's layout into the mig-parted config, set its label */
} KActKind;

/* One API write. Strings owned. */
typedef struct KAct {
    uint8_t kind;
    char *ns, *pod, *uid; /* pod actions */
    char *node;           /* KA_BIND, KA_MIG */
    char *text;           /* KA_CONDITION: the reason; KA_RESUME: the checkpoint; KA_MIG: the
                           * config name */
    char *body;           /* KA_MIG: the layout, as the config entry's YAML */
    int64_t grace_s;      /* KA_EVICT */
    bool relabel;         /* KA_MIG: the node's mig.config changes (its state is reset) */
} KAct;

typedef struct KActQueue {
    KAct *a;
    size_t head, len, cap; /* a[head..len) waits */
} KActQueue;

struct KubeEngine {
    KubeOptions o;
    KubeConfig cfg;
    KubeApi *api; /* the main thread's (start-up, the lease) */
    Server *s;
    volatile bool stop;

    /* everything below: s->lock */
    void *pods_by_uid;   /* tsearch tree of KPod */
    void *groups_by_key; /* tsearch tree of KGroup */
    void *pod_groups;    /* tsearch tree of KPodGroup: minMember of the PodGroups seen */
    void *job_names;     /* tsearch tree of KJobName, built at start */
    void *foreign;       /* tsearch tree of what other schedulers' pods hold (foreign.c) */
    KNode *nodes;        /* per cluster node */
    size_t n_nodes;
    bool synced;            /* the first lists are in: nodes may take work */
    int64_t joined_mono_ms; /* when a GPU node unknown at start appeared, 0: none */
    bool maybe_ready;       /* a group without a job changed: it may be ready to submit */
    bool work;              /* something for the actuator */

    bool cycled; /* a scheduling cycle ran since the reasons were last written */

    /* the write queues: fast (binds, evictions, MIG) is served before slow (reasons) */
    pthread_mutex_t qlock;
    pthread_cond_t qwake;
    KActQueue fast, slow;
    pthread_mutex_t mig_lock; /* one writer of the mig-parted config at a time */

    pthread_cond_t act_wake;                            /* with s->lock: the actuator waits on it */
    struct Watch *w_pods, *w_nodes, *w_pgs, *w_foreign; /* engine.c; w_pgs NULL: no CRD */
    char *nodes_rv;       /* the version of the node list the cluster was built from */
    char lease_seen[512]; /* lease.c: the Lease record last seen, and since when */
    int64_t lease_seen_ms;
    pthread_t watch_pods, watch_nodes, watch_pgs, watch_foreign, actuator, lease;
    pthread_t *writer;
    size_t n_writers;
    bool started, lease_started;

    /* counters for the log and the benchmark */
    uint64_t binds, bind_errors, evictions, conditions, submitted, passes;
    int64_t pass_ns; /* the actuator's passes, and the CPU they took */
};

/* pods.c: the pods' and PodGroups' events, and what they mean for the server's jobs. */
KPod *kpod_find(KubeEngine *e, const char *uid);
/* A pod of an event: 1 read into ret, 0 not a pod (skipped), -ENOMEM. */
int kpod_read(KubeEngine *e, json_t *obj, KubePod *ret);
int kpod_event(KubeEngine *e, const char *type, json_t *obj);
int kpodgroup_event(KubeEngine *e, const char *type, json_t *obj);
void kpods_relist_begin(KubeEngine *e);   /* a relist of every pod begins */
void kpods_relist_end(KubeEngine *e);     /* it is over: pods it did not list are gone */
size_t kgroup_free_pods(const KGroup *g); /* live pods not bound nor given a rank */
uint32_t kgroup_min_member(KubeEngine *e, KGroup *g); /* 0: its PodGroup is not known */
void kgroups_free(KubeEngine *e);
KGroup *kgroup_of_job(KubeEngine *e, int64_t job);
void kgroup_set_job(KubeEngine *e, KGroup *g, int64_t job); /* links both ways */

/* nodes_watch.c: the Node objects' events (readiness, cordons, MIG state). */
int knode_event(KubeEngine *e, const char *type, json_t *obj);
int knode_find(KubeEngine *e, const char *name);
void knodes_open(KubeEngine *e); /* after the first lists: each node's readiness */
/* The node's MIG change failed (why: how): it takes no work until one succeeds. */
void knode_mig_failed(KubeEngine *e, uint32_t idx, const char *why);
void knodes_check_mig(KubeEngine *e, int64_t mono_ms); /* fail changes past the timeout */

/* foreign.c: other schedulers' pods on our nodes, counted as used. khold_take: what a
 * pod that is not ours (another scheduler's, or one an earlier leader bound) holds on
 * the node, taken from its free capacity: whole GPUs, a MIG instance of its profile,
 * CPU and memory (the first free GPUs stand for the ones the device plugin chose, which
 * keeps the node's counts right; a GPU-memory or MPS pod's share is not in its spec).
 * False when the node does not have them free. */
bool khold_take(const Cluster *c, uint32_t node, const JobSpec *s, WorkerAlloc *ret);
int kforeign_event(KubeEngine *e, const char *type, json_t *obj);
void kforeign_relist_begin(KubeEngine *e);
void kforeign_relist_end(KubeEngine *e);
void kforeign_free(KubeEngine *e);

/* act.c: from the server's state to API writes. */
void *kact_main(void *arg);
void *kwriter_main(void *arg);
void kact_kick(KubeEngine *e);
void kact_free(KAct *a);

/* lease.c */
int klease_try(KubeEngine *e, KubeApi *a, bool *ret_leader, Buf *err);
void *klease_main(void *arg);

/* migcfg.c: a node's layouts as a mig-parted config entry. */
void kmig_entry(const Cluster *c, uint32_t node, Buf *ret_yaml);
void kmig_name(const char *entry, Buf *ret); /* "gpuorch-<hash of the entry>" */
int kmig_write(KubeEngine *e, KubeApi *a, const char *name, const char *node, const char *entry,
               Buf *err);
