// SPDX-License-Identifier: MIT
/*
 * bench-leeway: what timer leeway buys (tl_timer_set_leeway), in wake-ups and
 * CPU, measured on a real loop with the real clock. Google Benchmark runs
 * each case once per repetition; the figures are its counters, not its
 * times:
 *
 * - LeewayWakeups/<timers>/<leeway %>/<scale ‰>: 10,000 one-shot timers
 *   started at once with delays uniform in [10 ms, 10 s] x scale (fixed
 *   seed) and leeway = that percentage of each delay. Counters: `wakeups`
 *   (iterations that ran a timer), `optimum` (the fewest instants that stab
 *   every window [deadline, deadline + leeway], by the greedy on window
 *   ends: a lower bound for any loop), `vs_optimum` = wakeups / optimum,
 *   and `late_max_us` (the worst firing after its window's end, on the
 *   loop's clock: loop latency, plus up to a tick on the wheels). Targets:
 *   vs_optimum <= 1.1, and 5x fewer wake-ups than leeway 0. Scale 1000 is
 *   the case they are set for (10 s a run); 100 a quick one. <timers> is
 *   an index into tl_timer_backend_names(): every registered backend.
 * - GoCase/<lib>/<leeway %>: the Go runtime's many-short-timers case
 *   (golang.org/issue/53824): 50 timers, timer i re-armed
 *   from its own callback every 20 + 20i us (20 us - 1000 us), for 2 s.
 *   Counters: `wakeups_per_s` and `cpu_ns_per_fire` (process CPU over timer
 *   callbacks), for tickloop (heap4, hwheel) at leeway 0 and 10%, beside
 *   libev and libuv, which have no leeway. libuv counts in whole ms: its
 *   timers are rounded up to 1 ms, so it wakes less and fires less often:
 *   compare its CPU per fire, not its wake-ups.
 * - HwheelExpiry/<leeway %>: the hwheel backend alone (its vtable, driven
 *   with explicit now values, no loop): 1,000,000 timers with delays
 *   log-uniform in [10 ms, 1 h] (fixed seed) at 1 ms ticks, drained by
 *   waking at next_expiry() rounded up to the tick and popping until NULL
 *   (waking at each exact deadline instead would walk a dense tick once per
 *   timer in it, which no loop does: its wake-ups take longer). Timed:
 *   the drain only; `ns_per_timer` is its CPU time over the timers.
 *   Counters: `cascades_per_timer` (timers re-filed by cascades, from the
 *   hidden tl_detail_hwheel_cascades) and `wakeups`. Leeway 0 is the
 *   baseline; the target is fewer cascades and less time per timer.
 *
 * The I/O backend is TICKLOOP_IO's (default: the library's choice).
 */
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <ctime>
#include <random>
#include <string>
#include <vector>

#include <tickloop/tickloop.h>
#include <tickloop/timer_backend.h>

#include "latency.h"
#include "ops_tickloop.h"
#include "timers/timers.h"

#if TL_BENCH_HAVE_LIBEV
#include <ev.h>
#endif
#if TL_BENCH_HAVE_LIBUV
#include "ops_libuv.h"
#endif

