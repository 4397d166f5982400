/* SPDX-License-Identifier: MIT */
/*
 * Timer callbacks that stop, free and restart timers, through the loop in
 * real time, once per registered timer backend (opts.timers): a stopped or
 * freed timer never runs, a restart in a callback moves a due timer, a
 * timer started or restarted due in a callback runs from the next
 * iteration (across the dispatch's chunks, when memory runs out, without
 * starving the loop), and random stops and restarts keep the invariants.
 *
 * "Never early" and order are exact, lateness only loose. A due timer on a
 * wheel runs only once its tick has passed: tests wait for it
 * (run_until_set) or sleep past the tick before a TL_RUN_NOWAIT.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include <tickloop/tickloop.h>

#include "backend_params.h"
#include "loop_helpers.h"

/* ------------------------------------------------------------------------ */
/* Callbacks that stop, free and restart timers                             */
/* ------------------------------------------------------------------------ */

struct pair {
    tl_timer a, b;
    int ran_a, ran_b;
};

/* Each stops the other: whichever runs first, the other must not run. */
static void on_stop_other(tl_loop *loop, tl_timer *t) {
    struct pair *pr = t->data;
    tl_timer *other = t == &pr->a ? &pr->b : &pr->a;
    ++*(t == &pr->a ? &pr->ran_a : &pr->ran_b);
    cr_assert(tl_timer_stop(loop, other) == 0);
    cr_assert(tl_timer_active(other) == 0);
}

BACKEND_TEST(timer, stopped_in_earlier_callback_does_not_run) {
    tl_loop *loop = new_loop_with(p->name);
    struct pair pr = {0};
    tl_timer_init(&pr.a, on_stop_other, &pr);
    tl_timer_init(&pr.b, on_stop_other, &pr);
    cr_assert(tl_timer_start(loop, &pr.a, 1 * MS, 0) == 0);
    cr_assert(tl_timer_start(loop, &pr.b, 1 * MS, 0) == 0);
    run_to_end(loop);
    cr_assert(pr.ran_a + pr.ran_b == 1, "%s: %d and %d callbacks: a stopped timer ran", p->name,
              pr.ran_a, pr.ran_b);
    free_loop(loop);
}

/* Heap-allocated timers that free themselves or each other in callbacks. */
struct owned {
    tl_timer timer;
    struct owned **peer; /* slot holding the other one, NULL when freed */
    struct owned **self; /* slot holding this one */
    int *ran;
};

static void on_free_self(tl_loop *loop, tl_timer *t) {
    struct owned *o = t->data;
    ++*o->ran;
    cr_assert(tl_timer_stop(loop, t) == 0);
    *o->self = NULL;
    free(o);
}

static void on_free_peer(tl_loop *loop, tl_timer *t) {
    struct owned *o = t->data;
    ++*o->ran;
    if (*o->peer) {
        cr_assert(tl_timer_stop(loop, &(*o->peer)->timer) == 0);
        free(*o->peer);
        *o->peer = NULL;
    }
}

static struct owned *new_owned(tl_timer_cb cb, struct owned **self, struct owned **peer, int *ran) {
    struct owned *o = malloc(sizeof *o);
    cr_assert(o);
    tl_timer_init(&o->timer, cb, o);
    o->self = self;
    o->peer = peer;
    o->ran = ran;
    return o;
}

