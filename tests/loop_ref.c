/* SPDX-License-Identifier: MIT */
/*
 * References (tl_*_set_ref, tl_loop_alive), the per-kind active counts in
 * the stats, and tl_strerror's library-specific messages (the explicit
 * initialisation of asyncs and signal watchers: loop_async.c,
 * loop_signal.c).
 * Includes ports of libuv's test-ref.c and test-loop-alive.c, rewritten for
 * this API. Run once per I/O backend (TICKLOOP_IO); the timer ones once per
 * registered timer backend too.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <signal.h>
#include <stdlib.h>

#include "backend_params.h"
#include "loop_helpers.h"

static void never_timer(tl_loop *loop, tl_timer *t) {
    (void)loop, (void)t;
    cr_assert_fail("an unreferenced timer kept the loop running until it fired");
}
static void never_hook(tl_loop *loop, tl_hook *h) {
    (void)loop, (void)h;
    cr_assert_fail("an unreferenced hook kept the loop running");
}
static void never_io(tl_loop *loop, tl_io *w, unsigned revents) {
    (void)loop, (void)w, (void)revents;
    cr_assert_fail("unexpected I/O callback");
}
static void never_async(tl_loop *loop, tl_async *a) {
    (void)loop, (void)a;
    cr_assert_fail("unexpected async callback");
}
static void never_signal(tl_loop *loop, tl_signal *s, int signo) {
    (void)loop, (void)s, (void)signo;
    cr_assert_fail("unexpected signal callback");
}

/* tl_loop_run(DEFAULT) with only unreferenced handles returns 0 at once. */
static void assert_run_returns_at_once(tl_loop *loop) {
    cr_assert_eq(tl_loop_alive(loop), 0);
    uint64_t t0 = mono_ns();
    cr_assert_eq(tl_loop_run(loop, TL_RUN_DEFAULT), 0);
    cr_assert_lt(mono_ns() - t0, 2000 * MS, "tl_loop_run blocked on unreferenced handles");
}

/* ------------------------------------------------------------------------ */
/* libuv test-ref.c                                                         */
/* ------------------------------------------------------------------------ */

Test(ref, empty_loop_is_not_alive) {
    tl_loop *loop = new_loop();
    assert_run_returns_at_once(loop);
    cr_assert_eq(tl_loop_alive(NULL), 0);
    free_loop(loop);
}

BACKEND_TEST(ref, timer_unref_before_start) {
    tl_loop *loop = new_loop_with(p->name);
    tl_timer t;
    tl_timer_init(&t, never_timer, NULL);
    cr_assert_eq(tl_timer_set_ref(loop, &t, 0), 0);
    cr_assert_eq(tl_timer_start(loop, &t, 50 * MS, 0), 0);
    assert_run_returns_at_once(loop);
    tl_loop_stats st;
    tl_loop_stats_get(loop, &st);
    cr_assert_eq(st.timers_active, 1);
    cr_assert_eq(st.unref_active, 1);
    check_loop(loop);
    cr_assert_eq(tl_loop_free(loop), -EBUSY, "%s: an unreferenced timer is still active", p->name);
    tl_timer_stop(loop, &t);
    free_loop(loop);
}

BACKEND_TEST(ref, timer_unref_after_start_and_kept_across_restart) {
    tl_loop *loop = new_loop_with(p->name);
    tl_timer t;
    tl_timer_init(&t, never_timer, NULL);
    cr_assert_eq(tl_timer_start(loop, &t, 50 * MS, 0), 0);
    cr_assert_eq(tl_loop_alive(loop), 1);
    cr_assert_eq(tl_timer_set_ref(loop, &t, 0), 0);
    assert_run_returns_at_once(loop);
    tl_timer_stop(loop, &t);
    cr_assert_eq(tl_timer_start(loop, &t, 50 * MS, 20 * MS), 0);
    assert_run_returns_at_once(loop);
    cr_assert_eq(tl_timer_start(loop, &t, 60 * MS, 20 * MS), 0, "reschedule of an active one");
    assert_run_returns_at_once(loop);
    tl_timer_stop(loop, &t);
    free_loop(loop);
}

