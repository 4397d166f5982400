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

} // namespace tl::detail

#endif /* TICKLOOP_TIMERS_SLOT_LIST_H */
