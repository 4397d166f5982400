#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds examples/cmake-consumer, a CMake project, against this repository
# installed into a scratch prefix, once as a shared-only and once as a
# static-only library, and runs it: the proof that find_package(tickloop
# MAJOR.MINOR) and tickloop::tickloop work for either library. For each:
#  - the program links the kind of library built (ldd: libtickloop.so.MAJOR
#    from the prefix, or no libtickloop at all) and runs;
#  - the prefix still works after being moved (the package is relocatable);
#  - find_package of the next MINOR is refused (the version file).
#
#   bash examples/cmake-consumer/build.sh [shared] [static]   (default: both)
#
# Exits 77 (skipped, for meson test) when cmake is not installed.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
command -v cmake >/dev/null || { echo "cmake-consumer: cmake not found (apt-get install cmake): skipped"; exit 77; }
work=$(mktemp -d "${TMPDIR:-/tmp}/tickloop-cmake-consumer.XXXXXX")
trap 'rm -rf "$work"' EXIT

fail() { echo "cmake-consumer: $*"; exit 1; }
define() { awk -v n="$1" '$1 == "#define" && $2 == n {print $3}' "$repo/include/tickloop/tickloop.h"; }
major=$(define TL_VERSION_MAJOR)
minor=$(define TL_VERSION_MINOR)
wanted="$major.$minor"

kinds=("$@")
[ ${#kinds[@]} -gt 0 ] || kinds=(shared static)
for k in "${kinds[@]}"; do
    case $k in shared | static) ;; *) fail "unknown kind '$k' (shared or static)" ;; esac
    prefix="$work/$k-prefix"
    meson setup "$work/$k-lib" "$repo" --prefix="$prefix" --libdir=lib -Ddefault_library="$k" \
        -Dtests=disabled -Dbenches=disabled -Dexamples=disabled >/dev/null
    meson install -C "$work/$k-lib" >/dev/null
    [ -f "$prefix/lib/cmake/tickloop/tickloopConfig.cmake" ] || fail "$k: no tickloopConfig.cmake installed"

    cmake -S "$here" -B "$work/$k-app" -DCMAKE_PREFIX_PATH="$prefix" -DTICKLOOP_WANTED="$wanted" >/dev/null
    cmake --build "$work/$k-app" >/dev/null
    app="$work/$k-app/cmake-consumer"
    linked=$(ldd "$app" | awk '/libtickloop/ {print $1, $3}')
    case $k in
    shared) [ "$linked" = "libtickloop.so.$major $prefix/lib/libtickloop.so.$major" ] ||
        fail "shared: the program links '$linked', not $prefix/lib/libtickloop.so.$major" ;;
    static) [ -z "$linked" ] || fail "static: the program links $linked" ;;
    esac
    "$app"

    # Moved elsewhere, the prefix still serves find_package.
    mv "$prefix" "$prefix-moved"
    cmake -S "$here" -B "$work/$k-app-moved" -DCMAKE_PREFIX_PATH="$prefix-moved" \
        -DTICKLOOP_WANTED="$wanted" >/dev/null
    cmake --build "$work/$k-app-moved" >/dev/null
    LD_LIBRARY_PATH="$prefix-moved/lib" "$work/$k-app-moved/cmake-consumer" >/dev/null
    mv "$prefix-moved" "$prefix"

    # A program that needs the next MINOR must not get this one.
    if cmake -S "$here" -B "$work/$k-app-newer" -DCMAKE_PREFIX_PATH="$prefix" \
        -DTICKLOOP_WANTED="$major.$((minor + 1))" >"$work/newer.log" 2>&1; then
        fail "$k: find_package(tickloop $major.$((minor + 1))) accepted version $wanted"
    fi
    echo "cmake-consumer: $k: find_package(tickloop $wanted) and tickloop::tickloop built and ran, also from a moved prefix; $major.$((minor + 1)) refused"
done
