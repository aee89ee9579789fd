/* server_lead.c: a server's way to the lead of its store (server_lead.h). The wait asks
 * the store every LEAD_POLL_MS: PostgreSQL frees a leader's lock as soon as its session
 * ends, so a standby leads within that of the leader's death plus the time to load the
 * state. */
#include "cli/server_lead.h"

#include "util/log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define LEAD_POLL_MS 250

int server_advertise_url(const char *flag, const char *host, const HttpListener *lis, char *out,
                         size_t n, Buf *err)
{
    if (flag) {
        if ((strncmp(flag, "http://", 7) && strncmp(flag, "https://", 8)) || strlen(flag) >= n ||
            strpbrk(flag, " ,")) {
            buf_printf(err, "--advertise-url must be http://HOST:PORT or https://..., not '%s'",
                       flag);
            return -EINVAL;
        }
        snprintf(out, n, "%s", flag);
        size_t len = strlen(out);
        while (len > 0 && out[len - 1] == '/')
            out[--len] = '\0';
        return 0;
    }
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    int port = 0;
    if (getsockname(lis->fd, (struct sockaddr *)&ss, &sl) == 0)
        port = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                        : ntohs(((struct sockaddr_in *)&ss)->sin_port);
    char name[256] = "localhost";
    bool any = !*host || !strcmp(host, "0.0.0.0") || !strcmp(host, "::");
    if (any && gethostname(name, sizeof(name) - 1) < 0)
        snprintf(name, sizeof(name), "localhost");
    const char *h = any ? name : host;
    bool v6 = strchr(h, ':') != NULL;
    snprintf(out, n, "http://%s%s%s:%d", v6 ? "[" : "", h, v6 ? "]" : "", port);
    return 0;
}

int server_wait_to_lead(Store *st, const char *self_url, HttpListener *l, Standby **sb,
                        const sigset_t *sigs, Buf *err)
{
    bool said_error = false;
    for (;;) {
        Buf why = {0};
        int r = store_lead(st, self_url, server_now_ms(), &why);
        if (r == 1) {
            if (*sb)
                log_info("event=leading url=%s", self_url);
            buf_free(&why);
            return 1;
        }
        if (r < 0 && !said_error) {
            /* the database may come back: go on asking, once said */
            log_error("event=lead_error reason=\"%s\"", why.len ? buf_str(&why) : strerror(-r));
            said_error = true;
        } else if (r == 0) {
            said_error = false;
        }
        buf_free(&why);
        if (!*sb) {
            int e = standby_start(l, st, self_url, sb, err);
            if (e < 0)
                return e;
            char at[512] = "";
            store_leader(st, at, sizeof(at), NULL);
            printf("gpuorch server standing by at %s: another server leads the store%s%s\n",
                   self_url, *at ? ", at " : "", at);
            fflush(stdout);
            log_info("event=standby url=%s leader=%s", self_url, *at ? at : "-");
        }
        struct timespec t = {.tv_sec = 0, .tv_nsec = LEAD_POLL_MS * 1000000L};
        if (sigtimedwait(sigs, NULL, &t) > 0)
            return 0;
    }
}
