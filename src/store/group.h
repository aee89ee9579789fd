/* group.h: the group commit both back ends share (internal to src/store). Each writer
 * queues its part and waits; whichever waiting writer finds no batch running takes
 * every part queued so far and runs them as one batch (one transaction, one sync);
 * the others wait for the batch that carries theirs. While one batch syncs the next
 * one gathers, so many small concurrent writes share a commit. */
#pragma once

#include <pthread.h>
#include <stdbool.h>

/* A writer's place in the queue: the first member of a back end's pending part. */
typedef struct GroupPart {
    struct GroupPart *next;
    bool done; /* its batch ran: the owner may return (and its part go out of scope) */
} GroupPart;

typedef struct GroupCommit {
    pthread_mutex_t lock; /* the queue and `running`; a back end may guard more with it */
    pthread_cond_t cond;  /* a batch ended, or the writer was given back */
    GroupPart *head, *tail;
    bool running; /* a batch runs, or a writer holds the connection otherwise */
} GroupCommit;

void group_init(GroupCommit *g);
void group_destroy(GroupCommit *g);

/* Queue me and return once a batch that carried it ran: run(ctx, batch), called by one
 * of the waiting writers with the lock released, gets the parts in queue order. */
void group_commit(GroupCommit *g, GroupPart *me, void (*run)(void *ctx, GroupPart *batch),
                  void *ctx);

/* Hold the writing connection for something that is not a batch, as a batch does. */
void group_take(GroupCommit *g);
void group_give(GroupCommit *g);
