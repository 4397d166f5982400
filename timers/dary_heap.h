/* SPDX-License-Identifier: MIT */
/*
 * An implicit d-ary min-heap of timers, the shared body of heap2.cc and
 * heap4.cc (each file picks the arity and the root offset and states why),
 * with runs of equal deadlines and per-timer leeway (timer_backend.h,
 * "Leeway").
 *
 * Three arrays, each an implicit heap of entries {key, timer*} (HeapArray):
 * - H0: the timers inserted with leeway 0, as runs (below), one entry per
 *   run keyed by its deadline. A program that never sets a leeway only ever
 *   touches H0.
 * - H1: the timers with leeway > 0, keyed by deadline, one entry each.
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
 * Runs: ties are the normal case in a server, where every timer (re)started
 * in one loop iteration shares tl_now. A run is a FIFO list of timers with
 * one deadline, and only its first timer (the head) has a heap entry. The
 * last run created or joined is open (tail_): a timer inserted with the open
 * run's deadline is appended to it, O(1) and without reading any other
 * timer; any other insert creates a run, which becomes the open one.
 * Removing a member unlinks it, O(1); removing a head passes the heap entry
 * to the next timer, O(1) too (same key, same place); only a run's last
 * timer leaves the heap. So equal deadlines cost a list operation where a
 * heap pays a sift with a tie-break at every level, and distinct deadlines
 * (every run of one timer) cost what a plain heap does, plus the open-run
 * compare.
 *   Order: a run takes a seq (the insertion counter) when created, and
 *   again when its only timer is rescheduled (the run moves). Only the open
 *   run is ever joined, and it stops being open for good once another run
 *   is created or a timer enters H1 (which takes a seq too). A run of one
 *   moved to another deadline takes a seq without closing it, which is safe
 *   because its deadline is another (one moved to the open run's deadline
 *   joins it instead). So every timer of a run was inserted after every
 *   timer of its deadline with a smaller seq and before every one with a
 *   larger seq: comparing (deadline, seq) between heads orders all timers
 *   by (deadline, insertion).
 *
 * Layout and invariants (checked by check()):
 * - Entries of each array live at indices [Root, Root + size). Root > 0
 *   leaves a small unused prefix so that the D children of a node share one
 *   cache line; the arrays are 64-byte aligned. The key is cached beside the
 *   pointer so that sifting compares without touching the (cold) timers, as
 *   libev's ANHE and Go's timer heap do.
 * - A timer in H0: link[0] = the head's index in H0, 0 for the others (an
 *   index is never 0, Root > 0); link[1] = the run's seq for the head, the
 *   previous timer for the others; link[2] = next in its run (NULL for the
 *   last). Every member has the head entry's key as deadline. tail_, if set,
 *   is the last timer of a run with key tail_deadline_, the newest run of
 *   that key.
 * - An H0 entry's pointer has bit 0 (kEntryMore) set if its run may hold
 *   more than its head (set when a second timer joins, never cleared while
 *   the entry lives): a pop of a run of one, every pop when deadlines are
 *   distinct, then removes the root without reading the (cold) timer, and
 *   the sift does not wait for it (measured: the read cost 7-10% of an
 *   expiry at 1e6 timers).
 * - A timer in H1: link[0] = index in H1, link[1] = seq, link[2] = index in
 *   L with the top bit set (kLateTag: tells H1 from H0 in O(1), since a
 *   user-space pointer never has it).
 * - H1 entries: key == timer's deadline; L entries: key >= the deadline of
 *   the timer, which is in H1 at link[0]. |H1| == |L|.
 * - Order is (key, seq) in H0 and H1, key alone in L. The seq is read from
 *   the (cold) head only when two keys are equal: two runs of one deadline,
 *   which the open run makes rare. No entry orders before its parent.
 * - Sifts move a hole instead of swapping, writing each moved entry once.
 * - Arrays grow by doubling, only in insert, reserve_room and the first
 *   reschedule into leeway, and never shrink. room_ is a count of timers
 *   every array in use can hold: H0 always (runs never outnumber timers), H1
 *   and L once a timer with leeway was inserted or rescheduled
 *   (leeway_seen_), so that a later reschedule moving a timer between H0
 *   and H1 (its leeway became zero or non-zero) never allocates. If that
 *   first reschedule cannot get room, the timer stays in H0, firing exactly
 *   (allowed: a backend may ignore leeway). Growth is the only allocation
 *   and the only failure (-ENOMEM, timer not inserted, nothing observable
 *   changed).
 * - Lent leeway (the loop's collect interval, kLentLeeway) is not a timer's
 *   own: such timers stay in H0 as leeway-0 timers do, and next_wakeup()
 *   adds the lent leeway to H0's root, the same for all of them.
 */
