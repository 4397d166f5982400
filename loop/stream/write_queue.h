/* SPDX-License-Identifier: MIT */
/*
 * A stream's write queue: wq_head .. wq_tail in queued order; the requests
 * before wq_send are complete (status set, callback due), wq_send is the
 * first with bytes left. The requests are the caller's; the array of a
 * request of 1 to 4 buffers is copied (into the request, or a block of the
 * loop's that goes back when the request completes), so the caller's may be
 * on its stack; a longer array is read where the caller keeps it. A send
 * gathers the buffers it takes from here (gather) and reports the bytes the
 * kernel took (advance), on either path.
 */
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "loop/stream/core.h"

using namespace tl::detail;

namespace {

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

/* The buffer a request sends next, from where its sent bytes end. One
 * buffer is the request's own copy, advanced in place; a longer array is
 * read at (index, offset). */
/* Buffer i (>= index) of req, less what of it was sent. */
struct iovec unsent(const tl_write_req *req, int i) noexcept {
    if (req->iovcnt == 1) return req->bufs.one;
    struct iovec v = req->bufs.many.iov[i];
    if (i == req->index) {
        v.iov_base = static_cast<char *>(v.iov_base) + req->bufs.many.offset;
        v.iov_len -= req->bufs.many.offset;
    }
    return v;
}

size_t cur_left(const tl_write_req *req) noexcept {
    return req->index < req->iovcnt ? unsent(req, req->index).iov_len : 0;
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

} // namespace

namespace tl::detail {

/* A request's array is read only while it has bytes left: its block goes
 * back to the loop as soon as it completes. */
void release_bufs(tl_loop *loop, tl_write_req *req) noexcept {
    if (!(req->flags & WR_BLOCK)) return;
    req->flags &= ~WR_BLOCK;
    iov_block_put(loop, const_cast<struct iovec *>(req->bufs.many.iov));
}

/* Steps over empty buffers; false when none with bytes is left. */
bool skip_empty(tl_write_req *req) noexcept {
    while (req->index < req->iovcnt && cur_left(req) == 0) next_buf(req);
    return req->index < req->iovcnt;
}

namespace {

/* Stores the request's array: copied when it has up to kCopiedIov buffers
 * (so the caller's may be on its stack), else the caller's own. */
int set_bufs(tl_loop *loop, tl_write_req *req, const struct iovec *iov, int iovcnt) noexcept {
    req->flags = WR_QUEUED;
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
    req->flags |= WR_BLOCK;
    return 0;
}

} // namespace

int queue_write(tl_loop *loop, tl_stream *s, tl_write_req *req, const struct iovec *iov, int iovcnt,
                size_t total) noexcept {
    int r = set_bufs(loop, req, iov, iovcnt);
    if (r < 0) return r;
    req->stream = s;
    req->next = nullptr;
    if (s->wq_tail)
        s->wq_tail->next = req;
    else
        s->wq_head = req;
    s->wq_tail = req;
    s->wq_bytes += total;
    if (!s->wq_send) s->wq_send = req;
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
static size_t req_bytes_left(const tl_write_req *req) noexcept {
    size_t n = 0;
    for (int i = req->index; i < req->iovcnt; ++i) n += unsent(req, i).iov_len;
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

void write_queue_free(tl_loop *loop) noexcept {
    for (auto *chunk = static_cast<IovChunk *>(loop->iov_chunks); chunk;) {
        IovChunk *next = chunk->next;
        std::free(chunk);
        chunk = next;
    }
    loop->iov_chunks = nullptr;
    loop->iov_free = nullptr;
}

} // namespace tl::detail
