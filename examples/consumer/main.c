/* SPDX-License-Identifier: MIT */
/*
 * main.c: a program outside the tickloop tree, built against it as a Meson
 * subproject (see meson.build and build.sh next to this file).
 *
 * Shows the smallest complete use of the C API from another project: a loop,
 * a repeating timer that stops itself after a few ticks, and the error
 * convention (negative errno, tl_strerror). Exits 0 on success.
 */
#include <stdio.h>

#include <tickloop/tickloop.h>

struct ticker {
    tl_timer timer;
    int ticks;
};

static void on_tick(tl_loop *loop, tl_timer *t) {
    struct ticker *ticker = t->data;
    if (++ticker->ticks == 3) tl_timer_stop(loop, t); /* the loop then has nothing left */
}

int main(void) {
    tl_loop *loop;
    int r = tl_loop_new(&loop, NULL);
    if (r < 0) {
        /* The library's account of what it refused (TICKLOOP_IO or
           TICKLOOP_TIMERS from the environment, here). */
        const char *why = tl_loop_new_error();
        fprintf(stderr, "consumer: tl_loop_new: %s\n", why ? why : tl_strerror(r));
        return 1;
    }
    struct ticker ticker = {.ticks = 0};
    tl_timer_init(&ticker.timer, on_tick, &ticker);
    /* First tick after 1 ms, then every 2 ms. */
    if ((r = tl_timer_start(loop, &ticker.timer, 1000000, 2000000)) < 0 ||
        (r = tl_loop_run(loop, TL_RUN_DEFAULT)) < 0) {
        fprintf(stderr, "consumer: %s\n", tl_strerror(r));
        return 1;
    }
    printf("consumer: tickloop %s, timers %s, io %s, %d ticks\n", tl_version(),
           tl_loop_timers_name(loop), tl_loop_io_name(loop), ticker.ticks);
    if ((r = tl_loop_free(loop)) < 0) {
        fprintf(stderr, "consumer: tl_loop_free: %s\n", tl_strerror(r));
        return 1;
    }
    return ticker.ticks == 3 ? 0 : 1;
}
