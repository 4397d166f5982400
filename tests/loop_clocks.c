/* SPDX-License-Identifier: MIT */
/*
 * Clocks, leeway, absolute and periodic timers (tl_timer_start_at and
 * friends), on every timer backend (and, through meson, both I/O backends).
 *
 * Most tests drive time by hand through the loop's test seam
 * (tl_detail_loop_set_clock: the loop reads each clock from a fake one, and
 * runs NOWAIT), so they are exact and fast: 10,000 periods of a periodic
 * timer, wall-clock steps forward and back, the wake-up the loop computes
 * from the timers' leeway. Deadlines there are multiples of the wheels' 1 ms
 * tick, where every backend fires exactly; the leeway test allows the tick.
 * A few short tests use the real clocks, and one runs a child in a time
 * namespace whose MONOTONIC and BOOTTIME are offset (skipped where
 * unshare(CLONE_NEWTIME) is refused): tickloop never changes this machine's
 * clock. tests/realtime_jump.sh does a real wall-clock jump, only when asked.
 */
#define _GNU_SOURCE /* unshare, CLONE_NEWTIME */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <sys/wait.h>

#include "backend_params.h"
#include "loop_helpers.h"

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

#define SEC (1000 * MS)
#define TICK MS /* the wheels' default tick */

/* The loop's test seam (loop/clock.cc; hidden, reached through the static
 * library). */
typedef uint64_t (*tl_detail_clock_fn)(int clock, void *ctx);
void tl_detail_loop_set_clock(tl_loop *loop, tl_detail_clock_fn read, void *ctx);
void tl_detail_loop_clock_changed(tl_loop *loop);

/* A fake time per clock, far from 0 and from each other, tick-aligned. */
struct fake {
    uint64_t t[3];
};

static uint64_t fake_read(int clock, void *ctx) {
    return ((struct fake *)ctx)->t[clock];
}

static tl_loop *fake_loop(const char *timers, struct fake *f) {
    f->t[TL_CLOCK_MONOTONIC] = 1000 * SEC;
    f->t[TL_CLOCK_BOOTTIME] = 5000 * SEC;
    f->t[TL_CLOCK_REALTIME] = 1767225600ull * SEC; /* 2026-01-01 */
    tl_loop *loop = new_loop_with(timers);
    tl_detail_loop_set_clock(loop, fake_read, f);
    return loop;
}

static void nowait(tl_loop *loop) {
    cr_assert_geq(tl_loop_run(loop, TL_RUN_NOWAIT), 0);
    check_loop(loop);
}

/* One timer's record: how often it fired, the clock's fake time then, and
 * the deadline it had when it fired (before the re-arm: read from `due`). */
struct rec {
    struct fake *f;
    tl_timer t;
    int fired;
    uint64_t at;
    uint64_t due;   /* deadline of the pending expiry, kept by the test */
    int stop_after; /* stop it in its n-th callback (0: never)        */
};

static void rec_cb(tl_loop *loop, tl_timer *t) {
    struct rec *r = t->data;
    r->at = r->f->t[tl_timer_clock(t)];
    cr_assert_geq(r->at, r->due, "fired %llu ns early", (unsigned long long)(r->due - r->at));
    r->fired++;
    r->due = t->deadline; /* periodic: already the next one */
    if (r->stop_after && r->fired == r->stop_after) tl_timer_stop(loop, t);
}

static void rec_start_at(tl_loop *loop, struct rec *r, struct fake *f, tl_clock c, uint64_t when,
                         uint64_t period) {
    r->f = f;
    tl_timer_init(&r->t, rec_cb, r);
    r->due = when;
    int e = tl_timer_start_at(loop, &r->t, c, when, period);
    cr_assert_eq(e, 0, "tl_timer_start_at: %s", tl_strerror(e));
    cr_assert_eq(r->t.deadline, when);
    cr_assert_eq(r->t.repeat, period);
    cr_assert_eq(tl_timer_clock(&r->t), c);
}

/* ------------------------------------------------------------------------ */
/* Periodic timers                                                          */
/* ------------------------------------------------------------------------ */

