/* api_jobs.c: the job endpoints of docs/api.md (submit, list, one job, cancel,
 * priority, logs) and the job renderer every endpoint shares. A job's env values and
 * logs are for admins and its team alone (may_read_secrets). Submissions are parsed
 * here (YAML or JSON, errors naming line and field) and handed whole to the
 * model, which checks teams and roles against the job and makes them durable; the
 * reply is built from the model afterwards, under its lock. */
#include "server/api.h"

#include "server/checkpoint.h"
#include "server/placement_json.h"
#include "spec/spec.h"
#include "util/macro.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#define JOBS_DEFAULT_LIMIT 1000
/* Jobs in one submission: each is checked and queued under the state lock, so one
 * request of tens of thousands would hold up every other request and the scheduler. */
#define SUBMIT_MAX_JOBS 1000
#define LOG_MAX_REPLY   (4u << 20) /* a log reply carries at most this; ask again */

static const char *worker_state_name(LifeWorkerState w)
{
    static const char *const names[] = {"assigned", "running", "exited", "failed", "gone"};
    return (unsigned)w < ARRAY_SIZE(names) ? names[w] : "?";
}

json_t *api_json_num(double v)
{
    if (v == floor(v) && fabs(v) < 9007199254740992.0)
        return json_integer((json_int_t)v);
    return json_real(v);
}

static json_t *ms_or_null(int64_t ms)
{
    return ms >= 0 ? json_integer(ms) : json_null();
}

static json_t *str_or_null(const char *s)
{
    return s ? json_string(s) : json_null();
}

static json_t *placement_json(Server *s, const ServerJob *j)
{
    json_t *a = json_array();
    /* while a moved server's replacement starts, its worker is still the old one */
    const Placement *pl = j->life.move == LIFE_MOVE_STARTING ? &j->sj.moved_from : &j->sj.pl;
    size_t n = MIN(j->life.n_workers, pl->n_workers);
    for (size_t i = 0; a && i < n; i++) {
        const WorkerAlloc *w = &pl->workers[i];
        const LifeWorker *run = &j->life.workers[i];
        json_t *o = json_object();
        json_object_set_new(o, "rank", json_integer((json_int_t)i));
        json_object_set_new(o, "node", json_string(s->c->nodes[w->node].name));
        json_object_set_new(o, "gpus", placement_grants_json(s->c, w));
        json_object_set_new(o, "state", json_string(worker_state_name(run->state)));
        if (run->pid > 0)
            json_object_set_new(o, "pid", json_integer(run->pid));
        /* a gang waits for its slowest rank: show how far each has got */
        int64_t step = checkpoint_rank_step(j, i);
        if (step >= 0)
            json_object_set_new(o, "checkpoint_step", json_integer((json_int_t)step));
        json_array_append_new(a, o);
    }
    return a;
}

