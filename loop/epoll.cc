/* SPDX-License-Identifier: MIT */
/*
 * The epoll I/O backend: level-triggered readiness, waits without slack.
 *
 * Timed waits. The kernel pads every timed epoll_wait/epoll_pwait2 by 0.1%
 * of the time left (select_estimate_accuracy: 1 ms late on a 1 s wait, 30 ms
 * on 30 s) on top of the thread's timer slack, so a timed wait is instead an
 * unlimited epoll_wait on a set that holds an absolute CLOCK_MONOTONIC
 * timerfd armed at the deadline: an hrtimer with no slack, and absolute, so
 * a retried or late-started wait never moves it. Measured on this VM (lone
 * heap4 timer, tickloop-bench's wait sweep): a 1 s wait went from 1.2 ms late
 * to the timerfd floor (0.2-0.3 ms), 5 s from 2.7-5.2 ms.
 *
 * The timerfd is re-armed only when the deadline moves *earlier* than the
 * one it holds, or it has fired (Netty's epoll transport re-armed on every
 * wait and paid a syscall per iteration for it). A deadline that moved later
 * (the earliest timer restarted, the heartbeat pattern, or stopped) leaves
 * the old one armed: it wakes the loop once early, the loop finds nothing
 * due and arms the new deadline. So a loop that restarts its earliest timer
 * on every I/O event makes no extra syscall per iteration, and an idle loop
 * pays one timerfd_settime per distinct deadline it sleeps for.
 *
 * The timerfd is edge-triggered (EPOLLET): each expiry queues one event and
 * is never read (timerfd_settime resets its count), which saves a read(2)
 * per timer wake-up. Its event stays inside the backend.
 *
 * Zero and unlimited waits are a plain epoll_wait (0 or -1 ms say them
 * exactly, and it is the cheapest call). TICKLOOP_EPOLL_TIMERFD=0, or a
 * timerfd the kernel refuses (EMFILE), selects relative waits instead:
 * epoll_pwait2 (Linux 5.11) with a timespec; if the kernel answers ENOSYS
 * (or a seccomp filter EPERM, which a wait cannot otherwise return), the
 * backend falls back for good to epoll_wait with the timeout rounded *up* to
 * whole milliseconds: rounding down would wake before the deadline and turn
 * a sub-millisecond remainder into a busy 0-timeout spin.
 * TICKLOOP_EPOLL_PWAIT2=0 forces that last fallback, so tests can exercise
 * it.
 */
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "loop_internal.h"

namespace tl::detail {
namespace {

/* The timerfd's epoll tag. Never a loop tag (those carry an fd >= 0 in the
 * low half), never reported to the loop. */
constexpr uint64_t kTimerTag = UINT64_MAX;

class EpollBackend final : public IoBackend {
public:
    EpollBackend(int epfd, int timer_fd, bool use_pwait2) noexcept
        : epfd_(epfd), timer_fd_(timer_fd), use_pwait2_(use_pwait2) {}
    ~EpollBackend() override {
        if (timer_fd_ >= 0) close(timer_fd_);
        close(epfd_);
    }

    const char *name() const noexcept override { return "epoll"; }
    /* The epoll set is itself readable while one of its fds is ready (the
       timerfd included: a host polling it wakes for a deadline the loop armed
       in its last timed wait). */
    int poll_fd() noexcept override { return epfd_; }

    int add(int fd, unsigned events, uint64_t tag) noexcept override {
        return ctl(EPOLL_CTL_ADD, fd, events, tag);
    }
    int modify(int fd, unsigned events, uint64_t tag) noexcept override {
        return ctl(EPOLL_CTL_MOD, fd, events, tag);
    }
    void remove(int fd, uint64_t) noexcept override {
        /* EBADF/ENOENT: the fd was closed (the kernel dropped it) or
           reused; either way nothing of ours is registered any more. */
        epoll_ctl(epfd_, EPOLL_CTL_DEL, fd, nullptr);
    }

