/* afile.h: the agent's durable little files: a whole file replaced atomically (write a
 * temporary beside it, fsync, rename), so a crash leaves the old or the new version and
 * never half of one; and directories made with their parents. */
#pragma once

#include <stddef.h>

/* Created 0600: the worker table holds each job's env, which may carry secrets.
 * 0 or a negative errno. */
int afile_write_atomic(const char *path, const char *data, size_t len);
/* mkdir -p with mode 0755. 0 or a negative errno. */
int afile_mkdir_p(const char *path);
