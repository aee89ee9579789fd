/* test_learn.c: what the scheduler learns about GPU memory (core/learn.c). A job's class
 * belongs to its team: "TEAM/NAME", NAME its explicit workload class, else its name
 * without a trailing number, so the replicas and reruns of one workload ("llama-serve-3",
 * "llama-serve-17") share what was learned, and another team's job, whatever its name or
 * its class says, does not. The table keeps
 * the largest peak seen per class, and a job asking by memory is raised to its class's
 * peak (never lowered), which is what stops an out-of-memory failure from repeating.
 * End to end in the simulator's time mode (sim/timesim.c): a job that runs out of memory
 * does so once; it and the next job of its class are sized up (a MIG slice to a larger
 * profile, an MPS fraction to a larger share), and a class whose peak no GPU of the
 * cluster holds is marked unschedulable instead of being retried without end. A comment
 * that begins with "Rule:" pins a rule the code broke when the test was written, and says
 * how it failed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "sim_fixture.h"

#include "core/catalog.h"
#include "core/job.h"
#include "core/learn.h"
#include "sim/sim.h"
#include "spec/spec.h"
#include "util/buf.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* A job spec that points at the caller's strings (never freed: not job_spec_free). */
static JobSpec spec(const char *team, const char *name, const char *cls)
{
    JobSpec j;
    job_spec_init(&j);
    j.team = (char *)team;
    j.name = (char *)name;
    j.workload_class = (char *)cls;
    return j;
}

static void assert_class(const JobSpec *j, const char *expected)
{
    char out[256];
    learn_class_of(j, out, sizeof(out));
    assert_string_equal(out, expected);
}

/* The class by hand: an explicit class wins over the name, under the job's team; an
 * empty one does not count. Otherwise "team/name" with the trailing digits and then the
 * separators before them cut: llama-serve-17, llama-serve_3 and llama-serve.9 are all
 * search/llama-serve; resnet50 is search/resnet; a name that is all digits is kept
 * whole.
 * Rule: a job's explicit class is keyed by the job's team. The class used to be the text
 * alone, so a job of team search with class "research/llama" taught research's class,
 * and one fake out-of-memory failure had research's jobs refused. */
static void test_class_of(void **state)
{
    (void)state;
    JobSpec j = spec("search", "llama-serve-17", "serving-llm");
    assert_class(&j, "search/serving-llm");
    /* another team's name in the class stays under the job's own team */
    j = spec("search", "x", "research/llama");
    assert_class(&j, "search/research/llama");
    j = spec("search", "x", "llama");
    assert_class(&j, "search/llama");
    /* the job's own team written out is the same class */
    j = spec("search", "x", "search/llama");
    assert_class(&j, "search/llama");
    j = spec("search", "x", "search/");
    assert_class(&j, "search/search/");
    j = spec("search", "x", "searching/llama");
    assert_class(&j, "search/searching/llama");
    j = spec("search", "llama-serve-17", "");
    assert_class(&j, "search/llama-serve");
    j = spec("search", "llama-serve_3", NULL);
    assert_class(&j, "search/llama-serve");
    j = spec("search", "llama-serve.9", NULL);
    assert_class(&j, "search/llama-serve");
    j = spec("search", "llama-serve", NULL);
    assert_class(&j, "search/llama-serve");
    j = spec("vision", "resnet50", NULL);
    assert_class(&j, "vision/resnet");
    j = spec("vision", "2024", NULL);
    assert_class(&j, "vision/2024");
}

/* Replicas share a class; the same name in another team, or with no team, does not. A
 * job with neither team nor name still gets a (short) string. */
static void test_class_sharing(void **state)
{
    (void)state;
    char a[64], b[64], other[64], none1[64], none2[64], empty[64];
    JobSpec j = spec("search", "llama-serve-3", NULL);
    learn_class_of(&j, a, sizeof(a));
    j = spec("search", "llama-serve-22", NULL);
    learn_class_of(&j, b, sizeof(b));
    j = spec("ads", "llama-serve-3", NULL);
    learn_class_of(&j, other, sizeof(other));
    j = spec(NULL, "llama-serve-3", NULL);
    learn_class_of(&j, none1, sizeof(none1));
    j = spec(NULL, "llama-serve-8", NULL);
    learn_class_of(&j, none2, sizeof(none2));
    assert_string_equal(a, b);
    assert_string_not_equal(a, other);
    assert_string_not_equal(a, none1);
    assert_string_not_equal(other, none1);
    assert_string_equal(none1, none2);
    j = spec(NULL, NULL, NULL);
    memset(empty, 'x', sizeof(empty));
    learn_class_of(&j, empty, sizeof(empty));
    assert_true(strlen(empty) < sizeof(empty));
    /* an explicit class is shared by the team's jobs of any name, not by another team's */
    j = spec("search", "a-1", "llm");
    learn_class_of(&j, a, sizeof(a));
    j = spec("search", "b-7", "llm");
    learn_class_of(&j, b, sizeof(b));
    j = spec("ads", "a-1", "llm");
    learn_class_of(&j, other, sizeof(other));
    assert_string_equal(a, b);
    assert_string_not_equal(a, other);
}

