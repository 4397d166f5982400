/* SPDX-License-Identifier: MIT */
/*
 * Clocks: reading them, and the loop's timers on the clocks other than
 * CLOCK_MONOTONIC (tl_clock_now, tl_loop_now, the test seam).
 *
 * Each clock's timers live in their own instance of the loop's timer backend
 * (timers on different clocks are never ordered against each other, and an
 * instance is a pure structure driven by one clock's `now`). MONOTONIC is the
 * loop's own: its instance is loop->timers, its time loop->now, and the I/O
 * backend's wait ends at its next wake-up. BOOTTIME and REALTIME get, on the
 * first timer started on them, an instance and an absolute timerfd on that
 * clock, watched by an internal I/O watcher of the loop, so that both I/O
 * backends wake for them the way they wake for any fd:
 * - BOOTTIME: a suspended system's time passes for the timerfd too, so a
 *   timer "30 minutes from now" fires 30 minutes later even across a sleep;
 *   a MONOTONIC wait would add the time spent suspended.
 * - REALTIME: the timerfd is armed with TFD_TIMER_CANCEL_ON_SET, so a set or
 *   step of the wall clock (settimeofday, an NTP step, a resume that
 *   corrects the clock) makes it readable at once, and its read fails with
 *   ECANCELED. That wake-up is the loop's whole reaction: the next dispatch
 *   reads the wall clock again and runs what the jump made due; timers the
 *   jump moved away keep waiting for their absolute deadline. No polling.
 * The timerfd is re-armed only when the clock's wake-up moved earlier than
 * the one it holds, or it has fired (as epoll.cc does with its own), so a
 * steady state costs no syscall per iteration; each clock with timers costs
 * one clock read per iteration (vDSO, no syscall), a clock without timers
 * nothing.
 *
 * Clock reads all go through read_clock(), which a test may redirect
 * (tl_detail_loop_set_clock) to drive time by hand; the kernel objects are
 * then left alone.
 */
#include <cerrno>
#include <cstring>
#include <ctime>
#include <sys/timerfd.h>
#include <unistd.h>

#include "loop_internal.h"
#include "timerfd.h"

using namespace tl::detail;

