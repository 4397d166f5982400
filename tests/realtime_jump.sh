#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A real wall-clock jump, for the REALTIME timers: on each I/O backend, runs
# build/tests/realtime_jump (a REALTIME timer 60 s ahead), steps the system
# clock 120 s forward with `date -s`, checks the timer fired at once, and steps
# the clock back by what it added. It changes the clock of the whole machine:
# every process on it sees the jump. So it refuses to run unless told
#   bash tests/realtime_jump.sh --i-own-this-machine [BUILD_DIR]
# (root needed). The test suite drives the same path without touching the
# clock (tests/loop_clocks.c, through the loop's test seam).
set -euo pipefail
if [ "${1:-}" != --i-own-this-machine ]; then
    echo "realtime_jump.sh steps this machine's wall clock by 120 s (and back): every"
    echo "process on it sees the jump. Run it only on a machine of your own:"
    echo "  bash tests/realtime_jump.sh --i-own-this-machine [BUILD_DIR]"
    exit 2
fi
build=${2:-build}
prog=$build/tests/realtime_jump
[ -x "$prog" ] || { echo "no $prog: build first (meson compile -C $build)"; exit 2; }
[ "$(id -u)" = 0 ] || { echo "stepping the clock needs root"; exit 2; }
fail=0
for io in epoll io_uring; do
    out=$(mktemp)
    "$prog" "$io" >"$out" 2>&1 &
    pid=$!
    for _ in $(seq 50); do grep -q ready "$out" && break; sleep 0.1; done
    date -s "@$(($(date +%s) + 120))" >/dev/null
    rc=0
    wait "$pid" || rc=$?
    date -s "@$(($(date +%s) - 120))" >/dev/null
    cat "$out"
    rm -f "$out"
    [ "$rc" = 0 ] || { echo "$io: FAILED"; fail=1; }
done
exit $fail
