/* SPDX-License-Identifier: MIT */
/*
 * timer_ops_libevent.cc: bench-timer-ops-libevent, the libevent rows of the
 * timer-operation benchmarks (timer_ops.h), in a binary of their own because
 * Debian's libev exports libevent's symbol names (event_add, ...).
 *
 * Two libraries' worth of rows: "libevent" (default base: the coarse
 * monotonic clock) and "libevent-precise" (EVENT_BASE_FLAG_PRECISE_TIMER),
 * both on epoll. Same flags as bench-timer-ops, --max-n included.
 */
#include "ops_libevent.h"
#include "timer_ops.h"

int main(int argc, char **argv) {
    int64_t max_n = bench::take_max_n(argc, argv);
    bench::register_all<bench::LibeventOps>("libevent", "", max_n);
    bench::register_all<bench::LibeventOps>("libevent-precise", "precise", max_n);
    benchmark::AddCustomContext("libevent", event_get_version());
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
