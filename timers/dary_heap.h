/* SPDX-License-Identifier: MIT */
/*
 * An implicit d-ary min-heap of timers, the shared body of heap2.cc and
 * heap4.cc (each file picks the arity and the root offset and states why).
 *
 * Layout and invariants (checked by check()):
 * - The heap is an array of entries {deadline, timer*}: the deadline is cached
 *   beside the pointer so that sifting compares without touching the (cold)
 *   timers, as libev's ANHE and Go's timer heap do.
 * - Entries live at indices [Root, Root + size). Root > 0 leaves a small
 *   unused prefix so that the D children of a node share one cache line; the
 *   array is 64-byte aligned.
 * - For every entry e at index i: e.timer->link[0] == i (so remove and
 *   reschedule find it in O(1)), e.deadline == e.timer->deadline, and no entry
 *   orders before its parent.
 * - Order is (deadline, seq): link[1] holds a per-heap insertion counter that
 *   breaks deadline ties in start order (libuv's start_id). The timer is only
 *   read for the tie-break, so distinct deadlines never touch it.
 * - Sifts move a hole instead of swapping, writing each moved entry once.
 * - The array grows by doubling and never shrinks; growth is the only
 *   allocation and the only failure (-ENOMEM, timer not inserted).
 */
#ifndef TICKLOOP_TIMERS_DARY_HEAP_H
#define TICKLOOP_TIMERS_DARY_HEAP_H

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "timers.h"

namespace tl::detail {

template <unsigned D, size_t Root>
class DaryHeap : public MallocNew {
    static_assert(D >= 2, "a heap needs at least two children per node");

    struct Entry {
        uint64_t deadline;
        tl_timer *timer;
    };
    static_assert(sizeof(Entry) == 16, "entries pack four to a cache line");
    static_assert(2 * sizeof(uintptr_t) <= timer_link_bytes, "heap node fits in tl_timer.link");

    static constexpr size_t kAlign = 64;
    static constexpr size_t kInitialCapacity = 64; /* entries, prefix included */

    Entry *heap_ = nullptr;
    size_t size_ = 0;     /* live entries                               */
    size_t capacity_ = 0; /* entries allocated, the Root prefix included */
    uint64_t seq_ = 0;    /* next insertion number                       */

    static size_t &index_of(tl_timer *t) noexcept { return reinterpret_cast<size_t &>(t->link[0]); }
    static uint64_t &seq_of(tl_timer *t) noexcept {
        return reinterpret_cast<uint64_t &>(t->link[1]);
    }

    static constexpr size_t parent(size_t i) noexcept { return (i - Root - 1) / D + Root; }
    static constexpr size_t first_child(size_t i) noexcept { return D * (i - Root) + Root + 1; }

    static bool before(const Entry &a, const Entry &b) noexcept {
        if (a.deadline != b.deadline) return a.deadline < b.deadline;
        return seq_of(a.timer) < seq_of(b.timer);
    }

    void place(size_t i, const Entry &e) noexcept {
        heap_[i] = e;
        index_of(e.timer) = i;
    }

    /* Moves the hole at i up until e fits there. */
    void sift_up(size_t i, Entry e) noexcept {
        while (i > Root) {
            size_t p = parent(i);
            if (!before(e, heap_[p])) break;
            place(i, heap_[p]);
            i = p;
        }
        place(i, e);
    }

    /* Moves the hole at i down until e fits there. */
    void sift_down(size_t i, Entry e) noexcept {
        const size_t end = Root + size_;
        for (;;) {
            size_t c = first_child(i);
            if (c >= end) break;
            size_t best;
            if (c + D <= end) {
                /* A full sibling group (one cache line for heap4): the least
                   deadline by plain compares, unrolled. A tie anywhere needs
                   the insertion order, so it takes the exact path below. */
                best = c;
                uint64_t least = heap_[c].deadline;
                bool tie = false;
                for (size_t j = c + 1; j < c + D; ++j) {
                    uint64_t d = heap_[j].deadline;
                    tie |= d == least;
                    best = d < least ? j : best;
                    least = d < least ? d : least;
                }
                if (!tie && least != e.deadline) {
                    if (least > e.deadline) break;
                    place(i, heap_[best]);
                    i = best;
                    continue;
                }
            }
            size_t last = c + D < end ? c + D : end;
            best = c;
            for (size_t j = c + 1; j < last; ++j)
                if (before(heap_[j], heap_[best])) best = j;
            if (!before(heap_[best], e)) break;
            place(i, heap_[best]);
            i = best;
        }
        place(i, e);
    }

