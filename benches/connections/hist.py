# SPDX-License-Identifier: MIT
"""hist.py: the servers' latency histograms as conn_common.c prints them,
"count/max/i:c,i:c" (bucket i, count c; 8 buckets per power of two), for
run.py: parsed, subtracted, summed and read at a percentile."""

import math


def hist_parse(text):
    """'count/max/i:c,i:c' -> (count, max, {i: c})."""
    count, mx, rest = text.split("/", 2)
    buckets = {}
    for part in rest.split(","):
        if part:
            i, c = part.split(":")
            buckets[int(i)] = int(c)
    return int(count), int(mx), buckets


def bucket_upper(i):
    if i < 8:
        return i
    e = i // 8 + 2
    sub = i % 8
    return ((8 + sub) << (e - 3)) + (1 << (e - 3))


def hist_percentile(buckets, mx, q):
    total = sum(buckets.values())
    if total == 0:
        return 0
    want = math.ceil(q * total)
    seen = 0
    for i in sorted(buckets):
        seen += buckets[i]
        if seen >= want:
            return min(bucket_upper(i), mx)
    return mx


def hist_delta(a, b, key):
    ca, ma, ba = hist_parse(a[key])
    cb, mb, bb = hist_parse(b[key])
    d = {i: c - ba.get(i, 0) for i, c in bb.items() if c - ba.get(i, 0) > 0}
    return d, mb


def idle_histogram(fs):
    """The servers' idle-close lateness buckets, summed, and the largest."""
    idle = {}
    idle_max = 0
    for s in fs:
        _, mx, bk = hist_parse(s["idle_hist"])
        idle_max = max(idle_max, mx)
        for i, c in bk.items():
            idle[i] = idle.get(i, 0) + c
    return idle, idle_max
