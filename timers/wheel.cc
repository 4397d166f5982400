/* SPDX-License-Identifier: MIT */
/*
 * wheel: a single-level hashed timing wheel (the idea of Netty's
 * HashedWheelTimer), driven only by the now values it is given.
 *
 * Time is counted in ticks of tick_ns. A timer's fire tick is
 * e = ceil(deadline / tick_ns), the first tick boundary at or after its
 * deadline. pop_expired(now) returns every timer with e <= floor(now / tick_ns)
 * (at now == UINT64_MAX, when every deadline has passed, all of them): a
 * tick's timers come out together once the tick has passed, and
 * next_expiry() is the instant of the first tick that holds one, so the loop
 * wakes at most once per such tick. A timer filed (inserted or rescheduled)
 * with a deadline at or before the last now given is overdue: the next pop
 * hands it out with the timers of its tick whose deadlines have passed too
 * (the tick in progress is visited early), so a deadline already in the past
 * fires in the loop's next iteration and ties keep their order; timers
 * whose deadlines pass while they are inside wait for their tick's end.
 * The wheel keeps its own position `cur`:
 * no timer in a slot has a fire tick before it, and it is at most one tick
 * past the last now it was given.
 *
 * Layout: N = wheel_slots slots (a power of two), each a circular doubly-linked
 * list threaded through tl_timer::link. A timer with fire tick e lives in slot
 * e mod N whatever its round, so a timer due beyond one revolution simply stays
 * there: deadlines are absolute, there are no round counters to decrement.
 * slot_min[s] is a lower bound of the due times (fire tick instants) in slot
 * s, so a visit walks a slot only when something in it may be due; the
 * slots and their bitmaps are WheelSlots, the window of due slots
 * WheelWindow (below). A "due" list holds the timers found due and not yet
 * returned, and any inserted with e < cur.
 *
 * Invariants (checked by wheel_check()):
 * - A timer's link[2] holds its slot (kReady in the ready list), so removal finds
 *   it without dividing, and its start sequence. A slot is a FIFO list: the
 *   timers in it that are not marked kMoved are in start order.
 * - A timer in slot s has e mod N == s and e >= cur, unless it is marked lazy:
 *   rescheduled later to another slot's tick and left in place (a heartbeat
 *   then touches only the timer). A lazy timer's slot is walked no later than
 *   its tick (the slot's minimum is at most its old deadline), and the walk
 *   re-files it. slot_min[s] is <= every deadline in the slot (it may be
 *   stale but low after a cancel or a lazy reschedule, which costs at most
 *   one extra walk). Ready timers have e <= cur; the ready minimum is a lower
 *   bound of their deadlines.
 * - count is the number of timers in the slots and the ready list; the
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
#include "timers.h"
#include "wheel_core.h"

namespace tl::detail {
namespace {

/* wheel_slots must be a power of two (slot = e & mask) in [1, 2^20]. The loop
 * passes 4096 (4.096 s of 1 ms ticks per revolution: most I/O timeouts then
 * never wait a round). Beyond 2^20 the slot arrays (16 bytes a slot) stop
 * fitting any cache and an empty scan reads 16K words; use hwheel instead. */
constexpr uint64_t kMaxSlots = uint64_t(1) << 20;

/* Node: link[0] = next, link[1] = prev, link[2] = slot (| kLazy) or kReady,
   with the grid, the moved mark and the start sequence (wheel_core.h). A lazy timer was rescheduled
   later to another slot's tick and left in place; the walk of its slot (due no later than the old
   deadline) re-files it. */
static_assert(3 * sizeof(uintptr_t) <= timer_link_bytes, "wheel node fits in tl_timer.link");
static_assert(kMaxSlots < kReady, "slot numbers stay below kReady and the lazy mark");

/* The slots: N circular lists (node.h), slot_min[s] a lower bound of the due
 * times in slot s, and two bitmaps of one bit per slot in 64-bit words,
 * scanned with ctz: the occupied slots (set exactly for the non-empty ones)
 * and the active ones (kept by WheelWindow; only occupied slots are active).
 * The arrays are the wheel's only allocation, made once. */
class WheelSlots {
protected:
    static constexpr size_t kNone = SIZE_MAX;

