/* SPDX-License-Identifier: MIT */
/*
 * RunHeap: the heaps' timers without a leeway of their own (H0), as runs of
 * equal deadlines, one heap entry per run. A program that never sets a
 * leeway only ever touches this part.
 *
 * Ties are the normal case in a server, where every timer (re)started in one
 * loop iteration shares tl_now. A run is a FIFO list of timers with one
 * deadline; only its first timer (the head) has a heap entry, keyed by the
 * deadline. Joining, leaving and passing the head on are list operations,
 * O(1); only a run's last timer leaves the heap.
 *
 * What holds (check() walks it):
 * - Node (node.h): next = the next timer of the run (NULL for the last);
 *   prev = the previous one, except for the head, which has none and keeps
 *   the run's seq there (seq_of); position = the head's index in H0, 0 for
 *   the others (an index is never 0: Root > 0).
 * - Every timer of a run has the run's deadline. Order in H0 is (deadline,
 *   run seq). Seqs come from one counter (take_seq), shared with the window
 *   heaps, so the composition compares them across parts.
 * - An entry's pointer has kEntryMore set if its run may hold more than its
 *   head (set when a second timer joins, kept while the entry lives): a pop
 *   of a run of one then leaves without reading the (cold) timer.
 * - The table (deadlines_, tails_): direct-mapped, slot(deadline) -> the
 *   last timer of the newest run of that deadline, i.e. the run whose seq is
 *   above every other run's and every window-heap timer's of that deadline.
 *   A start joins that run, which keeps (deadline, start order) for every
 *   timer; a miss creates a new run, which the slot then records. A run of
 *   one moved to another deadline is the newest there and is recorded
 *   there. A slot is emptied when its run empties or moves away, and, by the
 *   composition (forget), when a window-heap timer of its deadline takes a
 *   seq.
 * - Lazy later restarts (Go's timerModifiedLater, libev's advice for idle
 *   timeouts): a run of one whose entry is below the top three levels
 *   (kLazyFrom), restarted to a deadline at or after its own, keeps its
 *   entry, and only its timer changes: the new deadline, and the
 *   restart's seq in the next word as (seq << 1) | kStale (a run of one has
 *   no next; a timer's address is even). Such a run is stale: its entry's
 *   (key, seq) is a lower bound of its (deadline, restart seq), so the heap
 *   stays a heap of entries and the least entry, once exact, is the least
 *   timer. refresh() makes the root exact before anything reads it (pop,
 *   next_expiry, next_wakeup: no wake-up at a stale key), moving it down
 *   with its true key and seq. A stale run is alone: the table never
 *   records it (a restart clears its old deadline's slot), so no start
 *   joins it; and it is the newest of its deadline when restarted, so the
 *   restart forgets that deadline's slot, as a window timer does. stale_
 *   counts stale runs: 0 spares pop and cancel every extra read. An earlier
 *   restart, and every restart of a timer not alone, moves it at once.
 */
#ifndef TICKLOOP_TIMERS_RUN_HEAP_H
#define TICKLOOP_TIMERS_RUN_HEAP_H

#include "heap_array.h"

namespace tl::detail {

template <unsigned D, size_t Root>
class RunHeap {
public:
    using Array = HeapArray<D, Root, kPositionWord, true>;
    using Entry = HeapEntry;
    /* 256 slots (4 KiB): a few dozen deadlines in use at once rarely share
       one. A power of two, so the slot is the hash's top bits. */
    static constexpr unsigned kSlotBits = 8;
    static constexpr size_t kSlots = size_t(1) << kSlotBits;

    static size_t slot(uint64_t deadline) noexcept {
        return size_t((deadline * 0x9e3779b97f4a7c15ull) >> (64 - kSlotBits));
    }

    /* The next word of a stale run's head: (restart seq << 1) | kStale
       (top comment), read and written only through these three. */
    static constexpr uintptr_t kStale = 1;
    static bool stale(const tl_timer *t) noexcept { return t->link[kNextWord] & kStale; }
    static uint64_t restart_seq(const tl_timer *t) noexcept { return t->link[kNextWord] >> 1; }
    static void mark_stale(tl_timer *t, uint64_t seq) noexcept {
        t->link[kNextWord] = uintptr_t(seq) << 1 | kStale;
    }

    /* Runs of one whose entry sits in the top three levels are relinked
       at a later restart, not left stale: the next wait refreshes the
       root's region anyway, so staleness there only defers the same sift
       while keeping the timer out of its deadline's run. Relinked, a
       server's restarts within one iteration (one tl_now + timeout) join
       one run, and the heap shrinks to a run per recent iteration. Deeper
       entries (a large population's idle timeouts) stay lazy. */
    static constexpr size_t kLazyFrom = Root + 1 + D + D * D;

