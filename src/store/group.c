/* group.c: the group commit's queue (group.h). */
#include "store/group.h"

#include <stddef.h>

void group_init(GroupCommit *g)
{
    pthread_mutex_init(&g->lock, NULL);
    pthread_cond_init(&g->cond, NULL);
    g->head = g->tail = NULL;
    g->running = false;
}

void group_destroy(GroupCommit *g)
{
    pthread_mutex_destroy(&g->lock);
    pthread_cond_destroy(&g->cond);
}

void group_commit(GroupCommit *g, GroupPart *me, void (*run)(void *ctx, GroupPart *batch),
                  void *ctx)
{
    me->next = NULL;
    me->done = false;
    pthread_mutex_lock(&g->lock);
    if (g->tail)
        g->tail->next = me;
    else
        g->head = me;
    g->tail = me;
    while (!me->done) {
        if (g->running) {
            pthread_cond_wait(&g->cond, &g->lock);
            continue;
        }
        g->running = true;
        GroupPart *batch = g->head;
        g->head = g->tail = NULL;
        pthread_mutex_unlock(&g->lock);
        run(ctx, batch);
        pthread_mutex_lock(&g->lock);
        /* read next before done: a part's owner may return as soon as it sees done */
        for (GroupPart *p = batch, *next; p; p = next) {
            next = p->next;
            p->done = true;
        }
        g->running = false;
        pthread_cond_broadcast(&g->cond);
    }
    pthread_mutex_unlock(&g->lock);
}

void group_take(GroupCommit *g)
{
    pthread_mutex_lock(&g->lock);
    while (g->running)
        pthread_cond_wait(&g->cond, &g->lock);
    g->running = true;
    pthread_mutex_unlock(&g->lock);
}

void group_give(GroupCommit *g)
{
    pthread_mutex_lock(&g->lock);
    g->running = false;
    pthread_cond_broadcast(&g->cond);
    pthread_mutex_unlock(&g->lock);
}
