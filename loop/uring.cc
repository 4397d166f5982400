/* SPDX-License-Identifier: MIT */
/*
 * The io_uring I/O backend (liburing): readiness through poll requests, waits
 * with a nanosecond timeout passed to io_uring_enter (EXT_ARG), no timeout
 * SQE and no syscall of its own per iteration.
 *
 * Level-triggered, like epoll.cc. Multishot poll is edge-triggered: measured
 * on Linux 6.18, it posts one CQE for a socket holding unread data and then
 * nothing, and IORING_POLL_ADD_LEVEL with IORING_POLL_ADD_MULTI is -EINVAL.
 * A watcher that read only part of its data would hang. So each registration
 * keeps one single-shot poll in flight; when it completes, the callback runs
 * and the poll is re-armed by an SQE that rides in the same io_uring_enter as
 * the next wait. A poll armed on a still-ready fd completes at once, which is
 * exactly level-triggered behaviour, for no extra syscall.
 *
 * Every poll carries the loop's tag (fd, generation) as user_data. A CQE whose
 * tag is not the fd's current registration (stopped, or stopped and replaced
 * on a reused fd number) is dropped, so a late completion never reaches the
 * wrong watcher. SQEs of our own (poll removal, update) carry kInternalTag.
 *
 * Timed waits are absolute where the kernel offers it (Linux 6.12:
 * IORING_REGISTER_CLOCK with CLOCK_MONOTONIC, then IORING_ENTER_ABS_TIMER):
 * the wait ends at the loop's deadline itself, however late the enter
 * started, and a retried (interrupted) wait cannot extend it. Older kernels,
 * or TICKLOOP_URING_ABS_TIMER=0, wait for the time that remains from a fresh
 * clock read. Either way the enter is made here, not by liburing (2.3 has no
 * absolute-timeout call): the SQ tail is published as liburing does, and the
 * same enter submits the queued re-arms and waits.
 *
 * Ring setup: SINGLE_ISSUER | DEFER_TASKRUN (6.1), else COOP_TASKRUN (5.19),
 * else plain; never SQPOLL. With SINGLE_ISSUER the ring starts disabled and is
 * enabled by the first call from the loop's thread, so a loop may be created
 * on one thread and run on another. A full SQ is submitted and retried; CQ
 * overflow is left to IORING_FEAT_NODROP (required), so no event is lost.
 */
#include "tl_config.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "loop_internal.h"

#if TL_HAVE_LIBURING
#include <liburing.h>

namespace tl::detail {
namespace {

/* Linux 6.12 uapi that Debian's liburing 2.3 headers lack. */
#ifndef IORING_ENTER_ABS_TIMER
#define IORING_ENTER_ABS_TIMER (1U << 5)
#endif
constexpr unsigned kRegisterClock = 29; /* IORING_REGISTER_CLOCK */
struct ClockRegister {                  /* struct io_uring_clock_register */
    uint32_t clockid;
    uint32_t resv[3];
};

/* user_data of our own SQEs (poll removal/update): its CQE is ignored. The
 * loop's tags never take this value (fd and generation are never both ~0). */
constexpr uint64_t kInternalTag = UINT64_MAX;

/* 256 SQEs cover a full batch of re-arms; the CQ is larger so that a burst
 * of completions rarely reaches the kernel's overflow list. */
constexpr unsigned kSqEntries = 256;
constexpr unsigned kCqEntries = 4096;

struct Registration {
    uint64_t tag;  /* 0: no registration */
    unsigned mask; /* poll events wanted */
    bool armed;    /* a poll SQE is in flight */
    bool rearm;    /* queued in rearm_ */
};

class UringBackend final : public IoBackend {
public:
    ~UringBackend() override {
        if (ring_ready_) io_uring_queue_exit(&ring_);
        if (evfd_ >= 0) close(evfd_);
        std::free(regs_);
        std::free(rearm_);
    }

    const char *name() const noexcept override { return "io_uring"; }

    /* For a host loop (tl_loop_fd): an eventfd the kernel signals for every
       CQE it posts, and, with DEFER_TASKRUN, for completion work queued for
       this task (which only an enter turns into CQEs: the ring fd's own
       POLLIN would not show it). wait() drains it before it enters the
       kernel, so a signal that arrives later is never lost. */
    int poll_fd() noexcept override {
        if (evfd_ >= 0) return evfd_;
        int r = enable();
        if (r < 0) return r;
        int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (fd < 0) return -errno;
        r = io_uring_register_eventfd(&ring_, fd);
        if (r < 0) {
            close(fd);
            return r;
        }
        evfd_ = fd;
        return fd;
    }

