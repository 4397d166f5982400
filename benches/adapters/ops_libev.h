/* SPDX-License-Identifier: MIT */
/*
 * ops_libev.h: the benchmark adapter (see ops.h) for libev, epoll backend.
 *
 * Restart uses libev's documented idiom for a timer pushed back again and
 * again (the manual's "ev_timer_again" technique): set `repeat` to the new
 * timeout and call ev_timer_again, which adjusts the heap in place.
 */
#ifndef TICKLOOP_BENCHES_OPS_LIBEV_H
#define TICKLOOP_BENCHES_OPS_LIBEV_H

#include <cmath>
#include <cstdint>
#include <string>

#include <ev.h>

#include "latency.h"
#include "ops.h"

namespace bench {

struct LibevOps {
    using Timer = ev_timer;
    /* ev_tstamp is a double of seconds: sub-nanosecond near the epoch of
       CLOCK_MONOTONIC, so effectively exact. */
    static constexpr uint64_t resolution_ns = 1;

    struct ev_loop *loop;
    uint64_t fired = 0;

    explicit LibevOps(const char * = nullptr) : loop(ev_loop_new(EVBACKEND_EPOLL)) {}
    ~LibevOps() {
        if (loop) ev_loop_destroy(loop);
    }
    LibevOps(const LibevOps &) = delete;
    LibevOps &operator=(const LibevOps &) = delete;

    bool ok() const { return loop != nullptr; }
    std::string error() const { return "ev_loop_new(EVBACKEND_EPOLL) failed"; }
    static std::string version() {
        return std::to_string(ev_version_major()) + "." + std::to_string(ev_version_minor());
    }
    std::string name() const { return "libev " + version(); }

    static void on_timer(struct ev_loop *, ev_timer *w, int) {
        ++static_cast<LibevOps *>(w->data)->fired;
    }

    void init(Timer &t) {
        ev_timer_init(&t, on_timer, 0., 0.);
        t.data = this;
    }
    void start(Timer &t, uint64_t delay_ns) {
        ev_timer_set(&t, (double)delay_ns * 1e-9, 0.);
        ev_timer_start(loop, &t);
    }
    void restart(Timer &t, uint64_t delay_ns) {
        t.repeat = (double)delay_ns * 1e-9;
        ev_timer_again(loop, &t);
    }
    void stop(Timer &t) { ev_timer_stop(loop, &t); }
    void update_time() { ev_now_update(loop); }
    void run_nowait() { ev_run(loop, EVRUN_NOWAIT); }
    void run() { ev_run(loop, 0); }
    void close(Timer *, size_t) {}

    /* Latency rows (ops.h). */
    static void on_fire(struct ev_loop *, ev_timer *w, int) {
        uint64_t now = mono_ns(); /* first: the library's own work is not ours */
        static_cast<FireSink *>(w->data)->fire(now);
    }
    void init_fire(Timer &t, FireSink *sink) {
        ev_timer_init(&t, on_fire, 0., 0.);
        t.data = sink;
    }
    /* libev's deadline is ev_timer.at after ev_timer_start: mn_now + delay in
       CLOCK_MONOTONIC seconds, the value it compares against. */
    uint64_t arm(Timer &t, uint64_t delay_ns) {
        start(t, delay_ns);
        return (uint64_t)std::llround(t.at * 1e9);
    }
    std::string latency_note() const { return "epoll_wait timeouts in whole ms (rounded up); "; }
};

} // namespace bench

#endif /* TICKLOOP_BENCHES_OPS_LIBEV_H */
