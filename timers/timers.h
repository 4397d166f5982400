/* SPDX-License-Identifier: MIT */
/*
 * Everything timers/ offers the rest of the library, for the files outside
 * it that use several parts (loop/, the benchmarks, the tests): one include
 * of each subject's header. Files in timers/ include the subjects they use.
 */
#ifndef TICKLOOP_TIMERS_TIMERS_H
#define TICKLOOP_TIMERS_TIMERS_H

#include "check.h"
#ifdef __cplusplus
#include "builtin.h"
#include "deadline.h"
#include "leeway.h"
#include "malloc_new.h"
#endif

#endif /* TICKLOOP_TIMERS_TIMERS_H */
