/* SPDX-License-Identifier: MIT */
/*
 * The levels of the hierarchical wheel (hwheel.cc), held by it as a member:
 * - the arithmetic of a level, named as the kernel's timer.c names it
 *   (LVL_SHIFT, LVL_GRAN, LVL_MASK): level_shift, level_span, slot_in, and
 *   level_of, the level at which a fire tick files for a position cur;
 * - Level, one level as tokio's level.rs has it: kSlots circular lists
 *   (node.h), each with a lower bound of its due times (its minimum);
 * - Levels: kLevels of them and their occupancy words, one bit per slot,
 *   set exactly for the non-empty ones (kept beside the levels, not in them,
 *   so that a slot id is one scaled index into the slots), the summary word
 *   with bit L set iff level L has an occupied slot, and the unsorted marks
 *   of level 0, the slots that hold a timer placed out of start order since
 *   they were last sorted (only occupied ones), and the stale marks of the
 *   slots whose minimum a later restart may have left low (only occupied
 *   ones; a walk makes the minimum exact), and per slot the number of
 *   timers filed since it was last empty (for the staging's choice). The earliest slot is two ctz
 *   away.
 *
 * The levels at the default tick (1 ms; wheel_core.h). A timer whose fire
 * tick is d ticks after cur files at the level whose range covers d; a slot
 * of level L spans 64^L ticks, and the timer is cascaded down one level or
 * more when its slot comes due, so it still fires within one tick of its
 * deadline at every level (unlike the kernel's wheel, which fires a level's
 * timers at its granularity, unless their leeway allows it: hwheel.cc):
 *
 *   level | slot span (ticks) | slot span at 1 ms | deltas it holds, up to
 *   ------+-------------------+-------------------+----------------------
 *       0 |                 1 |              1 ms |               64 ms
 *       1 |                64 |             64 ms |             4.096 s
 *       2 |              4096 |           4.096 s |             4.4 min
 *       3 |            262144 |           4.4 min |              4.66 h
 *       4 |              2^24 |            4.66 h |             12.4 days
 *       5 |              2^30 |         12.4 days |              2.18 y
 *       6 |              2^36 |            2.18 y |               139 y
 *       7 |              2^42 |             139 y |              8919 y
 *       8 |              2^48 |            8919 y |           571 000 y
 *       9 |              2^54 |         571 000 y |            36.5 My
 *      10 |              2^60 |           36.5 My |     2^64 ticks (584 My)
 *
 * So an I/O timeout of seconds files at level 1 or 2 and cascades once or
 * twice; a 30-day one starts at level 5. Level 10 uses 4 of its 6 bits.
 */
#ifndef TICKLOOP_TIMERS_HWHEEL_LEVELS_H
#define TICKLOOP_TIMERS_HWHEEL_LEVELS_H

#include "wheel_core.h"

namespace tl::detail {

/* Six bits per level: one 64-bit occupancy word per level, so finding the
 * next slot is one ctz. Fewer bits means more levels (more cascades); more
 * would need several words per level. */
inline constexpr unsigned kSlotBits = 6;
inline constexpr unsigned kSlots = 1u << kSlotBits;
inline constexpr unsigned kSlotMask = kSlots - 1;
/* Enough levels for any 64-bit tick: eleven, the top one using 4 of its 6
 * bits. No overflow list and no maximum timeout. */
inline constexpr unsigned kLevels = (64 + kSlotBits - 1) / kSlotBits;
/* The bank and the front bank (hwheel.h, "Staging"): two more tiers of
 * kSlots lists after the levels, so that their slot ids follow theirs and a
 * removal finds them the same way. */
inline constexpr unsigned kBank = kLevels;
inline constexpr unsigned kFront = kLevels + 1;
inline constexpr unsigned kTiers = kLevels + 2;
static_assert(kTiers <= 64, "the summary word has one bit per tier");
static_assert(kTiers * kSlots < SlotPosition::kDueSlot, "slot ids stay below kDueSlot");

constexpr uint64_t bit(unsigned i) noexcept {
    return uint64_t(1) << i;
}
/* The tick bits below a level's slot digit (LVL_SHIFT). */
constexpr unsigned level_shift(unsigned level) noexcept {
    return kSlotBits * level;
}
/* The ticks one slot of a level spans (LVL_GRAN). */
constexpr uint64_t level_span(unsigned level) noexcept {
    return uint64_t(1) << level_shift(level);
}
/* The slot of tick e at a level (its digit there, LVL_MASK). */
constexpr unsigned slot_in(unsigned level, uint64_t e) noexcept {
    return unsigned(e >> level_shift(level)) & kSlotMask;
}
/* The level at which tick e files when the wheel is at cur: the six-bit
   group of the highest bit in which they differ. */
inline unsigned level_of(uint64_t cur, uint64_t e) noexcept {
    return unsigned(63 - __builtin_clzll((cur ^ e) | kSlotMask)) / kSlotBits;
}
/* Slot ids, as a timer's position records them: level * kSlots + slot. */
constexpr uintptr_t slot_id(unsigned level, unsigned slot) noexcept {
    return uintptr_t(level * kSlots + slot);
}

class Level {
    tl_timer *heads_[kSlots] = {};
    uint64_t min_[kSlots]; /* ns; meaningful for occupied slots only */

public:
    const tl_timer *head(unsigned slot) const noexcept { return heads_[slot]; }
    tl_timer *&list(unsigned slot) noexcept { return heads_[slot]; }
    uint64_t min(unsigned slot) const noexcept { return min_[slot]; }
    void lower_min(unsigned slot, uint64_t due) noexcept {
        if (due < min_[slot]) min_[slot] = due;
    }
    /* Appends t (prepends it when front), due at due, its minimum
       following. True if the slot was empty. */
    bool push(unsigned slot, tl_timer *t, uint64_t due, bool front = false) noexcept {
        bool was_empty = !heads_[slot];
        if (was_empty || due < min_[slot]) min_[slot] = due;
        list_push(heads_[slot], t, front);
        return was_empty;
    }
    /* Removes t; true if its slot emptied. */
    bool unlink(unsigned slot, tl_timer *t) noexcept {
        list_unlink(heads_[slot], t);
        return !heads_[slot];
    }
    /* Detaches the slot's whole list as a NULL-terminated chain. */
    tl_timer *take(unsigned slot) noexcept { return list_take(heads_[slot]); }
};
static_assert(sizeof(Level) == kSlots * 16, "a level's arrays stay a power of two");

class Levels {
    Level levels_[kTiers];
    uint64_t occupied_[kTiers] = {}; /* per tier, bit s: slot s holds a timer */
    uint64_t summary_ = 0;           /* bit L: tier L has an occupied slot */
    uint64_t unsorted0_ = 0;         /* bit s: level-0 slot s holds a moved timer, unsorted */
    uint64_t stale_[kTiers] = {};    /* per tier, bit s: slot s's minimum may be low */
    /* per slot, the timers filed since it was last empty: a bound of what
       its cascade would move, kept by push alone (a removal or a restart
       does not pay for it) */
    uint32_t filed_[kTiers * kSlots] = {}; /* by slot id */

