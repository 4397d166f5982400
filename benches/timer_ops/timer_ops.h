/* SPDX-License-Identifier: MIT */
/*
 * timer_ops.h: the Google Benchmark bodies shared by bench-timer-ops
 * (timer_ops.cc: tickloop's backends, libev, libuv) and
 * bench-timer-ops-libevent (timer_ops_libevent.cc), so every library runs
 * exactly the same code through its adapter (ops.h).
 *
 * Benchmarks, each for N live timers (args: N, deadlines[, layout]):
 *   start_stop  start then stop one extra timer while N others are live
 *   restart     move a random live timer to a new deadline (each library's
 *               idiom: tl_timer_start on an active timer, ev_timer_again,
 *               uv_timer_start on an active handle, event_add on a pending one)
 *   cancel      stop random live timers (batches of up to 8192, timed alone;
 *               the batch is re-armed untimed so N stays between N/2 and N)
 *   expire      N timers due at once, fired by non-blocking iterations of a
 *               real loop (tl_loop_run(NOWAIT), ev_run(EVRUN_NOWAIT), ...), as
 *               many as it takes (counter runs_per_batch: tickloop caps the
 *               callbacks per iteration); deadlines spread over 20 ms so they
 *               are all due after a short sleep, outside the timed region.
 *               layout:0 starts the timers in the order they lie in memory,
 *               layout:1 in a random order (the k-th timer started lives at a
 *               random place in the array), which is what a long-running
 *               server's allocator gives after a while
 *   heartbeat   1e6 connections, each owning its 30 s idle timeout; a
 *               "packet" arrives on a random connection, whose handler has
 *               just touched the connection (so its timer handle is in cache:
 *               the touch is untimed), then restarts the timeout. Batches of
 *               256 restarts are timed; after each, one non-blocking loop
 *               iteration (untimed) lets time advance, and timers rarely fire
 *               (the counter says how many)
 *   delayed     tasks created with a 30 min delay, 99% cancelled before they
 *               run (one batch of N creations and cancellations per iteration)
 * Deadlines (the `equal` argument): 0 "random" draws distinct delays uniformly
 * in 1 s - 10 min (for expire: 0 - 20 ms); 1 "equal" gives every timer the
 * same delay, a heap's worst tie case; 2 "batch" gives each run of 256
 * consecutive starts (or restarts) one delay, 1 us later than the run before:
 * the deadlines of a busy server, whose every timer (re)started in one loop
 * iteration shares tl_now (as if the time were updated every 256 operations,
 * without timing each library's update call); 3 "interleaved" draws each
 * timer's delay at random from 51 distinct ones (for expire: spread evenly
 * over the 20 ms), so starts of one deadline are interleaved with the other
 * 50's: a server with a few fixed timeouts per connection state. Ties must
 * still fire in start order.
 *
 * Counters: ns_per_op and items_per_second come from thread CPU time around
 * the timed code (this machine is shared; CPU time leaves out the others'
 * turns). For start_stop and restart the Time column is also ns per op; for
 * the batched benchmarks it is per batch, so read ns_per_op.
 */
#ifndef TICKLOOP_BENCHES_TIMER_OPS_H
#define TICKLOOP_BENCHES_TIMER_OPS_H

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#define TL_BENCH_COLLECT() CALLGRIND_TOGGLE_COLLECT
#else
#define TL_BENCH_COLLECT() ((void)0)
#endif

#include "latency.h"
#include "ops.h"

