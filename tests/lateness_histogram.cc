/* SPDX-License-Identifier: MIT */
/*
 * The lateness histogram on its own (loop/lateness.h), with values chosen by
 * the test: bucket edges over the whole 64-bit range, the 1/16 error bound
 * the public header states, and the percentiles against an exact sort of
 * the same values (fixed seeds).
 */
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include <criterion/criterion.h>

#include "loop/lateness.h"

using namespace tl::detail;

namespace {

LatenessHistogram *fresh() {
    static LatenessHistogram h;
    std::memset(&h, 0, sizeof h);
    return &h;
}

uint64_t exact(const std::vector<uint64_t> &sorted, unsigned num, unsigned den) {
    uint64_t n = sorted.size();
    uint64_t rank = (n * num + den - 1) / den;
    return sorted[(rank ? rank : 1) - 1];
}

void check_within(const char *what, uint64_t reported, uint64_t want) {
    cr_assert(reported >= want && reported - want <= want / 16, "%s: reported %llu, exact %llu",
              what, (unsigned long long)reported, (unsigned long long)want);
}

void check_against_sort(std::vector<uint64_t> values) {
    LatenessHistogram *h = fresh();
    for (uint64_t v : values) lateness_record(*h, v, 0);
    tl_lateness l;
    lateness_summary(*h, &l);
    std::sort(values.begin(), values.end());
    cr_assert(l.count == values.size());
    check_within("p50", l.p50_ns, exact(values, 50, 100));
    check_within("p90", l.p90_ns, exact(values, 90, 100));
    check_within("p99", l.p99_ns, exact(values, 99, 100));
    check_within("p99.9", l.p999_ns, exact(values, 999, 1000));
    cr_assert(l.max_ns == values.back());
}

} // namespace

Test(lateness_histogram, buckets_tile_the_range_within_one_sixteenth) {
    /* Consecutive buckets are adjacent, and each is at most 1/16 of its low
       edge wide (exactly 1 ns below 32). */
    for (unsigned i = 0; i + 1 < kLatenessBuckets; ++i) {
        uint64_t low = lateness_bucket_low(i), high = lateness_bucket_high(i);
        cr_assert(low <= high);
        cr_assert(lateness_bucket_low(i + 1) == high + 1, "gap after bucket %u", i);
        cr_assert(lateness_bucket(low) == i && lateness_bucket(high) == i, "bucket %u", i);
        if (low < 32)
            cr_assert(low == high);
        else
            cr_assert(high - low + 1 <= low / 16, "bucket %u [%llu, %llu] too wide", i,
                      (unsigned long long)low, (unsigned long long)high);
    }
    cr_assert(lateness_bucket_high(kLatenessBuckets - 1) == UINT64_MAX);
}

Test(lateness_histogram, powers_of_two_and_neighbours_land_in_their_bucket) {
    for (unsigned e = 0; e < 64; ++e) {
        uint64_t p = (uint64_t)1 << e;
        for (uint64_t v : {p - 1, p, p + 1}) {
            unsigned b = (unsigned)lateness_bucket(v);
            cr_assert(b < kLatenessBuckets);
            cr_assert(lateness_bucket_low(b) <= v && v <= lateness_bucket_high(b),
                      "%llu outside its bucket %u", (unsigned long long)v, b);
        }
    }
}

Test(lateness_histogram, one_value_is_every_percentile_exactly) {
    /* The upper edge of 1,000,003's bucket is clamped to the exact maximum. */
    LatenessHistogram *h = fresh();
    lateness_record(*h, 2000003, 1000000);
    tl_lateness l;
    lateness_summary(*h, &l);
    cr_assert(l.count == 1 && l.max_ns == 1000003);
    cr_assert(l.p50_ns == 1000003 && l.p90_ns == 1000003 && l.p99_ns == 1000003 &&
              l.p999_ns == 1000003);
}

Test(lateness_histogram, small_values_are_exact) {
    std::vector<uint64_t> v;
    for (uint64_t i = 0; i < 1000; ++i) v.push_back(i % 32);
    LatenessHistogram *h = fresh();
    for (uint64_t x : v) lateness_record(*h, x, 0);
    tl_lateness l;
    lateness_summary(*h, &l);
    std::sort(v.begin(), v.end());
    cr_assert(l.p50_ns == exact(v, 50, 100) && l.p90_ns == exact(v, 90, 100) &&
              l.p99_ns == exact(v, 99, 100) && l.p999_ns == exact(v, 999, 1000));
}

Test(lateness_histogram, percentiles_match_a_sort) {
    for (unsigned seed : {1u, 2u, 3u, 42u}) {
        std::mt19937_64 rng(seed);
        std::vector<uint64_t> v;
        /* Log-uniform from 1 ns to ~1 hour, as lateness spreads. */
        std::uniform_real_distribution<double> exp2(0, 42);
        for (int i = 0; i < 5000; ++i) v.push_back((uint64_t)std::exp2(exp2(rng)));
        check_against_sort(v);
    }
    check_against_sort({UINT64_MAX, 0, UINT64_MAX - 1, 1});
    check_against_sort({7});
}

Test(lateness_histogram, empty_is_all_zero) {
    LatenessHistogram *h = fresh();
    tl_lateness l;
    std::memset(&l, 0xff, sizeof l);
    lateness_summary(*h, &l);
    cr_assert(l.count == 0 && l.p50_ns == 0 && l.p90_ns == 0 && l.p99_ns == 0 && l.p999_ns == 0 &&
              l.max_ns == 0);
}
