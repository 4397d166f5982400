/* SPDX-License-Identifier: MIT */
/*
 * Loop hooks (tl_hook: PREPARE, CHECK, IDLE): where they run in an iteration,
 * their order, callbacks that start, stop and free hooks, and the ports of
 * libuv's test-idle.c, test-loop-handles.c and test-timer-from-check.c
 * (rewritten for this API). Run once per I/O backend (TICKLOOP_IO); the tests
 * where timers matter run once per registered timer backend too.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdlib.h>

#include "backend_params.h"
#include "loop_helpers.h"

/* ------------------------------------------------------------------------ */
/* Where hooks run                                                          */
/* ------------------------------------------------------------------------ */

/* An event log: one letter per callback. */
struct trace {
    char log[64];
    int n;
};

static void note(struct trace *tr, char c) {
    if (tr->n < (int)sizeof tr->log - 1) tr->log[tr->n++] = c;
    tr->log[tr->n] = 0;
}

static struct trace *g_trace;
static void idle_note(tl_loop *loop, tl_hook *h) {
    (void)loop, (void)h;
    note(g_trace, 'I');
}
static void prepare_note(tl_loop *loop, tl_hook *h) {
    (void)loop, (void)h;
    note(g_trace, 'P');
}
static void check_note(tl_loop *loop, tl_hook *h) {
    (void)loop, (void)h;
    note(g_trace, 'C');
}
static void timer_note(tl_loop *loop, tl_timer *t) {
    (void)loop, (void)t;
    note(g_trace, 'T');
}
static void io_note(tl_loop *loop, tl_io *w, unsigned revents) {
    (void)loop, (void)revents;
    char c;
    cr_assert_eq(read(w->fd, &c, 1), 1);
    note(g_trace, 'O');
}

BACKEND_TEST(hooks, run_at_their_points_of_the_iteration) {
    struct trace tr = {0};
    g_trace = &tr;
    tl_loop *loop = new_loop_with(p->name);
    tl_hook idle, prepare, check;
    tl_hook_init(&idle, TL_HOOK_IDLE, idle_note, NULL);
    tl_hook_init(&prepare, TL_HOOK_PREPARE, prepare_note, NULL);
    tl_hook_init(&check, TL_HOOK_CHECK, check_note, NULL);
    /* Started in the "wrong" order: the kind, not the start, decides. */
    cr_assert_eq(tl_hook_start(loop, &check), 0);
    cr_assert_eq(tl_hook_start(loop, &prepare), 0);
    cr_assert_eq(tl_hook_start(loop, &idle), 0);
    int fds[2];
    make_pair(fds);
    put(fds[1]);
    tl_io w;
    tl_io_init(&w, fds[0], io_note, NULL);
    cr_assert_eq(tl_io_start(loop, &w, TL_READ), 0);
    tl_timer t;
    tl_timer_init(&t, timer_note, NULL);
    /* Two ticks in the past: due at once on every backend (a wheel fires a
       timer once its tick has passed). */
    cr_assert_eq(tl_timer_start_at(loop, &t, TL_CLOCK_MONOTONIC, tl_now(loop) - 2000000, 0), 0);

    cr_assert_eq(tl_loop_run(loop, TL_RUN_ONCE), 1);
    cr_assert_str_eq(tr.log, "IPTOC", "%s: one iteration logged %s", p->name, tr.log);
    /* The next one: nothing ready, and the IDLE hook keeps it from blocking. */
    cr_assert_eq(tl_loop_run(loop, TL_RUN_ONCE), 1);
    cr_assert_str_eq(tr.log, "IPTOCIPC", "%s: %s", p->name, tr.log);

    tl_hook_stop(loop, &idle);
    tl_hook_stop(loop, &prepare);
    tl_hook_stop(loop, &check);
    tl_io_stop(loop, &w);
    close(fds[0]);
    close(fds[1]);
    free_loop(loop);
}

