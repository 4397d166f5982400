/* SPDX-License-Identifier: MIT */
/*
 * The loop's invariant walkers. loop_verify, compiled into debug builds only
 * (NDEBUG removes every call and its body), runs after every timer operation,
 * timer callback and iteration (verify.h says how often it walks), and
 * so do the debug-only checks of a pop and of the calling thread;
 * tl_detail_loop_check, the handle counts, is in every build, for the tests.
 * They check what the loop itself owns; each timer backend's check() walks
 * the backend's structure.
 *
 * Invariants of the loop's state:
 * - Timer domains: exactly one is woken by the I/O wait, has an instance
 *   (from the loop's creation) and no timerfd; a domain dispatching has an
 *   instance; one holding timers has its waker (the wait, or a timerfd).
 * - Ready and deferred lists: empty unless a dispatch runs (some domain
 *   dispatching), except the deferred list with a backend without reserve
 *   (timers a dispatch popped and deferred); NULL-terminated lists whose
 *   next/prev links agree, every member TIMER_ACTIVE plus exactly its
 *   list's flag (QUEUED, DEFERRED), owned by this loop, of a domain the
 *   dispatch runs (or, so deferred, any), a deferred one due at that
 *   domain's dispatch time (why it was parked), as many members as the
 *   list's count.
 * - Timers: per domain, its instance's count plus its listed timers; their
 *   sum is timers_active, which never exceeds active_handles (every active
 *   timer is a handle the loop counts).
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
#include <cstdio>
#include <cstdlib>
#include <pthread.h>

#include "loop/handle_flags.h"
#include "loop/io/backend.h"
#include "loop/io/io.h"
#include "loop/list.h"
#include "loop/state.h"
#include "loop/timer_queue.h"
#include "loop/verify.h"
#include "timers/timers.h"

#ifndef NDEBUG
namespace tl::detail {
namespace {

[[noreturn]] void fail(const char *where, const char *what) noexcept {
    std::fprintf(stderr, "tickloop: invariant broken after %s: %s\n", where, what);
    std::abort();
}

/* A loop-owned timer list: links agree, ends NULL-terminated, count right,
   every member active with `flag`, owned by this loop, of a domain the
   dispatch runs (a deferred one due at its dispatch time). Adds the members
   of each domain to listed[clock]. */
void verify_timers(const tl_loop *loop, const TimerList &list, uint32_t flag, const char *where,
                   const char *name, uint64_t (&listed)[kClocks]) noexcept {
    static thread_local char msg[96];
    auto broken = [&](const char *what) {
        std::snprintf(msg, sizeof msg, "%s list: %s", name, what);
        fail(where, msg);
    };
    uint64_t seen = 0;
    const tl_timer *prev = nullptr;
    for (const tl_timer *t = list.head; t; prev = t, t = next_of(t)) {
        if (++seen > list.count) broken("longer than its count");
        if (prev_of(t) != prev) broken("prev link broken");
        if ((t->flags & TIMER_STATE) != (TIMER_ACTIVE | flag)) broken("member flags wrong");
        if (!timer_owned_by(t, loop->id)) broken("member owned by another loop");
        const TimerDomain &d = loop->timers.domain[timer_clock(t)];
        /* Between dispatches, deferred timers are those a dispatch popped
           and deferred (timer.cc: a backend without reserve). */
        if (!dispatching(loop->timers, timer_clock(t)) &&
            (flag != TIMER_DEFERRED || loop->timers.backend->reserve))
            broken("member of a domain the dispatch does not run");
        if (flag == TIMER_DEFERRED && t->deadline > d.dispatch_now)
            broken("member not due at its domain's dispatch time");
        ++listed[timer_clock(t)];
    }
    if (prev != list.tail) broken("tail is not its last timer");
    if (seen != list.count) broken("shorter than its count");
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

/* The timer queue's O(1) invariants: its lists' ends, its domains' wakers,
   and no listed timer outside a dispatch. */
void verify_queue(const TimerQueue &q, const char *where) noexcept {
    const TimerList *lists[] = {&q.ready, &q.deferred};
    for (const TimerList *list : lists) {
        if ((list->head == nullptr) != (list->count == 0) ||
            (list->tail == nullptr) != (list->count == 0))
            fail(where, "timer list ends disagree with its count");
        if (list->head && (list->head->link[1] || list->tail->link[0]))
            fail(where, "timer list not NULL-terminated");
    }
    const bool dispatch = q.dispatching != 0;
    int by_wait = 0;
    for (unsigned c = 0; c < kClocks; ++c) {
        const TimerDomain &d = q.domain[c];
        if (dispatching(q, c) && !d.instance)
            fail(where, "a domain without an instance dispatching");
        if (d.by_wait && (!d.instance || d.fd >= 0))
            fail(where, "the wait's domain without its instance, or with a timerfd");
        by_wait += d.by_wait;
    }
    if (by_wait != 1) fail(where, "not exactly one domain woken by the wait");
    if (!dispatch && (q.ready.count || (q.deferred.count && q.backend->reserve)))
        fail(where, "ready or deferred timers outside the dispatch");
}

} // namespace

