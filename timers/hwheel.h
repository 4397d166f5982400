/* SPDX-License-Identifier: MIT */
/*
 * hwheel's class, its tunables and its inline operations; hwheel.cc has
 * the design and the invariants in its top comment, and the out-of-line
 * parts (cascades, walks, staging, the walker) and the vtable. Included by
 * hwheel.cc alone.
 *
 * Staging: a cascade re-files its whole slot in one pop, and a level-2 slot
 * can hold every timer of 4 s (bench-cascade-burst: 102,652 re-filed in one
 * wake-up, 12.3 ms, on 1e6 delayed tasks), so the next slot of level >= 1 to
 * be cascaded (the source), once it has had more than kStageBudget timers
 * filed, is drained ahead of its start into the bank: 64 more lists, the
 * level-B slots (B = the source's level - 1) of the source's ticks, with
 * slot ids after the levels' (removal finds them the same way; a restart
 * moves a banked timer). next_expiry, which the loop calls before it
 * sleeps, moves up to kStageBudget timers from the source's head in order,
 * from an eighth of the source's span before its start, or at once when the
 * source is the loop's next visit (no other call would come before it);
 * while more is left it reports the last now (zero-timeout iterations of
 * the loop, no empty wake-ups) for a source of level >= 2 or the next
 * visit, and waits for the loop's own calls for a level-1 source with
 * timers due before it. The pops visit bank slots in tick order with the
 * levels' (a bank slot before a level slot of the same ticks, whose timers
 * were filed later; the source before the bank, and whole if it is still
 * occupied when due); the first pop inside the block binds the bank (cur
 * enters it). A bank of level >= 1 is then emptied into level B (from its
 * last slot's tail to the level slot's front: start order holds), a budget
 * per next_expiry, so that its slots are staged in turn; a level-0 bank is
 * emptied only when the next source needs the bank.
 *
 * The front bank: the pop that binds a bank of level B >= 1 would re-file
 * the bank's first occupied slot whole (bench-cascade-burst: 3,324 timers in
 * one wake-up, one level-1 slot of a level-2 source), so once the source is
 * staged, that bank slot is staged in turn, a budget per next_expiry, into
 * 64 more lists: the level-(B - 1) slots of its ticks (slot ids after the
 * bank's). Timers staged later for those ticks join it there once the bank
 * slot is drained (until then, behind the others in the bank slot). The
 * pops visit front slots as bank slots (a front slot first on a tie with
 * the bank's, whose timers came later); after the bind they are handed out
 * where they are, each with the level-(B - 1) slot of its ticks, so the
 * binding pop re-files one level-(B - 1) slot: for a level-2 source a
 * single tick, handed out whole, none re-filed. The front bank keeps its
 * own block, since the bank moves on to the next source while the front's
 * last slots wait; a new block of level >= 1 that finds it still occupied
 * empties it into its level first (it is bound by then), as the level-0
 * bank is emptied.
 *
 * So next_expiry moves at most one budget (unbanking and staging share it),
 * and a pop re-files a slot of at most a budget, or the front slot that
 * binds a bank (none for a level-2 source, 1/4096 of its ticks for one of
 * level 3 and above; a bank slot before it, of timers staged after the
 * front bank took its slot), or, after a jump of now, what the jump
 * passes.
 */
#ifndef TICKLOOP_TIMERS_HWHEEL_H
#define TICKLOOP_TIMERS_HWHEEL_H

#include "hwheel_levels.h"
#include "node.h"
#include "wheel_core.h"

namespace tl::detail {

/* Staging (above): the source is the next slot of level kMinStageLevel
 * or above to be cascaded, once more than kStageBudget timers were filed
 * into it; each next_expiry moves at most kStageBudget timers, unbanking
 * and staging together (about 0.1 ms at 1e6 timers, cold in the cache:
 * bench-cascade-burst), and asks for zero-timeout iterations until it is
 * done for a source of level kSpinLevel or above (a level-2 slot holds 4 s
 * of timers: 102,652 there). */
constexpr unsigned kMinStageLevel = 1;
constexpr unsigned kSpinLevel = 2;
constexpr size_t kStageBudget = 1024;

/* Node: next, prev and the position (node.h's SlotPosition). */
static_assert(3 * sizeof(uintptr_t) <= timer_link_bytes, "hwheel node fits in tl_timer.link");

/* The wheel: filing relative to cur, the lazy reschedule, cascades and pops. */
class HWheel {
    Levels levels_;
    StartLog log_;
    TickClock clock_;
    DueList due_;
    uint64_t cur_;
    size_t count_ = 0;
    uint64_t cascaded_ = 0; /* timers re-filed by cascades, for benchmarks */
    /* The bank ("Staging"): in use, the level its lists mirror, the first
       tick of its block (the source slot's start). */
    bool banked_ = false;
    unsigned bank_level_ = 1;
    uint64_t bank_start_ = 0;
    /* The front bank: whether the bank's block has a level-B slot staged
       into it; the level its lists mirror and the first tick of its block
       (meaningful while it holds timers or the bank's block uses it). */
    bool fronted_ = false;
    unsigned front_level_ = 0;
    uint64_t front_start_ = 0;