namespace bench {

/* Random draws are pre-computed into rings so the generator is not timed.
   The ring holds 4 draws per live timer (64 Ki - 4 Mi entries): a smaller
   ring would restart the same few timers over and over, keep them in cache
   and flatter the large populations. */
inline constexpr size_t kRingMin = 1u << 16, kRingMax = 1u << 22;
inline size_t ring_size(size_t n) {
    size_t r = kRingMin;
    while (r < 4 * n && r < kRingMax) r <<= 1;
    return r;
}
inline constexpr uint64_t kEqualDelay = 300 * kSec;
inline constexpr uint64_t kExpireWindow = 20 * kMs;

enum Deadlines : int64_t { kRandom = 0, kEqual = 1, kBatch = 2, kInterleaved = 3 };
/* kBatch: starts per shared deadline, and the step between batches. */
inline constexpr size_t kBatchSize = 256;
inline constexpr uint64_t kBatchStep = 1000;
/* kInterleaved: how many distinct deadlines. */
inline constexpr uint64_t kInterleavedDeadlines = 51;
enum Layout : int64_t { kStartOrder = 0, kShuffled = 1 };

struct Population {
    std::vector<uint64_t> initial; /* delay of each live timer      */
    std::vector<uint32_t> victim;  /* ring: which timer to operate  */
    std::vector<uint64_t> delay;   /* ring: new delay               */
    size_t mask = 0;               /* ring size - 1                 */
};

inline Population make_population(size_t n, Deadlines d, uint64_t lo = 1 * kSec,
                                  uint64_t hi = 600 * kSec) {
    Rng rng(0x74696d6572ull ^ n);
    Population p;
    size_t ring = ring_size(n);
    p.mask = ring - 1;
    p.initial.resize(n);
    p.victim.resize(ring);
    p.delay.resize(ring);
    auto draw = [&](size_t i) {
        if (d == kEqual) return kEqualDelay;
        if (d == kBatch) return kEqualDelay + (i / kBatchSize) * kBatchStep;
        if (d == kInterleaved) return kEqualDelay + rng.below(kInterleavedDeadlines) * kBatchStep;
        return lo + rng.below(hi - lo);
    };
    for (size_t i = 0; i < n; ++i) p.initial[i] = draw(i);
    for (size_t i = 0; i < ring; ++i) {
        p.victim[i] = (uint32_t)rng.below(n);
        p.delay[i] = draw(i);
    }
    return p;
}

/* N live timers of one library, started from the population's delays. */
template <class Ops>
struct Live {
    Ops &ops;
    size_t n;
    std::unique_ptr<typename Ops::Timer[]> timers;
    Live(Ops &o, const std::vector<uint64_t> &delays)
        : ops(o), n(delays.size()), timers(new typename Ops::Timer[delays.size()]) {
        for (size_t i = 0; i < n; ++i) ops.init(timers[i]);
        ops.update_time();
        for (size_t i = 0; i < n; ++i) ops.start(timers[i], delays[i]);
    }
    ~Live() {
        for (size_t i = 0; i < n; ++i) ops.stop(timers[i]);
        ops.close(timers.get(), n);
    }
    typename Ops::Timer &operator[](size_t i) { return timers[i]; }
};

/* The timed regions' bounds: thread CPU time, and under callgrind
   (--collect-atstart=no) the only code counted, so that its total over a
   row run with --iterations=N, divided by the operations, is instructions
   per operation. */
inline uint64_t timed_begin() {
    uint64_t t = cpu_ns();
    TL_BENCH_COLLECT();
    return t;
}
inline uint64_t timed_end() {
    TL_BENCH_COLLECT();
    return cpu_ns();
}

inline void report(benchmark::State &st, uint64_t ops, uint64_t ns) {
    if (ops == 0 || ns == 0) return;
    st.counters["ns_per_op"] = benchmark::Counter((double)ns / (double)ops);
    st.counters["items_per_second"] = benchmark::Counter((double)ops * 1e9 / (double)ns);
}

template <class Ops>
bool open_ok(benchmark::State &st, Ops &ops) {
    if (ops.ok()) return true;
    st.SkipWithError(ops.error().c_str());
    return false;
}

template <class Ops>
void bm_start_stop(benchmark::State &st, const std::string &variant) {
    size_t n = (size_t)st.range(0);
    Population p = make_population(n, (Deadlines)st.range(1));
    Ops ops(variant.c_str());
    if (!open_ok(st, ops)) return;
    Live<Ops> live(ops, p.initial);
    typename Ops::Timer fresh;
    ops.init(fresh);
    size_t i = 0;
    uint64_t c0 = timed_begin();
    for (auto _ : st) {
        ops.start(fresh, p.delay[i++ & p.mask]);
        ops.stop(fresh);
    }
    report(st, st.iterations(), timed_end() - c0);
    ops.close(&fresh, 1);
}

template <class Ops>
void bm_restart(benchmark::State &st, const std::string &variant) {
    size_t n = (size_t)st.range(0);
    Population p = make_population(n, (Deadlines)st.range(1));
    Ops ops(variant.c_str());
    if (!open_ok(st, ops)) return;
    Live<Ops> live(ops, p.initial);
    size_t i = 0;
    uint64_t c0 = timed_begin();
    for (auto _ : st) {
        size_t k = i++ & p.mask;
        ops.restart(live[p.victim[k]], p.delay[k]);
    }
    report(st, st.iterations(), timed_end() - c0);
}

template <class Ops>
void bm_cancel(benchmark::State &st, const std::string &variant) {
    size_t n = (size_t)st.range(0);
    Population p = make_population(n, (Deadlines)st.range(1));
    Ops ops(variant.c_str());
    if (!open_ok(st, ops)) return;
    Live<Ops> live(ops, p.initial);
    std::vector<uint32_t> order(n);
    std::iota(order.begin(), order.end(), 0u);
    Rng rng(n);
    size_t batch = std::max<size_t>(1, std::min<size_t>(n / 2, 8192));
    size_t pos = n, ring = 0;
    uint64_t ops_done = 0, ns = 0;
    for (auto _ : st) {
        if (pos + batch > n) { /* a fresh random order, so every timer is live again */
            for (size_t i = n - 1; i > 0; --i) std::swap(order[i], order[rng.below(i + 1)]);
            pos = 0;
        }
        uint64_t c0 = timed_begin();
        for (size_t j = 0; j < batch; ++j) ops.stop(live[order[pos + j]]);
        uint64_t c1 = timed_end();
        for (size_t j = 0; j < batch; ++j)
            ops.start(live[order[pos + j]], p.delay[ring++ & p.mask]);
        pos += batch;
        st.SetIterationTime((double)(c1 - c0) / 1e9);
        ops_done += batch;
        ns += c1 - c0;
    }
    report(st, ops_done, ns);
}

template <class Ops>
void bm_expire(benchmark::State &st, const std::string &variant) {
    size_t n = (size_t)st.range(0);
    Deadlines d = (Deadlines)st.range(1);
    Population p = make_population(n, kRandom, 0, kExpireWindow);
    if (d == kEqual) std::fill(p.initial.begin(), p.initial.end(), kExpireWindow);
    if (d == kBatch) /* batches of 256 starts, spread over the window */
        for (size_t k = 0; k < n; ++k)
            p.initial[k] = (k / kBatchSize) * kBatchSize * kExpireWindow / n;
    if (d == kInterleaved) {
        Rng rng(0x696e746572ull ^ n);
        for (size_t k = 0; k < n; ++k)
            p.initial[k] =
                rng.below(kInterleavedDeadlines) * kExpireWindow / (kInterleavedDeadlines - 1);
    }
    /* at[k]: where in memory the k-th timer started lives. */
    std::vector<uint32_t> at(n);
    std::iota(at.begin(), at.end(), 0u);
    if ((Layout)st.range(2) == kShuffled) {
        Rng rng(0x6c61796f7574ull ^ n);
        for (size_t i = n - 1; i > 0; --i) std::swap(at[i], at[rng.below(i + 1)]);
    }
    Ops ops(variant.c_str());
    if (!open_ok(st, ops)) return;
    std::unique_ptr<typename Ops::Timer[]> timers(new typename Ops::Timer[n]);
    for (size_t i = 0; i < n; ++i) ops.init(timers[i]);
    uint64_t ops_done = 0, ns = 0, runs = 0;
    for (auto _ : st) {
        ops.fired = 0;
        ops.update_time();
        for (size_t k = 0; k < n; ++k) ops.start(timers[at[k]], p.initial[k]);
        /* Every deadline has passed by every library's reckoning: the window,
           plus libuv's whole-ms truncation and libevent's 4 ms coarse clock. */
        uint64_t due = mono_ns() + kExpireWindow + 10 * kMs;
        timespec ts{(time_t)(due / kSec), (long)(due % kSec)};
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) != 0) {
        }
        /* As many non-blocking iterations as the library needs: tickloop
           bounds the callbacks of one iteration (max_timers_per_iteration,
           65536 by default) so that I/O is not starved; the peers fire all
           due timers in one. A run that fires nothing ends the batch. */
        uint64_t c0 = timed_begin();
        for (uint64_t before = ~0ull; ops.fired < n && ops.fired != before;) {
            before = ops.fired;
            ops.run_nowait();
            ++runs;
        }
        uint64_t c1 = timed_end();
        st.SetIterationTime((double)(c1 - c0) / 1e9);
        if (ops.fired != n) {
            for (size_t i = 0; i < n; ++i) ops.stop(timers[i]);
            st.SkipWithError(
                ("fired " + std::to_string(ops.fired) + " of " + std::to_string(n)).c_str());
            break;
        }
        ops_done += n;
        ns += c1 - c0;
    }
    ops.close(timers.get(), n);
    report(st, ops_done, ns);
    st.counters["runs_per_batch"] =
        benchmark::Counter((double)runs / (double)std::max<int64_t>(1, st.iterations()));
}

