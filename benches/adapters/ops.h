/* SPDX-License-Identifier: MIT */
/*
 * ops.h: the interface the benchmarks (timer_ops*.cc, and every row of
 * tickloop-bench but the kernel's) drive every library through, and the
 * routines they share: measure_restart(), measure_expire(), and the latency
 * workloads measure_chain() and measure_open().
 *
 * An adapter (ops_tickloop.h, ops_libev.h, ops_libuv.h, ops_libevent.h,
 * ops_asio.h) has:
 *   using Timer = ...;                  the library's timer handle
 *   explicit Adapter(const char *variant);   tickloop: the timer backend name;
 *                                       libevent: "precise" or ""; others: ignored
 *   bool ok() const; std::string error() const;  whether construction worked
 *   std::string name() const;           row label, e.g. "libev 4.33"
 *   void init(Timer &);                 once per handle, before any start
 *   void start(Timer &, uint64_t delay_ns);    arm an inactive timer
 *   void restart(Timer &, uint64_t delay_ns);  move an active timer (each
 *                                       library's own idiom for it)
 *   void stop(Timer &);
 *   void update_time();                 refresh the library's cached clock
 *   void run_nowait();                  one iteration that never blocks
 *   void run();                         iterations (blocking) until no timer
 *                                       is active
 *   void close(Timer *timers, size_t n);       release handles (all stopped)
 *   uint64_t fired;                     callbacks run so far
 *   static constexpr uint64_t resolution_ns;   granularity delays round up to
 *   void settle();                      optional: work the library deferred
 *                                       from the restarts it was given (Asio:
 *                                       the handlers of the cancelled waits),
 *                                       done inside the timed region
 * Delays are nanoseconds; an adapter converts them to its library's unit
 * inside the call, which is part of the cost of using that library.
 *
 * The latency rows of tickloop-bench (measure_chain, measure_open: chain,
 * open and the wait sweep) use four more:
 *   void init_fire(Timer &, FireSink *);  once per handle: on expiry the
 *                                       timer calls sink->fire(now), now
 *                                       being CLOCK_MONOTONIC read first
 *                                       thing in the callback
 *   uint64_t arm(Timer &, uint64_t delay_ns);  start an inactive timer and
 *                                       return the absolute deadline the
 *                                       library itself computed (CLOCK_MONOTONIC
 *                                       ns): what lateness is measured against
 *   std::string latency_note() const;   what the row's note says of the
 *                                       library's resolution ("" for none)
 *   void latency_begin(); void latency_end(Result &);  optional: an adapter
 *                                       that counts its own kernel waits and
 *                                       fired timers (tickloop: tl_loop_stats)
 *                                       fills r.waits, r.fired and notes on
 *                                       failures; without them the epoll waits
 *                                       are counted by wait_counter.cc and each
 *                                       lateness sample is one fired timer.
 */
#ifndef TICKLOOP_BENCHES_OPS_H
#define TICKLOOP_BENCHES_OPS_H

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "latency.h"
#include "wait_counter.h"

namespace bench {

/* Restart random live timers: the heartbeat pattern's inner operation.
   Builds the whole population, times restarts [begin, end) of the plan, and
   tears the population down again (both outside the timed region); adds to
   r.ops and r.op_cpu_ns and records the segment's ns/op as one round.
   batch > 0: the library's cached time is refreshed once per `batch`
   restarts (timed: a loop iteration does it) and each batch restarts with
   one delay, so deadlines are equal within a batch (kRestartBatch). */
template <class Ops>
void measure_restart(Ops &ops, const RestartPlan &plan, size_t begin, size_t end, Result &r,
                     size_t batch = 0) {
    size_t n = plan.initial.size();
    std::unique_ptr<typename Ops::Timer[]> timers(new typename Ops::Timer[n]);
    for (size_t i = 0; i < n; ++i) ops.init(timers[i]);
    ops.update_time();
    for (size_t i = 0; i < n; ++i) ops.start(timers[i], plan.initial[i]);
    uint64_t t0 = cpu_ns();
    if (batch == 0) {
        for (size_t i = begin; i < end; ++i) ops.restart(timers[plan.victim[i]], plan.delay[i]);
    } else {
        for (size_t i = begin; i < end; i += batch) {
            ops.update_time();
            size_t stop = std::min(end, i + batch);
            uint64_t delay = plan.delay[i];
            for (size_t j = i; j < stop; ++j) ops.restart(timers[plan.victim[j]], delay);
        }
    }
    if constexpr (requires { ops.settle(); }) ops.settle();
    uint64_t t1 = cpu_ns();
    for (size_t i = 0; i < n; ++i) ops.stop(timers[i]);
    ops.close(timers.get(), n);
    r.population = n;
    r.ops += end - begin;
    r.op_cpu_ns += t1 - t0;
    if (end > begin) r.round_ns_per_op.push_back((double)(t1 - t0) / (double)(end - begin));
}

/* Expiry throughput: starts the plan's timers (untimed), sleeps until all
   are due by every library's reckoning (the window, plus libuv's whole-ms
   and libevent's coarse-clock rounding), then times the non-blocking
   iterations that fire them: as many as the library needs (tickloop bounds
   the callbacks of one iteration so I/O is not starved). Adds one round. */
template <class Ops>
void measure_expire(Ops &ops, const ExpirePlan &plan, uint64_t window, Result &r) {
    size_t n = plan.delay.size();
    std::unique_ptr<typename Ops::Timer[]> timers(new typename Ops::Timer[n]);
    for (size_t i = 0; i < n; ++i) ops.init(timers[i]);
    ops.fired = 0;
    ops.update_time();
    for (size_t k = 0; k < n; ++k) ops.start(timers[plan.at[k]], plan.delay[k]);
    uint64_t due = mono_ns() + window + 10 * kMs;
    timespec ts{(time_t)(due / kSec), (long)(due % kSec)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) != 0) {
    }
    uint64_t t0 = cpu_ns();
    for (uint64_t before = ~0ull; ops.fired < n && ops.fired != before;) {
        before = ops.fired;
        ops.run_nowait();
    }
    uint64_t t1 = cpu_ns();
    uint64_t fired = ops.fired;
    for (size_t i = 0; i < n; ++i) ops.stop(timers[i]);
    ops.close(timers.get(), n);
    r.population = n;
    if (fired != n) {
        r.skipped = "fired " + std::to_string(fired) + " of " + std::to_string(n);
        return;
    }
    r.ops += n;
    r.op_cpu_ns += t1 - t0;
    r.round_ns_per_op.push_back((double)(t1 - t0) / (double)n);
}

