/* SPDX-License-Identifier: MIT */
/*
 * Misuse of the C API: NULL pointers, bad names, bad options, inactive or
 * never-started handles, out-of-range values. Each call must return its
 * documented value (a negative errno, 0, or NULL) and must not crash, print,
 * abort or exit.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include <tickloop/tickloop.h>
#include <tickloop/timer_backend.h>

#include "loop_helpers.h"

static void timer_cb(tl_loop *loop, tl_timer *t) {
    (void)loop;
    (void)t;
}
static void io_cb(tl_loop *loop, tl_io *w, unsigned revents) {
    (void)loop;
    (void)w;
    (void)revents;
}
static void async_cb(tl_loop *loop, tl_async *a) {
    (void)loop;
    (void)a;
}
static void signal_cb(tl_loop *loop, tl_signal *s, int signo) {
    (void)loop;
    (void)s;
    (void)signo;
}

Test(api, null_loop_and_handles) {
    tl_loop *loop = new_loop();
    tl_timer t;
    tl_timer_init(&t, timer_cb, NULL);
    tl_io w;
    tl_io_init(&w, 0, io_cb, NULL);
    tl_async a;
    memset(&a, 0, sizeof a);
    tl_signal s;
    memset(&s, 0, sizeof s);

    /* Loop. */
    cr_assert(tl_loop_new(NULL, NULL) == -EINVAL);
    cr_assert(tl_loop_free(NULL) == -EINVAL);
    cr_assert(tl_loop_run(NULL, TL_RUN_DEFAULT) == -EINVAL);
    cr_assert(tl_loop_run(NULL, TL_RUN_NOWAIT) == -EINVAL);
    tl_loop_stop(NULL);
    cr_assert(tl_now(NULL) == 0);
    tl_update_time(NULL);
    cr_assert(tl_loop_timers_name(NULL) == NULL);
    cr_assert(tl_loop_io_name(NULL) == NULL);
    tl_loop_options_init(NULL);
    tl_loop_stats_get(loop, NULL);
    tl_loop_stats_get(NULL, NULL);

    /* Timers. */
    tl_timer_init(NULL, timer_cb, NULL);
    cr_assert(tl_timer_start(NULL, &t, 1, 0) == -EINVAL);
    cr_assert(tl_timer_start(loop, NULL, 1, 0) == -EINVAL);
    cr_assert(tl_timer_stop(NULL, &t) == -EINVAL);
    cr_assert(tl_timer_stop(loop, NULL) == -EINVAL);
    cr_assert(tl_timer_again(NULL, &t) == -EINVAL);
    cr_assert(tl_timer_again(loop, NULL) == -EINVAL);
    cr_assert(tl_timer_active(NULL) == 0);

    /* I/O. */
    tl_io_init(NULL, 0, io_cb, NULL);
    cr_assert(tl_io_start(NULL, &w, TL_READ) == -EINVAL);
    cr_assert(tl_io_start(loop, NULL, TL_READ) == -EINVAL);
    cr_assert(tl_io_stop(NULL, &w) == -EINVAL);
    cr_assert(tl_io_stop(loop, NULL) == -EINVAL);

    /* Async. */
    cr_assert(tl_async_start(NULL, &a, async_cb, NULL) == -EINVAL);
    cr_assert(tl_async_start(loop, NULL, async_cb, NULL) == -EINVAL);
    cr_assert(tl_async_start(loop, &a, NULL, NULL) == -EINVAL);
    cr_assert(tl_async_send(NULL) == -EINVAL);
    cr_assert(tl_async_stop(NULL, &a) == -EINVAL);
    cr_assert(tl_async_stop(loop, NULL) == -EINVAL);

    /* Signals. */
    cr_assert(tl_signal_start(NULL, &s, SIGUSR1, signal_cb, NULL) == -EINVAL);
    cr_assert(tl_signal_start(loop, NULL, SIGUSR1, signal_cb, NULL) == -EINVAL);
    cr_assert(tl_signal_start(loop, &s, SIGUSR1, NULL, NULL) == -EINVAL);
    cr_assert(tl_signal_stop(NULL, &s) == -EINVAL);
    cr_assert(tl_signal_stop(loop, NULL) == -EINVAL);

    /* Registry. */
    cr_assert(tl_timer_backend_register(NULL) == -EINVAL);
    cr_assert(tl_timer_backend_find(NULL) == NULL);
    cr_assert(tl_timer_backend_names(NULL, 0) >= 2);
    cr_assert(tl_timer_backend_names(NULL, 5) >= 2, "names may be NULL");

    /* Nothing of the above started anything. */
    cr_assert(tl_loop_run(loop, TL_RUN_NOWAIT) == 0);
    cr_assert(tl_loop_free(loop) == 0);
}

