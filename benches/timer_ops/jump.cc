/* SPDX-License-Identifier: MIT */
/*
 * jump.cc: bench-jump, the cost of a large jump of now (the loop was blocked,
 * the machine suspended) for every registered timer backend, driven through
 * its vtable as the loop drives it.
 *
 * N timers are armed with deadlines uniform in (start, start + span]; then now
 * jumps to start + span and pop_expired(now) drains them all. The timed region
 * is the drain alone (the population is built untimed, outside the loop of
 * iterations); ns_per_pop is its thread CPU time over N. A wheel must skip
 * empty slots through its bitmaps: a drain that stepped tick by tick would
 * cost span / tick (2.6e9 ticks for 30 days of 1 ms) and show here at once.
 *
 * Timers are laid out in memory in start order; deadlines are random, so the
 * drain visits them in random memory order (the cache-hostile case).
 *
 * Usage: bench-jump [Google Benchmark flags]
 */
#include <cstdint>
#include <ctime>
#include <memory>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include <tickloop/timer_backend.h>

namespace {

constexpr uint64_t kHour = 3600ull * 1000000000ull;
constexpr uint64_t kDay = 24 * kHour;
/* A start that is large and not on a tick, like a CLOCK_MONOTONIC reading. */
constexpr uint64_t kStart = 123456789012345ull;

uint64_t thread_cpu_ns() {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

/* xorshift64*: the same deadlines for every backend. */
struct Rng {
    uint64_t s;
    uint64_t next() {
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        return s * 2685821657736338717ull;
    }
};

void bm_jump(benchmark::State &st, const tl_timer_backend *b) {
    const size_t n = size_t(st.range(0));
    const uint64_t span = uint64_t(st.range(1)) * kHour;
    std::unique_ptr<tl_timer[]> timers(new tl_timer[n]);
    std::vector<uint64_t> deadlines(n);
    Rng rng{0x6a756d70ull ^ n ^ span};
    for (uint64_t &d : deadlines) d = kStart + 1 + rng.next() % span;
    const tl_timer_config cfg{1000000, 4096}; /* the loop's defaults: 1 ms, 4096 slots */
    uint64_t cpu = 0, pops = 0;
    for (auto _ : st) {
        st.PauseTiming(); /* once per iteration, around a whole population */
        void *self = b->create(&cfg, kStart);
        if (!self) {
            st.SkipWithError("create failed");
            return;
        }
        for (size_t i = 0; i < n; ++i) {
            timers[i] = tl_timer{};
            timers[i].deadline = deadlines[i];
            if (b->insert(self, &timers[i]) != 0) {
                st.SkipWithError("insert failed");
                b->destroy(self);
                return;
            }
        }
        st.ResumeTiming();
        uint64_t t0 = thread_cpu_ns();
        size_t got = 0;
        while (b->pop_expired(self, kStart + span)) ++got;
        cpu += thread_cpu_ns() - t0;
        pops += got;
        st.PauseTiming();
        if (got != n) st.SkipWithError("the drain lost timers");
        b->destroy(self);
        st.ResumeTiming();
    }
    if (pops) st.counters["ns_per_pop"] = double(cpu) / double(pops);
}

} // namespace

int main(int argc, char **argv) {
    const char *names[16];
    size_t total = tl_timer_backend_names(names, 16);
    for (size_t i = 0; i < total && i < 16; ++i) {
        const tl_timer_backend *b = tl_timer_backend_find(names[i]);
        std::string name = names[i];
        for (int64_t hours : {int64_t(1), int64_t(30 * 24)}) {
            /* The single-level wheel walks a slot's timers of later rounds
               on every revolution it drains (its documented cost: a jump
               costs what running through the same time would): 1e6 timers
               over one hour take 15 s of CPU there, so it gets 1e5. */
            int64_t n = name == "wheel" ? 100000 : 1000000;
            benchmark::RegisterBenchmark(("jump/" + name).c_str(), bm_jump, b)
                ->Args({n, hours})
                ->ArgNames({"n", "hours"})
                ->Iterations(3)
                ->Unit(benchmark::kMillisecond);
        }
    }
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