void loop_verify(tl_loop *loop, const char *where) noexcept {
    /* O(1) checks, every time. */
    const TimerQueue &q = loop->timers;
    verify_queue(q, where);
    uint64_t timers = timers_active(loop);
    if (timers > loop->active_handles) fail(where, "more active timers than active handles");

    /* The walks are O(queued timers + fds): every call while small, then
       amortised to a bounded cost per call (verify.h). */
    uint64_t size = q.ready.count + q.deferred.count + loop->io_slots_size;
    if (size > kVerifyEveryOpUpTo && ++loop->verify_ops < size / kVerifyAmortized) return;
    loop->verify_ops = 0;
    uint64_t listed[kClocks] = {};
    verify_timers(loop, q.ready, TIMER_READY, where, "ready", listed);
    verify_timers(loop, q.deferred, TIMER_DEFERRED, where, "deferred", listed);
    uint64_t per_domain = 0;
    for (unsigned c = 0; c < kClocks; ++c) {
        const TimerDomain &d = q.domain[c];
        uint64_t inside = d.instance ? q.backend->count(d.instance) : 0;
        if (listed[c] && !d.instance) fail(where, "listed timers of a domain without an instance");
        if (inside && !d.by_wait && d.fd < 0)
            fail(where, "a domain holding timers without a waker");
        per_domain += inside + listed[c];
    }
    if (per_domain != timers) fail(where, "the domains' timers differ from timers_active");
    size_t registered = 0;
    for (size_t fd = 0; fd < loop->io_slots_size; ++fd) {
        const tl_io *w = loop->io_slots[fd].watcher;
        if (!w) continue;
        ++registered;
        if (w->fd < 0 || size_t(w->fd) != fd) fail(where, "fd registry entry watches another fd");
        if (!(w->flags & IO_ACTIVE)) fail(where, "fd registry holds an inactive watcher");
        if (io_owner(w) != loop) fail(where, "fd registry holds another loop's watcher");
        if (w->gen == 0) fail(where, "a registration with generation 0");
    }
    if (registered != loop->io_count) fail(where, "io_count disagrees with the fd registry");
    verify_ordered(loop, loop->asyncs, where, "async");
    verify_list(loop, loop->signals, loop->signal_cursor, where, "signal");
    for (const OrderedList<tl_hook> &hooks : loop->hooks)
        verify_ordered(loop, hooks, where, "hook");
    /* The handle counts against the lists and flags (below). */
    if (const char *broken = tl_detail_loop_check(loop)) fail(where, broken);
}

void check_popped(tl_loop *loop, const tl_timer *t, uint64_t now, bool first) noexcept {
    if (t->deadline > now) fail("pop_expired", "the backend returned a timer before its deadline");
    if (loop->timers.backend->caps & TL_TIMER_CAP_EXACT) {
        if (!first && t->deadline < loop->timers.last_pop_deadline)
            fail("pop_expired", "an exact backend returned deadlines out of order");
        loop->timers.last_pop_deadline = t->deadline;
    }
}

