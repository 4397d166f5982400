/* SPDX-License-Identifier: MIT */
/*
 * The parts of the single-level wheel (wheel.cc), each with its own
 * interface, held by the wheel as members:
 * - WheelSlots: N slots (a power of two), each a circular list (node.h) with
 *   a lower bound of its due times (its minimum), and two bitmaps of one bit
 *   per slot in 64-bit words, scanned with ctz: the occupied slots (set
 *   exactly for the non-empty ones) and the active ones (kept by the window;
 *   only occupied slots are active), and a third of stale slots, whose
 *   minimum a later restart may have left low (a walk makes the minimum
 *   exact and clears the mark; a slot that empties keeps it, so that a
 *   cancel pays nothing, and its next walk clears it). The arrays are the wheel's only
 *   allocation, made once.
 * - WheelWindow: the revolution [start, start + N) of ticks, starting at the
 *   first tick at which anything may be due, for which the active bitmap is
 *   kept. While the window is valid, no timer in a slot has a fire tick
 *   before it, and every slot holding a timer whose fire tick lies in it is
 *   active (a stale mark after a cancel is cleared when met). A used-up
 *   window is rebuilt in O(occupied slots), so the next due slot is one ctz
 *   scan and a jump of now skips empty revolutions. The wheel's position
 *   cur and its clock are the wheel's, passed in.
 */
#ifndef TICKLOOP_TIMERS_WHEEL_SLOTS_H
#define TICKLOOP_TIMERS_WHEEL_SLOTS_H

#include <cstdlib>

#include "wheel_core.h"

namespace tl::detail {

class WheelSlots {
    tl_timer **heads_ = nullptr;
    uint64_t *min_ = nullptr; /* ns; meaningful for occupied slots only */
    uint64_t *occupied_ = nullptr;
    uint64_t *active_ = nullptr; /* slots that may fire within the window */
    uint64_t *stale_ = nullptr;  /* slots whose minimum may be low      */
    uint64_t mask_;              /* N - 1 */
    size_t words_;               /* bitmap words, max(N / 64, 1): a power of two */

public:
    static constexpr size_t kNone = SIZE_MAX;

    explicit WheelSlots(uint64_t n) noexcept : mask_(n - 1), words_(n >= 64 ? size_t(n / 64) : 1) {}
    WheelSlots(const WheelSlots &) = delete;
    WheelSlots &operator=(const WheelSlots &) = delete;
    ~WheelSlots() {
        std::free(heads_);
        std::free(min_);
        std::free(occupied_);
        std::free(active_);
        std::free(stale_);
    }
    bool allocate() noexcept {
        heads_ = static_cast<tl_timer **>(std::calloc(mask_ + 1, sizeof(tl_timer *)));
        min_ = static_cast<uint64_t *>(std::calloc(mask_ + 1, sizeof(uint64_t)));
        occupied_ = static_cast<uint64_t *>(std::calloc(words_, sizeof(uint64_t)));
        active_ = static_cast<uint64_t *>(std::calloc(words_, sizeof(uint64_t)));
        stale_ = static_cast<uint64_t *>(std::calloc(words_, sizeof(uint64_t)));
        return heads_ && min_ && occupied_ && active_ && stale_;
    }

    uint64_t mask() const noexcept { return mask_; }
    size_t words() const noexcept { return words_; }
    /* The slot of tick k. */
    size_t slot_of(uint64_t k) const noexcept { return size_t(k & mask_); }
    const tl_timer *head(size_t s) const noexcept { return heads_[s]; }
    uint64_t min(size_t s) const noexcept { return min_[s]; }
    void lower_min(size_t s, uint64_t due) noexcept {
        if (due < min_[s]) min_[s] = due;
    }
    bool occupied(size_t s) const noexcept { return bit_test(occupied_, s); }
    uint64_t occupied_word(size_t w) const noexcept { return occupied_[w]; }
    bool active(size_t s) const noexcept { return bit_test(active_, s); }
    void activate(size_t s) noexcept { bit_set(active_, s); }
    void deactivate(size_t s) noexcept { bit_clear(active_, s); }
    void set_active_word(size_t w, uint64_t bits) noexcept { active_[w] = bits; }
    bool stale(size_t s) const noexcept { return bit_test(stale_, s); }
    void mark_stale(size_t s) noexcept { bit_set(stale_, s); }
    /* Bits beyond the last slot in a one-word bitmap (the walker's). */
    bool stray_bits() const noexcept {
        return mask_ + 1 < 64 && (occupied_[0] | active_[0] | stale_[0]) >> (mask_ + 1);
    }

    /* Appends t, due at due, to slot s: its minimum and occupancy follow. */
    void push(size_t s, tl_timer *t, uint64_t due) noexcept {
        if (!heads_[s]) {
            min_[s] = due;
            bit_set(occupied_, s);
        } else if (due < min_[s]) {
            min_[s] = due;
        }
        list_push(heads_[s], t, false);
    }
    /* Removes t from slot s, clearing its bits if it emptied. */
    void unlink(size_t s, tl_timer *t) noexcept {
        list_unlink(heads_[s], t);
        if (!heads_[s]) emptied(s);
    }
    /* Detaches slot s's list as a NULL-terminated chain; refill() or
       emptied() follows. Pre: s occupied. */
    tl_timer *take(size_t s) noexcept { return list_take(heads_[s]); }
    /* Appends t back to the slot being refilled after take(), minimum
       untouched (refilled() sets it). */
    void refill(size_t s, tl_timer *t) noexcept { list_push(heads_[s], t, false); }
    /* The refill after take() is done: min is the least due time put back.
       False if the slot is left empty (its bits cleared). */
    bool refilled(size_t s, uint64_t min) noexcept {
        if (!heads_[s]) {
            emptied(s);
            return false;
        }
        min_[s] = min;
        bit_clear(stale_, s);
        return true;
    }