    /* A slot to visit: a level's, or a bank's (level kBank or kFront). */
    struct Visit {
        unsigned level, slot;
        uint64_t start;
    };

    uint64_t start(unsigned level, unsigned slot) const noexcept {
        unsigned shift = level_shift(level);
        uint64_t high = shift + kSlotBits >= 64 ? 0 : cur_ & (~uint64_t(0) << (shift + kSlotBits));
        return high | uint64_t(slot) << shift;
    }
    /* The level whose slots a tier's lists are: a level's own, or the one
       a bank mirrors. */
    unsigned mirrored(unsigned tier) const noexcept {
        return tier < kBank ? tier : tier == kBank ? bank_level_ : front_level_;
    }
    /* The first tick of a bank's slot (tier kBank or kFront). */
    uint64_t bank_slot_start(unsigned tier, unsigned slot) const noexcept {
        uint64_t block = tier == kBank ? bank_start_ : front_start_;
        return block + (uint64_t(slot) << level_shift(mirrored(tier)));
    }
    unsigned source_slot() const noexcept { return slot_in(bank_level_ + 1, bank_start_); }
    /* Before the bind: the source slot is still being staged. */
    bool before_bind() const noexcept { return banked_ && cur_ < bank_start_; }
    /* Before the bind, with one of the block's level-B slots taken by the
       front bank. */
    bool fronted() const noexcept { return fronted_ && before_bind(); }
    /* Whether the front bank has staging to do for the bank's block (of
       level >= 1): take the bank's first occupied slot (the front bank is
       empty then), or drain what is left in the slot it took. */
    bool front_pending() const noexcept {
        if (bank_level_ == 0 || !levels_.occupied(kBank)) return false;
        return fronted_ ? levels_.occupied(kBank, slot_in(bank_level_, front_start_))
                        : !levels_.occupied(kFront);
    }
    bool is_source(const Visit &v) const noexcept {
        return before_bind() && v.level == bank_level_ + 1 && v.slot == source_slot();
    }
    bool source_occupied() const noexcept {
        return before_bind() && levels_.occupied(bank_level_ + 1, source_slot());
    }
    /* How far ahead of its start a slot of level L may be staged: an eighth
       of its span (512 ms for level 2 at 1 ms ticks), long after the I/O
       timeouts of seconds that file there were started, so that few of
       them are staged and then stopped; the first tick of that stretch. */
    static uint64_t stage_from(unsigned level, uint64_t slot_start) noexcept {
        uint64_t ahead = level_span(level) / 8;
        return slot_start > ahead ? slot_start - ahead : 0;
    }
    /* Whether (level, slot) is the loop's next visit: nothing else makes
       the loop call before that slot's pop, so its staging starts now. */
    bool next_visit(unsigned level, unsigned slot) const noexcept {
        Visit v;
        return !due_.head && first(v) && v.level == level && v.slot == slot;
    }
    /* When staging the source (level, slot) has more to do: now (the loop
       runs zero-timeout iterations, which are no empty wake-ups) for a
       slot of level kSpinLevel or above, whose cascade could delay the
       timers due with it by milliseconds, or for the loop's next visit;
       otherwise a level-1 slot is staged by the calls the loop makes anyway
       (its timers fire every tick or so in the workloads that fill it). */
    uint64_t more(unsigned level, unsigned slot) const noexcept {
        return level >= kSpinLevel || next_visit(level, slot) ? log_.now() : UINT64_MAX;
    }

