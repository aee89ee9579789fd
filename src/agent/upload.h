/* upload.h: shipping a worker's log to the server (POST /api/v1/agent/logs/{job}/{rank}
 * ?run=R&offset=N, at most UPLOAD_CHUNK bytes a request). The server holds a size per
 * worker run; the agent sends what lies past it and, on a 409, takes the server's size
 * and resends from there, so lost replies and agent restarts heal by themselves. */
#pragma once

#include "agent/worker.h"
#include "net/http_client.h"
#include "util/buf.h"

#define UPLOAD_CHUNK (256 * 1024)
#define UPLOAD_MAX_REQUESTS                                                                        \
    8 /* per worker per call, so one chatty worker cannot stall the loop                           \
       */

/* Send what the server lacks of w's log. 0 when the server is up to date or the
 * request limit was reached; -EIO (err says why, *ret_status the HTTP status or 0)
 * when the server could not be reached or refused. */
int upload_log(HttpClient *h, Worker *w, int *ret_status, Buf *err);
