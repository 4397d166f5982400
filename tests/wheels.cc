/* SPDX-License-Identifier: MIT */
/*
 * The timing wheels ("wheel", "hwheel") driven through their vtables with
 * explicit now values, on the edges that only a wheel has: slot and level
 * boundaries, deadlines at 64^k ticks and at the end of the 64-bit range, a
 * start that is large and not on a tick, jumps of now over an hour and a month
 * with many timers inside, the reschedule fast paths, and slot counts and ticks
 * other than the defaults.
 *
 * Every operation goes through the Harness of timer_harness.h, which runs the
 * backend's invariant walker (tl_detail_timers_check) after each one and
 * checks count(), next_expiry() and the pop rules against its own record. On
 * top of that, the drives here advance now only to tick boundaries, as a loop
 * waking at next_expiry rounded up to the tick would, and assert that every
 * timer then fires less than one tick after its deadline (wheels promise "at
 * most one tick late") and count the empty rounds.
 *
 * Leeway (wheel_core.h, "leeway"): woken at next_expiry, as the loop does,
 * a timer with leeway fires inside [deadline, deadline + leeway] on its
 * power-of-two grid, timers whose windows overlap share wake-ups, and on
 * hwheel a leeway that covers the granularity of the level a timer is filed
 * at keeps it from ever being cascaded (counted by the hidden
 * tl_detail_hwheel_cascades).
 */
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <criterion/criterion.h>
#include <criterion/logging.h>

#include "timer_harness.h"

namespace {

const char *const kWheels[] = {"wheel", "hwheel"};
/* Starts: zero, large and not on a tick, and beyond 2^62. */
const uint64_t kWheelStarts[] = {0, kBigStart, (uint64_t{1} << 62) + 12345};

uint64_t round_up(uint64_t t, uint64_t tick) {
    uint64_t r = t % tick;
    if (r == 0) return t;
    return t > UINT64_MAX - (tick - r) ? UINT64_MAX : t + (tick - r);
}

struct DriveResult {
    std::vector<Item *> popped;
    uint64_t empty_rounds = 0;
    uint64_t max_late = 0; /* ns after the deadline, over finite-time pops */
};

/* Until empty: now = next_expiry() rounded up to the tick (a loop waking on a
 * tick boundary), drain, and check each popped timer is less than one tick
 * late. At now == UINT64_MAX lateness is not measured (time ends there). */
DriveResult drive_by_ticks(Harness &h) {
    DriveResult out;
    while (h.size()) {
        uint64_t next = h.next_expiry();
        uint64_t now = std::max(h.now(), round_up(next, h.tick()));
        std::vector<Item *> got = h.drain(now);
        if (got.empty()) ++out.empty_rounds;
        cr_assert(out.empty_rounds <= h.size() * 12 + 12, "%s: no progress at now %llu", h.name(),
                  (unsigned long long)now);
        for (Item *it : got) {
            uint64_t late = now - it->timer.deadline;
            if (now != UINT64_MAX) {
                cr_assert(late < h.tick(),
                          "%s: deadline %llu popped at %llu: %llu ns late, tick %llu", h.name(),
                          (unsigned long long)it->timer.deadline, (unsigned long long)now,
                          (unsigned long long)late, (unsigned long long)h.tick());
                out.max_late = std::max(out.max_late, late);
            }
            out.popped.push_back(it);
        }
    }
    return out;
}

void expect_all(const Harness &h, std::vector<Item *> got, std::vector<Item> &items) {
    cr_assert(got.size() == items.size(), "%s: popped %zu of %zu", h.name(), got.size(),
              items.size());
    std::sort(got.begin(), got.end());
    for (size_t i = 0; i < got.size(); ++i)
        cr_assert(got[i] == &items[i], "%s: timer %d popped twice or never", h.name(), items[i].id);
}

/* Deadlines at start + 64^k ticks - 1 tick, - 1 ns, exactly, + 1 ns and + 1 tick
 * for every k that fits: each crosses a slot or level boundary of hwheel and,
 * from k = 2 on, a revolution of a 4096-slot wheel. */
std::vector<uint64_t> boundary_deadlines(uint64_t start, uint64_t tick) {
    std::vector<uint64_t> out;
    uint64_t base = start / tick * tick; /* the tick start is in */
    for (unsigned k = 0; k <= 11; ++k) {
        uint64_t ticks = k * 6 >= 64 ? UINT64_MAX : uint64_t{1} << (6 * k);
        uint64_t span = ticks > UINT64_MAX / tick ? UINT64_MAX : ticks * tick;
        uint64_t at = sat_add(base, span);
        const uint64_t around[] = {at - std::min(at, tick), at - std::min<uint64_t>(at, 1), at,
                                   sat_add(at, 1), sat_add(at, tick)};
        for (uint64_t d : around)
            if (d >= start) out.push_back(d);
    }
    out.push_back(start);
    out.push_back(sat_add(start, 1));
    out.push_back(sat_add(base, tick));
    out.push_back(UINT64_MAX - tick);
    out.push_back(UINT64_MAX - 1);
    out.push_back(UINT64_MAX);
    return out;
}

} // namespace

