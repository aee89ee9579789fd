/* agent_cmd.c: `gpuorch agent`, the node agent in the foreground. SIGTERM (what a
 * machine going down, systemd or `make run` sends) and SIGINT shut the node down: its
 * workers checkpoint where they can and stop, the server requeues their jobs, and the
 * agent exits (agent_shutdown). SIGHUP ends the agent alone: its workers run on in
 * their own process groups, and the next agent started with the same --state-dir finds
 * them again (workers.json), as for an upgrade of the agent. */
#include "agent/agent.h"
#include "agent/inventory.h"
#include "agent/worker.h"
#include "cli/cli.h"
#include "util/log.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t stop_requested;

static void on_stop(int sig)
{
    stop_requested = sig == SIGHUP ? AGENT_STOP_LEAVE : AGENT_STOP_SHUTDOWN;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: gpuorch agent --server URL --token TOKEN [--node NAME] [--address ADDR]\n"
            "                     [--gpus nvml|sim:MODEL:COUNT] [--state-dir DIR]\n"
            "                     [--checkpoint-root DIR] [--spot-notice none|aws|gcp|azure]\n"
            "                     [--metadata-url URL] [--notice-poll-ms MS]\n"
            "                     [--worker-user USER] [--worker-group GROUP]\n"
            "                     [--allow-root-workers] [--no-cgroups] [--sysfs-root DIR]\n"
            "       gpuorch agent --inventory [--gpus nvml|sim:MODEL:COUNT] [--node NAME]\n"
            "                     [--sysfs-root DIR]\n\n"
            "Runs the node agent in the foreground: reports this node's GPUs and workers to\n"
            "the server, applies MIG layouts, starts and stops workers, ships their logs.\n\n"
            "  --server URL[,URL]    the gpuorch server, or the servers of an HA group, tried\n"
            "                        in turn (or GPUORCH_SERVER; docs/ha.md)\n"
            "  --token TOKEN         an agent token (or GPUORCH_TOKEN)\n"
            "  --node NAME           this node's name in the cluster file (default: hostname)\n"
            "  --address ADDR        where other nodes reach this one: the MASTER_ADDR of gangs\n"
            "                        whose rank 0 runs here (default: the node name)\n"
            "  --gpus SPEC           nvml (default): the real GPUs through the NVIDIA driver;\n"
            "                        sim:MODEL:COUNT: simulated ones (sim:A100-80GB:8)\n"
            "  --state-dir DIR       worker table, logs, checkpoints (default ./var/agent-NODE)\n"
            "  --checkpoint-root DIR where GPUORCH_CHECKPOINT_DIR lives (default\n"
            "                        STATE-DIR/checkpoints)\n"
            "  --spot-notice CLOUD   watch the cloud's spot interruption notice and tell the\n"
            "                        server, which moves this node's jobs (default none)\n"
            "  --metadata-url URL    the metadata service (default: the cloud's own address)\n"
            "  --notice-poll-ms MS   how often to ask it (default 5000)\n"
            "  --worker-user USER    run workers whose team has no run_as in the cluster spec\n"
            "                        as USER, a name or uid (default nobody)\n"
            "  --worker-group GROUP  and GROUP, a name or gid (default USER's; nogroup)\n"
            "  --allow-root-workers  allow a worker to run as uid 0 or group 0 (single-user\n"
            "                        labs); refused otherwise\n"
            "  --no-cgroups          no cgroup per worker, even where cgroup v2 is delegated\n"
            "  --inventory           print what the agent sees on the GPUs of --gpus (as the\n"
            "                        heartbeat reports them, their processes, and the RDMA\n"
            "                        devices NCCL's settings come from) and exit;\n"
            "                        changes nothing, needs no server\n"
            "  --sysfs-root DIR      read the RDMA devices and interfaces for NCCL's settings\n"
            "                        under DIR instead of /sys (for tests)\n"
            "An agent running as root runs each worker as its team's user; one that is not\n"
            "root runs every worker as itself.\n\n"
            "SIGTERM or SIGINT shut the node down: workers that can checkpoint do, all stop,\n"
            "the server requeues their jobs to resume, and the agent exits. SIGHUP stops the\n"
            "agent alone and leaves its workers running; an agent started again with the\n"
            "same state directory takes them back. See docs/agent.md.\n");
}