BACKEND_TEST(timer, callback_may_free_itself_and_others) {
    tl_loop *loop = new_loop_with(p->name);
    int ran = 0;
    /* A one-shot and a repeating timer each stop and free themselves. */
    struct owned *one = NULL, *rep = NULL;
    one = new_owned(on_free_self, &one, NULL, &ran);
    rep = new_owned(on_free_self, &rep, NULL, &ran);
    cr_assert(tl_timer_start(loop, &one->timer, 1 * MS, 0) == 0);
    cr_assert(tl_timer_start(loop, &rep->timer, 1 * MS, 1 * MS) == 0);
    /* Two timers due together, each freeing the other: one runs. */
    struct owned *x = NULL, *y = NULL;
    int ran_pair = 0;
    x = new_owned(on_free_peer, &x, &y, &ran_pair);
    y = new_owned(on_free_peer, &y, &x, &ran_pair);
    cr_assert(tl_timer_start(loop, &x->timer, 2 * MS, 0) == 0);
    cr_assert(tl_timer_start(loop, &y->timer, 2 * MS, 0) == 0);
    /* The survivor of the pair is one-shot and inactive now; run_to_end
       returns once the rest are gone. */
    run_to_end(loop);
    cr_assert(ran == 2, "%s: %d self-freeing callbacks, expected 2", p->name, ran);
    cr_assert(ran_pair == 1, "%s: %d callbacks of the freeing pair, expected 1", p->name, ran_pair);
    cr_assert(one == NULL && rep == NULL);
    cr_assert((x == NULL) != (y == NULL), "%s: exactly one of the pair is freed", p->name);
    free(x ? x : y);
    free_loop(loop);
}

struct restarts {
    tl_timer a, b;
    uint64_t fired_at[2];
    int count[2];
    uint64_t pushed_to; /* the new deadline of the pushed timer */
};

/* Each, if the other has not run yet, pushes it 30 ms later. */
static void on_push_other(tl_loop *loop, tl_timer *t) {
    struct restarts *r = t->data;
    int me = t == &r->a ? 0 : 1;
    uint64_t clock = mono_ns();
    cr_assert(clock >= t->deadline, "fired early");
    r->fired_at[me] = clock;
    r->count[me]++;
    if (r->count[!me] == 0) {
        tl_timer *other = me ? &r->a : &r->b;
        cr_assert(tl_timer_start(loop, other, 30 * MS, 0) == 0);
        cr_assert(other->deadline == tl_now(loop) + 30 * MS);
        r->pushed_to = other->deadline;
    }
}

BACKEND_TEST(timer, restart_in_callback_moves_a_due_timer) {
    tl_loop *loop = new_loop_with(p->name);
    struct restarts r = {0};
    tl_timer_init(&r.a, on_push_other, &r);
    tl_timer_init(&r.b, on_push_other, &r);
    cr_assert(tl_timer_start(loop, &r.a, 1 * MS, 0) == 0);
    cr_assert(tl_timer_start(loop, &r.b, 1 * MS, 0) == 0);
    run_to_end(loop);
    cr_assert(r.count[0] == 1 && r.count[1] == 1, "%s: fired %d and %d times", p->name, r.count[0],
              r.count[1]);
    uint64_t second = r.fired_at[0] < r.fired_at[1] ? r.fired_at[1] : r.fired_at[0];
    cr_assert(second >= r.pushed_to, "%s: the pushed timer fired %llu ns before its new deadline",
              p->name, (unsigned long long)(r.pushed_to - second));
    free_loop(loop);
}

struct self_restart {
    tl_timer timer;
    int count;
    int limit;
    uint64_t timeout;
};

static void on_restart_self(tl_loop *loop, tl_timer *t) {
    struct self_restart *s = t->data;
    cr_assert(mono_ns() >= t->deadline, "fired early");
    if (++s->count < s->limit) cr_assert(tl_timer_start(loop, t, s->timeout, 0) == 0);
}

BACKEND_TEST(timer, restart_itself_in_callback) {
    tl_loop *loop = new_loop_with(p->name);
    struct self_restart s = {.limit = 5, .timeout = 1 * MS};
    tl_timer_init(&s.timer, on_restart_self, &s);
    uint64_t begin = tl_now(loop); /* each restart is at least 1 ms after the last */
    cr_assert(tl_timer_start(loop, &s.timer, 1 * MS, 0) == 0);
    run_to_end(loop);
    cr_assert(s.count == 5, "%s: %d of 5", p->name, s.count);
    cr_assert(mono_ns() - begin >= 5 * MS, "%s: five 1 ms restarts took under 5 ms", p->name);
    free_loop(loop);
}

