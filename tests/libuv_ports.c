/* SPDX-License-Identifier: MIT */
/*
 * Scenarios of libuv's own tests (test/test-poll*.c, test-timer*.c,
 * test-async*.c, test-signal*.c, test-loop-*.c) that map onto tickloop's
 * API, rewritten against it: a peer's suite finds what our own tests share
 * blind spots with. Each test names the libuv test it follows; where
 * tickloop's contract differs the comment says how. Runs once per I/O
 * backend (TICKLOOP_IO).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "backend_params.h"
#include "loop_helpers.h"

static void on_io_never(tl_loop *loop, tl_io *w, unsigned revents) {
    (void)loop;
    (void)w;
    cr_assert_fail("I/O callback of a stopped watcher (revents %#x)", revents);
}

/* ------------------------------------------------------------------------ */
/* test-poll-close.c, test-poll-multiple-handles.c                          */
/* ------------------------------------------------------------------------ */

/* poll_close: many watchers started and stopped before the loop runs; the
 * run finds nothing to do and no callback comes. */
Test(libuv_poll, close_before_run) {
    enum { N = 64 };
    tl_loop *loop = new_loop();
    int socks[N];
    tl_io w[N];
    for (int i = 0; i < N; ++i) {
        socks[i] = socket(AF_INET, SOCK_STREAM, 0);
        cr_assert(socks[i] >= 0);
        tl_io_init(&w[i], socks[i], on_io_never, NULL);
        cr_assert(tl_io_start(loop, &w[i], TL_READ | TL_WRITE) == 0);
    }
    for (int i = 0; i < N; ++i) cr_assert(tl_io_stop(loop, &w[i]) == 0);
    cr_assert(tl_loop_run(loop, TL_RUN_DEFAULT) == 0);
    for (int i = 0; i < N; ++i) close(socks[i]);
    free_loop(loop);
}

/* poll_multiple_handles: one fd, two watchers: the second start is -EEXIST
 * while the first is active, succeeds after it stops; an unreferenced
 * watcher does not keep the loop running. libuv's unbound TCP socket reports
 * readable at once on Linux: libuv folds POLLHUP into UV_READABLE. tickloop
 * reports what the kernel says, TL_HUP alone (never connected), the same on
 * both backends. */
static int unbound_calls;
static void on_unbound(tl_loop *loop, tl_io *w, unsigned revents) {
    (void)w;
    cr_assert(revents == TL_HUP, "revents %#x", revents);
    unbound_calls++;
    tl_loop_stop(loop);
}

Test(libuv_poll, multiple_handles_on_one_fd) {
    tl_loop *loop = new_loop();
    int sock = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert(sock >= 0);
    tl_io first, second;
    tl_io_init(&first, sock, on_unbound, NULL);
    tl_io_init(&second, sock, on_unbound, NULL);
    cr_assert(tl_io_start(loop, &first, TL_READ) == 0);
    cr_assert(tl_io_start(loop, &second, TL_READ) == -EEXIST);
    cr_assert(tl_io_stop(loop, &first) == 0);
    cr_assert(tl_io_start(loop, &second, TL_READ) == 0);
    cr_assert(tl_io_stop(loop, &first) == 0, "stopping a stopped watcher is safe");
    cr_assert(tl_io_set_ref(loop, &second, 0) == 0);
    cr_assert(tl_loop_run(loop, TL_RUN_DEFAULT) == 0, "an unreferenced watcher kept it alive");
    cr_assert(tl_io_set_ref(loop, &second, 1) == 0);
    cr_assert(tl_loop_run(loop, TL_RUN_DEFAULT) == 1);
    cr_assert(unbound_calls == 1);
    cr_assert(tl_io_stop(loop, &second) == 0);
    close(sock);
    free_loop(loop);
}

/* ------------------------------------------------------------------------ */
/* test-poll.c (duplex): both ends exchange data through watchers whose     */
/* events change as they go: TL_WRITE on while there is something to send,  */
/* off after; TL_READ until the peer's half-close.                          */
/* ------------------------------------------------------------------------ */

enum { kTransfer = 1 << 20 };