    /* The first active slot at or after from's slot, wrapping around, or
       kNone: at most words + 1 word reads, each a ctz. */
    size_t first_active(uint64_t from) const noexcept;

private:
    void emptied(size_t s) noexcept {
        bit_clear(occupied_, s);
        bit_clear(active_, s);
    }
};

inline size_t WheelSlots::first_active(uint64_t from) const noexcept {
    size_t p = size_t(from & mask_);
    size_t w = p >> 6;
    uint64_t word = active_[w] & (~uint64_t(0) << (p & 63));
    for (size_t i = 0; i < words_; ++i) {
        if (word) return (w << 6) | size_t(__builtin_ctzll(word));
        w = (w + 1) & (words_ - 1);
        word = active_[w];
    }
    /* Back at from's word: only the bits below from's slot are left. */
    return word ? (w << 6) | size_t(__builtin_ctzll(word)) : kNone;
}

class WheelWindow {
    uint64_t start_ = 0;
    bool valid_ = false;

public:
    uint64_t start() const noexcept { return start_; }
    bool valid() const noexcept { return valid_; }
    /* Whether tick k >= start lies in the window (slots: N - 1 = mask). */
    bool holds(uint64_t k, uint64_t mask) const noexcept { return k - start_ <= mask; }
    /* Where scans start: cur, or the window if it starts later (no timer in
       a slot is due before it). */
    uint64_t scan_from(uint64_t cur) const noexcept {
        return valid_ && start_ > cur ? start_ : cur;
    }
    /* The first tick at or after from that maps to slot s. */
    static uint64_t visit_tick(uint64_t from, size_t s, uint64_t mask) noexcept {
        return from + ((s - from) & mask);
    }

    /* Slot s now holds a timer with fire tick e >= cur: it is active if e is
       in the window; the window is dropped if e is before it. */
    void filed(WheelSlots &slots, size_t s, uint64_t e) noexcept {
        if (valid_) {
            if (e < start_)
                valid_ = false; /* earlier than the window: rebuild it */
            else if (holds(e, slots.mask()))
                slots.activate(s);
        }
    }

    /* Pre: some slot occupied. The first slot with a timer due at its visit
       in the window, which it stores in visit; kNone only on a broken
       invariant. Clears the active marks of slots found to have nothing due
       (after cancels) and rebuilds a used-up window. */
    size_t find_due(WheelSlots &slots, const TickClock &clock, uint64_t cur,
                    uint64_t &visit) noexcept;

private:
    void rebuild(WheelSlots &slots, const TickClock &clock, uint64_t cur) noexcept;
};

inline size_t WheelWindow::find_due(WheelSlots &slots, const TickClock &clock, uint64_t cur,
                                    uint64_t &visit) noexcept {
    const uint64_t mask = slots.mask();
    bool rebuilt = false;
    if (!valid_ || !holds(cur > start_ ? cur : start_, mask)) {
        rebuild(slots, clock, cur);
        rebuilt = true;
    }
    for (;;) {
        uint64_t from = scan_from(cur);
        size_t s = slots.first_active(from);
        if (s != WheelSlots::kNone) {
            visit = visit_tick(from, s, mask);
            if (holds(visit, mask)) {
                if (slots.min(s) <= clock.time_of(visit)) return s;
                slots.deactivate(s);
                continue;
            }
        }
        /* Nothing left in this window: the next one starts where something
           is due (a fresh window always has an active slot). */
        if (rebuilt) return WheelSlots::kNone;
        rebuild(slots, clock, cur);
        rebuilt = true;
    }
}

/* Pre: some slot occupied. Post: the window starts at the first tick at which
   anything may be due, w = max(cur, fire tick of the least max(minimum, first
   ns of its visit) over the slots), and a slot is active iff its minimum is
   due by its visit in [w, w + N). Two passes over the occupied slots through
   the bitmap. */
inline void WheelWindow::rebuild(WheelSlots &slots, const TickClock &clock, uint64_t cur) noexcept {
    const uint64_t mask = slots.mask();
    uint64_t horizon = UINT64_MAX;
    for (size_t w = 0; w < slots.words(); ++w) {
        for (uint64_t word = slots.occupied_word(w); word; word &= word - 1) {
            size_t s = (w << 6) | size_t(__builtin_ctzll(word));
            uint64_t lower = clock.first_ns(visit_tick(cur, s, mask));
            uint64_t bound = slots.min(s) > lower ? slots.min(s) : lower;
            if (bound < horizon) horizon = bound;
        }
    }
    uint64_t from = clock.fire_tick(horizon);
    if (from < cur) from = cur;
    for (size_t w = 0; w < slots.words(); ++w) {
        uint64_t active = 0;
        for (uint64_t word = slots.occupied_word(w); word; word &= word - 1) {
            size_t s = (w << 6) | size_t(__builtin_ctzll(word));
            if (slots.min(s) <= clock.time_of(visit_tick(from, s, mask)))
                active |= uint64_t(1) << (s & 63);
        }
        slots.set_active_word(w, active);
    }
    start_ = from;
    valid_ = true;
}

} // namespace tl::detail

#endif /* TICKLOOP_TIMERS_WHEEL_SLOTS_H */
