/* SPDX-License-Identifier: MIT */
/*
 * hwheel's walker: every invariant listed at the top of hwheel.h, checked
 * by the tests after each operation and by the loop's debug builds.
 */
#include "hwheel.h"

namespace tl::detail {

const char *HWheel::check() const noexcept {
    size_t seen = 0;
    if (const char *broken = due_.check(clock_, cur_, log_.now(), seen, count_, "hwheel"))
        return broken;
    uint64_t levels = 0;
    for (unsigned level = 0; level < kLevels; ++level) {
        for (unsigned slot = 0; slot < kSlots; ++slot) {
            if (const char *broken = check_slot(level, slot, seen)) return broken;
            if (levels_.at(level).head(slot)) levels |= bit(level);
        }
        if (level > 0)
            if (const char *broken = check_stage(level, seen, levels)) return broken;
    }
    uint64_t unsorted = levels_.unsorted0() & ~levels_.occupied(0);
    if (unsorted)
        return check_failed("hwheel: empty level-0 slots marked unsorted: %#llx",
                            (unsigned long long)unsorted);
    if (levels != levels_.summary())
        return check_failed("hwheel: level summary %#llx, occupied levels %#llx",
                            (unsigned long long)levels_.summary(), (unsigned long long)levels);
    if (seen != count_) return check_failed("hwheel: %zu timers linked, count %zu", seen, count_);
    return nullptr;
}

/* The stage of the level's target: empty without one; else each bucket's
   bit, links, ids, and timers whose fire tick lies in the target slot, at
   the bucket of its digit one level down, inside the target's minimum. */
const char *HWheel::check_stage(unsigned level, size_t &seen, uint64_t &levels) const noexcept {
    const StageTarget &tg = levels_.target(level);
    const Level &stage = levels_.stage(level);
    uint64_t occupied = levels_.stage_occupied(level);
    if (tg.slot == StageTarget::kNone)
        return occupied ? check_failed("hwheel: a stage at level %u without a target", level)
                        : nullptr;
    if (!occupied) {
        for (unsigned b = 0; b < kSlots; ++b)
            if (stage.head(b))
                return check_failed("hwheel: bucket %u of level %u unmarked", b, level);
        return nullptr;
    }
    uint64_t tg_start = start(level, tg.slot);
    if (tg_start <= cur_)
        return check_failed("hwheel: target %u/%u with a stage starts at %llu (cur %llu)", level,
                            tg.slot, (unsigned long long)tg_start, (unsigned long long)cur_);
    {
        levels |= bit(level);
        if (!((levels_.occupied(level) >> tg.slot) & 1))
            return check_failed("hwheel: target %u/%u with a stage is not occupied", level,
                                tg.slot);
    }
    uint64_t target_min = levels_.at(level).min(tg.slot);
    uintptr_t bank = levels_.stage_bank(level);
    for (unsigned b = 0; b < kSlots; ++b) {
        const tl_timer *head = stage.head(b);
        if (((occupied >> b) & 1) != (head != nullptr))
            return check_failed("hwheel: occupancy bit of bucket %u of target %u/%u", b, level,
                                tg.slot);
        const tl_timer *t = head;
        while (t) {
            SlotPosition pos = SlotPosition::of(t);
            uint64_t e = clock_.fire_tick(t);
            if (++seen > count_)
                return check_failed("hwheel: more timers linked than count %zu", count_);
            if (prev_of(next_of(t)) != t || next_of(prev_of(t)) != t)
                return check_failed("hwheel: broken links in bucket %u of level %u", b, level);
            if (pos.slot() != slot_id(unsigned(bank), b) || pos.lazy() || pos.grid_exponent())
                return check_failed("hwheel: staged timer records %#llx",
                                    (unsigned long long)pos.word());
            if (e < tg_start || e - tg_start >= level_span(level) || slot_in(level - 1, e) != b)
                return check_failed("hwheel: fire tick %llu in bucket %u of target %u/%u",
                                    (unsigned long long)e, b, level, tg.slot);
            if (target_min > clock_.due(e) || stage.min(b) > clock_.due(e))
                return check_failed("hwheel: minimum %llu / bucket %llu above a staged due "
                                    "time %llu",
                                    (unsigned long long)target_min,
                                    (unsigned long long)stage.min(b),
                                    (unsigned long long)clock_.due(e));
            t = next_of(t) == head ? nullptr : next_of(t);
        }
    }
    return nullptr;
}

/* One slot's part of the walker: bit, start, minimum, links, positions. */
const char *HWheel::check_slot(unsigned level, unsigned slot, size_t &seen) const noexcept {
    const Level &lv = levels_.at(level);
    const tl_timer *head = lv.head(slot);
    bool occupied = (levels_.occupied(level) >> slot) & 1;
    bool staged = level > 0 && levels_.is_target(level, slot) && levels_.stage_occupied(level);
    if (occupied != (head != nullptr || staged))
        return check_failed("hwheel: occupancy bit of slot %u/%u is %d, slot %s", level, slot,
                            occupied, head ? "non-empty" : "empty");
    if (!head) return nullptr;
    if (level == kLevels - 1 && slot >= (kSlots >> (kLevels * kSlotBits - 64)))
        return check_failed("hwheel: top-level slot %u beyond 64 bits", slot);
    uint64_t slot_start = start(level, slot);
    if (level == 0 ? slot_start < cur_ : slot_start <= cur_)
        return check_failed("hwheel: slot %u/%u starts at %llu, not after cur %llu", level, slot,
                            (unsigned long long)slot_start, (unsigned long long)cur_);
    uint64_t min = lv.min(slot);
    uint64_t last_tick = slot_start + (level_span(level) - 1);
    if (min < clock_.first_ns(slot_start) || min > clock_.time_of(last_tick))
        return check_failed("hwheel: slot %u/%u minimum %llu outside its ticks", level, slot,
                            (unsigned long long)min);
    const tl_timer *t = head;
    do {
        SlotPosition pos = SlotPosition::of(t);
        if (++seen > count_)
            return check_failed("hwheel: more timers linked than count %zu", count_);
        if (prev_of(next_of(t)) != t || next_of(prev_of(t)) != t)
            return check_failed("hwheel: broken links in slot %u/%u", level, slot);
        if (pos.slot() != slot_id(levels_.bank_of(level), slot))
            return check_failed("hwheel: timer in slot %u/%u records slot id %u", level, slot,
                                unsigned(pos.slot()));
        uint64_t e = clock_.fire_tick(t);
        if (!pos.lazy()) {
            unsigned want_level = level_of(cur_, e);
            unsigned want_slot = slot_in(want_level, e);
            if (e < cur_ || want_level != level || want_slot != slot)
                return check_failed("hwheel: timer with fire tick %llu in slot %u/%u, "
                                    "belongs in %u/%u (cur %llu)",
                                    (unsigned long long)e, level, slot, want_level, want_slot,
                                    (unsigned long long)cur_);
        } else if (level == 0 || e < slot_start || e - slot_start < level_span(level)) {
            return check_failed("hwheel: lazy mark on a timer with fire tick %llu in "
                                "slot %u/%u that needs none",
                                (unsigned long long)e, level, slot);
        }
        if (min > clock_.due(e))
            return check_failed("hwheel: slot %u/%u minimum %llu above due time %llu", level, slot,
                                (unsigned long long)min, (unsigned long long)clock_.due(e));
        t = next_of(t);
    } while (t != head);
    return nullptr;
}

const char *hwheel_check(void *self) {
    return backend_check<HWheel>(self);
}

} // namespace tl::detail