namespace {

using bench::kMs;

/* Every registered timer backend, in the registry's order. */
std::vector<const char *> backend_names() {
    std::vector<const char *> names(tl_timer_backend_names(nullptr, 0));
    tl_timer_backend_names(names.data(), names.size());
    return names;
}

/* The benchmark argument that picks a backend: its index in backend_names(). */
std::vector<int64_t> backend_indices() {
    std::vector<int64_t> indices(backend_names().size());
    for (size_t i = 0; i < indices.size(); ++i) indices[i] = (int64_t)i;
    return indices;
}

/* Process CPU time: the callbacks' cost, whichever thread a library uses. */
uint64_t cpu_ns() {
    return bench::clock_ns(CLOCK_PROCESS_CPUTIME_ID);
}

/* The fewest points that stab every window [lo, hi]: sort by hi, take the
   earliest hi, drop every window it stabs, repeat. */
uint64_t stabbing_optimum(std::vector<std::pair<uint64_t, uint64_t>> w) {
    std::sort(w.begin(), w.end(), [](auto &a, auto &b) { return a.second < b.second; });
    uint64_t points = 0, last = 0;
    bool any = false;
    for (auto &[lo, hi] : w) {
        if (any && lo <= last) continue; /* hi >= last too: stabbed */
        last = hi;
        any = true;
        ++points;
    }
    return points;
}

struct WakeTimer {
    tl_timer t;
    uint64_t leeway;
    int64_t *late_max;
};

void wake_cb(tl_loop *loop, tl_timer *t) {
    auto *w = static_cast<WakeTimer *>(t->data);
    int64_t beyond = (int64_t)(tl_now(loop) - t->deadline) - (int64_t)w->leeway;
    if (beyond > *w->late_max) *w->late_max = beyond;
}

void LeewayWakeups(benchmark::State &state) {
    const std::string timers = backend_names()[(size_t)state.range(0)];
    const uint64_t pct = (uint64_t)state.range(1), scale = (uint64_t)state.range(2);
    constexpr int kN = 10000;
    double wakeups = 0, optimum = 0, late_max = 0;
    for (auto _ : state) {
        /* The I/O backend is TICKLOOP_IO's (TL_IO_AUTO). */
        bench::TickloopOps ops(timers.c_str(), TL_IO_AUTO);
        if (!ops.ok()) {
            state.SkipWithError("tl_loop_new failed");
            return;
        }
        tl_loop *loop = ops.loop;
        std::mt19937_64 rng(42);
        std::uniform_int_distribution<uint64_t> delay(10 * kMs, 10000 * kMs);
        std::vector<WakeTimer> ts(kN);
        std::vector<std::pair<uint64_t, uint64_t>> windows;
        int64_t worst = INT64_MIN;
        tl_update_time(loop);
        for (WakeTimer &w : ts) {
            uint64_t d = delay(rng) * scale / 1000;
            tl_timer_init(&w.t, wake_cb, &w);
            tl_timer_set_leeway(&w.t, d * pct / 100);
            w.leeway = tl_timer_leeway(&w.t);
            w.late_max = &worst;
            tl_timer_start(loop, &w.t, d, 0);
            windows.emplace_back(w.t.deadline, w.t.deadline + w.leeway);
        }
        tl_loop_run(loop, TL_RUN_DEFAULT);
        tl_loop_stats st;
        tl_loop_stats_get(loop, &st);
        wakeups = (double)st.timer_wakeups;
        optimum = (double)stabbing_optimum(windows);
        late_max = (double)worst / 1000.0;
    }
    state.counters["wakeups"] = wakeups;
    state.counters["optimum"] = optimum;
    state.counters["vs_optimum"] = wakeups / optimum;
    state.counters["late_max_us"] = late_max;
}

/* ---------------------------------------------------------------------- */
/* Go's case                                                              */
/* ---------------------------------------------------------------------- */

constexpr int kGoTimers = 50;
constexpr uint64_t kGoRunNs = 2000 * kMs;

uint64_t go_delay_ns(int i) {
    return (20 + (uint64_t)i * 980 / (kGoTimers - 1)) * 1000;
}

struct GoTimer {
    tl_timer t;
    uint64_t delay;
    uint64_t *fires;
    uint64_t end;
};

void go_cb(tl_loop *loop, tl_timer *t) {
    auto *g = static_cast<GoTimer *>(t->data);
    ++*g->fires;
    if (tl_now(loop) < g->end) tl_timer_start(loop, t, g->delay, 0);
}

void report_go(benchmark::State &state, uint64_t wakeups, uint64_t fires, uint64_t cpu,
               uint64_t wall) {
    state.counters["wakeups_per_s"] = (double)wakeups * 1e9 / (double)wall;
    state.counters["fires"] = (double)fires;
    state.counters["cpu_ns_per_fire"] = fires ? (double)cpu / (double)fires : 0;
}

void GoCaseTickloop(benchmark::State &state) {
    const char *timers = state.range(0) ? "hwheel" : "heap4";
    const uint64_t pct = (uint64_t)state.range(1);
    for (auto _ : state) {
        bench::TickloopOps ops(timers, TL_IO_AUTO);
        if (!ops.ok()) {
            state.SkipWithError("tl_loop_new failed");
            return;
        }
        tl_loop *loop = ops.loop;
        GoTimer g[kGoTimers];
        uint64_t fires = 0;
        tl_update_time(loop);
        uint64_t start = tl_now(loop), cpu0 = cpu_ns();
        for (int i = 0; i < kGoTimers; ++i) {
            g[i].delay = go_delay_ns(i);
            g[i].fires = &fires;
            g[i].end = start + kGoRunNs;
            tl_timer_init(&g[i].t, go_cb, &g[i]);
            tl_timer_set_leeway(&g[i].t, g[i].delay * pct / 100);
            tl_timer_start(loop, &g[i].t, g[i].delay, 0);
        }
        tl_loop_run(loop, TL_RUN_DEFAULT);
        uint64_t cpu = cpu_ns() - cpu0, wall = tl_clock_now(TL_CLOCK_MONOTONIC) - start;
        tl_loop_stats st;
        tl_loop_stats_get(loop, &st);
        report_go(state, st.timer_wakeups, fires, cpu, wall);
    }
}

#if TL_BENCH_HAVE_LIBEV
struct EvGo {
    ev_timer w;
    double delay;
    uint64_t *fires;
    double end;
};

void ev_go_cb(struct ev_loop *loop, ev_timer *w, int) {
    auto *g = reinterpret_cast<EvGo *>(w);
    ++*g->fires;
    if (ev_now(loop) < g->end) {
        ev_timer_set(w, g->delay, 0);
        ev_timer_start(loop, w);
    }
}

void GoCaseLibev(benchmark::State &state) {
    for (auto _ : state) {
        struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
        EvGo g[kGoTimers];
        uint64_t fires = 0;
        ev_now_update(loop);
        uint64_t start = tl_clock_now(TL_CLOCK_MONOTONIC), cpu0 = cpu_ns();
        for (int i = 0; i < kGoTimers; ++i) {
            g[i].delay = (double)go_delay_ns(i) / 1e9;
            g[i].fires = &fires;
            g[i].end = ev_now(loop) + (double)kGoRunNs / 1e9;
            ev_timer_init(&g[i].w, ev_go_cb, g[i].delay, 0);
            ev_timer_start(loop, &g[i].w);
        }
        ev_run(loop, 0);
        uint64_t cpu = cpu_ns() - cpu0, wall = tl_clock_now(TL_CLOCK_MONOTONIC) - start;
        uint64_t wakeups = ev_iteration(loop);
        ev_loop_destroy(loop);
        report_go(state, wakeups, fires, cpu, wall);
    }
}
#endif

#if TL_BENCH_HAVE_LIBUV
struct UvGo {
    uv_timer_t t;
    uint64_t delay_ms;
    uint64_t *fires;
    uint64_t end_ms;
};

void uv_go_cb(uv_timer_t *t) {
    auto *g = reinterpret_cast<UvGo *>(t);
    ++*g->fires;
    if (uv_now(t->loop) < g->end_ms) uv_timer_start(t, uv_go_cb, g->delay_ms, 0);
}

void uv_count(uv_prepare_t *p) {
    ++*static_cast<uint64_t *>(p->data);
}

void GoCaseLibuv(benchmark::State &state) {
    for (auto _ : state) {
        uv_loop_t loop;
        uv_loop_init(&loop);
        UvGo g[kGoTimers];
        uint64_t fires = 0, iterations = 0;
        uv_prepare_t prep;
        uv_prepare_init(&loop, &prep);
        prep.data = &iterations;
        uv_prepare_start(&prep, uv_count);
        uv_unref(reinterpret_cast<uv_handle_t *>(&prep));
        uv_update_time(&loop);
        uint64_t start = tl_clock_now(TL_CLOCK_MONOTONIC), cpu0 = cpu_ns();
        for (int i = 0; i < kGoTimers; ++i) {
            /* libuv counts in ms: rounded up, never shorter than asked. */
            g[i].delay_ms = bench::LibuvOps::to_ms(go_delay_ns(i));
            g[i].fires = &fires;
            g[i].end_ms = uv_now(&loop) + kGoRunNs / kMs;
            uv_timer_init(&loop, &g[i].t);
            uv_timer_start(&g[i].t, uv_go_cb, g[i].delay_ms, 0);
        }
        uv_run(&loop, UV_RUN_DEFAULT);
        uint64_t cpu = cpu_ns() - cpu0, wall = tl_clock_now(TL_CLOCK_MONOTONIC) - start;
        for (UvGo &x : g) uv_close(reinterpret_cast<uv_handle_t *>(&x.t), nullptr);
        uv_close(reinterpret_cast<uv_handle_t *>(&prep), nullptr);
        uv_run(&loop, UV_RUN_DEFAULT);
        uv_loop_close(&loop);
        report_go(state, iterations, fires, cpu, wall);
    }
}
#endif

} // namespace