BACKEND_TEST(timer, zero_timeout_restart_runs_next_iteration) {
    tl_loop *loop = new_loop_with(p->name);
    struct self_restart s = {.limit = 1000000, .timeout = 0};
    tl_timer_init(&s.timer, on_restart_self, &s);
    cr_assert(tl_timer_start(loop, &s.timer, 0, 0) == 0);
    tl_loop_stats before, after;
    tl_loop_stats_get(loop, &before);
    /* Heaps pop a deadline of now at once: exactly one callback per
       iteration. Others may hold it until the tick boundary: at most one per
       iteration, so give them time (100 us per run, 10 ms in all). */
    const struct timespec pause = {0, 100000};
    for (int i = 1; i <= 100; ++i) {
        int r = tl_loop_run(loop, TL_RUN_NOWAIT);
        cr_assert(r == 1, "%s: NOWAIT returned %d", p->name, r);
        cr_assert(s.count <= i,
                  "%s: after %d NOWAIT runs, %d callbacks: a timer restarted "
                  "during dispatch must wait for the next iteration",
                  p->name, i, s.count);
        if (backend_exact(p->name))
            cr_assert(s.count == i, "%s: after %d NOWAIT runs, %d callbacks", p->name, i, s.count);
        else
            nanosleep(&pause, NULL);
    }
    cr_assert(s.count >= 2, "%s: %d callbacks in 100 iterations over 10 ms", p->name, s.count);
    tl_loop_stats_get(loop, &after);
    cr_assert(after.iterations - before.iterations == 100, "%s: %llu iterations", p->name,
              (unsigned long long)(after.iterations - before.iterations));
    cr_assert(after.timers_fired - before.timers_fired == (uint64_t)s.count);
    cr_assert(tl_timer_stop(loop, &s.timer) == 0);
    free_loop(loop);
}

/* Timers started with timeout 0 from one callback tie on deadline "now" and
 * wait for the next iteration; there the heaps still owe them start order. The
 * first one popped in the starting dispatch goes back in; it must keep its
 * rank, not run last (a case tests/reliability/loop_fuzz reaches). */
struct fresh_ties {
    tl_timer starter;
    tl_timer t[4];
    char order[8];
    int n;
};

static void on_fresh_tie(tl_loop *loop, tl_timer *t) {
    (void)loop;
    struct fresh_ties *f = t->data;
    if (f->n < 7) f->order[f->n++] = (char)('A' + (t - f->t));
}

static void on_start_fresh_ties(tl_loop *loop, tl_timer *t) {
    struct fresh_ties *f = t->data;
    for (int i = 0; i < 4; ++i) cr_assert(tl_timer_start(loop, &f->t[i], 0, 0) == 0);
    /* Restarting B makes it the youngest: it must now run last. */
    cr_assert(tl_timer_start(loop, &f->t[1], 0, 0) == 0);
}

BACKEND_TEST(timer, fresh_zero_timeouts_keep_start_order) {
    tl_loop *loop = new_loop_with(p->name);
    struct fresh_ties f = {0};
    tl_timer_init(&f.starter, on_start_fresh_ties, &f);
    for (int i = 0; i < 4; ++i) tl_timer_init(&f.t[i], on_fresh_tie, &f);
    cr_assert(tl_timer_start(loop, &f.starter, 0, 0) == 0);
    run_to_end(loop);
    cr_assert(f.n == 4, "%s: %d of 4 ran", p->name, f.n);
    if (backend_exact(p->name))
        cr_assert(strcmp(f.order, "ACDB") == 0, "%s: ran %s, started A C D B", p->name, f.order);
    free_loop(loop);
}

/* Collect, then run: every timer due at the dispatch's time is taken from
 * the backend before any callback runs, so a callback restarting a timer as
 * due again holds nothing else back. Eight timers share one deadline; the
 * first to run restarts itself with timeout 0. All eight must run in that
 * one iteration, the restarted one again only in the next. (The old dispatch
 * ended early when it met the restarted timer: on a wheel, the rest of the
 * tick waited an iteration.) */
struct same_batch {
    tl_timer t[8];
    int fired[8];
    uint64_t iteration[8]; /* stats.iterations while each first ran */
    int restarted;
};