    tl_timer **slots_ = nullptr;
    uint64_t *slot_min_ = nullptr; /* ns; meaningful for occupied slots only */
    uint64_t *occupied_ = nullptr;
    uint64_t *active_ = nullptr; /* slots that may fire within the window */
    uint64_t mask_;              /* N - 1 */
    size_t words_;               /* bitmap words, max(N / 64, 1): a power of two */

    explicit WheelSlots(uint64_t n) noexcept : mask_(n - 1), words_(n >= 64 ? size_t(n / 64) : 1) {}
    WheelSlots(const WheelSlots &) = delete;
    WheelSlots &operator=(const WheelSlots &) = delete;
    ~WheelSlots() {
        std::free(slots_);
        std::free(slot_min_);
        std::free(occupied_);
        std::free(active_);
    }

    /* The first set bit at or after from's slot, wrapping around, or kNone: at
       most words_ + 1 word reads, each a ctz. */
    size_t first_set(const uint64_t *bits, uint64_t from) const noexcept {
        size_t p = size_t(from & mask_);
        size_t w = p >> 6;
        uint64_t word = bits[w] & (~uint64_t(0) << (p & 63));
        for (size_t i = 0; i < words_; ++i) {
            if (word) return (w << 6) | size_t(__builtin_ctzll(word));
            w = (w + 1) & (words_ - 1);
            word = bits[w];
        }
        /* Back at cur's word: only the bits below cur's slot are left. */
        return word ? (w << 6) | size_t(__builtin_ctzll(word)) : kNone;
    }

    /* Appends t, due at due, to slot s: its minimum and occupancy follow. */
    void push(size_t s, tl_timer *t, uint64_t due) noexcept {
        if (!slots_[s]) {
            slot_min_[s] = due;
            bit_set(occupied_, s);
        } else if (due < slot_min_[s]) {
            slot_min_[s] = due;
        }
        list_push(slots_[s], t, false);
    }

    void slot_emptied(size_t s) noexcept {
        bit_clear(occupied_, s);
        bit_clear(active_, s);
    }

    /* Removes t from slot s, clearing its bits if it emptied. */
    void unlink(size_t s, tl_timer *t) noexcept {
        list_unlink(slots_[s], t);
        if (!slots_[s]) slot_emptied(s);
    }

public:
    bool allocate() noexcept {
        slots_ = static_cast<tl_timer **>(std::calloc(mask_ + 1, sizeof(tl_timer *)));
        slot_min_ = static_cast<uint64_t *>(std::calloc(mask_ + 1, sizeof(uint64_t)));
        occupied_ = static_cast<uint64_t *>(std::calloc(words_, sizeof(uint64_t)));
        active_ = static_cast<uint64_t *>(std::calloc(words_, sizeof(uint64_t)));
        return slots_ && slot_min_ && occupied_ && active_;
    }
};

/* The position cur and the window: the revolution [window, window + N) of
 * ticks, starting at the first tick at which anything may be due, for which
 * the active bitmap is kept. While the window is valid, no timer in a slot
 * has a fire tick before it, and every slot holding a timer whose fire tick
 * lies in it is active (a stale mark after a cancel is cleared when met). A
 * used-up window is rebuilt in O(occupied slots), so the next due slot is
 * one ctz scan and a jump of now skips empty revolutions. */
class WheelWindow : protected WheelSlots {
protected:
    TickClock clock_;
    uint64_t cur_;
    uint64_t window_ = 0;
    bool window_valid_ = false;

    WheelWindow(const tl_timer_config &cfg, uint64_t now) noexcept
        : WheelSlots(cfg.wheel_slots), clock_(cfg.tick_ns), cur_(now / cfg.tick_ns) {}

    /* Where scans start: cur, or the window if it starts later (no timer in
       a slot is due before it). */
    uint64_t scan_from() const noexcept { return window_valid_ && window_ > cur_ ? window_ : cur_; }
    /* The first tick at or after from that maps to slot s. */
    uint64_t visit_tick(uint64_t from, size_t s) const noexcept {
        return from + ((s - from) & mask_);
    }
    /* Whether tick k >= window_ lies in the window. */
    bool in_window(uint64_t k) const noexcept { return k - window_ <= mask_; }

