/* SPDX-License-Identifier: MIT */
/*
 * bench-cascade-burst: the delayed-tasks workload of bench-timer-peers
 * (1,000,000 timers with delays uniform in [3.1 s, 5 s], 90% cancelled in
 * random order, 100,000 fire; the same delays and cancel order, from
 * delayed_tasks.h) driven through a backend's vtable the way the
 * loop drives it, with simulated time: the "loop" wakes at next_expiry() and
 * pops everything due. So what a wheel does in one wake-up is measured
 * without the machine's scheduler in the way, and the counts do not depend
 * on the load.
 *
 * Counters per backend:
 * - wakeups: pop passes (times next_expiry was reached);
 * - max_moved: the most timers hwheel's cascades re-filed in one wake-up
 *   (tl_detail_hwheel_cascades; 0 on the other backends): a wake-up that
 *   re-files many timers delays every timer due in it;
 * - max_wakeup_us and p99_late_us: the CPU time of the costliest wake-up,
 *   and the 99th percentile over the fired timers of (simulated now minus
 *   deadline) plus the CPU time spent in its wake-up before it was popped,
 *   which is the lateness the workload's timers would see on an idle
 *   machine. Both are times: compare them within one run.
 *
 *   bench-cascade-burst [--benchmark_filter=hwheel]
 */
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <vector>

#include <benchmark/benchmark.h>
#include <tickloop/timer_backend.h>

#include "delayed_tasks.h"
#include "latency.h"
#include "timers/timers.h"

namespace {

using namespace bench;

/* An arbitrary start, not aligned to any level of the wheels. */
constexpr uint64_t kStart = 987654321012345ull;

struct Result {
    uint64_t wakeups = 0, max_moved = 0, max_wakeup_ns = 0, fired = 0;
    std::vector<uint64_t> late;
};

Result run_once(const tl_timer_backend *b, bool hwheel) {
    tl_timer_config cfg{1000000, 4096}; /* the loop's defaults */
    const size_t n = kDelayedN;
    std::vector<tl_timer> timers(n);
    std::vector<uint32_t> order(n);
    Rng rng(kDelayedSeed);
    uint64_t now = kStart;
    void *self = b->create(&cfg, now);
    Result r;
    if (!self) return r;
    for (size_t i = 0; i < n; ++i) {
        std::memset(&timers[i], 0, sizeof timers[i]);
        timers[i].deadline = now + kDelayMin + rng.below(kDelaySpan);
        if (b->insert(self, &timers[i]) != 0) return r;
    }
    std::iota(order.begin(), order.end(), 0u);
    for (size_t i = n - 1; i > 0; --i) std::swap(order[i], order[rng.below(i + 1)]);
    for (size_t k = 0; k < n - kDelayedSurvivors; ++k) b->remove(self, &timers[order[k]]);
    r.late.reserve(kDelayedSurvivors);
    uint64_t cascades = hwheel ? tl_detail_hwheel_cascades(self) : 0;
    while (b->count(self)) {
        uint64_t next = b->next_expiry(self);
        if (next > now) now = next;
        uint64_t t0 = cpu_ns();
        while (tl_timer *t = b->pop_expired(self, now)) {
            r.late.push_back(now - t->deadline + (cpu_ns() - t0));
            ++r.fired;
        }
        uint64_t spent = cpu_ns() - t0;
        ++r.wakeups;
        r.max_wakeup_ns = std::max(r.max_wakeup_ns, spent);
        if (hwheel) {
            uint64_t c = tl_detail_hwheel_cascades(self);
            r.max_moved = std::max(r.max_moved, c - cascades);
            cascades = c;
        }
    }
    b->destroy(self);
    return r;
}

void BM_delayed(benchmark::State &state, const char *name) {
    const tl_timer_backend *b = tl_timer_backend_find(name);
    if (!b) {
        state.SkipWithError("no such backend");
        return;
    }
    bool hwheel = std::strcmp(name, "hwheel") == 0;
    Result r;
    for (auto _ : state) r = run_once(b, hwheel);
    if (r.fired != kDelayedSurvivors) {
        state.SkipWithError("lost or extra timers");
        return;
    }
    std::sort(r.late.begin(), r.late.end());
    state.counters["wakeups"] = double(r.wakeups);
    state.counters["max_moved"] = double(r.max_moved);
    state.counters["max_wakeup_us"] = double(r.max_wakeup_ns) / 1e3;
    state.counters["p99_late_us"] = double(r.late[r.late.size() * 99 / 100]) / 1e3;
    state.counters["max_late_us"] = double(r.late.back()) / 1e3;
}

BENCHMARK_CAPTURE(BM_delayed, heap4, "heap4")->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_delayed, wheel, "wheel")->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_delayed, hwheel, "hwheel")->Iterations(1)->Unit(benchmark::kMillisecond);

} // namespace

BENCHMARK_MAIN();
