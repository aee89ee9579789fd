/* log.h: one line per event, key=value, to stderr. Only daemons and the CLI log;
 * library layers (util, core, spec, sim) return errors instead. */
#pragma once

void log_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
