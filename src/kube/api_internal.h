/* api_internal.h: the two parts of api.c that need no network, declared here so the
 * unit tests reach them (internal to src/kube): the splitter that cuts a watch stream
 * into its newline-delimited events however the bytes arrive (an event may span
 * write callbacks, one callback may hold several), and the client-side token bucket,
 * with the time passed in so that tests need no clock. */
#pragma once

#include "util/buf.h"

#include <stddef.h>
#include <stdint.h>

/* Called with each complete line, without its "\n" (nor a "\r" before it); empty lines
 * are skipped. The text is not NUL-terminated and lives for the call only. A negative
 * return stops the feed and is returned from it. */
typedef int (*KubeLineFn)(void *arg, const char *line, size_t len);

typedef struct KubeLines {
    KubeLineFn fn;
    void *arg;
    Buf partial; /* the start of a line whose newline has not come yet */
} KubeLines;

/* n more bytes of the stream: fn for every line they complete, in order. 0, fn's
 * negative return, or -ENOMEM. */
int kube_lines_feed(KubeLines *s, const char *data, size_t n);
/* The stream ended: a last line without its newline goes to fn. 0 or fn's return. */
int kube_lines_end(KubeLines *s);
void kube_lines_free(KubeLines *s);

/* A token bucket as client-go's (golang.org/x/time/rate): it holds up to burst tokens,
 * refills at qps a second, and a request takes one. Tokens may go below zero: each
 * request that finds none is promised the next free slot, so waiters queue fairly. */
typedef struct KubeBucket {
    double qps;      /* tokens a second; 0: no limit */
    double burst;    /* at least 1 */
    double tokens;   /* now (as of last_ns); negative: slots already promised */
    int64_t last_ns; /* when tokens was brought up to date, monotonic */
} KubeBucket;

/* Full (burst tokens) at now_ns. qps <= 0: no limit; burst < 1 counts as 1. */
void kube_bucket_init(KubeBucket *b, double qps, int burst, int64_t now_ns);
/* Take a token at now_ns: how long (ns) the request waits before it may go, 0: now. */
int64_t kube_bucket_take(KubeBucket *b, int64_t now_ns);
