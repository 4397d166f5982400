/* SPDX-License-Identifier: MIT */
/*
 * lateness_rows.cc: tickloop-bench's lateness rows and their tables: every
 * tickloop configuration, the kernel floor (kernel_floor.cc) and the peers,
 * on the chain and open workloads (one table each, rows interleaved in
 * rounds) and on the wait sweep (lone timers of one length at a time, rows
 * side by side). Lateness is defined in latency.h.
 */
#include <algorithm>
#include <cinttypes>
#include <cstring>
#include <memory>

#include <sys/prctl.h>

#include "job.h"
#include "ops.h"
#include "peers.h"

namespace bench::job {

std::string slack_tag(uint64_t slack_ns) {
    return " slack " + std::to_string(slack_ns) + "ns";
}

/* ------------------------------------------------------------------------ */
/* tickloop                                                                 */
/* ------------------------------------------------------------------------ */

/* Sets (value != NULL) or unsets name, returning its previous value. */
static std::string swap_env(const char *name, const char *value, bool *was_set) {
    const char *old = std::getenv(name);
    *was_set = old != nullptr;
    std::string saved = old ? old : "";
    if (value)
        setenv(name, value, 1);
    else
        unsetenv(name);
    return saved;
}

/* TickloopOps with the latency methods of ops.h: each deadline checked
   against tl_now() + delay, the loop's own counts (tl_loop_stats), and a
   failed start or run written into the row's note rather than ending the
   job. */
struct TlLatencyOps : TickloopOps {
    tl_loop_stats before{};
    int start_error = 0;
    size_t deadline_mismatch = 0; /* t.deadline != tl_now() + delay */
    int run_status = 0;

    explicit TlLatencyOps(const tl_loop_options &opts) : TickloopOps(opts) {}

