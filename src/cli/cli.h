/* cli.h: the subcommands of the gpuorch binary. Each returns the process exit code:
 * 0 success, 1 failure at run time, 2 bad usage or bad input. */
#pragma once

int cmd_plan(int argc, char **argv);
int cmd_validate(int argc, char **argv);
int cmd_sim(int argc, char **argv);
int cmd_policies(int argc, char **argv);
int cmd_trace(int argc, char **argv);
