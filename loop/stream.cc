/* SPDX-License-Identifier: MIT */
/*
 * Streams and listeners: the loop performs the receives, sends and accepts.
 *
 * A stream or listener is registered in the loop's fd registry (io.cc) through
 * the tl_io embedded in it, flagged IO_STREAM or IO_LISTENER, so that one fd
 * carries at most one handle of any kind, stale events are filtered by the
 * registration's generation like any watcher's, and tl_loop_fork re-adds it.
 * io_dispatch hands its events to stream_event() here instead of a callback.
 *
 * Two paths (tl_loop_stream_path):
 * - readiness (epoll; io_uring when the kernel lacks buffer rings or
 *   multishot receive, or TICKLOOP_URING_STREAMS=readiness): the backend
 *   polls the fd for what the stream needs now (TL_READ while reading,
 *   TL_WRITE while a send is short of its data; nothing while idle, so the
 *   backend forgets the fd and a hung-up idle socket cannot make the loop
 *   spin); on readiness the loop recv()s into its one read buffer and
 *   sendmsg()s the queued iovecs, MSG_NOSIGNAL;
 * - completion (io_uring): the backend keeps a multishot receive per reading
 *   stream into its ring of provided buffers, a multishot accept per
 *   listener, and one send per writing stream; their completions arrive here
 *   as ReadyEvents with revents kCompletion (uring.cc).
 *
 * Callbacks. Read and accept callbacks run from the dispatch of the event
 * that produced them. Write callbacks and close callbacks run from
 * streams_run_pending, after the iteration's I/O dispatch, on both paths: a
 * write that the kernel took at once inside tl_stream_write still completes
 * from the loop, never inside the call, and the callbacks of one stream run
 * in the order its writes were queued. A stream with callbacks due is on the
 * loop's pending list (flag S_PENDING); the wait does not block while the
 * list is non-empty, and a stream made pending by a callback of the pending
 * pass waits for the next iteration, so a write callback that writes again
 * cannot hold the loop.
 *
 * Write queue: wq_head .. wq_tail in queued order; the requests before
 * wq_send are complete (status set, callback due), wq_send is the first
 * with bytes left. The requests are the caller's; the array of a request of
 * 1 to 4 buffers is copied (into the request, or a block of the loop's that
 * goes back when the request completes), so the caller's may be on its
 * stack. Each send is one sendmsg of the buffers gathered from the queue
 * (its iovec array on the stack; io_uring copies it into its SQE's slot).
 */
#include <cerrno>
#include <climits>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "handle_flags.h"
#include "io.h"
#include "io_backend.h"
#include "io_event.h"
#include "loop.h"
#include "stream.h"
#include "verify.h"

using namespace tl::detail;

namespace {

/* io_uring's CQE flags, without its headers (built without liburing, the
   completion path never runs). */
constexpr uint32_t IORING_CQE_F_BUFFER_BIT = 1u << 0;
constexpr uint32_t IORING_CQE_F_MORE_BIT = 1u << 1;

/* tl_stream::flags: a marker in the high 16 bits (tl_stream_init), state in
 * the low ones. */
enum : uint32_t {
    S_MAGIC = 0x57e10000u,
    S_MAGIC_MASK = 0xffff0000u,
    S_BOUND = 1u << 0,   /* an active handle of io.priv[0]'s loop        */
    S_REG = 1u << 1,     /* in the fd registry                          */
    S_READING = 1u << 2, /* tl_stream_read_start, no EOF or error since */
    S_CLOSING = 1u << 3, /* tl_stream_close called, close callback due  */
    S_CLOSED = 1u << 4,  /* closed: fd gone, callback run                */
    S_PENDING = 1u << 5, /* on the loop's pending list                  */
    S_UNREF = 1u << 6,   /* tl_stream_set_ref(.., 0); a closing stream still
                            counts as referenced until its close callback */
};

/* A stream's requests in the completion backend, in io.priv[1]. */
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
    L_PAUSED = 1u << 1, /* after an accept error, until resume_accepts */
    L_UNREF = 1u << 2,
    L_ARMED = 1u << 3,  /* completion path: a multishot accept is armed */
    L_CANCEL = 1u << 4, /* and its cancellation is on the way           */
};

/* tl_write_req::flags. */
enum : uint32_t {
    REQ_QUEUED = 1u << 0,
    REQ_BLOCK = 1u << 1, /* bufs.many.iov is a block of the loop's copies */
};

/* Arrays of up to this many buffers are copied by tl_stream_write: one into
 * the request itself, 2 to 4 into a block of the loop's. */
constexpr int kCopiedIov = 4;
/* Blocks are carved from chunks of this many, kept until the loop is freed:
 * after the most writes of 2-4 buffers ever queued at once, none allocates. */
constexpr size_t kBlocksPerChunk = 64;
struct IovChunk {
    IovChunk *next;
    struct iovec blocks[kBlocksPerChunk][kCopiedIov];
};

/* Default read buffers: 16 KiB takes a typical HTTP request (and a burst of
 * pipelined ones) in one callback; 256 of them are 4 MiB for the io_uring
 * ring, enough for 256 connections to have data in flight at once before a
 * receive waits for a buffer to come back. */
constexpr uint32_t kDefaultReadBufferSize = 16384;
constexpr uint32_t kDefaultReadBufferCount = 256;
constexpr uint32_t kMinReadBufferSize = 256;
constexpr uint32_t kMaxReadBufferSize = 16u << 20;
constexpr uint32_t kMaxReadBufferCount = 32768; /* buffer ids are 16 bits */

