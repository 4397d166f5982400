/* SPDX-License-Identifier: MIT */
/*
 * Restarts through the loop, on every timer backend (and, through meson,
 * both I/O backends): timers a callback restarts as due, on their own clock
 * or onto another, wait for the next iteration; restarts to later deadlines
 * leave no wake-up at the old deadline and never fire early; ties keep
 * their (re)start order.
 *
 * Time is driven by hand through the loop's test seam (NOWAIT runs), so
 * the counts are exact; deadlines are multiples of the wheels' 1 ms tick.
 */
#define _GNU_SOURCE /* setenv in loop_setup.h */
#include <criterion/criterion.h>

#include "backend_params.h"
#include "loop_helpers.h"

#define SEC (1000 * MS)

/* ------------------------------------------------------------------------ */
/* A custom backend without reserve, registered before the parameters are  */
/* drawn, so that BACKEND_TEST runs on it too: the loop keeps a due start   */
/* in a dispatch out of that dispatch another way for such a backend.       */
/* A sorted doubly-linked list (examples/custom_backend.c's): link[0] next, */
/* link[1] prev; ties in insertion order, so it is exact.                  */
/* ------------------------------------------------------------------------ */

struct sorted {
    tl_timer *head, *tail;
    size_t count;
};

#define NEXT(t) ((tl_timer *)(t)->link[0])
#define PREV(t) ((tl_timer *)(t)->link[1])

static void *sorted_create(const tl_timer_config *cfg, uint64_t now) {
    (void)cfg;
    (void)now;
    return calloc(1, sizeof(struct sorted));
}
static void sorted_destroy(void *self) {
    free(self);
}
static int sorted_insert(void *self, tl_timer *t) {
    struct sorted *l = self;
    tl_timer *after = l->tail;
    while (after && after->deadline > t->deadline) after = PREV(after);
    tl_timer *before = after ? NEXT(after) : l->head;
    t->link[1] = (uintptr_t)after;
    t->link[0] = (uintptr_t)before;
    if (after)
        after->link[0] = (uintptr_t)t;
    else
        l->head = t;
    if (before)
        before->link[1] = (uintptr_t)t;
    else
        l->tail = t;
    ++l->count;
    return 0;
}
static void sorted_remove(void *self, tl_timer *t) {
    struct sorted *l = self;
    if (PREV(t))
        PREV(t)->link[0] = t->link[0];
    else
        l->head = NEXT(t);
    if (NEXT(t))
        NEXT(t)->link[1] = t->link[1];
    else
        l->tail = PREV(t);
    --l->count;
}
static uint64_t sorted_next(void *self) {
    struct sorted *l = self;
    return l->head ? l->head->deadline : UINT64_MAX;
}
static tl_timer *sorted_pop(void *self, uint64_t now) {
    struct sorted *l = self;
    tl_timer *t = l->head;
    if (!t || t->deadline > now) return NULL;
    sorted_remove(self, t);
    return t;
}
static size_t sorted_count(void *self) {
    return ((struct sorted *)self)->count;
}

static const tl_timer_backend sorted_backend = {
    .name = "restarts-sorted-no-reserve",
    .create = sorted_create,
    .destroy = sorted_destroy,
    .insert = sorted_insert,
    .remove = sorted_remove,
    .next_expiry = sorted_next,
    .pop_expired = sorted_pop,
    .count = sorted_count,
    .caps = TL_TIMER_CAP_EXACT,
};

__attribute__((constructor)) static void register_sorted(void) {
    if (tl_timer_backend_register(&sorted_backend) < 0) abort();
}

/* The loop's test seam (loop/clock.cc; hidden, reached through the static
 * library). */
typedef uint64_t (*tl_detail_clock_fn)(int clock, void *ctx);
void tl_detail_loop_set_clock(tl_loop *loop, tl_detail_clock_fn read, void *ctx);

struct fake {
    uint64_t t[3];
};

static uint64_t fake_read(int clock, void *ctx) {
    return ((struct fake *)ctx)->t[clock];
}

/* A loop on backend `timers` whose clocks read f: far from 0 and from each
 * other, tick-aligned. */
static tl_loop *fake_loop(const char *timers, struct fake *f) {
    f->t[TL_CLOCK_MONOTONIC] = 1000 * SEC;
    f->t[TL_CLOCK_BOOTTIME] = 5000 * SEC;
    f->t[TL_CLOCK_REALTIME] = 1767225600ull * SEC;
    tl_loop *loop = new_loop_with(timers);
    tl_detail_loop_set_clock(loop, fake_read, f);
    return loop;
}

static void nowait(tl_loop *loop) {
    cr_assert_geq(tl_loop_run(loop, TL_RUN_NOWAIT), 0);
    check_loop(loop);
}

/* ------------------------------------------------------------------------ */
/* Due restarts by a callback, across clocks                                */
/* ------------------------------------------------------------------------ */

#define SIX 6

/* Six timers, two per clock, all due. The first callback to run restarts
 * the other five as due, by `how`, some onto another clock. */
struct six {
    struct fake *f;
    tl_timer t[SIX];
    int fired[SIX];
    int calls;
    int how;
};

enum { DUE_AT_LOOP_NOW, DUE_IN_THE_PAST, DUE_RELATIVE_ZERO, HOW_COUNT };

/* Restarts timer i of s, as due, onto clock (i + 1) % 3 for odd i (another
   clock) and onto its own clock for even i. */
static void restart_due(tl_loop *loop, struct six *s, int i) {
    tl_clock c = (tl_clock)(i % 3);
    if (i % 2) c = (tl_clock)((i + 1) % 3);
    uint64_t when = s->how == DUE_IN_THE_PAST ? s->f->t[c] - 3 * SEC : tl_loop_now(loop, c);
    int r = s->how == DUE_RELATIVE_ZERO && i % 2 ? tl_timer_start(loop, &s->t[i], 0, 0)
                                                 : tl_timer_start_at(loop, &s->t[i], c, when, 0);
    cr_assert_eq(r, 0, "restart of timer %d: %s", i, tl_strerror(r));
}

static void six_cb(tl_loop *loop, tl_timer *t) {
    struct six *s = t->data;
    int i = (int)(t - s->t);
    s->fired[i]++;
    if (s->calls++ > 0) return;
    for (int k = 0; k < SIX; ++k)
        if (k != i) restart_due(loop, s, k);
}

BACKEND_TEST(restarts, due_restarts_across_clocks_wait_for_the_next_iteration) {
    for (int how = 0; how < HOW_COUNT; ++how) {
        struct fake f;
        tl_loop *loop = fake_loop(p->name, &f);
        struct six s = {.f = &f, .how = how};
        for (int i = 0; i < SIX; ++i) {
            tl_clock c = (tl_clock)(i % 3);
            tl_timer_init(&s.t[i], six_cb, &s);
            cr_assert_eq(tl_timer_start_at(loop, &s.t[i], c, f.t[c] - SEC, 0), 0);
        }
        nowait(loop);
        cr_assert_eq(s.calls, 1, "%s, restart kind %d: %d callbacks ran in the iteration", p->name,
                     how, s.calls);
        for (int i = 0; i < SIX; ++i) cr_assert(s.fired[i] || tl_timer_active(&s.t[i]));
        nowait(loop);
        cr_assert_eq(s.calls, SIX, "%s, restart kind %d: %d of the five ran next", p->name, how,
                     s.calls - 1);
        for (int i = 0; i < SIX; ++i)
            cr_assert_eq(s.fired[i], 1, "%s, restart kind %d: timer %d ran %d times", p->name, how,
                         i, s.fired[i]);
        free_loop(loop);
    }
}
