/* SPDX-License-Identifier: MIT */
/*
 * Faults and edges, once per I/O backend
 * (TICKLOOP_IO, set by meson.build) and, where timers matter, once per
 * registered timer backend:
 * - a 1 kHz SIGALRM storm while timers run: none early, none lost, in order;
 * - epoll_pwait2 missing: refused by a seccomp filter with ENOSYS at run time,
 *   and disabled with TICKLOOP_EPOLL_PWAIT2=0 before tl_loop_new;
 * - an fd closed while registered and its number reused by a new watcher;
 * - callbacks that stop the loop, free their own handle, start 1,000 timers;
 * - a repeat interval shorter than the callback's run time (no catch-up);
 * - tl_loop_free with every kind of handle active;
 * - deadlines near UINT64_MAX;
 * - fork(): the child creates its own loop, the parent's keeps working
 * (1e6 timers due at once beside a busy socket: faults_storm.c).
 *
 * These use the real clock. They assert never early and strict order; they
 * bound lateness only loosely, so that a slow or loaded machine passes.
 */
#define _GNU_SOURCE
#include "faults_helpers.h"

/* ------------------------------------------------------------------------ */
/* EINTR storm                                                              */
/* ------------------------------------------------------------------------ */

static volatile sig_atomic_t alarms;
static void on_sigalrm(int signo) {
    (void)signo;
    alarms++;
}

/* Keeps the loop waiting (every ms) until ten alarms have arrived, so that a
 * slow machine or valgrind, which delivers fewer of them, still storms. */
static void on_alarm_keeper(tl_loop *loop, tl_timer *t) {
    if (alarms >= 10 || tl_now(loop) > *(uint64_t *)t->data) tl_timer_stop(loop, t);
}

/* 300 timers spread over 60 ms while SIGALRM arrives every millisecond,
 * without SA_RESTART, so waits keep failing with EINTR. */
static void eintr_storm(const char *backend) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigalrm;
    sigemptyset(&sa.sa_mask);
    cr_assert_eq(sigaction(SIGALRM, &sa, NULL), 0);
    tl_loop *loop = new_loop(backend);
    struct record r;
    enum { kTimers = 300 };
    record_init(&r, backend, kTimers);
    for (size_t i = 0; i < kTimers; i++) start_recorded(loop, &r, i, (i * 7919) % 60000 * US);
    alarms = 0;
    uint64_t give_up = tl_now(loop) + 10000 * MS;
    tl_timer keeper;
    tl_timer_init(&keeper, on_alarm_keeper, &give_up);
    cr_assert_eq(tl_timer_start(loop, &keeper, 1 * MS, 1 * MS), 0);
    struct itimerval it = {{0, 1000}, {0, 1000}};
    cr_assert_eq(setitimer(ITIMER_REAL, &it, NULL), 0);
    int rc = tl_loop_run(loop, TL_RUN_DEFAULT);
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    cr_assert_eq(rc, 0, "%s: tl_loop_run: %s", backend, tl_strerror(rc));
    cr_assert_geq(alarms, 10, "only %d alarms: the test did not storm", (int)alarms);
    record_check(&r);
    record_free(&r);
    free_loop(loop);
}

BACKEND_TEST_OPTS(faults, eintr_storm_none_early_none_lost, .timeout = 60) {
    eintr_storm(p->name);
}

BACKEND_TEST_OPTS(faults, eintr_storm_with_millisecond_wait_fallback, .timeout = 60) {
    /* epoll.cc reads TICKLOOP_EPOLL_TIMERFD (relative waits) and
       TICKLOOP_EPOLL_PWAIT2 in tl_loop_new; io_uring ignores them. */
    cr_assert_eq(setenv("TICKLOOP_EPOLL_TIMERFD", "0", 1), 0);
    cr_assert_eq(setenv("TICKLOOP_EPOLL_PWAIT2", "0", 1), 0);
    eintr_storm(p->name);
}

/* ------------------------------------------------------------------------ */
/* epoll_pwait2 missing at run time                                         */
/* ------------------------------------------------------------------------ */

