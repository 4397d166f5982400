/* SPDX-License-Identifier: MIT */
/*
 * hwheel: a hierarchical timing wheel that covers the whole 64-bit range
 * (the layout of tokio's and Linux's timer wheels, plus a per-slot minimum
 * deadline).
 *
 * What it hands out and when is what both wheels keep (wheel_core.h, with
 * the vocabulary: tick, fire tick e, cur, slot, due list, lazy, order, leeway,
 * due); for overdue timers the tick in progress is cascaded first.
 *
 * Layout: kLevels levels of 64 slots, each slot a circular doubly-linked list
 * threaded through tl_timer::link, one 64-bit occupancy word per level and a
 * summary word with bit L set iff level L has an occupied slot. A timer with
 * fire tick e >= cur is filed at level L = the six-bit group of the highest bit
 * in which e and cur differ, slot s = the digit of e in that group. A level-0
 * slot is one tick; a level-L slot spans 64^L ticks and starts at
 * start(L, s) = (cur with the bits of levels <= L cleared) | s << 6L; each
 * Level (below, as tokio's level.rs) owns its slots, their minimums and its
 * occupancy word, and level_shift / level_span / slot_in name the kernel's
 * LVL_SHIFT / LVL_GRAN / LVL_MASK arithmetic. The due list holds timers
 * already found due by a cascade, and any inserted with e < cur.
 *
 * The levels' spans at the default tick, and which timeouts file where, are
 * tabled in hwheel_levels.h.
 *
 * Invariants (checked by hwheel_check()):
 * - Every occupied slot starts at or after cur (strictly after for L > 0), so
 *   the lowest occupied level's lowest occupied slot holds the earliest timers:
 *   next_expiry and pop_expired find it with two ctz, never scanning.
 * - A timer's position (SlotPosition) holds its slot id (L * 64 + s, or
 *   kDueSlot), so removal never recomputes it, and the lazy mark when it was
 *   rescheduled later in place: without it, (L, s) is exactly where e files
 *   relative to cur; with it, e >= start + 64^L, and the timer is re-filed
 *   when its slot comes due (as tokio and Kafka's purgatory do). A slot never holds a timer it
 * would fire early: e >= start(L, s).
 * - A slot's minimum (Level::min) is a lower bound of the due times (fire
 *   tick instants) in the slot and lies within the slot's ticks, so
 *   max(minimum, first ns of the slot) of the first slot bounds every due
 *   time inside: next_expiry. A cancel leaves it stale but low, which is
 *   safe; the pop it causes refreshes it. A restart that may have held it
 *   marks the slot stale: next_expiry walks (tidy) a stale first slot.
 * - Due-list timers have e <= cur, or a deadline that had passed when a
 *   cascade put them there; the list's minimum is a lower bound of their
 *   deadlines.
 * - count is the number of timers; the levels' bitmaps keep the invariants
 *   of Levels.
 * - Slots are FIFO lists. A slot of level L < top covers ticks of one slot of
 *   level L + 1, and is filed into directly only once cur has entered that
 *   slot, that is after it was cascaded; so a cascade appends into an empty
 *   slot, and timers not moved stay in start order at every level.
 * - The bank (hwheel.h, "Staging") holds timers only while in use; its
 *   block is one slot of level B + 1 (the source), each of its timers sits
 *   in the bank slot of its fire tick, never lazy; before the bind cur is
 *   in the source's level and before it, after it cur is inside the block
 *   and every bank slot starts after cur. Per slot, filed counts at least
 *   the timers in it.
 * - The front bank's block is one slot of level B' + 1 (B' the level it
 *   mirrors), its timers in the front slot of their fire tick, never lazy,
 *   every front slot starting after cur. Before its bind it holds timers
 *   only for the bank's block, as one of its level-B slots (B' = B - 1).
 *
 * Expiry: when the first slot's start is <= now's tick, cur moves to that
 * start. A level-0 slot's timers are returned, sorted by (deadline, start
 * sequence) first if it is marked unsorted (lazy ones never reach level 0, they
 * are re-filed by the cascade that empties their slot); a higher
 * slot is cascaded: its timers are re-filed relative to the new cur, which puts
 * each in a lower level. A timer thus moves at most kLevels - 1 times and fires
 * within the tick after its deadline at any level; a jump of now costs
 * O(occupied slots + timers moved), never O(ticks), since empty slots are
 * skipped through the bitmaps.
 *
 * Order: tick by tick; within a tick in filing order, or in (deadline, start
 * sequence) order when a timer of the tick was placed out of start order
 * (wheel_core.h, "order"), so equal deadlines fire in start order.
 *
 * Leeway (wheel_core.h): a timer's fire tick is on its grid, and it is due
 * at that tick's instant. A grid of 64^L ticks or more puts the fire tick at
 * the start of its level-L slot, so such a timer leaves from level L without
 * being cascaded, as the kernel's wheel fires a level's timers; a cascade
 * also hands out every timer on a grid whose deadline has passed (once now
 * reaches the slot's least due time), in any order within its window.
 * cascaded_ counts the timers a cascade re-files (tl_detail_hwheel_cascades).
 *
 * Staging, which bounds what one pop re-files, is in hwheel.h's top
 * comment.
 */
