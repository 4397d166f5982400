/* SPDX-License-Identifier: MIT */
/*
 * HeapArray: one implicit D-ary min-heap of entries {key, timer*}, the array
 * under each of the heaps' parts (run_heap.h, window_heaps.h).
 *
 * - Entries live at indices [Root, Root + size). Root > 0 leaves a small
 *   unused prefix so that the D children of a node share one cache line; the
 *   array is 64-byte aligned. The key is cached beside the pointer so that
 *   sifting compares without touching the (cold) timers, as libev's ANHE and
 *   Go's timer heap do.
 * - Each timer records its index in one word of its node (node.h's
 *   NodeWord: the position word, or a list word its owner does not use),
 *   or'ed with the owner's tag: Word and Tag below.
 * - Order: key, then, if Seq, the timer's seq (seq_of: only on equal keys).
 *   No entry orders before its parent.
 * - Sifts move a hole instead of swapping, writing each moved entry once.
 * - The array grows by doubling from kInitialCapacity, only in reserve, and
 *   never shrinks. Growth is the only allocation and the only failure.
 */
#ifndef TICKLOOP_TIMERS_HEAP_ARRAY_H
#define TICKLOOP_TIMERS_HEAP_ARRAY_H

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "node.h"

/* The heap operations are forced inline: with three arrays sharing them the
   compiler would otherwise call them out of line, and the leeway-0 remove and
   reschedule would pay a call a single heap does not. */
#define TL_HEAP_INLINE [[gnu::always_inline]] inline

namespace tl::detail {

/* The insertion order of a timer that has no prev (a run's head, a window
   heap's timer): it lives in that word (node.h allows it). */
inline uint64_t &seq_of(tl_timer *t) noexcept {
    return reinterpret_cast<uint64_t &>(t->link[kPrevWord]);
}
inline uint64_t seq_of(const tl_timer *t) noexcept {
    return t->link[kPrevWord];
}

/* An entry: the key cached beside the timer. The run heap keeps a flag in
   the pointer's bit 0 (run_heap.h); entry_timer strips it. */
struct HeapEntry {
    uint64_t key;
    tl_timer *timer;
};
static_assert(sizeof(HeapEntry) == 16, "entries pack four to a cache line");
inline constexpr uintptr_t kEntryMore = 1;
static_assert(alignof(tl_timer) > kEntryMore, "bit 0 of a timer pointer is free");
inline tl_timer *entry_timer(const HeapEntry &e) noexcept {
    return reinterpret_cast<tl_timer *>(reinterpret_cast<uintptr_t>(e.timer) & ~kEntryMore);
}

template <unsigned D, size_t Root, NodeWord Word, bool Seq, uintptr_t Tag = 0>
class HeapArray {
    static_assert(D >= 2, "a heap needs at least two children per node");
    static_assert(Root > 0, "index 0 is free for the owner (\"not a head\")");

public:
    using Entry = HeapEntry;
    static constexpr size_t kAlign = 64;
    static constexpr size_t kInitialCapacity = 64; /* entries, prefix included */

    Entry *heap_ = nullptr;
    size_t size_ = 0;     /* live entries                               */
    size_t capacity_ = 0; /* entries allocated, the Root prefix included */

    HeapArray() noexcept = default;
    HeapArray(const HeapArray &) = delete;
    HeapArray &operator=(const HeapArray &) = delete;
    ~HeapArray() { std::free(heap_); }

    static size_t index_of(const tl_timer *t) noexcept { return t->link[Word] & ~Tag; }
    static void set_index(tl_timer *t, size_t i) noexcept { t->link[Word] = i | Tag; }
    static constexpr size_t parent(size_t i) noexcept { return (i - Root - 1) / D + Root; }
    static constexpr size_t first_child(size_t i) noexcept { return D * (i - Root) + Root + 1; }

    TL_HEAP_INLINE static bool before(const Entry &a, const Entry &b) noexcept {
        /* Less first: one compare decides the common case, and its flags
           serve the equality test (GCC recomputes them otherwise). */
        if (a.key < b.key) return true;
        if constexpr (Seq)
            return a.key == b.key && seq_of(entry_timer(a)) < seq_of(entry_timer(b));
        else
            return false;
    }

    const Entry &root() const noexcept { return heap_[Root]; }
    const Entry &at(size_t i) const noexcept { return heap_[i]; }
    Entry &at(size_t i) noexcept { return heap_[i]; }
    /* Timers that fit without growing. */
    size_t room() const noexcept { return capacity_ ? capacity_ - Root : 0; }

    TL_HEAP_INLINE void place(size_t i, const Entry &e) noexcept {
        heap_[i] = e;
        set_index(entry_timer(e), i);
    }

