/* SPDX-License-Identifier: MIT */
/*
 * loop/io/uring/: the io_uring I/O backend (liburing), one class
 * (UringBackend, uring.h) defined in three files by subject: uring.cc (here)
 * the ring, poll.cc readiness through single-shot polls, streams.cc the
 * streams' completion requests; shim.h is every use of liburing's internals.
 *
 * The io_uring I/O backend (liburing), its ring: setup, enable, the enter
 * and its absolute timeout, the wait and the reaping of completions, flush,
 * and tl_loop_fd's eventfd. Readiness comes through poll requests
 * (poll.cc) and the streams' completion path through the buffer ring
 * (streams.cc); the class is declared in uring.h, and
 * liburing's internals are reached only through shim.h. Waits take a
 * nanosecond timeout passed to io_uring_enter (EXT_ARG): no timeout SQE and
 * no syscall of its own per iteration.
 *
 * Batches: with DEFER_TASKRUN the kernel posts a bounded number (about 20) of
 * deferred completions per io_uring_enter and raises IORING_SQ_TASKRUN while
 * more wait; reap() keeps entering while that flag is up, so 2,000 ready
 * sockets take as many iterations as on epoll (8, at kMaxEvents per wait)
 * instead of about 100. Each wait takes every completion there is, so none
 * is delivered an iteration late (a stale readiness breaks level-triggered
 * semantics: a drained pipe reported readable); a readiness that finds the
 * iteration's batch full has its poll re-armed, and is reported at the next
 * wait if the fd is still ready, as epoll re-checks its ready list.
 *
 * Timed waits are absolute where the kernel offers it (Linux 6.12:
 * IORING_REGISTER_CLOCK with CLOCK_MONOTONIC, then IORING_ENTER_ABS_TIMER):
 * the wait ends at the loop's deadline itself, however late the enter
 * started, and a retried (interrupted) wait cannot extend it. Older kernels,
 * or TICKLOOP_URING_ABS_TIMER=0, wait for the time that remains from a fresh
 * clock read. Either way the enter is made here, not by liburing (2.3 has no
 * absolute-timeout call): the SQ tail is published as liburing does
 * (shim.h), and the same enter submits the queued re-arms and waits.
 *
 * Ring setup (uring_backend_create, below; uring.h has the rest):
 * SINGLE_ISSUER | DEFER_TASKRUN (6.1), else COOP_TASKRUN (5.19), else plain;
 * never SQPOLL.
 */
#include "tl_config.h"

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "loop/io/backend.h"

#if TL_HAVE_LIBURING
#include "loop/io/io.h"
#include "loop/io/uring/shim.h"
#include "loop/io/uring/uring.h"
#include "loop/io_event.h"
#include "loop/state.h"