Test(wheels, fire_on_the_tick_boundary_never_early) {
    for (const char *name : kWheels)
        for (uint64_t start : kWheelStarts) {
            Harness h(name, start);
            std::vector<Item> items = make_items(3);
            uint64_t base = start / kTick * kTick;
            uint64_t d0 = base + 5 * kTick + 1; /* fire tick base + 6 */
            uint64_t d1 = base + 6 * kTick;     /* on a boundary: same fire tick */
            uint64_t d2 = base + 6 * kTick + 1; /* the next tick */
            h.insert(items[0], d0);
            h.insert(items[1], d1);
            h.insert(items[2], d2);
            /* At the boundary before d0 nothing, even though d0 is only 1 ns on. */
            cr_assert(h.drain(base + 5 * kTick).empty(), "%s: popped early", name);
            /* At d1's boundary: d0 and d1, not d2. */
            std::vector<Item *> got = h.drain(d1);
            cr_assert(got.size() == 2, "%s: %zu popped at the boundary", name, got.size());
            /* Within the tick, in start order. */
            cr_assert(got[0] == &items[0] && got[1] == &items[1], "%s: order within the tick",
                      name);
            /* d2 is due when its tick has passed, not at its deadline. */
            cr_assert(h.drain(d2).empty(), "%s: popped before its tick ended", name);
            cr_assert(h.drain(d1 + kTick - 1).empty(), "%s: popped before its tick ended", name);
            got = h.drain(d1 + kTick);
            cr_assert(got.size() == 1 && got[0] == &items[2], "%s: not popped at its tick's end",
                      name);
        }
}

Test(wheels, deadlines_at_every_level_boundary) {
    const uint64_t ticks[] = {kTick, 1, 3, 1000000007};
    for (const char *name : kWheels)
        for (uint64_t tick : ticks)
            for (uint64_t start : kWheelStarts) {
                Harness h(name, start, tl_timer_config{tick, 4096});
                std::vector<uint64_t> deadlines = boundary_deadlines(start, tick);
                std::vector<Item> items = make_items(deadlines.size());
                for (size_t i = 0; i < deadlines.size(); ++i) h.insert(items[i], deadlines[i]);
                DriveResult r = drive_by_ticks(h);
                expect_all(h, r.popped, items);
                cr_assert(r.empty_rounds == 0, "%s: %llu empty rounds without any cancel", name,
                          (unsigned long long)r.empty_rounds);
            }
}

Test(wheels, boundaries_inserted_one_at_a_time_as_now_moves) {
    /* Each boundary deadline alone in the wheel, with now already moved on:
       exercises the levels a timer is filed at from a non-zero cur. */
    for (const char *name : kWheels)
        for (uint64_t start : kWheelStarts) {
            Harness h(name, start);
            std::vector<uint64_t> deadlines = boundary_deadlines(start, kTick);
            std::vector<Item> items = make_items(1);
            uint64_t now = start;
            for (uint64_t d : deadlines) {
                if (d < now) continue;
                h.insert(items[0], d);
                DriveResult r = drive_by_ticks(h);
                cr_assert(r.popped.size() == 1 && r.empty_rounds == 0,
                          "%s: deadline %llu: %zu popped, %llu empty rounds", name,
                          (unsigned long long)d, r.popped.size(),
                          (unsigned long long)r.empty_rounds);
                now = h.now();
                if (now == UINT64_MAX) break;
            }
        }
}

