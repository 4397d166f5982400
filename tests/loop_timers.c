/* SPDX-License-Identifier: MIT */
/*
 * Timers through the loop, in real time, once per registered timer backend
 * (opts.timers), and the loop's run/stop/free/time/stats behaviour around
 * them (callbacks that stop, free and restart timers: loop_timer_callbacks.c).
 *
 * Timing assertions are one-sided where it matters: "never early" and order
 * are exact, lateness only loose (a slow, loaded machine under ASan can be
 * hundreds of milliseconds late). Each test runs for tens of milliseconds.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include <tickloop/tickloop.h>
#include <tickloop/timer_backend.h>

#include "backend_params.h"
#include "loop_helpers.h"

/* Generous bound on lateness: anything beyond this is a hang, not jitter. */
#define MAX_LATE (500 * MS)

/* ------------------------------------------------------------------------ */
/* A record of fired timers                                                 */
/* ------------------------------------------------------------------------ */

#define MAX_TIMERS 256

struct fired {
    tl_timer timers[MAX_TIMERS];
    int order[MAX_TIMERS * 4]; /* index of each timer in firing order */
    uint64_t deadline[MAX_TIMERS * 4];
    int n;
    const char *backend;
};

/* Checks "never early" (by the clock and by tl_now) and "not absurdly late",
 * then records the timer. */
static void on_record(tl_loop *loop, tl_timer *t) {
    struct fired *f = t->data;
    uint64_t clock = mono_ns();
    cr_assert(clock >= t->deadline, "%s: fired %llu ns early by the clock", f->backend,
              (unsigned long long)(t->deadline - clock));
    cr_assert(tl_now(loop) >= t->deadline, "%s: fired %llu ns early by tl_now", f->backend,
              (unsigned long long)(t->deadline - tl_now(loop)));
    cr_assert(clock - t->deadline < MAX_LATE, "%s: fired %llu ms late", f->backend,
              (unsigned long long)((clock - t->deadline) / MS));
    cr_assert(f->n < MAX_TIMERS * 4, "too many callbacks");
    f->order[f->n] = (int)(t - f->timers);
    f->deadline[f->n] = t->deadline;
    f->n++;
}

static void fired_init(struct fired *f, const char *backend, int n, tl_timer_cb cb) {
    memset(f, 0, sizeof *f);
    f->backend = backend;
    for (int i = 0; i < n; ++i) tl_timer_init(&f->timers[i], cb, f);
}

static uint64_t tick_of(uint64_t deadline) {
    return deadline / MS + (deadline % MS != 0);
}

/* Heaps: deadline order (ties by start order are checked separately);
 * others: tick order with the loop's default 1 ms tick. */
static void check_firing_order(const struct fired *f) {
    for (int i = 1; i < f->n; ++i) {
        if (backend_exact(f->backend))
            cr_assert(f->deadline[i] >= f->deadline[i - 1], "%s: fired deadline %llu after %llu",
                      f->backend, (unsigned long long)f->deadline[i],
                      (unsigned long long)f->deadline[i - 1]);
        else
            cr_assert(tick_of(f->deadline[i]) >= tick_of(f->deadline[i - 1]),
                      "%s: fired tick %llu after tick %llu", f->backend,
                      (unsigned long long)tick_of(f->deadline[i]),
                      (unsigned long long)tick_of(f->deadline[i - 1]));
    }
}

/* ------------------------------------------------------------------------ */
/* Firing: never early, in order                                            */
/* ------------------------------------------------------------------------ */

BACKEND_TEST(timer, fires_never_early_and_in_deadline_order) {
    tl_loop *loop = new_loop_with(p->name);
    static struct fired f;
    fired_init(&f, p->name, 200, on_record);
    /* Timeouts 0..30 ms with sub-millisecond parts, started out of order. */
    for (int i = 0; i < 200; ++i) {
        uint64_t timeout = (uint64_t)((i * 7919) % 200) * 150000 + (uint64_t)(i % 7) * 1111;
        cr_assert(tl_timer_start(loop, &f.timers[i], timeout, 0) == 0);
        cr_assert(f.timers[i].deadline == tl_now(loop) + timeout);
    }
    run_to_end(loop);
    cr_assert(f.n == 200, "%s: %d of 200 timers fired", p->name, f.n);
    check_firing_order(&f);
    free_loop(loop);
}