#ifndef TICKLOOP_TIMERS_DARY_HEAP_H
#define TICKLOOP_TIMERS_DARY_HEAP_H

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "timers.h"

namespace tl::detail {

/* One implicit heap of {key, timer*}; the timer records its index in
   link[Slot], or'ed with Tag. Seq: ties are broken by link[1] (H0, H1); else
   key alone (L). */
/* The heap operations are forced inline: with three arrays sharing them the
   compiler would otherwise call them out of line, and the leeway-0 remove and
   reschedule measured slower than the single heap they replace, which had
   them inlined. */
#define TL_HEAP_INLINE [[gnu::always_inline]] inline

/* An entry of any of the arrays: the key cached beside the timer. In H0 the
   pointer's bit 0 may carry kEntryMore (read it with entry_timer). */
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
inline bool entry_more(const HeapEntry &e) noexcept {
    return (reinterpret_cast<uintptr_t>(e.timer) & kEntryMore) != 0;
}
inline tl_timer *with_more(tl_timer *t) noexcept {
    return reinterpret_cast<tl_timer *>(reinterpret_cast<uintptr_t>(t) | kEntryMore);
}

template <unsigned D, size_t Root, unsigned Slot, bool Seq, uintptr_t Tag = 0>
class HeapArray {
    static_assert(D >= 2, "a heap needs at least two children per node");
    static_assert(Root > 0, "index 0 means \"not a run's head\" in link[0] of H0");

public:
    using Entry = HeapEntry;
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

    static size_t index_of(const tl_timer *t) noexcept { return t->link[Slot] & ~Tag; }
    static void set_index(tl_timer *t, size_t i) noexcept { t->link[Slot] = i | Tag; }
    static uint64_t &seq_of(tl_timer *t) noexcept {
        return reinterpret_cast<uint64_t &>(t->link[1]);
    }

    static constexpr size_t parent(size_t i) noexcept { return (i - Root - 1) / D + Root; }
    static constexpr size_t first_child(size_t i) noexcept { return D * (i - Root) + Root + 1; }

    TL_HEAP_INLINE static bool before(const Entry &a, const Entry &b) noexcept {
        if (a.key != b.key) return a.key < b.key;
        if constexpr (Seq)
            return seq_of(entry_timer(a)) < seq_of(entry_timer(b));
        else
            return false;
    }

    const Entry &root() const noexcept { return heap_[Root]; }
    const Entry &at(size_t i) const noexcept { return heap_[i]; }
    size_t capacity() const noexcept { return capacity_; }

    TL_HEAP_INLINE void place(size_t i, const Entry &e) noexcept {
        heap_[i] = e;
        set_index(entry_timer(e), i);
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
            tl_timer *t = entry_timer(e);
            if (!t) return check_failed("heap %s: null timer at %zu", which, i);
            if (index_of(t) != i || (t->link[Slot] & Tag) != Tag)
                return check_failed("heap %s: timer at %zu records index %zu (tag %d)", which, i,
                                    index_of(t), (t->link[Slot] & Tag) == Tag);
            if (i > Root && before(e, heap_[parent(i)]))
                return check_failed("heap %s: entry %zu orders before its parent %zu", which, i,
                                    parent(i));
        }
        return nullptr;
    }
};