    /* Slot s now holds a timer with fire tick e >= cur: it is active if e is
       in the window; the window is dropped if e is before it. */
    void filed(size_t s, uint64_t e) noexcept {
        if (window_valid_) {
            if (e < window_)
                window_valid_ = false; /* earlier than the window: rebuild it */
            else if (in_window(e))
                bit_set(active_, s);
        }
    }

    /* Pre: some slot occupied. Post: the window starts at the first tick at
       which anything may be due, w = max(cur, fire tick of the least
       max(slot_min, first ns of its visit) over the slots), and a slot is
       active iff its minimum is due by its visit in [w, w + N). Two passes
       over the occupied slots through the bitmap. */
    void rebuild() noexcept {
        uint64_t horizon = UINT64_MAX;
        for (size_t w = 0; w < words_; ++w) {
            for (uint64_t word = occupied_[w]; word; word &= word - 1) {
                size_t s = (w << 6) | size_t(__builtin_ctzll(word));
                uint64_t lower = clock_.first_ns(visit_tick(cur_, s));
                uint64_t bound = slot_min_[s] > lower ? slot_min_[s] : lower;
                if (bound < horizon) horizon = bound;
            }
        }
        uint64_t from = clock_.fire_tick(horizon);
        if (from < cur_) from = cur_;
        for (size_t w = 0; w < words_; ++w) {
            uint64_t active = 0;
            for (uint64_t word = occupied_[w]; word; word &= word - 1) {
                size_t s = (w << 6) | size_t(__builtin_ctzll(word));
                if (slot_min_[s] <= clock_.time_of(visit_tick(from, s)))
                    active |= uint64_t(1) << (s & 63);
            }
            active_[w] = active;
        }
        window_ = from;
        window_valid_ = true;
    }

    /* Pre: some slot occupied. The first slot with a timer due at its visit
       in the window, which it stores in visit; kNone only on a broken
       invariant. Clears the active marks of slots found to have nothing due
       (after cancels) and rebuilds a used-up window. */
    size_t find_due(uint64_t &visit) noexcept {
        bool rebuilt = false;
        if (!window_valid_ || !in_window(cur_ > window_ ? cur_ : window_)) {
            rebuild();
            rebuilt = true;
        }
        for (;;) {
            uint64_t from = scan_from();
            size_t s = first_set(active_, from);
            if (s != kNone) {
                visit = visit_tick(from, s);
                if (in_window(visit)) {
                    if (slot_min_[s] <= clock_.time_of(visit)) return s;
                    bit_clear(active_, s);
                    continue;
                }
            }
            /* Nothing left in this window: the next one starts where
               something is due (a fresh window always has an active slot). */
            if (rebuilt) return kNone;
            rebuild();
            rebuilt = true;
        }
    }
};

/* The wheel: filing, the lazy reschedule and the pops, over the window. */
class Wheel : public MallocNew, public GridEntry<Wheel>, WheelWindow, StartLog {
    friend class GridEntry<Wheel>;

    ReadyList ready_;
    uint64_t max_tick_; /* ceil(UINT64_MAX / tick): the last fire tick */
    size_t count_ = 0;

    /* A re-filing: t's own sequence, marked moved. */
    static uintptr_t refiled(const tl_timer *t) noexcept {
        return (t->link[2] & kOrderBits) | kMoved;
    }

    /* Pre: t in no list, e = its fire tick on grid (its grid bits). Post: t
       appended to slot e mod N with the order bits order (marked active if e
       is in the window), or in the ready list if e < cur. Does not touch
       count. */
    void place(tl_timer *t, uint64_t e, uintptr_t grid, uintptr_t order) noexcept {
        if (e < cur_) {
            /* Behind the timers already found due: sorted among them. */
            t->link[2] = order | kMoved;
            ready_.push(t);
            return;
        }
        size_t s = size_t(e & mask_);
        push(s, t, clock_.due(e));
        t->link[2] = order | grid | s;
        filed(s, e);
    }

    /* Pre: t inside. Post: t in no list; its slot's bits cleared if it emptied.
       Does not touch count. */
    void unfile(tl_timer *t) noexcept {
        if (slot_id(t) == kReady) {
            ready_.unlink(t);
            return;
        }
        unlink(size_t(slot_id(t)), t);
    }

