#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Load check of examples/http_hello with wrk, once per I/O backend.
#
#   bash examples/ci_wrk.sh BUILD_DIR      (wrk must be installed: apt-get install -y wrk)
#
# For epoll and io_uring in turn: starts http_hello on a free port (--port 0,
# the port is read from its "listening on" line), runs
# `wrk -t2 -c256 -d3s`, and fails (exit 1) if wrk saw any socket error
# (connect, read, write, timeout), any non-2xx/3xx response or no request at
# all, or if the server does not exit 0 on SIGTERM. io_uring is skipped,
# loudly, only when the loop reports it unavailable (ENOSYS/EPERM, e.g. a
# seccomp profile that blocks it); any other failure fails the run.
set -uo pipefail

build=${1:?usage: $0 BUILD_DIR}
server="$build/examples/http_hello"
[[ -x $server ]] || { echo "ci_wrk: $server not found; build first" >&2; exit 1; }
command -v wrk >/dev/null || { echo "ci_wrk: wrk not installed (apt-get install -y wrk)" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/tickloop-wrk.XXXXXX")
server_pid=
cleanup() {
    [[ -n $server_pid ]] && kill -KILL "$server_pid" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT

failed=0
for io in epoll io_uring; do
    log="$work/server-$io.log"
    "$server" --port 0 --threads 2 --io "$io" >"$log" 2>&1 &
    server_pid=$!

    # Up to 30 s for the server to report its port (slow or sanitized builds).
    port=
    for _ in $(seq 300); do
        port=$(sed -n 's/^listening on [^:]*:\([0-9]*\).*/\1/p' "$log")
        [[ -n $port ]] && break
        kill -0 "$server_pid" 2>/dev/null || break
        sleep 0.1
    done
    if [[ -z $port ]]; then
        wait "$server_pid"; rc=$?; server_pid=
        if [[ $io == io_uring ]] && grep -qE 'tl_loop_new: (Function not implemented|Operation not permitted)' "$log"; then
            echo "ci_wrk: SKIP io_uring, not available here: $(cat "$log")"
            continue
        fi
        echo "ci_wrk: $io: http_hello did not start (exit $rc):" >&2
        cat "$log" >&2
        failed=1
        continue
    fi

    echo "ci_wrk: $io: wrk -t2 -c256 -d3s http://127.0.0.1:$port/"
    wrk -t2 -c256 -d3s "http://127.0.0.1:$port/" | tee "$work/wrk-$io.txt"
    wrk_rc=${PIPESTATUS[0]}

    kill -TERM "$server_pid"
    wait "$server_pid"; rc=$?; server_pid=
    cat "$log"

    out="$work/wrk-$io.txt"
    before=$failed; failed=0
    requests=$(sed -n 's/^ *\([0-9][0-9]*\) requests in .*/\1/p' "$out")
    if (( wrk_rc != 0 )); then
        echo "ci_wrk: $io: FAIL: wrk exited $wrk_rc" >&2; failed=1
    fi
    if grep -q 'Socket errors' "$out"; then
        echo "ci_wrk: $io: FAIL: $(grep 'Socket errors' "$out")" >&2; failed=1
    fi
    if grep -q 'Non-2xx or 3xx responses' "$out"; then
        echo "ci_wrk: $io: FAIL: $(grep 'Non-2xx or 3xx responses' "$out")" >&2; failed=1
    fi
    if [[ -z $requests || $requests -eq 0 ]]; then
        echo "ci_wrk: $io: FAIL: no requests completed" >&2; failed=1
    fi
    if (( rc != 0 )); then
        echo "ci_wrk: $io: FAIL: http_hello exited $rc after SIGTERM" >&2; failed=1
    fi
    (( failed == 0 )) && echo "ci_wrk: $io: ok, $requests requests, $(sed -n 's/^Requests\/sec: *//p' "$out") requests/s, 0 socket errors"
    (( failed |= before ))
done
exit $failed
