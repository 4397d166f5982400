/* SPDX-License-Identifier: MIT */
/*
 * Listeners: the loop accepts. On the readiness path a listener's fd is
 * polled for TL_READ and accept4() runs on readiness (up to
 * kAcceptsPerEvent sockets per event); on the completion path a multishot
 * accept per listener posts one completion per socket. Either way an
 * accept error that would repeat (out of descriptors or memory) pauses the
 * listener instead of spinning, until a stream of the loop closes or
 * kAcceptRetryNs passes.
 */
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "loop/stream/core.h"

using namespace tl::detail;

namespace {

/* accept4() calls per readiness event of a listener: more connections are
 * likely waiting, and one more call is cheaper than one more iteration;
 * bounded so that one busy listener cannot hold the others back. */
constexpr int kAcceptsPerEvent = 64;
/* A paused listener is tried again after this long, or as soon as a stream
 * of the loop closes (which frees a descriptor). */
constexpr uint64_t kAcceptRetryNs = 50000000;

/* A listener's accept callback: its io.priv[1]. */
tl_accept_cb accept_cb(const tl_listener *l) noexcept {
    return reinterpret_cast<tl_accept_cb>(l->io.priv[1]);
}
void set_accept_cb(tl_listener *l, tl_accept_cb cb) noexcept {
    l->io.priv[1] = reinterpret_cast<uintptr_t>(cb);
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

void on_accept_timer(tl_loop *loop, tl_timer *) {
    listeners_resume(loop);
}

/* Readiness path: the listener's fd is readable. */
void accept_ready(tl_loop *loop, tl_listener *l) noexcept {
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
        loop->accepted_fd = fd;
        accept_cb(l)(loop, l, fd);
        loop->accepted_fd = -1;
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
        loop->accepted_fd = res;
        accept_cb(l)(loop, l, res);
        loop->accepted_fd = -1;
        if (!io_current(loop, tag)) return; /* stopped (and maybe freed) */
    } else if (res != -ECANCELED && res != -EINTR && res != -ECONNABORTED && res != -EPROTO &&
               res != -EAGAIN) {
        pause_listener(loop, l);
        accept_cb(l)(loop, l, res);
        return;
    }
    if (!(l->flags & (L_ARMED | L_PAUSED))) arm_listener(loop, l);
}

} // namespace

namespace tl::detail {

void listeners_configure(tl_loop *loop) noexcept {
    tl_timer_init(&loop->accept_timer, on_accept_timer, nullptr);
    tl_timer_set_ref(loop, &loop->accept_timer, 0);
}

/* Walks the registry: rare, and bounded by its size. */
void listeners_resume(tl_loop *loop) noexcept {
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

void listener_event(tl_loop *loop, tl_listener *l, const ReadyEvent &ev) noexcept {
    if (ev.revents & kCompletion)
        accept_completion(loop, l, ev);
    else
        accept_ready(loop, l);
}

int listener_readd(tl_loop *, IoBackend *io, tl_listener *l) noexcept {
    l->flags &= ~(L_ARMED | L_CANCEL);
    if (l->flags & L_PAUSED) return 0;
    int r = io->completion()->listener_accept(l->fd);
    if (r == 0) l->flags |= L_ARMED;
    return r;
}

} // namespace tl::detail

extern "C" {

TL_API int tl_listener_start(tl_loop *loop, tl_listener *l, int fd, tl_accept_cb cb, void *data) {
    if (!loop || !l || !cb) return -EINVAL;
    TL_CHECK_LOOP_THREAD(loop);
    /* Started: its registration is in a loop's table (checked without
       trusting the memory more than that). */
    if ((l->flags & (L_MAGIC_MASK | L_ACTIVE)) == (L_MAGIC | L_ACTIVE)) {
        tl_loop *other = io_owner(&l->io);
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
    set_accept_cb(l, cb);
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
    if (io_owner(&l->io) != loop) return -EINVAL;
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
    if (active && io_owner(&l->io) != loop) return -EINVAL;
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

} // extern "C"
