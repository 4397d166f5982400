#!/bin/sh
# SPDX-License-Identifier: MIT
# run.sh: timers side by side on two workloads, delayed tasks (Kafka's
# purgatory: 1e6 timers of 3.1-5 s, 90% cancelled, 100,000 fire) and
# heartbeats (1e6 timers of 30 s, 1e7 restarts), on tickloop's four timer
# backends (defaults, and with a 1 ms collect interval), libev, libuv,
# Netty's HashedWheelTimer (1 ms tick, and Netty's default 100 ms; 512
# buckets) and Go's timers (GOMAXPROCS=1, and the default). What each run
# measures is at the top of peers.cc.
#
#   benches/timer_peers/run.sh [BUILD_DIR [PLOT_DIR]]   (default: build docs/perf)
#
# ROUNDS (default 3, at least 3): every library runs once per round, in turn,
# so a slow spell of the machine hits every library alike; the report takes
# the median of the rounds. LIBS: a space-separated subset of the names below.
# NETTY_JAR: netty-common's jar (default /usr/share/java/netty-common.jar).
#
# Netty's and Go's programs are built here when javac and the jar, or go,
# exist; otherwise they are skipped, saying why. Writes BUILD_DIR/timer_peers/
# results.txt (one line per run), results.md (the tables and the goals, also
# printed) and PLOT_DIR/delayed_tasks.png. One round takes 4-6 minutes, most
# of it Netty's heartbeat and the waits of the delayed workload. Run nothing
# else meanwhile: the runs measure CPU and wake-ups of the whole process.
set -eu
build=${1:-build}
plots=${2:-docs/perf}
rounds=${ROUNDS:-3}
here=$(cd "$(dirname "$0")" && pwd)
out="$build/timer_peers"
mkdir -p "$out" "$plots"
if [ "$rounds" -lt 3 ]; then
    echo "ROUNDS=$rounds: the report needs at least 3 rounds for its medians" >&2
    exit 2
fi

ninja -C "$build" benches/timer_peers/bench-timer-peers >/dev/null
peers="$build/benches/timer_peers/bench-timer-peers"
libs="heap2 heap4 wheel hwheel heap2@1ms heap4@1ms wheel@1ms hwheel@1ms libev libuv"

netty_jar=${NETTY_JAR:-/usr/share/java/netty-common.jar}
# One flag and its argument, split on purpose where it is used unquoted.
java_flags="--add-modules jdk.incubator.foreign"
# shellcheck disable=SC2086
if ! command -v javac >/dev/null 2>&1 || ! command -v java >/dev/null 2>&1; then
    echo "skipped Netty: javac or java not found (Debian: apt install default-jdk-headless)"
elif [ ! -r "$netty_jar" ]; then
    echo "skipped Netty: $netty_jar not found (Debian: apt install libnetty-java; or set NETTY_JAR)"
elif ! javac -nowarn $java_flags -cp "$netty_jar" -d "$out/java" "$here/Peers.java" \
    2>"$out/javac.log"; then
    echo "skipped Netty: Peers.java did not compile (needs JDK 17's jdk.incubator.foreign):"
    cat "$out/javac.log"
else
    libs="$libs netty-1ms netty-100ms"
fi
if ! command -v go >/dev/null 2>&1; then
    echo "skipped Go: go not found (Debian: apt install golang-go)"
elif ! GOCACHE="${GOCACHE:-$(cd "$out" && pwd)/gocache}" go build -o "$out/peers-go" \
    "$here/peers.go" 2>"$out/go.log"; then
    echo "skipped Go: peers.go did not build:"
    cat "$out/go.log"
else
    libs="$libs go-p1 go-default"
fi
libs=${LIBS:-$libs}

run_one() { # WORKLOAD LIB
    case $2 in
    netty-*)
        tick=${2#netty-}
        # shellcheck disable=SC2086
        java $java_flags --enable-native-access=ALL-UNNAMED \
            -cp "$out/java:$netty_jar" Peers "$1" "${tick%ms}"
        ;;
    go-p1) GOMAXPROCS=1 "$out/peers-go" "$1" ;;
    go-default) env -u GOMAXPROCS "$out/peers-go" "$1" ;;
    *) "$peers" "$1" "$2" ;;
    esac
}

results="$out/results.txt"
: >"$results"
: >"$out/stderr.log"
{
    echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -srm), $(nproc) CPUs"
    grep -m1 'model name' /proc/cpuinfo || true
    git -C "$here" log -1 --format='# tickloop commit %h %s' 2>/dev/null || true
    echo "# rounds $rounds; libs $libs"
} >"$out/machine.txt"
cat "$out/machine.txt"
round=1
while [ "$round" -le "$rounds" ]; do
    for lib in $libs; do
        for workload in delayed heartbeat; do
            printf 'round %s/%s: %s %s\n' "$round" "$rounds" "$workload" "$lib"
            # The incubator module's warning goes to the log with the rest of
            # stderr; a failed run is reported and leaves its row short.
            if ! run_one "$workload" "$lib" >>"$results" 2>>"$out/stderr.log"; then
                echo "  failed: see $out/stderr.log"
            fi
        done
    done
    round=$((round + 1))
done

# Debian's matplotlib lives in /usr/bin/python3's path, not in a pyenv's.
python=/usr/bin/python3
[ -x "$python" ] || python=python3
"$python" "$here/report.py" --machine "$out/machine.txt" --md "$out/results.md" \
    --png "$plots/delayed_tasks.png" "$results"
cat "$out/results.md"
