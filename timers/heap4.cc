/* SPDX-License-Identifier: MIT */
/*
 * heap4: a 4-ary min-heap of timers (libev's "4-heap").
 *
 * A 4-ary heap is half as deep as a binary one, and a sift-down compares four
 * children per level. Those four are free if they share a cache line: with
 * 16-byte {deadline, timer*} entries and a 64-byte-aligned array, putting the
 * root at index 3 makes the children of node i start at 4(i - 3) + 4, a
 * multiple of four, so every sibling group is exactly one line (libev's
 * HEAP0 = DHEAP - 1 trick).
 */
#include "backend_glue.h"
#include "dary_heap.h"

namespace tl::detail {

const tl_timer_backend heap4_backend = make_backend<Heap4>("heap4");

const char *heap4_check(void *self) {
    return backend_check<Heap4>(self);
}

} // namespace tl::detail
