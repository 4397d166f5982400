/* SPDX-License-Identifier: MIT */
/*
 * I/O batching: the backend's configuration for a fixed bound, and the
 * dense/sparse decision of an adaptive one (batch.h; the rule is written in
 * tickloop.h beside io_batch_adaptive).
 *
 * The loop measures the mean time between events over a period: from the
 * period's start to the last wait, divided by the events its waits
 * returned. That is the same whether the loop gathered or not (a wait that
 * gathers returns more events per wake-up, but the time between them is
 * the load's), and over a period of several windows one slow wake-up does
 * not decide anything. A period is judged once it has lasted kPeriodWaits
 * waits with events and kPeriodWindows windows:
 * - sparse: at least 2 events per window make the loop dense, and the
 *   period's mean becomes the spell's reference; a period that does not
 *   and has lasted kRollWindows starts over, so an old quiet spell does
 *   not slow the decision when the load rises;
 * - dense: fewer than 1.5 events per window make it sparse again (the
 *   hysteresis keeps a load near the threshold from flipping the mode, and
 *   on io_uring the kernel's wait arguments, at every period); a mean over
 *   twice the spell's reference means the gathering slows the load itself
 *   (below), and the loop stays sparse for kHoldWindows windows.
 * A blocking wait that returns no event after the window has passed since
 * the last event makes the loop sparse at once: the first event after a
 * quiet spell is never held.
 *
 * Why a gathering may slow its load: a client that waits for each answer
 * (an HTTP keep-alive connection, an RPC) sends no more while its request
 * is held, so gathering lowers the rate it was entered for, and would keep
 * itself going at whatever rate the window allows (32 such clients: 32
 * requests per window, a third of their rate unheld). An open load
 * (heartbeats, independent clients) keeps its rate. So, as a NIC's
 * interrupt moderation compares the rate before and after a step, the
 * spell is compared with the period that started it; the factor of 2
 * keeps a noisy open load from being taken for a throttled one, and a
 * throttled one is tried again after the hold (about 2% of the time spent
 * gathering a load that does not gain from it).
 */
#include "loop/io/batch.h"

#include <cerrno>
#include <ctime>

#include "loop/io/backend.h"
#include "loop/state.h"

namespace tl::detail {

namespace {

constexpr uint32_t kPeriodWaits = 8;
constexpr uint64_t kPeriodWindows = 4;
constexpr uint64_t kRollWindows = 64;
constexpr uint64_t kHoldWindows = 256;

void set_dense(tl_loop *loop, bool dense) noexcept {
    IoBatch &b = loop->batch;
    if (dense == b.dense) return;
    b.dense = dense;
    if (b.kernel) loop->io->set_batch(dense ? b.bound_ns : 0);
}

/* A period opens at a wait that returned events (open) or at the next one
   (after a quiet spell): the events of its later waits arrived within it. */
void restart_period(IoBatch &b, uint64_t now_ns, bool open) noexcept {
    b.period_start_ns = now_ns;
    b.period_events = 0;
    b.period_waits = 0;
    b.period_open = open;
}

/* The judgement of a period that has lasted long enough (top comment). */
void judge(tl_loop *loop, uint64_t now_ns) noexcept {
    IoBatch &b = loop->batch;
    const uint64_t span = now_ns - b.period_start_ns;
    const uint64_t events = b.period_events;
    if (b.dense) {
        if (span > 2 * b.spell_gap_ns * events) {
            b.hold_until_ns = now_ns + kHoldWindows * b.bound_ns;
            set_dense(loop, false);
        } else if (2 * span > 3 * b.bound_ns * events) {
            set_dense(loop, false); /* fewer than 1.5 events per window */
        }
        restart_period(b, now_ns, true);
    } else if (span <= b.bound_ns * events / 2 && now_ns >= b.hold_until_ns) {
        b.spell_gap_ns = span / events; /* at least 2 events per window */
        set_dense(loop, true);
        restart_period(b, now_ns, true);
    } else if (span >= kRollWindows * b.bound_ns) {
        restart_period(b, now_ns, true);
    }
}

} // namespace

void batch_configure(tl_loop *loop, IoBackend *io) noexcept {
    IoBatch &b = loop->batch;
    if (!b.adaptive) {
        loop->stats.io_batch_ns = io->set_batch(b.bound_ns);
        return;
    }
    /* The kernel gathers where it can, and only while dense; the loop's
       sleep stands in elsewhere, so the bound is in effect on every
       backend. */
    b.kernel = io->can_batch();
    io->set_batch(b.kernel && b.dense ? b.bound_ns : 0);
    loop->stats.io_batch_ns = b.bound_ns;
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
        b.last_io_ns = now_ns;
        if (!b.period_open) {
            restart_period(b, now_ns, true);
            return;
        }
        b.period_events += (uint64_t)events;
        if (++b.period_waits >= kPeriodWaits &&
            now_ns - b.period_start_ns >= kPeriodWindows * b.bound_ns)
            judge(loop, now_ns);
    } else if (blocked && now_ns - b.last_io_ns > b.bound_ns) {
        /* A wait found nothing for longer than the window: the load has
           stopped, and the first event after the quiet must not be held. */
        set_dense(loop, false);
        restart_period(b, now_ns, false);
    }
}

} // namespace tl::detail