/* The packet handler's work on its connection before it restarts the
   timeout: reading the connection brings the timer handle, which the
   connection embeds, into the cache. */
template <class Timer>
inline void touch(const Timer &t) {
    const unsigned char *b = reinterpret_cast<const unsigned char *>(&t);
    unsigned sum = 0;
    for (size_t off = 0; off < sizeof(Timer); off += 64) sum += b[off];
    sum += b[sizeof(Timer) - 1];
    benchmark::DoNotOptimize(sum);
}

inline constexpr size_t kHeartbeatBatch = 256;

template <class Ops>
void bm_heartbeat(benchmark::State &st, const std::string &variant) {
    size_t n = (size_t)st.range(0);
    constexpr uint64_t kIdle = 30 * kSec;
    /* Connections were opened over the last idle period: staggered deadlines. */
    Population p = make_population(n, kRandom, 0, kIdle);
    Ops ops(variant.c_str());
    if (!open_ok(st, ops)) return;
    Live<Ops> live(ops, p.initial);
    ops.fired = 0;
    size_t ring = 0;
    uint64_t ops_done = 0, ns = 0;
    uint32_t batch[kHeartbeatBatch];
    for (auto _ : st) {
        for (uint32_t &v : batch) {
            v = p.victim[ring++ & p.mask];
            touch(live[v]);
        }
        uint64_t c0 = cpu_ns();
        for (uint32_t v : batch) ops.restart(live[v], kIdle);
        uint64_t c1 = cpu_ns();
        ops.run_nowait();
        st.SetIterationTime((double)(c1 - c0) / 1e9);
        ops_done += kHeartbeatBatch;
        ns += c1 - c0;
    }
    report(st, ops_done, ns);
    st.counters["fired"] = benchmark::Counter((double)ops.fired);
}

