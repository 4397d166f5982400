/* SPDX-License-Identifier: MIT */
/*
 * Internal to loop/: the loop's timers, one timer domain per clock and the
 * queue that drives them (timer.cc).
 *
 * A domain is everything the loop keeps for the timers of one tl_clock: the
 * timer backend's instance holding them (timers on different clocks are
 * never ordered against each other, and an instance is a pure structure
 * driven by one clock's time), that clock's time as the loop last read it,
 * the state of the dispatch running them, and the waker that ends the
 * loop's wait at their next wake-up. The three domains are alike and live
 * in one array indexed by tl_clock; they differ only in their waker:
 * - the I/O backend's wait, whose deadline is on CLOCK_MONOTONIC: that
 *   domain's wake-up bounds the wait, and its time is the one each
 *   iteration reads after the wait (tl_now);
 * - a timerfd on the clock (BOOTTIME, REALTIME; clock.cc opens it with the
 *   domain's instance, on the first timer started on the clock): the wait
 *   watches it like any fd, and the domain reads its clock when it needs it.
 *
 * The queue holds the domains, the backend they are instances of, and the
 * two lists of timers that are active but in no instance: the ready list
 * (popped by the dispatch, callback not run yet) and the deferred list
 * (started by a callback with a deadline the dispatch could still pop).
 * What it offers the rest of the loop is below the structures.
 */
#ifndef TICKLOOP_LOOP_TIMER_QUEUE_H
#define TICKLOOP_LOOP_TIMER_QUEUE_H

#include <cstdint>

#include "tickloop/timer_backend.h"
#include "timers/node.h"

struct tl_loop;

namespace tl::detail {

inline constexpr int kClocks = 3; /* TL_CLOCK_MONOTONIC, _BOOTTIME, _REALTIME */

struct TimerDomain {
    /* Hot: read by every start on the clock. */
    uint64_t now;   /* the clock's time as the loop last read it              */
    void *instance; /* the backend's instance; null until the clock's first
                       timer (the wait's domain: created with the loop)       */
    /* The time the running dispatch runs this domain's timers at, if it runs
       them (its bit in TimerQueue::dispatching, decided and the clock read
       before any callback). A timer started on the domain then with a
       deadline at or before dispatch_now is deferred: the dispatch could
       still pop it. */
    uint64_t dispatch_now;
    /* The latest time the instance was driven to: a clock found before it
       (a wall-clock step back) gets a fresh instance first (timers_rebase),
       since a wheel cannot go back. */
    uint64_t dispatched;
    /* The waker. by_wait: the I/O backend's wait, whose deadline is on this
       clock (MONOTONIC); else the timerfd fd (-1 until opened) with the
       expiry it holds (armed, 0: none) and the internal watcher of fd. */
    bool by_wait;
    int fd;
    uint64_t armed;
    tl_io watcher;
    /* TIMER_FRESH timers the running dispatch inserted and has not popped,
       at most (a stop does not count down: the stop path stays as short):
       the dispatch pops that many out before it ends (timer/dispatch.cc). */
    uint32_t fresh;
};

struct TimerQueue {
    /* Hot: read by every start. */
    const tl_timer_backend *backend; /* every domain's instance is one of it      */
    /* The collect interval as leeway bits | kLentLeeway, or 0: what a
       timer without a leeway of its own gets at start. */
    uint32_t collect_flags;
    /* Bit c: the running dispatch runs domain c (decided, and the clock
       read, before any callback); 0 between dispatches. */
    uint32_t dispatching;
    /* Started during a dispatch with a deadline already due on a domain
       being dispatched: parked here, out of the backend's reach, so that a
       later chunk of the same dispatch cannot pop them; inserted when the
       dispatch ends (flag TIMER_DEFERRED). With a backend without reserve,
       such a timer is inserted at its start instead (TIMER_FRESH), and
       comes here when popped, by the dispatch or at its end; it stays until
       the next dispatch of its domain runs it first. */
    TimerList deferred;
    /* Popped by this iteration's dispatch, callbacks not run yet, in pop
       order (flag TIMER_READY; same links as the deferred list). Empty
       outside timers_dispatch. */
    TimerList ready;
    TimerDomain domain[kClocks]; /* by tl_clock */
    uint64_t max_timers;         /* 0: unlimited */
    uint64_t max_timers_per_iteration;
    tl_timer_config config; /* what every instance is created with */
#ifndef NDEBUG
    uint64_t last_pop_deadline; /* the previous pop of this dispatch (EXACT) */
#endif
};

/* The running dispatch runs domain c. */
inline bool dispatching(const TimerQueue &q, unsigned c) noexcept {
    return q.dispatching >> c & 1;
}

/* The queue's offer to the rest of the loop (timer/timer.cc, timer/dispatch.cc).
 * The tl_timer_* API (timer.cc) starts and stops timers through it. */

/* Sets up the queue with every domain's instance absent but the wait's,
 * created at that clock's time (read first); 0, or -ENOMEM. timers_close
 * destroys the instances (clock.cc closes the timerfds). */
int timers_open(tl_loop *loop, const tl_timer_backend *backend, const tl_timer_config &config,
                uint32_t collect_flags, uint64_t max_timers,
                uint64_t max_timers_per_iteration) noexcept;
void timers_close(tl_loop *loop) noexcept;
/* Creates domain c's instance at the clock's time, if missing; 0, -ENOMEM. */
int timers_open_domain(tl_loop *loop, unsigned c) noexcept;
/* The time until the next wake-up over the domains, in ns: 0 if a timer is
 * due, UINT64_MAX if none. A domain's wake-up is its instance's next_wakeup
 * (else next_expiry): the earliest deadline, or with leeway the latest time
 * that keeps every timer's window.
 * - for_wait (the iteration, before its wait): a domain woken by its timerfd
 *   reads its clock and has its timerfd armed at that wake-up, which then
 *   does not bound the wait; the wait's domain compares with the time the
 *   iteration read after the last wait.
 * - else (tl_loop_timeout, for a host): every clock read afresh, every
 *   wake-up bounds the answer, and nothing is written or armed. */
uint64_t timers_next_wakeup(tl_loop *loop, bool for_wait) noexcept;
/* Runs the due timers of every domain, up to max_timers_per_iteration
 * callbacks; returns how many ran. The ready and deferred lists are empty
 * again when it returns. */
uint64_t timers_dispatch(tl_loop *loop) noexcept;
/* Timers active in the loop: inside the instances plus both lists. */
uint64_t timers_active(const tl_loop *loop) noexcept;
/* After clock c went back to now (a wall-clock step, or the test seam
 * installed): moves c's timers into a fresh instance created at now,
 * periodic ones back onto their grid. */
void timers_rebase(tl_loop *loop, unsigned c, uint64_t now) noexcept;

} // namespace tl::detail

#endif /* TICKLOOP_LOOP_TIMER_QUEUE_H */
