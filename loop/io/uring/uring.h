/* SPDX-License-Identifier: MIT */
/*
 * Internal to loop/uring*.cc: the io_uring I/O backend (liburing), one class
 * in three files by idea:
 * - uring.cc: the ring (setup, enable, the enter and its absolute timeout,
 *   time namespaces, wait and reap, flush, tl_loop_fd's eventfd) and
 *   uring_backend_create;
 * - poll.cc: readiness through single-shot polls (arm, update,
 *   cancel, the re-arm queue and the cancel list, what may be watched);
 * - streams.cc: the streams' completion path (CompletionOps: the
 *   buffer ring, multishot receive and accept, vectored sends).
 * liburing's internals are used only through shim.h.
 *
 * Setup and the loop's choice of path, for both halves: the ring is set up
 * SINGLE_ISSUER | DEFER_TASKRUN (6.1), else COOP_TASKRUN (5.19), else plain;
 * never SQPOLL. With SINGLE_ISSUER the ring starts disabled and is enabled by
 * the first call from the loop's thread, so a loop may be created on one
 * thread and run on another. A full SQ is submitted and retried (get_sqe);
 * if that still leaves no SQE, a poll's arm or update waits in the re-arm
 * queue (and a removal in the cancel list) for the next wait: the caller
 * never sees -EBUSY. CQ overflow is left to IORING_FEAT_NODROP (required), so
 * no event is lost.
 *
 * Only built with liburing (TL_HAVE_LIBURING); without it uring.cc's
 * uring_backend_create returns -ENOSYS and the other files are empty.
 */
#ifndef TICKLOOP_LOOP_URING_BACKEND_H
#define TICKLOOP_LOOP_URING_BACKEND_H

#include "tl_config.h"

#if TL_HAVE_LIBURING

#include <cstddef>
#include <cstdint>
#include <sys/socket.h>
#include <sys/uio.h>

#include "loop/io/backend.h"
#include "loop/io/uring/shim.h"
#include "loop/io_event.h"
#include "loop/state.h"

namespace tl::detail {

/* 256 SQEs cover a full batch of re-arms; the CQ is larger so that a burst
 * of completions rarely reaches the kernel's overflow list. Its size also
 * sets the kernel's table of cancellable requests: CQ entries / 32 buckets,
 * at most 256, and every armed poll and multishot receive is in it. A
 * cancellation (a stream's close, a watcher's stop) walks one bucket, so
 * 8192 entries, the smallest CQ that gets 256 buckets, halve that walk
 * against 4096: measured with 9,000 multishot receives and a cold cache,
 * a cancel took 18 us against 25. */
inline constexpr unsigned kSqEntries = 256;
inline constexpr unsigned kCqEntries = 8192;

/* IoSlot::state bits. The poll in flight asked for the TL_READ|TL_WRITE in
 * bits kArmedShift.. ; IoSlot::index is the slot's place in queue_. */
inline constexpr uint32_t kArmed = 1u << 0; /* a poll with the registration's tag is in flight */
inline constexpr uint32_t kInRearmQueue =
    1u << 1; /* in queue_: arm, or update the armed poll's events */
inline constexpr uint32_t kArmedShift = 8;

/* One reap's events (UringBackend::reap): the handler of each completion's
 * kind adds to it. split is where queue_ holds the re-arms of readiness the
 * batch had no room for (SIZE_MAX while none), first where queue_ ended
 * when the reap began; full: a completion that carries data found no room
 * and stays in the CQ, with every one after it, for the next wait. */
struct Reaped {
    ReadyEvent *out;
    int cap;
    int ready;
    size_t first;
    size_t split;
    bool full;
};

class UringBackend final : public IoBackend, public CompletionOps {
public:
    explicit UringBackend(tl_loop *loop) noexcept : loop_(loop) {}
    ~UringBackend() override;

    const char *name() const noexcept override { return "io_uring"; }
    tl_io_kind kind() const noexcept override { return TL_IO_URING; }

    /* The ring (uring.cc). */
    int poll_fd() noexcept override;
    bool needs_enter() const noexcept override;
    int flush() noexcept override;
    int init(unsigned flags) noexcept;
    int wait(uint64_t deadline_ns, ReadyEvent *out, int cap) noexcept override;
    uint64_t set_batch(uint64_t ns) noexcept override;
    bool can_batch() const noexcept override { return min_wait_; }
    void probe_abs_timer() noexcept;

