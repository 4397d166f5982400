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
#     --io-batch "off adaptive:1000 fixed:1000"
#                             I/O batching modes, US in microseconds; each
#                             server runs once per mode, a row of its own
#                             named "SERVER MODE" (e.g. "tickloop-io_uring
#                             adaptive:1000"), the rounds interleaved over all
#                             rows. tickloop servers: adaptive:US is
#                             tl_loop_options.io_batch_adaptive = 1 with
#                             io_batch_ns = US (gathers only while the load is
#                             dense), fixed:US io_batch_ns = US alone (every
#                             wait gathers; io_uring with the kernel's minimum
#                             wait only, epoll ignores it); http_hello gets the
#                             same through TICKLOOP_IO_BATCH. libev keeps its
#                             defaults in the off and adaptive rows and uses
#                             ev_set_io_collect_interval(US) in the fixed
#                             rows. libuv and Asio have no batching: one row
#                             each, "SERVER off". Without --io-batch every
#                             server runs once, unbatched, under its bare name.
#                             vs_libev compares with libev's row of the same
#                             mode (its off row where it has none).
#     --out FILE              also write the table as TSV (for plot_http.py)
#
# Columns: req/s (wrk), wrk's p50/p99 latency, server CPU us per request
# (utime+stime of the server process over the run / requests), syscalls per
# request, and for the tickloop servers (tickloop_new.h's counters on
# SIGUSR1, read around the measured run) requests per loop wake-up and the
# share of wake-ups that gathered I/O (tl_loop_stats.io_batched_waits). Needs wrk (and perf or strace for --strace); taskset is in
# util-linux. Every server runs with TICKLOOP_IO_BATCH set to its row's
# mode ("off" unless --io-batch says otherwise), whatever the caller's
# environment has.
set -euo pipefail
build=${1:-build}
[ $# -gt 0 ] && shift
conns="32 256 1000"
rounds=3
duration=5
servers="tickloop-epoll tickloop-io_uring tickloop-streams-epoll tickloop-streams-io_uring libev libuv-poll libuv-stream asio-epoll asio-io_uring http_hello-epoll http_hello-io_uring"
do_strace=0
out=""
io_batch=""
while [ $# -gt 0 ]; do
    case "$1" in
    --conns) conns=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --duration) duration=$2; shift 2 ;;
    --servers) servers=$2; shift 2 ;;
    --strace) do_strace=1; shift ;;
    --out) out=$2; shift 2 ;;
    --io-batch) io_batch=$2; shift 2 ;;
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
# The rows: "SERVER MODE" with --io-batch, the bare server name without.
rows=()
if [ -z "$io_batch" ]; then
    for s in $servers; do rows+=("$s"); done
else
    for m in $io_batch; do
        case "$m" in
        off) ;;
        adaptive:* | fixed:*)
            awk -v us="${m#*:}" 'BEGIN { exit !(us ~ /^[0-9]+(\.[0-9]+)?$/ && us + 0 > 0) }' || {
                echo "run.sh: --io-batch: '$m': US must be a number > 0 (microseconds)" >&2
                exit 2
            } ;;
        *) echo "run.sh: --io-batch: '$m' is not off, adaptive:US or fixed:US" >&2; exit 2 ;;
        esac
    done
    for s in $servers; do
        case "$s" in
        tickloop-* | http_hello-* | libev)
            for m in $io_batch; do rows+=("$s $m"); done ;;
        *) rows+=("$s off") ;; # no batching of its own
        esac
    done
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"; kill $(jobs -p) 2>/dev/null || true' EXIT

