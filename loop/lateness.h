/* SPDX-License-Identifier: MIT */
/*
 * Internal to loop/: the per-loop lateness histogram behind
 * tl_loop_lateness().
 *
 * Every fired timer adds one value, its lateness: the iteration's wake-up
 * time (the cached `now` the dispatch runs at) minus its deadline, in ns.
 * The histogram is log-linear, HdrHistogram's layout with 16 sub-buckets
 * per power of two:
 *
 *   value v          bucket                          width
 *   0 .. 31          v (exact)                       1 ns
 *   2^e .. 2^(e+1)   16 (e - 3) + (v >> (e - 4)) % 16   2^(e - 4)   (e = 5 .. 63)
 *
 * so a bucket is never wider than 1/16 of its lower edge: a percentile
 * reported as its bucket's upper edge is never below the exact value and at
 * most 1/16 above it. 976 counters cover the whole uint64_t range (a lateness
 * of hours after a suspend is still counted, never clipped); the maximum is
 * kept exactly besides.
 *
 * Recording is on the expiry path of every timer (the benchmark that
 * watches it: bench-timer-ops "expire"), so it is branch-free apart from the
 * maximum: one bit scan, two shifts, one increment; about 12 instructions
 * (callgrind over bench-wait-syscalls expire, 1e5 heap4 timers:
 * +14 instructions per fired timer, +2.9% of tl_loop_run's).
 */
#ifndef TICKLOOP_LOOP_LATENESS_H
#define TICKLOOP_LOOP_LATENESS_H

#include <cstddef>
#include <cstdint>

#include "tickloop/tickloop.h"

namespace tl::detail {

inline constexpr unsigned kLatenessSubBits = 4; /* 16 sub-buckets: error <= 1/16 */
inline constexpr unsigned kLatenessBuckets = (64 - kLatenessSubBits + 1) << kLatenessSubBits;

/* No separate count: the summary adds up the buckets, which keeps one
 * memory increment off the expiry path. */
struct LatenessHistogram {
    uint64_t max_ns;
    uint64_t buckets[kLatenessBuckets];
};

/* The bucket of v. Or-ing in 16 gives values below 32 the exponent 4, whose
 * shift is 0: they map to themselves. `63 ^ clz` is the index of the top bit
 * (one bsr on x86-64; `63 - clz` is the same number but costs two more
 * instructions with GCC 12). */
inline constexpr size_t lateness_bucket(uint64_t v) noexcept {
    unsigned e = 63u ^ (unsigned)__builtin_clzll(v | (1u << kLatenessSubBits));
    unsigned shift = e - kLatenessSubBits;
    return ((size_t)shift << kLatenessSubBits) + (size_t)(v >> shift);
}

/* The smallest and the largest value that fall into bucket i. */
inline constexpr uint64_t lateness_bucket_low(unsigned i) noexcept {
    unsigned k = i >> kLatenessSubBits;
    if (k == 0) return i;
    unsigned shift = k - 1;
    return (uint64_t)((1u << kLatenessSubBits) + (i & ((1u << kLatenessSubBits) - 1))) << shift;
}
inline constexpr uint64_t lateness_bucket_high(unsigned i) noexcept {
    unsigned k = i >> kLatenessSubBits;
    uint64_t width = k == 0 ? 1 : (uint64_t)1 << (k - 1);
    return lateness_bucket_low(i) + (width - 1);
}

static_assert(lateness_bucket(31) == 31 && lateness_bucket(32) == 32 &&
              lateness_bucket(UINT64_MAX) == kLatenessBuckets - 1);
static_assert(lateness_bucket_high(kLatenessBuckets - 1) == UINT64_MAX);

/* Adds one fired timer's lateness. Pre: deadline <= now (a timer never fires
 * early; the backends' pop_expired guarantees it). */
inline void lateness_record(LatenessHistogram &h, uint64_t now, uint64_t deadline) noexcept {
    uint64_t late = now - deadline;
    ++h.buckets[lateness_bucket(late)];
    if (late > h.max_ns) h.max_ns = late;
}

/* Fills out from h: count, the nearest-rank percentiles (each its bucket's
 * upper edge, clamped to the exact maximum) and the maximum. */
void lateness_summary(const LatenessHistogram &h, tl_lateness *out) noexcept;

} // namespace tl::detail

#endif /* TICKLOOP_LOOP_LATENESS_H */
