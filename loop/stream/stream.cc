/* SPDX-License-Identifier: MIT */
/*
 * loop/stream/: streams and listeners, whose receives, sends and accepts the
 * loop performs. stream.cc (here) is the core: handles, binding, the pending
 * pass, the tl_stream_* calls and the write queue's storage; core.h the
 * path table and the core's helpers, the queue's operations among them,
 * inline in the paths; readiness.cc and completion.cc the two paths the
 * core calls through its StreamPath table; listener.cc the listeners on
 * both. The folder stands on io/ and
 * calls down into it only. A write goes down one way: tl_stream_write
 * queues it here, and its path (readiness.cc: sendmsg; completion.cc: a
 * send request of io/uring/streams.cc) sends it, with the queue's inline
 * operations, and never calls back into this file.
 *
 * A stream or listener is registered in the loop's fd registry (io/io.cc)
 * through the tl_io embedded in it, flagged IO_STREAM or IO_LISTENER, so that
 * one fd carries at most one handle of any kind, stale events are filtered by
 * the registration's generation like any watcher's, and tl_loop_fork re-adds
 * it. io_dispatch hands its events to the loop's path, through the HandleIo
 * that begins the path's table (core.h), instead of a callback.
 *
 * The stream core: handles, binding, the pending pass and the tl_stream_*
 * calls. What differs between the two paths (tl_loop_stream_path) is in
 * readiness.cc and completion.cc, reached through the loop's
 * StreamPath table (core.h), chosen when its I/O backend is created.
 *
 * Callbacks. Read and accept callbacks run from the dispatch of the event
 * that produced them. Write callbacks and close callbacks run from
 * streams_run_pending, after the iteration's I/O dispatch, on both paths: a
 * write completes from the loop, never inside tl_stream_write (the pass
 * itself sends what the dispatch queued, then runs the callbacks), and the
 * callbacks of one stream run in the order its writes were queued. A stream
 * with callbacks due is on the loop's pending list (flag S_PENDING); the
 * wait does not block while the
 * list is non-empty, and a stream made pending by a callback of the pending
 * pass waits for the next iteration, so a write callback that writes again
 * cannot hold the loop.
 */
#include <cassert>
#include <cerrno>
#include <climits>
#include <cstring>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "loop/stream/core.h"
#include "loop/stream/stream.h"

using namespace tl::detail;

namespace {

const StreamPath &path(const tl_loop *loop) noexcept {
    return *loop->stream_path;
}

/* Default read buffers: 16 KiB takes a typical HTTP request (and a burst of
 * pipelined ones) in one callback; 256 of them are 4 MiB for the io_uring
 * ring, enough for 256 connections to have data in flight at once before a
 * receive waits for a buffer to come back. */
constexpr uint32_t kDefaultReadBufferSize = 16384;
constexpr uint32_t kDefaultReadBufferCount = 256;
constexpr uint32_t kMinReadBufferSize = 256;
constexpr uint32_t kMaxReadBufferSize = 16u << 20;
constexpr uint32_t kMaxReadBufferCount = 32768; /* buffer ids are 16 bits */

bool is_pow2(uint32_t v) noexcept {
    return v && !(v & (v - 1));
}

/* The write queue's storage (its operations are core.h's). */

/* Blocks are carved from chunks of this many, kept until the loop is freed:
 * after the most writes of 2-4 buffers ever queued at once, none allocates. */
constexpr size_t kBlocksPerChunk = 64;
struct IovChunk {
    IovChunk *next;
    struct iovec blocks[kBlocksPerChunk][kCopiedIov];
};

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

/* Appends req (iov, iovcnt: `total` bytes) to s's queue, its array stored;
   it becomes wq_send if nothing else is left to send. 0 or -ENOMEM, with
   nothing queued. */
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

tl_loop *owner(const tl_stream *s) noexcept {
    return io_owner(&s->io);
}

bool initialised(const tl_stream *s) noexcept {
    return (s->flags & S_MAGIC_MASK) == S_MAGIC;
}

/* Checks that fd is an open socket and makes it non-blocking: 0 or -errno. */
int prepare_fd(int fd) noexcept {
    if (fd < 0) return -EBADF;
    int type;
    socklen_t len = sizeof type;
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) < 0) return -errno;
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || (!(fl & O_NONBLOCK) && fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)) return -errno;
    return 0;
}

/* Makes s an active handle of loop: registers fd (non-blocking from now on).
 * A close of a stream whose fd cannot be registered (not open, say) binds it
 * without a registration (`need_fd` false), so its callback can still run.
 * The socket an accept callback is running for was made by accept4 with
 * SOCK_NONBLOCK a moment ago: it needs none of prepare_fd's syscalls. */
int bind(tl_loop *loop, tl_stream *s, bool need_fd) noexcept {
    if (s->flags & S_BOUND) return 0;
    const bool accepted = s->fd >= 0 && s->fd == loop->accepted_fd;
    int r = accepted ? 0 : prepare_fd(s->fd);
    if (r == 0) {
        s->io.fd = s->fd;
        r = io_register(loop, &s->io, IO_STREAM, accepted);
    }
    if (r == 0) {
        s->flags |= S_REG;
    } else {
        if (need_fd) return r;
        set_io_owner(&s->io, loop);
    }
    s->flags |= S_BOUND;
    bool unref = s->flags & S_UNREF;
    handle_activated(loop, unref);
    loop->stream_unref += unref;
    ++loop->stats.streams_active;
    return 0;
}