template <unsigned D, size_t Root>
class DaryHeap : public MallocNew {
    /* link[2] of a timer in H1 carries kLateTag with its L index; a timer in
       H0 has its next timer there (a pointer: the top bit is clear). */
    static constexpr uintptr_t kLateTag = uintptr_t(1) << (sizeof(uintptr_t) * 8 - 1);
    static_assert(sizeof(uintptr_t) == 8, "64-bit Linux: user-space pointers have bit 63 clear");
    /* H0 (one entry per run, at its head) and H1: the same array; only what
       the other link words mean differs. */
    using Main = HeapArray<D, Root, 0, true>;
    using Late = HeapArray<D, Root, 2, false, kLateTag>; /* L */
    using Entry = HeapEntry;

    Main h0_;                    /* leeway 0: runs, by (deadline, seq)  */
    Main h1_;                    /* leeway > 0, by (deadline, seq)      */
    Late l_;                     /* leeway > 0, by deadline + leeway    */
    size_t h0_extra_ = 0;        /* timers in H0 that are not a head    */
    tl_timer *tail_ = nullptr;   /* last timer of the open run, or NULL */
    uint64_t tail_deadline_ = 0; /* the open run's (stale if no tail_)  */
    size_t room_ = 0;            /* timers every array in use can hold  */
    uint64_t seq_ = 0;           /* next insertion number, H0 and H1    */
    bool leeway_seen_ = false;
    /* A timer with a leeway of its own stayed in H0 (a reschedule into
       leeway that could not get room in H1 and L), firing exactly: H0 is no
       longer all lent timers, and next_wakeup() no longer adds the root's
       lent leeway (it could pass that timer's deadline). */
    bool h0_mixed_ = false; /* H1 and L are kept at room_ too        */

    static size_t index_of(const tl_timer *t) noexcept { return Main::index_of(t); }
    static size_t late_of(const tl_timer *t) noexcept { return Late::index_of(t); }
    static bool in_h1(const tl_timer *t) noexcept { return (t->link[2] & kLateTag) != 0; }
    static uint64_t &seq_of(tl_timer *t) noexcept { return Main::seq_of(t); }
    static tl_timer *next_of(const tl_timer *t) noexcept {
        return reinterpret_cast<tl_timer *>(t->link[2]);
    }
    static tl_timer *prev_of(const tl_timer *t) noexcept {
        return reinterpret_cast<tl_timer *>(t->link[1]);
    }
    static void set_next(tl_timer *t, tl_timer *n) noexcept {
        t->link[2] = reinterpret_cast<uintptr_t>(n);
    }
    static void set_prev(tl_timer *t, tl_timer *p) noexcept {
        t->link[1] = reinterpret_cast<uintptr_t>(p);
    }
    /* The leeway is 0 exactly when its mantissa bits are (m << e). */
    static constexpr uint32_t kLeewayMantissa = ((1u << kLeewayMantBits) - 1) << kLeewayShift;
    /* A leeway of t's own sends it to H1 and L. One the loop lent (its
       collect interval, the same for all its lent timers) keeps it in H0:
       next_wakeup() adds it to H0's root, so those timers cost what
       leeway-0 timers cost and need no H1 or L. */
    static bool own_leeway(const tl_timer *t) noexcept {
        return (t->flags & kLeewayMantissa) && !(t->flags & kLentLeeway);
    }

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

    /* Pre: t in no array. Post: t in H0, last of the open run if that run
       has this deadline, else the only timer of a new run, which opens. */
    TL_HEAP_INLINE void push_h0(tl_timer *t, uint64_t deadline) noexcept {
        set_next(t, nullptr);
        if (tail_ && deadline == tail_deadline_) {
            /* A run of one (its tail is its head, the only timer with an
               index) now has more: its entry says so. */
            if (size_t hi = tail_->link[0]) h0_.heap_[hi].timer = with_more(tail_);
            set_prev(t, tail_);
            t->link[0] = 0;
            set_next(tail_, t);
            ++h0_extra_;
        } else {
            seq_of(t) = seq_++;
            h0_.push(Entry{deadline, t});
            tail_deadline_ = deadline;
        }
        tail_ = t;
    }

