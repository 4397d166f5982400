/* SPDX-License-Identifier: MIT */
/*
 * The completion path of streams (io_uring): the backend keeps a multishot
 * receive per reading stream into its ring of provided buffers and one
 * vectored send per writing stream; their completions arrive as ReadyEvents
 * with revents kCompletion (io/uring/streams.cc). Data received while a stream
 * does not read is parked, in order, in the ring's buffers until it reads
 * again.
 */
#include <cerrno>
#include <unistd.h>

#include "loop/stream/core.h"

using namespace tl::detail;

namespace {

/* Arms the multishot receive of a reading stream, unless one is armed or
   parked data must go first (the pending pass delivers it, then arms). */
void start_recv(tl_loop *loop, IoBackend *io, tl_stream *s) noexcept {
    const uint32_t state = s->flags & (S_READING | S_CLOSING | S_CONNECTING);
    if (state != S_READING || (stream_requests(s) & SC_RECV)) return;
    if (s->parked) {
        mark_pending(loop, s);
        return;
    }
    int r = io->completion()->stream_recv(s->fd);
    if (r < 0) {
        io_internal_error(loop, "io_uring receive", r);
        return;
    }
    stream_requests(s) |= SC_RECV;
}

void cancel_recv(tl_loop *loop, tl_stream *s) noexcept {
    if ((stream_requests(s) & (SC_RECV | SC_CANCEL)) != SC_RECV) return;
    ops(loop).stream_cancel(s->fd, REQ_RECV);
    stream_requests(s) |= SC_CANCEL;
}

uintptr_t send_reqs(tl_stream *s) noexcept {
    return stream_requests(s) >> SC_SEND_REQS_SHIFT;
}

/* Submits the next send of the queue: one in flight per stream, gathering
   the buffers of the first requests (up to kSendIovMax), so that the
   requests the callbacks of one dispatch queued leave in one send; a short
   send is continued from its completion. Empty requests complete here. */
void start_send(tl_loop *loop, IoBackend *io, tl_stream *s) noexcept {
    if ((stream_requests(s) & SC_SEND) || (s->flags & S_CONNECTING)) return;
    while (tl_write_req *req = s->wq_send) {
        if (s->error || (s->flags & S_CLOSING)) return;
        if (!skip_empty(req)) {
            complete_send(loop, s, 0);
            continue;
        }
        /* A completion's res is 32 bits: a send is at most 1 GiB. */
        struct iovec v[kSendIovMax];
        size_t total;
        int n = gather(s, v, kSendIovMax, true, (size_t)1 << 30, &total);
        int r = io->completion()->stream_send(s->fd, v, n);
        if (r < 0) {
            s->error = r;
            fail_writes(loop, s, r);
            return;
        }
        uintptr_t bits = stream_requests(s) & (((uintptr_t)1 << SC_SEND_REQS_SHIFT) - 1);
        stream_requests(s) = bits | SC_SEND | covered(s, total) << SC_SEND_REQS_SHIFT;
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
    if (!more) stream_requests(s) &= ~(SC_RECV | SC_CANCEL);
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

/* A closing stream's send completed: each request it covered gets its
   own result (0 if the kernel took all its bytes, else -ECANCELED, or the
   send's error); those behind it were cancelled by the close. A send the
   cancellation interrupted (-EINTR), or that found the socket full and was
   not retried (-EAGAIN, from an io-wq worker), was cancelled too: neither
   is the socket's error. */
void closed_send_completion(tl_loop *loop, tl_stream *s, const ReadyEvent &ev,
                            uintptr_t reqs) noexcept {
    bool interrupted = ev.res == -EINTR || ev.res == -EAGAIN;
    int failed = interrupted || ev.res >= 0 ? -ECANCELED : ev.res;
    size_t sent = ev.res > 0 ? (size_t)ev.res : 0;
    tl_write_req *q = s->wq_send;
    for (; q && reqs > 0; q = q->next, --reqs) {
        size_t left = req_bytes_left(q);
        q->status = sent >= left ? 0 : failed;
        sent -= left < sent ? left : sent;
        release_bufs(loop, q);
    }
    s->wq_send = nullptr;
    s->wq_bytes = 0;
    mark_pending(loop, s);
}

void send_completion(tl_loop *loop, tl_stream *s, const ReadyEvent &ev) noexcept {
    uintptr_t reqs = send_reqs(s);
    stream_requests(s) &= ((uintptr_t)1 << SC_SEND_REQS_SHIFT) - 1;
    stream_requests(s) &= ~SC_SEND;
    if (!s->wq_send) return;
    if (s->flags & S_CLOSING) {
        closed_send_completion(loop, s, ev, reqs);
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

int prepare_read(tl_loop *loop) noexcept {
    return ops(loop).stream_buffers();
}

int read_started(tl_loop *loop, tl_stream *s) noexcept {
    start_recv(loop, loop->io, s);
    return 0;
}

/* As on the readiness path, a write goes out from the pending pass of the
   iteration that queued it (before_callbacks): the requests the callbacks
   of one dispatch queue on a stream leave in one send. */
void write_queued(tl_loop *loop, tl_stream *s, bool) noexcept {
    if (s->error) { /* a send failed before: so does this write */
        fail_writes(loop, s, s->error);
        return;
    }
    if (s->flags & S_CONNECTING) return;
    s->flags |= S_FLUSH;
    mark_pending(loop, s);
}

void closing(tl_loop *loop, tl_stream *s) noexcept {
    cancel_recv(loop, s);
    drop_parked(loop, s);
    if (stream_requests(s) & SC_CONNECT) ops(loop).stream_cancel(s->fd, REQ_SEND);
    tl_write_req *sending = stream_requests(s) & SC_SEND ? s->wq_send : nullptr;
    if (!sending) {
        fail_writes(loop, s, -ECANCELED);
        return;
    }
    /* The kernel holds their buffers: the send is cancelled (a send waiting
       for room in the socket would wait for ever) and the requests it
       covers complete with its own result (send_completion); the rest are
       cancelled now. */
    ops(loop).stream_cancel(s->fd, REQ_SEND);
    tl_write_req *last = sending;
    for (uintptr_t k = send_reqs(s); k > 1 && last->next; --k) last = last->next;
    s->wq_send = last->next;
    fail_writes(loop, s, -ECANCELED);
    s->wq_send = sending;
}

int connect(tl_loop *loop, tl_stream *s, const struct sockaddr *addr, socklen_t len) noexcept {
    int r = ops(loop).stream_connect(s->fd, addr, len);
    if (r < 0) return r;
    stream_requests(s) |= SC_CONNECT;
    return 0;
}

void connected(tl_loop *loop, tl_stream *s) noexcept {
    start_recv(loop, loop->io, s);
    start_send(loop, loop->io, s);
}

/* The completion of a connect (it carries REQ_SEND). A closing stream's
   callback is already due with -ECANCELED. */
bool connect_completion(tl_loop *loop, tl_stream *s, const ReadyEvent &ev) noexcept {
    if (!(stream_requests(s) & SC_CONNECT)) return false;
    stream_requests(s) &= ~SC_CONNECT;
    if (!(s->flags & S_CLOSING)) connect_ended(loop, s, ev.res < 0 ? ev.res : 0);
    return true;
}

void event(tl_loop *loop, tl_stream *s, const ReadyEvent &ev) noexcept {
    if ((ev.revents & kCompletionKindMask) == REQ_RECV)
        recv_completion(loop, s, ev);
    else if (!connect_completion(loop, s, ev))
        send_completion(loop, s, ev);
}

void before_callbacks(tl_loop *loop, tl_stream *s) noexcept {
    if (s->flags & S_FLUSH) {
        s->flags &= ~S_FLUSH;
        /* Empty requests it completes run their callbacks in this pass. */
        s->flags |= S_PENDING;
        start_send(loop, loop->io, s);
        s->flags &= ~S_PENDING;
    }
    if (!s->parked) return;
    deliver_parked(loop, s);
    start_recv(loop, loop->io, s);
}

void after_callbacks(tl_loop *, tl_stream *) noexcept {}

int readd(tl_loop *loop, IoBackend *io, tl_stream *s) noexcept {
    /* The requests and buffers of the old backend are gone with it. */
    stream_requests(s) = 0;
    s->parked = 0;
    if ((s->flags & (S_READING | S_CLOSING)) == S_READING) {
        int r = io->completion()->stream_buffers();
        if (r < 0) return r;
        start_recv(loop, io, s);
    }
    if (s->wq_send && !(s->flags & S_CLOSING)) start_send(loop, io, s);
    return 0;
}

/* Listeners: a multishot accept per listener, one completion per socket. */
int accept_start(tl_loop *loop, tl_listener *l) noexcept {
    int r = ops(loop).listener_accept(l->fd);
    if (r == 0) l->flags |= L_ARMED;
    return r;
}

void cancel_accept(tl_loop *loop, tl_listener *l) noexcept {
    if ((l->flags & (L_ARMED | L_CANCEL)) != L_ARMED) return;
    ops(loop).stream_cancel(l->fd, REQ_ACCEPT);
    l->flags |= L_CANCEL;
}

void accept_resume(tl_loop *loop, tl_listener *l) noexcept {
    /* An accept still armed (its cancellation under way) is re-armed by its
       last completion. */
    if (l->flags & L_ARMED) return;
    int r = ops(loop).listener_accept(l->fd);
    if (r < 0) {
        io_internal_error(loop, "io_uring accept", r);
        return;
    }
    l->flags |= L_ARMED;
}

/* One completion of l's multishot accept. */
void listener_event(tl_loop *loop, tl_listener *l, const ReadyEvent &ev) noexcept {
    if (!(ev.cflags & IORING_CQE_F_MORE_BIT)) l->flags &= ~(L_ARMED | L_CANCEL);
    int res = ev.res;
    if (res >= 0) {
        /* One accepted while a pause's cancellation was on its way is
           still a connection for the callback. */
        if (!accepted(loop, l, res)) return; /* stopped (and maybe freed) */
    } else if (res != -ECANCELED && res != -EINTR && res != -ECONNABORTED && res != -EPROTO &&
               res != -EAGAIN) {
        accept_failed(loop, l, res);
        return;
    }
    if (!(l->flags & (L_ARMED | L_PAUSED))) accept_resume(loop, l);
}

int listener_readd(tl_loop *, IoBackend *io, tl_listener *l) noexcept {
    l->flags &= ~(L_ARMED | L_CANCEL);
    if (l->flags & L_PAUSED) return 0;
    int r = io->completion()->listener_accept(l->fd);
    if (r == 0) l->flags |= L_ARMED;
    return r;
}

/* The fd registry's calls: the completion of a stream's or a listener's
   request; a completion whose registration is gone (returns its buffer to
   the ring, closes the socket it accepted); and the requests given to a
   fresh backend (tl_loop_fork). */
void io_event(tl_loop *loop, tl_io *w, const ReadyEvent &ev) noexcept {
    if (w->flags & IO_LISTENER)
        listener_event(loop, listener_of(w), ev);
    else
        event(loop, stream_of(w), ev);
}

void io_stale(tl_loop *loop, const ReadyEvent &ev) noexcept {
    unsigned kind = ev.revents & kCompletionKindMask;
    if (kind == REQ_RECV && (ev.cflags & IORING_CQE_F_BUFFER_BIT))
        ops(loop).buffer_release(ev.cflags >> 16);
    if (kind == REQ_ACCEPT && ev.res >= 0) close(ev.res);
}

int io_readd(tl_loop *loop, IoBackend *io, tl_io *w) noexcept {
    if (w->flags & IO_LISTENER) return listener_readd(loop, io, listener_of(w));
    return readd(loop, io, stream_of(w));
}

} // namespace

namespace tl::detail {

const StreamPath kCompletionPath = {
    .io =
        {
            .completion = true,
            .event = io_event,
            .stale = io_stale,
            .readd = io_readd,
        },
    .name = "completion",
    .prepare_read = prepare_read,
    .read_started = read_started,
    .read_stopped = cancel_recv,
    .write_queued = write_queued,
    .closing = closing,
    .before_callbacks = before_callbacks,
    .after_callbacks = after_callbacks,
    .connect = connect,
    .connected = connected,
    .accept_start = accept_start,
    .accept_pause = cancel_accept,
    .accept_resume = accept_resume,
    .accept_stop = cancel_accept,
};

} // namespace tl::detail
