/* SPDX-License-Identifier: MIT */
/*
 * Internal to loop/: the I/O backend interface. IoSlot (an entry of the
 * loop's fd registry), IoBackend (the readiness poller every backend
 * implements: epoll.cc, uring.cc), CompletionOps (the completion path of
 * streams and listeners, io_uring only, reached through
 * IoBackend::completion()) and the backends' create functions.
 */
#ifndef TICKLOOP_LOOP_IO_BACKEND_H
#define TICKLOOP_LOOP_IO_BACKEND_H

#include <cstdint>
#include <ctime>
#include <sys/socket.h>
#include <sys/uio.h>

#include "loop/io_event.h"
#include "tickloop/tickloop.h"
#include "timers/timers.h"

namespace tl::detail {

/* A fresh CLOCK_MONOTONIC read, in ns. */
inline uint64_t monotonic_ns() noexcept {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* For a backend that can only wait for a duration: what remains until
   deadline_ns (finite, non-zero) from a fresh clock read, 0 if it passed. */
inline uint64_t remaining_ns(uint64_t deadline_ns) noexcept {
    uint64_t now = monotonic_ns();
    return deadline_ns > now ? deadline_ns - now : 0;
}

/* One entry of the loop's fd registry, loop->io_slots[fd] (libuv's
 * loop->watchers[]). `watcher` is the active watcher of fd, or null; only
 * loop/io.cc writes it (everything else reads it). `state` and `index` belong
 * to the I/O backend (io_uring keeps its armed/queued bits and its re-arm
 * queue position there); the loop zeroes them before add() and never reads
 * them. */
struct IoSlot {
    tl_io *watcher;
    uint32_t state;
    uint32_t index;
};

/* The completion path of streams and listeners (loop/stream/; io_uring
 * only). A stream or listener registration never gets IoBackend::add()'s
 * poll on that path: add() re-arms its requests instead (HandleIo::readd), and
 * remove() cancels them. Requests complete as ReadyEvents with revents
 * kCompletion | kind, tag io_tag(fd, gen), and the CQE's res and flags. A
 * completion for a registration that is gone is handled by the backend
 * (buffer returned, accepted socket closed), or by HandleIo::stale if the loop
 * drops it. Never deleted through this interface: the backend is deleted as
 * an IoBackend. */
class CompletionOps {
public:
    /* Allocates the read buffers and fills the ring (first reading stream):
       0, -ENOMEM. */
    virtual int stream_buffers() noexcept = 0;
    /* Arms a multishot receive (REQ_RECV) for fd's registration. */
    virtual int stream_recv(int fd) noexcept = 0;
    /* Submits one vectored send (REQ_SEND) of the n (1..kSendIovMax)
       buffers in iov, MSG_NOSIGNAL. The array is copied: it may go once this
       returns. */
    virtual int stream_send(int fd, const struct iovec *iov, int n) noexcept = 0;
    /* Arms a multishot accept (REQ_ACCEPT), NONBLOCK|CLOEXEC sockets. */
    virtual int listener_accept(int fd) noexcept = 0;
    /* Submits a connect of fd to addr (REQ_SEND: a connecting stream has no
       send in flight). addr may go once this returns. */
    virtual int stream_connect(int fd, const struct sockaddr *addr, socklen_t len) noexcept = 0;
    /* Cancels fd's request of that kind (its last CQE still arrives). */
    virtual void stream_cancel(int fd, unsigned kind) noexcept = 0;
    /* A buffer a receive completion named; its return to the ring. */
    virtual const void *buffer(uint32_t bid) noexcept = 0;
    virtual void buffer_release(uint32_t bid) noexcept = 0;
    /* A per-stream FIFO of received buffers held while the stream does not
       read (chain: 0 when empty), through arrays the backend owns. */
    virtual void buffer_park(uint32_t *chain, uint32_t bid, uint32_t len) noexcept = 0;
    virtual bool buffer_unpark(uint32_t *chain, uint32_t *bid, uint32_t *len) noexcept = 0;

protected:
    ~CompletionOps() = default;
};

/* A readiness poller working against the loop's fd registry.
 * Level-triggered: an fd that stays ready is reported by every wait. Events
 * carry io_tag(fd, watcher->gen) of the registration they belong to; tags
 * with generation 0 are a backend's own and never name a registration.
 *
 * Preconditions the loop guarantees (and a backend may rely on):
 * - add(fd): io_slots[fd].watcher is the watcher being started, with fd,
 *   events (TL_READ|TL_WRITE, non-empty) and a fresh gen set; state and
 *   index are 0; no other registration of fd exists. fd was open a moment
 *   ago. On failure the loop clears the slot again.
 * - modify(fd, events): fd is registered (add succeeded, no remove since);
 *   watcher->events still holds the old events, and the loop stores the new
 *   ones only after modify returns 0. The fd may have been closed.
 * - remove(fd): fd is registered; the slot still holds the watcher, and the
 *   loop clears it after remove returns. The fd may already be closed (that
 *   is not an error; remove cannot fail).
 * - wait(): not reentrant; no callback runs inside it.
 * - A backend may rebuild its kernel state from the registry at any time
 *   (io_readd_all: epoll does when it holds a registration it cannot
 *   delete); tl_loop_fork gives every registration to a fresh backend the
 *   same way. A slot's state and index are zeroed before each such add.
 * Errors are negative errnos. add/modify return -EBADF (not open), -EPERM
 * (the kernel cannot poll this file: regular files, directories, /dev/null),
 * -ENOMEM; never -EBUSY: a full submission queue is the backend's problem. */
class IoBackend : public MallocNew {
public:
    virtual ~IoBackend() = default;
    virtual const char *name() const noexcept = 0;
    /* TL_IO_EPOLL or TL_IO_URING: what tl_loop_fork creates again. */
    virtual tl_io_kind kind() const noexcept = 0;
    virtual int add(int fd) noexcept = 0;
    virtual int modify(int fd, unsigned events) noexcept = 0;
    virtual void remove(int fd) noexcept = 0;
    /* The descriptor a host loop polls to learn that this backend has events
       (tl_loop_fd): readable while a wait(0) would return some. Created on
       first use where it is not the backend's own; a negative errno if that
       fails. */
    virtual int poll_fd() noexcept = 0;
    /* True while a host must not block on poll_fd(): requests queued that
       the kernel has not been handed yet (io_uring's SQEs and re-arms ride on
       the next wait), or completions already waiting for an iteration (in
       the CQ, or as deferred task work) whose signal the loop may have
       drained. tl_loop_timeout then flushes, and says 0 if that leaves any. */
    virtual bool needs_enter() const noexcept { return false; }
    /* Hands queued requests to the kernel without waiting. 0 or a negative
       errno. */
    virtual int flush() noexcept { return 0; }
    /* Waits until the absolute CLOCK_MONOTONIC time deadline_ns at most
       (UINT64_MAX: no limit; 0, or any time already past: never blocks) and
       stores up to cap ready events in out. Returns their number, -EINTR if a
       signal handler interrupted the wait, or another negative errno. An
       absolute deadline lets the caller retry an interrupted wait with the
       same argument: a retry can never extend it, and time spent between the
       loop's clock read and the syscall (callbacks, preemption) never
       lengthens a wait. */
    virtual int wait(uint64_t deadline_ns, ReadyEvent *out, int cap) noexcept = 0;
    /* Lets each later wait that has an event go on gathering more for up to
       ns from its start (0: off), never past its deadline. Returns the
       bound in effect: ns, or 0 where the kernel offers no such wait. */
    virtual uint64_t set_batch(uint64_t ns) noexcept {
        (void)ns;
        return 0;
    }
    /* Whether set_batch(ns) with ns > 0 takes effect: the kernel's wait can
       batch (io_uring's minimum wait). Asking sets nothing. */
    virtual bool can_batch() const noexcept { return false; }

    /* The completion path of streams and listeners, or null where the
       backend has none (epoll). */
    virtual CompletionOps *completion() noexcept { return nullptr; }
    /* Called after remove(fd): ends every kernel request on fd before it
       returns, so that none holds the file once the caller closes it (a
       listening socket then frees its port at once). Backends whose requests
       hold no file reference (epoll) have nothing to do. */
    virtual void release_fd(int fd) noexcept { (void)fd; }
};

/* Both bind the backend to `loop` (its registry and stats) for its life. */
int epoll_backend_create(tl_loop *loop, IoBackend **out) noexcept;
/* -ENOSYS without liburing or on a kernel too old; the kernel's errno when
   io_uring is refused (-EPERM from seccomp or kernel.io_uring_disabled). */
int uring_backend_create(tl_loop *loop, IoBackend **out) noexcept;

} // namespace tl::detail

#endif /* TICKLOOP_LOOP_IO_BACKEND_H */
