/* move.c: a model server the core moves off a nearly empty partitioned GPU
 * (core/consolidate.h), make-before-break (life.h). The move takes the job's next run
 * number: the replacement is worker 0 of that run on the new allocation (sj->pl), beside
 * the old worker, which keeps serving from sj->moved_from. When the replacement runs it
 * becomes the job's worker and the old one is told to stop; what it held is let go once
 * it is gone. A replacement that cannot start is abandoned: the job keeps its old worker
 * and allocation (the driver decides when it may be moved again), and the run number
 * stays used, so no node ever sees a key twice. */
#include "life/life.h"
#include "life/sink.h"

#include "util/buf.h"

int life_move_start(Life *l, LifeJob *j, int64_t now_ms)
{
    const char *from = l->c->nodes[j->sj->moved_from.workers[0].node].name;
    const char *to = l->c->nodes[j->sj->pl.workers[0].node].name;
    j->run++;
    j->shadow = (LifeWorker){.node = j->sj->pl.workers[0].node,
                             .run = j->run,
                             .state = LIFE_WORKER_ASSIGNED,
                             .start_ms = -1};
    j->move = LIFE_MOVE_STARTING;
    int err = life_changed(l, j);
    if (err)
        return err;
    Buf detail = {0};
    buf_printf(&detail, "from %s to %s, to empty a GPU for whole-GPU work", from, to);
    if ((err = life_event_buf(l, j, now_ms, "move", &detail)))
        return err;
    /* each run has its start event, with its nodes (the server reads them back) */
    buf_printf(&detail, "on %s", to);
    return life_event_buf(l, j, now_ms, "start", &detail);
}

static int moved(Life *l, LifeJob *j, bool done, int64_t now_ms)
{
    return l->sink.moved ? l->sink.moved(l->sink.arg, j, done, now_ms) : 0;
}

/* The replacement runs: it is the job's worker now, and the old one retires. */
static int commit(Life *l, LifeJob *j, int64_t now_ms)
{
    LifeWorker old = j->workers[0];
    j->workers[0] = j->shadow;
    j->shadow = old;
    j->move = LIFE_MOVE_RETIRING;
    j->start_ms = j->workers[0].start_ms > 0 ? j->workers[0].start_ms : now_ms;
    int err = life_changed(l, j);
    return err ? err
               : life_event(l, j, now_ms, "moved", "the replacement serves; the old worker stops");
}

/* The old worker is gone: what it held goes. */
static int retire(Life *l, LifeJob *j, int64_t now_ms)
{
    int err = moved(l, j, true, now_ms);
    if (err)
        return err;
    sched_move_done(l->sched, j->sj);
    j->move = LIFE_MOVE_NONE;
    return life_changed(l, j);
}

/* The replacement could not start: the old worker goes on where it was. */
static int abandon(Life *l, LifeJob *j, int64_t now_ms)
{
    int err = moved(l, j, false, now_ms);
    if (err)
        return err;
    sched_move_abort(l->sched, j->sj);
    j->move = LIFE_MOVE_NONE;
    if ((err = life_changed(l, j)))
        return err;
    return life_event(l, j, now_ms, "move-failed",
                      j->shadow.state == LIFE_WORKER_GONE ? "its replacement's node was lost"
                                                          : "its replacement could not start");
}

int life_move_progress(Life *l, LifeJob *j, int64_t now_ms)
{
    int err = 0;
    if (j->move == LIFE_MOVE_STARTING) {
        if (j->shadow.state == LIFE_WORKER_RUNNING && j->n_workers &&
            !life_worker_ended(&j->workers[0]))
            err = commit(l, j, now_ms);
        else if (life_worker_ended(&j->shadow))
            err = abandon(l, j, now_ms);
    }
    if (!err && j->move == LIFE_MOVE_RETIRING && life_worker_ended(&j->shadow))
        err = retire(l, j, now_ms);
    return err;
}