/* What a latency timer reports its expiry to (init_fire). */
struct FireSink {
    virtual void fire(uint64_t now) = 0;

protected:
    ~FireSink() = default;
};

/* Counts of one latency row: the adapter's own (latency_begin/latency_end)
   or, for a peer, the epoll waits wait_counter.cc counts in this thread and
   one fired timer per lateness sample. */
template <class Ops>
class LatencyCounts {
public:
    explicit LatencyCounts(Ops &ops) : ops_(ops) {
        if constexpr (kOwn)
            ops_.latency_begin();
        else
            waits0_ = kernel_waits();
    }
    void end(Result &r) {
        if constexpr (kOwn) {
            ops_.latency_end(r);
        } else {
            r.waits = kernel_waits() - waits0_;
            r.fired = r.lateness.size();
        }
    }

private:
    static constexpr bool kOwn = requires(Ops & o, Result &r) {
        o.latency_begin();
        o.latency_end(r);
    };
    Ops &ops_;
    uint64_t waits0_ = 0;
};

/* One link of a chain: records its lateness, then arms the next link from
   inside the callback, as an application would. */
template <class Ops>
struct ChainFire final : FireSink {
    Ops &ops;
    typename Ops::Timer &timer;
    const std::vector<uint64_t> &delays;
    std::vector<int64_t> &lateness;
    size_t next = 0;
    uint64_t deadline = 0; /* of the armed link */

    ChainFire(Ops &o, typename Ops::Timer &t, const std::vector<uint64_t> &d,
              std::vector<int64_t> &l)
        : ops(o), timer(t), delays(d), lateness(l) {}
    void arm() {
        if (next == delays.size()) return;
        deadline = ops.arm(timer, delays[next++]);
    }
    void fire(uint64_t now) override {
        lateness.push_back((int64_t)(now - deadline));
        arm();
    }
};

/* Chain: one timer at a time, each callback arms the next delay of the
   schedule. Fills r.lateness, r.wall_s and the counts. */
template <class Ops>
void measure_chain(Ops &ops, const std::vector<uint64_t> &delays, Result &r) {
    r.lateness.reserve(delays.size());
    typename Ops::Timer timer;
    ChainFire<Ops> chain(ops, timer, delays, r.lateness);
    ops.init_fire(timer, &chain);
    LatencyCounts<Ops> counts(ops);
    uint64_t w0 = mono_ns();
    /* The cached time is as old as the loop; the first deadline must be
       computed from the present like every later one. */
    ops.update_time();
    chain.arm();
    ops.run();
    r.wall_s = (double)(mono_ns() - w0) / 1e9;
    counts.end(r);
    ops.stop(timer);
    ops.close(&timer, 1);
}

/* One timer of the open loop: records its lateness when it fires. */
struct OpenFire final : FireSink {
    std::vector<int64_t> *lateness = nullptr;
    uint64_t deadline = 0;

    void fire(uint64_t now) override { lateness->push_back((int64_t)(now - deadline)); }
};

/* Open loop: all timers armed up front, each records its lateness when it
   fires; nothing is re-armed. Fills r.lateness, r.wall_s and the counts. */
template <class Ops>
void measure_open(Ops &ops, const std::vector<uint64_t> &delays, Result &r) {
    size_t n = delays.size();
    std::unique_ptr<typename Ops::Timer[]> timers(new typename Ops::Timer[n]);
    std::vector<OpenFire> sinks(n);
    r.lateness.reserve(n);
    for (size_t i = 0; i < n; ++i) {
        sinks[i].lateness = &r.lateness;
        ops.init_fire(timers[i], &sinks[i]);
    }
    LatencyCounts<Ops> counts(ops);
    uint64_t w0 = mono_ns();
    ops.update_time();
    for (size_t i = 0; i < n; ++i) sinks[i].deadline = ops.arm(timers[i], delays[i]);
    ops.run();
    r.wall_s = (double)(mono_ns() - w0) / 1e9;
    counts.end(r);
    for (size_t i = 0; i < n; ++i) ops.stop(timers[i]);
    ops.close(timers.get(), n);
}

/* One latency row through an adapter just made: skipped if making it
   failed, else the chain (chain true) or the open loop over delays. */
template <class Ops>
void measure_latency(Ops &ops, bool chain, const std::vector<uint64_t> &delays, Result &r) {
    if (!ops.ok()) {
        r.skipped = ops.error();
        return;
    }
    r.note += ops.latency_note();
    if (chain)
        measure_chain(ops, delays, r);
    else
        measure_open(ops, delays, r);
}

/* The slice of the plan's restarts that round `round` of `rounds` times. */
inline void restart_round(const RestartPlan &plan, size_t round, size_t rounds, size_t *begin,
                          size_t *end) {
    *begin = plan.victim.size() * round / rounds;
    *end = plan.victim.size() * (round + 1) / rounds;
}

} // namespace bench

#endif /* TICKLOOP_BENCHES_OPS_H */
