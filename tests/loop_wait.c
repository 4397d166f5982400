/* SPDX-License-Identifier: MIT */
/*
 * The loop's timed waits, once per registered timer backend, on the I/O
 * backend TICKLOOP_IO selects (meson runs the suite on each, and again with
 * the relative-wait fallbacks: TICKLOOP_EPOLL_TIMERFD=0,
 * TICKLOOP_URING_ABS_TIMER=0); the lateness the loop reports is in
 * loop_lateness.c.
 *
 * Exact where the outcome is deterministic: never early, counts. Lateness in
 * real time only loosely (a slow, loaded machine under ASan can be hundreds
 * of milliseconds late).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include <tickloop/tickloop.h>

#include "backend_params.h"
#include "loop_helpers.h"

/* Generous bound on lateness: anything beyond this is a hang, not jitter. */
#define MAX_LATE (500 * MS)

/* ------------------------------------------------------------------------ */
/* Timed waits                                                              */
/* ------------------------------------------------------------------------ */

static void on_count(tl_loop *loop, tl_timer *t) {
    (void)loop;
    cr_assert(mono_ns() >= t->deadline, "fired before its deadline by the clock");
    ++*(int *)t->data;
}

BACKEND_TEST(wait, lone_timer_is_one_wait) {
    tl_loop *loop = new_loop_with(p->name);
    int fired = 0;
    tl_timer t;
    tl_timer_init(&t, on_count, &fired);
    cr_assert(tl_timer_start(loop, &t, 40 * MS, 0) == 0);
    uint64_t deadline = t.deadline;
    run_to_end(loop);
    cr_assert(fired == 1);
    cr_assert(mono_ns() - deadline < MAX_LATE);
    tl_loop_stats st;
    tl_loop_stats_get(loop, &st);
    /* Wheels may wake once at a level boundary before the tick is due. */
    cr_assert(st.iterations <= 3, "%s: %llu iterations for one 40 ms timer", p->name,
              (unsigned long long)st.iterations);
    free_loop(loop);
}

/* The earliest deadline moves later while the loop sleeps toward it (the
 * heartbeat pattern): the timer fires at its new deadline, never at the old
 * one, and the loop wakes at most once in between. */
struct mover {
    tl_timer target;
    tl_timer mover;
    int fired;
};

static void on_move(tl_loop *loop, tl_timer *t) {
    struct mover *m = t->data;
    cr_assert(tl_timer_start(loop, &m->target, 30 * MS, 0) == 0);
}

BACKEND_TEST(wait, earliest_moved_later_fires_at_its_new_deadline) {
    tl_loop *loop = new_loop_with(p->name);
    static struct mover m;
    memset(&m, 0, sizeof m);
    tl_timer_init(&m.target, on_count, &m.fired);
    tl_timer_init(&m.mover, on_move, &m);
    cr_assert(tl_timer_start(loop, &m.target, 10 * MS, 0) == 0);
    cr_assert(tl_timer_start(loop, &m.mover, 2 * MS, 0) == 0);
    /* First iteration: the wait is armed for the mover's deadline, then the
       target's (10 ms) before it is moved to 32 ms. */
    run_to_end(loop);
    cr_assert(m.fired == 1, "%s: fired %d times", p->name, m.fired);
    tl_loop_stats st;
    tl_loop_stats_get(loop, &st);
    cr_assert(st.iterations <= 8, "%s: %llu iterations", p->name,
              (unsigned long long)st.iterations);
    free_loop(loop);
}

/* A thread makes an eventfd readable while the loop sleeps toward a far
 * deadline; the I/O callback starts a nearer timer, which must wake the
 * loop on time, not at the far deadline. */
struct nearer {
    tl_timer far;
    tl_timer near;
    tl_io io;
    int efd;
    int near_fired;
    uint64_t near_deadline;
    uint64_t fired_at;
};

static void on_near(tl_loop *loop, tl_timer *t) {
    struct nearer *n = t->data;
    n->fired_at = mono_ns();
    cr_assert(n->fired_at >= t->deadline, "fired before its deadline by the clock");
    ++n->near_fired;
    tl_timer_stop(loop, &n->far);
    tl_io_stop(loop, &n->io);
}

static void on_far(tl_loop *loop, tl_timer *t) {
    (void)loop;
    (void)t;
    cr_assert_fail("the far timer fired: the nearer deadline did not wake the loop");
}