Test(wheels, uint64_max_needs_now_uint64_max) {
    const uint64_t ticks[] = {kTick, 1, 7};
    for (const char *name : kWheels)
        for (uint64_t tick : ticks) {
            Harness h(name, kBigStart, tl_timer_config{tick, 4096});
            std::vector<Item> items = make_items(2);
            h.insert(items[0], UINT64_MAX);
            h.insert(items[1], UINT64_MAX - 1);
            cr_assert(h.drain(UINT64_MAX - 2).empty(), "%s: popped before the end", name);
            std::vector<Item *> got = h.drain(UINT64_MAX);
            cr_assert(got.size() == 2, "%s: tick %llu: %zu popped at UINT64_MAX", name,
                      (unsigned long long)tick, got.size());
            /* Time has ended; inserting there still works. */
            h.insert(items[0], UINT64_MAX);
            cr_assert(h.drain(UINT64_MAX).size() == 1);
        }
}

Test(wheels, deadline_zero_and_overdue_deadlines_are_due_at_once) {
    /* The harness refuses deadlines before now (a test bug there); here the
       vtable is driven directly, as a robustness check: an overdue timer is
       due at the next pop and next_expiry says so. */
    for (const char *name : kWheels) {
        const tl_timer_backend *b = tl_timer_backend_find(name);
        cr_assert(b);
        uint64_t now = kBigStart;
        void *self = b->create(&kConfig, now);
        cr_assert(self);
        /* Move the wheel on, so that cur is well past the overdue deadlines. */
        cr_assert(b->pop_expired(self, now + 10 * kTick + 3) == nullptr);
        now += 10 * kTick + 3;
        std::vector<Item> items = make_items(5);
        /* Overdue: every deadline whose tick has passed, up to now's tick. */
        const uint64_t deadlines[] = {0, 1, now - kTick, now / kTick * kTick};
        for (size_t i = 0; i < 4; ++i) {
            items[i].timer.deadline = deadlines[i];
            cr_assert(b->insert(self, &items[i].timer) == 0);
            cr_assert(tl_detail_timers_check(b, self) == nullptr, "%s: %s", name,
                      tl_detail_timers_check(b, self));
        }
        cr_assert(b->next_expiry(self) <= now, "%s: overdue but next_expiry %llu > now", name,
                  (unsigned long long)b->next_expiry(self));
        size_t n = 0;
        while (tl_timer *t = b->pop_expired(self, now)) {
            cr_assert(t->deadline <= now);
            ++n;
            cr_assert(tl_detail_timers_check(b, self) == nullptr, "%s: %s", name,
                      tl_detail_timers_check(b, self));
        }
        cr_assert(n == 4, "%s: %zu of 4 overdue timers popped", name, n);
        cr_assert(b->count(self) == 0 && b->next_expiry(self) == UINT64_MAX);
        /* A deadline inside now's tick, passed though the tick has not: due
           at once as well (a deadline in the past fires in the next
           iteration), and a timer of that tick whose deadline passed before
           it was filed comes out with it, first (ties in start order). */
        uint64_t end = (now / kTick + 1) * kTick;
        items[3].timer.deadline = now - 1;
        cr_assert(b->insert(self, &items[3].timer) == 0);
        cr_assert(b->pop_expired(self, now) == &items[3].timer, "%s: overdue in the tick", name);
        items[4].timer.deadline = end - 10; /* filed before its deadline passes */
        cr_assert(b->insert(self, &items[4].timer) == 0);
        cr_assert(b->pop_expired(self, end - 5) == nullptr, "%s: popped before its tick ended",
                  name);
        cr_assert(b->next_expiry(self) == end, "%s: next_expiry %llu, tick end %llu", name,
                  (unsigned long long)b->next_expiry(self), (unsigned long long)end);
        items[0].timer.deadline = end - 10; /* the same deadline, now passed */
        cr_assert(b->insert(self, &items[0].timer) == 0);
        cr_assert(b->next_expiry(self) <= end - 5, "%s: overdue but next_expiry %llu", name,
                  (unsigned long long)b->next_expiry(self));
        cr_assert(b->pop_expired(self, end - 5) == &items[4].timer, "%s: tie order", name);
        cr_assert(b->pop_expired(self, end - 5) == &items[0].timer, "%s: tie order", name);
        cr_assert(b->pop_expired(self, end - 5) == nullptr);
        cr_assert(tl_detail_timers_check(b, self) == nullptr, "%s: %s", name,
                  tl_detail_timers_check(b, self));
        now = end;
        /* A removed overdue timer leaves nothing behind. */
        items[0].timer.deadline = 0;
        cr_assert(b->insert(self, &items[0].timer) == 0);
        b->remove(self, &items[0].timer);
        cr_assert(b->count(self) == 0 && b->next_expiry(self) == UINT64_MAX);
        cr_assert(tl_detail_timers_check(b, self) == nullptr);
        b->destroy(self);
    }
}