Test(api, bad_loop_options) {
    tl_loop *loop = NULL;
    tl_loop_options opts;

    tl_loop_options_init(&opts);
    opts.timers = "no_such_backend";
    cr_assert(tl_loop_new(&loop, &opts) == -ENOENT);

    const uint32_t bad_slots[] = {3, 6, 100, 4095, 4097, 0x80000001u, UINT32_MAX};
    for (size_t i = 0; i < sizeof bad_slots / sizeof bad_slots[0]; ++i) {
        tl_loop_options_init(&opts);
        opts.wheel_slots = bad_slots[i];
        cr_assert(tl_loop_new(&loop, &opts) == -EINVAL, "wheel_slots %u", bad_slots[i]);
    }

    /* The good values of the same fields work. */
    tl_loop_options_init(&opts);
    opts.wheel_slots = 1024;
    opts.tick_ns = 250000;
    opts.io = TL_IO_EPOLL;
    int r = tl_loop_new(&loop, &opts);
    cr_assert(r == 0, "wheel_slots 1024, tick 250 us, epoll: %d %s", r, tl_strerror(r));
    cr_assert(strcmp(tl_loop_io_name(loop), "epoll") == 0);
    cr_assert(tl_loop_free(loop) == 0);
}

Test(api, bad_io_kind) {
    /* Valid C: an enum object holds any int. The library must reject it
       without undefined behaviour (UBSan builds halt on any). */
    tl_loop *loop = NULL;
    tl_loop_options opts;
    tl_loop_options_init(&opts);
    opts.io = (tl_io_kind)7;
    cr_assert(tl_loop_new(&loop, &opts) == -EINVAL, "io kind 7");
    opts.io = (tl_io_kind)-1;
    cr_assert(tl_loop_new(&loop, &opts) == -EINVAL, "io kind -1");
}

Test(api, empty_backend_name_is_not_the_default) {
    /* NULL means "the environment, else the default"; "" names no backend. */
    tl_loop *loop = NULL;
    tl_loop_options opts;
    tl_loop_options_init(&opts);
    opts.timers = "";
    cr_assert(tl_loop_new(&loop, &opts) == -ENOENT, "empty name accepted");
    cr_assert(loop == NULL);
}

Test(api, options_init_zeroes) {
    tl_loop_options opts;
    memset(&opts, 0xff, sizeof opts);
    tl_loop_options_init(&opts);
    cr_assert(opts.io == TL_IO_AUTO && opts.timers == NULL && opts.tick_ns == 0 &&
              opts.wheel_slots == 0);
}

Test(api, options_reserved_words_must_be_zero) {
    /* Each reserved word is where a later option goes: a non-zero one is
       refused, so a program cannot depend on garbage being ignored. */
    const size_t words = sizeof((tl_loop_options *)0)->reserved / sizeof(uint64_t);
    for (size_t i = 0; i < words; ++i) {
        tl_loop *loop = NULL;
        tl_loop_options opts;
        tl_loop_options_init(&opts);
        opts.reserved[i] = 1;
        cr_assert(tl_loop_new(&loop, &opts) == -EINVAL, "reserved[%zu] = 1 accepted", i);
        cr_assert(loop == NULL);
    }
}