namespace tl::detail {

UringBackend::~UringBackend() {
    if (ring_ready_) io_uring_queue_exit(&ring_);
    if (evfd_ >= 0) close(evfd_);
    if (probe_fd_ >= 0) close(probe_fd_);
    std::free(queue_);
    std::free(cancels_);
    streams_free();
}

/* For a host loop (tl_loop_fd): an eventfd the kernel signals for every
   CQE it posts, and, with DEFER_TASKRUN, for completion work queued for
   this task (which only an enter turns into CQEs: the ring fd's own
   POLLIN would not show it). wait() drains it before it enters the
   kernel, so a signal that arrives later is never lost. */
int UringBackend::poll_fd() noexcept {
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

bool UringBackend::needs_enter() const noexcept {
    unsigned sq_flags = uring_shim::sq_flags(&ring_);
    return queue_count_ > 0 || cancel_count_ > 0 || io_uring_sq_ready(&ring_) > 0 ||
           io_uring_cq_ready(&ring_) > 0 ||
           (sq_flags & (IORING_SQ_TASKRUN | IORING_SQ_CQ_OVERFLOW));
}

int UringBackend::flush() noexcept {
    int r = enable();
    if (r < 0) return r;
    arm_queued();
    r = io_uring_submit(&ring_);
    return r < 0 && r != -EBUSY && r != -EAGAIN ? r : 0;
}

int UringBackend::init(unsigned flags) noexcept {
    if (probe_fd_ < 0) {
        probe_fd_ = epoll_create1(EPOLL_CLOEXEC);
        if (probe_fd_ < 0) return -errno;
    }
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
    min_wait_ = p.features & IORING_FEAT_MIN_TIMEOUT;
    ring_ready_ = true;
    return 0;
}

uint64_t UringBackend::set_batch(uint64_t ns) noexcept {
    batch_ns_ = min_wait_ ? ns : 0;
    return batch_ns_;
}

int UringBackend::wait(uint64_t deadline_ns, ReadyEvent *out, int cap) noexcept {
    int r = enable();
    if (r < 0) return r;
    if (evfd_ >= 0) drain_eventfd();
    arm_queued();
    if (deadline_ns == 0) {
        /* NOWAIT: never block, and enter the kernel only to submit or
           when it flags work for us (deferred task work, CQ overflow):
           an idle or already-fed iteration makes no syscall. */
        unsigned sq_flags = uring_shim::sq_flags(&ring_);
        if (io_uring_sq_ready(&ring_) || (sq_flags & (IORING_SQ_TASKRUN | IORING_SQ_CQ_OVERFLOW))) {
            r = io_uring_submit_and_get_events(&ring_);
            if (r < 0 && r != -EBUSY && r != -EAGAIN) return r;
        }
    } else {
        r = wait_cqe(deadline_ns, (unsigned)cap);
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
void UringBackend::probe_abs_timer() noexcept {
    const char *env = std::getenv("TICKLOOP_URING_ABS_TIMER");
    if (env && std::strcmp(env, "0") == 0) return;
    abs_timer_ = uring_shim::register_monotonic_clock(&ring_);
    if (abs_timer_) host_offset_ns_ = monotonic_offset_ns();
}

/* Inside a time namespace (CLONE_NEWTIME) CLOCK_MONOTONIC reads the
   host's plus the namespace's offset, which timerfds and clock_nanosleep
   take off an absolute time and IORING_ENTER_ABS_TIMER does not (Linux
   6.18: a 40 ms wait in a namespace 1000 s ahead lasts 1000 s;
   tests/loop_clocks.c covers it). The offset is fixed for the
   namespace's life, so one read of /proc/self/timens_offsets (absent
   before Linux 5.6: no namespaces, offset 0) lets waits subtract it. */
int64_t UringBackend::monotonic_offset_ns() noexcept {
    int fd = open("/proc/self/timens_offsets", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    char buf[256];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return 0;
    buf[n] = 0;
    /* Lines "<clock> <seconds> <nanoseconds>"; clock by name or id (1). */
    for (char *line = buf; line && *line; line = std::strchr(line, '\n')) {
        while (*line == '\n') ++line;
        long long sec = 0, nsec = 0;
        char name[32];
        if (std::sscanf(line, "%31s %lld %lld", name, &sec, &nsec) != 3) continue;
        if (std::strcmp(name, "monotonic") != 0 && std::strcmp(name, "1") != 0) continue;
        return sec * 1000000000LL + nsec;
    }
    return 0;
}

/* An absolute MONOTONIC time of this namespace on the host's clock,
   saturating (0 would mean "no wait"). */
uint64_t UringBackend::to_host(uint64_t t) const noexcept {
    if (host_offset_ns_ >= 0) {
        uint64_t off = (uint64_t)host_offset_ns_;
        return t > off ? t - off : 1;
    }
    uint64_t add = (uint64_t)-host_offset_ns_;
    return t > UINT64_MAX - add ? UINT64_MAX : t + add;
}

/* Submits what is queued and waits for one completion until deadline_ns
   (UINT64_MAX: no limit). Returns >= 0, or a negative errno (-ETIME when
   the deadline passed, -EINTR for a signal). */
/* With a batch bound (set_batch), a wait asks for `cap` completions and a
   minimum wait: the kernel returns when that many are there, at the
   minimum wait if it has any by then (or at the first after it), or at the
   deadline. The minimum wait is cut to the time left before the deadline,
   since the kernel would otherwise sleep it out past a timer's deadline; a
   wait without a deadline gets one an hour ahead, since a minimum wait
   with no timeout ends the wait when it expires, events or not. */
int UringBackend::wait_cqe(uint64_t deadline_ns, unsigned cap) noexcept {
    unsigned submit = uring_shim::publish_sq(&ring_);
    unsigned sq_flags = uring_shim::sq_flags(&ring_);
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
    unsigned wait_nr = 1;
    if (batch_ns_) {
        uint64_t now = monotonic_ns();
        if (deadline_ns == UINT64_MAX) deadline_ns = now + kBatchIdleNs;
        uint64_t left = deadline_ns > now ? deadline_ns - now : 0;
        uint64_t usec = (left < batch_ns_ ? left : batch_ns_) / 1000;
        if (usec) {
            uring_shim::set_min_wait(&arg, (uint32_t)usec);
            wait_nr = cap;
            ++loop_->stats.io_batched_waits;
        }
    }
    if (deadline_ns != UINT64_MAX) {
        uint64_t t = deadline_ns;
        if (abs_timer_) {
            flags |= IORING_ENTER_ABS_TIMER;
            /* The kernel takes the absolute time on the host's clock. */
            t = to_host(deadline_ns);
        } else
            t = remaining_ns(deadline_ns);
        ts.tv_sec = (long long)(t / 1000000000u);
        ts.tv_nsec = (long long)(t % 1000000000u);
        arg.ts = (uint64_t)(uintptr_t)&ts;
    }
    return uring_shim::enter_getevents(&ring_, submit, wait_nr, flags, &arg);
}

void UringBackend::drain_eventfd() noexcept {
    uint64_t count;
    while (read(evfd_, &count, sizeof count) < 0 && errno == EINTR) {
    }
}

int UringBackend::enable() noexcept {
    if (!disabled_) return 0;
    /* io_uring_enable_rings(), through the shim (liburing 2.3 lacks it). */
    int r = uring_shim::enable_rings(&ring_);
    if (r < 0) return r;
    disabled_ = false;
    return 0;
}

io_uring_sqe *UringBackend::get_sqe() noexcept {
    io_uring_sqe *sqe = io_uring_get_sqe(&ring_);
    if (sqe) return sqe;
    /* SQ full: push what is queued to the kernel and try again. */
    if (enable() < 0) return nullptr;
    io_uring_submit(&ring_);
    return io_uring_get_sqe(&ring_);
}

/* Completions the kernel still holds as deferred task work are older
   than the polls about to be re-armed, which complete inline at submit
   when their fd is still ready. Post them to the CQ first, or the CQ
   (taken kMaxEvents at a time) fills with the re-armed polls of busy
   fds every iteration and the rest wait: 600 watchers given TL_WRITE at
   once would take over 10 iterations to all see it. Bounded: the CQ has
   room for kCqEntries, and NODROP keeps any excess. A batched wait needs
   them posted too, or it would block on them. With neither (a loop on
   streams) the wait's own enter runs that task work, and an enter here
   would be a syscall per iteration for nothing: two in three of an HTTP
   server's enters were. */
void UringBackend::post_deferred() noexcept {
    if (!queue_count_ && !batch_ns_) return;
    for (unsigned round = 0; round < kCqEntries / 64; ++round) {
        if (!(uring_shim::sq_flags(&ring_) & IORING_SQ_TASKRUN)) return;
        if (io_uring_get_events(&ring_) < 0) return;
    }
}

/* The completion of one of the backend's own requests (a poll's removal
   or update, a stream's cancellation): one whose target already completed
   (or is completing) lost a harmless race; anything else is a bug in what
   was asked. */
void UringBackend::own_cqe(const io_uring_cqe *cqe) noexcept {
    int res = cqe->res;
    if (res < 0 && res != -ENOENT && res != -EALREADY && res != -ECANCELED)
        io_internal_error(loop_, "io_uring poll remove/update", res);
}

/* Hands the completions waiting in the CQ (up to kMaxEvents of them) to
   the handler of their kind: the backend's own requests here, polls to
   poll.cc, streams' and listeners' requests to streams.cc. Returns the
   CQEs consumed: all of them, or those before one that found the batch
   full (b.full). */
unsigned UringBackend::reap_ring(Reaped &b) noexcept {
    /* An empty CQ is not peeked: liburing's peek then enters the kernel
       for the task work itself, which is reap's decision. */
    if (!io_uring_cq_ready(&ring_)) return 0;
    io_uring_cqe *cqes[kMaxEvents];
    unsigned n = io_uring_peek_batch_cqe(&ring_, cqes, kMaxEvents);
    for (unsigned i = 0; i < n; ++i) {
        uint64_t tag = io_uring_cqe_get_data64(cqes[i]);
        if (tag == kBackendTag) {
            own_cqe(cqes[i]);
        } else if (req_kind(tag) == REQ_POLL) {
            poll_cqe(cqes[i], b);
        } else if (!stream_cqe(cqes[i], b)) {
            io_uring_cq_advance(&ring_, i);
            return i;
        }
    }
    io_uring_cq_advance(&ring_, n);
    return n;
}

/* Takes every completion the kernel has for us, those in the CQ and,
   with DEFER_TASKRUN, those it still holds as task work (posted a
   bounded batch per io_uring_enter, IORING_SQ_TASKRUN up while more
   wait) while polls are among them, so that no readiness waits in the
   ring across an iteration:
   the events of one iteration are what the kernel said during its wait,
   and the completions of the loop's own requests (updates, removals)
   never take the place of readiness. At most cap become events; the
   readiness the batch has no room for is re-armed (poll_cqe), ahead of
   the polls of the fds reported now, so that with more ready fds than a
   batch each gets its turn. Bounded: each registration has at most one
   poll in flight and none is re-armed before the next wait. */
int UringBackend::reap(ReadyEvent *out, int cap) noexcept {
    if (cap > kMaxEvents) cap = kMaxEvents;
    Reaped b{out, cap, 0, queue_count_, SIZE_MAX, false};
    for (unsigned round = 0; round < kCqEntries && !b.full; ++round) {
        if (reap_ring(b)) continue;
        if (!(uring_shim::sq_flags(&ring_) & IORING_SQ_TASKRUN)) break;
        /* Only readiness needs the rest now. When this iteration has
           events and none of them was a poll's (a server on streams),
           the next wait's own enter runs that task work: an enter here
           too would be a syscall more per iteration, two in three of an
           HTTP server's. */
        if (b.ready > 0 && queue_count_ == b.first) break;
        int r = io_uring_get_events(&ring_);
        if (r < 0 && r != -EINTR && r != -EBUSY && r != -EAGAIN) break;
        if (!io_uring_cq_ready(&ring_)) break;
    }
    rearm_unreported_first(b);
    return b.ready;
}

int uring_backend_create(tl_loop *loop, IoBackend **out) noexcept {
    auto *backend = new UringBackend(loop);
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
    backend->probe_streams();
    *out = backend;
    return 0;
}

} // namespace tl::detail

#else

namespace tl::detail {
int uring_backend_create(tl_loop *, IoBackend **) noexcept {
    return -ENOSYS;
}
} // namespace tl::detail

#endif
