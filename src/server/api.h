/* api.h: the handlers of HTTP API v1 (docs/api.md), one per route, and the job
 * renderer they share. http.c routes to them after checking the caller's role;
 * each handler takes the state lock itself where it reads the state. */
#pragma once

#include "server/http.h"
#include "server/state.h"

#include <jansson.h>
#include <stdbool.h>

/* A job as the API shows it (docs/api.md, GET /jobs); full adds its spec (GET
 * /jobs/{id} adds the events from the store after dropping the lock). Call with
 * s->lock held. New reference, NULL when out of memory. */
json_t *api_job_json(Server *s, const ServerJob *j, bool full);

/* A number as JSON: an integer when it is whole (8, not 8.0), else a real. */
json_t *api_json_num(double v);

/* api_jobs.c */
void api_jobs_submit(Server *s, const HttpRequest *rq, HttpResponse *rp);
void api_jobs_list(Server *s, const HttpRequest *rq, HttpResponse *rp);
void api_job_get(Server *s, const HttpRequest *rq, HttpResponse *rp);    /* params[0] = id */
void api_job_cancel(Server *s, const HttpRequest *rq, HttpResponse *rp); /* params[0] = id */
void api_job_patch(Server *s, const HttpRequest *rq, HttpResponse *rp);  /* params[0] = id */
void api_job_logs(Server *s, const HttpRequest *rq, HttpResponse *rp);   /* params[0] = id */

/* api_nodes.c */
void api_nodes_list(Server *s, const HttpRequest *rq, HttpResponse *rp);

/* api_teams.c */
void api_teams_list(Server *s, const HttpRequest *rq, HttpResponse *rp);
void api_team_get(Server *s, const HttpRequest *rq, HttpResponse *rp); /* params[0] = name */
void api_team_put(Server *s, const HttpRequest *rq, HttpResponse *rp); /* params[0] = name */

/* api_usage.c */
void api_usage(Server *s, const HttpRequest *rq, HttpResponse *rp);

/* api_tokens.c */
void api_tokens_create(Server *s, const HttpRequest *rq, HttpResponse *rp);
void api_tokens_list(Server *s, const HttpRequest *rq, HttpResponse *rp);
void api_tokens_revoke(Server *s, const HttpRequest *rq, HttpResponse *rp);

/* api_whoami.c: the caller's role, team and token id */
void api_whoami(Server *s, const HttpRequest *rq, HttpResponse *rp);

/* api_learned.c: the GPU memory learned per workload class, and its reset */
void api_learned(Server *s, const HttpRequest *rq, HttpResponse *rp);
/* params[0] = the key; routed as a read, the handler lets only an admin or the lead of
 * the key's team through (403) */
void api_learned_reset(Server *s, const HttpRequest *rq, HttpResponse *rp);

/* api_utilization.c: the last hour of utilisation samples (utilization.h) */
void api_utilization(Server *s, const HttpRequest *rq, HttpResponse *rp);

/* metrics.c (public routes) */
void api_metrics(Server *s, const HttpRequest *rq, HttpResponse *rp);
void api_healthz(Server *s, const HttpRequest *rq, HttpResponse *rp);
void api_readyz(Server *s, const HttpRequest *rq, HttpResponse *rp);

/* api_agent.c (role agent only) */
void api_agent_heartbeat(Server *s, const HttpRequest *rq, HttpResponse *rp);
/* params[0] = job, params[1] = rank */
void api_agent_logs(Server *s, const HttpRequest *rq, HttpResponse *rp);
