/* SPDX-License-Identifier: MIT */
/*
 * latency.cc: tickloop-bench, the one-command benchmark job.
 *
 * What it measures, in one run and one table per workload:
 *  - timer lateness for every tickloop timer backend x every I/O backend that
 *    can be created here (both enumerated at run time), next to the kernel's
 *    own floor (clock_nanosleep(TIMER_ABSTIME), epoll_pwait2 and a timerfd
 *    doing the same waits with no event loop around them) and the peers:
 *    libev, libuv, Asio (asio::steady_timer on its default reactor), and
 *    libevent with and without EVENT_BASE_FLAG_PRECISE_TIMER (libevent runs
 *    in the helper executable tickloop-bench-libevent, see
 *    latency_libevent.cc);
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
#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <dirent.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <tickloop/timer_backend.h>

#include "latency.h"
#include "ops.h"
#include "ops_tickloop.h"
#include "wait_counter.h"

#if TL_BENCH_HAVE_LIBEV
#include "ops_libev.h"
#endif
#if TL_BENCH_HAVE_LIBUV
#include "ops_libuv.h"
#endif
#if TL_BENCH_HAVE_ASIO
#include "ops_asio.h"
#endif

extern char **environ;

namespace {

using namespace bench;

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

std::vector<std::string> split(const char *s) {
    std::vector<std::string> out;
    std::string cur;
    for (; *s; ++s) {
        if (*s == ',') {
            if (!cur.empty()) out.push_back(cur);
            cur.clear();
        } else {
            cur += *s;
        }
    }
    if (!cur.empty()) out.push_back(cur);
    return out;
}

bool wanted(const std::vector<std::string> &filter, const std::string &name) {
    return filter.empty() || std::find(filter.begin(), filter.end(), name) != filter.end();
}

/* ------------------------------------------------------------------------ */
/* tickloop                                                                 */
/* ------------------------------------------------------------------------ */

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

/* Held while a loop of any library is created: tickloop reads its
   environment switches then, and the wait sweep creates loops in parallel
   threads while a relative row sets them. */
std::mutex env_mutex;

/* Sets (value != NULL) or unsets name, returning its previous value. */
std::string swap_env(const char *name, const char *value, bool *was_set) {
    const char *old = std::getenv(name);
    *was_set = old != nullptr;
    std::string saved = old ? old : "";
    if (value)
        setenv(name, value, 1);
    else
        unsetenv(name);
    return saved;
}

std::string slack_tag(uint64_t slack_ns) {
    return " slack " + std::to_string(slack_ns) + "ns";
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
std::unique_ptr<TlLatencyOps> tl_open(const TlConfig &cfg) {
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
Result tl_latency(const TlConfig &cfg, const char *workload, const std::vector<uint64_t> &delays) {
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
/* The kernel floor: the same waits with no event loop at all               */
/* ------------------------------------------------------------------------ */

/* The three ways a thread can wait for an absolute CLOCK_MONOTONIC time.
   clock_nanosleep and epoll_pwait2 are subject to the thread's timer slack;
   a timerfd expiry is not, so its row is the floor without slack. */
enum class KernelWait { nanosleep, epoll, timerfd };

struct KernelWaiter {
    KernelWait how;
    int fd = -1;
    std::string error;

    explicit KernelWaiter(KernelWait h) : how(h) {
        if (how == KernelWait::epoll && (fd = epoll_create1(EPOLL_CLOEXEC)) < 0)
            error = std::string("epoll_create1: ") + std::strerror(errno);
        if (how == KernelWait::timerfd && (fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC)) < 0)
            error = std::string("timerfd_create: ") + std::strerror(errno);
    }
    ~KernelWaiter() {
        if (fd >= 0) close(fd);
    }
    KernelWaiter(const KernelWaiter &) = delete;
    KernelWaiter &operator=(const KernelWaiter &) = delete;

    static const char *name(KernelWait how) {
        return how == KernelWait::nanosleep ? "kernel clock_nanosleep"
               : how == KernelWait::epoll   ? "kernel epoll_pwait2"
                                            : "kernel timerfd";
    }

    /* Blocks until deadline; counts each wait. Returns "" or why it failed. */
    std::string wait_until(uint64_t deadline, uint64_t *waits) {
        timespec abs{(time_t)(deadline / kSec), (long)(deadline % kSec)};
        switch (how) {
        case KernelWait::nanosleep:
            ++*waits;
            while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &abs, nullptr) == EINTR) {
            }
            return "";
        case KernelWait::timerfd: {
            itimerspec its{};
            its.it_value = abs;
            if (timerfd_settime(fd, TFD_TIMER_ABSTIME, &its, nullptr) != 0)
                return std::string("timerfd_settime: ") + std::strerror(errno);
            uint64_t expirations;
            ++*waits;
            while (read(fd, &expirations, sizeof expirations) < 0)
                if (errno != EINTR) return std::string("read(timerfd): ") + std::strerror(errno);
            return "";
        }
        case KernelWait::epoll:
            /* epoll_pwait2 takes a relative timeout, computed from a fresh
               clock read just before the call, as a loop does. */
            for (;;) {
                uint64_t now = mono_ns();
                if (now >= deadline) return "";
                uint64_t left = deadline - now;
                timespec rel{(time_t)(left / kSec), (long)(left % kSec)};
                epoll_event ev;
                ++*waits;
                if (epoll_pwait2(fd, &ev, 1, &rel, nullptr) < 0 && errno != EINTR)
                    return std::string("epoll_pwait2: ") + std::strerror(errno);
            }
        }
        return "";
    }
};