json_t *api_job_json(Server *s, const ServerJob *j, bool full)
{
    const StoreJob *st = &j->st;
    json_t *o = json_object();
    if (!o)
        return NULL;
    bool pending = st->state == JOB_PENDING;
    bool ended = job_state_ended(st->state);
    json_object_set_new(o, "id", json_integer(st->id));
    json_object_set_new(o, "name", json_string(st->name));
    json_object_set_new(o, "team", str_or_null(st->team));
    json_object_set_new(o, "project", str_or_null(st->project));
    json_object_set_new(o, "user", str_or_null(st->user));
    json_object_set_new(o, "kind", json_string(job_kind_name(j->spec.kind)));
    json_object_set_new(o, "priority", json_string(priority_name(st->priority)));
    json_object_set_new(o, "state", json_string(job_state_name(st->state)));
    json_object_set_new(o, "run", json_integer(st->run));
    json_object_set_new(o, "workers", json_integer(j->spec.workers));
    json_object_set_new(o, "gpu_equivalents", api_json_num(j->gpu_equivalents));
    json_object_set_new(o, "submit_ms", json_integer(st->submit_ms));
    json_object_set_new(o, "start_ms", ms_or_null(st->start_ms));
    json_object_set_new(o, "end_ms", ended ? ms_or_null(st->end_ms) : json_null());
    uint32_t pos = pending ? server_position(s, j) : 0;
    json_object_set_new(o, "position", pos ? json_integer(pos) : json_null());
    json_object_set_new(o, "reason",
                        pending && j->sj.reason[0] ? json_string(j->sj.reason) : json_null());
    json_object_set_new(o, "eta_ms", ms_or_null(pending ? server_eta_ms(s, j) : -1));
    json_object_set_new(o, "exit_code",
                        ended && st->exit_code >= 0 ? json_integer(st->exit_code) : json_null());
    checkpoint_api_fields(st->checkpoint, o);
    json_object_set_new(o, "preemptions", json_integer(st->preemptions));
    if (j->sj.running && j->life.workers)
        json_object_set_new(o, "placement", placement_json(s, j));
    if (full) {
        json_t *spec = st->spec_json ? json_loads(st->spec_json, 0, NULL) : NULL;
        json_object_set_new(o, "spec", spec ? spec : json_null());
    }
    return o;
}

/* A job id from the path: a positive whole number, else 0. */
static int64_t parse_id(const char *s)
{
    if (!s || !*s || *s == '0' || strlen(s) > 18)
        return 0;
    int64_t v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return 0;
        v = v * 10 + (*s - '0');
    }
    return v;
}

/* A whole number from the query, or def when absent; -1 when malformed. */
static int64_t query_count(const HttpRequest *rq, const char *key, int64_t def)
{
    const char *v = http_query(rq, key);
    if (!v)
        return def;
    if (!*v || strlen(v) > 18 || strspn(v, "0123456789") != strlen(v))
        return -1;
    return strtoll(v, NULL, 10);
}

/* A reply of the job as it is now (after a change). */
static void reply_job(Server *s, int64_t id, int status, HttpResponse *rp)
{
    server_lock(s);
    ServerJob *view;
    int err;
    ServerJob *j = server_job_find(s, id, &view, &err);
    json_t *o = j ? api_job_json(s, j, false) : NULL;
    pthread_mutex_unlock(&s->lock);
    server_job_view_free(view);
    if (err < 0)
        http_reply_error(rp, 500, "cannot read job %lld from the store", (long long)id);
    else if (!j)
        http_reply_error(rp, 404, "no job %lld", (long long)id);
    else
        http_reply_json(rp, status, o);
}

/* Was the body a list of jobs (a YAML or JSON sequence) rather than one job? Decides
 * the reply's shape; the parser has already accepted the text. */
static bool body_is_list(const char *p, const char *end)
{
    while (p < end) {
        if (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n') {
            p++;
        } else if (*p == '#' || *p == '%' || (end - p >= 3 && !memcmp(p, "---", 3))) {
            /* comments, directives, the document marker */
            while (p < end && *p != '\n')
                p++;
        } else {
            return *p == '[' || (*p == '-' && (p + 1 == end || p[1] == ' ' || p[1] == '\n' ||
                                               p[1] == '\r' || p[1] == '\t'));
        }
    }
    return false;
}

typedef enum BodyType { BODY_SNIFF, BODY_JSON, BODY_YAML } BodyType;

/* What the Content-Type says a body is: JSON (application/json, anything +json),
 * YAML (application/yaml, x-yaml, text/yaml), or nothing useful (none, curl's default
 * form type, text/plain): then the body's first character decides. */
