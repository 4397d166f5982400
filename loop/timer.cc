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

/* Pre: t in neither the backend nor a list. Puts t at deadline: in the
   deferred list if a dispatch is running that could still pop it, else in
   the backend. Returns 0 or the backend's insert error. */
int place(tl_loop *loop, tl_timer *t, uint64_t deadline) noexcept {
    t->deadline = deadline;
    if (loop->dispatching && deadline <= loop->dispatch_now) {
        loop->deferred.append(t);
        t->flags |= TIMER_DEFERRED;
        return 0;
    }
    return loop->timer_backend->insert(loop->timers, t);
}

/* Pre: t active. Post: t in neither the backend nor a list (still counted
   active). */
void detach(tl_loop *loop, tl_timer *t) noexcept {
    if (t->flags & TIMER_QUEUED)
        loop->ready.unlink(t);
    else if (t->flags & TIMER_DEFERRED)
        loop->deferred.unlink(t);
    else
        loop->timer_backend->remove(loop->timers, t);
    t->flags &= ~(TIMER_QUEUED | TIMER_DEFERRED);
}

/* Pre: t active and detached. Post: t inactive. */
void deactivate(tl_loop *loop, tl_timer *t) noexcept {
    t->flags &= ~TIMER_STATE;
    handle_deactivated(loop, t->flags & TIMER_UNREF);
}

/* Pre: t not active. Starts t at deadline; on failure it stays inactive. */
int arm(tl_loop *loop, tl_timer *t, uint64_t deadline) noexcept {
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

/* Pre: t active, owned by loop. Moves it to deadline. Returns 0, or insert's
   error when t had to be re-inserted (it was queued or deferred, the backend
   has no reschedule, or it must be deferred), which leaves t inactive. */
int rearm(tl_loop *loop, tl_timer *t, uint64_t deadline) noexcept {
    const tl_timer_backend *b = loop->timer_backend;
    bool inside = !(t->flags & (TIMER_QUEUED | TIMER_DEFERRED));
    bool defer = loop->dispatching && deadline <= loop->dispatch_now;
    if (inside && !defer && b->reschedule) {
        reschedule(b, loop->timers, t, deadline); /* timers/dispatch.h */
        t->deadline = deadline;
        return 0;
    }
    detach(loop, t);
    int r = place(loop, t, deadline);
    if (r < 0) deactivate(loop, t);
    return r;
}

/* Timers per collect-then-run chunk: 256 timers are 16 KiB of handles, so
   they are still in L1/L2 when their callbacks run after the collect. */
constexpr uint64_t kChunk = 256;

} // namespace

namespace tl::detail {

uint64_t timers_active(const tl_loop *loop) noexcept {
    return loop->timer_backend->count(loop->timers) + loop->ready.count + loop->deferred.count;
}

uint64_t timers_dispatch(tl_loop *loop) noexcept {
    const tl_timer_backend *b = loop->timer_backend;
    const uint64_t now = loop->now;
    const uint64_t cap = loop->max_timers_per_iteration;
    loop->dispatching = true;
    loop->dispatch_now = now;
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
            tl_timer *t = b->pop_expired(loop->timers, now);
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
                   sees it active and may stop or restart it. now + repeat is
                   beyond the dispatch: never deferred. */
                t->deadline = sat_add(now, t->repeat);
                if (b->insert(loop->timers, t) < 0) {
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
    loop->dispatching = false;

    /* The deferred timers, in start order: each is the newest insertion. */
    while (tl_timer *t = loop->deferred.head) {
        loop->deferred.unlink(t);
        t->flags &= ~TIMER_DEFERRED;
        if (b->insert(loop->timers, t) < 0) deactivate(loop, t);
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
        int r = rearm(loop, t, deadline);
        if (r < 0) return r;
    } else {
        if (loop->max_timers && timers_active(loop) >= loop->max_timers) return -ENOSPC;
        int r = arm(loop, t, deadline);
        if (r < 0) return r;
    }
    t->repeat = repeat_ns;
    TL_DEBUG_VERIFY(loop, "tl_timer_start");
    return 0;
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
