#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Load check of examples/http_hello with wrk and ab, once per I/O backend.
#
#   bash examples/ci_wrk.sh BUILD_DIR   (needs wrk and ab: apt-get install -y wrk apache2-utils)
#
# For epoll and io_uring in turn: starts http_hello on a free port (--port 0,
# the port is read from its "listening on" line), runs
#   - `wrk -t2 -c256 -d3s` (HTTP/1.1 keep-alive),
#   - `ab -k -c10 -n2000` (HTTP/1.0 with "Connection: keep-alive": every
#     request must be answered on a kept connection, RFC 7230 A.1.2),
# then again on ::1 (IPv6, `--bind ::1`) with a short wrk run, where the
# machine has an IPv6 loopback. It fails (exit 1) on any socket error, any
# non-2xx/3xx response, no request at all, a request ab saw fail or not kept
# alive, or a server that does not exit 0 on SIGTERM. io_uring is skipped,
# loudly, only when the loop reports it unavailable (ENOSYS/EPERM, e.g. a
# seccomp profile that blocks it); any other failure fails the run.
set -uo pipefail

build=${1:?usage: $0 BUILD_DIR}
server="$build/examples/http_hello"
[[ -x $server ]] || { echo "ci_wrk: $server not found; build first" >&2; exit 1; }
for tool in wrk ab; do
    command -v $tool >/dev/null || { echo "ci_wrk: $tool not installed (apt-get install -y wrk apache2-utils)" >&2; exit 1; }
done

work=$(mktemp -d "${TMPDIR:-/tmp}/tickloop-wrk.XXXXXX")
server_pid=
cleanup() {
    [[ -n $server_pid ]] && kill -KILL "$server_pid" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT

# start_server IO BIND: sets port (empty if it did not start) and log.
# Returns 2 when io_uring is unavailable here (a skip, not a failure).
start_server() {
    log="$work/server-$1-$2.log"
    "$server" --port 0 --threads 2 --io "$1" --bind "$2" >"$log" 2>&1 &
    server_pid=$!
    # Up to 30 s for the server to report its port (slow or sanitized builds).
    port=
    for _ in $(seq 300); do
        port=$(sed -n 's/^listening on .*:\([0-9]*\) threads=.*/\1/p' "$log")
        [[ -n $port ]] && return 0
        kill -0 "$server_pid" 2>/dev/null || break
        sleep 0.1
    done
    wait "$server_pid"; local rc=$?; server_pid=
    if [[ $1 == io_uring ]] && grep -qE 'tl_loop_new: (Function not implemented|Operation not permitted)' "$log"; then
        echo "ci_wrk: SKIP io_uring, not available here: $(cat "$log")"
        return 2
    fi
    echo "ci_wrk: $1 on $2: http_hello did not start (exit $rc):" >&2
    cat "$log" >&2
    return 1
}

# stop_server: SIGTERM, and the server must exit 0.
stop_server() {
    kill -TERM "$server_pid"
    wait "$server_pid"; local rc=$?; server_pid=
    cat "$log"
    (( rc == 0 )) || { echo "ci_wrk: FAIL: http_hello exited $rc after SIGTERM" >&2; return 1; }
}

# check_wrk WHAT FILE RC
check_wrk() {
    local requests ok=0
    requests=$(sed -n 's/^ *\([0-9][0-9]*\) requests in .*/\1/p' "$2")
    (( $3 == 0 )) || { echo "ci_wrk: $1: FAIL: wrk exited $3" >&2; ok=1; }
    if grep -q 'Socket errors' "$2"; then echo "ci_wrk: $1: FAIL: $(grep 'Socket errors' "$2")" >&2; ok=1; fi
    if grep -q 'Non-2xx or 3xx responses' "$2"; then echo "ci_wrk: $1: FAIL: $(grep 'Non-2xx or 3xx responses' "$2")" >&2; ok=1; fi
    [[ -n $requests && $requests -gt 0 ]] || { echo "ci_wrk: $1: FAIL: no requests completed" >&2; ok=1; }
    (( ok == 0 )) && echo "ci_wrk: $1: ok, $requests requests, $(sed -n 's/^Requests\/sec: *//p' "$2") requests/s, 0 socket errors"
    return $ok
}

# check_ab WHAT FILE RC N: all N requests complete, none failed, all kept alive.
check_ab() {
    local ok=0 field
    field() { sed -n "s/^$1: *\([0-9]*\).*/\1/p" "$2"; }
    (( $3 == 0 )) || { echo "ci_ab: $1: FAIL: ab exited $3 (124: timed out)" >&2; ok=1; }
    [[ $(field 'Complete requests' "$2") == "$4" ]] || { echo "ci_ab: $1: FAIL: $(grep 'Complete requests' "$2")" >&2; ok=1; }
    [[ $(field 'Failed requests' "$2") == 0 ]] || { echo "ci_ab: $1: FAIL: $(grep 'Failed requests' "$2")" >&2; ok=1; }
    [[ $(field 'Keep-Alive requests' "$2") == "$4" ]] || { echo "ci_ab: $1: FAIL: not kept alive: $(grep 'Keep-Alive requests' "$2")" >&2; ok=1; }
    if grep -q 'Non-2xx responses' "$2"; then echo "ci_ab: $1: FAIL: $(grep 'Non-2xx' "$2")" >&2; ok=1; fi
    (( ok == 0 )) && echo "ci_ab: $1: ok, $4 HTTP/1.0 keep-alive requests on 10 connections, $(sed -n 's/^Requests per second: *\([0-9.]*\).*/\1/p' "$2") requests/s"
    return $ok
}

have_ipv6=0
grep -q '^00000000000000000000000000000001 ' /proc/net/if_inet6 2>/dev/null && have_ipv6=1

failed=0
for io in epoll io_uring; do
    start_server "$io" 127.0.0.1; rc=$?
    (( rc == 2 )) && continue
    (( rc == 0 )) || { failed=1; continue; }

    echo "ci_wrk: $io: wrk -t2 -c256 -d3s http://127.0.0.1:$port/"
    wrk -t2 -c256 -d3s "http://127.0.0.1:$port/" | tee "$work/wrk-$io.txt"
    check_wrk "$io" "$work/wrk-$io.txt" "${PIPESTATUS[0]}" || failed=1

    # ab waits for a response that says keep-alive or for the close; bound it
    # so that a server that does neither fails instead of hanging CI.
    echo "ci_ab: $io: ab -k -c10 -n2000 http://127.0.0.1:$port/"
    timeout 120 ab -k -c10 -n2000 -s 10 "http://127.0.0.1:$port/" >"$work/ab-$io.txt" 2>&1
    rc=$?
    grep -E '^(Complete|Failed|Keep-Alive|Non-2xx|Requests per)' "$work/ab-$io.txt"
    check_ab "$io" "$work/ab-$io.txt" $rc 2000 || failed=1

    stop_server || failed=1

    if (( have_ipv6 )); then
        start_server "$io" ::1 || { failed=1; continue; }
        echo "ci_wrk: $io: IPv6: wrk -t1 -c16 -d1s http://[::1]:$port/"
        wrk -t1 -c16 -d1s "http://[::1]:$port/" | tee "$work/wrk6-$io.txt"
        check_wrk "$io IPv6" "$work/wrk6-$io.txt" "${PIPESTATUS[0]}" || failed=1
        stop_server || failed=1
    else
        echo "ci_wrk: SKIP IPv6: this machine has no ::1 loopback"
    fi
done
exit $failed