BACKEND_TEST(clocks, periodic_deadlines_exact_over_10000_periods) {
    for (int c = 0; c < 3; ++c) {
        struct fake f;
        tl_loop *loop = fake_loop(p->name, &f);
        const uint64_t period = 3 * MS, first = f.t[c] + 7 * MS;
        struct rec r = {0};
        rec_start_at(loop, &r, &f, (tl_clock)c, first, period);
        for (uint64_t k = 0; k < 10000; ++k) {
            f.t[c] = first + k * period - 1;
            nowait(loop);
            cr_assert_eq(r.fired, (int)k, "%s clock %d: fired early at period %llu", p->name, c,
                         (unsigned long long)k);
            f.t[c] = first + k * period;
            nowait(loop);
            cr_assert_eq(r.fired, (int)k + 1, "%s clock %d: period %llu not fired", p->name, c,
                         (unsigned long long)k);
            cr_assert_eq(r.t.deadline, first + (k + 1) * period,
                         "%s clock %d: drift at period %llu", p->name, c, (unsigned long long)k);
        }
        cr_assert_eq(tl_loop_now(loop, (tl_clock)c), f.t[c]);
        tl_timer_stop(loop, &r.t);
        free_loop(loop);
    }
}

BACKEND_TEST(clocks, periodic_skips_missed_periods) {
    srand(13);
    for (int c = 0; c < 3; ++c) {
        struct fake f;
        tl_loop *loop = fake_loop(p->name, &f);
        const uint64_t period = 10 * MS, first = f.t[c] + period;
        struct rec r = {0};
        rec_start_at(loop, &r, &f, (tl_clock)c, first, period);
        for (int i = 0; i < 2000; ++i) {
            /* Up to 5 periods at once, in whole ticks. */
            f.t[c] += (uint64_t)(rand() % 50) * TICK;
            int before = r.fired;
            uint64_t due = r.t.deadline;
            nowait(loop);
            /* One callback at most per iteration, whatever was missed. */
            cr_assert_eq(r.fired - before, f.t[c] >= due ? 1 : 0, "%s clock %d", p->name, c);
            /* The next deadline: on the grid, the first after now. */
            uint64_t d = r.t.deadline;
            cr_assert_eq((d - first) % period, 0, "%s clock %d: off the grid", p->name, c);
            if (f.t[c] >= due)
                cr_assert(d > f.t[c] && d - f.t[c] <= period, "%s clock %d", p->name, c);
        }
        tl_timer_stop(loop, &r.t);
        free_loop(loop);
    }
}

BACKEND_TEST(clocks, past_deadline_fires_next_iteration_and_relative_start_resets_clock) {
    struct fake f;
    tl_loop *loop = fake_loop(p->name, &f);
    struct rec r = {0};
    rec_start_at(loop, &r, &f, TL_CLOCK_REALTIME, f.t[TL_CLOCK_REALTIME] - 5 * SEC, 0);
    r.due = 0;
    nowait(loop);
    cr_assert_eq(r.fired, 1, "%s", p->name);
    cr_assert_not(tl_timer_active(&r.t));
    /* A periodic BOOTTIME timer, restarted with tl_timer_start: relative,
       MONOTONIC, its repeat counted from each callback. */
    rec_start_at(loop, &r, &f, TL_CLOCK_BOOTTIME, f.t[TL_CLOCK_BOOTTIME] + SEC, SEC);
    cr_assert_eq(tl_timer_start(loop, &r.t, 2 * MS, 0), 0);
    cr_assert_eq(tl_timer_clock(&r.t), TL_CLOCK_MONOTONIC);
    cr_assert_eq(r.t.deadline, f.t[TL_CLOCK_MONOTONIC] + 2 * MS);
    r.due = r.t.deadline;
    f.t[TL_CLOCK_BOOTTIME] += 10 * SEC; /* its old clock: nothing fires */
    nowait(loop);
    cr_assert_eq(r.fired, 1, "%s", p->name);
    f.t[TL_CLOCK_MONOTONIC] += 2 * MS;
    nowait(loop);
    cr_assert_eq(r.fired, 2, "%s", p->name);
    cr_assert_not(tl_timer_active(&r.t));
    free_loop(loop);
}

/* ------------------------------------------------------------------------ */
/* Clocks: independence, wall-clock steps                                   */
/* ------------------------------------------------------------------------ */