static void on_readable(tl_loop *loop, tl_io *w, unsigned revents) {
    (void)revents;
    struct nearer *n = w->data;
    uint64_t v;
    cr_assert(read(n->efd, &v, sizeof v) == sizeof v);
    if (!tl_timer_active(&n->near)) {
        cr_assert(tl_timer_start(loop, &n->near, 10 * MS, 0) == 0);
        n->near_deadline = n->near.deadline;
    }
}

static void *write_later(void *arg) {
    struct nearer *n = arg;
    struct timespec ts = {0, 5 * 1000000};
    nanosleep(&ts, NULL);
    uint64_t one = 1;
    cr_assert(write(n->efd, &one, sizeof one) == sizeof one);
    return NULL;
}

BACKEND_TEST(wait, earliest_moved_earlier_wakes_in_time) {
    tl_loop *loop = new_loop_with(p->name);
    static struct nearer n;
    memset(&n, 0, sizeof n);
    n.efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    cr_assert(n.efd >= 0);
    tl_timer_init(&n.far, on_far, &n);
    tl_timer_init(&n.near, on_near, &n);
    tl_io_init(&n.io, n.efd, on_readable, &n);
    cr_assert(tl_timer_start(loop, &n.far, 20000 * MS, 0) == 0);
    cr_assert(tl_io_start(loop, &n.io, TL_READ) == 0);
    pthread_t th;
    cr_assert(pthread_create(&th, NULL, write_later, &n) == 0);
    run_to_end(loop);
    pthread_join(th, NULL);
    cr_assert(n.near_fired == 1);
    cr_assert(n.fired_at - n.near_deadline < MAX_LATE, "%s: the nearer timer was %llu ns late",
              p->name, (unsigned long long)(n.fired_at - n.near_deadline));
    close(n.efd);
    free_loop(loop);
}

/* The earliest timer is stopped; a later one then gets the loop to itself.
 * Whatever wake-up the stopped deadline leaves behind is at most one empty
 * iteration, and the later timer is not early. */
struct stopper {
    tl_timer victim;
    tl_timer killer;
    tl_timer later;
    int fired;
};

static void on_victim(tl_loop *loop, tl_timer *t) {
    (void)loop;
    (void)t;
    cr_assert_fail("a stopped timer ran");
}

static void on_kill(tl_loop *loop, tl_timer *t) {
    struct stopper *s = t->data;
    cr_assert(tl_timer_stop(loop, &s->victim) == 0);
    cr_assert(tl_timer_start(loop, &s->later, 20 * MS, 0) == 0);
}

BACKEND_TEST(wait, stopped_earliest_costs_at_most_one_empty_wakeup) {
    tl_loop *loop = new_loop_with(p->name);
    static struct stopper s;
    memset(&s, 0, sizeof s);
    tl_timer_init(&s.victim, on_victim, &s);
    tl_timer_init(&s.killer, on_kill, &s);
    tl_timer_init(&s.later, on_count, &s.fired);
    cr_assert(tl_timer_start(loop, &s.killer, 1 * MS, 0) == 0);
    cr_assert(tl_timer_start(loop, &s.victim, 5 * MS, 0) == 0);
    run_to_end(loop);
    cr_assert(s.fired == 1);
    tl_loop_stats st;
    tl_loop_stats_get(loop, &st);
    cr_assert(st.empty_wakeups <= 3, "%s: %llu empty wake-ups", p->name,
              (unsigned long long)st.empty_wakeups);
    free_loop(loop);
}

/* Signals every 2 ms interrupt a 30 ms wait again and again. A loop that
 * restarted the whole timeout after each interruption would never fire
 * while they last; one that waits for the same absolute deadline fires on
 * time, never early. */
static volatile sig_atomic_t alarms;

static void on_sigalrm(int sig) {
    (void)sig;
    ++alarms;
}

Test(wait, interrupted_waits_never_extend_the_deadline) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigalrm;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0; /* no SA_RESTART: each wait fails with EINTR */
    cr_assert(sigaction(SIGALRM, &sa, NULL) == 0);
    tl_loop *loop = new_loop_with(NULL);
    int fired = 0;
    tl_timer t;
    tl_timer_init(&t, on_count, &fired);
    cr_assert(tl_timer_start(loop, &t, 30 * MS, 0) == 0);
    uint64_t deadline = t.deadline;
    struct itimerval it = {{0, 2000}, {0, 2000}};
    cr_assert(setitimer(ITIMER_REAL, &it, NULL) == 0);
    run_to_end(loop);
    uint64_t done = mono_ns();
    int during = alarms;
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    cr_assert(fired == 1);
    cr_assert(during >= 3, "only %d alarms during the wait: the test did not interrupt it", during);
    cr_assert(done >= deadline && done - deadline < MAX_LATE);
    free_loop(loop);
}
