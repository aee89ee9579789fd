/* test_units.c: parsing of the quantities people write in specs (util/units.c):
 * sizes in binary and decimal units, durations, exact fixed-point decimals and strict
 * integers. Every spec and trace reader goes through these, so a wrong rounding here
 * becomes a wrong MIG slice or a wrong bill; garbage and overflow must be refused,
 * never truncated. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "util/units.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static uint64_t size_ok(const char *s)
{
    uint64_t v = 12345;
    int r = parse_size_mib(s, &v);
    if (r != 0)
        fail_msg("parse_size_mib(\"%s\") = %d, expected success", s, r);
    return v;
}

static void size_err(const char *s, int err)
{
    uint64_t v = 777;
    int r = parse_size_mib(s, &v);
    if (r != err)
        fail_msg("parse_size_mib(\"%s\") = %d, expected %d", s, r, err);
    assert_int_equal(v, 777); /* output untouched on failure */
}

static void test_sizes(void **state)
{
    assert_int_equal(size_ok("18GiB"), 18432);
    assert_int_equal(size_ok("18Gi"), 18432);
    assert_int_equal(size_ok("18G"), 18432);
    assert_int_equal(size_ok("18gib"), 18432);
    assert_int_equal(size_ok("  18 GiB  "), 18432);
    assert_int_equal(size_ok("512MiB"), 512);
    assert_int_equal(size_ok("512Mi"), 512);
    assert_int_equal(size_ok("512"), 512); /* bare number: MiB */
    assert_int_equal(size_ok("0"), 0);
    assert_int_equal(size_ok("1.5TiB"), 1572864);
    assert_int_equal(size_ok("1.5GiB"), 1536);
    assert_int_equal(size_ok(".5GiB"), 512);
    assert_int_equal(size_ok("2048KiB"), 2);
    /* decimal units, rounded up to whole MiB */
    assert_int_equal(size_ok("80GB"), 76294);     /* 80e9 / 2^20 = 76293.95 */
    assert_int_equal(size_ok("1GB"), 954);        /* 953.67 */
    assert_int_equal(size_ok("1MB"), 1);          /* 0.95 */
    assert_int_equal(size_ok("1048576kB"), 1000); /* 1.048576e9 bytes = 1000 MiB exactly */
    assert_int_equal(size_ok("1TB"), 953675);     /* 953674.32 */
    assert_int_equal(size_ok("16.777MB"), 16);    /* 15.9998 */
    /* fractions of a MiB round up */
    assert_int_equal(size_ok("1KiB"), 1);
    assert_int_equal(size_ok("0.001"), 1);
    assert_int_equal(size_ok("1.5"), 2);
}

static void test_sizes_more_digits(void **state)
{
    /* 1.0625 GiB is exactly 1088 MiB; four decimals are as exact as two */
    assert_int_equal(size_ok("1.0625GiB"), 1088);
}

static void test_size_garbage(void **state)
{
    size_err("", -EINVAL);
    size_err("   ", -EINVAL);
    size_err("GiB", -EINVAL);
    size_err("abc", -EINVAL);
    size_err("-1GiB", -EINVAL);
    size_err("+1GiB", -EINVAL);
    size_err("18XB", -EINVAL);
    size_err("18GiBs", -EINVAL);
    size_err("18 G iB", -EINVAL);
    size_err("1.2.3", -EINVAL);
    size_err("1e3", -EINVAL);
    size_err("18GiB18", -EINVAL);
    size_err("0x10", -EINVAL);
    size_err("1,5GiB", -EINVAL);
    size_err(".", -EINVAL);
    assert_int_equal(parse_size_mib(NULL, &(uint64_t){0}), -EINVAL);
}

static void test_size_overflow(void **state)
{
    /* more MiB than the limit (2^32 GiB) */
    size_err("5000000TiB", -ERANGE);
    size_err("99999999999999999999999", -ERANGE);
    size_err("99999999999999999999999GiB", -ERANGE);
    /* large but representable */
    assert_int_equal(size_ok("4096TiB"), 4096ull * 1024 * 1024);
}

static int64_t dur_ok(const char *s)
{
    int64_t v = 12345;
    int r = parse_duration_ms(s, &v);
    if (r != 0)
        fail_msg("parse_duration_ms(\"%s\") = %d, expected success", s, r);
    return v;
}

