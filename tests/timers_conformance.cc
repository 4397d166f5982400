/* SPDX-License-Identifier: MIT */
/*
 * Timer-backend conformance: the rules of timer_backend.h, checked the same
 * way for every registered backend by driving its vtable directly with
 * explicit `now` values (no clock, no loop), plus the registry.
 *
 * Backends with TL_TIMER_CAP_EXACT (the heaps) must pop in exact (deadline,
 * insertion) order;
 * every other backend in tick order (ceil(deadline / tick) non-decreasing).
 * All must never pop early, must pop everything due (deadline <= now for
 * heaps, <= now rounded down to a tick for the others) before answering NULL,
 * and must reach every timer through the next_expiry/pop_expired pair with a
 * bounded number of empty rounds. The backend's invariant walker runs after
 * every operation.
 *
 * Leeway: whatever a backend does with it, a timer is never handed out before
 * its deadline and, when the driver wakes at next_wakeup() (next_expiry()
 * for a backend without the op), never later than deadline + leeway + one
 * tick (the harness's drain_by_wakeup).
 *
 * The registry and a custom backend: timers_registry.cc.
 */
#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "backend_params.h"
#include "timer_harness.h"

#include <tickloop/tickloop.h>

namespace {

/* The order a drain must produce: exact (deadline, seq) for exact backends.
 * For the others the harness already checked tick order; among equal
 * deadlines every built-in backend keeps start order (seq), which a stable
 * sort by deadline alone preserves for the comparison. */
void expect_popped(const Harness &h, std::vector<Item *> got, std::vector<Item *> want) {
    auto by_key = [](const Item *a, const Item *b) {
        return a->timer.deadline != b->timer.deadline ? a->timer.deadline < b->timer.deadline
                                                      : a->seq < b->seq;
    };
    std::sort(want.begin(), want.end(), by_key);
    if (!h.exact()) {
        std::stable_sort(got.begin(), got.end(), [](const Item *a, const Item *b) {
            return a->timer.deadline < b->timer.deadline;
        });
    }
    cr_assert(got.size() == want.size(), "%s: popped %zu timers, expected %zu", h.name(),
              got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i)
        cr_assert(got[i] == want[i],
                  "%s: pop %zu is timer %d (deadline %llu), expected timer %d (deadline %llu)",
                  h.name(), i, got[i]->id, (unsigned long long)got[i]->timer.deadline, want[i]->id,
                  (unsigned long long)want[i]->timer.deadline);
}

std::vector<Item *> pointers(std::vector<Item> &items) {
    std::vector<Item *> out;
    for (Item &it : items) out.push_back(&it);
    return out;
}

/* Positions of a five-timer structure a remove or reschedule can hit. */
enum Position { kHead, kMiddle, kLast, kOnly };
const Position kPositions[] = {kHead, kMiddle, kLast, kOnly};
const char *const kPositionNames[] = {"head", "middle", "last", "only"};

/* Fills h with timers at distinct deadlines start + (i + 1) * 3.5 ticks
 * (one for kOnly) and returns the index of the one at position pos. */
size_t fill_for(Harness &h, std::vector<Item> &items, Position pos) {
    size_t n = pos == kOnly ? 1 : items.size();
    for (size_t i = 0; i < n; ++i) h.insert(items[i], h.now() + (i + 1) * (7 * kTick / 2));
    switch (pos) {
    case kHead:
        return 0;
    case kMiddle:
        return n / 2;
    case kLast:
        return n - 1;
    case kOnly:
        return 0;
    }
    return 0;
}

} // namespace

BACKEND_TEST(timers, empty_backend_has_no_expiry) {
    for (uint64_t start : kStarts) {
        Harness h(p->name, start);
        cr_assert(h.next_expiry() == UINT64_MAX, "%s: empty next_expiry", p->name);
        cr_assert(h.pop(start) == nullptr, "%s: pop on empty", p->name);
        cr_assert(h.pop(start + 1000 * kTick + 7) == nullptr, "%s: pop on empty", p->name);
        cr_assert(h.pop(UINT64_MAX) == nullptr, "%s: pop(UINT64_MAX) on empty", p->name);
        cr_assert(h.next_expiry() == UINT64_MAX, "%s: empty next_expiry after pops", p->name);
    }
}

