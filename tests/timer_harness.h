/* SPDX-License-Identifier: MIT */
/*
 * Test helper for the timer-backend suites: a harness that drives one backend
 * through its vtable with explicit `now` values and keeps its own record of
 * what is inside, so every operation is checked against the rules of
 * timer_backend.h as it happens:
 * - the backend's invariant walker (tl_detail_timers_check) returns NULL;
 * - what the backend promises comes from its caps, never its name: "exact"
 *   below means TL_TIMER_CAP_EXACT (the built-in heaps), "the others" means
 *   caps 0, the tick-order rule (the wheels, and any custom backend that
 *   promises nothing more);
 * - count() equals the record; next_expiry() is UINT64_MAX when empty, the
 *   earliest deadline for exact backends; for the others never later than the tick
 *   boundary at or after the earliest deadline (a wheel reports the tick it
 *   will hand the timer out at), and pop_expired(next_expiry() - 1) returns
 *   nothing (checked by drain_all);
 * - pop_expired(now) never returns a timer early or one not inside; exact
 *   backends return exactly the earliest (deadline, insertion), the others keep tick
 *   order (ceil(deadline / tick) non-decreasing);
 * - a drain (pop_expired until NULL) leaves nothing due: no deadline <= now
 *   (exact) or <= now rounded down to a tick (others).
 * Leeway (timer_backend.h, "Leeway"): insert and reschedule take one, set in
 * the timer's flags (leeway_bits) and recorded as latest = deadline + leeway,
 * captured then (a test may change the flags afterwards; the backend must not
 * care). With leeway in play, exact backends keep every rule above (they hand
 * out by deadline) and next_wakeup() lies in [next_expiry(), earliest
 * latest]; the others may file a timer at any fire time in its window, so
 * their tick order and "nothing due" checks use latest + one tick instead of
 * the deadline, and a pop is still never before the deadline.
 */
#ifndef TICKLOOP_TESTS_TIMER_HARNESS_H
#define TICKLOOP_TESTS_TIMER_HARNESS_H

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <criterion/criterion.h>

#include "timers/timers.h"

