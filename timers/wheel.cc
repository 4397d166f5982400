/* SPDX-License-Identifier: MIT */
/*
 * wheel: a single-level hashed timing wheel (the idea of Netty's
 * HashedWheelTimer), driven only by the now values it is given.
 *
 * What it hands out and when is what both wheels keep (wheel_core.h, with
 * the vocabulary: tick, fire tick e, cur, slot, due list, lazy, order, leeway,
 * due). No timer in a slot has a fire tick before cur.
 *
 * Layout: N = wheel_slots slots (a power of two), each a circular doubly-linked
 * list threaded through tl_timer::link. A timer with fire tick e lives in slot
 * e mod N whatever its round, so a timer due beyond one revolution simply stays
 * there: deadlines are absolute, there are no round counters to decrement.
 * A slot's minimum is a lower bound of the due times (fire tick instants) in
 * it, so a visit walks a slot only when something in it may be due; the
 * slots and their bitmaps are WheelSlots, the window of due slots
 * WheelWindow (wheel_slots.h), each a member with its own interface. The due
 * list holds the timers found due and not yet returned, and any inserted
 * with e < cur.
 *
 * Invariants (checked by wheel_check()):
 * - A timer's position (SlotPosition) holds its slot (kDueSlot on the due
 *   list), so removal finds it without dividing, and its start sequence. A
 *   slot is a FIFO list: the timers in it that are not moved are in start
 *   order.
 * - A timer in slot s has e mod N == s and e >= cur, unless it is marked lazy:
 *   rescheduled later to another slot's tick and left in place (a heartbeat
 *   then touches only the timer). A lazy timer's slot is walked no later than
 *   its tick (the slot's minimum is at most its old deadline), and the walk
 *   re-files it. A slot's minimum is <= every deadline in it (it may be
 *   stale but low after a cancel or a lazy reschedule, which costs at most
 *   one extra walk). Due-list timers have e <= cur; the list's minimum is a
 *   lower bound of their deadlines.
 * - count is the number of timers in the slots and the due list; the
 *   bitmaps and the window keep the invariants of WheelSlots and WheelWindow.
 *
 * Cost: insert, remove and reschedule are O(1) and never allocate. The known
 * cost of one level is a slot whose timers are all in later rounds: a scan of
 * occupied slots stops there for nothing (an empty round per such slot and
 * revolution). Instead, when a window is used up, the wheel rebuilds it in
 * O(occupied slots) through the occupancy bitmap: it starts at the first tick
 * at which anything may be due, and marks the slots due within it. The next
 * due slot is then one ctz scan of at most N / 64 + 1 words, next_expiry is
 * the earliest due tick (no empty rounds unless a cancel left a bound stale),
 * and a jump of now skips empty revolutions at one rebuild each. What remains
 * is the hashed wheel's own cost: a visit walks the later-round timers of its
 * slot, and timers sparser than one per revolution cost a rebuild each
 * (12 us per timer with N = 4096 and 100k timers over 30 days, against 0.5 us
 * over one hour). That is what hwheel is for.
 *
 * Order: tick by tick; within a tick in filing order, or in (deadline, start
 * sequence) order when the tick's batch holds a timer placed out of start
 * order (wheel_core.h, "order"), so equal deadlines fire in start order.
 *
 * Leeway (wheel_core.h): a timer's fire tick is on its grid and its slot is
 * that tick's; it is due at the tick's instant. A timer on a grid that is
 * rescheduled to a later deadline may get an earlier fire tick (a finer
 * grid), so it is left lazy only when its new fire tick is no earlier.
 */
#include <cerrno>
#include <cstdlib>

#include "backend_glue.h"
#include "node.h"
#include "wheel_core.h"
#include "wheel_slots.h"