struct peer {
    tl_io w;
    size_t sent, received;
    int shut_wr, got_eof, closed;
};

static int peers_done;

static void update_events(tl_loop *loop, struct peer *p) {
    unsigned ev = 0;
    if (!p->got_eof) ev |= TL_READ;
    if (!p->shut_wr) ev |= TL_WRITE;
    if (ev == 0) {
        cr_assert(tl_io_stop(loop, &p->w) == 0);
        p->closed = 1;
        peers_done++;
        return;
    }
    if (ev != p->w.events) cr_assert(tl_io_start(loop, &p->w, ev) == 0);
}

static void on_peer(tl_loop *loop, tl_io *w, unsigned revents) {
    struct peer *p = w->data;
    static char buf[16384];
    if (revents & TL_READ) {
        ssize_t n = read(w->fd, buf, sizeof buf);
        if (n > 0)
            p->received += (size_t)n;
        else if (n == 0)
            p->got_eof = 1;
        else
            cr_assert(errno == EAGAIN, "read: %s", strerror(errno));
    }
    if ((revents & TL_WRITE) && !p->shut_wr) {
        size_t left = kTransfer - p->sent;
        /* Odd sizes, so reads and writes never line up. */
        size_t chunk = left < 7919 ? left : 7919;
        memset(buf, 'a', chunk);
        ssize_t n = write(w->fd, buf, chunk);
        if (n > 0) p->sent += (size_t)n;
        if (p->sent == kTransfer) {
            cr_assert(shutdown(w->fd, SHUT_WR) == 0);
            p->shut_wr = 1;
        }
    }
    cr_assert(!(revents & TL_ERROR), "revents %#x", revents);
    update_events(loop, p);
}

Test(libuv_poll, duplex_transfer_with_changing_events) {
    tl_loop *loop = new_loop();
    int fds[2];
    cr_assert(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds) == 0);
    struct peer a = {0}, b = {0};
    tl_io_init(&a.w, fds[0], on_peer, &a);
    tl_io_init(&b.w, fds[1], on_peer, &b);
    cr_assert(tl_io_start(loop, &a.w, TL_READ | TL_WRITE) == 0);
    cr_assert(tl_io_start(loop, &b.w, TL_READ | TL_WRITE) == 0);
    int timed_out;
    tl_timer failsafe;
    start_failsafe(loop, &failsafe, &timed_out, 10000);
    while (peers_done < 2 && !timed_out) cr_assert(tl_loop_run(loop, TL_RUN_ONCE) >= 0);
    cr_assert(!timed_out, "stalled: a sent %zu got %zu, b sent %zu got %zu", a.sent, a.received,
              b.sent, b.received);
    cr_assert(a.received == kTransfer && b.received == kTransfer);
    tl_timer_stop(loop, &failsafe);
    close(fds[0]);
    close(fds[1]);
    free_loop(loop);
}

/* ------------------------------------------------------------------------ */
/* test-loop-stop.c, test-loop-time.c                                       */
/* ------------------------------------------------------------------------ */

static int stop_timer_calls, stop_prepare_calls;
static void on_stop_timer(tl_loop *loop, tl_timer *t) {
    stop_timer_calls++;
    if (stop_timer_calls == 1) tl_loop_stop(loop);
    if (stop_timer_calls == 10) tl_timer_stop(loop, t);
}
static void on_stop_prepare(tl_loop *loop, tl_hook *h) {
    if (++stop_prepare_calls == 10) tl_hook_stop(loop, h);
}

/* loop_stop: a stop from a callback ends DEFAULT after that iteration, with
 * handles left (1); later runs go on where it left off. */