    /* Puts e at i, which holds a hole, restoring order in whichever direction. */
    void settle(size_t i, Entry e) noexcept {
        /* Which way e goes depends on the parent; the children's line is
           fetched meanwhile, so the two likely misses overlap. */
        if (first_child(i) < Root + size_) __builtin_prefetch(&heap_[first_child(i)]);
        if (i > Root && before(e, heap_[parent(i)]))
            sift_up(i, e);
        else
            sift_down(i, e);
    }

    int grow() noexcept {
        size_t cap = capacity_ ? capacity_ * 2 : kInitialCapacity;
        if (cap > SIZE_MAX / sizeof(Entry)) return -ENOMEM;
        void *mem = std::aligned_alloc(kAlign, cap * sizeof(Entry));
        if (!mem) return -ENOMEM;
        if (heap_) std::memcpy(mem, heap_, (Root + size_) * sizeof(Entry));
        std::free(heap_);
        heap_ = static_cast<Entry *>(mem);
        capacity_ = cap;
        return 0;
    }

public:
    /* Fires exactly at the deadline, ties in insertion order. */
    static constexpr uint32_t kCaps = TL_TIMER_CAP_EXACT;
    static bool accepts(const tl_timer_config &) noexcept { return true; }
    DaryHeap(const tl_timer_config &, uint64_t) noexcept {}
    /* The array grows on the first insert: nothing to allocate up front. */
    bool allocate() noexcept { return true; }
    DaryHeap(const DaryHeap &) = delete;
    DaryHeap &operator=(const DaryHeap &) = delete;
    ~DaryHeap() { std::free(heap_); }

    /* Pre: t not inside, t->deadline set. Post on 0: t inside, last among
       equal deadlines. On -ENOMEM nothing changed. */
    int insert(tl_timer *t) noexcept {
        if (Root + size_ + 1 > capacity_) {
            int r = grow();
            if (r < 0) return r;
        }
        seq_of(t) = seq_++;
        ++size_;
        sift_up(Root + size_ - 1, Entry{t->deadline, t});
        return 0;
    }

    /* Pre: t inside. Post: t not inside; the rest still a heap. */
    void remove(tl_timer *t) noexcept {
        size_t i = index_of(t);
        --size_;
        size_t last = Root + size_;
        if (i != last) settle(i, heap_[last]);
    }

    /* Pre: t inside. Post: t at deadline, ordered as if newly inserted. */
    void reschedule(tl_timer *t, uint64_t deadline) noexcept {
        t->deadline = deadline;
        seq_of(t) = seq_++;
        settle(index_of(t), Entry{deadline, t});
    }

    uint64_t next_expiry() const noexcept { return size_ ? heap_[Root].deadline : UINT64_MAX; }

    /* Post: the earliest timer if its deadline <= now, removed; else NULL. */
    tl_timer *pop_expired(uint64_t now) noexcept {
        if (size_ == 0 || heap_[Root].deadline > now) return nullptr;
        tl_timer *t = heap_[Root].timer;
        remove(t);
        return t;
    }

    size_t count() const noexcept { return size_; }

    const char *check() const noexcept {
        if (size_ && (!heap_ || Root + size_ > capacity_))
            return check_failed("heap: size %zu exceeds capacity %zu", size_, capacity_);
        if (reinterpret_cast<uintptr_t>(heap_) % kAlign)
            return check_failed("heap: array not %zu-byte aligned", kAlign);
        for (size_t i = Root; i < Root + size_; ++i) {
            const Entry &e = heap_[i];
            if (!e.timer) return check_failed("heap: null timer at %zu", i);
            if (index_of(e.timer) != i)
                return check_failed("heap: timer at %zu records index %zu", i, index_of(e.timer));
            if (e.deadline != e.timer->deadline)
                return check_failed("heap: cached deadline %llu != timer's %llu at %zu",
                                    (unsigned long long)e.deadline,
                                    (unsigned long long)e.timer->deadline, i);
            if (i > Root && before(e, heap_[parent(i)]))
                return check_failed("heap: entry %zu orders before its parent %zu", i, parent(i));
            if (seq_of(e.timer) >= seq_)
                return check_failed("heap: sequence at %zu from the future", i);
        }
        return nullptr;
    }
};

/* The two built-in instantiations (heap2.cc and heap4.cc say why these). */
using Heap2 = DaryHeap<2, 1>;
using Heap4 = DaryHeap<4, 3>;

} // namespace tl::detail

#endif /* TICKLOOP_TIMERS_DARY_HEAP_H */