    size_t runs() const noexcept { return h0_.size_; }
    size_t count() const noexcept { return h0_.size_ + extra_; }
    const Entry &root() const noexcept { return h0_.root(); }
    size_t room() const noexcept { return h0_.room(); }
    /* No room for one more than timers. */
    bool full(size_t timers) const noexcept { return Root + timers >= h0_.capacity_; }
    /* Growth, out of line: it is rare and would crowd the insert. */
    [[gnu::noinline, gnu::cold]] int reserve(size_t timers) noexcept { return h0_.reserve(timers); }
    uint64_t take_seq() noexcept { return seq_++; }

    /* Pre: t in no part, room for it, t->deadline set. Post: t last of the
       newest run of its deadline if the table records it, else alone in a
       new run, which the table records. */
    TL_HEAP_INLINE void push(tl_timer *t) noexcept {
        const uint64_t deadline = t->deadline;
        const size_t s = slot(deadline);
        set_next(t, nullptr);
        if (tails_[s] && deadlines_[s] == deadline) {
            tl_timer *tail = tails_[s];
            /* A run of one (its tail is its head) now has more: say so. */
            if (size_t hi = position_of(tail)) h0_.at(hi).timer = with_more(tail);
            set_prev(t, tail);
            position_of(t) = 0;
            set_next(tail, t);
            ++extra_;
        } else {
            seq_of(t) = seq_++;
            h0_.push(Entry{deadline, t});
            deadlines_[s] = deadline;
        }
        tails_[s] = t;
    }

    /* Pre: t inside, t->deadline its run's. Post: t out of its run; the run's
       entry gone if t was alone, else at the run's (possibly new) head.
       Cancel: a cancel's hole (heap_array.h, remove_any), not a relink's. */
    template <bool Cancel = true>
    TL_HEAP_INLINE void remove(tl_timer *t) noexcept {
        tl_timer *next = next_of(t);
        size_t idx = position_of(t);
        if (idx) {
            if (next) {
                if (!stale(t)) [[likely]] {
                    pass_head(t, next, idx);
                    return;
                }
                --stale_; /* a stale run: alone, and in no table slot */
            }
            tail_leaves(t, nullptr);
            if constexpr (Cancel)
                h0_.remove_any(idx);
            else
                h0_.remove_at(idx);
            return;
        }
        leave_run(t, next);
    }

    /* Post: the root's entry is exact (no stale run there), so root() is
       the earliest run. Pop, next_expiry and next_wakeup call it first. */
    TL_HEAP_INLINE void refresh() noexcept {
        if (stale_) [[unlikely]]
            refresh_root();
    }

    /* Pre: H0 not empty, refresh() done. Post: the earliest timer, removed. */
    tl_timer *pop() noexcept {
        const Entry &root = h0_.root();
        tl_timer *t = entry_timer(root);
        if (reinterpret_cast<uintptr_t>(root.timer) & kEntryMore) {
            if (tl_timer *next = next_of(t)) {
                pass_head(t, next, Root);
                return t;
            }
        }
        tl_timer *&tail = tails_[slot(root.key)];
        if (tail == t) tail = nullptr;
        h0_.remove_at(Root);
        return t;
    }

    /* Pre: t inside. Post: t at deadline, last of its ties: a run of one
       moved later is left stale (top comment) unless its entry is in the
       top levels, where it relinks; one moved earlier settles
       (move_earlier); a timer that shares its run joins the newest run of
       deadline where the table records one (a server's restarts within
       one iteration, all to one tl_now + timeout), and relinks otherwise.
       The first and third cases write only t, its neighbours and the
       table. */
    TL_HEAP_INLINE void reschedule(tl_timer *t, uint64_t deadline) noexcept {
        size_t idx = position_of(t);
        if (idx && (!next_of(t) || stale(t))) [[likely]] {
            if (deadline < t->deadline) [[unlikely]] {
                move_earlier(t, deadline, idx);
                return;
            }
            if (idx < kLazyFrom) [[unlikely]] {
                relink(t, deadline);
                return;
            }
            const size_t from = slot(t->deadline);
            if (tails_[from] == t) tails_[from] = nullptr;
            forget(deadline);
            stale_ += !stale(t);
            t->deadline = deadline;
            mark_stale(t, seq_++);
            return;
        }
        const size_t to = slot(deadline);
        tl_timer *tail = tails_[to];
        if (tail && deadlines_[to] == deadline) {
            /* The last of the newest run of deadline is already last of
               its ties. */
            if (tail != t) move_to_tail(t, idx, tail, to, deadline);
            return;
        }
        relink(t, deadline);
    }

