/* SPDX-License-Identifier: MIT */
/*
 * Threads: tl_async_send from many threads at once (sends coalesce, and a
 * send is never lost: every send is followed by a callback that observes what
 * was published before it), from a signal handler, a loop run on a thread
 * other than the one that created it, and several loops on several threads.
 * Once per I/O backend by meson.build (Criterion); tsan.sh builds the same
 * tests with -DTL_PLAIN_TESTS (plain_tests.h, no Criterion) under
 * ThreadSanitizer.
 */
#define _GNU_SOURCE
#ifdef TL_PLAIN_TESTS
#include "plain_tests.h"
#else
#include <criterion/criterion.h>
#endif
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <tickloop/tickloop.h>

#define MS 1000000ull

static tl_loop *new_loop(void) {
    tl_loop *loop = NULL;
    int r = tl_loop_new(&loop, NULL);
    cr_assert_eq(r, 0, "tl_loop_new: %s", tl_strerror(r));
    return loop;
}

/* Fails the test if a run that should end by itself hangs. */
static void on_watchdog(tl_loop *loop, tl_timer *t) {
    (void)loop;
    (void)t;
    cr_assert_fail("watchdog: the loop did not finish in time");
}

/* ------------------------------------------------------------------------ */
/* Many senders                                                             */
/* ------------------------------------------------------------------------ */

enum { kSenders = 8, kSendsEach = 20000 };

struct fan_in {
    tl_async async;
    atomic_ullong published; /* incremented before each send */
    pthread_barrier_t go;
    uint64_t callbacks;
    uint64_t observed; /* the largest `published` a callback saw */
    tl_timer watchdog;
};

static void *sender(void *arg) {
    struct fan_in *f = arg;
    pthread_barrier_wait(&f->go);
    for (int i = 0; i < kSendsEach; i++) {
        atomic_fetch_add(&f->published, 1);
        int r = tl_async_send(&f->async);
        if (r != 0) {
            fprintf(stderr, "tl_async_send: %s\n", tl_strerror(r));
            abort();
        }
        if (i % 1024 == 0) sched_yield();
    }
    return NULL;
}

static void on_fan_in(tl_loop *loop, tl_async *a) {
    struct fan_in *f = a->data;
    f->callbacks++;
    uint64_t seen = atomic_load(&f->published);
    cr_assert_geq(seen, f->observed, "published went backwards");
    f->observed = seen;
    /* The last send is followed by a callback that sees every publication:
       no extra send is needed to flush a lost wakeup. */
    if (seen == (uint64_t)kSenders * kSendsEach) {
        tl_async_stop(loop, a);
        tl_timer_stop(loop, &f->watchdog);
    }
}

Test(threads, async_sends_from_many_threads_coalesce_and_none_is_lost, .timeout = 120) {
    tl_loop *loop = new_loop();
    struct fan_in f;
    memset(&f, 0, sizeof f);
    atomic_init(&f.published, 0);
    cr_assert_eq(tl_async_start(loop, &f.async, on_fan_in, &f), 0);
    tl_timer_init(&f.watchdog, on_watchdog, NULL);
    cr_assert_eq(tl_timer_start(loop, &f.watchdog, 60000 * MS, 0), 0);
    cr_assert_eq(pthread_barrier_init(&f.go, NULL, kSenders + 1), 0);
    pthread_t threads[kSenders];
    for (int i = 0; i < kSenders; i++)
        cr_assert_eq(pthread_create(&threads[i], NULL, sender, &f), 0);
    pthread_barrier_wait(&f.go);
    cr_assert_eq(tl_loop_run(loop, TL_RUN_DEFAULT), 0);
    for (int i = 0; i < kSenders; i++) pthread_join(threads[i], NULL);
    pthread_barrier_destroy(&f.go);
    uint64_t sends = (uint64_t)kSenders * kSendsEach;
    cr_assert_eq(f.observed, sends);
    cr_assert_geq(f.callbacks, 1);
    cr_assert_leq(f.callbacks, sends);
    fprintf(stderr, "async (%s): %llu sends from %d threads, %llu callbacks (%.1f sends each)\n",
            tl_loop_io_name(loop), (unsigned long long)sends, kSenders,
            (unsigned long long)f.callbacks, (double)sends / (double)f.callbacks);
    cr_assert_eq(tl_loop_free(loop), 0);
}

/* ------------------------------------------------------------------------ */
/* From a signal handler                                                    */
/* ------------------------------------------------------------------------ */

static tl_async *signal_async;
static volatile sig_atomic_t handler_sends;

static void on_alarm_send(int signo) {
    (void)signo;
    int saved = errno;
    if (tl_async_send(signal_async) == 0) handler_sends++;
    errno = saved;
}

struct from_signal {
    int callbacks;
    int wanted;
    tl_timer watchdog;
};

static void on_signal_async(tl_loop *loop, tl_async *a) {
    struct from_signal *s = a->data;
    if (++s->callbacks == s->wanted) {
        tl_async_stop(loop, a);
        tl_timer_stop(loop, &s->watchdog);
    }
}

Test(threads, async_send_from_a_signal_handler, .timeout = 60) {
    tl_loop *loop = new_loop();
    tl_async a = {0}; /* the API allows garbage; valgrind does not (faults.c) */
    struct from_signal s = {.wanted = 20};
    cr_assert_eq(tl_async_start(loop, &a, on_signal_async, &s), 0);
    tl_timer_init(&s.watchdog, on_watchdog, NULL);
    cr_assert_eq(tl_timer_start(loop, &s.watchdog, 30000 * MS, 0), 0);
    signal_async = &a;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm_send;
    sigemptyset(&sa.sa_mask);
    cr_assert_eq(sigaction(SIGALRM, &sa, NULL), 0);
    struct itimerval it = {{0, 1000}, {0, 1000}};
    cr_assert_eq(setitimer(ITIMER_REAL, &it, NULL), 0);
    cr_assert_eq(tl_loop_run(loop, TL_RUN_DEFAULT), 0);
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    signal(SIGALRM, SIG_IGN);
    cr_assert_eq(s.callbacks, 20);
    cr_assert_geq(handler_sends, 20);
    cr_assert_eq(tl_loop_free(loop), 0);
}