namespace {

/* n timers spread uniformly over (start, start + span], then one jump of now
 * to start + span: a single drain must return all of them, in tick order (the
 * harness checks it), and leave a structure that passes its walker. Then the
 * same timers again, driven by the next_expiry/pop pairs, to count empty
 * rounds (none without cancels) and with a cancel of every tenth. */
void jump_with_many_timers(const char *name, uint64_t span, size_t n) {
    const uint64_t start = kBigStart;
    {
        Harness h(name, start);
        /* The walker is O(n): a few times per phase, once right after the jump. */
        h.walk_every(unsigned(n / 3 + 1));
        std::vector<Item> items = make_items(n);
        Rng rng{span ^ n};
        for (Item &it : items) h.insert(it, start + 1 + rng.below(span));
        std::vector<Item *> got = h.drain(start + span);
        expect_all(h, got, items);
    }
    {
        Harness h(name, start);
        h.walk_every(unsigned(n / 3 + 1));
        std::vector<Item> items = make_items(n);
        Rng rng{span + n};
        for (Item &it : items) h.insert(it, start + 1 + rng.below(span));
        size_t cancelled = 0;
        for (size_t i = 0; i < n; i += 10, ++cancelled) h.remove(items[i]);
        uint64_t empty = 0, pops = 0;
        while (h.size()) {
            uint64_t next = h.next_expiry();
            std::vector<Item *> got = h.drain(std::max(h.now(), next));
            pops += got.size();
            if (got.empty()) ++empty;
        }
        cr_log_info("%s: %zu timers over %llu s, %zu cancelled: %llu empty rounds in %llu pops",
                    name, n, (unsigned long long)(span / 1000000000), cancelled,
                    (unsigned long long)empty, (unsigned long long)pops);
        cr_assert(empty <= cancelled, "%s: %llu empty rounds for %zu cancels", name,
                  (unsigned long long)empty, cancelled);
    }
}

const uint64_t kHour = 3600ull * 1000000000;
const uint64_t kThirtyDays = 30 * 24 * kHour;

} // namespace

Test(wheels, hwheel_jump_one_hour_with_a_million_timers, .timeout = 300) {
    jump_with_many_timers("hwheel", kHour, 1000000);
}

Test(wheels, hwheel_jump_thirty_days_with_a_million_timers, .timeout = 300) {
    jump_with_many_timers("hwheel", kThirtyDays, 1000000);
}

Test(wheels, wheel_jump_one_hour_with_many_timers, .timeout = 300) {
    jump_with_many_timers("wheel", kHour, 100000);
}

Test(wheels, wheel_jump_thirty_days_with_many_timers, .timeout = 300) {
    /* Sparse timers over 630000 revolutions: the single wheel's known cost is
       O(occupied slots) per due tick, so fewer timers than for hwheel. */
    jump_with_many_timers("wheel", kThirtyDays, 20000);
}

Test(wheels, jumps_keep_timers_at_most_a_tick_late_at_every_level) {
    /* Deadlines on every scale up to 2^50 ns, driven by tick boundaries. */
    for (const char *name : kWheels)
        for (uint64_t start : kWheelStarts) {
            Harness h(name, start);
            std::vector<Item> items = make_items(3000);
            Rng rng{start + 5};
            for (Item &it : items)
                h.insert(it, start + rng.below(uint64_t{1} << rng.below(51)) + 1);
            DriveResult r = drive_by_ticks(h);
            expect_all(h, r.popped, items);
            cr_assert(r.empty_rounds == 0, "%s: %llu empty rounds", name,
                      (unsigned long long)r.empty_rounds);
        }
}