BACKEND_TEST(timers, pops_in_deadline_order) {
    for (uint64_t start : kStarts) {
        Harness h(p->name, start);
        std::vector<Item> items = make_items(300);
        Rng rng{42};
        /* Deadlines spread over 500 ticks with sub-tick offsets, in random order. */
        for (Item &it : items) h.insert(it, start + rng.below(500 * kTick));
        std::vector<Item *> got = h.drain_all();
        expect_popped(h, got, pointers(items));
    }
}

BACKEND_TEST(timers, equal_deadlines_fire_in_start_order) {
    for (uint64_t start : kStarts) {
        Harness h(p->name, start);
        std::vector<Item> items = make_items(60);
        const uint64_t same = start + 10 * kTick + 123;
        /* Every third timer goes elsewhere, so the ties are interleaved with
           other inserts. */
        for (size_t i = 0; i < items.size(); ++i)
            h.insert(items[i], i % 3 == 2 ? start + (i % 20) * kTick + 5 : same);
        std::vector<Item *> got = h.drain_all();
        expect_popped(h, got, pointers(items));
        /* Among equal deadlines, the order of insertion, on every backend. */
        int last = -1;
        for (Item *it : got)
            if (it->timer.deadline == same) {
                cr_assert(it->id > last, "%s: tie order broken: timer %d after %d", p->name, it->id,
                          last);
                last = it->id;
            }
    }
}

BACKEND_TEST(timers, remove_at_every_position) {
    for (uint64_t start : kStarts)
        for (Position pos : kPositions) {
            Harness h(p->name, start);
            std::vector<Item> items = make_items(5);
            size_t victim = fill_for(h, items, pos);
            h.remove(items[victim]);
            std::vector<Item *> want;
            for (size_t i = 0; i < (pos == kOnly ? 1 : items.size()); ++i)
                if (i != victim) want.push_back(&items[i]);
            cr_assert(h.size() == want.size(), "%s: remove %s", p->name, kPositionNames[pos]);
            expect_popped(h, h.drain_all(), want);
        }
}

BACKEND_TEST(timers, remove_all_then_reuse) {
    for (uint64_t start : kStarts) {
        Harness h(p->name, start);
        std::vector<Item> items = make_items(200);
        Rng rng{7};
        for (Item &it : items) h.insert(it, start + rng.below(3000 * kTick));
        /* Remove in an order unrelated to the deadlines. */
        for (size_t i = 0; i < items.size(); i += 2) h.remove(items[i]);
        for (size_t i = 1; i < items.size(); i += 2) h.remove(items[i]);
        cr_assert(h.next_expiry() == UINT64_MAX, "%s: emptied by removes", p->name);
        /* The same handles go back in after removal. */
        for (Item &it : items) h.insert(it, start + rng.below(3000 * kTick));
        expect_popped(h, h.drain_all(), pointers(items));
    }
}

BACKEND_TEST(timers, reschedule_earlier_and_later_at_every_position) {
    for (uint64_t start : kStarts)
        for (Position pos : kPositions)
            for (int later = 0; later < 2; ++later) {
                Harness h(p->name, start);
                std::vector<Item> items = make_items(5);
                size_t target = fill_for(h, items, pos);
                uint64_t old = items[target].timer.deadline;
                /* Later: past every other timer; earlier: before every other. */
                uint64_t deadline = later ? old + 40 * kTick + 1 : start + kTick / 3;
                h.reschedule(items[target], deadline);
                std::vector<Item *> want;
                for (size_t i = 0; i < (pos == kOnly ? 1 : items.size()); ++i)
                    want.push_back(&items[i]);
                std::vector<Item *> got = h.drain_all();
                expect_popped(h, got, want);
                cr_assert(
                    h.exact() || pos == kOnly ||
                        (later ? got.back() == &items[target] : got.front() == &items[target]),
                    "%s: rescheduled %s timer %s not popped %s", p->name, kPositionNames[pos],
                    later ? "later" : "earlier", later ? "last" : "first");
            }
}

