/* SPDX-License-Identifier: MIT */
/*
 * Internal to loop/: the loop's clocks (clock.cc): the loop's reads of
 * each clock and its cached time (read_clock, update_time), the timerfds of
 * the clocks other than the wait's, and the test seam that replaces the
 * clocks.
 */
#ifndef TICKLOOP_LOOP_CLOCK_H
#define TICKLOOP_LOOP_CLOCK_H

#include <cstdint>
#include <ctime>

#include "loop/state.h"
#include "tickloop/tickloop.h"

namespace tl::detail {

/* A read of clock c as the loop sees it (the test seam's, if set). */
uint64_t read_clock(const tl_loop *loop, unsigned c) noexcept;
/* Reads the loop's time (tl_now): the MONOTONIC domain's now, the clock of
   the wait's deadlines (the test seam may supply it). */
void update_time(tl_loop *loop) noexcept;
/* Opens clock c's timerfd and creates its domain's instance, if missing;
   0 or -errno. Nothing to do for the wait's domain. */
int clock_prepare(tl_loop *loop, unsigned c) noexcept;
/* Makes clock c's timerfd expire no later than wake (absolute, on c); nothing
   under the test seam. */
void clock_arm(tl_loop *loop, unsigned c, uint64_t wake) noexcept;
/* Closes the timerfds. */
void clock_close(tl_loop *loop) noexcept;
int clock_fork(tl_loop *loop) noexcept;

} // namespace tl::detail

/* Test seam (hidden, reached by linking the static library): the loop reads
   every clock through read(clock, ctx) instead of clock_gettime, so a test
   drives time (run the loop with TL_RUN_NOWAIT then: the kernel's waits still
   use the real clock). NULL read restores the real clocks. */
extern "C" void tl_detail_loop_set_clock(tl_loop *loop, tl_detail_clock_fn read,
                                         void *ctx) noexcept;
/* Runs the loop's reaction to a wall-clock set or step, exactly as when the
   kernel reports one (a REALTIME timerfd read failing with ECANCELED). */
extern "C" void tl_detail_loop_clock_changed(tl_loop *loop) noexcept;

#endif /* TICKLOOP_LOOP_CLOCK_H */
