/* audit.h: the audit log: one line per mutating request (every method but GET and
 * HEAD), key=value, appended to <data_dir>/audit.log (mode 0600, O_APPEND): who (the
 * token's id, user, role and team; "-" when no token was accepted), what (method, path,
 * the object it made or changed, the status, and the error sentence of a refusal),
 * when (UTC, ms) and from where (the client's address). An agent's accepted heartbeats
 * and log uploads are machine traffic several times a second and are left out; its
 * refused ones are kept. Lines are written with one write(2) each, so concurrent
 * requests never interleave within a line; they are not synced (a power loss may lose
 * the last lines, a crash of the server does not). */
#pragma once

#include "server/http.h"

#include <stdbool.h>
#include <sys/socket.h>

typedef struct Audit Audit;

/* Open (creating, mode 0600) the log in dir. 0 or a negative errno with err set. */
int audit_open(const char *dir, Audit **ret, Buf *err);
void audit_close(Audit *a);

/* Log one request when it mutates: who is the accepted caller (NULL: no token was
 * accepted), machine says an agent route, rp the reply as it will be sent, addr the
 * client's address (NULL unknown). now_ms is the time to stamp. */
void audit_request(Audit *a, const char *method, const char *path, const Caller *who, bool machine,
                   const HttpResponse *rp, const struct sockaddr *addr, int64_t now_ms);

/* The line audit_request writes, without the trailing newline, into line (the same
 * arguments); false when the request is not one to log. For tests. */
bool audit_format(Buf *line, const char *method, const char *path, const Caller *who, bool machine,
                  const HttpResponse *rp, const struct sockaddr *addr, int64_t now_ms);
