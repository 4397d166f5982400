#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# profile.sh: user-space instructions per request of each HTTP benchmark
# server, counted by callgrind while wrk drives it. Instruction counts do not
# depend on the machine's load, so they compare the loops even on a busy
# machine where run.sh's req/s would not; they leave out the kernel's share
# (run.sh --strace counts the syscalls).
#
#   benches/http/profile.sh [BUILD_DIR] [--conns N] [--servers "..."] [--top K]
#
# Each server runs under valgrind --tool=callgrind; after a 1 s warm-up the
# counters are zeroed (callgrind_control -z), wrk runs 3 s, and the total
# instructions are divided by wrk's request count. --top K prints the K
# functions with the most instructions per request (inclusive) per
# server.
set -euo pipefail
build=${1:-build}
[ $# -gt 0 ] && shift
conns=32
top=0
servers="tickloop-epoll tickloop-io_uring tickloop-streams-epoll tickloop-streams-io_uring libev libuv-poll libuv-stream http_hello-epoll"
while [ $# -gt 0 ]; do
    case "$1" in
    --conns) conns=$2; shift 2 ;;
    --servers) servers=$2; shift 2 ;;
    --top) top=$2; shift 2 ;;
    *) echo "profile.sh: unknown option '$1'" >&2; exit 2 ;;
    esac
done
for tool in valgrind callgrind_control callgrind_annotate wrk; do
    command -v $tool >/dev/null || { echo "profile.sh: $tool not found (apt-get install valgrind wrk)" >&2; exit 1; }
done
dir="$build/benches/http"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"; kill $(jobs -p) 2>/dev/null || true' EXIT

server_cmd() {
    case "$1" in
    tickloop-epoll) echo "$dir/server-tickloop --io epoll" ;;
    tickloop-io_uring) echo "$dir/server-tickloop --io io_uring" ;;
    tickloop-streams-epoll) echo "$dir/server-tickloop-streams --io epoll" ;;
    tickloop-streams-io_uring) echo "$dir/server-tickloop-streams --io io_uring" ;;
    libev) echo "$dir/server-libev" ;;
    libuv-poll) echo "$dir/server-libuv --mode poll" ;;
    libuv-stream) echo "$dir/server-libuv --mode stream" ;;
    http_hello-epoll) echo "$build/examples/http_hello --threads 1 --io epoll --idle-ms 5000" ;;
    http_hello-io_uring) echo "$build/examples/http_hello --threads 1 --io io_uring --idle-ms 5000" ;;
    *) echo "profile.sh: unknown server '$1'" >&2; exit 2 ;;
    esac
}

printf '%-20s %10s %12s %8s\n' server requests instructions Ir/req
for s in $servers; do
    # shellcheck disable=SC2046 # the command line is split on purpose
    valgrind --tool=callgrind --callgrind-out-file="$tmp/$s.cg" $(server_cmd "$s") --port 0 \
        >"$tmp/out" 2>"$tmp/err" &
    pid=$!
    port=""
    for _ in $(seq 200); do
        port=$(grep -o 'listening on [^ ]*' "$tmp/out" 2>/dev/null | grep -o '[0-9]*$' || true)
        [ -n "$port" ] && break
        sleep 0.1
    done
    [ -n "$port" ] || { echo "profile.sh: $s did not start"; cat "$tmp/err"; exit 1; } >&2
    wrk -t1 -c"$conns" -d1s "http://127.0.0.1:$port/" >/dev/null
    callgrind_control -z "$pid" >/dev/null 2>&1
    reqs=$(wrk -t1 -c"$conns" -d3s "http://127.0.0.1:$port/" | awk '/ requests in /{print $1}')
    # Dump before stopping: under valgrind an io_uring server does not see
    # the SIGTERM it takes through a signalfd, and is killed after 3 s.
    callgrind_control -d "$pid" >/dev/null 2>&1
    kill -TERM "$pid"
    for _ in $(seq 30); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    cg="$tmp/$s.cg.1"
    [ -s "$cg" ] || { echo "profile.sh: $s: no callgrind dump"; cat "$tmp/err"; exit 1; } >&2
    ir=$(callgrind_annotate "$cg" | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }')
    printf '%-20s %10d %12d %8d\n' "$s" "$reqs" "$ir" $((ir / reqs))
    if [ "$top" -gt 0 ]; then
        # Inclusive costs (after callgrind_control -z the exclusive view
        # charges everything to main); the frames above the loop are skipped.
        callgrind_annotate --inclusive=yes --threshold=100 "$cg" | awk -v k="$top" -v n="$reqs" -v t="$ir" '
            /file:function/ { on = 1; getline; next }
            on && /%\)/ {
                c = $1; gsub(",", "", c)
                if (c + 0 > 0.9 * t || k-- <= 0) next
                name = substr($0, index($0, "%)") + 2); sub(/^ +/, "", name)
                printf "    %7.1f  %s\n", c / n, name
            }'
    fi
done
