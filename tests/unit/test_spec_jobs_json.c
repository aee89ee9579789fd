/* test_spec_jobs_json.c: JSON job files read by jansson (spec_parse_jobs_json) say
 * exactly what the YAML reader says of the same text: the same jobs, the same messages
 * with the same lines; and what only JSON refuses (duplicate keys, NUL, too deep) or
 * YAML bodies are bounded by (size, work) is refused with a message. */
#include "spec/spec.h"

#include "core/job.h"
#include "spec/job_json.h"
#include "util/buf.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* Every job of l as the JSON the server stores, one per line. */
static void render(const JobList *l, Buf *out)
{
    for (size_t i = 0; i < l->n; i++) {
        assert_int_equal(spec_job_to_json(&l->jobs[i], out), 0);
        buf_putc(out, '\n');
    }
}

/* text read as YAML and as JSON: the same result code, jobs and messages. */
static void same(const char *text)
{
    JobList ly = {0}, lj = {0};
    Buf ey = {0}, ej = {0}, ry = {0}, rj = {0};
    int y = spec_parse_jobs_yaml(text, strlen(text), "j", &ly, &ey);
    int j = spec_parse_jobs_json(text, strlen(text), "j", &lj, &ej);
    render(&ly, &ry);
    render(&lj, &rj);
    if (y != j || strcmp(buf_str(&ey), buf_str(&ej)) || strcmp(buf_str(&ry), buf_str(&rj)))
        print_message("input:\n%s\nYAML %d:\n%s\n%s\nJSON %d:\n%s\n%s\n", text, y, buf_str(&ey),
                      buf_str(&ry), j, buf_str(&ej), buf_str(&rj));
    assert_int_equal(y, j);
    assert_string_equal(buf_str(&ey), buf_str(&ej));
    assert_string_equal(buf_str(&ry), buf_str(&rj));
    job_list_free(&ly);
    job_list_free(&lj);
    buf_free(&ey);
    buf_free(&ej);
    buf_free(&ry);
    buf_free(&rj);
}

