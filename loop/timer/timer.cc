/* SPDX-License-Identifier: MIT */
/*
 * The timer queue (timer_queue.h) and the tl_timer_* API on it: starting
 * and stopping timers in their clock's domain; timer_dispatch.cc runs the
 * due ones, computes the next wake-up and rebases a clock that went back.
 *
 * A timer is active (TIMER_ACTIVE) while it is inside its domain's backend
 * instance, or in one of the queue's two lists of timers no instance holds:
 * the ready list (TIMER_QUEUED: popped, callback not run yet) and the
 * deferred list (TIMER_DEFERRED: started during a dispatch, already due).
 * Its clock bits name its domain. `reserved`
 * then holds the owning loop's id, mixed with the timer's address
 * (timer_owner), so that a handle used with the wrong loop is refused instead
 * of corrupting a structure, and tl_timer_init can find the loop of a timer
 * still active to stop it there. The flags layout is in
 * handle_flags.h.
 *
 * Every start goes through start(): a restart in place is the backend's
 * reschedule; any other is move() (t active) or arm() (t inactive), whose
 * common case is the backend's insert; both go through place(), and a stop
 * is disarm(), which the dispatch's helpers (timer_state.h) complete.
 *
 * A start during a dispatch (timer_dispatch.cc says why) with a deadline
 * the dispatch could still pop is parked in the deferred list and inserted
 * at the dispatch's end, after its start returned 0.
 * So that this insert cannot fail, the room for it is reserved when it is
 * parked (the backend's reserve: a heap grows then, and the start returns
 * -ENOMEM if it cannot), and every insert made while timers are parked keeps
 * that room (reserve_parked; the wheels' reserve is a no-op, their insert
 * never fails). A custom backend without reserve gets the timer at its
 * start instead, so that a failed insert is the start's error, marked
 * TIMER_FRESH: if the dispatch pops it, it goes to the deferred list rather
 * than the ready list, and stays there, out of every instance, until the
 * next dispatch of its domain runs it first (it is due, and was next in the
 * backend's order when popped). A fresh timer the dispatch did not pop (it
 * was started by a callback of its last chunk, or a cap stopped it) keeps
 * its mark, with the low bits of its dispatch's count: a later dispatch
 * pops it as any due timer (one four dispatches later would defer it once
 * more: an iteration late, never lost).
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
    return (t->flags & TIMER_ACTIVE) && t->reserved != timer_owner(loop->id, t);
}

/* t's deadline has passed by d's time: a restart of t is a remove and an
   insert, never the backend's reschedule, which may leave t's old place
   (due now) to be visited for nothing: a wheel's lazy reschedule, with the
   wheel's time behind the loop's (tl_update_time, a run without an
   iteration), made tl_loop_timeout return 0 with nothing due. */
bool overdue(const TimerDomain &d, const tl_timer *t) noexcept {
    return t->deadline <= d.now;
}

/* A timer without a leeway of its own takes the loop's collect interval
   (none when collect_flags is 0) when it starts while inactive or moves to
   another clock, not at a restart (the heartbeat's path stays as it was; a
   timer keeps what it was lent). The lent bits stay after it stops (so
   stopping costs nothing more); tl_timer_leeway hides them while it is
   inactive, and this replaces them at the next start, since that may be
   on another loop. start_slow's kSlowCollect keeps it off the fast path. */
void lend_collect_interval(const tl_loop *loop, tl_timer *t) noexcept {
    uint32_t f = t->flags;
    if (f & kLentLeeway) f &= ~(kLeewayMask | kLentLeeway);
    if (!(f & kLeewayMask)) f |= loop->timers.collect_flags;
    t->flags = f;
}

/* Before t goes into instance self or the deferred list while a dispatch
   runs: room in self for t and for every timer the dispatch may still insert
   before it ends (the parked ones, and the ready ones, which a re-arm puts
   back), so that the inserts at the dispatch's end cannot fail. Counting the
   timers of every clock is more than one instance needs, never less.
   0 or -ENOMEM. */
int reserve_parked(TimerQueue &q, void *self, const tl_timer *t) noexcept {
    if (!q.backend->reserve) return 0;
    return q.backend->reserve(self, t, q.deferred.count + q.ready.count + 1);
}

/* A backend without reserve: t, due for the running dispatch, goes into
   instance self now (its insert's error is the start's), marked so that the
   dispatch defers it if it pops it. */
