/* SPDX-License-Identifier: MIT */
/*
 * What the stream core (stream.cc: handles, the pending pass, the API and
 * the write queue's storage; write_queue.h: what a send takes from the
 * queue), its two paths (readiness.cc, completion.cc) and listener.cc share:
 * the handles' state bits, and the helpers the paths call. The core calls a
 * loop's path through the StreamPath table chosen when its I/O backend is
 * created; the paths call the core's helpers and never each other.
 */
#ifndef TICKLOOP_LOOP_STREAM_CORE_H
#define TICKLOOP_LOOP_STREAM_CORE_H

#include <cstddef>
#include <cstdint>
#include <sys/uio.h>

#include "loop/handle_flags.h"
#include "loop/io/backend.h"
#include "loop/io/io.h"
#include "loop/io_event.h"
#include "loop/state.h"
#include "loop/verify.h"

namespace tl::detail {

/* io_uring's CQE flags, without its headers (built without liburing, the
   completion path never runs). */
constexpr uint32_t IORING_CQE_F_BUFFER_BIT = 1u << 0;
constexpr uint32_t IORING_CQE_F_MORE_BIT = 1u << 1;

/* tl_stream::flags: a marker in the high 16 bits (tl_stream_init), state in
 * the low ones. */
enum : uint32_t {
    S_MAGIC = 0x57e10000u,
    S_MAGIC_MASK = 0xffff0000u,
    S_BOUND = 1u << 0,   /* an active handle of its io_owner loop        */
    S_REG = 1u << 1,     /* in the fd registry                          */
    S_READING = 1u << 2, /* tl_stream_read_start, no EOF or error since */
    S_CLOSING = 1u << 3, /* tl_stream_close called, close callback due  */
    S_CLOSED = 1u << 4,  /* closed: fd gone, callback run                */
    S_PENDING = 1u << 5, /* on the loop's pending list                  */
    S_UNREF = 1u << 6,   /* tl_stream_set_ref(.., 0); a closing stream still
                            counts as referenced until its close callback */
};

/* A stream's requests in the completion backend (stream_requests: its
   io.priv[1]). */
enum : uintptr_t {
    SC_RECV = 1u << 0,   /* a multishot receive is armed (its last CQE not seen) */
    SC_CANCEL = 1u << 1, /* its cancellation is on the way                       */
    SC_SEND = 1u << 2,   /* a send is in flight                                  */
};

/* tl_listener::flags. */
enum : uint32_t {
    L_MAGIC = 0x11570000u,
    L_MAGIC_MASK = 0xffff0000u,
    L_ACTIVE = 1u << 0,
    L_PAUSED = 1u << 1, /* after an accept error, until listeners_resume */
    L_UNREF = 1u << 2,
    L_ARMED = 1u << 3,  /* completion path: a multishot accept is armed */
    L_CANCEL = 1u << 4, /* and its cancellation is on the way           */
};

/* tl_write_req::flags. */
enum : uint32_t {
    WR_QUEUED = 1u << 0,
    WR_BLOCK = 1u << 1, /* bufs.many.iov is a block of the loop's copies */
};

inline tl_stream *stream_of(tl_io *w) noexcept {
    return reinterpret_cast<tl_stream *>(reinterpret_cast<char *>(w) - offsetof(tl_stream, io));
}
inline tl_listener *listener_of(tl_io *w) noexcept {
    return reinterpret_cast<tl_listener *>(reinterpret_cast<char *>(w) - offsetof(tl_listener, io));
}
/* The backend's completion operations: only on the completion path
   (loop->streams_completion), where the backend has them. */
inline CompletionOps &ops(tl_loop *loop) noexcept {
    return *loop->io->completion();
}
/* A stream's requests in the completion backend (SC_* bits): io.priv[1]. */
inline uintptr_t &stream_requests(tl_stream *s) noexcept {
    return s->io.priv[1];
}

/* What differs between the readiness and the completion path, for streams
 * and listeners alike, called by the core (stream.cc, listener.cc) at the
 * points where the two part. Each entry gets a handle of the loop whose path
 * it is. Written with designated initialisers; an entry a path has nothing
 * to do for points at a function that does nothing. */
struct StreamPath {
    const char *name; /* tl_loop_stream_path */
    /* Before a stream of the loop first reads: the loop's read buffers. 0 or
       -ENOMEM. */
    int (*prepare_read)(tl_loop *loop) noexcept;
    /* S_READING was just set: receive. 0 or -errno (the core clears it). */
    int (*read_started)(tl_loop *loop, tl_stream *s) noexcept;
    /* S_READING was just cleared. */
    void (*read_stopped)(tl_loop *loop, tl_stream *s) noexcept;
    /* req was queued (first: it is the only one with bytes left). */
    void (*write_queued)(tl_loop *loop, tl_stream *s, bool first) noexcept;
    /* S_CLOSING was just set: end reading and fail (or cancel) the writes;
       the core then makes s pending. */
    void (*closing)(tl_loop *loop, tl_stream *s) noexcept;
    /* An event of s's registration (readiness, or a completion). */
    void (*event)(tl_loop *loop, tl_stream *s, const ReadyEvent &ev) noexcept;
    /* The pending pass reached s: before and after its write callbacks
       (the second only if s is not closing). */
    void (*before_callbacks)(tl_loop *loop, tl_stream *s) noexcept;
    void (*after_callbacks)(tl_loop *loop, tl_stream *s) noexcept;
    /* Gives s's requests to io, a fresh backend (completion path only). */
    int (*readd)(tl_loop *loop, IoBackend *io, tl_stream *s) noexcept;

