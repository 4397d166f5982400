#!/bin/sh
# SPDX-License-Identifier: MIT
# ThreadSanitizer build (its own build directory, -Db_sanitize=thread) and
# the cross-thread tests under it, once per I/O backend: tests/reliability/
# threads.c (many senders, a signal handler, a loop on another thread, one
# loop per thread), built without Criterion (threads_plain; see
# plain_tests.h: Criterion's worker arena cannot be mapped under TSan). Any
# data race reported fails the run.
#
#   tests/reliability/tsan.sh
#   env: BUILD_DIR (default build-tsan), CC/CXX (default: the system's, gcc;
#        clang works too)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
build=${BUILD_DIR:-$top/build-tsan}

if [ ! -f "$build/build.ninja" ]; then
    meson setup "$build" "$top" -Db_sanitize=thread -Db_lundef=false -Dbuildtype=debugoptimized \
        -Dbenches=disabled >/dev/null
fi
ninja -C "$build" tests/reliability/threads_plain

# halt_on_error: the first race fails the test that raced; second_deadlock_stack
# gives both stacks of a lock-order report.
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:exitcode=66"
ios="epoll"
if grep -q 'TL_HAVE_LIBURING 1' "$build/tl_config.h"; then ios="epoll io_uring"; fi
status=0
for io in $ios; do
    echo "== threads, $io"
    TICKLOOP_IO=$io "$build/tests/reliability/threads_plain" || status=1
done
[ $status -eq 0 ] && echo "tsan: no data race reported"
exit $status
