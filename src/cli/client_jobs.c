/* client_jobs.c: the job commands: `gpuorch submit`, `queue`, `cancel`, `priority`
 * and `logs`, each one or a few requests of docs/api.md. The server decides; these
 * check what they can before sending (ids, states, classes) so a typo gets exit code
 * 2 and a message naming the argument, and print the reply as a line, a table
 * (view.c) or, with -o json, as the server sent it. */
#include "cli/cli.h"
#include "cli/client.h"
#include "cli/view.h"
#include "core/job.h"
#include "util/file.h"
#include "util/macro.h"
#include "util/units.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const table_or_json[] = {"table", "json", NULL};

/* ---- submit ---- */

static void submit_usage(FILE *f)
{
    fprintf(f, "usage: gpuorch submit [OPTIONS] FILE...\n\n"
               "Submits the jobs of each job file (YAML or JSON, docs/job-files.md; '-' reads\n"
               "standard input) and prints each job's id, state and queue position.\n\n"
               "  -o, --output FORMAT  table (default) or json: the server's reply\n" CLIENT_HELP);
}

typedef struct JobFile {
    const char *path;
    char *data;
    size_t len;
} JobFile;

static int read_stdin(char **ret_data, size_t *ret_len)
{
    Buf b = {0};
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof(chunk), stdin)) > 0)
        buf_append(&b, chunk, n);
    if (ferror(stdin) || b.oom) {
        int r = b.oom ? -ENOMEM : -EIO;
        buf_free(&b);
        return r;
    }
    *ret_len = b.len;
    *ret_data = b.data ? buf_steal(&b) : strdup("");
    return *ret_data ? 0 : -ENOMEM;
}

/* application/json for .json, application/yaml for .yaml and .yml. Another name's
 * content opening with { or [ may be JSON or flow-style YAML: text/plain leaves it to
 * the server, which reads it as JSON and, when it is not JSON, as YAML. The rest is
 * YAML, the format people write by hand. */
static const char *job_file_type(const JobFile *f)
{
    const char *dot = strrchr(f->path, '.');
    if (dot && !strcmp(dot, ".json"))
        return "application/json";
    if (dot && (!strcmp(dot, ".yaml") || !strcmp(dot, ".yml")))
        return "application/yaml";
    size_t i = strspn(f->data, " \t\r\n");
    return f->data[i] == '{' || f->data[i] == '[' ? "text/plain" : "application/yaml";
}

static int submit_one(Client *c, const JobFile *f, bool several)
{
    HttpReply reply = {0};
    json_t *doc = NULL;
    Buf text = {0}, err = {0};
    const char *name = strcmp(f->path, "-") ? f->path : "standard input";
    int rc =
        client_call(c, name, "POST", "/api/v1/jobs", job_file_type(f), f->data, f->len, &reply);
    if (rc == 0 && client_json_output(c)) {
        client_print_body(&reply, several);
    } else if (rc == 0 && (rc = client_parse(c, &reply, &doc)) == 0) {
        rc = client_show(c, view_submitted(doc, &text, &err), &text, &err);
    }
    json_decref(doc);
    buf_free(&text);
    buf_free(&err);
    http_reply_free(&reply);
    return rc;
}

