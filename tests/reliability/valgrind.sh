#!/bin/sh
# SPDX-License-Identifier: MIT
# Valgrind memcheck over a subset of the suite that finishes in a few minutes:
# the API misuse and I/O suites, hooks and references (initialised asyncs and
# signal watchers are never read before written), the fault and thread tests (the 1e6-timer
# storm shrunk with TL_STORM_TIMERS) and both fuzz corpora replayed, which
# drive every timer path. Left out: loop_timers and loop_limits, whose
# tests bound wall-clock timing that valgrind's slowdown breaks (and whose
# 1e5-timer storm takes minutes under it). Any memcheck error or
# definite/indirect leak, in any process, fails.
#
# Criterion runs each test in a forked worker, and a worker that valgrind
# flags still reports "passed" to Criterion (memcheck's exit code comes after
# the result), so every process logs to its own file and the logs decide.
#
# Only epoll by default: valgrind does not follow io_uring's asynchronous
# completions (waits miss readiness, tests time out), so io_uring runs report
# valgrind's limits, not tickloop's. valgrind.supp silences one leak inside
# Criterion's runner (libcriterion, 48 bytes, when workers end together).
#
#   tests/reliability/valgrind.sh
#   env: BUILD_DIR (default build-valgrind, a debug build), JOBS (Criterion
#        workers at once, default 2), IOS (default epoll; "epoll io_uring")
set -eu
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
build=${BUILD_DIR:-$top/build-valgrind}
jobs=${JOBS:-2}
command -v valgrind >/dev/null || { echo "valgrind not installed" >&2; exit 1; }

if [ ! -f "$build/build.ninja" ]; then
    meson setup "$build" "$top" -Dbuildtype=debug -Dbenches=disabled >/dev/null
fi
suites="tests/api_misuse tests/loop_io tests/loop_async tests/loop_signal tests/loop_hooks
        tests/loop_ref tests/streams tests/stream_misuse
        tests/reliability/faults tests/reliability/faults_storm tests/reliability/threads
        tests/reliability/timers_fuzz_replay tests/reliability/loop_fuzz_replay"
ninja -C "$build" $suites

ios=${IOS:-epoll}
logs="$build/valgrind-logs"
rm -rf "$logs"
mkdir -p "$logs"
status=0
for io in $ios; do
    for suite in $suites; do
        name=$(basename "$suite")
        # The corpus replays do not depend on the I/O backend: once is enough.
        case "$name" in *_replay) [ "$io" = epoll ] || continue ;; esac
        echo "== $name ($io)"
        # Valgrind runs the storm (1e6 timers) too slowly; 20,000 still
        # crosses many dispatch batches of a small cap.
        TICKLOOP_IO=$io TL_STORM_TIMERS=20000 \
            valgrind -q --trace-children=yes --child-silent-after-fork=no \
            --leak-check=full --show-leak-kinds=definite,indirect \
            --errors-for-leak-kinds=definite,indirect --error-exitcode=1 \
            --suppressions="$here/valgrind.supp" \
            --log-file="$logs/$name-$io.%p.log" \
            "$build/$suite" --jobs "$jobs" --timeout 600 || status=1
    done
done

# Every process's log. With -q memcheck writes only what it reports (errors,
# and leaks of the kinds shown), as "==PID== " lines; warnings such as
# "unhandled syscall 441" (epoll_pwait2: valgrind answers ENOSYS, and the
# library falls back) start with "--" and do not count.
bad=$(grep -l '^==[0-9]*== ' "$logs"/*.log || true)
if [ -n "$bad" ]; then
    for f in $bad; do echo "--- $f"; cat "$f"; done
    status=1
fi
leaks=$(cat "$logs"/*.log | grep -c 'definitely lost in\|indirectly lost in' || true)
echo "valgrind: $(ls "$logs" | wc -l) processes checked, $(echo "$bad" | grep -c . || true) with errors, $leaks leak records"
exit $status
