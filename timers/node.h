/* SPDX-License-Identifier: MIT */
/*
 * The one layout of tl_timer::link, for every built-in backend and for the
 * loop's own timer lists, and the lists built on it:
 *
 *   link[0]  next  the next timer of the list the timer is on
 *   link[1]  prev  the previous one
 *   link[2]  position  the owner's word: where the timer is (a slot id, a
 *                 heap index), with the owner's tag bits
 *
 * Whoever holds the timer owns all three words: a backend while the timer is
 * inside it, the loop while it is on the loop's ready or deferred list. A
 * backend whose node has no list neighbour in a word (a heap entry's head
 * has no prev) may keep its own data there and says so in its file.
 *
 * Two list shapes: circular lists whose head pointer the owner keeps (the
 * wheels' slots, the heaps' runs), and TimerList, a NULL-terminated FIFO
 * with head, tail and count (the loop's ready and deferred lists). O(1) push
 * and unlink, no allocation.
 */
#ifndef TICKLOOP_TIMERS_NODE_H
#define TICKLOOP_TIMERS_NODE_H

#include "check.h"
#include "deadline.h"
#include "leeway.h"

namespace tl::detail {

/* The room each backend's per-timer node has inside tl_timer::link; the
 * backends static_assert against it. */
inline constexpr size_t timer_link_bytes = sizeof(((tl_timer *)nullptr)->link);

inline tl_timer *next_of(const tl_timer *t) noexcept {
    return reinterpret_cast<tl_timer *>(t->link[0]);
}
inline tl_timer *prev_of(const tl_timer *t) noexcept {
    return reinterpret_cast<tl_timer *>(t->link[1]);
}
inline void set_next(tl_timer *t, tl_timer *n) noexcept {
    t->link[0] = reinterpret_cast<uintptr_t>(n);
}
inline void set_prev(tl_timer *t, tl_timer *p) noexcept {
    t->link[1] = reinterpret_cast<uintptr_t>(p);
}
inline uintptr_t &position_of(tl_timer *t) noexcept {
    return t->link[2];
}
inline uintptr_t position_of(const tl_timer *t) noexcept {
    return t->link[2];
}

/* The words by name, for owners that keep an index in a list word (the
   window heaps: window_heaps.h). */
enum NodeWord : unsigned { kNextWord = 0, kPrevWord = 1, kPositionWord = 2 };

/* The position word of a timer inside a wheel (wheel.cc, hwheel.cc), read
 * and built through named fields:
 * - bits 0-23: slot, the id of the slot it is in (each wheel numbers its
 *   slots from 0), or kDueSlot on the due list; slot ids stay below it;
 * - bits 24-29: grid, the exponent g of its leeway grid (wheel_core.h,
 *   "leeway"), 0 without one;
 * - bit 30: lazy, rescheduled later and left in its slot;
 * - bit 31: moved, placed out of start order (wheel_core.h, "order");
 * - bits 32-63 (64-bit builds): sequence, its start sequence.
 * moved and sequence together are its order, which a re-filing keeps. */
class SlotPosition {
    uintptr_t word_;

    static constexpr unsigned kGridShift = 24;
    static constexpr uintptr_t kSlotMask = (uintptr_t(1) << kGridShift) - 1;
    static constexpr uintptr_t kGridMask = uintptr_t(63) << kGridShift;
    static constexpr uintptr_t kLazy = uintptr_t(1) << 30;
    static constexpr uintptr_t kMoved = uintptr_t(1) << 31;
    static constexpr uintptr_t kOrderMask = ~(kSlotMask | kGridMask | kLazy);

public:
    static constexpr uintptr_t kDueSlot = kSlotMask;
    /* Start sequences need the upper half of the word: on a 32-bit build
       every sequence reads 0 and ties keep the order they were filed in. */
    static constexpr bool kHasSequence = sizeof(uintptr_t) >= 8;

    constexpr explicit SlotPosition(uintptr_t word = 0) noexcept : word_(word) {}
    static SlotPosition of(const tl_timer *t) noexcept { return SlotPosition(position_of(t)); }
    void store(tl_timer *t) const noexcept { position_of(t) = word_; }
    constexpr uintptr_t word() const noexcept { return word_; }

    /* A start: sequence seq, not moved, in no slot yet. */
    static constexpr SlotPosition started(uint32_t seq) noexcept {
        if constexpr (kHasSequence)
            return SlotPosition(uintptr_t(seq) << (kHasSequence ? 32 : 0));
        else
            return SlotPosition(0);
    }
    /* Grid exponent g as a field of its own, to be or'ed in (grid()). */
    static constexpr SlotPosition grid_field(unsigned g) noexcept {
        return SlotPosition(uintptr_t(g) << kGridShift);
    }

