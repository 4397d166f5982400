/* SPDX-License-Identifier: MIT */
/*
 * I/O batching: the backend's configuration for a fixed bound, and the
 * dense/sparse decision of an adaptive one (batch.h; the rule is written in
 * tickloop.h beside io_batch_adaptive).
 *
 * The estimate follows the time between events, not the events per wait:
 * a wait that gathers returns more events per wake-up by design, so events
 * per wait would keep a loop dense by its own doing, whereas the gap since
 * the previous wait divided by the events it brought is the same whether
 * the loop gathered or not. Entering needs 2 events per window and leaving
 * fewer than 1.5, so a load near the threshold does not flip the mode (and,
 * on io_uring, the kernel's wait arguments) at every wait.
 */
#include "loop/io/batch.h"

#include <cerrno>
#include <ctime>

#include "loop/io/backend.h"
#include "loop/state.h"

namespace tl::detail {

namespace {

/* Events per window, in halves, to become dense, and below which a dense
   loop leaves: 2 and 1.5. Two events per window already halve the
   wake-ups; at one, gathering would only add lateness. Measured with 36,000
   heartbeating connections (3,000 events/s per server, 3 per 1 ms window):
   entering at 4 left 2 waits in 3 ungathered. */
constexpr uint64_t kEnterHalves = 4;
constexpr uint64_t kLeaveHalves = 3;

void set_dense(tl_loop *loop, bool dense) noexcept {
    IoBatch &b = loop->batch;
    if (dense == b.dense) return;
    b.dense = dense;
    if (b.kernel) loop->io->set_batch(dense ? b.bound_ns : 0);
}

} // namespace

void batch_configure(tl_loop *loop, IoBackend *io) noexcept {
    IoBatch &b = loop->batch;
    uint64_t in_effect = io->set_batch(b.bound_ns);
    if (b.adaptive) {
        /* The kernel gathers where it can; the loop's sleep stands in
           elsewhere, so the bound is in effect on every backend. */
        b.kernel = in_effect != 0;
        if (b.kernel && !b.dense) io->set_batch(0);
        in_effect = b.bound_ns;
    }
    loop->stats.io_batch_ns = in_effect;
}

void batch_before_wait(tl_loop *loop, uint64_t deadline_ns, uint64_t now_ns) noexcept {
    const IoBatch &b = loop->batch;
    if (!b.dense || b.kernel || deadline_ns == 0) return;
    /* The window from the loop's time (read before this iteration's
       callbacks, so the sleep is never longer than the bound from then),
       cut short by the wait's deadline: a timer still fires on time. */
    uint64_t ns = b.bound_ns;
    if (deadline_ns != UINT64_MAX) ns = deadline_ns > now_ns ? deadline_ns - now_ns : 0;
    if (ns > b.bound_ns) ns = b.bound_ns;
    if (ns == 0) return;
    struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
    /* A signal ends the sleep early: the wait that follows reports it. */
    clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, nullptr);
    ++loop->stats.io_batched_waits;
}

void batch_after_wait(tl_loop *loop, int events, uint64_t now_ns, bool blocked) noexcept {
    IoBatch &b = loop->batch;
    if (!b.adaptive) return;
    if (events > 0) {
        if (b.last_io_ns && now_ns > b.last_io_ns) {
            uint64_t gap = (now_ns - b.last_io_ns) / (uint64_t)events;
            b.gap_ns = b.gap_ns ? b.gap_ns - b.gap_ns / 4 + gap / 4 : gap;
        }
        b.last_io_ns = now_ns;
        uint64_t halves = b.dense ? kLeaveHalves : kEnterHalves;
        set_dense(loop, b.gap_ns != 0 && b.gap_ns * halves <= 2 * b.bound_ns);
    } else if (blocked && now_ns - b.last_io_ns > b.bound_ns) {
        /* A wait found nothing for longer than the window: the load has
           stopped, and the first event after the quiet must not be held. */
        set_dense(loop, false);
    }
}

} // namespace tl::detail