Test(api, abi_struct_sizes_are_fixed) {
    /* docs/abi.md: these sizes hold for the life of the soname. */
    cr_assert_eq(sizeof(tl_loop_options), 256);
    cr_assert_eq(sizeof(tl_loop_stats), 512);
    cr_assert_eq(sizeof(tl_timer), 64);
    cr_assert_eq(sizeof(tl_lateness), 64);
}

Test(api, lateness_writes_exactly_its_struct) {
    _Alignas(16) unsigned char buf[256];
    memset(buf, 0xaa, sizeof buf);
    tl_loop *loop = new_loop();
    cr_assert(tl_loop_lateness(loop, (tl_lateness *)(void *)buf, 0) == 0);
    tl_lateness l;
    memcpy(&l, buf, sizeof l);
    cr_assert(l.count == 0 && l.reserved[0] == 0 && l.reserved[1] == 0);
    for (size_t i = TL_LATENESS_SIZE; i < sizeof buf; ++i)
        cr_assert_eq(buf[i], 0xaa, "lateness wrote byte %zu", i);
    cr_assert(tl_loop_free(loop) == 0);
}

Test(api, init_and_stats_write_exactly_their_struct) {
    /* A newer library must never write past an older program's struct:
       the calls that fill caller memory touch exactly the fixed size. */
    _Alignas(16) unsigned char buf[1024];
    memset(buf, 0xaa, sizeof buf);
    tl_loop_options_init((tl_loop_options *)(void *)buf);
    for (size_t i = 0; i < sizeof buf; ++i)
        cr_assert_eq(buf[i], i < TL_LOOP_OPTIONS_SIZE ? 0 : 0xaa, "options byte %zu", i);

    tl_loop *loop = new_loop();
    cr_assert(tl_loop_run(loop, TL_RUN_NOWAIT) == 0);
    memset(buf, 0xaa, sizeof buf);
    tl_loop_stats_get(loop, (tl_loop_stats *)(void *)buf);
    tl_loop_stats stats;
    memcpy(&stats, buf, sizeof stats);
    for (size_t i = 0; i < sizeof stats.reserved / sizeof stats.reserved[0]; ++i)
        cr_assert(stats.reserved[i] == 0, "stats reserved[%zu] not zeroed", i);
    for (size_t i = TL_LOOP_STATS_SIZE; i < sizeof buf; ++i)
        cr_assert_eq(buf[i], 0xaa, "stats wrote byte %zu", i);
    cr_assert(tl_loop_free(loop) == 0);
}

Test(api, bad_run_mode) {
    tl_loop *loop = new_loop();
    cr_assert(tl_loop_run(loop, (tl_run_mode)3) == -EINVAL);
    cr_assert(tl_loop_run(loop, (tl_run_mode)-1) == -EINVAL);
    cr_assert(tl_loop_free(loop) == 0);
}