int cmd_submit(int argc, char **argv)
{
    static const struct option opts[] = {CLIENT_OPTIONS, CLIENT_OPT_OUTPUT, {NULL, 0, NULL, 0}};
    Client c;
    client_init(&c, "submit");
    int rc = client_parse_options(&c, argc, argv, "o:h", opts, NULL, NULL, submit_usage);
    if (rc >= 0)
        return rc;
    if (optind >= argc) {
        client_error(&c, "no job file given");
        submit_usage(stderr);
        return 2;
    }
    if ((rc = client_check_format(&c, table_or_json)))
        return rc;

    size_t n = (size_t)(argc - optind);
    JobFile *files = calloc(n, sizeof(*files));
    if (!files) {
        client_oom(&c);
        return 1;
    }
    /* read them all first: a missing file submits nothing */
    bool stdin_used = false;
    rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        JobFile *f = &files[i];
        f->path = argv[optind + (int)i];
        int r;
        if (!strcmp(f->path, "-")) {
            if (stdin_used) {
                client_error(&c, "'-' (standard input) may be given once");
                rc = 2;
                break;
            }
            stdin_used = true;
            r = read_stdin(&f->data, &f->len);
        } else {
            r = file_read_all(f->path, &f->data, &f->len);
        }
        if (r < 0) {
            client_error(&c, "cannot read %s: %s",
                         !strcmp(f->path, "-") ? "standard input" : f->path, strerror(-r));
            rc = r == -ENOMEM ? 1 : 2;
        } else if (f->data[strspn(f->data, " \t\r\n")] == '\0') {
            client_error(&c, "%s is empty", !strcmp(f->path, "-") ? "standard input" : f->path);
            rc = 2;
        }
    }
    if (!rc && !(rc = client_connect(&c))) {
        /* each file is its own request (all its jobs or none); one refused does not
         * stop the others, and the exit code is the worst */
        for (size_t i = 0; i < n; i++) {
            int r = submit_one(&c, &files[i], n > 1);
            rc = MAX(rc, r);
        }
    }
    for (size_t i = 0; i < n; i++)
        free(files[i].data);
    free(files);
    client_free(&c);
    return rc;
}

/* ---- queue ---- */

static void queue_usage(FILE *f)
{
    fprintf(f, "usage: gpuorch queue [OPTIONS]\n\n"
               "Lists the active jobs (pending, starting, running, stopping) in queue order:\n"
               "id, name, team, priority, state, queue position, GPU equivalents, age or the\n"
               "expected start, and why a pending job waits.\n\n"
               "  -a, --all            every job, ended ones too\n"
               "  -s, --state LIST     only these states (comma-separated; 'active' = the four\n"
               "                       above): pending, starting, running, stopping,\n"
               "                       succeeded, failed, cancelled\n"
               "  -t, --team TEAM      only this team's jobs\n"
               "  -p, --project NAME   only this project's jobs\n"
               "  -w, --wide           do not cut columns to fit 80 characters\n"
               "  -o, --output FORMAT  table (default) or json: the server's reply\n" CLIENT_HELP);
}

typedef struct QueueArgs {
    const Client *c;
    bool all, wide;
    const char *state, *team, *project;
} QueueArgs;

static bool valid_states(const char *list)
{
    static const char *const known[] = {"active",   "pending",   "starting", "running",
                                        "stopping", "succeeded", "failed",   "cancelled"};
    return client_words_known(list, known, ARRAY_SIZE(known));
}

static int queue_option(void *ctx, int opt, const char *arg)
{
    QueueArgs *q = ctx;
    switch (opt) {
    case 'a':
        q->all = true;
        return 0;
    case 'w':
        q->wide = true;
        return 0;
    case 's':
        if (!valid_states(arg)) {
            client_error(q->c,
                         "--state takes states separated by commas (pending, starting, running, "
                         "stopping, succeeded, failed, cancelled, or active), not '%s'",
                         arg);
            return 2;
        }
        q->state = arg;
        return 0;
    case 't':
        q->team = arg;
        return 0;
    case 'p':
        q->project = arg;
        return 0;
    default:
        return -1;
    }
}

