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
 *   they were last sorted (only occupied ones). The earliest slot is two ctz
 *   away.
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
static_assert(kLevels <= 64, "the summary word has one bit per level");
static_assert(2 * kLevels * kSlots < SlotPosition::kDueSlot, "slot ids stay below kDueSlot");

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
/* Slot ids, as a timer's position records them: bank * kSlots + slot, where
   bank = level * 2 + which of the level's two banks (Levels). */
constexpr uintptr_t slot_id(unsigned bank, unsigned slot) noexcept {
    return uintptr_t(bank * kSlots + slot);
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
    void reset_min(unsigned slot, uint64_t due) noexcept { min_[slot] = due; }
    /* Appends t, due at due; its minimum follows, or starts over if the
       list was empty and `fresh` says so (a slot whose stage holds timers is
       not). True if the list was empty. */
    template <class Fresh>
    bool push(unsigned slot, tl_timer *t, uint64_t due, Fresh fresh) noexcept {
        bool was_empty = !heads_[slot];
        if (was_empty ? fresh() || due < min_[slot] : due < min_[slot]) min_[slot] = due;
        list_push(heads_[slot], t, false);
        return was_empty;
    }
    /* Removes t; true if its slot emptied. */
    bool unlink(unsigned slot, tl_timer *t) noexcept {
        list_unlink(heads_[slot], t);
        return !heads_[slot];
    }
    /* Detaches the slot's whole list as a NULL-terminated chain. */
    tl_timer *take(unsigned slot) noexcept {
        return heads_[slot] ? list_take(heads_[slot]) : nullptr;
    }
};
static_assert(sizeof(Level) == kSlots * 16, "a level's arrays stay a power of two");

/* Timers moved from each target's list into its stage per pop that finds
 * nothing more due: tens of nanoseconds each, so such a pop adds tens of
 * microseconds at most, and a slot of n timers is staged within n / 1024 of
 * them. */
inline constexpr unsigned kStageBudget = 1024;

/* A staging target: the slot of a level L >= 1 whose timers are sorted
 * ahead of its cascade into the spare bank of level L - 1 (its buckets, one
 * per digit at L - 1), so that the cascade swaps banks instead of re-filing
 * them all in one pop. Chosen as the level's first slot whenever its stage
 * is empty; a target with an empty stage is only a slot number. */
struct StageTarget {
    static constexpr uint8_t kNone = 0xff;
    uint8_t slot = kNone; /* the target slot at its level, or kNone */
    bool stuck = false;   /* its list's head cannot be staged (lazy or on a grid) */
};

class Levels {
    /* Two banks per level, bank p = level * 2 + 0 or 1: one holds the
       level's slots, the other (the spare) the stage of the target one
       level up. */
    Level banks_[kLevels * 2];
    uint64_t occupied_[kLevels] = {}; /* per level, bit s: its slot s holds a timer */
    uint64_t staged_[kLevels] = {};   /* per level, bit b: its spare's bucket b does */
    uint64_t summary_ = 0;            /* bit L: level L has an occupied slot */
    uint64_t unsorted0_ = 0;          /* level-0 slots holding a moved timer */
    uint64_t unsorted0_spare_ = 0;    /* level-0 buckets holding one */
    uint8_t active_[kLevels];         /* per level: the bank of its slots */
    uint32_t spares_;                 /* bit p: bank p is a spare */
    StageTarget targets_[kLevels];    /* by target level; targets_[0] unused */

    bool stage_holds(unsigned level) const noexcept {
        return targets_[level].slot != StageTarget::kNone && staged_[level - 1];
    }
    void emptied(unsigned bank, unsigned slot) noexcept;

public:
    Levels() noexcept {
        spares_ = 0;
        for (unsigned level = 0; level < kLevels; ++level) {
            active_[level] = uint8_t(level * 2);
            spares_ |= uint32_t(2) << (level * 2);
        }
    }
    /* The bank that holds the level's slots. */
    unsigned bank_of(unsigned level) const noexcept { return active_[level]; }
    const Level &at(unsigned level) const noexcept { return banks_[active_[level]]; }
    Level &at(unsigned level) noexcept { return banks_[active_[level]]; }
    Level &bank(unsigned b) noexcept { return banks_[b]; }
    bool any() const noexcept { return summary_; }
    uint64_t summary() const noexcept { return summary_; }
    uint64_t occupied(unsigned level) const noexcept { return occupied_[level]; }
    uint64_t unsorted0() const noexcept { return unsorted0_; }
    /* The lowest occupied level and its lowest occupied slot. Pre: any(). */
    unsigned first_level() const noexcept { return unsigned(__builtin_ctzll(summary_)); }
    unsigned first_slot(unsigned level) const noexcept {
        return unsigned(__builtin_ctzll(occupied_[level]));
    }