namespace {

constexpr uint64_t kTick = 1000000; /* 1 ms, the loop's default */
constexpr tl_timer_config kConfig{kTick, 4096};
/* A large start that is not a multiple of the tick. */
constexpr uint64_t kBigStart = 123456789012345ull;
const uint64_t kStarts[] = {0, kBigStart};
/* Empty next_expiry/pop_expired rounds a tick-order backend may need between two pops:
   one per wheel level, with room to spare (a 64-bit hierarchy of 6-bit levels
   has 11). */
constexpr unsigned kMaxEmptyRounds = 12;

struct Item {
    tl_timer timer;
    uint64_t seq;    /* the harness's insertion number, for tie order        */
    uint64_t latest; /* deadline + leeway, as captured at insert/reschedule */
    int id;
};

Item *item_of(tl_timer *t) {
    return static_cast<Item *>(t->data);
}

uint64_t tick_of(uint64_t deadline, uint64_t tick) {
    return deadline / tick + (deadline % tick != 0);
}

uint64_t sat_add(uint64_t a, uint64_t b) {
    return a + b < a ? UINT64_MAX : a + b;
}

/* A fixed-seed generator (splitmix64), the same on every platform. */
struct Rng {
    uint64_t state;
    uint64_t next() {
        uint64_t z = (state += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    uint64_t below(uint64_t n) { return n ? next() % n : 0; }
};

/*
 * One backend instance plus the harness's own record of what is inside. Every
 * operation goes through here so that the invariant walker, count(),
 * next_expiry() and the pop rules are checked after each one.
 */
class Harness {
public:
    Harness(const char *name, uint64_t now, tl_timer_config cfg = kConfig)
        : name_(name), cfg_(cfg), now_(now) {
        b_ = tl_timer_backend_find(name);
        cr_assert(b_, "%s: tl_timer_backend_find returned NULL", name);
        exact_ = (b_->caps & TL_TIMER_CAP_EXACT) != 0;
        self_ = b_->create(&cfg_, now);
        cr_assert(self_, "%s: create(tick %llu, slots %u, now %llu) returned NULL", name,
                  (unsigned long long)cfg.tick_ns, cfg.wheel_slots, (unsigned long long)now);
        check("create");
    }
    ~Harness() { b_->destroy(self_); }
    Harness(const Harness &) = delete;
    Harness &operator=(const Harness &) = delete;

    /* Runs the (O(n)) invariant walker only every `every` operations; the
       cheap checks still run after each one. */
    void walk_every(unsigned every) { walk_every_ = every ? every : 1; }
    /* The invariant walker now, whatever walk_every says. */
    void walk(const char *after) {
        const char *broken = tl_detail_timers_check(b_, self_);
        cr_assert(broken == nullptr, "%s: after %s: %s", name(), after, broken);
    }

    const char *name() const { return name_.c_str(); }
    bool exact() const { return exact_; }
    uint64_t now() const { return now_; }
    uint64_t tick() const { return cfg_.tick_ns; }
    size_t size() const { return inside_.size(); }
    /* The backend instance, for a backend's own hidden counters. */
    void *instance() const { return self_; }

    /* The tick boundary at or after deadline (saturated): for a tick-order backend,
       next_expiry() may round the earliest deadline up to it, no further. */
    uint64_t fire_time(uint64_t deadline) const {
        uint64_t ticks = tick_of(deadline, cfg_.tick_ns);
        return ticks > UINT64_MAX / cfg_.tick_ns ? UINT64_MAX : ticks * cfg_.tick_ns;
    }

    /* The largest deadline pop_expired(now) must have returned once it answers NULL. */
    uint64_t due_bound(uint64_t now) const {
        return exact_ ? now : now / cfg_.tick_ns * cfg_.tick_ns;
    }

    /* The leeway the timer's flags encode (leeway_bits rounds down). */
    static void set_leeway(Item &it, uint64_t leeway) {
        it.timer.flags =
            (it.timer.flags & ~tl::detail::kLeewayMask) | tl::detail::leeway_bits(leeway);
    }

    void insert(Item &it, uint64_t deadline, uint64_t leeway = 0) {
        cr_assert(deadline >= now_, "test bug: deadline %llu before now %llu",
                  (unsigned long long)deadline, (unsigned long long)now_);
        set_leeway(it, leeway);
        capture(it, deadline);
        it.timer.deadline = deadline;
        it.seq = seq_++;
        int r = b_->insert(self_, &it.timer);
        cr_assert(r == 0, "%s: insert(deadline %llu) returned %d", name(),
                  (unsigned long long)deadline, r);
        inside_.emplace(Key{deadline, it.seq}, &it);
        latest_.insert(it.latest);
        check("insert");
    }

    void remove(Item &it) {
        cr_assert(inside_.erase(Key{it.timer.deadline, it.seq}) == 1, "test bug: not inside");
        latest_.erase(latest_.find(it.latest));
        b_->remove(self_, &it.timer);
        check("remove");
    }

    /* reschedule, or remove + insert when the backend leaves it NULL (as the loop does). */
    void reschedule(Item &it, uint64_t deadline) {
        cr_assert(deadline >= now_, "test bug: deadline before now");
        cr_assert(inside_.erase(Key{it.timer.deadline, it.seq}) == 1, "test bug: not inside");
        latest_.erase(latest_.find(it.latest));
        capture(it, deadline);
        it.seq = seq_++;
        if (b_->reschedule) {
            b_->reschedule(self_, &it.timer, deadline);
            cr_assert(it.timer.deadline == deadline,
                      "%s: reschedule left deadline %llu, asked for %llu", name(),
                      (unsigned long long)it.timer.deadline, (unsigned long long)deadline);
        } else {
            b_->remove(self_, &it.timer);
            it.timer.deadline = deadline;
            int r = b_->insert(self_, &it.timer);
            cr_assert(r == 0, "%s: insert returned %d", name(), r);
        }
        inside_.emplace(Key{deadline, it.seq}, &it);
        latest_.insert(it.latest);
        check("reschedule");
    }

    /* One pop_expired(now): checks it is never early, was inside, and keeps order. */
    Item *pop(uint64_t now) {
        cr_assert(now >= now_, "test bug: now moved backwards");
        now_ = now;
        tl_timer *t = b_->pop_expired(self_, now);
        if (!t) {
            check("pop_expired (NULL)");
            if (exact_ || !any_leeway_)
                cr_assert(inside_.empty() || inside_.begin()->first.deadline > due_bound(now),
                          "%s: pop_expired(%llu) answered NULL but deadline %llu is due (bound "
                          "%llu)",
                          name(), (unsigned long long)now,
                          (unsigned long long)inside_.begin()->first.deadline,
                          (unsigned long long)due_bound(now));
            else
                cr_assert(latest_.empty() || sat_add(*latest_.begin(), cfg_.tick_ns) > now,
                          "%s: pop_expired(%llu) answered NULL but a timer's window closed at "
                          "%llu",
                          name(), (unsigned long long)now, (unsigned long long)*latest_.begin());
            return nullptr;
        }
        Item *it = item_of(t);
        cr_assert(t->deadline <= now, "%s: pop_expired(%llu) returned deadline %llu: early", name(),
                  (unsigned long long)now, (unsigned long long)t->deadline);
        auto found = inside_.find(Key{t->deadline, it->seq});
        cr_assert(found != inside_.end() && found->second == it,
                  "%s: pop_expired returned timer %d (deadline %llu), which is not inside", name(),
                  it->id, (unsigned long long)t->deadline);
        if (exact_) {
            cr_assert(found == inside_.begin(),
                      "%s: popped timer %d (deadline %llu, seq %llu) but (%llu, %llu) is earlier",
                      name(), it->id, (unsigned long long)t->deadline, (unsigned long long)it->seq,
                      (unsigned long long)inside_.begin()->first.deadline,
                      (unsigned long long)inside_.begin()->first.seq);
        }
        uint64_t tick = tick_of(t->deadline, cfg_.tick_ns);
        cr_assert(exact_ || any_leeway_ || !popped_any_ || tick >= last_tick_,
                  "%s: popped deadline %llu (tick %llu) after one of tick %llu: not in tick order",
                  name(), (unsigned long long)t->deadline, (unsigned long long)tick,
                  (unsigned long long)last_tick_);
        popped_any_ = true;
        last_tick_ = tick;
        inside_.erase(found);
        latest_.erase(latest_.find(it->latest));
        check("pop_expired");
        return it;
    }

    /* pop_expired(now) until NULL (pop then checks nothing due is left). */
    std::vector<Item *> drain(uint64_t now) {
        std::vector<Item *> out;
        while (Item *it = pop(now)) out.push_back(it);
        return out;
    }

    /*
     * The progress rule: now = max(now, next_expiry()), drain, repeat until
     * empty. Before each step, pop_expired(next_expiry() - 1) must return
     * nothing. Exact backends never have an empty round; others at most
     * kMaxEmptyRounds in a row.
     */
    std::vector<Item *> drain_all() {
        std::vector<Item *> out;
        unsigned empty = 0;
        while (!inside_.empty()) {
            uint64_t next = next_expiry();
            if (next > now_) {
                Item *early = pop(next - 1);
                cr_assert(!early,
                          "%s: pop_expired(%llu) returned deadline %llu before "
                          "next_expiry %llu",
                          name(), (unsigned long long)(next - 1),
                          (unsigned long long)early->timer.deadline, (unsigned long long)next);
            }
            std::vector<Item *> got = drain(std::max(now_, next));
            out.insert(out.end(), got.begin(), got.end());
            if (got.empty()) {
                ++empty;
                cr_assert(!exact_, "%s: empty round at now %llu, next_expiry %llu", name(),
                          (unsigned long long)now_, (unsigned long long)next);
                cr_assert(empty <= kMaxEmptyRounds,
                          "%s: %u empty rounds in a row at now %llu, %zu timers left, earliest "
                          "%llu: no progress",
                          name(), empty, (unsigned long long)now_, inside_.size(),
                          (unsigned long long)inside_.begin()->first.deadline);
            } else {
                empty = 0;
            }
        }
        cr_assert(next_expiry() == UINT64_MAX, "%s: empty but next_expiry is not UINT64_MAX",
                  name());
        return out;
    }

    uint64_t next_expiry() {
        uint64_t next = b_->next_expiry(self_);
        check("next_expiry");
        return next;
    }

    /* When the loop would next call pop_expired: next_wakeup(), or
       next_expiry() for a backend without the op. */
    uint64_t next_wakeup() {
        uint64_t w = b_->next_wakeup ? b_->next_wakeup(self_) : b_->next_expiry(self_);
        check("next_wakeup");
        return w;
    }

    /* The least latest (deadline + captured leeway) inside; UINT64_MAX if empty. */
    uint64_t earliest_latest() const { return latest_.empty() ? UINT64_MAX : *latest_.begin(); }

    /*
     * The loop's way with leeway: wake at next_wakeup(), drain, repeat until
     * empty. Every timer comes out at or after its deadline (pop checks) and
     * no later than its latest + one tick. between(now) runs after each
     * wake-up (it may insert more). Returns the number of wake-ups.
     */
    template <class Between>
    size_t drain_by_wakeup(Between between) {
        size_t wakeups = 0;
        unsigned empty = 0;
        while (!inside_.empty()) {
            uint64_t w = std::max(now_, next_wakeup());
            ++wakeups;
            std::vector<Item *> got = drain(w);
            for (Item *it : got)
                cr_assert(w <= sat_add(it->latest, cfg_.tick_ns),
                          "%s: timer %d (deadline %llu, latest %llu) handed out at %llu: late",
                          name(), it->id, (unsigned long long)it->timer.deadline,
                          (unsigned long long)it->latest, (unsigned long long)w);
            if (got.empty()) {
                cr_assert(!exact_, "%s: empty wake-up at %llu", name(), (unsigned long long)w);
                cr_assert(++empty <= kMaxEmptyRounds, "%s: %u empty wake-ups in a row at %llu",
                          name(), empty, (unsigned long long)w);
            } else {
                empty = 0;
            }
            between(w, got);
        }
        return wakeups;
    }

private:
    struct Key {
        uint64_t deadline;
        uint64_t seq;
        bool operator<(const Key &o) const {
            return deadline != o.deadline ? deadline < o.deadline : seq < o.seq;
        }
    };

    /* The invariant walker, count() and the next_expiry() bounds. */
    void check(const char *after) {
        if (++ops_ % walk_every_ == 0) {
            const char *broken = tl_detail_timers_check(b_, self_);
            cr_assert(broken == nullptr, "%s: after %s (operation %llu): %s", name(), after,
                      (unsigned long long)ops_, broken);
        }
        size_t count = b_->count(self_);
        cr_assert(count == inside_.size(), "%s: after %s: count() %zu, expected %zu", name(), after,
                  count, inside_.size());
        uint64_t next = b_->next_expiry(self_);
        if (inside_.empty()) {
            cr_assert(next == UINT64_MAX, "%s: after %s: empty but next_expiry %llu", name(), after,
                      (unsigned long long)next);
            return;
        }
        uint64_t earliest = inside_.begin()->first.deadline;
        uint64_t wake = b_->next_wakeup ? b_->next_wakeup(self_) : next;
        cr_assert(wake >= next && (wake <= *latest_.begin() || (!exact_ && !b_->next_wakeup)),
                  "%s: after %s: next_wakeup %llu outside [next_expiry %llu, earliest "
                  "deadline + leeway %llu]",
                  name(), after, (unsigned long long)wake, (unsigned long long)next,
                  (unsigned long long)*latest_.begin());
        if (!exact_ && any_leeway_)
            cr_assert(next <= sat_add(*latest_.begin(), cfg_.tick_ns) ||
                          next <= fire_time(earliest),
                      "%s: after %s: next_expiry %llu after every window plus a tick (%llu)",
                      name(), after, (unsigned long long)next,
                      (unsigned long long)sat_add(*latest_.begin(), cfg_.tick_ns));
        else if (exact_)
            cr_assert(next == earliest, "%s: after %s: next_expiry %llu, earliest deadline %llu",
                      name(), after, (unsigned long long)next, (unsigned long long)earliest);
        else
            cr_assert(next <= fire_time(earliest),
                      "%s: after %s: next_expiry %llu later than the tick boundary %llu of the "
                      "earliest deadline %llu",
                      name(), after, (unsigned long long)next,
                      (unsigned long long)fire_time(earliest), (unsigned long long)earliest);
    }

    std::string name_;
    tl_timer_config cfg_;
    const tl_timer_backend *b_ = nullptr;
    void *self_ = nullptr;
    uint64_t now_;
    bool exact_;
    uint64_t seq_ = 0;
    /* What the backend may have derived from the leeway now in the flags. */
    void capture(Item &it, uint64_t deadline) {
        uint64_t leeway = tl::detail::timer_leeway(&it.timer);
        any_leeway_ |= leeway != 0;
        it.latest = sat_add(deadline, leeway);
    }

    std::map<Key, Item *> inside_;
    std::multiset<uint64_t> latest_;
    bool any_leeway_ = false;
    bool popped_any_ = false;
    unsigned walk_every_ = 1;
    uint64_t ops_ = 0;
    uint64_t last_tick_ = 0;
};

std::vector<Item> make_items(size_t n) {
    std::vector<Item> items(n);
    for (size_t i = 0; i < n; ++i) {
        items[i].timer = tl_timer{};
        items[i].timer.data = &items[i];
        items[i].id = (int)i;
    }
    return items;
}

} // namespace

#endif /* TICKLOOP_TESTS_TIMER_HARNESS_H */
