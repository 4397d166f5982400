/* SPDX-License-Identifier: MIT */
/*
 * The parts both timing wheels (wheel.cc, hwheel.cc) share, under one
 * vocabulary.
 *
 * What both keep, driven only by the now values they are given:
 * pop_expired(now) returns every timer whose fire tick is <= floor(now /
 * tick_ns) (at now == UINT64_MAX, when every deadline has passed, all of
 * them): a tick's timers come out together once the tick has passed, and
 * next_expiry() is the instant of the first tick that holds one, so the loop
 * wakes at most once per such tick. A timer filed (inserted or rescheduled)
 * with a deadline at or before the last now given is overdue: the next pop
 * hands it out with the timers of its tick whose deadlines have passed too
 * (the tick in progress is visited early), so a deadline already in the past
 * fires in the loop's next iteration and ties keep their order; timers whose
 * deadlines pass while they are inside wait for their tick's end. Each wheel
 * keeps its own position cur, at most one tick past the last now it was
 * given.
 *
 * - tick:      tick_ns of time; the wheels count time in ticks.
 * - fire tick: e = ceil(deadline / tick), the first tick boundary at or
 *              after a deadline; a timer is handed out once now's tick
 *              (floor(now / tick)) reaches it, or in the tick before it when
 *              its deadline has already passed (a partly elapsed tick).
 * - cur:       the wheel's position, in ticks; no slot holds a timer whose
 *              fire tick is behind it.
 * - slot:      a circular list of timers (node.h) plus a lower bound of
 *              their deadlines (slot_min); an occupancy bitmap has one bit
 *              per slot, scanned with ctz.
 * - due list:  the list of timers already found due and not yet returned
 *              (also those inserted with a fire tick behind cur), in the
 *              order they were filed; sorted by (deadline, start sequence)
 *              before the first pop when a timer in it was placed out of
 *              start order (see "order" below). Not the loop's ready list,
 *              which holds the timers a wheel has handed out.
 * - lazy:      a timer rescheduled later and left in its old slot; the walk
 *              of that slot (due no later than the old deadline) re-files it.
 * - order:     slots are FIFO lists, so timers filed by insert or by a move
 *              sit in start order. Every start and restart takes the next
 *              start sequence (its position word, 64-bit builds). A timer placed any
 *              other way (rescheduled in place, lazy, re-filed by a walk or a
 *              cascade, inserted behind cur) is marked moved, and the batch
 *              it is handed out in is sorted by (deadline, sequence) first:
 *              equal deadlines fire in start order, a restart counting as a
 *              start, and a batch that holds only FIFO timers is not sorted.

 * - leeway:    a timer with leeway (tl_timer_leeway) of at least two ticks
 *              gets a grid 2^g ticks, the largest power of two of ticks
 *              within its leeway, and its fire tick is rounded up to a
 *              multiple of it: f = ceil(e / 2^g) * 2^g. Since e * tick <
 *              deadline + tick, f * tick < deadline + 2^g * tick <= deadline
 *              + leeway: the timer still fires inside its window, and timers
 *              whose windows overlap share a wake-up (the grid is the
 *              clock's, so even timers of other loops and processes with the
 *              same tick do). On hwheel a grid of 64^L ticks or more makes f
 *              the start of its level-L slot: the timer is handed out from
 *              that level and never cascaded (the Linux wheel's idea). g
 *              lives in the timer (its position word) because the loop may change the
 *              leeway while the timer is inside; a leeway under two ticks
 *              gives g = 0 and f = e: the tick itself, which honours any
 *              leeway of a tick or more, and a leeway below a tick whenever
 *              the deadline lies within the leeway of its tick's end.
 * - due:       when pop_expired may hand a timer out: the instant of its
 *              fire tick, f * tick (never before the deadline, less than
 *              one tick or its leeway after it). So a wheel fires every
 *              timer of a tick in one batch once the tick has passed, and
 *              the loop wakes at most once per tick that holds a timer, as
 *              the wheels of Netty, Kafka and Linux do; a finer tick_ns is
 *              the way to finer firing. Slot minimums bound due times, so
 *              next_expiry() is a tick instant, not a deadline.
 *
 * The shared code below: TickClock (tick arithmetic without a divide, fire
 * ticks with the grid, due times), StartLog (start sequences and the
 * overdue mark), the bitmap helpers and DueList (the due list, its minimum
 * and its walker); node.h has the lists themselves and SlotPosition, the
 * position word's fields.
 *
 * Defaults, used when the loop options leave tick_ns / wheel_slots at 0:
 * - kDefaultTickNs = 1 ms: the granularity people expect of I/O timeouts
 *   (libuv and Netty count in milliseconds); a wheel fires at most one tick
 *   late, and finer ticks cost more cascades (hwheel) or more slots walked
 *   per second (wheel) for timeouts that are seconds long.
 * - kDefaultWheelSlots = 4096: one revolution is 4.096 s of 1 ms ticks, so
 *   most I/O timeouts never wait a round; the slot arrays (16 bytes a slot)
 *   stay at 64 KiB, inside L2.
 */
