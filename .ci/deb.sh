#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds the Debian packages from debian/ with `dpkg-buildpackage -us -uc`
# in a scratch copy of the tree (it writes its results to the parent
# directory), runs lintian (no error allowed), installs libtickloop0 and
# libtickloop-dev, builds and runs a C program against them with pkg-config
# (shared and static) and with CMake (find_package(tickloop), shared and
# static), reads a man page, then removes the packages again.
#
#   bash .ci/deb.sh        (needs root or sudo for apt-get)
set -euo pipefail
cd "$(dirname "$0")/.."
sudo=$(command -v sudo || true)
need=""
for pkg in debhelper dpkg-dev lintian build-essential cmake; do
    dpkg -s "$pkg" >/dev/null 2>&1 || need="$need $pkg"
done
[ -z "$need" ] || $sudo apt-get install -y --no-install-recommends $need

work=$(mktemp -d "${TMPDIR:-/tmp}/tickloop-deb.XXXXXX")
cleanup() {
    $sudo apt-get remove -y libtickloop-dev libtickloop0 >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT

# The tracked files only, as a clone would have them.
mkdir "$work/tickloop"
git ls-files -z | tar --null -T - -cf - | tar -xf - -C "$work/tickloop"
(cd "$work/tickloop" && dpkg-buildpackage -us -uc)
ls -l "$work"/*.deb

# lintian exits non-zero on any error-level tag.
lintian --fail-on error --info "$work"/*.changes

$sudo apt-get install -y "$work"/libtickloop0_*.deb "$work"/libtickloop-dev_*.deb
dpkg -L libtickloop0 | grep 'libtickloop\.so\.0'

app="$work/hello-deb"
cc -std=c11 -Wall -Wextra -Werror -o "$app" examples/hello.c $(pkg-config --cflags --libs tickloop)
"$app"
cc -static -std=c11 -o "$app-static" examples/hello.c $(pkg-config --static --cflags --libs tickloop)
"$app-static"
# The CMake package from /usr: the shared library, then the static one.
for static in OFF ON; do
    cmake -S examples/cmake-consumer -B "$work/cmake-$static" -Dtickloop_USE_STATIC_LIBS=$static >/dev/null
    cmake --build "$work/cmake-$static" >/dev/null
    linked=$(ldd "$work/cmake-$static/cmake-consumer" | grep -c libtickloop || true)
    [ "$linked" = "$([ $static = ON ] && echo 0 || echo 1)" ] ||
        { echo "deb: CMake consumer, tickloop_USE_STATIC_LIBS=$static: libtickloop linked $linked times"; exit 1; }
    "$work/cmake-$static/cmake-consumer"
done
MANWIDTH=80 man 3 tl_loop_new | grep -q 'RETURN VALUE'
echo "deb: built, lintian clean of errors, installed, a C program built with pkg-config and with CMake and run"