/* One kernel row: chain (also the sweep's rows) or open, with the same
   waits a loop would make but no loop around them. */
Result kernel_latency(KernelWait how, const char *workload, const std::vector<uint64_t> &delays) {
    Result r;
    r.impl = KernelWaiter::name(how);
    r.family = "kernel";
    r.workload = workload;
    KernelWaiter waiter(how);
    if (!waiter.error.empty()) {
        r.skipped = waiter.error;
        return r;
    }
    r.lateness.reserve(delays.size());
    uint64_t w0 = mono_ns();
    if (std::strcmp(workload, "chain") == 0) {
        /* "now" plays the loop's cached time: the clock read at wake-up. */
        uint64_t now = mono_ns();
        for (uint64_t delay : delays) {
            uint64_t deadline = now + delay;
            r.skipped = waiter.wait_until(deadline, &r.waits);
            if (!r.skipped.empty()) break;
            now = mono_ns();
            r.lateness.push_back((int64_t)(now - deadline));
            ++r.fired;
        }
    } else {
        uint64_t t0 = mono_ns();
        std::vector<uint64_t> deadlines(delays.size());
        for (size_t i = 0; i < delays.size(); ++i) deadlines[i] = t0 + delays[i];
        /* Sorting is the ideal timer structure's work, done for free up front. */
        std::sort(deadlines.begin(), deadlines.end());
        size_t next = 0;
        while (next < deadlines.size()) {
            r.skipped = waiter.wait_until(deadlines[next], &r.waits);
            if (!r.skipped.empty()) break;
            uint64_t now = mono_ns();
            while (next < deadlines.size() && deadlines[next] <= now) {
                r.lateness.push_back((int64_t)(mono_ns() - deadlines[next++]));
                ++r.fired;
            }
        }
    }
    r.wall_s = (double)(mono_ns() - w0) / 1e9;
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

#if !TL_BENCH_HAVE_ASIO
/* Asio is header-only, found by Meson when libasio-dev is installed; without
   it its rows say so. */
std::vector<Result> asio_missing(const char *workload) {
    Result r;
    r.impl = "asio";
    r.family = "peer";
    r.workload = workload;
    r.skipped = "not built (asio.hpp not found by Meson: apt-get install libasio-dev)";
    return {r};
}
#endif

/* ------------------------------------------------------------------------ */
/* libevent, through the helper executable                                  */
/* ------------------------------------------------------------------------ */

/* Runs the helper for one workload and collects its RESULT lines. Failures
   become one skipped row saying why. */
std::vector<Result> libevent_run(const Options &opt, const char *workload, size_t round,
                                 const Params *params = nullptr) {
    std::vector<Result> out;
    auto fail = [&](const std::string &why) {
        Result r;
        r.impl = "libevent";
        r.family = "peer";
        r.workload = workload;
        r.skipped = why;
        out.push_back(r);
        return out;
    };
    if (opt.helper.empty()) return fail("not built (libevent not found by Meson)");
    if (access(opt.helper.c_str(), X_OK) != 0)
        return fail(opt.helper + ": " + std::strerror(errno));
    std::vector<std::string> args{opt.helper, std::string("--workload=") + workload,
                                  "--round=" + std::to_string(round)};
    for (auto &a : params_to_args(params ? *params : opt.params)) args.push_back(a);
    std::vector<char *> argv;
    for (auto &a : args) argv.push_back(a.data());
    argv.push_back(nullptr);

    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return fail(std::string("pipe2: ") + std::strerror(errno));
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
    pid_t pid;
    int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    close(fds[1]);
    if (rc != 0) {
        close(fds[0]);
        return fail(std::string("posix_spawn: ") + std::strerror(rc));
    }
    std::string text;
    char buf[65536];
    for (ssize_t got; (got = read(fds[0], buf, sizeof buf)) != 0;) {
        if (got < 0) {
            if (errno == EINTR) continue;
            break;
        }
        text.append(buf, (size_t)got);
    }
    close(fds[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    size_t pos = 0;
    while (pos < text.size()) {
        size_t end = text.find('\n', pos);
        if (end == std::string::npos) end = text.size();
        Result r;
        if (decode(text.substr(pos, end - pos), r)) out.push_back(std::move(r));
        pos = end + 1;
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fail("helper exited with status " + std::to_string(status));
    return out;
}

/* Adds one round's results of a runner to its totals (matched by row name). */
void merge(std::vector<Result> &totals, std::vector<Result> round) {
    for (Result &r : round) {
        auto it = std::find_if(totals.begin(), totals.end(),
                               [&](const Result &t) { return t.impl == r.impl; });
        if (it == totals.end()) {
            totals.push_back(std::move(r));
            continue;
        }
        if (!it->skipped.empty()) continue;
        if (!r.skipped.empty()) { /* a row that fails halfway reports the failure */
            it->skipped = r.skipped;
            continue;
        }
        it->lateness.insert(it->lateness.end(), r.lateness.begin(), r.lateness.end());
        it->waits += r.waits;
        it->fired += r.fired;
        it->wall_s += r.wall_s;
        it->ops += r.ops;
        it->op_cpu_ns += r.op_cpu_ns;
        it->round_ns_per_op.insert(it->round_ns_per_op.end(), r.round_ns_per_op.begin(),
                                   r.round_ns_per_op.end());
        if (it->note.find(r.note) == std::string::npos) it->note += r.note;
    }
}

/* ------------------------------------------------------------------------ */
/* The wait sweep                                                           */
/* ------------------------------------------------------------------------ */

std::string us(int64_t ns);

/* One wait length: every row waits `count` lone timers of that length, one
   after the other. The rows run side by side, one thread (libevent: one
   helper process) each, started 20 ms in and spread out so that their wake-ups seldom
   coincide: the sweep is mostly sleep, and running the rows in turn would
   take 15 rows x 14 s. */
std::vector<Result> run_sweep(const Options &opt, const std::vector<TlConfig> &configs,
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
void print_sweep_table(const std::vector<Result> &rows) {
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

/* ------------------------------------------------------------------------ */
/* Tables                                                                   */
/* ------------------------------------------------------------------------ */

std::string us(int64_t ns) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f", (double)ns / 1e3);
    return buf;
}

std::string ratio(double ours, double best) {
    if (best <= 0) return "-";
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2fx", ours / best);
    return buf;
}

/* The kernel row a tickloop row's waits compare with: an absolute timer
   without slack (epoll's timerfd, io_uring's absolute wait) or, for the
   relative fallback on epoll, epoll_pwait2. */
const char *kernel_floor(const Result &r) {
    bool relative_epoll =
        r.impl.find("/epoll") != std::string::npos && r.impl.find(" relative") != std::string::npos;
    return relative_epoll ? "kernel epoll_pwait2" : "kernel timerfd";
}

void print_latency_table(const char *title, const std::vector<Result> &rows) {
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

/* The one-screen summary: every tickloop configuration (backend/io) across
   every workload that ran, each cell "our figure (ours / best peer's)". The
   latency cells are p50 and p99 in us (timer slack as printed at the top;
   the slack-1 rows stay in their own table); the operation cells are ns/op
   of the backend, whatever the I/O kind. A cell whose figure rests on fewer
   samples (or rounds) than the minimums of latency.h shows the figure and
   its count, and no ratio; best peers are chosen among rows above them. */
struct SummaryColumn {
    std::string workload, label;
    bool latency;
    double q; /* latency: the percentile */
};

/* Samples behind one cell: lateness samples, or timed rounds. */
size_t cell_samples(const SummaryColumn &c, const Result &r) {
    return c.latency ? r.lateness.size() : r.round_ns_per_op.size();
}
size_t cell_minimum(const SummaryColumn &c) {
    return !c.latency ? kMinRounds : c.q < 0.9 ? kMinSamples : kMinTailSamples;
}
double cell_figure(const SummaryColumn &c, const Result &r) {
    if (!c.latency) return median_ns_per_op(r);
    Stats s = stats_of(r.lateness);
    return (double)(c.q < 0.9 ? s.p50 : s.p99) / 1e3;
}

void print_summary(FILE *f, const std::vector<Result> &all) {
    std::vector<SummaryColumn> columns;
    for (const char *w : {"chain", "open"})
        for (double q : {0.50, 0.99})
            columns.push_back({w, std::string(w) + (q < 0.9 ? " p50" : " p99"), true, q});
    for (const char *w : {"sweep-1ms", "sweep-100ms"})
        columns.push_back({w, std::string(w + 6) + " p50", true, 0.5});
    size_t n_latency = columns.size();
    for (const char *w : {"restart", "restart-batch", "expire", "expire-shuffled", "expire-equal"})
        columns.push_back({w, std::string(w) + " ns", false, 0});
    /* Populations: the first of each operation workload (1e5 by default). */
    std::vector<uint64_t> population(columns.size());
    std::vector<double> best(columns.size());
    std::vector<std::string> best_name(columns.size());
    for (size_t c = 0; c < columns.size(); ++c)
        for (const Result &r : all) {
            if (r.workload != columns[c].workload || !r.skipped.empty()) continue;
            if (!columns[c].latency && population[c] == 0) population[c] = r.population;
            if (!columns[c].latency && r.population != population[c]) continue;
            if (r.family != "peer" || cell_samples(columns[c], r) < cell_minimum(columns[c]))
                continue;
            double v = cell_figure(columns[c], r);
            if (best_name[c].empty() || v < best[c]) best[c] = v, best_name[c] = r.impl;
        }
    /* Latency per backend/I/O pair; operation costs per backend (measured
       once, on one I/O kind: the operations never poll). */
    std::vector<std::string> configs, backends;
    for (const Result &r : all) {
        if (r.family != "tickloop" || r.impl.find(" slack ") != std::string::npos) continue;
        bool latency =
            r.workload == "chain" || r.workload == "open" || r.workload.rfind("sweep-", 0) == 0;
        auto &list = latency ? configs : backends;
        if (std::find(list.begin(), list.end(), r.impl) == list.end()) list.push_back(r.impl);
    }
    auto table = [&](const std::vector<std::string> &impls, size_t c0, size_t c1,
                     const char *what) {
        if (impls.empty() || c0 == c1) return;
        std::fprintf(f,
                     "\n== summary, %s: each cell our figure (ours / best peer's, below 1 is "
                     "better) ==\n%-26s",
                     what, "");
        for (size_t c = c0; c < c1; ++c) std::fprintf(f, " %17s", columns[c].label.c_str());
        std::fprintf(f, "\n");
        for (const std::string &impl : impls) {
            std::fprintf(f, "%-26s", impl.substr(std::strlen("tickloop ")).c_str());
            for (size_t c = c0; c < c1; ++c) {
                auto it = std::find_if(all.begin(), all.end(), [&](const Result &r) {
                    return r.impl == impl && r.workload == columns[c].workload &&
                           r.skipped.empty() &&
                           (columns[c].latency || r.population == population[c]);
                });
                char cell[40] = "-";
                if (it != all.end() && cell_samples(columns[c], *it)) {
                    double v = cell_figure(columns[c], *it);
                    size_t n = cell_samples(columns[c], *it);
                    if (n < cell_minimum(columns[c]))
                        std::snprintf(cell, sizeof cell, "%.1f (n=%zu)", v, n);
                    else if (best[c] > 0)
                        std::snprintf(cell, sizeof cell, "%.1f (%.2fx)", v, v / best[c]);
                    else
                        std::snprintf(cell, sizeof cell, "%.1f", v);
                }
                std::fprintf(f, " %17s", cell);
            }
            std::fprintf(f, "\n");
        }
        std::fprintf(f, "%-26s", "best peer");
        for (size_t c = c0; c < c1; ++c) {
            char cell[40] = "-";
            if (!best_name[c].empty()) std::snprintf(cell, sizeof cell, "%.1f", best[c]);
            std::fprintf(f, " %17s", cell);
        }
        std::fprintf(f, "\n");
        for (size_t c = c0; c < c1; ++c)
            if (!best_name[c].empty())
                std::fprintf(
                    f, "best peer, %s: %s%s\n", columns[c].label.c_str(), best_name[c].c_str(),
                    population[c] ? (" (" + std::to_string(population[c]) + " live)").c_str() : "");
    };
    table(configs, 0, n_latency, "lateness in us (backend/io)");
    table(backends, n_latency, columns.size(), "ns per operation (backend; any I/O kind)");
    std::fprintf(f,
                 "ratios only where both sides have enough samples: %zu lateness samples for a "
                 "p50, %zu for a p99, %zu timed rounds for ns/op; (n=...) marks a figure with "
                 "fewer, shown but not compared\n",
                 kMinSamples, kMinTailSamples, kMinRounds);
    std::fflush(f);
}

/* ------------------------------------------------------------------------ */
/* Verdicts: one short answer per question the job asks                     */
/* ------------------------------------------------------------------------ */

/* The configuration without "tickloop " and the default-setting tags. */
std::string short_name(const std::string &impl) {
    return impl.rfind("tickloop ", 0) == 0 ? impl.substr(std::strlen("tickloop ")) : impl;
}

/* tickloop rows at the default settings (no second slack, not the relative
   fallback) of one latency workload, with at least `min_n` samples. */
std::vector<const Result *> default_rows(const std::vector<Result> &all, const char *workload,
                                         size_t min_n) {
    std::vector<const Result *> out;
    for (const Result &r : all)
        if (r.family == "tickloop" && r.workload == workload && r.skipped.empty() &&
            r.impl.find(" slack ") == std::string::npos &&
            r.impl.find(" relative") == std::string::npos && r.lateness.size() >= min_n)
            out.push_back(&r);
    return out;
}

const Result *find_row(const std::vector<Result> &all, const std::string &impl,
                       const std::string &workload) {
    for (const Result &r : all)
        if (r.impl == impl && r.workload == workload && r.skipped.empty()) return &r;
    return nullptr;
}

std::string verdicts(const std::vector<Result> &all) {
    std::string out;
    char line[512];
    auto add = [&](const char *fmt, auto... args) {
        std::snprintf(line, sizeof line, fmt, args...);
        out += line;
    };

    /* 1. Which backend fires least late: the chain (one timer at a time, the
       common case of a timeout), ranked by p50; the p99s beside it, with the
       kernel floor's own p99, show how much of the tail is the machine's. */
    out += "Which backend fires least late? ";
    std::vector<const Result *> chain = default_rows(all, "chain", kMinTailSamples);
    if (chain.empty()) {
        add("not answered: no chain row with %zu samples (run without --only, or with chain)\n",
            kMinTailSamples);
    } else {
        std::vector<std::pair<Stats, const Result *>> ranked;
        for (const Result *r : chain) ranked.push_back({stats_of(r->lateness), r});
        std::sort(ranked.begin(), ranked.end(),
                  [](auto &a, auto &b) { return a.first.p50 < b.first.p50; });
        const Stats &b = ranked.front().first;
        add("%s, chain p50 %s us (%zu timers).", short_name(ranked.front().second->impl).c_str(),
            us(b.p50).c_str(), b.n);
        int64_t lo99 = b.p99, hi99 = b.p99;
        for (auto &[st, r] : ranked) lo99 = std::min(lo99, st.p99), hi99 = std::max(hi99, st.p99);
        if (ranked.size() > 1)
            add(" All %zu tickloop configurations: p50 %s - %s us, p99 %s - %s us.", ranked.size(),
                us(b.p50).c_str(), us(ranked.back().first.p50).c_str(), us(lo99).c_str(),
                us(hi99).c_str());
        if (const Result *fl = find_row(all, "kernel timerfd", "chain"))
            add(" The kernel timerfd alone: p50 %s us, p99 %s us.",
                us(stats_of(fl->lateness).p50).c_str(), us(stats_of(fl->lateness).p99).c_str());
        const Result *peer = nullptr;
        for (const Result &r : all)
            if (r.family == "peer" && r.workload == "chain" && r.skipped.empty() &&
                r.lateness.size() >= kMinSamples &&
                (!peer || stats_of(r.lateness).p50 < stats_of(peer->lateness).p50))
                peer = &r;
        if (peer) {
            Stats p = stats_of(peer->lateness);
            add(" Best peer %s: p50 %s us (ours %.2fx).", peer->impl.c_str(), us(p.p50).c_str(),
                p.p50 ? (double)b.p50 / (double)p.p50 : 0.0);
        }
        size_t early = 0;
        for (const Result &r : all)
            if (r.family == "tickloop") early += stats_of(r.lateness).early;
        add(" Early fires, every tickloop row: %zu.\n", early);
    }

    /* 2. Which restarts cheapest: random restarts among the first
       population's live timers, and the batched (server) pattern. */
    for (const char *workload : {"restart", "restart-batch"}) {
        out += std::strcmp(workload, "restart") == 0
                   ? "Which restarts cheapest (random deadlines)? "
                   : "Which restarts cheapest (batches of equal deadlines)? ";
        std::vector<const Result *> rows;
        uint64_t population = 0;
        for (const Result &r : all) {
            if (r.workload != workload || !r.skipped.empty() || r.round_ns_per_op.empty()) continue;
            if (!population) population = r.population;
            if (r.population == population && r.round_ns_per_op.size() >= kMinRounds)
                rows.push_back(&r);
        }
        if (rows.empty()) {
            if (population)
                add("not answered: no row with %zu timed rounds\n", kMinRounds);
            else
                out += "not run (see --only)\n";
            continue;
        }
        std::sort(rows.begin(), rows.end(), [](const Result *a, const Result *b) {
            return median_ns_per_op(*a) < median_ns_per_op(*b);
        });
        add("%s, %.1f ns per restart (%" PRIu64 " live, median of %zu rounds); then",
            short_name(rows[0]->impl).c_str(), median_ns_per_op(*rows[0]), population,
            rows[0]->round_ns_per_op.size());
        for (size_t i = 1; i < rows.size() && i < 4; ++i)
            add("%s %s %.1f", i > 1 ? "," : "", short_name(rows[i]->impl).c_str(),
                median_ns_per_op(*rows[i]));
        out += ".\n";
    }

    /* 3. How far from the kernel's floor: each default tickloop chain row
       against the kernel mechanism it waits with, doing the same waits. */
    out += "How far from the kernel's floor? ";
    if (chain.empty()) {
        out += "not answered: no chain rows\n";
    } else {
        const Result *floor = find_row(all, "kernel timerfd", "chain");
        if (!floor || floor->lateness.size() < kMinTailSamples) {
            out += "not answered: no kernel timerfd row with enough samples\n";
        } else {
            Stats fl = stats_of(floor->lateness);
            add("kernel timerfd, same chain: p50 %s us, p99 %s us. tickloop minus it, p50 / p99 "
                "in us:",
                us(fl.p50).c_str(), us(fl.p99).c_str());
            int64_t worst50 = INT64_MIN, worst99 = INT64_MIN;
            for (size_t i = 0; i < chain.size(); ++i) {
                Stats s = stats_of(chain[i]->lateness);
                add("%s %s %+.1f / %+.1f", i ? "," : "", short_name(chain[i]->impl).c_str(),
                    (double)(s.p50 - fl.p50) / 1e3, (double)(s.p99 - fl.p99) / 1e3);
                worst50 = std::max(worst50, s.p50 - fl.p50);
                worst99 = std::max(worst99, s.p99 - fl.p99);
            }
            add(". Largest: %+.1f us at p50, %+.1f us at p99 (below 0: the loop's row was less "
                "late than the kernel's alone, which is this machine's noise).\n",
                (double)worst50 / 1e3, (double)worst99 / 1e3);
        }
    }
    return out;
}

void print_ops_table(const char *title, const std::vector<Result> &rows, const char *op_label) {
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

/* ------------------------------------------------------------------------ */
/* JSON                                                                     */
/* ------------------------------------------------------------------------ */

std::string json_str(const std::string &s) {
    std::string out = "\"";
    for (char c : s) {
        if (c == '"' || c == '\\')
            out += '\\', out += c;
        else if ((unsigned char)c < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
            out += buf;
        } else
            out += c;
    }
    return out + "\"";
}

bool write_json(const char *path, const std::string &meta, const std::vector<Result> &all,
                const std::vector<std::string> &notes) {
    FILE *f = std::fopen(path, "w");
    if (!f) return false;
    std::fprintf(f, "{\n  \"meta\": %s,\n  \"notes\": [", meta.c_str());
    for (size_t i = 0; i < notes.size(); ++i)
        std::fprintf(f, "%s%s", i ? ", " : "", json_str(notes[i]).c_str());
    std::fprintf(f, "],\n  \"results\": [\n");
    for (size_t i = 0; i < all.size(); ++i) {
        const Result &r = all[i];
        Stats s = stats_of(r.lateness);
        std::fprintf(f,
                     "    {\"impl\": %s, \"family\": %s, \"workload\": %s, \"skipped\": %s, "
                     "\"note\": %s, \"wall_s\": %.3f",
                     json_str(r.impl).c_str(), json_str(r.family).c_str(),
                     json_str(r.workload).c_str(), json_str(r.skipped).c_str(),
                     json_str(r.note).c_str(), r.wall_s);
        if (r.workload.rfind("restart", 0) == 0 || r.workload.rfind("expire", 0) == 0) {
            std::fprintf(f,
                         ", \"population\": %" PRIu64 ", \"ops\": %" PRIu64
                         ", \"op_cpu_ns\": %" PRIu64 ", \"ns_per_op\": %.3f",
                         r.population, r.ops, r.op_cpu_ns, median_ns_per_op(r));
            std::fprintf(f, ", \"round_ns_per_op\": [");
            for (size_t j = 0; j < r.round_ns_per_op.size(); ++j)
                std::fprintf(f, "%s%.3f", j ? "," : "", r.round_ns_per_op[j]);
            std::fprintf(f, "]");
        } else {
            std::fprintf(f,
                         ", \"n\": %zu, \"p50_ns\": %" PRId64 ", \"p90_ns\": %" PRId64
                         ", \"p99_ns\": %" PRId64 ", \"p999_ns\": %" PRId64 ", \"max_ns\": %" PRId64
                         ", \"min_ns\": %" PRId64 ", \"early\": %zu, \"waits\": %" PRIu64
                         ", \"fired\": %" PRIu64 ", \"lateness_ns\": [",
                         s.n, s.p50, s.p90, s.p99, s.p999, s.max, s.min, s.early, r.waits, r.fired);
            for (size_t j = 0; j < r.lateness.size(); ++j)
                std::fprintf(f, "%s%" PRId64, j ? "," : "", r.lateness[j]);
            std::fprintf(f, "]");
        }
        std::fprintf(f, "}%s\n", i + 1 < all.size() ? "," : "");
    }
    std::fprintf(f, "  ]\n}\n");
    return std::fclose(f) == 0;
}

/* ------------------------------------------------------------------------ */
/* Main                                                                     */
/* ------------------------------------------------------------------------ */

void usage(const char *argv0) {
    std::printf(
        "usage: %s [options]\n"
        "  --out DIR              write results.json, report.txt, summary.txt and the plots\n"
        "                         into DIR (default: results/<UTC time>/ in the build\n"
        "                         directory, beside benches/)\n"
        "  --no-plots             leave out the plots (benches/plot.py, python3-matplotlib)\n"
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

/* ------------------------------------------------------------------------ */
/* The results directory                                                    */
/* ------------------------------------------------------------------------ */

/* The directory of this executable, with a trailing '/'; empty if unknown. */
std::string self_dir() {
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) return "";
    std::string path(self, (size_t)n);
    return path.substr(0, path.rfind('/') + 1);
}

/* build/results/<UTC time>/ for build/benches/tickloop-bench: inside the
   build directory, so a run never adds files to the source tree. */
std::string default_out_dir() {
    std::string dir = self_dir();
    if (dir.size() > 1) dir.pop_back();
    size_t slash = dir.rfind('/');
    std::string build = slash == std::string::npos ? "." : dir.substr(0, slash);
    char stamp[32];
    time_t now = time(nullptr);
    tm utc;
    gmtime_r(&now, &utc);
    std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &utc);
    return build + "/results/" + stamp;
}

/* mkdir -p; false with errno set on failure. */
bool make_dirs(const std::string &path) {
    for (size_t i = 1; i <= path.size(); ++i) {
        if (i < path.size() && path[i] != '/') continue;
        std::string part = path.substr(0, i);
        if (mkdir(part.c_str(), 0777) != 0 && errno != EEXIST) return false;
    }
    return true;
}

/* Copies everything written to stdout into a file as well (report.txt): a
   pipe in place of stdout, and a thread that writes what it reads to both.
   The helper processes get their own stdout (libevent_run), so only this
   process's tables pass through it. */
class StdoutTee {
public:
    bool open(const std::string &path) {
        file_ = std::fopen(path.c_str(), "w");
        if (!file_) return false;
        int fds[2];
        if (pipe2(fds, O_CLOEXEC) != 0) return false;
        std::fflush(stdout);
        saved_ = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 0);
        dup2(fds[1], STDOUT_FILENO);
        close(fds[1]);
        reader_ = fds[0];
        thread_ = std::thread([this] {
            char buf[4096];
            for (ssize_t got; (got = read(reader_, buf, sizeof buf)) != 0;) {
                if (got < 0) {
                    if (errno == EINTR) continue;
                    break;
                }
                for (ssize_t done = 0, w; done < got; done += w)
                    if ((w = write(saved_, buf + done, (size_t)(got - done))) <= 0) break;
                std::fwrite(buf, 1, (size_t)got, file_);
            }
        });
        return true;
    }
    /* Puts the original stdout back; everything printed is in the file. */
    void close_tee() {
        if (!thread_.joinable()) return;
        std::fflush(stdout);
        dup2(saved_, STDOUT_FILENO);
        thread_.join();
        close(reader_);
        close(saved_);
        std::fclose(file_);
    }
    ~StdoutTee() { close_tee(); }

private:
    FILE *file_ = nullptr;
    int saved_ = -1, reader_ = -1;
    std::thread thread_;
};

/* Runs benches/plot.py on results.json, writing the PNGs next to it.
   Returns what the run should say about the plots. */
std::string run_plots(const std::string &dir) {
#ifdef TL_BENCH_PLOT_PY
    const char *script = TL_BENCH_PLOT_PY;
#else
    const char *script = "";
#endif
    if (!*script || access(script, R_OK) != 0)
        return std::string("plots skipped: benches/plot.py not found (") + script + ")";
    /* Debian's matplotlib is in /usr/bin/python3's path, not in a pyenv's. */
    std::string python = access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
    std::string json = dir + "/results.json";
    std::vector<std::string> args{python, script, "--quiet", "-o", dir, json};
    std::vector<char *> argv;
    for (auto &a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::fflush(stdout);
    pid_t pid;
    int rc = posix_spawnp(&pid, argv[0], nullptr, nullptr, argv.data(), environ);
    if (rc != 0)
        return "plots skipped: cannot run " + python + ": " + std::strerror(rc) +
               " (apt-get install python3-matplotlib)";
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return "";
    if (WIFEXITED(status) && WEXITSTATUS(status) == 3)
        return "plots skipped: " + python +
               " has no matplotlib (Debian: apt-get install python3-matplotlib); results.json "
               "and the text are written, and `" +
               python + " " + script + " -o " + dir + " " + json + "` draws them later";
    return "plots failed: plot.py exited with status " + std::to_string(status) +
           " (its message is above)";
}

std::string default_helper() {
#if TL_BENCH_HAVE_LIBEVENT
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) return "";
    std::string path(self, (size_t)n);
    return path.substr(0, path.rfind('/') + 1) + "tickloop-bench-libevent";
#else
    return "";
#endif
}

} // namespace

int main(int argc, char **argv) {
    Options opt;
    opt.helper = default_helper();
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
    std::vector<std::string> notes;
    utsname un;
    uname(&un);
    long slack = prctl(PR_GET_TIMERSLACK);
    std::printf(
        "tickloop-bench: tickloop %s, kernel %s, %ld CPUs, timer slack %ld ns, seed %" PRIu64
        "%s\nresults go to %s\nminimums: a p50 is compared from %zu lateness samples, a p99 "
        "from %zu, an operation cost from %zu timed rounds; fewer are shown, never compared\n",
        tl_version(), un.release, sysconf(_SC_NPROCESSORS_ONLN), slack, opt.params.seed,
        opt.full ? ", --full" : "", opt.out_dir.c_str(), kMinSamples, kMinTailSamples, kMinRounds);
    notes.push_back("Timer slack (" + std::to_string(slack) +
                    " ns) delays every epoll and nanosleep wait by up to that much; timerfd "
                    "expiries (libevent precise) are exempt.");

    /* The tickloop configurations: every registered backend x every I/O kind
       whose loop can be created here. */
    std::vector<TlConfig> configs;
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
            notes.push_back(note);
            continue;
        }
        tl_loop_free(probe);
        for (const char *name : names)
            if (wanted(opt.timers, name)) configs.push_back({io, name, opt.tick_ns});
    }
    /* The relative-wait fallback of each I/O kind, for the default backend,
       in the same run as the absolute deadlines. */
    std::vector<TlConfig> relative_configs;
    for (const TlConfig &cfg : configs)
        if (cfg.timers == "heap4") {
            TlConfig rel = cfg;
            rel.relative = true;
            relative_configs.push_back(rel);
        }
    std::string backends_list;
    for (const char *name : names)
        backends_list += std::string(backends_list.empty() ? "" : ",") + name;
    std::printf("timer backends registered: %s\n", backends_list.c_str());
    std::fflush(stdout);

    std::vector<Result> all;
    auto add = [&](std::vector<Result> &rows, Result r) {
        rows.push_back(r);
        all.push_back(std::move(r));
    };

    /* Every runner runs its share of round 0, then of round 1, ...; the order
       within a round rotates so no row always follows the same neighbour. A
       runner whose rows cannot run is tried once only. */
    using RunRound = std::function<std::vector<Result>(size_t round)>;
    auto run_rounds = [&](const std::vector<RunRound> &runners, size_t rounds) {
        std::vector<std::vector<Result>> per_runner(runners.size());
        std::vector<bool> dead(runners.size());
        for (size_t round = 0; round < rounds; ++round)
            for (size_t k = 0; k < runners.size(); ++k) {
                size_t i = (k + round) % runners.size();
                if (dead[i]) continue;
                std::vector<Result> got = runners[i](round);
                /* tl_loop_options.timer_slack_ns can change the thread's slack;
                   the next rows must still wait under the slack printed above. */
                if (prctl(PR_GET_TIMERSLACK) != slack) {
                    prctl(PR_SET_TIMERSLACK, (unsigned long)slack);
                    for (Result &r : got) r.note += "changed the thread's timer slack; ";
                }
                bool all_skipped = true;
                for (const Result &r : got) all_skipped &= !r.skipped.empty();
                dead[i] = all_skipped;
                merge(per_runner[i], std::move(got));
            }
        std::vector<Result> rows;
        for (auto &results : per_runner)
            for (Result &r : results) add(rows, std::move(r));
        return rows;
    };

    /* The rows of a timer-operation workload: every tickloop timer backend
   (on the first I/O kind only: the workload never polls), then libev,
   libuv and Asio, then libevent in its helper. Each round of a row makes a fresh
   loop and runs measure(ops, round, r) on it. */
    auto ops_runners = [&](const char *workload, auto measure) {
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
        for (const TlConfig &cfg : configs) {
            if (cfg.io.kind != configs.front().io.kind) continue;
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
            [&, workload](size_t round) { return libevent_run(opt, workload, round); });
        return runners;
    };

    auto latency_workload = [&](const char *workload, const std::string &title) {
        bool chain = std::strcmp(workload, "chain") == 0;
        const Params &p = opt.params;
        auto delays = [&, chain](size_t round) {
            return chain ? chain_delays(p, round) : open_delays(p, round);
        };
        std::vector<RunRound> runners;
        for (const TlConfig &cfg : configs)
            runners.push_back([&, cfg](size_t round) {
                return std::vector<Result>{tl_latency(cfg, workload, delays(round))};
            });
        /* The chain's relative rows: epoll's only (io_uring's relative wait
           has no slack either; the sweep shows it), 2.6 s of the budget. */
        if (chain)
            for (const TlConfig &cfg : relative_configs)
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
            for (const TlConfig &cfg : configs) {
                if (cfg.io.kind != configs.front().io.kind) continue; /* one I/O kind */
                if (!wanted(opt.fine_slack_timers, cfg.timers)) continue;
                TlConfig fine = cfg;
                fine.slack_ns = opt.fine_slack_ns;
                runners.push_back([&, fine](size_t round) {
                    Result r = tl_latency(fine, "chain", delays(round));
                    prctl(PR_SET_TIMERSLACK, (unsigned long)slack);
                    return std::vector<Result>{r};
                });
            }
            runners.push_back([&](size_t round) {
                prctl(PR_SET_TIMERSLACK, (unsigned long)opt.fine_slack_ns);
                Result r = kernel_latency(KernelWait::epoll, "chain", delays(round));
                prctl(PR_SET_TIMERSLACK, (unsigned long)slack);
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
        print_latency_table(title.c_str(), run_rounds(runners, p.rounds));
    };

    if (wanted(opt.only, "chain")) {
        char title[160];
        std::snprintf(title, sizeof title,
                      "chain: %zu one-shot timers in sequence (%zu rounds), delays log-uniform "
                      "100 us - 10 ms",
                      opt.params.chain_count, opt.params.rounds);
        latency_workload("chain", title);
    }
    if (wanted(opt.only, "open")) {
        char title[160];
        std::snprintf(title, sizeof title,
                      "open: %zu rounds of %zu timers armed at once, delays uniform %" PRIu64
                      " ms - %" PRIu64 " ms",
                      opt.params.rounds, opt.params.open_count / opt.params.rounds,
                      opt.params.open_min / kMs,
                      (opt.params.open_min + opt.params.open_window / opt.params.rounds) / kMs);
        latency_workload("open", title);
    }
    if (wanted(opt.only, "sweep")) {
        std::vector<TlConfig> sweep_configs = configs;
        sweep_configs.insert(sweep_configs.end(), relative_configs.begin(), relative_configs.end());
        std::vector<Result> rows;
        for (const SweepLength &len : kSweep) {
            std::vector<Result> got =
                run_sweep(opt, sweep_configs, len, opt.full ? len.full_count : len.count);
            for (Result &r : got) {
                rows.push_back(r);
                all.push_back(std::move(r));
            }
        }
        print_sweep_table(rows);
    }
    if (wanted(opt.only, "restart")) {
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
                    ops_runners(workload, [&, batched](auto &ops, size_t round, Result &r) {
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
                print_ops_table(title, run_rounds(runners, rounds), "restarts");
            }
    }

    if (wanted(opt.only, "expire")) {
        for (size_t population : opt.expire_populations)
            for (int layout : {0, 1, 2}) {
                bool shuffled = layout == 1, equal = layout == 2;
                opt.params.expire_population = population;
                ExpirePlan plan = expire_plan(opt.params, shuffled, equal);
                const char *workload = equal      ? "expire-equal"
                                       : shuffled ? "expire-shuffled"
                                                  : "expire";
                std::vector<RunRound> runners =
                    ops_runners(workload, [&](auto &ops, size_t, Result &r) {
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
                print_ops_table(title, run_rounds(runners, opt.params.expire_rounds), "expiries");
            }
    }

    print_summary(stdout, all);
    std::string answers = verdicts(all);
    std::printf("\n== verdicts ==\n%s", answers.c_str());

    double took = (double)(mono_ns() - start) / 1e9;
    std::printf("\ntook %.1f s\n", took);
    char meta[1200];
    std::snprintf(meta, sizeof meta,
                  "{\"tickloop\": %s, \"kernel\": %s, \"cpus\": %ld, \"timerslack_ns\": %ld, "
                  "\"fine_slack_ns\": %" PRIu64 ", \"seed\": %" PRIu64
                  ", \"chain_count\": %zu, \"open_count\": %zu, "
                  "\"open_min_ns\": %" PRIu64 ", \"open_window_ns\": %" PRIu64
                  ", \"restart_ops\": %zu, \"full\": %s, \"took_s\": %.1f, "
                  "\"min_samples\": %zu, \"min_tail_samples\": %zu, \"min_rounds\": %zu}",
                  json_str(tl_version()).c_str(), json_str(un.release).c_str(),
                  sysconf(_SC_NPROCESSORS_ONLN), slack, opt.fine_slack_ns, opt.params.seed,
                  opt.params.chain_count, opt.params.open_count, opt.params.open_min,
                  opt.params.open_window, opt.params.restart_ops, opt.full ? "true" : "false", took,
                  kMinSamples, kMinTailSamples, kMinRounds);
    std::vector<std::string> written;
    std::string json = opt.out_dir + "/results.json";
    for (const std::string &path : {json, std::string(opt.json ? opt.json : "")}) {
        if (path.empty()) continue;
        if (!write_json(path.c_str(), meta, all, notes)) {
            std::fprintf(stderr, "cannot write %s: %s\n", path.c_str(), std::strerror(errno));
            return 1;
        }
        written.push_back(path);
    }
    /* summary.txt: the verdicts, then the summary tables. */
    std::string summary_path = opt.out_dir + "/summary.txt";
    if (FILE *f = std::fopen(summary_path.c_str(), "w")) {
        std::fprintf(f, "tickloop-bench: tickloop %s, kernel %s, %ld CPUs, timer slack %ld ns%s\n",
                     tl_version(), un.release, sysconf(_SC_NPROCESSORS_ONLN), slack,
                     opt.full ? ", --full" : "");
        std::fprintf(f, "\n== verdicts ==\n%s", answers.c_str());
        print_summary(f, all);
        std::fprintf(f, "\nEvery table of the run: report.txt; every sample: results.json.\n");
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
    if (DIR *d = plots.empty() ? opendir(opt.out_dir.c_str()) : nullptr) {
        std::vector<std::string> pngs;
        while (dirent *e = readdir(d)) {
            std::string name = e->d_name;
            if (name.size() > 4 && name.compare(name.size() - 4, 4, ".png") == 0)
                pngs.push_back(name);
        }
        closedir(d);
        std::sort(pngs.begin(), pngs.end());
        for (const std::string &name : pngs) std::printf(" %s", name.c_str());
    }
    std::printf("\n");
    tee.close_tee();

    /* Early fires break the contract: make the run fail so CI notices. */
    for (const Result &r : all)
        if (r.family == "tickloop" && stats_of(r.lateness).early) return 1;
    return 0;
}