struct counter {
    int n;
    tl_timer *hold; /* stopped once n reaches 2 (if set) */
};
static void count_timer(tl_loop *loop, tl_timer *t) {
    struct counter *c = t->data;
    if (++c->n == 2 && c->hold) tl_timer_stop(loop, c->hold);
}

/* An unreferenced repeating timer still fires while a referenced handle keeps
 * the loop running, and a one-shot referenced again holds the loop. */
BACKEND_TEST(ref, unreferenced_timer_still_fires_and_ref_holds_again) {
    tl_loop *loop = new_loop_with(p->name);
    tl_timer tick, hold;
    struct counter ticks = {0, &hold}, end = {0, NULL};
    tl_timer_init(&tick, count_timer, &ticks);
    tl_timer_init(&hold, count_timer, &end);
    cr_assert_eq(tl_timer_start(loop, &tick, 5 * MS, 5 * MS), 0);
    cr_assert_eq(tl_timer_set_ref(loop, &tick, 0), 0);
    /* The referenced timer holds the loop until the unreferenced one has
       fired twice (it stops it then): no bound on how fast a loaded
       machine gets there, only that it does before this one is due. */
    cr_assert_eq(tl_timer_start(loop, &hold, 60000 * MS, 0), 0);
    cr_assert_eq(tl_loop_run(loop, TL_RUN_DEFAULT), 0);
    cr_assert_eq(end.n, 0, "%s: the referenced timer ran out first", p->name);
    cr_assert_eq(ticks.n, 2, "%s: the unreferenced timer fired %d times", p->name, ticks.n);
    cr_assert(tl_timer_active(&tick), "a repeating timer stays active");
    /* Referenced again, the repeating timer holds the loop: ONCE returns 1. */
    cr_assert_eq(tl_timer_set_ref(loop, &tick, 1), 0);
    cr_assert_eq(tl_loop_alive(loop), 1);
    cr_assert_eq(tl_loop_run(loop, TL_RUN_ONCE), 1);
    tl_timer_stop(loop, &tick);
    cr_assert_eq(tl_loop_alive(loop), 0);
    free_loop(loop);
}

static void check_hook_ref(tl_hook_kind kind) {
    tl_loop *loop = new_loop();
    tl_hook h;
    tl_hook_init(&h, kind, never_hook, NULL);
    cr_assert_eq(tl_hook_set_ref(loop, &h, 0), 0);
    cr_assert_eq(tl_hook_start(loop, &h), 0);
    assert_run_returns_at_once(loop);
    tl_hook_stop(loop, &h);
    free_loop(loop);
}

Test(ref, idle_ref) {
    check_hook_ref(TL_HOOK_IDLE);
}
Test(ref, prepare_ref) {
    check_hook_ref(TL_HOOK_PREPARE);
}
Test(ref, check_ref) {
    check_hook_ref(TL_HOOK_CHECK);
}

static void unref_self(tl_loop *loop, tl_hook *h) {
    ((struct counter *)h->data)->n++;
    cr_assert_eq(tl_hook_set_ref(loop, h, 0), 0);
}

/* A PREPARE hook that unreferences itself ends the run: its iteration does
 * not block (nothing referenced is left) and the loop returns 0. */
Test(ref, unref_in_prepare_cb, .timeout = 20) {
    tl_loop *loop = new_loop();
    struct counter c = {0};
    tl_hook h;
    tl_hook_init(&h, TL_HOOK_PREPARE, unref_self, &c);
    cr_assert_eq(tl_hook_start(loop, &h), 0);
    cr_assert_eq(tl_loop_run(loop, TL_RUN_DEFAULT), 0);
    cr_assert_eq(c.n, 1);
    tl_hook_stop(loop, &h);
    free_loop(loop);
}