Test(wheels, reschedule_same_slot_later_and_earlier) {
    for (const char *name : kWheels)
        for (uint64_t start : kWheelStarts) {
            Harness h(name, start);
            std::vector<Item> items = make_items(8);
            uint64_t base = start / kTick * kTick;
            /* Neighbours, so the rescheduled timers share lists with others. */
            for (size_t i = 4; i < 8; ++i) h.insert(items[i], base + (i * 1000 + 17) * kTick + 5);
            h.insert(items[0], base + 10 * kTick + 5);
            h.insert(items[1], base + 5000 * kTick + 5);   /* hwheel level 2 */
            h.insert(items[2], base + 300000 * kTick + 5); /* level 3; beyond 4096 slots */
            h.insert(items[3], base + 7000 * kTick + 5);
            /* Same tick, other offset; same hwheel slot; same wheel slot one
               revolution on. */
            h.reschedule(items[0], base + 10 * kTick + 999);
            h.reschedule(items[1], base + 5001 * kTick + 1);
            h.reschedule(items[2], base + (300000 + 4096) * kTick + 5);
            /* Later, far beyond its slot (hwheel keeps it in place, lazily). */
            h.reschedule(items[3], base + 9000000 * kTick + 7);
            h.reschedule(items[1], base + 6000 * kTick + 2); /* later again */
            /* Earlier, below everything. */
            h.reschedule(items[2], base + 3 * kTick);
            DriveResult r = drive_by_ticks(h);
            expect_all(h, r.popped, items);
            cr_assert(r.popped.front() == &items[2], "%s: earlier reschedule not first", name);
            cr_assert(r.popped.back() == &items[3], "%s: later reschedule not last", name);
        }
}

Test(wheels, heartbeat_restarts_cost_few_empty_rounds) {
    /* The heartbeat: 20 timers with a 30 s timeout, each restarted every
       10 ms for 2 minutes of simulated time, while one other timer fires every
       second. No heartbeat may fire, and the wakeups that find nothing (the
       price of hwheel's lazy re-filing) stay a handful per timeout period. */
    for (const char *name : kWheels) {
        Harness h(name, kBigStart);
        h.walk_every(97);
        std::vector<Item> beats = make_items(20);
        std::vector<Item> other = make_items(1);
        const uint64_t timeout = 30000 * kTick;
        const uint64_t period = 10 * kTick;
        for (Item &it : beats) h.insert(it, kBigStart + timeout);
        h.insert(other[0], kBigStart + 1000 * kTick);
        uint64_t empty = 0, wakes = 0;
        uint64_t next_beat = kBigStart + period;
        while (h.now() < kBigStart + 120000 * kTick) {
            uint64_t expiry = h.next_expiry();
            uint64_t now = std::max(h.now(), std::min(expiry, next_beat));
            std::vector<Item *> got = h.drain(now);
            ++wakes;
            for (Item *it : got) {
                cr_assert(it == &other[0], "%s: heartbeat %d fired at %llu", name, it->id,
                          (unsigned long long)now);
                h.insert(*it, now + 1000 * kTick);
            }
            if (got.empty() && expiry < next_beat) ++empty;
            if (now >= next_beat) {
                for (Item &it : beats) h.reschedule(it, now + timeout);
                next_beat += period;
            }
        }
        cr_log_info("%s: %llu wakeups, %llu found nothing", name, (unsigned long long)wakes,
                    (unsigned long long)empty);
        cr_assert(empty <= 2 * 20 * (120 / 30 + 1), "%s: %llu empty wakeups", name,
                  (unsigned long long)empty);
        for (Item &it : beats) h.remove(it);
        h.remove(other[0]);
    }
}

