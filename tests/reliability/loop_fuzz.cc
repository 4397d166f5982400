/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: the public loop API, on every registered timer backend
 * (tl_timer_backend_names), one fresh loop per backend per input.
 *
 * The input is an operation stream. The top level reads operations until the
 * input ends; every timer callback reads a few more from the same stream, so
 * what a callback does (start, stop, again, free any timer including itself,
 * start all of them, stop the loop, re-enter the loop, spin, update the time)
 * is fuzzed as well. Runs are NOWAIT, ONCE (only while a timer is near) or
 * DEFAULT (only while every timer is a near one-shot; a callback that leaves
 * a far or repeating timer behind stops the loop). Timers live in their own
 * allocations, so a library that touched a freed timer trips ASan.
 *
 * The loop reads the real clock, so which timers a run finds due depends on
 * the machine's speed. The rules checked hold whatever the timing:
 * - never early: a callback runs at a dispatch time >= the deadline the model
 *   computed when the timer was (re)armed (tl_now + timeout, saturating), and
 *   t->deadline equals that value after every start;
 * - exact-once: a callback runs only for a timer the model holds active, and a
 *   one-shot is inactive (a repeat re-armed at dispatch time + repeat) in it;
 * - order: when a timer fires no active timer orders before it: backends
 *   with TL_TIMER_CAP_EXACT by (deadline, start order), others by tick;
 * - a timer (re)started during a dispatch does not run in that dispatch;
 * - nothing lost: after a one-iteration run whose dispatch was not cut short
 *   by max_timers_per_iteration, no timer that was due at the dispatch time
 *   (and not restarted during it) is still active, on every backend: the
 *   dispatch collects everything due before running any callback; at the end every near timer
 *   fires in a bounded number of ONCE runs;
 * - bookkeeping: tl_loop_run's result, stats (timers_active, timers_fired,
 *   one iteration per NOWAIT/ONCE), tl_timer_active, -ENOSPC at max_timers,
 *   -EINVAL for again without repeat, -EBUSY for run/free from a callback and
 *   for free with active timers, and tl_loop_free succeeding when idle.
 */
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <tickloop/tickloop.h>
#include <tickloop/timer_backend.h>

#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

namespace {

using fuzz::sat_add;

/* Timer slots per loop: the "start them all" operation is the storm. */
constexpr unsigned kTimers = 64;
/* Top-level operations per input. */
constexpr unsigned kMaxOps = 1024;
/* Timeouts at or above this never come due during an input (an hour). */
constexpr uint64_t kFar = 3600ull * 1000000000;
/* ONCE runs allowed to fire the near timers at the end (each waits for one). */
constexpr unsigned kMaxDrainRuns = 20000;
/* Operations a callback may run (0..kMaxCallbackOps - 1). */
constexpr unsigned kMaxCallbackOps = 4;

struct Session;

/* The model of one timer slot. */
struct Slot {
    Session *session;
    unsigned id;
    tl_timer *timer; /* its own allocation; NULL once freed */
    bool active;
    bool far;          /* its deadline is at least kFar away: never due here */
    uint64_t deadline; /* as armed: tl_now + timeout, saturated */
    uint64_t repeat;
    uint64_t seq;        /* start order */
    uint64_t started_in; /* 1 + iteration of the dispatch that armed it; 0: top level */
};

struct Session {
    const char *backend;
    bool exact; /* TL_TIMER_CAP_EXACT: (deadline, start) order */
    tl_loop_options opts;
    uint32_t cap; /* max_timers_per_iteration in effect */
    tl_loop *loop = nullptr;
    fuzz::Input *in = nullptr;
    Slot slots[kTimers];
    size_t active = 0;
    uint64_t seq = 0;
    uint64_t callbacks = 0; /* callbacks observed */

