/* SPDX-License-Identifier: MIT */
/*
 * Signal watchers through the loop: delivery and the signal mask restored,
 * two watchers of one signal, a callback stopping and freeing the other,
 * tl_signal_init's O(1) double start, an unreferenced watcher, and a start
 * that runs out of memory. Run once per I/O backend (TICKLOOP_IO).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "loop_helpers.h"

struct counter {
    int n;
};

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

static void count_signal(tl_loop *loop, tl_signal *s, int signo) {
    (void)loop;
    cr_assert_eq(signo, SIGUSR1);
    ((struct counter *)s->data)->n++;
    tl_signal_stop(loop, s);
    tl_loop_stop(loop);
}

Test(signal, init_double_start_is_ebusy_and_unref_watcher_still_delivers) {
    tl_loop *loop = new_loop(), *other = new_loop();
    struct counter c = {0};
    tl_signal s;
    tl_signal_init(&s);
    cr_assert_eq(tl_signal_start(loop, &s, SIGUSR1, count_signal, &c), 0);
    cr_assert_eq(tl_signal_start(loop, &s, SIGUSR1, count_signal, &c), -EBUSY);
    cr_assert_eq(tl_signal_start(other, &s, SIGUSR1, count_signal, &c), -EBUSY);
    cr_assert_eq(tl_signal_set_ref(loop, &s, 0), 0);
    cr_assert_eq(tl_loop_alive(loop), 0);
    /* A referenced failsafe keeps the loop running until the signal. */
    tl_timer fs;
    int fired;
    start_failsafe(loop, &fs, &fired, 5000);
    cr_assert_eq(tl_timer_set_ref(loop, &fs, 1), 0);
    cr_assert_eq(raise(SIGUSR1), 0);
    cr_assert_eq(tl_loop_run(loop, TL_RUN_DEFAULT), 1);
    cr_assert_eq(fired, 0, "no signal within 5 s");
    cr_assert_eq(c.n, 1, "the unreferenced watcher ran %d times", c.n);
    tl_timer_stop(loop, &fs);
    free_loop(loop);
    free_loop(other);
}

/* ------------------------------------------------------------------------ */
/* Out of memory                                                            */
/* ------------------------------------------------------------------------ */

/* While fail_realloc is set on a thread, realloc fails there: the loop grows
 * its fd registry with it when a descriptor is above its size (and io_uring
 * its re-arm queue). This definition replaces the C library's for the whole
 * test program, the library linked into it included; other threads
 * (Criterion's) are not affected. It is built on malloc and free, so that
 * it works with any allocator (a sanitizer's too). */
static __thread int fail_realloc;

void *realloc(void *ptr, size_t size) {
    if (fail_realloc) {
        errno = ENOMEM;
        return NULL;
    }
    if (!ptr) return malloc(size);
    if (size == 0) {
        free(ptr);
        return NULL;
    }
    void *mem = malloc(size);
    if (!mem) return NULL;
    size_t old = malloc_usable_size(ptr);
    memcpy(mem, ptr, old < size ? old : size);
    free(ptr);
    return mem;
}

/* Registering the signalfd can need memory, so tl_signal_start can fail
 * with -ENOMEM (its header lists it): the start changes nothing (the
 * watcher inactive, the signal unblocked and free for another loop) and
 * works once memory is back. The low descriptors are taken first so that
 * the signalfd lands above the loop's registry, which must grow for it. */
#define FILLED 300
Test(signal, start_out_of_memory_is_enomem_and_changes_nothing) {
    /* valgrind replaces realloc in every object, this program's too: then
       nothing can make it fail, and the test has nothing to inject. */
    void *(*volatile grow)(void *, size_t) = realloc;
    fail_realloc = 1;
    void *probe = grow(NULL, 16);
    fail_realloc = 0;
    if (probe) {
        free(probe);
        cr_skip_test("realloc cannot be made to fail here (replaced, as under valgrind)");
    }
    tl_loop *loop = new_loop(), *other = new_loop();
    int p[2], fill[FILLED], filled = 0;
    cr_assert_eq(pipe(p), 0);
    while (filled < FILLED) {
        int fd = dup(p[0]); /* the lowest free number */
        cr_assert_geq(fd, 0);
        fill[filled++] = fd;
        if (fd >= FILLED - 1) break;
    }
    struct sig_state st = {0};
    tl_signal_init(&st.sig);
    fail_realloc = 1;
    int r = tl_signal_start(loop, &st.sig, SIGUSR1, on_signal, &st);
    fail_realloc = 0;
    cr_assert_eq(r, -ENOMEM, "%s: tl_signal_start: %d %s", tl_loop_io_name(loop), r,
                 tl_strerror(r));
    cr_assert(!blocked(SIGUSR1), "a failed start left SIGUSR1 blocked");
    tl_loop_stats stats;
    tl_loop_stats_get(loop, &stats);
    cr_assert_eq(stats.signals_active, 0);
    cr_assert_eq(tl_loop_alive(loop), 0);
    check_loop(loop);
    /* Not taken: another loop may watch it, then this one again. */
    struct sig_state elsewhere = {0};
    cr_assert_eq(tl_signal_start(other, &elsewhere.sig, SIGUSR1, on_signal, &elsewhere), 0);
    cr_assert_eq(tl_signal_stop(other, &elsewhere.sig), 0);
    cr_assert_eq(tl_signal_start(loop, &st.sig, SIGUSR1, on_signal, &st), 0);
    cr_assert_eq(raise(SIGUSR1), 0);
    run_until_set(loop, &st.calls, 5000);
    cr_assert_eq(st.signo, SIGUSR1);
    cr_assert_eq(tl_signal_stop(loop, &st.sig), 0);
    for (int i = 0; i < filled; ++i) close(fill[i]);
    close(p[0]);
    close(p[1]);
    free_loop(loop);
    free_loop(other);
}
