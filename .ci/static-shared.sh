#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds tickloop as a static library only, then as a shared library only,
# installs each into a scratch prefix and links examples/hello.c against it
# with cc (a C compiler driver, no C++ runtime) through pkg-config, then runs
# it. Proves -Ddefault_library is honoured, `pkg-config --static` is complete
# and neither library needs libstdc++ or libgcc_s.
#
#   bash .ci/static-shared.sh
set -euo pipefail
cd "$(dirname "$0")/.."

for kind in static shared; do
    build="build-$kind"
    prefix="$PWD/$build-prefix"
    rm -rf "$build" "$prefix"
    meson setup "$build" --prefix="$prefix" --libdir=lib -Ddefault_library="$kind" \
        -Dtests=disabled -Dbenches=disabled -Dexamples=disabled >/dev/null
    meson install -C "$build" >/dev/null
    export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
    app="$build/hello-c"
    case $kind in
    static)
        if ls "$prefix"/lib/libtickloop.so* >/dev/null 2>&1; then
            echo "static build installed a shared library"; exit 1
        fi
        bash .ci/check-no-cxx-runtime.sh "$prefix/lib/libtickloop.a"
        # A fully static program, exactly as a user would link one.
        cc -static -std=c11 -Wall -Wextra -Werror -o "$app" examples/hello.c \
            $(pkg-config --static --cflags --libs tickloop)
        ;;
    shared)
        if [ -e "$prefix/lib/libtickloop.a" ]; then
            echo "shared build installed a static library"; exit 1
        fi
        needed=$(readelf -d "$prefix/lib/libtickloop.so" | awk '/NEEDED/ {print $NF}' | tr -d '[]')
        echo "libtickloop.so NEEDED: $(echo $needed)"
        if grep -E 'libstdc\+\+|libgcc_s' <<<"$needed"; then
            echo "libtickloop.so needs the C++ runtime"; exit 1
        fi
        cc -std=c11 -Wall -Wextra -Werror -o "$app" examples/hello.c \
            $(pkg-config --cflags --libs tickloop)
        if LD_LIBRARY_PATH="$prefix/lib" ldd "$app" | grep -E 'libstdc\+\+|libgcc_s'; then
            echo "a C program linked with libtickloop.so pulls in the C++ runtime"; exit 1
        fi
        ;;
    esac
    LD_LIBRARY_PATH="$prefix/lib" "$app"
    echo "$kind: linked with cc and ran"
done
