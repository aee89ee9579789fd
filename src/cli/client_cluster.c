/* client_cluster.c: the commands about the cluster rather than one job: `gpuorch
 * nodes` (the GPU and MIG map), `learned` (GPU memory per workload class), `teams` (quotas and what
 * each team holds; setting a quota) and `usage` (chargeback); `token` is in client_tokens.c. As in
 * client_jobs.c, arguments are checked before anything is sent, and -o json prints the server's
 * reply as it came.
 */
#include "cli/cli.h"
#include "cli/client.h"
#include "cli/view.h"
#include "util/macro.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const table_or_json[] = {"table", "json", NULL};

/* GET path and print it: the reply as it came with -o json, else through the view. */
typedef int (*View)(const json_t *reply, int64_t now_ms, size_t width, Buf *out, Buf *err);

static int get_and_show(Client *c, const char *context, const char *path, View view)
{
    HttpReply reply = {0};
    json_t *doc = NULL;
    Buf text = {0}, err = {0};
    int rc = client_call(c, context, "GET", path, NULL, NULL, 0, &reply);
    if (rc == 0 && client_json_output(c))
        client_print_body(&reply, false);
    else if (rc == 0 && (rc = client_parse(c, &reply, &doc)) == 0)
        rc = client_show(c, view(doc, client_now_ms(), CLIENT_WIDTH, &text, &err), &text, &err);
    json_decref(doc);
    buf_free(&text);
    buf_free(&err);
    http_reply_free(&reply);
    return rc;
}

/* ---- nodes ---- */

static void nodes_usage(FILE *f)
{
    fprintf(f, "usage: gpuorch nodes [OPTIONS]\n\n"
               "Shows each node (model, tier, state, CPU and memory in use, GPU equivalents\n"
               "in use) and its GPUs: 'free', 'whole JOB', 'mig [PROFILE:JOB,...]' with '-'\n"
               "for an idle slice, 'shared [JOB:FRACTION ...]', and 'drain' on a GPU being\n"
               "emptied for a new MIG layout.\n\n"
               "  -o, --output FORMAT  table (default) or json: the server's reply\n" CLIENT_HELP);
}

/* A command that takes no argument but -o and shows one GET. */
static int show_command(int argc, char **argv, const char *name, void (*usage)(FILE *),
                        const char *path, View view)
{
    static const struct option opts[] = {CLIENT_OPTIONS, CLIENT_OPT_OUTPUT, {NULL, 0, NULL, 0}};
    Client c;
    client_init(&c, name);
    int rc = client_parse_options(&c, argc, argv, "o:h", opts, NULL, NULL, usage);
    if (rc >= 0)
        return rc;
    if (optind < argc) {
        client_error(&c, "unexpected argument '%s'", argv[optind]);
        return 2;
    }
    if (!(rc = client_check_format(&c, table_or_json)) && !(rc = client_connect(&c)))
        rc = get_and_show(&c, NULL, path, view);
    client_free(&c);
    return rc;
}

int cmd_nodes(int argc, char **argv)
{
    return show_command(argc, argv, "nodes", nodes_usage, "/api/v1/nodes", view_nodes);
}

/* ---- learned ---- */

static void learned_usage(FILE *f)
{
    fprintf(f, "usage: gpuorch learned [OPTIONS]\n\n"
               "Shows the GPU memory the server has learned per workload class (a job's 'class',\n"
               "or its team and its name without a trailing number): the least its next job\n"
               "asks, a fifth above what a job of it overran when it ran out of GPU memory,\n"
               "and how many times that happened.\n\n"
               "  -o, --output FORMAT  table (default) or json: the server's reply\n" CLIENT_HELP);
}

int cmd_learned(int argc, char **argv)
{
    return show_command(argc, argv, "learned", learned_usage, "/api/v1/learned", view_learned);
}

/* ---- teams ---- */

static void teams_usage(FILE *f)
{
    fprintf(f, "usage: gpuorch teams [OPTIONS] [NAME]\n"
               "       gpuorch teams NAME [--set-guaranteed N] [--set-burst N] [--set-weight W]\n"
               "                          [--set-budget H]\n\n"
               "Shows the teams (or one): guaranteed and burst quotas and fair-share weight, GPU\n"
               "equivalents held and borrowed, pending and running jobs, fair-share usage, and\n"
               "where a team has one, its monthly GPU-hour budget, the GPU-hours used this\n"
               "month (UTC) and the share of the budget burnt. With a --set option, changes\n"
               "the team's quota or budget (admins only); the change overrides the cluster file\n"
               "from then on.\n\n"
               "  --set-guaranteed N   GPU equivalents the team is guaranteed\n"
               "  --set-burst N        GPU equivalents it may hold at most (>= guaranteed)\n"
               "  --set-weight W       its fair-share weight\n"
               "  --set-budget H       GPU-hours it may use per calendar month (0: no budget);\n"
               "                       past it, its work other than production waits\n"
               "  -o, --output FORMAT  table (default) or json: the server's reply\n" CLIENT_HELP);
}

