/* SPDX-License-Identifier: MIT */
/*
 * The io_uring backend's readiness (uring.h): single-shot polls,
 * armed, updated and cancelled here, with the re-arm queue and the cancel
 * list that hold what found no SQE; the ring that carries them is uring.cc.
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
 */
#include "tl_config.h"

#if TL_HAVE_LIBURING
#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <sys/epoll.h>

#include "loop/handle_flags.h"
#include "loop/io/backend.h"
#include "loop/io/io.h"
#include "loop/io/uring/uring.h"
#include "loop/io_event.h"
#include "loop/state.h"

namespace tl::detail {

/* The re-arm queue: queue_[0, queue_count_) holds each fd whose poll is to
   be armed or updated at the next wait once (kInRearmQueue), its place
   in IoSlot::index. */
void UringBackend::enqueue(int fd) noexcept {
    IoSlot &slot = loop_->io_slots[fd];
    if (slot.state & kInRearmQueue) return;
    slot.state |= kInRearmQueue;
    slot.index = (uint32_t)queue_count_;
    queue_[queue_count_++] = fd;
}

void UringBackend::dequeue(int fd) noexcept {
    IoSlot &slot = loop_->io_slots[fd];
    int last = queue_[--queue_count_];
    queue_[slot.index] = last;
    loop_->io_slots[last].index = slot.index;
    slot.state &= ~kInRearmQueue;
}

int UringBackend::add(int fd) noexcept {
    tl_io *sw = loop_->io_slots[fd].watcher;
    if (streams_ok_ && (sw->flags & IO_HANDLE_KINDS))
        return loop_->handle_io->readd(loop_, this, sw);
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

int UringBackend::modify(int fd, unsigned events) noexcept {
    IoSlot &slot = loop_->io_slots[fd];
    /* Not armed: the next arm reads the watcher's new events. */
    if (!(slot.state & kArmed)) return 0;
    if (update(fd, events) < 0) enqueue(fd);
    return 0;
}

void UringBackend::remove(int fd) noexcept {
    IoSlot &slot = loop_->io_slots[fd];
    /* A stream's or listener's requests are cancelled by stream.cc. */
    if (streams_ok_ && (slot.watcher->flags & IO_HANDLE_KINDS)) return;
    if (slot.state & kInRearmQueue) dequeue(fd);
    if (slot.state & kArmed) {
        uint64_t tag = io_tag(fd, slot.watcher->gen);
        if (cancel(tag) < 0) push_cancel(tag);
    }
    slot.state = 0;
}

/* Arms a poll for fd's registration with the watcher's events. */
int UringBackend::arm(int fd) noexcept {
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
int UringBackend::update(int fd, unsigned events) noexcept {
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

int UringBackend::cancel(uint64_t tag) noexcept {
    io_uring_sqe *sqe = get_sqe();
    if (!sqe) return -EBUSY;
    io_uring_prep_poll_remove(sqe, tag);
    io_uring_sqe_set_data64(sqe, kBackendTag);
    return 0;
}

/* A removal that found no SQE: retried at the next wait. Until then the
   poll holds a reference to its file; if even this list cannot grow, it
   holds it until the file is ready (its CQE is then dropped as stale). */
void UringBackend::push_cancel(uint64_t tag) noexcept {
    if (cancel_count_ == cancel_cap_) {
        size_t cap = cancel_cap_ ? cancel_cap_ * 2 : 16;
        void *mem = std::realloc(cancels_, cap * sizeof(uint64_t));
        if (!mem) return;
        cancels_ = static_cast<uint64_t *>(mem);
        cancel_cap_ = cap;
    }
    cancels_[cancel_count_++] = tag;
}

/* Before each wait: arm the polls that completed last time (or found no
   SQE), bring armed polls' events up to date, retry removals; the
   completions still held as task work go to the CQ first when those
   re-arms need it (post_deferred). */
void UringBackend::arm_queued() noexcept {
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
            slot.state &= ~kInRearmQueue;
            continue;
        }
        slot.index = (uint32_t)kept; /* no SQE even after a submit: next time */
        queue_[kept++] = fd;
    }
    queue_count_ = kept;
}

/* A poll's completion, from reap: its readiness becomes an event and its
   poll goes back on the re-arm queue. A readiness that finds the batch
   full is not kept: by the next iteration it may be stale (the fd drained
   meanwhile), so its poll is re-armed instead, and the kernel reports it
   again then if the fd is still ready, as epoll re-checks its ready list
   at each wait (b.split marks where those re-arms start). */
void UringBackend::poll_cqe(const io_uring_cqe *cqe, Reaped &b) noexcept {
    uint64_t tag = io_uring_cqe_get_data64(cqe);
    int res = cqe->res;
    IoSlot *slot = io_current(loop_, tag);
    if (!slot) return; /* stale: the loop dropped this registration */
    slot->state &= ~kArmed;
    if (res == -ECANCELED) return;
    if (b.ready == b.cap) {
        /* No room in this iteration: ask the kernel again at the next
           wait (a failed poll fails again and is reported then). */
        if (b.split == SIZE_MAX) b.split = queue_count_;
        enqueue(io_tag_fd(tag));
        return;
    }
    if (res < 0) {
        /* The poll itself failed (the fd was closed, say): report it once
           and stay quiet, as epoll drops a closed fd. */
        b.out[b.ready++] = ReadyEvent{tag, TL_ERROR};
        return;
    }
    enqueue(io_tag_fd(tag));
    unsigned revents = tl_events((uint32_t)res);
    if (revents) b.out[b.ready++] = ReadyEvent{tag, revents};
}

/* After a reap: queue_[b.first, b.split) holds the fds reported now,
   [b.split, end) those the batch had no room for. Those go first, so that
   with more ready fds than a batch each gets its turn. */
void UringBackend::rearm_unreported_first(const Reaped &b) noexcept {
    if (b.split == SIZE_MAX || b.split <= b.first) return;
    std::rotate(queue_ + b.first, queue_ + b.split, queue_ + queue_count_);
    for (size_t i = b.first; i < queue_count_; ++i) loop_->io_slots[queue_[i]].index = (uint32_t)i;
}

} // namespace tl::detail

#endif /* TL_HAVE_LIBURING */