static void test_same_as_yaml(void **state)
{
    static const char *const cases[] = {
        /* accepted */
        "{\"name\": \"a\", \"gpus\": 2, \"command\": [\"sleep\", \"60\"]}",
        "[\n {\"id\": \"a\", \"gpus\": 4, \"workers\": 2, \"capacity\": \"spot\",\n"
        "  \"env\": {\"DEBUG\": true, \"N\": 3, \"EMPTY\": null}},\n"
        " {\"name\": \"b\", \"gpu_fraction\": 0.5, \"preemptible\": false,\n"
        "  \"topology\": {\"scope\": \"spine\", \"mode\": \"required\"}}\n]\n",
        "{\"name\": \"c\", \"mig\": \"1g.10gb\", \"checkpoint\": {\"interval\": \"30m\", "
        "\"grace\": "
        "\"1m\"}, \"command\": \"python3 train.py --lr 0.1\", \"gpu_models\": [\"H100\", "
        "\"A100\"]}",
        "{\"name\": \"d\", \"gpu_memory\": \"20GiB\", \"cpus\": 1.5, \"memory\": \"8GiB\", "
        "\"max_wait\": 90, \"capacity\": [\"reserved\", \"on-demand\"], \"class\": \"bert\"}",
        "{\"name\": \"e\", \"gpu_fraction\": \"0.25\", \"gpus\": null}",
        "{\"name\": 123}",
        "[]",
        /* refused, line by line */
        "[\n {\"name\": \"a\",\n  \"gpu\": 2}\n]",
        "{\"name\": \"a\", \"kind\": \"traning\"}",
        "{\"name\": \"a\",\n \"gpus\": 2,\n \"mig\": \"1g.10gb\"}",
        "{\"name\": \"a\", \"workers\": -1}",
        "{\"name\": \"a\", \"workers\": 1.5}",
        "{\"name\": \"a\", \"gpus\": 2.0}",
        "{\"name\": \"a\", \"gpus\": 1e3}",
        "{\"name\": \"a\", \"gpus\": 99999999999999999}",
        "{\"name\": \"a\", \"gpus\": true}",
        "{\"name\": \"a\", \"gpus\": [1]}",
        "{\"name\": \"a\", \"gpus\": {\"n\": 1}}",
        "{\"name\": \"a\", \"gpu_fraction\": 0.0001}",
        "{\"name\": \"a\", \"team\": {\"x\": 1}}",
        "{\"name\": [\"a\"]}",
        "{\"name\": \"a b\"}",
        "{\"name\": \"\"}",
        "{\"name\": \"a\", \"id\": \"b\"}",
        "{\"gpus\": 1}",
        "[{\"name\": \"a\"},\n {\"name\": \"b\"},\n {\"name\": \"a\"}]",
        "[\"a\", \"b\"]",
        "\"a\"",
        "{\"name\": \"a\", \"topology\": {\"scope\": \"rack\"}}",
        "{\"name\": \"a\", \"topology\": \"leaf\"}",
        "{\"name\": \"a\", \"checkpoint\": {\"every\": \"30m\"}}",
        "{\"name\": \"a\", \"env\": {\"1BAD\": \"x\"}}",
        "{\"name\": \"a\", \"env\": [\"A=1\"]}",
        "{\"name\": \"a\",\n \"env\": {\n  \"A\": [1, 2]}}",
        "{\"name\": \"a\", \"command\": {\"run\": \"x\"}}",
        "{\"name\": \"a\", \"command\": []}",
        "{\"name\": \"a\", \"capacity\": []}",
        "{\"name\": \"a\", \"gpu_models\": [\"H100\", [\"A100\"]]}",
        "[{\"name\": \"a\", \"gpus\": \"x\"}, {\"name\": \"b\", \"kind\": \"y\"}]",
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++)
        same(cases[i]);
}

/* Fails with want, nothing returned, the message holding needle. */
static void json_bad(const char *text, size_t len, int want, const char *needle)
{
    JobList l = {0};
    Buf err = {0};
    int r = spec_parse_jobs_json(text, len, "j", &l, &err);
    if (r != want || !strstr(buf_str(&err), needle))
        print_message("got %d: %s\nwanted %d with '%s'\n", r, buf_str(&err), want, needle);
    assert_int_equal(r, want);
    assert_non_null(strstr(buf_str(&err), needle));
    assert_int_equal(l.n, 0);
    assert_null(l.jobs);
    buf_free(&err);
}

static void test_json_only(void **state)
{
    json_bad("{\"name\": \"a\", \"name\": \"b\"}", 26, -EBADMSG, "j:1: invalid JSON: duplicate");
    json_bad("{\"name\": \"a\\u0000b\"}", 20, -EBADMSG, "invalid JSON");
    json_bad("{\"name\": \"a\xff\"}", 14, -EBADMSG, "invalid JSON");
    json_bad("{\"name\": \"a\",\n \"team\": ", 23, -EBADMSG, "j:2: invalid JSON");
    json_bad("{\"name\": \"a\"} x", 15, -EBADMSG, "invalid JSON");
    json_bad("", 0, -EBADMSG, "invalid JSON");
    json_bad("{name: a}", 9, -EBADMSG, "invalid JSON");
    json_bad("null", 4, -EINVAL, "j:1: empty");
    json_bad("{\"name\": \"a\", \"gpus\": 1e999}", 27, -EBADMSG, "invalid JSON");

    /* nesting: 64 levels are read, 65 are not */
    Buf deep = {0};
    for (int i = 0; i < 64; i++)
        buf_putc(&deep, '[');
    for (int i = 0; i < 64; i++)
        buf_putc(&deep, ']');
    json_bad(deep.data, deep.len, -EINVAL, "a job must be a mapping");
    buf_reset(&deep);
    for (int i = 0; i < 65; i++)
        buf_putc(&deep, '[');
    for (int i = 0; i < 65; i++)
        buf_putc(&deep, ']');
    json_bad(deep.data, deep.len, -EINVAL, "nested deeper than 64 levels");
    buf_free(&deep);

    /* environment: up to 1024 entries; past that the count is named */
    for (int n = 1024; n <= 1025; n++) {
        Buf b = {0};
        buf_puts(&b, "{\"name\": \"a\", \"env\": {");
        for (int i = 0; i < n; i++)
            buf_printf(&b, "%s\"V%d\": \"x\"", i ? ", " : "", i);
        buf_puts(&b, "}}");
        JobList l = {0};
        Buf err = {0};
        int r = spec_parse_jobs_json(b.data, b.len, "j", &l, &err);
        if (n == 1024) {
            assert_int_equal(r, 0);
            assert_int_equal(l.jobs[0].n_env, 1024);
        } else {
            assert_int_equal(r, -EINVAL);
            assert_non_null(strstr(buf_str(&err), "has 1025 entries; a job may set at most 1024"));
        }
        job_list_free(&l);
        buf_free(&err);
        buf_free(&b);
    }
}

