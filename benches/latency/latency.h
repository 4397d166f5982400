/* SPDX-License-Identifier: MIT */
/*
 * latency.h: the harness shared by the latency runner (tickloop_bench.cc and
 * the other parts of tickloop-bench, see job.h) and its libevent helper
 * (tickloop_bench_libevent.cc); the other benchmarks use its clocks,
 * generator and statistics too.
 *
 * What is shared, and why it must be: the schedules (every implementation
 * waits exactly the same sequence of delays, drawn from one seeded generator
 * that is identical in both executables), the statistics, and the one-line
 * text format in which the helper hands its results back to the runner. The
 * helper is a separate executable because Debian's libev exports
 * libevent-compatible symbols (event_add, ...) that would clash with libevent
 * in one binary.
 *
 * Lateness is "CLOCK_MONOTONIC read in the callback, outside the library"
 * minus "the absolute deadline the library itself computed when the timer
 * was armed" (tickloop: tl_now() + delay; libev: ev_timer.at; libuv: uv_now()
 * + uv_timer_get_due_in(); libevent: event.ev_timeout). A negative lateness is
 * an early fire.
 */
#ifndef TICKLOOP_BENCHES_LATENCY_H
#define TICKLOOP_BENCHES_LATENCY_H

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <time.h>

namespace bench {

inline constexpr uint64_t kUs = 1000;
inline constexpr uint64_t kMs = 1000 * kUs;
inline constexpr uint64_t kSec = 1000 * kMs;

inline uint64_t clock_ns(clockid_t clock) {
    timespec ts;
    clock_gettime(clock, &ts);
    return (uint64_t)ts.tv_sec * kSec + (uint64_t)ts.tv_nsec;
}
inline uint64_t mono_ns() {
    return clock_ns(CLOCK_MONOTONIC);
}
/* Operation costs are measured in thread CPU time: on a shared, noisy machine
   it leaves out the time another process holds the core. */
inline uint64_t cpu_ns() {
    return clock_ns(CLOCK_THREAD_CPUTIME_ID);
}

/* splitmix64: std:: distributions are not specified bit for bit, and the
   runner and the helper must draw the same schedule from the same seed. */
struct Rng {
    uint64_t state;
    explicit Rng(uint64_t seed) : state(seed) {}
    uint64_t next() {
        uint64_t z = (state += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    double unit() { return (double)(next() >> 11) * 0x1.0p-53; } /* [0, 1) */
    uint64_t below(uint64_t n) { return (uint64_t)(unit() * (double)n); }
};

/* Knobs of one run; the runner passes them to the helper on its command line
   so both sides build the same schedules. */
struct Params {
    uint64_t seed = 20261123;
    /* Chain: one timer at a time, each callback arms the next. Delays are
       log-uniform in [100 us, 10 ms], so each decade gets the same share of
       samples; the mean is 9.9 ms / ln(100) = 2.15 ms, so 1200 links take
       about 2.6 s per row, and the 15 rows of a default run about 40 s. */
    size_t chain_count = 1200;
    uint64_t chain_min = 100 * kUs, chain_max = 10 * kMs;
    /* Open loop: per round, open_count / rounds timers armed at once, delays
       uniform over [open_min, open_min + open_window / rounds], fired without
       feedback. open_min is well above the time it takes to arm them all (the
       deadline is computed from the loop's cached time, so arming time would
       count as lateness). */
    size_t open_count = 4000;
    uint64_t open_min = 5 * kMs, open_window = 1600 * kMs;
    size_t rounds = 5;
    /* Restart (operation cost, not latency): population live timers with
       deadlines 1 s - 10 min, then restart_ops restarts of random live ones. */
    size_t restart_population = 100000;
    size_t restart_ops = 1u << 21;
    /* Restart rounds are short (a few ms of work each), so several of them:
       the median then shrugs off the rounds another tenant disturbed. Each
       round rebuilds the population, so more rounds cost the job's time
       budget (16 rounds take about 9 s, 8 about 7 s). */
    size_t restart_rounds = 8;
    uint64_t far_min = 1 * kSec, far_max = 600 * kSec;
    /* Expiry throughput: expire_population timers due within expire_window,
       all fired by non-blocking iterations after a sleep; one fresh
       population per round. */
    size_t expire_population = 100000;
    size_t expire_rounds = 3; /* each ~70 ms per library and layout */
    uint64_t expire_window = 20 * kMs;
    /* Wait sweep (one wait length per call of the helper): sweep_count lone
       waits of sweep_ns each, started after sweep_offset_ns (rows run side by
       side, spread out so they seldom wake at the same moment). */
    uint64_t sweep_ns = 1 * kMs;
    size_t sweep_count = 0;
    uint64_t sweep_offset_ns = 0;
    /* The libevent helper's rows: -1 both, 0 default only, 1 precise only. */
    int64_t libevent_precise = -1;
};

/* The fewest samples a comparison may rest on. A ratio or difference of two
   medians (p50) needs kMinSamples lateness samples on each side, one of two
   p99s kMinTailSamples (so that a p99 is not just the largest sample or
   two), and one of two operation costs kMinRounds timed rounds on each
   side. Below that the figures are printed, never compared, and plot.py
   draws nothing from them. */
inline constexpr size_t kMinSamples = 100;
inline constexpr size_t kMinTailSamples = 1000;
inline constexpr size_t kMinRounds = 3;

/* The wait sweep: lone timers at the waits real timeouts have, all rows at
   once (about 30 s by default, 110 s with --full). The waits up to 100 ms
   take kMinSamples or more; 1 s and 5 s waits cannot in a short run (100 of
   5 s are 500 s), so their few samples are shown and never compared. */
struct SweepLength {
    uint64_t ns;
    const char *label;
    size_t count, full_count;
};
inline constexpr SweepLength kSweep[] = {
    {1 * kMs, "1ms", 200, 1000}, {10 * kMs, "10ms", 100, 300}, {100 * kMs, "100ms", 100, 200},
    {1 * kSec, "1s", 3, 15},     {5 * kSec, "5s", 2, 8},
};

/* One sweep row's schedule: the same wait, again and again. */
inline std::vector<uint64_t> sweep_delays(const Params &p) {
    return std::vector<uint64_t>(p.sweep_count, p.sweep_ns);
}

/* Waits out a sweep row's start offset. */
inline void sweep_start(const Params &p) {
    if (!p.sweep_offset_ns) return;
    timespec ts{(time_t)(p.sweep_offset_ns / kSec), (long)(p.sweep_offset_ns % kSec)};
    while (clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts) != 0) {
    }
}

/* The rows of one workload run in rounds, every row once per round in turn,
   so that a burst of load from elsewhere on the machine hits all rows alike
   instead of ruining whichever row happened to be running. */

/* Round `round` of the chain: a contiguous slice of one long schedule. */
inline std::vector<uint64_t> chain_delays(const Params &p, size_t round) {
    Rng rng(p.seed);
    std::vector<uint64_t> d(p.chain_count);
    double lo = std::log((double)p.chain_min), hi = std::log((double)p.chain_max);
    for (auto &x : d) x = (uint64_t)std::exp(lo + (hi - lo) * rng.unit());
    size_t begin = p.chain_count * round / p.rounds, end = p.chain_count * (round + 1) / p.rounds;
    return std::vector<uint64_t>(d.begin() + (std::ptrdiff_t)begin,
                                 d.begin() + (std::ptrdiff_t)end);
}

/* Round `round` of the open loop: open_count / rounds timers spread over
   open_window / rounds, so the firing rate is that of the whole schedule. */
inline std::vector<uint64_t> open_delays(const Params &p, size_t round) {
    Rng rng(p.seed ^ 0x6f70656eull ^ (round << 32));
    std::vector<uint64_t> d(p.open_count / p.rounds);
    for (auto &x : d) x = p.open_min + rng.below(p.open_window / p.rounds);
    return d;
}

/* The restart workload: which live timer to restart and its new delay. */
struct RestartPlan {
    std::vector<uint64_t> initial; /* delay of each live timer at start */
    std::vector<uint32_t> victim;  /* per restart: index of the timer    */
    std::vector<uint64_t> delay;   /* per restart: its new delay         */
};

inline RestartPlan restart_plan(const Params &p) {
    Rng rng(p.seed ^ 0x72657374ull);
    RestartPlan plan;
    uint64_t span = p.far_max - p.far_min;
    plan.initial.resize(p.restart_population);
    for (auto &x : plan.initial) x = p.far_min + rng.below(span);
    plan.victim.resize(p.restart_ops);
    plan.delay.resize(p.restart_ops);
    for (size_t i = 0; i < p.restart_ops; ++i) {
        plan.victim[i] = (uint32_t)rng.below(p.restart_population);
        plan.delay[i] = p.far_min + rng.below(span);
    }
    return plan;
}

/* The expiry workload: the delay of the k-th timer started and where in the
   timer array it lives (in order, or shuffled: memory order unrelated to
   start order, as in a long-running program's heap). */
struct ExpirePlan {
    std::vector<uint64_t> delay;
    std::vector<uint32_t> at;
};

/* The server pattern's batches: every timer (re)started in one loop
   iteration shares the loop's cached time, so a busy server's deadlines are
   equal in batches of hundreds. restart-batch refreshes the cached time once per this many
   restarts and gives each batch one delay; expire-equal fires a population
   that all shares one deadline. */
inline constexpr size_t kRestartBatch = 256;
inline constexpr size_t kRestartBatchRounds = 3; /* of restart_rounds' slices */

/* equal: every timer gets the same delay (half the window), memory in start
   order; shuffled is then ignored. */
inline ExpirePlan expire_plan(const Params &p, bool shuffled, bool equal = false) {
    Rng rng(p.seed ^ 0x657870697265ull);
    ExpirePlan plan;
    size_t n = p.expire_population;
    plan.delay.resize(n);
    plan.at.resize(n);
    for (size_t k = 0; k < n; ++k) {
        plan.delay[k] = equal ? p.expire_window / 2 : rng.below(p.expire_window);
        plan.at[k] = (uint32_t)k;
    }
    if (shuffled && !equal)
        for (size_t i = n - 1; i > 0; --i) std::swap(plan.at[i], plan.at[rng.below(i + 1)]);
    return plan;
}

/* One row of a table: a latency workload (lateness filled) or an operation
   workload (ops and op_cpu_ns filled), or a skipped row (skipped non-empty). */
struct Result {
    std::string impl;                    /* "tickloop heap2/epoll", "libev 4.33", ...      */
    std::string family;                  /* "tickloop", "kernel" or "peer"                 */
    std::string workload;                /* "chain", "open", "restart", "expire"...        */
    std::string skipped;                 /* why the row did not run; empty if it did       */
    std::string note;                    /* e.g. the resolution a peer rounds delays to    */
    std::vector<int64_t> lateness;       /* ns, one per fired timer               */
    uint64_t waits = 0;                  /* kernel waits (loop iterations)        */
    uint64_t fired = 0;                  /* timer callbacks run                   */
    uint64_t population = 0;             /* restart/expire: live timers           */
    uint64_t ops = 0;                    /* restart/expire: operations timed      */
    uint64_t op_cpu_ns = 0;              /* restart/expire: thread CPU time       */
    double wall_s = 0;                   /* time the row took                     */
    std::vector<double> round_ns_per_op; /* restart: ns/op of each round   */
};

/* The median of the rounds' ns/op: one round hit by a burst of load from
   elsewhere does not move it. */
inline double median_ns_per_op(const Result &r) {
    std::vector<double> v = r.round_ns_per_op;
    if (v.empty()) return r.ops ? (double)r.op_cpu_ns / (double)r.ops : 0;
    std::sort(v.begin(), v.end());
    return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

struct Stats {
    size_t n = 0;
    int64_t p50 = 0, p90 = 0, p99 = 0, p999 = 0, max = 0, min = 0;
    size_t early = 0;
};

/* Nearest-rank percentiles: the reported value is one that was observed. */
inline int64_t percentile(const std::vector<int64_t> &sorted, double q) {
    if (sorted.empty()) return 0;
    size_t rank = (size_t)std::ceil(q * (double)sorted.size());
    if (rank < 1) rank = 1;
    return sorted[std::min(rank, sorted.size()) - 1];
}

inline Stats stats_of(std::vector<int64_t> lateness) {
    Stats s;
    std::sort(lateness.begin(), lateness.end());
    s.n = lateness.size();
    if (s.n == 0) return s;
    s.p50 = percentile(lateness, 0.50);
    s.p90 = percentile(lateness, 0.90);
    s.p99 = percentile(lateness, 0.99);
    s.p999 = percentile(lateness, 0.999);
    s.max = lateness.back();
    s.min = lateness.front();
    s.early = (size_t)(std::lower_bound(lateness.begin(), lateness.end(), 0) - lateness.begin());
    return s;
}

/* ---- the helper -> runner line format --------------------------------- */
/* One result per line: "RESULT" then tab-separated key=value fields; text
   values never contain tabs or newlines (sanitised), lateness is a comma list. */

inline std::string sanitize(std::string s) {
    for (char &c : s)
        if (c == '\t' || c == '\n' || c == '\r') c = ' ';
    return s;
}

inline std::string encode(const Result &r) {
    std::string line = "RESULT";
    auto field = [&](const char *k, const std::string &v) {
        line += '\t';
        line += k;
        line += '=';
        line += sanitize(v);
    };
    field("impl", r.impl);
    field("family", r.family);
    field("workload", r.workload);
    field("skipped", r.skipped);
    field("note", r.note);
    field("waits", std::to_string(r.waits));
    field("fired", std::to_string(r.fired));
    field("population", std::to_string(r.population));
    field("ops", std::to_string(r.ops));
    field("op_cpu_ns", std::to_string(r.op_cpu_ns));
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3f", r.wall_s);
    field("wall_s", buf);
    std::string lat;
    lat.reserve(r.lateness.size() * 8);
    for (size_t i = 0; i < r.lateness.size(); ++i) {
        if (i) lat += ',';
        lat += std::to_string(r.lateness[i]);
    }
    field("lateness", lat);
    std::string rounds;
    for (double x : r.round_ns_per_op) {
        std::snprintf(buf, sizeof buf, "%s%.3f", rounds.empty() ? "" : ",", x);
        rounds += buf;
    }
    field("round_ns_per_op", rounds);
    return line;
}

inline bool decode(const std::string &line, Result &r) {
    if (line.rfind("RESULT\t", 0) != 0) return false;
    size_t pos = 7;
    while (pos <= line.size()) {
        size_t end = line.find('\t', pos);
        if (end == std::string::npos) end = line.size();
        std::string kv = line.substr(pos, end - pos);
        size_t eq = kv.find('=');
        if (eq != std::string::npos) {
            std::string k = kv.substr(0, eq), v = kv.substr(eq + 1);
            auto u64 = [&] { return (uint64_t)std::strtoull(v.c_str(), nullptr, 10); };
            if (k == "impl")
                r.impl = v;
            else if (k == "family")
                r.family = v;
            else if (k == "workload")
                r.workload = v;
            else if (k == "skipped")
                r.skipped = v;
            else if (k == "note")
                r.note = v;
            else if (k == "waits")
                r.waits = u64();
            else if (k == "fired")
                r.fired = u64();
            else if (k == "population")
                r.population = u64();
            else if (k == "ops")
                r.ops = u64();
            else if (k == "op_cpu_ns")
                r.op_cpu_ns = u64();
            else if (k == "wall_s")
                r.wall_s = std::strtod(v.c_str(), nullptr);
            else if (k == "round_ns_per_op") {
                const char *p = v.c_str();
                while (*p) {
                    char *e;
                    double x = std::strtod(p, &e);
                    if (e == p) break;
                    r.round_ns_per_op.push_back(x);
                    p = *e == ',' ? e + 1 : e;
                }
            } else if (k == "lateness") {
                const char *p = v.c_str();
                while (*p) {
                    char *e;
                    long long x = std::strtoll(p, &e, 10);
                    if (e == p) break;
                    r.lateness.push_back((int64_t)x);
                    p = *e == ',' ? e + 1 : e;
                }
            }
        }
        pos = end + 1;
    }
    return true;
}

/* The parameters as helper arguments, and back. */
inline std::vector<std::string> params_to_args(const Params &p) {
    return {"--seed=" + std::to_string(p.seed),
            "--chain-count=" + std::to_string(p.chain_count),
            "--open-count=" + std::to_string(p.open_count),
            "--open-window-ms=" + std::to_string(p.open_window / kMs),
            "--rounds=" + std::to_string(p.rounds),
            "--restart-population=" + std::to_string(p.restart_population),
            "--restart-ops=" + std::to_string(p.restart_ops),
            "--restart-rounds=" + std::to_string(p.restart_rounds),
            "--expire-population=" + std::to_string(p.expire_population),
            "--expire-rounds=" + std::to_string(p.expire_rounds),
            "--sweep-ns=" + std::to_string(p.sweep_ns),
            "--sweep-count=" + std::to_string(p.sweep_count),
            "--sweep-offset-ns=" + std::to_string(p.sweep_offset_ns),
            "--libevent-precise=" + std::to_string(p.libevent_precise)};
}

/* Parses one "--name=value" argument into p; false if it is not one of them. */
inline bool parse_param(const char *arg, Params &p) {
    auto value = [&](const char *name, uint64_t &out) {
        size_t n = std::strlen(name);
        if (std::strncmp(arg, name, n) != 0 || arg[n] != '=') return false;
        out = std::strtoull(arg + n + 1, nullptr, 10);
        return true;
    };
    uint64_t v;
    if (value("--seed", v)) return p.seed = v, true;
    if (value("--chain-count", v)) return p.chain_count = v, true;
    if (value("--open-count", v)) return p.open_count = v, true;
    if (value("--open-window-ms", v)) return p.open_window = v * kMs, true;
    if (value("--rounds", v)) return p.rounds = v ? v : 1, true;
    if (value("--restart-population", v)) return p.restart_population = v, true;
    if (value("--restart-ops", v)) return p.restart_ops = v, true;
    if (value("--restart-rounds", v)) return p.restart_rounds = v ? v : 1, true;
    if (value("--expire-population", v)) return p.expire_population = v ? v : 1, true;
    if (value("--expire-rounds", v)) return p.expire_rounds = v ? v : 1, true;
    if (value("--sweep-ns", v)) return p.sweep_ns = v, true;
    if (value("--sweep-count", v)) return p.sweep_count = v, true;
    if (value("--sweep-offset-ns", v)) return p.sweep_offset_ns = v, true;
    if (value("--libevent-precise", v)) return p.libevent_precise = (int64_t)v, true;
    return false;
}

} // namespace bench

#endif /* TICKLOOP_BENCHES_LATENCY_H */
