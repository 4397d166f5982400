/* SPDX-License-Identifier: MIT */
/*
 * ops_libevent.h: the benchmark adapter (see ops.h) for libevent 2.1, epoll
 * backend, optionally with EVENT_BASE_FLAG_PRECISE_TIMER (variant "precise":
 * CLOCK_MONOTONIC instead of CLOCK_MONOTONIC_COARSE, and a timerfd for
 * sub-millisecond waits).
 *
 * libevent timeouts are timevals, so delays are rounded up to the next
 * microsecond. Restart is event_add on a pending event, which moves it in the
 * min-heap. Outside a callback event_add reads the clock on every call (the
 * cached time only exists while the loop runs): that is part of its cost.
 */
#ifndef TICKLOOP_BENCHES_OPS_LIBEVENT_H
#define TICKLOOP_BENCHES_OPS_LIBEVENT_H

#include <cstdint>
#include <cstring>
#include <string>

#include <event2/event.h>
#include <event2/event_struct.h>

#include "latency.h"
#include "ops.h"

namespace bench {

/* A base on epoll, precise or not; NULL if libevent cannot give one. */
inline event_base *libevent_base_new(bool precise) {
    event_config *cfg = event_config_new();
    if (!cfg) return nullptr;
    /* Forbid the other backends so the comparison is epoll against epoll. */
    event_config_avoid_method(cfg, "poll");
    event_config_avoid_method(cfg, "select");
    if (precise) event_config_set_flag(cfg, EVENT_BASE_FLAG_PRECISE_TIMER);
    event_base *base = event_base_new_with_config(cfg);
    event_config_free(cfg);
    return base;
}

inline timeval libevent_tv(uint64_t ns) {
    uint64_t us = (ns + 999) / 1000;
    timeval tv;
    tv.tv_sec = (time_t)(us / 1000000);
    tv.tv_usec = (suseconds_t)(us % 1000000);
    return tv;
}

struct LibeventOps {
    using Timer = struct event;
    static constexpr uint64_t resolution_ns = 1000;

    event_base *base;
    bool precise;
    uint64_t fired = 0;

    explicit LibeventOps(const char *variant)
        : precise(variant && std::strcmp(variant, "precise") == 0) {
        base = libevent_base_new(precise);
    }
    ~LibeventOps() {
        if (base) event_base_free(base);
    }
    LibeventOps(const LibeventOps &) = delete;
    LibeventOps &operator=(const LibeventOps &) = delete;

    bool ok() const { return base != nullptr; }
    std::string error() const { return "event_base_new_with_config failed"; }
    static std::string version() { return event_get_version(); }
    std::string name() const { return "libevent " + version() + (precise ? " precise" : ""); }

    static void on_timer(evutil_socket_t, short, void *self) {
        ++static_cast<LibeventOps *>(self)->fired;
    }

    void init(Timer &t) { evtimer_assign(&t, base, on_timer, this); }
    void start(Timer &t, uint64_t delay_ns) {
        timeval tv = libevent_tv(delay_ns);
        evtimer_add(&t, &tv);
    }
    void restart(Timer &t, uint64_t delay_ns) { start(t, delay_ns); }
    void stop(Timer &t) { evtimer_del(&t); }
    /* event_add reads the clock itself outside the loop: nothing to refresh. */
    void update_time() {}
    void run_nowait() { event_base_loop(base, EVLOOP_NONBLOCK); }
    void run() { event_base_dispatch(base); }
    void close(Timer *, size_t) {}

    /* Latency rows (ops.h). */
    static void on_fire(evutil_socket_t, short, void *sink) {
        uint64_t now = mono_ns(); /* first: the library's own work is not ours */
        static_cast<FireSink *>(sink)->fire(now);
    }
    void init_fire(Timer &t, FireSink *sink) { evtimer_assign(&t, base, on_fire, sink); }
    /* The deadline event_add computed, event.ev_timeout, on libevent's
       monotonic clock (CLOCK_MONOTONIC_COARSE by default, CLOCK_MONOTONIC
       when precise; both share CLOCK_MONOTONIC's time base). Its microsecond
       field can carry libevent's common-timeout tag in its high bits; these
       events use none, but it is masked as libevent itself does. */
    uint64_t arm(Timer &t, uint64_t delay_ns) {
        start(t, delay_ns);
        return (uint64_t)t.ev_timeout.tv_sec * kSec +
               (uint64_t)(t.ev_timeout.tv_usec & 0xfffff) * kUs;
    }
    std::string latency_note() const {
        return std::string("backend ") + event_base_get_method(base) +
               (precise ? "; waits through a timerfd (ns) and CLOCK_MONOTONIC; "
                        : "; epoll_wait timeouts in whole ms (rounded up), "
                          "CLOCK_MONOTONIC_COARSE; ") +
               "delays rounded up to whole us; ";
    }
};

} // namespace bench

#endif /* TICKLOOP_BENCHES_OPS_LIBEVENT_H */
