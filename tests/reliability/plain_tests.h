/* SPDX-License-Identifier: MIT */
/*
 * A stand-in for the part of Criterion that threads.c uses, for builds where
 * Criterion cannot run: under ThreadSanitizer, Criterion's worker arena
 * (boxfort's shared-memory mapping) cannot be placed beside TSan's shadow
 * memory and every test dies before it starts. Compiled with -DTL_PLAIN_TESTS
 * the same test bodies run in one process, in order; a failed check prints
 * the expression and aborts, which fails the run (tsan.sh).
 */
#ifndef TICKLOOP_TESTS_RELIABILITY_PLAIN_TESTS_H
#define TICKLOOP_TESTS_RELIABILITY_PLAIN_TESTS_H

#include <stdio.h>
#include <stdlib.h>

typedef struct plain_test {
    const char *name;
    void (*fn)(void);
} plain_test;

static plain_test plain_tests[64];
static int plain_count;

static inline void plain_check(int ok, const char *expr, const char *file, int line) {
    if (ok) return;
    fprintf(stderr, "%s:%d: check failed: %s\n", file, line, expr);
    abort();
}

/* Options (.timeout = ...) are accepted and ignored. */
#define Test(Suite, Name, ...)                                                                     \
    static void Suite##_##Name(void);                                                              \
    __attribute__((constructor)) static void plain_register_##Suite##_##Name(void) {               \
        plain_tests[plain_count].name = #Suite "::" #Name;                                         \
        plain_tests[plain_count++].fn = Suite##_##Name;                                            \
    }                                                                                              \
    static void Suite##_##Name(void)

/* Messages (the arguments after the operands) are ignored; the trailing ""
   keeps every variadic macro's "..." non-empty, as ISO C requires. */
#define PLAIN_CHECK(cond, ...) plain_check(!!(cond), #cond, __FILE__, __LINE__)
#define PLAIN_CMP(a, op, b, ...) plain_check((a)op(b), #a " " #op " " #b, __FILE__, __LINE__)
#define cr_assert(...) PLAIN_CHECK(__VA_ARGS__, "")
#define cr_assert_eq(...) PLAIN_CMP2(==, __VA_ARGS__, "")
#define cr_assert_geq(...) PLAIN_CMP2(>=, __VA_ARGS__, "")
#define cr_assert_leq(...) PLAIN_CMP2(<=, __VA_ARGS__, "")
#define PLAIN_CMP2(op, a, b, ...) PLAIN_CMP(a, op, b, "")
#define cr_assert_fail(...) plain_check(0, "cr_assert_fail", __FILE__, __LINE__)

int main(void) {
    for (int i = 0; i < plain_count; i++) {
        fprintf(stderr, "[RUN ] %s\n", plain_tests[i].name);
        plain_tests[i].fn();
        fprintf(stderr, "[PASS] %s\n", plain_tests[i].name);
    }
    fprintf(stderr, "%d tests passed\n", plain_count);
    return 0;
}

#endif /* TICKLOOP_TESTS_RELIABILITY_PLAIN_TESTS_H */
