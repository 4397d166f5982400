/* SPDX-License-Identifier: MIT */
/*
 * runner.cc: how tickloop-bench runs its rows: in rounds that interleave
 * them (so a burst of load elsewhere on the machine hits them alike), the
 * rounds of one row merged into one result, and libevent's rows through
 * the helper executable tickloop-bench-libevent.
 */
#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "job.h"

extern char **environ;

namespace bench::job {

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

std::mutex env_mutex;

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
                                 const Params *params) {
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

/* ------------------------------------------------------------------------ */
/* Rounds                                                                   */
/* ------------------------------------------------------------------------ */

/* Adds one round's results of a runner to its totals (matched by row name). */
static void merge(std::vector<Result> &totals, std::vector<Result> round) {
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

/* Every runner runs its share of round 0, then of round 1, ...; the order
   within a round rotates so no row always follows the same neighbour. A
   runner whose rows cannot run is tried once only. Returns the rows, which
   are also added to job.all. */
std::vector<Result> run_rounds(Job &job, const std::vector<RunRound> &runners, size_t rounds) {
    std::vector<std::vector<Result>> per_runner(runners.size());
    std::vector<bool> dead(runners.size());
    for (size_t round = 0; round < rounds; ++round)
        for (size_t k = 0; k < runners.size(); ++k) {
            size_t i = (k + round) % runners.size();
            if (dead[i]) continue;
            std::vector<Result> got = runners[i](round);
            /* tl_loop_options.timer_slack_ns can change the thread's slack;
               the next rows must still wait under the slack printed above. */
            if (prctl(PR_GET_TIMERSLACK) != job.slack) {
                prctl(PR_SET_TIMERSLACK, (unsigned long)job.slack);
                for (Result &r : got) r.note += "changed the thread's timer slack; ";
            }
            bool all_skipped = true;
            for (const Result &r : got) all_skipped &= !r.skipped.empty();
            dead[i] = all_skipped;
            merge(per_runner[i], std::move(got));
        }
    std::vector<Result> rows;
    for (auto &results : per_runner)
        for (Result &r : results) {
            rows.push_back(r);
            job.all.push_back(std::move(r));
        }
    return rows;
}

} // namespace bench::job
