/* SPDX-License-Identifier: MIT */
/*
 * custom_backend: how to plug your own timer structure into tickloop.
 *
 * A timer backend is a data structure of tl_timer handles ordered by their
 * absolute deadline, given to the library as a table of functions
 * (tl_timer_backend, in <tickloop/timer_backend.h>) and registered under a
 * name; a loop created with that name in tl_loop_options.timers (or in the
 * TICKLOOP_TIMERS environment variable) then uses it. This one is a sorted
 * doubly-linked list: O(n) insert, O(1) remove and pop. It suits a program
 * with a handful of timers, and shows every part of the contract:
 * - the node lives in the handle: link[0] = next, link[1] = prev (the three
 *   link words belong to the backend while the timer is inside), so the
 *   backend allocates nothing per timer;
 * - no clock reads: pop_expired(now) and next_expiry() work only from the
 *   `now` they are given, so the structure can be tested deterministically;
 * - `caps` says what it guarantees. An insert walks back from the tail past
 *   later deadlines only, so equal deadlines keep insertion order and the
 *   list fires exactly at the deadline: TL_TIMER_CAP_EXACT. The loop (in
 *   debug builds), the library's conformance suite and this program hold it
 *   to that; a backend that fires by ticks leaves caps 0;
 * - reschedule is optional (NULL): the loop then restarts a timer with
 *   remove + insert.
 *
 * The program registers the backend, runs a loop on it with three one-shot
 * timers (two of them due at the same time) and a repeating one, prints each
 * callback, and exits 0 only if they ran in (deadline, start) order and
 * never early. --timers runs the same timers on another registered backend
 * instead, for comparison (a backend without TL_TIMER_CAP_EXACT is held to
 * "never early" only, ties in one tick may come in any order).
 *
 *   custom_backend [--io epoll|io_uring|auto] [--timers NAME] [--help]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tickloop/tickloop.h>
#include <tickloop/timer_backend.h>

#include "example_options.h"
#include "loop_new_error.h"

#define MS 1000000ull

/* ---- the backend ------------------------------------------------------- */

struct sorted_list {
    tl_timer *head, *tail;
    size_t count;
};

static tl_timer *next_of(const tl_timer *t) {
    return (tl_timer *)t->link[0];
}
static tl_timer *prev_of(const tl_timer *t) {
    return (tl_timer *)t->link[1];
}

/* A new, empty list. The configuration (tick, wheel size) is for wheels. */
static void *list_create(const tl_timer_config *cfg, uint64_t now) {
    (void)cfg;
    (void)now;
    return calloc(1, sizeof(struct sorted_list));
}

static void list_destroy(void *self) {
    free(self);
}

/* Pre: t->deadline set, t not inside. Post: t after every timer whose
 * deadline is <= its own (so ties keep insertion order). Never fails. */
