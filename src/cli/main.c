/* main.c: the gpuorch command: dispatch to subcommands. */
#include "cli/cli.h"

#include <stdio.h>
#include <string.h>

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *about;
} commands[] = {
    {"plan", cmd_plan, "place jobs onto a cluster and print where they go"},
    {"validate", cmd_validate, "check cluster and job files"},
    {"sim", cmd_sim, "replay a trace through the scheduler, policies side by side"},
    {"policies", cmd_policies, "list the placement policies"},
    {"trace", cmd_trace, "generate a synthetic workload: trace gen --mix FILE"},
    {"server", cmd_server, "run the control plane: API, store and scheduler"},
    {"agent", cmd_agent, "run the node agent: report GPUs, launch workers"},
    {"submit", cmd_submit, "submit jobs from a YAML or JSON file"},
    {"queue", cmd_queue, "list jobs: queue position, reason, ETA"},
    {"cancel", cmd_cancel, "cancel a job"},
    {"priority", cmd_priority, "change a job's priority class"},
    {"nodes", cmd_nodes, "show nodes with their GPU and MIG map"},
    {"teams", cmd_teams, "show teams with quotas and usage; set quotas"},
    {"learned", cmd_learned, "GPU memory learned per workload class"},
    {"usage", cmd_usage, "GPU-hours and cost per team and project"},
    {"logs", cmd_logs, "print a job's output"},
    {"token", cmd_token, "API tokens: token create --role R, token list, token revoke ID"},
    {"tco", cmd_tco, "owned versus cloud: months to break even and cost over the years"},
};

static void usage(FILE *out)
{
    fprintf(out, "usage: gpuorch COMMAND [OPTIONS]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].about);
    fprintf(out, "\n'gpuorch COMMAND --help' shows a command's options.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        if (!strcmp(argv[1], commands[i].name))
            return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "gpuorch: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