BACKEND_TEST(timers, reschedule_to_same_deadline_counts_as_new_start) {
    for (uint64_t start : kStarts) {
        Harness h(p->name, start);
        std::vector<Item> items = make_items(4);
        const uint64_t same = start + 5 * kTick + 17;
        for (Item &it : items) h.insert(it, same);
        h.reschedule(items[0], same); /* now last among the ties */
        h.reschedule(items[2], same);
        std::vector<Item *> got = h.drain_all();
        expect_popped(h, got, pointers(items));
        const int order[] = {1, 3, 0, 2};
        for (size_t i = 0; i < 4; ++i)
            cr_assert(got[i]->id == order[i], "%s: tie %zu is timer %d, expected %d", p->name, i,
                      got[i]->id, order[i]);
    }
}

BACKEND_TEST(timers, equal_deadlines_keep_start_order_as_time_passes) {
    /* Ties made while time moves on: timers started on a far deadline (a
       wheel's later rounds, hwheel's upper levels, cascaded on the way),
       others started on it when it is near, timers restarted onto it from
       earlier and later deadlines (a wheel leaves those in place or lazy),
       some restarted away again. Popped in start order among equal deadlines
       on every backend; a restart counts as a start. */
    for (uint64_t start : kStarts) {
        Harness h(p->name, start);
        std::vector<Item> items = make_items(600);
        Rng rng{2024};
        const uint64_t tie = start + 5000 * kTick + 321;
        std::vector<Item *> inside, popped;
        size_t next = 0;
        auto fresh_deadline = [&](uint64_t now) { return now + 1 + rng.below(7000 * kTick); };
        for (uint64_t now = start; now < tie - 2 * kTick;) {
            for (int op = 0; op < 8 && next < items.size(); ++op) {
                switch (rng.below(4)) {
                case 0:
                    h.insert(items[next], tie);
                    inside.push_back(&items[next++]);
                    break;
                case 1:
                    h.insert(items[next], fresh_deadline(now));
                    inside.push_back(&items[next++]);
                    break;
                default:
                    if (inside.empty()) break;
                    Item *it = inside[rng.below(inside.size())];
                    h.reschedule(*it, rng.below(3) ? tie : fresh_deadline(now));
                    break;
                }
            }
            now += 1 + rng.below(100 * kTick);
            if (now >= tie - 2 * kTick) now = tie - 2 * kTick;
            for (Item *it : h.drain(now)) {
                popped.push_back(it);
                inside.erase(std::find(inside.begin(), inside.end(), it));
            }
        }
        for (Item *it : h.drain_all()) popped.push_back(it);
        std::vector<Item *> want;
        for (size_t i = 0; i < next; ++i) want.push_back(&items[i]);
        size_t ties = 0;
        for (Item *it : want) ties += it->timer.deadline == tie;
        cr_assert(ties >= 50, "%s: only %zu ties made: the test does not test", p->name, ties);
        expect_popped(h, popped, want);
    }
}

BACKEND_TEST(timers, reschedule_repeatedly_while_others_expire) {
    /* The heartbeat pattern: one timer pushed back again and again while the
       others come due around it. */
    for (uint64_t start : kStarts) {
        Harness h(p->name, start);
        std::vector<Item> items = make_items(41);
        Item &heartbeat = items[40];
        for (size_t i = 0; i < 40; ++i) h.insert(items[i], start + (i + 1) * kTick + 11);
        h.insert(heartbeat, start + 2 * kTick);
        std::vector<Item *> got;
        for (uint64_t now = start; h.size() > 1; now += kTick / 2 + 3) {
            std::vector<Item *> batch = h.drain(now);
            for (Item *it : batch)
                cr_assert(it != &heartbeat, "%s: heartbeat fired at %llu (deadline %llu)", p->name,
                          (unsigned long long)now, (unsigned long long)heartbeat.timer.deadline);
            got.insert(got.end(), batch.begin(), batch.end());
            h.reschedule(heartbeat, now + 3 * kTick);
        }
        h.remove(heartbeat);
        std::vector<Item *> rest = h.drain_all();
        got.insert(got.end(), rest.begin(), rest.end());
        std::vector<Item *> want = pointers(items);
        want.pop_back();
        expect_popped(h, got, want);
    }
}

BACKEND_TEST(timers, far_deadlines_are_reached) {
    for (uint64_t start : kStarts) {
        Harness h(p->name, start);
        /* start + 2^k for every k, and the largest finite deadlines. */
        std::vector<Item> items = make_items(66);
        for (size_t k = 0; k < 64; ++k) h.insert(items[k], sat_add(start, uint64_t{1} << k));
        h.insert(items[64], UINT64_MAX - 1);
        h.insert(items[65], UINT64_MAX - kTick);
        expect_popped(h, h.drain_all(), pointers(items));
    }
}

