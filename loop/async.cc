/* SPDX-License-Identifier: MIT */
/*
 * Async wakeups: any thread wakes the loop through one eventfd per loop.
 *
 * A send sets the handle's send flag (`pending` in the header) and writes the eventfd only when the
 * flag goes from 0 to 1, so a burst of sends costs one syscall and one
 * callback (they coalesce). The loop drains the eventfd *before* clearing the
 * flags: a send that lands between the two is either seen by the clear (its
 * callback runs now) or has written the eventfd again (it runs next
 * iteration); none is lost.
 *
 * The loop's asyncs form a list in start order, and dispatch walks it from the
 * head, so the callbacks of asyncs sent run in the order their asyncs were started (a
 * "quit" async started after a "work" async runs after it). The walk uses the
 * list's cursor, which tl_async_stop advances, so a callback may stop or free
 * any async, itself included.
 *
 * State lives in `magic` (marker + HANDLE_* bits, handle_flags.h). An async
 * that went through tl_async_init carries HANDLE_INIT, and its ACTIVE bit is
 * the truth: double start and stop are O(1). One that was never initialised
 * may hold anything, so for it ACTIVE is confirmed by walking the loop's list
 * (tl_async_init is optional: fresh memory may be started directly).
 */
#include <cerrno>
#include <sys/eventfd.h>
#include <unistd.h>

#include "loop/async.h"
#include "loop/handle_flags.h"
#include "loop/io/io.h"
#include "loop/list.h"
#include "loop/state.h"
#include "loop/verify.h"

using namespace tl::detail;

namespace {

constexpr uint32_t kAsyncMarker = 0x7a5c1e00u;

bool is_marked(uint32_t magic) noexcept {
    return (magic & ~HANDLE_STATE_MASK) == kAsyncMarker;
}

uint32_t load_magic(const tl_async *a) noexcept {
    return __atomic_load_n(&a->magic, __ATOMIC_ACQUIRE);
}

/* Written with release order: tl_async_send on another thread reads it. */
void store_magic(tl_async *a, uint32_t state) noexcept {
    __atomic_store_n(&a->magic, kAsyncMarker | state, __ATOMIC_RELEASE);
}

/* True if a is active on some loop; for an uninitialised async, only if it
 * is really on `loop`'s list (other loops' lists are not ours to walk: a
 * marker naming another loop is taken at its word). */
bool is_active(const tl_loop *loop, const tl_async *a, uint32_t magic) noexcept {
    if (!is_marked(magic) || !(magic & HANDLE_ACTIVE)) return false;
    if (magic & HANDLE_INIT) return true;
    return a->loop != loop || list_contains(loop->asyncs.head, a);
}

uint32_t take_sent(tl_async *a) noexcept {
    return __atomic_exchange_n(&a->pending, 0u, __ATOMIC_ACQ_REL);
}

void on_eventfd(tl_loop *loop, tl_io *, unsigned) {
    uint64_t count;
    while (read(loop->async_fd, &count, sizeof count) < 0 && errno == EINTR) {
    }
    OrderedList<tl_async> &list = loop->asyncs;
    for (tl_async *a = list.head; a; a = list.cursor) {
        list.cursor = a->next;
        if (take_sent(a)) a->cb(loop, a);
    }
    list.cursor = nullptr;
}

int open_eventfd(tl_loop *loop) noexcept {
    int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (fd < 0) return -errno;
    int r = io_start_internal(loop, &loop->async_watcher, fd, on_eventfd);
    if (r < 0) {
        close(fd);
        return r;
    }
    loop->async_fd = fd;
    return 0;
}

} // namespace

namespace tl::detail {

void async_close(tl_loop *loop) noexcept {
    if (loop->async_fd < 0) return;
    io_stop_internal(loop, &loop->async_watcher);
    close(loop->async_fd);
    loop->async_fd = -1;
}

int async_fork(tl_loop *loop) noexcept {
    if (loop->async_fd < 0) return 0;
    int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (fd < 0) return -errno;
    /* The inherited eventfd is shared with the parent: its sends would wake
       the child. Move the watcher onto the new one; the caller registers
       every registry entry with the new backend. */
    int r = io_replace_fd(loop, &loop->async_watcher, fd);
    if (r < 0) {
        close(fd);
        return r;
    }
    fd = r; /* it may have moved (io_replace_fd) */
    close(loop->async_fd);
    loop->async_fd = fd;
    /* A send whose callback had not run at the fork wrote the old counter;
       its flag is still set, so one write makes the child's first
       iteration run it. */
    for (tl_async *a = loop->asyncs.head; a; a = a->next) {
        if (__atomic_load_n(&a->pending, __ATOMIC_ACQUIRE)) {
            uint64_t one = 1;
            while (write(fd, &one, sizeof one) < 0 && errno == EINTR) {
            }
            break;
        }
    }
    return 0;
}

} // namespace tl::detail

