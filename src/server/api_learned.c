/* api_learned.c: GET /api/v1/learned: the GPU memory the server has learned per workload
 * class from its runs (core/learn.h), so a team can see why its jobs ask more than they
 * wrote: the peak the class's next job asks at least, and how many out-of-memory failures
 * taught it. In class order, as the store keeps them. */
#include "server/api.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static int by_class(const void *a, const void *b)
{
    return strcmp((*(const LearnEntry *const *)a)->cls, (*(const LearnEntry *const *)b)->cls);
}

void api_learned(Server *s, const HttpRequest *rq, HttpResponse *rp)
{
    (void)rq;
    pthread_mutex_lock(&s->lock);
    size_t n = s->learn.n;
    const LearnEntry **order = malloc((n ? n : 1) * sizeof(*order));
    json_t *list = json_array();
    if (order && list) {
        for (size_t i = 0; i < n; i++)
            order[i] = &s->learn.e[i];
        qsort(order, n, sizeof(*order), by_class);
        for (size_t i = 0; i < n; i++)
            json_array_append_new(list, json_pack("{ss sI si}", "class", order[i]->cls,
                                                  "peak_memory_mib", (json_int_t)order[i]->peak_mib,
                                                  "ooms", (int)order[i]->ooms));
    }
    pthread_mutex_unlock(&s->lock);
    free(order);
    if (!order || !list) {
        json_decref(list);
        http_reply_error(rp, 500, "out of memory");
        return;
    }
    http_reply_json(rp, 200, json_pack("{so}", "classes", list));
}