static void on_same_batch(tl_loop *loop, tl_timer *t) {
    struct same_batch *b = t->data;
    int i = (int)(t - b->t);
    tl_loop_stats st;
    tl_loop_stats_get(loop, &st);
    if (b->fired[i]++ == 0) b->iteration[i] = st.iterations;
    if (!b->restarted) {
        b->restarted = 1;
        cr_assert(tl_timer_start(loop, t, 0, 0) == 0);
    }
}

BACKEND_TEST(timer, due_restart_in_callback_holds_back_no_other_timer) {
    tl_loop *loop = new_loop_with(p->name);
    static struct same_batch b;
    memset(&b, 0, sizeof b);
    for (int i = 0; i < 8; ++i) {
        tl_timer_init(&b.t[i], on_same_batch, &b);
        cr_assert(tl_timer_start(loop, &b.t[i], 2 * MS, 0) == 0);
    }
    /* Wait past the deadline and a tick, so the one dispatch finds all due. */
    const struct timespec pause = {0, 5 * 1000000};
    nanosleep(&pause, NULL);
    cr_assert(tl_loop_run(loop, TL_RUN_NOWAIT) == 1, "%s: the restarted timer remains", p->name);
    int total = 0;
    for (int i = 0; i < 8; ++i) {
        cr_assert(b.fired[i] == 1, "%s: timer %d ran %d times in the first iteration", p->name, i,
                  b.fired[i]);
        total += b.fired[i];
    }
    cr_assert(total == 8);
    run_to_end(loop);
    total = 0;
    for (int i = 0; i < 8; ++i) total += b.fired[i];
    cr_assert(total == 9, "%s: %d callbacks, expected 8 + the restart", p->name, total);
    free_loop(loop);
}

/* tl_timer_init on an active timer stops it on its loop first: zeroing a
 * handle its loop still holds would crash the wheels, run a callback twice
 * on the heaps, and abort a debug build with an invariant message that does
 * not name the cause. Three places an active timer
 * can be: inside the backend, queued in a dispatch (popped, callback not run
 * yet), parked (started due during a dispatch); a copy of an active timer,
 * and memory whose flags merely look active, are just initialised. */
struct reinit {
    tl_timer t[6];
    int fired[6];
    int first_done;
};

static void on_reinit(tl_loop *loop, tl_timer *t) {
    struct reinit *r = t->data;
    int i = (int)(t - r->t);
    r->fired[i]++;
    if (i <= 1 && !r->first_done) {
        /* t[0] and t[1] share a deadline: the other one is queued behind
           this one (in whichever order the backend gives them); t[2] is
           parked. */
        r->first_done = 1;
        tl_timer *other = &r->t[1 - i];
        cr_assert(tl_timer_active(other));
        tl_timer_init(other, on_reinit, r);
        cr_assert(!tl_timer_active(other));
        cr_assert(tl_timer_start(loop, &r->t[2], 0, 0) == 0);
        tl_timer_init(&r->t[2], on_reinit, r);
        cr_assert(!tl_timer_active(&r->t[2]));
    }
}

