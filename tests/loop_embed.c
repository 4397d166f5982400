/* SPDX-License-Identifier: MIT */
/*
 * Embedding: a host loop that polls tl_loop_fd() for at most tl_loop_timeout()
 * and then runs tl_loop_run(TL_RUN_NOWAIT). Timers (never early), I/O and
 * asyncs all work through it, the descriptor goes quiet once the events are
 * handled (no busy host loop), and the timeout reports the cases the header
 * lists. Includes a port of libuv's test-embed.c. Run once per I/O backend
 * (TICKLOOP_IO) and, where timers matter, once per timer backend.
 */
#define _GNU_SOURCE
#define _DEFAULT_SOURCE /* usleep */
#include <criterion/criterion.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>

#include "backend_params.h"
#include "loop_helpers.h"

/* The host's poll timeout for tl_loop_timeout's ns: rounded up, so that the
 * host never wakes before the timer (it would only loop once more). */
static int host_ms(uint64_t ns) {
    if (ns == UINT64_MAX) return -1;
    uint64_t ms = ns / MS + (ns % MS != 0);
    return ms > INT_MAX ? INT_MAX : (int)ms;
}

/* One host round: wait on the loop's fd, then one NOWAIT iteration. Returns
 * whether the fd was readable. */
static int host_round(tl_loop *loop) {
    int fd = tl_loop_fd(loop);
    cr_assert_geq(fd, 0, "tl_loop_fd: %d %s", fd, tl_strerror(fd));
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    int n;
    do n = poll(&pfd, 1, host_ms(tl_loop_timeout(loop)));
    while (n < 0 && errno == EINTR);
    cr_assert_geq(n, 0, "poll: %s", strerror(errno));
    cr_assert_geq(tl_loop_run(loop, TL_RUN_NOWAIT), 0);
    return n > 0;
}

static int fd_readable_now(tl_loop *loop) {
    struct pollfd pfd = {.fd = tl_loop_fd(loop), .events = POLLIN};
    return poll(&pfd, 1, 0) > 0;
}

/* ------------------------------------------------------------------------ */
/* libuv test-embed.c                                                       */
/* ------------------------------------------------------------------------ */

static void *send_later(void *arg) {
    usleep(100000);
    cr_assert_eq(tl_async_send(arg), 0);
    return NULL;
}

static void stop_async(tl_loop *loop, tl_async *a) {
    tl_async_stop(loop, a);
}

/* Another thread sends an async while the host sleeps in poll(): the loop's
 * fd wakes the host, and the loop ends with its last handle. */
Test(embed, async_from_another_thread_wakes_the_host, .timeout = 30) {
    tl_loop *loop = new_loop();
    tl_async a;
    tl_async_init(&a);
    cr_assert_eq(tl_async_start(loop, &a, stop_async, NULL), 0);
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, send_later, &a), 0);
    int rounds = 0;
    while (tl_loop_alive(loop)) {
        host_round(loop);
        cr_assert_lt(++rounds, 100, "the host loop spins");
    }
    pthread_join(th, NULL);
    free_loop(loop);
}

/* ------------------------------------------------------------------------ */
/* Timers and I/O through a poll() host                                     */
/* ------------------------------------------------------------------------ */

struct embed_state {
    tl_timer once, tick;
    tl_io reader;
    uint64_t once_deadline;
    int once_fired, ticks, reads;
    int fds[2];
};

static void on_once(tl_loop *loop, tl_timer *t) {
    struct embed_state *s = t->data;
    cr_assert_geq(tl_now(loop), s->once_deadline, "timer early through the host");
    s->once_fired++;
}

static void on_tick(tl_loop *loop, tl_timer *t) {
    struct embed_state *s = t->data;
    cr_assert_geq(tl_now(loop), t->deadline - t->repeat, "tick early");
    if (++s->ticks == 5) tl_timer_stop(loop, t);
}

/* One byte per call: the writer's bytes may all be queued by the time the
 * host gets to run (a loaded machine), and the socket, still readable,
 * reports each of them. */
static void on_read(tl_loop *loop, tl_io *w, unsigned revents) {
    struct embed_state *s = w->data;
    cr_assert(revents & TL_READ);
    char c;
    cr_assert_eq(read(w->fd, &c, 1), 1);
    if (++s->reads == 3) tl_io_stop(loop, w);
}

static void *writer(void *arg) {
    int fd = *(int *)arg;
    for (int i = 0; i < 3; i++) {
        usleep(20000);
        cr_assert_eq(write(fd, "x", 1), 1);
    }
    return NULL;
}

