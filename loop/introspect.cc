/* SPDX-License-Identifier: MIT */
/*
 * What a program may ask a loop about itself: its counters (tl_loop_stats_get),
 * its timers' lateness (tl_loop_lateness) and the names of the backends it was
 * created with.
 */
#include <cerrno>
#include <cstring>

#include "loop/io/backend.h"
#include "loop/lateness.h"
#include "loop/state.h"
#include "loop/timer_queue.h"
#include "loop/verify.h"

using namespace tl::detail;

extern "C" {

TL_API const char *tl_loop_timers_name(const tl_loop *loop) {
    return loop ? loop->timers.backend->name : nullptr;
}

TL_API const char *tl_loop_io_name(const tl_loop *loop) {
    return loop ? loop->io->name() : nullptr;
}

TL_API void tl_loop_stats_get(const tl_loop *loop, tl_loop_stats *out) {
    if (!out) return;
    if (!loop) {
        std::memset(out, 0, sizeof *out);
        return;
    }
    *out = loop->stats;
    out->timers_active = timers_active(loop);
    out->unref_active = loop->unref_active;
}

TL_API int tl_loop_lateness(tl_loop *loop, tl_lateness *out, int reset) {
    if (!loop || !out) return -EINVAL;
    TL_CHECK_LOOP_THREAD(loop);
    lateness_summary(loop->lateness, out);
    if (reset) std::memset(&loop->lateness, 0, sizeof loop->lateness);
    return 0;
}

} // extern "C"