BACKEND_TEST(timers, deadline_uint64_max_is_never_early) {
    for (uint64_t start : kStarts) {
        Harness h(p->name, start);
        std::vector<Item> items = make_items(3);
        h.insert(items[0], UINT64_MAX);
        h.insert(items[1], UINT64_MAX);
        h.insert(items[2], start + kTick);
        /* Far past everything else, still before UINT64_MAX: only items[2]. */
        std::vector<Item *> got = h.drain(UINT64_MAX - 1);
        cr_assert(got.size() == 1 && got[0] == &items[2], "%s: pop(UINT64_MAX - 1) returned %zu",
                  p->name, got.size());
        /* The progress rule still reaches them, at now == UINT64_MAX. */
        std::vector<Item *> rest = h.drain_all();
        cr_assert(rest.size() == 2, "%s: %zu of 2 UINT64_MAX timers popped", p->name, rest.size());
        if (h.exact())
            cr_assert(rest[0] == &items[0] && rest[1] == &items[1], "%s: tie order at UINT64_MAX",
                      p->name);
    }
}

BACKEND_TEST(timers, count_follows_every_operation) {
    Harness h(p->name, kBigStart);
    std::vector<Item> items = make_items(100);
    /* The harness compares count() with its own record after each call. */
    for (size_t i = 0; i < items.size(); ++i) h.insert(items[i], kBigStart + i * kTick + 1);
    for (size_t i = 0; i < 10; ++i) h.remove(items[i * 10]);
    h.reschedule(items[1], kBigStart + 500 * kTick);
    std::vector<Item *> got = h.drain(kBigStart + 50 * kTick + 5);
    cr_assert(got.size() >= 40, "%s: %zu popped by now + 50 ticks", p->name, got.size());
    cr_assert(h.drain_all().size() == 90 - got.size());
}

BACKEND_TEST(timers, next_expiry_tracks_the_earliest_deadline) {
    for (uint64_t start : kStarts) {
        Harness h(p->name, start);
        std::vector<Item> items = make_items(4);
        /* The harness checks next_expiry after every operation: exact for
           exact backends, never later than the earliest deadline for the others. */
        h.insert(items[0], start + 900 * kTick + 9);
        h.insert(items[1], start + 30 * kTick + 1);
        h.insert(items[2], start + 2 * kTick);
        h.insert(items[3], start + 70000 * kTick + 3);
        h.remove(items[2]);
        h.reschedule(items[1], start + 80000 * kTick);
        h.reschedule(items[3], start + kTick / 2);
        h.remove(items[3]);
        expect_popped(h, h.drain_all(), {&items[0], &items[1]});
    }
}

BACKEND_TEST(timers, pop_returns_every_due_timer_and_none_early) {
    for (uint64_t start : kStarts) {
        Harness h(p->name, start);
        std::vector<Item> items = make_items(1000);
        Rng rng{99};
        for (Item &it : items) {
            /* Mostly near, some on the tick, some far. */
            uint64_t r = rng.below(10);
            uint64_t delta = r < 6   ? rng.below(200 * kTick)
                             : r < 8 ? (rng.below(200) + 1) * kTick
                                     : rng.below(uint64_t{1} << 40);
            h.insert(it, start + delta);
        }
        /* Sweep now in uneven, unaligned steps; the harness checks each drain. */
        const uint64_t steps[] = {kTick / 3, 1, kTick, 7 * kTick + 500, 999, 64 * kTick + 1};
        std::vector<Item *> got;
        uint64_t now = start;
        for (size_t i = 0; now < start + 1200 * kTick; ++i) {
            now += steps[i % 6];
            std::vector<Item *> batch = h.drain(now);
            got.insert(got.end(), batch.begin(), batch.end());
        }
        std::vector<Item *> rest = h.drain_all();
        got.insert(got.end(), rest.begin(), rest.end());
        expect_popped(h, got, pointers(items));
    }
}