int cmd_queue(int argc, char **argv)
{
    static const struct option opts[] = {
        CLIENT_OPTIONS,
        CLIENT_OPT_OUTPUT,
        {"all", no_argument, NULL, 'a'},
        {"wide", no_argument, NULL, 'w'},
        {"state", required_argument, NULL, 's'},
        {"team", required_argument, NULL, 't'},
        {"project", required_argument, NULL, 'p'},
        {NULL, 0, NULL, 0},
    };
    Client c;
    client_init(&c, "queue");
    QueueArgs q = {.c = &c};
    int rc =
        client_parse_options(&c, argc, argv, "o:has:t:p:w", opts, queue_option, &q, queue_usage);
    if (rc >= 0)
        return rc;
    if (optind < argc) {
        client_error(&c, "unexpected argument '%s'", argv[optind]);
        return 2;
    }
    if (q.all && q.state) {
        client_error(&c, "--all and --state exclude each other");
        return 2;
    }
    if ((rc = client_check_format(&c, table_or_json)) || (rc = client_connect(&c)))
        goto out;

    Buf path = {0}, text = {0}, err = {0};
    HttpReply reply = {0};
    json_t *doc = NULL;
    buf_puts(&path, "/api/v1/jobs");
    if (!q.all)
        client_query(&path, "state", q.state ? q.state : "active");
    if (q.team)
        client_query(&path, "team", q.team);
    if (q.project)
        client_query(&path, "project", q.project);
    if (path.oom) {
        client_oom(&c);
        rc = 1;
    } else if ((rc = client_call(&c, NULL, "GET", buf_str(&path), NULL, NULL, 0, &reply))) {
    } else if (client_json_output(&c)) {
        client_print_body(&reply, false);
    } else if (!(rc = client_parse(&c, &reply, &doc))) {
        const json_t *jobs = json_object_get(doc, "jobs");
        if (json_is_array(jobs) && json_array_size(jobs) == 0)
            printf("%s\n", q.all || q.state ? "no jobs" : "no active jobs");
        else
            rc = client_show(
                &c, view_queue(doc, client_now_ms(), q.wide ? 0 : CLIENT_WIDTH, &text, &err), &text,
                &err);
    }
    json_decref(doc);
    http_reply_free(&reply);
    buf_free(&path);
    buf_free(&text);
    buf_free(&err);
out:
    client_free(&c);
    return rc;
}

/* ---- cancel ---- */

static void cancel_usage(FILE *f)
{
    fprintf(f, "usage: gpuorch cancel [OPTIONS] ID...\n\n"
               "Cancels jobs: a pending job is cancelled at once, a running one is stopped\n"
               "first ('stopping 17'), then cancelled when its workers are gone.\n\n"
               "  -o, --output FORMAT  table (default) or json: the server's reply\n" CLIENT_HELP);
}

/* Parse every ID argument before anything is sent: 0 or 2. */
static int job_ids(const Client *c, int argc, char **argv, int64_t **ret_ids)
{
    int64_t *ids = calloc((size_t)(argc - optind), sizeof(*ids));
    if (!ids) {
        client_oom(c);
        return 1;
    }
    for (int i = optind; i < argc; i++)
        if (client_parse_id(argv[i], &ids[i - optind]) < 0) {
            client_error(c, "a job id is a whole number above 0, not '%s'", argv[i]);
            free(ids);
            return 2;
        }
    *ret_ids = ids;
    return 0;
}

int cmd_cancel(int argc, char **argv)
{
    static const struct option opts[] = {CLIENT_OPTIONS, CLIENT_OPT_OUTPUT, {NULL, 0, NULL, 0}};
    Client c;
    client_init(&c, "cancel");
    int rc = client_parse_options(&c, argc, argv, "o:h", opts, NULL, NULL, cancel_usage);
    if (rc >= 0)
        return rc;
    if (optind >= argc) {
        client_error(&c, "no job id given");
        cancel_usage(stderr);
        return 2;
    }
    int64_t *ids = NULL;
    if ((rc = client_check_format(&c, table_or_json)) || (rc = job_ids(&c, argc, argv, &ids)) ||
        (rc = client_connect(&c)))
        goto out;
    size_t n = (size_t)(argc - optind);
    for (size_t i = 0; i < n; i++) {
        char path[64], context[48];
        snprintf(path, sizeof(path), "/api/v1/jobs/%lld", (long long)ids[i]);
        snprintf(context, sizeof(context), "job %lld", (long long)ids[i]);
        HttpReply reply = {0};
        json_t *doc = NULL;
        Buf text = {0}, err = {0};
        int r = client_call(&c, context, "DELETE", path, NULL, NULL, 0, &reply);
        if (r == 0 && client_json_output(&c))
            client_print_body(&reply, n > 1);
        else if (r == 0 && (r = client_parse(&c, &reply, &doc)) == 0)
            r = client_show(&c, view_cancelled(doc, &text, &err), &text, &err);
        rc = MAX(rc, r);
        json_decref(doc);
        buf_free(&text);
        buf_free(&err);
        http_reply_free(&reply);
    }
out:
    free(ids);
    client_free(&c);
    return rc;
}