Test(libuv_loop, stop_from_a_timer) {
    tl_loop *loop = new_loop();
    tl_hook prepare;
    tl_hook_init(&prepare, TL_HOOK_PREPARE, on_stop_prepare, NULL);
    cr_assert(tl_hook_start(loop, &prepare) == 0);
    tl_timer t;
    tl_timer_init(&t, on_stop_timer, NULL);
    cr_assert(tl_timer_start(loop, &t, 2 * MS, 2 * MS) == 0);
    cr_assert(tl_loop_run(loop, TL_RUN_DEFAULT) == 1);
    cr_assert(stop_timer_calls == 1);
    cr_assert(tl_loop_run(loop, TL_RUN_NOWAIT) == 1);
    cr_assert(stop_prepare_calls > 1);
    cr_assert(tl_loop_run(loop, TL_RUN_DEFAULT) == 0);
    cr_assert(stop_timer_calls == 10);
    cr_assert(stop_prepare_calls == 10);
    free_loop(loop);
}

static void on_abort_timer(tl_loop *loop, tl_timer *t) {
    (void)loop;
    (void)t;
    cr_assert_fail("ran after a stop before the run");
}

/* loop_stop_before_run: the run returns at once, the due timer not run. */
Test(libuv_loop, stop_before_run) {
    tl_loop *loop = new_loop();
    tl_timer t;
    tl_timer_init(&t, on_abort_timer, NULL);
    cr_assert(tl_timer_start(loop, &t, 0, 0) == 0);
    tl_loop_stop(loop);
    cr_assert(tl_loop_run(loop, TL_RUN_DEFAULT) != 0);
    cr_assert(tl_timer_stop(loop, &t) == 0);
    free_loop(loop);
}

/* loop_update_time: NOWAIT runs of a loop with nothing active still move
 * tl_now(), or this loop would never end. */
Test(libuv_loop, nowait_runs_advance_now) {
    tl_loop *loop = new_loop();
    uint64_t start = tl_now(loop);
    uint64_t deadline = mono_ns() + 2000 * MS;
    while (tl_now(loop) - start < 20 * MS) {
        cr_assert(tl_loop_run(loop, TL_RUN_NOWAIT) == 0);
        cr_assert(mono_ns() < deadline, "tl_now() stuck at %llu", (unsigned long long)tl_now(loop));
    }
    free_loop(loop);
}

static void on_close_self(tl_loop *loop, tl_timer *t) {
    tl_timer_stop(loop, t);
}

/* loop_backend_timeout: tl_loop_timeout follows the timer (libuv says 0
 * without handles; tickloop says UINT64_MAX, "only I/O can wake it"). */
Test(libuv_loop, backend_timeout_follows_the_timer) {
    tl_loop *loop = new_loop();
    cr_assert(tl_loop_timeout(loop) == UINT64_MAX);
    tl_timer t;
    tl_timer_init(&t, on_close_self, NULL);
    cr_assert(tl_timer_start(loop, &t, 1000 * MS, 0) == 0);
    uint64_t ns = tl_loop_timeout(loop);
    cr_assert(ns <= 1000 * MS && ns > 900 * MS, "timeout %llu ns", (unsigned long long)ns);
    cr_assert(tl_timer_stop(loop, &t) == 0);
    cr_assert(tl_loop_run(loop, TL_RUN_DEFAULT) == 0);
    cr_assert(tl_loop_timeout(loop) == UINT64_MAX);
    free_loop(loop);
}

/* ------------------------------------------------------------------------ */
/* test-timer.c, test-timer-again.c                                         */
/* ------------------------------------------------------------------------ */

static int order[4], order_n;
static void on_order(tl_loop *loop, tl_timer *t) {
    (void)loop;
    order[order_n++] = (int)(intptr_t)t->data;
}

/* timer_order: equal deadlines fire in start order; a restart moves a timer
 * behind the others. */
Test(libuv_timer, equal_deadlines_in_start_order) {
    tl_loop *loop = new_loop();
    tl_timer a, b;
    tl_timer_init(&a, on_order, (void *)(intptr_t)1);
    tl_timer_init(&b, on_order, (void *)(intptr_t)2);
    cr_assert(tl_timer_start(loop, &a, 0, 0) == 0);
    cr_assert(tl_timer_start(loop, &b, 0, 0) == 0);
    cr_assert(tl_loop_run(loop, TL_RUN_DEFAULT) == 0);
    cr_assert(order_n == 2 && order[0] == 1 && order[1] == 2);
    order_n = 0;
    cr_assert(tl_timer_start(loop, &b, 0, 0) == 0);
    cr_assert(tl_timer_start(loop, &a, 0, 0) == 0);
    cr_assert(tl_loop_run(loop, TL_RUN_DEFAULT) == 0);
    cr_assert(order_n == 2 && order[0] == 2 && order[1] == 1);
    free_loop(loop);
}