#ifndef TICKLOOP_TIMERS_WHEEL_CORE_H
#define TICKLOOP_TIMERS_WHEEL_CORE_H

#include <cstdint>

#include "node.h"

namespace tl::detail {

inline constexpr uint64_t kDefaultTickNs = 1000000;
inline constexpr uint32_t kDefaultWheelSlots = 4096;

inline uint32_t sequence_of(const tl_timer *t) noexcept {
    return SlotPosition::of(t).sequence();
}
/* The order a batch is handed out in: deadline, then start sequence (compared
 * modulo 2^32, right for timers started within 2^31 starts of each other). */
inline bool fires_before(const tl_timer *a, const tl_timer *b) noexcept {
    if (a->deadline != b->deadline) return a->deadline < b->deadline;
    return int32_t(sequence_of(a) - sequence_of(b)) < 0;
}

__extension__ typedef unsigned __int128 wheel_u128;

/* Tick arithmetic: time in ns <-> ticks, without a div instruction (q =
 * mulhi(x, floor(2^64 / tick)) is q or q - 1, one compare fixes it), since
 * every insert, reschedule and cascade needs a fire tick. */
class TickClock {
    uint64_t tick_;
    uint64_t magic_;          /* floor(2^64 / tick), unused for tick 1      */
    uint64_t max_time_tick_;  /* UINT64_MAX / tick: the last tick with a time */
    uint64_t max_first_tick_; /* (UINT64_MAX - 1) / tick, for first_ns */

public:
    explicit TickClock(uint64_t tick) noexcept
        : tick_(tick), magic_(tick > 1 ? uint64_t((wheel_u128(1) << 64) / tick) : 0),
          max_time_tick_(UINT64_MAX / tick), max_first_tick_((UINT64_MAX - 1) / tick) {}

    uint64_t tick() const noexcept { return tick_; }

    /* floor(x / tick), and the remainder. */
    uint64_t floor(uint64_t x, uint64_t &rem) const noexcept {
        if (tick_ == 1) {
            rem = 0;
            return x;
        }
        uint64_t q = uint64_t((wheel_u128(x) * magic_) >> 64);
        uint64_t r = x - q * tick_;
        if (r >= tick_) {
            ++q;
            r -= tick_;
        }
        rem = r;
        return q;
    }

    /* The fire tick of a deadline: ceil(deadline / tick). */
    uint64_t fire_tick(uint64_t deadline) const noexcept {
        uint64_t r;
        uint64_t q = floor(deadline, r);
        return q + (r != 0);
    }

    /* now in ticks; at UINT64_MAX every deadline has passed, so every fire
       tick counts as reached. */
    uint64_t now_tick(uint64_t now) const noexcept {
        uint64_t r;
        uint64_t q = floor(now, r);
        return now == UINT64_MAX ? q + (r != 0) : q;
    }

    /* The time of tick k, saturating at UINT64_MAX ("never"). */
    uint64_t time_of(uint64_t k) const noexcept {
        return k > max_time_tick_ ? UINT64_MAX : k * tick_;
    }

    /* The least deadline whose fire tick is k, saturating at UINT64_MAX. */
    uint64_t first_ns(uint64_t k) const noexcept {
        if (k == 0) return 0;
        return k - 1 > max_first_tick_ ? UINT64_MAX : (k - 1) * tick_ + 1;
    }

    /* The grid (SlotPosition's grid field) of a timer with leeway that is
       given deadline: g = floor(log2(leeway in whole ticks)), 0 under two
       ticks; the leeway is clipped at UINT64_MAX - deadline, so that f * tick
       never wraps. */
    [[gnu::noinline]] SlotPosition grid_of(uint64_t leeway, uint64_t deadline) const noexcept {
        if (leeway > UINT64_MAX - deadline) leeway = UINT64_MAX - deadline;
        uint64_t r;
        uint64_t ticks = floor(leeway, r);
        if (ticks < 2) return SlotPosition();
        return SlotPosition::grid_field(unsigned(63 - __builtin_clzll(ticks)));
    }

