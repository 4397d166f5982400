/* SPDX-License-Identifier: MIT */
/*
 * results.cc: where tickloop-bench's results go: results.json (every
 * sample), the results directory (build/results/<UTC time>/ unless --out),
 * and report.txt (everything printed, through StdoutTee).
 */
#include <cerrno>
#include <cinttypes>
#include <cstring>
#include <ctime>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "job.h"

namespace bench::job {

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
/* The results directory                                                    */
/* ------------------------------------------------------------------------ */

/* The directory of this executable, with a trailing '/'; empty if unknown. */
static std::string self_dir() {
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

bool StdoutTee::open(const std::string &path) {
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

void StdoutTee::close_tee() {
    if (!thread_.joinable()) return;
    std::fflush(stdout);
    dup2(saved_, STDOUT_FILENO);
    thread_.join();
    close(reader_);
    close(saved_);
    std::fclose(file_);
}

} // namespace bench::job