    static void on_fire(tl_loop *, tl_timer *t) {
        uint64_t now = mono_ns(); /* first: the library's own work is not ours */
        static_cast<FireSink *>(t->data)->fire(now);
    }
    void init_fire(tl_timer &t, FireSink *sink) { tl_timer_init(&t, on_fire, sink); }
    uint64_t arm(tl_timer &t, uint64_t delay_ns) {
        uint64_t deadline = tl_now(loop) + delay_ns;
        if (int rc = tl_timer_start(loop, &t, delay_ns, 0)) start_error = rc;
        if (t.deadline != deadline) ++deadline_mismatch;
        return deadline;
    }
    /* TickloopOps::run, keeping tl_loop_run's status for the note. */
    void run() { run_status = tl_loop_run(loop, TL_RUN_DEFAULT); }
    std::string latency_note() const { return ""; }
    void latency_begin() { tl_loop_stats_get(loop, &before); }
    void latency_end(Result &r) {
        tl_loop_stats after;
        tl_loop_stats_get(loop, &after);
        r.waits = after.iterations - before.iterations;
        r.fired = after.timers_fired - before.timers_fired;
        if (run_status < 0) r.note += std::string("tl_loop_run: ") + tl_strerror(run_status) + "; ";
        if (start_error)
            r.note += std::string("tl_timer_start: ") + tl_strerror(start_error) + "; ";
        if (deadline_mismatch)
            r.note += "tl_timer.deadline differed from tl_now()+delay " +
                      std::to_string(deadline_mismatch) + " times; ";
    }
};

/* The loop of one row, made with cfg's options; for a relative row with
   the relative-wait fallbacks switched on while it is made. */
static std::unique_ptr<TlLatencyOps> tl_open(const TlConfig &cfg) {
    tl_loop_options opts;
    tl_loop_options_init(&opts);
    opts.io = cfg.io.kind;
    opts.timers = cfg.timers.c_str();
    opts.tick_ns = cfg.tick_ns;
    opts.timer_slack_ns = cfg.slack_ns;
    std::lock_guard<std::mutex> lock(env_mutex);
    if (!cfg.relative) return std::make_unique<TlLatencyOps>(opts);
    static const char *const vars[] = {"TICKLOOP_EPOLL_TIMERFD", "TICKLOOP_URING_ABS_TIMER"};
    std::string saved[2];
    bool was_set[2];
    for (int i = 0; i < 2; ++i) saved[i] = swap_env(vars[i], "0", &was_set[i]);
    auto ops = std::make_unique<TlLatencyOps>(opts);
    for (int i = 0; i < 2; ++i) {
        bool ignored;
        swap_env(vars[i], was_set[i] ? saved[i].c_str() : nullptr, &ignored);
    }
    return ops;
}

/* One latency row of a tickloop configuration: workload "chain" (also the
   sweep's rows) or "open", over delays. */
static Result tl_latency(const TlConfig &cfg, const char *workload,
                         const std::vector<uint64_t> &delays) {
    Result r;
    r.impl = "tickloop " + cfg.timers + "/" + cfg.io.name;
    if (cfg.tick_ns) r.impl += " tick " + std::to_string(cfg.tick_ns) + "ns";
    if (cfg.slack_ns) r.impl += slack_tag(cfg.slack_ns);
    if (cfg.relative) r.impl += " relative";
    r.family = "tickloop";
    r.workload = workload;
    std::unique_ptr<TlLatencyOps> ops = tl_open(cfg);
    measure_latency(*ops, std::strcmp(workload, "chain") == 0, delays, r);
    return r;
}

/* ------------------------------------------------------------------------ */
/* libev, libuv and Asio                                                    */
/* ------------------------------------------------------------------------ */

/* One latency row of a peer in this process, through its adapter (ops.h);
   the loop is made under env_mutex (libev reads LIBEV_FLAGS then). */
template <class Ops>
Result peer_latency(const char *workload, const std::vector<uint64_t> &delays) {
    std::unique_ptr<Ops> ops;
    {
        std::lock_guard<std::mutex> lock(env_mutex);
        ops = std::make_unique<Ops>();
    }
    Result r;
    r.impl = ops->name();
    r.family = "peer";
    r.workload = workload;
    measure_latency(*ops, std::strcmp(workload, "chain") == 0, delays, r);
    return r;
}

/* ------------------------------------------------------------------------ */
/* chain and open                                                           */
/* ------------------------------------------------------------------------ */

/* The kernel row a tickloop row's waits compare with: an absolute timer
   without slack (epoll's timerfd, io_uring's absolute wait) or, for the
   relative fallback on epoll, epoll_pwait2. */
static const char *kernel_floor(const Result &r) {
    bool relative_epoll =
        r.impl.find("/epoll") != std::string::npos && r.impl.find(" relative") != std::string::npos;
    return relative_epoll ? "kernel epoll_pwait2" : "kernel timerfd";
}

static void print_latency_table(const char *title, const std::vector<Result> &rows) {
    std::printf("\n== %s ==\n", title);
    /* The best peer per column, excluding the kernel floor (not a library). */
    const Result *best50 = nullptr, *best99 = nullptr;
    std::vector<Stats> stats;
    for (const Result &r : rows) stats.push_back(stats_of(r.lateness));
    for (size_t i = 0; i < rows.size(); ++i) {
        if (rows[i].family != "peer" || !rows[i].skipped.empty()) continue;
        if (stats[i].n >= kMinSamples && (!best50 || stats[i].p50 < stats_of(best50->lateness).p50))
            best50 = &rows[i];
        if (stats[i].n >= kMinTailSamples &&
            (!best99 || stats[i].p99 < stats_of(best99->lateness).p99))
            best99 = &rows[i];
    }
    int64_t b50 = best50 ? stats_of(best50->lateness).p50 : 0;
    int64_t b99 = best99 ? stats_of(best99->lateness).p99 : 0;
    /* The floor a row is held to: the kernel mechanism its waits use, with
       no loop around it (kernel_floor()). */
    auto floor_p99 = [&](const Result &r, int64_t *out) {
        const char *floor = kernel_floor(r);
        size_t tag = r.impl.find(" slack ");
        std::string want = tag == std::string::npos || std::strcmp(floor, "kernel timerfd") == 0
                               ? ""
                               : r.impl.substr(tag);
        for (size_t i = 0; i < rows.size(); ++i) {
            const Result &k = rows[i];
            if (k.family != "kernel" || k.impl.rfind(floor, 0) != 0 || !k.skipped.empty() ||
                stats[i].n < kMinTailSamples)
                continue;
            size_t ktag = k.impl.find(" slack ");
            if ((ktag == std::string::npos ? "" : k.impl.substr(ktag)) != want) continue;
            *out = stats[i].p99;
            return true;
        }
        return false;
    };
    std::printf("%-32s %6s %8s %8s %8s %8s %8s %5s %9s %9s %9s %9s\n", "lateness in us", "n", "p50",
                "p90", "p99", "p99.9", "max", "early", "waits/exp", "p50/peer", "p99/peer",
                "p99-floor");
    for (size_t i = 0; i < rows.size(); ++i) {
        const Result &r = rows[i];
        if (!r.skipped.empty()) {
            std::printf("%-32s skipped: %s\n", r.impl.c_str(), r.skipped.c_str());
            continue;
        }
        const Stats &s = stats[i];
        char waits[32];
        std::snprintf(waits, sizeof waits, "%.2f",
                      r.fired ? (double)r.waits / (double)r.fired : 0.0);
        bool ours = r.family == "tickloop";
        int64_t floor99 = 0;
        bool tail = s.n >= kMinTailSamples;
        std::string above_floor = ours && tail && floor_p99(r, &floor99) ? us(s.p99 - floor99) : "";
        std::string r50 = ours && s.n >= kMinSamples ? ratio((double)s.p50, (double)b50) : "";
        std::string r99 = ours && tail ? ratio((double)s.p99, (double)b99) : "";
        std::printf("%-32s %6zu %8s %8s %8s %8s %8s %5zu %9s %9s %9s %9s\n", r.impl.c_str(), s.n,
                    us(s.p50).c_str(), us(s.p90).c_str(), us(s.p99).c_str(), us(s.p999).c_str(),
                    us(s.max).c_str(), s.early, waits, r50.c_str(), r99.c_str(),
                    above_floor.c_str());
    }
    if (best50)
        std::printf("p50/peer, p99/peer: tickloop's figure over the best peer's (below 1: "
                    "tickloop is less late); best peer: p50 %s (%s us), p99 %s (%s us); "
                    "p99-floor: p99 minus the p99 of the kernel mechanism the row waits with "
                    "(timerfd for absolute waits: epoll's default and io_uring; epoll_pwait2 at "
                    "the same timer slack for the relative rows), in us; p50 compared from "
                    "%zu samples per row, p99 from %zu\n",
                    best50->impl.c_str(), us(b50).c_str(), best99 ? best99->impl.c_str() : "-",
                    us(b99).c_str(), kMinSamples, kMinTailSamples);
    for (const Result &r : rows)
        if (!r.note.empty() && r.skipped.empty())
            std::printf("note: %s: %s\n", r.impl.c_str(), r.note.c_str());
    std::fflush(stdout);
}

/* One latency workload, "chain" or "open": every row in rounds, then its
   table. */
static void latency_workload(Job &job, const char *workload, const std::string &title) {
    bool chain = std::strcmp(workload, "chain") == 0;
    const Options &opt = job.opt;
    const Params &p = opt.params;
    auto delays = [&, chain](size_t round) {
        return chain ? chain_delays(p, round) : open_delays(p, round);
    };
    std::vector<RunRound> runners;
    for (const TlConfig &cfg : job.configs)
        runners.push_back([&, cfg](size_t round) {
            return std::vector<Result>{tl_latency(cfg, workload, delays(round))};
        });
    /* The chain's relative rows: epoll's only (io_uring's relative wait
       has no slack either; the sweep shows it), 2.6 s of the budget. */
    if (chain)
        for (const TlConfig &cfg : job.relative_configs)
            if (cfg.io.kind == TL_IO_EPOLL)
                runners.push_back([&, cfg](size_t round) {
                    return std::vector<Result>{tl_latency(cfg, "chain", delays(round))};
                });
    for (KernelWait how : {KernelWait::nanosleep, KernelWait::epoll, KernelWait::timerfd})
        runners.push_back([&, how](size_t round) {
            return std::vector<Result>{kernel_latency(how, workload, delays(round))};
        });
    /* The chain once more at a timer slack of fine_slack_ns: tickloop
       through its loop option, the floor through prctl; both put the
       thread's slack back, so the other rows keep the default. */
    if (chain && opt.fine_slack_ns) {
        for (const TlConfig &cfg : job.configs) {
            if (cfg.io.kind != job.configs.front().io.kind) continue; /* one I/O kind */
            if (!wanted(opt.fine_slack_timers, cfg.timers)) continue;
            TlConfig fine = cfg;
            fine.slack_ns = opt.fine_slack_ns;
            runners.push_back([&, fine](size_t round) {
                Result r = tl_latency(fine, "chain", delays(round));
                prctl(PR_SET_TIMERSLACK, (unsigned long)job.slack);
                return std::vector<Result>{r};
            });
        }
        runners.push_back([&](size_t round) {
            prctl(PR_SET_TIMERSLACK, (unsigned long)opt.fine_slack_ns);
            Result r = kernel_latency(KernelWait::epoll, "chain", delays(round));
            prctl(PR_SET_TIMERSLACK, (unsigned long)job.slack);
            r.impl += slack_tag(opt.fine_slack_ns);
            return std::vector<Result>{r};
        });
    }
#if TL_BENCH_HAVE_LIBEV
    runners.push_back([&](size_t round) {
        return std::vector<Result>{peer_latency<LibevOps>(workload, delays(round))};
    });
#endif
#if TL_BENCH_HAVE_LIBUV
    runners.push_back([&](size_t round) {
        return std::vector<Result>{peer_latency<LibuvOps>(workload, delays(round))};
    });
#endif
#if TL_BENCH_HAVE_ASIO
    runners.push_back([&](size_t round) {
        return std::vector<Result>{peer_latency<AsioOps>(workload, delays(round))};
    });
#else
    runners.push_back([workload](size_t) { return asio_missing(workload); });
#endif
    runners.push_back([&](size_t round) { return libevent_run(opt, workload, round); });
    print_latency_table(title.c_str(), run_rounds(job, runners, p.rounds));
}

/* The chain, then the open workload, each if wanted. */
void run_latency(Job &job) {
    if (wanted(job.opt.only, "chain")) {
        char title[160];
        std::snprintf(title, sizeof title,
                      "chain: %zu one-shot timers in sequence (%zu rounds), delays log-uniform "
                      "100 us - 10 ms",
                      job.opt.params.chain_count, job.opt.params.rounds);
        latency_workload(job, "chain", title);
    }
    if (wanted(job.opt.only, "open")) {
        char title[160];
        std::snprintf(
            title, sizeof title,
            "open: %zu rounds of %zu timers armed at once, delays uniform %" PRIu64 " ms - %" PRIu64
            " ms",
            job.opt.params.rounds, job.opt.params.open_count / job.opt.params.rounds,
            job.opt.params.open_min / kMs,
            (job.opt.params.open_min + job.opt.params.open_window / job.opt.params.rounds) / kMs);
        latency_workload(job, "open", title);
    }
}

/* ------------------------------------------------------------------------ */
/* The wait sweep                                                           */
/* ------------------------------------------------------------------------ */

/* One wait length: every row waits `count` lone timers of that length, one
   after the other. The rows run side by side, one thread (libevent: one
   helper process) each, started 20 ms in and spread out so that their wake-ups seldom
   coincide: the sweep is mostly sleep, and running the rows in turn would
   take 15 rows x 14 s. */
static std::vector<Result> sweep_length(const Options &opt, const std::vector<TlConfig> &configs,
                                        const SweepLength &len, size_t count) {
    using Row = std::function<std::vector<Result>(const Params &)>;
    std::vector<Row> rows;
    for (const TlConfig &cfg : configs)
        rows.push_back([cfg](const Params &p) {
            sweep_start(p);
            return std::vector<Result>{tl_latency(cfg, "chain", sweep_delays(p))};
        });
    for (KernelWait how : {KernelWait::timerfd, KernelWait::epoll})
        rows.push_back([how](const Params &p) {
            sweep_start(p);
            return std::vector<Result>{kernel_latency(how, "chain", sweep_delays(p))};
        });
#if TL_BENCH_HAVE_LIBEV
    rows.push_back([](const Params &p) {
        sweep_start(p);
        return std::vector<Result>{peer_latency<LibevOps>("chain", sweep_delays(p))};
    });
#endif
#if TL_BENCH_HAVE_LIBUV
    rows.push_back([](const Params &p) {
        sweep_start(p);
        return std::vector<Result>{peer_latency<LibuvOps>("chain", sweep_delays(p))};
    });
#endif
#if TL_BENCH_HAVE_ASIO
    rows.push_back([](const Params &p) {
        sweep_start(p);
        return std::vector<Result>{peer_latency<AsioOps>("chain", sweep_delays(p))};
    });
#endif
    for (int precise : {0, 1})
        rows.push_back([&opt, precise](const Params &p) {
            Params q = p;
            q.libevent_precise = precise;
            return libevent_run(opt, "sweep", 0, &q); /* the helper waits the offset */
        });
    /* Rows wake `spacing` apart: 1/64 of the wait, within [97 us, 5 ms]. At
       a fixed 97 us the 16 rows of a 5 s wait would wake within 1.5 ms and
       queue for the 2 CPUs, which shows as lateness of the later rows. */
    uint64_t spacing = std::min<uint64_t>(std::max<uint64_t>(len.ns / 64, 97 * kUs), 5 * kMs);
    std::vector<std::vector<Result>> got(rows.size());
    std::vector<std::thread> threads;
    for (size_t i = 0; i < rows.size(); ++i) {
        Params p = opt.params;
        p.sweep_ns = len.ns;
        p.sweep_count = count;
        /* 20 ms first: thread and helper start-up stays out of the waits. */
        p.sweep_offset_ns = 20 * kMs + i * spacing;
        threads.emplace_back([&, i, p] { got[i] = rows[i](p); });
    }
    for (std::thread &t : threads) t.join();
    std::vector<Result> out;
    for (auto &results : got)
        for (Result &r : results) {
            r.workload = std::string("sweep-") + len.label;
            out.push_back(std::move(r));
        }
    return out;
}

/* One table for the whole sweep: per wait length, p50 and max lateness, and
   p50 over the absolute-timerfd floor's. */
static void print_sweep_table(const std::vector<Result> &rows) {
    std::vector<std::string> impls;
    for (const Result &r : rows)
        if (std::find(impls.begin(), impls.end(), r.impl) == impls.end()) impls.push_back(r.impl);
    auto find = [&](const std::string &impl, const std::string &workload) -> const Result * {
        for (const Result &r : rows)
            if (r.impl == impl && r.workload == workload) return &r;
        return nullptr;
    };
    std::printf("\n== wait sweep: lone timers, one wait at a time; each cell: p50 lateness in "
                "us, [p50 minus kernel timerfd's p50, with %zu samples or more on both], max "
                "==\n%-32s",
                kMinSamples, "");
    for (const SweepLength &len : kSweep) std::printf(" %24s", len.label);
    std::printf(" %5s\n", "early");
    for (const std::string &impl : impls) {
        std::printf("%-32s", impl.c_str());
        size_t early = 0;
        std::string skipped;
        for (const SweepLength &len : kSweep) {
            std::string workload = std::string("sweep-") + len.label;
            const Result *r = find(impl, workload);
            const Result *floor = find("kernel timerfd", workload);
            char cell[64] = "-";
            if (r && !r->skipped.empty()) skipped = r->skipped;
            if (r && r->skipped.empty() && !r->lateness.empty()) {
                Stats st = stats_of(r->lateness);
                early += st.early;
                Stats fl = floor && floor->skipped.empty() ? stats_of(floor->lateness) : Stats{};
                if (fl.n >= kMinSamples && st.n >= kMinSamples && r->family != "kernel")
                    std::snprintf(cell, sizeof cell, "%s [%+.1f] %s", us(st.p50).c_str(),
                                  (double)(st.p50 - fl.p50) / 1e3, us(st.max).c_str());
                else
                    std::snprintf(cell, sizeof cell, "%s %s", us(st.p50).c_str(),
                                  us(st.max).c_str());
            }
            std::printf(" %24s", cell);
        }
        std::printf(" %5zu%s\n", early, skipped.empty() ? "" : (" skipped: " + skipped).c_str());
    }
    std::printf("samples per row:");
    for (const SweepLength &len : kSweep) {
        const Result *r = find("kernel timerfd", std::string("sweep-") + len.label);
        if (r) std::printf(" %s %zu", len.label, r->lateness.size());
    }
    std::printf("; rows ran side by side (one thread or process each); trust p50 over max\n");
    std::fflush(stdout);
}

/* Every wait length of the sweep in turn, then one table for them all. */
void run_sweep(Job &job) {
    std::vector<TlConfig> sweep_configs = job.configs;
    sweep_configs.insert(sweep_configs.end(), job.relative_configs.begin(),
                         job.relative_configs.end());
    std::vector<Result> rows;
    for (const SweepLength &len : kSweep) {
        std::vector<Result> got =
            sweep_length(job.opt, sweep_configs, len, job.opt.full ? len.full_count : len.count);
        for (Result &r : got) {
            rows.push_back(r);
            job.all.push_back(std::move(r));
        }
    }
    print_sweep_table(rows);
}

} // namespace bench::job
