/* SPDX-License-Identifier: MIT */
/*
 * Internal to loop/: the loop's invariant walkers (check.cc):
 * tl_detail_loop_check in every build, and the debug builds' walks after
 * each operation (TL_DEBUG_VERIFY, TL_DEBUG_CHECK_POPPED) and thread check
 * (TL_CHECK_LOOP_THREAD), which release builds (NDEBUG) compile away.
 */
#ifndef TICKLOOP_LOOP_VERIFY_H
#define TICKLOOP_LOOP_VERIFY_H

#include <cstdint>

#include "tickloop/tickloop.h"

/* The loop's invariant walker (tests call it; libev's ev_verify): the fd
   table, the async, signal and hook lists against the handle counts and the
   start order. nullptr if they hold, else what broke. Hidden, like
   tl_detail_timers_check. */
extern "C" const char *tl_detail_loop_check(const tl_loop *loop) noexcept;

namespace tl::detail {

/* Debug builds walk the loop's own state (the timer domains and the ready
 * and deferred lists against their flags, the fd table against its watchers,
 * the async, signal and hook lists: check.cc lists the invariants) after every
 * timer operation, every timer callback and every iteration, and abort with
 * the first broken invariant and the call that broke it (libev's
 * EV_FREQUENT_CHECK); the timer backend's glue walks the backend's structure
 * after each of its operations (timers/backend_glue.h). The walks are O(n):
 * up to kVerifyEveryOpUpTo entries they run every time, above it once per
 * n / kVerifyAmortized calls, so the tests with a million timers stay linear.
 * Release builds (NDEBUG) compile all of it away. */
#ifndef NDEBUG
inline constexpr uint64_t kVerifyEveryOpUpTo = 64;
inline constexpr uint64_t kVerifyAmortized = 4;
void loop_verify(tl_loop *loop, const char *where) noexcept;
/* A timer pop_expired just returned: never early by the backend's own rule
   (exactly at its deadline with TL_TIMER_CAP_EXACT, else by tick), in
   (deadline, insertion) order after the previous pop for EXACT backends. */
void check_popped(tl_loop *loop, const tl_timer *t, uint64_t now, bool first) noexcept;
#define TL_DEBUG_VERIFY(loop, where) ::tl::detail::loop_verify(loop, where)
#define TL_DEBUG_CHECK_POPPED(loop, t, now, first) ::tl::detail::check_popped(loop, t, now, first)
#else
#define TL_DEBUG_VERIFY(loop, where) ((void)0)
#define TL_DEBUG_CHECK_POPPED(loop, t, now, first) ((void)0)
#endif

/* A loop belongs to one thread. Debug builds catch a call from another thread
 * while the loop runs (undefined behaviour otherwise) and abort with a message
 * naming the call; release builds pay nothing. */
#ifndef NDEBUG
void check_loop_thread(const tl_loop *loop, const char *call) noexcept;
#define TL_CHECK_LOOP_THREAD(loop) ::tl::detail::check_loop_thread(loop, __func__)
#else
#define TL_CHECK_LOOP_THREAD(loop) ((void)0)
#endif
} // namespace tl::detail

#endif /* TICKLOOP_LOOP_VERIFY_H */
