/* SPDX-License-Identifier: MIT */
/*
 * Loop options that bound work: max_timers_per_iteration (a storm of due
 * timers must not starve a ready socket, and loses or reorders nothing),
 * max_timers (-ENOSPC beyond it, nothing disturbed) and timer_slack_ns.
 * Parameterised over every registered timer backend.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <tickloop/timer_backend.h>

#include "backend_params.h"

static tl_loop *new_loop(const char *timers, uint32_t per_iteration, uint32_t max_timers) {
    tl_loop_options opts;
    tl_loop_options_init(&opts);
    opts.timers = timers;
    opts.max_timers_per_iteration = per_iteration;
    opts.max_timers = max_timers;
    tl_loop *loop = NULL;
    cr_assert_eq(tl_loop_new(&loop, &opts), 0);
    return loop;
}

enum { kStorm = 100000, kCap = 1000 };

struct storm {
    tl_timer *timers;
    size_t fired;
    size_t fired_when_io_ran; /* SIZE_MAX until the socket is served */
    size_t order_breaks;
    uint64_t last_deadline;
    size_t last_index;
    int *seen;
};

static void on_storm_timer(tl_loop *loop, tl_timer *t) {
    (void)loop;
    struct storm *s = t->data;
    size_t index = (size_t)(t - s->timers);
    s->seen[index]++;
    /* Heaps: (deadline, start order) — start order is the array order here. */
    if (s->fired && (t->deadline < s->last_deadline ||
                     (t->deadline == s->last_deadline && index < s->last_index)))
        s->order_breaks++;
    s->last_deadline = t->deadline;
    s->last_index = index;
    s->fired++;
}

static void on_socket(tl_loop *loop, tl_io *w, unsigned revents) {
    (void)revents;
    struct storm *s = w->data;
    char c;
    cr_assert_eq(read(w->fd, &c, 1), 1);
    s->fired_when_io_ran = s->fired;
    tl_io_stop(loop, w);
}

ParameterizedTestParameters(loop_limits, timer_storm_does_not_starve_a_ready_socket) {
    return backend_params();
}

ParameterizedTest(backend_param *p, loop_limits, timer_storm_does_not_starve_a_ready_socket,
                  .timeout = 120) {
    const char *name = p->name;
    tl_loop *loop = new_loop(name, kCap, 0);
    struct storm s = {0};
    s.fired_when_io_ran = SIZE_MAX;
    s.timers = calloc(kStorm, sizeof *s.timers);
    s.seen = calloc(kStorm, sizeof *s.seen);
    cr_assert(s.timers && s.seen);
    /* All due within one tick: timeouts 0..99 us, in a jumbled order. */
    for (size_t i = 0; i < kStorm; i++) {
        tl_timer_init(&s.timers[i], on_storm_timer, &s);
        cr_assert_eq(tl_timer_start(loop, &s.timers[i], (i * 7919) % 100 * 1000, 0), 0);
    }
    int sv[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    cr_assert_eq(write(sv[1], "x", 1), 1);
    tl_io w;
    tl_io_init(&w, sv[0], on_socket, &s);
    cr_assert_eq(tl_io_start(loop, &w, TL_READ), 0);
    usleep(2000); /* every timer is due (wheels: past the next tick) */

    cr_assert_eq(tl_loop_run(loop, TL_RUN_DEFAULT), 0);
    cr_assert_eq(s.fired, kStorm);
    for (size_t i = 0; i < kStorm; i++)
        cr_assert_eq(s.seen[i], 1, "timer %zu fired %d times", i, s.seen[i]);
    cr_assert_leq(s.fired_when_io_ran, kCap, "the socket waited for %zu timer callbacks",
                  s.fired_when_io_ran);
    if (backend_exact(name))
        cr_assert_eq(s.order_breaks, 0, "exact backend fired out of (deadline, start) order");
    close(sv[0]);
    close(sv[1]);
    cr_assert_eq(tl_loop_free(loop), 0);
    free(s.timers);
    free(s.seen);
}

static void nop(tl_loop *loop, tl_timer *t) {
    (void)loop;
    (void)t;
}

BACKEND_TEST(loop_limits, max_timers_refuses_with_enospc) {
    tl_loop *loop = new_loop(p->name, 0, 3);
    tl_timer t[4];
    for (int i = 0; i < 4; i++) tl_timer_init(&t[i], nop, NULL);
    for (int i = 0; i < 3; i++) cr_assert_eq(tl_timer_start(loop, &t[i], 1000000000, 0), 0);
    cr_assert_eq(tl_timer_start(loop, &t[3], 1000, 7), -ENOSPC);
    cr_assert_eq(tl_timer_active(&t[3]), 0);
    cr_assert_eq(t[3].repeat, 0, "a refused start changed the timer");
    /* Restarting an active timer at the limit is not a new timer. */
    cr_assert_eq(tl_timer_start(loop, &t[0], 2000000000, 0), 0);
    tl_loop_stats st;
    tl_loop_stats_get(loop, &st);
    cr_assert_eq(st.timers_active, 3);
    cr_assert_eq(tl_timer_stop(loop, &t[1]), 0);
    cr_assert_eq(tl_timer_start(loop, &t[3], 1000, 0), 0);
    for (int i = 0; i < 4; i++) tl_timer_stop(loop, &t[i]);
    cr_assert_eq(tl_loop_free(loop), 0);
}

Test(loop_limits, timer_slack_is_applied_to_the_running_thread) {
    tl_loop_options opts;
    tl_loop_options_init(&opts);
    opts.timer_slack_ns = 1000;
    tl_loop *loop;
    cr_assert_eq(tl_loop_new(&loop, &opts), 0);
    int before = prctl(PR_GET_TIMERSLACK);
    cr_assert_eq(tl_loop_run(loop, TL_RUN_NOWAIT), 0);
    cr_assert_eq(prctl(PR_GET_TIMERSLACK), 1000, "slack was %d before", before);
    tl_loop_free(loop);
}
