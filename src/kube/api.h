/* api.h: the Kubernetes API client: credentials from a kubeconfig file or from the
 * pod's service account, requests with JSON bodies, paged lists and streamed watches
 * (libcurl and jansson underneath). One KubeApi per thread: a watch holds its handle
 * for as long as the stream runs, so the engine keeps one for watching and one for
 * writes (binds, status, events, evictions, the lease). */
#pragma once

#include "util/buf.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Where the API server is and who we are to it, as a kubeconfig's current context
 * names them. Strings owned by the struct (kube_config_free). */
typedef struct KubeConfig {
    char *server;     /* "https://127.0.0.1:6443" */
    char *token;      /* bearer token, or NULL */
    char *ca_pem;     /* the CA bundle (PEM text), or NULL: the system's */
    char *cert_pem;   /* client certificate (PEM), or NULL */
    char *key_pem;    /* its key (PEM), or NULL */
    bool insecure;    /* insecure-skip-tls-verify */
    char *namespace_; /* the context's namespace, or NULL */
    double qps;       /* client-side request rate limit, requests/s; 0: none */
    int burst;        /* requests allowed at once above qps */
} KubeConfig;

/* Read a kubeconfig file (the current context, or `context` when not NULL): token,
 * token-file, certificate-authority(-data), client-certificate(-data),
 * client-key(-data), insecure-skip-tls-verify. 0, or a negative errno with err
 * naming the file and what is wrong (-ENOENT, -EINVAL). */
int kube_config_load(const char *path, const char *context, KubeConfig *ret, Buf *err);
/* The in-cluster credentials: KUBERNETES_SERVICE_HOST/PORT and the service account's
 * token, ca.crt and namespace under dir (NULL: /var/run/secrets/kubernetes.io/
 * serviceaccount). */
int kube_config_in_cluster(const char *dir, KubeConfig *ret, Buf *err);
void kube_config_free(KubeConfig *c);

typedef struct KubeApi KubeApi;

/* A client for cfg (copied). timeout_ms bounds each plain request (0: 30 s); watches
 * are bounded by their own timeoutSeconds. 0, -ENOMEM. */
int kube_api_new(const KubeConfig *cfg, long timeout_ms, KubeApi **ret);
void kube_api_free(KubeApi *a);

/* The reply of one request. */
typedef struct KubeReply {
    long status;  /* HTTP status; 0 before a reply */
    json_t *body; /* the parsed JSON body, or NULL (empty or not JSON) */
    Buf raw;      /* the body as it came */
} KubeReply;
void kube_reply_free(KubeReply *r);

/* The message of a Status reply ("pods \"a\" is forbidden: ..."), or the raw body's
 * first line, or "HTTP <status>": for logs and errors. Owned by r. */
const char *kube_reply_message(KubeReply *r);

/* method "GET", "POST", "PUT", "PATCH", "DELETE"; path with query ("/api/v1/nodes").
 * body may be NULL; content_type NULL means "application/json" (PATCH bodies name
 * theirs: "application/merge-patch+json", "application/strategic-merge-patch+json").
 * 0 when a reply came (any status, *ret reset first), or a negative errno
 * (-ECONNREFUSED, -ETIMEDOUT, -EIO) with err naming the server and the failure.
 * Waits for the client-side rate limit (qps/burst) first. */
int kube_request(KubeApi *a, const char *method, const char *path, const char *content_type,
                 const json_t *body, KubeReply *ret, Buf *err);

/* List every object of a collection, page by page (limit=500, continue tokens). each is
 * called with every item (borrowed) and arg; a negative return stops the list and is
 * returned. ret_rv: the list's metadata.resourceVersion (caller frees). HTTP errors:
 * -EACCES (401/403), -ENOENT (404), -EIO otherwise, err says which and why.
 * path: a collection path with its query ("/api/v1/pods?fieldSelector=..."). */
typedef int (*KubeItemFn)(void *arg, json_t *item);
int kube_list(KubeApi *a, const char *path, KubeItemFn each, void *arg, char **ret_rv, Buf *err);

/* One watch event. type "ADDED", "MODIFIED", "DELETED", "BOOKMARK" or "ERROR"; object
 * borrowed for the call. */
typedef int (*KubeEventFn)(void *arg, const char *type, json_t *object);

/* Watch a collection from resource version rv for at most timeout_s seconds
 * (allowWatchBookmarks on): each event goes to fn as it arrives, and *rv (malloc'd,
 * replaced) follows the newest version seen, so the caller watches again from it.
 * Returns 0 when the server ended the stream (its timeout), -ESTALE when the version
 * expired (the ERROR event with code 410, or HTTP 410): list again; fn's negative
 * return; -EACCES/-EIO as kube_list; -ECONNREFUSED/-ETIMEDOUT when the server went away.
 * stop: polled about every second; when it becomes true the watch ends (0). */
int kube_watch(KubeApi *a, const char *path, char **rv, int timeout_s, KubeEventFn fn, void *arg,
               const volatile bool *stop, Buf *err);

/* Percent-encode s into b for a query value (fieldSelector=spec.nodeName%3D). */
void kube_query_escape(Buf *b, const char *s);
