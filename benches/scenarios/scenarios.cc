/* SPDX-License-Identifier: MIT */
/*
 * scenarios.cc: bench-scenarios, the whole-program scenarios (the parent;
 * child.cc runs one scenario on one library), for
 * every tickloop timer backend, libev and libuv, each library in a fresh
 * child process so that its peak RSS is its own:
 *
 *   heartbeat  1e6 connections, each owning a 30 s idle timeout (deadlines
 *              staggered over the last 30 s); "packets" arrive on random
 *              connections: the handler updates the connection (which embeds
 *              the timer handle) and restarts its timeout; one non-blocking
 *              loop iteration every 256 packets, so time advances and the
 *              few connections that stay idle long enough time out.
 *   delayed    1e6 tasks created in a burst (a non-blocking iteration every
 *              256) with a 30 min delay each; then 99% of them, in random
 *              order, are cancelled. The 1% survivors would fire 30 minutes
 *              later: nobody waits for that, they are stopped in cleanup
 *              (firing is what million_timers and bench-timer-ops' expire
 *              measure).
 *   million    the idea of libuv's test/benchmark-million-timers.c: 1e7
 *              timers, the i-th with a timeout of 1 + i/1000 ms (so they fire
 *              over 10 s of wall time, 1000 per ms); phases init (init and
 *              start every handle), dispatch (run the loop until none is
 *              active) and cleanup (close the handles, free the loop).
 *
 * Every phase is reported in wall time and in process CPU time
 * (CLOCK_PROCESS_CPUTIME_ID): million's dispatch lasts 10 s of wall time
 * whatever the library, so CPU time is the figure that compares them. Peak
 * RSS is the child's ru_maxrss (wait4), which includes the application's own
 * handle array (N x the handle size, shown beside it).
 *
 * Usage: bench-scenarios [--json FILE] [--scenarios heartbeat,delayed,million]
 *        [--libs heap2,...,libev,libuv] [--million-n N] [--heartbeat-packets N]
 * libevent is not among the libraries: Debian's libev exports libevent's
 * symbol names, so it would need a child executable of its own.
 */
#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <tickloop/timer_backend.h>

#include "latency.h"
#include "scenarios.h"

extern char **environ;

