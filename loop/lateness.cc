/* SPDX-License-Identifier: MIT */
/*
 * Percentiles of the lateness histogram (lateness.h), for tl_loop_lateness.
 *
 * Percentiles are nearest-rank: p50 is the smallest recorded value that at
 * least half of all values do not exceed. The histogram finds the bucket
 * holding it and reports the bucket's upper edge, clamped to the exact
 * maximum, so a reported percentile is never below the exact one and at most
 * 1/16 above it.
 */
#include <cstring>

#include "loop/lateness.h"

namespace tl::detail {

namespace {

/* The rank (1-based) of the nearest-rank percentile num/den (num <= den) of
 * count values: ceil(count * num / den), at least 1, computed in two parts
 * because count * 999 may overflow. */
uint64_t rank_of(uint64_t count, unsigned num, unsigned den) noexcept {
    uint64_t whole = count / den * num;
    uint64_t part = (count % den * num + den - 1) / den;
    uint64_t r = whole + part;
    return r ? r : 1;
}

} // namespace

void lateness_summary(const LatenessHistogram &h, tl_lateness *out) noexcept {
    std::memset(out, 0, sizeof *out);
    uint64_t count = 0;
    for (uint64_t n : h.buckets) count += n;
    out->count = count;
    out->max_ns = h.max_ns;
    if (count == 0) return;
    struct Want {
        unsigned num, den;
        uint64_t *dst;
    } wants[] = {
        {50, 100, &out->p50_ns},
        {90, 100, &out->p90_ns},
        {99, 100, &out->p99_ns},
        {999, 1000, &out->p999_ns},
    };
    /* One walk: the wanted ranks rise with the percentiles. */
    uint64_t seen = 0;
    unsigned w = 0;
    for (unsigned i = 0; i < kLatenessBuckets && w < 4; ++i) {
        seen += h.buckets[i];
        while (w < 4 && seen >= rank_of(count, wants[w].num, wants[w].den)) {
            uint64_t high = lateness_bucket_high(i);
            *wants[w].dst = high < h.max_ns ? high : h.max_ns;
            ++w;
        }
    }
}

} // namespace tl::detail
