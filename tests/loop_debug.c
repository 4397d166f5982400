/* SPDX-License-Identifier: MIT */
/*
 * Debug-build checks: a call on a running loop from a thread other than the
 * one running it is undefined behaviour, caught by an assertion that names
 * the problem. Release builds (NDEBUG) compile the check out; the test skips.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>

#include <tickloop/tickloop.h>

static void nop(tl_loop *loop, tl_timer *t) {
    (void)loop;
    (void)t;
}

#ifdef NDEBUG
Test(loop_debug, call_from_wrong_thread_aborts) {
    cr_skip_test("release build: check compiled out");
}
#else
static tl_timer other;

static void *start_from_wrong_thread(void *loop) {
    tl_timer_start(loop, &other, 1000, 0);
    return NULL;
}

static void on_timer(tl_loop *loop, tl_timer *t) {
    (void)t;
    pthread_t thread;
    pthread_create(&thread, NULL, start_from_wrong_thread, loop);
    pthread_join(thread, NULL);
}

Test(loop_debug, call_from_wrong_thread_aborts, .signal = SIGABRT) {
    tl_loop *loop;
    cr_assert_eq(tl_loop_new(&loop, NULL), 0);
    tl_timer t;
    tl_timer_init(&t, on_timer, NULL);
    tl_timer_init(&other, nop, NULL);
    tl_timer_start(loop, &t, 0, 0);
    tl_loop_run(loop, TL_RUN_DEFAULT); /* aborts inside */
}
#endif

/* Creating a loop on one thread and running it on another is allowed (the
 * io_uring ring is bound to the thread of the first run, not of creation). */
static void *run_elsewhere(void *loop) {
    static int r;
    r = tl_loop_run(loop, TL_RUN_DEFAULT);
    return &r;
}

Test(loop_debug, loop_created_on_one_thread_runs_on_another) {
    tl_loop *loop;
    cr_assert_eq(tl_loop_new(&loop, NULL), 0);
    tl_timer t;
    tl_timer_init(&t, nop, NULL);
    cr_assert_eq(tl_timer_start(loop, &t, 1000000, 0), 0);
    pthread_t thread;
    void *ret;
    cr_assert_eq(pthread_create(&thread, NULL, run_elsewhere, loop), 0);
    pthread_join(thread, &ret);
    cr_assert_eq(*(int *)ret, 0);
    cr_assert_eq(tl_timer_active(&t), 0);
    cr_assert_eq(tl_loop_free(loop), 0);
}
