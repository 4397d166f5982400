/* SPDX-License-Identifier: MIT */
/*
 * I/O watchers, async wakeups and signal watchers through the loop, and a
 * signal handler interrupting the loop's wait. The I/O backend is the one
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
/* Async                                                                    */
/* ------------------------------------------------------------------------ */

struct async_state {
    tl_async async;
    int calls;
    int stop_at;
};

static void on_async(tl_loop *loop, tl_async *a) {
    struct async_state *st = a->data;
    if (++st->calls == st->stop_at) cr_assert(tl_async_stop(loop, a) == 0);
}

Test(async, sends_before_run_coalesce) {
    tl_loop *loop = new_loop();
    struct async_state st = {0};
    memset(&st.async, 0xa5, sizeof st.async); /* need not be initialised */
    cr_assert(tl_async_start(loop, &st.async, on_async, &st) == 0);
    cr_assert(st.async.data == &st);
    cr_assert(tl_loop_run(loop, TL_RUN_NOWAIT) == 1);
    cr_assert(st.calls == 0, "called without a send");
    for (int i = 0; i < 10; ++i) cr_assert(tl_async_send(&st.async) == 0);
    cr_assert(tl_loop_run(loop, TL_RUN_ONCE) == 1);
    cr_assert(st.calls == 1, "10 sends before one iteration: %d callbacks", st.calls);
    cr_assert(tl_loop_run(loop, TL_RUN_NOWAIT) == 1);
    cr_assert(st.calls == 1, "a callback without a new send");
    cr_assert(tl_async_send(&st.async) == 0);
    st.stop_at = 2;
    cr_assert(tl_loop_run(loop, TL_RUN_DEFAULT) == 0, "stopped in its callback: nothing left");
    cr_assert(st.calls == 2);
    cr_assert(tl_async_send(&st.async) == -EINVAL, "send after stop");
    free_loop(loop);
}

#define THREAD_SENDS 1000

struct async_thread {
    tl_async async;
    int calls;
    int saw_last; /* a callback ran after observing every send */
    int sent;     /* sends started by the thread, atomically */
};

static void *send_from_thread(void *arg) {
    struct async_thread *at = arg;
    for (int i = 0; i < THREAD_SENDS; ++i) {
        __atomic_store_n(&at->sent, i + 1, __ATOMIC_SEQ_CST);
        if (tl_async_send(&at->async) != 0) return (void *)1;
        if (i % 100 == 0) sched_yield();
    }
    return NULL;
}

static void on_thread_async(tl_loop *loop, tl_async *a) {
    (void)loop;
    struct async_thread *at = a->data;
    at->calls++;
    /* Only if this callback started after the last send began: then that
       send either was consumed by this call or will cause another one. */
    if (__atomic_load_n(&at->sent, __ATOMIC_SEQ_CST) == THREAD_SENDS) at->saw_last = 1;
}

Test(async, sends_from_another_thread_coalesce_and_none_is_lost) {
    tl_loop *loop = new_loop();
    static struct async_thread at;
    cr_assert(tl_async_start(loop, &at.async, on_thread_async, &at) == 0);
    int timed_out = 0;
    tl_timer failsafe;
    tl_timer_init(&failsafe, on_failsafe, &timed_out);
    cr_assert(tl_timer_start(loop, &failsafe, 10000 * MS, 0) == 0);
    pthread_t thread;
    cr_assert(pthread_create(&thread, NULL, send_from_thread, &at) == 0);
    /* Until a callback has run after the thread's last send. */
    while (!at.saw_last && !timed_out) cr_assert(tl_loop_run(loop, TL_RUN_ONCE) == 1);
    void *ret;
    cr_assert(pthread_join(thread, &ret) == 0);
    cr_assert(ret == NULL, "tl_async_send failed in the thread");
    cr_assert(!timed_out, "the last of %d sends was never followed by a callback (%d calls)",
              THREAD_SENDS, at.calls);
    /* A send that raced with the last callback may still be pending. */
    for (int i = 0; i < 3; ++i) cr_assert(tl_loop_run(loop, TL_RUN_NOWAIT) == 1);
    cr_assert(at.calls >= 1 && at.calls <= THREAD_SENDS, "%d callbacks for %d sends", at.calls,
              THREAD_SENDS);
    cr_assert(tl_timer_stop(loop, &failsafe) == 0);
    cr_assert(tl_async_stop(loop, &at.async) == 0);
    free_loop(loop);
}

