#!/bin/sh
# Every C file follows the project's .clang-format (checked on every test run).
set -u
cf=${1:-clang-format}
cd "${2:-.}" || exit 1
files=$(find src tests tools bench -name '*.[ch]' | sort)
if ! $cf --dry-run -Werror $files 2>/tmp/check_format.$$; then
    head -40 /tmp/check_format.$$
    rm -f /tmp/check_format.$$
    echo "not formatted: run 'make format'"
    exit 1
fi
rm -f /tmp/check_format.$$
echo "$(echo "$files" | wc -l) files formatted"