    /* Pre: t in H0. Post: t out of its run; the run's heap entry removed
       if t was alone, else pointing at the run's (possibly new) head. */
    TL_HEAP_INLINE void unlink_h0(tl_timer *t) noexcept {
        tl_timer *next = next_of(t);
        size_t idx = t->link[0];
        if (idx) { /* the head */
            if (!next) {
                if (tail_ == t) tail_ = nullptr;
                h0_.remove_at(idx);
                return;
            }
            pass_head(t, next, idx);
            return;
        }
        tl_timer *prev = prev_of(t);
        --h0_extra_;
        set_next(prev, next);
        if (next)
            set_prev(next, prev);
        else if (tail_ == t)
            tail_ = prev;
    }

    /* A timer took a seq outside the open run: timers that join the run
       later would order before it, so the run closes. */
    void push_leeway(tl_timer *t, uint64_t deadline, uint64_t leeway) noexcept {
        seq_of(t) = seq_++;
        tail_ = nullptr;
        h1_.push(Entry{deadline, t});
        l_.push(Entry{sat_add(deadline, leeway), t});
    }

    /* The run of head t at index idx goes on with next as its head: same
       deadline, same place in the heap, and the run's seq goes with it. */
    TL_HEAP_INLINE void pass_head(tl_timer *t, tl_timer *next, size_t idx) noexcept {
        seq_of(next) = seq_of(t);
        next->link[0] = idx;
        h0_.heap_[idx].timer = with_more(next);
        --h0_extra_;
    }

    /* Pre: H0 holds a timer. Post: its earliest timer, removed. A run of one
       (kEntryMore clear: every run, when deadlines are distinct) leaves
       without reading the (cold) timer, so the sift does not wait for it. */
    tl_timer *pop_h0() noexcept {
        const HeapEntry &root = h0_.root();
        tl_timer *t = entry_timer(root);
        if (entry_more(root)) {
            if (tl_timer *next = next_of(t)) {
                pass_head(t, next, Root);
                return t;
            }
        }
        if (tail_ == t) tail_ = nullptr;
        h0_.remove_at(Root);
        return t;
    }

    /* Pre: t in H0, leeway 0 or ignored. Post: t at deadline, last of its
       ties. */
    TL_HEAP_INLINE void reschedule_h0(tl_timer *t, uint64_t deadline) noexcept {
        size_t idx = t->link[0];
        /* Alone in its run (every timer, when deadlines are distinct) and not
           to the open run's deadline: the run moves with a new seq. The open
           run stays open (its deadline is another), unless it is this one:
           then it moves along. A stale tail_deadline_ (no open run) only
           sends an equal deadline the slow way. */
        if (idx && !next_of(t) && deadline != tail_deadline_) [[likely]] {
            seq_of(t) = seq_++;
            if (tail_ == t) tail_deadline_ = deadline;
            h0_.settle(idx, Entry{deadline, t});
            return;
        }
        relink_h0(t, deadline);
    }

    /* reschedule_h0's other cases, out of line: t leaves its run (or its
       run's entry) and joins or creates one. */
    [[gnu::noinline]] void relink_h0(tl_timer *t, uint64_t deadline) noexcept {
        unlink_h0(t);
        push_h0(t, deadline);
    }

