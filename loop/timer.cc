/*
 * Timer handles: the tl_timer_* API and the dispatch of due timers.
 *
 * A timer is active exactly while it is inside the timer backend (flag
 * TIMER_ACTIVE); `reserved` then holds the owning loop's id so that a handle
 * used with the wrong loop is refused instead of corrupting a structure.
 *
 * The rule that makes dispatch safe: "a timer (re)started during dispatch does
 * not run again in the same iteration". A timer started during dispatch with a
 * deadline the dispatch could still pop (<= its now) is marked fresh with the
 * dispatch's epoch. Popping a fresh timer ends the dispatch: it goes straight
 * back in where it was (its slot was just freed, so this cannot fail for the
 * built-ins; a heap keeps its insertion rank, so a tie with a timer started
 * after it still runs first) and runs next iteration, which the zero wait
 * timeout starts at once. For heaps a fresh timer comes after every due timer
 * started before the dispatch, so nothing older is held back; for wheels the
 * rest of the tick waits one iteration, never a tick. The dispatch holds no
 * pointer across a callback, so callbacks may stop, restart or free any timer.
 */
#include <cerrno>

#include "loop_internal.h"
#include "timers/dary_heap.h"
#include "timers/timers.h"

using namespace tl::detail;

namespace {

constexpr uint32_t kEpochMask = UINT32_MAX >> TIMER_EPOCH_SHIFT;

bool owned_by_other(const tl_loop *loop, const tl_timer *t) noexcept {
    return (t->flags & TIMER_ACTIVE) && t->reserved != loop->id;
}

/* Inserts t (inactive) at deadline; on failure it stays inactive. */
int arm(tl_loop *loop, tl_timer *t, uint64_t deadline) noexcept {
    t->deadline = deadline;
    int r = loop->timer_backend->insert(loop->timers, t);
    if (r < 0) {
        t->flags = 0;
        return r;
    }
    t->flags = TIMER_ACTIVE;
    t->reserved = loop->id;
    ++loop->active_handles;
    return 0;
}

void disarm(tl_loop *loop, tl_timer *t) noexcept {
    loop->timer_backend->remove(loop->timers, t);
    t->flags = 0;
    --loop->active_handles;
}

void mark_if_fresh(tl_loop *loop, tl_timer *t) noexcept {
    if (loop->in_timer_dispatch && t->deadline <= loop->now)
        t->flags |= TIMER_FRESH | (loop->dispatch_epoch & kEpochMask) << TIMER_EPOCH_SHIFT;
}

bool is_fresh(const tl_loop *loop, const tl_timer *t) noexcept {
    return (t->flags & TIMER_FRESH) &&
           (t->flags >> TIMER_EPOCH_SHIFT) == (loop->dispatch_epoch & kEpochMask);
}

} // namespace

namespace tl::detail {

uint64_t timers_dispatch(tl_loop *loop) noexcept {
    const tl_timer_backend *b = loop->timer_backend;
    const uint64_t now = loop->now;
    uint64_t fired = 0;
    ++loop->dispatch_epoch;
    loop->in_timer_dispatch = true;
    const uint64_t cap = loop->max_timers_per_iteration;
    while (fired < cap) {
        tl_timer *t = b->pop_expired(loop->timers, now);
        if (!t) break;
        if (is_fresh(loop, t)) {
            /* Started by this dispatch: back where it was (a heap keeps its
               rank among equal deadlines), and it runs next iteration. */
            t->flags &= ~TIMER_FRESH;
            if (put_back(b, loop->timers, t) == 0) break;
            /* Only a custom backend can fail here; running the timer now
               bends the iteration rule but loses nothing. */
        }
        if (t->repeat) {
            /* Re-armed before the callback, so the callback sees it active
               and may stop or restart it. */
            t->deadline = sat_add(now, t->repeat);
            if (b->insert(loop->timers, t) < 0) {
                /* It runs this once more, then is inactive: say so. */
                ++loop->stats.timers_rearm_failed;
                t->flags = 0;
                --loop->active_handles;
            } else {
                t->flags = TIMER_ACTIVE;
            }
        } else {
            t->flags = 0;
            --loop->active_handles;
        }
        ++loop->stats.timers_fired;
        ++fired;
        t->cb(loop, t); /* may free t: not touched after this */
    }
    loop->in_timer_dispatch = false;
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
    const tl_timer_backend *b = loop->timer_backend;
    uint64_t deadline = sat_add(loop->now, timeout_ns);
    if (t->flags & TIMER_ACTIVE) {
        t->flags = TIMER_ACTIVE;
        /* The built-in heaps' reschedule inlined: restart is the hot call (a
           heartbeat per packet), and a leaner path leaves the CPU room to
           overlap one restart's cache misses with the next one's. */
        if (b == &heap4_backend) {
            static_cast<Heap4 *>(loop->timers)->reschedule(t, deadline);
        } else if (b == &heap2_backend) {
            static_cast<Heap2 *>(loop->timers)->reschedule(t, deadline);
        } else if (b->reschedule) {
            b->reschedule(loop->timers, t, deadline);
        } else {
            disarm(loop, t);
            int r = arm(loop, t, deadline);
            if (r < 0) return r;
        }
        t->deadline = deadline;
    } else {
        if (loop->max_timers && b->count(loop->timers) >= loop->max_timers) return -ENOSPC;
        int r = arm(loop, t, deadline);
        if (r < 0) return r;
    }
    t->repeat = repeat_ns;
    mark_if_fresh(loop, t);
    return 0;
}

TL_API int tl_timer_stop(tl_loop *loop, tl_timer *t) {
    if (!loop || !t || owned_by_other(loop, t)) return -EINVAL;
    TL_CHECK_LOOP_THREAD(loop);
    if (t->flags & TIMER_ACTIVE) disarm(loop, t);
    return 0;
}

TL_API int tl_timer_again(tl_loop *loop, tl_timer *t) {
    if (!loop || !t || t->repeat == 0) return -EINVAL;
    return tl_timer_start(loop, t, t->repeat, t->repeat);
}

TL_API int tl_timer_active(const tl_timer *t) {
    return t && (t->flags & TIMER_ACTIVE) ? 1 : 0;
}

} // extern "C"
