/* units.h: parsing of the quantities people write in specs: sizes ("18GiB"),
 * durations ("1h30m"), decimals as fixed point ("2.50" USD, "0.25" of a GPU).
 * Everything returns integers in the project's units (MiB, ms, micro-units). */
#pragma once

#include <stdint.h>

/* "18GiB", "18Gi", "512MiB", "1.5TiB", "80GB" (decimal units), a bare number = MiB.
 * Rounds up to whole MiB. 0 or -EINVAL. */
int parse_size_mib(const char *s, uint64_t *ret_mib);

/* "30m", "2h", "1h30m", "90s", "500ms", "1d", a bare number = seconds. 0 or -EINVAL. */
int parse_duration_ms(const char *s, int64_t *ret_ms);

/* A non-negative decimal with at most `digits` fractional digits, scaled by 10^digits:
 * parse_fixed("2.50", 6) = 2500000. Exact (no floating point). 0 or -EINVAL/-ERANGE. */
int parse_fixed(const char *s, unsigned digits, int64_t *ret);

/* Strict integer parsing of the whole string. 0 or -EINVAL/-ERANGE. */
int parse_i64(const char *s, int64_t *ret);

/* Write a duration as the shortest of "90s", "30m", "2h", "1h30m", "1500ms". */
void format_duration(int64_t ms, char *out, unsigned outlen);
