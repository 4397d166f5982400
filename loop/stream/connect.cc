/* SPDX-License-Identifier: MIT */
/*
 * Client streams: tl_stream_connect and tl_stream_shutdown, and the core's
 * side of both. The paths connect (StreamPath::connect and connected);
 * this file keeps the state, shuts down and runs the callbacks.
 *
 * A connect binds the stream at once (an active handle from then on), marks
 * it S_CONNECTING, and its path connects. Reads and writes asked for
 * meanwhile wait: the paths start nothing on a connecting stream. When the
 * connect ends, connect_ended stores its status in s->error (the failure
 * every later write gets) and makes the stream pending; the pending pass
 * runs the connect callback before any other callback of the stream, then
 * (on success, the stream still open) the path starts what was asked for,
 * or (on failure) the queued writes complete with the error and then an
 * active reader gets it.
 *
 * A shutdown marks the stream S_SHUT (writes refused from then on) and
 * starts once the write queue has nothing left to hand to the kernel
 * (shutdown_check, called by the write queue whenever wq_send becomes
 * null, and here); its callback runs after those of the writes queued
 * before it. A close makes both callbacks due with -ECANCELED, and the
 * pending pass runs them before the close callback.
 */
#include <cerrno>
#include <cstddef>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "loop/stream/core.h"

using namespace tl::detail;

namespace {

/* The shortest address of the family (a UNIX address needs one byte of
   path: the unnamed address cannot be connected to). */
socklen_t min_addrlen(sa_family_t family) noexcept {
    switch (family) {
    case AF_INET:
        return sizeof(struct sockaddr_in);
    case AF_INET6:
        return sizeof(struct sockaddr_in6);
    case AF_UNIX:
        return offsetof(struct sockaddr_un, sun_path) + 1;
    default:
        return sizeof(sa_family_t);
    }
}

/* -EAFNOSUPPORT when addr's family is not the socket's; the socket's own
   errors (-EBADF, -ENOTSOCK) as they come. */
int check_family(int fd, sa_family_t family) noexcept {
    if (fd < 0) return -EBADF;
    int domain;
    socklen_t len = sizeof domain;
    if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) < 0) return -errno;
    return domain == family ? 0 : -EAFNOSUPPORT;
}

tl_connect_cb connect_cb(const tl_stream *s) noexcept {
    return reinterpret_cast<tl_connect_cb>(s->io.cb);
}
tl_shutdown_cb shutdown_cb(const tl_stream *s) noexcept {
    return reinterpret_cast<tl_shutdown_cb>(s->io.data);
}

/* A stream given to tl_stream_init connected has a peer. */
bool has_peer(int fd) noexcept {
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    return fd >= 0 && getpeername(fd, reinterpret_cast<struct sockaddr *>(&ss), &len) == 0;
}

void shutdown_ended(tl_loop *loop, tl_stream *s, int status) noexcept {
    if ((s->flags & (S_SHUT | S_SHUT_DONE | S_SHUT_OVER)) != S_SHUT) return;
    s->flags |= S_SHUT_DONE;
    if (status < 0 && s->error == 0) s->error = status;
    mark_pending(loop, s);
}

} // namespace