int cmd_agent(int argc, char **argv)
{
    static const struct option opts[] = {
        {"server", required_argument, NULL, 's'},
        {"token", required_argument, NULL, 't'},
        {"node", required_argument, NULL, 'n'},
        {"address", required_argument, NULL, 'a'},
        {"gpus", required_argument, NULL, 'g'},
        {"state-dir", required_argument, NULL, 'd'},
        {"checkpoint-root", required_argument, NULL, 'c'},
        {"spot-notice", required_argument, NULL, 'S'},
        {"metadata-url", required_argument, NULL, 'M'},
        {"notice-poll-ms", required_argument, NULL, 'P'},
        {"worker-user", required_argument, NULL, 'U'},
        {"worker-group", required_argument, NULL, 'G'},
        {"allow-root-workers", no_argument, NULL, 'R'},
        {"no-cgroups", no_argument, NULL, 'C'},
        {"inventory", no_argument, NULL, 'I'},
        {"sysfs-root", required_argument, NULL, 'Y'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    AgentOptions o = {
        .server_url = getenv("GPUORCH_SERVER"),
        .token = getenv("GPUORCH_TOKEN"),
        .gpus = "nvml",
    };
    bool inventory = false;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "s:t:n:a:g:d:c:h", opts, NULL)) != -1) {
        switch (c) {
        case 's':
            o.server_url = optarg;
            break;
        case 't':
            o.token = optarg;
            break;
        case 'n':
            o.node = optarg;
            break;
        case 'a':
            o.address = optarg;
            break;
        case 'g':
            o.gpus = optarg;
            break;
        case 'd':
            o.state_dir = optarg;
            break;
        case 'c':
            o.checkpoint_root = optarg;
            break;
        case 'S':
            o.spot_notice = optarg;
            break;
        case 'M':
            o.metadata_url = optarg;
            break;
        case 'P': {
            char *end;
            errno = 0;
            long long ms = strtoll(optarg, &end, 10);
            if (!*optarg || *end || errno || ms < 10 || ms > 3600000) {
                fprintf(stderr,
                        "gpuorch agent: --notice-poll-ms '%s': expected whole milliseconds, "
                        "10 to 3600000\n",
                        optarg);
                return 2;
            }
            o.notice_poll_ms = ms;
            break;
        }
        case 'U':
            o.worker_user = optarg;
            break;
        case 'G':
            o.worker_group = optarg;
            break;
        case 'R':
            o.allow_root_workers = true;
            break;
        case 'C':
            o.no_cgroups = true;
            break;
        case 'I':
            inventory = true;
            break;
        case 'Y':
            o.sysfs_root = optarg;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "gpuorch agent: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return 2;
    }
    char host[256];
    if (!o.node) {
        if (gethostname(host, sizeof(host)) < 0 || !host[0]) {
            fprintf(stderr, "gpuorch agent: --node is required (no hostname)\n");
            return 2;
        }
        host[sizeof(host) - 1] = '\0';
        o.node = host;
    }
    if (inventory) {
        Buf out = {0}, err = {0};
        int r = agent_inventory(o.gpus, o.node, o.sysfs_root, &out, &err);
        if (r < 0)
            fprintf(stderr, "gpuorch agent: %s\n", buf_str(&err));
        else
            fputs(buf_str(&out), stdout);
        buf_free(&out);
        buf_free(&err);
        return r < 0 ? 1 : 0;
    }
    if (!o.server_url || !*o.server_url) {
        fprintf(stderr, "gpuorch agent: --server (or GPUORCH_SERVER) is required\n");
        return 2;
    }
    if (!o.token || !*o.token) {
        fprintf(stderr, "gpuorch agent: --token (or GPUORCH_TOKEN) is required: an agent token "
                        "from 'gpuorch token create --role agent'\n");
        return 2;
    }
    char state_dir[512];
    if (!o.state_dir) {
        snprintf(state_dir, sizeof(state_dir), "./var/agent-%s", o.node);
        o.state_dir = state_dir;
    }

    struct sigaction sa = {.sa_handler = on_stop};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    Agent *a = NULL;
    Buf err = {0};
    if (agent_open(&o, &a, &err) < 0) {
        fprintf(stderr, "gpuorch agent: %s\n", buf_str(&err));
        buf_free(&err);
        return 1;
    }
    buf_free(&err);
    agent_run(a, &stop_requested);
    log_info("event=agent_stop workers_left_running=%zu", agent_worker_count(a, WK_RUNNING));
    agent_close(a);
    return 0;
}