/* timer_huge_timeout, timer_huge_repeat: durations that would overflow
 * saturate at "never" and do not fire or keep a NOWAIT run busy. */
Test(libuv_timer, huge_timeout_and_repeat) {
    tl_loop *loop = new_loop();
    tl_timer a, b;
    tl_timer_init(&a, on_abort_timer, NULL);
    tl_timer_init(&b, on_abort_timer, NULL);
    cr_assert(tl_timer_start(loop, &a, UINT64_MAX, 0) == 0);
    cr_assert(a.deadline == UINT64_MAX);
    cr_assert(tl_timer_start(loop, &b, UINT64_MAX - 1, UINT64_MAX) == 0);
    cr_assert(tl_loop_run(loop, TL_RUN_NOWAIT) == 1);
    cr_assert(tl_timer_stop(loop, &a) == 0 && tl_timer_stop(loop, &b) == 0);
    free_loop(loop);
}

/* timer_run_once: ONCE runs a due timer and returns. */
/* Counts its calls in the int that t->data points at. */
static void on_count(tl_loop *loop, tl_timer *t) {
    (void)loop;
    ++*(int *)t->data;
}

Test(libuv_timer, run_once) {
    tl_loop *loop = new_loop();
    tl_timer t;
    int calls = 0;
    tl_timer_init(&t, on_count, &calls);
    cr_assert(tl_timer_start(loop, &t, 0, 0) == 0);
    cr_assert(tl_loop_run(loop, TL_RUN_ONCE) == 0);
    cr_assert(calls == 1);
    cr_assert(tl_timer_start(loop, &t, 1 * MS, 0) == 0);
    cr_assert(tl_loop_run(loop, TL_RUN_ONCE) == 0);
    cr_assert(calls == 2);
    free_loop(loop);
}

/* timer_again: again without a repeat is -EINVAL and leaves the timer as it
 * was; with one it restarts, and a repeating timer can be re-armed from its
 * own callback until it stops itself. */
static int again_calls;
static void on_again(tl_loop *loop, tl_timer *t) {
    if (++again_calls == 3) {
        cr_assert(tl_timer_stop(loop, t) == 0);
        return;
    }
    cr_assert(tl_timer_again(loop, t) == 0);
}

Test(libuv_timer, again) {
    tl_loop *loop = new_loop();
    tl_timer t;
    tl_timer_init(&t, on_again, NULL);
    cr_assert(tl_timer_again(loop, &t) == -EINVAL);
    cr_assert(!tl_timer_active(&t));
    cr_assert(tl_timer_start(loop, &t, 1 * MS, 0) == 0);
    cr_assert(tl_timer_again(loop, &t) == -EINVAL, "repeat 0");
    cr_assert(tl_timer_active(&t), "a refused again changed the timer");
    cr_assert(tl_timer_start(loop, &t, 1 * MS, 2 * MS) == 0);
    uint64_t begin = tl_now(loop);
    cr_assert(tl_loop_run(loop, TL_RUN_DEFAULT) == 0);
    cr_assert(again_calls == 3);
    cr_assert(tl_now(loop) - begin >= 5 * MS, "three fires in %llu ns",
              (unsigned long long)(tl_now(loop) - begin));
    free_loop(loop);
}

/* timer_null_callback: refused. */
Test(libuv_timer, null_callback_is_einval) {
    tl_loop *loop = new_loop();
    tl_timer t;
    tl_timer_init(&t, NULL, NULL);
    cr_assert(tl_timer_start(loop, &t, 0, 0) == -EINVAL);
    free_loop(loop);
}

/* timer_start_twice: a second start replaces the first (a day away): the
 * timer fires once, at the second start's deadline, and the run ends. */