/* recv() calls per readiness event while each fills the buffer: more data is
 * likely waiting, and one more call is cheaper than one more iteration;
 * bounded so that one busy stream cannot hold the others back. */
constexpr int kReadsPerEvent = 4;
/* accept4() calls per readiness event of a listener, for the same reason. */
constexpr int kAcceptsPerEvent = 64;
/* iovecs per sendmsg: a stack array, gathered across queued requests. */
constexpr int kSendIov = 64;
/* A paused listener is tried again after this long, or as soon as a stream
 * of the loop closes (which frees a descriptor). */
constexpr uint64_t kAcceptRetryNs = 50000000;

bool is_pow2(uint32_t v) noexcept {
    return v && !(v & (v - 1));
}

tl_stream *stream_of(tl_io *w) noexcept {
    return reinterpret_cast<tl_stream *>(reinterpret_cast<char *>(w) - offsetof(tl_stream, io));
}
tl_listener *listener_of(tl_io *w) noexcept {
    return reinterpret_cast<tl_listener *>(reinterpret_cast<char *>(w) - offsetof(tl_listener, io));
}

tl_loop *owner(const tl_stream *s) noexcept {
    return reinterpret_cast<tl_loop *>(s->io.priv[0]);
}

bool initialised(const tl_stream *s) noexcept {
    return (s->flags & S_MAGIC_MASK) == S_MAGIC;
}

/* Common checks: -EINVAL for an uninitialised stream or one bound to another
 * loop, -EPIPE for one closing or closed. */
int check_stream(tl_loop *loop, const tl_stream *s) noexcept {
    if (!initialised(s)) return -EINVAL;
    if ((s->flags & S_BOUND) && owner(s) != loop) return -EINVAL;
    if (s->flags & (S_CLOSING | S_CLOSED)) return -EPIPE;
    return 0;
}

void mark_pending(tl_loop *loop, tl_stream *s) noexcept {
    if (s->flags & S_PENDING) return;
    s->flags |= S_PENDING;
    s->pending_next = nullptr;
    if (loop->stream_pending_tail)
        loop->stream_pending_tail->pending_next = s;
    else
        loop->stream_pending_head = s;
    loop->stream_pending_tail = s;
}

/* Makes s an active handle of loop: registers fd (non-blocking from now on).
 * A close of a stream whose fd cannot be registered (not open, say) binds it
 * without a registration (`need_fd` false), so its callback can still run. */
int bind(tl_loop *loop, tl_stream *s, bool need_fd) noexcept {
    if (s->flags & S_BOUND) return 0;
    int r = 0;
    int type;
    socklen_t len = sizeof type;
    if (s->fd < 0)
        r = -EBADF;
    else if (getsockopt(s->fd, SOL_SOCKET, SO_TYPE, &type, &len) < 0)
        r = -errno;
    if (r == 0) {
        int fl = fcntl(s->fd, F_GETFL);
        if (fl < 0 || (!(fl & O_NONBLOCK) && fcntl(s->fd, F_SETFL, fl | O_NONBLOCK) < 0))
            r = -errno;
    }
    if (r == 0) {
        s->io.fd = s->fd;
        r = io_register(loop, &s->io, IO_STREAM);
    }
    if (r == 0) {
        s->flags |= S_REG;
    } else {
        if (need_fd) return r;
        s->io.priv[0] = reinterpret_cast<uintptr_t>(loop);
    }
    s->flags |= S_BOUND;
    bool unref = s->flags & S_UNREF;
    handle_activated(loop, unref);
    loop->stream_unref += unref;
    ++loop->stats.streams_active;
    return 0;
}

/* ---- the write queue ----------------------------------------------------- */

/* A free block links to the next through its first iov_base. */
void iov_block_put(tl_loop *loop, struct iovec *block) noexcept {
    block[0].iov_base = loop->iov_free;
    loop->iov_free = block;
}

struct iovec *iov_block_get(tl_loop *loop) noexcept {
    if (!loop->iov_free) {
        auto *chunk = static_cast<IovChunk *>(std::malloc(sizeof(IovChunk)));
        if (!chunk) return nullptr;
        chunk->next = static_cast<IovChunk *>(loop->iov_chunks);
        loop->iov_chunks = chunk;
        for (auto &block : chunk->blocks) iov_block_put(loop, block);
    }
    struct iovec *block = loop->iov_free;
    loop->iov_free = static_cast<struct iovec *>(block[0].iov_base);
    return block;
}

/* A request's array is read only while it has bytes left: its block goes
 * back to the loop as soon as it completes. */
void release_bufs(tl_loop *loop, tl_write_req *req) noexcept {
    if (!(req->flags & REQ_BLOCK)) return;
    req->flags &= ~REQ_BLOCK;
    iov_block_put(loop, const_cast<struct iovec *>(req->bufs.many.iov));
}

/* The buffer a request sends next, from where its sent bytes end. One
 * buffer is the request's own copy, advanced in place; a longer array is
 * read at (index, offset). */
size_t cur_left(const tl_write_req *req) noexcept {
    if (req->index >= req->iovcnt) return 0;
    if (req->iovcnt == 1) return req->bufs.one.iov_len;
    return req->bufs.many.iov[req->index].iov_len - req->bufs.many.offset;
}

void next_buf(tl_write_req *req) noexcept {
    ++req->index;
    if (req->iovcnt != 1) req->bufs.many.offset = 0;
}

/* n (<= cur_left) more bytes of the current buffer were sent. */
void consume(tl_write_req *req, size_t n) noexcept {
    if (req->iovcnt == 1) {
        req->bufs.one.iov_base = static_cast<char *>(req->bufs.one.iov_base) + n;
        req->bufs.one.iov_len -= n;
    } else {
        req->bufs.many.offset += n;
    }
    if (cur_left(req) == 0) next_buf(req);
}