BACKEND_TEST(clocks, each_clock_fires_only_its_own_timers) {
    struct fake f;
    tl_loop *loop = fake_loop(p->name, &f);
    struct rec r[3];
    memset(r, 0, sizeof r);
    for (int c = 0; c < 3; ++c) rec_start_at(loop, &r[c], &f, (tl_clock)c, f.t[c] + 10 * MS, 0);
    for (int c = 0; c < 3; ++c) {
        f.t[c] += 10 * MS;
        nowait(loop);
        for (int o = 0; o < 3; ++o)
            cr_assert_eq(r[o].fired, o <= c, "%s: clock %d advanced, timer %d fired %d", p->name, c,
                         o, r[o].fired);
    }
    free_loop(loop);
}

BACKEND_TEST(clocks, realtime_step_forward_fires_at_once) {
    struct fake f;
    tl_loop *loop = fake_loop(p->name, &f);
    struct rec r = {0};
    uint64_t hour = 3600 * SEC;
    rec_start_at(loop, &r, &f, TL_CLOCK_REALTIME, f.t[TL_CLOCK_REALTIME] + hour, 0);
    nowait(loop);
    cr_assert_eq(r.fired, 0);
    /* The wall clock is stepped an hour ahead; the kernel reports it. */
    f.t[TL_CLOCK_REALTIME] += hour;
    tl_detail_loop_clock_changed(loop);
    tl_loop_stats s;
    tl_loop_stats_get(loop, &s);
    cr_assert_eq(s.clock_changes, 1);
    cr_assert_eq(tl_loop_timeout(loop), 0, "%s: a due REALTIME timer must not let the loop sleep",
                 p->name);
    nowait(loop);
    cr_assert_eq(r.fired, 1, "%s", p->name);
    /* No REALTIME timer active: a report is not counted. */
    tl_detail_loop_clock_changed(loop);
    tl_loop_stats_get(loop, &s);
    cr_assert_eq(s.clock_changes, 1);
    free_loop(loop);
}

BACKEND_TEST(clocks, realtime_step_back_neither_fires_nor_loses_timers) {
    struct fake f;
    tl_loop *loop = fake_loop(p->name, &f);
    uint64_t hour = 3600 * SEC, t0 = f.t[TL_CLOCK_REALTIME];
    struct rec once = {0}, tick = {0};
    rec_start_at(loop, &once, &f, TL_CLOCK_REALTIME, t0 + 50 * MS, 0);
    rec_start_at(loop, &tick, &f, TL_CLOCK_REALTIME, t0 + 10 * MS, 10 * MS);
    for (int i = 1; i <= 3; ++i) {
        f.t[TL_CLOCK_REALTIME] = t0 + (uint64_t)i * 10 * MS;
        nowait(loop);
    }
    cr_assert_eq(tick.fired, 3, "%s", p->name);
    /* Stepped back an hour: nothing is due; the periodic timer returns to
       the first point of its grid after the new time. */
    f.t[TL_CLOCK_REALTIME] = t0 + 30 * MS - hour;
    tl_detail_loop_clock_changed(loop);
    nowait(loop);
    cr_assert_eq(once.fired, 0, "%s: fired after a step back", p->name);
    cr_assert_eq(tick.fired, 3, "%s", p->name);
    uint64_t now = f.t[TL_CLOCK_REALTIME], d = tick.t.deadline;
    cr_assert(d > now && d - now <= 10 * MS, "%s: periodic not back on its grid (%lld ns ahead)",
              p->name, (long long)(d - now));
    cr_assert_eq((t0 - d) % (10 * MS), 0, "%s: off its grid", p->name); /* d < t0 */
    tick.due = d;
    /* The clock moves on from there: the periodic timer ticks again, the
       one-shot fires when the wall clock reaches its deadline again. */
    f.t[TL_CLOCK_REALTIME] = d;
    nowait(loop);
    cr_assert_eq(tick.fired, 4, "%s", p->name);
    tl_timer_stop(loop, &tick.t);
    f.t[TL_CLOCK_REALTIME] = t0 + 50 * MS - 1;
    nowait(loop);
    cr_assert_eq(once.fired, 0, "%s", p->name);
    f.t[TL_CLOCK_REALTIME] = t0 + 50 * MS;
    nowait(loop);
    cr_assert_eq(once.fired, 1, "%s", p->name);
    free_loop(loop);
}

/* ------------------------------------------------------------------------ */
/* Leeway                                                                   */
/* ------------------------------------------------------------------------ */