/* A team's '%' and '/' are escaped, so the first '/' of a key ends the team: team "a"
 * with class "b/c" and team "a/b" with class "c" are two classes. learn_class_team
 * gives the team back as written and the name after it; learn_class_in_team says
 * whether a key is a team's ("search" is not "searching"'s, nor "sea"'s). */
static void test_class_team(void **state)
{
    (void)state;
    JobSpec j = spec("a", "x", "b/c");
    assert_class(&j, "a/b/c");
    j = spec("a/b", "x", "c");
    assert_class(&j, "a%2Fb/c");
    j = spec("50%", "x", "c");
    assert_class(&j, "50%25/c");
    j = spec("a/b", "x", "a/b/c");
    assert_class(&j, "a%2Fb/c");

    char team[64];
    const char *name = NULL;
    assert_true(learn_class_team("a%2Fb/c", team, sizeof(team), &name));
    assert_string_equal(team, "a/b");
    assert_string_equal(name, "c");
    assert_true(learn_class_team("50%25/c/d", team, sizeof(team), &name));
    assert_string_equal(team, "50%");
    assert_string_equal(name, "c/d");
    assert_true(learn_class_team("/llama", team, sizeof(team), NULL));
    assert_string_equal(team, "");
    assert_false(learn_class_team("no-slash", team, sizeof(team), &name));
    assert_false(learn_class_team("search/x", team, 4, &name)); /* "sea" would be a lie */

    assert_true(learn_class_in_team("search/llama", "search"));
    assert_false(learn_class_in_team("search/llama", "sea"));
    assert_false(learn_class_in_team("searching/llama", "search"));
    assert_false(learn_class_in_team("research/llama", "search"));
    assert_true(learn_class_in_team("a%2Fb/c", "a/b"));
    assert_false(learn_class_in_team("a%2Fb/c", "a"));
    assert_true(learn_class_in_team("/llama", NULL));
}

/* Output is cut to outlen - 1 bytes and always terminated; outlen 0 writes nothing. The
 * name is cut, never the team: a key without all of its team would be another team's
 * (two long team names alike in their first bytes), so then the key is "" and nothing
 * is learned from or for it. */
static void test_class_truncated(void **state)
{
    (void)state;
    char out[16];
    JobSpec j = spec("search", "llama-serve-17", NULL);
    assert_true(learn_class_of(&j, out, 8));
    assert_string_equal(out, "search/");
    assert_true(learn_class_of(&j, out, 10));
    assert_string_equal(out, "search/ll");
    assert_false(learn_class_of(&j, out, 7));
    assert_string_equal(out, "");
    assert_false(learn_class_of(&j, out, 4));
    assert_string_equal(out, "");
    assert_false(learn_class_of(&j, out, 1));
    assert_string_equal(out, "");
    memcpy(out, "untouched", 10);
    assert_false(learn_class_of(&j, out, 0));
    assert_string_equal(out, "untouched");
    j = spec("search", "x", "serving-llm");
    assert_true(learn_class_of(&j, out, 12));
    assert_string_equal(out, "search/serv");
    /* "é" is two bytes: a cut that would split it drops it whole */
    j = spec("search", "x", "ab\xc3\xa9");
    assert_true(learn_class_of(&j, out, 12));
    assert_string_equal(out, "search/ab\xc3\xa9");
    assert_true(learn_class_of(&j, out, 11));
    assert_string_equal(out, "search/ab");

    Learn l = {0};
    assert_int_equal(learn_record(&l, "", 1000), -EINVAL);
    assert_int_equal(learn_oom(&l, "", 1000, 1000), -EINVAL);
    assert_int_equal(l.n, 0);
    learn_free(&l);
}

/* A reset forgets one class: its peak reads 0 again, the other classes keep theirs,
 * forgetting it twice says -ENOENT, and it learns afresh afterwards (its OOMs from 0). */
