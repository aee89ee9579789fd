/* api_learned.c: what the workload classes learned (core/learn.h). GET /api/v1/learned
 * lists, to every role that reads, the GPU memory each class's next job asks at least
 * and how many out-of-memory failures taught it, so a team can see why its jobs ask
 * more than they wrote (in class order; ?team= keeps one team's). DELETE
 * /api/v1/learned/TEAM/NAME forgets what one class learned, for an admin or the lead of
 * TEAM: the store first, then memory, then the class's waiting jobs are sized again from
 * what they write. A class is keyed by its team (learn.h), so whoever resets it, only
 * that team's jobs change size. */
#include "server/api.h"

#include "util/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static int by_class(const void *a, const void *b)
{
    return strcmp((*(const LearnEntry *const *)a)->cls, (*(const LearnEntry *const *)b)->cls);
}

/* One class as the API shows it; call with s->lock held. NULL when out of memory. */
static json_t *entry_json(const Server *s, const char *cls, uint64_t peak_mib, unsigned ooms)
{
    char team[LEARN_CLASS_MAX];
    const char *name = cls;
    if (!learn_class_team(cls, team, sizeof(team), &name))
        team[0] = '\0';
    return json_pack("{ss ss ss sI si sb}", "class", cls, "team", team, "name", name,
                     "peak_memory_mib", (json_int_t)peak_mib, "ooms", (int)ooms, "fits",
                     learn_fits(s->c, peak_mib));
}

void api_learned(Server *s, const HttpRequest *rq, HttpResponse *rp)
{
    const char *team = http_query(rq, "team");
    server_lock(s);
    size_t n = s->learn.n;
    const LearnEntry **order = malloc((n ? n : 1) * sizeof(*order));
    json_t *list = json_array();
    bool oom = !order || !list;
    if (!oom) {
        size_t k = 0;
        for (size_t i = 0; i < n; i++)
            if (!team || learn_class_in_team(s->learn.e[i].cls, team))
                order[k++] = &s->learn.e[i];
        qsort(order, k, sizeof(*order), by_class);
        for (size_t i = 0; !oom && i < k; i++)
            oom = json_array_append_new(
                      list, entry_json(s, order[i]->cls, order[i]->peak_mib, order[i]->ooms)) < 0;
    }
    pthread_mutex_unlock(&s->lock);
    free(order);
    if (oom) {
        json_decref(list);
        http_reply_error(rp, 500, "out of memory");
        return;
    }
    http_reply_json(rp, 200, json_pack("{so}", "classes", list));
}

/* The class's waiting jobs ask what they write again (and what the class learns from
 * here on); each one whose request changed gets a "resized" event. Call with s->lock
 * held; the number resized, or a negative errno. */
static int resize_waiting(Server *s, const char *cls, const char *by, Changes *ch)
{
    int64_t now = server_now_ms();
    int resized = 0;
    ServerJob *j;
    for (int64_t pos = 0; (j = server_waiting_of_class(s, cls, &pos));) {
        sched_dequeue(&s->sched, &j->sj);
        s->order_stale = true;
        int r = server_job_size_afresh(s, j);
        if (r == 1) {
            char detail[LEARN_CLASS_MAX + 96];
            snprintf(detail, sizeof(detail),
                     "workload class %s was reset by %s: the job asks what it writes", cls, by);
            changes_event(ch, j, now, "resized", detail);
            resized++;
        }
        int e = sched_enqueue(&s->sched, &j->sj);
        /* a job the cluster can no longer run as written keeps its size (it failed
         * admission against this cluster only if the cluster file changed) */
        if (r == -ENOMEM || e < 0)
            return r == -ENOMEM ? r : e;
    }
    return resized;
}

void api_learned_reset(Server *s, const HttpRequest *rq, HttpResponse *rp)
{
    const char *cls = rq->params[0];
    char team[LEARN_CLASS_MAX];
    const char *name = NULL;
    if (!learn_class_team(cls, team, sizeof(team), &name) || !*name) {
        http_reply_error(rp, 404,
                         "no workload class '%s': a class is TEAM/NAME, as GET /api/v1/learned "
                         "lists it",
                         cls);
        return;
    }
    const Caller *who = &rq->who;
    if (who->role != ROLE_ADMIN && (who->role != ROLE_LEAD || strcmp(who->team, team))) {
        http_reply_error(rp, 403,
                         "only an admin or the lead of team '%s' may reset what its workload "
                         "class %s learned",
                         team, cls);
        return;
    }
    char by[96];
    snprintf(by, sizeof(by), "%s token %lld", role_name(who->role), (long long)who->token_id);
    server_lock(s);
    const LearnEntry *e = learn_find(&s->learn, cls);
    if (!e) {
        pthread_mutex_unlock(&s->lock);
        http_reply_error(rp, 404, "workload class %s has learned nothing", cls);
        return;
    }
    json_t *was = entry_json(s, cls, e->peak_mib, e->ooms);
    if (!was) {
        pthread_mutex_unlock(&s->lock);
        http_reply_error(rp, 500, "out of memory");
        return;
    }
    /* memory forgets and the store with it, in one write with the resized jobs: no one
     * is told of the reset before it is durable (a restart must not bring it back) */
    learn_forget(&s->learn, cls);
    Changes ch = {0};
    changes_forget(&ch, cls);
    int resized = resize_waiting(s, cls, by, &ch);
    int r = server_commit_released(s, &ch);
    changes_free(&ch);
    if (r < 0) {
        pthread_mutex_unlock(&s->lock);
        log_error("event=learned_reset_failed class=\"%s\" error=%d", cls, r);
        json_decref(was);
        http_reply_error(rp, 500, "the store failed; the class may not have been reset");
        return;
    }
    server_kick(s);
    pthread_mutex_unlock(&s->lock);
    log_info("event=learned_reset class=\"%s\" by=\"%s\" peak_mib=%lld ooms=%lld resized=%d", cls,
             by, (long long)json_integer_value(json_object_get(was, "peak_memory_mib")),
             (long long)json_integer_value(json_object_get(was, "ooms")), resized);
    if (resized < 0) {
        /* the reset is durable; the waiting jobs are sized from it at the latest on a
         * restart, as every queued job is */
        json_decref(was);
        http_reply_error(rp, 500, "the class was reset, but its waiting jobs were not resized");
        return;
    }
    json_object_set_new(was, "resized_jobs", json_integer(resized));
    http_reply_json(rp, 200, was);
}
