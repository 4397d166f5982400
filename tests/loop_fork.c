/* SPDX-License-Identifier: MIT */
/*
 * tl_loop_fork: a child goes on with the loop it inherited. The parent sets up
 * timers, I/O watchers, asyncs, signal watchers and hooks, forks, and the
 * child calls tl_loop_fork and checks that each keeps working; the parent's
 * loop must be unaffected. Ports libuv's test-fork.c scenarios (fork_timer,
 * fork_socketpair_started, fork_signal_to_child, plus asyncs), rewritten for
 * this API. Run once per I/O backend (TICKLOOP_IO); timers once per timer
 * backend too.
 *
 * The child never uses Criterion: it checks with CHILD_CHECK, which prints
 * and _exits non-zero, and an alarm kills it if it hangs. The parent asserts
 * on its exit status.
 */
#define _GNU_SOURCE
#define _DEFAULT_SOURCE /* usleep */
#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>

#include "backend_params.h"
#include "loop_helpers.h"

/* Forks; in the child runs body(arg) under a 10 s alarm and exits 0 when it
 * returns; in the parent returns the child's pid. */
static pid_t fork_child(void (*body)(void *), void *arg) {
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_geq(pid, 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        alarm(10);
        body(arg);
        _exit(0);
    }
    return pid;
}

static void expect_child_ok(pid_t pid) {
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status), "child killed by signal %d", WTERMSIG(status));
    cr_assert_eq(WEXITSTATUS(status), 0, "child failed (its stderr says where)");
}

Test(fork, refuses_bad_calls) {
    tl_loop *loop = new_loop();
    cr_assert_eq(tl_loop_fork(NULL), -EINVAL);
    /* In the same process it is harmless: new kernel objects, same handles. */
    cr_assert_eq(tl_loop_fork(loop), 0);
    free_loop(loop);
}

static void fork_from_callback(tl_loop *loop, tl_timer *t) {
    *(int *)t->data = tl_loop_fork(loop);
}

Test(fork, refused_from_inside_a_callback) {
    tl_loop *loop = new_loop();
    int r = 1;
    tl_timer t;
    tl_timer_init(&t, fork_from_callback, &r);
    cr_assert_eq(tl_timer_start(loop, &t, 0, 0), 0);
    cr_assert_eq(tl_loop_run(loop, TL_RUN_DEFAULT), 0);
    cr_assert_eq(r, -EBUSY);
    free_loop(loop);
}

/* ------------------------------------------------------------------------ */
/* Timers (libuv fork_timer)                                                */
/* ------------------------------------------------------------------------ */

struct timer_case {
    tl_loop *loop;
    tl_timer once, tick;
    uint64_t once_deadline;
    int once_fired, ticks;
};

static void tc_once(tl_loop *loop, tl_timer *t) {
    struct timer_case *c = t->data;
    if (tl_now(loop) < c->once_deadline) {
        fprintf(stderr, "timer early\n");
        _exit(3);
    }
    c->once_fired++;
}

static void tc_tick(tl_loop *loop, tl_timer *t) {
    struct timer_case *c = t->data;
    if (++c->ticks == 3) tl_timer_stop(loop, t);
}

static void timer_child(void *arg) {
    struct timer_case *c = arg;
    CHILD_CHECK(tl_loop_fork(c->loop) == 0);
    CHILD_CHECK(tl_loop_run(c->loop, TL_RUN_DEFAULT) == 0);
    CHILD_CHECK(c->once_fired == 1);
    CHILD_CHECK(c->ticks == 3);
    CHILD_CHECK(tl_loop_free(c->loop) == 0);
}

BACKEND_TEST(fork, active_timers_fire_in_child_and_parent) {
    struct timer_case c = {0};
    c.loop = new_loop_with(p->name);
    tl_timer_init(&c.once, tc_once, &c);
    tl_timer_init(&c.tick, tc_tick, &c);
    cr_assert_eq(tl_timer_start(c.loop, &c.once, 40 * MS, 0), 0);
    c.once_deadline = c.once.deadline;
    cr_assert_eq(tl_timer_start(c.loop, &c.tick, 5 * MS, 5 * MS), 0);
    pid_t pid = fork_child(timer_child, &c);
    cr_assert_eq(tl_loop_run(c.loop, TL_RUN_DEFAULT), 0);
    cr_assert_eq(c.once_fired, 1, "%s", p->name);
    cr_assert_eq(c.ticks, 3, "%s", p->name);
    expect_child_ok(pid);
    free_loop(c.loop);
}