Test(ref, io_ref) {
    tl_loop *loop = new_loop();
    int fds[2];
    make_pair(fds);
    tl_io w;
    tl_io_init(&w, fds[0], never_io, NULL);
    cr_assert_eq(tl_io_start(loop, &w, TL_READ), 0);
    cr_assert_eq(tl_io_set_ref(loop, &w, 0), 0);
    assert_run_returns_at_once(loop);
    /* Kept across stop/start. */
    tl_io_stop(loop, &w);
    cr_assert_eq(tl_io_start(loop, &w, TL_READ), 0);
    assert_run_returns_at_once(loop);
    tl_loop_stats st;
    tl_loop_stats_get(loop, &st);
    cr_assert_eq(st.io_active, 1);
    cr_assert_eq(st.unref_active, 1);
    tl_io_stop(loop, &w);
    close(fds[0]);
    close(fds[1]);
    free_loop(loop);
}

Test(ref, async_ref) {
    tl_loop *loop = new_loop();
    tl_async a;
    tl_async_init(&a);
    cr_assert_eq(tl_async_start(loop, &a, never_async, NULL), 0);
    cr_assert_eq(tl_async_set_ref(loop, &a, 0), 0);
    assert_run_returns_at_once(loop);
    tl_async_stop(loop, &a);
    cr_assert_eq(tl_async_start(loop, &a, never_async, NULL), 0);
    assert_run_returns_at_once(loop);
    cr_assert_eq(tl_async_set_ref(loop, &a, 1), 0);
    cr_assert_eq(tl_loop_alive(loop), 1);
    tl_async_stop(loop, &a);
    free_loop(loop);
}

Test(ref, signal_ref) {
    tl_loop *loop = new_loop();
    tl_signal s;
    tl_signal_init(&s);
    cr_assert_eq(tl_signal_set_ref(loop, &s, 0), 0);
    cr_assert_eq(tl_signal_start(loop, &s, SIGUSR2, never_signal, NULL), 0);
    assert_run_returns_at_once(loop);
    tl_loop_stats st;
    tl_loop_stats_get(loop, &st);
    cr_assert_eq(st.signals_active, 1);
    cr_assert_eq(st.unref_active, 1);
    tl_signal_stop(loop, &s);
    free_loop(loop);
}

Test(ref, set_ref_refuses_bad_arguments) {
    tl_loop *loop = new_loop(), *other = new_loop();
    tl_timer t;
    tl_timer_init(&t, never_timer, NULL);
    cr_assert_eq(tl_timer_set_ref(NULL, &t, 0), -EINVAL);
    cr_assert_eq(tl_timer_set_ref(loop, NULL, 0), -EINVAL);
    cr_assert_eq(tl_io_set_ref(loop, NULL, 0), -EINVAL);
    cr_assert_eq(tl_async_set_ref(loop, NULL, 0), -EINVAL);
    cr_assert_eq(tl_signal_set_ref(loop, NULL, 0), -EINVAL);
    cr_assert_eq(tl_hook_set_ref(NULL, NULL, 0), -EINVAL);
    cr_assert_eq(tl_timer_start(loop, &t, 1000 * MS, 0), 0);
    cr_assert_eq(tl_timer_set_ref(other, &t, 0), -EINVAL, "active on another loop");
    cr_assert_eq(tl_loop_alive(loop), 1, "a refused set_ref changed nothing");
    tl_async a;
    tl_async_init(&a);
    cr_assert_eq(tl_async_start(loop, &a, never_async, NULL), 0);
    cr_assert_eq(tl_async_set_ref(other, &a, 0), -EINVAL);
    tl_timer_stop(loop, &t);
    tl_async_stop(loop, &a);
    free_loop(loop);
    free_loop(other);
}

/* ------------------------------------------------------------------------ */
/* libuv test-loop-alive.c                                                  */
/* ------------------------------------------------------------------------ */