Test(api, timer_misuse) {
    tl_loop *loop = new_loop();
    tl_timer t;
    tl_timer_init(&t, timer_cb, &t);
    cr_assert(t.cb == timer_cb && t.data == &t && tl_timer_active(&t) == 0);
    /* Stop of an inactive timer: 0. */
    cr_assert(tl_timer_stop(loop, &t) == 0);
    /* Again without repeat: -EINVAL, timer unchanged. */
    cr_assert(tl_timer_start(loop, &t, 1000000000ull, 0) == 0);
    tl_timer before = t;
    cr_assert(tl_timer_again(loop, &t) == -EINVAL);
    cr_assert(memcmp(&before, &t, sizeof t) == 0, "tl_timer_again changed the timer");
    cr_assert(tl_timer_stop(loop, &t) == 0);
    /* No callback: -EINVAL. */
    tl_timer nocb;
    tl_timer_init(&nocb, NULL, NULL);
    cr_assert(tl_timer_start(loop, &nocb, 1, 0) == -EINVAL);
    cr_assert(tl_timer_active(&nocb) == 0);
    /* Active on another loop: -EINVAL for start, stop and again there. */
    tl_loop *other = new_loop();
    cr_assert(tl_timer_start(loop, &t, 1000000000ull, 5) == 0);
    cr_assert(tl_timer_start(other, &t, 1, 0) == -EINVAL);
    cr_assert(tl_timer_stop(other, &t) == -EINVAL);
    cr_assert(tl_timer_again(other, &t) == -EINVAL);
    cr_assert(tl_timer_active(&t) == 1);
    cr_assert(tl_loop_free(other) == 0, "the refused timer is not on the other loop");
    cr_assert(tl_timer_stop(loop, &t) == 0);
    cr_assert(tl_loop_free(loop) == 0);
}

Test(api, io_misuse) {
    tl_loop *loop = new_loop();
    tl_io w;
    tl_io_init(&w, -1, io_cb, NULL);
    int r = tl_io_start(loop, &w, TL_READ);
    cr_assert(r < 0, "fd -1 returned %d", r);
    /* Events 0, unknown bits, or only the always-reported ones: -EINVAL. */
    tl_io_init(&w, 0, io_cb, NULL);
    cr_assert(tl_io_start(loop, &w, 0) == -EINVAL);
    cr_assert(tl_io_start(loop, &w, 0x100) == -EINVAL);
    cr_assert(tl_io_start(loop, &w, TL_READ | 0x100) == -EINVAL);
    /* No callback: -EINVAL. */
    tl_io nocb;
    tl_io_init(&nocb, 0, NULL, NULL);
    cr_assert(tl_io_start(loop, &nocb, TL_READ) == -EINVAL);
    /* Stop of an inactive watcher: 0. */
    cr_assert(tl_io_stop(loop, &w) == 0);
    /* Active on another loop: -EINVAL for start and stop there. */
    int fds[2];
    cr_assert(socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0);
    tl_loop *other = new_loop();
    tl_io_init(&w, fds[0], io_cb, NULL);
    cr_assert(tl_io_start(other, &w, TL_READ) == 0);
    cr_assert(tl_io_start(loop, &w, TL_WRITE) == -EINVAL);
    cr_assert(tl_io_stop(loop, &w) == -EINVAL);
    cr_assert(w.events == TL_READ);
    cr_assert(tl_io_stop(other, &w) == 0);
    cr_assert(tl_loop_free(other) == 0);
    close(fds[0]);
    close(fds[1]);
    cr_assert(tl_loop_run(loop, TL_RUN_NOWAIT) == 0, "a refused watcher keeps nothing alive");
    cr_assert(tl_loop_free(loop) == 0);
}

Test(api, async_misuse) {
    tl_loop *loop = new_loop();
    tl_async a;
    memset(&a, 0, sizeof a);
    /* Never started (zeroed): send -EINVAL, stop 0. */
    cr_assert(tl_async_send(&a) == -EINVAL);
    cr_assert(tl_async_stop(loop, &a) == 0);
    /* Double start: -EBUSY. */
    cr_assert(tl_async_start(loop, &a, async_cb, NULL) == 0);
    cr_assert(tl_async_start(loop, &a, async_cb, NULL) == -EBUSY);
    tl_loop *other = new_loop();
    cr_assert(tl_async_start(other, &a, async_cb, NULL) == -EBUSY, "active on another loop");
    cr_assert(tl_async_stop(other, &a) == -EINVAL, "stop on the wrong loop");
    cr_assert(tl_loop_free(other) == 0);
    cr_assert(tl_async_stop(loop, &a) == 0);
    cr_assert(tl_async_send(&a) == -EINVAL, "send after stop");
    cr_assert(tl_loop_free(loop) == 0);
}

