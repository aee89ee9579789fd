/* server_cmd.c: `gpuorch server`: open the model (cluster, store, scheduler thread),
 * write the first admin token, serve the HTTP API, and stop cleanly on SIGINT or
 * SIGTERM. The signals are blocked before any thread starts, so every thread inherits
 * the mask and only the main thread, in sigwait, ever receives them. */
#include "cli/cli.h"
#include "cli/server_kube.h"
#include "cli/server_lead.h"
#include "core/cluster.h"
#include "server/auth.h"
#include "server/http.h"
#include "server/provider.h"
#include "server/state.h"
#include "util/macro.h"
#include "util/units.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define DEFAULT_DB     "sqlite:./var/gpuorch.db"
#define DEFAULT_LISTEN "127.0.0.1:8080"

/* the lifecycle's defaults (life/life.h), as the help quotes them */
#define HEARTBEAT_TEXT  STRINGIFY(LIFE_HEARTBEAT_MS)
#define LOST_AFTER_TEXT STRINGIFY(LIFE_LOST_AFTER_MS)
#define LOST_GRACE_TEXT STRINGIFY(LIFE_LOST_GRACE_MS)

/* options with no letter, past the Kubernetes engine's (server_kube.h) */
enum { OPT_RETENTION = 0x200, OPT_MAX_ENDED, OPT_ADVERTISE };

static void usage(FILE *f)
{
    fprintf(f,
            "usage: gpuorch server --config FILE [--db sqlite:PATH|postgres://...]\n"
            "                      [--listen HOST:PORT] [--advertise-url URL] [--data-dir DIR]\n"
            "                      [--heartbeat-ms N] [--lost-after-ms N] [--lost-grace-ms N]\n"
            "                      [--min-runtime-s N] [--web DIR] [--conns-per-ip N]\n"
            "                      [--job-retention-s N] [--max-ended-jobs N]\n"
            "                      [--provider none|sim|exec:SCRIPT]\n"
            "                      [--kubernetes [--kubeconfig FILE] [--kube-context NAME]\n"
            "                       [--scheduler-name NAME] [--leader-elect]\n"
            "                       [--lease NAMESPACE/NAME] [--mig-configmap NAMESPACE/NAME]\n"
            "                       [--kube-qps N] [--kube-burst N] [--kube-writers N]\n"
            "                       [--mig-timeout-s N]]\n\n"
            "Runs the control plane: the HTTP API (docs/api.md), the store and the scheduler.\n"
            "  --config FILE       the cluster spec (docs/cluster-spec.md)\n"
            "  --db URL            the store (default " DEFAULT_DB ")\n"
            "  --listen HOST:PORT  where the API listens (default " DEFAULT_LISTEN
            "; port 0: any free one)\n"
            "  --advertise-url URL how clients reach this server, which standbys of the same\n"
            "                      store send them to (default http://HOST:PORT of --listen;\n"
            "                      docs/ha.md)\n"
            "  --data-dir DIR      admin.token and job logs (default: the database's directory)\n"
            "  --heartbeat-ms N    how often agents report (default " HEARTBEAT_TEXT ")\n"
            "  --lost-after-ms N   silence after which a node is lost and takes no new work\n"
            "                      (default " LOST_AFTER_TEXT ")\n"
            "  --lost-grace-ms N   how long the work running on a lost node waits for it to\n"
            "                      come back before its jobs are requeued (default " LOST_GRACE_TEXT
            ";\n"
            "                      0: at once)\n"
            "  --min-runtime-s N   how long a job runs before it may be preempted (default 300;\n"
            "                      production does not wait for it)\n"
            "  --job-retention-s N how long an ended job stays in memory before it is read from\n"
            "                      the store when asked for (default 300, as Slurm's MinJobAge;\n"
            "                      0: at once)\n"
            "  --max-ended-jobs N  and at most how many ended jobs stay (default 10000)\n"
            "  --conns-per-ip N    open connections one client address may hold (default 64;\n"
            "                      0: only the server's 1000 in all)\n"
            "  --web DIR           the portal's files, served at / (default: $GPUORCH_WEB, else\n"
            "                      ./web, else the installed copy)\n"
            "  --provider P        who starts and stops the nodes of autoscaled pools: none\n"
            "                      (default), sim (local agents with simulated GPUs) or\n"
            "                      exec:SCRIPT (SCRIPT create|delete POOL NODE)\n"
            "  --kubernetes        schedule the GPU pods of a Kubernetes cluster "
            "(docs/kubernetes.md):\n"
            "                      nodes from Node objects, jobs from pods with schedulerName\n"
            "                      gpuorch; --config then holds the teams only\n"
            "  --kubeconfig FILE   its API server and credentials (default: in-cluster)\n"
            "  --scheduler-name N  the pods' spec.schedulerName that is ours (default gpuorch)\n"
            "  --leader-elect      of several replicas only the Lease holder schedules\n"
            "  --lease NS/NAME     that Lease (default gpuorch-system/gpuorch)\n"
            "  --mig-configmap NS/NAME  the mig-parted config the MIG manager reads\n"
            "                      (default gpu-operator/gpuorch-mig-parted-config)\n"
            "  --kube-qps N        API requests per second at most (default: no limit)\n"
            "  --kube-burst N      requests above that at once (default: N of --kube-qps)\n"
            "  --kube-writers N    API writes under way at once (default 4)\n"
            "  --mig-timeout-s N   a MIG change not done by then has failed (default 600)\n"
            "On the first start an admin token is written to DIR/admin.token (mode 0600).\n");
}

