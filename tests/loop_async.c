/* SPDX-License-Identifier: MIT */
/*
 * Asyncs through the loop: sends coalesce (before a run and from another
 * thread, none lost), a callback may stop and free another pending async,
 * an active async keeps the loop alive, tl_async_init makes a double start
 * an O(1) -EBUSY, and pending asyncs run in start order. Run once per I/O
 * backend (TICKLOOP_IO).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "loop_helpers.h"

static void never_async(tl_loop *loop, tl_async *a) {
    (void)loop, (void)a;
    cr_assert_fail("unexpected async callback");
}

/* ------------------------------------------------------------------------ */
/* Async                                                                    */
/* ------------------------------------------------------------------------ */

struct async_state {
    tl_async async;
    int calls;
    int stop_at;
};

static void on_async(tl_loop *loop, tl_async *a) {
    struct async_state *st = a->data;
    if (++st->calls == st->stop_at) cr_assert(tl_async_stop(loop, a) == 0);
}

Test(async, sends_before_run_coalesce) {
    tl_loop *loop = new_loop();
    struct async_state st = {0};
    memset(&st.async, 0xa5, sizeof st.async); /* need not be initialised */
    cr_assert(tl_async_start(loop, &st.async, on_async, &st) == 0);
    cr_assert(st.async.data == &st);
    cr_assert(tl_loop_run(loop, TL_RUN_NOWAIT) == 1);
    cr_assert(st.calls == 0, "called without a send");
    for (int i = 0; i < 10; ++i) cr_assert(tl_async_send(&st.async) == 0);
    cr_assert(tl_loop_run(loop, TL_RUN_ONCE) == 1);
    cr_assert(st.calls == 1, "10 sends before one iteration: %d callbacks", st.calls);
    cr_assert(tl_loop_run(loop, TL_RUN_NOWAIT) == 1);
    cr_assert(st.calls == 1, "a callback without a new send");
    cr_assert(tl_async_send(&st.async) == 0);
    st.stop_at = 2;
    cr_assert(tl_loop_run(loop, TL_RUN_DEFAULT) == 0, "stopped in its callback: nothing left");
    cr_assert(st.calls == 2);
    cr_assert(tl_async_send(&st.async) == -EINVAL, "send after stop");
    free_loop(loop);
}

#define THREAD_SENDS 1000

struct async_thread {
    tl_async async;
    int calls;
    int saw_last; /* a callback ran after observing every send */
    int sent;     /* sends started by the thread, atomically */
};

static void *send_from_thread(void *arg) {
    struct async_thread *at = arg;
    for (int i = 0; i < THREAD_SENDS; ++i) {
        __atomic_store_n(&at->sent, i + 1, __ATOMIC_SEQ_CST);
        if (tl_async_send(&at->async) != 0) return (void *)1;
        if (i % 100 == 0) sched_yield();
    }
    return NULL;
}

static void on_thread_async(tl_loop *loop, tl_async *a) {
    (void)loop;
    struct async_thread *at = a->data;
    at->calls++;
    /* Only if this callback started after the last send began: then that
       send either was consumed by this call or will cause another one. */
    if (__atomic_load_n(&at->sent, __ATOMIC_SEQ_CST) == THREAD_SENDS) at->saw_last = 1;
}

Test(async, sends_from_another_thread_coalesce_and_none_is_lost) {
    tl_loop *loop = new_loop();
    static struct async_thread at;
    cr_assert(tl_async_start(loop, &at.async, on_thread_async, &at) == 0);
    int timed_out = 0;
    tl_timer failsafe;
    tl_timer_init(&failsafe, on_failsafe, &timed_out);
    cr_assert(tl_timer_start(loop, &failsafe, 10000 * MS, 0) == 0);
    pthread_t thread;
    cr_assert(pthread_create(&thread, NULL, send_from_thread, &at) == 0);
    /* Until a callback has run after the thread's last send. */
    while (!at.saw_last && !timed_out) cr_assert(tl_loop_run(loop, TL_RUN_ONCE) == 1);
    void *ret;
    cr_assert(pthread_join(thread, &ret) == 0);
    cr_assert(ret == NULL, "tl_async_send failed in the thread");
    cr_assert(!timed_out, "the last of %d sends was never followed by a callback (%d calls)",
              THREAD_SENDS, at.calls);
    /* A send that raced with the last callback may still be pending. */
    for (int i = 0; i < 3; ++i) cr_assert(tl_loop_run(loop, TL_RUN_NOWAIT) == 1);
    cr_assert(at.calls >= 1 && at.calls <= THREAD_SENDS, "%d callbacks for %d sends", at.calls,
              THREAD_SENDS);
    cr_assert(tl_timer_stop(loop, &failsafe) == 0);
    cr_assert(tl_async_stop(loop, &at.async) == 0);
    free_loop(loop);
}

/* Two pending asyncs; whichever runs first stops and frees the other. */
struct async_rivals {
    tl_async *a[2];
    int calls;
};

static void on_async_rival(tl_loop *loop, tl_async *a) {
    struct async_rivals *r = a->data;
    r->calls++;
    int me = a == r->a[0] ? 0 : 1;
    if (r->a[!me]) {
        cr_assert(tl_async_stop(loop, r->a[!me]) == 0);
        free(r->a[!me]);
        r->a[!me] = NULL;
    }
}