static int list_insert(void *self, tl_timer *t) {
    struct sorted_list *l = self;
    tl_timer *after = l->tail;
    while (after && after->deadline > t->deadline) after = prev_of(after);
    tl_timer *before = after ? next_of(after) : l->head;
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

/* Pre: t inside. Post: t not inside. */
static void list_remove(void *self, tl_timer *t) {
    struct sorted_list *l = self;
    if (prev_of(t))
        prev_of(t)->link[0] = (uintptr_t)next_of(t);
    else
        l->head = next_of(t);
    if (next_of(t))
        next_of(t)->link[1] = (uintptr_t)prev_of(t);
    else
        l->tail = prev_of(t);
    --l->count;
}

/* The earliest deadline (exactly, as TL_TIMER_CAP_EXACT promises). */
static uint64_t list_next_expiry(void *self) {
    struct sorted_list *l = self;
    return l->head ? l->head->deadline : UINT64_MAX;
}

/* The earliest timer if it is due at now, removed; else NULL. */
static tl_timer *list_pop_expired(void *self, uint64_t now) {
    struct sorted_list *l = self;
    tl_timer *t = l->head;
    if (!t || t->deadline > now) return NULL;
    list_remove(self, t);
    return t;
}

static size_t list_count(void *self) {
    return ((struct sorted_list *)self)->count;
}

/* Static and const: the registry keeps the pointer for the life of the
 * process. */
static const tl_timer_backend sorted_list_backend = {
    .name = "sorted_list",
    .create = list_create,
    .destroy = list_destroy,
    .insert = list_insert,
    .remove = list_remove,
    .reschedule = NULL, /* optional: the loop uses remove + insert */
    .next_expiry = list_next_expiry,
    .pop_expired = list_pop_expired,
    .count = list_count,
    .caps = TL_TIMER_CAP_EXACT,
};

/* ---- a program that uses it -------------------------------------------- */

struct job {
    tl_timer timer;
    const char *name;
    int expect;   /* its place in the firing order (first callback) */
    uint64_t due; /* the deadline this callback is for */
};

static int fired, failures;
static int exact = 1; /* the loop's backend promises (deadline, start) order */

static void on_timer(tl_loop *loop, tl_timer *t) {
    struct job *j = t->data;
    uint64_t now = tl_now(loop);
    /* A repeating timer is re-armed before its callback: t->deadline is
       already the next one here, so the one being served was kept. */
    uint64_t due = j->due;
    j->due = t->deadline;
    printf("%-8s fired #%d at +%llu us%s\n", j->name, fired, (unsigned long long)(now - due) / 1000,
           now < due ? "  EARLY" : "");
    if (now < due) ++failures;
    if (j->expect >= 0) {
        if (exact && j->expect != fired) {
            printf("  expected #%d\n", j->expect);
            ++failures;
        }
        j->expect = -1;
    }
    ++fired;
    if (t->repeat && fired >= 6) tl_timer_stop(loop, t);
}

static void usage(FILE *out, const char *argv0) {
    fprintf(out,
            "usage: %s [--io epoll|io_uring|auto] [--timers NAME] [--help]\n"
            "Registers \"%s\", a timer backend written in C (a sorted list), runs three\n"
            "one-shot timers and a repeating one on it, and checks they fire in (deadline,\n"
            "start) order and never early (tickloop %s).\n"
            "  --io KIND      I/O backend (default auto)\n"
            "  --timers NAME  run on another registered backend instead, for comparison\n"
            "                 (heap2, heap4, wheel, hwheel, %s)\n",
            argv0, sorted_list_backend.name, tl_version(), sorted_list_backend.name);
}

int main(int argc, char **argv) {
    tl_loop_options opts;
    tl_loop_options_init(&opts);
    opts.timers = sorted_list_backend.name;
    for (int i = 1; i < argc; i += 2) {
        const char *opt = argv[i], *val = argv[i + 1]; /* argv[argc] is NULL */
        if (strcmp(opt, "--help") == 0) {
            usage(stdout, argv[0]);
            return 0;
        } else if (val && strcmp(opt, "--io") == 0 && parse_io_kind(val, &opts.io) == 0) {
            /* parse_io_kind stored the backend */
        } else if (val && strcmp(opt, "--timers") == 0) {
            opts.timers = val; /* an unknown name: loop_new_error.h says so */
        } else {
            static const char *const known[] = {"--io", "--timers"};
            report_bad_option(argv[0], opt, val, known, sizeof known / sizeof known[0]);
            usage(stderr, argv[0]);
            return 2;
        }
    }

    int r = tl_timer_backend_register(&sorted_list_backend);
    if (r < 0) {
        fprintf(stderr, "custom_backend: register: %s\n", tl_strerror(r));
        return 1;
    }
    tl_loop *loop;
    r = tl_loop_new(&loop, &opts);
    if (r < 0) {
        report_loop_new_error("custom_backend", r, opts.timers);
        return 1;
    }
    /* Order is checked where the backend promises it (TL_TIMER_CAP_EXACT). */
    exact = (tl_timer_backend_find(tl_loop_timers_name(loop))->caps & TL_TIMER_CAP_EXACT) != 0;
    printf("timers: %s, io: %s\n", tl_loop_timers_name(loop), tl_loop_io_name(loop));

    /* Started in the order late, tie_a, tie_b, repeat: tie_a and tie_b share
       one deadline and must fire in start order; the repeat fires first (at
       4 ms) and, re-armed 7 ms after its callback, again only after "late",
       however late the loop runs. */
    struct job jobs[] = {
        {.name = "late", .expect = 3},
        {.name = "tie_a", .expect = 1},
        {.name = "tie_b", .expect = 2},
        {.name = "repeat", .expect = 0},
    };
    for (size_t i = 0; i < sizeof jobs / sizeof jobs[0]; ++i)
        tl_timer_init(&jobs[i].timer, on_timer, &jobs[i]);
    const uint64_t timeout[] = {10 * MS, 6 * MS, 6 * MS, 4 * MS};
    for (size_t i = 0; i < sizeof jobs / sizeof jobs[0]; ++i) {
        r = tl_timer_start(loop, &jobs[i].timer, timeout[i], i == 3 ? 7 * MS : 0);
        if (r < 0) {
            fprintf(stderr, "tl_timer_start: %s\n", tl_strerror(r));
            return 1;
        }
        jobs[i].due = jobs[i].timer.deadline;
    }

    r = tl_loop_run(loop, TL_RUN_DEFAULT);
    if (r < 0) {
        fprintf(stderr, "tl_loop_run: %s\n", tl_strerror(r));
        return 1;
    }
    tl_loop_free(loop);
    printf("%d callbacks, %s\n", fired,
           failures ? (exact ? "OUT OF ORDER" : "EARLY") : (exact ? "in order" : "none early"));
    return failures || fired != 6 ? 1 : 0;
}