/* Where the portal's files are: --web, else $GPUORCH_WEB, else ./web when it is there
 * (a source tree), else the installed copy when it is there; NULL: no portal. */
static const char *web_dir(const char *flag)
{
    if (flag)
        return flag;
    const char *env = getenv("GPUORCH_WEB");
    if (env && *env)
        return env;
    struct stat st;
    if (stat("web/index.html", &st) == 0)
        return "web";
#ifdef GPUORCH_WEB_DIR
    if (stat(GPUORCH_WEB_DIR "/index.html", &st) == 0)
        return GPUORCH_WEB_DIR;
#endif
    return NULL;
}

/* The directory the SQLite file lives in ("sqlite:./var/x.db" -> "./var"), or NULL for
 * another back end. Malloc'd; *ret NULL when there is none. */
static int db_dir(const char *url, char **ret)
{
    const char *path = url;
    if (!strncmp(url, "sqlite:", 7))
        path = url + 7;
    else if (strstr(url, "://"))
        return *ret = NULL, 0;
    const char *slash = strrchr(path, '/');
    char *d = slash ? strndup(path, (size_t)(slash - path)) : strdup(".");
    if (!d)
        return -ENOMEM;
    if (!*d) { /* "/x.db" */
        free(d);
        d = strdup("/");
        if (!d)
            return -ENOMEM;
    }
    *ret = d;
    return 0;
}

static int parse_ms_flag(const char *flag, const char *v, int64_t *ret)
{
    int64_t x;
    if (parse_i64(v, &x) < 0 || x <= 0) {
        fprintf(stderr,
                "gpuorch server: %s must be a whole number of milliseconds above 0, not "
                "'%s'\n",
                flag, v);
        return -EINVAL;
    }
    *ret = x;
    return 0;
}

