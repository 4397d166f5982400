/* SPDX-License-Identifier: MIT */
/*
 * Replay mode of a fuzz harness (the default build, any compiler): Criterion
 * tests that feed LLVMFuzzerTestOneInput every file of the target's committed
 * corpus, and named regression tests, one per input that once broke a rule.
 * A violated rule aborts the Criterion worker, which reports the test as
 * crashed with the harness's message on stderr.
 *
 * Included once, at the end of a harness, with FUZZ_TARGET (the target's name)
 * and FUZZ_CORPUS_DIR (its corpus directory) defined by meson.build.
 */
#ifndef TICKLOOP_TESTS_RELIABILITY_REPLAY_H
#define TICKLOOP_TESTS_RELIABILITY_REPLAY_H

#include <algorithm>
#include <criterion/criterion.h>
#include <dirent.h>
#include <string>
#include <vector>

namespace fuzz {

inline std::vector<uint8_t> read_input(const std::string &path) {
    std::vector<uint8_t> bytes;
    FILE *f = std::fopen(path.c_str(), "rb");
    cr_assert(f, "cannot open %s", path.c_str());
    uint8_t buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) bytes.insert(bytes.end(), buf, buf + n);
    std::fclose(f);
    return bytes;
}

inline void replay_file(const std::string &path) {
    std::vector<uint8_t> bytes = read_input(path);
    LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
}

} // namespace fuzz

#define FUZZ_STR2(x) #x
#define FUZZ_STR(x) FUZZ_STR2(x)
#define FUZZ_CAT2(a, b) a##b
#define FUZZ_CAT(a, b) FUZZ_CAT2(a, b)

/* Every corpus file, in name order; there must be some. */
Test(reliability, FUZZ_CAT(FUZZ_TARGET, _replays_corpus), .timeout = 600) {
    std::vector<std::string> files;
    DIR *dir = opendir(FUZZ_CORPUS_DIR);
    cr_assert(dir, "cannot open the corpus %s", FUZZ_CORPUS_DIR);
    while (struct dirent *e = readdir(dir))
        if (e->d_name[0] != '.') files.push_back(std::string(FUZZ_CORPUS_DIR "/") + e->d_name);
    closedir(dir);
    std::sort(files.begin(), files.end());
    cr_assert(files.size() >= 10, "only %zu corpus files in %s", files.size(), FUZZ_CORPUS_DIR);
    for (const std::string &f : files) {
        std::fprintf(stderr, "%s\n", f.c_str());
        fuzz::replay_file(f);
    }
}

/* A regression test named after what broke: replays corpus/<target>/regress-<name>. */
#define FUZZ_REGRESSION(name)                                                                      \
    Test(reliability, FUZZ_CAT(FUZZ_CAT(FUZZ_TARGET, _), name), .timeout = 120) {                  \
        fuzz::replay_file(FUZZ_CORPUS_DIR "/regress-" #name);                                      \
    }

#endif /* TICKLOOP_TESTS_RELIABILITY_REPLAY_H */