namespace {

/* 500 timers with deadlines on every scale from 1 ns to 2^63 ns, drained by
   the progress rule alone. */
void check_progress(const char *name, tl_timer_config cfg) {
    for (uint64_t start : kStarts) {
        Harness h(name, start, cfg);
        std::vector<Item> items = make_items(500);
        Rng rng{start + cfg.tick_ns};
        for (Item &it : items) {
            unsigned scale = (unsigned)rng.below(64);
            h.insert(it, sat_add(start, rng.below(uint64_t{1} << scale) + 1));
        }
        expect_popped(h, h.drain_all(), pointers(items));
    }
}

} // namespace

BACKEND_TEST(timers, progress_reaches_every_timer) {
    check_progress(p->name, kConfig);
}

BACKEND_TEST(timers, progress_with_other_tick_and_slot_sizes) {
    const tl_timer_config configs[] = {{1, 64}, {1000, 256}, {3 * kTick, 4096}, {kTick, 65536}};
    for (const tl_timer_config &cfg : configs) check_progress(p->name, cfg);
}

BACKEND_TEST(timers, popped_timer_can_be_inserted_again) {
    /* The loop re-arms a repeating timer right after popping it. */
    Harness h(p->name, kBigStart);
    std::vector<Item> items = make_items(3);
    for (size_t i = 0; i < 3; ++i) h.insert(items[i], kBigStart + (i + 1) * kTick);
    uint64_t now = kBigStart;
    for (int round = 0; round < 50; ++round) {
        now += kTick;
        for (Item *it : h.drain(now)) h.insert(*it, now + 3 * kTick);
    }
    cr_assert(h.size() == 3, "%s: %zu timers left", p->name, h.size());
    h.drain_all();
}

/* Timers with random deadlines and leeways (a third 0), drained the way the
   loop does with leeway; each wake-up sometimes starts more or reschedules
   one, with a leeway that may differ from the one it had. */
void check_leeway_window(const char *name, uint64_t start, uint64_t seed) {
    Harness h(name, start);
    const uint64_t tick = h.tick();
    std::vector<Item> items = make_items(3000);
    Rng rng{seed};
    auto leeway = [&] {
        uint64_t r = rng.below(6);
        if (r < 2) return uint64_t{0};
        if (r < 4) return rng.below(tick) + 1;
        if (r < 5) return rng.below(30 * tick) + 1;
        return rng.below(uint64_t{1} << 36) + 1;
    };
    size_t used = 0;
    for (; used < 2000; ++used) {
        uint64_t d = start + (rng.below(4) ? rng.below(300 * tick) : rng.below(uint64_t{1} << 38));
        h.insert(items[used], d, leeway());
    }
    size_t wakeups = h.drain_by_wakeup([&](uint64_t now, const std::vector<Item *> &got) {
        if (used < items.size() && rng.below(3) == 0)
            h.insert(items[used++], now + rng.below(50 * tick), leeway());
        if (!got.empty() && rng.below(4) == 0) {
            Item &again = *got[0];
            h.insert(again, now + rng.below(20 * tick) + 1, leeway());
            if (rng.below(2)) {
                Harness::set_leeway(again, leeway());
                h.reschedule(again, now + rng.below(40 * tick));
            }
        }
    });
    cr_assert(wakeups > 0 && h.size() == 0, "%s: %zu timers left", name, h.size());
}

BACKEND_TEST(timers, leeway_never_early_nor_past_its_window_plus_a_tick) {
    for (uint64_t start : kStarts)
        for (uint64_t seed = 1; seed <= 3; ++seed) check_leeway_window(p->name, start, seed);
}

BACKEND_TEST(timers, leeway_bits_changed_inside_do_not_matter) {
    /* The loop may set a new leeway on a running timer; the backend keeps
       what it derived at insert, and remove and pop still find the timer. */
    Harness h(p->name, kBigStart);
    std::vector<Item> items = make_items(200);
    for (size_t i = 0; i < items.size(); ++i)
        h.insert(items[i], kBigStart + (i % 37) * kTick, i % 3 ? (i % 11) * kTick : 0);
    for (size_t i = 0; i < items.size(); ++i)
        Harness::set_leeway(items[i], i % 2 ? 0 : TL_TIMER_LEEWAY_MAX);
    for (size_t i = 0; i < items.size(); i += 5) h.remove(items[i]);
    for (size_t i = 1; i < items.size(); i += 7)
        if (i % 5) h.reschedule(items[i], kBigStart + 3 * kTick);
    h.drain_by_wakeup([](uint64_t, const std::vector<Item *> &) {});
}