int cmd_server(int argc, char **argv)
{
    static const struct option opts[] = {
        {"config", required_argument, NULL, 'c'},
        {"db", required_argument, NULL, 'd'},
        {"listen", required_argument, NULL, 'l'},
        {"advertise-url", required_argument, NULL, OPT_ADVERTISE},
        {"data-dir", required_argument, NULL, 'D'},
        {"heartbeat-ms", required_argument, NULL, 'H'},
        {"lost-after-ms", required_argument, NULL, 'L'},
        {"lost-grace-ms", required_argument, NULL, 'G'},
        {"min-runtime-s", required_argument, NULL, 'm'},
        {"job-retention-s", required_argument, NULL, OPT_RETENTION},
        {"max-ended-jobs", required_argument, NULL, OPT_MAX_ENDED},
        {"web", required_argument, NULL, 'w'},
        {"conns-per-ip", required_argument, NULL, 'C'},
        {"provider", required_argument, NULL, 'P'},
        {"help", no_argument, NULL, 'h'},
        {"kubernetes", no_argument, NULL, OPT_KUBE},
        {"kubeconfig", required_argument, NULL, OPT_KUBECONFIG},
        {"kube-context", required_argument, NULL, OPT_KUBE_CONTEXT},
        {"scheduler-name", required_argument, NULL, OPT_SCHEDULER_NAME},
        {"leader-elect", no_argument, NULL, OPT_LEADER_ELECT},
        {"lease", required_argument, NULL, OPT_LEASE},
        {"mig-configmap", required_argument, NULL, OPT_MIG_CONFIGMAP},
        {"kube-qps", required_argument, NULL, OPT_KUBE_QPS},
        {"kube-burst", required_argument, NULL, OPT_KUBE_BURST},
        {"kube-writers", required_argument, NULL, OPT_KUBE_WRITERS},
        {"mig-timeout-s", required_argument, NULL, OPT_MIG_TIMEOUT},
        {NULL, 0, NULL, 0},
    };
    ServerOptions o = {.db_url = DEFAULT_DB, .min_runtime_ms = -1, .lost_grace_ms = -1};
    bool kube = false;
    KubeOptions ko;
    kube_options_defaults(&ko);
    const char *listen = DEFAULT_LISTEN, *data_dir = NULL, *web = NULL, *advertise = NULL;
    _cleanup_free_ char *script = NULL;
    HttpLimits lim = {.conns_per_ip = HTTP_CONNS_PER_IP};
    int opt;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "c:d:l:D:H:L:G:m:w:P:C:h", opts, NULL)) != -1) {
        switch (opt) {
        case 'c':
            o.config_path = optarg;
            break;
        case 'd':
            o.db_url = optarg;
            break;
        case 'l':
            listen = optarg;
            break;
        case 'D':
            data_dir = optarg;
            break;
        case OPT_ADVERTISE:
            advertise = optarg;
            break;
        case 'w':
            web = optarg;
            break;
        case 'P': {
            Buf perr = {0};
            free(script);
            script = NULL;
            if (provider_parse(optarg, &o.provider, &script, &perr) < 0) {
                fprintf(stderr, "gpuorch server: %s\n", buf_str(&perr));
                buf_free(&perr);
                return 2;
            }
            o.provider_script = script;
            break;
        }
        case 'H':
            if (parse_ms_flag("--heartbeat-ms", optarg, &o.heartbeat_ms) < 0)
                return 2;
            break;
        case 'L':
            if (parse_ms_flag("--lost-after-ms", optarg, &o.lost_after_ms) < 0)
                return 2;
            break;
        case 'G':
            if (parse_i64(optarg, &o.lost_grace_ms) < 0 || o.lost_grace_ms < 0) {
                fprintf(stderr,
                        "gpuorch server: --lost-grace-ms must be a whole number of milliseconds, "
                        "0 or more, not '%s'\n",
                        optarg);
                return 2;
            }
            break;
        case 'm': {
            int64_t v;
            if (parse_i64(optarg, &v) < 0 || v < 0 || v > INT64_MAX / 1000) {
                fprintf(stderr,
                        "gpuorch server: --min-runtime-s must be a whole number of seconds, not "
                        "'%s'\n",
                        optarg);
                return 2;
            }
            o.min_runtime_ms = v * 1000;
            break;
        }
        case OPT_RETENTION:
        case OPT_MAX_ENDED: {
            int64_t v;
            bool retention = opt == OPT_RETENTION;
            if (parse_i64(optarg, &v) < 0 || v < 0 || v > INT64_MAX / 1000 ||
                (!retention && v == 0)) {
                fprintf(stderr,
                        retention ? "gpuorch server: --job-retention-s must be a whole number "
                                    "of seconds, not '%s'\n"
                                  : "gpuorch server: --max-ended-jobs must be a whole number "
                                    "above 0, not '%s'\n",
                        optarg);
                return 2;
            }
            /* 0 s: at once (1 ms: ServerOptions reads 0 as the default) */
            if (retention)
                o.job_retention_ms = v ? v * 1000 : 1;
            else
                o.max_ended_jobs = v;
            break;
        }
        case 'C': {
            int64_t v;
            if (parse_i64(optarg, &v) < 0 || v < 0 || v > 1000) {
                fprintf(stderr,
                        "gpuorch server: --conns-per-ip must be a whole number from 0 to 1000, "
                        "not '%s'\n",
                        optarg);
                return 2;
            }
            lim.conns_per_ip = (unsigned)v;
            break;
        }
        case 'h':
            usage(stdout);
            return 0;
        case OPT_KUBE:
        case OPT_KUBECONFIG:
        case OPT_KUBE_CONTEXT:
        case OPT_SCHEDULER_NAME:
        case OPT_LEADER_ELECT:
        case OPT_LEASE:
        case OPT_MIG_CONFIGMAP:
        case OPT_KUBE_QPS:
        case OPT_KUBE_BURST:
        case OPT_KUBE_WRITERS:
        case OPT_MIG_TIMEOUT:
            kube = true;
            if (server_kube_option(opt, optarg, &ko) < 0)
                return 2;
            break;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (!o.config_path || optind < argc) {
        if (!o.config_path)
            fprintf(stderr, "gpuorch server: --config FILE is required\n");
        else
            fprintf(stderr, "gpuorch server: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return 2;
    }

    const char *named = web;
    web = web_dir(web);
    struct stat wst;
    if (web && (stat(web, &wst) < 0 || !S_ISDIR(wst.st_mode))) {
        fprintf(stderr, "gpuorch server: %s %s: no such directory (the portal's files)\n",
                named ? "--web" : "GPUORCH_WEB", web);
        return 2;
    }

    Buf err = {0};
    _cleanup_free_ char *host = NULL, *port = NULL;
    int r = http_parse_listen(listen, &host, &port, &err);
    if (r < 0) {
        fprintf(stderr, "gpuorch server: %s\n", err.len ? buf_str(&err) : strerror(-r));
        buf_free(&err);
        return r == -EINVAL ? 2 : 1;
    }
    /* the port first: when it is taken, nothing here (the store, the admin token) is
     * touched, as they may be those of the server that holds the port */
    HttpListener lis = {.fd = -1};
    if ((r = http_listen(listen, &lis, &err)) < 0) {
        fprintf(stderr, "gpuorch server: %s\n", err.len ? buf_str(&err) : strerror(-r));
        buf_free(&err);
        return 1;
    }

    _cleanup_free_ char *dir = NULL;
    if (db_dir(o.db_url, &dir) < 0) {
        fprintf(stderr, "gpuorch server: out of memory\n");
        http_listener_close(&lis);
        return 1;
    }
    o.data_dir = data_dir ? data_dir : dir ? dir : "./var";
    /* the default places (./var) are ours to create; a directory the user names is not */
    bool ours = !data_dir && (!dir || !strcmp(o.db_url, DEFAULT_DB));
    if (ours && mkdir(o.data_dir, 0755) < 0 && errno != EEXIST) {
        fprintf(stderr, "gpuorch server: cannot create %s: %s\n", o.data_dir, strerror(errno));
        http_listener_close(&lis);
        return 1;
    }

    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    Server *s = NULL;
    HttpServer *h = NULL;
    KubeEngine *ke = NULL;
    _cleanup_free_ char *token_path = NULL;
    bool token_adopted = false;
    r = kube ? server_kube_prepare(&ko, &o, &ke, &err) : 0;
    /* the store's lead decides who schedules (docs/ha.md); a server that does not have it
     * stands by, on the listening socket, until the one that has it is gone */
    char self[512];
    Store *st = NULL;
    Standby *sb = NULL;
    if (r == 0)
        r = server_advertise_url(advertise, host, &lis, self, sizeof(self), &err);
    if (r == 0)
        r = store_open(o.db_url, &st, &err);
    if (r == 0) {
        r = server_wait_to_lead(st, self, &lis, &sb, &sigs, &err);
        standby_stop(sb, &lis);
        if (r == 0) { /* stopped while standing by */
            store_close(st);
            http_listener_close(&lis);
            cluster_free(o.cluster);
            kube_engine_free(ke);
            return 0;
        }
        if (r == 1) {
            o.store = st; /* server_open's now */
            o.advertise_url = self;
            r = 0;
        } else {
            store_close(st);
            cluster_free(o.cluster);
        }
    } else {
        cluster_free(o.cluster);
    }
    if (r == 0)
        r = server_open(&o, &s, &err);
    if (r < 0) {
        fprintf(stderr, "gpuorch server: %s\n", err.len ? buf_str(&err) : strerror(-r));
        buf_free(&err);
        http_listener_close(&lis);
        kube_engine_free(ke);
        return r == -EINVAL ? 2 : 1;
    }
    if ((r = auth_bootstrap(s, &token_path, &token_adopted, &err)) < 0 ||
        (r = http_server_start(s, &lis, web, &lim, &h, &err)) < 0) {
        fprintf(stderr, "gpuorch server: %s\n", err.len ? buf_str(&err) : strerror(-r));
        buf_free(&err);
        http_listener_close(&lis);
        server_close(s);
        return r == -EINVAL ? 2 : 1;
    }
    printf("gpuorch server listening on http://%s%s%s:%d\n", strchr(host, ':') ? "[" : "",
           *host ? host : "0.0.0.0", strchr(host, ':') ? "]" : "", http_server_port(h));
    if (o.provider != PROVIDER_NONE) {
        /* the provider's local agents reach the server on loopback */
        char url[128];
        bool any = !*host || !strcmp(host, "0.0.0.0") || !strcmp(host, "::");
        snprintf(url, sizeof(url), "http://%s%s%s:%d", strchr(host, ':') && !any ? "[" : "",
                 any ? "127.0.0.1" : host, strchr(host, ':') && !any ? "]" : "",
                 http_server_port(h));
        if ((r = provider_start(s, url, &err)) < 0) {
            fprintf(stderr, "gpuorch server: the provider: %s\n",
                    err.len ? buf_str(&err) : strerror(-r));
            buf_free(&err);
            http_server_stop(h);
            server_close(s);
            return 1;
        }
    }
    if (ke && (r = kube_engine_start(ke, s, &err)) < 0) {
        fprintf(stderr, "gpuorch server: Kubernetes: %s\n", err.len ? buf_str(&err) : strerror(-r));
        buf_free(&err);
        kube_engine_stop(ke);
        http_server_stop(h);
        server_close(s);
        kube_engine_free(ke);
        return 1;
    }
    if (ke)
        printf("scheduling the pods of %s with schedulerName %s\n", kube_engine_server(ke),
               ko.scheduler_name);
    if (web)
        printf("portal served from %s\n", web);
    if (token_path)
        printf(token_adopted ? "admin token taken up from %s (left by an interrupted first "
                               "start)\n"
                             : "admin token written to %s\n",
               token_path);
    fflush(stdout);

    /* a signal stops it; on Kubernetes a GPU node that joined starts it again */
    bool again = false;
    for (;;) {
        struct timespec tick = {.tv_sec = 1};
        if (sigtimedwait(&sigs, NULL, ke ? &tick : NULL) > 0)
            break;
        if ((again = kube_engine_joined(ke)))
            break;
    }
    kube_engine_stop(ke);
    http_server_stop(h);
    server_close(s);
    kube_engine_free(ke);
    if (again) {
        /* the same command line: "gpuorch", then the arguments of `server` */
        char **full = calloc((size_t)argc + 2, sizeof(*full));
        if (!full)
            return 1;
        full[0] = "gpuorch";
        memcpy(full + 1, argv, (size_t)argc * sizeof(*full));
        fflush(NULL);
        execv("/proc/self/exe", full);
        free(full);
        fprintf(stderr, "gpuorch server: cannot start again to take in the new nodes: %s\n",
                strerror(errno));
        return 1;
    }
    buf_free(&err);
    return 0;
}