static BodyType body_type(const char *ct)
{
    size_t n = strcspn(ct, ";");
    while (n && (ct[n - 1] == ' ' || ct[n - 1] == '\t'))
        n--;
    static const char *const yaml[] = {"application/yaml", "application/x-yaml", "text/yaml",
                                       "text/x-yaml"};
    if ((n == 16 && !strncasecmp(ct, "application/json", n)) ||
        (n > 5 && !strncasecmp(ct + n - 5, "+json", 5)))
        return BODY_JSON;
    for (size_t i = 0; i < ARRAY_SIZE(yaml); i++)
        if (n == strlen(yaml[i]) && !strncasecmp(ct, yaml[i], n))
            return BODY_YAML;
    return BODY_SNIFF;
}

/* The first character that is not a blank. */
static char first_char(const char *p, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (p[i] != ' ' && p[i] != '\t' && p[i] != '\r' && p[i] != '\n')
            return p[i];
    return '\0';
}

/* Read the jobs of a body. JSON goes to jansson, which is linear in the text whatever
 * it holds; YAML to libfyaml behind its guard. A body of no declared type that opens
 * like JSON is read as JSON, and as YAML only when it is not JSON at all (YAML's flow
 * style, `{name: a}`, was always accepted); its messages are then YAML's. */
static int parse_jobs(const HttpRequest *rq, JobList *ret, Buf *err)
{
    BodyType t = body_type(rq->content_type);
    char c = first_char(rq->body, rq->body_len);
    if (t == BODY_SNIFF)
        t = c == '{' || c == '[' ? BODY_JSON : BODY_YAML;
    if (t == BODY_YAML)
        return spec_parse_jobs_yaml_body(rq->body, rq->body_len, "request", ret, err);
    int r = spec_parse_jobs_json(rq->body, rq->body_len, "request", ret, err);
    /* past YAML's bound the JSON's own message is the useful one */
    if (r == -EBADMSG && body_type(rq->content_type) == BODY_SNIFF &&
        rq->body_len <= SPEC_BODY_YAML_BYTES) {
        buf_reset(err);
        return spec_parse_jobs_yaml_body(rq->body, rq->body_len, "request", ret, err);
    }
    return r == -EBADMSG ? -EINVAL : r;
}

void api_jobs_submit(Server *s, const HttpRequest *rq, HttpResponse *rp)
{
    if (!rq->body_len) {
        http_reply_error(rp, 400, "the body is empty: send a job or a list of jobs");
        return;
    }
    JobList jobs = {0};
    Buf err = {0};
    int64_t *ids = NULL;
    int r = parse_jobs(rq, &jobs, &err);
    if (r < 0) {
        if (r == -ENOMEM)
            http_reply_error(rp, 500, "out of memory");
        else
            http_reply_error(rp, r == -EFBIG ? 413 : 400, "%s", buf_str(&err));
        goto out;
    }
    if (!jobs.n) {
        http_reply_error(rp, 400, "the request holds no job");
        goto out;
    }
    if (jobs.n > SUBMIT_MAX_JOBS) {
        http_reply_error(rp, 413,
                         "the request holds %zu jobs; one request may submit at most %d: send "
                         "them in several",
                         jobs.n, SUBMIT_MAX_JOBS);
        goto out;
    }
    size_t n = jobs.n;
    bool list = n > 1 || body_is_list(rq->body, rq->body + rq->body_len);
    ids = calloc(n, sizeof(*ids));
    if (!ids) {
        http_reply_error(rp, 500, "out of memory");
        goto out;
    }
    int status = server_submit(s, &rq->who, &jobs, ids, &err);
    if (status / 100 != 2) {
        http_reply_error(rp, status, "%s", buf_str(&err));
        goto out;
    }
    json_t *arr = json_array();
    server_lock(s);
    for (size_t i = 0; i < n; i++) {
        ServerJob *j = server_job(s, ids[i]);
        json_t *o = json_object();
        json_object_set_new(o, "id", json_integer(ids[i]));
        if (j) {
            json_object_set_new(o, "name", json_string(j->st.name));
            json_object_set_new(o, "state", json_string(job_state_name(j->st.state)));
            uint32_t pos = server_position_new(s, j);
            json_object_set_new(o, "position", pos ? json_integer(pos) : json_null());
        }
        json_array_append_new(arr, o);
    }
    pthread_mutex_unlock(&s->lock);
    if (list) {
        http_reply_json(rp, status, json_pack("{s:o}", "jobs", arr));
    } else {
        json_t *one = json_incref(json_array_get(arr, 0));
        json_decref(arr);
        http_reply_json(rp, status, one);
    }
out:
    free(ids);
    job_list_free(&jobs);
    buf_free(&err);
}