    /* The run in progress. */
    bool in_run = false;
    tl_run_mode run_mode = TL_RUN_NOWAIT;
    bool dispatch_seen = false; /* a callback of this run has run */
    uint64_t dispatch_iter = 0; /* stats.iterations during that dispatch */
    uint64_t dispatch_now = 0;  /* tl_now at its first callback */
    uint64_t dispatch_fired = 0;
};

uint64_t tick_of(uint64_t deadline, uint64_t tick) {
    return deadline / tick + (deadline % tick != 0);
}

uint64_t tick_ns(const Session &s) {
    return s.opts.tick_ns ? s.opts.tick_ns : 1000000;
}

uint64_t iterations(const Session &s) {
    tl_loop_stats st;
    tl_loop_stats_get(s.loop, &st);
    return st.iterations;
}

/* The first callback of a dispatch records its time (before any callback can
   move tl_now with tl_update_time) and its iteration. */
uint64_t current_dispatch(Session &s) {
    uint64_t iter = iterations(s);
    if (!s.dispatch_seen || iter != s.dispatch_iter) {
        s.dispatch_seen = true;
        s.dispatch_iter = iter;
        s.dispatch_now = tl_now(s.loop);
        s.dispatch_fired = 0;
    }
    return iter + 1;
}

bool orders_before(const Session &s, const Slot &a, const Slot &b) {
    if (s.exact) return a.deadline != b.deadline ? a.deadline < b.deadline : a.seq < b.seq;
    return tick_of(a.deadline, tick_ns(s)) < tick_of(b.deadline, tick_ns(s));
}

void check_bookkeeping(Session &s) {
    tl_loop_stats st;
    tl_loop_stats_get(s.loop, &st);
    FUZZ_CHECK(st.timers_active == s.active, "%s: stats say %llu timers active, the model %zu",
               s.backend, (unsigned long long)st.timers_active, s.active);
    for (const Slot &slot : s.slots) {
        if (!slot.timer) continue;
        FUZZ_CHECK(tl_timer_active(slot.timer) == (int)slot.active,
                   "%s: timer %u: tl_timer_active %d, the model %d", s.backend, slot.id,
                   tl_timer_active(slot.timer), slot.active);
        if (slot.active)
            FUZZ_CHECK(slot.timer->deadline == slot.deadline,
                       "%s: timer %u: deadline %llu, the model %llu", s.backend, slot.id,
                       (unsigned long long)slot.timer->deadline, (unsigned long long)slot.deadline);
    }
}

void on_timer(tl_loop *loop, tl_timer *t);

Slot &slot_for(Session &s, unsigned id) {
    Slot &slot = s.slots[id % kTimers];
    if (!slot.timer) {
        slot.timer = static_cast<tl_timer *>(std::malloc(sizeof(tl_timer)));
        FUZZ_CHECK(slot.timer, "out of memory");
        tl_timer_init(slot.timer, on_timer, &slot);
    }
    return slot;
}

/* A timeout: due now, within nanoseconds or microseconds, within a tick or
   so, far (never due here), or saturating at "never". */
uint64_t decode_timeout(fuzz::Input &in) {
    switch (in.u8() & 7) {
    case 0:
    case 1:
        return 0;
    case 2:
        return in.u8();
    case 3:
        return (uint64_t)in.u16() % 4096 * 16;
    case 4:
        return (uint64_t)in.u8() * 1000;
    case 5:
        return (uint64_t)in.u8() * 5000;
    case 6:
        return kFar + in.u32();
    default:
        return UINT64_MAX - in.u8();
    }
}

uint64_t decode_repeat(fuzz::Input &in) {
    switch (in.u8() & 3) {
    case 0:
    case 1:
        return 0;
    case 2:
        return 1 + (uint64_t)in.u8() * 1000;
    default:
        return kFar + in.u16();
    }
}

/* Arms the model after a successful (re)start. */
void armed(Session &s, Slot &slot, uint64_t deadline, uint64_t timeout, uint64_t repeat) {
    if (!slot.active) ++s.active;
    slot.active = true;
    slot.deadline = deadline;
    slot.far = timeout >= kFar;
    slot.repeat = repeat;
    slot.seq = ++s.seq;
    slot.started_in = 0;
    if (s.in_run) slot.started_in = current_dispatch(s);
}

void start(Session &s, Slot &slot, uint64_t timeout, uint64_t repeat) {
    uint64_t deadline = sat_add(tl_now(s.loop), timeout);
    uint64_t old_repeat = slot.timer->repeat;
    int r = tl_timer_start(s.loop, slot.timer, timeout, repeat);
    if (!slot.active && s.opts.max_timers && s.active >= s.opts.max_timers) {
        FUZZ_CHECK(r == -ENOSPC, "%s: start beyond max_timers %u returned %d", s.backend,
                   s.opts.max_timers, r);
        FUZZ_CHECK(!tl_timer_active(slot.timer) && slot.timer->repeat == old_repeat,
                   "%s: a start refused with -ENOSPC changed the timer", s.backend);
        return;
    }
    FUZZ_CHECK(r == 0, "%s: tl_timer_start(%llu, %llu) returned %d", s.backend,
               (unsigned long long)timeout, (unsigned long long)repeat, r);
    FUZZ_CHECK(slot.timer->deadline == deadline && slot.timer->repeat == repeat,
               "%s: started with deadline %llu repeat %llu, expected %llu %llu", s.backend,
               (unsigned long long)slot.timer->deadline, (unsigned long long)slot.timer->repeat,
               (unsigned long long)deadline, (unsigned long long)repeat);
    armed(s, slot, deadline, timeout, repeat);
}

void stop(Session &s, Slot &slot) {
    FUZZ_CHECK(tl_timer_stop(s.loop, slot.timer) == 0, "%s: tl_timer_stop failed", s.backend);
    if (slot.active) --s.active;
    slot.active = false;
}

void run(Session &s, tl_run_mode mode);

/* again: -EINVAL without a repeat, and the timer is left alone. */
void again(Session &s, Slot &slot) {
    if (slot.timer->repeat == 0) {
        bool was = tl_timer_active(slot.timer);
        FUZZ_CHECK(tl_timer_again(s.loop, slot.timer) == -EINVAL,
                   "%s: again without repeat did not return -EINVAL", s.backend);
        FUZZ_CHECK(tl_timer_active(slot.timer) == was, "%s: a refused again changed the timer",
                   s.backend);
    } else {
        start(s, slot, slot.timer->repeat, slot.timer->repeat);
    }
}

/* Stops the timer, then gives its memory back (the running timer too). */
void free_timer(Session &s, Slot &slot) {
    if (!slot.timer) return;
    stop(s, slot);
    std::memset(slot.timer, 0xa5, sizeof *slot.timer);
    std::free(slot.timer);
    slot.timer = nullptr;
}

/* A top-level run: ONCE while a near timer can end its wait; DEFAULT (if
   asked) while all are near one-shots; else NOWAIT. */
void run_chosen(Session &s, bool want_default) {
    bool near = false, all_near_one_shots = true;
    for (const Slot &slot : s.slots) {
        if (!slot.active) continue;
        near |= !slot.far;
        all_near_one_shots &= !slot.far && !slot.repeat;
    }
    if (want_default && all_near_one_shots)
        run(s, TL_RUN_DEFAULT);
    else
        run(s, near ? TL_RUN_ONCE : TL_RUN_NOWAIT);
}

/* Frees the loop: -EBUSY while running or holding timers, else a new loop. */
void free_loop(Session &s, bool in_callback) {
    int r = tl_loop_free(s.loop);
    if (in_callback || s.active) {
        FUZZ_CHECK(r == -EBUSY, "%s: tl_loop_free returned %d, not -EBUSY", s.backend, r);
        return;
    }
    FUZZ_CHECK(r == 0, "%s: tl_loop_free of an idle loop returned %d", s.backend, r);
    r = tl_loop_new(&s.loop, &s.opts);
    FUZZ_CHECK(r == 0, "%s: tl_loop_new returned %d", s.backend, r);
}

/* Misuse gets -EINVAL and changes nothing. */
void misuse(Session &s) {
    tl_timer bad;
    tl_timer_init(&bad, nullptr, nullptr);
    FUZZ_CHECK(tl_timer_start(s.loop, &bad, 0, 0) == -EINVAL && !tl_timer_active(&bad),
               "%s: a timer without a callback was started", s.backend);
    FUZZ_CHECK(tl_timer_stop(s.loop, &bad) == 0, "%s: stopping an inactive timer failed",
               s.backend);
}

/* One operation, at the top level (self == NULL) or in self's callback. */
void step(Session &s, Slot *self) {
    fuzz::Input &in = *s.in;
    uint8_t code = in.u8();
    unsigned id = in.u8();
    switch (code % 16) {
    case 0:
        break;
    case 1:
    case 2: {
        uint64_t timeout = decode_timeout(in);
        start(s, slot_for(s, id), timeout, decode_repeat(in));
        break;
    }
    case 3:
        if (s.slots[id % kTimers].timer) stop(s, s.slots[id % kTimers]);
        break;
    case 4:
        again(s, slot_for(s, id));
        break;
    case 5:
        free_timer(s, s.slots[id % kTimers]);
        break;
    case 6: { /* start them all (a storm of starts, from a callback or not) */
        uint64_t timeout = decode_timeout(in);
        for (unsigned i = 0; i < kTimers; ++i) start(s, slot_for(s, i), timeout, 0);
        break;
    }
    case 7:
        tl_update_time(s.loop);
        break;
    case 8:
        tl_loop_stop(s.loop);
        break;
    case 9: { /* spin: a long callback, or time passing between runs */
        uint64_t until = sat_add(tl_now(s.loop), (uint64_t)(id % 128) * 1000);
        while (tl_now(s.loop) < until) tl_update_time(s.loop);
        break;
    }
    case 10:
        if (self) {
            FUZZ_CHECK(tl_loop_run(s.loop, TL_RUN_NOWAIT) == -EBUSY,
                       "%s: tl_loop_run from a callback was not -EBUSY", s.backend);
        } else {
            run(s, TL_RUN_NOWAIT);
        }
        break;
    case 11:
    case 12:
        if (!self) run_chosen(s, code % 16 == 12);
        break;
    case 13:
        free_loop(s, self != nullptr);
        break;
    case 14:
        misuse(s);
        break;
    default:
        check_bookkeeping(s);
        break;
    }
}

void on_timer(tl_loop *loop, tl_timer *t) {
    Slot &slot = *static_cast<Slot *>(t->data);
    Session &s = *slot.session;
    FUZZ_CHECK(loop == s.loop && s.in_run, "%s: a callback outside tl_loop_run", s.backend);
    uint64_t dispatch = current_dispatch(s);
    uint64_t now = s.dispatch_now;
    FUZZ_CHECK(slot.active, "%s: timer %u ran, but it was stopped or has run already", s.backend,
               slot.id);
    FUZZ_CHECK(slot.deadline <= now && now <= tl_now(loop),
               "%s: timer %u ran at %llu, deadline %llu: early", s.backend, slot.id,
               (unsigned long long)now, (unsigned long long)slot.deadline);
    FUZZ_CHECK(slot.started_in != dispatch,
               "%s: timer %u was (re)started in this dispatch and ran in it", s.backend, slot.id);
    for (const Slot &other : s.slots)
        FUZZ_CHECK(!other.active || &other == &slot || !orders_before(s, other, slot),
                   "%s: timer %u (deadline %llu, start %llu) ran before timer %u (deadline %llu, "
                   "start %llu) at %llu: out of order",
                   s.backend, slot.id, (unsigned long long)slot.deadline,
                   (unsigned long long)slot.seq, other.id, (unsigned long long)other.deadline,
                   (unsigned long long)other.seq, (unsigned long long)now);
    ++s.dispatch_fired;
    ++s.callbacks;
    FUZZ_CHECK(s.dispatch_fired <= s.cap, "%s: %llu callbacks in one dispatch, the cap is %u",
               s.backend, (unsigned long long)s.dispatch_fired, s.cap);
    if (slot.repeat) {
        /* Re-armed at dispatch time + repeat before the callback runs. */
        uint64_t deadline = sat_add(now, slot.repeat);
        FUZZ_CHECK(tl_timer_active(t) && t->deadline == deadline,
                   "%s: repeating timer %u: active %d, deadline %llu, expected %llu", s.backend,
                   slot.id, tl_timer_active(t), (unsigned long long)t->deadline,
                   (unsigned long long)deadline);
        --s.active; /* armed() counts it again */
        slot.active = false;
        armed(s, slot, deadline, slot.repeat, slot.repeat);
    } else {
        FUZZ_CHECK(!tl_timer_active(t), "%s: one-shot timer %u still active in its callback",
                   s.backend, slot.id);
        slot.active = false;
        --s.active;
    }
    unsigned ops = s.in->u8() % kMaxCallbackOps;
    for (unsigned i = 0; i < ops; ++i) step(s, &slot); /* may free t */
    if (s.run_mode == TL_RUN_DEFAULT)
        for (const Slot &other : s.slots)
            if (other.active && (other.far || other.repeat)) {
                /* DEFAULT would wait for it: end the run after this iteration. */
                tl_loop_stop(loop);
                break;
            }
}

void run(Session &s, tl_run_mode mode) {
    tl_loop_stats before, after;
    tl_loop_stats_get(s.loop, &before);
    uint64_t now_before = tl_now(s.loop);
    s.in_run = true;
    s.run_mode = mode;
    s.dispatch_seen = false;
    uint64_t callbacks = s.callbacks;
    int r = tl_loop_run(s.loop, mode);
    s.in_run = false;
    tl_loop_stats_get(s.loop, &after);
    FUZZ_CHECK(r == (s.active ? 1 : 0), "%s: tl_loop_run returned %d with %zu timers active",
               s.backend, r, s.active);
    FUZZ_CHECK(tl_now(s.loop) >= now_before, "%s: tl_now went backwards", s.backend);
    FUZZ_CHECK(after.timers_fired - before.timers_fired == s.callbacks - callbacks,
               "%s: stats count %llu timer callbacks, %llu ran", s.backend,
               (unsigned long long)(after.timers_fired - before.timers_fired),
               (unsigned long long)(s.callbacks - callbacks));
    uint64_t iters = after.iterations - before.iterations;
    if (mode == TL_RUN_DEFAULT) return;
    FUZZ_CHECK(iters <= 1, "%s: a NOWAIT/ONCE run ran %llu iterations", s.backend,
               (unsigned long long)iters);
    if (iters == 0) return;
    /* Nothing that was due at the dispatch is left, unless the dispatch was
       cut short. Without a callback nothing moved tl_now since the dispatch. */
    bool ran = s.dispatch_seen && s.dispatch_iter == before.iterations;
    uint64_t now = ran ? s.dispatch_now : tl_now(s.loop);
    if (ran && s.dispatch_fired >= s.cap) return;
    uint64_t bound = s.exact ? now : now / tick_ns(s) * tick_ns(s);
    for (const Slot &slot : s.slots)
        FUZZ_CHECK(!slot.active || slot.started_in == before.iterations + 1 ||
                       slot.deadline > bound,
                   "%s: timer %u (deadline %llu) was due at %llu (bound %llu) but did not run: "
                   "lost",
                   s.backend, slot.id, (unsigned long long)slot.deadline, (unsigned long long)now,
                   (unsigned long long)bound);
}

void run_session(Session &s, const uint8_t *data, size_t size) {
    fuzz::Input in(data, size);
    s.in = &in;
    uint8_t config = in.u8();
    static const uint64_t ticks[] = {0, 1000, 50000, 1};
    static const uint32_t slots[] = {0, 16};
    static const uint32_t caps[] = {0, 1, 3, 16};
    static const uint32_t limits[] = {0, 0, 8, 40};
    tl_loop_options_init(&s.opts);
    s.opts.timers = s.backend;
    s.opts.io = config & 1 ? TL_IO_URING : TL_IO_EPOLL;
    s.opts.tick_ns = ticks[config >> 1 & 3];
    s.opts.wheel_slots = slots[config >> 3 & 1];
    s.opts.max_timers_per_iteration = caps[config >> 4 & 3];
    s.opts.max_timers = limits[config >> 6 & 3];
    s.cap = s.opts.max_timers_per_iteration ? s.opts.max_timers_per_iteration : 8192;
    int r = tl_loop_new(&s.loop, &s.opts);
    if (r < 0 && s.opts.io == TL_IO_URING) { /* a kernel without io_uring */
        s.opts.io = TL_IO_EPOLL;
        r = tl_loop_new(&s.loop, &s.opts);
    }
    FUZZ_CHECK(r == 0, "%s: tl_loop_new returned %d", s.backend, r);
    for (unsigned i = 0; i < kTimers; ++i) {
        s.slots[i] = Slot{};
        s.slots[i].session = &s;
        s.slots[i].id = i;
    }

    for (unsigned op = 0; op < kMaxOps && !in.empty(); ++op) step(s, nullptr);
    check_bookkeeping(s);

    /* The end: repeats stopped, every near timer must fire. Callbacks read no
       more operations. */
    in.finish();
    for (Slot &slot : s.slots)
        if (slot.active && slot.repeat) stop(s, slot);
    unsigned runs = 0;
    for (;;) {
        bool near = false;
        for (const Slot &slot : s.slots) near |= slot.active && !slot.far;
        if (!near) break;
        FUZZ_CHECK(++runs <= kMaxDrainRuns, "%s: near timers still active after %u runs: lost",
                   s.backend, kMaxDrainRuns);
        run(s, TL_RUN_ONCE);
    }
    for (Slot &slot : s.slots)
        if (slot.timer) stop(s, slot);
    check_bookkeeping(s);
    r = tl_loop_free(s.loop);
    FUZZ_CHECK(r == 0, "%s: tl_loop_free with no timers returned %d", s.backend, r);
    for (Slot &slot : s.slots) std::free(slot.timer);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *names[64];
    size_t n = std::min<size_t>(tl_timer_backend_names(names, 64), 64);
    FUZZ_CHECK(n >= 2, "only %zu timer backends registered", n);
    for (size_t i = 0; i < n; ++i) {
        Session s;
        s.backend = names[i];
        const tl_timer_backend *b = tl_timer_backend_find(names[i]);
        s.exact = b && (b->caps & TL_TIMER_CAP_EXACT);
        run_session(s, data, size);
    }
    return 0;
}

#ifdef TL_FUZZ_REPLAY
#include "replay.h"
/* Found by this fuzzer: a callback starts every timer with timeout 0 on heap2;
   the first one popped went back in behind the others (fixed in loop/timer.cc). */
FUZZ_REGRESSION(fresh_restarts_keep_start_order)
/* Found by this fuzzer (max_timers_per_iteration 16, heap2): callbacks stopped
   timers queued behind them, and the collect-then-run dispatch counted the cap
   in pops, not callbacks, so due timers were left for the next iteration
   although fewer than 16 callbacks ran (fixed in loop/timer.cc). */
FUZZ_REGRESSION(stopped_queued_timers_leave_their_turn)
FUZZ_REGRESSION(stopped_queued_timers_leave_their_turn_2)
/* A timer restarted inside its heap during a dispatch (parked) had its new
   deadline written before the heap removed it, so the heap looked for it
   under the new deadline and kept a table slot naming it (fixed in
   loop/timer/timer.cc). */
FUZZ_REGRESSION(deferred_restart_leaves_the_heap_table_right)
#endif
