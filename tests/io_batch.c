/* SPDX-License-Identifier: MIT */
/*
 * tl_loop_options.io_batch_ns: a wait that has an event goes on gathering
 * more for up to the bound, where the kernel has a minimum wait (io_uring,
 * Linux 6.12); epoll ignores it. What the tests hold to: the option's range,
 * the bound in effect reported in the stats, two events that arrive within
 * the bound served by one iteration (and by two without it), and a timer's
 * deadline never pushed back by the batching. Times are generous: a late
 * writer thread makes the batching test skip its check, never fail.
 * meson runs it once per I/O backend.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "loop_helpers.h"

static tl_loop *batch_loop(uint64_t ns) {
    tl_loop_options opts;
    tl_loop_options_init(&opts);
    opts.io_batch_ns = ns;
    return new_loop_opts(&opts);
}

/* The kernel has io_uring's minimum wait (Linux 6.12 and later). */
static int kernel_has_min_wait(void) {
    struct utsname u;
    int major = 0, minor = 0;
    if (uname(&u) != 0 || sscanf(u.release, "%d.%d", &major, &minor) != 2) return 0;
    return major > 6 || (major == 6 && minor >= 12);
}

static int batching_here(const tl_loop *loop) {
    tl_loop_stats st;
    tl_loop_stats_get(loop, &st);
    return st.io_batch_ns != 0;
}

Test(io_batch, above_one_second_is_refused_and_named) {
    tl_loop_options opts;
    tl_loop_options_init(&opts);
    opts.io_batch_ns = 1000000001;
    tl_loop *loop = NULL;
    cr_assert_eq(tl_loop_new(&loop, &opts), -EINVAL);
    cr_assert(strstr(tl_loop_new_error(), "io_batch_ns") != NULL, "%s", tl_loop_new_error());
    opts.io_batch_ns = UINT64_MAX;
    cr_assert_eq(tl_loop_new(&loop, &opts), -EINVAL);
    loop = batch_loop(1000000000);
    free_loop(loop);
}

Test(io_batch, stats_give_the_bound_in_effect) {
    tl_loop *loop = batch_loop(5 * MS);
    tl_loop_stats st;
    tl_loop_stats_get(loop, &st);
    if (strcmp(tl_loop_io_name(loop), "epoll") == 0)
        cr_assert_eq(st.io_batch_ns, 0, "epoll has no minimum wait");
    else if (kernel_has_min_wait())
        cr_assert_eq(st.io_batch_ns, 5 * MS, "io_uring on this kernel batches");
    else
        cr_assert(st.io_batch_ns == 0 || st.io_batch_ns == 5 * MS);
    free_loop(loop);
    loop = batch_loop(0);
    tl_loop_stats_get(loop, &st);
    cr_assert_eq(st.io_batch_ns, 0);
    free_loop(loop);
}

/* Two pipes; the second is written `delay_ms` after the loop's run began. */
struct late_write {
    int fd;
    unsigned delay_ms;
    uint64_t written_at;
};

static void *write_later(void *arg) {
    struct late_write *w = arg;
    struct timespec ts = {0, (long)w->delay_ms * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
    }
    w->written_at = mono_ns();
    put(w->fd);
    return NULL;
}

/* Runs one iteration with pipe a readable at once and pipe b written 20 ms
 * into the wait; returns how many of the two callbacks it ran, and in
 * *write_ns and *run_ns when the write came and how long the run took,
 * both from the run's start. */
static int callbacks_in_one_iteration(uint64_t batch_ns, uint64_t *write_ns, uint64_t *run_ns) {
    tl_loop *loop = batch_loop(batch_ns);
    int a[2], b[2];
    make_pair(a);
    make_pair(b);
    struct io_seen seen_a = {0}, seen_b = {0};
    tl_io wa, wb;
    tl_io_init(&wa, a[0], on_io_seen, &seen_a);
    tl_io_init(&wb, b[0], on_io_seen, &seen_b);
    cr_assert_eq(tl_io_start(loop, &wa, TL_READ), 0);
    cr_assert_eq(tl_io_start(loop, &wb, TL_READ), 0);
    put(a[1]);
    struct late_write lw = {b[1], 20, 0};
    pthread_t thread;
    uint64_t begin = mono_ns();
    cr_assert_eq(pthread_create(&thread, NULL, write_later, &lw), 0);
    cr_assert(tl_loop_run(loop, TL_RUN_ONCE) >= 0);
    uint64_t end = mono_ns();
    pthread_join(thread, NULL);
    int ran = (seen_a.calls > 0) + (seen_b.calls > 0);
    cr_assert_geq(seen_a.calls, 1, "the event there from the start was not served");
    tl_io_stop(loop, &wa);
    tl_io_stop(loop, &wb);
    free_loop(loop);
    for (int i = 0; i < 2; ++i) close(a[i]), close(b[i]);
    *write_ns = lw.written_at - begin;
    *run_ns = end - begin;
    return ran;
}

Test(io_batch, events_within_the_bound_share_one_iteration) {
    tl_loop *probe = batch_loop(300 * MS);
    int on = batching_here(probe);
    free_loop(probe);
    if (!on) cr_skip_test("no minimum wait on this backend or kernel");
    uint64_t write_ns, run_ns;
    int ran = callbacks_in_one_iteration(300 * MS, &write_ns, &run_ns);
    if (write_ns > 200 * MS) cr_skip_test("the writer thread ran too late to tell");
    cr_assert_eq(ran, 2, "the second event, 20 ms into a 300 ms batch, waited for another wait");
}

Test(io_batch, without_it_the_first_event_ends_the_wait) {
    uint64_t write_ns, run_ns;
    int ran = callbacks_in_one_iteration(0, &write_ns, &run_ns);
    /* Only a run that ended before the write says anything. */
    if (run_ns >= write_ns) cr_skip_test("the loop ran too slowly to tell");
    cr_assert_eq(ran, 1, "the wait went on past its first event");
}

Test(io_batch, a_timer_deadline_ends_a_batching_wait) {
    tl_loop *loop = batch_loop(1000 * MS);
    int p[2];
    make_pair(p);
    struct io_seen seen = {0};
    tl_io w;
    tl_io_init(&w, p[0], on_io_seen, &seen);
    cr_assert_eq(tl_io_start(loop, &w, TL_READ), 0);
    put(p[1]);
    uint64_t fired = 0;
    tl_timer t;
    tl_timer_init(&t, on_timer_fired_at, &fired);
    cr_assert_eq(tl_timer_start(loop, &t, 20 * MS, 0), 0);
    uint64_t deadline = t.deadline;
    while (!fired) cr_assert(tl_loop_run(loop, TL_RUN_ONCE) >= 0);
    cr_assert_geq(fired, deadline, "the timer fired early");
    /* Loose: far below the 1 s batch, which must not hold the timer. */
    cr_assert_lt(fired - deadline, 600 * MS, "the batch held the timer %llu ms",
                 (unsigned long long)((fired - deadline) / MS));
    cr_assert_geq(seen.calls, 1);
    tl_io_stop(loop, &w);
    free_loop(loop);
    close(p[0]);
    close(p[1]);
}
