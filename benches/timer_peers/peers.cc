/* SPDX-License-Identifier: MIT */
/*
 * bench-timer-peers: two timer workloads, written once over the adapters of
 * benches/adapters/ops.h, for tickloop's four timer backends (with their defaults and
 * with a 1 ms collect interval), libev and libuv. Peers.java (Netty's
 * HashedWheelTimer) and peers.go (Go's runtime timers) run the same
 * workloads from the same seeded generator and print the same line; run.sh
 * drives all of them and report.py makes the table and the plot.
 *
 *   delayed    Kafka's purgatory: 1,000,000 timers with delays uniform in
 *              [3.1 s, 5 s]; 90% of them are cancelled in random order (the
 *              cancel phase must end before the first deadline, so the fire
 *              count is exact), the other 100,000 fire. Phases: schedule,
 *              cancel, fire (a blocking run until all 100,000 have fired).
 *   heartbeat  1,000,000 timers of 30 s, then 10,000,000 restarts of random
 *              ones to 30 s again. A timer fires only if the restart phase
 *              outlasts 30 s and no restart reached it meanwhile (an idle
 *              connection timing out): `fired` counts those.
 *
 * The C/C++ loops run one non-blocking iteration every 256 operations of the
 * schedule, cancel and restart phases, as an application's loop would between
 * requests: it advances their cached time (Netty and Go read the clock on
 * every call) and is part of the measured cost.
 *
 * Per phase: process CPU (getrusage RUSAGE_SELF: user + sys of every thread,
 * so Netty's worker and Go's runtime threads count) and wall time. Bytes per
 * timer: the RSS growth over the schedule phase over N (the handle array is
 * allocated untouched before it, so the handles count, as the objects Netty
 * and Go allocate count for them). Lateness: CLOCK_MONOTONIC read in the
 * callback minus the deadline the library computed (tickloop: tl_timer
 * .deadline; libev: ev_timer.at; libuv: uv_now + due_in, whole ms); p50/p99
 * are nearest-rank over the 100,000 fires; `early` counts negative ones.
 * Wake-ups: voluntary context switches of the whole process over the fire
 * phase (getrusage ru_nvcsw: the sum over all threads, exited ones
 * included), counted the same way in Java and Go. due_ticks: the 1 ms ticks
 * (of CLOCK_MONOTONIC) that hold at least one surviving timer's deadline, so
 * wake-ups per such tick can be computed. ticks: 1 ms ticks elapsed over the
 * fire phase, for the wheels. tickloop also reports its loop's
 * timer_wakeups and iterations over the fire phase.
 *
 * Usage: bench-timer-peers WORKLOAD LIB   one run, one "peers ..." line
 *        bench-timer-peers                every workload and library once,
 *                                         each in a process of its own
 * LIB: heap2 heap4 wheel hwheel (defaults), heap2@1ms ... hwheel@1ms (1 ms
 * collect interval), libev, libuv. Each run takes 5-6 s of wall time
 * (delayed) or 2-4 s (heartbeat), most of it waiting.
 */
#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "delayed_tasks.h"
#include "latency.h"
#include "ops_tickloop.h"
#if TL_BENCH_HAVE_LIBEV
#include "ops_libev.h"
#endif
#if TL_BENCH_HAVE_LIBUV
#include "ops_libuv.h"
#endif

extern char **environ;