/* Two pending asyncs; whichever runs first stops and frees the other. */
struct async_rivals {
    tl_async *a[2];
    int calls;
};

static void on_async_rival(tl_loop *loop, tl_async *a) {
    struct async_rivals *r = a->data;
    r->calls++;
    int me = a == r->a[0] ? 0 : 1;
    if (r->a[!me]) {
        cr_assert(tl_async_stop(loop, r->a[!me]) == 0);
        free(r->a[!me]);
        r->a[!me] = NULL;
    }
}

Test(async, stopped_and_freed_by_earlier_callback_is_not_called) {
    tl_loop *loop = new_loop();
    struct async_rivals r = {0};
    for (int i = 0; i < 2; ++i) {
        r.a[i] = malloc(sizeof(tl_async));
        cr_assert(r.a[i]);
        cr_assert(tl_async_start(loop, r.a[i], on_async_rival, &r) == 0);
    }
    for (int i = 0; i < 2; ++i) cr_assert(tl_async_send(r.a[i]) == 0);
    cr_assert(tl_loop_run(loop, TL_RUN_ONCE) == 1);
    cr_assert(r.calls == 1, "%d callbacks: a stopped async was called", r.calls);
    int left = r.a[0] ? 0 : 1;
    cr_assert(r.a[left] && !r.a[!left]);
    cr_assert(tl_async_stop(loop, r.a[left]) == 0);
    free(r.a[left]);
    free_loop(loop);
}

Test(async, keeps_loop_alive_and_free_is_busy) {
    tl_loop *loop = new_loop();
    struct async_state st = {0};
    cr_assert(tl_async_start(loop, &st.async, on_async, &st) == 0);
    cr_assert(tl_loop_free(loop) == -EBUSY);
    cr_assert(tl_loop_run(loop, TL_RUN_NOWAIT) == 1, "an active async keeps the loop alive");
    cr_assert(tl_async_stop(loop, &st.async) == 0);
    cr_assert(tl_async_stop(loop, &st.async) == 0, "stop of an inactive async");
    cr_assert(tl_loop_run(loop, TL_RUN_NOWAIT) == 0);
    /* Restartable after stop. */
    cr_assert(tl_async_start(loop, &st.async, on_async, &st) == 0);
    cr_assert(tl_async_stop(loop, &st.async) == 0);
    free_loop(loop);
}

/* ------------------------------------------------------------------------ */
/* Signals                                                                  */
/* ------------------------------------------------------------------------ */

struct sig_state {
    tl_signal sig;
    int calls;
    int signo;
};

static void on_signal(tl_loop *loop, tl_signal *s, int signo) {
    (void)loop;
    struct sig_state *st = s->data;
    st->calls++;
    st->signo = signo;
}

static int blocked(int signo) {
    sigset_t cur;
    cr_assert(pthread_sigmask(SIG_BLOCK, NULL, &cur) == 0);
    return sigismember(&cur, signo);
}

Test(signal, delivers_signo_and_restores_mask) {
    tl_loop *loop = new_loop();
    cr_assert(!blocked(SIGUSR1), "SIGUSR1 blocked before the test");
    struct sig_state st = {0};
    cr_assert(tl_signal_start(loop, &st.sig, SIGUSR1, on_signal, &st) == 0);
    cr_assert(blocked(SIGUSR1), "an active watcher blocks its signal");
    int timed_out = 0;
    tl_timer failsafe;
    tl_timer_init(&failsafe, on_failsafe, &timed_out);
    cr_assert(tl_timer_start(loop, &failsafe, 5000 * MS, 0) == 0);
    cr_assert(raise(SIGUSR1) == 0);
    while (st.calls == 0 && !timed_out) cr_assert(tl_loop_run(loop, TL_RUN_ONCE) == 1);
    cr_assert(st.calls == 1, "%d callbacks for one raise", st.calls);
    cr_assert(st.signo == SIGUSR1, "signo %d", st.signo);
    cr_assert(tl_loop_free(loop) == -EBUSY);
    cr_assert(tl_signal_stop(loop, &st.sig) == 0);
    cr_assert(!blocked(SIGUSR1), "the last stop restores the old mask");
    cr_assert(tl_signal_stop(loop, &st.sig) == 0, "stop of an inactive watcher");
    cr_assert(tl_timer_stop(loop, &failsafe) == 0);
    free_loop(loop);
}

