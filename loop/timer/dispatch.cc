/* SPDX-License-Identifier: MIT */
/*
 * The timer queue's dispatch of due timers (timer_queue.h), the next
 * wake-up the loop waits for, and the rebase after a clock went back;
 * timer.cc starts and stops the timers (and says how a start during a
 * dispatch is deferred).
 *
 * Dispatch is collect, then run (libuv's uv__run_timers and its ready queue,
 * Seastar's timer_set::expire), one domain after the other in tl_clock
 * order, in chunks: up to kChunk due timers are popped from the domain's
 * instance into the ready list, in the backend's order, then their
 * callbacks run from the head of that list; then the next chunk, until
 * nothing is due or max_timers_per_iteration callbacks ran. A chunk is small
 * enough that its timers are still in cache when their callbacks run (one
 * list of 8192 was not: expiry at 1e6 timers took 1.6x as long). The rules
 * of the contract hold by construction:
 * - "a timer (re)started during dispatch does not run again in the same
 *   iteration": one started with a deadline the dispatch could still pop is
 *   parked in the deferred list, out of the backend's reach, and inserted
 *   when the dispatch ends (it is the newest insertion either way, so ties
 *   keep start order); any other start is beyond its domain's dispatch
 *   time, or on a domain this dispatch does not run (decided before any
 *   callback), so no timer runs twice in one iteration whatever clock it
 *   moves to;
 * - "a timer stopped before its turn does not run": stopping or restarting a
 *   queued (or deferred) timer unlinks it, O(1);
 * - ties keep their order: chunks are popped in the backend's order, and what
 *   the cap leaves inside keeps its rank against timers started later;
 * - "a repeating timer is re-armed at now + repeat before its callback": it
 *   goes back into the backend just before its callback runs, so the callback
 *   sees it active and may stop or restart it.
 * The dispatch holds no pointer across a callback (it takes the head afresh
 * each time), so callbacks may stop, restart or free any timer they stopped.
 */
#include "loop/clock.h"
#include "loop/lateness.h"
#include "loop/timer/state.h"
#include "loop/verify.h"

using namespace tl::detail;

