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
 * tag is not the fd's current registration in the loop's registry (stopped,
 * or stopped and replaced on a reused fd number) is dropped, so a late
 * completion never reaches the wrong watcher. The backend keeps no table of
 * its own: its per-fd bits (a poll in flight and the events it asked for; a
 * place in the re-arm queue) live in the registry's IoSlot. SQEs of our own
 * (poll removal, update) carry kBackendTag; their errors other than "the
 * poll already completed" are counted (io_internal_error), never dropped.
 *
 * What may be watched: exactly what epoll accepts, so both backends agree. A
 * poll SQE on a file without a poll method (a regular file, /dev/null) would
 * complete as ready every time, a busy loop; epoll refuses those (EPERM). An
 * EPOLL_CTL_MOD of the fd on a private, empty epoll set asks the kernel the
 * same question in one syscall: EBADF (not open), EPERM (cannot be polled),
 * or ENOENT (pollable: sysfs attributes and most procfs files included, but
 * not the per-process ones such as /proc/self/stat, which epoll refuses too).
 *
 * Readiness bits: the kernel adds POLLRDHUP to every poll; epoll reports it
 * only when asked, and tickloop never asks. tl_events() ignores it, so a
 * peer's half-close (shutdown(SHUT_WR)) is TL_READ on both backends, never
 * TL_HUP.
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
 * absolute-timeout call): the SQ tail is published as liburing does, and the
 * same enter submits the queued re-arms and waits.
 *
 * Ring setup: SINGLE_ISSUER | DEFER_TASKRUN (6.1), else COOP_TASKRUN (5.19),
 * else plain; never SQPOLL. With SINGLE_ISSUER the ring starts disabled and is
 * enabled by the first call from the loop's thread, so a loop may be created
 * on one thread and run on another. A full SQ is submitted and retried; if
 * that still leaves no SQE, the arm or update waits in the re-arm queue (and
 * a removal in the cancel list) for the next wait: the caller never sees
 * -EBUSY. CQ overflow is left to IORING_FEAT_NODROP (required), so no event
 * is lost.
 */
#include "tl_config.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "clock.h"
#include "handle_flags.h"
#include "io.h"
#include "io_backend.h"
#include "io_event.h"
#include "loop.h"
#include "stream.h"

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

/* 256 SQEs cover a full batch of re-arms; the CQ is larger so that a burst
 * of completions rarely reaches the kernel's overflow list. */
constexpr unsigned kSqEntries = 256;
constexpr unsigned kCqEntries = 4096;

/* IoSlot::state bits. The poll in flight asked for the TL_READ|TL_WRITE in
 * bits kArmedShift.. ; IoSlot::index is the slot's place in queue_. */
constexpr uint32_t kArmed = 1u << 0;  /* a poll with the registration's tag is in flight */
constexpr uint32_t kQueued = 1u << 1; /* in queue_: arm, or update the armed poll's events */
constexpr uint32_t kArmedShift = 8;

class UringBackend final : public IoBackend, public CompletionOps {
public:
    explicit UringBackend(tl_loop *loop) noexcept : loop_(loop) {}
    ~UringBackend() override {
        if (ring_ready_) io_uring_queue_exit(&ring_);
        if (evfd_ >= 0) close(evfd_);
        if (probe_fd_ >= 0) close(probe_fd_);
        std::free(queue_);
        std::free(cancels_);
        streams_free();
    }