BACKEND_TEST(timer, equal_deadlines_fire_in_start_order) {
    tl_loop *loop = new_loop_with(p->name);
    static struct fired f;
    fired_init(&f, p->name, 20, on_record);
    /* Same tl_now, same timeout: equal deadlines, started 0..19. */
    for (int i = 0; i < 20; ++i) cr_assert(tl_timer_start(loop, &f.timers[i], 2 * MS, 0) == 0);
    for (int i = 1; i < 20; ++i) cr_assert(f.timers[i].deadline == f.timers[0].deadline);
    run_to_end(loop);
    cr_assert(f.n == 20, "%s: %d of 20 fired", p->name, f.n);
    if (backend_exact(p->name))
        for (int i = 0; i < 20; ++i)
            cr_assert(f.order[i] == i, "%s: callback %d is timer %d", p->name, i, f.order[i]);
    free_loop(loop);
}

/* ------------------------------------------------------------------------ */
/* Repeat and again                                                         */
/* ------------------------------------------------------------------------ */

struct repeating {
    tl_timer timer;
    int count;
    uint64_t last; /* tl_now in the previous callback */
};

static void on_repeat(tl_loop *loop, tl_timer *t) {
    struct repeating *rp = t->data;
    cr_assert(tl_timer_active(t) == 1, "a repeating timer is re-armed before its callback");
    cr_assert(t->deadline == tl_now(loop) + t->repeat,
              "re-armed at %llu, expected now %llu + repeat %llu", (unsigned long long)t->deadline,
              (unsigned long long)tl_now(loop), (unsigned long long)t->repeat);
    /* The previous callback saw deadline = its tl_now + repeat. */
    if (rp->count) cr_assert(mono_ns() >= rp->last + t->repeat, "repeat fired early");
    rp->last = tl_now(loop);
    if (++rp->count == 5) cr_assert(tl_timer_stop(loop, t) == 0);
}

BACKEND_TEST(timer, repeat_rearms_before_callback) {
    tl_loop *loop = new_loop_with(p->name);
    struct repeating rp = {0};
    tl_timer_init(&rp.timer, on_repeat, &rp);
    cr_assert(tl_timer_start(loop, &rp.timer, 2 * MS, 2 * MS) == 0);
    cr_assert(rp.timer.repeat == 2 * MS);
    run_to_end(loop);
    cr_assert(rp.count == 5, "%s: %d of 5", p->name, rp.count);
    cr_assert(tl_timer_active(&rp.timer) == 0);
    free_loop(loop);
}

static void on_count(tl_loop *loop, tl_timer *t) {
    (void)loop;
    /* A repeating timer's deadline is already the next one here. */
    if (!t->repeat) cr_assert(mono_ns() >= t->deadline, "fired early");
    ++*(int *)t->data;
}

BACKEND_TEST(timer, again_restarts_with_repeat) {
    tl_loop *loop = new_loop_with(p->name);
    int count = 0;
    tl_timer t;
    tl_timer_init(&t, on_count, &count);
    /* No repeat: -EINVAL, inactive timer stays inactive. */
    cr_assert(tl_timer_again(loop, &t) == -EINVAL);
    cr_assert(tl_timer_active(&t) == 0);
    /* No repeat: -EINVAL, active timer unchanged. */
    cr_assert(tl_timer_start(loop, &t, 50 * MS, 0) == 0);
    uint64_t deadline = t.deadline;
    cr_assert(tl_timer_again(loop, &t) == -EINVAL);
    cr_assert(tl_timer_active(&t) == 1 && t.deadline == deadline && t.repeat == 0);
    /* With a repeat: deadline = now + repeat, active. */
    cr_assert(tl_timer_start(loop, &t, 50 * MS, 3 * MS) == 0);
    cr_assert(tl_timer_again(loop, &t) == 0);
    cr_assert(t.deadline == tl_now(loop) + 3 * MS, "%s: again set deadline now + %lld", p->name,
              (long long)(t.deadline - tl_now(loop)));
    cr_assert(tl_timer_active(&t) == 1 && t.repeat == 3 * MS);
    /* Stopped, then again: active again. */
    cr_assert(tl_timer_stop(loop, &t) == 0);
    cr_assert(tl_timer_again(loop, &t) == 0);
    cr_assert(tl_timer_active(&t) == 1);
    int r = tl_loop_run(loop, TL_RUN_ONCE);
    while (r == 1 && count == 0) r = tl_loop_run(loop, TL_RUN_ONCE);
    cr_assert(count >= 1, "%s: run returned %d before the timer fired", p->name, r);
    cr_assert(tl_timer_active(&t) == 1, "still repeating");
    cr_assert(tl_timer_stop(loop, &t) == 0);
    free_loop(loop);
}

/* ------------------------------------------------------------------------ */
/* Saturation, freeing, run modes, stop                                     */
/* ------------------------------------------------------------------------ */

