/* SPDX-License-Identifier: MIT */
/*
 * The epoll I/O backend: level-triggered readiness, nanosecond waits.
 *
 * A wait of zero or of no limit is an epoll_wait (0 or -1 ms say it exactly,
 * and it is the cheaper syscall); timed waits use epoll_pwait2 (Linux 5.11)
 * with a timespec. If the kernel answers
 * ENOSYS (or a seccomp filter EPERM, which a wait cannot otherwise return),
 * the backend falls back for good to epoll_wait with the timeout rounded *up*
 * to whole milliseconds: rounding down would wake before the deadline and
 * turn a sub-millisecond remainder into a busy 0-timeout spin.
 * TICKLOOP_EPOLL_PWAIT2=0 forces the fallback, so tests can exercise it.
 *
 * A registration epoll cannot delete. epoll keys a registration on the open
 * file *and* the fd number, and drops it only when the file is closed for
 * good. An fd closed before tl_io_stop whose file lives on (a dup, a forked
 * child) cannot be named in EPOLL_CTL_DEL any more (EBADF), so its
 * registration stays in the set and, level-triggered, reports the file's
 * readiness with the stopped watcher's tag forever: the loop dropped those
 * events and spun at 100% CPU. On epoll such a tag can come from nothing
 * else (every other registration was deleted before the loop forgot it), so
 * the first event whose tag names no registration makes the backend build a
 * new set from the registry and close the old one, as libev does. A new
 * watcher on the same fd number and file meets the leftover at
 * EPOLL_CTL_ADD (EEXIST) and takes it over with EPOLL_CTL_MOD.
 */
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "loop_internal.h"

namespace tl::detail {
namespace {

class EpollBackend final : public IoBackend {
public:
    EpollBackend(tl_loop *loop, int epfd, bool use_pwait2) noexcept
        : loop_(loop), epfd_(epfd), use_pwait2_(use_pwait2) {}
    ~EpollBackend() override { close(epfd_); }

    const char *name() const noexcept override { return "epoll"; }
    /* The epoll set is itself readable while one of its fds is ready. */
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

    int wait(uint64_t timeout_ns, ReadyEvent *out, int cap) noexcept override {
        if (cap > kMaxEvents) cap = kMaxEvents;
        int n;
        if (timeout_ns == 0 || timeout_ns == UINT64_MAX) {
            /* epoll_wait says "no wait" and "no limit" exactly, and is the
               cheaper call: epoll_pwait2 copies and converts a timespec even
               for a zero timeout (a NOWAIT poll: 264 vs 150 ns on this VM). */
            n = epoll_wait(epfd_, events_, cap, timeout_ns ? -1 : 0);
        } else {
            n = -1;
            if (use_pwait2_) {
                struct timespec ts;
                ts.tv_sec = (time_t)(timeout_ns / 1000000000u);
                ts.tv_nsec = (long)(timeout_ns % 1000000000u);
                n = epoll_pwait2(epfd_, events_, cap, &ts, nullptr);
                if (n < 0 && (errno == ENOSYS || errno == EPERM)) use_pwait2_ = false;
            }
            if (!use_pwait2_) n = epoll_wait(epfd_, events_, cap, timeout_ms(timeout_ns));
        }
        if (n < 0) return -errno;
        for (int i = 0; i < n; ++i)
            out[i] = ReadyEvent{events_[i].data.u64, tl_events(events_[i].events)};
        drop_leftovers(out, n);
        return n;
    }

private:
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
        return r;
    }

    /* An event whose tag names no registration comes from one that
       EPOLL_CTL_DEL could not remove (see the top of this file): replace the
       set by one holding exactly the registry. The events already collected
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
    bool use_pwait2_;
    struct epoll_event events_[kMaxEvents];
};

} // namespace

int epoll_backend_create(tl_loop *loop, IoBackend **out) noexcept {
    int epfd = epoll_create1(EPOLL_CLOEXEC);
    if (epfd < 0) return -errno;
    const char *env = std::getenv("TICKLOOP_EPOLL_PWAIT2");
    bool use_pwait2 = !(env && std::strcmp(env, "0") == 0);
    auto *backend = new EpollBackend(loop, epfd, use_pwait2);
    if (!backend) {
        close(epfd);
        return -ENOMEM;
    }
    *out = backend;
    return 0;
}

} // namespace tl::detail