/* Several hooks of a kind, and the letter each writes. */
struct lettered {
    tl_hook hook;
    char letter;
    struct trace *tr;
};

static void lettered_cb(tl_loop *loop, tl_hook *h) {
    (void)loop;
    struct lettered *l = h->data;
    note(l->tr, l->letter);
}

Test(hooks, same_kind_runs_in_start_order_restart_counts_as_new) {
    struct trace tr = {0};
    tl_loop *loop = new_loop();
    struct lettered hs[4];
    for (int i = 0; i < 4; i++) {
        hs[i].letter = (char)('a' + i);
        hs[i].tr = &tr;
        tl_hook_init(&hs[i].hook, TL_HOOK_PREPARE, lettered_cb, &hs[i]);
        cr_assert_eq(tl_hook_start(loop, &hs[i].hook), 0);
    }
    cr_assert_eq(tl_loop_run(loop, TL_RUN_NOWAIT), 1);
    cr_assert_str_eq(tr.log, "abcd");
    tl_hook_stop(loop, &hs[1].hook);
    cr_assert_eq(tl_hook_start(loop, &hs[1].hook), 0);
    cr_assert_eq(tl_loop_run(loop, TL_RUN_NOWAIT), 1);
    cr_assert_str_eq(tr.log, "abcdacdb");
    check_loop(loop);
    for (int i = 0; i < 4; i++) tl_hook_stop(loop, &hs[i].hook);
    free_loop(loop);
}

Test(hooks, misuse_is_refused) {
    tl_loop *loop = new_loop(), *other = new_loop();
    tl_hook h;
    tl_hook_init(&h, TL_HOOK_CHECK, NULL, NULL);
    cr_assert_eq(tl_hook_start(loop, &h), -EINVAL, "no callback");
    tl_hook_init(&h, (tl_hook_kind)7, check_note, NULL);
    cr_assert_eq(tl_hook_start(loop, &h), -EINVAL, "unknown kind");
    cr_assert_eq(tl_hook_start(NULL, &h), -EINVAL);
    cr_assert_eq(tl_hook_start(loop, NULL), -EINVAL);
    cr_assert_eq(tl_hook_stop(loop, NULL), -EINVAL);
    tl_hook_init(&h, TL_HOOK_CHECK, check_note, NULL);
    cr_assert_eq(tl_hook_stop(loop, &h), 0, "stop of an inactive hook");
    cr_assert_eq(tl_hook_start(loop, &h), 0);
    cr_assert_eq(tl_hook_start(loop, &h), -EBUSY);
    cr_assert_eq(tl_hook_start(other, &h), -EBUSY);
    cr_assert_eq(tl_hook_stop(other, &h), -EINVAL);
    cr_assert_eq(tl_hook_set_ref(other, &h, 0), -EINVAL);
    cr_assert_eq(tl_loop_free(loop), -EBUSY, "an active hook holds the loop");
    tl_loop_stats st;
    tl_loop_stats_get(loop, &st);
    cr_assert_eq(st.hooks_active, 1);
    cr_assert_eq(tl_hook_stop(loop, &h), 0);
    cr_assert_eq(tl_hook_active(&h), 0);
    tl_loop_stats_get(loop, &st);
    cr_assert_eq(st.hooks_active, 0);
    free_loop(loop);
    free_loop(other);
}

/* ------------------------------------------------------------------------ */
/* Callbacks that start, stop and free hooks                                */
/* ------------------------------------------------------------------------ */

struct freeing {
    int ran[3];
    tl_hook *hooks[3]; /* heap-allocated; NULL once freed */
};
static struct freeing *g_free;

static int index_of(tl_hook *h) {
    for (int i = 0; i < 3; i++)
        if (g_free->hooks[i] == h) return i;
    cr_assert_fail("unknown hook %p", (void *)h);
    return -1;
}

