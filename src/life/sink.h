/* sink.h: the lifecycle's calls into its driver's sink (life.h), for the files of src/life. */
#pragma once

#include "life/life.h"
#include "util/buf.h"

#include <errno.h>

static inline int life_changed(Life *l, LifeJob *j)
{
    return l->sink.changed ? l->sink.changed(l->sink.arg, j) : 0;
}

static inline int life_event(Life *l, LifeJob *j, int64_t t_ms, const char *type,
                             const char *detail)
{
    return l->sink.event ? l->sink.event(l->sink.arg, j, t_ms, type, detail) : 0;
}

/* An event whose detail was built in b (which is freed): -ENOMEM when it could not be. */
static inline int life_event_buf(Life *l, LifeJob *j, int64_t t_ms, const char *type, Buf *b)
{
    int err = b->oom ? -ENOMEM : life_event(l, j, t_ms, type, buf_str(b));
    buf_free(b);
    return err;
}