BACKEND_TEST(embed, timers_and_io_through_a_poll_host) {
    tl_loop *loop = new_loop_with(p->name);
    struct embed_state s = {0};
    make_pair(s.fds);
    tl_timer_init(&s.once, on_once, &s);
    tl_timer_init(&s.tick, on_tick, &s);
    tl_io_init(&s.reader, s.fds[0], on_read, &s);
    cr_assert_eq(tl_timer_start(loop, &s.once, 30 * MS, 0), 0);
    s.once_deadline = s.once.deadline;
    cr_assert_eq(tl_timer_start(loop, &s.tick, 7 * MS, 7 * MS), 0);
    cr_assert_eq(tl_io_start(loop, &s.reader, TL_READ), 0);
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, writer, &s.fds[1]), 0);
    /* A missing event fails the test instead of leaving the host in poll. */
    tl_timer failsafe;
    int expired;
    start_failsafe(loop, &failsafe, &expired, 10000);
    int rounds = 0;
    while (tl_loop_alive(loop) && !expired) {
        host_round(loop);
        /* About 10 events over ~60 ms: a spinning host would make thousands
           of rounds. */
        cr_assert_lt(++rounds, 200, "%s on %s: the host loop spins", p->name,
                     tl_loop_io_name(loop));
    }
    pthread_join(th, NULL);
    cr_assert_eq(tl_timer_stop(loop, &failsafe), 0);
    cr_assert_eq(s.once_fired, 1);
    cr_assert_eq(s.ticks, 5);
    cr_assert_eq(s.reads, 3);
    close(s.fds[0]);
    close(s.fds[1]);
    free_loop(loop);
}

/* Once the loop handled an event, its fd goes quiet (on io_uring the loop
 * drains its eventfd), so an idle host blocks instead of spinning. */
static void drain_cb(tl_loop *loop, tl_io *w, unsigned revents) {
    (void)loop, (void)revents;
    char c;
    cr_assert_eq(read(w->fd, &c, 1), 1);
    (*(int *)w->data)++;
}

Test(embed, fd_readable_while_io_is_pending_and_quiet_after, .timeout = 30) {
    tl_loop *loop = new_loop();
    int fds[2], reads = 0;
    make_pair(fds);
    tl_io w;
    tl_io_init(&w, fds[0], drain_cb, &reads);
    cr_assert_eq(tl_io_start(loop, &w, TL_READ), 0);
    /* tl_loop_timeout hands a queued io_uring registration to the kernel
       itself: no extra round is needed before the host blocks. */
    cr_assert_eq(tl_loop_timeout(loop), UINT64_MAX, "no timer: only I/O can wake it");
    cr_assert_eq(fd_readable_now(loop), 0);
    put(fds[1]);
    struct pollfd pfd = {.fd = tl_loop_fd(loop), .events = POLLIN};
    cr_assert_eq(poll(&pfd, 1, 5000), 1, "%s: the loop's fd did not show the ready socket",
                 tl_loop_io_name(loop));
    cr_assert_eq(tl_loop_run(loop, TL_RUN_NOWAIT), 1);
    cr_assert_eq(reads, 1);
    /* io_uring re-arms the poll within tl_loop_timeout; then the fd is quiet
       (the loop drained its eventfd) and a host would block. */
    cr_assert_eq(tl_loop_timeout(loop), UINT64_MAX);
    cr_assert_eq(fd_readable_now(loop), 0, "%s: the fd stays readable after the event",
                 tl_loop_io_name(loop));
    /* And it fires again for the next byte. */
    put(fds[1]);
    cr_assert_eq(poll(&pfd, 1, 5000), 1);
    cr_assert_eq(tl_loop_run(loop, TL_RUN_NOWAIT), 1);
    cr_assert_eq(reads, 2);
    tl_io_stop(loop, &w);
    close(fds[0]);
    close(fds[1]);
    free_loop(loop);
}

static void nop_timer(tl_loop *loop, tl_timer *t) {
    (void)loop, (void)t;
}
static void nop_hook(tl_loop *loop, tl_hook *h) {
    (void)loop, (void)h;
}

BACKEND_TEST(embed, timeout_reports_next_timer_idle_hook_and_stop) {
    tl_loop *loop = new_loop_with(p->name);
    cr_assert_eq(tl_loop_timeout(NULL), 0);
    cr_assert_eq(tl_loop_fd(NULL), -EINVAL);
    cr_assert_eq(tl_loop_timeout(loop), UINT64_MAX, "no timer");
    tl_timer t;
    tl_timer_init(&t, nop_timer, NULL);
    cr_assert_eq(tl_timer_start(loop, &t, 200 * MS, 0), 0);
    uint64_t ns = tl_loop_timeout(loop);
    /* A wheel reports the end of the deadline's tick (1 ms, the default):
       never before the deadline, at most a tick after it. */
    const uint64_t tick = backend_exact(p->name) ? 0 : MS;
    cr_assert(ns > 0 && ns <= 200 * MS + tick, "%s: timeout %llu for a timer 200 ms away", p->name,
              (unsigned long long)ns);
    cr_assert_gt(ns, 100 * MS, "%s: %llu", p->name, (unsigned long long)ns);
    tl_hook idle;
    tl_hook_init(&idle, TL_HOOK_IDLE, nop_hook, NULL);
    cr_assert_eq(tl_hook_start(loop, &idle), 0);
    cr_assert_eq(tl_loop_timeout(loop), 0, "an active IDLE hook");
    tl_hook_stop(loop, &idle);
    tl_loop_stop(loop);
    cr_assert_eq(tl_loop_timeout(loop), 0, "a stop requested");
    cr_assert_eq(tl_loop_run(loop, TL_RUN_NOWAIT), 1); /* consumes the stop */
    cr_assert_eq(tl_timer_start(loop, &t, 0, 0), 0);
    ns = tl_loop_timeout(loop);
    cr_assert(ns <= tick, "%s: timeout %llu for a due timer", p->name, (unsigned long long)ns);
    tl_timer_stop(loop, &t);
    free_loop(loop);
}