#ifndef __NR_epoll_pwait2
#define __NR_epoll_pwait2 441
#endif

/* Makes syscall nr fail with err (a seccomp filter, for the process). */
static int refuse_syscall(int nr, int err) {
    struct sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)nr, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (unsigned)err),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {.len = sizeof filter / sizeof filter[0], .filter = filter};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) return -errno;
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) < 0) return -errno;
    return 0;
}

/* Makes epoll_pwait2 fail with ENOSYS, as on a kernel before 5.11. */
static int refuse_epoll_pwait2(void) {
    return refuse_syscall(__NR_epoll_pwait2, ENOSYS);
}

/* In a child (a filter cannot be removed): an epoll loop whose first wait
 * gets ENOSYS must fall back to epoll_wait and still fire 50 sub-millisecond
 * timers never early, in order, without spinning. Exit code 0 on success. */
static int child_without_pwait2(const char *backend) {
    if (refuse_epoll_pwait2() < 0) return 10;
    if (syscall(__NR_epoll_pwait2, -1, NULL, 0, NULL, NULL, 0) != -1 || errno != ENOSYS) return 11;
    /* Timed waits are relative only without the absolute timerfd. */
    if (setenv("TICKLOOP_EPOLL_TIMERFD", "0", 1) != 0) return 10;
    tl_loop_options opts;
    tl_loop_options_init(&opts);
    opts.io = TL_IO_EPOLL;
    opts.timers = backend;
    tl_loop *loop;
    if (tl_loop_new(&loop, &opts) != 0) return 12;
    struct record r;
    record_init(&r, backend, 50);
    for (size_t i = 0; i < 50; i++) start_recorded(loop, &r, i, (i * 37) % 50 * 100 * US + 333);
    if (tl_loop_run(loop, TL_RUN_DEFAULT) != 0) return 13;
    if (r.fired != 50) return 14;
    for (size_t i = 0; i < 50; i++)
        if (r.seen[i] != 1) return 15;
    if (r.early) return 16;
    if (backend_exact(backend) && r.order_breaks) return 17;
    tl_loop_stats st;
    tl_loop_stats_get(loop, &st);
    /* Rounding the wait up to whole milliseconds: about one wakeup per ms of
       the 5 ms span, never one per loop pass. */
    if (st.iterations > 200) return 18;
    record_free(&r);
    return tl_loop_free(loop) == 0 ? 0 : 19;
}

BACKEND_TEST_OPTS(faults, epoll_pwait2_enosys_falls_back_at_run_time, .timeout = 60) {
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) _exit(child_without_pwait2(p->name));
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status), "%s: child died (signal %d)", p->name, WTERMSIG(status));
    cr_assert_eq(WEXITSTATUS(status), 0,
                 "%s: child step %d failed (10-11 seccomp, 12 new, 13 run, 14-15 lost or "
                 "repeated, 16 early, 17 order, 18 spinning, 19 free)",
                 p->name, WEXITSTATUS(status));
}

/* An epoll loop that cannot create its timerfd (EMFILE: the process is out
 * of descriptors) is still created and waits with epoll_pwait2: 50 timers
 * fire never early, in order, without spinning. Exit code 0 on success. */
static int child_without_timerfd(const char *backend) {
    if (refuse_syscall(__NR_timerfd_create, EMFILE) < 0) return 10;
    if (syscall(__NR_timerfd_create, CLOCK_MONOTONIC, 0) != -1 || errno != EMFILE) return 11;
    tl_loop_options opts;
    tl_loop_options_init(&opts);
    opts.io = TL_IO_EPOLL;
    opts.timers = backend;
    tl_loop *loop;
    if (tl_loop_new(&loop, &opts) != 0) return 12;
    struct record r;
    record_init(&r, backend, 50);
    for (size_t i = 0; i < 50; i++) start_recorded(loop, &r, i, (i * 37) % 50 * 100 * US + 333);
    if (tl_loop_run(loop, TL_RUN_DEFAULT) != 0) return 13;
    if (r.fired != 50) return 14;
    for (size_t i = 0; i < 50; i++)
        if (r.seen[i] != 1) return 15;
    if (r.early) return 16;
    if (backend_exact(backend) && r.order_breaks) return 17;
    tl_loop_stats st;
    tl_loop_stats_get(loop, &st);
    if (st.iterations > 200) return 18;
    record_free(&r);
    return tl_loop_free(loop) == 0 ? 0 : 19;
}

