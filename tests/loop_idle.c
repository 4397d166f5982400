/* SPDX-License-Identifier: MIT */
/*
 * A loop holding 1e6 idle timers that do not come due during the test must
 * not wake for them: with next_expiry reporting the earliest real deadline
 * (wheels included), the only wake-up is the one that ends the test.
 * Parameterised over every registered timer backend.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdlib.h>

#include <tickloop/tickloop.h>

#include "backend_params.h"

enum { kIdle = 1000000 };
static const uint64_t kMs = 1000000;

static void never(tl_loop *loop, tl_timer *t) {
    (void)loop;
    cr_assert_fail("idle timer %p fired at %llu, deadline %llu", (void *)t,
                   (unsigned long long)tl_now(loop), (unsigned long long)t->deadline);
}

static void stop_all(tl_loop *loop, tl_timer *t) {
    tl_timer *idle = t->data;
    for (size_t i = 0; i < kIdle; i++) tl_timer_stop(loop, &idle[i]);
}

ParameterizedTestParameters(loop_idle, million_idle_timers_cause_no_wakeups) {
    return backend_params();
}

ParameterizedTest(backend_param *p, loop_idle, million_idle_timers_cause_no_wakeups,
                  .timeout = 120) {
    tl_loop_options opts;
    tl_loop_options_init(&opts);
    opts.timers = p->name;
    tl_loop *loop;
    cr_assert_eq(tl_loop_new(&loop, &opts), 0);
    tl_timer *idle = malloc(kIdle * sizeof *idle);
    cr_assert(idle);
    /* Deadlines spread from 60 s to about 17 minutes: many wheel slots and
       levels are occupied, none comes due. */
    for (size_t i = 0; i < kIdle; i++) {
        tl_timer_init(&idle[i], never, NULL);
        cr_assert_eq(
            tl_timer_start(loop, &idle[i], 60000 * kMs + (i * 2654435761u) % 1000000 * kMs, 0), 0);
    }
    tl_timer end;
    tl_timer_init(&end, stop_all, idle);
    cr_assert_eq(tl_timer_start(loop, &end, 1000 * kMs, 0), 0);
    tl_loop_stats before, after;
    tl_loop_stats_get(loop, &before);
    cr_assert_eq(tl_loop_run(loop, TL_RUN_DEFAULT), 0);
    tl_loop_stats_get(loop, &after);
    uint64_t iterations = after.iterations - before.iterations;
    uint64_t empty = after.empty_wakeups - before.empty_wakeups;
    /* One iteration fires `end`; allow one early wake-up for a slow clock. */
    cr_assert_leq(iterations, 2, "%s: %llu iterations (%llu empty) in 1 s", p->name,
                  (unsigned long long)iterations, (unsigned long long)empty);
    cr_assert_eq(tl_loop_free(loop), 0);
    free(idle);
}
