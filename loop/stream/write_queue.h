/* SPDX-License-Identifier: MIT */
/*
 * A stream's write queue, as the paths run it: inline, so that a write goes
 * from tl_stream_write in stream.cc, which queues it, down to the path that
 * sends it, without a call back up. The queue: wq_head .. wq_tail in queued
 * order; the requests before wq_send are complete (status set, callback due), wq_send is the
 * first with bytes left. The requests are the caller's; the array of a
 * request of 1 to 4 buffers is copied (into the request, or a block of the
 * loop's that goes back when the request completes), so the caller's may be
 * on its stack; a longer array is read where the caller keeps it. A send
 * gathers the buffers it takes from here (gather) and reports the bytes the
 * kernel took (advance), on either path.
 */
#ifndef TICKLOOP_LOOP_STREAM_WRITE_QUEUE_H
#define TICKLOOP_LOOP_STREAM_WRITE_QUEUE_H

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sys/uio.h>

#include "loop/state.h"
#include "loop/stream/core.h"

namespace tl::detail {

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

#endif /* TICKLOOP_LOOP_STREAM_WRITE_QUEUE_H */
