/* SPDX-License-Identifier: MIT */
/*
 * The readiness path of streams (epoll; io_uring when the kernel lacks
 * buffer rings or multishot receive, or TICKLOOP_URING_STREAMS=readiness):
 * the backend polls the fd for what the stream needs now (TL_READ while
 * reading, TL_WRITE while a send is short of its data; nothing while idle,
 * so the backend forgets the fd and a hung-up idle socket cannot make the
 * loop spin); on readiness the loop recv()s into its one read buffer and
 * sendmsg()s the queued iovecs, MSG_NOSIGNAL.
 */
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <sys/socket.h>

#include "loop/stream/core.h"

using namespace tl::detail;

namespace {

/* What a stream receives per readiness event: recv() goes on while each call
 * fills the buffer (more is likely waiting, and one more call is cheaper than
 * one more iteration), up to kReadBytesPerEvent or kReadsPerEvent calls, so
 * that one busy stream holds the others back for about a millisecond at most
 * (4 MiB of copying, or 256 syscalls and callbacks; the default 16 KiB
 * buffers reach both bounds together).
 *
 * A reader must take at least what its peer adds to the socket per
 * iteration: a receive queue that grows reaches a zero window, and loopback
 * TCP then costs several times the CPU per byte. conn-bulk (two 256 KiB
 * writes in flight per end, 64 KiB reads) used 1.18x the CPU of the caller's
 * own recv()/send() at 4 reads per event, 0.30x at 8, 0.26x at 64; with
 * 1 MiB writes, 2 MiB per event gave 0.95x and 4 MiB 0.49x. */
constexpr size_t kReadBytesPerEvent = 4u << 20;
constexpr int kReadsPerEvent = 256;
/* accept4() calls per readiness event of a listener: more connections are
 * likely waiting, and one more call is cheaper than one more iteration;
 * bounded so that one busy listener cannot hold the others back. */
constexpr int kAcceptsPerEvent = 64;
/* iovecs per sendmsg: a stack array, gathered across queued requests. */
constexpr int kSendIov = 64;

/* Readiness the stream needs from the backend now (readiness path): write
 * interest while a request has bytes left. Once set, it is kept while sent
 * requests wait for their callbacks: a callback that writes again (a bulk
 * sender) then finds it set, and the pass that runs them drops it if none
 * did, so a stream of writes costs no epoll_ctl per write. A writable event
 * in between finds nothing to send and cannot spin: that pass runs in the
 * same iteration. A write the pending pass sends whole never sets it. */
unsigned wanted(const tl_stream *s) noexcept {
    if (s->flags & (S_CLOSING | S_CLOSED)) return 0;
    /* Connecting: writability ends the connect; nothing else yet. */
    if (s->flags & S_CONNECTING) return s->flags & S_CONNECT_DONE ? 0 : TL_WRITE;
    unsigned ev = 0;
    if (s->flags & S_READING) ev |= TL_READ;
    /* Writes the pending pass is about to send (S_FLUSH) need no
       writability yet: the pass asks for it if the socket is full. */
    if (s->error == 0 && !(s->flags & S_FLUSH) &&
        (s->wq_send || (s->wq_head && (s->io.events & TL_WRITE))))
        ev |= TL_WRITE;
    return ev;
}

void update_interest(tl_loop *loop, tl_stream *s) noexcept {
    if (!(s->flags & S_REG)) return;
    unsigned events = wanted(s);
    int r = io_interest(loop, &s->io, events);
    if (r < 0) io_internal_error(loop, "stream poll update", r);
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

/* Readiness path: receives into the loop's buffer and hands each chunk to
 * the read callback. */
void do_reads(tl_loop *loop, tl_stream *s) noexcept {
    size_t taken = 0;
    for (int round = 0; round < kReadsPerEvent && taken < kReadBytesPerEvent; ++round) {
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
            taken += (size_t)n;
            continue;
        }
        s->flags &= ~S_READING; /* EOF or error: reading stops */
        s->read_cb(loop, s, nullptr, n);
        return;
    }
}

int prepare_read(tl_loop *loop) noexcept {
    if (loop->read_buf) return 0;
    loop->read_buf = std::malloc(loop->read_buffer_size);
    return loop->read_buf ? 0 : -ENOMEM;
}

int read_started(tl_loop *loop, tl_stream *s) noexcept {
    return io_interest(loop, &s->io, wanted(s));
}

/* A write goes out from the pending pass of the iteration that queued it
   (before_callbacks), not from tl_stream_write: the writes that the
   callbacks of one dispatch queue on a stream leave as one sendmsg. An RPC
   client answered 16 times in one read callback sends its 16 requests in
   one syscall instead of 16, as the completion path does with its one send
   per enter. */
void write_queued(tl_loop *loop, tl_stream *s, bool first) noexcept {
    if (s->error) { /* a send failed before: so does this write */
        fail_writes(loop, s, s->error);
        return;
    }
    if (!first || (s->flags & S_CONNECTING)) return;
    s->flags |= S_FLUSH;
    mark_pending(loop, s);
}

/* The pending pass reached s: the writes queued since the last pass go
   out; write interest if the socket could not take them all. */
void send_queued(tl_loop *loop, tl_stream *s) noexcept {
    if (!(s->flags & S_FLUSH)) return;
    s->flags &= ~S_FLUSH;
    if ((s->flags & (S_CLOSING | S_CONNECTING)) || !s->wq_send) return;
    /* The callbacks this send makes due run in this pass (the core counts
       them after this returns): s is not put on the next pass's list, which
       would make the next wait non-blocking for nothing. */
    s->flags |= S_PENDING;
    flush_writes(loop, s);
    s->flags &= ~S_PENDING;
    if (s->wq_send) update_interest(loop, s);
}

void closing(tl_loop *loop, tl_stream *s) noexcept {
    fail_writes(loop, s, -ECANCELED);
    update_interest(loop, s);
}

/* Errors of connect(2) that are the peer's or the network's answer: the
   callback gets them, as it gets them from a connect under way. */
bool answer_of_peer(int err) noexcept {
    switch (err) {
    case ECONNREFUSED: /* no listener (TCP, or a UNIX socket file) */
    case ENOENT:       /* no UNIX socket at that path */
    case EAGAIN:       /* a UNIX listener's backlog is full */
    case ENETUNREACH:
    case EHOSTUNREACH:
    case ETIMEDOUT:
    case ECONNRESET:
    case ECONNABORTED:
        return true;
    default:
        return false;
    }
}

int connect(tl_loop *loop, tl_stream *s, const struct sockaddr *addr, socklen_t len) noexcept {
    int r;
    do r = ::connect(s->fd, addr, len);
    while (r < 0 && errno == EINTR);
    if (r == 0 || answer_of_peer(errno)) {
        connect_ended(loop, s, r == 0 ? 0 : -errno); /* UNIX connects at once */
        return 0;
    }
    if (errno != EINPROGRESS) return -errno;
    r = io_interest(loop, &s->io, wanted(s));
    if (r < 0) connect_ended(loop, s, r);
    return 0;
}

/* Writability (or an error) of a connecting socket: the connect ended. */
void connect_event(tl_loop *loop, tl_stream *s) noexcept {
    int err = 0;
    socklen_t len = sizeof err;
    if (getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0) err = errno;
    if (err == EINPROGRESS || err == EALREADY) return; /* not yet */
    connect_ended(loop, s, -err);
    update_interest(loop, s);
}

void connected(tl_loop *loop, tl_stream *s) noexcept {
    if (s->wq_send) flush_writes(loop, s);
    update_interest(loop, s);
}

void event(tl_loop *loop, tl_stream *s, const ReadyEvent &ev) noexcept {
    if (s->flags & (S_CLOSING | S_CLOSED)) return;
    unsigned revents = ev.revents;
    if (s->flags & S_CONNECTING) {
        if (!(s->flags & S_CONNECT_DONE) && (revents & (TL_WRITE | TL_ERROR | TL_HUP)))
            connect_event(loop, s);
        return;
    }
    if (s->wq_send && (revents & (TL_WRITE | TL_ERROR | TL_HUP))) flush_writes(loop, s);
    if ((s->flags & S_READING) && (revents & (TL_READ | TL_ERROR | TL_HUP))) do_reads(loop, s);
    update_interest(loop, s);
}

/* Listeners: the fd is polled for TL_READ while accepting. */
int accept_start(tl_loop *loop, tl_listener *l) noexcept {
    return io_interest(loop, &l->io, TL_READ);
}

void accept_pause(tl_loop *loop, tl_listener *l) noexcept {
    io_interest(loop, &l->io, 0);
}

void accept_resume(tl_loop *loop, tl_listener *l) noexcept {
    int r = io_interest(loop, &l->io, TL_READ);
    if (r < 0) io_internal_error(loop, "listener poll", r);
}

void accept_stop(tl_loop *, tl_listener *) noexcept {}

/* The listener's fd is readable: accept up to kAcceptsPerEvent sockets. */
void listener_event(tl_loop *loop, tl_listener *l, const ReadyEvent &) noexcept {
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
            accept_failed(loop, l, -err);
            return;
        }
        if (!accepted(loop, l, fd)) return;
    }
}

/* The fd registry's calls: an event of a stream's or a listener's
   registration is readiness. Completions and their re-arming are the
   completion path's: none reach this one. */
void io_event(tl_loop *loop, tl_io *w, const ReadyEvent &ev) noexcept {
    if (w->flags & IO_LISTENER)
        listener_event(loop, listener_of(w), ev);
    else
        event(loop, stream_of(w), ev);
}

void io_stale(tl_loop *, const ReadyEvent &) noexcept {}

int io_readd(tl_loop *, IoBackend *, tl_io *) noexcept {
    return 0;
}

} // namespace

namespace tl::detail {

const StreamPath kReadinessPath = {
    .io =
        {
            .completion = false,
            .event = io_event,
            .stale = io_stale,
            .readd = io_readd,
        },
    .name = "readiness",
    .prepare_read = prepare_read,
    .read_started = read_started,
    .read_stopped = update_interest,
    .write_queued = write_queued,
    .closing = closing,
    .before_callbacks = send_queued,
    .after_callbacks = update_interest,
    .connect = connect,
    .connected = connected,
    .accept_start = accept_start,
    .accept_pause = accept_pause,
    .accept_resume = accept_resume,
    .accept_stop = accept_stop,
};

} // namespace tl::detail
