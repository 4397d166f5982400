/* SPDX-License-Identifier: MIT */
/*
 * An implicit d-ary min-heap of timers, the shared body of heap2.cc and
 * heap4.cc (each file picks the arity and the root offset and states why),
 * with per-timer leeway (timer_backend.h, "Leeway").
 *
 * Three arrays, each an implicit heap of entries {key, timer*} (HeapArray):
 * - H0: the timers inserted with leeway 0, keyed by deadline. A program that
 *   never sets a leeway only ever touches H0, which is the heap this file
 *   was before leeway existed: the leeway-0 paths test one size or one word
 *   and then run the old code.
 * - H1: the timers with leeway > 0, keyed by deadline.
 * - L: the same timers as H1, keyed by deadline + leeway (saturating), the
 *   latest time each may fire. The key is computed at insert and reschedule
 *   and cached in L's entry: the timer's leeway may change while it is inside
 *   and is never read again.
 * pop_expired takes the smaller root of H0 and H1 by (deadline, seq), so the
 *   two heaps together hand timers out exactly (TL_TIMER_CAP_EXACT);
 *   next_expiry is the lesser root deadline and next_wakeup() the lesser of
 *   H0's root deadline and L's root key: the loop sleeps until the first
 *   timer's window closes and then pops every timer already due (greedy
 *   interval stabbing, which needs the fewest wake-ups).
 *
 * Layout and invariants (checked by check()):
 * - Entries of each array live at indices [Root, Root + size). Root > 0
 *   leaves a small unused prefix so that the D children of a node share one
 *   cache line; the arrays are 64-byte aligned. The key is cached beside the
 *   pointer so that sifting compares without touching the (cold) timers, as
 *   libev's ANHE and Go's timer heap do.
 * - Node in tl_timer.link: link[0] = index in H0 or H1, link[1] = insertion
 *   seq, link[2] = index in L, or 0 for a timer in H0 (an index is never 0
 *   because Root > 0, so no +1 is needed).
 * - H0 and H1 entries: key == timer's deadline; L entries: key >= the
 *   deadline of the timer, which is in H1 at link[0]. |H1| == |L|.
 * - Order is (key, seq) in H0 and H1, key alone in L: link[1] holds an
 *   insertion counter shared by H0 and H1 that breaks deadline ties in start
 *   order (libuv's start_id). The timer is only read for the tie-break, so
 *   distinct deadlines never touch it. No entry orders before its parent.
 * - Sifts move a hole instead of swapping, writing each moved entry once.
 * - Arrays grow by doubling, only in insert, and never shrink. room_ is a
 *   count of timers every array in use can hold: H0 always, H1 and L once a
 *   timer with leeway was inserted (leeway_seen_), so that a reschedule
 *   moving a timer between H0 and H1 (its leeway became zero or non-zero)
 *   never allocates. Before any leeway insert, a reschedule into leeway
 *   keeps the timer in H0, firing exactly (allowed: a backend may ignore
 *   leeway). Growth is the only allocation and the only failure (-ENOMEM,
 *   timer not inserted, nothing observable changed).
 */
#ifndef TICKLOOP_TIMERS_DARY_HEAP_H
#define TICKLOOP_TIMERS_DARY_HEAP_H

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "timers.h"

namespace tl::detail {

/* One implicit heap of {key, timer*}; the timer records its index in
   link[Slot]. Seq: ties are broken by link[1] (H0, H1); else key alone (L). */
/* The heap operations are forced inline: with three arrays sharing them the
   compiler would otherwise call them out of line, and the leeway-0 remove and
   reschedule measured slower than the single heap they replace, which had
   them inlined. */
#define TL_HEAP_INLINE [[gnu::always_inline]] inline

template <unsigned D, size_t Root, unsigned Slot, bool Seq>
class HeapArray {
    static_assert(D >= 2, "a heap needs at least two children per node");
    static_assert(Root > 0, "index 0 means \"not in L\" in link[2]");

public:
    struct Entry {
        uint64_t key;
        tl_timer *timer;
    };
    static_assert(sizeof(Entry) == 16, "entries pack four to a cache line");
    static_assert(3 * sizeof(uintptr_t) <= timer_link_bytes, "heap node fits in tl_timer.link");

    static constexpr size_t kAlign = 64;
    static constexpr size_t kInitialCapacity = 64; /* entries, prefix included */