static void test_forget(void **state)
{
    (void)state;
    Learn l = {0};
    assert_int_equal(learn_oom(&l, "research/llama", 0, 81920), 0);
    assert_int_equal(learn_record(&l, "search/serve", 12000), 0);
    assert_int_equal(learn_record(&l, "ads/embed", 9000), 0);
    assert_int_equal(learn_peak(&l, "research/llama"), 98304);
    assert_int_equal(learn_forget(&l, "research/llama"), 0);
    assert_int_equal(learn_peak(&l, "research/llama"), 0);
    assert_null(learn_find(&l, "research/llama"));
    assert_int_equal(learn_peak(&l, "search/serve"), 12000);
    assert_int_equal(learn_peak(&l, "ads/embed"), 9000);
    assert_int_equal(l.n, 2);
    assert_int_equal(learn_forget(&l, "research/llama"), -ENOENT);
    assert_int_equal(learn_forget(&l, "ads/embed"), 0); /* the last entry */
    assert_int_equal(learn_peak(&l, "search/serve"), 12000);
    assert_int_equal(learn_oom(&l, "research/llama", 9000, 9728), 0);
    assert_int_equal(learn_peak(&l, "research/llama"), 11674);
    learn_free(&l);
}

/* The largest peak is kept: 30,000 then 20,000 leaves 30,000; 40,000 raises it. Classes
 * are independent, unknown ones read 0, and the table grows past any first size. */
static void test_record_keeps_largest(void **state)
{
    (void)state;
    Learn l = {0};
    assert_int_equal(learn_peak(&l, "search/llama-serve"), 0);
    assert_int_equal(learn_record(&l, "search/llama-serve", 30000), 0);
    assert_int_equal(learn_record(&l, "search/llama-serve", 20000), 0);
    assert_int_equal(learn_peak(&l, "search/llama-serve"), 30000);
    assert_int_equal(learn_record(&l, "search/llama-serve", 40000), 0);
    assert_int_equal(learn_peak(&l, "search/llama-serve"), 40000);
    assert_int_equal(learn_record(&l, "ads/llama-serve", 1000), 0);
    assert_int_equal(learn_peak(&l, "ads/llama-serve"), 1000);
    assert_int_equal(learn_peak(&l, "search/llama-serve"), 40000);
    assert_int_equal(learn_peak(&l, "search/llama"), 0);
    for (unsigned i = 0; i < 200; i++) {
        char cls[32];
        snprintf(cls, sizeof(cls), "t/c%u", i);
        assert_int_equal(learn_record(&l, cls, 100 + i), 0);
    }
    assert_int_equal(l.n, 202);
    for (unsigned i = 0; i < 200; i++) {
        char cls[32];
        snprintf(cls, sizeof(cls), "t/c%u", i);
        assert_int_equal(learn_peak(&l, cls), 100 + i);
    }
    learn_free(&l);
    assert_int_equal(l.n, 0);
    learn_free(&l); /* freeing twice is harmless */
}

/* A job of search/llama-serve asking 20,000 MiB: nothing learned, it gets what it asks;
 * its class learned 30,000, it gets 30,000; learned 10,000, still 20,000 (never less than
 * it asks). A slice job by profile gets the learned peak, or 0 when nothing is known. What
 * another class learned does not apply. */
/* learn_oom: a fifth above the peak or the grant, whichever is more, rounded up; it counts
 * the class's OOMs. 40,268 x 6 / 5 = 48,321.6, rounded up to 48,322; 60,000 gives 72,000;
 * 8,192 (a peak reported below the grant) gives 9,830.4, 9,831. */
static void test_oom_bump(void **state)
{
    (void)state;
    Learn l = {0};
    assert_int_equal(learn_oom(&l, "search/s", 40268, 40192), 0);
    assert_int_equal(learn_peak(&l, "search/s"), 48322); /* ceil(40,268 x 1.2) */
    assert_int_equal(learn_oom(&l, "search/s", 60000, 48322), 1);
    assert_int_equal(learn_peak(&l, "search/s"), 72000);
    /* a lower peak never lowers what was learned */
    assert_int_equal(learn_oom(&l, "search/s", 50000, 40000), 2);
    assert_int_equal(learn_peak(&l, "search/s"), 72000);
    /* killed at its grant: the grant is the least it needed */
    assert_int_equal(learn_oom(&l, "ads/s", 8000, 8192), 0);
    assert_int_equal(learn_peak(&l, "ads/s"), 9831);
    learn_free(&l);
}

static void test_memory_for(void **state)
{
    (void)state;
    Learn l = {0};
    JobSpec j = spec("search", "llama-serve-4", NULL);
    j.req = REQ_MEMORY;
    j.gpu_memory_mib = 20000;
    assert_int_equal(learn_memory_for(&l, &j), 20000);
    assert_int_equal(learn_record(&l, "ads/llama-serve", 70000), 0);
    assert_int_equal(learn_memory_for(&l, &j), 20000);
    assert_int_equal(learn_record(&l, "search/llama-serve", 10000), 0);
    assert_int_equal(learn_memory_for(&l, &j), 20000);
    assert_int_equal(learn_record(&l, "search/llama-serve", 30000), 0);
    assert_int_equal(learn_memory_for(&l, &j), 30000);

    JobSpec m = spec("search", "embed-1", NULL);
    m.req = REQ_MIG;
    m.mig = (char *)"1g.10gb";
    assert_int_equal(learn_memory_for(&l, &m), 0);
    assert_int_equal(learn_record(&l, "search/embed", 15000), 0);
    assert_int_equal(learn_memory_for(&l, &m), 15000);

    /* an explicit class shares across the team's names, never across teams */
    JobSpec k = spec("search", "whatever-2", "llama-serve");
    k.req = REQ_MEMORY;
    k.gpu_memory_mib = 5000;
    assert_int_equal(learn_memory_for(&l, &k), 30000);
    k = spec("ads", "whatever-2", "search/llama-serve");
    k.req = REQ_MEMORY;
    k.gpu_memory_mib = 5000;
    assert_int_equal(learn_memory_for(&l, &k), 5000);
    learn_free(&l);
}

