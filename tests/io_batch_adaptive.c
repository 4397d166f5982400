/* SPDX-License-Identifier: MIT */
/*
 * tl_loop_options.io_batch_adaptive and TICKLOOP_IO_BATCH: the loop gathers
 * I/O only while events arrive densely, on both I/O backends. What the tests
 * hold to: the option's and the variable's checks and their messages, the
 * bound in effect on every backend, a dense load (a writer thread feeding
 * 256 sockets) served by waits that gathered with several events per
 * wake-up, a sparse one (events far apart) by waits that never gathered,
 * the fall back to sparse after a quiet spell, clients that wait for each
 * answer never held by a gathering that slows them, and a timer's deadline never
 * pushed back while the loop gathers. Waits are counted
 * (tl_loop_stats.io_batched_waits), never timed, except the timer's
 * "never early". meson runs it once per I/O backend.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "loop_helpers.h"

static tl_loop *adaptive_loop(uint64_t ns) {
    tl_loop_options opts;
    tl_loop_options_init(&opts);
    opts.io_batch_ns = ns;
    opts.io_batch_adaptive = 1;
    return new_loop_opts(&opts);
}

static tl_loop_stats stats_of(const tl_loop *loop) {
    tl_loop_stats st;
    tl_loop_stats_get(loop, &st);
    return st;
}

/* tl_loop_new with TICKLOOP_IO_BATCH set to value (each Criterion test runs
   in its own process, so the variable does not leak into another test). */
static int new_with_env(const char *value, const tl_loop_options *opts, tl_loop **out) {
    cr_assert_eq(setenv("TICKLOOP_IO_BATCH", value, 1), 0);
    return tl_loop_new(out, opts);
}

Test(io_batch_adaptive, needs_a_bound_and_is_a_flag) {
    tl_loop_options opts;
    tl_loop_options_init(&opts);
    opts.io_batch_adaptive = 1;
    tl_loop *loop = NULL;
    cr_assert_eq(tl_loop_new(&loop, &opts), -EINVAL);
    cr_assert_null(loop);
    cr_assert(strstr(tl_loop_new_error(), "io_batch_adaptive") != NULL, "%s", tl_loop_new_error());
    opts.io_batch_ns = MS;
    opts.io_batch_adaptive = 2;
    cr_assert_eq(tl_loop_new(&loop, &opts), -EINVAL);
    cr_assert(strstr(tl_loop_new_error(), "io_batch_adaptive") != NULL, "%s", tl_loop_new_error());
    opts.io_batch_adaptive = 1;
    opts.io_batch_ns = 1000000001;
    cr_assert_eq(tl_loop_new(&loop, &opts), -EINVAL);
    opts.io_batch_ns = MS;
    opts.reserved32 = 1;
    cr_assert_eq(tl_loop_new(&loop, &opts), -EINVAL);
    cr_assert(strstr(tl_loop_new_error(), "reserved32") != NULL, "%s", tl_loop_new_error());
}

Test(io_batch_adaptive, the_bound_is_in_effect_on_every_backend) {
    tl_loop *loop = adaptive_loop(2 * MS);
    tl_loop_stats st = stats_of(loop);
    cr_assert_eq(st.io_batch_ns, 2 * MS, "%s", tl_loop_io_name(loop));
    cr_assert_eq(st.io_batched_waits, 0);
    free_loop(loop);
}

