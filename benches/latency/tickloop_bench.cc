/* SPDX-License-Identifier: MIT */
/*
 * tickloop_bench.cc: tickloop-bench, the one-command benchmark job (main;
 * job.h lists its other parts).
 *
 * What it measures, in one run and one table per workload:
 *  - timer lateness for every tickloop timer backend x every I/O backend that
 *    can be created here (both enumerated at run time), next to the kernel's
 *    own floor (clock_nanosleep(TIMER_ABSTIME), epoll_pwait2 and a timerfd
 *    doing the same waits with no event loop around them) and the peers:
 *    libev, libuv, Asio (asio::steady_timer on its default reactor), and
 *    libevent with and without EVENT_BASE_FLAG_PRECISE_TIMER (libevent runs
 *    in the helper executable tickloop-bench-libevent, see
 *    tickloop_bench_libevent.cc);
 *      chain: one timer at a time, each callback arms the next one with a
 *             random delay (log-uniform, 100 us - 10 ms);
 *      open:  hundreds of timers (800 per round) armed at once with random
 *             delays, measured as they fire;
 *    reported as p50/p90/p99/p99.9/max lateness, early fires (must be 0) and
 *    kernel waits per expiry (tickloop: tl_loop_stats iterations; peers:
 *    epoll waits counted by wait_counter.cc; kernel rows: their own waits);
 *    the chain is run a second time for heap4 and hwheel (epoll) and the
 *    epoll_pwait2 floor with a timer slack of 1 ns
 *    (tl_loop_options.timer_slack_ns; rows tagged "slack 1ns"), so both
 *    settings are shown;
 *  - the cost of restarting a random live timer among 1e5 (and 1e6 with
 *    --full), and expiry throughput (1e5 timers due at once, and 1e6 with
 *    --full; timers laid out in memory in start order and shuffled), for the
 *    same set of libraries.
 * Lateness is defined in latency.h. Every row waits the same schedule (same
 * seed), in rounds that interleave the rows (so a burst of load elsewhere on
 * the machine hits them alike); still, the machine is shared and noisy:
 * compare rows of one run, and trust p50/p90 over the tail.
 *
 * Exit status: 1 if any tickloop timer fired early (or on a usage error).
 *
 * Usage: tickloop-bench [--json FILE] [--full] [--only chain,open,restart,expire]
 *        [--timers heap2,...] [--io epoll,...] [--tick-ns N]
 *        [--timerslack NS] [--seed=N] [--chain-count=N] ...  (--help)
 */
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <sys/prctl.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <tickloop/timer_backend.h>

#include "job.h"

using namespace bench;
using namespace bench::job;

namespace {

void usage(const char *argv0) {
    std::printf(
        "usage: %s [options]\n"
        "  --out DIR              write results.json, report.txt, summary.txt and the plots\n"
        "                         into DIR (default: results/<UTC time>/ in the build\n"
        "                         directory, beside benches/)\n"
        "  --no-plots             leave out the plots (benches/tools/plot.py, python3-matplotlib)\n"
        "  --json FILE            also write results.json to FILE\n"
        "  --full                 longer run: 5x the samples, restart and expire at 1e5 and 1e6\n"
        "  --only LIST            workloads among chain,open,sweep,restart,expire (default: all)\n"
        "  --fine-slack NS        the timer slack of the chain's second set of rows (default 0:\n"
        "                         no second set)\n"
        "  --fine-slack-timers LIST  backends in that set (default heap4,hwheel)\n"
        "  --timers LIST          tickloop timer backends (default: all registered)\n"
        "  --io LIST              tickloop I/O kinds among epoll,io_uring (default: all)\n"
        "  --tick-ns N            tl_loop_options.tick_ns for the wheels (default: library's)\n"
        "  --timerslack NS        set this process's timer slack first (prctl; inherited)\n"
        "  --libevent-helper PATH the libevent helper (default: next to this executable)\n"
        "  --seed=N --chain-count=N --open-count=N --open-window-ms=N --rounds=N\n"
        "  --restart-population=N --restart-ops=N --restart-rounds=N\n"
        "  --expire-population=N --expire-rounds=N   workload sizes\n",
        argv0);
}

/* Reads the command line into opt; returns -1 to go on, else the exit
   status (0 after --help, 2 on a usage error). */
int parse_options(int argc, char **argv, Options &opt) {
    bool restart_population_set = false, expire_population_set = false;
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i];
        auto next = [&]() -> const char * {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "%s needs a value\n", a);
                std::exit(2);
            }
            return argv[++i];
        };
        if (!std::strcmp(a, "--help") || !std::strcmp(a, "-h")) {
            usage(argv[0]);
            return 0;
        } else if (!std::strcmp(a, "--json"))
            opt.json = next();
        else if (!std::strcmp(a, "--out"))
            opt.out_dir = next();
        else if (!std::strcmp(a, "--no-plots"))
            opt.plots = false;
        else if (!std::strcmp(a, "--full"))
            opt.full = true;
        else if (!std::strcmp(a, "--only"))
            opt.only = split(next());
        else if (!std::strcmp(a, "--timers"))
            opt.timers = split(next());
        else if (!std::strcmp(a, "--io"))
            opt.io = split(next());
        else if (!std::strcmp(a, "--tick-ns"))
            opt.tick_ns = std::strtoull(next(), nullptr, 10);
        else if (!std::strcmp(a, "--fine-slack-timers"))
            opt.fine_slack_timers = split(next());
        else if (!std::strcmp(a, "--fine-slack"))
            opt.fine_slack_ns = std::strtoull(next(), nullptr, 10);
        else if (!std::strcmp(a, "--timerslack"))
            opt.timerslack = std::strtol(next(), nullptr, 10);
        else if (!std::strcmp(a, "--libevent-helper"))
            opt.helper = next();
        else if (!std::strncmp(a, "--expire-population=", 20)) {
            parse_param(a, opt.params);
            opt.expire_populations = {opt.params.expire_population};
            expire_population_set = true;
        } else if (!std::strncmp(a, "--restart-population=", 21)) {
            parse_param(a, opt.params);
            opt.restart_populations = {opt.params.restart_population};
            restart_population_set = true;
        } else if (!parse_param(a, opt.params)) {
            std::fprintf(stderr, "unknown argument %s (see --help)\n", a);
            return 2;
        }
    }
    if (opt.full) {
        opt.params.chain_count *= 5;
        opt.params.open_count *= 5;
        opt.params.open_window *= 5;
        if (!restart_population_set) opt.restart_populations = {100000, 1000000};
        if (!expire_population_set) opt.expire_populations = {100000, 1000000};
    }
    return -1;
}

