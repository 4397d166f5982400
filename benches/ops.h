/* SPDX-License-Identifier: MIT */
/*
 * ops.h: the interface the operation benchmarks (timer_ops*.cc and the
 * restart row of tickloop-bench) drive every library through, and the one
 * routine they share, measure_restart().
 *
 * An adapter (ops_tickloop.h, ops_libev.h, ops_libuv.h, ops_libevent.h) has:
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
 * Delays are nanoseconds; an adapter converts them to its library's unit
 * inside the call, which is part of the cost of using that library.
 */
#ifndef TICKLOOP_BENCHES_OPS_H
#define TICKLOOP_BENCHES_OPS_H

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "latency.h"

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

/* The slice of the plan's restarts that round `round` of `rounds` times. */
inline void restart_round(const RestartPlan &plan, size_t round, size_t rounds, size_t *begin,
                          size_t *end) {
    *begin = plan.victim.size() * round / rounds;
    *end = plan.victim.size() * (round + 1) / rounds;
}

} // namespace bench

#endif /* TICKLOOP_BENCHES_OPS_H */