BACKEND_TEST(ref, loop_alive) {
    tl_loop *loop = new_loop_with(p->name);
    cr_assert_eq(tl_loop_alive(loop), 0);
    struct counter c = {0};
    tl_timer t;
    tl_timer_init(&t, count_timer, &c);
    cr_assert_eq(tl_timer_start(loop, &t, 20 * MS, 0), 0);
    cr_assert_eq(tl_loop_alive(loop), 1);
    cr_assert_eq(tl_loop_run(loop, TL_RUN_DEFAULT), 0);
    cr_assert_eq(c.n, 1);
    cr_assert_eq(tl_loop_alive(loop), 0);
    free_loop(loop);
}

/* ------------------------------------------------------------------------ */
/* Stats and messages                                                       */
/* ------------------------------------------------------------------------ */

Test(stats, per_kind_active_counts_explain_ebusy) {
    tl_loop *loop = new_loop();
    int fds[2];
    make_pair(fds);
    tl_timer t;
    tl_io w;
    tl_async a;
    tl_signal s;
    tl_hook h1, h2;
    tl_timer_init(&t, never_timer, NULL);
    tl_io_init(&w, fds[0], never_io, NULL);
    tl_async_init(&a);
    tl_signal_init(&s);
    tl_hook_init(&h1, TL_HOOK_CHECK, never_hook, NULL);
    tl_hook_init(&h2, TL_HOOK_IDLE, never_hook, NULL);
    cr_assert_eq(tl_timer_start(loop, &t, 1000 * MS, 0), 0);
    cr_assert_eq(tl_io_start(loop, &w, TL_READ), 0);
    cr_assert_eq(tl_async_start(loop, &a, never_async, NULL), 0);
    cr_assert_eq(tl_signal_start(loop, &s, SIGUSR2, never_signal, NULL), 0);
    cr_assert_eq(tl_hook_start(loop, &h1), 0);
    cr_assert_eq(tl_hook_start(loop, &h2), 0);
    cr_assert_eq(tl_hook_set_ref(loop, &h2, 0), 0);
    tl_loop_stats st;
    tl_loop_stats_get(loop, &st);
    cr_assert_eq(st.timers_active, 1);
    cr_assert_eq(st.io_active, 1, "the loop's own eventfd and signalfd are not counted");
    cr_assert_eq(st.asyncs_active, 1);
    cr_assert_eq(st.signals_active, 1);
    cr_assert_eq(st.hooks_active, 2);
    cr_assert_eq(st.unref_active, 1);
    check_loop(loop);
    cr_assert_eq(tl_loop_free(loop), -EBUSY);
    tl_timer_stop(loop, &t);
    tl_io_stop(loop, &w);
    tl_async_stop(loop, &a);
    tl_signal_stop(loop, &s);
    tl_hook_stop(loop, &h1);
    tl_hook_stop(loop, &h2);
    tl_loop_stats_get(loop, &st);
    cr_assert_eq(st.timers_active + st.io_active + st.asyncs_active + st.signals_active +
                     st.hooks_active + st.unref_active,
                 0);
    close(fds[0]);
    close(fds[1]);
    free_loop(loop);
}

Test(errors, strerror_speaks_the_library_s_terms) {
    cr_assert(strstr(tl_strerror(-ENOENT), "timer backend"), "%s", tl_strerror(-ENOENT));
    cr_assert(strstr(tl_strerror(-ENOSPC), "max_timers"), "%s", tl_strerror(-ENOSPC));
    cr_assert(strstr(tl_strerror(-EBUSY), "active"), "%s", tl_strerror(-EBUSY));
    /* Others keep the generic text. */
    cr_assert_str_eq(tl_strerror(-EINVAL), strerror(EINVAL));
    cr_assert_str_eq(tl_strerror(0), "success");
    cr_assert_str_eq(tl_strerror(5), "unknown error");
}
