/* SPDX-License-Identifier: MIT */
/*
 * DaryHeap: the timer backend of heap2.cc and heap4.cc (each picks the arity
 * D and the root offset and says why), TL_TIMER_CAP_EXACT with per-timer
 * leeway (timer_backend.h). Two parts, each in its own header with its own
 * invariants and walker:
 * - RunHeap (run_heap.h): timers without a leeway of their own, as runs of
 *   equal deadlines, one heap entry per run.
 * - WindowHeaps (window_heaps.h): timers with one, in H1 by deadline and in L
 *   by deadline + leeway.
 * The seam: one seq counter (the run heap's) orders timers of equal deadline
 * across both parts, so pop_expired takes the lesser root by (deadline, seq)
 * and hands timers out in (deadline, insertion) order; a window timer that
 * takes a seq tells the run heap (forget), whose next start of that deadline
 * must not join an older run. next_expiry is the lesser root deadline;
 * next_wakeup the lesser of the run heap's root deadline and L's root key,
 * so the loop sleeps until the first window closes and then pops every
 * timer already due (greedy interval stabbing: the fewest wake-ups).
 *
 * Memory: the run heap has room for every timer inside, so a reschedule
 * that moves a timer out of the window heaps (its leeway became 0) cannot
 * fail; the window heaps grow only for timers with own leeway. A reschedule
 * into leeway that finds no room and cannot grow leaves the timer in the run
 * heap, firing exactly (a backend may ignore leeway). Growth is the only
 * allocation and the only failure (-ENOMEM, nothing changed).
 *
 * Lent leeway (the loop's collect interval, kLentLeeway) is not a timer's
 * own: such timers stay in the run heap, and next_wakeup adds the lent
 * leeway, the same for all of them, to its root, unless a timer with own
 * leeway had to stay there (own_in_runs_).
 */
#ifndef TICKLOOP_TIMERS_DARY_HEAP_H
#define TICKLOOP_TIMERS_DARY_HEAP_H

#include "run_heap.h"
#include "window_heaps.h"

namespace tl::detail {

template <unsigned D, size_t Root>
class DaryHeap {
    using Runs = RunHeap<D, Root>;
    using Windows = WindowHeaps<D, Root>;

    Runs runs_;
    Windows windows_;
    bool own_in_runs_ = false; /* a timer with own leeway is in the run heap */

    /* The leeway is 0 exactly when its mantissa bits are (m << e). */
    static constexpr uint32_t kLeewayMantissa = ((1u << kLeewayMantBits) - 1) << kLeewayShift;
    static bool own_leeway(const tl_timer *t) noexcept {
        return (t->flags & kLeewayMantissa) && !(t->flags & kLentLeeway);
    }

    /* Pre: t in no part, t->deadline set, room in the window heaps. */
    void push_window(tl_timer *t) noexcept {
        uint64_t seq = runs_.take_seq();
        runs_.forget(t->deadline);
        windows_.push(t, timer_leeway(t), seq);
    }

    /* insert's leeway case, out of line: the leeway-0 insert stays small. */
    [[gnu::noinline]] int insert_window(tl_timer *t) noexcept {
        if (int r = windows_.reserve_more(1)) return r;
        push_window(t);
        return 0;
    }

    /* reschedule when leeway is in use (out of line: the leeway-0 restart
       stays small where the loop inlines it). */
    [[gnu::noinline]] void reschedule_leeway(tl_timer *t, uint64_t deadline) noexcept {
        const bool leeway = own_leeway(t);
        if (!Windows::holds(t)) {
            if (!leeway || windows_.reserve_more(1) < 0) [[unlikely]] {
                own_in_runs_ |= leeway; /* no memory: it stays, firing exactly */
                runs_.reschedule(t, deadline);
                return;
            }
            runs_.remove(t);
            t->deadline = deadline;
            push_window(t);
            return;
        }
        t->deadline = deadline;
        if (leeway) {
            uint64_t seq = runs_.take_seq();
            runs_.forget(deadline);
            windows_.reschedule(t, timer_leeway(t), seq);
            return;
        }
        windows_.remove(t);
        runs_.push(t); /* the run heap has room for every timer */
    }

public:
    /* Fires exactly at the deadline, ties in insertion order. */
    static constexpr uint32_t kCaps = TL_TIMER_CAP_EXACT;
    static bool accepts(const tl_timer_config &) noexcept { return true; }
    DaryHeap(const tl_timer_config &, uint64_t) noexcept {}
    /* The arrays grow on the first insert: nothing to allocate up front. */
    bool allocate() noexcept { return true; }
    DaryHeap(const DaryHeap &) = delete;
    DaryHeap &operator=(const DaryHeap &) = delete;

