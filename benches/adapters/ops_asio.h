/* SPDX-License-Identifier: MIT */
/*
 * ops_asio.h: the benchmark adapter (see ops.h) for standalone Asio, one
 * asio::io_context on its default reactor (epoll, timeouts through a
 * timerfd), with concurrency hint 1: the hint a single-threaded program
 * gives, the one closest to the other libraries' loops.
 *
 * A timer is an asio::steady_timer with one pending async_wait. Asio has no
 * way to move a waiting timer without cancelling its wait: restart is the
 * idiom its documentation gives, expires_after() (which cancels the pending
 * wait) then async_wait() again. The cancelled wait's handler still has to
 * run (with asio::error::operation_aborted); that work is Asio's share of a
 * restart, so the adapter runs the cancelled handlers inside the timed
 * region: every kSettleEvery restarts, as the loop of a program would, and
 * the rest in settle() before the clock stops (ops.h). Asio reads the clock
 * in every expires_after: there is no cached time to update.
 */
#ifndef TICKLOOP_BENCHES_OPS_ASIO_H
#define TICKLOOP_BENCHES_OPS_ASIO_H

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <asio/version.hpp>

#include "latency.h"
#include "ops.h"

namespace bench {

struct AsioOps {
    /* steady_timer needs its io_context to be constructed, and ops.h makes
       arrays of default-constructed handles: init() builds the timer. */
    struct Timer {
        std::optional<asio::steady_timer> t;
        FireSink *sink = nullptr;
    };
    /* std::chrono::steady_clock is CLOCK_MONOTONIC in nanoseconds. */
    static constexpr uint64_t resolution_ns = 1;
    /* Cancelled waits run this many at a time while restarting. */
    static constexpr uint64_t kSettleEvery = 1024;

    asio::io_context ctx{1};
    uint64_t fired = 0;
    uint64_t cancelled = 0; /* cancelled handlers not yet run */

    explicit AsioOps(const char * = nullptr) {}
    AsioOps(const AsioOps &) = delete;
    AsioOps &operator=(const AsioOps &) = delete;

    bool ok() const { return true; }
    std::string error() const { return ""; }
    static std::string version() {
        return std::to_string(ASIO_VERSION / 100000) + "." +
               std::to_string(ASIO_VERSION / 100 % 1000) + "." + std::to_string(ASIO_VERSION % 100);
    }
    std::string name() const { return "asio " + version(); }

    void init(Timer &t) { t.t.emplace(ctx); }
    void wait(Timer &t) {
        t.t->async_wait([this](const asio::error_code &ec) {
            if (!ec) ++fired;
        });
    }
    void start(Timer &t, uint64_t delay_ns) {
        t.t->expires_after(std::chrono::nanoseconds(delay_ns));
        wait(t);
    }
    void restart(Timer &t, uint64_t delay_ns) {
        cancelled += t.t->expires_after(std::chrono::nanoseconds(delay_ns));
        wait(t);
        if (cancelled >= kSettleEvery) settle();
    }
    void stop(Timer &t) { cancelled += t.t->cancel(); }
    void update_time() {}
    /* run and poll return at once after a run that ran out of work, until
       restart(). */
    void run_nowait() {
        ctx.restart();
        ctx.poll();
    }
    void run() {
        ctx.restart();
        ctx.run();
    }
    void settle() {
        run_nowait();
        cancelled = 0;
    }
    /* The cancelled handlers run before the timers go. */
    void close(Timer *timers, size_t n) {
        settle();
        for (size_t i = 0; i < n; ++i) timers[i].t.reset();
    }

    /* Latency rows (ops.h). */
    void init_fire(Timer &t, FireSink *sink) {
        t.t.emplace(ctx);
        t.sink = sink;
    }
    /* Asio's deadline: expiry(), steady_clock's now() plus the delay. */
    uint64_t arm(Timer &t, uint64_t delay_ns) {
        t.t->expires_after(std::chrono::nanoseconds(delay_ns));
        FireSink *sink = t.sink;
        t.t->async_wait([sink](const asio::error_code &ec) {
            uint64_t now = mono_ns(); /* first: the library's own work is not ours */
            if (!ec) sink->fire(now);
        });
        return (uint64_t)std::chrono::duration_cast<std::chrono::nanoseconds>(
                   t.t->expiry().time_since_epoch())
            .count();
    }
    std::string latency_note() const { return ""; }
};

} // namespace bench

#endif /* TICKLOOP_BENCHES_OPS_ASIO_H */