/* learn_size_request on one H100 node (MIG allowed) and one L4 node (24 GB, no MIG):
 *  - search/serve asks 9,000 MiB: 1g.10gb on the H100, a share of the L4 (375 milli,
 *    9,000 / 24,000 rounded up to the share step); nothing learned: unchanged (0);
 *  - its class learned 12,000: resized (1) to 1g.20gb on the H100 and its shape is -1;
 *  - learned 30,000: no L4 holds it, the H100's 3g.40gb does (1);
 *  - learned 90,000: no GPU here holds it (2) and the request is left alone;
 *  - research/train asks 1 whole GPU of either model; learned 30,000: kept to the H100;
 *  - learn_restore puts back a class as a store held it, ooms included. */
static void test_size_request(void **state)
{
    (void)state;
    Buf err = {0};
    Cluster *c = NULL;
    const char *yaml = "name: t\n"
                       "pools:\n"
                       "  - {name: h, tier: owned, nodes: 1,\n"
                       "     node: {gpu_model: H100-80GB-SXM5, gpus: 8, mig: true}}\n"
                       "  - {name: l, tier: owned, nodes: 1, node: {gpu_model: L4, gpus: 4}}\n";
    if (spec_parse_cluster_yaml(yaml, strlen(yaml), "c.yaml", &c, &err))
        fail_msg("cluster: %s", buf_str(&err));
    int h = -1, l4 = -1;
    for (size_t i = 0; i < c->n_models; i++)
        if (!strcmp(c->models[i].m.name, "H100-80GB-SXM5"))
            h = (int)i;
        else if (!strcmp(c->models[i].m.name, "L4"))
            l4 = (int)i;
    assert_true(h >= 0 && l4 >= 0);
    const GpuModel *hm = &c->models[h].m;

    Learn le = {0};
    JobSpec j = spec("search", "serve-3", NULL);
    j.req = REQ_MEMORY;
    j.gpu_memory_mib = 9000;
    Request r;
    assert_int_equal(request_from_job(c, &j, &r, &err), 0);
    assert_int_equal(r.mig_profile[h], catalog_profile_index(hm, "1g.10gb"));
    assert_true(r.share_milli[l4] > 0);
    assert_int_equal(learn_size_request(&le, c, &j, &r), 0);

    assert_int_equal(learn_record(&le, "search/serve", 12000), 0);
    r.shape = 7;
    assert_int_equal(learn_size_request(&le, c, &j, &r), 1);
    assert_int_equal(r.mig_profile[h], catalog_profile_index(hm, "1g.20gb"));
    assert_int_equal(r.shape, -1);
    assert_int_equal(learn_size_request(&le, c, &j, &r), 0); /* already sized */

    assert_int_equal(learn_record(&le, "search/serve", 30000), 0);
    assert_int_equal(learn_size_request(&le, c, &j, &r), 1);
    assert_int_equal(r.mig_profile[h], catalog_profile_index(hm, "3g.40gb"));
    assert_true(!(r.models & (1ull << l4)) || r.share_milli[l4] == 0);

    /* the largest GPU here has 81,920 MiB (the H100-80GB-SXM5): 90,000 fits none */
    assert_true(learn_fits(c, hm->memory_mib));
    assert_false(learn_fits(c, hm->memory_mib + 1));
    Request before = r;
    assert_int_equal(learn_record(&le, "search/serve", 90000), 0);
    assert_int_equal(learn_size_request(&le, c, &j, &r), 2);
    assert_memory_equal(&r, &before, sizeof(r));

    JobSpec t = spec("research", "train-1", NULL);
    t.req = REQ_GPUS;
    t.gpus = 1;
    assert_int_equal(request_from_job(c, &t, &r, &err), 0);
    assert_true((r.models & (1ull << h)) && (r.models & (1ull << l4)));
    assert_int_equal(learn_size_request(&le, c, &t, &r), 0);
    assert_int_equal(learn_record(&le, "research/train", 30000), 0);
    assert_int_equal(learn_size_request(&le, c, &t, &r), 1);
    assert_int_equal(r.models, 1ull << h);

    assert_null(learn_find(&le, "ads/serve"));
    assert_int_equal(learn_restore(&le, "ads/serve", 20000, 3), 0);
    const LearnEntry *e = learn_find(&le, "ads/serve");
    assert_non_null(e);
    assert_int_equal(e->peak_mib, 20000);
    assert_int_equal(e->ooms, 3);
    assert_int_equal(learn_oom(&le, "ads/serve", 0, 20000), 3);
    learn_free(&le);
    cluster_free(c);
    buf_free(&err);
}