namespace tl::detail {

void stream_unbind(tl_loop *loop, tl_stream *s) noexcept {
    io_unregister(loop, &s->io);
    stream_requests(s) = 0;
    bool unref = s->flags & S_UNREF;
    handle_deactivated(loop, unref);
    loop->stream_unref -= unref;
    --loop->stats.streams_active;
    s->flags &= ~(S_BOUND | S_REG);
    set_io_owner(&s->io, nullptr);
}

void connect_ended(tl_loop *loop, tl_stream *s, int status) noexcept {
    if ((s->flags & (S_CONNECTING | S_CONNECT_DONE)) != S_CONNECTING) return;
    s->flags |= S_CONNECT_DONE;
    if (status < 0 && s->error == 0) s->error = status;
    mark_pending(loop, s);
}

void shutdown_check(tl_loop *loop, tl_stream *s) noexcept {
    const uint32_t busy = S_CONNECTING | S_CLOSING | S_CLOSED | S_SHUT_STARTED | S_SHUT_DONE;
    if ((s->flags & (S_SHUT | busy)) != S_SHUT || s->wq_send) return;
    if (s->error) { /* a write failed: the shutdown reports it */
        shutdown_ended(loop, s, s->error);
        return;
    }
    /* shutdown(2) on both paths: io_uring runs IORING_OP_SHUTDOWN on an
       io-wq worker (the kernel forces it async), a thread hand-off per
       shutdown whose completion can arrive after the peer's answer to the
       EOF it sent, so the read callback would run before the shutdown's
       (many_clients_at_once saw it), unlike on the readiness path. */
    s->flags |= S_SHUT_STARTED;
    int r = ::shutdown(s->fd, SHUT_WR);
    shutdown_ended(loop, s, r < 0 ? -errno : 0);
}

void connect_shutdown_closing(tl_stream *s) noexcept {
    if (s->flags & S_CONNECTING) s->flags |= S_CONNECT_DONE;
    if ((s->flags & (S_SHUT | S_SHUT_OVER)) == S_SHUT) s->flags |= S_SHUT_DONE;
}

int run_connect(tl_loop *loop, tl_stream *s) noexcept {
    s->flags &= ~(S_CONNECTING | S_CONNECT_DONE);
    const bool closing = s->flags & S_CLOSING;
    int status = closing ? -ECANCELED : s->error;
    tl_connect_cb cb = connect_cb(s);
    s->io.cb = nullptr;
    ++loop->stats.connects;
    cb(loop, s, status);
    if (closing || (s->flags & (S_CLOSING | S_CLOSED))) return 0; /* closed: all cancelled */
    if (status < 0) {
        fail_writes(loop, s, status);
        if (s->flags & S_SHUT) shutdown_ended(loop, s, status);
        return status;
    }
    loop->stream_path->connected(loop, s);
    shutdown_check(loop, s);
    return 0;
}

uint64_t run_connect_failed_reader(tl_loop *loop, tl_stream *s, int status) noexcept {
    if ((s->flags & (S_READING | S_CLOSING | S_CLOSED)) != S_READING) return 0;
    s->flags &= ~S_READING;
    loop->stream_path->read_stopped(loop, s);
    s->read_cb(loop, s, nullptr, status);
    return 1;
}

uint64_t run_shutdown(tl_loop *loop, tl_stream *s) noexcept {
    s->flags = (s->flags & ~S_SHUT_DONE) | S_SHUT_OVER;
    int status = (s->flags & S_CLOSING) ? -ECANCELED : s->error;
    tl_shutdown_cb cb = shutdown_cb(s);
    s->io.data = nullptr;
    cb(loop, s, status);
    return 1;
}

} // namespace tl::detail

extern "C" {

TL_API int tl_stream_connect(tl_loop *loop, tl_stream *s, const struct sockaddr *addr,
                             socklen_t addrlen, tl_connect_cb cb) {
    if (!loop || !s || !addr || !cb) return -EINVAL;
    TL_CHECK_LOOP_THREAD(loop);
    int r = check_stream(loop, s);
    if (r < 0) return r;
    /* Bound means it read, wrote or connected already: connected. */
    if (s->flags & (S_BOUND | S_CONNECTING | S_SHUT)) return -EINVAL;
    if (addrlen < min_addrlen(addr->sa_family)) return -EINVAL;
    r = check_family(s->fd, addr->sa_family);
    if (r < 0) return r;
    /* Connected already (given to tl_stream_init so): the same answer on
       every path, before io_uring's connect would report it late. */
    if (has_peer(s->fd)) return -EINVAL;
    r = stream_bind(loop, s);
    if (r < 0) return r;
    s->io.cb = reinterpret_cast<tl_io_cb>(cb);
    s->flags |= S_CONNECTING;
    r = loop->stream_path->connect(loop, s, addr, addrlen);
    if (r < 0) {
        s->flags &= ~(S_CONNECTING | S_CONNECT_DONE);
        s->io.cb = nullptr;
        stream_unbind(loop, s);
        return r == -EISCONN ? -EINVAL : r;
    }
    return 0;
}

TL_API int tl_stream_shutdown(tl_loop *loop, tl_stream *s, tl_shutdown_cb cb) {
    if (!loop || !s || !cb) return -EINVAL;
    TL_CHECK_LOOP_THREAD(loop);
    int r = check_stream(loop, s);
    if (r < 0) return r;
    if (s->flags & S_SHUT) return -EPIPE;
    if (!(s->flags & S_CONNECTING)) {
        if (!has_peer(s->fd)) return -ENOTCONN;
        r = stream_bind(loop, s);
        if (r < 0) return r;
    }
    s->io.data = reinterpret_cast<void *>(cb);
    s->flags |= S_SHUT;
    shutdown_check(loop, s);
    return 0;
}

} // extern "C"
