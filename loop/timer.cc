/* SPDX-License-Identifier: MIT */
/*
 * Timer handles: the tl_timer_* API and the dispatch of due timers.
 *
 * A timer is active (TIMER_ACTIVE) while it is inside the timer backend or
 * queued in the loop's ready list (TIMER_QUEUED); `reserved` then holds the
 * owning loop's id so that a handle used with the wrong loop is refused
 * instead of corrupting a structure. The flags layout is in loop_internal.h.
 *
 * Dispatch is collect, then run (libuv's uv__run_timers and its ready queue,
 * Seastar's timer_set::expire): first up to max_timers_per_iteration due
 * timers are popped from the backend into the ready list, in the backend's
 * order, then their callbacks run from the head of that list. The rules of
 * the contract hold by construction:
 * - "a timer (re)started during dispatch does not run again in the same
 *   iteration": the backend is not asked again until the next iteration, so
 *   whatever a callback puts in it waits for that one;
 * - "a timer stopped before its turn does not run": stopping or restarting a
 *   queued timer unlinks it from the ready list, O(1);
 * - ties keep their order: the ready list is in pop order, and what the cap
 *   leaves inside keeps its rank against timers started later;
 * - "a repeating timer is re-armed at now + repeat before its callback": it
 *   goes back into the backend just before its callback runs, not when it is
 *   collected, so the callback sees it active and may stop or restart it.
 * The dispatch holds no pointer across a callback (it takes the head afresh
 * each time), so callbacks may stop, restart or free any timer they stopped.
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

tl_timer *ready_next(const tl_timer *t) noexcept {
    return reinterpret_cast<tl_timer *>(t->link[0]);
}
tl_timer *ready_prev(const tl_timer *t) noexcept {
    return reinterpret_cast<tl_timer *>(t->link[1]);
}

/* Pre: t just returned by pop_expired (not inside). Post: t last in the ready
   list, queued. */
void ready_push(tl_loop *loop, tl_timer *t) noexcept {
    t->link[0] = 0;
    t->link[1] = reinterpret_cast<uintptr_t>(loop->ready_tail);
    if (loop->ready_tail)
        loop->ready_tail->link[0] = reinterpret_cast<uintptr_t>(t);
    else
        loop->ready_head = t;
    loop->ready_tail = t;
    t->flags |= TIMER_QUEUED;
    ++loop->ready_count;
}

/* Pre: t queued. Post: t in no list, TIMER_QUEUED clear (still TIMER_ACTIVE). */
void ready_unlink(tl_loop *loop, tl_timer *t) noexcept {
    tl_timer *next = ready_next(t), *prev = ready_prev(t);
    if (prev)
        prev->link[0] = reinterpret_cast<uintptr_t>(next);
    else
        loop->ready_head = next;
    if (next)
        next->link[1] = reinterpret_cast<uintptr_t>(prev);
    else
        loop->ready_tail = prev;
    t->flags &= ~TIMER_QUEUED;
    --loop->ready_count;
}

/* Pre: t not active. Inserts t at deadline; on failure it stays inactive. */
int arm(tl_loop *loop, tl_timer *t, uint64_t deadline) noexcept {
    t->deadline = deadline;
    int r = loop->timer_backend->insert(loop->timers, t);
    if (r < 0) return r;
    t->flags |= TIMER_ACTIVE;
    t->reserved = loop->id;
    handle_activated(loop, t->flags & TIMER_UNREF);
    return 0;
}

/* Pre: t active. Post: t inactive, in neither the backend nor the ready list. */
void disarm(tl_loop *loop, tl_timer *t) noexcept {
    if (t->flags & TIMER_QUEUED)
        ready_unlink(loop, t);
    else
        loop->timer_backend->remove(loop->timers, t);
    t->flags &= ~TIMER_STATE;
    handle_deactivated(loop, t->flags & TIMER_UNREF);
}

/* Pre: t active, owned by loop. Moves it to deadline. Returns 0, or insert's
   error for a queued timer (or a backend without reschedule), which then
   leaves t inactive. */
int rearm(tl_loop *loop, tl_timer *t, uint64_t deadline) noexcept {
    const tl_timer_backend *b = loop->timer_backend;
    if (!(t->flags & TIMER_QUEUED) && b->reschedule) {
        reschedule(b, loop->timers, t, deadline); /* timers/dispatch.h */
        t->deadline = deadline;
        return 0;
    }
    disarm(loop, t);
    return arm(loop, t, deadline);
}

} // namespace

namespace tl::detail {

uint64_t timers_active(const tl_loop *loop) noexcept {
    return loop->timer_backend->count(loop->timers) + loop->ready_count;
}

uint64_t timers_dispatch(tl_loop *loop) noexcept {
    const tl_timer_backend *b = loop->timer_backend;
    const uint64_t now = loop->now;
    const uint64_t cap = loop->max_timers_per_iteration;

    /* Collect. Nothing runs here, so the backend is popped without
       interruption and the batch is exactly what was due at `now`. */
    for (uint64_t n = 0; n < cap; ++n) {
        tl_timer *t = b->pop_expired(loop->timers, now);
        if (!t) break;
        TL_DEBUG_CHECK_POPPED(loop, t, now, n == 0);
        ready_push(loop, t);
    }
    TL_DEBUG_VERIFY(loop, "timer collect");

    /* Run. Each callback may stop or restart any queued timer (unlinking it)
       or free one it stopped, so the head is read afresh every time. */
    uint64_t fired = 0;
    while (tl_timer *t = loop->ready_head) {
        ready_unlink(loop, t);
        lateness_record(loop->lateness, now, t->deadline);
        if (t->repeat) {
            /* Re-armed before the callback (the contract), so the callback
               sees it active and may stop or restart it. */
            t->deadline = sat_add(now, t->repeat);
            if (b->insert(loop->timers, t) < 0) {
                /* It runs this once more, then is inactive: say so. */
                ++loop->stats.timers_rearm_failed;
                t->flags &= ~TIMER_STATE;
                handle_deactivated(loop, t->flags & TIMER_UNREF);
            }
        } else {
            t->flags &= ~TIMER_STATE;
            handle_deactivated(loop, t->flags & TIMER_UNREF);
        }
        ++loop->stats.timers_fired;
        ++fired;
        t->cb(loop, t); /* may free t: not touched after this */
        TL_DEBUG_VERIFY(loop, "timer callback");
    }
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