/* Hook 0 stops and frees hook 1 (not yet run) and itself; hook 2 runs. */
static void free_next_and_self(tl_loop *loop, tl_hook *h) {
    int i = index_of(h);
    g_free->ran[i]++;
    if (i == 0) {
        cr_assert_eq(tl_hook_stop(loop, g_free->hooks[1]), 0);
        free(g_free->hooks[1]);
        g_free->hooks[1] = NULL;
        cr_assert_eq(tl_hook_stop(loop, h), 0);
        free(h);
        g_free->hooks[0] = NULL;
    }
}

static void check_kind_param(tl_hook_kind kind) {
    struct freeing f = {{0}, {0}};
    g_free = &f;
    tl_loop *loop = new_loop();
    for (int i = 0; i < 3; i++) {
        f.hooks[i] = malloc(sizeof(tl_hook));
        tl_hook_init(f.hooks[i], kind, free_next_and_self, NULL);
        cr_assert_eq(tl_hook_start(loop, f.hooks[i]), 0);
    }
    cr_assert_eq(tl_loop_run(loop, TL_RUN_NOWAIT), 1);
    cr_assert_eq(f.ran[0], 1);
    cr_assert_eq(f.ran[1], 0, "a hook stopped before its turn ran");
    check_loop(loop);
    cr_assert_eq(f.ran[2], 1);
    cr_assert_eq(tl_loop_run(loop, TL_RUN_NOWAIT), 1);
    cr_assert_eq(f.ran[2], 2);
    tl_hook_stop(loop, f.hooks[2]);
    free(f.hooks[2]);
    cr_assert_eq(tl_loop_alive(loop), 0);
    free_loop(loop);
}

/* Under ASan a touch of the freed hooks fails these. */
Test(hooks, prepare_callback_may_stop_and_free_itself_and_the_next) {
    check_kind_param(TL_HOOK_PREPARE);
}
Test(hooks, check_callback_may_stop_and_free_itself_and_the_next) {
    check_kind_param(TL_HOOK_CHECK);
}
Test(hooks, idle_callback_may_stop_and_free_itself_and_the_next) {
    check_kind_param(TL_HOOK_IDLE);
}

/* A hook that restarts itself, and starts another of its kind: both run from
 * the next iteration (the restarted one once per iteration, not forever). */
struct restarter {
    tl_hook self, other;
    int self_ran, other_ran;
};

static void other_cb(tl_loop *loop, tl_hook *h) {
    (void)loop;
    ((struct restarter *)h->data)->other_ran++;
}

static void restart_cb(tl_loop *loop, tl_hook *h) {
    struct restarter *r = h->data;
    r->self_ran++;
    cr_assert_eq(tl_hook_stop(loop, h), 0);
    cr_assert_eq(tl_hook_start(loop, h), 0);
    if (!tl_hook_active(&r->other)) cr_assert_eq(tl_hook_start(loop, &r->other), 0);
}

Test(hooks, started_from_own_kind_runs_from_next_iteration) {
    tl_loop *loop = new_loop();
    struct restarter r = {0};
    tl_hook_init(&r.self, TL_HOOK_CHECK, restart_cb, &r);
    tl_hook_init(&r.other, TL_HOOK_CHECK, other_cb, &r);
    cr_assert_eq(tl_hook_start(loop, &r.self), 0);
    cr_assert_eq(tl_loop_run(loop, TL_RUN_NOWAIT), 1);
    cr_assert_eq(r.self_ran, 1);
    cr_assert_eq(r.other_ran, 0);
    cr_assert_eq(tl_loop_run(loop, TL_RUN_NOWAIT), 1);
    cr_assert_eq(r.self_ran, 2);
    cr_assert_eq(r.other_ran, 1);
    tl_hook_stop(loop, &r.self);
    tl_hook_stop(loop, &r.other);
    free_loop(loop);
}

/* ------------------------------------------------------------------------ */
/* libuv test-idle.c                                                        */
/* ------------------------------------------------------------------------ */