Test(async, stopped_and_freed_by_earlier_callback_is_not_called) {
    tl_loop *loop = new_loop();
    struct async_rivals r = {0};
    for (int i = 0; i < 2; ++i) {
        r.a[i] = malloc(sizeof(tl_async));
        cr_assert(r.a[i]);
        cr_assert(tl_async_start(loop, r.a[i], on_async_rival, &r) == 0);
    }
    for (int i = 0; i < 2; ++i) cr_assert(tl_async_send(r.a[i]) == 0);
    cr_assert(tl_loop_run(loop, TL_RUN_ONCE) == 1);
    cr_assert(r.calls == 1, "%d callbacks: a stopped async was called", r.calls);
    int left = r.a[0] ? 0 : 1;
    cr_assert(r.a[left] && !r.a[!left]);
    cr_assert(tl_async_stop(loop, r.a[left]) == 0);
    free(r.a[left]);
    free_loop(loop);
}

Test(async, keeps_loop_alive_and_free_is_busy) {
    tl_loop *loop = new_loop();
    struct async_state st = {0};
    cr_assert(tl_async_start(loop, &st.async, on_async, &st) == 0);
    cr_assert(tl_loop_free(loop) == -EBUSY);
    cr_assert(tl_loop_run(loop, TL_RUN_NOWAIT) == 1, "an active async keeps the loop alive");
    cr_assert(tl_async_stop(loop, &st.async) == 0);
    cr_assert(tl_async_stop(loop, &st.async) == 0, "stop of an inactive async");
    cr_assert(tl_loop_run(loop, TL_RUN_NOWAIT) == 0);
    /* Restartable after stop. */
    cr_assert(tl_async_start(loop, &st.async, on_async, &st) == 0);
    cr_assert(tl_async_stop(loop, &st.async) == 0);
    free_loop(loop);
}

/* ------------------------------------------------------------------------ */
/* tl_async_init, start order                                               */
/* ------------------------------------------------------------------------ */

Test(async, double_start_of_initialised_async_is_ebusy) {
    tl_loop *loop = new_loop(), *other = new_loop();
    tl_async a;
    tl_async_init(&a);
    cr_assert_eq(tl_async_send(&a), -EINVAL, "send to an inactive async");
    cr_assert_eq(tl_async_stop(loop, &a), 0);
    cr_assert_eq(tl_async_start(loop, &a, never_async, NULL), 0);
    cr_assert_eq(tl_async_start(loop, &a, never_async, NULL), -EBUSY);
    cr_assert_eq(tl_async_start(other, &a, never_async, NULL), -EBUSY);
    cr_assert_eq(tl_async_stop(other, &a), -EINVAL);
    tl_loop_stats st;
    tl_loop_stats_get(loop, &st);
    cr_assert_eq(st.asyncs_active, 1);
    cr_assert_eq(tl_async_stop(loop, &a), 0);
    cr_assert_eq(tl_async_stop(loop, &a), 0, "a second stop");
    cr_assert_eq(tl_async_start(loop, &a, never_async, NULL), 0, "restart after stop");
    cr_assert_eq(tl_async_stop(loop, &a), 0);
    tl_loop_stats_get(loop, &st);
    cr_assert_eq(st.asyncs_active, 0);
    free_loop(loop);
    free_loop(other);
}

struct order {
    char log[16];
    int n;
};
static struct order *g_order;
static void log_async(tl_loop *loop, tl_async *a) {
    (void)loop;
    g_order->log[g_order->n++] = *(const char *)a->data;
}

/* Pending asyncs run in start order: newest first, a "quit" async started
 * after a "work" async would run before it, and the work items sent with it
 * would be lost. */
Test(async, pending_asyncs_run_in_start_order) {
    struct order o = {{0}, 0};
    g_order = &o;
    tl_loop *loop = new_loop();
    tl_async work, quit, late;
    tl_async_init(&work);
    tl_async_init(&quit);
    tl_async_init(&late);
    cr_assert_eq(tl_async_start(loop, &work, log_async, "w"), 0);
    cr_assert_eq(tl_async_start(loop, &quit, log_async, "q"), 0);
    cr_assert_eq(tl_async_start(loop, &late, log_async, "l"), 0);
    cr_assert_eq(tl_async_send(&late), 0);
    cr_assert_eq(tl_async_send(&quit), 0);
    cr_assert_eq(tl_async_send(&work), 0);
    cr_assert_eq(tl_loop_run(loop, TL_RUN_ONCE), 1);
    cr_assert_str_eq(o.log, "wql");
    /* A restart moves an async to the end. */
    tl_async_stop(loop, &work);
    cr_assert_eq(tl_async_start(loop, &work, log_async, "w"), 0);
    tl_async_send(&work);
    tl_async_send(&quit);
    cr_assert_eq(tl_loop_run(loop, TL_RUN_ONCE), 1);
    cr_assert_str_eq(o.log, "wqlqw");
    check_loop(loop);
    tl_async_stop(loop, &work);
    tl_async_stop(loop, &quit);
    tl_async_stop(loop, &late);
    free_loop(loop);
}

/* Starting an async that was never initialised keeps working, whatever its
 * memory held (the behaviour before tl_async_init). */
Test(async, uninitialised_async_still_starts) {
    tl_loop *loop = new_loop();
    tl_async *a = malloc(sizeof *a);
    memset(a, 0xa5, sizeof *a);
    cr_assert_eq(tl_async_start(loop, a, never_async, NULL), 0);
    cr_assert_eq(tl_async_start(loop, a, never_async, NULL), -EBUSY);
    cr_assert_eq(tl_async_stop(loop, a), 0);
    cr_assert_eq(tl_async_start(loop, a, never_async, NULL), 0);
    cr_assert_eq(tl_async_stop(loop, a), 0);
    free(a);
    free_loop(loop);
}
