/* SPDX-License-Identifier: MIT */
/*
 * I/O watchers through the loop, and a signal handler interrupting the
 * loop's wait (asyncs: loop_async.c, signal watchers: loop_signal.c). The I/O backend is the one
 * TICKLOOP_IO selects (meson registers this suite once per backend).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "loop_helpers.h"

/* ------------------------------------------------------------------------ */
/* Readiness                                                                */
/* ------------------------------------------------------------------------ */

Test(io, read_readiness_is_level_triggered) {
    tl_loop *loop = new_loop();
    int fds[2];
    make_pair(fds);
    struct io_seen s = {0};
    tl_io w;
    tl_io_init(&w, fds[0], on_io_seen, &s);
    cr_assert(w.fd == fds[0]);
    cr_assert(tl_io_start(loop, &w, TL_READ) == 0);
    cr_assert(w.events == TL_READ);
    cr_assert(tl_loop_free(loop) == -EBUSY, "an active watcher");
    /* Nothing to read: no callback. */
    cr_assert(tl_loop_run(loop, TL_RUN_NOWAIT) == 1);
    cr_assert(s.calls == 0, "called with revents %#x on an empty socket", s.revents);
    /* Readable: the callback runs, and again next iteration while unread. */
    put(fds[1]);
    cr_assert(tl_loop_run(loop, TL_RUN_ONCE) == 1);
    cr_assert(s.calls == 1 && s.revents == TL_READ, "%d calls, revents %#x", s.calls, s.revents);
    cr_assert(tl_loop_run(loop, TL_RUN_NOWAIT) == 1);
    cr_assert(s.calls == 2, "level-triggered: still readable, %d calls", s.calls);
    char c;
    cr_assert(read(fds[0], &c, 1) == 1);
    cr_assert(tl_loop_run(loop, TL_RUN_NOWAIT) == 1);
    cr_assert(s.calls == 2, "called after the data was read");
    tl_loop_stats st;
    tl_loop_stats_get(loop, &st);
    cr_assert(st.io_events == 2, "io_events %llu", (unsigned long long)st.io_events);
    cr_assert(tl_io_stop(loop, &w) == 0);
    cr_assert(tl_loop_run(loop, TL_RUN_DEFAULT) == 0, "a stopped watcher keeps nothing alive");
    close(fds[0]);
    close(fds[1]);
    free_loop(loop);
}

static void *write_later(void *arg) {
    struct timespec pause = {0, 5 * (long)MS};
    nanosleep(&pause, NULL);
    return write(*(int *)arg, "x", 1) == 1 ? NULL : (void *)1;
}

Test(io, once_blocks_until_readable) {
    tl_loop *loop = new_loop();
    int fds[2];
    make_pair(fds);
    struct io_seen s = {0};
    tl_io w;
    tl_io_init(&w, fds[0], on_io_seen, &s);
    cr_assert(tl_io_start(loop, &w, TL_READ) == 0);
    int timed_out = 0;
    tl_timer failsafe;
    tl_timer_init(&failsafe, on_failsafe, &timed_out);
    cr_assert(tl_timer_start(loop, &failsafe, 5000 * MS, 0) == 0);
    /* Another thread writes to the peer 5 ms from now. */
    uint64_t begin = mono_ns();
    pthread_t writer;
    cr_assert(pthread_create(&writer, NULL, write_later, &fds[1]) == 0);
    while (s.calls == 0 && !timed_out) cr_assert(tl_loop_run(loop, TL_RUN_ONCE) == 1);
    void *ret;
    cr_assert(pthread_join(writer, &ret) == 0 && ret == NULL);
    cr_assert(!timed_out, "no readiness within 5 s");
    cr_assert(s.revents & TL_READ);
    cr_assert(mono_ns() - begin >= 5 * MS, "ONCE returned before the data was written");
    cr_assert(tl_timer_stop(loop, &failsafe) == 0);
    cr_assert(tl_io_stop(loop, &w) == 0);
    close(fds[0]);
    close(fds[1]);
    free_loop(loop);
}