    bool needs_enter() const noexcept override {
        unsigned sq_flags = IO_URING_READ_ONCE(*ring_.sq.kflags);
        return rearm_count_ > 0 || io_uring_sq_ready(&ring_) > 0 || io_uring_cq_ready(&ring_) > 0 ||
               (sq_flags & (IORING_SQ_TASKRUN | IORING_SQ_CQ_OVERFLOW));
    }

    int flush() noexcept override {
        int r = enable();
        if (r < 0) return r;
        rearm_pending();
        r = io_uring_submit(&ring_);
        return r < 0 && r != -EBUSY && r != -EAGAIN ? r : 0;
    }

    int init(unsigned flags) noexcept {
        struct io_uring_params p;
        std::memset(&p, 0, sizeof p);
        p.flags = flags | IORING_SETUP_CQSIZE;
        p.cq_entries = kCqEntries;
        int r = io_uring_queue_init_params(kSqEntries, &ring_, &p);
        if (r < 0) return r;
        if (!(p.features & IORING_FEAT_EXT_ARG) || !(p.features & IORING_FEAT_NODROP)) {
            io_uring_queue_exit(&ring_);
            return -ENOSYS; /* pre-5.11 kernel: epoll serves better */
        }
        disabled_ = flags & IORING_SETUP_R_DISABLED;
        ring_ready_ = true;
        return 0;
    }

    int add(int fd, unsigned events, uint64_t tag) noexcept override {
        /* epoll refuses a bad fd (EBADF) and a regular file or directory
           (EPERM: always ready, cannot be polled) at registration; a poll SQE
           would report the first only at completion and accept the second.
           Keep epoll's synchronous answers, so both backends agree. */
        struct stat st;
        if (fstat(fd, &st) < 0) return -errno;
        if (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)) return -EPERM;
        int r = reserve(fd);
        if (r < 0) return r;
        regs_[fd] = Registration{tag, poll_bits(events), false, false};
        return arm(fd);
    }

    int modify(int fd, unsigned events, uint64_t tag) noexcept override {
        Registration &reg = regs_[fd];
        reg.mask = poll_bits(events);
        if (!reg.armed) return 0; /* re-armed with the new mask */
        /* Update the poll in flight; if it completed meanwhile (-ENOENT),
           its CQE is handled normally and the re-arm uses the new mask. */
        io_uring_sqe *sqe = get_sqe();
        if (!sqe) return -EBUSY;
        io_uring_prep_poll_update(sqe, tag, tag, reg.mask, IORING_POLL_UPDATE_EVENTS);
        io_uring_sqe_set_data64(sqe, kInternalTag);
        return 0;
    }

    void remove(int fd, uint64_t tag) noexcept override {
        Registration &reg = regs_[fd];
        if (reg.tag != tag) return;
        if (reg.armed) {
            io_uring_sqe *sqe = get_sqe();
            if (sqe) {
                io_uring_prep_poll_remove(sqe, tag);
                io_uring_sqe_set_data64(sqe, kInternalTag);
            }
            /* Without an SQE the poll stays until its fd is ready; its CQE
               then no longer matches a registration and is dropped. */
        }
        reg = Registration{};
    }

    int wait(uint64_t deadline_ns, ReadyEvent *out, int cap) noexcept override {
        int r = enable();
        if (r < 0) return r;
        if (evfd_ >= 0) drain_eventfd();
        rearm_pending();
        if (deadline_ns == 0) {
            /* NOWAIT: never block, and enter the kernel only to submit or
               when it flags work for us (deferred task work, CQ overflow):
               an idle or already-fed iteration makes no syscall. */
            unsigned sq_flags = IO_URING_READ_ONCE(*ring_.sq.kflags);
            if (io_uring_sq_ready(&ring_) ||
                (sq_flags & (IORING_SQ_TASKRUN | IORING_SQ_CQ_OVERFLOW))) {
                r = io_uring_submit_and_get_events(&ring_);
                if (r < 0 && r != -EBUSY && r != -EAGAIN) return r;
            }
        } else {
            r = wait_cqe(deadline_ns);
            if (r < 0 && r != -ETIME && r != -EBUSY && r != -EAGAIN) return r;
        }
        int ready = reap(out, cap);
        /* Our own enter just posted CQEs, and each posting signalled the
           eventfd again: drain that too, or an idle host would wake once
           more for nothing. Anything that arrives after this drain either
           signals again or is seen by needs_enter(). */
        if (evfd_ >= 0) drain_eventfd();
        return ready;
    }