int insert_fresh(TimerQueue &q, void *self, tl_timer *t) noexcept {
    int r = q.backend->insert(self, t);
    if (r == 0)
        t->flags = (t->flags & ~TIMER_FRESH_BITS) | TIMER_FRESH |
                   (q.dispatches << TIMER_FRESH_EPOCH_SHIFT & TIMER_FRESH_EPOCH);
    return r;
}

/* Pre: t in neither an instance nor a list; its clock bits are c (whose
   instance exists). Puts t at deadline: in the deferred list if a dispatch
   is running that could still pop it, else in c's instance. Returns 0 or the
   backend's insert (or reserve) error. */
int place(tl_loop *loop, unsigned c, tl_timer *t, uint64_t deadline) noexcept {
    t->deadline = deadline;
    TimerQueue &q = loop->timers;
    void *self = q.domain[c].instance;
    const bool defer = must_defer(q, c, deadline);
    if (defer || q.deferred.count) [[unlikely]] {
        if (!q.backend->reserve)
            return defer ? insert_fresh(q, self, t) : q.backend->insert(self, t);
        int r = reserve_parked(q, self, t);
        if (r < 0) return r;
        if (defer) {
            q.deferred.append(t);
            t->flags |= TIMER_DEFERRED;
            return 0;
        }
    }
    return q.backend->insert(self, t);
}

/* Takes t (f: its flags, still active) out of where it is: the ready or the
   deferred list, or its clock's instance. */
inline void unlink_timer(tl_loop *loop, tl_timer *t, uint32_t f) noexcept {
    TimerQueue &q = loop->timers;
    if (f & (TIMER_QUEUED | TIMER_DEFERRED)) [[unlikely]]
        (f & TIMER_QUEUED ? q.ready : q.deferred).unlink(t);
    else
        q.backend->remove(q.domain[(f & TIMER_CLOCK_MASK) >> TIMER_CLOCK_SHIFT].instance, t);
}

/* Pre: t active. Post: t in neither an instance nor a list (still counted
   active). */
void detach(tl_loop *loop, tl_timer *t) noexcept {
    const uint32_t f = t->flags;
    t->flags = f & ~(TIMER_QUEUED | TIMER_DEFERRED | TIMER_FRESH_BITS);
    unlink_timer(loop, t, f);
}

/* Pre: t active. Post: t inactive. The bookkeeping comes first (no backend
   reads a state bit), so that nothing is left after the backend's call. */
[[gnu::always_inline]] inline void disarm(tl_loop *loop, tl_timer *t) noexcept {
    const uint32_t f = t->flags;
    t->flags = f & ~(TIMER_STATE | TIMER_FRESH_BITS);
    handle_deactivated(loop, f & TIMER_UNREF);
    unlink_timer(loop, t, f);
}

/* Starting one more timer would exceed tl_loop_options.max_timers. */
bool over_max_timers(const tl_loop *loop) noexcept {
    return loop->timers.max_timers && timers_active(loop) >= loop->timers.max_timers;
}

/* Nothing is asked of a start of t (flags f) but the backend's insert: t
   is inactive and holds no lent leeway, and start_slow is 0 (no option, no
   running dispatch). One test. */
bool plain_start(const TimerQueue &q, uint32_t f) noexcept {
    return ((f & (TIMER_ACTIVE | kLentLeeway)) | q.start_slow) == 0;
}

/* arm of a start that is not plain: max_timers, the collect interval, a
   running dispatch. */
[[gnu::noinline]] int arm_slow(tl_loop *loop, unsigned c, tl_timer *t, uint64_t deadline) noexcept {
    if (over_max_timers(loop)) return -ENOSPC;
    lend_collect_interval(loop, t);
    return place(loop, c, t, deadline);
}

/* Pre: t not active, its clock bits c; plain: plain_start held. Starts t at
   deadline (place(), which a plain start needs only the backend's insert
   of); on failure it stays inactive. */
inline int arm(tl_loop *loop, unsigned c, tl_timer *t, uint64_t deadline, bool plain) noexcept {
    TimerQueue &q = loop->timers;
    int r;
    if (plain) [[likely]] {
        t->deadline = deadline;
        r = q.backend->insert(q.domain[c].instance, t);
    } else {
        r = arm_slow(loop, c, t, deadline);
    }
    if (r < 0) [[unlikely]]
        return r;
    const uint32_t g = t->flags | TIMER_ACTIVE;
    t->flags = g;
    t->reserved = timer_owner(loop->id, t); /* read only while active */
    handle_activated(loop, g & TIMER_UNREF);
    return 0;
}