namespace {

constexpr clockid_t kClockIds[kClocks] = {CLOCK_MONOTONIC, CLOCK_BOOTTIME, CLOCK_REALTIME};

uint64_t clock_ns(clockid_t id) noexcept {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

tl_loop::ClockState &state_of(tl_loop *loop, tl_io *w) noexcept {
    return w == &loop->clocks[TL_CLOCK_BOOTTIME].watcher ? loop->clocks[TL_CLOCK_BOOTTIME]
                                                         : loop->clocks[TL_CLOCK_REALTIME];
}

/* The timerfd fired (or, REALTIME, reported a clock jump): drain it. */
void on_clock_fd(tl_loop *loop, tl_io *w, unsigned) {
    tl_loop::ClockState &cs = state_of(loop, w);
    uint64_t expirations;
    ssize_t n = read(cs.fd, &expirations, sizeof expirations);
    if (n < 0 && errno == ECANCELED) {
        tl_detail_loop_clock_changed(loop);
        return;
    }
    /* Fired (n == 8), or a spurious wake-up (EAGAIN): arm again next time. */
    if (n == (ssize_t)sizeof expirations) cs.armed = 0;
}

/* Makes clock c's timerfd expire no later than wake (absolute, on c). */
void arm(tl_loop *loop, unsigned c, uint64_t wake) noexcept {
    tl_loop::ClockState &cs = loop->clocks[c];
    if (cs.fd < 0 || loop->test_clock || wake == UINT64_MAX) return;
    int r =
        timerfd_arm(cs.fd, &cs.armed, wake, c == TL_CLOCK_REALTIME ? TFD_TIMER_CANCEL_ON_SET : 0);
    /* ECANCELED: the wall clock moved since the last read; the fd is
       readable and the next iteration reads the clock again. */
    if (r == -ECANCELED)
        tl_detail_loop_clock_changed(loop);
    else if (r < 0)
        io_internal_error(loop, "timerfd_settime", r);
}

int open_timerfd(unsigned c) noexcept {
    int fd = timerfd_create(kClockIds[c], TFD_NONBLOCK | TFD_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

} // namespace

namespace tl::detail {

uint64_t read_clock(const tl_loop *loop, unsigned c) noexcept {
    if (loop->test_clock) [[unlikely]]
        return loop->test_clock((int)c, loop->test_clock_ctx);
    return clock_ns(kClockIds[c]);
}

int clock_prepare(tl_loop *loop, unsigned c) noexcept {
    tl_loop::ClockState &cs = loop->clocks[c];
    if (c == TL_CLOCK_MONOTONIC || (cs.timers && cs.fd >= 0)) return 0;
    if (!cs.timers) {
        cs.now = read_clock(loop, c);
        cs.dispatched = cs.now;
        cs.timers = loop->timer_backend->create(&loop->timer_config, cs.now);
        if (!cs.timers) return -ENOMEM;
    }
    int fd = open_timerfd(c);
    if (fd < 0) return fd;
    int r = io_start_internal(loop, &cs.watcher, fd, on_clock_fd);
    if (r < 0) {
        close(fd);
        return r;
    }
    cs.fd = fd;
    cs.armed = 0;
    return 0;
}

uint64_t clocks_timeout(tl_loop *loop) noexcept {
    const tl_timer_backend *b = loop->timer_backend;
    for (unsigned c = 1; c < kClocks; ++c) {
        tl_loop::ClockState &cs = loop->clocks[c];
        if (!cs.timers || b->count(cs.timers) == 0) continue;
        uint64_t wake = timers_wakeup(b, cs.timers);
        cs.now = read_clock(loop, c);
        if (wake <= cs.now) return 0;
        arm(loop, c, wake);
    }
    return UINT64_MAX;
}

uint64_t clocks_remaining(const tl_loop *loop) noexcept {
    const tl_timer_backend *b = loop->timer_backend;
    uint64_t least = UINT64_MAX;
    for (unsigned c = 1; c < kClocks; ++c) {
        const tl_loop::ClockState &cs = loop->clocks[c];
        if (!cs.timers || b->count(cs.timers) == 0) continue;
        uint64_t wake = timers_wakeup(b, cs.timers), now = read_clock(loop, c);
        if (wake <= now) return 0;
        if (wake - now < least) least = wake - now;
    }
    return least;
}

void clock_close(tl_loop *loop) noexcept {
    for (unsigned c = 1; c < kClocks; ++c) {
        tl_loop::ClockState &cs = loop->clocks[c];
        if (cs.fd >= 0) {
            io_stop_internal(loop, &cs.watcher);
            close(cs.fd);
            cs.fd = -1;
        }
        if (cs.timers) loop->timer_backend->destroy(cs.timers);
        cs.timers = nullptr;
    }
}

int clock_fork(tl_loop *loop) noexcept {
    /* A timerfd is shared with the parent after fork (the parent's arming
       would wake the child): a new one per clock, with the watcher moved
       onto it, armed again by the next wait. */
    for (unsigned c = 1; c < kClocks; ++c) {
        tl_loop::ClockState &cs = loop->clocks[c];
        if (cs.fd < 0) continue;
        int fd = open_timerfd(c);
        if (fd < 0) return fd;
        int r = io_replace_fd(loop, &cs.watcher, fd);
        if (r < 0) {
            close(fd);
            return r;
        }
        close(cs.fd);
        cs.fd = fd;
        cs.armed = 0;
    }
    return 0;
}

} // namespace tl::detail

extern "C" {

TL_API uint64_t tl_clock_now(tl_clock clock) {
    unsigned c = (unsigned)clock;
    return c < (unsigned)kClocks ? clock_ns(kClockIds[c]) : 0;
}

TL_API uint64_t tl_loop_now(const tl_loop *loop, tl_clock clock) {
    unsigned c = (unsigned)clock;
    if (!loop || c >= (unsigned)kClocks) return 0;
    if (c == TL_CLOCK_MONOTONIC) return loop->now;
    return loop->clocks[c].timers ? loop->clocks[c].now : read_clock(loop, c);
}

void tl_detail_loop_set_clock(tl_loop *loop, tl_detail_clock_fn read, void *ctx) noexcept {
    loop->test_clock = read;
    loop->test_clock_ctx = ctx;
    /* The new clocks may be behind the times the instances were driven to:
       start each over at its clock's new time, as after a wall-clock step. */
    loop->now = read_clock(loop, TL_CLOCK_MONOTONIC);
    timers_rebase(loop, TL_CLOCK_MONOTONIC, loop->now);
    for (unsigned c = 1; c < kClocks; ++c) {
        loop->clocks[c].now = loop->clocks[c].dispatched = read_clock(loop, c);
        timers_rebase(loop, c, loop->clocks[c].now);
    }
}

void tl_detail_loop_clock_changed(tl_loop *loop) noexcept {
    tl_loop::ClockState &cs = loop->clocks[TL_CLOCK_REALTIME];
    /* Only an armed timerfd reports jumps, and it is armed while REALTIME
       timers are active; a late report after the last one stopped is not
       counted. */
    if (cs.timers && loop->timer_backend->count(cs.timers)) ++loop->stats.clock_changes;
    /* A cancelled timerfd is disarmed: the next wait arms it again. */
    cs.armed = 0;
}

} // extern "C"
