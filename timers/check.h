/* SPDX-License-Identifier: MIT */
/*
 * The backends' invariant walkers: the failure message every walker returns,
 * and the hooks the tests and benchmarks reach them by. The hooks have C
 * linkage so the C test suites can call them; they are hidden from the shared
 * library and reached by linking the static one.
 */
#ifndef TICKLOOP_TIMERS_CHECK_H
#define TICKLOOP_TIMERS_CHECK_H

#include <stdint.h>

#include "tickloop/timer_backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Walks a backend's structure and checks every invariant its file states.
 * Returns NULL when all hold, else a message naming the first broken one
 * (valid until the next call from the same thread). Backends the registry does
 * not know a walker for (custom ones) always pass. Not thread-safe for the
 * same self. */
const char *tl_detail_timers_check(const tl_timer_backend *b, void *self);

/* How many timers an hwheel instance (self, from hwheel's create) has
 * re-filed in cascades since it was created: for benchmarks and tests of
 * leeway's "never cascaded". */
uint64_t tl_detail_hwheel_cascades(void *self);

#ifdef __cplusplus
}

namespace tl::detail {

/* A backend's invariant walker: NULL or the first broken invariant. */
using check_fn = const char *(*)(void *self);

/* Formats an invariant failure into a thread-local buffer (printf style). */
const char *check_failed(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

} // namespace tl::detail
#endif

#endif /* TICKLOOP_TIMERS_CHECK_H */