    void emptied(unsigned level, unsigned slot) noexcept {
        occupied_[level] &= ~bit(slot);
        if (!occupied_[level]) summary_ &= ~bit(level);
        if (level == 0) unsorted0_ &= ~bit(slot);
        stale_[level] &= ~bit(slot);
        filed_[slot_id(level, slot)] = 0;
    }

public:
    const Level &at(unsigned level) const noexcept { return levels_[level]; }
    Level &at(unsigned level) noexcept { return levels_[level]; }
    /* Levels and bank alike. */
    bool any() const noexcept { return summary_; }
    uint64_t summary() const noexcept { return summary_; }
    bool occupied(unsigned level, unsigned slot) const noexcept {
        return (occupied_[level] >> slot) & 1;
    }
    uint64_t occupied(unsigned level) const noexcept { return occupied_[level]; }
    uint64_t unsorted0() const noexcept { return unsorted0_; }
    /* The lowest occupied tier (a bank's if only the banks are) and its
       lowest occupied slot. Pre: any(). */
    unsigned first_level() const noexcept { return unsigned(__builtin_ctzll(summary_)); }
    unsigned first_slot(unsigned level) const noexcept {
        return unsigned(__builtin_ctzll(occupied_[level]));
    }

    void push(unsigned level, unsigned slot, tl_timer *t, uint64_t due,
              bool front = false) noexcept {
        ++filed_[slot_id(level, slot)];
        if (levels_[level].push(slot, t, due, front)) {
            occupied_[level] |= bit(slot);
            summary_ |= bit(level);
        }
    }
    void unlink(unsigned level, unsigned slot, tl_timer *t) noexcept {
        if (levels_[level].unlink(slot, t)) emptied(level, slot);
    }
    tl_timer *take(unsigned level, unsigned slot) noexcept {
        tl_timer *t = levels_[level].take(slot);
        emptied(level, slot);
        return t;
    }
    uint32_t filed(unsigned level, unsigned slot) const noexcept {
        return filed_[slot_id(level, slot)];
    }
    bool stale(unsigned level, unsigned slot) const noexcept { return stale_[level] & bit(slot); }
    uint64_t stale_word(unsigned level) const noexcept { return stale_[level]; }
    void mark_stale(unsigned level, unsigned slot) noexcept { stale_[level] |= bit(slot); }
    /* Level-0 slot holds a timer placed out of start order. */
    void mark_unsorted(unsigned slot) noexcept { unsorted0_ |= bit(slot); }
    /* Sorts level-0 slot by fires_before if it is marked unsorted. */
    void sort_level0(unsigned slot) noexcept {
        if (unsorted0_ & bit(slot)) [[unlikely]] {
            list_sort(levels_[0].list(slot), fires_before);
            unsorted0_ &= ~bit(slot);
        }
    }
};

} // namespace tl::detail

#endif /* TICKLOOP_TIMERS_HWHEEL_LEVELS_H */