template <class Ops>
void bm_delayed(benchmark::State &st, const std::string &variant) {
    size_t n = (size_t)st.range(0);
    constexpr uint64_t kDelay = 1800 * kSec;
    Ops ops(variant.c_str());
    if (!open_ok(st, ops)) return;
    std::unique_ptr<typename Ops::Timer[]> timers(new typename Ops::Timer[n]);
    for (size_t i = 0; i < n; ++i) ops.init(timers[i]);
    /* Which tasks get cancelled, and when: a random 99%, each soon after
       creation (a fixed lag of 64 creations), the 1% survivors at the end. */
    Rng rng(n);
    std::vector<uint8_t> cancelled(n);
    for (auto &c : cancelled) c = rng.below(100) != 0;
    constexpr size_t kLag = 64;
    uint64_t ops_done = 0, ns = 0;
    for (auto _ : st) {
        uint64_t c0 = cpu_ns();
        for (size_t i = 0; i < n; ++i) {
            ops.start(timers[i], kDelay);
            if (i >= kLag && cancelled[i - kLag]) ops.stop(timers[i - kLag]);
            if ((i & 255) == 255) ops.run_nowait();
        }
        for (size_t i = n > kLag ? n - kLag : 0; i < n; ++i)
            if (cancelled[i]) ops.stop(timers[i]);
        uint64_t c1 = cpu_ns();
        for (size_t i = 0; i < n; ++i) ops.stop(timers[i]); /* the survivors, untimed */
        st.SetIterationTime((double)(c1 - c0) / 1e9);
        ops_done += n;
        ns += c1 - c0;
    }
    ops.close(timers.get(), n);
    report(st, ops_done, ns);
}

/* --iterations=N: every row runs N iterations (0: each its own count). */
inline int64_t fixed_iterations = 0;

