#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Drives examples/uv_echo_port (libuv's echo server with idle timeouts,
# ported) with a real client, nc from netcat-openbsd, on the I/O backend
# TICKLOOP_IO names:
#  1. lines sent are echoed back, in order, and a client's EOF closes the
#     connection once the echo is out;
#  2. a connection that goes on sending at intervals shorter than the idle
#     timeout stays open past it (the timer restarts on every read);
#  3. an idle connection is closed by the server, never before its timeout
#     and within the client's patience;
#  4. SIGTERM stops the server cleanly (exit 0, "stopped").
#
#   tests/uv_echo_port.sh PATH/TO/uv_echo_port
#
# Exits 77 (skipped) without nc, or when TICKLOOP_IO=io_uring cannot make
# a loop here.
set -u
exe=${1:?usage: uv_echo_port.sh PATH/TO/uv_echo_port}
idle_ms=1000
command -v nc >/dev/null || { echo "nc not found (apt-get install netcat-openbsd): skipped"; exit 77; }
nc -h 2>&1 | grep -q 'OpenBSD netcat' || { echo "nc is not netcat-openbsd: skipped"; exit 77; }

work=$(mktemp -d "${TMPDIR:-/tmp}/uv_echo_port.XXXXXX")
pid=""
cleanup() {
    [ -z "$pid" ] || kill -KILL "$pid" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT
fail() {
    echo "FAIL: $*"
    echo "--- server stdout"; cat "$work/out"
    echo "--- server stderr"; cat "$work/err"
    exit 1
}
ms() { echo $(($(date +%s%N) / 1000000)); }

"$exe" --port 0 --idle-ms "$idle_ms" >"$work/out" 2>"$work/err" &
pid=$!
port=""
for _ in $(seq 100); do
    port=$(grep -o 'listening on 127.0.0.1:[0-9]*' "$work/out" | grep -o '[0-9]*$')
    [ -n "$port" ] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
done
if [ -z "$port" ]; then
    if [ "${TICKLOOP_IO:-}" = io_uring ] && grep -q 'tl_loop_new' "$work/err"; then
        echo "io_uring not usable here: skipped ($(cat "$work/err"))"
        exit 77
    fi
    fail "the server did not start"
fi
echo "$(head -1 "$work/out")"

# 1. Echo: three lines out, the same three back; nc -N sends EOF after them
# and returns once the server has closed.
printf 'one\ntwo\nthree\n' >"$work/sent"
timeout 10 nc -N 127.0.0.1 "$port" <"$work/sent" >"$work/got"
rc=$?
[ $rc -eq 0 ] || fail "echo: nc exited with $rc (124: the server did not close after EOF)"
cmp -s "$work/sent" "$work/got" || fail "echo: sent $(od -c "$work/sent" | head -2), got $(od -c "$work/got" | head -2)"
echo "echo: 3 lines back, closed after EOF"

# 2. Busy: six lines 300 ms apart, 1.8 s (longer than the timeout): every
# line comes back, so the connection outlived one idle period.
(for i in 1 2 3 4 5 6; do echo "line $i"; sleep 0.3; done) |
    timeout 10 nc -N 127.0.0.1 "$port" >"$work/busy"
lines=$(wc -l <"$work/busy")
[ "$lines" -eq 6 ] || fail "busy: $lines of 6 lines echoed (the idle timer was not restarted by reads?)"
echo "busy: 6 lines over 1.8 s echoed with a ${idle_ms} ms idle timeout"

# 3. Idle: nc -d sends nothing and returns when the server closes.
closes_before=$(grep -c 'closing an idle connection' "$work/out")
t0=$(ms)
timeout 10 nc -d 127.0.0.1 "$port" >/dev/null
rc=$?
took=$(($(ms) - t0))
[ $rc -ne 124 ] || fail "idle: not closed within 10 s (timeout $idle_ms ms)"
[ $took -ge $idle_ms ] || fail "idle: closed after $took ms, before the $idle_ms ms timeout"
closes=$(grep -c 'closing an idle connection' "$work/out")
[ "$closes" -eq $((closes_before + 1)) ] || fail "idle: the server did not report closing an idle connection"
echo "idle: closed by the server after $took ms (timeout $idle_ms ms)"

# 4. SIGTERM: a clean stop.
kill -TERM "$pid"
wait "$pid"
rc=$?
pid=""
[ $rc -eq 0 ] || fail "SIGTERM: exit status $rc"
grep -q '^stopped$' "$work/out" || fail "SIGTERM: no 'stopped' line"
echo "SIGTERM: stopped, exit 0"