BACKEND_TEST(timer, init_of_an_active_timer_stops_it_first) {
    tl_loop *loop = new_loop_with(p->name);
    static struct reinit r;
    memset(&r, 0, sizeof r);
    for (int i = 0; i < 6; ++i) tl_timer_init(&r.t[i], on_reinit, &r);
    cr_assert(tl_timer_start(loop, &r.t[0], 1 * MS, 0) == 0);
    cr_assert(tl_timer_start(loop, &r.t[1], 1 * MS, 0) == 0);
    /* Inside the backend, beside others. */
    cr_assert(tl_timer_start(loop, &r.t[3], 2 * MS, 0) == 0);
    cr_assert(tl_timer_start(loop, &r.t[4], 3 * MS, 0) == 0);
    cr_assert(tl_timer_start(loop, &r.t[5], 4 * MS, 0) == 0);
    tl_timer_init(&r.t[4], on_reinit, &r);
    cr_assert(!tl_timer_active(&r.t[4]));
    /* A copy of an active timer is not the timer: initialising it leaves
       the original alone. */
    tl_timer copy = r.t[5];
    tl_timer_init(&copy, on_reinit, &r);
    cr_assert(tl_timer_active(&r.t[5]));
    /* Memory that looks active but names no live loop. */
    tl_timer junk;
    memset(&junk, 0xa5, sizeof junk);
    tl_timer_init(&junk, on_reinit, &r);
    cr_assert(!tl_timer_active(&junk) && junk.flags == 0 && junk.reserved == 0);

    tl_loop_stats st;
    tl_loop_stats_get(loop, &st);
    cr_assert(st.timers_active == 4, "%s: %llu timers active", p->name,
              (unsigned long long)st.timers_active);
    run_to_end(loop);
    cr_assert(r.fired[0] + r.fired[1] == 1, "%s: t[0] ran %d times, t[1] %d", p->name, r.fired[0],
              r.fired[1]);
    int expect[6] = {r.fired[0], r.fired[1], 0, 1, 0, 1};
    for (int i = 0; i < 6; ++i)
        cr_assert(r.fired[i] == expect[i], "%s: timer %d ran %d times, expected %d", p->name, i,
                  r.fired[i], expect[i]);
    /* The re-initialised timers work as new ones. */
    cr_assert(tl_timer_start(loop, &r.t[4], 1 * MS, 0) == 0);
    run_to_end(loop);
    cr_assert(r.fired[4] == 1, "%s", p->name);
    free_loop(loop);
}

/* Allocation failure injection: while fail_aligned_alloc is set, every
 * aligned_alloc fails, which is how the heap backends grow their arrays. This
 * definition replaces the C library's for the whole test program, the
 * library linked into it included. */
static volatile int fail_aligned_alloc;
void *aligned_alloc(size_t align, size_t size) {
    if (fail_aligned_alloc) {
        errno = ENOMEM;
        return NULL;
    }
    void *mem = NULL;
    if (align < sizeof(void *)) align = sizeof(void *);
    return posix_memalign(&mem, align, size) == 0 ? mem : NULL;
}

/* A timer started in a callback with a deadline already due is parked until
 * the dispatch ends and inserted then. Its room in the heap is taken when it
 * is parked: taken at the insert, it could be missing by then (other starts
 * in the same dispatch filled the heap, and memory ran out), and the timer
 * would become inactive and never run although tl_timer_start returned 0. */
#define ROOMY 5000
struct roomy {
    tl_timer first, parked, future[ROOMY];
    int first_fired, parked_fired, started, refused;
};

static void on_parked(tl_loop *loop, tl_timer *t) {
    (void)loop;
    ((struct roomy *)t->data)->parked_fired++;
}

static void on_roomy_first(tl_loop *loop, tl_timer *t) {
    struct roomy *r = t->data;
    r->first_fired = 1;
    int e = tl_timer_start(loop, &r->parked, 0, 0); /* due now: parked */
    cr_assert(e == 0, "parked start: %s", tl_strerror(e));
    /* Memory runs out; more timers are started until the backend is full. */
    fail_aligned_alloc = 1;
    for (int i = 0; i < ROOMY; ++i) {
        e = tl_timer_start(loop, &r->future[i], (uint64_t)(i + 1) * 1000 * MS, 0);
        if (e == -ENOMEM) {
            r->refused++;
            cr_assert(!tl_timer_active(&r->future[i]));
            break;
        }
        cr_assert(e == 0, "start %d: %s", i, tl_strerror(e));
        r->started++;
    }
}

BACKEND_TEST(timer, due_start_in_callback_is_not_lost_when_memory_runs_out) {
    tl_loop *loop = new_loop_with(p->name);
    static struct roomy r;
    memset(&r, 0, sizeof r);
    tl_timer_init(&r.first, on_roomy_first, &r);
    tl_timer_init(&r.parked, on_parked, &r);
    for (int i = 0; i < ROOMY; ++i) tl_timer_init(&r.future[i], on_parked, &r);
    cr_assert(tl_timer_start(loop, &r.first, 0, 0) == 0);
    /* Due at once, but a wheel runs it only once its tick has passed. */
    run_until_set(loop, &r.first_fired, 10000);
    fail_aligned_alloc = 0;
    cr_assert(tl_timer_active(&r.parked),
              "%s: the timer started in the callback (start returned 0) was dropped "
              "(%d timers started after it, %d refused)",
              p->name, r.started, r.refused);
    run_until_set(loop, &r.parked_fired, 10000);
    cr_assert(r.parked_fired == 1, "%s: parked timer ran %d times", p->name, r.parked_fired);
    for (int i = 0; i < ROOMY; ++i) cr_assert(tl_timer_stop(loop, &r.future[i]) == 0);
    free_loop(loop);
}