/* The backend can move t, inside c's instance, to deadline in place: no
   running dispatch could pop it there, and its deadline has not passed. */
bool reschedulable(const TimerQueue &q, unsigned c, const tl_timer *t, uint64_t deadline) noexcept {
    return !must_defer(q, c, deadline) && !overdue(q.domain[c], t) && q.backend->reschedule;
}

/* Pre: t active, owned by loop. Moves it to deadline on clock c: in place
   when it is inside c's instance and reschedulable, else out of where it is
   (another clock's instance: it then takes the loop's collect interval, as
   at a start) and placed anew. 0, or the insert's error: t is then
   inactive. */
[[gnu::noinline]] int move(tl_loop *loop, tl_timer *t, unsigned c, uint64_t deadline) noexcept {
    TimerQueue &q = loop->timers;
    const unsigned from = timer_clock(t);
    if (from == c && !(t->flags & (TIMER_QUEUED | TIMER_DEFERRED)) &&
        reschedulable(q, c, t, deadline)) {
        q.backend->reschedule(q.domain[c].instance, t, deadline); /* sets t->deadline */
        t->flags &= ~TIMER_FRESH_BITS; /* no longer due for the dispatch */
        return 0;
    }
    detach(loop, t);
    if (from != c) {
        t->flags = (t->flags & ~TIMER_CLOCK_MASK) | c << TIMER_CLOCK_SHIFT;
        lend_collect_interval(loop, t);
    }
    int r = place(loop, c, t, deadline);
    if (r < 0) deactivate(loop, t);
    return r;
}

/* Where a start puts t: on clock c, kind its clock and periodic bits.
   tl_timer_start's is a constant (MONOTONIC, not periodic), so that its
   instance of start_elsewhere indexes no domain and sets no bit. */
struct Relative {
    static constexpr unsigned c = TL_CLOCK_MONOTONIC;
    static constexpr uint32_t kind = 0;
};
struct OnClock {
    unsigned c;
    uint32_t kind;
};

/* start's every case but the in-place move, out of line so that the
   heartbeat's restart needs no frame: t active moves, t inactive is armed. */
template <class Where>
[[gnu::noinline]] int start_elsewhere(tl_loop *loop, tl_timer *t, uint64_t deadline,
                                      uint64_t repeat, Where to) noexcept {
    const uint32_t f = t->flags;
    const bool plain = plain_start(loop->timers, f);
    int r;
    if (!plain && (f & TIMER_ACTIVE)) {
        t->flags = (f & ~TIMER_PERIODIC) | (to.kind & TIMER_PERIODIC);
        r = move(loop, t, to.c, deadline);
    } else {
        t->flags = (f & ~(TIMER_CLOCK_MASK | TIMER_PERIODIC)) | to.kind;
        r = arm(loop, to.c, t, deadline, plain);
    }
    if (r < 0) return r;
    t->repeat = repeat;
    TL_DEBUG_VERIFY(loop, "timer start");
    return 0;
}

/* The one start path (tl_timer_start, tl_timer_start_at; loop and t checked,
   the clock's instance open): t goes to deadline on the clock `to` names,
   re-armed by repeat (deadline and repeat in the registers the backend's
   reschedule and start_elsewhere take them in). The heartbeat's restart, t
   of that kind inside the clock's instance and not fresh, reschedulable:
   one test of the flags word and the backend's call; every other case is
   move or arm. 0, or -ENOSPC (max_timers) or the backend's error: t is
   then inactive. */
template <class Where>
[[gnu::always_inline]] inline int start(tl_loop *loop, tl_timer *t, uint64_t deadline,
                                        uint64_t repeat, Where to) noexcept {
    TimerQueue &q = loop->timers;
    constexpr uint32_t kPlace = TIMER_STATE | TIMER_FRESH_BITS | TIMER_CLOCK_MASK | TIMER_PERIODIC;
    if ((t->flags & kPlace) == (TIMER_ACTIVE | to.kind) && reschedulable(q, to.c, t, deadline))
        [[likely]] {
        t->repeat = repeat;
        q.backend->reschedule(q.domain[to.c].instance, t, deadline);
        TL_DEBUG_VERIFY(loop, "timer start");
        return 0;
    }
    return start_elsewhere(loop, t, deadline, repeat, to);
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
    q.start_slow = (max_timers ? kSlowMaxTimers : 0u) | (collect_flags ? kSlowCollect : 0u);
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
    tl_loop *loop = loop_by_id(t->reserved ^ timer_owner(0, t));
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