Test(io_batch_adaptive, the_variable_sets_both_fields) {
    tl_loop *loop = NULL;
    cr_assert_eq(new_with_env("adaptive:200us", NULL, &loop), 0, "%s", tl_loop_new_error());
    cr_assert_eq(stats_of(loop).io_batch_ns, 200 * 1000);
    free_loop(loop);
    cr_assert_eq(new_with_env("adaptive:1s", NULL, &loop), 0, "%s", tl_loop_new_error());
    cr_assert_eq(stats_of(loop).io_batch_ns, 1000 * MS);
    free_loop(loop);
    /* fixed: the 0.4 bound, in effect where the kernel has a minimum wait */
    cr_assert_eq(new_with_env("fixed:1ms", NULL, &loop), 0, "%s", tl_loop_new_error());
    uint64_t fixed = stats_of(loop).io_batch_ns;
    cr_assert(fixed == MS || fixed == 0, "%llu", (unsigned long long)fixed);
    if (strcmp(tl_loop_io_name(loop), "epoll") == 0) cr_assert_eq(fixed, 0);
    free_loop(loop);
    cr_assert_eq(new_with_env("off", NULL, &loop), 0, "%s", tl_loop_new_error());
    cr_assert_eq(stats_of(loop).io_batch_ns, 0);
    free_loop(loop);
    cr_assert_eq(new_with_env("", NULL, &loop), 0, "%s", tl_loop_new_error());
    cr_assert_eq(stats_of(loop).io_batch_ns, 0);
    free_loop(loop);
}

Test(io_batch_adaptive, options_that_set_either_field_win_over_the_variable) {
    tl_loop_options opts;
    tl_loop_options_init(&opts);
    opts.io_batch_ns = 3 * MS;
    opts.io_batch_adaptive = 1;
    tl_loop *loop = NULL;
    /* Not parsed at all: the options say what to do. */
    cr_assert_eq(new_with_env("nonsense", &opts, &loop), 0, "%s", tl_loop_new_error());
    cr_assert_eq(stats_of(loop).io_batch_ns, 3 * MS);
    free_loop(loop);
}

Test(io_batch_adaptive, values_it_cannot_parse_are_refused_and_named) {
    const char *bad[] = {
        "adaptive",       "adaptive:",     "adaptive:0us", "adaptive:1",
        "adaptive:1.5ms", "adaptive:-1ms", "fixed:2s",     "fixed:1001ms",
        "Adaptive:1ms",   "fixed:1 ms",    "on",           "adaptive:99999999999999999999s"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
        tl_loop *loop = NULL;
        cr_assert_eq(new_with_env(bad[i], NULL, &loop), -EINVAL, "'%s' was accepted", bad[i]);
        cr_assert_null(loop);
        const char *why = tl_loop_new_error();
        cr_assert(why && strstr(why, "TICKLOOP_IO_BATCH") != NULL, "'%s': %s", bad[i],
                  why ? why : "(no message)");
    }
}

/* A writer thread that writes one byte to each of kFed sockets in
   turn (so that, at the gaps used here, no socket is written twice within
   a window: each write is an event of its own), one write every gap_us, `writes` times in all. */
enum { kFed = 256 };

struct feeder {
    int fds[kFed];
    unsigned gap_us;
    unsigned writes;
    atomic_int done;
};

static void *feed(void *arg) {
    struct feeder *f = arg;
    for (unsigned i = 0; i < f->writes; ++i) {
        struct timespec ts = {0, (long)f->gap_us * 1000L};
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
        }
        cr_assert_eq(write(f->fds[i % kFed], "x", 1), 1);
    }
    atomic_store(&f->done, 1);
    return NULL;
}

struct reader {
    int fd;
    unsigned *bytes;
};

static void on_readable(tl_loop *loop, tl_io *w, unsigned revents) {
    (void)loop;
    (void)revents;
    struct reader *r = w->data;
    char buf[256];
    ssize_t n = read(r->fd, buf, sizeof buf);
    if (n > 0) *r->bytes += (unsigned)n;
}

struct fed_run {
    unsigned bytes;
    tl_loop_stats before, after;
};

/* Runs the loop while the feeder writes `writes` bytes gap_us apart, until
   it has read them all. */
