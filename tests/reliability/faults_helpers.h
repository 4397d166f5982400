/* SPDX-License-Identifier: MIT */
/*
 * What the fault suites (faults.c, faults_storm.c) share: their includes,
 * BACKEND_TEST with Criterion options, the clock, a loop made and freed
 * with its errors asserted, and a recorder of timer callbacks (exactly
 * once, never early, in order). Users define _GNU_SOURCE first.
 */
#ifndef TICKLOOP_TESTS_FAULTS_HELPERS_H
#define TICKLOOP_TESTS_FAULTS_HELPERS_H

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <tickloop/tickloop.h>

#include "../backend_params.h"

/* BACKEND_TEST with Criterion test options (.timeout, .disabled). */
#define BACKEND_TEST_OPTS(Suite, Name, ...)                                                        \
    ParameterizedTestParameters(Suite, Name) {                                                     \
        return backend_params();                                                                   \
    }                                                                                              \
    ParameterizedTest(backend_param *p, Suite, Name, __VA_ARGS__)

#define MS 1000000ull
#define US 1000ull

static inline uint64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline tl_loop *new_loop(const char *timers) {
    tl_loop_options opts;
    tl_loop_options_init(&opts);
    opts.timers = timers;
    tl_loop *loop = NULL;
    int r = tl_loop_new(&loop, &opts);
    cr_assert_eq(r, 0, "tl_loop_new(%s): %s", timers ? timers : "default", tl_strerror(r));
    return loop;
}

static inline void free_loop(tl_loop *loop) {
    int r = tl_loop_free(loop);
    cr_assert_eq(r, 0, "tl_loop_free: %s", tl_strerror(r));
}

/* ------------------------------------------------------------------------ */
/* A recorder of timer callbacks: exactly once, never early, in order.      */
/* ------------------------------------------------------------------------ */

struct record {
    const char *backend;
    tl_timer *timers;
    uint64_t *deadlines; /* as started */
    int *seen;
    size_t n, fired, early, order_breaks;
    uint64_t last_deadline;
    size_t last_index;
};

static inline void record_init(struct record *r, const char *backend, size_t n) {
    memset(r, 0, sizeof *r);
    r->backend = backend;
    r->n = n;
    r->timers = calloc(n, sizeof *r->timers);
    r->deadlines = calloc(n, sizeof *r->deadlines);
    r->seen = calloc(n, sizeof *r->seen);
    cr_assert(r->timers && r->deadlines && r->seen);
}

static inline void record_free(struct record *r) {
    free(r->timers);
    free(r->deadlines);
    free(r->seen);
}

/* Called from a timer callback; timers were started in index order, so for
 * heaps index order is start order. */
static inline void record_fire(tl_loop *loop, struct record *r, tl_timer *t) {
    size_t i = (size_t)(t - r->timers);
    r->seen[i]++;
    if (tl_now(loop) < r->deadlines[i] || mono_ns() < r->deadlines[i]) r->early++;
    if (r->fired && (r->deadlines[i] < r->last_deadline ||
                     (r->deadlines[i] == r->last_deadline && i < r->last_index)))
        r->order_breaks++;
    r->last_deadline = r->deadlines[i];
    r->last_index = i;
    r->fired++;
}

static inline void record_check(const struct record *r) {
    cr_assert_eq(r->fired, r->n, "%s: %zu of %zu timers fired", r->backend, r->fired, r->n);
    for (size_t i = 0; i < r->n; i++)
        cr_assert_eq(r->seen[i], 1, "%s: timer %zu fired %d times", r->backend, i, r->seen[i]);
    cr_assert_eq(r->early, 0, "%s: %zu timers fired early", r->backend, r->early);
    if (backend_exact(r->backend))
        cr_assert_eq(r->order_breaks, 0, "%s: %zu callbacks out of (deadline, start) order",
                     r->backend, r->order_breaks);
}

static inline void on_recorded(tl_loop *loop, tl_timer *t) {
    record_fire(loop, t->data, t);
}

static inline void start_recorded(tl_loop *loop, struct record *r, size_t i, uint64_t timeout) {
    tl_timer_init(&r->timers[i], on_recorded, r);
    cr_assert_eq(tl_timer_start(loop, &r->timers[i], timeout, 0), 0);
    r->deadlines[i] = r->timers[i].deadline;
}

#endif /* TICKLOOP_TESTS_FAULTS_HELPERS_H */