    /* Pre: the ready list is empty, slot s is visited at tick T, limit <=
       clock_.time_of(T). Post: its timers due by limit, and those of tick T
       whose deadline is <= passed (when one was overdue), are in the ready list in slot
       order, its lazy ones re-filed where their fire tick says, the rest
       still in slot order, slot_min[s] is exact, and s is active only if a
       timer of tick T is left. */
    void collect(size_t s, uint64_t T, uint64_t limit, uint64_t passed) noexcept {
        tl_timer *t = list_take(slots_[s]);
        uint64_t min = UINT64_MAX;
        while (t) {
            tl_timer *n = next_of(t);
            uintptr_t grid = t->link[2] & kGridMask;
            uint64_t f = clock_.fire_tick(t->deadline, grid);
            uint64_t due = clock_.due(f);
            if (due <= limit || (f == T && t->deadline <= passed)) {
                ready_.push(t);
            } else if ((t->link[2] & kLazy) && (f & mask_) != s) {
                /* Its fire tick is after T (due > limit), in another slot:
                   never behind cur, never before the window. */
                place(t, f, grid, refiled(t));
            } else {
                t->link[2] = (t->link[2] & kOrderBits) | grid | s;
                list_push(slots_[s], t, false);
                if (due < min) min = due;
            }
            t = n;
        }
        if (!slots_[s]) {
            slot_emptied(s);
            return;
        }
        slot_min_[s] = min;
        if (min > clock_.time_of(T)) bit_clear(active_, s);
    }

public:
    /* Tick order only: a timer fires within the tick after its deadline. */
    static constexpr uint32_t kCaps = 0;

    static bool accepts(const tl_timer_config &cfg) noexcept {
        uint64_t slots = cfg.wheel_slots;
        return cfg.tick_ns != 0 && slots != 0 && (slots & (slots - 1)) == 0 && slots <= kMaxSlots;
    }

    Wheel(const tl_timer_config &cfg, uint64_t now) noexcept
        : WheelWindow(cfg, now), StartLog(now),
          max_tick_(UINT64_MAX / cfg.tick_ns + (UINT64_MAX % cfg.tick_ns != 0)) {}

    /* The only allocation: the slot arrays and bitmaps, once. */
    using WheelSlots::allocate;

    /* Pre: t not inside, t->deadline set (any value, even before now). Post:
       t inside, in the slot of its fire tick (the ready list if that tick has
       passed). O(1), never fails, never allocates. */
    int insert(tl_timer *t) noexcept {
        file_new(t);
        ++count_;
        return 0;
    }

    /* timer_backend.h's reserve: an insert never fails, so there is always
       room (and the loop parks a due start until its dispatch ends rather
       than inserting it at once, as it must for a backend without one). */
    int reserve_room(const tl_timer *, size_t) noexcept { return 0; }

    /* Pre: t inside. Post: t not inside. O(1). */
    void remove(tl_timer *t) noexcept {
        unfile(t);
        --count_;
    }

    /* Pre: t inside. Post: t->deadline == deadline, t inside and due at its
       new fire tick, with a new start sequence. Staying in the same slot
       rewrites the deadline in place. A later deadline elsewhere also stays
       (marked lazy): its slot is walked by the old deadline, and the walk
       re-files it (the heartbeat case costs O(1) and touches no list). Both
       mark it moved. An earlier one is moved at once: an unlink and an
       append, also O(1). */
    using GridEntry::reschedule; /* the grid, then reschedule_to */
    /* e: the fire tick of deadline on grid; the old grid may differ. */
    [[gnu::always_inline]] void reschedule_to(tl_timer *t, uint64_t deadline, uint64_t e,
                                              uintptr_t grid) noexcept {
        /* An overdue timer is moved: its slot, due now, would otherwise be
           walked for nothing (a spurious zero timeout). */
        if (slot_id(t) != kReady && e >= cur_ && t->deadline > now_) {
            /* The slot, with the grid bits of a timer on a grid. */
            size_t s = size_t(t->link[2] & (kReady | kGridMask));
            if ((e & mask_) != s) {
                /* Left in place only if its slot is walked by e: the old
                   fire tick is no later (on a grid, see lazy_from_grid). */
                if (s > kReady) [[unlikely]] {
                    lazy_from_grid(t, deadline, e, grid);
                    return;
                }
                if (deadline < t->deadline) {
                    move(t, deadline, e, grid);
                    return;
                }
                t->deadline = deadline;
                t->link[2] = started() | kMoved | s | kLazy | grid;
                return;
            }
            t->link[2] = started() | kMoved | s | grid;
            t->deadline = deadline;
            filed_at(deadline);
            uint64_t due = clock_.due(e);
            if (due < slot_min_[s]) slot_min_[s] = due;
            filed(s, e);
            return;
        }
        move(t, deadline, e, grid);
    }