static void run_fed(tl_loop *loop, unsigned gap_us, unsigned writes, struct fed_run *out) {
    int pairs[kFed][2];
    tl_io w[kFed];
    struct reader readers[kFed];
    struct feeder f = {.gap_us = gap_us, .writes = writes};
    out->bytes = 0;
    for (int i = 0; i < kFed; ++i) {
        make_pair(pairs[i]);
        f.fds[i] = pairs[i][1];
        readers[i] = (struct reader){pairs[i][0], &out->bytes};
        tl_io_init(&w[i], pairs[i][0], on_readable, &readers[i]);
        cr_assert_eq(tl_io_start(loop, &w[i], TL_READ), 0);
    }
    out->before = stats_of(loop);
    pthread_t thread;
    cr_assert_eq(pthread_create(&thread, NULL, feed, &f), 0);
    tl_timer fs;
    int expired;
    start_failsafe(loop, &fs, &expired, 20000);
    while (out->bytes < writes && !expired) cr_assert(tl_loop_run(loop, TL_RUN_ONCE) >= 0);
    pthread_join(thread, NULL);
    cr_assert_eq(tl_timer_stop(loop, &fs), 0);
    cr_assert_eq(out->bytes, writes, "only %u of %u bytes read", out->bytes, writes);
    out->after = stats_of(loop);
    for (int i = 0; i < kFed; ++i) {
        tl_io_stop(loop, &w[i]);
        close(pairs[i][0]);
        close(pairs[i][1]);
    }
}

/* 256 sockets written every 20 us in turn: about 100 events per 2 ms
   window, far above the rule's 2, and no socket twice in one window. */
Test(io_batch_adaptive, a_dense_load_is_gathered) {
    tl_loop *loop = adaptive_loop(2 * MS);
    struct fed_run run;
    run_fed(loop, 20, 5000, &run);
    uint64_t gathered = run.after.io_batched_waits - run.before.io_batched_waits;
    uint64_t events = run.after.io_events - run.before.io_events;
    uint64_t iterations = run.after.iterations - run.before.iterations;
    cr_assert_gt(gathered, 0, "no wait gathered under a dense load (%llu events, %llu waits)",
                 (unsigned long long)events, (unsigned long long)iterations);
    /* Each iteration that did not gather ran at most about one event; the
       gathered ones must account for more than one each. */
    cr_assert_geq(events, iterations + gathered,
                  "gathering did not gather: %llu events in %llu iterations, %llu gathered",
                  (unsigned long long)events, (unsigned long long)iterations,
                  (unsigned long long)gathered);
    free_loop(loop);
}

/* One write every 20 ms, a window of 1 ms: sparse, so no wait gathers. */
Test(io_batch_adaptive, a_sparse_load_is_never_held) {
    tl_loop *loop = adaptive_loop(MS);
    struct fed_run run;
    run_fed(loop, 20000, 12, &run);
    cr_assert_eq(run.after.io_batched_waits, run.before.io_batched_waits,
                 "a wait gathered under a sparse load");
    free_loop(loop);
}

Test(io_batch_adaptive, off_it_never_gathers) {
    tl_loop *loop = new_loop();
    struct fed_run run;
    run_fed(loop, 20, 5000, &run);
    cr_assert_eq(run.after.io_batched_waits, 0);
    free_loop(loop);
}

/* Clients that wait for each answer: a thread sends one byte on each of
   16 sockets, and sends again on a socket only once the loop has echoed
   the last one. Gathering holds each answer, so the clients send less: the
   loop must find that its gathering slows the load and stop, instead of
   gathering at whatever rate its own window allows. */
enum { kSockets = 16 };

struct pinger {
    int fds[kSockets];
    uint64_t until_ns;
    unsigned answers;
};

static void *ping(void *arg) {
    struct pinger *p = arg;
    struct pollfd pfd[kSockets];
    for (int i = 0; i < kSockets; ++i) {
        pfd[i] = (struct pollfd){.fd = p->fds[i], .events = POLLIN};
        cr_assert_eq(write(p->fds[i], "x", 1), 1);
    }
    while (mono_ns() < p->until_ns) {
        if (poll(pfd, kSockets, 100) <= 0) continue;
        for (int i = 0; i < kSockets; ++i) {
            char c;
            if (!(pfd[i].revents & POLLIN) || read(p->fds[i], &c, 1) != 1) continue;
            ++p->answers;
            if (mono_ns() < p->until_ns) cr_assert_eq(write(p->fds[i], "x", 1), 1);
        }
    }
    return NULL;
}