    /* A window-heap timer of deadline took a seq: the recorded run, if of
       that deadline, is no longer its newest. */
    void forget(uint64_t deadline) noexcept {
        const size_t s = slot(deadline);
        if (deadlines_[s] == deadline) tails_[s] = nullptr;
    }

    const char *check() const noexcept;
    const char *check_table(const uint64_t *newest_seq) const noexcept;
    /* For the composition's check: the seq of the run slot s records, and
       its deadline; false if the slot is empty. */
    bool recorded(size_t s, uint64_t &deadline, uint64_t &seq) const noexcept;

private:
    Array h0_;         /* one entry per run, by (deadline, seq)  */
    size_t extra_ = 0; /* timers that are not a run's head       */
    size_t stale_ = 0; /* stale runs (top comment)               */
    uint64_t seq_ = 0; /* the next seq                           */
    /* The table, as two arrays so that a slot is one scaled index. */
    uint64_t deadlines_[kSlots]{};
    tl_timer *tails_[kSlots]{}; /* NULL: the slot is empty */

    static tl_timer *with_more(tl_timer *t) noexcept {
        return reinterpret_cast<tl_timer *>(reinterpret_cast<uintptr_t>(t) | kEntryMore);
    }

    /* refresh's loop, out of line: while the root is stale, its entry
       takes its run's deadline and restart seq and moves down. */
    [[gnu::noinline]] void refresh_root() noexcept {
        while (stale_ && h0_.size_) {
            tl_timer *t = entry_timer(h0_.root());
            if (!stale(t)) return;
            seq_of(t) = restart_seq(t);
            set_next(t, nullptr);
            --stale_;
            h0_.sift_down(Root, Entry{t->deadline, t});
        }
    }

    /* t, a member (not its run's head), leaves the run; next is its next. */
    TL_HEAP_INLINE void leave_run(tl_timer *t, tl_timer *next) noexcept {
        tl_timer *prev = prev_of(t);
        --extra_;
        set_next(prev, next);
        if (next)
            set_prev(next, prev);
        else
            tail_leaves(t, prev);
    }

    /* t, its run's last timer, leaves; prev (NULL: none) is the new last. */
    TL_HEAP_INLINE void tail_leaves(const tl_timer *t, tl_timer *prev) noexcept {
        tl_timer *&tail = tails_[slot(t->deadline)];
        if (tail == t) tail = prev;
    }

    /* The run of head t at index idx goes on with next as its head: same
       deadline, same place in the heap, and the run's seq goes with it. */
    TL_HEAP_INLINE void pass_head(tl_timer *t, tl_timer *next, size_t idx) noexcept {
        seq_of(next) = seq_of(t);
        position_of(next) = idx;
        h0_.at(idx).timer = with_more(next);
        --extra_;
    }

    /* reschedule of a run of one at idx to an earlier deadline, out of line
       (the stale case above then saves no register): the run moves, with a
       new seq, which makes it the newest of deadline, so the table records
       it there (without reading the slot). An exact entry's key was the
       old deadline, so it can only move up; a stale one's is a lower bound,
       which the new deadline may pass either way. */
    [[gnu::noinline]] void move_earlier(tl_timer *t, uint64_t deadline, size_t idx) noexcept {
        const size_t from = slot(t->deadline), to = slot(deadline);
        const bool was_stale = stale(t);
        if (tails_[from] == t) tails_[from] = nullptr;
        stale_ -= was_stale;
        set_next(t, nullptr);
        t->deadline = deadline;
        seq_of(t) = seq_++;
        deadlines_[to] = deadline;
        tails_[to] = t;
        if (was_stale) [[unlikely]]
            h0_.settle(idx, Entry{deadline, t});
        else
            h0_.template sift_up<true>(idx, Entry{deadline, t});
    }

    /* reschedule of t, which shares its run (head at idx, or a member: idx
       0), to deadline, whose newest run the table records at slot `to`
       with its last timer tail != t: t leaves its run, which keeps its
       entry, and becomes that run's last. */
    TL_HEAP_INLINE void move_to_tail(tl_timer *t, size_t idx, tl_timer *tail, size_t to,
                                     uint64_t deadline) noexcept {
        tl_timer *next = next_of(t);
        if (idx)
            pass_head(t, next, idx);
        else
            leave_run(t, next);
        /* A run of one (its tail is its head) now has more: say so. */
        if (size_t hi = position_of(tail)) h0_.at(hi).timer = with_more(tail);
        t->deadline = deadline;
        set_next(t, nullptr);
        set_prev(t, tail);
        position_of(t) = 0;
        set_next(tail, t);
        tails_[to] = t;
        ++extra_;
    }

    /* reschedule's other cases, out of line: t leaves its run (or its run's
       entry) and joins or creates one. */
    [[gnu::noinline]] void relink(tl_timer *t, uint64_t deadline) noexcept {
        remove<false>(t);
        t->deadline = deadline;
        push(t);
    }