BACKEND_TEST(timer, deadline_saturates_and_never_fires) {
    tl_loop *loop = new_loop_with(p->name);
    int never = 0, soon = 0;
    tl_timer t_max, t_big, t_soon;
    tl_timer_init(&t_max, on_count, &never);
    tl_timer_init(&t_big, on_count, &never);
    tl_timer_init(&t_soon, on_count, &soon);
    cr_assert(tl_timer_start(loop, &t_max, UINT64_MAX, 0) == 0);
    cr_assert(t_max.deadline == UINT64_MAX, "%s: deadline %llu", p->name,
              (unsigned long long)t_max.deadline);
    cr_assert(tl_timer_start(loop, &t_big, UINT64_MAX - 5, UINT64_MAX) == 0);
    cr_assert(t_big.deadline == UINT64_MAX, "%s: now + (UINT64_MAX - 5) did not saturate", p->name);
    cr_assert(tl_timer_start(loop, &t_soon, 3 * MS, 0) == 0);
    cr_assert(tl_loop_run(loop, TL_RUN_NOWAIT) == 1);
    while (soon == 0) cr_assert(tl_loop_run(loop, TL_RUN_ONCE) == 1);
    for (int i = 0; i < 3; ++i) cr_assert(tl_loop_run(loop, TL_RUN_NOWAIT) == 1);
    cr_assert(never == 0, "%s: a UINT64_MAX deadline fired", p->name);
    cr_assert(tl_timer_active(&t_max) && tl_timer_active(&t_big));
    tl_loop_stats st;
    tl_loop_stats_get(loop, &st);
    cr_assert(st.timers_active == 2);
    cr_assert(tl_timer_stop(loop, &t_max) == 0 && tl_timer_stop(loop, &t_big) == 0);
    free_loop(loop);
}

BACKEND_TEST(loop, free_is_busy_while_a_timer_is_active) {
    tl_loop *loop = new_loop_with(p->name);
    int count = 0;
    tl_timer t;
    tl_timer_init(&t, on_count, &count);
    cr_assert(tl_timer_start(loop, &t, 1 * MS, 0) == 0);
    cr_assert(tl_loop_free(loop) == -EBUSY);
    /* Untouched and usable. */
    run_to_end(loop);
    cr_assert(count == 1);
    cr_assert(tl_timer_start(loop, &t, 100 * MS, 0) == 0);
    cr_assert(tl_loop_free(loop) == -EBUSY);
    cr_assert(tl_timer_stop(loop, &t) == 0);
    cr_assert(tl_timer_stop(loop, &t) == 0, "stop of an inactive timer");
    free_loop(loop);
}

BACKEND_TEST(loop, run_returns_whether_handles_remain) {
    tl_loop *loop = new_loop_with(p->name);
    /* Nothing active: every mode returns 0 at once (ONCE must not block). */
    cr_assert(tl_loop_run(loop, TL_RUN_DEFAULT) == 0);
    cr_assert(tl_loop_run(loop, TL_RUN_ONCE) == 0);
    cr_assert(tl_loop_run(loop, TL_RUN_NOWAIT) == 0);

    int count = 0;
    tl_timer later, soon;
    tl_timer_init(&later, on_count, &count);
    tl_timer_init(&soon, on_count, &count);
    cr_assert(tl_timer_start(loop, &later, 10000 * MS, 0) == 0);
    /* NOWAIT with nothing due returns promptly, 1: a handle remains. */
    uint64_t begin = mono_ns();
    for (int i = 0; i < 10; ++i) cr_assert(tl_loop_run(loop, TL_RUN_NOWAIT) == 1);
    cr_assert(mono_ns() - begin < 200 * MS, "%s: 10 NOWAIT runs took %llu ms", p->name,
              (unsigned long long)((mono_ns() - begin) / MS));
    cr_assert(count == 0);
    /* ONCE blocks until the 2 ms timer is due, then returns 1. */
    begin = tl_now(loop);
    cr_assert(tl_timer_start(loop, &soon, 2 * MS, 0) == 0);
    while (count == 0) cr_assert(tl_loop_run(loop, TL_RUN_ONCE) == 1);
    cr_assert(mono_ns() - begin >= 2 * MS);
    cr_assert(tl_timer_stop(loop, &later) == 0);
    /* DEFAULT ends when no handle remains: 0. */
    cr_assert(tl_timer_start(loop, &soon, 1 * MS, 0) == 0);
    run_to_end(loop);
    cr_assert(count == 2);
    free_loop(loop);
}

struct stopper {
    tl_timer timer;
    int count;
    int stop_every;
};

static void on_stop_loop(tl_loop *loop, tl_timer *t) {
    struct stopper *s = t->data;
    if (++s->count % s->stop_every == 0) tl_loop_stop(loop);
}

