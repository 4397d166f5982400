/* SPDX-License-Identifier: MIT */
/*
 * Shared by the fuzz harnesses (timers_fuzz.cc, loop_fuzz.cc): the byte
 * decoder that turns a fuzzer input into operations, and the check that
 * aborts on a violated rule.
 *
 * A harness is built two ways (tests/reliability/meson.build): with
 * -fsanitize=fuzzer as a libFuzzer target, or (the default, any compiler)
 * linked with replay.h, Criterion tests that feeds it every file of its
 * committed corpus. A violation aborts in both: libFuzzer saves the input as
 * a crash, Criterion reports the worker as crashed.
 */
#ifndef TICKLOOP_TESTS_RELIABILITY_FUZZ_COMMON_H
#define TICKLOOP_TESTS_RELIABILITY_FUZZ_COMMON_H

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

/* Prints the broken rule and aborts, so that the fuzzer keeps the input. */
#define FUZZ_CHECK(cond, ...)                                                                      \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            std::fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);          \
            std::fprintf(stderr, __VA_ARGS__);                                                     \
            std::fputc('\n', stderr);                                                              \
            std::abort();                                                                          \
        }                                                                                          \
    } while (0)

namespace fuzz {

/* Reads the input front to back; past its end every read yields 0, so any
 * byte string is a valid program (it just ends in no-ops). */
class Input {
public:
    Input(const uint8_t *data, size_t size) : data_(data), size_(size) {}
    bool empty() const { return pos_ >= size_; }
    /* Skips the rest: every later read yields 0. */
    void finish() { pos_ = size_; }
    uint8_t u8() { return pos_ < size_ ? data_[pos_++] : 0; }
    uint16_t u16() { return (uint16_t)(u8() | (unsigned)u8() << 8); }
    uint32_t u32() { return (uint32_t)u16() | (uint32_t)u16() << 16; }
    uint64_t u64() { return (uint64_t)u32() | (uint64_t)u32() << 32; }

private:
    const uint8_t *data_;
    size_t size_;
    size_t pos_ = 0;
};

inline uint64_t sat_add(uint64_t a, uint64_t b) {
    return a + b < a ? UINT64_MAX : a + b;
}

} // namespace fuzz

#endif /* TICKLOOP_TESTS_RELIABILITY_FUZZ_COMMON_H */
