#!/bin/sh
# SPDX-License-Identifier: MIT
# run_all.sh: runs every benchmark suite one after the other and turns the
# results into the PNGs of the README's "Performance" section.
#
#   benches/tools/run_all.sh BUILD_DIR OUTDIR     (e.g. build docs/perf)
#
# Writes OUTDIR/*.txt (the tables as printed; latency_summary.txt: the main
# job's verdicts and summary) and OUTDIR/*.png; the raw JSON goes to
# OUTDIR/json/ (not committed: several MB of lateness samples).
# Takes about 30 minutes on a 2-core machine, most of it bench-timer-ops;
# MAX_N=1e6 leaves out its 1e7 rows. The suites run one at a time: never run
# two benchmarks at once, they would measure each other.
set -eu
build=${1:?usage: run_all.sh BUILD_DIR OUTDIR}
out=${2:?usage: run_all.sh BUILD_DIR OUTDIR}
max_n=${MAX_N:-1e7}
here=$(cd "$(dirname "$0")" && pwd)
b="$build/benches"
mkdir -p "$out/json"

ninja -C "$build" >/dev/null
{
    echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -srm), $(nproc) CPUs"
    grep -m1 'model name' /proc/cpuinfo || true
    git -C "$here" log -1 --format='# tickloop commit %h %s' 2>/dev/null || true
} >"$out/machine.txt"

# The main job writes its own results directory; its plots are drawn below
# with the others.
"$b/tickloop-bench" --out "$out/json/main" --no-plots --json "$out/json/latency.json" |
    tee "$out/latency.txt"
cp "$out/json/main/summary.txt" "$out/latency_summary.txt"
"$b/bench-scenarios" --json "$out/json/scenarios.json" | tee "$out/scenarios.txt"
"$b/bench-timer-ops" --max-n="$max_n" --benchmark_counters_tabular=true \
    --benchmark_out="$out/json/timer_ops.json" --benchmark_out_format=json \
    | tee "$out/timer_ops.txt"
gb_files="$out/json/timer_ops.json"
if [ -x "$b/bench-timer-ops-libevent" ]; then
    "$b/bench-timer-ops-libevent" --max-n="$max_n" --benchmark_counters_tabular=true \
        --benchmark_out="$out/json/timer_ops_libevent.json" --benchmark_out_format=json \
        | tee "$out/timer_ops_libevent.txt"
    gb_files="$gb_files $out/json/timer_ops_libevent.json"
fi

if [ -x "$b/bench-loop-overhead" ]; then
    "$b/bench-loop-overhead" --benchmark_out="$out/json/loop_overhead.json" \
        --benchmark_out_format=json | tee "$out/loop_overhead.txt"
fi

# Debian's matplotlib lives in /usr/bin/python3's path, not in a pyenv's.
python=/usr/bin/python3
[ -x "$python" ] || python=python3
if ! "$python" -c 'import matplotlib' 2>/dev/null; then
    echo "run_all.sh: no plots: $python has no matplotlib (Debian: apt-get install" \
        "python3-matplotlib); the text results are in $out" >&2
    exit 3
fi
# shellcheck disable=SC2086 # gb_files is a list of paths without spaces
"$python" "$here/plot.py" -o "$out" "$out/json/latency.json" "$out/json/scenarios.json" $gb_files
