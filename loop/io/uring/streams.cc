/* SPDX-License-Identifier: MIT */
/*
 * The io_uring backend's completion path for streams and listeners
 * (CompletionOps in io/backend.h; the class is in uring.h): the
 * registered buffer ring and its read buffers (parked per stream while the
 * stream does not read), multishot receive and accept, vectored sends whose
 * msghdr lives in a per-SQE slot, cancellation, and the completions of
 * registrations that are gone. The ring that carries them is uring.cc.
 */
#include "tl_config.h"

#if TL_HAVE_LIBURING
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "loop/io/backend.h"
#include "loop/io/io.h"
#include "loop/io/uring/shim.h"
#include "loop/io/uring/uring.h"
#include "loop/io_event.h"
#include "loop/state.h"

namespace tl::detail {

/* Decides the path of the loop's streams: completion when the kernel has
   multishot receive (Linux 6.0, probed through IORING_OP_SEND_ZC, which
   came with it) and takes a trial registration of the buffer ring (5.19),
   unless TICKLOOP_URING_STREAMS=readiness. The ring of buffer
   descriptors (16 bytes each) stays registered; the buffers themselves
   are allocated when the first stream reads. */
void UringBackend::probe_streams() noexcept {
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

int UringBackend::stream_buffers() noexcept {
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

int UringBackend::stream_recv(int fd) noexcept {
    io_uring_sqe *sqe = get_sqe();
    if (!sqe) return -EBUSY;
    io_uring_prep_recv_multishot(sqe, fd, nullptr, 0, 0);
    sqe->flags |= IOSQE_BUFFER_SELECT;
    sqe->buf_group = kBufGroup;
    io_uring_sqe_set_data64(sqe, req_tag(slot_tag(fd), REQ_RECV));
    return 0;
}

bool UringBackend::slots_ready() noexcept {
    if (!sends_)
        sends_ =
            static_cast<SendSlot *>(std::calloc(uring_shim::sq_entries(&ring_), sizeof *sends_));
    return sends_ != nullptr;
}

UringBackend::SendSlot *UringBackend::send_slot(io_uring_sqe *sqe) noexcept {
    return &sends_[uring_shim::sqe_index(&ring_, sqe)];
}

/* One buffer goes out as a plain send, which the kernel takes without
   copying and checking a msghdr and an iovec array. Several are one
   sendmsg, whose msghdr and iovecs live in the slot of sends_ that has the
   SQE's index: an SQE slot is reused only after the kernel has consumed
   the SQE, and by then it has copied both (IORING_FEAT_SUBMIT_STABLE,
   Linux 5.7; the completion path needs 6.0). So the caller's array may go
   as soon as this returns, and nothing is allocated per send. */
int UringBackend::stream_send(int fd, const struct iovec *iov, int n) noexcept {
    if (n < 1 || n > kSendIovMax) return -EINVAL;
    if (n > 1 && !slots_ready()) return -ENOMEM;
    io_uring_sqe *sqe = get_sqe();
    if (!sqe) return -EBUSY;
    if (n == 1) {
        io_uring_prep_send(sqe, fd, iov[0].iov_base, iov[0].iov_len, MSG_NOSIGNAL);
    } else {
        SendMsg &slot = send_slot(sqe)->send;
        std::memcpy(slot.iov, iov, (size_t)n * sizeof *iov);
        std::memset(&slot.msg, 0, sizeof slot.msg);
        slot.msg.msg_iov = slot.iov;
        slot.msg.msg_iovlen = (size_t)n;
        io_uring_prep_sendmsg(sqe, fd, &slot.msg, MSG_NOSIGNAL);
    }
    io_uring_sqe_set_data64(sqe, req_tag(slot_tag(fd), REQ_SEND));
    return 0;
}

/* The address goes in the SQE's slot of sends_, like a sendmsg's msghdr:
   the kernel copies it while it consumes the SQE. */
int UringBackend::stream_connect(int fd, const struct sockaddr *addr, socklen_t len) noexcept {
    if (len > sizeof(struct sockaddr_storage)) return -EINVAL;
    if (!slots_ready()) return -ENOMEM;
    io_uring_sqe *sqe = get_sqe();
    if (!sqe) return -EBUSY;
    SendSlot *slot = send_slot(sqe);
    std::memcpy(&slot->addr, addr, len);
    io_uring_prep_connect(sqe, fd, reinterpret_cast<struct sockaddr *>(&slot->addr), len);
    io_uring_sqe_set_data64(sqe, req_tag(slot_tag(fd), REQ_SEND));
    return 0;
}

int UringBackend::listener_accept(int fd) noexcept {
    io_uring_sqe *sqe = get_sqe();
    if (!sqe) return -EBUSY;
    io_uring_prep_multishot_accept(sqe, fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    io_uring_sqe_set_data64(sqe, req_tag(slot_tag(fd), REQ_ACCEPT));
    return 0;
}

void UringBackend::stream_cancel(int fd, unsigned kind) noexcept {
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
void UringBackend::release_fd(int fd) noexcept {
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

void UringBackend::buffer_release(uint32_t bid) noexcept {
    if (!bufs_ || bid >= buf_count_) return;
    io_uring_buf_ring_add(br_, bufs_ + (size_t)bid * buf_size_, buf_size_, (uint16_t)bid,
                          io_uring_buf_ring_mask(buf_count_), 0);
    io_uring_buf_ring_advance(br_, 1);
}

/* chain: (head + 1) in the low 16 bits, (tail + 1) in the high 16. */
void UringBackend::buffer_park(uint32_t *chain, uint32_t bid, uint32_t len) noexcept {
    park_next_[bid] = 0;
    parked_len(bid) = len;
    uint32_t tail = *chain >> 16;
    if (tail)
        park_next_[tail - 1] = (uint16_t)(bid + 1);
    else
        *chain = bid + 1;
    *chain = (*chain & 0xffffu) | (bid + 1) << 16;
}

bool UringBackend::buffer_unpark(uint32_t *chain, uint32_t *bid, uint32_t *len) noexcept {
    uint32_t head = *chain & 0xffffu;
    if (!head) return false;
    *bid = head - 1;
    *len = parked_len(*bid);
    uint32_t next = park_next_[*bid];
    *chain = next ? (*chain & 0xffff0000u) | next : 0;
    return true;
}

/* A stream's or listener's completion, from reap: to the loop if its
   registration is current, else cleaned up here. It carries data and
   cannot be asked for again: false (b.full) if the batch has no room, and
   it stays in the CQ for the next wait. */
bool UringBackend::stream_cqe(const io_uring_cqe *cqe, Reaped &b) noexcept {
    uint64_t tag = io_uring_cqe_get_data64(cqe);
    uint64_t base = req_base(tag);
    unsigned kind = req_kind(tag);
    if (b.ready == b.cap) {
        b.full = true;
        return false;
    }
    if (!io_current(loop_, base)) {
        if (cqe->flags & IORING_CQE_F_BUFFER) buffer_release(cqe->flags >> IORING_CQE_BUFFER_SHIFT);
        if (kind == REQ_ACCEPT && cqe->res >= 0) close(cqe->res);
        return true;
    }
    ReadyEvent ev{base, kCompletion | kind};
    ev.res = cqe->res;
    ev.cflags = cqe->flags;
    b.out[b.ready++] = ev;
    return true;
}

void UringBackend::streams_free() noexcept {
    std::free(bufs_);
    std::free(park_next_);
    std::free(park_len_);
    std::free(br_);
    std::free(sends_);
}

} // namespace tl::detail

#endif /* TL_HAVE_LIBURING */
