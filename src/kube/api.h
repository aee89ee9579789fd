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
 * names them. Strings owned by the struct (kube_config_free). The loaders leave qps
 * and burst 0 (no limit): the engine sets its own. */
typedef struct KubeConfig {
    char *server;     /* "https://127.0.0.1:6443" */
    char *token;      /* bearer token, or NULL */
    char *ca_pem;     /* the CA bundle (PEM text), or NULL: the system's */
    char *cert_pem;   /* client certificate (PEM), or NULL */
    char *key_pem;    /* its key (PEM), or NULL */
    bool insecure;    /* insecure-skip-tls-verify */
    char *namespace_; /* the context's namespace, or NULL */
    double qps;       /* client-side request rate limit, requests/s; 0: none */
    int burst;        /* requests allowed at once above qps (below 1 counts as 1) */
} KubeConfig;

/* Read a kubeconfig file (the current context, or `context` when not NULL): token,
 * tokenFile, certificate-authority(-data), client-certificate(-data),
 * client-key(-data), insecure-skip-tls-verify, the context's namespace. Files it names
 * are relative to its directory; -data fields are base64 and win over the files, a
 * token over a tokenFile; a context without a user is anonymous. Credential plugins
 * (exec, auth-provider) are not run. 0, or a negative errno with err naming the file
 * and what is wrong (-ENOENT and the like for a file that cannot be read, -EINVAL). */
int kube_config_load(const char *path, const char *context, KubeConfig *ret, Buf *err);
/* The in-cluster credentials: KUBERNETES_SERVICE_HOST/PORT and the service account's
 * token, ca.crt and namespace under dir (NULL: /var/run/secrets/kubernetes.io/
 * serviceaccount). -ENOENT when the variables are not set or a file is missing (the
 * namespace may be), with err naming which. */
int kube_config_in_cluster(const char *dir, KubeConfig *ret, Buf *err);
void kube_config_free(KubeConfig *c);

typedef struct KubeApi KubeApi;

/* A client for cfg (copied). timeout_ms bounds each plain request (0: 30 s); watches
 * are bounded by their own timeoutSeconds. 0, -ENOMEM. */
int kube_api_new(const KubeConfig *cfg, long timeout_ms, KubeApi **ret);
void kube_api_free(KubeApi *a);

/* The reply of one request. */
typedef struct KubeReply {
    long status;   /* HTTP status; 0 before a reply */
    json_t *body;  /* the parsed JSON body, or NULL (empty or not JSON) */
    Buf raw;       /* the body as it came */
    char *message; /* kube_reply_message's text once asked for, owned; NULL before */
} KubeReply;
void kube_reply_free(KubeReply *r);

/* The message of a Status reply ("pods \"a\" is forbidden: ..."), or the raw body's
 * first line, or "HTTP <status>": for logs and errors. Owned by r. */
const char *kube_reply_message(KubeReply *r);

/* method "GET", "POST", "PUT", "PATCH", "DELETE"; path with query ("/api/v1/nodes").
 * body may be NULL; content_type NULL means "application/json" (PATCH bodies name
 * theirs: "application/merge-patch+json", "application/strategic-merge-patch+json").
 * 0 when a reply came (any status, *ret reset first), or a negative errno
 * (-ECONNREFUSED: nothing listens, -ECONNRESET: the connection broke off, -ETIMEDOUT,
 * -ENOMEM, -EIO: anything else, TLS included) with err naming the server and the
 * failure. Waits for the client-side rate limit (qps/burst) first. */
int kube_request(KubeApi *a, const char *method, const char *path, const char *content_type,
                 const json_t *body, KubeReply *ret, Buf *err);

/* List every object of a collection, page by page (limit=500, continue tokens). each is
 * called with every item (borrowed, for the call) and arg; a negative return stops the
 * list and is returned. ret_rv (may be NULL): the list's metadata.resourceVersion
 * (caller frees). HTTP errors: -EACCES (401/403), -ENOENT (404), -ESTALE (410: a
 * continue token expired between pages; items already given: list again), -EIO
 * otherwise, err says which and why; transport errors as kube_request.
 * path: a collection path with its query ("/api/v1/pods?fieldSelector=..."). */
typedef int (*KubeItemFn)(void *arg, json_t *item);
int kube_list(KubeApi *a, const char *path, KubeItemFn each, void *arg, char **ret_rv, Buf *err);

/* One watch event. type "ADDED", "MODIFIED", "DELETED" or "BOOKMARK" (a BOOKMARK's
 * object carries only its kind and metadata.resourceVersion); object borrowed for the
 * call. ERROR events end the watch instead (kube_watch's return). */
typedef int (*KubeEventFn)(void *arg, const char *type, json_t *object);

/* Watch a collection from resource version *rv for at most timeout_s (> 0) seconds
 * (allowWatchBookmarks on): each event goes to fn as it arrives, and *rv (malloc'd,
 * replaced) follows the newest version fn took, so the caller watches again from it
 * (*rv NULL: from now, the server first sends every object as ADDED).
 * Returns 0 when the server ended the stream (its timeout), -ESTALE when the version
 * expired (the ERROR event with code 410, or HTTP 410): list again; fn's negative
 * return; -EACCES/-ENOENT/-EIO as kube_list (an ERROR event's code counts as an HTTP
 * status, its message goes to err); -EIO for a line that is not an event;
 * -ECONNREFUSED/-ECONNRESET/-ETIMEDOUT when the server went away. curl's own limit is
 * timeout_s + 30 s: an idle stream is not cut short before that.
 * stop (may be NULL): polled about every second; when it becomes true the watch ends
 * (0), *rv as far as fn got. */
int kube_watch(KubeApi *a, const char *path, char **rv, int timeout_s, KubeEventFn fn, void *arg,
               const volatile bool *stop, Buf *err);

/* Percent-encode s into b for a query value (fieldSelector=spec.nodeName%3D): every
 * byte but letters, digits and -._~. Out of memory marks b (b->oom). */
void kube_query_escape(Buf *b, const char *s);
