#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Fails if a static libtickloop.a needs the C++ runtime: a symbol that only
# libstdc++ or libsupc++ defines (operator new/delete, std::, exceptions,
# RTTI, guard variables, the unwinder). The library is C++ inside but is
# linked by C programs with cc alone, so none may appear.
#
#   bash .ci/check-no-cxx-runtime.sh build/libtickloop.a
#
# Only strong undefined references count: a weak one (nm's "w", such as the
# __cxa_pure_virtual slot of an abstract class at -O0) resolves to null when
# nothing defines it and never makes the linker look for a library.
set -euo pipefail
lib=${1:?usage: check-no-cxx-runtime.sh LIBTICKLOOP.a}

defined=$(nm --defined-only "$lib" 2>/dev/null | awk 'NF == 3 {print $3}' | sort -u)
needed=$(nm -u "$lib" 2>/dev/null | awk '$1 == "U" {print $2}' | sort -u)
external=$(comm -23 <(printf '%s\n' "$needed") <(printf '%s\n' "$defined"))
cxx=$(printf '%s\n' "$external" |
    grep -E '^(_Zn[wa]|_Zd[la]|_ZN?K?St|_ZTI|_ZTS|_ZTV|__cxa_|__gxx_|_Unwind_|__dynamic_cast)' || true)
if [ -n "$cxx" ]; then
    echo "$lib needs the C++ runtime:"
    printf '%s\n' "$cxx" | while read -r sym; do printf '  %s  (%s)\n' "$sym" "$(c++filt "$sym")"; done
    echo "Use malloc/free (tl::detail::MallocNew), pthread and plain arrays in loop/ and timers/."
    exit 1
fi
echo "$lib: $(printf '%s\n' "$external" | grep -c .) external symbols, none from the C++ runtime"