Test(clocks, leeway_is_stored_rounded_down_with_16_significant_bits) {
    tl_timer t;
    tl_timer_init(&t, NULL, NULL);
    cr_assert_eq(tl_timer_leeway(&t), 0);
    cr_assert_eq(tl_timer_set_leeway(NULL, 5), -EINVAL);
    cr_assert_eq(tl_timer_leeway(NULL), 0);
    uint64_t values[] = {1, 999, 65535, 65536, 65537, 131071, 1000000, 123456789, 30 * SEC};
    for (size_t i = 0; i < sizeof values / sizeof *values; ++i) {
        uint64_t v = values[i];
        cr_assert_eq(tl_timer_set_leeway(&t, v), 0);
        uint64_t got = tl_timer_leeway(&t);
        cr_assert_leq(got, v, "%llu stored as %llu", (unsigned long long)v,
                      (unsigned long long)got);
        if (v < 65536)
            cr_assert_eq(got, v);
        else
            cr_assert_lt(v - got, v / 32768 + 1, "%llu stored as %llu", (unsigned long long)v,
                         (unsigned long long)got);
    }
    tl_timer_set_leeway(&t, UINT64_MAX);
    cr_assert_eq(tl_timer_leeway(&t), TL_TIMER_LEEWAY_MAX);
    tl_timer_init(&t, NULL, NULL);
    cr_assert_eq(tl_timer_leeway(&t), 0);
}

static void noop_cb(tl_loop *loop, tl_timer *t) {
    (void)loop;
    (void)t;
}

BACKEND_TEST(clocks, leeway_kept_across_stop_and_start) {
    tl_loop *loop = new_loop_with(p->name);
    tl_timer t;
    tl_timer_init(&t, noop_cb, NULL);
    tl_timer_set_leeway(&t, 5 * MS);
    uint64_t stored = tl_timer_leeway(&t); /* 5 ms to 16 significant bits */
    cr_assert(stored <= 5 * MS && stored > 5 * MS - 5 * MS / 32768);
    cr_assert_eq(tl_timer_start(loop, &t, SEC, 0), 0);
    cr_assert_eq(tl_timer_leeway(&t), stored);
    cr_assert_eq(tl_timer_stop(loop, &t), 0);
    cr_assert_eq(
        tl_timer_start_at(loop, &t, TL_CLOCK_BOOTTIME, tl_clock_now(TL_CLOCK_BOOTTIME) + SEC, 0),
        0);
    cr_assert_eq(tl_timer_leeway(&t), stored);
    tl_timer_stop(loop, &t);
    free_loop(loop);
}

/* Random deadlines and leeways, the fake clock stepped 100 us at a time: no
 * timer before its deadline, none after deadline + leeway (+ a tick and a
 * step); and the loop's own wake-up (tl_loop_timeout) never later than the
 * earliest window's end, and, for a backend with next_wakeup, exactly there. */
BACKEND_TEST(clocks, leeway_windows_kept_and_wakeup_at_the_earliest_window_end) {
    enum { N = 300 };
    const tl_timer_backend *b = tl_timer_backend_find(p->name);
    srand(7);
    for (int c = 0; c < 3; ++c) {
        struct fake f;
        tl_loop *loop = fake_loop(p->name, &f);
        static struct rec r[N];
        memset(r, 0, sizeof r);
        uint64_t leeway[N];
        uint64_t t0 = f.t[c];
        for (int i = 0; i < N; ++i) {
            r[i].f = &f;
            tl_timer_init(&r[i].t, rec_cb, &r[i]);
            leeway[i] = rand() % 4 == 0 ? 0 : (uint64_t)(rand() % 20000) * 1000;
            tl_timer_set_leeway(&r[i].t, leeway[i]);
            leeway[i] = tl_timer_leeway(&r[i].t);
            r[i].due = t0 + 1 + (uint64_t)(rand() % 200000) * 1000;
            cr_assert_eq(tl_timer_start_at(loop, &r[i].t, (tl_clock)c, r[i].due, 0), 0);
        }
        const uint64_t step = 100000;
        for (uint64_t now = t0; now <= t0 + 240 * MS; now += step) {
            f.t[c] = now;
            /* The loop's wake-up against the windows of the pending timers. */
            uint64_t end = UINT64_MAX;
            for (int i = 0; i < N; ++i)
                if (!r[i].fired && r[i].due + leeway[i] < end) end = r[i].due + leeway[i];
            if (end != UINT64_MAX) {
                uint64_t wake = now + tl_loop_timeout(loop);
                uint64_t limit = end > now ? end : now;
                cr_assert_leq(wake, limit + TICK, "%s clock %d: wakes %lld ns after a window",
                              p->name, c, (long long)(wake - limit));
                if (b->next_wakeup && end > now)
                    cr_assert_eq(wake, end, "%s clock %d: wakes %lld ns before the latest", p->name,
                                 c, (long long)(end - wake));
            }
            nowait(loop);
            for (int i = 0; i < N; ++i)
                if (r[i].fired && r[i].at == now)
                    cr_assert_leq(now, r[i].due + leeway[i] + TICK + step,
                                  "%s clock %d: timer %d fired %lld ns after its window", p->name,
                                  c, i, (long long)(now - r[i].due - leeway[i]));
        }
        for (int i = 0; i < N; ++i)
            cr_assert_eq(r[i].fired, 1, "%s clock %d: timer %d", p->name, c, i);
        free_loop(loop);
    }
}