    int wait(uint64_t deadline_ns, ReadyEvent *out, int cap) noexcept override {
        if (cap > kMaxEvents) cap = kMaxEvents;
        int n;
        if (deadline_ns == 0 || deadline_ns == UINT64_MAX) {
            /* epoll_wait says "no wait" and "no limit" exactly, and is the
               cheaper call: epoll_pwait2 copies and converts a timespec even
               for a zero timeout (a NOWAIT poll: 264 vs 150 ns on this VM). */
            n = epoll_wait(epfd_, events_, cap, deadline_ns ? -1 : 0);
        } else if (timer_fd_ >= 0) {
            int r = arm_timer(deadline_ns);
            if (r < 0) return r;
            n = epoll_wait(epfd_, events_, cap, -1);
        } else {
            n = wait_relative(deadline_ns, cap);
        }
        if (n < 0) return -errno;
        int ready = 0;
        for (int i = 0; i < n; ++i) {
            uint64_t tag = events_[i].data.u64;
            if (tag == kTimerTag) {
                armed_ns_ = 0; /* fired: the next timed wait arms again */
                continue;
            }
            out[ready++] = ReadyEvent{tag, tl_events(events_[i].events)};
        }
        return ready;
    }

private:
    /* Makes the timerfd fire no later than deadline_ns. Kept when it already
       holds an earlier deadline that has not fired (see the top comment). */
    int arm_timer(uint64_t deadline_ns) noexcept {
        if (armed_ns_ != 0 && armed_ns_ <= deadline_ns) return 0;
        struct itimerspec its;
        std::memset(&its, 0, sizeof its);
        its.it_value.tv_sec = (time_t)(deadline_ns / 1000000000u);
        its.it_value.tv_nsec = (long)(deadline_ns % 1000000000u);
        if (timerfd_settime(timer_fd_, TFD_TIMER_ABSTIME, &its, nullptr) < 0) return -errno;
        armed_ns_ = deadline_ns;
        return 0;
    }

    /* A timed wait for what remains until deadline_ns, from a fresh clock
       read; returns epoll's result (errno set on failure). */
    int wait_relative(uint64_t deadline_ns, int cap) noexcept {
        uint64_t timeout_ns = remaining_ns(deadline_ns);
        if (timeout_ns == 0) return epoll_wait(epfd_, events_, cap, 0);
        int n = -1;
        if (use_pwait2_) {
            struct timespec ts;
            ts.tv_sec = (time_t)(timeout_ns / 1000000000u);
            ts.tv_nsec = (long)(timeout_ns % 1000000000u);
            n = epoll_pwait2(epfd_, events_, cap, &ts, nullptr);
            if (n < 0 && (errno == ENOSYS || errno == EPERM)) use_pwait2_ = false;
        }
        if (!use_pwait2_) n = epoll_wait(epfd_, events_, cap, timeout_ms(timeout_ns));
        return n;
    }

    /* A finite, non-zero wait in whole ms, rounded up (never early). */
    static int timeout_ms(uint64_t ns) noexcept {
        uint64_t ms = ns / 1000000u + (ns % 1000000u != 0);
        return ms > INT_MAX ? INT_MAX : (int)ms;
    }

    int ctl(int op, int fd, unsigned events, uint64_t tag) noexcept {
        struct epoll_event ev;
        std::memset(&ev, 0, sizeof ev);
        ev.events = poll_bits(events);
        ev.data.u64 = tag;
        return epoll_ctl(epfd_, op, fd, &ev) < 0 ? -errno : 0;
    }

    int epfd_;
    int timer_fd_;          /* -1: relative waits */
    uint64_t armed_ns_ = 0; /* the timerfd's pending deadline; 0: none */
    bool use_pwait2_;
    struct epoll_event events_[kMaxEvents];
};

} // namespace

namespace {

bool env_is_zero(const char *name) noexcept {
    const char *env = std::getenv(name);
    return env && std::strcmp(env, "0") == 0;
}

/* The absolute timer of the timed waits, in the set; -1 when disabled or
   refused (the relative waits then serve). */
int timer_fd_create(int epfd) noexcept {
    if (env_is_zero("TICKLOOP_EPOLL_TIMERFD")) return -1;
    int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (tfd < 0) return -1;
    struct epoll_event ev;
    std::memset(&ev, 0, sizeof ev);
    ev.events = EPOLLIN | EPOLLET;
    ev.data.u64 = kTimerTag;
    if (epoll_ctl(epfd, EPOLL_CTL_ADD, tfd, &ev) < 0) {
        close(tfd);
        return -1;
    }
    return tfd;
}

} // namespace

int epoll_backend_create(IoBackend **out) noexcept {
    int epfd = epoll_create1(EPOLL_CLOEXEC);
    if (epfd < 0) return -errno;
    int tfd = timer_fd_create(epfd);
    auto *backend = new EpollBackend(epfd, tfd, !env_is_zero("TICKLOOP_EPOLL_PWAIT2"));
    if (!backend) {
        if (tfd >= 0) close(tfd);
        close(epfd);
        return -ENOMEM;
    }
    *out = backend;
    return 0;
}

} // namespace tl::detail
