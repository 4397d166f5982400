/* SPDX-License-Identifier: MIT */
/*
 * Internal to loop/: what io.cc offers the rest of the loop: the fd
 * registry (lookup, registration of streams and listeners, moving an
 * internal watcher, handing every registration to a backend), the loop's
 * own watchers, and the dispatch of the events a wait returned.
 */
#ifndef TICKLOOP_LOOP_IO_H
#define TICKLOOP_LOOP_IO_H

#include <cstdint>

#include "loop/io/backend.h"
#include "loop/io_event.h"
#include "loop/state.h"
#include "tickloop/tickloop.h"

namespace tl::detail {

/* tl_io's private words by name. io_owner: priv[0], the loop a watcher,
   stream or listener is bound to (every kind). priv[1] is the kind's own,
   named where that kind is served: a stream's completion requests
   (stream_requests, stream/core.h), a listener's accept callback
   (accept_cb, stream/listener.cc). */
inline tl_loop *io_owner(const tl_io *w) noexcept {
    return reinterpret_cast<tl_loop *>(w->priv[0]);
}
inline void set_io_owner(tl_io *w, const tl_loop *loop) noexcept {
    w->priv[0] = reinterpret_cast<uintptr_t>(loop);
}

/* What the registry does with the events of a registration a handle owns
   (IO_STREAM, IO_LISTENER): each stream path's table begins with one
   (StreamPath::io, stream/core.h) and the loop points at its path's
   (loop->handle_io), so the registry hands events up without knowing the
   layer above. event: readiness or a completion for w; stale: a
   completion whose registration is gone (return its buffer, close an
   accepted socket); readd: give w's requests to io (a fresh backend after
   tl_loop_fork, or io_readd_all). completion: the handles' requests are
   the backend's own (io_uring's completion path), so a registration without
   readiness interest is still in the backend. */
struct HandleIo {
    bool completion;
    void (*event)(tl_loop *loop, tl_io *w, const ReadyEvent &ev) noexcept;
    void (*stale)(tl_loop *loop, const ReadyEvent &ev) noexcept;
    int (*readd)(tl_loop *loop, IoBackend *io, tl_io *w) noexcept;
};

/* Runs the callbacks for the n events the wait returned; returns how many ran. */
uint64_t io_dispatch(tl_loop *loop, int n) noexcept;
/* Starts an internal watcher (does not keep the loop alive). */
int io_start_internal(tl_loop *loop, tl_io *w, int fd, tl_io_cb cb) noexcept;
void io_stop_internal(tl_loop *loop, tl_io *w) noexcept;
/* Releases the fd registry (the loop has no active handle). */
void io_close(tl_loop *loop) noexcept;
/* The registration fd's tag names, or null if it names none any more
   (stopped, or stopped and replaced on a reused fd number). */
IoSlot *io_current(tl_loop *loop, uint64_t tag) noexcept;
/* Gives every registration to io, tags unchanged: a fresh backend
   (tl_loop_fork), or one that has just replaced its kernel object. Returns 0 or the first error
   other than -EBADF; a watcher whose fd was closed without tl_io_stop cannot be added again: it
   stays active and gets no more events, as a closed fd gets none from epoll. */
int io_readd_all(tl_loop *loop, IoBackend *io) noexcept;
/* An error the loop hid from the caller (an internal completion failed):
   counted in the stats, and fatal in debug builds, where it is a bug. */
void io_internal_error(tl_loop *loop, const char *what, int err) noexcept;
/* The fd registry for streams and listeners (io.cc): register w (fd, flags
   IO_STREAM or IO_LISTENER) with no events and without telling the I/O
   backend; -EBUSY if fd is taken, -EBADF if it is not open. io_interest then
   sets the readiness the backend waits for (0: none: the backend forgets the
   fd, so that a hung-up idle socket cannot make the loop spin); io_unregister
   drops the registration. Handle counts are the caller's. known_open: the
   caller knows fd is open (the loop accepted it a moment ago), so no syscall
   checks it. */
int io_register(tl_loop *loop, tl_io *w, uint32_t kind, bool known_open = false) noexcept;
int io_interest(tl_loop *loop, tl_io *w, unsigned events) noexcept;
void io_unregister(tl_loop *loop, tl_io *w) noexcept;
/* Moves the registration of internal watcher w from its fd to new_fd, a
   descriptor just created (so open, and not w->fd): the registry slot of
   w->fd is cleared, the new descriptor's holds w with state and index 0,
   w->fd becomes it, and w keeps its generation. If a watcher is filed under
   new_fd's number (one whose fd the program closed without stopping it),
   the descriptor is first moved above the registry (F_DUPFD_CLOEXEC) and
   new_fd closed, so that that watcher's stop cannot clear w's slot. The I/O
   backend is not told: the fork steps give the whole registry to a fresh
   backend afterwards (io_readd_all). The caller closes the old descriptor.
   Returns the descriptor w now watches (new_fd or its duplicate), or a
   negative errno (duplicating the descriptor or growing the registry
   failed) with nothing changed: new_fd is still the caller's. */
int io_replace_fd(tl_loop *loop, tl_io *w, int new_fd) noexcept;

} // namespace tl::detail

#endif /* TICKLOOP_LOOP_IO_H */