/* Steps over empty buffers; false when none with bytes is left. */
bool skip_empty(tl_write_req *req) noexcept {
    while (req->index < req->iovcnt && cur_left(req) == 0) next_buf(req);
    return req->index < req->iovcnt;
}

#ifndef NDEBUG
/* Debug builds: a caller's array (more than kCopiedIov buffers) must stay
   unchanged until its callback. Its hash is kept in `status`, which is
   unused until the request completes, and compared whenever a send is
   prepared from it. */
uint32_t iov_hash(const struct iovec *iov, int n) noexcept {
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < n; ++i) {
        h = (h ^ reinterpret_cast<uintptr_t>(iov[i].iov_base)) * 1099511628211ull;
        h = (h ^ iov[i].iov_len) * 1099511628211ull;
    }
    return (uint32_t)(h ^ h >> 32);
}

void check_caller_iov(const tl_write_req *req) noexcept {
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
void check_caller_iov(const tl_write_req *) noexcept {}
#endif

/* Stores the request's array: copied when it has up to kCopiedIov buffers
 * (so the caller's may be on its stack), else the caller's own. */
int set_bufs(tl_loop *loop, tl_write_req *req, const struct iovec *iov, int iovcnt) noexcept {
    req->flags = REQ_QUEUED;
    req->iovcnt = iovcnt;
    req->index = 0;
    req->status = 0;
    if (iovcnt == 1) {
        req->bufs.one = iov[0];
        return 0;
    }
    req->bufs.many.offset = 0;
    if (iovcnt > kCopiedIov || iovcnt == 0) {
        req->bufs.many.iov = iov;
#ifndef NDEBUG
        if (iovcnt) req->status = (int)iov_hash(iov, iovcnt);
#endif
        return 0;
    }
    struct iovec *block = iov_block_get(loop);
    if (!block) return -ENOMEM;
    std::memcpy(block, iov, (size_t)iovcnt * sizeof *iov);
    req->bufs.many.iov = block;
    req->flags |= REQ_BLOCK;
    return 0;
}

/* Fills v with up to cap buffers of the queue from wq_send on, skipping
 * empty ones: of every queued request, or of wq_send alone (the completion
 * path sends one request at a time, so that a close knows which requests
 * the kernel holds). Returns their number; *total is their bytes, at most
 * `limit` (the last buffer is shortened to keep it). */
int gather(tl_stream *s, struct iovec *v, int cap, bool whole_queue, size_t limit,
           size_t *total) noexcept {
    int n = 0;
    size_t bytes = 0;
    for (tl_write_req *req = s->wq_send; req && n < cap && bytes < limit; req = req->next) {
        check_caller_iov(req);
        bool first = req == s->wq_send;
        int i = first ? req->index : 0;
        for (; i < req->iovcnt && n < cap && bytes < limit; ++i) {
            size_t len, off = 0;
            char *base;
            if (req->iovcnt == 1) {
                base = static_cast<char *>(req->bufs.one.iov_base);
                len = req->bufs.one.iov_len;
            } else {
                off = first && i == req->index ? req->bufs.many.offset : 0;
                base = static_cast<char *>(req->bufs.many.iov[i].iov_base) + off;
                len = req->bufs.many.iov[i].iov_len - off;
            }
            if (len == 0) continue;
            if (len > limit - bytes) len = limit - bytes;
            v[n].iov_base = base;
            v[n].iov_len = len;
            bytes += len;
            ++n;
        }
        if (!whole_queue) break;
    }
    *total = bytes;
    return n;
}

/* Readiness the stream needs from the backend now (readiness path). */
unsigned wanted(const tl_stream *s) noexcept {
    if (s->flags & (S_CLOSING | S_CLOSED)) return 0;
    unsigned ev = 0;
    if (s->flags & S_READING) ev |= TL_READ;
    if (s->wq_send && s->error == 0) ev |= TL_WRITE;
    return ev;
}

void update_interest(tl_loop *loop, tl_stream *s) noexcept {
    if (loop->streams_completion || !(s->flags & S_REG)) return;
    int r = io_interest(loop, &s->io, wanted(s));
    if (r < 0) io_internal_error(loop, "stream poll update", r);
}

size_t req_bytes_left(const tl_write_req *req) noexcept {
    size_t n = cur_left(req);
    for (int i = req->index + 1; i < req->iovcnt; ++i) n += req->bufs.many.iov[i].iov_len;
    return n;
}

/* Completes wq_send with `status` and moves to the next request. */
void complete_send(tl_loop *loop, tl_stream *s, int status) noexcept {
    tl_write_req *req = s->wq_send;
    release_bufs(loop, req);
    req->status = status;
    s->wq_send = req->next;
    mark_pending(loop, s);
}

/* Every request from wq_send on fails with err (a send error, or a close). */
void fail_writes(tl_loop *loop, tl_stream *s, int err) noexcept {
    while (s->wq_send) {
        s->wq_bytes -= req_bytes_left(s->wq_send);
        complete_send(loop, s, err);
    }
}

/* n bytes of the queue were handed to the kernel: advance through the
 * requests, completing each that has none left. Requests of zero bytes
 * complete as soon as they are reached. */
void advance(tl_loop *loop, tl_stream *s, size_t n) noexcept {
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

/* Readiness path: sends what is queued until the kernel's buffer is full. */
void flush_writes(tl_loop *loop, tl_stream *s) noexcept {
    while (s->wq_send && s->error == 0) {
        struct iovec v[kSendIov];
        size_t total;
        int n = gather(s, v, kSendIov, true, SSIZE_MAX, &total);
        if (n == 0) { /* only empty requests left */
            advance(loop, s, 0);
            return;
        }
        struct msghdr msg;
        std::memset(&msg, 0, sizeof msg);
        msg.msg_iov = v;
        msg.msg_iovlen = (size_t)n;
        ssize_t r = sendmsg(s->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (r < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) return;
            s->error = -errno;
            fail_writes(loop, s, s->error);
            return;
        }
        advance(loop, s, (size_t)r);
        if ((size_t)r < total) return; /* short: the socket buffer is full */
    }
}

/* ---- the completion path (io_uring) -------------------------------------- */

/* The backend's completion operations: only on the completion path
   (loop->streams_completion), where the backend has them. */
CompletionOps &ops(tl_loop *loop) noexcept {
    return *loop->io->completion();
}

uintptr_t &sc(tl_stream *s) noexcept {
    return s->io.priv[1];
}

/* Arms the multishot receive of a reading stream, unless one is armed or
   parked data must go first (the pending pass delivers it, then arms). */
void start_recv(tl_loop *loop, IoBackend *io, tl_stream *s) noexcept {
    if ((s->flags & (S_READING | S_CLOSING)) != S_READING || (sc(s) & SC_RECV)) return;
    if (s->parked) {
        mark_pending(loop, s);
        return;
    }
    int r = io->completion()->stream_recv(s->fd);
    if (r < 0) {
        io_internal_error(loop, "io_uring receive", r);
        return;
    }
    sc(s) |= SC_RECV;
}

void cancel_recv(tl_loop *loop, tl_stream *s) noexcept {
    if ((sc(s) & (SC_RECV | SC_CANCEL)) != SC_RECV) return;
    ops(loop).stream_cancel(s->fd, REQ_RECV);
    sc(s) |= SC_CANCEL;
}

/* Submits the next send of the queue (one in flight per stream; a short
   send is continued from its completion). Empty requests complete here. */
void start_send(tl_loop *loop, IoBackend *io, tl_stream *s) noexcept {
    if (sc(s) & SC_SEND) return;
    while (tl_write_req *req = s->wq_send) {
        if (s->error || (s->flags & S_CLOSING)) return;
        if (!skip_empty(req)) {
            complete_send(loop, s, 0);
            continue;
        }
        /* A completion's res is 32 bits: a send is at most 1 GiB. */
        struct iovec v[kSendIovMax];
        size_t total;
        int n = gather(s, v, kSendIovMax, false, (size_t)1 << 30, &total);
        int r = io->completion()->stream_send(s->fd, v, n);
        if (r < 0) {
            s->error = r;
            fail_writes(loop, s, r);
            return;
        }
        sc(s) |= SC_SEND;
        return;
    }
}

/* Returns every parked buffer of s to the ring. */
void drop_parked(tl_loop *loop, tl_stream *s) noexcept {
    uint32_t bid, len;
    while (ops(loop).buffer_unpark(&s->parked, &bid, &len)) ops(loop).buffer_release(bid);
}

/* Delivers the data parked while s did not read, oldest first. */
void deliver_parked(tl_loop *loop, tl_stream *s) noexcept {
    uint32_t bid, len;
    while ((s->flags & (S_READING | S_CLOSING)) == S_READING &&
           ops(loop).buffer_unpark(&s->parked, &bid, &len)) {
        ++loop->stats.stream_reads;
        s->read_cb(loop, s, ops(loop).buffer(bid), (ptrdiff_t)len);
        ops(loop).buffer_release(bid);
    }
}

void recv_completion(tl_loop *loop, tl_stream *s, const ReadyEvent &ev) noexcept {
    const bool more = ev.cflags & IORING_CQE_F_MORE_BIT;
    if (!more) sc(s) &= ~(SC_RECV | SC_CANCEL);
    if (ev.cflags & IORING_CQE_F_BUFFER_BIT) {
        uint32_t bid = ev.cflags >> 16;
        if (s->flags & S_CLOSING) {
            ops(loop).buffer_release(bid);
        } else if (!(s->flags & S_READING) || s->parked) {
            /* Received before a read_stop took effect, or behind data still
               parked: kept, in order, for the reader. */
            ops(loop).buffer_park(&s->parked, bid, (uint32_t)ev.res);
            if (s->flags & S_READING) mark_pending(loop, s);
        } else {
            ++loop->stats.stream_reads;
            s->read_cb(loop, s, ops(loop).buffer(bid), ev.res);
            ops(loop).buffer_release(bid);
        }
    } else if (ev.res == -ENOBUFS) {
        /* The ring ran dry; the data waits in the socket. The buffers the
           other streams' callbacks give back in this dispatch refill the
           ring before the re-armed receive reaches the kernel. */
        ++loop->stats.buffer_ring_exhausted;
    } else if (ev.res == -EINTR || ev.res == -EAGAIN) {
        /* Interrupted inside the kernel (a cancellation racing the
           receive, say): not the socket's error; re-armed below. */
    } else if (ev.res != -ECANCELED && (s->flags & (S_READING | S_CLOSING)) == S_READING) {
        if (s->parked) {
            /* EOF or an error behind parked data: the parked data goes
               first; the re-armed receive reports the end again. */
            mark_pending(loop, s);
        } else {
            s->flags &= ~S_READING; /* EOF (res 0) or -errno */
            s->read_cb(loop, s, nullptr, ev.res);
        }
        return;
    }
    if (!more) start_recv(loop, loop->io, s);
}

void send_completion(tl_loop *loop, tl_stream *s, const ReadyEvent &ev) noexcept {
    sc(s) &= ~SC_SEND;
    tl_write_req *req = s->wq_send;
    if (!req) return;
    if (s->flags & S_CLOSING) {
        /* The requests behind it were cancelled by the close. A send the
           cancellation interrupted (-EINTR) was cancelled too. */
        int status = ev.res == -EINTR ? -ECANCELED : ev.res < 0 ? ev.res : 0;
        if (ev.res >= 0) {
            advance(loop, s, (size_t)ev.res);
            if (s->wq_send == req) status = -ECANCELED; /* bytes left */
        }
        release_bufs(loop, req);
        req->status = status;
        s->wq_send = nullptr;
        s->wq_bytes = 0;
        mark_pending(loop, s);
        return;
    }
    if (ev.res == -EINTR || ev.res == -EAGAIN) {
        start_send(loop, loop->io, s); /* interrupted, not failed: again */
        return;
    }
    if (ev.res < 0) {
        s->error = ev.res;
        fail_writes(loop, s, ev.res);
        return;
    }
    advance(loop, s, (size_t)ev.res);
    start_send(loop, loop->io, s);
}

/* Readiness path: receives into the loop's buffer and hands each chunk to
 * the read callback. */
void do_reads(tl_loop *loop, tl_stream *s) noexcept {
    for (int round = 0; round < kReadsPerEvent; ++round) {
        if ((s->flags & (S_READING | S_CLOSING)) != S_READING) return;
        ssize_t n = recv(s->fd, loop->read_buf, loop->read_buffer_size, MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EINTR) {
                --round;
                continue;
            }
            if (errno == EAGAIN || errno == EWOULDBLOCK) return;
            n = -errno;
        }
        if (n > 0) {
            ++loop->stats.stream_reads;
            s->read_cb(loop, s, loop->read_buf, n);
            if ((size_t)n < loop->read_buffer_size) return;
            continue;
        }
        s->flags &= ~S_READING; /* EOF or error: reading stops */
        s->read_cb(loop, s, nullptr, n);
        return;
    }
}

/* ---- listeners ---------------------------------------------------------- */

tl_accept_cb accept_cb(const tl_listener *l) noexcept {
    return reinterpret_cast<tl_accept_cb>(l->io.priv[1]);
}

void cancel_accept(tl_loop *loop, tl_listener *l) noexcept {
    if ((l->flags & (L_ARMED | L_CANCEL)) != L_ARMED) return;
    ops(loop).stream_cancel(l->fd, REQ_ACCEPT);
    l->flags |= L_CANCEL;
}

void pause_listener(tl_loop *loop, tl_listener *l) noexcept {
    if (l->flags & L_PAUSED) return;
    l->flags |= L_PAUSED;
    if (loop->streams_completion)
        cancel_accept(loop, l);
    else
        io_interest(loop, &l->io, 0);
    if (loop->accepts_paused++ == 0) tl_timer_start(loop, &loop->accept_timer, kAcceptRetryNs, 0);
}

void arm_listener(tl_loop *loop, tl_listener *l) noexcept {
    if (loop->streams_completion) {
        /* An accept still armed (its cancellation under way) is re-armed
           by its last completion. */
        if (l->flags & L_ARMED) return;
        int r = ops(loop).listener_accept(l->fd);
        if (r < 0) {
            io_internal_error(loop, "io_uring accept", r);
            return;
        }
        l->flags |= L_ARMED;
        return;
    }
    int r = io_interest(loop, &l->io, TL_READ);
    if (r < 0) io_internal_error(loop, "listener poll", r);
}

/* Gives every paused listener its readiness back (a stream closed, or the
 * retry timer fired). Walks the registry: rare, and bounded by its size. */
void resume_accepts(tl_loop *loop) noexcept {
    if (loop->accepts_paused == 0) return;
    loop->accepts_paused = 0;
    tl_timer_stop(loop, &loop->accept_timer);
    for (size_t fd = 0; fd < loop->io_slots_size; ++fd) {
        tl_io *w = loop->io_slots[fd].watcher;
        if (!w || !(w->flags & IO_LISTENER)) continue;
        tl_listener *l = listener_of(w);
        if (!(l->flags & L_PAUSED)) continue;
        l->flags &= ~L_PAUSED;
        arm_listener(loop, l);
    }
}

void on_accept_timer(tl_loop *loop, tl_timer *) {
    resume_accepts(loop);
}

void listener_event(tl_loop *loop, tl_listener *l) noexcept {
    const uint64_t tag = io_tag(l->io.fd, l->io.gen);
    for (int i = 0; i < kAcceptsPerEvent; ++i) {
        if (l->flags & L_PAUSED) return;
        int fd = accept4(l->fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            int err = errno;
            /* The connection went away before it was accepted, or a signal:
               try the next one. */
            if (err == EINTR || err == ECONNABORTED || err == EPROTO) continue;
            if (err == EAGAIN || err == EWOULDBLOCK) return;
            /* Out of descriptors or memory (or a socket that no longer
               listens): the connection stays in the backlog and the fd stays
               readable, so accepting pauses instead of spinning. */
            pause_listener(loop, l);
            accept_cb(l)(loop, l, -err);
            return;
        }
        ++loop->stats.accepts;
        accept_cb(l)(loop, l, fd);
        /* The callback may have stopped l and freed it. */
        if (!io_current(loop, tag)) return;
    }
}

/* Completion path: one CQE of l's multishot accept. */
void accept_completion(tl_loop *loop, tl_listener *l, const ReadyEvent &ev) noexcept {
    const uint64_t tag = io_tag(l->io.fd, l->io.gen);
    if (!(ev.cflags & IORING_CQE_F_MORE_BIT)) l->flags &= ~(L_ARMED | L_CANCEL);
    int res = ev.res;
    if (res >= 0) {
        if (l->flags & L_PAUSED) {
            /* Accepted while the pause's cancellation was on its way:
               still a connection for the callback. */
        }
        ++loop->stats.accepts;
        accept_cb(l)(loop, l, res);
        if (!io_current(loop, tag)) return; /* stopped (and maybe freed) */
    } else if (res != -ECANCELED && res != -EINTR && res != -ECONNABORTED && res != -EPROTO &&
               res != -EAGAIN) {
        pause_listener(loop, l);
        accept_cb(l)(loop, l, res);
        return;
    }
    if (!(l->flags & (L_ARMED | L_PAUSED))) arm_listener(loop, l);
}

/* ---- the pending pass ---------------------------------------------------- */

/* The close's last steps: the fd goes, then the callback (which may free s). */
void finish_close(tl_loop *loop, tl_stream *s) noexcept {
    if (s->flags & S_REG) io_unregister(loop, &s->io);
    sc(s) = 0;
    if (s->fd >= 0) close(s->fd);
    handle_deactivated(loop, false); /* closing: counted as referenced */
    --loop->stats.streams_active;
    s->flags = S_MAGIC | S_CLOSED | (s->flags & S_UNREF);
    s->io.priv[0] = 0;
    resume_accepts(loop); /* a descriptor is free again */
    if (s->close_cb) s->close_cb(loop, s);
}

/* Runs the write callbacks of s that were due when its turn came, then the
 * close if it is due. */
uint64_t run_stream(tl_loop *loop, tl_stream *s) noexcept {
    uint64_t ran = 0;
    if (loop->streams_completion && s->parked) {
        deliver_parked(loop, s);
        start_recv(loop, loop->io, s);
    }
    size_t due = 0;
    for (tl_write_req *req = s->wq_head; req != s->wq_send; req = req->next) ++due;
    for (; due > 0; --due) {
        tl_write_req *req = s->wq_head;
        s->wq_head = req->next;
        if (!s->wq_head) s->wq_tail = nullptr;
        req->next = nullptr;
        req->flags = 0;
        ++loop->stats.stream_writes;
        ++ran;
        req->cb(loop, req, req->status);
    }
    if ((s->flags & S_CLOSING) && !s->wq_head && !(s->flags & S_PENDING)) {
        ++ran;
        finish_close(loop, s);
    }
    return ran;
}

} // namespace