/* A server's few fixed timeouts: every start draws one of 51 deadlines, so
   the starts of each deadline are interleaved with the others'. Stops and
   restarts (also to one of the 51) in between; pops keep (deadline, start
   order). */
BACKEND_TEST(timers, interleaved_equal_deadlines_keep_start_order) {
    for (uint64_t start : kStarts) {
        Harness h(p->name, start);
        h.walk_every(16);
        std::vector<Item> items = make_items(3000);
        Rng rng{51};
        auto deadline = [&] { return start + 100 * kTick + rng.below(51) * 3 * kTick; };
        std::vector<bool> removed(items.size());
        for (Item &it : items) {
            h.insert(it, deadline());
            size_t k = rng.below((uint64_t)it.id + 1);
            if (it.id % 7 == 3 && !removed[k]) h.reschedule(items[k], deadline());
            if (it.id % 11 == 5) {
                h.remove(items[it.id - 5]);
                removed[it.id - 5] = true;
            }
        }
        h.walk("the starts");
        std::vector<Item *> got = h.drain_all();
        std::vector<Item *> want;
        for (Item &it : items)
            if (!removed[it.id]) want.push_back(&it);
        expect_popped(h, got, want);
    }
}

/* A timer with leeway of deadline d, started (or moved to d) after a run of
   d, is newer than that run: a later start of d must not join the run, or it
   would pop before the leeway timer. A timer of another deadline in between
   keeps the run from being the last one created. */
BACKEND_TEST(timers, leeway_timer_between_ties_keeps_later_starts_behind_it) {
    for (int variant = 0; variant < 4; ++variant) {
        Harness h(p->name, kBigStart);
        std::vector<Item> items = make_items(6);
        const uint64_t d = kBigStart + 10 * kTick, e = d + 5 * kTick;
        h.insert(items[0], d);
        h.insert(items[1], e);
        switch (variant) {
        case 0: /* started with leeway */
            h.insert(items[2], d, 2 * kTick);
            break;
        case 1: /* a leeway timer moved to d */
            h.insert(items[2], e, 2 * kTick);
            h.insert(items[5], e + kTick);
            h.reschedule(items[2], d);
            break;
        case 2: /* a timer given leeway, moved from the run heap to d */
            h.insert(items[2], e);
            h.insert(items[5], e + kTick);
            Harness::set_leeway(items[2], 2 * kTick);
            h.reschedule(items[2], d);
            break;
        case 3: /* the same, its leeway taken away again: it joins d's run */
            h.insert(items[2], e, 2 * kTick);
            h.insert(items[5], e + kTick);
            Harness::set_leeway(items[2], 0);
            h.reschedule(items[2], d);
            break;
        }
        h.insert(items[3], d);
        h.insert(items[4], d);
        std::vector<Item *> got = h.drain_all();
        std::vector<Item *> want;
        for (Item &it : items)
            if (it.timer.deadline) want.push_back(&it);
        expect_popped(h, got, want);
    }
}

/* One timer with leeway among many without: the walker holds the memory for
   leeway timers to what they need, not to the size of everything inside.
   Moving many timers into leeway and back out then leaves it bounded by the
   most that had leeway at once. */
BACKEND_TEST(timers, leeway_memory_follows_the_leeway_timers) {
    Harness h(p->name, kBigStart);
    h.walk_every(1u << 30);
    std::vector<Item> items = make_items(20001);
    Rng rng{7};
    for (size_t i = 0; i < 20000; ++i) h.insert(items[i], kBigStart + rng.below(500 * kTick));
    h.insert(items[20000], kBigStart + 3 * kTick, kTick);
    h.walk("one leeway timer among 20000");
    for (size_t i = 0; i < 300; ++i) {
        Harness::set_leeway(items[i], kTick);
        h.reschedule(items[i], kBigStart + rng.below(500 * kTick));
    }
    h.walk("300 timers moved into leeway");
    for (size_t i = 0; i < 300; ++i) {
        Harness::set_leeway(items[i], 0);
        h.reschedule(items[i], kBigStart + rng.below(500 * kTick));
    }
    h.walk("and out again");
    h.walk_every(4096);
    h.drain_by_wakeup([](uint64_t, const std::vector<Item *> &) {});
}
