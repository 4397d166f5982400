/* SPDX-License-Identifier: MIT */
/*
 * Randomized comparison of every registered timer backend against a simple
 * reference model (wahern/timeout's check_randomized): thousands of live
 * timers, hundreds of thousands of random operations with fixed seeds.
 *
 * The model is the harness's ordered record of (deadline, insertion) pairs
 * (timer_harness.h). Heaps must pop exactly the model's earliest timer; other
 * backends must pop, by the end of each drain, every timer the model says is
 * due at now rounded down to a tick, never one with deadline > now, in
 * non-decreasing tick order. Nothing is lost: every pop is a timer the model
 * holds, and at the end both are empty (the final drain goes on to
 * UINT64_MAX). The invariant walker runs after every operation in the small
 * run and every 64 in the large one, where it would dominate the time.
 *
 * The tie runs draw deadlines from a few instants ahead (a batch sharing
 * one, or 51 drawn at random: interleaved), so equal deadlines are common.
 * The leeway runs give timers random leeways (a third of them 0), sometimes
 * change a timer's leeway on reschedule (moving it between a heap's leeway
 * and no-leeway parts), and sometimes rewrite the leeway bits of a timer
 * while it is inside without telling the backend, which must not care: it
 * keeps what it derived at insert. The harness checks next_wakeup() against
 * the model (the least deadline + leeway captured at insert or reschedule);
 * backends with TL_TIMER_CAP_EXACT and a next_wakeup op must report exactly
 * that, since a heap that keeps leeway has no reason to wake earlier (the
 * first insert of a leeway run has a leeway, so the heaps' room for leeway
 * timers exists before any reschedule could want it).
 */
#include <cstdint>
#include <vector>

#include "backend_params.h"
#include "timer_harness.h"