/* The tickloop configurations: every registered backend x every I/O kind
   whose loop can be created here; then the relative-wait fallback of each
   I/O kind, for the default backend, in the same run as the absolute
   deadlines. Prints the registered backends. */
void make_configs(Job &job) {
    const Options &opt = job.opt;
    size_t n_backends = tl_timer_backend_names(nullptr, 0);
    std::vector<const char *> names(n_backends);
    tl_timer_backend_names(names.data(), n_backends);
    for (const IoKind &io : kIoKinds) {
        if (!wanted(opt.io, io.name)) continue;
        tl_loop *probe;
        tl_loop_options o;
        tl_loop_options_init(&o);
        o.io = io.kind;
        if (int rc = tl_loop_new(&probe, &o)) {
            std::string note = std::string("tickloop I/O kind ") + io.name +
                               " skipped: tl_loop_new returned " + tl_strerror(rc);
            std::printf("note: %s\n", note.c_str());
            job.notes.push_back(note);
            continue;
        }
        tl_loop_free(probe);
        for (const char *name : names)
            if (wanted(opt.timers, name)) job.configs.push_back({io, name, opt.tick_ns});
    }
    for (const TlConfig &cfg : job.configs)
        if (cfg.timers == "heap4") {
            TlConfig rel = cfg;
            rel.relative = true;
            job.relative_configs.push_back(rel);
        }
    std::string backends_list;
    for (const char *name : names)
        backends_list += std::string(backends_list.empty() ? "" : ",") + name;
    std::printf("timer backends registered: %s\n", backends_list.c_str());
    std::fflush(stdout);
}

/* results.json's "meta" object. */
std::string meta_json(const Job &job, const utsname &un, double took) {
    const Options &opt = job.opt;
    char meta[1200];
    std::snprintf(meta, sizeof meta,
                  "{\"tickloop\": %s, \"kernel\": %s, \"cpus\": %ld, \"timerslack_ns\": %ld, "
                  "\"fine_slack_ns\": %" PRIu64 ", \"seed\": %" PRIu64
                  ", \"chain_count\": %zu, \"open_count\": %zu, "
                  "\"open_min_ns\": %" PRIu64 ", \"open_window_ns\": %" PRIu64
                  ", \"restart_ops\": %zu, \"full\": %s, \"took_s\": %.1f, "
                  "\"min_samples\": %zu, \"min_tail_samples\": %zu, \"min_rounds\": %zu}",
                  json_str(tl_version()).c_str(), json_str(un.release).c_str(),
                  sysconf(_SC_NPROCESSORS_ONLN), job.slack, opt.fine_slack_ns, opt.params.seed,
                  opt.params.chain_count, opt.params.open_count, opt.params.open_min,
                  opt.params.open_window, opt.params.restart_ops, opt.full ? "true" : "false", took,
                  kMinSamples, kMinTailSamples, kMinRounds);
    return meta;
}