typedef struct JobFilter {
    bool states[JOB_STATE_COUNT];
    const char *team, *project;
} JobFilter;

/* "pending,running" or "active" into f->states; 0, or -EINVAL with err naming it. */
static int parse_states(const char *q, JobFilter *f, Buf *err)
{
    if (!q) {
        for (int i = 0; i < JOB_STATE_COUNT; i++)
            f->states[i] = true;
        return 0;
    }
    _cleanup_free_ char *copy = strdup(q);
    if (!copy)
        return -ENOMEM;
    char *save = NULL;
    bool any = false;
    for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        any = true;
        if (!strcmp(t, "active")) {
            for (int i = 0; i < JOB_STATE_COUNT; i++)
                f->states[i] |= !job_state_ended((JobState)i);
            continue;
        }
        int st = job_state_from_name(t);
        if (st < 0) {
            buf_printf(err,
                       "query 'state': unknown state '%s' (pending, starting, running, stopping, "
                       "succeeded, failed, cancelled, or active)",
                       t);
            return -EINVAL;
        }
        f->states[st] = true;
    }
    if (!any) {
        buf_printf(err, "query 'state': empty");
        return -EINVAL;
    }
    return 0;
}

static bool job_matches(const ServerJob *j, const JobFilter *f)
{
    if (!f->states[j->st.state])
        return false;
    if (f->team && (!j->st.team || strcmp(f->team, j->st.team)))
        return false;
    if (f->project && (!j->st.project || strcmp(f->project, j->st.project)))
        return false;
    return true;
}

typedef struct ListEntry {
    ServerJob *j;
    uint32_t pos; /* queue position, UINT32_MAX for jobs not waiting */
} ListEntry;

static int entry_cmp(const void *a, const void *b)
{
    const ListEntry *x = a, *y = b;
    if (x->pos != y->pos)
        return x->pos < y->pos ? -1 : 1;
    return x->j->st.id < y->j->st.id ? -1 : x->j->st.id > y->j->st.id;
}

/* The ended jobs of a listing come from the store, a page at a time. */
typedef struct StoredPage {
    StoreJob *rows;
    size_t n, cap;
} StoredPage;

static int keep_row(void *arg, StoreJob *j)
{
    StoredPage *p = arg;
    if (GROW(p->rows, p->cap, p->n + 1) < 0) {
        store_job_free(j);
        return -ENOMEM;
    }
    p->rows[p->n++] = *j;
    return 0;
}

/* The jobs that match f: the live ones from memory (pending by queue position, then the
 * rest by id), then the ended ones from the store by id, after `after` (a later page:
 * ended ones only). The work is bounded by what is live and by the page asked for, not
 * by everything ever submitted. */