    Entry *heap_ = nullptr;
    size_t size_ = 0;     /* live entries                               */
    size_t capacity_ = 0; /* entries allocated, the Root prefix included */

    HeapArray() noexcept = default;
    HeapArray(const HeapArray &) = delete;
    HeapArray &operator=(const HeapArray &) = delete;
    ~HeapArray() { std::free(heap_); }

    static size_t &index_of(tl_timer *t) noexcept {
        return reinterpret_cast<size_t &>(t->link[Slot]);
    }
    static uint64_t &seq_of(tl_timer *t) noexcept {
        return reinterpret_cast<uint64_t &>(t->link[1]);
    }

    static constexpr size_t parent(size_t i) noexcept { return (i - Root - 1) / D + Root; }
    static constexpr size_t first_child(size_t i) noexcept { return D * (i - Root) + Root + 1; }

    static bool before(const Entry &a, const Entry &b) noexcept {
        if (a.key != b.key) return a.key < b.key;
        if constexpr (Seq)
            return seq_of(a.timer) < seq_of(b.timer);
        else
            return false;
    }

    const Entry &root() const noexcept { return heap_[Root]; }
    const Entry &at(size_t i) const noexcept { return heap_[i]; }
    size_t capacity() const noexcept { return capacity_; }

    TL_HEAP_INLINE void place(size_t i, const Entry &e) noexcept {
        heap_[i] = e;
        index_of(e.timer) = i;
    }

    /* Moves the hole at i up until e fits there. */
    TL_HEAP_INLINE void sift_up(size_t i, Entry e) noexcept {
        while (i > Root) {
            size_t p = parent(i);
            if (!before(e, heap_[p])) break;
            place(i, heap_[p]);
            i = p;
        }
        place(i, e);
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

    /* Pre: room for one more (the caller reserved it). */
    TL_HEAP_INLINE void push(Entry e) noexcept {
        ++size_;
        sift_up(Root + size_ - 1, e);
    }

    /* Pre: i holds an entry. Post: it is gone, the rest still a heap. */
    TL_HEAP_INLINE void remove_at(size_t i) noexcept {
        --size_;
        size_t last = Root + size_;
        if (i != last) settle(i, heap_[last]);
    }

    /* Makes capacity_ >= entries (prefix included), doubling. 0 or -ENOMEM,
       the array unchanged then. */
    int reserve(size_t entries) noexcept {
        if (entries <= capacity_) return 0;
        size_t cap = capacity_ ? capacity_ : kInitialCapacity;
        while (cap < entries) {
            if (cap > SIZE_MAX / 2 / sizeof(Entry)) return -ENOMEM;
            cap *= 2;
        }
        void *mem = std::aligned_alloc(kAlign, cap * sizeof(Entry));
        if (!mem) return -ENOMEM;
        if (heap_) std::memcpy(mem, heap_, (Root + size_) * sizeof(Entry));
        std::free(heap_);
        heap_ = static_cast<Entry *>(mem);
        capacity_ = cap;
        return 0;
    }

    /* The array's own invariants (which, for the message). */
    const char *check(const char *which) const noexcept {
        if (size_ && (!heap_ || Root + size_ > capacity_))
            return check_failed("heap %s: size %zu exceeds capacity %zu", which, size_, capacity_);
        if (reinterpret_cast<uintptr_t>(heap_) % kAlign)
            return check_failed("heap %s: array not %zu-byte aligned", which, kAlign);
        for (size_t i = Root; i < Root + size_; ++i) {
            const Entry &e = heap_[i];
            if (!e.timer) return check_failed("heap %s: null timer at %zu", which, i);
            if (index_of(e.timer) != i)
                return check_failed("heap %s: timer at %zu records index %zu", which, i,
                                    index_of(e.timer));
            if (i > Root && before(e, heap_[parent(i)]))
                return check_failed("heap %s: entry %zu orders before its parent %zu", which, i,
                                    parent(i));
        }
        return nullptr;
    }
};

template <unsigned D, size_t Root>
class DaryHeap : public MallocNew {
    using Main = HeapArray<D, Root, 0, true>;  /* H0 and H1 */
    using Late = HeapArray<D, Root, 2, false>; /* L          */
    using Entry = typename Main::Entry;
    using LEntry = typename Late::Entry;

