/* SPDX-License-Identifier: MIT */
/*
 * Internal to loop/: the timer slack of the thread that runs the loop
 * (slack.cc).
 */
#ifndef TICKLOOP_LOOP_SLACK_H
#define TICKLOOP_LOOP_SLACK_H

#include "tickloop/tickloop.h"

namespace tl::detail {

/* tl_loop_options.timer_slack_ns on the thread that runs the loop: applied
   at the start of each run (loop.cc), released when the loop is freed
   (lifecycle.cc). */
void apply_timer_slack(tl_loop *loop) noexcept;
void release_timer_slack(tl_loop *loop) noexcept;

} // namespace tl::detail

#endif /* TICKLOOP_LOOP_SLACK_H */
