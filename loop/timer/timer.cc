/* SPDX-License-Identifier: MIT */
/*
 * The timer queue (timer_queue.h) and the tl_timer_* API on it: starting
 * and stopping timers in their clock's domain; dispatch.cc runs the
 * due ones, computes the next wake-up and rebases a clock that went back.
 *
 * A timer is active (TIMER_ACTIVE) while it is inside its domain's backend
 * instance, or in one of the queue's two lists of timers no instance holds:
 * the ready list (TIMER_READY: popped, callback not run yet) and the
 * deferred list (TIMER_DEFERRED: started during a dispatch, already due).
 * Its clock bits name its domain. `reserved`
 * then holds the owning loop's id, mixed with the timer's address
 * (timer_owner), so that a handle used with the wrong loop is refused instead
 * of corrupting a structure, and tl_timer_init can find the loop of a timer
 * still active to stop it there. The flags layout is in
 * handle_flags.h.
 *
 * Every start is start() -> the backend's reschedule (the heartbeat's
 * restart in place), or start() -> place() -> the backend; a stop is
 * disarm(), which the dispatch's helpers (state.h) complete. place()
 * names each rule it serves.
 *
 * A start during a dispatch (dispatch.cc says why) with a deadline
 * the dispatch could still pop is parked in the deferred list and inserted
 * at the dispatch's end, after its start returned 0. So that this insert
 * cannot fail, the room for it is reserved when it is parked (the
 * backend's reserve: a heap grows then, and the start returns -ENOMEM if it
 * cannot), and every insert made while timers are parked keeps that room
 * (the wheels' reserve is a no-op, their insert never fails). A custom
 * backend without reserve gets the timer at its start instead, so that a
 * failed insert is the start's error, marked TIMER_FRESH: if the dispatch
 * pops it, it goes to the deferred list rather than the ready list, and
 * stays there, out of every instance, until the next dispatch of its
 * domain runs it first (it is due, and was next in the backend's order
 * when popped). The dispatch pops the fresh timers it did not pop (started
 * by a callback of its last chunk, or left by a cap) before it ends, so no
 * timer stays fresh after its dispatch: no epoch is needed to tell a fresh
 * timer of an earlier dispatch from one of this.
 *
 * The queue calls the backend through its vtable only: it knows no backend
 * but by its caps. A restart (a heartbeat per packet: the hottest call) is
 * one call of reschedule, or remove and insert where a backend has none.
 */
#include <cerrno>
#include <cstdio>

#include "loop/clock.h"
#include "loop/timer/state.h"
#include "loop/verify.h"
#include "timers/timers.h"

using namespace tl::detail;

