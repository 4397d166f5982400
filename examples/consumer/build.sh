#!/usr/bin/env bash
# Builds examples/consumer, a separate Meson project, against this repository
# used as a subproject, and runs it: the proof that a user can drop tickloop
# into subprojects/ and call dependency('tickloop').
#
#   bash examples/consumer/build.sh
#
# Everything happens in a temporary directory (removed on exit): the consumer's
# files are copied there and subprojects/tickloop is a symlink to this
# repository. --force-fallback-for makes Meson use that subproject even where
# an installed tickloop would satisfy dependency('tickloop').
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/tickloop-consumer.XXXXXX")
trap 'rm -rf "$work"' EXIT

cp "$here/meson.build" "$here/main.c" "$work/"
mkdir "$work/subprojects"
ln -s "$repo" "$work/subprojects/tickloop"

meson setup "$work/build" "$work" \
  --force-fallback-for=tickloop \
  -Dtickloop:tests=disabled -Dtickloop:benches=disabled
ninja -C "$work/build"
"$work/build/consumer"