Test(wheels, other_slot_counts) {
    const uint32_t slot_counts[] = {1, 2, 64, 256, 65536};
    for (uint32_t slots : slot_counts)
        for (uint64_t start : kWheelStarts) {
            Harness h("wheel", start, tl_timer_config{kTick, slots});
            /* The walker reads every slot: spare it on the largest wheel. */
            h.walk_every(slots > 4096 ? 257 : 1);
            std::vector<Item> items = make_items(2000);
            Rng rng{slots + start};
            /* Within a revolution, a few revolutions on, and far. */
            for (Item &it : items) {
                uint64_t r = rng.below(3);
                uint64_t range = r == 0 ? slots * kTick : r == 1 ? 5 * slots * kTick : kHour;
                h.insert(it, start + 1 + rng.below(range));
            }
            for (size_t i = 0; i < items.size(); i += 7) h.remove(items[i]);
            for (size_t i = 3; i < items.size(); i += 7)
                h.reschedule(items[i], h.now() + rng.below(3 * slots * kTick));
            std::vector<Item *> got;
            /* Uneven steps, then the progress rule for the rest. */
            const uint64_t sweep = 20 * uint64_t{std::min(slots, 256u)} * kTick;
            for (uint64_t now = start; now < start + sweep; now += rng.below(3 * kTick) + 1) {
                std::vector<Item *> batch = h.drain(now);
                got.insert(got.end(), batch.begin(), batch.end());
            }
            std::vector<Item *> rest = h.drain_all();
            got.insert(got.end(), rest.begin(), rest.end());
            size_t removed = (items.size() + 6) / 7;
            cr_assert(got.size() == items.size() - removed, "wheel_slots %u: %zu popped", slots,
                      got.size());
        }
}

Test(wheels, create_rejects_bad_configs) {
    const tl_timer_backend *wheel = tl_timer_backend_find("wheel");
    const tl_timer_backend *hwheel = tl_timer_backend_find("hwheel");
    cr_assert(wheel && hwheel);
    const uint32_t bad_slots[] = {0, 3, 100, 4095, 4097, 0x80000000u};
    for (uint32_t slots : bad_slots) {
        tl_timer_config cfg{kTick, slots};
        cr_assert(wheel->create(&cfg, 0) == nullptr, "wheel accepted %u slots", slots);
    }
    tl_timer_config no_tick{0, 4096};
    cr_assert(wheel->create(&no_tick, 0) == nullptr);
    cr_assert(hwheel->create(&no_tick, 0) == nullptr);
    /* hwheel ignores wheel_slots. */
    tl_timer_config odd{kTick, 3};
    void *self = hwheel->create(&odd, UINT64_MAX);
    cr_assert(self);
    cr_assert(hwheel->next_expiry(self) == UINT64_MAX);
    hwheel->destroy(self);
}

Test(wheels, invariant_walker_catches_misplaced_timers) {
    /* The walker is what every other test leans on: it must see a timer whose
       deadline was changed behind the backend's back, or whose slot record is
       wrong. */
    for (const char *name : kWheels) {
        const tl_timer_backend *b = tl_timer_backend_find(name);
        void *self = b->create(&kConfig, kBigStart);
        cr_assert(self);
        std::vector<Item> items = make_items(3);
        for (size_t i = 0; i < 3; ++i) {
            items[i].timer.deadline = kBigStart + (i + 1) * 5000 * kTick;
            cr_assert(b->insert(self, &items[i].timer) == 0);
        }
        cr_assert(tl_detail_timers_check(b, self) == nullptr);
        uint64_t saved = items[1].timer.deadline;
        items[1].timer.deadline = saved + (262144 + 77) * kTick; /* another slot in both */
        const char *broken = tl_detail_timers_check(b, self);
        cr_assert(broken != nullptr, "%s: walker missed a moved deadline", name);
        cr_log_info("%s: %s", name, broken);
        items[1].timer.deadline = saved;
        uintptr_t link = items[2].timer.link[2];
        items[2].timer.link[2] = link ^ 1;
        cr_assert(tl_detail_timers_check(b, self) != nullptr, "%s: walker missed a slot record",
                  name);
        items[2].timer.link[2] = link;
        cr_assert(tl_detail_timers_check(b, self) == nullptr);
        b->destroy(self);
    }
}

