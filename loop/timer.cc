/* SPDX-License-Identifier: MIT */
/*
 * The timer queue (timer_queue.h) and the tl_timer_* API on it: starting
 * and stopping timers in their clock's domain, the dispatch of due timers,
 * the next wake-up the loop waits for, and the rebase after a clock went
 * back.
 *
 * A timer is active (TIMER_ACTIVE) while it is inside its domain's backend
 * instance, or in one of the queue's two lists of timers no instance holds:
 * the ready list (TIMER_QUEUED: popped, callback not run yet) and the
 * deferred list (TIMER_DEFERRED: started during a dispatch, already due).
 * Its clock bits name its domain. `reserved`
 * then holds the owning loop's id, mixed with the timer's address
 * (timer_owner), so that a handle used with the wrong loop is refused instead
 * of corrupting a structure, and tl_timer_init can find the loop of a timer
 * still active to stop it there. The flags layout is in
 * handle_flags.h.
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
 *
 * The one case the deferral changes: a timer started during a dispatch with a
 * due deadline is inserted at the dispatch's end, after its start returned 0.
 * So that this insert cannot fail, the room for it is reserved when it is
 * parked (the backend's reserve: a heap grows then, and the start returns
 * -ENOMEM if it cannot), and every insert made while timers are parked keeps
 * that room (reserve_parked; the wheels' reserve is a no-op, their insert
 * never fails). A custom backend without reserve gets the timer at its
 * start instead, so that a failed insert is the start's error, marked
 * TIMER_FRESH: if the dispatch pops it, it goes to the deferred list rather
 * than the ready list, and stays there, out of every instance, until the
 * next dispatch of its domain runs it first (it is due, and was next in the
 * backend's order when popped). A fresh timer the dispatch did not pop (it
 * was started by a callback of its last chunk, or a cap stopped it) keeps
 * its mark, with the low bits of its dispatch's count: a later dispatch
 * pops it as any due timer (one four dispatches later would defer it once
 * more: an iteration late, never lost).
 *
 * The queue calls the backend through its vtable only: it knows no backend
 * but by its caps. A restart (a heartbeat per packet: the hottest call) is
 * one call of reschedule, or remove and insert where a backend has none.
 */
#include <cerrno>
#include <cstdio>

#include "clock.h"
#include "handle_flags.h"
#include "lifecycle.h"
#include "loop.h"
#include "timer_queue.h"
#include "timers/timers.h"
#include "verify.h"

using namespace tl::detail;