namespace {

/* Wake-up time of a domain's instance: next_wakeup, else next_expiry. */
uint64_t wakeup_of(const tl_timer_backend *b, void *self) noexcept {
    return b->next_wakeup ? b->next_wakeup(self) : b->next_expiry(self);
}

/* The periodic re-arm: the first deadline + k * period (k >= 1) later than
   now, saturating at UINT64_MAX. Pre: deadline <= now, period > 0. */
uint64_t next_period(uint64_t deadline, uint64_t period, uint64_t now) noexcept {
    uint64_t k = (now - deadline) / period + 1;
    if (k > (UINT64_MAX - deadline) / period) return UINT64_MAX;
    return deadline + k * period;
}

/* Timers per collect-then-run chunk: 256 timers are 16 KiB of handles, so
   they are still in L1/L2 when their callbacks run after the collect. */
constexpr uint64_t kChunk = 256;

/* t, popped from domain d's instance, goes to the deferred list for the
   next dispatch of d (a backend without reserve: TIMER_FRESH, or due with
   fresh timers behind it). */
void carry(TimerQueue &q, TimerDomain &d, tl_timer *t) noexcept {
    if ((t->flags & TIMER_FRESH) && d.fresh) --d.fresh;
    t->flags = (t->flags & ~TIMER_FRESH) | TIMER_DEFERRED;
    q.deferred.append(t);
}

/* A backend without reserve, at the dispatch's end: the fresh timers of d
   (due at its dispatch time) are popped into the deferred list, so that
   none stays fresh after its dispatch; due timers a cap left before them
   come out too, in the backend's order, which is the order they run in
   first at the next dispatch (as do a few more when fresh timers were
   stopped: d.fresh is a bound). A tick-order backend may keep a due timer
   back: it stays fresh, and is deferred when popped, an iteration late. */
[[gnu::noinline]] void carry_fresh(TimerQueue &q, TimerDomain &d) noexcept {
    while (d.fresh) {
        tl_timer *t = q.backend->pop_expired(d.instance, d.dispatch_now);
        if (!t) break;
        carry(q, d, t);
    }
    d.fresh = 0;
}

/* The deferred list holds, between dispatches, only timers a dispatch
   popped and deferred (TIMER_FRESH; a backend without reserve). Moves d's
   into the ready list, in their order, before d's dispatch pops anything. */
[[gnu::noinline]] void release_deferred(tl_loop *loop, TimerDomain &d, uint64_t cap) noexcept {
    TimerQueue &q = loop->timers;
    tl_timer *t = q.deferred.head;
    while (t && q.ready.count < cap) {
        tl_timer *next = next_of(t);
        if (&domain_of(loop, t) == &d) {
            q.deferred.unlink(t);
            t->flags = (t->flags & ~TIMER_DEFERRED) | TIMER_READY;
            q.ready.append(t);
        }
        t = next;
    }
}

/* A timer popped at now (from instance self of backend b), its callback
   next: a repeating one is re-armed before the callback (the contract), so
   the callback sees it active and may stop or restart it; both next
   deadlines are beyond now: never deferred. Any other is inactive. */
inline void rearm_or_deactivate(tl_loop *loop, const tl_timer_backend *b, void *self, uint64_t now,
                                tl_timer *t) noexcept {
    if (t->repeat) {
        t->deadline = t->flags & TIMER_PERIODIC ? next_period(t->deadline, t->repeat, now)
                                                : sat_add(now, t->repeat);
        if (b->insert(self, t) < 0) {
            /* It runs this once more, then is inactive: say so. */
            ++loop->stats.timers_rearm_failed;
            deactivate(loop, t);
        }
    } else {
        deactivate(loop, t);
    }
}

/* Pops the due timers of domain d at its dispatch time into the ready list,
   a chunk at a time, and runs them (see the top of this file), up to cap
   callbacks; returns the callbacks run. */
uint64_t dispatch_domain(tl_loop *loop, TimerDomain &d, uint64_t cap) noexcept {
    TimerQueue &q = loop->timers;
    const tl_timer_backend *b = q.backend;
    void *self = d.instance;
    const uint64_t now = d.dispatch_now;
    uint64_t fired = 0, popped = 0;
    /* Timers an earlier dispatch deferred after popping them (TIMER_FRESH)
       run first: they are due, and were next in the backend's order. Only
       a backend without reserve leaves any; with reserve, the deferred list
       holds the timers this dispatch's callbacks parked, which wait for the
       next iteration whatever domain they are on. */
    if (q.deferred.count && !b->reserve) [[unlikely]]
        release_deferred(loop, d, cap);
    /* The cap counts callbacks (max_timers_per_iteration), not pops: a
       queued timer that a callback stops leaves its turn to the next due one,
       so the next chunk is sized from what actually ran. */
    while (fired < cap) {
        /* Collect. Nothing runs here, and nothing a callback starts is
           collected (place() defers what is due, or marks it TIMER_FRESH
           and it is deferred here), so every chunk is what was due at
           `now`, in the backend's order. Timers released above count
           against the cap too. */
        uint64_t room = cap - fired > q.ready.count ? cap - fired - q.ready.count : 0;
        uint64_t chunk = room < kChunk ? room : kChunk;
        uint64_t n = 0;
        while (n < chunk) {
            tl_timer *t = b->pop_expired(self, now);
            if (!t) break;
            if (t->flags & TIMER_FRESH) [[unlikely]] {
                carry(q, d, t); /* started during this dispatch: the next runs it */
                continue;
            }
            TL_DEBUG_CHECK_POPPED(loop, t, now, popped + n == 0);
            q.ready.append(t);
            t->flags |= TIMER_READY;
            ++n;
        }
        popped += n;
        TL_DEBUG_VERIFY(loop, "timer collect");

        /* Run. Each callback may stop or restart any queued timer (unlinking
           it) or free one it stopped, so the head is read afresh every time. */
        while (tl_timer *t = q.ready.head) {
            q.ready.unlink(t);
            t->flags &= ~TIMER_READY;
            lateness_record(loop->lateness, now, t->deadline);
            rearm_or_deactivate(loop, b, self, now, t);
            ++loop->stats.timers_fired;
            ++fired;
            t->cb(loop, t); /* may free t: not touched after this */
            TL_DEBUG_VERIFY(loop, "timer callback");
        }
        if (n < chunk) break; /* nothing more is due */
    }
    return fired;
}
} // namespace