namespace tl::detail {

int streams_configure(tl_loop *loop, const tl_loop_options *opts) noexcept {
    uint32_t size = opts->read_buffer_size ? opts->read_buffer_size : kDefaultReadBufferSize;
    uint32_t count = opts->read_buffer_count ? opts->read_buffer_count : kDefaultReadBufferCount;
    if (!is_pow2(size) || size < kMinReadBufferSize || size > kMaxReadBufferSize) return -EINVAL;
    if (!is_pow2(count) || count > kMaxReadBufferCount) return -EINVAL;
    loop->read_buffer_size = size;
    loop->read_buffer_count = count;
    tl_timer_init(&loop->accept_timer, on_accept_timer, nullptr);
    tl_timer_set_ref(loop, &loop->accept_timer, 0);
    return 0;
}

void streams_close(tl_loop *loop) noexcept {
    std::free(loop->read_buf);
    loop->read_buf = nullptr;
    for (auto *chunk = static_cast<IovChunk *>(loop->iov_chunks); chunk;) {
        IovChunk *next = chunk->next;
        std::free(chunk);
        chunk = next;
    }
    loop->iov_chunks = nullptr;
    loop->iov_free = nullptr;
}

void stream_event(tl_loop *loop, tl_io *w, const ReadyEvent &ev) noexcept {
    if (ev.revents & kCompletion) {
        switch (ev.revents & kCompletionKindMask) {
        case REQ_RECV:
            recv_completion(loop, stream_of(w), ev);
            break;
        case REQ_SEND:
            send_completion(loop, stream_of(w), ev);
            break;
        case REQ_ACCEPT:
            accept_completion(loop, listener_of(w), ev);
            break;
        }
        return;
    }
    if (w->flags & IO_LISTENER) {
        listener_event(loop, listener_of(w));
        return;
    }
    tl_stream *s = stream_of(w);
    if (s->flags & (S_CLOSING | S_CLOSED)) return;
    unsigned revents = ev.revents;
    if (s->wq_send && (revents & (TL_WRITE | TL_ERROR | TL_HUP))) flush_writes(loop, s);
    if ((s->flags & S_READING) && (revents & (TL_READ | TL_ERROR | TL_HUP))) do_reads(loop, s);
    update_interest(loop, s);
}

void stream_stale(tl_loop *loop, const ReadyEvent &ev) noexcept {
    unsigned kind = ev.revents & kCompletionKindMask;
    if (kind == REQ_RECV && (ev.cflags & IORING_CQE_F_BUFFER_BIT))
        ops(loop).buffer_release(ev.cflags >> 16);
    if (kind == REQ_ACCEPT && ev.res >= 0) close(ev.res);
}

int stream_readd(tl_loop *loop, IoBackend *io, tl_io *w) noexcept {
    if (w->flags & IO_LISTENER) {
        tl_listener *l = listener_of(w);
        l->flags &= ~(L_ARMED | L_CANCEL);
        if (l->flags & L_PAUSED) return 0;
        int r = io->completion()->listener_accept(l->fd);
        if (r == 0) l->flags |= L_ARMED;
        return r;
    }
    tl_stream *s = stream_of(w);
    /* The requests and buffers of the old backend are gone with it. */
    sc(s) = 0;
    s->parked = 0;
    if ((s->flags & (S_READING | S_CLOSING)) == S_READING) {
        int r = io->completion()->stream_buffers();
        if (r < 0) return r;
        start_recv(loop, io, s);
    }
    if (s->wq_send && !(s->flags & S_CLOSING)) start_send(loop, io, s);
    return 0;
}

uint64_t streams_run_pending(tl_loop *loop) noexcept {
    tl_stream *s = loop->stream_pending_head;
    if (!s) return 0;
    /* This pass runs the streams pending now; those a callback makes pending
       form the next pass's list. */
    loop->stream_pending_head = loop->stream_pending_tail = nullptr;
    uint64_t ran = 0;
    while (s) {
        tl_stream *next = s->pending_next;
        s->pending_next = nullptr;
        s->flags &= ~S_PENDING;
        ran += run_stream(loop, s); /* may free s (close callback) */
        s = next;
    }
    return ran;
}

} // namespace tl::detail