void api_jobs_list(Server *s, const HttpRequest *rq, HttpResponse *rp)
{
    JobFilter f = {.team = http_query(rq, "team"), .project = http_query(rq, "project")};
    Buf err = {0};
    int r = parse_states(http_query(rq, "state"), &f, &err);
    if (r < 0) {
        if (r == -ENOMEM)
            http_reply_error(rp, 500, "out of memory");
        else
            http_reply_error(rp, 400, "%s", buf_str(&err));
        buf_free(&err);
        return;
    }
    int64_t limit = query_count(rq, "limit", JOBS_DEFAULT_LIMIT);
    int64_t after = query_count(rq, "after", 0);
    if (limit < 0 || after < 0) {
        http_reply_error(rp, 400, "query '%s': expected a whole number",
                         limit < 0 ? "limit" : "after");
        return;
    }
    uint32_t ended = 0;
    bool live = false;
    for (int st = 0; st < JOB_STATE_COUNT; st++) {
        if (f.states[st] && job_state_ended((JobState)st))
            ended |= 1u << st;
        live |= f.states[st] && !job_state_ended((JobState)st);
    }

    ListEntry *e = NULL;
    size_t n = 0, cap = 0;
    json_t *arr = json_array();
    server_lock(s);
    for (size_t i = 0; live && !after && i < s->n_resident; i++) {
        ServerJob *j = s->resident[i];
        if (job_state_ended(j->st.state) || !job_matches(j, &f))
            continue;
        if (GROW(e, cap, n + 1) < 0) {
            r = -ENOMEM;
            break;
        }
        uint32_t pos = j->st.state == JOB_PENDING ? server_position(s, j) : 0;
        e[n++] = (ListEntry){.j = j, .pos = pos ? pos - 1 : UINT32_MAX};
    }
    size_t shown = 0;
    if (r == 0) {
        if (n)
            qsort(e, n, sizeof(*e), entry_cmp);
        for (; shown < n && (int64_t)shown < limit; shown++)
            json_array_append_new(arr, api_job_json(s, e[shown].j, false));
    }
    pthread_mutex_unlock(&s->lock);
    free(e);

    /* the ended ones, read without the lock, then shown with it (their specs bound to
     * the cluster as when they ran) */
    StoredPage page = {0};
    int64_t room = limit - (int64_t)shown, next = 0;
    if (r == 0 && ended && room > 0) {
        StoreJobQuery q = {.after_id = after,
                           .states = ended,
                           .team = f.team,
                           .project = f.project,
                           .limit = room};
        r = store_jobs_page(s->store, &q, keep_row, &page);
        if (r == 0 && (int64_t)page.n == room)
            next = page.rows[page.n - 1].id; /* more may follow: the next page starts there */
    }
    if (r == 0 && page.n) {
        server_lock(s);
        for (size_t i = 0; i < page.n && r == 0; i++) {
            ServerJob *view = NULL;
            r = server_job_view(s, &page.rows[i], &view);
            page.rows[i] = (StoreJob){0}; /* the view took it */
            if (view)
                json_array_append_new(arr, api_job_json(s, view, false));
            server_job_view_free(view);
        }
        pthread_mutex_unlock(&s->lock);
    }
    for (size_t i = 0; i < page.n; i++)
        store_job_free(&page.rows[i]);
    free(page.rows);
    if (r < 0) {
        json_decref(arr);
        http_reply_error(rp, 500,
                         r == -ENOMEM ? "out of memory" : "cannot read the jobs from the store");
        return;
    }
    json_t *o = json_pack("{s:o}", "jobs", arr);
    if (next)
        json_object_set_new(o, "next_after", json_integer(next));
    http_reply_json(rp, 200, o);
}

static int add_event(void *arg, int64_t t_ms, const char *type, const char *detail)
{
    json_t *o =
        json_pack("{s:I,s:s,s:s?}", "t_ms", (json_int_t)t_ms, "type", type, "detail", detail);
    return o ? json_array_append_new(arg, o) : -ENOMEM;
}

/* May who read job j's secrets, its env values and its logs? As Kubernetes keeps
 * Secrets to a namespace: an admin, and the leads and members of the job's team; not a
 * viewer, another team, or a job without a team unless an admin. (Agent tokens read
 * nothing here: the route table refuses them; a node's agent is sent the env of the
 * workers it runs through its heartbeat.) */
static bool may_read_secrets(const Caller *who, const ServerJob *j)
{
    if (who->role == ROLE_ADMIN)
        return true;
    if (who->role != ROLE_LEAD && who->role != ROLE_MEMBER)
        return false;
    return j->st.team && who->team[0] && !strcmp(j->st.team, who->team);
}

