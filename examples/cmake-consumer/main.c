/* SPDX-License-Identifier: MIT */
/*
 * main.c: the CMake consumer's program. Runs a loop with one timer and
 * prints the version of the library it linked; exits 0 when the timer
 * fired. Enough to prove that the headers, the library and, for the
 * static one, its dependencies (liburing, pthread) all came through
 * tickloop::tickloop.
 */
#include <stdio.h>

#include <tickloop/tickloop.h>

static int fired;

static void on_timer(tl_loop *loop, tl_timer *t) {
    (void)loop;
    (void)t;
    fired = 1;
}

int main(void) {
    tl_loop *loop;
    int err = tl_loop_new(&loop, NULL);
    if (err) {
        fprintf(stderr, "tl_loop_new: %s\n", tl_strerror(err));
        return 1;
    }
    tl_timer t;
    tl_timer_init(&t, on_timer, NULL);
    tl_timer_start(loop, &t, 1000000, 0); /* 1 ms */
    tl_loop_run(loop, TL_RUN_DEFAULT);
    printf("cmake-consumer: tickloop %s (header %d.%d.%d), io %s, timer %s\n", tl_version(),
           TL_VERSION_MAJOR, TL_VERSION_MINOR, TL_VERSION_PATCH, tl_loop_io_name(loop),
           fired ? "fired" : "did not fire");
    tl_loop_free(loop);
    return fired ? 0 : 1;
}