/* The close's last steps: the fd goes, then the callback (which may free s). */
void finish_close(tl_loop *loop, tl_stream *s) noexcept {
    if (s->flags & S_REG) io_unregister(loop, &s->io);
    stream_requests(s) = 0;
    if (s->fd >= 0) close(s->fd);
    handle_deactivated(loop, false); /* closing: counted as referenced */
    --loop->stats.streams_active;
    s->flags = S_MAGIC | S_CLOSED | (s->flags & S_UNREF);
    set_io_owner(&s->io, nullptr);
    listeners_resume(loop); /* a descriptor is free again */
    if (s->close_cb) s->close_cb(loop, s);
}

/* Runs the write callbacks of s that were due when its turn came, then the
 * close if it is due. */
uint64_t run_stream(tl_loop *loop, tl_stream *s) noexcept {
    uint64_t ran = 0;
    int failed = 0;
    if (s->flags & S_CONNECT_DONE) {
        ++ran;
        failed = run_connect(loop, s); /* may close s */
    }
    path(loop).before_callbacks(loop, s);
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
    if (failed) ran += run_connect_failed_reader(loop, s, failed);
    if ((s->flags & S_SHUT_DONE) && !s->wq_head) ran += run_shutdown(loop, s);
    if ((s->flags & S_CLOSING) && !s->wq_head && !(s->flags & S_PENDING)) {
        ++ran;
        finish_close(loop, s);
        return ran;
    }
    /* The callbacks may have freed s, but only after closing it (a closing
       stream is not freed before its close callback). */
    if (ran && !(s->flags & (S_CLOSING | S_CLOSED))) path(loop).after_callbacks(loop, s);
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
    loop->accepted_fd = -1;
    loop->stream_path = &kReadinessPath;
    listeners_configure(loop);
    return 0;
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

int check_stream(tl_loop *loop, const tl_stream *s) noexcept {
    if (!initialised(s)) return -EINVAL;
    if ((s->flags & S_BOUND) && owner(s) != loop) return -EINVAL;
    if (s->flags & (S_CLOSING | S_CLOSED)) return -EPIPE;
    return 0;
}

int stream_bind(tl_loop *loop, tl_stream *s) noexcept {
    return bind(loop, s, true);
}

void streams_close(tl_loop *loop) noexcept {
    std::free(loop->read_buf);
    loop->read_buf = nullptr;
    write_queue_free(loop);
}

void streams_choose_path(tl_loop *loop, IoBackend *io) noexcept {
    loop->stream_path = io->completion() ? &kCompletionPath : &kReadinessPath;
    loop->handle_io = &loop->stream_path->io;
}

uint64_t streams_run_pending(tl_loop *loop) noexcept {
    tl_stream *s = loop->stream_pending_head;
    if (!s) return 0;
    /* This pass runs the streams pending now; those a callback makes pending
       form the next pass's list, run after the next wait. Running them in
       this iteration instead lets a sender whose writes go out at once run
       ahead of a reader on the same loop until the reader's socket is full:
       conn-bulk with up to 8 passes per iteration used 4.1x the CPU of one
       pass, and 2 passes 0.99x. */
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
    r = path(loop).prepare_read(loop);
    if (r < 0) return r;
    r = bind(loop, s, true);
    if (r < 0) return r;
    s->read_cb = cb;
    if (s->flags & S_READING) return 0;
    s->flags |= S_READING;
    r = path(loop).read_started(loop, s);
    if (r < 0) s->flags &= ~S_READING;
    return r;
}

TL_API int tl_stream_read_stop(tl_loop *loop, tl_stream *s) {
    if (!loop || !s) return -EINVAL;
    TL_CHECK_LOOP_THREAD(loop);
    int r = check_stream(loop, s);
    if (r < 0) return r;
    if (!(s->flags & S_READING)) return 0;
    s->flags &= ~S_READING;
    path(loop).read_stopped(loop, s);
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
    if (s->flags & S_SHUT) return -EPIPE;
    /* Queued, then bound, then handed down to the path: the write goes one
       way and this file is not entered again. Only a stream not bound yet
       can fail to bind, and its queue held nothing: emptied again. */
    r = queue_write(loop, s, req, iov, iovcnt, total);
    if (r < 0) return r;
    req->cb = cb;
    r = bind(loop, s, true);
    if (r < 0) {
        assert(s->wq_head == req && s->wq_tail == req);
        release_bufs(loop, req);
        req->flags = 0;
        s->wq_head = s->wq_tail = s->wq_send = nullptr;
        s->wq_bytes = 0;
        return r;
    }
    path(loop).write_queued(loop, s, s->wq_send == req);
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
    connect_shutdown_closing(s);
    path(loop).closing(loop, s);
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

TL_API const char *tl_loop_stream_path(const tl_loop *loop) {
    if (!loop) return nullptr;
    return path(loop).name;
}

} // extern "C"