static void dur_err(const char *s, int err)
{
    int64_t v = 777;
    int r = parse_duration_ms(s, &v);
    if (r != err)
        fail_msg("parse_duration_ms(\"%s\") = %d, expected %d", s, r, err);
    assert_int_equal(v, 777);
}

static void test_durations(void **state)
{
    assert_int_equal(dur_ok("30m"), 1800000);
    assert_int_equal(dur_ok("2h"), 7200000);
    assert_int_equal(dur_ok("1h30m"), 5400000);
    assert_int_equal(dur_ok("1h 30m"), 5400000);
    assert_int_equal(dur_ok("90s"), 90000);
    assert_int_equal(dur_ok("500ms"), 500);
    assert_int_equal(dur_ok("1d"), 86400000);
    assert_int_equal(dur_ok("1d2h3m4s5ms"), 86400000 + 7200000 + 180000 + 4000 + 5);
    assert_int_equal(dur_ok("45"), 45000); /* bare number: seconds */
    assert_int_equal(dur_ok("1.5"), 1500);
    assert_int_equal(dur_ok("1.5h"), 5400000);
    assert_int_equal(dur_ok("0.25s"), 250);
    assert_int_equal(dur_ok("0"), 0);
    assert_int_equal(dur_ok("1m5s"), 65000);
    assert_int_equal(dur_ok("  10m"), 600000);
}

static void test_duration_garbage(void **state)
{
    dur_err("", -EINVAL);
    dur_err("  ", -EINVAL);
    dur_err("h", -EINVAL);
    dur_err("m30", -EINVAL);
    dur_err("1x", -EINVAL);
    dur_err("1hh", -EINVAL);
    dur_err("-5s", -EINVAL);
    dur_err("1h30", -EINVAL); /* a bare number only on its own */
    dur_err("1.5.5s", -EINVAL);
    dur_err("1sec", -EINVAL);
    dur_err("0.0001s", -EINVAL); /* finer than a millisecond */
    assert_int_equal(parse_duration_ms(NULL, &(int64_t){0}), -EINVAL);
    dur_err("99999999999999d", -ERANGE);
    dur_err("9999999999999999999999s", -ERANGE);
}

