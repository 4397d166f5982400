/* SPDX-License-Identifier: MIT */
/*
 * What the stream core (stream.cc: handles, the pending pass, the API and
 * the write queue's storage; connect.cc: connect and shutdown), its two
 * paths (readiness.cc, completion.cc) and listener.cc share: the handles'
 * state bits, the path table, and the helpers the paths call, the write
 * queue's operations among them. The core calls a loop's path through the
 * StreamPath table chosen when its I/O backend is created; the paths call
 * the core's helpers and never each other, and no helper calls a path.
 *
 * The write queue: wq_head .. wq_tail in queued order; the requests before
 * wq_send are complete (status set, callback due), wq_send is the first
 * with bytes left. The requests are the caller's; the array of a request
 * of 1 to 4 buffers is copied (into the request, or a block of the loop's
 * that goes back when the request completes), so the caller's may be on
 * its stack; a longer array is read where the caller keeps it. A send
 * takes its buffers from the queue (gather) and reports the bytes the
 * kernel took (advance), on either path; these operations are inline here,
 * so that a write goes from tl_stream_write down to the path that sends it
 * without a call back up.
 */
#ifndef TICKLOOP_LOOP_STREAM_CORE_H
#define TICKLOOP_LOOP_STREAM_CORE_H

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sys/socket.h>
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
    /* Connect and shutdown (connect.cc). Their callbacks live in the
       embedded tl_io's cb (connect) and data (shutdown), which a stream's
       registration does not use; their status is s->error, or -ECANCELED
       once the stream is closing. */
    S_CONNECTING = 1u << 7,    /* tl_stream_connect: its callback has not run */
    S_CONNECT_DONE = 1u << 8,  /* the connect ended: its callback is due      */
    S_SHUT = 1u << 9,          /* tl_stream_shutdown called: writes refused   */
    S_SHUT_STARTED = 1u << 10, /* shutdown(2) made                            */
    S_SHUT_DONE = 1u << 11,    /* the shutdown ended: its callback is due     */
    S_SHUT_OVER = 1u << 12,    /* its callback has run                        */
    S_FLUSH = 1u << 13,        /* writes queued, to be sent by the pending pass */
};

/* A stream's requests in the completion backend (stream_requests: its
   io.priv[1]). */
enum : uintptr_t {
    SC_RECV = 1u << 0,   /* a multishot receive is armed (its last CQE not seen) */
    SC_CANCEL = 1u << 1, /* its cancellation is on the way                       */
    SC_SEND = 1u << 2,   /* a send is in flight                                  */
    /* A connect in flight: its completion carries REQ_SEND, which it shares
       with the sends since a connecting stream sends nothing. */
    SC_CONNECT = 1u << 3,
    /* Above these bits: how many requests the send in flight covers (it
       gathers the queue's first ones, up to kSendIovMax buffers). */
    SC_SEND_REQS_SHIFT = 8,
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
/* The backend's completion operations: only on the completion path,
   chosen where the backend has them (streams_choose_path). */
inline CompletionOps &ops(tl_loop *loop) noexcept {
    return *loop->io->completion();
}
/* A stream's requests in the completion backend (SC_* bits): io.priv[1]. */
inline uintptr_t &stream_requests(tl_stream *s) noexcept {
    return s->io.priv[1];
}

/* What differs between the readiness and the completion path, for streams
 * and listeners alike: one table per path, written with designated
 * initialisers, chosen when the loop's I/O backend is created. `io` is what
 * the fd registry calls for the registrations of the loop's streams and
 * listeners (loop->handle_io points at it); the rest is called by the core
 * (stream.cc, connect.cc, listener.cc) at the points where the two paths
 * part. Each entry gets a handle of the loop whose path it is; an entry a
 * path has nothing to do for points at a function that does nothing. */
struct StreamPath {
    HandleIo io;
    const char *name; /* tl_loop_stream_path */
    /* Before a stream of the loop first reads: the loop's read buffers. 0 or
       -ENOMEM. */
    int (*prepare_read)(tl_loop *loop) noexcept;
    /* S_READING was just set: receive. 0 or -errno (the core clears it). */
    int (*read_started)(tl_loop *loop, tl_stream *s) noexcept;
    /* S_READING was just cleared. */
    void (*read_stopped)(tl_loop *loop, tl_stream *s) noexcept;
    /* A write was queued (first: it is the only one with bytes left); on a
       stream whose sends failed (s->error) it fails at once. */
    void (*write_queued)(tl_loop *loop, tl_stream *s, bool first) noexcept;
    /* S_CLOSING was just set: end reading and fail (or cancel) the writes;
       the core then makes s pending. */
    void (*closing)(tl_loop *loop, tl_stream *s) noexcept;
    /* The pending pass reached s: before and after its write callbacks
       (the second only if s is not closing). */
    void (*before_callbacks)(tl_loop *loop, tl_stream *s) noexcept;
    void (*after_callbacks)(tl_loop *loop, tl_stream *s) noexcept;
    /* s (bound, S_CONNECTING set) connects to addr: 0 when under way or
       ended (connect_ended called), or an error of the call itself, which
       the core returns (it unbinds s). */
    int (*connect)(tl_loop *loop, tl_stream *s, const struct sockaddr *addr,
                   socklen_t len) noexcept;
    /* The connect callback got 0 and s is open: start reading and sending
       what was asked for meanwhile. */
    void (*connected)(tl_loop *loop, tl_stream *s) noexcept;

