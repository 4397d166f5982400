/* SPDX-License-Identifier: MIT */
/*
 * Helpers for the Criterion suites that run loops: "a loop on the I/O
 * backend TICKLOOP_IO names, with these options", freeing it with its
 * invariants checked, running it to an end or to a condition, a socketpair,
 * a failsafe timer and recorders of timer and I/O callbacks, in one place
 * instead of a copy per file (liburing's test/helpers.h). What needs no
 * Criterion is in loop_setup.h, which this includes.
 */
#ifndef TICKLOOP_TESTS_LOOP_HELPERS_H
#define TICKLOOP_TESTS_LOOP_HELPERS_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include <tickloop/tickloop.h>

#include "loop_setup.h"

/* A loop made with opts (NULL: the defaults) on the I/O backend that
 * TICKLOOP_IO names (meson registers each suite once per backend); fails
 * the test if the loop got another I/O backend, or another timer backend
 * than opts->timers, than the one asked for. */
static inline tl_loop *new_loop_opts(const tl_loop_options *opts) {
    const char *timers = opts ? opts->timers : NULL;
    tl_loop *loop = NULL;
    int r = tl_loop_new(&loop, opts);
    const char *want = getenv("TICKLOOP_IO");
    /* A kernel without io_uring (or one that refuses it: seccomp,
       kernel.io_uring_disabled) is a reason to skip, not a failure. */
    if (r < 0 && want && strcmp(want, "io_uring") == 0 && r != -ENOMEM && r != -EINVAL)
        cr_skip_test("io_uring is not available here: %s", tl_strerror(r));
    cr_assert(r == 0 && loop, "tl_loop_new(%s): %d %s", timers ? timers : "default", r,
              tl_strerror(r));
    if (want && *want && strcmp(want, "auto") != 0)
        cr_assert(strcmp(tl_loop_io_name(loop), want) == 0, "TICKLOOP_IO=%s gave %s", want,
                  tl_loop_io_name(loop));
    if (timers)
        cr_assert(strcmp(tl_loop_timers_name(loop), timers) == 0, "loop uses %s, asked for %s",
                  tl_loop_timers_name(loop), timers);
    return loop;
}

/* A loop with timer backend `timers` (NULL: the default). */
static inline tl_loop *new_loop_with(const char *timers) {
    tl_loop_options opts;
    tl_loop_options_init(&opts);
    opts.timers = timers;
    return new_loop_opts(&opts);
}

static inline tl_loop *new_loop(void) {
    return new_loop_with(NULL);
}

/* The loop's invariant walker (loop.cc; hidden, reached through the static
 * library the tests link): counts, lists and start order. NULL if they hold. */
const char *tl_detail_loop_check(const tl_loop *loop);

static inline void check_loop(const tl_loop *loop) {
    const char *broken = tl_detail_loop_check(loop);
    cr_assert(broken == NULL, "loop invariant: %s", broken);
}

/* Checks the invariants, then frees the loop (which must have no active
 * handle left). */
static inline void free_loop(tl_loop *loop) {
    check_loop(loop);
    int r = tl_loop_free(loop);
    cr_assert(r == 0, "tl_loop_free: %d %s", r, tl_strerror(r));
}

/* Runs until no handle is left; fails instead of hanging. */
static inline void run_to_end(tl_loop *loop) {
    int r = tl_loop_run(loop, TL_RUN_DEFAULT);
    cr_assert(r == 0, "tl_loop_run(DEFAULT) returned %d (%s)", r, tl_strerror(r));
}

static inline void make_pair(int fds[2]) {
    int r = socket_pair(fds);
    cr_assert(r == 0, "socketpair: %s", strerror(-r));
}

static inline void put(int fd) {
    cr_assert(write(fd, "x", 1) == 1, "write: %s", strerror(errno));
}

/* A timer that stops the loop (and records that it did), so that a missing
 * event fails a test instead of hanging it. Unreferenced: it never keeps a
 * loop alive by itself. */
static inline void on_failsafe(tl_loop *loop, tl_timer *t) {
    *(int *)t->data = 1;
    tl_loop_stop(loop);
}

static inline void start_failsafe(tl_loop *loop, tl_timer *t, int *fired, uint64_t ms) {
    *fired = 0;
    tl_timer_init(t, on_failsafe, fired);
    cr_assert_eq(tl_timer_start(loop, t, ms * MS, 0), 0);
    cr_assert_eq(tl_timer_set_ref(loop, t, 0), 0);
}

/* Runs the loop an iteration at a time (TL_RUN_ONCE, which blocks until
 * something is due) until *flag is nonzero, for an event that has no fixed
 * iteration: a wheel runs a due timer only once its tick has passed, so a
 * single TL_RUN_NOWAIT may come too soon. An unreferenced failsafe timer
 * fails the test after `ms` milliseconds instead of hanging it. */
static inline void run_until_set(tl_loop *loop, const int *flag, uint64_t ms) {
    tl_timer fs;
    int expired;
    start_failsafe(loop, &fs, &expired, ms);
    while (!*flag && !expired) {
        int r = tl_loop_run(loop, TL_RUN_ONCE);
        cr_assert(r >= 0, "tl_loop_run(ONCE): %d %s", r, tl_strerror(r));
    }
    cr_assert_eq(tl_timer_stop(loop, &fs), 0);
    cr_assert(*flag, "the awaited event did not come within %llu ms", (unsigned long long)ms);
}

/* When a timer ran: on_timer_fired_at stores CLOCK_MONOTONIC ns, read in the
 * callback, into the uint64_t its data points to. The clock, not the loop's
 * cached tl_now(), so that a check against the deadline tests the time the
 * callback really ran. */
static inline void on_timer_fired_at(tl_loop *loop, tl_timer *t) {
    (void)loop;
    *(uint64_t *)t->data = mono_ns();
}

/* What an I/O watcher saw: on_io_seen records each call into the struct
 * io_seen its data points to. */
struct io_seen {
    int calls;
    unsigned revents; /* of the last call */
    unsigned all;     /* or of every call */
};

static inline void on_io_seen(tl_loop *loop, tl_io *w, unsigned revents) {
    (void)loop;
    struct io_seen *s = (struct io_seen *)w->data;
    s->calls++;
    s->revents = revents;
    s->all |= revents;
}

#endif /* TICKLOOP_TESTS_LOOP_HELPERS_H */
