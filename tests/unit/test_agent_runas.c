/* test_agent_runas.c: who a worker runs as, and what bounds it (agent/launch.c,
 * agent/assign.c, the run_as of spec/spec_cluster.c). The mapping: a team's run_as in
 * the cluster spec is read (and bad ones refused with a line), a worker's "user" is
 * parsed from its assignment, and the agent's policy turns it into a uid, gid and
 * groups: the mapping when given, the default user (nobody/nogroup) when not, the
 * agent's own ids when it is not root, and a refusal for uid 0 or group 0 unless root
 * workers are allowed. The limits: NOFILE and NPROC at most the agent's hard limits,
 * RLIMIT_DATA from the memory asked only without a cgroup. Run as root, a real child
 * is started as uid 2001 with groups and limits and says what it got (id, ulimit, and
 * /proc/self/status), and launch_worker gives it its checkpoint directory; without
 * root those two are skipped, saying so. (ulimit -u is not in dash: /proc/self/limits
 * says it all.) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "agent/assign.h"
#include "agent/launch.h"
#include "spec/spec.h"
#include "util/file.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static Assignment parse(const char *text, int want)
{
    json_t *o = json_loads(text, 0, NULL);
    assert_non_null(o);
    Assignment a = {0};
    Buf err = {0};
    int r = assign_parse(o, &a, &err);
    if (r != want)
        fail_msg("assign_parse(%s) = %d: %s", text, r, buf_str(&err));
    json_decref(o);
    buf_free(&err);
    return a;
}

#define BASE "\"job\": 7, \"run\": 2, \"rank\": 0, \"command\": [\"true\"]"

static void test_assign_user(void **state)
{
    (void)state;
    Assignment a = parse("{" BASE ", \"user\": {\"uid\": 2001, \"gid\": 2002, \"groups\": [44, "
                         "2003]}, \"cpu_milli\": 1500, \"memory_mib\": 2048}",
                         0);
    assert_true(a.has_user);
    assert_int_equal(a.uid, 2001);
    assert_int_equal(a.gid, 2002);
    assert_int_equal(a.n_groups, 2);
    assert_int_equal(a.groups[0], 44);
    assert_int_equal(a.groups[1], 2003);
    assert_int_equal(a.cpu_milli, 1500);
    assert_int_equal(a.memory_mib, 2048);
    assign_free(&a);

    a = parse("{" BASE "}", 0);
    assert_false(a.has_user);
    assert_int_equal(a.memory_mib, 0);
    assign_free(&a);

    /* ids out of range, the wrong shape, too many groups: refused, not guessed */
    parse("{" BASE ", \"user\": {\"uid\": -1, \"gid\": 5}}", -EINVAL);
    parse("{" BASE ", \"user\": {\"uid\": 4294967295, \"gid\": 5}}", -EINVAL);
    parse("{" BASE ", \"user\": {\"uid\": 5}}", -EINVAL);
    parse("{" BASE ", \"user\": {\"uid\": 5, \"gid\": 5, \"groups\": 7}}", -EINVAL);
    parse("{" BASE ", \"user\": {\"uid\": 5, \"gid\": 5, \"groups\": [\"wheel\"]}}", -EINVAL);
    parse("{" BASE ", \"user\": \"alice\"}", -EINVAL);
    char many[2048];
    int n =
        snprintf(many, sizeof(many), "{" BASE ", \"user\": {\"uid\": 5, \"gid\": 5, \"groups\": [");
    for (int i = 0; i <= ASSIGN_MAX_GROUPS; i++)
        n += snprintf(many + n, sizeof(many) - (size_t)n, "%s%d", i ? ", " : "", 100 + i);
    snprintf(many + n, sizeof(many) - (size_t)n, "]}}");
    parse(many, -EINVAL);
    parse("{" BASE ", \"memory_mib\": -5}", -EINVAL);
}

static LaunchPolicy root_policy(bool allow_root)
{
    LaunchPolicy p;
    Buf err = {0};
    assert_int_equal(launch_policy_init(&p, 0, 0, "12345", "23456", allow_root, &err), 0);
    buf_free(&err);
    return p;
}