    Main h0_;                  /* leeway 0, by (deadline, seq)         */
    Main h1_;                  /* leeway > 0, by (deadline, seq)       */
    Late l_;                   /* leeway > 0, by deadline + leeway      */
    size_t room_ = 0;          /* timers every array in use can hold    */
    uint64_t seq_ = 0;         /* next insertion number, H0 and H1      */
    bool leeway_seen_ = false; /* H1 and L are kept at room_ too        */

    static size_t &index_of(tl_timer *t) noexcept { return Main::index_of(t); }
    static size_t &late_of(tl_timer *t) noexcept { return Late::index_of(t); }
    static uint64_t &seq_of(tl_timer *t) noexcept { return Main::seq_of(t); }
    /* The leeway is 0 exactly when its mantissa bits are (m << e). */
    static constexpr uint32_t kLeewayMantissa = ((1u << kLeewayMantBits) - 1) << kLeewayShift;

    /* Room for need timers in H0, and in H1 and L if with_leeway or a leeway
       timer was seen before. Nothing observable changes on -ENOMEM. */
    int reserve(size_t need, bool with_leeway) noexcept {
        int r = h0_.reserve(Root + need);
        if (r < 0) return r;
        if (with_leeway || leeway_seen_) {
            /* The same capacity as H0, so that every timer fits in any. */
            if ((r = h1_.reserve(h0_.capacity())) < 0) return r;
            if ((r = l_.reserve(h0_.capacity())) < 0) return r;
            leeway_seen_ = true;
            size_t c = h0_.capacity();
            c = h1_.capacity() < c ? h1_.capacity() : c;
            c = l_.capacity() < c ? l_.capacity() : c;
            room_ = c - Root;
        } else {
            room_ = h0_.capacity() - Root;
        }
        return 0;
    }

    void push_leeway(tl_timer *t, uint64_t deadline, uint64_t leeway) noexcept {
        h1_.push(Entry{deadline, t});
        l_.push(LEntry{sat_add(deadline, leeway), t});
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
        const bool leeway = (t->flags & kLeewayMantissa) != 0;
        if (count() + 1 > room_ || (leeway && !leeway_seen_)) [[unlikely]] {
            int r = reserve(count() + 1, leeway);
            if (r < 0) return r;
        }
        seq_of(t) = seq_++;
        if (!leeway) [[likely]] {
            late_of(t) = 0;
            h0_.push(Entry{t->deadline, t});
        } else {
            push_leeway(t, t->deadline, timer_leeway(t));
        }
        return 0;
    }

    /* Pre: t inside. Post: t not inside; the rest still a heap. */
    void remove(tl_timer *t) noexcept {
        size_t li;
        /* H1 empty (no leeway in use) decides it without reading link[2]. */
        if (h1_.size_ == 0 || (li = late_of(t)) == 0) [[likely]] {
            h0_.remove_at(index_of(t));
        } else {
            h1_.remove_at(index_of(t));
            l_.remove_at(li);
        }
    }

    /* Pre: t inside. Post: t at deadline, ordered as if newly inserted, its
       leeway read anew (moving it between H0 and H1 if its class changed). */
    TL_HEAP_INLINE void reschedule(tl_timer *t, uint64_t deadline) noexcept {
        t->deadline = deadline;
        seq_of(t) = seq_++;
        /* No leeway in use and none asked for: H0 exactly as without leeway. */
        if (!leeway_seen_ || (h1_.size_ == 0 && !(t->flags & kLeewayMantissa))) [[likely]] {
            h0_.settle(index_of(t), Entry{deadline, t});
            return;
        }
        uint64_t leeway = timer_leeway(t);
        size_t li = late_of(t);
        if (li == 0) {
            /* Without room reserved in H1 and L, leeway is ignored: exact. */
            if (leeway == 0 || !leeway_seen_) [[likely]] {
                h0_.settle(index_of(t), Entry{deadline, t});
                return;
            }
            h0_.remove_at(index_of(t));
            push_leeway(t, deadline, leeway);
            return;
        }
        if (leeway) {
            h1_.settle(index_of(t), Entry{deadline, t});
            l_.settle(li, LEntry{sat_add(deadline, leeway), t});
            return;
        }
        h1_.remove_at(index_of(t));
        l_.remove_at(li);
        late_of(t) = 0;
        h0_.push(Entry{deadline, t}); /* room_ covers every timer in H0 */
    }

    /* The lesser of H0's root key and other's (UINT64_MAX for an empty one). */
    template <class Other>
    uint64_t least_with_h0(const Other &other) const noexcept {
        uint64_t a = h0_.size_ ? h0_.root().key : UINT64_MAX;
        if (other.size_ == 0) [[likely]]
            return a;
        uint64_t b = other.root().key;
        return b < a ? b : a;
    }

