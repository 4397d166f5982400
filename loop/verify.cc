/* SPDX-License-Identifier: MIT */
/*
 * The loop's invariant walker, compiled into debug builds only (NDEBUG
 * removes every call and this file's body): loop_internal.h says when it
 * runs. It checks what the loop itself owns; each timer backend's check()
 * walks the backend's structure.
 *
 * Invariants of the loop's state:
 * - Ready list: empty outside timers_dispatch; inside it, a NULL-terminated
 *   list whose next/prev links agree, head's prev and tail's next NULL, every
 *   member TIMER_ACTIVE | TIMER_QUEUED and owned by this loop, ready_count
 *   members.
 * - Timers: backend count + ready_count never exceeds active_handles (every
 *   active timer is a handle the loop counts).
 * - fd registry: a watcher at io_slots[i] watches fd i, is IO_ACTIVE and
 *   belongs to this loop; io_count slots hold one; generations are never 0
 *   (0 tags a backend's own requests).
 * - Async, signal and hook lists: next/prev links agree, each member belongs
 *   to this loop, the dispatch cursors point into their list (or are NULL),
 *   and a start-ordered list's tail is its last node.
 * - Handle counts (tl_detail_loop_check): active_handles is the sum of the
 *   kinds, each per-kind count matches its list or the fd table, hooks are
 *   in start order, unref_active matches the handles' flags.
 */
#ifndef NDEBUG
#include <cstdio>
#include <cstdlib>

#include "loop_internal.h"
#include "timers/timers.h"

namespace tl::detail {
namespace {

[[noreturn]] void fail(const char *where, const char *what) noexcept {
    std::fprintf(stderr, "tickloop: invariant broken after %s: %s\n", where, what);
    std::abort();
}

void verify_ready(const tl_loop *loop, const char *where) noexcept {
    uint64_t seen = 0;
    const tl_timer *prev = nullptr;
    for (const tl_timer *t = loop->ready_head; t;
         prev = t, t = reinterpret_cast<const tl_timer *>(t->link[0])) {
        if (++seen > loop->ready_count) fail(where, "ready list longer than ready_count");
        if (reinterpret_cast<const tl_timer *>(t->link[1]) != prev)
            fail(where, "ready list prev link broken");
        if ((t->flags & TIMER_STATE) != TIMER_STATE) fail(where, "ready timer not active+queued");
        if (t->reserved != loop->id) fail(where, "ready timer owned by another loop");
    }
    if (prev != loop->ready_tail) fail(where, "ready list tail is not its last timer");
    if (seen != loop->ready_count) fail(where, "ready list shorter than ready_count");
}

template <class Node>
const Node *verify_list(const tl_loop *loop, const Node *head, const Node *cursor,
                        const char *where, const char *name) noexcept {
    bool cursor_seen = cursor == nullptr;
    const Node *prev = nullptr;
    for (const Node *n = head; n; prev = n, n = n->next) {
        if (n->prev != prev) {
            static thread_local char msg[96];
            std::snprintf(msg, sizeof msg, "%s list prev link broken", name);
            fail(where, msg);
        }
        if (n->loop != loop) fail(where, "list member owned by another loop");
        if (n == cursor) cursor_seen = true;
    }
    if (!cursor_seen) fail(where, "dispatch cursor outside its list");
    return prev; /* the last node */
}

template <class Node>
void verify_ordered(const tl_loop *loop, const OrderedList<Node> &list, const char *where,
                    const char *name) noexcept {
    if (verify_list(loop, list.head, list.cursor, where, name) != list.tail)
        fail(where, "start-ordered list's tail is not its last node");
}

} // namespace

void loop_verify(tl_loop *loop, const char *where) noexcept {
    /* O(1) checks, every time. */
    if ((loop->ready_head == nullptr) != (loop->ready_count == 0) ||
        (loop->ready_tail == nullptr) != (loop->ready_count == 0))
        fail(where, "ready list ends disagree with ready_count");
    if (loop->ready_head && (loop->ready_head->link[1] || loop->ready_tail->link[0]))
        fail(where, "ready list not NULL-terminated");
    uint64_t timers = timers_active(loop);
    if (timers > loop->active_handles) fail(where, "more active timers than active handles");

    /* The walks are O(queued timers + fds): every call while small, then
       amortised to a bounded cost per call (loop_internal.h). */
    uint64_t size = loop->ready_count + loop->io_slots_size;
    if (size > kVerifyEveryOpUpTo && ++loop->verify_ops < size / kVerifyAmortized) return;
    loop->verify_ops = 0;
    verify_ready(loop, where);
    size_t registered = 0;
    for (size_t fd = 0; fd < loop->io_slots_size; ++fd) {
        const tl_io *w = loop->io_slots[fd].watcher;
        if (!w) continue;
        ++registered;
        if (w->fd < 0 || size_t(w->fd) != fd) fail(where, "fd registry entry watches another fd");
        if (!(w->flags & IO_ACTIVE)) fail(where, "fd registry holds an inactive watcher");
        if (reinterpret_cast<tl_loop *>(w->priv[0]) != loop)
            fail(where, "fd registry holds another loop's watcher");
        if (w->gen == 0) fail(where, "a registration with generation 0");
    }
    if (registered != loop->io_count) fail(where, "io_count disagrees with the fd registry");
    verify_ordered(loop, loop->asyncs, where, "async");
    verify_list(loop, loop->signals, loop->signal_cursor, where, "signal");
    for (const OrderedList<tl_hook> &hooks : loop->hooks)
        verify_ordered(loop, hooks, where, "hook");
    /* The handle counts against the lists and flags (loop.cc). */
    if (const char *broken = tl_detail_loop_check(loop)) fail(where, broken);
}

void check_popped(tl_loop *loop, const tl_timer *t, uint64_t now, bool first) noexcept {
    if (t->deadline > now) fail("pop_expired", "the backend returned a timer before its deadline");
    if (loop->timer_backend->caps & TL_TIMER_CAP_EXACT) {
        if (!first && t->deadline < loop->last_pop_deadline)
            fail("pop_expired", "an exact backend returned deadlines out of order");
        loop->last_pop_deadline = t->deadline;
    }
}

} // namespace tl::detail
#endif