void check_loop_thread(const tl_loop *loop, const char *call) noexcept {
    if (!loop->running || pthread_equal(loop->run_thread, pthread_self())) return;
    std::fprintf(stderr,
                 "tickloop: %s() called from a thread other than the one running the loop; "
                 "a loop belongs to one thread (use tl_async_send from others)\n",
                 call);
    std::abort();
}

} // namespace tl::detail
#endif

using namespace tl::detail;

/* Each count is kept up by start/stop; the walk recomputes it from the
   structures themselves. Timers are counted by their backend plus the ready
   list (both walked by check.cc), so their share is taken from that. Debug
   builds run it inside loop_verify too. */
extern "C" const char *tl_detail_loop_check(const tl_loop *loop) noexcept {
    uint64_t io = 0, io_unref = 0, streams = 0, listeners = 0;
    for (size_t fd = 0; fd < loop->io_slots_size; ++fd) {
        const tl_io *w = loop->io_slots[fd].watcher;
        if (!w) continue;
        if (w->fd != (int)fd) return "fd table: a watcher filed under another fd";
        if (!(w->flags & IO_ACTIVE)) return "fd table: an inactive watcher";
        if (w->flags & IO_INTERNAL) continue;
        /* Streams and listeners are counted by stream.cc (a closing stream
           may have left the table already). */
        streams += (w->flags & IO_STREAM) != 0;
        listeners += (w->flags & IO_LISTENER) != 0;
        if (w->flags & IO_HANDLE_KINDS) continue;
        ++io;
        io_unref += (w->flags & IO_UNREF) != 0;
    }
    if (io != loop->stats.io_active) return "io_active differs from the fd table";
    if (streams > loop->stats.streams_active) return "more streams in the fd table than active";
    if (listeners != loop->stats.listeners_active)
        return "listeners_active differs from the fd table";
    uint64_t asyncs = 0, unref = io_unref + loop->stream_unref;
    for (const tl_async *a = loop->asyncs.head; a; a = a->next) {
        if (!(a->magic & HANDLE_ACTIVE) || a->loop != loop) return "async list: not active here";
        if (a->next ? a->next->prev != a : loop->asyncs.tail != a) return "async list: links";
        ++asyncs;
        unref += (a->magic & HANDLE_UNREF) != 0;
    }
    if (asyncs != loop->stats.asyncs_active) return "asyncs_active differs from the list";
    uint64_t signals = 0;
    for (const tl_signal *s = loop->signals; s; s = s->next) {
        if (!(s->magic & HANDLE_ACTIVE) || s->loop != loop) return "signal list: not active here";
        ++signals;
        unref += (s->magic & HANDLE_UNREF) != 0;
    }
    if (signals != loop->stats.signals_active) return "signals_active differs from the list";
    uint64_t hooks = 0, idle = 0;
    for (int kind = 0; kind < kHookKinds; ++kind) {
        const OrderedList<tl_hook> &list = loop->hooks[kind];
        for (const tl_hook *h = list.head; h; h = h->next) {
            if (!(h->flags & HOOK_ACTIVE) || h->loop != loop || h->kind != (uint32_t)kind)
                return "hook list: not an active hook of this kind and loop";
            if (h->next ? h->next->prev != h : list.tail != h) return "hook list: links";
            if (h->next && h->next->seq <= h->seq) return "hook list: not in start order";
            ++hooks;
            idle += kind == TL_HOOK_IDLE;
            unref += (h->flags & HOOK_UNREF) != 0;
        }
    }
    if (hooks != loop->stats.hooks_active) return "hooks_active differs from the lists";
    if (idle != loop->idle_hooks) return "idle_hooks differs from the IDLE list";
    uint64_t timers = timers_active(loop);
    if (loop->active_handles != timers + io + asyncs + signals + hooks +
                                    loop->stats.streams_active + loop->stats.listeners_active)
        return "active_handles is not the sum of the kinds";
    /* Unreferenced timers cannot be enumerated: they make up the rest. */
    if (loop->unref_active < unref || loop->unref_active - unref > timers)
        return "unref_active does not match the handles' flags";
    return nullptr;
}