extern "C" {

TL_API void tl_stream_init(tl_stream *s, int fd, void *data) {
    if (!s) return;
    std::memset(s, 0, sizeof *s);
    s->fd = fd;
    s->data = data;
    s->flags = S_MAGIC;
    s->io.fd = fd;
}

TL_API int tl_stream_read_start(tl_loop *loop, tl_stream *s, tl_read_cb cb) {
    if (!loop || !s || !cb) return -EINVAL;
    TL_CHECK_LOOP_THREAD(loop);
    int r = check_stream(loop, s);
    if (r < 0) return r;
    if (loop->streams_completion) {
        r = ops(loop).stream_buffers();
        if (r < 0) return r;
    } else if (!loop->read_buf) {
        loop->read_buf = std::malloc(loop->read_buffer_size);
        if (!loop->read_buf) return -ENOMEM;
    }
    r = bind(loop, s, true);
    if (r < 0) return r;
    s->read_cb = cb;
    if (s->flags & S_READING) return 0;
    s->flags |= S_READING;
    if (loop->streams_completion) {
        start_recv(loop, loop->io, s);
    } else {
        r = io_interest(loop, &s->io, wanted(s));
        if (r < 0) {
            s->flags &= ~S_READING;
            return r;
        }
    }
    return 0;
}

TL_API int tl_stream_read_stop(tl_loop *loop, tl_stream *s) {
    if (!loop || !s) return -EINVAL;
    TL_CHECK_LOOP_THREAD(loop);
    int r = check_stream(loop, s);
    if (r < 0) return r;
    if (!(s->flags & S_READING)) return 0;
    s->flags &= ~S_READING;
    if (loop->streams_completion)
        cancel_recv(loop, s);
    else
        update_interest(loop, s);
    return 0;
}

TL_API int tl_stream_write(tl_loop *loop, tl_stream *s, tl_write_req *req, const struct iovec *iov,
                           int iovcnt, tl_write_cb cb) {
    if (!loop || !s || !req || !cb) return -EINVAL;
    if (iovcnt < 0 || iovcnt > IOV_MAX || (iovcnt > 0 && !iov)) return -EINVAL;
    TL_CHECK_LOOP_THREAD(loop);
    int r = check_stream(loop, s);
    if (r < 0) return r;
    size_t total = 0;
    for (int i = 0; i < iovcnt; ++i) {
        if (iov[i].iov_len > SSIZE_MAX - total) return -EINVAL;
        total += iov[i].iov_len;
    }
    /* A request queued again before its callback would loop the queue.
       Refused where it can be seen in O(1) without reading the request
       (which may be fresh memory): the queue's first, sending or last
       request, which covers reusing the request just written. */
    if (req == s->wq_head || req == s->wq_send || req == s->wq_tail) return -EBUSY;
    r = bind(loop, s, true);
    if (r < 0) return r;
    r = set_bufs(loop, req, iov, iovcnt);
    if (r < 0) return r;
    req->stream = s;
    req->cb = cb;
    req->next = nullptr;
    if (s->wq_tail)
        s->wq_tail->next = req;
    else
        s->wq_head = req;
    s->wq_tail = req;
    s->wq_bytes += total;
    bool first = !s->wq_send;
    if (first) s->wq_send = req;
    if (s->error) {
        fail_writes(loop, s, s->error);
        return 0;
    }
    if (loop->streams_completion) {
        start_send(loop, loop->io, s);
    } else if (first) {
        flush_writes(loop, s);
        update_interest(loop, s);
    }
    return 0;
}

TL_API size_t tl_stream_write_queue_size(const tl_stream *s) {
    return s && initialised(s) ? (size_t)s->wq_bytes : 0;
}

TL_API int tl_stream_close(tl_loop *loop, tl_stream *s, tl_close_cb cb) {
    if (!loop || !s) return -EINVAL;
    TL_CHECK_LOOP_THREAD(loop);
    int r = check_stream(loop, s);
    if (r < 0) return r;
    bind(loop, s, false);
    /* Until its close callback has run, a closing stream keeps the loop
       alive, referenced or not (libuv counts closing handles too): every run
       mode then reaches the iteration that completes it. */
    if (s->flags & S_UNREF) {
        handle_ref_changed(loop, true, false);
        --loop->stream_unref;
    }
    s->flags = (s->flags & ~S_READING) | S_CLOSING;
    s->close_cb = cb;
    if (loop->streams_completion) {
        cancel_recv(loop, s);
        drop_parked(loop, s);
        tl_write_req *sending = sc(s) & SC_SEND ? s->wq_send : nullptr;
        if (sending) {
            /* The kernel holds its buffer: the send is cancelled (a send
               waiting for room in the socket would wait for ever) and
               completes with its own result (send_completion); the rest
               are cancelled now. */
            ops(loop).stream_cancel(s->fd, REQ_SEND);
            s->wq_send = sending->next;
            fail_writes(loop, s, -ECANCELED);
            s->wq_send = sending;
            mark_pending(loop, s);
            return 0;
        }
    }
    fail_writes(loop, s, -ECANCELED);
    update_interest(loop, s);
    mark_pending(loop, s);
    return 0;
}

TL_API int tl_stream_set_ref(tl_loop *loop, tl_stream *s, int ref) {
    if (!loop || !s || !initialised(s)) return -EINVAL;
    TL_CHECK_LOOP_THREAD(loop);
    bool bound = s->flags & S_BOUND;
    if (bound && owner(s) != loop) return -EINVAL;
    bool was = s->flags & S_UNREF;
    if (ref)
        s->flags &= ~S_UNREF;
    else
        s->flags |= S_UNREF;
    /* A closing stream counts as referenced whatever its flag says. */
    if (bound && !(s->flags & S_CLOSING) && was != !ref) {
        handle_ref_changed(loop, was, !ref);
        loop->stream_unref += ref ? (uint64_t)-1 : 1;
    }
    return 0;
}

TL_API int tl_listener_start(tl_loop *loop, tl_listener *l, int fd, tl_accept_cb cb, void *data) {
    if (!loop || !l || !cb) return -EINVAL;
    TL_CHECK_LOOP_THREAD(loop);
    /* Started: its registration is in a loop's table (checked without
       trusting the memory more than that). */
    if ((l->flags & (L_MAGIC_MASK | L_ACTIVE)) == (L_MAGIC | L_ACTIVE)) {
        tl_loop *other = reinterpret_cast<tl_loop *>(l->io.priv[0]);
        if (other != loop) return -EBUSY;
        if (l->io.fd >= 0 && (size_t)l->io.fd < loop->io_slots_size &&
            loop->io_slots[l->io.fd].watcher == &l->io)
            return -EBUSY;
    }
    if (fd < 0) return -EBADF;
    int listening = 0;
    socklen_t len = sizeof listening;
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) < 0) return -errno;
    if (!listening) return -EINVAL;
    uint32_t unref = (l->flags & L_MAGIC_MASK) == L_MAGIC ? l->flags & L_UNREF : 0;
    std::memset(&l->io, 0, sizeof l->io);
    l->io.fd = fd;
    l->io.priv[1] = reinterpret_cast<uintptr_t>(cb);
    int r = io_register(loop, &l->io, IO_LISTENER);
    if (r < 0) return r;
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0 && !(fl & O_NONBLOCK)) fcntl(fd, F_SETFL, fl | O_NONBLOCK);
    l->fd = fd;
    if (loop->streams_completion)
        r = ops(loop).listener_accept(fd);
    else
        r = io_interest(loop, &l->io, TL_READ);
    if (r < 0) {
        io_unregister(loop, &l->io);
        return r;
    }
    l->data = data;
    l->flags = L_MAGIC | L_ACTIVE | unref | (loop->streams_completion ? (uint32_t)L_ARMED : 0u);
    handle_activated(loop, unref);
    loop->stream_unref += unref != 0;
    ++loop->stats.listeners_active;
    return 0;
}