    /* The earliest deadline, in H0 or H1. */
    uint64_t next_expiry() const noexcept { return least_with_h0(h1_); }

    /* The earliest H0 deadline or the earliest deadline + leeway of H1. */
    uint64_t next_wakeup() const noexcept { return least_with_h0(l_); }

    /* Post: the earliest timer if its deadline <= now, removed; else NULL. */
    tl_timer *pop_expired(uint64_t now) noexcept {
        if (h1_.size_ == 0) [[likely]] {
            if (h0_.size_ == 0 || h0_.root().key > now) return nullptr;
            tl_timer *t = h0_.root().timer;
            h0_.remove_at(Root);
            return t;
        }
        if (h0_.size_ == 0 || Main::before(h1_.root(), h0_.root())) {
            if (h1_.root().key > now) return nullptr;
            tl_timer *t = h1_.root().timer;
            l_.remove_at(late_of(t));
            h1_.remove_at(Root);
            return t;
        }
        if (h0_.root().key > now) return nullptr;
        tl_timer *t = h0_.root().timer;
        h0_.remove_at(Root);
        return t;
    }

    size_t count() const noexcept { return h0_.size_ + h1_.size_; }

    const char *check() const noexcept {
        if (const char *m = h0_.check("H0")) return m;
        if (const char *m = h1_.check("H1")) return m;
        if (const char *m = l_.check("L")) return m;
        if (h1_.size_ != l_.size_)
            return check_failed("heap: H1 holds %zu timers, L %zu", h1_.size_, l_.size_);
        if (count() > room_ || (room_ && Root + room_ > h0_.capacity()))
            return check_failed("heap: room %zu below count %zu or above H0's capacity", room_,
                                count());
        if (leeway_seen_ && room_ &&
            (Root + room_ > h1_.capacity() || Root + room_ > l_.capacity()))
            return check_failed("heap: room %zu above H1's or L's capacity", room_);
        if (!leeway_seen_ && h1_.size_)
            return check_failed("heap: timers in H1 before any leeway insert");
        for (size_t i = Root; i < Root + h0_.size_; ++i) {
            tl_timer *t = h0_.at(i).timer;
            if (h0_.at(i).key != t->deadline)
                return check_failed("heap H0: cached deadline %llu != timer's %llu at %zu",
                                    (unsigned long long)h0_.at(i).key,
                                    (unsigned long long)t->deadline, i);
            if (late_of(t) != 0)
                return check_failed("heap H0: timer at %zu records L index %zu", i, late_of(t));
            if (seq_of(t) >= seq_)
                return check_failed("heap H0: sequence at %zu from the future", i);
        }
        for (size_t i = Root; i < Root + h1_.size_; ++i) {
            tl_timer *t = h1_.at(i).timer;
            if (h1_.at(i).key != t->deadline)
                return check_failed("heap H1: cached deadline %llu != timer's %llu at %zu",
                                    (unsigned long long)h1_.at(i).key,
                                    (unsigned long long)t->deadline, i);
            size_t li = late_of(t);
            if (li < Root || li >= Root + l_.size_ || l_.at(li).timer != t)
                return check_failed("heap H1: timer at %zu not at its L index %zu", i, li);
            if (seq_of(t) >= seq_)
                return check_failed("heap H1: sequence at %zu from the future", i);
        }
        for (size_t i = Root; i < Root + l_.size_; ++i) {
            tl_timer *t = l_.at(i).timer;
            size_t hi = index_of(t);
            if (hi < Root || hi >= Root + h1_.size_ || h1_.at(hi).timer != t)
                return check_failed("heap L: timer at %zu not in H1", i);
            if (l_.at(i).key < t->deadline)
                return check_failed("heap L: latest time %llu before deadline %llu at %zu",
                                    (unsigned long long)l_.at(i).key,
                                    (unsigned long long)t->deadline, i);
        }
        return nullptr;
    }
};

/* The two built-in instantiations (heap2.cc and heap4.cc say why these). */
using Heap2 = DaryHeap<2, 1>;
using Heap4 = DaryHeap<4, 3>;

} // namespace tl::detail

#undef TL_HEAP_INLINE

#endif /* TICKLOOP_TIMERS_DARY_HEAP_H */