    /* Pre: t in no list, e = t's fire tick on grid. Post: t appended
       relative to cur with order (on the due list if e < cur), bitmaps and
       minimum updated. Does not touch count. */
    void place(tl_timer *t, uint64_t e, SlotPosition grid, SlotPosition order) noexcept {
        if (e < cur_) {
            /* Behind the timers already found due: sorted among them. */
            order.with_moved().store(t);
            due_.push(t);
            return;
        }
        unsigned level = level_of(cur_, e);
        unsigned slot = slot_in(level, e);
        place_in(level, slot, t, e, order.with(grid));
        if (level == 0 && order.moved()) levels_.mark_unsorted(slot);
    }

    /* t, of fire tick e, appended to (level, slot) with position word pos. */
    void place_in(unsigned level, unsigned slot, tl_timer *t, uint64_t e,
                  SlotPosition pos) noexcept {
        levels_.push(level, slot, t, clock_.due(e));
        pos.in_slot(slot_id(level, slot)).store(t);
    }

    /* A timer unlinked from a slot (staging's steps), with its position
       word and fire tick. */
    struct Taken {
        tl_timer *t;
        SlotPosition pos;
        uint64_t f;
    };
    /* Pre: t in (level, slot). Post: t in no list. */
    Taken take(unsigned level, unsigned slot, tl_timer *t) noexcept {
        levels_.unlink(level, slot, t);
        SlotPosition pos = SlotPosition::of(t);
        return {t, pos, clock_.fire_tick(t->deadline, pos)};
    }

    /* Pre: t inside. Post: t in no list; bits cleared if its slot emptied.
       Does not touch count. */
    void unfile(tl_timer *t) noexcept {
        SlotPosition pos = SlotPosition::of(t);
        if (pos.on_due_list()) {
            due_.unlink(t);
            return;
        }
        unsigned id = unsigned(pos.slot());
        levels_.unlink(id / kSlots, id % kSlots, t);
    }

    /* Pre: (level, slot) is the first occupied slot, level > 0, it starts at
       or before now's tick + 1, the due list is empty. Post: cur = its
       start; on the due list, its timers whose fire tick is that start and
       that are due by now, and those on a grid whose deadline has passed
       (inside their window: the slot is emptied no later than its least due
       time, and only once now reaches that, so that nothing comes out
       before next_expiry); the others re-filed, each at a lower level (or
       where a lazy deadline now says), in slot order, each keeping its start
       sequence and moved mark (a grid timer starting its slot, or past its
       deadline, is never cascaded). */
    void cascade(unsigned level, unsigned slot, uint64_t slot_start, uint64_t now) noexcept;

    /* Pre: (level, slot) occupied, level > 0. Post: its lazy timers re-filed
       (relative to cur), the others back in order, exact minimum, no mark. */
    void tidy(unsigned level, unsigned slot) noexcept;

    /* Pre: level-0 slot is the first occupied, its tick slot_start is now's
       tick + 1, a timer was filed overdue. Post: cur = slot_start; its timers
       due by now on the due list, the rest back in the slot, in order. */
    void collect_passed(unsigned slot, uint64_t slot_start, uint64_t now) noexcept;

    /* The earliest slot to visit, levels and banks together (on a tie the
       source first, then the front bank's slot, then the bank's, then the
       level's: the order in which their timers were filed); false if none
       is occupied. */
    bool first(Visit &v) const noexcept;
    /* The slot visited together with v, if any: the banks' earliest slot for
       the source, the mirrored level's slot of the same ticks for a bank's
       slot once its block is bound. */
    bool partner(const Visit &v, Visit &w) const noexcept;
    uint64_t bound(const Visit &v) const noexcept {
        uint64_t lower = clock_.first_ns(v.start);
        uint64_t min = levels_.at(v.level).min(v.slot);
        return min > lower ? min : lower;
    }
    bool holds_overdue(const Visit &v) const noexcept {
        return slot_holds_overdue(clock_, levels_.at(v.level).head(v.slot), v.start, log_.now());
    }

