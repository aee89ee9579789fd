/* worker_fixture.h: what the tests of real worker processes (test_agent_launch.c,
 * test_agent_ckpt.c) share: a scratch folder made before the tests and removed after them,
 * paths inside it, and a sleep. The folder is the group's (cmocka's group setup and
 * teardown). Include after cmocka.h. */
#pragma once

#include "util/buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static char dir[] = "/tmp/gpuorch-worker-XXXXXX";

static inline int setup(void **state)
{
    (void)state;
    return mkdtemp(dir) ? 0 : -1;
}

static inline int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static inline void sleep_ms(int ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static inline char *path_in(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline char *path_in(const char *fmt, ...)
{
    Buf b = {0};
    buf_printf(&b, "%s/", dir);
    va_list ap;
    va_start(ap, fmt);
    buf_vprintf(&b, fmt, ap);
    va_end(ap);
    return buf_steal(&b);
}
