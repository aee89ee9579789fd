/* test_buf.c: the growable text buffer (util/buf.c) the core writes its "why is my job
 * pending" sentences into and the CLI its output: appends of every kind, growth past
 * the formatting fast path, reset, steal, and JSON string escaping (the API's bodies
 * are built with it, so a missed escape is an injection). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "util/buf.h"

#include <stdlib.h>
#include <string.h>

static void test_empty(void **state)
{
    Buf b = {0};
    assert_string_equal(buf_str(&b), "");
    assert_int_equal(b.len, 0);
    buf_reset(&b); /* before any append */
    buf_free(&b);
    buf_free(&b); /* twice is harmless */
    char *s = buf_steal(&b);
    assert_non_null(s);
    assert_string_equal(s, "");
    free(s);
}

static void test_appends(void **state)
{
    Buf b = {0};
    buf_puts(&b, "no node has ");
    buf_append(&b, "8 free GPUs!!", 11);
    buf_putc(&b, ' ');
    buf_printf(&b, "(%u of %d, %s)", 3u, 4, "leaf-a");
    assert_string_equal(buf_str(&b), "no node has 8 free GPUs (3 of 4, leaf-a)");
    assert_int_equal(b.len, strlen(buf_str(&b)));
    assert_false(b.oom);
    buf_append(&b, "", 0);
    assert_int_equal(b.len, strlen("no node has 8 free GPUs (3 of 4, leaf-a)"));
    buf_reset(&b);
    assert_string_equal(buf_str(&b), "");
    assert_int_equal(b.len, 0);
    buf_puts(&b, "again");
    assert_string_equal(buf_str(&b), "again");
    buf_free(&b);
    assert_null(b.data);
}

static void test_growth(void **state)
{
    Buf b = {0};
    /* many small appends, and printf output longer than its 256-byte fast path */
    for (int i = 0; i < 1000; i++)
        buf_printf(&b, "%03d,", i);
    assert_int_equal(b.len, 4000);
    assert_memory_equal(b.data + 4 * 537, "537,", 4);
    char big[1500];
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    buf_printf(&b, "[%s]", big);
    assert_int_equal(b.len, 4000 + 1501);
    assert_int_equal(b.data[4000], '[');
    assert_int_equal(b.data[4000 + 1500], ']');
    assert_int_equal(b.data[b.len], '\0');
    assert_true(b.cap > b.len);
    assert_false(b.oom);

    char *s = buf_steal(&b);
    assert_int_equal(strlen(s), 5501);
    assert_null(b.data);
    assert_int_equal(b.len, 0);
    free(s);
    buf_free(&b);
}

static void json(const char *in, const char *want)
{
    Buf b = {0};
    buf_json_str(&b, in);
    assert_string_equal(buf_str(&b), want);
    buf_free(&b);
}

static void test_json_str(void **state)
{
    json("", "\"\"");
    json("plain", "\"plain\"");
    json("say \"hi\"", "\"say \\\"hi\\\"\"");
    json("a\\b", "\"a\\\\b\"");
    json("l1\nl2\tt\rr", "\"l1\\nl2\\tt\\rr\"");
    json("\x01\x1f", "\"\\u0001\\u001f\"");
    json("caf\xc3\xa9", "\"caf\xc3\xa9\""); /* UTF-8 passes through */
    json("</script>", "\"</script>\"");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty),
        cmocka_unit_test(test_appends),
        cmocka_unit_test(test_growth),
        cmocka_unit_test(test_json_str),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
