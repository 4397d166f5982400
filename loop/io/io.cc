/* SPDX-License-Identifier: MIT */
/*
 * loop/io/: the loop's descriptors and the kernel interfaces that watch them.
 * io.cc (here) holds the fd registry, its tl_io_* API and the dispatch of
 * events a wait returns; backend.h the small interface every I/O backend
 * implements (IoBackend: add, modify, remove, wait; CompletionOps for the
 * streams' completion path); epoll.cc and uring/ (the ring, its polls and
 * its completion requests) the two backends. Nothing here knows a handle
 * kind above it: the events of streams and listeners go up through the
 * loop's HandleIo table.
 *
 * I/O watchers: the tl_io_* API, the loop's fd registry and the dispatch of
 * readiness.
 *
 * The registry (loop->io_slots, indexed by fd) is the only table of
 * registrations: both I/O backends read and annotate it (backend.h says
 * what each call may assume), so they cannot disagree about what is watched.
 * Its watcher entries are written here only: by start and stop, the streams'
 * register/unregister, and io_replace_fd, which moves the loop's own watchers
 * onto the descriptors tl_loop_fork's steps create.
 *
 * The kernel is told a tag (fd, generation) rather than a watcher pointer:
 * an event returned in the same batch for a watcher that a callback then
 * stopped, freed, or stopped and replaced on a reused fd number, finds either
 * no watcher or a different generation in the registry and is dropped. A
 * pointer in the kernel's event data would be a use-after-free. io_current()
 * is that one filter; dispatch and the backends' bookkeeping all use it.
 *
 * The registry grows only for an fd that is open (fcntl(F_GETFD) first): an
 * fd number is bounded by the process's open-file limit only if it is open,
 * and a table sized from an unchecked number would cost 256 MiB for fd 2^24
 * and ask for 16 GiB for fd INT_MAX before -EBADF.
 */
#include <cassert>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

#include "loop/handle_flags.h"
#include "loop/io/backend.h"
#include "loop/io/io.h"
#include "loop/io_event.h"
#include "loop/state.h"
#include "loop/verify.h"

using namespace tl::detail;

namespace {

constexpr unsigned kRequestable = TL_READ | TL_WRITE;
constexpr unsigned kAlwaysReported = TL_ERROR | TL_HUP;

/* First registry size: covers the descriptors of a small program. */
constexpr size_t kMinSlots = 64;

/* Makes the registry big enough to index fd, which must be open. Growth is
 * by a quarter beyond the fd needed: amortised O(1) for fds that climb one
 * by one, and the table never exceeds 1.25 times the highest fd watched. */
int reserve_fd(tl_loop *loop, int fd) noexcept {
    size_t need = (size_t)fd + 1;
    if (need <= loop->io_slots_size) return 0;
    if (fcntl(fd, F_GETFD) < 0) return -errno;
    size_t size = need + need / 4;
    if (size < kMinSlots) size = kMinSlots;
    void *mem = std::realloc(loop->io_slots, size * sizeof(IoSlot));
    if (!mem) return -ENOMEM;
    loop->io_slots = static_cast<IoSlot *>(mem);
    std::memset(loop->io_slots + loop->io_slots_size, 0,
                (size - loop->io_slots_size) * sizeof(IoSlot));
    loop->io_slots_size = size;
    return 0;
}

uint32_t next_gen(tl_loop *loop) noexcept {
    /* 0 marks a backend's own tags; the top two bits of the tag's
       generation half name a completion request's kind (req_tag). */
    if (++loop->io_gen == 0 || loop->io_gen > kMaxGen) loop->io_gen = 1;
    return loop->io_gen;
}

int start(tl_loop *loop, tl_io *w, unsigned events, uint32_t extra_flags) noexcept {
    if (w->flags & IO_ACTIVE) {
        if (io_owner(w) != loop) return -EINVAL;
        if (events == w->events) return 0;
        int r = loop->io->modify(w->fd, events);
        if (r < 0) return r;
        w->events = events;
        return 0;
    }
    if (w->fd < 0) return -EBADF;
    int r = reserve_fd(loop, w->fd);
    if (r < 0) return r;
    IoSlot &slot = loop->io_slots[w->fd];
    if (slot.watcher) return -EEXIST;
    unsigned old_events = w->events;
    w->gen = next_gen(loop);
    w->events = events;
    slot = IoSlot{w, 0, 0};
    r = loop->io->add(w->fd);
    if (r < 0) {
        slot = IoSlot{};
        w->events = old_events;
        return r;
    }
    w->flags = IO_ACTIVE | extra_flags | (w->flags & IO_UNREF);
    set_io_owner(w, loop);
    ++loop->io_count;
    if (!(extra_flags & IO_INTERNAL)) {
        ++loop->stats.io_active;
        handle_activated(loop, w->flags & IO_UNREF);
    }
    return 0;
}

void stop(tl_loop *loop, tl_io *w) noexcept {
    loop->io->remove(w->fd);
    loop->io_slots[w->fd] = IoSlot{};
    --loop->io_count;
    if (!(w->flags & IO_INTERNAL)) {
        --loop->stats.io_active;
        handle_deactivated(loop, w->flags & IO_UNREF);
    }
    w->flags &= IO_UNREF;
    set_io_owner(w, nullptr);
}

} // namespace