    /* Pre: t not inside, t->deadline set. Post on 0: t inside, last among
       equal deadlines. On -ENOMEM nothing changed. */
    int insert(tl_timer *t) noexcept {
        if (runs_.full(count())) [[unlikely]]
            return insert_growing(t);
        if (!own_leeway(t)) [[likely]] {
            runs_.push(t);
            return 0;
        }
        return insert_window(t);
    }

    /* insert when the run heap is full, out of line: the insert above then
       makes no call that returns to it, and saves no registers. */
    [[gnu::noinline]] int insert_growing(tl_timer *t) noexcept {
        if (int r = runs_.reserve(count() + 1)) return r;
        if (!own_leeway(t)) {
            runs_.push(t);
            return 0;
        }
        return insert_window(t);
    }

    /* Room for n timers more than are inside, t among them: the next n
       inserts (t's included) then allocate nothing and cannot fail, since
       no array shrinks. On -ENOMEM nothing changed. */
    int reserve_more(const tl_timer *t, size_t n) noexcept {
        if (int r = runs_.reserve(count() + n)) return r;
        return t && own_leeway(t) ? windows_.reserve_more(n) : 0;
    }

    /* Pre: t inside. Post: t not inside. */
    void remove(tl_timer *t) noexcept {
        /* No window timers (no leeway in use) decides it without the tag. */
        if (windows_.size() == 0 || !Windows::holds(t)) [[likely]]
            runs_.remove(t);
        else
            windows_.remove(t);
    }

    /* Pre: t inside. Post: t at deadline, ordered as if newly inserted, its
       leeway read anew (moving it between the parts if its class changed). */
    TL_HEAP_INLINE void reschedule(tl_timer *t, uint64_t deadline) noexcept {
        if (windows_.size() == 0 && !own_leeway(t)) [[likely]] {
            runs_.reschedule(t, deadline);
            return;
        }
        reschedule_leeway(t, deadline);
    }

    /* The earliest deadline (a stale root made exact first). */
    uint64_t next_expiry() noexcept {
        runs_.refresh();
        uint64_t a = runs_.runs() ? runs_.root().key : UINT64_MAX;
        if (windows_.size() == 0) [[likely]]
            return a;
        uint64_t b = windows_.root().key;
        return b < a ? b : a;
    }

    /* The earliest run deadline (+ its lent leeway) or the earliest
       deadline + leeway of the window heaps. */
    uint64_t next_wakeup() noexcept {
        runs_.refresh();
        uint64_t a = UINT64_MAX;
        if (runs_.runs()) {
            a = runs_.root().key;
            const tl_timer *head = entry_timer(runs_.root());
            if ((head->flags & kLentLeeway) && !own_in_runs_) [[unlikely]]
                a = sat_add(a, timer_leeway(head));
        }
        uint64_t b = windows_.latest();
        return b < a ? b : a;
    }

    /* Post: the earliest timer if its deadline <= now, removed; else NULL. */
    tl_timer *pop_expired(uint64_t now) noexcept {
        runs_.refresh();
        if (windows_.size() == 0) [[likely]] {
            if (runs_.runs() == 0 || runs_.root().key > now) return nullptr;
            return runs_.pop();
        }
        if (runs_.runs() == 0 || Runs::Array::before(windows_.root(), runs_.root())) {
            if (windows_.root().key > now) return nullptr;
            return windows_.pop();
        }
        if (runs_.root().key > now) return nullptr;
        return runs_.pop();
    }

    size_t count() const noexcept { return runs_.count() + windows_.size(); }

    /* Each part's walker, then the seam: the run heap has room for every
       timer, and no window timer is newer than the run the table records
       for its deadline. */
    const char *check() const noexcept {
        if (const char *m = runs_.check()) return m;
        if (const char *m = windows_.check()) return m;
        if (count() > runs_.room() && count())
            return check_failed("heap: run heap has room for %zu of %zu timers", runs_.room(),
                                count());
        struct Recorded {
            bool any;
            uint64_t deadline, seq;
        } recorded[Runs::kSlots];
        for (size_t s = 0; s < Runs::kSlots; ++s)
            recorded[s].any = runs_.recorded(s, recorded[s].deadline, recorded[s].seq);
        for (size_t k = 0; k < windows_.size(); ++k) {
            const tl_timer *t = windows_.timer(k);
            const Recorded &r = recorded[Runs::slot(t->deadline)];
            if (r.any && r.deadline == t->deadline && r.seq < seq_of(t))
                return check_failed("heap: window timer newer than the run recorded for %llu",
                                    (unsigned long long)t->deadline);
        }
        return nullptr;
    }
};

/* The two built-in instantiations (heap2.cc and heap4.cc say why these). */
using Heap2 = DaryHeap<2, 1>;
using Heap4 = DaryHeap<4, 3>;

} // namespace tl::detail

#endif /* TICKLOOP_TIMERS_DARY_HEAP_H */