/* The spec's env values replaced by null, the names kept: what the job needs is
 * visible, not its secrets. "env_redacted": true says so. */
static void redact_env(json_t *o)
{
    json_t *env = json_object_get(json_object_get(o, "spec"), "env");
    if (!json_is_object(env))
        return;
    const char *k;
    json_t *v;
    void *next;
    json_object_foreach_safe(env, next, k, v)
    {
        json_object_set_new(env, k, json_null());
    }
    json_object_set_new(o, "env_redacted", json_true());
}

void api_job_get(Server *s, const HttpRequest *rq, HttpResponse *rp)
{
    int64_t id = parse_id(rq->params[0]);
    server_lock(s);
    ServerJob *view;
    int err;
    ServerJob *j = server_job_find(s, id, &view, &err);
    json_t *o = j ? api_job_json(s, j, true) : NULL;
    bool secrets = j && may_read_secrets(&rq->who, j);
    pthread_mutex_unlock(&s->lock);
    server_job_view_free(view);
    if (err < 0) {
        http_reply_error(rp, 500, "cannot read job %s from the store", rq->params[0]);
        return;
    }
    if (!j) {
        http_reply_error(rp, 404, "no job %s", rq->params[0]);
        return;
    }
    if (!secrets)
        redact_env(o);
    /* the events come from the store, read without holding the model's lock */
    json_t *ev = json_array();
    if (store_events_for(s->store, id, add_event, ev) < 0) {
        json_decref(ev);
        json_decref(o);
        http_reply_error(rp, 500, "cannot read the events of job %lld from the store",
                         (long long)id);
        return;
    }
    json_object_set_new(o, "events", ev);
    http_reply_json(rp, 200, o);
}

void api_job_cancel(Server *s, const HttpRequest *rq, HttpResponse *rp)
{
    int64_t id = parse_id(rq->params[0]);
    if (!id) {
        http_reply_error(rp, 404, "no job %s", rq->params[0]);
        return;
    }
    Buf err = {0};
    int status = server_cancel(s, &rq->who, id, &err);
    if (status / 100 == 2)
        reply_job(s, id, status, rp);
    else
        http_reply_error(rp, status, "%s", buf_str(&err));
    buf_free(&err);
}

void api_job_patch(Server *s, const HttpRequest *rq, HttpResponse *rp)
{
    int64_t id = parse_id(rq->params[0]);
    if (!id) {
        http_reply_error(rp, 404, "no job %s", rq->params[0]);
        return;
    }
    json_t *body = http_body_json(rq, rp);
    if (!body)
        return;
    const char *key;
    json_t *v;
    json_object_foreach(body, key, v)
    {
        if (strcmp(key, "priority") && strcmp(key, "before") && strcmp(key, "after")) {
            http_reply_error(rp, 400,
                             "unknown field '%s' (a job's priority, or its place: 'before' or "
                             "'after' another job)",
                             key);
            json_decref(body);
            return;
        }
    }
    json_t *pv = json_object_get(body, "priority");
    json_t *bv = json_object_get(body, "before"), *av = json_object_get(body, "after");
    int p = json_is_string(pv) ? priority_from_name(json_string_value(pv)) : -1;
    const char *bad = NULL;
    if (pv && p < 0)
        bad = "field 'priority': expected production, high, normal or low";
    else if (!pv && !bv && !av)
        bad = "give 'priority', or 'before' or 'after' with another job's id";
    else if (bv && av)
        bad = "give 'before' or 'after', not both";
    else if (pv && (bv || av))
        bad = "change the priority and the place in two requests (the place is among the "
              "jobs of the new class)";
    else if ((bv && (!json_is_integer(bv) || json_integer_value(bv) < 1)) ||
             (av && (!json_is_integer(av) || json_integer_value(av) < 1)))
        bad = bv ? "field 'before': expected a job id" : "field 'after': expected a job id";
    if (bad) {
        http_reply_error(rp, 400, "%s", bad);
        json_decref(body);
        return;
    }
    int64_t anchor = json_integer_value(bv ? bv : av);
    bool after = av != NULL;
    json_decref(body);
    Buf err = {0};
    int status = 200;
    if (pv)
        status = server_set_priority(s, &rq->who, id, (Priority)p, &err);
    if (status / 100 == 2 && (bv || av))
        status = server_move(s, &rq->who, id, anchor, after, &err);
    if (status / 100 == 2)
        reply_job(s, id, status, rp);
    else
        http_reply_error(rp, status, "%s", buf_str(&err));
    buf_free(&err);
}