enum { OPT_SET_GUARANTEED = 0x200, OPT_SET_BURST, OPT_SET_WEIGHT, OPT_SET_BUDGET };

typedef struct TeamsArgs {
    const Client *c;
    json_t *set; /* the PUT body, NULL until a --set option */
} TeamsArgs;

static int teams_option(void *ctx, int opt, const char *arg)
{
    TeamsArgs *t = ctx;
    const char *key = opt == OPT_SET_GUARANTEED ? "guaranteed_gpus"
                      : opt == OPT_SET_BURST    ? "burst_gpus"
                      : opt == OPT_SET_WEIGHT   ? "weight"
                      : opt == OPT_SET_BUDGET   ? "budget_gpu_hours_per_month"
                                                : NULL;
    if (!key)
        return -1;
    double v;
    if (client_parse_amount(arg, &v) < 0) {
        client_error(t->c, "--set-%s must be a number from 0, not '%s'",
                     opt == OPT_SET_GUARANTEED ? "guaranteed"
                     : opt == OPT_SET_BURST    ? "burst"
                     : opt == OPT_SET_WEIGHT   ? "weight"
                                               : "budget",
                     arg);
        return 2;
    }
    if (!t->set && !(t->set = json_object())) {
        client_oom(t->c);
        return 1;
    }
    /* a whole number goes as one ("8", not "8.0"), as a person would write it */
    json_t *n = v == (double)(json_int_t)v ? json_integer((json_int_t)v) : json_real(v);
    if (json_object_set_new(t->set, key, n) < 0) {
        client_oom(t->c);
        return 1;
    }
    return 0;
}

static int teams_put(Client *c, const char *name, const json_t *set)
{
    double g, b;
    if (!json_unpack((json_t *)set, "{s:F, s:F}", "guaranteed_gpus", &g, "burst_gpus", &b) &&
        b < g) {
        client_error(c, "--set-burst (%g) must be at least --set-guaranteed (%g)", b, g);
        return 2;
    }
    char *body = json_dumps(set, JSON_COMPACT | JSON_REAL_PRECISION(15));
    Buf path = {0}, context = {0}, text = {0}, err = {0};
    buf_puts(&path, "/api/v1/teams/");
    client_escape(&path, name);
    buf_printf(&context, "team %s", name);
    HttpReply reply = {0};
    json_t *doc = NULL;
    int rc;
    if (!body || path.oom || context.oom) {
        client_oom(c);
        rc = 1;
    } else if ((rc = client_call(c, buf_str(&context), "PUT", buf_str(&path), "application/json",
                                 body, strlen(body), &reply))) {
    } else if (client_json_output(c)) {
        client_print_body(&reply, false);
    } else if (!(rc = client_parse(c, &reply, &doc))) {
        rc = client_show(c, view_teams(doc, CLIENT_WIDTH, &text, &err), &text, &err);
    }
    free(body);
    json_decref(doc);
    http_reply_free(&reply);
    buf_free(&path);
    buf_free(&context);
    buf_free(&text);
    buf_free(&err);
    return rc;
}

static int teams_view(const json_t *reply, int64_t now_ms, size_t width, Buf *out, Buf *err)
{
    (void)now_ms;
    return view_teams(reply, width, out, err);
}

int cmd_teams(int argc, char **argv)
{
    static const struct option opts[] = {
        CLIENT_OPTIONS,
        CLIENT_OPT_OUTPUT,
        {"set-guaranteed", required_argument, NULL, OPT_SET_GUARANTEED},
        {"set-burst", required_argument, NULL, OPT_SET_BURST},
        {"set-weight", required_argument, NULL, OPT_SET_WEIGHT},
        {"set-budget", required_argument, NULL, OPT_SET_BUDGET},
        {NULL, 0, NULL, 0},
    };
    Client c;
    client_init(&c, "teams");
    TeamsArgs t = {.c = &c};
    int rc = client_parse_options(&c, argc, argv, "o:h", opts, teams_option, &t, teams_usage);
    if (rc >= 0)
        goto out;
    const char *name = optind < argc ? argv[optind] : NULL;
    if (argc - optind > 1) {
        client_error(&c, "one team at a time, not '%s' and '%s'", argv[optind], argv[optind + 1]);
        rc = 2;
    } else if (t.set && !name) {
        client_error(&c, "name the team whose quota or budget to set");
        rc = 2;
    } else if (name && !*name) {
        client_error(&c, "the team name is empty");
        rc = 2;
    } else if (!(rc = client_check_format(&c, table_or_json)) && !(rc = client_connect(&c))) {
        if (t.set) {
            rc = teams_put(&c, name, t.set);
        } else if (name) {
            Buf path = {0}, context = {0};
            buf_puts(&path, "/api/v1/teams/");
            client_escape(&path, name);
            buf_printf(&context, "team %s", name);
            rc = path.oom || context.oom
                     ? (client_oom(&c), 1)
                     : get_and_show(&c, buf_str(&context), buf_str(&path), teams_view);
            buf_free(&path);
            buf_free(&context);
        } else {
            rc = get_and_show(&c, NULL, "/api/v1/teams", teams_view);
        }
    }
out:
    json_decref(t.set);
    client_free(&c);
    return rc;
}

