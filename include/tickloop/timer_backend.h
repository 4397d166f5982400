/* SPDX-License-Identifier: MIT */
/*
 * tickloop: the timer-backend interface, for registering a custom backend.
 *
 * A backend is a pure data structure of tl_timer handles ordered by their
 * absolute deadline. It is driven only by the `now` values it is given (no
 * clock reads), so it can be tested deterministically. The loop owns the
 * handles' `flags`; the backend owns `link[3]` while a timer is inside it.
 *
 * Rules every backend keeps (the conformance suite checks them):
 * - pop_expired(now) never returns a timer whose deadline is > now. It returns
 *   every timer whose deadline is <= now rounded down to a multiple of tick_ns,
 *   in tick order (ceil(deadline / tick_ns) non-decreasing). A returned timer
 *   is no longer inside.
 * - A backend that says more in `caps` keeps that too: TL_TIMER_CAP_EXACT
 *   (the built-in heaps) means every timer with deadline <= now, in
 *   (deadline, insertion) order, and next_expiry() is the earliest deadline.
 *   The loop, the conformance suite and the tests read `caps`, never a
 *   backend's name.
 * - next_expiry() is a time before which pop_expired can return nothing, and
 *   pop_expired(t) for t >= next_expiry() makes progress: it returns a timer or
 *   advances internal state so that repeating the pair reaches every timer
 *   within a bounded number of empty rounds (at most the number of wheel
 *   levels per timer).
 * - Deadlines may be anywhere in [0, UINT64_MAX], also before the last now
 *   the backend was given (an absolute timer whose time has passed): such a
 *   timer is due at the next pop_expired. The `now` values given to one
 *   instance never decrease (after a wall-clock step back, the loop moves the
 *   timers into a fresh instance created at the new time).
 * - Leeway: a timer may carry one (tl_timer_leeway(t), read at insert and
 *   reschedule; it may change while the timer is inside, so a backend keeps
 *   what it derived from it). The timer may then be handed out at any time in
 *   [deadline, deadline + leeway]. A backend may ignore leeway (it then fires
 *   as without). One that uses it either places the timer at a fire time in
 *   that window and keeps the rules above for the fire time instead of the
 *   deadline (a wheel filing it into a coarser slot: no timer is ever handed
 *   out before its deadline, nor later than its window plus one tick), or
 *   keeps the deadline order and provides next_wakeup() (a heap): the time by
 *   which pop_expired must be called, at most the earliest deadline + leeway
 *   inside, so that the loop sleeps until then and runs, in one wake-up,
 *   every timer whose deadline has passed.
 *
 * Pure C11; compiles as C and as C++ on its own.
 */
#ifndef TICKLOOP_TIMER_BACKEND_H
#define TICKLOOP_TIMER_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "tickloop.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tl_timer_config {
    uint64_t tick_ns;     /* wheel granularity, > 0 (the loop passes 1 ms by default) */
    uint32_t wheel_slots; /* single-level wheel size, a power of two                  */
} tl_timer_config;

/* tl_timer_backend::caps bits: what a backend guarantees beyond the rules
 * above. Zero, the value a backend written before `caps` existed gets, is
 * the tick-order rule. */
enum {
    /* Fires exactly at the deadline: pop_expired(now) returns every timer
       whose deadline is <= now (no tick rounding), in (deadline, insertion)
       order, where a reschedule counts as an insertion; next_expiry() is the
       earliest deadline inside, exactly. */
    TL_TIMER_CAP_EXACT = 1u << 0
};

typedef struct tl_timer_backend {
    const char *name;
    /* A new, empty structure whose time starts at now; NULL on failure. */
    void *(*create)(const tl_timer_config *cfg, uint64_t now);
    void (*destroy)(void *self);
    /* t->deadline is set and t is not inside. Returns 0, or -ENOMEM (t not
       inserted). */
    int (*insert)(void *self, tl_timer *t);
    /* t is inside; afterwards it is not. */
    void (*remove)(void *self, tl_timer *t);
    /* t is inside; moves it to deadline (and sets t->deadline). May be NULL,
       then the loop uses remove + insert. A rescheduled timer counts as newly
       inserted for tie order. */
    void (*reschedule)(void *self, tl_timer *t, uint64_t deadline);
    /* UINT64_MAX when empty. */
    uint64_t (*next_expiry)(void *self);
    /* One due timer, or NULL. */
    tl_timer *(*pop_expired)(void *self, uint64_t now);
    size_t (*count)(void *self);
    /* TL_TIMER_CAP_* bits; 0: tick order only. */
    uint32_t caps;
    /* Optional (NULL: the loop wakes at next_expiry()). The latest time at
       which the loop may next call pop_expired and still hand out every
       timer inside within [deadline, deadline + leeway]: at most the minimum
       over the timers inside of deadline + leeway, and at least
       next_expiry(); UINT64_MAX when empty. */
    uint64_t (*next_wakeup)(void *self);
    /* Optional (NULL: not provided; a backend whose insert cannot fail needs
       none). Makes room for n more timers than are inside now, t among them
       (its leeway read as insert would read it), so that that many inserts
       return 0 without allocating. Returns 0, or -ENOMEM with nothing
       changed. The loop calls it when it accepts a timer that it will
       insert only later (one started during a dispatch with a deadline
       already due waits for the dispatch's end): tl_timer_start has then
       already returned 0, and an insert failing at that point would drop
       the timer. Without it, the loop inserts such a timer at its start
       (a failed insert is tl_timer_start's error) and, if the running
       dispatch pops it, keeps it for the next one: pop_expired may then
       return a timer the loop does not run at once. */
    int (*reserve)(void *self, const tl_timer *t, size_t n);
    /* ABI: the struct has a fixed size, TL_TIMER_BACKEND_SIZE bytes, for the
       life of the soname (docs/abi.md). An operation added later is an
       optional pointer in place of a reserved word, NULL meaning "not
       provided", so a backend written before it existed keeps working.
       Leave them zero (a static const object with designated initialisers
       does); tl_timer_backend_register() returns -EINVAL otherwise.        */
    void *reserved[4];
} tl_timer_backend;

#define TL_TIMER_BACKEND_SIZE 128
TL_STATIC_ASSERT(sizeof(void *) != 8 || sizeof(tl_timer_backend) == TL_TIMER_BACKEND_SIZE,
                 "tl_timer_backend keeps its size: a new operation replaces a reserved word");

/* Adds b to the registry under b->name; b must stay valid for the life of the
 * process (a static const object). Returns 0, -EINVAL (NULL, empty or over-long
 * name, a required function pointer is NULL, an unknown caps bit, a reserved
 * word not zero), -EEXIST (name taken), or
 * -ENOSPC (registry full). Any thread. */
TL_API int tl_timer_backend_register(const tl_timer_backend *b);

/* The backend registered under name (built-ins included), or NULL. Any thread. */
TL_API const tl_timer_backend *tl_timer_backend_find(const char *name);

/* Stores up to cap names (built-ins first, then registration order) in names,
 * which may be NULL when cap is 0. Returns the total number registered. */
TL_API size_t tl_timer_backend_names(const char **names, size_t cap);

#ifdef __cplusplus
}
#endif

#endif /* TICKLOOP_TIMER_BACKEND_H */