    /* reschedule when leeway is in use (out of line: the leeway-0 restart
       stays small where the loop inlines it). */
    [[gnu::noinline]] void reschedule_leeway(tl_timer *t, uint64_t deadline) noexcept {
        uint64_t leeway = own_leeway(t) ? timer_leeway(t) : 0;
        if (!in_h1(t)) {
            if (leeway == 0) {
                reschedule_h0(t, deadline);
                return;
            }
            unlink_h0(t);
            push_leeway(t, deadline, leeway);
            return;
        }
        size_t li = late_of(t);
        if (leeway) {
            seq_of(t) = seq_++;
            tail_ = nullptr; /* as in push_leeway */
            h1_.settle(index_of(t), Entry{deadline, t});
            l_.settle(li, Entry{sat_add(deadline, leeway), t});
            return;
        }
        h1_.remove_at(index_of(t));
        l_.remove_at(li);
        push_h0(t, deadline); /* room_ covers every timer in H0 */
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
        const bool leeway = own_leeway(t);
        if (count() + 1 > room_ || (leeway && !leeway_seen_)) [[unlikely]] {
            int r = reserve(count() + 1, leeway);
            if (r < 0) return r;
        }
        if (!leeway) [[likely]]
            push_h0(t, t->deadline);
        else
            push_leeway(t, t->deadline, timer_leeway(t));
        return 0;
    }

    /* Room for n timers more than are inside, t among them: the next n
       inserts (t's included) then allocate nothing and cannot fail, since
       no array shrinks. On -ENOMEM nothing changed. */
    int reserve_room(const tl_timer *t, size_t n) noexcept {
        const bool leeway = t && own_leeway(t);
        if (count() + n <= room_ && (!leeway || leeway_seen_)) return 0;
        return reserve(count() + n, leeway);
    }

    /* Pre: t inside. Post: t not inside; the rest still a heap. */
    void remove(tl_timer *t) noexcept {
        /* H1 empty (no leeway in use) decides it without the tag. */
        if (h1_.size_ == 0 || !in_h1(t)) [[likely]] {
            unlink_h0(t);
        } else {
            l_.remove_at(late_of(t));
            h1_.remove_at(index_of(t));
        }
    }