    /* Appends t to a slot of the level, due at due; returns its slot id. */
    uintptr_t push(unsigned level, unsigned slot, tl_timer *t, uint64_t due) noexcept {
        unsigned b = active_[level];
        auto fresh = [&] { return !(occupied_[level] & bit(slot)); };
        if (banks_[b].push(slot, t, due, fresh)) {
            occupied_[level] |= bit(slot);
            summary_ |= bit(level);
        }
        return slot_id(b, slot);
    }
    /* Removes t, which is in the slot or bucket `id` names. */
    void unlink(uintptr_t id, tl_timer *t) noexcept {
        unsigned b = unsigned(id / kSlots), slot = unsigned(id % kSlots);
        if (banks_[b].unlink(slot, t)) emptied(b, slot);
    }
    tl_timer *take(unsigned level, unsigned slot) noexcept {
        unsigned b = active_[level];
        tl_timer *t = banks_[b].take(slot);
        emptied(b, slot);
        return t;
    }
    /* Level-0 slot `slot` of bank b holds a timer placed out of start order. */
    void mark_unsorted(unsigned b, unsigned slot) noexcept {
        (b == active_[0] ? unsorted0_ : unsorted0_spare_) |= bit(slot);
    }
    /* Sorts level-0 slot by fires_before if it is marked unsorted. */
    void sort_level0(unsigned slot) noexcept {
        if (unsorted0_ & bit(slot)) [[unlikely]] {
            list_sort(banks_[active_[0]].list(slot), fires_before);
            unsorted0_ &= ~bit(slot);
        }
    }

    /* Staging. A spare bank holds a stage: its timers are only ever moved,
       not rescheduled in place. */
    bool staged(unsigned bank) const noexcept { return (spares_ >> bank) & 1; }
    const StageTarget &target(unsigned level) const noexcept { return targets_[level]; }
    bool is_target(unsigned level, unsigned slot) const noexcept {
        return targets_[level].slot == slot;
    }
    /* The bank that holds the stage of the level's target, and its buckets. */
    unsigned stage_bank(unsigned level) const noexcept { return active_[level - 1] ^ 1; }
    const Level &stage(unsigned level) const noexcept { return banks_[stage_bank(level)]; }
    uint64_t stage_occupied(unsigned level) const noexcept { return staged_[level - 1]; }
    /* Makes slot the level's target. Pre: level >= 1, its stage empty. */
    void aim(unsigned level, unsigned slot) noexcept {
        targets_[level] = StageTarget{uint8_t(slot), false};
    }
    void mark_stuck(unsigned level) noexcept { targets_[level].stuck = true; }
    /* Appends t, taken from the head of the target's list, to bucket
       `bucket` of the level's target, due at due; the target slot stays
       occupied and its minimum covers t. `moved`: t is out of start order.
       Returns the bucket's id. */
    uintptr_t stage_push(unsigned level, unsigned bucket, tl_timer *t, uint64_t due,
                         bool moved) noexcept;
    /* The cascade of the level's target: its stage becomes level - 1's slots
       (level - 1 is empty), the target ends. Returns bucket 0, the timers
       that file below level - 1, as a NULL-terminated chain. */
    tl_timer *bind(unsigned level) noexcept;
};

inline void Levels::emptied(unsigned b, unsigned slot) noexcept {
    unsigned level = b / 2;
    if (b != active_[level]) {
        /* A bucket: its target stays occupied while its list or stage does. */
        staged_[level] &= ~bit(slot);
        if (level == 0) unsorted0_spare_ &= ~bit(slot);
        unsigned up = level + 1, slot_up = targets_[up].slot;
        if (!staged_[level] && !banks_[active_[up]].head(slot_up)) emptied(active_[up], slot_up);
        return;
    }
    if (level > 0 && is_target(level, slot) && stage_holds(level)) return;
    occupied_[level] &= ~bit(slot);
    if (level == 0) unsorted0_ &= ~bit(slot);
    if (!occupied_[level]) summary_ &= ~bit(level);
}

inline uintptr_t Levels::stage_push(unsigned level, unsigned bucket, tl_timer *t, uint64_t due,
                                    bool moved) noexcept {
    unsigned slot = targets_[level].slot, below = level - 1, b = stage_bank(level);
    if (!(occupied_[level] & bit(slot))) {
        /* The target's minimum starts over with its first timer. */
        banks_[active_[level]].reset_min(slot, due);
        occupied_[level] |= bit(slot);
        summary_ |= bit(level);
    } else {
        banks_[active_[level]].lower_min(slot, due);
    }
    banks_[b].push(bucket, t, due, [] { return true; });
    staged_[below] |= bit(bucket);
    if (moved && below == 0) unsorted0_spare_ |= bit(bucket);
    return slot_id(b, bucket);
}

inline tl_timer *Levels::bind(unsigned level) noexcept {
    unsigned below = level - 1;
    active_[below] ^= 1;
    spares_ ^= uint32_t(3) << (2 * below);
    occupied_[below] = staged_[below];
    staged_[below] = 0;
    if (below == 0) {
        unsorted0_ = unsorted0_spare_;
        unsorted0_spare_ = 0;
    }
    if (occupied_[below]) summary_ |= bit(below);
    targets_[level].slot = StageTarget::kNone;
    if (!(occupied_[below] & 1)) return nullptr;
    return take(below, 0);
}

} // namespace tl::detail

#endif /* TICKLOOP_TIMERS_HWHEEL_LEVELS_H */