static int twice_calls;
static void on_twice(tl_loop *loop, tl_timer *t) {
    (void)loop;
    cr_assert(!tl_timer_active(t), "a one-shot timer is inactive in its callback");
    twice_calls++;
}

BACKEND_TEST(libuv_timer, start_twice) {
    tl_loop *loop = new_loop_with(p->name);
    tl_timer t;
    twice_calls = 0;
    tl_timer_init(&t, on_twice, NULL);
    uint64_t begin = tl_now(loop); /* what the timeouts count from */
    cr_assert(tl_timer_start(loop, &t, 86400000 * MS, 0) == 0);
    cr_assert(tl_timer_start(loop, &t, 10 * MS, 0) == 0);
    cr_assert(tl_loop_run(loop, TL_RUN_DEFAULT) == 0);
    cr_assert(twice_calls == 1, "%s: %d calls", p->name, twice_calls);
    cr_assert(mono_ns() - begin >= 10 * MS, "%s: the run ended early", p->name);
    free_loop(loop);
}

/* timer_early_check: in the callback, the clock itself (not the loop's
 * cached time) has reached start + timeout; on every timer backend, the
 * wheels included (they fire inside the tick of the deadline). */
static uint64_t early_expected;
static int early_calls;
static void on_early_check(tl_loop *loop, tl_timer *t) {
    (void)loop;
    (void)t;
    uint64_t now = mono_ns();
    cr_assert(now >= early_expected, "fired %llu ns before its deadline",
              (unsigned long long)(early_expected - now));
    early_calls++;
}

BACKEND_TEST(libuv_timer, early_check) {
    tl_loop *loop = new_loop_with(p->name);
    tl_timer t;
    tl_timer_init(&t, on_early_check, NULL);
    early_calls = 0;
    /* An unaligned timeout: the wheels' partial tick is in play. */
    early_expected = tl_now(loop) + 10 * MS + 123457;
    cr_assert(tl_timer_start(loop, &t, 10 * MS + 123457, 0) == 0);
    cr_assert(tl_loop_run(loop, TL_RUN_DEFAULT) == 0);
    cr_assert(early_calls == 1, "%s: %d calls", p->name, early_calls);
    free_loop(loop);
}

/* timer_no_double_call_once, timer_no_double_call_nowait: a repeating
 * timer whose loop did not run for 2.5 periods is called once by the next
 * ONCE or NOWAIT iteration, not once per missed period; tickloop's periodic
 * timers (tl_timer_start_at with a period) skip missed periods the same
 * way, and their next deadline stays on the grid start + k * period. */

