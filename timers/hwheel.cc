/* SPDX-License-Identifier: MIT */
/*
 * hwheel: the cascades (with the bind of a staged target), the staging
 * that works them off ahead of time, and the backend table. The layout and
 * invariants are at the top of hwheel.h.
 */
#include "hwheel.h"

namespace tl::detail {

[[gnu::noinline]] void HWheel::cascade(unsigned level, unsigned slot, uint64_t slot_start,
                                       uint64_t now) noexcept {
    uint64_t early = levels_.at(level).min(slot) <= now ? now : 0;
    /* A target's stage becomes the level below; its bucket 0 (ticks below
       that level's first slot), then the timers never staged (filed after
       the staged ones, so order holds), are re-filed. */
    tl_timer *bucket0 = levels_.is_target(level, slot) ? levels_.bind(level) : nullptr;
    tl_timer *rest = levels_.take(level, slot);
    cur_ = slot_start;
    refile(bucket0, slot_start, now, early);
    refile(rest, slot_start, now, early);
}

void HWheel::refile(tl_timer *t, uint64_t slot_start, uint64_t now, uint64_t early) noexcept {
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

void HWheel::stage_ahead() noexcept {
    for (uint64_t above = levels_.summary() & ~uint64_t(1); above; above &= above - 1) {
        unsigned level = unsigned(__builtin_ctzll(above));
        if (!levels_.stage_occupied(level)) levels_.aim(level, levels_.first_slot(level));
        const StageTarget &tg = levels_.target(level);
        if (tg.stuck) continue;
        tl_timer *&list = levels_.at(level).list(tg.slot);
        for (unsigned n = 0; n < kStageBudget && list; ++n) {
            tl_timer *t = list;
            SlotPosition pos = SlotPosition::of(t);
            if (pos.lazy() || pos.grid_exponent()) {
                levels_.mark_stuck(level);
                break;
            }
            levels_.unlink(pos.slot(), t);
            uint64_t e = clock_.fire_tick(t);
            uintptr_t id =
                levels_.stage_push(level, slot_in(level - 1, e), t, clock_.due(e), pos.moved());
            pos.order().in_slot(id).store(t);
            ++cascaded_;
        }
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

const tl_timer_backend hwheel_backend = make_backend<HWheel>("hwheel");

} // namespace tl::detail

uint64_t tl_detail_hwheel_cascades(void *self) {
    return tl::detail::BackendGlue<tl::detail::HWheel>::impl(self).cascaded();
}
