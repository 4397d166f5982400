/* SPDX-License-Identifier: MIT */
// delayed_tasks.cpp: "re-check this order in 30 minutes", a million times over.
//
// Shows the workload timing wheels are built for, with the C++ wrapper: a
// burst of N tasks (tickloop::Timer) scheduled 15 to 45 minutes ahead, most of
// them cancelled soon after (the order was paid, the re-check is moot), the
// rest firing much later. Real minutes are scaled down by --time-scale so a
// run takes a few seconds. For the chosen timer backend, or for every
// registered one with --timers all, it reports:
// - the cost of one start and of one cancel (the burst, timed as a whole);
// - how late the surviving tasks fired against their deadlines (p50, p99,
//   max; the loop's wake-up latency included) and how many fired early, which
//   must be 0: tickloop never runs a timer before its deadline;
// - memory per task: the growth of the resident set over the whole burst
//   divided by N, and the part of it the timer backend itself added while the
//   timers were started (a heap's pointer array; the wheels keep their links
//   inside tl_timer and add almost nothing).
// With --timers all each backend runs in a child process of its own, so that
// one run's freed memory cannot hide the next one's growth.
//
//   delayed_tasks [--tasks N] [--cancel-pct P] [--time-scale S] [--seed N]
//                 [--timers NAME|all] [--io epoll|io_uring|auto] [--help]
//
// The exit status is 0 only if every surviving task fired, none early.
#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include <tickloop/tickloop.hpp>
#include <tickloop/timer_backend.h>

