/* SPDX-License-Identifier: MIT */
/*
 * Restarts through the loop, on every timer backend (and, through meson,
 * both I/O backends): timers a callback restarts as due, on their own clock
 * or onto another, wait for the next iteration; restarts to later deadlines
 * leave no wake-up at the old deadline and never fire early; ties keep
 * their (re)start order.
 */
#define _GNU_SOURCE /* setenv in loop_setup.h */
#include <criterion/criterion.h>

#include "backend_params.h"
#include "loop_helpers.h"

#define SEC (1000 * MS)

static void nowait(tl_loop *loop) {
    cr_assert_geq(tl_loop_run(loop, TL_RUN_NOWAIT), 0);
    check_loop(loop);
}

/* heap4 without reserve, registered before the parameters are drawn, so
 * that BACKEND_TEST runs on it too: the loop keeps a due start in a
 * dispatch out of that dispatch another way for a backend without reserve. */
static tl_timer_backend no_reserve;

__attribute__((constructor)) static void register_no_reserve(void) {
    const tl_timer_backend *heap4 = tl_timer_backend_find("heap4");
    if (!heap4) abort();
    no_reserve = *heap4;
    no_reserve.name = "restarts-heap4-no-reserve";
    no_reserve.reserve = NULL;
    if (tl_timer_backend_register(&no_reserve) < 0) abort();
}

/* ------------------------------------------------------------------------ */
/* Due restarts by a callback, across clocks                                */
/* ------------------------------------------------------------------------ */

#define SIX 6

/* Six timers, two per clock, all due. The first callback to run restarts
 * the other five as due, by `how`, some onto another clock. */
struct six {
    tl_timer t[SIX];
    int fired[SIX];
    int calls;
    int how;
};

enum { DUE_AT_LOOP_NOW, DUE_IN_THE_PAST, DUE_RELATIVE_ZERO, HOW_COUNT };

/* Restarts timer i of s, as due, onto clock (i + 1) % 3 for odd i (another
   clock) and onto its own clock for even i. */
static void restart_due(tl_loop *loop, struct six *s, int i) {
    tl_clock c = (tl_clock)(i % 3);
    if (i % 2) c = (tl_clock)((i + 1) % 3);
    uint64_t when = tl_loop_now(loop, c) - (s->how == DUE_IN_THE_PAST ? 3 * SEC : 0);
    int r = s->how == DUE_RELATIVE_ZERO && i % 2 ? tl_timer_start(loop, &s->t[i], 0, 0)
                                                 : tl_timer_start_at(loop, &s->t[i], c, when, 0);
    cr_assert_eq(r, 0, "restart of timer %d: %s", i, tl_strerror(r));
}

static void six_cb(tl_loop *loop, tl_timer *t) {
    struct six *s = t->data;
    int i = (int)(t - s->t);
    s->fired[i]++;
    if (s->calls++ > 0) return;
    for (int k = 0; k < SIX; ++k)
        if (k != i) restart_due(loop, s, k);
}

BACKEND_TEST(restarts, due_restarts_across_clocks_wait_for_the_next_iteration) {
    for (int how = 0; how < HOW_COUNT; ++how) {
        tl_loop *loop = new_loop_with(p->name);
        struct six s = {.how = how};
        for (int i = 0; i < SIX; ++i) {
            tl_clock c = (tl_clock)(i % 3);
            tl_timer_init(&s.t[i], six_cb, &s);
            cr_assert_eq(tl_timer_start_at(loop, &s.t[i], c, tl_clock_now(c) - SEC, 0), 0);
        }
        nowait(loop);
        cr_assert_eq(s.calls, 1, "%s, restart kind %d: %d callbacks ran in the iteration", p->name,
                     how, s.calls);
        for (int i = 0; i < SIX; ++i) cr_assert(s.fired[i] || tl_timer_active(&s.t[i]));
        nowait(loop);
        cr_assert_eq(s.calls, SIX, "%s, restart kind %d: %d of the five ran next", p->name, how,
                     s.calls - 1);
        for (int i = 0; i < SIX; ++i)
            cr_assert_eq(s.fired[i], 1, "%s, restart kind %d: timer %d ran %d times", p->name, how,
                         i, s.fired[i]);
        free_loop(loop);
    }
}

