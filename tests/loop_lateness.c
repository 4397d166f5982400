/* SPDX-License-Identifier: MIT */
/*
 * The lateness the loop reports (tl_loop_lateness), once per registered
 * timer backend, on the I/O backend TICKLOOP_IO selects (meson runs the suite
 * on each, and again with the relative-wait fallbacks, as loop_wait.c).
 *
 * Exact where the outcome is deterministic: never early, the histogram
 * against the lateness each callback computes itself (tl_now - deadline),
 * counts. Lateness in real time only loosely (a slow, loaded machine under
 * ASan can be hundreds of milliseconds late).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include <tickloop/tickloop.h>

#include "backend_params.h"
#include "loop_helpers.h"

/* Generous bound on lateness: anything beyond this is a hang, not jitter. */
#define MAX_LATE (500 * MS)

/* ------------------------------------------------------------------------ */
/* Lateness, as each callback sees it                                       */
/* ------------------------------------------------------------------------ */

#define MAX_SEEN 128

/* What the loop should have recorded: tl_now() at the callback minus the
 * deadline it fired for. */
struct seen {
    const char *backend;
    uint64_t late[MAX_SEEN];
    int n;
    uint64_t next_deadline[MAX_SEEN]; /* repeating timers: the re-armed one */
};

static void note(struct seen *s, tl_loop *loop, uint64_t deadline) {
    uint64_t now = tl_now(loop);
    cr_assert(now >= deadline, "%s: fired at %llu, before its deadline %llu", s->backend,
              (unsigned long long)now, (unsigned long long)deadline);
    cr_assert(mono_ns() >= deadline, "%s: fired before its deadline by the clock", s->backend);
    cr_assert(now - deadline < MAX_LATE, "%s: %llu ns late", s->backend,
              (unsigned long long)(now - deadline));
    cr_assert(s->n < MAX_SEEN);
    s->late[s->n++] = now - deadline;
}

