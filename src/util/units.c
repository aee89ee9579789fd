/* units.c: exact parsing of sizes, durations and fixed-point decimals. */
#include "util/units.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

int parse_i64(const char *s, int64_t *ret)
{
    if (!s || !*s)
        return -EINVAL;
    const char *p = s;
    bool neg = false;
    if (*p == '-' || *p == '+')
        neg = *p++ == '-';
    if (!isdigit((unsigned char)*p))
        return -EINVAL;
    int64_t v = 0;
    for (; isdigit((unsigned char)*p); p++) {
        int d = *p - '0';
        if (v > (INT64_MAX - d) / 10)
            return -ERANGE;
        v = v * 10 + d;
    }
    if (*p)
        return -EINVAL;
    *ret = neg ? -v : v;
    return 0;
}

/* Parse a decimal prefix of *ps into value * 10^digits; excess digits must be zero
 * unless round_up is set, in which case they round the value up. */
static int fixed_prefix(const char **ps, unsigned digits, bool round_up, int64_t *ret)
{
    const char *p = *ps;
    if (!isdigit((unsigned char)*p) && !(*p == '.' && isdigit((unsigned char)p[1])))
        return -EINVAL;
    int64_t v = 0;
    for (; isdigit((unsigned char)*p); p++) {
        int d = *p - '0';
        if (v > (INT64_MAX - d) / 10)
            return -ERANGE;
        v = v * 10 + d;
    }
    unsigned frac = 0;
    bool excess = false;
    if (*p == '.') {
        p++;
        for (; isdigit((unsigned char)*p); p++) {
            if (frac < digits) {
                int d = *p - '0';
                if (v > (INT64_MAX - d) / 10)
                    return -ERANGE;
                v = v * 10 + d;
                frac++;
            } else if (*p != '0') {
                excess = true;
            }
        }
    }
    for (; frac < digits; frac++) {
        if (v > INT64_MAX / 10)
            return -ERANGE;
        v *= 10;
    }
    if (excess) {
        if (!round_up)
            return -EINVAL;
        if (v == INT64_MAX)
            return -ERANGE;
        v++;
    }
    *ps = p;
    *ret = v;
    return 0;
}

int parse_fixed(const char *s, unsigned digits, int64_t *ret)
{
    if (!s)
        return -EINVAL;
    while (isspace((unsigned char)*s))
        s++;
    int64_t v;
    int r = fixed_prefix(&s, digits, false, &v);
    if (r < 0)
        return r;
    while (isspace((unsigned char)*s))
        s++;
    if (*s)
        return -EINVAL;
    *ret = v;
    return 0;
}

int parse_size_mib(const char *s, uint64_t *ret_mib)
{
    static const struct {
        const char *suffix;
        uint64_t num, den; /* MiB = value * num / den */
    } units[] = {
        {"", 1, 1},
        {"k", 1, 1024},
        {"ki", 1, 1024},
        {"kib", 1, 1024},
        {"m", 1, 1},
        {"mi", 1, 1},
        {"mib", 1, 1},
        {"g", 1024, 1},
        {"gi", 1024, 1},
        {"gib", 1024, 1},
        {"t", 1024 * 1024, 1},
        {"ti", 1024 * 1024, 1},
        {"tib", 1024 * 1024, 1},
        {"kb", 1000, 1048576},
        {"mb", 1000000, 1048576},
        {"gb", 1000000000, 1048576},
        {"tb", 1000000000000ull, 1048576},
    };
    if (!s)
        return -EINVAL;
    while (isspace((unsigned char)*s))
        s++;
    int64_t nano; /* the number times 10^9, rounded up past nine decimals */
    int r = fixed_prefix(&s, 9, true, &nano);
    if (r < 0)
        return r;
    while (isspace((unsigned char)*s))
        s++;
    char suffix[8];
    size_t n = strlen(s);
    while (n > 0 && isspace((unsigned char)s[n - 1]))
        n--;
    if (n >= sizeof(suffix))
        return -EINVAL;
    memcpy(suffix, s, n);
    suffix[n] = '\0';
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (strcasecmp(suffix, units[i].suffix) != 0)
            continue;
        /* value*num/den rounded up, with the value in billionths */
        unsigned __int128 v = (unsigned __int128)nano * units[i].num;
        unsigned __int128 d = (unsigned __int128)units[i].den * 1000000000u;
        unsigned __int128 q = (v + d - 1) / d;
        if (q > UINT32_MAX * 1024ull)
            return -ERANGE;
        *ret_mib = (uint64_t)q;
        return 0;
    }
    return -EINVAL;
}

int parse_duration_ms(const char *s, int64_t *ret_ms)
{
    if (!s)
        return -EINVAL;
    while (isspace((unsigned char)*s))
        s++;
    if (!*s)
        return -EINVAL;
    int64_t total = 0;
    bool any = false;
    while (*s) {
        int64_t milli; /* number x 1000 */
        int r = fixed_prefix(&s, 3, false, &milli);
        if (r < 0)
            return r;
        int64_t unit_ms;
        if (strncmp(s, "ms", 2) == 0) {
            unit_ms = 1;
            s += 2;
        } else if (*s == 's') {
            unit_ms = 1000, s++;
        } else if (*s == 'm') {
            unit_ms = 60000, s++;
        } else if (*s == 'h') {
            unit_ms = 3600000, s++;
        } else if (*s == 'd') {
            unit_ms = 86400000, s++;
        } else if (*s == '\0' && !any) {
            unit_ms = 1000; /* bare number: seconds */
        } else {
            return -EINVAL;
        }
        if (milli > INT64_MAX / unit_ms)
            return -ERANGE;
        int64_t add = milli * unit_ms / 1000;
        if (total > INT64_MAX - add)
            return -ERANGE;
        total += add;
        any = true;
        while (isspace((unsigned char)*s))
            s++;
    }
    *ret_ms = total;
    return 0;
}

void format_duration(int64_t ms, char *out, unsigned outlen)
{
    if (ms % 1000 != 0 || ms == 0) {
        snprintf(out, outlen, "%lldms", (long long)ms);
        return;
    }
    int64_t s = ms / 1000;
    int64_t h = s / 3600, m = (s % 3600) / 60, sec = s % 60;
    if (sec)
        snprintf(out, outlen, "%llds", (long long)s);
    else if (h && m)
        snprintf(out, outlen, "%lldh%lldm", (long long)h, (long long)m);
    else if (h)
        snprintf(out, outlen, "%lldh", (long long)h);
    else
        snprintf(out, outlen, "%lldm", (long long)m);
}
