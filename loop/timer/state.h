/* SPDX-License-Identifier: MIT */
/*
 * Internal to timer.cc (starting and stopping) and timer_dispatch.cc (the
 * dispatch and the wake-up): the helpers both change a timer's state with.
 */
#ifndef TICKLOOP_LOOP_TIMER_STATE_H
#define TICKLOOP_LOOP_TIMER_STATE_H

#include "loop/handle_flags.h"
#include "loop/state.h"
#include "loop/timer_queue.h"

namespace tl::detail {

inline TimerDomain &domain_of(tl_loop *loop, const tl_timer *t) noexcept {
    return loop->timers.domain[timer_clock(t)];
}

/* A dispatch is running that could still pop a timer at deadline on clock c. */
inline bool must_defer(const TimerQueue &q, unsigned c, uint64_t deadline) noexcept {
    return dispatching(q, c) && deadline <= q.domain[c].dispatch_now;
}

/* Pre: t active and in neither an instance nor a list. Post: t inactive. */
inline void deactivate(tl_loop *loop, tl_timer *t) noexcept {
    t->flags &= ~TIMER_STATE;
    handle_deactivated(loop, t->flags & TIMER_UNREF);
}

} // namespace tl::detail

#endif /* TICKLOOP_LOOP_TIMER_STATE_H */