/* ---- priority ---- */

static void priority_usage(FILE *f)
{
    fprintf(f, "usage: gpuorch priority [OPTIONS] ID CLASS\n\n"
               "Moves a job to another priority class: production (admins only), high, normal,\n"
               "low or batch (= low). A team's lead may change the team's jobs.\n\n"
               "  -o, --output FORMAT  table (default) or json: the server's reply\n" CLIENT_HELP);
}

int cmd_priority(int argc, char **argv)
{
    static const struct option opts[] = {CLIENT_OPTIONS, CLIENT_OPT_OUTPUT, {NULL, 0, NULL, 0}};
    Client c;
    client_init(&c, "priority");
    int rc = client_parse_options(&c, argc, argv, "o:h", opts, NULL, NULL, priority_usage);
    if (rc >= 0)
        return rc;
    if (argc - optind != 2) {
        priority_usage(stderr);
        return 2;
    }
    int64_t id;
    const char *cls = argv[optind + 1];
    if (client_parse_id(argv[optind], &id) < 0) {
        client_error(&c, "a job id is a whole number above 0, not '%s'", argv[optind]);
        return 2;
    }
    if (priority_from_name(cls) < 0) {
        client_error(&c, "the class must be production, high, normal, low or batch, not '%s'", cls);
        return 2;
    }
    if ((rc = client_check_format(&c, table_or_json)) || (rc = client_connect(&c)))
        goto out;
    char path[64], context[48];
    snprintf(path, sizeof(path), "/api/v1/jobs/%lld", (long long)id);
    snprintf(context, sizeof(context), "job %lld", (long long)id);
    Buf body = {0};
    buf_puts(&body, "{\"priority\": ");
    buf_json_str(&body, cls);
    buf_putc(&body, '}');
    HttpReply reply = {0};
    json_t *doc = NULL;
    if (body.oom) {
        client_oom(&c);
        rc = 1;
    } else if ((rc = client_call(&c, context, "PATCH", path, "application/json", buf_str(&body),
                                 body.len, &reply))) {
    } else if (client_json_output(&c)) {
        client_print_body(&reply, false);
    } else if (!(rc = client_parse(&c, &reply, &doc))) {
        const char *now = json_string_value(json_object_get(doc, "priority"));
        printf("job %lld: priority %s\n", (long long)id, now ? now : cls);
    }
    json_decref(doc);
    http_reply_free(&reply);
    buf_free(&body);
out:
    client_free(&c);
    return rc;
}

/* ---- logs ---- */

static void logs_usage(FILE *f)
{
    fprintf(f, "usage: gpuorch logs [OPTIONS] ID\n\n"
               "Prints the output (stdout and stderr) of one worker of a job.\n\n"
               "  -r, --rank N         the worker (default 0)\n"
               "  -f, --follow         keep printing new output every half second until the\n"
               "                       job has ended\n" CLIENT_HELP);
}

typedef struct LogsArgs {
    const Client *c;
    int64_t rank;
    bool follow;
} LogsArgs;

static int logs_option(void *ctx, int opt, const char *arg)
{
    LogsArgs *l = ctx;
    switch (opt) {
    case 'r':
        if (parse_i64(arg, &l->rank) < 0 || l->rank < 0) {
            client_error(l->c, "--rank must be a whole number from 0, not '%s'", arg);
            return 2;
        }
        return 0;
    case 'f':
        l->follow = true;
        return 0;
    default:
        return -1;
    }
}

/* One poll of the log from *offset: prints what is new and moves *offset. 404 (the
 * worker has written nothing yet) is no news when `quiet`, else an error. Returns 0
 * or the exit code; *ret_got says whether anything new came. */
