#!/bin/sh
# SPDX-License-Identifier: MIT
# ir_per_op.sh: instructions per timer operation, counted by callgrind over
# bench-timer-ops's timed regions only (timer_ops.h, timed_begin), one row
# at a time with a fixed iteration count. Counts do not depend on the
# machine's load, so two builds compare on a shared machine.
#
#   benches/timer_ops/ir_per_op.sh BUILD_DIR [LIBS [SIZES [OPS]]]
#
# LIBS default "heap2 heap4 wheel hwheel libev", SIZES "1000 1000000", OPS
# "start_stop restart cancel expire" (random deadlines, equal:0; expire in
# start order, layout:0), or "pop": bench-expire-ir's pops through the
# vtable at fixed nows (tickloop's backends only), which unlike the expire
# row do not depend on when the run happened. Prints "op lib n Ir/op" lines.
set -eu
bin="$1/benches/bench-timer-ops"
libs=${2:-"heap2 heap4 wheel hwheel libev"}
sizes=${3:-"1000 1000000"}
ops=${4:-"start_stop restart cancel expire"}
for n in $sizes; do
    for op in $ops; do
        for lib in $libs; do
            # iterations, and operations per iteration
            case $op in
            start_stop | restart) it=$((n > 1000 ? 1000000 : 100000)) per=1 ;;
            cancel)
                it=$((n > 1000 ? 32 : 200))
                per=$((n / 2 < 8192 ? n / 2 : 8192))
                ;;
            expire | pop) it=$((n > 1000 ? 1 : 100)) per=$n ;;
            esac
            if [ "$op" = pop ]; then
                [ "$lib" = libev ] && continue
                it=$((n > 1000 ? 1 : 100))
                ir=$(valgrind --tool=callgrind --collect-atstart=no --callgrind-out-file=/dev/null \
                    "$1/benches/bench-expire-ir" "$lib" "$n" $it 2>&1 >/dev/null |
                    awk '/Collected :/ { print $NF }')
                awk -v lib="$lib" -v n="$n" -v ir="$ir" -v ops=$((it * n)) \
                    'BEGIN { printf "pop %s %s %.1f\n", lib, n, ir / ops }'
                continue
            fi
            row="^$op/$lib/n:$n/equal:0/"
            [ "$op" = expire ] && row="^$op/$lib/n:$n/equal:0/layout:0/"
            ir=$(valgrind --tool=callgrind --collect-atstart=no --callgrind-out-file=/dev/null \
                "$bin" --benchmark_filter="$row" --iterations=$it 2>&1 >/dev/null |
                awk '/Collected :/ { print $NF }')
            awk -v op="$op" -v lib="$lib" -v n="$n" -v ir="$ir" -v ops=$((it * per)) \
                'BEGIN { printf "%s %s %s %.1f\n", op, lib, n, ir / ops }'
        done
    done
done