/* ---- end to end in the simulator ---- */

/* A cluster from YAML, jobs from the simulator's CSV; time mode with the defaults:
 * MIG reconfiguration 10 s, an out-of-memory failure 30 s after the start. */
static void world_init(World *w, const char *cluster_yaml, const char *jobs_csv)
{
    fixture_world(w, cluster_yaml, jobs_csv,
                  (SimOptions){.mode = SIM_TIME,
                               .reconfig_delay_ms = 10000,
                               .min_runtime_ms = 300000,
                               .half_life_ms = 3600000,
                               .grace_ms = 30000,
                               .oom_after_ms = 30000,
                               .guarantee_tolerance_ms = 120000,
                               .tune_ratio = 1.3,
                               .events = true,
                               .timeline_points = 600});
}

/* A run that loops (a job retried for ever) fails the test by SIGALRM, not by hanging. */
static void run(const World *w, RunResult *ret)
{
    SimPolicy sp;
    Buf err = {0};
    if (sim_policy_parse("first-fit+priority", &sp, &err))
        fail_msg("policy: %s", buf_str(&err));
    buf_free(&err);
    *ret = (RunResult){0};
    alarm(60);
    assert_int_equal(sim_run_time(&w->in, &sp, 1, ret), 0);
    alarm(0);
}

/* The nth (from 0) event line of this type about this job, copied into out; false if
 * there is none. */
static bool event_line(const RunResult *r, const char *type, const char *job, int nth, char *out,
                       size_t outlen)
{
    char pat[128];
    snprintf(pat, sizeof(pat), "\"type\": \"%s\", \"job\": \"%s\"", type, job);
    const char *p = buf_str(&r->events);
    while (p && *p) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        const char *hit = strstr(p, pat);
        if (hit && hit < p + len && nth-- == 0) {
            snprintf(out, outlen, "%.*s", (int)len, p);
            return true;
        }
        p = eol ? eol + 1 : NULL;
    }
    return false;
}

/* The event exists, at t_ms, and its line holds `has` (NULL: anything). */
static void event_is(const RunResult *r, const char *type, const char *job, int nth, int64_t t_ms,
                     const char *has)
{
    char line[1024];
    if (!event_line(r, type, job, nth, line, sizeof(line)))
        fail_msg("no %s event #%d for %s", type, nth, job);
    long long t;
    assert_int_equal(sscanf(line, "{\"t_ms\": %lld,", &t), 1);
    if (t != t_ms)
        fail_msg("%s #%d of %s at %lld, expected %lld", type, nth, job, t, (long long)t_ms);
    if (has && !strstr(line, has))
        fail_msg("%s #%d of %s: no '%s' in %s", type, nth, job, has, line);
}

/* One A100-80GB, MIG allowed, unpartitioned. Class search/serve:
 *   0 s    serve-1 (1g.10gb, peak 12,000 MiB, 100 s of work) arrives: the GPU is carved
 *          (1g.10gb at slot 0) and it starts at 10 s.
 *   40 s   out of memory (12,000 > 9,728), its work is lost; 12,000 is learned and the
 *          job queued again, sized one up: 1g.20gb. It cannot reuse the idle 1g.10gb;
 *          its first free start is slot 2: a reconfiguration; it starts at 50 s.
 *   150 s  serve-1 finishes (50 + 100).
 *   500 s  serve-2 (same class, asks 1g.10gb, peak 12,000) is sized 1g.20gb before it
 *          is placed: it reuses the idle 1g.20gb at slot 2, starts at once, no OOM;
 *          finishes at 600 s.
 *   700 s  ads/serve-3 (another team: another class, nothing learned) asks 1g.10gb,
 *          peaks at 5,000: it keeps 1g.10gb and reuses the idle one at slot 0.
 * One OOM, no repeat, two reconfigurations, three jobs finished. */