namespace {

bool owned_by_other(const tl_loop *loop, const tl_timer *t) noexcept {
    return (t->flags & TIMER_ACTIVE) && !timer_owned_by(t, loop->id);
}

/* A timer without a leeway of its own takes the loop's collect interval
   (none when collect_flags is 0) when it starts while inactive or moves to
   another clock, not at a restart (a timer keeps what it was lent). The
   lent bits stay after it stops (so stopping costs nothing more);
   tl_timer_leeway hides them while it is inactive, and this replaces them
   at the next start, since that may be on another loop. */
void lend_collect_interval(const tl_loop *loop, tl_timer *t) noexcept {
    uint32_t f = t->flags;
    if (f & kLentLeeway) f &= ~(kLeewayMask | kLentLeeway);
    if (!(f & kLeewayMask)) f |= loop->timers.collect_flags;
    t->flags = f;
}

/* Takes t (f: its flags, still active) out of where it is: the ready or the
   deferred list, or its clock's instance. */
inline void unlink_timer(tl_loop *loop, tl_timer *t, uint32_t f) noexcept {
    TimerQueue &q = loop->timers;
    if (f & (TIMER_READY | TIMER_DEFERRED)) [[unlikely]]
        (f & TIMER_READY ? q.ready : q.deferred).unlink(t);
    else
        q.backend->remove(q.domain[(f & TIMER_CLOCK_MASK) >> TIMER_CLOCK_SHIFT].instance, t);
}

/* Pre: t active. Post: t inactive. The bookkeeping comes first (no backend
   reads a state bit), so that nothing is left after the backend's call. */
[[gnu::always_inline]] inline void disarm(tl_loop *loop, tl_timer *t) noexcept {
    const uint32_t f = t->flags;
    t->flags = f & ~(TIMER_STATE | TIMER_FRESH);
    handle_deactivated(loop, f & TIMER_UNREF);
    unlink_timer(loop, t, f);
}

/* Starting one more timer would exceed tl_loop_options.max_timers. */
bool over_max_timers(const tl_loop *loop) noexcept {
    return loop->timers.max_timers && timers_active(loop) >= loop->timers.max_timers;
}

/* Where a start puts t: on clock c, kind its clock and periodic bits.
   tl_timer_start's is a constant (MONOTONIC, not periodic), so that its
   instance of place indexes no domain and sets no bit. */
struct Relative {
    static constexpr unsigned c = TL_CLOCK_MONOTONIC;
    static constexpr uint32_t kind = 0;
};
struct OnClock {
    unsigned c;
    uint32_t kind;
};

/* Pre: t inactive, inserted. Post: t active, owned by loop. */
inline void activate(tl_loop *loop, tl_timer *t) noexcept {
    t->flags |= TIMER_ACTIVE;
    set_timer_owner(t, loop->id); /* read only while active */
    handle_activated(loop, t->flags & TIMER_UNREF);
}

/* A start that asks for nothing but the backend's insert: t inactive
   without a lent leeway, no option set, no dispatch running (first_start).
   0, or the insert's error: t then stays inactive. */
template <class Where>
[[gnu::noinline]] int insert_new(tl_loop *loop, tl_timer *t, uint64_t deadline, uint64_t repeat,
                                 Where to) noexcept {
    TimerQueue &q = loop->timers;
    t->flags = (t->flags & ~(TIMER_CLOCK_MASK | TIMER_PERIODIC)) | to.kind;
    t->deadline = deadline;
    int r = q.backend->insert(q.domain[to.c].instance, t);
    if (r < 0) [[unlikely]]
        return r;
    activate(loop, t);
    t->repeat = repeat;
    TL_DEBUG_VERIFY(loop, "timer start");
    return 0;
}

/* Every start but the restart in place and insert_new's (start): t,
   active or not, to deadline on the clock `to` names. Each step is a rule
   of the contract:
   - an active t leaves where it is (a list: a queued or deferred timer
     restarted does not run in its old place; else its clock's instance);
     an inactive one may not exceed max_timers (-ENOSPC);
   - a start while inactive or onto another clock is lent the collect
     interval;
   - a deadline the running dispatch could still pop parks t in the
     deferred list (a timer restarted during a dispatch does not run again
     in it), its room reserved first so that no timer is lost after its
     start returned 0; a backend without reserve gets t now instead (its
     insert's error is the start's), marked fresh (dispatch.cc defers
     it if this dispatch pops it);
   - any other insert keeps the room of the parked timers.
   0, or -ENOSPC or the backend's error: t is then inactive. */
template <class Where>
[[gnu::noinline]] int place(tl_loop *loop, tl_timer *t, uint64_t deadline, uint64_t repeat,
                            Where to) noexcept {
    TimerQueue &q = loop->timers;
    const tl_timer_backend *b = q.backend;
    void *self = q.domain[to.c].instance;
    uint32_t f = t->flags;
    const uint32_t keep =
        ~(TIMER_READY | TIMER_DEFERRED | TIMER_FRESH | TIMER_CLOCK_MASK | TIMER_PERIODIC);
    if (f & (TIMER_READY | TIMER_DEFERRED))
        (f & TIMER_READY ? q.ready : q.deferred).unlink(t);
    else if (f & TIMER_ACTIVE)
        b->remove(q.domain[(f & TIMER_CLOCK_MASK) >> TIMER_CLOCK_SHIFT].instance, t);
    else if (over_max_timers(loop))
        return -ENOSPC;
    t->flags = (f & keep) | to.kind;
    t->deadline = deadline; /* after the remove: a backend finds t by it */
    if (!(f & TIMER_ACTIVE) || (f & TIMER_CLOCK_MASK) != (to.kind & TIMER_CLOCK_MASK))
        lend_collect_interval(loop, t);
    const bool defer = must_defer(q, to.c, deadline);
    int r = (defer || q.deferred.count) && b->reserve
                ? b->reserve(self, t, q.deferred.count + q.ready.count + 1)
                : 0;
    if (r == 0 && defer && b->reserve) {
        q.deferred.append(t);
        t->flags |= TIMER_DEFERRED;
    } else if (r == 0 && (r = b->insert(self, t)) == 0 && defer) {
        t->flags |= TIMER_FRESH;
        ++q.domain[to.c].fresh;
    }
    if (r < 0) [[unlikely]] {
        if (f & TIMER_ACTIVE) deactivate(loop, t);
        return r;
    }
    if (!(f & TIMER_ACTIVE)) activate(loop, t);
    t->repeat = repeat;
    TL_DEBUG_VERIFY(loop, "timer start");
    return 0;
}

/* The one start path (tl_timer_start, tl_timer_start_at; loop and t checked,
   the clock's instance open), t to deadline on the clock `to` names, re-armed
   by repeat. The heartbeat's restart, t inside that clock's instance, of
   that kind, not fresh, where no running dispatch could pop it, is one
   test of the flags word and the backend's reschedule (a heap leaves a
   later deadline lazy, a wheel too; each keeps its own wake-up exact); a
   first start asking nothing more is insert_new's; every other, place's. */
template <class Where>
[[gnu::always_inline]] inline int start(tl_loop *loop, tl_timer *t, uint64_t deadline,
                                        uint64_t repeat, Where to) noexcept {
    TimerQueue &q = loop->timers;
    constexpr uint32_t kPlace = TIMER_STATE | TIMER_FRESH | TIMER_CLOCK_MASK | TIMER_PERIODIC;
    if ((t->flags & kPlace) == (TIMER_ACTIVE | to.kind) && !must_defer(q, to.c, deadline) &&
        q.backend->reschedule) [[likely]] {
        t->repeat = repeat;
        q.backend->reschedule(q.domain[to.c].instance, t, deadline);
        TL_DEBUG_VERIFY(loop, "timer start");
        return 0;
    }
    const bool first_start =
        ((t->flags & (TIMER_ACTIVE | kLentLeeway)) | q.dispatching | q.collect_flags) == 0 &&
        !q.max_timers;
    if (first_start) [[likely]]
        return insert_new(loop, t, deadline, repeat, to);
    return place(loop, t, deadline, repeat, to);
}

} // namespace