namespace {

using namespace bench;
using namespace bench::scenarios;

/* ------------------------------------------------------------------------ */
/* The parent: one child per scenario and library, then the tables          */
/* ------------------------------------------------------------------------ */

struct Phase {
    std::string name;
    uint64_t wall_ns = 0, cpu_ns = 0;
};

struct Row {
    std::string scenario, lib, impl, error;
    std::vector<Phase> phases;
    uint64_t n = 0, ops = 0, fired = 0, handle_bytes = 0;
    long maxrss_kb = 0;
    uint64_t cpu_ns() const {
        uint64_t t = 0;
        for (const Phase &p : phases) t += p.cpu_ns;
        return t;
    }
    uint64_t wall_ns() const {
        uint64_t t = 0;
        for (const Phase &p : phases) t += p.wall_ns;
        return t;
    }
};

std::vector<std::string> split_tabs(const std::string &line) {
    std::vector<std::string> out;
    size_t pos = 0;
    for (;;) {
        size_t end = line.find('\t', pos);
        out.push_back(line.substr(pos, end == std::string::npos ? end : end - pos));
        if (end == std::string::npos) return out;
        pos = end + 1;
    }
}

std::string self_exe() {
    char buf[4096];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    return n > 0 ? std::string(buf, (size_t)n) : std::string();
}

Row spawn_child(const std::string &scenario, const std::string &lib,
                const std::vector<std::string> &size_args) {
    Row row;
    row.scenario = scenario;
    row.lib = row.impl = lib;
    std::vector<std::string> args{self_exe(), "--child", scenario, lib};
    args.insert(args.end(), size_args.begin(), size_args.end());
    std::vector<char *> argv;
    for (auto &a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
        row.error = std::string("pipe2: ") + std::strerror(errno);
        return row;
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
    pid_t pid;
    int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    close(fds[1]);
    if (rc != 0) {
        close(fds[0]);
        row.error = std::string("posix_spawn: ") + std::strerror(rc);
        return row;
    }
    std::string text;
    char buf[4096];
    for (ssize_t got; (got = read(fds[0], buf, sizeof buf)) != 0;) {
        if (got < 0) {
            if (errno == EINTR) continue;
            break;
        }
        text.append(buf, (size_t)got);
    }
    close(fds[0]);
    int status = 0;
    rusage ru{};
    while (wait4(pid, &status, 0, &ru) < 0 && errno == EINTR) {
    }
    row.maxrss_kb = ru.ru_maxrss;
    size_t pos = 0;
    while (pos < text.size()) {
        size_t end = text.find('\n', pos);
        if (end == std::string::npos) end = text.size();
        std::vector<std::string> f = split_tabs(text.substr(pos, end - pos));
        pos = end + 1;
        if (f[0] == "PHASE" && f.size() == 4)
            row.phases.push_back({f[1], std::strtoull(f[2].c_str(), nullptr, 10),
                                  std::strtoull(f[3].c_str(), nullptr, 10)});
        else if (f[0] == "ERROR" && f.size() == 2)
            row.error = f[1];
        else if (f[0] == "INFO" && f.size() == 3) {
            uint64_t v = std::strtoull(f[2].c_str(), nullptr, 10);
            if (f[1] == "impl")
                row.impl = f[2];
            else if (f[1] == "n")
                row.n = v;
            else if (f[1] == "ops")
                row.ops = v;
            else if (f[1] == "fired")
                row.fired = v;
            else if (f[1] == "handle_bytes")
                row.handle_bytes = v;
        }
    }
    if (row.error.empty() && (!WIFEXITED(status) || WEXITSTATUS(status) != 0))
        row.error = "child exited with status " + std::to_string(status);
    return row;
}

bool is_peer(const Row &r) {
    return r.lib == "libev" || r.lib == "libuv";
}

void print_table(const std::string &title, const std::vector<Row> &rows) {
    std::printf("\n== %s ==\n", title.c_str());
    const Row *uv = nullptr, *best = nullptr;
    for (const Row &r : rows) {
        if (!r.error.empty() || !is_peer(r)) continue;
        if (r.lib == "libuv") uv = &r;
        if (!best || r.cpu_ns() < best->cpu_ns()) best = &r;
    }
    std::printf("%-22s", "CPU s (wall s)");
    if (!rows.empty())
        for (const Phase &p : rows.front().phases) std::printf(" %17s", p.name.c_str());
    std::printf(" %16s %9s %7s %8s %10s %10s\n", "total", "ns/op", "handle", "RSS MB", "libuv/us",
                "bestpeer/us");
    for (const Row &r : rows) {
        if (!r.error.empty()) {
            std::printf("%-22s failed: %s\n", r.impl.c_str(), r.error.c_str());
            continue;
        }
        std::printf("%-22s", r.impl.c_str());
        for (const Phase &p : r.phases)
            std::printf(" %7.3f (%7.3f)", (double)p.cpu_ns / 1e9, (double)p.wall_ns / 1e9);
        std::printf(" %6.3f (%7.3f)", (double)r.cpu_ns() / 1e9, (double)r.wall_ns() / 1e9);
        uint64_t work = r.ops ? r.ops : r.n;
        std::printf(" %9.1f %6" PRIu64 "B %8.1f", work ? (double)r.cpu_ns() / (double)work : 0.0,
                    r.handle_bytes, (double)r.maxrss_kb / 1024.0);
        auto ratio = [&](const Row *peer) {
            char b[32] = "";
            if (peer && !is_peer(r) && r.cpu_ns())
                std::snprintf(b, sizeof b, "%.2fx", (double)peer->cpu_ns() / (double)r.cpu_ns());
            return std::string(b);
        };
        std::printf(" %10s %10s\n", ratio(uv).c_str(), ratio(best).c_str());
    }
    std::printf("CPU: process CPU time of the phase (wall time in parentheses); ns/op: total CPU "
                "over the operations (million: over the timers); handle: sizeof the library's "
                "timer handle; RSS: the child's peak resident set; libuv/us, bestpeer/us: "
                "the peer's total CPU over ours (above 1: tickloop uses less)\n");
    for (const Row &r : rows)
        if (r.error.empty() && r.scenario != "million")
            std::printf("note: %s: %" PRIu64 " timers fired\n", r.impl.c_str(), r.fired);
    std::fflush(stdout);
}

std::string json_str(const std::string &s) {
    std::string out = "\"";
    for (char c : s) {
        if (c == '"' || c == '\\') out += '\\';
        if ((unsigned char)c < 0x20) c = ' ';
        out += c;
    }
    return out + "\"";
}

bool write_json(const char *path, const Sizes &z, const std::vector<Row> &all) {
    FILE *f = std::fopen(path, "w");
    if (!f) return false;
    std::fprintf(f,
                 "{\n  \"meta\": {\"tickloop\": %s, \"million_n\": %zu, \"heartbeat_conns\": %zu, "
                 "\"heartbeat_packets\": %zu, \"delayed_tasks\": %zu},\n  \"scenarios\": [\n",
                 json_str(tl_version()).c_str(), z.million_n, z.heartbeat_conns,
                 z.heartbeat_packets, z.delayed_tasks);
    for (size_t i = 0; i < all.size(); ++i) {
        const Row &r = all[i];
        std::fprintf(f,
                     "    {\"scenario\": %s, \"lib\": %s, \"impl\": %s, \"error\": %s, \"n\": "
                     "%" PRIu64 ", \"ops\": %" PRIu64 ", \"fired\": %" PRIu64
                     ", \"handle_bytes\": %" PRIu64 ", \"maxrss_kb\": %ld, \"cpu_ns\": %" PRIu64
                     ", \"wall_ns\": %" PRIu64 ", \"phases\": [",
                     json_str(r.scenario).c_str(), json_str(r.lib).c_str(),
                     json_str(r.impl).c_str(), json_str(r.error).c_str(), r.n, r.ops, r.fired,
                     r.handle_bytes, r.maxrss_kb, r.cpu_ns(), r.wall_ns());
        for (size_t j = 0; j < r.phases.size(); ++j)
            std::fprintf(f, "%s{\"name\": %s, \"wall_ns\": %" PRIu64 ", \"cpu_ns\": %" PRIu64 "}",
                         j ? ", " : "", json_str(r.phases[j].name).c_str(), r.phases[j].wall_ns,
                         r.phases[j].cpu_ns);
        std::fprintf(f, "]}%s\n", i + 1 < all.size() ? "," : "");
    }
    std::fprintf(f, "  ]\n}\n");
    return std::fclose(f) == 0;
}

std::vector<std::string> split_commas(const char *s) {
    std::vector<std::string> out;
    std::string cur;
    for (;; ++s) {
        if (*s == ',' || *s == '\0') {
            if (!cur.empty()) out.push_back(cur);
            cur.clear();
            if (!*s) return out;
        } else {
            cur += *s;
        }
    }
}

bool wanted(const std::vector<std::string> &filter, const std::string &name) {
    return filter.empty() || std::find(filter.begin(), filter.end(), name) != filter.end();
}

/* "--name=N" into out (N may be written 1e7); false if arg is not that flag. */
bool size_flag(const char *arg, const char *name, size_t &out) {
    size_t len = std::strlen(name);
    if (std::strncmp(arg, name, len) != 0 || arg[len] != '=') return false;
    out = (size_t)std::strtod(arg + len + 1, nullptr);
    return true;
}

/* Every wanted scenario on every wanted library, one child process each,
   with a table per scenario. */
std::vector<Row> run_scenarios(const Sizes &z, const std::vector<std::string> &scenarios_filter,
                               const std::vector<std::string> &libs_filter,
                               const std::vector<std::string> &size_args) {
    std::vector<std::string> libs;
    size_t n_backends = tl_timer_backend_names(nullptr, 0);
    std::vector<const char *> names(n_backends);
    tl_timer_backend_names(names.data(), n_backends);
    for (const char *name : names) libs.push_back(name);
#if TL_BENCH_HAVE_LIBEV
    libs.push_back("libev");
#endif
#if TL_BENCH_HAVE_LIBUV
    libs.push_back("libuv");
#endif
    std::printf("bench-scenarios: tickloop %s; each library in a fresh process\n", tl_version());
    std::fflush(stdout);
    std::vector<Row> all;
    struct Scenario {
        const char *name;
        std::string title;
    };
    const Scenario scenarios[] = {
        {"heartbeat", "heartbeat: " + std::to_string(z.heartbeat_conns) +
                          " connections with 30 s idle timeouts, " +
                          std::to_string(z.heartbeat_packets) +
                          " packets on random connections, each restarting its timeout"},
        {"delayed", "delayed: " + std::to_string(z.delayed_tasks) +
                        " tasks created in a burst with a 30 min delay, 99% then cancelled in "
                        "random order"},
        {"million", "million_timers (libuv's benchmark): " + std::to_string(z.million_n) +
                        " timers, timeouts 1 ms - " +
                        std::to_string(z.million_n / z.million_per_ms) + " ms, " +
                        std::to_string(z.million_per_ms) + " per ms"},
    };
    for (const Scenario &s : scenarios) {
        if (!wanted(scenarios_filter, s.name)) continue;
        std::vector<Row> rows;
        for (const std::string &lib : libs)
            if (wanted(libs_filter, lib)) rows.push_back(spawn_child(s.name, lib, size_args));
        print_table(s.title, rows);
        all.insert(all.end(), rows.begin(), rows.end());
    }
    return all;
}

} // namespace

int main(int argc, char **argv) {
    Sizes z;
    const char *json = nullptr;
    std::vector<std::string> scenarios_filter, libs_filter, size_args;
    std::string child_scenario, child_lib;
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i];
        if (!std::strcmp(a, "--child") && i + 2 < argc) {
            child_scenario = argv[++i];
            child_lib = argv[++i];
        } else if (!std::strcmp(a, "--json") && i + 1 < argc)
            json = argv[++i];
        else if (!std::strcmp(a, "--scenarios") && i + 1 < argc)
            scenarios_filter = split_commas(argv[++i]);
        else if (!std::strcmp(a, "--libs") && i + 1 < argc)
            libs_filter = split_commas(argv[++i]);
        else if (size_flag(a, "--million-n", z.million_n) ||
                 size_flag(a, "--heartbeat-packets", z.heartbeat_packets))
            size_args.push_back(a);
        else {
            std::fprintf(stderr,
                         "usage: %s [--json FILE] [--scenarios heartbeat,delayed,million] "
                         "[--libs heap2,...,libev,libuv] [--million-n=N] "
                         "[--heartbeat-packets=N]\n",
                         argv[0]);
            return 2;
        }
    }
    if (!child_scenario.empty()) return child(child_scenario, child_lib, z);

    uint64_t start = mono_ns();
    std::vector<Row> all = run_scenarios(z, scenarios_filter, libs_filter, size_args);
    std::printf("\ntook %.1f s\n", (double)(mono_ns() - start) / 1e9);
    if (json) {
        if (!write_json(json, z, all)) {
            std::fprintf(stderr, "cannot write %s: %s\n", json, std::strerror(errno));
            return 1;
        }
        std::printf("wrote %s\n", json);
    }
    for (const Row &r : all)
        if (!r.error.empty()) return 1;
    return 0;
}