    /* reschedule of a timer on a grid (in a slot) to fire tick e: left in
       place (lazy) only in another slot and if e is no earlier than its fire
       tick now (a later deadline may have an earlier fire tick on a finer
       grid); else moved, even within its slot (rare: leeway changed). */
    [[gnu::noinline]] void lazy_from_grid(tl_timer *t, uint64_t deadline, uint64_t e,
                                          uintptr_t grid) noexcept {
        if (deadline < t->deadline || e < clock_.fire_tick(t) || (e & mask_) == slot_id(t)) {
            move(t, deadline, e, grid);
            return;
        }
        t->deadline = deadline;
        t->link[2] = started() | kMoved | slot_id(t) | kLazy | grid;
    }

    /* reschedule's slow path, out of line so that the in-place paths above
       need no saved registers. */
    [[gnu::noinline]] void move(tl_timer *t, uint64_t deadline, uint64_t e,
                                uintptr_t grid) noexcept {
        unfile(t);
        t->deadline = deadline;
        file(t, e, grid);
    }

    /* A lower bound of every due time inside (a fire tick's instant), exact
       unless a cancel or a lazy reschedule left a minimum stale: the ready
       list's minimum deadline (already due); else the lesser of the least
       deadline of a timer filed overdue (already due) and the minimum of the
       first slot due in the window (or the horizon). */
    uint64_t next_expiry() noexcept {
        if (ready_.head) return ready_.min;
        if (count_ == 0) return UINT64_MAX;
        uint64_t visit;
        size_t s = find_due(visit);
        if (s == kNone) return 0;
        uint64_t lower = clock_.first_ns(visit);
        uint64_t next = slot_min_[s] > lower ? slot_min_[s] : lower;
        /* An overdue timer's deadline, when earlier (it is due already), if
           the next pop hands one out: the note outlives a timer restarted
           or stopped since, and a past time with nothing due would make
           the loop run an empty iteration. */
        if (overdue_ >= next || holds_overdue(s, visit)) return overdue_ < next ? overdue_ : next;
        overdue_ = UINT64_MAX;
        return next;
    }

    /* Whether pop_expired(now_) would hand out a timer filed overdue, slot s
       being the first due, at tick visit: its tick has passed (it is due
       anyway), or it is the tick in progress and holds a timer of that tick
       whose deadline has passed (as the pop's collect takes them). */
    bool holds_overdue(size_t s, uint64_t visit) const noexcept {
        uint64_t nt = clock_.now_tick(now_);
        if (visit <= nt) return true;
        if (visit - nt > 1) return false;
        const tl_timer *t = slots_[s];
        do {
            if (t->deadline <= now_ && clock_.fire_tick(t) == visit) return true;
            t = next_of(t);
        } while (t != slots_[s]);
        return false;
    }

    /* Pre: now >= every earlier now. Post: returns a timer with fire tick <=
       now's tick, or of the next tick with its deadline <= now when a timer
       was filed overdue since the last pop, removed, in tick order; NULL once none is
       left, with cur at least now's tick. */
    tl_timer *pop_expired(uint64_t now) noexcept {
        uint64_t nt = clock_.now_tick(now);
        now_ = now;
        for (;;) {
            if (ready_.head) {
                --count_;
                return ready_.pop();
            }
            if (count_ == 0) break;
            uint64_t visit;
            size_t s = find_due(visit);
            if (s == kNone) break;
            if (visit > nt) {
                /* The tick in progress, for overdue timers only. */
                if (overdue_ == UINT64_MAX || visit - nt > 1) break;
                overdue_ = UINT64_MAX;
                collect(s, visit, 0, now);
                cur_ = visit;
                continue;
            }
            collect(s, visit, clock_.time_of(visit), 0);
            /* At the last representable tick cur stays: nothing is later. */
            cur_ = visit < max_tick_ ? visit + 1 : visit;
        }
        overdue_ = UINT64_MAX;
        if (nt > cur_) cur_ = nt;
        return nullptr;
    }