    /* Moves the hole at i up until e fits there; Fresh: e.timer carries no
       flag (a new entry), so it needs no stripping. */
    template <bool Fresh = false>
    TL_HEAP_INLINE void sift_up(size_t i, Entry e) noexcept {
        while (i > Root) {
            size_t p = parent(i);
            if (!before(e, heap_[p])) break;
            place(i, heap_[p]);
            i = p;
        }
        heap_[i] = e;
        set_index(Fresh ? e.timer : entry_timer(e), i);
    }

    /* Moves the hole at i down until e fits there. */
    TL_HEAP_INLINE void sift_down(size_t i, Entry e) noexcept {
        const size_t end = Root + size_;
        for (;;) {
            size_t c = first_child(i);
            if (c >= end) break;
            size_t best;
            if (c + D <= end) {
                /* A full sibling group (one cache line for heap4): the least
                   key by plain compares, unrolled. A tie anywhere needs the
                   insertion order, so it takes the exact path below. */
                best = c;
                uint64_t least = heap_[c].key;
                bool tie = false;
                for (size_t j = c + 1; j < c + D; ++j) {
                    uint64_t d = heap_[j].key;
                    tie |= d == least;
                    best = d < least ? j : best;
                    least = d < least ? d : least;
                }
                if (!tie && least != e.key) {
                    if (least > e.key) break;
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
    TL_HEAP_INLINE void settle(size_t i, Entry e) noexcept {
        /* Which way e goes depends on the parent; the children's line is
           fetched meanwhile, so the two likely misses overlap. */
        if (first_child(i) < Root + size_) __builtin_prefetch(&heap_[first_child(i)]);
        if (i > Root && before(e, heap_[parent(i)]))
            sift_up(i, e);
        else
            sift_down(i, e);
    }

    /* Pre: room for one more (the caller reserved it), e.timer without a
       flag (a new entry). */
    TL_HEAP_INLINE void push(Entry e) noexcept {
        ++size_;
        sift_up<true>(Root + size_ - 1, e);
    }

    /* Pre: i holds an entry. Post: it is gone, the rest still a heap. */
    TL_HEAP_INLINE void remove_at(size_t i) noexcept {
        --size_;
        size_t last = Root + size_;
        if (i != last) settle(i, heap_[last]);
    }

    /* remove_at for an entry anywhere (a cancel): in a 4-ary heap most holes
       are leaves (three in four nodes), where the last entry can only move
       up; tested first, so that the sift down's registers are saved only
       when the hole has children. A binary heap (half its nodes leaves)
       gains nothing from the test and keeps remove_at. */
    TL_HEAP_INLINE void remove_any(size_t i) noexcept {
        if constexpr (D < 4) {
            remove_at(i);
        } else {
            --size_;
            const size_t last = Root + size_;
            if (i == last) return;
            const Entry e = heap_[last];
            if (first_child(i) < last)
                settle(i, e);
            else if (i > Root && before(e, heap_[parent(i)]))
                sift_up(i, e);
            else
                place(i, e);
        }
    }

    /* Makes room() >= timers, doubling. 0 or -ENOMEM, the array unchanged
       then. */
    int reserve(size_t timers) noexcept {
        if (timers > SIZE_MAX / 2 / sizeof(Entry)) return -ENOMEM;
        size_t entries = Root + timers;
        if (entries <= capacity_) return 0;
        size_t cap = capacity_ ? capacity_ : kInitialCapacity;
        while (cap < entries) cap *= 2;
        void *mem = std::aligned_alloc(kAlign, cap * sizeof(Entry));
        if (!mem) return -ENOMEM;
        if (heap_) std::memcpy(mem, heap_, (Root + size_) * sizeof(Entry));
        std::free(heap_);
        heap_ = static_cast<Entry *>(mem);
        capacity_ = cap;
        return 0;
    }

    /* The array's own invariants (which names it in the message). */
    const char *check(const char *which) const noexcept {
        if (size_ && (!heap_ || Root + size_ > capacity_))
            return check_failed("heap %s: size %zu exceeds capacity %zu", which, size_, capacity_);
        if (reinterpret_cast<uintptr_t>(heap_) % kAlign)
            return check_failed("heap %s: array not %zu-byte aligned", which, kAlign);
        for (size_t i = Root; i < Root + size_; ++i) {
            const Entry &e = heap_[i];
            tl_timer *t = entry_timer(e);
            if (!t) return check_failed("heap %s: null timer at %zu", which, i);
            if (index_of(t) != i || (t->link[Word] & Tag) != Tag)
                return check_failed("heap %s: timer at %zu records index %zu (tag %d)", which, i,
                                    index_of(t), (t->link[Word] & Tag) == Tag);
            if (i > Root && before(e, heap_[parent(i)]))
                return check_failed("heap %s: entry %zu orders before its parent %zu", which, i,
                                    parent(i));
        }
        return nullptr;
    }
};

} // namespace tl::detail

#endif /* TICKLOOP_TIMERS_HEAP_ARRAY_H */