    constexpr uintptr_t slot() const noexcept { return word_ & kSlotMask; }
    constexpr bool on_due_list() const noexcept { return slot() == kDueSlot; }
    constexpr unsigned grid_exponent() const noexcept {
        return unsigned((word_ & kGridMask) >> kGridShift);
    }
    /* The grid field alone (0 without a grid). */
    constexpr SlotPosition grid() const noexcept { return SlotPosition(word_ & kGridMask); }
    constexpr bool lazy() const noexcept { return word_ & kLazy; }
    constexpr bool moved() const noexcept { return word_ & kMoved; }
    constexpr uint32_t sequence() const noexcept {
        if constexpr (kHasSequence)
            return uint32_t(uint64_t(word_) >> 32);
        else
            return 0;
    }
    /* Its order (moved mark and sequence) alone, which a re-filing keeps. */
    constexpr SlotPosition order() const noexcept { return SlotPosition(word_ & kOrderMask); }
    /* The slot id, or a value above every slot id when on a grid: one compare
       with a slot id tells "in that slot, no grid" (above_slots()). */
    constexpr uintptr_t slot_unless_grid() const noexcept {
        return word_ & (kSlotMask | kGridMask);
    }
    static constexpr bool above_slots(uintptr_t slot_unless_grid) noexcept {
        return slot_unless_grid > kDueSlot;
    }

    constexpr SlotPosition in_slot(uintptr_t s) const noexcept { return SlotPosition(word_ | s); }
    constexpr SlotPosition with(SlotPosition field) const noexcept {
        return SlotPosition(word_ | field.word_);
    }
    constexpr SlotPosition with_lazy(bool lazy = true) const noexcept {
        return SlotPosition(word_ | (lazy ? kLazy : 0));
    }
    constexpr SlotPosition with_moved() const noexcept { return SlotPosition(word_ | kMoved); }
};

/* A NULL-terminated FIFO of timers with O(1) append and unlink. */
struct TimerList {
    tl_timer *head = nullptr, *tail = nullptr;
    uint64_t count = 0;

    void append(tl_timer *t) noexcept {
        set_next(t, nullptr);
        set_prev(t, tail);
        if (tail)
            set_next(tail, t);
        else
            head = t;
        tail = t;
        ++count;
    }
    void unlink(tl_timer *t) noexcept {
        tl_timer *next = next_of(t), *prev = prev_of(t);
        if (prev)
            set_next(prev, next);
        else
            head = next;
        if (next)
            set_prev(next, prev);
        else
            tail = prev;
        --count;
    }
};

/* Circular lists. */

/* Appends t to the circular list at head, or prepends it when front. */
inline void list_push(tl_timer *&head, tl_timer *t, bool front) noexcept {
    if (!head) {
        set_next(t, t);
        set_prev(t, t);
        head = t;
        return;
    }
    tl_timer *tail = prev_of(head);
    set_next(t, head);
    set_prev(t, tail);
    set_next(tail, t);
    set_prev(head, t);
    if (front) head = t;
}

/* Removes t from the list at head (head moves on if it was t). */
inline void list_unlink(tl_timer *&head, tl_timer *t) noexcept {
    tl_timer *n = next_of(t);
    if (n == t) {
        head = nullptr;
        return;
    }
    tl_timer *p = prev_of(t);
    set_next(p, n);
    set_prev(n, p);
    if (head == t) head = n;
}

/* Detaches the whole list at head as a NULL-terminated chain from its old
   head; head becomes empty. Pre: head non-empty. */
inline tl_timer *list_take(tl_timer *&head) noexcept {
    tl_timer *t = head;
    head = nullptr;
    set_next(prev_of(t), nullptr); /* break the circle at the old tail */
    return t;
}

/* Sorts the circular list at head by less (a strict order), stably, in
   O(n log n) without allocating: a bottom-up merge sort over a NULL-terminated
   chain (bins[i] holds 2^i sorted timers, higher bins the earlier ones), then
   the prev links and the circle are rebuilt. */
template <class Less>
void list_sort(tl_timer *&head, Less less) noexcept {
    if (!head || next_of(head) == head) return;
    /* merge(a, b): a's timers came first, so ties take a's. */
    auto merge = [&](tl_timer *a, tl_timer *b) noexcept {
        tl_timer *out = nullptr, *last = nullptr;
        while (a && b) {
            tl_timer *x;
            if (less(b, a)) {
                x = b;
                b = next_of(b);
            } else {
                x = a;
                a = next_of(a);
            }
            if (last)
                set_next(last, x);
            else
                out = x;
            last = x;
        }
        tl_timer *rest = a ? a : b;
        if (last)
            set_next(last, rest);
        else
            out = rest;
        return out;
    };
    tl_timer *bins[64] = {};
    tl_timer *t = list_take(head);
    while (t) {
        tl_timer *carry = t;
        t = next_of(t);
        set_next(carry, nullptr);
        unsigned i = 0;
        for (; bins[i]; ++i) {
            carry = merge(bins[i], carry);
            bins[i] = nullptr;
        }
        bins[i] = carry;
    }
    tl_timer *sorted = nullptr;
    for (tl_timer *bin : bins)
        if (bin) sorted = merge(bin, sorted);
    tl_timer *prev = nullptr;
    for (tl_timer *x = sorted; x; x = next_of(x)) {
        set_prev(x, prev);
        prev = x;
    }
    set_next(prev, sorted);
    set_prev(sorted, prev);
    head = sorted;
}

} // namespace tl::detail

#endif /* TICKLOOP_TIMERS_NODE_H */