/* Timers on BOOTTIME and REALTIME: each clock has a timerfd of the loop's
 * own, which tl_loop_fork must replace (a shared one would be armed by both
 * processes). */
struct clock_case {
    tl_loop *loop;
    tl_timer boot, wall;
    int boot_fired, wall_fired;
};

static void cc_boot(tl_loop *loop, tl_timer *t) {
    struct clock_case *c = t->data;
    (void)loop;
    if (tl_clock_now(TL_CLOCK_BOOTTIME) < t->deadline) {
        fprintf(stderr, "BOOTTIME timer early\n");
        _exit(3);
    }
    c->boot_fired++;
}

static void cc_wall(tl_loop *loop, tl_timer *t) {
    struct clock_case *c = t->data;
    /* Periodic: t->deadline is already the next one. */
    if (tl_clock_now(TL_CLOCK_REALTIME) < t->deadline - t->repeat) {
        fprintf(stderr, "REALTIME timer early\n");
        _exit(3);
    }
    if (++c->wall_fired == 3) tl_timer_stop(loop, t);
}

static void run_clock_case(struct clock_case *c) {
    CHILD_CHECK(tl_loop_run(c->loop, TL_RUN_DEFAULT) == 0);
    CHILD_CHECK(c->boot_fired == 1);
    CHILD_CHECK(c->wall_fired == 3);
}

static void clock_child(void *arg) {
    struct clock_case *c = arg;
    CHILD_CHECK(tl_loop_fork(c->loop) == 0);
    run_clock_case(c);
    CHILD_CHECK(tl_loop_free(c->loop) == 0);
}

BACKEND_TEST(fork, boottime_and_realtime_timers_fire_in_child_and_parent) {
    struct clock_case c = {0};
    c.loop = new_loop_with(p->name);
    tl_timer_init(&c.boot, cc_boot, &c);
    tl_timer_init(&c.wall, cc_wall, &c);
    uint64_t boot = tl_clock_now(TL_CLOCK_BOOTTIME), wall = tl_clock_now(TL_CLOCK_REALTIME);
    cr_assert_eq(tl_timer_start_at(c.loop, &c.boot, TL_CLOCK_BOOTTIME, boot + 30 * MS, 0), 0);
    cr_assert_eq(tl_timer_start_at(c.loop, &c.wall, TL_CLOCK_REALTIME, wall + 5 * MS, 5 * MS), 0);
    pid_t pid = fork_child(clock_child, &c);
    cr_assert_eq(tl_loop_run(c.loop, TL_RUN_DEFAULT), 0);
    cr_assert_eq(c.boot_fired, 1, "%s", p->name);
    cr_assert_eq(c.wall_fired, 3, "%s", p->name);
    expect_child_ok(pid);
    free_loop(c.loop);
}

/* ------------------------------------------------------------------------ */
/* I/O (libuv fork_socketpair_started)                                      */
/* ------------------------------------------------------------------------ */

struct io_case {
    tl_loop *loop;
    tl_io w;
    int fds[2];
    int reads; /* bytes read */
};

static void ic_read(tl_loop *loop, tl_io *w, unsigned revents) {
    struct io_case *c = w->data;
    (void)revents;
    char buf[8];
    ssize_t n = read(w->fd, buf, sizeof buf);
    /* Bytes, not calls: both may arrive in one read. */
    if (n > 0 && (c->reads += (int)n) >= 2) tl_io_stop(loop, w);
}

static void ic_writer_timer(tl_loop *loop, tl_timer *t) {
    (void)loop;
    struct io_case *c = t->data;
    if (write(c->fds[1], "y", 1) != 1) _exit(4);
}

static void io_child(void *arg) {
    struct io_case *c = arg;
    CHILD_CHECK(tl_loop_fork(c->loop) == 0);
    /* One byte written before the fork is there already; a timer writes the
       second one, after the loop blocked in its new poller. */
    tl_timer t;
    tl_timer_init(&t, ic_writer_timer, c);
    CHILD_CHECK(tl_timer_start(c->loop, &t, 20 * MS, 0) == 0);
    CHILD_CHECK(tl_loop_run(c->loop, TL_RUN_DEFAULT) == 0);
    CHILD_CHECK(c->reads == 2);
    /* The embedding descriptor is the child's own too. */
    CHILD_CHECK(tl_loop_fd(c->loop) >= 0);
    CHILD_CHECK(tl_loop_free(c->loop) == 0);
}

