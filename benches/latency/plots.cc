/* SPDX-License-Identifier: MIT */
/*
 * plots.cc: tickloop-bench's PNGs, drawn from results.json by tools/plot.py
 * (python3-matplotlib) in the results directory.
 */
#include <algorithm>
#include <cerrno>
#include <cstring>

#include <dirent.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "job.h"

extern char **environ;

namespace bench::job {

/* Runs tools/plot.py on results.json, writing the PNGs next to it.
   Returns what the run should say about the plots. */
std::string run_plots(const std::string &dir) {
#ifdef TL_BENCH_PLOT_PY
    const char *script = TL_BENCH_PLOT_PY;
#else
    const char *script = "";
#endif
    if (!*script || access(script, R_OK) != 0)
        return std::string("plots skipped: benches/tools/plot.py not found (") + script + ")";
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

/* Prints the names of the PNGs in dir, sorted, each after a space. */
void print_pngs(const std::string &dir) {
    DIR *d = opendir(dir.c_str());
    if (!d) return;
    std::vector<std::string> pngs;
    while (dirent *e = readdir(d)) {
        std::string name = e->d_name;
        if (name.size() > 4 && name.compare(name.size() - 4, 4, ".png") == 0) pngs.push_back(name);
    }
    closedir(d);
    std::sort(pngs.begin(), pngs.end());
    for (const std::string &name : pngs) std::printf(" %s", name.c_str());
}

} // namespace bench::job