    /* The fire tick of deadline on the grid of pos (a timer's position, or
       a grid field alone). */
    uint64_t fire_tick(uint64_t deadline, SlotPosition pos) const noexcept {
        uint64_t e = fire_tick(deadline);
        uint64_t mask = (uint64_t(1) << pos.grid_exponent()) - 1;
        return (e + mask) & ~mask;
    }
    /* A timer's fire tick, from its deadline and its recorded grid. */
    uint64_t fire_tick(const tl_timer *t) const noexcept {
        return fire_tick(t->deadline, SlotPosition::of(t));
    }

    /* When a timer with fire tick f (from fire_tick above) is due: the
       instant of f, >= its deadline, saturating at UINT64_MAX for a deadline
       in the last partial tick. */
    uint64_t due(uint64_t f) const noexcept { return time_of(f); }
};

/* What a wheel keeps of the starts and nows it is given: the last start
 * sequence, the last now (create, pop_expired), and the least deadline at or
 * before it filed since the last pop (the next pop hands such a timer out
 * with the passed timers of its tick). */
class StartLog {
    uint32_t seq_ = 0;
    uint64_t now_;
    /* mutable: next_expiry drops a note the next pop would not act on */
    mutable uint64_t overdue_ = UINT64_MAX;

public:
    explicit StartLog(uint64_t now) noexcept : now_(now) {}

    /* A start: the next start sequence, not moved. */
    SlotPosition started() noexcept { return SlotPosition::started(++seq_); }
    /* A timer is filed with this deadline: noted if it has already passed. */
    void filed_at(uint64_t deadline) noexcept {
        if (deadline <= now_) [[unlikely]]
            if (deadline < overdue_) overdue_ = deadline;
    }
    /* A pop at now begins. */
    void popping(uint64_t now) noexcept { now_ = now; }
    uint64_t now() const noexcept { return now_; }
    /* The least deadline filed overdue since the last pop; UINT64_MAX: none. */
    uint64_t overdue() const noexcept { return overdue_; }
    void clear_overdue() noexcept { overdue_ = UINT64_MAX; }
    /* next_expiry found that the next pop would not act on the note. */
    void drop_overdue() const noexcept { overdue_ = UINT64_MAX; }
};

/* Whether a pop at now would hand out a timer filed overdue from the slot
 * whose list starts at head and whose tick is `tick` (the first slot due):
 * its tick has passed (it is due anyway), or it is the tick in progress and
 * holds a timer of that tick whose deadline has passed (as the pops take
 * them). next_expiry keeps an overdue note only while this holds. */
inline bool slot_holds_overdue(const TickClock &clock, const tl_timer *head, uint64_t tick,
                               uint64_t now) noexcept {
    uint64_t nt = clock.now_tick(now);
    if (tick <= nt) return true;
    if (tick - nt > 1) return false;
    const tl_timer *t = head;
    do {
        if (t->deadline <= now && clock.fire_tick(t) == tick) return true;
        t = next_of(t);
    } while (t != head);
    return false;
}

/* The wheels' insert and reschedule up to the grid, over W's public
 * clock(), file(t, e, grid) (Pre: t in no list, e its fire tick on grid;
 * post: started and placed) and reschedule_to(t, deadline, e, grid): a timer
 * without leeway takes the inlined path on grid 0, one flags test; one with
 * leeway goes out of line to derive its grid, so that the path without one
 * saves no registers. */
template <class W>
[[gnu::noinline]] void file_on_grid(W &w, tl_timer *t) noexcept {
    SlotPosition grid = w.clock().grid_of(timer_leeway(t), t->deadline);
    w.file(t, w.clock().fire_tick(t->deadline, grid), grid);
}
/* Pre: t in no list, t->deadline set. Post: filed at the fire tick of its
   deadline on the grid of its leeway now. */
template <class W>
inline void file_new(W &w, tl_timer *t) noexcept {
    if (t->flags & kLeewayMask) [[unlikely]]
        file_on_grid(w, t);
    else
        w.file(t, w.clock().fire_tick(t->deadline), SlotPosition());
}
template <class W>
[[gnu::noinline]] void reschedule_on_grid(W &w, tl_timer *t, uint64_t deadline) noexcept {
    SlotPosition grid = w.clock().grid_of(timer_leeway(t), deadline);
    w.reschedule_to(t, deadline, w.clock().fire_tick(deadline, grid), grid);
}
/* A backend's reschedule: the grid of the leeway now (0 without one; the
   old grid is the wheel's to handle, in reschedule_to). */
template <class W>
[[gnu::always_inline]] inline void reschedule_on_grid_of_leeway(W &w, tl_timer *t,
                                                                uint64_t deadline) noexcept {
    if (t->flags & kLeewayMask) [[unlikely]]
        reschedule_on_grid(w, t, deadline);
    else
        w.reschedule_to(t, deadline, w.clock().fire_tick(deadline), SlotPosition());
}

/* Occupancy bitmaps: one bit per slot in 64-bit words, scanned with ctz. */
inline void bit_set(uint64_t *bits, size_t s) noexcept {
    bits[s >> 6] |= uint64_t(1) << (s & 63);
}
inline void bit_clear(uint64_t *bits, size_t s) noexcept {
    bits[s >> 6] &= ~(uint64_t(1) << (s & 63));
}
inline bool bit_test(const uint64_t *bits, size_t s) noexcept {
    return (bits[s >> 6] >> (s & 63)) & 1;
}

/* The due list: timers found due and not yet returned, popped from the
 * head, in the order they were pushed unless one of them was placed out of
 * start order (moved): then the list is sorted by fires_before() before the
 * next pop. `min` is a lower bound of the deadlines in it. */
struct DueList {
    tl_timer *head = nullptr;
    uint64_t min = 0;      /* ns; meaningful while head */
    bool unsorted = false; /* a moved timer was pushed since the last sort */