    /* Selects absolute waits if the kernel has them (and the environment
       does not turn them off). Called once, on the loop's thread. */
    void probe_abs_timer() noexcept {
        const char *env = std::getenv("TICKLOOP_URING_ABS_TIMER");
        if (env && std::strcmp(env, "0") == 0) return;
        ClockRegister reg;
        std::memset(&reg, 0, sizeof reg);
        reg.clockid = CLOCK_MONOTONIC;
        abs_timer_ = syscall(__NR_io_uring_register, ring_.ring_fd, kRegisterClock, &reg, 0) == 0;
    }

private:
    /* Publishes the queued SQEs to the kernel (liburing's flush: the ring is
       never SQPOLL) and returns how many the next enter submits. */
    unsigned flush_sq() noexcept {
        io_uring_sq &sq = ring_.sq;
        unsigned tail = sq.sqe_tail;
        if (sq.sqe_head != tail) {
            sq.sqe_head = tail;
            IO_URING_WRITE_ONCE(*sq.ktail, tail);
        }
        return tail - *sq.khead;
    }

    /* Submits what is queued and waits for one completion until deadline_ns
       (UINT64_MAX: no limit). Returns >= 0, or a negative errno (-ETIME when
       the deadline passed, -EINTR for a signal). */
    int wait_cqe(uint64_t deadline_ns) noexcept {
        unsigned submit = flush_sq();
        unsigned sq_flags = IO_URING_READ_ONCE(*ring_.sq.kflags);
        /* Completions already posted and nothing for the kernel to do: no
           syscall (a busy server's common case). */
        if (!submit && io_uring_cq_ready(&ring_) &&
            !(sq_flags & (IORING_SQ_TASKRUN | IORING_SQ_CQ_OVERFLOW)))
            return 0;
        unsigned flags = IORING_ENTER_GETEVENTS;
        struct io_uring_getevents_arg arg;
        struct __kernel_timespec ts;
        std::memset(&arg, 0, sizeof arg);
        arg.sigmask_sz = _NSIG / 8;
        if (deadline_ns != UINT64_MAX) {
            uint64_t t = deadline_ns;
            if (abs_timer_)
                flags |= IORING_ENTER_ABS_TIMER;
            else
                t = remaining_ns(deadline_ns);
            ts.tv_sec = (long long)(t / 1000000000u);
            ts.tv_nsec = (long long)(t % 1000000000u);
            arg.ts = (uint64_t)(uintptr_t)&ts;
        }
        flags |= IORING_ENTER_EXT_ARG;
        long r = syscall(__NR_io_uring_enter, ring_.ring_fd, submit, 1u, flags, &arg, sizeof arg);
        return r < 0 ? -errno : (int)r;
    }

    void drain_eventfd() noexcept {
        uint64_t count;
        while (read(evfd_, &count, sizeof count) < 0 && errno == EINTR) {
        }
    }

    int enable() noexcept {
        if (!disabled_) return 0;
        /* Debian's liburing 2.3 declares io_uring_enable_rings() but does not
           export it; the register call is all it does. */
        if (syscall(__NR_io_uring_register, ring_.ring_fd, IORING_REGISTER_ENABLE_RINGS, nullptr,
                    0) < 0)
            return -errno;
        disabled_ = false;
        return 0;
    }

    io_uring_sqe *get_sqe() noexcept {
        io_uring_sqe *sqe = io_uring_get_sqe(&ring_);
        if (sqe) return sqe;
        /* SQ full: push what is queued to the kernel and try again. */
        if (enable() < 0) return nullptr;
        io_uring_submit(&ring_);
        return io_uring_get_sqe(&ring_);
    }

