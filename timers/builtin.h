/* SPDX-License-Identifier: MIT */
/*
 * The built-in backends as the registry (registry.cc) lists them, and the
 * configuration the loop creates instances with.
 */
#ifndef TICKLOOP_TIMERS_BUILTIN_H
#define TICKLOOP_TIMERS_BUILTIN_H

#include <cstdint>

#include "tickloop/timer_backend.h"

namespace tl::detail {

/* The built-in backends, each defined in its own file, and their walkers. */
extern const tl_timer_backend heap2_backend;
extern const tl_timer_backend heap4_backend;
extern const tl_timer_backend wheel_backend, hwheel_backend;
const char *heap2_check(void *self);
const char *heap4_check(void *self);
const char *wheel_check(void *self);
const char *hwheel_check(void *self);

/* The configuration a loop passes to create(): zeros in the loop options
 * mean the wheels' defaults (wheel_core.h says why those). */
tl_timer_config timer_config(uint64_t tick_ns, uint32_t wheel_slots) noexcept;

} // namespace tl::detail

#endif /* TICKLOOP_TIMERS_BUILTIN_H */