    /* Appends t. Its slot becomes kDueSlot (its grid no longer matters: a
       reschedule moves it and derives a new one); its order stays. */
    void push(tl_timer *t) noexcept {
        SlotPosition pos = SlotPosition::of(t);
        if (!head || t->deadline < min) min = t->deadline;
        if (pos.moved()) unsorted = true;
        list_push(head, t, false);
        pos.order().in_slot(SlotPosition::kDueSlot).store(t);
    }
    tl_timer *pop() noexcept {
        if (unsorted) {
            list_sort(head, fires_before);
            unsorted = false;
        }
        tl_timer *t = head;
        list_unlink(head, t);
        return t;
    }
    void unlink(tl_timer *t) noexcept { list_unlink(head, t); }

    /* The walker's part: links, slots, minimum, order; counts into seen, at
       most limit. NULL or the first broken invariant. due_by: every fire
       tick <= it, except for timers with a deadline <= passed (taken early
       on a grid). */
    const char *check(const TickClock &clock, uint64_t due_by, uint64_t passed, size_t &seen,
                      size_t limit, const char *who) const noexcept;
};

inline const char *DueList::check(const TickClock &clock, uint64_t due_by, uint64_t passed,
                                  size_t &seen, size_t limit, const char *who) const noexcept {
    if (!head) return nullptr;
    const tl_timer *t = head;
    do {
        SlotPosition pos = SlotPosition::of(t), next = SlotPosition::of(next_of(t));
        if (++seen > limit)
            return check_failed("%s: more timers linked than count %zu", who, limit);
        if (prev_of(next_of(t)) != t || next_of(prev_of(t)) != t)
            return check_failed("%s: broken links in the due list", who);
        if (pos.slot_unless_grid() != SlotPosition::kDueSlot || pos.lazy())
            return check_failed("%s: due timer records position %#llx", who,
                                (unsigned long long)pos.word());
        uint64_t e = clock.fire_tick(t->deadline);
        if (e > due_by && t->deadline > passed)
            return check_failed("%s: due timer with fire tick %llu after cur %llu", who,
                                (unsigned long long)e, (unsigned long long)due_by);
        if (min > t->deadline)
            return check_failed("%s: due minimum %llu above deadline %llu", who,
                                (unsigned long long)min, (unsigned long long)t->deadline);
        if (!unsorted && next_of(t) != head && !pos.moved() && !next.moved() &&
            t->deadline == next_of(t)->deadline && !fires_before(t, next_of(t)))
            return check_failed("%s: equal deadlines out of start order in the due list", who);
        t = next_of(t);
    } while (t != head);
    return nullptr;
}

} // namespace tl::detail

#endif /* TICKLOOP_TIMERS_WHEEL_CORE_H */
