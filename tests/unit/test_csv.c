/* test_csv.c: the RFC 4180 reader (util/csv.c) that trace and job files go through:
 * quoted fields with commas, doubled quotes and newlines, CRLF, blank lines, the line
 * number of every row (multi-line fields included, since error messages cite it),
 * errors for an unterminated quote or text after a closing quote, and header lookup. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "util/csv.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Read one row and compare it with the expected fields and line. */
static void expect_row(CsvReader *r, size_t line, size_t n, ...)
{
    int rc = csv_next(r);
    if (rc != 1)
        fail_msg("csv_next = %d, expected a row at line %zu", rc, line);
    assert_int_equal(r->line, line);
    if (r->nfields != n)
        fail_msg("row at line %zu has %zu fields, expected %zu", line, r->nfields, n);
    va_list ap;
    va_start(ap, n);
    for (size_t i = 0; i < n; i++)
        assert_string_equal(r->fields[i], va_arg(ap, const char *));
    va_end(ap);
}

static void open_text(CsvReader *r, const char *text)
{
    csv_init(r, text, strlen(text));
}

static void test_plain(void **state)
{
    CsvReader r;
    open_text(&r, "a,b,c\n1,2,3\n");
    expect_row(&r, 1, 3, "a", "b", "c");
    expect_row(&r, 2, 3, "1", "2", "3");
    assert_int_equal(csv_next(&r), 0);
    assert_int_equal(csv_next(&r), 0); /* stays at the end */
    csv_free(&r);

    /* no newline at the end, empty fields */
    open_text(&r, "x,,y\n,\nlast");
    expect_row(&r, 1, 3, "x", "", "y");
    expect_row(&r, 2, 2, "", "");
    expect_row(&r, 3, 1, "last");
    assert_int_equal(csv_next(&r), 0);
    csv_free(&r);

    open_text(&r, "");
    assert_int_equal(csv_next(&r), 0);
    csv_free(&r);
}

static void test_quotes(void **state)
{
    CsvReader r;
    open_text(&r, "\"a,b\",c\n\"say \"\"hi\"\"\",\"\"\n\"\"\"\",x\n");
    expect_row(&r, 1, 2, "a,b", "c");
    expect_row(&r, 2, 2, "say \"hi\"", "");
    expect_row(&r, 3, 2, "\"", "x");
    assert_int_equal(csv_next(&r), 0);
    csv_free(&r);

    /* a quote inside an unquoted field is data; spaces after a closing quote are ok */
    open_text(&r, "ab\"c,d\n\"q\"  ,z\n");
    expect_row(&r, 1, 2, "ab\"c", "d");
    expect_row(&r, 2, 2, "q", "z");
    csv_free(&r);
}

static void test_crlf(void **state)
{
    CsvReader r;
    open_text(&r, "a,b\r\n1,2\r\n\"q\",\"r\"\r\n\r\nlast,\r\n");
    expect_row(&r, 1, 2, "a", "b");
    expect_row(&r, 2, 2, "1", "2");
    expect_row(&r, 3, 2, "q", "r");
    expect_row(&r, 5, 2, "last", "");
    assert_int_equal(csv_next(&r), 0);
    csv_free(&r);
}

static void test_blank_lines_and_bom(void **state)
{
    CsvReader r;
    open_text(&r, "\xEF\xBB\xBFh1,h2\n\n   \n\t\n1,2\n\n\n3,4\n\n");
    expect_row(&r, 1, 2, "h1", "h2");
    expect_row(&r, 5, 2, "1", "2");
    expect_row(&r, 8, 2, "3", "4");
    assert_int_equal(csv_next(&r), 0);
    csv_free(&r);

    open_text(&r, "\n\nfirst\n");
    expect_row(&r, 3, 1, "first");
    csv_free(&r);
}

static void test_multiline_field_lines(void **state)
{
    CsvReader r;
    open_text(&r, "id,note\n1,\"two\nlines\"\n2,\"three\r\nlines\nhere\"\n\n3,end\n");
    expect_row(&r, 1, 2, "id", "note");
    expect_row(&r, 2, 2, "1", "two\nlines");
    expect_row(&r, 4, 2, "2", "three\r\nlines\nhere");
    expect_row(&r, 8, 2, "3", "end");
    assert_int_equal(csv_next(&r), 0);
    csv_free(&r);
}

static void test_errors(void **state)
{
    CsvReader r;
    open_text(&r, "ok,1\nbad,\"never closed\n3,4\n");
    expect_row(&r, 1, 2, "ok", "1");
    assert_int_equal(csv_next(&r), -EINVAL);
    csv_free(&r);

    open_text(&r, "\"closed\"junk,x\n");
    assert_int_equal(csv_next(&r), -EINVAL);
    csv_free(&r);

    open_text(&r, "\"");
    assert_int_equal(csv_next(&r), -EINVAL);
    csv_free(&r);
}

static void test_column(void **state)
{
    CsvReader r;
    open_text(&r, " Name , AGE,gpu_memory,\"quoted col\"\n");
    assert_int_equal(csv_next(&r), 1);
    assert_int_equal(csv_column(&r, "name"), 0);
    assert_int_equal(csv_column(&r, "age"), 1);
    assert_int_equal(csv_column(&r, "GPU_MEMORY"), 2);
    assert_int_equal(csv_column(&r, "quoted col"), 3);
    assert_int_equal(csv_column(&r, "nam"), -1);
    assert_int_equal(csv_column(&r, "missing"), -1);
    csv_free(&r);
}

/* A long row with many fields (the scratch and field arrays grow). */
static void test_long_row(void **state)
{
    size_t n = 5000;
    char *text = malloc(n * 8 + 2);
    assert_non_null(text);
    size_t len = 0;
    for (size_t i = 0; i < n; i++)
        len += (size_t)sprintf(text + len, "%s\"%zu\"", i ? "," : "", i);
    text[len++] = '\n';
    text[len] = '\0';
    CsvReader r;
    csv_init(&r, text, len);
    assert_int_equal(csv_next(&r), 1);
    assert_int_equal(r.nfields, n);
    for (size_t i = 0; i < n; i += 97) {
        char want[16];
        sprintf(want, "%zu", i);
        assert_string_equal(r.fields[i], want);
    }
    assert_int_equal(csv_next(&r), 0);
    csv_free(&r);
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain),
        cmocka_unit_test(test_quotes),
        cmocka_unit_test(test_crlf),
        cmocka_unit_test(test_blank_lines_and_bom),
        cmocka_unit_test(test_multiline_field_lines),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_column),
        cmocka_unit_test(test_long_row),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