struct starve {
    tl_hook idle, check;
    tl_timer timer;
    int idle_ran, check_ran, timer_ran;
    uint64_t deadline;
};

static void starve_idle(tl_loop *loop, tl_hook *h) {
    struct starve *s = h->data;
    /* The timer starts with the spinning, not before the loop's first
       iteration, which may take tens of ms on a loaded machine under
       valgrind (then the timer fired before the hook's second turn). */
    if (s->idle_ran++ == 0) {
        cr_assert_eq(tl_timer_start(loop, &s->timer, 50 * MS, 0), 0);
        s->deadline = s->timer.deadline;
    }
}
static void starve_check(tl_loop *loop, tl_hook *h) {
    (void)loop;
    ((struct starve *)h->data)->check_ran++;
}
static void starve_timer(tl_loop *loop, tl_timer *t) {
    struct starve *s = t->data;
    cr_assert_geq(tl_now(loop), s->deadline, "timer early under an IDLE hook");
    s->timer_ran++;
    tl_hook_stop(loop, &s->idle);
    tl_hook_stop(loop, &s->check);
}

/* An IDLE hook spins the loop without blocking, and the timer still fires,
 * never early (libuv: idle_starvation). */
BACKEND_TEST(hooks, idle_does_not_starve_a_timer) {
    tl_loop *loop = new_loop_with(p->name);
    struct starve s = {0};
    tl_hook_init(&s.idle, TL_HOOK_IDLE, starve_idle, &s);
    tl_hook_init(&s.check, TL_HOOK_CHECK, starve_check, &s);
    tl_timer_init(&s.timer, starve_timer, &s);
    cr_assert_eq(tl_hook_start(loop, &s.idle), 0);
    cr_assert_eq(tl_hook_start(loop, &s.check), 0);
    cr_assert_eq(tl_loop_run(loop, TL_RUN_DEFAULT), 0);
    cr_assert_eq(s.timer_ran, 1, "%s", p->name);
    cr_assert_gt(s.idle_ran, 1, "%s: the idle hook ran %d times", p->name, s.idle_ran);
    /* The timer's callback stops the check hook before its last turn. */
    cr_assert_eq(s.check_ran, s.idle_ran - 1, "%s: check %d idle %d", p->name, s.check_ran,
                 s.idle_ran);
    free_loop(loop);
}

static void idle_stops_itself(tl_loop *loop, tl_hook *h) {
    ((struct starve *)h->data)->idle_ran++;
    tl_hook_stop(loop, h);
}

/* An IDLE hook that stops itself still makes its iteration non-blocking: with
 * only a CHECK hook left, RUN_ONCE returns instead of sleeping forever
 * (libuv: idle_check). */
Test(hooks, idle_stopping_itself_leaves_its_iteration_nonblocking, .timeout = 20) {
    tl_loop *loop = new_loop();
    struct starve s = {0};
    tl_hook_init(&s.idle, TL_HOOK_IDLE, idle_stops_itself, &s);
    tl_hook_init(&s.check, TL_HOOK_CHECK, starve_check, &s);
    cr_assert_eq(tl_hook_start(loop, &s.idle), 0);
    cr_assert_eq(tl_hook_start(loop, &s.check), 0);
    cr_assert_eq(tl_loop_run(loop, TL_RUN_ONCE), 1);
    cr_assert_eq(s.idle_ran, 1);
    cr_assert_eq(s.check_ran, 1);
    tl_hook_stop(loop, &s.check);
    free_loop(loop);
}

/* ------------------------------------------------------------------------ */
/* libuv test-loop-handles.c                                                */
/* ------------------------------------------------------------------------ */

/* The interplay, in this API: prepare_1 runs every iteration and starts
 * prepare_2 on odd ones; prepare_2 stops itself; the check hook counts
 * iterations and (re)starts a set of IDLE hooks until the last one, then stops
 * everything; each IDLE hook stops itself after one run, and the last of them
 * to run starts idle_2, which stops itself. A repeating timer keeps the loop
 * from ending early and must not disturb the counts. */