    size_t count() const noexcept { return count_; }

    /* The walker: every invariant above; NULL or the first broken one. */
    const char *check() const noexcept;
};

const char *Wheel::check() const noexcept {
    size_t seen = 0;
    if (const char *broken = ready_.check(clock_, cur_, now_, seen, count_, "wheel")) return broken;
    if (mask_ + 1 < 64 && (occupied_[0] | active_[0]) >> (mask_ + 1))
        return check_failed("wheel: bitmap bits beyond slot %llu", (unsigned long long)mask_);
    for (size_t s = 0; s <= mask_; ++s) {
        const tl_timer *head = slots_[s];
        bool occupied = bit_test(occupied_, s);
        if (occupied != (head != nullptr))
            return check_failed("wheel: occupancy bit of slot %zu is %d, slot %s", s, occupied,
                                head ? "non-empty" : "empty");
        if (bit_test(active_, s) && !occupied)
            return check_failed("wheel: empty slot %zu marked active", s);
        if (!head) continue;
        uint64_t min = slot_min_[s];
        const tl_timer *t = head;
        const tl_timer *last_started = nullptr; /* the last one not moved */
        do {
            if (++seen > count_)
                return check_failed("wheel: more timers linked than count %zu", count_);
            if (prev_of(next_of(t)) != t || next_of(prev_of(t)) != t)
                return check_failed("wheel: broken links in slot %zu", s);
            bool lazy = t->link[2] & kLazy;
            if (slot_id(t) != s)
                return check_failed("wheel: timer in slot %zu records slot %llu", s,
                                    (unsigned long long)t->link[2]);
            uint64_t e = clock_.fire_tick(t);
            if (((e & mask_) != s) != lazy)
                return check_failed("wheel: timer with tick %llu in slot %zu, %s",
                                    (unsigned long long)e, s, lazy ? "lazy" : "not lazy");
            if (lazy) {
                /* Its slot must be walked (and it re-filed) by its tick. */
                uint64_t from = clock_.fire_tick(min) > cur_ ? clock_.fire_tick(min) : cur_;
                if (visit_tick(from, s) > e)
                    return check_failed("wheel: lazy timer with tick %llu in slot %zu, "
                                        "walked only at %llu",
                                        (unsigned long long)e, s,
                                        (unsigned long long)visit_tick(from, s));
            }
            if (e < cur_)
                return check_failed("wheel: timer with tick %llu in slot %zu behind cur %llu",
                                    (unsigned long long)e, s, (unsigned long long)cur_);
            uint64_t due = clock_.due(e);
            if (min > due)
                return check_failed("wheel: slot %zu minimum %llu above due time %llu", s,
                                    (unsigned long long)min, (unsigned long long)due);
            if (!(t->link[2] & kMoved)) {
                if (kHasSequence && last_started &&
                    int32_t(sequence_of(t) - sequence_of(last_started)) <= 0)
                    return check_failed("wheel: slot %zu out of start order", s);
                last_started = t;
            }
            if (window_valid_ && e < window_)
                return check_failed("wheel: timer with tick %llu before the window at %llu",
                                    (unsigned long long)e, (unsigned long long)window_);
            if (window_valid_ && !lazy && in_window(e) && !bit_test(active_, s))
                return check_failed("wheel: slot %zu holds tick %llu of the window at %llu "
                                    "but is not active",
                                    s, (unsigned long long)e, (unsigned long long)window_);
            t = next_of(t);
        } while (t != head);
    }
    if (seen != count_) return check_failed("wheel: %zu timers linked, count %zu", seen, count_);
    return nullptr;
}

} // namespace

const tl_timer_backend wheel_backend = make_backend<Wheel>("wheel");

const char *wheel_check(void *self) {
    return backend_check<Wheel>(self);
}

} // namespace tl::detail