    /* Pre: t inside. Post: t at deadline, ordered as if newly inserted, its
       leeway read anew (moving it between H0 and H1 if its class changed). */
    TL_HEAP_INLINE void reschedule(tl_timer *t, uint64_t deadline) noexcept {
        t->deadline = deadline;
        /* No leeway in use and none asked for: H0 exactly as without leeway. */
        if (!leeway_seen_ || (h1_.size_ == 0 && !own_leeway(t))) [[likely]] {
            if (!leeway_seen_ && own_leeway(t)) [[unlikely]] {
                if (reserve(count(), true) == 0) {
                    reschedule_leeway(t, deadline);
                    return;
                }
                h0_mixed_ = true; /* no memory: it stays, firing exactly */
            }
            reschedule_h0(t, deadline);
            return;
        }
        reschedule_leeway(t, deadline);
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

    /* The earliest H0 deadline (+ its lent leeway) or the earliest deadline +
       leeway of H1. */
    uint64_t next_wakeup() const noexcept {
        uint64_t a = UINT64_MAX;
        if (h0_.size_) {
            a = h0_.root().key;
            const tl_timer *head = entry_timer(h0_.root());
            if ((head->flags & kLentLeeway) && !h0_mixed_) [[unlikely]]
                a = sat_add(a, timer_leeway(head));
        }
        if (l_.size_ && l_.root().key < a) a = l_.root().key;
        return a;
    }

    /* Post: the earliest timer if its deadline <= now, removed; else NULL. */
    tl_timer *pop_expired(uint64_t now) noexcept {
        if (h1_.size_ == 0) [[likely]] {
            if (h0_.size_ == 0 || h0_.root().key > now) return nullptr;
            return pop_h0();
        }
        /* A run's head carries the run's seq, and no H1 timer was inserted
           between two timers of one run (push_leeway closes the open run),
           so comparing the heads orders by (deadline, insertion). */
        if (h0_.size_ == 0 || Main::before(h1_.root(), h0_.root())) {
            if (h1_.root().key > now) return nullptr;
            tl_timer *t = entry_timer(h1_.root());
            l_.remove_at(late_of(t));
            h1_.remove_at(Root);
            return t;
        }
        if (h0_.root().key > now) return nullptr;
        return pop_h0();
    }

    /* Runs count their heads in H0's size; only ties touch h0_extra_. */
    size_t count() const noexcept { return h0_.size_ + h0_extra_ + h1_.size_; }

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
        const size_t h0_count = h0_.size_ + h0_extra_;
        /* Each run: its members, in list order, have the run's deadline; the
           head's seq is the run's. The open run is the newest of its
           deadline, and tail_ its last timer. */
        size_t members = 0;
        uint64_t open_seq = 0;
        bool open_found = false;
        for (size_t i = Root; i < Root + h0_.size_; ++i) {
            tl_timer *head = entry_timer(h0_.at(i));
            size_t run_length = 0;
            const uint64_t key = h0_.at(i).key;
            if (in_h1(head)) return check_failed("heap H0: head at %zu tagged as H1", i);
            if (seq_of(head) >= seq_)
                return check_failed("heap H0: run seq at %zu from the future", i);
            tl_timer *prev = head;
            for (tl_timer *m = head; m; prev = m, m = next_of(m)) {
                ++run_length;
                if (in_h1(m)) return check_failed("heap H0: timer of run %zu tagged as H1", i);
                if (++members > h0_count)
                    return check_failed("heap H0: runs hold more than %zu timers (a cycle?)",
                                        h0_count);
                if (m->deadline != key)
                    return check_failed("heap H0: run at %zu with key %llu holds deadline %llu", i,
                                        (unsigned long long)key, (unsigned long long)m->deadline);
                if (m != head && (m->link[0] != 0 || prev_of(m) != prev))
                    return check_failed("heap H0: member of run %zu: link[0] %zu, prev %s", i,
                                        (size_t)m->link[0], prev_of(m) == prev ? "right" : "wrong");
                if (m == tail_) {
                    if (next_of(m)) return check_failed("heap H0: open tail has a next");
                    if (key != tail_deadline_)
                        return check_failed("heap H0: open run's deadline %llu, tail's %llu",
                                            (unsigned long long)tail_deadline_,
                                            (unsigned long long)key);
                    open_found = true;
                    open_seq = seq_of(head);
                }
            }
            if (run_length > 1 && !entry_more(h0_.at(i)))
                return check_failed("heap H0: run at %zu holds %zu timers, entry says one", i,
                                    run_length);
        }
        if (members != h0_count)
            return check_failed("heap H0: runs hold %zu timers, %zu runs + %zu others", members,
                                h0_.size_, h0_extra_);
        if (tail_ && !open_found) return check_failed("heap H0: open tail not in any run");
        if (open_found)
            for (size_t i = Root; i < Root + h0_.size_; ++i)
                if (h0_.at(i).key == tail_deadline_ && seq_of(entry_timer(h0_.at(i))) > open_seq)
                    return check_failed("heap H0: the open run is not the newest of its deadline");
        for (size_t i = Root; i < Root + h1_.size_; ++i) {
            tl_timer *t = entry_timer(h1_.at(i));
            if (h1_.at(i).key != t->deadline)
                return check_failed("heap H1: cached deadline %llu != timer's %llu at %zu",
                                    (unsigned long long)h1_.at(i).key,
                                    (unsigned long long)t->deadline, i);
            size_t li = late_of(t);
            if (!in_h1(t) || li < Root || li >= Root + l_.size_ || entry_timer(l_.at(li)) != t)
                return check_failed("heap H1: timer at %zu not at its L index %zu", i, li);
            if (seq_of(t) >= seq_)
                return check_failed("heap H1: sequence at %zu from the future", i);
        }
        for (size_t i = Root; i < Root + l_.size_; ++i) {
            tl_timer *t = entry_timer(l_.at(i));
            size_t hi = index_of(t);
            if (hi < Root || hi >= Root + h1_.size_ || entry_timer(h1_.at(hi)) != t)
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