    /* l was registered: start accepting. 0 or -errno. */
    int (*accept_start)(tl_loop *loop, tl_listener *l) noexcept;
    /* Accepting pauses (an accept error) / resumes / ends (l stops). */
    void (*accept_pause)(tl_loop *loop, tl_listener *l) noexcept;
    void (*accept_resume)(tl_loop *loop, tl_listener *l) noexcept;
    void (*accept_stop)(tl_loop *loop, tl_listener *l) noexcept;
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

/* stream.cc: the write queue's storage (its operations: below). */
void write_queue_free(tl_loop *loop) noexcept;
/* stream.cc: -EINVAL for an uninitialised stream or one bound to another
   loop, -EPIPE for one closing or closed, else 0. */
int check_stream(tl_loop *loop, const tl_stream *s) noexcept;
/* stream.cc: makes s an active handle of loop, its fd registered: 0 or
   -errno. */
int stream_bind(tl_loop *loop, tl_stream *s) noexcept;

/* connect.cc */
/* Undoes stream_bind on a stream that did nothing yet. */
void stream_unbind(tl_loop *loop, tl_stream *s) noexcept;
/* The connect ended with status (0 or -errno): its callback is due. */
void connect_ended(tl_loop *loop, tl_stream *s, int status) noexcept;
/* Shuts s down once a requested shutdown finds nothing left to hand to the
   kernel (called whenever wq_send becomes null on a stream with S_SHUT). */
void shutdown_check(tl_loop *loop, tl_stream *s) noexcept;
/* tl_stream_close: a connect or a shutdown not called back yet ends
   cancelled. */
void connect_shutdown_closing(tl_stream *s) noexcept;
/* The pending pass runs the connect callback first; run_connect returns the
   status of a failed connect that the reader gets after the writes' callbacks
   (run_connect_failed_reader), else 0. The shutdown callback runs once the
   writes queued before it have run theirs. Each of the last two returns the
   callbacks it ran. */
int run_connect(tl_loop *loop, tl_stream *s) noexcept;
uint64_t run_connect_failed_reader(tl_loop *loop, tl_stream *s, int status) noexcept;
uint64_t run_shutdown(tl_loop *loop, tl_stream *s) noexcept;

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

/* The write queue's operations. */

/* Arrays of up to this many buffers are copied by tl_stream_write: one into
 * the request itself, 2 to 4 into a block of the loop's. */
inline constexpr int kCopiedIov = 4;

/* A free block links to the next through its first iov_base. */
inline void iov_block_put(tl_loop *loop, struct iovec *block) noexcept {
    block[0].iov_base = loop->iov_free;
    loop->iov_free = block;
}

/* The buffer a request sends next, from where its sent bytes end. One
 * buffer is the request's own copy, advanced in place; a longer array is
 * read at (index, offset). */
/* Buffer i (>= index) of req, less what of it was sent. */
inline struct iovec unsent(const tl_write_req *req, int i) noexcept {
    if (req->iovcnt == 1) return req->bufs.one;
    struct iovec v = req->bufs.many.iov[i];
    if (i == req->index) {
        v.iov_base = static_cast<char *>(v.iov_base) + req->bufs.many.offset;
        v.iov_len -= req->bufs.many.offset;
    }
    return v;
}

inline size_t cur_left(const tl_write_req *req) noexcept {
    return req->index < req->iovcnt ? unsent(req, req->index).iov_len : 0;
}

inline void next_buf(tl_write_req *req) noexcept {
    ++req->index;
    if (req->iovcnt != 1) req->bufs.many.offset = 0;
}

/* n (<= cur_left) more bytes of the current buffer were sent. */
inline void consume(tl_write_req *req, size_t n) noexcept {
    if (req->iovcnt == 1) {
        req->bufs.one.iov_base = static_cast<char *>(req->bufs.one.iov_base) + n;
        req->bufs.one.iov_len -= n;
    } else {
        req->bufs.many.offset += n;
    }
    if (cur_left(req) == 0) next_buf(req);
}

#ifndef NDEBUG
/* Debug builds: a caller's array (more than kCopiedIov buffers) must stay
   unchanged until its callback. Its hash is kept in `status`, which is
   unused until the request completes, and compared whenever a send is
   prepared from it. */
inline uint32_t iov_hash(const struct iovec *iov, int n) noexcept {
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < n; ++i) {
        h = (h ^ reinterpret_cast<uintptr_t>(iov[i].iov_base)) * 1099511628211ull;
        h = (h ^ iov[i].iov_len) * 1099511628211ull;
    }
    return (uint32_t)(h ^ h >> 32);
}

inline void check_caller_iov(const tl_write_req *req) noexcept {
    if (req->iovcnt <= kCopiedIov) return;
    if ((uint32_t)req->status == iov_hash(req->bufs.many.iov, req->iovcnt)) return;
    std::fprintf(stderr,
                 "tickloop: tl_stream_write(): the array of %d buffers changed before its "
                 "write completed; arrays of more than %d buffers must stay valid and "
                 "unchanged until the callback\n",
                 req->iovcnt, kCopiedIov);
    std::abort();
}
#else
inline void check_caller_iov(const tl_write_req *) noexcept {}
#endif

/* A request's array is read only while it has bytes left: its block goes
 * back to the loop as soon as it completes. */
inline void release_bufs(tl_loop *loop, tl_write_req *req) noexcept {
    if (!(req->flags & WR_BLOCK)) return;
    req->flags &= ~WR_BLOCK;
    iov_block_put(loop, const_cast<struct iovec *>(req->bufs.many.iov));
}

/* Steps over empty buffers; false when none with bytes is left. */
inline bool skip_empty(tl_write_req *req) noexcept {
    while (req->index < req->iovcnt && cur_left(req) == 0) next_buf(req);
    return req->index < req->iovcnt;
}

/* Fills v with up to cap buffers of the queue from wq_send on, skipping
 * empty ones: of every queued request, or of wq_send alone (the completion
 * path sends one request at a time, so that a close knows which requests
 * the kernel holds). Returns their number; *total is their bytes, at most
 * `limit` (the last buffer is shortened to keep it). */
inline int gather(tl_stream *s, struct iovec *v, int cap, bool whole_queue, size_t limit,
                  size_t *total) noexcept {
    int n = 0;
    size_t bytes = 0;
    for (tl_write_req *req = s->wq_send; req && n < cap && bytes < limit; req = req->next) {
        check_caller_iov(req);
        for (int i = req->index; i < req->iovcnt && n < cap && bytes < limit; ++i) {
            struct iovec b = unsent(req, i);
            if (b.iov_len == 0) continue;
            if (b.iov_len > limit - bytes) b.iov_len = limit - bytes;
            v[n++] = b;
            bytes += b.iov_len;
        }
        if (!whole_queue) break;
    }
    *total = bytes;
    return n;
}

/* Bytes of req not yet sent. */
inline size_t req_bytes_left(const tl_write_req *req) noexcept {
    size_t n = 0;
    for (int i = req->index; i < req->iovcnt; ++i) n += unsent(req, i).iov_len;
    return n;
}

/* The requests a send of `total` bytes from wq_send on covers (the last one
   possibly in part). */
inline uintptr_t covered(const tl_stream *s, size_t total) noexcept {
    uintptr_t n = 0;
    for (const tl_write_req *q = s->wq_send; q && total > 0; q = q->next, ++n) {
        size_t left = req_bytes_left(q);
        total -= left < total ? left : total;
    }
    return n;
}

/* Completes wq_send with `status` and moves to the next request. */
inline void complete_send(tl_loop *loop, tl_stream *s, int status) noexcept {
    tl_write_req *req = s->wq_send;
    release_bufs(loop, req);
    req->status = status;
    s->wq_send = req->next;
    mark_pending(loop, s);
    if (!s->wq_send && (s->flags & S_SHUT)) shutdown_check(loop, s);
}

/* Every request from wq_send on fails with err (a send error, or a close). */
inline void fail_writes(tl_loop *loop, tl_stream *s, int err) noexcept {
    while (s->wq_send) {
        s->wq_bytes -= req_bytes_left(s->wq_send);
        complete_send(loop, s, err);
    }
}

/* n bytes of the queue were handed to the kernel: advance through the
 * requests, completing each that has none left. Requests of zero bytes
 * complete as soon as they are reached. */
inline void advance(tl_loop *loop, tl_stream *s, size_t n) noexcept {
    s->wq_bytes -= n;
    while (tl_write_req *req = s->wq_send) {
        while (req->index < req->iovcnt) {
            size_t left = cur_left(req);
            if (n < left) {
                consume(req, n);
                return;
            }
            n -= left;
            next_buf(req);
        }
        complete_send(loop, s, 0);
    }
}

} // namespace tl::detail

#endif /* TICKLOOP_LOOP_STREAM_CORE_H */
