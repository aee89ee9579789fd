/* validate.c: `gpuorch validate FILE...` checks cluster and job files, and when a
 * cluster is among them, runs on every job the server's own admission check
 * (core/admit.h), so that it says what `gpuorch submit` would. `gpuorch policies` lists
 * the placement policies. */
#include "cli/cli.h"
#include "core/admit.h"
#include "core/place.h"
#include "spec/spec.h"
#include "util/file.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cmd_policies(int argc, char **argv)
{
    (void)argc, (void)argv;
    for (size_t i = 0; i < policy_count(); i++)
        printf("%-15s %s\n", policy_at(i)->name, policy_at(i)->about);
    return 0;
}

int cmd_validate(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        FILE *f = argc < 2 ? stderr : stdout;
        fprintf(f, "usage: gpuorch validate FILE...\n\n"
                   "Checks cluster specs (YAML, or an Alibaba node list CSV) and job files (YAML,\n"
                   "JSON or CSV). With a cluster among the files, also checks every job as the\n"
                   "server does at submission: the fields it needs (a command, a team of the\n"
                   "cluster, a project of the team) and whether the cluster could ever run it;\n"
                   "a CSV job table is for plan and sim, and is not asked for commands. Exit 0\n"
                   "when all are valid, 2 otherwise.\n");
        return argc < 2 ? 2 : 0;
    }
    int rc = 0;
    Cluster *cluster = NULL;
    JobList *lists = calloc((size_t)argc, sizeof(*lists));
    const char **list_paths = calloc((size_t)argc, sizeof(*list_paths));
    bool *list_csv = calloc((size_t)argc, sizeof(*list_csv));
    size_t n_lists = 0;
    if (!lists || !list_paths || !list_csv) {
        fprintf(stderr, "gpuorch validate: out of memory\n");
        free(lists);
        free(list_paths);
        free(list_csv);
        return 1;
    }
    for (int i = 1; i < argc; i++) {
        const char *path = argv[i];
        char *text = NULL;
        size_t len = 0;
        int r = file_read_all(path, &text, &len);
        if (r < 0) {
            fprintf(stderr, "%s: %s\n", path, strerror(-r));
            rc = 2;
            continue;
        }
        SpecKind kind = spec_sniff(path, text, len);
        free(text);
        Buf err = {0};
        if (kind == SPEC_CLUSTER) {
            Cluster *c = NULL;
            if (spec_load_cluster(path, &c, &err) < 0) {
                fprintf(stderr, "%s\n", buf_str(&err));
                rc = 2;
            } else {
                printf("%s: ok: cluster '%s', %zu nodes, %zu GPUs, %zu pools, %zu teams\n", path,
                       c->name, c->n_nodes, c->n_gpus, c->n_pools, c->n_teams);
                if (!cluster) {
                    cluster = c;
                } else {
                    cluster_free(c);
                }
            }
        } else if (kind == SPEC_JOBS || kind == SPEC_JOBS_CSV) {
            JobList *l = &lists[n_lists];
            if (spec_load_jobs(path, l, &err) < 0) {
                fprintf(stderr, "%s\n", buf_str(&err));
                rc = 2;
            } else {
                printf("%s: ok: %zu job%s\n", path, l->n, l->n == 1 ? "" : "s");
                list_csv[n_lists] = kind == SPEC_JOBS_CSV;
                list_paths[n_lists++] = path;
            }
        } else {
            fprintf(stderr, "%s: neither a cluster spec nor a job file\n", path);
            rc = 2;
        }
        buf_free(&err);
    }
    /* jobs against the cluster: what the server would refuse */
    for (size_t k = 0; cluster && k < n_lists; k++) {
        for (size_t j = 0; j < lists[k].n; j++) {
            Buf why = {0};
            int v = admit_job(cluster, NULL, &lists[k].jobs[j],
                              list_csv[k] ? 0 : ADMIT_NEED_COMMAND, NULL, &why);
            if (v < 0) {
                fprintf(stderr, "gpuorch validate: out of memory\n");
                rc = 1;
            } else if (v != ADMIT_OK) {
                fprintf(stderr, "%s: %s\n", list_paths[k], buf_str(&why));
                if (rc != 1)
                    rc = 2;
            }
            buf_free(&why);
        }
    }
    for (size_t k = 0; k < n_lists; k++)
        job_list_free(&lists[k]);
    free(lists);
    free(list_paths);
    free(list_csv);
    cluster_free(cluster);
    return rc;
}