TL_API int tl_listener_stop(tl_loop *loop, tl_listener *l) {
    if (!loop || !l) return -EINVAL;
    TL_CHECK_LOOP_THREAD(loop);
    if ((l->flags & (L_MAGIC_MASK | L_ACTIVE)) != (L_MAGIC | L_ACTIVE)) return 0;
    if (reinterpret_cast<tl_loop *>(l->io.priv[0]) != loop) return -EINVAL;
    if (l->flags & L_PAUSED) {
        if (--loop->accepts_paused == 0) tl_timer_stop(loop, &loop->accept_timer);
    }
    if (loop->streams_completion) cancel_accept(loop, l);
    io_unregister(loop, &l->io);
    /* The listening socket is the caller's to close now: no kernel request
       may keep its port bound past that close. */
    loop->io->release_fd(l->fd);
    bool unref = l->flags & L_UNREF;
    handle_deactivated(loop, unref);
    loop->stream_unref -= unref;
    --loop->stats.listeners_active;
    l->flags = L_MAGIC | (l->flags & L_UNREF);
    return 0;
}

TL_API int tl_listener_set_ref(tl_loop *loop, tl_listener *l, int ref) {
    if (!loop || !l) return -EINVAL;
    TL_CHECK_LOOP_THREAD(loop);
    bool active = (l->flags & (L_MAGIC_MASK | L_ACTIVE)) == (L_MAGIC | L_ACTIVE);
    if (active && reinterpret_cast<tl_loop *>(l->io.priv[0]) != loop) return -EINVAL;
    if ((l->flags & L_MAGIC_MASK) != L_MAGIC) l->flags = L_MAGIC;
    bool was = l->flags & L_UNREF;
    if (ref)
        l->flags &= ~L_UNREF;
    else
        l->flags |= L_UNREF;
    if (active && was != !ref) {
        handle_ref_changed(loop, was, !ref);
        loop->stream_unref += ref ? (uint64_t)-1 : 1;
    }
    return 0;
}

TL_API const char *tl_loop_stream_path(const tl_loop *loop) {
    if (!loop) return nullptr;
    return loop->streams_completion ? "completion" : "readiness";
}

} // extern "C"