namespace {

struct Run {
    uint64_t seed;
    uint64_t start;
    size_t max_live;
    size_t operations;
    unsigned walk_every;
    bool leeway = false;
    bool ties = false;        /* deadlines from 64 instants ahead: many ties */
    bool interleaved = false; /* deadlines drawn from 51 instants ahead       */
    bool later = false;       /* restarts mostly later: the heaps' lazy path  */
    bool clustered = false;   /* most deadlines within 64 ticks of one instant */
    bool aligned = false;     /* clustered at the start of a 4096-tick slot    */
};

/* Live timers, with O(1) random choice and removal. */
class LiveSet {
public:
    explicit LiveSet(size_t n) : pos_(n, SIZE_MAX) {}
    size_t size() const { return live_.size(); }
    bool contains(size_t i) const { return pos_[i] != SIZE_MAX; }
    size_t at(size_t k) const { return live_[k]; }
    void add(size_t i) {
        pos_[i] = live_.size();
        live_.push_back(i);
    }
    void erase(size_t i) {
        size_t k = pos_[i];
        live_[k] = live_.back();
        pos_[live_[k]] = k;
        live_.pop_back();
        pos_[i] = SIZE_MAX;
    }

private:
    std::vector<size_t> live_;
    std::vector<size_t> pos_;
};

/* One of 64 instants 64 ticks apart past now, half the time the one drawn
   last (a batch): timers inserted and rescheduled at different times share
   deadlines, so runs of equal deadlines interleave with each other and with
   everything else. */
uint64_t tied_deadline(Rng &rng, uint64_t now, uint64_t tick, uint64_t &last) {
    if (last > now && rng.below(2)) return last;
    uint64_t step = 64 * tick, k = now / step + 1 + rng.below(64);
    last = k > UINT64_MAX / step ? UINT64_MAX : k * step;
    return last;
}

/* One of the 51 instants 512 ticks apart past now, drawn at random: the
   starts of each deadline interleave with the other 50's (a server's few
   fixed timeouts), which is where a heap that joins runs of equal deadlines
   must keep start order across runs and window heaps. */
uint64_t interleaved_deadline(Rng &rng, uint64_t now, uint64_t tick) {
    uint64_t step = 512 * tick, k = now / step + 1 + rng.below(51);
    return k > UINT64_MAX / step ? UINT64_MAX : k * step;
}

/* Three times in four, one of 64 ticks from an instant 100 ticks to 20 s
   ahead that holds until now comes within 100 ticks of it: thousands of
   timers in one slot of level 1 or 2 (or the level-0 slots of a few ticks),
   so that hwheel stages its cascades ahead, in budgets, through its bank.
   Aligned, the instant starts a level-2 slot of hwheel (4096 ticks), so that
   most of the cluster is staged into its front bank. */
uint64_t clustered_deadline(Rng &rng, uint64_t now, uint64_t tick, uint64_t &cluster,
                            bool aligned) {
    if (rng.below(4) == 0) return sat_add(now, rng.below(3000 * tick));
    if (cluster < sat_add(now, 100 * tick)) {
        cluster = sat_add(now, 100 * tick + rng.below(20000 * tick));
        const uint64_t slot = 4096 * tick;
        if (aligned && cluster <= UINT64_MAX - slot) cluster = (cluster + slot - 1) / slot * slot;
    }
    return sat_add(cluster, rng.below(64 * tick));
}

/* A timeout from now: mostly short, some on tick boundaries, some far, a few
   "never". */
uint64_t random_deadline(Rng &rng, uint64_t now, uint64_t tick) {
    uint64_t r = rng.below(100);
    if (r < 35) return sat_add(now, rng.below(20 * tick));
    if (r < 65) return sat_add(now, rng.below(2000 * tick));
    if (r < 75) {
        uint64_t ticks = now / tick + 1 + rng.below(50);
        return ticks > UINT64_MAX / tick ? UINT64_MAX : ticks * tick;
    }
    if (r < 90) return sat_add(now, rng.below(uint64_t{1} << 36));
    if (r < 98) return sat_add(now, rng.below(uint64_t{1} << 62));
    return UINT64_MAX;
}

/* A leeway: a third none, the rest from sub-tick to huge, a few the maximum. */
uint64_t random_leeway(Rng &rng, uint64_t tick) {
    uint64_t r = rng.below(100);
    if (r < 33) return 0;
    if (r < 55) return 1 + rng.below(tick);
    if (r < 85) return 1 + rng.below(50 * tick);
    if (r < 97) return 1 + rng.below(uint64_t{1} << 40);
    return TL_TIMER_LEEWAY_MAX;
}

/* How far one "advance" moves now: small, medium, large or (rarely) huge. */
uint64_t random_step(Rng &rng, uint64_t tick) {
    uint64_t r = rng.below(1000);
    if (r < 600) return rng.below(3 * tick);
    if (r < 950) return rng.below(20 * tick);
    if (r < 999) return rng.below(uint64_t{1} << 28);
    return rng.below(uint64_t{1} << 44);
}

/* One run's state: the backend under the harness, the timers, which of
 * them are live (the model) or idle, and the counts the end checks. Each
 * operation draws from rng in a fixed order, so a seed replays a run. */
struct Model {
    const char *name;
    const Run &run;
    Harness h;
    uint64_t tick;
    std::vector<Item> items;
    LiveSet live;
    std::vector<size_t> idle;
    Rng rng;
    uint64_t inserted = 0, removed = 0, popped = 0, last_tie = 0, cluster = 0;
    bool tight;

    Model(const char *n, const Run &r)
        : name(n), run(r), h(n, r.start), tick(0), items(make_items(r.max_live)),
          live(r.max_live), rng{r.seed} {
        h.walk_every(run.walk_every);
        tick = h.tick();
        for (size_t i = run.max_live; i-- > 0;) idle.push_back(i);
        tight = h.exact() && tl_timer_backend_find(name)->next_wakeup;
    }

    void check_wakeup() {
        if (!run.leeway || !tight) return;
        uint64_t w = h.next_wakeup(), want = h.earliest_latest();
        cr_assert(w == want, "%s: next_wakeup %llu, model's least deadline + leeway %llu", name,
                  (unsigned long long)w, (unsigned long long)want);
    }

    void insert_one() {
        size_t i = idle.back();
        idle.pop_back();
        uint64_t leeway = 0;
        if (run.leeway) leeway = inserted == 0 ? tick : random_leeway(rng, tick);
        uint64_t now = h.now();
        h.insert(items[i],
                 run.interleaved ? interleaved_deadline(rng, now, tick)
                 : run.ties      ? tied_deadline(rng, now, tick, last_tie)
                 : run.clustered ? clustered_deadline(rng, now, tick, cluster, run.aligned)
                                 : random_deadline(rng, now, tick),
                 leeway);
        live.add(i);
        ++inserted;
    }