Test(io, write_readiness_and_changing_events) {
    tl_loop *loop = new_loop();
    int fds[2];
    make_pair(fds);
    struct io_seen s = {0};
    tl_io w;
    tl_io_init(&w, fds[0], on_io_seen, &s);
    cr_assert(tl_io_start(loop, &w, TL_WRITE) == 0);
    cr_assert(tl_loop_run(loop, TL_RUN_NOWAIT) == 1);
    cr_assert(s.calls == 1 && s.revents == TL_WRITE, "%d calls, revents %#x", s.calls, s.revents);

    /* Readable and writable, watching WRITE only: READ is not reported. */
    put(fds[1]);
    cr_assert(tl_loop_run(loop, TL_RUN_NOWAIT) == 1);
    cr_assert(s.revents == TL_WRITE, "revents %#x while watching WRITE", s.revents);

    /* A second start on the active watcher changes its events. */
    cr_assert(tl_io_start(loop, &w, TL_READ) == 0);
    cr_assert(w.events == TL_READ);
    s.calls = 0;
    cr_assert(tl_loop_run(loop, TL_RUN_NOWAIT) == 1);
    cr_assert(s.calls == 1 && s.revents == TL_READ,
              "%d calls, revents %#x after switching to "
              "READ",
              s.calls, s.revents);
    cr_assert(tl_io_start(loop, &w, TL_READ | TL_WRITE) == 0);
    cr_assert(tl_loop_run(loop, TL_RUN_NOWAIT) == 1);
    cr_assert(s.revents == (TL_READ | TL_WRITE), "revents %#x watching both", s.revents);
    /* The same events again is fine. */
    cr_assert(tl_io_start(loop, &w, TL_READ | TL_WRITE) == 0);

    cr_assert(tl_io_stop(loop, &w) == 0);
    cr_assert(tl_io_stop(loop, &w) == 0, "stop of an inactive watcher");
    close(fds[0]);
    close(fds[1]);
    free_loop(loop);
}

Test(io, hangup_after_peer_closes) {
    tl_loop *loop = new_loop();
    int fds[2];
    make_pair(fds);
    struct io_seen s = {0};
    tl_io w;
    tl_io_init(&w, fds[0], on_io_seen, &s);
    cr_assert(tl_io_start(loop, &w, TL_READ) == 0);
    close(fds[1]);
    cr_assert(tl_loop_run(loop, TL_RUN_ONCE) == 1);
    cr_assert(s.calls == 1, "%d calls", s.calls);
    cr_assert(s.revents & (TL_HUP | TL_ERROR), "revents %#x after the peer closed", s.revents);
    cr_assert(s.revents & TL_HUP, "revents %#x: no TL_HUP", s.revents);
    cr_assert(tl_io_stop(loop, &w) == 0);
    close(fds[0]);

    int fds2[2];
    make_pair(fds2);
    /* TL_HUP and TL_ERROR are reported even when only WRITE is asked for:
       fill the socket so it is not writable, then close the peer. */
    while (write(fds2[0], "xxxxxxxxxxxxxxxx", 16) > 0) {
    }
    struct io_seen s2 = {0};
    tl_io w2;
    tl_io_init(&w2, fds2[0], on_io_seen, &s2);
    cr_assert(tl_io_start(loop, &w2, TL_WRITE) == 0);
    cr_assert(tl_loop_run(loop, TL_RUN_NOWAIT) == 1);
    cr_assert(s2.calls == 0, "full socket reported %#x", s2.revents);
    close(fds2[1]);
    cr_assert(tl_loop_run(loop, TL_RUN_ONCE) == 1);
    cr_assert(s2.calls >= 1 && (s2.all & (TL_HUP | TL_ERROR)),
              "watching WRITE, peer closed: %d calls, revents %#x", s2.calls, s2.all);
    cr_assert(tl_io_stop(loop, &w2) == 0);
    close(fds2[0]);
    free_loop(loop);
}

