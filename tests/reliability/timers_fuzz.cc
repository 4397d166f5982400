/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: every registered timer backend, driven in lockstep through its
 * vtable by one operation stream decoded from the input, each against its own
 * reference model (an ordered set of (deadline, insertion) pairs).
 *
 * Operations: insert, remove, reschedule earlier / later / to the same
 * deadline, advance now by small, large or huge steps (up to UINT64_MAX),
 * next_expiry, one pop, a drain, a loop-style step to the earliest expiry, and
 * a probe just before next_expiry. After every operation, for every backend:
 * - tl_detail_timers_check() (the backend's invariant walker) returns NULL;
 * - what to expect comes from the backend's caps: "exact" below is
 *   TL_TIMER_CAP_EXACT (the heaps), "others" the tick-order rule;
 * - count() equals the model; next_expiry() is UINT64_MAX when empty, the
 *   earliest deadline for exact backends, and never later than the earliest deadline
 *   for the others (the loop waits until next_expiry, so a later answer
 *   would make a timer late);
 * - a pop is never early (deadline <= now), returns a timer that is inside,
 *   exact backends exactly the model's earliest (deadline, insertion), others in tick
 *   order (ceil(deadline / tick) non-decreasing);
 * - once pop_expired(now) answers NULL nothing due is left: no deadline <= now
 *   (exact) or <= floor(now / tick) * tick (others);
 * - pop_expired(t) returns nothing for t < min(next_expiry()).
 * At the end every backend is drained to empty by the progress rule
 * (now = next_expiry(), drain, repeat) with a bounded number of empty rounds:
 * nothing is lost.
 *
 * Backends are enumerated at run time (tl_timer_backend_names), so a new
 * built-in is fuzzed without touching this file.
 */
#include <algorithm>
#include <cstring>
#include <memory>
#include <set>
#include <vector>

#include "fuzz_common.h"
#include "timers/timers.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

namespace {

using fuzz::sat_add;

/* Timers per backend: enough to fill several wheel slots and heap levels,
   few enough that the O(n) invariant walk after every step stays cheap. */
constexpr unsigned kTimers = 96;
/* Operations per input; libFuzzer's default max_len keeps inputs below it. */
constexpr unsigned kMaxOps = 4096;
/* Empty next_expiry/pop rounds allowed in a row: one per level of a 64-bit
   hierarchy of 6-bit levels (11), plus one. */
constexpr unsigned kMaxEmptyRounds = 12;

uint64_t tick_of(uint64_t deadline, uint64_t tick) {
    return deadline / tick + (deadline % tick != 0);
}

struct Node {
    tl_timer timer;
    uint64_t seq;
    unsigned id;
    bool inside;
};

struct Key {
    uint64_t deadline;
    uint64_t seq;
    unsigned id;
    bool operator<(const Key &o) const {
        return deadline != o.deadline ? deadline < o.deadline : seq < o.seq;
    }
};

/* One backend instance and its model. */
class Subject {
public:
    Subject(const tl_timer_backend *b, const tl_timer_config &cfg, uint64_t now)
        : b_(b), cfg_(cfg), exact_((b->caps & TL_TIMER_CAP_EXACT) != 0), now_(now) {
        self_ = b_->create(&cfg_, now);
        FUZZ_CHECK(self_, "%s: create(tick %llu, slots %u, now %llu) failed", b_->name,
                   (unsigned long long)cfg.tick_ns, cfg.wheel_slots, (unsigned long long)now);
        for (unsigned i = 0; i < kTimers; ++i) {
            std::memset(&nodes_[i], 0, sizeof nodes_[i]);
            nodes_[i].timer.data = &nodes_[i];
            nodes_[i].id = i;
        }
        check("create");
    }
    ~Subject() { b_->destroy(self_); }
    Subject(const Subject &) = delete;
    Subject &operator=(const Subject &) = delete;

    const char *name() const { return b_->name; }
    bool exact() const { return exact_; }
    bool inside(unsigned id) const { return nodes_[id].inside; }
    uint64_t deadline(unsigned id) const { return nodes_[id].timer.deadline; }
    size_t size() const { return model_.size(); }

    void insert(unsigned id, uint64_t deadline) {
        Node &n = nodes_[id];
        FUZZ_CHECK(!n.inside && deadline >= now_, "harness bug: inside %d deadline %llu now %llu",
                   n.inside, (unsigned long long)deadline, (unsigned long long)now_);
        n.timer.deadline = deadline;
        n.seq = seq_++;
        int r = b_->insert(self_, &n.timer);
        FUZZ_CHECK(r == 0, "%s: insert(deadline %llu) returned %d", name(),
                   (unsigned long long)deadline, r);
        n.inside = true;
        model_.insert(Key{deadline, n.seq, id});
        check("insert");
    }

    void remove(unsigned id) {
        Node &n = nodes_[id];
        FUZZ_CHECK(n.inside, "harness bug");
        FUZZ_CHECK(model_.erase(Key{n.timer.deadline, n.seq, id}) == 1,
                   "%s: remove: timer %u's deadline changed to %llu while inside", name(), id,
                   (unsigned long long)n.timer.deadline);
        b_->remove(self_, &n.timer);
        n.inside = false;
        check("remove");
    }

    /* reschedule, or remove + insert when the backend has none (as the loop). */
    void reschedule(unsigned id, uint64_t deadline) {
        Node &n = nodes_[id];
        FUZZ_CHECK(n.inside && deadline >= now_, "harness bug");
        FUZZ_CHECK(model_.erase(Key{n.timer.deadline, n.seq, id}) == 1,
                   "%s: reschedule: timer %u's deadline changed to %llu while inside", name(), id,
                   (unsigned long long)n.timer.deadline);
        n.seq = seq_++;
        if (b_->reschedule) {
            b_->reschedule(self_, &n.timer, deadline);
            FUZZ_CHECK(n.timer.deadline == deadline, "%s: reschedule left deadline %llu, not %llu",
                       name(), (unsigned long long)n.timer.deadline, (unsigned long long)deadline);
        } else {
            b_->remove(self_, &n.timer);
            n.timer.deadline = deadline;
            int r = b_->insert(self_, &n.timer);
            FUZZ_CHECK(r == 0, "%s: insert returned %d", name(), r);
        }
        model_.insert(Key{deadline, n.seq, id});
        check("reschedule");
    }

    uint64_t next_expiry() {
        uint64_t next = b_->next_expiry(self_);
        check("next_expiry");
        return next;
    }

    /* One pop_expired(now); returns whether it returned a timer. */
    bool pop(uint64_t now) {
        FUZZ_CHECK(now >= now_, "harness bug: now moved backwards");
        now_ = now;
        tl_timer *t = b_->pop_expired(self_, now);
        if (!t) {
            check("pop_expired (NULL)");
            FUZZ_CHECK(model_.empty() || model_.begin()->deadline > due_bound(now),
                       "%s: pop_expired(%llu) answered NULL but timer %u (deadline %llu) is due "
                       "(bound %llu): lost",
                       name(), (unsigned long long)now, model_.begin()->id,
                       (unsigned long long)model_.begin()->deadline,
                       (unsigned long long)due_bound(now));
            return false;
        }
        FUZZ_CHECK(t >= &nodes_[0].timer && t <= &nodes_[kTimers - 1].timer,
                   "%s: pop_expired returned a pointer that is no timer of ours", name());
        Node &n = *static_cast<Node *>(t->data);
        FUZZ_CHECK(n.inside, "%s: pop_expired returned timer %u, which is not inside", name(),
                   n.id);
        FUZZ_CHECK(t->deadline <= now,
                   "%s: pop_expired(%llu) returned timer %u, deadline %llu: early", name(),
                   (unsigned long long)now, n.id, (unsigned long long)t->deadline);
        auto found = model_.find(Key{t->deadline, n.seq, n.id});
        FUZZ_CHECK(found != model_.end() && found->id == n.id,
                   "%s: popped timer %u has deadline %llu, the model has it elsewhere", name(),
                   n.id, (unsigned long long)t->deadline);
        if (exact_)
            FUZZ_CHECK(found == model_.begin(),
                       "%s: popped timer %u (deadline %llu, seq %llu) but timer %u (%llu, %llu) "
                       "comes first",
                       name(), n.id, (unsigned long long)t->deadline, (unsigned long long)n.seq,
                       model_.begin()->id, (unsigned long long)model_.begin()->deadline,
                       (unsigned long long)model_.begin()->seq);
        uint64_t tick = tick_of(t->deadline, cfg_.tick_ns);
        FUZZ_CHECK(!popped_any_ || tick >= last_tick_,
                   "%s: popped deadline %llu (tick %llu) after one of tick %llu: not in tick order",
                   name(), (unsigned long long)t->deadline, (unsigned long long)tick,
                   (unsigned long long)last_tick_);
        popped_any_ = true;
        last_tick_ = tick;
        model_.erase(found);
        n.inside = false;
        check("pop_expired");
        return true;
    }

    void drain(uint64_t now) {
        while (pop(now)) {
        }
    }

    /* The progress rule until empty: nothing is lost. */
    void drain_all() {
        unsigned empty = 0;
        while (!model_.empty()) {
            uint64_t next = next_expiry();
            if (next > now_) {
                FUZZ_CHECK(!pop(next - 1),
                           "%s: pop_expired(%llu) returned a timer before "
                           "next_expiry %llu",
                           name(), (unsigned long long)(next - 1), (unsigned long long)next);
            }
            size_t before = model_.size();
            drain(std::max(now_, next));
            if (model_.size() == before) {
                ++empty;
                FUZZ_CHECK(!exact_ && empty <= kMaxEmptyRounds,
                           "%s: %u empty rounds in a row at now %llu (next_expiry %llu), %zu "
                           "timers left, earliest %llu: no progress",
                           name(), empty, (unsigned long long)now_, (unsigned long long)next,
                           model_.size(), (unsigned long long)model_.begin()->deadline);
            } else {
                empty = 0;
            }
        }
        FUZZ_CHECK(b_->count(self_) == 0 && b_->next_expiry(self_) == UINT64_MAX,
                   "%s: drained, but count %zu, next_expiry %llu", name(), b_->count(self_),
                   (unsigned long long)b_->next_expiry(self_));
    }

private:
    /* The first multiple of the tick at or after deadline (UINT64_MAX if none):
       when a wheel hands out a timer without leeway. */
    uint64_t tick_end(uint64_t deadline) const {
        uint64_t up = deadline % cfg_.tick_ns ? cfg_.tick_ns - deadline % cfg_.tick_ns : 0;
        return deadline > UINT64_MAX - up ? UINT64_MAX : deadline + up;
    }

    uint64_t due_bound(uint64_t now) const {
        return exact_ ? now : now / cfg_.tick_ns * cfg_.tick_ns;
    }

    void check(const char *after) {
        const char *broken = tl_detail_timers_check(b_, self_);
        FUZZ_CHECK(!broken, "%s: after %s: %s", name(), after, broken);
        size_t count = b_->count(self_);
        FUZZ_CHECK(count == model_.size(), "%s: after %s: count() %zu, model %zu", name(), after,
                   count, model_.size());
        uint64_t next = b_->next_expiry(self_);
        if (model_.empty()) {
            FUZZ_CHECK(next == UINT64_MAX, "%s: after %s: empty but next_expiry %llu", name(),
                       after, (unsigned long long)next);
            return;
        }
        uint64_t earliest = model_.begin()->deadline;
        if (exact_)
            FUZZ_CHECK(next == earliest, "%s: after %s: next_expiry %llu, earliest deadline %llu",
                       name(), after, (unsigned long long)next, (unsigned long long)earliest);
        else
            FUZZ_CHECK(next <= tick_end(earliest),
                       "%s: after %s: next_expiry %llu later than the end of the earliest "
                       "deadline's tick (deadline %llu)",
                       name(), after, (unsigned long long)next, (unsigned long long)earliest);
    }

    const tl_timer_backend *b_;
    tl_timer_config cfg_;
    void *self_ = nullptr;
    bool exact_;
    uint64_t now_;
    uint64_t seq_ = 0;
    Node nodes_[kTimers];
    std::set<Key> model_;
    bool popped_any_ = false;
    uint64_t last_tick_ = 0;
};

tl_timer_config decode_config(fuzz::Input &in) {
    static const uint64_t ticks[] = {1000000, 1, 1000, 3, 4096, 999983, 1000000000, 250000};
    static const uint32_t slots[] = {64, 1, 2, 8, 16, 256, 1024, 4096};
    uint8_t c = in.u8();
    return tl_timer_config{ticks[c & 7], slots[c >> 3 & 7]};
}

uint64_t decode_start(fuzz::Input &in) {
    switch (in.u8() & 7) {
    case 0:
        return 0;
    case 1:
        return 123456789012345ull;
    case 2:
        return (uint64_t{1} << 62) + 12345;
    case 3:
        return UINT64_MAX - (uint64_t{1} << 32);
    case 4:
        return UINT64_MAX - in.u16();
    case 5:
        return in.u64();
    case 6:
        return in.u32();
    default:
        return (uint64_t)in.u16() * 1000000;
    }
}

/* A deadline at or after now: exactly now, a few ns, microseconds, ticks,
   a tick boundary, seconds, anywhere in the 64-bit range, "never". */
uint64_t decode_deadline(fuzz::Input &in, uint64_t now, uint64_t tick) {
    switch (in.u8() & 7) {
    case 0:
        return now;
    case 1:
        return sat_add(now, in.u8());
    case 2:
        return sat_add(now, (uint64_t)in.u16() * 1000);
    case 3:
        return sat_add(now, (uint64_t)in.u16() * (tick / 16 + 1));
    case 4: {
        uint64_t ticks = sat_add(now / tick, 1 + (uint64_t)in.u8());
        return ticks > UINT64_MAX / tick ? UINT64_MAX : ticks * tick;
    }
    case 5:
        return sat_add(now, (uint64_t)in.u32() * 1000);
    case 6:
        return sat_add(now, in.u64() >> (in.u8() & 63));
    default:
        return UINT64_MAX - std::min<uint64_t>(in.u8(), UINT64_MAX - now);
    }
}

using Subjects = std::vector<std::unique_ptr<Subject>>;

/* Inserts timer id at d into every subject (reschedules it where it is
   inside already). */
void insert_all(Subjects &subjects, unsigned id, uint64_t d) {
    for (auto &s : subjects) {
        if (s->inside(id))
            s->reschedule(id, d);
        else
            s->insert(id, d);
    }
}

/* Reschedules timer id earlier, later or to the same deadline, the same way
   in every subject that holds it. */
void reschedule_all(Subjects &subjects, fuzz::Input &in, unsigned id, uint64_t now) {
    uint64_t r = in.u64();
    unsigned how = in.u8() % 3;
    for (auto &s : subjects) {
        if (!s->inside(id)) continue;
        /* A wheel may still hold a passed deadline within the current
           tick; the loop never moves a timer before now. */
        uint64_t old = std::max(s->deadline(id), now), d = old;
        if (how == 0) d = now + (old - now == UINT64_MAX ? r : r % (old - now + 1));
        if (how == 1) d = sat_add(old, 1 + r % (uint64_t{1} << (r >> 58)));
        s->reschedule(id, d);
    }
}

uint64_t earliest_expiry(Subjects &subjects) {
    uint64_t next = UINT64_MAX;
    for (auto &s : subjects) next = std::min(next, s->next_expiry());
    return next;
}

/* Nothing comes out just before the earliest next_expiry; moves now there. */
void nothing_just_before_expiry(Subjects &subjects, uint64_t &now) {
    uint64_t next = earliest_expiry(subjects);
    if (next <= now) return;
    now = next - 1;
    for (auto &s : subjects)
        FUZZ_CHECK(!s->pop(now),
                   "%s: pop_expired(%llu) returned a timer, but "
                   "next_expiry is %llu",
                   s->name(), (unsigned long long)now, (unsigned long long)s->next_expiry());
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz::Input in(data, size);
    const tl_timer_config cfg = decode_config(in);
    uint64_t now = decode_start(in);

    const char *names[64];
    size_t n = std::min<size_t>(tl_timer_backend_names(names, 64), 64);
    FUZZ_CHECK(n >= 2, "only %zu timer backends registered", n);
    Subjects subjects;
    for (size_t i = 0; i < n; ++i) {
        const tl_timer_backend *b = tl_timer_backend_find(names[i]);
        FUZZ_CHECK(b, "tl_timer_backend_find(\"%s\") failed for a listed name", names[i]);
        subjects.emplace_back(new Subject(b, cfg, now));
    }
    Subject &first = *subjects[0];

    for (unsigned op = 0; op < kMaxOps && !in.empty(); ++op) {
        uint8_t code = in.u8();
        unsigned id = in.u8() % kTimers;
        switch (code % 14) {
        case 0:
        case 1:
            insert_all(subjects, id, decode_deadline(in, now, cfg.tick_ns));
            break;
        case 2:
            for (auto &s : subjects)
                if (s->inside(id)) s->remove(id);
            break;
        case 3:
        case 4:
            reschedule_all(subjects, in, id, now);
            break;
        case 5:
            now = sat_add(now, in.u8());
            break;
        case 6:
            now = sat_add(now, (uint64_t)in.u16() * (cfg.tick_ns / 8 + 1));
            break;
        case 7:
            now = sat_add(now, (uint64_t)in.u32() * 1000);
            break;
        case 8:
            now = sat_add(now, in.u64() >> (in.u8() & 63));
            break;
        case 9:
            for (auto &s : subjects) s->next_expiry();
            break;
        case 10:
            for (auto &s : subjects) s->pop(now);
            break;
        case 11:
            for (auto &s : subjects) s->drain(now);
            break;
        case 12: { /* as the loop does after a wait: to the earliest expiry, drain */
            uint64_t next = earliest_expiry(subjects);
            if (next != UINT64_MAX || (id & 1)) now = std::max(now, next);
            for (auto &s : subjects) s->drain(now);
            break;
        }
        case 13:
            nothing_just_before_expiry(subjects, now);
            break;
        }
        /* Lockstep: the model sizes agree wherever the rules force them to
           (exact backends pop exactly the same timers). */
        for (auto &s : subjects)
            if (s->exact() && first.exact())
                FUZZ_CHECK(s->size() == first.size(), "%s holds %zu timers, %s %zu", s->name(),
                           s->size(), first.name(), first.size());
    }
    for (auto &s : subjects) s->drain_all();
    return 0;
}

#ifdef TL_FUZZ_REPLAY
#include "replay.h"
#endif