static void test_cred(void **state)
{
    (void)state;
    LaunchPolicy p = root_policy(false);
    assert_int_equal(p.default_uid, 12345);
    assert_int_equal(p.default_gid, 23456);
    LaunchCred c;
    Buf err = {0};

    /* the team's mapping, groups and all */
    Assignment a =
        parse("{" BASE ", \"user\": {\"uid\": 2001, \"gid\": 2002, \"groups\": [2003]}}", 0);
    assert_int_equal(launch_cred(&p, &a, &c, &err), 0);
    assert_true(c.change && c.mapped);
    assert_int_equal(c.uid, 2001);
    assert_int_equal(c.gid, 2002);
    assert_int_equal(c.n_groups, 1);
    assert_int_equal(c.groups[0], 2003);
    assign_free(&a);

    /* no mapping: the default, with no supplementary group */
    a = parse("{" BASE "}", 0);
    assert_int_equal(launch_cred(&p, &a, &c, &err), 0);
    assert_true(c.change && !c.mapped);
    assert_int_equal(c.uid, 12345);
    assert_int_equal(c.gid, 23456);
    assert_int_equal(c.n_groups, 0);
    assign_free(&a);

    /* root, by uid, gid or a supplementary group: refused, saying how to allow it */
    const char *rootish[] = {
        "{" BASE ", \"user\": {\"uid\": 0, \"gid\": 2002}}",
        "{" BASE ", \"user\": {\"uid\": 2001, \"gid\": 0}}",
        "{" BASE ", \"user\": {\"uid\": 2001, \"gid\": 2002, \"groups\": [2003, 0]}}",
    };
    for (size_t i = 0; i < sizeof(rootish) / sizeof(*rootish); i++) {
        a = parse(rootish[i], 0);
        buf_reset(&err);
        c.uid = 777;
        assert_int_equal(launch_cred(&p, &a, &c, &err), -EPERM);
        assert_int_equal(c.uid, 777); /* untouched on failure */
        assert_non_null(strstr(buf_str(&err), "--allow-root-workers"));
        assert_non_null(strstr(buf_str(&err), "run_as"));
        /* allowed explicitly: it runs as asked */
        LaunchPolicy lab = root_policy(true);
        assert_int_equal(launch_cred(&lab, &a, &c, &err), 0);
        assign_free(&a);
    }
    a = parse("{" BASE ", \"user\": {\"uid\": 0, \"gid\": 0}}", 0);
    LaunchPolicy lab = root_policy(true);
    assert_int_equal(launch_cred(&lab, &a, &c, &err), 0);
    assert_int_equal(c.uid, 0);
    assign_free(&a);

    /* a default configured as root is refused too, naming the flag that set it */
    LaunchPolicy zero;
    assert_int_equal(launch_policy_init(&zero, 0, 0, "0", "0", false, &err), 0);
    a = parse("{" BASE "}", 0);
    buf_reset(&err);
    assert_int_equal(launch_cred(&zero, &a, &c, &err), -EPERM);
    assert_non_null(strstr(buf_str(&err), "--worker-user"));
    assign_free(&a);

    /* an agent that is not root runs every worker as itself, mapping or not */
    LaunchPolicy user;
    assert_int_equal(launch_policy_init(&user, 1000, 1001, NULL, NULL, false, &err), 0);
    a = parse("{" BASE ", \"user\": {\"uid\": 2001, \"gid\": 2002}}", 0);
    assert_int_equal(launch_cred(&user, &a, &c, &err), 0);
    assert_false(c.change);
    assert_int_equal(c.uid, 1000);
    assert_int_equal(c.gid, 1001);
    assign_free(&a);
    buf_free(&err);
}

static void test_policy_names(void **state)
{
    (void)state;
    LaunchPolicy p;
    Buf err = {0};
    /* the default: nobody and (on Debian) nogroup, resolved at start */
    struct passwd *pw = getpwnam("nobody");
    if (pw) {
        assert_int_equal(launch_policy_init(&p, 0, 0, NULL, NULL, false, &err), 0);
        assert_int_equal(p.default_uid, pw->pw_uid);
        struct group *gr = getgrnam("nogroup");
        assert_int_equal(p.default_gid, gr ? gr->gr_gid : pw->pw_gid);
    }
    assert_int_equal(launch_policy_init(&p, 0, 0, "no-such-user-gpuorch", NULL, false, &err),
                     -EINVAL);
    assert_non_null(strstr(buf_str(&err), "--worker-user 'no-such-user-gpuorch'"));
    buf_reset(&err);
    assert_int_equal(launch_policy_init(&p, 0, 0, "12345", "no-such-group-gpuorch", false, &err),
                     -EINVAL);
    assert_non_null(strstr(buf_str(&err), "--worker-group"));
    buf_reset(&err);
    /* a uid no user database knows needs its group said */
    assert_int_equal(launch_policy_init(&p, 0, 0, "3999999", NULL, false, &err), -EINVAL);
    assert_non_null(strstr(buf_str(&err), "give --worker-group"));
    buf_free(&err);
}