/* summary.txt: the verdicts, then the summary tables. */
void write_summary(FILE *f, const Job &job, const utsname &un, const std::string &answers) {
    std::fprintf(f, "tickloop-bench: tickloop %s, kernel %s, %ld CPUs, timer slack %ld ns%s\n",
                 tl_version(), un.release, sysconf(_SC_NPROCESSORS_ONLN), job.slack,
                 job.opt.full ? ", --full" : "");
    std::fprintf(f, "\n== verdicts ==\n%s", answers.c_str());
    print_summary(f, job.all);
    std::fprintf(f, "\nEvery table of the run: report.txt; every sample: results.json.\n");
}

/* Writes results.json (and --json's copy), summary.txt and the plots, then
   says where they are. Returns 0, or 1 if a file could not be written. */
int write_results(const Job &job, const utsname &un, const std::string &answers, double took) {
    const Options &opt = job.opt;
    std::string meta = meta_json(job, un, took);
    std::vector<std::string> written;
    std::string json = opt.out_dir + "/results.json";
    for (const std::string &path : {json, std::string(opt.json ? opt.json : "")}) {
        if (path.empty()) continue;
        if (!write_json(path.c_str(), meta, job.all, job.notes)) {
            std::fprintf(stderr, "cannot write %s: %s\n", path.c_str(), std::strerror(errno));
            return 1;
        }
        written.push_back(path);
    }
    std::string summary_path = opt.out_dir + "/summary.txt";
    if (FILE *f = std::fopen(summary_path.c_str(), "w")) {
        write_summary(f, job, un, answers);
        if (std::fclose(f) == 0) written.push_back(summary_path);
    } else {
        std::fprintf(stderr, "cannot write %s: %s\n", summary_path.c_str(), std::strerror(errno));
        return 1;
    }
    written.push_back(opt.out_dir + "/report.txt");
    std::string plots = opt.plots ? run_plots(opt.out_dir) : "plots skipped: --no-plots";
    if (!plots.empty()) std::printf("%s\n", plots.c_str());
    std::printf("results in %s/:", opt.out_dir.c_str());
    for (const std::string &path : written)
        std::printf(" %s", path.rfind(opt.out_dir + "/", 0) == 0
                               ? path.substr(opt.out_dir.size() + 1).c_str()
                               : path.c_str());
    if (plots.empty()) print_pngs(opt.out_dir);
    std::printf("\n");
    return 0;
}

} // namespace

int main(int argc, char **argv) {
    Job job;
    Options &opt = job.opt;
    opt.helper = default_helper();
    if (int status = parse_options(argc, argv, opt); status >= 0) return status;
    if (opt.timerslack >= 0 && prctl(PR_SET_TIMERSLACK, (unsigned long)opt.timerslack) != 0) {
        std::perror("prctl(PR_SET_TIMERSLACK)");
        return 1;
    }
    if (opt.out_dir.empty()) opt.out_dir = default_out_dir();
    while (opt.out_dir.size() > 1 && opt.out_dir.back() == '/') opt.out_dir.pop_back();
    if (!make_dirs(opt.out_dir)) {
        std::fprintf(stderr, "cannot create %s: %s\n", opt.out_dir.c_str(), std::strerror(errno));
        return 1;
    }
    StdoutTee tee;
    if (!tee.open(opt.out_dir + "/report.txt")) {
        std::fprintf(stderr, "cannot write %s/report.txt: %s\n", opt.out_dir.c_str(),
                     std::strerror(errno));
        return 1;
    }

    uint64_t start = mono_ns();
    utsname un;
    uname(&un);
    job.slack = prctl(PR_GET_TIMERSLACK);
    std::printf(
        "tickloop-bench: tickloop %s, kernel %s, %ld CPUs, timer slack %ld ns, seed %" PRIu64
        "%s\nresults go to %s\nminimums: a p50 is compared from %zu lateness samples, a p99 "
        "from %zu, an operation cost from %zu timed rounds; fewer are shown, never compared\n",
        tl_version(), un.release, sysconf(_SC_NPROCESSORS_ONLN), job.slack, opt.params.seed,
        opt.full ? ", --full" : "", opt.out_dir.c_str(), kMinSamples, kMinTailSamples, kMinRounds);
    job.notes.push_back("Timer slack (" + std::to_string(job.slack) +
                        " ns) delays every epoll and nanosleep wait by up to that much; timerfd "
                        "expiries (libevent precise) are exempt.");
    make_configs(job);

    run_latency(job);
    if (wanted(opt.only, "sweep")) run_sweep(job);
    if (wanted(opt.only, "restart")) run_restart(job);
    if (wanted(opt.only, "expire")) run_expire(job);

    print_summary(stdout, job.all);
    std::string answers = verdicts(job.all);
    std::printf("\n== verdicts ==\n%s", answers.c_str());
    double took = (double)(mono_ns() - start) / 1e9;
    std::printf("\ntook %.1f s\n", took);
    if (int status = write_results(job, un, answers, took)) return status;
    tee.close_tee();

    /* Early fires break the contract: make the run fail so CI notices. */
    for (const Result &r : job.all)
        if (r.family == "tickloop" && stats_of(r.lateness).early) return 1;
    return 0;
}
