/* SPDX-License-Identifier: MIT */
/*
 * Internal to loop/: what hook.cc (tl_hook: PREPARE, CHECK, IDLE) offers the
 * iteration.
 */
#ifndef TICKLOOP_LOOP_HOOK_H
#define TICKLOOP_LOOP_HOOK_H

#include "tickloop/tickloop.h"

namespace tl::detail {

/* Runs the active hooks of one kind in start order (hook.cc). */
void hooks_run(tl_loop *loop, tl_hook_kind kind) noexcept;

} // namespace tl::detail

#endif /* TICKLOOP_LOOP_HOOK_H */
