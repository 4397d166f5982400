/* SPDX-License-Identifier: MIT */
/*
 * Internal to loop/: I/O batching (tl_loop_options.io_batch_ns and
 * io_batch_adaptive). A fixed bound is the backend's alone: io_uring's
 * minimum wait gathers every wait (set_batch). An adaptive one is decided
 * here, per wait, from what the loop already measures: after each wait the
 * loop hands over the events it returned and the time it read anyway, and
 * this file keeps an estimate of the time between events. While that
 * estimate lets several events arrive within the bound (dense), the next
 * wait gathers: through the backend's minimum wait where the kernel has
 * one, else by a sleep before the wait (libev's io_collect_interval). While
 * sparse, a wait returns with its first event, as without batching. The
 * rule's numbers are in tickloop.h, beside io_batch_adaptive.
 */
#ifndef TICKLOOP_LOOP_IO_BATCH_H
#define TICKLOOP_LOOP_IO_BATCH_H

#include <cstdint>

#include "loop/state.h"

namespace tl::detail {

class IoBackend;

/* Configures a freshly created backend for the loop's batching (at
   tl_loop_new and again at tl_loop_fork) and sets stats.io_batch_ns. */
void batch_configure(tl_loop *loop, IoBackend *io) noexcept;

/* Called with the wait's deadline (as IoBackend::wait takes it) and the
   loop time it was computed from, just before the wait: while dense on a
   backend that cannot gather, sleeps out the gathering window first. */
void batch_before_wait(tl_loop *loop, uint64_t deadline_ns, uint64_t now_ns) noexcept;

/* Called after the wait with the events it returned, the loop time just
   read, and whether it could block (deadline non-zero): updates the
   estimate and the dense/sparse decision. */
void batch_after_wait(tl_loop *loop, int events, uint64_t now_ns, bool blocked) noexcept;

} // namespace tl::detail

#endif /* TICKLOOP_LOOP_IO_BATCH_H */