static void test_sim_oom_does_not_repeat(void **state)
{
    (void)state;
    World w;
    world_init(&w,
               "name: t\n"
               "pools:\n"
               "  - {name: a, tier: owned, nodes: 1,\n"
               "     node: {gpu_model: A100-80GB, gpus: 1, mig: true}}\n",
               "id,team,kind,mig,submit_s,duration_s,peak_memory_mib\n"
               "serve-1,search,inference,1g.10gb,0,100,12000\n"
               "serve-2,search,inference,1g.10gb,500,100,12000\n"
               "serve-3,ads,inference,1g.10gb,700,100,5000\n");
    RunResult r;
    run(&w, &r);
    assert_int_equal(r.time.oom_failures, 1);
    assert_int_equal(r.time.oom_repeats, 0);
    assert_int_equal(r.time.reconfigurations, 2);
    assert_int_equal(r.time.finished, 3);
    event_is(&r, "start", "serve-1", 0, 10000, "\"profile\": \"1g.10gb\", \"start\": 0");
    event_is(&r, "oom", "serve-1", 0, 40000, NULL);
    event_is(&r, "start", "serve-1", 1, 50000, "\"profile\": \"1g.20gb\", \"start\": 2");
    event_is(&r, "finish", "serve-1", 0, 150000, NULL);
    event_is(&r, "start", "serve-2", 0, 500000, "\"profile\": \"1g.20gb\", \"start\": 2");
    event_is(&r, "finish", "serve-2", 0, 600000, NULL);
    event_is(&r, "start", "serve-3", 0, 700000, "\"profile\": \"1g.10gb\", \"start\": 0");
    char line[1024];
    assert_false(event_line(&r, "oom", "serve-2", 0, line, sizeof(line)));
    assert_false(event_line(&r, "oom", "serve-3", 0, line, sizeof(line)));
    run_result_free(&r);
    world_free(&w);
}

/* Rule: an OOM leaves the class headroom above the peak and the grant it overran (a
 * fifth, as VPA's OOM bump), so a later job that peaks higher than the one seen still
 * fits, on any model. One A100-80GB and one H100-80GB-SXM5, MIG allowed; class search/s, each job
 * held to one model:
 *   0 s    s-1 (A100) asks 33,851 MiB: 3g.40gb (40,192 MiB), carved, starts at 10 s; it
 *          peaks at 40,268 and runs out of memory at 40 s. Learned: max(40,268, 40,192)
 *          x 1.2 = 48,322, which among the slices only 7g.80gb holds, the whole GPU: it
 *          gets an MPS share of that memory instead, in whole memory slots of 10,240 MiB:
 *          5 of 8, 625 thousandths; the GPU leaves MIG mode (a reconfiguration) and s-1
 *          starts again at 50 s; it finishes at 150 s.
 *   500 s  s-2 (H100) asks 33,851 and peaks at 46,557: sized 48,322 it gets the same
 *          share of the unpartitioned H100 (no reconfiguration: it starts at once) and
 *          finishes at 600 s. Learning the one peak alone (40,268) would have given it
 *          the H100's 3g.40gb (40,448 MiB) and run it out of memory again.
 * One OOM, no repeat. */
static void test_sim_oom_leaves_headroom(void **state)
{
    (void)state;
    World w;
    world_init(&w,
               "name: t\n"
               "pools:\n"
               "  - {name: a, tier: owned, nodes: 1,\n"
               "     node: {gpu_model: A100-80GB, gpus: 1, mig: true}}\n"
               "  - {name: h, tier: owned, nodes: 1,\n"
               "     node: {gpu_model: H100-80GB-SXM5, gpus: 1, mig: true}}\n",
               "id,team,kind,gpu_memory_mib,gpu_model,submit_s,duration_s,peak_memory_mib\n"
               "s-1,search,inference,33851,A100-80GB,0,100,40268\n"
               "s-2,search,inference,33851,H100-80GB-SXM5,500,100,46557\n");
    RunResult r;
    run(&w, &r);
    assert_int_equal(r.time.oom_failures, 1);
    assert_int_equal(r.time.oom_repeats, 0);
    assert_int_equal(r.time.finished, 2);
    event_is(&r, "start", "s-1", 0, 10000, "\"profile\": \"3g.40gb\"");
    event_is(&r, "oom", "s-1", 0, 40000, NULL);
    event_is(&r, "start", "s-1", 1, 50000, "\"fraction\": 0.625");
    event_is(&r, "finish", "s-1", 0, 150000, NULL);
    event_is(&r, "start", "s-2", 0, 500000, "\"fraction\": 0.625");
    event_is(&r, "finish", "s-2", 0, 600000, NULL);
    run_result_free(&r);
    world_free(&w);
}