namespace {

struct LeewayDrive {
    size_t wakeups = 0;
    uint64_t cascades = 0; /* hwheel only */
};

/* Until empty: wake at next_expiry (no rounding), drain, and check that each
 * timer fires inside its window [deadline, latest] and, when grid_ticks is
 * set, on a multiple of that many ticks. Wake-ups count the drains that ran
 * a timer. */
LeewayDrive drive_by_expiry(Harness &h, uint64_t grid_ticks) {
    LeewayDrive out;
    size_t empty = 0;
    while (h.size()) {
        uint64_t now = std::max(h.now(), h.next_expiry());
        std::vector<Item *> got = h.drain(now);
        if (got.empty()) {
            cr_assert(++empty <= 64, "%s: no progress at %llu", h.name(), (unsigned long long)now);
            continue;
        }
        empty = 0;
        ++out.wakeups;
        for (Item *it : got) {
            /* The window, or the end of the deadline's tick if that is later. */
            uint64_t d = it->timer.deadline;
            uint64_t up = d % h.tick() ? h.tick() - d % h.tick() : 0;
            uint64_t bound = std::max(it->latest, d > UINT64_MAX - up ? UINT64_MAX : d + up);
            cr_assert(now <= bound, "%s: deadline %llu, window to %llu, fired at %llu: late",
                      h.name(), (unsigned long long)d, (unsigned long long)it->latest,
                      (unsigned long long)now);
            if (grid_ticks)
                cr_assert(now % (grid_ticks * h.tick()) == 0,
                          "%s: deadline %llu fired at %llu, off the %llu-tick grid", h.name(),
                          (unsigned long long)it->timer.deadline, (unsigned long long)now,
                          (unsigned long long)grid_ticks);
        }
    }
    if (std::string(h.name()) == "hwheel") out.cascades = tl_detail_hwheel_cascades(h.instance());
    return out;
}

} // namespace

Test(wheels, leeway_fires_inside_the_window_on_a_shared_grid) {
    /* 2,000 timers due 1-2 s from the start with leeway 10% of their delay
       (100-200 ms: grids of 64 or 128 ticks) fire on multiples of 64 ticks,
       at most ~1.2 s / 64 ms + 1 wake-ups, where leeway 0 takes one per
       occupied tick. */
    for (const char *name : kWheels)
        for (uint64_t start : kStarts) {
            LeewayDrive with[2];
            for (int leeway = 0; leeway < 2; ++leeway) {
                Harness h(name, start);
                h.walk_every(64);
                std::vector<Item> items = make_items(2000);
                Rng rng{7};
                for (Item &it : items) {
                    uint64_t delay = 1000 * kTick + rng.below(1000 * kTick);
                    h.insert(it, start + delay, leeway ? delay / 10 : 0);
                }
                with[leeway] = drive_by_expiry(h, leeway ? 64 : 0);
            }
            cr_log_info("%s, start %llu: %zu wake-ups with leeway 10%%, %zu without", name,
                        (unsigned long long)start, with[1].wakeups, with[0].wakeups);
            cr_assert(with[1].wakeups <= 1200 / 64 + 1, "%s: %zu wake-ups with leeway", name,
                      with[1].wakeups);
            cr_assert(with[0].wakeups >= 10 * with[1].wakeups,
                      "%s: %zu wake-ups without leeway, %zu with: no coalescing", name,
                      with[0].wakeups, with[1].wakeups);
        }
}

Test(wheels, hwheel_leeway_covering_the_level_never_cascades) {
    /* At a start whose low 36 bits of ticks are zero, a timer due d ticks on
       with 64^L <= d < 64^(L+1) files at level L; a leeway of 64^L ticks puts
       its fire tick at the start of its level-L slot (or of level L + 1's
       slot 1), so it leaves from there. Without leeway the same timers
       cascade down to level 0. */
    for (uint64_t start : {uint64_t{0}, (uint64_t{3} << 36) * kTick}) {
        uint64_t cascades[2];
        for (int leeway = 0; leeway < 2; ++leeway) {
            Harness h("hwheel", start);
            h.walk_every(64);
            std::vector<Item> items = make_items(4 * 250);
            Rng rng{11};
            for (size_t i = 0; i < items.size(); ++i) {
                unsigned level = 1 + unsigned(i / 250);
                uint64_t span = uint64_t{1} << (6 * level);
                uint64_t d = span + rng.below(63 * span);
                h.insert(items[i], start + d * kTick, leeway ? span * kTick : 0);
            }
            cascades[leeway] = drive_by_expiry(h, leeway ? 64 : 0).cascades;
        }
        cr_log_info("hwheel, start %llu: %llu cascades without leeway, %llu with",
                    (unsigned long long)start, (unsigned long long)cascades[0],
                    (unsigned long long)cascades[1]);
        cr_assert(cascades[1] == 0, "hwheel: %llu timers cascaded with leeway",
                  (unsigned long long)cascades[1]);
        cr_assert(cascades[0] >= 1000,
                  "hwheel: only %llu cascades without leeway: the counter "
                  "does not count",
                  (unsigned long long)cascades[0]);
    }
}