#include <cerrno>
#include <initializer_list>

#include "backend_glue.h"
#include "hwheel.h"

namespace tl::detail {

[[gnu::noinline]] void HWheel::cascade(unsigned level, unsigned slot, uint64_t slot_start,
                                       uint64_t now) noexcept {
    uint64_t early = levels_.at(level).min(slot) <= now ? now : 0;
    tl_timer *t = levels_.take(level, slot);
    cur_ = slot_start;
    while (t) {
        tl_timer *n = next_of(t);
        SlotPosition pos = SlotPosition::of(t);
        uint64_t f = clock_.fire_tick(t->deadline, pos);
        if (f == slot_start ? clock_.due(f) <= now : pos.grid_exponent() && t->deadline <= early) {
            due_.push(t);
        } else {
            place(t, f, pos.grid(), pos.order());
            ++cascaded_;
        }
        t = n;
    }
}

bool HWheel::first(Visit &v) const noexcept {
    uint64_t levels = levels_.summary() & ~(bit(kBank) | bit(kFront));
    bool found = levels != 0;
    if (found) {
        v.level = unsigned(__builtin_ctzll(levels));
        v.slot = levels_.first_slot(v.level);
        v.start = start(v.level, v.slot);
    }
    /* The front bank after the bank, so that it wins a tie with it. */
    for (unsigned tier : {kBank, kFront}) {
        if (uint64_t bank = levels_.occupied(tier)) {
            unsigned slot = unsigned(__builtin_ctzll(bank));
            uint64_t slot_start = bank_slot_start(tier, slot);
            if (!found || slot_start < v.start || (slot_start == v.start && !is_source(v))) {
                v = {tier, slot, slot_start};
                found = true;
            }
        }
    }
    return found;
}

bool HWheel::partner(const Visit &v, Visit &w) const noexcept {
    if (v.level >= kBank) {
        unsigned level = mirrored(v.level);
        uint64_t block = v.level == kBank ? bank_start_ : front_start_;
        if (cur_ < block || !levels_.occupied(level, v.slot)) return false;
        w = {level, v.slot, start(level, v.slot)};
        return w.start == v.start;
    }
    if (!is_source(v)) return false;
    /* The banks' earliest slot (the front bank's on a tie). */
    bool found = false;
    for (unsigned tier : {kBank, kFront}) {
        if (tier == kFront && !fronted_) break;
        if (uint64_t bank = levels_.occupied(tier)) {
            unsigned slot = unsigned(__builtin_ctzll(bank));
            uint64_t slot_start = bank_slot_start(tier, slot);
            if (!found || slot_start <= w.start) w = {tier, slot, slot_start};
            found = true;
        }
    }
    return found;
}

size_t HWheel::stage(size_t budget) noexcept {
    const unsigned level = bank_level_ + 1, slot = source_slot();
    size_t moved = 0;
    for (; moved < budget && levels_.occupied(level, slot); ++moved) {
        auto [t, pos, f] = take(level, slot, levels_.at(level).list(slot));
        if (f - bank_start_ >= level_span(level)) { /* lazy: beyond the slot */
            place(t, f, pos.grid(), pos.order().with_moved());
            continue;
        }
        /* Into the front bank if it took these ticks and their bank slot
           has been drained into it: behind the timers taken from there. */
        unsigned tier = kBank, into = slot_in(bank_level_, f);
        if (fronted_ && f - front_start_ < level_span(bank_level_) &&
            !levels_.occupied(kBank, into)) {
            tier = kFront;
            into = slot_in(front_level_, f);
        }
        place_in(tier, into, t, f, pos.order().with(pos.grid()));
        /* A timer starting the slot leaves from the bank as it would have
           from the slot: not counted, as a cascade does not count it. */
        if (f != bank_start_) ++cascaded_;
    }
    return moved;
}

size_t HWheel::stage_front(size_t budget) noexcept {
    if (!front_pending()) return 0;
    if (!fronted_) {
        fronted_ = true;
        front_level_ = bank_level_ - 1;
        front_start_ = bank_slot_start(kBank, unsigned(__builtin_ctzll(levels_.occupied(kBank))));
    }
    const unsigned slot = slot_in(bank_level_, front_start_);
    size_t moved = 0;
    for (; moved < budget && levels_.occupied(kBank, slot); ++moved) {
        auto [t, pos, f] = take(kBank, slot, levels_.at(kBank).list(slot));
        place_in(kFront, slot_in(front_level_, f), t, f, pos.order().with(pos.grid()));
        /* One of the slot's first tick is not counted: a cascade of the
           bank slot would hand it out, not re-file it. */
        if (f != front_start_) ++cascaded_;
    }
    return moved;
}

void HWheel::cascade_bank(const Visit &v, uint64_t now) noexcept {
    Visit w;
    bool paired = partner(v, w);
    cascade(v.level, v.slot, v.start, now);
    if (paired) cascade(w.level, w.slot, w.start, now);
}

size_t HWheel::unbank(unsigned tier, size_t budget) noexcept {
    const unsigned level = mirrored(tier);
    size_t moved = 0;
    for (; moved < budget && levels_.occupied(tier); ++moved) {
        unsigned slot = 63 - unsigned(__builtin_clzll(levels_.occupied(tier)));
        /* From its tail. */
        auto [t, pos, f] = take(tier, slot, prev_of(levels_.at(tier).head(slot)));
        /* Ahead of the level's own timers of these ticks, filed after the
           bind: start order holds. */
        levels_.push(level, slot, t, clock_.due(f), true);
        pos.order().with(pos.grid()).in_slot(slot_id(level, slot)).store(t);
        if (level == 0 && pos.moved()) levels_.mark_unsorted(slot);
        ++cascaded_;
    }
    return moved;
}

uint64_t HWheel::advance_bank() noexcept {
    const uint64_t nt = clock_.now_tick(log_.now());
    /* Released once empty; before the bind, only with its front bank. */
    if (banked_ && !levels_.occupied(kBank) && !source_occupied() &&
        !(fronted() && levels_.occupied(kFront)))
        banked_ = false;
    if (before_bind()) {
        size_t moved = stage(kStageBudget);
        if (source_occupied()) return more(bank_level_ + 1, source_slot());
        stage_front(kStageBudget - moved);
        /* A bank of level >= 1 stages a source of level >= kSpinLevel. */
        return front_pending() ? log_.now() : UINT64_MAX;
    }
    size_t budget = kStageBudget;
    /* A bank mirroring a level that is staged itself is emptied into it
       right after the bind, so that its slots can be staged in turn (the
       front bank's are handed out where they are, in tick order). */
    if (banked_ && bank_level_ >= kMinStageLevel) {
        budget -= unbank(kBank, budget);
        if (levels_.occupied(kBank)) return log_.now();
        banked_ = false;
    }
    /* The next source: the next slot of level kMinStageLevel or above to be
       cascaded, if its cascade would move more than a budget. */
    uint64_t upper = levels_.summary() & ~bit(kBank) & ~(bit(kMinStageLevel) - 1);
    if (!upper) return UINT64_MAX;
    unsigned level = unsigned(__builtin_ctzll(upper));
    unsigned slot = levels_.first_slot(level);
    if (levels_.filed(level, slot) <= kStageBudget) return UINT64_MAX;
    uint64_t slot_start = start(level, slot);
    uint64_t from = stage_from(level, slot_start);
    if (nt < from && !next_visit(level, slot)) return UINT64_MAX;
    /* A bank still bound to the last block (level-0 slots, handed out where
       they are) is emptied into level 0 first, and so is a front bank
       bound to an earlier block when this one needs it. */
    if (banked_) {
        budget -= unbank(kBank, budget);
        if (levels_.occupied(kBank)) return more(level, slot);
    }
    if (level >= 2 && levels_.occupied(kFront)) {
        budget -= unbank(kFront, budget);
        if (levels_.occupied(kFront)) return more(level, slot);
    }
    banked_ = true;
    bank_level_ = level - 1;
    bank_start_ = slot_start;
    fronted_ = false;
    budget -= stage(budget);
    if (source_occupied()) return more(level, slot);
    stage_front(budget);
    return front_pending() ? log_.now() : UINT64_MAX;
}

[[gnu::noinline]] void HWheel::tidy(unsigned level, unsigned slot) noexcept {
    tl_timer *t = levels_.take(level, slot);
    const uint64_t end = start(level, slot) + level_span(level);
    while (t) {
        tl_timer *n = next_of(t);
        SlotPosition pos = SlotPosition::of(t);
        uint64_t f = clock_.fire_tick(t->deadline, pos);
        if (f >= end) /* lazy: beyond the slot */
            place(t, f, pos.grid(), pos.order().with_moved());
        else
            place_in(level, slot, t, f, pos.order().with(pos.grid()));
        t = n;
    }
}

[[gnu::noinline]] void HWheel::collect_passed(unsigned slot, uint64_t slot_start,
                                              uint64_t now) noexcept {
    tl_timer *t = levels_.take(0, slot);
    cur_ = slot_start;
    while (t) {
        tl_timer *n = next_of(t);
        SlotPosition pos = SlotPosition::of(t);
        if (t->deadline <= now)
            due_.push(t);
        else /* back here: f == slot_start, never lazy */
            place(t, slot_start, pos.grid(), pos.order());
        t = n;
    }
}

const char *HWheel::check() const noexcept {
    size_t seen = 0;
    if (const char *broken = due_.check(clock_, cur_, log_.now(), seen, count_, "hwheel"))
        return broken;
    if (const char *broken = check_bank()) return broken;
    uint64_t levels = 0;
    for (unsigned level = 0; level < kTiers; ++level) {
        for (unsigned slot = 0; slot < kSlots; ++slot) {
            if (const char *broken = check_slot(level, slot, seen)) return broken;
            if (levels_.at(level).head(slot)) levels |= bit(level);
        }
    }
    for (unsigned level = 0; level < kTiers; ++level)
        if (levels_.stale_word(level) & ~levels_.occupied(level))
            return check_failed("hwheel: empty slots of level %u marked stale", level);
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

/* The banks' state: the bank in use whenever it holds a timer; each bank's
   block is a slot of the level above the one it mirrors; before the bind
   the bank's (the source) is where the block's timers file, after it cur is
   inside the block. Before its bind the front bank holds timers only as
   one of the bank's slots, taken by the bank's block. */
const char *HWheel::check_bank() const noexcept {
    if (levels_.occupied(kFront)) {
        const unsigned level = front_level_ + 1;
        if (level >= kLevels || (front_start_ & (level_span(level) - 1)))
            return check_failed("hwheel: front bank block at %llu, not a level-%u slot",
                                (unsigned long long)front_start_, level);
        if (cur_ < front_start_ && !(fronted() && level == bank_level_ &&
                                     front_start_ - bank_start_ < level_span(bank_level_ + 1)))
            return check_failed("hwheel: front bank block at %llu ahead of cur %llu, "
                                "not the bank's",
                                (unsigned long long)front_start_, (unsigned long long)cur_);
    }
    if (!banked_)
        return levels_.occupied(kBank) ? check_failed("hwheel: timers in an unused bank") : nullptr;
    const unsigned level = bank_level_ + 1;
    if (level < kMinStageLevel || level >= kLevels)
        return check_failed("hwheel: bank mirrors level %u", bank_level_);
    if (bank_start_ & (level_span(level) - 1))
        return check_failed("hwheel: bank block at %llu, not a level-%u slot",
                            (unsigned long long)bank_start_, level);
    if (before_bind() ? start(level, source_slot()) != bank_start_
                      : levels_.occupied(kBank) && cur_ - bank_start_ >= level_span(level))
        return check_failed("hwheel: bank block at %llu (level %u) out of reach of cur %llu",
                            (unsigned long long)bank_start_, level, (unsigned long long)cur_);
    return nullptr;
}

/* Where a timer of fire tick e and position pos may sit in (level, slot),
   of ticks slot_start to last_tick: a bank slot holds its fire tick, never
   lazy; a level's slot is where e files, or e lies beyond it, lazy. */
const char *HWheel::check_place(unsigned level, unsigned slot, uint64_t slot_start,
                                uint64_t last_tick, uint64_t e, SlotPosition pos) const noexcept {
    if (level >= kBank) {
        if (pos.lazy() || e < slot_start || e > last_tick)
            return check_failed("hwheel: banked timer with fire tick %llu in bank slot %u "
                                "(ticks %llu-%llu)%s",
                                (unsigned long long)e, slot, (unsigned long long)slot_start,
                                (unsigned long long)last_tick, pos.lazy() ? ", lazy" : "");
    } else if (!pos.lazy()) {
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
    return nullptr;
}

/* One slot's part of the walker: bit, start, minimum, links, positions. */
const char *HWheel::check_slot(unsigned level, unsigned slot, size_t &seen) const noexcept {
    const Level &lv = levels_.at(level);
    const tl_timer *head = lv.head(slot);
    bool occupied = (levels_.occupied(level) >> slot) & 1;
    if (occupied != (head != nullptr))
        return check_failed("hwheel: occupancy bit of slot %u/%u is %d, slot %s", level, slot,
                            occupied, head ? "non-empty" : "empty");
    if (!head)
        return levels_.filed(level, slot)
                   ? check_failed("hwheel: empty slot %u/%u with %u filed", level, slot,
                                  unsigned(levels_.filed(level, slot)))
                   : nullptr;
    if (level == kLevels - 1 && slot >= (kSlots >> (kLevels * kSlotBits - 64)))
        return check_failed("hwheel: top-level slot %u beyond 64 bits", slot);
    const bool bank = level >= kBank;
    const unsigned span_level = mirrored(level);
    uint64_t slot_start = bank ? bank_slot_start(level, slot) : start(level, slot);
    if (level == 0 ? slot_start < cur_ : slot_start <= cur_)
        return check_failed("hwheel: slot %u/%u starts at %llu, not after cur %llu", level, slot,
                            (unsigned long long)slot_start, (unsigned long long)cur_);
    uint64_t min = lv.min(slot);
    uint64_t last_tick = slot_start + (level_span(span_level) - 1);
    if (min < clock_.first_ns(slot_start) || min > clock_.time_of(last_tick))
        return check_failed("hwheel: slot %u/%u minimum %llu outside its ticks", level, slot,
                            (unsigned long long)min);
    const tl_timer *t = head;
    size_t in_slot = 0;
    do {
        SlotPosition pos = SlotPosition::of(t);
        ++in_slot;
        if (++seen > count_)
            return check_failed("hwheel: more timers linked than count %zu", count_);
        if (prev_of(next_of(t)) != t || next_of(prev_of(t)) != t)
            return check_failed("hwheel: broken links in slot %u/%u", level, slot);
        if (pos.slot() != slot_id(level, slot))
            return check_failed("hwheel: timer in slot %u/%u records slot id %u", level, slot,
                                unsigned(pos.slot()));
        uint64_t e = clock_.fire_tick(t);
        if (const char *broken = check_place(level, slot, slot_start, last_tick, e, pos))
            return broken;
        if (min > clock_.due(e))
            return check_failed("hwheel: slot %u/%u minimum %llu above due time %llu", level, slot,
                                (unsigned long long)min, (unsigned long long)clock_.due(e));
        t = next_of(t);
    } while (t != head);
    if (in_slot > levels_.filed(level, slot))
        return check_failed("hwheel: slot %u/%u holds %zu timers, %u filed", level, slot, in_slot,
                            unsigned(levels_.filed(level, slot)));
    return nullptr;
}

const tl_timer_backend hwheel_backend = make_backend<HWheel>("hwheel");

const char *hwheel_check(void *self) {
    return backend_check<HWheel>(self);
}

} // namespace tl::detail

uint64_t tl_detail_hwheel_cascades(void *self) {
    return tl::detail::BackendGlue<tl::detail::HWheel>::impl(self).cascaded();
}