    /* Pre: before the bind. Post: up to budget timers moved from the head
       of the source slot into the banks, in order (lazy ones re-filed
       relative to cur, moved). Returns how many were moved. */
    size_t stage(size_t budget) noexcept;
    /* Pre: before the bind, the source empty. Post: if the bank is of level
       >= 1, its first occupied slot taken by the front bank (unless one
       was), and up to budget timers moved from that bank slot's head into
       the front bank's slots of their fire ticks, in order. Returns how
       many were moved. */
    size_t stage_front(size_t budget) noexcept;
    /* Pre: a bank's slot v visited (v.start <= now's tick + 1). Post: it and
       its partner cascaded as one slot, the bank's timers first. */
    void cascade_bank(const Visit &v, uint64_t now) noexcept;
    /* Pre: cur inside the block of bank tier (after its bind). Post: up to
       budget timers moved from the tails of its last slots to the fronts of
       the mirrored level's slots of the same ticks. Returns how many were
       moved. */
    size_t unbank(unsigned tier, size_t budget) noexcept;
    /* next_expiry's bounded share of the staging: starts a stage within its
       stretch, moves up to kStageBudget timers in all (unbanking and
       staging). Returns the instant from which the next call has more to do
       (UINT64_MAX: nothing). */
    uint64_t advance_bank() noexcept;

    /* The due list's next timer, removed; NULL if it is empty. */
    tl_timer *pop_due() noexcept {
        if (!due_.head) return nullptr;
        --count_;
        return due_.pop();
    }

public:
    const TickClock &clock() const noexcept { return clock_; }
    /* Pre: t in no list, e = its fire tick on grid. Post: t started (a new
       start sequence) and placed there; noted if overdue. */
    void file(tl_timer *t, uint64_t e, SlotPosition grid) noexcept {
        log_.filed_at(t->deadline);
        place(t, e, grid, log_.started());
    }

    /* Tick order only: a timer fires within the tick after its deadline. */
    static constexpr uint32_t kCaps = 0;

    static bool accepts(const tl_timer_config &cfg) noexcept { return cfg.tick_ns != 0; }

    HWheel(const tl_timer_config &cfg, uint64_t now) noexcept : log_(now), clock_(cfg.tick_ns) {
        uint64_t r;
        cur_ = clock_.floor(now, r);
    }
    /* Everything is inside the object. */
    bool allocate() noexcept { return true; }

    /* Pre: t not inside, t->deadline set (any value, even before now). Post:
       t inside, filed at the level and slot of its fire tick (on the due
       list if that tick has passed). O(1); never fails, never allocates. */
    int insert(tl_timer *t) noexcept {
        file_new(*this, t);
        ++count_;
        return 0;
    }

    /* timer_backend.h's reserve: an insert never fails, so there is room. */
    int reserve_more(const tl_timer *, size_t) noexcept { return 0; }

    /* Pre: t inside. Post: t not inside. O(1): the slot id is in t. */
    void remove(tl_timer *t) noexcept {
        unfile(t);
        --count_;
    }

    /* Pre: t inside. Post: t->deadline == deadline, t inside and due at the
       new fire tick (on the grid of its leeway now), with a new start
       sequence. Same slot: the deadline is rewritten in place. A later fire
       tick beyond a level > 0 slot leaves the timer there, marked lazy, to
       be re-filed when the slot comes due: heartbeats cost O(1) and touch no
       list. Both mark it moved. Earlier: moved now (an unlink and an append,
       also O(1)). */
    [[gnu::always_inline]] void reschedule(tl_timer *t, uint64_t deadline) noexcept {
        reschedule_on_grid_of_leeway(*this, t, deadline);
    }

    /* e: the fire tick of deadline on grid (the old grid does not matter:
       the in-place paths compare e with the slot's start). */
    [[gnu::always_inline]] void reschedule_to(tl_timer *t, uint64_t deadline, uint64_t e,
                                              SlotPosition grid) noexcept {
        SlotPosition pos = SlotPosition::of(t);
        /* An overdue timer is moved: its slot, due now, would otherwise be
           emptied for nothing (a spurious zero timeout); so is one on the
           due list or in a bank (slot ids from the bank's up). */
        if (pos.slot() < slot_id(kBank, 0) && e >= cur_ && t->deadline > log_.now()) {
            unsigned id = unsigned(pos.slot());
            unsigned level = id / kSlots, slot = id % kSlots;
            if (level == 0) {
                if (e == start(0, slot)) {
                    t->deadline = deadline;
                    log_.started().with_moved().in_slot(id).with(grid).store(t);
                    levels_.mark_unsorted(slot);
                    log_.filed_at(deadline);
                    return; /* the slot's minimum is this tick's instant */
                }
            } else if (uint64_t slot_start = start(level, slot); e >= slot_start) {
                /* It may have held the minimum: next_expiry walks the slot. */
                if (t->deadline <= levels_.at(level).min(slot)) levels_.mark_stale(level, slot);
                t->deadline = deadline;
                log_.filed_at(deadline);
                levels_.at(level).lower_min(slot, clock_.due(e));
                log_.started()
                    .with_moved()
                    .in_slot(id)
                    .with(grid)
                    .with_lazy(e - slot_start >= level_span(level))
                    .store(t);
                return;
            }
        }
        move(t, deadline, e, grid);
    }