server_cmd() { # name mode -> command line (port 0: the server prints its port)
    local batch=""
    [ "$2" = off ] || batch="--io-batch $2"
    case "$1" in
    tickloop-epoll) echo "$dir/server-tickloop --io epoll --port 0 $batch" ;;
    tickloop-io_uring) echo "$dir/server-tickloop --io io_uring --port 0 $batch" ;;
    tickloop-streams-epoll) echo "$dir/server-tickloop-streams --io epoll --port 0 $batch" ;;
    tickloop-streams-io_uring) echo "$dir/server-tickloop-streams --io io_uring --port 0 $batch" ;;
    libev) echo "$dir/server-libev --port 0 $batch" ;; # fixed: collect interval; else defaults
    libuv-poll) echo "$dir/server-libuv --mode poll --port 0" ;;
    libuv-stream) echo "$dir/server-libuv --mode stream --port 0" ;;
    asio-epoll) echo "$dir/server-asio --port 0" ;;
    asio-io_uring) echo "$dir/server-asio-io_uring --port 0" ;;
    http_hello-epoll) echo "$build/examples/http_hello --threads 1 --io epoll --idle-ms 5000 --port 0" ;;
    http_hello-io_uring) echo "$build/examples/http_hello --threads 1 --io io_uring --idle-ms 5000 --port 0" ;;
    *) echo "run.sh: unknown server '$1'" >&2; exit 2 ;;
    esac
}

# Starts the server of row $1 ("SERVER" or "SERVER MODE"), sets $pid and
# $port. TICKLOOP_IO_BATCH says the row's mode too: http_hello has no
# option for it, and an off row must not inherit the caller's.
start_server() {
    local cmd s=${1%% *} m=off env=off
    [ "$s" = "$1" ] || m=${1#* }
    case "$m" in adaptive:* | fixed:*) env=${m}us ;; esac
    cmd=$(server_cmd "$s" "$m")
    rm -f "$tmp/out"
    TICKLOOP_IO_BATCH=$env taskset -c $srv_cpu $cmd >"$tmp/out" 2>"$tmp/err" &
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

# The loop's counters of a tickloop server (row $1; tickloop_new.h prints
# them on SIGUSR1): "iterations io_batched_waits", or "- -" for the others.
loop_stats() {
    case "$1" in
    tickloop-*) ;;
    *) echo "- -"; return ;;
    esac
    local n line
    n=$(grep -c '^stats ' "$tmp/out" || true)
    kill -USR1 "$pid"
    for _ in $(seq 200); do
        [ "$(grep -c '^stats ' "$tmp/out" || true)" -gt "$n" ] && break
        sleep 0.01
    done
    line=$(grep '^stats ' "$tmp/out" | tail -n 1)
    echo "$line" | awk '{
        for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
        print v["iterations"], v["io_batched_waits"] }'
}

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

results="$tmp/results" # conns row round rps p50 p99 cpu_us_per_req req_per_wakeup batched_per_wakeup, tab-separated
: >"$results"
for c in $conns; do
    for r in $(seq "$rounds"); do
        for s in "${rows[@]}"; do
            start_server "$s"
            # 0.5 s of warm-up: connections, page faults, caches.
            run_wrk "$c" 1 >/dev/null
            read -r it0 bw0 < <(loop_stats "$s")
            t0=$(cpu_ticks "$pid")
            read -r reqs rps p50 p99 < <(run_wrk "$c" "$duration")
            t1=$(cpu_ticks "$pid")
            read -r it1 bw1 < <(loop_stats "$s")
            # Requests per wake-up and the share of wake-ups that gathered
            # I/O (io_batched_waits), tickloop servers only.
            read -r rpw bpw < <(awk -v i0="$it0" -v i1="$it1" -v b0="$bw0" -v b1="$bw1" -v n="$reqs" 'BEGIN {
                if (i0 == "-" || i1 - i0 <= 0) { print "- -"; exit }
                printf "%.2f %.2f\n", n / (i1 - i0), (b1 - b0) / (i1 - i0) }')
            stop_server
            cpu=$(awk -v t=$((t1 - t0)) -v hz="$hz" -v n="$reqs" 'BEGIN { printf "%.2f", n ? t * 1e6 / hz / n : 0 }')
            printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$c" "$s" "$r" "$rps" "$p50" "$p99" "$cpu" \
                "$rpw" "$bpw" >>"$results"
            printf '%5s conns  %-42s round %s: %8s req/s  p50 %6s us  p99 %7s us  %s us CPU/req  %s req/wake-up  %s batched/wake-up\n' \
                "$c" "$s" "$r" "$rps" "$p50" "$p99" "$cpu" "$rpw" "$bpw" >&2
        done
    done
