/* SPDX-License-Identifier: MIT */
/*
 * Internal to loop/: what creating, running and freeing a loop share between
 * lifecycle.cc (tl_loop_new, tl_loop_free, tl_loop_fork) and options.cc
 * (the options checked and resolved, and tl_loop_new_error's message).
 */
#ifndef TICKLOOP_LOOP_LIFECYCLE_H
#define TICKLOOP_LOOP_LIFECYCLE_H

#include <cstdint>

#include "tickloop/timer_backend.h"

namespace tl::detail {

/* tl_loop_options after resolve_options: checked, defaults and the
   environment (TICKLOOP_IO, TICKLOOP_TIMERS) applied. */
struct LoopSettings {
    tl_io_kind io;                     /* AUTO (io_uring, else epoll), EPOLL or URING */
    const tl_timer_backend *timers;    /* the backend named by timers_name            */
    const char *timers_name;           /* for messages                                */
    uint64_t max_timers_per_iteration; /* never 0                                     */
    uint32_t collect_flags;            /* TimerQueue::collect_flags                   */
    uint64_t io_batch_ns;              /* the options', else TICKLOOP_IO_BATCH's       */
    bool io_batch_adaptive;            /* likewise                                    */
};

/* Checks opts (NULL: the defaults) and resolves them into *out; 0, or a
   negative errno with tl_loop_new_error's message set. */
int resolve_options(const tl_loop_options *opts, LoopSettings *out) noexcept;

/* Sets the message tl_loop_new_error returns on this thread and returns err;
   clear_new_error empties it (tl_loop_new starts with it). */
[[gnu::format(printf, 2, 3)]] int fail_new(int err, const char *fmt, ...) noexcept;
void clear_new_error() noexcept;

} // namespace tl::detail

#endif /* TICKLOOP_LOOP_LIFECYCLE_H */
