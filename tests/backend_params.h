/* SPDX-License-Identifier: MIT */
/*
 * Test helper shared by the suites that run once per timer backend: a Criterion
 * parameter generator over every registered backend (tl_timer_backend_names),
 * so a backend added to the registry is tested without touching the tests.
 *
 * Criterion runs each test in a separate worker process and hands it the
 * parameters through its shared arena, so names are copied by value into
 * cr_malloc'd memory rather than passed as pointers into the registry.
 */
#ifndef TICKLOOP_TESTS_BACKEND_PARAMS_H
#define TICKLOOP_TESTS_BACKEND_PARAMS_H

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <string.h>

#include <tickloop/timer_backend.h>

/* More than any registry holds (it has room for the built-ins plus 32). */
#define BACKEND_PARAMS_MAX 64

typedef struct backend_param {
    char name[64];
} backend_param;

static inline void backend_params_free(struct criterion_test_params *crp) {
    cr_free(crp->params);
}

static inline struct criterion_test_params backend_params(void) {
    const char *names[BACKEND_PARAMS_MAX];
    size_t n = tl_timer_backend_names(names, BACKEND_PARAMS_MAX);
    if (n > BACKEND_PARAMS_MAX) n = BACKEND_PARAMS_MAX;
    backend_param *params = (backend_param *)cr_malloc(n * sizeof *params);
    for (size_t i = 0; i < n; ++i) {
        memset(params[i].name, 0, sizeof params[i].name);
        strncpy(params[i].name, names[i], sizeof params[i].name - 1);
    }
    return cr_make_param_array(backend_param, params, n, backend_params_free);
}

/* 1 if the backend registered under name says it fires exactly at the
 * deadline, in (deadline, insertion) order (TL_TIMER_CAP_EXACT); 0 for the
 * tick-order rule. Tests decide what to check from this, never from a name. */
static inline int backend_exact(const char *name) {
    const tl_timer_backend *b = tl_timer_backend_find(name);
    return b && (b->caps & TL_TIMER_CAP_EXACT) ? 1 : 0;
}

/* Declares a test that runs once per registered timer backend; the body sees
 * `const backend_param *p` and should name p->name in its failure messages. */
#define BACKEND_TEST(Suite, Name)                                                                  \
    ParameterizedTestParameters(Suite, Name) {                                                     \
        return backend_params();                                                                   \
    }                                                                                              \
    ParameterizedTest(backend_param *p, Suite, Name)

#endif /* TICKLOOP_TESTS_BACKEND_PARAMS_H */
