/* SPDX-License-Identifier: MIT */
/*
 * timer_ops.cc: bench-timer-ops, Google Benchmark of timer operations for
 * every registered tickloop timer backend (enumerated at run time), libev,
 * libuv and Asio side by side; the benchmarks themselves are in timer_ops.h, libevent's
 * rows in bench-timer-ops-libevent (a separate binary, because Debian's libev
 * exports libevent's symbol names).
 *
 * Rows are named <operation>/<library>/n:<N>/equal:<0-3>[/layout:<0|1>],
 * e.g. restart/heap4/n:100000/equal:0 or expire/hwheel/n:1000000/equal:0/
 * layout:1; equal is the deadline mode (0 random, 1 all equal, 2 batches of
 * 256, 3 interleaved: timer_ops.h says more). N runs 1e3 - 1e7 (the tie modes
 * stop at 1e6); --max-n=1e6 leaves out the 1e7 rows (0.6-1.5 GB and seconds
 * of set-up each).
 * Example: bench-timer-ops --benchmark_filter='restart|expire'
 *          --benchmark_out=ops.json --benchmark_out_format=json
 */
#include <cstdio>
#include <vector>

#include "peers.h"
#include "timer_ops.h"

int main(int argc, char **argv) {
    int64_t max_n = bench::take_max_n(argc, argv);
    size_t n = tl_timer_backend_names(nullptr, 0);
    std::vector<const char *> names(n);
    tl_timer_backend_names(names.data(), n);
    for (const char *name : names) bench::register_all<bench::TickloopOps>(name, name, max_n);
#if TL_BENCH_HAVE_LIBEV
    bench::register_all<bench::LibevOps>("libev", "", max_n);
#endif
#if TL_BENCH_HAVE_LIBUV
    bench::register_all<bench::LibuvOps>("libuv", "", max_n);
#endif
#if TL_BENCH_HAVE_ASIO
    bench::register_all<bench::AsioOps>("asio", "", max_n);
#endif
    benchmark::AddCustomContext("tickloop", tl_version());
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
