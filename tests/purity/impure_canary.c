/* impure_canary.c: what a core file must never do (log through util/log.c, end the
 * process), compiled into a library of its own so that the core_links_pure_canary test
 * can show that check_pure_link.sh refuses it: a check that passes everything would
 * otherwise look the same as a pure core. Not linked into anything. */
#include "util/log.h"

#include <stdlib.h>

void impure_canary(int code);

void impure_canary(int code)
{
    log_error("event=canary code=%d", code);
    exit(code);
}
