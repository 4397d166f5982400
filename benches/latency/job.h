/* SPDX-License-Identifier: MIT */
/*
 * job.h: what the parts of tickloop-bench, the main job, share: its options,
 * the tickloop configurations it measures, the state of one run (Job), and
 * the functions each part gives the others.
 *
 *   tickloop_bench.cc   main: options, configurations, the workloads in order
 *   runner.cc           rounds that interleave the rows; libevent's helper
 *   lateness_rows.cc    the chain, open and sweep rows and their tables
 *   kernel_floor.cc     the kernel's own waits, with no loop around them
 *   operation_rows.cc   the restart and expire rows and their table
 *   summary.cc          the one-screen summary
 *   verdicts.cc         one short answer per question the job asks
 *   results.cc          results.json, the results directory, report.txt
 *   plots.cc            the PNGs, drawn by tools/plot.py
 */
#ifndef TICKLOOP_BENCHES_JOB_H
#define TICKLOOP_BENCHES_JOB_H

#include <cstdint>
#include <cstdio>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <tickloop/tickloop.h>

#include "latency.h"

namespace bench::job {

struct Options {
    Params params;
    bool full = false;
    const char *json = nullptr; /* an extra copy of results.json */
    std::string out_dir;        /* where the results go; empty: the default */
    bool plots = true;
    std::vector<std::string> only;   /* workloads; empty: all        */
    std::vector<std::string> timers; /* backend filter; empty: all   */
    std::vector<std::string> io;     /* I/O kind filter; empty: all  */
    uint64_t tick_ns = 0;
    long timerslack = -1;
    std::string helper;
    std::vector<size_t> restart_populations{100000};
    std::vector<size_t> expire_populations{100000};
    /* The chain's second timer slack; 0 (the default): no such rows. Timed
       waits do not depend on the slack (absolute timers have none), so these
       rows matter for the relative fallback only. */
    uint64_t fine_slack_ns = 0;
    /* The backends shown at that setting: the default heap and the
       hierarchical wheel, one of each kind (all four would add 5 s). */
    std::vector<std::string> fine_slack_timers{"heap4", "hwheel"};
};

struct IoKind {
    tl_io_kind kind;
    const char *name;
};
/* Every I/O kind of the public enum except AUTO (which is one of these). */
constexpr IoKind kIoKinds[] = {{TL_IO_EPOLL, "epoll"}, {TL_IO_URING, "io_uring"}};

struct TlConfig {
    IoKind io;
    std::string timers;
    uint64_t tick_ns;
    uint64_t slack_ns = 0; /* tl_loop_options.timer_slack_ns */
    /* The relative-wait fallbacks (TICKLOOP_EPOLL_TIMERFD=0,
       TICKLOOP_URING_ABS_TIMER=0), which kernels without absolute waits
       get, shown beside the default absolute deadlines for comparison. */
    bool relative = false;
};

/* The three ways a thread can wait for an absolute CLOCK_MONOTONIC time.
   clock_nanosleep and epoll_pwait2 are subject to the thread's timer slack;
   a timerfd expiry is not, so its row is the floor without slack. */
enum class KernelWait { nanosleep, epoll, timerfd };

/* One run: its options, the configurations it measures, every row so far
   and the notes for results.json. */
struct Job {
    Options opt;
    long slack = 0; /* the thread's timer slack, as printed at the top */
    std::vector<TlConfig> configs;
    /* The relative-wait fallback of each I/O kind, default backend only. */
    std::vector<TlConfig> relative_configs;
    std::vector<Result> all;
    std::vector<std::string> notes;
};

/* One runner: its rows' share of one round. */
using RunRound = std::function<std::vector<Result>(size_t round)>;

/* runner.cc */
std::vector<std::string> split(const char *s);
bool wanted(const std::vector<std::string> &filter, const std::string &name);
/* Held while a loop of any library is created: tickloop reads its
   environment switches then, and the wait sweep creates loops in parallel
   threads while a relative row sets them. */
extern std::mutex env_mutex;
std::vector<Result> run_rounds(Job &job, const std::vector<RunRound> &runners, size_t rounds);
std::vector<Result> libevent_run(const Options &opt, const char *workload, size_t round,
                                 const Params *params = nullptr);
std::vector<Result> asio_missing(const char *workload);
std::string default_helper();

/* lateness_rows.cc */
std::string slack_tag(uint64_t slack_ns);
void run_latency(Job &job);
void run_sweep(Job &job);

/* kernel_floor.cc */
Result kernel_latency(KernelWait how, const char *workload, const std::vector<uint64_t> &delays);

/* operation_rows.cc */
void run_restart(Job &job);
void run_expire(Job &job);

/* summary.cc */
std::string us(int64_t ns);
std::string ratio(double ours, double best);
void print_summary(FILE *f, const std::vector<Result> &all);

/* verdicts.cc */
std::string verdicts(const std::vector<Result> &all);

/* results.cc */
std::string json_str(const std::string &s);
bool write_json(const char *path, const std::string &meta, const std::vector<Result> &all,
                const std::vector<std::string> &notes);
std::string default_out_dir();
bool make_dirs(const std::string &path);

/* Copies everything written to stdout into a file as well (report.txt): a
   pipe in place of stdout, and a thread that writes what it reads to both.
   The helper processes get their own stdout (libevent_run), so only this
   process's tables pass through it. */
class StdoutTee {
public:
    bool open(const std::string &path);
    /* Puts the original stdout back; everything printed is in the file. */
    void close_tee();
    ~StdoutTee() { close_tee(); }

private:
    FILE *file_ = nullptr;
    int saved_ = -1, reader_ = -1;
    std::thread thread_;
};

/* plots.cc */
std::string run_plots(const std::string &dir);
void print_pngs(const std::string &dir);

} // namespace bench::job

#endif /* TICKLOOP_BENCHES_JOB_H */