    void took(Item *it) {
        live.erase((size_t)it->id);
        idle.push_back((size_t)it->id);
        ++popped;
    }

    void remove_one() {
        if (!live.size()) return;
        size_t i = live.at(rng.below(live.size()));
        h.remove(items[i]);
        live.erase(i);
        idle.push_back(i);
        ++removed;
    }

    void reschedule_one() {
        if (!live.size()) return;
        Item &it = items[live.at(rng.below(live.size()))];
        /* A non-heap may still hold a timer whose deadline has passed
           within the current tick; the loop never moves a timer
           before now, so neither does this. */
        uint64_t now = h.now(), old = std::max(it.timer.deadline, now), deadline = old;
        switch (rng.below(3)) {
        case 0:
            deadline = now + rng.below(old - now + 1);
            break; /* earlier */
        case 1:
            deadline = sat_add(old, rng.below(500 * tick) + 1);
            break;
        case 2:
            break; /* same deadline: goes last among its ties */
        }
        if (run.later && rng.below(4)) deadline = sat_add(old, rng.below(50 * tick));
        if (run.ties && rng.below(2)) deadline = tied_deadline(rng, now, tick, last_tie);
        if (run.interleaved && rng.below(4)) deadline = interleaved_deadline(rng, now, tick);
        if (run.clustered && rng.below(2))
            deadline = clustered_deadline(rng, now, tick, cluster, run.aligned);
        if (run.leeway && rng.below(3) == 0) Harness::set_leeway(it, random_leeway(rng, tick));
        h.reschedule(it, deadline);
    }

    /* Drains to `next` if it is not far: now stays clear of UINT64_MAX
       (the final drain goes there). */
    void drain_to_near(uint64_t next) {
        if (next < sat_add(h.now(), uint64_t{1} << 40))
            for (Item *it : h.drain(std::max(h.now(), next))) took(it);
    }

    /* One random operation. */
    void step() {
        uint64_t r = rng.below(100);
        if (r < 45) {
            if (!idle.empty()) insert_one();
        } else if (r < 50) {
            remove_one();
        } else if (r < 60) {
            reschedule_one();
        } else if (r < 68) {
            /* Clustered runs step in ticks, so that their clusters fill up
               before now reaches them. */
            uint64_t by = run.clustered ? rng.below(8 * tick) : random_step(rng, tick);
            for (Item *it : h.drain(sat_add(h.now(), by))) took(it);
        } else if (r < 70) {
            drain_to_near(h.next_expiry()); /* as the loop does after a wait */
        } else if (r < 72 && run.leeway) {
            drain_to_near(h.next_wakeup()); /* as the loop does with leeway */
        } else if (r < 75 && run.leeway) {
            /* The leeway changes while inside: the backend must not notice. */
            if (live.size())
                Harness::set_leeway(items[live.at(rng.below(live.size()))],
                                    random_leeway(rng, tick));
        } else if (r < 80) {
            h.next_expiry();
            check_wakeup();
        } else {
            /* A single pop, leaving the rest of what is due for later. */
            if (Item *it = h.pop(h.now())) took(it);
        }
    }
};

void run_model(const char *name, const Run &run) {
    Model m(name, run);
    /* Start three-quarters full. */
    while (m.live.size() < run.max_live * 3 / 4) m.insert_one();
    uint64_t live_sum = 0;
    for (size_t op = 0; op < run.operations; ++op) {
        live_sum += m.live.size();
        m.step();
        m.check_wakeup();
    }
    for (Item *it : m.h.drain_all()) m.took(it);
    cr_assert(m.live.size() == 0 && m.h.size() == 0, "%s: %zu timers left", name, m.live.size());
    cr_assert(m.inserted == m.removed + m.popped,
              "%s: %llu inserted, %llu removed, %llu popped: timers lost", name,
              (unsigned long long)m.inserted, (unsigned long long)m.removed,
              (unsigned long long)m.popped);
    /* The run itself must have been a real workout. */
    cr_assert(m.popped > run.operations / 20, "%s: only %llu pops: the run did too little", name,
              (unsigned long long)m.popped);
    cr_assert(live_sum / run.operations >= run.max_live / 4, "%s: %llu live timers on average",
              name, (unsigned long long)(live_sum / run.operations));
}

} // namespace