    /* Poll readiness (poll.cc). */
    int add(int fd) noexcept override;
    int modify(int fd, unsigned events) noexcept override;
    void remove(int fd) noexcept override;

    /* The streams' completion path (streams.cc). */
    void probe_streams() noexcept;
    bool streams_ok() const noexcept { return streams_ok_; }
    /* The completion path of streams (CompletionOps, below), where
       probe_streams found what it needs; else none, and the loop's streams
       take the readiness path. */
    CompletionOps *completion() noexcept override { return streams_ok_ ? this : nullptr; }
    int stream_buffers() noexcept override;
    int stream_recv(int fd) noexcept override;
    int stream_send(int fd, const struct iovec *iov, int n) noexcept override;
    int listener_accept(int fd) noexcept override;
    int stream_connect(int fd, const struct sockaddr *addr, socklen_t len) noexcept override;
    void stream_cancel(int fd, unsigned kind) noexcept override;
    void release_fd(int fd) noexcept override;
    const void *buffer(uint32_t bid) noexcept override { return bufs_ + (size_t)bid * buf_size_; }
    void buffer_release(uint32_t bid) noexcept override;
    void buffer_park(uint32_t *chain, uint32_t bid, uint32_t len) noexcept override;
    bool buffer_unpark(uint32_t *chain, uint32_t *bid, uint32_t *len) noexcept override;

private:
    static constexpr uint16_t kBufGroup = 0;

    /* The ring (uring.cc). */
    static int64_t monotonic_offset_ns() noexcept;
    uint64_t to_host(uint64_t t) const noexcept;
    int wait_cqe(uint64_t deadline_ns, unsigned cap) noexcept;
    void drain_eventfd() noexcept;
    int enable() noexcept;
    io_uring_sqe *get_sqe() noexcept;
    void post_deferred() noexcept;
    unsigned reap_ring(Reaped &b) noexcept;
    int reap(ReadyEvent *out, int cap) noexcept;
    void own_cqe(const io_uring_cqe *cqe) noexcept;

    /* Poll readiness (poll.cc). */
    int arm(int fd) noexcept;
    int update(int fd, unsigned events) noexcept;
    int cancel(uint64_t tag) noexcept;
    void push_cancel(uint64_t tag) noexcept;
    void arm_queued() noexcept;
    void poll_cqe(const io_uring_cqe *cqe, Reaped &b) noexcept;
    void rearm_unreported_first(const Reaped &b) noexcept;
    /* The re-arm queue: fd's poll is armed or updated at the next wait. */
    void enqueue(int fd) noexcept;
    void dequeue(int fd) noexcept;

    /* The streams' completion path (streams.cc). */
    uint64_t slot_tag(int fd) const noexcept {
        return io_tag(fd, loop_->io_slots[fd].watcher->gen);
    }
    uint32_t &parked_len(uint32_t bid) noexcept { return park_len_[bid]; }
    bool stream_cqe(const io_uring_cqe *cqe, Reaped &b) noexcept;
    void streams_free() noexcept;

    tl_loop *loop_;
    struct io_uring ring_;
    bool ring_ready_ = false;
    bool disabled_ = false;
    bool abs_timer_ = false; /* IORING_ENTER_ABS_TIMER on CLOCK_MONOTONIC */
    bool min_wait_ = false;  /* IORING_FEAT_MIN_TIMEOUT: batched waits possible */
    uint64_t batch_ns_ = 0;  /* set_batch's bound in effect; 0: off */
    /* A batching wait with no deadline of its own ends this far ahead. */
    static constexpr uint64_t kBatchIdleNs = 3600ull * 1000000000u;
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
    /* What an SQE points at until the kernel has consumed it: a sendmsg's
       msghdr and iovecs, or a connect's address. */
    struct SendMsg {
        struct msghdr msg;
        struct iovec iov[kSendIovMax];
    };
    union SendSlot {
        SendMsg send;
        struct sockaddr_storage addr;
    };
    SendSlot *sends_ = nullptr;  /* one per SQE slot, allocated with its first user */
    bool slots_ready() noexcept; /* sends_ allocated (once, on first use) */
    SendSlot *send_slot(io_uring_sqe *sqe) noexcept;
};

} // namespace tl::detail

#endif /* TL_HAVE_LIBURING */

#endif