/* ------------------------------------------------------------------------ */
/* Later restarts: no wake-up at the old deadline, never early, ties        */
/* ------------------------------------------------------------------------ */

#define MANY 2000

struct later {
    tl_timer t[MANY];
    int fired;
    int early;
};

static void later_cb(tl_loop *loop, tl_timer *t) {
    struct later *l = t->data;
    if (tl_now(loop) < t->deadline) l->early++;
    l->fired++;
}

/* 2,000 timers at 40 ms, each restarted four times to later deadlines (60,
 * 80, 100, 120 ms) before the loop waits: a heartbeat server's pattern. The
 * loop must sleep until 120 ms at once: a wake-up at a deadline a restart
 * left (40 ms, or any step) finds nothing due, an empty wake-up. */
BACKEND_TEST(restarts, later_restarts_leave_no_wakeup_at_the_old_deadlines) {
    tl_loop *loop = new_loop_with(p->name);
    static struct later l;
    memset(&l, 0, sizeof l);
    for (int i = 0; i < MANY; ++i) {
        tl_timer_init(&l.t[i], later_cb, &l);
        cr_assert_eq(tl_timer_start(loop, &l.t[i], 40 * MS, 0), 0);
    }
    for (uint64_t ms = 60; ms <= 120; ms += 20)
        for (int i = 0; i < MANY; ++i) cr_assert_eq(tl_timer_start(loop, &l.t[i], ms * MS, 0), 0);
    tl_loop_stats before, after;
    tl_loop_stats_get(loop, &before);
    run_to_end(loop);
    tl_loop_stats_get(loop, &after);
    cr_assert_eq(l.fired, MANY, "%s: %d of %d fired", p->name, l.fired, MANY);
    cr_assert_eq(l.early, 0, "%s: %d fired early", p->name, l.early);
    cr_assert_eq(after.empty_wakeups - before.empty_wakeups, 0,
                 "%s: %llu empty wake-ups in %llu iterations", p->name,
                 (unsigned long long)(after.empty_wakeups - before.empty_wakeups),
                 (unsigned long long)(after.iterations - before.iterations));
    free_loop(loop);
}

/* ------------------------------------------------------------------------ */
/* A due start by a callback, under a cap: once, in a later iteration      */
/* ------------------------------------------------------------------------ */

#define CAPPED 3

struct capped {
    tl_timer due[CAPPED], started;
    int order[CAPPED + 1];
    int n, started_in;
    int iteration;
};

static void capped_cb(tl_loop *loop, tl_timer *t) {
    struct capped *c = t->data;
    cr_assert_lt(c->n, CAPPED + 1, "a timer ran twice");
    c->order[c->n++] = t == &c->started ? CAPPED : (int)(t - c->due);
    if (t == &c->started) {
        cr_assert_gt(c->iteration, c->started_in, "started by a callback, it ran in its iteration");
        return;
    }
    if (c->n == 1) {
        c->started_in = c->iteration;
        cr_assert_eq(tl_timer_start(loop, &c->started, 0, 0), 0);
    }
}

/* Three due timers, one callback per iteration; the first starts a fourth,
 * due at once. Each runs once, the three first in start order, the fourth
 * last and never in the iteration that started it: whether the backend
 * parks it (reserve) or holds it, fresh, while a cap leaves due timers
 * before it (without reserve: the dispatch pops them out at its end). */
BACKEND_TEST(restarts, due_start_under_a_cap_runs_once_after_the_timers_due_before) {
    tl_loop_options opts;
    tl_loop_options_init(&opts);
    opts.timers = p->name;
    opts.max_timers_per_iteration = 1;
    tl_loop *loop = new_loop_opts(&opts);
    struct capped c = {0};
    tl_timer_init(&c.started, capped_cb, &c);
    for (int i = 0; i < CAPPED; ++i) {
        tl_timer_init(&c.due[i], capped_cb, &c);
        cr_assert_eq(tl_timer_start_at(loop, &c.due[i], TL_CLOCK_MONOTONIC,
                                       tl_loop_now(loop, TL_CLOCK_MONOTONIC) - SEC, 0),
                     0);
    }
    for (c.iteration = 1; c.iteration <= 2 * (CAPPED + 1) && c.n < CAPPED + 1; ++c.iteration) {
        int before = c.n;
        nowait(loop);
        cr_assert_leq(c.n - before, 1, "%s: %d callbacks in one iteration", p->name, c.n - before);
    }
    cr_assert_eq(c.n, CAPPED + 1, "%s: %d of %d ran", p->name, c.n, CAPPED + 1);
    for (int i = 0; i <= CAPPED; ++i)
        cr_assert_eq(c.order[i], i, "%s: callback %d was timer %d", p->name, i, c.order[i]);
    cr_assert_eq(tl_loop_timeout(loop), UINT64_MAX, "%s: a timer is left", p->name);
    free_loop(loop);
}

