/* SPDX-License-Identifier: MIT */
/*
 * Listeners: the loop accepts. On the readiness path a listener's fd is
 * polled for TL_READ and accept4() runs on readiness (up to
 * kAcceptsPerEvent sockets per event, readiness.cc); on the completion path
 * a multishot accept per listener posts one completion per socket
 * (completion.cc). This file holds what both share, reached through the
 * loop's StreamPath like the streams': the tl_listener_* calls, the
 * accepted socket's callback, and the pause: an accept error that would
 * repeat (out of descriptors or memory) pauses the listener instead of
 * spinning, until a stream of the loop closes or kAcceptRetryNs passes.
 */
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "loop/stream/core.h"

using namespace tl::detail;

namespace {

/* A paused listener is tried again after this long, or as soon as a stream
 * of the loop closes (which frees a descriptor). */
constexpr uint64_t kAcceptRetryNs = 50000000;

const StreamPath &path(const tl_loop *loop) noexcept {
    return *loop->stream_path;
}

/* A listener's accept callback: its io.priv[1]. */
tl_accept_cb accept_cb(const tl_listener *l) noexcept {
    return reinterpret_cast<tl_accept_cb>(l->io.priv[1]);
}
void set_accept_cb(tl_listener *l, tl_accept_cb cb) noexcept {
    l->io.priv[1] = reinterpret_cast<uintptr_t>(cb);
}

void on_accept_timer(tl_loop *loop, tl_timer *) {
    listeners_resume(loop);
}

} // namespace

namespace tl::detail {

bool accepted(tl_loop *loop, tl_listener *l, int fd) noexcept {
    const uint64_t tag = io_tag(l->io.fd, l->io.gen);
    ++loop->stats.accepts;
    loop->accepted_fd = fd;
    accept_cb(l)(loop, l, fd);
    loop->accepted_fd = -1;
    return io_current(loop, tag) != nullptr;
}

void accept_failed(tl_loop *loop, tl_listener *l, int err) noexcept {
    if (!(l->flags & L_PAUSED)) {
        l->flags |= L_PAUSED;
        path(loop).accept_pause(loop, l);
        if (loop->accepts_paused++ == 0)
            tl_timer_start(loop, &loop->accept_timer, kAcceptRetryNs, 0);
    }
    accept_cb(l)(loop, l, err);
}

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
        path(loop).accept_resume(loop, l);
    }
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
    l->flags = L_MAGIC | L_ACTIVE | unref;
    r = path(loop).accept_start(loop, l);
    if (r < 0) {
        io_unregister(loop, &l->io);
        l->flags = L_MAGIC | unref;
        return r;
    }
    l->data = data;
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
    path(loop).accept_stop(loop, l);
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
