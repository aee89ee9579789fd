/* client_tokens.c: `gpuorch token create|list|revoke`, the token endpoints of
 * docs/api.md. create prints the new token alone (T=$(gpuorch token create ...) keeps
 * it; the server shows it only once); list prints a table of the tokens the caller may
 * see (never a secret); revoke takes ids and stops each token at once. As elsewhere,
 * arguments are checked before anything is sent, and -o json prints the reply as it
 * came. */
#include "cli/cli.h"
#include "cli/client.h"
#include "cli/table.h"
#include "cli/view.h"
#include "util/macro.h"
#include "util/units.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *const table_or_json[] = {"table", "json", NULL};

static void token_usage(FILE *f)
{
    fprintf(
        f, "usage: gpuorch token create --role ROLE [--team TEAM] [--node NODE] [--name NAME]\n"
           "                            [--user USER] [--expires-in DURATION | --expires-at TIME]\n"
           "       gpuorch token list [OPTIONS]\n"
           "       gpuorch token revoke ID...\n\n"
           "create makes an API token (admins only) and prints it alone, so that\n"
           "T=$(gpuorch token create ...) keeps it; the server shows it only once.\n"
           "list shows the tokens (an admin: all; anyone else: their own), never a secret.\n"
           "revoke stops tokens at once (admins only): their next request gets 401.\n\n"
           "  --role ROLE          admin, lead, member, viewer or agent\n"
           "  --team TEAM          the team of a lead or member (required for those,\n"
           "                       refused for the others)\n"
           "  --node NODE          an agent token for that node only: its heartbeats\n"
           "                       and log uploads for other nodes are refused\n"
           "  --name NAME          a label to know the token by\n"
           "  --user USER          who the token acts for: jobs it submits and the\n"
           "                       audit log name them\n"
           "  --expires-in DURATION  stops working after this long (\"90d\", \"12h\")\n"
           "  --expires-at TIME    stops working then (\"2026-12-31\", \"2026-12-31T18:00\", UTC)\n"
           "  -o, --output FORMAT  table (default) or json: the reply\n" CLIENT_HELP);
}

enum { OPT_ROLE = 0x200, OPT_TEAM, OPT_NAME, OPT_NODE, OPT_USER, OPT_EXPIRES_IN, OPT_EXPIRES_AT };

typedef struct TokenArgs {
    const char *role, *team, *name, *node, *user, *expires_in, *expires_at;
} TokenArgs;

static int token_option(void *ctx, int opt, const char *arg)
{
    TokenArgs *t = ctx;
    switch (opt) {
    case OPT_ROLE:
        t->role = arg;
        return 0;
    case OPT_TEAM:
        t->team = arg;
        return 0;
    case OPT_NAME:
        t->name = arg;
        return 0;
    case OPT_NODE:
        t->node = arg;
        return 0;
    case OPT_USER:
        t->user = arg;
        return 0;
    case OPT_EXPIRES_IN:
        t->expires_in = arg;
        return 0;
    case OPT_EXPIRES_AT:
        t->expires_at = arg;
        return 0;
    default:
        return -1;
    }
}

/* The role names the API knows, whether a role belongs to a team, and the expiry's
 * form. 0 or 2; the expiry as the API takes it goes to ret_expires ("expires_in": N
 * or "expires_at": "..."), "" when none. */
static int token_check(const Client *c, const TokenArgs *t, Buf *ret_expiry)
{
    static const char *const roles[] = {"admin", "lead", "member", "viewer", "agent"};
    bool known = false;
    for (size_t i = 0; t->role && i < ARRAY_SIZE(roles); i++)
        known |= !strcmp(t->role, roles[i]);
    if (!t->role) {
        client_error(c, "--role is required (admin, lead, member, viewer or agent)");
        return 2;
    }
    if (!known) {
        client_error(c, "--role must be admin, lead, member, viewer or agent, not '%s'", t->role);
        return 2;
    }
    bool team_role = !strcmp(t->role, "lead") || !strcmp(t->role, "member");
    if (team_role && (!t->team || !*t->team)) {
        client_error(c, "a %s token belongs to a team: give --team", t->role);
        return 2;
    }
    if (!team_role && t->team) {
        client_error(c, "the %s role has no team: leave out --team", t->role);
        return 2;
    }
    if (t->node && (strcmp(t->role, "agent") || !*t->node)) {
        client_error(c, "--node binds an agent token to a node: give it with --role agent");
        return 2;
    }
    if (t->expires_in && t->expires_at) {
        client_error(c, "give --expires-in or --expires-at, not both");
        return 2;
    }
    if (t->expires_in) {
        int64_t ms;
        if (parse_duration_ms(t->expires_in, &ms) < 0 || ms < 1000) {
            client_error(c,
                         "--expires-in: expected a duration of a second or more (\"90d\", "
                         "\"12h\", \"30m\"), not '%s'",
                         t->expires_in);
            return 2;
        }
        buf_printf(ret_expiry, ", \"expires_in\": %lld", (long long)(ms / 1000));
    }
    if (t->expires_at) {
        int64_t ms;
        if (client_parse_time_ms(t->expires_at, &ms) < 0) {
            client_error(c,
                         "--expires-at: expected a UTC time such as 2026-12-31 or "
                         "2026-12-31T18:00, not '%s'",
                         t->expires_at);
            return 2;
        }
        time_t sec = (time_t)(ms / 1000);
        struct tm tm;
        char when[32];
        gmtime_r(&sec, &tm);
        strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
        buf_printf(ret_expiry, ", \"expires_at\": \"%s\"", when);
    }
    return 0;
}

