/* SPDX-License-Identifier: MIT */
/*
 * Clocks: reading them (tl_clock_now, tl_now, tl_update_time, tl_loop_now,
 * the test seam), and the timerfds that wake the loop for the timer domains
 * whose clock the I/O backend's wait is not on (timer_queue.h).
 *
 * The wait ends at a CLOCK_MONOTONIC deadline, so MONOTONIC's domain needs no
 * waker of its own. BOOTTIME and REALTIME get, on the first timer started on
 * them, their domain's instance and an absolute timerfd on that clock,
 * watched by an internal I/O watcher of the loop, so that both I/O backends
 * wake for them the way they wake for any fd:
 * - BOOTTIME: a suspended system's time passes for the timerfd too, so a
 *   timer "30 minutes from now" fires 30 minutes later even across a sleep;
 *   a MONOTONIC wait would add the time spent suspended.
 * - REALTIME: the timerfd is armed with TFD_TIMER_CANCEL_ON_SET, so a set or
 *   step of the wall clock (settimeofday, an NTP step, a resume that
 *   corrects the clock) makes it readable at once, and its read fails with
 *   ECANCELED. That wake-up is the loop's whole reaction: the next dispatch
 *   reads the wall clock again and runs what the jump made due; timers the
 *   jump moved away keep waiting for their absolute deadline. No polling.
 * The timerfd is armed by the queue's wake-up walk before each wait
 * (clock_arm), and re-armed only when the clock's wake-up moved earlier than
 * the one it holds, or it has fired (as epoll.cc does with its own), so a
 * steady state costs no syscall per iteration; each clock with timers costs
 * a clock read per wait and per dispatch (vDSO, no syscall), a clock without
 * timers nothing.
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

#include "loop/clock.h"
#include "loop/io/io.h"
#include "loop/state.h"
#include "loop/timer_queue.h"
#include "loop/timerfd.h"

using namespace tl::detail;

namespace {

constexpr clockid_t kClockIds[kClocks] = {CLOCK_MONOTONIC, CLOCK_BOOTTIME, CLOCK_REALTIME};

uint64_t clock_ns(clockid_t id) noexcept {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The domain whose timerfd watcher w is. */
TimerDomain &state_of(tl_loop *loop, tl_io *w) noexcept {
    for (TimerDomain &d : loop->timers.domain)
        if (w == &d.watcher) return d;
    __builtin_unreachable();
}

/* The timerfd fired (or, REALTIME, reported a clock jump): drain it. */
void on_clock_fd(tl_loop *loop, tl_io *w, unsigned) {
    TimerDomain &cs = state_of(loop, w);
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
    TimerDomain &cs = loop->timers.domain[c];
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

void update_time(tl_loop *loop) noexcept {
    loop->timers.domain[TL_CLOCK_MONOTONIC].now = read_clock(loop, TL_CLOCK_MONOTONIC);
}

int clock_prepare(tl_loop *loop, unsigned c) noexcept {
    TimerDomain &cs = loop->timers.domain[c];
    if (cs.by_wait || (cs.instance && cs.fd >= 0)) return 0;
    int r = timers_open_domain(loop, c);
    if (r < 0) return r;
    int fd = open_timerfd(c);
    if (fd < 0) return fd;
    r = io_start_internal(loop, &cs.watcher, fd, on_clock_fd);
    if (r < 0) {
        close(fd);
        return r;
    }
    cs.fd = fd;
    cs.armed = 0;
    return 0;
}

void clock_arm(tl_loop *loop, unsigned c, uint64_t wake) noexcept {
    arm(loop, c, wake);
}

void clock_close(tl_loop *loop) noexcept {
    for (TimerDomain &cs : loop->timers.domain)
        if (cs.fd >= 0) {
            io_stop_internal(loop, &cs.watcher);
            close(cs.fd);
            cs.fd = -1;
        }
}

int clock_fork(tl_loop *loop) noexcept {
    /* A timerfd is shared with the parent after fork (the parent's arming
       would wake the child): a new one per clock, with the watcher moved
       onto it, armed again by the next wait. */
    for (unsigned c = 1; c < kClocks; ++c) {
        TimerDomain &cs = loop->timers.domain[c];
        if (cs.fd < 0) continue;
        int fd = open_timerfd(c);
        if (fd < 0) return fd;
        int r = io_replace_fd(loop, &cs.watcher, fd);
        if (r < 0) {
            close(fd);
            return r;
        }
        fd = r; /* it may have moved (io_replace_fd) */
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

TL_API uint64_t tl_now(const tl_loop *loop) {
    return loop ? loop->timers.domain[TL_CLOCK_MONOTONIC].now : 0;
}

TL_API void tl_update_time(tl_loop *loop) {
    if (loop) update_time(loop);
}

TL_API uint64_t tl_loop_now(const tl_loop *loop, tl_clock clock) {
    unsigned c = (unsigned)clock;
    if (!loop || c >= (unsigned)kClocks) return 0;
    /* A domain without an instance has never read its clock. */
    const TimerDomain &d = loop->timers.domain[c];
    return d.instance ? d.now : read_clock(loop, c);
}

void tl_detail_loop_set_clock(tl_loop *loop, tl_detail_clock_fn read, void *ctx) noexcept {
    loop->test_clock = read;
    loop->test_clock_ctx = ctx;
    /* The new clocks may be behind the times the instances were driven to:
       start each over at its clock's new time, as after a wall-clock step. */
    for (unsigned c = 0; c < kClocks; ++c) {
        TimerDomain &d = loop->timers.domain[c];
        d.now = d.dispatched = read_clock(loop, c);
        timers_rebase(loop, c, d.now);
    }
}

void tl_detail_loop_clock_changed(tl_loop *loop) noexcept {
    TimerDomain &cs = loop->timers.domain[TL_CLOCK_REALTIME];
    /* Only an armed timerfd reports jumps, and it is armed while REALTIME
       timers are active; a late report after the last one stopped is not
       counted. */
    if (cs.instance && loop->timers.backend->count(cs.instance)) ++loop->stats.clock_changes;
    /* A cancelled timerfd is disarmed: the next wait arms it again. */
    cs.armed = 0;
}

} // extern "C"