namespace tl::detail {
namespace {

/* wheel_slots must be a power of two (slot = e & mask) in [1, 2^20]. The loop
 * passes 4096 (4.096 s of 1 ms ticks per revolution: most I/O timeouts then
 * never wait a round). Beyond 2^20 the slot arrays (16 bytes a slot) stop
 * fitting any cache and an empty scan reads 16K words; use hwheel instead. */
constexpr uint64_t kMaxSlots = uint64_t(1) << 20;

/* Node: next, prev and the position (node.h's SlotPosition: slot or
   kDueSlot, grid, lazy and moved marks, start sequence). */
static_assert(3 * sizeof(uintptr_t) <= timer_link_bytes, "wheel node fits in tl_timer.link");
static_assert(kMaxSlots < SlotPosition::kDueSlot, "slot numbers stay below kDueSlot");

/* The wheel: filing, the lazy reschedule and the pops, over its slots and
   window. */
class Wheel {
    WheelSlots slots_;
    WheelWindow window_;
    StartLog log_;
    TickClock clock_;
    DueList due_;
    uint64_t cur_;
    uint64_t max_tick_; /* ceil(UINT64_MAX / tick): the last fire tick */
    size_t count_ = 0;

    /* Pre: t in no list, e = its fire tick on grid. Post: t appended to slot
       e mod N with order (marked active if e is in the window), or on the
       due list if e < cur. Does not touch count. */
    void place(tl_timer *t, uint64_t e, SlotPosition grid, SlotPosition order) noexcept {
        if (e < cur_) {
            /* Behind the timers already found due: sorted among them. */
            order.with_moved().store(t);
            due_.push(t);
            return;
        }
        size_t s = slots_.slot_of(e);
        slots_.push(s, t, clock_.due(e));
        order.with(grid).in_slot(s).store(t);
        window_.filed(slots_, s, e);
    }

    /* Pre: t inside. Post: t in no list; its slot's bits cleared if it emptied.
       Does not touch count. */
    void unfile(tl_timer *t) noexcept {
        SlotPosition pos = SlotPosition::of(t);
        if (pos.on_due_list()) {
            due_.unlink(t);
            return;
        }
        slots_.unlink(size_t(pos.slot()), t);
    }

    /* Pre: the due list is empty, slot s is visited at tick T, limit <=
       clock_.time_of(T). Post: its timers due by limit, and those of tick T
       whose deadline is <= passed (when one was overdue), are on the due
       list in slot order, its lazy ones re-filed where their fire tick says,
       the rest still in slot order, the slot's minimum is exact, and s is
       active only if a timer of tick T is left. */
    void collect(size_t s, uint64_t T, uint64_t limit, uint64_t passed) noexcept;

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

    static bool accepts(const tl_timer_config &cfg) noexcept {
        uint64_t slots = cfg.wheel_slots;
        return cfg.tick_ns != 0 && slots != 0 && (slots & (slots - 1)) == 0 && slots <= kMaxSlots;
    }

    Wheel(const tl_timer_config &cfg, uint64_t now) noexcept
        : slots_(cfg.wheel_slots), log_(now), clock_(cfg.tick_ns), cur_(now / cfg.tick_ns),
          max_tick_(UINT64_MAX / cfg.tick_ns + (UINT64_MAX % cfg.tick_ns != 0)) {}

    /* The only allocation: the slot arrays and bitmaps, once. */
    bool allocate() noexcept { return slots_.allocate(); }

    /* Pre: t not inside, t->deadline set (any value, even before now). Post:
       t inside, in the slot of its fire tick (the due list if that tick has
       passed). O(1), never fails, never allocates. */
    int insert(tl_timer *t) noexcept {
        file_new(*this, t);
        ++count_;
        return 0;
    }

    /* timer_backend.h's reserve: an insert never fails, so there is room. */
    int reserve_more(const tl_timer *, size_t) noexcept { return 0; }

    /* Pre: t inside. Post: t not inside. O(1). */
    void remove(tl_timer *t) noexcept {
        unfile(t);
        --count_;
    }