BACKEND_TEST_OPTS(faults, epoll_without_timerfd_waits_relative, .timeout = 60) {
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) _exit(child_without_timerfd(p->name));
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status), "%s: child died (signal %d)", p->name, WTERMSIG(status));
    cr_assert_eq(WEXITSTATUS(status), 0,
                 "%s: child step %d failed (10-11 seccomp, 12 new, 13 run, 14-15 lost or "
                 "repeated, 16 early, 17 order, 18 spinning, 19 free)",
                 p->name, WEXITSTATUS(status));
}

/* ------------------------------------------------------------------------ */
/* fd closed while registered, number reused                                */
/* ------------------------------------------------------------------------ */

struct io_seen {
    int calls;
    unsigned revents;
    char byte;
};

static void on_io_seen(tl_loop *loop, tl_io *w, unsigned revents) {
    (void)loop;
    struct io_seen *s = w->data;
    s->calls++;
    s->revents |= revents;
    if (revents & TL_READ) {
        ssize_t n = read(w->fd, &s->byte, 1);
        (void)n;
    }
}

static void run_for(tl_loop *loop, uint64_t ns) {
    uint64_t until = mono_ns() + ns;
    while (mono_ns() < until) cr_assert_geq(tl_loop_run(loop, TL_RUN_NOWAIT), 0);
}

Test(faults, fd_closed_while_registered_and_number_reused, .timeout = 30) {
    tl_loop *loop = new_loop(NULL);
    int old_pair[2], new_pair[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, old_pair), 0);
    struct io_seen old_seen = {0}, new_seen = {0};
    tl_io old_w, new_w;
    tl_io_init(&old_w, old_pair[0], on_io_seen, &old_seen);
    cr_assert_eq(tl_io_start(loop, &old_w, TL_READ), 0);
    cr_assert_eq(tl_loop_run(loop, TL_RUN_NOWAIT), 1); /* registered in the kernel */

    /* The mistake: close while registered. A duplicate (as a forked child or
       an io_uring poll would hold) keeps the old socket open, so the kernel
       may still report it: epoll keeps the registration of the old file
       under the old tag. */
    int number = old_pair[0];
    int keep = dup(old_pair[0]);
    cr_assert_geq(keep, 0);
    cr_assert_eq(close(old_pair[0]), 0);
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, new_pair), 0);
    if (new_pair[0] != number) {
        cr_assert_eq(dup2(new_pair[0], number), number);
        close(new_pair[0]);
        new_pair[0] = number;
    }
    /* The loop still holds the number for the old watcher. */
    tl_io_init(&new_w, number, on_io_seen, &new_seen);
    cr_assert_eq(tl_io_start(loop, &new_w, TL_READ), -EEXIST);
    /* Stopping the stale watcher succeeds although its fd is gone. */
    cr_assert_eq(tl_io_stop(loop, &old_w), 0);
    cr_assert_eq(tl_io_start(loop, &new_w, TL_READ), 0);

    /* Data for the old, closed socket must reach no one. */
    cr_assert_eq(send(old_pair[1], "o", 1, MSG_NOSIGNAL), 1);
    run_for(loop, 5 * MS);
    cr_assert_eq(old_seen.calls, 0, "the stopped watcher ran");
    cr_assert_eq(new_seen.calls, 0, "the new watcher ran for the old socket's data");

    /* Data for the new socket reaches the new watcher. */
    cr_assert_eq(write(new_pair[1], "n", 1), 1);
    for (int i = 0; i < 1000 && new_seen.calls == 0; i++)
        cr_assert_eq(tl_loop_run(loop, TL_RUN_ONCE), 1);
    cr_assert_eq(new_seen.calls, 1);
    cr_assert(new_seen.revents & TL_READ);
    cr_assert_eq(new_seen.byte, 'n');
    cr_assert_eq(old_seen.calls, 0);

    cr_assert_eq(tl_io_stop(loop, &new_w), 0);
    free_loop(loop);
    close(keep);
    close(old_pair[1]);
    close(new_pair[0]);
    close(new_pair[1]);
}