Test(io, second_watcher_on_same_fd_is_eexist) {
    tl_loop *loop = new_loop();
    int fds[2];
    make_pair(fds);
    struct io_seen s = {0};
    tl_io a, b;
    tl_io_init(&a, fds[0], on_io_seen, &s);
    tl_io_init(&b, fds[0], on_io_seen, &s);
    cr_assert(tl_io_start(loop, &a, TL_READ) == 0);
    cr_assert(tl_io_start(loop, &b, TL_WRITE) == -EEXIST);
    cr_assert(tl_io_stop(loop, &b) == 0, "stop of the refused (inactive) watcher");
    /* a is untouched: still reports READ. */
    put(fds[1]);
    cr_assert(tl_loop_run(loop, TL_RUN_NOWAIT) == 1);
    cr_assert(s.calls == 1 && s.revents == TL_READ);
    /* Once a stops, b may take the fd. */
    cr_assert(tl_io_stop(loop, &a) == 0);
    cr_assert(tl_io_start(loop, &b, TL_WRITE) == 0);
    cr_assert(tl_loop_run(loop, TL_RUN_NOWAIT) == 1);
    cr_assert(s.calls == 2 && s.revents == TL_WRITE);
    cr_assert(tl_io_stop(loop, &b) == 0);
    close(fds[0]);
    close(fds[1]);
    free_loop(loop);
}

/* Two ready watchers; whichever runs first stops the other (and, in the
 * second test, frees it and puts a new watcher on a new socket that reuses
 * its fd number). The stopped one's collected event must be dropped. */
struct rivals {
    tl_io *w[2];
    int fds[2][2];
    int calls[2];
    int free_and_reuse;
    tl_io *replacement;
    struct io_seen replacement_seen;
    int reused_fd;
};

static void on_rival(tl_loop *loop, tl_io *w, unsigned revents) {
    (void)revents;
    struct rivals *r = w->data;
    int me = w == r->w[0] ? 0 : 1;
    r->calls[me]++;
    tl_io *other = r->w[!me];
    if (!other) return;
    cr_assert(tl_io_stop(loop, other) == 0);
    if (!r->free_and_reuse) return;
    int old_fd = other->fd;
    free(other);
    r->w[!me] = NULL;
    close(r->fds[!me][0]);
    close(r->fds[!me][1]);
    /* The lowest free numbers: the new pair usually reuses old_fd. Its end
       is not readable, so any call for it in this iteration is the stale
       event of the freed watcher. */
    make_pair(r->fds[!me]);
    int fresh = r->fds[!me][0] == old_fd ? 0 : 1;
    r->reused_fd = r->fds[!me][fresh] == old_fd;
    r->replacement = malloc(sizeof *r->replacement);
    cr_assert(r->replacement);
    tl_io_init(r->replacement, r->fds[!me][fresh], on_io_seen, &r->replacement_seen);
    cr_assert(tl_io_start(loop, r->replacement, TL_READ) == 0);
}

static void check_rivals(int free_and_reuse) {
    tl_loop *loop = new_loop();
    struct rivals r = {.free_and_reuse = free_and_reuse};
    for (int i = 0; i < 2; ++i) {
        make_pair(r.fds[i]);
        r.w[i] = malloc(sizeof(tl_io));
        cr_assert(r.w[i]);
        tl_io_init(r.w[i], r.fds[i][0], on_rival, &r);
        cr_assert(tl_io_start(loop, r.w[i], TL_READ) == 0);
        put(r.fds[i][1]);
    }
    /* Both ready before the wait: both are collected by the same wait. */
    cr_assert(tl_loop_run(loop, TL_RUN_NOWAIT) == 1);
    cr_assert(r.calls[0] + r.calls[1] == 1,
              "%d and %d calls: a watcher stopped by an earlier callback was called", r.calls[0],
              r.calls[1]);
    if (free_and_reuse) {
        cr_assert(r.replacement_seen.calls == 0,
                  "the new watcher on fd %d (reused: %d) got the old watcher's event %#x",
                  r.replacement->fd, r.reused_fd, r.replacement_seen.revents);
        cr_assert(tl_io_stop(loop, r.replacement) == 0);
        free(r.replacement);
    }
    for (int i = 0; i < 2; ++i) {
        if (r.w[i]) {
            cr_assert(tl_io_stop(loop, r.w[i]) == 0);
            free(r.w[i]);
        }
        close(r.fds[i][0]);
        close(r.fds[i][1]);
    }
    free_loop(loop);
}

