/* SPDX-License-Identifier: MIT */
/*
 * Internal to the timer backends and the loop: node helpers shared by the
 * built-in backends, their vtables and their invariant walkers.
 *
 * Not installed. The invariant walkers are declared with C linkage so the C
 * test suites can call them; they are hidden from the shared library and
 * reached by linking the static one.
 */
#ifndef TICKLOOP_TIMERS_TIMERS_H
#define TICKLOOP_TIMERS_TIMERS_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "tickloop/timer_backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Walks a backend's structure and checks every invariant its file states.
 * Returns NULL when all hold, else a message naming the first broken one
 * (valid until the next call from the same thread). Backends the registry does
 * not know a walker for (custom ones) always pass. Not thread-safe for the
 * same self. */
const char *tl_detail_timers_check(const tl_timer_backend *b, void *self);

/* How many timers an hwheel instance (self, from hwheel's create) has
 * re-filed in cascades since it was created: for benchmarks and tests of
 * leeway's "never cascaded". */
uint64_t tl_detail_hwheel_cascades(void *self);

#ifdef __cplusplus
}

namespace tl::detail {

/* Base of every object the library creates with new: new and delete go to
 * malloc and free, and new yields nullptr when malloc fails (a noexcept
 * allocation function makes the new-expression check for it). The global
 * operator new/delete live in libstdc++; these do not, so C programs link the
 * library with cc alone. Objects are created with plain `new T(...)`, never
 * `new (std::nothrow)`, and arrays with calloc. */
struct MallocNew {
    static void *operator new(size_t size) noexcept { return malloc(size); }
    static void operator delete(void *p) noexcept { free(p); }
};

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

/* a + b, saturating at UINT64_MAX ("never") instead of wrapping. */
constexpr uint64_t sat_add(uint64_t a, uint64_t b) noexcept {
    uint64_t r = a + b;
    return r < a ? UINT64_MAX : r;
}

/* A backend's invariant walker: NULL or the first broken invariant. */
using check_fn = const char *(*)(void *self);

/* The built-in backends, each defined in its own file. */
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

/* Formats an invariant failure into a thread-local buffer (printf style). */
const char *check_failed(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Each backend keeps its per-timer node inside tl_timer::link; this is the
 * room it has. Backends static_assert against it. */
inline constexpr size_t timer_link_bytes = sizeof(((tl_timer *)nullptr)->link);

} // namespace tl::detail
#endif

#endif /* TICKLOOP_TIMERS_TIMERS_H */
