#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Checks libtickloop.so's ABI against the baseline committed in this
# directory (libtickloop.so.0.abi, written by abidw), so that an accidental
# break fails CI. Needs abigail-tools (Debian: apt-get install abigail-tools).
#
#   bash abi/check.sh            # build the library, compare with the baseline
#   bash abi/check.sh --update   # build it and rewrite the baseline
#
# Passes: functions added, and new fields that replace words of a struct's
# reserved tail (abi/tickloop.suppr). Fails: anything removed or changed, a
# public struct whose size differs, a different soname. Rewrite the baseline
# only at a release, or after a deliberate soname bump (docs/abi.md).
set -euo pipefail
cd "$(dirname "$0")/.."
baseline=abi/libtickloop.so.0.abi
build=build-abi

# The library alone, shared, with debug info (abidw reads the DWARF).
if [ ! -f "$build/build.ninja" ]; then
    meson setup "$build" -Ddefault_library=shared -Dbuildtype=debugoptimized \
        -Dtests=disabled -Dbenches=disabled -Dexamples=disabled -Dinstall=disabled >/dev/null
fi
ninja -C "$build" >/dev/null
lib="$build/libtickloop.so"

# Only what the installed headers declare; no paths of this machine.
dump() {
    abidw --headers-dir include/tickloop --no-corpus-path --no-comp-dir-path \
        --no-show-locs --out-file "$1" "$lib"
}

if [ "${1:-}" = --update ]; then
    dump "$baseline"
    echo "wrote $baseline ($(grep -c "<elf-symbol name='tl_" "$baseline") tl_* symbols)"
    exit 0
fi

current="$build/libtickloop.abi"
dump "$current"

# Sizes of the public structs (handles and caller-allocated structs): any
# difference is a break, whatever abidiff's heuristics make of it. tl_loop is
# opaque, so its size is not part of the ABI.
sizes() {
    grep -o "<class-decl name='tl_[a-z_]*' size-in-bits='[0-9]*'" "$1" | sort -u |
        grep -v "name='tl_loop' " |
        sed "s/<class-decl name='\(.*\)' size-in-bits='\(.*\)'/\1 \2/"
}
size_diff=$(diff <(sizes "$baseline") <(sizes "$current") | grep '^<' || true)
if [ -n "$size_diff" ]; then
    echo "ABI break: public struct sizes changed (baseline first):"
    diff <(sizes "$baseline") <(sizes "$current") || true
    exit 1
fi

set +e
abidiff --suppressions abi/tickloop.suppr --no-added-syms "$baseline" "$current"
rc=$?
set -e
# abidiff's exit status is a bit field: 1 error, 2 usage, 4 ABI change,
# 8 incompatible change. With added symbols and the reserved-word fills
# suppressed, any change left is one this project does not allow.
if [ "$rc" -ne 0 ]; then
    echo "ABI check failed (abidiff status $rc) against $baseline; see docs/abi.md"
    exit 1
fi
echo "ABI: compatible with $baseline ($(sizes "$current" | wc -l) public structs, same sizes)"