/* ---- usage ---- */

static void usage_usage(FILE *f)
{
    fprintf(
        f, "usage: gpuorch usage [OPTIONS]\n\n"
           "GPU-hours (GPU equivalents x hours) and cost of every run in a window, per\n"
           "group, with a total. The window defaults to the last 30 days.\n\n"
           "  --from DATE          start of the window: YYYY-MM-DD, YYYY-MM-DDTHH:MM (UTC)\n"
           "                       or milliseconds since the epoch\n"
           "  --to DATE            end of the window (not included), as --from\n"
           "  --by KEYS            group by any of team, project, pool, model, tier,\n"
           "                       comma-separated (default team,project)\n"
           "  -o, --output FORMAT  table (default), json or csv: the server's reply\n" CLIENT_HELP);
}

enum { OPT_FROM = 0x200, OPT_TO, OPT_BY };

typedef struct UsageArgs {
    const Client *c;
    int64_t from_ms, to_ms; /* -1: not given */
    const char *by;
} UsageArgs;

static bool valid_group_by(const char *list)
{
    static const char *const keys[] = {"team", "project", "pool", "model", "tier"};
    return client_words_known(list, keys, ARRAY_SIZE(keys));
}

static int usage_option(void *ctx, int opt, const char *arg)
{
    UsageArgs *u = ctx;
    switch (opt) {
    case OPT_FROM:
    case OPT_TO:
        if (client_parse_time_ms(arg, opt == OPT_FROM ? &u->from_ms : &u->to_ms) < 0) {
            client_error(u->c,
                         "--%s takes YYYY-MM-DD, YYYY-MM-DDTHH:MM (UTC) or milliseconds since the "
                         "epoch, not '%s'",
                         opt == OPT_FROM ? "from" : "to", arg);
            return 2;
        }
        return 0;
    case OPT_BY:
        if (!valid_group_by(arg)) {
            client_error(u->c,
                         "--by takes team, project, pool, model or tier, comma-separated, not "
                         "'%s'",
                         arg);
            return 2;
        }
        u->by = arg;
        return 0;
    default:
        return -1;
    }
}

static int usage_view(const json_t *reply, int64_t now_ms, size_t width, Buf *out, Buf *err)
{
    (void)now_ms;
    return view_usage(reply, width, out, err);
}

int cmd_usage(int argc, char **argv)
{
    static const struct option opts[] = {
        CLIENT_OPTIONS,
        CLIENT_OPT_OUTPUT,
        {"from", required_argument, NULL, OPT_FROM},
        {"to", required_argument, NULL, OPT_TO},
        {"by", required_argument, NULL, OPT_BY},
        {NULL, 0, NULL, 0},
    };
    static const char *const formats[] = {"table", "json", "csv", NULL};
    Client c;
    client_init(&c, "usage");
    UsageArgs u = {.c = &c, .from_ms = -1, .to_ms = -1};
    int rc = client_parse_options(&c, argc, argv, "o:h", opts, usage_option, &u, usage_usage);
    if (rc >= 0)
        return rc;
    if (optind < argc) {
        client_error(&c, "unexpected argument '%s'", argv[optind]);
        return 2;
    }
    if (u.from_ms >= 0 && u.to_ms >= 0 && u.from_ms >= u.to_ms) {
        client_error(&c, "--from must come before --to");
        return 2;
    }
    if ((rc = client_check_format(&c, formats)) || (rc = client_connect(&c)))
        goto out;
    Buf path = {0};
    char ms[32];
    buf_puts(&path, "/api/v1/usage");
    if (u.from_ms >= 0) {
        snprintf(ms, sizeof(ms), "%lld", (long long)u.from_ms);
        client_query(&path, "from", ms);
    }
    if (u.to_ms >= 0) {
        snprintf(ms, sizeof(ms), "%lld", (long long)u.to_ms);
        client_query(&path, "to", ms);
    }
    if (u.by)
        client_query(&path, "group_by", u.by);
    bool csv = !strcmp(c.format, "csv");
    if (csv)
        client_query(&path, "format", "csv");
    if (path.oom) {
        client_oom(&c);
        rc = 1;
    } else if (csv) {
        HttpReply reply = {0};
        if (!(rc = client_call(&c, NULL, "GET", buf_str(&path), NULL, NULL, 0, &reply)))
            client_print_body(&reply, false);
        http_reply_free(&reply);
    } else {
        rc = get_and_show(&c, NULL, buf_str(&path), usage_view);
    }
    buf_free(&path);
out:
    client_free(&c);
    return rc;
}