namespace {

bool owned_by_other(const tl_loop *loop, const tl_timer *t) noexcept {
    return (t->flags & TIMER_ACTIVE) && t->reserved != timer_owner(loop->id, t);
}

/* t's deadline has passed by d's time: a restart of t is a remove and an
   insert, never the backend's reschedule, which may leave t's old place
   (due now) to be visited for nothing: a wheel's lazy reschedule, with the
   wheel's time behind the loop's (tl_update_time, a run without an
   iteration), made tl_loop_timeout return 0 with nothing due. */
bool overdue(const TimerDomain &d, const tl_timer *t) noexcept {
    return t->deadline <= d.now;
}

/* A dispatch is running that could still pop a timer at deadline in d. */
bool must_defer(const TimerDomain &d, uint64_t deadline) noexcept {
    return d.dispatching && deadline <= d.dispatch_now;
}

TimerDomain &domain_of(tl_loop *loop, const tl_timer *t) noexcept {
    return loop->timers.domain[timer_clock(t)];
}

/* Wake-up time of a domain's instance: next_wakeup, else next_expiry. */
uint64_t wakeup_of(const tl_timer_backend *b, void *self) noexcept {
    return b->next_wakeup ? b->next_wakeup(self) : b->next_expiry(self);
}

/* A timer without a leeway of its own takes the loop's collect interval
   (none when collect_flags is 0) when it starts while inactive or moves to
   another clock, not at a restart (the heartbeat's path stays as it was; a
   timer keeps what it was lent). The lent bits stay after it stops (so
   stopping costs nothing more); tl_timer_leeway hides them while it is
   inactive, and lend() replaces them at the next start, since that may be
   on another loop. One test on the start path when nothing is lent. */
[[gnu::noinline]] void lend(const tl_loop *loop, tl_timer *t) noexcept {
    uint32_t f = t->flags;
    if (f & TIMER_LOOP_LEEWAY) f &= ~(kLeewayMask | TIMER_LOOP_LEEWAY);
    if (!(f & kLeewayMask)) f |= loop->timers.collect_flags;
    t->flags = f;
}
[[gnu::always_inline]] inline void lend_collect_interval(const tl_loop *loop,
                                                         tl_timer *t) noexcept {
    if ((t->flags & TIMER_LOOP_LEEWAY) | loop->timers.collect_flags) [[unlikely]]
        lend(loop, t);
}

/* Before t goes into instance self or the deferred list while a dispatch
   runs: room in self for t and for every timer the dispatch may still insert
   before it ends (the parked ones, and the ready ones, which a re-arm puts
   back), so that the inserts at the dispatch's end cannot fail. Counting the
   timers of every clock is more than one instance needs, never less.
   0 or -ENOMEM. */
[[gnu::noinline]] int reserve_parked(TimerQueue &q, void *self, const tl_timer *t) noexcept {
    if (!q.backend->reserve) return 0;
    return q.backend->reserve(self, t, q.deferred.count + q.ready.count + 1);
}

/* A backend without reserve: t, due for the running dispatch, goes into d's
   instance now (its insert's error is the start's), marked so that the
   dispatch defers it if it pops it. */
[[gnu::noinline]] int insert_fresh(TimerQueue &q, TimerDomain &d, tl_timer *t) noexcept {
    int r = q.backend->insert(d.instance, t);
    if (r == 0)
        t->flags = (t->flags & ~TIMER_FRESH_BITS) | TIMER_FRESH |
                   (q.dispatches << TIMER_FRESH_EPOCH_SHIFT & TIMER_FRESH_EPOCH);
    return r;
}

/* Pre: t in neither an instance nor a list; its clock bits name d (whose
   instance exists). Puts t at deadline: in the deferred list if a dispatch
   is running that could still pop it, else in d's instance. Returns 0 or the
   backend's insert (or reserve) error. */
[[gnu::always_inline]] inline int place(tl_loop *loop, TimerDomain &d, tl_timer *t,
                                        uint64_t deadline) noexcept {
    t->deadline = deadline;
    TimerQueue &q = loop->timers;
    const bool defer = must_defer(d, deadline);
    if (defer || q.deferred.count) [[unlikely]] {
        if (!q.backend->reserve)
            return defer ? insert_fresh(q, d, t) : q.backend->insert(d.instance, t);
        int r = reserve_parked(q, d.instance, t);
        if (r < 0) return r;
        if (defer) {
            q.deferred.append(t);
            t->flags |= TIMER_DEFERRED;
            return 0;
        }
    }
    return q.backend->insert(d.instance, t);
}

/* Pre: t active. Post: t in neither an instance nor a list (still counted
   active). */
void detach(tl_loop *loop, tl_timer *t) noexcept {
    TimerQueue &q = loop->timers;
    if (t->flags & TIMER_QUEUED)
        q.ready.unlink(t);
    else if (t->flags & TIMER_DEFERRED)
        q.deferred.unlink(t);
    else
        q.backend->remove(domain_of(loop, t).instance, t);
    t->flags &= ~(TIMER_QUEUED | TIMER_DEFERRED | TIMER_FRESH_BITS);
}

/* Pre: t active and detached. Post: t inactive. */
void deactivate(tl_loop *loop, tl_timer *t) noexcept {
    t->flags &= ~TIMER_STATE;
    handle_deactivated(loop, t->flags & TIMER_UNREF);
}

/* Pre: t not active. Starts t at deadline; on failure it stays inactive. */
[[gnu::always_inline]] inline int arm(tl_loop *loop, TimerDomain &d, tl_timer *t,
                                      uint64_t deadline) noexcept {
    lend_collect_interval(loop, t);
    int r = place(loop, d, t, deadline);
    if (r < 0) return r;
    t->flags |= TIMER_ACTIVE;
    t->reserved = timer_owner(loop->id, t);
    handle_activated(loop, t->flags & TIMER_UNREF);
    return 0;
}

/* Pre: t active. Post: t inactive. */
void disarm(tl_loop *loop, tl_timer *t) noexcept {
    detach(loop, t);
    deactivate(loop, t);
}

/* Pre: t active, owned by loop, on clock c. Moves it to deadline. Returns 0,
   or insert's error when t had to be re-inserted (it was queued or deferred,
   the backend has no reschedule, or it must be deferred), which leaves t
   inactive. */
[[gnu::always_inline]] inline int rearm(tl_loop *loop, tl_timer *t, unsigned c,
                                        uint64_t deadline) noexcept {
    const tl_timer_backend *b = loop->timers.backend;
    TimerDomain &d = loop->timers.domain[c];
    bool inside = !(t->flags & (TIMER_QUEUED | TIMER_DEFERRED));
    if (inside && !must_defer(d, deadline) && !overdue(d, t) && b->reschedule) {
        b->reschedule(d.instance, t, deadline); /* sets t->deadline */
        t->flags &= ~TIMER_FRESH_BITS;          /* no longer due for the dispatch */
        return 0;
    }
    detach(loop, t);
    int r = place(loop, d, t, deadline);
    if (r < 0) deactivate(loop, t);
    return r;
}

/* Pre: t active, owned by loop. Moves it to deadline on clock c (possibly
   another clock than its own: then out of one instance, into the other).
   Same result as rearm. */
[[gnu::noinline]] int move(tl_loop *loop, tl_timer *t, unsigned c, uint64_t deadline) noexcept {
    if (timer_clock(t) == c) return rearm(loop, t, c, deadline);
    detach(loop, t);
    t->flags = (t->flags & ~TIMER_CLOCK_MASK) | c << TIMER_CLOCK_SHIFT;
    lend_collect_interval(loop, t);
    int r = place(loop, loop->timers.domain[c], t, deadline);
    if (r < 0) deactivate(loop, t);
    return r;
}

/* tl_timer_start of an active timer on another clock or periodic: moves it
   to deadline on MONOTONIC, no longer periodic. Kept out of the heartbeat's
   inlined path. */
[[gnu::noinline]] int make_relative(tl_loop *loop, tl_timer *t, uint64_t deadline) noexcept {
    t->flags &= ~TIMER_PERIODIC;
    return move(loop, t, TL_CLOCK_MONOTONIC, deadline);
}

/* Starting one more timer would exceed tl_loop_options.max_timers. */
bool over_max_timers(const tl_loop *loop) noexcept {
    return loop->timers.max_timers && timers_active(loop) >= loop->timers.max_timers;
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

/* A TIMER_FRESH t was started during the running dispatch (one that did
   not pop it keeps the mark, of its own dispatch). */
bool fresh_now(const TimerQueue &q, const tl_timer *t) noexcept {
    return (t->flags & TIMER_FRESH_EPOCH) ==
           (q.dispatches << TIMER_FRESH_EPOCH_SHIFT & TIMER_FRESH_EPOCH);
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
            t->flags = (t->flags & ~TIMER_DEFERRED) | TIMER_QUEUED;
            q.ready.append(t);
        }
        t = next;
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
    /* Timers a dispatch deferred after popping them (TIMER_FRESH) run
       first: they are due, and were next in the backend's order. */
    if (q.deferred.count) [[unlikely]]
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
                if (fresh_now(q, t)) {
                    /* Started during this dispatch: the next one runs it. */
                    t->flags = (t->flags & ~TIMER_FRESH_BITS) | TIMER_DEFERRED;
                    q.deferred.append(t);
                    continue;
                }
                t->flags &= ~TIMER_FRESH_BITS; /* an earlier dispatch's: due */
            }
            TL_DEBUG_CHECK_POPPED(loop, t, now, popped + n == 0);
            q.ready.append(t);
            t->flags |= TIMER_QUEUED;
            ++n;
        }
        popped += n;
        TL_DEBUG_VERIFY(loop, "timer collect");

        /* Run. Each callback may stop or restart any queued timer (unlinking
           it) or free one it stopped, so the head is read afresh every time. */
        while (tl_timer *t = q.ready.head) {
            q.ready.unlink(t);
            t->flags &= ~TIMER_QUEUED;
            lateness_record(loop->lateness, now, t->deadline);
            if (t->repeat) {
                /* Re-armed before the callback (the contract), so the callback
                   sees it active and may stop or restart it. Both next
                   deadlines are beyond the dispatch's now: never deferred. */
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

int timers_open(tl_loop *loop, const tl_timer_backend *backend, const tl_timer_config &config,
                uint32_t collect_flags, uint64_t max_timers,
                uint64_t max_timers_per_iteration) noexcept {
    TimerQueue &q = loop->timers;
    q.backend = backend;
    q.config = config;
    q.collect_flags = collect_flags;
    q.max_timers = max_timers;
    q.start_slow = (max_timers ? kSlowMaxTimers : 0u) | (collect_flags ? kSlowCollect : 0u);
    q.max_timers_per_iteration = max_timers_per_iteration;
    for (unsigned c = 0; c < kClocks; ++c) {
        /* The I/O backends' waits end at a CLOCK_MONOTONIC deadline. */
        q.domain[c].by_wait = c == TL_CLOCK_MONOTONIC;
        q.domain[c].fd = -1;
    }
    for (unsigned c = 0; c < kClocks; ++c)
        if (q.domain[c].by_wait) {
            int r = timers_open_domain(loop, c);
            if (r < 0) return r;
        }
    return 0;
}

int timers_open_domain(tl_loop *loop, unsigned c) noexcept {
    TimerQueue &q = loop->timers;
    TimerDomain &d = q.domain[c];
    if (d.instance) return 0;
    d.now = read_clock(loop, c);
    d.dispatched = d.now;
    d.instance = q.backend->create(&q.config, d.now);
    return d.instance ? 0 : -ENOMEM;
}

void timers_close(tl_loop *loop) noexcept {
    TimerQueue &q = loop->timers;
    for (TimerDomain &d : q.domain) {
        if (d.instance) q.backend->destroy(d.instance);
        d.instance = nullptr;
    }
}

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

uint64_t timers_active(const tl_loop *loop) noexcept {
    const TimerQueue &q = loop->timers;
    uint64_t n = q.ready.count + q.deferred.count;
    for (const TimerDomain &d : q.domain)
        if (d.instance) n += q.backend->count(d.instance);
    return n;
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
        d.dispatching = true;
    }
    q.start_slow |= kSlowDispatch;
    ++q.dispatches;
    uint64_t fired = 0;
    for (TimerDomain &d : q.domain)
        if (d.dispatching && fired < cap) fired += dispatch_domain(loop, d, cap - fired);
    for (TimerDomain &d : q.domain) d.dispatching = false;

    /* The deferred timers, in start order: each is the newest insertion. Their
       room was reserved when they were parked (place). Without reserve,
       those the dispatch popped and deferred wait for the next one. */
    while (tl_timer *t = b->reserve ? q.deferred.head : nullptr) {
        q.deferred.unlink(t);
        t->flags &= ~TIMER_DEFERRED;
        if (b->insert(domain_of(loop, t).instance, t) < 0) deactivate(loop, t);
    }
    q.start_slow &= ~kSlowDispatch;
    TL_DEBUG_VERIFY(loop, "timer dispatch");
    return fired;
}

} // namespace tl::detail

