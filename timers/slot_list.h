/* SPDX-License-Identifier: MIT */
/*
 * The wheels' slot lists: circular doubly-linked lists threaded through
 * tl_timer::link (link[0] = next, link[1] = prev; link[2] is the wheel's own),
 * with the head pointer kept by the slot. O(1) push at either end and O(1)
 * unlink, no allocation. Shared by wheel.cc and hwheel.cc.
 */
#ifndef TICKLOOP_TIMERS_SLOT_LIST_H
#define TICKLOOP_TIMERS_SLOT_LIST_H

#include "timers.h"

namespace tl::detail {

inline tl_timer *next_of(const tl_timer *t) noexcept {
    return link_timer<0>(t);
}
inline tl_timer *prev_of(const tl_timer *t) noexcept {
    return link_timer<1>(t);
}
inline void set_next(tl_timer *t, tl_timer *n) noexcept {
    set_link_timer<0>(t, n);
}
inline void set_prev(tl_timer *t, tl_timer *p) noexcept {
    set_link_timer<1>(t, p);
}

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

#endif /* TICKLOOP_TIMERS_SLOT_LIST_H */