Test(fork, started_io_watcher_works_in_child_and_parent) {
    struct io_case c = {0};
    c.loop = new_loop();
    /* The embedding descriptor exists before the fork: the child gets its own. */
    cr_assert_geq(tl_loop_fd(c.loop), 0);
    make_pair(c.fds);
    tl_io_init(&c.w, c.fds[0], ic_read, &c);
    cr_assert_eq(tl_io_start(c.loop, &c.w, TL_READ), 0);
    cr_assert_eq(tl_loop_run(c.loop, TL_RUN_NOWAIT), 1); /* registered in the kernel */
    put(c.fds[1]);
    pid_t pid = fork_child(io_child, &c);
    /* The parent waits for the child before reading: the socket is shared. */
    expect_child_ok(pid);
    cr_assert_eq(c.reads, 0);
    put(c.fds[1]);
    put(c.fds[1]);
    tl_timer fs;
    int fired;
    start_failsafe(c.loop, &fs, &fired, 5000);
    while (c.reads < 1 && !fired) tl_loop_run(c.loop, TL_RUN_ONCE);
    cr_assert_eq(fired, 0, "the parent's watcher went deaf after the child's tl_loop_fork");
    tl_timer_stop(c.loop, &fs);
    tl_io_stop(c.loop, &c.w);
    close(c.fds[0]);
    close(c.fds[1]);
    free_loop(c.loop);
}

/* ------------------------------------------------------------------------ */
/* Asyncs and signals (libuv fork_signal_to_child)                          */
/* ------------------------------------------------------------------------ */

struct as_case {
    tl_loop *loop;
    tl_async pending, fresh;
    tl_signal sig;
    tl_hook check;
    int pending_ran, fresh_ran, signals, checks;
};

static void ac_pending(tl_loop *loop, tl_async *a) {
    struct as_case *c = a->data;
    c->pending_ran++;
    tl_async_stop(loop, a);
}

static void ac_fresh(tl_loop *loop, tl_async *a) {
    struct as_case *c = a->data;
    c->fresh_ran++;
    tl_async_stop(loop, a);
}

static void ac_signal(tl_loop *loop, tl_signal *s, int signo) {
    struct as_case *c = s->data;
    if (signo == SIGUSR1) c->signals++;
    tl_signal_stop(loop, s);
}

static void ac_check(tl_loop *loop, tl_hook *h) {
    (void)loop;
    ((struct as_case *)h->data)->checks++;
}

static void *send_from_thread(void *arg) {
    usleep(20000);
    tl_async_send(arg);
    return NULL;
}

static void async_signal_child(void *arg) {
    struct as_case *c = arg;
    CHILD_CHECK(tl_loop_fork(c->loop) == 0);
    /* Tell the parent we are ready for the signal. */
    CHILD_CHECK(kill(getppid(), SIGUSR2) == 0);
    pthread_t th;
    CHILD_CHECK(pthread_create(&th, NULL, send_from_thread, &c->fresh) == 0);
    CHILD_CHECK(tl_loop_run(c->loop, TL_RUN_DEFAULT) == 0);
    pthread_join(th, NULL);
    CHILD_CHECK(c->pending_ran == 1); /* sent before the fork */
    CHILD_CHECK(c->fresh_ran == 1);   /* sent in the child, from a thread */
    CHILD_CHECK(c->signals == 1);     /* sent by the parent to the child */
    CHILD_CHECK(c->checks > 0);
    tl_hook_stop(c->loop, &c->check);
    CHILD_CHECK(tl_loop_free(c->loop) == 0);
}