static uint64_t timers_fired(const tl_loop *loop) {
    tl_loop_stats st;
    tl_loop_stats_get(loop, &st);
    return st.timers_fired;
}

/* A fake-clock loop with collect_interval_ns set. */
static tl_loop *fake_loop_collecting(const char *timers, struct fake *f, uint64_t interval) {
    f->t[TL_CLOCK_MONOTONIC] = 1000 * SEC;
    f->t[TL_CLOCK_BOOTTIME] = 5000 * SEC;
    f->t[TL_CLOCK_REALTIME] = 1767225600ull * SEC;
    tl_loop_options opts;
    tl_loop_options_init(&opts);
    opts.timers = timers;
    opts.collect_interval_ns = interval;
    tl_loop *loop = NULL;
    int r = tl_loop_new(&loop, &opts);
    if (r == -ENOSYS || r == -EPERM) cr_skip_test("no such I/O backend here: %s", tl_strerror(r));
    cr_assert_eq(r, 0, "tl_loop_new: %s", tl_strerror(r));
    tl_detail_loop_set_clock(loop, fake_read, f);
    return loop;
}

/* The loop's way, on the fake clock: wake at tl_loop_timeout, run, until no
 * timer is left. Checks every timer against [deadline, deadline + window]
 * and returns the wake-ups that ran a timer. */
static uint64_t drive_until_fired(tl_loop *loop, struct fake *f, struct rec *r, int n,
                                  const uint64_t *window, const char *what) {
    uint64_t wakeups = 0;
    for (int guard = 0; guard < 100000; ++guard) {
        int left = 0;
        for (int i = 0; i < n; ++i) left += !r[i].fired;
        if (!left) return wakeups;
        uint64_t timeout = tl_loop_timeout(loop);
        cr_assert(timeout != UINT64_MAX, "%s: timers left but no timeout", what);
        f->t[TL_CLOCK_MONOTONIC] += timeout;
        uint64_t before = timers_fired(loop);
        nowait(loop);
        if (timers_fired(loop) != before) ++wakeups;
        for (int i = 0; i < n; ++i)
            if (r[i].fired && r[i].at == f->t[TL_CLOCK_MONOTONIC])
                cr_assert_leq(r[i].at, r[i].t.deadline + window[i],
                              "%s: timer %d fired %llu ns after its deadline, window %llu", what, i,
                              (unsigned long long)(r[i].at - r[i].t.deadline),
                              (unsigned long long)window[i]);
    }
    cr_assert_fail("%s: no end", what);
    return wakeups;
}

/* 200 timers with distinct deadlines over 100 ms: without an interval a heap
 * wakes once per deadline and a wheel once per tick that holds one; with
 * collect_interval_ns = 5 ms every backend wakes at most once per 4 ms (a
 * wheel's grid is the largest power of two of ticks in the window), never
 * early (rec_cb) and never past deadline + max(interval, tick). A timer
 * with a leeway of its own keeps it. */