    /* The head of the run whose last timer is tail (walker only). */
    const tl_timer *head_of(const tl_timer *tail) const noexcept {
        size_t steps = 0;
        while (tail && !position_of(tail) && ++steps <= count()) tail = prev_of(tail);
        return tail && position_of(tail) ? tail : nullptr;
    }
};

/* check's table part: each slot names the last timer of the newest run of
   its deadline (newest_seq: that run's seq + 1, over every run). */
template <unsigned D, size_t Root>
const char *RunHeap<D, Root>::check_table(const uint64_t *newest_seq) const noexcept {
    for (size_t s = 0; s < kSlots; ++s) {
        const tl_timer *tail = tails_[s];
        const uint64_t deadline = deadlines_[s];
        if (!tail) continue;
        if (slot(deadline) != s)
            return check_failed("heap H0: table slot %zu holds deadline %llu of slot %zu", s,
                                (unsigned long long)deadline, slot(deadline));
        const tl_timer *head = head_of(tail);
        if (!head || next_of(tail) || stale(head) || tail->deadline != deadline)
            return check_failed("heap H0: table slot %zu: not the last timer of a run of %llu", s,
                                (unsigned long long)deadline);
        size_t hi = position_of(head);
        if (hi < Root || hi >= Root + h0_.size_ || entry_timer(h0_.at(hi)) != head)
            return check_failed("heap H0: table slot %zu: run not in H0", s);
        if (seq_of(head) + 1 != newest_seq[s])
            return check_failed("heap H0: table slot %zu: a newer run of %llu exists", s,
                                (unsigned long long)deadline);
    }
    return nullptr;
}

template <unsigned D, size_t Root>
bool RunHeap<D, Root>::recorded(size_t s, uint64_t &deadline, uint64_t &seq) const noexcept {
    const tl_timer *head = tails_[s] ? head_of(tails_[s]) : nullptr;
    if (!head) return false;
    deadline = deadlines_[s];
    seq = seq_of(head);
    return true;
}

template <unsigned D, size_t Root>
const char *RunHeap<D, Root>::check() const noexcept {
    if (const char *m = h0_.check("H0")) return m;
    const size_t total = count();
    size_t members = 0, stale_runs = 0;
    uint64_t newest_seq[kSlots] = {}; /* + 1: the newest run of the slot's deadline */
    for (size_t i = Root; i < Root + h0_.size_; ++i) {
        const Entry &e = h0_.at(i);
        const tl_timer *head = entry_timer(e);
        /* A stale run: one timer, its (deadline, restart seq) after the
           entry's (key, seq). */
        const bool lazy = stale(head);
        const uint64_t seq = lazy ? restart_seq(head) : seq_of(head);
        if (lazy) {
            ++stale_runs;
            if (head->deadline < e.key || (head->deadline == e.key && seq <= seq_of(head)))
                return check_failed("heap H0: stale run at %zu orders before its entry", i);
        }
        const size_t s = slot(head->deadline);
        if (deadlines_[s] == head->deadline && seq >= newest_seq[s]) newest_seq[s] = seq + 1;
        if (seq >= seq_ || seq_of(head) >= seq_)
            return check_failed("heap H0: run seq at %zu from the future", i);
        size_t length = 0;
        const tl_timer *prev = head;
        for (const tl_timer *m = head; m; prev = m, m = lazy ? nullptr : next_of(m)) {
            ++length;
            if (++members > total)
                return check_failed("heap H0: runs hold more than %zu timers (a cycle?)", total);
            if (m->deadline != (lazy ? head->deadline : e.key))
                return check_failed("heap H0: run at %zu with key %llu holds deadline %llu", i,
                                    (unsigned long long)e.key, (unsigned long long)m->deadline);
            if (m != head && (position_of(m) != 0 || prev_of(m) != prev || stale(m)))
                return check_failed("heap H0: member of run %zu: position %zu, prev %s", i,
                                    (size_t)position_of(m), prev_of(m) == prev ? "right" : "wrong");
        }
        if (length > 1 && !(reinterpret_cast<uintptr_t>(e.timer) & kEntryMore))
            return check_failed("heap H0: run at %zu holds %zu timers, entry says one", i, length);
    }
    if (stale_runs != stale_)
        return check_failed("heap H0: %zu stale runs, counted %zu", stale_runs, stale_);
    if (members != total)
        return check_failed("heap H0: runs hold %zu timers, %zu runs + %zu others", members,
                            h0_.size_, extra_);
    return check_table(newest_seq);
}

} // namespace tl::detail

#endif /* TICKLOOP_TIMERS_RUN_HEAP_H */
