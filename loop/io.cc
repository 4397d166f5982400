/* SPDX-License-Identifier: MIT */
/*
 * I/O watchers: the tl_io_* API, the fd table and the dispatch of readiness.
 *
 * The kernel is told a tag (fd, generation) rather than a watcher pointer:
 * an event collected in the same batch for a watcher that a callback then
 * stopped, freed, or stopped and replaced on a reused fd number, finds either
 * no watcher or a different generation in the table and is dropped. A pointer
 * in the kernel's event data would be a use-after-free.
 */
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "loop_internal.h"

using namespace tl::detail;

namespace {

constexpr unsigned kRequestable = TL_READ | TL_WRITE;
constexpr unsigned kAlwaysReported = TL_ERROR | TL_HUP;

tl_loop *owner(const tl_io *w) noexcept {
    return reinterpret_cast<tl_loop *>(w->priv[0]);
}

/* Makes the table big enough to index fd; amortised doubling. */
int reserve_fd(tl_loop *loop, int fd) noexcept {
    size_t need = (size_t)fd + 1;
    if (need <= loop->fds_size) return 0;
    size_t size = loop->fds_size ? loop->fds_size : 64;
    while (size < need) size *= 2;
    void *mem = std::realloc(loop->fds, size * sizeof(tl_io *));
    if (!mem) return -ENOMEM;
    loop->fds = static_cast<tl_io **>(mem);
    std::memset(loop->fds + loop->fds_size, 0, (size - loop->fds_size) * sizeof(tl_io *));
    loop->fds_size = size;
    return 0;
}

int start(tl_loop *loop, tl_io *w, unsigned events, uint32_t extra_flags) noexcept {
    if (w->flags & IO_ACTIVE) {
        if (owner(w) != loop) return -EINVAL;
        if (events == w->events) return 0;
        int r = loop->io->modify(w->fd, events, io_tag(w->fd, w->gen));
        if (r < 0) return r;
        w->events = events;
        return 0;
    }
    if (w->fd < 0) return -EBADF;
    int r = reserve_fd(loop, w->fd);
    if (r < 0) return r;
    if (loop->fds[w->fd]) return -EEXIST;
    uint32_t gen = ++loop->io_gen;
    r = loop->io->add(w->fd, events, io_tag(w->fd, gen));
    if (r < 0) return r;
    w->gen = gen;
    w->events = events;
    w->flags = IO_ACTIVE | extra_flags | (w->flags & IO_UNREF);
    w->priv[0] = reinterpret_cast<uintptr_t>(loop);
    loop->fds[w->fd] = w;
    if (!(extra_flags & IO_INTERNAL)) {
        ++loop->stats.io_active;
        handle_activated(loop, w->flags & IO_UNREF);
    }
    return 0;
}

void stop(tl_loop *loop, tl_io *w) noexcept {
    loop->io->remove(w->fd, io_tag(w->fd, w->gen));
    loop->fds[w->fd] = nullptr;
    if (!(w->flags & IO_INTERNAL)) {
        --loop->stats.io_active;
        handle_deactivated(loop, w->flags & IO_UNREF);
    }
    w->flags &= IO_UNREF;
    w->priv[0] = 0;
}

} // namespace

namespace tl::detail {

uint64_t io_dispatch(tl_loop *loop, int n) noexcept {
    uint64_t ran = 0;
    for (int i = 0; i < n; ++i) {
        const ReadyEvent &ev = loop->events[i];
        int fd = io_tag_fd(ev.tag);
        if ((size_t)fd >= loop->fds_size) continue;
        tl_io *w = loop->fds[fd];
        if (!w || w->gen != io_tag_gen(ev.tag)) continue; /* stopped meanwhile */
        unsigned revents = ev.revents & (w->events | kAlwaysReported);
        if (!revents) continue;
        if (!(w->flags & IO_INTERNAL)) ++loop->stats.io_events;
        ++ran;
        w->cb(loop, w, revents);
    }
    return ran;
}

int io_start_internal(tl_loop *loop, tl_io *w, int fd, tl_io_cb cb) noexcept {
    tl_io_init(w, fd, cb, nullptr);
    return start(loop, w, TL_READ, IO_INTERNAL);
}

void io_stop_internal(tl_loop *loop, tl_io *w) noexcept {
    if (w->flags & IO_ACTIVE) stop(loop, w);
}

int io_reserve_fd(tl_loop *loop, int fd) noexcept {
    return reserve_fd(loop, fd);
}

void io_close(tl_loop *loop) noexcept {
    std::free(loop->fds);
    loop->fds = nullptr;
    loop->fds_size = 0;
}

} // namespace tl::detail

extern "C" {

TL_API void tl_io_init(tl_io *w, int fd, tl_io_cb cb, void *data) {
    if (!w) return;
    *w = tl_io{};
    w->fd = fd;
    w->cb = cb;
    w->data = data;
}

TL_API int tl_io_start(tl_loop *loop, tl_io *w, unsigned events) {
    if (!loop || !w || !w->cb) return -EINVAL;
    TL_CHECK_LOOP_THREAD(loop);
    if (events == 0 || (events & ~kRequestable)) return -EINVAL;
    return start(loop, w, events, 0);
}

TL_API int tl_io_stop(tl_loop *loop, tl_io *w) {
    if (!loop || !w) return -EINVAL;
    TL_CHECK_LOOP_THREAD(loop);
    if (!(w->flags & IO_ACTIVE)) return 0;
    if (owner(w) != loop) return -EINVAL;
    stop(loop, w);
    return 0;
}

TL_API int tl_io_set_ref(tl_loop *loop, tl_io *w, int ref) {
    if (!loop || !w) return -EINVAL;
    TL_CHECK_LOOP_THREAD(loop);
    bool active = w->flags & IO_ACTIVE;
    if (active && owner(w) != loop) return -EINVAL;
    bool was = w->flags & IO_UNREF;
    if (ref)
        w->flags &= ~IO_UNREF;
    else
        w->flags |= IO_UNREF;
    if (active && !(w->flags & IO_INTERNAL)) handle_ref_changed(loop, was, !ref);
    return 0;
}

} // extern "C"