BACKEND_TEST(clocks, collect_interval_batches_wakeups) {
    enum { N = 200 };
    const int exact = backend_exact(p->name);
    static struct rec r[N];
    uint64_t window[N];
    uint64_t wakeups[2];
    const uint64_t intervals[2] = {0, 5 * MS};
    for (int k = 0; k < 2; ++k) {
        struct fake f;
        tl_loop *loop = fake_loop_collecting(p->name, &f, intervals[k]);
        const uint64_t t0 = f.t[TL_CLOCK_MONOTONIC];
        srand(11);
        memset(r, 0, sizeof r);
        uint64_t ticks = 0, last_tick = 0;
        for (int i = 0; i < N; ++i) {
            /* Increasing deadlines, so the ticks that hold one are easy to count. */
            uint64_t due = t0 + (uint64_t)i * 500 * 1000 + 1 + (uint64_t)(rand() % 499000);
            uint64_t tick = (due + TICK - 1) / TICK;
            if (tick != last_tick) ++ticks, last_tick = tick;
            rec_start_at(loop, &r[i], &f, TL_CLOCK_MONOTONIC, due, 0);
            window[i] = intervals[k] > TICK || exact ? intervals[k] : TICK;
            if (i == 7) {
                /* A leeway of its own (1 ms, under the interval) is kept. */
                tl_timer_set_leeway(&r[i].t, MS);
                window[i] = TICK;
            }
            cr_assert_eq(tl_timer_start_at(loop, &r[i].t, TL_CLOCK_MONOTONIC, due, 0), 0);
            uint64_t want = i == 7 ? MS : intervals[k] ? tl_timer_leeway(&r[i].t) : 0;
            cr_assert(i == 7 ||
                          (want <= intervals[k] && want + intervals[k] / 32768 >= intervals[k]),
                      "%s: timer %d reports leeway %llu with interval %llu", p->name, i,
                      (unsigned long long)want, (unsigned long long)intervals[k]);
        }
        wakeups[k] = drive_until_fired(loop, &f, r, N, window, p->name);
        for (int i = 0; i < N; ++i) {
            cr_assert_eq(r[i].fired, 1, "%s: timer %d fired %d times", p->name, i, r[i].fired);
            /* The loop's interval was lent, not stored: gone once inactive. */
            cr_assert_eq(tl_timer_leeway(&r[i].t), i == 7 ? MS : 0, "%s: timer %d leeway %llu",
                         p->name, i, (unsigned long long)tl_timer_leeway(&r[i].t));
        }
        /* One per distinct deadline, but timer 7 may share one (its leeway). */
        if (k == 0 && exact)
            cr_assert(wakeups[0] == N || wakeups[0] == N - 1,
                      "%s: %llu wake-ups for %d distinct deadlines", p->name,
                      (unsigned long long)wakeups[0], N);
        if (k == 0 && !exact)
            cr_assert_leq(wakeups[0], ticks, "%s: %llu wake-ups for %llu ticks holding a timer",
                          p->name, (unsigned long long)wakeups[0], (unsigned long long)ticks);
        free_loop(loop);
    }
    cr_log_info("%s: %llu wake-ups without a collect interval, %llu with 5 ms", p->name,
                (unsigned long long)wakeups[0], (unsigned long long)wakeups[1]);
    cr_assert_leq(wakeups[1], 100 / 4 + 2, "%s: %llu wake-ups with a 5 ms interval", p->name,
                  (unsigned long long)wakeups[1]);
}

/* A deadline already past fires in the next iteration on every backend, also
 * on a wheel whose tick has not ended yet (mid-tick fake time): absolute, and
 * a relative timeout of 0. */
BACKEND_TEST(clocks, past_deadline_fires_in_the_next_iteration_mid_tick) {
    struct fake f;
    tl_loop *loop = fake_loop(p->name, &f);
    struct rec far = {0};
    rec_start_at(loop, &far, &f, TL_CLOCK_MONOTONIC, f.t[TL_CLOCK_MONOTONIC] + SEC, 0);
    f.t[TL_CLOCK_MONOTONIC] += TICK / 2 + 123;
    nowait(loop); /* the loop's time is now mid-tick, and its timers saw it */
    const uint64_t now = f.t[TL_CLOCK_MONOTONIC];
    struct rec a = {0}, b = {0};
    rec_start_at(loop, &a, &f, TL_CLOCK_MONOTONIC, now - 100, 0);
    b.f = &f;
    tl_timer_init(&b.t, rec_cb, &b);
    b.due = now;
    cr_assert_eq(tl_timer_start(loop, &b.t, 0, 0), 0);
    cr_assert_eq(tl_loop_timeout(loop), 0, "%s: due timers but timeout %llu", p->name,
                 (unsigned long long)tl_loop_timeout(loop));
    nowait(loop);
    cr_assert_eq(a.fired, 1, "%s: a deadline 100 ns past did not fire", p->name);
    cr_assert_eq(b.fired, 1, "%s: a timeout of 0 did not fire", p->name);
    tl_timer_stop(loop, &far.t);
    free_loop(loop);
}