    /* reschedule's slow path, out of line so that the in-place paths above
       need no saved registers. */
    [[gnu::noinline]] void move(tl_timer *t, uint64_t deadline, uint64_t e,
                                SlotPosition grid) noexcept {
        unfile(t);
        t->deadline = deadline;
        file(t, e, grid);
    }

    /* A lower bound of every due time inside (a fire tick's instant; exact
       unless a cancel left a slot's minimum low; a restart's is walked):
       no timer fires before it. Also does a bounded share of the staging
       (advance_bank), and reports the instant it has more to do: the loop
       calls this before it sleeps, when no timer is waiting on the work. */
    uint64_t next_expiry() noexcept {
        uint64_t next = advance_bank();
        bool overdue = false;
        Visit v, w;
        /* A stale first slot is walked first: no wake-up at a deadline a
           restart left. */
        while (first(v)) {
            if (v.level >= kBank || !levels_.stale(v.level, v.slot)) break;
            tidy(v.level, v.slot);
        }
        if (levels_.any()) {
            bool paired = partner(v, w);
            uint64_t bound_v = bound(v);
            if (bound_v < next) next = bound_v;
            if (paired && bound(w) < next) next = bound(w);
            if (log_.overdue() < next) {
                overdue = holds_overdue(v) || (paired && holds_overdue(w));
                /* Dropped, or a later pop would act on it for timers that
                   were never noted, before the time said here. */
                if (!overdue) log_.drop_overdue();
            }
        }
        /* Due-list timers taken early by a cascade may sit before slots with
           earlier deadlines: the lesser of the two. */
        if (due_.head && due_.min < next) next = due_.min;
        /* An overdue timer's deadline, if the next pop hands one out: the
           note outlives a timer restarted or stopped since, and a past time
           with nothing due would make the loop run an empty iteration. */
        if (overdue && log_.overdue() < next) next = log_.overdue();
        return next;
    }

    /* Pre: now >= every earlier now. Post: returns a timer with fire tick <=
       now's tick, or of the next tick with its deadline <= now when a timer
       was filed overdue since the last pop, removed, in tick order; NULL
       once none is left, with cur at now's tick (its successor after a visit
       for overdue timers) and every slot that started by then cascaded. */
    tl_timer *pop_expired(uint64_t now) noexcept {
        uint64_t nt = clock_.now_tick(now);
        log_.popping(now);
        for (;;) {
            if (tl_timer *t = pop_due()) return t;
            Visit v;
            if (!first(v)) break;
            if (v.start > nt) {
                /* The tick in progress, for overdue timers only. */
                if (log_.overdue() == UINT64_MAX || v.start - nt > 1) break;
                if (v.level == 0) {
                    log_.clear_overdue();
                    collect_passed(v.slot, v.start, now);
                    continue;
                }
            } else if (v.level == 0) {
                /* Level 0 holds exact timers only (lazy ones exist above
                   it): the whole slot is due. */
                cur_ = v.start;
                levels_.sort_level0(v.slot);
                tl_timer *t = levels_.at(0).list(v.slot);
                unfile(t);
                --count_;
                return t;
            }
            if (v.level >= kBank)
                cascade_bank(v, now);
            else if (is_source(v))
                stage(SIZE_MAX); /* due before it was staged: all of it now */
            else
                cascade(v.level, v.slot, v.start, now);
        }
        log_.clear_overdue();
        if (nt > cur_) cur_ = nt;
        return nullptr;
    }

    size_t count() const noexcept { return count_; }
    uint64_t cascaded() const noexcept { return cascaded_; }

    /* The walker: every invariant above; NULL or the first broken one. */
    const char *check() const noexcept;

private:
    const char *check_slot(unsigned level, unsigned slot, size_t &seen) const noexcept;
    const char *check_bank() const noexcept;
    const char *check_place(unsigned level, unsigned slot, uint64_t slot_start, uint64_t last_tick,
                            uint64_t e, SlotPosition pos) const noexcept;
};

} // namespace tl::detail

#endif /* TICKLOOP_TIMERS_HWHEEL_H */
