/* notice.h: the cloud's spot-interruption notice, read from the instance metadata
 * service: AWS's instance-action (IMDSv2, with a session token), GCP's `preempted`,
 * Azure's Scheduled Events. The parsers are pure (a reply body in, a notice out), so
 * they are tested on sample bodies; the watcher polls the service from the agent's
 * loop with a short timeout and logs a notice when it appears and when it clears, and
 * a failing or garbled service once, not on every poll. The base URL is an option, so
 * tests serve the metadata on loopback. */
#pragma once

#include "util/buf.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum NoticeSource { NOTICE_NONE, NOTICE_AWS, NOTICE_GCP, NOTICE_AZURE } NoticeSource;

#define NOTICE_POLL_MS         5000
#define NOTICE_HTTP_TIMEOUT_MS 2000
#define NOTICE_LEAD_MS         30000 /* GCP and Azure: the notice when no time is given */
#define NOTICE_AWS_TOKEN_TTL_S 21600
#define NOTICE_ACTION_MAX      32

typedef struct Notice {
    int64_t deadline_ms;            /* wall clock (ms since the epoch) the machine goes */
    NoticeSource source;            /* the cloud that said so */
    char action[NOTICE_ACTION_MAX]; /* AWS: terminate, stop, hibernate; else "preempt" */
} Notice;

/* "none", "aws", "gcp", "azure" -> the source; -EINVAL for anything else. */
int notice_source_parse(const char *name, NoticeSource *ret);
const char *notice_source_name(NoticeSource s);
/* The metadata service's address on that cloud (NULL for NOTICE_NONE). */
const char *notice_default_url(NoticeSource s);

/* The parsers return 1 with *ret set when the body carries a notice, 0 when it says
 * there is none, -EINVAL with err saying why when it is not the documented shape (no
 * notice: the caller logs err). */

/* AWS: the 200 body of /latest/meta-data/spot/instance-action,
 * {"action": "terminate", "time": "2026-11-30T12:00:00Z"}. (A 404 is "none" and is not
 * parsed.) */
int notice_parse_aws(const char *body, size_t len, Notice *ret, Buf *err);
/* GCP: /computeMetadata/v1/instance/preempted, "TRUE" or "FALSE"; a notice is due at
 * now_ms + NOTICE_LEAD_MS. */
int notice_parse_gcp(const char *body, size_t len, int64_t now_ms, Notice *ret, Buf *err);
/* Azure: /metadata/scheduledevents, {"Events": [{"EventType": "Preempt", "Resources":
 * ["vm"], "NotBefore": "Mon, 19 Sep 2016 18:29:47 GMT", ...}]}: a Preempt event naming
 * vm_name among its Resources (vm_name NULL: any Preempt event), due at its NotBefore,
 * or now_ms + NOTICE_LEAD_MS when that is empty. */
int notice_parse_azure(const char *body, size_t len, const char *vm_name, int64_t now_ms,
                       Notice *ret, Buf *err);

/* "2026-11-30T12:00:00Z" (RFC 3339: a fraction and a +hh:mm offset allowed) -> ms since
 * the epoch; -EINVAL when it is not one. */
int notice_parse_rfc3339(const char *s, int64_t *ret_ms);
/* "Mon, 19 Sep 2016 18:29:47 GMT" (RFC 7231's date) -> ms since the epoch; -EINVAL. */
int notice_parse_http_date(const char *s, int64_t *ret_ms);

typedef struct NoticeWatch NoticeWatch;

/* Watch source's metadata service at base_url (NULL: notice_default_url) every poll_ms
 * (<= 0: NOTICE_POLL_MS), the first poll at once. node names this machine to Azure when
 * the service does not say its VM name. 0, or -EINVAL / -ENOMEM with err saying why. */
int notice_watch_new(NoticeSource source, const char *base_url, int64_t poll_ms, const char *node,
                     NoticeWatch **ret, Buf *err);
void notice_watch_free(NoticeWatch *w);

/* Poll when due (mono_ms: the monotonic clock, wall_ms: the wall clock). True when the
 * notice appeared or cleared. A service that fails or answers nonsense leaves the
 * state as it was. */
bool notice_watch_tick(NoticeWatch *w, int64_t mono_ms, int64_t wall_ms);
/* The notice in force, or NULL. */
const Notice *notice_watch_notice(const NoticeWatch *w);
NoticeSource notice_watch_source(const NoticeWatch *w);
/* Monotonic ms of the next poll. */
int64_t notice_watch_next_ms(const NoticeWatch *w);
