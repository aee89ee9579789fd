/* log.c: stderr logging for the daemons and the CLI. */
#include "util/log.h"

#include <stdarg.h>
#include <stdio.h>

__attribute__((format(printf, 2, 0))) static void vlog(const char *level, const char *fmt,
                                                       va_list ap)
{
    fprintf(stderr, "level=%s ", level);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

void log_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog("error", fmt, ap);
    va_end(ap);
}

void log_info(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog("info", fmt, ap);
    va_end(ap);
}
