/* cli.h: the subcommands of the gpuorch binary. Each returns the process exit code:
 * 0 success, 1 failure at run time, 2 bad usage or bad input. */
#pragma once

int cmd_plan(int argc, char **argv);
int cmd_validate(int argc, char **argv);
int cmd_sim(int argc, char **argv);
int cmd_policies(int argc, char **argv);
int cmd_trace(int argc, char **argv);

/* The running system (docs/api.md): the daemons, then the client commands, which talk
 * to --server / GPUORCH_SERVER with --token / GPUORCH_TOKEN. */
int cmd_server(int argc, char **argv);
int cmd_agent(int argc, char **argv);
int cmd_submit(int argc, char **argv);
int cmd_queue(int argc, char **argv);
int cmd_cancel(int argc, char **argv);
int cmd_priority(int argc, char **argv);
int cmd_nodes(int argc, char **argv);
int cmd_learned(int argc, char **argv);
int cmd_teams(int argc, char **argv);
int cmd_usage(int argc, char **argv);
int cmd_logs(int argc, char **argv);
int cmd_token(int argc, char **argv);
int cmd_tco(int argc, char **argv);