Test(wheels, leeway_grid_survives_a_leeway_change_inside) {
    /* The loop may set a new leeway on a timer inside; the wheel keeps the
       grid it derived at insert, so the timer still fires in its window (the
       harness's latest, captured at insert), and a reschedule takes the new
       leeway. */
    for (const char *name : kWheels) {
        Harness h(name, kBigStart);
        std::vector<Item> items = make_items(3);
        uint64_t base = kBigStart / kTick * kTick;
        h.insert(items[0], base + 1000 * kTick + 1, 500 * kTick); /* grid 256 */
        h.insert(items[1], base + 1000 * kTick + 1, 0);
        h.insert(items[2], base + 3000 * kTick + 1, 0);
        Harness::set_leeway(items[0], 0);
        Harness::set_leeway(items[1], TL_TIMER_LEEWAY_MAX);
        h.reschedule(items[2], base + 2000 * kTick + 1); /* takes leeway 0 */
        Harness::set_leeway(items[2], 900 * kTick);
        drive_by_expiry(h, 0);
    }
}

Test(wheels, leeway_with_other_ticks_slot_counts_and_the_end_of_time) {
    /* Grids at ticks of 1 ns, 3 ns and about 1 s, on 1 and 64 slots, and
       deadlines + leeways up to UINT64_MAX (the grid is clipped there so
       that a fire tick's time never wraps): drained the loop's way, with
       reschedules that change a timer's leeway, the walker after every
       operation, never early and never past the window plus a tick. */
    struct Case {
        const char *name;
        tl_timer_config cfg;
    };
    const Case cases[] = {{"wheel", {1, 1}},  {"wheel", {3, 64}}, {"wheel", {1000000007, 2}},
                          {"hwheel", {1, 0}}, {"hwheel", {3, 0}}, {"hwheel", {1000000007, 0}}};
    const uint64_t starts[] = {0, kBigStart, UINT64_MAX - (uint64_t{1} << 40)};
    for (const Case &c : cases)
        for (uint64_t start : starts) {
            Harness h(c.name, start, c.cfg);
            const uint64_t tick = h.tick();
            std::vector<Item> items = make_items(600);
            Rng rng{start ^ tick};
            auto leeway = [&] {
                uint64_t r = rng.below(5);
                if (r == 0) return uint64_t{0};
                if (r == 1) return rng.below(3 * tick) + 1;
                if (r == 2) return rng.below(200 * tick) + 1;
                if (r == 3) return rng.below(uint64_t{1} << 44) + 1;
                return TL_TIMER_LEEWAY_MAX;
            };
            auto deadline = [&](uint64_t from) {
                uint64_t room = UINT64_MAX - from;
                uint64_t r = rng.below(4);
                uint64_t span = r == 0 ? 100 * tick : r == 1 ? uint64_t{1} << 30 : room;
                return from + rng.below(std::min(span, room) + 1);
            };
            size_t used = 0;
            for (; used < 400; ++used) h.insert(items[used], deadline(start), leeway());
            h.drain_by_wakeup([&](uint64_t now, const std::vector<Item *> &got) {
                if (now == UINT64_MAX) return; /* time ends: nothing can be started later */
                if (used < items.size() && rng.below(2) == 0)
                    h.insert(items[used++], deadline(now), leeway());
                if (!got.empty() && rng.below(3) == 0) {
                    Item &again = *got[0];
                    h.insert(again, deadline(now), leeway());
                    Harness::set_leeway(again, leeway());
                    h.reschedule(again, deadline(now));
                }
            });
            cr_assert(h.size() == 0, "%s tick %llu: %zu timers left", c.name,
                      (unsigned long long)tick, h.size());
        }
}
