#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds examples/consumer, a separate Meson project, against this repository
# used as a subproject, and runs it: the proof that a user can drop tickloop
# into subprojects/ and call dependency('tickloop'), and that tickloop then
# behaves as a subproject should: it builds its library and nothing else (no
# tests, benches or examples), registers no test in the parent's `meson test`,
# and installs nothing into the parent's prefix.
#
#   bash examples/consumer/build.sh
#
# Everything happens in a temporary directory (removed on exit): the consumer's
# files are copied there and subprojects/tickloop is a symlink to this
# repository. --force-fallback-for makes Meson use that subproject even where
# an installed tickloop would satisfy dependency('tickloop'). No tickloop
# option is passed: the subproject defaults are what is tested.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/tickloop-consumer.XXXXXX")
trap 'rm -rf "$work"' EXIT

cp "$here/meson.build" "$here/main.c" "$work/"
mkdir "$work/subprojects"
ln -s "$repo" "$work/subprojects/tickloop"

meson setup "$work/build" "$work" --prefix=/usr --force-fallback-for=tickloop
ninja -C "$work/build"
"$work/build/consumer"

fail() { echo "consumer: $*"; exit 1; }

# Built: the library, nothing else of tickloop (no executable at all).
built=$(find "$work/build/subprojects" -type f -perm -u+x ! -name '*.so*' ! -name '*.sh')
[ -z "$built" ] || fail "tickloop built programs as a subproject: $built"

# `meson test` in the parent lists the parent's tests only.
tests=$(meson test -C "$work/build" --list 2>/dev/null | grep -v "^ninja:")
[ "$tests" = "consumer" ] || fail "meson test --list shows more than the consumer's test: $tests"

# `meson install` installs the parent's program and nothing of tickloop.
DESTDIR="$work/dest" meson install -C "$work/build" >/dev/null
installed=$(cd "$work/dest" && find . -type f -o -type l | sort)
[ "$installed" = "./usr/bin/consumer" ] || fail "meson install installed more than bin/consumer: $installed"
"$work/dest/usr/bin/consumer"
echo "consumer: built only libtickloop, lists no tickloop test, installs nothing of it"