namespace tl::detail {

int timers_open(tl_loop *loop, const tl_timer_backend *backend, const tl_timer_config &config,
                uint32_t collect_flags, uint64_t max_timers,
                uint64_t max_timers_per_iteration) noexcept {
    TimerQueue &q = loop->timers;
    q.backend = backend;
    q.config = config;
    q.collect_flags = collect_flags;
    q.max_timers = max_timers;
    q.max_timers_per_iteration = max_timers_per_iteration;
    for (unsigned c = 0; c < kClocks; ++c) {
        /* The I/O backends' waits end at a CLOCK_MONOTONIC deadline. */
        q.domain[c].by_wait = c == TL_CLOCK_MONOTONIC;
        q.domain[c].fd = -1;
    }
    for (unsigned c = 0; c < kClocks; ++c)
        if (q.domain[c].by_wait) {
            int r = timers_open_domain(loop, c);
            if (r < 0) return r;
        }
    return 0;
}

int timers_open_domain(tl_loop *loop, unsigned c) noexcept {
    TimerQueue &q = loop->timers;
    TimerDomain &d = q.domain[c];
    if (d.instance) return 0;
    d.now = read_clock(loop, c);
    d.dispatched = d.now;
    d.instance = q.backend->create(&q.config, d.now);
    return d.instance ? 0 : -ENOMEM;
}

void timers_close(tl_loop *loop) noexcept {
    TimerQueue &q = loop->timers;
    for (TimerDomain &d : q.domain) {
        if (d.instance) q.backend->destroy(d.instance);
        d.instance = nullptr;
    }
}

uint64_t timers_active(const tl_loop *loop) noexcept {
    const TimerQueue &q = loop->timers;
    uint64_t n = q.ready.count + q.deferred.count;
    for (const TimerDomain &d : q.domain)
        if (d.instance) n += q.backend->count(d.instance);
    return n;
}

} // namespace tl::detail