namespace tl::detail {

IoSlot *io_current(tl_loop *loop, uint64_t tag) noexcept {
    int fd = io_tag_fd(tag);
    if (fd < 0 || (size_t)fd >= loop->io_slots_size) return nullptr;
    IoSlot *slot = &loop->io_slots[fd];
    if (!slot->watcher || slot->watcher->gen != io_tag_gen(tag)) return nullptr;
    return slot;
}

uint64_t io_dispatch(tl_loop *loop, int n) noexcept {
    uint64_t ran = 0;
    for (int i = 0; i < n; ++i) {
        const ReadyEvent &ev = loop->events[i];
        IoSlot *slot = io_current(loop, ev.tag);
        if (!slot) { /* stopped meanwhile */
            if (ev.revents & kCompletion) loop->handle_io->stale(loop, ev);
            continue;
        }
        tl_io *w = slot->watcher;
        if (w->flags & IO_HANDLE_KINDS) {
            /* A stream or listener: the loop reads, writes or accepts. */
            ++ran;
            loop->handle_io->event(loop, w, ev);
            continue;
        }
        unsigned revents = ev.revents & (w->events | kAlwaysReported);
        if (!revents) continue;
        if (!(w->flags & IO_INTERNAL)) ++loop->stats.io_events;
        ++ran;
        w->cb(loop, w, revents);
    }
    return ran;
}

int io_readd_all(tl_loop *loop, IoBackend *io) noexcept {
    int first = 0;
    for (size_t fd = 0; fd < loop->io_slots_size; ++fd) {
        IoSlot &slot = loop->io_slots[fd];
        if (!slot.watcher) continue;
        /* A stream or listener with no readiness wanted is not in the
           backend (io_interest), unless the backend drives it with
           completions (it re-arms them in add). */
        if (slot.watcher->events == 0 && !loop->handle_io->completion) continue;
        slot.state = slot.index = 0;
        int r = io->add((int)fd);
        if (r < 0 && r != -EBADF && first == 0) first = r;
    }
    return first;
}

void io_internal_error(tl_loop *loop, const char *what, int err) noexcept {
    ++loop->stats.io_internal_errors;
#ifndef NDEBUG
    std::fprintf(stderr, "tickloop: %s failed inside the loop: %s\n", what, tl_strerror(err));
    assert(!"an internal I/O request failed");
#else
    (void)what;
    (void)err;
#endif
}

int io_start_internal(tl_loop *loop, tl_io *w, int fd, tl_io_cb cb) noexcept {
    tl_io_init(w, fd, cb, nullptr);
    return start(loop, w, TL_READ, IO_INTERNAL);
}

void io_stop_internal(tl_loop *loop, tl_io *w) noexcept {
    if (w->flags & IO_ACTIVE) stop(loop, w);
}

int io_register(tl_loop *loop, tl_io *w, uint32_t kind, bool known_open) noexcept {
    if (w->fd < 0) return -EBADF;
    int r = reserve_fd(loop, w->fd);
    if (r < 0) return r;
    /* reserve_fd checks only when the table grows. */
    if (!known_open && fcntl(w->fd, F_GETFD) < 0) return -errno;
    IoSlot &slot = loop->io_slots[w->fd];
    if (slot.watcher) return -EBUSY;
    w->gen = next_gen(loop);
    w->events = 0;
    slot = IoSlot{w, 0, 0};
    w->flags = IO_ACTIVE | kind | (w->flags & IO_UNREF);
    set_io_owner(w, loop);
    ++loop->io_count;
    return 0;
}

int io_interest(tl_loop *loop, tl_io *w, unsigned events) noexcept {
    if (events == w->events) return 0;
    int r = 0;
    if (w->events == 0) {
        unsigned old = w->events;
        w->events = events;
        IoSlot &slot = loop->io_slots[w->fd];
        slot.state = slot.index = 0;
        r = loop->io->add(w->fd);
        if (r < 0) w->events = old;
        return r;
    }
    if (events == 0) {
        loop->io->remove(w->fd);
        IoSlot &slot = loop->io_slots[w->fd];
        slot.state = slot.index = 0;
        w->events = 0;
        /* A completion of the poll being cancelled must not re-arm it. */
        w->gen = next_gen(loop);
        return 0;
    }
    r = loop->io->modify(w->fd, events);
    if (r == 0) w->events = events;
    return r;
}

void io_unregister(tl_loop *loop, tl_io *w) noexcept {
    if (!(w->flags & IO_ACTIVE)) return;
    if (w->events != 0 || loop->handle_io->completion || loop->io_slots[w->fd].state)
        loop->io->remove(w->fd);
    loop->io_slots[w->fd] = IoSlot{};
    --loop->io_count;
    w->events = 0;
    w->flags &= IO_UNREF;
    set_io_owner(w, nullptr);
}

int io_replace_fd(tl_loop *loop, tl_io *w, int new_fd) noexcept {
    assert((w->flags & (IO_ACTIVE | IO_INTERNAL)) == (IO_ACTIVE | IO_INTERNAL));
    assert(loop->io_slots[w->fd].watcher == w && new_fd != w->fd);
    /* new_fd was just created, so a watcher filed under its number is one
       whose fd the program closed without stopping it (tl_loop_fork skips
       those). Its registration is its own: a later tl_io_stop clears that
       slot and tells the backend. So the loop's descriptor moves above the
       registry instead, where no watcher is filed. */
    int fd = new_fd;
    if ((size_t)fd < loop->io_slots_size && loop->io_slots[fd].watcher) {
        fd = fcntl(new_fd, F_DUPFD_CLOEXEC, (int)loop->io_slots_size);
        if (fd < 0) return -errno;
    }
    int r = reserve_fd(loop, fd);
    if (r < 0) {
        if (fd != new_fd) close(fd);
        return r;
    }
    if (fd != new_fd) close(new_fd);
    loop->io_slots[w->fd] = IoSlot{};
    loop->io_slots[fd] = IoSlot{w, 0, 0};
    w->fd = fd;
    return fd;
}

void io_close(tl_loop *loop) noexcept {
    std::free(loop->io_slots);
    loop->io_slots = nullptr;
    loop->io_slots_size = 0;
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
    if (io_owner(w) != loop) return -EINVAL;
    stop(loop, w);
    return 0;
}

TL_API int tl_io_set_ref(tl_loop *loop, tl_io *w, int ref) {
    if (!loop || !w) return -EINVAL;
    TL_CHECK_LOOP_THREAD(loop);
    bool active = w->flags & IO_ACTIVE;
    if (active && io_owner(w) != loop) return -EINVAL;
    bool was = w->flags & IO_UNREF;
    if (ref)
        w->flags &= ~IO_UNREF;
    else
        w->flags |= IO_UNREF;
    if (active && !(w->flags & IO_INTERNAL)) handle_ref_changed(loop, was, !ref);
    return 0;
}

} // extern "C"
