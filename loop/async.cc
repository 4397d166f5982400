/*
 * Async wakeups: any thread wakes the loop through one eventfd per loop.
 *
 * A send sets the handle's `pending` flag and writes the eventfd only when the
 * flag goes from 0 to 1, so a burst of sends costs one syscall and one
 * callback (they coalesce). The loop drains the eventfd *before* clearing the
 * flags: a send that lands between the two is either seen by the clear (its
 * callback runs now) or has written the eventfd again (it runs next
 * iteration); none is lost.
 *
 * Dispatch walks the loop's list with a cursor that tl_async_stop advances, so
 * a callback may stop or free any async, itself included.
 */
#include <cerrno>
#include <sys/eventfd.h>
#include <unistd.h>

#include "loop_internal.h"

using namespace tl::detail;

namespace {

/* Marks a live handle: tl_async is not initialised by the caller, so this is
 * how start tells "already active" from fresh memory. */
constexpr uint32_t kAsyncMagic = 0x7a5c1e01u;

uint32_t take_pending(tl_async *a) noexcept {
    return __atomic_exchange_n(&a->pending, 0u, __ATOMIC_ACQ_REL);
}

void on_eventfd(tl_loop *loop, tl_io *, unsigned) {
    uint64_t count;
    while (read(loop->async_fd, &count, sizeof count) < 0 && errno == EINTR) {
    }
    for (tl_async *a = loop->asyncs; a; a = loop->async_cursor) {
        loop->async_cursor = a->next;
        if (take_pending(a)) a->cb(loop, a);
    }
    loop->async_cursor = nullptr;
}

} // namespace

namespace tl::detail {

void async_close(tl_loop *loop) noexcept {
    if (loop->async_fd < 0) return;
    io_stop_internal(loop, &loop->async_watcher);
    close(loop->async_fd);
    loop->async_fd = -1;
}

} // namespace tl::detail

extern "C" {

TL_API int tl_async_start(tl_loop *loop, tl_async *a, tl_async_cb cb, void *data) {
    if (!loop || !a || !cb) return -EINVAL;
    TL_CHECK_LOOP_THREAD(loop);
    if (a->magic == kAsyncMagic && (a->loop != loop || list_contains(loop->asyncs, a)))
        return -EBUSY;
    if (loop->async_fd < 0) {
        int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (fd < 0) return -errno;
        int r = io_start_internal(loop, &loop->async_watcher, fd, on_eventfd);
        if (r < 0) {
            close(fd);
            return r;
        }
        loop->async_fd = fd;
    }
    a->cb = cb;
    a->data = data;
    a->loop = loop;
    a->pending = 0;
    list_push(loop->asyncs, a);
    __atomic_store_n(&a->magic, kAsyncMagic, __ATOMIC_RELEASE);
    ++loop->active_handles;
    return 0;
}

TL_API int tl_async_send(tl_async *a) {
    if (!a || __atomic_load_n(&a->magic, __ATOMIC_ACQUIRE) != kAsyncMagic) return -EINVAL;
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
    if (a->magic != kAsyncMagic) return 0;
    if (a->loop != loop) return -EINVAL;
    if (!list_contains(loop->asyncs, a)) return 0; /* stale magic in reused memory */
    list_unlink(loop->asyncs, loop->async_cursor, a);
    __atomic_store_n(&a->magic, 0u, __ATOMIC_RELEASE);
    __atomic_store_n(&a->loop, nullptr, __ATOMIC_RELEASE);
    --loop->active_handles;
    return 0;
}

} // extern "C"