static void put_field(Buf *body, const char *key, const char *value)
{
    if (!value)
        return;
    buf_printf(body, ", \"%s\": ", key);
    buf_json_str(body, value);
}

static int token_create(Client *c, int argc, char **argv)
{
    static const struct option opts[] = {
        CLIENT_OPTIONS,
        CLIENT_OPT_OUTPUT,
        {"role", required_argument, NULL, OPT_ROLE},
        {"team", required_argument, NULL, OPT_TEAM},
        {"name", required_argument, NULL, OPT_NAME},
        {"node", required_argument, NULL, OPT_NODE},
        {"user", required_argument, NULL, OPT_USER},
        {"expires-in", required_argument, NULL, OPT_EXPIRES_IN},
        {"expires-at", required_argument, NULL, OPT_EXPIRES_AT},
        {NULL, 0, NULL, 0},
    };
    TokenArgs t = {0};
    int rc = client_parse_options(c, argc, argv, "o:h", opts, token_option, &t, token_usage);
    if (rc >= 0)
        return rc;
    if (optind < argc) {
        client_error(c, "unexpected argument '%s'", argv[optind]);
        return 2;
    }
    Buf expiry = {0}, body = {0};
    if ((rc = token_check(c, &t, &expiry)) || (rc = client_check_format(c, table_or_json)) ||
        (rc = client_connect(c))) {
        buf_free(&expiry);
        return rc;
    }
    buf_puts(&body, "{\"role\": ");
    buf_json_str(&body, t.role);
    put_field(&body, "team", t.team);
    put_field(&body, "name", t.name);
    put_field(&body, "node", t.node);
    put_field(&body, "user", t.user);
    buf_puts(&body, buf_str(&expiry));
    buf_putc(&body, '}');
    buf_free(&expiry);
    HttpReply reply = {0};
    json_t *doc = NULL;
    if (body.oom) {
        client_oom(c);
        rc = 1;
    } else if ((rc = client_call(c, NULL, "POST", "/api/v1/tokens", "application/json",
                                 buf_str(&body), body.len, &reply))) {
    } else if (client_json_output(c)) {
        client_print_body(&reply, false);
    } else if (!(rc = client_parse(c, &reply, &doc))) {
        const char *token = json_string_value(json_object_get(doc, "token"));
        if (token) {
            printf("%s\n", token);
        } else {
            client_error(c, "the server's reply holds no 'token'");
            rc = 1;
        }
    }
    buf_free(&body);
    json_decref(doc);
    http_reply_free(&reply);
    return rc;
}

static const TableCol token_cols[] = {
    {"ID", COL_RIGHT, 0, 0, 0},     {"NAME", COL_LEFT, 20, 8, 1},
    {"ROLE", COL_LEFT, 0, 0, 0},    {"TEAM", COL_LEFT, 12, 6, 1},
    {"NODE", COL_LEFT, 12, 4, 1},   {"USER", COL_LEFT, 12, 6, 1},
    {"STATE", COL_LEFT, 0, 0, 0},   {"CREATED", COL_LEFT, 0, 0, 0},
    {"EXPIRES", COL_LEFT, 0, 0, 0}, {"LAST USED", COL_LEFT, 0, 0, 2},
};

static const char *str_or_dash(const json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s && *s ? s : "-";
}

static void time_cell(Table *t, const json_t *o, const char *key, Buf *scratch)
{
    json_t *v = json_object_get(o, key);
    if (!json_is_integer(v)) {
        table_cell(t, "-");
        return;
    }
    buf_reset(scratch);
    view_time_utc(scratch, json_integer_value(v));
    table_cell(t, "%s", buf_str(scratch));
}