/* ------------------------------------------------------------------------ */
/* Callbacks that stop the loop, free their handle, start 1,000 timers      */
/* ------------------------------------------------------------------------ */

enum { kSpawn = 1000 };

struct spawner {
    struct record spawned;
    uint64_t spawn_iteration;
    size_t ran_in_spawn_iteration;
};

static void on_spawned(tl_loop *loop, tl_timer *t) {
    struct spawner *s = t->data;
    tl_loop_stats st;
    tl_loop_stats_get(loop, &st);
    if (st.iterations == s->spawn_iteration) s->ran_in_spawn_iteration++;
    record_fire(loop, &s->spawned, t);
}

static void on_spawn(tl_loop *loop, tl_timer *t) {
    struct spawner *s = t->data;
    tl_loop_stats st;
    tl_loop_stats_get(loop, &st);
    s->spawn_iteration = st.iterations;
    /* Every tenth due at once (they must wait for the next iteration, and
       then run in start order), the rest within 2 ms. */
    for (size_t i = 0; i < kSpawn; i++) {
        tl_timer *x = &s->spawned.timers[i];
        tl_timer_init(x, on_spawned, s);
        cr_assert_eq(tl_timer_start(loop, x, i % 10 ? (i * 7) % 2000 * US + 1 : 0, 0), 0);
        s->spawned.deadlines[i] = x->deadline;
    }
}

BACKEND_TEST(faults, callback_starts_1000_timers) {
    tl_loop *loop = new_loop(p->name);
    struct spawner s;
    record_init(&s.spawned, p->name, kSpawn);
    s.ran_in_spawn_iteration = 0;
    tl_timer spawn;
    tl_timer_init(&spawn, on_spawn, &s);
    cr_assert_eq(tl_timer_start(loop, &spawn, 100 * US, 0), 0);
    cr_assert_eq(tl_loop_run(loop, TL_RUN_DEFAULT), 0);
    cr_assert_eq(s.ran_in_spawn_iteration, 0,
                 "%s: %zu timers started by a callback ran in its own iteration", p->name,
                 s.ran_in_spawn_iteration);
    record_check(&s.spawned);
    record_free(&s.spawned);
    free_loop(loop);
}

static tl_timer stopper;

/* A repeating timer in its own allocation that frees itself on its 3rd run
 * and then starts the timer that stops the loop. */
static void on_self_free(tl_loop *loop, tl_timer *t) {
    int *fired = t->data;
    if (++*fired == 3) {
        cr_assert_eq(tl_timer_stop(loop, t), 0);
        memset(t, 0x5a, sizeof *t);
        free(t);
        cr_assert_eq(tl_timer_start(loop, &stopper, 100 * US, 0), 0);
    }
}

static void on_stop_loop(tl_loop *loop, tl_timer *t) {
    (*(int *)t->data)++;
    tl_loop_stop(loop);
}