BACKEND_TEST(loop, stop_from_callback) {
    tl_loop *loop = new_loop_with(p->name);
    struct stopper s = {.stop_every = 3};
    tl_timer_init(&s.timer, on_stop_loop, &s);
    cr_assert(tl_timer_start(loop, &s.timer, 1 * MS, 1 * MS) == 0);
    int r = tl_loop_run(loop, TL_RUN_DEFAULT);
    cr_assert(r == 1, "%s: stopped run returned %d, the repeating timer remains", p->name, r);
    cr_assert(s.count == 3, "%s: %d callbacks before the stop took effect", p->name, s.count);
    /* The stop is consumed: the next run goes on until the next stop. */
    r = tl_loop_run(loop, TL_RUN_DEFAULT);
    cr_assert(r == 1 && s.count == 6, "%s: second run returned %d after %d callbacks", p->name, r,
              s.count);
    cr_assert(tl_timer_stop(loop, &s.timer) == 0);
    free_loop(loop);
}

Test(loop, stop_before_run_returns_at_once) {
    /* tickloop.h (libuv's uv_stop): "if the loop is not running, the next
       tl_loop_run() returns at once, running no iteration ... the request is
       then consumed". */
    tl_loop *loop = new_loop_with(NULL);
    int count = 0;
    tl_timer due, later;
    tl_timer_init(&due, on_count, &count);
    tl_timer_init(&later, on_count, &count);
    cr_assert(tl_timer_start(loop, &due, 0, 0) == 0);
    cr_assert(tl_timer_start(loop, &later, 10000 * MS, 0) == 0);
    tl_loop_stats before, after;
    tl_loop_stats_get(loop, &before);
    tl_loop_stop(loop);
    int r = tl_loop_run(loop, TL_RUN_DEFAULT);
    tl_loop_stats_get(loop, &after);
    int count_after_stopped_run = count;
    /* The request was consumed: the next run iterates and fires the due timer. */
    int r2 = tl_loop_run(loop, TL_RUN_NOWAIT);
    /* Clean up first, so that a failure is reported alone (no leak). */
    tl_timer_stop(loop, &due);
    cr_assert(tl_timer_stop(loop, &later) == 0);
    free_loop(loop);
    cr_assert(r == 1, "run returned %d", r);
    cr_assert(after.iterations == before.iterations, "%llu iterations, expected 0",
              (unsigned long long)(after.iterations - before.iterations));
    cr_assert(count_after_stopped_run == 0, "a timer ran in a stopped run");
    cr_assert(r2 == 1, "second run returned %d", r2);
    cr_assert(count == 1, "the due timer did not run once the stop was consumed");
}

static void on_reenter(tl_loop *loop, tl_timer *t) {
    (void)t;
    cr_assert(tl_loop_run(loop, TL_RUN_NOWAIT) == -EBUSY, "tl_loop_run inside a callback");
    cr_assert(tl_loop_free(loop) == -EBUSY, "tl_loop_free inside a callback");
    ++*(int *)t->data;
}

Test(loop, run_and_free_from_a_callback_are_busy) {
    tl_loop *loop = new_loop_with(NULL);
    int count = 0;
    tl_timer t;
    tl_timer_init(&t, on_reenter, &count);
    cr_assert(tl_timer_start(loop, &t, 0, 0) == 0);
    run_to_end(loop);
    cr_assert(count == 1);
    free_loop(loop);
}

/* ------------------------------------------------------------------------ */
/* Time and statistics                                                      */
/* ------------------------------------------------------------------------ */

struct clocked {
    tl_timer timer;
    uint64_t last_now;
    int count;
};

static void on_clocked(tl_loop *loop, tl_timer *t) {
    struct clocked *c = t->data;
    uint64_t now = tl_now(loop);
    cr_assert(now >= c->last_now, "tl_now went backwards");
    cr_assert(now <= mono_ns(), "tl_now is ahead of CLOCK_MONOTONIC");
    c->last_now = now;
    if (++c->count == 3) {
        /* A long callback: tl_update_time moves tl_now forward. */
        uint64_t begin = mono_ns();
        while (mono_ns() - begin < 2 * MS) {
        }
        tl_update_time(loop);
        cr_assert(tl_now(loop) - now >= 2 * MS, "tl_update_time did not advance tl_now");
        cr_assert(tl_now(loop) <= mono_ns());
        c->last_now = tl_now(loop);
    }
    if (c->count == 20) cr_assert(tl_timer_stop(loop, t) == 0);
}

