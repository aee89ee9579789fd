#!/bin/sh
# tools/install-deps.sh PACKAGE...: install the Debian packages that are missing
# (apt-get update first, as a fresh machine has stale lists). nodejs and npm count as
# present when node and npm are on the PATH (a newer Node.js from elsewhere conflicts
# with Debian's npm).
set -eu
missing=""
for p in "$@"; do
    case $p in
    nodejs) command -v node >/dev/null && continue ;;
    npm) command -v npm >/dev/null && continue ;;
    esac
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
[ -n "$missing" ] || exit 0
echo "installing:$missing"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO=sudo
$SUDO apt-get update -qq
# shellcheck disable=SC2086
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