/* The dispatch collects and runs in chunks (256 timers, loop/timer.cc): a
 * timer a callback (re)starts as due at once must not be popped by a later
 * chunk of the same dispatch, and ties still run in start order across
 * chunks. 600 timers share one deadline; the first to run restarts itself
 * with timeout 0 and starts one more timer with timeout 0. */
#define CHUNKED 600
struct chunked {
    tl_timer t[CHUNKED];
    tl_timer extra;
    int fired[CHUNKED];
    int extra_fired;
    int order[CHUNKED];
    int n;
    int restarted;
};

static void on_chunked(tl_loop *loop, tl_timer *t) {
    struct chunked *c = t->data;
    if (t == &c->extra) {
        ++c->extra_fired;
        return;
    }
    int i = (int)(t - c->t);
    if (c->n < CHUNKED) c->order[c->n++] = i;
    ++c->fired[i];
    if (!c->restarted) {
        c->restarted = 1;
        cr_assert(tl_timer_start(loop, t, 0, 0) == 0);
        cr_assert(tl_timer_start(loop, &c->extra, 0, 0) == 0);
        cr_assert(tl_timer_active(t) && tl_timer_active(&c->extra));
    }
}

BACKEND_TEST(timer, due_starts_in_callbacks_wait_for_the_next_iteration_across_chunks) {
    tl_loop *loop = new_loop_with(p->name);
    static struct chunked c;
    memset(&c, 0, sizeof c);
    tl_timer_init(&c.extra, on_chunked, &c);
    for (int i = 0; i < CHUNKED; ++i) {
        tl_timer_init(&c.t[i], on_chunked, &c);
        cr_assert(tl_timer_start(loop, &c.t[i], 1 * MS, 0) == 0);
    }
    const struct timespec pause = {0, 4 * 1000000};
    nanosleep(&pause, NULL);
    cr_assert(tl_loop_run(loop, TL_RUN_NOWAIT) == 1);
    tl_loop_stats st;
    tl_loop_stats_get(loop, &st);
    cr_assert(st.timers_active == 2,
              "%s: %llu active after the dispatch, expected the restarted "
              "timer and the extra one",
              p->name, (unsigned long long)st.timers_active);
    for (int i = 0; i < CHUNKED; ++i)
        cr_assert(c.fired[i] == 1, "%s: timer %d ran %d times in one dispatch", p->name, i,
                  c.fired[i]);
    cr_assert(c.extra_fired == 0, "%s: a timer started due in a callback ran in the same dispatch",
              p->name);
    if (backend_exact(p->name))
        for (int i = 0; i < CHUNKED; ++i)
            cr_assert(c.order[i] == i, "%s: position %d ran timer %d: ties out of start order",
                      p->name, i, c.order[i]);
    run_to_end(loop);
    int total = 0;
    for (int i = 0; i < CHUNKED; ++i) total += c.fired[i];
    cr_assert(total == CHUNKED + 1 && c.extra_fired == 1, "%s: %d + %d callbacks", p->name, total,
              c.extra_fired);
    free_loop(loop);
}

/* A timer popped in this dispatch but not yet run is still active: the
 * callback that runs first (of three due together) sees the other two active
 * and counted in stats.timers_active; stopping one of them then means it
 * never runs, and restarting the other moves it out of this dispatch (both
 * unlink it from the ready list). */
struct queued {
    tl_timer t[3];
    int ran[3];
    int first;     /* index of the one that ran first, -1 before */
    int stopped;   /* index it stopped */
    int restarted; /* index it restarted */
};