BACKEND_TEST(loop, now_is_monotonic_and_update_time_advances_it) {
    tl_loop *loop = new_loop_with(p->name);
    uint64_t before = mono_ns();
    uint64_t now = tl_now(loop);
    cr_assert(now <= mono_ns() && now + 1000 * MS > before, "tl_now of a new loop: %llu",
              (unsigned long long)now);
    struct clocked c = {.last_now = now};
    tl_timer_init(&c.timer, on_clocked, &c);
    cr_assert(tl_timer_start(loop, &c.timer, 1 * MS, 1 * MS) == 0);
    run_to_end(loop);
    cr_assert(c.count == 20);
    cr_assert(tl_now(loop) >= c.last_now);
    uint64_t cached = tl_now(loop);
    uint64_t begin = mono_ns();
    while (mono_ns() - begin < 1 * MS) {
    }
    cr_assert(tl_now(loop) == cached, "tl_now is cached, not read from the clock");
    tl_update_time(loop);
    cr_assert(tl_now(loop) > cached);
    cr_assert(tl_now(NULL) == 0);
    free_loop(loop);
}

BACKEND_TEST(loop, stats_count_iterations_and_timers) {
    tl_loop *loop = new_loop_with(p->name);
    tl_loop_stats st;
    tl_loop_stats_get(loop, &st);
    cr_assert(st.iterations == 0 && st.timers_fired == 0 && st.timers_active == 0 &&
              st.io_events == 0);
    static struct fired f;
    fired_init(&f, p->name, 10, on_record);
    for (int i = 0; i < 10; ++i)
        cr_assert(tl_timer_start(loop, &f.timers[i], (uint64_t)(i % 3) * MS, 0) == 0);
    tl_loop_stats_get(loop, &st);
    cr_assert(st.timers_active == 10, "%s: timers_active %llu", p->name,
              (unsigned long long)st.timers_active);
    cr_assert(tl_timer_stop(loop, &f.timers[9]) == 0);
    tl_loop_stats_get(loop, &st);
    cr_assert(st.timers_active == 9);
    run_to_end(loop);
    tl_loop_stats_get(loop, &st);
    cr_assert(st.timers_fired == 9, "%s: timers_fired %llu", p->name,
              (unsigned long long)st.timers_fired);
    cr_assert(st.timers_active == 0);
    cr_assert(st.iterations >= 1 && st.iterations <= 1000,
              "%s: %llu iterations for timers "
              "due within 2 ms",
              p->name, (unsigned long long)st.iterations);
    cr_assert(st.io_events == 0);
    uint64_t iterations = st.iterations;
    tl_timer extra;
    int count = 0;
    tl_timer_init(&extra, on_count, &count);
    cr_assert(tl_timer_start(loop, &extra, 10000 * MS, 0) == 0);
    cr_assert(tl_loop_run(loop, TL_RUN_NOWAIT) == 1);
    tl_loop_stats_get(loop, &st);
    cr_assert(st.iterations == iterations + 1, "NOWAIT is one iteration");
    cr_assert(tl_timer_stop(loop, &extra) == 0);
    tl_loop_stats_get(NULL, &st);
    cr_assert(st.iterations == 0 && st.timers_fired == 0, "stats of NULL are zero");
    free_loop(loop);
}

/* Timers at distinct sub-millisecond offsets over ~20 ms: every wakeup
 * should fire something (heaps), or at least not spin (others, whose
 * next_expiry may be a cascade point rather than a deadline). */
static void check_no_busy_spin(const char *backend) {
    tl_loop *loop = new_loop_with(backend);
    static struct fired f;
    fired_init(&f, backend, 20, on_record);
    for (int i = 0; i < 20; ++i)
        cr_assert(tl_timer_start(loop, &f.timers[i], (uint64_t)i * MS + 333333, 0) == 0);
    run_to_end(loop);
    cr_assert(f.n == 20);
    check_firing_order(&f);
    tl_loop_stats st;
    tl_loop_stats_get(loop, &st);
    uint64_t limit = backend_exact(backend) ? 20 + 2 : 20 * 13;
    cr_assert(st.iterations <= limit, "%s: %llu iterations (%llu empty) for 20 timers: spinning",
              backend, (unsigned long long)st.iterations, (unsigned long long)st.empty_wakeups);
    if (backend_exact(backend))
        cr_assert(st.empty_wakeups == 0, "%s: %llu empty wakeups: woke before the deadline",
                  backend, (unsigned long long)st.empty_wakeups);
    free_loop(loop);
}

BACKEND_TEST(loop, waits_without_spinning) {
    check_no_busy_spin(p->name);
}

BACKEND_TEST(loop, millisecond_wait_fallback_is_never_early) {
    /* epoll.cc: TICKLOOP_EPOLL_TIMERFD=0 selects relative waits and
       TICKLOOP_EPOLL_PWAIT2=0 forces epoll_wait among them, whose timeout is
       rounded up to whole milliseconds; other I/O backends ignore both. */
    cr_assert(setenv("TICKLOOP_EPOLL_TIMERFD", "0", 1) == 0);
    cr_assert(setenv("TICKLOOP_EPOLL_PWAIT2", "0", 1) == 0);
    check_no_busy_spin(p->name);
}