enum { kIdleCount = 7, kIterations = 21 };

static struct handles {
    tl_hook prepare_1, prepare_2, check, idle_1[kIdleCount], idle_2;
    tl_timer timer;
    int iteration;
    int prepare_1_ran, prepare_2_ran, check_ran, idle_1_ran, idle_2_ran, idles_active;
    int idle_2_started;
} H;

static void h_idle_2(tl_loop *loop, tl_hook *h) {
    H.idle_2_ran++;
    tl_hook_stop(loop, h);
}

static void h_idle_1(tl_loop *loop, tl_hook *h) {
    cr_assert_gt(H.idles_active, 0);
    H.idle_1_ran++;
    tl_hook_stop(loop, h);
    if (--H.idles_active == 0 && !tl_hook_active(&H.idle_2)) {
        cr_assert_eq(tl_hook_start(loop, &H.idle_2), 0);
        H.idle_2_started++;
    }
}

static void h_check(tl_loop *loop, tl_hook *h) {
    (void)h;
    H.check_ran++;
    check_loop(loop);
    if (++H.iteration < kIterations) {
        for (int i = 0; i < kIdleCount; i++) {
            if (tl_hook_active(&H.idle_1[i])) continue;
            cr_assert_eq(tl_hook_start(loop, &H.idle_1[i]), 0);
            H.idles_active++;
        }
        return;
    }
    tl_hook_stop(loop, &H.prepare_1);
    tl_hook_stop(loop, &H.prepare_2);
    tl_hook_stop(loop, &H.check);
    for (int i = 0; i < kIdleCount; i++) tl_hook_stop(loop, &H.idle_1[i]);
    tl_hook_stop(loop, &H.idle_2);
    tl_timer_stop(loop, &H.timer);
}

static void h_prepare_2(tl_loop *loop, tl_hook *h) {
    cr_assert(H.iteration % 2 != 0, "prepare_2 on even iteration %d", H.iteration);
    H.prepare_2_ran++;
    tl_hook_stop(loop, h);
}

static void h_prepare_1(tl_loop *loop, tl_hook *h) {
    (void)h;
    H.prepare_1_ran++;
    /* Started from a PREPARE hook, prepare_2 runs in the next iteration's
       PREPARE phase, whose `iteration` is then odd. */
    if (H.iteration % 2 == 0) cr_assert_eq(tl_hook_start(loop, &H.prepare_2), 0);
}

static void h_timer(tl_loop *loop, tl_timer *t) {
    (void)loop, (void)t;
}

BACKEND_TEST(hooks, loop_handles_interplay) {
    memset(&H, 0, sizeof H);
    tl_loop *loop = new_loop_with(p->name);
    tl_hook_init(&H.prepare_1, TL_HOOK_PREPARE, h_prepare_1, NULL);
    tl_hook_init(&H.prepare_2, TL_HOOK_PREPARE, h_prepare_2, NULL);
    tl_hook_init(&H.check, TL_HOOK_CHECK, h_check, NULL);
    for (int i = 0; i < kIdleCount; i++) tl_hook_init(&H.idle_1[i], TL_HOOK_IDLE, h_idle_1, NULL);
    tl_hook_init(&H.idle_2, TL_HOOK_IDLE, h_idle_2, NULL);
    tl_timer_init(&H.timer, h_timer, NULL);
    cr_assert_eq(tl_hook_start(loop, &H.prepare_1), 0);
    cr_assert_eq(tl_hook_start(loop, &H.check), 0);
    cr_assert_eq(tl_timer_start(loop, &H.timer, 1 * MS, 1 * MS), 0);
    cr_assert_eq(tl_loop_run(loop, TL_RUN_DEFAULT), 0);
    cr_assert_eq(H.iteration, kIterations, "%s", p->name);
    cr_assert_eq(H.prepare_1_ran, kIterations);
    cr_assert_eq(H.check_ran, kIterations);
    /* Started on iterations 0, 2, ..., 20; the one started on 20 never ran. */
    cr_assert_eq(H.prepare_2_ran, kIterations / 2, "%d", H.prepare_2_ran);
    cr_assert_eq(H.idle_1_ran, kIdleCount * (kIterations - 1), "%d", H.idle_1_ran);
    cr_assert_eq(H.idle_2_started, kIterations - 1);
    /* The idle_2 started in the last iteration is stopped by its check. */
    cr_assert_eq(H.idle_2_ran, H.idle_2_started - 1, "%d of %d", H.idle_2_ran, H.idle_2_started);
    cr_assert_eq(tl_loop_alive(loop), 0);
    free_loop(loop);
}