extern "C" {

namespace {

/* tl_timer_init of a timer its flags say is active: if its owner tag names a
   live loop, it is inside that loop's structures (the backend's links or a
   list point at it), and zeroing it would leave them pointing at a handle
   that no longer says so: a wheel then follows dead links, a heap runs it
   twice. So it is stopped there first, as tl_timer_stop would. Memory that
   only looks active (fresh, a copy, a freed loop's) names no live loop and
   is left to be zeroed. libuv and libev leave this undefined; here it is a
   stop, and a debug build says so on stderr, since it is a bug to fix (the
   timer is not stopped where the program meant it to be). */
[[gnu::noinline]] void stop_before_init(tl_timer *t) noexcept {
    tl_loop *loop = loop_by_id(t->reserved ^ timer_owner(0, t));
    if (!loop) return;
#ifndef NDEBUG
    check_loop_thread(loop, "tl_timer_init");
    std::fprintf(stderr,
                 "tickloop: tl_timer_init() on an active timer (%p): stopped it first; call "
                 "tl_timer_stop before initialising a timer again\n",
                 static_cast<void *>(t));
#endif
    disarm(loop, t);
    TL_DEBUG_VERIFY(loop, "tl_timer_init of an active timer");
}

/* tl_timer_start's every case but the in-place restart: a start of an
   inactive timer, or a restart that must leave its place (queued, deferred,
   deferred now, another clock or periodic before, or no reschedule). Out
   of line, so that the in-place restart needs no frame. */
[[gnu::noinline]] int start_relative(tl_loop *loop, tl_timer *t, uint64_t deadline,
                                     uint64_t repeat_ns) noexcept {
    if (t->flags & TIMER_ACTIVE) {
        /* A relative timer is a MONOTONIC one, not periodic. */
        int r = t->flags & (TIMER_CLOCK_MASK | TIMER_PERIODIC)
                    ? make_relative(loop, t, deadline)
                    : rearm(loop, t, TL_CLOCK_MONOTONIC, deadline);
        if (r < 0) return r;
    } else {
        if (over_max_timers(loop)) return -ENOSPC;
        t->flags &= ~(TIMER_CLOCK_MASK | TIMER_PERIODIC);
        int r = arm(loop, loop->timers.domain[TL_CLOCK_MONOTONIC], t, deadline);
        if (r < 0) return r;
    }
    t->repeat = repeat_ns;
    TL_DEBUG_VERIFY(loop, "tl_timer_start");
    return 0;
}

/* tl_timer_start of an inactive timer: when no dispatch runs, no option
   asks for more (start_slow) and the timer holds no lent leeway, it is
   armed here, on MONOTONIC, with nothing but the backend's insert and the
   bookkeeping; otherwise start_relative. Out of line, so that the in-place
   restart needs no frame. */
[[gnu::noinline]] int start_fresh(tl_loop *loop, tl_timer *t, uint64_t deadline,
                                  uint64_t repeat_ns) noexcept {
    TimerQueue &q = loop->timers;
    const uint32_t f = t->flags;
    if ((f & (TIMER_ACTIVE | TIMER_LOOP_LEEWAY)) | q.start_slow) [[unlikely]]
        return start_relative(loop, t, deadline, repeat_ns);
    /* A relative timer is a MONOTONIC one, not periodic. */
    t->flags = f & ~(TIMER_CLOCK_MASK | TIMER_PERIODIC);
    t->deadline = deadline;
    t->reserved = timer_owner(loop->id, t); /* read only while active */
    int r = q.backend->insert(q.domain[TL_CLOCK_MONOTONIC].instance, t);
    if (r < 0) [[unlikely]]
        return r;
    const uint32_t g = t->flags | TIMER_ACTIVE;
    t->flags = g;
    t->repeat = repeat_ns;
    handle_activated(loop, g & TIMER_UNREF);
    TL_DEBUG_VERIFY(loop, "tl_timer_start");
    return 0;
}

/* tl_timer_stop of a queued or deferred timer, out of line so that the
   common stop needs no saved register. */
[[gnu::noinline]] int stop_listed(tl_loop *loop, tl_timer *t) noexcept {
    disarm(loop, t);
    TL_DEBUG_VERIFY(loop, "tl_timer_stop");
    return 0;
}

} // namespace

TL_API void tl_timer_init(tl_timer *t, tl_timer_cb cb, void *data) {
    if (!t) return;
    if (t->flags & TIMER_ACTIVE) [[unlikely]]
        stop_before_init(t);
    *t = tl_timer{};
    t->cb = cb;
    t->data = data;
}

TL_API int tl_timer_start(tl_loop *loop, tl_timer *t, uint64_t timeout_ns, uint64_t repeat_ns) {
    if (!loop || !t || !t->cb || owned_by_other(loop, t)) return -EINVAL;
    TL_CHECK_LOOP_THREAD(loop);
    TimerQueue &q = loop->timers;
    TimerDomain &d = q.domain[TL_CLOCK_MONOTONIC];
    uint64_t deadline = sat_add(d.now, timeout_ns);
    /* The heartbeat's restart: a relative timer (MONOTONIC, not periodic)
       inside its instance, which no running dispatch could pop at its new
       deadline and whose deadline has not passed, moves in place. One test of the flags word, and
       nothing left to do after the backend's call. */
    constexpr uint32_t kInPlace =
        TIMER_STATE | TIMER_FRESH_BITS | TIMER_CLOCK_MASK | TIMER_PERIODIC;
    if ((t->flags & kInPlace) == TIMER_ACTIVE && !must_defer(d, deadline) && !overdue(d, t) &&
        q.backend->reschedule) [[likely]] {
        t->repeat = repeat_ns;
        q.backend->reschedule(d.instance, t, deadline);
        TL_DEBUG_VERIFY(loop, "tl_timer_start");
        return 0;
    }
    return start_fresh(loop, t, deadline, repeat_ns);
}

TL_API int tl_timer_start_at(tl_loop *loop, tl_timer *t, tl_clock clock, uint64_t deadline_ns,
                             uint64_t period_ns) {
    unsigned c = (unsigned)clock;
    if (!loop || !t || !t->cb || c >= (unsigned)kClocks || owned_by_other(loop, t)) return -EINVAL;
    TL_CHECK_LOOP_THREAD(loop);
    if (!(t->flags & TIMER_ACTIVE) && over_max_timers(loop)) return -ENOSPC;
    int r = clock_prepare(loop, c);
    if (r < 0) return r;
    if (t->flags & TIMER_ACTIVE) {
        r = move(loop, t, c, deadline_ns);
    } else {
        t->flags = (t->flags & ~TIMER_CLOCK_MASK) | c << TIMER_CLOCK_SHIFT;
        r = arm(loop, loop->timers.domain[c], t, deadline_ns);
    }
    if (r < 0) return r;
    if (period_ns)
        t->flags |= TIMER_PERIODIC;
    else
        t->flags &= ~TIMER_PERIODIC;
    t->repeat = period_ns;
    TL_DEBUG_VERIFY(loop, "tl_timer_start_at");
    return 0;
}

TL_API int tl_timer_set_leeway(tl_timer *t, uint64_t leeway_ns) {
    if (!t) return -EINVAL;
    /* 0 on a timer the loop lent its interval to keeps the loan: it has no
       leeway of its own either way. */
    if (leeway_ns == 0 && (t->flags & TIMER_LOOP_LEEWAY)) return 0;
    t->flags = (t->flags & ~(kLeewayMask | TIMER_LOOP_LEEWAY)) | leeway_bits(leeway_ns);
    return 0;
}

TL_API uint64_t tl_timer_leeway(const tl_timer *t) {
    if (!t) return 0;
    /* A loop's lent collect interval counts only while t is active. */
    if ((t->flags & (TIMER_LOOP_LEEWAY | TIMER_ACTIVE)) == TIMER_LOOP_LEEWAY) return 0;
    return timer_leeway(t);
}

TL_API tl_clock tl_timer_clock(const tl_timer *t) {
    return t ? (tl_clock)timer_clock(t) : TL_CLOCK_MONOTONIC;
}

TL_API int tl_timer_stop(tl_loop *loop, tl_timer *t) {
    if (!loop || !t || owned_by_other(loop, t)) return -EINVAL;
    TL_CHECK_LOOP_THREAD(loop);
    const uint32_t f = t->flags;
    if (!(f & (TIMER_QUEUED | TIMER_DEFERRED))) [[likely]] {
        if (f & TIMER_ACTIVE) {
            /* Inside its instance: the bookkeeping first (the backend reads
               no state bit), so that nothing is left after the backend's
               call and the path needs no saved registers. */
            t->flags = f & ~TIMER_ACTIVE;
            handle_deactivated(loop, f & TIMER_UNREF);
            TimerQueue &q = loop->timers;
            q.backend->remove(q.domain[(f & TIMER_CLOCK_MASK) >> TIMER_CLOCK_SHIFT].instance, t);
        }
    } else {
        return stop_listed(loop, t);
    }
    TL_DEBUG_VERIFY(loop, "tl_timer_stop");
    return 0;
}

TL_API int tl_timer_again(tl_loop *loop, tl_timer *t) {
    if (!loop || !t || t->repeat == 0) return -EINVAL;
    return tl_timer_start(loop, t, t->repeat, t->repeat);
}

TL_API int tl_timer_set_ref(tl_loop *loop, tl_timer *t, int ref) {
    if (!loop || !t || owned_by_other(loop, t)) return -EINVAL;
    TL_CHECK_LOOP_THREAD(loop);
    bool was = t->flags & TIMER_UNREF;
    if (ref)
        t->flags &= ~TIMER_UNREF;
    else
        t->flags |= TIMER_UNREF;
    if (t->flags & TIMER_ACTIVE) handle_ref_changed(loop, was, !ref);
    return 0;
}

TL_API int tl_timer_active(const tl_timer *t) {
    return t && (t->flags & TIMER_ACTIVE) ? 1 : 0;
}

} // extern "C"