/* Rule: a gpu_fraction job is sized from what its class learned, like a slice, with the
 * headroom an OOM leaves. One A100-80GB, not partitioned. f-1 (search) asks gpu_fraction
 * 0.1 = 8,192 MiB of 81,920 and peaks at 19,000 MiB; 100 s of work. It starts at 0 (an
 * MPS share needs no reconfiguration) and runs out of memory at 30 s. The class learns
 * 19,000 x 1.2 = 22,800 MiB: f-1 is sized up to the share that holds it in whole memory
 * slots of 10,240 MiB, 3 of 8 = 0.375 (30,720 MiB), started again at 30 s and finished
 * at 130 s. f-2 of the same class arrives at 500 s, asks 0.1 too and peaks at 22,000 MiB:
 * it starts with 0.375 and finishes at 600 s. One OOM, no repeat. (It failed by never
 * ending: restarted at 0.1, f-1 ran out of memory every 30 s for ever; and then, sized
 * to f-1's peak alone, 2 slots or 20,480 MiB, f-2 ran out of memory again.) */
static void test_sim_fraction_oom_does_not_repeat(void **state)
{
    (void)state;
    World w;
    world_init(&w,
               "name: t\n"
               "pools:\n"
               "  - {name: a, tier: owned, nodes: 1, node: {gpu_model: A100-80GB, gpus: 1}}\n",
               "id,team,kind,gpu_fraction,submit_s,duration_s,peak_memory_mib\n"
               "f-1,search,inference,0.1,0,100,19000\n"
               "f-2,search,inference,0.1,500,100,22000\n");
    RunResult r;
    run(&w, &r);
    assert_int_equal(r.time.oom_failures, 1);
    assert_int_equal(r.time.oom_repeats, 0);
    assert_int_equal(r.time.finished, 2);
    event_is(&r, "oom", "f-1", 0, 30000, NULL);
    event_is(&r, "start", "f-1", 1, 30000, "\"fraction\": 0.375");
    event_is(&r, "finish", "f-1", 0, 130000, NULL);
    event_is(&r, "start", "f-2", 0, 500000, "\"fraction\": 0.375");
    event_is(&r, "finish", "f-2", 0, 600000, NULL);
    run_result_free(&r);
    world_free(&w);
}

/* Rule: a job of the class already waiting when the class learns is sized where it waits.
 * One A100-80GB, not partitioned. fill (ads, gpu_fraction 0.9, 1,000 s) and f-1 (search,
 * 0.1 = 8,192 MiB, peak 12,000, 100 s) start at 0; f-2 (search, 0.1, peak 12,000, 100 s)
 * arrives at 10 s and waits: the GPU is full. At 30 s f-1 runs out of memory; its class
 * learns 14,400 MiB (2 of 8 memory slots, 0.25) and f-1 waits, sized 0.25; so does f-2.
 * At 1,000 s fill ends, both start (half the GPU) and finish at 1,100 s. One OOM, no repeat. (It
 * failed with a repeat: f-2 kept 0.1 and ran out of memory at 1,030 s.) */
static void test_sim_waiting_job_is_sized_when_its_class_learns(void **state)
{
    (void)state;
    World w;
    world_init(&w,
               "name: t\n"
               "pools:\n"
               "  - {name: a, tier: owned, nodes: 1, node: {gpu_model: A100-80GB, gpus: 1}}\n",
               "id,team,kind,gpu_fraction,submit_s,duration_s,peak_memory_mib\n"
               "fill,ads,batch,0.9,0,1000,\n"
               "f-1,search,inference,0.1,0,100,12000\n"
               "f-2,search,inference,0.1,10,100,12000\n");
    RunResult r;
    run(&w, &r);
    assert_int_equal(r.time.oom_failures, 1);
    assert_int_equal(r.time.oom_repeats, 0);
    assert_int_equal(r.time.finished, 3);
    event_is(&r, "oom", "f-1", 0, 30000, NULL);
    event_is(&r, "start", "f-1", 1, 1000000, "\"fraction\": 0.25");
    event_is(&r, "start", "f-2", 0, 1000000, "\"fraction\": 0.25");
    event_is(&r, "finish", "f-2", 0, 1100000, NULL);
    run_result_free(&r);
    world_free(&w);
}

/* Rule: a class that needs more memory than any GPU of the cluster has is not retried.
 * One A100-80GB (81,920 MiB), not partitioned. w-1 (search, 1 whole GPU, peak 100,000
 * MiB, 100 s of work) starts at 0 and runs out of memory at 30 s; 100,000 is learned, no
 * GPU holds it, so at 30 s w-1 is unschedulable rather than queued again. w-2 (the same
 * class) arriving at 500 s is unschedulable at once, without an OOM of its own. One OOM,
 * no repeat, nothing finished, two unschedulable, and the run ends. (It failed by never
 * ending: w-1 was queued again on the same GPU and ran out of memory every 30 s.) */