Test(clocks, collect_interval_above_one_second_is_einval) {
    tl_loop_options opts;
    tl_loop_options_init(&opts);
    tl_loop *loop = NULL;
    opts.collect_interval_ns = SEC + 1;
    cr_assert_eq(tl_loop_new(&loop, &opts), -EINVAL);
    cr_assert_null(loop);
    opts.collect_interval_ns = UINT64_MAX;
    cr_assert_eq(tl_loop_new(&loop, &opts), -EINVAL);
    opts.collect_interval_ns = SEC;
    cr_assert_eq(tl_loop_new(&loop, &opts), 0);
    free_loop(loop);
}

/* ------------------------------------------------------------------------ */
/* Real clocks                                                              */
/* ------------------------------------------------------------------------ */

struct real {
    tl_timer t;
    int fired;
    int early; /* fired before its deadline on its clock */
};

/* No Criterion assertion here: it also runs in a forked child. */
static void real_cb(tl_loop *loop, tl_timer *t) {
    struct real *r = t->data;
    (void)loop;
    r->early += tl_clock_now(tl_timer_clock(t)) < t->deadline;
    r->fired++;
}

BACKEND_TEST(clocks, real_boottime_and_realtime_timers_fire_never_early) {
    tl_loop *loop = new_loop_with(p->name);
    struct real r[3];
    memset(r, 0, sizeof r);
    for (int c = 0; c < 3; ++c) {
        tl_timer_init(&r[c].t, real_cb, &r[c]);
        cr_assert_eq(tl_timer_start_at(loop, &r[c].t, (tl_clock)c,
                                       tl_clock_now((tl_clock)c) + (uint64_t)(10 + 5 * c) * MS, 0),
                     0);
    }
    cr_assert_eq(tl_loop_run(loop, TL_RUN_DEFAULT), 0);
    for (int c = 0; c < 3; ++c) {
        cr_assert_eq(r[c].fired, 1, "%s clock %d", p->name, c);
        cr_assert_eq(r[c].early, 0, "%s clock %d fired early", p->name, c);
    }
    free_loop(loop);
}

Test(clocks, clock_now_reads_each_clock) {
    cr_assert_eq(tl_clock_now((tl_clock)7), 0);
    cr_assert_eq(tl_clock_now((tl_clock)-1), 0);
    uint64_t m = tl_clock_now(TL_CLOCK_MONOTONIC), b = tl_clock_now(TL_CLOCK_BOOTTIME);
    uint64_t w = tl_clock_now(TL_CLOCK_REALTIME);
    cr_assert_geq(b + MS, m, "BOOTTIME behind MONOTONIC");
    cr_assert_gt(w, 1600000000ull * SEC, "REALTIME is not a date");
    tl_loop *loop = new_loop();
    cr_assert_eq(tl_loop_now(loop, TL_CLOCK_MONOTONIC), tl_now(loop));
    cr_assert_geq(tl_loop_now(loop, TL_CLOCK_REALTIME), w);
    cr_assert_eq(tl_loop_now(loop, (tl_clock)3), 0);
    cr_assert_eq(tl_loop_now(NULL, TL_CLOCK_MONOTONIC), 0);
    free_loop(loop);
}