namespace {

struct Config {
    uint64_t tasks = 1000000;
    unsigned cancel_pct = 99;
    /* Real minutes per run-time minute: 1000 turns 15..45 minutes into
       0.9..2.7 seconds. */
    double time_scale = 1000;
    uint64_t seed = 1;
    std::string timers; /* "" = the library default, "all" = every backend */
    tl_io_kind io = TL_IO_AUTO;
};

/* One backend's measurements; plain data so a child can send it through a pipe. */
struct Result {
    char timers[32];
    char io[16];
    uint64_t tasks, expected, fired, early;
    double start_ns, cancel_ns;              /* per operation */
    uint64_t late_p50, late_p99, late_max;   /* ns after the deadline */
    double bytes_per_task, backend_per_task; /* RSS growth / N */
    int error;                               /* 0, or a negative errno */
    int interrupted;                         /* SIGINT ended the run early */
};

/* SIGINT (Ctrl-C) ends a run early, with the report of what fired so far.
 * In one process the loop's own watcher handles it. With --timers all the
 * parent forwards it to the child running a backend, and runs no further
 * backend. */
volatile sig_atomic_t parent_interrupted = 0;
volatile pid_t running_child = 0;

void parent_on_sigint(int) {
    parent_interrupted = 1;
    if (running_child > 0) kill(running_child, SIGINT);
}

void on_sigint(tl_loop *loop, tl_signal *s, int) {
    static_cast<Result *>(s->data)->interrupted = 1;
    tl_loop_stop(loop);
}

uint64_t monotonic_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Resident set size from /proc/self/statm (second field, in pages). */
uint64_t rss_bytes() {
    FILE *f = std::fopen("/proc/self/statm", "r");
    unsigned long long size = 0, resident = 0;
    if (f) {
        if (std::fscanf(f, "%llu %llu", &size, &resident) != 2) resident = 0;
        std::fclose(f);
    }
    return resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

/* splitmix64: a fixed seed gives the same tasks on every backend. */
uint64_t next_random(uint64_t &state) {
    uint64_t z = (state += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

/* The delays of the tasks, and which of them are cancelled, drawn from
   cfg.seed before anything is timed or measured. */
void draw_tasks(const Config &cfg, std::vector<uint64_t> &delays, std::vector<uint32_t> &cancels) {
    const double minute_ns = 60e9 / cfg.time_scale;
    delays.resize(cfg.tasks);
    cancels.reserve(cfg.tasks * cfg.cancel_pct / 100 + 1);
    uint64_t state = cfg.seed;
    for (uint64_t i = 0; i < cfg.tasks; ++i) {
        double minutes = 15.0 + 30.0 * (double)(next_random(state) >> 11) / 9007199254740992.0;
        delays[i] = (uint64_t)(minutes * minute_ns);
        if (next_random(state) % 10000 < cfg.cancel_pct * 100u) cancels.push_back((uint32_t)i);
    }
}

/* res's lateness percentiles, from the lateness of every fired task. */
void set_lateness(Result &res, std::vector<uint64_t> &lateness) {
    if (lateness.empty()) return;
    std::sort(lateness.begin(), lateness.end());
    size_t n = lateness.size();
    res.late_p50 = lateness[(n - 1) * 50 / 100];
    res.late_p99 = lateness[(n - 1) * 99 / 100];
    res.late_max = lateness[n - 1];
}

Result run_backend(const Config &cfg, const char *timers) {
    Result res{};
    std::snprintf(res.timers, sizeof res.timers, "%s", timers ? timers : "(default)");
    res.tasks = cfg.tasks;
    std::vector<uint64_t> delays;
    std::vector<uint32_t> cancels;
    draw_tasks(cfg, delays, cancels);
    res.expected = cfg.tasks - cancels.size();
    std::vector<uint64_t> lateness;
    lateness.reserve(res.expected);

    try {
        const uint64_t rss_before = rss_bytes();
        tickloop::Options options;
        options.io = cfg.io;
        if (timers) options.timers = timers;
        tickloop::Loop loop(options);
        std::snprintf(res.timers, sizeof res.timers, "%s", loop.timers_name());
        std::snprintf(res.io, sizeof res.io, "%s", loop.io_name());

        /* Started before the burst, so a Ctrl-C during it stops the run as
           soon as the loop runs. Unreferenced: it does not keep the loop
           running once the last task has fired. */
        tl_signal sigint;
        tl_signal_init(&sigint);
        int sr = tl_signal_start(loop.get(), &sigint, SIGINT, on_sigint, &res);
        if (sr == 0) tl_signal_set_ref(loop.get(), &sigint, 0);

        /* tickloop::Timer holds the loop's address, so it is neither copyable
           nor movable: it is constructed in place, in an array of optionals. */
        auto tasks = std::make_unique<std::optional<tickloop::Timer>[]>(cfg.tasks);
        /* Deadlines are tl_now() + delay, and tl_now() stays put during the
           burst (nothing updates the loop's time), so they are known here. */
        const uint64_t base = (uint64_t)loop.now().count();
        for (uint64_t i = 0; i < cfg.tasks; ++i) {
            tasks[i].emplace(
                loop, [&res, &lateness, &loop, deadline = base + delays[i]](tickloop::Timer &) {
                    if ((uint64_t)loop.now().count() < deadline) ++res.early;
                    lateness.push_back(monotonic_ns() - deadline);
                    ++res.fired;
                });
        }
        const uint64_t rss_tasks = rss_bytes();

        uint64_t t0 = monotonic_ns();
        for (uint64_t i = 0; i < cfg.tasks; ++i)
            tasks[i]->start(std::chrono::nanoseconds(delays[i]));
        uint64_t t1 = monotonic_ns();
        const uint64_t rss_started = rss_bytes();
        for (uint32_t i : cancels) tasks[i]->stop();
        uint64_t t2 = monotonic_ns();

        res.start_ns = (double)(t1 - t0) / (double)cfg.tasks;
        res.cancel_ns = cancels.empty() ? 0 : (double)(t2 - t1) / (double)cancels.size();
        res.bytes_per_task = ((double)rss_started - (double)rss_before) / (double)cfg.tasks;
        res.backend_per_task = ((double)rss_started - (double)rss_tasks) / (double)cfg.tasks;

        /* Runs until the last surviving task has fired: timers are the only
           handles. */
        loop.run();
        tasks.reset(); /* every Timer goes before the Loop */
        if (sr == 0) tl_signal_stop(loop.get(), &sigint);
    } catch (const std::system_error &e) {
        std::fprintf(stderr, "delayed_tasks: %s: %s\n", res.timers, e.what());
        res.error = -e.code().value();
        return res;
    }

    set_lateness(res, lateness);
    return res;
}

/* Runs one backend in a child process and reads its Result from a pipe. */
Result run_backend_in_child(const Config &cfg, const char *timers) {
    Result res{};
    std::snprintf(res.timers, sizeof res.timers, "%s", timers);
    res.error = -ECHILD;
    int fds[2];
    if (pipe(fds) < 0) return res;
    std::fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return res;
    }
    if (pid == 0) {
        running_child = 0;
        close(fds[0]);
        Result r = run_backend(cfg, timers);
        ssize_t n = write(fds[1], &r, sizeof r);
        _exit(n == (ssize_t)sizeof r ? 0 : 1);
    }
    running_child = pid;
    close(fds[1]);
    Result got;
    ssize_t n;
    while ((n = read(fds[0], &got, sizeof got)) < 0 && errno == EINTR) {
    }
    close(fds[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    running_child = 0;
    if (n == (ssize_t)sizeof got && WIFEXITED(status) && WEXITSTATUS(status) == 0) res = got;
    return res;
}

void print_header(const Config &cfg) {
    double minute_s = 60.0 / cfg.time_scale;
    std::printf("delayed_tasks: %" PRIu64 " tasks due in 15..45 min (%.2f..%.2f s at time scale "
                "%g), %u%% cancelled\n",
                cfg.tasks, 15 * minute_s, 45 * minute_s, cfg.time_scale, cfg.cancel_pct);
    std::printf("%-8s %-8s %8s %5s %9s %9s %9s %9s %9s %9s %9s\n", "timers", "io", "fired", "early",
                "start/op", "cancel/op", "late p50", "late p99", "late max", "B/task", "backend");
    std::printf("%-8s %-8s %8s %5s %9s %9s %9s %9s %9s %9s %9s\n", "", "", "", "", "ns", "ns", "us",
                "us", "us", "", "B/task");
}

/* Prints a row; returns true if the backend passed. */
bool print_row(const Result &r) {
    if (r.error) {
        std::printf("%-8s error: %s\n", r.timers, tl_strerror(r.error));
        return false;
    }
    std::printf("%-8s %-8s %8" PRIu64 " %5" PRIu64 " %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f\n",
                r.timers, r.io, r.fired, r.early, r.start_ns, r.cancel_ns, r.late_p50 / 1e3,
                r.late_p99 / 1e3, r.late_max / 1e3, r.bytes_per_task, r.backend_per_task);
    if (r.interrupted)
        std::printf("%-8s interrupted by SIGINT: %" PRIu64 " of %" PRIu64 " tasks had fired\n",
                    r.timers, r.fired, r.expected);
    return r.early == 0 && r.fired == r.expected;
}

void usage(FILE *out, const char *argv0) {
    std::fprintf(
        out,
        "usage: %s [--tasks N] [--cancel-pct P] [--time-scale S] [--seed N]\n"
        "          [--timers NAME|all] [--io epoll|io_uring|auto] [--help]\n"
        "Schedules N tasks 15..45 minutes ahead, cancels P%% of them, and reports the\n"
        "cost per start/cancel, how late the rest fired, and memory per task (tickloop %s).\n"
        "  --tasks N        tasks in the burst (default 1000000)\n"
        "  --cancel-pct P   percentage cancelled, 0..100 (default 99)\n"
        "  --time-scale S   run S times faster than real time (default 1000: 2.7 s at most)\n"
        "  --seed N         seed of the delays and of which tasks are cancelled (default 1)\n"
        "  --timers NAME    heap2, heap4, wheel, hwheel, ..., or all (default: the library's)\n"
        "  --io KIND        I/O backend (default auto)\n",
        argv0, tl_version());
}

bool parse_number(const char *s, double min, double max, double &out) {
    char *end;
    errno = 0;
    double v = std::strtod(s, &end);
    if (errno || end == s || *end || !(v >= min && v <= max)) return false;
    out = v;
    return true;
}

/* Fills cfg from the command line; returns -1 to go on, else the exit
   status (0 after --help, 2 on a usage error). */
int parse_args(int argc, char **argv, Config &cfg) {
    for (int i = 1; i < argc; i += 2) {
        const char *opt = argv[i], *val = argv[i + 1]; /* argv[argc] is NULL */
        double v;
        if (std::strcmp(opt, "--help") == 0) {
            usage(stdout, argv[0]);
            return 0;
        } else if (val && std::strcmp(opt, "--tasks") == 0 && parse_number(val, 1, 1e8, v)) {
            cfg.tasks = (uint64_t)v;
        } else if (val && std::strcmp(opt, "--cancel-pct") == 0 && parse_number(val, 0, 100, v)) {
            cfg.cancel_pct = (unsigned)v;
        } else if (val && std::strcmp(opt, "--time-scale") == 0 &&
                   parse_number(val, 1e-3, 1e9, v)) {
            cfg.time_scale = v;
        } else if (val && std::strcmp(opt, "--seed") == 0 && parse_number(val, 0, 1e18, v)) {
            cfg.seed = (uint64_t)v;
        } else if (val && std::strcmp(opt, "--timers") == 0) {
            cfg.timers = val;
        } else if (val && std::strcmp(opt, "--io") == 0 && std::strcmp(val, "epoll") == 0) {
            cfg.io = TL_IO_EPOLL;
        } else if (val && std::strcmp(opt, "--io") == 0 && std::strcmp(val, "io_uring") == 0) {
            cfg.io = TL_IO_URING;
        } else if (val && std::strcmp(opt, "--io") == 0 && std::strcmp(val, "auto") == 0) {
            cfg.io = TL_IO_AUTO;
        } else {
            static const char *const known[] = {"--tasks", "--cancel-pct", "--time-scale",
                                                "--seed",  "--timers",     "--io"};
            int is_known = 0;
            for (size_t k = 0; k < sizeof known / sizeof known[0]; k++)
                if (std::strcmp(opt, known[k]) == 0) is_known = 1;
            if (!is_known)
                std::fprintf(stderr, "%s: unknown option: %s\n", argv[0], opt);
            else if (!val)
                std::fprintf(stderr, "%s: %s needs a value\n", argv[0], opt);
            else
                std::fprintf(stderr, "%s: bad value for %s: %s\n", argv[0], opt, val);
            usage(stderr, argv[0]);
            return 2;
        }
    }
    return -1;
}

} // namespace

int main(int argc, char **argv) {
    Config cfg;
    if (int status = parse_args(argc, argv, cfg); status >= 0) return status;

    /* The options are checked once, before anything is printed: a wrong
       --timers or --io (or TICKLOOP_IO) is one message and exit 1, not an
       error row under a table header. */
    try {
        tickloop::Options probe;
        probe.io = cfg.io;
        if (cfg.timers != "all") probe.timers = cfg.timers;
        tickloop::Loop loop(probe);
    } catch (const std::system_error &e) {
        std::fprintf(stderr, "delayed_tasks: %s\n", e.what());
        return 1;
    }
    print_header(cfg);
    bool ok = true;
    uint64_t early = 0;
    bool interrupted = false;
    if (cfg.timers == "all") {
        struct sigaction sa {};
        sa.sa_handler = parent_on_sigint;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, nullptr);
        const char *names[32];
        size_t n = std::min(tl_timer_backend_names(names, 32), (size_t)32);
        for (size_t i = 0; i < n && !interrupted; ++i) {
            Result r = run_backend_in_child(cfg, names[i]);
            ok = print_row(r) && ok;
            early += r.early;
            interrupted = r.interrupted || parent_interrupted;
        }
    } else {
        Result r = run_backend(cfg, cfg.timers.empty() ? nullptr : cfg.timers.c_str());
        ok = print_row(r);
        early = r.early;
        interrupted = r.interrupted;
    }
    if (interrupted) {
        /* The shell's convention for a program ended by SIGINT. */
        std::printf("result: interrupted, %" PRIu64 " early\n", early);
        return 128 + SIGINT;
    }
    std::printf("result: %s, %" PRIu64 " early\n", ok ? "ok" : "FAILED", early);
    return ok ? 0 : 1;
}