static void on_ping(tl_loop *loop, tl_io *w, unsigned revents) {
    (void)loop;
    (void)revents;
    char c;
    int fd = *(int *)w->data;
    if (read(fd, &c, 1) == 1) cr_assert_eq(write(fd, &c, 1), 1);
}

Test(io_batch_adaptive, clients_that_wait_for_answers_are_not_held) {
    tl_loop *loop = adaptive_loop(2 * MS);
    int pairs[kSockets][2], fds[kSockets];
    tl_io w[kSockets];
    struct pinger p = {.until_ns = mono_ns() + 1000 * MS};
    for (int i = 0; i < kSockets; ++i) {
        make_pair(pairs[i]);
        fds[i] = pairs[i][0];
        p.fds[i] = pairs[i][1];
        tl_io_init(&w[i], pairs[i][0], on_ping, &fds[i]);
        cr_assert_eq(tl_io_start(loop, &w[i], TL_READ), 0);
    }
    tl_loop_stats before = stats_of(loop);
    pthread_t thread;
    cr_assert_eq(pthread_create(&thread, NULL, ping, &p), 0);
    while (mono_ns() < p.until_ns + 50 * MS) {
        tl_timer tick;
        int fired;
        start_failsafe(loop, &tick, &fired, 20);
        cr_assert(tl_loop_run(loop, TL_RUN_ONCE) >= 0);
        tl_timer_stop(loop, &tick);
    }
    pthread_join(thread, NULL);
    tl_loop_stats after = stats_of(loop);
    uint64_t gathered = after.io_batched_waits - before.io_batched_waits;
    uint64_t iterations = after.iterations - before.iterations;
    cr_assert_gt(p.answers, 100, "the clients got only %u answers", p.answers);
    /* Held, each answer would cost a 2 ms window: about 16 answers per
       gathered wait, every wait gathered. Judged and dropped, a dense
       spell lasts a few waits per 512 ms. */
    cr_assert_lt(gathered * 10, iterations,
                 "%llu of %llu waits gathered for clients that wait for answers (%u answers)",
                 (unsigned long long)gathered, (unsigned long long)iterations, p.answers);
    for (int i = 0; i < kSockets; ++i) {
        tl_io_stop(loop, &w[i]);
        close(pairs[i][0]);
        close(pairs[i][1]);
    }
    free_loop(loop);
}

/* After the dense load stops, a timer's wake-up with no event (a quiet spell
   longer than the window) makes the loop sparse at once: the next event is
   served by a wait that did not gather. The timer fires never early. */
Test(io_batch_adaptive, a_quiet_spell_ends_the_gathering) {
    tl_loop *loop = adaptive_loop(2 * MS);
    struct fed_run run;
    run_fed(loop, 20, 5000, &run);
    cr_assert_gt(run.after.io_batched_waits, 0, "the load was not found dense");
    uint64_t fired = 0;
    tl_timer t;
    tl_timer_init(&t, on_timer_fired_at, &fired);
    uint64_t start = tl_now(loop);
    cr_assert_eq(tl_timer_start(loop, &t, 30 * MS, 0), 0);
    while (!fired) cr_assert(tl_loop_run(loop, TL_RUN_ONCE) >= 0);
    cr_assert_geq(fired, start + 30 * MS, "the timer fired early");
    int p[2];
    make_pair(p);
    struct io_seen seen = {0};
    tl_io w;
    tl_io_init(&w, p[0], on_io_seen, &seen);
    cr_assert_eq(tl_io_start(loop, &w, TL_READ), 0);
    put(p[1]);
    uint64_t gathered = stats_of(loop).io_batched_waits;
    run_until_set(loop, &seen.calls, 5000);
    cr_assert_eq(stats_of(loop).io_batched_waits, gathered,
                 "the first event after a quiet spell was held");
    tl_io_stop(loop, &w);
    close(p[0]);
    close(p[1]);
    free_loop(loop);
}
