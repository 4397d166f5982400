/* SPDX-License-Identifier: MIT */
/*
 * Static dispatch of the loop's hottest timer call, a restart (a heartbeat
 * per packet), for the built-ins whose structure is header-only: the loop
 * calls reschedule() below, which compares the backend with this list and
 * calls the structure directly, inlined into tl_timer_start; any other
 * backend goes through its vtable. The list is the only place that names
 * backends for speed, and it lives here, in timers/, so loop/ includes no
 * backend header and compares no backend address.
 *
 * Measured with bench-timer-ops restart/<heap>/n:<N>/equal:0 (thread CPU
 * per op, two builds run alternately, median of the per-round ratios):
 * through the vtable, heap4's restart at 1e6 took 1.16x the time of the
 * inlined path of de4b0a3 (1.03-1.28 over 5 rounds); with this dispatch it
 * takes 0.89x the vtable's at 1e6 and 0.95x at 1e3 (4 rounds), and 0.97x
 * de4b0a3's at both sizes (heap2 1.00x and 1.07x, within its spread). The
 * wheels' classes live in their .cc files and keep the vtable call.
 */
#ifndef TICKLOOP_TIMERS_DISPATCH_H
#define TICKLOOP_TIMERS_DISPATCH_H

#include "backend_glue.h"
#include "dary_heap.h"

namespace tl::detail {

/* X(vtable, Impl) for each built-in dispatched statically. */
#define TL_STATIC_TIMER_BACKENDS(X)                                                                \
    X(heap4_backend, Heap4)                                                                        \
    X(heap2_backend, Heap2)

/* b->reschedule(self, t, deadline), without the indirect call for the
   backends listed above. Pre: b->reschedule is not NULL, t inside. */
[[gnu::always_inline]] inline void reschedule(const tl_timer_backend *b, void *self, tl_timer *t,
                                              uint64_t deadline) noexcept {
#define TL_STATIC_RESCHEDULE(vtable, Impl)                                                         \
    if (b == &vtable) return BackendGlue<Impl>::reschedule(self, t, deadline);
    TL_STATIC_TIMER_BACKENDS(TL_STATIC_RESCHEDULE)
#undef TL_STATIC_RESCHEDULE
    b->reschedule(self, t, deadline);
}

} // namespace tl::detail

#endif /* TICKLOOP_TIMERS_DISPATCH_H */