BACKEND_TEST(timers, random_ops_match_model_checked_every_step) {
    const Run runs[] = {
        {0x1234, 0, 1000, 40000, 1},
        {0xbeef, kBigStart, 1000, 40000, 1},
    };
    for (const Run &run : runs) run_model(p->name, run);
}

/* Ties everywhere: what a busy server's timers look like (every timer
   started in one iteration shares tl_now). */
BACKEND_TEST(timers, random_ops_with_ties_match_model_checked_every_step) {
    const Run runs[] = {
        {0x7ee5, 0, 1000, 40000, 1, false, true},
        {0x7ee6, kBigStart, 1000, 40000, 1, true, true},
    };
    for (const Run &run : runs) run_model(p->name, run);
}

/* Interleaved ties, with and without leeway: timers move between a heap's
   runs and its window heaps while other starts of their deadline come in. */
BACKEND_TEST(timers, random_ops_with_interleaved_ties_match_model_checked_every_step) {
    Run runs[] = {
        {0x51, 0, 1000, 20000, 1},
        {0x52, kBigStart, 1000, 20000, 1, true},
    };
    for (Run &run : runs) {
        run.interleaved = true;
        run_model(p->name, run);
    }
}

/* Restarts mostly to later deadlines (or the same), as a server's idle
   timeouts: a heap leaves such a timer where it is, stale, until it reaches
   the top, and must still pop in (deadline, restart) order. With ties, and
   with leeway moving timers between a heap's parts. */
BACKEND_TEST(timers, random_later_restarts_match_model_checked_every_step) {
    Run runs[] = {
        {0x1a7e, 0, 1000, 40000, 1},
        {0x1a7f, kBigStart, 1000, 40000, 1, false, true},
        {0x1a80, 0, 1000, 40000, 1, true, true},
    };
    for (Run &run : runs) {
        run.later = true;
        run_model(p->name, run);
    }
}

BACKEND_TEST(timers, random_ops_with_leeway_match_model_checked_every_step) {
    const Run runs[] = {
        {0x1ee, 0, 1000, 40000, 1, true},
        {0xca7, kBigStart, 1000, 40000, 1, true},
    };
    for (const Run &run : runs) run_model(p->name, run);
}

BACKEND_TEST(timers, random_ops_with_leeway_match_model_large) {
    const Run runs[] = {
        {4, 0, 4000, 150000, 64, true},
        {5, (uint64_t{1} << 62) + 12345, 4000, 150000, 64, true},
    };
    for (const Run &run : runs) run_model(p->name, run);
}

BACKEND_TEST(timers, random_ops_match_model_large) {
    const Run runs[] = {
        {1, 0, 4000, 150000, 64},
        {2, kBigStart, 4000, 150000, 64},
        {3, (uint64_t{1} << 62) + 12345, 4000, 150000, 64},
    };
    for (const Run &run : runs) run_model(p->name, run);
}

/* Thousands of timers due within 64 ticks of one instant (hwheel stages
   the slot that holds them into its bank ahead of its start, a budget per
   next_expiry), restarted, stopped and popped at random meanwhile, with and
   without ties and leeway; and clusters at the start of a level-2 slot,
   which hwheel stages into its front bank. */
BACKEND_TEST(timers, random_ops_with_large_cascades_match_model) {
    Run runs[] = {
        {0xca5c, 0, 4000, 30000, 1},
        {0xca5d, kBigStart, 6000, 60000, 16, false, true},
        {0xca5e, kBigStart, 6000, 60000, 16, true},
        {0xf407, 0, 4000, 30000, 1},
        {0xf408, kBigStart, 6000, 60000, 16, true},
    };
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; ++i) {
        runs[i].clustered = true;
        runs[i].aligned = i >= 3;
        run_model(p->name, runs[i]);
    }
}

/* The delayed-tasks workload (bench-cascade-burst, at its full size):
   timers due 3.1-5 s on, 90% stopped, driven through the vtable as the loop
   drives it (one next_expiry, then pops until NULL; the harness would call
   next_expiry after every operation). Staged a budget per next_expiry
   (unbanking and staging share it), a wake-up moves at most one budget
   here: its pops re-file nothing, since the front bank hands out the ticks
   of the bank slot that binds the bank where they are (re-filing that slot
   whole would move one level-1 slot's timers, about 3,300 here). */
