/* server_lead.h: how `gpuorch server` comes to lead its store (docs/ha.md): the URL it
 * advertises as the leader's, and the wait of a standby, answering as one (standby.h),
 * until the server that leads is gone. */
#pragma once

#include "server/http.h"
#include "server/standby.h"
#include "store/store.h"
#include "util/buf.h"

#include <signal.h>
#include <stddef.h>

/* This server's URL as clients reach it: flag (--advertise-url) when given, else
 * http://HOST:PORT of the listening socket, the machine's host name when it listens on
 * every address. -EINVAL (err set) for a flag that is not an http(s) URL. */
int server_advertise_url(const char *flag, const char *host, const HttpListener *lis, char *out,
                         size_t n, Buf *err);

/* Take the lead of st, waiting as a standby (*sb, started on l's socket the first time
 * it has to wait, and left running for the caller to stop) while another server leads or
 * the database does not answer. 1 once leading; 0 when one of sigs came first; a
 * negative errno (err set) when the standby cannot serve. */
int server_wait_to_lead(Store *st, const char *self_url, HttpListener *l, Standby **sb,
                        const sigset_t *sigs, Buf *err);
