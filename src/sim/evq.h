/* evq.h: the simulator's event queue: a binary min-heap keyed by (time, kind, seq).
 * The sequence number makes the order of simultaneous events total and independent
 * of heap internals, so a run is byte-for-byte repeatable. */
#pragma once

#include <stddef.h>
#include <stdint.h>

typedef enum EventKind {
    EV_FINISH,       /* a job's work is done (frees capacity first) */
    EV_STOPPED,      /* a preempted job's grace is over: its GPUs are free */
    EV_OOM,          /* a job ran out of GPU memory */
    EV_CHECKPOINT,   /* a job starts a periodic checkpoint */
    EV_CKPT_DONE,    /* it finished the checkpoint */
    EV_RECONFIGURED, /* a MIG reconfiguration finished */
    EV_MOVED,        /* a moved server's replacement is ready (`epoch`: its move number) */
    EV_ARRIVAL,      /* a job is submitted */
    EV_SCHEDULE,     /* a wake-up for the scheduler (Tiresias demotion, a reservation) */
    EV_SAMPLE,       /* a metrics sample */
    /* node events (their own queue; `job` is the node, `epoch` the node's) */
    EV_NODE_UP,   /* a starting node is up */
    EV_NOTICE,    /* a spot interruption notice */
    EV_NODE_GONE, /* the notice is over: the node is taken away */
} EventKind;

typedef struct Event {
    int64_t t_ms;
    uint32_t kind;  /* EventKind; earlier kinds first at equal times */
    uint32_t job;   /* job index, when it concerns one */
    uint64_t seq;   /* insertion order */
    uint64_t epoch; /* the job's run number when posted, to drop stale events */
} Event;

typedef struct EventQueue {
    Event *h;
    size_t n, cap;
    uint64_t next_seq;
} EventQueue;

void evq_init(EventQueue *q);
void evq_free(EventQueue *q);
int evq_push(EventQueue *q, int64_t t_ms, EventKind kind, uint32_t job, uint64_t epoch);
/* The earliest event; 0 when empty. */
int evq_pop(EventQueue *q, Event *ret);
const Event *evq_peek(const EventQueue *q);
