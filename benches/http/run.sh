#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The HTTP throughput benchmark: the same server (http_core.c) on each loop
# under wrk. Server pinned to one core, wrk (-t1) to the other, rounds
# interleaved (round 1 runs every server, then round 2, ...), medians reported.
#
#   benches/http/run.sh [BUILD_DIR] [options]
#     --conns "32 256 1000"   connection counts
#     --rounds 3              interleaved rounds per connection count (0: only
#                             the --strace counts)
#     --duration 5            seconds per wrk run
#     --servers "..."         subset of: tickloop-epoll tickloop-io_uring
#                             tickloop-streams-epoll tickloop-streams-io_uring
#                             libev libuv-poll libuv-stream asio-epoll
#                             asio-io_uring http_hello-epoll http_hello-io_uring
#                             (asio-io_uring is left out of the default list
#                             where server-asio-io_uring was not built)
#     --strace                also count syscalls per request (perf's syscall
#                             tracepoint, or strace -c -f without perf; one
#                             extra short run per server: strace slows the
#                             server, so its req/s are not used)
#     --out FILE              also write the table as TSV (for plot_http.py)
#
# Columns: req/s (wrk), wrk's p50/p99 latency, server CPU us per request
# (utime+stime of the server process over the run / requests), syscalls per
# request. Needs wrk (and perf or strace for --strace); taskset is in
# util-linux.
set -euo pipefail
build=${1:-build}
[ $# -gt 0 ] && shift
conns="32 256 1000"
rounds=3
duration=5
servers="tickloop-epoll tickloop-io_uring tickloop-streams-epoll tickloop-streams-io_uring libev libuv-poll libuv-stream asio-epoll asio-io_uring http_hello-epoll http_hello-io_uring"
do_strace=0
out=""
while [ $# -gt 0 ]; do
    case "$1" in
    --conns) conns=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --duration) duration=$2; shift 2 ;;
    --servers) servers=$2; shift 2 ;;
    --strace) do_strace=1; shift ;;
    --out) out=$2; shift 2 ;;
    *) echo "run.sh: unknown option '$1'" >&2; exit 2 ;;
    esac
done
command -v wrk >/dev/null || { echo "run.sh: wrk not found (apt-get install wrk)" >&2; exit 1; }
ulimit -n 8192 2>/dev/null || true
ncpu=$(nproc)
srv_cpu=0
cli_cpu=$((ncpu > 1 ? 1 : 0))
hz=$(getconf CLK_TCK)
dir="$build/benches/http"
# Asio is optional (libasio-dev; its io_uring build also needs liburing).
for asio in asio-epoll:server-asio asio-io_uring:server-asio-io_uring; do
    if [ ! -x "$dir/${asio#*:}" ] && [[ " $servers " == *" ${asio%%:*} "* ]]; then
        echo "run.sh: $dir/${asio#*:} not built (libasio-dev, liburing): ${asio%%:*} skipped" >&2
        servers=$(echo " $servers " | sed "s/ ${asio%%:*} / /; s/^ *//; s/ *$//")
    fi
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"; kill $(jobs -p) 2>/dev/null || true' EXIT

server_cmd() { # name -> command line (port 0: the server prints its port)
    case "$1" in
    tickloop-epoll) echo "$dir/server-tickloop --io epoll --port 0" ;;
    tickloop-io_uring) echo "$dir/server-tickloop --io io_uring --port 0" ;;
    tickloop-streams-epoll) echo "$dir/server-tickloop-streams --io epoll --port 0" ;;
    tickloop-streams-io_uring) echo "$dir/server-tickloop-streams --io io_uring --port 0" ;;
    libev) echo "$dir/server-libev --port 0" ;;
    libuv-poll) echo "$dir/server-libuv --mode poll --port 0" ;;
    libuv-stream) echo "$dir/server-libuv --mode stream --port 0" ;;
    asio-epoll) echo "$dir/server-asio --port 0" ;;
    asio-io_uring) echo "$dir/server-asio-io_uring --port 0" ;;
    http_hello-epoll) echo "$build/examples/http_hello --threads 1 --io epoll --idle-ms 5000 --port 0" ;;
    http_hello-io_uring) echo "$build/examples/http_hello --threads 1 --io io_uring --idle-ms 5000 --port 0" ;;
    *) echo "run.sh: unknown server '$1'" >&2; exit 2 ;;
    esac
}

# Starts server $1, sets $pid and $port.
start_server() {
    local cmd
    cmd=$(server_cmd "$1")
    rm -f "$tmp/out"
    taskset -c $srv_cpu $cmd >"$tmp/out" 2>"$tmp/err" &
    pid=$!
    port=""
    for _ in $(seq 100); do
        port=$(grep -o 'listening on [^ ]*' "$tmp/out" 2>/dev/null | grep -o '[0-9]*$' || true)
        [ -n "$port" ] && break
        sleep 0.05
    done
    [ -n "$port" ] || { echo "run.sh: $1 did not start:"; cat "$tmp/err"; exit 1; } >&2
}

