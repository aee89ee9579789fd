/* standby.h: what a server that does not lead its store answers while it waits to
 * (docs/ha.md). It holds no model of the cluster, so it decides and tells nothing: every
 * request is sent to the leader the store names (307), or, while none can be named, put
 * off (503, Retry-After); /healthz says it is alive, /readyz that it is not the leader,
 * /metrics that gpuorch_leader is 0. Its replies carry X-Gpuorch-Role: standby, which the
 * agents and the CLI (net/http_client.h) read to try the next server of their list. */
#pragma once

#include "server/http.h"
#include "store/store.h"
#include "util/buf.h"

typedef struct Standby Standby;

/* Answer on l's socket (taken over on success) as a standby of st's leader. self_url is
 * this server's own advertised URL: a leader row naming it is what an earlier run of this
 * server left, not a leader to send clients to. 0 or a negative errno with err set. */
int standby_start(HttpListener *l, Store *st, const char *self_url, Standby **ret, Buf *err);

/* Stop taking connections and give the listening socket back in *l, for the leader's HTTP
 * server to take up: connections that arrive meanwhile wait in its backlog. */
void standby_stop(Standby *sb, HttpListener *l);