static int logs_poll(Client *c, int64_t id, int64_t rank, int64_t *offset, bool quiet,
                     bool *ret_got)
{
    char path[128], context[48];
    snprintf(path, sizeof(path), "/api/v1/jobs/%lld/logs?rank=%lld&offset=%lld", (long long)id,
             (long long)rank, (long long)*offset);
    snprintf(context, sizeof(context), "job %lld", (long long)id);
    HttpReply reply = {0};
    int rc = client_request(c, context, "GET", path, NULL, NULL, 0, &reply);
    *ret_got = false;
    if (rc == 0 && reply.status >= 200 && reply.status <= 299) {
        fwrite(reply.body.data ? reply.body.data : "", 1, reply.body.len, stdout);
        fflush(stdout);
        *offset += (int64_t)reply.body.len;
        *ret_got = reply.body.len > 0;
    } else if (rc == 0 && !(quiet && reply.status == 404)) {
        rc = client_reply_error(c, context, &reply);
    }
    http_reply_free(&reply);
    return rc;
}

/* The job's state (a static string of the API's states) or NULL, with the exit code
 * in *ret_rc when asking failed. */
static const char *job_state(Client *c, int64_t id, int *ret_rc)
{
    static const char *const states[] = {"pending",   "starting", "running",  "stopping",
                                         "succeeded", "failed",   "cancelled"};
    char path[64], context[48];
    snprintf(path, sizeof(path), "/api/v1/jobs/%lld", (long long)id);
    snprintf(context, sizeof(context), "job %lld", (long long)id);
    HttpReply reply = {0};
    json_t *doc = NULL;
    const char *state = NULL;
    *ret_rc = client_call(c, context, "GET", path, NULL, NULL, 0, &reply);
    if (!*ret_rc && !(*ret_rc = client_parse(c, &reply, &doc))) {
        const char *s = json_string_value(json_object_get(doc, "state"));
        for (size_t i = 0; s && i < ARRAY_SIZE(states); i++)
            if (!strcmp(s, states[i]))
                state = states[i];
        if (!state) {
            client_error(c, "%s: the server gives the job no state this client knows ('%s')",
                         context, s ? s : "none");
            *ret_rc = 1;
        }
    }
    json_decref(doc);
    http_reply_free(&reply);
    return state;
}

/* Follow: print what comes until the job has ended. Its last output may reach the
 * server a heartbeat after the end, so the end is believed after two quiet polls. */
static int logs_follow(Client *c, int64_t id, int64_t rank)
{
    int64_t offset = 0;
    int quiet_after_end = 0;
    for (;;) {
        int rc;
        const char *state = job_state(c, id, &rc);
        if (!state)
            return rc;
        bool ended = !strcmp(state, "succeeded") || !strcmp(state, "failed") ||
                     !strcmp(state, "cancelled"),
             got;
        if ((rc = logs_poll(c, id, rank, &offset, true, &got)))
            return rc;
        if (ended && !got && ++quiet_after_end >= 2)
            return 0;
        if (got)
            quiet_after_end = 0;
        client_sleep_ms(500);
    }
}

int cmd_logs(int argc, char **argv)
{
    static const struct option opts[] = {
        CLIENT_OPTIONS,
        {"rank", required_argument, NULL, 'r'},
        {"follow", no_argument, NULL, 'f'},
        {NULL, 0, NULL, 0},
    };
    Client c;
    client_init(&c, "logs");
    LogsArgs l = {.c = &c};
    int rc = client_parse_options(&c, argc, argv, "hr:f", opts, logs_option, &l, logs_usage);
    if (rc >= 0)
        return rc;
    if (argc - optind != 1) {
        logs_usage(stderr);
        return 2;
    }
    int64_t id;
    if (client_parse_id(argv[optind], &id) < 0) {
        client_error(&c, "a job id is a whole number above 0, not '%s'", argv[optind]);
        return 2;
    }
    if (!(rc = client_connect(&c))) {
        int64_t offset = 0;
        bool got;
        rc = l.follow ? logs_follow(&c, id, l.rank)
                      : logs_poll(&c, id, l.rank, &offset, false, &got);
    }
    client_free(&c);
    return rc;
}