static void on_queued(tl_loop *loop, tl_timer *t) {
    struct queued *q = t->data;
    int i = (int)(t - q->t);
    ++q->ran[i];
    if (q->first >= 0) return;
    q->first = i;
    q->stopped = (i + 1) % 3;
    q->restarted = (i + 2) % 3;
    tl_timer *stop = &q->t[q->stopped], *restart = &q->t[q->restarted];
    cr_assert(tl_timer_active(stop) == 1 && tl_timer_active(restart) == 1,
              "a due timer waiting its turn is active");
    tl_loop_stats st;
    tl_loop_stats_get(loop, &st);
    cr_assert(st.timers_active == 2, "timers_active %llu counts the two queued timers",
              (unsigned long long)st.timers_active);
    cr_assert(tl_timer_stop(loop, stop) == 0);
    cr_assert(tl_timer_active(stop) == 0);
    cr_assert(tl_timer_start(loop, restart, 50 * MS, 0) == 0);
    tl_loop_stats_get(loop, &st);
    cr_assert(st.timers_active == 1, "timers_active %llu", (unsigned long long)st.timers_active);
}

BACKEND_TEST(timer, queued_timer_is_active_and_stops_in_o1) {
    tl_loop *loop = new_loop_with(p->name);
    struct queued q = {.first = -1};
    for (int i = 0; i < 3; ++i) {
        tl_timer_init(&q.t[i], on_queued, &q);
        cr_assert(tl_timer_start(loop, &q.t[i], 1 * MS, 0) == 0);
    }
    /* Past the deadline and its tick: one dispatch finds all three due. */
    const struct timespec pause = {0, 4 * 1000000};
    nanosleep(&pause, NULL);
    cr_assert(tl_loop_run(loop, TL_RUN_NOWAIT) == 1);
    cr_assert(q.first >= 0, "%s: nothing ran", p->name);
    cr_assert(q.ran[q.stopped] == 0 && q.ran[q.restarted] == 0,
              "%s: a stopped or restarted queued timer ran", p->name);
    cr_assert(tl_timer_active(&q.t[q.restarted]) == 1 && tl_timer_active(&q.t[q.stopped]) == 0);
    uint64_t deadline = q.t[q.restarted].deadline;
    run_to_end(loop);
    cr_assert(q.ran[q.restarted] == 1 && q.ran[q.stopped] == 0 && q.ran[q.first] == 1);
    cr_assert(tl_now(loop) >= deadline, "never early");
    free_loop(loop);
}

struct starve {
    struct self_restart spinner;
    tl_timer ender;
    int ender_runs;
};

/* Stops the spinner once it has run twice: on a wheel it runs once per
   tick, and a loaded machine may wake the loop only after the ender is due
   too (then the ender waits another 5 ms). */
static void on_end_spinner(tl_loop *loop, tl_timer *t) {
    struct starve *st = t->data;
    if (st->spinner.count < 2 && ++st->ender_runs < 100) {
        cr_assert(tl_timer_start(loop, t, 5 * MS, 0) == 0);
        return;
    }
    cr_assert(tl_timer_stop(loop, &st->spinner.timer) == 0);
}

BACKEND_TEST(timer, zero_timeout_restart_does_not_starve_the_loop) {
    tl_loop *loop = new_loop_with(p->name);
    struct starve st = {.spinner = {.limit = 1000000000, .timeout = 0}};
    tl_timer_init(&st.spinner.timer, on_restart_self, &st.spinner);
    tl_timer_init(&st.ender, on_end_spinner, &st);
    uint64_t begin = tl_now(loop); /* the ender's deadline is begin + 5 ms */
    cr_assert(tl_timer_start(loop, &st.spinner.timer, 0, 0) == 0);
    cr_assert(tl_timer_start(loop, &st.ender, 5 * MS, 0) == 0);
    run_to_end(loop); /* would never return if the spinner starved the ender */
    cr_assert(mono_ns() - begin >= 5 * MS);
    cr_assert(st.spinner.count >= 2, "%s: spinner ran %d times", p->name, st.spinner.count);
    free_loop(loop);
}

/* Callbacks that stop and restart random timers, checked against a model:
 * a timer fires only while armed, at its latest deadline, never in the
 * iteration that (re)started it, and every arming ends in one fire or one
 * stop. */