    /* Pre: t inside. Post: t->deadline == deadline, t inside and due at its
       new fire tick (on the grid of its leeway now), with a new start
       sequence. Staying in the same slot rewrites the deadline in place. A
       later deadline elsewhere also stays (marked lazy): its slot is walked
       by the old deadline, and the walk re-files it (the heartbeat case
       costs O(1) and touches no list). Both mark it moved. An earlier one is
       moved at once: an unlink and an append, also O(1). */
    [[gnu::always_inline]] void reschedule(tl_timer *t, uint64_t deadline) noexcept {
        reschedule_on_grid_of_leeway(*this, t, deadline);
    }

    /* e: the fire tick of deadline on grid; the old grid may differ. */
    [[gnu::always_inline]] void reschedule_to(tl_timer *t, uint64_t deadline, uint64_t e,
                                              SlotPosition grid) noexcept {
        SlotPosition pos = SlotPosition::of(t);
        /* An overdue timer is moved: its slot, due now, would otherwise be
           walked for nothing (a spurious zero timeout). */
        if (!pos.on_due_list() && e >= cur_ && t->deadline > log_.now()) {
            /* The slot, or above every slot for a timer on a grid. */
            uintptr_t s = pos.slot_unless_grid();
            if (slots_.slot_of(e) != s) {
                /* Left in place only if its slot is walked by e: the old
                   fire tick is no later (on a grid, see lazy_from_grid). */
                if (SlotPosition::above_slots(s)) [[unlikely]] {
                    lazy_from_grid(t, deadline, e, grid);
                    return;
                }
                if (deadline < t->deadline) {
                    move(t, deadline, e, grid);
                    return;
                }
                left_later(s, t);
                t->deadline = deadline;
                log_.started().with_moved().in_slot(s).with_lazy().with(grid).store(t);
                return;
            }
            log_.started().with_moved().in_slot(s).with(grid).store(t);
            if (deadline > t->deadline) left_later(s, t);
            t->deadline = deadline;
            log_.filed_at(deadline);
            slots_.lower_min(s, clock_.due(e));
            window_.filed(slots_, s, e);
            return;
        }
        move(t, deadline, e, grid);
    }

    /* reschedule of a timer on a grid (in a slot) to fire tick e: left in
       place (lazy) only in another slot and if e is no earlier than its fire
       tick now (a later deadline may have an earlier fire tick on a finer
       grid); else moved, even within its slot (rare: leeway changed). */
    [[gnu::noinline]] void lazy_from_grid(tl_timer *t, uint64_t deadline, uint64_t e,
                                          SlotPosition grid) noexcept {
        uintptr_t s = SlotPosition::of(t).slot();
        if (deadline < t->deadline || e < clock_.fire_tick(t) || slots_.slot_of(e) == s) {
            move(t, deadline, e, grid);
            return;
        }
        left_later(s, t);
        t->deadline = deadline;
        log_.started().with_moved().in_slot(s).with_lazy().with(grid).store(t);
    }

    /* t, in slot s, is left there with a later deadline: if it may have
       held the slot's minimum (its deadline is not above it), the slot is
       marked stale, for next_expiry to walk before the loop waits on it. */
    void left_later(size_t s, const tl_timer *t) noexcept {
        if (t->deadline <= slots_.min(s)) slots_.mark_stale(s);
    }

    /* reschedule's slow path, out of line so that the in-place paths above
       need no saved registers. */
    [[gnu::noinline]] void move(tl_timer *t, uint64_t deadline, uint64_t e,
                                SlotPosition grid) noexcept {
        unfile(t);
        t->deadline = deadline;
        file(t, e, grid);
    }