done

syscalls="$tmp/syscalls" # conns row syscalls_per_req, tab-separated
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
        for s in "${rows[@]}"; do
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
                'BEGIN { printf "%s\t%s\t%.2f\n", c, s, n ? k / n : 0 }' >>"$syscalls"
        done
    done
fi

# Medians over rounds; the ratio column compares req/s with libev (the
# fastest peer in earlier runs) at the same connection count, in the same
# --io-batch mode where libev has a row of it (else its off row).
table=$(awk -F'\t' -v sys="$syscalls" '
    BEGIN {
        while ((getline line < sys) > 0) {
            split(line, f, "\t"); sc[f[1] SUBSEP f[2]] = f[3]; sc_order[++nsc] = f[1] SUBSEP f[2]
        }
    }
    function libev_base(c, row,   m, k) {
        m = row; if (!sub(/^[^ ]+ /, "", m)) m = ""
        if (m != "" && ((c SUBSEP "libev " m) in rps)) return median(rps[c SUBSEP "libev " m])
        if ((c SUBSEP "libev off") in rps) return median(rps[c SUBSEP "libev off"])
        if ((c SUBSEP "libev") in rps) return median(rps[c SUBSEP "libev"])
        return 0
    }
    function median(list,   n, a, i, j, t) {
        n = split(list, a, ",")
        for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j-1] + 0 > a[j] + 0; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
        return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    {
        k = $1 SUBSEP $2
        sep = ","
        if (!(k in rps)) { order[++n] = k; sep = "" }
        rps[k] = rps[k] sep $4; p50[k] = p50[k] sep $5; p99[k] = p99[k] sep $6; cpu[k] = cpu[k] sep $7
        if ($8 != "-") {
            sep = (k in rpw) ? "," : ""
            rpw[k] = rpw[k] sep $8; bpw[k] = bpw[k] sep $9
        }
    }
    END {
        for (i = 1; i <= nsc; i++) if (!(sc_order[i] in rps)) order[++n] = sc_order[i]
        printf "conns\tserver\treq/s\tvs_libev\tp50_us\tp99_us\tcpu_us_per_req\tsyscalls_per_req"
        printf "\treq_per_wakeup\tbatched_per_wakeup\n"
        for (i = 1; i <= n; i++) {
            k = order[i]; split(k, f, SUBSEP)
            if (!(k in rps)) { printf "%s\t%s\t-\t-\t-\t-\t-\t%s\t-\t-\n", f[1], f[2], sc[k]; continue }
            base = libev_base(f[1], f[2])
            printf "%s\t%s\t%.0f\t%s\t%.0f\t%.0f\t%.2f\t%s\t%s\t%s\n", f[1], f[2], median(rps[k]),
                base ? sprintf("%.3f", median(rps[k]) / base) : "-", median(p50[k]),
                median(p99[k]), median(cpu[k]), (k in sc) ? sc[k] : "-",
                (k in rpw) ? sprintf("%.2f", median(rpw[k])) : "-",
                (k in bpw) ? sprintf("%.2f", median(bpw[k])) : "-"
        }
    }' "$results")
echo
echo "medians of $rounds interleaved rounds, ${duration}s each; server on CPU $srv_cpu, wrk -t1 on CPU $cli_cpu${io_batch:+; --io-batch \"$io_batch\"}"
echo "$table" | column -t -s $'\t'
[ -z "$out" ] || echo "$table" >"$out"