Test(signal, two_watchers_both_run_and_preblocked_stays_blocked) {
    tl_loop *loop = new_loop();
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, SIGUSR2);
    cr_assert(pthread_sigmask(SIG_BLOCK, &one, NULL) == 0);
    struct sig_state a = {0}, b = {0};
    cr_assert(tl_signal_start(loop, &a.sig, SIGUSR2, on_signal, &a) == 0);
    cr_assert(tl_signal_start(loop, &b.sig, SIGUSR2, on_signal, &b) == 0);
    cr_assert(tl_signal_start(loop, &a.sig, SIGUSR2, on_signal, &a) == -EBUSY);
    int timed_out = 0;
    tl_timer failsafe;
    tl_timer_init(&failsafe, on_failsafe, &timed_out);
    cr_assert(tl_timer_start(loop, &failsafe, 5000 * MS, 0) == 0);
    cr_assert(raise(SIGUSR2) == 0);
    while ((a.calls == 0 || b.calls == 0) && !timed_out)
        cr_assert(tl_loop_run(loop, TL_RUN_ONCE) == 1);
    cr_assert(a.calls == 1 && b.calls == 1, "%d and %d callbacks", a.calls, b.calls);
    cr_assert(tl_signal_stop(loop, &a.sig) == 0);
    cr_assert(blocked(SIGUSR2), "one watcher remains");
    cr_assert(tl_signal_stop(loop, &b.sig) == 0);
    cr_assert(blocked(SIGUSR2), "SIGUSR2 was blocked before the loop: it stays blocked");
    cr_assert(tl_timer_stop(loop, &failsafe) == 0);
    free_loop(loop);
}

/* Two watchers of one signal; whichever runs first stops and frees the other. */
struct sig_rivals {
    tl_signal *s[2];
    int calls;
};

static void on_signal_rival(tl_loop *loop, tl_signal *s, int signo) {
    (void)signo;
    struct sig_rivals *r = s->data;
    r->calls++;
    int me = s == r->s[0] ? 0 : 1;
    if (r->s[!me]) {
        cr_assert(tl_signal_stop(loop, r->s[!me]) == 0);
        free(r->s[!me]);
        r->s[!me] = NULL;
    }
}

Test(signal, stopped_and_freed_by_earlier_callback_is_not_called) {
    tl_loop *loop = new_loop();
    struct sig_rivals r = {0};
    for (int i = 0; i < 2; ++i) {
        r.s[i] = malloc(sizeof(tl_signal));
        cr_assert(r.s[i]);
        cr_assert(tl_signal_start(loop, r.s[i], SIGUSR1, on_signal_rival, &r) == 0);
    }
    int timed_out = 0;
    tl_timer failsafe;
    tl_timer_init(&failsafe, on_failsafe, &timed_out);
    cr_assert(tl_timer_start(loop, &failsafe, 5000 * MS, 0) == 0);
    cr_assert(raise(SIGUSR1) == 0);
    while (r.calls == 0 && !timed_out) cr_assert(tl_loop_run(loop, TL_RUN_ONCE) == 1);
    cr_assert(r.calls == 1, "%d callbacks: a stopped watcher was called", r.calls);
    int left = r.s[0] ? 0 : 1;
    cr_assert(tl_signal_stop(loop, r.s[left]) == 0);
    free(r.s[left]);
    cr_assert(!blocked(SIGUSR1));
    cr_assert(tl_timer_stop(loop, &failsafe) == 0);
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
