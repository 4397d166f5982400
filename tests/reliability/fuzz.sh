#!/bin/sh
# SPDX-License-Identifier: MIT
# Builds the libFuzzer targets of tests/reliability with clang
# (-Dfuzz=enabled: -fsanitize=fuzzer,address,undefined, the library compiled
# into each target) in its own build directory, then fuzzes each target for
# SECONDS (default 60), starting from the committed corpus. New interesting
# inputs go to a scratch corpus (not the committed one); a crash leaves its
# input as crash-* in ARTIFACTS and makes the script fail.
#
#   tests/reliability/fuzz.sh [SECONDS]
#   env: BUILD_DIR (default build-fuzz), ARTIFACTS (default $BUILD_DIR/fuzz-artifacts),
#        JOBS (parallel fuzzing processes per target, default 1), TARGETS
#
# Turn a crash into a regression: copy it to corpus/<target>/regress-<what-broke>
# and add FUZZ_REGRESSION(<what-broke>) at the end of <target>.cc.
set -eu
seconds=${1:-60}
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
build=${BUILD_DIR:-$top/build-fuzz}
artifacts=${ARTIFACTS:-$build/fuzz-artifacts}
jobs=${JOBS:-1}
# -jobs=1 would still fork a worker and log to a file; only ask for it when >1.
parallel=
[ "$jobs" -gt 1 ] && parallel="-jobs=$jobs -workers=$jobs"
targets=${TARGETS:-"timers_fuzz loop_fuzz stream_fuzz"}

if [ ! -f "$build/build.ninja" ]; then
    CC=clang CXX=clang++ meson setup "$build" "$top" -Dfuzz=enabled -Dbenches=disabled \
        -Dbuildtype=debugoptimized -Db_lundef=false
fi
ninja -C "$build" $(for t in $targets; do echo "tests/reliability/$t"; done)

mkdir -p "$artifacts"
status=0
for t in $targets; do
    scratch="$build/fuzz-corpus/$t"
    mkdir -p "$scratch"
    echo "== $t for ${seconds}s"
    # The committed corpus is read-only input; libFuzzer writes new inputs to
    # the first directory only.
    if ! ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
        UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        "$build/tests/reliability/$t" -max_total_time="$seconds" -timeout=30 \
        -rss_limit_mb=4096 -print_final_stats=1 $parallel \
        -artifact_prefix="$artifacts/$t-" "$scratch" "$here/corpus/$t"; then
        echo "$t: crash; inputs in $artifacts" >&2
        status=1
    fi
done
exit $status