extern "C" {

TL_API void tl_async_init(tl_async *a) {
    if (!a) return;
    *a = tl_async{};
    a->magic = kAsyncMarker | HANDLE_INIT;
}

TL_API int tl_async_start(tl_loop *loop, tl_async *a, tl_async_cb cb, void *data) {
    if (!loop || !a || !cb) return -EINVAL;
    TL_CHECK_LOOP_THREAD(loop);
    uint32_t magic = load_magic(a);
    if (is_active(loop, a, magic)) return -EBUSY;
    /* Keep what init and set_ref recorded; fresh memory has nothing to keep. */
    uint32_t keep = is_marked(magic) ? magic & (HANDLE_INIT | HANDLE_UNREF) : 0;
    if (loop->async_fd < 0) {
        int r = open_eventfd(loop);
        if (r < 0) return r;
    }
    a->cb = cb;
    a->data = data;
    a->loop = loop;
    a->pending = 0;
    loop->asyncs.append(a);
    store_magic(a, keep | HANDLE_ACTIVE);
    ++loop->stats.asyncs_active;
    handle_activated(loop, keep & HANDLE_UNREF);
    return 0;
}

TL_API int tl_async_send(tl_async *a) {
    if (!a) return -EINVAL;
    uint32_t magic = load_magic(a);
    if (!is_marked(magic) || !(magic & HANDLE_ACTIVE)) return -EINVAL;
    /* Read the loop once: a tl_async_stop racing this call (not allowed,
       but common at shutdown) clears a->loop, and a second read would
       dereference NULL. The loop and its eventfd outlive the stop. */
    tl_loop *loop = __atomic_load_n(&a->loop, __ATOMIC_ACQUIRE);
    if (!loop) return -EINVAL;
    if (__atomic_exchange_n(&a->pending, 1u, __ATOMIC_ACQ_REL) == 0) {
        uint64_t one = 1;
        /* EAGAIN means the counter is saturated: the loop is woken anyway. */
        while (write(loop->async_fd, &one, sizeof one) < 0 && errno == EINTR) {
        }
    }
    return 0;
}

TL_API int tl_async_stop(tl_loop *loop, tl_async *a) {
    if (!loop || !a) return -EINVAL;
    TL_CHECK_LOOP_THREAD(loop);
    uint32_t magic = load_magic(a);
    if (!is_marked(magic) || !(magic & HANDLE_ACTIVE)) return 0;
    if (a->loop != loop) return -EINVAL;
    if (!is_active(loop, a, magic)) return 0; /* stale marker in reused memory */
    loop->asyncs.unlink(a);
    store_magic(a, magic & (HANDLE_INIT | HANDLE_UNREF));
    __atomic_store_n(&a->loop, nullptr, __ATOMIC_RELEASE);
    --loop->stats.asyncs_active;
    handle_deactivated(loop, magic & HANDLE_UNREF);
    return 0;
}

TL_API int tl_async_set_ref(tl_loop *loop, tl_async *a, int ref) {
    if (!loop || !a) return -EINVAL;
    TL_CHECK_LOOP_THREAD(loop);
    uint32_t magic = load_magic(a);
    bool active = is_active(loop, a, magic);
    if (active && a->loop != loop) return -EINVAL;
    /* An unmarked async is taken as a fresh one (see the header). */
    uint32_t state = is_marked(magic) ? magic & HANDLE_STATE_MASK : HANDLE_INIT;
    if (!active) state &= ~HANDLE_ACTIVE;
    uint32_t next = ref ? state & ~HANDLE_UNREF : state | HANDLE_UNREF;
    store_magic(a, next);
    if (active) handle_ref_changed(loop, state & HANDLE_UNREF, next & HANDLE_UNREF);
    return 0;
}

} // extern "C"