BACKEND_TEST(faults, callbacks_stop_the_loop_and_free_their_handle) {
    tl_loop *loop = new_loop(p->name);
    int self_fired = 0, stops = 0;
    tl_timer *self = malloc(sizeof *self);
    cr_assert(self);
    tl_timer_init(self, on_self_free, &self_fired);
    cr_assert_eq(tl_timer_start(loop, self, 100 * US, 200 * US), 0);
    tl_timer idle;
    tl_timer_init(&stopper, on_stop_loop, &stops);
    tl_timer_init(&idle, on_stop_loop, &stops);
    cr_assert_eq(tl_timer_start(loop, &idle, 3600 * 1000 * MS, 0), 0);
    /* The stopper ends the DEFAULT run although the idle timer remains. */
    cr_assert_eq(tl_loop_run(loop, TL_RUN_DEFAULT), 1);
    cr_assert_eq(stops, 1);
    cr_assert_eq(self_fired, 3, "%s: the self-freeing timer ran %d times", p->name, self_fired);
    tl_loop_stats st;
    tl_loop_stats_get(loop, &st);
    cr_assert_eq(st.timers_active, 1);
    /* The stop was consumed: the next run waits again (here: NOWAIT). */
    cr_assert_eq(tl_loop_run(loop, TL_RUN_NOWAIT), 1);
    cr_assert_eq(tl_timer_stop(loop, &idle), 0);
    free_loop(loop);
}

/* ------------------------------------------------------------------------ */
/* Repeat shorter than the callback: no catch-up storm                      */
/* ------------------------------------------------------------------------ */

struct slow_repeat {
    uint64_t last_now, min_gap;
    int fires;
    int stacked; /* runs within one iteration */
    uint64_t last_iteration;
};

static void on_slow(tl_loop *loop, tl_timer *t) {
    struct slow_repeat *s = t->data;
    tl_loop_stats st;
    tl_loop_stats_get(loop, &st);
    if (s->fires && st.iterations == s->last_iteration) s->stacked++;
    s->last_iteration = st.iterations;
    uint64_t now = tl_now(loop);
    if (s->fires && now - s->last_now < s->min_gap) s->min_gap = now - s->last_now;
    s->last_now = now;
    cr_assert_eq(t->deadline, now + t->repeat, "re-armed at now + repeat before the callback");
    s->fires++;
    /* Three times longer than the repeat interval. */
    uint64_t until = mono_ns() + 3 * MS;
    while (mono_ns() < until) {
    }
    if (s->fires == 10) tl_timer_stop(loop, t);
}

BACKEND_TEST(faults, repeat_shorter_than_callback_does_not_catch_up) {
    tl_loop *loop = new_loop(p->name);
    struct slow_repeat s = {.min_gap = UINT64_MAX};
    tl_timer slow;
    tl_timer_init(&slow, on_slow, &s);
    cr_assert_eq(tl_timer_start(loop, &slow, 1 * MS, 1 * MS), 0);
    uint64_t start = mono_ns();
    cr_assert_eq(tl_loop_run(loop, TL_RUN_DEFAULT), 0);
    uint64_t elapsed = mono_ns() - start;
    cr_assert_eq(s.stacked, 0, "%s: the repeat ran %d extra times within an iteration", p->name,
                 s.stacked);
    /* Each run takes 3 ms, so ten take 30 ms or more; a catch-up of the
       missed 1 ms periods would run them back to back (gaps below 3 ms). */
    cr_assert_eq(s.fires, 10, "%s: %d runs", p->name, s.fires);
    cr_assert_geq(elapsed, 30 * MS, "%s: ten 3 ms runs in %llu ms", p->name,
                  (unsigned long long)(elapsed / MS));
    cr_assert_geq(s.min_gap, 3 * MS, "%s: two runs %llu ns apart, less than the callback takes",
                  p->name, (unsigned long long)s.min_gap);
    free_loop(loop);
}

/* ------------------------------------------------------------------------ */
/* tl_loop_free with active handles                                         */
/* ------------------------------------------------------------------------ */

static void count_timer(tl_loop *loop, tl_timer *t) {
    (void)loop;
    (*(int *)t->data)++;
}
static void count_async(tl_loop *loop, tl_async *a) {
    (void)loop;
    (*(int *)a->data)++;
}
static void count_signal(tl_loop *loop, tl_signal *s, int signo) {
    (void)loop;
    (void)signo;
    (*(int *)s->data)++;
}