Test(fork, asyncs_signals_and_hooks_work_in_child) {
    struct as_case c = {0};
    c.loop = new_loop();
    tl_async_init(&c.pending);
    tl_async_init(&c.fresh);
    tl_signal_init(&c.sig);
    tl_hook_init(&c.check, TL_HOOK_CHECK, ac_check, &c);
    cr_assert_eq(tl_async_start(c.loop, &c.pending, ac_pending, &c), 0);
    cr_assert_eq(tl_async_start(c.loop, &c.fresh, ac_fresh, &c), 0);
    cr_assert_eq(tl_signal_start(c.loop, &c.sig, SIGUSR1, ac_signal, &c), 0);
    cr_assert_eq(tl_hook_start(c.loop, &c.check), 0);
    cr_assert_eq(tl_hook_set_ref(c.loop, &c.check, 0), 0);
    cr_assert_eq(tl_async_send(&c.pending), 0);
    /* SIGUSR2 from the child says it is ready; wait for it synchronously. */
    sigset_t ready, old;
    sigemptyset(&ready);
    sigaddset(&ready, SIGUSR2);
    cr_assert_eq(pthread_sigmask(SIG_BLOCK, &ready, &old), 0);
    pid_t pid = fork_child(async_signal_child, &c);
    int got = 0;
    cr_assert_eq(sigwait(&ready, &got), 0);
    cr_assert_eq(kill(pid, SIGUSR1), 0);
    expect_child_ok(pid);
    /* The parent's pending send is its own, and still runs here. */
    cr_assert_eq(tl_loop_run(c.loop, TL_RUN_NOWAIT), 1);
    cr_assert_eq(c.pending_ran, 1);
    cr_assert_eq(c.fresh_ran, 0, "the child's send reached the parent");
    tl_async_stop(c.loop, &c.fresh);
    tl_signal_stop(c.loop, &c.sig);
    tl_hook_stop(c.loop, &c.check);
    free_loop(c.loop);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* ------------------------------------------------------------------------ */
/* Signals after fork: ownership belongs to the process                     */
/* ------------------------------------------------------------------------ */

/* A loop of the parent watches SIGUSR1 (and keeps it: the parent checks at
 * the end that its signalfd still delivers). The children below decide who
 * watches it on their side. */
struct sig_case {
    tl_loop *loop; /* the parent's, inherited by the child */
    tl_signal sig;
    int got;
};

static void sc_got(tl_loop *loop, tl_signal *s, int signo) {
    if (signo == SIGUSR1) ++*(int *)s->data;
    tl_signal_stop(loop, s);
}

/* Runs loop until *got, or fails the child. */
static void child_wait_signal(tl_loop *loop, int *got) {
    CHILD_CHECK(kill(getpid(), SIGUSR1) == 0);
    while (!*got) CHILD_CHECK(tl_loop_run(loop, TL_RUN_ONCE) >= 0);
    CHILD_CHECK(*got == 1);
}

static tl_loop *child_new_loop(void) {
    tl_loop *loop = NULL;
    CHILD_CHECK(tl_loop_new(&loop, NULL) == 0);
    return loop;
}

/* A pre-fork server's worker: a loop of its own watches the signal the
   inherited loop, which the child never uses, watched in the parent. */
static void new_loop_child(void *arg) {
    (void)arg;
    tl_loop *mine = child_new_loop();
    tl_signal s;
    int got = 0;
    tl_signal_init(&s);
    CHILD_CHECK(tl_signal_start(mine, &s, SIGUSR1, sc_got, &got) == 0);
    child_wait_signal(mine, &got);
    CHILD_CHECK(tl_loop_free(mine) == 0);
}

/* tl_loop_fork on the inherited loop takes its signals again: a new loop is
   then refused, and the inherited watcher gets the signal. */
static void loop_fork_child(void *arg) {
    struct sig_case *c = arg;
    c->got = 0;
    CHILD_CHECK(tl_loop_fork(c->loop) == 0);
    tl_loop *mine = child_new_loop();
    tl_signal s;
    int got = 0;
    tl_signal_init(&s);
    CHILD_CHECK(tl_signal_start(mine, &s, SIGUSR1, sc_got, &got) == -EEXIST);
    child_wait_signal(c->loop, &c->got);
    CHILD_CHECK(tl_loop_free(c->loop) == 0);
    /* Stopped there, free for another loop of the child. */
    CHILD_CHECK(tl_signal_start(mine, &s, SIGUSR1, sc_got, &got) == 0);
    child_wait_signal(mine, &got);
    CHILD_CHECK(tl_loop_free(mine) == 0);
}

/* The child's new loop took the signal first: tl_loop_fork on the inherited
   loop fails with -EEXIST and changes nothing; stopping the inherited
   watcher (its signalfd is still the parent's, which must not change) lets
   a second tl_loop_fork succeed, and the new loop keeps the signal. */
static void conflict_child(void *arg) {
    struct sig_case *c = arg;
    tl_loop *mine = child_new_loop();
    tl_signal s;
    int got = 0;
    tl_signal_init(&s);
    CHILD_CHECK(tl_signal_start(mine, &s, SIGUSR1, sc_got, &got) == 0);
    CHILD_CHECK(tl_loop_fork(c->loop) == -EEXIST);
    CHILD_CHECK(tl_signal_stop(c->loop, &c->sig) == 0);
    CHILD_CHECK(tl_loop_fork(c->loop) == 0);
    child_wait_signal(mine, &got);
    CHILD_CHECK(tl_loop_free(mine) == 0);
    CHILD_CHECK(tl_loop_free(c->loop) == 0);
}

static void signal_after_fork(void (*child)(void *)) {
    struct sig_case c = {0};
    c.loop = new_loop();
    tl_signal_init(&c.sig);
    cr_assert_eq(tl_signal_start(c.loop, &c.sig, SIGUSR1, sc_got, &c.got), 0);
    expect_child_ok(fork_child(child, &c));
    /* The parent's watcher is untouched by whatever the child did. */
    cr_assert_eq(kill(getpid(), SIGUSR1), 0);
    tl_timer fs;
    int fired;
    start_failsafe(c.loop, &fs, &fired, 5000);
    while (!c.got && !fired) tl_loop_run(c.loop, TL_RUN_ONCE);
    cr_assert_eq(c.got, 1, "the parent's signal watcher went deaf after the child's");
    tl_timer_stop(c.loop, &fs);
    free_loop(c.loop);
}

Test(fork, new_loop_in_child_watches_a_signal_the_parent_watches) {
    signal_after_fork(new_loop_child);
}

Test(fork, loop_fork_retakes_the_inherited_loops_signals) {
    signal_after_fork(loop_fork_child);
}

Test(fork, loop_fork_refuses_a_signal_a_new_loop_took) {
    signal_after_fork(conflict_child);
}

/* ------------------------------------------------------------------------ */
/* A watcher left on a closed fd whose number the loop's own reuses         */
/* ------------------------------------------------------------------------ */

static void stale_io_cb(tl_loop *loop, tl_io *w, unsigned revents) {
    (void)loop;
    (void)w;
    (void)revents;
}

static void stale_async_cb(tl_loop *loop, tl_async *a) {
    ++*(int *)a->data;
    tl_async_stop(loop, a);
}

/* Watchers whose fds the program closed without stopping them (which
 * tl_loop_fork allows: it skips them), on the lowest free fd numbers but
 * one: the new epoll set or ring takes that one, the new async eventfd and
 * signalfd take numbers a stale watcher still holds in the registry. A later
 * tl_io_stop of that watcher removed the loop's own registration: the async
 * and the signal went deaf. */
#define STALE 8
Test(fork, stopping_a_stale_watcher_on_a_reused_fd_keeps_the_loops_own) {
    tl_loop *loop = new_loop();
    tl_async a;
    tl_signal s;
    int sent = 0, got = 0;
    tl_async_init(&a);
    tl_signal_init(&s);
    a.data = &sent;
    cr_assert_eq(tl_async_start(loop, &a, stale_async_cb, &sent), 0);
    cr_assert_eq(tl_signal_start(loop, &s, SIGUSR1, sc_got, &got), 0);
    int p[2];
    cr_assert_eq(pipe(p), 0);
    int fds[STALE + 1];
    for (int i = 0; i <= STALE; ++i) {
        fds[i] = dup(p[0]); /* the lowest free numbers, in order */
        cr_assert_geq(fds[i], 0);
    }
    tl_io w[STALE + 1];
    for (int i = 1; i <= STALE; ++i) {
        tl_io_init(&w[i], fds[i], stale_io_cb, NULL);
        cr_assert_eq(tl_io_start(loop, &w[i], TL_READ), 0);
    }
    cr_assert_geq(tl_loop_run(loop, TL_RUN_NOWAIT), 0);
    for (int i = 0; i <= STALE; ++i) close(fds[i]);
    cr_assert_eq(tl_loop_fork(loop), 0);
    check_loop(loop);
    for (int i = 1; i <= STALE; ++i) cr_assert_eq(tl_io_stop(loop, &w[i]), 0);
    check_loop(loop);
    /* The loop's own watchers still deliver. */
    cr_assert_eq(tl_async_send(&a), 0);
    cr_assert_eq(kill(getpid(), SIGUSR1), 0);
    tl_timer fs;
    int fired;
    start_failsafe(loop, &fs, &fired, 5000);
    while ((!sent || !got) && !fired) tl_loop_run(loop, TL_RUN_ONCE);
    cr_assert_eq(sent, 1, "the async went deaf");
    cr_assert_eq(got, 1, "the signal watcher went deaf");
    tl_timer_stop(loop, &fs);
    close(p[0]);
    close(p[1]);
    free_loop(loop);
}

/* Stale watchers on the lowest free numbers with no gap: the new epoll set
 * or ring tl_loop_fork creates takes the first stale watcher's number, and
 * adding that watcher again would register the loop's own descriptor in
 * itself. The call skips it as it skips any closed fd, and the loop works. */
Test(fork, loop_fork_skips_a_stale_watcher_whose_number_its_new_fd_took) {
    tl_loop *loop = new_loop();
    int p[2];
    cr_assert_eq(pipe(p), 0);
    int fds[STALE];
    tl_io w[STALE];
    for (int i = 0; i < STALE; ++i) {
        fds[i] = dup(p[0]); /* the lowest free numbers, in order */
        cr_assert_geq(fds[i], 0);
        tl_io_init(&w[i], fds[i], stale_io_cb, NULL);
        cr_assert_eq(tl_io_start(loop, &w[i], TL_READ), 0);
    }
    cr_assert_geq(tl_loop_run(loop, TL_RUN_NOWAIT), 0);
    for (int i = 0; i < STALE; ++i) close(fds[i]);
    int r = tl_loop_fork(loop);
    cr_assert_eq(r, 0, "%s: tl_loop_fork: %d %s", tl_loop_io_name(loop), r, tl_strerror(r));
    check_loop(loop);
    /* The loop still delivers: a timer and a fresh watcher. */
    int q[2];
    make_pair(q);
    tl_io fresh;
    tl_io_init(&fresh, q[0], on_io_seen, NULL);
    struct io_seen s = {0};
    fresh.data = &s;
    cr_assert_eq(tl_io_start(loop, &fresh, TL_READ), 0);
    put(q[1]);
    run_until_set(loop, &s.calls, 5000);
    cr_assert_eq(tl_io_stop(loop, &fresh), 0);
    for (int i = 0; i < STALE; ++i) cr_assert_eq(tl_io_stop(loop, &w[i]), 0);
    close(q[0]);
    close(q[1]);
    close(p[0]);
    close(p[1]);
    free_loop(loop);
}

/* A child that does not use the loop it inherited stops its watchers (to
 * free it, say) without calling tl_loop_fork: the epoll set or ring is still
 * the parent's, and the stop must leave it alone, or the parent's watcher
 * goes deaf. */
struct inherited {
    tl_loop *loop;
    tl_io w;
};

static void stop_inherited_child(void *arg) {
    struct inherited *c = arg;
    CHILD_CHECK(tl_io_stop(c->loop, &c->w) == 0);
    CHILD_CHECK(tl_loop_free(c->loop) == 0);
}

Test(fork, inherited_loops_io_stop_leaves_the_parents_set_alone) {
    struct inherited c = {.loop = new_loop()};
    tl_loop *loop = c.loop;
    int fds[2];
    make_pair(fds);
    struct io_seen s = {0};
    tl_io_init(&c.w, fds[0], on_io_seen, &s);
    cr_assert_eq(tl_io_start(loop, &c.w, TL_READ), 0);
    cr_assert_eq(tl_loop_run(loop, TL_RUN_NOWAIT), 1); /* registered in the kernel */
    expect_child_ok(fork_child(stop_inherited_child, &c));
    put(fds[1]);
    run_until_set(loop, &s.calls, 5000);
    cr_assert_eq(tl_io_stop(loop, &c.w), 0);
    close(fds[0]);
    close(fds[1]);
    free_loop(loop);
}