BENCHMARK(LeewayWakeups)
    ->ArgNames({"timers", "leeway_pct", "scale_permille"})
    ->ArgsProduct({backend_indices(), {0, 10}, {100, 1000}})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(GoCaseTickloop)
    ->ArgNames({"hwheel", "leeway_pct"})
    ->ArgsProduct({{0, 1}, {0, 10}})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
#if TL_BENCH_HAVE_LIBEV
BENCHMARK(GoCaseLibev)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();
#endif
#if TL_BENCH_HAVE_LIBUV
BENCHMARK(GoCaseLibuv)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();
#endif

void HwheelExpiry(benchmark::State &state) {
    const uint64_t pct = uint64_t(state.range(0));
    constexpr size_t kTimers = 1000000;
    const tl_timer_backend *b = tl_timer_backend_find("hwheel");
    const tl_timer_config cfg{kMs, 4096};
    std::vector<tl_timer> timers(kTimers);
    std::vector<uint64_t> deadlines(kTimers);
    std::mt19937_64 rng(42);
    std::uniform_real_distribution<double> log_delay(std::log(10.0 * kMs), std::log(3600e9));
    const uint64_t start = 1000 * kMs;
    for (uint64_t &d : deadlines) d = start + uint64_t(std::exp(log_delay(rng)));
    uint64_t cascades = 0, wakeups = 0, popped = 0;
    for (auto _ : state) {
        state.PauseTiming();
        void *self = b->create(&cfg, start);
        for (size_t i = 0; i < kTimers; ++i) {
            timers[i] = tl_timer{};
            timers[i].deadline = deadlines[i];
            timers[i].flags = tl::detail::leeway_bits((deadlines[i] - start) * pct / 100);
            b->insert(self, &timers[i]);
        }
        state.ResumeTiming();
        uint64_t now = start;
        while (b->count(self)) {
            uint64_t next = (b->next_expiry(self) + kMs - 1) / kMs * kMs;
            if (next > now) now = next;
            ++wakeups;
            while (tl_timer *t = b->pop_expired(self, now)) {
                benchmark::DoNotOptimize(t);
                ++popped;
            }
        }
        state.PauseTiming();
        cascades += tl_detail_hwheel_cascades(self);
        b->destroy(self);
        state.ResumeTiming();
    }
    const double runs = double(state.iterations());
    state.counters["cascades_per_timer"] = double(cascades) / runs / kTimers;
    state.counters["wakeups"] = double(wakeups) / runs;
    state.counters["ns_per_timer"] = benchmark::Counter(
        double(popped), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

BENCHMARK(HwheelExpiry)
    ->ArgName("leeway_pct")
    ->Arg(0)
    ->Arg(1)
    ->Arg(10)
    ->Iterations(3)
    ->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