Test(api, signal_misuse) {
    tl_loop *loop = new_loop();
    tl_signal s;
    memset(&s, 0, sizeof s);
    const int bad[] = {0, -1, 65, 1000, SIGKILL, SIGSTOP};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i)
        cr_assert(tl_signal_start(loop, &s, bad[i], signal_cb, NULL) == -EINVAL, "signo %d",
                  bad[i]);
    cr_assert(tl_signal_stop(loop, &s) == 0, "stop of a never-started watcher");
    cr_assert(tl_loop_run(loop, TL_RUN_NOWAIT) == 0, "refused watchers keep nothing alive");
    /* Double start: -EBUSY. */
    cr_assert(tl_signal_start(loop, &s, SIGUSR1, signal_cb, NULL) == 0);
    cr_assert(tl_signal_start(loop, &s, SIGUSR1, signal_cb, NULL) == -EBUSY);
    cr_assert(tl_signal_stop(loop, &s) == 0);
    cr_assert(tl_loop_free(loop) == 0);
}

Test(api, strerror_and_version) {
    cr_assert(tl_strerror(0) != NULL);
    cr_assert(tl_strerror(-EINVAL) != NULL);
    cr_assert(strcmp(tl_strerror(-EINVAL), tl_strerror(0)) != 0, "-EINVAL has its own message");
    cr_assert(tl_strerror(-ENOENT) != NULL && tl_strerror(-EBUSY) != NULL);
    cr_assert(tl_strerror(-123456789) != NULL);
    cr_assert(tl_strerror(123456789) != NULL);
    cr_assert(tl_strerror(INT32_MIN) != NULL);
    cr_assert(tl_strerror(INT32_MAX) != NULL);

    char want[64];
    snprintf(want, sizeof want, "%d.%d.%d", TL_VERSION_MAJOR, TL_VERSION_MINOR, TL_VERSION_PATCH);
    cr_assert(tl_version() != NULL && strcmp(tl_version(), want) == 0,
              "tl_version() %s, "
              "headers %s",
              tl_version() ? tl_version() : "NULL", want);
}

Test(api, handle_sizes) {
    cr_assert(sizeof(tl_timer) <= 64, "sizeof(tl_timer) = %zu", sizeof(tl_timer));
}

/* tl_loop_new's -EINVAL and -ENOENT alone do not say which option or
 * environment variable was refused ("Invalid argument" for TICKLOOP_IO=bogus);
 * the thread's tl_loop_new_error() names it, with the value. */
static void expect_new_error(const tl_loop_options *opts, int err, const char *const *words) {
    tl_loop *loop = NULL;
    int r = tl_loop_new(&loop, opts);
    cr_assert(r == err, "tl_loop_new: %d %s, expected %d", r, tl_strerror(r), err);
    cr_assert(loop == NULL);
    const char *why = tl_loop_new_error();
    cr_assert(why != NULL, "no detail for %s", tl_strerror(err));
    for (; *words; ++words)
        cr_assert(strstr(why, *words), "detail \"%s\" does not name \"%s\"", why, *words);
}