BACKEND_TEST(timer, fires_in_order_with_other_tick_and_slot_sizes) {
    /* 64 slots of 250 us: the timers span several revolutions of a wheel. */
    tl_loop_options opts;
    tl_loop_options_init(&opts);
    opts.timers = p->name;
    opts.tick_ns = 250000;
    opts.wheel_slots = 64;
    tl_loop *loop = NULL;
    int r = tl_loop_new(&loop, &opts);
    cr_assert(r == 0, "%s: tl_loop_new: %s", p->name, tl_strerror(r));
    static struct fired f;
    fired_init(&f, p->name, 100, on_record);
    for (int i = 0; i < 100; ++i) {
        uint64_t timeout = (uint64_t)((i * 37) % 100) * 400000 + (uint64_t)(i % 3) * 77777;
        cr_assert(tl_timer_start(loop, &f.timers[i], timeout, 0) == 0);
    }
    run_to_end(loop);
    cr_assert(f.n == 100, "%s: %d of 100 fired", p->name, f.n);
    for (int i = 1; i < f.n; ++i) {
        uint64_t a = f.deadline[i - 1], b = f.deadline[i];
        if (backend_exact(p->name))
            cr_assert(b >= a, "%s: deadline %llu after %llu", p->name, (unsigned long long)b,
                      (unsigned long long)a);
        else
            cr_assert((b + 249999) / 250000 >= (a + 249999) / 250000,
                      "%s: 250 us tick of %llu after that of %llu", p->name, (unsigned long long)b,
                      (unsigned long long)a);
    }
    free_loop(loop);
}

/* ------------------------------------------------------------------------ */
/* Choosing the backend                                                     */
/* ------------------------------------------------------------------------ */

BACKEND_TEST(loop, timers_env_selects_backend) {
    cr_assert(setenv("TICKLOOP_TIMERS", p->name, 1) == 0);
    tl_loop *loop = new_loop_with(NULL);
    cr_assert(strcmp(tl_loop_timers_name(loop), p->name) == 0, "env %s gave %s", p->name,
              tl_loop_timers_name(loop));
    free_loop(loop);
    /* NULL options read the environment too. */
    cr_assert(tl_loop_new(&loop, NULL) == 0);
    cr_assert(strcmp(tl_loop_timers_name(loop), p->name) == 0);
    /* Fires timers like any other. */
    int count = 0;
    tl_timer t;
    tl_timer_init(&t, on_count, &count);
    cr_assert(tl_timer_start(loop, &t, 1 * MS, 0) == 0);
    run_to_end(loop);
    cr_assert(count == 1);
    free_loop(loop);
    /* opts.timers wins over the environment: any other registered backend. */
    const char *names[2];
    cr_assert(tl_timer_backend_names(names, 2) >= 2, "one backend registered");
    const char *other = strcmp(p->name, names[0]) == 0 ? names[1] : names[0];
    loop = new_loop_with(other);
    free_loop(loop);
}

Test(loop, default_backend_without_env) {
    cr_assert(unsetenv("TICKLOOP_TIMERS") == 0);
    tl_loop *loop = new_loop_with(NULL);
    const char *name = tl_loop_timers_name(loop);
    cr_assert(name && tl_timer_backend_find(name) != NULL, "default backend %s not registered",
              name ? name : "NULL");
    free_loop(loop);
    /* An empty variable means "not set". */
    cr_assert(setenv("TICKLOOP_TIMERS", "", 1) == 0);
    loop = new_loop_with(NULL);
    cr_assert(strcmp(tl_loop_timers_name(loop), name) == 0);
    free_loop(loop);
}

Test(loop, unknown_backend_name_is_enoent) {
    tl_loop_options opts;
    tl_loop_options_init(&opts);
    opts.timers = "no_such_backend";
    tl_loop *loop = NULL;
    cr_assert(tl_loop_new(&loop, &opts) == -ENOENT);
    cr_assert(loop == NULL);
    cr_assert(setenv("TICKLOOP_TIMERS", "no_such_backend", 1) == 0);
    cr_assert(tl_loop_new(&loop, NULL) == -ENOENT, "unknown name in TICKLOOP_TIMERS");
}

/* ------------------------------------------------------------------------ */
/* tl_loop_timeout after an overdue timer moved away                        */
/* ------------------------------------------------------------------------ */

static void must_not_fire(tl_loop *loop, tl_timer *t) {
    (void)loop;
    cr_assert_fail("timer %p fired", (void *)t);
}

