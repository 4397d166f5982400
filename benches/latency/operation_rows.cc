/* SPDX-License-Identifier: MIT */
/*
 * operation_rows.cc: tickloop-bench's operation rows and their tables: the
 * cost of restarting a random live timer (one at a time, and in batches of
 * equal deadlines) and expiry throughput (timers laid out in start order,
 * shuffled, or all with one deadline), for every tickloop timer backend and
 * the peers, in thread CPU time, median of rounds.
 */
#include <algorithm>
#include <cinttypes>
#include <memory>

#include "job.h"
#include "ops.h"
#include "peers.h"

namespace bench::job {

namespace {

/* The rows of a timer-operation workload: every tickloop timer backend
   (on the first I/O kind only: the workload never polls), then libev,
   libuv and Asio, then libevent in its helper. Each round of a row makes a
   fresh loop and runs measure(ops, round, r) on it. */
template <class Measure>
std::vector<RunRound> ops_runners(Job &job, const char *workload, Measure measure) {
    auto runner = [workload, measure](auto make, const char *family) -> RunRound {
        return [=](size_t round) {
            auto ops = make();
            Result r;
            r.impl = ops->name();
            r.family = family;
            r.workload = workload;
            if (!ops->ok())
                r.skipped = ops->error();
            else
                measure(*ops, round, r);
            return std::vector<Result>{r};
        };
    };
    std::vector<RunRound> runners;
    for (const TlConfig &cfg : job.configs) {
        if (cfg.io.kind != job.configs.front().io.kind) continue;
        std::string timers = cfg.timers;
        tl_io_kind io = cfg.io.kind;
        runners.push_back(
            runner([timers, io] { return std::make_unique<TickloopOps>(timers.c_str(), io); },
                   "tickloop"));
    }
#if TL_BENCH_HAVE_LIBEV
    runners.push_back(runner([] { return std::make_unique<LibevOps>(); }, "peer"));
#endif
#if TL_BENCH_HAVE_LIBUV
    runners.push_back(runner([] { return std::make_unique<LibuvOps>(); }, "peer"));
#endif
#if TL_BENCH_HAVE_ASIO
    runners.push_back(runner([] { return std::make_unique<AsioOps>(); }, "peer"));
#else
    runners.push_back([workload](size_t) { return asio_missing(workload); });
#endif
    runners.push_back(
        [&, workload](size_t round) { return libevent_run(job.opt, workload, round); });
    return runners;
}

static void print_ops_table(const char *title, const std::vector<Result> &rows,
                            const char *op_label) {
    std::printf("\n== %s ==\n", title);
    double best = 0;
    std::string best_name;
    for (const Result &r : rows) {
        if (r.family != "peer" || !r.skipped.empty() || r.round_ns_per_op.size() < kMinRounds)
            continue;
        double ns = median_ns_per_op(r);
        if (best == 0 || ns < best) best = ns, best_name = r.impl;
    }
    std::printf("%-32s %9s %9s %9s %9s\n", "impl", "live", op_label, "ns/op", "vs peer");
    for (const Result &r : rows) {
        if (!r.skipped.empty()) {
            std::printf("%-32s skipped: %s\n", r.impl.c_str(), r.skipped.c_str());
            continue;
        }
        double ns = median_ns_per_op(r);
        bool compare = r.family == "tickloop" && r.round_ns_per_op.size() >= kMinRounds;
        std::printf("%-32s %9" PRIu64 " %9" PRIu64 " %9.1f %9s\n", r.impl.c_str(), r.population,
                    r.ops, ns, compare ? ratio(ns, best).c_str() : "");
    }
    if (best > 0)
        std::printf("best peer: %s (%.1f ns/op); vs peer: our ns/op over its (below 1: faster), "
                    "from %zu timed rounds or more on both sides\n",
                    best_name.c_str(), best, kMinRounds);
    std::fflush(stdout);
}

} // namespace

void run_restart(Job &job) {
    Options &opt = job.opt;
    for (size_t population : opt.restart_populations)
        for (bool batched : {false, true}) {
            opt.params.restart_population = population;
            RestartPlan plan = restart_plan(opt.params);
            const char *workload = batched ? "restart-batch" : "restart";
            /* The batched variant times fewer rounds of the same slices:
               its budget in the default run is a few seconds. */
            size_t rounds = batched ? std::min(kRestartBatchRounds, opt.params.restart_rounds)
                                    : opt.params.restart_rounds;
            /* One round of one library: a fresh population, a slice of
               the plan's restarts timed. */
            std::vector<RunRound> runners =
                ops_runners(job, workload, [&, batched](auto &ops, size_t round, Result &r) {
                    size_t begin, end;
                    restart_round(plan, round, opt.params.restart_rounds, &begin, &end);
                    measure_restart(ops, plan, begin, end, r, batched ? kRestartBatch : 0);
                });
            char title[240];
            if (batched)
                std::snprintf(title, sizeof title,
                              "restart in batches of equal deadlines: %zu live, batches of %zu "
                              "restarts sharing one cached time and one delay, %zu rounds of "
                              "%zu (thread CPU time, median of rounds)",
                              population, kRestartBatch, rounds,
                              opt.params.restart_ops / opt.params.restart_rounds);
            else
                std::snprintf(title, sizeof title,
                              "restart a random live timer: %zu live, deadlines 1 s - 10 min, "
                              "%zu restarts in %zu rounds (thread CPU time, median of rounds)",
                              population, opt.params.restart_ops, rounds);
            print_ops_table(title, run_rounds(job, runners, rounds), "restarts");
        }
}

void run_expire(Job &job) {
    Options &opt = job.opt;
    for (size_t population : opt.expire_populations)
        for (int layout : {0, 1, 2}) {
            bool shuffled = layout == 1, equal = layout == 2;
            opt.params.expire_population = population;
            ExpirePlan plan = expire_plan(opt.params, shuffled, equal);
            const char *workload = equal ? "expire-equal" : shuffled ? "expire-shuffled" : "expire";
            std::vector<RunRound> runners =
                ops_runners(job, workload, [&](auto &ops, size_t, Result &r) {
                    measure_expire(ops, plan, opt.params.expire_window, r);
                });
            char title[200];
            if (equal)
                std::snprintf(title, sizeof title,
                              "expiry throughput: %zu timers, all with one deadline, fired by "
                              "non-blocking iterations, memory in start order (thread CPU "
                              "time, median of %zu rounds)",
                              population, opt.params.expire_rounds);
            else
                std::snprintf(title, sizeof title,
                              "expiry throughput: %zu timers due within %" PRIu64
                              " ms, fired by non-blocking iterations, memory in %s (thread "
                              "CPU time, median of %zu rounds)",
                              population, opt.params.expire_window / kMs,
                              shuffled ? "shuffled order" : "start order",
                              opt.params.expire_rounds);
            print_ops_table(title, run_rounds(job, runners, opt.params.expire_rounds), "expiries");
        }
}

} // namespace bench::job