extern "C" {

namespace {

/* tl_timer_init of a timer its flags say is active: if its owner tag names a
   live loop, it is inside that loop's structures (the backend's links or a
   list point at it), and zeroing it would leave them pointing at a handle
   that no longer says so: a wheel then follows dead links, a heap runs it
   twice. So it is stopped there first, as tl_timer_stop would. Memory that
   only looks active (fresh, a copy, a freed loop's) names no live loop and
   is left to be zeroed. libuv and libev leave this undefined; here it is a
   stop, and a debug build says so on stderr, since it is a bug to fix (the
   timer is not stopped where the program meant it to be). */
[[gnu::noinline]] void stop_before_init(tl_timer *t) noexcept {
    tl_loop *loop = loop_by_id(timer_owner_id(t));
    if (!loop) return;
#ifndef NDEBUG
    check_loop_thread(loop, "tl_timer_init");
    std::fprintf(stderr,
                 "tickloop: tl_timer_init() on an active timer (%p): stopped it first; call "
                 "tl_timer_stop before initialising a timer again\n",
                 static_cast<void *>(t));
#endif
    disarm(loop, t);
    TL_DEBUG_VERIFY(loop, "tl_timer_init of an active timer");
}

} // namespace

TL_API void tl_timer_init(tl_timer *t, tl_timer_cb cb, void *data) {
    if (!t) return;
    if (t->flags & TIMER_ACTIVE) [[unlikely]]
        stop_before_init(t);
    *t = tl_timer{};
    t->cb = cb;
    t->data = data;
}

TL_API int tl_timer_start(tl_loop *loop, tl_timer *t, uint64_t timeout_ns, uint64_t repeat_ns) {
    if (!loop || !t || !t->cb || owned_by_other(loop, t)) return -EINVAL;
    TL_CHECK_LOOP_THREAD(loop);
    /* A relative timer is a MONOTONIC one, not periodic. */
    uint64_t deadline = sat_add(loop->timers.domain[TL_CLOCK_MONOTONIC].now, timeout_ns);
    return start(loop, t, deadline, repeat_ns, Relative{});
}

TL_API int tl_timer_start_at(tl_loop *loop, tl_timer *t, tl_clock clock, uint64_t deadline_ns,
                             uint64_t period_ns) {
    unsigned c = (unsigned)clock;
    if (!loop || !t || !t->cb || c >= (unsigned)kClocks || owned_by_other(loop, t)) return -EINVAL;
    TL_CHECK_LOOP_THREAD(loop);
    if (!(t->flags & TIMER_ACTIVE) && over_max_timers(loop)) return -ENOSPC;
    int r = clock_prepare(loop, c);
    if (r < 0) return r;
    const uint32_t kind = c << TIMER_CLOCK_SHIFT | (period_ns ? TIMER_PERIODIC : 0u);
    return start(loop, t, deadline_ns, period_ns, OnClock{c, kind});
}

TL_API int tl_timer_set_leeway(tl_timer *t, uint64_t leeway_ns) {
    if (!t) return -EINVAL;
    /* 0 on a timer the loop lent its interval to keeps the loan: it has no
       leeway of its own either way. */
    if (leeway_ns == 0 && (t->flags & kLentLeeway)) return 0;
    t->flags = (t->flags & ~(kLeewayMask | kLentLeeway)) | leeway_bits(leeway_ns);
    return 0;
}

TL_API uint64_t tl_timer_leeway(const tl_timer *t) {
    if (!t) return 0;
    /* A loop's lent collect interval counts only while t is active. */
    if ((t->flags & (kLentLeeway | TIMER_ACTIVE)) == kLentLeeway) return 0;
    return timer_leeway(t);
}

TL_API tl_clock tl_timer_clock(const tl_timer *t) {
    return t ? (tl_clock)timer_clock(t) : TL_CLOCK_MONOTONIC;
}

TL_API int tl_timer_stop(tl_loop *loop, tl_timer *t) {
    if (!loop || !t || owned_by_other(loop, t)) return -EINVAL;
    TL_CHECK_LOOP_THREAD(loop);
    if (t->flags & TIMER_ACTIVE) disarm(loop, t);
    TL_DEBUG_VERIFY(loop, "tl_timer_stop");
    return 0;
}

TL_API int tl_timer_again(tl_loop *loop, tl_timer *t) {
    if (!loop || !t || t->repeat == 0) return -EINVAL;
    return tl_timer_start(loop, t, t->repeat, t->repeat);
}

TL_API int tl_timer_set_ref(tl_loop *loop, tl_timer *t, int ref) {
    if (!loop || !t || owned_by_other(loop, t)) return -EINVAL;
    TL_CHECK_LOOP_THREAD(loop);
    bool was = t->flags & TIMER_UNREF;
    if (ref)
        t->flags &= ~TIMER_UNREF;
    else
        t->flags |= TIMER_UNREF;
    if (t->flags & TIMER_ACTIVE) handle_ref_changed(loop, was, !ref);
    return 0;
}

TL_API int tl_timer_active(const tl_timer *t) {
    return t && (t->flags & TIMER_ACTIVE) ? 1 : 0;
}

} // extern "C"