/* ------------------------------------------------------------------------ */
/* A loop run on another thread                                             */
/* ------------------------------------------------------------------------ */

struct remote {
    tl_loop *loop;
    tl_async quit;
    tl_timer ticker;
    pthread_t runner;
    atomic_int ticks;
    int wrong_thread;
    int run_result;
    atomic_int quit_requested;
};

static void on_tick(tl_loop *loop, tl_timer *t) {
    (void)loop;
    struct remote *r = t->data;
    if (!pthread_equal(pthread_self(), r->runner)) r->wrong_thread++;
    atomic_fetch_add(&r->ticks, 1);
}

static void on_quit(tl_loop *loop, tl_async *a) {
    struct remote *r = a->data;
    if (!pthread_equal(pthread_self(), r->runner)) r->wrong_thread++;
    if (!atomic_load(&r->quit_requested)) return;
    tl_timer_stop(loop, &r->ticker);
    tl_async_stop(loop, a);
}

static void *run_remote(void *arg) {
    struct remote *r = arg;
    r->run_result = tl_loop_run(r->loop, TL_RUN_DEFAULT);
    return NULL;
}

Test(threads, loop_created_here_runs_on_another_thread, .timeout = 60) {
    struct remote r;
    memset(&r, 0, sizeof r);
    r.loop = new_loop();
    cr_assert_eq(tl_async_start(r.loop, &r.quit, on_quit, &r), 0);
    tl_timer_init(&r.ticker, on_tick, &r);
    cr_assert_eq(tl_timer_start(r.loop, &r.ticker, 1 * MS, 1 * MS), 0);
    cr_assert_eq(pthread_create(&r.runner, NULL, run_remote, &r), 0);
    /* Wait (at most 10 s) for the other thread's loop to tick a few times. */
    for (int i = 0; i < 10000 && atomic_load(&r.ticks) < 5; i++) usleep(1000);
    cr_assert_geq(atomic_load(&r.ticks), 5, "the loop on the other thread does not tick");
    /* A spurious wakeup first: the callback runs and keeps going. */
    cr_assert_eq(tl_async_send(&r.quit), 0);
    atomic_store(&r.quit_requested, 1);
    cr_assert_eq(tl_async_send(&r.quit), 0);
    pthread_join(r.runner, NULL);
    cr_assert_eq(r.run_result, 0);
    cr_assert_eq(r.wrong_thread, 0, "callbacks ran on the wrong thread");
    /* Back on this thread after the run ended: allowed. */
    cr_assert_eq(tl_loop_free(r.loop), 0);
}

/* ------------------------------------------------------------------------ */
/* Several loops, one per thread                                            */
/* ------------------------------------------------------------------------ */

enum { kLoops = 4, kTimersPerLoop = 2000 };

struct own_loop {
    tl_timer timers[kTimersPerLoop];
    int seen[kTimersPerLoop];
    int fired, early, errors;
    const char *backend;
};

static void on_own(tl_loop *loop, tl_timer *t) {
    struct own_loop *o = t->data;
    size_t i = (size_t)(t - o->timers);
    o->seen[i]++;
    if (tl_now(loop) < t->deadline) o->early++;
    o->fired++;
}

static void *own_loop_thread(void *arg) {
    struct own_loop *o = arg;
    tl_loop_options opts;
    tl_loop_options_init(&opts);
    opts.timers = o->backend;
    tl_loop *loop;
    if (tl_loop_new(&loop, &opts) != 0) {
        o->errors++;
        return NULL;
    }
    for (int i = 0; i < kTimersPerLoop; i++) {
        tl_timer_init(&o->timers[i], on_own, o);
        if (tl_timer_start(loop, &o->timers[i], (uint64_t)(i * 13 % 5000) * 1000, 0) != 0)
            o->errors++;
    }
    if (tl_loop_run(loop, TL_RUN_DEFAULT) != 0) o->errors++;
    if (tl_loop_free(loop) != 0) o->errors++;
    return NULL;
}

Test(threads, one_loop_per_thread_each_backend, .timeout = 60) {
    static const char *backends[kLoops] = {"heap2", "heap4", "wheel", "hwheel"};
    static struct own_loop loops[kLoops];
    pthread_t threads[kLoops];
    for (int i = 0; i < kLoops; i++) {
        memset(&loops[i], 0, sizeof loops[i]);
        loops[i].backend = backends[i];
        cr_assert_eq(pthread_create(&threads[i], NULL, own_loop_thread, &loops[i]), 0);
    }
    for (int i = 0; i < kLoops; i++) pthread_join(threads[i], NULL);
    for (int i = 0; i < kLoops; i++) {
        struct own_loop *o = &loops[i];
        cr_assert_eq(o->errors, 0, "%s: API errors on its thread", o->backend);
        cr_assert_eq(o->fired, kTimersPerLoop, "%s: %d fired", o->backend, o->fired);
        cr_assert_eq(o->early, 0, "%s: %d early", o->backend, o->early);
        for (int j = 0; j < kTimersPerLoop; j++)
            cr_assert_eq(o->seen[j], 1, "%s: timer %d fired %d times", o->backend, j, o->seen[j]);
    }
}