Test(timers, hwheel_cascade_work_per_wakeup_is_bounded, .timeout = 240) {
    const size_t n = 1000000, survivors = n / 10;
    const tl_timer_backend *b = tl_timer_backend_find("hwheel");
    uint64_t now = kBigStart;
    void *self = b->create(&kConfig, now);
    cr_assert(self);
    std::vector<Item> items = make_items(n);
    Rng rng{0x64656c61};
    for (Item &it : items) {
        it.timer.deadline = now + 3100 * kTick + rng.below(1900 * kTick);
        cr_assert(b->insert(self, &it.timer) == 0);
    }
    for (size_t i = 0; i < n; ++i)
        if (i % 10) b->remove(self, &items[i].timer);
    uint64_t max_moved = 0, wakeups = 0, before = tl_detail_hwheel_cascades(self);
    size_t fired = 0;
    while (b->count(self)) {
        uint64_t next = b->next_expiry(self);
        if (next > now) now = next;
        while (tl_timer *t = b->pop_expired(self, now)) {
            cr_assert(t->deadline <= now, "hwheel: deadline %llu popped at %llu",
                      (unsigned long long)t->deadline, (unsigned long long)now);
            ++fired;
        }
        uint64_t after = tl_detail_hwheel_cascades(self);
        max_moved = std::max(max_moved, after - before);
        before = after;
        if (++wakeups % 64 == 0) {
            const char *broken = tl_detail_timers_check(b, self);
            cr_assert(!broken, "hwheel: %s", broken);
        }
    }
    b->destroy(self);
    cr_log_info("hwheel: %zu fired in %llu wake-ups, at most %llu timers moved in one", fired,
                (unsigned long long)wakeups, (unsigned long long)max_moved);
    cr_assert(fired == survivors, "hwheel: %zu of %zu fired", fired, survivors);
    const uint64_t bound = 1024;
    cr_assert(max_moved <= bound, "hwheel: %llu timers moved in one wake-up, bound %llu",
              (unsigned long long)max_moved, (unsigned long long)bound);
}

/* Thousands of timers in one level-3 slot of hwheel, over its first three
   level-2 slots, with ties: the level-3 slot is staged into the bank (level
   2) and its first level-2 slot into the front bank (level 1); the bank is
   emptied into level 2 after the bind, and the front bank, still handing
   out its last slots when the next level-2 slot is staged, into level 1.
   Every timer fires once, in (deadline, start) order, never early. */
Test(timers, hwheel_level3_block_fires_in_order_through_both_banks) {
    const size_t n = 20000;
    const tl_timer_backend *b = tl_timer_backend_find("hwheel");
    uint64_t now = 0;
    void *self = b->create(&kConfig, now);
    cr_assert(self);
    std::vector<Item> items = make_items(n);
    Rng rng{0x1e7e13};
    for (Item &it : items) {
        it.timer.deadline = (262144 + rng.below(3 * 4096)) * kTick;
        cr_assert(b->insert(self, &it.timer) == 0);
    }
    uint64_t wakeups = 0, last_deadline = 0;
    const Item *last = nullptr;
    size_t fired = 0;
    while (b->count(self)) {
        uint64_t next = b->next_expiry(self);
        if (next > now) now = next;
        while (tl_timer *t = b->pop_expired(self, now)) {
            const Item *it = item_of(t);
            cr_assert(t->deadline <= now, "hwheel: deadline %llu popped at %llu",
                      (unsigned long long)t->deadline, (unsigned long long)now);
            cr_assert(!last || t->deadline > last_deadline ||
                          (t->deadline == last_deadline && it > last),
                      "hwheel: timer %zu (deadline %llu) after timer %zu (deadline %llu)",
                      size_t(it - items.data()), (unsigned long long)t->deadline,
                      size_t(last - items.data()), (unsigned long long)last_deadline);
            last = it;
            last_deadline = t->deadline;
            ++fired;
        }
        if (++wakeups % 16 == 0) {
            const char *broken = tl_detail_timers_check(b, self);
            cr_assert(!broken, "hwheel: %s", broken);
        }
    }
    b->destroy(self);
    cr_assert(fired == n, "hwheel: %zu of %zu fired", fired, n);
}