Test(io, stopped_by_earlier_callback_is_not_called) {
    check_rivals(0);
}

Test(io, stopped_and_freed_by_earlier_callback_is_not_called) {
    check_rivals(1);
}

Test(io, bad_descriptors) {
    tl_loop *loop = new_loop();
    struct io_seen s = {0};
    tl_io w;
    tl_io_init(&w, -1, on_io_seen, &s);
    int r = tl_io_start(loop, &w, TL_READ);
    cr_assert(r < 0, "fd -1: %d", r);
    cr_assert(r == -EBADF, "fd -1: %d (%s), tickloop.h says -EBADF", r, tl_strerror(r));
    /* A closed descriptor. */
    int fds[2];
    make_pair(fds);
    close(fds[1]);
    tl_io_init(&w, fds[1], on_io_seen, &s);
    cr_assert(tl_io_start(loop, &w, TL_READ) == -EBADF);
    /* A regular file cannot be polled. */
    char path[] = "/tmp/tickloop-test-XXXXXX";
    int file = mkstemp(path);
    cr_assert(file >= 0);
    unlink(path);
    tl_io_init(&w, file, on_io_seen, &s);
    r = tl_io_start(loop, &w, TL_READ);
    if (r == 0) tl_io_stop(loop, &w); /* so that a failure is reported alone */
    close(file);
    close(fds[0]);
    cr_assert(r == -EPERM, "regular file: %d (%s), tickloop.h says -EPERM", r, tl_strerror(r));
    cr_assert(tl_loop_run(loop, TL_RUN_DEFAULT) == 0, "refused watchers keep nothing alive");
    free_loop(loop);
}

Test(io, high_descriptor_numbers) {
    tl_loop *loop = new_loop();
    int fds[2];
    make_pair(fds);
    /* The loop's fd table grows to reach them. */
    const int high[] = {1000, 5000, 300};
    struct io_seen s[3] = {{0}};
    tl_io w[3];
    for (int i = 0; i < 3; ++i) {
        cr_assert(dup2(fds[0], high[i]) == high[i], "dup2: %s", strerror(errno));
        tl_io_init(&w[i], high[i], on_io_seen, &s[i]);
        cr_assert(tl_io_start(loop, &w[i], TL_READ) == 0);
    }
    put(fds[1]);
    cr_assert(tl_loop_run(loop, TL_RUN_ONCE) == 1);
    for (int i = 0; i < 3; ++i)
        cr_assert(s[i].calls == 1 && s[i].revents == TL_READ, "fd %d: %d calls", high[i],
                  s[i].calls);
    for (int i = 0; i < 3; ++i) {
        cr_assert(tl_io_stop(loop, &w[i]) == 0);
        close(high[i]);
    }
    close(fds[0]);
    close(fds[1]);
    free_loop(loop);
}

/* More ready descriptors than one wait collects (the loop takes 256 at a
 * time): level triggering reports the rest in the next iterations. */
#define MANY_PAIRS 400

struct many {
    int fds[MANY_PAIRS][2];
    tl_io w[MANY_PAIRS];
    int calls[MANY_PAIRS];
    int drained;
};

