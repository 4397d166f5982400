/* SPDX-License-Identifier: MIT */
/*
 * WindowHeaps: the heaps' timers with a leeway of their own, each firing
 * anywhere in its window [deadline, deadline + leeway] (timer_backend.h,
 * "Leeway"). Two implicit heaps hold the same timers:
 * - H1, keyed by deadline, ordered by (deadline, seq): what pops next;
 * - L, keyed by deadline + leeway (saturating), the latest time each may
 *   fire: when the loop must wake. The key is computed at push and
 *   reschedule and cached in L's entry, since the timer's leeway may change
 *   while it is inside.
 *
 * What holds (check() walks it):
 * - Node (node.h; a window timer is on no list, so it uses the list words
 *   for itself, each by name): position = index in H1 | kWindowTag (which
 *   tells a window timer from a run heap's in O(1)); next = index in L
 *   (kLatestIndexWord); prev = seq (seq_of, heap_array.h).
 * - H1's key is the timer's deadline, L's at least that; |H1| == |L|.
 * - Memory follows the timers with own leeway, not the run heap: both
 *   arrays hold at most max(kInitialCapacity, 2 * (Root + peak_)) entries,
 *   peak_ being the most timers held or reserved for at once.
 */
#ifndef TICKLOOP_TIMERS_WINDOW_HEAPS_H
#define TICKLOOP_TIMERS_WINDOW_HEAPS_H

#include <initializer_list>

#include "heap_array.h"

namespace tl::detail {

template <unsigned D, size_t Root>
class WindowHeaps {
public:
    static constexpr uintptr_t kWindowTag = uintptr_t(1) << (sizeof(uintptr_t) * 8 - 1);
    static_assert(sizeof(uintptr_t) == 8, "64-bit Linux: indices never reach bit 63");
    /* A window timer is on no list: L's index takes the next word, the seq
       the prev word (seq_of). */
    static constexpr NodeWord kLatestIndexWord = kNextWord;
    using ByDeadline = HeapArray<D, Root, kPositionWord, true, kWindowTag>; /* H1 */
    using ByLatest = HeapArray<D, Root, kLatestIndexWord, false>;           /* L  */
    using Entry = HeapEntry;

    static bool holds(const tl_timer *t) noexcept { return position_of(t) & kWindowTag; }

    size_t size() const noexcept { return h1_.size_; }
    const Entry &root() const noexcept { return h1_.root(); }
    /* The k-th timer inside, k < size(), in no particular order. */
    const tl_timer *timer(size_t k) const noexcept { return entry_timer(h1_.at(Root + k)); }
    /* The least deadline + leeway; UINT64_MAX when empty. */
    uint64_t latest() const noexcept { return l_.size_ ? l_.root().key : UINT64_MAX; }

    /* Room for n more timers than are inside, growing if needed. 0 or
       -ENOMEM. */
    int reserve_more(size_t n) noexcept {
        int r = reserve(h1_.size_ + n);
        if (r == 0 && h1_.size_ + n > peak_) peak_ = h1_.size_ + n;
        return r;
    }

    /* Pre: t in no part, room for it. Post: t inside, ordered by seq among
       its deadline's timers. */
    void push(tl_timer *t, uint64_t leeway, uint64_t seq) noexcept {
        seq_of(t) = seq;
        h1_.push(Entry{t->deadline, t});
        l_.push(Entry{sat_add(t->deadline, leeway), t});
        if (h1_.size_ > peak_) peak_ = h1_.size_;
    }

    /* Pre: t inside. */
    void remove(tl_timer *t) noexcept {
        l_.remove_at(ByLatest::index_of(t));
        h1_.remove_at(ByDeadline::index_of(t));
    }

    /* Pre: t inside, t->deadline its new deadline. */
    void reschedule(tl_timer *t, uint64_t leeway, uint64_t seq) noexcept {
        seq_of(t) = seq;
        h1_.settle(ByDeadline::index_of(t), Entry{t->deadline, t});
        l_.settle(ByLatest::index_of(t), Entry{sat_add(t->deadline, leeway), t});
    }

    /* Pre: not empty. Post: H1's root, removed. */
    tl_timer *pop() noexcept {
        tl_timer *t = entry_timer(h1_.root());
        remove(t);
        return t;
    }

    const char *check() const noexcept;

private:
    ByDeadline h1_;
    ByLatest l_;
    size_t peak_ = 0; /* the most timers held or reserved for at once */

    /* Room for timers in all, in both arrays. */
    int reserve(size_t timers) noexcept {
        if (int r = h1_.reserve(timers)) return r;
        return l_.reserve(timers);
    }
};

template <unsigned D, size_t Root>
const char *WindowHeaps<D, Root>::check() const noexcept {
    if (const char *m = h1_.check("H1")) return m;
    if (const char *m = l_.check("L")) return m;
    if (h1_.size_ != l_.size_)
        return check_failed("heap: H1 holds %zu timers, L %zu", h1_.size_, l_.size_);
    const size_t bound = 2 * (Root + peak_);
    for (size_t cap : {h1_.capacity_, l_.capacity_})
        if (cap > ByDeadline::kInitialCapacity && cap > bound)
            return check_failed("heap: window heaps hold %zu entries for at most %zu timers", cap,
                                peak_);
    for (size_t i = Root; i < Root + h1_.size_; ++i) {
        const tl_timer *t = entry_timer(h1_.at(i));
        if (h1_.at(i).key != t->deadline)
            return check_failed("heap H1: cached deadline %llu != timer's %llu at %zu",
                                (unsigned long long)h1_.at(i).key, (unsigned long long)t->deadline,
                                i);
        size_t li = ByLatest::index_of(t);
        if (li < Root || li >= Root + l_.size_ || entry_timer(l_.at(li)) != t)
            return check_failed("heap H1: timer at %zu not at its L index %zu", i, li);
        if (l_.at(li).key < t->deadline)
            return check_failed("heap L: latest time %llu before deadline %llu at %zu",
                                (unsigned long long)l_.at(li).key, (unsigned long long)t->deadline,
                                li);
    }
    return nullptr;
}

} // namespace tl::detail

#endif /* TICKLOOP_TIMERS_WINDOW_HEAPS_H */
