/* SPDX-License-Identifier: MIT */
/*
 * latency_libevent.cc: tickloop-bench-libevent, the helper that runs the
 * libevent rows of tickloop-bench (latency.cc) in a process of its own.
 *
 * Why a separate executable: Debian's libev exports libevent-compatible
 * symbols (event_add, event_base_new, ...), so libev and libevent cannot be
 * linked into one binary without one silently replacing the other.
 *
 * It runs one round (--round=N) of one workload (--workload=chain|open|
 * restart|restart-batch|expire|expire-shuffled|expire-equal|sweep) with the parameters the runner
 * passes (the same seed, so the same schedule as every other row) for libevent on epoll, first with
 * default settings, then with EVENT_BASE_FLAG_PRECISE_TIMER, and prints one "RESULT" line per row
 * on stdout in the format of latency.h. Lateness is measured against event.ev_timeout, the absolute
 * deadline libevent computed in event_add (its monotonic clock: CLOCK_MONOTONIC_COARSE by default,
 * CLOCK_MONOTONIC when precise; both share CLOCK_MONOTONIC's time base).
 */
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "latency.h"
#include "ops.h"
#include "ops_libevent.h"
#include "wait_counter.h"

namespace {

using namespace bench;

/* ev_timeout's microsecond field can carry libevent's common-timeout tag in
   its high bits; these events use none, but mask as libevent itself does. */
uint64_t ev_deadline(const struct event &ev) {
    return (uint64_t)ev.ev_timeout.tv_sec * kSec +
           (uint64_t)(ev.ev_timeout.tv_usec & 0xfffff) * kUs;
}

struct Chain {
    event_base *base;
    struct event ev;
    const std::vector<uint64_t> &delays;
    std::vector<int64_t> &lateness;
    size_t next = 0;
    uint64_t deadline = 0;

    void arm() {
        if (next == delays.size()) return;
        timeval tv = libevent_tv(delays[next++]);
        evtimer_add(&ev, &tv);
        deadline = ev_deadline(ev);
    }
    static void on_timer(evutil_socket_t, short, void *self) {
        uint64_t now = mono_ns();
        auto *chain = static_cast<Chain *>(self);
        chain->lateness.push_back((int64_t)(now - chain->deadline));
        chain->arm();
    }
};

struct Open {
    struct event *events;
    std::vector<uint64_t> deadline;
    std::vector<int64_t> &lateness;
};
struct OpenTimer {
    Open *open;
    size_t index;
};

void open_fired(evutil_socket_t, short, void *arg) {
    uint64_t now = mono_ns();
    auto *t = static_cast<OpenTimer *>(arg);
    t->open->lateness.push_back((int64_t)(now - t->open->deadline[t->index]));
}

Result run(const char *workload, bool precise, const Params &p, size_t round) {
    Result r;
    r.impl = "libevent " + LibeventOps::version() + (precise ? " precise" : "");
    r.family = "peer";
    r.workload = workload;
    bool batch = std::strcmp(workload, "restart-batch") == 0;
    if (batch || std::strcmp(workload, "restart") == 0) {
        LibeventOps ops(precise ? "precise" : "");
        if (!ops.ok())
            r.skipped = ops.error();
        else {
            RestartPlan plan = restart_plan(p);
            size_t begin, end;
            restart_round(plan, round, p.restart_rounds, &begin, &end);
            measure_restart(ops, plan, begin, end, r, batch ? kRestartBatch : 0);
        }
        return r;
    }
    if (std::strncmp(workload, "expire", 6) == 0) {
        LibeventOps ops(precise ? "precise" : "");
        if (!ops.ok())
            r.skipped = ops.error();
        else
            measure_expire(ops,
                           expire_plan(p, std::strcmp(workload, "expire-shuffled") == 0,
                                       std::strcmp(workload, "expire-equal") == 0),
                           p.expire_window, r);
        return r;
    }
    event_base *base = libevent_base_new(precise);
    if (!base) {
        r.skipped = "event_base_new_with_config failed";
        return r;
    }
    r.note = std::string("backend ") + event_base_get_method(base) +
             (precise ? "; waits through a timerfd (ns) and CLOCK_MONOTONIC; "
                      : "; epoll_wait timeouts in whole ms (rounded up), "
                        "CLOCK_MONOTONIC_COARSE; ") +
             "delays rounded up to whole us; ";
    uint64_t waits0 = kernel_waits();
    uint64_t w0 = mono_ns();
    bool sweep = std::strcmp(workload, "sweep") == 0;
    if (sweep || std::strcmp(workload, "chain") == 0) {
        std::vector<uint64_t> delays = sweep ? sweep_delays(p) : chain_delays(p, round);
        if (sweep) {
            sweep_start(p);
            w0 = mono_ns();
        }
        r.lateness.reserve(delays.size());
        auto chain = std::make_unique<Chain>(Chain{base, {}, delays, r.lateness});
        evtimer_assign(&chain->ev, base, Chain::on_timer, chain.get());
        chain->arm();
        event_base_dispatch(base);
    } else {
        std::vector<uint64_t> delays = open_delays(p, round);
        size_t n = delays.size();
        r.lateness.reserve(n);
        std::unique_ptr<struct event[]> events(new struct event[n]);
        std::vector<OpenTimer> args(n);
        Open open{events.get(), std::vector<uint64_t>(n), r.lateness};
        for (size_t i = 0; i < n; ++i) {
            args[i] = {&open, i};
            evtimer_assign(&events[i], base, open_fired, &args[i]);
            timeval tv = libevent_tv(delays[i]);
            evtimer_add(&events[i], &tv);
            open.deadline[i] = ev_deadline(events[i]);
        }
        event_base_dispatch(base);
    }
    r.wall_s = (double)(mono_ns() - w0) / 1e9;
    r.waits = kernel_waits() - waits0;
    r.fired = r.lateness.size();
    event_base_free(base);
    return r;
}

} // namespace

int main(int argc, char **argv) {
    Params p;
    const char *workload = "chain";
    size_t round = 0;
    for (int i = 1; i < argc; ++i) {
        if (!std::strncmp(argv[i], "--workload=", 11))
            workload = argv[i] + 11;
        else if (!std::strncmp(argv[i], "--round=", 8))
            round = std::strtoull(argv[i] + 8, nullptr, 10);
        else if (!parse_param(argv[i], p)) {
            std::fprintf(stderr, "%s: unknown argument %s\n", argv[0], argv[i]);
            return 2;
        }
    }
    for (bool precise : {false, true}) {
        if (p.libevent_precise >= 0 && precise != (p.libevent_precise == 1)) continue;
        Result r = run(workload, precise, p, round);
        std::printf("%s\n", encode(r).c_str());
        std::fflush(stdout);
    }
    return 0;
}
