/* SPDX-License-Identifier: MIT */
/*
 * A program written against the public names for hooks, references,
 * embedding, fork and explicit init: it compiles against the public header
 * with -Wall -Wextra -Werror as C11 and as C++17 (meson builds this file
 * both ways) and behaves as documented. Plain main, no Criterion:
 * it is what a user would write. Exits 0 on success, 1 with a message.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <tickloop/tickloop.h>

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #cond);                             \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

static char trace[16];
static int traced;

static void on_prepare(tl_loop *loop, tl_hook *h) {
    (void)loop, (void)h;
    trace[traced++] = 'P';
}
static void on_check(tl_loop *loop, tl_hook *h) {
    trace[traced++] = 'C';
    tl_hook_stop(loop, h);
}
static void on_idle(tl_loop *loop, tl_hook *h) {
    trace[traced++] = 'I';
    tl_hook_stop(loop, h);
}
static void on_timer(tl_loop *loop, tl_timer *t) {
    (void)loop, (void)t;
    trace[traced++] = 'T';
}
static void on_async(tl_loop *loop, tl_async *a) {
    trace[traced++] = 'A';
    tl_async_stop(loop, a);
}
static void on_signal(tl_loop *loop, tl_signal *s, int signo) {
    (void)loop, (void)s, (void)signo;
}

int main(void) {
    tl_loop *loop = NULL;
    CHECK(tl_loop_new(&loop, NULL) == 0);
    CHECK(tl_loop_alive(loop) == 0);

    tl_hook prepare, check, idle;
    tl_hook_init(&prepare, TL_HOOK_PREPARE, on_prepare, NULL);
    tl_hook_init(&check, TL_HOOK_CHECK, on_check, NULL);
    tl_hook_init(&idle, TL_HOOK_IDLE, on_idle, NULL);
    CHECK(tl_hook_start(loop, &prepare) == 0);
    CHECK(tl_hook_start(loop, &prepare) == -EBUSY);
    CHECK(tl_hook_start(loop, &check) == 0);
    CHECK(tl_hook_start(loop, &idle) == 0);
    CHECK(tl_hook_set_ref(loop, &prepare, 0) == 0);

    tl_timer t;
    tl_timer_init(&t, on_timer, NULL);
    CHECK(tl_timer_start(loop, &t, 0, 0) == 0);
    CHECK(tl_timer_set_ref(loop, &t, 1) == 0);

    tl_async a;
    tl_async_init(&a);
    CHECK(tl_async_start(loop, &a, on_async, NULL) == 0);
    CHECK(tl_async_start(loop, &a, on_async, NULL) == -EBUSY);
    CHECK(tl_async_send(&a) == 0);

    tl_signal s;
    tl_signal_init(&s);
    CHECK(tl_signal_start(loop, &s, SIGUSR2, on_signal, NULL) == 0);
    CHECK(tl_signal_set_ref(loop, &s, 0) == 0);

    int fds[2];
    CHECK(pipe(fds) == 0);
    tl_io w;
    tl_io_init(&w, fds[0], NULL, NULL);
    CHECK(tl_io_set_ref(loop, &w, 0) == 0);

    CHECK(tl_loop_fd(loop) >= 0);
    CHECK(tl_loop_timeout(loop) == 0); /* a due timer, an IDLE hook */
    CHECK(tl_loop_fork(loop) == 0);    /* harmless in the same process */

    /* One iteration: IDLE, PREPARE, the timer, the async, CHECK. */
    CHECK(tl_loop_run(loop, TL_RUN_NOWAIT) == 0);
    CHECK(strcmp(trace, "IPTAC") == 0);
    tl_loop_stats st;
    tl_loop_stats_get(loop, &st);
    CHECK(st.hooks_active == 1 && st.signals_active == 1 && st.unref_active == 2);
    CHECK(tl_loop_free(loop) == -EBUSY);
    CHECK(strstr(tl_strerror(-ENOENT), "timer backend") != NULL);
    tl_hook_stop(loop, &prepare);
    tl_signal_stop(loop, &s);
    CHECK(tl_loop_free(loop) == 0);
    close(fds[0]);
    close(fds[1]);
    return 0;
}