struct next_iteration {
    tl_timer first, second;
    int iteration, ran_first, ran_second;
};

static void next_second(tl_loop *loop, tl_timer *t) {
    (void)loop;
    struct next_iteration *s = t->data;
    cr_assert_eq(s->ran_second, 0, "ran twice");
    s->ran_second = s->iteration;
}

static void next_first(tl_loop *loop, tl_timer *t) {
    struct next_iteration *s = t->data;
    s->ran_first = s->iteration;
    cr_assert_eq(tl_timer_start(loop, &s->second, 0, 0), 0);
}

/* A timer started due by the only callback of a dispatch (its last chunk)
 * runs in the next iteration, not the one after: on a backend without
 * reserve it is inside, fresh, and the dispatch takes it out before it
 * ends, so that the next one runs it as any due timer. */
BACKEND_TEST(restarts, due_start_by_the_last_callback_runs_in_the_next_iteration) {
    tl_loop *loop = new_loop_with(p->name);
    struct next_iteration s = {0};
    tl_timer_init(&s.first, next_first, &s);
    tl_timer_init(&s.second, next_second, &s);
    cr_assert_eq(tl_timer_start_at(loop, &s.first, TL_CLOCK_MONOTONIC,
                                   tl_loop_now(loop, TL_CLOCK_MONOTONIC) - SEC, 0),
                 0);
    for (s.iteration = 1; s.iteration <= 3; ++s.iteration) nowait(loop);
    cr_assert_eq(s.ran_first, 1, "%s", p->name);
    cr_assert_eq(s.ran_second, 2, "%s: ran in iteration %d", p->name, s.ran_second);
    free_loop(loop);
}

/* ------------------------------------------------------------------------ */
/* A restart the loop moves itself (parked during a dispatch)               */
/* ------------------------------------------------------------------------ */

struct parked {
    tl_timer due, a, b;
    int ran_b;
};

static void parked_b(tl_loop *loop, tl_timer *t) {
    (void)loop;
    ((struct parked *)t->data)->ran_b++;
}

static void parked_due(tl_loop *loop, tl_timer *t) {
    struct parked *s = t->data;
    cr_assert_eq(tl_timer_start(loop, &s->b, 0, 0), 0); /* due: parked */
}

/* a and b share a deadline 10 s away (b is the last of their run); a
 * callback restarts b as due, which the loop parks: the backend must take b
 * out from where its old deadline put it (debug builds walk the backend
 * after that remove), and b runs once, in the next iteration. */
BACKEND_TEST(restarts, parked_restart_of_a_timer_inside_leaves_the_backend_whole) {
    tl_loop *loop = new_loop_with(p->name);
    struct parked s = {0};
    tl_timer_init(&s.due, parked_due, &s);
    tl_timer_init(&s.a, parked_b, &s);
    tl_timer_init(&s.b, parked_b, &s);
    cr_assert_eq(tl_timer_start(loop, &s.a, 10 * SEC, 0), 0);
    cr_assert_eq(tl_timer_start(loop, &s.b, 10 * SEC, 0), 0);
    cr_assert_eq(tl_timer_start_at(loop, &s.due, TL_CLOCK_MONOTONIC,
                                   tl_loop_now(loop, TL_CLOCK_MONOTONIC) - SEC, 0),
                 0);
    nowait(loop);
    cr_assert_eq(s.ran_b, 0, "%s: b ran in the dispatch that restarted it", p->name);
    nowait(loop);
    cr_assert_eq(s.ran_b, 1, "%s: b ran %d times", p->name, s.ran_b);
    cr_assert_eq(tl_timer_stop(loop, &s.a), 0);
    free_loop(loop);
}