void api_job_logs(Server *s, const HttpRequest *rq, HttpResponse *rp)
{
    int64_t id = parse_id(rq->params[0]);
    int64_t rank = query_count(rq, "rank", 0);
    int64_t offset = query_count(rq, "offset", 0);
    int64_t run = query_count(rq, "run", 0); /* 0: the latest */
    if (rank < 0 || offset < 0 || run < 0) {
        http_reply_error(rp, 400, "query '%s': expected a whole number",
                         rank < 0     ? "rank"
                         : offset < 0 ? "offset"
                                      : "run");
        return;
    }
    server_lock(s);
    ServerJob *view;
    int err;
    ServerJob *j = server_job_find(s, id, &view, &err);
    uint32_t workers = j ? j->spec.workers : 0, runs = j ? j->st.run : 0;
    bool secrets = j && may_read_secrets(&rq->who, j);
    pthread_mutex_unlock(&s->lock);
    server_job_view_free(view);
    if (err < 0) {
        http_reply_error(rp, 500, "cannot read job %s from the store", rq->params[0]);
        return;
    }
    if (!j) {
        http_reply_error(rp, 404, "no job %s", rq->params[0]);
        return;
    }
    if (!secrets) {
        http_reply_error(rp, 403,
                         "a %s token may not read the logs of job %lld: only admins and the "
                         "leads and members of its team may",
                         role_name(rq->who.role), (long long)id);
        return;
    }
    if (rank >= workers) {
        http_reply_error(rp, 400, "query 'rank': job %lld has ranks 0 to %u", (long long)id,
                         workers ? workers - 1 : 0);
        return;
    }
    if (run > runs) {
        http_reply_error(rp, 404, "job %lld has had %u runs", (long long)id, runs);
        return;
    }
    if (!run)
        run = runs;
    Buf path = {0};
    /* the name api_agent_logs writes */
    buf_printf(&path, "%s/%lld-%lld-%lld.log", s->log_dir, (long long)id, (long long)rank,
               (long long)run);
    int fd = open(buf_str(&path), O_RDONLY | O_CLOEXEC);
    buf_free(&path);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) < 0 || sb.st_size == 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        if (fd < 0 && e != ENOENT)
            http_reply_error(rp, 500, "cannot read the log of job %lld rank %lld: %s",
                             (long long)id, (long long)rank, strerror(e));
        else
            http_reply_error(rp, 404, "job %lld rank %lld has written nothing yet", (long long)id,
                             (long long)rank);
        return;
    }
    size_t want = offset >= sb.st_size ? 0 : (size_t)MIN(sb.st_size - offset, LOG_MAX_REPLY);
    char *data = malloc(want + 1);
    if (!data) {
        close(fd);
        http_reply_error(rp, 500, "out of memory");
        return;
    }
    ssize_t got = pread(fd, data, want, offset);
    int e = errno;
    close(fd);
    if (got < 0) {
        free(data);
        http_reply_error(rp, 500, "cannot read the log of job %lld rank %lld: %s", (long long)id,
                         (long long)rank, strerror(e));
        return;
    }
    data[got] = '\0';
    buf_free(&rp->body);
    rp->body = (Buf){.data = data, .len = (size_t)got, .cap = want + 1};
    rp->status = 200;
    rp->content_type = "text/plain; charset=utf-8";
}