namespace {

using namespace bench;

/* The workloads' sizes and seeds (delayed tasks: delayed_tasks.h); Peers.java
   and peers.go use the same. */
constexpr size_t kHeartbeatN = 1000000;
constexpr size_t kRestarts = 10000000;
constexpr uint64_t kHeartbeat = 30 * kSec;
constexpr uint64_t kHeartbeatSeed = 0x68656172746265ull;
constexpr uint64_t kCollectInterval = 1 * kMs;
constexpr uint64_t kTick = 1 * kMs; /* tickloop's wheels' default tick */
constexpr size_t kIterationEvery = 256;

/* ------------------------------------------------------------------------ */
/* Process counters at phase boundaries                                     */
/* ------------------------------------------------------------------------ */

struct Snap {
    uint64_t wall, cpu, nvcsw, rss;
};

uint64_t rss_bytes() {
    FILE *f = std::fopen("/proc/self/statm", "r");
    unsigned long long size = 0, resident = 0;
    if (f) {
        if (std::fscanf(f, "%llu %llu", &size, &resident) != 2) resident = 0;
        std::fclose(f);
    }
    return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

Snap snap() {
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    auto ns = [](const timeval &tv) {
        return (uint64_t)tv.tv_sec * kSec + (uint64_t)tv.tv_usec * kUs;
    };
    return {mono_ns(), ns(ru.ru_utime) + ns(ru.ru_stime), (uint64_t)ru.ru_nvcsw, rss_bytes()};
}

/* The output: "peers key=value ..." on one line; "-" where a figure does not
   apply to the library. */
struct Line {
    std::string text = "peers";
    void add(const char *key, const std::string &v) {
        text += ' ';
        text += key;
        text += '=';
        text += v;
    }
    void add(const char *key, uint64_t v) { add(key, std::to_string(v)); }
    void add_phase(const char *name, const Snap &a, const Snap &b) {
        std::string k(name);
        add((k + "_cpu_ns").c_str(), b.cpu - a.cpu);
        add((k + "_wall_ns").c_str(), b.wall - a.wall);
    }
};

/* ------------------------------------------------------------------------ */
/* The adapters of ops.h with a callback that records when each timer fired  */
/* ------------------------------------------------------------------------ */

/* Fire times by timer index (the handles are one array); allocated and
   touched before the measured phases. */
template <class Timer>
struct FireLog {
    const Timer *base = nullptr;
    std::vector<uint64_t> at;
    uint64_t count = 0;
    void record(const Timer *t) {
        at[(size_t)(t - base)] = mono_ns();
        ++count;
    }
};

/* The "1 ms collect interval" variant, in one place: the loop option
   collect_interval_ns (libev's timeout collect interval), which lends every
   timer without a leeway of its own that leeway. The base adapter made its
   loop with the defaults; this replaces it by one with the same options
   plus the interval. */
void use_collect_interval(TickloopOps &ops, uint64_t ns) {
    if (!ns || !ops.loop) return;
    tl_loop_free(ops.loop);
    ops.loop = nullptr;
    tl_loop_options opts;
    tl_loop_options_init(&opts);
    opts.io = TL_IO_EPOLL;
    opts.timers = ops.backend.c_str();
    opts.collect_interval_ns = ns;
    ops.err = tl_loop_new(&ops.loop, &opts);
    if (ops.err) ops.loop = nullptr;
}

struct TickloopPeer : TickloopOps {
    FireLog<tl_timer> log;
    uint64_t collect_ns;
    TickloopPeer(const char *timers, uint64_t collect) : TickloopOps(timers), collect_ns(collect) {
        use_collect_interval(*this, collect);
    }
    static void on_fire(tl_loop *, tl_timer *t) {
        static_cast<TickloopPeer *>(t->data)->log.record(t);
    }
    void init(Timer &t) { tl_timer_init(&t, on_fire, this); }
    static uint64_t deadline(const Timer &t) { return t.deadline; }
    std::string label() const {
        return collect_ns ? backend + "@" + std::to_string(collect_ns / kMs) + "ms" : backend;
    }
    bool ticked() const { return backend == "wheel" || backend == "hwheel"; }
    /* The loop's own counters over the fire phase. */
    tl_loop_stats before{};
    void stats_begin() { tl_loop_stats_get(loop, &before); }
    void stats_end(Line &line) const {
        tl_loop_stats after;
        tl_loop_stats_get(loop, &after);
        line.add("loop_timer_wakeups", after.timer_wakeups - before.timer_wakeups);
        line.add("loop_iterations", after.iterations - before.iterations);
    }
};

/* What the peers without such counters print instead. */
struct NoLoopStats {
    void stats_begin() {}
    void stats_end(Line &line) const {
        line.add("loop_timer_wakeups", "-");
        line.add("loop_iterations", "-");
    }
};

#if TL_BENCH_HAVE_LIBEV
struct LibevPeer : LibevOps, NoLoopStats {
    FireLog<ev_timer> log;
    static void on_fire(struct ev_loop *, ev_timer *w, int) {
        static_cast<LibevPeer *>(w->data)->log.record(w);
    }
    void init(Timer &t) {
        ev_timer_init(&t, on_fire, 0., 0.);
        t.data = this;
    }
    /* ev_timer.at after ev_timer_start: mn_now + delay, CLOCK_MONOTONIC
       seconds, the value libev compares against. */
    static uint64_t deadline(const Timer &t) { return (uint64_t)std::llround(t.at * 1e9); }
    std::string label() const { return "libev"; }
    bool ticked() const { return false; }
};
#endif

#if TL_BENCH_HAVE_LIBUV
struct LibuvPeer : LibuvOps, NoLoopStats {
    FireLog<uv_timer_t> log;
    static void on_fire(uv_timer_t *t) { static_cast<LibuvPeer *>(t->data)->log.record(t); }
    void init(Timer &t) {
        uv_timer_init(&loop, &t);
        t.data = this;
    }
    /* The base's start names its own callback, so start and restart are
       repeated here with this one (same rounding up to whole ms). */
    void start(Timer &t, uint64_t delay_ns) { uv_timer_start(&t, on_fire, to_ms(delay_ns), 0); }
    void restart(Timer &t, uint64_t delay_ns) { start(t, delay_ns); }
    /* Its cached loop time plus the timeout, whole ms of CLOCK_MONOTONIC. */
    static uint64_t deadline(Timer &t) {
        return (uv_now(t.loop) + uv_timer_get_due_in(&t)) * resolution_ns;
    }
    std::string label() const { return "libuv"; }
    bool ticked() const { return false; }
};
#endif

/* ------------------------------------------------------------------------ */
/* The workloads                                                            */
/* ------------------------------------------------------------------------ */

int64_t nearest_rank(const std::vector<int64_t> &sorted, double p) {
    size_t k = (size_t)std::ceil(p * (double)sorted.size());
    return sorted[std::max<size_t>(k, 1) - 1];
}

/* What the delayed-tasks run did, from the time each timer fired (at[i], 0
   if it did not), its deadline, and the cancel order (its first `cancelled`
   entries were cancelled): the first deadline, the lateness of the fired
   survivors (sorted), how many cancelled timers fired (must be 0), and the
   distinct 1 ms ticks the survivors were due in. */
struct DelayedOutcome {
    uint64_t first = UINT64_MAX;
    std::vector<int64_t> late;
    size_t cancelled_fired = 0, due_ticks = 0;
};

DelayedOutcome delayed_outcome(const std::vector<uint64_t> &at, const std::vector<uint32_t> &order,
                               const std::vector<uint64_t> &deadline, size_t cancelled) {
    DelayedOutcome out;
    for (uint64_t d : deadline) out.first = std::min(out.first, d);
    std::vector<uint64_t> ticks;
    out.late.reserve(kDelayedSurvivors);
    ticks.reserve(kDelayedSurvivors);
    for (size_t k = 0; k < order.size(); ++k) {
        size_t i = order[k];
        if (k < cancelled) {
            out.cancelled_fired += at[i] != 0;
            continue;
        }
        if (at[i]) out.late.push_back((int64_t)(at[i] - deadline[i]));
        ticks.push_back((deadline[i] + kTick - 1) / kTick);
    }
    std::sort(out.late.begin(), out.late.end());
    std::sort(ticks.begin(), ticks.end());
    out.due_ticks = (size_t)(std::unique(ticks.begin(), ticks.end()) - ticks.begin());
    return out;
}

template <class Ops>
int delayed(Ops &ops) {
    using Timer = typename Ops::Timer;
    const size_t n = kDelayedN, cancelled = kDelayedN - kDelayedSurvivors;
    Rng rng(kDelayedSeed);
    std::vector<uint64_t> delay(n), deadline(n);
    for (size_t i = 0; i < n; ++i) delay[i] = kDelayMin + rng.below(kDelaySpan);
    /* The order in which tasks complete and cancel their timeout: the first
       90% of a random permutation; the rest fire. */
    std::vector<uint32_t> order(n);
    std::iota(order.begin(), order.end(), 0u);
    for (size_t i = n - 1; i > 0; --i) std::swap(order[i], order[rng.below(i + 1)]);
    ops.log.at.assign(n, 0);

    ops.update_time();
    Snap s0 = snap();
    /* Not value-initialised: its pages are faulted in by the schedule phase. */
    std::unique_ptr<Timer[]> timers(new Timer[n]);
    ops.log.base = timers.get();
    for (size_t i = 0; i < n; ++i) {
        ops.init(timers[i]);
        ops.start(timers[i], delay[i]);
        deadline[i] = ops.deadline(timers[i]);
        if (i % kIterationEvery == kIterationEvery - 1) ops.run_nowait();
    }
    Snap s1 = snap();
    for (size_t k = 0; k < cancelled; ++k) {
        ops.stop(timers[order[k]]);
        if (k % kIterationEvery == kIterationEvery - 1) ops.run_nowait();
    }
    Snap s2 = snap();
    ops.stats_begin();
    ops.run();
    Snap s3 = snap();

    DelayedOutcome out = delayed_outcome(ops.log.at, order, deadline, cancelled);
    const std::vector<int64_t> &late = out.late;
    uint64_t first = out.first;
    size_t cancelled_fired = out.cancelled_fired, due_ticks = out.due_ticks;

    Line line;
    line.add("workload", "delayed");
    line.add("lib", ops.label());
    line.add("n", n);
    line.add_phase("schedule", s0, s1);
    line.add_phase("cancel", s1, s2);
    line.add_phase("fire", s2, s3);
    line.add("total_cpu_ns", s3.cpu - s0.cpu);
    line.add("bytes_per_timer", (s1.rss - s0.rss) / n);
    line.add("fired", ops.log.count);
    line.add("late_p50_ns",
             late.empty() ? 0 : (uint64_t)std::max<int64_t>(0, nearest_rank(late, .5)));
    line.add("late_p99_ns",
             late.empty() ? 0 : (uint64_t)std::max<int64_t>(0, nearest_rank(late, .99)));
    line.add("late_max_ns", late.empty() ? 0 : (uint64_t)std::max<int64_t>(0, late.back()));
    line.add("early",
             (uint64_t)std::count_if(late.begin(), late.end(), [](int64_t v) { return v < 0; }));
    line.add("wakeups", s3.nvcsw - s2.nvcsw);
    line.add("due_ticks", due_ticks);
    line.add("ticks", ops.ticked() ? std::to_string((s3.wall - s2.wall) / kTick) : "-");
    ops.stats_end(line);
    line.add("cancel_margin_ns", first > s2.wall ? first - s2.wall : 0);
    std::printf("%s\n", line.text.c_str());

    ops.close(timers.get(), n);
    if (s2.wall >= first) {
        std::fprintf(stderr, "%s: the cancel phase ended after the first deadline\n",
                     ops.label().c_str());
        return 1;
    }
    if (ops.log.count != kDelayedSurvivors || cancelled_fired) {
        std::fprintf(stderr, "%s: %" PRIu64 " fired (%zu of them cancelled), expected %zu\n",
                     ops.label().c_str(), ops.log.count, cancelled_fired, kDelayedSurvivors);
        return 1;
    }
    return 0;
}

template <class Ops>
int heartbeat(Ops &ops) {
    using Timer = typename Ops::Timer;
    const size_t n = kHeartbeatN;
    Rng rng(kHeartbeatSeed);
    std::vector<uint32_t> victim(kRestarts);
    for (uint32_t &v : victim) v = (uint32_t)rng.below(n);
    ops.log.at.assign(n, 0);

    ops.update_time();
    Snap s0 = snap();
    std::unique_ptr<Timer[]> timers(new Timer[n]);
    ops.log.base = timers.get();
    for (size_t i = 0; i < n; ++i) {
        ops.init(timers[i]);
        ops.start(timers[i], kHeartbeat);
        if (i % kIterationEvery == kIterationEvery - 1) ops.run_nowait();
    }
    Snap s1 = snap();
    for (size_t i = 0; i < kRestarts; ++i) {
        ops.restart(timers[victim[i]], kHeartbeat);
        if (i % kIterationEvery == kIterationEvery - 1) ops.run_nowait();
    }
    Snap s2 = snap();

    Line line;
    line.add("workload", "heartbeat");
    line.add("lib", ops.label());
    line.add("n", n);
    line.add_phase("schedule", s0, s1);
    line.add_phase("restart", s1, s2);
    line.add("restarts", kRestarts);
    line.add("bytes_per_timer", (s1.rss - s0.rss) / n);
    line.add("fired", ops.log.count);
    std::printf("%s\n", line.text.c_str());

    for (size_t i = 0; i < n; ++i) ops.stop(timers[i]);
    ops.close(timers.get(), n);
    return 0;
}

template <class Ops>
int run(const std::string &workload, Ops &ops) {
    if (!ops.ok()) {
        std::fprintf(stderr, "%s\n", ops.error().c_str());
        return 1;
    }
    if (workload == "delayed") return delayed(ops);
    if (workload == "heartbeat") return heartbeat(ops);
    std::fprintf(stderr, "unknown workload %s\n", workload.c_str());
    return 2;
}

int run_one(const std::string &workload, const std::string &lib) {
#if TL_BENCH_HAVE_LIBEV
    if (lib == "libev") {
        LibevPeer ops;
        return run(workload, ops);
    }
#endif
#if TL_BENCH_HAVE_LIBUV
    if (lib == "libuv") {
        LibuvPeer ops;
        return run(workload, ops);
    }
#endif
    size_t at = lib.find('@');
    std::string backend = lib.substr(0, at);
    uint64_t collect = 0;
    if (at != std::string::npos) {
        if (lib.substr(at) != "@1ms") {
            std::fprintf(stderr, "unknown variant %s (only @1ms)\n", lib.c_str());
            return 2;
        }
        collect = kCollectInterval;
    }
    TickloopPeer ops(backend.c_str(), collect);
    return run(workload, ops);
}

/* Every workload and library once, each run a child process of its own so
   that its RSS and its counters are its own. */
int run_all(const char *self) {
    std::vector<std::string> libs;
    for (const char *b : {"heap2", "heap4", "wheel", "hwheel"}) {
        libs.push_back(b);
        libs.push_back(std::string(b) + "@1ms");
    }
#if TL_BENCH_HAVE_LIBEV
    libs.push_back("libev");
#endif
#if TL_BENCH_HAVE_LIBUV
    libs.push_back("libuv");
#endif
    int failed = 0;
    for (std::string workload : {"delayed", "heartbeat"}) {
        for (std::string lib : libs) {
            std::fflush(stdout);
            char *argv[] = {const_cast<char *>(self), workload.data(), lib.data(), nullptr};
            pid_t pid;
            int rc = posix_spawn(&pid, self, nullptr, nullptr, argv, environ);
            int status = 0;
            if (rc == 0)
                while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
                }
            if (rc != 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                std::fprintf(stderr, "%s %s failed\n", workload.c_str(), lib.c_str());
                failed = 1;
            }
        }
    }
    return failed;
}

} // namespace

int main(int argc, char **argv) {
    if (argc == 1) return run_all("/proc/self/exe");
    if (argc == 3) return run_one(argv[1], argv[2]);
    std::fprintf(stderr,
                 "usage: %s [WORKLOAD LIB]\n  WORKLOAD: delayed | heartbeat\n  LIB: heap2 heap4 "
                 "wheel hwheel, each also with @1ms (1 ms collect interval), libev, libuv\n",
                 argv[0]);
    return 2;
}