Test(api, loop_new_error_names_what_was_refused) {
    tl_loop_options opts;
    tl_loop_options_init(&opts);
    cr_assert(tl_loop_new_error() == NULL, "a detail before any call");

    setenv("TICKLOOP_IO", "bogus", 1);
    expect_new_error(NULL, -EINVAL, (const char *[]){"TICKLOOP_IO", "bogus", "epoll", NULL});
    setenv("TICKLOOP_IO", "EPOLL", 1);
    expect_new_error(&opts, -EINVAL, (const char *[]){"TICKLOOP_IO", "EPOLL", NULL});
    unsetenv("TICKLOOP_IO");

    opts.wheel_slots = 1000;
    expect_new_error(&opts, -EINVAL, (const char *[]){"wheel_slots", "1000", NULL});
    opts.wheel_slots = 1u << 30; /* a power of two, more than the wheel takes */
    opts.timers = "wheel";
    expect_new_error(&opts, -EINVAL, (const char *[]){"wheel", "wheel_slots", NULL});
    tl_loop_options_init(&opts);

    opts.timers = "bogus";
    expect_new_error(&opts, -ENOENT,
                     (const char *[]){"tl_loop_options.timers", "bogus", "heap4", NULL});
    opts.timers = NULL;
    setenv("TICKLOOP_TIMERS", "nope", 1);
    expect_new_error(&opts, -ENOENT, (const char *[]){"TICKLOOP_TIMERS", "nope", NULL});
    unsetenv("TICKLOOP_TIMERS");

    opts.reserved[3] = 1;
    expect_new_error(&opts, -EINVAL, (const char *[]){"reserved[3]", NULL});
    opts.reserved[3] = 0;
    opts.timer_slack_ns = 2000000000ull;
    expect_new_error(&opts, -EINVAL, (const char *[]){"timer_slack_ns", NULL});
    opts.timer_slack_ns = 0;
    memset(&opts.io, 0x7f, sizeof opts.io);
    expect_new_error(&opts, -EINVAL, (const char *[]){"tl_loop_options.io", NULL});
    cr_assert(tl_loop_new(NULL, NULL) == -EINVAL && tl_loop_new_error() != NULL);

    /* A success clears it. */
    tl_loop *loop = NULL;
    cr_assert(tl_loop_new(&loop, NULL) == 0);
    cr_assert(tl_loop_new_error() == NULL);
    cr_assert(tl_loop_free(loop) == 0);
}

/* tick_ns above 1 s: a wheel fires per tick, so 2^40 ns (18 minutes) held a
 * 2 ms timer for the whole tick; refused on every backend, and named. */
Test(api, tick_ns_above_one_second_is_refused) {
    static const char *const backends[] = {NULL, "heap2", "heap4", "wheel", "hwheel"};
    for (size_t i = 0; i < sizeof backends / sizeof backends[0]; ++i) {
        tl_loop_options opts;
        tl_loop_options_init(&opts);
        opts.timers = backends[i];
        const uint64_t refused[] = {1ull << 40, UINT64_MAX, 1000000001ull};
        for (size_t j = 0; j < sizeof refused / sizeof refused[0]; ++j) {
            opts.tick_ns = refused[j];
            expect_new_error(&opts, -EINVAL, (const char *[]){"tl_loop_options.tick_ns", NULL});
        }
        opts.tick_ns = 1000000000ull; /* 1 s itself is accepted */
        tl_loop *loop = NULL;
        int r = tl_loop_new(&loop, &opts);
        cr_assert(r == 0, "%s: tick_ns 1e9: %d %s (%s)", backends[i] ? backends[i] : "default", r,
                  tl_strerror(r), tl_loop_new_error() ? tl_loop_new_error() : "");
        cr_assert(tl_loop_new_error() == NULL);
        cr_assert(tl_loop_free(loop) == 0);
    }
}

static void *other_thread_error(void *arg) {
    (void)arg;
    return (void *)tl_loop_new_error();
}

Test(api, loop_new_error_is_per_thread) {
    tl_loop_options opts;
    tl_loop_options_init(&opts);
    opts.timers = "bogus";
    tl_loop *loop = NULL;
    cr_assert(tl_loop_new(&loop, &opts) == -ENOENT);
    cr_assert(tl_loop_new_error() != NULL);
    pthread_t th;
    void *seen = (void *)1;
    cr_assert(pthread_create(&th, NULL, other_thread_error, NULL) == 0);
    cr_assert(pthread_join(th, &seen) == 0);
    cr_assert(seen == NULL, "another thread sees this thread's detail");
}