static void test_sim_oom_beyond_every_gpu_is_unschedulable(void **state)
{
    (void)state;
    World w;
    world_init(&w,
               "name: t\n"
               "pools:\n"
               "  - {name: a, tier: owned, nodes: 1, node: {gpu_model: A100-80GB, gpus: 1}}\n",
               "id,team,kind,gpus,submit_s,duration_s,peak_memory_mib\n"
               "w-1,search,training,1,0,100,100000\n"
               "w-2,search,training,1,500,100,100000\n");
    RunResult r;
    run(&w, &r);
    assert_int_equal(r.time.oom_failures, 1);
    assert_int_equal(r.time.oom_repeats, 0);
    assert_int_equal(r.time.finished, 0);
    assert_int_equal(r.time.unschedulable, 2);
    event_is(&r, "start", "w-1", 0, 0, NULL);
    event_is(&r, "oom", "w-1", 0, 30000, NULL);
    event_is(&r, "unschedulable", "w-1", 0, 30000, "more GPU memory than any GPU");
    event_is(&r, "unschedulable", "w-2", 0, 500000, "more GPU memory than any GPU");
    char line[1024];
    assert_false(event_line(&r, "start", "w-1", 1, line, sizeof(line)));
    assert_false(event_line(&r, "start", "w-2", 0, line, sizeof(line)));
    run_result_free(&r);
    world_free(&w);
}

/* Rule: a class learns per GPU. One node of two A100-40GB (40,960 MiB each), listed
 * first, and one of two A100-80GB. t-1 (research, 2 whole GPUs, peak 90,000 MiB over
 * both, 100 s of work) starts on the A100-40GBs at 0 (first fit) and runs out of memory
 * at 30 s (90,000 > 81,920): per GPU it was given 40,960 and reached all of it, so the
 * class needs a fifth above 40,960, 49,152 per GPU, which the A100-80GB holds: t-1 runs
 * there from 30 s and finishes at 130 s. (It failed by learning 108,000, a fifth above
 * the worker's 90,000 over two GPUs, more than any one GPU has: t-1 was unschedulable.)
 * learn_per_gpu splits a worker's total over its grants, rounded up, and never says
 * more than one GPU of its node has: 90,000 or 100,000 over two A100-40GB is 40,960
 * per GPU, so a peak reported wrong teaches no more than a fifth above the GPU. */
static void test_sim_oom_learns_per_gpu(void **state)
{
    (void)state;
    World w;
    world_init(&w,
               "name: t\n"
               "pools:\n"
               "  - {name: s, tier: owned, nodes: 1, node: {gpu_model: A100-40GB, gpus: 2}}\n"
               "  - {name: b, tier: owned, nodes: 1, node: {gpu_model: A100-80GB, gpus: 2}}\n",
               "id,team,kind,gpus,submit_s,duration_s,peak_memory_mib\n"
               "t-1,research,training,2,0,100,90000\n");
    uint32_t s0 = 0;
    while (s0 < w.c->n_nodes && strcmp(w.c->nodes[s0].name, "s-0"))
        s0++;
    assert_true(s0 < w.c->n_nodes);
    WorkerAlloc wa = {.node = s0, .n_grants = 2};
    assert_int_equal(learn_per_gpu(w.c, &wa, 90000), 40960);
    assert_int_equal(learn_per_gpu(w.c, &wa, 80001), 40001);
    assert_int_equal(learn_per_gpu(w.c, &wa, 100000), 40960);
    wa.n_grants = 0;
    assert_int_equal(learn_per_gpu(w.c, &wa, 7), 7);
    RunResult r;
    run(&w, &r);
    assert_int_equal(r.time.oom_failures, 1);
    assert_int_equal(r.time.oom_repeats, 0);
    assert_int_equal(r.time.unschedulable, 0);
    assert_int_equal(r.time.finished, 1);
    event_is(&r, "start", "t-1", 0, 0, "\"node\": \"s-0\"");
    event_is(&r, "oom", "t-1", 0, 30000, NULL);
    event_is(&r, "start", "t-1", 1, 30000, "\"node\": \"b-0\"");
    event_is(&r, "finish", "t-1", 0, 130000, NULL);
    run_result_free(&r);
    world_free(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_class_of),
        cmocka_unit_test(test_class_sharing),
        cmocka_unit_test(test_class_team),
        cmocka_unit_test(test_class_truncated),
        cmocka_unit_test(test_forget),
        cmocka_unit_test(test_record_keeps_largest),
        cmocka_unit_test(test_oom_bump),
        cmocka_unit_test(test_memory_for),
        cmocka_unit_test(test_size_request),
        cmocka_unit_test(test_sim_oom_does_not_repeat),
        cmocka_unit_test(test_sim_oom_leaves_headroom),
        cmocka_unit_test(test_sim_fraction_oom_does_not_repeat),
        cmocka_unit_test(test_sim_waiting_job_is_sized_when_its_class_learns),
        cmocka_unit_test(test_sim_oom_beyond_every_gpu_is_unschedulable),
        cmocka_unit_test(test_sim_oom_learns_per_gpu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
