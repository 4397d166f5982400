/* SPDX-License-Identifier: MIT */
/*
 * Timer handles: the tl_timer_* API and the dispatch of due timers.
 *
 * A timer is active (TIMER_ACTIVE) while it is inside the timer backend, or
 * in one of the loop's two lists of timers the backend does not hold: the
 * ready list (TIMER_QUEUED: popped, callback not run yet) and the deferred
 * list (TIMER_DEFERRED: started during a dispatch, already due). `reserved`
 * then holds the owning loop's id so that a handle used with the wrong loop is
 * refused instead of corrupting a structure. The flags layout is in
 * loop_internal.h.
 *
 * Dispatch is collect, then run (libuv's uv__run_timers and its ready queue,
 * Seastar's timer_set::expire), in chunks: up to kChunk due timers are popped
 * from the backend into the ready list, in the backend's order, then their
 * callbacks run from the head of that list; then the next chunk, until
 * nothing is due or max_timers_per_iteration callbacks ran. A chunk is small
 * enough that its timers are still in cache when their callbacks run (one
 * list of 8192 was not: expiry at 1e6 timers took 1.6x as long). The rules
 * of the contract hold by construction:
 * - "a timer (re)started during dispatch does not run again in the same
 *   iteration": one started with a deadline the dispatch could still pop is
 *   parked in the deferred list, out of the backend's reach, and inserted
 *   when the dispatch ends (it is the newest insertion either way, so ties
 *   keep start order); any other start is beyond the dispatch's `now`;
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
 * due deadline is inserted at the dispatch's end; if the backend cannot take
 * it then (a heap that cannot grow), it becomes inactive as a repeating timer
 * whose re-arm fails does. The wheels never fail an insert.
 */
#include <cerrno>

#include "loop_internal.h"
#include "timers/dispatch.h"
#include "timers/timers.h"

using namespace tl::detail;

