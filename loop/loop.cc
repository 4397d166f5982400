/* SPDX-License-Identifier: MIT */
/*
 * The iteration: tl_loop_run and its steps, how long the wait may block, and
 * the same answer for a host that embeds the loop (tl_loop_fd,
 * tl_loop_timeout).
 *
 * One iteration:
 *   1. run the IDLE hooks, then the PREPARE hooks (hook.cc);
 *   2. timeout = 0 (NOWAIT, stop requested, an IDLE hook active, nothing
 *      referenced left, stream callbacks due, a timer already due) or the
 *      time to the timers' next wake-up on the wait's clock (timer.cc; the
 *      other clocks' timerfds are armed on the way), or "forever" without
 *      one;
 *   3. wait in the I/O backend until the absolute deadline (now + timeout),
 *      with no slack; EINTR re-waits for the same deadline (while adaptive
 *      batching finds the load dense on a backend that cannot gather
 *      itself, a sleep of at most io_batch_ns comes first: io/batch.h);
 *   4. read the clock once into the cached `now`, and tell the batching
 *      how many events the wait returned;
 *   5. run every due timer, then the I/O callbacks of the events the wait returned,
 *      then the stream callbacks due;
 *   6. run the CHECK hooks.
 * Timers go first so that one due while the wait gathered events is not held
 * behind a long batch of I/O callbacks. The timeout is computed after the
 * hooks, which may start or stop timers.
 */
#include <cerrno>

#include "loop/clock.h"
#include "loop/hook.h"
#include "loop/io/batch.h"
#include "loop/io/io.h"
#include "loop/io_event.h"
#include "loop/slack.h"
#include "loop/state.h"
#include "loop/stream/stream.h"
#include "loop/timer_queue.h"
#include "loop/verify.h"
#include "timers/timers.h"

using namespace tl::detail;

namespace {

/* A referenced handle is active: tl_loop_run(DEFAULT) goes on. */
bool alive(const tl_loop *loop) noexcept {
    return loop->active_handles > loop->unref_active;
}

/* How long the next wait may block, in ns; UINT64_MAX for no limit. Not at
   all while an IDLE hook wants the next iteration, nor when the hooks just
   stopped the last referenced handle (blocking then could be forever, and
   the run is about to end: libuv's uv__backend_timeout does the same). */
uint64_t wait_timeout(tl_loop *loop, tl_run_mode mode) noexcept {
    if (mode == TL_RUN_NOWAIT || loop->stopping || loop->idle_hooks || !alive(loop)) return 0;
    if (streams_pending(loop)) return 0; /* stream callbacks due: do not sleep */
    /* The timers' next wake-up on the wait's clock; the other clocks'
       timerfds are armed on the way. */
    return timers_next_wakeup(loop, true);
}

/* One iteration; returns 0 or a negative errno from the wait. */
int iterate(tl_loop *loop, tl_run_mode mode) noexcept {
    /* An IDLE hook that ran this iteration makes it non-blocking even if it
       stopped itself: it was promised an iteration that does not sleep. */
    const bool idled = loop->idle_hooks != 0;
    hooks_run(loop, TL_HOOK_IDLE);
    hooks_run(loop, TL_HOOK_PREPARE);
    uint64_t timeout = idled ? 0 : wait_timeout(loop, mode);
    /* The backends wait for the deadline itself (0: do not block). */
    uint64_t deadline =
        timeout == 0 ? 0 : sat_add(loop->timers.domain[TL_CLOCK_MONOTONIC].now, timeout);
    batch_before_wait(loop, deadline, loop->timers.domain[TL_CLOCK_MONOTONIC].now);
    int n;
    do {
        /* A signal handler interrupted the wait: wait out the same deadline. */
        n = loop->io->wait(deadline, loop->events, kMaxEvents);
    } while (n == -EINTR);
    if (n < 0) return n;
    update_time(loop);
    batch_after_wait(loop, n, loop->timers.domain[TL_CLOCK_MONOTONIC].now, deadline != 0);
    uint64_t ran = timers_dispatch(loop);
    if (ran) {
        ++loop->stats.timer_wakeups;
        if (ran > loop->stats.max_timers_per_wakeup) loop->stats.max_timers_per_wakeup = ran;
    }
    ran += io_dispatch(loop, n);
    ran += streams_run_pending(loop);
    hooks_run(loop, TL_HOOK_CHECK);
    TL_DEBUG_VERIFY(loop, "loop iteration");
    ++loop->stats.iterations;
    if (ran == 0 && timeout != 0) ++loop->stats.empty_wakeups;
    return 0;
}

} // namespace

extern "C" {

TL_API int tl_loop_run(tl_loop *loop, tl_run_mode mode) {
    if (!loop) return -EINVAL;
    if (mode != TL_RUN_DEFAULT && mode != TL_RUN_ONCE && mode != TL_RUN_NOWAIT) return -EINVAL;
    if (loop->running) return -EBUSY;
    loop->running = true;
    loop->run_thread = pthread_self();
    apply_timer_slack(loop);
    /* The first wait's timeout needs the time now (a stale one would make it
       too long). A NOWAIT run does not wait: the read after its poll is the
       iteration's one clock read; without an iteration (nothing active, or
       a stop already requested) it reads the clock here, so that every mode
       leaves tl_now() fresh. */
    if (mode != TL_RUN_NOWAIT || !alive(loop) || loop->stopping) update_time(loop);
    int r = 0;
    while (alive(loop) && !loop->stopping) {
        r = iterate(loop, mode);
        if (r < 0 || mode != TL_RUN_DEFAULT) break;
    }
    loop->stopping = false;
    loop->running = false;
    if (r < 0) return r;
    return alive(loop) ? 1 : 0;
}

TL_API void tl_loop_stop(tl_loop *loop) {
    if (loop) loop->stopping = true;
}

TL_API int tl_loop_alive(const tl_loop *loop) {
    return loop && alive(loop) ? 1 : 0;
}

TL_API int tl_loop_fd(const tl_loop *loop) {
    if (!loop) return -EINVAL;
    TL_CHECK_LOOP_THREAD(loop);
    return loop->io->poll_fd();
}

TL_API uint64_t tl_loop_timeout(const tl_loop *loop) {
    if (!loop) return 0;
    TL_CHECK_LOOP_THREAD(loop);
    if (loop->stopping || loop->idle_hooks || streams_pending(loop)) return 0;
    /* io_uring re-arms ride on the next wait; a host about to block on
       tl_loop_fd would never see their completions. Submit them now (one
       syscall) rather than make the host run an extra round. Completions
       already waiting (or a failed submit, which the next tl_loop_run
       reports) mean the host must not block. */
    if (loop->io->needs_enter() && (loop->io->flush() < 0 || loop->io->needs_enter())) return 0;
    /* Every clock read afresh: the cached times may be a whole host
       iteration old, and a timeout from them would make the host wait that
       much too long. Without for_wait the walk writes nothing. */
    return timers_next_wakeup(const_cast<tl_loop *>(loop), false);
}

} // extern "C"