static void sleep_ns(uint64_t ns) {
    struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

Test(libuv_timer, no_double_call_after_missed_periods) {
    const tl_run_mode modes[] = {TL_RUN_ONCE, TL_RUN_NOWAIT};
    for (size_t m = 0; m < 2; ++m)
        for (int periodic = 0; periodic < 2; ++periodic) {
            tl_loop *loop = new_loop();
            tl_timer t;
            int double_calls = 0;
            tl_timer_init(&t, on_count, &double_calls);
            const uint64_t period = 10 * MS, start = tl_now(loop);
            if (periodic)
                cr_assert(tl_timer_start_at(loop, &t, TL_CLOCK_MONOTONIC, start + period, period) ==
                          0);
            else
                cr_assert(tl_timer_start(loop, &t, period, period) == 0);
            sleep_ns(25 * MS);
            cr_assert(tl_loop_run(loop, modes[m]) == 1);
            cr_assert(double_calls == 1, "mode %d, periodic %d: %d calls", (int)modes[m], periodic,
                      double_calls);
            cr_assert(tl_timer_active(&t));
            if (periodic) {
                /* The next point of the grid after the loop's time. */
                uint64_t now = tl_now(loop);
                cr_assert(t.deadline > now && t.deadline - now <= period &&
                              (t.deadline - start) % period == 0,
                          "periodic deadline %llu off the grid (start %llu, now %llu)",
                          (unsigned long long)t.deadline, (unsigned long long)start,
                          (unsigned long long)now);
            }
            cr_assert(tl_timer_stop(loop, &t) == 0);
            free_loop(loop);
        }
}

/* timer_no_run_on_unref: an unreferenced timer does not keep the run going
 * and is not called. */
Test(libuv_timer, no_run_on_unref) {
    tl_loop *loop = new_loop();
    tl_timer t;
    tl_timer_init(&t, on_abort_timer, NULL);
    cr_assert(tl_timer_start(loop, &t, 1 * MS, 0) == 0);
    cr_assert(tl_timer_set_ref(loop, &t, 0) == 0);
    cr_assert(tl_loop_run(loop, TL_RUN_DEFAULT) == 0);
    cr_assert(tl_timer_stop(loop, &t) == 0);
    free_loop(loop);
}

/* ------------------------------------------------------------------------ */
/* test-async.c, test-async-null-cb.c                                       */
/* ------------------------------------------------------------------------ */

static pthread_mutex_t async_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t async_cond = PTHREAD_COND_INITIALIZER;
static int async_calls, async_seen_by_sender;

static void *async_sender(void *arg) {
    tl_async *a = arg;
    for (int i = 0; i < 3; ++i) {
        cr_assert(tl_async_send(a) == 0);
        /* Wait for the callback before the next send, as libuv's test does
           with its mutex: each send then makes its own callback. */
        pthread_mutex_lock(&async_mutex);
        while (async_seen_by_sender == async_calls) pthread_cond_wait(&async_cond, &async_mutex);
        async_seen_by_sender = async_calls;
        pthread_mutex_unlock(&async_mutex);
    }
    return NULL;
}

static void on_async(tl_loop *loop, tl_async *a) {
    pthread_mutex_lock(&async_mutex);
    int n = ++async_calls;
    pthread_cond_signal(&async_cond);
    pthread_mutex_unlock(&async_mutex);
    if (n == 3) cr_assert(tl_async_stop(loop, a) == 0);
}

/* async: a thread's sends, one at a time, each wake the loop once. */
Test(libuv_async, sends_from_a_thread_in_lockstep) {
    tl_loop *loop = new_loop();
    tl_async a;
    tl_async_init(&a);
    cr_assert(tl_async_start(loop, &a, on_async, NULL) == 0);
    pthread_t th;
    cr_assert(pthread_create(&th, NULL, async_sender, &a) == 0);
    cr_assert(tl_loop_run(loop, TL_RUN_DEFAULT) == 0);
    cr_assert(pthread_join(th, NULL) == 0);
    cr_assert(async_calls == 3);
    free_loop(loop);
}

/* async_null_cb: libuv accepts a NULL callback; tickloop refuses it. */
Test(libuv_async, null_callback_is_einval) {
    tl_loop *loop = new_loop();
    tl_async a;
    tl_async_init(&a);
    cr_assert(tl_async_start(loop, &a, NULL, NULL) == -EINVAL);
    cr_assert(tl_async_send(&a) == -EINVAL, "send to an async that never started");
    free_loop(loop);
}

/* ------------------------------------------------------------------------ */
/* test-signal.c, test-signal-multiple-loops.c                              */
/* ------------------------------------------------------------------------ */

/* we_get_signals: a repeating timer raises the signal; the watcher counts
 * them and stops both after five. */
static int sig_calls;
static tl_timer sig_timer;
static void on_sig(tl_loop *loop, tl_signal *s, int signo) {
    cr_assert(signo == SIGUSR1);
    if (++sig_calls == 5) {
        cr_assert(tl_signal_stop(loop, s) == 0);
        cr_assert(tl_timer_stop(loop, &sig_timer) == 0);
    }
}
static void on_raise(tl_loop *loop, tl_timer *t) {
    (void)loop;
    (void)t;
    raise(SIGUSR1);
}

Test(libuv_signal, we_get_signals) {
    tl_loop *loop = new_loop();
    tl_signal s;
    tl_signal_init(&s);
    cr_assert(tl_signal_start(loop, &s, SIGUSR1, on_sig, NULL) == 0);
    tl_timer_init(&sig_timer, on_raise, NULL);
    cr_assert(tl_timer_start(loop, &sig_timer, 1 * MS, 1 * MS) == 0);
    cr_assert(tl_loop_run(loop, TL_RUN_DEFAULT) == 0);
    cr_assert(sig_calls == 5);
    free_loop(loop);
}

/* signal_multiple_loops: loops on several threads watch one signal (blocked
 * in every thread first, as the header asks of multi-threaded programs).
 * libuv lets each of them watch it; tickloop refuses all but one (-EEXIST:
 * they would compete for each instance, each getting some). So exactly one
 * loop gets it, the others are refused and stay usable; process-directed
 * sends reach the one; stopping restores its thread's mask (blocked, as it
 * was). */
enum { kSignalThreads = 4 };
static int thread_sig_calls[kSignalThreads];
static int signal_threads_tried, signal_threads_refused;
static volatile int signal_threads_stop;

static void on_thread_sig(tl_loop *loop, tl_signal *s, int signo) {
    (void)loop;
    (void)signo;
    __atomic_add_fetch((int *)s->data, 1, __ATOMIC_RELAXED);
}

static void *signal_thread(void *arg) {
    int *calls = arg;
    tl_loop *loop;
    if (tl_loop_new(&loop, NULL) != 0) return (void *)1;
    tl_signal s;
    tl_signal_init(&s);
    int r = tl_signal_start(loop, &s, SIGUSR2, on_thread_sig, calls);
    if (r == -EEXIST) __atomic_add_fetch(&signal_threads_refused, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&signal_threads_tried, 1, __ATOMIC_RELAXED);
    if (r == -EEXIST) return tl_loop_free(loop) == 0 ? NULL : (void *)5;
    if (r != 0) return (void *)2;
    tl_timer tick;
    int ticks = 0; /* this thread's own count */
    tl_timer_init(&tick, on_count, &ticks);
    while (!signal_threads_stop) {
        tl_timer_start(loop, &tick, 1 * MS, 0);
        tl_loop_run(loop, TL_RUN_ONCE);
    }
    tl_timer_stop(loop, &tick);
    if (tl_signal_stop(loop, &s) != 0) return (void *)3;
    sigset_t cur;
    pthread_sigmask(SIG_BLOCK, NULL, &cur);
    if (!sigismember(&cur, SIGUSR2)) return (void *)4; /* was blocked before */
    return tl_loop_free(loop) == 0 ? NULL : (void *)5;
}

Test(libuv_signal, multiple_loops_on_threads) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR2);
    cr_assert(pthread_sigmask(SIG_BLOCK, &set, NULL) == 0); /* inherited by the threads */
    pthread_t th[kSignalThreads];
    for (int i = 0; i < kSignalThreads; ++i)
        cr_assert(pthread_create(&th[i], NULL, signal_thread, &thread_sig_calls[i]) == 0);
    uint64_t deadline = mono_ns() + 5000 * MS;
    while (__atomic_load_n(&signal_threads_tried, __ATOMIC_RELAXED) < kSignalThreads &&
           mono_ns() < deadline)
        usleep(1000);
    for (;;) {
        int any = 0;
        for (int i = 0; i < kSignalThreads; ++i)
            any |= __atomic_load_n(&thread_sig_calls[i], __ATOMIC_RELAXED) > 0;
        if (any || mono_ns() > deadline) break;
        kill(getpid(), SIGUSR2);
        usleep(1000);
    }
    signal_threads_stop = 1;
    for (int i = 0; i < kSignalThreads; ++i) {
        void *ret;
        cr_assert(pthread_join(th[i], &ret) == 0);
        cr_assert(ret == NULL, "thread %d failed at step %ld", i, (long)(intptr_t)ret);
    }
    cr_assert(signal_threads_refused == kSignalThreads - 1, "%d of %d loops refused SIGUSR2",
              signal_threads_refused, kSignalThreads);
    int got = 0;
    for (int i = 0; i < kSignalThreads; ++i) got += thread_sig_calls[i] > 0;
    cr_assert(got == 1, "%d loops got SIGUSR2", got);
    /* Drain what is still pending so it does not outlive the test. */
    struct timespec zero = {0, 0};
    while (sigtimedwait(&set, NULL, &zero) == SIGUSR2) {
    }
}