Test(clocks, bad_input_is_refused) {
    tl_loop *loop = new_loop(), *other = new_loop();
    tl_timer t, nocb;
    tl_timer_init(&t, noop_cb, NULL);
    tl_timer_init(&nocb, NULL, NULL);
    uint64_t soon = tl_clock_now(TL_CLOCK_BOOTTIME) + SEC;
    cr_assert_eq(tl_timer_start_at(NULL, &t, TL_CLOCK_BOOTTIME, soon, 0), -EINVAL);
    cr_assert_eq(tl_timer_start_at(loop, NULL, TL_CLOCK_BOOTTIME, soon, 0), -EINVAL);
    cr_assert_eq(tl_timer_start_at(loop, &t, (tl_clock)7, soon, 0), -EINVAL);
    cr_assert_eq(tl_timer_start_at(loop, &t, (tl_clock)-1, soon, 0), -EINVAL);
    cr_assert_eq(tl_timer_start_at(loop, &nocb, TL_CLOCK_BOOTTIME, soon, 0), -EINVAL);
    cr_assert_not(tl_timer_active(&t));
    cr_assert_eq(tl_timer_start_at(loop, &t, TL_CLOCK_BOOTTIME, soon, 0), 0);
    cr_assert_eq(tl_timer_start_at(other, &t, TL_CLOCK_BOOTTIME, soon, 0), -EINVAL);
    cr_assert_eq(tl_timer_clock(NULL), TL_CLOCK_MONOTONIC);
    tl_timer_stop(loop, &t);
    free_loop(other);
    free_loop(loop);

    tl_loop_options opts;
    tl_loop_options_init(&opts);
    opts.max_timers = 1;
    cr_assert_eq(tl_loop_new(&loop, &opts), 0);
    cr_assert_eq(tl_timer_start_at(loop, &t, TL_CLOCK_REALTIME, 1, 0), 0);
    tl_timer u;
    tl_timer_init(&u, noop_cb, NULL);
    cr_assert_eq(tl_timer_start_at(loop, &u, TL_CLOCK_BOOTTIME, soon, 0), -ENOSPC);
    /* Moving the active one is not a new timer. */
    cr_assert_eq(tl_timer_start_at(loop, &t, TL_CLOCK_BOOTTIME, soon, 0), 0);
    tl_timer_stop(loop, &t);
    free_loop(loop);
}

/* ------------------------------------------------------------------------ */
/* A time namespace: BOOTTIME and MONOTONIC far apart                       */
/* ------------------------------------------------------------------------ */

static int ns_body(const char *timers) {
    tl_loop_options opts;
    tl_loop_options_init(&opts);
    opts.timers = timers;
    tl_loop *loop;
    if (tl_loop_new(&loop, &opts) != 0) return 10;
    int64_t gap = (int64_t)(tl_clock_now(TL_CLOCK_BOOTTIME) - tl_clock_now(TL_CLOCK_MONOTONIC));
    if (gap < 98000 * (int64_t)SEC) return 11; /* the namespace's offsets are not in effect */
    struct real mono, boot;
    memset(&mono, 0, sizeof mono);
    memset(&boot, 0, sizeof boot);
    tl_timer_init(&mono.t, real_cb, &mono);
    tl_timer_init(&boot.t, real_cb, &boot);
    /* tl_timer_start counts from the loop's cached time, read when the loop
       was made: on a loaded machine (a sanitizer build, io_uring's setup)
       that can be tens of ms old, which would put the 40 ms MONOTONIC
       deadline before the 20 ms BOOTTIME one read afresh below. */
    tl_update_time(loop);
    if (tl_timer_start_at(loop, &boot.t, TL_CLOCK_BOOTTIME,
                          tl_clock_now(TL_CLOCK_BOOTTIME) + 20 * MS, 0) != 0)
        return 12;
    if (tl_timer_start(loop, &mono.t, 40 * MS, 0) != 0) return 13;
    uint64_t start = tl_clock_now(TL_CLOCK_MONOTONIC);
    while (tl_loop_run(loop, TL_RUN_ONCE) > 0)
        if (mono.fired && !boot.fired) return 14; /* out of order */
    if (mono.fired != 1 || boot.fired != 1) return 15;
    if (mono.early || boot.early) return 18;
    if (tl_clock_now(TL_CLOCK_MONOTONIC) - start > 5 * SEC) return 16;
    return tl_loop_free(loop) == 0 ? 0 : 17;
}

BACKEND_TEST(clocks, boottime_in_a_time_namespace) {
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        alarm(10);
        if (unshare(CLONE_NEWTIME) != 0) _exit(100 + (errno == EPERM || errno == EINVAL));
        int fd = open("/proc/self/timens_offsets", O_WRONLY);
        const char *offsets = "monotonic 1000 0\nboottime 100000 0\n";
        if (fd < 0 || write(fd, offsets, strlen(offsets)) < 0) _exit(104);
        close(fd);
        /* The namespace applies to children. */
        pid_t inner = fork();
        if (inner < 0) _exit(102);
        if (inner == 0) _exit(ns_body(p->name));
        int st;
        if (waitpid(inner, &st, 0) != inner || !WIFEXITED(st)) _exit(103);
        _exit(WEXITSTATUS(st));
    }
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status), "child killed by signal %d", WTERMSIG(status));
    if (WEXITSTATUS(status) == 101) cr_skip_test("time namespaces are refused here");
    cr_assert_eq(WEXITSTATUS(status), 0, "%s: time-namespace child failed with %d", p->name,
                 WEXITSTATUS(status));
}