/* ------------------------------------------------------------------------ */
/* libuv test-timer-from-check.c                                            */
/* ------------------------------------------------------------------------ */

static struct {
    tl_hook prepare, check;
    tl_timer timer;
    int prepare_ran, check_ran, timer_ran;
} F;

static void f_prepare(tl_loop *loop, tl_hook *h) {
    cr_assert_eq(tl_hook_stop(loop, h), 0);
    cr_assert_eq(F.prepare_ran, 0);
    cr_assert_eq(F.check_ran, 1);
    cr_assert_eq(F.timer_ran, 0);
    F.prepare_ran++;
}

static void f_timer(tl_loop *loop, tl_timer *t) {
    cr_assert_eq(tl_timer_stop(loop, t), 0);
    cr_assert_eq(F.prepare_ran, 1);
    cr_assert_eq(F.check_ran, 1);
    cr_assert_eq(F.timer_ran, 0);
    F.timer_ran++;
}

/* The check hook restarts the timer before it could fire and starts a
 * prepare hook: the prepare hook runs in the next iteration, before the
 * restarted timer. (libuv runs CHECK before the iteration's timers, tickloop
 * after them, so the first iteration is a NOWAIT one where nothing is due.) */
static void f_check(tl_loop *loop, tl_hook *h) {
    cr_assert_eq(tl_hook_stop(loop, h), 0);
    cr_assert_eq(tl_timer_stop(loop, &F.timer), 0);
    cr_assert_eq(tl_timer_start(loop, &F.timer, 50 * MS, 0), 0);
    cr_assert_eq(tl_hook_start(loop, &F.prepare), 0);
    cr_assert_eq(F.prepare_ran + F.check_ran + F.timer_ran, 0);
    F.check_ran++;
}

BACKEND_TEST(hooks, timer_from_check) {
    memset(&F, 0, sizeof F);
    tl_loop *loop = new_loop_with(p->name);
    tl_hook_init(&F.prepare, TL_HOOK_PREPARE, f_prepare, NULL);
    tl_hook_init(&F.check, TL_HOOK_CHECK, f_check, NULL);
    tl_timer_init(&F.timer, f_timer, NULL);
    cr_assert_eq(tl_hook_start(loop, &F.check), 0);
    /* Far enough that a slow first iteration (valgrind on a loaded machine)
       cannot reach it before the check hook restarts it. */
    cr_assert_eq(tl_timer_start(loop, &F.timer, 10000 * MS, 0), 0);
    cr_assert_eq(tl_loop_run(loop, TL_RUN_NOWAIT), 1);
    cr_assert_eq(F.check_ran, 1, "%s", p->name);
    cr_assert_eq(tl_loop_run(loop, TL_RUN_DEFAULT), 0);
    cr_assert_eq(F.prepare_ran, 1, "%s", p->name);
    cr_assert_eq(F.check_ran, 1, "%s", p->name);
    cr_assert_eq(F.timer_ran, 1, "%s", p->name);
    free_loop(loop);
}
