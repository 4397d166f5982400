#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Drives examples/http_get (connect, request, half-close, read to EOF) on
# the I/O backend TICKLOOP_IO names:
#  1. against examples/http_hello: status 200 and "Hello, World!";
#  2. against Python's http.server (a server tickloop did not write),
#     serving a file of 200 KB: the whole file, byte for byte;
#  3. a refused connect with no retries: exit 1, "Connection refused";
#  4. a refused connect retried from the timer until a server comes up on
#     that port: the response.
#
#   tests/http_get.sh PATH/TO/http_get PATH/TO/http_hello
#
# Exits 77 (skipped) when TICKLOOP_IO=io_uring cannot make a loop here; the
# Python cases are skipped (with a note) without python3.
set -u
get=${1:?usage: http_get.sh PATH/TO/http_get PATH/TO/http_hello}
hello=${2:?usage: http_get.sh PATH/TO/http_get PATH/TO/http_hello}
work=$(mktemp -d "${TMPDIR:-/tmp}/http_get.XXXXXX")
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
    rm -rf "$work"
}
trap cleanup EXIT
fail() {
    echo "FAIL: $*"
    for f in "$work"/*.out "$work"/*.err; do [ -f "$f" ] && { echo "--- $f"; head -c 2000 "$f"; }; done
    exit 1
}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# 1. http_hello
"$hello" --port 0 --threads 1 >"$work/hello.out" 2>"$work/hello.err" &
pids+=($!)
port=""
for _ in $(seq 100); do
    port=$(grep -o 'listening on 127.0.0.1:[0-9]*' "$work/hello.out" | grep -o '[0-9]*$')
    [ -n "$port" ] && break
    kill -0 "${pids[0]}" 2>/dev/null || break
    sleep 0.05
done
if [ -z "$port" ]; then
    if [ "${TICKLOOP_IO:-}" = io_uring ] && grep -q 'tl_loop_new' "$work/hello.err"; then
        echo "io_uring not usable here: skipped"; exit 77
    fi
    fail "http_hello did not start"
fi
"$get" --port "$port" --path / >"$work/get1.out" 2>"$work/get1.err" || fail "http_get against http_hello exited $?"
head -1 "$work/get1.out" | grep -q '^HTTP/1.1 200' || fail "no 200 from http_hello"
grep -q 'Hello, World!' "$work/get1.out" || fail "no body from http_hello"
echo "ok: http_hello answered"

# 3. refused, no retries
dead=$(free_port)
"$get" --port "$dead" >"$work/get3.out" 2>"$work/get3.err" && fail "http_get to a closed port exited 0"
grep -q 'Connection refused' "$work/get3.err" || fail "no 'Connection refused' on stderr"
echo "ok: refused"

if ! command -v python3 >/dev/null; then
    echo "python3 not found: http.server cases skipped"; exit 0
fi
# 2. Python's http.server
mkdir "$work/www"
head -c 200000 /dev/urandom >"$work/www/blob"
pyport=$(free_port)
(cd "$work/www" && exec python3 -m http.server --bind 127.0.0.1 "$pyport") >"$work/py.out" 2>&1 &
pids+=($!)
"$get" --port "$pyport" --path /blob --retries 50 --retry-ms 100 >"$work/get2.out" 2>"$work/get2.err" ||
    fail "http_get against http.server exited $?"
head -1 "$work/get2.out" | grep -q '^HTTP/1.0 200' || fail "no 200 from http.server"
# The body is what follows the blank line that ends the header.
python3 - "$work/get2.out" "$work/www/blob" <<'PY' || fail "the body differs from the file"
import sys
resp = open(sys.argv[1], 'rb').read()
body = resp[resp.index(b'\r\n\r\n') + 4:]
sys.exit(0 if body == open(sys.argv[2], 'rb').read() else 1)
PY
echo "ok: http.server, 200000 bytes"

# 4. retried until the server is up (it starts 0.5 s after the client)
late=$(free_port)
"$get" --port "$late" --path /blob --retries 100 --retry-ms 50 >"$work/get4.out" 2>"$work/get4.err" &
getpid=$!
sleep 0.5
(cd "$work/www" && exec python3 -m http.server --bind 127.0.0.1 "$late") >"$work/py2.out" 2>&1 &
pids+=($!)
wait "$getpid" || fail "http_get with retries exited $?"
head -1 "$work/get4.out" | grep -q '^HTTP/1.0 200' || fail "no 200 after retries"
echo "ok: retried until the server came up"