namespace {

bool owned_by_other(const tl_loop *loop, const tl_timer *t) noexcept {
    return (t->flags & TIMER_ACTIVE) && t->reserved != loop->id;
}

/* A dispatch is running that could still pop a timer at deadline on clock c. */
bool must_defer(const tl_loop *loop, unsigned c, uint64_t deadline) noexcept {
    return loop->dispatching && (loop->dispatch_mask >> c & 1) && deadline <= loop->dispatch_now[c];
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
    if (!(f & kLeewayMask)) f |= loop->collect_flags;
    t->flags = f;
}
[[gnu::always_inline]] inline void lend_collect_interval(const tl_loop *loop,
                                                         tl_timer *t) noexcept {
    if ((t->flags & TIMER_LOOP_LEEWAY) | loop->collect_flags) [[unlikely]]
        lend(loop, t);
}

/* Pre: t in neither the backend nor a list; its clock bits say where it goes
   (that clock's instance exists). Puts t at deadline: in the deferred list if
   a dispatch is running that could still pop it, else in the backend.
   Returns 0 or the backend's insert error. */
[[gnu::always_inline]] inline int place(tl_loop *loop, tl_timer *t, uint64_t deadline) noexcept {
    t->deadline = deadline;
    unsigned c = timer_clock(t);
    if (must_defer(loop, c, deadline)) {
        loop->deferred.append(t);
        t->flags |= TIMER_DEFERRED;
        return 0;
    }
    return loop->timer_backend->insert(timers_of(loop, c), t);
}

/* Pre: t active. Post: t in neither the backend nor a list (still counted
   active). */
void detach(tl_loop *loop, tl_timer *t) noexcept {
    if (t->flags & TIMER_QUEUED)
        loop->ready.unlink(t);
    else if (t->flags & TIMER_DEFERRED)
        loop->deferred.unlink(t);
    else
        loop->timer_backend->remove(timers_of(loop, timer_clock(t)), t);
    t->flags &= ~(TIMER_QUEUED | TIMER_DEFERRED);
}

/* Pre: t active and detached. Post: t inactive. */
void deactivate(tl_loop *loop, tl_timer *t) noexcept {
    t->flags &= ~TIMER_STATE;
    handle_deactivated(loop, t->flags & TIMER_UNREF);
}

/* Pre: t not active. Starts t at deadline; on failure it stays inactive. */
[[gnu::always_inline]] inline int arm(tl_loop *loop, tl_timer *t, uint64_t deadline) noexcept {
    lend_collect_interval(loop, t);
    int r = place(loop, t, deadline);
    if (r < 0) return r;
    t->flags |= TIMER_ACTIVE;
    t->reserved = loop->id;
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
    const tl_timer_backend *b = loop->timer_backend;
    bool inside = !(t->flags & (TIMER_QUEUED | TIMER_DEFERRED));
    if (inside && !must_defer(loop, c, deadline) && b->reschedule) {
        reschedule(b, timers_of(loop, c), t, deadline); /* timers/dispatch.h */
        t->deadline = deadline;
        return 0;
    }
    detach(loop, t);
    int r = place(loop, t, deadline);
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
    int r = place(loop, t, deadline);
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

/* The periodic re-arm: the first deadline + k * period (k >= 1) later than
   now, saturating at UINT64_MAX. Pre: deadline <= now, period > 0. */
uint64_t next_period(uint64_t deadline, uint64_t period, uint64_t now) noexcept {
    uint64_t k = (now - deadline) / period + 1;
    if (k > (UINT64_MAX - deadline) / period) return UINT64_MAX;
    return deadline + k * period;
}

/* Pops up to `chunk` due timers of one clock's instance into the ready list
   and runs them (see the top of this file); returns the callbacks run. */
uint64_t dispatch_clock(tl_loop *loop, void *self, uint64_t now, uint64_t cap) noexcept;

/* Timers per collect-then-run chunk: 256 timers are 16 KiB of handles, so
   they are still in L1/L2 when their callbacks run after the collect. */
constexpr uint64_t kChunk = 256;

uint64_t dispatch_clock(tl_loop *loop, void *self, uint64_t now, uint64_t cap) noexcept {
    const tl_timer_backend *b = loop->timer_backend;
    uint64_t fired = 0, popped = 0;
    /* The cap counts callbacks (max_timers_per_iteration), not pops: a
       queued timer that a callback stops leaves its turn to the next due one,
       so the next chunk is sized from what actually ran. */
    while (fired < cap) {
        /* Collect. Nothing runs here, and nothing a callback starts can be
           popped (place() defers what is due), so every chunk is what was
           due at `now`, in the backend's order. */
        uint64_t chunk = cap - fired < kChunk ? cap - fired : kChunk;
        uint64_t n = 0;
        for (; n < chunk; ++n) {
            tl_timer *t = b->pop_expired(self, now);
            if (!t) break;
            TL_DEBUG_CHECK_POPPED(loop, t, now, popped + n == 0);
            loop->ready.append(t);
            t->flags |= TIMER_QUEUED;
        }
        popped += n;
        TL_DEBUG_VERIFY(loop, "timer collect");

        /* Run. Each callback may stop or restart any queued timer (unlinking
           it) or free one it stopped, so the head is read afresh every time. */
        while (tl_timer *t = loop->ready.head) {
            loop->ready.unlink(t);
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

void timers_rebase(tl_loop *loop, unsigned c, uint64_t now) noexcept {
    const tl_timer_backend *b = loop->timer_backend;
    void *&instance = c == TL_CLOCK_MONOTONIC ? loop->timers : loop->clocks[c].timers;
    if (!instance) return;
    void *fresh = b->create(&loop->timer_config, now);
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
    const tl_timer_backend *b = loop->timer_backend;
    uint64_t n = b->count(loop->timers) + loop->ready.count + loop->deferred.count;
    for (unsigned c = 1; c < kClocks; ++c)
        if (loop->clocks[c].timers) n += b->count(loop->clocks[c].timers);
    return n;
}

uint64_t timers_dispatch(tl_loop *loop) noexcept {
    const tl_timer_backend *b = loop->timer_backend;
    const uint64_t cap = loop->max_timers_per_iteration;
    /* The clocks this dispatch runs, decided (and read) before any callback:
       a timer a callback starts on one of them with a due deadline is
       deferred, on another it waits for the next iteration, so no timer
       runs twice in one iteration whatever clock it moves to. A clock
       without timers costs neither a read nor a call. */
    uint32_t mask = 1u << TL_CLOCK_MONOTONIC;
    loop->dispatch_now[TL_CLOCK_MONOTONIC] = loop->now;
    for (unsigned c = 1; c < kClocks; ++c) {
        tl_loop::ClockState &cs = loop->clocks[c];
        if (!cs.timers || b->count(cs.timers) == 0) [[likely]]
            continue;
        cs.now = read_clock(loop, c);
        /* The clock went back (a wall-clock step): the instance was driven
           to a later time than now, which a wheel cannot go back from. */
        if (cs.now < cs.dispatched) [[unlikely]]
            timers_rebase(loop, c, cs.now);
        cs.dispatched = cs.now;
        loop->dispatch_now[c] = cs.now;
        mask |= 1u << c;
    }
    loop->dispatch_mask = mask;
    loop->dispatching = true;
    uint64_t fired = dispatch_clock(loop, loop->timers, loop->now, cap);
    for (unsigned c = 1; c < kClocks; ++c)
        if ((mask >> c & 1) && fired < cap)
            fired +=
                dispatch_clock(loop, loop->clocks[c].timers, loop->dispatch_now[c], cap - fired);
    loop->dispatching = false;

    /* The deferred timers, in start order: each is the newest insertion. */
    while (tl_timer *t = loop->deferred.head) {
        loop->deferred.unlink(t);
        t->flags &= ~TIMER_DEFERRED;
        if (b->insert(timers_of(loop, timer_clock(t)), t) < 0) deactivate(loop, t);
    }
    TL_DEBUG_VERIFY(loop, "timer dispatch");
    return fired;
}

} // namespace tl::detail

extern "C" {

TL_API void tl_timer_init(tl_timer *t, tl_timer_cb cb, void *data) {
    if (!t) return;
    *t = tl_timer{};
    t->cb = cb;
    t->data = data;
}

TL_API int tl_timer_start(tl_loop *loop, tl_timer *t, uint64_t timeout_ns, uint64_t repeat_ns) {
    if (!loop || !t || !t->cb || owned_by_other(loop, t)) return -EINVAL;
    TL_CHECK_LOOP_THREAD(loop);
    uint64_t deadline = sat_add(loop->now, timeout_ns);
    if (t->flags & TIMER_ACTIVE) {
        /* A relative timer is a MONOTONIC one, not periodic: the heartbeat
           (already one) tests one word and takes the inlined rearm. */
        int r = t->flags & (TIMER_CLOCK_MASK | TIMER_PERIODIC)
                    ? make_relative(loop, t, deadline)
                    : rearm(loop, t, TL_CLOCK_MONOTONIC, deadline);
        if (r < 0) return r;
    } else {
        if (loop->max_timers && timers_active(loop) >= loop->max_timers) return -ENOSPC;
        t->flags &= ~(TIMER_CLOCK_MASK | TIMER_PERIODIC);
        int r = arm(loop, t, deadline);
        if (r < 0) return r;
    }
    t->repeat = repeat_ns;
    TL_DEBUG_VERIFY(loop, "tl_timer_start");
    return 0;
}

TL_API int tl_timer_start_at(tl_loop *loop, tl_timer *t, tl_clock clock, uint64_t deadline_ns,
                             uint64_t period_ns) {
    unsigned c = (unsigned)clock;
    if (!loop || !t || !t->cb || c >= (unsigned)kClocks || owned_by_other(loop, t)) return -EINVAL;
    TL_CHECK_LOOP_THREAD(loop);
    if (!(t->flags & TIMER_ACTIVE) && loop->max_timers && timers_active(loop) >= loop->max_timers)
        return -ENOSPC;
    int r = clock_prepare(loop, c);
    if (r < 0) return r;
    if (t->flags & TIMER_ACTIVE) {
        r = move(loop, t, c, deadline_ns);
    } else {
        t->flags = (t->flags & ~TIMER_CLOCK_MASK) | c << TIMER_CLOCK_SHIFT;
        r = arm(loop, t, deadline_ns);
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
    if (t->flags & TIMER_ACTIVE) disarm(loop, t);
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
