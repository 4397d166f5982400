/* SPDX-License-Identifier: MIT */
/*
 * heap2: a binary min-heap of timers (the structure libuv and libevent use),
 * with the cache-friendly layout of heap_array.h.
 *
 * Root at index 1 so that the two children of node i sit at 2i and 2i + 1:
 * with 16-byte entries and a 64-byte-aligned array, siblings always share a
 * cache line, and a sift-down touches one line per level.
 */
#include "backend_glue.h"
#include "dary_heap.h"

namespace tl::detail {

const tl_timer_backend heap2_backend = make_backend<Heap2>("heap2");

const char *heap2_check(void *self) {
    return backend_check<Heap2>(self);
}

} // namespace tl::detail