static void on_one_shot(tl_loop *loop, tl_timer *t) {
    note(t->data, loop, t->deadline); /* a fired one-shot keeps its deadline */
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The nearest-rank percentile num/den of the n sorted values. */
static uint64_t exact_percentile(const uint64_t *sorted, int n, unsigned num, unsigned den) {
    uint64_t rank = ((uint64_t)n * num + den - 1) / den;
    if (rank == 0) rank = 1;
    return sorted[rank - 1];
}

static void check_reported(const char *backend, const char *what, uint64_t reported,
                           uint64_t exact) {
    cr_assert(reported >= exact && reported <= exact + exact / 16,
              "%s: %s reported %llu ns, exact %llu: outside [exact, exact + 1/16]", backend, what,
              (unsigned long long)reported, (unsigned long long)exact);
}

/* The loop's histogram against the callbacks' own values. */
static void check_lateness(tl_loop *loop, struct seen *s) {
    tl_lateness l;
    cr_assert(tl_loop_lateness(loop, &l, 0) == 0);
    cr_assert(l.count == (uint64_t)s->n, "%s: lateness count %llu, %d timers fired", s->backend,
              (unsigned long long)l.count, s->n);
    uint64_t sorted[MAX_SEEN];
    memcpy(sorted, s->late, (size_t)s->n * sizeof sorted[0]);
    qsort(sorted, (size_t)s->n, sizeof sorted[0], cmp_u64);
    check_reported(s->backend, "p50", l.p50_ns, exact_percentile(sorted, s->n, 50, 100));
    check_reported(s->backend, "p90", l.p90_ns, exact_percentile(sorted, s->n, 90, 100));
    check_reported(s->backend, "p99", l.p99_ns, exact_percentile(sorted, s->n, 99, 100));
    check_reported(s->backend, "p99.9", l.p999_ns, exact_percentile(sorted, s->n, 999, 1000));
    cr_assert(l.max_ns == sorted[s->n - 1], "%s: max %llu, exact %llu", s->backend,
              (unsigned long long)l.max_ns, (unsigned long long)sorted[s->n - 1]);
}

Test(lateness, rejects_null_and_keeps_the_histogram) {
    tl_lateness l;
    cr_assert(tl_loop_lateness(NULL, &l, 0) == -EINVAL);
    cr_assert(tl_loop_lateness(NULL, &l, 1) == -EINVAL);
    tl_loop *loop = new_loop_with(NULL);
    static struct seen s = {.backend = "default"};
    tl_timer t;
    tl_timer_init(&t, on_one_shot, &s);
    cr_assert(tl_timer_start(loop, &t, 1 * MS, 0) == 0);
    run_to_end(loop);
    cr_assert(tl_loop_lateness(loop, NULL, 1) == -EINVAL);
    cr_assert(tl_loop_lateness(loop, &l, 0) == 0 && l.count == 1, "a NULL out cleared it");
    free_loop(loop);
}

Test(lateness, zero_before_any_timer) {
    tl_loop *loop = new_loop_with(NULL);
    tl_lateness l;
    memset(&l, 0xff, sizeof l);
    cr_assert(tl_loop_lateness(loop, &l, 0) == 0);
    cr_assert(l.count == 0 && l.p50_ns == 0 && l.p90_ns == 0 && l.p99_ns == 0 && l.p999_ns == 0 &&
              l.max_ns == 0);
    free_loop(loop);
}

BACKEND_TEST(lateness, percentiles_match_what_callbacks_saw) {
    tl_loop *loop = new_loop_with(p->name);
    static struct seen s;
    memset(&s, 0, sizeof s);
    s.backend = p->name;
    static tl_timer timers[100];
    for (int i = 0; i < 100; ++i) {
        tl_timer_init(&timers[i], on_one_shot, &s);
        uint64_t timeout = (uint64_t)((i * 37) % 100) * 61000 + (uint64_t)(i % 7) * 3333;
        cr_assert(tl_timer_start(loop, &timers[i], timeout, 0) == 0);
    }
    run_to_end(loop);
    cr_assert(s.n == 100);
    check_lateness(loop, &s);
    tl_loop_stats st;
    tl_loop_stats_get(loop, &st);
    cr_assert(st.timers_fired == 100);
    cr_assert(st.timer_wakeups >= 1 && st.timer_wakeups <= 100 && st.timer_wakeups <= st.iterations,
              "%s: %llu timer wake-ups in %llu iterations", p->name,
              (unsigned long long)st.timer_wakeups, (unsigned long long)st.iterations);
    cr_assert(st.max_timers_per_wakeup >= 1 && st.max_timers_per_wakeup <= 100);
    cr_assert(st.timer_wakeups * st.max_timers_per_wakeup >= 100,
              "%s: %llu wake-ups of at most %llu timers cannot fire 100", p->name,
              (unsigned long long)st.timer_wakeups, (unsigned long long)st.max_timers_per_wakeup);
    free_loop(loop);
}

BACKEND_TEST(lateness, equal_deadlines_are_one_timer_wakeup) {
    tl_loop *loop = new_loop_with(p->name);
    static struct seen s;
    memset(&s, 0, sizeof s);
    s.backend = p->name;
    static tl_timer timers[32];
    for (int i = 0; i < 32; ++i) {
        tl_timer_init(&timers[i], on_one_shot, &s);
        cr_assert(tl_timer_start(loop, &timers[i], 3 * MS, 0) == 0);
    }
    run_to_end(loop);
    check_lateness(loop, &s);
    tl_loop_stats st;
    tl_loop_stats_get(loop, &st);
    cr_assert(st.timer_wakeups == 1 && st.max_timers_per_wakeup == 32,
              "%s: %llu timer wake-ups, at most %llu timers each, for 32 equal deadlines", p->name,
              (unsigned long long)st.timer_wakeups, (unsigned long long)st.max_timers_per_wakeup);
    /* Every timer of one wake-up has the same lateness. */
    for (int i = 1; i < s.n; ++i) cr_assert(s.late[i] == s.late[0]);
    free_loop(loop);
}

/* A repeating timer is measured against the deadline it fired for, not the
 * one it is re-armed with before its callback runs (that one is in the
 * future: it would wrap around to a huge value). */
struct repeating {
    struct seen seen;
    uint64_t expect; /* the deadline this firing is for */
    int left;
};

static void on_repeat(tl_loop *loop, tl_timer *t) {
    struct repeating *r = t->data;
    note(&r->seen, loop, r->expect);
    r->expect = t->deadline; /* re-armed: the next firing's */
    if (--r->left == 0) tl_timer_stop(loop, t);
}

BACKEND_TEST(lateness, repeating_timer_measured_against_the_deadline_it_fired_for) {
    tl_loop *loop = new_loop_with(p->name);
    static struct repeating r;
    memset(&r, 0, sizeof r);
    r.seen.backend = p->name;
    r.left = 8;
    tl_timer t;
    tl_timer_init(&t, on_repeat, &r);
    cr_assert(tl_timer_start(loop, &t, 1 * MS, 2 * MS) == 0);
    r.expect = t.deadline;
    run_to_end(loop);
    cr_assert(r.seen.n == 8);
    check_lateness(loop, &r.seen);
    free_loop(loop);
}

BACKEND_TEST(lateness, reset_starts_a_new_histogram) {
    tl_loop *loop = new_loop_with(p->name);
    static struct seen s;
    memset(&s, 0, sizeof s);
    s.backend = p->name;
    static tl_timer timers[8];
    for (int i = 0; i < 5; ++i) {
        tl_timer_init(&timers[i], on_one_shot, &s);
        cr_assert(tl_timer_start(loop, &timers[i], (uint64_t)i * MS, 0) == 0);
    }
    run_to_end(loop);
    tl_lateness l;
    cr_assert(tl_loop_lateness(loop, &l, 1) == 0 && l.count == 5, "reset copies first");
    cr_assert(tl_loop_lateness(loop, &l, 0) == 0);
    cr_assert(l.count == 0 && l.p50_ns == 0 && l.p999_ns == 0 && l.max_ns == 0);
    memset(&s, 0, sizeof s);
    s.backend = p->name;
    for (int i = 5; i < 8; ++i) {
        tl_timer_init(&timers[i], on_one_shot, &s);
        cr_assert(tl_timer_start(loop, &timers[i], (uint64_t)(i - 4) * MS, 0) == 0);
    }
    run_to_end(loop);
    check_lateness(loop, &s);
    free_loop(loop);
}
