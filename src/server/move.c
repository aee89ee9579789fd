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
 * The steps are the shared lifecycle's (src/life/move.c); this file keeps what only the
 * server has: the charges of both allocations, the placement a restart reloads, and the
 * backoff after a replacement fails.
 *
 * The store holds the replacement's allocation and run from the start of the move, so a
 * server restarted during one reloads the job as its replacement (which its agent has
 * under that key); the old worker, no longer listed, is stopped, but its GPUs count as
 * free at once, not when it has gone. */
#include "server/measured.h"
#include "server/placement_json.h"
#include "server/state.h"
#include "util/log.h"

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
    int r = life_move_start(server_life(s, ch), &j->life, now_ms);
    server_life_done(s, j, r, "move");
    if (r)
        return r;
    j->moved_from_ms = j->pl_from_ms;
    j->pl_from_ms = now_ms;
    server_save_mig(s, &j->sj.pl, ch);
    set_placement_json(s, j);
    return 0;
}

int server_job_moved(Server *s, ServerJob *j, bool done, int64_t now_ms, Changes *ch)
{
    s->dirty = true;
    if (done) {
        server_charge(s, j, &j->sj.moved_from, j->moved_from_ms, now_ms, ch);
        return 0;
    }
    server_charge(s, j, &j->sj.pl, j->pl_from_ms, now_ms, ch);
    measured_reset(j);
    j->pl_from_ms = j->moved_from_ms;
    j->no_move_until_ms = now_ms + MOVE_BACKOFF_MS;
    log_error("event=move_abandoned job=%lld node=%s", (long long)j->st.id,
              s->c->nodes[j->life.shadow.node].name);
    return 0;
}

void server_move_progress(Server *s, ServerJob *j, int64_t now_ms, Changes *ch)
{
    bool starting = j->life.move == LIFE_MOVE_STARTING;
    int r = life_move_progress(server_life(s, ch), &j->life, now_ms);
    server_life_done(s, j, r, "move_progress");
    /* abandoned (a replacement that starts cannot retire in the same step): the old
     * allocation, which the core gave back to sj.pl, is the one to reload */
    if (!r && starting && j->life.move == LIFE_MOVE_NONE)
        set_placement_json(s, j);
}
