/* SPDX-License-Identifier: MIT */
/*
 * The other half of tests/realtime_jump.sh (built, never run by meson test):
 * starts a REALTIME timer 60 s ahead of the wall clock and a MONOTONIC
 * failsafe 20 s ahead, prints "ready", and runs. The script then steps the
 * wall clock 120 s forward: the REALTIME timer must fire at once (the kernel
 * reports the step; the loop does not poll), on this clock's terms (never
 * early), long before the failsafe, with clock_changes counted. Exit status 0
 * on success; the message says what failed otherwise. Argument: "epoll" or
 * "io_uring".
 */
#include <stdio.h>
#include <string.h>

#include <tickloop/tickloop.h>

#define SEC 1000000000ull

static int wall_fired, failsafe_fired, early;

static void on_wall(tl_loop *loop, tl_timer *t) {
    early |= tl_clock_now(TL_CLOCK_REALTIME) < t->deadline;
    wall_fired = 1;
    tl_loop_stop(loop);
}

static void on_failsafe(tl_loop *loop, tl_timer *t) {
    (void)t;
    failsafe_fired = 1;
    tl_loop_stop(loop);
}

int main(int argc, char **argv) {
    tl_loop_options opts;
    tl_loop_options_init(&opts);
    opts.io = argc > 1 && strcmp(argv[1], "io_uring") == 0 ? TL_IO_URING : TL_IO_EPOLL;
    tl_loop *loop;
    int r = tl_loop_new(&loop, &opts);
    if (r < 0) {
        fprintf(stderr, "tl_loop_new: %s\n", tl_strerror(r));
        return 2;
    }
    tl_timer wall, failsafe;
    tl_timer_init(&wall, on_wall, NULL);
    tl_timer_init(&failsafe, on_failsafe, NULL);
    tl_timer_start_at(loop, &wall, TL_CLOCK_REALTIME, tl_clock_now(TL_CLOCK_REALTIME) + 60 * SEC,
                      0);
    tl_timer_start(loop, &failsafe, 20 * SEC, 0);
    printf("ready\n");
    fflush(stdout);
    tl_loop_run(loop, TL_RUN_DEFAULT);
    tl_loop_stats st;
    tl_loop_stats_get(loop, &st);
    tl_timer_stop(loop, &wall);
    tl_timer_stop(loop, &failsafe);
    tl_loop_free(loop);
    if (!wall_fired || failsafe_fired) {
        fprintf(stderr, "%s: the REALTIME timer did not fire after the step\n", argv[0]);
        return 1;
    }
    if (early) {
        fprintf(stderr, "%s: the REALTIME timer fired before its deadline\n", argv[0]);
        return 1;
    }
    if (st.clock_changes == 0) {
        fprintf(stderr, "%s: clock_changes is 0 after a step\n", argv[0]);
        return 1;
    }
    printf("ok: fired after the step, clock_changes %llu\n", (unsigned long long)st.clock_changes);
    return 0;
}