#define CHURN_TIMERS 300

struct churn {
    tl_timer timers[CHURN_TIMERS];
    int armed[CHURN_TIMERS];
    uint64_t deadline[CHURN_TIMERS];
    uint64_t armed_in[CHURN_TIMERS]; /* stats.iterations when (re)started */
    uint64_t rng;
    int budget; /* restarts left, so that the run ends */
    int arms, stops, fires;
    const char *backend;
};

static uint64_t churn_rand(struct churn *c) {
    c->rng ^= c->rng << 13;
    c->rng ^= c->rng >> 7;
    c->rng ^= c->rng << 17;
    return c->rng;
}

static uint64_t iterations_of(tl_loop *loop) {
    tl_loop_stats st;
    tl_loop_stats_get(loop, &st);
    return st.iterations;
}

/* in_callback: armed during an iteration (whose callbacks see the count of
 * iterations completed before it), else before the run. */
static void churn_arm(tl_loop *loop, struct churn *c, int j, uint64_t timeout, int in_callback) {
    cr_assert(tl_timer_start(loop, &c->timers[j], timeout, 0) == 0);
    cr_assert(c->timers[j].deadline == tl_now(loop) + timeout);
    if (c->armed[j]) c->stops++; /* a restart ends the previous arming */
    c->armed[j] = 1;
    c->deadline[j] = c->timers[j].deadline;
    c->armed_in[j] = in_callback ? iterations_of(loop) : UINT64_MAX;
    c->arms++;
}

static void on_churn(tl_loop *loop, tl_timer *t) {
    struct churn *c = t->data;
    int i = (int)(t - c->timers);
    cr_assert(c->armed[i], "%s: timer %d fired while stopped", c->backend, i);
    cr_assert(t->deadline == c->deadline[i], "%s: timer %d fired for an old deadline", c->backend,
              i);
    cr_assert(tl_now(loop) >= t->deadline && mono_ns() >= t->deadline, "%s: fired early",
              c->backend);
    cr_assert(iterations_of(loop) != c->armed_in[i],
              "%s: timer %d ran in the iteration that started it", c->backend, i);
    c->armed[i] = 0;
    c->fires++;
    for (int k = 0; k < 2; ++k) {
        int j = (int)(churn_rand(c) % CHURN_TIMERS);
        uint64_t action = churn_rand(c) % 8;
        if (action == 0 && c->armed[j]) {
            cr_assert(tl_timer_stop(loop, &c->timers[j]) == 0);
            c->armed[j] = 0;
            c->stops++;
        } else if (action <= 5 && c->budget > 0) {
            c->budget--;
            /* Often 0 (due at once: must still wait an iteration). */
            uint64_t timeout = action == 1 ? 0 : (churn_rand(c) % 10000) * 1000;
            churn_arm(loop, c, j, timeout, 1);
        }
    }
}

BACKEND_TEST(timer, random_stops_and_restarts_in_callbacks) {
    tl_loop *loop = new_loop_with(p->name);
    static struct churn c;
    memset(&c, 0, sizeof c);
    c.backend = p->name;
    c.rng = 0x9e3779b97f4a7c15ull;
    c.budget = 1500;
    for (int i = 0; i < CHURN_TIMERS; ++i) tl_timer_init(&c.timers[i], on_churn, &c);
    for (int i = 0; i < CHURN_TIMERS; ++i)
        churn_arm(loop, &c, i, (churn_rand(&c) % 20000) * 1000, 0);
    run_to_end(loop);
    for (int i = 0; i < CHURN_TIMERS; ++i)
        cr_assert(!c.armed[i] && !tl_timer_active(&c.timers[i]), "%s: timer %d still armed",
                  p->name, i);
    cr_assert(c.fires == c.arms - c.stops, "%s: %d armings, %d stopped, %d fired", p->name, c.arms,
              c.stops, c.fires);
    cr_assert(c.budget == 0 && c.fires > CHURN_TIMERS,
              "%s: the run did too little: %d fires, %d restarts left", p->name, c.fires, c.budget);
    free_loop(loop);
}
