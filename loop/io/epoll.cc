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
 * heap4 timer, tickloop-bench's wait sweep): a timed epoll_wait of 1 s ends
 * 1.2 ms late, of 5 s 2.7-5.2 ms late; the timerfd wait ends at the timerfd
 * floor (0.2-0.3 ms) for both.
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
 *
 * A registration epoll cannot delete. epoll keys a registration on the open
 * file *and* the fd number, and drops it only when the file is closed for
 * good. An fd closed before tl_io_stop whose file lives on (a dup, a forked
 * child) cannot be named in EPOLL_CTL_DEL any more (EBADF), so its
 * registration stays in the set and, level-triggered, reports the file's
 * readiness with the stopped watcher's tag forever: a loop that only dropped
 * those events would spin at 100% CPU. On epoll such a tag can come from
 * nothing else (every other registration was deleted before the loop forgot
 * it), so the first event whose tag names no registration makes the backend
 * build a new set from the registry and close the old one, as libev does. A
 * new watcher on the same fd number and file meets the leftover at
 * EPOLL_CTL_ADD (EEXIST) and takes it over with EPOLL_CTL_MOD.
 */
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "loop/io/backend.h"
#include "loop/io/io.h"
#include "loop/io_event.h"
#include "loop/state.h"
#include "loop/timerfd.h"

namespace tl::detail {
namespace {

/* Puts the timerfd in the set, edge-triggered (never read: see the top). */
int timer_fd_add(int epfd, int tfd) noexcept {
    struct epoll_event ev;
    std::memset(&ev, 0, sizeof ev);
    ev.events = EPOLLIN | EPOLLET;
    ev.data.u64 = kBackendTag; /* never reported to the loop */
    return epoll_ctl(epfd, EPOLL_CTL_ADD, tfd, &ev) < 0 ? -errno : 0;
}

class EpollBackend final : public IoBackend {
public:
    EpollBackend(tl_loop *loop, int epfd, int timer_fd, bool use_pwait2) noexcept
        : loop_(loop), epfd_(epfd), timer_fd_(timer_fd), use_pwait2_(use_pwait2) {}
    ~EpollBackend() override {
        if (timer_fd_ >= 0) close(timer_fd_);
        close(epfd_);
    }

    const char *name() const noexcept override { return "epoll"; }
    tl_io_kind kind() const noexcept override { return TL_IO_EPOLL; }
    /* The epoll set is itself readable while one of its fds is ready (the
       timerfd included: a host polling it wakes for a deadline the loop armed
       in its last timed wait). */
    int poll_fd() noexcept override { return epfd_; }

    int add(int fd) noexcept override {
        const tl_io *w = loop_->io_slots[fd].watcher;
        int r = ctl(EPOLL_CTL_ADD, fd, w->events, io_tag(fd, w->gen));
        /* The loop has no registration of fd, so this one is a leftover of
           a watcher whose fd was closed before its stop, on the same file:
           take it over. */
        if (r == -EEXIST) r = ctl(EPOLL_CTL_MOD, fd, w->events, io_tag(fd, w->gen));
        return r;
    }
    int modify(int fd, unsigned events) noexcept override {
        return ctl(EPOLL_CTL_MOD, fd, events, io_tag(fd, loop_->io_slots[fd].watcher->gen));
    }
    void remove(int fd) noexcept override {
        /* EBADF: the fd was closed. If that closed the file, the kernel
           dropped the registration; if the file lives on, it stays, and
           drop_leftovers() clears it when it reports. */
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
            /* Kept when it already holds an earlier deadline that has not
               fired (see the top comment). */
            int r = timerfd_arm(timer_fd_, &armed_ns_, deadline_ns, 0);
            if (r < 0) return r;
            n = epoll_wait(epfd_, events_, cap, -1);
        } else {
            n = wait_relative(deadline_ns, cap);
        }
        if (n < 0) return -errno;
        int ready = 0;
        for (int i = 0; i < n; ++i) {
            uint64_t tag = events_[i].data.u64;
            if (tag == kBackendTag) {
                /* The deadline timerfd fired: the next timed wait arms it. */
                armed_ns_ = 0;
                continue;
            }
            out[ready++] = ReadyEvent{tag, tl_events(events_[i].events)};
        }
        drop_leftovers(out, ready);
        return ready;
    }

private:
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

    /* The new set takes the old one's descriptor number (dup3), so
       tl_loop_fd() stays valid for a host that polls it with poll(2). A host
       that registered it in an epoll set of its own loses that registration
       with the old file: a cost only the leftover case above pays. */
    int replace_set() noexcept {
        int epfd = epoll_create1(EPOLL_CLOEXEC);
        if (epfd < 0) return -errno;
        int r = dup3(epfd, epfd_, O_CLOEXEC) < 0 ? -errno : 0;
        close(epfd);
        /* The set's own member, the deadline timerfd, joins the new set (the
           caller re-adds the registry); if it cannot, timed waits become
           relative. */
        if (r == 0 && timer_fd_ >= 0 && timer_fd_add(epfd_, timer_fd_) < 0) {
            close(timer_fd_);
            timer_fd_ = -1;
        }
        armed_ns_ = 0; /* an expiry queued in the old set is gone: arm again */
        return r;
    }

    /* An event whose tag names no registration comes from one that
       EPOLL_CTL_DEL could not remove (see the top of this file): replace the
       set by one holding exactly the registry. The events already returned
       stay valid; the loop's filter drops the leftover's. Tags of
       generation 0 are not registrations. */
    void drop_leftovers(const ReadyEvent *events, int n) noexcept {
        for (int i = 0; i < n; ++i) {
            if (io_tag_gen(events[i].tag) == 0 || io_current(loop_, events[i].tag)) continue;
            if (replace_set() == 0) io_readd_all(loop_, this);
            return;
        }
    }

    int ctl(int op, int fd, unsigned events, uint64_t tag) noexcept {
        struct epoll_event ev;
        std::memset(&ev, 0, sizeof ev);
        ev.events = poll_bits(events);
        ev.data.u64 = tag;
        return epoll_ctl(epfd_, op, fd, &ev) < 0 ? -errno : 0;
    }

    tl_loop *loop_;
    int epfd_;
    int timer_fd_;          /* -1: relative waits */
    uint64_t armed_ns_ = 0; /* the deadline the timerfd holds; 0: none */
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
    if (timer_fd_add(epfd, tfd) < 0) {
        close(tfd);
        return -1;
    }
    return tfd;
}

} // namespace

int epoll_backend_create(tl_loop *loop, IoBackend **out) noexcept {
    int epfd = epoll_create1(EPOLL_CLOEXEC);
    if (epfd < 0) return -errno;
    int tfd = timer_fd_create(epfd);
    auto *backend = new EpollBackend(loop, epfd, tfd, !env_is_zero("TICKLOOP_EPOLL_PWAIT2"));
    if (!backend) {
        if (tfd >= 0) close(tfd);
        close(epfd);
        return -ENOMEM;
    }
    *out = backend;
    return 0;
}

} // namespace tl::detail
