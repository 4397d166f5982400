/* SPDX-License-Identifier: MIT */
/*
 * A timer's leeway as the loop stores it in tl_timer::flags and the built-in
 * backends read it: the codec and the lent-leeway bit.
 */
#ifndef TICKLOOP_TIMERS_LEEWAY_H
#define TICKLOOP_TIMERS_LEEWAY_H

#include <cstdint>

#include "tickloop/timer_backend.h"

namespace tl::detail {

/* The parts of tl_timer::flags (owned by the loop, loop/handle_flags.h has the
 * whole layout) that the built-in backends read: the leeway, stored in bits
 * 11-31 as a 16-bit mantissa and a 5-bit exponent (leeway = m << e), so that
 * tl_timer_set_leeway's "16 significant bits, rounded down" holds. */
inline constexpr unsigned kLeewayShift = 11, kLeewayMantBits = 16, kLeewayExpShift = 27;
inline constexpr uint32_t kLeewayMask = ~uint32_t(0) << kLeewayShift;
/* Bit 10: the leeway bits are the loop's collect interval, lent to a timer
   that has no leeway of its own; every such timer of a loop holds the same
   value, so a backend may keep them in deadline order and wake at the
   earliest one's deadline + that leeway (the heaps do). */
inline constexpr uint32_t kLentLeeway = 1u << 10;

/* t's leeway in ns (what tl_timer_leeway returns). */
inline uint64_t timer_leeway(const tl_timer *t) noexcept {
    uint64_t m = (t->flags >> kLeewayShift) & ((1u << kLeewayMantBits) - 1);
    return m << (t->flags >> kLeewayExpShift);
}

/* The flags bits encoding leeway_ns, rounded down (saturating at
   TL_TIMER_LEEWAY_MAX). */
inline uint32_t leeway_bits(uint64_t leeway_ns) noexcept {
    if (leeway_ns >= TL_TIMER_LEEWAY_MAX) return kLeewayMask;
    unsigned e = 0;
    if (leeway_ns >> kLeewayMantBits) e = 64 - __builtin_clzll(leeway_ns) - kLeewayMantBits;
    return uint32_t(leeway_ns >> e) << kLeewayShift | uint32_t(e) << kLeewayExpShift;
}

} // namespace tl::detail

#endif /* TICKLOOP_TIMERS_LEEWAY_H */