    /* l was registered: start accepting. 0 or -errno. */
    int (*accept_start)(tl_loop *loop, tl_listener *l) noexcept;
    /* Accepting pauses (an accept error) / resumes / ends (l stops). */
    void (*accept_pause)(tl_loop *loop, tl_listener *l) noexcept;
    void (*accept_resume)(tl_loop *loop, tl_listener *l) noexcept;
    void (*accept_stop)(tl_loop *loop, tl_listener *l) noexcept;
    /* An event of l's registration (readiness, or an accept's completion). */
    void (*listener_event)(tl_loop *loop, tl_listener *l, const ReadyEvent &ev) noexcept;
    /* Gives l's accept to io, a fresh backend (completion path only). */
    int (*listener_readd)(tl_loop *loop, IoBackend *io, tl_listener *l) noexcept;
};
extern const StreamPath kReadinessPath;
extern const StreamPath kCompletionPath;

/* Puts s on the loop's pending list (its callbacks are due), once. The
   core's helper every file of the folder calls; stream.cc runs the list. */
inline void mark_pending(tl_loop *loop, tl_stream *s) noexcept {
    if (s->flags & S_PENDING) return;
    s->flags |= S_PENDING;
    s->pending_next = nullptr;
    if (loop->stream_pending_tail)
        loop->stream_pending_tail->pending_next = s;
    else
        loop->stream_pending_head = s;
    loop->stream_pending_tail = s;
}

/* stream.cc: the write queue's storage (its operations: write_queue.h). */
void write_queue_free(tl_loop *loop) noexcept;

/* listener.cc */
void listeners_configure(tl_loop *loop) noexcept;
/* Gives every paused listener its readiness back (a stream closed: a
   descriptor is free again). */
void listeners_resume(tl_loop *loop) noexcept;
/* The paths' accepts end here. accepted: fd (>= 0) was accepted for l: its
   callback runs; false if the callback stopped l (which may be freed).
   accept_failed: an error a retry would hit again (out of descriptors or
   memory): accepting pauses, and the callback gets err. */
bool accepted(tl_loop *loop, tl_listener *l, int fd) noexcept;
void accept_failed(tl_loop *loop, tl_listener *l, int err) noexcept;

} // namespace tl::detail

#endif /* TICKLOOP_LOOP_STREAM_CORE_H */