    int arm(int fd) noexcept {
        Registration &reg = regs_[fd];
        io_uring_sqe *sqe = get_sqe();
        if (!sqe) return -EBUSY;
        io_uring_prep_poll_add(sqe, fd, reg.mask);
        io_uring_sqe_set_data64(sqe, reg.tag);
        reg.armed = true;
        return 0;
    }

    void rearm_pending() noexcept {
        size_t kept = 0;
        for (size_t i = 0; i < rearm_count_; ++i) {
            int fd = rearm_[i];
            Registration &reg = regs_[fd];
            if (!reg.rearm) continue;
            if (reg.tag == 0 || reg.armed || arm(fd) == 0) {
                reg.rearm = false;
                continue;
            }
            rearm_[kept++] = fd; /* no SQE even after a submit: next time */
        }
        rearm_count_ = kept;
    }

    int reap(ReadyEvent *out, int cap) noexcept {
        io_uring_cqe *cqes[kMaxEvents];
        if (cap > kMaxEvents) cap = kMaxEvents;
        unsigned n = io_uring_peek_batch_cqe(&ring_, cqes, (unsigned)cap);
        int ready = 0;
        for (unsigned i = 0; i < n; ++i) {
            uint64_t tag = io_uring_cqe_get_data64(cqes[i]);
            int res = cqes[i]->res;
            if (tag == kInternalTag) continue;
            int fd = io_tag_fd(tag);
            if ((size_t)fd >= regs_size_ || regs_[fd].tag != tag) continue; /* stale */
            Registration &reg = regs_[fd];
            reg.armed = false;
            if (res < 0) {
                /* The poll itself failed (the fd was closed, say): report it
                   once and stay quiet, as epoll drops a closed fd. */
                if (res != -ECANCELED) out[ready++] = ReadyEvent{tag, TL_ERROR};
                continue;
            }
            if (!reg.rearm) {
                reg.rearm = true;
                rearm_[rearm_count_++] = fd;
            }
            unsigned revents = tl_events((uint32_t)res);
            if (revents) out[ready++] = ReadyEvent{tag, revents};
        }
        io_uring_cq_advance(&ring_, n);
        return ready;
    }

    int reserve(int fd) noexcept {
        size_t need = (size_t)fd + 1;
        if (need <= regs_size_) return 0;
        size_t size = regs_size_ ? regs_size_ : 64;
        while (size < need) size *= 2;
        void *regs = std::realloc(regs_, size * sizeof(Registration));
        if (!regs) return -ENOMEM;
        regs_ = static_cast<Registration *>(regs);
        std::memset(regs_ + regs_size_, 0, (size - regs_size_) * sizeof(Registration));
        /* Each fd is queued for re-arm at most once: size the queue alike. */
        void *rearm = std::realloc(rearm_, size * sizeof(int));
        if (!rearm) return -ENOMEM;
        rearm_ = static_cast<int *>(rearm);
        regs_size_ = size;
        return 0;
    }

    struct io_uring ring_;
    bool ring_ready_ = false;
    bool disabled_ = false;
    bool abs_timer_ = false; /* IORING_ENTER_ABS_TIMER on CLOCK_MONOTONIC */
    int evfd_ = -1;          /* tl_loop_fd's eventfd, -1 until asked for */
    Registration *regs_ = nullptr;
    size_t regs_size_ = 0;
    int *rearm_ = nullptr;
    size_t rearm_count_ = 0;
};

} // namespace

int uring_backend_create(IoBackend **out) noexcept {
    auto *backend = new UringBackend();
    if (!backend) return -ENOMEM;
    /* Newest flags first; each older kernel refuses the ones it lacks. */
    /* TASKRUN_FLAG makes the kernel raise IORING_SQ_TASKRUN when completions
       wait for us to enter, which lets a NOWAIT iteration skip the syscall. */
    static const unsigned attempts[] = {
        IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_TASKRUN_FLAG |
            IORING_SETUP_R_DISABLED,
        IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG,
        0,
    };
    int r = -ENOSYS;
    for (unsigned flags : attempts) {
        r = backend->init(flags);
        if (r != -EINVAL) break;
    }
    if (r < 0) {
        delete backend;
        return r;
    }
    backend->probe_abs_timer();
    *out = backend;
    return 0;
}

} // namespace tl::detail

#else

namespace tl::detail {
int uring_backend_create(IoBackend **) noexcept {
    return -ENOSYS;
}
} // namespace tl::detail

#endif