Test(faults, loop_free_with_active_handles_is_busy_and_harmless) {
    tl_loop *loop = new_loop(NULL);
    int timer_runs = 0, async_runs = 0, signal_runs = 0;
    int sv[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
    tl_timer t;
    tl_io w;
    /* Zeroed although the API does not require it: tl_async_start and
       tl_signal_start read the handle's magic, which valgrind reports as a
       use of uninitialised memory otherwise. */
    tl_async a = {0};
    tl_signal s = {0};
    struct io_seen seen = {0};
    tl_timer_init(&t, count_timer, &timer_runs);
    tl_io_init(&w, sv[0], on_io_seen, &seen);
    cr_assert_eq(tl_timer_start(loop, &t, 1 * MS, 0), 0);
    cr_assert_eq(tl_io_start(loop, &w, TL_READ), 0);
    cr_assert_eq(tl_async_start(loop, &a, count_async, &async_runs), 0);
    cr_assert_eq(tl_signal_start(loop, &s, SIGUSR1, count_signal, &signal_runs), 0);

    /* Each kind alone keeps the loop busy. */
    cr_assert_eq(tl_loop_free(loop), -EBUSY);
    cr_assert_eq(tl_timer_stop(loop, &t), 0);
    cr_assert_eq(tl_loop_free(loop), -EBUSY);
    cr_assert_eq(tl_io_stop(loop, &w), 0);
    cr_assert_eq(tl_loop_free(loop), -EBUSY);
    cr_assert_eq(tl_async_stop(loop, &a), 0);
    cr_assert_eq(tl_loop_free(loop), -EBUSY);

    /* Untouched: everything works after the refusals. */
    cr_assert_eq(tl_timer_start(loop, &t, 1 * MS, 0), 0);
    cr_assert_eq(tl_io_start(loop, &w, TL_READ), 0);
    cr_assert_eq(tl_async_start(loop, &a, count_async, &async_runs), 0);
    cr_assert_eq(write(sv[1], "x", 1), 1);
    cr_assert_eq(tl_async_send(&a), 0);
    cr_assert_eq(raise(SIGUSR1), 0);
    for (int i = 0;
         i < 100 && (timer_runs == 0 || seen.calls == 0 || async_runs == 0 || signal_runs == 0);
         i++)
        cr_assert_geq(tl_loop_run(loop, TL_RUN_ONCE), 0);
    cr_assert_eq(timer_runs, 1);
    cr_assert_geq(seen.calls, 1);
    cr_assert_eq(async_runs, 1);
    cr_assert_eq(signal_runs, 1);
    cr_assert_eq(tl_loop_free(loop), -EBUSY);

    cr_assert_eq(tl_io_stop(loop, &w), 0);
    cr_assert_eq(tl_async_stop(loop, &a), 0);
    cr_assert_eq(tl_signal_stop(loop, &s), 0);
    free_loop(loop);
    close(sv[0]);
    close(sv[1]);
}

/* ------------------------------------------------------------------------ */
/* Deadlines near UINT64_MAX                                                */
/* ------------------------------------------------------------------------ */

BACKEND_TEST(faults, deadlines_near_uint64_max) {
    tl_loop *loop = new_loop(p->name);
    int far_runs = 0, near_runs = 0;
    uint64_t now = tl_now(loop);
    /* timeout -> expected deadline */
    const uint64_t timeouts[] = {UINT64_MAX,
                                 UINT64_MAX - now,
                                 UINT64_MAX - now - 1,
                                 UINT64_MAX - 1,
                                 UINT64_MAX / 2,
                                 UINT64_MAX - now - MS,
                                 UINT64_MAX - now - (1ull << 40),
                                 1ull << 63};
    enum { kFar = sizeof timeouts / sizeof timeouts[0] };
    tl_timer far[kFar], rep, near;
    for (size_t i = 0; i < kFar; i++) {
        tl_timer_init(&far[i], count_timer, &far_runs);
        uint64_t deadline = timeouts[i] > UINT64_MAX - now ? UINT64_MAX : now + timeouts[i];
        cr_assert_eq(tl_timer_start(loop, &far[i], timeouts[i], 0), 0);
        cr_assert_eq(far[i].deadline, deadline, "%s: timeout %llu: deadline %llu, not %llu",
                     p->name, (unsigned long long)timeouts[i], (unsigned long long)far[i].deadline,
                     (unsigned long long)deadline);
    }
    /* A repeat of "never" saturates on every re-arm. */
    tl_timer_init(&rep, count_timer, &near_runs);
    cr_assert_eq(tl_timer_start(loop, &rep, 200 * US, UINT64_MAX), 0);
    tl_timer_init(&near, count_timer, &near_runs);
    cr_assert_eq(tl_timer_start(loop, &near, 1 * MS, 0), 0);

    /* The wait is computed from next_expiry without overflow: ONCE returns
       when the near timers are due, neither at once forever nor never. */
    for (int i = 0; i < 100 && near_runs < 2; i++) cr_assert_eq(tl_loop_run(loop, TL_RUN_ONCE), 1);
    cr_assert_eq(near_runs, 2, "%s: near timers ran %d times", p->name, near_runs);
    cr_assert_eq(far_runs, 0, "%s: a timer near UINT64_MAX fired", p->name);
    cr_assert(tl_timer_active(&rep));
    cr_assert_eq(rep.deadline, UINT64_MAX, "%s: re-armed repeat deadline %llu", p->name,
                 (unsigned long long)rep.deadline);
    cr_assert_eq(tl_timer_again(loop, &rep), 0);
    cr_assert_eq(rep.deadline, UINT64_MAX);
    tl_loop_stats st;
    tl_loop_stats_get(loop, &st);
    cr_assert_eq(st.timers_active, kFar + 1);
    /* NOWAIT passes never fire them either. */
    for (int i = 0; i < 10; i++) cr_assert_eq(tl_loop_run(loop, TL_RUN_NOWAIT), 1);
    cr_assert_eq(far_runs, 0);
    for (size_t i = 0; i < kFar; i++) cr_assert_eq(tl_timer_stop(loop, &far[i]), 0);
    cr_assert_eq(tl_timer_stop(loop, &rep), 0);
    free_loop(loop);
}

/* ------------------------------------------------------------------------ */
/* fork()                                                                   */
/* ------------------------------------------------------------------------ */

/* The child: the parent's loop is not touched (not even freed: its epoll
 * instance is shared with the parent, so deregistering would remove the
 * parent's registrations). It creates its own loop, which must work. */
static int fork_child(int child_fd) {
    tl_loop *loop;
    if (tl_loop_new(&loop, NULL) != 0) return 20;
    int runs = 0;
    tl_timer t;
    tl_timer_init(&t, count_timer, &runs);
    if (tl_timer_start(loop, &t, 1 * MS, 0) != 0) return 21;
    struct io_seen seen = {0};
    tl_io w;
    tl_io_init(&w, child_fd, on_io_seen, &seen);
    if (tl_io_start(loop, &w, TL_READ) != 0) return 22;
    if (write(child_fd, "c", 1) != 1) return 23; /* the parent echoes it */
    for (int i = 0; i < 1000 && (runs == 0 || seen.calls == 0); i++)
        if (tl_loop_run(loop, TL_RUN_ONCE) < 0) return 24;
    if (runs != 1 || seen.calls == 0 || seen.byte != 'C') return 25;
    if (tl_io_stop(loop, &w) != 0) return 26;
    return tl_loop_free(loop) == 0 ? 0 : 27;
}

struct echo {
    int calls;
};

static void on_parent_io(tl_loop *loop, tl_io *w, unsigned revents) {
    (void)loop;
    struct echo *e = w->data;
    char c;
    if ((revents & TL_READ) && read(w->fd, &c, 1) == 1) {
        e->calls++;
        c = (char)(c - 'a' + 'A');
        cr_assert_eq(write(w->fd, &c, 1), 1);
    }
}

/* Static, so that the parent's loop, which the child must not free, is still
 * reachable (not a leak) when valgrind checks the child at its exit. */
static tl_loop *fork_parent_loop;

Test(faults, fork_child_creates_its_own_loop_parent_keeps_working, .timeout = 30) {
    tl_loop *loop = fork_parent_loop = new_loop(NULL);
    int sv[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    struct echo echo = {0};
    tl_io w;
    tl_io_init(&w, sv[0], on_parent_io, &echo);
    cr_assert_eq(tl_io_start(loop, &w, TL_READ), 0);
    int runs = 0, async_runs = 0;
    tl_timer t;
    tl_timer_init(&t, count_timer, &runs);
    cr_assert_eq(tl_timer_start(loop, &t, 2 * MS, 2 * MS), 0);
    tl_async a = {0}; /* zeroed: see loop_free_with_active_handles_is_busy_and_harmless */
    cr_assert_eq(tl_async_start(loop, &a, count_async, &async_runs), 0);
    cr_assert_eq(tl_loop_run(loop, TL_RUN_NOWAIT), 1); /* registrations in the kernel */

    fflush(NULL);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        close(sv[0]);
        _exit(fork_child(sv[1]));
    }
    /* The parent serves the child's byte and keeps its timer and async. */
    uint64_t until = mono_ns() + 5000 * MS;
    int status = 0;
    pid_t done = 0;
    while (done == 0 && mono_ns() < until) {
        cr_assert_eq(tl_loop_run(loop, TL_RUN_ONCE), 1);
        done = waitpid(pid, &status, WNOHANG);
    }
    if (done == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        cr_assert_fail("the child did not finish");
    }
    cr_assert(WIFEXITED(status), "child died (signal %d)", WTERMSIG(status));
    cr_assert_eq(WEXITSTATUS(status), 0, "child step %d failed (20-27)", WEXITSTATUS(status));
    cr_assert_eq(echo.calls, 1);

    /* After the child's exit (its copies of the descriptors closed): */
    int before = runs;
    cr_assert_eq(tl_async_send(&a), 0);
    for (int i = 0; i < 1000 && (runs < before + 2 || async_runs == 0); i++)
        cr_assert_eq(tl_loop_run(loop, TL_RUN_ONCE), 1);
    cr_assert_geq(runs, before + 2, "the parent's repeating timer stopped");
    cr_assert_eq(async_runs, 1);

    cr_assert_eq(tl_timer_stop(loop, &t), 0);
    cr_assert_eq(tl_io_stop(loop, &w), 0);
    cr_assert_eq(tl_async_stop(loop, &a), 0);
    free_loop(loop);
    close(sv[0]);
    close(sv[1]);
}

/* ------------------------------------------------------------------------ */
/* Regression, found by loop_fuzz                                           */
/* ------------------------------------------------------------------------ */

static char fresh_order[4];
static int fresh_n;
static tl_timer fresh_a, fresh_b;
static void on_fresh(tl_loop *loop, tl_timer *t) {
    (void)loop;
    if (fresh_n < 3) fresh_order[fresh_n++] = t == &fresh_a ? 'A' : 'B';
}
static void on_start_two(tl_loop *loop, tl_timer *t) {
    (void)t;
    tl_timer_start(loop, &fresh_a, 0, 0);
    tl_timer_start(loop, &fresh_b, 0, 0);
}

/* Two timers started with timeout 0 from one callback share a deadline, so
 * the heaps owe them start order. The dispatch pops A, finds it fresh and puts
 * it back with its insertion number, so it still runs before B. */
BACKEND_TEST(faults, fresh_restarts_keep_start_order) {
    if (!backend_exact(p->name)) cr_skip_test("wheels order by tick only");
    tl_loop *loop = new_loop(p->name);
    tl_timer starter;
    tl_timer_init(&fresh_a, on_fresh, NULL);
    tl_timer_init(&fresh_b, on_fresh, NULL);
    tl_timer_init(&starter, on_start_two, NULL);
    cr_assert_eq(tl_timer_start(loop, &starter, 0, 0), 0);
    cr_assert_eq(tl_loop_run(loop, TL_RUN_DEFAULT), 0);
    cr_assert_str_eq(fresh_order, "AB", "%s: ran %s", p->name, fresh_order);
    free_loop(loop);
}
