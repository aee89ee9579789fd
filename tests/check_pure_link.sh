#!/bin/sh
# tests/check_pure_link.sh UTIL_LIB LIB...: the purity of src/core checked where it cannot
# be talked around: in what its compiled objects call. check_layers.sh reads the
# sources, so a core file including "util/log.h" or calling exit() passes it; here every
# symbol a library of LIB leaves undefined must be defined by those libraries
# themselves, by the pure part of src/util (UTIL_LIB's buf, csv, macro, rng and units
# objects: no log.c, no file.c), or be one of the libc and libm functions below that
# touch nothing outside the memory they are given. The sanitizers' own hooks are
# allowed. A pure layer added later (issue 20's lifecycle) is checked by naming its
# library too.
set -u
util=${1:?usage: $0 UTIL_LIB LIB...}
shift
[ $# -gt 0 ] || { echo "usage: $0 UTIL_LIB LIB..." >&2; exit 2; }
command -v nm >/dev/null || { echo "SKIP: no nm (binutils)"; exit 77; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# memory, strings, numbers and formatting into a buffer; math; what assert and the
# stack protector call
cat >"$tmp/libc" <<'EOF'
malloc calloc realloc free strdup strndup
memcmp memcpy memmove memset memchr strlen strnlen strcmp strncmp strcasecmp strncasecmp
strchr strrchr strstr strspn strcspn strtol strtoll strtoul strtoull strtod strtof
snprintf vsnprintf qsort bsearch toupper tolower
__ctype_b_loc __ctype_tolower_loc __ctype_toupper_loc __assert_fail __stack_chk_fail
__isoc99_sscanf __isoc23_strtol __isoc23_strtoll __isoc23_strtoul __isoc23_strtoull
ceil floor round lround llround trunc sqrt exp exp2 log log2 log10 pow fabs fmax fmin fmod
lrint llrint nearbyint rint cbrt hypot
EOF
tr ' ' '\n' <"$tmp/libc" | sed '/^$/d' >"$tmp/allowed"

# defined by the pure objects of util, and by the libraries checked
nm -A --defined-only "$util" 2>/dev/null |
    grep -E ':(buf|csv|macro|rng|units)\.c\.o:' | awk '{print $NF}' >>"$tmp/allowed"
for lib in "$@"; do
    nm --defined-only "$lib" | awk 'NF == 3 {print $3}' >>"$tmp/allowed"
done
sort -u "$tmp/allowed" -o "$tmp/allowed"

fail=0
for lib in "$@"; do
    nm -A --undefined-only "$lib" | awk '{print $1, $NF}' |
        grep -vE ' (__asan_|__ubsan_|__sanitizer_|__tsan_|__sancov_|__lsan_|_GLOBAL_OFFSET_TABLE_)' |
        sort -k2 >"$tmp/undef"
    awk '{print $2}' "$tmp/undef" | sort -u | comm -23 - "$tmp/allowed" >"$tmp/bad"
    if [ -s "$tmp/bad" ]; then
        echo "$(basename "$lib") calls what a pure layer may not (I/O, clocks, threads, the"
        echo "environment, exit, or util's log.c and file.c):"
        while read -r sym; do
            grep " $sym\$" "$tmp/undef" | sed 's/^[^:]*://; s/:[^ ]* / /; s/^/  /'
        done <"$tmp/bad"
        fail=1
    fi
done
[ $fail -eq 0 ] && echo "pure at link level: $(for l in "$@"; do basename "$l"; done | tr '\n' ' ')"
exit $fail
