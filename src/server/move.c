/* move.c: a model server the core moves off a nearly empty partitioned GPU
 * (core/consolidate.h), make-before-break. The move takes the job's next run number: the
 * replacement is worker 0 of that run on the new allocation (sj.pl), listed to its node's
 * agent beside the old worker, which keeps serving from sj.moved_from. When the
 * replacement runs it becomes the job's worker and the old one is no longer listed, so
 * its agent stops it; what it held is let go (and charged) once it is reported gone. A
 * replacement that cannot start is abandoned: the job keeps its old worker and
 * allocation, is not moved again for ten minutes, and the run number stays used, so no
 * agent ever sees a key twice.
 *
 * The store holds the replacement's allocation and run from the start of the move, so a
 * server restarted during one reloads the job as its replacement (which its agent has
 * under that key); the old worker, no longer listed, is stopped, but its GPUs count as
 * free at once, not when it has gone. */
#include "server/placement_json.h"
#include "server/state.h"
#include "util/log.h"

#include <stdio.h>
#include <stdlib.h>

/* After a replacement fails, the server stays where it is this long: a command that
 * cannot start twice would otherwise be tried every cycle. */
#define MOVE_BACKOFF_MS (10 * 60 * 1000)

/* What a restarted server reloads the job on. */
static void set_placement_json(Server *s, ServerJob *j)
{
    Buf pj = {0};
    placement_to_json(s->c, &j->sj.pl, &pj);
    free(j->st.placement_json);
    j->st.placement_json = buf_steal(&pj);
}

int server_job_move(Server *s, ServerJob *j, int64_t now_ms, Changes *ch)
{
    const char *from = s->c->nodes[j->sj.moved_from.workers[0].node].name;
    const char *to = s->c->nodes[j->sj.pl.workers[0].node].name;
    j->st.run++;
    j->shadow = (WorkerRun){.node = j->sj.pl.workers[0].node,
                            .run = j->st.run,
                            .state = WORKER_ASSIGNED,
                            .start_ms = -1};
    j->moved_from_ms = j->pl_from_ms;
    j->pl_from_ms = now_ms;
    j->move = MOVE_STARTING;
    server_save_mig(s, &j->sj.pl, ch);
    set_placement_json(s, j);
    char detail[160];
    snprintf(detail, sizeof(detail), "from %s to %s, to empty a GPU for whole-GPU work", from, to);
    changes_event(ch, j, now_ms, "move", detail);
    /* each run has its start event, with its nodes (api_agent.c reads them back) */
    snprintf(detail, sizeof(detail), "on %s", to);
    changes_event(ch, j, now_ms, "start", detail);
    changes_job(ch, j);
    return 0;
}

/* The replacement runs: it is the job's worker now, and the old one retires. */
static void commit(Server *s, ServerJob *j, int64_t now_ms, Changes *ch)
{
    WorkerRun old = j->workers[0];
    j->workers[0] = j->shadow;
    j->shadow = old;
    j->move = MOVE_RETIRING;
    j->st.start_ms = j->workers[0].start_ms > 0 ? j->workers[0].start_ms : now_ms;
    changes_event(ch, j, now_ms, "moved", "the replacement serves; the old worker stops");
    changes_job(ch, j);
}

/* The old worker is gone: what it held goes. */
static void retire(Server *s, ServerJob *j, int64_t now_ms, Changes *ch)
{
    server_charge(s, j, &j->sj.moved_from, j->moved_from_ms, now_ms, ch);
    sched_move_done(&s->sched, &j->sj);
    j->move = MOVE_NONE;
    s->dirty = true;
    changes_job(ch, j);
}

/* The replacement could not start: the old worker goes on where it was. */
static void abandon(Server *s, ServerJob *j, int64_t now_ms, Changes *ch)
{
    server_charge(s, j, &j->sj.pl, j->pl_from_ms, now_ms, ch);
    sched_move_abort(&s->sched, &j->sj);
    set_placement_json(s, j);
    j->pl_from_ms = j->moved_from_ms;
    j->move = MOVE_NONE;
    j->no_move_until_ms = now_ms + MOVE_BACKOFF_MS;
    s->dirty = true;
    log_error("event=move_abandoned job=%lld node=%s", (long long)j->st.id,
              s->c->nodes[j->shadow.node].name);
    changes_event(ch, j, now_ms, "move-failed",
                  j->shadow.state == WORKER_GONE ? "its replacement's node was lost"
                                                 : "its replacement could not start");
    changes_job(ch, j);
}

void server_move_progress(Server *s, ServerJob *j, int64_t now_ms, Changes *ch)
{
    if (j->move == MOVE_STARTING) {
        if (j->shadow.state == WORKER_RUNNING && !server_worker_ended(&j->workers[0]))
            commit(s, j, now_ms, ch);
        else if (server_worker_ended(&j->shadow))
            abandon(s, j, now_ms, ch);
    }
    if (j->move == MOVE_RETIRING && server_worker_ended(&j->shadow))
        retire(s, j, now_ms, ch);
}
