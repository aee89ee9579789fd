/* test_learn.c: what the scheduler learns about GPU memory (core/learn.c). A job's class
 * is its explicit workload class, else its team and its name without a trailing number,
 * so the replicas and reruns of one workload ("llama-serve-3", "llama-serve-17") share
 * what was learned and another team's job of the same name does not. The table keeps
 * the largest peak seen per class, and a job asking by memory is raised to its class's
 * peak (never lowered), which is what stops an out-of-memory failure from repeating. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core/job.h"
#include "core/learn.h"

#include <stdio.h>
#include <string.h>

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

/* The class by hand: an explicit class wins over team and name; an empty one does not
 * count. Otherwise "team/name" with the trailing digits and then the separators before
 * them cut: llama-serve-17, llama-serve_3 and llama-serve.9 are all search/llama-serve;
 * resnet50 is search/resnet; a name that is all digits is kept whole. */
static void test_class_of(void **state)
{
    (void)state;
    JobSpec j = spec("search", "llama-serve-17", "serving-llm");
    assert_class(&j, "serving-llm");
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
}

/* Output is cut to outlen - 1 bytes and always terminated; outlen 0 writes nothing. */
static void test_class_truncated(void **state)
{
    (void)state;
    char out[16];
    JobSpec j = spec("search", "llama-serve-17", NULL);
    learn_class_of(&j, out, 8);
    assert_string_equal(out, "search/");
    learn_class_of(&j, out, 4);
    assert_string_equal(out, "sea");
    learn_class_of(&j, out, 1);
    assert_string_equal(out, "");
    memcpy(out, "untouched", 10);
    learn_class_of(&j, out, 0);
    assert_string_equal(out, "untouched");
    j = spec("search", "x", "serving-llm");
    learn_class_of(&j, out, 6);
    assert_string_equal(out, "servi");
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

    /* an explicit class shares across names and teams */
    JobSpec k = spec("ads", "whatever-2", "search/llama-serve");
    k.req = REQ_MEMORY;
    k.gpu_memory_mib = 5000;
    assert_int_equal(learn_memory_for(&l, &k), 30000);
    learn_free(&l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_class_of),        cmocka_unit_test(test_class_sharing),
        cmocka_unit_test(test_class_truncated), cmocka_unit_test(test_record_keeps_largest),
        cmocka_unit_test(test_memory_for),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