static void test_limits(void **state)
{
    (void)state;
    LaunchPolicy p = root_policy(false);
    Assignment a = parse("{" BASE ", \"memory_mib\": 3}", 0);
    LaunchLimits hard = {.nofile = 1024, .nproc = 0}, l;
    launch_limits(&p, &a, false, &hard, &l);
    assert_int_equal(l.nofile, 1024); /* LAUNCH_NOFILE, cut to the agent's hard limit */
    assert_int_equal(l.nproc, LAUNCH_NPROC);
    assert_int_equal(l.data_bytes, 3u << 20);
    launch_limits(&p, &a, true, &hard, &l); /* the cgroup bounds memory */
    assert_int_equal(l.data_bytes, 0);
    assign_free(&a);
    a = parse("{" BASE "}", 0);
    hard.nofile = 0; /* unlimited */
    launch_limits(&p, &a, false, &hard, &l);
    assert_int_equal(l.nofile, LAUNCH_NOFILE);
    assert_int_equal(l.data_bytes, 0); /* nothing asked, nothing bounded */
    assign_free(&a);
}

static void test_spec_run_as(void **state)
{
    (void)state;
    const char *ok = "pools: []\n"
                     "teams:\n"
                     "  - name: search\n"
                     "    run_as: {uid: 2001, gid: 2001, groups: [44, 2100]}\n"
                     "  - name: research\n"
                     "    run_as: {uid: 2002, gid: 2002}\n"
                     "  - name: lab\n";
    Cluster *c = NULL;
    Buf err = {0};
    assert_int_equal(spec_parse_cluster_yaml(ok, strlen(ok), "c.yaml", &c, &err), 0);
    const RunAs *s = &c->teams[cluster_find_team(c, "search")].run_as;
    assert_true(s->set);
    assert_int_equal(s->uid, 2001);
    assert_int_equal(s->gid, 2001);
    assert_int_equal(s->n_groups, 2);
    assert_int_equal(s->groups[1], 2100);
    const RunAs *r = &c->teams[cluster_find_team(c, "research")].run_as;
    assert_true(r->set && r->uid == 2002 && r->n_groups == 0);
    assert_false(c->teams[cluster_find_team(c, "lab")].run_as.set);
    /* a copy keeps it */
    Cluster *d = cluster_clone(c);
    assert_non_null(d);
    assert_int_equal(d->teams[0].run_as.groups[0], 44);
    cluster_free(d);
    cluster_free(c);

    const struct {
        const char *run_as, *message;
    } bad[] = {
        {"{uid: 2001}", "c.yaml:4: missing field 'gid' in run_as of team 'search'"},
        {"{uid: -1, gid: 5}", "c.yaml:4: field 'uid': must be a whole number from 0 to 4294967294"},
        {"{uid: 4294967295, gid: 5}", "field 'uid': must be a whole number from 0 to 4294967294"},
        {"{uid: 5, gid: 5, groups: [7, 7]}", "group 7 is listed twice"},
        {"{uid: 5, gid: 5, gorups: [7]}", "unknown field 'gorups' in run_as of team 'search' (did "
                                          "you mean 'groups'?)"},
        {"alice", "field 'run_as': must be a mapping {uid, gid, groups}"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        char yaml[256];
        snprintf(yaml, sizeof(yaml), "pools: []\nteams:\n  - name: search\n    run_as: %s\n",
                 bad[i].run_as);
        buf_reset(&err);
        c = NULL;
        assert_int_equal(spec_parse_cluster_yaml(yaml, strlen(yaml), "c.yaml", &c, &err), -EINVAL);
        assert_null(c);
        if (!strstr(buf_str(&err), bad[i].message))
            fail_msg("run_as %s: got '%s', want '%s'", bad[i].run_as, buf_str(&err),
                     bad[i].message);
    }
    buf_free(&err);
}

/* ---- as root: a real child ---- */

static char dir[] = "/tmp/gpuorch-runas-XXXXXX";

static bool need_root(void)
{
    if (geteuid() == 0)
        return true;
    print_message("SKIP: needs root to switch users (running as uid %u)\n", (unsigned)geteuid());
    return false;
}

static char *run_and_read(const LaunchPolicy *p, const Assignment *a, const char *ckpt,
                          const char *log)
{
    pid_t pid;
    Buf err = {0};
    char *env[] = {"PATH=/usr/bin:/bin", NULL};
    int r = launch_worker(p, a, ckpt, env, log, &pid, &err);
    if (r < 0)
        fail_msg("launch_worker: %s", buf_str(&err));
    buf_free(&err);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    char *text = NULL;
    size_t len;
    assert_int_equal(file_read_all(log, &text, &len), 0);
    return text;
}

static void test_spawn_as_user(void **state)
{
    (void)state;
    if (!need_root())
        skip();
    assert_non_null(mkdtemp(dir));
    assert_int_equal(chmod(dir, 0755), 0); /* uid 2001 reaches its checkpoint directory */
    char ckpt[128], log[128], json[1024];
    snprintf(ckpt, sizeof(ckpt), "%s/ckpt", dir);
    snprintf(log, sizeof(log), "%s/w.log", dir);
    assert_int_equal(mkdir(ckpt, 0755), 0);
    snprintf(json, sizeof(json),
             "{\"job\": 7, \"run\": 2, \"rank\": 0, \"memory_mib\": 512, "
             "\"user\": {\"uid\": 2001, \"gid\": 2002, \"groups\": [2003, 2004]}, "
             "\"command\": [\"sh\", \"-c\", \"id -u; id -g; id -G; grep -E "
             "'^(Uid|Gid|Groups|NoNewPrivs):' "
             "/proc/self/status; grep -E '^Max (open files|processes|core file size|data size) ' "
             "/proc/self/limits | tr -s ' '; touch %s/mine\"]}",
             ckpt);
    Assignment a = parse(json, 0);
    LaunchPolicy p = root_policy(false);
    p.nofile = 1000;
    p.nproc = 500;
    char *out = run_and_read(&p, &a, ckpt, log);
    const char *want = "2001\n2002\n2002 2003 2004\n"
                       "Uid:\t2001\t2001\t2001\t2001\n"
                       "Gid:\t2002\t2002\t2002\t2002\n"
                       "Groups:\t2003 2004 \n"
                       "NoNewPrivs:\t1\n"
                       "Max data size 536870912 536870912 bytes \n"
                       "Max core file size 0 0 bytes \n"
                       "Max processes 500 500 processes \n"
                       "Max open files 1000 1000 files \n";
    if (strcmp(out, want))
        fail_msg("the worker said:\n%s\nwant:\n%s", out, want);
    free(out);
    /* its checkpoint directory is its own, and only its own */
    struct stat st;
    assert_int_equal(stat(ckpt, &st), 0);
    assert_int_equal(st.st_uid, 2001);
    assert_int_equal(st.st_gid, 2002);
    assert_int_equal(st.st_mode & 07777, 0700);
    char mine[160];
    snprintf(mine, sizeof(mine), "%s/mine", ckpt);
    assert_int_equal(stat(mine, &st), 0);
    assert_int_equal(st.st_uid, 2001);
    /* the log stays the agent's: the worker wrote it through the descriptor */
    assert_int_equal(stat(log, &st), 0);
    assert_int_equal(st.st_uid, 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assign_free(&a);

    /* uid 0 is refused before anything runs, and the reason is in err */
    Assignment r = parse("{\"job\": 8, \"run\": 1, \"rank\": 0, \"user\": {\"uid\": 0, \"gid\": "
                         "0}, \"command\": [\"touch\", \"/tmp/gpuorch-runas-never\"]}",
                         0);
    pid_t pid = 0;
    Buf err = {0};
    assert_int_equal(launch_worker(&p, &r, ckpt, (char *[]){NULL}, log, &pid, &err), -EPERM);
    assert_int_equal(pid, 0);
    assert_int_equal(access("/tmp/gpuorch-runas-never", F_OK), -1);
    buf_free(&err);
    assign_free(&r);
    char cmd[160];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_assign_user),  cmocka_unit_test(test_cred),
        cmocka_unit_test(test_policy_names), cmocka_unit_test(test_limits),
        cmocka_unit_test(test_spec_run_as),  cmocka_unit_test(test_spawn_as_user),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