/* A timer started at a deadline already past, then restarted 10 s ahead (or
 * stopped, another timer waiting 10 s): nothing is due, so tl_loop_timeout
 * is about 10 s. The wheels noted the overdue deadline and kept the note
 * after the timer left, and the timeout was 0 once (an empty iteration). The
 * deadlines cover a past tick, the tick in progress and now itself. */
BACKEND_TEST(loop, restarting_an_overdue_timer_leaves_no_spurious_zero_timeout) {
    tl_loop *loop = new_loop_with(p->name);
    tl_timer t, later;
    tl_timer_init(&t, must_not_fire, NULL);
    tl_timer_init(&later, must_not_fire, NULL);
    static const uint64_t past[] = {1000 * MS, 5 * MS, MS + 1, MS, MS - 1, MS / 2, 1000, 1, 0};
    for (int how = 0; how < 3; ++how)
        for (size_t i = 0; i < sizeof past / sizeof past[0]; ++i) {
            /* The backend's now is the loop's: a deadline before tl_now is
               one before the last now the backend was given. */
            cr_assert_geq(tl_loop_run(loop, TL_RUN_NOWAIT), 0);
            uint64_t now = tl_now(loop);
            if (how > 0) cr_assert_eq(tl_timer_start(loop, &later, 10000 * MS, 0), 0);
            cr_assert_eq(tl_timer_start_at(loop, &t, TL_CLOCK_MONOTONIC, now - past[i], 0), 0);
            if (how == 2)
                cr_assert_eq(tl_timer_stop(loop, &t), 0);
            else
                cr_assert_eq(tl_timer_start(loop, &t, 10000 * MS, 0), 0);
            check_loop(loop);
            uint64_t ns = tl_loop_timeout(loop);
            cr_assert(ns >= 9000 * MS && ns <= 10100 * MS,
                      "%s: a timer %llu ns overdue, %s: tl_loop_timeout %llu ns", p->name,
                      (unsigned long long)past[i],
                      how == 2   ? "stopped, another 10 s ahead"
                      : how == 1 ? "restarted 10 s ahead, another there too"
                                 : "restarted 10 s ahead",
                      (unsigned long long)ns);
            tl_timer_stop(loop, &t);
        }
    tl_timer_stop(loop, &later);
    free_loop(loop);
}

/* ------------------------------------------------------------------------ */
/* A custom backend without reserve, whose insert fails on demand           */
/* ------------------------------------------------------------------------ */

/* Up to 512 timers in (deadline, insertion) order, in an array; insert fails
 * while nr_fail is set. No reserve: the loop cannot make room ahead. */
#define NR_CAP 512
static tl_timer *nr_slots[NR_CAP];
static size_t nr_count;
static int nr_fail;
static void *nr_create(const tl_timer_config *cfg, uint64_t now) {
    (void)cfg;
    (void)now;
    nr_count = 0;
    return nr_slots;
}
static void nr_destroy(void *self) {
    (void)self;
}
static int nr_insert(void *self, tl_timer *t) {
    (void)self;
    if (nr_fail || nr_count == NR_CAP) return -ENOMEM;
    size_t i = nr_count;
    while (i > 0 && nr_slots[i - 1]->deadline > t->deadline) {
        nr_slots[i] = nr_slots[i - 1];
        --i;
    }
    nr_slots[i] = t;
    ++nr_count;
    return 0;
}
static void nr_remove(void *self, tl_timer *t) {
    (void)self;
    for (size_t i = 0; i < nr_count; ++i)
        if (nr_slots[i] == t) {
            memmove(&nr_slots[i], &nr_slots[i + 1], (nr_count - i - 1) * sizeof nr_slots[0]);
            --nr_count;
            return;
        }
}
static uint64_t nr_next(void *self) {
    (void)self;
    return nr_count ? nr_slots[0]->deadline : UINT64_MAX;
}
static tl_timer *nr_pop(void *self, uint64_t now) {
    (void)self;
    if (!nr_count || nr_slots[0]->deadline > now) return NULL;
    tl_timer *t = nr_slots[0];
    nr_remove(self, t);
    return t;
}
static size_t nr_size(void *self) {
    (void)self;
    return nr_count;
}
static const tl_timer_backend no_reserve_backend = {
    .name = "loop-timers-no-reserve",
    .create = nr_create,
    .destroy = nr_destroy,
    .insert = nr_insert,
    .remove = nr_remove,
    .next_expiry = nr_next,
    .pop_expired = nr_pop,
    .count = nr_size,
    .caps = TL_TIMER_CAP_EXACT,
};

/* first and then NR_DUE more timers are due together: more than a chunk of
   the dispatch (256), so that the dispatch pops again after first's
   callback ran, and would pop `late`, started there, due at once. */