namespace tl::detail {

void timers_rebase(tl_loop *loop, unsigned c, uint64_t now) noexcept {
    const tl_timer_backend *b = loop->timers.backend;
    void *&instance = loop->timers.domain[c].instance;
    if (!instance) return;
    void *fresh = b->create(&loop->timers.config, now);
    /* Without memory the old instance stays: an exact backend is still
       right; a wheel may hand a timer out up to the step early. */
    if (!fresh) return;
    void *old = instance;
    /* Everything, in the old order (so ties keep it): pop_expired at the end
       of time returns every timer, with at most a few empty rounds on a
       wheel (timer_backend.h). */
    while (b->count(old)) {
        tl_timer *t = b->pop_expired(old, UINT64_MAX);
        if (!t) continue;
        /* A periodic timer the step left more than a period ahead goes back
           onto its grid: the first deadline + k * period after now. */
        if ((t->flags & TIMER_PERIODIC) && t->deadline > now && t->deadline - now > t->repeat)
            t->deadline -= (t->deadline - now - 1) / t->repeat * t->repeat;
        if (b->insert(fresh, t) < 0) {
            ++loop->stats.timers_rearm_failed;
            deactivate(loop, t);
        }
    }
    b->destroy(old);
    instance = fresh;
}
uint64_t timers_next_wakeup(tl_loop *loop, bool for_wait) noexcept {
    TimerQueue &q = loop->timers;
    if (q.deferred.count) [[unlikely]]
        return 0; /* deferred by the last dispatch: due */
    uint64_t least = UINT64_MAX;
    for (unsigned c = 0; c < kClocks; ++c) {
        TimerDomain &d = q.domain[c];
        if (!d.instance) continue;
        uint64_t wake = wakeup_of(q.backend, d.instance);
        if (wake == UINT64_MAX) continue; /* no timer, or none that ever fires */
        /* The wait's domain has the time the iteration read after the last
           wait; a timerfd's domain was read at the last dispatch at best. */
        uint64_t now = for_wait && d.by_wait ? d.now : read_clock(loop, c);
        if (wake <= now) return 0;
        if (for_wait && !d.by_wait) {
            d.now = now;
            clock_arm(loop, c, wake);
            continue;
        }
        if (wake - now < least) least = wake - now;
    }
    return least;
}

uint64_t timers_dispatch(tl_loop *loop) noexcept {
    TimerQueue &q = loop->timers;
    const tl_timer_backend *b = q.backend;
    const uint64_t cap = q.max_timers_per_iteration;
    /* The domains this dispatch runs, decided (and their clocks read) before
       any callback: a timer a callback starts on one of them with a due
       deadline is deferred, on another it waits for the next iteration, so
       no timer runs twice in one iteration whatever clock it moves to. The
       wait's domain runs on the time the iteration has just read; a
       timerfd's domain reads its clock, and only while it holds timers (a
       clock without timers costs neither a read nor a call). */
    for (unsigned c = 0; c < kClocks; ++c) {
        TimerDomain &d = q.domain[c];
        if (!d.instance) continue;
        if (!d.by_wait) {
            if (b->count(d.instance) == 0 && q.deferred.count == 0) [[likely]]
                continue;
            d.now = read_clock(loop, c);
        }
        /* The clock went back (a wall-clock step): the instance was driven
           to a later time than now, which a wheel cannot go back from. */
        if (d.now < d.dispatched) [[unlikely]]
            timers_rebase(loop, c, d.now);
        d.dispatched = d.now;
        d.dispatch_now = d.now;
        q.dispatching |= 1u << c;
    }
    uint64_t fired = 0;
    for (unsigned c = 0; c < kClocks; ++c)
        if (dispatching(q, c) && fired < cap)
            fired += dispatch_domain(loop, q.domain[c], cap - fired);
    for (unsigned c = 0; c < kClocks; ++c)
        if (dispatching(q, c) && q.domain[c].fresh) [[unlikely]]
            carry_fresh(q, q.domain[c]);
    q.dispatching = 0;

    /* The deferred timers, in start order: each is the newest insertion. Their
       room was reserved when they were parked (place). Without reserve,
       those the dispatch popped and deferred wait for the next one. */
    while (tl_timer *t = b->reserve ? q.deferred.head : nullptr) {
        q.deferred.unlink(t);
        t->flags &= ~TIMER_DEFERRED;
        if (b->insert(domain_of(loop, t).instance, t) < 0) deactivate(loop, t);
    }
    TL_DEBUG_VERIFY(loop, "timer dispatch");
    return fired;
}

} // namespace tl::detail