stop_server() { kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true; }

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# wrk run against $port with $1 connections for $2 s; prints
# "reqs rps p50_us p99_us".
run_wrk() {
    taskset -c $cli_cpu wrk -t1 -c"$1" -d"$2"s --latency "http://127.0.0.1:$port/" >"$tmp/wrk"
    awk '
        function us(v) {
            if (v ~ /us$/) return v + 0; if (v ~ /ms$/) return v * 1000;
            if (v ~ /s$/) return v * 1000000; return v
        }
        / requests in / { reqs = $1 }
        /^Requests\/sec:/ { rps = $2 }
        $1 == "50%" { p50 = us($2) } $1 == "99%" { p99 = us($2) }
        /Socket errors/ { err = $0 }
        END { printf "%d %.0f %.0f %.0f\n", reqs, rps, p50, p99 }' "$tmp/wrk"
}

results="$tmp/results" # conns server round rps p50 p99 cpu_us_per_req
: >"$results"
for c in $conns; do
    for r in $(seq "$rounds"); do
        for s in $servers; do
            start_server "$s"
            # 0.5 s of warm-up: connections, page faults, caches.
            run_wrk "$c" 1 >/dev/null
            t0=$(cpu_ticks "$pid")
            read -r reqs rps p50 p99 < <(run_wrk "$c" "$duration")
            t1=$(cpu_ticks "$pid")
            stop_server
            cpu=$(awk -v t=$((t1 - t0)) -v hz="$hz" -v n="$reqs" 'BEGIN { printf "%.2f", n ? t * 1e6 / hz / n : 0 }')
            echo "$c $s $r $rps $p50 $p99 $cpu" >>"$results"
            printf '%5s conns  %-20s round %s: %8s req/s  p50 %6s us  p99 %7s us  %s us CPU/req\n' \
                "$c" "$s" "$r" "$rps" "$p50" "$p99" "$cpu" >&2
        done
    done
done

syscalls="$tmp/syscalls" # conns server syscalls_per_req
: >"$syscalls"
if [ $do_strace = 1 ]; then
    # perf counts the syscalls tracepoint inside the kernel, without
    # stopping the server at each call as strace does (which changes how
    # much an io_uring server batches); strace where perf cannot.
    use_perf=0
    if command -v perf >/dev/null && perf stat -e raw_syscalls:sys_enter -o /dev/null true 2>/dev/null; then
        use_perf=1
    else
        command -v strace >/dev/null || { echo "run.sh: neither perf nor strace found" >&2; exit 1; }
    fi
    for c in $conns; do
        for s in $servers; do
            start_server "$s"
            run_wrk "$c" 1 >/dev/null
            if [ $use_perf = 1 ]; then
                perf stat -e raw_syscalls:sys_enter -p "$pid" -o "$tmp/count" &
            else
                strace -c -f -q -p "$pid" -o "$tmp/count" &
            fi
            spid=$!
            sleep 0.3
            read -r reqs _ < <(run_wrk "$c" 2)
            kill -INT $spid; wait $spid 2>/dev/null || true
            stop_server
            if [ $use_perf = 1 ]; then
                calls=$(awk '/raw_syscalls:sys_enter/ { gsub(",", "", $1); print $1 }' "$tmp/count")
            else
                # The total line is "100.00 SECONDS USECS/CALL CALLS [ERRORS] total":
                # calls is the 4th field whether or not there were errors.
                calls=$(awk '$NF == "total" { print $4 }' "$tmp/count")
            fi
            awk -v c="$c" -v s="$s" -v k="$calls" -v n="$reqs" \
                'BEGIN { printf "%s %s %.2f\n", c, s, n ? k / n : 0 }' >>"$syscalls"
        done
    done
fi

# Medians over rounds; the ratio column compares req/s with libev (the
# fastest peer in earlier runs) at the same connection count.
table=$(awk -v sys="$syscalls" '
    BEGIN {
        while ((getline line < sys) > 0) {
            split(line, f, " "); sc[f[1] " " f[2]] = f[3]; sc_order[++nsc] = f[1] " " f[2]
        }
    }
    function median(list,   n, a, i, j, t) {
        n = split(list, a, ",")
        for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j-1] + 0 > a[j] + 0; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
        return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    {
        k = $1 " " $2
        sep = ","
        if (!(k in rps)) { order[++n] = k; sep = "" }
        rps[k] = rps[k] sep $4; p50[k] = p50[k] sep $5; p99[k] = p99[k] sep $6; cpu[k] = cpu[k] sep $7
    }
    END {
        for (i = 1; i <= nsc; i++) if (!(sc_order[i] in rps)) order[++n] = sc_order[i]
        printf "conns\tserver\treq/s\tvs_libev\tp50_us\tp99_us\tcpu_us_per_req\tsyscalls_per_req\n"
        for (i = 1; i <= n; i++) {
            k = order[i]; split(k, f, " ")
            if (!(k in rps)) { printf "%s\t%s\t-\t-\t-\t-\t-\t%s\n", f[1], f[2], sc[k]; continue }
            base = (f[1] " libev") in rps ? median(rps[f[1] " libev"]) : 0
            printf "%s\t%s\t%.0f\t%s\t%.0f\t%.0f\t%.2f\t%s\n", f[1], f[2], median(rps[k]),
                base ? sprintf("%.3f", median(rps[k]) / base) : "-", median(p50[k]),
                median(p99[k]), median(cpu[k]), (k in sc) ? sc[k] : "-"
        }
    }' "$results")
echo
echo "medians of $rounds interleaved rounds, ${duration}s each; server on CPU $srv_cpu, wrk -t1 on CPU $cli_cpu"
echo "$table" | column -t -s $'\t'
[ -z "$out" ] || echo "$table" >"$out"