    /* A lower bound of every due time inside (a fire tick's instant), exact
       unless a cancel or a lazy reschedule left a minimum stale: the due
       list's minimum deadline (already due); else the lesser of the least
       deadline of a timer filed overdue (already due) and the minimum of the
       first slot due in the window (or the horizon). */
    uint64_t next_expiry() noexcept {
        if (due_.head) return due_.min;
        if (count_ == 0) return UINT64_MAX;
        uint64_t visit;
        size_t s = window_.find_due(slots_, clock_, cur_, visit);
        /* A stale first slot is walked first (its lazy timers re-filed, its
           minimum made exact), so that the loop never wakes at a deadline a
           restart left. Each walk clears a mark a restart set. */
        while (s != WheelSlots::kNone && slots_.stale(s)) {
            collect(s, visit, 0, 0);
            if (due_.head) return due_.min;
            if (count_ == 0) return UINT64_MAX;
            s = window_.find_due(slots_, clock_, cur_, visit);
        }
        if (s == WheelSlots::kNone) return 0;
        uint64_t lower = clock_.first_ns(visit);
        uint64_t next = slots_.min(s) > lower ? slots_.min(s) : lower;
        /* An overdue timer's deadline, when earlier (it is due already), if
           the next pop hands one out: the note outlives a timer restarted
           or stopped since, and a past time with nothing due would make
           the loop run an empty iteration. */
        uint64_t overdue = log_.overdue();
        if (overdue >= next || holds_overdue(s, visit)) return overdue < next ? overdue : next;
        log_.clear_overdue();
        return next;
    }

    /* Whether pop_expired(now) would hand out a timer filed overdue, slot s
       being the first due, at tick visit: its tick has passed (it is due
       anyway), or it is the tick in progress and holds a timer of that tick
       whose deadline has passed (as the pop's collect takes them). */
    bool holds_overdue(size_t s, uint64_t visit) const noexcept {
        return slot_holds_overdue(clock_, slots_.head(s), visit, log_.now());
    }

    /* Pre: now >= every earlier now. Post: returns a timer with fire tick <=
       now's tick, or of the next tick with its deadline <= now when a timer
       was filed overdue since the last pop, removed, in tick order; NULL once
       none is left, with cur at least now's tick. */
    tl_timer *pop_expired(uint64_t now) noexcept {
        uint64_t nt = clock_.now_tick(now);
        log_.popping(now);
        for (;;) {
            if (tl_timer *t = pop_due()) return t;
            if (count_ == 0) break;
            uint64_t visit;
            size_t s = window_.find_due(slots_, clock_, cur_, visit);
            if (s == WheelSlots::kNone) break;
            if (visit > nt) {
                /* The tick in progress, for overdue timers only. */
                if (log_.overdue() == UINT64_MAX || visit - nt > 1) break;
                log_.clear_overdue();
                collect(s, visit, 0, now);
                cur_ = visit;
                continue;
            }
            collect(s, visit, clock_.time_of(visit), 0);
            /* At the last representable tick cur stays: nothing is later. */
            cur_ = visit < max_tick_ ? visit + 1 : visit;
        }
        log_.clear_overdue();
        if (nt > cur_) cur_ = nt;
        return nullptr;
    }

    size_t count() const noexcept { return count_; }

