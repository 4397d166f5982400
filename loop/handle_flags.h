/* SPDX-License-Identifier: MIT */
/*
 * Internal to loop/: the loop's flag words in its handles: tl_timer::flags
 * (TIMER_*, with timer_clock) and tl_timer::reserved (timer_owner),
 * tl_io::flags (IO_*), tl_hook::flags (HOOK_*), and the state bits of
 * tl_async::magic and tl_signal::magic (HANDLE_*).
 */
#ifndef TICKLOOP_LOOP_HANDLE_FLAGS_H
#define TICKLOOP_LOOP_HANDLE_FLAGS_H

#include <cstdint>

#include "tickloop/tickloop.h"
#include "timers/timers.h"

namespace tl::detail {

/* tl_timer::flags, owned by the loop. Layout (one word, 32 bits):
 *   bit 0      TIMER_ACTIVE  inside a backend instance, or in the ready or the
 *                            deferred list
 *   bit 1      TIMER_READY   in the loop's ready list (popped, callback not run
 *                            yet); only with TIMER_ACTIVE
 *   bit 2      TIMER_UNREF   tl_timer_set_ref(.., 0); kept across stop/start
 *   bit 3      TIMER_DEFERRED in the loop's deferred list (started during a
 *                            dispatch, already due); only with TIMER_ACTIVE
 *   bit 4      TIMER_PERIODIC started by tl_timer_start_at with a period: re-armed
 *                            at deadline + k * repeat, not now + repeat
 *   bit 5      TIMER_FRESH   inside its instance, started during a dispatch
 *                            with a deadline it could still pop, on a backend
 *                            without reserve (timer.cc): popped, it waits in
 *                            the deferred list for the next dispatch
 *   bits 6-7   free
 *   bits 8-9   the tl_clock it was started on (TIMER_CLOCK_SHIFT)
 *   bit 10     kLentLeeway (timers/timers.h) the leeway bits hold the loop's collect
 *                            interval (the timer has none of its own); set
 *                            when a start lends it, kept after the timer
 *                            stops (tl_timer_leeway hides it then), and
 *                            replaced by the next start that lends
 *                            (timer.cc: lend)
 *   bits 11-31 the leeway, 16-bit mantissa and 5-bit exponent (timers/timers.h,
 *              which the backends read it through)
 * tl_timer_init zeroes the word. The loop writes it with read-modify-write
 * only (`|=`, `&= ~`), so bits it does not own here survive start, stop and
 * dispatch; TIMER_STATE is what "not scheduled" clears. */
enum : uint32_t {
    TIMER_ACTIVE = 1u << 0,
    TIMER_READY = 1u << 1,
    /* tl_timer_set_ref(.., 0): does not keep the loop alive. Kept across
       stop/start: only tl_timer_init clears it. */
    TIMER_UNREF = 1u << 2,
    TIMER_DEFERRED = 1u << 3,
    TIMER_PERIODIC = 1u << 4,
    TIMER_FRESH = 1u << 5,
    TIMER_STATE = TIMER_ACTIVE | TIMER_READY | TIMER_DEFERRED,
    TIMER_CLOCK_SHIFT = 8,
    TIMER_CLOCK_MASK = 3u << TIMER_CLOCK_SHIFT,
};
/* tl_timer::reserved while the timer is active: the owning loop's id mixed
 * with the timer's own address. A handle used with another loop is refused
 * by comparing it; and tl_timer_init, which gets no loop pointer, finds the
 * loop of an active timer from it (loop_by_id), while a copy of an active
 * timer, or fresh memory whose flags happen to say TIMER_ACTIVE, yields an id
 * that names no live loop but by a 1 in 2^32 chance. */
inline uint32_t timer_owner(uint32_t loop_id, const tl_timer *t) noexcept {
    return loop_id ^ (uint32_t)(reinterpret_cast<uintptr_t>(t) >> 3);
}
/* The owner tag by name: the public field keeps its name (reserved, which
 * callers must leave alone), and loop/ reads and writes it only here. */
inline void set_timer_owner(tl_timer *t, uint32_t loop_id) noexcept {
    t->reserved = timer_owner(loop_id, t);
}
inline bool timer_owned_by(const tl_timer *t, uint32_t loop_id) noexcept {
    return t->reserved == timer_owner(loop_id, t);
}
/* The loop id the tag names (meaningful only if the timer really is active). */
inline uint32_t timer_owner_id(const tl_timer *t) noexcept {
    return t->reserved ^ timer_owner(0, t);
}
inline constexpr unsigned timer_clock(const tl_timer *t) noexcept {
    return (t->flags & TIMER_CLOCK_MASK) >> TIMER_CLOCK_SHIFT;
}
static_assert((TIMER_CLOCK_MASK & kLeewayMask) == 0, "clock and leeway bits do not overlap");

/* tl_io::flags. */
enum : uint32_t {
    IO_ACTIVE = 1u << 0,
    IO_INTERNAL = 1u << 1, /* the loop's own (async eventfd, signalfd): keeps nothing alive */
    IO_UNREF = 1u << 2,    /* tl_io_set_ref(.., 0); kept across stop/start   */
    IO_STREAM = 1u << 3,   /* the registration of a tl_stream (loop/stream.cc) */
    IO_LISTENER = 1u << 4, /* the registration of a tl_listener                */
    IO_HANDLE_KINDS = IO_STREAM | IO_LISTENER,
};

/* tl_hook::flags. */
enum : uint32_t {
    HOOK_ACTIVE = 1u << 0,
    HOOK_UNREF = 1u << 1,
};
inline constexpr int kHookKinds = 3; /* PREPARE, CHECK, IDLE */

/* tl_async::magic and tl_signal::magic: a per-type marker in the high 24 bits
 * (so fresh memory is unlikely to pass for a handle) and state bits in the
 * low 8. HANDLE_INIT says the handle went through tl_*_init, so its ACTIVE bit
 * can be trusted without walking the loop's list. */
enum : uint32_t {
    HANDLE_ACTIVE = 1u << 0,
    HANDLE_INIT = 1u << 1,
    HANDLE_UNREF = 1u << 2,
    HANDLE_STATE_MASK = 0xffu,
};

} // namespace tl::detail

#endif /* TICKLOOP_LOOP_HANDLE_FLAGS_H */