/* Trailing blanks and many keys cost nothing: the reader is linear. */
static void test_json_linear(void **state)
{
    Buf b = {0};
    buf_puts(&b, "{\"name\": \"a\", \"gpus\": 1}");
    for (int i = 0; i < 900000; i++)
        buf_putc(&b, ' ');
    JobList l = {0};
    Buf err = {0};
    assert_int_equal(spec_parse_jobs_json(b.data, b.len, "j", &l, &err), 0);
    assert_int_equal(l.n, 1);
    job_list_free(&l);
    buf_reset(&b);
    /* 20,000 unknown keys: 20 messages, then silence */
    buf_puts(&b, "{\"name\": \"a\"");
    for (int i = 0; i < 20000; i++)
        buf_printf(&b, ", \"unknown_field_with_a_long_name_%d\": %d", i, i);
    buf_putc(&b, '}');
    assert_int_equal(spec_parse_jobs_json(b.data, b.len, "j", &l, &err), -EINVAL);
    assert_non_null(strstr(buf_str(&err), "too many errors"));
    buf_free(&err);
    buf_free(&b);
}

/* A request's YAML is bounded in size and in work. */
static void test_yaml_body_bounds(void **state)
{
    Buf b = {0}, err = {0};
    JobList l = {0};
    buf_puts(&b, "[x]\n");
    for (int i = 0; i < 70000; i++)
        buf_putc(&b, '[');
    assert_int_equal(spec_parse_jobs_yaml_body(b.data, b.len, "j", &l, &err), -EFBIG);
    assert_non_null(strstr(buf_str(&err), "a YAML body is at most 64 KiB"));
    buf_reset(&b);
    buf_reset(&err);
    /* 30,000 empty documents: small, but too much to read */
    for (int i = 0; i < 15000; i++)
        buf_puts(&b, "---\n");
    assert_int_equal(spec_parse_jobs_yaml_body(b.data, b.len, "j", &l, &err), -EINVAL);
    assert_non_null(strstr(buf_str(&err), "more than 40000 YAML values to read"));
    buf_reset(&b);
    buf_reset(&err);
    /* a few hundred jobs are fine */
    for (int i = 0; i < 300; i++)
        buf_printf(&b, "- name: j%d\n  gpus: 1\n  command: [x]\n", i);
    assert_int_equal(spec_parse_jobs_yaml_body(b.data, b.len, "j", &l, &err), 0);
    assert_int_equal(l.n, 300);
    job_list_free(&l);
    buf_free(&err);
    buf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_as_yaml),
        cmocka_unit_test(test_json_only),
        cmocka_unit_test(test_json_linear),
        cmocka_unit_test(test_yaml_body_bounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