static void on_many(tl_loop *loop, tl_io *w, unsigned revents) {
    struct many *m = w->data;
    int i = (int)(w - m->w);
    cr_assert(revents == TL_READ, "revents %#x", revents);
    char c;
    cr_assert(read(w->fd, &c, 1) == 1, "called for fd %d with nothing to read", w->fd);
    m->calls[i]++;
    m->drained++;
    cr_assert(tl_io_stop(loop, w) == 0);
}

Test(io, more_ready_than_one_wait_collects) {
    tl_loop *loop = new_loop();
    static struct many m;
    for (int i = 0; i < MANY_PAIRS; ++i) {
        make_pair(m.fds[i]);
        tl_io_init(&m.w[i], m.fds[i][0], on_many, &m);
        cr_assert(tl_io_start(loop, &m.w[i], TL_READ) == 0);
        put(m.fds[i][1]);
    }
    cr_assert(tl_loop_run(loop, TL_RUN_DEFAULT) == 0, "every watcher stops itself");
    cr_assert(m.drained == MANY_PAIRS, "%d of %d served", m.drained, MANY_PAIRS);
    for (int i = 0; i < MANY_PAIRS; ++i) {
        cr_assert(m.calls[i] == 1, "watcher %d: %d calls", i, m.calls[i]);
        close(m.fds[i][0]);
        close(m.fds[i][1]);
    }
    tl_loop_stats st;
    tl_loop_stats_get(loop, &st);
    cr_assert(st.io_events == MANY_PAIRS);
    cr_assert(st.iterations >= 2, "%d ready fds in %llu iteration(s)", MANY_PAIRS,
              (unsigned long long)st.iterations);
    free_loop(loop);
}

/* ------------------------------------------------------------------------ */
/* A signal handler interrupting the wait                                   */
/* ------------------------------------------------------------------------ */

static volatile sig_atomic_t alarms;

static void on_sigalrm(int signo) {
    (void)signo;
    alarms++;
}

static void on_timer_fired(tl_loop *loop, tl_timer *t) {
    (void)loop;
    cr_assert(mono_ns() >= t->deadline, "fired early after EINTR");
    ++*(int *)t->data;
}

static void check_eintr(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigalrm;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0; /* no SA_RESTART: the wait fails with EINTR */
    cr_assert(sigaction(SIGALRM, &sa, NULL) == 0);

    tl_loop *loop = new_loop();
    int fired = 0;
    tl_timer t;
    tl_timer_init(&t, on_timer_fired, &fired);
    cr_assert(tl_timer_start(loop, &t, 200 * MS, 0) == 0);
    uint64_t deadline = t.deadline;
    /* An alarm every 10 ms, many inside the 200 ms wait: at least one lands
       in it even when valgrind and a loaded machine slow the rest down. */
    struct itimerval it = {{0, 10000}, {0, 10000}};
    cr_assert(setitimer(ITIMER_REAL, &it, NULL) == 0);
    int r = tl_loop_run(loop, TL_RUN_DEFAULT);
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    cr_assert(r == 0, "tl_loop_run returned %d (%s) after a signal", r, tl_strerror(r));
    cr_assert(alarms >= 1, "no SIGALRM arrived during the wait: the test did not test EINTR");
    cr_assert(fired == 1);
    cr_assert(mono_ns() >= deadline);
    free_loop(loop);
}

Test(loop, eintr_during_wait_is_not_an_error) {
    check_eintr();
}

Test(loop, eintr_during_millisecond_wait_fallback) {
    /* epoll.cc: TICKLOOP_EPOLL_TIMERFD=0 selects relative waits and
       TICKLOOP_EPOLL_PWAIT2=0 forces epoll_wait among them, with a rounded-up
       millisecond timeout; other I/O backends ignore both. */
    cr_assert(setenv("TICKLOOP_EPOLL_TIMERFD", "0", 1) == 0);
    cr_assert(setenv("TICKLOOP_EPOLL_PWAIT2", "0", 1) == 0);
    check_eintr();
}
