/* SPDX-License-Identifier: MIT */
/*
 * Deadline arithmetic for the loop and the backends: it saturates at
 * UINT64_MAX ("never") instead of overflowing.
 */
#ifndef TICKLOOP_TIMERS_DEADLINE_H
#define TICKLOOP_TIMERS_DEADLINE_H

#include <cstdint>

namespace tl::detail {

/* a + b, saturating at UINT64_MAX ("never") instead of wrapping. */
constexpr uint64_t sat_add(uint64_t a, uint64_t b) noexcept {
    uint64_t r = a + b;
    return r < a ? UINT64_MAX : r;
}

} // namespace tl::detail

#endif /* TICKLOOP_TIMERS_DEADLINE_H */