static void test_format_duration(void **state)
{
    static const struct {
        int64_t ms;
        const char *text;
    } cases[] = {
        {90000, "90s"},   {1800000, "30m"},     {7200000, "2h"},   {5400000, "1h30m"},
        {1500, "1500ms"}, {0, "0ms"},           {86400000, "24h"}, {3661000, "3661s"},
        {60000, "1m"},    {90061000, "90061s"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char out[32];
        format_duration(cases[i].ms, out, sizeof(out));
        assert_string_equal(out, cases[i].text);
    }
    /* round trip: whatever it writes parses back to the same value */
    for (int64_t ms = 0; ms < 200000000; ms += 999983) {
        int64_t vals[] = {ms, ms - ms % 1000, ms - ms % 60000, ms - ms % 3600000};
        for (size_t k = 0; k < 4; k++) {
            char out[32];
            format_duration(vals[k], out, sizeof(out));
            assert_int_equal(dur_ok(out), vals[k]);
        }
    }
}

static int64_t fixed_ok(const char *s, unsigned digits)
{
    int64_t v = 12345;
    int r = parse_fixed(s, digits, &v);
    if (r != 0)
        fail_msg("parse_fixed(\"%s\", %u) = %d, expected success", s, digits, r);
    return v;
}

static void fixed_err(const char *s, unsigned digits, int err)
{
    int64_t v = 777;
    int r = parse_fixed(s, digits, &v);
    if (r != err)
        fail_msg("parse_fixed(\"%s\", %u) = %d, expected %d", s, digits, r, err);
    assert_int_equal(v, 777);
}

static void test_fixed(void **state)
{
    assert_int_equal(fixed_ok("2.50", 6), 2500000);
    assert_int_equal(fixed_ok("0.25", 3), 250);
    assert_int_equal(fixed_ok("2", 2), 200);
    assert_int_equal(fixed_ok("2.0", 0), 2);
    assert_int_equal(fixed_ok("3.140", 2), 314); /* trailing zeros are exact */
    assert_int_equal(fixed_ok("  3.14  ", 2), 314);
    assert_int_equal(fixed_ok(".5", 1), 5);
    assert_int_equal(fixed_ok("0", 6), 0);
    assert_int_equal(fixed_ok("0.000001", 6), 1);
    assert_int_equal(fixed_ok("123456.789012", 6), 123456789012);
    /* exactness: 0.1 + 0.2 style decimals stay exact */
    assert_int_equal(fixed_ok("0.3", 6), 300000);
    assert_int_equal(fixed_ok("1.1", 6) + fixed_ok("2.2", 6), fixed_ok("3.3", 6));
    /* every value with 3 decimals up to 20 parses exactly */
    for (int64_t v = 0; v <= 20000; v += 7) {
        char text[32];
        snprintf(text, sizeof(text), "%lld.%03lld", (long long)(v / 1000), (long long)(v % 1000));
        assert_int_equal(fixed_ok(text, 3), v);
        assert_int_equal(fixed_ok(text, 6), v * 1000);
    }
}

static void test_fixed_garbage(void **state)
{
    fixed_err("3.141", 2, -EINVAL); /* not exact in 2 digits */
    fixed_err("2.5", 0, -EINVAL);
    fixed_err("", 2, -EINVAL);
    fixed_err("abc", 2, -EINVAL);
    fixed_err("1e5", 2, -EINVAL);
    fixed_err("1,5", 2, -EINVAL);
    fixed_err("-1", 2, -EINVAL);
    fixed_err("+1", 2, -EINVAL);
    fixed_err("1.2.3", 2, -EINVAL);
    fixed_err(".", 2, -EINVAL);
    fixed_err("1 2", 2, -EINVAL);
    fixed_err("1.5x", 2, -EINVAL);
    fixed_err("NaN", 2, -EINVAL);
    assert_int_equal(parse_fixed(NULL, 2, &(int64_t){0}), -EINVAL);
}

static void test_fixed_overflow(void **state)
{
    fixed_err("9223372036854775808", 0, -ERANGE);
    fixed_err("99999999999999999999", 0, -ERANGE);
    fixed_err("9223372036854775.808", 3, -ERANGE); /* INT64_MAX + 1 after scaling */
    fixed_err("10000000000000", 6, -ERANGE);
    assert_int_equal(fixed_ok("9223372036854", 6), 9223372036854000000);
    assert_int_equal(fixed_ok("922337203685477580", 0), 922337203685477580);
}

static void test_fixed_int64_max(void **state)
{
    /* the largest value that fits is accepted, exactly */
    assert_int_equal(fixed_ok("9223372036854775807", 0), INT64_MAX);
    assert_int_equal(fixed_ok("9223372036854775.807", 3), INT64_MAX);
}

static void test_i64(void **state)
{
    int64_t v = 0;
    assert_int_equal(parse_i64("0", &v), 0);
    assert_int_equal(v, 0);
    assert_int_equal(parse_i64("-42", &v), 0);
    assert_int_equal(v, -42);
    assert_int_equal(parse_i64("+42", &v), 0);
    assert_int_equal(v, 42);
    assert_int_equal(parse_i64("9223372036854775807", &v), 0);
    assert_int_equal(v, INT64_MAX);
    assert_int_equal(parse_i64("-9223372036854775807", &v), 0);
    assert_int_equal(v, -INT64_MAX);
    v = 5;
    assert_int_equal(parse_i64("9223372036854775808", &v), -ERANGE);
    assert_int_equal(parse_i64("99999999999999999999", &v), -ERANGE);
    assert_int_equal(parse_i64("", &v), -EINVAL);
    assert_int_equal(parse_i64("-", &v), -EINVAL);
    assert_int_equal(parse_i64("12a", &v), -EINVAL);
    assert_int_equal(parse_i64(" 12", &v), -EINVAL);
    assert_int_equal(parse_i64("12 ", &v), -EINVAL);
    assert_int_equal(parse_i64("1.0", &v), -EINVAL);
    assert_int_equal(parse_i64(NULL, &v), -EINVAL);
    assert_int_equal(v, 5);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sizes),           cmocka_unit_test(test_sizes_more_digits),
        cmocka_unit_test(test_size_garbage),    cmocka_unit_test(test_size_overflow),
        cmocka_unit_test(test_durations),       cmocka_unit_test(test_duration_garbage),
        cmocka_unit_test(test_format_duration), cmocka_unit_test(test_fixed),
        cmocka_unit_test(test_fixed_garbage),   cmocka_unit_test(test_fixed_overflow),
        cmocka_unit_test(test_fixed_int64_max), cmocka_unit_test(test_i64),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