    const char *name() const noexcept override { return "io_uring"; }
    tl_io_kind kind() const noexcept override { return TL_IO_URING; }

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
        return queue_count_ > 0 || cancel_count_ > 0 || io_uring_sq_ready(&ring_) > 0 ||
               io_uring_cq_ready(&ring_) > 0 ||
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
        ring_ready_ = true;
        return 0;
    }

    int add(int fd) noexcept override {
        tl_io *sw = loop_->io_slots[fd].watcher;
        if (streams_ok_ && (sw->flags & IO_HANDLE_KINDS)) return stream_readd(loop_, this, sw);
        struct epoll_event ev;
        std::memset(&ev, 0, sizeof ev);
        if (epoll_ctl(probe_fd_, EPOLL_CTL_MOD, fd, &ev) < 0 && errno != ENOENT) return -errno;
        /* The re-arm queue holds each registration at most once. */
        if (queue_cap_ < loop_->io_count + 1) {
            size_t cap = (loop_->io_count + 1) * 2;
            void *mem = std::realloc(queue_, cap * sizeof(int));
            if (!mem) return -ENOMEM;
            queue_ = static_cast<int *>(mem);
            queue_cap_ = cap;
        }
        if (arm(fd) < 0) enqueue(fd); /* no SQE even after a submit: next wait */
        return 0;
    }

    int modify(int fd, unsigned events) noexcept override {
        IoSlot &slot = loop_->io_slots[fd];
        /* Not armed: the next arm reads the watcher's new events. */
        if (!(slot.state & kArmed)) return 0;
        if (update(fd, events) < 0) enqueue(fd);
        return 0;
    }

    void remove(int fd) noexcept override {
        IoSlot &slot = loop_->io_slots[fd];
        /* A stream's or listener's requests are cancelled by stream.cc. */
        if (streams_ok_ && (slot.watcher->flags & IO_HANDLE_KINDS)) return;
        if (slot.state & kQueued) dequeue(fd);
        if (slot.state & kArmed) {
            uint64_t tag = io_tag(fd, slot.watcher->gen);
            if (cancel(tag) < 0) push_cancel(tag);
        }
        slot.state = 0;
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
        if (abs_timer_) host_offset_ns_ = monotonic_offset_ns();
    }

    /* Inside a time namespace (CLONE_NEWTIME) CLOCK_MONOTONIC reads the
       host's plus the namespace's offset, which timerfds and clock_nanosleep
       take off an absolute time and IORING_ENTER_ABS_TIMER does not (Linux
       6.18: a 40 ms wait in a namespace 1000 s ahead lasts 1000 s;
       tests/loop_clocks.c covers it). The offset is fixed for the
       namespace's life, so one read of /proc/self/timens_offsets (absent
       before Linux 5.6: no namespaces, offset 0) lets waits subtract it. */
    static int64_t monotonic_offset_ns() noexcept {
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
    uint64_t to_host(uint64_t t) const noexcept {
        if (host_offset_ns_ >= 0) {
            uint64_t off = (uint64_t)host_offset_ns_;
            return t > off ? t - off : 1;
        }
        uint64_t add = (uint64_t)-host_offset_ns_;
        return t > UINT64_MAX - add ? UINT64_MAX : t + add;
    }

    /* ---- Streams' completion path ------------------------------------- */

    /* Decides the path of the loop's streams: completion when the kernel has
       multishot receive (Linux 6.0, probed through IORING_OP_SEND_ZC, which
       came with it) and takes a trial registration of the buffer ring (5.19),
       unless TICKLOOP_URING_STREAMS=readiness. The ring of buffer
       descriptors (16 bytes each) stays registered; the buffers themselves
       are allocated when the first stream reads. */
    void probe_streams() noexcept {
        const char *env = std::getenv("TICKLOOP_URING_STREAMS");
        if (env && std::strcmp(env, "readiness") == 0) return;
        struct io_uring_probe *probe = io_uring_get_probe_ring(&ring_);
        if (!probe) return;
        bool ok = io_uring_opcode_supported(probe, IORING_OP_SEND_ZC) &&
                  io_uring_opcode_supported(probe, IORING_OP_RECV) &&
                  io_uring_opcode_supported(probe, IORING_OP_ACCEPT);
        io_uring_free_probe(probe);
        if (!ok) return;
        buf_count_ = loop_->read_buffer_count;
        buf_size_ = loop_->read_buffer_size;
        size_t bytes = (size_t)buf_count_ * sizeof(struct io_uring_buf);
        long page = sysconf(_SC_PAGESIZE);
        void *mem = nullptr;
        if (posix_memalign(&mem, page > 0 ? (size_t)page : 4096, bytes) != 0) return;
        std::memset(mem, 0, bytes);
        br_ = static_cast<struct io_uring_buf_ring *>(mem);
        io_uring_buf_ring_init(br_);
        struct io_uring_buf_reg reg;
        std::memset(&reg, 0, sizeof reg);
        reg.ring_addr = (uint64_t)(uintptr_t)br_;
        reg.ring_entries = buf_count_;
        reg.bgid = kBufGroup;
        if (io_uring_register_buf_ring(&ring_, &reg, 0) < 0) {
            std::free(br_);
            br_ = nullptr;
            return;
        }
        streams_ok_ = true;
    }
    bool streams_ok() const noexcept { return streams_ok_; }

    /* The completion path of streams (CompletionOps, below); the loop takes
       it only where streams_ok(). */
    CompletionOps *completion() noexcept override { return this; }

    int stream_buffers() noexcept override {
        if (bufs_) return 0;
        if (!streams_ok_) return -ENOSYS;
        size_t bytes = (size_t)buf_count_ * buf_size_;
        void *mem = nullptr;
        if (posix_memalign(&mem, 4096, bytes) != 0) return -ENOMEM;
        park_next_ = static_cast<uint16_t *>(std::malloc(buf_count_ * sizeof(uint16_t)));
        park_len_ = static_cast<uint32_t *>(std::malloc(buf_count_ * sizeof(uint32_t)));
        if (!park_next_ || !park_len_) {
            std::free(park_next_);
            std::free(park_len_);
            park_next_ = nullptr;
            park_len_ = nullptr;
            std::free(mem);
            return -ENOMEM;
        }
        bufs_ = static_cast<char *>(mem);
        for (uint32_t bid = 0; bid < buf_count_; ++bid)
            io_uring_buf_ring_add(br_, bufs_ + (size_t)bid * buf_size_, buf_size_, (uint16_t)bid,
                                  io_uring_buf_ring_mask(buf_count_), (int)bid);
        io_uring_buf_ring_advance(br_, (int)buf_count_);
        return 0;
    }

    int stream_recv(int fd) noexcept override {
        io_uring_sqe *sqe = get_sqe();
        if (!sqe) return -EBUSY;
        io_uring_prep_recv_multishot(sqe, fd, nullptr, 0, 0);
        sqe->flags |= IOSQE_BUFFER_SELECT;
        sqe->buf_group = kBufGroup;
        io_uring_sqe_set_data64(sqe, req_tag(slot_tag(fd), REQ_RECV));
        return 0;
    }

    /* The msghdr and iovecs of a sendmsg live in the slot of sends_ that
       has the SQE's index: an SQE slot is reused only after the kernel has
       consumed the SQE, and by then it has copied both (IORING_FEAT_SUBMIT_STABLE,
       Linux 5.7; the completion path needs 6.0). So the caller's array may go
       as soon as this returns, and nothing is allocated per send. */
    int stream_send(int fd, const struct iovec *iov, int n) noexcept override {
        if (n < 1 || n > kSendIovMax) return -EINVAL;
        if (!sends_) {
            sends_ = static_cast<SendSlot *>(std::calloc(ring_.sq.ring_entries, sizeof *sends_));
            if (!sends_) return -ENOMEM;
        }
        io_uring_sqe *sqe = get_sqe();
        if (!sqe) return -EBUSY;
        SendSlot &slot = sends_[sqe - ring_.sq.sqes];
        std::memcpy(slot.iov, iov, (size_t)n * sizeof *iov);
        std::memset(&slot.msg, 0, sizeof slot.msg);
        slot.msg.msg_iov = slot.iov;
        slot.msg.msg_iovlen = (size_t)n;
        io_uring_prep_sendmsg(sqe, fd, &slot.msg, MSG_NOSIGNAL);
        io_uring_sqe_set_data64(sqe, req_tag(slot_tag(fd), REQ_SEND));
        return 0;
    }

    int listener_accept(int fd) noexcept override {
        io_uring_sqe *sqe = get_sqe();
        if (!sqe) return -EBUSY;
        io_uring_prep_multishot_accept(sqe, fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        io_uring_sqe_set_data64(sqe, req_tag(slot_tag(fd), REQ_ACCEPT));
        return 0;
    }

    void stream_cancel(int fd, unsigned kind) noexcept override {
        io_uring_sqe *sqe = get_sqe();
        if (!sqe) {
            io_internal_error(loop_, "io_uring stream cancel", -EBUSY);
            return;
        }
        io_uring_prep_cancel64(sqe, req_tag(slot_tag(fd), kind), 0);
        io_uring_sqe_set_data64(sqe, kBackendTag);
    }

    /* The queued SQEs go first (a poll or an accept not yet submitted, and
       the cancellations queued for fd); then a synchronous cancel of
       whatever is still in flight on fd (Linux 6.0; on older kernels the
       submitted cancellations do the same work), and the deferred task
       work that completes the cancelled requests and drops their file
       references. Their CQEs are reaped by the next wait and dropped there,
       their registration being gone. */
    void release_fd(int fd) noexcept override {
        if (!ring_ready_ || enable() < 0) return;
        io_uring_submit(&ring_);
        struct io_uring_sync_cancel_reg reg;
        std::memset(&reg, 0, sizeof reg);
        reg.fd = fd;
        reg.flags = IORING_ASYNC_CANCEL_FD | IORING_ASYNC_CANCEL_ALL;
        reg.timeout.tv_sec = -1;
        reg.timeout.tv_nsec = -1;
        io_uring_register_sync_cancel(&ring_, &reg);
        io_uring_get_events(&ring_);
    }

    const void *buffer(uint32_t bid) noexcept override { return bufs_ + (size_t)bid * buf_size_; }

    void buffer_release(uint32_t bid) noexcept override {
        if (!bufs_ || bid >= buf_count_) return;
        io_uring_buf_ring_add(br_, bufs_ + (size_t)bid * buf_size_, buf_size_, (uint16_t)bid,
                              io_uring_buf_ring_mask(buf_count_), 0);
        io_uring_buf_ring_advance(br_, 1);
    }

    /* chain: (head + 1) in the low 16 bits, (tail + 1) in the high 16. */
    void buffer_park(uint32_t *chain, uint32_t bid, uint32_t len) noexcept override {
        park_next_[bid] = 0;
        parked_len(bid) = len;
        uint32_t tail = *chain >> 16;
        if (tail)
            park_next_[tail - 1] = (uint16_t)(bid + 1);
        else
            *chain = bid + 1;
        *chain = (*chain & 0xffffu) | (bid + 1) << 16;
    }

    bool buffer_unpark(uint32_t *chain, uint32_t *bid, uint32_t *len) noexcept override {
        uint32_t head = *chain & 0xffffu;
        if (!head) return false;
        *bid = head - 1;
        *len = parked_len(*bid);
        uint32_t next = park_next_[*bid];
        *chain = next ? (*chain & 0xffff0000u) | next : 0;
        return true;
    }

private:
    static constexpr uint16_t kBufGroup = 0;

    uint64_t slot_tag(int fd) const noexcept {
        return io_tag(fd, loop_->io_slots[fd].watcher->gen);
    }

    uint32_t &parked_len(uint32_t bid) noexcept { return park_len_[bid]; }

    /* A stream's or listener's completion: to the loop if its registration
       is current, else cleaned up here. */
    void stream_cqe(const io_uring_cqe *cqe, ReadyEvent *out, int &ready) noexcept {
        uint64_t tag = io_uring_cqe_get_data64(cqe);
        uint64_t base = req_base(tag);
        unsigned kind = req_kind(tag);
        if (!io_current(loop_, base)) {
            if (cqe->flags & IORING_CQE_F_BUFFER)
                buffer_release(cqe->flags >> IORING_CQE_BUFFER_SHIFT);
            if (kind == REQ_ACCEPT && cqe->res >= 0) close(cqe->res);
            return;
        }
        ReadyEvent ev{base, kCompletion | kind};
        ev.res = cqe->res;
        ev.cflags = cqe->flags;
        out[ready++] = ev;
    }

    void streams_free() noexcept {
        std::free(bufs_);
        std::free(park_next_);
        std::free(park_len_);
        std::free(br_);
        std::free(sends_);
    }

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

    /* Arms a poll for fd's registration with the watcher's events. */
    int arm(int fd) noexcept {
        IoSlot &slot = loop_->io_slots[fd];
        const tl_io *w = slot.watcher;
        io_uring_sqe *sqe = get_sqe();
        if (!sqe) return -EBUSY;
        io_uring_prep_poll_add(sqe, fd, poll_bits(w->events));
        io_uring_sqe_set_data64(sqe, io_tag(fd, w->gen));
        slot.state = (slot.state & ~(0xffu << kArmedShift)) | kArmed | w->events << kArmedShift;
        return 0;
    }

    /* Changes the events of fd's poll in flight. The update names the poll
       by its user_data and must say that it keeps it
       (IORING_POLL_UPDATE_USER_DATA with the same value): a new user_data
       without that flag is -EINVAL, and the poll kept its old events. If
       the poll completed meanwhile the update gets -ENOENT and the re-arm
       that follows the completion uses the new events. */
    int update(int fd, unsigned events) noexcept {
        IoSlot &slot = loop_->io_slots[fd];
        io_uring_sqe *sqe = get_sqe();
        if (!sqe) return -EBUSY;
        uint64_t tag = io_tag(fd, slot.watcher->gen);
        io_uring_prep_poll_update(sqe, tag, tag, poll_bits(events),
                                  IORING_POLL_UPDATE_EVENTS | IORING_POLL_UPDATE_USER_DATA);
        io_uring_sqe_set_data64(sqe, kBackendTag);
        slot.state = (slot.state & ~(0xffu << kArmedShift)) | events << kArmedShift;
        return 0;
    }

    int cancel(uint64_t tag) noexcept {
        io_uring_sqe *sqe = get_sqe();
        if (!sqe) return -EBUSY;
        io_uring_prep_poll_remove(sqe, tag);
        io_uring_sqe_set_data64(sqe, kBackendTag);
        return 0;
    }

    /* A removal that found no SQE: retried at the next wait. Until then the
       poll holds a reference to its file; if even this list cannot grow, it
       holds it until the file is ready (its CQE is then dropped as stale). */
    void push_cancel(uint64_t tag) noexcept {
        if (cancel_count_ == cancel_cap_) {
            size_t cap = cancel_cap_ ? cancel_cap_ * 2 : 16;
            void *mem = std::realloc(cancels_, cap * sizeof(uint64_t));
            if (!mem) return;
            cancels_ = static_cast<uint64_t *>(mem);
            cancel_cap_ = cap;
        }
        cancels_[cancel_count_++] = tag;
    }

    void enqueue(int fd) noexcept {
        IoSlot &slot = loop_->io_slots[fd];
        if (slot.state & kQueued) return;
        slot.state |= kQueued;
        slot.index = (uint32_t)queue_count_;
        queue_[queue_count_++] = fd;
    }

    void dequeue(int fd) noexcept {
        IoSlot &slot = loop_->io_slots[fd];
        int last = queue_[--queue_count_];
        queue_[slot.index] = last;
        loop_->io_slots[last].index = slot.index;
        slot.state &= ~kQueued;
    }

    /* Before each wait: arm the polls that completed last time (or found no
       SQE), bring armed polls' events up to date, retry removals. */
    void rearm_pending() noexcept {
        post_deferred();
        size_t kept = 0;
        for (size_t i = 0; i < cancel_count_; ++i)
            if (cancel(cancels_[i]) < 0) cancels_[kept++] = cancels_[i];
        cancel_count_ = kept;
        kept = 0;
        for (size_t i = 0; i < queue_count_; ++i) {
            int fd = queue_[i];
            IoSlot &slot = loop_->io_slots[fd];
            unsigned events = slot.watcher->events;
            int r = 0;
            if (!(slot.state & kArmed))
                r = arm(fd);
            else if ((slot.state >> kArmedShift & 0xffu) != events)
                r = update(fd, events);
            if (r == 0) {
                slot.state &= ~kQueued;
                continue;
            }
            slot.index = (uint32_t)kept; /* no SQE even after a submit: next time */
            queue_[kept++] = fd;
        }
        queue_count_ = kept;
    }

    /* Completions the kernel still holds as deferred task work are older
       than the polls about to be re-armed, which complete inline at submit
       when their fd is still ready. Post them to the CQ first, or the CQ
       (taken kMaxEvents at a time) fills with the re-armed polls of busy
       fds every iteration and the rest wait: 600 watchers given TL_WRITE at
       once would take over 10 iterations to all see it. Bounded: the CQ has
       room for kCqEntries, and NODROP keeps any excess. */
    void post_deferred() noexcept {
        for (unsigned round = 0; round < kCqEntries / 64; ++round) {
            if (!(IO_URING_READ_ONCE(*ring_.sq.kflags) & IORING_SQ_TASKRUN)) return;
            if (io_uring_get_events(&ring_) < 0) return;
        }
    }

    /* Turns the completions waiting in the CQ (up to kMaxEvents of them)
       into events in out[*ready..cap). A readiness that finds the batch full
       is not kept: by the next iteration it may be stale (the fd drained
       meanwhile), so its poll is re-armed instead, and the kernel reports it
       again then if the fd is still ready, as epoll re-checks its ready list
       at each wait. *split is where those re-arms start in queue_ (SIZE_MAX
       while there are none). A stream's completion carries data and cannot
       be asked for again: one that finds the batch full stays in the CQ,
       with every completion after it, for the next iteration (*full is then
       set). Returns the CQEs consumed. */
    unsigned reap_ring(ReadyEvent *out, int cap, int *ready, size_t *split, bool *full) noexcept {
        io_uring_cqe *cqes[kMaxEvents];
        unsigned n = io_uring_peek_batch_cqe(&ring_, cqes, kMaxEvents);
        for (unsigned i = 0; i < n; ++i) {
            uint64_t tag = io_uring_cqe_get_data64(cqes[i]);
            int res = cqes[i]->res;
            if (tag == kBackendTag) {
                /* A removal or update whose poll already completed (or is
                   completing) lost a harmless race; anything else is a bug
                   in what we asked. */
                if (res < 0 && res != -ENOENT && res != -EALREADY && res != -ECANCELED)
                    io_internal_error(loop_, "io_uring poll remove/update", res);
                continue;
            }
            if (req_kind(tag) != REQ_POLL) {
                if (*ready == cap) {
                    *full = true;
                    io_uring_cq_advance(&ring_, i);
                    return i;
                }
                stream_cqe(cqes[i], out, *ready);
                continue;
            }
            IoSlot *slot = io_current(loop_, tag);
            if (!slot) continue; /* stale: the loop dropped this registration */
            slot->state &= ~kArmed;
            if (res == -ECANCELED) continue;
            if (*ready == cap) {
                /* No room in this iteration: ask the kernel again at the
                   next wait (a failed poll fails again and is reported
                   then). */
                if (*split == SIZE_MAX) *split = queue_count_;
                enqueue(io_tag_fd(tag));
                continue;
            }
            if (res < 0) {
                /* The poll itself failed (the fd was closed, say): report it
                   once and stay quiet, as epoll drops a closed fd. */
                out[(*ready)++] = ReadyEvent{tag, TL_ERROR};
                continue;
            }
            enqueue(io_tag_fd(tag));
            unsigned revents = tl_events((uint32_t)res);
            if (revents) out[(*ready)++] = ReadyEvent{tag, revents};
        }
        io_uring_cq_advance(&ring_, n);
        return n;
    }

    /* Takes every completion the kernel has for us, those in the CQ and,
       with DEFER_TASKRUN, those it still holds as task work (posted a
       bounded batch per io_uring_enter, IORING_SQ_TASKRUN up while more
       wait), so that no completion waits in the ring across an iteration:
       the events of one iteration are what the kernel said during its wait,
       and the completions of the loop's own requests (updates, removals)
       never take the place of readiness. At most cap become events; the
       rest are re-armed (reap_ring), ahead of the polls of the fds reported
       now, so that with more ready fds than a batch each gets its turn.
       Bounded: each registration has at most one poll in flight and none is
       re-armed before the next wait. */
    int reap(ReadyEvent *out, int cap) noexcept {
        if (cap > kMaxEvents) cap = kMaxEvents;
        int ready = 0;
        const size_t first = queue_count_;
        size_t split = SIZE_MAX;
        bool full = false;
        for (unsigned round = 0; round < kCqEntries && !full; ++round) {
            if (reap_ring(out, cap, &ready, &split, &full)) continue;
            if (!(IO_URING_READ_ONCE(*ring_.sq.kflags) & IORING_SQ_TASKRUN)) break;
            int r = io_uring_get_events(&ring_);
            if (r < 0 && r != -EINTR && r != -EBUSY && r != -EAGAIN) break;
            if (!io_uring_cq_ready(&ring_)) break;
        }
        if (split != SIZE_MAX && split > first) {
            /* queue_[first, split): the fds reported now; [split, end): the
               ones the batch had no room for. Those go first. */
            std::rotate(queue_ + first, queue_ + split, queue_ + queue_count_);
            for (size_t i = first; i < queue_count_; ++i)
                loop_->io_slots[queue_[i]].index = (uint32_t)i;
        }
        return ready;
    }

    tl_loop *loop_;
    struct io_uring ring_;
    bool ring_ready_ = false;
    bool disabled_ = false;
    bool abs_timer_ = false;     /* IORING_ENTER_ABS_TIMER on CLOCK_MONOTONIC */
    int64_t host_offset_ns_ = 0; /* the time namespace's MONOTONIC offset */
    int evfd_ = -1;              /* tl_loop_fd's eventfd, -1 until asked for */
    int probe_fd_ = -1;          /* an empty epoll set: asks the kernel what it can poll */
    int *queue_ = nullptr;       /* fds to arm or update at the next wait */
    size_t queue_count_ = 0, queue_cap_ = 0;
    uint64_t *cancels_ = nullptr; /* tags of polls to remove at the next wait */
    size_t cancel_count_ = 0, cancel_cap_ = 0;
    /* Streams' completion path. */
    bool streams_ok_ = false;                /* probe_streams said yes        */
    struct io_uring_buf_ring *br_ = nullptr; /* the registered buffer ring    */
    char *bufs_ = nullptr;                   /* buf_count_ * buf_size_ bytes  */
    uint16_t *park_next_ = nullptr;          /* parked chains: next id + 1    */
    uint32_t *park_len_ = nullptr;           /* parked buffers' lengths       */
    uint32_t buf_count_ = 0, buf_size_ = 0;
    struct SendSlot {
        struct msghdr msg;
        struct iovec iov[kSendIovMax];
    };
    SendSlot *sends_ = nullptr; /* one per SQE slot, allocated with the first send */
};

} // namespace

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
    loop->streams_completion = backend->streams_ok();
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