    /* The walker: every invariant above; NULL or the first broken one. */
    const char *check() const noexcept;

private:
    const char *check_slot(size_t s, size_t &seen) const noexcept;
};

inline void Wheel::collect(size_t s, uint64_t T, uint64_t limit, uint64_t passed) noexcept {
    tl_timer *t = slots_.take(s);
    uint64_t min = UINT64_MAX;
    while (t) {
        tl_timer *n = next_of(t);
        SlotPosition pos = SlotPosition::of(t);
        uint64_t f = clock_.fire_tick(t->deadline, pos);
        uint64_t due = clock_.due(f);
        if (due <= limit || (f == T && t->deadline <= passed)) {
            due_.push(t);
        } else if (pos.lazy() && slots_.slot_of(f) != s) {
            /* Its fire tick is after T (due > limit), in another slot: never
               behind cur, never before the window. */
            place(t, f, pos.grid(), pos.order().with_moved());
        } else {
            pos.order().with(pos.grid()).in_slot(s).store(t);
            slots_.refill(s, t);
            if (due < min) min = due;
        }
        t = n;
    }
    if (slots_.refilled(s, min) && min > clock_.time_of(T)) slots_.deactivate(s);
}

const char *Wheel::check() const noexcept {
    size_t seen = 0;
    if (const char *broken = due_.check(clock_, cur_, log_.now(), seen, count_, "wheel"))
        return broken;
    if (slots_.stray_bits())
        return check_failed("wheel: bitmap bits beyond slot %llu",
                            (unsigned long long)slots_.mask());
    for (size_t s = 0; s <= slots_.mask(); ++s)
        if (const char *broken = check_slot(s, seen)) return broken;
    if (seen != count_) return check_failed("wheel: %zu timers linked, count %zu", seen, count_);
    return nullptr;
}

/* Slot s's part of the walker: bits, links, positions, minimum, order. */
const char *Wheel::check_slot(size_t s, size_t &seen) const noexcept {
    const tl_timer *head = slots_.head(s);
    const uint64_t mask = slots_.mask();
    bool occupied = slots_.occupied(s);
    if (occupied != (head != nullptr))
        return check_failed("wheel: occupancy bit of slot %zu is %d, slot %s", s, occupied,
                            head ? "non-empty" : "empty");
    if (slots_.active(s) && !occupied)
        return check_failed("wheel: empty slot %zu marked active", s);
    if (!head) return nullptr;
    const uint64_t min = slots_.min(s);
    /* A lazy timer's slot must be walked (and it re-filed) by its tick. */
    const uint64_t walked_from = clock_.fire_tick(min) > cur_ ? clock_.fire_tick(min) : cur_;
    const uint64_t walked = WheelWindow::visit_tick(walked_from, s, mask);
    const tl_timer *t = head;
    const tl_timer *last_started = nullptr; /* the last one not moved */
    do {
        SlotPosition pos = SlotPosition::of(t);
        if (++seen > count_)
            return check_failed("wheel: more timers linked than count %zu", count_);
        if (prev_of(next_of(t)) != t || next_of(prev_of(t)) != t)
            return check_failed("wheel: broken links in slot %zu", s);
        if (pos.slot() != s)
            return check_failed("wheel: timer in slot %zu records position %#llx", s,
                                (unsigned long long)pos.word());
        uint64_t e = clock_.fire_tick(t);
        if ((slots_.slot_of(e) != s) != pos.lazy())
            return check_failed("wheel: timer with tick %llu in slot %zu, %s",
                                (unsigned long long)e, s, pos.lazy() ? "lazy" : "not lazy");
        if (pos.lazy() && walked > e)
            return check_failed("wheel: lazy timer with tick %llu in slot %zu, walked only at %llu",
                                (unsigned long long)e, s, (unsigned long long)walked);
        if (e < cur_)
            return check_failed("wheel: timer with tick %llu in slot %zu behind cur %llu",
                                (unsigned long long)e, s, (unsigned long long)cur_);
        if (min > clock_.due(e))
            return check_failed("wheel: slot %zu minimum %llu above due time %llu", s,
                                (unsigned long long)min, (unsigned long long)clock_.due(e));
        if (!pos.moved()) {
            if (SlotPosition::kHasSequence && last_started &&
                int32_t(pos.sequence() - sequence_of(last_started)) <= 0)
                return check_failed("wheel: slot %zu out of start order", s);
            last_started = t;
        }
        if (window_.valid() && e < window_.start())
            return check_failed("wheel: timer with tick %llu before the window at %llu",
                                (unsigned long long)e, (unsigned long long)window_.start());
        if (window_.valid() && !pos.lazy() && window_.holds(e, mask) && !slots_.active(s))
            return check_failed("wheel: slot %zu holds tick %llu of the window at %llu "
                                "but is not active",
                                s, (unsigned long long)e, (unsigned long long)window_.start());
        t = next_of(t);
    } while (t != head);
    return nullptr;
}

} // namespace

const tl_timer_backend wheel_backend = make_backend<Wheel>("wheel");

const char *wheel_check(void *self) {
    return backend_check<Wheel>(self);
}

} // namespace tl::detail
