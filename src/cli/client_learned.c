/* client_learned.c: `gpuorch learned`, the GPU memory the server learned per workload
 * class (GET /api/v1/learned, one team's with --team), and `gpuorch learned reset
 * TEAM/NAME`, which forgets what one class learned (DELETE /api/v1/learned/TEAM/NAME;
 * an admin, or the lead of TEAM). As in the other client commands, arguments are
 * checked before anything is sent, and -o json prints the server's reply as it came. */
#include "cli/cli.h"
#include "cli/client.h"
#include "cli/view.h"
#include "util/macro.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const table_or_json[] = {"table", "json", NULL};

static void learned_usage(FILE *f)
{
    fprintf(f, "usage: gpuorch learned [OPTIONS] [--team TEAM]\n"
               "       gpuorch learned reset [OPTIONS] TEAM/NAME\n\n"
               "Shows the GPU memory the server has learned per workload class: the least its\n"
               "next job asks, a fifth above what a job of it overran when it ran out of GPU\n"
               "memory, how many times that happened, and whether any GPU of the cluster holds\n"
               "it (FITS no: the class's jobs are refused until it is reset). A class belongs\n"
               "to a team: TEAM/NAME, where NAME is a job's 'class', or its name without a\n"
               "trailing number.\n\n"
               "'reset' forgets what the class learned (an admin, or the lead of TEAM): its\n"
               "waiting jobs and the next ones ask what they write again.\n\n"
               "  --team TEAM          only that team's classes\n"
               "  -o, --output FORMAT  table (default) or json: the server's reply\n" CLIENT_HELP);
}

/* past the common options (client.h) */
enum { OPT_TEAM = 0x200 };

static int team_option(void *ctx, int opt, const char *arg)
{
    if (opt != OPT_TEAM)
        return -1;
    *(const char **)ctx = arg;
    return 0;
}

/* The reply to a GET or a DELETE, shown: as it came with -o json, else through view. */
static int call_and_show(Client *c, const char *context, const char *method, const char *path,
                         int (*view)(const json_t *reply, Buf *out, Buf *err))
{
    HttpReply reply = {0};
    json_t *doc = NULL;
    Buf text = {0}, err = {0};
    int rc = client_call(c, context, method, path, NULL, NULL, 0, &reply);
    if (rc == 0 && client_json_output(c))
        client_print_body(&reply, false);
    else if (rc == 0 && (rc = client_parse(c, &reply, &doc)) == 0)
        rc = client_show(c, view(doc, &text, &err), &text, &err);
    json_decref(doc);
    buf_free(&text);
    buf_free(&err);
    http_reply_free(&reply);
    return rc;
}

static int view_list(const json_t *reply, Buf *out, Buf *err)
{
    return view_learned(reply, client_now_ms(), CLIENT_WIDTH, out, err);
}

/* DELETE path: the key as GET lists it, each part between slashes percent-encoded (a
 * key's first '/' ends the team; the rest is the class's name, slashes and all). */
static void key_path(Buf *path, const char *key)
{
    buf_puts(path, "/api/v1/learned");
    const char *p = key;
    for (;;) {
        const char *slash = strchr(p, '/');
        size_t n = slash ? (size_t)(slash - p) : strlen(p);
        char *part = strndup(p, n);
        if (!part) {
            path->oom = true;
            return;
        }
        buf_putc(path, '/');
        client_escape(path, part);
        free(part);
        if (!slash)
            return;
        p = slash + 1;
    }
}

static int reset(Client *c, const char *key)
{
    const char *slash = strchr(key, '/');
    if (!slash || slash == key || !slash[1]) {
        client_error(c, "'%s' is not TEAM/NAME (the class as 'gpuorch learned' lists it)", key);
        return 2;
    }
    int rc = client_connect(c);
    if (rc)
        return rc;
    Buf path = {0};
    key_path(&path, key);
    if (path.oom) {
        client_oom(c);
        rc = 1;
    } else {
        rc = call_and_show(c, key, "DELETE", buf_str(&path), view_learned_reset);
    }
    buf_free(&path);
    return rc;
}

int cmd_learned(int argc, char **argv)
{
    static const struct option opts[] = {CLIENT_OPTIONS,
                                         CLIENT_OPT_OUTPUT,
                                         {"team", required_argument, NULL, OPT_TEAM},
                                         {NULL, 0, NULL, 0}};
    Client c;
    client_init(&c, "learned");
    bool resetting = argc >= 2 && !strcmp(argv[1], "reset");
    const char *team = NULL;
    int skip = resetting ? 1 : 0;
    int rc = client_parse_options(&c, argc - skip, argv + skip, "o:h", opts,
                                  resetting ? NULL : team_option, &team, learned_usage);
    if (rc >= 0)
        return rc;
    int at = optind + skip;
    if (resetting && at >= argc) {
        client_error(&c, "reset: no class given (TEAM/NAME)");
        learned_usage(stderr);
        return 2;
    }
    if (at + (resetting ? 1 : 0) < argc) {
        client_error(&c, "unexpected argument '%s'", argv[at + (resetting ? 1 : 0)]);
        return 2;
    }
    if ((rc = client_check_format(&c, table_or_json)))
        goto out;
    if (resetting) {
        rc = reset(&c, argv[at]);
        goto out;
    }
    Buf path = {0};
    buf_puts(&path, "/api/v1/learned");
    if (team)
        client_query(&path, "team", team);
    if (path.oom) {
        client_oom(&c);
        rc = 1;
    } else if (!(rc = client_connect(&c))) {
        rc = call_and_show(&c, NULL, "GET", buf_str(&path), view_list);
    }
    buf_free(&path);
out:
    client_free(&c);
    return rc;
}
