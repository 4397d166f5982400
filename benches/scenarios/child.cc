/* SPDX-License-Identifier: MIT */
/*
 * child.cc: bench-scenarios' child process: one scenario on one library,
 * its phases, counts and sizes printed as tab-separated lines on stdout
 * (PHASE name wall_ns cpu_ns; INFO key value; ERROR why) for the parent
 * (scenarios.cc) to read.
 */
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "latency.h"
#include "ops_tickloop.h"
#include "scenarios.h"

#if TL_BENCH_HAVE_LIBEV
#include "ops_libev.h"
#endif
#if TL_BENCH_HAVE_LIBUV
#include "ops_libuv.h"
#endif

namespace bench::scenarios {

namespace {

uint64_t process_cpu_ns() {
    return clock_ns(CLOCK_PROCESS_CPUTIME_ID);
}

/* Prints "PHASE name wall_ns cpu_ns" for the time since the previous lap. */
struct PhaseClock {
    uint64_t wall = mono_ns(), cpu = process_cpu_ns();
    void lap(const char *name) {
        uint64_t w = mono_ns(), c = process_cpu_ns();
        std::printf("PHASE\t%s\t%" PRIu64 "\t%" PRIu64 "\n", name, w - wall, c - cpu);
        wall = w;
        cpu = c;
    }
};

void info(const char *key, const std::string &value) {
    std::printf("INFO\t%s\t%s\n", key, value.c_str());
}
void info(const char *key, uint64_t value) {
    info(key, std::to_string(value));
}

template <class Ops>
int million(std::unique_ptr<Ops> ops, const Sizes &z) {
    using Timer = typename Ops::Timer;
    size_t n = z.million_n;
    /* Allocated, not touched: its pages are faulted in by the init phase, as
       with the malloc of libuv's benchmark. */
    std::unique_ptr<Timer[]> timers(new Timer[n]);
    info("n", n);
    info("handle_bytes", sizeof(Timer));
    ops->update_time();
    PhaseClock clock;
    for (size_t i = 0; i < n; ++i) {
        ops->init(timers[i]);
        ops->start(timers[i], (1 + i / z.million_per_ms) * kMs);
    }
    clock.lap("init");
    ops->run();
    clock.lap("dispatch");
    uint64_t fired = ops->fired;
    ops->close(timers.get(), n);
    ops.reset();
    clock.lap("cleanup");
    info("fired", fired);
    if (fired != n) {
        std::printf("ERROR\tfired %" PRIu64 " of %zu\n", fired, n);
        return 1;
    }
    return 0;
}

template <class Ops>
int heartbeat(std::unique_ptr<Ops> ops, const Sizes &z) {
    /* The application's connection: the timer handle and the state the
       packet handler updates right before restarting the timeout. */
    struct Connection {
        typename Ops::Timer idle;
        uint64_t bytes_in;
    };
    constexpr uint64_t kIdle = 30 * kSec;
    size_t n = z.heartbeat_conns;
    std::unique_ptr<Connection[]> conns(new Connection[n]);
    info("n", n);
    info("handle_bytes", sizeof(typename Ops::Timer));
    info("ops", z.heartbeat_packets);
    Rng rng(0x68656172746265ull);
    ops->update_time();
    PhaseClock clock;
    for (size_t i = 0; i < n; ++i) {
        conns[i].bytes_in = 0;
        ops->init(conns[i].idle);
        ops->start(conns[i].idle, rng.below(kIdle)); /* opened over the last 30 s */
    }
    clock.lap("init");
    for (size_t i = 0; i < z.heartbeat_packets; ++i) {
        Connection &c = conns[rng.below(n)];
        c.bytes_in += 64;
        ops->restart(c.idle, kIdle);
        if ((i & 255) == 255) ops->run_nowait();
    }
    clock.lap("run");
    info("fired", ops->fired);
    for (size_t i = 0; i < n; ++i) ops->stop(conns[i].idle);
    /* close() takes an array of handles, but here they are interleaved with
       the connections' state: a library whose close is more than a no-op
       (libuv) closes them one by one and finishes in one loop turn. */
    if constexpr (requires(Ops & o, typename Ops::Timer & t) { o.close_handle(t); }) {
        for (size_t i = 0; i < n; ++i) ops->close_handle(conns[i].idle);
        ops->close(nullptr, 0);
    }
    ops.reset();
    clock.lap("cleanup");
    return 0;
}

template <class Ops>
int delayed(std::unique_ptr<Ops> ops, const Sizes &z) {
    using Timer = typename Ops::Timer;
    constexpr uint64_t kDelay = 1800 * kSec;
    size_t n = z.delayed_tasks;
    std::unique_ptr<Timer[]> tasks(new Timer[n]);
    /* The order in which tasks finish (and cancel their timeout): random, and
       the last 1% of that order never finish. */
    std::vector<uint32_t> order(n);
    std::iota(order.begin(), order.end(), 0u);
    Rng rng(0x64656c61796564ull);
    for (size_t i = n - 1; i > 0; --i) std::swap(order[i], order[rng.below(i + 1)]);
    size_t cancelled = n - n / 100;
    info("n", n);
    info("handle_bytes", sizeof(Timer));
    info("ops", n + cancelled);
    ops->update_time();
    PhaseClock clock;
    for (size_t i = 0; i < n; ++i) {
        ops->init(tasks[i]);
        ops->start(tasks[i], kDelay);
        if ((i & 255) == 255) ops->run_nowait();
    }
    clock.lap("create");
    for (size_t i = 0; i < cancelled; ++i) {
        ops->stop(tasks[order[i]]);
        if ((i & 255) == 255) ops->run_nowait();
    }
    clock.lap("cancel");
    info("fired", ops->fired);
    for (size_t i = 0; i < n; ++i) ops->stop(tasks[i]);
    ops->close(tasks.get(), n);
    ops.reset();
    clock.lap("cleanup");
    return 0;
}

template <class Ops>
int run_child(const std::string &scenario, std::unique_ptr<Ops> ops, const Sizes &z) {
    info("impl", ops->name());
    if (!ops->ok()) {
        std::printf("ERROR\t%s\n", ops->error().c_str());
        return 1;
    }
    if (scenario == "million") return million(std::move(ops), z);
    if (scenario == "heartbeat") return heartbeat(std::move(ops), z);
    if (scenario == "delayed") return delayed(std::move(ops), z);
    std::printf("ERROR\tunknown scenario %s\n", scenario.c_str());
    return 1;
}

} // namespace

int child(const std::string &scenario, const std::string &lib, const Sizes &z) {
    int rc;
#if TL_BENCH_HAVE_LIBEV
    if (lib == "libev") {
        rc = run_child(scenario, std::make_unique<LibevOps>(), z);
        std::fflush(stdout);
        return rc;
    }
#endif
#if TL_BENCH_HAVE_LIBUV
    if (lib == "libuv") {
        rc = run_child(scenario, std::make_unique<LibuvOps>(), z);
        std::fflush(stdout);
        return rc;
    }
#endif
    rc = run_child(scenario, std::make_unique<TickloopOps>(lib.c_str()), z);
    std::fflush(stdout);
    return rc;
}

} // namespace bench::scenarios