static int show_tokens(const Client *c, const json_t *doc)
{
    json_t *list = json_object_get(doc, "tokens");
    if (!json_is_array(list)) {
        client_error(c, "the server's reply holds no 'tokens' list");
        return 1;
    }
    Table t;
    table_init(&t, token_cols, ARRAY_SIZE(token_cols));
    Buf scratch = {0}, out = {0};
    size_t i;
    json_t *o;
    json_array_foreach(list, i, o)
    {
        table_cell(&t, "%lld", (long long)json_integer_value(json_object_get(o, "id")));
        table_cell(&t, "%s", str_or_dash(o, "name"));
        table_cell(&t, "%s", str_or_dash(o, "role"));
        table_cell(&t, "%s", str_or_dash(o, "team"));
        table_cell(&t, "%s", str_or_dash(o, "node"));
        table_cell(&t, "%s", str_or_dash(o, "user"));
        table_cell(&t, "%s", str_or_dash(o, "state"));
        time_cell(&t, o, "created_ms", &scratch);
        time_cell(&t, o, "expires_ms", &scratch);
        time_cell(&t, o, "last_used_ms", &scratch);
    }
    int r = scratch.oom ? -ENOMEM : table_render(&t, CLIENT_WIDTH * 2, &out);
    if (r == 0)
        fputs(buf_str(&out), stdout);
    else
        client_oom(c);
    buf_free(&scratch);
    buf_free(&out);
    table_free(&t);
    return r ? 1 : 0;
}

static int token_list(Client *c, int argc, char **argv)
{
    static const struct option opts[] = {CLIENT_OPTIONS, CLIENT_OPT_OUTPUT, {NULL, 0, NULL, 0}};
    int rc = client_parse_options(c, argc, argv, "o:h", opts, NULL, NULL, token_usage);
    if (rc >= 0)
        return rc;
    if (optind < argc) {
        client_error(c, "unexpected argument '%s'", argv[optind]);
        return 2;
    }
    if ((rc = client_check_format(c, table_or_json)) || (rc = client_connect(c)))
        return rc;
    HttpReply reply = {0};
    json_t *doc = NULL;
    rc = client_call(c, NULL, "GET", "/api/v1/tokens", NULL, NULL, 0, &reply);
    if (rc == 0 && client_json_output(c))
        client_print_body(&reply, false);
    else if (rc == 0 && (rc = client_parse(c, &reply, &doc)) == 0)
        rc = show_tokens(c, doc);
    json_decref(doc);
    http_reply_free(&reply);
    return rc;
}

static int token_revoke(Client *c, int argc, char **argv)
{
    static const struct option opts[] = {CLIENT_OPTIONS, CLIENT_OPT_OUTPUT, {NULL, 0, NULL, 0}};
    int rc = client_parse_options(c, argc, argv, "o:h", opts, NULL, NULL, token_usage);
    if (rc >= 0)
        return rc;
    if (optind >= argc) {
        client_error(c, "give the ids of the tokens to revoke (gpuorch token list shows them)");
        return 2;
    }
    for (int i = optind; i < argc; i++) {
        int64_t id;
        if (client_parse_id(argv[i], &id) < 0) {
            client_error(c, "'%s' is not a token id (a whole number above 0)", argv[i]);
            return 2;
        }
    }
    if ((rc = client_check_format(c, table_or_json)) || (rc = client_connect(c)))
        return rc;
    for (int i = optind; i < argc; i++) {
        char path[64], context[64];
        snprintf(path, sizeof(path), "/api/v1/tokens/%s", argv[i]);
        snprintf(context, sizeof(context), "token %s", argv[i]);
        HttpReply reply = {0};
        int r = client_call(c, context, "DELETE", path, NULL, NULL, 0, &reply);
        if (r == 0 && client_json_output(c))
            client_print_body(&reply, true);
        else if (r == 0)
            printf("revoked token %s\n", argv[i]);
        http_reply_free(&reply);
        if (r && !rc)
            rc = r; /* the others are still revoked: each is its own request */
    }
    return rc;
}

int cmd_token(int argc, char **argv)
{
    Client c;
    client_init(&c, "token");
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        token_usage(stdout);
        return 0;
    }
    static const struct {
        const char *name;
        int (*fn)(Client *c, int argc, char **argv);
    } actions[] = {{"create", token_create}, {"list", token_list}, {"revoke", token_revoke}};
    for (size_t i = 0; argc >= 2 && i < ARRAY_SIZE(actions); i++) {
        if (strcmp(argv[1], actions[i].name))
            continue;
        int rc = actions[i].fn(&c, argc - 1, argv + 1);
        client_free(&c);
        return rc;
    }
    if (argc >= 2)
        client_error(&c, "unknown action '%s' (create, list or revoke)", argv[1]);
    token_usage(stderr);
    client_free(&c);
    return 2;
}
