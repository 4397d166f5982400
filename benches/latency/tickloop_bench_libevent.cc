/* SPDX-License-Identifier: MIT */
/*
 * tickloop_bench_libevent.cc: tickloop-bench-libevent, the helper that runs the
 * libevent rows of tickloop-bench (tickloop_bench.cc) in a process of its own.
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
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "latency.h"
#include "ops.h"
#include "ops_libevent.h"

namespace {

using namespace bench;

/* One row: libevent, precise or not, running one round of one workload. */
Result run(const char *workload, bool precise, const Params &p, size_t round) {
    LibeventOps ops(precise ? "precise" : "");
    Result r;
    r.impl = ops.name();
    r.family = "peer";
    r.workload = workload;
    if (!ops.ok()) {
        r.skipped = ops.error();
        return r;
    }
    bool batch = std::strcmp(workload, "restart-batch") == 0;
    if (batch || std::strcmp(workload, "restart") == 0) {
        RestartPlan plan = restart_plan(p);
        size_t begin, end;
        restart_round(plan, round, p.restart_rounds, &begin, &end);
        measure_restart(ops, plan, begin, end, r, batch ? kRestartBatch : 0);
        return r;
    }
    if (std::strncmp(workload, "expire", 6) == 0) {
        measure_expire(ops,
                       expire_plan(p, std::strcmp(workload, "expire-shuffled") == 0,
                                   std::strcmp(workload, "expire-equal") == 0),
                       p.expire_window, r);
        return r;
    }
    bool sweep = std::strcmp(workload, "sweep") == 0;
    bool chain = sweep || std::strcmp(workload, "chain") == 0;
    std::vector<uint64_t> delays = sweep   ? sweep_delays(p)
                                   : chain ? chain_delays(p, round)
                                           : open_delays(p, round);
    if (sweep) sweep_start(p);
    measure_latency(ops, chain, delays, r);
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