/* Sizes: 1e3 - 1e7, the largest left out by --max-n (1e7 live timers take
   0.6-1.5 GB and several seconds to build per row). */
inline std::vector<int64_t> sizes(int64_t max_n) {
    std::vector<int64_t> s;
    for (int64_t n = 1000; n <= 10000000 && n <= max_n; n *= 10) s.push_back(n);
    return s;
}

/* Google Benchmark finds an iteration count by calling a benchmark again and
   again with more iterations; each call rebuilds the population, which at 1e6
   and 1e7 live timers costs far more than the measurement. Those sizes get a
   fixed count instead (0: let Google Benchmark choose). */
inline int64_t op_iterations(int64_t n) {
    return n >= 1000000 ? 1 << 22 : 0;
}
inline int64_t cancel_iterations(int64_t n) { /* batches of up to 8192 */
    return n >= 1000000 ? 128 : 0;
}
/* Each expire iteration sleeps ~30 ms, which calibration would multiply. */
inline int64_t expire_iterations(int64_t n) {
    return n <= 1000 ? 50 : n <= 10000 ? 20 : n <= 100000 ? 8 : n <= 1000000 ? 3 : 1;
}

/* Registers every benchmark above for one library (label: the row name, e.g.
   "heap4" or "libev"; variant: passed to the adapter's constructor). The
   tie rows (equal:1 all equal, equal:2 batches of 256, equal:3 interleaved)
   stop at 1e6: they are the heaps' tie case, not a scaling curve. */
template <class Ops>
void register_all(const std::string &label, const std::string &variant, int64_t max_n) {
    using Fn = void (*)(benchmark::State &, const std::string &);
    auto one = [&](const char *op, Fn fn, std::vector<int64_t> args, int64_t iterations,
                   bool manual) {
        auto *b =
            benchmark::RegisterBenchmark((std::string(op) + "/" + label).c_str(), fn, variant);
        b->Args(args);
        if (args.size() == 3)
            b->ArgNames({"n", "equal", "layout"});
        else
            b->ArgNames({"n", "equal"});
        if (fixed_iterations) iterations = fixed_iterations;
        if (iterations) b->Iterations(iterations);
        if (manual) b->UseManualTime();
    };
    for (int64_t n : sizes(max_n)) {
        for (int64_t d : {kRandom, kEqual, kBatch, kInterleaved}) {
            if (d != kRandom && n > 1000000) continue;
            one("start_stop", bm_start_stop<Ops>, {n, d}, op_iterations(n), false);
            one("restart", bm_restart<Ops>, {n, d}, op_iterations(n), false);
            one("cancel", bm_cancel<Ops>, {n, d}, cancel_iterations(n), true);
            for (int64_t layout : {kStartOrder, kShuffled})
                one("expire", bm_expire<Ops>, {n, d, layout}, expire_iterations(n), true);
        }
    }
    benchmark::RegisterBenchmark(("heartbeat/" + label).c_str(), bm_heartbeat<Ops>, variant)
        ->Arg(1000000)
        ->ArgNames({"n"})
        ->Iterations(8192)
        ->UseManualTime();
    benchmark::RegisterBenchmark(("delayed/" + label).c_str(), bm_delayed<Ops>, variant)
        ->Arg(1000000)
        ->ArgNames({"n"})
        ->Iterations(3)
        ->UseManualTime();
}

/* Takes our own flags out of argv before Google Benchmark parses the rest:
   --max-n=N (default 1e7), and --iterations=N, which runs every row exactly
   N times (for callgrind: see timed_begin). */
inline int64_t take_max_n(int &argc, char **argv) {
    int64_t max_n = 10000000;
    int out = 1;
    for (int i = 1; i < argc; ++i) {
        if (std::strncmp(argv[i], "--max-n=", 8) == 0)
            max_n = (int64_t)std::strtod(argv[i] + 8, nullptr);
        else if (std::strncmp(argv[i], "--iterations=", 13) == 0)
            fixed_iterations = (int64_t)std::strtod(argv[i] + 13, nullptr);
        else
            argv[out++] = argv[i];
    }
    argc = out;
    return max_n;
}

} // namespace bench

#endif /* TICKLOOP_BENCHES_TIMER_OPS_H */