#define NR_DUE 300
struct nr_case {
    tl_timer first, second[NR_DUE], late;
    int iteration;                       /* of the run in progress */
    int ran_first, ran_second, ran_late; /* the iteration each ran in, 0: not */
    int seconds;                         /* second[] callbacks run */
    int start_result;
};

static void nr_on_late(tl_loop *loop, tl_timer *t) {
    (void)loop;
    struct nr_case *c = t->data;
    cr_assert_eq(c->ran_late, 0, "ran twice");
    c->ran_late = c->iteration;
}

static void nr_on_second(tl_loop *loop, tl_timer *t) {
    (void)loop;
    struct nr_case *c = t->data;
    c->ran_second = c->iteration;
    ++c->seconds;
}

/* Starts `late` due at once, during the dispatch. */
static void nr_on_first(tl_loop *loop, tl_timer *t) {
    struct nr_case *c = t->data;
    c->ran_first = c->iteration;
    c->start_result = tl_timer_start(loop, &c->late, 0, 0);
}

static tl_loop *no_reserve_loop(struct nr_case *c) {
    int r = tl_timer_backend_register(&no_reserve_backend);
    cr_assert(r == 0 || r == -EEXIST);
    nr_fail = 0;
    tl_loop *loop = new_loop_with(no_reserve_backend.name);
    memset(c, 0, sizeof *c);
    tl_timer_init(&c->first, nr_on_first, c);
    tl_timer_init(&c->late, nr_on_late, c);
    cr_assert_eq(tl_timer_start(loop, &c->first, 0, 0), 0);
    for (int i = 0; i < NR_DUE; ++i) {
        tl_timer_init(&c->second[i], nr_on_second, c);
        cr_assert_eq(tl_timer_start(loop, &c->second[i], 0, 0), 0);
    }
    return loop;
}

/* The timer a callback starts due at once is inserted then, so a failing
   insert is tl_timer_start's -ENOMEM: it used to return 0, and the insert
   at the dispatch's end failed and dropped the timer. */
Test(loop, due_start_in_a_dispatch_without_reserve_fails_at_start) {
    struct nr_case c;
    tl_loop *loop = no_reserve_loop(&c);
    cr_assert_eq(tl_timer_start(loop, &c.late, 3600000 * MS, 0), 0); /* a restart fails too */
    nr_fail = 1;
    c.iteration = 1;
    cr_assert_geq(tl_loop_run(loop, TL_RUN_ONCE), 0);
    nr_fail = 0;
    cr_assert_eq(c.ran_first, 1);
    cr_assert_eq(c.ran_second, 1);
    cr_assert_eq(c.start_result, -ENOMEM, "tl_timer_start: %d, the insert failed", c.start_result);
    cr_assert(!tl_timer_active(&c.late), "a timer whose start failed is active");
    c.iteration = 2;
    run_to_end(loop);
    cr_assert_eq(c.ran_late, 0);
    free_loop(loop);
}

/* Inserted at once, it still keeps out of the running dispatch (as the
   loop's rule for a timer started by a callback with a due deadline): the
   timers due with `first` run in that dispatch, `late` (which its second
   chunk pops) in the next iteration, once. Stopped before then, it never
   runs. */
Test(loop, due_start_in_a_dispatch_without_reserve_waits_for_the_next_iteration) {
    struct nr_case c;
    tl_loop *loop = no_reserve_loop(&c);
    c.iteration = 1;
    cr_assert_geq(tl_loop_run(loop, TL_RUN_ONCE), 0);
    cr_assert_eq(c.start_result, 0);
    cr_assert_eq(c.ran_first, 1);
    cr_assert_eq(c.ran_second, 1, "the timers due with it waited");
    cr_assert_eq(c.seconds, NR_DUE);
    cr_assert_eq(c.ran_late, 0, "started by a callback, it ran in the same dispatch");
    cr_assert(tl_timer_active(&c.late));
    check_loop(loop);
    cr_assert_eq(tl_loop_timeout(loop), 0, "a timer is due");
    c.iteration = 2;
    cr_assert_geq(tl_loop_run(loop, TL_RUN_ONCE), 0);
    cr_assert_eq(c.ran_late, 2);
    cr_assert(!tl_timer_active(&c.late));
    free_loop(loop);

    loop = no_reserve_loop(&c);
    c.iteration = 1;
    cr_assert_geq(tl_loop_run(loop, TL_RUN_ONCE), 0);
    cr_assert(tl_timer_active(&c.late));
    cr_assert_eq(tl_timer_stop(loop, &c.late), 0);
    c.iteration = 2;
    run_to_end(loop);
    cr_assert_eq(c.ran_late, 0, "stopped, it ran");
    free_loop(loop);
}
